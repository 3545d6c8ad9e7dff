#!/usr/bin/env bash
# t_monitor_default.sh - failure detection drill with the default timers
# (monitor_interval 30 s, request_timeout 5 s, down_after 2, for mgrd and
# the client) and no I/O: a killed iod is reported `down` within
# 2 x 30 s + 5 s.  About 70 s, so run-all skips it unless TWINFS_SLOW=1.
# e2e: slow
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
unset TWINFS_MONITOR_INTERVAL TWINFS_REQUEST_TIMEOUT TWINFS_DOWN_AFTER
export TWINFS_MOUNT_OPTS=allow_other
e2e_begin monitor_default

# Let mgrd's monitor settle into its rhythm with everyone up.
sleep 2
[[ $(ctl status 2>/dev/null | awk '$1 == 2 { print $5 }') == up ]] &&
	pass default-up || fail default-up
t0=$(now_ms)
(cd / && lc kill-iod 2 >/dev/null)
LIMIT=$((2 * 30000 + 5000))
st=
while (($(now_ms) - t0 <= LIMIT)); do
	st=$(ctl -t 2000 status 2>/dev/null | awk '$1 == 2 { print $5 }')
	[[ $st == down* ]] && break
	sleep 0.5
done
el=$(($(now_ms) - t0))
if [[ $st == down* ]]; then
	pass default-down-in-time
	echo "# killed iod down after $el ms with the default timers (limit $LIMIT ms)"
else
	fail default-down-in-time "still '$st' after $el ms"
fi
(cd / && lc start-iod 2 >/dev/null)
e2e_end
