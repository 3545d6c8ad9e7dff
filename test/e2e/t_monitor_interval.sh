#!/usr/bin/env bash
# t_monitor_interval.sh - failure detection honours monitor_interval.
# mgrd pings every 2 s; the client's own pings come every 60 s and there
# is no I/O.  A killed iod is `down` within 2 x interval + request_timeout
# (its twin sees the connection reset and reports it at once, so usually
# far sooner).  A hung iod (SIGSTOP: no reset, only silence) can only be
# found by mgrd's pings: `down` after its second missed ping, so within
# 2 x interval + request_timeout and not before about one interval.  The
# scaled-down twin of t_monitor_default.sh.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
export TWINFS_MONITOR_INTERVAL=2s TWINFS_REQUEST_TIMEOUT=1s TWINFS_DOWN_AFTER=2
export TWINFS_MOUNT_OPTS=allow_other,monitor_interval=60000
e2e_begin monitor_interval
trap 'rc=$?; (cd / && lc cont-iod 3 >/dev/null 2>&1); (exit $rc); e2e_cleanup' EXIT

state_of() { ctl -t 1000 status 2>/dev/null | awk -v n="$1" '$1 == n { print $5 }'; }
MI=2000 RT=1000
# Timers fire late by some ms on a loaded machine (a sanitizer build on
# 2 vCPUs once declared a hung iod down 31 ms past the bound), and
# 2 x interval + request_timeout is the worst case with no room for that;
# a tenth of an interval is room, and still far below a third ping.
SLACK=$((MI / 10))
# down_in N: wait (up to 2 x interval + request_timeout + 3 s) until iod N
# is down; prints the milliseconds from $t0 to mgrd's log line of the
# change (status polls are slow while an iod hangs: they ping it) and the
# last state seen.
down_in() {
	local st= el
	while (($(now_ms) - t0 <= 2 * MI + RT + 3000)); do
		st=$(state_of "$1")
		[[ $st == down* ]] && break
		sleep 0.05
	done
	el=$(state_change_ms "$1" 'down' "$t0")
	if [[ $st == down* && -n $el ]]; then
		echo "$el $st"
	else
		echo "$(($(now_ms) - t0)) $st"
	fi
}
sleep 3
[[ $(state_of 2) == up && $(state_of 3) == up ]] && pass interval-all-up ||
	fail interval-all-up "$(state_of 2) $(state_of 3)"

t0=$(now_ms)
(cd / && lc kill-iod 2 >/dev/null)
read -r el st < <(down_in 2)
echo "# killed iod 2 down after $el ms (interval $MI ms, request_timeout $RT ms)"
[[ $st == down* ]] && ((el <= 2 * MI + RT + SLACK)) && pass interval-killed-down ||
	fail interval-killed-down "'$st' after $el ms"

t0=$(now_ms)
(cd / && lc stop-iod 3 >/dev/null)
read -r el st < <(down_in 3)
echo "# hung iod 3 down after $el ms (interval $MI ms, request_timeout $RT ms)"
[[ $st == down* ]] && ((el <= 2 * MI + RT + SLACK)) && pass interval-hung-down ||
	fail interval-hung-down "'$st' after $el ms"
((el >= MI * 8 / 10)) && pass interval-hung-not-early ||
	fail interval-hung-not-early "down after only $el ms"
(cd / && lc cont-iod 3 >/dev/null)
(cd / && lc start-iod 2 >/dev/null)
e2e_end
