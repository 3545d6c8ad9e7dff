#!/usr/bin/env python3
"""benchtool.py - helpers of test/bench/run (see README.md here).

Subcommands (all print their result on stdout, one line):

  fio JSONFILE SIDE            bw_MBps iops lat_us io_bytes of fio's first job
                               (group_reporting: the aggregate) for SIDE
                               read|write
  meta-create DIR N            create N empty files DIR/fNNNNNN; ops/s
  meta-stat DIR N              stat them in creation order; ops/s
  meta-unlink DIR N            unlink them, then rmdir DIR; ops/s
  small-files DIR N SIZE       create N files DIR/fNNNNNN of SIZE bytes each
                               (open O_CREAT|O_EXCL, one write, close); ops/s
  mkgrep FILE SIZE_MIB         write a text file of SIZE_MIB MiB made of the
                               C headers under /usr/include, repeated
  cpu PID...                   user+sys seconds of the PIDs (all threads),
                               from /proc/PID/stat (a gone PID counts 0)
  quiesce TIMEOUT JOURNAL... -- PID...
                               wait until the iods are idle (no checkpoint
                               running; see cmd_quiesce); print the seconds
                               waited, or "timeout:SECONDS" after TIMEOUT s
  modes-report RAW.tsv MODE...
                               journal_modes.sh's table (README.md here)
  report RAW.tsv SUMMARY.tsv MODE [CEILING.tsv [PEERS.tsv]]
                               medians per target and workload, ratios,
                               targets (README.md here); prints the table (and,
                               with CEILING.tsv, the table against hopfs;
                               with PEERS.tsv and figures of the peers,
                               the table against MooseFS and GlusterFS)
  check OUTDIR                 run --quick's self-check for CI: a figure
                               for every workload on every target (and
                               every channel mode in channel.tsv), no
                               failed measurement; judges no figure
"""
import json
import math
import os
import statistics
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cmd_fio(path, side):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    j = json.loads(text[text.index("{"):])
    s = j["jobs"][0][side]
    lat = s.get("lat_ns", {}).get("mean", 0.0) / 1000.0
    print("%.1f %.1f %.1f %d" % (s["bw_bytes"] / 1e6, s["iops"], lat,
                                 s["io_bytes"]))


def names(d, n):
    return [os.path.join(d, "f%06d" % i) for i in range(n)]


def cmd_meta_create(d, n):
    cmd_small_files(d, n, 0)


def cmd_small_files(d, n, size):
    """Empty files (size 0) are meta-create: nothing but open and close."""
    os.mkdir(d)
    paths = names(d, n)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC
    data = os.urandom(size)
    t = time.perf_counter()
    for p in paths:
        fd = os.open(p, flags, 0o644)
        if data:
            os.write(fd, data)
        os.close(fd)
    print("%.1f" % (n / (time.perf_counter() - t)))


def cmd_meta_stat(d, n):
    paths = names(d, n)
    t = time.perf_counter()
    for p in paths:
        os.stat(p)
    print("%.1f" % (n / (time.perf_counter() - t)))


def cmd_meta_unlink(d, n):
    paths = names(d, n)
    t = time.perf_counter()
    for p in paths:
        os.unlink(p)
    el = time.perf_counter() - t
    os.rmdir(d)
    print("%.1f" % (n / el))


def cmd_mkgrep(path, mib):
    want = mib << 20
    chunks, total = [], 0
    for root, _, files in os.walk("/usr/include"):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            try:
                with open(os.path.join(root, f), "rb") as fh:
                    b = fh.read()
            except OSError:
                continue
            chunks.append(b)
            total += len(b)
            if total >= min(want, 64 << 20):
                break
        if total >= min(want, 64 << 20):
            break
    blob = b"".join(chunks)
    if not blob:
        sys.exit("mkgrep: no headers under /usr/include")
    written = 0
    with open(path, "wb") as out:
        while written < want:
            piece = blob[:want - written]
            out.write(piece)
            written += len(piece)
    print(written)


def ticks(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            st = f.read()
    except OSError:
        return 0
    fields = st[st.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])   # utime, stime (fields 14, 15)


def cmd_cpu(pids):
    print("%.2f" % (sum(ticks(p) for p in pids) / CLK_TCK))


def superblocks(journals):
    out = []
    for j in journals:
        try:
            with open(j, "rb") as f:
                out.append(f.read(128))
        except OSError:
            out.append(b"")
    return out


def write_bytes(pid):
    """Bytes the process (all threads, io_uring workers included) sent
    towards the storage layer: /proc/PID/io write_bytes."""
    try:
        with open("/proc/%s/io" % pid) as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cmd_quiesce(timeout, journals, pids):
    """Idle = for 2 s (4 polls of 0.5 s): no journal superblock changed (a
    checkpoint that ends writes the new tail there), the iods together
    dirtied under 256 KiB (a checkpoint in progress writes homes) and used
    under 10 % of one core (idle iods use about 1 % each: heartbeats)."""
    t0 = time.monotonic()
    step, need = 0.5, 4
    quiet = 0

    def sample():
        return (superblocks(journals), sum(ticks(p) for p in pids),
                sum(write_bytes(p) for p in pids))
    last = sample()
    while True:
        time.sleep(step)
        cur = sample()
        busy = (cur[0] != last[0]
                or cur[1] - last[1] > 0.10 * step * CLK_TCK
                or cur[2] - last[2] > 256 << 10)
        quiet = 0 if busy else quiet + 1
        last = cur
        el = time.monotonic() - t0
        if quiet >= need:
            print("%.1f" % (el - need * step))
            return
        if el >= timeout:
            print("timeout:%.0f" % el)
            return


def cmd_modes_report(raw, modes):
    """journal_modes.sh's table: each mode's figure per workload, the disk
    before and after, journal / writeback, and the journal ceilings
    (docs/ARCHITECTURE.md "Journal")."""
    v = {}
    for line in open(raw).read().splitlines()[1:]:
        t, w, val, unit, note = (line.split("\t") + [""])[:5]
        try:
            v[(t, w)] = (float(val), unit)
        except ValueError:
            v[(t, w)] = (None, unit)
    # docs/ARCHITECTURE.md "Journal": both twins on one disk.  Sustained writes larger
    # than the journal: journal 0.25 x disk, ordered/writeback 0.5 x; bursts
    # that fit the journal: 0.5 x.  Other workloads: no stated ceiling.
    def ceil(w):
        if w == "seq_1g":
            return (0.25, 0.5)
        return (0.5, 0.5) if w.startswith("burst_") else None
    order = []
    for (_, w) in v:
        if w != "settle" and w not in order:
            order.append(w)
    cols = ["disk", "disk_end"] + modes
    print("%-11s %-8s" % ("workload", "unit")
          + "".join("%11s" % c for c in cols)
          + "%14s" % "jnl/wb" + "%22s" % "ceiling jnl / wb")
    for w in order:
        unit = next((u for (t, x), (_, u) in v.items() if x == w), "")
        row = "%-11s %-8s" % (w, unit)
        for c in cols:
            x = v.get((c, w), (None, ""))[0]
            row += "%11s" % ("-" if x is None else "%.1f" % x)
        j = v.get(("journal", w), (None,))[0]
        b = v.get(("writeback", w), (None,))[0]
        row += "%14s" % ("%.2f" % (j / b) if j and b else "-")
        disk = [v.get((c, "direct_1g"), (None,))[0]
                for c in ("disk", "disk_end")]
        disk = [d for d in disk if d]
        if ceil(w) and disk:
            d = sum(disk) / len(disk)
            row += "%22s" % ("%.0f / %.0f MB/s"
                             % (ceil(w)[0] * d, ceil(w)[1] * d))
        else:
            row += "%22s" % "-"
        print(row)


# workload -> (unit, higher_is_better, baseline, factor); factor None = no
# target.  The targets of README.md here, "Ratios, medians, targets".
WORKLOADS = [
    ("seq_write", "MB/s", True, "local", 0.22),
    ("seq_read", "MB/s", True, "local", 0.6),
    ("par4_write", "MB/s", True, "local", 0.22),
    ("par4_read", "MB/s", True, "local", 0.5),
    ("randread_4k", "IOPS", True, "bindfs", 0.5),
    ("randread_4k_lat", "us", False, None, None),
    ("randread_4k_paced_lat", "us", False, None, None),
    ("randwrite_4k", "IOPS", True, "bindfs", 0.5),
    ("randwrite_4k_lat", "us", False, None, None),
    ("meta_create", "ops/s", True, "bindfs", 2.0),
    ("meta_stat", "ops/s", True, "bindfs", 0.5),
    ("meta_unlink", "ops/s", True, "bindfs", 0.5),
    ("tree_extract", "s", False, "bindfs", 1.5),
    ("ls_lR", "s", False, "bindfs", 2.0),
    ("tree_rm", "s", False, "bindfs", 1.5),
    ("grep_big", "s", False, "local", 1.5),
    ("cpu_write", "s/GiB", False, None, None),
    ("cpu_read", "s/GiB", False, None, None),
]
TARGETS = ("local", "bindfs", "twinfs")
# run --peers (peers.sh): name, short name in column heads
PEERS = (("moosefs", "mfs"), ("glusterfs", "gfs"))


def fmt(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    return "%.2f" % v


def cmd_report(raw, summary, mode, ceiling=None, peers_out=None):
    vals = {}
    with open(raw) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            try:
                v = float(r["value"])
            except ValueError:
                continue
            vals.setdefault((r["workload"], r["target"]), {})[r["run"]] = v
    rows = []
    # The peers' columns only when the run measured them.
    peers = [(p, a) for p, a in PEERS
             if any(t == p for _, t in vals)] if peers_out else []
    for name, unit, higher, base, factor in WORKLOADS:
        if name in ("seq_write", "par4_write") and mode != "journal":
            factor = 0.45           # data=ordered / writeback (ceiling 0.5)
        med = {}
        for t in TARGETS:
            runs = vals.get((name, t), {})
            med[t] = statistics.median(runs.values()) if runs else None
        if all(med[t] is None for t in TARGETS):
            continue

        def ratio(b):
            tw, bb = med["twinfs"], med[b]
            return tw / bb if tw is not None and bb else None
        r_loc, r_bfs = ratio("local"), ratio("bindfs")
        r_peer = []
        for p, _ in peers:
            pm = vals.get((name, p), {})
            pm = statistics.median(pm.values()) if pm else None
            tw = med["twinfs"]
            r_peer.append(fmt(tw / pm if tw is not None and pm else None))
        # Median over runs of the per-run ratio (both figures from the same
        # run): robust against drift between runs.
        run_ratio = None
        if base:
            tw, bb = vals.get((name, "twinfs"), {}), vals.get((name, base), {})
            rr = [tw[k] / bb[k] for k in tw if k in bb and bb[k]]
            run_ratio = statistics.median(rr) if rr else None
        if factor is None:
            target, met = "-", "-"
        else:
            r = r_loc if base == "local" else r_bfs
            target = "%s %g x %s%s" % (">=" if higher else "<=", factor, base,
                                       "" if higher else " time")
            if r is None:
                met = "n/a"
            else:
                met = "met" if (r >= factor if higher else r <= factor) \
                    else "NOT met"
        rows.append((name, unit, fmt(med["local"]), fmt(med["bindfs"]),
                     fmt(med["twinfs"]), fmt(r_loc), fmt(r_bfs), *r_peer,
                     fmt(run_ratio), target, met))
    cols = ("workload", "unit", "local", "bindfs", "twinfs", "tw/local",
            "tw/bindfs", *("tw/" + a for _, a in peers), "run_ratio",
            "target", "met")
    with open(summary, "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    # The physical ceiling of the write targets (docs/ARCHITECTURE.md
    # "Journal"): with
    # both twins on one disk every byte is written four times with
    # data=journal (0.25 x disk), twice otherwise (0.5 x).
    disk = vals.get(("disk_write", "local"), {})
    if disk:
        d = statistics.median(disk.values())
        limit = 0.25 if mode == "journal" else 0.5
        rows.append(("disk_write", "MB/s", fmt(d), "-", "-", "-", "-",
                     *("-" for _ in peers), "-", "-", "-"))
        for name in ("seq_write", "par4_write"):
            tw = vals.get((name, "twinfs"), {})
            if not tw:
                continue
            rr = [tw[k] / disk[k] for k in tw if k in disk and disk[k]]
            r = statistics.median(tw.values()) / d
            rows.append((name + "/disk", "ratio", "-", "-", fmt(r), "-", "-",
                         *("-" for _ in peers),
                         fmt(statistics.median(rr)) if rr else "-",
                         "ceiling %g x disk" % limit,
                         "%.0f%% of it" % (100 * r / limit)))
    print_table(cols, rows, (0, 1, len(cols) - 2, len(cols) - 1))
    if ceiling:
        ceiling_report(vals, ceiling)
    if peers:
        peers_report(vals, peers, peers_out)


def print_table(cols, rows, left):
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = lambda r: "  ".join(
        (s.ljust(w[i]) if i in left else s.rjust(w[i]))
        for i, s in enumerate(r)).rstrip()
    print(line(cols))
    print(line(tuple("-" * x for x in w)))
    for r in rows:
        print(line(r))


def ceiling_report(vals, out):
    """With run --ceiling: hopfs (TwinFS's hops and nothing else, hopfs.c)
    against bindfs, for the targets relative to bindfs.  hop/bindfs is the
    best ratio a design with those hops reaches here; tw/hop is how close
    TwinFS comes to it (rates: < 1 is slower; times: > 1 is slower).  Both
    are ratios of the medians, as "met" in the main table.  hopj (random
    writes only) is hopfs journaling each write first (hopfs -j), tw/hopj
    how close TwinFS comes to the hops plus what its guarantee costs.
    Written to out as TSV too."""
    rows = []
    med = lambda d: statistics.median(d.values()) if d else None
    div = lambda a, b: a / b if a is not None and b else None
    for name, unit, higher, base, factor in WORKLOADS:
        if base != "bindfs" and not name.startswith("rand"):
            continue
        hop = med(vals.get((name, "hopfs"), {}))
        if hop is None:
            continue
        bfs = med(vals.get((name, "bindfs"), {}))
        tw = med(vals.get((name, "twinfs"), {}))
        h_b = div(hop, bfs)
        if factor is None:
            target, verdict = "-", "-"
        else:
            target = "%s %g x bindfs%s" % (">=" if higher else "<=", factor,
                                           "" if higher else " time")
            t_b = div(tw, bfs)
            meets = lambda r: r is not None and (r >= factor if higher
                                                 else r <= factor)
            if meets(t_b):
                # TwinFS answers some requests without a hop (statahead,
                # READDIRPLUS): hopfs bounds the hops, not TwinFS.
                verdict = "met by TwinFS"
            elif h_b is None:
                verdict = "n/a"
            elif meets(h_b):
                verdict = "reachable"
            else:
                verdict = "above the ceiling"
        hopj = med(vals.get((name, "hopj"), {}))
        rows.append((name, unit, fmt(bfs), fmt(hop), fmt(tw), fmt(h_b),
                     fmt(div(tw, hop)), fmt(hopj), fmt(div(tw, hopj)),
                     target, verdict))
    if not rows:
        return
    cols = ("workload", "unit", "bindfs", "hopfs", "twinfs", "hop/bindfs",
            "tw/hop", "hopj", "tw/hopj", "target", "with TwinFS's hops")
    with open(out, "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    print()
    print("The ceiling: hopfs does TwinFS's hops and nothing else (hopfs.c);")
    print("hopj journals each write first as TwinFS's twins do (hopfs -j).")
    print_table(cols, rows, (0, 1, 9, 10))


def peers_report(vals, peers, out):
    """With run --peers: TwinFS against MooseFS and GlusterFS on every
    workload.  tw/P is the ratio of the medians (rates: < 1 is slower;
    times and latencies: > 1 is slower), run_P the median of the per-run
    ratios (both figures of the same run).  "ahead" when TwinFS is ahead of
    every peer by the ratio of the medians.  Written to out as TSV too."""
    rows = []
    med = lambda d: statistics.median(d.values()) if d else None
    for name, unit, higher, _, _ in WORKLOADS:
        tw_runs = vals.get((name, "twinfs"), {})
        tw = med(tw_runs)
        cells, ahead = [], (True if tw is not None else None)
        for p, _ in peers:
            pr = vals.get((name, p), {})
            pm = med(pr)
            r = tw / pm if tw is not None and pm else None
            rr = [tw_runs[k] / pr[k] for k in tw_runs if k in pr and pr[k]]
            cells += [fmt(pm), fmt(r),
                      fmt(statistics.median(rr)) if rr else "-"]
            if r is None:
                ahead = None
            elif ahead is not None and (r < 1 if higher else r > 1):
                ahead = False
        if all(c == "-" for c in cells):
            continue
        rows.append((name, unit, fmt(tw), *cells,
                     "-" if ahead is None else
                     "ahead" if ahead else "BEHIND"))
    cols = ["workload", "unit", "twinfs"]
    for p, a in peers:
        cols += [p, "tw/" + a, "run_" + a]
    cols.append("vs all peers")
    with open(out, "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    print()
    print("The peers, same run (peers.sh; rates: tw/P > 1 is ahead; "
          "s, us, s/GiB: tw/P < 1 is ahead).")
    print_table(cols, rows, (0, 1, len(cols) - 1))


def cmd_check(out):
    """run --quick's self-check, for CI: summary.tsv has a figure for every
    workload on local, bindfs and TwinFS (no CPU figure for local: it has
    no server process), ceiling.tsv one on bindfs, hopfs and TwinFS for
    each of its workloads, and raw.tsv no failed measurement.  Judges no
    figure.  Prints each problem and a verdict; exits 1 on a problem."""
    bad = []

    def table(name):
        path = os.path.join(out, name)
        try:
            with open(path) as f:
                head = f.readline().rstrip("\n").split("\t")
                return [dict(zip(head, line.rstrip("\n").split("\t")))
                        for line in f]
        except OSError as e:
            bad.append("%s: %s" % (path, e.strerror))
            return []

    def number(s, unit):
        """A measured figure: finite, and above zero for a rate or a
        latency (a time in seconds may round to 0 on a --quick run)."""
        try:
            v = float(s)
        except (TypeError, ValueError):
            return False
        if not math.isfinite(v) or v < 0:
            return False
        return v > 0 or unit in ("s", "s/GiB")

    for name, cols in (("summary.tsv", ("local", "bindfs", "twinfs")),
                       ("ceiling.tsv", ("bindfs", "hopfs", "twinfs"))):
        rows = {r["workload"]: r for r in table(name) if "workload" in r}
        for w, unit, _, base, _ in WORKLOADS:
            if name == "ceiling.tsv" and base != "bindfs" \
                    and not w.startswith("rand"):
                continue
            if w not in rows:
                bad.append("%s: no row %s" % (name, w))
                continue
            for c in cols:
                if c == "local" and w.startswith("cpu_"):
                    continue
                if not number(rows[w].get(c), unit):
                    bad.append("%s: %s on %s is %r"
                               % (name, w, c, rows[w].get(c)))
    # chan_bench's channel.tsv: a figure for every mode of every workload.
    chan = table("channel.tsv")
    for r in chan:
        if not number(r.get("value"), r.get("unit")):
            bad.append("channel.tsv: %s %s is %r" % (r.get("mode"),
                       r.get("workload"), r.get("value")))
    for m in ("none", "integrity", "encrypt"):
        if chan and not any(r.get("mode") == m for r in chan):
            bad.append("channel.tsv: no row for mode %s" % m)
    for r in table("raw.tsv"):
        if r.get("value") == "fail":
            bad.append("raw.tsv: run %s %s %s failed %s"
                       % (r.get("run"), r.get("target"), r.get("workload"),
                          r.get("note", "")))
    for b in bad:
        print(b)
    print("bench check: %s" % ("ok" if not bad else "%d problem(s)"
                                % len(bad)))
    sys.exit(1 if bad else 0)


def main(a):
    if len(a) < 2:
        sys.exit(__doc__)
    c = a[1]
    if c == "fio":
        cmd_fio(a[2], a[3])
    elif c == "meta-create":
        cmd_meta_create(a[2], int(a[3]))
    elif c == "small-files":
        cmd_small_files(a[2], int(a[3]), int(a[4]))
    elif c == "meta-stat":
        cmd_meta_stat(a[2], int(a[3]))
    elif c == "meta-unlink":
        cmd_meta_unlink(a[2], int(a[3]))
    elif c == "mkgrep":
        cmd_mkgrep(a[2], int(a[3]))
    elif c == "cpu":
        cmd_cpu(a[2:])
    elif c == "quiesce":
        i = a.index("--")
        cmd_quiesce(float(a[2]), a[3:i], a[i + 1:])
    elif c == "modes-report":
        cmd_modes_report(a[2], a[3:])
    elif c == "report":
        cmd_report(a[2], a[3], a[4], a[5] if len(a) > 5 and a[5] else None,
                   a[6] if len(a) > 6 else None)
    elif c == "check" and len(a) == 3:
        cmd_check(a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
