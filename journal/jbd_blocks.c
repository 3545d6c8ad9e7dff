/* jbd_blocks.c - the block cache: the 4 KiB buffers of journaled data
 * blocks, escaped copies and the metadata blocks of a closing transaction
 * (jbd_write, the commit), taken and given back by the owner's thread
 * only.
 *
 * A stream takes a block per written block and gives it back at
 * checkpoint, many transactions at a time.  Through malloc, aligned
 * allocations split and coalesce chunks (a tenth of an iod's CPU), and
 * even with the blocks kept for reuse every page of the growing heap was
 * faulted in 4 KiB at a time (320,000 faults in four iods for a 1 GiB
 * write; slabs took a quarter off their CPU).  Blocks come instead from
 * slabs of JBD_SLAB_BYTES, mapped aligned to their size and advised as
 * transparent huge pages (one fault for a slab where the kernel grants
 * one, madvise mode included), and given back go on a stack for the next
 * writes.
 *
 * No bound of its own: a slab is mapped only when the stack is empty, so
 * blocks out and blocks waiting together never exceed the most held at
 * once (jbd_stats copy_bytes, and the few metadata blocks of the
 * transactions being written) by more than one slab.  An owner whose
 * process goes idle gives the memory back in two steps: jbd_free_cache
 * marks every slab whose blocks are all back free (MADV_FREE): the kernel
 * takes its pages when it needs memory, without writing them anywhere,
 * and the next writes reuse those it has not taken without a fault; a
 * fresh slab costs a fault that clears 2 MiB, about a tenth of an iod's
 * CPU during the first journal's worth of writes after each rest.  Later,
 * jbd_drop_cache unmaps them.  The stack always has room for every block
 * of every slab, so giving one back never allocates.  Under
 * AddressSanitizer a block on the stack is poisoned: a use after it was
 * given back is reported.
 */
#include "jbd_int.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define BLK_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define BLK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define BLK_POISON(p, n)   ((void)(p), (void)(n))
#define BLK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SLAB_BLOCKS (JBD_SLAB_BYTES / JBD_BLOCK_SIZE)

/* JBD_SLAB_BYTES of fresh zeroed memory aligned to that size, or NULL. */
static uint8_t *slab_map(void)
{
	size_t len = 2 * JBD_SLAB_BYTES;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	uintptr_t a = ((uintptr_t)p + JBD_SLAB_BYTES - 1) &
		      ~(uintptr_t)(JBD_SLAB_BYTES - 1);
	uint8_t *s = (uint8_t *)a;
	size_t head = (size_t)(s - p), tail = len - head - JBD_SLAB_BYTES;

	if (head)
		munmap(p, head);
	if (tail)
		munmap(s + JBD_SLAB_BYTES, tail);
	/* Advice only: without huge pages the slab faults by 4 KiB pages. */
	(void)madvise(s, JBD_SLAB_BYTES, MADV_HUGEPAGE);
	return s;
}

static void slab_unmap(uint8_t *s)
{
	BLK_UNPOISON(s, JBD_SLAB_BYTES);
	munmap(s, JBD_SLAB_BYTES);
}

/* Map one more slab and put its blocks on the stack; -ENOMEM. */
static int slab_add(struct jbd *j)
{
	size_t need = (j->n_slabs + 1) * SLAB_BLOCKS;

	if (j->n_slabs == j->cap_slabs) {
		size_t cap = j->cap_slabs ? j->cap_slabs * 2 : 16;
		uint8_t **n = realloc(j->slabs, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		j->slabs = n;
		j->cap_slabs = cap;
	}
	if (need > j->cap_cache) {
		size_t cap = j->cap_cache ? j->cap_cache : SLAB_BLOCKS;
		while (cap < need)
			cap *= 2;
		void **n = realloc(j->cache, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		j->cache = n;
		j->cap_cache = cap;
	}
	uint8_t *s = slab_map();
	if (s == NULL)
		return -ENOMEM;
	BLK_POISON(s, JBD_SLAB_BYTES);
	j->slabs[j->n_slabs++] = s;
	/* the lowest address on top: a stream fills a slab in order */
	for (size_t i = SLAB_BLOCKS; i-- > 0;)
		j->cache[j->n_cache++] = s + i * JBD_BLOCK_SIZE;
	return 0;
}

void *jbd__blk_get(struct jbd *j)
{
	if (j->n_cache == 0 && slab_add(j) < 0)
		return NULL;
	void *b = j->cache[--j->n_cache];

	/* its slab may be one jbd_free_cache marked: no longer free */
	j->cache_free_bytes = 0;
	j->cache_marked = false;

	BLK_UNPOISON(b, JBD_BLOCK_SIZE);
	return b;
}

void jbd__blk_put(struct jbd *j, void *blk)
{
	if (blk == NULL)
		return;
	/* slab_add made room for every block of every slab */
	assert(j->n_cache < j->cap_cache);
	BLK_POISON(blk, JBD_BLOCK_SIZE);
	j->cache[j->n_cache++] = blk;
	j->cache_marked = false;   /* its slab may be all spare now */
}

/* The slab list and the stack, empty; the slabs are not touched. */
static void arrays_free(struct jbd *j)
{
	free(j->slabs);
	free(j->cache);
	j->slabs = NULL;
	j->cache = NULL;
	j->n_slabs = j->cap_slabs = j->n_cache = j->cap_cache = 0;
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a;
	uintptr_t y = (uintptr_t)*(void *const *)b;

	return x < y ? -1 : x > y;
}

/* Sort the stack and the slabs by address and hand each slab whose blocks
 * are all on the stack to `unmap` (munmap and forget it) or, without it,
 * mark it free (MADV_FREE); returns the bytes of such slabs. */
static uint64_t spare_slabs(struct jbd *j, bool unmap)
{
	uint64_t spare = 0;

	if (j->n_slabs == 0)
		return 0;
	/* Both sorted by address, a slab's blocks on the stack are the run
	 * of entries inside it; a slab with all SLAB_BLOCKS there is free. */
	qsort(j->cache, j->n_cache, sizeof(*j->cache), ptr_cmp);
	qsort(j->slabs, j->n_slabs, sizeof(*j->slabs), ptr_cmp);
	size_t c = 0, kept_c = 0, kept_s = 0;

	for (size_t i = 0; i < j->n_slabs; i++) {
		uint8_t *s = j->slabs[i];
		size_t first = c;

		/* every block on the stack lies in a slab */
		assert(c == j->n_cache || (uint8_t *)j->cache[c] >= s);
		while (c < j->n_cache &&
		       (uint8_t *)j->cache[c] < s + JBD_SLAB_BYTES)
			c++;
		if (c - first == SLAB_BLOCKS) {
			spare += JBD_SLAB_BYTES;
			if (unmap) {
				slab_unmap(s);
				continue;
			}
			/* Advice only: a kernel without it keeps the pages. */
			(void)madvise(s, JBD_SLAB_BYTES, MADV_FREE);
		}
		for (size_t k = first; k < c; k++)
			j->cache[kept_c++] = j->cache[k];
		j->slabs[kept_s++] = s;
	}
	assert(c == j->n_cache);
	j->n_cache = kept_c;
	j->n_slabs = kept_s;
	if (j->n_slabs == 0)
		arrays_free(j);
	return spare;
}

void jbd_free_cache(struct jbd *j)
{
	/* Marked and untouched since: nothing new to mark, and no sort. */
	if (j->cache_marked)
		return;
	j->cache_free_bytes = spare_slabs(j, false);
	j->cache_marked = true;
}

void jbd_drop_cache(struct jbd *j)
{
	spare_slabs(j, true);
	j->cache_free_bytes = 0;
	j->cache_marked = false;
}

void jbd__blocks_fini(struct jbd *j)
{
	jbd_drop_cache(j);
	/* Blocks still out (none, once every transaction and handle is
	 * freed) keep their slabs mapped: whoever holds one may use it. */
	arrays_free(j);
}
