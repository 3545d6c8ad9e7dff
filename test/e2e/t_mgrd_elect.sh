#!/usr/bin/env bash
# t_mgrd_elect.sh - the mgrd pair's election with synchronous replication
# (docs/ARCHITECTURE.md "Election", "mgrd pair") on one cluster:
#  1. mgrd 1 wins a term and serves, mgrd 2 joins as the in-sync standby,
#     votes for it and refuses clients; the iods promise the term to mgrd 1.
#  2. kill -9 of the active under a metadata load: the in-sync standby takes
#     over without --accept-stale; the stall from the kill to its first
#     GETATTR reply is printed (never asserted); what was written before
#     the kill reads back byte for byte through a mount of the new active.
#  3. SIGSTOP of the active, then SIGCONT: the other takes over in a newer
#     term; the old one never serves again: it exits (status 3, "Lost
#     lease"); the iods refuse a HELLO of its term.
#  4. a restarted iod keeps its promise (E4) and still refuses the old term.
#  5. stale standby (E6): with the standby stopped the active marks it stale
#     at the voters; once the active is killed the standby does not stand
#     (its log says why) and the voters refuse it (-EUCLEAN), until the old
#     active returns (and takes it back as its standby), or, the same again,
#     until it is started with --accept-stale, which it says loudly.
#  6. both mgrds killed (kill -9, the standby first) while a writer creates
#     and fsyncs files through a mount, then restarted in each order: the
#     one with the newest acknowledged state (the active, which went on
#     alone and marked the other stale) is active again, never the other
#     (it does not stand, its log says why); the writer goes on without an
#     error and every file it saw acknowledged reads back byte for byte;
#     the other joins it again from its log.
# The pair's probes speak the protocol raw (mgrd_elect.py, twire.py): the
# main mount names mgrd 1's address only, so a second mount names the
# active's.
# MGRD_V=-v in the environment starts the mgrds this test starts with debug
# logs.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
e2e_before_up() { export TWINFS_MGRD_PAIR=127.0.0.2; }
e2e_begin mgrd-elect

EL="$PY $E2E_DIR/mgrd_elect.py"
TW="$PY $E2E_DIR/twire.py"
MGRD=$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd
CONF=$TWINFS_RUN_DIR/twinfs.conf
LOGS=$TWINFS_RUN_DIR/logs
CL=$TWINFS_CLUSTER
P=$TWINFS_PORT
H1=127.0.0.1
H2=127.0.0.2
HOST=([1]=$H1 [2]=$H2)
# mgrd 1 was started by local-cluster (pid file); from its first kill on,
# both are this test's children, stopped by the trap.
M1PID=$(cat "$TWINFS_RUN_DIR/pids/mgrd.pid")
M2PID=
M2MNT=$TWINFS_RUN_DIR/mnt2
M2MNTPID=

stop_pid() { # PID: SIGCONT, SIGTERM, and SIGKILL after 10 s
	[[ -n $1 ]] && kill -0 "$1" 2>/dev/null || return 0
	kill -CONT "$1" 2>/dev/null
	kill -TERM "$1" 2>/dev/null
	for ((i = 0; i < 100; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}
stop_ours() {
	local rc=$?
	if [[ -n $M2MNTPID ]]; then
		fusermount3 -u -z "$M2MNT" 2>/dev/null
		stop_pid "$M2MNTPID"
	fi
	stop_pid "$M2PID"
	# mgrd 1, whichever started it: local-cluster's pid file names it.
	kill -CONT "$M1PID" 2>/dev/null
	return $rc
}
trap 'stop_ours; e2e_cleanup' EXIT

# start_mgrd ID [ARGS...]: sets M<ID>PID (our child; pid file for mgrd 1).
start_mgrd() {
	local id=$1 dir=$TWINFS_RUN_DIR/mgrd
	shift
	((id == 2)) && dir+=2
	mkdir -p -m 700 "$dir"
	echo "=== start mgrd $id $*" >>"$LOGS/mgrd$id.log"
	setsid "$MGRD" -c "$CONF" --id "$id" ${MGRD_V:-} "$@" </dev/null >>"$LOGS/mgrd$id.log" 2>&1 &
	printf -v "M${id}PID" '%s' $!
	((id == 1)) && echo $! >"$TWINFS_RUN_DIR/pids/mgrd.pid"
	return 0
}
# gone PID: the process has exited (a zombie of ours counts).
gone() { [[ ! -e /proc/$1/stat ]] || [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]]; }
# exit_status PID: waits (10 s at most) for our child to exit; prints its
# status, or "running".
exit_status() {
	for ((i = 0; i < 100; i++)); do gone "$1" && break; sleep 0.1; done
	if gone "$1"; then wait "$1"; echo $?; else echo running; fi
}
status() { $TW mgrd-status "${HOST[$1]}" $P "$CL" 2>/dev/null; }
# wait_status ID GLOB: until mgrd ID's status matches GLOB (30 s).
wait_status() {
	local s
	for ((i = 0; i < 300; i++)); do
		s=$(status "$1") && [[ $s == $2 ]] && { echo "$s"; return 0; }
		sleep 0.1
	done
	echo "$s"
	return 1
}
term_of() { local s; s=$(status "$1") && set -- $s && echo "$6"; }
promise() { $EL iod-promise $H1 $((P + $1)) "$CL"; }
# promises: every iod's "TERM HOLDER STALE", one line.
promises() { echo $(promise 1) $(promise 2) $(promise 3) $(promise 4); }
# wait_promises "TERM HOLDER STALE": until every iod says so (10 s); the
# active clears the standby's stale mark in its next renewal after the
# standby is in sync, so a takeover drill waits for that.
wait_promises() {
	local want="$1 $1 $1 $1" got
	for ((i = 0; i < 100; i++)); do
		got=$(promises)
		[[ $got == "$want" ]] && break
		sleep 0.1
	done
	echo "$got"
}
# mount2 HOST: a mount of the mgrd at HOST (the main mount names mgrd 1's
# address only); umount2 takes it away.
mount2() {
	mkdir -p "$M2MNT"
	setsid "$TWINFS_BUILD_DIR/fuse-client/twinfs" "$1:$P" "$M2MNT" -f -o "cluster=$CL,allow_other" \
		</dev/null >>"$LOGS/mount2.log" 2>&1 &
	M2MNTPID=$!
	for ((i = 0; i < 150; i++)); do
		awk -v p="$M2MNT" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo && return 0
		sleep 0.1
	done
	return 1
}
# takes_over CHECK ID WHAT: until mgrd ID is active (30 s); prints how long
# since t0 (set by the caller) and its status, passes or fails CHECK.
takes_over() {
	local s
	if s=$(wait_status "$2" "id $2 role active *"); then
		echo "# mgrd $2 active $(($(now_ms) - t0)) ms after $3: $s"
		pass "$1"
	else
		fail "$1" "$s"
	fi
}
# stale_standby CHECK TERM: SIGSTOP the standby mgrd 2, change things
# through a mount of the active mgrd 1 (which marks mgrd 2 stale at a quorum
# before it answers, E6), check the marks, SIGKILL mgrd 1.
stale_standby() {
	kill -STOP "$M2PID"
	if mount2 $H1 && mkdir -p "$M2MNT/d2" && echo "after the standby stopped" >>"$M2MNT/d2/new"; then
		umount2
		# a quorum before the reply, every iod by the next renewal
		assert_eq "$1" "$2 1 2 $2 1 2 $2 1 2 $2 1 2" "$(wait_promises "$2 1 2")"
	else
		umount2
		fail "$1" "no change through a mount of mgrd 1"
	fi
	lc kill-mgrd >/dev/null
	wait "$M1PID" 2>/dev/null
	M1PID=
}
umount2() {
	fusermount3 -u "$M2MNT" && wait "$M2MNTPID" 2>/dev/null
	M2MNTPID=
}
client() { $EL client "${HOST[$1]}" $P "$CL"; }
# rejoins CHECK ID ACTIVE TERM: start mgrd ID; CHECK passes once mgrd
# ACTIVE is active in TERM with it as the in-sync standby; then until the
# voters hold no stale mark.
rejoins() {
	local s
	start_mgrd "$2"
	if s=$(wait_status "$3" "id $3 role active term $4 * lag 0 peer standby"); then
		pass "$1"
	else
		fail "$1" "$s"
	fi
	wait_promises "$4 $3 0" >/dev/null
}

# --- 1. mgrd 1 (started by 'up') wins and serves; mgrd 2 joins in sync
start_mgrd 2
if s=$(wait_status 1 "id 1 role active term * lag 0 peer standby"); then
	pass mgrd1-active-mgrd2-in-sync
else
	fail mgrd1-active-mgrd2-in-sync "$s"
fi
echo "# mgrd 1: $s"
T1=$(term_of 1)
assert_eq mgrd1-serves "0 0" "$(client 1)"
assert_eq mgrd2-standby-refuses-clients "-66 -" "$(client 2)"
# mgrd 2 votes too, after its first lease_time (E4)
wait_log "$LOGS/mgrd2.log" 0 "voted for mgrd 1 in term $T1" 15000 && pass mgrd2-votes-for-mgrd1 ||
	fail mgrd2-votes-for-mgrd1 "no vote of mgrd 2 for term $T1 in its log"
assert_eq iods-promise-term-to-mgrd1 "$T1 1 0 $T1 1 0 $T1 1 0 $T1 1 0" "$(wait_promises "$T1 1 0")"
echo "# $(grep -m1 'election of the pair' "$LOGS/mgrd1.log" | sed 's/.*mgrd 1: //')"

# --- 2. kill -9 of the active under a metadata load: mgrd 2 takes over
mkdir d
for ((i = 1; i <= 100; i++)); do echo "file $i" >"d/f$i"; done
head -c $((512 * 1024)) /dev/urandom >big
want=$(cd d && cat f* | sha256sum)
want_big=$(sha big)
cd /
n2=$(wc -l <"$LOGS/mgrd2.log")
out=$($EL stall "$CL" $H1 $P $H2 $P "$M1PID")
if [[ $out == ok* ]]; then
	read -r _ ms n <<<"$out"
	echo "# takeover stall $ms ms: kill -9 of the active mgrd 1 ($n GETATTRs in the second before) to mgrd 2's first GETATTR reply (lease_time 3 s)"
	pass takeover-after-kill9
else
	fail takeover-after-kill9 "$out"
fi
s=$(status 2)
echo "# mgrd 2: $s"
T2=$(term_of 2)
[[ $s == "id 2 role active "* ]] && ((T2 > T1)) && pass mgrd2-active-newer-term ||
	fail mgrd2-active-newer-term "$s (mgrd 1 had term $T1)"
if tail -n +$((n2 + 1)) "$LOGS/mgrd2.log" | grep -q "ACCEPTED AS STALE"; then
	fail in-sync-takeover-not-stale "mgrd 2 took over as stale"
else
	pass in-sync-takeover-not-stale
fi
# Through a mount of the new active: everything written before the kill.
mount2 $H2
assert_eq contents-survive-takeover "$want $want_big" \
	"$(cd "$M2MNT/d" && cat f* | sha256sum) $(sha "$M2MNT/big")"
umount2
# The killed active, started again, rejoins as the standby.
start_mgrd 1
if s=$(wait_status 2 "id 2 role active term $T2 * lag 0 peer standby"); then
	pass killed-active-rejoins-as-standby
else
	fail killed-active-rejoins-as-standby "$s"
fi
assert_eq in-sync-standby-unmarked "$T2 2 0 $T2 2 0 $T2 2 0 $T2 2 0" "$(wait_promises "$T2 2 0")"

# --- 3. SIGSTOP of the active mgrd 2: mgrd 1 takes over; after SIGCONT
# mgrd 2 never serves: it exits 3 ("Lost lease").
kill -STOP "$M2PID"
t0=$(now_ms)
takes_over sigstop-other-takes-over 1 "SIGSTOP of mgrd 2"
T3=$(term_of 1)
((T3 > T2)) && pass takeover-newer-term || fail takeover-newer-term "term $T3 after $T2"
kill -CONT "$M2PID"
out=$(client 2)
[[ $out != "0 0" ]] && pass old-active-never-serves || fail old-active-never-serves "$out"
assert_eq old-active-exits-3 3 "$(exit_status "$M2PID")"
M2PID=
grep -q "mgrd 2: lost the lease of term $T2" "$LOGS/mgrd2.log" && pass old-active-says-lost-lease ||
	fail old-active-says-lost-lease "no lost lease in mgrd 2's log"
assert_eq iod-refuses-older-term-hello "-116" "$($EL iod-hello $H1 $((P + 4)) "$CL" "$T2")"
assert_eq iod-accepts-current-term-hello "0" "$($EL iod-hello $H1 $((P + 4)) "$CL" "$T3")"
rejoins stopped-active-rejoins-as-standby 2 1 "$T3"

# --- 4. a voter's restart keeps its promise (the vote file)
lc kill-iod 1 >/dev/null
lc start-iod 1 >/dev/null
for ((i = 0; i < 100; i++)); do
	out=$(promise 1 2>/dev/null) && [[ $out != hello* ]] && break
	sleep 0.1
done
assert_eq restarted-iod-keeps-promise "$T3 1 0" "$out"
assert_eq restarted-iod-refuses-older-term "-116" "$($EL iod-hello $H1 $((P + 1)) "$CL" "$T2")"

# --- 5. stale standby: it does not stand until the old active returns
stale_standby active-marks-standby-stale "$T3"
n2=$(wc -l <"$LOGS/mgrd2.log")
kill -CONT "$M2PID"
# Stopped, it never heard that it is stale: it stands, and the voters'
# refusal (E6) is what its log gives as the reason.
if wait_log "$LOGS/mgrd2.log" "$n2" "refuses: this mgrd is marked stale\|not known to be in sync" 20000; then
	pass stale-standby-does-not-stand
else
	fail stale-standby-does-not-stand "mgrd 2 did not say why it does not stand"
fi
assert_eq stale-standby-does-not-serve "-66 -" "$(client 2)"
# The voters' own refusal (E6), once mgrd 1's lease has ended at iod 1:
# a new term for mgrd 2 without --accept-stale.
for ((i = 0; i < 100; i++)); do
	st=$($EL iod-ask $H1 $((P + 1)) "$CL" $((T3 + 1)) 2 0)
	[[ $st != -16 ]] && break   # EBUSY: the old lease still runs there
	sleep 0.1
done
assert_eq iod-refuses-stale-candidate "-117" "$st"
assert_eq iods-keep-promise "$T3 1 2" "$(promise 4)"
# The old active returns: it takes over, and mgrd 2 joins it in sync.
t0=$(now_ms)
start_mgrd 1
takes_over returning-active-takes-over 1 "its restart"
T4=$(term_of 1)
if s=$(wait_status 1 "id 1 role active term $T4 * lag 0 peer standby") &&
	[[ $(wait_promises "$T4 1 0") == "$T4 1 0 $T4 1 0 $T4 1 0 $T4 1 0" ]]; then
	pass stale-standby-rejoins-in-sync
else
	fail stale-standby-rejoins-in-sync "$s; promises $(promises)"
fi
# ... or --accept-stale takes over without it, and says so loudly.
stale_standby active-marks-standby-stale-again "$T4"
stop_pid "$M2PID"
t0=$(now_ms)
start_mgrd 2 --accept-stale
takes_over accept-stale-takes-over 2 "its start with --accept-stale"
T5=$(term_of 2)
assert_eq stale-takeover-serves "0 0" "$(client 2)"
read -r pt ph _ <<<"$(promise 1)"
((pt == T5 && ph == 2 && T5 > T4)) && pass iods-promise-newer-term-to-mgrd2 ||
	fail iods-promise-newer-term-to-mgrd2 "promise $pt $ph, mgrd 2 term $T5, before $T4"
grep -q "ACCEPTED AS STALE" "$LOGS/mgrd2.log" && pass accept-stale-is-loud ||
	fail accept-stale-is-loud "no warning in mgrd 2's log"

# --- 6. both killed under a writer, restarted in each order
e2e_tmpdir T
rejoins pair-again-before-double-kill 1 2 "$T5"
: >"$T/acked"
# writer, on the main mount (it lists both mgrds): creates w/fN with `seq N N+300`, fsyncs, closes; then appends N
# to acked.  Stops when $T/stop exists; any error ends it with status 1.
"$PY" - "$M/w" "$T/acked" "$T/stop" 2>"$T/writer.err" <<'PYEOF' &
import os, sys
d, acked, stop = sys.argv[1:4]
os.makedirs(d, exist_ok=True)
with open(acked, "a") as a:
    for i in range(1, 1000000):
        if os.path.exists(stop):
            break
        fd = os.open("%s/f%d" % (d, i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, "".join("%d\n" % k for k in range(i, i + 301)).encode())
        os.fsync(fd)
        os.close(fd)
        a.write("%d\n" % i)
        a.flush()
PYEOF
wpid=$!
# double_kill FIRST SECOND: kill -9 of the standby (mgrd 1), writes go on
# at the active alone (it marks mgrd 1 stale first, E6), kill -9 of the
# active (mgrd 2); then start FIRST, and SECOND once FIRST has shown what
# it does alone.
double_kill() {
	local n0 n1 s
	n0=$(wc -l <"$T/acked")
	for ((i = 0; i < 200; i++)); do (($(wc -l <"$T/acked") > n0 + 3)) && break; sleep 0.05; done
	kill -KILL "$M1PID"; wait "$M1PID" 2>/dev/null
	n0=$(wc -l <"$T/acked")
	for ((i = 0; i < 200; i++)); do (($(wc -l <"$T/acked") > n0 + 3)) && break; sleep 0.05; done
	# mgrd 2 marked mgrd 1 stale at a quorum before it answered alone (E6)
	read -r _ ph pst _ <<<"$(wait_promises "$(term_of 2) 2 1")"
	assert_eq "standby-marked-stale-$1$2" "2 1" "$ph $pst"
	kill -KILL "$M2PID"; wait "$M2PID" 2>/dev/null
	echo "# both killed with $(wc -l <"$T/acked") files acknowledged; restart order $1 then $2"
	n1=$(wc -l <"$LOGS/mgrd1.log")
	t0=$(now_ms)
	start_mgrd "$1"
	if (($1 == 1)); then
		# alone, the stale one does not become active (E5, E6); what
		# its log says is printed
		wait_log "$LOGS/mgrd1.log" "$n1" "not known to be in sync\|refuses: this mgrd is marked stale" 20000 &&
			echo "# mgrd 1 alone: $(tail -n +$((n1 + 1)) "$LOGS/mgrd1.log" | grep -m1 -o 'not known to be in sync\|refuses: this mgrd is marked stale')"
		assert_eq "stale-alone-does-not-serve-$1$2" "-66 -" "$(client 1)"
	else
		takes_over "newest-alone-takes-over-$1$2" 2 "its restart"
	fi
	start_mgrd "$2"
	if s=$(wait_status 2 "id 2 role active * lag 0 peer standby"); then
		pass "newest-active-other-in-sync-$1$2"
	else
		fail "newest-active-other-in-sync-$1$2" "$s / $(status 1)"
	fi
	tail -n +$((n1 + 1)) "$LOGS/mgrd1.log" | grep -q "joined from the log" &&
		pass "rejoined-from-log-$1$2" || fail "rejoined-from-log-$1$2" \
		"$(tail -n +$((n1 + 1)) "$LOGS/mgrd1.log" | grep -E 'joined' | tail -n 2)"
}
double_kill 1 2
double_kill 2 1
n0=$(wc -l <"$T/acked")
for ((i = 0; i < 200; i++)); do (($(wc -l <"$T/acked") > n0 + 3)) && break; sleep 0.05; done
: >"$T/stop"
if wait "$wpid"; then pass writer-across-double-kills; else fail writer-across-double-kills "$(tail -n 3 "$T/writer.err")"; fi
bad=$("$PY" - "$M/w" "$T/acked" <<'PYEOF'
import sys
d, acked = sys.argv[1:3]
bad = []
for line in open(acked):
    i = int(line)
    want = "".join("%d\n" % k for k in range(i, i + 301)).encode()
    try:
        got = open("%s/f%d" % (d, i), "rb").read()
    except OSError as e:
        got = repr(e).encode()
    if got != want:
        bad.append(i)
print(len(open(acked).read().split()), "acked", bad[:5])
PYEOF
)
echo "# $bad"
[[ $bad == *" acked []" ]] && pass acked-files-intact || fail acked-files-intact "$bad"
e2e_end
