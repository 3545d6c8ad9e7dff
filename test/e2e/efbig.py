#!/usr/bin/env python3
"""efbig.py DIR - every way past a file's size limit answers EFBIG (or a
short write that stops at the limit) before anything reaches an iod.

The limit is the one the mount reports in the twinfs.layout xattr
(max_file_size=...): the largest size whose every subfile fits the iods'
file systems (proto/FORMAT.md "File size limit").  Prints one PASS/FAIL
line per check; exit status 1 if any failed.
"""
import ctypes
import errno
import mmap
import os
import sys

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64]

fails = 0


def result(name, ok, why=""):
    global fails
    if ok:
        print("PASS %s" % name)
    else:
        print("FAIL %s: %s" % (name, why))
        fails += 1


def errno_of(fn):
    """0 when fn() succeeds, else its errno."""
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def want_efbig(name, fn):
    e = errno_of(fn)
    result(name, e == errno.EFBIG, "errno %d (%s), want EFBIG" %
           (e, os.strerror(e) if e else "success"))


def main(d):
    path = os.path.join(d, "big")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    lay = os.getxattr(path, "twinfs.layout").decode()
    lim = int(dict(t.split("=", 1) for t in lay.split())["max_file_size"])
    print("limit %d (%s)" % (lim, lay))
    result("efbig-limit-reported", 0 < lim <= (1 << 63) - 1, lay)

    # The write that used to take a whole group down at its checkpoint.
    if lim < (1 << 63) - 65537 - 65536:
        want_efbig("efbig-write-near-2^63", lambda: os.pwrite(
            fd, b"y" * 65537, (1 << 63) - 65537 - 65536))
    want_efbig("efbig-write-at-limit", lambda: os.pwrite(fd, b"x", lim))

    # A write that crosses the limit stops at it, as on a local file.
    n = os.pwrite(fd, b"c" * 10000, lim - 4000)
    result("efbig-write-crossing-is-short", n == 4000, "wrote %d" % n)
    result("efbig-size-at-limit", os.fstat(fd).st_size == lim,
           "size %d" % os.fstat(fd).st_size)
    result("efbig-crossing-bytes",
           os.pread(fd, 5000, lim - 4000) == b"c" * 4000, "read back")

    # O_DIRECT, aligned: up to the limit works; one that crosses it fails
    # EFBIG whole (the kernel's direct I/O cannot take a short write).
    dfd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 8192)
    buf.write(b"d" * 8192)
    base = lim - lim % 4096
    try:
        n = os.pwrite(dfd, buf[:4096], base - 4096)
        result("efbig-odirect-to-limit", n == 4096, "wrote %d" % n)
    except OSError as e:
        result("efbig-odirect-to-limit", False, "errno %d" % e.errno)
    want_efbig("efbig-odirect-crossing", lambda: os.pwrite(dfd, buf,
                                                           base - 4096))
    want_efbig("efbig-odirect-past", lambda: os.pwrite(dfd, buf[:4096],
                                                       base + 4096))
    os.close(dfd)

    # O_APPEND at the limit: nothing fits.
    afd = os.open(path, os.O_WRONLY | os.O_APPEND)
    want_efbig("efbig-append", lambda: os.write(afd, b"a"))
    os.close(afd)

    # Truncate: to the limit is fine, one byte more is not.
    want_efbig("efbig-truncate", lambda: os.truncate(path, lim + 1))
    want_efbig("efbig-ftruncate", lambda: os.ftruncate(fd, lim + 1))
    result("efbig-truncate-to-limit",
           errno_of(lambda: os.ftruncate(fd, lim)) == 0, "refused")

    # fallocate, every mode that takes a range past the limit.
    for name, mode in (("alloc", 0), ("keep-size", FALLOC_FL_KEEP_SIZE),
                       ("punch", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
                       ("zero", FALLOC_FL_ZERO_RANGE)):
        want_efbig("efbig-fallocate-" + name,
                   lambda m=mode: fallocate(fd, m, lim - 10, 100))

    # copy_file_range into the end: short, then EFBIG.
    src = os.path.join(d, "src")
    with open(src, "wb") as f:
        f.write(b"s" * 8192)
    sfd = os.open(src, os.O_RDONLY)
    os.ftruncate(fd, lim - 4096)
    try:
        n = os.copy_file_range(sfd, fd, 8192, 0, lim - 4096)
        result("efbig-copy-range-short", n == 4096, "copied %d" % n)
    except OSError as e:
        result("efbig-copy-range-short", e.errno == errno.EFBIG,
               "errno %d" % e.errno)
    want_efbig("efbig-copy-range-past",
               lambda: os.copy_file_range(sfd, fd, 10, 0, lim))
    os.close(sfd)

    # The file still works below the limit.
    os.pwrite(fd, b"ok", 0)
    os.fsync(fd)
    result("efbig-still-writes", os.pread(fd, 2, 0) == b"ok", "read back")
    os.close(fd)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
