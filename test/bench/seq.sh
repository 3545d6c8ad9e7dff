#!/usr/bin/env bash
# seq.sh - sequential throughput: fio writes then reads 1 GiB with 1 MiB
# blocks (buffered I/O, end_fsync=1, page cache dropped between write and
# read) on three targets measured in the same run:
#   local     a directory on the local disk (the ceiling)
#   bindfs    a bindfs --multithreaded FUSE passthrough of a local directory
#             (the cost of FUSE alone)
#   twinfs    a private TwinFS local cluster (deploy/local-cluster) whose
#             iods keep their data on the same local disk
# Prints MB/s and TwinFS's ratio to both baselines; writes a TSV.
#
#   test/bench/seq.sh [-s SIZE] [-o OUT.tsv] [-d SCRATCH_DIR]
# Needs root (mounts, drop_caches), fio and bindfs.  See README.md here.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SIZE=1G
OUT=
SCRATCH=/var/tmp/twinfs-bench
while getopts "s:o:d:h" o; do
	case $o in
	s) SIZE=$OPTARG ;;
	o) OUT=$OPTARG ;;
	d) SCRATCH=$OPTARG ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
OUT=${OUT:-$SCRATCH/seq-$(date -u +%Y%m%dT%H%M%SZ).tsv}
[[ $(id -u) == 0 ]] || { echo "seq.sh: needs root (FUSE mounts, drop_caches)" >&2; exit 1; }
for b in fio bindfs; do
	command -v $b >/dev/null || { echo "seq.sh: $b missing (apt-get install fio bindfs)" >&2; exit 1; }
done

mkdir -p "$SCRATCH"
export TWINFS_RUN_DIR=$SCRATCH/cluster
export TWINFS_MOUNT=$SCRATCH/twinfs
export TWINFS_PORT=${TWINFS_PORT:-18590}
export TWINFS_CLUSTER=bench
LC=$REPO/deploy/local-cluster
BINDFS_SRC=$SCRATCH/bindfs-src
BINDFS_MNT=$SCRATCH/bindfs
BINDFS_PID=

cleanup() {
	set +e
	if mountpoint -q "$BINDFS_MNT"; then fusermount3 -u "$BINDFS_MNT"; fi
	"$LC" down >/dev/null 2>&1
	rm -rf "$SCRATCH/local" "$BINDFS_SRC" "$TWINFS_RUN_DIR"
}
trap cleanup EXIT

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# run_fio DIR RW -> MB/s (fio's bw, in MB/s = 10^6 bytes/s)
run_fio() {
	local dir=$1 rw=$2 json
	json=$(fio --name=seq --directory="$dir" --filename=bench.dat --rw="$rw" \
		--bs=1M --size="$SIZE" --ioengine=psync --direct=0 --end_fsync=1 \
		--numjobs=1 --output-format=json 2>/dev/null)
	python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
side = j["write"] if sys.argv[1] == "write" else j["read"]
print("%.1f" % (side["bw_bytes"] / 1e6))' "$rw" <<<"$json"
}

declare -A W R
measure() { # NAME DIR
	W[$1]=$(run_fio "$2" write)
	drop_caches
	R[$1]=$(run_fio "$2" read)
	rm -f "$2/bench.dat"
	drop_caches
	printf '%-8s write %8s MB/s   read %8s MB/s\n' "$1" "${W[$1]}" "${R[$1]}"
}

echo "seq.sh: $SIZE sequential, 1 MiB blocks, fio psync, end_fsync=1; scratch $SCRATCH"
mkdir -p "$SCRATCH/local"
measure local "$SCRATCH/local"

mkdir -p "$BINDFS_SRC" "$BINDFS_MNT"
bindfs --multithreaded "$BINDFS_SRC" "$BINDFS_MNT"
measure bindfs "$BINDFS_MNT"
fusermount3 -u "$BINDFS_MNT"

"$LC" up >/dev/null
measure twinfs "$TWINFS_MOUNT"
"$LC" down >/dev/null

ratio() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); print('%.2f' % (a / b if b else 0))" "$1" "$2"; }
echo
echo "twinfs / local : write $(ratio "${W[twinfs]}" "${W[local]}")   read $(ratio "${R[twinfs]}" "${R[local]}")"
echo "twinfs / bindfs: write $(ratio "${W[twinfs]}" "${W[bindfs]}")   read $(ratio "${R[twinfs]}" "${R[bindfs]}")"

{
	printf 'date\ttarget\tsize\twrite_MBps\tread_MBps\twrite_ratio_local\tread_ratio_local\twrite_ratio_bindfs\tread_ratio_bindfs\n'
	for t in local bindfs twinfs; do
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$SIZE" "${W[$t]}" "${R[$t]}" \
			"$(ratio "${W[$t]}" "${W[local]}")" "$(ratio "${R[$t]}" "${R[local]}")" \
			"$(ratio "${W[$t]}" "${W[bindfs]}")" "$(ratio "${R[$t]}" "${R[bindfs]}")"
	done
} >"$OUT"
echo "results: $OUT"
