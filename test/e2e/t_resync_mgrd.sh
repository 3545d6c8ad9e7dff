#!/usr/bin/env bash
# t_resync_mgrd.sh - issue 3 item 6: mgrd is killed (kill -9) and restarted
# while a rate-limited resync runs: the map still says `resyncing`, the new
# mgrd follows the copy the source is still running (its progress shows in
# status) and brings the iod up when it completes; verify is clean.
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
drop_caches
assert_same_file mgrd-bytes "$T/f" "$M/g0/f"
e2e_verify
e2e_end
