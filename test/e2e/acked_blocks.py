#!/usr/bin/env python3
"""acked_blocks.py write PATH LOG N | check PATH LOG - the fsync drill's
two halves (t_journal_crash.sh, t_writeback.sh).

write: block i (64 KiB at offset i * 64 KiB) holds a pattern derived from
i; after each pwrite + fsync that returns, i is appended to LOG (a local
file, line-buffered and fsynced), so LOG lists exactly the acknowledged
blocks.  Stops at the first error (printed), which a drill provokes.

check: every block listed in LOG reads back exactly; prints "bad N" and
the first differing blocks.  Exit status 0 when none differs.
"""
import hashlib
import os
import sys

BLOCK = 65536


def pattern(i):
    return hashlib.sha256(str(i).encode()).digest() * (BLOCK // 32)


def write(path, log, n):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    lf = open(log, "w", buffering=1)
    for i in range(n):
        try:
            os.pwrite(fd, pattern(i), i * BLOCK)
            os.fsync(fd)
        except OSError as e:
            print("stopped at block", i, e)
            break
        lf.write(f"{i}\n")
        os.fsync(lf.fileno())
    return 0


def check(path, log):
    fd = os.open(path, os.O_RDONLY)
    bad = 0
    for line in open(log):
        i = int(line)
        if os.pread(fd, BLOCK, i * BLOCK) != pattern(i):
            bad += 1
            if bad <= 5:
                print("block", i, "differs")
    print("bad", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "write":
        sys.exit(write(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    sys.exit(__doc__)
