#!/usr/bin/env bash
# t_signals.sh - signals caught by a program never turn a change that was
# made into a failure: metadata calls under a storm of SIGALRMs (every one
# an INTERRUPT to the client while a request is with mgrd) must each give
# the result a local file system gives, and leave exactly what they made
# (sigstorm.py).  The other half, that a wait for a hung or unreachable
# mgrd can be interrupted, is in mgrd_outage_lib.sh.
# e2e: alone (checks a time bound)
. "$(dirname "$0")/lib.sh"
e2e_begin signals

secs=$(awk -v s="$SCALE" 'BEGIN { v = int(6 * s); if (v < 2) v = 2; print v }')
for d in one two; do
	out=$(timeout $((secs * 4 + 60)) "$PY" "$E2E_DIR/sigstorm.py" "$M/$d" "$secs" 2>&1)
	echo "# $d: $out"
	[[ $out == ok* ]] && pass "signals-storm-$d" || fail "signals-storm-$d" "$out"
done
# Every name the storm made was removed by it, and nothing else is there.
assert_eq signals-nothing-left "" "$(ls -A "$M/one" "$M/two" | grep -v -e '^$' -e ':$')"
e2e_verify
e2e_end
