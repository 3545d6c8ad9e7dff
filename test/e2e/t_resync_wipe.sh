#!/usr/bin/env bash
# t_resync_wipe.sh - full rebuild of a wiped disk: iod 1's data directory is wiped (a
# replaced disk) and iod 1 started: mgrd accepts the new, empty directory
# as stale, iod 2 copies everything to it (full rebuild), the status becomes
# healthy and verify is clean.  Prints the full-rebuild throughput.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin resync_wipe
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/big"
cp "$T/big" "$M/g0/big"
mkdir "$M/g0/tree"
for i in $(seq 1 50); do echo "file $i" >"$M/g0/tree/f$i"; done
ctl sync >/dev/null
sync

(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass wipe-down || fail wipe-down "$out"
rm -rf "$TWINFS_RUN_DIR/iod1"
t0=$(now_ms)
(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 120; then
	ms=$(($(now_ms) - t0))
	pass wipe-healthy
	echo "# full rebuild of $((SIZE >> 20)) MiB + 50 small files: iod 1 up after $ms ms (start + copy): $((SIZE / 1000 / (ms > 0 ? ms : 1))) MB/s"
else
	fail wipe-healthy "$(ctl status 2>&1 | tr '\n' ' ')"
fi
grep -h "resync of iod 1 done" "$TWINFS_RUN_DIR"/logs/*.log | tail -n 1 | sed 's/^/# /'
grep -q "new, empty data directory" "$TWINFS_RUN_DIR"/logs/mgrd.log &&
	pass wipe-mgrd-says-replaced || fail wipe-mgrd-says-replaced
drop_caches
assert_same_file wipe-big "$T/big" "$M/g0/big"
assert_eq wipe-tree "file 50" "$(cat "$M/g0/tree/f50")"
e2e_verify
# iod 2 alone would now be the only copy: kill it, iod 1 must serve.
(cd / && lc kill-iod 2 >/dev/null)
out=$(wait_state 2 '^down' 10000) && pass wipe-b-down || fail wipe-b-down "$out"
drop_caches
assert_same_file wipe-big-from-rebuilt "$T/big" "$M/g0/big"
e2e_end
