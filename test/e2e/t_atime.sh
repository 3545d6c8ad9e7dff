#!/usr/bin/env bash
# t_atime.sh - the atime policy and times across mounts.  The default mount
# is relatime: a read updates an atime older than mtime or ctime (or a day
# old), then not again; the atime travels to mgrd with the close, so the
# other mount sees it, as it sees mtime and ctime after a write there.
# strictatime updates on every read, noatime never.  The other atime
# options of mount(8) are accepted, and a mount prints nothing.
. "$(dirname "$0")/lib.sh"
e2e_begin atime
M2=$TWINFS_RUN_DIR/mnt2
M3=$TWINFS_RUN_DIR/mnt3
M4=$TWINFS_RUN_DIR/mnt4
lc mount "$M2" >/dev/null || { fail atime-mount2 "second mount failed"; exit 1; }
TWINFS_MOUNT_OPTS=allow_other,strictatime lc mount "$M3" >/dev/null ||
	{ fail atime-mount3 "strictatime mount failed"; exit 1; }
TWINFS_MOUNT_OPTS=allow_other,noatime lc mount "$M4" >/dev/null ||
	{ fail atime-mount4 "noatime mount failed"; exit 1; }
ATTR_WAIT=1.2
times() { stat -c '%x|%y|%z' "$1"; }
atime() { stat -c '%X' "$1"; }
OLD=1577836800 # 2020-01-01, older than mtime and a day

echo data >f
touch -a -d @$OLD f
assert_eq atime-set-old $OLD "$(atime f)"
before=$(date +%s)
cat f >/dev/null
a1=$(atime f)
((a1 >= before)) && pass relatime-first-read || fail relatime-first-read "atime $a1 < $before"
sleep "$ATTR_WAIT"
assert_eq relatime-seen-on-other-mount "$(times f)" "$(times "$M2/f")"
cat f >/dev/null
cat "$M2/f" >/dev/null
sleep "$ATTR_WAIT"
assert_eq relatime-second-read-keeps $a1 "$(atime f)"

# mtime and ctime of a write on one mount, seen on the other after close.
sleep 1
echo more >>"$M2/f"
sleep "$ATTR_WAIT"
assert_eq times-after-write-seen "$(times "$M2/f")" "$(times f)"
[[ $(stat -c %Y f) -gt $a1 ]] && pass mtime-advanced || fail mtime-advanced "mtime not after the read"
# The write made atime <= mtime: the next read updates it again.
cat "$M2/f" >/dev/null
sleep "$ATTR_WAIT"
a2=$(atime f)
((a2 > a1)) && pass relatime-read-after-write || fail relatime-read-after-write "atime $a2 <= $a1"
assert_eq relatime-after-write-seen "$(times "$M2/f")" "$(times f)"
# A chmod changes ctime only.
chmod 600 f
sleep "$ATTR_WAIT"
assert_eq ctime-seen "$(times f)" "$(times "$M2/f")"

# strictatime: every read updates.
sleep 1
cat "$M3/f" >/dev/null
s1=$(atime "$M3/f")
sleep 1.1
cat "$M3/f" >/dev/null
s2=$(atime "$M3/f")
((s2 > s1)) && pass strictatime-every-read || fail strictatime-every-read "atime $s2 <= $s1"

# noatime: never.
touch -a -d @$OLD f
cat "$M4/f" >/dev/null
sleep "$ATTR_WAIT"
assert_eq noatime-keeps $OLD "$(atime f)"
assert_eq noatime-mount-flag 1 "$(awk -v p="$M4" '$2 == p && $4 ~ /(^|,)noatime(,|$)/ { n++ } END { print n + 0 }' /proc/mounts)"

# The atime options of an fstab line written for ext4 are accepted
# (nodiratime: no directory gets atime updates here anyway), and a mount
# that succeeds prints nothing: twinfs run as mount.fuse3 runs it, without
# -f, whose output scripts check.
M5=$TWINFS_RUN_DIR/mnt5
mkdir -p "$M5"
E2E_FSMOUNTS+=("$M5")
out=$("$TWINFS_BUILD_DIR/fuse-client/twinfs" "127.0.0.1:$TWINFS_PORT" "$M5" \
	-o "cluster=$TWINFS_CLUSTER,allow_other,noatime,nodiratime,diratime,norelatime,lazytime,nolazytime,atime" 2>&1)
assert_eq atime-options-mount 0 "$?"
assert_eq mount-prints-nothing "" "$out"
touch -a -d @$OLD f
cat "$M5/f" >/dev/null
sleep "$ATTR_WAIT"
a5=$(atime f)
((a5 > OLD)) && pass atime-after-noatime || fail atime-after-noatime "atime $a5: atime did not undo noatime"
mkdir -p d && touch -a -d @$OLD d
ls "$M5/d" >/dev/null
sleep "$ATTR_WAIT"
assert_eq nodiratime-dir-keeps $OLD "$(atime d)"
fusermount3 -u "$M5" || fail atime-umount5 "unmount of $M5 failed"

cd /
for m in "$M2" "$M3" "$M4"; do
	lc umount "$m" >/dev/null || fail atime-umount "unmount of $m failed"
done
e2e_end
