/* test_mgrlist.c - unit tests of common/mgrlist.c: parsing mount sources
 * (IPv4, names, [IPv6]:PORT, lists and each kind of bad input) and the
 * rule for which mgrd to try next (order, active_addr hints, backoff that
 * grows and stays bounded, the switch message once per switch).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgrlist.h"

/* ---------------------------------------------------------------- parse */

Test(mgrlist, parse_one)
{
	struct tw_mgr_addr a;

	cr_assert_eq(tw_mgr_addr_parse("10.0.0.5:7600", 7500, &a), 0);
	cr_assert_str_eq(a.host, "10.0.0.5");
	cr_assert_eq(a.port, 7600);
	cr_assert_eq(tw_mgr_addr_parse("mgr-a.example", 7500, &a), 0);
	cr_assert_str_eq(a.host, "mgr-a.example");
	cr_assert_eq(a.port, 7500);
	cr_assert_eq(tw_mgr_addr_parse("[fd00::1]:7501", 7500, &a), 0);
	cr_assert_str_eq(a.host, "fd00::1");
	cr_assert_eq(a.port, 7501);
	cr_assert_eq(tw_mgr_addr_parse("[::1]", 7500, &a), 0);
	cr_assert_str_eq(a.host, "::1");
	cr_assert_eq(a.port, 7500);
	cr_assert_eq(tw_mgr_addr_parse("fd00::2", 7500, &a), 0);
	cr_assert_str_eq(a.host, "fd00::2");
	cr_assert_eq(a.port, 7500);
}

Test(mgrlist, parse_one_bad)
{
	static const char *const bad[] = {
		"", ":7500", "h:", "h:0", "h:65536", "h:-1", "h:+5", "h:75x",
		"[::1", "[::1]x", "[::1]:", "[]:7500", "a,b", NULL,
	};
	struct tw_mgr_addr a;

	for (int i = 0; bad[i]; i++)
		cr_assert_eq(tw_mgr_addr_parse(bad[i], 7500, &a), -EINVAL,
			     "%s", bad[i]);
	cr_assert_eq(tw_mgr_addr_parse("h", 0, &a), -EINVAL);
	cr_assert_eq(tw_mgr_addr_parse(NULL, 7500, &a), -EINVAL);
}

Test(mgrlist, parse_list)
{
	struct tw_mgrlist l;
	char buf[128];

	cr_assert_eq(tw_mgrlist_parse(&l, "127.0.0.1:7500,[::1]:7510", 7500),
		     0);
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.cur, 0);
	cr_assert_eq(l.used, -1);
	cr_assert_str_eq(l.addr[1].host, "::1");
	cr_assert_eq(l.addr[1].port, 7510);
	cr_assert_str_eq(tw_mgrlist_name(&l, 1, buf, sizeof(buf)),
			 "mgrd 2 at [::1]:7510");
	cr_assert_str_eq(tw_mgrlist_name(&l, 0, buf, sizeof(buf)),
			 "mgrd 1 at 127.0.0.1:7500");
	cr_assert_eq(tw_mgrlist_parse(&l, "mgr", 7500), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(tw_mgrlist_name(&l, 0, buf, sizeof(buf)),
			 "mgr:7500");
	/* the default port counts when an address is listed twice */
	cr_assert_eq(tw_mgrlist_parse(&l, "a,a:7500", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, "A:1,a:1", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, "a,b,c", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, "a,", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, ",a", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, "a,,b", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, "a,b:0", 7500), -EINVAL);
	cr_assert_eq(tw_mgrlist_parse(&l, NULL, 7500), -EINVAL);
}

Test(mgrlist, add)
{
	struct tw_mgrlist l;
	char longhost[TW_HOST_MAX + 1];

	tw_mgrlist_init(&l);
	memset(longhost, 'h', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	cr_assert_eq(tw_mgrlist_add(&l, longhost, 1), -EINVAL);
	cr_assert_eq(tw_mgrlist_add(&l, "a", 0), -EINVAL);
	cr_assert_eq(tw_mgrlist_add(&l, "", 1), -EINVAL);
	cr_assert_eq(tw_mgrlist_add(&l, "a", 1), 0);
	cr_assert_eq(tw_mgrlist_add(&l, "a", 1), -EINVAL);
	cr_assert_eq(tw_mgrlist_add(&l, "b", 1), 0);
	cr_assert_eq(tw_mgrlist_add(&l, "c", 1), -E2BIG);
	cr_assert_eq(l.n, 2);
}

/* ------------------------------------------------------------ following */

Test(mgrlist, refused_goes_to_next_then_backs_off)
{
	struct tw_mgrlist l;
	char msg[256];
	uint32_t prev = 0, d;

	cr_assert_eq(tw_mgrlist_parse(&l, "h1:1,h2:2", 7500), 0);
	/* the first move is immediate */
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE,
				       "connection refused", NULL, 120000), 0);
	cr_assert_eq(l.cur, 1);
	cr_assert(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	cr_assert_str_eq(msg, "using mgrd 2 at h2:2 (mgrd 1 at h1:1: "
			 "connection refused)");
	/* the same one again: no second message */
	cr_assert_not(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	cr_assert_str_eq(msg, "");
	/* both down: alternate, never 0 twice, grows, bounded */
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "timed out",
				       NULL, 120000), 0);
	cr_assert_eq(l.cur, 0);
	for (int i = 0; i < 40; i++) {
		d = tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "refused", NULL,
				      120000);
		cr_assert_eq(l.cur, (i + 1) % 2);
		cr_assert_geq(d, TW_MGRLIST_BACKOFF_MIN_MS);
		cr_assert_geq(d, prev);
		cr_assert_leq(d, TW_MGRLIST_BACKOFF_MAX_MS);
		prev = d;
	}
	cr_assert_eq(prev, TW_MGRLIST_BACKOFF_MAX_MS);
	/* the caller's bound (mgr_timeout) wins when smaller */
	d = tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "refused", NULL, 300);
	cr_assert_eq(d, 300);
	/* an answer resets the backoff */
	tw_mgrlist_ok(&l, msg, sizeof(msg));
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "x", NULL, 0),
		     0);
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "x", NULL, 0),
		     TW_MGRLIST_BACKOFF_MIN_MS);
}

Test(mgrlist, first_address_answers_silently)
{
	struct tw_mgrlist l;
	char msg[256];

	cr_assert_eq(tw_mgrlist_parse(&l, "h1:1,h2:2", 7500), 0);
	cr_assert_not(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	/* back to mgrd 1 after a switch away is a switch again */
	tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "connection reset", NULL, 0);
	cr_assert(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "mgrd 2 is standby", NULL, 0);
	cr_assert_eq(l.cur, 0);
	cr_assert(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	cr_assert_str_eq(msg, "using mgrd 1 at h1:1 (mgrd 2 at h2:2: mgrd 2 "
			 "is standby)");
}

Test(mgrlist, one_address_stays)
{
	struct tw_mgrlist l;
	char msg[256];

	cr_assert_eq(tw_mgrlist_parse(&l, "h1", 7500), 0);
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "refused", NULL,
				       0), 0);
	cr_assert_eq(l.cur, 0);
	cr_assert_eq(tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "refused", NULL,
				       0), TW_MGRLIST_BACKOFF_MIN_MS);
	cr_assert_eq(l.cur, 0);
	cr_assert_not(tw_mgrlist_ok(&l, msg, sizeof(msg)));
}

Test(mgrlist, remote_follows_the_hint)
{
	struct tw_mgrlist l;
	char msg[256];

	cr_assert_eq(tw_mgrlist_parse(&l, "h1:1,h2:2", 7500), 0);
	cr_assert_eq(tw_mgrlist_ok(&l, msg, sizeof(msg)), false);
	/* mgrd 1 says mgrd 2 is active, by a name that is listed */
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby", "H2:2", 0);
	cr_assert_eq(l.cur, 1);
	/* mgrd 2 names itself while refusing: ignored, next one */
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "syncing", "h2:2", 0);
	cr_assert_eq(l.cur, 0);
	/* an unparsable hint is no hint */
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby", "h2", 0);
	cr_assert_eq(l.cur, 1);
}

Test(mgrlist, remote_hint_not_listed)
{
	struct tw_mgrlist l;
	char msg[256];

	cr_assert_eq(tw_mgrlist_parse(&l, "h1:1,h2:2", 7500), 0);
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby", "[fd00::9]:7500", 0);
	cr_assert_eq(l.cur, 2);
	cr_assert_str_eq(tw_mgrlist_cur(&l)->host, "fd00::9");
	cr_assert(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	cr_assert_str_eq(msg, "using mgrd at [fd00::9]:7500 (mgrd 1 at h1:1: "
			 "standby)");
	/* it fails: back to the list's first */
	tw_mgrlist_failed(&l, TW_MGR_UNREACHABLE, "refused", NULL, 0);
	cr_assert_eq(l.cur, 0);
	/* a hint naming the extra slot while on it: next listed */
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby", "[fd00::9]:7500", 0);
	cr_assert_eq(l.cur, 2);
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "lost", "[fd00::9]:7500", 0);
	cr_assert_eq(l.cur, 0);
}

Test(mgrlist, ping_pong_is_never_hot)
{
	struct tw_mgrlist l;
	uint64_t waited = 0;

	/* Two mgrds naming each other, as during an election: 20 hops
	 * wait at least the doubling sum. */
	cr_assert_eq(tw_mgrlist_parse(&l, "h1:1,h2:2", 7500), 0);
	for (int i = 0; i < 20; i++)
		waited += tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby",
					    l.cur == 0 ? "h2:2" : "h1:1",
					    120000);
	cr_assert_geq(waited, 100u + 200 + 400 + 800 + 1600 +
		      14ull * TW_MGRLIST_BACKOFF_MAX_MS);
}

Test(mgrlist, from_conf)
{
	struct tw_conf *c = calloc(1, sizeof(*c));
	struct tw_mgrlist l;

	cr_assert_not_null(c);
	tw_conf_defaults(c);
	snprintf(c->mgr_host, sizeof(c->mgr_host), "m0");
	c->mgr_port = 7600;
	cr_assert_eq(tw_mgrlist_conf(&l, c), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.addr[0].host, "m0");
	cr_assert_eq(l.addr[0].port, 7600);
	/* a pair: both, in id order, whichever this process selected */
	c->n_mgrds = 2;
	snprintf(c->mgrd[0].host, sizeof(c->mgrd[0].host), "m1");
	c->mgrd[0].port = 7500;
	snprintf(c->mgrd[1].host, sizeof(c->mgrd[1].host), "m2");
	c->mgrd[1].port = 7510;
	cr_assert_eq(tw_mgrlist_conf(&l, c), 0);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.addr[0].host, "m1");
	cr_assert_str_eq(l.addr[1].host, "m2");
	cr_assert_eq(l.addr[1].port, 7510);
	cr_assert_eq(l.cur, 0);
	free(c);
}

Test(mgrlist, names_use_the_id_each_said)
{
	struct tw_mgrlist l;
	char msg[256];

	/* the standby listed first: positions and ids differ */
	cr_assert_eq(tw_mgrlist_parse(&l, "h2:2,h1:1", 7500), 0);
	tw_mgrlist_learn_id(&l, 2);
	tw_mgrlist_failed(&l, TW_MGR_REMOTE, "standby", "h1:1", 0);
	cr_assert_eq(l.cur, 1);
	tw_mgrlist_learn_id(&l, 1);
	cr_assert(tw_mgrlist_ok(&l, msg, sizeof(msg)));
	cr_assert_str_eq(msg, "using mgrd 1 at h1:1 (mgrd 2 at h2:2: standby)");
	/* unpaired (0) and out of range: ignored */
	tw_mgrlist_learn_id(&l, 0);
	tw_mgrlist_learn_id(&l, 3);
	cr_assert_eq(l.ids[1], 1);
	/* one address that said its id is named by it */
	cr_assert_eq(tw_mgrlist_parse(&l, "h1", 7500), 0);
	tw_mgrlist_learn_id(&l, 1);
	cr_assert_str_eq(tw_mgrlist_name(&l, 0, msg, sizeof(msg)),
			 "mgrd 1 at h1:7500");
}
