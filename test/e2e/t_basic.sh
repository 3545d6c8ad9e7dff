#!/usr/bin/env bash
# t_basic.sh - ordinary tools on a TwinFS mount: cp, cp -a, rm, rm -rf,
# ls -l, mv, mkdir -p, rmdir, ln, ln -s, chmod, chown, touch, truncate,
# xattrs, df, du, stat, dd, appends; contents checked byte for byte, also
# after a remount (so nothing comes from the kernel's cache).
. "$(dirname "$0")/lib.sh"
e2e_begin basic

e2e_tmpdir T

mkdir -p "$M/b" && cd "$M/b" || exit 1

# ---------------------------------------------------------------- cp
head -c "$(scale $((8 << 20)))" /dev/urandom >"$T/src"
check cp cp "$T/src" f1
assert_same_file cp-content "$T/src" f1
assert_eq cp-size "$(stat -c %s "$T/src")" "$(stat -c %s f1)"

# cp -a of a small tree: modes, times, symlinks preserved
mkdir -p "$T/tree/d1/d2"
echo hello >"$T/tree/a"
head -c 70000 /dev/urandom >"$T/tree/d1/b"
printf 'x%.0s' {1..5000} >"$T/tree/d1/d2/c"
chmod 0640 "$T/tree/a"
chmod 0700 "$T/tree/d1/d2"
ln -s ../a "$T/tree/d1/link"
touch -d '2010-05-06 07:08:09' "$T/tree/d1/b"
check cp-a cp -a "$T/tree" tree
check cp-a-diff diff -r "$T/tree" tree
assert_eq cp-a-mode "640 700" "$(stat -c %a tree/a) $(stat -c %a tree/d1/d2)"
assert_eq cp-a-mtime "$(stat -c %Y "$T/tree/d1/b")" "$(stat -c %Y tree/d1/b)"
assert_eq cp-a-symlink "../a" "$(readlink tree/d1/link)"
assert_eq cp-a-symlink-follow "hello" "$(cat tree/d1/link)"

# ---------------------------------------------------------------- ls
# mode, size (not of directories: file systems differ), mtime, name
lsl() { ls -l --time-style=+%s "$1" | awk 'NR > 1 { print substr($1, 1, 10), ($1 ~ /^d/ ? "-" : $5), $6, $7, $8, $9 }'; }
assert_eq ls-l "$(cd "$T/tree" && lsl d1)" "$(cd tree && lsl d1)"

# ---------------------------------------------------------------- rm
cp f1 f2
check rm rm f2
assert_eq rm-gone "no" "$([[ -e f2 ]] && echo yes || echo no)"
cp -a tree tree2
check rm-rf rm -rf tree2
assert_eq rm-rf-gone "no" "$([[ -e tree2 ]] && echo yes || echo no)"

# ---------------------------------------------------------------- mv
echo one >m1
echo two >m2
check mv-rename mv m1 m3
assert_eq mv-rename-content "one" "$(cat m3)"
assert_eq mv-rename-old-gone "no" "$([[ -e m1 ]] && echo yes || echo no)"
check mv-over-existing mv m3 m2
assert_eq mv-over-existing-content "one" "$(cat m2)"
assert_eq mv-over-existing-src-gone "no" "$([[ -e m3 ]] && echo yes || echo no)"
mkdir -p da db
cp "$T/src" da/big
check mv-across-dirs mv da/big db/big2
assert_same_file mv-across-dirs-content "$T/src" db/big2
mkdir -p da/sub/deeper && echo deep >da/sub/deeper/f
check mv-dir-across-dirs mv da/sub db/sub
assert_eq mv-dir-across-dirs-content "deep" "$(cat db/sub/deeper/f)"
assert_eq mv-dir-dotdot "$(stat -c %i db)" "$(stat -c %i db/sub/..)"
assert_eq mv-dir-nlink "2 3" "$(stat -c %h da) $(stat -c %h db)"
assert_errno rename-no-exdev OK "os.rename('db/big2', 'da/big3'); os.rename('db/sub', 'da/sub2'); print('OK'); sys.exit(0)"

# ------------------------------------------------------ mkdir / rmdir
check mkdir-p mkdir -p p1/p2/p3/p4
assert_eq mkdir-p-isdir yes "$([[ -d p1/p2/p3/p4 ]] && echo yes)"
check rmdir rmdir p1/p2/p3/p4
assert_eq rmdir-gone no "$([[ -e p1/p2/p3/p4 ]] && echo yes || echo no)"
assert_eq dir-nlink 2 "$(stat -c %h p1/p2/p3)"

# --------------------------------------------------------- ln / ln -s
echo linked >l1
check ln ln l1 l2
assert_eq ln-nlink "2 2" "$(stat -c %h l1) $(stat -c %h l2)"
assert_eq ln-same-ino "$(stat -c %i l1)" "$(stat -c %i l2)"
echo more >>l2
assert_eq ln-shared-content "$(printf 'linked\nmore')" "$(cat l1)"
rm l1
assert_eq ln-unlink-one "1 $(printf 'linked\nmore')" "$(stat -c %h l2) $(cat l2)"
check ln-s ln -s l2 s1
assert_eq ln-s-readlink l2 "$(readlink s1)"
assert_eq ln-s-follow "$(cat l2)" "$(cat s1)"
ln -s /nonexistent/target dangling
assert_eq ln-s-dangling /nonexistent/target "$(readlink dangling)"
assert_eq ln-s-lstat-type "symbolic link" "$(stat -c %F s1)"

# ------------------------------------------------------ chmod / chown
echo x >perm
check chmod chmod 4751 perm
assert_eq chmod-mode 4751 "$(stat -c %a perm)"
check chown chown 1234:5678 perm
# as on ext4, chown of an executable clears set-user-ID
assert_eq chown-ids "751 1234:5678" "$(stat -c '%a %u:%g' perm)"
mkdir sgid && chown 0:4321 sgid && chmod 2775 sgid && touch sgid/child
assert_eq setgid-dir-inherit 4321 "$(stat -c %g sgid/child)"

# ------------------------------------------------------ touch / utimes
check touch-create touch newfile
assert_eq touch-create-size 0 "$(stat -c %s newfile)"
check touch-d touch -d '2001-02-03 04:05:06.123456789 UTC' newfile
assert_eq touch-d-mtime "981173106.123456789" "$(stat -c %.9Y newfile)"
assert_eq touch-d-atime "981173106.123456789" "$(stat -c %.9X newfile)"
touch -m -d '@1000000000' newfile
assert_eq touch-m-only "1000000000 981173106" "$(stat -c '%Y %X' newfile)"
before=$(date +%s)
touch -d '@1000' tnow && touch tnow
[[ $(stat -c %Y tnow) -ge $before ]] && pass touch-now-value || fail touch-now-value "mtime $(stat -c %Y tnow) < $before"

# --------------------------------------------------------- truncate
head -c 100000 /dev/urandom >"$T/tr"
cp "$T/tr" tr
check truncate-grow truncate -s 3000000 tr
assert_eq truncate-grow-size 3000000 "$(stat -c %s tr)"
assert_eq truncate-grow-prefix "$(sha "$T/tr")" "$(head -c 100000 tr | sha256sum | cut -d' ' -f1)"
assert_eq truncate-grow-zeros "$(head -c 2900000 /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(tail -c 2900000 tr | sha256sum | cut -d' ' -f1)"
check truncate-shrink truncate -s 5000 tr
assert_eq truncate-shrink-size 5000 "$(stat -c %s tr)"
assert_eq truncate-shrink-content "$(head -c 5000 "$T/tr" | sha256sum | cut -d' ' -f1)" "$(sha tr)"
# shrink then grow again: the cut bytes must come back as zeros, not old data
truncate -s 100000 tr
assert_eq truncate-regrow-zeros "$(head -c 95000 /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(tail -c 95000 tr | sha256sum | cut -d' ' -f1)"
"$PY" -c "import os; fd = os.open('tr', os.O_WRONLY | os.O_TRUNC); os.close(fd)"
assert_eq o_trunc-size 0 "$(stat -c %s tr)"

# ----------------------------------------------------------- xattrs
echo x >xa
check setfattr setfattr -n user.color -v blue xa
assert_eq getfattr blue "$(getfattr --only-values -n user.color xa 2>&1)"
setfattr -n user.shape -v round xa
assert_eq listxattr "user.color user.shape" "$(getfattr -d --absolute-names xa | grep -o '^user\.[a-z]*' | sort | tr '\n' ' ' | sed 's/ $//')"
getfattr -d -m - xa 2>/dev/null | grep -q twinfs.layout && fail layout-xattr-not-listed "listed" || pass layout-xattr-not-listed
check setfattr-x setfattr -x user.color xa
assert_errno getxattr-removed ENODATA "os.getxattr('xa', 'user.color')"
assert_errno xattr-create-exists EEXIST "os.setxattr('xa', 'user.shape', b'x', os.XATTR_CREATE)"

# ------------------------------------------------------ df / du / stat
df_out=$(df -P -k "$M" | awk 'NR == 2 { print $2 }')
[[ $df_out =~ ^[0-9]+$ && $df_out -gt 0 ]] && pass df || fail df "df -P $M gave '$df_out'"
check df-inodes df -i "$M"
du_k=$(du -sk f1 | cut -f1)
want_k=$(($(stat -c %s f1) / 1024))
# a dense file occupies about its size (one twin per group)
((du_k >= want_k * 9 / 10 && du_k <= want_k * 2 + 64)) && pass du-dense || fail du-dense "du ${du_k}K for ${want_k}K of data"
check stat stat f1
assert_eq stat-type "regular file" "$(stat -c %F f1)"
assert_eq stat-dir-type "directory" "$(stat -c %F "$M/b")"

# ---------------------------------------------------------------- dd
cp "$T/src" "$T/dd"
cp "$T/src" dd
head -c 300000 /dev/urandom >"$T/patch"
dd if="$T/patch" of="$T/dd" bs=4096 seek=77 conv=notrunc status=none
check dd-notrunc dd if="$T/patch" of=dd bs=4096 seek=77 conv=notrunc status=none
assert_same_file dd-content "$T/dd" dd
check dd-bs1M dd if="$T/src" of=dd2 bs=1M status=none
assert_same_file dd-bs1M-content "$T/src" dd2
assert_eq dd-read "$(sha "$T/src")" "$(dd if=dd2 bs=256k status=none | sha256sum | cut -d' ' -f1)"

# ------------------------------------------------------------ appends
: >"$T/ap"
: >ap
for i in $(seq 1 50); do
	echo "line $i $(head -c 30 /dev/urandom | base64)" | tee -a "$T/ap" >>ap
done
assert_same_file append-shell "$T/ap" ap
"$PY" - "$T/ap2" ap2 <<'EOF'
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(200):
        os.write(fd, (b"%d:" % i) * (i % 17 + 1))
        if i == 100:
            os.lseek(fd, 0, os.SEEK_SET)   # O_APPEND ignores the position
    os.close(fd)
EOF
assert_same_file append-o_append "$T/ap2" ap2

# ------------------------------------------------------------ remount
# Everything above again through a fresh mount: no kernel cache involved.
e2e_remount && cd "$M/b" || { fail remount "cannot remount"; exit 1; }
assert_same_file remount-cp "$T/src" f1
assert_same_file remount-dd "$T/dd" dd
assert_same_file remount-append "$T/ap2" ap2
check remount-tree diff -r "$T/tree" tree
assert_eq remount-truncate "0" "$(stat -c %s tr 2>/dev/null || echo gone)"
assert_eq remount-xattr round "$(getfattr --only-values -n user.shape xa 2>&1)"
assert_eq remount-chmod "751 1234:5678" "$(stat -c '%a %u:%g' perm)"
assert_eq remount-utime "981173106.123456789" "$(stat -c %.9X newfile 2>/dev/null || echo gone)"

cd "$M" && rm -rf "$M/b"
assert_eq rm-rf-all "" "$(ls -A "$M")"

# The mount's readahead window is raised after INIT (fuse-client/tune.c):
# 4 MiB by default instead of the kernel's 128 KiB.
dev=$(awk -v p="$M" '$5 == p && / - fuse.twinfs / { d = $3 } END { print d }' /proc/self/mountinfo)
assert_eq readahead-4m 4096 "$(cat "/sys/class/bdi/$dev/read_ahead_kb" 2>&1)"
e2e_verify
e2e_end
