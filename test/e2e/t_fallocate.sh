#!/usr/bin/env bash
# t_fallocate.sh - fallocate (default, KEEP_SIZE, PUNCH_HOLE) and
# SEEK_DATA/SEEK_HOLE on striped files: contents byte for byte against a
# model, holes where the punches were, both twins identical after punching
# (twinfsctl verify), and everything still there after each iod is killed
# (-9) and restarted (journal replay of punches and allocations).
. "$(dirname "$0")/lib.sh"
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

# kill -9 and restart every iod in turn: nothing acknowledged is lost.
cd /
for d in 1 2 3 4; do
	lc kill-iod $d >/dev/null && lc start-iod $d >/dev/null || fail "fa-restart-iod-$d" "kill/start failed"
	for ((i = 0; i < 150; i++)); do ctl -t 1000 status 2>/dev/null | grep -qE 'resyncing|down|suspect' || break; sleep 0.2; done
done
"$PY" "$E2E_DIR/fa_check.py" reread "$M/fa" "$T" "$MB" &&
	pass fa-survives-iod-restart || fail fa-survives-iod-restart "see the python output above"
"$PY" "$E2E_DIR/fa_check.py" seek "$M/fa" "$T" "$MB" &&
	pass fa-seek-after-restart || fail fa-seek-after-restart "see the python output above"
e2e_verify fa-verify-after-restart
e2e_end
