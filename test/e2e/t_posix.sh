#!/usr/bin/env bash
# t_posix.sh - the POSIX conformance suite (test/posix) on the mount, with a
# fresh ext4 loop image as the oracle (posix_lib.sh).  Every case that
# matches ext4 is a PASS; a case listed in test/posix/known-gaps.txt that
# differs is reported as KNOWN (not counted); any other difference is a
# FAIL, and so is a known gap that now matches (remove it from the list).
# POSIX_ONLY=SUBSTRING runs only the cases whose id contains it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/posix_lib.sh"
# Mounted like the ext4 oracle (dev): device nodes stored in TwinFS open
# the client's devices (mknod/chr_open).  Mounts are nodev by default.
export TWINFS_MOUNT_OPTS=${TWINFS_MOUNT_OPTS-allow_other,dev}
e2e_begin posix

posix_suite posix "$M/posix"
e2e_end
