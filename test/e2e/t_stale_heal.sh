#!/usr/bin/env bash
# t_stale_heal.sh - a forward the twin refuses as stale waits for the
# sender's retry (iod/twin.c "Stale forwards", iod/stale_fwd.c).
#
# A twin refuses a forward with ESTALE when it already holds a newer map
# than the request.  Here the twin T of a file's first column is made to
# refuse the next forwarded client write that way (TWINFS_TEST_FAULTS=1,
# TWINFS_TEST_REFUSE=stale and SIGUSR2, iod/main.c); the primary P has
# applied it.
#   1. Through the mount: the client gets ESTALE, refreshes its map and
#      sends the write again; P forwards the retry, T applies it, and that
#      heals the refused range.  The write succeeds, P never reports
#      missed writes (3 x request_timeout later), T stays up and is not
#      resynced, and the twins agree.
#   2. From a client that never sends it again (twire.py write): the
#      range is not healed, so 3 x request_timeout later P reports T as
#      having missed writes, mgrd resyncs T from P, and the twins agree on
#      P's bytes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_TEST_FAULTS=1 TWINFS_TEST_REFUSE=stale
e2e_begin stale_heal
e2e_tmpdir T
TWIRE=$REPO/test/e2e/twire.py

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
head -c $((4 << 20)) /dev/urandom >"$T/f"
cp "$T/f" "$M/g0/f"
ctl sync >/dev/null
ino=$(stat -c %i "$M/g0/f")
layout=$(getfattr -n twinfs.layout --only-values "$M/g0/f" 2>/dev/null)
# Column 0's primary while both twins are up: twin (ino + 0) mod 2.
read -r P TW < <(ctl status | awk -v p=$((ino % 2)) '
	$1 ~ /^[0-9]+$/ && $2 == 0 { if ($3 == p) a = $1; else b = $1 }
	END { print a, b }')
echo "# ino $ino: primary iod $P, twin iod $TW"
logP=$TWINFS_RUN_DIR/logs/iod$P.log
logT=$TWINFS_RUN_DIR/logs/iod$TW.log
logm=$TWINFS_RUN_DIR/logs/mgrd.log
wait_ms=$((3 * RT_MS + 2000))

# 1. Healed by the client's retry.
check stale-armed signal_iod "$TW" USR2 'refused with ESTALE$' 10000
"$PY" "$E2E_DIR/dwrite.py" "$M/g0/f" $((1 << 20)) $((1 << 20)) 238 >"$T/w.out" 2>&1
assert_eq stale-write-acknowledged written "$(tail -n 1 "$T/w.out")"
head -c $((1 << 20)) /dev/zero | tr '\0' '\356' |
	dd of="$T/f" bs=1M seek=1 conv=notrunc status=none
check stale-twin-refused grep -q "forwarded WRITE ino $ino column 0 refused with ESTALE" "$logT"
check stale-primary-saw-it grep -q "ino $ino column 0: twin iod $TW refused it: Stale file handle" "$logP"
sleep $((wait_ms / 1000)).$((wait_ms % 1000))
if grep -q "refused as stale: reporting it as missed" "$logP"; then
	fail stale-healed-no-report "$(grep 'refused as stale' "$logP" | tail -n 1)"
else
	pass stale-healed-no-report
fi
if grep -q "iod $TW missed writes" "$logm"; then
	fail stale-healed-no-resync "$(grep "iod $TW missed writes" "$logm" | tail -n 1)"
else
	pass stale-healed-no-resync
fi
assert_eq stale-twin-still-up up "$(iod_state "$TW")"
e2e_verify
drop_caches
assert_same_file stale-healed-bytes "$T/f" "$M/g0/f"

# 2. Never sent again: reported, and the twin resynced.
check stale-armed-again signal_iod "$TW" USR2 'refused with ESTALE$' 10000
out=$(python3 "$TWIRE" write 127.0.0.1 $((TWINFS_PORT + P)) "$TWINFS_CLUSTER" \
	"$ino" 0 $((3 << 20)) "$layout" 4242 2>&1)
assert_eq stale-raw-write-refused "status -116" "$out"
head -c 64 /dev/zero | tr '\0' 'Z' |
	dd of="$T/f" bs=1 seek=$((3 << 20)) conv=notrunc status=none
t0=$(now_ms)
until grep -q "iod $TW missed writes that its twin iod $P applied" "$logm" ||
	(($(now_ms) - t0 > wait_ms + 10000)); do
	sleep 0.2
done
check stale-unhealed-reported grep -q "no write healed the forward twin iod $TW refused as stale: reporting it as missed" "$logP"
check stale-unhealed-missed grep -q "iod $TW missed writes that its twin iod $P applied" "$logm"
out=$(wait_state "$TW" '^up$' 60000) && pass stale-twin-resynced ||
	fail stale-twin-resynced "iod $TW: $out"
check stale-resync-done grep -q "resync of iod $TW from iod $P done" "$logm"
e2e_verify
drop_caches
assert_same_file stale-resynced-bytes "$T/f" "$M/g0/f"
e2e_end
