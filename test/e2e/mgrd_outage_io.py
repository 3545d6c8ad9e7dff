#!/usr/bin/env python3
"""mgrd_outage_io.py SRC WDST RDST DIR: the application side of the mgrd
outage drills.  Opens WDST for writing and RDST (a copy of SRC) for
reading while mgrd still answers, prints "ready", waits for DIR/go, then
copies SRC into WDST in 1 MiB writes, each followed by a 1 MiB read of
RDST checked against SRC; prints "done WORST_MS" (the longest write or
read), waits for DIR/close and closes both (close reports the size to
mgrd, so it waits for mgrd).  Exits 1 on a short or wrong read."""
import os, sys, time

src, wdst, rdst, d = sys.argv[1:5]
data = open(src, "rb").read()
fw = os.open(wdst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
fr = os.open(rdst, os.O_RDONLY)
print("ready", flush=True)
for _ in range(6000):
    if os.path.exists(os.path.join(d, "go")):
        break
    time.sleep(0.01)
worst = 0.0
MB = 1 << 20
for off in range(0, len(data), MB):
    a = time.monotonic()
    os.pwrite(fw, data[off:off + MB], off)
    b = os.pread(fr, MB, off)
    worst = max(worst, time.monotonic() - a)
    if b != data[off:off + MB]:
        print("wrong bytes read at offset %d" % off, flush=True)
        sys.exit(1)
print("done %d" % int(worst * 1000), flush=True)
for _ in range(12000):
    if os.path.exists(os.path.join(d, "close")):
        break
    time.sleep(0.01)
os.close(fw)
os.close(fr)
print("closed", flush=True)
