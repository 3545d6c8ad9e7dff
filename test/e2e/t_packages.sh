#!/usr/bin/env bash
# t_packages.sh - the Debian packages of deploy/build-debs install and
# work: dpkg -i of twinfs-server, twinfs-client and twinfs-tools puts the
# binaries in /usr/bin, the units in /lib/systemd/system (with ExecStart
# naming the installed binaries) and the man pages where man(1) finds them;
# a cluster of the INSTALLED daemons (local-cluster with TWINFS_BIN_DIR)
# serves an fstab-style mount made by mount(8) through mount.fuse3, which
# writes and reads a file byte for byte; then the packages are purged and
# the machine is as it was.
#
# The .debs: those in $TWINFS_DEBS_DIR when it holds all three (.ci/run
# builds them once from its release build), else deploy/build-debs builds
# them here (a clean release build: a minute or so more).  Skipped, with a
# note, where there is no dpkg, or where a twinfs package or a file the
# packages install is already there (purging would not leave the machine
# as found).
# e2e: alone (installs packages system-wide)
. "$(dirname "$0")/lib.sh"

PKGS=(twinfs-server twinfs-client twinfs-tools)
BINS=(/usr/bin/twinfs-mgrd /usr/bin/twinfs-iod /usr/bin/twinfs /usr/bin/twinfsctl)
UNITS=(/lib/systemd/system/twinfs-mgrd.service /lib/systemd/system/twinfs-iod@.service)
PKG_INSTALLED=0
M2=

skip() {
	echo "# $1: package test skipped"
	pass packages-skipped
	exit 0
}
command -v dpkg >/dev/null || skip "no dpkg (not Debian)"
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok' &&
		skip "package $p is installed already"
done
for f in "${BINS[@]}" "${UNITS[@]}"; do
	[[ -e $f ]] && skip "$f exists already"
done

# Runs at exit, before lib.sh's cleanup: unmount, stop the cluster, purge.
pkg_exit() {
	local rc=$? p left
	cd /
	if [[ -n $M2 ]] && awk -v p="$M2" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		umount "$M2" 2>/dev/null || umount -l "$M2" 2>/dev/null || true
	fi
	if ((E2E_UP)); then
		lc down >/dev/null 2>&1 || echo "# local-cluster down failed"
		E2E_UP=0
	fi
	if ((PKG_INSTALLED)); then
		if dpkg --purge "${PKGS[@]}" >"$T/purge.log" 2>&1; then
			pass dpkg-purge
		else
			fail dpkg-purge "$(tail -n 3 "$T/purge.log" | tr '\n' ' ')"
		fi
		left=
		for p in "${BINS[@]}" "${UNITS[@]}" /usr/share/man/man8/twinfs.8.gz; do
			[[ -e $p ]] && left+=" $p"
		done
		assert_eq purge-leaves-nothing "" "$left"
	fi
	(exit "$rc")
	e2e_cleanup
}

# Called by e2e_begin before 'up': install the packages, so that the
# cluster starts from them; from here on pkg_exit runs at exit.
e2e_before_up() {
	local debs=() d p t0=$SECONDS
	trap pkg_exit EXIT
	e2e_tmpdir T
	if [[ -n ${TWINFS_DEBS_DIR:-} ]]; then
		for p in "${PKGS[@]}"; do
			d=$(ls "$TWINFS_DEBS_DIR/${p}"_*.deb 2>/dev/null | tail -n 1)
			[[ -n $d ]] && debs+=("$d")
		done
	fi
	if ((${#debs[@]} == ${#PKGS[@]})); then
		echo "# the .debs of $TWINFS_DEBS_DIR"
	else
		echo "# building the .debs (deploy/build-debs, a clean release build)"
		mapfile -t debs < <("$REPO/deploy/build-debs" --out "$T/debs" 2>"$T/build.log")
		if ((${#debs[@]} != ${#PKGS[@]})); then
			tail -n 20 "$T/build.log" | sed 's/^/# /'
			fail build-debs "deploy/build-debs made ${#debs[@]} packages"
			return 1
		fi
		pass "build-debs-$((SECONDS - t0))s"
	fi
	PKG_INSTALLED=1
	if ! dpkg -i "${debs[@]}" >"$T/install.log" 2>&1; then
		tail -n 10 "$T/install.log" | sed 's/^/# /'
		fail dpkg-install "dpkg -i failed (missing dependencies?)"
		return 1
	fi
	pass dpkg-install
	for p in "${PKGS[@]}"; do dpkg -L "$p"; done >"$T/files"
	return 0
}

export TWINFS_BIN_DIR=/usr/bin
e2e_begin packages

# ------------------------------------------------------- what is installed
has() { grep -qx "$2" "$T/files" && pass "$1" || fail "$1" "dpkg -L lists no $2"; }
has server-mgrd /usr/bin/twinfs-mgrd
has server-iod /usr/bin/twinfs-iod
has server-unit-mgrd /lib/systemd/system/twinfs-mgrd.service
has server-unit-iod /lib/systemd/system/twinfs-iod@.service
has server-example-conf /usr/share/doc/twinfs-server/examples/twinfs.conf.example
has client-twinfs /usr/bin/twinfs
has client-mount-unit /usr/share/doc/twinfs-client/examples/mnt-twinfs.mount
has tools-twinfsctl /usr/bin/twinfsctl
# Minimal container images tell dpkg not to install man pages at all.
NO_MAN=$(grep -rls '^path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg.d/ 2>/dev/null | head -n 1)
for page in man8/twinfs.8 man8/twinfsctl.8 man8/twinfs-mgrd.8 man8/twinfs-iod.8 man5/twinfs.conf.5; do
	[[ -z $NO_MAN ]] && has "man-${page#*/}" "/usr/share/man/$page.gz"
done
for p in "${PKGS[@]}"; do
	has "$p-copyright" "/usr/share/doc/$p/copyright"
done

if [[ -n $NO_MAN ]]; then
	echo "# $NO_MAN excludes /usr/share/man from dpkg: man pages not checked"
elif command -v man >/dev/null; then
	assert_eq man-w-twinfs /usr/share/man/man8/twinfs.8.gz "$(man -w twinfs 2>&1)"
	assert_eq man-w-twinfs.conf /usr/share/man/man5/twinfs.conf.5.gz "$(man -w 5 twinfs.conf 2>&1)"
else
	fail man-w-twinfs "man is missing (Debian: man-db)"
fi

# Every ExecStart of the installed units names an installed executable.
for u in "${UNITS[@]}"; do
	exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$u")
	[[ -n $exe && -x $exe && $exe == /usr/bin/* ]] && pass "execstart-$(basename "$u")" ||
		fail "execstart-$(basename "$u")" "ExecStart '$exe' is not an installed binary"
done

# ------------------------------------------------- the installed cluster
for p in mgrd iod1; do
	assert_eq "runs-installed-$p" "/usr/bin/twinfs-${p%1}" \
		"$(readlink "/proc/$(cat "$TWINFS_RUN_DIR/pids/$p.pid")/exe" 2>&1)"
done
assert_eq runs-installed-client /usr/bin/twinfs "$(readlink "/proc/$(client_pid "$M")/exe" 2>&1)"

# An /etc/fstab line, in a file of its own: mount(8) -> mount.fuse3 ->
# twinfs from the PATH.
M2=$TWINFS_RUN_DIR/fstab-mnt
mkdir -p "$M2"
echo "127.0.0.1:$TWINFS_PORT $M2 fuse.twinfs _netdev,allow_other,nosuid,nodev,cluster=$TWINFS_CLUSTER 0 0" >"$T/fstab"
check fstab-mount mount -T "$T/fstab" "$M2"
assert_eq fstab-mount-type "fuse.twinfs 127.0.0.1:$TWINFS_PORT" \
	"$(awk -v p="$M2" '$5 == p { for (i = 7; $i != "-"; i++); print $(i + 1), $(i + 2) }' /proc/self/mountinfo)"

head -c "$(scale $((4 << 20)))" /dev/urandom >"$T/src"
check write-fstab-mount cp "$T/src" "$M2/f"
assert_same_file read-fstab-mount "$T/src" "$M2/f"
drop_caches
assert_same_file read-other-mount "$T/src" "$M/f"
check twinfsctl-status ctl status
e2e_verify

check fstab-umount umount "$M2"
for _ in $(seq 1 50); do
	awk -v p="$M2" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo || break
	sleep 0.1
done
assert_eq fstab-unmounted "" "$(awk -v p="$M2" '$5 == p' /proc/self/mountinfo)"
e2e_end
