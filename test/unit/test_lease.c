/* test_lease.c - the election's rules (raid/lease.c): the grant rule case
 * by case, the holder's count, and a randomized model check of the whole
 * protocol (docs/ARCHITECTURE.md "Election" E1..E6): voters and two mgrds
 * with clocks that run up to drift_ppm fast or slow, messages delayed,
 * lost and reordered, voters restarting, mgrds pausing; at every tick of
 * real time at most one mgrd holds a valid lease.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"

static const struct lease_params P = {
	.lease_ms = 3000, .drift_ppm = 10000, .margin_ms = 150,
};

static int ask(struct lease_vote *v, uint64_t term, uint32_t cand,
	       bool accept, bool mark, uint64_t now, uint64_t *wait)
{
	struct lease_ask a = { term, cand, accept, mark };
	uint64_t w;

	return lease_vote_decide(v, &P, &a, now, wait ? wait : &w);
}

Test(lease, params)
{
	struct lease_params p = P;

	cr_assert_eq(lease_params_check(&p), 0);
	/* 3000 * 0.99 / 1.01 = 2940.59 -> 2940, minus the margin. */
	cr_assert_eq(lease_holder_span(&p), 2790);
	cr_assert_eq(lease_renew_ms(&p), 1000);
	p.drift_ppm = 200000;
	cr_assert_eq(lease_params_check(&p), -EINVAL);
	p = P;
	p.margin_ms = 2000;
	cr_assert_eq(lease_params_check(&p), -EINVAL);
	p = P;
	p.lease_ms = 0;
	cr_assert_eq(lease_params_check(&p), -EINVAL);
	cr_assert_eq(lease_quorum(1), 1);
	cr_assert_eq(lease_quorum(2), 2);
	cr_assert_eq(lease_quorum(3), 2);
	cr_assert_eq(lease_quorum(4), 3);
	cr_assert_eq(lease_quorum(6), 4);
}

Test(lease, grant_renew_and_takeover)
{
	struct lease_vote v = { 0 };
	uint64_t wait;

	cr_assert_eq(ask(&v, 0, 1, false, false, 100, NULL), -EINVAL);
	cr_assert_eq(ask(&v, 1, 3, false, false, 100, NULL), -EINVAL);
	cr_assert_eq(ask(&v, 1, 1, false, false, 100, NULL), 0);
	cr_assert_eq(v.term, 1);
	cr_assert_eq(v.holder, 1);
	cr_assert_eq(v.until_ms, 3100);
	/* Same term, other candidate: the term is taken (E3). */
	cr_assert_eq(ask(&v, 1, 2, false, false, 5000, NULL), -ESTALE);
	/* A new term while the lease runs: busy, with the time left. */
	cr_assert_eq(ask(&v, 2, 2, false, false, 1000, &wait), -EBUSY);
	cr_assert_eq(wait, 2100);
	/* Renewal extends from its arrival. */
	cr_assert_eq(ask(&v, 1, 1, false, false, 2000, NULL), 0);
	cr_assert_eq(v.until_ms, 5000);
	cr_assert_eq(ask(&v, 2, 2, false, false, 4999, &wait), -EBUSY);
	cr_assert_eq(wait, 1);
	/* Expired: the standby gets term 2; the old holder is fenced. */
	cr_assert_eq(ask(&v, 2, 2, false, false, 5000, NULL), 0);
	cr_assert_eq(v.term, 2);
	cr_assert_eq(v.holder, 2);
	cr_assert_eq(ask(&v, 1, 1, false, false, 9000, NULL), -ESTALE);
	/* Even the same holder needs its old lease gone for a new term. */
	cr_assert_eq(ask(&v, 3, 2, false, false, 6000, NULL), -EBUSY);
	cr_assert_eq(ask(&v, 3, 2, false, false, 8000, NULL), 0);
}

Test(lease, stale_candidate_refused)
{
	struct lease_vote v = { 0 };
	struct lease_vote before;

	cr_assert_eq(ask(&v, 1, 1, false, true, 0, NULL), 0);
	cr_assert_eq(v.stale, 2);
	before = v;
	cr_assert_eq(ask(&v, 2, 2, false, false, 10000, NULL), -EUCLEAN);
	cr_assert(!lease_vote_persist_differs(&v, &before));
	/* A renewal without the mark clears it; then 2 may win. */
	cr_assert_eq(ask(&v, 1, 1, false, false, 1000, NULL), 0);
	cr_assert_eq(v.stale, 0);
	cr_assert_eq(ask(&v, 1, 1, false, true, 1500, NULL), 0);
	cr_assert_eq(v.stale, 2);
	/* The operator's --accept-stale: wins, and the mark is gone. */
	cr_assert_eq(ask(&v, 2, 2, true, false, 10000, NULL), 0);
	cr_assert_eq(v.holder, 2);
	cr_assert_eq(v.stale, 0);
	/* A new term of the marker itself keeps the mark on the other. */
	v = (struct lease_vote){ .term = 4, .holder = 1, .stale = 2 };
	cr_assert_eq(ask(&v, 5, 1, false, false, 100, NULL), 0);
	cr_assert_eq(v.stale, 2);
	cr_assert_eq(ask(&v, 6, 2, false, false, 9000, NULL), -EUCLEAN);
}

Test(lease, release_on_step_down)
{
	struct lease_vote v = { 0 };
	struct lease_ask mine = { 3, 1, false, false }, other = { 3, 2, false, false };

	cr_assert_eq(ask(&v, 3, 1, false, false, 100, NULL), 0);
	cr_assert_eq(lease_vote_release(&v, &other, 200), -ESTALE);
	other.term = 2;
	cr_assert_eq(lease_vote_release(&v, &other, 200), -ESTALE);
	cr_assert_eq(ask(&v, 4, 2, false, false, 200, NULL), -EBUSY);
	cr_assert_eq(lease_vote_release(&v, &mine, 200), 0);
	cr_assert_eq(ask(&v, 4, 2, false, false, 200, NULL), 0);
	/* A late release of an old term changes nothing. */
	cr_assert_eq(lease_vote_release(&v, &mine, 300), -ESTALE);
	cr_assert_eq(v.until_ms, 3200);
}

Test(lease, restart_quiet_period)
{
	struct lease_vote v = { .term = 7, .holder = 1 };
	uint64_t wait;

	lease_vote_restart(&v, &P, 500);
	cr_assert_eq(ask(&v, 7, 1, false, false, 600, &wait), -EAGAIN);
	cr_assert_eq(wait, 2900);
	cr_assert_eq(ask(&v, 8, 2, false, false, 3499, NULL), -EAGAIN);
	/* The promise outlives the restart: term 7 is still promised. */
	cr_assert_eq(ask(&v, 6, 2, false, false, 3500, NULL), -ESTALE);
	cr_assert_eq(ask(&v, 8, 2, false, false, 3500, NULL), 0);
}

Test(lease, tally)
{
	struct lease_tally t;
	uint64_t span = lease_holder_span(&P);

	lease_tally_init(&t, 4, 5);   /* 3 iods + 2 mgrds: quorum 3 */
	lease_tally_grant(&t, 0, 4, 100, false);
	lease_tally_grant(&t, 1, 4, 300, false);
	cr_assert_eq(lease_tally_until(&t, &P), 0);
	cr_assert(!lease_tally_valid(&t, &P, 0));
	lease_tally_grant(&t, 2, 3, 900, false);   /* other term */
	lease_tally_grant(&t, 9, 4, 900, false);   /* no such voter */
	cr_assert_eq(lease_tally_until(&t, &P), 0);
	lease_tally_grant(&t, 4, 4, 200, false);
	cr_assert_eq(lease_tally_until(&t, &P), 100 + span);
	lease_tally_grant(&t, 0, 4, 1100, false);
	cr_assert_eq(lease_tally_until(&t, &P), 200 + span);
	/* A late grant of an older request does not move it back. */
	lease_tally_grant(&t, 0, 4, 50, false);
	cr_assert_eq(lease_tally_until(&t, &P), 200 + span);
	lease_tally_grant(&t, 3, 4, 1200, true);
	lease_tally_grant(&t, 1, 4, 1200, true);
	cr_assert_eq(lease_tally_until(&t, &P), 1100 + span);
	cr_assert(lease_tally_valid(&t, &P, 1100 + span - 1));
	cr_assert(!lease_tally_valid(&t, &P, 1100 + span));
	cr_assert_eq(lease_tally_stale_count(&t), 2);
	lease_tally_stale_reset(&t);
	cr_assert_eq(lease_tally_stale_count(&t), 0);
	cr_assert_eq(lease_next_term(4), 5);
}

Test(lease, may_stand)
{
	cr_assert(!lease_may_stand(&P, 1000, true, false));
	cr_assert(lease_may_stand(&P, 1001, true, false));
	cr_assert(!lease_may_stand(&P, 5000, false, false));
	cr_assert(lease_may_stand(&P, 5000, false, true));
}

/* ------------------------------------------------------- the model check */

#define MAXV  7
#define MAXQ  128
#define US    1000u   /* microseconds per millisecond */

struct clk {
	int64_t off_us;
	int64_t rate_ppm;   /* 1e6 +- drift */
};

static uint64_t local_ms(const struct clk *c, uint64_t real_us)
{
	return (uint64_t)(c->off_us + (int64_t)real_us * c->rate_ppm /
			  1000000) / US;
}

struct msg {
	bool used, reply;
	int m, v, rc;
	uint64_t at_us, sent_ms, vterm;
	struct lease_ask a;
};

struct mg {
	uint32_t id;
	struct clk clk;
	struct lease_tally t;
	bool standing;
	uint64_t highest, next_ms, paused_until_us, muted_until_us;
	bool accept_stale, mark;
};

struct world {
	unsigned seed, seed0;
	uint32_t nv;
	struct lease_params hp;   /* the holders' idea of the parameters */
	struct lease_vote v[MAXV];
	struct clk vc[MAXV];
	struct mg g[2];
	struct msg q[MAXQ];
	uint64_t max_delay_us;
	int loss_pct, restart_pm, pause_pm;
	/* mark check: the stale mgrd (1-based) once a quorum marked it */
	uint32_t marked;
	uint64_t overlaps, terms_won;
	uint64_t next_due_us;
	bool stale_test;
};

static unsigned rnd(struct world *w, unsigned n)
{
	return (unsigned)(rand_r(&w->seed) % n);
}

static void post(struct world *w, struct msg *m, uint64_t now_us)
{
	if ((int)rnd(w, 100) < w->loss_pct)
		return;
	for (int i = 0; i < MAXQ; i++)
		if (!w->q[i].used) {
			w->q[i] = *m;
			w->q[i].used = true;
			/* Half the messages fly at once: the narrowest
			 * windows need a fast round trip to be hit. */
			w->q[i].at_us = now_us + rnd(w, rnd(w, 2) ? 5 * US :
						     (unsigned)w->max_delay_us + 1);
			if (w->q[i].at_us < w->next_due_us)
				w->next_due_us = w->q[i].at_us;
			return;
		}
}

static void mg_round(struct world *w, int k, uint64_t now_us)
{
	struct mg *g = &w->g[k];
	uint64_t now = local_ms(&g->clk, now_us);
	bool valid = g->t.term && lease_tally_valid(&g->t, &w->hp, now);

	if (now_us < g->paused_until_us || now_us < g->muted_until_us ||
	    now < g->next_ms)
		return;
	/* A holder renews on time; a candidate asks again soon, so that it
	 * probes the voters right at the end of the old lease. */
	g->next_ms = now + (valid ? lease_renew_ms(&P) : 5 + rnd(w, 100));
	/* A candidate keeps its term until a voter shows it a newer one;
	 * bumping it on mere silence would lock voters it already has. */
	if (!valid && (!g->standing || g->highest > g->t.term)) {
		if (rnd(w, 2))
			return;   /* not this time */
		g->highest = lease_next_term(g->highest);
		lease_tally_init(&g->t, g->highest, w->nv);
		g->standing = true;
	}
	if (valid)
		g->standing = false;
	for (uint32_t i = 0; i < w->nv; i++) {
		struct msg m = {
			.m = k, .v = (int)i, .sent_ms = now,
			.a = { g->t.term, g->id, g->accept_stale,
			       g->mark },
		};
		post(w, &m, now_us);
	}
}

static void deliver(struct world *w, struct msg *m, uint64_t now_us)
{
	if (!m->reply) {
		struct lease_vote *v = &w->v[m->v];
		uint64_t wait;

		m->rc = lease_vote_decide(v, &P, &m->a,
					  local_ms(&w->vc[m->v], now_us), &wait);
		m->vterm = v->term;
		m->reply = true;
		post(w, m, now_us);
		return;
	}
	struct mg *g = &w->g[m->m];

	if (m->rc == 0)
		lease_tally_grant(&g->t, (uint32_t)m->v, m->a.term, m->sent_ms,
				  m->a.standby_stale);
	if (m->vterm > g->highest)
		g->highest = m->vterm;
}

static void check(struct world *w, uint64_t now_us, uint64_t won[2])
{
	bool valid[2];

	for (int k = 0; k < 2; k++) {
		struct mg *g = &w->g[k];

		valid[k] = g->t.term && now_us >= g->paused_until_us &&
			   lease_tally_valid(&g->t, &w->hp,
					     local_ms(&g->clk, now_us));
		if (valid[k] && won[k] != g->t.term) {
			won[k] = g->t.term;
			w->terms_won++;
			/* E6: a quorum-marked mgrd never wins unaccepted. */
			cr_assert(!(w->marked == g->id && !g->accept_stale),
				  "seed %u: stale mgrd %u won term %lu",
				  w->seed0, g->id, (unsigned long)g->t.term);
		}
		/* Only the stale test's marker keeps its mark for good. */
		if (w->stale_test && valid[k] && g->mark &&
		    lease_tally_stale_count(&g->t) >= lease_quorum(w->nv))
			w->marked = 3 - g->id;
	}
	if (valid[0] && valid[1])
		w->overlaps++;
}

/* Runs one world for `ms` of real time; returns ticks with two holders. */
static uint64_t run(unsigned seed, uint32_t nv, const struct lease_params *hp,
		    bool stale_test, uint64_t ms)
{
	struct world w = { .seed = seed, .seed0 = seed, .nv = nv };
	uint64_t won[2] = { 0, 0 };

	w.hp = *hp;
	w.stale_test = stale_test;
	w.max_delay_us = (rnd(&w, 4) + 1) * 200 * US;
	w.loss_pct = (int)rnd(&w, 30);
	w.restart_pm = (int)rnd(&w, 3);
	w.pause_pm = 5 + (int)rnd(&w, 20);
	/* Clocks at the extremes of the allowed drift, or anywhere. */
	for (uint32_t i = 0; i < nv; i++) {
		w.vc[i].off_us = rnd(&w, 100000) * US;
		w.vc[i].rate_ppm = 1000000 + (rnd(&w, 2) ? 1 : -1) *
				   (int64_t)(rnd(&w, 3) ? P.drift_ppm :
					     rnd(&w, P.drift_ppm));
	}
	for (int k = 0; k < 2; k++) {
		struct mg *g = &w.g[k];

		g->id = (uint32_t)k + 1;
		g->clk.off_us = rnd(&w, 100000) * US;
		g->clk.rate_ppm = 1000000 + (rnd(&w, 2) ? 1 : -1) *
				  (int64_t)P.drift_ppm;
		g->accept_stale = stale_test ? k == 1 && rnd(&w, 2) : rnd(&w, 2);
		g->mark = stale_test ? k == 0 : rnd(&w, 2);
	}
	for (uint64_t t = 0; t < ms * US; t += US) {
		if (t >= w.next_due_us) {
			w.next_due_us = UINT64_MAX;
			for (int i = 0; i < MAXQ; i++)
				if (w.q[i].used && w.q[i].at_us <= t) {
					struct msg m = w.q[i];

					w.q[i].used = false;
					deliver(&w, &m, t);
				}
			for (int i = 0; i < MAXQ; i++)
				if (w.q[i].used && w.q[i].at_us < w.next_due_us)
					w.next_due_us = w.q[i].at_us;
		}
		for (int k = 0; k < 2; k++) {
			/* Paused: serves and sends nothing (SIGSTOP); muted:
			 * serves but its requests are lost (a partition). */
			if ((int)rnd(&w, 100000) < w.pause_pm)
				w.g[k].paused_until_us = t +
					rnd(&w, 3 * (unsigned)P.lease_ms) * US;
			if ((int)rnd(&w, 100000) < w.pause_pm)
				w.g[k].muted_until_us = t +
					rnd(&w, 3 * (unsigned)P.lease_ms) * US;
			mg_round(&w, k, t);
		}
		for (uint32_t i = 0; i < nv; i++)
			if ((int)rnd(&w, 100000) < w.restart_pm)
				lease_vote_restart(&w.v[i], &P,
						   local_ms(&w.vc[i], t));
		check(&w, t, won);
	}
	cr_log_info("seed %u voters %u: %lu terms won, %lu ms of overlap",
		    seed, nv, (unsigned long)w.terms_won,
		    (unsigned long)w.overlaps);
	return w.overlaps;
}

Test(lease, model_check_one_holder, .timeout = 240)
{
	struct lease_params tight = P;
	uint64_t won = 0;

	tight.margin_ms = 0;
	for (unsigned seed = 1; seed <= 60; seed++) {
		uint32_t nv = 3 + seed % 4;   /* 3..6 voters */

		cr_assert_eq(run(seed, nv, &P, false, 60000), 0,
			     "seed %u: two mgrds held a lease at once", seed);
		/* The drift rule alone suffices; the margin is for the
		 * loop's lateness, which the model does not have. */
		cr_assert_eq(run(seed, nv, &tight, false, 60000), 0,
			     "seed %u: two mgrds held a lease at once without "
			     "the margin", seed);
		won++;
	}
	cr_assert_eq(won, 60);
}

Test(lease, model_check_stale_mark, .timeout = 240)
{
	for (unsigned seed = 100; seed < 130; seed++)
		cr_assert_eq(run(seed, 3 + seed % 3, &P, true, 60000), 0,
			     "seed %u", seed);
}

/* The check is not vacuous: holders that ignore the clocks' drift (a span
 * of the whole lease_ms from the send) overlap with the next holder. */
Test(lease, model_check_finds_unsafe_rule, .timeout = 240)
{
	struct lease_params hp = { .lease_ms = P.lease_ms, .drift_ppm = 0,
				   .margin_ms = 0 };
	uint64_t bad = 0;

	for (unsigned seed = 1; seed <= 60 && !bad; seed++)
		bad += run(seed, 3, &hp, false, 60000);
	cr_assert_gt(bad, 0, "an unsafe holder never "
		     "overlapped: the model check sees nothing");
}
