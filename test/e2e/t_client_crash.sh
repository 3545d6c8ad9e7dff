#!/usr/bin/env bash
# t_client_crash.sh - a client (its twinfs process) killed with SIGKILL
# right after writes it never reported.  When a writer's session ends
# without a final report, mgrd takes the size from the iods before anyone
# else opens the file (docs/ARCHITECTURE.md "Metadata").
#   1. Once the writer's session expires, the file opens with every byte
#      the writer had sent, byte for byte, and a write past the end leaves
#      zeros in between, not the writer's bytes past a stale size.
#   2. With both twins of a group down when the session expires, an open
#      of such a file waits (no error) and sees the whole file once the
#      group is back; a setstripe of it (mgrd thinks it never written)
#      waits too, and is then refused (EBUSY: it has data).
#   3. The dead mount is cleared with fusermount3 -u -z and mounted again.
#   4. A hung client (SIGSTOP; the kernel keeps its TCP connections up)
#      holding a lock: mgrd pings it, finds it silent, closes its
#      connections and expires its session, so a waiter on the other
#      mount gets the lock; after SIGCONT the mount serves again, but the
#      holder's writes and ftruncate through its old descriptor fail with
#      EIO: every iod refuses the expired session's writes (fencing), so
#      the waiter's bytes stay.
#   Finally twinfsctl verify finds both twins of every group identical.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"   # short timers
export TWINFS_SESSION_TIMEOUT=${TWINFS_SESSION_TIMEOUT:-2s}
e2e_begin client_crash
e2e_tmpdir T
M2=$TWINFS_RUN_DIR/mnt2
MIB=$((1 << 20))
MLOG=$TWINFS_RUN_DIR/logs/mgrd.log

# crash FILE SYNCED UNSYNCED [CMD...]: mount M2, write FILE there with
# lost_writer.py, and 0.3 s after its writes returned kill -9 M2's client
# (then run CMD, e.g. kill a group) and the writer.  Sets BEFORE to the size
# mgrd answers right after (before the session expires) and waits (30 s at
# most) for mgrd to expire the session.
crash() {
	local file=$1 synced=$2 unsynced=$3 wpid cpid n0 i
	shift 3
	mkdir -p "$M2"
	lc mount "$M2" >/dev/null || { fail "$file-mount" "second mount failed"; return 1; }
	cpid=$(client_pid "$M2")
	"$PY" "$E2E_DIR/lost_writer.py" "$M2/$file" "$synced" "$unsynced" >"$T/$file.out" 2>&1 &
	wpid=$!
	for ((i = 0; i < 300; i++)); do
		grep -q written "$T/$file.out" && break
		sleep 0.1
	done
	grep -q written "$T/$file.out" || fail "$file-written" "$(cat "$T/$file.out")"
	sleep 0.3
	n0=$(grep -c 'expired after' "$MLOG")
	kill -9 "$cpid"
	(($#)) && "$@"
	kill -9 "$wpid" 2>/dev/null
	wait "$wpid" 2>/dev/null
	fusermount3 -u -z "$M2" 2>/dev/null
	BEFORE=$(stat -c %s "$M/$file")
	for ((i = 0; i < 300; i++)); do
		(($(grep -c 'expired after' "$MLOG") > n0)) && return 0
		sleep 0.1
	done
	fail "$file-session-expires" "no 'expired after' line in mgrd.log within 30 s"
	return 1
}

# check_file NAME FILE SIZE: FILE on the main mount is SIZE bytes of the
# writer's pattern; then a byte written 4 MiB past its end leaves zeros.
check_file() {
	local got
	got=$(timeout 60 "$PY" - "$M/$2" "$3" "$E2E_DIR" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[3])
from lost_writer import pattern
path, size = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR)
st = os.fstat(fd).st_size
data = os.pread(fd, st + 1, 0)
want = pattern(size)
if st != size or data != want:
    bad = next((i for i in range(0, min(len(data), size), 4096)
                if data[i:i + 4096] != want[i:i + 4096]), None)
    print("size %d (want %d), first wrong block at %s" % (st, size, bad))
    sys.exit(0)
os.pwrite(fd, b"Z", size + (4 << 20))
gap = os.pread(fd, 4 << 20, size)
print("ok" if gap == bytes(4 << 20) else "the gap past the old end is not zeros")
EOF
	)
	assert_eq "$1" ok "$got"
}

# 1. 4 MiB fsynced, 4 MiB more sent and never reported.
crash w1 $((4 * MIB)) $((4 * MIB))
echo "# w1: mgrd had $BEFORE bytes when the writer died"
check_file lost-writer-bytes-all-there w1 $((8 * MIB))
# The size came from the iods, unless the client's periodic report (every
# second while dirty) beat the kill.
if ((BEFORE < 8 * MIB)); then
	grep -q "size $((8 * MIB)) taken from the iods" "$MLOG" &&
		pass size-taken-from-iods || fail size-taken-from-iods "no log line"
fi

# 2. Both twins of group 1 die with the client: the open waits for them.
kill_group1() { (cd / && lc kill-iod 3 >/dev/null && lc kill-iod 4 >/dev/null); }
crash w2 0 $((4 * MIB)) kill_group1
echo "# w2: mgrd had $BEFORE bytes when the writer died"
timeout 90 "$PY" -c 'import os, sys; print(os.fstat(os.open(sys.argv[1], os.O_RDONLY)).st_size)' \
	"$M/w2" >"$T/open2.out" 2>&1 &
opid=$!
timeout 90 setfattr -n twinfs.layout -v "64K 1 0" "$M/w2" >"$T/stripe2.out" 2>&1 &
spid=$!
sleep 3
if kill -0 "$opid" 2>/dev/null && kill -0 "$spid" 2>/dev/null; then
	pass open-and-setstripe-wait-for-the-group
else
	fail open-and-setstripe-wait-for-the-group "returned with group 1 down: $(cat "$T/open2.out" "$T/stripe2.out")"
fi
(cd / && lc start-iod 3 >/dev/null && lc start-iod 4 >/dev/null)
wait "$opid"
assert_eq open-after-the-group-returns $((4 * MIB)) "$(cat "$T/open2.out")"
if ! wait "$spid" && grep -qi busy "$T/stripe2.out"; then
	pass setstripe-refused-after-the-size
else
	fail setstripe-refused-after-the-size "$(cat "$T/stripe2.out")"
fi
e2e_wait_healthy 60 && pass healthy || fail healthy "$(ctl status 2>&1 | tr '\n' ' ')"
# The restarted iods took the fence list (both writers' sessions) with
# their registration, before serving anything.
grep 'fence list' "$TWINFS_RUN_DIR/logs/iod3.log" | tail -n 1 |
	grep -Eq 'writes of ([2-9]|[1-9][0-9]+) expired' &&
	pass restarted-iod-takes-the-fence-list ||
	fail restarted-iod-takes-the-fence-list "$(grep 'fence list' "$TWINFS_RUN_DIR/logs/iod3.log" | tail -n 1)"
check_file lost-writer-group-down-bytes w2 $((4 * MIB))

# 3. The dead mount comes back; both twins agree.
lc umount "$M2" >/dev/null 2>&1
if lc mount "$M2" >/dev/null && echo again >"$M2/again" &&
	[[ $(cat "$M/again") == again ]]; then
	pass remount-after-crash
else
	fail remount-after-crash "mount or write on $M2 failed"
fi
lc umount "$M2" >/dev/null 2>&1

# 4. A hung client's lock (mgrd's silence limit: session_timeout, at
#    least 30 s), and fencing (proto/FORMAT.md "Fencing"): the holder
#    rewrites 1 MiB of 'A' under its lock with O_DIRECT when its client
#    stops.  Once mgrd expired the session, a waiter on the other mount
#    gets the lock and writes 'B'; after SIGCONT the holder's writes must
#    fail with EIO and leave the 'B' in place.
lc mount "$M2" >/dev/null || fail hung-mount "second mount failed"
cpid=$(client_pid "$M2")
timeout 120 "$PY" -c 'import errno, fcntl, mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)
buf = mmap.mmap(-1, 1 << 20)
buf.write(b"A" * (1 << 20))
os.pwrite(fd, buf, 0)
print("locked", flush=True)
n = errs = 0
while errs < 3:
    try:
        os.pwrite(fd, buf, 0)
        n += 1
    except OSError as e:
        errs += 1
        print("error %s after %d writes" % (errno.errorcode[e.errno], n), flush=True)
    time.sleep(0.02)
print("done: %d writes" % n, flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
try:
    os.ftruncate(fd, 0)
    print("truncated", flush=True)
except OSError as e:
    print("truncate error %s" % errno.errorcode[e.errno], flush=True)' "$M2/lk" "$T/go" >"$T/hold.out" 2>&1 &
hpid=$!
for ((i = 0; i < 300; i++)); do grep -q locked "$T/hold.out" && break; sleep 0.1; done
sleep 0.2
kill -STOP "$cpid"
t0=$(now_ms)
got=$(timeout 90 "$PY" -c 'import fcntl, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
fcntl.lockf(fd, fcntl.LOCK_EX)
buf = mmap.mmap(-1, 1 << 20)
buf.write(b"B" * (1 << 20))
os.pwrite(fd, buf, 0)
print("locked")' "$M/lk" 2>&1)
echo "# the waiter got the lock $(($(now_ms) - t0)) ms after the holder's client stopped"
assert_eq lock-of-hung-client-released locked "$got"
grep -q 'silent for .* closing its connection' "$MLOG" &&
	pass mgrd-closes-silent-client || fail mgrd-closes-silent-client "no log line"
sid=$(grep -o '(session [0-9]*) silent for' "$MLOG" | tail -n 1 | grep -o '[0-9]*')
grep -q "session $sid fenced: every readable iod refuses its writes" "$MLOG" &&
	pass session-fenced-before-lock-release ||
	fail session-fenced-before-lock-release "no 'session $sid fenced' line in mgrd.log"
kill -CONT "$cpid"
# Its write in flight at the stop may time out; each later one must fail.
for ((i = 0; i < 200; i++)); do grep -q done "$T/hold.out" && break; sleep 0.1; done
echo "# holder: $(grep -v locked "$T/hold.out" | tr '\n' ' ')"
[[ $(grep -c 'error EIO after' "$T/hold.out") == 3 && $(tail -n 1 "$T/hold.out") == "done: "* ]] &&
	pass fenced-writes-fail-with-eio ||
	fail fenced-writes-fail-with-eio "holder: $(tr '\n' ' ' <"$T/hold.out")"
# Once its client holds a new session, an ftruncate through the old
# descriptor fails too (it would cut the waiter's bytes).
for ((i = 0; i < 100; i++)); do
	grep -q "did not resume session $sid" "$TWINFS_RUN_DIR"/logs/mount-*.log && break
	sleep 0.1
done
touch "$T/go"
for ((i = 0; i < 100; i++)); do grep -q truncate "$T/hold.out" && break; sleep 0.1; done
assert_eq fenced-ftruncate-fails "truncate error EIO" "$(grep truncate "$T/hold.out")"
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null
got=$("$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
import mmap
buf = mmap.mmap(-1, 1 << 20)
n = os.preadv(fd, [buf], 0)
print("B" if n == 1 << 20 and buf[:] == b"B" * (1 << 20) else
      "%d bytes, %d of them A" % (n, buf[:n].count(b"A")))' "$M/lk" 2>&1)
assert_eq fenced-writer-did-not-overwrite B "$got"
grep -Eq "session $sid\b.*which mgrd expired" "$TWINFS_RUN_DIR"/logs/mount-*.log &&
	pass client-names-the-fenced-session ||
	fail client-names-the-fenced-session "no line in the second mount's log"
# The same at the wire, whatever the client did first after SIGCONT: a
# WRITE naming that session is refused by the primary of its column and,
# forwarded, by either twin.
ino=$(stat -c %i "$M/lk")
layout=$(getfattr -n twinfs.layout --only-values "$M/lk" 2>/dev/null)
g=$(echo "$layout" | sed -n 's/.*groups=\([0-9]*\).*/\1/p')
read -r A B < <(ctl status | awk -v g="$g" '$2 == g && $3 == 0 { a = $1 }
	$2 == g && $3 == 1 { b = $1 } END { print a, b }')
run_checks "$PY" "$E2E_DIR/twire.py" fenced 127.0.0.1 $((TWINFS_PORT + A)) \
	"$TWINFS_CLUSTER" "$A" $((TWINFS_PORT + B)) "$B" "$sid" "$ino" "$layout"
grep -q "of client session $sid refused: mgrd expired that session" "$TWINFS_RUN_DIR"/logs/iod*.log &&
	pass iod-names-the-fenced-session ||
	fail iod-names-the-fenced-session "no 'session $sid refused' line in an iod log"
ok=0
for ((i = 0; i < 100; i++)); do
	echo after >"$M2/after" 2>/dev/null && [[ $(cat "$M/after" 2>/dev/null) == after ]] &&
		{ ok=1; break; }
	sleep 0.2
done
((ok)) && pass hung-client-serves-after-cont ||
	fail hung-client-serves-after-cont "no write through $M2 within 20 s of SIGCONT"
# Both of its connections came back with the dead session id: they must
# share one new session (else its locks would go with the other one).
assert_eq hung-client-one-new-session 1 \
	"$(grep -c "asks for session $sid, which expired" "$MLOG")"
lc umount "$M2" >/dev/null 2>&1
e2e_verify
e2e_end
