#!/bin/bash
# run.sh - run the POSIX conformance suite on an oracle directory (a local
# ext4) and on a target directory (any mounted file system, e.g. a TwinFS
# mount), and report every case whose outcome differs.
#
# usage: test/posix/run.sh [-k SUBSTRING] [-a ALLOWED] ORACLE_DIR TARGET_DIR
#
# Prints "PASS id" or "FAIL id: ext4=<oracle result> target=<target result>"
# per case, then "posix: N cases, M differ".  Exit status: 0 when no case
# differs, 1 when some do, 2 on a usage or build error.  Must run as root.
#
# -k SUBSTRING  run only the cases whose id contains it
# -a ALLOWED    a file of "id<TAB>result" lines: a target result listed
#               there for its id is an accepted alternative to the oracle's
#               (e.g. a clean EOPNOTSUPP for a fallocate mode the target does
#               not implement).  Such cases print "ALLOW id: ..." and are
#               counted apart: "posix: N cases, M differ, K allowed".
#
# Environment:
#   POSIXTEST          the posixtest binary to use (default: build it from
#                      the sources next to this script into a temp dir)
#   POSIX_KEEP_OUTPUT  directory where oracle.txt and target.txt are kept
#   POSIX_TIMEOUT      seconds one side may take in all (default 900): a hung
#                      mount ends the run instead of blocking it forever

set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FILTER=()
ALLOWED=/dev/null
while getopts "k:a:" opt; do
	case $opt in
	k) FILTER=(-k "$OPTARG") ;;
	a) ALLOWED=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [[ $# -ne 2 ]]; then
	echo "usage: $0 [-k SUBSTRING] [-a ALLOWED] ORACLE_DIR TARGET_DIR" >&2
	exit 2
fi
if [[ ! -r $ALLOWED ]]; then
	echo "$0: $ALLOWED: cannot read" >&2
	exit 2
fi
ORACLE=$1
TARGET=$2
for d in "$ORACLE" "$TARGET"; do
	if [[ ! -d $d ]]; then
		echo "$0: $d: not a directory" >&2
		exit 2
	fi
done
if [[ $(id -u) -ne 0 ]]; then
	echo "$0: must run as root (cases chown, mknod devices and drop to uid 65534)" >&2
	exit 2
fi

WORK=$(mktemp -d /tmp/posix-run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

BIN=${POSIXTEST:-}
if [[ -z $BIN ]]; then
	BIN=$WORK/posixtest
	if ! gcc -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
		-o "$BIN" "$HERE"/posixtest.c "$HERE"/pt_util.c "$HERE"/cases_*.c; then
		echo "$0: cannot build posixtest" >&2
		exit 2
	fi
fi

if [[ ! -x $BIN ]]; then
	echo "$0: $BIN: not an executable" >&2
	exit 2
fi

# The same binary runs both sides, one after the other, so the cases never
# compete for the CPU with each other's lock waits.
LIMIT=${POSIX_TIMEOUT:-900}
timeout -s KILL "$LIMIT" "$BIN" "${FILTER[@]}" "$ORACLE" >"$WORK/oracle.txt" 2>"$WORK/oracle.err"
orc=$?
timeout -s KILL "$LIMIT" "$BIN" "${FILTER[@]}" "$TARGET" >"$WORK/target.txt" 2>"$WORK/target.err"
trc=$?
[[ $orc -ne 0 ]] && echo "warning: oracle run exited $orc: $(tail -1 "$WORK/oracle.err")" >&2
[[ $trc -ne 0 ]] && echo "warning: target run exited $trc: $(tail -1 "$WORK/target.err")" >&2

for side in oracle target; do
	if [[ ! -s $WORK/$side.txt ]]; then
		echo "$0: the $side run printed no case: $(tail -1 "$WORK/$side.err")" >&2
		exit 2
	fi
done

if [[ -n ${POSIX_KEEP_OUTPUT:-} ]]; then
	mkdir -p "$POSIX_KEEP_OUTPUT"
	cp "$WORK/oracle.txt" "$WORK/target.txt" "$POSIX_KEEP_OUTPUT/"
fi

# Cases are matched by id; one missing on either side (a run that died
# half-way) counts as a difference.
awk -F'\t' '
	FILENAME == ARGV[1] { if ($0 !~ /^#/ && NF >= 2) allowed[$1 "\t" $2] = 1; next }
	FILENAME == ARGV[2] { oracle[$1] = $2; order[++n] = $1; next }
	{ target[$1] = $2; if (!($1 in oracle)) { order[++n] = $1; oracle[$1] = "(missing)" } }
	END {
		differ = 0
		allow = 0
		for (i = 1; i <= n; i++) {
			id = order[i]
			t = (id in target) ? target[id] : "(missing)"
			if (oracle[id] == t) {
				print "PASS " id
			} else if ((id "\t" t) in allowed) {
				print "ALLOW " id ": ext4=" oracle[id] " target=" t
				allow++
			} else {
				print "FAIL " id ": ext4=" oracle[id] " target=" t
				differ++
			}
		}
		if (allow)
			printf "posix: %d cases, %d differ, %d allowed\n", n, differ, allow
		else
			printf "posix: %d cases, %d differ\n", n, differ
		exit differ ? 1 : 0
	}' "$ALLOWED" "$WORK/oracle.txt" "$WORK/target.txt"
