#!/usr/bin/env bash
# t_journal_abort.sh - the sticky journal abort reaches mgrd (journal/FORMAT.md J12): the
# journal of one iod of group 0 fails a write with EIO (TWINFS_TEST_FAULTS=1
# and SIGUSR1, iod/main.c) while a client writes a file of that group.  The
# iod refuses writes, reports itself and fails pings, mgrd marks it down and
# needing resync, its twin completes the writes alone: the writer sees no
# error, the map says `down`, the logs name the iod, the journal file and the
# cause, and the file reads back byte for byte.  Then the iod is killed and
# restarted: replay, resync, and `twinfsctl verify` is clean.  Two rounds,
# iod 2 then iod 1, over the same file, so that the aborted iod is the
# file's primary in one round and its secondary in the other.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_TEST_FAULTS=1
e2e_begin journal_abort
e2e_tmpdir T

mkdir -p g0 && check setstripe-g0 ctl setstripe -S 64K -c 1 -i 0 g0
SIZE=$(( $(scale $((64 << 20))) < (16 << 20) ? (16 << 20) : $(scale $((64 << 20))) ))

# writer SRC DST DIR: writes SRC over DST in 1 MiB chunks with an fsync
# every 4; after the first half it creates DIR/half and waits (up to 30 s)
# for DIR/go, so that the fault is armed while the file is open and being
# written.  Prints "ok" or the error.
writer() {
	"$PY" - "$@" <<'EOF'
import os, sys, time
src, dst, d = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
chunk = 1 << 20
n = len(data) // chunk
try:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(n):
        os.pwrite(fd, data[i * chunk:(i + 1) * chunk], i * chunk)
        if i % 4 == 3:
            os.fsync(fd)
        if i == n // 2:
            open(os.path.join(d, "half"), "w").close()
            for _ in range(600):
                if os.path.exists(os.path.join(d, "go")):
                    break
                time.sleep(0.05)
    os.fsync(fd)
    os.close(fd)
    print("ok")
except OSError as e:
    print("error at chunk", i, e)
EOF
}

for victim in 2 1; do
	head -c "$SIZE" /dev/urandom >"$T/src$victim"
	rm -f "$T/half" "$T/go"
	writer "$T/src$victim" "$M/g0/f" "$T" >"$T/writer.out" 2>&1 &
	wpid=$!
	for _ in $(seq 1 600); do [[ -e $T/half ]] && break; sleep 0.05; done
	[[ -e $T/half ]] || fail "abort-$victim-writer-half" "writer made no progress"
	# Arm the fault: the next journal write of the victim fails with EIO.
	kill -USR1 "$(cat "$TWINFS_RUN_DIR/pids/iod$victim.pid")"
	sleep 0.2
	touch "$T/go"
	wait "$wpid"
	assert_eq "abort-$victim-writer-no-error" ok "$(tail -n 1 "$T/writer.out")"
	out=$(wait_state $victim '^down,needs-resync$' 10000) &&
		pass "abort-$victim-map-down" || fail "abort-$victim-map-down" "$out"
	log=$TWINFS_RUN_DIR/logs/iod$victim.log
	jf=$TWINFS_RUN_DIR/iod$victim/journal
	grep -aq "iod $victim: journal $jf aborted after an I/O error" "$log" &&
		grep -aq "journal $jf: .* failed (Input/output error); journal aborted" "$log" &&
		pass "abort-$victim-iod-log" ||
		fail "abort-$victim-iod-log" "no abort line naming iod $victim and its journal"
	grep -aq "mgrd: iod $victim (.*) reports itself failed: its journal aborted" \
		"$TWINFS_RUN_DIR/logs/mgrd.log" && pass "abort-$victim-mgrd-log" ||
		fail "abort-$victim-mgrd-log" "mgrd did not log the self-report"
	# The survivor serves every byte (the kernel cache is dropped).
	e2e_remount
	assert_same_file "abort-$victim-bytes" "$T/src$victim" "$M/g0/f"
	# Restart: kill -9 (the aborted journal cannot be closed cleanly),
	# replay at start, rejoin and resync from the twin.
	lc kill-iod $victim >/dev/null
	lines=$(wc -l <"$log")
	lc start-iod $victim >/dev/null
	out=$(wait_state $victim '^(resyncing|up)$' 20000) &&
		pass "abort-$victim-rejoins" || fail "abort-$victim-rejoins" "$out"
	tail -n +$((lines + 1)) "$log" | grep -aq "transactions replayed" && pass "abort-$victim-replayed" ||
		fail "abort-$victim-replayed" "no replay line after the restart"
	e2e_wait_healthy 120 && pass "abort-$victim-resynced" ||
		fail "abort-$victim-resynced" "$(ctl status 2>&1 | tr '\n' ' ')"
	e2e_verify "abort-$victim-verify"
	e2e_remount
	assert_same_file "abort-$victim-bytes-after-resync" "$T/src$victim" "$M/g0/f"
done

e2e_end
