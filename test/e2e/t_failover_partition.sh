#!/usr/bin/env bash
# t_failover_partition.sh - failover drill, a partitioned iod: the whole cluster
# runs in a network namespace this test creates, iod 2 in a second one,
# joined by a veth pair; mid-write the link is cut (packets vanish: no
# reset, only silence, as a pulled cable).  I/O resumes within
# request_timeout + 1 s, the bytes are right, the map says iod 2 is down
# and needs resync; when the link comes back it rejoins as `resyncing`,
# never read before it is resynced.  All traffic stays inside the two
# namespaces (10.231.x.0/24 exists only there).
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"

command -v nsenter >/dev/null && command -v ip >/dev/null || {
	echo "FAIL failover_partition: needs nsenter and ip"
	exit 1
}
if ! netns_pair tw 231; then
	echo "FAIL failover_partition: cannot create network namespaces"
	exit 1
fi
export TWINFS_NETNS=$NS_A TWINFS_HOST=$NET.1
export TWINFS_IOD2_NETNS=$NS_B TWINFS_IOD2_HOST=$NET.2
# Beyond loopback the daemons insist on a cluster secret.
export TWINFS_SECRET=partition-$$-$RANDOM
e2e_begin failover_partition
# The cluster is stopped by e2e_cleanup; the namespaces go after it.
trap 'rc=$?; (cd / && lc down >/dev/null 2>&1); netns_pair_del; (exit $rc); e2e_cleanup' EXIT
e2e_tmpdir T

silenced_write_drill partition partitioned "$(scale $((128 << 20)))" \
	ip -n "$NS_B" link set "$VETH_B" down # the cable is pulled
ip -n "$NS_B" link set "$VETH_B" up # healed
out=$(wait_state 2 '^(resyncing|up)' $((4 * MI_MS + 2 * RT_MS + 2000))) && pass partition-heal-rejoins ||
	fail partition-heal-rejoins "$out"
drop_caches
assert_same_file partition-bytes-after-heal "$T/src" "$M/f"
e2e_end
