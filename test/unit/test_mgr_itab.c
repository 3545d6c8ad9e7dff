/* test_mgr_itab.c - mgrd's compact in-memory structures (docs/ARCHITECTURE.md
 * "Namespace": memory per inode): the inode table (itab.c), shared layouts
 * (lay.c) and a directory's name index (ns.c) under churn, against a plain
 * reference. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mgrd_int.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

Test(mgr_itab, churn_matches_reference)
{
	enum { N = 5000 };
	static struct mgr_inode *ref[N];
	struct mgr_itab t;
	uint64_t s = 42;

	mgr_itab_init(&t);
	for (int step = 0; step < 60000; step++) {
		uint64_t ino = 1 + rnd(&s) % N;

		if (ref[ino - 1] && rnd(&s) % 3 == 0) {
			cr_assert_eq(mgr_itab_del(&t, ino), ref[ino - 1]);
			mgr_inode_free(ref[ino - 1]);
			ref[ino - 1] = NULL;
		} else if (!ref[ino - 1]) {
			ref[ino - 1] = mgr_inode_new(ino, S_IFREG);
			cr_assert_eq(mgr_itab_put(&t, ref[ino - 1]), 0);
		} else {
			struct mgr_inode *dup = mgr_inode_new(ino, S_IFREG);

			cr_assert_eq(mgr_itab_put(&t, dup), -EEXIST);
			mgr_inode_free(dup);
		}
		if (step % 997 == 0) {
			size_t n = 0, k;
			struct mgr_inode **v;

			for (uint64_t i = 1; i <= N; i++) {
				cr_assert_eq(mgr_itab_get(&t, i), ref[i - 1],
					     "ino %llu", (unsigned long long)i);
				n += ref[i - 1] != NULL;
			}
			cr_assert_eq(t.count, n);
			cr_assert_leq(t.count * 4, t.cap * 3);
			v = mgr_itab_sorted(&t, &k);
			cr_assert_eq(k, n);
			for (size_t i = 1; i < k; i++)
				cr_assert_lt(v[i - 1]->ino, v[i]->ino);
			free(v);
		}
	}
	cr_assert_null(mgr_itab_del(&t, N + 1));
	for (int i = 0; i < N; i++)
		if (ref[i])
			mgr_inode_free(ref[i]);
	mgr_itab_free(&t);
}

Test(mgr_itab, layouts_are_shared_and_freed)
{
	struct r0_layout a = { .stripe_size = 1u << 20, .stripe_count = 2,
			       .groups = { 1, 0 } };
	struct r0_layout b = a, none = { 0 };
	const struct r0_layout *pa, *pb, *pc;

	b.groups[5] = 99;           /* past stripe_count: not part of it */
	pa = mgr_layout_get(&a);
	pb = mgr_layout_get(&b);
	cr_assert_eq(pa, pb);
	b.groups[1] = 1;
	pc = mgr_layout_get(&b);
	cr_assert_neq(pa, pc);
	cr_assert_eq(pc->groups[1], 1);
	cr_assert_eq(mgr_layout_get(&none), &mgr_layout_none);
	mgr_layout_put(pa);
	cr_assert_eq(pb->groups[0], 1);   /* still referenced */
	mgr_layout_put(pb);
	mgr_layout_put(pc);
	mgr_layout_put(&mgr_layout_none);
}

Test(mgr_itab, dir_index_under_churn)
{
	enum { N = 3000 };
	static bool live[N];
	struct mgr_ns ns;
	struct mgr_time now = { 1, 0 };
	uint64_t s = 7;
	char name[32];

	cr_assert_eq(mgr_ns_init(&ns, 1, 0, 0, &now), 0);
	for (int step = 0; step < 20000; step++) {
		uint32_t i = (uint32_t)(rnd(&s) % N);
		struct mgr_create c = { .parent = MGR_ROOT_INO, .name = name,
					.mode = S_IFREG | 0644, .now = now };
		struct mgr_inode *out;

		snprintf(name, sizeof(name), "name-%u", i);
		if (live[i]) {
			cr_assert_eq(mgr_ns_unlink(&ns, MGR_ROOT_INO, name,
						   false, &now), 0);
			live[i] = false;
		} else {
			cr_assert_eq(mgr_ns_create(&ns, &c, &out), 0);
			live[i] = true;
		}
		if (step % 1999 == 0) {
			const struct mgr_dir *d =
				mgr_ns_get(&ns, MGR_ROOT_INO)->dir;
			uint32_t n = 0;

			for (uint32_t k = 0; k < N; k++) {
				snprintf(name, sizeof(name), "name-%u", k);
				cr_assert_eq(mgr_dir_find(d, name) != NULL,
					     live[k], "%s", name);
				n += live[k];
			}
			cr_assert_eq(d->count, n);
		}
	}
	mgr_ns_free(&ns);
}
