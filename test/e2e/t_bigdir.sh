#!/usr/bin/env bash
# t_bigdir.sh - 10,000 entries (times TWINFS_TEST_SCALE) in one directory:
# create, list (every name exactly once), stat, rename some, delete all.
. "$(dirname "$0")/lib.sh"
e2e_begin bigdir

N=$(scale 10000)
mkdir "$M/big" && cd "$M/big" || exit 1
"$PY" - "$N" <<'EOF2' && pass bigdir-create || fail bigdir-create "creating $N files"
import os, sys
n = int(sys.argv[1])
for i in range(n):
    fd = os.open("entry-%06d" % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    if i % 100 == 0:
        os.write(fd, b"%d\n" % i)
    os.close(fd)
EOF2
assert_eq bigdir-ls-count "$N" "$(ls | wc -l)"
assert_eq bigdir-ls-unique "$N" "$(ls | sort -u | wc -l)"
assert_eq bigdir-ls-l-count "$N" "$(ls -l | grep -c '^-')"
"$PY" - "$N" <<'EOF2' && pass bigdir-names || fail bigdir-names "listing differs from what was created"
import os, sys
n = int(sys.argv[1])
want = {"entry-%06d" % i for i in range(n)}
got = os.listdir(".")
assert len(got) == len(want) and set(got) == want
EOF2
# readdir while the directory changes: every untouched entry is seen once
"$PY" - "$N" <<'EOF2' && pass bigdir-readdir-while-changing || fail bigdir-readdir-while-changing "entries lost or duplicated"
import os, sys
n = int(sys.argv[1])
seen = []
seen_set = set()
with os.scandir(".") as it:
    for k, e in enumerate(it):
        seen.append(e.name)
        seen_set.add(e.name)
        if k == n // 3:
            for j in range(0, n, 7):           # rename some, add some
                nm = "entry-%06d" % j
                if nm not in seen_set:
                    continue
                os.rename(nm, "moved-%06d" % j)
            for j in range(50):
                open("added-%d" % j, "w").close()
untouched = {"entry-%06d" % i for i in range(n) if i % 7 != 0}
from collections import Counter
dups = [x for x, c in Counter(seen).items() if c > 1]
assert not dups, dups[:5]
missing = untouched - set(seen)
assert not missing, sorted(missing)[:5]
EOF2
assert_eq bigdir-stat "1000" "$(cat entry-001000 2>/dev/null || cat moved-001000 2>/dev/null)"
cd "$M" && check bigdir-rm-rf rm -rf "$M/big"
assert_eq bigdir-gone no "$([[ -e $M/big ]] && echo yes || echo no)"
e2e_verify
e2e_end
