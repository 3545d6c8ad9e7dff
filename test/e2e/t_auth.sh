#!/usr/bin/env bash
# t_auth.sh - the cluster secret (docs/SECURITY.md): with a secret
# in the config, iods register and twin-forward only after proving it, an
# admin without it (or with a wrong one) is refused with a clear message, a
# client mount works as NFS AUTH_SYS does (no secret needed), and a daemon
# refuses to listen beyond loopback without a secret; every frame after AUTH
# is sealed, and one changed on the way fails the connection.
# Capabilities (proto/FORMAT.md "Capabilities"), with a 3 s cap_lifetime:
# a mount reads and writes across several lifetimes without an error or an
# expired cap (renewed in the background), and a hostile client is
# refused every cap it has no right to (twire.py caps).
. "$(dirname "$0")/lib.sh"
export TWINFS_SECRET=e2e-$$-$RANDOM
export TWINFS_CAP_LIFETIME=3
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
	"$(stat -c %i "$M/capfile")" "$(stat -c %i "$M/capother")" 3
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
