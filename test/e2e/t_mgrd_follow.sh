#!/usr/bin/env bash
# t_mgrd_follow.sh - everyone follows the active mgrd (proto/FORMAT.md
# "mgrd pair").  One cluster, one mgrd at first:
#   - a mount whose source lists a port nothing listens on first
#     ("127.0.0.1:DEAD,127.0.0.1:REAL"; also through mount.fuse3) mounts,
#     works, logs the switch once, and keeps working (same session, files
#     intact) across a kill -9 and restart of mgrd while it alternates
#     between the two addresses, and across a SIGSTOP of mgrd (unanswered,
#     not refused);
#   - a mount listing an mgrd that is not the active (twire.py plays one:
#     HELLO refused -EREMOTE with the active's address) ends up on the
#     active it names;
#   - a config whose mgrd 1 is the dead port and mgrd 2 the real mgrd:
#     twinfsctl finds the real one, status says the pair runs with mgrd 1
#     down (exit 3), and an iod started with it registers with mgrd 2;
#   - last the cluster becomes a real pair (mgrd 2 joins as mgrd 1's
#     standby): status shows both roles (exit 3 once the standby is gone),
#     and a mount listing the standby first ends up on the active;
#   - `twinfsctl mgrd switchover` under tar x and under fio --verify (no
#     error, every byte), and a kill -9 of the active under tar x.
. "$(dirname "$0")/lib.sh"
e2e_begin mgrd-follow
e2e_tmpdir T

REAL=127.0.0.1:$TWINFS_PORT
# mgrd 2's port of the cluster's block: nothing listens there with one mgrd.
DEAD=127.0.0.1:$((TWINFS_PORT + 10))
M2=$TWINFS_RUN_DIR/mnt2
mount_log() { # PATH
	local p
	for p in "$TWINFS_RUN_DIR"/pids/mount-*.path; do
		[[ -e $p && $(<"$p") == "$1" ]] && echo "$TWINFS_RUN_DIR/logs/$(basename "$p" .path).log"
	done
}

# pair_conf SRC DST PORT1 DIR1 PORT2 DIR2: SRC's config as a pair, [mgrd 1]
# and [mgrd 2] on 127.0.0.1 with these ports and run-dir directories.
pair_conf() {
	(umask 077 && awk -v p1="$3" -v d1="$TWINFS_RUN_DIR/$4" -v p2="$5" \
		-v d2="$TWINFS_RUN_DIR/$6" '
	/^\[/ { sect = $0 }
	sect == "[mgrd]" && /^(host|port|dir|metrics) *=/ { next }
	{ print }
	END {
		print "\n[mgrd 1]\nhost = 127.0.0.1\nport = " p1 "\ndir = " d1
		print "\n[mgrd 2]\nhost = 127.0.0.1\nport = " p2 "\ndir = " d2
	}' "$1" >"$2")
}

# ------------------------------------------------------ dead address first
if TWINFS_MOUNT_SOURCE=$DEAD,$REAL lc mount "$M2" >"$T/mount.out" 2>&1; then
	pass mount-dead-first
else
	fail mount-dead-first "$(tail -n 3 "$T/mount.out" | tr '\n' ' ')"
fi
assert_eq mount-source "$DEAD,$REAL" "$(findmnt -no SOURCE "$M2" 2>&1)"
LOG=$(mount_log "$M2")
assert_eq switch-logged-once 1 \
	"$(grep -c "using mgrd 2 at $REAL (mgrd 1 at $DEAD: .*refused" "$LOG")"

head -c "$(scale $((4 << 20)))" /dev/urandom >"$T/a"
check write-via-pair-mount cp "$T/a" "$M2/a"
assert_same_file read-via-main-mount "$T/a" "$M/a"
mkdir "$M/d" && echo hello >"$M/d/h"
assert_eq read-main-write-via-pair "hello" "$(cat "$M2/d/h" 2>&1)"
# The same source through mount.fuse3, as an fstab line mounts it (mount(8)
# would look for twinfs in its own PATH, not the build's).
M5=$TWINFS_RUN_DIR/mnt5
mkdir -p "$M5"
if PATH=$TWINFS_BUILD_DIR/fuse-client:$PATH mount.fuse3 "$DEAD,$REAL" "$M5" \
	-t twinfs -o "cluster=$TWINFS_CLUSTER" >"$T/mf.out" 2>&1; then
	pass mount-fuse3-pair-source
	assert_eq mount-fuse3-reads "hello" "$(cat "$M5/d/h" 2>&1)"
	fusermount3 -u "$M5" || fusermount3 -u -z "$M5"
else
	fail mount-fuse3-pair-source "$(tail -n 2 "$T/mf.out" | tr '\n' ' ')"
fi

# -------------------------------------------- mgrd restart: both addresses
# While mgrd is away the client goes back and forth between the two
# addresses (with backoff); once mgrd is back it resumes its session there.
session() { grep -o 'session [0-9]*' "$LOG" | head -n 1; }
s1=$(session)
(cd / && head -c "$(scale $((2 << 20)))" /dev/urandom >"$T/b")
lc kill-mgrd >/dev/null
cp "$T/b" "$M2/b" 2>"$T/cp.err" &
cppid=$!
sleep 1
lc start-mgrd >/dev/null || fail mgrd-start "start-mgrd failed"
if wait $cppid; then
	pass write-across-mgrd-restart
else
	fail write-across-mgrd-restart "cp: $(head -n 2 "$T/cp.err" | tr '\n' ' ')"
fi
assert_same_file content-across-restart "$T/b" "$M/b"
assert_same_file earlier-file-intact "$T/a" "$M2/a"
assert_eq session-resumed "" "$(grep 'did not resume session' "$LOG")"
echo "# $s1; switch lines: $(grep -c 'using mgrd' "$LOG")"
# Back on the address it used before the restart: no further switch line
# (mgrlist logs one per change of mgrd, not per attempt).
assert_eq no-switch-back-logged 1 "$(grep -c 'using mgrd' "$LOG")"

# ------------------------------------------- a hung mgrd: no answer at all
# Stopped, mgrd still accepts connections but answers nothing: the
# client's attempt times out (max(2 x request_timeout, 10 s)) and it logs
# so, it tries the other address, comes back, and its write lands once
# mgrd runs again.  mgrd is continued once the timeout is logged (60 s at
# most), not after a fixed wait.
(cd / && head -c 65536 /dev/urandom >"$T/c")
n0=$(wc -l <"$LOG")
lc stop-mgrd >/dev/null
cp "$T/c" "$M2/c" 2>"$T/cp2.err" &
cppid=$!
wait_log "$LOG" "$n0" "mgrd $REAL: timed out" 60000
lc cont-mgrd >/dev/null
if wait $cppid; then
	pass write-across-hung-mgrd
else
	fail write-across-hung-mgrd "cp: $(head -n 2 "$T/cp2.err" | tr '\n' ' ')"
fi
assert_same_file content-across-hung-mgrd "$T/c" "$M/c"
grep -q "mgrd $REAL: timed out" "$LOG" && pass hung-mgrd-timed-out ||
	fail hung-mgrd-timed-out "no timeout of mgrd $REAL in the log"

lc umount "$M2"

# ------------------------------------------------ a standby names the active
# An mgrd that is not the active refuses HELLO with -EREMOTE and the
# active's address (played by twire.py): a mount listing only it and the
# dead port goes to the address it names.
FAKEPORT=$((TWINFS_PORT + 11))
FAKE=127.0.0.1:$FAKEPORT
"$PY" "$(dirname "$0")/twire.py" standby 127.0.0.1 "$FAKEPORT" "$TWINFS_CLUSTER" \
	"$REAL" 120 >"$T/standby.out" 2>&1 &
sbpid=$!
for ((i = 0; i < 100; i++)); do
	(exec 3<>"/dev/tcp/127.0.0.1/$FAKEPORT") 2>/dev/null && break
	sleep 0.1
done
M3=$TWINFS_RUN_DIR/mnt3
if TWINFS_MOUNT_SOURCE=$FAKE,$DEAD lc mount "$M3" >"$T/mount3.out" 2>&1; then
	pass mount-standby-first
else
	fail mount-standby-first "$(tail -n 3 "$T/mount3.out" | tr '\n' ' ')"
fi
assert_eq follows-named-active 1 "$(grep -c "using mgrd at $REAL (mgrd 2 at $FAKE: mgrd 2 is standby; the active is mgrd 1 at $REAL)" "$(mount_log "$M3")")"
assert_eq read-via-named-active "hello" "$(cat "$M3/d/h" 2>&1)"
lc umount "$M3"
kill "$sbpid" 2>/dev/null
wait "$sbpid" 2>/dev/null

# --------------------------------------- the real mgrd second in a config
PAIR=$TWINFS_RUN_DIR/pair.conf
pair_conf "$(lc conf)" "$PAIR" $((TWINFS_PORT + 10)) mgrd-none "$TWINFS_PORT" mgrd
TWCTL=$TWINFS_BUILD_DIR/cli/twinfsctl
out=$("$TWCTL" -c "$PAIR" -t 2000 status --json 2>&1)
rc=$?
assert_eq ctl-pair-status-exit 3 "$rc"
assert_eq ctl-pair-mgrds "down active" "$(echo "$out" | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"
assert_eq ctl-pair-uses-second "\"$REAL\"" "$(echo "$out" | "$PY" -c '
import json, sys
print(json.dumps(json.load(sys.stdin)["mgrd"]))' 2>&1)"
check ctl-pair-sync "$TWCTL" -c "$PAIR" sync
out=$("$TWCTL" -c "$PAIR" status 2>&1)
echo "$out" | grep -q "mgrd pair degraded: 1 of 2 mgrds down" && pass ctl-pair-human ||
	fail ctl-pair-human "$(echo "$out" | head -n 5 | tr '\n' ' ')"

# iod 4 again, from the pair's config: it finds mgrd 2 and registers.
lc kill-iod 4 >/dev/null
out=$(wait_state 4 '^(down|suspect)' 30000) || fail iod4-down "$out"
IODLOG=$TWINFS_RUN_DIR/logs/iod4-pair.log
setsid "$TWINFS_BUILD_DIR/iod/twinfs-iod" -c "$PAIR" -i 4 </dev/null >"$IODLOG" 2>&1 &
# local-cluster's pid file: 'down' stops it like its own iod 4.
echo $! >"$TWINFS_RUN_DIR/pids/iod4.pid"
if out=$(wait_state 4 '^up' 60000); then
	pass iod-follows-to-second
else
	fail iod-follows-to-second "iod 4: $out"
fi
assert_eq iod-switch-logged 1 \
	"$(grep -c "iod 4: using mgrd 2 at $REAL (mgrd 1 at $DEAD: .*refused" "$IODLOG")"
e2e_wait_healthy 60 && pass healthy-again || fail healthy-again "status not healthy"
assert_same_file file-after-iod-rejoin "$T/a" "$M/a"

# ------------------------------------------- a real pair: standby listed first
# The cluster becomes a pair in place: mgrd 1 keeps its port and dir, mgrd 2
# joins as its standby on the port that was dead (h-repl's stand-in for the
# election makes mgrd 1 the active).  A mount listing the standby first
# ends up on the active; status shows both, and exit 3 once the standby
# is gone.
STANDBY=$DEAD
CONF=$(lc conf)
lc kill-mgrd >/dev/null
pair_conf "$CONF" "$CONF.pair" "$TWINFS_PORT" mgrd $((TWINFS_PORT + 10)) mgrd2 &&
	mv "$CONF.pair" "$CONF"
lc start-mgrd 1 >/dev/null || fail pair-start "start-mgrd 1 failed"
lc start-mgrd 2 >/dev/null || fail pair-start "start-mgrd 2 failed"
if e2e_wait_healthy 60; then pass pair-in-sync; else fail pair-in-sync "$(ctl -t 2000 status 2>&1 | head -n 4 | tr '\n' ' ')"; fi
assert_eq pair-roles "active standby" "$(ctl status --json 2>&1 | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"
M4=$TWINFS_RUN_DIR/mnt4
if TWINFS_MOUNT_SOURCE=$STANDBY,$REAL lc mount "$M4" >"$T/mount4.out" 2>&1; then
	pass mount-real-standby-first
else
	fail mount-real-standby-first "$(tail -n 3 "$T/mount4.out" | tr '\n' ' ')"
fi
assert_eq on-the-active 1 "$(grep -c "using mgrd 1 at $REAL (mgrd 2 at $STANDBY: mgrd 2 is standby" "$(mount_log "$M4")")"
check write-via-standby-first-mount cp "$T/c" "$M4/c2"
assert_same_file read-back-via-main "$T/c" "$M/c2"
lc umount "$M4"
lc kill-mgrd 2 >/dev/null
out=$(ctl -t 2000 status --json 2>&1)
assert_eq pair-one-down-exit 3 "$?"
assert_eq pair-one-down-roles "active down" "$(echo "$out" | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"

# ----------------------------------------- switchover under tar: no error
# mgrd 2 joins again as the standby; `twinfsctl mgrd switchover` makes it
# the active while tar x runs on a mount that lists both: mgrd 1 answers,
# releases its lease and exits; the mount follows and retransmits.
lc start-mgrd 2 >/dev/null || fail switchover-start "start-mgrd 2 failed"
if e2e_wait_healthy 60; then pass switchover-pair-in-sync; else fail switchover-pair-in-sync "$(ctl -t 2000 status 2>&1 | head -n 4 | tr '\n' ' ')"; fi
TWINFS_MOUNT_SOURCE=$REAL,$STANDBY lc mount "$M4" >"$T/mount4b.out" 2>&1 ||
	fail switchover-mount "$(tail -n 3 "$T/mount4b.out" | tr '\n' ' ')"
tar -C /usr/include -cf "$T/inc.tar" linux
mkdir "$M4/sw"
tar -C "$M4/sw" -xf "$T/inc.tar" 2>"$T/sw.err" &
tarpid=$!
sleep 0.3
if out=$(ctl mgrd switchover 2>&1); then
	pass switchover
else
	fail switchover "$out"
fi
echo "# $(echo "$out" | tail -n 1)"
if wait $tarpid; then pass tar-across-switchover; else fail tar-across-switchover "$(head -n 3 "$T/sw.err" | tr '\n' ' ')"; fi
assert_eq switchover-tar-no-errors "" "$(cat "$T/sw.err")"
check switchover-tree diff -r --no-dereference /usr/include/linux "$M4/sw/linux"
# (from /: the first mount lists only mgrd 1, which is gone now)
cd /
assert_eq switchover-roles "down active" "$(ctl -t 2000 status --json 2>&1 | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"
grep -q "using mgrd 2 at $STANDBY" "$(mount_log "$M4")" && pass switchover-mount-followed ||
	fail switchover-mount-followed "no switch to mgrd 2 in the mount's log"

# ------------------------------------ kill -9 of the active during tar x
# mgrd 1 rejoins as the standby; then the active (mgrd 2) dies mid-tar:
# the standby takes over by itself and tar exits 0 with every byte.
lc start-mgrd 1 >/dev/null || fail takeover-start "start-mgrd 1 failed"
if e2e_wait_healthy 60; then pass takeover-pair-in-sync; else fail takeover-pair-in-sync "$(ctl -t 2000 status 2>&1 | head -n 4 | tr '\n' ' ')"; fi
mkdir "$M4/tk"
tar -C "$M4/tk" -xf "$T/inc.tar" 2>"$T/tk.err" &
tarpid=$!
sleep 0.3
t0=$(date +%s%N)
lc kill-mgrd 2 >/dev/null
# the stall: from the kill to the first metadata change through the mount
mkdir "$M4/tk-probe" || fail kill9-probe "mkdir after the kill failed"
echo "# kill -9 of the active: first mkdir done after $((($(date +%s%N) - t0) / 1000000)) ms"
if wait $tarpid; then pass tar-across-kill9; else fail tar-across-kill9 "$(head -n 3 "$T/tk.err" | tr '\n' ' ')"; fi
assert_eq kill9-tar-no-errors "" "$(cat "$T/tk.err")"
check kill9-tree diff -r --no-dereference /usr/include/linux "$M4/tk/linux"
assert_eq kill9-roles "active down" "$(ctl -t 2000 status --json 2>&1 | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"

# ----------------------------- switchover under fio --verify: no error
# mgrd 2 (killed above while active) joins mgrd 1 again; fio writes and
# verifies files through the mount while `twinfsctl mgrd switchover` makes
# mgrd 2 the active: fio exits 0, no verify error.
lc start-mgrd 2 >/dev/null || fail fio-switchover-start "start-mgrd 2 failed"
if e2e_wait_healthy 60; then pass fio-pair-in-sync; else fail fio-pair-in-sync "$(ctl -t 2000 status 2>&1 | head -n 4 | tr '\n' ' ')"; fi
mkdir "$M4/fio"
fio --name=sw --directory="$M4/fio" --ioengine=psync --rw=randwrite --bs=16k \
	--size=$(scale 64)m --numjobs=2 --fsync=32 --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --randrepeat=1 --output="$T/fio.out" >"$T/fio.err" 2>&1 &
fiopid=$!
sleep 0.5
if out=$(ctl mgrd switchover 2>&1); then pass fio-switchover; else fail fio-switchover "$out"; fi
if wait $fiopid && ! grep -qiE 'verify: bad|bad magic|verify failed|bad pattern' "$T/fio.out"; then
	pass fio-verify-across-switchover
	grep -E '^ +(READ|WRITE):' "$T/fio.out" | sed 's/^ */# fio across the switchover: /'
else
	fail fio-verify-across-switchover "$(grep -ihE 'bad|error|err=|fio:' "$T/fio.out" "$T/fio.err" | head -n 4 | tr '\n' ' ')"
fi
assert_eq fio-switchover-roles "down active" "$(ctl -t 2000 status --json 2>&1 | "$PY" -c '
import json, sys
print(" ".join(m["role"] for m in json.load(sys.stdin)["mgrds"]))' 2>&1)"
lc umount "$M4"
e2e_end
