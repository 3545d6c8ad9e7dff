#!/usr/bin/env bash
# t_fallocate.sh - fallocate (default, KEEP_SIZE, PUNCH_HOLE) and
# SEEK_DATA/SEEK_HOLE on striped files: contents byte for byte against a
# model, holes where the punches were, both twins identical after punching
# (twinfsctl verify), and everything still there after each iod is killed
# (-9) and restarted (journal replay of punches and allocations), and
# punches made while a twin was away reach it by its resync.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin fallocate

mkdir -p "$M/fa" && cd "$M/fa" || exit 1
e2e_tmpdir T
# 64 KiB units over both groups: every operation below spans columns.
check fa-setstripe ctl setstripe -S 64K -c 2 "$M/fa"
MB=$(( $(scale 8388608) / 1048576 + 1 ))

"$PY" "$E2E_DIR/fa_check.py" write "$M/fa" "$T" "$MB" &&
	pass fa-ops-match-model || fail fa-ops-match-model "see the python output above"
"$PY" "$E2E_DIR/fa_check.py" seek "$M/fa" "$T" "$MB" &&
	pass fa-seek || fail fa-seek "see the python output above"
e2e_verify fa-verify-after-punch

# Punches and allocations while a twin is away reach it by its resync
# (the punched regions are marked in the write-intent log).
mkdir "$M/fa/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/fa/g0"
"$PY" "$E2E_DIR/fa_check.py" away-init "$M/fa/g0" "$T" "$MB" ||
	fail fa-away-init "see the python output above"
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) || fail fa-away-down "$out"
"$PY" "$E2E_DIR/fa_check.py" away-ops "$M/fa/g0" "$T" "$MB" &&
	pass fa-punch-twin-away || fail fa-punch-twin-away "see the python output above"
(cd / && lc start-iod 1 >/dev/null)
e2e_wait_healthy 60 && pass fa-resync-after-punch ||
	fail fa-resync-after-punch "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify fa-verify-after-resync

# kill -9 and restart every iod in turn: nothing acknowledged is lost.
cd /
for d in 1 2 3 4; do
	lc kill-iod $d >/dev/null && lc start-iod $d >/dev/null || fail "fa-restart-iod-$d" "kill/start failed"
	e2e_wait_healthy 60 || fail "fa-restart-iod-$d-healthy" "$(ctl status 2>&1 | tr '\n' ' ')"
done
drop_caches
"$PY" "$E2E_DIR/fa_check.py" reread "$M/fa" "$T" "$MB" &&
	pass fa-survives-iod-restart || fail fa-survives-iod-restart "see the python output above"
"$PY" "$E2E_DIR/fa_check.py" seek "$M/fa" "$T" "$MB" &&
	pass fa-seek-after-restart || fail fa-seek-after-restart "see the python output above"
e2e_verify fa-verify-after-restart
# Bad FALLOCATE / SEEK / APPEND_RESERVE / SETATTR size reports: exact
# errno, no harm.
FA_FILE=$M/fa/grow   # a regular file
FA_INO=$(stat -c %i "$FA_FILE")
FA_STAT=$(stat -c '%F %s %a %Y' "$FA_FILE")
run_checks "$PY" "$E2E_DIR/twire.py" space 127.0.0.1 "$TWINFS_PORT" $((TWINFS_PORT + 1)) "$TWINFS_CLUSTER" "$FA_INO"
drop_caches
assert_eq fa-setattr-reports-no-harm "$FA_STAT" "$(stat -c '%F %s %a %Y' "$FA_FILE")"
e2e_end
