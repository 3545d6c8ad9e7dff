#!/usr/bin/env bash
# t_efbig.sh - a file can never grow past what the iods' file systems
# hold: the client answers EFBIG (or a short write) for every way past a
# file's limit (efbig.py), RLIMIT_FSIZE raises SIGXFSZ as on any file
# system, an iod refuses a WRITE past its own limit sent
# straight to it, and nothing past a limit ever reaches a journal: both
# twins replay after kill -9 and checkpoint, stay up, and agree.
. "$(dirname "$0")/lib.sh"
e2e_begin efbig

mkdir "$M/e" && setfattr -n twinfs.layout -v "512K 1 0" "$M/e"
run_checks "$PY" "$E2E_DIR/efbig.py" "$M/e"

# RLIMIT_FSIZE is the kernel's own: SIGXFSZ at the process's limit, the
# file holding exactly what fitted.
bash -c "ulimit -f 8; exec dd if=/dev/zero of='$M/e/fsz' bs=4k count=10 status=none" 2>/dev/null
assert_eq efbig-sigxfsz "153 8192" "$? $(stat -c %s "$M/e/fsz")"

# What each iod probed, and what mgrd made of it.
lim=$(sed -n 's/.*the cluster.s limit is now \([0-9]*\).*/\1/p' \
	"$TWINFS_RUN_DIR/logs/mgrd.log" | tail -n 1)
[[ -n $lim ]] && pass efbig-mgrd-limit || fail efbig-mgrd-limit "no limit in mgrd's log"
lay=$(getfattr -n twinfs.layout --only-values "$M/e/big" 2>/dev/null)
ino=$(stat -c %i "$M/e/big")

# A client that skips the check: a WRITE straight to the primary (group 0
# has both twins up, iod 1 or 2) past the subfile limit is refused before
# it is applied or forwarded.
read -r A B < <(ctl status | awk '$2 == 0 && $3 == 0 { a = $1 }
	$2 == 0 && $3 == 1 { b = $1 } END { print a, b }')
for iod in "$A" "$B"; do
	out=$("$PY" "$E2E_DIR/twire.py" write 127.0.0.1 $((TWINFS_PORT + iod)) \
		"$TWINFS_CLUSTER" "$ino" 0 $((lim - 10)) "$lay" 0 2>&1)
	# -27 is EFBIG; the twin that is not the primary refuses a client
	# write to a column it does not order (-EINVAL) only after the check.
	assert_eq "efbig-wire-write-iod-$iod" "status -27" "$out"
done
grep -q "WRITE refused (File too large)" "$TWINFS_RUN_DIR"/logs/iod*.log &&
	pass efbig-wire-logged || fail efbig-wire-logged "no refusal in the iods' logs"

# Nothing past the limit is in a journal: kill -9 both twins (replay at
# start) one after the other, then a clean stop of each (checkpoint).
cd /
for iod in "$A" "$B"; do
	lc kill-iod "$iod" >/dev/null && lc start-iod "$iod" >/dev/null
	t=$(wait_state "$iod" '^up$' 30000) && pass "efbig-replay-iod-$iod" ||
		fail "efbig-replay-iod-$iod" "$t"
done
ctl sync >/dev/null
out=$(ctl status 2>&1) && pass efbig-group-healthy || fail efbig-group-healthy "$(echo "$out" | tail -n 1)"
assert_eq efbig-bytes-after-restart ok "$(head -c 2 "$M/e/big")"
e2e_verify
e2e_end
