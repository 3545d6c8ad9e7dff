#!/usr/bin/env python3
"""metrics.py - t_metrics.sh's HTTP side (docs/OPERATIONS.md "Metrics").

  metrics.py get URL                 print the body (exit 1 unless 200)
  metrics.py status URL [METHOD]     print the HTTP status code
  metrics.py sum FILE NAME [L=V...]  print the sum of NAME's samples whose
                                     labels include every L=V (0 if none)
  metrics.py peak URL NAME STOP      poll URL every 0.1 s until the file
                                     STOP exists; print the largest value
                                     NAME's samples summed to
  metrics.py big HOST PORT           send a request head over 8 KiB; print
                                     the status code of the answer
  metrics.py burst HOST PORT N       open N connections at once, send
                                     nothing; print how many got an answer
                                     (408 after the read deadline) and how
                                     many were closed unanswered
"""
import http.client
import os
import re
import socket
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        if r.status != 200:
            sys.exit(1)
        sys.stdout.write(r.read().decode())


def status(url, method="GET"):
    m = re.match(r'http://([^/:]+):(\d+)(/.*)', url)
    c = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=10)
    c.request(method, m.group(3))
    print(c.getresponse().status)


def total(path, name, want):
    s = 0.0
    for line in open(path):
        m = SAMPLE.match(line.strip())
        if not m or m.group(1) != name:
            continue
        labels = dict(LABEL.findall(m.group(3) or ""))
        if all(labels.get(k) == v for k, v in want.items()):
            s += float(m.group(4))
    print(int(s) if s == int(s) else s)


def peak(url, name, stop):
    top = 0.0
    while True:
        done = os.path.exists(stop)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except OSError:
            body = ""
        s = 0.0
        for line in body.splitlines():
            m = SAMPLE.match(line.strip())
            if m and m.group(1) == name:
                s += float(m.group(4))
        top = max(top, s)
        if done:
            break
        time.sleep(0.1)
    print(int(top))


def big(host, port):
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 9000)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    try:
        while not data.endswith(b"\n") and len(data) < 64:
            more = s.recv(64)
            if not more:
                break
            data += more
    except ConnectionResetError:
        pass
    s.close()
    print(data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "none")


def burst(host, port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=10)
        socks.append(s)
    answered = closed = 0
    deadline = time.time() + 10
    for s in socks:
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            data = s.recv(64)
        except (ConnectionResetError, socket.timeout):
            data = b""
        if data.startswith(b"HTTP/1.1 408"):
            answered += 1
        elif not data:
            closed += 1
        s.close()
    print(answered, closed)


def main():
    cmd = sys.argv[1]
    if cmd == "get":
        get(sys.argv[2])
    elif cmd == "status":
        status(*sys.argv[2:4])
    elif cmd == "sum":
        want = dict(a.split("=", 1) for a in sys.argv[4:])
        total(sys.argv[2], sys.argv[3], want)
    elif cmd == "peak":
        peak(*sys.argv[2:5])
    elif cmd == "big":
        big(sys.argv[2], int(sys.argv[3]))
    elif cmd == "burst":
        burst(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
