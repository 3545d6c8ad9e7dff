#!/usr/bin/env python3
"""tamper_proxy.py PORT DIR N: a man in the middle on loopback.  Listens
on a free port of 127.0.0.1, prints it, takes one connection and relays it
to 127.0.0.1:PORT, frame by frame (proto/FORMAT.md §1), flipping one bit
of the last body byte of frame N (from 0) in direction DIR (c2s: from the
connecting side, s2c: back).  The first two frames each way are AUTH's,
in the clear; every later one carries a 16-byte tag after its data.
Exits when either side closes (at most 30 s)."""
import select, socket, struct, sys

port, direction, nth = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
print(ls.getsockname()[1], flush=True)
ls.settimeout(30)
c, _ = ls.accept()
s = socket.create_connection(("127.0.0.1", port))
bufs = {c: b"", s: b""}
count = {c: 0, s: 0}
peer = {c: s, s: c}
flip_from = c if direction == "c2s" else s
while True:
    r, _, _ = select.select([c, s], [], [], 30)
    if not r:
        break
    src = r[0]
    data = src.recv(1 << 20)
    if not data:
        break
    bufs[src] += data
    while len(bufs[src]) >= 32:
        msg_len, data_len = struct.unpack_from("<II", bufs[src], 24)
        n = count[src]
        flen = 32 + msg_len + data_len + (16 if n >= 2 else 0)
        if len(bufs[src]) < flen:
            break
        frame = bytearray(bufs[src][:flen])
        if src is flip_from and n == nth and msg_len:
            frame[32 + msg_len - 1] ^= 0x01
            print("flipped a bit of frame %d (%s)" % (n, direction),
                  file=sys.stderr, flush=True)
        peer[src].sendall(frame)
        bufs[src] = bufs[src][flen:]
        count[src] += 1
