#!/usr/bin/env bash
# t_manymounts.sh - 8 FUSE mounts of one cluster (8 twinfs processes, as 8
# client hosts) doing coherent work at once, a worker process per mount
# (manymounts.py):
#   - a shared directory: every mount creates its own names in it at once;
#     then every mount lists the same set, and each file reads back through
#     another mount;
#   - O_APPEND: every mount appends fixed-size records to one log; all
#     records present, each whole and once;
#   - fcntl locks: a counter incremented under a POSIX lock from every
#     mount ends at exactly the total;
#   - rename races: every mount renames the same few files among their
#     four names in two directories at once; afterwards each file exists
#     exactly once, intact, and every mount lists the same names;
# then twinfsctl verify.  One cluster for all of it.
. "$(dirname "$0")/lib.sh"
e2e_begin manymounts
e2e_tmpdir T
NM=8
MNTS=("$M")
for ((k = 1; k < NM; k++)); do
	MNTS[k]=$TWINFS_RUN_DIR/mnt$k
	lc mount "${MNTS[k]}" >/dev/null || { fail manymounts-mount "mount $k failed"; exit 1; }
done
pass "manymounts-$NM-mounts"
MM=$E2E_DIR/manymounts.py

# all_mounts NAME CMD ARGS...: run "manymounts.py CMD MOUNT K ARGS..." on
# every mount at once; NAME passes when all exit 0.
all_mounts() {
	local name=$1 cmd=$2 k rc=0 pids=()
	shift 2
	for ((k = 0; k < NM; k++)); do
		"$PY" "$MM" "$cmd" "${MNTS[k]}" "$k" "$@" >"$T/$name.$k" 2>&1 &
		pids[k]=$!
	done
	for ((k = 0; k < NM; k++)); do wait "${pids[k]}" || rc=1; done
	if ((rc == 0)); then
		pass "$name"
	else
		fail "$name" "$(cat "$T/$name".* | grep -v '^mount' | head -n 3 | tr '\n' ' ')"
	fi
}

# check_py NAME ARGS...: manymounts.py ARGS... must exit 0.
check_py() {
	local name=$1 out
	shift
	if out=$("$PY" "$MM" "$@" 2>&1); then
		echo "# $name: $out"
		pass "$name"
	else
		fail "$name" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
	fi
}

# Shared directory.
N=$(scale 400)
((N < 16)) && N=16
mkdir "$M/shared"
all_mounts shared-dir-creates create "$N"
check_py shared-dir-same-everywhere listed "$N" "$NM" "${MNTS[@]}"

# O_APPEND log.
R=$(scale 800)
((R < 32)) && R=32
all_mounts append-writers append "$R"
check_py append-records-whole appended "$NM" "$R" "${MNTS[3]}"

# A counter under fcntl locks.
L=$(scale 200)
((L < 16)) && L=16
printf '%20d' 0 >"$M/counter"
all_mounts lock-counter-workers counter "$L"
assert_eq lock-counter-exact "$((NM * L))" "$(tr -d ' ' <"${MNTS[5]}/counter")"

# Rename races: F files, each starting as r/a/fJ.
F=4
ITERS=$(scale 400)
((ITERS < 32)) && ITERS=32
mkdir -p "$M/r/a" "$M/r/b"
for ((j = 0; j < F; j++)); do
	printf "file $j\n%.0s" $(seq 1 64) >"$M/r/a/f$(printf %02d "$j")"
done
all_mounts rename-race-workers rename "$ITERS" "$F"
echo "# rename moves: $(cat "$T"/rename-race-workers.* | awk '{ s += $3 } END { print s }') of $((NM * ITERS)) tries"
sleep 1.2   # entry timeout: names cached before the last renames expire
check_py rename-race-each-once renamed "$F" "${MNTS[@]}"

e2e_verify
e2e_end
