#!/usr/bin/env bash
# t_resync_resume_target.sh - resync drill, the target's side of "a
# rebuild survives the restart of either iod": a rate-limited full rebuild
# of iod 1 is cut by kill -9 of the target itself midway; while it is away
# files before and after the copy cursor are overwritten, extended and cut
# on iod 2 alone.  When iod 1 is back the job resumes from the cursor and
# also resends the regions iod 2's write-intent log marks before it (the
# writes iod 1 missed): the job is done, verify finds the twins identical
# and every byte is right.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_resume_target
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass target-iod1-down || fail target-iod1-down "$out"
part=$(scale $((16 << 20)))
for i in 1 2 3 4 5 6; do
	head -c "$part" /dev/urandom >"$T/f$i"
	cp "$T/f$i" "$M/g0/f$i"
done
sync
total=$((part * 6))
(cd / && lc start-iod 1 >/dev/null)
out=$(wait_state 1 '^resyncing' 10000) && pass target-resyncing || fail target-resyncing "$out"
rate=$(((total >> 20) / 8))
((rate >= 1)) || rate=1
check target-rebuild-started ctl rebuild 1 --full --rate-limit "$rate"
for ((i = 0; i < 300; i++)); do
	read -r done1 tot1 < <(rjob 1 bytes_done bytes_total)
	((tot1 > 0 && done1 * 100 >= tot1 * 50)) && break
	sleep 0.1
done
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass target-killed || fail target-killed "$out"
read -r st1 done1 < <(rjob 1 state bytes_done)
echo "# killed the target at $done1 of $total bytes; job $st1"
((done1 * 100 >= total * 30 && done1 < total)) && pass target-first-run-midway ||
	fail target-first-run-midway "done $done1 of $total"

# On iod 2 alone: f1 (copied before the cut) overwritten in the middle and
# extended, f2 cut short, f6 (not copied yet) overwritten.
dd if=/dev/urandom of="$T/f1" bs=64K count=5 seek=3 conv=notrunc status=none
head -c 100000 /dev/urandom >>"$T/f1"
truncate -s 777777 "$T/f2"
dd if=/dev/urandom of="$T/f6" bs=64K count=2 seek=1 conv=notrunc status=none
for f in f1 f2 f6; do cp "$T/$f" "$M/g0/$f"; done
sync

(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then pass target-healthy; else
	fail target-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st2 runs < <(rjob 1 state runs)
assert_eq target-job-done "done" "$st2"
((runs >= 2)) && pass target-runs || fail target-runs "runs $runs"
line=$(grep -h "resync of iod 1 resumes after ino" "$TWINFS_RUN_DIR/logs/iod2.log" | tail -n 1)
echo "# ${line#*INFO }"
[[ $line =~ \;\ ([0-9]+)\ of\ our\ write-intent\ runs\ lie\ before\ it,\ [0-9]+\ pinned:\ sent\ again$ &&
	${BASH_REMATCH[1]} -gt 0 ]] &&
	pass target-marks-replayed || fail target-marks-replayed "$line"
drop_caches
for i in 1 2 3 4 5 6; do
	assert_same_file "target-bytes-f$i" "$T/f$i" "$M/g0/f$i"
done
e2e_verify
e2e_end
