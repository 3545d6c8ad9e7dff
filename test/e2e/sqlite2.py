#!/usr/bin/env python3
"""sqlite2.py DB_ON_A DB_ON_B MODE N: SQLite on two mounts of one file.

Four processes, two through each mount, each commit N transactions that
insert a row and increment a counter (journal_mode MODE: DELETE, TRUNCATE
or PERSIST; WAL needs shared memory across hosts, which no network file
system gives).  SQLite serializes them with fcntl locks and trusts that a
lock makes the file's latest contents visible, as NFS promises.  Then,
through each mount: 4N rows, the counter at 4N, and a clean
integrity_check.  Prints "ok" or what differs."""
import multiprocessing, os, sqlite3, sys

pa, pb, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def worker(k, path):
    db = sqlite3.connect(path, timeout=300)
    # Every journal mode but WAL is a connection's own setting.
    got = db.execute("PRAGMA journal_mode=%s" % mode).fetchone()[0]
    if got.upper() != mode.upper():
        sys.exit("journal_mode %s, not %s" % (got, mode))
    for i in range(n):
        with db:
            db.execute("INSERT INTO t(k, v) VALUES (?, ?)", (k, i))
            db.execute("UPDATE c SET n = n + 1")
    db.close()


def main():
    db = sqlite3.connect(pa)
    db.execute("PRAGMA journal_mode=%s" % mode)
    db.execute("CREATE TABLE t(k, v)")
    db.execute("CREATE TABLE c(n)")
    db.execute("INSERT INTO c VALUES (0)")
    db.commit()
    db.close()
    ps = [multiprocessing.Process(target=worker, args=(k, pa if k % 2 else pb))
          for k in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    bad = ["worker %d exit %s" % (k, p.exitcode) for k, p in enumerate(ps)
           if p.exitcode != 0]
    for path in (pa, pb):
        db = sqlite3.connect(path)
        rows = db.execute("SELECT count(*) FROM t").fetchone()[0]
        count = db.execute("SELECT n FROM c").fetchone()[0]
        check = " ".join(r[0] for r in db.execute("PRAGMA integrity_check"))
        db.close()
        if rows != 4 * n or count != 4 * n or check != "ok":
            bad.append("%s: %d rows, counter %d of %d, %s" % (
                path, rows, count, 4 * n, check[:200]))
    print("; ".join(bad) if bad else "ok")


if __name__ == "__main__":
    main()
