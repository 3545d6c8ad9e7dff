#!/usr/bin/env python3
"""mgrd_intr.py FILE WFILE DIR: calls that wait for mgrd, interrupted
while mgrd is cut off.  Opens FILE and creates WFILE while mgrd still
answers, prints "ready", waits for DIR/lockgo, then makes a non-blocking
F_SETLK and an F_GETLK (write locks on the whole of FILE) and, after a
4 KiB write to WFILE, an fsync of it (its size report waits for mgrd);
each is interrupted by a caught SIGALRM 500 ms in.  Prints "setlk RESULT
MS", "getlk RESULT MS" and "fsync RESULT MS": RESULT is "ok" or the
errno's name, MS how long the call took.  Closes both only after
DIR/lockclose (a close after an unanswered lock call tells mgrd, and one
of a written file reports its size, so both wait for mgrd).
ctypes: python's own fcntl and os.fsync retry EINTR."""
import ctypes, errno, fcntl, os, signal, struct, sys, time

path, wpath, d = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)


def timed(fn):
    """fn() -> libc result, interrupted 500 ms in: (errno or 0, ms)."""
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    t0 = time.monotonic()
    r = fn()
    err = 0 if r == 0 else ctypes.get_errno()
    ms = int((time.monotonic() - t0) * 1000)
    signal.setitimer(signal.ITIMER_REAL, 0)
    return err, ms


def lock_call(cmd):
    b = ctypes.create_string_buffer(
        struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    return lambda: libc.fcntl(fd, cmd, b)


def wait_for(name):
    for _ in range(6000):
        if os.path.exists(os.path.join(d, name)):
            return
        time.sleep(0.01)


fd = os.open(path, os.O_RDWR)
wfd = os.open(wpath, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
signal.signal(signal.SIGALRM, lambda s, f: None)
print("ready", flush=True)
wait_for("lockgo")
calls = [("setlk", lock_call(fcntl.F_SETLK)), ("getlk", lock_call(fcntl.F_GETLK))]
for name, fn in calls:
    err, ms = timed(fn)
    print("%s %s %d" % (name, errno.errorcode.get(err, "ok") if err else "ok",
                        ms), flush=True)
os.pwrite(wfd, b"f" * 4096, 0)
err, ms = timed(lambda: libc.fsync(wfd))
print("fsync %s %d" % (errno.errorcode.get(err, "ok") if err else "ok", ms),
      flush=True)
wait_for("lockclose")
os.close(fd)
os.close(wfd)
