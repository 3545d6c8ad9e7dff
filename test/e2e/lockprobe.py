#!/usr/bin/env python3
"""lockprobe.py - take, test and hold fcntl, OFD and flock locks for
t_locks.sh.

usage: lockprobe.py FILE KIND OP [TYPE START LEN]
  KIND  posix | ofd | flock
  OP    try   non-blocking lock; prints "ok" or the errno name, then exits
        get   F_GETLK / F_OFD_GETLK; prints "unlck" or "TYPE START LEN PID"
        hold  non-blocking lock, prints "locked" (or the errno name and
              exits), then obeys stdin lines: "unlock", "close", "exit"
        wait  as hold, but blocking (F_SETLKW, flock without LOCK_NB);
              prints "waiting" before the call; SIGINT makes the call fail
              and prints "eintr" (the process stays, holding nothing new)
  TYPE  rd | wr
Each output line is flushed at once.
"""
import errno
import fcntl
import os
import signal
import struct
import sys

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
TYPES = {"rd": fcntl.F_RDLCK, "wr": fcntl.F_WRLCK}
NAMES = {fcntl.F_RDLCK: "rd", fcntl.F_WRLCK: "wr", fcntl.F_UNLCK: "unlck"}


class Interrupted(Exception):
    pass


def say(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


def flock_struct(ltype, start, length):
    # struct flock on Linux x86_64/aarch64: short type, short whence,
    # off_t start, off_t len, pid_t pid (+ padding to 32 bytes).
    return struct.pack("@hhqqi4x", ltype, os.SEEK_SET, start, length, 0)


def do_lock(fd, kind, ltype, start, length, wait):
    if kind == "flock":
        op = {fcntl.F_RDLCK: fcntl.LOCK_SH, fcntl.F_WRLCK: fcntl.LOCK_EX,
              fcntl.F_UNLCK: fcntl.LOCK_UN}[ltype]
        fcntl.flock(fd, op if wait else op | fcntl.LOCK_NB)
        return
    if kind == "ofd":
        cmd = F_OFD_SETLKW if wait else F_OFD_SETLK
    else:
        cmd = fcntl.F_SETLKW if wait else fcntl.F_SETLK
    fcntl.fcntl(fd, cmd, flock_struct(ltype, start, length))


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def main():
    path, kind, op = sys.argv[1:4]
    ltype, start, length = fcntl.F_WRLCK, 0, 0
    if len(sys.argv) > 4:
        ltype = TYPES[sys.argv[4]]
        start, length = int(sys.argv[5]), int(sys.argv[6])
    fd = os.open(path, os.O_RDWR)
    if op == "get":
        cmd = F_OFD_GETLK if kind == "ofd" else fcntl.F_GETLK
        out = fcntl.fcntl(fd, cmd, flock_struct(ltype, start, length))
        t, _, s, ln, pid = struct.unpack("@hhqqi4x", out)
        say("unlck" if t == fcntl.F_UNLCK else "%s %d %d %d" % (NAMES[t], s, ln, pid))
        return 0
    if op == "try":
        try:
            do_lock(fd, kind, ltype, start, length, False)
            say("ok")
        except OSError as e:
            say(err_name(e))
        return 0

    def on_sigint(signum, frame):
        raise Interrupted()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        if op == "wait":
            say("waiting")
        do_lock(fd, kind, ltype, start, length, op == "wait")
        say("locked")
    except Interrupted:
        say("eintr")
    except OSError as e:
        say(err_name(e))
        if op == "hold":
            return 0
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "unlock":
            do_lock(fd, kind, fcntl.F_UNLCK, start, length, False)
            say("unlocked")
        elif cmd == "close":
            os.close(fd)
            say("closed")
        elif cmd == "exit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
