#!/usr/bin/env bash
# t_failover_both.sh - failover drill, both twins of a group killed: I/O on
# a file of that group fails with EIO within request_timeout + 1 s, a file
# placed only on the other group still works, nothing hangs; when the twins
# return, the group serves again without a remount (the twin demoted first
# is stale and rejoins as resyncing; the other comes back up).  Then the
# same with both twins of the other group hung by SIGSTOP.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_both
e2e_tmpdir T

mkdir "$M/g0" "$M/g1"
setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
setfattr -n twinfs.layout -v "512K 1 1" "$M/g1"
head -c $((4 << 20)) /dev/urandom >"$T/src"
cp "$T/src" "$M/g0/f" && cp "$T/src" "$M/g1/f" || fail both-setup "cp failed"

(cd / && lc kill-iod 3 >/dev/null && lc kill-iod 4 >/dev/null)

# errno_within NAME LIMIT_MS CODE: run python CODE; it must fail with EIO
# within LIMIT_MS.
errno_within() {
	local name=$1 limit=$2 code=$3 t0 got dt
	t0=$(now_ms)
	got=$(timeout 30 "$PY" -c "import os, errno, sys
try:
$(echo "$code" | sed 's/^/    /')
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno)); sys.exit(0)
print('no-error')" 2>&1)
	dt=$(($(now_ms) - t0))
	echo "# $name: $got after $dt ms"
	if [[ $got == EIO ]] && ((dt <= limit)); then
		pass "$name"
	else
		fail "$name" "got '$got' after $dt ms (want EIO within $limit ms)"
	fi
}

errno_within both-write-eio $((RT_MS + 1000)) "fd = os.open('$M/g1/f', os.O_WRONLY)
os.pwrite(fd, b'x' * 65536, 0)
os.close(fd)"
drop_caches
errno_within both-read-eio $((RT_MS + 1000)) "fd = os.open('$M/g1/f', os.O_RDONLY)
os.read(fd, 65536)"
check both-other-group-write "$PY" -c "
fd = __import__('os').open('$M/g0/f', __import__('os').O_WRONLY)
__import__('os').pwrite(fd, b'y' * 65536, 0)"
printf 'y%.0s' $(seq 65536) | cmp -n 65536 - "$M/g0/f" >/dev/null &&
	pass both-other-group-bytes || fail both-other-group-bytes
check both-other-group-new-file cp "$T/src" "$M/g0/new"
assert_same_file both-other-group-new-bytes "$T/src" "$M/g0/new"

(cd / && lc start-iod 3 >/dev/null && lc start-iod 4 >/dev/null)
for ((i = 0; i < 100; i++)); do
	s3=$(iod_state 3) s4=$(iod_state 4)
	[[ $s3 == up || $s4 == up ]] && break
	sleep 0.1
done
[[ $s3 == up || $s4 == up ]] && pass both-one-twin-up ||
	fail both-one-twin-up "iod 3 '$s3', iod 4 '$s4'"
echo "# after restart: iod 3 $s3, iod 4 $s4"
drop_caches
assert_same_file both-group-serves-again "$T/src" "$M/g1/f"
check both-group-writes-again cp "$T/src" "$M/g1/new"

# Both twins of group 0 hung (SIGSTOP: silence, no reset): EIO within
# request_timeout + 1 s all the same; group 1 (one twin up) still serves;
# SIGCONT brings group 0 back.
(cd / && lc stop-iod 1 >/dev/null && lc stop-iod 2 >/dev/null)
errno_within both-hung-write-eio $((RT_MS + 1000)) "fd = os.open('$M/g0/new', os.O_WRONLY)
os.pwrite(fd, b'x' * 65536, 0)
os.close(fd)"
check both-hung-other-group-works cp "$T/src" "$M/g1/new2"
(cd / && lc cont-iod 1 >/dev/null && lc cont-iod 2 >/dev/null)
for ((i = 0; i < 100; i++)); do
	s1=$(iod_state 1) s2=$(iod_state 2)
	[[ $s1 == up || $s2 == up ]] && break
	sleep 0.1
done
echo "# after SIGCONT: iod 1 $s1, iod 2 $s2"
check both-hung-group-writes-again cp "$T/src" "$M/g0/new3"
assert_same_file both-hung-group-bytes "$T/src" "$M/g0/new3"
e2e_end
