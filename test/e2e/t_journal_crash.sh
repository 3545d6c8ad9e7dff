#!/usr/bin/env bash
# t_journal_crash.sh - every byte an fsync acknowledged survives a kill -9 of
# both twins of its group at once (issue 4): a writer fsyncs after each
# block and logs the blocks that were acknowledged; both iods of group 0 are
# killed mid-write and restarted; every acknowledged block must read back
# exactly.  The twins may differ in the block that was in flight (one
# journaled it, the other had not; it was never acknowledged): the restarts
# are rejoins, so resync makes them agree, and `twinfsctl verify` is clean.
# (The drill with one iod killed at a time under fio is
# t_journal_fio_kill.sh.)
. "$(dirname "$0")/lib.sh"
e2e_begin journal-crash

# One group only, so the writer's every block lives on the twins we kill.
mkdir -p g0 && check setstripe-g0 ctl setstripe -S 64K -c 1 -i 0 g0
e2e_tmpdir T
BLOCKS=$(( $(scale 4096) < 64 ? 64 : $(scale 4096) ))

# The writer: block i holds a pattern derived from i; after each write+fsync
# that returns, it appends i to the log (line-buffered, fsynced locally).
"$PY" - "$M/g0/f" "$T/acked" "$BLOCKS" >"$T/writer.out" 2>&1 <<'EOF' &
import os, sys, hashlib
path, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
lf = open(log, "w", buffering=1)
for i in range(n):
    block = hashlib.sha256(str(i).encode()).digest() * 2048  # 64 KiB
    try:
        os.pwrite(fd, block, i * 65536)
        os.fsync(fd)
    except OSError as e:
        print("stopped at block", i, e)
        break
    lf.write(f"{i}\n")
    os.fsync(lf.fileno())
EOF
WRITER=$!

# Let it acknowledge some blocks, then kill both twins of group 0 at once.
for _ in $(seq 1 200); do
	[[ -s $T/acked ]] && (($(wc -l <"$T/acked") >= 16)) && break
	sleep 0.05
done
lc kill-iod 1 >/dev/null
lc kill-iod 2 >/dev/null
killed_at=$(wc -l <"$T/acked")
# The writer must not hang: with both twins gone it gets an error within
# the request timeout (plus the client's retry window).
for _ in $(seq 1 600); do kill -0 "$WRITER" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$WRITER" 2>/dev/null; then
	fail writer-returns "writer still blocked 60 s after both twins died"
	kill -9 "$WRITER"
else
	pass writer-returns
fi
wait "$WRITER" 2>/dev/null
acked=$(wc -l <"$T/acked")
((acked >= killed_at && acked >= 16)) && pass acked-before-kill ||
	fail acked-before-kill "only $acked blocks acknowledged"

lc start-iod 1 >/dev/null
lc start-iod 2 >/dev/null
# Wait for both to register again (bounded).
for _ in $(seq 1 100); do
	ctl status >/dev/null 2>&1 && break
	sleep 0.2
done

# Every acknowledged block reads back exactly, from a fresh mount.
e2e_remount
"$PY" - "$M/g0/f" "$T/acked" >"$T/check.out" 2>&1 <<'EOF'
import os, sys, hashlib
path, log = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY)
bad = 0
for line in open(log):
    i = int(line)
    want = hashlib.sha256(str(i).encode()).digest() * 2048
    got = os.pread(fd, 65536, i * 65536)
    if got != want:
        bad += 1
        if bad <= 5:
            print("block", i, "differs")
print("bad", bad)
sys.exit(1 if bad else 0)
EOF
if [[ $? == 0 ]]; then
	pass acked-blocks-intact
else
	fail acked-blocks-intact "$(tr '\n' ' ' <"$T/check.out")"
fi
# Both replayed their journals; the restarts are failures plus rejoins, so
# one twin resyncs from the other and they end identical, the block that
# was in flight included.
for v in 1 2; do
	n=$(grep -ac "transactions replayed" "$TWINFS_RUN_DIR/logs/iod$v.log")
	assert_eq "iod$v-replayed-at-restart" 2 "$n"
done
e2e_wait_healthy 120 && pass healthy-after-restart ||
	fail healthy-after-restart "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify
e2e_end
