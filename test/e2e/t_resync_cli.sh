#!/usr/bin/env bash
# t_resync_cli.sh - with auto_resync = false: a restarted iod stays
# `resyncing` (status shows its percent) until `twinfsctl rebuild 1 --wait`
# starts the copy, prints progress and exits 0 once it is up; a second
# `rebuild --wait` joins the running job without asking mgrd again; on an
# up iod whose job just ended it shows that job's outcome, and on an up iod
# with no recent job it refuses (exit 2) without --full instead of
# copying the healthy twin again; `rebuild --wait` right after
# `start-iod` waits for the iod to register, and gives up (exit 1, naming
# the iod and its state) when it never does; --accept-stale is refused
# when the twin can serve.  rebuild --status shows the job: "not started" before, then
# done with start/end times and byte counts equal to the data copied, in
# text and --json, and still after an mgrd restart (journaled record).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_cli
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
mgrlog=$TWINFS_RUN_DIR/logs/mgrd.log
# Admin REBUILDs of iod N mgrd has taken so far.
asks() { grep -c "admin asks for the resync of iod $1 " "$mgrlog"; }
live_copies() { grep -c 'rebuild of a live twin' "$mgrlog"; }

# iod 4 goes down and stays down: rebuild --wait waits for it to register
# (request_timeout x 3, at least 30 s), runs meanwhile, and is checked
# before the cluster must be healthy again.
(cd / && lc kill-iod 4 >/dev/null)
out=$(wait_state 4 '^down' 10000) && pass cli-iod4-down || fail cli-iod4-down "$out"
ctl rebuild --wait 4 >"$T/w4.out" 2>"$T/w4.err" &
w4pid=$!
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass cli-down || fail cli-down "$out"
head -c "$(scale $((64 << 20)))" /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"
sync
(cd / && lc start-iod 1 >/dev/null)
out=$(wait_state 1 '^resyncing' 10000) && pass cli-resyncing || fail cli-resyncing "$out"
sleep 1.5
assert_eq cli-no-auto-resync resyncing "$(iod_state 1)"
out=$(ctl status 2>&1)   # exits 3: group 0 is degraded
grep -qE '^ *1 .*resyncing [0-9]+\.[0-9]%' <<<"$out" &&
	pass cli-status-percent || fail cli-status-percent "$(tr '\n' ' ' <<<"$out")"
out=$(ctl rebuild --status 1 2>&1)
grep -q '^iod 1: resync job not started' <<<"$out" &&
	pass cli-status-not-started || fail cli-status-not-started "$out"
if ctl rebuild --accept-stale 1 >/dev/null 2>&1; then
	fail cli-accept-stale-refused "accepted while iod 2 can serve"
else
	pass cli-accept-stale-refused
fi

# A full copy (--full) at about 4 s of progress lines, at every scale.
rate=$(($(stat -c %s "$T/f") / 4 >> 20))
((rate >= 1)) || rate=1
a0=$(asks 1)
ctl rebuild 1 --wait --full --rate-limit "$rate" >"$T/out" 2>&1 &
rbpid=$!
# A second --wait while the job runs joins it: no second REBUILD (which
# would also drop the job's rate limit).
t0=$(now_ms)
until [[ $(rjob 1 state) == running ]] || (($(now_ms) - t0 > 10000)); do
	sleep 0.05
done
ctl rebuild --wait 1 >"$T/join.out" 2>&1
rc=$?
assert_eq cli-join-exit 0 "$rc"
grep -q '^rebuild iod 1: joining its running resync job (full copy from iod 2)' "$T/join.out" &&
	grep -q 'done, up' "$T/join.out" && pass cli-join ||
	fail cli-join "$(head -c 300 "$T/join.out")"
wait $rbpid
rc=$?
assert_eq cli-join-no-rebuild $((a0 + 1)) "$(asks 1)"
sed 's/^/#   /' "$T/out" | tail -n 4
assert_eq cli-rebuild-exit 0 "$rc"
grep -qE '^rebuild iod 1 \[[#.]+\] +[0-9]+\.[0-9]%  [0-9.]+ MiB / [0-9.]+ MiB  [0-9.]+ MB/s  ETA ' "$T/out" &&
	pass cli-rebuild-progress ||
	fail cli-rebuild-progress "$(head -c 300 "$T/out")"
grep -q 'done, up' "$T/out" && pass cli-rebuild-done || fail cli-rebuild-done
assert_eq cli-state-up up "$(iod_state 1)"
# Up and in sync, its job just done: --wait shows that outcome, starts
# nothing.
out=$(ctl rebuild 1 --wait 2>&1)
rc=$?
assert_eq cli-rebuild-up-recent-exit 0 "$rc"
grep -q '^rebuild iod 1: up; its last resync job (full copy from iod 2) ended done at .* nothing to start' <<<"$out" &&
	pass cli-rebuild-up-recent || fail cli-rebuild-up-recent "$out"
# The job record: done, times, bytes_total = bytes_done = the data of
# group 0 (one subfile of the 64 MiB file), no errors.
size=$(stat -c %s "$T/f")
status_json() {
	rjob 1 iod state source full bytes_total bytes_done files_total files_done errors |
		tr '\n' ' '
	rjob 1 start_unix_ms end_unix_ms bytes_copied | awk -v t="$size" \
		'{ print ($1 > 0), ($2 >= $1), ($3 >= t) }'
}
assert_eq cli-status-json "1 done 2 True $size $size 1 1 0 1 1 1" "$(status_json)"
out=$(ctl rebuild --status 2>&1)
grep -q '^iod 1: resync job done' <<<"$out" && grep -q 'started: .* UTC' <<<"$out" &&
	grep -qE "bytes: +$size of $size done \(100.0%\)" <<<"$out" &&
	pass cli-status-text || fail cli-status-text "$(tr '\n' ' ' <<<"$out")"
(cd / && lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null)
out=$(wait_state 1 '^up' 10000) || fail cli-mgrd-back "$out"
assert_eq cli-status-after-mgrd-restart "1 done 2 True $size $size 1 1 0 1 1 1" "$(status_json)"

# iod 4 never came back: rebuild --wait gave up, naming it and its state.
wait $w4pid
assert_eq cli-register-timeout-exit 1 "$?"
grep -q 'waiting for iod 4 to register (down' "$T/w4.err" &&
	grep -qE 'rebuild iod 4: it is still down.* after waiting [0-9]+ s for it to register' "$T/w4.err" &&
	pass cli-register-timeout || fail cli-register-timeout "$(tr '\n' ' ' <"$T/w4.err")"
(cd / && lc start-iod 4 >/dev/null)
ctl rebuild --wait 4 >"$T/w4.out" 2>&1 && pass cli-iod4-back ||
	fail cli-iod4-back "$(tail -n 2 "$T/w4.out")"
check cli-status-healthy ctl status

l0=$(live_copies)
# Up, in sync and no job: a full copy needs --full, with or without --wait.
for w in "" --wait; do
	out=$(ctl rebuild $w 2 2>&1)
	rc=$?
	assert_eq "cli-rebuild-healthy-refused$w" 2 "$rc"
	grep -q 'rebuild iod 2: refused: iod 2 is up and in sync; a full copy of a healthy twin needs --full' <<<"$out" &&
		pass "cli-rebuild-healthy-message$w" || fail "cli-rebuild-healthy-message$w" "$out"
done
assert_eq cli-rebuild-no-live-copy "$l0" "$(live_copies)"
assert_eq cli-state-2-up up "$(iod_state 2)"

# start-iod and rebuild --wait together: it waits for the iod to register,
# then follows its (incremental) resync to the end.
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass cli-down-again || fail cli-down-again "$out"
dd if=/dev/urandom of="$M/g0/f" bs=64K count=4 seek=3 conv=notrunc status=none
dd if="$M/g0/f" of="$T/f" bs=64K count=4 skip=3 seek=3 conv=notrunc status=none
sync
# The iod starts a second later, so the wait is seen whatever the speed of
# its registration.
{ sleep 1; lc start-iod 1 >/dev/null; } &
ctl rebuild --wait 1 >"$T/sw.out" 2>"$T/sw.err"
rc=$?
wait $!
assert_eq cli-start-then-wait-exit 0 "$rc"
grep -q 'done, up' "$T/sw.out" && pass cli-start-then-wait ||
	fail cli-start-then-wait "$(tr '\n' ' ' <"$T/sw.err") $(tail -n 1 "$T/sw.out")"
grep -q 'waiting for iod 1 to register (down' "$T/sw.err" && pass cli-start-then-wait-said ||
	fail cli-start-then-wait-said "$(tr '\n' ' ' <"$T/sw.err")"
assert_eq cli-state-up-again up "$(iod_state 1)"
drop_caches
assert_same_file cli-bytes "$T/f" "$M/g0/f"
e2e_verify
e2e_end
