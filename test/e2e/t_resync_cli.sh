#!/usr/bin/env bash
# t_resync_cli.sh - issue 3 item 6 with auto_resync = false: a restarted
# iod stays `resyncing` (status shows its percent) until `twinfsctl rebuild
# 1 --wait` starts the copy, prints progress and exits 0 once it is up;
# rebuild of an up iod is a no-op; --accept-stale is refused when the twin
# can serve.
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
grep -qE 'resyncing [0-9]+\.[0-9]%' "$T/out" && pass cli-rebuild-progress ||
	fail cli-rebuild-progress "$(head -c 300 "$T/out")"
grep -q 'done, up' "$T/out" && pass cli-rebuild-done || fail cli-rebuild-done
assert_eq cli-state-up up "$(iod_state 1)"
check cli-status-healthy ctl status
ctl rebuild 1 --wait >/dev/null 2>&1 && pass cli-rebuild-up-noop || fail cli-rebuild-up-noop
drop_caches
assert_same_file cli-bytes "$T/f" "$M/g0/f"
e2e_verify
e2e_end
