#!/usr/bin/env bash
# t_auth.sh - the cluster secret (DESIGN.md "Wire protocol"): with a secret
# in the config, iods register and twin-forward only after proving it, an
# admin without it (or with a wrong one) is refused with a clear message, a
# client mount works as NFS AUTH_SYS does (no secret needed), and a daemon
# refuses to listen beyond loopback without a secret; every frame after AUTH
# is sealed, and one changed on the way fails the connection.
. "$(dirname "$0")/lib.sh"
export TWINFS_SECRET=e2e-$$-$RANDOM
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
