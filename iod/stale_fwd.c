/* stale_fwd.c - the forwards our twin refused as stale, waiting for the
 * sender's retry to heal them (twin.c "Stale forwards" says why they wait).
 * Pure: no I/O, no clock; twin.c feeds it and reports what falls due.
 *
 * An entry says what the twin may lack, and a mutation that reached both
 * twins, applied here after the refused one, takes away what it makes
 * equal on both.  "After" is our own order (`seq`): the twin answers a
 * refusal at once but an applied forward only when its transaction
 * closes, so the success of an earlier forward may come after the
 * refusal of a later one, and must not heal it.  A mutation our twin
 * forwards to us is applied here after everything listed (each entry's
 * refusal came after its local apply).  What heals what:
 *   - a ranged mutation over part of a range entry removes that part
 *     when it gives both what the refused one may have made differ
 *     (`needs`, IOD_STALE_CONTENTS / _SIZE / _ALLOC): a retry the client
 *     split or merged differently from the refused forward still heals
 *     it, piece by piece, while a punch over a refused write does not
 *     (that write may have extended the subfile);
 *   - a TRUNCATE to size S clips every range of the subfile that starts
 *     below S (both drop the bytes past it); a range wholly past S stays
 *     whole, since its refused write may have created the subfile, which
 *     a truncate does not create at the twin; and it heals a refused
 *     truncate to a size of at least S (both are then cut at S, and
 *     extended alike);
 *   - a DELETE of a subfile heals everything about it.
 * A split that would not fit keeps the entry whole: it then falls due and
 * is reported, which resyncs the twin (never wrong, only slower). */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "iod_int.h"

int iod_stale_add(struct iod_stale_list *l, const struct iod_stale_fwd *f)
{
	assert(f->kind != IOD_STALE_DELETE || f->cols != 0);
	assert(f->kind != IOD_STALE_RANGE ||
	       (f->len > 0 && f->len <= UINT64_MAX - f->off));
	if (l->n == IOD_STALE_MAX)
		return -ENOSPC;
	l->e[l->n++] = *f;
	return 0;
}

/* Is bit `column` in the DELETE mask?  Columns are 0..31 (IOD_MAX_COLUMNS). */
static bool col_in(uint32_t cols, uint32_t column)
{
	return column < 32 && (cols >> column) & 1u;
}

void iod_stale_heal_range(struct iod_stale_list *l, uint64_t seq,
			  uint64_t ino, uint32_t column, uint64_t off,
			  uint64_t len, uint8_t provides)
{
	uint64_t end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
	uint32_t n = l->n, k = 0;
	struct iod_stale_fwd tail[IOD_STALE_MAX];
	uint32_t n_tail = 0;

	if (len == 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct iod_stale_fwd s = l->e[i];
		uint64_t s_end = s.off + s.len;

		if (s.kind != IOD_STALE_RANGE || s.seq >= seq || s.ino != ino ||
		    s.column != column || s_end <= off || s.off >= end ||
		    (s.needs & ~provides) != 0) {
			l->e[k++] = s;
			continue;
		}
		if (s.off < off && s_end > end) {
			/* The middle healed: two pieces, if they fit (the
			 * list holds k + pieces set aside + what is left). */
			if (k + n_tail + (n - i) + 1 > IOD_STALE_MAX) {
				l->e[k++] = s;
				continue;
			}
			tail[n_tail] = s;
			tail[n_tail].off = end;
			tail[n_tail++].len = s_end - end;
			s.len = off - s.off;
			l->e[k++] = s;
		} else if (s.off < off) {
			s.len = off - s.off;
			l->e[k++] = s;
		} else if (s_end > end) {
			s.len = s_end - end;
			s.off = end;
			l->e[k++] = s;
		}
		/* else: covered whole, dropped */
	}
	assert(k + n_tail <= IOD_STALE_MAX);
	memcpy(&l->e[k], tail, n_tail * sizeof(tail[0]));
	l->n = k + n_tail;
}

void iod_stale_heal_trunc(struct iod_stale_list *l, uint64_t seq,
			  uint64_t ino, uint32_t column, uint64_t size)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < l->n; i++) {
		struct iod_stale_fwd s = l->e[i];

		if (s.seq < seq && s.ino == ino && s.column == column) {
			if (s.kind == IOD_STALE_TRUNC && size <= s.off)
				continue;
			if (s.kind == IOD_STALE_RANGE && s.off < size &&
			    s.len > size - s.off)
				s.len = size - s.off;
		}
		l->e[k++] = s;
	}
	l->n = k;
}

void iod_stale_heal_delete(struct iod_stale_list *l, uint64_t seq,
			   uint64_t ino, uint32_t cols)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < l->n; i++) {
		struct iod_stale_fwd s = l->e[i];

		if (s.seq < seq && s.ino == ino) {
			if (s.kind == IOD_STALE_DELETE) {
				s.cols &= ~cols;
				if (!s.cols)
					continue;
			} else if (col_in(cols, s.column)) {
				continue;
			}
		}
		l->e[k++] = s;
	}
	l->n = k;
}

const struct iod_stale_fwd *iod_stale_due(const struct iod_stale_list *l,
					  uint64_t now_ms)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (now_ms >= l->e[i].due_ms)
			return &l->e[i];
	return NULL;
}

void iod_stale_clear(struct iod_stale_list *l)
{
	l->n = 0;
}
