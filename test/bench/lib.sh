# lib.sh - shell functions shared by the benchmark scripts here that bring
# up their own deploy/local-cluster (readers.sh, pair_cost.sh, csum_cost.sh,
# channel_modes.sh, journal_modes.sh, write_trace.sh, mount_mem.sh) and by
# mgrd_scale.sh.  Sourced; needs BENCH_WHO (the script's name, for its
# messages), TOOL=(python3 .../benchtool.py) for bench_cpu_tw, LC
# (deploy/local-cluster) for bench_cleanup.

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

# bench_args ARG...: parse the command line of a script that takes the
# options BENCH_OPTS names (default "quick rounds out"; its usage line lists
# them in that order):
#   quick          --quick: QUICK=1
#   rounds         --rounds N: ROUNDS, a positive number (default: ROUNDS as
#                  the caller set it, else 3)
#   out            --out DIR: OUT
#   help           -h, --help: print the script's header comment, exit 0
#   NAME:VAR:WHAT  --NAME WHAT: VAR (default: as the caller set it)
# Sets QUICK (default 0), OUT (default empty) and ARGS (the arguments as one
# string); anything else prints the usage line (naming $0, as the scripts'
# headers do) and exits 2.  Needs BENCH_WHO.
# shellcheck disable=SC2034 # QUICK, ARGS: the caller's
bench_args() {
	local opts=" ${BENCH_OPTS:-quick rounds out} " o v usage="usage: $0"
	QUICK=0 OUT='' ARGS="$*"
	[[ $opts != *" rounds "* ]] || ROUNDS=${ROUNDS:-3}
	for o in $opts; do
		case $o in
		quick) usage+=" [--quick]" ;;
		rounds) usage+=" [--rounds N]" ;;
		out) usage+=" [--out DIR]" ;;
		*:*:*) usage+=" [--${o%%:*} ${o##*:}]" ;;
		esac
	done
	while (($#)); do
		case $1 in
		--quick) [[ $opts == *" quick "* ]] || break; QUICK=1 ;;
		--rounds) [[ $opts == *" rounds "* ]] || break; ROUNDS=${2:?--rounds N}; shift ;;
		--out) [[ $opts == *" out "* ]] || break; OUT=${2:?--out DIR}; shift ;;
		-h | --help)
			[[ $opts == *" help "* ]] || break
			awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
			exit 0 ;;
		--?*)
			v=
			for o in $opts; do [[ $o != "${1#--}":*:* ]] || v=${o#*:}; done
			[[ -n $v ]] || break
			printf -v "${v%%:*}" '%s' "${2:?$1 ${v#*:}}"
			shift ;;
		*) break ;;
		esac
		shift
	done
	if (($#)); then echo "$usage" >&2; exit 2; fi
	[[ $opts != *" rounds "* || $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
}

# bench_stop_bg: stop the measurement bg_wait runs (BG_PID), if any.
bench_stop_bg() {
	if [[ -n ${BG_PID:-} ]]; then
		kill "$BG_PID" 2>/dev/null || true
		wait "$BG_PID" 2>/dev/null || true
	fi
	BG_PID=
}

# bench_cleanup: the EXIT trap of a script with a private local cluster:
# stop BG_PID, then the cluster of TWINFS_RUN_DIR if that directory exists
# (local-cluster down signals only the PIDs it recorded; its output to
# BENCH_DOWN_LOG, default /dev/null), unless CLUSTER_UP is 0 (a script that
# tracks it), then remove WORK (bench_remove_work).  The exit status stays
# the script's.  A script that has more to undo calls it from its own trap,
# last.
bench_cleanup() {
	set +e
	trap - EXIT INT TERM
	bench_stop_bg
	if [[ -d ${TWINFS_RUN_DIR:-} ]] && ((${CLUSTER_UP:-1})); then
		(cd / && "$LC" down >>"${BENCH_DOWN_LOG:-/dev/null}" 2>&1) ||
			echo "$BENCH_WHO: local-cluster down failed" >&2
	fi
	bench_remove_work "$BENCH_WHO"
}

# bench_traps [CLEANUP]: CLEANUP (default bench_cleanup) on exit; SIGINT and
# SIGTERM exit 130 and 143 through it.
bench_traps() {
	# shellcheck disable=SC2064 # the name, now
	trap "${1:-bench_cleanup}" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

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
# trap at once (bench_cleanup stops BG_PID), where a foreground command
# would delay it.
bg_wait() {
	local rc=0
	"$@" &
	BG_PID=$!
	wait "$BG_PID" || rc=$?
	BG_PID=
	return $rc
}
