#!/usr/bin/env bash
# t_resync_whole.sh - a truncate the resyncing twin refuses, of a file the
# copy has passed, is carried by the next run: that file goes whole, and a
# source killed in the middle of that copy leaves the target's file whole.
#
# A rate-limited full rebuild of iod 2 copies two files of group 0 from
# iod 1: "a" (12 MiB) and then "f" (24 MiB).  Once the copy is inside "f",
# iod 2 is made to refuse the next forwarded TRUNCATE (the resync's own,
# at the end of "f", is seconds away) (TWINFS_TEST_FAULTS=1,
# TWINFS_TEST_REFUSE=truncate, SIGUSR2; iod/main.c) and "a" is cut to
# 8 MiB: iod 1 applies it and pins all of "a" (twin.c pin_missed), iod 2
# keeps 12 MiB.  The run ends "not done" (-EBUSY) and the next, resuming
# after "f", must send "a" whole although it lies before the cursor
# (resync.c plan_subfile: cur_whole), without deleting it at the target
# first.  Half a second into that copy (of two) iod 1 is killed -9 and
# started again: the pin is gone with it, and the run after that replays only the
# truncate's marks (regions 8-11), which send the size.  Had the whole
# copy deleted "a" first, the target would now lack the MiBs not yet sent
# again (125aeee).  Checks: the messages, verify, and both files read the
# same through either twin, "a" as the first 8 MiB of what was written.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_TEST_FAULTS=1 TWINFS_TEST_REFUSE=truncate TWINFS_AUTO_RESYNC=false
export TWINFS_COMMIT_INTERVAL=1s     # write-intent clearing cycle
e2e_begin resync_whole
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((12 << 20)) /dev/urandom >"$T/a"
head -c $((24 << 20)) /dev/urandom >"$T/f"
cp "$T/a" "$M/g0/a"          # created first: copied first (ino order)
cp "$T/f" "$M/g0/f"
sync
check whole-sync ctl sync
sleep 3                      # a clearing cycle clears the cp's marks
ino=$(stat -c %i "$M/g0/a")
log1=$TWINFS_RUN_DIR/logs/iod1.log
log2=$TWINFS_RUN_DIR/logs/iod2.log

# 36 MiB at 4 MB/s; the copy is inside "f", past 13 MiB.
slow_rebuild whole $((13 << 20))
done_at=$(rjob 2 bytes_done)
echo "# the copy has passed $done_at bytes of $((36 << 20)) when the fault is armed"
check whole-copy-past-a test "${done_at:-0}" -ge $((13 << 20)) -a "${done_at:-0}" -lt $((32 << 20))
check whole-fault-armed signal_iod 2 USR2 'forwarded TRUNCATE is refused with ENOSPC' 10000
n1=$(wc -l <"$log1")
truncate -s 8M "$M/g0/a" 2>"$T/trunc.err"
echo "# truncate: exit $?, $(cat "$T/trunc.err")"
check whole-iod2-refused grep -q "forwarded TRUNCATE ino $ino column 0 refused with ENOSPC" "$log2"
check whole-iod1-applied grep -q "TRUNCATE ino $ino column 0: twin iod 2 refused it" "$log1"
# mgrd names the iod that refused, not only the primary that answered.
check whole-mgrd-names-iod2 grep -q "mgrd: truncate ino $ino column 0: iod 2 (twin of iod 1): No space left on device" "$TWINFS_RUN_DIR/logs/mgrd.log"

# The next run sends "a" whole: catch it in the middle (8 MiB at 4 MB/s).
check whole-run-not-done wait_log "$log1" "$n1" 'resync of iod 2: a live write did not reach the target during the copy' 30000
check whole-goes-whole wait_log "$log1" "$n1" "resync of iod 2: ino $ino column 0 lies before the cursor and is marked whole" 30000
sleep 0.5
n_done=$(grep -c 'resync of iod 2 done' "$log1")
# Its progress so far (reported every 0.5 s): "a" is 8 MiB now.
in_a=$(rjob 2 bytes_done)
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass whole-source-down || fail whole-source-down "$out"
assert_eq whole-killed-mid-copy 0 "$n_done"
echo "# the whole copy had sent ${in_a:-?} bytes when iod 1 was killed"
check whole-killed-inside-a test "${in_a:-99999999999}" -lt $((8 << 20))
(cd / && lc start-iod 1 >/dev/null)
t=$(wait_state 1 '^up$' 60000) && pass whole-source-up || fail whole-source-up "iod 1: $t"
wait_state 2 '^resyncing' 5000 >/dev/null || ctl rebuild 2 >/dev/null
t=$(wait_state 2 '^up$' 120000) && pass whole-twin-up || fail whole-twin-up "iod 2: $t"
grep 'resync of iod 2' "$log1" | cut -c 1-300 | sed "s/^/#   /"
e2e_verify

# Both files read the same through either twin; "a" is its first 8 MiB
# (mgrd may keep the old size if the truncate failed: zeros past 8 MiB).
cmp_files() {
	"$PY" - "$M/g0" "$T" <<'EOF'
import sys
m, t = sys.argv[1], sys.argv[2]
a = open(m + "/a", "rb").read()
orig = open(t + "/a", "rb").read()
cut = 8 << 20
ok_a = a[:cut] == orig[:cut] and a[cut:] == bytes(len(a) - cut)
ok_f = open(m + "/f", "rb").read() == open(t + "/f", "rb").read()
print("a=%d %s f %s" % (len(a), "right" if ok_a else "wrong",
                        "right" if ok_f else "wrong"))
EOF
}
read_via_each_twin whole cmp_files
echo "# through both twins: $BOTH"
[[ $BOTH == a=*" right f right" ]] && pass whole-bytes-right ||
	fail whole-bytes-right "$BOTH"
e2e_end
