#!/usr/bin/env bash
# t_resync_kill.sh - incremental resync after a rejoin: twin A (iod 1) is killed, files of its
# group are written, overwritten, cut and deleted while it is away; A is
# started again and resyncs automatically from iod 2: the status becomes
# healthy, verify finds both twins identical and every byte is right.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin resync_kill
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c "$(scale $((24 << 20)))" /dev/urandom >"$T/keep"
cp "$T/keep" "$M/g0/keep"
cp "$T/keep" "$M/g0/gone"
cp "$T/keep" "$M/g0/cut"
head -c 1000000 "$T/keep" >"$T/cut"
sync

(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass resync-kill-down || fail resync-kill-down "$out"

# Written while iod 1 is away: a new file, an overwrite, a sparse file, a
# cut and a delete (iod 1 still holds "gone": a target-only subfile).
head -c "$(scale $((32 << 20)))" /dev/urandom >"$T/new"
cp "$T/new" "$M/g0/new"
dd if=/dev/urandom of="$T/keep" bs=64K count=3 seek=7 conv=notrunc status=none
cp "$T/keep" "$M/g0/keep"
truncate -s 40M "$T/sparse" && echo tail >>"$T/sparse"
cp --sparse=always "$T/sparse" "$M/g0/sparse"
truncate -s 1000000 "$M/g0/cut"
rm -f "$M/g0/gone"
sync

t0=$(now_ms)
(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then
	pass resync-kill-healthy
	echo "# iod 1 back up after $(($(now_ms) - t0)) ms (start + resync)"
else
	fail resync-kill-healthy "$(ctl status 2>&1 | tr '\n' ' ')"
fi
assert_eq resync-kill-state up "$(iod_state 1)"
grep -h "resync of iod 1 done" "$TWINFS_RUN_DIR"/logs/*.log | tail -n 1 | sed 's/^/# /'
drop_caches
assert_same_file resync-kill-new "$T/new" "$M/g0/new"
assert_same_file resync-kill-keep "$T/keep" "$M/g0/keep"
assert_same_file resync-kill-sparse "$T/sparse" "$M/g0/sparse"
assert_same_file resync-kill-cut "$T/cut" "$M/g0/cut"
assert_eq resync-kill-gone no "$([[ -e $M/g0/gone ]] && echo yes || echo no)"
# Sparseness survives the copy: iod 1's subfile of the sparse file holds
# about what iod 2's does, not 40 MiB.
a=$(du -sk "$TWINFS_RUN_DIR/iod1" | cut -f1)
b=$(du -sk "$TWINFS_RUN_DIR/iod2" | cut -f1)
((a < b + 16384)) && pass resync-kill-sparse-kept ||
	fail resync-kill-sparse-kept "iod1 ${a} KiB vs iod2 ${b} KiB"
e2e_verify
e2e_end
