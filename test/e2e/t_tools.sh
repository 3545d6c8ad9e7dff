#!/usr/bin/env bash
# t_tools.sh - real tools from Debian on the mount, each with its own
# checks: dbench (a file server's mix of creates, renames, byte-range
# locks, reads, writes and deletes from four clients at once), stress-ng's
# file system stressors all running together with --verify, and bonnie++
# in fast mode (large-file I/O, then creating, statting and deleting small
# files); stress-ng also as an unprivileged user, and through the death
# and return of a twin.  Each must exit 0 and report no error; afterwards
# the twins of every stripe unit must agree.
. "$(dirname "$0")/lib.sh"
e2e_begin tools

secs=$(awk -v s="$SCALE" 'BEGIN { v = int(16 * s); if (v < 4) v = 4; print v }')
e2e_tmpdir T

# tool_run NAME CMD...: run CMD from / (its output in $T/NAME.out), with
# its exit status; tool_judge NAME STATUS: PASS if it is 0 and CMD printed
# nothing BAD (below).  tool NAME CMD...: both.
tool_run() {
	local n=$1
	shift
	(cd / && timeout $((secs * 4 + 180)) "$@") >"$T/$n.out" 2>&1
}
# Words that mean trouble in a tool's output (whole words: "error", "fail",
# "failed", "failure"), outside stress-ng's "info:" lines ("some I/O tests
# may fail" is one), bonnie++'s CSV summary line (it holds the host
# name) and dbench's "failed to create barrier semaphore" (its SysV
# semaphore for starting the clients together, not the mount: dbench says
# so when semget returns id 0, which is valid, and goes on using it; a
# real failure says "failed to initialize" and exits 1; seen once in a
# whole e2e run).  A stressor skipped as unsupported fails too: it tested
# nothing.
BAD='\<(error|errors|fail|failed|failure)\>'
tool_judge() {
	local n=$1 rc=$2 bad
	bad=$(grep -v -e ' info: ' -e '^[0-9.]*,[0-9a-z.]*,' \
		-e '^failed to create barrier semaphore *$' "$T/$n.out" | grep -iE "$BAD")
	bad+=$'\n'$(grep -h 'skipping stressor' "$T/$n.out")
	bad=$(grep -v '^$' <<<"$bad")
	if ((rc != 0)); then
		fail "tools-$n" "exit $rc: $(head -n 3 <<<"$bad" | tr '\n' ' ')"
		tail -n 15 "$T/$n.out" | sed 's/^/#   /'
	elif [[ -n $bad ]]; then
		fail "tools-$n" "$(head -n 3 <<<"$bad" | tr '\n' ' ')"
	else
		pass "tools-$n"
	fi
}
tool() {
	tool_run "$@"
	tool_judge "$1" $?
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
# Permission checks as an unprivileged user (access verifies access(2)
# against each mode it sets).
mkdir -p "$M/sng-nobody" && chown 65534:65534 "$M/sng-nobody"
tool stress-nobody setpriv --reuid=65534 --regid=65534 --clear-groups \
	stress-ng --temp-path "$M/sng-nobody" --timeout "${secs}s" --verify \
	--access 1 --chmod 1 --touch 1 --open 1 --chdir 1 --rename 1 --hdd 1 --hdd-bytes 4m
# The data stressors again while a twin dies (kill -9) and comes back:
# every read they verify must still give what they wrote, and no fsync or
# lseek may fail on the way (stress-ng lets those errors pass, so the
# client's log is read: the map moving on must not end them).
fsecs=$((secs < 12 ? 12 : secs))
mkdir -p "$M/sng-twin"
log=$TWINFS_RUN_DIR/logs/mount.log
lines0=$(wc -l <"$log")
tool_run stress-twin stress-ng --temp-path "$M/sng-twin" --timeout "${fsecs}s" --verify \
	--hdd 1 --hdd-bytes 16m --seek 1 --fallocate 1 --fpunch 1 --iomix 1 \
	--copy-file 1 --dir 1 --rename 1 --xattr 1 --lockf 1 --flock 1 &
bgpid=$!
sleep $((fsecs / 4))
lc kill-iod 2 >/dev/null || fail tools-twin-kill "kill-iod 2 failed"
el=$(wait_state 2 '^down' 30000) || fail tools-twin-down "iod 2: $el"
sleep $((fsecs / 4))
lc start-iod 2 >/dev/null || fail tools-twin-start "start-iod 2 failed"
wait $bgpid
tool_judge stress-twin $?
el=$(wait_state 2 '^up$' 120000) && pass tools-twin-resynced ||
	fail tools-twin-resynced "iod 2: $el"
echo "# iod 2 up again $el ms after the stressors ended"
bad=$(tail -n +"$((lines0 + 1))" "$log" | grep -E '(fsync|lseek) ino [0-9]+: ')
[[ -z $bad ]] && pass tools-twin-no-sync-errors ||
	fail tools-twin-no-sync-errors "$(head -n 3 <<<"$bad" | tr '\n' ' ')"
# bonnie++ wants a file of twice the RAM it is told (-r) it has.
mb=$(awk -v s="$SCALE" 'BEGIN { v = int(128 * s); if (v < 16) v = 16; print v }')
tool bonnie bonnie++ -d "$M/bonnie" -s "$mb" -r $((mb / 2)) -n 1:4096:0:2 -u root -f -q
assert_eq tools-nothing-left "" "$(ls -A "$M"/sng-* "$M/bonnie" | grep -v -e '^$' -e ':$')"
# Every binary answers --help (usage on stdout, exit 0) and --version
# (name, the project's version and the protocol's).
ver=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$REPO/meson.build")
for b in fuse-client/twinfs mgrd/twinfs-mgrd iod/twinfs-iod cli/twinfsctl; do
	n=${b#*/}
	out=$("$TWINFS_BUILD_DIR/$b" --help 2>/dev/null) && [[ $out == *sage* ]] &&
		pass "tools-$n-help" || fail "tools-$n-help" "$(head -n 1 <<<"$out")"
	out=$("$TWINFS_BUILD_DIR/$b" --version 2>&1)
	[[ $out =~ ^$n\ $ver\ \(protocol\ [0-9]+\) ]] && pass "tools-$n-version" ||
		fail "tools-$n-version" "'$(head -n 1 <<<"$out")', want '$n $ver (protocol N)'"
done
# A polling budget past its limit is refused before anything is mounted
# (docs/ARCHITECTURE.md "Waiting without sleeping").
e2e_tmpdir spin_mp
out=$("$TWINFS_BUILD_DIR/fuse-client/twinfs" -o spin_us=1001 127.0.0.1:1 "$spin_mp" 2>&1) &&
	fail tools-twinfs-spin-limit "accepted spin_us=1001" ||
	assert_eq tools-twinfs-spin-limit "twinfs: bad spin_us=1001 (0..1000 microseconds)" "$out"
out=$("$TWINFS_BUILD_DIR/fuse-client/twinfs" -o mgr_spin_us=5000 127.0.0.1:1 "$spin_mp" 2>&1) &&
	fail tools-twinfs-mgr-spin-limit "accepted mgr_spin_us=5000" ||
	assert_eq tools-twinfs-mgr-spin-limit "twinfs: bad mgr_spin_us=5000 (0..1000 microseconds)" "$out"
# Refusals after the options are parsed free what was made too (under the
# sanitizer build a leak would add its report to the output).
out=$("$TWINFS_BUILD_DIR/fuse-client/twinfs" 127.0.0.1:1 2>&1) &&
	fail tools-twinfs-no-mountpoint "mounted without a mount point" ||
	assert_eq tools-twinfs-no-mountpoint "twinfs: missing MOUNTPOINT" "$out"
out=$("$TWINFS_BUILD_DIR/fuse-client/twinfs" -o no_such_option 127.0.0.1:1 "$spin_mp" 2>&1) &&
	fail tools-twinfs-unknown-option "accepted -o no_such_option" ||
	assert_eq tools-twinfs-unknown-option "fuse: unknown option(s): \`-o no_such_option'" "$out"
e2e_verify
e2e_end
