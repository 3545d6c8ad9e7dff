#!/usr/bin/env bash
# t_systemd_units.sh - the daemons' systemd units in deploy/systemd/ stay
# hardened: `systemd-analyze security --offline=true` scores each one's
# exposure below MAX_EXPOSURE (0 = fully sandboxed, 10 = not at all; the
# units score 1.8 today: they run as root, on the network, in the host's
# root).  The units are templates (UNIT.in, deploy/meson.build; both mgrd
# units come from one): each is checked as meson makes it for prefix /usr.  Skipped,
# with a note, where systemd-analyze lacks --offline (systemd < 250) or is
# absent.  No cluster: only the unit files are read.
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MAX_EXPOSURE=3.0
E2E_PASS=0 E2E_FAIL=0
pass() { echo "PASS $1"; E2E_PASS=$((E2E_PASS + 1)); }
fail() { echo "FAIL $1: ${2:-failed}"; E2E_FAIL=$((E2E_FAIL + 1)); }

if ! command -v systemd-analyze >/dev/null ||
	! systemd-analyze security --help 2>&1 | grep -q -- --offline; then
	echo "# systemd-analyze with --offline is not available: unit checks skipped"
	pass systemd-units-skipped
	exit 0
fi
UNITS=$(mktemp -d "${TMPDIR:-/tmp}/twinfs-units.XXXXXX") || exit 1
trap 'rm -rf "$UNITS"' EXIT
# unit:source:description:--id:name, as deploy/meson.build makes them
for spec in 'twinfs-mgrd.service:twinfs-mgrd.service.in:::twinfs-mgrd' \
	'twinfs-mgrd@.service:twinfs-mgrd.service.in:, mgrd %i of a pair: --id %i:twinfs-mgrd@N' \
	'twinfs-iod@.service:twinfs-iod@.service.in:::'; do
	IFS=: read -r u src desc idarg name <<<"$spec"
	# Under the unit's own name: systemd-analyze takes the type from it.
	f=$UNITS/$u
	sed -e 's|@bindir@|/usr/bin|g' -e "s|@mgrd_desc@|$desc|g" \
		-e "s|@mgrd_id_arg@|$idarg|g" -e "s|@mgrd_unit@|$name|g" \
		"$REPO/deploy/systemd/$src" >"$f"
	if grep -q '@[A-Za-z_]*@' "$f"; then
		fail "$u-template" "a variable deploy/meson.build does not set: $(grep -o '@[A-Za-z_]*@' "$f" | head -n 1)"
	fi
	out=$(systemd-analyze security --offline=true --no-pager "$f" 2>&1)
	score=$(echo "$out" | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
	if [[ -z $score ]]; then
		fail "$u-exposure" "no score: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
	elif awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s < m) }'; then
		pass "$u-exposure-$score-below-$MAX_EXPOSURE"
	else
		fail "$u-exposure" "$score, not below $MAX_EXPOSURE"
	fi
	# The options the daemons must keep whatever the score says.
	for opt in NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths= \
		ProtectHome=yes PrivateTmp=yes PrivateDevices=yes \
		'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX'; do
		grep -qx "$opt.*" "$f" || fail "$u-has-$opt" "missing"
	done
	# Unknown keys or bad values: systemd-analyze warns about them.
	if echo "$out" | grep -qiE "unknown (key|lvalue)|failed to parse"; then
		fail "$u-parses" "$(echo "$out" | grep -iE 'unknown|failed to parse' | head -n 2 | tr '\n' ' ')"
	else
		pass "$u-parses"
	fi
done
# The client's mount unit must not be sandboxed: its mount would be made in
# a private namespace, invisible to the host.
if grep -qE '^(PrivateDevices|PrivateTmp|ProtectSystem)=' "$REPO/deploy/systemd/mnt-twinfs.mount"; then
	fail mount-unit-not-sandboxed "namespace options in mnt-twinfs.mount"
else
	pass mount-unit-not-sandboxed
fi
((E2E_FAIL == 0))
