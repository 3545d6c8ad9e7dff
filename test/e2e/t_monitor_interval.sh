#!/usr/bin/env bash
# t_monitor_interval.sh - issue 3: mgrd's monitor honours monitor_interval.
# With mgrd pinging every 2 s and nobody else watching (the client's own
# pings every 60 s, no I/O), a killed iod is `down` after its second
# missed ping: within 2 x interval + request_timeout, and not before about
# one interval (the first miss comes at the next ping, the second one
# interval later).  The scaled-down twin of t_monitor_default.sh.
. "$(dirname "$0")/lib.sh"
export TWINFS_MONITOR_INTERVAL=2s TWINFS_REQUEST_TIMEOUT=1s TWINFS_DOWN_AFTER=2
export TWINFS_MOUNT_OPTS=allow_other,monitor_interval=60000
e2e_begin monitor_interval

now_ms() { date +%s%3N; }
MI=2000 RT=1000
sleep 3
for k in 1 2; do
	n=$((k == 1 ? 2 : 3))
	[[ $(ctl status 2>/dev/null | awk -v n=$n '$1 == n { print $5 }') == up ]] ||
		fail "interval-up-$k" "iod $n not up"
	t0=$(now_ms)
	(cd / && lc kill-iod $n >/dev/null)
	st=
	while (($(now_ms) - t0 <= 2 * MI + RT + 2000)); do
		st=$(ctl -t 1000 status 2>/dev/null | awk -v n=$n '$1 == n { print $5 }')
		[[ $st == down* ]] && break
		sleep 0.05
	done
	el=$(($(now_ms) - t0))
	echo "# killed iod $n down after $el ms (interval $MI ms, request_timeout $RT ms)"
	[[ $st == down* ]] && ((el <= 2 * MI + RT)) && pass "interval-down-in-time-$k" ||
		fail "interval-down-in-time-$k" "'$st' after $el ms"
	# Not before about one interval: the interval is honoured, no faster
	# path (the client, which would report at once, pings every 60 s).
	((el >= MI * 8 / 10)) && pass "interval-not-early-$k" ||
		fail "interval-not-early-$k" "down after only $el ms"
	(cd / && lc start-iod $n >/dev/null)
	out=
	for ((i = 0; i < 200; i++)); do
		out=$(ctl -t 1000 status 2>/dev/null | awk -v n=$n '$1 == n { print $5 }')
		[[ $out == up ]] && break
		sleep 0.1
	done
done
e2e_end
