#!/usr/bin/env bash
# t_lost.sh - a subfile whose journaled writes cannot be brought home (its
# home file made immutable on one twin: EPERM, an error of that file, not
# of the disk) costs that subfile on that twin, not the iod: replay after
# kill -9 (or a checkpoint before it) sets it aside instead of refusing
# to start, the iod answers EIO for it rather than old bytes, the file is
# served by the twin, mgrd rebuilds the iod from its twin, and both twins
# end identical.
#
# Then the way out for a journal that cannot be replayed at all (every
# home write of the replay fails with EIO: TWINFS_TEST_REPLAY_EIO): the
# iod refuses to start and says what to run; started with
# --quarantine-journal it keeps the journal aside, comes back as a new
# disk and is rebuilt in full from its twin, and no acknowledged byte is
# lost.
. "$(dirname "$0")/lib.sh"
e2e_begin lost
e2e_tmpdir T

# One column, in group 0 (iods 1 and 2), so the drill knows both twins.
mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((1 << 20)) /dev/urandom >"$T/old"
head -c $((1 << 20)) /dev/urandom >"$T/new"
cp "$T/old" "$M/g0/f" && sync "$M/g0/f"
ctl sync >/dev/null
ino=$(stat -c %i "$M/g0/f")

# kill -9 and restart iod 1: its replay puts the file home (and it
# rejoins); then make that home file immutable, so the next journaled
# write of it cannot be brought home.
cd /
iod_restart 1 || fail lost-rejoin "iod 1 did not register again"
out=$(wait_state 1 '^up$' 60000) || fail lost-rejoin "iod 1: $out"
sub=$(find "$TWINFS_RUN_DIR/iod1/subfiles" -name "$(printf %016x "$ino").0" | head -n 1)
[[ -n $sub ]] && pass lost-subfile-found || { fail lost-subfile-found "no $ino.0 under iod1"; e2e_end; }
if ! chattr +i "$sub" 2>/dev/null; then
	echo "# chattr +i is not supported here: skipped"
	e2e_end
fi

# An acknowledged overwrite, journaled on both twins, then iod 1 dies,
# almost always before its checkpoint: its replay meets EPERM.  A
# checkpoint may run first (one due to give back the space of a cut, such
# as the rejoin's, takes every synced transaction with it): it meets EPERM
# and sets the subfile aside the same way, so the lost line is looked for
# from before the write.
lines=$(wc -l <"$TWINFS_RUN_DIR/logs/iod1.log")
dd if="$T/new" of="$M/g0/f" bs=1M conv=notrunc,fsync status=none
ctl sync >/dev/null
lc kill-iod 1 >/dev/null
if lc start-iod 1 >/dev/null 2>&1; then pass lost-iod-starts; else fail lost-iod-starts "iod 1 refused to start"; fi
wait_log "$TWINFS_RUN_DIR/logs/iod1.log" "$lines" "ino $ino column 0) cannot be brought home: Operation not permitted" 10000 &&
	pass lost-logged || fail lost-logged "no lost line in iod 1's log"
[[ -s $TWINFS_RUN_DIR/iod1/twinfs-lost ]] && pass lost-recorded || fail lost-recorded "no twinfs-lost"

# The operator clears the drill's cause at once (the full copy deletes
# and recopies the file, which ends its lost state); iod 1 still holds
# the file as lost, so reads come from iod 2, and are the new bytes.
chattr -i "$sub"
drop_caches
assert_eq lost-read-served-by-twin "$(sha "$T/new")" "$(sha "$M/g0/f")"
wait_log "$TWINFS_RUN_DIR/logs/mgrd.log" 0 "iod 1 holds /g0/f (ino $ino column 0) as lost" 10000 &&
	pass lost-mgrd-told || fail lost-mgrd-told "no report in mgrd's log"
out=$(wait_state 1 '^up$' 60000) && pass lost-rebuilt || fail lost-rebuilt "iod 1: $out"
[[ ! -e $TWINFS_RUN_DIR/iod1/twinfs-lost ]] && pass lost-cleared || fail lost-cleared "twinfs-lost still there"
ctl rebuild --status 1 2>/dev/null | grep -q "full" && pass lost-rebuild-full ||
	fail lost-rebuild-full "$(ctl rebuild --status 1 2>&1 | tr '\n' ' ')"
e2e_verify
# Both twins serve the new bytes: iod 2 down, the read comes from iod 1.
lc kill-iod 2 >/dev/null
wait_state 2 '^down' 10000 >/dev/null
drop_caches
assert_eq lost-read-via-iod1 "$(sha "$T/new")" "$(sha "$M/g0/f")"
lc start-iod 2 >/dev/null
wait_state 2 '^up$' 60000 >/dev/null

# --- a journal that cannot be replayed: iod 2 dies with q in its log
head -c $((2 << 20)) /dev/urandom >"$T/q"
cp "$T/q" "$M/g0/q" && sync "$M/g0/q"
ctl sync >/dev/null
lc kill-iod 2 >/dev/null
lines=$(wc -l <"$TWINFS_RUN_DIR/logs/iod2.log")
TWINFS_TEST_FAULTS=1 TWINFS_TEST_REPLAY_EIO=1 lc start-iod 2 >/dev/null 2>&1
wait_log "$TWINFS_RUN_DIR/logs/iod2.log" "$lines" "cannot use data directory.*start it once with --quarantine-journal" 10000 &&
	pass quarantine-refused-with-hint || fail quarantine-refused-with-hint "no refusal naming --quarantine-journal"
for _ in $(seq 50); do [[ -n $(lc status 2>/dev/null | grep -E '^ *iod2 .*running') ]] || break; sleep 0.1; done
lines=$(wc -l <"$TWINFS_RUN_DIR/logs/iod2.log")
lc start-iod 2 --quarantine-journal >/dev/null
wait_log "$TWINFS_RUN_DIR/logs/iod2.log" "$lines" "journal QUARANTINED" 10000 &&
	pass quarantine-started || fail quarantine-started "iod 2 did not say it quarantined"
kept=$(ls "$TWINFS_RUN_DIR"/iod2/journal.quarantined-* 2>/dev/null | head -n 1)
[[ -s $kept ]] && pass quarantine-journal-kept || fail quarantine-journal-kept "no journal.quarantined-* in iod2"
out=$(wait_state 2 '^up$' 60000) && pass quarantine-rebuilt || fail quarantine-rebuilt "iod 2: $out"
grep -q "iod 2 registers with a new, empty data directory" "$TWINFS_RUN_DIR/logs/mgrd.log" &&
	pass quarantine-full-rebuild || fail quarantine-full-rebuild "mgrd did not rebuild iod 2 in full"
e2e_verify
lc kill-iod 1 >/dev/null
wait_state 1 '^down' 10000 >/dev/null
drop_caches
assert_eq quarantine-read-via-iod2 "$(sha "$T/q")" "$(sha "$M/g0/q")"
assert_eq quarantine-old-file-via-iod2 "$(sha "$T/new")" "$(sha "$M/g0/f")"
lc start-iod 1 >/dev/null
wait_state 1 '^up$' 60000 >/dev/null
e2e_end
