#!/usr/bin/env bash
# t_resync_stale.sh - stale twins: kill twin A (iod 1), write, kill
# twin B (iod 2), start A: A is stale and never promoted, and I/O on its
# group fails with EIO (never A's stale bytes) while the other group works;
# start B: B serves, A resyncs from it, verify is clean, files are right.
# The monitor interval is long (20 s) on purpose: A must rejoin because B
# came back (mgrd pings a down twin at once), not because a tick came by.
export TWINFS_MONITOR_INTERVAL=${TWINFS_MONITOR_INTERVAL:-20s}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin resync_stale
e2e_tmpdir T

mkdir "$M/g0" "$M/g1"
setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
setfattr -n twinfs.layout -v "512K 1 1" "$M/g1"
head -c "$(scale $((8 << 20)))" /dev/urandom >"$T/old"
cp "$T/old" "$M/g0/f"
sync

(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass stale-a-down || fail stale-a-down "$out"
head -c "$(scale $((8 << 20)))" /dev/urandom >"$T/new"
cp "$T/new" "$M/g0/f"
cp "$T/new" "$M/g0/born"
sync
(cd / && lc kill-iod 2 >/dev/null)
out=$(wait_state 2 '^down' 10000) && pass stale-b-down || fail stale-b-down "$out"

(cd / && lc start-iod 1 >/dev/null)
sleep 2
st=$(iod_state 1)
[[ $st == down* ]] && pass stale-a-not-promoted ||
	fail stale-a-not-promoted "iod 1 is '$st'"
drop_caches
assert_errno stale-read-eio EIO "open('$M/g0/f','rb').read()"
echo other >"$M/g1/other" && [[ $(cat "$M/g1/other") == other ]] &&
	pass stale-other-group-works || fail stale-other-group-works

(cd / && lc start-iod 2 >/dev/null)
out=$(wait_state 1 '^(resyncing|up)' 10000) && pass stale-a-rejoins-with-b ||
	fail stale-a-rejoins-with-b "$out"
if e2e_wait_healthy 60; then pass stale-healthy; else
	fail stale-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
drop_caches
assert_same_file stale-f-new "$T/new" "$M/g0/f"
assert_same_file stale-born "$T/new" "$M/g0/born"
e2e_verify
e2e_end
