#!/usr/bin/env bash
# t_resync_wil.sh - resync drill: an incremental resync copies what the
# write-intent logs mark, not everything.  A large file is written with
# both twins up and its regions are cleared (both synced); iod 1 is killed,
# three 64 KiB pieces of the file are overwritten and a small file is
# created on iod 2 alone; when iod 1 is back, its resync reads and sends
# about four 1 MiB regions (rebuild --status: bytes_copied), not the whole
# file, and verify finds both twins identical with every byte right.  Then
# a file truncated while iod 1 is away: its resync compares checksums; and
# one truncated while iod 1 is away, with the survivor restarted before
# iod 1 is back: the truncate's durable mark still gets it resynced.
# Last, holes are not read (iod/resync.c "Holes"): sparse files of 16 to
# 128 GiB made, grown and punched while iod 1 is away cost their chunks of
# data, not a read of every MiB of their holes, in that resync and in a
# full rebuild after it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
export TWINFS_COMMIT_INTERVAL=1s     # write-intent clearing cycle
e2e_begin resync_wil
e2e_tmpdir T

# cleared_then_down NAME FILE: copy $T/FILE to $M/g0/FILE, sync both twins,
# let a clearing cycle (every commit_interval) clear its regions, then kill
# iod 1 and wait until mgrd has it down.
cleared_then_down() {
	local out
	cp "$T/$2" "$M/g0/$2"
	sync
	check "$1-sync" ctl sync
	sleep 3
	(cd / && lc kill-iod 1 >/dev/null)
	out=$(wait_state 1 '^down' 10000) && pass "$1-down" || fail "$1-down" "$out"
}

mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0"
size=$(scale $((64 << 20)))
head -c "$size" /dev/urandom >"$T/big"
cleared_then_down wil big
mib=$((size >> 20))
# In place (cp would truncate and rewrite the whole file).
for r in 1 $((mib / 2)) $((mib - 2)); do
	head -c 65536 /dev/urandom >"$T/piece"
	for f in "$T/big" "$M/g0/big"; do
		dd if="$T/piece" of="$f" bs=64K count=1 seek=$((r * 16 + 3)) \
			conv=notrunc status=none
	done
done
head -c 300000 /dev/urandom >"$T/small"
cp "$T/small" "$M/g0/small"
sync

(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then pass wil-healthy; else
	fail wil-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st full copied total < <(rjob 1 state full bytes_copied bytes_total)
echo "# incremental resync: $copied bytes read and sent of $total"
assert_eq wil-job "done False $((size + 300000))" "$st $full $total"
# 3 regions of the big file + the small file; a region is 1 MiB.
((copied >= 3 * 65536 + 300000 && copied <= 5 * (1 << 20))) &&
	pass wil-copied-marked-only ||
	fail wil-copied-marked-only "copied $copied bytes (total $total)"
drop_caches
assert_same_file wil-big "$T/big" "$M/g0/big"
assert_same_file wil-small "$T/small" "$M/g0/small"

# 2. A subfile pinned whole (truncated while iod 1 was away: the survivor
#    pins all of it, beside the truncate's own marks) is compared by
#    region checksums, asked 16 MiB at a time so that the target's loop
#    stays free: a 40 MiB file cut to 38 MiB, with 64 KiB rewritten at
#    30 MiB, is sent as about one region; the other 37 are found identical,
#    in the first window and in the later ones.
head -c $((40 << 20)) /dev/urandom >"$T/cut"
cleared_then_down wil-cut cut
head -c 65536 /dev/urandom >"$T/piece"
for f in "$T/cut" "$M/g0/cut"; do
	truncate -s $((38 << 20)) "$f"
	dd if="$T/piece" of="$f" bs=64K count=1 seek=$((30 * 16)) conv=notrunc status=none
done
sync
n0=$(grep -c 'resync of iod 1 done' "$TWINFS_RUN_DIR/logs/iod2.log")
(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then pass wil-cut-healthy; else
	fail wil-cut-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
line=$(grep 'resync of iod 1 done' "$TWINFS_RUN_DIR/logs/iod2.log" | tail -n +$((n0 + 1)) | tail -n 1)
echo "# ${line#* INFO }"
same=$(echo "$line" | grep -o '[0-9]* bytes found identical' | grep -o '^[0-9]*')
sent=$(echo "$line" | grep -o '[0-9]* bytes sent' | grep -o '^[0-9]*')
((${same:-0} >= 36 << 20 && ${sent:-1} <= 4 << 20)) &&
	pass wil-cut-checksums-skip-identical ||
	fail wil-cut-checksums-skip-identical "${line:-no 'resync of iod 1 done' line}"
drop_caches
assert_same_file wil-cut "$T/cut" "$M/g0/cut"

# 3. Truncates are marked in their own transactions, like writes, and a
#    pin (memory only) does not stand in for a mark: the survivor applies
#    them alone, restarts (its pins are gone) before iod 1 is back, and
#    iod 1's incremental resync still carries every change.  Unmarked,
#    iod 1 kept its old bytes: a cp over a file (truncate to 0 under a
#    pin, then writes) left zeros past the old size, and a shrink under
#    the pin showed the old bytes again once the file grew.
head -c $((6 << 20)) /dev/urandom >"$T/shrink"
head -c $((6 << 20)) /dev/urandom >"$T/over"
cp "$T/over" "$M/g0/over"
cleared_then_down wil-shrink shrink
head -c $((20 << 20)) /dev/urandom >"$T/over"
check wil-shrink-cp-over cp "$T/over" "$M/g0/over"
for f in "$T/shrink" "$M/g0/shrink"; do
	truncate -s $((5 << 20)) "$f" && truncate -s 1000000 "$f" &&
		head -c $((2 << 20)) "$T/over" |
		dd of="$f" bs=1M seek=3 conv=notrunc status=none ||
		fail wil-shrink-cut "$f"
done
sync
(cd / && iod_restart 2) || fail wil-shrink-survivor-back "iod 2 did not register again"
out=$(wait_state 2 '^up' 20000) && pass wil-shrink-survivor-back ||
	fail wil-shrink-survivor-back "$out"
(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then pass wil-shrink-healthy; else
	fail wil-shrink-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st full < <(rjob 1 state full)
assert_eq wil-shrink-incremental "done False" "$st $full"
check wil-shrink-grow truncate -s $((6 << 20)) "$M/g0/shrink"
truncate -s $((6 << 20)) "$T/shrink"
drop_caches
assert_same_file wil-shrink "$T/shrink" "$M/g0/shrink"
assert_same_file wil-shrink-over "$T/over" "$M/g0/over"

# 4. Holes (iod/resync.c "Holes").  64 KiB pieces of data in sparse files;
#    while iod 1 is away: hp (64 GiB) is punched over [1, 61) GiB, its
#    regions marked one by one (region mode: one punch, no read); hw
#    (16 GiB) is punched over [1, 15) GiB and grown to 32 GiB (pinned
#    whole: chunk by chunk, the holes the target holds bytes in punched);
#    hn is made at 128 GiB (absent at the target).  The resync reads the
#    few chunks with data: a read of the holes would be over 200 GiB (14.7
#    GB and 168 s at 1/16 of these sizes before holes were skipped).
G=$((1 << 30)) K64=65536
# put FILE OFF NAME: a new 64 KiB piece $T/NAME at byte OFF of FILE.
put() {
	head -c $K64 /dev/urandom >"$T/$3"
	dd if="$T/$3" of="$1" bs=64K seek=$(($2 / K64)) conv=notrunc \
		status=none || fail wil-holes-write "$1 at $2"
}
# at FILE OFF: the 64 KiB of FILE at byte OFF.
at() { dd if="$1" bs=64K skip=$(($2 / K64)) count=1 status=none; }
head -c $K64 /dev/zero >"$T/zero"
bad=
truncate -s $((64 * G)) "$M/g0/hp"
truncate -s $((16 * G)) "$M/g0/hw"
put "$M/g0/hp" 0 p0; put "$M/g0/hp" $((G - K64)) p1
put "$M/g0/hp" $((20 * G)) p2; put "$M/g0/hp" $((40 * G + K64)) p3
put "$M/g0/hp" $((61 * G)) p4; put "$M/g0/hp" $((64 * G - K64)) p5
put "$M/g0/hw" 0 q0; put "$M/g0/hw" $((8 * G)) q1
put "$M/g0/hw" $((15 * G + 8 * K64)) q2
sync
check wil-holes-sync ctl sync
(cd / && lc kill-iod 1 >/dev/null)
out=$(wait_state 1 '^down' 10000) && pass wil-holes-down || fail wil-holes-down "$out"
check wil-holes-punch-hp fallocate -p -o $G -l $((60 * G)) "$M/g0/hp"
check wil-holes-punch-hw fallocate -p -o $G -l $((14 * G)) "$M/g0/hw"
check wil-holes-grow-hw truncate -s $((32 * G)) "$M/g0/hw"
put "$M/g0/hw" $((31 * G)) q3
truncate -s $((128 * G)) "$M/g0/hn"
put "$M/g0/hn" $((5 * G)) r0; put "$M/g0/hn" $((100 * G + K64)) r1
put "$M/g0/hn" $((128 * G - K64)) r2
sync
n0=$(grep -c 'resync of iod 1 done' "$TWINFS_RUN_DIR/logs/iod2.log")
(cd / && lc start-iod 1 >/dev/null)
if e2e_wait_healthy 60; then pass wil-holes-healthy; else
	fail wil-holes-healthy "$(ctl status 2>&1 | tr '\n' ' ')"; fi
read -r st copied < <(rjob 1 state bytes_copied)
line=$(grep 'resync of iod 1 done' "$TWINFS_RUN_DIR/logs/iod2.log" | tail -n +$((n0 + 1)) | tail -n 1)
echo "# ${line#* INFO }"
holes=$(echo "$line" | grep -o '[0-9]* bytes of holes' | grep -o '^[0-9]*')
assert_eq wil-holes-job done "$st"
# (regions the earlier steps left marked are read too: a few MiB)
((${copied:-1} < 256 << 20 && ${holes:-0} >= 200 * G)) &&
	pass wil-holes-not-read ||
	fail wil-holes-not-read "read $copied bytes, holes ${holes:-?}: ${line:-no done line}"
drop_caches
for x in "hp 0 p0" "hp $((G - K64)) p1" "hp $((20 * G)) zero" \
	"hp $((40 * G + K64)) zero" "hp $((33 * G)) zero" "hp $((61 * G)) p4" \
	"hp $((64 * G - K64)) p5" "hw 0 q0" "hw $((8 * G)) zero" \
	"hw $((15 * G + 8 * K64)) q2" "hw $((20 * G)) zero" "hw $((31 * G)) q3" \
	"hn 0 zero" "hn $((5 * G)) r0" "hn $((64 * G)) zero" \
	"hn $((100 * G + K64)) r1" "hn $((128 * G - K64)) r2"; do
	read -r f off want <<<"$x"
	at "$M/g0/$f" "$off" | cmp -s - "$T/$want" || bad+=" $f@$off!=$want"
done
assert_eq wil-holes-contents "" "${bad:-}"
assert_eq wil-holes-sizes "$((64 * G)) $((32 * G)) $((128 * G))" \
	"$(stat -c %s "$M/g0/hp" "$M/g0/hw" "$M/g0/hn" | tr '\n' ' ' | sed 's/ $//')"
# A full copy (each subfile deleted at the target first) sends nothing
# for the holes and reads only what holds data.
check wil-holes-full ctl -t 60000 rebuild --full --wait 1
read -r st full copied < <(rjob 1 state full bytes_copied)
echo "# full rebuild: $copied bytes read"
assert_eq wil-holes-full-job "done True" "$st $full"
((${copied:-$G} < 256 << 20)) && pass wil-holes-full-not-read ||
	fail wil-holes-full-not-read "read ${copied:-?} bytes"
e2e_verify
e2e_end
