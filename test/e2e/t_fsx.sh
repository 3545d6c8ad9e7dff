#!/usr/bin/env bash
# t_fsx.sh - the randomized operation tester (fsx.py: write, truncate, mmap
# write, punch, fallocate, read back, SEEK_DATA/SEEK_HOLE against an
# in-memory model) on the mount: a few thousand operations at scale 1, on
# a file striped in 64 KiB units over both groups and on one with the
# default layout; then both twins must be identical.  Each run prints its
# seed (TWINFS_FSX_SEED=N reruns one).
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
e2e_end
