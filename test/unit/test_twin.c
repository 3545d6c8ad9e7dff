/* test_twin.c - the RAID-1 twin policy (raid/twin.c), checked by exploring
 * every reachable state of a twin pair under every event, with a model of
 * the data: which twin holds every acknowledged write.  The checks are the
 * R1 invariants of raid.h plus the guarantee they exist for: a read never
 * goes to a twin that misses an acknowledged write, and a write is never
 * acknowledged unless some twin that keeps it is current.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "raid.h"

#define DOWN_AFTER 2

struct world {
	struct r1_twin t[2];
	bool current[2];   /* holds every acknowledged write */
	bool lost;         /* an ACCEPT_STALE may have dropped writes */
};

static int encode(const struct world *w)
{
	int v = 0;

	for (int i = 0; i < 2; i++)
		v = v * 32 + (int)w->t[i].state * 8 + w->t[i].needs_resync * 4 +
		    w->current[i] * 2;
	return v * 2 + w->lost;
}

/* One acknowledged write: it reaches every writable twin through the
 * primary; the others miss it. */
static void do_write(struct world *w)
{
	int p = r1_write_primary(w->t, 7, 1);

	if (p < 0)
		return; /* EIO: nothing acknowledged */
	cr_assert(w->current[p] || w->lost,
		  "primary %d is not current but takes writes", p);
	for (int i = 0; i < 2; i++)
		if (!r1_writable(&w->t[i]))
			w->current[i] = false;
	if (!r1_must_forward(w->t, p))
		w->current[!p] = false;
}

static void check(const struct world *w)
{
	for (int i = 0; i < 2; i++) {
		/* R1 invariant 1 */
		if (w->t[i].needs_resync)
			cr_assert(!r1_readable(&w->t[i]));
		/* The guarantee: a readable twin holds every write. */
		if (r1_readable(&w->t[i]) && !w->lost)
			cr_assert(w->current[i], "twin %d readable but stale "
				  "(states %d/%d)", i, w->t[0].state,
				  w->t[1].state);
		/* R1 invariant 2 */
		if (r1_readable(&w->t[i]) && !r1_writable(&w->t[!i]))
			cr_assert(w->t[!i].needs_resync);
	}
	for (uint64_t u = 0; u < 4; u++) {
		int r = r1_read_pick(w->t, 3, 0, u);
		if (r >= 0) {
			cr_assert(r1_readable(&w->t[r]));
			int f = r1_read_fallback(w->t, r);
			if (f >= 0)
				cr_assert(r1_readable(&w->t[f]) && f != r);
		} else {
			cr_assert_eq(r1_group_health(w->t), R1_FAILED);
		}
	}
}

Test(twin, exhaustive_state_space)
{
	static bool seen[1 << 12];
	static struct world queue[1 << 12];
	int head = 0, tail = 0, explored = 0;
	struct world start = { .t = { { R1_UP, false }, { R1_UP, false } },
			       .current = { true, true } };

	seen[encode(&start)] = true;
	queue[tail++] = start;
	while (head < tail) {
		struct world w0 = queue[head++];
		explored++;
		check(&w0);
		for (int which = 0; which < 2; which++) {
			for (int ev = R1_EV_PING_OK; ev <= R1_EV_REBUILD; ev++) {
				for (uint32_t missed = 1; missed <= DOWN_AFTER; missed++) {
					struct world w = w0;
					bool src_ok = r1_readable(&w.t[!which]);
					bool src_cur = w.current[!which];
					int rc = r1_apply(w.t, which, ev, missed,
							  DOWN_AFTER);
					if (rc < 0)
						continue;
					if (ev == R1_EV_RESYNC_DONE) {
						/* mgrd finishes a resync only
						 * while the source serves. */
						if (!src_ok)
							continue;
						w.current[which] = src_cur;
					}
					if (ev == R1_EV_ACCEPT_STALE && !w.current[which])
						w.lost = true;
					check(&w);
					do_write(&w);
					check(&w);
					int k = encode(&w);
					if (!seen[k]) {
						seen[k] = true;
						queue[tail++] = w;
					}
				}
			}
		}
	}
	cr_assert_gt(explored, 20, "explored only %d states", explored);
}

Test(twin, kill_write_restart_sequence)
{
	struct r1_twin t[2] = { { R1_UP, false }, { R1_UP, false } };

	/* Twin 0 dies: writes go to twin 1 alone, twin 0 needs a resync. */
	cr_assert_eq(r1_apply(t, 0, R1_EV_PROBE_FAILED, 0, 2), 1);
	cr_assert_eq(t[0].state, R1_DOWN);
	cr_assert(t[0].needs_resync);
	cr_assert_eq(r1_write_primary(t, 4, 0), 1);
	cr_assert(!r1_must_forward(t, 1));
	cr_assert_eq(r1_group_health(t), R1_DEGRADED);
	/* Twin 1 dies too: the group fails; twin 1 stays clean. */
	cr_assert_eq(r1_apply(t, 1, R1_EV_PROBE_FAILED, 0, 2), 1);
	cr_assert_eq(r1_group_health(t), R1_FAILED);
	cr_assert(!t[1].needs_resync);
	cr_assert_eq(r1_write_primary(t, 4, 0), -EIO);
	/* Stale twin 0 returns first: not promoted. */
	r1_apply(t, 0, R1_EV_REGISTER, 0, 2);
	cr_assert_eq(t[0].state, R1_DOWN);
	cr_assert_eq(r1_read_pick(t, 4, 0, 0), -EIO);
	/* Twin 1 returns: it serves; twin 0 resyncs from it. */
	r1_apply(t, 1, R1_EV_REGISTER, 0, 2);
	cr_assert_eq(t[1].state, R1_UP);
	cr_assert_eq(r1_read_pick(t, 4, 0, 0), 1);
	r1_apply(t, 0, R1_EV_PING_OK, 0, 2);
	cr_assert_eq(t[0].state, R1_RESYNCING);
	cr_assert(r1_must_forward(t, 1), "live writes reach a resyncing twin");
	cr_assert_eq(r1_read_pick(t, 4, 0, 1), 1, "never read while resyncing");
	cr_assert_eq(r1_apply(t, 0, R1_EV_RESYNC_DONE, 0, 2), 1);
	cr_assert_eq(r1_group_health(t), R1_HEALTHY);
}

Test(twin, blip_does_not_demote)
{
	struct r1_twin t[2] = { { R1_UP, false }, { R1_UP, false } };

	cr_assert_eq(r1_apply(t, 1, R1_EV_PING_MISSED, 1, 2), 1);
	cr_assert_eq(t[1].state, R1_SUSPECT);
	cr_assert(!t[1].needs_resync);
	cr_assert_eq(r1_read_pick(t, 0, 0, 1), 0, "avoid the suspect twin");
	cr_assert_eq(r1_apply(t, 1, R1_EV_PING_OK, 0, 2), 1);
	cr_assert_eq(t[1].state, R1_UP);
	cr_assert_eq(r1_apply(t, 1, R1_EV_PING_MISSED, 1, 2), 1);
	cr_assert_eq(r1_apply(t, 1, R1_EV_PING_MISSED, 2, 2), 1);
	cr_assert_eq(t[1].state, R1_DOWN);
	cr_assert(t[1].needs_resync);
}

Test(twin, restart_of_up_twin_is_failure_plus_rejoin)
{
	struct r1_twin t[2] = { { R1_UP, false }, { R1_UP, false } };

	cr_assert_eq(r1_apply(t, 0, R1_EV_REGISTER, 0, 2), 1);
	cr_assert_eq(t[0].state, R1_RESYNCING);
	cr_assert(t[0].needs_resync);
}

Test(twin, accept_stale_only_when_needed)
{
	struct r1_twin t[2] = { { R1_UP, false }, { R1_UP, false } };

	cr_assert_eq(r1_apply(t, 0, R1_EV_ACCEPT_STALE, 0, 2), -EINVAL);
	cr_assert_eq(r1_apply(t, 0, R1_EV_RESYNC_DONE, 0, 2), -EINVAL);
	r1_apply(t, 0, R1_EV_PROBE_FAILED, 0, 2);
	r1_apply(t, 1, R1_EV_PROBE_FAILED, 0, 2);
	r1_apply(t, 0, R1_EV_REGISTER, 0, 2);
	cr_assert_eq(t[0].state, R1_DOWN);
	cr_assert_eq(r1_apply(t, 0, R1_EV_ACCEPT_STALE, 0, 2), 1);
	cr_assert_eq(t[0].state, R1_UP);
	cr_assert(t[1].needs_resync, "the other twin now misses writes");
	cr_assert_str_eq(r1_state_name(R1_RESYNCING), "resyncing");
}

/* twinfsctl rebuild of a live twin: it is copied again from its readable
 * partner, takes the partner's forwards meanwhile and is never read. */
Test(twin, rebuild_of_a_live_twin)
{
	struct r1_twin t[2] = { { R1_UP, false }, { R1_UP, false } };

	cr_assert_eq(r1_apply(t, 1, R1_EV_REBUILD, 0, 2), 1);
	cr_assert_eq(t[1].state, R1_RESYNCING);
	cr_assert(t[1].needs_resync);
	cr_assert_eq(t[0].state, R1_UP);
	cr_assert(!t[0].needs_resync);
	for (uint32_t col = 0; col < 4; col++)
		cr_assert_eq(r1_write_primary(t, 7, col), 0);
	cr_assert(r1_must_forward(t, 0), "the copy target takes every write");
	for (uint64_t u = 0; u < 4; u++)
		cr_assert_eq(r1_read_pick(t, 7, 0, u), 0);
	/* Not again while it resyncs, and never of the only readable twin. */
	cr_assert_eq(r1_apply(t, 1, R1_EV_REBUILD, 0, 2), -EINVAL);
	cr_assert_eq(r1_apply(t, 0, R1_EV_REBUILD, 0, 2), -EINVAL);
	cr_assert_eq(r1_apply(t, 1, R1_EV_RESYNC_DONE, 0, 2), 1);
	cr_assert_eq(t[1].state, R1_UP);
	/* Not from a suspect partner (if it failed, nothing could be
	 * read); a suspect twin itself may be rebuilt. */
	cr_assert_eq(r1_apply(t, 0, R1_EV_PING_MISSED, 1, 2), 1);
	cr_assert_eq(t[0].state, R1_SUSPECT);
	cr_assert_eq(r1_apply(t, 1, R1_EV_REBUILD, 0, 2), -EINVAL);
	cr_assert_eq(r1_apply(t, 0, R1_EV_PING_OK, 0, 2), 1);
	cr_assert_eq(r1_apply(t, 1, R1_EV_PING_MISSED, 1, 2), 1);
	cr_assert_eq(r1_apply(t, 1, R1_EV_REBUILD, 0, 2), 1);
	cr_assert_eq(t[1].state, R1_RESYNCING);
	cr_assert_eq(r1_apply(t, 1, R1_EV_RESYNC_DONE, 0, 2), 1);
	/* Nothing to copy from: the partner is down. */
	cr_assert_eq(r1_apply(t, 0, R1_EV_PROBE_FAILED, 0, 2), 1);
	cr_assert_eq(r1_apply(t, 1, R1_EV_REBUILD, 0, 2), -EINVAL);
	cr_assert_eq(r1_apply(t, 0, R1_EV_REBUILD, 0, 2), -EINVAL);
}
