#!/usr/bin/env bash
# t_journal_fio_kill.sh - the journal kill drill: fio writes random blocks with
# crc32c verify headers on the mount while iods are killed with SIGKILL and
# restarted in a loop (bounded: at most KILLS kills and 90 s); fio sees no
# error and its verify pass reads every block back intact, again from a
# fresh mount after the loop, and once every restarted iod has replayed its
# journal and resynced, `twinfsctl verify` finds both twins of every group
# identical.  One kill at a time: the next victim dies only when the
# cluster is healthy again (with both twins of a group away nothing can be
# served; that case is t_journal_crash.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin journal_fio_kill
e2e_tmpdir T

SIZE=$(( $(scale $((256 << 20))) < (32 << 20) ? (32 << 20) : $(scale $((256 << 20))) ))
# Paced so that writing takes about 20 s whatever the build: the kills
# land in the middle of the write phase.
RATE=$(( SIZE / 20 ))
KILLS=6
mkdir -p fio
# The same job writes (first run) and, with --verify_only, re-reads and
# checks (randrepeat: the same offsets and contents).
job=(--name=jfk --directory="$M/fio" --filename=data --size="$SIZE"
	--rw=randwrite --bsrange=4k-128k --ioengine=psync --direct=0
	--verify=crc32c --verify_fatal=1 --end_fsync=1 --randrepeat=1
	--random_generator=tausworthe64)

fio "${job[@]}" --rate="$RATE" --output="$T/fio.out" >"$T/fio.err" 2>&1 &
fpid=$!

# The kill loop: victims in turn 2, 3, 1, 4, ...; each is killed while fio
# writes, restarted a second later, and the next one waits for health.
victims=(2 3 1 4 2 3)
t0=$SECONDS
kills=0
while ((kills < KILLS && SECONDS - t0 < 90)) && kill -0 "$fpid" 2>/dev/null; do
	sleep 2
	kill -0 "$fpid" 2>/dev/null || break
	v=${victims[kills]}
	lc kill-iod "$v" >/dev/null || { fail "kill-$kills" "iod $v not running"; break; }
	kills=$((kills + 1))
	sleep 1
	lc start-iod "$v" >/dev/null
	e2e_wait_healthy 60 || { fail "healthy-after-kill-$kills" "$(ctl status 2>&1 | tr '\n' ' ')"; break; }
done
echo "# $kills iods killed with SIGKILL and restarted while fio wrote"
((kills >= 3)) && pass kills-during-write || fail kills-during-write "only $kills kills before fio finished writing"

# fio must finish (write, end_fsync, verify) without any error (bounded).
for _ in $(seq 1 1200); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$fpid" 2>/dev/null; then
	fail fio-finishes "fio still running 120 s after the kill loop"
	kill -9 "$fpid"
fi
grep -E '^ +(READ|WRITE):' "$T/fio.out" | sed 's/^ */# fio /'
if wait "$fpid" && ! grep -qiE 'verify: bad|bad magic|verify failed' "$T/fio.out"; then
	pass fio-write-and-verify
else
	fail fio-write-and-verify "$(grep -iE 'bad|error|err=' "$T/fio.out" "$T/fio.err" | head -n 3 | tr '\n' ' ')"
fi

# Everything replayed and resynced: twins identical, and fio's verify
# passes again from a fresh mount (no page cache).
e2e_wait_healthy 120 && pass healthy || fail healthy "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify
e2e_remount
if fio "${job[@]}" --verify_only --output="$T/fio2.out" >"$T/fio2.err" 2>&1 &&
	! grep -qiE 'verify: bad|bad magic|verify failed' "$T/fio2.out"; then
	grep -E '^ +READ:' "$T/fio2.out" | sed 's/^ */# fio verify_only /'
	pass fio-verify-after-remount
else
	fail fio-verify-after-remount "$(grep -iE 'bad|error|err=' "$T/fio2.out" "$T/fio2.err" | head -n 3 | tr '\n' ' ')"
fi
# Replay ran on every restart (each victim's log has a replay line per
# start: the first start plus its restarts).
for v in 1 2 3 4; do
	n=$(grep -ac "transactions replayed" "$TWINFS_RUN_DIR/logs/iod$v.log")
	want=1
	for ((i = 0; i < kills; i++)); do [[ ${victims[i]} == "$v" ]] && want=$((want + 1)); done
	assert_eq "iod$v-replays" "$want" "$n"
done

e2e_end
