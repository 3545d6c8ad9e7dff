#!/usr/bin/env python3
"""sigstorm.py DIR SECONDS: metadata calls under a storm of caught signals.

A caught signal makes the kernel send FUSE an INTERRUPT for the request in
flight.  On a local file system mkdir, open(O_CREAT), unlink, rename,
chmod, chown and setxattr are never interrupted, so neither may they be
here once mgrd has the request: answering EINTR for a change that mgrd
applies anyway makes a program see a failure that happened.  Python
retries open, write, fchmod and fchown after EINTR (PEP 475), so there
such an answer shows only as the retry's error, FileExistsError from
open(O_CREAT | O_EXCL) of a fresh name; mkdir, setxattr, rename, unlink
and rmdir raise InterruptedError.  The storm is one SIGALRM every 300 us
(ITIMER_REAL).  Prints "ok N calls, K signals" or the first wrong
result."""
import os, signal, sys, time, traceback

d, secs = sys.argv[1], float(sys.argv[2])
os.makedirs(d, exist_ok=True)
hits = [0]

def on_alarm(signum, frame):
    hits[0] += 1

signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
end = time.monotonic() + secs
n = i = 0
try:
    while time.monotonic() < end:
        i += 1
        a, b, s = f"{d}/a{i}", f"{d}/b{i}", f"{d}/s{i}"
        os.mkdir(s)
        fd = os.open(a, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * 100)
        os.fchmod(fd, 0o600)
        os.fchown(fd, 0, 0)
        os.setxattr(a, "user.k", b"v%d" % i)
        os.close(fd)
        os.rename(a, b)
        os.unlink(b)
        os.rmdir(s)
        n += 10
except OSError as e:
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    line = traceback.extract_tb(e.__traceback__)[-1].line
    print(f"after {n} calls, {hits[0]} signals: {line}: {e!r}")
    sys.exit(1)
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print(f"ok {n} calls, {hits[0]} signals")
