/* test_mgr_slab.c - the slab that holds inodes and directory entries
 * (mgrd/slab.c; docs/ARCHITECTURE.md "Namespace": memory per inode):
 * alignment, no overlap under churn of every size class, reuse of freed
 * objects, the accounting, and giving every page back once empty. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mgrd_int.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct obj {
	uint8_t *p;
	size_t size;
	uint8_t fill;
};

static void check(const struct obj *o)
{
	for (size_t i = 0; i < o->size; i++)
		cr_assert_eq(o->p[i], o->fill, "object %p byte %zu overwritten",
			     (void *)o->p, i);
}

Test(mgr_slab, churn_keeps_objects_apart)
{
	enum { N = 4000 };
	static struct obj objs[N];
	struct mgr_slab_stats st;
	size_t live = 0, bytes = 0;
	uint64_t s = 7;

	for (int step = 0; step < 100000; step++) {
		struct obj *o = &objs[rnd(&s) % N];

		if (o->p) {
			check(o);
			mgr_slab_free(o->p, o->size);
			bytes -= (o->size + 7) / 8 * 8;
			o->p = NULL;
			live--;
		} else {
			o->size = 1 + rnd(&s) % MGR_SLAB_MAX;
			o->fill = (uint8_t)rnd(&s);
			o->p = mgr_slab_alloc(o->size);
			cr_assert_not_null(o->p);
			cr_assert_eq((uintptr_t)o->p % 8, 0, "not 8-aligned");
			memset(o->p, o->fill, o->size);
			bytes += (o->size + 7) / 8 * 8;
			live++;
		}
	}
	mgr_slab_stats(&st);
	cr_assert_eq(st.objects, live);
	cr_assert_eq(st.bytes, bytes);
	for (int i = 0; i < N; i++)
		if (objs[i].p) {
			check(&objs[i]);
			mgr_slab_free(objs[i].p, objs[i].size);
			objs[i].p = NULL;
		}
	cr_assert_eq(mgr_slab_release(), 0);
	mgr_slab_stats(&st);
	cr_assert_eq(st.pages, 0);
	cr_assert_eq(st.objects, 0);
}

Test(mgr_slab, freed_object_is_reused_and_classes_are_8_bytes)
{
	struct mgr_slab_stats st;
	void *a = mgr_slab_alloc(136), *b, *c;

	cr_assert_not_null(a);
	mgr_slab_free(a, 136);
	b = mgr_slab_alloc(130);      /* same 136-byte class */
	cr_assert_eq(b, a);
	c = mgr_slab_alloc(137);      /* the next class */
	cr_assert_neq(c, a);
	mgr_slab_stats(&st);
	cr_assert_eq(st.objects, 2);
	cr_assert_eq(st.bytes, 136 + 144);
	cr_assert_eq(mgr_slab_release(), 2, "pages kept while objects live");
	mgr_slab_free(b, 130);
	mgr_slab_free(c, 137);
	cr_assert_eq(mgr_slab_release(), 0);
}

Test(mgr_slab, objects_are_packed)
{
	enum { N = 10000 };
	static void *p[N];
	struct mgr_slab_stats st;

	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = mgr_slab_alloc(32));
	mgr_slab_stats(&st);
	/* 10000 x 32 B in 64 KiB pages, less their 16-byte headers. */
	cr_assert_eq(st.pages, (N * 32 + 65519) / 65520);
	for (int i = 0; i < N; i++)
		mgr_slab_free(p[i], 32);
	cr_assert_eq(mgr_slab_release(), 0);
}
