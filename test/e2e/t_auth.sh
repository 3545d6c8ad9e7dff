#!/usr/bin/env bash
# t_auth.sh - the cluster secret and client identities (proto/FORMAT.md
# "Authentication", "Client identities", "Tickets", "Exports"): with a
# secret in the config, iods register and twin-forward only after proving
# it, an admin without it (or with a wrong one) is refused with a clear
# message, a client mounts only with an identity's key (local-cluster's
# own) and reaches the iods with mgrd's ticket, and a daemon refuses to
# listen beyond loopback without a secret.  Every frame after AUTH is
# sealed, and one changed on the way fails the connection.  Capabilities
# (proto/FORMAT.md "Capabilities"), with a 3 s cap_lifetime: a mount reads
# and writes across several lifetimes without an error or an expired cap
# (renewed in the background), and a hostile client is refused every cap
# it has no right to (twire.py caps).  More identities, mounted on the
# same cluster: read-only, root squash, a subtree export, a network not
# allowed, and one revoked while mounted and re-admitted with a new key.
. "$(dirname "$0")/lib.sh"
export TWINFS_SECRET=e2e-$$-$RANDOM
export TWINFS_CAP_LIFETIME=3
# A revoked session's writes stop within a lease: keep the lease short.
export TWINFS_SESSION_TIMEOUT=${TWINFS_SESSION_TIMEOUT:-3s}
CTL=$TWINFS_BUILD_DIR/cli/twinfsctl
e2e_before_up() {
	local n
	mkdir -p "$TWINFS_RUN_DIR" || return 1
	for n in ro1 sq1 sub1 net1 rev1; do
		"$CTL" keygen "$n" -o "$TWINFS_RUN_DIR/$n.key" >/dev/null || return 1
	done
	export TWINFS_EXTRA_CONF=$TWINFS_RUN_DIR/extra.conf
	cat >"$TWINFS_EXTRA_CONF" <<EOF
[client ro1]
key_file = $TWINFS_RUN_DIR/ro1.key
access = ro
networks = 127.0.0.0/8, ::1

[client sq1]
key_file = $TWINFS_RUN_DIR/sq1.key
squash = root
anonuid = 4321
anongid = 4322

[client sub1]
key_file = $TWINFS_RUN_DIR/sub1.key
export = /scratch

[client net1]
key_file = $TWINFS_RUN_DIR/net1.key
networks = 10.0.0.0/8

[client rev1]
key_file = $TWINFS_RUN_DIR/rev1.key
EOF
}
e2e_begin auth
e2e_tmpdir T
CONF=$TWINFS_RUN_DIR/twinfs.conf

# Iods registered (they needed the secret) and data flows through twins.
check status-with-secret ctl status
head -c "$(scale $((8 << 20)))" /dev/urandom >"$T/f"
cp "$T/f" "$M/f"
e2e_remount
assert_same_file data-through-twins "$T/f" "$M/f"
e2e_verify

# Caps renewed under a live workload: over about four lifetimes one fd
# writes a file slowly while fio writes and verifies another; nothing
# fails, and no iod refuses an expired cap of the mount (a renewal that
# came too late would show as such a refusal, retried).
expired_lines() { cat "$TWINFS_RUN_DIR"/logs/iod*.log | grep -c "expired capability"; }
exp0=$(expired_lines)
head -c $((48 * 65536)) /dev/urandom >"$T/slow"
(
	for ((i = 0; i < 48; i++)); do
		dd if="$T/slow" bs=65536 skip=$i count=1 status=none || exit 1
		sleep 0.25
	done
) >"$M/slow" &
slow_pid=$!
if fio --name=caps --filename="$M/fio-caps" --rw=randwrite --bs=64k \
	--size=$(($(scale $((16 << 20))) < (4 << 20) ? (4 << 20) : $(scale $((16 << 20))))) \
	--rate=1m --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--output="$T/fio.out" >"$T/fio.err" 2>&1 &&
	! grep -qiE 'verify: bad|bad magic|verify failed' "$T/fio.out"; then
	pass fio-verify-across-cap-lifetimes
else
	fail fio-verify-across-cap-lifetimes "$(tail -n 3 "$T/fio.err" "$T/fio.out" | tr '\n' ' ')"
fi
wait "$slow_pid" && pass slow-writer-no-error || fail slow-writer-no-error "exit $?"
assert_same_file slow-writer-bytes "$T/slow" "$M/slow"
e2e_remount
assert_same_file slow-writer-bytes-after-remount "$T/slow" "$M/slow"
assert_eq no-expired-cap-refusals "$exp0" "$(expired_lines)"
# Truncates move trunc_gen past the caps the mount holds: its writes get a
# cap with the new one (-EKEYREJECTED or -ESTALE, refetched) unseen.
ok=1
for ((i = 0; i < 4; i++)); do
	head -c $((256 << 10)) /dev/urandom >"$T/tr"
	exec 7>"$M/tr" && cat "$T/tr" >&7 && truncate -s 4096 "$M/tr" &&
		dd if="$T/tr" of="$M/tr" bs=4096 seek=1 skip=1 conv=notrunc status=none &&
		exec 7>&- || ok=0
	cmp -s "$T/tr" "$M/tr" || ok=0
done
assert_eq writes-after-truncates 1 "$ok"
grep -q "capability from mgrd" "$TWINFS_RUN_DIR"/logs/mount*.log 2>/dev/null &&
	fail mount-got-every-cap "$(grep -m1 "capability from mgrd" "$TWINFS_RUN_DIR"/logs/mount*.log)" ||
	pass mount-got-every-cap

# A hostile client's caps (twire.py caps): refused without one, on another
# inode, a read cap to write, forged, another session's, expired; a huge
# trunc_gen wedges nothing.  Its writes leave 64 bytes of 0x5a at the start.
head -c 1048576 /dev/urandom >"$T/capfile"
cp "$T/capfile" "$M/capfile" && echo other >"$M/capother"
run_checks "$PY" "$E2E_DIR/twire.py" caps 127.0.0.1 "$TWINFS_PORT" "$TWINFS_CLUSTER" \
	"$(stat -c %i "$M/capfile")" "$(stat -c %i "$M/capother")" 3 \
	"$TWINFS_RUN_DIR/client.key"
{ head -c 64 /dev/zero | tr '\0' '\132'; tail -c +65 "$T/capfile"; } >"$T/capfile.want"
e2e_remount
assert_same_file cap-writes-landed-exactly "$T/capfile.want" "$M/capfile"
# (rate-limited: the first refusal of each kind within 5 s is logged)
grep -qE "127.0.0.1:[0-9]+ \(session [0-9]+\): (READ|WRITE) ino [0-9]+ refused \(Permission denied\): it carries a capability" \
	"$TWINFS_RUN_DIR"/logs/iod*.log && pass cap-refusal-logged ||
	fail cap-refusal-logged "no line naming peer, ino and reason in the iod logs"
# The file is not wedged for the mount either (f).
echo appended >>"$M/capfile" && e2e_remount &&
	assert_eq write-after-hostile-trunc-gen appended "$(tail -c 9 "$M/capfile")"

# twinfsctl with the wrong secret, and with none.
sed "s/^secret = .*/secret = wrong/" "$CONF" >"$T/wrong.conf"
sed "/^secret = /d" "$CONF" >"$T/none.conf"
chmod 600 "$T/wrong.conf"   # a file with a secret must be 0600
for v in wrong none; do
	out=$("$TWINFS_BUILD_DIR/cli/twinfsctl" -c "$T/$v.conf" -t 3000 status 2>&1)
	rc=$?
	if ((rc != 0)) && [[ $out == *"cluster secret"* ]]; then
		pass "admin-$v-secret-refused"
	else
		fail "admin-$v-secret-refused" "exit $rc: $(echo "$out" | head -n 2 | tr '\n' ' ')"
	fi
done
grep -q "without the cluster secret\|authentication failed" "$TWINFS_RUN_DIR"/logs/mgrd.log &&
	pass refusal-logged || fail refusal-logged "no log line in mgrd.log"

# Every frame after AUTH is sealed, integrity by default (proto/FORMAT.md
# "Channel protection"): one bit flipped by a man in the middle, in the
# HELLO either way, fails the connection; mgrd logs a changed request and
# twinfsctl says so of a changed reply.
grep -q "frames after AUTH: at least integrity" "$TWINFS_RUN_DIR"/logs/mgrd.log &&
	pass channel-default-integrity || fail channel-default-integrity "no line in mgrd.log"
mport=$(awk '/^\[mgrd\]/ { m = 1 } m && /^port = / { print $3; exit }' "$CONF")
for dir in c2s s2c; do
	python3 "$(dirname "$0")/tamper_proxy.py" "$mport" $dir 2 >"$T/pport" 2>"$T/proxy.log" &
	ppid=$!
	for ((i = 0; i < 50; i++)); do [[ -s $T/pport ]] && break; sleep 0.1; done
	sed "/^\[mgrd\]/,/^\[/ s/^port = .*/port = $(cat "$T/pport")/" "$CONF" >"$T/mitm.conf"
	chmod 600 "$T/mitm.conf"
	out=$("$TWINFS_BUILD_DIR/cli/twinfsctl" -c "$T/mitm.conf" -t 3000 status 2>&1)
	rc=$?
	wait $ppid
	rm -f "$T/pport"
	if [[ $dir == c2s ]]; then
		seen=$(grep -c "frame authentication failed (a HELLO request" "$TWINFS_RUN_DIR"/logs/mgrd.log)
	else
		seen=$(grep -c "frame authentication failed" <<<"$out")
	fi
	if ((rc != 0 && seen > 0)) && grep -q flipped "$T/proxy.log"; then
		pass "tampered-frame-$dir-refused"
	else
		fail "tampered-frame-$dir-refused" "exit $rc, seen $seen: $(echo "$out" | head -n 2 | tr '\n' ' ')"
	fi
done

# A daemon must not listen beyond loopback without a secret.
sed -e "/^secret = /d" -e "0,/^host = 127.0.0.1/s//host = 0.0.0.0/" \
	-e "s/^dir = .*mgrd$/dir = $(echo "$T" | sed 's/[\/&]/\\&/g')\/mgrd2/" "$CONF" >"$T/open.conf"
out=$(timeout 10 "$TWINFS_BUILD_DIR/mgrd/twinfs-mgrd" -c "$T/open.conf" 2>&1)
rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"without a cluster secret"* ]]; then
	pass mgrd-refuses-open-listen
else
	fail mgrd-refuses-open-listen "exit $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
fi

# A config holding the secret that group or others can read is refused by
# the daemons and twinfsctl alike, naming the file, its mode and the fix;
# the placeholder secret of deploy/twinfs.conf.example is refused too.
assert_eq conf-written-0600 600 "$(stat -c %a "$CONF")"
sed -e "s/^dir = .*mgrd$/dir = $(echo "$T" | sed 's/[\/&]/\\&/g')\/mgrd3/" "$CONF" >"$T/loose.conf"
chmod 644 "$T/loose.conf"
for prog in "mgrd/twinfs-mgrd -c $T/loose.conf" "iod/twinfs-iod -c $T/loose.conf -i 1" \
	"cli/twinfsctl -c $T/loose.conf status"; do
	name=${prog%% *}
	name=${name##*/}
	out=$(timeout 10 $TWINFS_BUILD_DIR/$prog 2>&1)
	rc=$?
	if ((rc != 0 && rc != 124)) && [[ $out == *"$T/loose.conf"*"mode 0644"*"chmod 600"* ]]; then
		pass "$name-refuses-readable-secret"
	else
		fail "$name-refuses-readable-secret" "exit $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
	fi
done
[[ ! -e $T/mgrd3 ]] && pass readable-secret-nothing-created ||
	fail readable-secret-nothing-created "mgrd created $T/mgrd3"
sed "s/^secret = .*/secret = CHANGE-ME/" "$CONF" >"$T/placeholder.conf"
chmod 600 "$T/placeholder.conf"
out=$(timeout 10 "$TWINFS_BUILD_DIR/cli/twinfsctl" -c "$T/placeholder.conf" status 2>&1)
rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"placeholder"*"openssl rand -hex 32"* ]]; then
	pass placeholder-secret-refused
else
	fail placeholder-secret-refused "exit $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
fi

# ---------------------------------------------------- client identities

R=$TWINFS_RUN_DIR
PORT=$TWINFS_PORT
IODS=$((PORT + 1)),$((PORT + 2)),$((PORT + 3)),$((PORT + 4))
CL=$TWINFS_CLUSTER
# A hostile peer: no proof, a wrong key, forged, foreign and expired
# tickets, a ticket for another session, at mgrd and every iod.
run_checks "$PY" "$E2E_DIR/twire.py" ident 127.0.0.1 "$PORT" "$CL" \
	"$R/client.key" "$TWINFS_SECRET" "$IODS"

# mount_as NAME DIR [OPTS]: mount DIR with identity NAME; what the attempt
# printed (the client's refusal) goes to $R/mount-NAME.out.
mount_as() {
	TWINFS_MOUNT_OPTS="keyfile=$R/$1.key${3:+,$3}" lc mount "$2" >"$R/mount-$1.out" 2>&1
}

# access = ro: reads work, every change is EROFS.
echo hello-ro >"$M/ro-file"
mkdir -p "$R/m-ro"
if mount_as ro1 "$R/m-ro"; then
	assert_eq ro-reads hello-ro "$(cat "$R/m-ro/ro-file" 2>&1)"
	assert_errno ro-write-erofs EROFS "open('$R/m-ro/ro-file', 'w').write('x')"
	assert_errno ro-create-erofs EROFS "open('$R/m-ro/new', 'x')"
	assert_errno ro-mkdir-erofs EROFS "os.mkdir('$R/m-ro/d')"
	assert_eq ro-file-unchanged hello-ro "$(cat "$M/ro-file")"
	lc umount "$R/m-ro" >/dev/null 2>&1
else
	fail ro-mount "$(tail -n 2 "$R/mount-ro1.out")"
fi

# squash = root: root's new files belong to anonuid/anongid.
mkdir -p "$R/m-sq" "$M/sq"
chmod 1777 "$M/sq"
if mount_as sq1 "$R/m-sq"; then
	head -c 100000 /dev/urandom >"$T/sq"
	cp "$T/sq" "$R/m-sq/sq/squashed" 2>"$T/sq.err"
	assert_eq squash-root-owner 4321:4322 "$(stat -c %u:%g "$M/sq/squashed" 2>&1)"
	assert_same_file squash-data "$T/sq" "$M/sq/squashed"
	assert_errno squash-root-not-root EACCES "open('$R/m-sq/ro-file', 'w')"
	lc umount "$R/m-sq" >/dev/null 2>&1
else
	fail squash-mount "$(tail -n 2 "$R/mount-sq1.out")"
fi

# export = /scratch: mounting / is refused at once, naming the export;
# the subtree mounts, and its root is the mount's.
mkdir -p "$M/scratch/in" "$M/outside"
head -c 300000 /dev/urandom >"$T/sub"
cp "$T/sub" "$M/scratch/in/data"
mkdir -p "$R/m-sub"
t0=$SECONDS
if mount_as sub1 "$R/m-sub"; then
	fail subtree-root-refused "mounting / succeeded"
	lc umount "$R/m-sub" >/dev/null 2>&1
elif grep -q "may mount /scratch only" "$R/mount-sub1.out" && ((SECONDS - t0 < 10)); then
	pass subtree-root-refused
else
	fail subtree-root-refused "$(tail -n 2 "$R/mount-sub1.out")"
fi
if mount_as sub1 "$R/m-sub" subdir=/scratch; then
	assert_same_file subtree-data "$T/sub" "$R/m-sub/in/data"
	echo made-in-subtree >"$R/m-sub/in/new"
	assert_eq subtree-write-visible made-in-subtree "$(cat "$M/scratch/in/new")"
	assert_eq subtree-root-listing in "$(ls "$R/m-sub")"
	assert_eq subtree-dotdot in "$(ls "$R/m-sub/in/..")"
	lc umount "$R/m-sub" >/dev/null 2>&1
else
	fail subtree-mount "$(tail -n 2 "$R/mount-sub1.out")"
fi
run_checks "$PY" "$E2E_DIR/twire.py" subtree 127.0.0.1 "$PORT" "$CL" \
	"$R/sub1.key" /scratch "$(stat -c %i "$M/outside")"

# networks: net1 may connect from 10.0.0.0/8 only.
mkdir -p "$R/m-net"
if mount_as net1 "$R/m-net"; then
	fail network-refused "mounted from 127.0.0.1"
	lc umount "$R/m-net" >/dev/null 2>&1
elif grep -q "may not connect from 127.0.0.1" "$R/mount-net1.out"; then
	pass network-refused
else
	fail network-refused "$(tail -n 2 "$R/mount-net1.out")"
fi
# (rate-limited: the hostile peer's refusals came just before)
grep -q "refusing AUTH from 127.0.0.1:[0-9]*: \(unknown client\|client 'net1' may not\)" "$R/logs/mgrd.log" &&
	pass refusal-logged-with-peer || fail refusal-logged-with-peer "no line in mgrd.log"

# Revocation: a live mount's writes fail within a lease, a new mount is
# refused with a clear message, and a new key re-admits the name.
mkdir -p "$R/m-rev"
if mount_as rev1 "$R/m-rev"; then
	head -c 200000 /dev/urandom >"$T/rev"
	cp "$T/rev" "$R/m-rev/before-revoke"
	sync "$R/m-rev/before-revoke"
	assert_same_file revoke-data-before "$T/rev" "$M/before-revoke"
	out=$(ctl client list 2>&1)
	[[ $(echo "$out" | awk '$1 == "rev1" { print $5 ":" $6 }') == 1:no ]] &&
		pass client-list || fail client-list "$(echo "$out" | tr '\n' ';')"
	exec 7>>"$R/m-rev/before-revoke"   # a live descriptor through the revoke
	check client-revoke ctl client revoke rev1
	t0=$SECONDS
	ok=0
	while ((SECONDS - t0 < 10)); do
		if ! dd if=/dev/zero of="$R/m-rev/after-revoke" bs=64k count=4 \
			conv=fsync 2>/dev/null; then
			ok=1
			break
		fi
		sleep 0.5
	done
	((ok)) && pass "revoked-writes-fail ($((SECONDS - t0)) s)" ||
		fail revoked-writes-fail "writes still succeed 10 s after revoke"
	exec 7>&-
	assert_same_file revoke-old-data-intact "$T/rev" "$M/before-revoke"
	out=$(ctl client list 2>&1)
	[[ $(echo "$out" | awk '$1 == "rev1" { print $6 }') == yes ]] &&
		pass client-list-revoked || fail client-list-revoked "$(echo "$out" | tr '\n' ';')"
	lc umount "$R/m-rev" >/dev/null 2>&1
	if mount_as rev1 "$R/m-rev"; then
		fail revoked-mount-refused "mounted"
		lc umount "$R/m-rev" >/dev/null 2>&1
	elif grep -q "client 'rev1' is revoked" "$R/mount-rev1.out"; then
		pass revoked-mount-refused
	else
		fail revoked-mount-refused "$(tail -n 2 "$R/mount-rev1.out")"
	fi
	# The revocation survives an mgrd restart; a new key re-admits.
	rm -f "$R/rev1.new"
	"$CTL" keygen rev1 -o "$R/rev1.new" >/dev/null && mv "$R/rev1.new" "$R/rev1.key"
	lc kill-mgrd >/dev/null 2>&1
	lc start-mgrd >/dev/null 2>&1
	if mount_as rev1 "$R/m-rev"; then
		cp "$T/rev" "$R/m-rev/readmitted"
		assert_same_file new-key-readmits "$T/rev" "$M/readmitted"
		lc umount "$R/m-rev" >/dev/null 2>&1
	else
		fail new-key-readmits "$(tail -n 2 "$R/mount-rev1.out")"
	fi
else
	fail revoke-mount "$(tail -n 2 "$R/mount-rev1.out")"
fi

# Data files 0600 and directories 0700 in the data directories of mgrd and
# the iods (the cluster has written files above; its directories were made
# by deploy/local-cluster with mode 700 or by the daemons).
ctl sync >/dev/null 2>&1 || true
bad=$(find "$TWINFS_RUN_DIR/mgrd" "$TWINFS_RUN_DIR"/iod[1-4] \
	\( -type f ! -perm 0600 \) -o \( -type d ! -perm 0700 \) 2>/dev/null | head -n 5)
nfiles=$(find "$TWINFS_RUN_DIR/mgrd" "$TWINFS_RUN_DIR"/iod[1-4] -type f 2>/dev/null | wc -l)
if [[ -z $bad ]] && ((nfiles > 0)); then
	pass "data-dir-modes ($nfiles files)"
else
	fail data-dir-modes "not 0600/0700: $(ls -ld $bad 2>&1 | tr '\n' ';')"
fi
e2e_end
