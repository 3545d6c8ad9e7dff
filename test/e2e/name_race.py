#!/usr/bin/env python3
"""name_race.py race DIR SIDE N GO | check DIR N LABEL RESULTS... - two clients
create the same names at the same time (t_multihost.sh, the mgrd-pair
partition drill).

race: one thread per name DIR/d00/n .. DIR/d(N-1)/n (a directory each,
made by the caller: creates in one directory take the kernel's directory
lock in turn, and one that waits out mgr_timeout would hold up the
rest); each waits until the local file GO exists, then O_CREAT|O_EXCL,
writes content(SIDE, name), fsyncs and closes.  Prints one line per name, "NAME ok" when every step
succeeded, else "NAME STEP ERRNO" (the step that failed).

check: RESULTS are the race outputs of each side (files, SIDE = the file's
position, 0 or 1).  For every name: never two sides "ok"; the name exists
once in DIR's listing; a side's "ok" means DIR/NAME holds exactly that
side's content; with no "ok" the name is absent or holds a prefix of one
side's content (a create that won but whose write failed).  "Once":
DIR/dII lists n at most once.  Prints
"PASS name-race-LABEL" or "FAIL name-race-LABEL: ..." and a summary
comment.
"""
import errno
import os
import sys
import threading
import time

RECORD = 4096


def content(side, name):
    line = f"side {side} wrote {name}\n".encode()
    return (line * (RECORD // len(line) + 1))[:RECORD]


def one(d, side, name, go, out, lock):
    while not os.path.exists(go):
        time.sleep(0.001)
    path = os.path.join(d, "d" + name[1:], "n")
    step = "create"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            step = "write"
            os.write(fd, content(side, name))
            step = "fsync"
            os.fsync(fd)
        except OSError:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
        step = "close"
        os.close(fd)
        res = "ok"
    except OSError as e:
        res = f"{step} {errno.errorcode.get(e.errno, e.errno)}"
    with lock:
        out[name] = res


def race(d, side, n, go):
    names = [f"n{i:02d}" for i in range(n)]
    out, lock = {}, threading.Lock()
    ts = [threading.Thread(target=one, args=(d, side, nm, go, out, lock))
          for nm in names]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for nm in names:
        print(nm, out[nm])
    return 0


def check(d, n, label, results):
    sides = []
    for r in results:
        m = {}
        with open(r) as f:
            for line in f:
                parts = line.split(None, 1)
                if len(parts) == 2:
                    m[parts[0]] = parts[1].strip()
        sides.append(m)
    bad = []
    won = [0] * len(sides)
    for i in range(n):
        nm = f"n{i:02d}"
        oks = [s for s, m in enumerate(sides) if m.get(nm) == "ok"]
        for s in oks:
            won[s] += 1
        if len(oks) > 1:
            bad.append(f"{nm}: both sides succeeded")
            continue
        count = os.listdir(os.path.join(d, "d" + nm[1:])).count("n")
        if count > 1:
            bad.append(f"{nm}: listed {count} times")
        try:
            with open(os.path.join(d, "d" + nm[1:], "n"), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = None
        if oks:
            if data != content(oks[0], nm):
                bad.append(f"{nm}: side {oks[0]} succeeded, file holds "
                           f"{'nothing' if data is None else repr(data[:24])}")
        elif data is not None and not any(
                content(s, nm).startswith(data) for s in range(len(sides))):
            bad.append(f"{nm}: no side succeeded, file holds {data[:24]!r}")
    print(f"# name race: {n} names, side wins {won}, "
          f"unsuccessful on each side: "
          f"{[sorted(set(v for v in m.values() if v != 'ok')) for m in sides]}")
    if bad:
        print(f"FAIL name-race-{label}:", "; ".join(bad[:6]))
        return 1
    print(f"PASS name-race-{label}")
    return 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "race":
        return race(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    if len(sys.argv) >= 5 and sys.argv[1] == "check":
        return check(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
