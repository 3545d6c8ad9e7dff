#!/usr/bin/env bash
# chaos.sh [SECONDS] [SEED] - a soak: a random sequence of failures under a
# workload that knows what every file must hold.  Not part of run-all (it
# runs for minutes and its sequence is random); run it by hand after a
# change to the twin, resync or journal code.
#
# Brings up a private cluster (deploy/local-cluster; TWINFS_BUILD_DIR picks
# the build), then for SECONDS (default 600) runs model_io.py on the mount
# and two fio jobs with --verify, while a loop picks one fault at a time:
#   kill -9 an iod, restart it 2-10 s later;
#   SIGSTOP an iod for 2-12 s (past the request timeout), SIGCONT;
#   kill -9 mgrd, restart it 1-5 s later;  SIGSTOP mgrd for 2-8 s;
#   kill -9 an iod, restart it, and kill it again while it resyncs;
#   kill -9 one iod of each group at once, restart both;
#   kill -9 an iod, then mgrd while it is down, restart both (the new mgrd
#   learns the outage from its log);
# and after each, waits (at most 180 s) until every iod is up again.  Only
# one twin of a group is ever failed at once, so no operation may fail.
# TWINFS_JOURNAL_MODE (journal, ordered, writeback) picks the iods' mode.
# At the end: every file against the model, again after a remount, fio's
# verify, `twinfsctl verify` (both twins of every subfile identical).
# Prints what it did with timestamps, then "N passed, N failed".
set -u
SECONDS_TOTAL=${1:-600}
SEED=${2:-$RANDOM}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export TWINFS_RUN_DIR=${TWINFS_RUN_DIR:-/var/tmp/twinfs-chaos-$$}
export TWINFS_MOUNT=${TWINFS_MOUNT:-$TWINFS_RUN_DIR/mnt}
export TWINFS_PORT=${TWINFS_PORT:-34600}
export TWINFS_NO_APT=${TWINFS_NO_APT:-1}
LC=$REPO/deploy/local-cluster
M=$TWINFS_MOUNT
PASS=0 FAIL=0
pass() { echo "PASS $1"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $1: ${2:-failed}"; FAIL=$((FAIL + 1)); }
say() { echo "# $(date +%H:%M:%S) $*"; }
lc() { (cd / && "$LC" "$@"); }
ctl() { "$LC" ctl "$@"; }

cleanup() {
	[[ -n ${WPID:-} ]] && kill "$WPID" 2>/dev/null
	[[ -n ${FPID:-} ]] && kill "$FPID" 2>/dev/null
	for p in "$TWINFS_RUN_DIR"/pids/*.pid; do
		[[ -e $p ]] && kill -CONT "$(cat "$p")" 2>/dev/null
	done
	lc down >/dev/null 2>&1
}
trap cleanup EXIT

# all_up: every iod up and mgrd answering, within 180 s.
all_up() {
	local t0=$SECONDS out
	while ((SECONDS - t0 < 180)); do
		out=$(ctl -t 2000 status 2>/dev/null) &&
			(($(echo "$out" | awk '$1 ~ /^[1-4]$/ && $5 == "up"' |
				wc -l) == 4)) && return 0
		sleep 0.5
	done
	say "not all up after 180 s:"
	ctl -t 2000 status 2>&1 | sed 's/^/#   /'
	return 1
}

pid_of() { cat "$TWINFS_RUN_DIR/pids/$1.pid"; }

say "seed $SEED, $SECONDS_TOTAL s, run dir $TWINFS_RUN_DIR"
lc up >"$TWINFS_RUN_DIR.up.log" 2>&1 || { cat "$TWINFS_RUN_DIR.up.log"; exit 1; }
RANDOM=$SEED

python3 "$REPO/test/soak/model_io.py" "$M/model" "$SECONDS_TOTAL" "$SEED" \
	"$TWINFS_RUN_DIR/model.json" >"$TWINFS_RUN_DIR/model.out" 2>&1 &
WPID=$!
mkdir -p "$M/fio"
fio --name=chaos --directory="$M/fio" --numjobs=2 --size=96m --bs=64k \
	--rw=randrw --verify=crc32c --verify_fatal=1 --verify_state_save=0 --fsync=8 \
	--time_based --runtime="$SECONDS_TOTAL" --do_verify=1 \
	>"$TWINFS_RUN_DIR/fio.out" 2>&1 &
FPID=$!

faults=0
t_end=$((SECONDS + SECONDS_TOTAL - 30))
while ((SECONDS < t_end)); do
	sleep $((3 + RANDOM % 8))
	n=$((1 + RANDOM % 4))
	case $((RANDOM % 8)) in
	0 | 1)
		say "kill -9 iod $n"
		lc kill-iod "$n" >/dev/null
		sleep $((2 + RANDOM % 9))
		lc start-iod "$n" >/dev/null ;;
	2)
		say "SIGSTOP iod $n"
		kill -STOP "$(pid_of iod$n)"
		sleep $((2 + RANDOM % 11))
		kill -CONT "$(pid_of iod$n)" ;;
	3)
		say "kill -9 mgrd"
		lc kill-mgrd >/dev/null
		sleep $((1 + RANDOM % 5))
		lc start-mgrd >/dev/null ;;
	4)
		say "SIGSTOP mgrd"
		kill -STOP "$(pid_of mgrd)"
		sleep $((2 + RANDOM % 7))
		kill -CONT "$(pid_of mgrd)" ;;
	5)
		say "kill -9 iod $n, restart, kill it again while it resyncs"
		lc kill-iod "$n" >/dev/null
		sleep $((2 + RANDOM % 4))
		lc start-iod "$n" >/dev/null
		sleep 0.$((RANDOM % 10))
		lc kill-iod "$n" >/dev/null
		sleep $((1 + RANDOM % 4))
		lc start-iod "$n" >/dev/null ;;
	6)
		a=$((1 + RANDOM % 2)) b=$((3 + RANDOM % 2))
		say "kill -9 iods $a and $b (one of each group)"
		lc kill-iod "$a" >/dev/null
		lc kill-iod "$b" >/dev/null
		sleep $((2 + RANDOM % 9))
		lc start-iod "$a" >/dev/null
		lc start-iod "$b" >/dev/null ;;
	7)
		say "kill -9 iod $n, then mgrd while it is down"
		lc kill-iod "$n" >/dev/null
		sleep $((1 + RANDOM % 8))
		lc kill-mgrd >/dev/null
		sleep $((1 + RANDOM % 3))
		lc start-mgrd >/dev/null
		sleep $((1 + RANDOM % 5))
		lc start-iod "$n" >/dev/null ;;
	esac
	faults=$((faults + 1))
	if ! all_up; then
		fail chaos-recovers "not every iod up 180 s after fault $faults"
		break
	fi
	kill -0 "$WPID" 2>/dev/null || break
done
say "$faults faults; waiting for the workloads"
wait "$WPID"; wrc=$?
WPID=
wait "$FPID"; frc=$?
FPID=
cat "$TWINFS_RUN_DIR/model.out" | grep -v '^$' | tail -n 30 | sed 's/^/#   /'
errs=$(grep -c '^ERR' "$TWINFS_RUN_DIR/model.out")
((wrc == 0)) && pass chaos-model-content ||
	fail chaos-model-content "$(grep -E '^(BAD|STEPS)' "$TWINFS_RUN_DIR/model.out" | head -5 | tr '\n' ' ')"
((errs == 0)) && pass chaos-no-failed-ops ||
	fail chaos-no-failed-ops "$errs operations failed"
((frc == 0)) && pass chaos-fio-verify ||
	fail chaos-fio-verify "$(grep -iE 'verify|error|bad' "$TWINFS_RUN_DIR/fio.out" | head -5 | tr '\n' ' ')"
all_up && pass chaos-all-up || fail chaos-all-up
ctl sync >/dev/null 2>&1
lc umount >/dev/null && lc mount >/dev/null
python3 "$REPO/test/soak/model_io.py" --check "$M/model" \
	"$TWINFS_RUN_DIR/model.json" >"$TWINFS_RUN_DIR/check.out" 2>&1 &&
	pass chaos-after-remount ||
	fail chaos-after-remount "$(head -5 "$TWINFS_RUN_DIR/check.out" | tr '\n' ' ')"
out=$(ctl verify 2>&1) && pass chaos-twins-identical ||
	fail chaos-twins-identical "$(echo "$out" | grep -E 'DIFFER|verify' | head -5 | tr '\n' ' ')"
say "$(echo "$out" | tail -1)"
echo "$PASS passed, $FAIL failed"
((FAIL == 0))
