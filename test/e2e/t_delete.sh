#!/usr/bin/env bash
# t_delete.sh - the subfiles of removed files really go away on every iod
# (docs/ARCHITECTURE.md "Metadata": subfile deletion is asynchronous and
# retried).
# mgrd defers those DELETEs while client requests keep arriving
# (iodpool.c: demand before background work); this checks that they
# happen once the requests stop, and that a steady stream of requests
# that never pauses does not hold them back for good (the 100 ms tick),
# nor a twin group that is down (its deletes wait, the others do not).
. "$(dirname "$0")/lib.sh"
e2e_begin delete
e2e_tmpdir T
CLUSTER=$TWINFS_CLUSTER
N=$(scale 24)
subfiles() { "$PY" "$E2E_DIR/twire.py" subfiles 127.0.0.1 $((TWINFS_PORT + $1)) "$CLUSTER"; }
IODS="1 2 3 4"   # the iods count asks

# count INOS_FILE: how many subfiles of those inodes the iods in $IODS
# list; -1 when an iod cannot list them (never taken for "none left").
count() {
	local i out all=
	for i in $IODS; do
		out=$(subfiles "$i") || { echo -1; return; }
		all+=$out$'\n'
	done
	printf '%s' "$all" |
		awk 'NR == FNR { want[$1] = 1; next } ($1 in want)' "$1" - | wc -l
}

# gone_within LABEL INOS_FILE SECONDS: poll until none is left
gone_within() {
	local t0 left
	t0=$(now_ms)
	while :; do
		left=$(count "$2")
		((left == 0 || $(now_ms) - t0 > $3 * 1000)) && break
		sleep 0.1
	done
	if ((left == 0)); then
		pass "$1"
		echo "  $1: gone after $(($(now_ms) - t0)) ms"
	else
		fail "$1" "after $3 s: $( ((left < 0)) && echo "an iod cannot list its subfiles" || echo "$left subfiles still listed")"
	fi
}

cd "$M" || exit 1
head -c $((1 << 20)) /dev/urandom >"$T/data"

# N files of 1 MiB: with 512 KiB units over both groups, each has a
# subfile on each of the four iods.
mkdir quiet
for ((i = 0; i < N; i++)); do cp "$T/data" quiet/f$i; done
stat -c %i quiet/f* >"$T/inos1"
assert_eq subfiles-written $((N * 4)) "$(count "$T/inos1")"
rm -rf quiet
gone_within deleted-when-idle "$T/inos1" 10

# The same while another client process keeps mgrd busy: a chmod every
# 2 ms (each one an mgrd round trip: the mount answers none itself), for
# 6 s.  Deletes must still finish, well before the load ends.
mkdir busy
for ((i = 0; i < N; i++)); do cp "$T/data" busy/f$i; done
stat -c %i busy/f* >"$T/inos2"
assert_eq subfiles-written-busy $((N * 4)) "$(count "$T/inos2")"
: >load
"$PY" - "$M/load" "$T/load.done" <<'EOF' &
import os, sys, time
end = time.monotonic() + 6
n = 0
while time.monotonic() < end:
    os.chmod(sys.argv[1], 0o600 if n % 2 else 0o644)
    n += 1
    time.sleep(0.002)
open(sys.argv[2], "w").write("%d\n" % n)
EOF
load=$!
sleep 0.3
rm -rf busy
gone_within deleted-under-load "$T/inos2" 4
if [[ -e $T/load.done ]]; then
	fail load-still-running "the chmod load ended before the deletes did"
else
	pass load-still-running
fi
wait "$load"
echo "  chmods during the load: $(cat "$T/load.done" 2>/dev/null)"

# Both twins of group 1 down: the files removed meanwhile on group 0 are
# deleted as usual (the group-1 deletes waiting for their group hold
# nothing up); once the group is back, its deletes go through too.
mkdir g0 g1
setfattr -n twinfs.layout -v "512K 1 0" g0
setfattr -n twinfs.layout -v "512K 1 1" g1
for ((i = 0; i < N; i++)); do cp "$T/data" g1/f$i; done
stat -c %i g1/f* >"$T/inos_g1"
(cd / && lc kill-iod 3 >/dev/null && lc kill-iod 4 >/dev/null)
w3=$(wait_state 3 down 20000) && w4=$(wait_state 4 down 20000) &&
	pass group1-down || fail group1-down "iod 3: $w3, iod 4: $w4"
rm -rf g1 && pass rm-while-group-down || fail rm-while-group-down
for ((i = 0; i < N; i++)); do cp "$T/data" g0/f$i; done
stat -c %i g0/f* >"$T/inos_g0"
IODS="1 2"
assert_eq subfiles-written-g0 $((N * 2)) "$(count "$T/inos_g0")"
rm -rf g0
gone_within deleted-beside-a-down-group "$T/inos_g0" 5
IODS="1 2 3 4"
(cd / && lc start-iod 3 >/dev/null && lc start-iod 4 >/dev/null)
w3=$(wait_state 3 '^up$' 60000) && w4=$(wait_state 4 '^up$' 60000) &&
	pass group1-back || fail group1-back "iod 3: $w3, iod 4: $w4"
gone_within deleted-after-group-back "$T/inos_g1" 10

# Files removed right before a kill -9 of mgrd: the restarted one finds
# their pending deletes in its journal and finishes them.
mkdir restart
for ((i = 0; i < N; i++)); do cp "$T/data" restart/f$i; done
stat -c %i restart/f* >"$T/inos_r"
assert_eq subfiles-written-restart $((N * 4)) "$(count "$T/inos_r")"
rm -rf restart
(cd / && lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null) ||
	fail mgrd-restart "kill/start failed"
e2e_wait_healthy 60 || fail mgrd-restart-healthy "not healthy after the restart"
gone_within deleted-after-mgrd-restart "$T/inos_r" 15

# Nothing of the files that stay was deleted by mistake.
cp "$T/data" keep
assert_same_file kept-file "$T/data" keep
e2e_verify
e2e_end
