#!/usr/bin/env bash
# t_mgrd_pair.sh - an mgrd pair (docs/ARCHITECTURE.md "Metadata"): mgrd 1
# active, mgrd 2 its synchronous standby (the election's stand-in makes
# mgrd 1 active).  One cluster for every check:
#   - the standby refuses clients and iods with -EREMOTE and the active's
#     address, serves MGRD_STATUS, and joins by snapshot;
#   - metadata load on the mount (creates, mkdirs, renames, xattrs,
#     symlinks, hard links, writes, unlinks); kill -9 of the standby in the
#     middle of it and a restart while it runs: it joins from the active's
#     log (no snapshot); killed again as that catch-up starts, and
#     restarted; its directory wiped and a rejoin while it runs (by
#     snapshot), killed as that snapshot is sent, and restarted;
#   - a client key revoked on the active is in the standby's list, and
#     again after its directory is wiped and it joins by snapshot;
#   - twinfsctl backup-meta while the load runs, and at rest (from the
#     standby in sync, whose snapshot children take longer than
#     request_timeout: byte-equal to the active's state);
#   - with both stopped, the standby's directory replays to the very state
#     of the active's: twinfs-mgrd --dump-state, byte for byte; so does
#     the backup at rest, and a directory restored from it
#     (twinfs-mgrd --restore-state);
#   - the standby writes its own snapshots in the background (every
#     128 KiB of records here) through all of the above.
. "$(dirname "$0")/lib.sh"
# A catch-up from the log one record a round trip: long enough for the
# drill below to kill the standby in the middle of one.
# A client identity to revoke: the revoked-key list goes to the standby.
e2e_before_up() {
	export TWINFS_MGRD_PAIR=127.0.0.2 TWINFS_TEST_REPL_WINDOW=1
	mkdir -p "$TWINFS_RUN_DIR" &&
		"$TWINFS_BUILD_DIR/cli/twinfsctl" keygen rev1 -o "$TWINFS_RUN_DIR/rev1.key" >/dev/null &&
		printf '[client rev1]\nkey_file = %s/rev1.key\n' "$TWINFS_RUN_DIR" >"$TWINFS_RUN_DIR/extra.conf" &&
		export TWINFS_EXTRA_CONF=$TWINFS_RUN_DIR/extra.conf
}
e2e_begin mgrd-pair
e2e_tmpdir T

CONF=$(lc conf)
MGRD=$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd
LOG2=$TWINFS_RUN_DIR/logs/mgrd2.log
LOG1=$TWINFS_RUN_DIR/logs/mgrd.log
M2PID=
tw() { "$PY" "$E2E_DIR/twire.py" "$@"; }
# The standby snapshots every 128 KiB of records, in the background
# (docs/ARCHITECTURE.md "Record mode (mgrd)"): its kills below meet its
# log split in two files, and its directory must still replay to the
# active's state byte for byte at the end.  The active keeps the default,
# so that the standby's position stays in its log (the joins from it).
start_m2() {
	TWINFS_TEST_SNAPSHOT_BYTES=131072 TWINFS_TEST_SNAP_SLOW_MS=${SNAP_SLOW_MS:-0} \
	setsid "$MGRD" -c "$CONF" --id 2 </dev/null >>"$LOG2" 2>&1 &
	M2PID=$!
}
stop_m2() { # SIGTERM, wait (bounded)
	[[ -n $M2PID ]] || return 0
	kill -TERM "$M2PID" 2>/dev/null
	for ((i = 0; i < 200; i++)); do kill -0 "$M2PID" 2>/dev/null || break; sleep 0.05; done
	wait "$M2PID" 2>/dev/null
	M2PID=
}
e2e_m2_cleanup() { # keeps $? for e2e_cleanup
	local rc=$?
	[[ -n $M2PID ]] && kill -KILL "$M2PID" 2>/dev/null
	return $rc
}
trap 'e2e_m2_cleanup; e2e_cleanup' EXIT
status1() { tw mgrd-status 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER"; }
status2() { tw mgrd-status 127.0.0.2 "$TWINFS_PORT" "$TWINFS_CLUSTER"; }
# wait_sync MS: until the active reports its standby in sync with no lag
wait_sync() {
	local t0 s
	t0=$(now_ms)
	until s=$(status1) && [[ $s == *"lag 0 peer standby"* ]]; do
		(($(now_ms) - t0 > $1)) && { echo "$s"; return 1; }
		sleep 0.1
	done
}

start_m2
if wait_sync 30000; then pass standby-joins; else fail standby-joins "$(status1) / $(status2)"; fi
s=$(status2)
[[ $s == "id 2 role standby "*"peer active" ]] && pass standby-status || fail standby-status "$s"
s=$(status1)
[[ $s == "id 1 role active term 1 "* ]] && pass active-status || fail active-status "$s"
metrics() { "$PY" -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
	"http://$1:$((TWINFS_PORT + 5))/metrics" | grep '^twinfs_mgrd_pair_' | sort | tr '\n' ' '; }
assert_eq metrics-active "twinfs_mgrd_pair_active 1 twinfs_mgrd_pair_in_sync 1 twinfs_mgrd_pair_lag_records 0 " \
	"$(metrics 127.0.0.1)"
assert_eq metrics-standby "twinfs_mgrd_pair_active 0 twinfs_mgrd_pair_in_sync 1 twinfs_mgrd_pair_lag_records 0 " \
	"$(metrics 127.0.0.2)"
for role in 1 2; do
	s=$(tw mgrd-hello 127.0.0.2 "$TWINFS_PORT" "$TWINFS_CLUSTER" $role)
	want="status -66 mgrd_id 2 active_addr 127.0.0.1:$TWINFS_PORT refusal mgrd 2 is standby; the active is mgrd 1 at 127.0.0.1:$TWINFS_PORT"
	assert_eq "standby-refuses-role-$role" "$want" "$s"
done
s=$(tw mgrd-hello 127.0.0.2 "$TWINFS_PORT" "$TWINFS_CLUSTER" 3)
[[ $s == "status 0 mgrd_id 2 "* ]] && pass standby-admits-admin || fail standby-admits-admin "$s"
assert_eq standby-refuses-admin-requests "PING answered status -66" \
	"$(tw ping 127.0.0.2 "$TWINFS_PORT" "$TWINFS_CLUSTER")"

# The load: metadata of every kind, and file contents (sizes in mgrd).
N=$(scale 4000)
((N < 400)) && N=400
load() { # DIR COUNT
	local d=$1 n=$2 i
	mkdir -p "$d"
	for ((i = 0; i < n; i++)); do
		case $((i % 8)) in
		0) mkdir "$d/d$i" && echo "x$i" >"$d/d$i/f" ;;
		1) echo "content $i" >"$d/f$i" && mv "$d/f$i" "$d/r$i" ;;
		2) : >"$d/x$i" && setfattr -n user.k -v "v$i" "$d/x$i" ;;
		3) ln -s "target$i" "$d/s$i" ;;
		4) echo "$i" >"$d/h$i" && ln "$d/h$i" "$d/hl$i" && rm "$d/h$i" ;;
		5) head -c $((i * 37 % 70000)) /dev/urandom >"$d/w$i" ;;
		6) : >"$d/t$i" && chmod 640 "$d/t$i" && truncate -s $((i * 11)) "$d/t$i" ;;
		7) mkdir "$d/e$i" && rmdir "$d/e$i" ;;
		esac || return 1
	done
}
cd "$M"
load "$M/a" "$N" && pass load-with-standby || fail load-with-standby "load failed"

# kill -9 of the standby in the middle of the load, restarted while it runs
load "$M/b" "$N" &
lp=$!
sleep 1
if out=$(lc ctl backup-meta "$T/b-live" 2>&1); then
	pass backup-meta-under-load
	echo "# $out"
else
	fail backup-meta-under-load "$out"
fi
kill -KILL "$M2PID"; wait "$M2PID" 2>/dev/null; M2PID=
sleep 1
L2=$(($(wc -l <"$LOG2") + 1))
start_m2
wait $lp && pass load-across-standby-kill || fail load-across-standby-kill "load failed"
wait_sync 30000 && pass standby-rejoins-after-kill || fail standby-rejoins-after-kill "$(status1)"
# its log ends at a record the active's log holds: the catch-up comes
# from there, not from a snapshot
grep -q "joined from the log" "$LOG2" && ! grep -q "joined by snapshot" <(sed -n "$L2,\$p" "$LOG2") &&
	pass standby-joined-from-log || fail standby-joined-from-log "$(grep -E 'joined|installed' "$LOG2" | tail -n 3)"

# kill -9 of the standby as its catch-up from the log starts (records
# closed while it was down), restarted: it joins again
kill -KILL "$M2PID"; wait "$M2PID" 2>/dev/null; M2PID=
load "$M/g" "$N" || fail load-while-standby-down "load failed"
L2=$(($(wc -l <"$LOG2") + 1))
start_m2
wait_log "$LOG2" $((L2 - 1)) "joined from the log" 15000 || fail catchup-seen "no catch-up in $LOG2"
kill -KILL "$M2PID"; wait "$M2PID" 2>/dev/null; M2PID=
sed -n "$L2,\$p" "$LOG2" | grep -q "in sync with mgrd" && echo "# the catch-up was over before the kill" ||
	echo "# killed during the catch-up"
L2=$(($(wc -l <"$LOG2") + 1))
start_m2
wait_sync 30000 && pass standby-rejoins-after-kill-in-catchup || fail standby-rejoins-after-kill-in-catchup "$(status1)"

# a revoked key: the standby's list has it once the admin is answered
check client-revoke lc ctl client revoke rev1
check revoked-on-standby grep -q "^rev1 " "$TWINFS_RUN_DIR/mgrd2/revoked"

# its directory wiped while the load runs: it rejoins from nothing
load "$M/c" "$N" &
lp=$!
sleep 1
stop_m2
rm -rf "$TWINFS_RUN_DIR/mgrd2"
L1=$(($(wc -l <"$LOG1") + 1))
LW=$(($(wc -l <"$LOG2") + 1))
start_m2
# kill -9 as the active's snapshot goes to it, then restarted
wait_log "$LOG1" $((L1 - 1)) "joins: snapshot at index" 15000 || fail snapshot-join-seen "no snapshot join in $LOG1"
kill -KILL "$M2PID"; wait "$M2PID" 2>/dev/null; M2PID=
L2=$(($(wc -l <"$LOG2") + 1))
# From here its snapshot children, the backup's below among them, take
# 2 s longer than they would: longer than a request's timeout.
SNAP_SLOW_MS=2000 start_m2
wait $lp && pass load-across-standby-wipe || fail load-across-standby-wipe "load failed"
wait_sync 30000 && pass standby-rejoins-wiped || fail standby-rejoins-wiped "$(status1)"
sed -n "$LW,\$p" "$LOG2" | grep -q "joined by snapshot" && pass standby-took-snapshot ||
	fail standby-took-snapshot "no install in $LOG2"
# the list is not in the snapshot: a record after it brought it
check revoked-after-wipe grep -q "^rev1 " "$TWINFS_RUN_DIR/mgrd2/revoked"

# the namespace as clients see it, kept to compare after a takeover drill
(cd "$M" && find . -printf '%p %y %m %s %n %l\n' | sort) >"$T/tree"
cd /
lc umount >/dev/null
wait_sync 30000 || fail final-sync "$(status1)"
# a standby in sync gives the backup: the active does not pause.  Its
# child takes 2 s (above), twinfsctl's request_timeout is 1 s here: the
# backup waits for the child as long as snapshot_timeout lets it run.
# The standby's own snapshot child may still run, or have ended with no
# record since to notice it: the backup waits for it, a tick, not until
# the next record (none comes at rest).  60 s is a hang, not slowness.
(umask 077 && awk '/^request_timeout/ { next } { print } /^\[cluster\]$/ { print "request_timeout = 1s" }' \
	"$CONF" >"$T/rt1.conf")
t0=$(now_ms)
out=$(cd / && "$TWINFS_BUILD_DIR/cli/twinfsctl" -c "$T/rt1.conf" backup-meta "$T/b-rest" 2>&1)
rc=$?
dt=$(($(now_ms) - t0))
if ((rc == 0 && dt < 60000)) && grep -q "from the standby" <<<"$out"; then
	pass backup-meta-from-standby
	echo "# $out, in $dt ms"
else
	fail backup-meta-from-standby "$out, in $dt ms"
fi
stop_m2
# SIGTERM: the active's final snapshot (a kill -9 would leave the log)
m1=$(cat "$TWINFS_RUN_DIR/pids/mgrd.pid")
kill -TERM "$m1"
for ((i = 0; i < 200; i++)); do kill -0 "$m1" 2>/dev/null || break; sleep 0.05; done
rm -f "$TWINFS_RUN_DIR/pids/mgrd.pid"
"$MGRD" -c "$CONF" --id 1 --dump-state "$T/s1" 2>>"$T/dump.log" &&
	"$MGRD" -c "$CONF" --id 2 --dump-state "$T/s2" 2>>"$T/dump.log" ||
	fail dump-state "$(cat "$T/dump.log")"
if [[ -s $T/s1 ]] && cmp -s "$T/s1" "$T/s2"; then
	pass standby-state-byte-equal
	echo "# both states: $(stat -c %s "$T/s1") bytes"
else
	fail standby-state-byte-equal "$(cmp "$T/s1" "$T/s2" 2>&1)"
fi
cmp -s "$T/s1" "$T/b-rest" && pass backup-is-the-state ||
	fail backup-is-the-state "$(cmp "$T/s1" "$T/b-rest" 2>&1)"
mv "$TWINFS_RUN_DIR/mgrd2" "$TWINFS_RUN_DIR/mgrd2.old"
if "$MGRD" -c "$CONF" --id 2 --restore-state "$T/b-rest" 2>>"$T/dump.log" &&
	"$MGRD" -c "$CONF" --id 2 --dump-state "$T/s3" 2>>"$T/dump.log" &&
	cmp -s "$T/s1" "$T/s3"; then
	pass restored-dir-is-the-state
else
	fail restored-dir-is-the-state "$(tail -n 3 "$T/dump.log")"
fi
"$MGRD" -c "$CONF" --id 2 --restore-state "$T/b-rest" 2>"$T/restore2.log" &&
	fail restore-refuses-a-state "restored over a state" ||
	check restore-refuses-a-state grep -q "already holds a state" "$T/restore2.log"
lc start-mgrd >/dev/null
lc mount >/dev/null
(cd "$M" && find . -printf '%p %y %m %s %n %l\n' | sort) >"$T/tree2"
check tree-after-restart cmp "$T/tree" "$T/tree2"
n=$(grep -c 'mgrd: snapshot at seq [0-9]* installed' "$LOG2")
echo "# the standby installed $n snapshots of its own, written by a child"
((n > 0)) && pass standby-snapshots-in-background || fail standby-snapshots-in-background "none in $LOG2"
e2e_verify
e2e_end
