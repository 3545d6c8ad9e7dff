#!/usr/bin/env bash
# t_append.sh - O_APPEND from two mounts (two twinfs processes, as two
# client hosts) never overwrites: each append takes its offset from a
# reservation at mgrd (docs/ARCHITECTURE.md "Metadata"), so when both mounts append
# concurrently, the final size is the sum of every record written and each
# record is found whole, exactly once, byte for byte.  The second round
# kills mgrd (-9) in the middle: retransmitted reservations are answered
# from mgrd's reply cache, so still no record is lost, doubled or torn.
. "$(dirname "$0")/lib.sh"
e2e_begin append
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || { fail append-mount2 "second mount failed"; exit 1; }
pass append-mount2
N=$(scale 2000)

"$PY" "$E2E_DIR/append_check.py" "$M/log" "$M2/log" "$N" &&
	pass append-two-mounts || fail append-two-mounts "see above"
assert_eq append-size-seen-by-both "$(stat -c %s "$M/log")" "$(stat -c %s "$M2/log")"

# mgrd is away for a second while the writers run: they wait, then
# retransmit (a reservation journaled before the kill gets its recorded
# offset again).
"$PY" "$E2E_DIR/append_check.py" "$M/log2" "$M2/log2" "$((N < 1000 ? 1000 : N))" \
	>"$TWINFS_RUN_DIR/append2.out" 2>&1 &
pid=$!
sleep 0.2
(cd / && lc kill-mgrd >/dev/null) || fail append-mgrd-kill "kill-mgrd failed"
sleep 1
(cd / && lc start-mgrd >/dev/null) || fail append-mgrd-start "start-mgrd failed"
if wait "$pid"; then pass append-across-mgrd-restart
else fail append-across-mgrd-restart "$(tail -n 3 "$TWINFS_RUN_DIR/append2.out" | tr '\n' ' ')"; fi
sed 's/^/# /' "$TWINFS_RUN_DIR/append2.out"
e2e_verify
e2e_end
