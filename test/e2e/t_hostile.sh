#!/usr/bin/env bash
# t_hostile.sh - malformed frames to mgrd and to an iod (bad magic, version,
# flags, oversized lengths, unknown types, truncated headers, bodies and
# data, garbage protobuf, frames before HELLO, idle half-open connections):
# each closes only its own connection, with a log line naming the peer; the
# daemon keeps answering HELLO + PING, the mount keeps working.  A client
# cannot act in the name of another client's session, nor resume it without
# its secret (twire.py sessions), and asks an iod only what its role may
# (twire.py roles).
. "$(dirname "$0")/lib.sh"
e2e_begin hostile

echo before >"$M/f"
run_checks "$PY" "$E2E_DIR/twire.py" hostile 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER" mgrd "$TWINFS_RUN_DIR/logs/mgrd.log"
run_checks "$PY" "$E2E_DIR/twire.py" hostile 127.0.0.1 $((TWINFS_PORT + 1)) "$TWINFS_CLUSTER" iod1 "$TWINFS_RUN_DIR/logs/iod1.log"
run_checks "$PY" "$E2E_DIR/twire.py" hostile 127.0.0.1 $((TWINFS_PORT + 4)) "$TWINFS_CLUSTER" iod4 "$TWINFS_RUN_DIR/logs/iod4.log"
# Each role may ask an iod only what it needs (iod/server.c role_may).
run_checks "$PY" "$E2E_DIR/twire.py" roles 127.0.0.1 $((TWINFS_PORT + 1)) "$TWINFS_CLUSTER" 2 3 "$(stat -c %i "$M/f")"
assert_eq roles-file-intact before "$(cat "$M/f")"
# A client's requests act only for the session its connection holds.
run_checks "$PY" "$E2E_DIR/twire.py" sessions 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER" "$(stat -c %i "$M/f")"
check mgrd-names-the-spoof grep -q "in the name of session [0-9]*, but its connection holds session [0-9]*: refused (EPERM)" "$TWINFS_RUN_DIR/logs/mgrd.log"
for p in mgrd iod1 iod4; do
	kill -0 "$(cat "$TWINFS_RUN_DIR/pids/$p.pid")" 2>/dev/null && pass "$p-alive" || fail "$p-alive" "$p died"
done
check status-after-hostile ctl status
assert_eq mount-still-works before "$(cat "$M/f")"
echo after >"$M/g" && assert_eq mount-still-writes after "$(cat "$M/g")"
e2e_verify
e2e_end
