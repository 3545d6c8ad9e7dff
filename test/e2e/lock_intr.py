#!/usr/bin/env python3
"""lock_intr.py FILE DIR: interrupted lock calls while mgrd is cut off.
Opens FILE while mgrd still answers, prints "ready", waits for DIR/lockgo,
then makes a non-blocking F_SETLK and an F_GETLK (write locks on the whole
file), each interrupted by a caught SIGALRM 500 ms in, and prints
"setlk RESULT MS" and "getlk RESULT MS": RESULT is "ok" or the errno's
name, MS how long the call took.  Closes FILE only after DIR/lockclose
(a close after an unanswered lock call tells mgrd, so it waits for it).
ctypes: python's own fcntl retries EINTR."""
import ctypes, errno, fcntl, os, signal, struct, sys, time

path, d = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)


def call(cmd):
    """fcntl(cmd) with a whole-file write lock: (errno or 0, ms)."""
    b = ctypes.create_string_buffer(
        struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    t0 = time.monotonic()
    r = libc.fcntl(fd, cmd, b)
    err = 0 if r == 0 else ctypes.get_errno()
    ms = int((time.monotonic() - t0) * 1000)
    signal.setitimer(signal.ITIMER_REAL, 0)
    return err, ms


def wait_for(name):
    for _ in range(6000):
        if os.path.exists(os.path.join(d, name)):
            return
        time.sleep(0.01)


fd = os.open(path, os.O_RDWR)
signal.signal(signal.SIGALRM, lambda s, f: None)
print("ready", flush=True)
wait_for("lockgo")
for name, cmd in (("setlk", fcntl.F_SETLK), ("getlk", fcntl.F_GETLK)):
    err, ms = call(cmd)
    print("%s %s %d" % (name, errno.errorcode.get(err, "ok") if err else "ok",
                        ms), flush=True)
wait_for("lockclose")
os.close(fd)
