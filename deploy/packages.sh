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
tw_apt_install() {
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "$@"
}
