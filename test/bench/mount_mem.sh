#!/usr/bin/env bash
# mount_mem.sh - mgrd's resident bytes per inode when the files are made
# through a mount (test/bench/RESULTS.md "mgrd at scale"; mgrd_scale.sh
# measures the same without FUSE, with mgrd_load).  A private
# deploy/local-cluster with one mgrd; DIRS directories of 1,000 empty files
# each made with open(O_CREAT) + close through the mount; mgrd's VmRSS
# before and after, divided by the inodes made.  As root:
#
#   test/bench/mount_mem.sh [DIRS]        (default 200: 200,200 inodes)
#
# Ports: the first free block of 12 in 31700-31799.  Never a CI assertion.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LC=$REPO/deploy/local-cluster
BENCH_WHO=mount_mem.sh
. "$REPO/test/bench/lib.sh"
DIRS=${1:-200}
[[ $DIRS =~ ^[1-9][0-9]*$ ]] || die "usage: $0 [DIRS]"
[[ $(id -u) == 0 ]] || die "needs root (FUSE mounts)"
BUILD=${TWINFS_BUILD_DIR:-$REPO/build}
[[ $BUILD == /* ]] || BUILD=$PWD/$BUILD
PORT=$(bench_port_block 31700 31795 12)
[[ -n $PORT ]] || die "no block of 12 free ports in 31700-31799"

WORK=$(mktemp -d /var/tmp/twinfs-mount-mem.XXXXXX)
export TWINFS_BUILD_DIR=$BUILD TWINFS_NO_BUILD=1 TWINFS_NO_APT=1 TWINFS_PORT=$PORT
export TWINFS_CLUSTER=mount-mem TWINFS_RUN_DIR=$WORK/run TWINFS_MOUNT=$WORK/mnt
export TWINFS_MGRDS=1
bench_traps

(cd / && "$LC" up >"$WORK/up.log" 2>&1) || die "local-cluster up failed ($WORK/up.log)"
pid=$(cat "$TWINFS_RUN_DIR/pids/mgrd.pid")
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }
r0=$(rss)
say "mgrd $pid: $r0 KiB resident; making $DIRS x 1000 files"
python3 - "$TWINFS_MOUNT" "$DIRS" <<'EOF'
import os, sys
mnt, dirs = sys.argv[1], int(sys.argv[2])
for d in range(dirs):
    p = os.path.join(mnt, "d%04d" % d)
    os.mkdir(p)
    for f in range(1000):
        os.close(os.open(os.path.join(p, "f%04d" % f),
                         os.O_CREAT | os.O_WRONLY, 0o644))
EOF
sleep 2
r1=$(rss)
n=$((DIRS * 1001))
say "mgrd: $r1 KiB resident after $n inodes; $(grep -c 'snapshot' "$TWINFS_RUN_DIR/logs/mgrd.log" || true) snapshot lines in its log"
echo "bytes per inode through the mount: $(((r1 - r0) * 1024 / n))"
