#!/usr/bin/env bash
# t_multihost.sh - a cluster of 8 hosts (deploy/netns-cluster: a network
# namespace each, on one bridge; 2 mgrds, 4 iods in two twin groups, 2
# FUSE clients), driven as real hosts would be:
#   1. cp, tar x of a real tree (part of /usr/include) and fio --verify
#      through both clients; each client reads what the other wrote;
#   2. mid-write (an fsync per 64 KiB block, one writer per client) a whole
#      iod host dies (kill -9 of every process in it) and another iod
#      host's cable is pulled (its switch port down: silence); both come
#      back and resync.  Every acknowledged block, the copied file and the
#      tree read back byte for byte, and the twins agree (twinfsctl verify);
#   3. the mgrd pair partitioned: the active mgrd's host and client 1 on a
#      switch of their own, away from the standby, the iods and client 2,
#      while both clients create the same names at the same time
#      (name_race.py): never both succeed, each name exists once with the
#      winner's content, the old active stops (lost lease), mgrd 2 serves;
#      healed, mgrd 1 rejoins as the standby;
# and at the end both clients list the same tree with the same bytes.  All
# traffic stays inside the namespaces this test makes (10.x exists only
# there); one cluster for every check.
# e2e: alone (network namespaces, eight hosts)
. "$(dirname "$0")/lib.sh"

E2E_NAME=multihost
NC=$REPO/deploy/netns-cluster
command -v nsenter >/dev/null && command -v ip >/dev/null && command -v fio >/dev/null || {
	echo "FAIL multihost: needs nsenter, ip and fio"
	exit 1
}
[[ $(id -u) == 0 ]] || { echo "FAIL multihost: needs root"; exit 1; }

# Short timers (failover_lib.sh's): failover within seconds; a client cut
# from both mgrds gives up after mgr_timeout.
export TWINFS_MONITOR_INTERVAL=500ms TWINFS_REQUEST_TIMEOUT=2s TWINFS_MGR_TIMEOUT=8s
export TWINFS_JOURNAL_SIZE=64M TWINFS_NO_APT=1
export TWINFS_RUN_DIR=${TWINFS_E2E_TMP:-/var/tmp}/twinfs-e2e-multihost-$$
export TWINFS_NETNS_PREFIX=twe$(($$ % 100000))
export TWINFS_MOUNT=$TWINFS_RUN_DIR/c1/mnt   # for e2e_cleanup's checks
C1=$TWINFS_RUN_DIR/c1/mnt
C2=$TWINFS_RUN_DIR/c2/mnt
M=$C1
ctl() { "$NC" ctl "$@"; }
nc() { "$NC" "$@"; }
rm -rf "$TWINFS_RUN_DIR"
trap 'rc=$?; cd /; nc down >/dev/null 2>&1; (exit $rc); e2e_cleanup' EXIT
trap 'exit 130' INT TERM
T0=$SECONDS
phase() { echo "# $1 at $((SECONDS - T0)) s"; }
if ! out=$(nc up 2>&1); then
	echo "$out" | tail -n 30 | sed 's/^/# /'
	fail multihost-cluster-up "deploy/netns-cluster up failed"
	exit 1
fi
pass multihost-up
e2e_tmpdir T
cd /

# iod_state N (lib.sh's wait_state uses it), through ctl (client 1's
# host): from the IOD table, after the pair's MGRD table.
iod_state() {
	ctl -t 2000 status 2>/dev/null |
		awk -v n="$1" '/^IOD/ { on = 1; next } on && $1 == n { print $5; exit }'
}
phase "work"
# ------------------------------------------------ 1. ordinary work
head -c "$(scale $((64 << 20)))" /dev/urandom >"$T/src"
(cd /usr/include && find . -type f | sort | head -n "$(scale 2400)") >"$T/list"
tar -C /usr/include -cf "$T/tree.tar" -T "$T/list"
mkdir -p "$T/tree" && tar -C "$T/tree" -xf "$T/tree.tar"
check cp-through-c1 cp "$T/src" "$C1/src"
check tar-x-through-c2 bash -c "mkdir '$C2/tree' && tar -C '$C2/tree' -xf '$T/tree.tar'"

# fio --verify through both clients at once, a directory each.
FIO_SIZE=$(scale $((32 << 20)))
((FIO_SIZE < (4 << 20))) && FIO_SIZE=$((4 << 20))
mkdir -p "$C1/fio1" "$C2/fio2"
fio_pids=()
for c in 1 2; do
	d=$C1/fio1
	((c == 2)) && d=$C2/fio2
	fio --output="$T/fio$c.out" --name=mh$c --directory="$d" --numjobs=2 \
		--size="$FIO_SIZE" --bs=64k --rw=randwrite --ioengine=psync \
		--verify=crc32c --verify_fatal=1 --end_fsync=1 --randrepeat=1 \
		>"$T/fio$c.err" 2>&1 &
	fio_pids[c]=$!
done
for c in 1 2; do
	if wait "${fio_pids[c]}" && ! grep -qiE 'verify: bad|bad magic|verify failed' "$T/fio$c.out"; then
		pass "fio-verify-c$c"
	else
		fail "fio-verify-c$c" "$(grep -ihE 'bad|error|fio:' "$T/fio$c.out" "$T/fio$c.err" | head -n 3 | tr '\n' ' ')"
	fi
done
drop_caches
assert_same_file c2-reads-c1-copy "$T/src" "$C2/src"
check c1-reads-c2-tree diff -r "$T/tree" "$C1/tree"

# --------------------------------- 2. a host dies, a cable is pulled
phase "faults"
BLOCKS=$(scale 2048)
((BLOCKS < 256)) && BLOCKS=256
"$PY" "$E2E_DIR/acked_blocks.py" write "$C1/acked1" "$T/acked1" "$BLOCKS" >"$T/w1.out" 2>&1 &
w1=$!
"$PY" "$E2E_DIR/acked_blocks.py" write "$C2/acked2" "$T/acked2" "$BLOCKS" >"$T/w2.out" 2>&1 &
w2=$!
for _ in $(seq 1 600); do
	[[ -s $T/acked1 && -s $T/acked2 ]] &&
		(($(wc -l <"$T/acked1") >= BLOCKS / 4 && $(wc -l <"$T/acked2") >= BLOCKS / 4)) && break
	sleep 0.05
done
echo "# blocks acknowledged before the faults: $(wc -l <"$T/acked1") and $(wc -l <"$T/acked2") of $BLOCKS"
nc kill-host i1 >/dev/null   # iod 1's host: group 0 has iod 2 left
nc cable-out i4 >/dev/null   # iod 4's host: group 1 has iod 3 left
for w in 1 2; do
	p=w$w
	if wait "${!p}" && (($(wc -l <"$T/acked$w") == BLOCKS)) && ! grep -q stopped "$T/w$w.out"; then
		pass "writer-c$w-goes-on"
	else
		fail "writer-c$w-goes-on" "$(wc -l <"$T/acked$w") of $BLOCKS blocks: $(tr '\n' ' ' <"$T/w$w.out")"
	fi
done
out=$(wait_state 1 '^down' 10000) && pass host-down-marked || fail host-down-marked "iod 1: $out"
out=$(wait_state 4 '^down' 10000) && pass cable-out-marked || fail cable-out-marked "iod 4: $out"
phase "hosts back"
nc start-host i1 >/dev/null
nc cable-in i4 >/dev/null
e2e_wait_healthy 90 && pass hosts-back-resynced || fail hosts-back-resynced "$(ctl -t 2000 status 2>&1 | tail -n 6 | tr '\n' ' ')"
phase "resynced"
drop_caches
for w in 1 2; do
	o=$C2 && ((w == 2)) && o=$C1   # read through the other client
	if "$PY" "$E2E_DIR/acked_blocks.py" check "$o/acked$w" "$T/acked$w" >"$T/check$w.out" 2>&1; then
		pass "acked-blocks-c$w-intact"
	else
		fail "acked-blocks-c$w-intact" "$(tr '\n' ' ' <"$T/check$w.out")"
	fi
done
assert_same_file copy-intact-after-faults "$T/src" "$C1/src"
check tree-intact-after-faults diff -r "$T/tree" "$C2/tree"
e2e_verify twins-agree-after-faults

# ------------------------------------- 3. the mgrd pair partitioned
phase "mgrd partition"
mgrd_role() { # HOST ID: mgrd ID's role as twinfsctl on HOST sees it
	nc exec "$1" "$TWINFS_BUILD_DIR/cli/twinfsctl" -c "$TWINFS_RUN_DIR/twinfs.conf" -t 2000 status 2>/dev/null |
		awk -v id="$2" '/^MGRD/ { on = 1; next } /^IOD/ { on = 0 } on && $1 == id { print $3 }'
}
assert_eq mgrd1-active-before "active" "$(mgrd_role c1 1)"
N=16
mkdir "$C1/race" && for ((i = 0; i < N; i++)); do mkdir "$C1/race/d$(printf %02d $i)"; done
rm -f "$T/go"
"$PY" "$E2E_DIR/name_race.py" race "$C1/race" 0 $N "$T/go" >"$T/race1" 2>&1 &
r1=$!
"$PY" "$E2E_DIR/name_race.py" race "$C2/race" 1 $N "$T/go" >"$T/race2" 2>&1 &
r2=$!
m1_log_lines=$(wc -l <"$TWINFS_RUN_DIR/logs/mgrd.log")
nc partition m1 c1 >/dev/null
touch "$T/go"   # every thread waits for it: all create at once
# A client cut from the active gives up after mgr_timeout: both return.
wait "$r1" "$r2"
echo "# client 1 (with the old active): $(awk '{ $1 = ""; print }' "$T/race1" | sort | uniq -c | tr '\n' ';')"
echo "# client 2 (with the standby):    $(awk '{ $1 = ""; print }' "$T/race2" | sort | uniq -c | tr '\n' ';')"
if wait_log "$TWINFS_RUN_DIR/logs/mgrd.log" "$m1_log_lines" 'lost its lease' 10000 &&
	[[ -z $(ip netns pids "$TWINFS_NETNS_PREFIX-m1" 2>/dev/null) ]]; then
	pass old-active-stops
else
	fail old-active-stops "mgrd 1 still runs or never said it lost its lease"
fi
assert_eq new-active-serves "active" "$(mgrd_role c2 2)"
# Client 2 finds the new active within mgr_timeout (lease_time, about 3 s,
# plus its move), even if it first reached mgrd 2 while still standby and
# was sent back to the silent mgrd 1.
grep -q ' ok$' "$T/race2" && pass majority-client-creates ||
	fail majority-client-creates "client 2 created nothing while partitioned"
phase "heal"
nc heal >/dev/null
run_checks "$PY" "$E2E_DIR/name_race.py" check "$C2/race" $N partitioned "$T/race1" "$T/race2"
# Client 2's mount works on through the new active.
check new-active-serves-c2 bash -c "echo after >'$C2/race/after' && [[ \$(cat '$C2/race/after') == after ]]"
nc start-host m1 >/dev/null   # comes back as the standby
e2e_wait_healthy 90 && pass pair-healed || fail pair-healed "$(ctl -t 2000 status 2>&1 | head -n 4 | tr '\n' ' ')"
assert_eq mgrd1-rejoins-standby "standby" "$(mgrd_role c1 1)"

# --------------------------------- both clients see the same tree
phase "final checks"
drop_caches
listing() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
listing "$C1" >"$T/l1" 2>&1
listing "$C2" >"$T/l2" 2>&1
if cmp -s "$T/l1" "$T/l2" && [[ -s $T/l1 ]]; then
	pass clients-see-same-tree
else
	fail clients-see-same-tree "$(diff "$T/l1" "$T/l2" | head -n 4 | tr '\n' ' ')"
fi
run_checks "$PY" "$E2E_DIR/name_race.py" check "$C1/race" $N healed "$T/race1" "$T/race2"
e2e_verify twins-agree-at-end
phase "done"
e2e_end
