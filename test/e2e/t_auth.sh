#!/usr/bin/env bash
# t_auth.sh - the cluster secret (DESIGN.md "Wire protocol"): with a secret
# in the config, iods register and twin-forward only after proving it, an
# admin without it (or with a wrong one) is refused with a clear message, a
# client mount works as NFS AUTH_SYS does (no secret needed), and a daemon
# refuses to listen beyond loopback without a secret.
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
e2e_end
