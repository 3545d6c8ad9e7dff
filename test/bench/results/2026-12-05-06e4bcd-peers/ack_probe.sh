#!/usr/bin/env bash
# ack_probe.sh - the probes of RESULTS.md "Peers" (session 33; the two run at 00:13 and 00:15 UTC, merged here):
# the peers' 4 KiB O_DIRECT random writes with their defaults and with the
# client's write-behind out of the acknowledgement, and strace of their processes.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
WORK=$(mktemp -d /var/tmp/hpp-work.XXXXXX)
OUT=/var/tmp/twinfs-ack-probe; mkdir -p $OUT
TMO=120
say() { printf '%s %s\n' "$(date -u +%T)" "$*"; }
die() { echo "probe: $*" >&2; exit 1; }
mounted() { awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; }
fuse_wait() { local i; for ((i = 0; i < 100; i++)); do mounted "$1" && return; sleep 0.1; done; die "$1 did not mount"; }
fuse_stop() { local i; mounted "$1" && fusermount3 -u "$1"; for ((i = 0; i < 50; i++)); do kill -0 "$2" 2>/dev/null || return 0; sleep 0.1; done; kill "$2" 2>/dev/null; }
source $REPO/test/bench/peers.sh
trap 'peers_down; rm -rf --one-file-system "$WORK"' EXIT
peers_up
M2=$WORK/mfs-mnt2; mkdir -p $M2
"${PEER_NSX[@]}" mfsmount -f $M2 -H "$PEER_IP" -o mfswritecachesize=0 >$OUT/mnt2.log 2>&1 &
M2PID=$!
fuse_wait $M2 $OUT/mnt2.log
trap 'fuse_stop $M2 $M2PID; peers_down; rm -rf --one-file-system "$WORK"' EXIT
rw() { # LABEL DIR
  fio --name=rw --directory=$2 --filename=f --rw=randwrite --bs=4k --size=64M --direct=1 --ioengine=psync --time_based=1 --runtime=5 --output-format=json --output=$OUT/$1.json >/dev/null
  python3 $REPO/test/bench/benchtool.py fio $OUT/$1.json write | awk -v l=$1 '{print l, "IOPS", $2, "lat_us", $3}'
}
d=${PEER_MNT[moosefs]}/p; mkdir -p $d
fio --name=lay --directory=$d --filename=f --rw=write --bs=1M --size=64M --end_fsync=1 >/dev/null
g=${PEER_MNT[glusterfs]}/p; mkdir -p $g
fio --name=lay --directory=$g --filename=f --rw=write --bs=1M --size=64M --end_fsync=1 >/dev/null
for round in 1 2; do
  rw mfs-default-$round $d
  rw mfs-wcache0-$round $M2/p
  gl_cli volume set $GL_VOL performance.strict-o-direct off >/dev/null
  rw gl-default-$round $g
  gl_cli volume set $GL_VOL performance.strict-o-direct on >/dev/null
  sleep 1
  rw gl-strict-$round $g
done
# does the mfs client with no write cache answer FUSE only after the chunkservers?
fio --name=rw --directory=$M2/p --filename=f --rw=randwrite --bs=4k --size=64M --direct=1 --ioengine=psync --time_based=1 --runtime=3 >/dev/null &
F=$!; sleep 1
timeout -s INT 1 strace -f -ttt -e trace=read,write,writev,readv -o $OUT/mfs-wc0.strace -p $M2PID 2>/dev/null
wait $F
gl_cli volume set $GL_VOL performance.strict-o-direct on >/dev/null
fio --name=rw --directory=$g --filename=f --rw=randwrite --bs=4k --size=64M --direct=1 --ioengine=psync --time_based=1 --runtime=3 >/dev/null &
F=$!; sleep 1
timeout -s INT 1 strace -f -ttt -e trace=read,write,writev,readv -o $OUT/gl-strict.strace -p $GL_MNT_PID 2>/dev/null
wait $F
# defaults: every process of each peer (mount, chunkservers, bricks)
gl_cli volume set $GL_VOL performance.strict-o-direct off >/dev/null
for t in moosefs glusterfs; do
  fio --name=rw --directory=${PEER_MNT[$t]}/p --filename=f --rw=randwrite --bs=4k --size=64M --direct=1 --ioengine=psync --time_based=1 --runtime=3 >/dev/null &
  F=$!; sleep 1
  args=(); for p in $(peers_pids $t); do args+=(-p $p); done
  timeout -s INT 1 strace -f -ttt -e trace=read,write,writev,readv,sendto,recvfrom,sendmsg,recvmsg,pwrite64,pwritev,pwritev2,fsync,fdatasync -o $OUT/$t.strace "${args[@]}" 2>/dev/null
  wait $F
done
