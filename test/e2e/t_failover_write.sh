#!/usr/bin/env bash
# t_failover_write.sh - failover drill, kill -9 during writes.  First a
# loop of 1 MiB writes to a file of group 1 while iod 4 is killed: the
# longest stall must stay under a second (a reset connection is reported
# and the iod demoted in milliseconds).  Then iod 2 is killed while dd
# writes a 256 MiB file over both groups (group 1 already degraded): dd
# finishes without an error, every byte matches, the map marks iod 2 down
# and needing resync, and the restarted iods rejoin as `resyncing` (a new
# incarnation is a failure plus a rejoin) while reads stay correct.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_write
e2e_tmpdir T

SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/src"

# Stall measurement: a loop of 1 MiB writes to a file of group 1 only,
# timestamped; iod 4 dies in the middle.  It stays down for the dd drill
# below, which then also writes group 1 degraded.
mkdir "$M/g1" && setfattr -n twinfs.layout -v "512K 1 1" "$M/g1"
n_stall=$(scale 400)
"$PY" - "$M/g1/stall" "$n_stall" >"$T/stall.out" 2>&1 <<'PYEOF' &
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
buf = os.urandom(1 << 20)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
worst = 0.0
for i in range(n):
    a = time.monotonic()
    os.write(fd, buf)
    worst = max(worst, time.monotonic() - a)
os.close(fd)
print("%d" % (worst * 1000))
PYEOF
wpid=$!
# Kill while it writes: a quarter in (a fixed 64 MiB was past the end of
# the file at CI's scale, so the kill came after the writer had finished).
wait_size "$M/g1/stall" $((n_stall / 4 << 20)) ||
	fail write-kill-midway "the writer never reached $((n_stall / 4)) MiB"
kill -0 "$wpid" 2>/dev/null && pass write-kill-midway ||
	fail write-kill-midway "the writer had finished before iod 4 was killed"
(cd / && lc kill-iod 4 >/dev/null)
if wait $wpid; then
	stall=$(tail -n 1 "$T/stall.out")
	echo "# longest 1 MiB write stall when iod 4 was killed: $stall ms"
	(( stall < 1000 )) && pass "write-kill-stall-under-1s" ||
		fail "write-kill-stall-under-1s" "$stall ms"
else
	fail "write-kill-stall-under-1s" "writer failed: $(tail -n 2 "$T/stall.out")"
fi
for victim in 2; do
	rm -f "$M/f$victim"
	dd if="$T/src" of="$M/f$victim" bs=1M 2>"$T/dd.err" &
	ddpid=$!
	wait_size "$M/f$victim" $((SIZE / 4)) || fail "write-$victim-progress" "dd made no progress"
	(cd / && lc kill-iod $victim >/dev/null)
	if wait $ddpid; then
		pass "write-$victim-dd-ok"
	else
		fail "write-$victim-dd-ok" "$(tail -n 2 "$T/dd.err" | tr '\n' ' ')"
	fi
	assert_same_file "write-$victim-bytes" "$T/src" "$M/f$victim"
	out=$(wait_state $victim '^down,needs-resync' 5000) &&
		pass "write-$victim-map-down" || fail "write-$victim-map-down" "$out"
done
# A restarted iod rejoins as resyncing (it takes forwarded writes, serves
# no reads) and its automatic resync makes it up again (possibly before we
# look).
for victim in 2 4; do
	(cd / && lc start-iod $victim >/dev/null)
	out=$(wait_state $victim '^(resyncing|up)$' 10000) &&
		pass "write-$victim-rejoins-resyncing" ||
		fail "write-$victim-rejoins-resyncing" "$out"
done
drop_caches
assert_same_file "write-bytes-after-rejoin" "$T/src" "$M/f2"
echo more >>"$M/f2" && pass write-after-rejoin || fail write-after-rejoin
e2e_wait_healthy 120 && pass write-resynced || fail write-resynced "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify

e2e_end
