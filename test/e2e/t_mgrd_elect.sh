#!/usr/bin/env bash
# t_mgrd_elect.sh - the mgrd pair's election (docs/ARCHITECTURE.md
# "Election") on one cluster whose single mgrd becomes a pair: mgrd 1 wins
# and serves, mgrd 2 refuses; SIGSTOP of mgrd 1 lets its lease run out, but
# mgrd 2, marked stale (no replication here), cannot take over until it is
# started with --accept-stale; after SIGCONT mgrd 1 has stepped down and
# serves nothing, and the iods refuse its older term; a restarted iod keeps
# its promise; finally a kill -9 of the active under a metadata load, and the
# stall until the other answers (printed, not asserted: no timed checks).
# Speaks the protocol raw (mgrd_elect.py over twire.py): the followers
# (clients, iods, twinfsctl) are not this test's subject.
# MGRD_V=-v in the environment starts both mgrds with debug logs.
export TWINFS_METRICS=off   # PORT+5 is mgrd 2's
. "$(dirname "$0")/lib.sh"
e2e_begin mgrd-elect

EL="$PY $E2E_DIR/mgrd_elect.py"
MGRD=$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd
CONF=$TWINFS_RUN_DIR/twinfs.conf
LOGS=$TWINFS_RUN_DIR/logs
H=127.0.0.1
P1=$TWINFS_PORT
P2=$((TWINFS_PORT + 5))
CL=$TWINFS_CLUSTER
M2PID=

# mgrd 2 is ours to stop; mgrd 1 goes into local-cluster's pid file.
stop_m2() {
	local rc=$?
	if [[ -n $M2PID ]] && kill -0 "$M2PID" 2>/dev/null; then
		kill -CONT "$M2PID" 2>/dev/null
		kill -TERM "$M2PID" 2>/dev/null
		for ((i = 0; i < 100; i++)); do kill -0 "$M2PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$M2PID" 2>/dev/null
	fi
	return $rc
}
trap 'stop_m2; e2e_cleanup' EXIT

start_mgrd() { # ID [ARGS...]: prints the pid
	local id=$1 dir=$TWINFS_RUN_DIR/mgrd
	shift
	((id == 2)) && dir+=2
	mkdir -p -m 700 "$dir"
	echo "=== start mgrd $id $*" >>"$LOGS/mgrd$id.log"
	setsid "$MGRD" -c "$CONF" --id "$id" ${MGRD_V:-} "$@" </dev/null >>"$LOGS/mgrd$id.log" 2>&1 &
	echo $!
}
# wait_serving PORT: until that mgrd answers a client HELLO and GETATTR.
wait_serving() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ $($EL client $H "$1" "$CL") == "0 0" ]] && return 0
		sleep 0.1
	done
	return 1
}
promise() { $EL iod-promise $H $((TWINFS_PORT + $1)) "$CL"; }

# --- a pair: [mgrd 1] is the old mgrd (same port and dir), [mgrd 2] new
cd / && lc umount >/dev/null
lc kill-mgrd >/dev/null
awk -v h=$H -v p1=$P1 -v p2=$P2 -v d="$TWINFS_RUN_DIR" '
	/^\[/ { sec = $0 }
	sec == "[mgrd]" && /^(host|port|dir) *=/ { next }
	{ print }
	END { printf "\n[mgrd 1]\nhost = %s\nport = %d\ndir = %s/mgrd\n", h, p1, d
	      printf "\n[mgrd 2]\nhost = %s\nport = %d\ndir = %s/mgrd2\n", h, p2, d }' \
	"$CONF" >"$CONF.new" && chmod 600 "$CONF.new" && mv "$CONF.new" "$CONF"
M1PID=$(start_mgrd 1)
echo "$M1PID" >"$TWINFS_RUN_DIR/pids/mgrd.pid"
M2PID=$(start_mgrd 2)

if wait_serving $P1; then pass mgrd1-wins-and-serves; else fail mgrd1-wins-and-serves "mgrd 1 answers no GETATTR"; fi
# mgrd 2 votes too, after its first lease_time (E4)
wait_log "$LOGS/mgrd2.log" 0 "voted for mgrd 1 in term 1" 15000 && pass mgrd2-votes-for-mgrd1 ||
	fail mgrd2-votes-for-mgrd1 "no vote of mgrd 2 in its log"
assert_eq mgrd2-standby-refuses-clients "-66 -" "$($EL client $H $P2 "$CL")"
assert_eq iods-promise-term1-to-mgrd1 "1 1 2" "$(promise 1)"
echo "# $(grep -m1 'election of the pair' "$LOGS/mgrd1.log" | sed 's/.*mgrd 1: //')"

# --- SIGSTOP mgrd 1: the lease runs out, but mgrd 2 is marked stale
n2=$(wc -l <"$LOGS/mgrd2.log")
kill -STOP "$M1PID"
if wait_log "$LOGS/mgrd2.log" "$n2" "not known to be in sync" 30000; then
	pass mgrd2-stale-does-not-stand
else
	fail mgrd2-stale-does-not-stand "mgrd 2 did not say why it does not stand"
fi
assert_eq mgrd2-stale-does-not-serve "-66 -" "$($EL client $H $P2 "$CL")"
# The voters' own refusal (E6), once mgrd 1's lease has ended at iod 1:
# asking for term 2 as mgrd 2 without --accept-stale.
for ((i = 0; i < 100; i++)); do
	st=$($EL iod-ask $H $((TWINFS_PORT + 1)) "$CL" 2 2 0)
	[[ $st != -16 ]] && break   # EBUSY: the old lease still runs there
	sleep 0.1
done
assert_eq iod-refuses-stale-candidate "-117" "$st"
assert_eq iods-keep-term1 "1 1 2" "$(promise 2)"

# --- mgrd 2 with --accept-stale takes over, in term 2
kill -TERM "$M2PID"
for ((i = 0; i < 100; i++)); do kill -0 "$M2PID" 2>/dev/null || break; sleep 0.1; done
t0=$(now_ms)
M2PID=$(start_mgrd 2 --accept-stale)
if wait_serving $P2; then
	echo "# mgrd 2 (--accept-stale) serving $(($(now_ms) - t0)) ms after its start"
	pass mgrd2-accept-stale-takes-over
else
	fail mgrd2-accept-stale-takes-over "mgrd 2 answers no GETATTR"
fi
assert_eq iods-promise-term2-to-mgrd2 "2 2 1" "$(promise 3)"
grep -q "ACCEPTED AS STALE" "$LOGS/mgrd2.log" && pass accept-stale-is-loud ||
	fail accept-stale-is-loud "no warning in mgrd 2's log"

# --- SIGCONT mgrd 1: it has stepped down, and the iods fence its term
n1=$(wc -l <"$LOGS/mgrd1.log")
kill -CONT "$M1PID"
assert_eq old-active-refuses-clients "-66 -" "$($EL client $H $P1 "$CL")"
wait_log "$LOGS/mgrd1.log" "$n1" "lost the lease" 10000 && pass old-active-stepped-down ||
	fail old-active-stepped-down "mgrd 1 never logged the lost lease"
assert_eq iod-refuses-term1-hello "-116" "$($EL iod-hello $H $((TWINFS_PORT + 4)) "$CL" 1)"
assert_eq iod-accepts-term2-hello "0" "$($EL iod-hello $H $((TWINFS_PORT + 4)) "$CL" 2)"

# --- a voter's restart keeps its promise (the vote file)
lc kill-iod 1 >/dev/null
lc start-iod 1 >/dev/null
for ((i = 0; i < 100; i++)); do
	out=$(promise 1 2>/dev/null) && break
	sleep 0.1
done
assert_eq restarted-iod-keeps-promise "2 2 1" "$out"
assert_eq restarted-iod-refuses-term1 "-116" "$($EL iod-hello $H $((TWINFS_PORT + 1)) "$CL" 1)"

# --- kill -9 of the active under a metadata load: the stall
kill -TERM "$M1PID"
for ((i = 0; i < 100; i++)); do kill -0 "$M1PID" 2>/dev/null || break; sleep 0.1; done
M1PID=$(start_mgrd 1 --accept-stale)
echo "$M1PID" >"$TWINFS_RUN_DIR/pids/mgrd.pid"
# mgrd 1 must be a follower that hears the active refuse it first.
wait_log "$LOGS/mgrd1.log" "$(($(wc -l <"$LOGS/mgrd1.log") - 1))" "standing for term" 15000
out=$($EL stall "$CL" $H $P2 $H $P1 "$M2PID")
M2PID=
if [[ $out == ok* ]]; then
	read -r _ ms n <<<"$out"
	echo "# stall: kill -9 of the active mgrd 2 ($n GETATTRs in the second before) to mgrd 1's first GETATTR reply: $ms ms (lease_time 3 s)"
	pass takeover-after-kill9
else
	fail takeover-after-kill9 "$out"
fi
assert_eq iods-promise-term3-to-mgrd1 "3 1 2" "$(promise 2)"
e2e_end
