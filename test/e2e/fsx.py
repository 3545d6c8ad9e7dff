#!/usr/bin/env python3
"""fsx.py - a randomized file operation tester, after fsx (the classic file
system exerciser): one file, a bounded number of random operations, every
result checked byte for byte against an in-memory model.

  fsx.py [-n OPS] [-s SEED] [-l MAXLEN] [-w MAXOP] FILE

Operations: write (pwrite), truncate (up and down), mmap write (shared
mapping, msync), punch hole (fallocate PUNCH_HOLE|KEEP_SIZE), fallocate
(default mode, which may extend the file, and KEEP_SIZE), ZERO_RANGE (with
and without KEEP_SIZE), read back a random
range, SEEK_DATA/SEEK_HOLE (every hole reported must read as zeros), and
close/reopen (the whole file compared).  The seed is printed first, so a
failure reproduces with -s SEED; the last operations are printed with the
failure.  Exit status 0 when every check passed.
"""
import argparse
import collections
import ctypes
import errno
import mmap
import os
import random
import sys
import time

KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE = 0x01, 0x02, 0x10
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64]


class Failure(Exception):
    pass


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Fsx:
    def __init__(self, path, seed, maxlen, maxop):
        self.path = path
        self.rng = random.Random(seed)
        self.maxlen = maxlen
        self.maxop = maxop
        self.model = bytearray()
        self.log = collections.deque(maxlen=20)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.counts = collections.Counter()

    def note(self, n, what):
        self.log.append("%d: %s" % (n, what))

    def check_range(self, off, got, what):
        want = bytes(self.model[off:off + len(got)])
        if got != want:
            bad = next(i for i in range(len(got)) if got[i] != want[i])
            raise Failure("%s: byte %d is %#x, model has %#x" %
                          (what, off + bad, got[bad], want[bad]))

    def check_size(self, what):
        size = os.fstat(self.fd).st_size
        if size != len(self.model):
            raise Failure("%s: size %d, model %d" % (what, size,
                                                     len(self.model)))

    def op_write(self, n):
        off = self.rng.randrange(0, self.maxlen)
        data = self.rng.randbytes(self.rng.randrange(1, self.maxop + 1))
        self.note(n, "write %d+%d" % (off, len(data)))
        if os.pwrite(self.fd, data, off) != len(data):
            raise Failure("short write")
        if off > len(self.model):
            self.model += bytes(off - len(self.model))
        self.model[off:off + len(data)] = data

    def op_truncate(self, n):
        size = self.rng.randrange(0, self.maxlen + self.maxop)
        self.note(n, "truncate %d" % size)
        os.ftruncate(self.fd, size)
        if size < len(self.model):
            del self.model[size:]
        else:
            self.model += bytes(size - len(self.model))
        self.check_size("after truncate")

    def op_mapwrite(self, n):
        size = len(self.model)
        if size == 0:
            return self.op_write(n)
        off = self.rng.randrange(0, size)
        length = min(self.rng.randrange(1, self.maxop + 1), size - off)
        data = self.rng.randbytes(length)
        self.note(n, "mapwrite %d+%d" % (off, length))
        m = mmap.mmap(self.fd, size, mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            m[off:off + length] = data
            m.flush()
        finally:
            m.close()
        self.model[off:off + length] = data

    def op_punch(self, n):
        off = self.rng.randrange(0, self.maxlen)
        length = self.rng.randrange(1, 2 * self.maxop)
        self.note(n, "punch %d+%d" % (off, length))
        fallocate(self.fd, PUNCH_HOLE | KEEP_SIZE, off, length)
        end = min(off + length, len(self.model))
        if off < end:
            self.model[off:end] = bytes(end - off)
        self.check_size("after punch")

    def op_falloc(self, n):
        keep = self.rng.random() < 0.5
        off = self.rng.randrange(0, self.maxlen)
        length = self.rng.randrange(1, 2 * self.maxop)
        self.note(n, "fallocate%s %d+%d" % (" keep_size" if keep else "",
                                             off, length))
        fallocate(self.fd, KEEP_SIZE if keep else 0, off, length)
        if not keep and off + length > len(self.model):
            self.model += bytes(off + length - len(self.model))
        self.check_size("after fallocate")

    def op_zero(self, n):
        keep = self.rng.random() < 0.5
        off = self.rng.randrange(0, self.maxlen)
        length = self.rng.randrange(1, 2 * self.maxop)
        self.note(n, "zero_range%s %d+%d" % (" keep_size" if keep else "",
                                              off, length))
        fallocate(self.fd, ZERO_RANGE | (KEEP_SIZE if keep else 0), off,
                  length)
        end = off + length
        if not keep and end > len(self.model):
            self.model += bytes(end - len(self.model))
        end = min(end, len(self.model))
        if off < end:
            self.model[off:end] = bytes(end - off)
        self.check_size("after zero_range")

    def op_read(self, n):
        size = len(self.model)
        off = self.rng.randrange(0, size + 1)
        length = self.rng.randrange(1, self.maxop + 1)
        self.note(n, "read %d+%d" % (off, length))
        got = os.pread(self.fd, length, off)
        if len(got) != max(0, min(length, size - off)):
            raise Failure("read %d+%d returned %d bytes (size %d)" %
                          (off, length, len(got), size))
        self.check_range(off, got, "read")

    def op_seek(self, n):
        size = len(self.model)
        off = self.rng.randrange(0, size + 2)
        self.note(n, "seek %d" % off)
        res = {}
        for whence in (os.SEEK_DATA, os.SEEK_HOLE):
            try:
                res[whence] = os.lseek(self.fd, off, whence)
            except OSError as e:
                res[whence] = -e.errno
        if off >= size:
            if res[os.SEEK_DATA] != -errno.ENXIO or res[os.SEEK_HOLE] != -errno.ENXIO:
                raise Failure("seek at %d past size %d: %r" % (off, size, res))
            return
        hole, data = res[os.SEEK_HOLE], res[os.SEEK_DATA]
        if not off <= hole <= size:
            raise Failure("SEEK_HOLE %d from %d (size %d)" % (hole, off, size))
        nxt = size if data == -errno.ENXIO else data
        if nxt < off or nxt > size:
            raise Failure("SEEK_DATA %d from %d (size %d)" % (data, off, size))
        # What is reported as a hole must read as zeros.
        if any(self.model[off:nxt]):
            raise Failure("SEEK_DATA %d from %d skips data" % (data, off))

    def op_reopen(self, n):
        self.note(n, "close/reopen and compare")
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.check_size("after reopen")
        got = bytearray()
        while True:
            b = os.pread(self.fd, 1 << 20, len(got))
            if not b:
                break
            got += b
        self.check_range(0, bytes(got), "whole file")
        if len(got) != len(self.model):
            raise Failure("whole file: read %d bytes, model %d" %
                          (len(got), len(self.model)))

    OPS = ((op_write, 30), (op_truncate, 6), (op_mapwrite, 10),
           (op_punch, 10), (op_falloc, 8), (op_zero, 4), (op_read, 25),
           (op_seek, 6),
           (op_reopen, 2))

    def run(self, nops):
        fns = [f for f, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for n in range(1, nops + 1):
            fn = self.rng.choices(fns, weights)[0]
            self.counts[fn.__name__[3:]] += 1
            fn(self, n)
        self.op_reopen(nops + 1)
        os.close(self.fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000, help="operations")
    ap.add_argument("-s", type=int, default=None, help="seed")
    ap.add_argument("-l", type=int, default=4 << 20, help="largest offset")
    ap.add_argument("-w", type=int, default=256 << 10, help="largest op")
    ap.add_argument("file")
    a = ap.parse_args()
    seed = a.s if a.s is not None else int.from_bytes(os.urandom(4), "little")
    print("fsx: seed %d, %d operations on %s (rerun: fsx.py -n %d -s %d -l %d "
          "-w %d FILE)" % (seed, a.n, a.file, a.n, seed, a.l, a.w), flush=True)
    t = Fsx(a.file, seed, a.l, a.w)
    start = time.monotonic()
    try:
        t.run(a.n)
    except (Failure, OSError) as e:
        print("fsx: FAILED with seed %d: %s" % (seed, e))
        print("fsx: last operations:\n  " + "\n  ".join(t.log))
        return 1
    print("fsx: %d operations passed in %.1f s: %s" %
          (a.n, time.monotonic() - start,
           ", ".join("%s %d" % kv for kv in sorted(t.counts.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
