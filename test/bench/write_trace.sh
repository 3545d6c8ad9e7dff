#!/usr/bin/env bash
# write_trace.sh - where the time of one 4 KiB O_DIRECT write goes, step by
# step (README.md here, "write_trace.sh"): a private deploy/local-cluster
# (default configuration, data=journal), a 64 MiB file, then fio
# randwrite bs=4k direct=1 iodepth=1 for SECONDS while ftrace records the
# FUSE request events and every system call of fio, the client and the
# four iods (write_trace.py record); then write_trace.py analyse prints
# each step's mean and median.  As root:
#
#   test/bench/write_trace.sh [--seconds S] [--out DIR]
#
# Prints the table and the untraced IOPS of the same cluster just before
# (the tracing's own cost shows as the difference); writes trace.txt,
# roles.json, steps.txt and the fio JSON to --out (default
# /var/tmp/twinfs-wtrace-<UTC date>).  tracefs is mounted at
# /sys/kernel/tracing when it is not, and unmounted again.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/test/bench
LC=$REPO/deploy/local-cluster
BENCH_WHO=write_trace.sh
TOOL=(python3 "$HERE/benchtool.py")
# shellcheck source=lib.sh
source "$HERE/lib.sh"
SECS=4
BENCH_OPTS="seconds:SECS:S out" bench_args "$@"
OUT=${OUT:-/var/tmp/twinfs-wtrace-$(date -u +%Y%m%dT%H%M%SZ)}
bench_start
export TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1
WORK=$(mktemp -d /var/tmp/twinfs-wtrace-work.XXXXXX)
PORT=$(bench_port_block 31200 31290 10)
[[ -n $PORT ]] || die "no free port block in 31200-31299"
export TWINFS_RUN_DIR=$WORK/cluster TWINFS_MOUNT=$WORK/mnt TWINFS_PORT=$PORT
export TWINFS_CLUSTER=wtrace-$PORT TWINFS_MGRDS=1
TR=/sys/kernel/tracing
TR_MOUNTED=0
BG_PID=''
BENCH_DOWN_LOG=$OUT/cluster.log
# On exit: fio, the tracing (off, tracefs unmounted if mounted here), then
# the rest of lib.sh bench_cleanup.
cleanup() {
	set +e
	trap - EXIT INT TERM
	bench_stop_bg
	[[ -f $TR/tracing_on ]] && { echo 0 >"$TR/tracing_on"; : >"$TR/set_event"; : >"$TR/set_event_pid"; }
	((TR_MOUNTED)) && umount "$TR"
	bench_cleanup
}
bench_traps cleanup

if [[ ! -f $TR/trace ]]; then
	mount -t tracefs nodev "$TR" || die "cannot mount tracefs at $TR"
	TR_MOUNTED=1
fi
[[ -d $TR/events/fuse ]] || die "this kernel has no fuse trace events"

say "cluster on port $PORT (run dir $TWINFS_RUN_DIR)"
(cd / && "$LC" up >"$OUT/cluster.log" 2>&1) || { tail -20 "$OUT/cluster.log"; die "cluster did not come up"; }
D=$TWINFS_MOUNT/wt
mkdir -p "$D"
fio --name=lay --directory="$D" --filename=f --rw=write --bs=1M --size=64M --end_fsync=1 >/dev/null
FIO=(fio --name=rw --directory="$D" --filename=f --rw=randwrite --bs=4k --size=64M --direct=1
	--ioengine=psync --iodepth=1 --time_based=1 --output-format=json)
"${FIO[@]}" --runtime=$SECS --output="$OUT/untraced.json" >/dev/null
read -r _ UNTRACED ULAT _ < <("${TOOL[@]}" fio "$OUT/untraced.json" write)
say "untraced: $UNTRACED IOPS, $ULAT us"

# The traced run: fio in the background, then the threads to follow.
"${FIO[@]}" --runtime=$((SECS + 4)) --output="$OUT/traced.json" >/dev/null &
BG_PID=$!
sleep 1.5
FIO_PIDS="$BG_PID $(ps -o pid= --ppid "$BG_PID" | tr '\n' ' ')"
P=$TWINFS_RUN_DIR/pids
python3 - "$OUT/roles.json" "$FIO_PIDS" "$(cat "$P/mount.pid")" "$(cat "$P"/iod{1,2,3,4}.pid)" <<'EOF'
import json, os, sys
def tids(p):
    try:
        return [int(t) for t in os.listdir("/proc/%s/task" % p)]
    except OSError:
        return []
fio = [t for p in sys.argv[2].split() for t in tids(p)]
iods = {"iod%d" % (i + 1): tids(p) for i, p in enumerate(sys.argv[4].split())}
json.dump({"fio": fio, "client": tids(sys.argv[3]), "iods": iods}, open(sys.argv[1], "w"))
EOF
# shellcheck disable=SC2046
python3 "$HERE/write_trace.py" record "$TR" "$OUT/trace.txt" "$SECS" -- $FIO_PIDS \
	$(cat "$P/mount.pid" "$P"/iod{1,2,3,4}.pid)
wait "$BG_PID" || true
BG_PID=
read -r _ TRACED TLAT _ < <("${TOOL[@]}" fio "$OUT/traced.json" write)
say "traced run (tracing for ${SECS} s of it): $TRACED IOPS, $TLAT us"
python3 "$HERE/write_trace.py" analyse "$OUT/trace.txt" "$OUT/roles.json" | tee "$OUT/steps.txt"
echo "untraced: $UNTRACED IOPS, $ULAT us mean" | tee -a "$OUT/steps.txt"
