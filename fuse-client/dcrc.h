/* dcrc.h - the CRC32C a write's data carries from the moment it enters
 * the client (dcrc.c; docs/ARCHITECTURE.md "Integrity"). */
#ifndef TWINFS_FC_DCRC_H
#define TWINFS_FC_DCRC_H

#include <stddef.h>
#include <stdint.h>

#include "raid.h"

/* The sums of a write's buffer, taken as it entered: one per chunk of the
 * file's bytes between multiples of FC_DCRC_CHUNK.  Every stripe unit
 * boundary (stripe sizes are powers of two, at least R0_MIN_STRIPE_SIZE)
 * is a chunk boundary, so the WRITE of each piece of the write at its
 * entry offset gets its Write.data_crc by combining whole chunks' sums,
 * without reading the buffer again. */
#define FC_DCRC_CHUNK R0_MIN_STRIPE_SIZE

struct fc_dcrc {
	size_t len;                /* bytes of the buffer covered */
	size_t first;              /* chunk 0: [0, min(first, len)) */
	uint32_t n;                /* chunks; chunk i > 0 starts at
				    * first + (i - 1) * FC_DCRC_CHUNK */
	uint32_t crc[];            /* tw_crc32c(0, chunk i) */
};

/* The sums of buf[0, len), which is the file's [off, off + len).  Any
 * thread.  NULL: no memory. */
struct fc_dcrc *fc_dcrc_new(const void *buf, size_t len, uint64_t off);
/* The CRC32C of buf[from, from + len) (buf: the buffer c was taken of, as
 * it is now; the range within c->len) from the sums in c.  A chunk the
 * range covers only in part (the write moved, as an O_APPEND one does at
 * mgrd's reservation, or was shortened at the size limit) is summed again
 * in both its parts, which must combine to the sum taken at entry.  0 and
 * *crc, or -EBADMSG: the bytes of such a chunk changed since they entered. */
int fc_dcrc_range(const struct fc_dcrc *c, const void *buf, size_t from,
		  size_t len, uint32_t *crc);

#endif
