#!/usr/bin/env python3
"""punch_race.py PATH1 PATH2 OPS SEED - two processes, one per path (the
same file through two mounts), race random writes, punches, ZERO_RANGEs
and KEEP_SIZE allocations over the same few stripe units for OPS
operations each.  No model can say who wins; what must hold is that the
twins agree (twinfsctl verify, run by t_fsx.sh afterwards) and that both
mounts then read the same bytes (checked here).  Exit status 0 when so.
"""
import ctypes
import os
import random
import sys

KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE = 0x01, 0x02, 0x10
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64]
SPAN = 1 << 20


def worker(path, ops, seed):
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDWR)
    for _ in range(ops):
        off = rng.randrange(0, SPAN)
        length = rng.randrange(1, 200000)
        kind = rng.random()
        if kind < 0.5:
            os.pwrite(fd, rng.randbytes(length), off)
        else:
            mode = (PUNCH_HOLE | KEEP_SIZE if kind < 0.8 else
                    ZERO_RANGE | KEEP_SIZE if kind < 0.9 else KEEP_SIZE)
            if libc.fallocate(fd, mode, off, length) != 0:
                e = ctypes.get_errno()
                raise OSError(e, "fallocate(%#x): %s" % (mode, os.strerror(e)))
    os.close(fd)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    p1, p2, ops, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print("punch_race: seed %d, %d operations per mount" % (seed, ops))
    with open(p1, "wb") as f:
        f.write(random.Random(seed).randbytes(SPAN))
    pids = []
    for i, p in enumerate((p1, p2)):
        pid = os.fork()
        if pid == 0:
            try:
                worker(p, ops, seed * 2 + i)
                os._exit(0)
            except Exception as e:  # noqa: BLE001 - report in the child
                print("punch_race: worker %d: %s" % (i, e))
                os._exit(1)
        pids.append(pid)
    bad = sum(os.waitpid(pid, 0)[1] != 0 for pid in pids)
    a, b = read_all(p1), read_all(p2)
    if a != b:
        print("punch_race: the two mounts read different bytes (%d, %d)" % (len(a), len(b)))
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
