#!/usr/bin/env python3
"""append_check.py PATH1 PATH2 N - three writers on each of two paths of
one file (the same file through two mounts) append N records in all, of
20 B to 200 KiB, with O_APPEND, concurrently; then every record must be
found in the file whole, exactly once, and the size must be the sum of
them all (t_append.sh).  Exit status 0 when so.
"""
import os
import random
import sys
import threading
import time

paths, n = sys.argv[1:3], int(sys.argv[3])
writers = [(p, w) for p in paths for w in range(3)]
records = {}

def record(tag, i):
    rng = random.Random(hash((tag, i)) & 0xffffffff)
    size = rng.choice((17, 100, 4096, 5000, 65536 + 3, 200000)) if i % 7 == 0 else rng.randrange(20, 300)
    head = b"<%s:%d:%d:" % (tag.encode(), i, size)
    body = bytes(rng.randrange(97, 123) for _ in range(min(size, 64)))
    body = (body * (size // len(body) + 1))[:size]
    return head + body + b">\n"

def run(path, w):
    tag = "%s-%d" % (os.path.basename(os.path.dirname(path)), w)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(n // len(writers)):
        r = record(tag, i)
        records[(tag, i)] = r
        assert os.write(fd, r) == len(r)
    os.close(fd)

t0 = time.monotonic()
ts = [threading.Thread(target=run, args=wp) for wp in writers]
for t in ts: t.start()
for t in ts: t.join()
total = sum(len(r) for r in records.values())
fd = os.open(paths[0], os.O_RDONLY)
data = b""
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    data += b
os.close(fd)
ok = True
if len(data) != total:
    print("size %d, want %d (sum of %d records)" % (len(data), total, len(records)))
    ok = False
pos = 0
seen = set()
while pos < len(data) and ok:
    if data[pos:pos + 1] != b"<":
        print("garbage at %d: %r" % (pos, data[pos:pos + 40])); ok = False; break
    tag, i, size = data[pos + 1:data.index(b":", data.index(b":", pos + 1) + 1) + 20].split(b":")[:3]
    key = (tag.decode(), int(i))
    r = records.get(key)
    if r is None or data[pos:pos + len(r)] != r or key in seen:
        print("record %r (%d bytes) at %d is wrong or repeated: %r" %
              (key, len(r or b""), pos, data[pos:pos + 60]))
        if r:
            bad = next(k for k in range(len(r)) if pos + k >= len(data) or data[pos + k] != r[k])
            print("  first difference at +%d: %r" % (bad, data[pos + bad - 10:pos + bad + 50]))
        ok = False; break
    seen.add(key)
    pos += len(r)
if ok and len(seen) != len(records):
    print("%d of %d records found" % (len(seen), len(records))); ok = False
print("appended %d records, %d bytes in %.1f s" %
      (len(records), total, time.monotonic() - t0))
sys.exit(0 if ok else 1)
