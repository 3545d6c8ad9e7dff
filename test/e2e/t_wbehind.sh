#!/usr/bin/env bash
# t_wbehind.sh - write-behind (fuse-client/wbehind.c): buffered writes are
# answered before they land, and nothing a user can observe may change.
#   - a writer reads its own writes back before close, also after the
#     kernel dropped its cached pages (the reads reach the client), and
#     stat shows its size while the kernel asks for attributes again;
#   - overlapping rewrites land in order (a local reference file gets the
#     same operations; both must be byte-identical, on both mounts);
#   - close-to-open: another mount sees every byte once close returned;
#   - fsync: the other mount sees the data before the writer closes;
#   - a truncate right after many small writes is not undone by them,
#     nor an explicit mtime set right after them (tar x), also with two
#     writers whose reports ride inside that SETATTR, and over many files
#     written as tar x writes them;
#   - small sequential writes are joined into fewer WRITEs (the iods'
#     forward count shows it), and every byte lands, seen from the other
#     mount, also when a read, a rewrite or an fsync comes while a write
#     is held back to be joined;
#   - a write answered early that cannot land (both twins of its group
#     down) fails the close, with EIO, instead of vanishing; closing an
#     idle second handle of the file first does not take that error; of
#     two writers of one file, each one's close fails, not only the first.
. "$(dirname "$0")/lib.sh"
e2e_begin wbehind
e2e_tmpdir T
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail wbehind-mount2 "second mount failed"; exit 1; }

N=$(scale 4000)
((N < 500)) && N=500

# 1. Read your own writes, from the page cache and past it.
"$PY" - "$M/own" "$T/own" "$N" <<'EOF' && pass wbehind-read-own-writes || fail wbehind-read-own-writes "read back differs"
import os, random, sys
path, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(5)
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
data = bytearray()
for i in range(n):
    chunk = rnd.randbytes(rnd.choice((1, 100, 4096, 10240)))
    os.write(fd, chunk)
    data += chunk
    if i % 97 == 0:
        # Drop the clean cached pages: the next read goes to the client,
        # while the last writes may still be in flight.
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        off = rnd.randrange(len(data))
        got = os.pread(fd, 70000, off)
        if got != bytes(data[off:off + 70000]):
            print(f"# mismatch at {off} after {i} writes", file=sys.stderr)
            sys.exit(1)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
if os.pread(fd, len(data) + 10, 0) != bytes(data):
    sys.exit(1)
os.close(fd)
open(ref, "wb").write(data)
EOF
assert_eq wbehind-own-other-mount "$(sha "$T/own")" "$(sha "$M2/own")"

# 2. Overlapping rewrites in order; the same ops on a local file.
"$PY" - "$M/ovl" "$T/ovl" "$N" <<'EOF' && pass wbehind-overlap-order || fail wbehind-overlap-order "writer failed"
import os, random, sys
path, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(11)
fds = [os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644) for p in (path, ref)]
for i in range(n):
    # A few hot ranges, across the 512 KiB stripe unit boundary.
    base = rnd.choice((0, 4000, 524288 - 3000, 524288 + 100))
    ln = rnd.choice((1, 512, 4096, 9000))
    buf = bytes([i & 0xff]) * ln
    for fd in fds:
        os.pwrite(fd, buf, base)
for fd in fds:
    os.close(fd)
EOF
assert_eq wbehind-overlap-same "$(sha "$T/ovl")" "$(sha "$M/ovl")"
assert_eq wbehind-overlap-other-mount "$(sha "$T/ovl")" "$(sha "$M2/ovl")"

# 3. fsync makes it visible to the other mount before close.
"$PY" - "$M/fs" "$M2/fs" "$N" <<'EOF' && pass wbehind-fsync-visible || fail wbehind-fsync-visible "other mount saw other bytes"
import os, sys
path, other, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
data = b"".join(i.to_bytes(4, "little") * 256 for i in range(n))
for off in range(0, len(data), 3000):
    os.write(fd, data[off:off + 3000])
os.fsync(fd)
with open(other, "rb") as f:
    ok = f.read() == data
os.close(fd)
sys.exit(0 if ok else 1)
EOF

# 4. A truncate right after small writes wins; nothing comes back.
"$PY" - "$M/tr" "$N" <<'EOF' && pass wbehind-truncate-after-writes || fail wbehind-truncate-after-writes "writer failed"
import os, sys
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for i in range(n):
    os.write(fd, b"z" * 4096)
os.ftruncate(fd, 1000)
for i in range(64):
    os.pwrite(fd, b"q" * 4096, 1 << 20)
os.ftruncate(fd, 3000)
os.close(fd)
EOF
assert_eq wbehind-truncate-size 3000 "$(stat -c %s "$M2/tr")"
"$PY" -c "
import sys
d = open('$M2/tr', 'rb').read()
sys.exit(0 if d == b'z' * 1000 + bytes(2000) else 1)" &&
	pass wbehind-truncate-content || fail wbehind-truncate-content "bytes past the truncate came back"

# 4b. A writer's own size never goes back: the kernel asks for the
# attributes again every second (attr_timeout) while writes answered early
# have not landed or been reported; stat must show every byte written.
"$PY" - "$M/grow" <<'EOF' && pass wbehind-size-never-shrinks || fail wbehind-size-never-shrinks "stat showed less than written"
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
total, end = 0, time.time() + 2.5
while time.time() < end:
    os.write(fd, b"g" * 10240)
    total += 10240
    st = os.fstat(fd).st_size
    if st != total:
        sys.exit("fstat %d after writing %d" % (st, total))
    if os.stat(sys.argv[1]).st_size != total:
        sys.exit("stat %d after writing %d" % (os.stat(sys.argv[1]).st_size, total))
os.close(fd)
EOF

# 5. An explicit mtime right after writes (tar x does it on every file)
# stays, although the writes may land after it; a later write moves it.
"$PY" - "$M/mt" "$N" <<'EOF' && pass wbehind-mtime-after-writes || fail wbehind-mtime-after-writes "writer failed"
import os, sys
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for i in range(n):
    os.write(fd, b"m" * 10240)
os.utime(fd, ns=(1000000000123456789, 981173106123456789))
os.close(fd)
EOF
assert_eq wbehind-mtime-kept 981173106.123456789 "$(stat -c %.9Y "$M/mt")"
assert_eq wbehind-mtime-other-mount 981173106.123456789 "$(stat -c %.9Y "$M2/mt")"
assert_eq wbehind-mtime-size $((N * 10240)) "$(stat -c %s "$M2/mt")"
"$PY" - "$M/mt2" <<'EOF' && pass wbehind-mtime-then-write || fail wbehind-mtime-then-write "mtime did not move"
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"a" * 4096)
os.utime(fd, ns=(0, 981173106000000000))
os.write(fd, b"b" * 4096)
os.close(fd)
sys.exit(0 if os.stat(sys.argv[1]).st_mtime > time.time() - 600 else 1)
EOF

# 5b. The reports of every writer of the file that landed ride inside the
# SETATTR of an explicit mtime (proto/FORMAT.md); a second writer's close
# racing with it waits for it, and writes still in flight keep its mtime
# when they land (keep_times).  The other mount sees the second writer's
# bytes once it closed, and both writers' bytes and the mtime set last once
# the first closed too.
"$PY" - "$M/mt3" "$M2/mt3" "$(scale 80)" <<'EOF' && pass wbehind-mtime-two-writers || fail wbehind-mtime-two-writers "other mount saw less"
import os, sys, threading, time
p, p2, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = b"a" * 10240 + b"b" * 10240

def closer(fd, delay, out):
    # Close-to-open for the second writer while futimens may be in
    # flight (the delays sweep its round trips).
    time.sleep(delay)
    os.close(fd)
    with open(p2, "rb") as g:
        out.append(g.read())

for i in range(max(n, 16)):
    fd1 = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    fd2 = os.open(p, os.O_WRONLY)
    os.pwrite(fd1, b"a" * 10240, 0)
    os.pwrite(fd2, b"b" * 10240, 10240)
    seen = []
    t = threading.Thread(target=closer, args=(fd2, (i % 8) * 0.0001, seen))
    t.start()
    os.utime(fd1, ns=(10**18, 981173106000000000 + i))
    t.join()
    if not seen or seen[0][10240:] != b"b" * 10240:
        sys.exit("round %d: after close: %d bytes" % (
            i, len(seen[0]) if seen else -1))
    os.close(fd1)
    with open(p2, "rb") as g:
        got = g.read()
        mt = os.fstat(g.fileno()).st_mtime_ns
    if got != want:
        sys.exit("round %d: %d bytes, %d differ" % (
            i, len(got), sum(x != y for x, y in zip(got, want))))
    if mt != 981173106000000000 + i:
        sys.exit("round %d: mtime %d" % (i, mt))
EOF

# 5c. tar x's pattern on many files: writes, futimens at once (the writes
# may land after it: their reports keep its mtime), fchown, fchmod, close;
# some files get a write after the futimens, which must move mtime.  The
# other mount sees every size, mode and mtime, and a ctime no earlier than
# the one fchmod gave (a report of the writes may reach mgrd after the
# fchmod); so does a new mount (5d).
"$PY" - "$M/tx" "$(scale 300)" "$T/tx-ctimes" <<'EOF' && pass wbehind-tar-pattern || fail wbehind-tar-pattern "writer failed"
import os, sys
d, n = sys.argv[1], max(int(sys.argv[2]), 40)
os.mkdir(d)
ctimes = []
for i in range(n):
    fd = os.open("%s/f%d" % (d, i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    for k in range(1 + i % 3):
        os.write(fd, bytes([65 + k]) * (1000 + 4321 * k + i))
    os.utime(fd, ns=(10**18, 981173106000000000 + i))
    os.fchown(fd, 0, 0)
    os.fchmod(fd, 0o640 | (i % 2) * 0o4)
    ctimes.append(os.fstat(fd).st_ctime_ns)
    if i % 5 == 4:
        os.write(fd, b"late")
    os.close(fd)
with open(sys.argv[3], "w") as out:
    out.write(" ".join(map(str, ctimes)))
EOF
"$PY" - "$M2/tx" "$(scale 300)" "$T/tx-ctimes" <<'EOF' && pass wbehind-tar-pattern-other-mount || fail wbehind-tar-pattern-other-mount "differs"
import os, sys, time
d, n = sys.argv[1], max(int(sys.argv[2]), 40)
ctimes = list(map(int, open(sys.argv[3]).read().split()))
bad = []
for i in range(n):
    st = os.stat("%s/f%d" % (d, i))
    size = sum(1000 + 4321 * k + i for k in range(1 + i % 3))
    size += 4 if i % 5 == 4 else 0
    mode = 0o640 | (i % 2) * 0o4
    late = i % 5 == 4
    mt_ok = (st.st_mtime > time.time() - 600) if late else \
        st.st_mtime_ns == 981173106000000000 + i
    if st.st_size != size or (st.st_mode & 0o7777) != mode or not mt_ok or \
            st.st_ctime_ns < ctimes[i]:
        bad.append("f%d: size %d/%d mode %o/%o mtime %d ctime %d/%d" % (
            i, st.st_size, size, st.st_mode & 0o7777, mode, st.st_mtime_ns,
            st.st_ctime_ns, ctimes[i]))
if bad:
    sys.exit("%d files differ, e.g. %s" % (len(bad), bad[:3]))
EOF

# 5e. Joining (fuse-client/ops_data.c): 64 sequential writes of 1,000
# bytes in one stripe unit.  Each would be a WRITE and its forward to the
# twin; joined, a few.  The count is the iods' twinfs_iod_forwarded_total
# (nothing else writes now).  Then joined writes meet what must wait for
# them: reads of their bytes, rewrites, fsync, against a local copy.
forwards() {
	local p s=0 v
	for p in 6 7 8 9; do
		v=$("$PY" "$E2E_DIR/metrics.py" get "http://127.0.0.1:$((TWINFS_PORT + p))/metrics" |
			awk '/^twinfs_iod_forwarded_total/ { print $2 }')
		s=$((s + ${v%.*}))
	done
	echo "$s"
}
f0=$(forwards)
"$PY" - "$M/join" "$T/join" <<'EOF' || fail wbehind-join-write "writer failed"
import os, random, sys
data = random.Random(3).randbytes(64000)
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for i in range(64):
    os.write(fd, data[i * 1000:(i + 1) * 1000])
os.close(fd)
open(sys.argv[2], "wb").write(data)
EOF
f1=$(forwards)
echo "# 64 writes of 1000 bytes: $((f1 - f0)) forwards to a twin"
if ((f1 - f0 > 0 && f1 - f0 < 32)); then pass wbehind-join-fewer-writes
else fail wbehind-join-fewer-writes "$((f1 - f0)) forwards for 64 writes (want 1-31)"; fi
assert_eq wbehind-join-other-mount "$(sha "$T/join")" "$(sha "$M2/join")"
"$PY" - "$M/join2" "$T/join2" "$N" <<'EOF' && pass wbehind-join-mixed || fail wbehind-join-mixed "read back differs"
import os, random, sys
path, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(17)
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
data = bytearray()
pos = 0
for i in range(n):
    chunk = rnd.randbytes(rnd.choice((1, 500, 3000, 10240)))
    what = rnd.randrange(40)
    # Rewrite bytes a held-back write may cover (pwrite: the offset of
    # the next write stays), or write on.
    off = rnd.randrange(max(0, len(data) - 4000), len(data)) \
        if what == 0 and data else None
    if off is None:
        off = pos
        os.write(fd, chunk)
        pos += len(chunk)
    else:
        os.pwrite(fd, chunk, off)
    if off + len(chunk) > len(data):
        data += bytes(off + len(chunk) - len(data))
    data[off:off + len(chunk)] = chunk
    if what == 1:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        off = max(0, len(data) - 5000)
        if os.pread(fd, 6000, off) != bytes(data[off:off + 6000]):
            print(f"# mismatch at {off} after {i} writes", file=sys.stderr)
            sys.exit(1)
    elif what == 2:
        os.fsync(fd)
os.close(fd)
open(ref, "wb").write(data)
EOF
assert_eq wbehind-join-mixed-other-mount "$(sha "$T/join2")" "$(sha "$M2/join2")"

check wbehind-sync ctl sync
e2e_verify wbehind-verify-twins
cd /
lc umount "$M2" >/dev/null
e2e_remount
assert_eq wbehind-remount-own "$(sha "$T/own")" "$(sha "$M/own")"
assert_eq wbehind-remount-ovl "$(sha "$T/ovl")" "$(sha "$M/ovl")"
assert_eq wbehind-remount-join "$(sha "$T/join2")" "$(sha "$M/join2")"
assert_eq wbehind-remount-tr 3000 "$(stat -c %s "$M/tr")"
assert_eq wbehind-remount-mtime 981173106.123456789 "$(stat -c %.9Y "$M/mt")"
# 5d. (5c after a remount)
assert_eq wbehind-remount-tar-mtime 981173106.000000002 "$(stat -c %.9Y "$M/tx/f2")"
assert_eq wbehind-remount-tar-size $((3 * 1000 + 4321 + 8642 + 3 * 2)) "$(stat -c %s "$M/tx/f2")"

# 6. Near the end: a write that cannot land fails the close.  Group 1 only.  A
# second handle of the file that never read or wrote is closed first:
# its close succeeds at once and does not take the writer's error.
mkdir "$M/g1"
setfattr -n twinfs.layout -v "512K 1 1" "$M/g1"
(cd / && lc kill-iod 3 >/dev/null && lc kill-iod 4 >/dev/null)
got=$(timeout 60 "$PY" - "$M/g1/lost" <<'EOF'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
    idle = os.open(sys.argv[1], os.O_RDONLY)
except OSError as e:
    print("open:" + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)
try:
    for i in range(16):
        os.write(fd, b"w" * 4096)
except OSError as e:
    print("write:" + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)
try:
    os.close(idle)
except OSError as e:
    print("idle-close:" + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)
try:
    os.close(fd)
except OSError as e:
    print("close:" + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)
print("no-error")
EOF
)
echo "# write to a failed group: $got"
case $got in
write:EIO | close:EIO) pass wbehind-error-not-lost ;;
*) fail wbehind-error-not-lost "got '$got' (want EIO from write or the writer's close)" ;;
esac

# 7. Last: two writers of one file, group 1 still down: each one's writes
# are lost, so each one's close must fail with EIO, not only the first.
# (Their writes are answered before their pieces are sent, ops_data.c, so
# the error can only come from the close.)
writers_err_check wbehind-error-each-writer "$M/g1/two"
e2e_end
