#!/usr/bin/env bash
# failover_stall.sh - the longest stall an application sees when an iod dies
# mid-write (the failover drills, measured): a loop of 1 MiB write() calls, each timed, on a fresh
# private local cluster per round; in the middle one iod is killed (kill -9)
# or hung (SIGSTOP).  Baseline, measured in the same run: the same loop with
# no failure.  Prints per-round and worst stalls (ms) and the ratio of the
# worst failover stall to the baseline's worst write.
#
#   test/bench/failover_stall.sh [-n ROUNDS] [-m MIB]   # as root
# Environment: TWINFS_PORT (default 20540), TWINFS_BUILD_DIR,
# TWINFS_REQUEST_TIMEOUT (default 2s), TWINFS_MONITOR_INTERVAL (default
# 500ms; the client gets the same).  Each round starts a new cluster,
# so that each begins with both twins up and in sync (a killed iod stays
# resyncing until its resync has copied what it missed).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
ROUNDS=4
MIB=400
while getopts "n:m:h" o; do
	case $o in
	n) ROUNDS=$OPTARG ;;
	m) MIB=$OPTARG ;;
	*) sed -n '2,14p' "$0"; exit 2 ;;
	esac
done
export TWINFS_PORT=${TWINFS_PORT:-20540}
export TWINFS_RUN_DIR=${TWINFS_RUN_DIR:-/var/tmp/twinfs-bench-failover}
export TWINFS_MOUNT=$TWINFS_RUN_DIR/mnt
export TWINFS_CLUSTER=bench-failover
export TWINFS_REQUEST_TIMEOUT=${TWINFS_REQUEST_TIMEOUT:-2s}
export TWINFS_MONITOR_INTERVAL=${TWINFS_MONITOR_INTERVAL:-500ms}
mi_ms=$(awk -v v="$TWINFS_MONITOR_INTERVAL" 'BEGIN { n = v + 0
	if (v ~ /ms$/) print n; else if (v ~ /s$/) print n * 1000; else print n }')
export TWINFS_MOUNT_OPTS=allow_other,monitor_interval=$mi_ms
export TWINFS_JOURNAL_SIZE=${TWINFS_JOURNAL_SIZE:-64M}
export TWINFS_NO_APT=1
M=$TWINFS_MOUNT
PY=/usr/bin/python3

cleanup() { (cd / && "$LC" down >/dev/null 2>&1) || true; rm -rf "$TWINFS_RUN_DIR"; }
trap cleanup EXIT

fresh() {
	cleanup
	(cd / && "$LC" up >/dev/null) || { echo "cluster did not come up" >&2; exit 1; }
}

# writer: prints the longest write() in ms; touches $1.q after a quarter.
writer() {
	"$PY" - "$M/f" "$MIB" <<'PYEOF'
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
buf = os.urandom(1 << 20)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
worst = 0.0
for i in range(n):
    if i == n // 4:
        open(path + ".q", "w").close()
    a = time.monotonic()
    os.write(fd, buf)
    worst = max(worst, time.monotonic() - a)
os.close(fd)
print("%.1f" % (worst * 1000))
PYEOF
}

round() { # KIND IOD -> worst stall (ms)
	local kind=$1 iod=$2 pid out i
	fresh
	writer >"$TWINFS_RUN_DIR/w.out" &
	pid=$!
	if [[ $kind != none ]]; then
		for ((i = 0; i < 600; i++)); do [[ -e $M/f.q ]] && break; sleep 0.02; done
		(cd / && "$LC" "$kind" "$iod" >/dev/null)
	fi
	wait "$pid" || { echo "writer failed in round $kind $iod" >&2; exit 1; }
	cat "$TWINFS_RUN_DIR/w.out"
}

printf '%-10s %-4s %10s\n' event iod worst_ms
base=$(round none 0)
printf '%-10s %-4s %10s\n' none - "$base"
worst_kill=0 worst_stop=0
for ((r = 0; r < ROUNDS; r++)); do
	iod=$((r % 4 + 1))
	k=$(round kill-iod $iod)
	printf '%-10s %-4s %10s\n' kill-9 $iod "$k"
	worst_kill=$(awk -v a="$worst_kill" -v b="$k" 'BEGIN { print (b > a) ? b : a }')
	s=$(round stop-iod $iod)
	printf '%-10s %-4s %10s\n' sigstop $iod "$s"
	worst_stop=$(awk -v a="$worst_stop" -v b="$s" 'BEGIN { print (b > a) ? b : a }')
done
echo "worst write with no failure: $base ms"
echo "worst stall, kill -9:  $worst_kill ms ($(awk -v a="$worst_kill" -v b="$base" 'BEGIN { printf "%.1f", a / b }') x baseline)"
echo "worst stall, SIGSTOP:  $worst_stop ms ($(awk -v a="$worst_stop" -v b="$base" 'BEGIN { printf "%.1f", a / b }') x baseline; request_timeout $TWINFS_REQUEST_TIMEOUT)"
