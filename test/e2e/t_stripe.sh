#!/usr/bin/env bash
# t_stripe.sh - twinfsctl getstripe/setstripe: defaults, directory policies
# inherited by new files, empty-file layouts, refusal on written files, and
# where the data really lands (subfiles listed on the iods).
. "$(dirname "$0")/lib.sh"
e2e_begin stripe
e2e_tmpdir T
CLUSTER=$TWINFS_CLUSTER
subfiles() { "$PY" "$E2E_DIR/twire.py" subfiles 127.0.0.1 $((TWINFS_PORT + $1)) "$CLUSTER"; }

cd "$M" || exit 1
head -c $((3 << 20)) /dev/urandom >"$T/data"

# defaults: 512 KiB units over every group (2)
cp "$T/data" plain
assert_eq getstripe-default-count 2 "$(ctl getstripe -c plain 2>&1)"
assert_eq getstripe-default-size 524288 "$(ctl getstripe -S plain 2>&1)"
out=$(ctl getstripe plain 2>&1)
[[ $out == *"lmm_stripe_count:  2"* && $out == *"lmm_stripe_size:   524288"* ]] &&
	pass getstripe-lfs-format || fail getstripe-lfs-format "$out"
raw=$(getfattr --only-values -n twinfs.layout plain 2>&1)
[[ $raw =~ ^stripe_size=524288\ stripe_count=2\ groups=[01],[01]\ max_file_size=[0-9]+$ ]] && pass layout-xattr || fail layout-xattr "'$raw'"

# a directory policy: 1 MiB units on group 1 only
mkdir d1
check setstripe-dir ctl setstripe -S 1M -c 1 -i 1 d1
assert_eq getstripe-dir "1 1048576 1" "$(ctl getstripe -c d1) $(ctl getstripe -S d1) $(ctl getstripe -i d1)"
cp "$T/data" d1/f
assert_eq inherit-count 1 "$(ctl getstripe -c d1/f)"
assert_eq inherit-size 1048576 "$(ctl getstripe -S d1/f)"
assert_eq inherit-group 1 "$(ctl getstripe -i d1/f)"
assert_same_file inherit-content "$T/data" d1/f
mkdir d1/sub && cp "$T/data" d1/sub/g
assert_eq inherit-subdir "1 1" "$(ctl getstripe -c d1/sub/g) $(ctl getstripe -i d1/sub/g)"
ino=$(stat -c %i d1/f)
on_g0=$( (subfiles 1; subfiles 2) | awk -v i="$ino" '$1 == i' | wc -l)
on_g1=$(subfiles 3 | awk -v i="$ino" '$1 == i { print $2, $3 }')
assert_eq placement-not-on-group0 0 "$on_g0"
assert_eq placement-on-group1 "0 $((3 << 20))" "$on_g1"

# an empty file takes a layout; 64 KiB over both groups starting at 1
check setstripe-create ctl setstripe -S 64K -c 2 -i 1 e1
assert_eq setstripe-created "0" "$(stat -c %s e1)"
assert_eq setstripe-file "2 65536 1" "$(ctl getstripe -c e1) $(ctl getstripe -S e1) $(ctl getstripe -i e1)"
cat "$T/data" >>e1
assert_same_file setstripe-file-content "$T/data" e1
ino=$(stat -c %i e1)
# 3 MiB in 64 KiB units over 2 columns: 1.5 MiB per column; column 0 on group 1
assert_eq placement-col0-group1 "0 $((3 << 19))" "$(subfiles 3 | awk -v i="$ino" '$1 == i { print $2, $3 }')"
assert_eq placement-col1-group0 "1 $((3 << 19))" "$(subfiles 1 | awk -v i="$ino" '$1 == i { print $2, $3 }')"
assert_eq placement-twin-copy "$(subfiles 3 | awk -v i="$ino" '$1 == i { print $2, $3 }')" \
	"$(subfiles 4 | awk -v i="$ino" '$1 == i { print $2, $3 }')"

# a written file refuses a new layout
if ctl setstripe -S 128K -c 1 e1 2>"$T/err"; then
	fail setstripe-written-refused "setstripe on a written file succeeded"
else
	pass setstripe-written-refused
fi
assert_eq setstripe-unchanged 65536 "$(ctl getstripe -S e1)"
if ctl setstripe -S 100K -c 1 d1 2>/dev/null; then
	fail setstripe-bad-size "100K accepted"
else
	pass setstripe-bad-size
fi
if ctl setstripe -S 1M -c 1 -i 7 d1 2>/dev/null; then
	fail setstripe-bad-group "group 7 of 2 accepted"
else
	pass setstripe-bad-group
fi
e2e_remount
assert_same_file setstripe-after-remount "$T/data" e1
assert_eq getstripe-after-remount "1 1048576 1" "$(ctl getstripe -c d1) $(ctl getstripe -S d1) $(ctl getstripe -i d1)"
e2e_verify
e2e_end
