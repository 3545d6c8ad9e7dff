/* oset.c - an ordered set of uint64_t keys: a sorted array of chunks,
 * each a sorted array of up to TW_OSET_CHUNK keys (a B+ tree of two
 * levels).
 *
 * Invariants:
 *   O1  Keys ascend within a chunk and across chunks: every key of c[i]
 *       is below every key of c[i + 1].  No key appears twice.
 *   O2  No chunk is empty (a delete that empties one frees it), and two
 *       neighbours that fit in one after a delete are one, so a set
 *       uses at most about twice 8 bytes per key plus a pointer per chunk.
 * A full chunk splits in halves before an add.  Moving chunk pointers on
 * a split or a free costs up to n / (TW_OSET_CHUNK / 2) of them: at 100 M
 * keys about 6 MiB, once per TW_OSET_CHUNK / 2 adds at most.  A set
 * filled from a walk is loaded sorted (tw_oset_load), chunks three
 * quarters full.
 */
#include "oset.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct tw_oset_chunk {
	uint32_t n;
	uint64_t k[TW_OSET_CHUNK];
};

void tw_oset_init(struct tw_oset *s)
{
	memset(s, 0, sizeof(*s));
}

void tw_oset_free(struct tw_oset *s)
{
	for (size_t i = 0; i < s->n_chunks; i++)
		free(s->c[i]);
	free(s->c);
	tw_oset_init(s);
}

/* The first index in k[0..n) whose key is >= key (n if none). */
static size_t lower(const uint64_t *k, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first chunk whose last key is >= key (n_chunks if none). */
static size_t chunk_of(const struct tw_oset *s, uint64_t key)
{
	size_t lo = 0, hi = s->n_chunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct tw_oset_chunk *c = s->c[mid];

		if (c->k[c->n - 1] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Make room for one chunk pointer at index i. */
static int insert_slot(struct tw_oset *s, size_t i, struct tw_oset_chunk *c)
{
	if (s->n_chunks == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct tw_oset_chunk **p = realloc(s->c, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->c = p;
		s->cap = cap;
	}
	memmove(&s->c[i + 1], &s->c[i], (s->n_chunks - i) * sizeof(*s->c));
	s->c[i] = c;
	s->n_chunks++;
	return 0;
}

static void remove_slot(struct tw_oset *s, size_t i)
{
	free(s->c[i]);
	memmove(&s->c[i], &s->c[i + 1],
		(s->n_chunks - i - 1) * sizeof(*s->c));
	s->n_chunks--;
}

int tw_oset_add(struct tw_oset *s, uint64_t key)
{
	struct tw_oset_chunk *c;
	size_t i, j;

	if (s->n_chunks == 0) {
		c = malloc(sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->n = 1;
		c->k[0] = key;
		if (insert_slot(s, 0, c) < 0) {
			free(c);
			return -ENOMEM;
		}
		s->count = 1;
		return 0;
	}
	i = chunk_of(s, key);
	if (i == s->n_chunks)
		i--;   /* above every key: the last chunk takes it */
	c = s->c[i];
	j = lower(c->k, c->n, key);
	if (j < c->n && c->k[j] == key)
		return 0;
	if (c->n == TW_OSET_CHUNK) {
		struct tw_oset_chunk *d = malloc(sizeof(*d));
		uint32_t half = TW_OSET_CHUNK / 2;

		if (!d)
			return -ENOMEM;
		d->n = TW_OSET_CHUNK - half;
		memcpy(d->k, &c->k[half], d->n * sizeof(*d->k));
		if (insert_slot(s, i + 1, d) < 0) {
			free(d);
			return -ENOMEM;
		}
		c->n = half;
		if (j > half) {
			c = d;
			j -= half;
		}
	}
	memmove(&c->k[j + 1], &c->k[j], (c->n - j) * sizeof(*c->k));
	c->k[j] = key;
	c->n++;
	s->count++;
	return 0;
}

int tw_oset_load(struct tw_oset *s, const uint64_t *keys, size_t n)
{
	/* Three quarters full: room for adds before the first splits. */
	const size_t per = TW_OSET_CHUNK * 3 / 4;
	size_t chunks = (n + per - 1) / per;

	assert(s->n_chunks == 0);
	if (chunks == 0)
		return 0;
	s->c = malloc(chunks * sizeof(*s->c));
	if (!s->c)
		return -ENOMEM;
	s->cap = chunks;
	for (size_t i = 0; i < n; i += per) {
		struct tw_oset_chunk *c = malloc(sizeof(*c));

		if (!c) {
			tw_oset_free(s);
			return -ENOMEM;
		}
		c->n = (uint32_t)(n - i < per ? n - i : per);
		memcpy(c->k, &keys[i], c->n * sizeof(*keys));
		for (uint32_t j = 1; j < c->n; j++)
			assert(c->k[j - 1] < c->k[j]);
		s->c[s->n_chunks++] = c;
		s->count += c->n;
	}
	return 0;
}

bool tw_oset_del(struct tw_oset *s, uint64_t key)
{
	size_t i = chunk_of(s, key), j;
	struct tw_oset_chunk *c;

	if (i == s->n_chunks)
		return false;
	c = s->c[i];
	j = lower(c->k, c->n, key);
	if (j == c->n || c->k[j] != key)
		return false;
	memmove(&c->k[j], &c->k[j + 1], (c->n - j - 1) * sizeof(*c->k));
	c->n--;
	s->count--;
	if (c->n == 0) {
		remove_slot(s, i);   /* O2 */
		return true;
	}
	if (i + 1 < s->n_chunks && c->n + s->c[i + 1]->n <= TW_OSET_CHUNK) {
		struct tw_oset_chunk *d = s->c[i + 1];

		memcpy(&c->k[c->n], d->k, d->n * sizeof(*d->k));
		c->n += d->n;
		remove_slot(s, i + 1);
	}
	return true;
}

bool tw_oset_has(const struct tw_oset *s, uint64_t key)
{
	size_t i = chunk_of(s, key), j;

	if (i == s->n_chunks)
		return false;
	j = lower(s->c[i]->k, s->c[i]->n, key);
	return j < s->c[i]->n && s->c[i]->k[j] == key;
}

size_t tw_oset_after(const struct tw_oset *s, uint64_t after, uint64_t *out,
		     size_t max, bool *more)
{
	size_t i, j, n = 0;

	*more = false;
	if (after == UINT64_MAX)
		return 0;
	i = chunk_of(s, after + 1);
	if (i == s->n_chunks)
		return 0;
	j = lower(s->c[i]->k, s->c[i]->n, after + 1);
	for (; i < s->n_chunks; i++, j = 0) {
		const struct tw_oset_chunk *c = s->c[i];
		size_t take = c->n - j;

		if (take > max - n)
			take = max - n;
		if (take)   /* out may be NULL when max is 0 */
			memcpy(&out[n], &c->k[j], take * sizeof(*out));
		n += take;
		if (j + take < c->n || (n == max && i + 1 < s->n_chunks)) {
			*more = true;
			break;
		}
	}
	return n;
}
