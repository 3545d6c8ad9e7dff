#!/usr/bin/env python3
"""backup_pause.py - the active mgrd's longest pause while
`twinfsctl backup-meta` runs, at a large namespace (test/bench/RESULTS.md
"backup-meta pause at scale"; driver: backup_pause.sh).

  synth CRC_SO BASE N OUT   a snapshot (mgrd/FORMAT.md section 2) of
                            BASE's state plus N empty files in N/1000
                            directories under the root, cloned from the
                            first file and directory BASE holds
  probe HOST PORT CLUSTER MNT SECONDS WINDOW_FILE
                            two streams for SECONDS: GETATTRs of the root
                            on a raw client connection, and creates of
                            new files through the mount MNT; prints, for
                            each, the worst latency (ms) of the requests
                            that overlap the window (two CLOCK_MONOTONIC
                            times in WINDOW_FILE, written meanwhile: the
                            backup) and of the others
  now                       CLOCK_MONOTONIC, for WINDOW_FILE
"""
import ctypes
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))


class R:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, n):
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def u8(self): return self.take(1)[0]
    def u32(self): return struct.unpack("<I", self.take(4))[0]
    def u64(self): return struct.unpack("<Q", self.take(8))[0]

    def blob(self):
        n = self.u32()
        return self.take(n)

    def s(self):
        n = self.u32()
        if n == 0xffffffff:
            return None
        v = self.take(n)
        self.take(1)
        return v


def p_str(v):
    return struct.pack("<I", len(v)) + v + b"\0"


def inode(r):
    """(ino, mode, fixed head bytes, type part, xattr part) of one inode."""
    start = r.p
    ino = r.u64()
    mode = r.u32()
    r.take(4 * 4 + 8 * 3 + 12 * 3 + 8 + 4 + 1)
    head = r.b[start:r.p]
    t0 = r.p
    ftype = mode & 0o170000
    entries = None
    if ftype == 0o100000:
        r.u32()
        c = r.u32()
        r.take(4 * c + 8 * c)
    elif ftype == 0o120000:
        r.s()
    elif ftype == 0o040000:
        r.take(8 + 8 + 1 + 4 + 4 + 4)
        entries = []
        for _ in range(r.u32()):
            entries.append((r.u64(), r.u64(), r.s()))
    tpart = r.b[t0:r.p]
    x0 = r.p
    for _ in range(r.u32()):
        r.s()
        r.blob()
    return ino, mode, head, tpart, r.b[x0:r.p], entries


def synth(crc_so, base, n, out):
    b = open(base, "rb").read()
    r = R(b)
    magic, version = r.u32(), r.u32()
    assert magic == 0x534d5754 and version == 6, "need a version 6 snapshot"
    next_ino, ino_limit, rr_next, next_sess, epoch = [r.u64() for _ in range(5)]
    i0 = r.p
    for _ in range(r.u32()):
        r.take(8)
        r.blob()
        r.take(9)
    iods = b[i0:r.p]
    inodes = [inode(r) for _ in range(r.u64())]
    rest = b[r.p:len(b) - 4]
    root = [x for x in inodes if x[0] == 1][0]
    dtmpl = [x for x in inodes if x[1] & 0o170000 == 0o040000 and x[0] != 1][0]
    ftmpl = [x for x in inodes if x[1] & 0o170000 == 0o100000][0]
    per = 1000
    ndirs = (n + per - 1) // per
    first = next_ino + 16
    dino = [first + k for k in range(ndirs)]
    fino0 = first + ndirs
    parts = []

    def head(t, ino, nlink, parent):
        h = bytearray(t[2])
        struct.pack_into("<Q", h, 0, ino)
        struct.pack_into("<I", h, 12, nlink)
        off = 8 + 4 + 4 * 4 + 8 * 3 + 12 * 3
        struct.pack_into("<Q", h, off, parent)
        return bytes(h)

    def dirpart(t, dotdot, ents):
        tp = t[3]
        fixed = bytearray(tp[:8 + 8 + 1 + 4 + 4 + 4])
        struct.pack_into("<QQ", fixed, 0, dotdot, len(ents) + 3)
        out_ = [bytes(fixed), struct.pack("<I", len(ents))]
        for k, (ino, name) in enumerate(ents):
            out_.append(struct.pack("<QQ", k + 3, ino) + p_str(name))
        return b"".join(out_)

    # the root keeps its entries and gets the new directories after them
    rents = [(e[1], e[2]) for e in root[5]]
    rents += [(dino[k], b"big%d" % k) for k in range(ndirs)]
    rnl = struct.unpack_from("<I", root[2], 12)[0] + ndirs
    new_inodes = {1: head(root, 1, rnl, 1) + dirpart(root, 1, rents) + root[4]}
    for x in inodes:
        if x[0] != 1:
            new_inodes[x[0]] = x[2] + x[3] + x[4]
    fi = fino0
    for k in range(ndirs):
        cnt = min(per, n - k * per)
        ents = [(fi + j, b"f%d" % j) for j in range(cnt)]
        new_inodes[dino[k]] = (head(dtmpl, dino[k], 2, 1) +
                               dirpart(dtmpl, 1, ents) + dtmpl[4])
        fh = ftmpl[3] + ftmpl[4]
        for j in range(cnt):
            new_inodes[fi + j] = head(ftmpl, fi + j, 1, dino[k]) + fh
        fi += cnt
    last = fi
    hdr = struct.pack("<II", magic, version)
    hdr += struct.pack("<5Q", last + 1, max(ino_limit, last + 1024), rr_next,
                       next_sess, epoch)
    body = [hdr, iods, struct.pack("<Q", len(new_inodes))]
    body += [new_inodes[k] for k in sorted(new_inodes)]
    body.append(rest)
    data = b"".join(body)
    lib = ctypes.CDLL(crc_so)
    lib.tw_crc32c.restype = ctypes.c_uint32
    lib.tw_crc32c.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    crc = lib.tw_crc32c(0, data, len(data))
    with open(out, "wb") as f:
        f.write(data + struct.pack("<I", crc))
    print("%d inodes, %d bytes" % (len(new_inodes), len(data) + 4))


def probe(host, port, cluster, mnt, secs, window_file):
    import mgrd_elect
    stop = time.monotonic() + secs
    res = {}

    def stream(name, one):
        samples = []
        while time.monotonic() < stop:
            t0 = time.monotonic()
            one(len(samples))
            samples.append((t0, time.monotonic()))
        res[name] = samples

    cl = mgrd_elect.Client(host, port, cluster, timeout=60)
    d = os.path.join(mnt, "probe-%d" % os.getpid())
    os.makedirs(d)

    def getattr_(n):
        assert cl.getattr() == 0

    def create(n):
        os.close(os.open(os.path.join(d, "c%d" % n),
                         os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))

    th = [threading.Thread(target=stream, args=("getattr", getattr_)),
          threading.Thread(target=stream, args=("create", create))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    w0, w1 = [float(x) for x in open(window_file).read().split()]
    print("backup window %.2f s" % (w1 - w0))
    for k in ("getattr", "create"):
        inside = [(b - a, a - w0) for a, b in res[k] if b >= w0 and a <= w1]
        outside = [b - a for a, b in res[k] if b < w0 or a > w1]
        worst = max(inside, default=(0, 0))
        print("%s: during the backup worst %.1f ms (%.2f s into it, %d "
              "requests, %d over 50 ms); outside it worst %.1f ms (%d "
              "requests, %d over 50 ms)" %
              (k, worst[0] * 1000, worst[1], len(inside),
               sum(1 for x in inside if x[0] > 0.05),
               max(outside, default=0) * 1000, len(outside),
               sum(1 for x in outside if x > 0.05)))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["synth"]:
        synth(a[1], a[2], int(a[3]), a[4])
    elif a[:1] == ["probe"]:
        probe(a[1], int(a[2]), a[3], a[4], float(a[5]), a[6])
    elif a[:1] == ["now"]:
        print(time.monotonic())
    else:
        sys.exit(__doc__)
