/* itab.c - the inode table of a namespace: inode number -> struct
 * mgr_inode (docs/ARCHITECTURE.md "Namespace": memory per inode).
 *
 * Open addressing with linear probing over inode pointers only: the key
 * is the inode's own number, so a slot costs 8 bytes where a general
 * map's key and value cost 16, and the load goes up to 3/4 (a general
 * map's 1/2).  The pointer's three low bits (an inode is 8-byte aligned)
 * hold a tag from the number's hash, so a probe reads an inode only when
 * the tag matches (one time in eight for another number).  Removal shifts
 * the rest of the probe run back (no tombstones), so lookups never slow
 * down with churn.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#define TAG_MASK ((uintptr_t)7)

static uint64_t hash_of(uint64_t ino)
{
	return ino * 0x9e3779b97f4a7c15ull;   /* Fibonacci hashing */
}

static size_t home(const struct mgr_itab *t, uint64_t h)
{
	return (size_t)(h >> 32) & (t->cap - 1);
}

static uintptr_t tag(uint64_t h)
{
	return (uintptr_t)(h >> 61);
}

static struct mgr_inode *ptr(uintptr_t v)
{
	return (struct mgr_inode *)(v & ~TAG_MASK);
}

void mgr_itab_init(struct mgr_itab *t)
{
	t->slots = NULL;
	t->cap = 0;
	t->count = 0;
}

void mgr_itab_free(struct mgr_itab *t)
{
	free(t->slots);
	mgr_itab_init(t);
}

/* The slot of ino, or the empty slot that ends its probe run. */
static size_t slot_of(const struct mgr_itab *t, uint64_t ino)
{
	uint64_t h = hash_of(ino);
	uintptr_t tg = tag(h);
	size_t i = home(t, h);

	for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
		if ((t->slots[i] & TAG_MASK) == tg &&
		    ptr(t->slots[i])->ino == ino)
			break;
	return i;
}

struct mgr_inode *mgr_itab_get(const struct mgr_itab *t, uint64_t ino)
{
	if (t->cap == 0)
		return NULL;
	return ptr(t->slots[slot_of(t, ino)]);
}

static int resize(struct mgr_itab *t, size_t cap)
{
	uintptr_t *old = t->slots;
	size_t ocap = t->cap;

	assert(cap >= 16 && (cap & (cap - 1)) == 0 && t->count * 4 <= cap * 3);
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->cap = cap;
	for (size_t j = 0; j < ocap; j++) {
		size_t i;

		if (!old[j])
			continue;
		for (i = home(t, hash_of(ptr(old[j])->ino)); t->slots[i];
		     i = (i + 1) & (cap - 1))
			;
		t->slots[i] = old[j];
	}
	free(old);
	return 0;
}

int mgr_itab_reserve(struct mgr_itab *t, size_t n)
{
	size_t cap = t->cap ? t->cap : 16;

	if (n > SIZE_MAX / 8)
		return -ENOMEM;
	while ((n + 1) * 4 > cap * 3)
		cap *= 2;
	return cap == t->cap ? 0 : resize(t, cap);
}

int mgr_itab_put(struct mgr_itab *t, struct mgr_inode *in)
{
	size_t i;
	int rc = mgr_itab_reserve(t, t->count + 1);

	if (rc < 0)
		return rc;
	assert(((uintptr_t)in & TAG_MASK) == 0);
	i = slot_of(t, in->ino);
	if (t->slots[i])
		return -EEXIST;
	t->slots[i] = (uintptr_t)in | tag(hash_of(in->ino));
	t->count++;
	return 0;
}

struct mgr_inode *mgr_itab_del(struct mgr_itab *t, uint64_t ino)
{
	struct mgr_inode *in;
	size_t i, j;

	if (t->cap == 0)
		return NULL;
	i = slot_of(t, ino);
	in = ptr(t->slots[i]);
	if (!in)
		return NULL;
	/* Backward shift: move each later member of the run whose home is
	 * not between the hole and itself into the hole. */
	for (j = (i + 1) & (t->cap - 1); t->slots[j];
	     j = (j + 1) & (t->cap - 1)) {
		size_t h = home(t, hash_of(ptr(t->slots[j])->ino));

		if (((j - h) & (t->cap - 1)) >= ((j - i) & (t->cap - 1))) {
			t->slots[i] = t->slots[j];
			i = j;
		}
	}
	t->slots[i] = 0;
	t->count--;
	return in;
}

bool mgr_itab_next(const struct mgr_itab *t, size_t *it,
		   struct mgr_inode **in)
{
	for (; *it < t->cap; (*it)++)
		if (t->slots[*it]) {
			*in = ptr(t->slots[(*it)++]);
			return true;
		}
	return false;
}

static int cmp_ino(const void *a, const void *b)
{
	uint64_t x = (*(struct mgr_inode *const *)a)->ino;
	uint64_t y = (*(struct mgr_inode *const *)b)->ino;

	return x < y ? -1 : x > y;
}

struct mgr_inode **mgr_itab_sorted(const struct mgr_itab *t, size_t *n)
{
	struct mgr_inode **v = malloc((t->count ? t->count : 1) * sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i])
			v[k++] = ptr(t->slots[i]);
	assert(k == t->count);
	qsort(v, k, sizeof(*v), cmp_ino);
	*n = k;
	return v;
}
