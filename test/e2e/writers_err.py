#!/usr/bin/env python3
"""writers_err.py FILE: two handles write 16 x 4 KiB each to FILE (whose
group is down: the writes cannot land), then close; prints what each saw,
"a=RESULT b=RESULT", RESULT one of write:ERRNO, close:ERRNO, no-error.
Shared by t_wbehind.sh and t_wbcache.sh: each writer's close must fail."""
import errno
import os
import sys


def code(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def main():
    a = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
    b = os.open(sys.argv[1], os.O_WRONLY)
    res = {}
    for name, fd, base in (("a", a, 0), ("b", b, 1 << 20)):
        try:
            for i in range(16):
                os.pwrite(fd, b"w" * 4096, base + i * 4096)
        except OSError as e:
            res[name] = "write:" + code(e)
    for name, fd in (("a", a), ("b", b)):
        try:
            os.close(fd)
            res.setdefault(name, "no-error")
        except OSError as e:
            res.setdefault(name, "close:" + code(e))
    print("a=%s b=%s" % (res["a"], res["b"]))


if __name__ == "__main__":
    main()
