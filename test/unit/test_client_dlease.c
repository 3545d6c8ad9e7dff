/* test_client_dlease.c - the client's table of name leases
 * (fuse-client/dlease.c): which LOOKUPs it may answer ENOENT.  D1: names
 * this mount may have added are never absent, removals only after mgrd
 * said so, counted per name; D2: expiry from the send time less the
 * margin; D3/D4: a recall drops the lease and voids grants and renewals in
 * flight; reconnection drops everything; the least recently used
 * directory makes room; off means never. */
#include <criterion/criterion.h>

#include "dlease.h"
#include "mount.h"

static struct fc_dl dl;

static void setup(void)
{
	tw_log_init("test_client_dlease", TW_LOG_ERR);
	fc_dl_init(&dl, true);
}

static void teardown(void)
{
	fc_dl_free(&dl);
}

TestSuite(dlease, .init = setup, .fini = teardown);

/* Grant a lease on dir at time t0 (1000 ms). */
static void grant(uint64_t dir, uint64_t t0)
{
	fc_dl_granted(&dl, dir, 1000, t0, fc_dl_ticket(&dl));
}

Test(dlease, no_lease_no_answer)
{
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 100));
}

Test(dlease, granted_dir_answers_absent_until_expiry)
{
	grant(5, 1000);
	cr_assert(fc_dl_absent(&dl, 5, "a", 1000));
	cr_assert(fc_dl_absent(&dl, 5, "a", 1949));
	/* lease_ms less the 50 ms margin, from the send time */
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1950));
	cr_assert_not(fc_dl_absent(&dl, 6, "a", 1000), "another dir");
}

Test(dlease, added_names_exist_removed_ones_do_not)
{
	grant(5, 1000);
	fc_dl_adding(&dl, 5, "a");
	fc_dl_adding(&dl, 5, "b");
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1001));
	cr_assert_not(fc_dl_absent(&dl, 5, "b", 1001));
	cr_assert(fc_dl_absent(&dl, 5, "c", 1001));
	fc_dl_removed(&dl, 5, "a");
	cr_assert(fc_dl_absent(&dl, 5, "a", 1001));
	/* added twice (a create that failed EEXIST, say), removed once: it
	 * may still exist */
	fc_dl_adding(&dl, 5, "b");
	fc_dl_removed(&dl, 5, "b");
	cr_assert_not(fc_dl_absent(&dl, 5, "b", 1001));
	fc_dl_removed(&dl, 5, "b");
	cr_assert(fc_dl_absent(&dl, 5, "b", 1001));
	/* removing what was never added changes nothing */
	fc_dl_removed(&dl, 5, "zz");
	cr_assert(fc_dl_absent(&dl, 5, "zz", 1001));
}

Test(dlease, renewal_extends_from_its_send_time)
{
	uint64_t t;

	grant(5, 1000);
	t = fc_dl_ticket(&dl);
	fc_dl_renewed(&dl, 5, 1000, 1500, t);
	cr_assert(fc_dl_absent(&dl, 5, "a", 2400));
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 2450));
	/* an older renewal never shortens it */
	fc_dl_renewed(&dl, 5, 1000, 1200, t);
	cr_assert(fc_dl_absent(&dl, 5, "a", 2400));
	/* a renewal of a dir without a lease grants nothing */
	fc_dl_renewed(&dl, 7, 1000, 1500, t);
	cr_assert_not(fc_dl_absent(&dl, 7, "a", 1600));
}

Test(dlease, recall_drops_and_voids_answers_in_flight)
{
	uint64_t t;

	grant(5, 1000);
	grant(6, 1000);
	t = fc_dl_ticket(&dl);        /* a MKDIR and a create go out */
	fc_dl_recalled(&dl, 5);
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1001));
	cr_assert(fc_dl_absent(&dl, 6, "a", 1001), "others stay");
	/* their answers come back after the recall: ignored (D4) */
	fc_dl_granted(&dl, 9, 1000, 1001, t);
	cr_assert_not(fc_dl_absent(&dl, 9, "a", 1002));
	fc_dl_renewed(&dl, 6, 1000, 1900, t);
	cr_assert_not(fc_dl_absent(&dl, 6, "a", 2000));
	/* a recall of a dir this mount has no lease on still voids them */
	t = fc_dl_ticket(&dl);
	fc_dl_recalled(&dl, 42);
	fc_dl_granted(&dl, 10, 1000, 1001, t);
	cr_assert_not(fc_dl_absent(&dl, 10, "a", 1002));
}

Test(dlease, reconnect_drops_everything)
{
	uint64_t t;

	grant(5, 1000);
	t = fc_dl_ticket(&dl);
	fc_dl_drop_all(&dl);
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1001));
	fc_dl_granted(&dl, 6, 1000, 1001, t);
	cr_assert_not(fc_dl_absent(&dl, 6, "a", 1002));
}

Test(dlease, a_regrant_starts_empty_and_lru_makes_room)
{
	/* FC_DL_DIRS leases; using dir 1 keeps it, dir 2 is the oldest */
	for (uint64_t d = 1; d <= FC_DL_DIRS; d++)
		grant(d, 1000 + d);
	fc_dl_adding(&dl, 1, "kept");
	cr_assert(fc_dl_absent(&dl, 1, "x", 1500));   /* used: recent */
	grant(1000, 1600);
	cr_assert(fc_dl_absent(&dl, 1000, "x", 1601));
	cr_assert_not(fc_dl_absent(&dl, 2, "x", 1601), "the LRU one went");
	cr_assert(fc_dl_absent(&dl, 3, "x", 1601));
	cr_assert_not(fc_dl_absent(&dl, 1, "kept", 1601),
		      "names of a kept lease stay");
}

Test(dlease, off_never_answers)
{
	fc_dl_free(&dl);
	fc_dl_init(&dl, false);
	grant(5, 1000);
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1001));
}

Test(dlease, tiny_lease_is_not_used)
{
	fc_dl_granted(&dl, 5, 50, 1000, fc_dl_ticket(&dl));
	cr_assert_not(fc_dl_absent(&dl, 5, "a", 1000));
}
