#!/usr/bin/env python3
"""stall_copy.py SRC DST: copy SRC to DST in 1 MiB writes and print the
longest single write in ms (the stall an application saw).  Used by the
failover drills that hang or partition an iod mid-write."""
import os, sys, time

src, dst = sys.argv[1], sys.argv[2]
fi = os.open(src, os.O_RDONLY)
fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
worst = 0.0
while True:
    b = os.read(fi, 1 << 20)
    if not b:
        break
    a = time.monotonic()
    os.write(fo, b)
    worst = max(worst, time.monotonic() - a)
os.close(fo)
print(int(worst * 1000))
