#!/usr/bin/env bash
# t_resync_live.sh - resync drill, the ordering of copy and live writes:
# while a rate-limited resync of iod 1 runs (incremental, then again with
# --full), a writer keeps overwriting random blocks of a file of that group
# (and mirrors every write into a local copy): when the resync is done and
# the writer stopped, the file equals the local copy and verify finds both
# twins identical.  auto_resync is off so the rebuilds are the admin's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_live
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((48 << 20)) /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"

# writer FILE COPY STOPFILE: random 64 KiB overwrites (and a few
# truncate-extends) to both, until STOPFILE exists.
writer() {
	"$PY" - "$1" "$2" "$3" <<'PYEOF'
import os, random, sys
path, copy, stop = sys.argv[1:4]
fa = os.open(path, os.O_WRONLY)
fb = os.open(copy, os.O_WRONLY)
size = os.fstat(fb).st_size
n = 0
while not os.path.exists(stop):
    off = random.randrange(0, size + (1 << 20)) & ~4095
    buf = os.urandom(65536)
    for fd in (fa, fb):
        os.pwrite(fd, buf, off)
    size = max(size, off + len(buf))
    n += 1
os.fsync(fa)
print(n)
PYEOF
}

for mode in incremental full; do
	(cd / && lc kill-iod 1 >/dev/null)
	out=$(wait_state 1 '^down' 10000) && pass "live-$mode-down" || fail "live-$mode-down" "$out"
	dd if=/dev/urandom of="$M/g0/f" bs=1M count=4 seek=8 conv=notrunc status=none
	dd if="$M/g0/f" of="$T/f" bs=1M count=4 skip=8 seek=8 conv=notrunc status=none
	(cd / && lc start-iod 1 >/dev/null)
	out=$(wait_state 1 '^resyncing' 10000) && pass "live-$mode-resyncing" || fail "live-$mode-resyncing" "$out"
	rm -f "$T/stop"
	writer "$M/g0/f" "$T/f" "$T/stop" >"$T/w.out" 2>&1 &
	wpid=$!
	sleep 0.5
	flag=; [[ $mode == full ]] && flag=--full
	if ctl rebuild 1 --wait $flag --rate-limit 24 >"$T/rb.out" 2>&1; then
		pass "live-$mode-rebuild"
	else
		fail "live-$mode-rebuild" "$(tail -n 2 "$T/rb.out")"
	fi
	sleep 0.5
	touch "$T/stop"
	wait $wpid && pass "live-$mode-writer" || fail "live-$mode-writer" "$(tail -n 2 "$T/w.out")"
	echo "# $mode: $(tail -n 1 "$T/w.out") overwrites during the resync"
	drop_caches
	assert_same_file "live-$mode-bytes" "$T/f" "$M/g0/f"
	# Writes in flight when the resync completes carry the old epoch:
	# the twin refuses their forwards as stale, and iod 2 reports as
	# missed what no retry heals (twin.c "Stale forwards"), so iod 1
	# may resync again (seen once in CI).  Then finish that resync too.
	if [[ $(iod_state 1) == resyncing* ]]; then
		echo "# iod 1 resyncs again: $(grep -h 'reporting it as missed' \
			"$TWINFS_RUN_DIR/logs/iod2.log" | tail -n 1 | cut -c 25-)"
		ctl rebuild 1 --wait >"$T/rb2.out" 2>&1 ||
			fail "live-$mode-rebuild-again" "$(tail -n 2 "$T/rb2.out")"
	fi
	e2e_verify "live-$mode-verify"
done
e2e_end
