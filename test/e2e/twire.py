#!/usr/bin/env python3
"""twire.py - a tiny, independent TwinFS wire client for the e2e tests.

Frames are built by hand from proto/FORMAT.md (32-byte little-endian header,
protobuf body, bulk data) and protobuf bodies are hand-encoded, so the tests
do not share a single line of code with the implementation they check.

    twire.py hostile HOST PORT CLUSTER NAME [LOGFILE]
        send malformed frames; after each, the daemon must close that
        connection and still answer HELLO + PING on a fresh one.  Prints
        "PASS NAME-case" / "FAIL NAME-case: reason" lines.
    twire.py ident HOST MGRD_PORT CLUSTER KEYFILE SECRET IOD_PORTS
        client identities and tickets (proto/FORMAT.md "Client
        identities", "Tickets"): a client HELLO without proof is refused
        -EACCES at mgrd and at every iod (IOD_PORTS: comma-separated); a
        wrong key and an unknown name are refused at AUTH; the identity
        of KEYFILE is served and gets a ticket whose key it unwraps; the
        ticket admits it at an iod for its own session only; a forged
        ticket, one sealed with another secret and an expired one are
        refused.  Prints PASS/FAIL lines.
    twire.py subtree HOST MGRD_PORT CLUSTER KEYFILE SUBDIR INO
        as KEYFILE's identity, mount SUBDIR (Hello.subdir): the reply
        names its root inode; GETATTR of that root is served, GETATTR of
        INO (outside the subtree) is refused -EACCES.
    twire.py subfiles HOST PORT CLUSTER
        list an iod's subfiles: "ino column size blocks" per line.
    twire.py ping HOST PORT CLUSTER
        HELLO + PING; exit 0 if answered.
    twire.py standby HOST PORT CLUSTER ACTIVE SECONDS
        play an mgrd that is not the active (proto/FORMAT.md "mgrd pair")
        for SECONDS: listen on HOST:PORT and refuse every HELLO with
        -EREMOTE, the refusal "mgrd 2 is standby; the active is mgrd 1 at
        ACTIVE" and active_addr ACTIVE, then close.  Prints "hellos N".
    twire.py mgrd-status HOST PORT CLUSTER
        MSG_MGRD_STATUS (admin): prints "id N role R term T applied A
        lag L peer P" (proto/FORMAT.md "mgrd pair").
    twire.py mgrd-hello HOST PORT CLUSTER ROLE
        a HELLO of ROLE (1 client, 2 iod, 3 admin): prints "status S
        mgrd_id I active_addr A refusal R" of its answer.
    twire.py locks HOST PORT CLUSTER
        the lock messages (41-44) as proto/FORMAT.md "Locks" describes
        them, from two client sessions: malformed requests, grant, denial
        with the holder, F_GETLK, a parked wait answered -EINTR on cancel
        and 0 on unlock.  Needs an mgrd outside its lock grace.
    twire.py diverge HOST IOD_PORT CLUSTER TWIN_ID INO COLUMN OFFSET LAYOUT
        make one twin differ from the other, as a twin that missed a write
        would: speak as iod TWIN_ID (the target's twin) and send the
        target a forwarded WRITE of 64 bytes of 0xA5 at subfile OFFSET
        (epoch from the target's HELLO reply, trunc_gen 0).  LAYOUT is the
        file's "stripe_size=S stripe_count=C groups=a,b" (twinfs.layout).
    twire.py fenced HOST PORT_A CLUSTER ID_A PORT_B ID_B SESSION INO LAYOUT
        fencing (proto/FORMAT.md "Fencing"): a WRITE of column 0 of INO
        naming client SESSION, which mgrd has fenced, sent to both twins
        A and B of the column's group: the primary must answer
        -EKEYEXPIRED and the other twin -EINVAL (not the primary); the
        same WRITE forwarded (speaking as each one's twin) must be
        refused -EKEYEXPIRED by both.  Prints PASS/FAIL lines.
    twire.py write HOST PORT CLUSTER INO COLUMN OFFSET LAYOUT SESSION
        one client WRITE of 64 bytes of 0x5a at subfile OFFSET of column
        COLUMN of INO (trunc_gen 0, epoch from the iod's HELLO reply),
        naming client SESSION, sent to the iod at PORT; prints "status N"
        (the reply's negative errno).  A client that never sends it again,
        whatever the answer (the stale-forward drills).
    twire.py space HOST MGRD_PORT IOD_PORT CLUSTER FILE_INO
        invalid FALLOCATE, SEEK (iod), APPEND_RESERVE and SETATTR size
        reports (mgrd; FILE_INO: a regular file's inode) get their exact
        negative errno and the daemons go on serving.
    twire.py sessions HOST MGRD_PORT CLUSTER FILE_INO
        a request acts only for the session its connection holds: client
        A opens FILE_INO (a regular file); client B's RELEASE of that
        handle in the name of A's session is refused -EPERM and A's own
        RELEASE then succeeds; a GETATTR naming a session that does not
        exist is served.  Prints PASS/FAIL lines.
    twire.py names HOST MGRD_PORT CLUSTER PARENT NAME FILE_INO
        send mgrd a MKDIR of NAME in directory PARENT and a LINK of
        FILE_INO to that name, as a client without a session (as a
        client whose kernel had no entry for the name would), and print
        "mkdir STATUS" and "link STATUS" (the replies' negative errno).
    twire.py perm HOST MGRD_PORT CLUSTER PARENT UID
        mgrd's own permission checks (proto/FORMAT.md "Permissions"),
        around any kernel: in directory PARENT, as root, make a 0755
        directory with a 0644 root file, a sticky 1777 directory with a
        file of uid UID+1, and a 0770 directory of group UID+2; then, as
        UID (Ctx uid/gid), SETATTR chown to root, SETATTR mode setuid on
        root's file, UNLINK in the 0755 directory, UNLINK of UID+1's file
        in the sticky one, OPEN for writing of root's file and SETXATTR
        trusted.x must be refused with EPERM or EACCES as ext4 would,
        while what UID may do succeeds (a create through a supplementary
        group in Ctx.groups among them), and the same requests as root
        succeed.  Prints PASS/FAIL lines.
    twire.py caps HOST MGRD_PORT CLUSTER FILE_INO OTHER_INO LIFETIME_S KEYFILE
        capabilities on a cluster with a secret (proto/FORMAT.md
        "Capabilities"): as a client session, OPEN FILE_INO (a regular
        file of at least 64 bytes, both twins of column 0 up) for
        writing and for reading and fetch a read cap with MSG_CAP; then
        at the iods of column 0: READ and WRITE with the right caps are
        served; without a cap, with FILE_INO's cap on OTHER_INO, with a
        read cap to WRITE, with a forged MAC, on a connection claiming
        another session, they are refused (-EKEYREJECTED for none,
        -EACCES for the rest); a WRITE naming a huge trunc_gen is
        refused and a normal one afterwards succeeds (the file is not
        wedged); after LIFETIME_S + the 5 s skew the cap is refused
        -EKEYREJECTED.  The first 64 bytes of FILE_INO end up 0x5a.
        Prints PASS/FAIL lines.
"""
import errno
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC = 0x53465754


def _wire_version():
    """WIRE_VERSION of proto/wire.h: one number to bump, not two."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "proto", "wire.h")
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 3 and w[0] == "#define" and w[1] == "WIRE_VERSION":
                return int(w[2].rstrip("uU"))
    raise SystemExit("twire.py: no WIRE_VERSION in " + path)


VERSION = _wire_version()
F_REPLY = 1
HDR = struct.Struct("<IHHIiQII")  # magic version type flags status req_id msg_len data_len
assert HDR.size == 32

MSG_HELLO, MSG_PING, MSG_GET_MAP, MSG_SUBFILES = 1, 2, 30, 55
MSG_WRITE = 50
MSG_LOCK, MSG_GETLK, MSG_UNLOCK_ALL, MSG_LOCK_CANCEL = 41, 42, 43, 44
ROLE_CLIENT, ROLE_IOD, ROLE_ADMIN = 1, 2, 3
MAX_MSG = 1 << 20
MAX_DATA = 8 << 20


# ----------------------------------------------------------- protobuf bits

def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(no, v):
    return varint(no << 3) + varint(v)


def f_bytes(no, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(no << 3 | 2) + varint(len(b)) + b


def decode(buf):
    """Decode a protobuf message into {field: [values]} (bytes for
    length-delimited fields, ints otherwise)."""
    out, i = {}, 0

    def rv():
        nonlocal i
        shift = v = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    while i < len(buf):
        key = rv()
        no, wt = key >> 3, key & 7
        if wt == 0:
            v = rv()
        elif wt == 1:
            v = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wt == 2:
            n = rv()
            v = bytes(buf[i:i + n])
            i += n
        elif wt == 5:
            v = struct.unpack_from("<I", buf, i)[0]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(no, []).append(v)
    return out


def hello_body(cluster, role=ROLE_ADMIN):
    return (f_bytes(1, cluster) + f_varint(2, VERSION) + f_varint(3, role) +
            f_varint(4, int.from_bytes(os.urandom(8), "little")) +
            f_bytes(7, "twire"))


# ------------------------------------------------------------------ frames

def frame(mtype, body=b"", data=b"", req_id=1, flags=0, status=0,
          magic=MAGIC, version=VERSION, msg_len=None, data_len=None):
    return HDR.pack(magic, version, mtype, flags, status, req_id,
                    len(body) if msg_len is None else msg_len,
                    len(data) if data_len is None else data_len) + body + data


class Conn:
    def __init__(self, host, port, timeout=5.0):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.settimeout(timeout)
        self.local = "%s:%d" % self.s.getsockname()[:2]

    sealing = None   # (mode, tx AESGCM, rx AESGCM) after AUTH chose one

    def seal(self, mode, key_tx, key_rx):
        """Seal every later frame (proto/FORMAT.md "Sealed frames"): we are
        the connecting side, so we send with direction 1."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        self.sealing = (mode, AESGCM(key_tx), AESGCM(key_rx))
        self.n_tx = self.n_rx = 0

    def _nonce(self, direction, n):
        return struct.pack("<IQ", direction, n)

    def send(self, b):
        if self.sealing:
            mode, tx, _ = self.sealing
            nonce = self._nonce(1, self.n_tx)
            self.n_tx += 1
            if mode == 2:        # integrity: GMAC over the whole frame
                b = b + tx.encrypt(nonce, b"", b)
            else:                # encrypt: header authenticated, rest hidden
                b = b[:HDR.size] + tx.encrypt(nonce, b[HDR.size:], b[:HDR.size])
        self.s.sendall(b)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise EOFError("closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return buf

    def recv_frame(self):
        h = HDR.unpack(self.recv_exact(HDR.size))
        magic, version, mtype, flags, status, req_id, mlen, dlen = h
        if magic != MAGIC or mlen > MAX_MSG or dlen > MAX_DATA:
            raise ValueError("bad reply header %r" % (h,))
        body = self.recv_exact(mlen)
        data = self.recv_exact(dlen)
        if self.sealing:
            mode, _, rx = self.sealing
            tag = self.recv_exact(16)
            nonce = self._nonce(2, self.n_rx)
            self.n_rx += 1
            raw = HDR.pack(*h)
            if mode == 2:
                rx.decrypt(nonce, tag, raw + body + data)   # raises if bad
            else:
                plain = rx.decrypt(nonce, body + data + tag, raw)
                body, data = plain[:mlen], plain[mlen:]
        return h, body, data

    def call(self, mtype, body=b"", req_id=None):
        req_id = req_id or int.from_bytes(os.urandom(4), "little") + 1
        self.send(frame(mtype, body, req_id=req_id))
        while True:
            h, rbody, data = self.recv_frame()
            if not h[3] & F_REPLY:
                continue  # a push (MAP_UPDATE): ignore
            if h[5] != req_id:
                raise ValueError("reply for req_id %d, expected %d" % (h[5], req_id))
            if h[2] != mtype:
                raise ValueError("reply type %d, expected %d" % (h[2], mtype))
            return h[4], decode(rbody), data

    def closed_by_peer(self, wait=5.0):
        """True if the peer closes (EOF or reset) within `wait` seconds,
        discarding anything it sends first (e.g. an error reply)."""
        deadline = time.time() + wait
        try:
            while time.time() < deadline:
                self.s.settimeout(max(0.05, deadline - time.time()))
                if not self.s.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def hello_ping(host, port, cluster):
    c = Conn(host, port)
    try:
        st, hr, _ = c.call(MSG_HELLO, hello_body(cluster))
        if st != 0:
            return "HELLO answered status %d" % st
        st, _, _ = c.call(MSG_PING, f_varint(1, 0))
        if st != 0:
            return "PING answered status %d" % st
        return None
    finally:
        c.close()


# ----------------------------------------------------------------- hostile

def hostile(host, port, cluster, name, logfile=None):
    fails = 0
    hello = hello_body(cluster)

    def after_hello(payload):
        # A valid HELLO first, then the bad bytes.
        def go(c):
            st, _, _ = c.call(MSG_HELLO, hello)
            if st != 0:
                raise RuntimeError("HELLO refused: %d" % st)
            c.send(payload)
        return go

    def raw(payload, shut=False):
        def go(c):
            c.send(payload)
            if shut:
                c.s.shutdown(socket.SHUT_WR)
        return go

    garbage = b"\xff" * 24 + b"\x07\x08\x0f"
    cases = [
        ("bad-magic", raw(frame(MSG_HELLO, hello, magic=0xDEADBEEF))),
        ("bad-version", raw(frame(MSG_HELLO, hello, version=99))),
        ("bad-flags", raw(frame(MSG_HELLO, hello, flags=0x80))),
        ("request-with-status", raw(frame(MSG_HELLO, hello, status=-5))),
        ("oversized-msg-len", raw(frame(MSG_HELLO, b"", msg_len=0xFFFFFFF0))),
        ("oversized-data-len", raw(frame(MSG_HELLO, b"", data_len=0xFFFFFFFF))),
        ("msg-len-just-over", raw(frame(MSG_HELLO, b"", msg_len=MAX_MSG + 1))),
        ("unknown-type", raw(frame(999, hello))),
        ("type-zero", raw(frame(0, hello))),
        ("truncated-header", raw(frame(MSG_HELLO, hello)[:17], shut=True)),
        ("truncated-body", raw(frame(MSG_HELLO, hello)[:32 + 5], shut=True)),
        ("truncated-data", raw(frame(MSG_HELLO, hello, data_len=4096) + b"x" * 10, shut=True)),
        ("garbage-protobuf", raw(frame(MSG_HELLO, garbage))),
        ("garbage-bytes", raw(os.urandom(4096))),
        ("not-hello-first", raw(frame(MSG_GET_MAP, b""))),
        ("wrong-cluster", raw(frame(MSG_HELLO, hello_body("no-such-cluster-x")))),
        ("after-hello-bad-magic", after_hello(frame(MSG_PING, b"", magic=0x12345678))),
        ("after-hello-unknown-type", after_hello(frame(4242, b""))),
        ("after-hello-garbage-protobuf", after_hello(frame(MSG_PING, garbage))),
        ("after-hello-oversized", after_hello(frame(MSG_PING, b"", msg_len=0x7FFFFFFF))),
        ("after-hello-truncated", after_hello(frame(MSG_PING, f_varint(1, 1 << 40))[:35])),
    ]
    for case, action in cases:
        label = "%s-%s" % (name, case)
        if logfile and case == "garbage-protobuf":
            # Daemons rate-limit repeated log lines (5 s per call site):
            # wait so this one is printed, not counted.
            time.sleep(5.2)
        try:
            c = Conn(host, port)
            peer = c.local
            try:
                action(c)
                if case == "after-hello-truncated":
                    c.s.shutdown(socket.SHUT_WR)
                closed = c.closed_by_peer()
            finally:
                c.close()
            err = hello_ping(host, port, cluster)
            if not closed:
                print("FAIL %s: connection %s not closed by the daemon" % (label, peer))
                fails += 1
            elif err:
                print("FAIL %s: afterwards a fresh connection failed: %s" % (label, err))
                fails += 1
            else:
                print("PASS %s" % label)
            if logfile and case in ("bad-magic", "garbage-protobuf"):
                time.sleep(0.3)
                port_s = ":" + peer.split(":")[1]
                with open(logfile, errors="replace") as f:
                    if port_s in f.read():
                        print("PASS %s-logged" % label)
                    else:
                        print("FAIL %s-logged: no log line naming %s" % (label, peer))
                        fails += 1
        except Exception as e:  # noqa: BLE001 - report, keep going
            print("FAIL %s: %s: %s" % (label, type(e).__name__, e))
            fails += 1

    # Many idle half-open connections must not starve anyone (slowloris).
    label = "%s-idle-connections" % name
    conns = []
    try:
        for _ in range(64):
            c = Conn(host, port)
            c.send(frame(MSG_HELLO, hello)[:10])
            conns.append(c)
        t0 = time.time()
        err = hello_ping(host, port, cluster)
        if err:
            print("FAIL %s: %s" % (label, err))
            fails += 1
        elif time.time() - t0 > 2:
            print("FAIL %s: HELLO+PING took %.1f s" % (label, time.time() - t0))
            fails += 1
        else:
            print("PASS %s" % label)
    except Exception as e:  # noqa: BLE001
        print("FAIL %s: %s: %s" % (label, type(e).__name__, e))
        fails += 1
    finally:
        for c in conns:
            c.close()

    # Pipelining: many requests in one write, replies matched by req_id.
    label = "%s-pipelined" % name
    try:
        c = Conn(host, port)
        st, _, _ = c.call(MSG_HELLO, hello)
        c.send(b"".join(frame(MSG_PING, f_varint(1, 0), req_id=1000 + i) for i in range(100)))
        got = set()
        for _ in range(100):
            h, _, _ = c.recv_frame()
            if h[3] & F_REPLY and h[4] == 0:
                got.add(h[5])
        c.close()
        if got == set(range(1000, 1100)):
            print("PASS %s" % label)
        else:
            print("FAIL %s: %d of 100 replies matched" % (label, len(got)))
            fails += 1
    except Exception as e:  # noqa: BLE001
        print("FAIL %s: %s: %s" % (label, type(e).__name__, e))
        fails += 1
    return fails


# ------------------------------------------------------------------- locks

def lock_body(ino, ltype, start, end, owner, kind=0, wait=False, waiter=0):
    return (f_varint(1, ino) + f_varint(2, kind) + f_varint(3, ltype) +
            f_varint(4, start) + f_varint(5, end) + f_varint(6, owner) +
            f_varint(7, owner * 10) + f_varint(8, 4000 + owner) +
            (f_varint(9, 1) + f_varint(10, waiter) if wait else b""))


def replies(c, want, wait):
    """Collect replies {req_id: status} for the req_ids in `want` for up to
    `wait` seconds."""
    got, deadline = {}, time.time() + wait
    try:
        while set(want) - set(got) and time.time() < deadline:
            c.s.settimeout(max(0.05, deadline - time.time()))
            h, _, _ = c.recv_frame()
            if h[3] & F_REPLY and h[5] in want:
                got[h[5]] = h[4]
    except socket.timeout:
        pass
    c.s.settimeout(5.0)
    return got


def locks(host, port, cluster):
    fails = 0
    eof = (1 << 64) - 1
    ino = 4242424242

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS wire-%s" % name) if ok else ("FAIL wire-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    admin = Conn(host, port)
    admin.call(MSG_HELLO, hello_body(cluster, ROLE_ADMIN))
    st, _, _ = admin.call(MSG_LOCK, lock_body(ino, 2, 0, 9, 1))
    check("admin-without-session", st == -37, "status %d, want -ENOLCK" % st)
    admin.close()
    a, b = Conn(host, port), Conn(host, port)
    for c in (a, b):
        st, rep, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_CLIENT))
        if st != 0 or not rep.get(2, [0])[0]:
            raise SystemExit("client HELLO refused or no session: %d" % st)
    st, _, _ = a.call(MSG_LOCK, lock_body(ino, 2, 0, 9, 1, kind=7))
    check("bad-kind", st == -22, "status %d" % st)
    st, _, _ = a.call(MSG_LOCK, lock_body(ino, 2, 9, 0, 1))
    check("start-after-end", st == -22, "status %d" % st)
    st, _, _ = a.call(MSG_GETLK, lock_body(ino, 0, 0, 9, 1))
    check("getlk-unlck", st == -22, "status %d" % st)
    st, rep, _ = a.call(MSG_LOCK, lock_body(ino, 2, 0, 9, 1))
    check("grant", st == 0 and not rep.get(6), "status %d %r" % (st, rep))
    st, rep, _ = b.call(MSG_LOCK, lock_body(ino, 1, 5, 5, 1))
    check("denied-with-holder", st == 0 and rep.get(6) == [1] and rep.get(1) == [2]
          and rep.get(2, [0]) == [0] and rep.get(3) == [9] and rep.get(4) == [4001],
          "status %d %r" % (st, rep))
    st, rep, _ = b.call(MSG_GETLK, lock_body(ino, 1, 0, eof, 2))
    check("getlk-other-session", st == 0 and rep.get(1) == [2] and rep.get(3) == [9]
          and not rep.get(5), "status %d %r" % (st, rep))
    st, rep, _ = a.call(MSG_GETLK, lock_body(ino, 2, 0, eof, 2))
    check("getlk-same-session", st == 0 and rep.get(5) == [1], "status %d %r" % (st, rep))
    st, rep, _ = b.call(MSG_GETLK, lock_body(ino, 2, 10, eof, 2))
    check("getlk-none", st == 0 and not rep.get(1), "status %d %r" % (st, rep))
    # a parked wait, cancelled
    b.send(frame(MSG_LOCK, lock_body(ino, 2, 0, 0, 1, wait=True, waiter=7), req_id=70))
    got = replies(b, [70], 1.0)
    check("wait-parked", not got, "answered %r" % got)
    b.send(frame(MSG_LOCK_CANCEL, f_varint(1, 7), req_id=71))
    got = replies(b, [70, 71], 5.0)
    check("cancel-answers-eintr", got == {70: -4, 71: 0}, "got %r" % got)
    # a parked wait, granted by the holder's UNLOCK_ALL (its flush)
    b.send(frame(MSG_LOCK, lock_body(ino, 2, 0, 0, 1, wait=True, waiter=8), req_id=80))
    check("wait-parked-again", not replies(b, [80], 1.0), "answered")
    st, _, _ = a.call(MSG_UNLOCK_ALL, f_varint(1, ino) + f_varint(2, 1))
    got = replies(b, [80], 5.0)
    check("unlock-grants-waiter", st == 0 and got == {80: 0}, "status %d got %r" % (st, got))
    st, rep, _ = a.call(MSG_LOCK, lock_body(ino, 1, 0, 0, 1))
    check("new-holder-seen", st == 0 and rep.get(6) == [1] and rep.get(4) == [4001],
          "status %d %r" % (st, rep))
    # releasing by file (b's owner 1 used file 10)
    st, _, _ = b.call(MSG_UNLOCK_ALL, f_varint(1, ino) + f_varint(3, 10) + f_varint(4, 1))
    st2, rep, _ = a.call(MSG_LOCK, lock_body(ino, 2, 0, eof, 1))
    check("release-by-file", st == 0 and st2 == 0 and not rep.get(6), "status %d/%d %r" % (st, st2, rep))
    a.call(MSG_LOCK, lock_body(ino, 0, 0, eof, 1))
    a.close()
    b.close()
    return fails


def subfiles(host, port, cluster):
    c = Conn(host, port, timeout=30)
    st, _, _ = c.call(MSG_HELLO, hello_body(cluster))
    if st != 0:
        raise SystemExit("HELLO refused: %d" % st)
    after_ino = after_col = 0
    while True:
        st, rep, _ = c.call(MSG_SUBFILES, f_varint(1, after_ino) + f_varint(2, after_col) + f_varint(3, 1000))
        if st != 0:
            raise SystemExit("SUBFILES failed: %d" % st)
        ents = [decode(b) for b in rep.get(1, [])]
        for e in ents:
            g = lambda k: e.get(k, [0])[0]  # noqa: E731
            print(g(1), g(2), g(3), g(4))
        if ents:
            after_ino, after_col = ents[-1].get(1, [0])[0], ents[-1].get(2, [0])[0]
        if rep.get(2, [0])[0] or not ents:
            break
    c.close()


def diverge(host, port, cluster, twin_id, ino, column, offset, layout):
    lay = layout_body(layout)
    c = Conn(host, port)
    st, hr, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_IOD) +
                       f_varint(5, twin_id))
    if st != 0:
        raise SystemExit("HELLO as iod %d refused: %d" % (twin_id, st))
    epoch = hr.get(4, [0])[0]
    body = (f_varint(1, ino) + f_varint(2, column) + f_varint(3, offset) +
            f_varint(4, 0) + f_varint(5, epoch) + f_varint(6, 1) +
            f_bytes(8, lay))
    req_id = 7
    c.send(frame(MSG_WRITE, body, b"\xa5" * 64, req_id=req_id))
    while True:
        h, _, _ = c.recv_frame()
        if h[3] & F_REPLY and h[5] == req_id:
            break
    c.close()
    if h[4] != 0:
        raise SystemExit("forwarded WRITE refused: %d" % h[4])


EKEYEXPIRED = 127


def write_status(host, port, cluster, role, node, body):
    """HELLO as role (node id for an iod), then one WRITE; its status."""
    c = Conn(host, port)
    hello = hello_body(cluster, role) + (f_varint(5, node) if node else b"")
    st, hr, _ = c.call(MSG_HELLO, hello)
    if st != 0:
        raise SystemExit("HELLO to port %d refused: %d" % (port, st))
    epoch = hr.get(4, [0])[0]
    req_id = 9
    c.send(frame(MSG_WRITE, body(epoch), b"\x5a" * 64, req_id=req_id))
    while True:
        h, _, _ = c.recv_frame()
        if h[3] & F_REPLY and h[5] == req_id:
            break
    c.close()
    return h[4]


def layout_body(layout):
    """The Layout message of a "stripe_size=S stripe_count=C groups=a,b"
    string (the twinfs.layout xattr)."""
    kv = dict(t.split("=", 1) for t in layout.split())
    return (f_varint(1, int(kv["stripe_size"])) +
            f_varint(2, int(kv["stripe_count"])) +
            b"".join(f_varint(3, int(g)) for g in kv["groups"].split(",")))


def client_write(host, port, cluster, ino, column, offset, layout, session):
    lay = layout_body(layout)
    return write_status(host, port, cluster, ROLE_CLIENT, 0,
                        lambda epoch: (f_varint(1, ino) + f_varint(2, column) +
                                       f_varint(3, offset) + f_varint(4, 0) +
                                       f_varint(5, epoch) + f_bytes(8, lay) +
                                       f_varint(9, session)))


def fenced(host, cluster, session, ino, layout, a, b):
    lay = layout_body(layout)

    def body(forwarded):
        return lambda epoch: (f_varint(1, ino) + f_varint(2, 0) +
                              f_varint(3, 0) + f_varint(4, 0) +
                              f_varint(5, epoch) +
                              (f_varint(6, 1) if forwarded else b"") +
                              f_bytes(8, lay) + f_varint(9, session))
    fails = 0
    got = sorted(write_status(host, port, cluster, ROLE_CLIENT, 0, body(False))
                 for port, _ in (a, b))
    if got == [-EKEYEXPIRED, -22]:
        print("PASS fenced-write-refused-by-the-primary")
    else:
        print("FAIL fenced-write-refused-by-the-primary: statuses %s, want "
              "[-127, -22]" % got)
        fails += 1
    for (port, _), (_, twin) in ((a, b), (b, a)):
        st = write_status(host, port, cluster, ROLE_IOD, twin, body(True))
        if st == -EKEYEXPIRED:
            print("PASS fenced-forward-refused-%d" % port)
        else:
            print("FAIL fenced-forward-refused-%d: status %d, want -127"
                  % (port, st))
            fails += 1
    return fails


def space(host, mgrd_port, iod_port, cluster, file_ino):
    """FORMAT.md "FALLOCATE", "SEEK", "Appends": bad requests are refused
    with the errno the contract names; nothing else happens."""
    MSG_APPEND_RESERVE, MSG_FALLOCATE, MSG_SEEK = 45, 59, 60
    EINVAL, EISDIR, ESTALE = 22, 21, 116
    ROLE_CLIENT = 1
    big_epoch = f_varint(5, 1 << 40)
    layout = f_bytes(9, f_varint(1, 65536) + f_varint(2, 1) + f_varint(3, 0))
    fails = 0

    def fa(ino, off, length, punch, extra=b""):
        return (f_varint(1, ino) + f_varint(3, off) + f_varint(4, length) +
                (f_varint(5, 1) if punch else b"") + f_varint(7, 1 << 40) +
                extra)

    iod_cases = [
        ("fallocate-len-0", MSG_FALLOCATE, fa(5, 0, 0, True), -EINVAL),
        ("fallocate-past-2^63", MSG_FALLOCATE, fa(5, (1 << 63) - 5, 100, True), -EINVAL),
        ("fallocate-no-layout", MSG_FALLOCATE, fa(5, 0, 4096, False), -EINVAL),
        ("fallocate-ino-0", MSG_FALLOCATE, fa(0, 0, 4096, True, layout), -EINVAL),
        ("seek-bad-whence", MSG_SEEK, f_varint(1, 5) + f_varint(4, 9) + big_epoch, -EINVAL),
        ("seek-bad-column", MSG_SEEK, f_varint(1, 5) + f_varint(2, 99) + f_varint(4, 3) + big_epoch, -EINVAL),
        ("seek-absent", MSG_SEEK, f_varint(1, 987654) + f_varint(4, 3) + big_epoch, 0),
    ]
    # SETATTR's size reports (FORMAT.md "Size, truncate, data_version"):
    # each one must name the SETATTR's ino, at most 8, and be a report
    # mgrd would take alone (a directory has no size to report, a time
    # has fewer than 10^9 ns).  Each case would change regular file file_ino
    # (mode, size, mtime 1970) or the root if it were taken.
    MSG_SETATTR, SA_MODE, SA_MTIME = 12, 1, 32

    def setattr(ino, valid, reports):
        return (f_varint(2, ino) + f_varint(3, valid) + f_varint(4, 0o700) +
                f_varint(10, 1) + b"".join(f_bytes(14, r) for r in reports))

    def report(ino, extra=b""):
        return f_varint(2, ino) + f_varint(3, 100) + f_varint(8, 1) + extra

    mgrd_cases = [
        ("append-unknown-ino", MSG_APPEND_RESERVE, f_varint(2, 987654) + f_varint(3, 10), -ESTALE),
        ("append-directory", MSG_APPEND_RESERVE, f_varint(2, 1) + f_varint(3, 10), -EISDIR),
        ("setattr-report-other-ino", MSG_SETATTR, setattr(file_ino, SA_MTIME, [report(987654)]), -EINVAL),
        ("setattr-report-bad-mtime", MSG_SETATTR, setattr(file_ino, SA_MODE, [report(file_ino, f_varint(5, 10**9))]), -EINVAL),
        ("setattr-9-reports", MSG_SETATTR, setattr(file_ino, SA_MTIME, [report(file_ino)] * 9), -EINVAL),
        ("setattr-report-directory", MSG_SETATTR, setattr(1, SA_MTIME, [report(1)]), -EINVAL),
    ]
    for port, cases in ((iod_port, iod_cases), (mgrd_port, mgrd_cases)):
        c = Conn(host, port)
        st, _, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_CLIENT))
        if st != 0:
            raise SystemExit("HELLO refused: %d" % st)
        for name, mtype, body, want in cases:
            st, rep, _ = c.call(mtype, body)
            if st != want:
                print("FAIL space-%s: status %d, want %d" % (name, st, want))
                fails += 1
            elif name == "seek-absent" and rep.get(1, [0])[0]:
                print("FAIL space-%s: found data in an absent subfile" % name)
                fails += 1
            else:
                print("PASS space-%s" % name)
        c.close()
        err = hello_ping(host, port, cluster)
        if err:
            print("FAIL space-alive-%d: %s" % (port, err))
            fails += 1
    return fails


def sessions(host, port, cluster, file_ino):
    MSG_GETATTR, MSG_OPEN, MSG_RELEASE = 11, 21, 22
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS wire-%s" % name) if ok else ("FAIL wire-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    def ctx(session, seq):
        return f_bytes(1, f_varint(1, session) + f_varint(2, seq) +
                       f_varint(4, 0) + f_varint(5, 0))

    conns, sids, secrets = [], [], []
    for _ in range(2):
        c = Conn(host, port)
        st, rep, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_CLIENT))
        if st != 0 or not rep.get(2, [0])[0]:
            raise SystemExit("client HELLO refused or no session: %d" % st)
        conns.append(c)
        sids.append(rep[2][0])
        secrets.append(rep.get(5, [b""])[0])
    a, b = conns
    check("two-sessions", sids[0] != sids[1], "both got session %d" % sids[0])
    check("session-secret", len(secrets[0]) == 16 and secrets[0] != secrets[1],
          "HelloReply.session_secret %r" % secrets[0])

    # Resuming a live session takes its secret (session ids are
    # sequential): without it, or with another session's, the HELLO is
    # refused -EACCES; with it, the session is resumed.
    def resume(sid, secret):
        c = Conn(host, port)
        body = hello_body(cluster, ROLE_CLIENT) + f_varint(6, sid)
        if secret is not None:
            body += f_bytes(9, secret)
        try:
            st, rep, _ = c.call(MSG_HELLO, body)
        except (OSError, SystemExit) as e:  # closed after the refusal
            return None, str(e)
        c.close()
        return st, rep.get(2, [0])[0]
    st, got = resume(sids[0], None)
    check("hijack-without-secret-refused", st == -13,
          "status %s (session %s)" % (st, got))
    st, got = resume(sids[0], secrets[1])
    check("hijack-with-another-secret-refused", st == -13,
          "status %s (session %s)" % (st, got))
    st, got = resume(sids[0], secrets[0])
    check("resume-with-secret", st == 0 and got == sids[0],
          "status %s, session %s" % (st, got))
    st, rep, _ = a.call(MSG_OPEN, ctx(sids[0], 1) + f_varint(2, file_ino) +
                        f_varint(3, os.O_RDONLY))
    fh = rep.get(1, [0])[0]
    check("open", st == 0 and fh != 0, "status %d %r" % (st, rep))
    release = f_varint(2, file_ino) + f_varint(3, fh)
    # (a seq A has not used: with A's seq 1 it would get A's cached reply)
    st, _, _ = b.call(MSG_RELEASE, ctx(sids[0], 5) + release)
    check("release-in-anothers-name-refused", st == -1,
          "status %d, want -EPERM" % st)
    st, _, _ = b.call(MSG_RELEASE, ctx(sids[1], 1) + release)
    check("release-of-anothers-handle-refused", st != 0,
          "status 0: session %d released a handle of session %d" % (sids[1], sids[0]))
    st, _, _ = a.call(MSG_RELEASE, ctx(sids[0], 2) + release)
    check("owner-releases", st == 0, "status %d (its handle is gone?)" % st)
    st, _, _ = b.call(MSG_GETATTR, ctx(sids[1] + 1000000, 1) + f_varint(2, file_ino))
    check("gone-session-served", st == 0, "status %d" % st)
    a.close()
    b.close()
    return fails


def roles(host, port, cluster, twin_id, other_id, ino):
    """An iod serves each role only what it may send: a client neither
    pushes a map or a fence list nor deletes, truncates or lists subfiles;
    an admin does not write; no iod but our twin says HELLO.  Each refused
    request gets -EPERM and changes nothing."""
    MSG_TRUNCATE, MSG_DELETE, MSG_MAP_UPDATE, MSG_FENCE = 52, 53, 58, 62
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS roles-%s" % name) if ok else ("FAIL roles-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    def as_role(role, node=0):
        c = Conn(host, port)
        st, _, _ = c.call(MSG_HELLO, hello_body(cluster, role) +
                          (f_varint(5, node) if node else b""))
        return c, st

    c, st = as_role(ROLE_CLIENT)
    check("client-hello", st == 0, "status %d" % st)
    for what, mtype, body in (
            ("client-map-push", MSG_MAP_UPDATE, f_varint(1, 1 << 40)),
            ("client-fence", MSG_FENCE, f_varint(1, 1 << 40) + f_varint(2, 1)),
            ("client-delete", MSG_DELETE, f_varint(1, ino)),
            ("client-truncate", MSG_TRUNCATE, f_varint(1, ino) + f_varint(3, 0)),
            ("client-subfiles", MSG_SUBFILES, f_varint(3, 10))):
        st, _, _ = c.call(mtype, body)
        check(what + "-refused", st == -1, "status %d, want -EPERM" % st)
    c.close()
    c, st = as_role(ROLE_ADMIN)
    st, _, _ = c.call(MSG_WRITE, f_varint(1, ino) + f_varint(2, 0))
    check("admin-write-refused", st == -1, "status %d, want -EPERM" % st)
    st, rep, _ = c.call(MSG_SUBFILES, f_varint(3, 10))
    check("admin-subfiles", st == 0, "status %d" % st)
    c.close()
    c, st = as_role(ROLE_IOD, other_id)
    check("foreign-iod-hello-refused", st == -1,
          "status %d, want -EPERM (iod %d is not the twin)" % (st, other_id))
    c.close()
    c, st = as_role(ROLE_IOD, twin_id)
    check("twin-hello", st == 0, "status %d" % st)
    c.close()
    return fails


def names(host, port, cluster, parent, name, file_ino):
    """MKDIR and LINK onto NAME: their statuses, one line each."""
    MSG_MKDIR, MSG_LINK = 14, 19
    ctx = f_bytes(1, f_varint(4, 0) + f_varint(5, 0))   # uid, gid 0
    c = Conn(host, port)
    st, _, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_CLIENT))
    if st != 0:
        raise SystemExit("HELLO refused: %d" % st)
    nm = name.encode()
    st, _, _ = c.call(MSG_MKDIR, ctx + f_varint(2, parent) + f_bytes(3, nm) +
                      f_varint(4, 0o755))
    print("mkdir %d" % st)
    st, _, _ = c.call(MSG_LINK, ctx + f_varint(2, file_ino) +
                      f_varint(3, parent) + f_bytes(4, nm))
    print("link %d" % st)
    c.close()


def perm(host, port, cluster, parent, uid):
    """FORMAT.md "Permissions": refusals as UID, the same as root."""
    MSG_LOOKUP, MSG_SETATTR, MSG_MKNOD, MSG_MKDIR = 10, 12, 13, 14
    MSG_UNLINK, MSG_OPEN, MSG_RELEASE, MSG_SETXATTR = 15, 21, 22, 25
    MSG_READDIR, MSG_GETXATTR, MSG_LISTXATTR = 23, 26, 27
    EPERM, EACCES, ENODATA = 1, 13, 61
    SA_MODE, SA_UID = 1, 2
    other, group = uid + 1, uid + 2
    fails = 0

    def check(name, st, want):
        nonlocal fails
        ok = st == want
        print(("PASS perm-%s" % name) if ok else
              ("FAIL perm-%s: status %d, want %d" % (name, st, want)))
        fails += 0 if ok else 1

    c = Conn(host, port)
    st, rep, _ = c.call(MSG_HELLO, hello_body(cluster, ROLE_CLIENT))
    if st != 0 or not rep.get(2, [0])[0]:
        raise SystemExit("client HELLO refused or no session: %d" % st)
    session, seq = rep[2][0], 0

    def call(mtype, who, groups, body):
        nonlocal seq
        seq += 1
        ctx = (f_varint(1, session) + f_varint(2, seq) + f_varint(4, who) +
               f_varint(5, who))
        if groups:
            ctx += f_bytes(8, b"".join(varint(g) for g in groups))
        st, rep, _ = c.call(mtype, f_bytes(1, ctx) + body)
        return st, rep

    def ino_of(rep):
        return decode(rep[1][0])[1][0]

    def mkdir(who, dirino, name, mode, groups=()):
        st, rep = call(MSG_MKDIR, who, groups, f_varint(2, dirino) +
                       f_bytes(3, name) + f_varint(4, mode))
        return st, (ino_of(rep) if st == 0 else 0)

    def create(who, dirino, name, mode, groups=()):
        st, rep = call(MSG_MKNOD, who, groups, f_varint(2, dirino) +
                       f_bytes(3, name) + f_varint(4, 0o100000 | mode))
        return st, (ino_of(rep) if st == 0 else 0)

    def setattr(who, ino, valid, mode=0, owner=0):
        return call(MSG_SETATTR, who, (), f_varint(2, ino) +
                    f_varint(3, valid) + f_varint(4, mode) +
                    f_varint(5, owner) + f_varint(6, owner))[0]

    def unlink(who, dirino, name):
        return call(MSG_UNLINK, who, (), f_varint(2, dirino) +
                    f_bytes(3, name))[0]

    def open_(who, ino, flags):
        st, rep = call(MSG_OPEN, who, (), f_varint(2, ino) +
                       f_varint(3, flags))
        if st == 0:
            call(MSG_RELEASE, who, (), f_varint(2, ino) +
                 f_varint(3, rep[1][0]))
        return st

    def setxattr(who, ino, name):
        return call(MSG_SETXATTR, who, (), f_varint(2, ino) +
                    f_bytes(3, name) + f_bytes(4, b"v"))[0]

    def readdir(who, dirino):
        return call(MSG_READDIR, who, (), f_varint(2, dirino) +
                    f_varint(4, 16))[0]

    def getxattr(who, ino, name):
        return call(MSG_GETXATTR, who, (), f_varint(2, ino) +
                    f_bytes(3, name) + f_varint(6, 64))[0]

    def listxattr(who, ino):
        st, rep = call(MSG_LISTXATTR, who, (), f_varint(2, ino) +
                       f_varint(6, 4096))
        return st, (rep.get(1, [b""])[0] if st == 0 else b"")

    tag = "perm%d" % os.getpid()
    # Set up as root: mode given in full (umask 0).
    st, top = mkdir(0, parent, tag, 0o755)
    if st != 0:
        raise SystemExit("mkdir %s as root: %d" % (tag, st))
    _, rootdir = mkdir(0, top, "rootdir", 0o755)
    _, rootfile = create(0, rootdir, "f", 0o644)
    _, tmp = mkdir(0, top, "tmp", 0o1777)
    st, theirs = create(other, tmp, "theirs", 0o644)
    check("other-creates-in-sticky", st, 0)
    st, mine = create(uid, tmp, "mine", 0o644)
    check("uid-creates-in-sticky", st, 0)
    _, grpdir = mkdir(0, top, "grp", 0o770)
    setattr(0, grpdir, 4, owner=group)           # SA_GID: root:group
    # Refused as uid.
    check("chown-to-root-refused", setattr(uid, mine, SA_UID, owner=0), -EPERM)
    check("setuid-on-roots-file-refused",
          setattr(uid, rootfile, SA_MODE, mode=0o4755), -EPERM)
    check("unlink-in-root-0755-dir-refused", unlink(uid, rootdir, "f"), -EACCES)
    check("unlink-others-file-in-sticky-refused", unlink(uid, tmp, "theirs"),
          -EPERM)
    check("open-roots-0644-for-write-refused", open_(uid, rootfile, os.O_WRONLY),
          -EACCES)
    check("setxattr-trusted-refused", setxattr(uid, mine, "trusted.x"), -EPERM)
    check("create-in-root-dir-refused", create(uid, rootdir, "g", 0o644)[0],
          -EACCES)
    check("create-without-group-refused", create(uid, grpdir, "g", 0o644)[0],
          -EACCES)
    # Allowed as uid.
    check("open-roots-0644-for-read", open_(uid, rootfile, os.O_RDONLY), 0)
    check("chmod-own-file", setattr(uid, mine, SA_MODE, mode=0o600), 0)
    check("setxattr-user-own-file", setxattr(uid, mine, "user.x"), 0)
    check("create-through-supplementary-group",
          create(uid, grpdir, "g", 0o644, groups=(group,))[0], 0)
    check("unlink-own-file-in-sticky", unlink(uid, tmp, "mine"), 0)
    # The same as root succeeds.
    _, mine = create(uid, tmp, "mine", 0o644)
    check("root-chown-to-root", setattr(0, mine, SA_UID, owner=0), 0)
    check("root-setuid", setattr(0, rootfile, SA_MODE, mode=0o4755), 0)
    check("root-open-for-write", open_(0, rootfile, os.O_WRONLY), 0)
    check("root-setxattr-trusted", setxattr(0, mine, "trusted.x"), 0)
    check("root-unlink-others-in-sticky", unlink(0, tmp, "theirs"), 0)
    check("root-unlink-in-0755-dir", unlink(0, rootdir, "f"), 0)
    # Reading: a listing needs read permission on the directory, user.*
    # read permission on the file, and trusted.* is root's alone (it
    # reads as absent and is not listed).
    _, secret_dir = mkdir(0, top, "private", 0o700)
    _, secret_file = create(0, top, "private-f", 0o600)
    setxattr(0, secret_file, "user.x")
    setxattr(0, secret_file, "trusted.x")
    check("readdir-roots-0700-dir-refused", readdir(uid, secret_dir), -EACCES)
    check("root-readdir-0700-dir", readdir(0, secret_dir), 0)
    check("readdir-0755-dir", readdir(uid, top), 0)
    check("getxattr-user-of-0600-file-refused",
          getxattr(uid, secret_file, "user.x"), -EACCES)
    check("getxattr-trusted-reads-absent",
          getxattr(uid, secret_file, "trusted.x"), -ENODATA)
    check("root-getxattr-trusted", getxattr(0, secret_file, "trusted.x"), 0)
    st, names = listxattr(uid, secret_file)
    check("listxattr-hides-trusted",
          0 if st == 0 and b"trusted.x" not in names and b"user.x" in names
          else -1, 0)
    st, names = listxattr(0, secret_file)
    check("root-listxattr-shows-trusted",
          0 if st == 0 and b"trusted.x" in names else -1, 0)
    c.close()
    return fails


EACCES, EKEYREJECTED, EINVAL = 13, 129, 22


def unwrap_ticket(key, ticket_msg):
    """A HelloReply.ticket or TICKET reply (encoded Ticket): (ticket, Ks)."""
    t = decode(ticket_msg) if isinstance(ticket_msg, bytes) else ticket_msg
    tkt, wrapped = t[1][0], t[2][0]
    return tkt, bytes(a ^ b for a, b in
                      zip(wrapped, hm(key, b"twinfs-ticket-wrap", tkt[:-32])))


def client_session(host, port, cluster, keyfile):
    """A client session at mgrd as KEYFILE's identity: (conn, session,
    ticket, Ks)."""
    name, key = read_keyfile(keyfile)
    st, rep, m, why = client_hello(host, port, cluster,
                                   b"client:" + name.encode(), key)
    sid = rep.get(2, [0])[0] if st == 0 else 0
    if st != 0 or not sid or 8 not in rep:
        raise SystemExit("client HELLO refused, or no session or ticket: "
                         "%s %r" % (st, why))
    tkt, ks = unwrap_ticket(key, rep[8][0])
    return m, sid, tkt, ks


def caps(host, port, cluster, file_ino, other_ino, lifetime_s, keyfile):
    MSG_OPEN, MSG_READ, MSG_CAP = 21, 51, 63
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS cap-%s" % name) if ok else ("FAIL cap-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    m, sid, tkt, ks = client_session(host, port, cluster, keyfile)
    seq = 0

    def ctx():
        nonlocal seq
        seq += 1
        return f_bytes(1, f_varint(1, sid) + f_varint(2, seq) +
                       f_varint(4, 0) + f_varint(5, 0))

    st, rep, _ = m.call(MSG_OPEN, ctx() + f_varint(2, file_ino) +
                        f_varint(3, os.O_RDWR))
    wcap = rep.get(3, [b""])[0]
    check("open-rw-carries-cap", st == 0 and len(wcap) == 52 and wcap[1] == 1,
          "status %d, cap %r" % (st, wcap))
    check("open-lifetime", rep.get(4, [0])[0] == lifetime_s * 1000,
          "cap_lifetime_ms %r" % rep.get(4))
    attr = decode(rep[2][0])
    tgen = attr.get(15, [0])[0]
    lay = attr[17][0]
    groups = decode(lay)[3][0]
    if isinstance(groups, bytes):   # packed (proto3): varints back to back
        end = next(i for i, b in enumerate(groups) if not b & 0x80) + 1
        groups = decode(varint(1 << 3) + groups[:end])[1][0]
    group = groups
    st, rep, _ = m.call(MSG_OPEN, ctx() + f_varint(2, file_ino) +
                        f_varint(3, os.O_RDONLY))
    check("open-ro-read-cap", st == 0 and len(rep.get(3, [b""])[0]) == 52 and
          rep[3][0][1] == 0, "status %d %r" % (st, rep.get(3)))
    st, rep, _ = m.call(MSG_CAP, ctx() + f_varint(2, file_ino))
    rcap = rep.get(1, [b""])[0]
    check("msg-cap-read", st == 0 and len(rcap) == 52 and rcap[1] == 0 and
          rep.get(2, [0])[0] == lifetime_s * 1000, "status %d %r" % (st, rep))
    st, rep, _ = m.call(MSG_CAP, ctx() + f_varint(2, other_ino) + f_varint(3, 1))
    other_cap = rep.get(1, [b""])[0]
    check("msg-cap-other-write", st == 0 and len(other_cap) == 52,
          "status %d %r" % (st, rep))
    # A cap in the name of another session is not issued.
    st, _, _ = m.call(MSG_CAP, f_bytes(1, f_varint(1, sid + 1) + f_varint(2, 99)) +
                      f_varint(2, file_ino))
    check("msg-cap-for-another-session-refused", st == -1, "status %d" % st)

    # The iods of the group holding column 0, from mgrd's map.
    st, mp, _ = m.call(MSG_GET_MAP)
    iods = [decode(b) for b in mp.get(2, [])]
    ports = sorted(i[5][0] for i in iods if i.get(2, [0])[0] == group)
    if st != 0 or len(ports) != 2:
        raise SystemExit("map: status %d, group %d ports %r" % (st, group, ports))

    def iod_conns(session, ticket, ticket_key):
        out = []
        for p in ports:
            st, hr, c, why = client_hello(host, p, cluster, b"ticket:" + ticket,
                                          ticket_key, session)
            if st != 0:
                raise SystemExit("client HELLO to iod port %d: %s %r" %
                                 (p, st, why))
            out.append((c, hr.get(4, [0])[0]))
        return out
    mine = iod_conns(sid, tkt, ks)

    def read(cap, ino=file_ino, conns=None):
        """The statuses of both twins, sorted."""
        out = []
        for c, epoch in conns or mine:
            body = (f_varint(1, ino) + f_varint(2, 0) + f_varint(3, 0) +
                    f_varint(4, 64) + f_varint(5, epoch) +
                    (f_bytes(6, cap) if cap else b""))
            out.append(c.call(MSG_READ, body)[0])
        return sorted(out)

    def write(cap, gen=tgen, ino=file_ino, conns=None):
        out = []
        for c, epoch in conns or mine:
            body = (f_varint(1, ino) + f_varint(2, 0) + f_varint(3, 0) +
                    f_varint(4, gen) + f_varint(5, epoch) + f_bytes(8, lay) +
                    f_varint(9, sid) + (f_bytes(10, cap) if cap else b""))
            req_id = int.from_bytes(os.urandom(4), "little") + 1
            c.send(frame(MSG_WRITE, body, b"\x5a" * 64, req_id=req_id))
            while True:
                h, _, _ = c.recv_frame()
                if h[3] & F_REPLY and h[5] == req_id:
                    break
            out.append(h[4])
        return sorted(out)

    # Served: the primary takes the write, its twin says it is not the
    # primary (-EINVAL), after the cap was checked.
    want_write = [-EINVAL, 0]
    got = read(rcap)
    check("read-with-read-cap", got == [0, 0], "statuses %r" % got)
    got = write(wcap)
    check("write-with-write-cap", got == want_write, "statuses %r" % got)
    # (a) no cap
    got = read(None)
    check("read-without-cap-refused", got == [-EKEYREJECTED] * 2, "statuses %r" % got)
    got = write(None)
    check("write-without-cap-refused", got == [-EKEYREJECTED] * 2, "statuses %r" % got)
    # (b) our own cap of FILE_INO on OTHER_INO, and the reverse
    got = read(wcap, ino=other_ino)
    check("cap-on-another-inode-refused", got == [-EACCES] * 2, "statuses %r" % got)
    got = write(other_cap, gen=0)
    check("write-cap-of-another-inode-refused", got == [-EACCES] * 2,
          "statuses %r" % got)
    # (c) a read cap to write
    got = write(rcap)
    check("read-cap-writes-refused", got == [-EACCES] * 2, "statuses %r" % got)
    # (e) forged: one bit of the MAC, one bit of the body (the ino's)
    forged = wcap[:-1] + bytes([wcap[-1] ^ 1])
    got = write(forged)
    check("forged-mac-refused", got == [-EACCES] * 2, "statuses %r" % got)
    forged = wcap[:12] + bytes([wcap[12] ^ 1]) + wcap[13:]
    got = read(forged, ino=file_ino ^ 1)
    check("altered-ino-refused", got == [-EACCES] * 2, "statuses %r" % got)
    # A connection of another session (its own ticket) cannot use our cap.
    m2, sid2, tkt2, ks2 = client_session(host, port, cluster, keyfile)
    theirs = iod_conns(sid2, tkt2, ks2)
    got = read(rcap, conns=theirs)
    check("cap-of-another-session-refused", got == [-EACCES] * 2, "statuses %r" % got)
    for c, _ in theirs:
        c.close()
    m2.close()
    # (f) a huge trunc_gen is refused and wedges nothing
    got = write(wcap, gen=1 << 62)
    check("huge-trunc-gen-refused", got == [-EKEYREJECTED] * 2, "statuses %r" % got)
    got = write(wcap)
    check("write-after-huge-trunc-gen", got == want_write, "statuses %r" % got)
    # (d) expired, past the skew the iods allow
    time.sleep(lifetime_s + 5 + 1.5)
    got = read(rcap)
    check("expired-cap-refused", got == [-EKEYREJECTED] * 2, "statuses %r" % got)
    got = write(wcap)
    check("expired-write-cap-refused", got == [-EKEYREJECTED] * 2, "statuses %r" % got)
    st, rep, _ = m.call(MSG_CAP, ctx() + f_varint(2, file_ino) + f_varint(3, 1))
    got = write(rep.get(1, [b""])[0])
    check("fresh-cap-writes", st == 0 and got == want_write,
          "status %d, statuses %r" % (st, got))
    for c, _ in mine:
        c.close()
    m.close()


# --------------------------------------------------------------- identities

MSG_AUTH, MSG_GETATTR_ = 39, 11


def read_keyfile(path):
    name = key = None
    for line in open(path):
        line = line.split("#")[0].strip()
        if "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            if k == "name":
                name = v
            elif k == "key":
                key = bytes.fromhex(v)
    return name, key


def hm(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def auth_call(c, body):
    """One AUTH frame (req_id 0): (status, decoded reply)."""
    c.send(frame(MSG_AUTH, body, req_id=0))
    h, rbody, _ = c.recv_frame()
    return h[4], decode(rbody)


CHAN_NONE, CHAN_INTEGRITY, CHAN_ENCRYPT = 1, 2, 3


def authenticate(c, identity, key, cmin=CHAN_NONE):
    """AUTH steps 1 and 2 proving `key` for `identity` (FORMAT.md
    "Authentication", "Channel protection"), stating channel minimum
    cmin; then every frame of c is sealed as the server chose (FORMAT.md
    "Sealed frames").  (status, refusal text)."""
    nc = os.urandom(16)
    st, rep = auth_call(c, f_varint(1, 1) + f_bytes(2, nc) +
                        f_bytes(4, identity) + f_varint(5, cmin))
    if st != 0:
        return st, rep.get(3, [b""])[0].decode(errors="replace")
    ns = rep[1][0]
    chosen, smin = rep.get(4, [0])[0], rep.get(5, [0])[0]
    bind = bytes([cmin, smin, chosen])
    server_ok = hmac.compare_digest(
        rep[2][0], hm(key, b"twinfs-server", nc, ns, bind))
    st, rep = auth_call(c, f_varint(1, 2) +
                        f_bytes(3, hm(key, b"twinfs-client", ns, nc, bind)))
    if st == 0 and not server_ok:
        return -999, "server proof did not match"
    if st == 0 and chosen != CHAN_NONE:
        c.seal(chosen, hm(key, b"twinfs-channel-c2s", bytes([chosen]), nc, ns),
               hm(key, b"twinfs-channel-s2c", bytes([chosen]), nc, ns))
    return st, rep.get(3, [b""])[0].decode(errors="replace")


def ticket_seal(secret, name, session, expiry_ms, ro=False):
    """A ticket as mgrd seals it (proto/wire_ticket.c): (ticket, Ks)."""
    ktkt = hm(secret.encode(), b"twinfs-ticket-key")
    body = (struct.pack("<BBBBQQ", 1, 1 if ro else 0, len(name), 0, session,
                        expiry_ms) + os.urandom(16) + name.encode())
    return (body + hm(ktkt, b"twinfs-ticket-mac", body),
            hm(ktkt, b"twinfs-ticket-session", body))


def client_hello(host, port, cluster, identity=None, key=None, session=0,
                 subdir=None):
    """Connect, AUTH (when identity), HELLO as a client: (status,
    HelloReply dict, conn or None, auth refusal)."""
    c = Conn(host, port)
    why = ""
    try:
        if identity is not None:
            st, why = authenticate(c, identity, key)
            if st != 0:
                c.close()
                return st, {}, None, why
        body = hello_body(cluster, ROLE_CLIENT)
        if session:
            body += f_varint(6, session)
        if subdir is not None:
            body += f_bytes(10, subdir)
        st, rep, _ = c.call(MSG_HELLO, body)
    except (OSError, EOFError, ValueError) as e:
        c.close()
        return None, {}, None, str(e)
    if st != 0:
        c.close()
        return st, rep, None, rep.get(6, [b""])[0].decode(errors="replace")
    return st, rep, c, why


def ident(host, port, cluster, keyfile, secret, iod_ports):
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS wire-%s" % name) if ok else ("FAIL wire-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    name, key = read_keyfile(keyfile)
    st, rep, c, why = client_hello(host, port, cluster)
    check("mgrd-anonymous-client-refused", st == -13 and "identity" in why,
          "status %s refusal %r" % (st, why))
    for ip in iod_ports:
        st, rep, c, why = client_hello(host, ip, cluster)
        check("iod%d-anonymous-client-refused" % ip, st == -13 and "ticket" in why,
              "status %s refusal %r" % (st, why))
    st, _, c, why = client_hello(host, port, cluster, b"client:" + name.encode(),
                                 bytes(32))
    check("mgrd-wrong-key-refused", st == -13, "status %s %r" % (st, why))
    st, _, c, why = client_hello(host, port, cluster, b"client:nobody-" + name.encode(),
                                 key)
    check("mgrd-unknown-name-refused", st == -13 and "unknown client" in why,
          "status %s refusal %r" % (st, why))
    st, rep, c, why = client_hello(host, port, cluster, b"client:" + name.encode(), key)
    check("mgrd-identity-served", st == 0 and 8 in rep, "status %s %r" % (st, why))
    if st != 0 or 8 not in rep:
        return fails
    sid = rep[2][0]
    t = decode(rep[8][0])
    tkt, wrapped = t[1][0], t[2][0]
    ks = bytes(a ^ b for a, b in zip(wrapped, hm(key, b"twinfs-ticket-wrap", tkt[:-32])))
    check("ticket-names-session", struct.unpack_from("<Q", tkt, 4)[0] == sid,
          "ticket session %d, HELLO session %d" %
          (struct.unpack_from("<Q", tkt, 4)[0], sid))
    # A renewed ticket (MSG_TICKET) for the same session opens an iod too.
    st, trep, _ = c.call(66, b"")
    t2 = trep
    renewed = t2.get(1, [b""])[0]
    check("ticket-renewal", st == 0 and len(renewed) == len(tkt) and
          renewed != tkt and struct.unpack_from("<Q", renewed, 4)[0] == sid,
          "status %s" % st)
    if st == 0 and renewed:
        rks = bytes(a ^ b for a, b in zip(t2[2][0], hm(key, b"twinfs-ticket-wrap",
                                                         renewed[:-32])))
        st, _, ci, why = client_hello(host, iod_ports[0], cluster,
                                      b"ticket:" + renewed, rks, sid)
        check("renewed-ticket-admits", st == 0, "status %s %r" % (st, why))
        if ci:
            ci.close()
    # A second session of the same identity, for the cross-session case.
    st2, rep2, c2, _ = client_hello(host, port, cluster, b"client:" + name.encode(), key)
    sid2 = rep2.get(2, [0])[0] if st2 == 0 else 0
    for ip in iod_ports:
        tag = "iod%d-" % ip
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + tkt, ks, sid)
        check(tag + "ticket-admits-its-session", st == 0, "status %s %r" % (st, why))
        if ci:
            ci.close()
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + tkt, ks, sid2)
        check(tag + "ticket-for-another-session-refused", st == -13,
              "status %s %r (sessions %d, %d)" % (st, why, sid, sid2))
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + tkt, bytes(32), sid)
        check(tag + "ticket-without-its-key-refused", st == -13, "status %s %r" % (st, why))
        bad = bytearray(tkt)
        bad[12] ^= 0xff       # a later expiry, without the MAC that says so
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + bytes(bad), ks, sid)
        check(tag + "forged-ticket-refused", st == -13 and "not a ticket" in why,
              "status %s %r" % (st, why))
        other, oks = ticket_seal(secret + "x", name, sid, int(time.time() * 1000) + 60000)
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + other, oks, sid)
        check(tag + "other-secret-ticket-refused", st == -13, "status %s %r" % (st, why))
        old, oks = ticket_seal(secret, name, sid, int(time.time() * 1000) - 1000)
        st, _, ci, why = client_hello(host, ip, cluster, b"ticket:" + old, oks, sid)
        check(tag + "expired-ticket-refused", st == -13 and "expired" in why,
              "status %s %r" % (st, why))
    for x in (c, c2):
        if x:
            x.close()
    return fails


def subtree(host, port, cluster, keyfile, subdir, outside):
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print(("PASS wire-%s" % name) if ok else ("FAIL wire-%s: %s" % (name, why)))
        fails += 0 if ok else 1

    name, key = read_keyfile(keyfile)
    st, rep, c, why = client_hello(host, port, cluster, b"client:" + name.encode(),
                                   key, subdir=subdir)
    check("subtree-hello", st == 0 and rep.get(7, [0])[0] > 1,
          "status %s %r %r" % (st, why, rep))
    if not c:
        return fails
    sid, root = rep[2][0], rep[7][0]

    def getattr_(ino, seq):
        ctx = f_bytes(1, f_varint(1, sid) + f_varint(2, seq))
        return c.call(MSG_GETATTR_, ctx + f_varint(2, ino))[0]
    st = getattr_(root, 1)
    check("subtree-root-served", st == 0, "status %d" % st)
    st = getattr_(outside, 2)
    check("subtree-outside-refused", st == -13, "status %d, want -EACCES" % st)
    st = getattr_(1, 3)
    check("subtree-namespace-root-refused", st == -13, "status %d, want -EACCES" % st)
    c.close()
    return fails


MSG_MGRD_STATUS = 70


def mgrd_status(host, port, cluster):
    c = Conn(host, port)
    try:
        st, _, _ = c.call(MSG_HELLO, hello_body(cluster))
        if st != 0:
            return "HELLO answered status %d" % st
        st, r, _ = c.call(MSG_MGRD_STATUS)
        if st != 0:
            return "MGRD_STATUS answered status %d" % st
        g = lambda no, d=0: r.get(no, [d])[0]
        print("id %d role %s term %d applied %d lag %d peer %s" % (
            g(1), g(2, b"").decode(), g(3), g(4), g(5), g(7, b"").decode()))
        return None
    finally:
        c.close()


def mgrd_hello(host, port, cluster, role):
    c = Conn(host, port)
    try:
        body = hello_body(cluster, role)
        if role == ROLE_IOD:
            body += f_varint(5, 1)
        st, r, _ = c.call(MSG_HELLO, body)
        g = lambda no, d=0: r.get(no, [d])[0]
        print("status %d mgrd_id %d active_addr %s refusal %s" % (
            st, g(10), g(12, b"").decode() or "-",
            g(6, b"").decode() or "-"))
    finally:
        c.close()


def guarded(name, fn):
    """Run one checking command: exit status 1 if it failed, and one FAIL
    line for an exception it raised instead of a hang or a traceback."""
    try:
        return 1 if fn() else 0
    except (Exception, SystemExit) as e:  # noqa: BLE001 - one FAIL line
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        return 1


def standby(host, port, active, seconds):
    """A standby's refusal, by hand: -EREMOTE with the active's address."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(16)
    srv.settimeout(0.2)
    deadline, n = time.time() + seconds, 0
    body = (f_bytes(6, "mgrd 2 is standby; the active is mgrd 1 at " + active) +
            f_varint(10, 2) + f_varint(11, 1) + f_bytes(12, active))
    while time.time() < deadline:
        try:
            s, _ = srv.accept()
        except socket.timeout:
            continue
        s.settimeout(2.0)
        try:
            buf = b""
            while len(buf) < HDR.size:
                chunk = s.recv(HDR.size - len(buf))
                if not chunk:
                    raise EOFError()
                buf += chunk
            h = HDR.unpack(buf)
            left = h[6] + h[7]
            while left > 0:
                chunk = s.recv(min(left, 65536))
                if not chunk:
                    raise EOFError()
                left -= len(chunk)
            if h[2] == MSG_HELLO:
                n += 1
                s.sendall(frame(MSG_HELLO, body, req_id=h[5], flags=F_REPLY,
                                status=-errno.EREMOTE))
        except (OSError, EOFError):
            pass
        finally:
            s.close()
    srv.close()
    print("hellos %d" % n)


def main(argv):
    if len(argv) < 5:
        print(__doc__)
        return 2
    cmd, host, port, cluster = argv[1], argv[2], int(argv[3]), argv[4]
    if cmd == "hostile":
        return 1 if hostile(host, port, cluster, argv[5], argv[6] if len(argv) > 6 else None) else 0
    if cmd == "subfiles":
        subfiles(host, port, cluster)
        return 0
    if cmd == "locks":
        return 1 if locks(host, port, cluster) else 0
    if cmd == "space":
        return guarded("space", lambda: space(host, port, int(argv[4]), argv[5],
                                              int(argv[6])))
    if cmd == "sessions":
        return guarded("sessions", lambda: sessions(host, port, cluster,
                                                    int(argv[5])))
    if cmd == "roles":
        return guarded("roles", lambda: roles(host, port, cluster, int(argv[5]),
                                              int(argv[6]), int(argv[7])))
    if cmd == "caps":
        return guarded("caps", lambda: caps(host, port, cluster, int(argv[5]),
                                            int(argv[6]), int(argv[7]),
                                            argv[8]))
    if cmd == "perm":
        return guarded("perm", lambda: perm(host, port, cluster, int(argv[5]),
                                            int(argv[6])))
    if cmd == "names":
        names(host, port, cluster, int(argv[5]), argv[6], int(argv[7]))
        return 0
    if cmd == "diverge":
        diverge(host, port, cluster, int(argv[5]), int(argv[6]),
                int(argv[7]), int(argv[8]), argv[9])
        return 0
    if cmd == "write":
        print("status %d" % client_write(host, port, cluster, int(argv[5]),
                                         int(argv[6]), int(argv[7]), argv[8],
                                         int(argv[9])))
        return 0
    if cmd == "fenced":
        return guarded("fenced", lambda: fenced(
            host, cluster, int(argv[8]), int(argv[9]), argv[10],
            (port, int(argv[5])), (int(argv[6]), int(argv[7]))))
    if cmd == "ident":
        return guarded("ident", lambda: ident(
            host, port, cluster, argv[5], argv[6],
            [int(x) for x in argv[7].split(",")]))
    if cmd == "subtree":
        return guarded("subtree", lambda: subtree(
            host, port, cluster, argv[5], argv[6], int(argv[7])))
    if cmd == "standby":
        standby(host, port, argv[5], float(argv[6]))
        return 0
    if cmd == "mgrd-status":
        err = mgrd_status(host, port, cluster)
        if err:
            print(err)
            return 1
        return 0
    if cmd == "mgrd-hello":
        mgrd_hello(host, port, cluster, int(argv[5]))
        return 0
    if cmd == "ping":
        err = hello_ping(host, port, cluster)
        if err:
            print(err)
            return 1
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
