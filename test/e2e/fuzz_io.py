#!/usr/bin/env python3
"""fuzz_io.py - a randomized fuzzer of the data path, for t_fuzz.sh.

  fuzz_io.py [-s SEED] [-r ROUND] [-w WORKERS] [-n OPS] [--span BYTES]
             [--slots N] [--max-off BYTES] [--deadline SECONDS]
             [--ckpt FILE] [--trace-dir DIR] DIR

--span: where most small-file offsets fall (all stay below 64 MiB);
--max-off: keep every offset and size below it; --trace-dir: each worker
logs every operation to TRACE/wN.trace before it runs it (a hang names
the operation it is stuck in).

One round: WORKERS processes at once, each on its own files in DIR/wN
(three "small" files whose every byte is modeled, and one "huge" sparse
file written at extreme offsets whose written ranges are modeled) and on
DIR/shared, in which each worker owns every WORKERS-th slot of an odd size.
Each worker runs OPS random operations (pwrite, O_APPEND, O_DIRECT with
aligned and misaligned buffers, O_TRUNC, ftruncate, fallocate in every mode,
copy_file_range, shared mmap + msync, SEEK_DATA/SEEK_HOLE, reads, fsync)
with odd offsets and lengths, from 0 up to 2^63-1.  Every result must be a
success or an errno from the allowed set of its operation (ALLOWED below);
contents read back must match the model.  Then every worker fsyncs, the
parent punches a hole in CKPT (striped over every group: a punch returns
only once each iod holding it has checkpointed its journal, so whatever
the round journaled has been written home, where a bad offset fails), and
each worker reads every file back and compares it with its model.  Last,
the huge files are cut to 64 MiB: twinfsctl verify skips holes, but
still makes one call per 4 GiB of a subfile's span, and a round's verify
should take seconds.

A worker stops at its first failure and prints it with its last
operations; a worker that does not finish within DEADLINE seconds is a
hang.  Prints "PASS fuzz-rR-wN" or "FAIL fuzz-rR-wN: ..." per worker (and
for the checkpoint), so the same seed and round rerun the same operations
(their results may differ only where workers race on timing).

Allowed errnos (anything else, EIO and ENOTCONN above all, is a failure);
"the limit" is the largest file size, the kernel's 2^63-1 or, lower, what
the iods' file systems allow for a subfile (ext4: 16 TiB), and nothing
below 1 TiB may be refused:
  write/pwrite    EFBIG   at or beyond the limit
                  EINVAL  offset + length past 2^63-1 (the kernel's own
                          check), or a negative offset (asked on purpose)
                  ENOSPC  the iods' disks may fill (a clean refusal)
  fsync           EFBIG   of the huge file only: write-behind answers a
                          buffered write early and reports its refusal at
                          the next fsync (its range is then unknown)
  ftruncate       EFBIG   beyond the limit;  EINVAL  a negative size
  fallocate       EFBIG   off + len beyond the limit (the kernel checks
                          against 2^63-1 first)
                  EINVAL  len <= 0 or off < 0 (asked on purpose), or
                          COLLAPSE/INSERT misaligned or reaching past EOF
                  EOPNOTSUPP  a mode TwinFS does not implement (COLLAPSE,
                          INSERT, UNSHARE; PUNCH without KEEP_SIZE, which
                          the kernel refuses); never for 0, KEEP_SIZE or
                          PUNCH|KEEP_SIZE
                  ENOSPC  as write
  copy_file_range EFBIG   destination beyond the limit
                  EINVAL  overlapping ranges of one file
                  EINVAL/EOVERFLOW  a negative source offset (the kernel
                          answers EOVERFLOW)
                  ENOSPC  as write
  lseek           ENXIO   SEEK_DATA/SEEK_HOLE at or beyond EOF, SEEK_DATA
                          with no data after the offset (or negative)
                  EINVAL  a negative resulting offset; EOVERFLOW  one past
                          2^63-1 (SEEK_END/SEEK_CUR + 2^63-1)
  pread           EINVAL  offset + length past 2^63-1, or negative
  O_DIRECT write  EINVAL  a misaligned buffer, offset or length only (a
                          block file system refuses them; FUSE's kernel
                          path takes them)
                  EFBIG   one that crosses the limit fails whole (the
                          kernel's direct I/O cannot take a short write)
  mmap/msync      none (only ranges inside the file are mapped)
A write or copy may be short only where it crosses the limit (the kernel
cuts one that crosses 2^63-1), and then only what it reports counts.
"""
import argparse
import collections
import ctypes
import errno
import mmap
import os
import random
import select
import signal
import sys
import time
import traceback

KEEP_SIZE, PUNCH_HOLE, COLLAPSE, ZERO_RANGE, INSERT, UNSHARE = \
    0x01, 0x02, 0x08, 0x10, 0x20, 0x40
MAXOFF = (1 << 63) - 1
MIB = 1 << 20
CHUNK = 64 << 10
SANE = 64 * MIB           # small files stay below this
HUGE_KEEP = 64 * MIB      # the huge file is cut to this after a round
SLOT = 77777              # shared-file slot: odd, spans pages and units
PAGE = mmap.PAGESIZE

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64]

# op kind -> errnos that are a clean answer (see the docstring for why)
ALLOWED = {
    "write": {errno.EFBIG, errno.ENOSPC, errno.EINVAL},
    "ftruncate": {errno.EFBIG},
    "fallocate": {errno.EFBIG, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSPC},
    "copy": {errno.EFBIG, errno.EINVAL, errno.EOVERFLOW, errno.ENOSPC},
    "seek": {errno.ENXIO},
    "read": {errno.EINVAL},
    "fsync": set(),
    "mmap": set(),
    "open": set(),
}


def say(line):
    """One line to stdout in one write(2): workers share the descriptor,
    and t_fuzz.sh counts the PASS and FAIL lines."""
    os.write(1, (line + "\n").encode())


class Failure(Exception):
    pass


class Unexpected(Failure):
    def __init__(self, what, e):
        super().__init__("%s: %s" % (what, errno.errorcode.get(e, e)))
        self.err = e


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def mode_name(mode):
    names = [n for b, n in ((KEEP_SIZE, "KEEP_SIZE"), (PUNCH_HOLE, "PUNCH"),
                            (COLLAPSE, "COLLAPSE"), (ZERO_RANGE, "ZERO"),
                            (INSERT, "INSERT"), (UNSHARE, "UNSHARE"))
             if mode & b]
    return "|".join(names) or "0"


class Model:
    """A file's expected contents: 64 KiB chunks (absent = zeros), its size
    (None: unknown) and the ranges whose contents are unknown (a write
    refused after write-behind answered it, or cut short)."""

    def __init__(self):
        self.chunks = {}
        self.size = 0
        self.unknown = []     # (off, end)
        self.lost = False     # an op we cannot model succeeded

    def write(self, off, data):
        if not data:
            return
        pos, mv = off, memoryview(data)
        while mv:
            ci, co = divmod(pos, CHUNK)
            n = min(len(mv), CHUNK - co)
            c = self.chunks.get(ci)
            if c is None:
                c = self.chunks[ci] = bytearray(CHUNK)
            c[co:co + n] = mv[:n]
            mv = mv[n:]
            pos += n
        if self.size is not None:
            self.size = max(self.size, off + len(data))

    def zero(self, off, length):
        end = off + length
        for ci in [k for k in self.chunks
                   if k * CHUNK < end and (k + 1) * CHUNK > off]:
            lo, hi = max(off, ci * CHUNK), min(end, (ci + 1) * CHUNK)
            self.chunks[ci][lo - ci * CHUNK:hi - ci * CHUNK] = \
                bytes(hi - lo)

    def truncate(self, n):
        if self.size is not None and n < self.size:
            self.zero(n, self.size - n)
        elif self.size is None:
            self.zero(n, MAXOFF - n)
        self.size = n
        self.unknown = [(a, min(b, n)) for a, b in self.unknown if a < n]

    def read(self, off, length):
        out = bytearray(length)
        for ci in [k for k in self.chunks
                   if k * CHUNK < off + length and (k + 1) * CHUNK > off]:
            lo, hi = max(off, ci * CHUNK), min(off + length, (ci + 1) * CHUNK)
            out[lo - off:hi - off] = \
                self.chunks[ci][lo - ci * CHUNK:hi - ci * CHUNK]
        return bytes(out)

    def mark_unknown(self, off, end):
        if off < end:
            self.unknown.append((off, end))

    def is_known(self, off, end):
        return not self.lost and all(b <= off or a >= end
                                     for a, b in self.unknown)

    def nonzero_in(self, off, end):
        """Some known byte in [off, end) is not zero."""
        for k in self.chunks:
            lo, hi = max(off, k * CHUNK), min(end, (k + 1) * CHUNK)
            if lo < hi and any(self.chunks[k][lo - k * CHUNK:hi - k * CHUNK]):
                return True
        return False

    def materialize(self):
        return bytearray(self.read(0, self.size))

    def load(self, data):
        self.chunks = {}
        self.size = 0
        self.write(0, bytes(data))
        self.size = len(data)


class Worker:
    def __init__(self, args, w):
        self.args = args
        self.w = w
        self.tag = "fuzz-r%d-w%d" % (args.round, w)
        self.rng = random.Random("%d-%d-%d" % (args.seed, args.round, w))
        self.dir = os.path.join(args.dir, "w%d" % w)
        self.log = collections.deque(maxlen=12)
        self.n = 0
        self.stats = collections.Counter()
        self.trace = open(os.path.join(args.trace_dir, "w%d.trace" % w), "w",
                          buffering=1) if args.trace_dir else None
        os.makedirs(self.dir, exist_ok=True)
        self.small = []
        for i in range(3):
            p = os.path.join(self.dir, "s%d" % i)
            self.small.append((p, os.open(p, os.O_RDWR | os.O_CREAT |
                                          os.O_TRUNC, 0o644), Model()))
        p = os.path.join(self.dir, "h")
        self.huge = (p, os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC,
                                0o644), Model())
        p = os.path.join(args.dir, "shared")
        self.shared = (p, os.open(p, os.O_RDWR), None)
        self.slots = [i for i in range(args.slots)
                      if i % args.workers == w]
        self.slot_data = {}       # slot -> bytearray(SLOT)
        # one aligned buffer for O_DIRECT (mmap memory is page-aligned)
        self.abuf = mmap.mmap(-1, 2 * MIB + 2 * PAGE)
        self.huge_dirty = []      # huge-file writes since its last fsync

    # ------------------------------------------------------------ plumbing

    def note(self, what):
        self.n += 1
        line = "op %d: %s" % (self.n, what)
        self.log.append(line)
        if self.trace:
            self.trace.write(line + "\n")

    def fail(self, why):
        raise Failure(why)

    def call(self, kind, fn, *a, extra=()):
        """Run fn; return its result, or the errno if allowed (negative)."""
        try:
            r = fn(*a)
            self.stats["%s:ok" % kind] += 1
            return 0 if r is None else r
        except OSError as e:
            if e.errno in ALLOWED[kind] or e.errno in extra:
                self.stats["%s:%s" % (kind, errno.errorcode.get(e.errno))] += 1
                return -e.errno
            raise Unexpected(kind, e.errno)

    def data(self, n):
        return self.rng.randbytes(n)

    def length(self):
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice((0, 1, 2, 511, 4095, 4096, 4097, 65535,
                                    65536, 65537, 131071, 524289, MIB,
                                    MIB + 1))
        return self.rng.randrange(0, MIB + 2)

    def sane_off(self):
        r = self.rng.random()
        span = self.args.span
        if r < 0.5:
            return self.rng.randrange(0, span)
        if r < 0.8:
            unit = self.rng.choice((4096, 65536, 524288, MIB))
            return max(0, self.rng.randrange(0, span // unit + 2) * unit +
                       self.rng.randrange(-3, 4))
        return self.rng.randrange(0, SANE - 2 * MIB)

    def huge_off(self):
        base = self.rng.choice((1 << 31, 1 << 32, 1 << 40, 1 << 44,
                                1 << 45, 1 << 46, 1 << 62, MAXOFF + 1,
                                MAXOFF + 1, None))
        if base is None:
            return self.cap(self.rng.randrange(0, MAXOFF))
        delta = self.rng.choice((0, 1, 4096, 65536, 65537, MIB, MIB + 1,
                                 2 * MIB + 3, self.rng.randrange(0, 4 * MIB)))
        off = base - delta if self.rng.random() < 0.7 else base + delta
        return self.cap(min(max(off, 0), MAXOFF))

    def cap(self, x):
        """--max-off: keep offsets and sizes below a bound (to fuzz the
        rest while a known bug at the extremes is open)."""
        if x <= self.args.max_off:
            return x
        return self.rng.randrange(max(self.args.max_off - 4 * MIB, 0),
                                  self.args.max_off)

    def check_size(self, fd, m, what):
        st = os.fstat(fd).st_size
        if m.size is not None and not m.lost and st != m.size:
            self.fail("%s: size %d, model %d" % (what, st, m.size))
        return st

    def check_read(self, fd, m, off, length, what, direct=False):
        """Read [off, off+length) and compare with m where it is known."""
        # The kernel refuses (EINVAL) any read whose end passes 2^63-1.
        length = max(0, min(length, MAXOFF - off))
        if direct:
            got = b""
            while len(got) < length:
                want = min(length - len(got), MIB)
                n = os.preadv(fd, [memoryview(self.abuf)[:want]],
                              off + len(got))
                got += self.abuf[:n]
                if n < want:
                    break
        else:
            got = b""
            while len(got) < length:
                b = os.pread(fd, min(length - len(got), 4 * MIB),
                             off + len(got))
                if not b:
                    break
                got += b
        if m is None or m.lost:
            return got
        if m.size is not None:
            want_len = max(0, min(length, m.size - off))
            if len(got) != want_len:
                self.fail("%s: read %d+%d returned %d bytes, model %d" %
                          (what, off, length, len(got), want_len))
        want = m.read(off, len(got))
        if got != want:
            for i in range(len(got)):
                if got[i] != want[i] and m.is_known(off + i, off + i + 1):
                    self.fail("%s: byte %d is %#x, model has %#x" %
                              (what, off + i, got[i], want[i]))
        return got

    # ---------------------------------------------------------- small files

    def pick_small(self):
        return self.rng.choice(self.small)

    def op_pwrite(self):
        p, fd, m = self.pick_small()
        off, data = self.sane_off(), self.data(self.length())
        self.note("pwrite %s %d+%d" % (p, off, len(data)))
        n = self.call("write", os.pwrite, fd, data, off)
        if n < 0:
            self.fail("pwrite %d+%d at a sane offset: %s" %
                      (off, len(data), errno.errorcode[-n]))
        if n != len(data):
            self.fail("short pwrite %d of %d" % (n, len(data)))
        m.write(off, data)

    def op_append(self):
        i = self.rng.randrange(3)
        p, fd, m = self.small[i]
        if m.size + MIB + 2 > SANE:
            return
        data = self.data(self.length())
        self.note("O_APPEND write %s +%d" % (p, len(data)))
        afd = self.call("open", os.open, p, os.O_WRONLY | os.O_APPEND)
        try:
            n = self.call("write", os.write, afd, data)
            if n != len(data):
                self.fail("O_APPEND write returned %d of %d" % (n, len(data)))
            pos = os.lseek(afd, 0, os.SEEK_CUR)
        finally:
            os.close(afd)
        m.write(m.size, data)
        # (a write of nothing moves no position: the kernel returns first)
        if data and pos != m.size:
            self.fail("O_APPEND: position %d after the write, size %d" %
                      (pos, m.size))

    def op_direct(self):
        p, fd, m = self.pick_small()
        aligned = self.rng.random() < 0.5
        if aligned:
            off = self.rng.randrange(0, self.args.span // 4096 + 1) * 4096
            length = self.rng.choice((4096, 8192, 65536, 131072, MIB))
            boff = 0
        else:
            off, length = self.sane_off(), self.length()
            boff = self.rng.choice((1, 7, 511, 4095))
        data = self.data(length)
        self.abuf[boff:boff + length] = data
        self.note("O_DIRECT pwrite %s %d+%d buffer+%d" %
                  (p, off, length, boff))
        dfd = self.call("open", os.open, p, os.O_RDWR | os.O_DIRECT)
        try:
            n = self.call("write", os.pwrite, dfd,
                          memoryview(self.abuf)[boff:boff + length], off)
            if n == -errno.EINVAL and not aligned:
                return      # a file system may want alignment (not TwinFS)
            if n != length:
                self.fail("O_DIRECT pwrite returned %s of %d" % (n, length))
            m.write(off, data)
            if self.rng.random() < 0.5:
                self.note("O_DIRECT pread %s %d+%d" % (p, off, length))
                self.check_read(dfd, m, off, length, "O_DIRECT read back",
                                direct=True)
        finally:
            os.close(dfd)

    def op_otrunc(self):
        i = self.rng.randrange(3)
        p, fd, m = self.small[i]
        self.note("open O_TRUNC %s" % p)
        tfd = self.call("open", os.open, p, os.O_WRONLY | os.O_TRUNC)
        m.truncate(0)
        try:
            if self.rng.random() < 0.5:
                data = self.data(self.length())
                self.note("write after O_TRUNC %s +%d" % (p, len(data)))
                if self.call("write", os.write, tfd, data) != len(data):
                    self.fail("short write after O_TRUNC")
                m.write(0, data)
        finally:
            os.close(tfd)
        self.check_size(fd, m, "after O_TRUNC")

    def op_ftruncate(self):
        p, fd, m = self.pick_small()
        n = self.rng.choice((0, 1, 4095, 4097, 65537, m.size, m.size + 1,
                             max(m.size - 1, 0), self.sane_off()))
        self.note("ftruncate %s %d" % (p, n))
        if self.call("ftruncate", os.ftruncate, fd, n) < 0:
            self.fail("ftruncate to a sane size refused")
        m.truncate(n)
        self.check_size(fd, m, "after ftruncate")

    def apply_fallocate(self, m, mode, off, length, r):
        """Model a fallocate that returned r (0 or -errno)."""
        if r < 0:
            return
        end = off + length
        if mode & (COLLAPSE | INSERT):
            if m.size is None or m.size > SANE + 4 * MIB:
                m.lost = True
                return
            b = m.materialize()
            if mode & COLLAPSE:
                del b[off:end]
            else:
                b[off:off] = bytes(length)
            m.load(b)
            return
        if mode & (PUNCH_HOLE | ZERO_RANGE):
            m.zero(off, length)
        if not mode & KEEP_SIZE and m.size is not None:
            m.size = max(m.size, end)

    def fa_mode(self):
        return self.rng.choice((0, KEEP_SIZE, PUNCH_HOLE | KEEP_SIZE,
                                PUNCH_HOLE, ZERO_RANGE, ZERO_RANGE | KEEP_SIZE,
                                COLLAPSE, INSERT, UNSHARE, UNSHARE | KEEP_SIZE,
                                -1))

    def op_fallocate(self):
        p, fd, m = self.pick_small()
        mode = self.fa_mode()
        off = self.sane_off()
        length = self.rng.choice((1, 4095, 4096, 65536, 65537, MIB,
                                  self.rng.randrange(1, 2 * MIB)))
        if mode == -1:       # the libc call, mode 0
            self.note("posix_fallocate %s %d+%d" % (p, off, length))
            r = self.call("fallocate", os.posix_fallocate, fd, off, length)
            mode = 0
        else:
            self.note("fallocate %s %s %d+%d" % (p, mode_name(mode), off,
                                                 length))
            r = self.call("fallocate", fallocate, fd, mode, off, length)
        e = -r if r else 0
        if e == errno.EFBIG:
            self.fail("fallocate at a sane range: %s" % errno.errorcode[e])
        if e == errno.EINVAL and not mode & (COLLAPSE | INSERT):
            self.fail("fallocate %s at a sane range: EINVAL" % mode_name(mode))
        if e == errno.EOPNOTSUPP and mode in (0, KEEP_SIZE,
                                              PUNCH_HOLE | KEEP_SIZE):
            self.fail("fallocate %s: EOPNOTSUPP" % mode_name(mode))
        self.apply_fallocate(m, mode, off, length, r)
        self.check_size(fd, m, "after fallocate")

    def op_copy(self):
        (ps, fs, ms), (pd, fdd, md) = self.pick_small(), self.pick_small()
        length = self.rng.choice((0, 1, 4097, 65537, MIB,
                                  self.rng.randrange(0, 2 * MIB)))
        so = self.rng.choice((0, self.sane_off(), max(ms.size - 3, 0),
                              ms.size + 5))
        do = self.sane_off()
        same = ps == pd
        self.note("copy_file_range %s %d -> %s %d len %d" %
                  (ps, so, pd, do, length))
        r = self.call("copy", os.copy_file_range, fs, fdd, length, so, do)
        if r < 0:
            if -r == errno.EINVAL and same and \
                    so < do + length and do < so + length:
                return       # overlapping ranges of one file
            self.fail("copy_file_range at sane offsets: %s" %
                      errno.errorcode[-r])
        want = min(length, max(ms.size - so, 0))
        if r > want or (r == 0 and want > 0):
            self.fail("copy_file_range copied %d, source has %d" % (r, want))
        data = ms.read(so, r)
        md.write(do, data)
        self.check_read(fdd, md, do, r, "copy_file_range read back")

    def op_mmap(self, p=None, fd=None, m=None, lo=None, hi=None):
        if p is None:
            p, fd, m = self.pick_small()
            if m.size < 2:
                return
            lo = self.rng.randrange(0, m.size - 1)
            hi = self.rng.randrange(lo + 1, min(m.size, lo + MIB) + 1)
        start = lo - lo % PAGE
        data = self.data(hi - lo)
        self.note("mmap write %s %d+%d, msync" % (p, lo, hi - lo))
        mm = mmap.mmap(fd, hi - start, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
        try:
            mm[lo - start:hi - start] = data
            self.call("mmap", mm.flush)
        finally:
            mm.close()
        if m is not None:
            m.write(lo, data)
        return data

    def op_read(self):
        p, fd, m = self.pick_small()
        off = self.rng.choice((self.sane_off(), m.size, max(m.size - 1, 0),
                               m.size + 1, self.huge_off()))
        length = self.length()
        self.note("pread %s %d+%d" % (p, off, length))
        self.check_read(fd, m, off, length, "pread")

    def check_seek(self, fd, m, off, whence, what):
        name = "SEEK_DATA" if whence == os.SEEK_DATA else "SEEK_HOLE"
        self.note("lseek %s %s %d" % (what, name, off))
        r = self.call("seek", os.lseek, fd, off, whence)
        size = m.size
        if m.lost or size is None:
            return
        if r < 0:
            if not m.is_known(min(off, size), size):
                return
            if off < size and whence == os.SEEK_HOLE:
                self.fail("%s at %d < size %d: ENXIO" % (name, off, size))
            if off < size and m.nonzero_in(off, size):
                self.fail("%s at %d: ENXIO, model has data before %d" %
                          (name, off, size))
            return
        if off >= size:
            self.fail("%s at %d >= size %d returned %d" % (name, off, size, r))
        if r < off or r > size:
            self.fail("%s at %d returned %d (size %d)" % (name, off, r, size))
        if whence == os.SEEK_DATA:
            if r == size or m.nonzero_in(off, r):
                self.fail("SEEK_DATA at %d skipped data before %d" % (off, r))
        elif r < size and m.nonzero_in(r, r + 1) and m.is_known(r, r + 1):
            self.fail("SEEK_HOLE at %d: hole at %d holds data" % (off, r))

    def op_seek(self):
        p, fd, m = self.pick_small()
        off = self.rng.choice((0, self.sane_off(), m.size, m.size + 1,
                               max(m.size - 1, 0), self.huge_off()))
        self.check_seek(fd, m, off, self.rng.choice((os.SEEK_DATA,
                                                     os.SEEK_HOLE)), p)

    def op_fsync(self):
        p, fd, m = self.pick_small()
        self.note("fsync %s" % p)
        self.call("fsync", self.rng.choice((os.fsync, os.fdatasync)), fd)

    def op_bad(self):
        """Requests that must fail with exactly this errno and change
        nothing."""
        p, fd, m = self.pick_small()
        cases = (
            ("pwrite at -1", errno.EINVAL,
             lambda: os.pwrite(fd, b"x", -1)),
            ("pwrite 2 bytes at 2^63-1", errno.EINVAL,
             lambda: os.pwrite(fd, b"xy", MAXOFF)),
            ("pread at -4096", errno.EINVAL,
             lambda: os.pread(fd, 10, -4096)),
            ("ftruncate -1", errno.EINVAL, lambda: os.ftruncate(fd, -1)),
            ("ftruncate -2^63", errno.EINVAL,
             lambda: os.ftruncate(fd, -(1 << 63))),
            ("fallocate len 0", errno.EINVAL,
             lambda: fallocate(fd, 0, 0, 0)),
            ("fallocate off -1", errno.EINVAL,
             lambda: fallocate(fd, KEEP_SIZE, -1, 4096)),
            ("fallocate len -4096", errno.EINVAL,
             lambda: fallocate(fd, 0, 4096, -4096)),
            ("fallocate 2^63-1 + 2", errno.EFBIG,
             lambda: fallocate(fd, 0, MAXOFF, 2)),
            ("punch 2^63-4096 + 2^62", errno.EFBIG,
             lambda: fallocate(fd, PUNCH_HOLE | KEEP_SIZE, MAXOFF - 4095,
                               1 << 62)),
            ("lseek SEEK_SET -1", errno.EINVAL,
             lambda: os.lseek(fd, -1, os.SEEK_SET)),
            ("lseek SEEK_DATA -1", (errno.EINVAL, errno.ENXIO),
             lambda: os.lseek(fd, -1, os.SEEK_DATA)),
            ("copy_file_range from offset -1", (errno.EINVAL, errno.EOVERFLOW),
             lambda: os.copy_file_range(fd, self.small[0][1], 4096, -1,
                                        0)),
        )
        what, want, fn = self.rng.choice(cases)
        want = want if isinstance(want, tuple) else (want,)
        wants = "/".join(errno.errorcode[e] for e in want)
        self.note("%s on %s (want %s)" % (what, p, wants))
        try:
            fn()
            got = None
        except OSError as e:
            got = e.errno
        if got not in want:
            self.fail("%s: got %s, want %s" %
                      (what, errno.errorcode.get(got, "success"), wants))
        self.stats["bad:%s" % errno.errorcode.get(got)] += 1
        self.check_size(fd, m, "after a refused %s" % what)

    # ------------------------------------------------------------ huge file

    def huge_sync(self, why):
        """fsync the huge file: an EFBIG here refuses the writes since the
        last fsync (write-behind answered them early)."""
        p, fd, m = self.huge
        self.note("fsync %s (%s)" % (p, why))
        r = self.call("fsync", os.fsync, fd, extra=(errno.EFBIG,))
        if r < 0:
            for off, end in self.huge_dirty:
                m.mark_unknown(off, end)
            m.size = None
        self.huge_dirty = []

    def op_huge_write(self):
        p, fd, m = self.huge
        off = self.huge_off()
        if self.rng.random() < 0.5:
            off = max(0, off - self.rng.choice((65537 + 65536, 1, 4096, 0)))
        data = self.data(self.rng.choice((1, 4095, 4097, 65537, MIB,
                                          self.length())))
        direct = self.rng.random() < 0.2
        self.note("%s %s %d+%d" % ("O_DIRECT pwrite" if direct else "pwrite",
                                   p, off, len(data)))
        if direct:
            # from the page-aligned buffer: misaligned only where off or
            # the length is
            self.abuf[:len(data)] = data
            wfd = self.call("open", os.open, p, os.O_RDWR | os.O_DIRECT)
            try:
                n = self.call("write", os.pwrite, wfd,
                              memoryview(self.abuf)[:len(data)], off)
            finally:
                os.close(wfd)
            if n == -errno.EINVAL and (off | len(data)) % 4096:
                return      # a file system may want alignment (not TwinFS)
        else:
            n = self.call("write", os.pwrite, fd, data, off)
        if n == -errno.EINVAL and off + len(data) <= MAXOFF:
            self.fail("pwrite %d+%d: EINVAL" % (off, len(data)))
        if n < 0:
            if len(data) and off + len(data) <= 1 << 40:
                self.fail("pwrite %d+%d: %s" % (off, len(data),
                                                errno.errorcode[-n]))
            if -n == errno.EFBIG:
                # a refusal changes nothing, unless write-behind had
                # answered earlier writes whose refusal comes later
                self.check_size(fd, m, "after a refused pwrite")
            return
        if n < len(data) and off + len(data) <= MAXOFF and \
                off + len(data) <= 1 << 40:
            self.fail("short pwrite %d of %d at %d" % (n, len(data), off))
        m.write(off, data[:n])
        m.mark_unknown(off + n, off + len(data))
        self.huge_dirty.append((off, off + len(data)))
        if self.rng.random() < 0.7:
            self.huge_sync("after a huge write")
        if n:
            self.check_read(fd, m, off, n, "huge pwrite read back")

    def op_huge_append(self):
        p, fd, m = self.huge
        if m.size is None:
            return
        data = self.data(self.rng.choice((1, 4097, 65537)))
        self.note("O_APPEND write %s at %d +%d" % (p, m.size, len(data)))
        afd = self.call("open", os.open, p, os.O_WRONLY | os.O_APPEND)
        try:
            n = self.call("write", os.write, afd, data)
        finally:
            os.close(afd)
        if n < 0:
            if m.size + len(data) <= 1 << 40 or n == -errno.EINVAL and \
                    m.size + len(data) <= MAXOFF:
                self.fail("O_APPEND at %d: %s" % (m.size,
                                                  errno.errorcode[-n]))
            return
        end = m.size
        m.write(end, data[:n])
        m.mark_unknown(end + n, end + len(data))

    def op_huge_truncate(self):
        p, fd, m = self.huge
        n = self.rng.choice((MAXOFF, MAXOFF - 1, MAXOFF - 65536,
                             self.huge_off(), self.huge_off(),
                             self.sane_off(), 1 << 44, (1 << 44) + 1))
        n = self.cap(n)
        self.note("ftruncate %s %d" % (p, n))
        r = self.call("ftruncate", os.ftruncate, fd, n)
        if r < 0:
            if n <= 1 << 40:
                self.fail("ftruncate %d: EFBIG" % n)
            self.check_size(fd, m, "after a refused ftruncate")
            return
        m.truncate(n)
        self.check_size(fd, m, "after ftruncate")

    def op_huge_fallocate(self):
        p, fd, m = self.huge
        mode = self.fa_mode()
        if mode == -1:
            mode = 0
        off = self.huge_off()
        if mode & PUNCH_HOLE or mode in (COLLAPSE, INSERT):
            # these allocate nothing: any length
            length = self.rng.choice((1, 4096, 65537, 1 << 40, 1 << 62,
                                      MAXOFF - off if off < MAXOFF else 1,
                                      self.rng.randrange(1, 1 << 62)))
        else:
            # allocating modes stay small: the iods' disks are real
            length = self.rng.choice((1, 4095, 65536, 65537, MIB))
        length = max(1, self.cap(off + length) - off)
        self.note("fallocate %s %s %d+%d" % (p, mode_name(mode), off, length))
        r = self.call("fallocate", fallocate, fd, mode, off, length)
        e = -r if r else 0
        if e == errno.EINVAL and not mode & (COLLAPSE | INSERT) and \
                off + length <= MAXOFF:
            self.fail("fallocate %s %d+%d: EINVAL" % (mode_name(mode), off,
                                                      length))
        if e == errno.EFBIG and off + length <= 1 << 40:
            self.fail("fallocate %d+%d: EFBIG" % (off, length))
        self.apply_fallocate(m, mode, off, length, r)
        if m.size is not None and not m.lost:
            self.check_size(fd, m, "after fallocate")

    def op_huge_copy(self):
        p, fd, m = self.huge
        length = self.rng.choice((1, 4097, 65537, MIB))
        if self.rng.random() < 0.6:
            sp, sfd, sm = self.pick_small()
            so, do = self.rng.choice((0, self.sane_off())), self.huge_off()
            self.note("copy_file_range %s %d -> %s %d len %d" %
                      (sp, so, p, do, length))
            r = self.call("copy", os.copy_file_range, sfd, fd, length, so, do)
            if r < 0:
                if do + length <= 1 << 40:
                    self.fail("copy_file_range to %d: %s" %
                              (do, errno.errorcode[-r]))
                return
            want = min(length, max(sm.size - so, 0))
            if r > want or (r == 0 and want > 0 and do < MAXOFF):
                self.fail("copy_file_range copied %d, source has %d" %
                          (r, want))
            m.write(do, sm.read(so, r))
            self.huge_dirty.append((do, do + r))
            self.huge_sync("after copy_file_range")
            if r:
                self.check_read(fd, m, do, r, "copy_file_range read back")
        else:
            # from the huge file, where its model knows the source
            dp, dfd, dm = self.pick_small()
            if m.size is None or m.size == 0:
                return
            so = self.rng.choice((self.rng.randrange(0, m.size),
                                  max(m.size - 100, 0)))
            if not m.is_known(so, so + length):
                return
            do = self.sane_off()
            self.note("copy_file_range %s %d -> %s %d len %d" %
                      (p, so, dp, do, length))
            r = self.call("copy", os.copy_file_range, fd, dfd, length, so, do)
            if r < 0:
                self.fail("copy_file_range to a sane offset: %s" %
                          errno.errorcode[-r])
            want = min(length, m.size - so)
            if r > want or (r == 0 and want > 0):
                self.fail("copy_file_range copied %d, source has %d" %
                          (r, want))
            dm.write(do, m.read(so, r))
            self.check_read(dfd, dm, do, r, "copy_file_range read back")

    def op_huge_mmap(self):
        p, fd, m = self.huge
        if m.size is None or m.size < PAGE * 2 or m.lost:
            return
        lo = self.rng.choice((m.size - self.rng.randrange(1, PAGE * 2),
                              self.rng.randrange(0, m.size - 1)))
        hi = min(m.size, lo + self.rng.randrange(1, 3 * PAGE))
        data = self.op_mmap(p, fd, m, lo, hi)
        self.huge_dirty.append((lo, hi))
        self.huge_sync("after mmap")
        if data is not None:
            self.check_read(fd, m, lo, hi - lo, "mmap read back")

    def op_huge_read(self):
        p, fd, m = self.huge
        off = self.huge_off()
        if m.chunks and self.rng.random() < 0.5:
            off = self.rng.choice(list(m.chunks)) * CHUNK + \
                self.rng.randrange(-4, CHUNK)
            off = max(0, off)
        length = self.rng.choice((1, 4097, 65537, 200000))
        self.note("pread %s %d+%d" % (p, off, length))
        self.check_read(fd, m, off, length, "huge pread")

    def op_huge_seek(self):
        p, fd, m = self.huge
        off = self.huge_off()
        if m.chunks and self.rng.random() < 0.5:
            off = max(0, self.rng.choice(list(m.chunks)) * CHUNK -
                      self.rng.choice((0, 1, CHUNK, 1 << 30)))
        self.check_seek(fd, m, off, self.rng.choice((os.SEEK_DATA,
                                                     os.SEEK_HOLE)), p)
        if self.rng.random() < 0.3:
            whence, delta = self.rng.choice(((os.SEEK_END, MAXOFF),
                                             (os.SEEK_END, -MAXOFF),
                                             (os.SEEK_CUR, MAXOFF),
                                             (os.SEEK_SET, MAXOFF)))
            self.note("lseek %s whence %d %d" % (p, whence, delta))
            try:
                os.lseek(fd, delta, whence)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EOVERFLOW):
                    raise Unexpected("lseek", e.errno)
            os.lseek(fd, 0, os.SEEK_SET)

    # ---------------------------------------------------------- shared file

    def op_shared(self):
        p, fd, _ = self.shared
        slot = self.rng.choice(self.slots)
        base = slot * SLOT
        d = self.slot_data.setdefault(slot, bytearray(SLOT))
        kind = self.rng.choice(("write", "write", "punch", "zero", "mmap",
                                "direct", "copy"))
        lo = self.rng.randrange(0, SLOT)
        hi = self.rng.randrange(lo, SLOT + 1)
        if kind in ("mmap", "direct"):
            # whole pages only: a page holds other workers' bytes too, and
            # the kernel writes a mapped page back whole
            plo = (base + PAGE - 1) // PAGE * PAGE
            phi = (base + SLOT) // PAGE * PAGE
            lo = plo + self.rng.randrange(0, (phi - plo) // PAGE) * PAGE
            hi = min(phi, lo + self.rng.randrange(1, 4) * PAGE)
            lo, hi = lo - base, hi - base
        if kind == "write":
            data = self.data(hi - lo)
            self.note("pwrite %s %d+%d" % (p, base + lo, hi - lo))
            if self.call("write", os.pwrite, fd, data, base + lo) != hi - lo:
                self.fail("short pwrite")
            d[lo:hi] = data
        elif kind in ("punch", "zero"):
            if hi == lo:
                return
            mode = (PUNCH_HOLE if kind == "punch" else ZERO_RANGE) | KEEP_SIZE
            self.note("fallocate %s %s %d+%d" % (p, mode_name(mode),
                                                 base + lo, hi - lo))
            if self.call("fallocate", fallocate, fd, mode, base + lo,
                         hi - lo) < 0:
                self.fail("fallocate inside the file refused")
            d[lo:hi] = bytes(hi - lo)
        elif kind == "mmap":
            d[lo:hi] = self.op_mmap(p, fd, None, base + lo, base + hi)
        elif kind == "direct":
            data = self.data(hi - lo)
            self.abuf[:hi - lo] = data
            self.note("O_DIRECT pwrite %s %d+%d" % (p, base + lo, hi - lo))
            dfd = self.call("open", os.open, p, os.O_RDWR | os.O_DIRECT)
            try:
                if self.call("write", os.pwrite, dfd,
                             memoryview(self.abuf)[:hi - lo],
                             base + lo) != hi - lo:
                    self.fail("short O_DIRECT pwrite")
            finally:
                os.close(dfd)
            d[lo:hi] = data
        else:
            sp, sfd, sm = self.pick_small()
            so = self.rng.randrange(0, max(sm.size, 1))
            self.note("copy_file_range %s %d -> %s %d len %d" %
                      (sp, so, p, base + lo, hi - lo))
            r = self.call("copy", os.copy_file_range, sfd, fd, hi - lo, so,
                          base + lo)
            if r < 0:
                self.fail("copy_file_range: %s" % errno.errorcode[-r])
            if r != min(hi - lo, max(sm.size - so, 0)):
                self.fail("copy_file_range copied %d of %d" % (r, hi - lo))
            d[lo:lo + r] = sm.read(so, r)

    # ------------------------------------------------------------- phases

    OPS = (("pwrite", 6), ("append", 2), ("direct", 3), ("otrunc", 1),
           ("ftruncate", 2), ("fallocate", 4), ("copy", 2), ("mmap", 2),
           ("read", 2), ("seek", 2), ("fsync", 1), ("bad", 2),
           ("huge_write", 6), ("huge_append", 1), ("huge_truncate", 2),
           ("huge_fallocate", 4), ("huge_copy", 2), ("huge_mmap", 1),
           ("huge_read", 2), ("huge_seek", 2), ("shared", 6))

    def run_ops(self):
        names = [n for n, w in self.OPS for _ in range(w)]
        for _ in range(self.args.ops):
            getattr(self, "op_" + self.rng.choice(names))()
        for p, fd, m in self.small:
            self.note("fsync %s" % p)
            self.call("fsync", os.fsync, fd)
        self.huge_sync("end of the ops")
        self.note("fsync %s" % self.shared[0])
        self.call("fsync", os.fsync, self.shared[1])

    def check_all(self):
        for p, fd, m in self.small:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            self.note("check %s (size %d)" % (p, m.size))
            size = self.check_size(fd, m, "check %s" % p)
            if size <= 16 * MIB:
                self.check_read(fd, m, 0, size + 1, "check %s" % p)
            else:
                offs = sorted(set([k * CHUNK for k in m.chunks] +
                                  [self.rng.randrange(0, size)
                                   for _ in range(8)] + [size - CHUNK]))
                for off in offs:
                    self.check_read(fd, m, off, CHUNK, "check %s" % p)
        p, fd, m = self.huge
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        self.note("check %s (size %s, %d chunks)" % (p, m.size,
                                                     len(m.chunks)))
        size = self.check_size(fd, m, "check %s" % p)
        for k in sorted(m.chunks):
            if k * CHUNK < size:
                self.check_read(fd, m, k * CHUNK, CHUNK, "check %s" % p)
        for _ in range(4):
            if size:
                off = self.rng.randrange(0, size)
                self.check_read(fd, m, off, 4096, "check %s hole" % p)
        p, fd, _ = self.shared
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        for slot, d in sorted(self.slot_data.items()):
            self.note("check %s slot %d" % (p, slot))
            got = os.pread(fd, SLOT, slot * SLOT)
            if got != d:
                bad = next((i for i in range(min(len(got), SLOT))
                            if got[i] != d[i]), len(got))
                self.fail("check %s: byte %d is %s, model has %#x" %
                          (p, slot * SLOT + bad,
                           "%#x" % got[bad] if bad < len(got) else "EOF",
                           d[bad]))
        # Keep the apparent size small for twinfsctl verify.
        p, fd, m = self.huge
        self.note("ftruncate %s %d (end of round)" % (p, HUGE_KEEP))
        if size > HUGE_KEEP:
            self.call("ftruncate", os.ftruncate, fd, HUGE_KEEP)
        self.call("fsync", os.fsync, fd)


def worker_main(args, w, done_w, go_r):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    wk = None
    ok = True

    def report(e):
        say("FAIL %s: seed %d round %d worker %d: %s%s" %
            (wk.tag if wk else "fuzz-r%d-w%d" % (args.round, w),
             args.seed, args.round, w, e,
             " [%s]" % wk.log[-1] if wk and wk.log else ""))
        if wk:
            for line in wk.log:
                say("#   w%d %s" % (w, line))

    try:
        wk = Worker(args, w)
        wk.run_ops()
    except (Failure, OSError) as e:
        report(e)
        ok = False
    except Exception as e:
        report("%s (a bug of fuzz_io.py)\n%s" % (e, traceback.format_exc()))
        ok = False
    os.write(done_w, b"d")
    os.read(go_r, 1)
    if ok:
        try:
            wk.check_all()
        except (Failure, OSError) as e:
            report(e)
            ok = False
        except Exception as e:
            report("%s (a bug of fuzz_io.py)\n%s" % (e,
                                                    traceback.format_exc()))
            ok = False
    if ok:
        say("PASS %s" % wk.tag)
        say("# w%d: %d ops, %s" % (w, wk.n, " ".join(
            "%s=%d" % kv for kv in sorted(wk.stats.items()))))
    os._exit(0 if ok else 1)


def checkpoint(args):
    """Punch a hole in every stripe unit of CKPT: each iod holding one
    checkpoints its journal before it answers (data=journal)."""
    fd = os.open(args.ckpt, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"c" * (4 * MIB), 0)
        os.fsync(fd)
        fallocate(fd, PUNCH_HOLE | KEEP_SIZE, 0, 4 * MIB)
        if any(os.pread(fd, 4 * MIB, 0)):
            raise Failure("punched range of %s reads back non-zero" %
                          args.ckpt)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-s", "--seed", type=int,
                    default=random.randrange(1 << 31))
    ap.add_argument("-r", "--round", type=int, default=1)
    ap.add_argument("-w", "--workers", type=int, default=3)
    ap.add_argument("-n", "--ops", type=int, default=60)
    ap.add_argument("--span", type=int, default=4 * MIB)
    ap.add_argument("--slots", type=int, default=48)
    ap.add_argument("--deadline", type=float, default=120)
    ap.add_argument("--max-off", type=int, default=MAXOFF)
    ap.add_argument("--ckpt")
    ap.add_argument("--trace-dir")
    ap.add_argument("dir")
    args = ap.parse_args()
    say("# fuzz_io seed %d round %d: %d workers x %d ops (span %d)" %
        (args.seed, args.round, args.workers, args.ops, args.span))
    os.makedirs(args.dir, exist_ok=True)
    p = os.path.join(args.dir, "shared")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, args.slots * SLOT)
    os.close(fd)

    done_r, done_w = os.pipe()
    kids = {}
    gos = []
    for w in range(args.workers):
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                worker_main(args, w, done_w, go_r)
            except BaseException:
                # a bug of this script: never run the parent's code
                traceback.print_exc()
            os._exit(2)
        kids[pid] = w
        gos.append(go_w)
    t_end = time.monotonic() + args.deadline
    failed = 0

    def hang(what):
        say("FAIL fuzz-r%d-hang: seed %d round %d: %s not done after "
            "%.0f s" % (args.round, args.seed, args.round, what,
                        args.deadline))
        for pid, w in kids.items():
            if args.trace_dir:
                try:
                    with open(os.path.join(args.trace_dir,
                                           "w%d.trace" % w)) as f:
                        last = f.read().splitlines()[-1:]
                    say("#   w%d last op: %s" % (w, " ".join(last)))
                except OSError:
                    pass
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(1)

    for _ in range(args.workers):
        rl, _, _ = select.select([done_r], [], [],
                                 max(0, t_end - time.monotonic()))
        if not rl:
            hang("the operations")
        os.read(done_r, 1)
    if args.ckpt:
        try:
            checkpoint(args)
            say("PASS fuzz-r%d-checkpoint" % args.round)
        except (Failure, OSError) as e:
            say("FAIL fuzz-r%d-checkpoint: seed %d round %d: punch in %s "
                "(a journal checkpoint of every iod): %s" %
                (args.round, args.seed, args.round, args.ckpt, e))
            failed += 1
    for g in gos:
        os.write(g, b"g")
    while kids:
        left = t_end - time.monotonic()
        pid, st = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if left <= 0:
                hang("the checks")
            time.sleep(0.05)
            continue
        kids.pop(pid)
        if st != 0:
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
