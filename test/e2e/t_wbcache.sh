#!/usr/bin/env bash
# t_wbcache.sh - a mount with -o writeback_cache: the kernel caches writes
# and owns size, mtime and ctime of the files it caches (docs/ARCHITECTURE.md
# "Client": an option for one writer per file; two mounts do not see each
# other's sizes and times at once).  What one mount shows must stay right:
#   - first, that the option is in effect (the kernel answers lseek);
#   - the POSIX suite against ext4 (posix_lib.sh), with the alternatives of
#     test/posix/allowed-wbcache.txt (lseek answered by the kernel, no time
#     change on a truncate to the same size);
#   - fsx on both layouts (mmap writes, truncates, punches, SEEK_DATA/HOLE);
#   - a truncate after mmap writes takes the size asked: the kernel sends
#     its own ctime, a tick older than the one mgrd had stamped, and mgrd
#     moved ctime back, so the client kept the attributes of before;
#   - syncfs after files written and removed, or replaced by rename,
#     succeeds: the kernel writes back the times of a file mgrd has
#     destroyed (ESTALE before; an unlink's victim is answered without
#     mgrd, gone_ino; a rename's after mgrd's ESTALE);
#   - touch leaves atime == mtime;
#   - 4 KiB buffered writes read back byte for byte after drop_caches and
#     after a remount;
#   - writes that cannot land (both twins of their group down) fail the
#     close of each writer, also of the one whose pages the other's close
#     wrote back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/posix_lib.sh"
export TWINFS_MOUNT_OPTS=allow_other,dev,writeback_cache
e2e_begin wbcache
HERE=$(cd "$(dirname "$0")/.." && pwd)
e2e_tmpdir T

# The option is in effect: the client answers lseek ENOSYS, so the
# kernel's own SEEK_HOLE finds no hole before the end of a sparse file
# (the client's answer, in the default mode, is 0).
got=$("$PY" - "$M/probe" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(fd, b"x" * 4096, 1 << 20)
os.fsync(fd)
print(os.lseek(fd, 0, os.SEEK_HOLE))
EOF
)
assert_eq wbcache-in-effect $(((1 << 20) + 4096)) "$got"

posix_suite wbcache-posix "$M/posix" "$HERE/posix/allowed-wbcache.txt"

mkdir -p "$M/fsx/small" && cd "$M/fsx" || exit 1
check wbcache-setstripe ctl setstripe -S 64K -c 2 "$M/fsx/small"
N=$(scale 2000)
((N < 1000)) && N=1000
"$PY" "$E2E_DIR/fsx.py" -n "$N" -l $((2 << 20)) -w $((160 << 10)) "$M/fsx/small/f" &&
	pass wbcache-fsx-64k-units || fail wbcache-fsx-64k-units "see the fsx output above"
"$PY" "$E2E_DIR/fsx.py" -n "$((N / 2))" "$M/fsx/default" &&
	pass wbcache-fsx-default-layout || fail wbcache-fsx-default-layout "see the fsx output above"
cd "$M" || exit 1

# A truncate up after mmap writes, twenty files.
got=$("$PY" - "$M/mm" <<'EOF'
import mmap, os, sys
bad = []
for i in range(20):
    p = "%s%d" % (sys.argv[1], i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, 1274973)
    m = mmap.mmap(fd, 1274973)
    m[742183:742183 + 64335] = b"x" * 64335
    m.flush()
    m.close()
    os.ftruncate(fd, 1744335)
    size = os.fstat(fd).st_size
    os.close(fd)
    if size != 1744335 or os.stat(p).st_size != 1744335:
        bad.append("%d:%d" % (i, size))
print(" ".join(bad) or "ok")
EOF
)
assert_eq wbcache-truncate-after-mmap ok "$got"

# Files written, closed and removed, then syncfs of the mount (a first
# syncfs of the same descriptor takes any error older than these files).
got=$("$PY" - "$M/gone" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir(sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDONLY)
libc.syncfs(fd)
for i in range(20):
    p = os.path.join(sys.argv[1], "f%d" % i)
    with open(p, "wb") as f:
        f.write(b"abc")
    os.unlink(p)
    # a file replaced by rename: the kernel writes its ctime back too
    with open(p + ".new", "wb") as f:
        f.write(b"new")
    with open(p, "wb") as f:
        f.write(b"old")
    os.rename(p + ".new", p)
rc = libc.syncfs(fd)
print("ok" if rc == 0 else os.strerror(ctypes.get_errno()))
EOF
)
assert_eq wbcache-syncfs-after-removes ok "$got"

touch "$M/t" && touch "$M/t"
assert_eq wbcache-touch-atime-is-mtime "$(stat -c %.9Y "$M/t")" "$(stat -c %.9X "$M/t")"

# 4 KiB buffered writes: the kernel writes them back in large pieces.
head -c $(($(scale 32) << 20)) /dev/urandom >"$T/ref"
dd if="$T/ref" of="$M/small4k" bs=4k status=none && pass wbcache-dd-4k ||
	fail wbcache-dd-4k "dd failed"
sync -f "$M/small4k"
echo 3 >/proc/sys/vm/drop_caches
assert_eq wbcache-4k-after-drop-caches "$(sha "$T/ref")" "$(sha "$M/small4k")"
e2e_remount
assert_eq wbcache-4k-after-remount "$(sha "$T/ref")" "$(sha "$M/small4k")"
assert_eq wbcache-size-after-remount "$(stat -c %s "$T/ref")" "$(stat -c %s "$M/small4k")"
e2e_verify wbcache-verify

# Last: group 1 down, two writers of one file.  The first close writes
# back both writers' pages and fails; the second writer's close must fail
# too, although its own handle sent nothing.
mkdir "$M/g1"
setfattr -n twinfs.layout -v "512K 1 1" "$M/g1"
(cd / && lc kill-iod 3 >/dev/null && lc kill-iod 4 >/dev/null)
writers_err_check wbcache-error-each-writer "$M/g1/two"
e2e_end
