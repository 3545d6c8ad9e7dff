#!/usr/bin/env bash
# t_failover_hang.sh - issue 3 part A, a hung iod (SIGSTOP: no reset, only
# silence) during writes: I/O resumes within request_timeout + 1 s (the
# longest 1 MiB write is timed), the bytes are right, the map says down and
# needing resync, and SIGCONT brings it back as `resyncing` (at mgrd's next
# answered ping: within monitor_interval).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_hang
e2e_tmpdir T

SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/src"
"$PY" "$E2E_DIR/stall_copy.py" "$T/src" "$M/f" >"$T/w.out" 2>&1 &
wpid=$!
wait_size "$M/f" $((SIZE / 4)) || fail hang-progress "no progress"
(cd / && lc stop-iod 2 >/dev/null)
if wait $wpid; then
	stall=$(tail -n 1 "$T/w.out")
	echo "# longest 1 MiB write stall with iod 2 hung: $stall ms (request_timeout $RT_MS ms)"
	((stall <= RT_MS + 1000)) && pass hang-resumes-in-time ||
		fail hang-resumes-in-time "$stall ms > $((RT_MS + 1000)) ms"
else
	fail hang-resumes-in-time "writer failed: $(tail -n 2 "$T/w.out" | tr '\n' ' ')"
fi
assert_same_file hang-bytes "$T/src" "$M/f"
out=$(wait_state 2 '^down,needs-resync' $((2 * MI_MS + RT_MS + 1000))) && pass hang-map-down ||
	fail hang-map-down "$out"
(cd / && lc cont-iod 2 >/dev/null)
out=$(wait_resync_rejoin 2 $((2 * MI_MS + RT_MS + 1000))) && pass hang-sigcont-resyncing ||
	fail hang-sigcont-resyncing "$out"
drop_caches
assert_same_file hang-bytes-after-sigcont "$T/src" "$M/f"
e2e_end
