#!/usr/bin/env bash
# resync.sh - resync costs (README.md here, "`resync.sh`"), on a private
# local cluster, data on twin group 0 only:
#   1. full rebuild: iod 1's data directory is wiped and iod 1 started; time
#      from start-iod to a healthy status, and the source's own figure from
#      its log; compared with plain `cp -r` (+ sync) of iod 2's subfiles on
#      the same disk;
#   2. resync after an outage: iod 1 is killed, a writer appends 1 MiB
#      blocks for OUTAGE seconds, iod 1 is started; time to healthy.  The
#      resync is incremental (iod/resync.c): it copies the 1 MiB regions
#      the twins' write-intent logs mark, so it grows with the data written
#      during the outage, plus any region still marked from before it (a
#      mark is cleared by the next clearing cycle, every commit_interval,
#      once both twins have synced it).
#
#   test/bench/resync.sh [-m MIB] [-o OUTAGE_S]   # as root
# Environment: TWINFS_PORT (default 20560), TWINFS_BUILD_DIR,
# TWINFS_JOURNAL_SIZE (default 256M).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
MIB=512
OUTAGE=10
while getopts "m:o:h" o; do
	case $o in
	m) MIB=$OPTARG ;;
	o) OUTAGE=$OPTARG ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
export TWINFS_PORT=${TWINFS_PORT:-20560}
export TWINFS_RUN_DIR=${TWINFS_RUN_DIR:-/var/tmp/twinfs-bench-resync}
export TWINFS_MOUNT=$TWINFS_RUN_DIR/mnt
export TWINFS_CLUSTER=bench-resync
export TWINFS_REQUEST_TIMEOUT=${TWINFS_REQUEST_TIMEOUT:-2s}
export TWINFS_MONITOR_INTERVAL=${TWINFS_MONITOR_INTERVAL:-500ms}
export TWINFS_MOUNT_OPTS=allow_other,monitor_interval=500
export TWINFS_JOURNAL_SIZE=${TWINFS_JOURNAL_SIZE:-256M}
export TWINFS_NO_APT=1
M=$TWINFS_MOUNT

now_ms() { date +%s%3N; }
lc() { (cd / && "$LC" "$@"); }
cleanup() { lc down >/dev/null 2>&1 || true; rm -rf "$TWINFS_RUN_DIR"; }
trap cleanup EXIT
wait_healthy() {
	local i
	for ((i = 0; i < 3000; i++)); do
		lc ctl -t 1000 status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "not healthy after 300 s" >&2
	return 1
}
wait_down() {
	local i
	for ((i = 0; i < 200; i++)); do
		lc ctl -t 1000 status 2>/dev/null | awk '$1 == 1 { print $5 }' | grep -q '^down' && return 0
		sleep 0.05
	done
}
source_line() {
	grep -h "resync of iod 1 done" "$TWINFS_RUN_DIR"/logs/*.log | tail -n 1 | sed 's/.*INFO //'
}

cleanup
lc up >/dev/null
mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
dd if=/dev/urandom of="$M/g0/data" bs=1M count="$MIB" status=none
lc ctl sync >/dev/null
sync

# Baseline: plain cp of the same subfiles on this disk.
t0=$(now_ms)
cp -r "$TWINFS_RUN_DIR/iod2/subfiles" "$TWINFS_RUN_DIR/cp-copy" && sync
cp_ms=$(($(now_ms) - t0))
rm -rf "$TWINFS_RUN_DIR/cp-copy"

# 1. Full rebuild of a wiped directory.
lc kill-iod 1 >/dev/null
wait_down
rm -rf "$TWINFS_RUN_DIR/iod1"
t0=$(now_ms)
lc start-iod 1 >/dev/null
wait_healthy
full_ms=$(($(now_ms) - t0))
full_src=$(source_line)

# 2. Resync after an outage with writes.
lc kill-iod 1 >/dev/null
wait_down
end=$(($(date +%s) + OUTAGE))
n=0
while (($(date +%s) < end)); do
	dd if=/dev/urandom of="$M/g0/during" bs=1M count=1 seek=$n conv=notrunc status=none
	n=$((n + 1))
done
t0=$(now_ms)
lc start-iod 1 >/dev/null
wait_healthy
inc_ms=$(($(now_ms) - t0))
inc_src=$(source_line)

echo "data: $MIB MiB on group 0 (journal $TWINFS_JOURNAL_SIZE)"
echo "cp -r + sync of the same subfiles: $cp_ms ms = $((MIB * 1049 / (cp_ms > 0 ? cp_ms : 1))) MB/s"
echo "full rebuild (wiped dir), start-iod to healthy: $full_ms ms = $((MIB * 1049 / (full_ms > 0 ? full_ms : 1))) MB/s"
echo "  source: $full_src"
echo "resync after a ${OUTAGE} s outage ($n MiB written during it), start-iod to healthy: $inc_ms ms"
echo "  source: $inc_src"
