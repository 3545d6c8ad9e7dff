#!/usr/bin/env bash
# t_mgrd_follow.sh - everyone follows the active mgrd (proto/FORMAT.md
# "mgrd pair"), on one cluster of one mgrd: a mount whose source lists a
# port nothing listens on first ("127.0.0.1:DEAD,127.0.0.1:REAL") mounts,
# works, logs the switch once, and keeps working (same session, files
# intact) across a kill -9 and restart of mgrd while it alternates between
# the two addresses.
. "$(dirname "$0")/lib.sh"
e2e_begin mgrd-follow
e2e_tmpdir T

REAL=127.0.0.1:$TWINFS_PORT
# mgrd 2's port of the cluster's block: nothing listens there with one mgrd.
DEAD=127.0.0.1:$((TWINFS_PORT + 10))
M2=$TWINFS_RUN_DIR/mnt2
mount_log() {
	local p
	for p in "$TWINFS_RUN_DIR"/pids/mount-*.path; do
		[[ -e $p && $(<"$p") == "$M2" ]] && echo "$TWINFS_RUN_DIR/logs/$(basename "$p" .path).log"
	done
}

# ------------------------------------------------------ dead address first
if TWINFS_MOUNT_SOURCE=$DEAD,$REAL lc mount "$M2" >"$T/mount.out" 2>&1; then
	pass mount-dead-first
else
	fail mount-dead-first "$(tail -n 3 "$T/mount.out" | tr '\n' ' ')"
fi
assert_eq mount-source "$DEAD,$REAL" "$(findmnt -no SOURCE "$M2" 2>&1)"
LOG=$(mount_log)
assert_eq switch-logged-once 1 \
	"$(grep -c "using mgrd 2 at $REAL (mgrd 1 at $DEAD: .*refused" "$LOG")"

head -c "$(scale $((4 << 20)))" /dev/urandom >"$T/a"
check write-via-pair-mount cp "$T/a" "$M2/a"
assert_same_file read-via-main-mount "$T/a" "$M/a"
mkdir "$M/d" && echo hello >"$M/d/h"
assert_eq read-main-write-via-pair "hello" "$(cat "$M2/d/h" 2>&1)"

# -------------------------------------------- mgrd restart: both addresses
# While mgrd is away the client goes back and forth between the two
# addresses (with backoff); once mgrd is back it resumes its session there.
session() { grep -o 'session [0-9]*' "$LOG" | head -n 1; }
s1=$(session)
(cd / && head -c "$(scale $((2 << 20)))" /dev/urandom >"$T/b")
lc kill-mgrd >/dev/null
cp "$T/b" "$M2/b" 2>"$T/cp.err" &
cppid=$!
sleep 1
lc start-mgrd >/dev/null || fail mgrd-start "start-mgrd failed"
if wait $cppid; then
	pass write-across-mgrd-restart
else
	fail write-across-mgrd-restart "cp: $(head -n 2 "$T/cp.err" | tr '\n' ' ')"
fi
assert_same_file content-across-restart "$T/b" "$M/b"
assert_same_file earlier-file-intact "$T/a" "$M2/a"
assert_eq session-resumed "" "$(grep 'did not resume session' "$LOG")"
echo "# $s1; switch lines: $(grep -c 'using mgrd' "$LOG")"
# Back on the address it used before the restart: no further switch line
# (mgrlist logs one per change of mgrd, not per attempt).
assert_eq no-switch-back-logged 1 "$(grep -c 'using mgrd' "$LOG")"

lc umount "$M2"
e2e_end
