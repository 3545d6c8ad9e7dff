#!/usr/bin/env bash
# t_resync_busy.sh - a live write the resyncing twin refuses while the copy
# runs makes that run end "not done" (-EBUSY), and the next run, resuming,
# carries the write: the twins agree when the resync says done.
#
# An admin's rebuild of iod 2 (full, rate-limited, both twins up) copies a
# file of group 0 from iod 1.  Once the copy has passed the file's first
# MiB, iod 2 is made to refuse the next client write forwarded to it
# (TWINFS_TEST_FAULTS=1 and SIGUSR2, iod/main.c, as a full disk would), and
# the first MiB is overwritten: iod 1 applies it, iod 2 refuses it, the
# writer gets ENOSPC.  The run must not report done (the region lies
# before its position); mgrd must say why and copy again, resuming, not
# from zero and not full for that reason; the source must send the pinned
# region again, and only that (its marks cover the whole file).  Checks: the messages of iod 1, iod 2 and mgrd; the
# job record's last error as `rebuild --status` shows it; verify; the file
# reads the same through either twin, old or new bytes in the written MiB.
# Then a clean stop of the source during a copy leaves nothing owed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_TEST_FAULTS=1 TWINFS_AUTO_RESYNC=false
e2e_begin resync_busy
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((24 << 20)) /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"
ctl sync >/dev/null
ino=$(stat -c %i "$M/g0/f")
log1=$TWINFS_RUN_DIR/logs/iod1.log
log2=$TWINFS_RUN_DIR/logs/iod2.log
logm=$TWINFS_RUN_DIR/logs/mgrd.log

# 24 MiB at 4 MB/s: about 6 s of copy.
slow_rebuild busy $((3 << 20))
done_at=$(rjob 2 bytes_done)
echo "# the copy has passed $done_at bytes of $((24 << 20)) when the fault is armed"
check busy-copy-past-first-mib test "${done_at:-0}" -ge $((3 << 20))

check busy-fault-armed signal_iod 2 USR2 'SIGUSR2 with TWINFS_TEST_FAULTS=1' 10000
"$PY" "$E2E_DIR/dwrite.py" "$M/g0/f" 0 $((1 << 20)) 238 >"$T/w.out" 2>&1
assert_eq busy-write-refused "error 28" "$(tail -n 1 "$T/w.out")"
check busy-iod2-refused grep -q "forwarded WRITE ino $ino column 0 refused with ENOSPC" "$log2"
check busy-iod1-applied grep -q "ino $ino column 0: twin iod 2 refused it: No space left on device" "$log1"

t=$(wait_state 2 '^up$' 90000) && pass busy-twin-up || fail busy-twin-up "iod 2: $t"
check busy-run-not-done grep -q 'resync of iod 2: a live write did not reach the target during the copy' "$log1"
check busy-mgrd-copies-again grep -q 'resync of iod 2 from iod 1: a live write did not reach iod 2 during the copy; copying again in' "$logm"
check busy-resumed grep -q 'resync of iod 2 resumes after ino' "$log1"
check busy-pins-replayed grep -q 'resync of iod 2: writes of ours did not reach it since the last completed run: replaying the regions it missed (pinned) before the cursor' "$log1"
# Only the pinned 1 MiB region is sent again, not every region written
# since the rebuild began (all 24 are marked).
sent=$(grep -o 'resync of iod 2 done (full): .* bytes sent' "$log1" | tail -n 1 |
	awk '{ print $(NF - 2) }')
echo "# the run that completed sent ${sent:-?} bytes"
check busy-replay-sends-the-pin test "${sent:-0}" -ge $((1 << 20)) -a "${sent:-0}" -le $((2 << 20))
ctl rebuild --status 2 >"$T/st.out" 2>&1
check busy-status-says-why grep -q 'last: a live write did not reach the target during the copy' "$T/st.out"
sed 's/^/#   /' "$T/st.out"

e2e_verify
# The written MiB holds the old or the new bytes, the same through either
# twin, and the rest of the file is untouched.
cmp_file() {
	"$PY" - "$M/g0/f" "$T/f" <<'EOF'
import sys
got = open(sys.argv[1], "rb").read()
orig = open(sys.argv[2], "rb").read()
m = 1 << 20
if len(got) != len(orig) or got[m:] != orig[m:]:
    print("other bytes")
elif got[:m] == orig[:m]:
    print("old")
elif got[:m] == b"\xee" * m:
    print("new")
else:
    print("other bytes")
EOF
}
read_via_each_twin busy cmp_file
echo "# the first MiB through both twins: $BOTH"
check busy-bytes-old-or-new test "$BOTH" = old -o "$BOTH" = new

# A clean stop of the source while it copies, after a live write that
# reached the target: nothing is owed, so the flag that such a write may
# have died unanswered (twinfs-resync-live) goes with the stop, and the
# next start does not replay for it.
cp "$M/g0/f" "$T/f"   # checked above: the same through either twin
ctl rebuild 2 --full --rate-limit 4 >"$T/rb.out" 2>&1 ||
	fail busy-clean-rebuild "$(cat "$T/rb.out")"
out=$(wait_state 2 '^resyncing' 10000) || fail busy-clean-resyncing "$out"
head -c $((1 << 20)) /dev/urandom >"$T/mib"
dd if="$T/mib" of="$M/g0/f" bs=1M seek=2 conv=notrunc,fsync status=none &&
	dd if="$T/mib" of="$T/f" bs=1M seek=2 conv=notrunc status=none &&
	pass busy-clean-live-write || fail busy-clean-live-write "dd failed"
check busy-clean-live-noted test -e "$TWINFS_RUN_DIR/iod1/twinfs-resync-live"
nl1=$(wc -l <"$log1")
check busy-clean-stopped signal_iod 1 TERM 'iod 1: stopped' 20000
check busy-clean-flag-gone test ! -e "$TWINFS_RUN_DIR/iod1/twinfs-resync-live"
check busy-clean-nothing-owed test ! -e "$TWINFS_RUN_DIR/iod1/twinfs-replay-owed"
lc start-iod 1 >/dev/null
t=$(wait_state 2 '^up$' 90000) && pass busy-clean-twin-up || fail busy-clean-twin-up "iod 2: $t"
if tail -n +"$((nl1 + 1))" "$log1" | grep -q 'may have stopped with a write'; then
	fail busy-clean-no-replay "iod 1 thinks a write may have died unanswered"
else
	pass busy-clean-no-replay
fi
t=$(wait_state 1 '^up$' 30000) || { ctl rebuild 1 >/dev/null; t=$(wait_state 1 '^up$' 60000); } &&
	pass busy-clean-iod1-up || fail busy-clean-iod1-up "iod 1: $t"
e2e_verify busy-clean-verify
drop_caches
assert_same_file busy-clean-bytes "$T/f" "$M/g0/f"
e2e_end
