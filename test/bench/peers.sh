# peers.sh - the peer file systems of `run --peers` (README.md here,
# "Peers"): MooseFS and GlusterFS, brought up on this host beside TwinFS,
# each configured as TwinFS is (two copies of every byte, four storage
# daemons on the one disk) and with its own default durability settings.
# Sourced by run; needs WORK, OUT, TMO and say/die.
#
#   peers_install     apt-get the Debian packages when missing (no service
#                     is started: deploy/packages.sh, tw_apt_install)
#   peers_up          start both, mount them; sets PEER_MNT[moosefs|glusterfs]
#   peers_pids T      the PIDs whose CPU time is peer T's
#   peers_down        unmount, stop exactly the processes started here (by
#                     PID), remove the network namespace; idempotent
#
# Both run in a network namespace of their own (PEER_NS), on its loopback
# device: mfschunkserver refuses a master on 127.0.0.0/8 ("localhost can't
# be used"), so the namespace's lo also carries PEER_IP, an address no
# other host has.  Only the network is private: the FUSE mounts, the data
# directories and the processes are the host's.  Nothing listens outside
# the namespace, so the default ports of both cannot clash with anything.

PEER_PKGS=(moosefs-master moosefs-chunkserver moosefs-client glusterfs-server)
PEER_NS=twb-peers-$$
PEER_IP=10.213.77.1
PEER_DIR=$WORK/peers
declare -A PEER_MNT=([moosefs]=$PEER_DIR/mfs-mnt [glusterfs]=$PEER_DIR/gl-mnt)
PEER_NS_UP=0
MFS_PIDS=()      # master first, then the chunkservers
MFS_MNT_PID=
GL_PID=          # glusterd
GL_MNT_PID=
GL_CHILD=()      # bricks and the self-heal daemon glusterd started
GL_SOCKS=()      # their unix sockets (glusterd puts them in /var/run/gluster)
GL_VOL=twbench
# glusterd writes to these whatever its working directory: what was not
# there before peers_up is ours and goes at peers_down (state removed,
# logs moved to OUT/peer-logs).
GL_HOST_DIRS=(/var/lib/glusterd /var/log/glusterfs /var/run/gluster)
GL_HOST_BEFORE=()

# In front of a command run in the namespace.  Not a function: `CMD &`
# must make the daemon itself the background job (nsenter execs it), so
# that $! is the PID to stop and to count the CPU time of.
PEER_NSX=(nsenter --net="/run/netns/$PEER_NS")
gl_cli() {
	"${PEER_NSX[@]}" timeout 120 gluster --mode=script --glusterd-sock="$PEER_DIR/glusterd.socket" \
		--log-file="$PEER_DIR/log/cli.log" "$@"
}

peers_install() {
	local miss
	# shellcheck source=../../deploy/packages.sh
	source "$REPO/deploy/packages.sh"
	miss=$(tw_missing_packages "${PEER_PKGS[@]}")
	[[ -z $miss ]] && return
	[[ ${TWINFS_NO_APT:-0} == 1 ]] && die "missing: $miss"
	say "installing $miss"
	# shellcheck disable=SC2086
	tw_apt_install $miss >>"$OUT/peers.log" 2>&1 || die "apt-get install $miss failed ($OUT/peers.log)"
}

# peer_wait PID LOG CMD...: wait up to 10 s for CMD to succeed while the
# daemon PID lives (it died: say so, with its LOG).
peer_wait() {
	local pid=$1 log=$2 i
	shift 2
	for ((i = 0; i < 100; i++)); do
		"$@" && return
		kill -0 "$pid" 2>/dev/null || die "$(ps -o comm= -p "$pid" 2>/dev/null || echo daemon) $pid exited (log $log)"
		sleep 0.1
	done
}

# stop_pid PID SECONDS: SIGTERM, wait, then SIGKILL.
stop_pid() {
	local i
	kill -0 "$1" 2>/dev/null || return 0
	kill "$1" 2>/dev/null
	for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null
}

# ------------------------------------------------------------ MooseFS
# One master, four chunkservers (ports 9422-9425 in the namespace), one
# mfsmount; every chunkserver its own data directory.  The default goal of
# MooseFS 3.0 is 2 (two copies on two chunkservers, as TwinFS's twins);
# mfssetgoal -r 2 says so explicitly.  All other settings are the
# defaults: HDD_FSYNC_BEFORE_CLOSE = 0 (a chunkserver never fsyncs its
# chunk files), mfsmount's 256 MiB write cache, fsync before close.
mfs_up() {
	local d=$PEER_DIR/mfs i c
	mkdir -p "$d/master" "${PEER_MNT[moosefs]}"
	cp /var/lib/mfs/metadata.mfs.empty "$d/master/metadata.mfs"
	echo '* / rw,alldirs,admin,maproot=0:0' >"$d/mfsexports.cfg"
	: >"$d/mfstopology.cfg"
	cat >"$d/mfsmaster.cfg" <<-EOF
		WORKING_USER = root
		WORKING_GROUP = root
		DATA_PATH = $d/master
		EXPORTS_FILENAME = $d/mfsexports.cfg
		TOPOLOGY_FILENAME = $d/mfstopology.cfg
		MATOML_LISTEN_HOST = $PEER_IP
		MATOCS_LISTEN_HOST = $PEER_IP
		MATOCL_LISTEN_HOST = $PEER_IP
	EOF
	"${PEER_NSX[@]}" mfsmaster -f -c "$d/mfsmaster.cfg" start >"$d/master.log" 2>&1 &
	MFS_PIDS+=($!)
	peer_wait "${MFS_PIDS[0]}" "$d/master.log" grep -q 'mfsmaster daemon initialized properly' "$d/master.log"
	for i in 1 2 3 4; do
		c=$d/cs$i
		mkdir -p "$c/data"
		echo "$c/data" >"$c/mfshdd.cfg"
		cat >"$c/mfschunkserver.cfg" <<-EOF
			WORKING_USER = root
			WORKING_GROUP = root
			DATA_PATH = $c
			HDD_CONF_FILENAME = $c/mfshdd.cfg
			MASTER_HOST = $PEER_IP
			BIND_HOST = $PEER_IP
			CSSERV_LISTEN_HOST = $PEER_IP
			CSSERV_LISTEN_PORT = $((9421 + i))
		EOF
		"${PEER_NSX[@]}" mfschunkserver -f -c "$c/mfschunkserver.cfg" start >"$c/cs.log" 2>&1 &
		MFS_PIDS+=($!)
	done
	# Ready when the master has all four chunkservers.
	for ((i = 0; i < 300; i++)); do
		(($(grep -c 'chunkserver register end' "$d/master.log") >= 4)) && break
		sleep 0.1
	done
	(($(grep -c 'chunkserver register end' "$d/master.log") >= 4)) ||
		die "MooseFS: not all four chunkservers registered (logs in $d)"
	"${PEER_NSX[@]}" mfsmount -f "${PEER_MNT[moosefs]}" -H "$PEER_IP" >"$d/mount.log" 2>&1 &
	MFS_MNT_PID=$!
	fuse_wait "${PEER_MNT[moosefs]}" "$d/mount.log"
	"${PEER_NSX[@]}" mfssetgoal -r 2 "${PEER_MNT[moosefs]}" >>"$d/mount.log" 2>&1 || die "mfssetgoal failed"
}

mfs_down() {
	local p
	[[ -n $MFS_MNT_PID ]] && fuse_stop "${PEER_MNT[moosefs]}" "$MFS_MNT_PID"
	MFS_MNT_PID=
	# Chunkservers first, then the master (it writes its metadata).
	for ((p = ${#MFS_PIDS[@]} - 1; p >= 0; p--)); do stop_pid "${MFS_PIDS[p]}" 30; done
	MFS_PIDS=()
}

# ------------------------------------------------------------ GlusterFS
# A private glusterd (working and run directories under PEER_DIR, its own
# socket), a 2 x 2 distributed-replicated volume (replica 2: two copies, as
# TwinFS's twins; two replica sets, as TwinFS's two twin groups), four
# bricks on the one host (hence `force`), one FUSE mount.  The volume's
# options are the defaults of glusterfs 10 (write-behind on,
# performance.strict-o-direct off, storage.*fsync* untouched).
gl_up() {
	local d=$PEER_DIR/gl i b bricks=() f
	mkdir -p "$d/wd" "$d/run" "$PEER_DIR/log" "${PEER_MNT[glusterfs]}"
	cat >"$d/glusterd.vol" <<-EOF
		volume management
		    type mgmt/glusterd
		    option working-directory $d/wd
		    option run-directory $d/run
		    option glusterd-sockfile $PEER_DIR/glusterd.socket
		    option transport-type socket
		    option transport.socket.bind-address $PEER_IP
		    option transport.socket.keepalive-time 10
		    option transport.socket.keepalive-interval 2
		    option transport.socket.read-fail-log off
		    option ping-timeout 0
		    option event-threads 1
		end-volume
	EOF
	"${PEER_NSX[@]}" glusterd -N -f "$d/glusterd.vol" -l "$PEER_DIR/log/glusterd.log" >"$d/glusterd.out" 2>&1 &
	GL_PID=$!
	peer_wait "$GL_PID" "$PEER_DIR/log/glusterd.log" test -S "$PEER_DIR/glusterd.socket"
	for i in 1 2 3 4; do
		b=$d/brick$i
		mkdir -p "$b"
		bricks+=("$PEER_IP:$b")
	done
	gl_cli volume create $GL_VOL replica 2 "${bricks[@]}" force >>"$OUT/peers.log" 2>&1 ||
		die "gluster volume create failed ($OUT/peers.log)"
	gl_cli volume start $GL_VOL >>"$OUT/peers.log" 2>&1 || { gl_children; die "gluster volume start failed"; }
	gl_children
	"${PEER_NSX[@]}" glusterfs -N --process-name fuse --volfile-server="$PEER_IP" --volfile-id=$GL_VOL \
		-l "$PEER_DIR/log/mount.log" "${PEER_MNT[glusterfs]}" >"$d/mount.out" 2>&1 &
	GL_MNT_PID=$!
	fuse_wait "${PEER_MNT[glusterfs]}" "$PEER_DIR/log/mount.log"
}

# gl_children: the PIDs and sockets of what glusterd started for the volume
# (its pid files in the run directory), for the teardown.
gl_children() {
	local f p s
	GL_CHILD=() GL_SOCKS=()
	for f in "$PEER_DIR"/gl/run/vols/$GL_VOL/*.pid "$PEER_DIR"/gl/run/shd/$GL_VOL/*.pid; do
		[[ -f $f ]] || continue
		p=$(<"$f")
		[[ $p =~ ^[0-9]+$ ]] || continue
		GL_CHILD+=("$p")
		s=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^-S$/{n;p}')
		[[ $s == /var/run/gluster/*.socket ]] && GL_SOCKS+=("$s")
	done
}

gl_down() {
	local p
	[[ -n $GL_MNT_PID ]] && fuse_stop "${PEER_MNT[glusterfs]}" "$GL_MNT_PID"
	GL_MNT_PID=
	if [[ -n $GL_PID ]]; then
		gl_cli volume stop $GL_VOL force >>"$OUT/peers.log" 2>&1
		for p in "${GL_CHILD[@]}"; do stop_pid "$p" 10; done
		stop_pid "$GL_PID" 10
		wait "$GL_PID" 2>/dev/null
		GL_PID=
	fi
	rm -f "${GL_SOCKS[@]}"
	# The bricks log under /var/log/glusterfs whatever glusterd is told;
	# their names hold the brick paths (under WORK), so they are ours.
	mkdir -p "$OUT/peer-logs"
	local tag=${PEER_DIR#/}
	for p in /var/log/glusterfs/bricks/"${tag//\//-}"-gl-brick*.log; do
		[[ -f $p ]] && mv "$p" "$OUT/peer-logs/"
	done
	GL_CHILD=() GL_SOCKS=()
	gl_host_clean
}

# gl_host_clean: what glusterd left in GL_HOST_DIRS since peers_up.
gl_host_clean() {
	local h e old
	((${#GL_HOST_BEFORE[@]})) || return 0
	for h in "${GL_HOST_DIRS[@]}"; do
		for e in "$h"/*; do
			[[ -e $e ]] || continue
			for old in "${GL_HOST_BEFORE[@]}"; do [[ $e == "$old" ]] && continue 2; done
			if [[ $h == /var/log/* ]]; then
				mv "$e" "$OUT/peer-logs/" 2>/dev/null || rm -rf "$e"
			else
				rm -rf "$e"
			fi
		done
	done
	GL_HOST_BEFORE=()
}

# ------------------------------------------------------------ both

peers_up() {
	local h
	mkdir -p "$PEER_DIR"
	for h in "${GL_HOST_DIRS[@]}"; do
		mkdir -p "$h"
		GL_HOST_BEFORE+=("$h"/*)
	done
	ip netns add "$PEER_NS" || die "ip netns add $PEER_NS failed"
	PEER_NS_UP=1
	ip -n "$PEER_NS" link set lo up
	ip -n "$PEER_NS" addr add "$PEER_IP/32" dev lo
	say "starting MooseFS (1 master, 4 chunkservers, goal 2) in netns $PEER_NS"
	mfs_up
	say "starting GlusterFS (2 x 2 distributed-replicated, 4 bricks) in netns $PEER_NS"
	gl_up
}

peers_pids() {
	case $1 in
	moosefs) echo "${MFS_PIDS[*]} $MFS_MNT_PID" ;;
	glusterfs) echo "$GL_PID ${GL_CHILD[*]} $GL_MNT_PID" ;;
	esac
}

peers_down() {
	local p
	mfs_down
	gl_down
	if [[ -d $PEER_DIR ]]; then
		mkdir -p "$OUT/peer-logs"
		cp "$PEER_DIR"/mfs/*.log "$PEER_DIR"/log/*.log "$OUT/peer-logs/" 2>/dev/null
		for p in 1 2 3 4; do cp "$PEER_DIR/mfs/cs$p/cs.log" "$OUT/peer-logs/cs$p.log" 2>/dev/null; done
	fi
	((PEER_NS_UP)) && ip netns del "$PEER_NS"
	PEER_NS_UP=0
}

peers_versions() {
	echo "moosefs	$(dpkg-query -W -f='${Version}' moosefs-master 2>/dev/null) (goal 2, 4 chunkservers, defaults)"
	echo "glusterfs	$(dpkg-query -W -f='${Version}' glusterfs-server 2>/dev/null) (2 x 2 distributed-replicated, defaults)"
}
