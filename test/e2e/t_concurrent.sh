#!/usr/bin/env bash
# t_concurrent.sh - two mounts overwrite the same bytes at the same time
# (unaligned ranges across stripe units and columns).  The twins must end
# identical (server-driven write order), which twinfsctl verify checks, and
# both mounts must then read the same bytes.
. "$(dirname "$0")/lib.sh"
e2e_begin concurrent
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail concurrent-mount2 "second mount failed"; exit 1; }

SIZE=$(scale $((16 << 20)))
((SIZE < (2 << 20))) && SIZE=$((2 << 20))
ROUNDS=$(scale 400)
((ROUNDS < 100)) && ROUNDS=100
head -c "$SIZE" /dev/zero >"$M/shared"
writer() { # MOUNT SEED
	"$PY" - "$1/shared" "$2" "$SIZE" "$ROUNDS" <<'EOF2'
import os, random, sys
path, seed, size, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
fd = os.open(path, os.O_WRONLY)
for i in range(rounds):
    # the same few hot ranges for both writers, so they really collide
    base = rnd.choice((0, 524288 - 1000, 1048576 - 4096, size // 2 + 333))
    n = rnd.choice((1, 4096, 70000, 600000))
    n = min(n, size - base)
    os.pwrite(fd, bytes([seed & 0xff]) * n, base)
    if i % 50 == 0:
        os.fsync(fd)
os.close(fd)
EOF2
}
writer "$M" 17 &
p1=$!
writer "$M2" 99 &
p2=$!
wait $p1 && pass concurrent-writer1 || fail concurrent-writer1 "writer on mount 1 failed"
wait $p2 && pass concurrent-writer2 || fail concurrent-writer2 "writer on mount 2 failed"

check concurrent-sync ctl sync
e2e_verify concurrent-verify-twins
cd /
lc umount "$M2" >/dev/null
lc mount "$M2" >/dev/null
e2e_remount
assert_eq concurrent-same-on-both-mounts "$(sha "$M/shared")" "$(sha "$M2/shared")"
assert_eq concurrent-size "$SIZE" "$(stat -c %s "$M/shared")"
# every byte is one of 0, 17, 99
"$PY" -c "
import sys
d = open('$M/shared', 'rb').read()
bad = set(d) - {0, 17, 99}
sys.exit(1 if bad else 0)" && pass concurrent-bytes-valid || fail concurrent-bytes-valid "unexpected byte values"
lc umount "$M2" >/dev/null
e2e_verify
e2e_end
