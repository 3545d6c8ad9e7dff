#!/usr/bin/env bash
# t_acl.sh - POSIX ACLs with the ordinary tools: setfacl/getfacl, default
# ACLs inherited by new files and directories, chmod updating the mask,
# cp -a preserving ACLs; the same commands run in a local ext4 directory
# (the oracle) and their getfacl output must match byte for byte.  Then
# enforcement as uid 65534, and from a second mount of the cluster (the ACL
# lives at mgrd: one set on one mount is enforced on the other).
. "$(dirname "$0")/lib.sh"
e2e_begin acl
e2e_tmpdir T
ORACLE=$T/ext4
umount_oracle() { mountpoint -q "$ORACLE" && umount "$ORACLE"; }
trap 'umount_oracle; e2e_cleanup' EXIT
mkdir -p "$ORACLE"
if ! { truncate -s 64M "$T/ext4.img" && mkfs.ext4 -q -F "$T/ext4.img" &&
	mount -o loop "$T/ext4.img" "$ORACLE"; }; then
	fail acl-oracle "cannot make the ext4 oracle"
	e2e_end
fi
NOBODY=65534
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }

# The same scenario in a directory; prints getfacl of everything it made
# (relative names, numeric ids, so both sides print the same bytes).
scenario() (
	cd "$1" || exit 1
	umask 022
	mkdir top && chmod 755 top
	echo data >top/f && chmod 640 top/f
	setfacl -m u:$NOBODY:r,g:$NOBODY:rw top/f
	setfacl -m m::r top/f                  # mask narrows the named entries
	chmod 660 top/f                        # chmod sets the mask back to rw
	setfacl -d -m u:$NOBODY:rwx,o::- top   # default ACL
	umask 077                              # ignored under a default ACL
	echo new >top/inherited
	mkdir top/subdir
	mkfifo top/fifo
	umask 022
	ln -s f top/link
	echo min >top/minimal && chmod 600 top/minimal
	setfacl -m u::rw,g::r,o::r top/minimal # minimal: only the mode changes
	echo x >top/f2
	setfacl -m u:$NOBODY:rwx top/f2 && setfacl -b top/f2   # removed again
	cp -a top copy
	find top copy | sort | xargs getfacl -n -p 2>&1
	stat -c '%n %a' top/* copy/* | sort
)

scenario "$ORACLE" >"$T/ext4.out" 2>&1
scenario "$M" >"$T/twinfs.out" 2>&1
if cmp -s "$T/ext4.out" "$T/twinfs.out"; then
	pass acl-getfacl-same-as-ext4
else
	fail acl-getfacl-same-as-ext4 "getfacl output differs from ext4"
	diff "$T/ext4.out" "$T/twinfs.out" | head -n 30 | sed 's/^/#   /'
fi
# The scenario must have made ACLs at all (else both sides print little).
n=$(grep -c "^user:$NOBODY:" "$T/twinfs.out")
((n >= 8)) && pass acl-scenario-has-acls || fail acl-scenario-has-acls "only $n named entries"

# Enforcement: uid 65534 reads through its named entry only.
echo secret >priv
chmod 600 priv
assert_eq acl-denied-without-entry "" "$(as_nobody cat priv 2>/dev/null)"
setfacl -m u:$NOBODY:r priv
assert_eq acl-granted-by-entry secret "$(as_nobody cat priv 2>&1)"
setfacl -x u:$NOBODY priv
assert_eq acl-revoked "" "$(as_nobody cat priv 2>/dev/null)"

# Two mounts: an ACL set (and changed) on one is enforced on the other.
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail acl-mount2 "second mount failed"; exit 1; }
echo shared >shared
chmod 600 shared
assert_eq acl-mount2-denied "" "$(as_nobody cat "$M2/shared" 2>/dev/null)"
setfacl -m u:$NOBODY:r shared
sleep 1.2 # attribute timeout of the second mount
assert_eq acl-mount2-granted shared "$(as_nobody cat "$M2/shared" 2>&1)"
assert_eq acl-mount2-getfacl "user:$NOBODY:r--" \
	"$(getfacl -n -p "$M2/shared" 2>/dev/null | grep "^user:$NOBODY:")"
chmod 600 "$M2/shared" # the mask drops to --- on the other side
sleep 1.2
assert_eq acl-mount2-chmod-mask-enforced "" "$(as_nobody cat shared 2>/dev/null)"
assert_eq acl-mount2-chmod-mask "mask::---" "$(getfacl -n -p shared 2>/dev/null | grep '^mask::')"

# kill -9 of mgrd: the journal replay rebuilds ACLs and the modes they set.
before=$(cd "$M" && find top copy shared priv | sort | xargs getfacl -n -p 2>&1)
lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null || fail acl-mgrd-restart "kill/start failed"
e2e_wait_healthy 60 || fail acl-mgrd-healthy "cluster not healthy after the restart"
sleep 1.2 # attribute timeout: ask the restarted mgrd
after=$(cd "$M" && find top copy shared priv | sort | xargs getfacl -n -p 2>&1)
assert_eq acl-survive-mgrd-kill "$before" "$after"
assert_eq acl-enforced-after-restart data "$(as_nobody cat "$M2/top/f" 2>&1)"
cd /
lc umount "$M2" >/dev/null && pass acl-umount2 || fail acl-umount2 "unmount failed"
e2e_end
