#!/usr/bin/env bash
# t_writeback.sh - the iods in writeback mode (journal_mode = writeback: data
# written in place, the journal holds metadata; docs/ARCHITECTURE.md "Journal"), where
# an fsync makes one file's subfiles durable on both twins with their own
# fsync on the journal's helper thread (jbd_sync_files), not a syncfs of
# the whole disk.  A writer fsyncs after each 64 KiB block of a file
# striped over both groups (so each FSYNC names its columns) and logs what
# was acknowledged, while another file streams into group 1 beside it.
# Both twins of group 0 die (kill -9) mid-write and come back: every
# acknowledged block reads back exactly, the streamed file is whole, no
# journal aborted, and the twins agree.  (The same drill in the default
# data=journal mode is t_journal_crash.sh.)
. "$(dirname "$0")/lib.sh"
export TWINFS_JOURNAL_MODE=writeback
e2e_begin writeback

for v in 1 2 3 4; do
	assert_eq "iod$v-in-writeback-mode" 1 \
		"$(grep -ac 'journal mode writeback' "$TWINFS_RUN_DIR/logs/iod$v.log")"
done
mkdir -p s2 g1 && check setstripe-s2 ctl setstripe -S 64K -c 2 s2 &&
	check setstripe-g1 ctl setstripe -S 1M -c 1 -i 1 g1
e2e_tmpdir T
BLOCKS=$(( $(scale 2048) < 64 ? 64 : $(scale 2048) ))
STREAM_MB=$(( $(scale 768) < 64 ? 64 : $(scale 768) ))

# The streamer: dirty data the writer's fsyncs must not have to write.
dd if=/dev/zero of=g1/stream bs=1M count="$STREAM_MB" conv=fsync status=none \
	2>"$T/stream.err" &
STREAMER=$!

# The drill: group 0's twins die while the writer fsyncs block after block.
acked_kill "$M/s2/f" "$BLOCKS" 24

# Group 1 lives on: the streamer finishes, its fsync included.
for _ in $(seq 1 1200); do kill -0 "$STREAMER" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$STREAMER" 2>/dev/null; then
	fail streamer-returns "dd still running after 120 s"
	kill -9 "$STREAMER"
fi
wait "$STREAMER" && pass streamer-done ||
	fail streamer-done "dd failed: $(cat "$T/stream.err")"

acked_check "$M/s2/f"
assert_eq stream-size $((STREAM_MB << 20)) "$(stat -c %s g1/stream 2>&1)"
cmp -s -n $((STREAM_MB << 20)) g1/stream /dev/zero && pass stream-intact ||
	fail stream-intact "g1/stream is not $STREAM_MB MiB of zeros"

for v in 1 2 3 4; do
	assert_eq "iod$v-journal-not-aborted" 0 \
		"$(grep -ac 'journal aborted' "$TWINFS_RUN_DIR/logs/iod$v.log")"
done
e2e_wait_healthy 120 && pass healthy-after-restart ||
	fail healthy-after-restart "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify

# The writer's fsyncs reached group 1 as fsyncs of its file, not as
# syncfs of the disk: iod 3 counts them when it stops (SIGTERM, a clean
# stop).  About one in two of the acknowledged blocks is in column 1.
acked=$(wc -l <"$T/acked")
pid=$(cat "$TWINFS_RUN_DIR/pids/iod3.pid")
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
line=$(grep -a 'iod 3: stopped' "$TWINFS_RUN_DIR/logs/iod3.log" | tail -1)
batches=$(sed -n 's/.* \([0-9]*\) fsync batches of.*/\1/p' <<<"$line")
if [[ -n $batches ]] && ((batches >= acked / 4)); then
	pass group1-file-fsyncs
else
	fail group1-file-fsyncs "want >= $((acked / 4)) fsync batches on iod 3 ($acked blocks acknowledged): ${line:-no stop line}"
fi
e2e_end
