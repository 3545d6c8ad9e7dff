#!/usr/bin/env bash
# t_posix.sh - the POSIX conformance suite (test/posix) on the mount, with a
# fresh ext4 loop image as the oracle.  Every case that matches ext4 is a
# PASS; a case listed in test/posix/known-gaps.txt that differs is reported
# as KNOWN (not counted); any other difference is a FAIL, and so is a known
# gap that now matches (remove it from the list).  POSIX_ONLY=SUBSTRING
# runs only the cases whose id contains it.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")/.." && pwd)
GAPS=$HERE/posix/known-gaps.txt
POSIXTEST=${POSIXTEST:-$TWINFS_BUILD_DIR/test/posix/posixtest}
# Mounted like the ext4 oracle (dev): device nodes stored in TwinFS open
# the client's devices (mknod/chr_open).  Mounts are nodev by default.
export TWINFS_MOUNT_OPTS=${TWINFS_MOUNT_OPTS-allow_other,dev}
e2e_begin posix

e2e_tmpdir T
ORACLE=$T/ext4
umount_oracle() { mountpoint -q "$ORACLE" && umount "$ORACLE"; }
trap 'umount_oracle; e2e_cleanup' EXIT
mkdir -p "$ORACLE" "$M/posix"
# 4 KiB blocks (a 4095-byte symlink) and ea_inode (64 KiB xattr values).
if ! { truncate -s 1G "$T/ext4.img" && mkfs.ext4 -q -F -b 4096 -O ea_inode "$T/ext4.img" &&
	mount -o loop "$T/ext4.img" "$ORACLE"; }; then
	fail posix-oracle "cannot make the ext4 oracle"
	e2e_end
fi
[[ -x $POSIXTEST ]] || { fail posix-build "no $POSIXTEST"; e2e_end; }

# POSIX_ONLY=SUBSTRING runs only the cases whose id contains it.
POSIXTEST=$POSIXTEST "$HERE/posix/run.sh" -a "$HERE/posix/allowed.txt" \
	${POSIX_ONLY:+-k "$POSIX_ONLY"} "$ORACLE" "$M/posix" >"$T/out" 2>&1
known() { awk -F'\t' -v id="$1" '!/^#/ && $1 == id { f = 1 } END { exit !f }' "$GAPS"; }
while read -r word rest; do
	id=${rest%%:*}
	case $word in
	PASS)
		if known "$id"; then fail "posix/$id" "matches ext4 now: remove it from known-gaps.txt"
		else pass "posix/$id"; fi ;;
	ALLOW) pass "posix/$id (allowed alternative)" ;;
	FAIL)
		if known "$id"; then echo "# KNOWN $word $rest" | cut -c1-200
		else fail "posix/$id" "${rest#*: }"; fi ;;
	esac
done <"$T/out"
grep -E '^posix:' "$T/out" | sed 's/^/# /'
grep -qE '^posix: [0-9]+ cases' "$T/out" || { fail posix-run "no summary"; tail -n 20 "$T/out" | sed 's/^/# /'; }
e2e_end
