# lib.sh - shell functions shared by the benchmark scripts here that bring
# up their own deploy/local-cluster (journal_modes.sh, channel_modes.sh).
# Sourced; needs TOOL=(python3 .../benchtool.py) for bench_cpu_tw.

# bench_port_block FIRST LAST [WIDTH]: the first P of FIRST, FIRST+WIDTH,
# ... whose WIDTH (default 5) ports P..P+WIDTH-1 are all free on this host
# and end by LAST + 4 (so LAST is the last P of the default); nothing if
# none is.
bench_port_block() {
	local p q busy w=${3:-5}
	for ((p = $1; p + w - 1 <= $2 + 4; p += w)); do
		busy=0
		for ((q = p; q < p + w; q++)); do
			[[ -z $(ss -Htan "( sport = :$q )" 2>/dev/null) ]] || busy=1
		done
		((busy)) || { echo "$p"; return; }
	done
}

# mounted MNT: whether MNT is a mount point now.
mounted() { awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# bench_cpu_tw: user+sys CPU seconds of every process of the cluster of
# TWINFS_RUN_DIR (mgrd, the four iods, the mount).
bench_cpu_tw() { "${TOOL[@]}" cpu $(cat "$TWINFS_RUN_DIR"/pids/{mgrd,iod1,iod2,iod3,iod4,mount}.pid); }

# bench_remove_work WHO: remove the work directory WORK, unless the mount
# TWINFS_MOUNT is still there (then say so and leave it).
bench_remove_work() {
	if mounted "${TWINFS_MOUNT:-/nonexistent}"; then
		echo "$1: $TWINFS_MOUNT is still mounted; left $WORK in place" >&2
	else
		rm -rf --one-file-system "$WORK"
	fi
}

say() { printf '%s %s\n' "$(date -u +%T)" "$*"; }
die() { echo "$BENCH_WHO: $*" >&2; exit 1; }

# bench_start: what every such script checks first (root, fio), then BUILD
# (TWINFS_BUILD_DIR made absolute, default <repo>/build) and OUT (created,
# made absolute).  Needs BENCH_WHO (the script's name), REPO and OUT.
bench_start() {
	[[ $(id -u) == 0 ]] || die "needs root (FUSE mounts, drop_caches)"
	command -v fio >/dev/null || die "needs fio"
	BUILD=${TWINFS_BUILD_DIR:-$REPO/build}
	[[ $BUILD == /* ]] || BUILD=$PWD/$BUILD
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
}

# bg_wait CMD...: run CMD in the background and wait for it, its PID in
# BG_PID meanwhile: a signal then interrupts the wait and runs the caller's
# trap at once (which stops BG_PID), where a foreground command would delay it.
bg_wait() {
	local rc=0
	"$@" &
	BG_PID=$!
	wait "$BG_PID" || rc=$?
	BG_PID=
	return $rc
}
