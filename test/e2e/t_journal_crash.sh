#!/usr/bin/env bash
# t_journal_crash.sh - every byte an fsync acknowledged survives a kill -9 of
# both twins of its group at once: a writer fsyncs after each
# block and logs the blocks that were acknowledged; both iods of group 0 are
# killed mid-write and restarted; every acknowledged block must read back
# exactly.  The twins may differ in the block that was in flight (one
# journaled it, the other had not; it was never acknowledged): the restarts
# are rejoins, so resync makes them agree, and `twinfsctl verify` is clean.
# (The drill with one iod killed at a time under fio is
# t_journal_fio_kill.sh.)
. "$(dirname "$0")/lib.sh"
e2e_begin journal-crash

# One group only, so the writer's every block lives on the twins we kill.
mkdir -p g0 && check setstripe-g0 ctl setstripe -S 64K -c 1 -i 0 g0
e2e_tmpdir T
BLOCKS=$(( $(scale 4096) < 64 ? 64 : $(scale 4096) ))

# Both twins of group 0 die at once mid-write; every acknowledged block
# reads back after their restart, from a fresh mount.
acked_kill "$M/g0/f" "$BLOCKS" 16
acked_check "$M/g0/f"

# Both replayed their journals; the restarts are failures plus rejoins, so
# one twin resyncs from the other and they end identical, the block that
# was in flight included.
for v in 1 2; do
	n=$(grep -ac "transactions replayed" "$TWINFS_RUN_DIR/logs/iod$v.log")
	assert_eq "iod$v-replayed-at-restart" 2 "$n"
done
e2e_wait_healthy 120 && pass healthy-after-restart ||
	fail healthy-after-restart "$(ctl status 2>&1 | tr '\n' ' ')"
e2e_verify
e2e_end
