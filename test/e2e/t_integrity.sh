#!/usr/bin/env bash
# t_integrity.sh - block checksums end to end (docs/ARCHITECTURE.md
# "Integrity"), on one cluster:
#   - 16 bytes overwritten in one twin's home subfile (its data in place
#     after a checkpoint): the file reads back byte for byte 4 times after
#     dropping caches, the iod logs the subfile and offset, mgrd logs the
#     path, /metrics counts it, and the bad copy is rewritten on disk;
#   - block 0 bad on one twin and block 1 on the other: a read across
#     both is served block by block from where each is good, and both
#     copies are healed;
#   - the same block damaged on both twins: EIO for a read that covers
#     that block only, its neighbours and other ranges read fine;
#   - twinfsctl verify names the good twin of a block bad on one, and a
#     block bad on both (BAD-BOTH alone when both hold the same bytes);
#   - twinfsctl scrub --wait heals blocks no one read, on both twins,
#     twinfsctl status shows each iod's checksum counters and last scrub,
#     and a scrub cut by kill -9 of its iod resumes at its next start;
#   - a rebuild whose only source has a bad block (iod 1's copy damaged,
#     iod 2 wiped): the rebuild finishes, copies that block marked bad and
#     counts it (rebuild --status, status, --json; iod and mgrd logs), a
#     read of it gets EIO while the rest of the file reads back byte for
#     byte, verify says BAD-BOTH, and a rewrite of it makes it good again;
#     then the same through an incremental resync (iod 2 only down);
#   - a WRITE frame damaged on the wire (the client's fault knob
#     TWINFS_TEST_CORRUPT_WRITE with TWINFS_TEST_FAULTS=1): refused by the
#     iod (Write.data_crc), sent again by the client, the file is right.
. "$(dirname "$0")/lib.sh"
export TWINFS_COMMIT_INTERVAL=1s   # idle journals go home within ~2 s
# the first WRITE frame the client sends leaves with a damaged byte
export TWINFS_TEST_FAULTS=1 TWINFS_TEST_CORRUPT_WRITE=1
e2e_begin integrity
e2e_tmpdir T

SZ=$((1 << 20))
RUN=$TWINFS_RUN_DIR
mkdir "$M/g0" && setfattr -n twinfs.layout -v "512K 1 0" "$M/g0" ||
	fail layout "setfattr failed"
for f in one two both ver scr rot; do head -c $SZ /dev/urandom >"$T/$f"; done
cp "$T/one" "$M/g0/one" && cp "$T/two" "$M/g0/two" && cp "$T/both" "$M/g0/both" && cp "$T/ver" "$M/g0/ver" &&
	cp "$T/scr" "$M/g0/scr" && cp "$T/rot" "$M/g0/rot" ||
	fail write "cp failed"
ctl sync >/dev/null || fail sync "twinfsctl sync failed"

# metric IOD NAME: the value of NAME on iod IOD's /metrics
metric() {
	"$PY" "$(dirname "$0")/metrics.py" get \
		"http://127.0.0.1:$((TWINFS_PORT + 5 + $1))/metrics" >"$T/m$1" 2>/dev/null &&
		"$PY" "$(dirname "$0")/metrics.py" sum "$T/m$1" "$2"
}
# wait until both iods of group 0 have checkpointed everything home
home=0
for ((i = 0; i < 300; i++)); do
	u1=$(metric 1 twinfs_iod_journal_used_bytes) u2=$(metric 2 twinfs_iod_journal_used_bytes)
	if [[ $u1 == 0 && $u2 == 0 ]]; then home=1; break; fi
	sleep 0.1
done
((home)) && pass data-home || fail data-home "journals not empty: $u1 $u2"

# subpath IOD FILE: the home subfile of column 0 of FILE on iod IOD
subpath() {
	local ino
	ino=$(stat -c %i "$M/g0/$2")
	find "$RUN/iod$1/subfiles" -name "$(printf '%016x' "$ino").0" | head -n 1
}
# flip PATH OFF: invert 16 bytes at OFF in place
flip() {
	"$PY" - "$1" "$2" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); off = int(sys.argv[2])
b = os.pread(fd, 16, off)
os.pwrite(fd, bytes(x ^ 0xff for x in b), off); os.fsync(fd); os.close(fd)
PYEOF
}
# same_range A B OFF LEN: A and B agree on [OFF, OFF + LEN)
same_range() {
	cmp -s <(dd if="$1" bs=4096 skip=$(($3 / 4096)) count=$(($4 / 4096)) 2>/dev/null) \
		<(dd if="$2" bs=4096 skip=$(($3 / 4096)) count=$(($4 / 4096)) 2>/dev/null)
}

# rd NAME OFF LEN: pread LEN bytes at OFF of g0/NAME, without readahead:
# "ok" (the reference's bytes), "prefix" (a short read of them: the kernel
# returns what it read before a failing page), "wrong N" or "error ERRNO"
rd() {
	"$PY" - "$M/g0/$1" "$T/$1" "$2" "$3" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
off, n = int(sys.argv[3]), int(sys.argv[4])
ref = open(sys.argv[2], "rb").read()[off:off + n]
try:
    b = os.pread(fd, n, off)
    print("ok" if b == ref else "prefix" if b == ref[:len(b)] else "wrong %d" % len(b))
except OSError as e:
    print("error", e.errno)
PYEOF
}

# --- the damaged WRITE frame: refused by its iod, sent again by the client
drop_caches
assert_same_file wire-write-resent "$T/one" "$M/g0/one"
if grep -q 'refused: its data does not match the CRC' "$RUN"/logs/iod[12].log; then
	pass wire-write-refused
else
	fail wire-write-refused "no iod of group 0 logged the damaged WRITE"
fi
w=$(($(metric 1 twinfs_iod_csum_wire_mismatches_total) + $(metric 2 twinfs_iod_csum_wire_mismatches_total)))
((w == 1)) && pass metrics-wire-mismatch || fail metrics-wire-mismatch "wire_mismatches_total $w"

# --- one twin bad: a block in each stripe unit of iod 1's copy, so that
# whichever twin serves a unit, iod 1 serves one of them
p1=$(subpath 1 one)
[[ -n $p1 ]] && pass found-subfile || fail found-subfile "no subfile of one on iod 1"
flip "$p1" 100000
flip "$p1" 600000
n1=$(wc -l <"$RUN/logs/iod1.log") nm=$(wc -l <"$RUN/logs/mgrd.log")
for r in 1 2 3 4; do
	drop_caches
	assert_same_file "read-one-$r" "$T/one" "$M/g0/one"
done
if wait_log "$RUN/logs/iod1.log" "$n1" 'ino [0-9]* column 0: block at \(98304\|598016\) fails its checksum' 5000; then
	pass iod-logs-mismatch
else
	fail iod-logs-mismatch "no log line in iod1.log"
fi
wait_log "$RUN/logs/mgrd.log" "$nm" 'g0/one .*failed its checksum: served from its twin' 5000 &&
	pass mgrd-logs-path || fail mgrd-logs-path "no log line with the path in mgrd.log"
h=$(metric 1 twinfs_iod_csum_healed_total)
((h >= 1)) && pass metrics-healed || fail metrics-healed "healed_total $h"
# the healed block went home through the journal: on disk again
for ((i = 0; i < 100; i++)); do
	[[ $(metric 1 twinfs_iod_journal_used_bytes) == 0 ]] && break
	sleep 0.1
done
healed=0
for off in 98304 598016; do same_range "$T/one" "$p1" $off 4096 && healed=$((healed + 1)); done
((healed >= 1)) && pass repaired-on-disk || fail repaired-on-disk "no bad block rewritten on iod 1"
# the other one, if iod 2 served its unit, is healed by an overwrite
dd if="$T/one" of="$M/g0/one" bs=4096 skip=24 seek=24 count=1 conv=notrunc 2>/dev/null
dd if="$T/one" of="$M/g0/one" bs=4096 skip=146 seek=146 count=1 conv=notrunc 2>/dev/null

# --- block 0 bad on iod 1, block 1 bad on iod 2: whichever twin serves
# the read, the other has a bad block in its range; each block comes from
# where it is good and both copies are healed (heal.c)
pt1=$(subpath 1 two) pt2=$(subpath 2 two)
flip "$pt1" 100
flip "$pt2" 5000
h0=$(($(metric 1 twinfs_iod_csum_healed_total) + $(metric 2 twinfs_iod_csum_healed_total)))
drop_caches
out=$(rd two 0 8192)
[[ $out == ok ]] && pass split-bad-read || fail split-bad-read "$out"
for ((i = 0; i < 100; i++)); do
	h1=$(($(metric 1 twinfs_iod_csum_healed_total) + $(metric 2 twinfs_iod_csum_healed_total)))
	((h1 - h0 >= 2)) && break
	sleep 0.1
done
((h1 - h0 == 2)) && pass split-bad-healed-two || fail split-bad-healed-two "healed $((h1 - h0))"
for ((i = 0; i < 100; i++)); do
	[[ $(metric 1 twinfs_iod_journal_used_bytes) == 0 && $(metric 2 twinfs_iod_journal_used_bytes) == 0 ]] && break
	sleep 0.1
done
same_range "$T/two" "$pt1" 0 4096 && same_range "$T/two" "$pt2" 4096 4096 &&
	pass split-bad-repaired-both || fail split-bad-repaired-both "a bad block of two is still on disk"
drop_caches
assert_same_file split-bad-reads "$T/two" "$M/g0/two"

# --- verify names the good twin (ver: bad on iod 2) and a block bad on both
pb1=$(subpath 1 both) pb2=$(subpath 2 both)
flip "$pb1" 200000
flip "$pb2" 200000
flip "$(subpath 2 ver)" 300000
out=$(ctl -t 30000 verify 2>&1)
echo "$out" | grep -E '^(GOOD|BAD-BOTH|DIFFER)' | sed 's/^/# /'
echo "$out" | grep -q "^GOOD .*g0/ver .*iod 1's copy is good, iod 2's fails its block checksums" &&
	pass verify-names-good-twin || fail verify-names-good-twin "no GOOD line for g0/ver"
echo "$out" | grep -q "^BAD-BOTH .*g0/both .*region 0 fails its block checksums on both twins" &&
	pass verify-bad-on-both || fail verify-bad-on-both "no BAD-BOTH line for g0/both"
# both's twins hold the same flipped bytes: bad on both, not different
[[ $(echo "$out" | grep -c '^DIFFER') == 1 ]] && echo "$out" | grep -q '^DIFFER .*g0/ver ' &&
	pass verify-one-differ || fail verify-one-differ "$(echo "$out" | grep '^DIFFER' | tr '\n' ' ')"
echo "$out" | grep -q '^verify: 1 of [0-9]* subfiles hold blocks bad on both twins' &&
	pass verify-bad-both-summary || fail verify-bad-both-summary "$(echo "$out" | tail -n 2 | tr '\n' ' ')"
echo "$out" | grep -q 'g0/two' && fail verify-split-healed "verify names g0/two" ||
	pass verify-split-healed
# ver's bad block is read (from whichever twin) and rewritten through the mount
drop_caches
assert_same_file ver-reads "$T/ver" "$M/g0/ver"
dd if="$T/ver" of="$M/g0/ver" bs=4096 skip=73 seek=73 count=1 conv=notrunc 2>/dev/null

# --- both twins bad: EIO for that block only
drop_caches
# (each read of the bad block takes the client's deadline: it retries EIO)
out=$(rd both 196608 4096              # the block holding offset 200000
	rd both 192512 12288             # from the block before it, across it
	for off in 0 65536 192512 200704 524288 786432 1044480; do rd both $off 4096; done)
echo "$out" | sed 's/^/# /'
[[ $(echo "$out" | sed -n 1p) == "error 5" ]] && pass both-bad-eio ||
	fail both-bad-eio "$(echo "$out" | sed -n 1p)"
# at most the block before it, never wrong bytes
[[ $(echo "$out" | sed -n 2p) =~ ^(prefix|error\ 5)$ ]] && pass both-bad-span-prefix ||
	fail both-bad-span-prefix "$(echo "$out" | sed -n 2p)"
[[ $(echo "$out" | tail -n +3 | grep -c '^ok') == 7 ]] && pass both-bad-other-ranges ||
	fail both-bad-other-ranges "$(echo "$out" | tail -n +3 | grep -v '^ok' | tr '\n' ' ')"
# an overwrite of the range through the mount heals it on both
dd if="$T/both" of="$M/g0/both" bs=4096 skip=48 seek=48 count=1 conv=notrunc 2>/dev/null
drop_caches
assert_same_file both-rewritten "$T/both" "$M/g0/both"

# --- the scrub finds and heals blocks no one reads: one bad on each twin
ps1=$(subpath 1 scr) ps2=$(subpath 2 scr)
flip "$ps1" 41000
flip "$ps2" 820000
h0=$(($(metric 1 twinfs_iod_csum_healed_total) + $(metric 2 twinfs_iod_csum_healed_total)))
out=$(ctl scrub --wait --rate 64 2>&1) && pass scrub-wait ||
	fail scrub-wait "exit $?: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
echo "$out" | tail -n 4 | sed 's/^/# /'
for ((i = 0; i < 100; i++)); do
	[[ $(metric 1 twinfs_iod_journal_used_bytes) == 0 && $(metric 2 twinfs_iod_journal_used_bytes) == 0 ]] && break
	sleep 0.1
done
same_range "$T/scr" "$ps1" 40960 4096 && same_range "$T/scr" "$ps2" 819200 4096 &&
	pass scrub-repaired-both || fail scrub-repaired-both "a bad block of scr is still on disk"
h1=$(($(metric 1 twinfs_iod_csum_healed_total) + $(metric 2 twinfs_iod_csum_healed_total)))
((h1 - h0 == 2)) && pass scrub-healed-two || fail scrub-healed-two "healed $((h1 - h0))"
out=$(ctl scrub --status --json 1)
[[ $out == *'"iod": 1, "running": false'*'"runs": 1}'* ]] && pass scrub-status-json ||
	fail scrub-status-json "$out"
# twinfsctl status: each iod's checksum counters (as /metrics) and its
# last scrub
h=$(metric 1 twinfs_iod_csum_healed_total) u=$(metric 1 twinfs_iod_csum_unhealed_total)
out=$(ctl status 2>&1)
echo "$out" | grep checksums | sed 's/^/# /'
echo "$out" | grep -q "^iod 1 checksums: [0-9]* bad blocks found, $h healed, $u unrepairable; last scrub: 20[0-9-]* [0-9:]* UTC, 1 bad, [01] healed, 0 unrepairable$" &&
	pass status-checksums || fail status-checksums "$(echo "$out" | grep '^iod 1 checksums')"
out=$(ctl status --json 2>&1 | "$PY" -c '
import json, sys
i = [x for x in json.load(sys.stdin)["iods"] if x["id"] == 1][0]
c, s = i["csum"], i["scrub"]
print(c["enabled"], c["healed"], c["unrepairable"], s["last_bad"],
      s["last_healed"] in (0, 1), s["last_unrepairable"], s["last_done"] > 0)' 2>&1)
assert_eq status-json-checksums "True $h $u 1 True 0 True" "$out"
# a scrub cut by kill -9 of its iod resumes at the next start
n1=$(wc -l <"$RUN/logs/iod1.log")
ctl scrub --rate 1 1 >/dev/null || fail scrub-slow-start "twinfsctl scrub 1 failed"
sleep 1.5
lc kill-iod 1 >/dev/null
lc start-iod 1 >/dev/null || fail scrub-restart "start-iod 1 failed"
wait_log "$RUN/logs/iod1.log" "$n1" 'resuming the scrub at subfile' 10000 &&
	pass scrub-resumes || fail scrub-resumes "no resume line in iod1.log"
e2e_wait_healthy 60 || fail scrub-healthy "group 0 not healthy after the restart"
out=$(ctl scrub --wait 1 2>&1) && pass scrub-resumed-ends ||
	fail scrub-resumed-ends "exit $?: $(echo "$out" | tail -n 1)"
[[ -e $RUN/iod1/twinfs-scrub ]] && fail scrub-cursor-gone "DIR/twinfs-scrub left" ||
	pass scrub-cursor-gone

# the schedule: with [iod] scrub_interval = 2s a restarted iod 2 starts a
# scrub by itself once its last one finished that long ago
CONF=$(lc conf)
if grep -q '^\[iod\]$' "$CONF"; then
	sed -i '/^\[iod\]$/a scrub_interval = 2s' "$CONF"
else
	printf '[iod]\nscrub_interval = 2s\n' >>"$CONF"
fi
n2=$(wc -l <"$RUN/logs/iod2.log")
lc kill-iod 2 >/dev/null
lc start-iod 2 >/dev/null || fail scrub-sched-restart "start-iod 2 failed"
wait_log "$RUN/logs/iod2.log" "$n2" 'scrub started (scheduled' 20000 &&
	pass scrub-scheduled || fail scrub-scheduled "no scheduled scrub in iod2.log"
e2e_wait_healthy 60 || fail scrub-sched-healthy "group 0 not healthy after the restart"
out=$(ctl scrub --wait 2 2>&1) && pass scrub-scheduled-ends ||
	fail scrub-scheduled-ends "exit $?: $(echo "$out" | tail -n 1)"

# --- a rebuild from the only copy, which has a bad block: iod 2 down and
# wiped, block 73 of rot damaged on iod 1 (home since the first checks)
t0=$(now_ms)
lc kill-iod 2 >/dev/null
out=$(wait_state 2 '^down' 10000) && pass badcopy-down || fail badcopy-down "$out"
flip "$(subpath 1 rot)" 300000
rm -rf "$RUN/iod2"
n1=$(wc -l <"$RUN/logs/iod1.log") nm=$(wc -l <"$RUN/logs/mgrd.log")
lc start-iod 2 >/dev/null || fail badcopy-start "start-iod 2 failed"
e2e_wait_healthy 90 && pass badcopy-rebuild-ends ||
	fail badcopy-rebuild-ends "$(ctl status 2>&1 | tr '\n' ' ')"
wait_log "$RUN/logs/iod1.log" "$n1" 'column 0 block at 299008 fails its checksum on iod 1, the only readable copy: sent marked bad' 5000 &&
	pass badcopy-iod-logs || fail badcopy-iod-logs "no unrepairable line in iod1.log"
wait_log "$RUN/logs/mgrd.log" "$nm" 'g0/rot .*offset 299008 failed its checksum: the twin' 5000 &&
	pass badcopy-mgrd-logs-path || fail badcopy-mgrd-logs-path "no line with the path in mgrd.log"
out=$(ctl rebuild --status 2 2>&1)
echo "$out" | grep -q '^  unrepairable: 1 blocks bad on both twins' &&
	pass badcopy-rebuild-status || fail badcopy-rebuild-status "$(echo "$out" | tr '\n' ' ')"
out=$(ctl status 2>&1)
echo "$out" | grep -q '^iod 2 resync: 1 unrepairable blocks' &&
	pass badcopy-status || fail badcopy-status "$(echo "$out" | tr '\n' ' ')"
out=$(ctl status --json 2>&1 | "$PY" -c '
import json, sys
print([x["resync_unrepairable"] for x in json.load(sys.stdin)["iods"] if x["id"] in (1, 2)])' 2>&1)
assert_eq badcopy-status-json "[0, 1]" "$out"
drop_caches
out=$(rd rot 299008 4096; rd rot 0 299008; rd rot 303104 $((SZ - 303104)))
echo "$out" | sed 's/^/# /'
assert_eq badcopy-reads "error 5 ok ok" "$(echo $out)"
out=$(ctl -t 30000 verify 2>&1)
echo "$out" | grep -E '^(BAD-BOTH|GOOD|DIFFER)' | sed 's/^/# /'
echo "$out" | grep -q "^BAD-BOTH .*g0/rot .*region 0 fails its block checksums on both twins" &&
	! echo "$out" | grep -q '^DIFFER' &&
	pass badcopy-verify-bad-both || fail badcopy-verify-bad-both "no BAD-BOTH line alone for g0/rot"
# a rewrite of the block through the mount: good on both again
dd if="$T/rot" of="$M/g0/rot" bs=4096 skip=73 seek=73 count=1 conv=notrunc 2>/dev/null
drop_caches
assert_same_file badcopy-rewritten "$T/rot" "$M/g0/rot"
# the same through an incremental resync (region mode): iod 2 down, a
# write marks region 0 of rot on iod 1 alone, block 10 of iod 1's copy
# (home since the start) goes bad, iod 2 comes back
lc kill-iod 2 >/dev/null
out=$(wait_state 2 '^down' 10000) && pass badcopy-incr-down || fail badcopy-incr-down "$out"
dd if="$T/rot" of="$M/g0/rot" bs=4096 skip=100 seek=100 count=1 conv=notrunc 2>/dev/null
flip "$(subpath 1 rot)" 41000
n1=$(wc -l <"$RUN/logs/iod1.log")
lc start-iod 2 >/dev/null || fail badcopy-incr-start "start-iod 2 failed"
e2e_wait_healthy 90 && pass badcopy-incr-ends ||
	fail badcopy-incr-ends "$(ctl status 2>&1 | tr '\n' ' ')"
wait_log "$RUN/logs/iod1.log" "$n1" 'column 0 block at 40960 fails its checksum on iod 1, the only readable copy: sent marked bad' 5000 &&
	pass badcopy-incr-logs || fail badcopy-incr-logs "no unrepairable line in iod1.log"
out=$(ctl rebuild --status --json 2 2>&1)
[[ $out == *'"full":false'*'"unrepairable":1}'* ]] && pass badcopy-incr-counted ||
	fail badcopy-incr-counted "$out"
drop_caches
out=$(rd rot 40960 4096; rd rot 0 40960; rd rot 45056 $((SZ - 45056)))
assert_eq badcopy-incr-reads "error 5 ok ok" "$(echo $out)"
dd if="$T/rot" of="$M/g0/rot" bs=4096 skip=10 seek=10 count=1 conv=notrunc 2>/dev/null
drop_caches
assert_same_file badcopy-incr-rewritten "$T/rot" "$M/g0/rot"
echo "# rebuild from a bad only copy: checks took $(($(now_ms) - t0)) ms"

# every copy good again: verify is clean
e2e_verify

e2e_end
