#!/usr/bin/env bash
# t_restart.sh - the whole cluster stopped cleanly (local-cluster down:
# SIGTERM, mgrd writes a snapshot) and started again, twice; and each
# daemon killed with SIGKILL and restarted while idle: every file, directory,
# symlink, attribute and byte is still there.
. "$(dirname "$0")/lib.sh"
e2e_begin restart
e2e_tmpdir T

mkdir -p "$T/tree/a/b" && head -c "$(scale $((12 << 20)))" /dev/urandom >"$T/tree/a/big"
echo small >"$T/tree/a/b/small"
ln -s ../big "$T/tree/a/b/link"
chmod 0751 "$T/tree/a/b"
touch -d '2015-01-02 03:04:05' "$T/tree/a/b/small"
truncate -s 50M "$T/tree/sparse"
cp -a "$T/tree" "$M/tree"
setfattr -n user.k -v v "$M/tree/a/big"
check restart-before diff -r "$T/tree" "$M/tree"

for round in 1 2; do
	cd /
	if ! out=$(lc down 2>&1); then fail "restart-down-$round" "$out"; fi
	if out=$(lc up 2>&1); then
		pass "restart-up-$round"
	else
		fail "restart-up-$round" "$(echo "$out" | tail -n 5 | tr '\n' ' ')"
		exit 1
	fi
	check "restart-tree-$round" diff -r "$T/tree" "$M/tree"
	assert_eq "restart-attrs-$round" "751 $(stat -c %Y "$T/tree/a/b/small")" \
		"$(stat -c %a "$M/tree/a/b") $(stat -c %Y "$M/tree/a/b/small")"
	assert_eq "restart-xattr-$round" v "$(getfattr --absolute-names --only-values -n user.k "$M/tree/a/big" 2>&1)"
	echo "round $round" >"$M/round$round"
done
assert_eq restart-new-files "round 1" "$(cat "$M/round1")"

# kill -9 of each idle daemon, restarted: nothing acknowledged is lost
cd /
for d in 1 2 3 4; do
	lc kill-iod $d >/dev/null && lc start-iod $d >/dev/null || fail "restart-iod-$d" "kill/start failed"
done
lc kill-mgrd >/dev/null && lc start-mgrd >/dev/null || fail restart-mgrd-kill "kill/start failed"
for ((i = 0; i < 100; i++)); do ctl -t 1000 status >/dev/null 2>&1 && break; sleep 0.2; done
check restart-status-after-kills ctl status
check restart-tree-after-kill9 diff -r "$T/tree/a" "$M/tree/a"
e2e_verify
e2e_end
