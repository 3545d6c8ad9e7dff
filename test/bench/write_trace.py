#!/usr/bin/env python3
"""write_trace.py - where one 4 KiB O_DIRECT write's time goes (README.md
here, "write_trace.sh").  Two subcommands, as root:

  record TRACEDIR OUT.txt SECONDS -- PID...
      Record with ftrace (tracefs at TRACEDIR, trace_clock mono): the
      kernel's fuse_request_send / fuse_request_end and every system call
      entry and exit (raw_syscalls) of every thread of the PIDs, for
      SECONDS; write the trace text to OUT.txt.
  analyse OUT.txt ROLES.json
      Follow each write through the client, the primary and the twin, and
      print the mean and median of every step.  ROLES.json names the
      threads: {"fio": [tid...], "client": [tid...], "iods": {name:
      [tid...]}, "fds": {"pid:fd": "fuse"|"sock"}}.

Each fio pwrite64 is one write (iodepth 1, so writes never overlap); every
event between its entry and exit belongs to it.  The primary is the iod
whose loop first reads a request of more than 4 KiB in that window, the
twin the second.  Tracing adds about 1 us to every system call.
"""
import json
import os
import re
import statistics
import sys
import time

# x86_64 system call numbers of the calls the steps are made of.
SYS = {0: "read", 1: "write", 17: "pread64", 18: "pwrite64", 19: "readv",
       20: "writev", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
       47: "recvmsg", 232: "epoll_wait", 281: "epoll_pwait",
       296: "pwritev", 328: "pwritev2", 426: "io_uring_enter",
       441: "epoll_pwait2", 75: "fdatasync", 74: "fsync"}

LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+):\s+(\w+):\s+(.*)$")


def w(path, s):
    with open(path, "w") as f:
        f.write(s)


def record(tdir, out, secs, pids):
    tids = []
    for p in pids:
        try:
            tids += os.listdir("/proc/%s/task" % p)
        except OSError:
            pass
    w(tdir + "/tracing_on", "0")
    w(tdir + "/trace", "")
    w(tdir + "/trace_clock", "mono")
    w(tdir + "/buffer_size_kb", "65536")
    w(tdir + "/set_event", "")
    w(tdir + "/set_event_pid", " ".join(tids))
    for e in ("raw_syscalls", "fuse"):
        w(tdir + "/events/%s/enable" % e, "1")
    w(tdir + "/tracing_on", "1")
    time.sleep(secs)
    w(tdir + "/tracing_on", "0")
    with open(tdir + "/trace") as f, open(out, "w") as o:
        for line in f:
            o.write(line)
    w(tdir + "/set_event", "")
    w(tdir + "/set_event_pid", "")
    w(tdir + "/trace", "")


def parse(path):
    ev = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            _, tid, ts, kind, rest = m.groups()
            t = float(ts) * 1e6
            if kind == "sys_enter":
                mm = re.match(r"NR (\d+) \(([0-9a-f]+), ([0-9a-f]+), ([0-9a-f]+)", rest)
                if not mm:
                    continue
                ev.append((t, int(tid), "enter", int(mm.group(1)),
                           int(mm.group(2), 16), int(mm.group(4), 16)))
            elif kind == "sys_exit":
                mm = re.match(r"NR (\d+) = (-?\d+)", rest)
                if not mm:
                    continue
                ev.append((t, int(tid), "exit", int(mm.group(1)),
                           int(mm.group(2)), 0))
            elif kind in ("fuse_request_send", "fuse_request_end"):
                mm = re.search(r"req (\d+)(?: opcode (\d+))?", rest)
                if not mm:
                    continue
                ev.append((t, int(tid), kind, int(mm.group(2) or 0),
                           int(mm.group(1)), 0))
    ev.sort(key=lambda e: e[0])
    return ev


def analyse(path, roles_path):
    roles = json.load(open(roles_path))
    fio = set(roles["fio"])
    client = set(roles["client"])
    iod_of = {t: n for n, ts in roles["iods"].items() for t in ts}
    ev = parse(path)
    # Pending syscall entries per thread (fd of the call), to give exits
    # their fd.
    last_enter = {}
    steps = {}
    n_ok = n_all = 0
    cur = None

    def add(name, v):
        steps.setdefault(name, []).append(v)

    prev_end = None
    for e in ev:
        t, tid, kind, nr, a0, a2 = e
        if kind == "enter":
            last_enter[tid] = (nr, a0, t)
        if tid in fio and nr == 18:
            if kind == "enter":
                cur = {"t0": t, "ev": []}
            elif kind == "exit" and cur is not None:
                cur["t1"] = t
                n_all += 1
                r = one(cur, client, iod_of)
                if r:
                    n_ok += 1
                    if prev_end is not None:
                        r.insert(0, ("fio: previous write returned -> next pwrite", cur["t0"] - prev_end))
                    for k, v in r:
                        add(k, v)
                prev_end = t
                cur = None
            continue
        if cur is not None:
            fd = last_enter.get(tid, (None, None, None))[1] if kind == "exit" else a0
            cur["ev"].append((t, tid, kind, nr, a0, fd))
    order = []
    for k in steps:
        if k not in order:
            order.append(k)
    print("writes: %d traced, %d followed through every step" % (n_all, n_ok))
    print("%-62s %8s %8s" % ("step", "mean us", "p50 us"))
    for k in order:
        v = steps[k]
        print("%-62s %8.1f %8.1f" % (k, statistics.mean(v), statistics.median(v)))


def one(w_, client, iod_of):
    """The steps of one write, or None when one is missing."""
    ev = w_["ev"]
    t0, t1 = w_["t0"], w_["t1"]

    def first(pred, after):
        for e in ev:
            if e[0] >= after and pred(e):
                return e
        return None
    send = first(lambda e: e[2] == "fuse_request_send" and e[3] == 16, t0)
    if not send:
        return None
    # client worker: read(/dev/fuse) returns the request (> 4 KiB)
    wk = first(lambda e: e[1] in client and e[2] == "exit" and e[3] == 0
               and e[4] > 4096, send[0])
    if not wk:
        return None
    # client sends the WRITE: the first write/writev/sendmsg > 4 KiB
    # entered by a client thread
    cs = first(lambda e: e[1] in client and e[2] == "exit"
               and e[3] in (1, 20, 46, 44) and e[4] > 4096, wk[0])
    cs_enter = first(lambda e: e[1] == cs[1] and e[2] == "enter"
                     and e[3] == cs[3], wk[0]) if cs else None
    if not cs or not cs_enter:
        return None
    # primary: the first iod read returning > 4 KiB
    pr = first(lambda e: e[1] in iod_of and e[2] == "exit" and e[3] in (0, 19, 45, 47)
               and e[4] > 4096, cs_enter[0])
    if not pr:
        return None
    prim = iod_of[pr[1]]
    pwake = last_wait_exit(ev, pr[1], pr[0])
    fwd = first(lambda e: iod_of.get(e[1]) == prim and e[2] == "enter"
                and e[3] in (1, 20, 46, 44), pr[0])
    if not fwd:
        return None
    tw = first(lambda e: e[1] in iod_of and iod_of[e[1]] != prim and e[2] == "exit"
               and e[3] in (0, 19, 45, 47) and e[4] > 4096, fwd[0])
    if not tw:
        return None
    twin = iod_of[tw[1]]
    twake = last_wait_exit(ev, tw[1], tw[0])
    # journal writes (pwritev/pwritev2 or io_uring_enter) of each
    def journal(iod, after):
        j = first(lambda e: iod_of.get(e[1]) == iod and e[2] == "enter"
                  and e[3] in (296, 328, 426, 18), after)
        if not j:
            return None, None
        return j, first(lambda e: e[1] == j[1] and e[2] == "exit"
                        and e[3] == j[3], j[0])
    pj, pje = journal(prim, fwd[0])
    tj, tje = journal(twin, tw[0])
    trep = first(lambda e: iod_of.get(e[1]) == twin and e[2] == "enter"
                 and e[3] in (1, 20, 46, 44), tje[0] if tje else tw[0])
    if not (pj and pje and tj and tje and trep):
        return None
    # primary reads the twin's reply (a small read after trep), replies
    prr = first(lambda e: iod_of.get(e[1]) == prim and e[2] == "exit"
                and e[3] in (0, 19, 45, 47) and 0 < e[4] < 4096, trep[0])
    if not prr:
        return None
    prwake = last_wait_exit(ev, prr[1], prr[0])
    prep = first(lambda e: iod_of.get(e[1]) == prim and e[2] == "enter"
                 and e[3] in (1, 20, 46, 44), prr[0])
    if not prep:
        return None
    # client reads the reply, answers FUSE (write to /dev/fuse)
    crr = first(lambda e: e[1] in client and e[2] == "exit"
                and e[3] in (0, 19, 45, 47) and 0 < e[4] < 4096, prep[0])
    if not crr:
        return None
    cwake = last_wait_exit(ev, crr[1], crr[0])
    cfr = first(lambda e: e[1] in client and e[2] == "enter"
                and e[3] in (1, 20), crr[0])
    end = first(lambda e: e[2] == "fuse_request_end" and e[4] == send[4],
                crr[0])
    if not (cfr and end):
        return None
    s = [
        ("fio pwrite -> kernel sends the FUSE request", send[0] - t0),
        ("FUSE request -> a client worker's read returns it", wk[0] - send[0]),
        ("worker read -> client sends the WRITE (encode, handoff)", cs_enter[0] - wk[0]),
        ("client send -> primary's loop wakes (epoll_wait returns)", (pwake or pr[0]) - cs_enter[0]),
        ("primary wakes -> its read of the request returns", pr[0] - (pwake or pr[0])),
        ("primary: request read -> forward sent to the twin", fwd[0] - pr[0]),
        ("primary: forward -> its journal write starts", pj[0] - fwd[0]),
        ("primary: journal write (system call)", pje[0] - pj[0]),
        ("forward sent -> twin's loop wakes", (twake or tw[0]) - fwd[0]),
        ("twin wakes -> its read of the forward returns", tw[0] - (twake or tw[0])),
        ("twin: forward read -> journal write starts", tj[0] - tw[0]),
        ("twin: journal write (system call)", tje[0] - tj[0]),
        ("twin: journal written -> reply sent", trep[0] - tje[0]),
        ("twin's reply -> primary's loop wakes", (prwake or prr[0]) - trep[0]),
        ("primary wakes -> reply read", prr[0] - (prwake or prr[0])),
        ("primary: twin's reply read -> its reply sent", prep[0] - prr[0]),
        ("primary's reply -> client's loop wakes", (cwake or crr[0]) - prep[0]),
        ("client wakes -> reply read", crr[0] - (cwake or crr[0])),
        ("client: reply read -> FUSE reply written", cfr[0] - crr[0]),
        ("FUSE reply -> request ends", end[0] - cfr[0]),
        ("request end -> fio's pwrite returns", t1 - end[0]),
        ("total: fio's pwrite", t1 - t0),
    ]
    if any(v < 0 for _, v in s):
        return None
    return s


def last_wait_exit(ev, tid, before):
    """The last epoll_wait/epoll_pwait exit of tid before `before`: when
    its loop woke."""
    best = None
    for e in ev:
        if e[0] > before:
            break
        if e[1] == tid and e[2] == "exit" and e[3] in (232, 281, 441):
            best = e[0]
    return best


def main(a):
    if len(a) >= 6 and a[1] == "record" and a[5] == "--":
        record(a[2], a[3], float(a[4]), a[6:])
    elif len(a) == 4 and a[1] == "analyse":
        analyse(a[2], a[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
