#!/usr/bin/env bash
# pair_cost.sh - what the mgrd pair costs (docs/ARCHITECTURE.md: the
# standby is synchronous, every metadata reply waits for its ack): the same
# workloads through the mount of a private deploy/local-cluster with one
# mgrd (TWINFS_MGRDS=1) and with the pair (TWINFS_MGRDS=2, the default),
# ROUNDS rounds, the order alternating (single-pair, pair-single, ...) so
# that a shared machine's drift hits both alike.  A fresh cluster per
# setting and round.  As root:
#
#   test/bench/pair_cost.sh [--quick] [--rounds N] [--out DIR]
#
#   randwrite_4k  fio rw=randwrite bs=4k direct=1 iodepth=1 time_based over
#                 a file written first with 1 MiB blocks: test/bench/run's
#                 job (256M, 20 s; --quick 64M, 2 s)                  IOPS
#   meta_create   benchtool.py meta-create: 5,000 (500) empty files in one
#                 new directory                                        ops/s
#   tree_extract  tar xf of a tarball of /usr/include (/usr/include/linux)
#                 made once on the local disk, then sync -f of the mount
#                 and twinfsctl sync (run's durability step)            s
# Prints every round's figures, the median of each per setting and the
# pair/single ratio of the medians as a time ratio (for rates single/pair:
# above 1 means the pair is slower; the goal is <= 1.3).  Writes raw.tsv
# (round setting workload value unit), table.txt, env.txt, fio/*.json to
# --out (default /var/tmp/twinfs-pair-<UTC date>).  Ports: the first free
# block of 12 (mgrd, 4 iods, metrics, mgrd 2 and its metrics) in
# 31100-31199 (lib.sh bench_port_block).  Never a timed assertion in CI.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
TOOL=(python3 "$REPO/test/bench/benchtool.py")
BENCH_WHO=pair_cost.sh
. "$REPO/test/bench/lib.sh"
bench_args "$@"
if ((QUICK)); then
	ROUNDS=1 RND=64 RT=2 NMETA=500 TREE=/usr/include/linux TMO=120 QUIESCE=20
else
	RND=256 RT=20 NMETA=5000 TREE=/usr/include TMO=600 QUIESCE=60
fi
OUT=${OUT:-/var/tmp/twinfs-pair-$(date -u +%Y%m%dT%H%M%SZ)}
bench_start
command -v tar >/dev/null || die "needs tar"

# A block of 12 free ports: PORT..PORT+4 the daemons, +5..+9 their metrics,
# +10/+11 mgrd 2 and its metrics (deploy/local-cluster, top).
PORT=$(bench_port_block 31100 31195 12)
[[ -n $PORT ]] || die "no block of 12 free ports in 31100-31199"

WORK=$(mktemp -d /var/tmp/twinfs-pair-work.XXXXXX)
export TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1 TWINFS_PORT=$PORT
export TWINFS_CLUSTER=pair-cost TWINFS_RUN_DIR=$WORK/none TWINFS_MOUNT=$WORK/mnt
TARBALL=$WORK/tree.tar RAW=$OUT/raw.tsv
mkdir -p "$OUT/fio"

# On exit (lib.sh bench_cleanup): stop the running measurement, then the
# cluster of the current run dir, then remove WORK.
BG_PID=
bench_traps

rec() { # ROUND SETTING WORKLOAD VALUE UNIT
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RAW"
	say "  round $1 $(printf '%-6s %-13s %10s %s' "$2" "$3" "$4" "$5")"
}
now() { echo "$EPOCHREALTIME"; }
iod_pids() { cat "$TWINFS_RUN_DIR"/pids/iod{1,2,3,4}.pid; }
# settle: twinfsctl sync, wait until no checkpoint runs (at most QUIESCE s),
# syncfs of the disk, drop the page cache (run's settle).
settle() {
	timeout "$TMO" "$LC" ctl sync >/dev/null || say "  warning: twinfsctl sync failed"
	"${TOOL[@]}" quiesce "$QUIESCE" "$TWINFS_RUN_DIR"/iod{1,2,3,4}/journal -- $(iod_pids) >/dev/null
	sync -f "$WORK"
	echo 3 >/proc/sys/vm/drop_caches
}

measure() { # ROUND SETTING: a fresh cluster, the three workloads, down
	local r=$1 s=$2 m js v t0 t1 i
	export TWINFS_RUN_DIR=$WORK/r$r-$s TWINFS_MGRDS=$([[ $s == single ]] && echo 1 || echo 2)
	m=$TWINFS_MOUNT
	mkdir -p "$TWINFS_RUN_DIR"
	say "round $r: $s (TWINFS_MGRDS=$TWINFS_MGRDS, port $PORT)"
	(cd / && timeout "$TMO" "$LC" up >"$OUT/up-$r-$s.log" 2>&1) || die "local-cluster up failed ($OUT/up-$r-$s.log)"
	# The pair is measured only with its standby in sync: else replies do
	# not wait for it.  Bounded: 30 s.
	if [[ $s == pair ]]; then
		for ((i = 0; i < 300; i++)); do
			grep -q 'standby mgrd 2 is in sync' "$TWINFS_RUN_DIR/logs/mgrd.log" && break
			sleep 0.1
		done
		((i < 300)) || die "round $r: the standby never came in sync (see $TWINFS_RUN_DIR/logs)"
	fi

	# randwrite_4k: run's job shape
	js=$OUT/fio/$r-$s-layout.json
	bg_wait timeout $((TMO + 60)) fio --output-format=json --output="$js" --runtime="$TMO" \
		--directory="$m" --ioengine=psync --name=rand --filename=rand.dat --rw=write \
		--bs=1M --size=${RND}M --direct=0 --end_fsync=1 >/dev/null 2>>"$OUT/fio.err" ||
		die "fio layout failed ($js)"
	settle
	js=$OUT/fio/$r-$s-randwrite.json
	if bg_wait timeout $((TMO + 60)) fio --output-format=json --output="$js" --runtime="$TMO" \
		--directory="$m" --ioengine=psync --name=rand --filename=rand.dat --rw=randwrite \
		--bs=4k --size=${RND}M --direct=1 --iodepth=1 --time_based=1 --runtime=$RT \
		>/dev/null 2>>"$OUT/fio.err"; then
		read -r _ v _ < <("${TOOL[@]}" fio "$js" write)
		rec $r $s randwrite_4k "$v" IOPS
	else rec $r $s randwrite_4k fail IOPS; fi
	rm -f "$m/rand.dat"
	settle

	if v=$(timeout "$TMO" "${TOOL[@]}" meta-create "$m/meta" "$NMETA"); then
		rec $r $s meta_create "$v" ops/s
	else rec $r $s meta_create fail ops/s; fi
	rm -rf "$m/meta"
	mkdir "$m/tree"
	settle

	t0=$(now)
	if bg_wait timeout "$TMO" bash -c 'tar xf "$1" -C "$2" && sync -f "$2" && "$3" ctl sync >/dev/null' \
		_ "$TARBALL" "$m/tree" "$LC"; then
		t1=$(now)
		rec $r $s tree_extract "$(python3 -c "print('%.2f' % ($t1 - $t0))")" s
	else rec $r $s tree_extract fail s; fi

	mkdir -p "$OUT/logs-$r-$s"
	cp -r "$TWINFS_RUN_DIR"/logs/. "$OUT/logs-$r-$s/" 2>/dev/null || true
	(cd / && "$LC" down >/dev/null) || die "local-cluster down failed"
	rm -rf --one-file-system "$TWINFS_RUN_DIR"
}

tar cf "$TARBALL" -C "$(dirname "$TREE")" "$(basename "$TREE")" 2>/dev/null || [[ -s $TARBALL ]] ||
	die "could not make the tarball of $TREE"
{
	echo "date $(date -u +%FT%TZ)"
	echo "commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "command $0 $ARGS (quick=$QUICK rounds=$ROUNDS)"
	echo "nproc $(nproc)  mem $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)  kernel $(uname -r)"
	echo "fio $(fio --version)  build $BUILD"
	echo "sizes randwrite ${RND}M ${RT}s, meta_create $NMETA, tree $TREE ($(tar tf "$TARBALL" | wc -l) entries)"
	echo "ports $PORT-$((PORT + 11))"
} >"$OUT/env.txt"
: >"$RAW"
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order="single pair"; else order="pair single"; fi
	for s in $order; do measure $r $s; done
done

python3 - "$RAW" <<'EOF' | tee "$OUT/table.txt"
import statistics, sys
v, units = {}, {}
for line in open(sys.argv[1]):
    r, s, w, x, u = line.rstrip("\n").split("\t")
    units[w] = u
    if x != "fail":
        v.setdefault((w, s), []).append(float(x))
rounds = sorted({int(l.split("\t")[0]) for l in open(sys.argv[1])})
print("per round:")
for w in ("randwrite_4k", "meta_create", "tree_extract"):
    for s in ("single", "pair"):
        xs = [l.split("\t")[3] for l in open(sys.argv[1])
              if l.split("\t")[1] == s and l.split("\t")[2] == w]
        print("  %-13s %-6s %s %s" % (w, s, " ".join(xs), units.get(w, "")))
print()
print("%-13s %14s %14s %16s" % ("workload", "single", "pair", "time pair/single"))
for w in ("randwrite_4k", "meta_create", "tree_extract"):
    a, b = v.get((w, "single")), v.get((w, "pair"))
    if not a or not b:
        print("%-13s %s" % (w, "no figure (failed)"))
        continue
    a, b, u = statistics.median(a), statistics.median(b), units[w]
    ratio = b / a if u == "s" else a / b
    print("%-13s %8.1f %-5s %8.1f %-5s %10.3f %s" % (w, a, u, b, u, ratio,
          "ok (<= 1.3)" if ratio <= 1.3 else "over 1.3"))
print("\n(%d rounds; medians; rates are turned into times: single/pair)" % len(rounds))
EOF
