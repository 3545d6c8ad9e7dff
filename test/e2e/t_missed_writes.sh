#!/usr/bin/env bash
# t_missed_writes.sh - a twin that missed a write its primary applied is
# resynced even when mgrd never demotes it.
#
# With mgrd down, twin T of a file's first column is killed and started
# again (it cannot register, so it serves nothing).  An O_DIRECT write to
# that column reaches the primary P, which applies it, cannot forward it
# (T is not registered) and answers EIO: P holds bytes T lacks, pinned in
# P's write-intent log.  mgrd comes back; T's first registration since
# mgrd started keeps it `up` (the whole cluster may have restarted
# together), so without more the twins stayed different and reads
# alternated between old and new bytes.  P now reports the missed writes
# (Report.missed_writes) and mgrd resyncs T from P.
# Checks: the write fails with EIO (not acknowledged); mgrd logs the
# report and T goes up -> resyncing -> up; twinfsctl verify is clean; the
# file reads the same twice over a remount (both twins serve it) and
# equals either the old or the new bytes in the written range.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"
e2e_begin missed_writes
e2e_tmpdir T
trap 'rc=$?; (cd / && lc start-mgrd >/dev/null 2>&1); (exit $rc); e2e_cleanup' EXIT

head -c $((4 << 20)) /dev/urandom >"$T/orig"
cp "$T/orig" "$M/f"
ctl sync >/dev/null
ino=$(stat -c %i "$M/f")
g=$(getfattr -n twinfs.layout --only-values "$M/f" 2>/dev/null |
	sed -n 's/.*groups=\([0-9]*\).*/\1/p')
# Column 0's primary while both twins are up: twin (ino + 0) mod 2.
read -r P TW < <(ctl status | awk -v g="$g" -v p=$((ino % 2)) '
	$1 ~ /^[0-9]+$/ && $2 == g { if ($3 == p) a = $1; else b = $1 }
	END { print a, b }')
echo "# ino $ino, group $g: primary iod $P, twin iod $TW"

# The writer opens the file while mgrd answers, then waits for the word.
"$PY" - "$M/f" "$T" >"$T/w.out" 2>&1 <<'EOF' &
import mmap, os, sys, time
path, tmp = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
print("ready", flush=True)
for _ in range(1200):
    if os.path.exists(os.path.join(tmp, "go")):
        break
    time.sleep(0.05)
buf = mmap.mmap(-1, 65536)
buf.write(b"\xee" * 65536)
try:
    os.pwrite(fd, buf, 0)
    print("written", flush=True)
except OSError as e:
    print("error", e.errno, flush=True)
EOF
wpid=$!
for ((i = 0; i < 200; i++)); do grep -q ready "$T/w.out" && break; sleep 0.05; done
(cd / && lc kill-mgrd >/dev/null && lc kill-iod "$TW" >/dev/null &&
	lc start-iod "$TW" >/dev/null) || fail setup-outage "kill/start failed"
touch "$T/go"
wait "$wpid"
assert_eq write-not-acknowledged "error 5" "$(tail -n 1 "$T/w.out")"
check primary-applied-alone grep -q "ino $ino column 0: twin iod $TW .* did not apply it" \
	"$TWINFS_RUN_DIR/logs/iod$P.log"

(cd / && lc start-mgrd >/dev/null) || fail start-mgrd "start-mgrd failed"
check healthy e2e_wait_healthy 60
log=$TWINFS_RUN_DIR/logs/mgrd.log
# P reports the pinned write a request_timeout after it failed, through
# mgrd once mgrd is back: the report may come after the cluster first
# looks healthy (CI saw it 150 ms later).  Then T resyncs and comes up.
t0=$(now_ms)
until grep -q "iod $TW missed writes that its twin iod $P applied" "$log" ||
	(($(now_ms) - t0 > 30000)); do
	sleep 0.2
done
wait_state "$TW" '^up$' 30000 >/dev/null || true
check missed-writes-reported grep -q "iod $TW missed writes that its twin iod $P applied" "$log"
check twin-resynced grep -q "iod $TW (.*) up -> resyncing, needs resync (it missed writes iod $P applied" "$log"
e2e_verify
# Both twins serve the file now: two reads over a remount agree, and the
# written range holds the old or the new bytes, nothing else.
e2e_remount
sha1=$(sha "$M/f")
e2e_remount
assert_eq reads-agree "$sha1" "$(sha "$M/f")"
"$PY" - "$M/f" "$T/orig" >"$T/cmp.out" 2>&1 <<'EOF'
import sys
got = open(sys.argv[1], "rb").read()
orig = open(sys.argv[2], "rb").read()
head = got[:65536]
ok = len(got) == len(orig) and got[65536:] == orig[65536:] and \
    head in (orig[:65536], b"\xee" * 65536)
print("same" if ok else "other bytes")
EOF
assert_eq bytes-old-or-new same "$(cat "$T/cmp.out")"
e2e_end
