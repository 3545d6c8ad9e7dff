/* test_iod_resync.c - the pieces of iod/resync.c that hold state without
 * I/O: the acknowledged-position FIFO (resync_cursor.c) and the merge of
 * two twins' write-intent marks (intent_list.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "iod_int.h"

/* Positions become done only in queue order, whatever order the acks
 * come in; set_off raises a queued one. */
Test(rs_cursor, done_in_order_only)
{
	struct iod_rs_cursor c;
	struct iod_rs_pos p[4] = { { 5, 0, 0 }, { 5, 0, 1 << 20 },
				   { 5, 0, 2 << 20 }, { 7, 1, UINT64_MAX } };
	uint64_t id[4];

	cr_assert_eq(iod_rs_cursor_init(&c, 4), 0);
	for (int i = 0; i < 4; i++)
		id[i] = iod_rs_cursor_push(&c, &p[i]);
	cr_assert_eq(iod_rs_cursor_room(&c), 0);
	iod_rs_cursor_set_off(&c, id[2], 3 << 20);
	cr_assert_not(iod_rs_cursor_ack(&c, id[1]));
	cr_assert_not(iod_rs_cursor_ack(&c, id[3]));
	cr_assert_not(c.has_done);
	cr_assert(iod_rs_cursor_ack(&c, id[0]));
	cr_assert(c.has_done);
	cr_assert_eq(c.done.off, 1u << 20);      /* 0 and 1 acked, 2 not */
	cr_assert_eq(iod_rs_cursor_room(&c), 2);
	cr_assert(iod_rs_cursor_ack(&c, id[2]));  /* pops 2 and 3 */
	cr_assert_eq(c.done.ino, 7);
	cr_assert_eq(c.done.column, 1);
	cr_assert_eq(c.done.off, UINT64_MAX);
	cr_assert_eq(iod_rs_cursor_room(&c), 4);
	/* Ids go on past the capacity (slots are reused). */
	id[0] = iod_rs_cursor_push(&c, &p[0]);
	cr_assert_eq(id[0], 4);
	cr_assert(iod_rs_cursor_ack(&c, id[0]));
	cr_assert_eq(c.done.ino, 5);
	iod_rs_cursor_free(&c);
}

/* Merging keeps (ino, column, first) order and drops exact duplicates;
 * a whole-subfile run stays distinct from a region run. */
Test(intent_list, merge_sorted_dedup)
{
	struct iod_intent_run *v = malloc(3 * sizeof(*v));
	struct iod_intent_run add[4] = {
		{ 9, 0, 4, 1, true }, { 3, 1, 0, 1, false },
		{ 3, 0, 7, 1, false }, { 3, 0, 0, UINT64_MAX, false },
	};
	size_t n = 3;

	cr_assert_not_null(v);
	v[0] = (struct iod_intent_run){ 3, 0, 2, 1, false };
	v[1] = (struct iod_intent_run){ 3, 0, 7, 1, true };
	v[2] = (struct iod_intent_run){ 9, 0, 4, 1, false };
	cr_assert_eq(iod_intent_merge(&v, &n, add, 4), 0);
	cr_assert_eq(n, 5);
	cr_assert(v[2].pinned, "a pinned copy keeps the pin");
	cr_assert_not(v[1].pinned);
	cr_assert(v[4].pinned, "... whichever side it came from");
	cr_assert(v[0].ino == 3 && v[0].column == 0 && v[0].first == 0 &&
		  v[0].count == UINT64_MAX);
	cr_assert(v[1].ino == 3 && v[1].first == 2);
	cr_assert(v[2].ino == 3 && v[2].first == 7 && v[2].count == 1);
	cr_assert(v[3].ino == 3 && v[3].column == 1);
	cr_assert(v[4].ino == 9 && v[4].first == 4);
	for (size_t i = 1; i < n; i++)
		cr_assert_lt(iod_intent_run_cmp(&v[i - 1], &v[i]), 0);
	free(v);
}
