#!/usr/bin/env bash
# t_fio.sh - iozone's shapes, run by fio with verify on the mount.
#
# Users run iozone in throughput mode (-t N) with fsync and close timed
# (-e -c), buffered and with O_DIRECT (-I).  iozone is not in Debian's main
# archive, so fio jobs of the same shape stand in (README "Testing"):
#   - 4 jobs, a file each, sequential 4 KiB records (iozone's default)
#     buffered, end_fsync; then read back from TwinFS after drop_caches;
#   - 4 jobs, O_DIRECT, 1 MiB records; then O_DIRECT random rewrites of
#     4 KiB-256 KiB records (iozone's random write), read back O_DIRECT;
#   - both kinds on one file, through one mount: buffered writes read back
#     with O_DIRECT, then O_DIRECT rewrites read back buffered (no stale
#     page from the buffered read before them);
#   - 4 jobs of O_DIRECT random rewrites while a twin is killed with
#     SIGKILL and restarted: no error, and not a byte lost;
# every block's contents checked by fio (crc32c headers with offsets, or a
# pattern where the same offsets are rewritten), again after a remount, and
# finally `twinfsctl verify`: both twins of every group identical.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"   # short timers for the kill
e2e_begin fio
e2e_tmpdir T

# Per job: 64 MiB at scale 1, at least 4 MiB, whole MiB.
PER=$(scale $((64 << 20)))
((PER < (4 << 20))) && PER=$((4 << 20))
PER=$(((PER >> 20) << 20))
# Directories not named like a job: fio takes a job name that exists as a
# directory in its working directory (here the mount's root) as the one
# file all of the job's clones share.
mkdir -p "$M/d-tput" "$M/d-dio" "$M/d-mix" "$M/d-kill"

# run_fio NAME ARGS...: fio must exit 0 and report no verify error; its
# bandwidth lines become comments.
run_fio() {
	local name=$1 out=$T/$1.out
	shift
	if fio --output="$out" "$@" >"$T/$name.err" 2>&1 &&
		! grep -qiE 'verify: bad|bad magic|verify failed|bad pattern' "$out"; then
		grep -E '^ +(READ|WRITE):' "$out" | sed "s/^ */# $name: /"
		pass "$name"
	else
		fail "$name" "$(grep -ihE 'bad|error|err=|fio:' "$out" "$T/$name.err" | head -n 4 | tr '\n' ' ')"
	fi
}

common=(--ioengine=psync --group_reporting --random_generator=tausworthe64
	--randrepeat=1 --verify_fatal=1)

# 1. iozone -t 4 -e -c: buffered sequential 4 KiB records, fsync at the end.
tput=(--name=tput --directory="$M/d-tput" --numjobs=4 --size="$PER" --bs=4k
	--rw=write --verify=crc32c "${common[@]}")
run_fio tput-buffered-write "${tput[@]}" --end_fsync=1 --do_verify=0
drop_caches
run_fio tput-buffered-read "${tput[@]}" --verify_only

# 2. iozone -t 4 -I: O_DIRECT, 1 MiB records, then random rewrites.
dio=(--name=dio --directory="$M/d-dio" --numjobs=4 --size="$PER" --direct=1
	"${common[@]}")
run_fio tput-direct-write "${dio[@]}" --rw=write --bs=1M --verify=crc32c \
	--end_fsync=1
run_fio tput-direct-randwrite "${dio[@]}" --rw=randwrite \
	--bsrange=4k-256k --blockalign=4k --verify=crc32c
drop_caches
run_fio tput-direct-randwrite-reread "${dio[@]}" --rw=randwrite \
	--bsrange=4k-256k --blockalign=4k --verify=crc32c --verify_only

# 3. One file, both kinds, one mount.  Patterns, since the same offsets
#    are written twice: a stale page would show the first pattern.
mix=(--name=mix --directory="$M/d-mix" --filename=data --size="$PER"
	--bs=64k "${common[@]}" --verify=pattern)
run_fio mix-buffered-write "${mix[@]}" --rw=write \
	--verify_pattern=0x5aa5c33c --do_verify=0
run_fio mix-direct-read-sees-it "${mix[@]}" --rw=write \
	--verify_pattern=0x5aa5c33c --verify_only --direct=1
run_fio mix-buffered-read-caches "${mix[@]}" --rw=write \
	--verify_pattern=0x5aa5c33c --verify_only
run_fio mix-direct-rewrite "${mix[@]}" --rw=randwrite \
	--verify_pattern=0x0ff0e11e --do_verify=0 --direct=1
run_fio mix-buffered-read-no-stale-page "${mix[@]}" --rw=write \
	--verify_pattern=0x0ff0e11e --verify_only

# 4. Everything again from a fresh mount, and both twins identical.
e2e_remount
run_fio remount-tput-buffered "${tput[@]}" --verify_only
run_fio remount-tput-direct "${dio[@]}" --rw=randwrite \
	--bsrange=4k-256k --blockalign=4k --verify=crc32c --verify_only
run_fio remount-mix "${mix[@]}" --rw=write --verify_pattern=0x0ff0e11e \
	--verify_only --direct=1
# A file per job: tput.0.0 ... dio.3.0, and mix's data.
files=$(cd "$M" && find d-tput d-dio d-mix -type f | sort | tr '\n' ' ')
assert_eq fio-files "d-dio/dio.0.0 d-dio/dio.1.0 d-dio/dio.2.0 d-dio/dio.3.0 d-mix/data d-tput/tput.0.0 d-tput/tput.1.0 d-tput/tput.2.0 d-tput/tput.3.0 " "$files"

# 5. iozone -t 4 -I while a twin dies.  The writes are paced to take about
#    6 s; iod 3 (group 1) is killed 2 s in and restarted a second later.
kill=(--name=kdio --directory="$M/d-kill" --numjobs=4 --size="$PER" --direct=1
	--rw=randwrite --bsrange=4k-256k --blockalign=4k --verify=crc32c
	"${common[@]}")
fio --output="$T/kill.out" "${kill[@]}" --rate=$((PER / 6)) --end_fsync=1 \
	>"$T/kill.err" 2>&1 &
fpid=$!
sleep 2
if kill -0 "$fpid" 2>/dev/null && lc kill-iod 3 >/dev/null; then
	pass kill-iod-during-write
else
	fail kill-iod-during-write "fio ended within 2 s, or iod 3 was not running"
fi
sleep 1
lc start-iod 3 >/dev/null
for _ in $(seq 1 1200); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$fpid" 2>/dev/null; then
	fail kill-fio-finishes "fio still running 120 s after the kill"
	kill -9 "$fpid"
fi
if wait "$fpid" && ! grep -qiE 'verify: bad|bad magic|verify failed' "$T/kill.out"; then
	grep -E '^ +(READ|WRITE):' "$T/kill.out" | sed 's/^ */# kill-write-and-verify: /'
	pass kill-write-and-verify
else
	fail kill-write-and-verify "$(grep -ihE 'bad|error|err=|fio:' "$T/kill.out" "$T/kill.err" | head -n 4 | tr '\n' ' ')"
fi
e2e_wait_healthy 120 && pass healthy-after-kill ||
	fail healthy-after-kill "$(ctl status 2>&1 | tr '\n' ' ')"
drop_caches
run_fio kill-reread "${kill[@]}" --verify_only
e2e_verify

e2e_end
