#!/usr/bin/env python3
"""wakeup_rtt.py - the floor under every TwinFS metadata operation on this
machine: the round trip of a small message between two processes, over a
Unix socketpair and over TCP on loopback, once with the two processes free
to run on different CPUs (what the scheduler does with mgrd, the client's
loop thread and the application) and once pinned to one CPU.

Each TwinFS metadata request is at least one such TCP round trip (client
loop thread <-> mgrd) on top of the FUSE round trip that bindfs also pays;
a create is two synchronous ones (LOOKUP, CREATE).  See RESULTS.md.

usage: wakeup_rtt.py [N]      (default 20000 round trips per figure)
Prints one line per figure: name, mean microseconds per round trip.
"""
import os
import socket
import sys
import time


def pingpong(make_pair, n, cpus):
    a, b = make_pair()
    pid = os.fork()
    if pid == 0:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
        a.close()
        for _ in range(n):
            b.sendall(b.recv(64))
        os._exit(0)
    b.close()
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    msg = b"x" * 32
    t0 = time.perf_counter()
    for _ in range(n):
        a.sendall(msg)
        a.recv(64)
    dt = time.perf_counter() - t0
    os.waitpid(pid, 0)
    a.close()
    return dt / n * 1e6


def tcp_pair():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    s, _ = ls.accept()
    ls.close()
    for x in (c, s):
        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c, s


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    all_cpus = os.sched_getaffinity(0)
    one = {min(all_cpus)}
    for name, pair in (("socketpair", socket.socketpair), ("tcp", tcp_pair)):
        print(f"{name}_any_cpu_us\t{pingpong(pair, n, None):.1f}")
        print(f"{name}_one_cpu_us\t{pingpong(pair, n, one):.1f}")
    os.sched_setaffinity(0, all_cpus)


if __name__ == "__main__":
    main()
