#!/usr/bin/env python3
"""manymounts.py - the workers and checks of t_manymounts.sh: one worker
process per mount (POSIX locks belong to a process), all of one cluster.

  create MNT K N           MNT/shared/mK-IIII for I < N, content "mK-I\\n"
  listed N NM MNT...       every mount lists MNT/shared as exactly the names
                           of NM creators; each file's content read through
                           the mount after its creator's
  append MNT K R           R records of RECORD bytes, O_APPEND, to MNT/log
  appended NM R MNT        MNT/log: NM * R records, each whole, exactly once
  counter MNT K L          L times: fcntl-lock MNT/counter, read it (opened
                           after the lock: close-to-open), write it + 1,
                           fsync, unlock
  rename MNT K ITERS F     ITERS renames of the files j < F among their four
                           places MNT/r/{a,b}/{f,g}J, all mounts at once
  renamed F MNT...         each file exists once, in one place, intact, as
                           every mount lists it
Checks print "ok ..." and exit 0, or print what is wrong and exit 1.
"""
import fcntl
import os
import random
import sys

RECORD = 256


def rec(k, i):
    head = b"<m%d:%d:" % (k, i)
    return head + bytes([97 + (k * 7 + i) % 26]) * (RECORD - len(head) - 2) + b">\n"


def create(mnt, k, n):
    for i in range(n):
        with open(os.path.join(mnt, "shared", "m%d-%04d" % (k, i)), "x") as f:
            f.write("m%d-%d\n" % (k, i))


def listed(n, nm, mnts):
    want = sorted("m%d-%04d" % (k, i) for k in range(nm) for i in range(n))
    bad = []
    for j, m in enumerate(mnts):
        got = sorted(os.listdir(os.path.join(m, "shared")))
        if got != want:
            miss = sorted(set(want) - set(got))[:3]
            extra = sorted(set(got) - set(want))[:3]
            bad.append("mount %d lists %d of %d (missing %s, extra %s)"
                       % (j, len(got), len(want), miss, extra))
    for k in range(nm):
        m = mnts[(k + 1) % len(mnts)]
        for i in range(n):
            with open(os.path.join(m, "shared", "m%d-%04d" % (k, i))) as f:
                if f.read() != "m%d-%d\n" % (k, i):
                    bad.append("m%d-%04d: wrong content" % (k, i))
    return report(bad, "%d mounts list the same %d names" % (len(mnts), len(want)))


def append(mnt, k, r):
    fd = os.open(os.path.join(mnt, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(r):
        if os.write(fd, rec(k, i)) != RECORD:
            raise SystemExit("short append")
    os.close(fd)


def appended(nm, r, mnt):
    with open(os.path.join(mnt, "log"), "rb") as f:
        data = f.read()
    bad = []
    if len(data) != nm * r * RECORD:
        bad.append("size %d, want %d" % (len(data), nm * r * RECORD))
    seen = set()
    for off in range(0, len(data) - RECORD + 1, RECORD):
        chunk = data[off:off + RECORD]
        try:
            k, i = (int(x) for x in chunk[2:chunk.index(b":", chunk.index(b":") + 1)].split(b":"))
        except ValueError:
            bad.append("torn or foreign record at %d: %r" % (off, chunk[:24]))
            break
        if chunk != rec(k, i) or (k, i) in seen:
            bad.append("record m%d:%d at %d torn or repeated" % (k, i, off))
            break
        seen.add((k, i))
    if len(seen) != nm * r and not bad:
        bad.append("%d of %d records" % (len(seen), nm * r))
    return report(bad, "%d records of %d bytes, each whole, once" % (len(seen), RECORD))


def counter(mnt, loops):
    path = os.path.join(mnt, "counter")
    for _ in range(loops):
        fd = os.open(path, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        # Opened after the lock was granted: close-to-open shows the last
        # holder's write (docs/ARCHITECTURE.md "Caches").
        fd2 = os.open(path, os.O_RDWR)
        v = int(os.pread(fd2, 20, 0).decode())
        os.pwrite(fd2, b"%20d" % (v + 1), 0)
        os.fsync(fd2)
        fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd2)
        os.close(fd)


PLACES = [("a", "f"), ("a", "g"), ("b", "f"), ("b", "g")]


def place(mnt, p, j):
    d, pre = PLACES[p]
    return os.path.join(mnt, "r", d, "%s%02d" % (pre, j))


def rename(mnt, k, iters, nfiles):
    rng = random.Random(k)
    moved = 0
    for _ in range(iters):
        j = rng.randrange(nfiles)
        dst = rng.randrange(len(PLACES))
        for p in rng.sample(range(len(PLACES)), len(PLACES)):
            if p == dst:
                continue
            # File j only ever has names among its own four places, so a
            # rename never replaces another file; ENOENT: another mount
            # moved it first, try where it may be now.
            try:
                os.rename(place(mnt, p, j), place(mnt, dst, j))
            except FileNotFoundError:
                continue
            moved += 1
            break
    print("mount %d: %d moves" % (k, moved))


def renamed(nfiles, mnts):
    bad = []
    views = []
    for m in mnts:
        names = set()
        for d in ("a", "b"):
            names |= {d + "/" + x for x in os.listdir(os.path.join(m, "r", d))}
        views.append(sorted(names))
    for j, v in enumerate(views[1:], 1):
        if v != views[0]:
            bad.append("mount %d lists %s, mount 0 %s" % (j, v[:4], views[0][:4]))
    for j in range(nfiles):
        where = [p for p in range(len(PLACES))
                 if "%s/%s%02d" % (PLACES[p][0], PLACES[p][1], j) in views[0]]
        if len(where) != 1:
            bad.append("file %d in %d places" % (j, len(where)))
            continue
        with open(place(mnts[j % len(mnts)], where[0], j)) as f:
            if f.read() != "file %d\n" % j * 64:
                bad.append("file %d: contents changed" % j)
    if len(views[0]) != nfiles:
        bad.append("%d names for %d files" % (len(views[0]), nfiles))
    return report(bad, "%d files, each once and intact, in every mount's listing" % nfiles)


def report(bad, good):
    if bad:
        print("; ".join(bad[:6]))
        return 1
    print("ok", good)
    return 0


def main():
    a = sys.argv[1:]
    cmd = a[0] if a else ""
    if cmd == "create":
        create(a[1], int(a[2]), int(a[3]))
    elif cmd == "listed":
        return listed(int(a[1]), int(a[2]), a[3:])
    elif cmd == "append":
        append(a[1], int(a[2]), int(a[3]))
    elif cmd == "appended":
        return appended(int(a[1]), int(a[2]), a[3])
    elif cmd == "counter":
        counter(a[1], int(a[3]))
    elif cmd == "rename":
        rename(a[1], int(a[2]), int(a[3]), int(a[4]))
    elif cmd == "renamed":
        return renamed(int(a[1]), a[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
