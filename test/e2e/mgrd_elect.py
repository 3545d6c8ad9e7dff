#!/usr/bin/env python3
"""mgrd_elect.py - raw probes of the mgrd pair's election for
t_mgrd_elect.sh (docs/ARCHITECTURE.md "Election"; proto/FORMAT.md
"Election"), spoken with twire.py.

  iod-promise HOST PORT CLUSTER      "TERM HOLDER STALE" an iod promised
                                     (a LEASE it must refuse: changes nothing)
  iod-ask HOST PORT CLUSTER TERM CAND ACCEPT
                                     status of a LEASE for TERM as mgrd CAND
  iod-hello HOST PORT CLUSTER TERM   status of a ROLE_MGRD HELLO of TERM
  client HOST PORT CLUSTER           "HELLO GETATTR" statuses of a client
                                     HELLO and a GETATTR of the root
  stall CLUSTER H1 P1 H2 P2 PID      metadata load on H1:P1, kill -9 of PID,
                                     then the ms until H2:P2 answers a GETATTR
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twire  # noqa: E402

MSG_GETATTR, MSG_LEASE = 11, 76
ROLE_MGRD = 4


def iod_promise(host, port, cluster):
    c = twire.Conn(host, port)
    try:
        # A term above any promise: accepted, and never fenced.
        st, _, _ = c.call(twire.MSG_HELLO,
                          twire.hello_body(cluster, ROLE_MGRD) +
                          twire.f_varint(11, 1 << 62))
        if st != 0:
            return "hello %d" % st
        # term 0 is invalid: refused, the reply still tells the promise.
        st, r, _ = c.call(MSG_LEASE, twire.f_varint(1, 0) +
                          twire.f_varint(2, 1))
        return "%d %d %d" % (r.get(1, [0])[0], r.get(2, [0])[0],
                             r.get(4, [0])[0])
    finally:
        c.close()


def iod_ask(host, port, cluster, term, cand, accept):
    c = twire.Conn(host, port)
    try:
        st, _, _ = c.call(twire.MSG_HELLO,
                          twire.hello_body(cluster, ROLE_MGRD) +
                          twire.f_varint(11, term))
        if st != 0:
            return "hello %d" % st
        st, _, _ = c.call(MSG_LEASE, twire.f_varint(1, term) +
                          twire.f_varint(2, cand) + twire.f_varint(3, accept))
        return str(st)
    finally:
        c.close()


def iod_hello(host, port, cluster, term):
    c = twire.Conn(host, port)
    try:
        st, _, _ = c.call(twire.MSG_HELLO,
                          twire.hello_body(cluster, ROLE_MGRD) +
                          twire.f_varint(11, term))
        return str(st)
    finally:
        c.close()


class Client:
    def __init__(self, host, port, cluster, timeout=2.0):
        self.c = twire.Conn(host, port, timeout=timeout)
        self.seq = 0
        st, r, _ = self.c.call(twire.MSG_HELLO,
                               twire.hello_body(cluster, twire.ROLE_CLIENT))
        self.hello = st
        self.session = r.get(2, [0])[0]

    def getattr(self):
        self.seq += 1
        ctx = (twire.f_varint(1, self.session) + twire.f_varint(2, self.seq) +
               twire.f_varint(4, 0) + twire.f_varint(5, 0))
        st, _, _ = self.c.call(MSG_GETATTR, twire.f_bytes(1, ctx) +
                               twire.f_varint(2, 1))
        return st

    def close(self):
        self.c.close()


def client(host, port, cluster):
    try:
        cl = Client(host, port, cluster)
    except (OSError, EOFError) as e:
        return "refused %s" % e
    try:
        if cl.hello != 0:
            return "%d -" % cl.hello
        return "0 %d" % cl.getattr()
    except (OSError, EOFError):
        return "0 closed"
    finally:
        cl.close()


def stall(cluster, h1, p1, h2, p2, pid):
    cl = Client(h1, p1, cluster)
    if cl.hello != 0:
        return "the active refused HELLO: %d" % cl.hello
    n, end = 0, time.monotonic() + 1.0
    while time.monotonic() < end:     # a metadata load on the active
        if cl.getattr() != 0:
            return "GETATTR failed on the active"
        n += 1
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    cl.close()
    deadline = t0 + 30
    while time.monotonic() < deadline:
        try:
            c2 = Client(h2, p2, cluster, timeout=1.0)
            try:
                if c2.hello == 0 and c2.getattr() == 0:
                    ms = (time.monotonic() - t0) * 1000
                    return "ok %d %d" % (ms, n)
            finally:
                c2.close()
        except (OSError, EOFError, ValueError):
            pass
        time.sleep(0.02)
    return "no reply from the new active in 30 s"


def main(a):
    if a[0] == "iod-promise":
        print(iod_promise(a[1], int(a[2]), a[3]))
    elif a[0] == "iod-ask":
        print(iod_ask(a[1], int(a[2]), a[3], int(a[4]), int(a[5]), int(a[6])))
    elif a[0] == "iod-hello":
        print(iod_hello(a[1], int(a[2]), a[3], int(a[4])))
    elif a[0] == "client":
        print(client(a[1], int(a[2]), a[3]))
    elif a[0] == "stall":
        print(stall(a[1], a[2], int(a[3]), a[4], int(a[5]), int(a[6])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
