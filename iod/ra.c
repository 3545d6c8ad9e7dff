/* ra.c - read-ahead for the strided reads of one subfile (ra.h). */
#include "ra.h"

int iod_ra_note(struct iod_ra *ra, uint64_t off, uint64_t len,
		uint64_t size, uint64_t window,
		struct iod_ra_range pf[IOD_RA_MAX])
{
	uint64_t gap = ra->seen && off > ra->last ? off - ra->last : 0;
	uint64_t depth, from, end, o;
	bool holds;
	int n = 0;

	/* A gap no longer than the read is sequential (the kernel's) or
	 * overlapping; a huge one is a jump, not a stream. */
	if (gap <= len || gap > IOD_RA_MAX_STRIDE)
		gap = 0;
	holds = gap && gap == ra->stride;
	if (!holds)
		ra->next = 0;
	ra->seen = true;
	ra->last = off;
	ra->stride = gap;
	if (!holds || len == 0 || window == 0)
		return 0;
	depth = window / len;
	if (depth < 1)
		depth = 1;
	if (depth > IOD_RA_MAX)
		depth = IOD_RA_MAX;
	/* Resume after what was named already, in step with this read. */
	from = off + gap;
	if (ra->next > from && (ra->next - off) % gap == 0)
		from = ra->next;
	end = off + depth * gap;
	for (o = from; o <= end && o < size && n < IOD_RA_MAX; o += gap) {
		pf[n].off = o;
		pf[n].len = size - o < len ? size - o : len;
		n++;
	}
	if (n)
		ra->next = pf[n - 1].off + gap;
	return n;
}
