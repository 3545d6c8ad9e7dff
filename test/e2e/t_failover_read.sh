#!/usr/bin/env bash
# t_failover_read.sh - failover drill, kill -9 during a read: a 256 MiB
# file is read (after a remount, so every byte comes from the iods) while
# one of its iods is killed; the read completes with the right bytes, since
# a failed piece goes at once to the other readable twin.  Then the same
# with a twin hung by SIGSTOP: the read still completes, within the op
# deadline (2 x request_timeout) of its slowest piece.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin failover_read
e2e_tmpdir T

SIZE=$(scale $((256 << 20)))
head -c "$SIZE" /dev/urandom >"$T/src"
cp "$T/src" "$M/f" || fail read-setup "cp failed"
want=$(sha "$T/src")

# read_with_victim NAME SIGNAL-COMMAND IOD: read $M/f in 1 MiB chunks;
# after a quarter, run `lc SIGNAL-COMMAND IOD`; the digest must match.
read_with_victim() {
	local name=$1 cmd=$2 iod=$3 got
	e2e_remount
	"$PY" - "$M/f" "$T/quarter" "$SIZE" >"$T/read.out" 2>&1 <<'PYEOF' &
import hashlib, os, sys, time
path, marker, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
h = hashlib.sha256()
fd = os.open(path, os.O_RDONLY)
done = 0; worst = 0.0; marked = False
while True:
    a = time.monotonic()
    b = os.read(fd, 1 << 20)
    worst = max(worst, time.monotonic() - a)
    if not b:
        break
    h.update(b); done += len(b)
    if not marked and done >= size // 4:
        open(marker, "w").close(); marked = True
        time.sleep(0.2)   # let the victim go while we are mid-file
print(h.hexdigest(), int(worst * 1000))
PYEOF
	local rpid=$! i
	rm -f "$T/quarter"
	for ((i = 0; i < 600; i++)); do [[ -e $T/quarter ]] && break; sleep 0.05; done
	(cd / && lc "$cmd" "$iod" >/dev/null)
	if wait $rpid; then
		got=$(tail -n 1 "$T/read.out")
		assert_eq "$name-bytes" "$want" "${got%% *}"
		echo "# $name: longest 1 MiB read stall ${got##* } ms"
	else
		fail "$name-bytes" "reader failed: $(tail -n 2 "$T/read.out" | tr '\n' ' ')"
	fi
}

read_with_victim read-kill kill-iod 1
read_with_victim read-hang stop-iod 3
out=$(wait_state 3 '^down' $((2 * MI_MS + RT_MS + 1000))) && pass read-hung-iod-down || fail read-hung-iod-down "$out"
(cd / && lc cont-iod 3 >/dev/null)
out=$(wait_resync_rejoin 3 $((2 * MI_MS + RT_MS + 1000))) && pass read-sigcont-resyncing ||
	fail read-sigcont-resyncing "$out"
e2e_end
