#!/usr/bin/env bash
# t_sparse.sh - sparse files look sparse (stat blocks and du are the real
# allocation), holes read as zeros, offsets beyond 4 GiB work, and an
# unlinked file keeps working until its last close.
. "$(dirname "$0")/lib.sh"
e2e_begin sparse

mkdir -p "$M/s" && cd "$M/s" || exit 1
e2e_tmpdir T

# --- a 100 MiB file with 64 KiB of data in the middle
check sparse-truncate truncate -s 100M sp
head -c 65536 /dev/urandom >"$T/chunk"
check sparse-write dd if="$T/chunk" of=sp bs=64k seek=800 conv=notrunc status=none
assert_eq sparse-size $((100 << 20)) "$(stat -c %s sp)"
blocks=$(stat -c %b sp)
((blocks >= 128 && blocks < 4096)) && pass sparse-stat-blocks || fail sparse-stat-blocks "$blocks blocks for 64 KiB of data"
du_k=$(du -k sp | cut -f1)
((du_k >= 64 && du_k < 2048)) && pass sparse-du || fail sparse-du "du says ${du_k}K"
assert_eq sparse-apparent $((100 << 10)) "$(du -k --apparent-size sp | cut -f1)"
assert_eq sparse-data "$(sha "$T/chunk")" "$(dd if=sp bs=64k skip=800 count=1 status=none | sha256sum | cut -d' ' -f1)"
assert_eq sparse-hole-zeros "$(head -c $((800 * 65536)) /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(head -c $((800 * 65536)) sp | sha256sum | cut -d' ' -f1)"
assert_eq sparse-tail-zeros "$(head -c $((100 * 1048576 - 801 * 65536)) /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(tail -c $((100 * 1048576 - 801 * 65536)) sp | sha256sum | cut -d' ' -f1)"

# --- dense file: blocks cover the data
head -c $((4 << 20)) /dev/urandom >dense
sync dense 2>/dev/null || true
blocks=$(stat -c %b dense)
((blocks >= 8192 && blocks <= 8192 * 2 + 256)) && pass dense-stat-blocks || fail dense-stat-blocks "$blocks blocks for 4 MiB"

# --- beyond 4 GiB: 1 MiB at 5 GiB
head -c $((1 << 20)) /dev/urandom >"$T/mb"
check big-offset-write dd if="$T/mb" of=huge bs=1M seek=5120 conv=notrunc status=none
assert_eq big-offset-size $(((5 << 30) + (1 << 20))) "$(stat -c %s huge)"
assert_eq big-offset-read "$(sha "$T/mb")" "$(dd if=huge bs=1M skip=5120 count=1 status=none | sha256sum | cut -d' ' -f1)"
assert_eq big-offset-hole "$(head -c $((1 << 20)) /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(dd if=huge bs=1M skip=4700 count=1 status=none | sha256sum | cut -d' ' -f1)"
du_k=$(du -k huge | cut -f1)
((du_k < 8192)) && pass big-offset-du-small || fail big-offset-du-small "du says ${du_k}K"
"$PY" - huge <<'EOF2' && pass big-offset-pwrite-pread || fail big-offset-pwrite-pread "python pwrite/pread at 2^32 +- 1"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for off in ((1 << 32) - 3, (1 << 32) + 100, (1 << 33) + 12345):
    os.pwrite(fd, b"edge%d" % off, off)
for off in ((1 << 32) - 3, (1 << 32) + 100, (1 << 33) + 12345):
    assert os.pread(fd, len(b"edge%d" % off), off) == b"edge%d" % off, off
os.close(fd)
EOF2

# --- unlinked but open
"$PY" - <<'EOF2' && pass unlinked-open || fail unlinked-open "python checks failed"
import os
fd = os.open("orphan", os.O_RDWR | os.O_CREAT, 0o644)
data = os.urandom(3 << 20)
os.write(fd, data)
os.unlink("orphan")
assert "orphan" not in os.listdir("."), "still listed"
assert os.fstat(fd).st_nlink == 0, "nlink %d" % os.fstat(fd).st_nlink
os.write(fd, b"tail")
os.lseek(fd, 0, os.SEEK_SET)
got = b""
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    got += b
assert got == data + b"tail", "content"
os.ftruncate(fd, 1000)
assert os.fstat(fd).st_size == 1000
assert os.pread(fd, 1000, 0) == data[:1000]
os.close(fd)
EOF2
# the same from a second process while the first keeps it open
"$PY" - <<'EOF2' && pass unlinked-open-survives-reopen-attempt || fail unlinked-open-survives-reopen-attempt "python checks failed"
import os, errno
fd = os.open("orphan2", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 100000)
os.fsync(fd)
os.unlink("orphan2")
try:
    os.open("orphan2", os.O_RDONLY)
    raise SystemExit("reopen by name worked")
except FileNotFoundError:
    pass
assert os.pread(fd, 100000, 0) == b"x" * 100000
os.close(fd)
EOF2

cd "$M" && rm -rf "$M/s"
e2e_verify
e2e_end
