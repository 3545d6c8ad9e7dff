#!/usr/bin/env bash
# mgrd_scale.sh - the namespace at scale: one twinfs-mgrd, no iods (a
# create only decides a layout) and no mount, driven over the wire by
# mgrd_load (mgrd_load.c; README.md here).
#
#   test/bench/mgrd_scale.sh [N] [PER_DIR]       (default 1000000 1000)
#
# Starts mgrd on a private directory (a config of two twin groups that are
# never started, a port block in 31300-31395), runs `mgrd_load run` to N
# empty files, PER_DIR per directory (checkpoints at 10 k, 100 k, 1 M,
# 10 M: create and lookup rates, mgrd's resident memory per inode), then
# times two restarts until mgrd answers a GETATTR (`mgrd_load ping`):
#   kill -9  -> start: the last snapshot plus the replay of its log
#   SIGTERM  -> start: a clean stop writes a snapshot; the start loads it
# and prints a table.  Needs no root.  TWINFS_BUILD_DIR: the build to use
# (default <repo>/build).  Never a timed assertion: figures of a shared
# machine vary.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/test/bench
BENCH_WHO=mgrd_scale
. "$HERE/lib.sh"

N=${1:-1000000}
PER_DIR=${2:-1000}
BUILD=${TWINFS_BUILD_DIR:-$REPO/build}
[[ $BUILD == /* ]] || BUILD=$PWD/$BUILD
MGRD=$BUILD/mgrd/twinfs-mgrd
LOAD=$BUILD/test/bench/mgrd_load
[[ -x $MGRD && -x $LOAD ]] || die "build $BUILD first (twinfs-mgrd, mgrd_load)"
PORT=$(bench_port_block 31300 31395)
[[ -n $PORT ]] || die "no free port block in 31300-31395"
WORK=$(mktemp -d /var/tmp/twinfs-mgrd-scale.XXXXXX)
CONF=$WORK/twinfs.conf
MGRD_PID=

cleanup() {
	if [[ -n $MGRD_PID ]] && kill -0 "$MGRD_PID" 2>/dev/null; then
		kill -9 "$MGRD_PID" 2>/dev/null || true
		wait "$MGRD_PID" 2>/dev/null || true
	fi
	rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

# Four iods in two groups are named (mgrd needs a map), none started.
(
	umask 077
	cat <<EOF
[cluster]
name = twinfs
session_timeout = 600s

[mgrd]
host = 127.0.0.1
port = $PORT
dir = $WORK/mgrd
EOF
	for i in 1 2 3 4; do
		printf '\n[iod %d]\nhost = 127.0.0.1\nport = %d\ndir = %s/iod%d\ngroup = %d\n' \
			"$i" $((PORT + i)) "$WORK" "$i" $(((i - 1) / 2))
	done
) >"$CONF"
mkdir -m 700 "$WORK/mgrd"

start_mgrd() {
	"$MGRD" -c "$CONF" >>"$WORK/mgrd.log" 2>&1 &
	MGRD_PID=$!
}

# restart SIGNAL: stop mgrd with SIGNAL, start it; T: seconds until it
# serves; STOP: seconds from the signal until the old mgrd was gone (not in
# T); PHASES: what the new mgrd's log says of its start (the snapshot's
# decode, the log's replay), to tell where a slow start went.
restart() {
	local t0 t1 from
	t0=$(date +%s.%N)
	kill -"$1" "$MGRD_PID"
	wait "$MGRD_PID" 2>/dev/null || true
	t1=$(date +%s.%N)
	STOP=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	from=$(($(wc -l <"$WORK/mgrd.log") + 1))
	t0=$(date +%H:%M:%S.%N)
	start_mgrd
	T=$("$LOAD" ping 127.0.0.1 "$PORT" 600) || die "mgrd did not come back (log: $WORK/mgrd.log)"
	T=${T#serving after }
	T=${T% s}
	# Each milestone of the start, in seconds after it (log timestamps;
	# a run across midnight shows nonsense here).
	PHASES=$(tail -n +"$from" "$WORK/mgrd.log" | awk -v t0="$t0" '
		function sec(hms, a) { split(hms, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
		{ split($1, dt, "T"); at = sec(dt[2]) - sec(t0); what = "" }
		/bytes decoded in/ { match($0, /decoded in [0-9]+ ms \([0-9]+ ms of CPU\)/); what = "decoded in " substr($0, RSTART + 11, RLENGTH - 11) }
		/replayed [0-9]+ records/ { match($0, /replayed [0-9]+ records/); what = substr($0, RSTART, RLENGTH) }
		/state loaded/ { what = "loaded" }
		/listening on/ { what = "listening" }
		/new session/ { what = "session" }
		what != "" && !seen[what]++ { printf "%s%s %.2f s", sep, what, at; sep = ", " }')
}

say "mgrd_scale: N=$N per_dir=$PER_DIR port=$PORT work=$WORK"
start_mgrd
"$LOAD" ping 127.0.0.1 "$PORT" 60 >/dev/null || die "mgrd did not start (log: $WORK/mgrd.log)"
# Each checkpoint shows as it is reached (stderr), the table comes last.
OUT=$("$LOAD" run 127.0.0.1 "$PORT" "$N" "$PER_DIR" 64 "$MGRD_PID" | tee /dev/stderr) ||
	die "mgrd_load failed"
snap=$(stat -c %s "$WORK/mgrd/snapshot" 2>/dev/null || echo 0)
log=$(stat -c %s "$WORK/mgrd/journal" 2>/dev/null || echo 0)
say "restart after kill -9 (snapshot $snap B + log $log B to replay)"
restart 9
T_KILL=$T
P_KILL=$PHASES
say "restart after SIGTERM (clean stop writes a snapshot)"
restart TERM
T_TERM=$T
P_TERM=$PHASES
S_TERM=$STOP
RSS_AFTER=$(awk '/^VmRSS/ { print $2 }' "/proc/$MGRD_PID/status")

echo
printf '%-10s %12s %12s %10s %14s\n' files create/s lookup/s rss_MiB B/inode
echo "$OUT" | awk '/^checkpoint/ {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	printf "%-10s %12s %12s %10.0f %14s\n", v["files"], v["create_rate"],
		v["stat_rate"], v["rss_kb"] / 1024, v["bytes_per_inode"] }'
printf 'restart, kill -9 (snapshot + replay): %s s (%s)\n' "$T_KILL" "$P_KILL"
printf 'restart, SIGTERM (snapshot only):     %s s (%s; the stop took %s s)\n' \
	"$T_TERM" "$P_TERM" "$S_TERM"
printf 'rss after the restart:                %d MiB\n' $((RSS_AFTER / 1024))
