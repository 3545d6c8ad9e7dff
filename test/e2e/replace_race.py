#!/usr/bin/env python3
"""replace_race.py WDIR RDIR SECONDS: one process replaces WDIR/swap by
rename (write WDIR/swap.tmp with "vN", rename it over swap) as fast as it
can, while this one opens, reads and closes RDIR/swap (the same file seen
through another mount) in a loop, both for SECONDS (at most 100,000
rounds each).  Prints "replaced R opens O estale E wrong W": an open that
fails (ESTALE, or anything else) or reads something that is not a "vN"
the writer wrote counts against it.  Where a local file system is, an
open racing a rename gets the old file or the new one, never an error."""
import errno, os, re, sys, time

wdir, rdir, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
target, tmp = os.path.join(wdir, "swap"), os.path.join(wdir, "swap.tmp")
with open(target, "w") as f:
    f.write("v0")
time.sleep(1.2)   # the reader's mount sees the name (entry timeout)
end = time.monotonic() + secs
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    n = 0
    while time.monotonic() < end and n < 100000:
        n += 1
        with open(tmp, "w") as f:
            f.write("v%d" % n)
        os.rename(tmp, target)
    os.write(w, b"%d" % n)
    os._exit(0)
os.close(w)
opens = estale = wrong = 0
other = []
path = os.path.join(rdir, "swap")
while time.monotonic() < end and opens < 100000:
    opens += 1
    try:
        with open(path) as f:
            s = f.read()
    except OSError as e:
        if e.errno == errno.ESTALE:
            estale += 1
        else:
            other.append(errno.errorcode.get(e.errno, str(e.errno)))
        continue
    if not re.fullmatch(r"v\d+", s):
        wrong += 1
replaced = int(os.read(r, 32) or b"0")
os.waitpid(pid, 0)
print("replaced %d opens %d estale %d wrong %d%s" % (
    replaced, opens, estale, wrong + len(other),
    (" other " + ",".join(sorted(set(other)))) if other else ""))
