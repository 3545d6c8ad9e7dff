#!/usr/bin/env bash
# t_mgrd_space.sh - mgrd's own disk fills up.
#
# mgrd journals every change, and a failed append is fatal: with its disk
# full mgrd exited at the next change, and again after every restart, rm
# included, so the whole namespace was down.  Now mgrd keeps a 64 MiB
# reserve: below it, creates, links and xattrs fail with ENOSPC before they
# are applied, removals go on, and a snapshot compacts the log.
# mgrd's state directory is a small file system of its own, filled until
# 66 MiB are left; then:
#   1. creates fail with ENOSPC (not EIO), and mgrd keeps running: the
#      directory lists every file created, a file's data can be written
#      and read, mkdir or link onto a taken name is still EEXIST, mgrd's
#      log names its directory and the reserve;
#   2. rm -rf of what was created succeeds, and creates work again soon
#      after (the snapshot compacted the log);
#   3. after a kill -9 of mgrd and a restart, the namespace is the one
#      acknowledged: the removed directory is gone, the new one is there.
. "$(dirname "$0")/lib.sh"

e2e_before_up() {
	local d=$TWINFS_RUN_DIR/mgrd avail
	e2e_small_fs "$d" 100M || return 1
	avail=$(df -k --output=avail "$d" | tail -1 | tr -d ' ')
	fallocate -l $(((avail - 66 * 1024) * 1024)) "$d/filler"
}
# Without the reserve mgrd exits: fail in seconds, not after 120 s per call.
export TWINFS_MGR_TIMEOUT=10s
e2e_begin mgrd_space

# create.py DIR MAX: create empty files in DIR until one fails; prints
# "N ERRNO" (N files created) or "N none".  2 MiB of mgrd's log hold about
# 5,000 creates; without the reserve all 20,000 fit.
cat >"$TWINFS_RUN_DIR/create.py" <<'EOF'
import errno, os, sys
d, most = sys.argv[1], int(sys.argv[2])
n = 0
try:
    os.makedirs(d, exist_ok=True)
    for i in range(most):
        os.close(os.open(os.path.join(d, 'a-file-with-a-long-name-%06d' % i),
                         os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
        n += 1
except OSError as e:
    print(n, errno.errorcode.get(e.errno, e.errno))
    sys.exit(0)
print(n, 'none')
EOF
mgrd_pid=$(cat "$TWINFS_RUN_DIR/pids/mgrd.pid")

# 1. Fill.
read -r n err < <("$PY" "$TWINFS_RUN_DIR/create.py" "$M/d1" 20000)
echo "# $n files created, then $err"
assert_eq mgrd-space-enospc ENOSPC "$err"
check mgrd-space-some-created test "$n" -gt 100
check mgrd-space-mgrd-alive kill -0 "$mgrd_pid"
assert_eq mgrd-space-listing "$n" "$(ls "$M/d1" | wc -l)"
echo "written while mgrd's disk is full" >"$M/d1/a-file-with-a-long-name-000000" &&
	assert_eq mgrd-space-data-path "written while mgrd's disk is full" \
		"$(cat "$M/d1/a-file-with-a-long-name-000000")" ||
	fail mgrd-space-data-path "write to an existing file failed"
# A taken name is EEXIST whatever the space (it was ENOSPC): sent to mgrd
# directly, as by a client whose kernel had no entry for it (the kernel
# answers EEXIST itself for a name it knows).
names=$("$PY" "$E2E_DIR/twire.py" names 127.0.0.1 "$TWINFS_PORT" \
	"$TWINFS_CLUSTER" "$(stat -c %i "$M")" d1 \
	"$(stat -c %i "$M/d1/a-file-with-a-long-name-000001")" 2>&1)
assert_eq mgrd-space-taken-name-eexist "mkdir -17 link -17" "$(echo $names)"
mkdir "$M/d1/new" 2>"$TWINFS_RUN_DIR/mkdir.err"
grep -q "No space left" "$TWINFS_RUN_DIR/mkdir.err" &&
	pass mgrd-space-mkdir-new-enospc ||
	fail mgrd-space-mkdir-new-enospc "$(cat "$TWINFS_RUN_DIR/mkdir.err")"
grep -q "mgrd/* has [0-9]* KiB free, less than mgrd keeps .*: creates" \
	"$TWINFS_RUN_DIR/logs/mgrd.log" && pass mgrd-space-logged ||
	fail mgrd-space-logged "no such line in mgrd's log"

# 2. Removals go on; then creates work again.
check mgrd-space-rm rm -rf "$M/d1"
t0=$(now_ms)
while :; do
	read -r n2 err2 < <("$PY" "$TWINFS_RUN_DIR/create.py" "$M/d2" 100)
	[[ $err2 == none ]] && break
	(($(now_ms) - t0 > 15000)) && break
	rm -rf "$M/d2"
	sleep 0.5
done
echo "# after the rm: $n2 files created ($err2), $((($(now_ms) - t0))) ms"
assert_eq mgrd-space-creates-again "100 none" "$n2 $err2"

# 3. The acknowledged namespace survives a crash of mgrd.
lc kill-mgrd >/dev/null
lc start-mgrd >/dev/null
t0=$(now_ms)
until ctl -t 1000 status >/dev/null 2>&1 || (($(now_ms) - t0 > 20000)); do
	sleep 0.2
done
check mgrd-space-restarted ctl -t 1000 status
check mgrd-space-d1-gone test ! -e "$M/d1"
assert_eq mgrd-space-d2-kept 100 "$(ls "$M/d2" | wc -l)"
e2e_end
