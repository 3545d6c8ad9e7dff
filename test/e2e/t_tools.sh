#!/usr/bin/env bash
# t_tools.sh - real tools from Debian on the mount, each with its own
# checks: dbench (a file server's mix of creates, renames, byte-range
# locks, reads, writes and deletes from four clients at once), stress-ng's
# file system stressors all running together with --verify, and bonnie++
# in fast mode (large-file I/O, then creating, statting and deleting small
# files).  Each must exit 0 and report no error; afterwards the twins of
# every stripe unit must agree.
. "$(dirname "$0")/lib.sh"
e2e_begin tools

secs=$(awk -v s="$SCALE" 'BEGIN { v = int(16 * s); if (v < 4) v = 4; print v }')
e2e_tmpdir T

# tool NAME CMD...: run CMD from / (its output in $T/NAME.out); PASS if it
# exits 0 and prints no line of error or failure.
tool() {
	local n=$1 rc
	shift
	(cd / && timeout $((secs * 4 + 180)) "$@") >"$T/$n.out" 2>&1
	rc=$?
	if ((rc != 0)); then
		fail "tools-$n" "exit $rc: $(grep -iE 'error|fail' "$T/$n.out" | head -n 3 | tr '\n' ' ')"
		tail -n 15 "$T/$n.out" | sed 's/^/#   /'
	elif grep -qiE '(^|[^_])error|fail' "$T/$n.out"; then
		fail "tools-$n" "$(grep -iE '(^|[^_])error|fail' "$T/$n.out" | head -n 3 | tr '\n' ' ')"
	else
		pass "tools-$n"
	fi
}

mkdir -p "$M/dbench" "$M/sng-meta" "$M/sng-data" "$M/bonnie"
tool dbench dbench -D "$M/dbench" -t "$secs" 4
echo "# dbench: $(grep -h Throughput "$T/dbench.out")"

# Names, links, attributes and locks; then data: every stressor at once.
tool stress-meta stress-ng --temp-path "$M/sng-meta" --timeout "${secs}s" --verify \
	--dir 1 --dentry 1 --rename 1 --link 1 --symlink 1 --chmod 1 --chown 1 \
	--xattr 1 --utime 1 --dirdeep 1 --filename 1 --getdent 1 --mknod 1 \
	--lockf 1 --fcntl 1 --flock 1 --lockofd 1 --locka 1
tool stress-data stress-ng --temp-path "$M/sng-data" --timeout "${secs}s" --verify \
	--hdd 1 --hdd-bytes 16m --seek 1 --fallocate 1 --fpunch 1 --fsize 1 \
	--io 1 --iomix 1 --sync-file 1 --copy-file 1 --sendfile 1 --splice 1 \
	--msync 1 --readahead 1
# bonnie++ wants a file of twice the RAM it is told (-r) it has.
mb=$(awk -v s="$SCALE" 'BEGIN { v = int(128 * s); if (v < 16) v = 16; print v }')
tool bonnie bonnie++ -d "$M/bonnie" -s "$mb" -r $((mb / 2)) -n 1:4096:0:2 -u root -f -q
assert_eq tools-nothing-left "" "$(ls -A "$M/sng-meta" "$M/sng-data" "$M/bonnie" | grep -v -e '^$' -e ':$')"
e2e_verify
e2e_end
