/* lease.h - the rules of the mgrd pair's election (docs/ARCHITECTURE.md
 * "Election"): the voter's grant rule, the candidate's count and the
 * holder's lease end.
 *
 * Voters are every configured iod plus both mgrds; a quorum is N/2+1.  A
 * voter promises (term, holder) and grants the holder a lease of lease_ms
 * by its own clock from the moment it receives the request.  The holder
 * counts a lease from the moment it SENT the request, by its own clock,
 * shortened for clock rate drift and a fixed margin, so it ends earlier
 * than at any voter of the quorum (invariants E1..E6 in the docs).
 *
 * Pure functions, no I/O, no clock (every time is passed in, milliseconds
 * of the caller's monotonic clock), no allocation.
 */
#ifndef TWINFS_LEASE_H
#define TWINFS_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#define LEASE_MAX_VOTERS   64u      /* TW_MAX_IODS + 2 mgrds, rounded up */
#define LEASE_DEF_TIME_MS  3000u    /* [mgrd] lease_time */
#define LEASE_DEF_DRIFT_PPM 10000u  /* 1 %: [mgrd] lease_drift_ppm */
#define LEASE_DEF_MARGIN_MS 150u    /* loop lateness: [mgrd] lease_margin */

struct lease_params {
	uint64_t lease_ms;    /* what a voter grants, by its clock */
	uint32_t drift_ppm;   /* bound on any clock's rate error, < 1e6 */
	uint64_t margin_ms;   /* holder stops this much earlier still */
};

/* 0 if usable: lease_ms > 0, drift_ppm < 100000 (10 %), and a holder
 * span (below) of at least lease_ms / 2; else -EINVAL. */
int lease_params_check(const struct lease_params *p);

/* How long after sending a request the holder may use the grant, by its
 * own clock: lease * (1 - rho) / (1 + rho) - margin (E2). */
uint64_t lease_holder_span(const struct lease_params *p);
/* The holder renews this often: lease_ms / 3. */
uint64_t lease_renew_ms(const struct lease_params *p);
/* N/2 + 1. */
uint32_t lease_quorum(uint32_t n_voters);

/* --------------------------------------------------------------- voter */

/* A voter's promise.  term, holder and stale are persisted (fsync) before
 * any reply that depends on them; until and quiet live in memory. */
struct lease_vote {
	uint64_t term;       /* the highest term promised; 0 = none yet */
	uint32_t holder;     /* mgrd id granted `term`, 0 = none */
	uint32_t stale;      /* mgrd id marked stale by the holder, 0 = none */
	uint64_t until_ms;   /* the holder's lease ends here (voter clock) */
	uint64_t quiet_ms;   /* grant nothing before this (after a restart) */
};

/* After loading the persisted part at start-up: no lease is known to
 * have ended, so grant nothing for one lease_ms (E4). */
void lease_vote_restart(struct lease_vote *v, const struct lease_params *p,
			uint64_t now);

struct lease_ask {
	uint64_t term;       /* the term asked for */
	uint32_t candidate;  /* mgrd id, 1 or 2 */
	bool accept_stale;   /* operator's --accept-stale */
	bool standby_stale;  /* holder only: mark (true) or clear the peer */
};

/* The grant rule.  On 0 *v holds the new promise: the caller persists it
 * if term, holder or stale changed, then answers.  Refusals leave *v as
 * it was and say why:
 *   -EINVAL  candidate not 1 or 2, or term 0
 *   -EAGAIN  in the quiet period after a restart (*wait_ms: how long)
 *   -ESTALE  term older than promised (or same term, other holder: the
 *            term is taken); the candidate learns v->term
 *   -EBUSY   another holder's lease has not ended here (*wait_ms)
 *   -EUCLEAN the candidate is marked stale and did not accept_stale
 * A same-term same-holder request renews, and may set or clear the stale
 * mark of the other mgrd. */
int lease_vote_decide(struct lease_vote *v, const struct lease_params *p,
		      const struct lease_ask *a, uint64_t now,
		      uint64_t *wait_ms);

/* The holder's step-down (switchover): it serves nothing any more, so
 * its lease may end here now, and the standby need not wait lease_ms.
 * 0, or -ESTALE when (term, candidate) is not the promise. */
int lease_vote_release(struct lease_vote *v, const struct lease_ask *a,
		       uint64_t now);

/* True when a and b differ in what is persisted. */
bool lease_vote_persist_differs(const struct lease_vote *a,
				const struct lease_vote *b);

/* ------------------------------------------------- candidate and holder */

/* One term's count at a candidate, then holder.  sent[i] is the send time
 * (own clock) of the newest request voter i granted in this term. */
struct lease_tally {
	uint64_t term;
	uint32_t n_voters;
	bool has[LEASE_MAX_VOTERS];
	uint64_t sent[LEASE_MAX_VOTERS];
	bool stale_ack[LEASE_MAX_VOTERS];   /* granted with standby_stale */
};

/* Start counting `term` over n_voters (1..LEASE_MAX_VOTERS). */
void lease_tally_init(struct lease_tally *t, uint64_t term, uint32_t n_voters);
/* Voter i granted the request of `term` sent at sent_ms, which carried
 * standby_stale.  Grants of another term, an unknown voter or older than
 * one already counted are ignored. */
void lease_tally_grant(struct lease_tally *t, uint32_t i, uint64_t term,
		       uint64_t sent_ms, bool standby_stale);
/* Forget the stale acknowledgements: a new mark (or a clear) begins. */
void lease_tally_stale_reset(struct lease_tally *t);
/* How many voters have acknowledged the current stale mark. */
uint32_t lease_tally_stale_count(const struct lease_tally *t);
/* The end of the lease by the holder's clock: the quorum-th newest send
 * time plus lease_holder_span; 0 when fewer than a quorum granted (E2). */
uint64_t lease_tally_until(const struct lease_tally *t,
			   const struct lease_params *p);
/* True when the tally is a lease valid at now. */
bool lease_tally_valid(const struct lease_tally *t,
		       const struct lease_params *p, uint64_t now);

/* The standby stands for election (E5): it has heard nothing from the
 * active for longer than one renewal period, and is in sync or the
 * operator accepted a stale takeover. */
bool lease_may_stand(const struct lease_params *p, uint64_t silent_ms,
		     bool in_sync, bool accept_stale);

/* The term to stand with: one past every term seen (own, peers', voters'
 * refusals), so a term is never asked for twice by the same candidate
 * after a lost election (E3). */
uint64_t lease_next_term(uint64_t highest_seen);

#endif
