/* test_lock.c - unit tests of the lock table (common/lock.c): each rule
 * L1..L7 of lock.c, release by owner/file/session, deadlock detection, and
 * a randomized run against a byte-map model (seed printed on failure).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

static struct tw_lk_table T;

static void setup(void) { tw_lk_init(&T); }
static void teardown(void) { tw_lk_free(&T); }

TestSuite(lock, .init = setup, .fini = teardown);

static struct tw_lk lk(uint64_t session, uint64_t owner, int type,
		       uint64_t start, uint64_t end)
{
	struct tw_lk l;

	memset(&l, 0, sizeof(l));
	l.session = session;
	l.owner = owner;
	l.file = owner * 100;
	l.pid = (uint32_t)(owner + 1000);
	l.kind = TW_LK_POSIX;
	l.type = (uint8_t)type;
	l.start = start;
	l.end = end;
	return l;
}

static void set(uint64_t s, uint64_t o, int type, uint64_t a, uint64_t b)
{
	struct tw_lk l = lk(s, o, type, a, b);

	cr_assert_eq(tw_lk_set(&T, 7, &l), 0);
}

static bool blocked(uint64_t s, uint64_t o, int type, uint64_t a, uint64_t b,
		    struct tw_lk *c)
{
	struct tw_lk l = lk(s, o, type, a, b);

	return tw_lk_test(&T, 7, &l, c);
}

/* The owner's locks on ino 7 as "T:a-b T:a-b" in insertion order. */
static const char *dump(uint64_t s, uint64_t o)
{
	static char buf[512];
	const struct tw_lk *l = NULL;
	size_t it = 0, n = 0;
	uint64_t ino;

	buf[0] = 0;
	while ((l = tw_lk_next(&T, &it, &ino, l))) {
		if (ino != 7 || l->session != s || l->owner != o)
			continue;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%c:%llu-%lld",
				      n ? " " : "", l->type == TW_LK_RDLCK ? 'R' : 'W',
				      (unsigned long long)l->start,
				      l->end == TW_LK_EOF ? -1ll : (long long)l->end);
	}
	return buf;
}

Test(lock, l3_conflicts_read_write)
{
	struct tw_lk c;

	set(1, 1, TW_LK_WRLCK, 2, 6);
	cr_assert(blocked(1, 2, TW_LK_RDLCK, 0, TW_LK_EOF, &c));
	cr_assert_eq(c.start, 2);
	cr_assert_eq(c.end, 6);
	cr_assert_eq(c.type, TW_LK_WRLCK);
	cr_assert_eq(c.pid, 1001);
	cr_assert_not(blocked(1, 2, TW_LK_WRLCK, 7, 9, NULL));
	cr_assert_not(blocked(1, 2, TW_LK_WRLCK, 0, 1, NULL));
	cr_assert(blocked(1, 2, TW_LK_WRLCK, 6, 6, NULL));
	/* another session with the same owner id is another owner */
	cr_assert(blocked(2, 1, TW_LK_RDLCK, 3, 3, NULL));
	set(1, 3, TW_LK_RDLCK, 10, 20);
	cr_assert_not(blocked(1, 2, TW_LK_RDLCK, 10, 20, NULL));
	cr_assert(blocked(1, 2, TW_LK_WRLCK, 20, 30, NULL));
}

Test(lock, l2_own_locks_never_conflict)
{
	set(1, 1, TW_LK_WRLCK, 0, TW_LK_EOF);
	cr_assert_not(blocked(1, 1, TW_LK_WRLCK, 5, 5, NULL));
}

Test(lock, l1_kinds_independent)
{
	struct tw_lk f = lk(1, 9, TW_LK_WRLCK, 0, TW_LK_EOF);

	f.kind = TW_LK_FLOCK;
	cr_assert_eq(tw_lk_set(&T, 7, &f), 0);
	cr_assert_not(blocked(1, 2, TW_LK_WRLCK, 0, 10, NULL));
	f.owner = 10;
	cr_assert(tw_lk_test(&T, 7, &f, NULL));
	f.type = TW_LK_RDLCK;
	cr_assert(tw_lk_test(&T, 7, &f, NULL));
}

Test(lock, l4_split_on_unlock)
{
	set(1, 1, TW_LK_WRLCK, 0, 99);
	set(1, 1, TW_LK_UNLCK, 40, 59);
	cr_assert_str_eq(dump(1, 1), "W:0-39 W:60-99");
	cr_assert(blocked(1, 2, TW_LK_WRLCK, 10, 10, NULL));
	cr_assert_not(blocked(1, 2, TW_LK_WRLCK, 50, 50, NULL));
	cr_assert(blocked(1, 2, TW_LK_WRLCK, 70, 70, NULL));
	cr_assert_eq(T.n_locks, 2);
}

Test(lock, l4_upgrade_and_downgrade_part)
{
	set(1, 1, TW_LK_RDLCK, 0, 9);
	set(1, 1, TW_LK_WRLCK, 5, TW_LK_EOF);
	cr_assert_str_eq(dump(1, 1), "R:0-4 W:5--1");
	cr_assert_not(blocked(1, 2, TW_LK_RDLCK, 2, 2, NULL));
	cr_assert(blocked(1, 2, TW_LK_RDLCK, 7, 7, NULL));
	set(1, 1, TW_LK_RDLCK, 3, 6);
	cr_assert_str_eq(dump(1, 1), "W:7--1 R:0-6");
}

Test(lock, l5_merge_adjacent_and_overlapping)
{
	set(1, 1, TW_LK_RDLCK, 0, 4);
	set(1, 1, TW_LK_RDLCK, 10, 14);
	set(1, 1, TW_LK_RDLCK, 5, 9);
	cr_assert_str_eq(dump(1, 1), "R:0-14");
	set(1, 1, TW_LK_RDLCK, 12, 20);
	cr_assert_str_eq(dump(1, 1), "R:0-20");
	cr_assert_eq(T.n_locks, 1);
	/* different types touch but do not merge */
	set(1, 1, TW_LK_WRLCK, 21, 30);
	cr_assert_str_eq(dump(1, 1), "R:0-20 W:21-30");
}

Test(lock, unlock_everything_frees_inode)
{
	set(1, 1, TW_LK_WRLCK, 100, TW_LK_EOF);
	set(1, 1, TW_LK_UNLCK, 0, TW_LK_EOF);
	cr_assert_eq(T.n_locks, 0);
	cr_assert_eq(T.by_ino.count, 0);
	/* unlocking nothing is fine */
	set(1, 1, TW_LK_UNLCK, 0, 5);
	cr_assert_eq(T.by_ino.count, 0);
}

Test(lock, bad_arguments)
{
	struct tw_lk l = lk(1, 1, 3, 0, 1);

	cr_assert_eq(tw_lk_set(&T, 7, &l), -EINVAL);
	l = lk(1, 1, TW_LK_WRLCK, 5, 4);
	cr_assert_eq(tw_lk_set(&T, 7, &l), -EINVAL);
}

Test(lock, drop_owner_file_session)
{
	struct tw_lk f = lk(1, 5, TW_LK_WRLCK, 0, TW_LK_EOF);

	set(1, 1, TW_LK_WRLCK, 0, 9);
	set(1, 1, TW_LK_RDLCK, 20, 29);
	set(1, 2, TW_LK_WRLCK, 10, 19);
	set(2, 1, TW_LK_RDLCK, 30, 39);
	f.kind = TW_LK_FLOCK;
	f.file = 100;                 /* owner 1's file */
	cr_assert_eq(tw_lk_set(&T, 7, &f), 0);
	/* FLUSH drops POSIX locks of the owner only, not its flock */
	cr_assert_eq(tw_lk_drop_owner(&T, 7, 1, 1), 2);
	cr_assert_str_eq(dump(1, 1), "");
	cr_assert_eq(T.n_locks, 3);
	/* RELEASE of file 200 (owner 2's) drops its lock; file 100 the flock */
	cr_assert_eq(tw_lk_drop_file(&T, 7, 1, 200), 1);
	cr_assert_eq(tw_lk_drop_file(&T, 7, 1, 100), 1);
	cr_assert_eq(T.n_locks, 1);
	cr_assert_eq(tw_lk_drop_session(&T, 2), 1);
	cr_assert_eq(T.n_locks, 0);
	cr_assert_eq(T.by_ino.count, 0);
}

Test(lock, waiters_fifo_and_grant)
{
	struct tw_lk_waiter w1 = { .ino = 7 }, w2 = { .ino = 7 };

	set(1, 1, TW_LK_WRLCK, 0, 9);
	w1.want = lk(1, 2, TW_LK_WRLCK, 0, 0);
	w2.want = lk(1, 3, TW_LK_WRLCK, 5, 5);
	cr_assert_eq(tw_lk_wait_add(&T, &w1), 0);
	cr_assert_eq(tw_lk_wait_add(&T, &w2), 0);
	cr_assert_null(tw_lk_wait_grantable(&T, 7));
	set(1, 1, TW_LK_UNLCK, 5, 9);
	cr_assert_eq(tw_lk_wait_grantable(&T, 7), &w2);   /* L7: among those that fit */
	set(1, 1, TW_LK_UNLCK, 0, 9);
	cr_assert_eq(tw_lk_wait_grantable(&T, 7), &w1);
	tw_lk_wait_del(&T, &w1);
	tw_lk_wait_del(&T, &w2);
	cr_assert_eq(T.n_waiters, 0);
	cr_assert_eq(T.by_ino.count, 0);
}

Test(lock, deadlock_two_owners)
{
	struct tw_lk_waiter w = { .ino = 7 };
	struct tw_lk want;

	set(1, 1, TW_LK_WRLCK, 0, 0);      /* A holds byte 0 */
	set(2, 1, TW_LK_WRLCK, 1, 1);      /* B (other mount) holds byte 1 */
	w.want = lk(1, 1, TW_LK_WRLCK, 1, 1);  /* A waits for byte 1 */
	cr_assert_not(tw_lk_deadlock(&T, 7, &w.want));
	cr_assert_eq(tw_lk_wait_add(&T, &w), 0);
	want = lk(2, 1, TW_LK_WRLCK, 0, 0);    /* B asks for byte 0: cycle */
	cr_assert(tw_lk_deadlock(&T, 7, &want));
	want = lk(3, 1, TW_LK_WRLCK, 0, 0);    /* C would just wait */
	cr_assert_not(tw_lk_deadlock(&T, 7, &want));
	want.kind = TW_LK_FLOCK;
	cr_assert_not(tw_lk_deadlock(&T, 7, &want));
	tw_lk_wait_del(&T, &w);
}

Test(lock, deadlock_three_owners)
{
	struct tw_lk_waiter wa = { .ino = 7 }, wb = { .ino = 8 };
	struct tw_lk want, b = lk(2, 1, TW_LK_WRLCK, 0, 0);

	set(1, 1, TW_LK_WRLCK, 0, 0);
	cr_assert_eq(tw_lk_set(&T, 8, &b), 0);  /* B holds ino 8 */
	set(3, 1, TW_LK_WRLCK, 5, 5);           /* C holds ino 7 byte 5 */
	wa.want = lk(1, 1, TW_LK_WRLCK, 0, 0);
	wa.ino = 8;                             /* A waits for B */
	wb.want = lk(2, 1, TW_LK_WRLCK, 5, 5);
	wb.ino = 7;                             /* B waits for C */
	cr_assert_eq(tw_lk_wait_add(&T, &wa), 0);
	cr_assert_eq(tw_lk_wait_add(&T, &wb), 0);
	want = lk(3, 1, TW_LK_RDLCK, 0, 0);     /* C asks A's byte */
	cr_assert(tw_lk_deadlock(&T, 7, &want));
	tw_lk_wait_del(&T, &wa);
	tw_lk_wait_del(&T, &wb);
}

/* Randomized: two owners set random ranges on bytes 0..63 (63 stands for
 * EOF); after each step the table must match a byte map. */
Test(lock, random_against_model)
{
	unsigned seed = 12345;
	uint8_t model[3][64];   /* [owner][byte] = type */

	memset(model, 0, sizeof(model));
	for (int step = 0; step < 20000; step++) {
		uint64_t o = (uint64_t)(rand_r(&seed) % 3);
		int type = rand_r(&seed) % 3;
		uint64_t a = (uint64_t)(rand_r(&seed) % 64);
		uint64_t b = a + (uint64_t)(rand_r(&seed) % (64 - a));
		struct tw_lk want = lk(1, o, type, a, b == 63 ? TW_LK_EOF : b);
		uint8_t got[3][64];
		const struct tw_lk *l = NULL;
		size_t it = 0;
		uint64_t ino;

		cr_assert_eq(tw_lk_set(&T, 7, &want), 0);
		for (uint64_t x = a; x <= b; x++)
			model[o][x] = (uint8_t)type;
		memset(got, 0, sizeof(got));
		while ((l = tw_lk_next(&T, &it, &ino, l))) {
			uint64_t end = l->end == TW_LK_EOF ? 63 : l->end;

			cr_assert(l->end == TW_LK_EOF || l->end < 63,
				  "seed 12345 step %d: bad end", step);
			for (uint64_t x = l->start; x <= end; x++) {
				/* L6: disjoint per owner */
				cr_assert_eq(got[l->owner][x], 0,
					     "seed 12345 step %d: overlap", step);
				got[l->owner][x] = l->type;
			}
			/* L5: no touching neighbour of the same type */
			if (l->start > 0)
				cr_assert_neq(model[l->owner][l->start - 1],
					      l->type, "step %d: unmerged", step);
		}
		cr_assert_arr_eq(got, model, sizeof(got),
				 "seed 12345 step %d: table differs", step);
	}
}
