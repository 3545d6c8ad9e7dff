#!/usr/bin/env bash
# t_errno.sh - the right errno for every failure a user can cause, checked
# with exact errno values from python; EACCES as an unprivileged user
# (the mount has allow_other and default_permissions), and EACCES/EPERM
# from mgrd itself for requests sent around the kernel (twire.py perm).
. "$(dirname "$0")/lib.sh"
e2e_begin errno

mkdir -p "$M/e/dir/sub" && cd "$M/e" || exit 1
echo data >file
mkdir empty

assert_errno enoent-open ENOENT "os.open('missing', os.O_RDONLY)"
assert_errno enoent-stat ENOENT "os.stat('missing/x')"
assert_errno enoent-unlink ENOENT "os.unlink('missing')"
assert_errno enoent-rename ENOENT "os.rename('missing', 'x')"
assert_errno enoent-create-in-missing ENOENT "os.open('missing/x', os.O_CREAT | os.O_WRONLY)"
assert_errno eexist-mkdir EEXIST "os.mkdir('dir')"
assert_errno eexist-excl EEXIST "os.open('file', os.O_CREAT | os.O_EXCL | os.O_WRONLY)"
assert_errno eexist-link EEXIST "os.link('file', 'dir')"
assert_errno eexist-symlink EEXIST "os.symlink('x', 'file')"
assert_errno eexist-mknod-fifo EEXIST "os.mkfifo('file')"
assert_errno enotempty-rmdir ENOTEMPTY "os.rmdir('dir')"
assert_errno enotempty-rename-over-dir ENOTEMPTY "os.rename('empty', 'dir')"
assert_errno eisdir-open-write EISDIR "os.open('dir', os.O_WRONLY)"
assert_errno eisdir-unlink EISDIR "os.unlink('dir')"
assert_errno eisdir-rename-file-over-dir EISDIR "os.rename('file', 'empty')"
assert_errno enotdir-path ENOTDIR "os.stat('file/x')"
assert_errno enotdir-rmdir ENOTDIR "os.rmdir('file')"
assert_errno enotdir-rename-dir-over-file ENOTDIR "os.rename('empty', 'file')"
assert_errno enotdir-opendir ENOTDIR "os.listdir('file')"
assert_errno enametoolong-create ENAMETOOLONG "os.open('n' * 256, os.O_CREAT | os.O_WRONLY)"
assert_errno enametoolong-mkdir ENAMETOOLONG "os.mkdir('d' * 256)"
assert_errno enametoolong-rename ENAMETOOLONG "os.rename('file', 'r' * 256)"
assert_errno name-255-ok no-error "fd = os.open('n' * 255, os.O_CREAT | os.O_WRONLY); os.close(fd); os.unlink('n' * 255)"
assert_errno einval-rename-into-self EINVAL "os.rename('dir', 'dir/sub/x')"
assert_errno rename-noreplace EEXIST "
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, b'file', -100, b'dir', 1) != 0:
    raise OSError(ctypes.get_errno(), 'renameat2')"
assert_errno rename-exchange no-error "
import ctypes
open('xa', 'w').write('A'); open('xb', 'w').write('B')
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, b'xa', -100, b'xb', 2) != 0:
    raise OSError(ctypes.get_errno(), 'renameat2')
assert open('xa').read() == 'B' and open('xb').read() == 'A', 'not exchanged'"

# --- as nobody: allow_other lets it in, permissions keep it out
chmod 0755 "$M" "$M/e"
echo public >pub && chmod 0644 pub
echo secret >priv && chmod 0600 priv
mkdir -p closed && chmod 0700 closed && echo x >closed/f
mkdir -p ro && chmod 0755 ro
assert_errno nobody-can-read-public no-error "open('pub').read()" nobody
assert_errno eacces-read EACCES "open('priv').read()" nobody
assert_errno eacces-write EACCES "open('pub', 'a').write('x')" nobody
assert_errno eacces-create EACCES "os.open('ro/new', os.O_CREAT | os.O_WRONLY)" nobody
assert_errno eacces-search EACCES "os.stat('closed/f')" nobody
assert_errno eacces-unlink EACCES "os.unlink('ro/../pub')" nobody
assert_errno eperm-chown EPERM "os.chown('pub', 65534, 65534)" nobody
assert_errno eperm-chmod EPERM "os.chmod('pub', 0o777)" nobody
chmod 1777 ro && echo x >ro/rootfile && chmod 0666 ro/rootfile
assert_errno nobody-create-in-1777 no-error "open('ro/mine', 'w').write('x')" nobody
assert_errno sticky-eperm EPERM "os.unlink('ro/rootfile')" nobody
assert_eq nobody-owner "65534:65534" "$(stat -c %u:%g ro/mine)"

# --- O_DIRECT and O_APPEND, as on ext4: a write by nobody clears setuid
# and setgid (setgid without group execute too: nobody is outside the
# group), seen at once.  O_APPEND opens are direct_io (one write, one
# reservation at mgrd), for which the kernel leaves the killing to the
# file system; O_DIRECT ones are the kernel's, and so a shared writable
# mmap of them works, as of O_APPEND ones (kio.c).
dwrite_as_nobody() { # FILE FLAGS: one 4 KiB aligned write through them
	setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" - "$1" "$2" <<'EOF'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | eval(sys.argv[2]))
buf = mmap.mmap(-1, 4096)
buf.write(b"n" * 4096)
os.write(fd, buf)
os.close(fd)
EOF
}
for flags in O_DIRECT O_APPEND; do
	for m in 6777:777 4777:777 2777:777 2767:767; do
		echo data >"kill-$flags"
		chmod "${m%:*}" "kill-$flags"
		stat -c %a "kill-$flags" >/dev/null   # cache the mode
		dwrite_as_nobody "kill-$flags" "os.$flags"
		assert_eq "write-$flags-kills-privs-${m%:*}" "${m#*:}" "$(stat -c %a "kill-$flags")"
	done
done
assert_errno "mmap-shared-O_DIRECT" no-error "import mmap
fd = os.open('kill-O_DIRECT', os.O_RDWR | os.O_DIRECT)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = b'mmap'
m.flush()
m.close()
os.close(fd)
assert open('kill-O_DIRECT', 'rb').read(4) == b'mmap'"
# An O_APPEND descriptor is direct_io: its shared mmap works because INIT
# asked the kernel to allow it (fuse-client/kio.c); the bytes written
# through the mapping and an append after it are both there.
assert_errno "mmap-shared-O_APPEND" no-error "import mmap
fd = os.open('kill-O_APPEND', os.O_RDWR | os.O_APPEND)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = b'mmap'
m.flush()
m.close()
os.write(fd, b'tail')
os.close(fd)
d = open('kill-O_APPEND', 'rb').read()
assert d[:4] == b'mmap' and d[-4:] == b'tail', d[:8]"

# mgrd refuses on its own what the kernel would: requests sent around
# it, in the Ctx of uid 1000 (twire.py perm, FORMAT.md "Permissions").
run_checks "$PY" "$E2E_DIR/twire.py" perm 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER" \
	"$(stat -c %i "$M/e")" 1000

cd "$M" && rm -rf "$M/e"
e2e_verify
e2e_end
