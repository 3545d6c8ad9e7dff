#!/usr/bin/env bash
# t_locks.sh - cluster-wide locks between two (then three) mounts of one
# cluster (proto/FORMAT.md "Locks"): fcntl byte-range locks conflict across
# mounts (F_SETLK EAGAIN, F_GETLK reports the holder with pid 0 from the
# other mount and the holder's pid from its own), F_SETLKW waits and gets
# the lock on unlock, close and holder exit, deadlocks across mounts give
# EDEADLK, an unlock publishes the holder's writes to the next holder on
# another mount (and is not ended by a signal while it waits for them),
# a lock granted drops what the kernel cached of the file (SQLite), flock
# and OFD locks conflict across mounts, a waiter killed by
# SIGKILL or interrupted by SIGINT leaves nothing behind, a held lock
# survives an mgrd restart (re-claimed in the grace period), and killing a
# client's twinfs process releases its locks when its session expires.
# Inode numbers the kernel holds are st_ino (none in /proc/locks).
export TWINFS_SESSION_TIMEOUT=${TWINFS_SESSION_TIMEOUT:-2s}
# The grace must cover a client's reconnect (500 ms poll) on a loaded CI host.
export TWINFS_LOCK_GRACE=${TWINFS_LOCK_GRACE:-4s}
. "$(dirname "$0")/lib.sh"
e2e_begin locks
e2e_tmpdir T
M2=$TWINFS_RUN_DIR/mnt2
M3=$TWINFS_RUN_DIR/mnt3
# A holder that died closes its fifo: writing to it must not kill us.
trap '' PIPE
lc mount "$M2" >/dev/null || { fail locks-mount2 "second mount failed"; exit 1; }
pass locks-mount2

# The kernel's inode number of a file (what /proc/PID/maps shows, and
# /proc/locks would) is its st_ino and its readdir d_ino, on both mounts,
# through every reply that names it (create, lookup, readdirplus).  The
# locks themselves are mgrd's: the kernel passes them on and records none,
# so /proc/locks (lslocks) lists none of them; its lines near a cluster
# are the daemons' own locks on their journals.
inos=$("$PY" - "$M/ino-f" "$M2/ino-f" <<'EOF'
import fcntl, mmap, os, sys
a, b = sys.argv[1], sys.argv[2]
fd = os.open(a, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 4096)
fcntl.lockf(fd, fcntl.LOCK_EX)
m = mmap.mmap(fd, 4096)
maps = [l.split() for l in open("/proc/self/maps") if l.rstrip().endswith(a)]
dirent = [e.inode() for e in os.scandir(os.path.dirname(b)) if e.name == "ino-f"]
dev = os.stat(a).st_dev
mm = "%02x:%02x" % (os.major(dev), os.minor(dev))
locks = [l for l in open("/proc/locks") if (":%s:" % mm) in l or (" %s:" % mm) in l]
print(os.fstat(fd).st_ino, maps[0][4] if maps else "none", os.stat(b).st_ino,
      dirent[0] if dirent else "none", len(locks))
EOF
)
read -r ino_fstat ino_maps ino_m2 ino_dirent n_proc_locks <<<"$inos"
assert_eq ino-maps-is-st-ino "$ino_fstat" "$ino_maps"
assert_eq ino-other-mount "$ino_fstat" "$ino_m2"
assert_eq ino-readdir "$ino_fstat" "$ino_dirent"
assert_eq proc-locks-none-of-mount 0 "$n_proc_locks"

probe() { "$PY" "$E2E_DIR/lockprobe.py" "$@" 2>&1; }

# Background holders and waiters: stdin from the fifo $T/NAME.in (kept
# open on a descriptor), stdout to $T/NAME.out.
declare -A BGFD BGPID
bg_start() { # NAME lockprobe-args...
	local name=$1 fd
	shift
	mkfifo "$T/$name.in"
	"$PY" "$E2E_DIR/lockprobe.py" "$@" <"$T/$name.in" >"$T/$name.out" 2>&1 &
	BGPID[$name]=$!
	exec {fd}>"$T/$name.in"
	BGFD[$name]=$fd
}
bg_send() { echo "$2" >&"${BGFD[$1]}"; }
# bg_saw NAME WORD TENTHS: true once NAME printed WORD, within TENTHS/10 s.
bg_saw() {
	local i
	for ((i = 0; i < $3; i++)); do
		grep -qx "$2" "$T/$1.out" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
bg_stop() {
	local name=$1 i
	[[ -n ${BGFD[$name]:-} ]] || return 0
	echo exit >&"${BGFD[$name]}" 2>/dev/null
	exec {BGFD[$name]}>&-
	for ((i = 0; i < 50; i++)); do kill -0 "${BGPID[$name]}" 2>/dev/null || break; sleep 0.1; done
	kill -9 "${BGPID[$name]}" 2>/dev/null
	wait "${BGPID[$name]}" 2>/dev/null
	unset "BGFD[$name]"
}
# assert_locked NAME CHECK: NAME got its lock (printed "locked").
assert_locked() { bg_saw "$1" locked 150 && pass "$2" || fail "$2" "$(tr '\n' ' ' <"$T/$1.out")"; }
# assert_waits NAME CHECK: NAME is still waiting after a second.
assert_waits() {
	sleep 1
	if bg_saw "$1" waiting 20 && ! grep -qx locked "$T/$1.out"; then
		pass "$2"
	else
		fail "$2" "$(tr '\n' ' ' <"$T/$1.out")"
	fi
}

cd "$M" || exit 1
printf '0123456789' >f

# --- the wire contract, from an independent client (test/e2e/twire.py)
run_checks "$PY" "$E2E_DIR/twire.py" locks 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER"

# --- fcntl byte-range locks across mounts
bg_start h1 "$M/f" posix hold wr 0 100
bg_saw h1 locked 100 && pass posix-hold || fail posix-hold "$(cat "$T/h1.out")"
assert_eq posix-conflict-other-mount EAGAIN "$(probe "$M2/f" posix try wr 50 10)"
assert_eq posix-read-conflict-other-mount EAGAIN "$(probe "$M2/f" posix try rd 99 1)"
assert_eq posix-disjoint-other-mount ok "$(probe "$M2/f" posix try wr 100 10)"
assert_eq posix-conflict-same-mount EAGAIN "$(probe "$M/f" posix try wr 0 1)"
assert_eq getlk-other-mount "wr 0 100 0" "$(probe "$M2/f" posix get rd 0 0)"
assert_eq getlk-same-mount "wr 0 100 ${BGPID[h1]}" "$(probe "$M/f" posix get wr 10 5)"
assert_eq getlk-none unlck "$(probe "$M2/f" posix get wr 100 0)"

# F_SETLKW on B waits and gets the lock when A unlocks
bg_start w1 "$M2/f" posix wait wr 0 10
assert_waits w1 setlkw-waits
# A parked waiter holds no FUSE thread: the mount keeps serving, other
# waiters included.
assert_eq waiter-mount-still-serves 0123456789 "$(timeout 10 cat "$M2/f" 2>&1)"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	bg_start "m$i" "$M2/f" posix wait rd $((20 + i)) 1
done
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do bg_saw "m$i" waiting 50; done
sleep 0.5
assert_eq many-waiters-wait 0 "$(cat "$T"/m*.out | grep -cx locked)"
assert_eq waiters-mount-still-serves 0123456789 "$(timeout 10 cat "$M2/f" 2>&1)"
bg_send h1 unlock
assert_locked w1 setlkw-granted-on-unlock
assert_eq setlkw-holder-now-b EAGAIN "$(probe "$M/f" posix try wr 5 1)"
ok=0
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do bg_saw "m$i" locked 100 && ok=$((ok + 1)); done
assert_eq many-waiters-granted 12 "$ok"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do bg_stop "m$i"; done
bg_stop w1
assert_eq exit-releases ok "$(probe "$M/f" posix try wr 0 0)"
bg_stop h1

# An unlock publishes the holder's writes, as NFS's does: the next holder,
# on the other mount, reads every byte and the size, while the writer
# keeps the file open (no close-to-open to rely on).
"$PY" - "$M/pub" "$M2/pub" <<'EOF' && pass unlock-publishes-writes || fail unlock-publishes-writes "the next holder saw less"
import fcntl, os, struct, sys
a, b = sys.argv[1], sys.argv[2]
def lk(fd, t, wait=True):
    fcntl.fcntl(fd, fcntl.F_SETLKW if wait else fcntl.F_SETLK,
                struct.pack("@hhqqi4x", t, os.SEEK_SET, 0, 0, 0))
fd = os.open(a, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
unit = 16 * 10240   # 40 pages: rounds never share a page
for r in range(20):
    lk(fd, fcntl.F_WRLCK)
    data = bytes([65 + r]) * 10240
    for i in range(16):
        os.pwrite(fd, data, r * unit + i * 10240)
    lk(fd, fcntl.F_UNLCK, False)
    g = os.open(b, os.O_RDWR)
    lk(g, fcntl.F_WRLCK)
    got = os.pread(g, unit, r * unit)
    size = os.fstat(g).st_size
    lk(g, fcntl.F_UNLCK, False)
    os.close(g)
    if got != data * 16 or size != (r + 1) * unit:
        sys.exit("round %d: %d bytes read, %d right, size %d" % (
            r, len(got), sum(x == y for x, y in zip(got, data * 16)), size))
os.close(fd)
EOF

# An unlock that waits for the writes before it (a twin hung: they land
# after the failover, up to request_timeout) and is interrupted meanwhile
# still unlocks: Linux never fails F_UNLCK with EINTR, and a program told
# so would leave the lock held.  (ctypes: python's fcntl retries EINTR.)
lc stop-iod 2 >/dev/null
out=$(cd / && "$PY" - "$M/hung" "$M2/hung" 2>&1 <<'EOF'
import ctypes, fcntl, os, signal, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def lk(fd, t):
    b = ctypes.create_string_buffer(struct.pack("@hhqqi4x", t, os.SEEK_SET, 0, 0, 0))
    r = libc.fcntl(fd, fcntl.F_SETLK, b)
    return 0 if r == 0 else ctypes.get_errno()
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
if lk(fd, fcntl.F_WRLCK):
    sys.exit("lock failed")
os.pwrite(fd, b"h" * (2 << 20), 0)   # both groups: some of it to iod 2
hits = []
signal.signal(signal.SIGALRM, lambda s, f: hits.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.3)
t0 = time.monotonic()
err = lk(fd, fcntl.F_UNLCK)
el = time.monotonic() - t0
g = os.open(sys.argv[2], os.O_RDWR)
other = lk(g, fcntl.F_WRLCK)
# The signal must have come while the unlock waited, or this proves nothing.
print("unlock %s after %.3f s, %d signal(s), other mount's lock %s" % (
    os.strerror(err) if err else "ok", el, len(hits),
    os.strerror(other) if other else "ok"))
EOF
)
lc cont-iod 2 >/dev/null
echo "# $out"
[[ $out =~ ^unlock\ ok\ after\ ([0-9.]+)\ s,\ 1\ signal\(s\),\ other\ mount\'s\ lock\ ok$ ]] &&
	awk -v e="${BASH_REMATCH[1]}" 'BEGIN { exit !(e >= 0.3) }' && pass unlock-not-interrupted ||
	fail unlock-not-interrupted "$out"
el=$(wait_state 2 '^up$' 120000) || fail unlock-not-interrupted-twin-back "iod 2: $el"

# A lock makes the last holder's writes visible, also data the kernel had
# cached before: SQLite, two processes on each mount (sqlite2.py).
n=$(awk -v s="$SCALE" 'BEGIN { v = int(150 * s); if (v < 40) v = 40; print v }')
for mode in DELETE TRUNCATE; do
	out=$(cd / && timeout 600 "$PY" "$E2E_DIR/sqlite2.py" "$M/sql-$mode.db" "$M2/sql-$mode.db" \
		"$mode" "$n" 2>&1)
	[[ $out == ok ]] && pass "sqlite-two-mounts-$mode" || fail "sqlite-two-mounts-$mode" "$out"
done

# ... when A closes the file (another fd of the same process)
bg_start h2 "$M/f" posix hold wr 0 0
bg_saw h2 locked 100
bg_start w2 "$M2/f" posix wait rd 5 1
assert_waits w2 setlkw-waits-close
bg_send h2 close
assert_locked w2 setlkw-granted-on-close
bg_stop w2
bg_stop h2

# ... when the holder is killed
bg_start h3 "$M/f" posix hold wr 0 0
bg_saw h3 locked 100
bg_start w3 "$M2/f" posix wait wr 0 0
assert_waits w3 setlkw-waits-kill
kill -9 "${BGPID[h3]}"
assert_locked w3 setlkw-granted-on-holder-kill
bg_stop w3
bg_stop h3

# split and upgrade across mounts: A holds rd [0,10), then wr [5,10)
bg_start h4 "$M/f" posix hold rd 0 10
bg_saw h4 locked 100
assert_eq shared-read-other-mount ok "$(probe "$M2/f" posix try rd 0 10)"
probe "$M/f" posix try wr 0 1 >/dev/null  # another owner on A: refused, no change
assert_eq read-still-shared ok "$(probe "$M2/f" posix try rd 2 1)"
bg_stop h4

# deadlock across mounts: a process on A holds byte 0 and waits for byte
# 1, held by a process on B that then asks for byte 0 -> EDEADLK
cat >"$T/dl.py" <<'EOF'
import errno, fcntl, os, struct, sys, time
def fl(t, s, l): return struct.pack("@hhqqi4x", t, 0, s, l, 0)
a, b = sys.argv[1], sys.argv[2]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    fd = os.open(a, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, fl(fcntl.F_WRLCK, 0, 1))
    os.write(w, b"x")
    time.sleep(1.0)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLKW, fl(fcntl.F_WRLCK, 1, 1))
    except OSError:
        pass
    os._exit(0)
fd = os.open(b, os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLK, fl(fcntl.F_WRLCK, 1, 1))
os.read(r, 1)
time.sleep(2.0)
try:
    fcntl.fcntl(fd, fcntl.F_SETLKW, fl(fcntl.F_WRLCK, 0, 1))
    print("locked")
except OSError as e:
    print("EDEADLK" if e.errno == errno.EDEADLK else errno.errorcode[e.errno])
os.close(fd)
os.waitpid(pid, 0)
EOF
assert_eq deadlock-across-mounts EDEADLK "$(timeout 30 "$PY" "$T/dl.py" "$M/f" "$M2/f" 2>&1)"
assert_eq deadlock-nothing-left ok "$(probe "$M2/f" posix try wr 0 0)"

# --- flock across mounts
bg_start fl1 "$M/f" flock hold wr 0 0
bg_saw fl1 locked 100
assert_eq flock-ex-conflict EAGAIN "$(probe "$M2/f" flock try wr 0 0)"
assert_eq flock-sh-conflict EAGAIN "$(probe "$M2/f" flock try rd 0 0)"
assert_eq flock-vs-posix-independent ok "$(probe "$M2/f" posix try wr 0 0)"
bg_start fw1 "$M2/f" flock wait rd 0 0
assert_waits fw1 flock-waits
bg_send fl1 close
assert_locked fw1 flock-granted-on-close
assert_eq flock-shared-with-other ok "$(probe "$M/f" flock try rd 0 0)"
bg_stop fw1
bg_stop fl1

# --- OFD locks across mounts (and against POSIX locks)
bg_start o1 "$M/f" ofd hold wr 0 10
bg_saw o1 locked 100
assert_eq ofd-conflict EAGAIN "$(probe "$M2/f" ofd try wr 5 1)"
assert_eq ofd-vs-posix EAGAIN "$(probe "$M2/f" posix try rd 0 1)"
assert_eq ofd-getlk "wr 0 10 -1" "$(probe "$M2/f" ofd get wr 0 0)"
bg_start ow1 "$M2/f" ofd wait wr 0 0
assert_waits ow1 ofd-waits
bg_send o1 close
assert_locked ow1 ofd-granted-on-close
bg_stop ow1
bg_stop o1

# --- a SETLKW waiter killed by SIGKILL leaves nothing behind
bg_start k1 "$M/f" posix hold wr 0 0
bg_saw k1 locked 100
bg_start kw "$M2/f" posix wait wr 0 0
assert_waits kw sigkill-waiter-waits
kill -9 "${BGPID[kw]}"
wait "${BGPID[kw]}" 2>/dev/null
bg_send k1 unlock
bg_saw k1 unlocked 50
assert_eq sigkill-waiter-left-nothing ok "$(probe "$M2/f" posix try wr 0 0)"
unset "BGFD[kw]"
bg_stop k1

# --- ... and one interrupted by SIGINT gets EINTR and holds nothing
bg_start i1 "$M/f" posix hold wr 0 0
bg_saw i1 locked 100
bg_start iw "$M2/f" posix wait wr 0 0
assert_waits iw sigint-waiter-waits
kill -INT "${BGPID[iw]}"
bg_saw iw eintr 100 && pass sigint-waiter-eintr || fail sigint-waiter-eintr "$(tr '\n' ' ' <"$T/iw.out")"
bg_send i1 unlock
bg_saw i1 unlocked 50
# The interrupted process is still alive with the file open: had its wait
# stayed at mgrd, it would now hold the lock.
sleep 0.5
assert_eq sigint-waiter-left-nothing ok "$(probe "$M/f" posix try wr 0 0)"
bg_stop iw
bg_stop i1

# --- a held lock survives an mgrd restart (re-claimed within the grace)
# and a waiter parked across the restart is granted when it is released
bg_start r1 "$M/f" posix hold wr 0 0
bg_saw r1 locked 100
bg_start rw "$M2/f" posix wait wr 0 0
assert_waits rw restart-waiter-waits
lc kill-mgrd >/dev/null
lc start-mgrd >/dev/null || fail locks-mgrd-start "start-mgrd failed"
sleep 1
assert_eq restart-lock-kept EAGAIN "$(timeout 60 "$PY" "$E2E_DIR/lockprobe.py" "$M2/f" posix try wr 0 1 2>&1)"
assert_eq restart-getlk "wr 0 0 0" "$(timeout 60 "$PY" "$E2E_DIR/lockprobe.py" "$M2/f" posix get wr 0 0 2>&1)"
assert_eq restart-waiter-still-waits 0 "$(grep -cx locked "$T/rw.out")"
bg_send r1 unlock
bg_saw r1 unlocked 100
assert_locked rw restart-waiter-granted
bg_stop rw
assert_eq restart-unlock-seen ok "$(probe "$M2/f" posix try wr 0 0)"
bg_stop r1

# --- killing a client (its twinfs process) releases its locks when its
# session expires
lc mount "$M3" >/dev/null || fail locks-mount3 "third mount failed"
bg_start c1 "$M3/f" posix hold wr 0 0
bg_saw c1 locked 100
bg_start cw "$M2/f" posix wait wr 0 0
assert_waits cw client-kill-waiter-waits
cpid=$(client_pid "$M3")
if [[ -n $cpid ]]; then
	kill -9 "$cpid"
	assert_locked cw client-kill-releases-after-session-expiry
else
	fail client-kill-releases-after-session-expiry "no pid for $M3"
fi
kill -9 "${BGPID[c1]}" 2>/dev/null
unset "BGFD[c1]"
bg_stop cw
fusermount3 -u -z "$M3" 2>/dev/null
lc umount "$M3" >/dev/null 2>&1
grep -q "locks of expired session" "$TWINFS_RUN_DIR"/logs/mgrd*.log &&
	pass mgrd-logged-release || fail mgrd-logged-release "no log line"

cd / && lc umount "$M2" >/dev/null
e2e_end
