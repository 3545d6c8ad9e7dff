#!/usr/bin/env python3
"""dwrite.py FILE OFFSET LENGTH BYTE - one O_DIRECT pwrite of LENGTH bytes
of value BYTE (0-255) at OFFSET of FILE, as an application would; prints
"written", or "error ERRNO" when the write fails (the drills check which)."""
import mmap
import os
import sys

path, off, length, byte = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, length)      # page-aligned, as O_DIRECT needs
buf.write(bytes([byte]) * length)
try:
    os.pwrite(fd, buf, off)
    print("written")
except OSError as e:
    print("error", e.errno)
