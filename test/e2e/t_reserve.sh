#!/usr/bin/env bash
# t_reserve.sh - [iod] reserve: the space an iod keeps free is the
# configured one, in df and in what it admits.
#
# The cluster runs with reserve = 256M.  iods 1 and 2 (group 0) have data
# directories of 420 MB each, less a 64 MiB journal, so only some 40 MB of
# group 0 is writable (the default 64M would leave about 230 MB); group 1
# shares the host's file system.  Checks: twinfsctl df shows iod 3's available space as the
# host's less 256 MiB; a 16 MiB file fits in group 0, a 96 MiB one fails
# with ENOSPC (not EIO), the iod's log says why in numbers and the
# client's names the file by its path; a 96 MiB
# file in group 1 is written and reads back; the 16 MiB file is intact;
# verify is clean.
. "$(dirname "$0")/lib.sh"
export TWINFS_IOD_RESERVE=256M

e2e_before_up() {
	e2e_small_fs "$TWINFS_RUN_DIR/iod1" 420M &&
		e2e_small_fs "$TWINFS_RUN_DIR/iod2" 420M
}
e2e_begin reserve
e2e_tmpdir T

check reserve-in-config grep -q '^reserve = 256M$' "$TWINFS_RUN_DIR/twinfs.conf"

# twinfsctl df's line of iod 3, in KiB: "iod 3 (group 1)  SIZE USED AVAIL".
sleep 1.2   # mgrd caches statfs for a second
ctl df >"$T/df.out" 2>&1
iod3_kb=$(awk '$1 == "iod" && $2 == 3 { print $(NF - 2); exit }' "$T/df.out")
host_kb=$(df -k --output=avail "$TWINFS_RUN_DIR/iod3" | tail -1 | tr -d ' ')
want_kb=$((host_kb - (256 << 10)))
echo "# iod 3 available: $iod3_kb KiB; host's less 256 MiB: $want_kb KiB"
sed 's/^/#   /' "$T/df.out"
check reserve-df-iod3 test "${iod3_kb:-0}" -le $((want_kb + 16384)) \
	-a "${iod3_kb:-0}" -ge $((want_kb - 65536))

mkdir "$M/g0" "$M/g1" &&
	setfattr -n twinfs.layout -v "512K 1 0" "$M/g0" &&
	setfattr -n twinfs.layout -v "512K 1 1" "$M/g1" ||
	fail reserve-layouts "mkdir or setfattr failed"

# put SRC DST: copy with an fsync; prints "ok" or the errno's name.
put() {
	"$PY" - "$1" "$2" <<'EOF'
import errno, os, sys
data = open(sys.argv[1], "rb").read()
try:
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for k in range(0, len(data), 1 << 20):
        os.write(fd, data[k:k + (1 << 20)])
    os.fsync(fd)
    os.close(fd)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
EOF
}
head -c $((16 << 20)) /dev/urandom >"$T/small"
head -c $((96 << 20)) /dev/urandom >"$T/big"
assert_eq reserve-small-fits ok "$(put "$T/small" "$M/g0/small")"
assert_eq reserve-big-enospc ENOSPC "$(put "$T/big" "$M/g0/big")"
check reserve-logged-why grep -qE 'No space left on device \([0-9]+ MiB free in .*: 256 MiB kept in reserve \(\[iod\] reserve\), [0-9]+ MiB of journaled data not yet home\)' \
	"$TWINFS_RUN_DIR/logs/iod1.log" "$TWINFS_RUN_DIR/logs/iod2.log"
# The client's line names the file by its path, the iod and the cause.
check reserve-client-names-file grep -qE \
	'write /g0/big \(ino [0-9]+\): iod [12] \(.*\) failed: No space left on device' \
	"$TWINFS_RUN_DIR/logs/mount.log"
rm -f "$M/g0/big"
assert_eq reserve-big-in-group1 ok "$(put "$T/big" "$M/g1/big")"
ctl sync >/dev/null
drop_caches
assert_same_file reserve-small-bytes "$T/small" "$M/g0/small"
assert_same_file reserve-big-bytes "$T/big" "$M/g1/big"
# A refused write leaves its twin to resync (it may have applied it).
for i in 1 2; do
	st=$(iod_state "$i")
	if [[ $st == resyncing* ]]; then
		wait_state "$i" '^up$' 60000 >/dev/null
	fi
done
e2e_verify
e2e_end
