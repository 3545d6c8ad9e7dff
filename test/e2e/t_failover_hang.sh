#!/usr/bin/env bash
# t_failover_hang.sh - failover drill, a hung iod (SIGSTOP: no reset, only
# silence) during writes: I/O resumes within request_timeout + 1 s (the
# longest 1 MiB write is timed), the bytes are right, the map says down and
# needing resync, and SIGCONT brings it back as `resyncing` (at mgrd's next
# answered ping: within monitor_interval).
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_hang
e2e_tmpdir T

stop_iod2() { (cd / && lc stop-iod 2 >/dev/null); }
silenced_write_drill hang hung "$(scale $((256 << 20)))" stop_iod2
(cd / && lc cont-iod 2 >/dev/null)
out=$(wait_resync_rejoin 2 $((2 * MI_MS + RT_MS + 1000))) && pass hang-sigcont-resyncing ||
	fail hang-sigcont-resyncing "$out"
drop_caches
assert_same_file hang-bytes-after-sigcont "$T/src" "$M/f"
e2e_end
