#!/usr/bin/env bash
# t_statahead.sh - lookups answered from listings fetched ahead
# (fuse-client/statahead.c), on a second mount whose kernel caches are
# dropped between the steps:
#   - every stat of a cold directory gives the name's own inode, size and
#     mode, byte for byte what the first mount sees;
#   - a change this mount makes (a write, a chmod) is seen at once, even of
#     names in a listing fetched before it;
#   - a file another mount creates is found at once (no negative answer);
#   - a change another mount makes is seen once the 1 s timeout passed;
#   - a file another mount deleted can be created again at once;
#   - this mount's removals take out their names only: files it wrote,
#     looked up again and removed one by one, a file with two names, a
#     subdirectory, seen right on both mounts;
#   - the client says at unmount how many lookups it answered ahead.
. "$(dirname "$0")/lib.sh"
e2e_begin statahead
N=$(scale 400)
((N < 50)) && N=50
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail statahead-mount2 "second mount failed"; exit 1; }
pass statahead-mount2
LOG2=$TWINFS_RUN_DIR/logs/mount-$(echo -n "$M2" | md5sum | cut -c1-12).log

# N files of sizes 0..N-1, every third one mode 600, made on the first mount.
mkdir d
python3 - "$M/d" "$N" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    p = "%s/f%05d" % (d, i)
    with open(p, "wb") as f:
        f.write(b"x" * i)
    if i % 3 == 0:
        os.chmod(p, 0o600)
EOF
ref=$(cd "$M/d" && stat -c '%n %i %s %a' f* | sort)

# stat NAMES on the second mount after dropping caches, as "name ino size mode"
stat2() {
	drop_caches
	python3 - "$M2/d" "$@" <<'EOF'
import os, sys
d = sys.argv[1]
for n in sys.argv[2:]:
    try:
        st = os.stat("%s/%s" % (d, n))
        print(n, st.st_ino, st.st_size, "%o" % (st.st_mode & 0o7777))
    except OSError as e:
        print(n, "error", e.strerror)
EOF
}

names=$(cd "$M/d" && ls)
# shellcheck disable=SC2086
got=$(stat2 $names | sort)
assert_eq cold-stats-match "$ref" "$got"

# This mount's own changes, just after a listing was fetched: write f00007
# (size 7 -> 1007) and chmod f00008, then stat them cold.
drop_caches
got=$(python3 - "$M2/d" <<'EOF'
import os, sys
d = sys.argv[1]
for i in range(6):                  # misses, then hits: a listing is held
    os.stat("%s/f%05d" % (d, i))
with open("%s/f00007" % d, "ab") as f:
    f.write(b"y" * 1000)
os.chmod("%s/f00008" % d, 0o640)
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3")
print(os.stat("%s/f00007" % d).st_size, "%o" % (os.stat("%s/f00008" % d).st_mode & 0o7777))
EOF
)
assert_eq own-changes-seen "1007 640" "$got"

# A file the first mount creates is found at once by the second, whose
# listing of d is complete and fresh.
got=$(python3 - "$M/d" "$M2/d" <<'EOF'
import os, sys
d1, d2 = sys.argv[1], sys.argv[2]
for i in range(10):
    os.stat("%s/f%05d" % (d2, i))
open("%s/new" % d1, "w").close()
print("found" if os.path.exists("%s/new" % d2) else "missing")
EOF
)
assert_eq other-create-found-at-once found "$got"

# A chmod on the first mount shows on the second within the timeout.
stat2 f00010 f00011 f00012 >/dev/null
chmod 604 "$M/d/f00013"
sleep 1.2
assert_eq other-chmod-seen-after-timeout "f00013 604" \
	"$(stat2 f00013 | awk '{print $1, $4}')"

# Renamed and removed names on the first mount are gone on the second.
mv "$M/d/f00020" "$M/d/renamed"
rm "$M/d/f00021"
sleep 1.2
assert_eq other-rename-seen "f00020 error No such file or directory;f00021 error No such file or directory;renamed 20" \
	"$(stat2 f00020 f00021 renamed | awk '{ if ($2 == "error") print; else print $1, $3 }' | paste -sd';')"

# A name the first mount deletes, written with O_CREAT on the second
# while its listing still holds the name: the stale answer costs mgrd's
# ESTALE, the kernel looks again, and a new file is made.
got=$(python3 - "$M/d" "$M2/d" <<'EOF'
import os, sys
d1, d2 = sys.argv[1], sys.argv[2]
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3")
for i in range(30, 40):
    os.stat("%s/f%05d" % (d2, i))
os.unlink("%s/f%05d" % (d1, 45))
with open("%s/f%05d" % (d2, 45), "w") as f:
    f.write("hello")
print(open("%s/f%05d" % (d2, 45)).read())
EOF
)
assert_eq create-over-name-deleted-elsewhere hello "$got"
assert_eq create-seen-by-deleter hello "$(cat "$M/d/f00045" 2>&1)"

# This mount's removals void no listing, only their names: files made
# and written by the second mount (its kernel holds their inodes), their
# entries expired, then looked up again and removed one by one; a file
# with two names and a subdirectory, removed beside a listing in use.
K=$(( N / 4 > 20 ? N / 4 : 20 ))
got=$(python3 - "$M2/d" "$K" <<'EOF'
import os, sys, time
d, k = sys.argv[1], int(sys.argv[2])
for i in range(k):
    with open("%s/g%05d" % (d, i), "wb") as f:
        f.write(b"z" * (i + 3))
os.link("%s/g00000" % d, "%s/hard" % d)
os.mkdir("%s/sub" % d)
time.sleep(1.2)                     # the kernel's entries expire
out = []
sizes = [os.stat("%s/g%05d" % (d, i)).st_size for i in range(k)]
out.append("sizes-ok" if sizes == [i + 3 for i in range(k)] else "sizes %r" % sizes)
nl = os.stat(d).st_nlink
os.unlink("%s/g00000" % d)          # "hard" keeps the inode
os.rmdir("%s/sub" % d)
out.append("links %d" % os.stat("%s/hard" % d).st_nlink)
out.append("dir-nlink %+d" % (os.stat(d).st_nlink - nl))
for i in range(1, k // 2):          # stat, unlink, stat: the unlink loop
    p = "%s/g%05d" % (d, i)
    os.stat(p)
    os.unlink(p)
    out.append("left" if os.path.exists(p) else "")
print(" ".join(x for x in out if x))
EOF
)
assert_eq own-removals-seen "sizes-ok links 1 dir-nlink -1" "$got"
assert_eq own-removals-on-other-mount $((K - K / 2)) \
	"$(cd "$M/d" && ls | grep -c '^g')"
assert_eq hard-link-content-after-unlink "zzz" "$(cat "$M/d/hard")"

lc umount "$M2" >/dev/null
line=$(grep -o 'statahead: [0-9]* of [0-9]* lookups' "$LOG2" | tail -n 1)
hits=$(echo "$line" | awk '{print $2}')
echo "# $line"
if [[ -n $hits ]] && ((hits >= N / 2)); then
	pass statahead-used
else
	fail statahead-used "expected >= $((N / 2)) lookups answered ahead: '$line'"
fi

# Off with -o nostatahead: the same stats, all from mgrd, and no line.
before=$(grep -c 'statahead: ' "$LOG2")
TWINFS_MOUNT_OPTS=allow_other,nostatahead lc mount "$M2" >/dev/null ||
	fail statahead-mount-off "mount with nostatahead failed"
names=$(cd "$M/d" && ls)
ref=$(cd "$M/d" && stat -c '%n %i %s %a' -- * | sort)
# shellcheck disable=SC2086
assert_eq off-stats-match "$ref" "$(stat2 $names | sort)"
lc umount "$M2" >/dev/null
assert_eq off-nothing-ahead "$before" "$(grep -c 'statahead: ' "$LOG2")"
e2e_end
