#!/usr/bin/env bash
# t_append.sh - O_APPEND from two mounts (two twinfs processes, as two
# client hosts) never overwrites: each append takes its offset from a
# reservation at mgrd (DESIGN.md "Client"), so when both mounts append
# concurrently, the final size is the sum of every record written and each
# record is found whole, exactly once, byte for byte.
. "$(dirname "$0")/lib.sh"
e2e_begin append
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail append-mount2 "second mount failed"; exit 1; }
pass append-mount2
N=$(scale 2000)

# Several writers per mount, records of varied sizes (up to 200 KiB, so
# some span stripe units and groups), all appending to one file at once.
"$PY" - "$M/log" "$M2/log" "$N" <<'EOF2' && pass append-two-mounts || fail append-two-mounts "see above"
import hashlib, os, random, sys, threading
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
print("appended %d records, %d bytes" % (len(records), total))
sys.exit(0 if ok else 1)
EOF2
assert_eq append-size-seen-by-both "$(stat -c %s "$M/log")" "$(stat -c %s "$M2/log")"
e2e_verify
e2e_end
