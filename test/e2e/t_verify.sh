#!/usr/bin/env bash
# t_verify.sh - twinfsctl verify finds a real difference between twins and
# names it, finds none while files are being changed, and does not stall
# the iods it reads; twinfsctl rebuild of a live twin repairs what it found.
#   1. A file whose subfiles span several CHECKSUM calls, an empty file and
#      four more: verify is clean.
#   2. While fio rewrites four files with O_DIRECT, one file grows, one is
#      truncated and rewritten and files are created and deleted, verify
#      runs again and again: every run must be clean.  Both twins take their
#      checksums at one point of the primary's write order; before that
#      (two independent checksums) most runs reported twins that agree as
#      different.
#   3. A sparse file of 16 GiB (4 GiB at scale 0.25): verify is clean and
#      no iod is demoted to down meanwhile (monitor_interval 200 ms).  The
#      checksums run on the iods' loops, a bounded piece per call;
#      checksumming a whole subfile at once made mgrd demote iods.
#   4. One twin gets a write its partner never saw (twire.py speaks as the
#      partner and forwards 64 bytes): verify exits 1 and prints
#      "DIFFER /path (ino N column 0): iod A vs iod B: region 17" (a region
#      of the subfile's second CHECKSUM call).
#   5. `twinfsctl rebuild --wait B` copies the live twin B again in full
#      from A, sparse file included, and no iod is demoted meanwhile (the
#      copy of a long run of holes held the source's loop until mgrd
#      demoted it); B goes through resyncing back to up, verify is clean
#      and the file reads back byte for byte.
. "$(dirname "$0")/lib.sh"
export TWINFS_MONITOR_INTERVAL=${TWINFS_MONITOR_INTERVAL:-200ms}
export TWINFS_DOWN_AFTER=${TWINFS_DOWN_AFTER:-4}
e2e_begin verify
e2e_tmpdir T
TWIRE=$REPO/test/e2e/twire.py

# Demotions to down (four pings missed in a row, 800 ms): a loop held by
# the copy for seconds shows as one.  A loaded machine can keep an iod
# off the CPU for a few hundred ms (CI runs two tests under ASan on two
# vCPUs; the iod logs such stalls as "event loop held", with the thread's
# CPU time small and its preemptions many): the default two pings, 400
# ms, made that a demotion now and then.
demotions() { grep -c -- '-> down' "$TWINFS_RUN_DIR/logs/mgrd.log"; }

# verify_clean NAME: exit 0 and "twins identical".
verify_clean() {
	local out rc
	out=$(ctl -t 30000 verify 2>&1)
	rc=$?
	if ((rc == 0)) && [[ $out == *"twins identical"* ]]; then
		pass "$1"
	else
		fail "$1" "exit $rc: $(echo "$out" | head -n 4 | tr '\n' ' ')"
	fi
}

# 1. Files of every kind.  The big file's subfiles hold over 16 regions of
# 1 MiB each, so verify needs several calls per subfile.
BIG=$(scale $((96 << 20)))
((BIG < (40 << 20))) && BIG=$((40 << 20))
head -c "$BIG" /dev/urandom >"$T/big"
cp "$T/big" "$M/big"
: >"$M/empty"
for i in 1 2 3 4; do head -c $((8 << 20)) /dev/urandom >"$M/w$i"; done
ctl sync >/dev/null
s0=$(demotions)
verify_clean files-clean
assert_eq no-demotion-while-verifying "$s0" "$(demotions)"

# 2. Verify while everything changes.  Every writer is bounded in count and
# stopped by the flag file; fio by its PID.
stop=$T/stop
fio --name=rw --directory="$M" --filename=w1:w2:w3:w4 --rw=randwrite \
	--bs=4k --size=8M --direct=1 --ioengine=libaio --iodepth=4 \
	--time_based --runtime=300 --output="$T/fio.out" >/dev/null 2>&1 &
fio_pid=$!
python3 - "$M" "$stop" >"$T/writers.out" 2>&1 <<'EOF' &
import os, random, sys
m, stop = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
grow = os.open(os.path.join(m, "grow"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
trunc = os.path.join(m, "trunc")
for i in range(100000):
    if os.path.exists(stop):
        break
    os.write(grow, os.urandom(64 << 10))
    with open(trunc, "r+b" if os.path.exists(trunc) else "wb") as f:
        f.truncate(rnd.randrange(0, 6 << 20))
        f.seek(rnd.randrange(0, 6 << 20))
        f.write(os.urandom(rnd.randrange(1, 256 << 10)))
    name = os.path.join(m, "del.%d" % (i % 8))
    with open(name, "wb") as f:
        f.write(os.urandom(1 << 20))
    if i % 2:
        os.unlink(name)
os.close(grow)
print("writers done after", i, "rounds")
EOF
writers_pid=$!
sleep 1
for r in 1 2 3 4 5; do
	verify_clean "live-writes-clean-$r"
done
touch "$stop"
kill "$fio_pid" 2>/dev/null
wait "$fio_pid" 2>/dev/null
wait "$writers_pid"
check writers-ran grep -q 'writers done' "$T/writers.out"
# No iod was demoted meanwhile.
assert_eq no-demotion-under-writes "$s0" "$(demotions)"
verify_clean after-writers-clean

# 3. A sparse file: a byte at the end of the last two stripe units, so
# both columns' subfiles are half its size, nearly all holes.
SPARSE=$(scale $((16 << 30)))
((SPARSE < (4 << 30))) && SPARSE=$((4 << 30))
python3 - "$M/sparse" "$SPARSE" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
size = int(sys.argv[2])
os.pwrite(fd, b"x", size - 1)
os.pwrite(fd, b"y", size - 1 - (512 << 10))
os.close(fd)
EOF
ctl sync >/dev/null
verify_clean sparse-clean
assert_eq no-demotion-verifying-sparse "$s0" "$(demotions)"

# 4. A difference: iod B (twin 1 of the group holding column 0 of big)
# gets 64 bytes in region 17 of that subfile (the second CHECKSUM call
# covers it) that its partner A never saw.
ino=$(stat -c %i "$M/big")
layout=$(getfattr -n twinfs.layout --only-values "$M/big" 2>/dev/null)
g=$(echo "$layout" | sed -n 's/.*groups=\([0-9]*\).*/\1/p')
read -r A B < <(ctl status | awk -v g="$g" '$2 == g && $3 == 0 { a = $1 }
	$2 == g && $3 == 1 { b = $1 } END { print a, b }')
if out=$(python3 "$TWIRE" diverge 127.0.0.1 $((TWINFS_PORT + B)) \
	"$TWINFS_CLUSTER" "$A" "$ino" 0 $(((17 << 20) + 100)) "$layout" 2>&1); then
	pass diverge-one-twin
else
	fail diverge-one-twin "$out"
fi
out=$(ctl -t 30000 verify 2>&1)
rc=$?
assert_eq differ-exit-1 1 "$rc"
want="DIFFER /big (ino $ino column 0): iod $A vs iod $B: region 17"
if grep -qxF "$want" <<<"$out"; then
	pass differ-names-file-twins-region
else
	fail differ-names-file-twins-region "want '$want', got: $(echo "$out" | head -n 3 | tr '\n' ' ')"
fi
if [[ $(grep -c '^DIFFER' <<<"$out") == 1 ]]; then
	pass differ-only-that-subfile
else
	fail differ-only-that-subfile "$(echo "$out" | head -n 4 | tr '\n' ' ')"
fi

# 5. The repair: B, which is up, is copied again from A.
if out=$(ctl -t 30000 rebuild --full --wait "$B" 2>&1); then
	pass rebuild-live-twin
else
	fail rebuild-live-twin "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi
check rebuild-went-through-resyncing grep -q \
	"iod $B (.*) up -> resyncing, needs resync (admin: rebuild of a live twin)" \
	"$TWINFS_RUN_DIR/logs/mgrd.log"
check rebuild-full-copy grep -q "resync of iod $B from iod $A starts (full copy)" \
	"$TWINFS_RUN_DIR/logs/mgrd.log"
assert_eq rebuild-ends-up up "$(iod_state "$B")"
assert_eq no-demotion-while-rebuilding "$s0" "$(demotions)"
verify_clean repaired-clean
e2e_remount
assert_same_file big-bytes "$T/big" "$M/big"
e2e_end
