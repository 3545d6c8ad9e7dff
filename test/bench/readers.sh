#!/usr/bin/env bash
# readers.sh - who should read /dev/fuse (docs/ARCHITECTURE.md "Threads
# and ownership"): the client's I/O thread itself (-o io_thread_reads)
# or libfuse's worker threads that hand each request to it (-o
# worker_reads), each named on its mount.  Two mounts of one private
# deploy/local-cluster (one mgrd, as test/bench/run), one per way, side by
# side, ROUNDS rounds, the order alternating (io-workers, workers-io,
# ...) so that a shared machine's drift hits both alike.  As root:
#
#   test/bench/readers.sh [--quick] [--rounds N] [--out DIR]
#
#   randwrite_4k  fio rw=randwrite bs=4k direct=1 iodepth=1 time_based
#                 over 256M (--quick 32M), 8 s (2 s)                   IOPS
#   randread_4k   the same with rw=randread                             IOPS
#   seq_write     fio 1 MiB writes of 512M (64M), end_fsync            MB/s
#   seq_read      reading it back (caches dropped first)               MB/s
#   meta_create   benchtool.py meta-create: 3,000 (300) empty files   ops/s
#   meta_unlink   benchtool.py meta-unlink of them, 1.5 s later       ops/s
#   tree_extract  tar xf of /usr/include (--quick: /usr/include/linux)   s
#   ls_lR         ls -laR of the tree, the kernel's caches dropped first s
#   tree_rm       rm -rf of it                                          s
# Prints every round's figures and the median of each per way, with a
# ratio that is above 1 where the I/O thread is faster (rates io/workers,
# times workers/io).
# Writes raw.tsv (round way workload value unit), table.txt and env.txt to
# --out (default /var/tmp/twinfs-readers-<UTC date>).  Ports: the first
# free block of 10 in 31200-31299 (lib.sh bench_port_block).  Never a
# timed assertion in CI.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
TOOL=(python3 "$REPO/test/bench/benchtool.py")
BENCH_WHO=readers.sh
. "$REPO/test/bench/lib.sh"
bench_args "$@"
if ((QUICK)); then
	ROUNDS=1 RND=32 RT=2 SEQ=64 NMETA=300 TMO=120
else
	RND=256 RT=8 SEQ=512 NMETA=3000 TMO=600
fi
TREE=/usr/include
((QUICK)) && TREE=/usr/include/linux
OUT=${OUT:-/var/tmp/twinfs-readers-$(date -u +%Y%m%dT%H%M%SZ)}
bench_start

PORT=$(bench_port_block 31200 31290 10)
[[ -n $PORT ]] || die "no block of 10 free ports in 31200-31299"
WORK=$(mktemp -d /var/tmp/twinfs-readers-work.XXXXXX)
export TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1 TWINFS_PORT=$PORT
export TWINFS_CLUSTER=readers TWINFS_RUN_DIR=$WORK/run TWINFS_MOUNT=$WORK/io
export TWINFS_MGRDS=1
declare -A MNT=([io]=$WORK/io [workers]=$WORK/workers)
RAW=$OUT/raw.tsv
mkdir -p "$OUT"

BG_PID=
bench_traps

rec() { # ROUND WAY WORKLOAD VALUE UNIT
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RAW"
	say "  round $1 $(printf '%-7s %-13s %10s %s' "$2" "$3" "$4" "$5")"
}
# fio_one ROUND WAY WORKLOAD SIDE UNIT FIO-ARGS...: one job; its figure
# (SIDE read or write; UNIT IOPS or MB/s) recorded unless WORKLOAD is -
fio_one() {
	local r=$1 w=$2 name=$3 side=$4 unit=$5 js bw iops
	shift 5
	js=$OUT/fio-$r-$w-${name/-/layout}.json
	if bg_wait timeout $((TMO + 60)) fio --output-format=json --output="$js" \
		--directory="${MNT[$w]}" --ioengine=psync --name=job "$@" \
		>/dev/null 2>>"$OUT/fio.err"; then
		read -r bw iops _ < <("${TOOL[@]}" fio "$js" "$side")
		[[ $name == - ]] || rec "$r" "$w" "$name" "$([[ $unit == IOPS ]] && echo "$iops" || echo "$bw")" "$unit"
	elif [[ $name == - ]]; then
		die "round $r: fio failed on $w ($js)"
	else
		rec "$r" "$w" "$name" fail "$unit"
	fi
}

measure() { # ROUND WAY
	local r=$1 w=$2 m=${MNT[$2]} v
	say "round $r: $w ($m)"
	fio_one $r $w - write MB/s --filename=rand.dat --rw=write --bs=1M --size=${RND}M --end_fsync=1
	fio_one $r $w randwrite_4k write IOPS --filename=rand.dat --rw=randwrite --bs=4k --size=${RND}M \
		--direct=1 --iodepth=1 --time_based=1 --runtime=$RT
	fio_one $r $w randread_4k read IOPS --filename=rand.dat --rw=randread --bs=4k --size=${RND}M \
		--direct=1 --iodepth=1 --time_based=1 --runtime=$RT
	rm -f "$m/rand.dat"
	fio_one $r $w seq_write write MB/s --filename=seq.dat --rw=write --bs=1M --size=${SEQ}M --end_fsync=1
	timeout "$TMO" "$LC" ctl sync >/dev/null || say "  warning: twinfsctl sync failed"
	echo 3 >/proc/sys/vm/drop_caches
	fio_one $r $w seq_read read MB/s --filename=seq.dat --rw=read --bs=1M --size=${SEQ}M
	rm -f "$m/seq.dat"
	if v=$(timeout "$TMO" "${TOOL[@]}" meta-create "$m/meta" "$NMETA"); then
		rec $r $w meta_create "$v" ops/s
		sleep 1.5   # past the 1 s entry timeout, as after a real create
		if v=$(timeout "$TMO" "${TOOL[@]}" meta-unlink "$m/meta" "$NMETA"); then
			rec $r $w meta_unlink "$v" ops/s
		else rec $r $w meta_unlink fail ops/s; fi
	else rec $r $w meta_create fail ops/s; fi
	rm -rf "$m/meta"
	timed $r $w tree_extract tar xf "$WORK/tree.tar" -C "$m"
	echo 3 >/proc/sys/vm/drop_caches
	timed $r $w ls_lR bash -c 'ls -laR "$1" >/dev/null' _ "$m"
	timed $r $w tree_rm rm -rf "$m/$(basename "$TREE")"
}

timed() { # ROUND WAY WORKLOAD CMD...: CMD's wall time, in s
	local r=$1 w=$2 name=$3 t0 t1
	shift 3
	t0=$EPOCHREALTIME
	if bg_wait timeout "$TMO" "$@"; then
		t1=$EPOCHREALTIME
		rec $r $w $name "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" s
	else
		rec $r $w $name fail s
	fi
}

{
	echo "date $(date -u +%FT%TZ)"
	echo "commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "command $0 $ARGS (quick=$QUICK rounds=$ROUNDS)"
	echo "nproc $(nproc)  mem $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)  kernel $(uname -r)"
	echo "fio $(fio --version)  build $BUILD"
	echo "sizes rand ${RND}M ${RT}s, seq ${SEQ}M, meta $NMETA, tree $TREE"
	echo "ports $PORT-$((PORT + 9))"
} >"$OUT/env.txt"
tar cf "$WORK/tree.tar" -C "$(dirname "$TREE")" "$(basename "$TREE")" 2>/dev/null ||
	[[ -s $WORK/tree.tar ]] || die "could not make the tarball of $TREE"
# Each mount names its way: neither depends on the client's default.
(cd / && TWINFS_MOUNT_OPTS=allow_other,io_thread_reads timeout "$TMO" "$LC" up >"$OUT/up.log" 2>&1) ||
	die "local-cluster up failed ($OUT/up.log)"
TWINFS_MOUNT_OPTS=allow_other,worker_reads "$LC" mount "${MNT[workers]}" >>"$OUT/up.log" 2>&1 ||
	die "the second mount failed ($OUT/up.log)"
: >"$RAW"
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order="io workers"; else order="workers io"; fi
	for w in $order; do measure $r $w; done
done
"$LC" umount "${MNT[workers]}" >/dev/null 2>&1 || fusermount3 -u "${MNT[workers]}" 2>/dev/null || true

python3 - "$RAW" <<'EOF' | tee "$OUT/table.txt"
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
works = []
for _, _, w, _, _ in rows:
    if w not in works:
        works.append(w)
print("per round:")
for w in works:
    for way in ("io", "workers"):
        xs = [x for _, s, ww, x, _ in rows if s == way and ww == w]
        print("  %-13s %-7s %s" % (w, way, " ".join(xs)))
print()
print("%-13s %12s %12s %-6s %11s" % ("workload", "io thread", "workers", "unit", "io/workers"))
for w in works:
    med, unit = {}, ""
    for way in ("io", "workers"):
        xs = [float(x) for _, s, ww, x, u in rows if s == way and ww == w and x != "fail"]
        unit = next(u for _, _, ww, _, u in rows if ww == w)
        med[way] = statistics.median(xs) if xs else None
    if not med["io"] or not med["workers"]:
        print("%-13s %s" % (w, "no figure (failed)"))
        continue
    ratio = (med["workers"] / med["io"] if unit == "s"
             else med["io"] / med["workers"])
    print("%-13s %12.2f %12.2f %-6s %11.2f" % (w, med["io"], med["workers"], unit,
          ratio))
print("\n(%d rounds; medians; above 1 the I/O thread is faster)"
      % len({r for r, *_ in rows}))
EOF
