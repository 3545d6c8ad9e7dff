/* store_intent.c - the iod's write-intent log (docs/ARCHITECTURE.md
 * "Twins": md's bitmap, 1 MiB regions, kept on both twins), on top of the
 * journal glue of store_journal.c.
 *
 * A region is marked by a mark record in the same journal handle as the
 * write that touches it (store_journal.c), unless the live set already
 * holds it (SJ2).  The live set is in memory: obj -> region -> the touch
 * generation of its last write; it is rebuilt at open from the persisted
 * part, the xattr user.twinfs.wil of each subfile (format in store.c),
 * which mark and clear records update when they are applied at home
 * (checkpoint, replay, or close in ordered/writeback modes).
 *
 * Clearing (twin.c drives it): iod_store_intent_epoch returns a token and
 * starts a new generation; after a sync of this iod and of its twin that
 * both started later, iod_store_intent_clear(token) journals clear records
 * for every region whose last write is not newer than the token (SJ3).
 * Regions the twin missed are pinned and never cleared here; the twin's
 * resync reads them through iod_store_intents.  A pin is kept apart from
 * the region's mark: a pin lives in memory only, so a region (or a whole
 * subfile) that is pinned but not marked must still be marked by the
 * next write or truncate of it (store_intent_covers), or a restart would
 * leave nothing on disk that names it.
 *
 * It does not decide when the twin has synced (twin.c does) and does not
 * copy anything (resync).
 */
#include "store_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_PAGE        4096u
/* A region value's pin bit; the rest is the mark's touch generation + 1
 * (0: no mark).  A pinned region is never cleared by a cycle. */
#define INTENT_PIN       (1ull << 63)

static uint64_t rval(const void *v)
{
	return (uint64_t)(uintptr_t)v;
}

static void *rval_ptr(uint64_t v)
{
	assert(v != 0);            /* NULL means absent */
	return (void *)(uintptr_t)v;
}

static bool whole(const struct intent *in)
{
	return in->all || in->all_pinned;
}

struct intent *store_intent_get(struct iod_store *s, uint64_t obj,
				bool create)
{
	struct intent *in = tw_hmap_get(&s->intents, obj + 1);

	if (in || !create)
		return in;
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->obj = obj;
	tw_hmap_init(&in->regions);
	if (tw_hmap_put(&s->intents, obj + 1, in) < 0) {
		free(in);
		return NULL;
	}
	return in;
}

void store_intent_drop(struct iod_store *s, struct intent *in)
{
	s->n_marked -= in->regions.count + (whole(in) ? 1 : 0);
	tw_hmap_del(&s->intents, in->obj + 1);
	tw_hmap_free(&in->regions);
	free(in);
}

bool store_intent_covers(struct iod_store *s, uint64_t obj, uint64_t first,
			 uint64_t last)
{
	struct intent *in = store_intent_get(s, obj, false);

	if (!in)
		return false;
	if (in->all)
		return true;
	for (uint64_t r = first; r <= last; r++)
		if ((rval(tw_hmap_get(&in->regions, r + 1)) & ~INTENT_PIN) == 0)
			return false;
	return true;
}

/* Whether any region of in is pinned. */
static bool any_pinned(const struct intent *in)
{
	uint64_t rk;
	void *rv;

	for (size_t i = 0; tw_hmap_next(&in->regions, &i, &rk, &rv);)
		if (rval(rv) & INTENT_PIN)
			return true;
	return false;
}

/* in becomes whole: marked (mark) or pinned; a pinned region in it pins
 * it whole, since a whole subfile is listed without its regions. */
static void make_whole(struct iod_store *s, struct intent *in, bool mark)
{
	if (!whole(in))
		s->n_marked++;
	if (mark) {
		in->all = true;
		in->all_gen = s->touch_gen;
	}
	if (!mark || any_pinned(in))
		in->all_pinned = true;
}

/* Mark (touched now) or pin regions first..last of in; more than a list
 * holds (a big shrink) make it whole, as the xattr does. */
static int set_regions(struct iod_store *s, struct intent *in, uint64_t first,
		       uint64_t last, bool pin)
{
	if (last - first >= WIL_MAX_COUNT) {
		make_whole(s, in, !pin);
		return 0;
	}
	for (uint64_t r = first; r <= last; r++) {
		uint64_t old = rval(tw_hmap_get(&in->regions, r + 1));
		uint64_t v = pin ? old | INTENT_PIN
				 : (old & INTENT_PIN) | (s->touch_gen + 1);

		if (tw_hmap_put(&in->regions, r + 1, rval_ptr(v)) < 0)
			return -ENOMEM;
		if (old == 0)
			s->n_marked++;
	}
	return 0;
}

/* Mark (or re-touch) regions first..last in the live set. */
int store_intent_touch(struct iod_store *s, uint64_t obj, uint64_t first,
		       uint64_t last)
{
	struct intent *in = store_intent_get(s, obj, true);

	if (!in)
		return -ENOMEM;
	if (in->all) {
		in->all_gen = s->touch_gen;
		return 0;
	}
	return set_regions(s, in, first, last, false);
}

int iod_store_intent_pin(struct iod_store *s, uint64_t ino, uint32_t column,
			 uint64_t off, uint64_t len)
{
	uint64_t obj = store_obj(ino, column);
	uint64_t first, last;
	struct intent *in;

	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	if (len == 0)
		return 0;
	in = store_intent_get(s, obj, true);
	if (!in)
		return -ENOMEM;
	first = off >> IOD_REGION_SHIFT;
	last = len == UINT64_MAX || off + len - 1 < off ? UINT64_MAX
		: (off + len - 1) >> IOD_REGION_SHIFT;
	if (whole(in)) {
		make_whole(s, in, false);
		return 0;
	}
	return set_regions(s, in, first, last, true);
}

/* A completed resync: every pin goes.  A pinned mark (a pinned region's,
 * or any of a subfile pinned whole) stays, touched now: a cycle clears it
 * only after both twins synced again.  A region only pinned goes with its
 * pin, and so does an entry left with nothing.  Replacing a present key
 * and deleting the current one are safe while iterating (common.h). */
void iod_store_intent_unpin_all(struct iod_store *s)
{
	uint64_t key, rk;
	void *val, *rv;

	for (size_t it = 0; tw_hmap_next(&s->intents, &it, &key, &val);) {
		struct intent *in = val;
		bool touch_all = in->all_pinned;

		for (size_t jt = 0; tw_hmap_next(&in->regions, &jt, &rk, &rv);) {
			if (rval(rv) == INTENT_PIN) {
				tw_hmap_del(&in->regions, rk);
				s->n_marked--;
			} else if (touch_all || (rval(rv) & INTENT_PIN)) {
				tw_hmap_put(&in->regions, rk,
					    rval_ptr(s->touch_gen + 1));
			}
		}
		if (in->all_pinned) {
			in->all_pinned = false;
			if (in->all)
				in->all_gen = s->touch_gen;
			else
				s->n_marked--;
		}
		if (!whole(in) && in->regions.count == 0)
			store_intent_drop(s, in);
	}
}

uint64_t iod_store_intent_epoch(struct iod_store *s)
{
	return s->touch_gen++;
}

uint64_t iod_store_n_marked(const struct iod_store *s)
{
	return s->n_marked;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void clear_cb(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

/* Journal a clear of the given sorted regions (or everything) of obj. */
static int clear_obj(struct iod_store *s, uint64_t obj, const uint64_t *regs,
		     size_t n, bool everything)
{
	struct rec_clear *c = calloc(1, sizeof(*c));
	struct jbd_handle *h = NULL;
	size_t i = 0;
	int rc = 0;

	if (!c)
		return -ENOMEM;
	do {
		size_t k = 0;

		store_hdr_init(&c->h, REC_CLEAR, 0);
		c->flags = htole32(everything ? CLEAR_ALL : 0);
		while (i < n && k < CLEAR_MAX) {
			uint64_t first = regs[i], count = 1;

			while (i + count < n && regs[i + count] == first + count)
				count++;
			c->r[k].first = htole64(first);
			c->r[k].count = htole64(count);
			k++;
			i += count;
		}
		c->n = htole32((uint32_t)k);
		rc = jbd_begin(s->j, &h);
		if (rc < 0)
			break;
		rc = jbd_record(h, obj, JBD_NO_CUT, c,
				offsetof(struct rec_clear, r) + 16 * k);
		if (rc < 0) {
			jbd_cancel(h);
			break;
		}
		if (jbd_commit(h, 0, clear_cb, NULL) < 0) {
			rc = -EIO;
			break;
		}
		rc = store_meta_keep(s, obj);
		if (rc < 0)
			break;
	} while (i < n);
	free(c);
	return rc;
}

int iod_store_intent_clear(struct iod_store *s, uint64_t token)
{
	uint64_t key;
	void *val;
	int rc = 0;

	if (jbd_aborted(s->j))
		return -EIO;
	for (size_t it = 0;
	     rc == 0 && tw_hmap_next(&s->intents, &it, &key, &val);) {
		struct intent *in = val;
		uint64_t *regs = NULL;
		size_t n = 0;

		if (in->all_pinned)
			continue;
		if (in->all) {
			if (in->all_gen > token)
				continue;
		} else {
			uint64_t rk;
			void *rv;

			regs = malloc((in->regions.count + 1) * sizeof(*regs));
			if (!regs)
				return -ENOMEM;
			for (size_t i2 = 0; tw_hmap_next(&in->regions, &i2, &rk, &rv);)
				if (!(rval(rv) & INTENT_PIN) &&
				    rval(rv) - 1 <= token)
					regs[n++] = rk - 1;
			if (n == 0) {
				free(regs);
				continue;
			}
			qsort(regs, n, sizeof(*regs), u64_cmp);
		}
		/* Emptying the set clears everything persisted, which also
		 * repairs an overflowed ("all") xattr. */
		bool everything = in->all || n == in->regions.count;

		rc = clear_obj(s, in->obj, regs, everything ? 0 : n, everything);
		if (rc == 0) {
			if (everything) {
				store_intent_drop(s, in);
			} else {
				for (size_t i = 0; i < n; i++)
					tw_hmap_del(&in->regions, regs[i] + 1);
				s->n_marked -= n;
			}
		}
		free(regs);
	}
	return rc;
}

int iod_store_intents(struct iod_store *s, iod_intent_cb cb, void *arg)
{
	uint64_t key, rk;
	void *val, *rv;
	int rc;

	for (size_t it = 0; tw_hmap_next(&s->intents, &it, &key, &val);) {
		struct intent *in = val;
		uint64_t ino = store_obj_ino(in->obj);
		uint32_t col = store_obj_column(in->obj);

		if (whole(in)) {
			/* A pin into a whole subfile pins it whole, and a
			 * pinned region makes a subfile marked whole pinned
			 * (make_whole). */
			rc = cb(arg, ino, col, 0, UINT64_MAX, in->all_pinned);
			if (rc)
				return rc;
			continue;
		}
		for (size_t i2 = 0; tw_hmap_next(&in->regions, &i2, &rk, &rv);) {
			rc = cb(arg, ino, col, rk - 1, 1, rval(rv) & INTENT_PIN);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Persisted set (user.twinfs.wil): add or remove ranges. */
int store_wil_change(struct sub *e, bool add, const struct wil_range *chg,
		     unsigned n_chg, bool everything)
{
	struct wil_range cur[WIL_MAX_RANGES];
	uint64_t *regs = NULL;
	size_t n_regs = 0, cap = 0;
	unsigned n;
	bool all;
	int rc;

	if (!add && everything)
		return store_wil_set(e, NULL, 0, false);
	rc = store_wil_get(e, cur, &n, &all);
	if (rc < 0)
		return rc;
	if (all)
		return 0;            /* stays "everything" until cleared so */
	/* Small sets: expand to regions, edit, compress again. */
	for (unsigned pass = 0; pass < 2; pass++) {
		const struct wil_range *src = pass == 0 ? cur : chg;
		unsigned cnt = pass == 0 ? n : n_chg;

		if (pass == 1 && !add)
			break;
		for (unsigned i = 0; i < cnt; i++) {
			if (src[i].count > WIL_MAX_COUNT ||
			    n_regs + src[i].count > (1u << 20)) {
				free(regs);
				return store_wil_set(e, NULL, 0, true);
			}
			if (n_regs + src[i].count > cap) {
				size_t nc = TW_MAX(cap * 2, n_regs + src[i].count + 16);
				uint64_t *x = realloc(regs, nc * sizeof(*x));

				if (!x) {
					free(regs);
					return -ENOMEM;
				}
				regs = x;
				cap = nc;
			}
			for (uint64_t r = 0; r < src[i].count; r++)
				regs[n_regs++] = src[i].first + r;
		}
	}
	if (!add) {
		size_t k = 0;

		for (size_t i = 0; i < n_regs; i++) {
			bool gone = false;

			for (unsigned c = 0; c < n_chg && !gone; c++)
				gone = regs[i] >= chg[c].first &&
				       regs[i] - chg[c].first < chg[c].count;
			if (!gone)
				regs[k++] = regs[i];
		}
		n_regs = k;
	}
	if (n_regs)
		qsort(regs, n_regs, sizeof(*regs), u64_cmp);
	n = 0;
	all = false;
	for (size_t i = 0; i < n_regs; i++) {
		if (n > 0 && regs[i] < cur[n - 1].first + cur[n - 1].count)
			continue;                  /* duplicate */
		if (n > 0 && regs[i] == cur[n - 1].first + cur[n - 1].count) {
			cur[n - 1].count++;
			continue;
		}
		if (n == WIL_MAX_RANGES) {
			all = true;                /* overflow: everything */
			n = 0;
			break;
		}
		cur[n].first = regs[i];
		cur[n].count = 1;
		n++;
	}
	free(regs);
	return store_wil_set(e, cur, n, all);
}

/* At open (after replay): the live set from every subfile's xattr. */
int store_intents_rebuild(struct iod_store *s)
{
	uint64_t after_ino = 0;
	uint32_t after_col = 0;
	int rc = 0;

	for (;;) {
		struct store_key *keys;
		size_t n;
		bool more;

		rc = store_scan(s, after_ino, after_col, SCAN_PAGE, &keys, &n,
				&more);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < n && rc == 0; i++) {
			struct wil_range r[WIL_MAX_RANGES];
			unsigned nr;
			bool all;
			struct sub *e;
			uint64_t obj = store_obj(keys[i].ino, keys[i].column);

			if (store_get_sub(s, keys[i].ino, keys[i].column, NULL, 0,
					  &e) < 0)
				continue;
			if (store_wil_get(e, r, &nr, &all) < 0)
				continue;
			if (all) {
				struct intent *in = store_intent_get(s, obj, true);

				if (!in)
					return -ENOMEM;
				make_whole(s, in, true);
				continue;
			}
			for (unsigned k = 0; k < nr && rc == 0; k++)
				if (r[k].count > 0)
					rc = store_intent_touch(s, obj, r[k].first,
							  r[k].first + r[k].count - 1);
		}
		if (n > 0) {
			after_ino = keys[n - 1].ino;
			after_col = keys[n - 1].column;
		}
		free(keys);
		if (rc < 0 || !more)
			return rc;
	}
}

void store_intents_free(struct iod_store *s)
{
	uint64_t key;
	void *val;

	for (size_t it = 0; tw_hmap_next(&s->intents, &it, &key, &val);) {
		struct intent *in = val;

		tw_hmap_free(&in->regions);
		free(in);
	}
	tw_hmap_free(&s->intents);
}
