/* oset.h - an ordered set of uint64_t keys (oset.c): add, delete, and the
 * keys after a cursor in ascending order, each in O(log n) plus what it
 * moves.  For listings paged by a cursor over sets too large to sort again
 * for every page (the iod's subfiles: iod/store_scan.c). */
#ifndef TWINFS_OSET_H
#define TWINFS_OSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TW_OSET_CHUNK 256u       /* keys per chunk (2 KiB) */

struct tw_oset_chunk;

struct tw_oset {
	struct tw_oset_chunk **c;  /* ascending; every chunk holds >= 1 key */
	size_t n_chunks, cap;
	size_t count;              /* keys */
};

void tw_oset_init(struct tw_oset *s);
void tw_oset_free(struct tw_oset *s);
/* 0 (also when key was there), or -ENOMEM (the set is unchanged). */
int tw_oset_add(struct tw_oset *s, uint64_t key);
/* Fill an empty set with n keys that ascend strictly (a walk's keys once
 * sorted: n adds in random order move O(n^2 / TW_OSET_CHUNK^2) chunk
 * pointers).  0 or -ENOMEM (the set stays empty). */
int tw_oset_load(struct tw_oset *s, const uint64_t *keys, size_t n);
/* Whether key was there. */
bool tw_oset_del(struct tw_oset *s, uint64_t key);
bool tw_oset_has(const struct tw_oset *s, uint64_t key);
/* Up to max keys greater than after, ascending, into out; the number
 * written.  *more: keys greater than the last one written remain (with
 * max 0: any key greater than after). */
size_t tw_oset_after(const struct tw_oset *s, uint64_t after, uint64_t *out,
		     size_t max, bool *more);

#endif
