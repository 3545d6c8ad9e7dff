/* lease.c - the election's rules (lease.h; docs/ARCHITECTURE.md
 * "Election" E1..E6).  Pure: no I/O, no clock. */
#include "lease.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#define PPM 1000000u

uint64_t lease_holder_span(const struct lease_params *p)
{
	/* A voter's lease lasts at least lease / (1 + rho) real time; the
	 * holder's span s lasts at most s / (1 - rho): s = lease (1 - rho) /
	 * (1 + rho) makes them meet, rounded down, then the margin. */
	uint64_t s = p->lease_ms * (PPM - p->drift_ppm) / (PPM + p->drift_ppm);

	return s > p->margin_ms ? s - p->margin_ms : 0;
}

int lease_params_check(const struct lease_params *p)
{
	if (p->lease_ms == 0 || p->lease_ms > UINT32_MAX ||
	    p->drift_ppm >= PPM / 10 ||
	    lease_holder_span(p) < p->lease_ms / 2)
		return -EINVAL;
	return 0;
}

uint64_t lease_renew_ms(const struct lease_params *p)
{
	return p->lease_ms / 3;
}

uint32_t lease_quorum(uint32_t n_voters)
{
	return n_voters / 2 + 1;
}

/* ---------------------------------------------------------------- voter */

void lease_vote_restart(struct lease_vote *v, const struct lease_params *p,
			uint64_t now)
{
	v->quiet_ms = now + p->lease_ms;
	v->until_ms = v->quiet_ms;
}

int lease_vote_decide(struct lease_vote *v, const struct lease_params *p,
		      const struct lease_ask *a, uint64_t now,
		      uint64_t *wait_ms)
{
	*wait_ms = 0;
	if (a->term == 0 || (a->candidate != 1 && a->candidate != 2))
		return -EINVAL;
	if (now < v->quiet_ms) {
		*wait_ms = v->quiet_ms - now;
		return -EAGAIN;
	}
	if (a->term < v->term)
		return -ESTALE;
	if (a->term == v->term && a->candidate == v->holder) {
		/* E1: renewal by the holder of the promised term. */
		v->until_ms = now + p->lease_ms;
		v->stale = a->standby_stale ? 3 - a->candidate : 0;
		return 0;
	}
	if (a->term == v->term)
		return -ESTALE;   /* E3: one holder per term */
	/* A new (term, holder): only once the old lease ended here (E2). */
	if (now < v->until_ms) {
		*wait_ms = v->until_ms - now;
		return -EBUSY;
	}
	if (a->candidate == v->stale && !a->accept_stale)
		return -EUCLEAN;   /* E6 */
	v->term = a->term;
	v->holder = a->candidate;
	v->until_ms = now + p->lease_ms;
	/* A stale winner (accept_stale) is the reference now; a mark on the
	 * other mgrd stands until the new holder clears it. */
	if (v->stale == a->candidate)
		v->stale = 0;
	if (a->standby_stale)
		v->stale = 3 - a->candidate;
	return 0;
}

int lease_vote_release(struct lease_vote *v, const struct lease_ask *a,
		       uint64_t now)
{
	if (a->term != v->term || a->candidate != v->holder)
		return -ESTALE;
	if (v->until_ms > now)
		v->until_ms = now;
	return 0;
}

bool lease_vote_persist_differs(const struct lease_vote *a,
				const struct lease_vote *b)
{
	return a->term != b->term || a->holder != b->holder ||
	       a->stale != b->stale;
}

/* ----------------------------------------------------------- the tally */

void lease_tally_init(struct lease_tally *t, uint64_t term, uint32_t n_voters)
{
	assert(n_voters >= 1 && n_voters <= LEASE_MAX_VOTERS);
	memset(t, 0, sizeof(*t));
	t->term = term;
	t->n_voters = n_voters;
}

void lease_tally_grant(struct lease_tally *t, uint32_t i, uint64_t term,
		       uint64_t sent_ms, bool standby_stale)
{
	if (term != t->term || i >= t->n_voters)
		return;
	if (t->has[i] && sent_ms < t->sent[i])
		return;   /* a late answer to an older request */
	t->has[i] = true;
	t->sent[i] = sent_ms;
	t->stale_ack[i] = standby_stale;
}

void lease_tally_stale_reset(struct lease_tally *t)
{
	memset(t->stale_ack, 0, sizeof(t->stale_ack));
}

uint32_t lease_tally_stale_count(const struct lease_tally *t)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < t->n_voters; i++)
		n += t->stale_ack[i];
	return n;
}

uint64_t lease_tally_until(const struct lease_tally *t,
			   const struct lease_params *p)
{
	uint32_t q = lease_quorum(t->n_voters), n = 0;
	uint64_t s[LEASE_MAX_VOTERS];

	for (uint32_t i = 0; i < t->n_voters; i++)
		if (t->has[i])
			s[n++] = t->sent[i];
	if (n < q)
		return 0;
	/* The q-th newest send time: q voters granted at or after it. */
	for (uint32_t k = 0; k < q; k++) {
		uint32_t best = k;

		for (uint32_t j = k + 1; j < n; j++)
			if (s[j] > s[best])
				best = j;
		uint64_t x = s[k];

		s[k] = s[best];
		s[best] = x;
	}
	return s[q - 1] + lease_holder_span(p);
}

bool lease_tally_valid(const struct lease_tally *t,
		       const struct lease_params *p, uint64_t now)
{
	return now < lease_tally_until(t, p);
}

bool lease_may_stand(const struct lease_params *p, uint64_t silent_ms,
		     bool in_sync, bool accept_stale)
{
	return silent_ms > lease_renew_ms(p) && (in_sync || accept_stale);
}

uint64_t lease_next_term(uint64_t highest_seen)
{
	return highest_seen + 1;
}
