#!/usr/bin/env bash
# t_coherency.sh - two mounts of one cluster (two twinfs processes, as two
# client hosts): creates, writes, appends, truncates, renames and deletes
# made and closed on one are seen on the other at its next open
# (close-to-open).  Name changes may take the 1 s entry timeout to show.
# The first mount chooses who reads /dev/fuse by what waking an idle CPU
# costs here (the default): libfuse's worker threads or its I/O thread.
# The second is made to read the other way (-o worker_reads or -o
# io_thread_reads), so both ways of serving requests are driven, against
# each other.
. "$(dirname "$0")/lib.sh"
e2e_begin coherency
e2e_tmpdir T
M2=$TWINFS_RUN_DIR/mnt2
# Threads: main, the I/O thread and libfuse's workers (none when the I/O
# thread reads).
nthreads() { ls "/proc/$(client_pid "$1")/task" 2>/dev/null | wc -l; }
# check_readers NAME PATH WAY: PATH's mount has WAY's threads.
check_readers() {
	if [[ $3 == io_thread_reads ]]; then
		assert_eq "$1" 2 "$(nthreads "$2")"
	elif [[ $(nthreads "$2") -ge 3 ]]; then
		pass "$1"
	else
		fail "$1" "$(nthreads "$2") threads in $2, reading with workers"
	fi
}
choice=$(grep -o "the I/O thread reads /dev/fuse\|libfuse's workers read /dev/fuse" \
	"$TWINFS_RUN_DIR/logs/mount.log" | tail -n 1)
case $choice in
*"I/O thread"*) way=io_thread_reads other=worker_reads ;;
*workers*) way=worker_reads other=io_thread_reads ;;
*) way='' other=io_thread_reads ;;
esac
if [[ -n $way ]]; then
	pass default-readers-logged
	check_readers default-readers-threads "$M" "$way"
else
	fail default-readers-logged "the mount's log names no way of reading /dev/fuse"
fi
TWINFS_MOUNT_OPTS=allow_other,$other lc mount "$M2" >/dev/null ||
	{ fail coherency-mount2 "second mount failed"; exit 1; }
pass coherency-mount2
check_readers "$other-threads" "$M2" "$other"
ENTRY_WAIT=1.2

cd "$M" || exit 1
echo v1 >a
assert_eq create-seen v1 "$(cat "$M2/a" 2>&1)"
echo v2 >a # same size: only mtime/data_version tell the other mount
assert_eq overwrite-same-size-seen v2 "$(cat "$M2/a" 2>&1)"
echo more >>"$M2/a"
assert_eq append-from-other-seen "$(printf 'v2\nmore')" "$(cat a 2>&1)"
printf 'XY' | dd of=a bs=1 seek=1 conv=notrunc status=none
assert_eq overwrite-middle-seen "vXYmore" "$(tr -d '\n' <"$M2/a" 2>&1)"
assert_eq size-seen "$(stat -c %s a)" "$(stat -c %s "$M2/a")"

# a bigger file, written on one, read on the other; then rewritten
head -c "$(scale $((32 << 20)))" /dev/urandom >"$T/big1"
head -c "$(scale $((32 << 20)))" /dev/urandom >"$T/big2"
cp "$T/big1" big
assert_same_file big-seen "$T/big1" "$M2/big"
cp "$T/big2" "$M2/big" # overwrite in place (same size) from the other side
assert_same_file big-rewrite-seen "$T/big2" big
mtime1=$(stat -c %.9Y big)
sleep 0.05
touch "$M2/big"
sleep 1.1 # attribute timeout
[[ $(stat -c %.9Y big) != "$mtime1" ]] && pass mtime-seen || fail mtime-seen "mtime unchanged"

# truncate on one side
truncate -s 1000 "$M2/big"
assert_eq truncate-seen-size-at-open 1000 "$(wc -c <big)"
sleep 1.1 # attribute timeout: a plain stat may show the old size until then
assert_eq truncate-seen-size 1000 "$(stat -c %s big 2>&1)"
assert_eq truncate-seen-content "$(head -c 1000 "$T/big2" | sha256sum | cut -d' ' -f1)" "$(sha big)"
truncate -s 5000 big
assert_eq truncate-grow-zeros-seen "$( (head -c 1000 "$T/big2"; head -c 4000 /dev/zero) | sha256sum | cut -d' ' -f1)" "$(sha "$M2/big")"

# namespace: mkdir, rename, rename over, delete
mkdir -p dir1/dir2
echo inside >dir1/dir2/f
sleep "$ENTRY_WAIT"
assert_eq mkdir-seen inside "$(cat "$M2/dir1/dir2/f" 2>&1)"
mv dir1/dir2/f dir1/g
sleep "$ENTRY_WAIT"
assert_eq rename-new-seen inside "$(cat "$M2/dir1/g" 2>&1)"
assert_eq rename-old-gone no "$([[ -e $M2/dir1/dir2/f ]] && echo yes || echo no)"
echo target >"$M2/dir1/h"
mv "$M2/dir1/g" "$M2/dir1/h"
sleep "$ENTRY_WAIT"
assert_eq rename-over-seen inside "$(cat dir1/h 2>&1)"
assert_eq rename-over-src-gone no "$([[ -e dir1/g ]] && echo yes || echo no)"
mv dir1 "$M2/moved"
sleep "$ENTRY_WAIT"
assert_eq rename-dir-seen inside "$(cat moved/h 2>&1)"
rm -rf "$M2/moved"
sleep "$ENTRY_WAIT"
assert_eq delete-seen no "$([[ -e moved ]] && echo yes || echo no)"
assert_eq delete-ls "a big" "$(ls | tr '\n' ' ' | sed 's/ $//')"
# A directory's attributes that came with a listing answer this mount's
# GETATTRs (the kernel drops the atime after every READDIR) no longer than
# the attribute timeout: a subdirectory the other mount makes shows in its
# nlink, and a change this mount makes at once.
listed_nlink() { # DIR: list it through an open descriptor, then fstat that
	"$PY" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.listdir(fd); print(os.fstat(fd).st_nlink)' "$1"
}
mkdir dattr
ls -la . dattr >/dev/null
listed_nlink dattr >/dev/null
mkdir "$M2/dattr/sub"
sleep "$ENTRY_WAIT"
assert_eq dir-attr-other-seen 3 "$(listed_nlink dattr)"
mkdir dattr/sub2
assert_eq dir-attr-own-seen 4 "$(stat -c %h dattr)"
rmdir dattr/sub dattr/sub2 dattr
chmod 600 a
chown 42:43 a
sleep "$ENTRY_WAIT"
assert_eq chmod-chown-seen "600 42:43" "$(stat -c '%a %u:%g' "$M2/a")"
setfattr -n user.k -v val1 a
assert_eq xattr-seen val1 "$(getfattr --absolute-names --only-values -n user.k "$M2/a" 2>&1)"
# security.selinux: its absence comes with the attributes (wire 10), so
# `ls -l` answers from them; a label set on the other mount shows once the
# attributes are older than the timeout, and its removal too.
ls -l a >/dev/null
setfattr -n security.selinux -v system_u:object_r:tmp_t:s0 "$M2/a"
sleep "$ENTRY_WAIT"
assert_eq selinux-set-seen system_u:object_r:tmp_t:s0 "$(getfattr --absolute-names --only-values -n security.selinux a 2>&1)"
assert_eq selinux-ls-dot "-rw-------." "$(ls -l a | cut -d' ' -f1)"
setfattr -x security.selinux "$M2/a"
sleep "$ENTRY_WAIT"
assert_eq selinux-removed-seen "" "$(getfattr --absolute-names --only-values -n security.selinux a 2>/dev/null)"

# a file kept open on one mount while the other replaces it by rename
echo old >keep
exec 7<keep
echo new >"$M2/keep.tmp" && mv "$M2/keep.tmp" "$M2/keep"
assert_eq open-file-keeps-old old "$(cat <&7)"
exec 7<&-

# a file kept open on one mount while the other unlinks it: it keeps
# working there (read, write, read back) until closed, then it is gone
printf 'held' >held
exec 8<>held
rm "$M2/held"
assert_eq unlinked-gone-other no "$([[ -e $M2/held ]] && echo yes || echo no)"
printf 'HELD-more' >&8
assert_eq unlinked-open-rw "HELD-more" "$("$PY" -c 'import os; print(os.pread(8, 64, 0).decode())')"
exec 8>&-
sleep "$ENTRY_WAIT"
assert_eq unlinked-gone-after-close no "$([[ -e held ]] && echo yes || echo no)"
exec 7<&-
sleep "$ENTRY_WAIT"
assert_eq renamed-over-new new "$(cat keep)"

# A file replaced by rename on one mount while the other mount's name
# cache still holds the old one (entry_timeout): mgrd has destroyed the old
# inode, so an open of it fails with ESTALE and the kernel looks the name
# up again (LOOKUP_REVAL), reaching the new file, for reading and for
# writing.  This matters to programs that order their I/O with locks:
# SQLite (journal_mode=DELETE) on two mounts opened a just-deleted
# rollback journal read-only while mgrd kept removed inodes openable for
# 2 s (tried and dropped), took it for a hot journal, and failed.
echo old >r
cat "$M2/r" >/dev/null
echo new >r.tmp && mv r.tmp r
assert_eq read-after-replace-reaches-new new "$(cat "$M2/r" 2>&1)"
echo old >w
cat "$M2/w" >/dev/null
echo new >w.tmp && mv w.tmp w
echo more >>"$M2/w"
printf 'x' | dd of="$M2/w" bs=1 seek=1 conv=notrunc status=none
assert_eq write-after-replace-reaches-new "$(printf 'nxw\nmore')" "$(cat w 2>&1)"

# Privileges on a write (docs/ARCHITECTURE.md "Privileges on a write"):
# with FUSE_HANDLE_KILLPRIV_V2 the kernel stops looking for setuid, setgid
# and security.capability once an inode had none, and leaves them to the
# client.  So: a write by uid 65534 on mount X first (nothing to drop: the
# kernel marks the inode), then mount Y sets them, then X writes or
# truncates again: each must go, seen from both mounts.  Both ways round,
# so both ways of reading /dev/fuse pass the kernel's kill bit on.
CAP=0x0100000200200000000000000000000000000000   # v2, cap_net_raw=p
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
privs() { # FILE: mode and whether it has a capability
	local c=none
	getfattr -n security.capability "$1" >/dev/null 2>&1 && c=cap
	echo "$(stat -c %a "$1") $c"
}
priv_round() { # X Y NAME: write, then truncate, after Y set them
	local x=$1 y=$2 n=$3
	printf 'data' >"$x/$n" && chmod 0777 "$x/$n"
	printf 'a' | as_nobody dd of="$x/$n" bs=1 conv=notrunc status=none
	chmod 4777 "$y/$n" && setfattr -n security.capability -v $CAP "$y/$n"
	sleep "$ENTRY_WAIT"
	assert_eq "$n-set-seen" "4777 cap" "$(privs "$x/$n")"
	printf 'b' | as_nobody dd of="$x/$n" bs=1 seek=1 conv=notrunc status=none
	assert_eq "$n-write-drops" "777 none" "$(privs "$x/$n")"
	sleep "$ENTRY_WAIT"
	assert_eq "$n-write-drops-other" "777 none" "$(privs "$y/$n")"
	chmod 2777 "$y/$n" && setfattr -n security.capability -v $CAP "$y/$n"
	sleep "$ENTRY_WAIT"
	as_nobody truncate -s 2 "$x/$n"
	assert_eq "$n-truncate-drops" "777 none" "$(privs "$x/$n")"
	sleep "$ENTRY_WAIT"
	assert_eq "$n-truncate-drops-other" "777 none 2" \
		"$(privs "$y/$n") $(stat -c %s "$y/$n")"
	assert_eq "$n-bytes" "ab" "$(cat "$y/$n")"
}
priv_round "$M" "$M2" "priv-${way:-default}"
priv_round "$M2" "$M" "priv-$other"

cd /
lc umount "$M2" >/dev/null && pass coherency-umount2 || fail coherency-umount2 "unmount failed"
e2e_verify
e2e_end
