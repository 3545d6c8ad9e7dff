# deploy/packages.sh - sourced by deploy/local-cluster and test/run-all:
# which Debian packages a step needs are missing, and installing them.

# tw_missing_packages PKG...: print, one a line, those not installed
# (nothing where there is no dpkg).
tw_missing_packages() {
	command -v dpkg-query >/dev/null || return 0
	local p
	for p; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

# tw_apt_install PKG...: install them quietly (root); apt's status.
# No package's service is started meanwhile (policy-rc.d says no, as in a
# Debian build chroot): the tests need only tools (promtool, not the
# Prometheus server the same package holds), and leave no daemon behind.
tw_apt_install() {
	local guard=0 rc
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d &&
			chmod 755 /usr/sbin/policy-rc.d && guard=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "$@"
	rc=$?
	((guard)) && rm -f /usr/sbin/policy-rc.d
	return $rc
}
