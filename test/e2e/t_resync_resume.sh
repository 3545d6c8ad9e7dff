#!/usr/bin/env bash
# t_resync_resume.sh - resync drill, "a rebuild survives the restart of
# either iod (it resumes, not restarts from zero)": a rate-limited full
# rebuild of iod 1 from iod 2 is cut by kill -9 of the source (iod 2)
# midway, and mgrd is restarted too; iod 2 is started again and the job
# resumes from the cursor in mgrd's journal.
# From the job's counters (rebuild --status --json): the first run had
# copied a good part, and the second run copied about the remainder, not
# everything again.  Then the job is done, verify is clean and every byte
# is right.  auto_resync is off so that only the admin's job copies.
# Then incremental copies whose runs fail: after a map change in the run
# they stay incremental, without one the second failure copies in full
# (below).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_resume
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass resume-iod1-down || fail resume-iod1-down "$out"
# Four files (subfile boundaries) and one large one (a cursor inside a
# subfile), all written while iod 1 is away.
part=$(scale $((16 << 20)))
for i in 1 2 3 4; do
	head -c "$part" /dev/urandom >"$T/f$i"
	cp "$T/f$i" "$M/g0/f$i"
done
head -c $((part * 3)) /dev/urandom >"$T/big"
cp "$T/big" "$M/g0/big"
sync
total=$((part * 7))
(cd / && lc start-iod 1 >/dev/null)
out=$(wait_state 1 '^resyncing' 10000) && pass resume-resyncing || fail resume-resyncing "$out"

# About 8 s for the whole copy at every scale.
rate=$(((total >> 20) / 8))
((rate >= 1)) || rate=1
# Waited for on a terminal (script(1) gives it a pty): the progress line is
# redrawn in place, and --wait outlasts the source's restart.
script -qec "$LC ctl rebuild 1 --full --wait --rate-limit $rate" /dev/null \
	</dev/null >"$T/bar" 2>&1 &
barpid=$!
done1=0
for ((i = 0; i < 300; i++)); do
	read -r done1 tot1 < <(rjob 1 bytes_done bytes_total)
	((tot1 > 0 && done1 * 100 >= tot1 * 40)) && break
	sleep 0.1
done
(cd / && lc kill-iod 2 >/dev/null)
out=$(wait_state 2 '^down' 10000) && pass resume-source-down || fail resume-source-down "$out"
# mgrd is killed and restarted too while the source is away: the cursor,
# the counters, the admin's request and its rate limit come back from
# mgrd's journal (auto_resync is off: only the journaled job resumes).
(cd / && lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null) ||
	fail resume-mgrd-restart "kill/start failed"
st1=
for ((i = 0; i < 100; i++)); do
	read -r st1 done1 copied1 tot1 < <(rjob 1 state bytes_done bytes_copied bytes_total)
	[[ -n $st1 ]] && break
	sleep 0.1
done
echo "# killed the source at $done1 of $tot1 bytes ($copied1 copied); job $st1 after an mgrd restart"
assert_eq resume-total "$total" "$tot1"
((done1 * 100 >= total * 30 && done1 < total)) && pass resume-first-run-midway ||
	fail resume-first-run-midway "done $done1 of $total"
out=$(ctl rebuild --status 1)
grep -qE '^iod 1: resync job (interrupted|failed)' <<<"$out" &&
	pass resume-status-cut || fail resume-status-cut "$(tr '\n' ' ' <<<"$out")"

(cd / && lc start-iod 2 >/dev/null)
if e2e_wait_healthy 60; then pass resume-healthy; else
	fail resume-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st2 done2 copied2 tot2 runs < <(rjob 1 state bytes_done bytes_copied bytes_total runs)
second=$((copied2 - copied1))
echo "# second run copied $second bytes for the remaining $((total - done1)) (runs: $runs)"
assert_eq resume-done "done $total $total" "$st2 $done2 $tot2"
((runs >= 2)) && pass resume-runs || fail resume-runs "runs $runs"
# Roughly the remainder: at least it (minus what the first run got acked
# after the status we read), at most it plus a little lag of the cursor.
slack=$((total / 8))
((second >= total - done1 - slack && second <= total - done1 + slack)) &&
	pass resume-copied-remainder ||
	fail resume-copied-remainder "second run copied $second, remainder $((total - done1)), total $total"
if wait $barpid; then pass resume-wait-exit; else
	fail resume-wait-exit "$(tr '\r' '\n' <"$T/bar" | tail -n 3)"; fi
tr '\r' '\n' <"$T/bar" | grep -v '^$' | tail -n 3 | sed 's/\x1b\[K//; s/^/#   /'
# Redrawn in place: many progress frames, each after a carriage return
# and cleared to the end of the line, on few lines.
frames=$(grep -o $'\rrebuild iod 1 \[[#.]*\] *[0-9.]*%  [0-9.]* MiB / [0-9.]* MiB  [0-9.]* MB/s  ETA [^\r]*\x1b\[K' "$T/bar" | wc -l)
lines=$(wc -l <"$T/bar")
((frames >= 5 && lines <= 3)) && grep -q 'done, up' "$T/bar" && pass resume-progress-tty ||
	fail resume-progress-tty "$frames frames on $lines lines"
grep -q "resync of iod 1 resumes after ino" "$TWINFS_RUN_DIR/logs/iod2.log" &&
	pass resume-logged || fail resume-logged

# A map change racing a copy.  The target refuses the copy's forwards of
# the older epoch (-ESTALE) and the run fails; it must not count towards
# the fall-back to a full copy (mgrd/resync.c "raced"): with several
# groups resyncing at once, each one's end changes the map, and two such
# races made incremental copies of whole disks full ones.  The refusal is
# the fault hook (iod/main.c: TWINFS_TEST_REFUSE=stale,resync, SIGUSR2),
# armed right after a real map change (iod 3 goes down, then comes back)
# in each of two runs in a row: both retried incremental.  Then the same
# two refusals without a map change: the second one does fall back.
MLOG=$TWINFS_RUN_DIR/logs/mgrd.log
SLOG=$TWINFS_RUN_DIR/logs/iod2.log
# incremental_gap NAME FILE...: iod 1 misses FILEs (written while it is
# down; it restarts with the fault hook), then an incremental, rate-limited
# copy (about 8 s) starts.  First a clearing cycle clears the marks of
# what both twins have, so that the copy is FILEs alone.
incremental_gap() {
	local name=$1 out f rate
	shift
	ctl sync >/dev/null
	sleep 3
	(cd / && lc kill-iod 1 >/dev/null)
	out=$(wait_state 1 '^down' 10000) || fail "$name-iod1-down" "$out"
	for f in "$@"; do
		head -c "$part" /dev/urandom >"$T/$f"
		cp "$T/$f" "$M/g0/$f"
	done
	sync
	(cd / && TWINFS_TEST_FAULTS=1 TWINFS_TEST_REFUSE=stale,resync \
		lc start-iod 1 >/dev/null)
	out=$(wait_state 1 '^resyncing' 10000) && pass "$name-resyncing" ||
		fail "$name-resyncing" "$out"
	rate=$((((part * $#) >> 20) / 8))
	((rate >= 1)) || rate=1
	N0=$(wc -l <"$MLOG")
	check "$name-rebuild" ctl rebuild 1 --rate-limit "$rate"
}
# refuse NAME NEXT [MAPCHANGE...]: once a run copies, optionally change the
# map (lc MAPCHANGE...), have iod 1 refuse the copy's next write, and wait
# for the run after the failure, which must be NEXT ("incremental" or
# "full copy").
refuse() {
	local name=$1 next=$2 n
	shift 2
	check "$name-run" wait_log "$MLOG" "$N0" 'resync of iod 1 from iod 2 \(starts\|resumes\)' 10000
	sleep 0.5
	(($#)) && (cd / && lc "$@" >/dev/null)
	n=$(wc -l <"$SLOG")
	check "$name-armed" signal_iod 1 USR2 'forwarded resync write is refused with ESTALE' 10000
	check "$name-failed" wait_log "$SLOG" "$n" 'resync of iod 1: WRITE ino .* at the target: Stale file handle' 10000
	N0=$(wc -l <"$MLOG")
	check "$name-then-${next// /-}" wait_log "$MLOG" "$N0" "resync of iod 1 from iod 2 resumes ($next" 10000
}
incremental_gap race f5 f6 f7 f8
M0=$N0
refuse race1 incremental kill-iod 3
refuse race2 incremental start-iod 3
check race-logged-why wait_log "$MLOG" "$M0" 'resync of iod 1 from iod 2 failed: Stale file handle (the map changed during the copy); retrying (incremental)' 1000
out=$(wait_state 1 '^up$' 60000) && pass race-iod1-up || fail race-iod1-up "$out"
n=$(tail -n +"$((M0 + 1))" "$MLOG" | grep -c 'resync of iod 1 .*full copy')
assert_eq race-stays-incremental 0 "$n"
assert_eq race-job-incremental "False" "$(rjob 1 full)"
ctl rebuild 3 >/dev/null
out=$(wait_state 3 '^up$' 60000) && pass race-iod3-up || fail race-iod3-up "$out"

drop_caches
for f in f1 f2 f3 f4 big f5 f6 f7 f8; do
	assert_same_file "resume-bytes-$f" "$T/$f" "$M/g0/$f"
	rm "$M/g0/$f"     # the full copy below copies only what follows
done

incremental_gap odd f9 f10 f11 f12
refuse odd1 incremental
refuse odd2 "full copy"
out=$(wait_state 1 '^up$' 60000) && pass odd-iod1-up || fail odd-iod1-up "$out"
drop_caches
for f in f9 f10 f11 f12; do
	assert_same_file "resume-bytes-$f" "$T/$f" "$M/g0/$f"
done
e2e_verify
e2e_end
