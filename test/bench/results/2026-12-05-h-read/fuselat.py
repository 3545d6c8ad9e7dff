import sys, re, collections
# perf script of fuse_request_send/end (-a): per-opcode latency on the connection of COMM's requests
conn_want = sys.argv[1]
send = {}; conn = conn_want
stats = collections.defaultdict(list)
for l in sys.stdin:
    m = re.search(r'^\s*(\S+)\s+\d+\s+\[\d+\]\s+(\d+\.\d+):\s+fuse:fuse_request_(send|end):\s+connection (\d+) req (\d+)', l)
    if not m:
        continue
    who, t, kind, c, u = m.group(1), float(m.group(2)), m.group(3), m.group(4), m.group(5)
    if c != conn:
        continue
    if kind == 'send':
        op = re.search(r'\((FUSE_\w+)\)', l)
        send[u] = (t, op.group(1) if op else '?')
    elif u in send:
        t0, op = send.pop(u)
        stats[op].append((t - t0) * 1e6)
tot = 0
for op, v in sorted(stats.items(), key=lambda x: -sum(x[1])):
    v.sort(); tot += sum(v)
    print("%-20s n=%6d mean=%7.1f p50=%7.1f sum=%7.3fs" % (op, len(v), sum(v)/len(v), v[len(v)//2], sum(v)/1e6))
print("total in FUSE requests %.3fs" % (tot / 1e6))
