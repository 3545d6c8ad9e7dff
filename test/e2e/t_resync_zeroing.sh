#!/usr/bin/env bash
# t_resync_zeroing.sh - a full copy resumed inside the subfile a failed run
# left half copied sends a zeroing the target refused past the cursor.
#
# A resumed full copy does not delete that subfile first, and copies it
# from the cursor on sparsely: a chunk that reads as zeros is not sent.
# So a zeroing the target missed past the cursor would never reach it,
# and it would keep the older bytes (resync.c keep_run, 7dcf074).
#
# A rate-limited full rebuild of iod 2 copies a 40 MiB file from iod 1.
# Before the copy reaches 36 MiB: 0xAA is written at 36 MiB (both twins
# apply it), then iod 2 is made to refuse the next forwarded client write
# (TWINFS_TEST_FAULTS=1 and SIGUSR2) and that MiB is written with zeros:
# iod 1 applies it, iod 2 refuses it, the writer gets ENOSPC.  iod 2 is
# killed (the run fails there, its cursor before 36 MiB) and started
# again once the source has stopped that run; the resumed run must send
# that MiB.  Checks: the run resumed inside the file before 36 MiB,
# verify is clean, and the MiB holds zeros or 0xAA, the same through
# either twin, with the rest of the file intact.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_TEST_FAULTS=1
e2e_begin resync_zeroing
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((40 << 20)) /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"
ctl sync >/dev/null
log1=$TWINFS_RUN_DIR/logs/iod1.log

# pwrite_mib BYTE: one MiB of BYTE at 36 MiB, O_DIRECT (dwrite.py).
pwrite_mib() {
	"$PY" "$E2E_DIR/dwrite.py" "$M/g0/f" $((36 << 20)) $((1 << 20)) "$1"
}

# 40 MiB at 4 MB/s: about 10 s of copy.
slow_rebuild zeroing $((2 << 20))
assert_eq zeroing-aa-written written "$(pwrite_mib 170)"
check zeroing-fault-armed signal_iod 2 USR2 'SIGUSR2 with TWINFS_TEST_FAULTS=1' 10000
assert_eq zeroing-zeros-refused "error 28" "$(pwrite_mib 0)"
n1=$(wc -l <"$log1")
(cd / && lc kill-iod 2 >/dev/null)
out=$(wait_state 2 '^down' 10000) && pass zeroing-target-down || fail zeroing-target-down "$out"
# The source must see its run fail before iod 2 is back (a quick restart
# can let the run go on over the new connection, to the file's end).
check zeroing-run-failed wait_log "$log1" "$n1" 'resync of iod 2: .*stopping' 20000
(cd / && lc start-iod 2 >/dev/null)
out=$(wait_state 2 '^resyncing' 10000) || ctl rebuild 2 >/dev/null
t=$(wait_state 2 '^up$' 120000) && pass zeroing-twin-up || fail zeroing-twin-up "iod 2: $t"
grep 'resync of iod 2' "$log1" | cut -c 1-300 | sed "s/^/#   /"
# The resumed run started inside the file, before the zeroed MiB: the
# case this drill is about.
at=$(sed -n 's/.*resync of iod 2 resumes after ino [0-9]* column 0 offset \([0-9]*\);.*/\1/p' \
	"$log1" | head -n 1)
echo "# the first resumed run started at offset ${at:-?}"
check zeroing-resumed-before-the-mib test "${at:-99999999999}" -lt $((36 << 20))
# ... and sent the rest of the file once: the region goes whole within
# the copy, not again beside it.
sent=$(grep -o 'resync of iod 2 done (full): .* bytes sent' "$log1" | tail -n 1 |
	awk '{ print $(NF - 2) }')
echo "# the run that completed sent ${sent:-?} bytes"
check zeroing-sent-once test "${sent:-99999999999}" -le $((40 << 20))
e2e_verify

# The MiB holds zeros or 0xAA, the same through either twin.
cmp_file() {
	"$PY" - "$M/g0/f" "$T/f" <<'EOF'
import sys
got = open(sys.argv[1], "rb").read()
orig = open(sys.argv[2], "rb").read()
a, b = 36 << 20, 37 << 20
if len(got) != len(orig) or got[:a] != orig[:a] or got[b:] != orig[b:]:
    print("other bytes")
elif got[a:b] == b"\xaa" * (1 << 20):
    print("aa")
elif got[a:b] == bytes(1 << 20):
    print("zeros")
else:
    print("other bytes")
EOF
}
read_via_each_twin zeroing cmp_file
echo "# the MiB at 36 MiB through both twins: $BOTH"
check zeroing-bytes-aa-or-zeros test "$BOTH" = aa -o "$BOTH" = zeros
e2e_end
