/* lay.c - file layouts shared by reference (docs/ARCHITECTURE.md
 * "Namespace": memory per inode).
 *
 * A namespace holds few distinct layouts (one per stripe size, stripe
 * count and first group in use), but a copy of struct r0_layout in every
 * inode cost 136 bytes each.  Inodes hold a pointer to one interned,
 * reference-counted copy instead.  In memory only: the snapshot and the
 * records still carry each file's layout by value (mgrd/FORMAT.md), so
 * nothing on disk depends on the sharing.
 *
 * The table is the process's, not a namespace's: every namespace of a
 * process (the server's one, a unit test's several) shares the copies,
 * and everything runs on the one loop thread (mgrd_int.h).  Invariant:
 * an entry lives exactly as long as its count of inodes holding it.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lay {
	struct r0_layout l;         /* first: inodes point here */
	uint32_t refs;
	uint32_t hash;
};

static struct lay **tab;            /* open addressing, NULL = empty */
static uint32_t tab_cap, tab_count; /* cap a power of two, load <= 1/2 */

const struct r0_layout mgr_layout_none;

/* The bytes that make a layout: groups past stripe_count do not count. */
static size_t lay_len(const struct r0_layout *l)
{
	return offsetof(struct r0_layout, groups) +
	       (size_t)l->stripe_count * sizeof(l->groups[0]);
}

static uint32_t lay_hash(const struct r0_layout *l)
{
	return (uint32_t)tw_fnv1a64(l, lay_len(l));
}

static uint32_t slot_of(uint32_t hash, const struct r0_layout *l)
{
	uint32_t i = hash & (tab_cap - 1);

	for (; tab[i]; i = (i + 1) & (tab_cap - 1))
		if (tab[i]->hash == hash &&
		    tab[i]->l.stripe_count == l->stripe_count &&
		    memcmp(&tab[i]->l, l, lay_len(l)) == 0)
			break;
	return i;
}

static int grow(void)
{
	uint32_t cap = tab_cap ? tab_cap * 2 : 16, old = tab_cap;
	struct lay **o = tab, **n = calloc(cap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	tab = n;
	tab_cap = cap;
	for (uint32_t i = 0; i < old; i++)
		if (o[i])
			tab[slot_of(o[i]->hash, &o[i]->l)] = o[i];
	free(o);
	return 0;
}

const struct r0_layout *mgr_layout_get(const struct r0_layout *l)
{
	uint32_t h, i;
	struct lay *e;

	assert(l->stripe_count <= R0_MAX_STRIPE_COUNT);
	if (l->stripe_count == 0)
		return &mgr_layout_none;
	if ((tab_count + 1) * 2 > tab_cap && grow() < 0)
		return NULL;
	h = lay_hash(l);
	i = slot_of(h, l);
	if (tab[i]) {
		tab[i]->refs++;
		return &tab[i]->l;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	memcpy(&e->l, l, lay_len(l));
	e->refs = 1;
	e->hash = h;
	tab[i] = e;
	tab_count++;
	return &e->l;
}

void mgr_layout_put(const struct r0_layout *l)
{
	struct lay *e = (struct lay *)l;
	uint32_t i, j;

	if (!l || l == &mgr_layout_none)
		return;
	assert(e->refs > 0);
	if (--e->refs > 0)
		return;
	i = slot_of(e->hash, &e->l);
	assert(tab[i] == e);
	free(e);
	tab[i] = NULL;
	tab_count--;
	/* Linear probing: re-seat the rest of the cluster. */
	for (j = (i + 1) & (tab_cap - 1); tab[j]; j = (j + 1) & (tab_cap - 1)) {
		struct lay *m = tab[j];

		tab[j] = NULL;
		tab[slot_of(m->hash, &m->l)] = m;
	}
	if (tab_count == 0) {
		free(tab);
		tab = NULL;
		tab_cap = 0;
	}
}
