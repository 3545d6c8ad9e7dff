#!/usr/bin/env bash
# channel_modes.sh - the channel modes through a real mount (proto/FORMAT.md
# "Channel protection"; README.md here).
#
#   test/bench/channel_modes.sh [--quick] [--out DIR] [--modes "none integrity encrypt"]
#
# Brings up a private deploy/local-cluster with a cluster secret (its own
# TWINFS_RUN_DIR, TWINFS_MOUNT and a port block in 31200-31295, default
# configuration otherwise) once per mode (TWINFS_CHANNEL), and measures on
# its mount:
#   seq_write   fio rw=write bs=1M size=512M (64M), end_fsync=1       MB/s
#   seq_read    the same file after twinfsctl sync and drop_caches   MB/s
#   randwrite_4k, randread_4k   bs=4k direct=1 iodepth=1, 10 s (2 s)  IOPS
#   cpu_write, cpu_read  user+sys seconds of every TwinFS process per GiB
# What is sealed: every connection, since every one authenticates: the
# mount's to mgrd (its identity's key, local-cluster's own) and to each
# iod (its ticket), an iod's copy of each write to its twin, iod <-> mgrd,
# twinfsctl.  So a read crosses one sealed hop, a write two (client ->
# primary -> twin).
# One run per mode; on a shared machine take the figures as +-30 %.  Writes
# raw.tsv and table.txt to --out (default /var/tmp/twinfs-chan-<UTC date>).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
TOOL=(python3 "$REPO/test/bench/benchtool.py")
BENCH_WHO=channel_modes
. "$REPO/test/bench/lib.sh"
MODES="none integrity encrypt"
BENCH_OPTS="quick out modes:MODES:LIST" bench_args "$@"
if ((QUICK)); then SEQ=64 RT=2; else SEQ=512 RT=10; fi
OUT=${OUT:-/var/tmp/twinfs-chan-$(date -u +%Y%m%dT%H%M%SZ)}
bench_start
ninja -C "$BUILD" >"$OUT/build.log" 2>&1 || die "build failed ($OUT/build.log)"

WORK=$(mktemp -d /var/tmp/twinfs-chan-work.XXXXXX)
PORT=$(bench_port_block 31200 31295)
[[ -n $PORT ]] || die "no free port block in 31200-31299"
export TWINFS_PORT=$PORT TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1
export TWINFS_CLUSTER=chan-$PORT TWINFS_SECRET=bench-$RANDOM-$RANDOM
CLUSTER_UP=0 BENCH_DOWN_LOG=$OUT/cluster.log
bench_traps

RAW=$OUT/raw.tsv
printf 'mode\tworkload\tvalue\tunit\n' >"$RAW"
rec() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$RAW"; say "  $(printf '%-10s %-13s %10s %s' "$@")"; }
settle() {
	timeout 300 "$LC" ctl sync >/dev/null || say "  warning: twinfsctl sync failed"
	"${TOOL[@]}" quiesce 30 "$TWINFS_RUN_DIR"/iod{1,2,3,4}/journal -- \
		$(cat "$TWINFS_RUN_DIR"/pids/iod{1,2,3,4}.pid) >/dev/null
	sync -f "$WORK"
	echo 3 >/proc/sys/vm/drop_caches
}
fio_job() { # MODE NAME SIDE fio-args...: prints "bw iops lat bytes"
	local js=$OUT/fio-$1-$2.json side=$3 n=$2
	shift 3
	timeout 600 fio --output-format=json --output="$js" --runtime=300 \
		--directory="$TWINFS_MOUNT/bench" --ioengine=psync --name="$n" "$@" \
		>/dev/null 2>>"$OUT/fio.err" || { echo "fail 0 0 0"; return; }
	"${TOOL[@]}" fio "$js" "$side"
}

for m in $MODES; do
	say "cluster channel=$m (port $PORT)"
	export TWINFS_RUN_DIR=$WORK/cluster-$m TWINFS_MOUNT=$WORK/mnt-$m TWINFS_CHANNEL=$m
	CLUSTER_UP=1
	"$LC" up >>"$OUT/cluster.log" 2>&1 || { tail -20 "$OUT/cluster.log"; die "cluster ($m) did not come up"; }
	grep -q "at least $m\|channel = none" "$TWINFS_RUN_DIR"/logs/mgrd.log ||
		die "mgrd does not run channel $m"
	mkdir -p "$TWINFS_MOUNT/bench"
	c0=$(bench_cpu_tw)
	read -r bw _ < <(fio_job $m seq_write write --filename=seq.dat --rw=write --bs=1M \
		--size=${SEQ}M --end_fsync=1)
	rec $m seq_write "$bw" MB/s
	settle
	rec $m cpu_write "$(python3 -c "print('%.2f' % (($(bench_cpu_tw) - $c0) * 1024 / $SEQ))")" s/GiB
	c0=$(bench_cpu_tw)
	read -r bw _ < <(fio_job $m seq_read read --filename=seq.dat --rw=read --bs=1M --size=${SEQ}M)
	rec $m seq_read "$bw" MB/s
	rec $m cpu_read "$(python3 -c "print('%.2f' % (($(bench_cpu_tw) - $c0) * 1024 / $SEQ))")" s/GiB
	for side in write read; do
		read -r _ iops _ < <(fio_job $m rand$side $side --filename=seq.dat --rw=rand$side \
			--bs=4k --size=${SEQ}M --direct=1 --iodepth=1 --time_based=1 --runtime=$RT)
		rec $m rand${side}_4k "$iops" IOPS
	done
	cp -r "$TWINFS_RUN_DIR/logs" "$OUT/logs-$m" 2>/dev/null || true
	"$LC" down >>"$OUT/cluster.log" 2>&1
	CLUSTER_UP=0
done
python3 - "$RAW" $MODES <<'PY' | tee "$OUT/table.txt"
import csv, sys
raw, modes = sys.argv[1], sys.argv[2:]
v = {}
for r in csv.DictReader(open(raw), delimiter="\t"):
    v[(r["mode"], r["workload"])] = (r["value"], r["unit"])
wls = [w for w in ("seq_write", "seq_read", "randwrite_4k", "randread_4k",
                   "cpu_write", "cpu_read")]
print("%-13s" % "workload" + "".join("%12s" % m for m in modes) + "   ratio to none")
for w in wls:
    vals = [v.get((m, w), ("nan", ""))[0] for m in modes]
    unit = v.get((modes[0], w), ("", ""))[1]
    base = float(vals[0]) if modes[0] == "none" and vals[0] != "fail" else None
    ratios = " ".join("%s %.2f" % (m, float(x) / base)
                      for m, x in zip(modes[1:], vals[1:])
                      if base and x != "fail")
    print("%-13s" % w + "".join("%12s" % x for x in vals) + "   %s; %s" % (unit, ratios))
PY
