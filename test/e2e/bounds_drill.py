#!/usr/bin/env python3
"""bounds_drill.py - hostile peers against one daemon's resource limits
(proto/FORMAT.md "Limits"), for t_bounds.sh.

    bounds_drill.py HOST PORT CLUSTER NAME PID MAX_CONNS HELLO_TIMEOUT_S
                    N_IDLE N_SLOW RSS_BOUND_KB LOGFILE

N_SLOW slow senders (half a frame header, then nothing) and N_IDLE idle
connections to the daemon at PORT (process PID): the ones past MAX_CONNS
must be closed at once, the rest after HELLO_TIMEOUT_S.  Then one peer
that sends PINGs and never reads a reply: the daemon must stop reading it
(its send blocks) and log why, and still answer others.  All the while the
daemon's VmRSS must stay under its start plus RSS_BOUND_KB and its open
descriptors under its start plus MAX_CONNS (plus a few in passing).
Prints PASS/FAIL lines and "# ..." figures.  Loopback only; every loop is
bounded; every socket is closed at the end.
"""
import os
import resource
import selectors
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twire  # noqa: E402

FD_SLACK = 16          # descriptors in passing (a refused one, a log, ...)
NONREADER_MAX = 256 << 20   # bytes sent before we call the daemon unbounded


class Sampler(threading.Thread):
    """VmRSS (kB) and open descriptors of pid, every 50 ms, peaks kept."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.rss0, self.fds0 = self.sample()
        self.rss_peak, self.fds_peak = self.rss0, self.fds0

    def sample(self):
        rss = 0
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return rss, len(os.listdir("/proc/%d/fd" % self.pid))

    def run(self):
        while not self.stop.wait(0.05):
            try:
                rss, fds = self.sample()
            except OSError:
                return
            self.rss_peak = max(self.rss_peak, rss)
            self.fds_peak = max(self.fds_peak, fds)


def result(ok, label, why=""):
    print(("PASS %s" % label) if ok else ("FAIL %s: %s" % (label, why)))
    return 0 if ok else 1


def flood(host, port, cluster, name, max_conns, hto, n_idle, n_slow):
    """Slow senders first (so they are among the accepted), then idle
    connections; returns failures."""
    fails = 0
    sel = selectors.DefaultSelector()
    socks = {}
    half = twire.frame(twire.MSG_HELLO, twire.hello_body(cluster))[:16]
    for i in range(n_slow + n_idle):
        s = socket.create_connection((host, port), timeout=5)
        t = time.monotonic()
        if i < n_slow:
            s.sendall(half)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks[s] = [t, None]
    t_open = time.monotonic()
    deadline = t_open + hto + 5
    open_n = len(socks)
    while open_n and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                d = s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                d = b""
            except BlockingIOError:
                continue
            if not d:
                socks[s][1] = time.monotonic()
                sel.unregister(s)
                open_n -= 1
    fast = sum(1 for t, c in socks.values() if c is not None and c - t < 0.5 * hto)
    late = [c - t for t, c in socks.values() if c is not None and c - t >= 0.5 * hto]
    never = sum(1 for _, c in socks.values() if c is None)
    total = n_slow + n_idle
    print("# %s: %d connections: %d closed at once, %d after %.2f-%.2f s, %d never"
          % (name, total, fast, len(late), min(late) if late else 0,
             max(late) if late else 0, never))
    fails += result(fast >= total - max_conns, "%s-past-limit-closed-at-once" % name,
                    "%d of %d closed at once, expected at least %d"
                    % (fast, total, total - max_conns))
    fails += result(never == 0, "%s-no-hello-closed" % name,
                    "%d still open %d s after the HELLO deadline" % (never, 5))
    fails += result(all(hto - 0.3 <= x <= hto + 3 for x in late),
                    "%s-closed-at-hello-deadline" % name,
                    "closed after %s s, deadline %.1f s"
                    % (sorted(set(round(x, 1) for x in late)), hto))
    for s in socks:
        s.close()
    sel.close()
    return fails


def nonreader(host, port, cluster, name, logfile):
    """A peer that sends PINGs and never reads: its sends must block."""
    fails = 0
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect((host, port))
    c = twire.Conn.__new__(twire.Conn)
    c.s = s
    c.local = "%s:%d" % s.getsockname()[:2]
    st, _, _ = c.call(twire.MSG_HELLO, twire.hello_body(cluster))
    if st != 0:
        s.close()
        return result(False, "%s-nonreader-hello" % name, "HELLO status %d" % st)
    batch = b"".join(twire.frame(twire.MSG_PING, twire.f_varint(1, 0), req_id=10 + i)
                     for i in range(2000))
    sent = 0
    blocked = False
    s.settimeout(2)
    t0 = time.monotonic()
    while sent < NONREADER_MAX and time.monotonic() - t0 < 60:
        try:
            sent += s.send(batch)
        except socket.timeout:
            blocked = True
            break
    print("# %s: a peer that never reads sent %.1f MiB of PINGs before its "
          "sends blocked (%.1f s)" % (name, sent / 1048576.0, time.monotonic() - t0))
    fails += result(blocked, "%s-nonreader-not-read" % name,
                    "sent %d bytes without blocking" % sent)
    err = twire.hello_ping(host, port, cluster)
    fails += result(err is None, "%s-serves-others-meanwhile" % name, str(err))
    if logfile:
        time.sleep(0.2)
        with open(logfile, errors="replace") as f:
            logged = "does not read its replies" in f.read()
        fails += result(logged, "%s-nonreader-logged" % name, "no log line")
    s.close()
    return fails


def sessions(host, port, cluster, max_sessions):
    """Client HELLOs from one address until mgrd refuses one -EAGAIN."""
    conns, refused_at = [], None
    try:
        for i in range(max_sessions + 2):
            c = twire.Conn(host, port)
            conns.append(c)
            st, _, _ = c.call(twire.MSG_HELLO, twire.hello_body(cluster, twire.ROLE_CLIENT))
            if st == -11:
                refused_at = i
                break
            if st != 0:
                return result(False, "sessions-per-client", "HELLO status %d" % st)
    finally:
        for c in conns:
            c.close()
    print("# mgrd: new session %s refused -EAGAIN (max_sessions_per_client %d, "
          "the mount holds one)" % (refused_at, max_sessions))
    return result(refused_at is not None and refused_at <= max_sessions,
                  "sessions-per-client", "no refusal in %d HELLOs" % (max_sessions + 2))


def main(argv):
    (host, port, cluster, name, pid, max_conns, hto, n_idle, n_slow,
     rss_bound, logfile) = argv[1:12]
    port, pid, max_conns = int(port), int(pid), int(max_conns)
    hto, n_idle, n_slow, rss_bound = float(hto), int(n_idle), int(n_slow), int(rss_bound)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n_idle + n_slow + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    smp = Sampler(pid)
    smp.start()
    fails = flood(host, port, cluster, name, max_conns, hto, n_idle, n_slow)
    fails += nonreader(host, port, cluster, name, logfile)
    if len(argv) > 12:
        fails += sessions(host, port, cluster, int(argv[12]))
    smp.stop.set()
    smp.join()
    print("# %s: VmRSS %d kB at start, %d kB at most (+%d kB); fds %d at start, "
          "%d at most" % (name, smp.rss0, smp.rss_peak, smp.rss_peak - smp.rss0,
                          smp.fds0, smp.fds_peak))
    fails += result(smp.rss_peak - smp.rss0 <= rss_bound, "%s-rss-bounded" % name,
                    "VmRSS grew by %d kB, bound %d kB" % (smp.rss_peak - smp.rss0, rss_bound))
    fails += result(smp.fds_peak <= smp.fds0 + max_conns + FD_SLACK,
                    "%s-fds-bounded" % name, "%d open, %d at start, max_connections %d"
                    % (smp.fds_peak, smp.fds0, max_conns))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
