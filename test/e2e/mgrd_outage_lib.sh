# mgrd_outage_lib.sh - the body of the mgrd outage drills (t_mgrd_hang.sh:
# SIGSTOP; t_mgrd_partition.sh: network namespace, link cut).  Source it
# after lib.sh and failover_lib.sh, before e2e_begin; then call
# mgrd_outage_drill CUT HEAL NAME with two functions that cut mgrd off and
# bring it back.
#
# What it checks: a client writes and reads files it opened before the cut
# and data I/O goes on (no write or read waits longer than request_timeout
# + 1 s; clients need mgrd only for metadata), the bytes are right; a
# metadata operation started during the outage waits, and completes once
# mgrd is back within mgr_timeout; one that finds mgrd cut off for longer
# fails with EIO after mgr_timeout (not before, not much later) and the
# client's log names mgrd; one interrupted by a caught signal ends with
# EINTR instead of waiting, and so do a non-blocking F_SETLK, an F_GETLK
# and an fsync (mgrd_intr.py), which leave no lock behind and lose no
# size; afterwards everything works and verify is clean.
# mgr_timeout and request_timeout are set in the cluster's twinfs.conf
# only: the client takes them from mgrd's map at mount (its log says so),
# monitor_interval from its mount option (failover_lib.sh).

export TWINFS_MGR_TIMEOUT=${TWINFS_MGR_TIMEOUT:-6s}
MT_MS=$(awk -v v="$TWINFS_MGR_TIMEOUT" 'BEGIN { n = v + 0
	if (v ~ /ms$/) print n; else if (v ~ /s$/) print n * 1000; else print n }')

mgrd_outage_drill() {
	local cut=$1 heal=$2 n=$3 size iopid lkpid mk1 t0 out el i
	local want="timers: request_timeout $RT_MS ms (cluster), mgr_timeout $MT_MS ms (cluster), monitor_interval $MI_MS ms (mount option)"
	check "$n-client-timers" grep -qF "$want" "$TWINFS_RUN_DIR/logs/mount.log"
	size=$(scale $((64 << 20)))
	head -c "$size" /dev/urandom >"$T/src"
	cp "$T/src" "$M/r"
	sync
	drop_caches
	"$PY" "$E2E_DIR/mgrd_outage_io.py" "$T/src" "$M/w" "$M/r" "$T" >"$T/io.out" 2>&1 &
	iopid=$!
	for ((i = 0; i < 300; i++)); do grep -q ready "$T/io.out" && break; sleep 0.1; done

	local log=$TWINFS_RUN_DIR/logs/mgrd.log lines0
	lines0=$(wc -l <"$log")
	$cut || fail "$n-cut" "cannot cut mgrd off"
	touch "$T/go"
	t0=$(now_ms)
	mkdir "$M/during" 2>"$T/mkdir1.err" &
	mk1=$!
	for ((i = 0; i < 1200; i++)); do grep -q '^done' "$T/io.out" && break
		kill -0 $iopid 2>/dev/null || break; sleep 0.05; done
	out=$(tail -n 1 "$T/io.out")
	if [[ $out =~ ^done\ ([0-9]+)$ ]]; then
		echo "# $((size >> 20)) MiB written and read back with mgrd cut off; longest 1 MiB op ${BASH_REMATCH[1]} ms"
		((BASH_REMATCH[1] <= RT_MS + 1000)) && pass "$n-data-io-goes-on" ||
			fail "$n-data-io-goes-on" "an op took ${BASH_REMATCH[1]} ms"
	else
		fail "$n-data-io-goes-on" "$(tr '\n' ' ' <"$T/io.out")"
	fi
	# The outage lasts at least 2 s, whatever the speed of the I/O above.
	while (($(now_ms) - t0 < 2000)); do sleep 0.1; done
	kill -0 $mk1 2>/dev/null && pass "$n-metadata-waits" ||
		fail "$n-metadata-waits" "mkdir returned during the outage: $(cat "$T/mkdir1.err")"
	$heal
	if wait $mk1; then pass "$n-metadata-after-heal"; else
		fail "$n-metadata-after-heal" "$(cat "$T/mkdir1.err")"; fi
	echo "# mkdir during the outage returned after $(($(now_ms) - t0)) ms"
	[[ -d $M/during ]] && pass "$n-dir-exists" || fail "$n-dir-exists"

	# Lock calls wait for mgrd too, and their bodies carry no ctx, and an
	# fsync waits for its size report: a caught signal must end a
	# non-blocking F_SETLK, an F_GETLK and an fsync the same way.  The
	# files are opened while mgrd answers.
	"$PY" "$E2E_DIR/mgrd_intr.py" "$M/r" "$M/fs-$n" "$T" >"$T/lock.out" 2>&1 &
	lkpid=$!
	for ((i = 0; i < 300; i++)); do grep -q ready "$T/lock.out" && break; sleep 0.1; done

	# An outage longer than mgr_timeout: EIO after mgr_timeout.
	$cut
	# Meanwhile a wait for mgrd honours interrupts (docs/ARCHITECTURE.md "Client"): a caught
	# signal ends a mkdir with EINTR once the client's grace for an
	# answer on the wire (FC_MGR_INTR_GRACE_MS, 1 s, mgrd not answering
	# the client's ping) is over.  mgrd may still apply it after the heal:
	# a silent server leaves the outcome unknown.  (From /: python looks
	# for modules in its working directory.)
	out=$(cd / && "$PY" - "$M/intr-$n" 2>&1 <<'EOF'
import os, signal, sys, time
signal.signal(signal.SIGALRM, lambda s, f: None)
signal.setitimer(signal.ITIMER_REAL, 0.5)
t0 = time.monotonic()
try:
    os.mkdir(sys.argv[1])
    print("made")
except InterruptedError:
    print("eintr %d" % ((time.monotonic() - t0) * 1000))
except OSError as e:
    print("error %r" % e)
EOF
)
	echo "# mkdir interrupted 500 ms into the outage: $out"
	[[ $out =~ ^eintr\ ([0-9]+)$ ]] && ((BASH_REMATCH[1] <= 1500 + RT_MS)) &&
		pass "$n-metadata-interruptible" || fail "$n-metadata-interruptible" "$out"
	touch "$T/lockgo"
	for ((i = 0; i < 600; i++)); do grep -q '^fsync' "$T/lock.out" && break
		kill -0 $lkpid 2>/dev/null || break; sleep 0.05; done
	echo "# calls interrupted 500 ms in: $(grep -E '^(setlk|getlk|fsync)' "$T/lock.out" | tr '\n' ' ')"
	for c in setlk getlk fsync; do
		out=$(grep "^$c " "$T/lock.out")
		[[ $out =~ ^$c\ EINTR\ ([0-9]+)$ ]] && ((BASH_REMATCH[1] <= 1500 + RT_MS)) &&
			pass "$n-$c-interruptible" ||
			fail "$n-$c-interruptible" "${out:-$(tr '\n' ' ' <"$T/lock.out")}"
	done
	t0=$(now_ms)
	if mkdir "$M/too-late" 2>"$T/mkdir2.err"; then
		fail "$n-metadata-eio" "mkdir succeeded with mgrd cut off"
	else
		el=$(($(now_ms) - t0))
		echo "# mkdir with mgrd cut off failed after $el ms: $(cat "$T/mkdir2.err")"
		grep -q 'Input/output error' "$T/mkdir2.err" && ((el >= MT_MS - 500 &&
			el <= MT_MS + RT_MS + 2000)) && pass "$n-metadata-eio" ||
			fail "$n-metadata-eio" "after $el ms (mgr_timeout $MT_MS ms): $(cat "$T/mkdir2.err")"
	fi
	grep -qE "mgrd .*(timed out|gave up)" "$TWINFS_RUN_DIR/logs/mount.log" &&
		pass "$n-client-log" || fail "$n-client-log" \
		"$(grep -i mgrd "$TWINFS_RUN_DIR/logs/mount.log" | tail -n 3 | tr '\n' ' ')"
	$heal

	touch "$T/close" "$T/lockclose"
	if wait $iopid; then pass "$n-close"; else fail "$n-close" "$(tr '\n' ' ' <"$T/io.out")"; fi
	# mgrd may have granted the interrupted F_SETLK after all; the close
	# of its file dropped it (locks.c "uncertain"), so another process
	# takes the lock.
	wait $lkpid
	out=$("$PY" "$E2E_DIR/lockprobe.py" "$M/r" posix try wr 0 0 2>&1)
	[[ $out == ok ]] && pass "$n-lock-not-left" || fail "$n-lock-not-left" "$out"
	# The interrupted fsync's size report was sent again (at the close):
	# nothing written is lost.
	assert_eq "$n-fsync-size-kept" 4096 "$(stat -c %s "$M/fs-$n" 2>&1)"
	# mgrd heard from no iod while cut off: it must not have demoted any
	# (that would leave one twin of each group stale, and reads failing
	# until the resyncs end).
	out=$(tail -n +"$((lines0 + 1))" "$log" | grep -E ' -> (down|suspect)')
	[[ -z $out ]] && pass "$n-nobody-demoted" ||
		fail "$n-nobody-demoted" "$(head -n 3 <<<"$out" | tr '\n' ' ')"
	e2e_wait_healthy 60 || fail "$n-healthy" "$(ctl status 2>&1 | tr '\n' ' ')"
	drop_caches
	assert_same_file "$n-bytes" "$T/src" "$M/w"
	check "$n-status" ctl status
	mkdir "$M/after" && pass "$n-metadata-back" || fail "$n-metadata-back"
}
