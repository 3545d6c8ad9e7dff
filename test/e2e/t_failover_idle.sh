#!/usr/bin/env bash
# t_failover_idle.sh - failover drill, detection without I/O: with
# monitor_interval 500 ms and nobody writing, a killed iod is `down` in the
# map within 2 x monitor_interval + request_timeout (mgrd's own pings: two
# misses), and a hung one (SIGSTOP) within the same bound.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_idle

LIMIT=$((2 * MI_MS + RT_MS))
# mgrd pings every interval; let a few go by with everyone up.
sleep $(awk -v m="$MI_MS" 'BEGIN { print 3 * m / 1000 }')
assert_eq idle-all-up "up up up up" "$(for n in 1 2 3 4; do iod_state $n; done | tr '\n' ' ' | sed 's/ $//')"
(cd / && lc kill-iod 2 >/dev/null)
out=$(wait_state 2 '^down' $LIMIT) && { pass idle-killed-down; echo "# killed iod down after $out ms (limit $LIMIT)"; } ||
	fail idle-killed-down "$out"
(cd / && lc stop-iod 3 >/dev/null)
out=$(wait_state 3 '^(suspect|down)' $LIMIT) && pass idle-hung-suspect || fail idle-hung-suspect "$out"
out=$(wait_state 3 '^down' $LIMIT) && { pass idle-hung-down; echo "# hung iod down after $out ms (limit $LIMIT)"; } ||
	fail idle-hung-down "$out"
(cd / && lc cont-iod 3 >/dev/null)
e2e_end
