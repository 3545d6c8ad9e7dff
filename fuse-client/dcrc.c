/* dcrc.c - the CRC32C a write's data carries from the moment it enters
 * the client (docs/ARCHITECTURE.md "Integrity").
 *
 * fc_write sums the kernel's bytes as it copies them into the write's
 * buffer; the WRITE of each piece sends a sum made of those, never one
 * taken of the buffer later, so bytes damaged in the client between entry
 * and send are refused by the iod (Write.data_crc) instead of stored.
 *
 * Sums of adjacent chunks join with tw_crc32c_combine.  Pure; any thread.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "common.h"
#include "dcrc.h"

/* Chunk i's bytes of the buffer: [*s, *e). */
static void chunk_bounds(const struct fc_dcrc *c, uint32_t i, size_t *s,
			 size_t *e)
{
	*s = i == 0 ? 0 : c->first + (size_t)(i - 1) * FC_DCRC_CHUNK;
	*e = i == 0 ? c->first : *s + FC_DCRC_CHUNK;
	if (*e > c->len)
		*e = c->len;
}

static uint32_t chunk_of(const struct fc_dcrc *c, size_t pos)
{
	return pos < c->first ? 0 :
	       1 + (uint32_t)((pos - c->first) / FC_DCRC_CHUNK);
}

struct fc_dcrc *fc_dcrc_new(const void *buf, size_t len, uint64_t off)
{
	size_t first = FC_DCRC_CHUNK - (size_t)(off % FC_DCRC_CHUNK);
	size_t n = len == 0 ? 0 :
		   len <= first ? 1 :
		   1 + (len - first + FC_DCRC_CHUNK - 1) / FC_DCRC_CHUNK;
	struct fc_dcrc *c = malloc(sizeof(*c) + n * sizeof(c->crc[0]));

	if (!c)
		return NULL;
	c->len = len;
	c->first = first;
	c->n = (uint32_t)n;
	for (uint32_t i = 0; i < c->n; i++) {
		size_t s, e;

		chunk_bounds(c, i, &s, &e);
		c->crc[i] = tw_crc32c(0, (const uint8_t *)buf + s, e - s);
	}
	return c;
}

int fc_dcrc_range(const struct fc_dcrc *c, const void *buf, size_t from,
		  size_t len, uint32_t *crc)
{
	const uint8_t *b = buf;
	size_t pos = from, end = from + len;
	uint32_t sum = 0;

	assert(end >= from && end <= c->len);
	while (pos < end) {
		uint32_t i = chunk_of(c, pos), part;
		size_t s, e, to;

		chunk_bounds(c, i, &s, &e);
		to = end < e ? end : e;
		if (pos == s && to == e) {
			part = c->crc[i];
		} else {
			uint32_t head = tw_crc32c(0, b + s, pos - s);
			uint32_t tail = tw_crc32c(0, b + to, e - to);

			part = tw_crc32c(0, b + pos, to - pos);
			if (tw_crc32c_combine(tw_crc32c_combine(head, part,
								to - pos),
					      tail, e - to) != c->crc[i])
				return -EBADMSG;
		}
		sum = tw_crc32c_combine(sum, part, to - pos);
		pos = to;
	}
	*crc = sum;
	return 0;
}
