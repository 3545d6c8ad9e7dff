#!/usr/bin/env bash
# t_bounds.sh - the daemons' resource limits (proto/FORMAT.md "Limits")
# under hostile peers, while a mount runs fio with verify:
#   - 1,000 idle connections and 100 slow senders (half a frame header,
#     then nothing) to mgrd, and as many to iod 1: past max_connections
#     closed at once, the rest when hello_timeout passes;
#   - a peer that sends PINGs and never reads a reply: the daemon stops
#     reading it, logs why, and answers others meanwhile;
#   - one client address opens sessions until mgrd refuses one (EAGAIN),
#     and one session takes locks until mgrd refuses one (ENOLCK);
# all the while each daemon's VmRSS stays within a bound of its start and
# its open descriptors within max_connections of its start.  Then fio has
# verified every block, and the cluster is healthy and its twins identical.
#
# RSS bound: 64 MiB over the start.  What the limits leave a peer: 512
# connections of at most a few KiB each before HELLO (a 64 KiB read buffer,
# of which only what was read is touched), and 256 KiB of queued replies
# plus what was read before reading stopped (a 64 KiB buffer of PINGs:
# about 2,000 replies) for the peer that does not read: under 8 MiB with
# allocator overhead.  Without the limits the non-reading peer alone grows
# the daemon by what it sends (we send up to 256 MiB).  Under ASan freed
# memory sits in a quarantine (256 MiB by default) that the mount's I/O
# fills too, so the bound there is that quarantine plus the 64 MiB.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
export TWINFS_MAX_CONNECTIONS=512
export TWINFS_HELLO_TIMEOUT=2s
export TWINFS_MAX_QUEUED_REPLY_BYTES=256K
export TWINFS_MAX_SESSIONS_PER_CLIENT=8
export TWINFS_MAX_LOCKS_PER_SESSION=64
e2e_begin bounds
e2e_tmpdir T

RSS_BOUND_KB=$((64 << 10))
# (No `| grep -q` under pipefail: grep's early exit kills nm with SIGPIPE
# and the pipeline fails, so the sanitizer build went undetected.)
if [[ $(nm -D "$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd" 2>/dev/null;
	nm "$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd" 2>/dev/null) == *__asan_init* ]]; then
	RSS_BOUND_KB=$(((256 + 64) << 10))
fi
echo "# RSS bound: +$RSS_BOUND_KB kB"

# fio: two jobs of random writes with crc32c verify, paced to last about
# as long as the hostile peers (~15 s at any scale).
PER=$(scale $((32 << 20)))
((PER < (2 << 20))) && PER=$((2 << 20))
PER=$(((PER >> 20) << 20))
mkdir -p "$M/d-bounds"
fio --output="$T/fio.out" --name=bnd --directory="$M/d-bounds" --numjobs=2 \
	--size="$PER" --bs=64k --rw=randwrite --verify=crc32c --verify_fatal=1 \
	--ioengine=psync --randrepeat=1 --rate=$((PER / 12)) --end_fsync=1 \
	>"$T/fio.err" 2>&1 &
fpid=$!

pid_of() { cat "$TWINFS_RUN_DIR/pids/$1.pid"; }
drill() { # NAME PORT [MAX_SESSIONS]
	run_checks timeout 120 "$PY" "$E2E_DIR/bounds_drill.py" 127.0.0.1 "$2" \
		"$TWINFS_CLUSTER" "$1" "$(pid_of "$1")" "$TWINFS_MAX_CONNECTIONS" 2 \
		1000 100 "$RSS_BOUND_KB" "$TWINFS_RUN_DIR/logs/$1.log" ${3:+"$3"}
}
drill mgrd "$TWINFS_PORT" "$TWINFS_MAX_SESSIONS_PER_CLIENT"
drill iod1 $((TWINFS_PORT + 1))
check mgrd-refusal-logged grep -q "refused connection from 127.0.0.1:[0-9]*: .*max_connections" "$TWINFS_RUN_DIR/logs/mgrd.log"
check iod-hello-deadline-logged grep -q "no HELLO within hello_timeout" "$TWINFS_RUN_DIR/logs/iod1.log"

for _ in $(seq 1 1200); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$fpid" 2>/dev/null; then
	fail fio-finishes "fio still running after 120 s"
	kill -9 "$fpid"
fi
if wait "$fpid" && ! grep -qiE 'verify: bad|bad magic|verify failed' "$T/fio.out"; then
	grep -E '^ +(READ|WRITE):' "$T/fio.out" | sed 's/^ */# fio: /'
	pass fio-verify-during-drill
else
	fail fio-verify-during-drill "$(grep -ihE 'bad|error|err=|fio:' "$T/fio.out" "$T/fio.err" | head -n 4 | tr '\n' ' ')"
fi
for p in mgrd iod1; do
	kill -0 "$(pid_of $p)" 2>/dev/null && pass "$p-alive" || fail "$p-alive" "$p died"
done
check status-after ctl status
check ping-mgrd-after "$PY" "$E2E_DIR/twire.py" ping 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER"
check ping-iod-after "$PY" "$E2E_DIR/twire.py" ping 127.0.0.1 $((TWINFS_PORT + 1)) "$TWINFS_CLUSTER"
echo after >"$M/after" && assert_eq mount-works-after after "$(cat "$M/after")"

# One session holds at most max_locks_per_session byte-range locks: the
# next is ENOLCK (POSIX's "too many segment locks"), unlocking still works
# and frees room.  Disjoint ranges, so no two locks merge.
out=$("$PY" - "$M/locks" "$TWINFS_MAX_LOCKS_PER_SESSION" <<'PYEOF' 2>&1
import errno, fcntl, os, sys
path, limit = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
got = 0
for i in range(limit + 16):
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * i)
        got += 1
    except OSError as e:
        if e.errno != errno.ENOLCK:
            sys.exit("lock %d: %s" % (i, e))
        break
fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)          # unlock the first
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)   # fits again
print("granted", got)
PYEOF
)
if [[ $out == "granted $TWINFS_MAX_LOCKS_PER_SESSION" ]]; then
	pass locks-per-session-bounded
else
	fail locks-per-session-bounded "$out"
fi
check locks-refusal-logged grep -q "holds max_locks_per_session (64) locks: lock refused (ENOLCK)" "$TWINFS_RUN_DIR/logs/mgrd.log"
e2e_verify
e2e_end
