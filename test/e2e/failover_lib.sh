# failover_lib.sh - shared by the t_failover_*.sh drills (source it after
# lib.sh, before e2e_begin).  Short timers make the drills fast:
# monitor_interval 500 ms (mgrd and client), request_timeout 2 s, unless the
# caller's environment says otherwise.

export TWINFS_MONITOR_INTERVAL=${TWINFS_MONITOR_INTERVAL:-500ms}
export TWINFS_REQUEST_TIMEOUT=${TWINFS_REQUEST_TIMEOUT:-2s}
export TWINFS_MOUNT_OPTS=${TWINFS_MOUNT_OPTS:-allow_other,monitor_interval=$(
	awk -v v="$TWINFS_MONITOR_INTERVAL" 'BEGIN { n = v + 0
		if (v ~ /ms$/) print n; else if (v ~ /s$/) print n * 1000; else print n }')}
# request_timeout in ms, for the time limits the drills check.
RT_MS=$(awk -v v="$TWINFS_REQUEST_TIMEOUT" 'BEGIN { n = v + 0
	if (v ~ /ms$/) print n; else if (v ~ /s$/) print n * 1000; else print n }')
MI_MS=$(awk -v v="$TWINFS_MONITOR_INTERVAL" 'BEGIN { n = v + 0
	if (v ~ /ms$/) print n; else if (v ~ /s$/) print n * 1000; else print n }')

# now_ms, iod_state, wait_state and wait_log are in lib.sh.

# wait_resync_rejoin N TIMEOUT_MS: iod N came back through a resync: its
# state is resyncing, or already up again with mgrd's log showing the
# down -> resyncing transition (a short resync can end between two polls).
wait_resync_rejoin() {
	local out
	out=$(wait_state "$1" '^(resyncing|up)' "$2") || { echo "$out"; return 1; }
	if [[ $(iod_state "$1") == up* ]] &&
		! grep -q "iod $1 (.*) down -> resyncing" "$TWINFS_RUN_DIR/logs/mgrd.log"; then
		echo "up without a resync (mgrd.log has no 'iod $1 ... down -> resyncing')"
		return 1
	fi
	echo "$out"
}

# silenced_write_drill NAME WHAT SIZE CUT...: copy SIZE random bytes to
# $M/f with stall_copy.py; after a quarter, run CUT... (silence iod 2: a
# hang or a partition).  Checks: the longest 1 MiB write stall is within
# request_timeout + 1 s (NAME-resumes-in-time), the bytes are right
# (NAME-bytes), and mgrd marks iod 2 down and needing resync
# (NAME-map-down).  WHAT names the cut in the log line.
silenced_write_drill() {
	local n=$1 what=$2 size=$3 wpid stall out
	shift 3
	head -c "$size" /dev/urandom >"$T/src"
	"$PY" "$E2E_DIR/stall_copy.py" "$T/src" "$M/f" >"$T/w.out" 2>&1 &
	wpid=$!
	wait_size "$M/f" $((size / 4)) || fail "$n-progress" "no progress"
	"$@"
	if wait $wpid; then
		stall=$(tail -n 1 "$T/w.out")
		echo "# longest 1 MiB write stall with iod 2 $what: $stall ms (request_timeout $RT_MS ms)"
		((stall <= RT_MS + 1000)) && pass "$n-resumes-in-time" ||
			fail "$n-resumes-in-time" "$stall ms > $((RT_MS + 1000)) ms"
	else
		fail "$n-resumes-in-time" "writer failed: $(tail -n 2 "$T/w.out" | tr '\n' ' ')"
	fi
	assert_same_file "$n-bytes" "$T/src" "$M/f"
	out=$(wait_state 2 '^down,needs-resync' $((2 * MI_MS + RT_MS + 1000))) &&
		pass "$n-map-down" || fail "$n-map-down" "$out"
}

# wait_size FILE BYTES: wait (up to 60 s) until FILE holds at least BYTES.
wait_size() {
	local i
	for ((i = 0; i < 1200; i++)); do
		(($(stat -c %s "$1" 2>/dev/null || echo 0) >= $2)) && return 0
		sleep 0.05
	done
	return 1
}

# signal_iod N SIG PATTERN MS: send SIG to iod N; 0 once its log says
# PATTERN after that (waiting up to MS), 1 if not.
signal_iod() {
	local log=$TWINFS_RUN_DIR/logs/iod$1.log n
	n=$(wc -l <"$log")
	kill -"$2" "$(cat "$TWINFS_RUN_DIR/pids/iod$1.pid")" || return 1
	wait_log "$log" "$n" "$3" "$4"
}

# read_via_each_twin NAME FN: FN prints what it reads of a file of group
# 0.  Run with both twins up (reads alternate between them), then with
# iod 1 down (iod 2 serves every read): the two must agree.  iod 1 comes
# back (a resync).  BOTH is set to FN's answer.
read_via_each_twin() {
	local out
	drop_caches
	BOTH=$("$2")
	lc kill-iod 1 >/dev/null
	out=$(wait_state 1 '^down' 10000) && pass "$1-iod1-down" || fail "$1-iod1-down" "$out"
	drop_caches
	assert_eq "$1-same-through-iod2" "$BOTH" "$("$2")"
	lc start-iod 1 >/dev/null
	wait_state 1 '^resyncing' 10000 >/dev/null &&
		ctl rebuild 1 >/dev/null   # a no-op when mgrd started it
	out=$(wait_state 1 '^up$' 60000) && pass "$1-iod1-back" || fail "$1-iod1-back" "iod 1: $out"
}

# slow_rebuild NAME BYTES: a full rebuild of iod 2 at 4 MB/s (both twins
# up), and wait until mgrd says it has copied BYTES (up to 30 s).
slow_rebuild() {
	local out t0
	ctl rebuild 2 --full --rate-limit 4 >"$T/rb.out" 2>&1 &&
		pass "$1-rebuild-started" || fail "$1-rebuild-started" "$(cat "$T/rb.out")"
	out=$(wait_state 2 '^resyncing' 10000) && pass "$1-resyncing" ||
		fail "$1-resyncing" "$out"
	t0=$(now_ms)
	until (($(rjob 2 bytes_done 2>/dev/null || echo 0) >= $2)); do
		(($(now_ms) - t0 > 30000)) && break
		sleep 0.1
	done
}

# rjob N FIELD...: the named fields of iod N's resync job record
# (`twinfsctl rebuild --status --json N`), space-separated.
rjob() {
	local n=$1
	shift
	ctl -t 2000 rebuild --status --json "$n" 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
print(" ".join(str(j[k]) for k in sys.argv[1:]))' "$@"
}

# netns_pair TAG OCTET: for the partition drills, two network namespaces
# joined by a veth pair: sets NS_A and NS_B (their names), VETH_B (the end
# in NS_B, the link to cut) and NET (10.OCTET.x, a /24 that exists only
# there: NET.1 in NS_A, NET.2 in NS_B).  Returns non-zero (and removes
# what it made) when they cannot be made.  netns_pair_del removes them.
netns_pair() {
	NS_A=$1A$$ NS_B=$1B$$ VETH_B=v$1B$$
	NET=10.$2.$(($$ % 250 + 1))
	if ip netns add "$NS_A" && ip netns add "$NS_B" &&
		ip link add "v$1A$$" netns "$NS_A" type veth peer name "$VETH_B" netns "$NS_B" &&
		ip -n "$NS_A" addr add "$NET.1/24" dev "v$1A$$" &&
		ip -n "$NS_B" addr add "$NET.2/24" dev "$VETH_B" &&
		ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up &&
		ip -n "$NS_A" link set "v$1A$$" up && ip -n "$NS_B" link set "$VETH_B" up; then
		return 0
	fi
	netns_pair_del
	return 1
}
netns_pair_del() {
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
}
