#!/usr/bin/env bash
# t_fuzz.sh - a randomized fuzzer of the data path (fuzz_io.py): a few
# worker processes at once drive the mount with extreme and odd offsets,
# lengths, modes and flags (pwrite up to 2^63-1, O_DIRECT aligned and not,
# O_APPEND, O_TRUNC, ftruncate, fallocate in every mode, copy_file_range,
# shared mmap, SEEK_DATA/SEEK_HOLE, fsync), each on its own files and on one
# file they share.  Every call must succeed or fail with an errno its
# operation allows (fuzz_io.py lists them and why); EIO, ENOTCONN, a hang or
# a crash is a failure, and every file must read back as its model says.
# Each round ends with a punch that makes every iod checkpoint its journal
# (so a request journaled at an offset the iods' file systems refuse fails
# there, inside the round), and then: every iod is up (twinfsctl status),
# a plain file still writes and reads back byte for byte, and both twins
# agree (twinfsctl verify).
#
# Knobs: TWINFS_FUZZ_SEED (the seed printed first reruns a run),
# TWINFS_FUZZ_ROUNDS, TWINFS_FUZZ_OPS (per worker and round),
# TWINFS_FUZZ_WORKERS, TWINFS_FUZZ_MAX_OFF (keep offsets below it, to fuzz
# the rest while a bug at the extremes is open).
. "$(dirname "$0")/lib.sh"
# A small journal: checkpoints also come on their own within a round.
# (twinfsctl sync is no substitute for the punch at the end of a round: in
# data=journal it only syncs the log, and what it holds goes home later.)
export TWINFS_JOURNAL_SIZE=${TWINFS_JOURNAL_SIZE:-16M}
e2e_begin fuzz
e2e_tmpdir T

ROUNDS=${TWINFS_FUZZ_ROUNDS:-3}
OPS=${TWINFS_FUZZ_OPS:-$(scale 800)}
((OPS < 60)) && OPS=60
WORKERS=${TWINFS_FUZZ_WORKERS:-3}
SEED=${TWINFS_FUZZ_SEED:-$((RANDOM * 32768 + RANDOM))}
SPAN=$(scale $((8 << 20)))
((SPAN < 1 << 20)) && SPAN=$((1 << 20))
# A round that takes longer than this hangs (the driver says where).
DEADLINE=$((60 + OPS / 2))
MAX_OFF=${TWINFS_FUZZ_MAX_OFF:-9223372036854775807}
echo "# seed $SEED: $ROUNDS rounds of $WORKERS workers x $OPS ops (TWINFS_FUZZ_SEED=$SEED reruns them)"

# Layouts: the default (every group), small units over both groups, and
# one group only, so offsets map to subfile offsets in different ways.
D=$M/fz
mkdir -p "$D" || exit 1
check fuzz-layout-ckpt ctl setstripe -S 64K -c 2 "$D/ckpt"
for ((w = 0; w < WORKERS; w++)); do
	mkdir -p "$D/w$w"
	case $((w % 4)) in
	1) ctl setstripe -S 64K -c 2 "$D/w$w" >/dev/null ;;
	2) ctl setstripe -S 1M -c 1 -i 1 "$D/w$w" >/dev/null ;;
	3) ctl setstripe -S 64K -c 1 -i 0 "$D/w$w" >/dev/null ;;
	esac || fail "fuzz-layout-w$w" "setstripe failed"
done

PLAIN=$(scale $((8 << 20)))
for ((r = 1; r <= ROUNDS; r++)); do
	failed_before=$E2E_FAIL
	timeout -k 5 $((DEADLINE + 30)) "$PY" "$E2E_DIR/fuzz_io.py" -s "$SEED" -r "$r" \
		-w "$WORKERS" -n "$OPS" --span "$SPAN" --deadline "$DEADLINE" --max-off "$MAX_OFF" \
		--ckpt "$D/ckpt" --trace-dir "$T" "$D" >"$T/out" 2>&1
	rc=$?
	run_checks cat "$T/out"
	if ((rc != 0 && E2E_FAIL == failed_before)); then
		fail "fuzz-r$r-driver" "fuzz_io.py exited $rc without a FAIL line: $(tail -n 3 "$T/out" | tr '\n' ' ')"
	fi

	# Every iod must still be up and answering.
	healthy=0
	if out=$(ctl -t 2000 status 2>&1); then
		pass "fuzz-r$r-status"
		healthy=1
	else
		fail "fuzz-r$r-status" "twinfsctl status: $(echo "$out" | tail -n 1)"
		echo "$out" | sed 's/^/#   /'
		grep -h -iE 'abort|EFBIG|too large' "$TWINFS_RUN_DIR"/logs/iod*.log 2>/dev/null |
			head -n 8 | sed 's/^/#   /'
	fi

	# A plain file still goes through, byte for byte, from the servers.
	head -c "$PLAIN" /dev/urandom >"$T/plain"
	if timeout 60 cp "$T/plain" "$D/plain" 2>"$T/cp.err"; then
		drop_caches
		assert_same_file "fuzz-r$r-plain-file" "$T/plain" "$D/plain"
	else
		fail "fuzz-r$r-plain-file" "cp: $(tr '\n' ' ' <"$T/cp.err")"
	fi

	# twinfsctl verify walks a subfile 1 MiB at a time up to its size: cut
	# huge files a failed worker left behind (the driver cuts its own), or
	# remove them.
	for h in "$D"/w*/h; do
		[[ -e $h ]] || continue
		timeout 30 truncate -s '<64M' "$h" 2>/dev/null || timeout 30 rm -f "$h"
	done
	# A degraded group is already a failure, and verify would skip it.
	((healthy)) && e2e_verify "fuzz-r$r-verify"
	# After a failure the later rounds would only repeat it.
	((E2E_FAIL > failed_before)) && break
done
echo "# seed $SEED (TWINFS_FUZZ_SEED=$SEED reruns it)"
e2e_end
