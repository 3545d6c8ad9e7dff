# lib.sh - shared code for the end-to-end tests (source it, do not run it).
#
# A test script does:
#   . "$(dirname "$0")/lib.sh"
#   e2e_begin basic          # private cluster: own run dir, mount and ports
#   ... checks: assert_eq, assert_errno, assert_same_file, check ...
#   e2e_verify               # twinfsctl verify must be clean
#   e2e_end                  # prints the summary; exit status = failures
#
# Each check prints "PASS name" or "FAIL name: reason" on its own line;
# test/run-all counts those lines.  The EXIT trap tears the cluster down,
# fails the test if a daemon's log holds a sanitizer report, and removes the
# run directory (logs are copied to $TWINFS_E2E_ARTIFACTS on failure).
#
# Environment:
#   TWINFS_BUILD_DIR      build to test (default <repo>/build)
#   TWINFS_TEST_SCALE     multiplies data sizes (default 1; 0.125 under ASan)
#   TWINFS_E2E_ARTIFACTS  where logs of failed tests go (default /var/tmp/twinfs-e2e-logs)
#   TWINFS_E2E_KEEP=1     leave the cluster running and the run dir in place
#   TWINFS_E2E_KEEP_LOGS=1  keep the logs of passing tests too (as above)

set -u -o pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
LC=$REPO/deploy/local-cluster
export TWINFS_BUILD_DIR=${TWINFS_BUILD_DIR:-$REPO/build}
SCALE=${TWINFS_TEST_SCALE:-1}
# Tests run python as root and as nobody: use the system interpreter, which
# every user can execute (not a per-user shim).
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

E2E_PASS=0
E2E_FAIL=0
E2E_NAME=
E2E_UP=0
E2E_TMPDIRS=()
E2E_FSMOUNTS=()

pass() { echo "PASS $1"; E2E_PASS=$((E2E_PASS + 1)); }
fail() { echo "FAIL $1: ${2:-failed}"; E2E_FAIL=$((E2E_FAIL + 1)); }

# scale BYTES -> BYTES * TWINFS_TEST_SCALE, at least 1 (integers only).
scale() {
	awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); if (v < 1) v = 1; printf "%d\n", v }'
}

# A free block of 12 consecutive loopback ports: mgrd + 4 iods, then
# their metrics endpoints (deploy/local-cluster metrics_port), then a
# second mgrd and its metrics (TWINFS_MGRDS=2).  test/run-all -j runs
# scripts side by side: a block handed out in the last 15 minutes (listed,
# under a lock, in /tmp/twinfs-e2e-ports) is never handed out again, so
# two scripts cannot both find one free before either binds it, nor take
# the ports of a cluster whose daemons are all down for a moment.
pick_ports() {
	"$PY" - <<'EOF'
import fcntl, random, socket, time
now = int(time.time())
with open("/tmp/twinfs-e2e-ports", "a+") as reg:
    fcntl.flock(reg, fcntl.LOCK_EX)
    reg.seek(0)
    recent = {}
    for line in reg:
        try:
            base, when = (int(x) for x in line.split())
        except ValueError:
            continue
        if now - when < 900:
            recent[base] = when
    for _ in range(200):
        base = random.randrange(20000, 30000, 20)
        if base in recent:
            continue
        socks = []
        try:
            for p in range(base, base + 12):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        recent[base] = now
        reg.seek(0)
        reg.truncate()
        reg.writelines(f"{b} {w}\n" for b, w in recent.items())
        print(base)
        break
    else:
        raise SystemExit("no free port block")
EOF
}

lc() { (cd / && "$LC" "$@"); }
# twinfsctl from the caller's directory (getstripe/setstripe take relative paths)
ctl() { "$LC" ctl "$@"; }

e2e_logs_tail() {
	local f
	for f in "$TWINFS_RUN_DIR"/logs/*.log; do
		[[ -e $f ]] || continue
		echo "--- tail of $f"
		tail -n 15 "$f"
	done
}

e2e_cleanup() {
	local rc=$? f
	trap - EXIT INT TERM
	if ((E2E_UP)) && [[ ${TWINFS_E2E_KEEP:-0} != 1 ]]; then
		cd / || true
		lc down >/dev/null 2>&1 || { echo "# local-cluster down failed"; }
	fi
	if [[ ${TWINFS_E2E_KEEP:-0} != 1 ]]; then
		for f in "${E2E_FSMOUNTS[@]}"; do
			umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
		done
	fi
	# Sanitizer reports in any daemon or client log fail the test.
	for f in "$TWINFS_RUN_DIR"/logs/*.log; do
		[[ -e $f ]] || continue
		if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$f"; then
			fail "$E2E_NAME-sanitizer" "report in $(basename "$f")"
			grep -m 5 -E 'ERROR: |runtime error:' "$f" | sed 's/^/#   /'
		fi
	done
	# Loop stalls (docs/OPERATIONS.md "Loop stalls") are reported, not
	# failed: how often the host held a daemon off its CPU, for the day a
	# timing check fails.
	local stalls
	stalls=$(grep -ho 'event loop held for [0-9]* ms' "$TWINFS_RUN_DIR"/logs/*.log 2>/dev/null |
		awk '{ n++; if ($5 > m) m = $5 } END { if (n) print n " (longest " m " ms)" }')
	[[ -n $stalls ]] && echo "# loop stalls logged by the daemons: $stalls"
	if { ((E2E_FAIL)) || [[ ${TWINFS_E2E_KEEP_LOGS:-0} == 1 ]]; } &&
		[[ -d $TWINFS_RUN_DIR/logs ]]; then
		local dest=${TWINFS_E2E_ARTIFACTS:-/var/tmp/twinfs-e2e-logs}/$E2E_NAME
		mkdir -p "$dest" && cp -r "$TWINFS_RUN_DIR"/logs/. "$dest"/ 2>/dev/null &&
			echo "# logs of $E2E_NAME kept in $dest"
		((E2E_FAIL)) && e2e_logs_tail | sed 's/^/# /'
	fi
	if [[ ${TWINFS_E2E_KEEP:-0} != 1 ]]; then
		# Never remove anything under a mount that is still there.
		if ! awk -v p="$TWINFS_MOUNT" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; then
			rm -rf "$TWINFS_RUN_DIR"
		fi
	fi
	for f in "${E2E_TMPDIRS[@]}"; do rm -rf "$f"; done
	echo "# $E2E_NAME: $E2E_PASS passed, $E2E_FAIL failed"
	if ((E2E_FAIL)); then exit 1; fi
	exit "$rc"
}

# e2e_begin NAME: bring up a private cluster and cd into its mount.  One
# mgrd, whatever local-cluster's default: a test that wants the pair sets
# E2E_MGRDS=2 first.
e2e_begin() {
	E2E_NAME=$1
	if [[ $(id -u) != 0 ]]; then
		echo "FAIL $E2E_NAME: the e2e tests need root (FUSE mounts, setpriv)"
		exit 1
	fi
	# Never reuse a cluster from the caller's environment: private ports
	# and a private run directory (removed at the end).
	export TWINFS_PORT
	TWINFS_PORT=$(pick_ports) || { echo "FAIL $E2E_NAME: no free ports"; exit 1; }
	export TWINFS_RUN_DIR=${TWINFS_E2E_TMP:-/var/tmp}/twinfs-e2e-$E2E_NAME-$$
	export TWINFS_MOUNT=$TWINFS_RUN_DIR/mnt
	export TWINFS_CLUSTER=e2e-$E2E_NAME
	export TWINFS_MGRDS=${E2E_MGRDS:-1}
	# A small journal keeps start-up fast (it is written with zeros).
	export TWINFS_JOURNAL_SIZE=${TWINFS_JOURNAL_SIZE:-64M}
	export TWINFS_NO_APT=${TWINFS_NO_APT:-1}
	M=$TWINFS_MOUNT
	rm -rf "$TWINFS_RUN_DIR"
	trap e2e_cleanup EXIT
	trap 'exit 130' INT TERM
	local out
	E2E_UP=1
	if declare -F e2e_before_up >/dev/null && ! e2e_before_up; then
		fail "$E2E_NAME-cluster-up" "e2e_before_up failed"
		exit 1
	fi
	if ! out=$(lc up 2>&1); then
		echo "$out" | sed 's/^/# /'
		fail "$E2E_NAME-cluster-up" "deploy/local-cluster up failed"
		exit 1
	fi
	cd "$M" || { fail "$E2E_NAME-cluster-up" "cannot cd to $M"; exit 1; }
}

# e2e_tmpdir VAR: set VAR to a new local scratch directory, removed at exit.
e2e_tmpdir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/twinfs-$E2E_NAME.XXXXXX") || exit 1
	E2E_TMPDIRS+=("$d")
	printf -v "$1" '%s' "$d"
}

# e2e_small_fs DIR SIZE: mount a file system of SIZE (ext4 in an image on a
# loop device; tmpfs where there is none) on DIR, created if missing, and
# unmount it at exit once the cluster is down.  For a test's e2e_before_up
# (which e2e_begin calls before 'up'): an iod's data directory that fills.
e2e_small_fs() {
	local dir=$1 size=$2 img
	mkdir -p "$dir" || return 1
	# Beside the run directory, allocated: an image on a small tmpfs, or
	# sparse on a full disk, would fail with EIO before ext4 said ENOSPC.
	img=$TWINFS_RUN_DIR.$(basename "$dir").img
	E2E_TMPDIRS+=("$img")
	if fallocate -l "$size" "$img" && mkfs.ext4 -q -F "$img" &&
		mount -o loop "$img" "$dir" 2>/dev/null; then
		echo "# $dir: ext4 of $size on a loop device"
	elif mount -t tmpfs -o "size=$size" tmpfs "$dir"; then
		echo "# $dir: tmpfs of $size (no loop device)"
	else
		return 1
	fi
	E2E_FSMOUNTS+=("$dir")
}

e2e_end() {
	exit 0 # the EXIT trap prints the summary and sets the status
}

# ----------------------------------------------------------------- checks

# check NAME CMD...: pass if CMD succeeds.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "'$*' failed: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
	fi
}

# run_checks CMD...: run CMD, which prints PASS/FAIL lines itself; count them.
run_checks() {
	local line
	while IFS= read -r line; do
		echo "$line"
		case $line in
		"PASS "*) E2E_PASS=$((E2E_PASS + 1)) ;;
		"FAIL "*) E2E_FAIL=$((E2E_FAIL + 1)) ;;
		esac
	done < <("$@" 2>&1)
}

# assert_eq NAME EXPECTED ACTUAL
assert_eq() {
	if [[ "$2" == "$3" ]]; then
		pass "$1"
	else
		fail "$1" "expected '$2', got '$3'"
	fi
}

# assert_errno NAME ERRNO PYTHON-CODE [AS-USER]: run CODE (with os, errno
# imported); it must raise OSError with exactly ERRNO (e.g. ENOENT).  AS-USER
# "nobody" runs it with setpriv as uid/gid 65534 without groups.
assert_errno() {
	local name=$1 want=$2 code=$3 user=${4:-} got
	local prog="import os, errno, sys
try:
$(echo "$code" | sed 's/^/    /')
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
    sys.exit(0)
print('no-error')"
	if [[ $user == nobody ]]; then
		got=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" -c "$prog" 2>&1)
	else
		got=$("$PY" -c "$prog" 2>&1)
	fi
	if [[ $got == "$want" ]]; then
		pass "$name"
	else
		fail "$name" "expected $want, got $(echo "$got" | tail -n 1)"
	fi
}

sha() { sha256sum <"$1" | cut -d' ' -f1; }

# assert_same_file NAME A B: same bytes (sha256).
assert_same_file() {
	local a b
	a=$(sha "$2" 2>&1) || { fail "$1" "cannot read $2"; return; }
	b=$(sha "$3" 2>&1) || { fail "$1" "cannot read $3"; return; }
	assert_eq "$1" "$a" "$b"
}

# e2e_wait_healthy [SECONDS]: wait (default 60 s) until twinfsctl status
# reports every group healthy, i.e. every rejoining iod finished its
# resync; returns 1 on timeout.
e2e_wait_healthy() {
	local limit=${1:-60} i
	for ((i = 0; i < limit * 5; i++)); do
		ctl -t 1000 status >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}

# e2e_verify [NAME]: twinfsctl verify must report identical twins.
e2e_verify() {
	local name=${1:-$E2E_NAME-verify} out
	local rc
	out=$(ctl -t 30000 verify 2>&1)
	rc=$?
	if ((rc == 0)); then
		pass "$name"
	else
		fail "$name" "exit $rc: $(echo "$out" | grep -E '^DIFFER|twinfsctl:|verify:' | head -n 5 | tr '\n' ' ')"
		echo "$out" | head -n 40 | sed 's/^/#   /'
	fi
}

# client_pid PATH: the pid of the twinfs process that serves mount PATH
# of this cluster (nothing when there is none).
client_pid() {
	local p
	for p in "$TWINFS_RUN_DIR"/pids/*.path; do
		[[ -e $p && $(<"$p") == "$1" ]] && cat "${p%.path}.pid"
	done
}

# Drop the page cache so the next read comes from TwinFS, not the kernel.
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

now_ms() { date +%s%3N; }

# iod_state N: the STATE column of twinfsctl status for iod N
# ("up", "down,needs-resync", "resyncing", ...).
iod_state() {
	ctl -t 2000 status 2>/dev/null | awk -v n="$1" '$1 == n { print $5; exit }'
}

# wait_state N REGEX TIMEOUT_MS: wait until iod N's state matches REGEX;
# prints the milliseconds it took, returns 1 on timeout.
wait_state() {
	local n=$1 re=$2 limit=$3 t0 st
	t0=$(now_ms)
	while :; do
		st=$(iod_state "$n")
		if [[ $st =~ $re ]]; then
			echo $(($(now_ms) - t0))
			return 0
		fi
		if (($(now_ms) - t0 > limit)); then
			echo "timeout (state '$st')"
			return 1
		fi
		sleep 0.05
	done
}

# state_change_ms N REGEX T0: the milliseconds from T0 (a now_ms) to the
# first line of mgrd's log at or after T0 where iod N's state changed to
# one matching REGEX ("mgrd: iod N (ADDR, group G) OLD -> NEW ..."); empty
# if there is none.  Status polls cannot time a change: each pings every
# iod, and a hung one holds it for request_timeout.
state_change_ms() {
	local n=$1 re=$2 t0=$3 line ms
	while IFS= read -r line; do
		ms=$(date -d "${line:0:23}" +%s%3N 2>/dev/null) || continue
		((ms >= t0)) && { echo $((ms - t0)); return 0; }
	done < <(grep -E "mgrd: iod $n \(.*\) [a-z]+ -> ($re)" "$TWINFS_RUN_DIR/logs/mgrd.log")
}

# wait_log LOG N PATTERN MS: 0 once LOG says PATTERN after its first N
# lines (waiting up to MS), 1 if not.
wait_log() {
	local t0
	t0=$(now_ms)
	until tail -n +"$(($2 + 1))" "$1" | grep -q "$3"; do
		(($(now_ms) - t0 > $4)) && return 1
		sleep 0.05
	done
}

# iod_restart N: kill -9 iod N, start it again and wait (up to 30 s) for
# its new registration, which follows its replay.  mgrd may still call
# it up from before the kill, so a wait_state '^up' right after the start
# could return before the new iod served anything; returns 1 on timeout.
iod_restart() {
	local log=$TWINFS_RUN_DIR/logs/iod$1.log lines
	lines=$(wc -l <"$log")
	lc kill-iod "$1" >/dev/null && lc start-iod "$1" >/dev/null &&
		wait_log "$log" "$lines" "iod $1 registered with mgrd" 30000
}

# e2e_remount: unmount and mount again, so reads cannot come from any cache.
e2e_remount() {
	cd / && lc umount >/dev/null && lc mount >/dev/null && cd "$M"
}

# writers_err_check NAME FILE: two writers of FILE, whose group is down,
# write and close (writers_err.py): each one's close must fail with EIO.
writers_err_check() {
	local got
	got=$(timeout 60 "$PY" "$E2E_DIR/writers_err.py" "$2")
	echo "# two writers to a failed group: $got"
	case $got in
	a=close:EIO\ b=close:EIO) pass "$1" ;;
	*) fail "$1" "got '$got' (want EIO from both writers' closes)" ;;
	esac
}

# The fsync drill (t_journal_crash.sh, t_writeback.sh), in two steps.
# acked_kill FILE BLOCKS MIN: write FILE a 64 KiB block and an fsync at a
# time (acked_blocks.py; the blocks acknowledged are logged in $T/acked, T
# the caller's e2e_tmpdir), kill -9 both twins of group 0 (iods 1 and 2)
# once MIN are, and check that the writer returns with an error instead of
# hanging (writer-returns: within the request timeout and the client's
# retry window) and had MIN acknowledged (acked-before-kill).
acked_kill() {
	local file=$1 blocks=$2 min=$3 writer killed_at acked
	"$PY" "$E2E_DIR/acked_blocks.py" write "$file" "$T/acked" "$blocks" \
		>"$T/writer.out" 2>&1 &
	writer=$!
	for _ in $(seq 1 300); do
		[[ -s $T/acked ]] && (($(wc -l <"$T/acked") >= min)) && break
		sleep 0.05
	done
	lc kill-iod 1 >/dev/null
	lc kill-iod 2 >/dev/null
	killed_at=$(wc -l <"$T/acked")
	for _ in $(seq 1 600); do kill -0 "$writer" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$writer" 2>/dev/null; then
		fail writer-returns "writer still blocked 60 s after both twins died"
		kill -9 "$writer"
	else
		pass writer-returns
	fi
	wait "$writer" 2>/dev/null
	acked=$(wc -l <"$T/acked")
	((acked >= killed_at && acked >= min)) && pass acked-before-kill ||
		fail acked-before-kill "only $acked blocks acknowledged: $(tr '\n' ' ' <"$T/writer.out")"
}

# acked_check FILE: start iods 1 and 2 again, wait (bounded) until mgrd
# answers, and check from a fresh mount that every acknowledged block of
# FILE reads back exactly (acked-blocks-intact).
acked_check() {
	lc start-iod 1 >/dev/null
	lc start-iod 2 >/dev/null
	for _ in $(seq 1 100); do
		ctl status >/dev/null 2>&1 && break
		sleep 0.2
	done
	e2e_remount
	if "$PY" "$E2E_DIR/acked_blocks.py" check "$1" "$T/acked" >"$T/check.out" 2>&1; then
		pass acked-blocks-intact
	else
		fail acked-blocks-intact "$(tr '\n' ' ' <"$T/check.out")"
	fi
}
