/* slab.c - the namespace's small objects (inodes, directory entries)
 * without malloc's per-chunk cost (docs/ARCHITECTURE.md "Namespace":
 * memory per inode).
 *
 * glibc malloc puts an 8-byte header before every chunk and rounds the
 * chunk to 16 bytes: a 136-byte inode takes 144, a 30-byte entry 48.  Here
 * every size class is a multiple of 8 bytes, objects of a class are cut
 * from 64 KiB pages with no header (the caller gives the size back on
 * free, as it always knows it), and a freed object goes on its class's
 * free list, threaded through its first 8 bytes, for the next allocation
 * of that class.
 *
 * Pages are never returned: a namespace that shrank keeps its peak, as
 * malloc's fragmented heap mostly did too.  Single-threaded (mgrd's loop);
 * a fork (the pair's snapshot writer) only reads.
 *
 * Under AddressSanitizer free objects and the unused rest of a page are
 * poisoned (all but a free object's link), so a use after free or a read
 * past the carved part of a page is still reported; objects of one class
 * sit side by side without redzones.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE_SIZE (64u * 1024u)
#define GRAIN 8u
#define NCLASS (MGR_SLAB_MAX / GRAIN)

/* A page starts with this header (kept 8-aligned), then its objects. */
struct page {
	struct page *next;        /* every page, newest first */
	uint64_t pad;
};

struct free_obj {
	struct free_obj *next;
};

struct class {
	struct free_obj *free;    /* freed objects, LIFO */
	char *bump, *end;         /* the uncarved rest of the current page */
};

static struct class classes[NCLASS];
static struct page *pages;
static struct mgr_slab_stats stats;

static size_t class_of(size_t size)
{
	assert(size > 0 && size <= MGR_SLAB_MAX);
	return (size + GRAIN - 1) / GRAIN - 1;
}

void *mgr_slab_alloc(size_t size)
{
	size_t c = class_of(size), osz = (c + 1) * GRAIN;
	struct class *k = &classes[c];
	void *p;

	if (k->free) {
		struct free_obj *o = k->free;

		k->free = o->next;
		p = o;
	} else {
		if ((size_t)(k->end - k->bump) < osz) {
			struct page *pg = malloc(PAGE_SIZE);

			if (!pg)
				return NULL;
			pg->next = pages;
			pages = pg;
			stats.pages++;
			/* The tail of the previous page that no object fits in
			 * is lost to this class. */
			k->bump = (char *)(pg + 1);
			k->end = (char *)pg + PAGE_SIZE;
			POISON(k->bump, (size_t)(k->end - k->bump));
		}
		p = k->bump;
		k->bump += osz;
	}
	UNPOISON(p, osz);
	stats.objects++;
	stats.bytes += osz;
	return p;
}

void mgr_slab_free(void *p, size_t size)
{
	size_t c, osz;
	struct free_obj *o = p;

	if (!p)
		return;
	c = class_of(size);
	osz = (c + 1) * GRAIN;
	assert(stats.objects > 0 && stats.bytes >= osz);
	o->next = classes[c].free;
	classes[c].free = o;
	POISON((char *)p + sizeof(*o), osz - sizeof(*o));
	stats.objects--;
	stats.bytes -= osz;
}

void mgr_slab_stats(struct mgr_slab_stats *st)
{
	*st = stats;
}

size_t mgr_slab_release(void)
{
	struct page *pg, *next;

	if (stats.objects)
		return stats.objects;
	for (pg = pages; pg; pg = next) {
		next = pg->next;
		UNPOISON(pg, PAGE_SIZE);
		free(pg);
	}
	pages = NULL;
	for (size_t c = 0; c < NCLASS; c++)
		classes[c] = (struct class){ 0 };
	stats = (struct mgr_slab_stats){ 0 };
	return 0;
}
