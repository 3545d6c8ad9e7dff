#!/usr/bin/env python3
"""lost_writer.py PATH SYNCED UNSYNCED: the writer t_client_crash.sh kills.

Writes SYNCED bytes to PATH and fsyncs, then UNSYNCED more bytes in one
write() (no fsync, so no size report but the client's periodic one), prints
"written" and waits, the file still open, to be killed with its mount.  The
bytes are pattern(PATH) (below), so the test can check any prefix.
"""
import os
import sys
import time


def pattern(n):
    """n bytes: 4 KiB blocks, each filled with its block number mod 251 + 1
    (never zero, so a hole shows)."""
    return b"".join(bytes([(i % 251) + 1]) * 4096 for i in range(n // 4096))


def main():
    path, synced, unsynced = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    data = pattern(synced + unsynced)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data[:synced])
    os.fsync(fd)
    os.write(fd, data[synced:])
    print("written", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main()
