/* test_iod_stale.c - iod/stale_fwd.c: which later mutation heals a forward
 * the twin refused as stale, and which does not. */
#include <criterion/criterion.h>
#include <errno.h>

#include "iod_int.h"

#define ALL (IOD_STALE_CONTENTS | IOD_STALE_SIZE | IOD_STALE_ALLOC)
#define K64 (64u << 10)
#define LATER 1000    /* a healer applied after every entry (seq 10) */

static struct iod_stale_fwd range(uint64_t ino, uint32_t col, uint64_t off,
				  uint64_t len, uint8_t needs)
{
	return (struct iod_stale_fwd){ .kind = IOD_STALE_RANGE, .ino = ino,
				       .column = col, .off = off, .len = len,
				       .needs = needs, .seq = 10,
				       .due_ms = 100 };
}

/* Is [off, off + len) of (ino, col) exactly one entry of l? */
static bool has(const struct iod_stale_list *l, uint64_t ino, uint32_t col,
		uint64_t off, uint64_t len)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (l->e[i].kind == IOD_STALE_RANGE && l->e[i].ino == ino &&
		    l->e[i].column == col && l->e[i].off == off &&
		    l->e[i].len == len)
			return true;
	return false;
}

/* A retry split differently from the refused write heals it piece by
 * piece; another subfile or column heals nothing. */
Test(iod_stale, retry_split_heals_by_pieces)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd f = range(5, 1, 0, 2 * K64, ALL);

	cr_assert_eq(iod_stale_add(&l, &f), 0);
	iod_stale_heal_range(&l, LATER, 5, 0, 0, 4 * K64, ALL);      /* column 0 */
	iod_stale_heal_range(&l, LATER, 6, 1, 0, 4 * K64, ALL);      /* ino 6 */
	cr_assert_eq(l.n, 1);
	iod_stale_heal_range(&l, LATER, 5, 1, K64 / 2, K64 / 2, ALL);   /* middle */
	cr_assert_eq(l.n, 2);
	cr_assert(has(&l, 5, 1, 0, K64 / 2));
	cr_assert(has(&l, 5, 1, K64, K64));
	iod_stale_heal_range(&l, LATER, 5, 1, 0, K64 / 2, ALL);
	cr_assert_eq(l.n, 1);
	iod_stale_heal_range(&l, LATER, 5, 1, K64 + 4096, 3 * K64, ALL);   /* tail */
	cr_assert_eq(l.n, 1);
	cr_assert(has(&l, 5, 1, K64, 4096));
	iod_stale_heal_range(&l, LATER, 5, 1, 0, 2 * K64, ALL);
	cr_assert_eq(l.n, 0);
}

/* A punch makes bytes equal but not a size a write may have extended; an
 * allocation heals a refused allocation only; a zeroing's refusal needs
 * more than a punch gives. */
Test(iod_stale, what_each_mutation_gives)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd w = range(7, 0, 0, K64, ALL);
	struct iod_stale_fwd a = range(7, 1, 0, K64, IOD_STALE_ALLOC);
	struct iod_stale_fwd z = range(7, 2, 0, K64, IOD_STALE_CONTENTS |
				       IOD_STALE_ALLOC);

	cr_assert_eq(iod_stale_add(&l, &w), 0);
	cr_assert_eq(iod_stale_add(&l, &a), 0);
	cr_assert_eq(iod_stale_add(&l, &z), 0);
	for (uint32_t c = 0; c < 3; c++)
		iod_stale_heal_range(&l, LATER, 7, c, 0, K64, IOD_STALE_CONTENTS);
	cr_assert_eq(l.n, 3, "a punch healed a write, allocation or zeroing");
	iod_stale_heal_range(&l, LATER, 7, 0, 0, K64, IOD_STALE_ALLOC);
	iod_stale_heal_range(&l, LATER, 7, 1, 0, K64, IOD_STALE_ALLOC);
	cr_assert_eq(l.n, 2);
	cr_assert(has(&l, 7, 0, 0, K64));
	cr_assert(has(&l, 7, 2, 0, K64));
	iod_stale_heal_range(&l, LATER, 7, 0, 0, K64, ALL);
	iod_stale_heal_range(&l, LATER, 7, 2, 0, K64, ALL);
	cr_assert_eq(l.n, 0);
}

/* A truncate both applied drops the bytes past its size on both: ranges
 * are clipped there, but one wholly past it stays (its write may have
 * created the subfile, which a truncate does not create at the twin); a
 * refused truncate is healed by one to a size no larger than its own. */
Test(iod_stale, truncate_clips_and_heals)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd f = range(9, 0, K64, 2 * K64, ALL);
	struct iod_stale_fwd t = { .kind = IOD_STALE_TRUNC, .ino = 9,
				   .column = 1, .off = 3 * K64, .seq = 10 };

	cr_assert_eq(iod_stale_add(&l, &f), 0);
	cr_assert_eq(iod_stale_add(&l, &t), 0);
	iod_stale_heal_trunc(&l, LATER, 9, 0, 4 * K64);   /* past it: no change */
	cr_assert(has(&l, 9, 0, K64, 2 * K64));
	iod_stale_heal_trunc(&l, LATER, 9, 0, 2 * K64);
	cr_assert(has(&l, 9, 0, K64, K64));
	iod_stale_heal_trunc(&l, LATER, 9, 0, K64);
	iod_stale_heal_trunc(&l, LATER, 9, 0, 0);
	cr_assert(has(&l, 9, 0, K64, K64), "a range past the size went");
	iod_stale_heal_range(&l, LATER, 9, 0, K64, K64, ALL);
	cr_assert_eq(l.n, 1);
	iod_stale_heal_trunc(&l, LATER, 9, 1, 3 * K64 + 1);   /* larger: not healed */
	cr_assert_eq(l.n, 1);
	iod_stale_heal_range(&l, LATER, 9, 1, 0, 8 * K64, ALL);   /* a write: no */
	cr_assert_eq(l.n, 1);
	iod_stale_heal_trunc(&l, LATER, 9, 1, 3 * K64);
	cr_assert_eq(l.n, 0);
}

/* Only a mutation applied here after the refused one heals it: the
 * success of an earlier forward can be answered after a later one's
 * refusal. */
Test(iod_stale, only_a_later_mutation_heals)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd f = range(3, 0, 0, K64, ALL);
	struct iod_stale_fwd t = { .kind = IOD_STALE_TRUNC, .ino = 3,
				   .column = 1, .off = 0, .seq = 10 };

	cr_assert_eq(iod_stale_add(&l, &f), 0);
	cr_assert_eq(iod_stale_add(&l, &t), 0);
	iod_stale_heal_range(&l, 9, 3, 0, 0, K64, ALL);
	iod_stale_heal_range(&l, 10, 3, 0, 0, K64, ALL);
	iod_stale_heal_trunc(&l, 10, 3, 1, 0);
	iod_stale_heal_delete(&l, 10, 3, UINT32_MAX);
	cr_assert_eq(l.n, 2);
	iod_stale_heal_range(&l, 11, 3, 0, 0, K64, ALL);
	iod_stale_heal_delete(&l, 11, 3, UINT32_MAX);
	cr_assert_eq(l.n, 0);
}

/* A delete both applied heals everything about its columns; a refused
 * delete is healed column by column. */
Test(iod_stale, delete_heals_its_columns)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd r0 = range(11, 0, 0, K64, ALL);
	struct iod_stale_fwd r3 = range(11, 3, 0, K64, ALL);
	struct iod_stale_fwd x = { .kind = IOD_STALE_DELETE, .ino = 12,
				   .cols = 0x5, .seq = 10 };

	cr_assert_eq(iod_stale_add(&l, &r0), 0);
	cr_assert_eq(iod_stale_add(&l, &r3), 0);
	cr_assert_eq(iod_stale_add(&l, &x), 0);
	iod_stale_heal_delete(&l, LATER, 11, 0x1);
	cr_assert_eq(l.n, 2);
	cr_assert(has(&l, 11, 3, 0, K64));
	iod_stale_heal_delete(&l, LATER, 12, 0x1);
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.e[1].cols, 0x4);
	iod_stale_heal_delete(&l, LATER, 12, 0xc);
	iod_stale_heal_delete(&l, LATER, 11, 0x8);
	cr_assert_eq(l.n, 0);
}

/* A full list refuses more; a split that does not fit keeps its entry
 * whole (reported later, never lost). */
Test(iod_stale, full_list_keeps_entries_whole)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd f;

	for (uint32_t i = 0; i < IOD_STALE_MAX; i++) {
		f = range(20 + i, 0, 0, 3 * K64, ALL);
		cr_assert_eq(iod_stale_add(&l, &f), 0);
	}
	cr_assert_eq(iod_stale_add(&l, &f), -ENOSPC);
	iod_stale_heal_range(&l, LATER, 20, 0, K64, K64, ALL);
	cr_assert_eq(l.n, IOD_STALE_MAX);
	cr_assert(has(&l, 20, 0, 0, 3 * K64));
	iod_stale_heal_range(&l, LATER, 21, 0, 0, K64, ALL);   /* no split: fits */
	cr_assert(has(&l, 21, 0, K64, 2 * K64));
	iod_stale_heal_range(&l, LATER, 22, 0, 0, 3 * K64, ALL);   /* room for one */
	iod_stale_heal_range(&l, LATER, 20, 0, K64, K64, ALL);
	cr_assert_eq(l.n, IOD_STALE_MAX);
	cr_assert(has(&l, 20, 0, 0, K64));
	cr_assert(has(&l, 20, 0, 2 * K64, K64));
}

Test(iod_stale, due_in_time)
{
	struct iod_stale_list l = { .n = 0 };
	struct iod_stale_fwd a = range(1, 0, 0, K64, ALL);
	struct iod_stale_fwd b = range(2, 0, 0, K64, ALL);

	a.due_ms = 300;
	b.due_ms = 200;
	cr_assert_eq(iod_stale_add(&l, &a), 0);
	cr_assert_eq(iod_stale_add(&l, &b), 0);
	cr_assert_null(iod_stale_due(&l, 199));
	cr_assert_eq(iod_stale_due(&l, 200)->ino, 2);
	iod_stale_clear(&l);
	cr_assert_null(iod_stale_due(&l, 1000));
}
