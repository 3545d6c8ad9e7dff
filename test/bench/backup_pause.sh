#!/usr/bin/env bash
# backup_pause.sh - the active mgrd's longest pause while `twinfsctl
# backup-meta` runs at a large namespace (test/bench/RESULTS.md "backup-meta
# pause at scale").  A local cluster of one mgrd gets a synthesized state of
# N empty files (backup_pause.py synth: a backup of a tiny real state,
# widened; twinfs-mgrd --restore-state), then for SECONDS a stream of
# GETATTRs (raw client connection) and one of creates (through the mount)
# run, with backup-meta started 3 s in; the worst latency of each stream
# during the backup is the pause, next to the worst outside it (the
# machine's own noise).  With "pair", the cluster has the mgrd pair: the
# state is restored into mgrd 1, mgrd 2 joins by snapshot, and the backup
# comes from the standby, so the probes measure what the active pays for
# it.  Usage (root):
#   test/bench/backup_pause.sh [N] [SECONDS] [pair]   (default 1000000 20)
set -euo pipefail
N=${1:-1000000}
SECS=${2:-20}
MGRDS=1
[[ ${3:-} == pair ]] && MGRDS=2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${TWINFS_BUILD_DIR:-$REPO/build}
export TWINFS_BUILD_DIR=$BUILD TWINFS_MGRDS=$MGRDS
export TWINFS_RUN_DIR=${TWINFS_RUN_DIR:-/var/tmp/twinfs-backup-pause}
export TWINFS_MOUNT=$TWINFS_RUN_DIR/mnt TWINFS_PORT=${TWINFS_PORT:-7950}
export TWINFS_CLUSTER=backup-pause
LC=$REPO/deploy/local-cluster
W=$TWINFS_RUN_DIR.work
PY=(python3 "$REPO/test/bench/backup_pause.py")
say() { printf '%s %s\n' "$(date -u +%T)" "$*"; }
trap '"$LC" down >/dev/null 2>&1 || true' EXIT
rm -rf "$TWINFS_RUN_DIR" "$W"
mkdir -p "$W"
gcc -shared -fPIC -O2 -D_GNU_SOURCE -I"$REPO/common" -o "$W/crc.so" "$REPO/common/crc32c.c"
"$LC" up >/dev/null
mkdir "$TWINFS_MOUNT/tmpl"
: >"$TWINFS_MOUNT/tmpl/file"
"$LC" ctl backup-meta "$W/base.snap" >/dev/null
say "synthesizing $N files"
"${PY[@]}" synth "$W/crc.so" "$W/base.snap" "$N" "$W/big.snap"
"$LC" umount >/dev/null
"$LC" kill-mgrd 1 >/dev/null
((MGRDS == 2)) && "$LC" kill-mgrd 2 >/dev/null
rm -rf "$TWINFS_RUN_DIR/mgrd" "$TWINFS_RUN_DIR/mgrd2"
"$BUILD/mgrd/twinfs-mgrd" -c "$("$LC" conf)" --id 1 --restore-state "$W/big.snap" 2>"$W/restore.log"
t0=$(date +%s%N)
"$LC" start-mgrd 1 >/dev/null
if ((MGRDS == 2)); then
	# mgrd 1 holds the state: active first, then mgrd 2 joins by snapshot
	role() { # ID: its role in `twinfsctl status --json`
		"$LC" ctl status --json 2>/dev/null | python3 -c 'import json, sys
print(next((m["role"] for m in json.load(sys.stdin)["mgrds"] if m["id"] == int(sys.argv[1])), "?"))' "$1" 2>/dev/null || true
	}
	for ((i = 0; i < 600; i++)); do
		[[ $(role 1) == active ]] && break
		sleep 0.1
	done
	t1=$(date +%s%N)
	"$LC" start-mgrd 2 >/dev/null
	for ((i = 0; i < 1200; i++)); do
		[[ $(role 2) == standby ]] && break
		sleep 0.1
	done
	say "mgrd 2 is $(role 2) after $((($(date +%s%N) - t1) / 1000000)) ms"
fi
"$LC" mount >/dev/null
say "mgrd serving again after $((($(date +%s%N) - t0) / 1000000)) ms; rss $(ps -o rss= -p "$(cat "$TWINFS_RUN_DIR/pids/mgrd.pid")") KiB"
"${PY[@]}" probe 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER" "$TWINFS_MOUNT" "$SECS" "$W/window" >"$W/probe.out" &
pp=$!
sleep 3
w0=$("${PY[@]}" now)
"$LC" ctl -t 300000 backup-meta "$W/backup.snap"
echo "$w0 $("${PY[@]}" now)" >"$W/window"
say "backup done: $(stat -c %s "$W/backup.snap") bytes"
wait $pp
cat "$W/probe.out"
