/* hmap.c - open-addressing hash map from nonzero uint64_t keys to pointers.
 *
 * Linear probing that never wraps around: the table has `cap` home slots
 * (a power of two) followed by an overflow area of cap/4 slots, and a probe
 * that would run off the end grows the table instead.  Deletion is by
 * backward shift (no tombstones), so lookups never slow down with churn.
 *
 * Why no wrap-around: a backward shift only moves entries to lower indices,
 * and never touches slots below the deleted one.  Iteration therefore walks
 * the slots from the highest index down; deleting the entry just returned
 * only moves entries that were already visited into slots already visited,
 * so nothing is skipped or returned twice.  (With wrap-around an entry in
 * slot 0 could shift to the top of the table behind the iterator.)
 *
 * Key 0 marks an empty slot and is rejected as a key.  The table never
 * shrinks on deletion, for the same iteration guarantee.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>

#define HMAP_MIN_CAP 16

static size_t n_slots(size_t cap)
{
	return cap + cap / 4;
}

/* splitmix64's finalizer: inode numbers and ids are dense and sequential,
 * so the low bits must be mixed before masking. */
static uint64_t hash_key(uint64_t k)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	k ^= k >> 31;
	return k;
}

static size_t home_slot(size_t cap, uint64_t key)
{
	return (size_t)(hash_key(key) & (cap - 1));
}

void tw_hmap_init(struct tw_hmap *m)
{
	m->keys = NULL;
	m->vals = NULL;
	m->cap = 0;
	m->count = 0;
}

void tw_hmap_free(struct tw_hmap *m)
{
	free(m->keys);
	free(m->vals);
	tw_hmap_init(m);
}

/* Index of key, or of the empty slot where it would go; n_slots(cap) if the
 * probe ran off the end of the table. */
static size_t probe(const uint64_t *keys, size_t cap, uint64_t key)
{
	size_t end = n_slots(cap);
	size_t i = home_slot(cap, key);

	while (i < end && keys[i] != 0 && keys[i] != key)
		i++;
	return i;
}

void *tw_hmap_get(const struct tw_hmap *m, uint64_t key)
{
	size_t i;

	if (key == 0 || m->cap == 0)
		return NULL;
	i = probe(m->keys, m->cap, key);
	if (i < n_slots(m->cap) && m->keys[i] == key)
		return m->vals[i];
	return NULL;
}

/* Move every entry into a table of new_cap home slots.  Returns -EAGAIN if
 * some probe ran off the end (the caller retries larger). */
static int rehash(struct tw_hmap *m, size_t new_cap)
{
	size_t n = n_slots(new_cap);
	uint64_t *keys = calloc(n, sizeof(*keys));
	void **vals = calloc(n, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (size_t j = 0; j < n_slots(m->cap); j++) {
		size_t i;

		if (m->keys[j] == 0)
			continue;
		i = probe(keys, new_cap, m->keys[j]);
		if (i == n) {
			free(keys);
			free(vals);
			return -EAGAIN;
		}
		keys[i] = m->keys[j];
		vals[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = new_cap;
	return 0;
}

static int grow(struct tw_hmap *m)
{
	size_t cap = m->cap ? m->cap : HMAP_MIN_CAP / 2;
	int rc;

	do {
		if (cap > SIZE_MAX / 4)
			return -ENOMEM;
		cap *= 2;
		rc = rehash(m, cap);
	} while (rc == -EAGAIN);
	return rc;
}

int tw_hmap_put(struct tw_hmap *m, uint64_t key, void *val)
{
	size_t i;
	int rc;

	if (key == 0)
		return -EINVAL;
	/* A key already there is replaced in place: that needs no memory,
	 * so it cannot fail (callers that keep the latest value of a key
	 * rely on it: wbehind.c).  One probe serves both cases. */
	i = m->cap != 0 ? probe(m->keys, m->cap, key) : 0;
	if (m->cap != 0 && i < n_slots(m->cap) && m->keys[i] == key) {
		m->vals[i] = val;
		return 0;
	}
	/* Keep the load at most 1/2 of the home slots: linear probing
	 * degrades fast above that. */
	if (m->cap == 0 || (m->count + 1) * 2 > m->cap) {
		rc = grow(m);
		if (rc < 0)
			return rc;
		i = probe(m->keys, m->cap, key);
	}
	while (i >= n_slots(m->cap)) {
		rc = grow(m);
		if (rc < 0)
			return rc;
		i = probe(m->keys, m->cap, key);
	}
	if (m->keys[i] == 0) {
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
	return 0;
}

void *tw_hmap_del(struct tw_hmap *m, uint64_t key)
{
	size_t end, hole, i;
	void *old;

	if (key == 0 || m->cap == 0)
		return NULL;
	end = n_slots(m->cap);
	hole = probe(m->keys, m->cap, key);
	if (hole == end || m->keys[hole] != key)
		return NULL;
	old = m->vals[hole];
	/* Backward shift: pull each later entry of the run into the hole if
	 * its home is at or before the hole, so every entry stays reachable
	 * from its home without crossing an empty slot. */
	for (i = hole + 1; i < end && m->keys[i] != 0; i++) {
		if (home_slot(m->cap, m->keys[i]) <= hole) {
			m->keys[hole] = m->keys[i];
			m->vals[hole] = m->vals[i];
			hole = i;
		}
	}
	m->keys[hole] = 0;
	m->vals[hole] = NULL;
	m->count--;
	return old;
}

bool tw_hmap_next(const struct tw_hmap *m, size_t *it, uint64_t *key,
		  void **val)
{
	size_t end = m->cap ? n_slots(m->cap) : 0;

	/* *it counts the slots visited; slots are visited from the top. */
	while (*it < end) {
		size_t i = end - 1 - *it;

		(*it)++;
		if (m->keys[i] != 0) {
			if (key)
				*key = m->keys[i];
			if (val)
				*val = m->vals[i];
			return true;
		}
	}
	return false;
}
