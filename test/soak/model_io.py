#!/usr/bin/env python3
"""model_io.py DIR SECONDS SEED [STATE] - a file workload that knows what
every file must hold, for the chaos soak (chaos.sh).

Keeps FILES files in DIR and an in-memory model of each one's bytes.  Each
step picks one operation on a random file: pwrite of 1 B-1 MiB at a random
offset (crossing stripe units), append, truncate (shorter or longer),
rename over another file, unlink and create, fallocate punch.  An operation
enters the model only when it and the fsync (or the rename, unlink, close)
after it returned: that is the acknowledgement.  Every VERIFY_EVERY seconds,
and at the end, every file is read back (os.pread) and compared with the
model byte for byte.

An operation that fails is reported ("ERR op file errno") and makes that
file "unsure": either the old or the new content may be there, so the file
is checked against both and then rewritten whole.  With at most one twin of
a group failed at a time, no operation may fail: chaos.sh counts these lines.

Prints "STEPS n ERRS n BAD n" at the end; BAD counts files whose content
was neither what the model says nor (for unsure files) the other candidate.
Exit status 0 only if BAD is 0.  STATE (optional): where the final model is
written (JSON: file -> sha256), for a check after a remount (--check).
"""
import errno
import hashlib
import json
import os
import random
import sys
import time

FILES = 24
MAX_SIZE = 6 << 20
VERIFY_EVERY = 20.0


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


class Model:
    def __init__(self, d, rng):
        self.d = d
        self.rng = rng
        self.data = {}       # name -> bytearray (acknowledged content)
        self.alt = {}        # name -> bytes: the other possible content
        self.steps = self.errs = self.bad = 0

    def path(self, name):
        return os.path.join(self.d, name)

    def log_err(self, op, name, e):
        self.errs += 1
        print("ERR %s %s %s %s" % (time.strftime("%H:%M:%S"), op, name,
                                   ename(e)), flush=True)

    def payload(self, n):
        return self.rng.randbytes(n)

    # ------------------------------------------------------------ ops
    def op_create(self, name):
        body = self.payload(self.rng.randrange(0, 2 << 20))
        tmp = self.path(name + ".new")
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, self.path(name))
        except OSError as e:
            self.log_err("create", name, e)
            if name in self.data:
                self.alt[name] = body
            return
        self.data[name] = bytearray(body)
        self.alt.pop(name, None)

    def op_pwrite(self, name):
        cur = self.data[name]
        n = self.rng.choice((1, 100, 4096, 65536, 300000, 1 << 20))
        off = self.rng.randrange(0, max(1, min(len(cur) + 65536,
                                               MAX_SIZE - n)))
        body = self.payload(n)
        new = bytearray(cur)
        if off > len(new):
            new.extend(b"\0" * (off - len(new)))
        new[off:off + n] = body
        self.apply(name, "pwrite", lambda fd: os.pwrite(fd, body, off), new)

    def op_append(self, name):
        body = self.payload(self.rng.randrange(1, 200000))
        new = self.data[name] + body
        if len(new) > MAX_SIZE:
            return
        self.apply(name, "append", lambda fd: os.write(fd, body), new,
                   os.O_APPEND)

    def op_truncate(self, name):
        size = self.rng.randrange(0, MAX_SIZE // 2)
        new = bytearray(self.data[name][:size])
        new.extend(b"\0" * (size - len(new)))
        self.apply(name, "truncate", lambda fd: os.ftruncate(fd, size), new)

    def op_punch(self, name):
        cur = self.data[name]
        if len(cur) < 8192:
            return
        off = self.rng.randrange(0, len(cur) - 4096)
        n = self.rng.randrange(1, len(cur) - off)
        new = bytearray(cur)
        new[off:off + n] = b"\0" * n
        # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE through ctypes.
        self.apply(name, "punch", lambda fd: punch(fd, off, n), new)

    def op_rename_over(self, name):
        other = self.rng.choice(sorted(self.data))
        if other == name:
            return
        try:
            os.rename(self.path(name), self.path(other))
        except OSError as e:
            self.log_err("rename", name, e)
            self.data.pop(name, None)   # unknown which name holds what
            self.data.pop(other, None)
            self.forget(name)
            self.forget(other)
            return
        self.data[other] = self.data.pop(name)
        self.alt.pop(other, None)
        self.alt.pop(name, None)

    def op_unlink(self, name):
        try:
            os.unlink(self.path(name))
        except OSError as e:
            self.log_err("unlink", name, e)
            self.forget(name)
            return
        del self.data[name]
        self.alt.pop(name, None)

    def forget(self, name):
        """Its state is unknown: remove it, whatever it holds."""
        for _ in range(50):
            try:
                os.unlink(self.path(name))
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(1)

    def apply(self, name, op, fn, new, flags=0):
        try:
            fd = os.open(self.path(name), os.O_WRONLY | flags)
            try:
                fn(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            self.log_err(op, name, e)
            self.alt[name] = bytes(new)
            return
        self.data[name] = new
        self.alt.pop(name, None)

    # --------------------------------------------------------- verify
    def read(self, name):
        with open(self.path(name), "rb", buffering=0) as f:
            out = bytearray()
            while True:
                b = f.read(4 << 20)
                if not b:
                    return bytes(out)
                out += b

    def verify(self, final=False):
        for name in sorted(self.data):
            try:
                got = self.read(name)
            except OSError as e:
                self.bad += 1
                print("BAD %s read %s" % (name, ename(e)), flush=True)
                continue
            want = bytes(self.data[name])
            if got == want:
                self.alt.pop(name, None)
                continue
            if name in self.alt and got == self.alt[name]:
                # The failed operation landed after all: take it.
                self.data[name] = bytearray(got)
                del self.alt[name]
                continue
            self.bad += 1
            first = next((i for i in range(min(len(got), len(want)))
                          if got[i] != want[i]), min(len(got), len(want)))
            print("BAD %s size %d want %d first difference at %d%s" %
                  (name, len(got), len(want), first,
                   " (unsure)" if name in self.alt else ""), flush=True)
            self.data[name] = bytearray(got)   # report it once
            self.alt.pop(name, None)

    # (share of the steps, operation) on a file that exists.
    MIX = ((0.45, "op_pwrite"), (0.15, "op_append"), (0.10, "op_truncate"),
           (0.08, "op_punch"), (0.08, "op_create"), (0.07, "op_rename_over"),
           (0.07, "op_unlink"))

    def step(self):
        self.steps += 1
        name = self.rng.choice(["f%02d" % i for i in range(FILES)])
        # Missing, or unsure (settle it by a whole rewrite): create it.
        if name not in self.data or name in self.alt:
            self.op_create(name)
            return
        r = self.rng.random()
        for share, op in self.MIX:
            r -= share
            if r < 0:
                break
        getattr(self, op)(name)


_libc = None


def punch(fd, off, n):
    global _libc
    import ctypes
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int,
                                    ctypes.c_long, ctypes.c_long)
    if _libc.fallocate(fd, 0x02 | 0x01, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def main(argv):
    if len(argv) >= 3 and argv[1] == "--check":
        d, state = argv[2], json.load(open(argv[3]))
        bad = 0
        for name, want in sorted(state.items()):
            try:
                got = hashlib.sha256(open(os.path.join(d, name), "rb")
                                     .read()).hexdigest()
            except OSError as e:
                got = ename(e)
            if got != want:
                bad += 1
                print("BAD %s after remount" % name)
        print("CHECKED %d BAD %d" % (len(state), bad))
        return 1 if bad else 0
    d, seconds, seed = argv[1], float(argv[2]), int(argv[3])
    os.makedirs(d, exist_ok=True)
    m = Model(d, random.Random(seed))
    t_end = time.time() + seconds
    t_verify = time.time() + VERIFY_EVERY
    while time.time() < t_end:
        m.step()
        if time.time() >= t_verify:
            m.verify()
            t_verify = time.time() + VERIFY_EVERY
    m.verify(final=True)
    if len(argv) > 4:
        with open(argv[4], "w") as f:
            json.dump({n: hashlib.sha256(bytes(b)).hexdigest()
                       for n, b in m.data.items()}, f)
    print("STEPS %d ERRS %d BAD %d" % (m.steps, m.errs, m.bad), flush=True)
    return 1 if m.bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
