#!/usr/bin/env python3
"""fa_check.py MODE DIR MODELDIR MB - fallocate and SEEK_DATA/SEEK_HOLE on
the mount (DIR, striped 64 KiB x 2), checked against models kept in
MODELDIR (t_fallocate.sh).

  write   build files with writes, fallocate (default, KEEP_SIZE),
          punches and ZERO_RANGE; every result is compared byte for byte with an
          in-memory model, which is saved for `reread`.
  seek    a file whose data and holes are known block by block: every
          SEEK_DATA / SEEK_HOLE answer from a set of offsets must be the
          exact one (ext4 semantics: punched and never-written ranges are
          holes, written ones data, ENXIO at and past the end).
  away-init, away-ops
          a file of group 0 (DIR/g0), written with both twins up, then
          punched, extended and written while one twin is away.
  reread  every file with a saved model still matches it (after the iods
          were killed and restarted, after a resync).
Exit status 0 when everything matched; each mismatch is printed.
"""
import ctypes
import errno
import os
import random
import sys

KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE = 0x01, 0x02, 0x10
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64]
UNIT = 64 << 10
BLK = 4096
bad = 0


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "fallocate(mode=%d, %d, %d): %s" %
                      (mode, off, length, os.strerror(e)))


def complain(what):
    global bad
    bad += 1
    print("MISMATCH", what)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def compare(name, path, model):
    got = read_all(path)
    if got != bytes(model):
        first = next((i for i in range(min(len(got), len(model)))
                      if got[i] != model[i]), min(len(got), len(model)))
        complain("%s: size %d (want %d), first difference at %d" %
                 (name, len(got), len(model), first))
    st = os.stat(path)
    if st.st_size != len(model):
        complain("%s: stat size %d, want %d" % (name, st.st_size, len(model)))


def mode_write(d, mdir, mb):
    rng = random.Random(5)
    size = mb << 20
    # 1: default mode extends a file with zeros; writes land inside.
    p = os.path.join(d, "grow")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    model = bytearray()
    fallocate(fd, 0, 0, size)
    model += bytes(size)
    for _ in range(8):
        off = rng.randrange(0, size - 70000)
        data = rng.randbytes(rng.randrange(1, 70000))
        os.pwrite(fd, data, off)
        model[off:off + len(data)] = data
    # KEEP_SIZE past the end changes nothing visible.
    fallocate(fd, KEEP_SIZE, size - 1000, 3 * UNIT)
    # default mode in the middle keeps the data; past the end extends.
    fallocate(fd, 0, 1000, 5 * UNIT)
    fallocate(fd, 0, size - 10, 2 * UNIT + 77)
    model += bytes(2 * UNIT + 77 - 10)
    os.close(fd)
    compare("grow", p, model)
    with open(os.path.join(mdir, "grow"), "wb") as f:
        f.write(model)
    st = os.stat(p)
    if st.st_blocks * 512 < size:
        complain("grow: %d blocks allocated for %d bytes" % (st.st_blocks, size))

    # 2: punches, aligned and not, across units and columns, over data
    # written just before (journal-resident) and data synced long ago.
    p = os.path.join(d, "punch")
    data = bytearray(rng.randbytes(size))
    with open(p, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    fd = os.open(p, os.O_RDWR)
    ops = [(UNIT, UNIT), (3 * UNIT - 100, 2 * UNIT + 300), (5, 1),
           (size - 1000, 5000), (size + 100, 100)]
    ops += [(rng.randrange(0, size), rng.randrange(1, 3 * UNIT))
            for _ in range(10)]
    for i, (off, length) in enumerate(ops):
        if i % 2:
            w = rng.randbytes(rng.randrange(1, 2 * UNIT))
            woff = rng.randrange(0, size - len(w))
            os.pwrite(fd, w, woff)
            data[woff:woff + len(w)] = w
        fallocate(fd, PUNCH_HOLE | KEEP_SIZE, off, length)
        end = min(off + length, size)
        if off < end:
            data[off:end] = bytes(end - off)
        # a write right after a punch must survive the punch's checkpoint
        w = rng.randbytes(100)
        woff = rng.randrange(0, size - 100)
        os.pwrite(fd, w, woff)
        data[woff:woff + 100] = w
    os.close(fd)
    # ZERO_RANGE, inside and (without KEEP_SIZE) past the end.
    fd = os.open(p, os.O_RDWR)
    for off, length, mode in ((2 * UNIT + 5, 3 * UNIT, ZERO_RANGE),
                              (size - 300, 2 * UNIT, ZERO_RANGE | KEEP_SIZE),
                              (size - 100, UNIT + 1, ZERO_RANGE)):
        fallocate(fd, mode, off, length)
        end = off + length
        if end > len(data) and not mode & KEEP_SIZE:
            data += bytes(end - len(data))
        end = min(end, len(data))
        data[off:end] = bytes(end - off)
    os.close(fd)
    compare("punch", p, data)
    with open(os.path.join(mdir, "punch"), "wb") as f:
        f.write(data)
    # Unsupported modes are refused cleanly and change nothing.
    fd = os.open(p, os.O_RDWR)
    for mode in (0x08, 0x20, PUNCH_HOLE):   # collapse, insert
        try:
            fallocate(fd, mode, 0, UNIT)
            complain("mode %#x accepted" % mode)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                complain("mode %#x: %s" % (mode, e))
    os.close(fd)
    compare("punch-after-refused-modes", p, data)


def seek_file(d, mb):
    """The seek test file: block map of data (True) per 4 KiB block."""
    nblk = (mb << 20) // BLK
    rng = random.Random(7)
    have = [False] * nblk
    p = os.path.join(d, "seek")
    if os.path.exists(p):
        os.unlink(p)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    for _ in range(12):
        b = rng.randrange(0, nblk - 40)
        n = rng.randrange(1, 40)
        os.pwrite(fd, b"\x01" * (n * BLK), b * BLK)
        for i in range(b, b + n):
            have[i] = True
    os.ftruncate(fd, nblk * BLK)
    for _ in range(6):
        b = rng.randrange(0, nblk - 20)
        n = rng.randrange(1, 20)
        fallocate(fd, PUNCH_HOLE | KEEP_SIZE, b * BLK, n * BLK)
        for i in range(b, b + n):
            have[i] = False
    return fd, have


def expect(have, off, whence):
    nblk = len(have)
    if off >= nblk * BLK:
        return -errno.ENXIO
    b = off // BLK
    want = whence == os.SEEK_DATA
    for i in range(b, nblk):
        if have[i] == want:
            return max(i * BLK, off)
    return -errno.ENXIO if want else nblk * BLK


def mode_seek(d, mb):
    fd, have = seek_file(d, mb)
    rng = random.Random(11)
    size = len(have) * BLK
    offs = [0, 1, size - 1, size, size + 5]
    offs += [i * BLK for i in range(1, len(have)) if have[i] != have[i - 1]]
    offs += [rng.randrange(0, size) for _ in range(40)]
    for off in offs:
        for whence in (os.SEEK_DATA, os.SEEK_HOLE):
            try:
                got = os.lseek(fd, off, whence)
            except OSError as e:
                got = -e.errno
            want = expect(have, off, whence)
            if got != want:
                complain("lseek(%d, %s) = %d, want %d" %
                         (off, "SEEK_DATA" if whence == os.SEEK_DATA
                          else "SEEK_HOLE", got, want))
    os.close(fd)
    # dense and empty files
    p = os.path.join(d, "dense")
    with open(p, "wb") as f:
        f.write(b"x" * 8192)
    fd = os.open(p, os.O_RDONLY)
    for off, whence, want in ((100, os.SEEK_DATA, 100), (0, os.SEEK_HOLE, 8192),
                              (8192, os.SEEK_DATA, -errno.ENXIO)):
        try:
            got = os.lseek(fd, off, whence)
        except OSError as e:
            got = -e.errno
        if got != want:
            complain("dense: lseek(%d, %d) = %d, want %d" % (off, whence, got, want))
    os.close(fd)


def mode_away(d, mdir, mb, init):
    """A file of one group (d is a directory striped on group 0 only):
    created while both twins are up (init), then punched, extended and
    written while one twin is away (the resync must copy all of it)."""
    p = os.path.join(d, "away")
    mpath = os.path.join(mdir, "away")
    rng = random.Random(13 if init else 17)
    size = mb << 20
    if init:
        data = bytearray(rng.randbytes(size))
        with open(p, "wb") as f:
            f.write(data)
            os.fsync(f.fileno())
    else:
        data = bytearray(read_all(mpath))
        fd = os.open(p, os.O_RDWR)
        for i in range(12):
            off = rng.randrange(0, size)
            length = rng.randrange(1, 3 << 20)
            fallocate(fd, PUNCH_HOLE | KEEP_SIZE, off, length)
            end = min(off + length, len(data))
            data[off:end] = bytes(end - off)
            if i % 3 == 0:
                w = rng.randbytes(rng.randrange(1, 100000))
                woff = rng.randrange(0, size)
                os.pwrite(fd, w, woff)
                data[woff:woff + len(w)] = w
        fallocate(fd, 0, len(data) - 5, 1 << 20)
        data += bytes((1 << 20) - 5)
        os.fsync(fd)
        os.close(fd)
    compare("away", p, data)
    with open(mpath, "wb") as f:
        f.write(data)


def main():
    mode, d, mdir, mb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode == "write":
        mode_write(d, mdir, mb)
    elif mode == "seek":
        mode_seek(d, mb)
    elif mode in ("away-init", "away-ops"):
        mode_away(d, mdir, mb, mode == "away-init")
    else:
        for name in sorted(os.listdir(mdir)):
            sub = "g0/" if name == "away" else ""
            compare(name, os.path.join(d, sub + name),
                    read_all(os.path.join(mdir, name)))
    print("fa_check %s: %d mismatches" % (mode, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
