#!/usr/bin/env bash
# t_mgrd_hang.sh - mgrd outage drill: mgrd hung with SIGSTOP (its connections
# stay open, nothing answers) while a client writes and reads; see
# mgrd_outage_lib.sh for what is checked: data I/O goes on, metadata waits
# up to mgr_timeout then fails with EIO, nothing hangs.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
. "$(dirname "$0")/mgrd_outage_lib.sh"
e2e_begin mgrd_hang
e2e_tmpdir T
# Whatever happens, mgrd is not left stopped for the cleanup.
trap 'rc=$?; (cd / && lc cont-mgrd >/dev/null 2>&1); (exit $rc); e2e_cleanup' EXIT

hang() { (cd / && lc stop-mgrd >/dev/null); }
wake() { (cd / && lc cont-mgrd >/dev/null); }
mgrd_outage_drill hang wake hang
e2e_verify
e2e_end
