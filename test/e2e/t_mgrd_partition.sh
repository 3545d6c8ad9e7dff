#!/usr/bin/env bash
# t_mgrd_partition.sh - mgrd outage drill: mgrd partitioned.  The cluster runs
# in a network namespace this test creates, mgrd in a second one, joined by
# a veth pair; the link is cut (packets vanish: no reset, only silence)
# while a client writes and reads; see mgrd_outage_lib.sh for what is
# checked: data I/O goes on, metadata waits up to mgr_timeout then fails
# with EIO, nothing hangs.  All traffic stays inside the two namespaces.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
. "$(dirname "$0")/mgrd_outage_lib.sh"

command -v nsenter >/dev/null && command -v ip >/dev/null || {
	echo "FAIL mgrd_partition: needs nsenter and ip"
	exit 1
}
if ! netns_pair twm 232; then
	echo "FAIL mgrd_partition: cannot create network namespaces"
	exit 1
fi
export TWINFS_NETNS=$NS_A TWINFS_HOST=$NET.1
export TWINFS_MGRD_NETNS=$NS_B TWINFS_MGRD_HOST=$NET.2
# Beyond loopback the daemons insist on a cluster secret.
export TWINFS_SECRET=mgrd-partition-$$-$RANDOM
e2e_begin mgrd_partition
# The cluster is stopped by e2e_cleanup; the namespaces go after it.
trap 'rc=$?; (cd / && lc down >/dev/null 2>&1); netns_pair_del; (exit $rc); e2e_cleanup' EXIT
e2e_tmpdir T

cut_link() { ip -n "$NS_B" link set "$VETH_B" down; }   # the cable is pulled
heal_link() { ip -n "$NS_B" link set "$VETH_B" up; }
mgrd_outage_drill cut_link heal_link partition
e2e_verify
e2e_end
