#!/usr/bin/env bash
# t_bigfile.sh - a 256 MiB (times TWINFS_TEST_SCALE) random file copied in
# and read back byte for byte: through the same mount, after a remount, with
# several block sizes; then twinfsctl verify.
#
# First, on the fresh daemons, the memory bound (docs/OPERATIONS.md
# "Memory"): 8 times the journal written at once (128 MiB at any scale:
# each iod takes half, 4 times its 16 MiB journal), while each iod's
# journal copies (twinfs_iod_journal_memory_bytes, polled) stay within the
# log plus the quarter waiting for it plus a request per connection, its
# VmHWM within the documented ceiling (24 MiB + 1.8 x journal_size + 1 MiB
# for each of at most 8 connections); the client sends up to 64 MiB ahead
# of its replies, far past the quarter of 4 MiB, so without holding it the
# copies could reach 80 MiB.  Under ASan freed memory sits in a 256 MiB
# quarantine (288 MiB with its shadow) and every live byte costs about
# twice, so the ceiling there is 2 x that + 288 MiB (t_bounds.sh).  The
# small journal also makes the big file below go through many full
# journals and held connections.  Last, once idle, every iod marks its
# journal's slabs free, then unmaps them (commit_interval 1 s: after 12 s).
. "$(dirname "$0")/lib.sh"
export TWINFS_JOURNAL_SIZE=16M TWINFS_COMMIT_INTERVAL=1s
e2e_begin bigfile
e2e_tmpdir T

J=$((16 << 20))
CEIL_KB=$(((24 << 10) + J * 18 / 10 / 1024 + (8 << 10)))
# grep reads all of nm's output: with -q, nm's SIGPIPE fails the pipe.
if nm -D "$TWINFS_BUILD_DIR/iod/twinfs-iod" 2>/dev/null | grep __asan_init >/dev/null ||
	nm "$TWINFS_BUILD_DIR/iod/twinfs-iod" 2>/dev/null | grep __asan_init >/dev/null; then
	CEIL_KB=$((2 * CEIL_KB + (288 << 10)))
fi
COPIES_MAX=$((J + J / 4 + (4 << 20)))
echo "# iod ceiling: $CEIL_KB kB VmHWM, $COPIES_MAX bytes of journal copies"
for n in 1 2 3 4; do
	"$PY" "$E2E_DIR/metrics.py" peak "http://127.0.0.1:$((TWINFS_PORT + 5 + n))/metrics" \
		twinfs_iod_journal_memory_bytes "$T/mem-stop" >"$T/peak$n" &
done
check mem-write dd if=/dev/urandom of="$M/mem" bs=1M count=$((8 * J >> 20)) conv=fsync status=none
touch "$T/mem-stop"
wait
holds=0
for n in 1 2 3 4; do
	hwm=$(awk '/^VmHWM/{print $2}' "/proc/$(cat "$TWINFS_RUN_DIR/pids/iod$n.pid")/status")
	peak=$(cat "$T/peak$n")
	echo "# iod $n: VmHWM $hwm kB, journal copies at most $peak bytes"
	((hwm <= CEIL_KB)) && pass "mem-iod$n-rss" ||
		fail "mem-iod$n-rss" "VmHWM $hwm kB over the ceiling $CEIL_KB kB"
	((peak <= COPIES_MAX)) && pass "mem-iod$n-copies" ||
		fail "mem-iod$n-copies" "$peak bytes of copies, over $COPIES_MAX"
	"$PY" "$E2E_DIR/metrics.py" get "http://127.0.0.1:$((TWINFS_PORT + 5 + n))/metrics" >"$T/m$n"
	holds=$((holds + $("$PY" "$E2E_DIR/metrics.py" sum "$T/m$n" twinfs_iod_holds_total)))
done
# Whether the log filled faster than checkpoints emptied it is the disk's
# and the build's: ASan's iods hold senders here, the release build's
# mostly need not.
echo "# senders held $holds times"
check mem-rm rm "$M/mem"

SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/big"
want=$(sha "$T/big")
check bigfile-cp cp "$T/big" "$M/big"
assert_eq bigfile-size "$SIZE" "$(stat -c %s "$M/big")"
assert_eq bigfile-sha256 "$want" "$(sha "$M/big")"
e2e_remount || fail bigfile-remount "remount failed"
assert_eq bigfile-sha256-after-remount "$want" "$(sha "$M/big")"
for bs in 4k 333k 1M 4M; do
	assert_eq "bigfile-read-bs-$bs" "$want" "$(dd if="$M/big" bs=$bs status=none | sha256sum | cut -d' ' -f1)"
done
# unaligned overwrite across stripe units and columns
head -c 1500000 /dev/urandom >"$T/patch"
dd if="$T/patch" of="$T/big" bs=1 seek=$((SIZE / 3 + 7)) conv=notrunc status=none 2>/dev/null ||
	dd if="$T/patch" of="$T/big" oflag=seek_bytes seek=$((SIZE / 3 + 7)) conv=notrunc status=none
dd if="$T/patch" of="$M/big" oflag=seek_bytes seek=$((SIZE / 3 + 7)) conv=notrunc status=none
e2e_remount || fail bigfile-remount2 "remount failed"
assert_eq bigfile-overwrite "$(sha "$T/big")" "$(sha "$M/big")"
check bigfile-sync ctl sync
e2e_verify

# Back down after writes (docs/OPERATIONS.md "Memory"): once idle (the
# journal checkpointed, no commit for a commit_interval), each iod marks
# its journal's spare slabs free (MADV_FREE), and after 12
# commit_intervals it unmaps them.
t0=$(now_ms)
declare -A seen_free=() gone=() left=()
while ((${#gone[@]} < 4 && $(now_ms) - t0 < 60000)); do
	for n in 1 2 3 4; do
		[[ -n ${gone[$n]:-} ]] && continue
		"$PY" "$E2E_DIR/metrics.py" get "http://127.0.0.1:$((TWINFS_PORT + 5 + n))/metrics" >"$T/m$n"
		cache=$("$PY" "$E2E_DIR/metrics.py" sum "$T/m$n" twinfs_iod_journal_cache_bytes)
		free=$("$PY" "$E2E_DIR/metrics.py" sum "$T/m$n" twinfs_iod_journal_cache_free_bytes)
		((cache > 0 && free == cache)) && [[ -z ${seen_free[$n]:-} ]] &&
			seen_free[$n]=$(($(now_ms) - t0))
		left[$n]=$cache
		((cache == 0)) && gone[$n]=$(($(now_ms) - t0))
	done
	sleep 0.2
done
for n in 1 2 3 4; do
	[[ -n ${seen_free[$n]:-} ]] && pass "mem-iod$n-idle-free" ||
		fail "mem-iod$n-idle-free" "its slabs were never all marked free before they were unmapped"
	[[ -n ${gone[$n]:-} ]] && pass "mem-iod$n-idle-slabs" ||
		fail "mem-iod$n-idle-slabs" "${left[$n]} bytes of journal slabs still mapped 60 s after the writes"
	echo "# iod $n: slabs marked free ${seen_free[$n]:-?} ms, unmapped ${gone[$n]:-?} ms after the verify"
done
e2e_end
