#!/usr/bin/env bash
# t_namelease.sh - name leases (fuse-client/dlease.c, mgrd/dlease.c): a
# mount answers LOOKUPs of absent names in directories it made without
# mgrd, and that never hides a name:
#   - names this mount made, renamed and removed are found or not found
#     exactly as they are;
#   - a name another mount adds to a leased directory (create, mkdir,
#     symlink, hard link, rename into it) is seen by the holder at once,
#     with no sleep, in many rounds: mgrd recalls the lease first;
#   - with the holder stopped (SIGSTOP), the other mount's create waits
#     for the lease to expire (1 s), not for ever;
#   - after an mgrd restart (kill -9), a name added elsewhere is seen at
#     once by the former holder (the new mgrd waits out the old leases);
#   - -o nonamelease turns it off; an unmount gives its leases back (no
#     create elsewhere waits for them to expire); the client counts its
#     answers at unmount.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
e2e_begin namelease
ROUNDS=$(scale 60)
((ROUNDS < 20)) && ROUNDS=20
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail namelease-mount2 "second mount failed"; exit 1; }
pass namelease-mount2
LOG1=$TWINFS_RUN_DIR/logs/mount.log
PID1=$(cat "$TWINFS_RUN_DIR/pids/mount.pid")

exists() { [[ -e $1 || -L $1 ]] && echo yes || echo no; }

# 1. This mount's own names, in a directory it made (leased).
mkdir own
for i in 1 2 3; do : >"own/f$i"; done
mkdir own/sub
ln -s f1 own/sym
ln own/f2 own/hard
mv own/f3 own/f4
rm own/f1
got=$(for n in f1 f2 f3 f4 sub sym hard nothere; do echo "$n=$(exists "own/$n")"; done | tr '\n' ' ')
assert_eq own-names "f1=no f2=yes f3=no f4=yes sub=yes sym=yes hard=yes nothere=no " "$got"
assert_errno own-absent-enoent ENOENT "os.stat('own/nothere')"
assert_errno own-absent-open-enoent ENOENT "os.open('own/nothere', os.O_RDONLY)"
: >own/f1
assert_eq own-recreated yes "$(exists own/f1)"

# 2. Another mount adds names to directories this one just made and is
# filling; the holder looks at once.
bad=
for ((r = 0; r < ROUNDS; r++)); do
	d=r$r
	mkdir "$d"
	: >"$d/mine"
	[[ -e $d/x ]] && bad+=" $r:early"
	case $((r % 5)) in
	0) echo "$r" >"$M2/$d/x" ;;
	1) mkdir "$M2/$d/x" ;;
	2) ln -s target "$M2/$d/x" ;;
	3) ln "$M2/$d/mine" "$M2/$d/x" ;;
	4) echo "$r" >"$M2/$d.tmp" && mv "$M2/$d.tmp" "$M2/$d/x" ;;
	esac
	[[ $(exists "$d/x") == yes ]] || bad+=" $r:missing"
	: >"$d/after"   # the holder's own create after the recall
	[[ $(exists "$M2/$d/after") == yes ]] || bad+=" $r:after-missing"
done
assert_eq other-mount-names-seen-at-once "" "$bad"
assert_eq other-mount-content 0 "$(cat r0/x 2>&1)"

# 3. The holder stopped: the other mount waits at most about the lease.
mkdir hung
: >hung/a
cd / || exit 1   # nothing of this shell in the stopped mount
kill -STOP "$PID1"
t0=$(now_ms)
timeout 20 sh -c "echo z >'$M2/hung/b'"
rc=$?
t1=$(now_ms)
kill -CONT "$PID1"
cd "$M" || exit 1
echo "# create next to a stopped holder took $((t1 - t0)) ms"
assert_eq hung-holder-create-ok 0 "$rc"
(((t1 - t0) < 5000)) && pass hung-holder-bounded || fail hung-holder-bounded "took $((t1 - t0)) ms"
assert_eq hung-holder-sees-it z "$(cat hung/b 2>&1)"

# 4. mgrd restarts under a lease.
mkdir rst
: >rst/a
cd / || exit 1
lc kill-mgrd >/dev/null
lc start-mgrd >/dev/null || fail namelease-mgrd-start "start-mgrd failed"
echo y >"$M2/rst/b" 2>/dev/null || echo y >"$M2/rst/b"
assert_eq after-restart-seen y "$(cat "$M/rst/b" 2>&1)"
cd "$M" || exit 1

# 5. Off: a mount with -o nonamelease asks mgrd, and answers the same.
M3=$TWINFS_RUN_DIR/mnt3
TWINFS_MOUNT_OPTS=allow_other,nonamelease lc mount "$M3" >/dev/null ||
	fail namelease-mount3 "third mount failed"
mkdir "$M3/off"
: >"$M3/off/a"
assert_eq off-absent no "$(exists "$M3/off/b")"
echo w >"$M2/off/b"
assert_eq off-seen w "$(cat "$M3/off/b" 2>&1)"
lc umount "$M3" >/dev/null

# 6. An unmount gives its leases back: a create next to where it was
# filling a directory does not wait for the lease to expire (mgrd logs a
# lease that had to expire).
M4=$TWINFS_RUN_DIR/mnt4
lc mount "$M4" >/dev/null || fail namelease-mount4 "fourth mount failed"
mkdir "$M4/gone"
: >"$M4/gone/a"
GONE=$(stat -c %i "$M4/gone")
lc umount "$M4" >/dev/null
t0=$(now_ms)
echo v >"$M2/gone/b"
echo "# create after the holder's unmount took $(($(now_ms) - t0)) ms"
assert_eq unmount-then-create v "$(cat gone/b 2>&1)"
if grep -q "name lease on directory $GONE: .* it expired" "$TWINFS_RUN_DIR/logs/mgrd.log"; then
	fail unmount-gives-leases-back "mgrd: $(grep "directory $GONE:" "$TWINFS_RUN_DIR/logs/mgrd.log" | tail -n 1)"
else
	pass unmount-gives-leases-back
fi

# The holder said how many lookups it answered.
cd / || exit 1
lc umount "$M" >/dev/null
n=$(grep -o 'name leases: [0-9]* granted, [0-9]* lookups answered' "$LOG1" |
	tail -n 1 | awk '{print $5}')
echo "# mount 1: ${n:-no} lookups answered without mgrd"
((${n:-0} >= ROUNDS)) && pass lookups-answered-locally ||
	fail lookups-answered-locally "${n:-no} answered (log: $(grep 'name leases' "$LOG1" | tail -n 1))"
e2e_end
