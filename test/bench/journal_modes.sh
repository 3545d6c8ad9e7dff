#!/usr/bin/env bash
# journal_modes.sh - the three journal modes of the iods through the mount
# (README.md here, "`journal_modes.sh`").
#
#   test/bench/journal_modes.sh [--quick] [--out DIR] [--modes "journal ordered writeback"]
#                               [--burst MIB]
#
# Brings up a private deploy/local-cluster (its own TWINFS_RUN_DIR,
# TWINFS_MOUNT and a port block in 31100-31195, default configuration:
# 4 iods in two twin groups, 256 MiB journal per iod) once per mode
# (journal_mode = journal | ordered | writeback, via TWINFS_JOURNAL_MODE),
# and measures on its mount:
#   seq_1g      fio rw=write bs=1M size=1G, end_fsync=1 (512 MiB per group:
#               two journals' worth per iod, a sustained write)  MB/s
#   burst_256m  the same with 256 MiB (128 MiB per iod: fits its journal;
#               --burst MIB changes the size, and the name)
#   sync_4k     fio rw=write bs=4k fsync=1, 20 s time based       IOPS
#   sync_busy   the same beside a writer streaming into another
#               file (fio, flat out over 1 GiB, never fsynced)      IOPS
#   small_4k    5000 files of 4 KiB: create, one write, close      files/s
# plus the same workloads on a plain directory of the same file system
# ("disk"), measured before and after the modes, and direct_1g (the 1 GiB
# write with O_DIRECT: the device, not the guest's page cache), the base of
# the physical ceiling of docs/ARCHITECTURE.md "Journal" (both twins on one disk:
# sustained data=journal near 0.25 x disk, writeback 0.5 x; bursts that
# fit the journal 0.5 x).
# Between workloads: twinfsctl sync, wait until the iods are idle
# (benchtool.py quiesce), drop the page cache.  Prints a table with
# journal / writeback per workload; writes raw.tsv, table.txt, env.txt and
# fio's JSON to --out (default /var/tmp/twinfs-jmodes-<UTC date>).
# One run per mode: on a shared machine take the figures as +-30 %.  Never
# a timed assertion in CI; --quick (small sizes) only proves it works.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/test/bench
LC=$REPO/deploy/local-cluster
TOOL=(python3 "$HERE/benchtool.py")
BENCH_WHO=journal_modes
. "$HERE/lib.sh"

BURST_OPT=
MODES="journal ordered writeback"
BENCH_OPTS="quick out modes:MODES:LIST burst:BURST_OPT:MIB help" bench_args "$@"
for m in $MODES; do
	case $m in journal | ordered | writeback) ;; *) echo "journal_modes: bad mode $m" >&2; exit 2 ;; esac
done
if ((QUICK)); then
	SEQ=128 BURST=32 SYNC_RT=3 NFILES=300 QUIESCE=20 STREAM=256
else
	SEQ=1024 BURST=256 SYNC_RT=20 NFILES=5000 QUIESCE=90 STREAM=1024
fi
if [[ -n $BURST_OPT ]]; then
	[[ $BURST_OPT =~ ^[1-9][0-9]*$ ]] || { echo "journal_modes: --burst needs MiB" >&2; exit 2; }
	BURST=$BURST_OPT
fi
LIM=600 # seconds: bounds every fio job and program
OUT=${OUT:-/var/tmp/twinfs-jmodes-$(date -u +%Y%m%dT%H%M%SZ)}
bench_start
if [[ ! -f $BUILD/build.ninja ]]; then
	meson setup "$BUILD" "$REPO" >"$OUT/build.log" 2>&1 || die "meson setup failed ($OUT/build.log)"
fi
ninja -C "$BUILD" >>"$OUT/build.log" 2>&1 || die "build failed ($OUT/build.log)"

WORK=$(mktemp -d /var/tmp/twinfs-jmodes-work.XXXXXX)
PORT=$(bench_port_block 31100 31195)
[[ -n $PORT ]] || die "no free port block in 31100-31199"
export TWINFS_PORT=$PORT TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1
export TWINFS_CLUSTER=jmodes-$PORT
unset TWINFS_JOURNAL_SIZE # the default, 256 MiB per iod
CLUSTER_UP=0
BG_PID=
STREAM_PID=

# On exit: the measurement, the streamer, the cluster (its logs kept), then
# the rest of lib.sh bench_cleanup.
cleanup() {
	set +e
	trap - EXIT INT TERM
	bench_stop_bg
	[[ -n $STREAM_PID ]] && { kill -TERM "$STREAM_PID" 2>/dev/null; wait "$STREAM_PID" 2>/dev/null; }
	((CLUSTER_UP)) && cluster_down
	bench_cleanup
}
bench_traps cleanup

cluster_up() { # MODE
	export TWINFS_RUN_DIR=$WORK/cluster-$1 TWINFS_MOUNT=$WORK/mnt-$1 TWINFS_JOURNAL_MODE=$1
	CLUSTER_UP=1
	"$LC" up >>"$OUT/cluster-$1.log" 2>&1 || { tail -20 "$OUT/cluster-$1.log"; die "cluster ($1) did not come up"; }
}
cluster_down() {
	cp -r "$TWINFS_RUN_DIR/logs" "$OUT/logs-$TWINFS_JOURNAL_MODE" 2>/dev/null
	"$LC" down >>"$OUT/cluster-$TWINFS_JOURNAL_MODE.log" 2>&1
	CLUSTER_UP=0
}

RAW=$OUT/raw.tsv
printf 'target\tworkload\tvalue\tunit\tnote\n' >"$RAW"
rec() { # TARGET WORKLOAD VALUE UNIT [NOTE]
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$RAW"
	say "  $(printf '%-10s %-11s %10s %s %s' "$1" "$2" "$3" "$4" "${5:-}")"
}

# settle TARGET: make the cluster idle (journals synced, no checkpoint
# running: benchtool.py quiesce) and drop the page cache, so that one
# workload's checkpoint does not run into the next one's figure.
settle() {
	local note=
	if [[ $1 != disk* ]]; then
		timeout 300 "$LC" ctl sync >/dev/null || say "  warning: twinfsctl sync failed"
		note=$("${TOOL[@]}" quiesce "$QUIESCE" "$TWINFS_RUN_DIR"/iod{1,2,3,4}/journal -- \
			$(cat "$TWINFS_RUN_DIR"/pids/iod{1,2,3,4}.pid))
	fi
	sync -f "$WORK"
	echo 3 >/proc/sys/vm/drop_caches
	[[ -z $note ]] || printf '%s\t%s\t%s\t%s\t%s\n' "$1" settle "$note" s "" >>"$RAW"
}

cpu_tw() { bench_cpu_tw; }

fio_job() { # TARGET DIR NAME SIDE fio-args...: prints "bw iops lat bytes"
	local t=$1 d=$2 name=$3 side=$4 js=$OUT/fio/$1-$3.json
	shift 4
	mkdir -p "$OUT/fio"
	bg_wait timeout $((LIM + 60)) fio --output-format=json --output="$js" --runtime="$LIM" \
		--directory="$d" --ioengine=psync --name="$name" "$@" >/dev/null 2>>"$OUT/fio.err" ||
		{ echo "fail 0 0 0"; return; }
	"${TOOL[@]}" fio "$js" "$side"
}

workloads() { # TARGET DIR
	local t=$1 d=$2 bw iops lat bytes c0 v size label
	if [[ $t == disk* ]]; then
		# The device without the guest's page cache (the host may still
		# cache it): the base of the journal ceilings.
		read -r bw iops lat bytes < <(fio_job "$t" "$d" direct_1g write --filename=seq.dat \
			--rw=write --bs=1M --size=${SEQ}M --direct=1 --end_fsync=1)
		rec "$t" direct_1g "$bw" MB/s
		rm -f "$d/seq.dat"
		settle "$t"
	fi
	for size in "$SEQ" "$BURST"; do
		[[ $size == "$SEQ" ]] && label=seq_1g || label=burst_${BURST}m
		[[ $t == disk* ]] || c0=$(cpu_tw)
		read -r bw iops lat bytes < <(fio_job "$t" "$d" "$label" write --filename=seq.dat \
			--rw=write --bs=1M --size=${size}M --direct=0 --end_fsync=1)
		rec "$t" "$label" "$bw" MB/s "$( [[ $t == disk* ]] || echo "cpu=$(python3 -c "print('%.1f' % ($(cpu_tw) - $c0))")s")"
		settle "$t"
		rm -f "$d/seq.dat"
		settle "$t"
	done
	read -r bw iops lat bytes < <(fio_job "$t" "$d" sync_4k write --filename=sync.dat \
		--rw=write --bs=4k --size=256M --fsync=1 --time_based=1 --runtime=$SYNC_RT)
	rec "$t" sync_4k "$iops" IOPS "lat=${lat}us"
	rm -f "$d/sync.dat"
	settle "$t"
	# The same beside a writer streaming into another file (buffered,
	# never fsynced, flat out over and over STREAM MiB, so that it
	# streams for the whole run and its file stays small): an fsync
	# should write its own file's data, not the streamer's (writeback
	# mode: jbd_sync_files, journal/FORMAT.md).  At 200 MB/s the
	# streamer left too little dirty data to tell (RESULTS.md).
	timeout $((SYNC_RT + 60)) fio --name=stream --directory="$d" \
		--filename=stream.dat --ioengine=psync --rw=write --bs=1M \
		--size="${STREAM}M" --time_based=1 \
		--runtime=$((SYNC_RT + 5)) >/dev/null 2>&1 &
	STREAM_PID=$!
	sleep 1
	read -r bw iops lat bytes < <(fio_job "$t" "$d" sync_busy write --filename=sync.dat \
		--rw=write --bs=4k --size=256M --fsync=1 --time_based=1 --runtime=$SYNC_RT)
	kill -TERM "$STREAM_PID" 2>/dev/null || true   # it may be done
	wait "$STREAM_PID" 2>/dev/null || true
	STREAM_PID=
	rec "$t" sync_busy "$iops" IOPS "lat=${lat}us"
	rm -f "$d/sync.dat" "$d/stream.dat"
	settle "$t"
	if v=$(timeout "$LIM" "${TOOL[@]}" small-files "$d/small" "$NFILES" 4096); then
		rec "$t" small_4k "$v" files/s
	else
		rec "$t" small_4k fail files/s
	fi
	rm -rf "$d/small"
	settle "$t"
}

{
	echo "date	$(date -u +%FT%TZ)"
	echo "commit	$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet HEAD -- . ':!test/bench' 2>/dev/null || echo ' (+ uncommitted changes)')"
	echo "nproc	$(nproc)"
	echo "disk	$(df -h --output=source,fstype,size,avail "$WORK" | tail -1 | tr -s ' ')"
	echo "kernel	$(uname -r)"
	echo "fio	$(fio --version)"
	echo "modes	$MODES"
	echo "sizes	seq ${SEQ}M, burst ${BURST}M, sync_4k ${SYNC_RT}s (sync_busy beside a stream over ${STREAM}M), small $NFILES x 4 KiB, journal 256M per iod"
	echo "build	$BUILD"
} >"$OUT/env.txt"
sed 's/\t/: /' "$OUT/env.txt"

mkdir -p "$WORK/disk"
say "disk (a plain directory of $WORK's file system), before"
workloads disk "$WORK/disk"
for m in $MODES; do
	say "cluster data=$m (run dir $WORK/cluster-$m, port $PORT)"
	cluster_up "$m"
	mkdir -p "$TWINFS_MOUNT/bench"
	workloads "$m" "$TWINFS_MOUNT/bench"
	cluster_down
done
say "disk, after"
workloads disk_end "$WORK/disk"

"${TOOL[@]}" modes-report "$RAW" $MODES | tee "$OUT/table.txt"
