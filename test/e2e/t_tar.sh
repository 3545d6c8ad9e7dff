#!/usr/bin/env bash
# t_tar.sh - tar x of a real source tree (files of /usr/include, up to
# 10,000 times TWINFS_TEST_SCALE), every file compared byte for byte and by
# metadata (tar --compare), then tar c of the mount compared to the original.
. "$(dirname "$0")/lib.sh"
e2e_begin tar
e2e_tmpdir T

N=$(scale 10000)
(cd / && find usr/include \( -type f -o -type l \) | sort | head -n "$N") >"$T/list"
tar -C / -cf "$T/src.tar" -T "$T/list" 2>/dev/null
nfiles=$(wc -l <"$T/list")
mkdir "$T/ref" && tar -C "$T/ref" -xf "$T/src.tar"
echo "# tar: $nfiles files, $(du -sh "$T/src.tar" | cut -f1)"

mkdir "$M/x"
check tar-x tar -C "$M/x" -xf "$T/src.tar"
check tar-compare-metadata tar -C "$M/x" --compare -f "$T/src.tar"
check tar-diff-r diff -r --no-dereference "$T/ref" "$M/x"
(cd "$T/ref" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/ref.sha"
e2e_remount || fail tar-remount "remount failed"
(cd "$M/x" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/mnt.sha"
if cmp -s "$T/ref.sha" "$T/mnt.sha"; then
	pass tar-sha256-every-file
else
	fail tar-sha256-every-file "$(diff "$T/ref.sha" "$T/mnt.sha" | head -n 4 | tr '\n' ' ')"
fi
assert_eq tar-file-count "$(cd "$T/ref" && find . | wc -l)" "$(cd "$M/x" && find . | wc -l)"

check tar-c tar -C "$M/x" -cf "$T/back.tar" .
mkdir "$T/back" && tar -C "$T/back" -xf "$T/back.tar"
check tar-c-diff-r diff -r --no-dereference "$T/ref" "$T/back"
check tar-rm-rf rm -rf "$M/x"
e2e_verify
e2e_end
