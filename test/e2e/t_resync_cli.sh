#!/usr/bin/env bash
# t_resync_cli.sh - issue 3 item 6 with auto_resync = false: a restarted
# iod stays `resyncing` (status shows its percent) until `twinfsctl rebuild
# 1 --wait` starts the copy, prints progress and exits 0 once it is up;
# rebuild of an up iod is a no-op; --accept-stale is refused when the twin
# can serve.  rebuild --status shows the job: "not started" before, then
# done with start/end times and byte counts equal to the data copied, in
# text and --json, and still after an mgrd restart (journaled record).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_AUTO_RESYNC=false
e2e_begin resync_cli
e2e_tmpdir T

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
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

# A full copy (--full) of 64 MiB at 16 MB/s: about 4 s of progress lines.
ctl rebuild 1 --wait --full --rate-limit 16 >"$T/out" 2>&1
rc=$?
sed 's/^/#   /' "$T/out" | tail -n 4
assert_eq cli-rebuild-exit 0 "$rc"
grep -qE '^rebuild iod 1 \[[#.]+\] +[0-9]+\.[0-9]%  [0-9.]+ MiB / [0-9.]+ MiB  [0-9.]+ MB/s  ETA ' "$T/out" &&
	pass cli-rebuild-progress ||
	fail cli-rebuild-progress "$(head -c 300 "$T/out")"
grep -q 'done, up' "$T/out" && pass cli-rebuild-done || fail cli-rebuild-done
assert_eq cli-state-up up "$(iod_state 1)"
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
check cli-status-healthy ctl status
ctl rebuild 1 --wait >/dev/null 2>&1 && pass cli-rebuild-up-noop || fail cli-rebuild-up-noop
drop_caches
assert_same_file cli-bytes "$T/f" "$M/g0/f"
e2e_verify
e2e_end
