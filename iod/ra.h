/* ra.h - read-ahead for the strided reads of one subfile.
 *
 * While both twins are up, a client reads the rows of a subfile from the
 * two twins in turn (raid/raid.h r1_read_twin), so each twin sees a
 * stream of reads one row apart with a gap of one row between them.  The
 * kernel's read-ahead takes that for random reads and prefetches nothing:
 * every read waits for the disk on the iod's one loop thread.  iod_ra_note
 * finds such a stride and names the ranges to prefetch
 * (posix_fadvise WILLNEED, store_journal.c), so the disk reads ahead of
 * the requests while the loop serves others.
 *
 * A stride counts once the same forward gap is seen twice in a row (three
 * reads); a read that breaks it stops the prefetching until a stride is
 * seen twice again.  Plain sequential reads (no gap) are left to the
 * kernel's own read-ahead.  Pure: no I/O, the caller does the prefetch. */
#ifndef TWINFS_IOD_RA_H
#define TWINFS_IOD_RA_H

#include <stdbool.h>
#include <stdint.h>

/* Data kept prefetched ahead of a strided stream: four 512 KiB rows (two
 * per twin of a stripe unit pair), enough to keep the disk busy while the
 * loop serves one (test/bench/RESULTS.md "Session 42"). */
#define IOD_RA_WINDOW     (2u << 20)
#define IOD_RA_MAX        16           /* ranges named by one read */
#define IOD_RA_MAX_STRIDE (64ull << 20)   /* gaps past this: unrelated */

/* One subfile's stream, zeroed when its handle is opened. */
struct iod_ra {
	bool seen;           /* a read came before */
	uint64_t last;       /* its offset */
	uint64_t stride;     /* the gap from the one before it, or 0 */
	uint64_t next;       /* first offset of the stride not yet prefetched */
};

struct iod_ra_range {
	uint64_t off;
	uint64_t len;
};

/* A read of [off, off + len) of a subfile of size bytes: returns how many
 * ranges (0..IOD_RA_MAX) to prefetch, in pf[], each within size and never
 * named before while the stride holds.  window: bytes of data to keep
 * prefetched ahead (0: none). */
int iod_ra_note(struct iod_ra *ra, uint64_t off, uint64_t len,
		uint64_t size, uint64_t window,
		struct iod_ra_range pf[IOD_RA_MAX]);

#endif
