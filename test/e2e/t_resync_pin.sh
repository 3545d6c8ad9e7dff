#!/usr/bin/env bash
# t_resync_pin.sh - a write its twin refuses while resyncing, before the
# copy's cursor, is carried by the resumed copy.
#
# A resync that fails is resumed from the cursor mgrd journaled: every
# subfile before it is skipped.  A live write that reaches the source but
# not the resyncing target (the forward is refused) is pinned in the
# source's write-intent log, and the target stays resyncing, so mgrd does
# not ask for the marks before the cursor to be replayed.  The source must
# replay them on its own (iod/resync.c), also after a restart of its own
# (the flag twinfs-replay-owed in its data directory), and until a run
# completes, or the region stays different on the twins after the resync
# says "done".
#
# How the case is made: iod 2's disk is small.  f000 is written with both
# twins up; while iod 2 is down, eight more files are written, more than
# its disk can take.  A rate-limited rebuild copies them until iod 2's
# disk is full: the run fails, and its cursor lies past f000.  Then f000
# is overwritten: iod 1 applies it, iod 2 refuses it for space.  Then
# iod 1 is killed (-9) and started again; rm gives the space back, the
# rebuild resumes and completes; the twins must agree and f000 must hold
# the new bytes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false

e2e_before_up() {
	e2e_small_fs "$TWINFS_RUN_DIR/iod2" 200M
}
e2e_begin resync_pin
export TWINFS_PIN_DIR=$M

# put.py I [I...]: write fNNN, 16 MiB from its number, and fsync it.
# get.py I NEW: "old", "new" (8 MiB from offset 0 replaced) or "neither".
cat >"$TWINFS_RUN_DIR/put.py" <<'EOF'
import os, random, sys
for a in sys.argv[1:]:
    i = int(a)
    p = os.path.join(os.environ['TWINFS_PIN_DIR'], 'f%03d' % i)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, random.Random(i).randbytes(1 << 20) * 16)
    os.fsync(fd)
    os.close(fd)
EOF
cat >"$TWINFS_RUN_DIR/get.py" <<'EOF'
import os, random, sys
i = int(sys.argv[1])
old = random.Random(i).randbytes(1 << 20) * 16
new = random.Random(-1).randbytes(8 << 20) + old[8 << 20:]
with open(os.path.join(os.environ['TWINFS_PIN_DIR'], 'f%03d' % i), 'rb') as f:
    got = f.read()
print('old' if got == old else 'new' if got == new else 'neither')
EOF
cat >"$TWINFS_RUN_DIR/overwrite.py" <<'EOF'
import errno, os, random
p = os.path.join(os.environ['TWINFS_PIN_DIR'], 'f000')
fd = os.open(p, os.O_WRONLY)
try:
    os.pwrite(fd, random.Random(-1).randbytes(8 << 20), 0)
    os.fsync(fd)
    print('ok')
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
EOF

"$PY" "$TWINFS_RUN_DIR/put.py" 0
ino0=$(stat -c %i "$M/f000")
lc kill-iod 2 >/dev/null
out=$(wait_state 2 '^down' 10000) && pass pin-iod2-down || fail pin-iod2-down "$out"
# 8 x 8 MiB for group 0: iod 2's disk holds about half of that above its
# reserve and journal (t_enospc: four such halves fit).
"$PY" "$TWINFS_RUN_DIR/put.py" 1 2 3 4 5 6 7 8 &&
	pass pin-written-alone || fail pin-written-alone "put.py failed"
lc start-iod 2 >/dev/null
out=$(wait_state 2 '^resyncing' 10000) && pass pin-resyncing || fail pin-resyncing "$out"

# About 5 s until the disk is full: mgrd journals the cursor every 0.5 s.
log1=$TWINFS_RUN_DIR/logs/iod1.log
ctl rebuild 2 --rate-limit 6 >/dev/null || fail pin-rebuild "rebuild refused"
t0=$(now_ms)
until grep -q 'resync of iod 2 resumes after ino' "$log1"; do
	(($(now_ms) - t0 > 60000)) && break
	sleep 0.2
done
# The newest resume's cursor: past f000, so a resume skips f000.
cur=$(grep -o 'resync of iod 2 resumes after ino [0-9]*' "$log1" | tail -1 |
	awk '{ print $NF }')
echo "# f000 is ino $ino0; the copy resumes after ino ${cur:-none}"
check pin-cursor-past-f000 test "${cur:-0}" -gt "$ino0"
grep -q 'resync of iod 2: WRITE .* at the target: No space left on device' "$log1" &&
	pass pin-copy-fails-for-space ||
	fail pin-copy-fails-for-space "no such failure in iod 1's log"

# The overwrite: iod 1 applies it, iod 2 refuses it for space.
n0=$(grep -c 'twin iod 2 refused it: No space left on device' "$log1" || true)
ow=$("$PY" "$TWINFS_RUN_DIR/overwrite.py")
n1=$(grep -c 'twin iod 2 refused it: No space left on device' "$log1" || true)
echo "# overwrite of f000's first 8 MiB while iod 2 is full: $ow"
assert_eq pin-overwrite-enospc ENOSPC "$ow"
check pin-twin-refused test "$n1" -gt "$n0"

check pin-replay-owed-recorded test -e "$TWINFS_RUN_DIR/iod1/twinfs-replay-owed"

# The source restarts: what it owes must outlive it.
nl1=$(wc -l <"$log1")
lc kill-iod 1 >/dev/null
out=$(wait_state 1 '^down' 10000) && pass pin-source-down || fail pin-source-down "$out"
lc start-iod 1 >/dev/null
t=$(wait_state 1 '^up$' 30000) && pass pin-source-up-again || fail pin-source-up-again "iod 1: $t"
# It forwarded a live write to its resyncing twin, then died: it says so.
tail -n +"$((nl1 + 1))" "$log1" |
	grep -q 'may have stopped with a write to its resyncing twin unanswered' &&
	pass pin-live-write-noted || fail pin-live-write-noted "not in iod 1's log"

# rm gives iod 2 its space back; the admin's rebuild resumes at once.
rm -f "$M"/f00[1-8]
t0=$(now_ms)
until [[ -z $(find "$TWINFS_RUN_DIR/iod2/subfiles" -type f \
	! -name "$(printf '%016x' "$ino0").*" -print -quit) ]]; do
	(($(now_ms) - t0 > 30000)) && break
	sleep 0.2
done
# No `rebuild` now: one that finds iod 2 up would copy it again in full,
# which hides the hole.  The admin's job retries on its own (back-off).
t=$(wait_state 2 '^up$' 60000) && pass pin-twin-up || fail pin-twin-up "iod 2: $t"
grep -q 'rebuild of a live twin' "$TWINFS_RUN_DIR/logs/mgrd.log" &&
	fail pin-no-full-copy "a rebuild of the live twin ran (the test is void)" ||
	pass pin-no-full-copy
tail -n +"$((nl1 + 1))" "$log1" |
	grep -q 'resync of iod 2: writes of ours did not reach it since the last completed run: replaying the marks before the cursor' &&
	pass pin-marks-replayed ||
	fail pin-marks-replayed "iod 1, restarted, did not replay its marks before the cursor"
check pin-replay-owed-cleared test ! -e "$TWINFS_RUN_DIR/iod1/twinfs-replay-owed"

# The twins agree, and f000 holds what iod 1 applied, through either twin.
e2e_verify
drop_caches
assert_eq pin-f000-new new "$("$PY" "$TWINFS_RUN_DIR/get.py" 0)"
lc kill-iod 1 >/dev/null
out=$(wait_state 1 '^down' 10000) && pass pin-iod1-down || fail pin-iod1-down "$out"
drop_caches
assert_eq pin-f000-new-on-iod2 new "$("$PY" "$TWINFS_RUN_DIR/get.py" 0)"
lc start-iod 1 >/dev/null
wait_state 1 '^resyncing' 10000 >/dev/null && ctl rebuild 1 >/dev/null
t=$(wait_state 1 '^up$' 60000) && pass pin-iod1-back || fail pin-iod1-back "iod 1: $t"
e2e_end
