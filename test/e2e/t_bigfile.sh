#!/usr/bin/env bash
# t_bigfile.sh - a 256 MiB (times TWINFS_TEST_SCALE) random file copied in
# and read back byte for byte: through the same mount, after a remount, with
# several block sizes; then twinfsctl verify.
. "$(dirname "$0")/lib.sh"
e2e_begin bigfile
e2e_tmpdir T

SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/big"
want=$(sha "$T/big")
check bigfile-cp cp "$T/big" "$M/big"
assert_eq bigfile-size "$SIZE" "$(stat -c %s "$M/big")"
assert_eq bigfile-sha256 "$want" "$(sha "$M/big")"
e2e_remount || fail bigfile-remount "remount failed"
assert_eq bigfile-sha256-after-remount "$want" "$(sha "$M/big")"
for bs in 4k 333k 1M 4M; do
	assert_eq "bigfile-read-bs-$bs" "$want" "$(dd if="$M/big" bs=$bs status=none | sha256sum | cut -d' ' -f1)"
done
# unaligned overwrite across stripe units and columns
head -c 1500000 /dev/urandom >"$T/patch"
dd if="$T/patch" of="$T/big" bs=1 seek=$((SIZE / 3 + 7)) conv=notrunc status=none 2>/dev/null ||
	dd if="$T/patch" of="$T/big" oflag=seek_bytes seek=$((SIZE / 3 + 7)) conv=notrunc status=none
dd if="$T/patch" of="$M/big" oflag=seek_bytes seek=$((SIZE / 3 + 7)) conv=notrunc status=none
e2e_remount || fail bigfile-remount2 "remount failed"
assert_eq bigfile-overwrite "$(sha "$T/big")" "$(sha "$M/big")"
check bigfile-sync ctl sync
e2e_verify
e2e_end
