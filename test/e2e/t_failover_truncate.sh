#!/usr/bin/env bash
# t_failover_truncate.sh - failover drill, truncate during a failover:
# mgrd's TRUNCATE to a column's primary fails while the group fails over
# (primary refused, forward to a dead twin, forward overtaken by a new
# epoch); mgrd retries at the primary of the next map, so truncate(1) right
# after kill -9 or SIGSTOP of an iod succeeds, the size is right, and the
# bytes below it are intact.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
# The last drill needs twins that stay `resyncing` (not readable): no
# automatic resync here.
export TWINFS_AUTO_RESYNC=false
e2e_begin failover_truncate
e2e_tmpdir T

head -c $((8 << 20)) /dev/urandom >"$T/src"
for i in 1 2 3; do cp "$T/src" "$M/t$i" || fail truncate-setup "cp t$i"; done

# trunc_ok NAME FILE SIZE LIMIT_MS
trunc_ok() {
	local t0 dt
	t0=$(now_ms)
	if truncate -s "$3" "$2" 2>"$T/err"; then
		dt=$(($(now_ms) - t0))
		echo "# $1: $dt ms"
		((dt <= $4)) && pass "$1" || fail "$1" "took $dt ms (limit $4)"
	else
		fail "$1" "$(cat "$T/err")"
	fi
	assert_eq "$1-size" "$3" "$(stat -c %s "$2")"
	cmp -n "$3" "$T/src" "$2" >/dev/null && pass "$1-bytes" || fail "$1-bytes"
}

(cd / && lc kill-iod 3 >/dev/null)
trunc_ok truncate-after-kill "$M/t1" 1000 $((2 * RT_MS))
(cd / && lc kill-iod 1 >/dev/null)
trunc_ok truncate-after-second-kill "$M/t2" 3000000 $((2 * RT_MS))
(cd / && lc start-iod 1 >/dev/null && lc start-iod 3 >/dev/null)
for ((i = 0; i < 100; i++)); do
	[[ $(iod_state 1) == resyncing && $(iod_state 3) == resyncing ]] && break
	sleep 0.1
done
# Groups now: iod 2 up + 1 resyncing, iod 4 up + 3 resyncing.  Hang iod 4:
# group 1 has no readable twin, so truncate must fail with EIO, not hang.
(cd / && lc stop-iod 4 >/dev/null)
t0=$(now_ms)
truncate -s 10 "$M/t3" 2>/dev/null && fail truncate-group-failed-eio "succeeded" ||
	{ dt=$(($(now_ms) - t0)); echo "# truncate with group 1 failed: error after $dt ms"
	  ((dt <= 3 * RT_MS)) && pass truncate-group-failed-eio ||
		fail truncate-group-failed-eio "after $dt ms"; }
(cd / && lc cont-iod 4 >/dev/null)
e2e_end
