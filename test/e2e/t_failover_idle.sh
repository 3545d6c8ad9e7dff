#!/usr/bin/env bash
# t_failover_idle.sh - failover drill, detection without I/O: with
# monitor_interval 500 ms and nobody writing, a killed iod is `down` in the
# map within 2 x monitor_interval + request_timeout (mgrd's own pings: two
# misses), and a hung one (SIGSTOP) is suspect, then down, within the same
# bound.  The times are those of mgrd's log lines, from the kill or stop.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_idle

LIMIT=$((2 * MI_MS + RT_MS))
# How long to poll for a state: the bound, plus a status poll that began
# just before the change and waits request_timeout for a hung iod.
POLL=$((LIMIT + RT_MS + 1000))
# mgrd pings every interval; let a few go by with everyone up.
sleep $(awk -v m="$MI_MS" 'BEGIN { print 3 * m / 1000 }')
assert_eq idle-all-up "up up up up" "$(for n in 1 2 3 4; do iod_state $n; done | tr '\n' ' ' | sed 's/ $//')"

# within_limit NAME IOD REGEX T0: pass NAME if mgrd logged iod IOD's change
# to REGEX within LIMIT ms of T0.
within_limit() {
	local el
	el=$(state_change_ms "$2" "$3" "$4")
	if [[ -n $el ]] && ((el <= LIMIT)); then
		pass "$1"
		echo "# $1: after $el ms (limit $LIMIT)"
	else
		fail "$1" "${el:-no} change to '$3' in mgrd's log within $LIMIT ms (state now '$(iod_state "$2")')"
	fi
}

t0=$(now_ms)
(cd / && lc kill-iod 2 >/dev/null)
wait_state 2 '^down' $POLL >/dev/null
within_limit idle-killed-down 2 'down' "$t0"

t0=$(now_ms)
(cd / && lc stop-iod 3 >/dev/null)
wait_state 3 '^down' $POLL >/dev/null
within_limit idle-hung-suspect 3 'suspect|down' "$t0"
within_limit idle-hung-down 3 'down' "$t0"
(cd / && lc cont-iod 3 >/dev/null)
e2e_end
