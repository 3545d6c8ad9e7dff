#!/usr/bin/env bash
# t_fsx.sh - the randomized operation tester (fsx.py: write, truncate, mmap
# write, punch, fallocate, read back, SEEK_DATA/SEEK_HOLE against an
# in-memory model) on the mount: a few thousand operations at scale 1, on
# a file striped in 64 KiB units over both groups and on one with the
# default layout; then both twins must be identical, also after two mounts
# raced writes and punches on the same units.  Each run prints its seed
# (TWINFS_FSX_SEED=N reruns one).
. "$(dirname "$0")/lib.sh"
e2e_begin fsx

mkdir -p "$M/fsx/small" && cd "$M/fsx" || exit 1
check fsx-setstripe ctl setstripe -S 64K -c 2 "$M/fsx/small"
N=$(scale 3000)
((N < 1000)) && N=1000 # cheap enough under the sanitizers too
seed_opt=()
[[ -n ${TWINFS_FSX_SEED:-} ]] && seed_opt=(-s "$TWINFS_FSX_SEED")

"$PY" "$E2E_DIR/fsx.py" -n "$N" "${seed_opt[@]}" -l $((2 << 20)) -w $((160 << 10)) \
	"$M/fsx/small/f" && pass fsx-64k-units || fail fsx-64k-units "see the fsx output above"
"$PY" "$E2E_DIR/fsx.py" -n "$((N / 2))" "${seed_opt[@]}" "$M/fsx/default" &&
	pass fsx-default-layout || fail fsx-default-layout "see the fsx output above"
e2e_verify

# Two mounts race writes, punches, ZERO_RANGEs and allocations on the same
# stripe units: the primary orders them, so the twins must still agree.
M2=$TWINFS_RUN_DIR/mnt2
lc mount "$M2" >/dev/null || fail fsx-mount2 "second mount failed"
"$PY" "$E2E_DIR/punch_race.py" "$M/fsx/small/race" "$M2/fsx/small/race" \
	"$(scale 400)" "${TWINFS_FSX_SEED:-$RANDOM}" &&
	pass fsx-punch-race-two-mounts || fail fsx-punch-race-two-mounts "see above"
e2e_verify fsx-verify-after-race
e2e_end
