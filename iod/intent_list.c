/* intent_list.c - a sorted copy of the write-intent log's marks, for the
 * two readers that need them in subfile order: a resync source choosing
 * what to copy (resync.c) and INTENTS, which hands a target's marks to its
 * twin (server.c).  The log itself (store_intent.c) keeps them in hash
 * maps, in no order.
 */
#include "iod_int.h"

#include <errno.h>
#include <stdlib.h>

struct collect {
	struct iod_intent_run *v;
	size_t n, cap;
};

static int add_run(void *arg, uint64_t ino, uint32_t column, uint64_t first,
		   uint64_t count, bool pinned)
{
	struct collect *c = arg;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct iod_intent_run *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct iod_intent_run){ ino, column, first, count,
						pinned };
	return 0;
}

int iod_intent_run_cmp(const struct iod_intent_run *a,
		       const struct iod_intent_run *b)
{
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	if (a->column != b->column)
		return a->column < b->column ? -1 : 1;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return iod_intent_run_cmp(a, b);
}

int iod_intent_list(struct iod_store *s, struct iod_intent_run **out,
		    size_t *n)
{
	struct collect c = { 0 };
	int rc = iod_store_intents(s, add_run, &c);

	if (rc < 0) {
		free(c.v);
		return rc;
	}
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), cmp);
	*out = c.v;
	*n = c.n;
	return 0;
}

int iod_intent_merge(struct iod_intent_run **v, size_t *n,
		     const struct iod_intent_run *add, size_t n_add)
{
	struct iod_intent_run *m;
	size_t k = 0;

	if (n_add == 0)
		return 0;
	m = realloc(*v, (*n + n_add) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < n_add; i++)
		m[*n + i] = add[i];
	qsort(m, *n + n_add, sizeof(*m), cmp);
	/* Drop exact duplicates: a region marked on both twins is sent once,
	 * pinned if either copy is. */
	for (size_t i = 0; i < *n + n_add; i++)
		if (k == 0 || iod_intent_run_cmp(&m[k - 1], &m[i]) != 0 ||
		    m[k - 1].count != m[i].count)
			m[k++] = m[i];
		else
			m[k - 1].pinned |= m[i].pinned;
	*v = m;
	*n = k;
	return 0;
}
