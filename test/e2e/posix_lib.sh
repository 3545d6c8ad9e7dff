# posix_lib.sh - run the POSIX conformance suite (test/posix) on a
# directory of the mount, with a fresh ext4 loop image as the oracle;
# sourced by t_posix.sh and t_wbcache.sh after lib.sh and e2e_begin.
#
# posix_suite PREFIX TARGET_DIR [EXTRA_ALLOWED]
#   Every case that matches ext4 is a PASS PREFIX/id; a case listed in
#   test/posix/known-gaps.txt that differs is reported as KNOWN (not
#   counted); any other difference is a FAIL, and so is a known gap that
#   now matches (remove it from the list).  EXTRA_ALLOWED: a file of more
#   accepted alternatives (run.sh -a), beside test/posix/allowed.txt.
#   POSIX_ONLY=SUBSTRING runs only the cases whose id contains it.
POSIX_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POSIXTEST=${POSIXTEST:-$TWINFS_BUILD_DIR/test/posix/posixtest}

# The EXIT trap while the oracle may be mounted: unmount it, then
# e2e_cleanup with the script's own status.
posix_exit() {
	local rc=$?
	mountpoint -q "$POSIX_ORACLE" && umount "$POSIX_ORACLE"
	(exit "$rc")
	e2e_cleanup
}

posix_suite() {
	local prefix=$1 target=$2 extra=${3:-} T oracle gaps=$POSIX_HERE/posix/known-gaps.txt
	local word rest id
	e2e_tmpdir T
	oracle=$T/ext4
	mkdir -p "$oracle" "$target"
	POSIX_ORACLE=$oracle
	trap posix_exit EXIT
	# 4 KiB blocks (a 4095-byte symlink) and ea_inode (64 KiB xattr values).
	if ! { truncate -s 1G "$T/ext4.img" && mkfs.ext4 -q -F -b 4096 -O ea_inode "$T/ext4.img" &&
		mount -o loop "$T/ext4.img" "$oracle"; }; then
		fail "$prefix-oracle" "cannot make the ext4 oracle"
		return
	fi
	[[ -x $POSIXTEST ]] || { umount "$oracle"; fail "$prefix-build" "no $POSIXTEST"; return; }
	cat "$POSIX_HERE/posix/allowed.txt" ${extra:+"$extra"} >"$T/allowed"
	POSIXTEST=$POSIXTEST "$POSIX_HERE/posix/run.sh" -a "$T/allowed" \
		${POSIX_ONLY:+-k "$POSIX_ONLY"} "$oracle" "$target" >"$T/out" 2>&1
	umount "$oracle"
	known() { awk -F'\t' -v id="$1" '!/^#/ && $1 == id { f = 1 } END { exit !f }' "$gaps"; }
	while read -r word rest; do
		id=${rest%%:*}
		case $word in
		PASS)
			if known "$id"; then fail "$prefix/$id" "matches ext4 now: remove it from known-gaps.txt"
			else pass "$prefix/$id"; fi ;;
		ALLOW) pass "$prefix/$id (allowed alternative)" ;;
		FAIL)
			if known "$id"; then echo "# KNOWN $word $rest" | cut -c1-200
			else fail "$prefix/$id" "${rest#*: }"; fi ;;
		esac
	done <"$T/out"
	grep -E '^posix:' "$T/out" | sed 's/^/# /'
	grep -qE '^posix: [0-9]+ cases' "$T/out" || { fail "$prefix-run" "no summary"; tail -n 20 "$T/out" | sed 's/^/# /'; }
}
