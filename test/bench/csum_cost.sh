#!/usr/bin/env bash
# csum_cost.sh - what block and wire checksums cost (docs/ARCHITECTURE.md
# "Integrity"): the same fio workloads through the mount of a private
# deploy/local-cluster with checksums on (the default) and off
# (TWINFS_BENCH_NO_CSUM=1 for the iods and the client: measurement only),
# alternating on/off ROUNDS times so that a shared machine's drift hits
# both alike.  As root:
#
#   test/bench/csum_cost.sh [--quick] [--rounds N] [--out DIR]
#
#   seq_write  fio rw=write bs=1M, end_fsync=1                       MB/s
#   seq_read   fio rw=read bs=1M after the journals went home and the
#              page cache was dropped (every block checked at home)   MB/s
#   rand_write fio rw=randwrite bs=4k, 4 jobs, time based            IOPS
#   rand_read  fio rw=randread bs=4k, 4 jobs, after drop_caches      IOPS
# Prints the median of each figure per setting and on/off ratios; writes
# raw.tsv to --out (default /var/tmp/twinfs-csum-<UTC date>).  Never a
# timed assertion in CI.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
BENCH_WHO=csum_cost.sh
. "$REPO/test/bench/lib.sh"
ROUNDS=2
bench_args "$@"
if ((QUICK)); then SIZE=64M RT=3; else SIZE=512M RT=15; fi
OUT=${OUT:-/var/tmp/twinfs-csum-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
export TWINFS_BUILD_DIR=${TWINFS_BUILD_DIR:-$REPO/build} TWINFS_NO_BUILD=1 TWINFS_NO_APT=1
export TWINFS_RUN_DIR=$(mktemp -d /var/tmp/twinfs-csum-run.XXXXXX)
export TWINFS_MOUNT=$TWINFS_RUN_DIR/mnt TWINFS_PORT=${TWINFS_PORT:-31300}
export TWINFS_COMMIT_INTERVAL=1s TWINFS_CLUSTER=csum-cost
M=$TWINFS_MOUNT
WORK=$TWINFS_RUN_DIR
bench_traps

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# home: wait (at most 60 s) until every iod's journal is empty
home() {
	local i p u
	for ((i = 0; i < 600; i++)); do
		u=0
		for p in 1 2 3 4; do
			u=$((u + $(curl -s "http://127.0.0.1:$((TWINFS_PORT + 5 + p))/metrics" |
				awk '/^twinfs_iod_journal_used_bytes/ { s += $2 } END { print s + 0 }')))
		done
		((u == 0)) && return 0
		sleep 0.1
	done
}
fiojob() {   # NAME ARGS...: print MB/s (bw) or IOPS for the job
	local name=$1; shift
	fio --name="$name" --output-format=json --directory="$M" "$@" >"$OUT/$name.json"
	python3 - "$OUT/$name.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"]
r = sum(x["read"]["bw_bytes"] for x in j); w = sum(x["write"]["bw_bytes"] for x in j)
ri = sum(x["read"]["iops"] for x in j); wi = sum(x["write"]["iops"] for x in j)
print("%.1f %.0f" % ((r + w) / 1e6, ri + wi))
EOF
}

: >"$OUT/raw.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
	for setting in on off; do
		if [[ $setting == off ]]; then export TWINFS_BENCH_NO_CSUM=1; else unset TWINFS_BENCH_NO_CSUM; fi
		(cd / && "$LC" down >/dev/null 2>&1 || true)
		rm -rf "$TWINFS_RUN_DIR"/iod* "$TWINFS_RUN_DIR"/mgrd
		(cd / && "$LC" up >/dev/null)
		set -- $(fiojob "sw-$setting-$r" --rw=write --bs=1M --size=$SIZE --end_fsync=1 --filename=seq)
		echo -e "$r\t$setting\tseq_write\t$1" >>"$OUT/raw.tsv"
		home; drop
		set -- $(fiojob "sr-$setting-$r" --rw=read --bs=1M --size=$SIZE --filename=seq)
		echo -e "$r\t$setting\tseq_read\t$1" >>"$OUT/raw.tsv"
		set -- $(fiojob "rw-$setting-$r" --rw=randwrite --bs=4k --size=$SIZE --numjobs=4 \
			--filename=seq --time_based --runtime=$RT --group_reporting=0)
		echo -e "$r\t$setting\trand_write\t$2" >>"$OUT/raw.tsv"
		home; drop
		set -- $(fiojob "rr-$setting-$r" --rw=randread --bs=4k --size=$SIZE --numjobs=4 \
			--filename=seq --time_based --runtime=$RT)
		echo -e "$r\t$setting\trand_read\t$2" >>"$OUT/raw.tsv"
		(cd / && "$LC" down >/dev/null)
	done
done
python3 - "$OUT/raw.tsv" <<'EOF' | tee "$OUT/table.txt"
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    r, s, w, x = line.split("\t")
    v.setdefault((w, s), []).append(float(x))
print("%-11s %12s %12s %9s" % ("workload", "checksums", "without", "on/off"))
for w in ("seq_write", "seq_read", "rand_write", "rand_read"):
    on, off = statistics.median(v[(w, "on")]), statistics.median(v[(w, "off")])
    unit = "MB/s" if w.startswith("seq") else "IOPS"
    print("%-11s %7.1f %4s %7.1f %4s %9.3f" % (w, on, unit, off, unit, on / off))
EOF
