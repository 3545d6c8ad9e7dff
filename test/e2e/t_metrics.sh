#!/usr/bin/env bash
# t_metrics.sh - GET /metrics of mgrd and every iod (docs/OPERATIONS.md
# "Metrics"): the text passes `promtool check metrics`; after a write
# through the mount the iods' written bytes grew by at least twice what
# was written (both twins store it) and their WRITE request counters
# grew; mgrd counts a live session and every iod up; another path is 404,
# another method 405, a request head over 8 KiB 431; a burst of 50 idle
# connections to a metrics port gets at most the responder's 16 slots
# (answered 408 after the read deadline), the rest closed, while the
# daemon keeps serving its wire clients and, afterwards, its metrics.  4,200
# creates wait for no inode range's sync.  Every metric name the Grafana
# dashboard (deploy/grafana/twinfs.json) queries is exported.
. "$(dirname "$0")/lib.sh"
e2e_begin metrics

e2e_tmpdir T
MX=$E2E_DIR/metrics.py
CONF=$TWINFS_RUN_DIR/twinfs.conf

# promtool (Debian package prometheus) is part of the e2e packages: its
# absence is a failure, never a skip.
if ! command -v promtool >/dev/null; then
	fail promtool "promtool not installed (Debian package prometheus)"
	e2e_end
fi

# The addresses, as deploy/local-cluster wrote them: mgrd first, then
# iods 1..4 in file order.
mapfile -t ADDRS < <(awk '/^metrics *=/ { print $3 }' "$CONF")
assert_eq metrics-configured 5 "${#ADDRS[@]}"
NAMES=(mgrd iod1 iod2 iod3 iod4)

scrape() { # TAG: every daemon's metrics into $T/NAME.TAG, checked
	local i
	for i in "${!ADDRS[@]}"; do
		if ! "$PY" "$MX" get "http://${ADDRS[i]}/metrics" >"$T/${NAMES[i]}.$1"; then
			fail "scrape-${NAMES[i]}-$1" "GET http://${ADDRS[i]}/metrics failed"
			continue
		fi
		check "promtool-${NAMES[i]}-$1" promtool check metrics <"$T/${NAMES[i]}.$1"
	done
}
mx() { "$PY" "$MX" sum "$@"; }
iods_sum() { # TAG NAME [L=V...]: the sum over the four iods
	local tag=$1 s=0 i v
	shift
	for i in 1 2 3 4; do
		v=$(mx "$T/iod$i.$tag" "$@")
		s=$((s + v))
	done
	echo "$s"
}

scrape before

# ------------------------------------------------------------- some I/O
W=$(scale $((8 << 20)))
head -c "$W" /dev/urandom >"$T/src"
check write dd if="$T/src" of="$M/f" bs=1M conv=fsync status=none
assert_same_file read-back "$T/src" "$M/f"

# `ls -l` of a listed directory asks mgrd for no xattr: the absence of
# security.selinux (and of the ACLs) comes with the listing's attributes.
mkdir "$M/lsdir" && for i in 1 2 3 4 5 6 7 8; do echo "$i" >"$M/lsdir/f$i"; done
echo 3 >/proc/sys/vm/drop_caches
"$PY" "$MX" get "http://${ADDRS[0]}/metrics" >"$T/mgrd.prels"
ls -l "$M/lsdir" >/dev/null
"$PY" "$MX" get "http://${ADDRS[0]}/metrics" >"$T/mgrd.postls"
assert_eq ls-l-no-getxattr "$(mx "$T/mgrd.prels" twinfs_requests_total type=GETXATTR)" \
	"$(mx "$T/mgrd.postls" twinfs_requests_total type=GETXATTR)"
rm -r "$M/lsdir"

scrape after

# delta NAME [L=V...]: how much the iods' sum grew from before to after.
delta() { echo $(($(iods_sum after "$@") - $(iods_sum before "$@"))); }
# at_least CHECK MIN VALUE WHAT
at_least() {
	if (($3 >= $2)); then pass "$1"; else fail "$1" "$4 is $3, expected at least $2"; fi
}
at_least iod-written-bytes $((2 * W)) "$(delta twinfs_iod_written_bytes_total)" \
	"growth of the iods' written bytes (2 twins x $W)"
at_least iod-write-requests 1 "$(delta twinfs_requests_total type=WRITE)" \
	"growth of the iods' WRITE requests"
at_least iod-received-bytes $((2 * W)) "$(delta twinfs_received_bytes_total)" \
	"growth of the bytes the iods read off the wire"
assert_eq iod-write-latency-count "$(iods_sum after twinfs_requests_total type=WRITE)" \
	"$(iods_sum after twinfs_request_duration_seconds_count type=WRITE)"
at_least iod-commit-histogram 1 \
	"$(delta twinfs_iod_journal_commit_duration_seconds_count)" \
	"growth of the journal commits timed"

at_least mgrd-sessions 1 "$(mx "$T/mgrd.after" twinfs_mgrd_sessions)" "mgrd's sessions"
assert_eq mgrd-iods-up 4 "$(mx "$T/mgrd.after" twinfs_mgrd_iod_state state=up)"
assert_eq mgrd-iods-not-down 0 "$(mx "$T/mgrd.after" twinfs_mgrd_iod_state state=down)"
assert_eq iods-self-up 4 "$(iods_sum after twinfs_iod_state state=up)"
assert_eq iods-twin-up 4 "$(iods_sum after twinfs_iod_twin_state state=up)"
at_least mgrd-mknod-counted 1 "$(mx "$T/mgrd.after" twinfs_requests_total type=MKNOD)" \
	"mgrd's MKNOD requests"
assert_eq build-info 1 "$(mx "$T/iod1.after" twinfs_build_info daemon=iod)"
# Each daemon watches its loop (OPERATIONS.md "Loop stalls").
check loop-stalls-mgrd grep -q '^twinfs_loop_stalls_total [0-9]' "$T/mgrd.after"
check loop-stalls-iod grep -q '^twinfs_loop_stall_max_seconds [0-9]' "$T/iod1.after"

# Inode ranges (docs/ARCHITECTURE.md "Namespace"): the range after the
# current one is journaled once half of it is used and synced in the
# background, so 4,200 creates, more than a range of 4,096, wait for no
# sync of their own (one create first: the first after a start waits).
# The pauses between batches (1 s in the 2,048 creates after a range is
# journaled) leave that sync its time on a loaded machine.
mkdir "$M/ranges" && : >"$M/ranges/first"
"$PY" "$MX" get "http://${ADDRS[0]}/metrics" >"$T/mgrd.preino"
"$PY" - "$M/ranges" <<'EOF'
import os, sys, time
for b in range(0, 4200, 100):
    for i in range(b, b + 100):
        os.close(os.open(os.path.join(sys.argv[1], "f%d" % i),
                         os.O_CREAT | os.O_WRONLY, 0o644))
    time.sleep(0.05)
EOF
"$PY" "$MX" get "http://${ADDRS[0]}/metrics" >"$T/mgrd.postino"
assert_eq inode-ranges-created 4201 "$(ls "$M/ranges" | wc -l)"
assert_eq inode-ranges-no-wait "$(mx "$T/mgrd.preino" twinfs_mgrd_inode_range_waits_total)" \
	"$(mx "$T/mgrd.postino" twinfs_mgrd_inode_range_waits_total)"
rm -rf "$M/ranges"

# Every name deploy/grafana/twinfs.json queries is exported.
missing=
for n in $(grep -o 'twinfs_[a-z_]*' "$REPO/deploy/grafana/twinfs.json" | sed 's/_bucket$//' | sort -u); do
	grep -qh "^# TYPE $n " "$T"/*.after || missing+=" $n"
done
assert_eq dashboard-names "" "$missing"

# ------------------------------------------------------ the responder
assert_eq http-404 404 "$("$PY" "$MX" status "http://${ADDRS[0]}/other")"
assert_eq http-405 405 "$("$PY" "$MX" status "http://${ADDRS[1]}/metrics" POST)"
assert_eq http-431 431 "$("$PY" "$MX" big "${ADDRS[2]%:*}" "${ADDRS[2]##*:}")"

# 50 idle connections to mgrd's and iod 1's metrics at once; meanwhile
# the wire side answers (twinfsctl status, a write through the mount).
"$PY" "$MX" burst "${ADDRS[0]%:*}" "${ADDRS[0]##*:}" 50 >"$T/burst.mgrd" &
b1=$!
"$PY" "$MX" burst "${ADDRS[1]%:*}" "${ADDRS[1]##*:}" 50 >"$T/burst.iod1" &
b2=$!
sleep 0.5
check burst-ctl-status ctl -t 3000 status
check burst-write dd if="$T/src" of="$M/g" bs=1M count=1 conv=fsync status=none
wait "$b1" "$b2"
for n in mgrd iod1; do
	read -r answered closed <"$T/burst.$n"
	if ((answered <= 16 && answered >= 1 && answered + closed == 50)); then
		pass "burst-$n"
	else
		fail "burst-$n" "$answered answered (408), $closed closed, of 50"
	fi
done
scrape end
assert_eq burst-still-up 4 "$(mx "$T/mgrd.end" twinfs_mgrd_iod_state state=up)"

e2e_end
