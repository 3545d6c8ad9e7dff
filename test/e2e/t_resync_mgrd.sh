#!/usr/bin/env bash
# t_resync_mgrd.sh - a resync survives mgrd: mgrd is killed (kill -9) and restarted
# while a rate-limited resync runs: the map still says `resyncing`, the new
# mgrd follows the copy the source is still running (its progress shows in
# status; its job record, start time and counters come back from mgrd's
# journal) and brings the iod up when it completes; verify is clean.
# auto_resync is off so only the copy started before the kill can finish it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_mgrd
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass mgrd-iod-down || fail mgrd-iod-down "$out"
size=$(scale $((96 << 20)))
head -c "$size" /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"
sync
(cd / && lc start-iod 1 >/dev/null)
out=$(wait_state 1 '^resyncing' 10000) && pass mgrd-resyncing || fail mgrd-resyncing "$out"
# The copy must outlive the mgrd restart at every test scale: ~6 s.
rate=$(((size >> 20) / 6))
((rate >= 1)) || rate=1
check mgrd-rebuild-started ctl rebuild 1 --rate-limit "$rate"
sleep 1.5
(cd / && lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null) ||
	fail mgrd-restart "kill/start failed"
out=$(wait_state 1 '^resyncing' 10000) && pass mgrd-still-resyncing ||
	fail mgrd-still-resyncing "$out"
# The job record came back from mgrd's journal: same job, still running,
# its start time and byte counts kept.
read -r st total start runs < <(rjob 1 state bytes_total start_unix_ms runs)
[[ $st == running && $total == "$size" && $start -gt 0 && $runs -ge 1 ]] &&
	pass mgrd-job-record-kept || fail mgrd-job-record-kept "$st $total $start $runs"
seen=0
for ((i = 0; i < 300; i++)); do
	s=$(ctl -t 1000 status 2>/dev/null | awk '$1 == 1 { print $5, $6 }')
	[[ $s =~ ^resyncing\ [1-9] ]] && seen=1
	[[ $s == up* ]] && break
	sleep 0.2
done
((seen)) && pass mgrd-progress-after-restart || fail mgrd-progress-after-restart
if e2e_wait_healthy 60; then pass mgrd-healthy; else
	fail mgrd-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st done total start2 < <(rjob 1 state bytes_done bytes_total start_unix_ms)
assert_eq mgrd-job-done "done $size $size $start" "$st $done $total $start2"
drop_caches
assert_same_file mgrd-bytes "$T/f" "$M/g0/f"
e2e_verify
e2e_end
