/* elect.c - who of an mgrd pair is active (elect.h; docs/ARCHITECTURE.md
 * "Election"; the rules are raid/lease.h, model-checked in
 * test/unit/test_lease.c).
 *
 * Voters: every configured iod (index id - 1, over the iodpool's peers)
 * and both mgrds (index n_iods + id - 1): the other mgrd over a
 * ROLE_MGRD_PEER connection of our own, this one locally.  Our own promise
 * is DIR/twinfs-vote (common/FORMAT.md "Vote file"), written before we
 * count or answer it; its term is the highest term this mgrd stood for or
 * granted, so a restart never stands again with a term it used.
 *
 * States:
 *   follower   not active, not standing; stands when lease_may_stand says
 *              (E5): the active unheard of for longer than a renewal
 *              period, and in sync: replication said so
 *              (mgr_elect_peer_state), or, before it has said anything,
 *              this mgrd was the last holder its promise names (mgrd 1 on
 *              a new pair); otherwise only with --accept-stale.
 *   candidate  asks every voter for term T (one past every term seen);
 *              asks again when the refusals' wait_ms say the old lease
 *              ends; a voter's newer term makes it stand again above it.
 *   active     a quorum granted T: mgr_server_became_active.  Renews
 *              every lease_time/3; the lease ends at the quorum-th newest
 *              send time + lease_holder_span (E2): an exact timer, and
 *              mgr_elect_is_active reads the clock itself, so a process
 *              that was stopped (SIGSTOP, a long stall) answers nothing
 *              before it notices.  At the end: mgr_server_lost_lease.
 *
 * The stale mark (E6): the active asks the voters to mark the standby
 * stale in every request until replication says it is in sync
 * (mgr_elect_standby_fresh), and again from mgr_elect_mark_standby_stale,
 * whose callbacks run once a quorum has acknowledged a mark in the
 * current term.
 *
 * Step-down (switchover): the active closes everything, then asks its
 * voters to end its lease at once (Lease.release), so an in-sync standby
 * wins without waiting lease_time; it does not stand again for two
 * lease_times.
 */
#include "elect.h"
#include "server_int.h"
#include "lease.h"
#include "vote.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS      50u      /* rounds and candidacy are looked at */
#define STEP_DOWN_MS 300u     /* switchover: releases and the reply leave */
#define ASK_MIN_MS   20u      /* a candidate never asks more often */
#define CALL_SLACK   2u       /* a request times out after renew / 2 */

enum el_role { EL_FOLLOWER, EL_CANDIDATE, EL_ACTIVE };

struct stale_wait {
	struct stale_wait *next;
	void (*done)(int status, void *arg);
	void *arg;
};

struct lease_call {
	uint32_t voter;
	uint64_t term;
	uint64_t sent_ms;
	bool stale;
	uint64_t gen;          /* el.gen when sent: stale calls are ignored */
};

static struct {
	struct mgr_server *s;
	uv_loop_t *loop;
	const struct tw_conf *conf;
	bool pair;                 /* n_mgrds == 2; else always active */
	uint32_t me;               /* our mgrd id */
	uint32_t n_iods, n_voters;
	struct lease_params p;
	struct lease_vote vote;    /* ours, as a voter */
	struct lease_tally t;
	enum el_role role;
	uint64_t highest;          /* the highest term seen anywhere */
	uint64_t next_ask_ms;
	uint64_t quiet_until_ms;   /* after a step-down: do not stand */
	uint64_t gen;
	bool accept_stale;         /* --accept-stale */
	bool peer_reported, peer_alive, peer_in_sync;
	uint64_t peer_seen_ms;
	bool want_stale;           /* ask the voters to mark the standby */
	uint64_t fresh_ms;         /* when the standby's mark was cleared */
	bool stepping_down;        /* switchover: releases sent, exit soon */
	struct stale_wait *stale_waits;
	struct wire_peer *peer;    /* to the other mgrd */
	/* Our own ROLE_MGRD connections to the iods, whose HELLO carries
	 * the term we stand for: a standby has no iodpool. */
	struct wire_peer *iods[TW_MAX_IODS];
	uv_timer_t tick, expiry;
	bool timers;
	bool lost_pending;
	bool told_no_stand;        /* logged why we do not stand */
	bool term_taken;           /* a voter promised our term elsewhere */
} el;

static void lose(const char *why);
static void free_peers(void);

void mgr_elect_accept_stale(void)
{
	el.accept_stale = true;
}

/* ------------------------------------------------------------ our vote */

static int save_vote(void)
{
	struct tw_vote_disk v = { el.vote.term, el.vote.holder,
				  el.vote.stale };

	return tw_vote_save(el.conf->mgr_dir, &v);
}

/* The grant rule on our own promise, persisted first (E4). */
static int vote_decide(const struct lease_ask *a, uint64_t *wait)
{
	struct lease_vote old = el.vote;
	int rc = lease_vote_decide(&el.vote, &el.p, a, tw_now_ms(), wait);

	if (rc == 0 && lease_vote_persist_differs(&old, &el.vote) &&
	    save_vote() < 0) {
		el.vote = old;
		return -EIO;
	}
	if (el.vote.term > el.highest)
		el.highest = el.vote.term;
	return rc;
}

void mgr_elect_vote(struct wire_conn *c, const struct wire_msg *m)
{
	const Twinfs__Lease *q = (const Twinfs__Lease *)m->body;
	Twinfs__LeaseReply r = TWINFS__LEASE_REPLY__INIT;
	struct lease_ask a;
	uint64_t wait = 0;
	int rc;

	if (!el.pair || !el.s) {
		mgr_srv_reply(c, &m->hdr, -EOPNOTSUPP, NULL);
		return;
	}
	if (!m->body || m->body->descriptor != &twinfs__lease__descriptor) {
		mgr_srv_reply(c, &m->hdr, -EINVAL, NULL);
		return;
	}
	if (q->candidate == el.me) {
		mgr_srv_reply(c, &m->hdr, -EINVAL, NULL);   /* not from us */
		return;
	}
	a = (struct lease_ask){ q->term, q->candidate, q->accept_stale,
				q->standby_stale };
	if (q->release) {
		rc = lease_vote_release(&el.vote, &a, tw_now_ms());
	} else {
		uint64_t old = el.vote.term;

		rc = vote_decide(&a, &wait);
		if (rc == 0 && el.vote.term != old)
			tw_info("mgrd %" PRIu32 ": voted for mgrd %" PRIu32
				" in term %" PRIu64 "%s", el.me, q->candidate,
				q->term, q->accept_stale ?
				" (it accepted to be stale)" : "");
	}
	r.term = el.vote.term;
	r.holder = el.vote.holder;
	r.stale = el.vote.stale;
	r.wait_ms = wait > UINT32_MAX ? UINT32_MAX : (uint32_t)wait;
	tw_debug("mgrd %" PRIu32 ": vote for mgrd %" PRIu32 " term %" PRIu64
		 ": %d", el.me, q->candidate, q->term, rc);
	wire_reply(c, &m->hdr, rc, &r.base, NULL, 0);   /* refusals too */
	/* The active renews at us every lease_time/3: our sign of its life
	 * (E5), replication or not. */
	if (rc == 0 && !q->release) {
		el.peer_seen_ms = tw_now_ms();
		el.told_no_stand = false;
	}
	/* A newer term promised to the other mgrd: ours is over (E3). */
	if (rc == 0 && el.vote.holder != el.me && el.role != EL_FOLLOWER &&
	    el.vote.term > el.t.term)
		lose("the other mgrd won a newer term");
}

/* -------------------------------------------------------------- the tally */

static void stale_waits_run(int status)
{
	struct stale_wait *w;

	while ((w = el.stale_waits)) {
		el.stale_waits = w->next;
		w->done(status, w->arg);
		free(w);
	}
}

static bool stale_marked(void)
{
	return lease_tally_stale_count(&el.t) >= lease_quorum(el.n_voters);
}

static void on_expiry(uv_timer_t *t)
{
	(void)t;
	if (el.role != EL_ACTIVE)
		return;
	if (lease_tally_valid(&el.t, &el.p, tw_now_ms())) {
		uint64_t left = lease_tally_until(&el.t, &el.p) - tw_now_ms();

		uv_timer_start(&el.expiry, on_expiry, left, 0);
		return;
	}
	lose("the lease ran out");
}

static void counted(void)
{
	uint64_t now = tw_now_ms();

	if (!lease_tally_valid(&el.t, &el.p, now))
		return;
	if (el.role == EL_CANDIDATE) {
		el.role = EL_ACTIVE;
		el.lost_pending = false;
		tw_info("mgrd %" PRIu32 ": active in term %" PRIu64 " (a "
			"quorum of %" PRIu32 " of %" PRIu32 " voters)%s",
			el.me, el.t.term, lease_quorum(el.n_voters),
			el.n_voters, el.accept_stale ?
			"; ACCEPTED AS STALE (--accept-stale): whatever the "
			"other mgrd acknowledged and this one lacks is lost" :
			"");
		mgr_server_became_active(el.s, el.t.term);
	}
	uv_timer_start(&el.expiry, on_expiry,
		       lease_tally_until(&el.t, &el.p) - now, 0);
	if (el.stale_waits && el.want_stale && stale_marked())
		stale_waits_run(0);
}

static void on_lease_reply(int status, struct wire_msg *reply, void *arg)
{
	struct lease_call *lc = arg;
	const Twinfs__LeaseReply *r = NULL;

	if (reply && reply->body &&
	    reply->body->descriptor == &twinfs__lease_reply__descriptor)
		r = (const Twinfs__LeaseReply *)reply->body;
	tw_debug("mgrd %" PRIu32 ": LEASE term %" PRIu64 " at voter %" PRIu32
		 ": %d (promise term %" PRIu64 " to %" PRIu32 ")", el.me,
		 lc->term, lc->voter + 1, status, r ? r->term : 0,
		 r ? r->holder : 0);
	if (el.s && lc->gen == el.gen) {
		if (r && r->term > el.highest)
			el.highest = r->term;
		if (status == 0 && r && el.role != EL_FOLLOWER) {
			lease_tally_grant(&el.t, lc->voter, lc->term,
					  lc->sent_ms, lc->stale);
			counted();
		} else if (r && (status == -EBUSY || status == -EAGAIN) &&
			   el.role == EL_CANDIDATE) {
			/* Ask again when this voter's old lease ends. */
			uint64_t at = tw_now_ms() +
				      TW_MAX(r->wait_ms + 1, ASK_MIN_MS);

			if (at < el.next_ask_ms)
				el.next_ask_ms = at;
		} else if (status == -ESTALE && r && r->term >= lc->term &&
			   el.role == EL_CANDIDATE) {
			el.term_taken = true;   /* stand again above it */
		} else if (status == -EUCLEAN && el.role == EL_CANDIDATE) {
			tw_log_rl(TW_LOG_WARN, "mgrd %" PRIu32 ": voter %"
				  PRIu32 " refuses: this mgrd is marked stale "
				  "(it missed replies the other mgrd gave); "
				  "only --accept-stale can make it active",
				  el.me, lc->voter + 1);
		}
	}
	if (reply)
		wire_msg_free(reply);
	free(lc);
}

static void ask(struct wire_peer *peer, uint32_t voter, bool release)
{
	Twinfs__Lease q = TWINFS__LEASE__INIT;
	struct lease_call *lc;

	if (!peer)
		return;
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return;
	*lc = (struct lease_call){ voter, el.t.term, tw_now_ms(),
				   el.want_stale, el.gen };
	q.term = el.t.term;
	q.candidate = el.me;
	q.accept_stale = el.accept_stale;
	q.standby_stale = el.want_stale;
	q.release = release;
	if (wire_call(peer, TWINFS__MSG_TYPE__MSG_LEASE, &q.base, NULL, 0,
		      (uint32_t)(lease_renew_ms(&el.p) * CALL_SLACK),
		      on_lease_reply, lc) < 0)
		free(lc);
}

/* One round: every voter, ourselves first. */
static void round_send(void)
{
	struct lease_ask a = { el.t.term, el.me, el.accept_stale,
			       el.want_stale };
	uint64_t wait;

	if (vote_decide(&a, &wait) == 0) {
		lease_tally_grant(&el.t, el.n_iods + el.me - 1, el.t.term,
				  tw_now_ms(), el.want_stale);
	} else if (wait && el.role == EL_CANDIDATE &&
		   tw_now_ms() + wait < el.next_ask_ms) {
		el.next_ask_ms = tw_now_ms() + wait + 1;
	}
	for (uint32_t id = 1; id <= el.n_iods; id++)
		ask(el.iods[id - 1], id - 1, false);
	ask(el.peer, el.n_iods + (3 - el.me) - 1, false);
	counted();
}

/* ------------------------------------------------------------- the roles */

static bool in_sync(void)
{
	if (el.peer_reported)
		return el.peer_in_sync;
	/* Before replication has spoken: the last holder (mgrd 1 of a new
	 * pair) presumes it holds everything; the voters' marks decide. */
	return el.vote.holder ? el.vote.holder == el.me : el.me == 1;
}

/* Our HELLO to the iods carries the term we stand for or hold
 * (proto/FORMAT.md "Election": older ones are refused); the iodpool's
 * too, when this mgrd has one. */
static void set_term(uint64_t term)
{
	Twinfs__Hello hello;

	wire_hello_init(&hello, el.conf->cluster_name, TWINFS__ROLE__ROLE_MGRD,
			el.s->incarnation);
	hello.mgrd_term = term;
	for (uint32_t i = 0; i < el.n_iods; i++)
		if (el.iods[i] && wire_peer_set_hello(el.iods[i], &hello) < 0)
			tw_warn("mgrd %" PRIu32 ": HELLO of term %" PRIu64
				" to iod %" PRIu32 " not set", el.me, term,
				i + 1);
	if (el.s->pool)
		mgr_pool_set_term(el.s->pool, term);
}

static void stand(void)
{
	uint64_t term = lease_next_term(el.highest > el.vote.term ?
					el.highest : el.vote.term);

	el.gen++;
	lease_tally_init(&el.t, term, el.n_voters);
	el.role = EL_CANDIDATE;
	/* Until replication says the other has caught up with us (E6). */
	el.want_stale = true;
	el.highest = term;
	set_term(term);
	tw_info("mgrd %" PRIu32 ": standing for term %" PRIu64 "%s", el.me,
		term, el.accept_stale ? " (accepting to be stale)" : "");
}

static void lose(const char *why)
{
	bool was_active = el.role == EL_ACTIVE;

	el.role = EL_FOLLOWER;
	el.gen++;
	el.peer_seen_ms = tw_now_ms();   /* one renewal period before standing */
	/* What replication said was about our standby, not about us. */
	el.peer_reported = false;
	el.peer_in_sync = false;
	uv_timer_stop(&el.expiry);
	stale_waits_run(-ENOTCONN);
	if (was_active) {
		tw_warn("mgrd %" PRIu32 ": lost the lease of term %" PRIu64
			" (%s): serving nothing", el.me, el.t.term, why);
		/* A switchover exits once its releases are out (step_down). */
		if (!el.stepping_down)
			mgr_server_lost_lease(el.s);
	}
}

static void on_tick(uv_timer_t *t)
{
	uint64_t now = tw_now_ms();

	(void)t;
	switch (el.role) {
	case EL_ACTIVE:
		if (!lease_tally_valid(&el.t, &el.p, now)) {
			lose("the lease ran out");
			return;
		}
		if (now >= el.next_ask_ms) {
			el.next_ask_ms = now + lease_renew_ms(&el.p);
			round_send();
		}
		return;
	case EL_CANDIDATE:
		if (el.highest > el.t.term || el.term_taken) {
			el.term_taken = false;
			stand();   /* a voter showed a newer or taken term */
			el.next_ask_ms = now;
		}
		if (now >= el.next_ask_ms) {
			el.next_ask_ms = now + lease_renew_ms(&el.p);
			round_send();
		}
		return;
	case EL_FOLLOWER:
		if (now < el.quiet_until_ms)
			return;
		if (!lease_may_stand(&el.p, now - el.peer_seen_ms, in_sync(),
				     el.accept_stale)) {
			if (!el.told_no_stand &&
			    lease_may_stand(&el.p, now - el.peer_seen_ms, true,
					    false)) {
				el.told_no_stand = true;
				tw_warn("mgrd %" PRIu32 ": the active mgrd is "
					"silent, but this one is not known to "
					"be in sync (it may be marked stale): "
					"not standing; twinfs-mgrd "
					"--accept-stale takes over, losing "
					"what this mgrd lacks", el.me);
			}
			return;
		}
		stand();
		el.next_ask_ms = now + lease_renew_ms(&el.p);
		round_send();
		return;
	}
}

/* ------------------------------------------------------------ interface */

int mgr_elect_start(struct mgr_server *s)
{
	const struct tw_conf *conf = s->conf;
	struct tw_vote_disk v;
	Twinfs__Hello hello;
	int rc;
	bool accept = el.accept_stale;

	memset(&el, 0, sizeof(el));
	el.accept_stale = accept;
	el.s = s;
	el.loop = s->loop;
	el.conf = conf;
	el.pair = conf->n_mgrds == 2;
	el.me = (uint32_t)conf->mgrd_self;
	if (!el.pair) {
		el.role = EL_ACTIVE;
		mgr_server_became_active(s, 0);
		return 0;
	}
	el.p = (struct lease_params){ conf->mgrd_lease_ms,
				      LEASE_DEF_DRIFT_PPM,
				      LEASE_DEF_MARGIN_MS };
	rc = lease_params_check(&el.p);
	if (rc < 0) {
		tw_err("mgrd: [mgrd] lease_time %" PRIu32 " ms is too short "
		       "for the election", conf->mgrd_lease_ms);
		return rc;
	}
	rc = tw_vote_load(conf->mgr_dir, &v);
	if (rc < 0)
		return rc;
	el.vote.term = v.term;
	el.vote.holder = v.holder;
	el.vote.stale = v.stale;
	lease_vote_restart(&el.vote, &el.p, tw_now_ms());
	el.highest = v.term;
	el.n_iods = (uint32_t)conf->n_iods;
	el.n_voters = el.n_iods + 2;
	el.role = EL_FOLLOWER;
	el.peer_seen_ms = tw_now_ms();
	wire_hello_init(&hello, conf->cluster_name, TWINFS__ROLE__ROLE_MGRD,
			s->incarnation);
	hello.mgrd_term = v.term;
	for (uint32_t i = 0; i < el.n_iods; i++) {
		struct wire_peer_opts po = {
			.host = conf->iods[i].host,
			.port = conf->iods[i].port,
			.hello = &hello,
			.secret = conf->secret,
			.channel = conf->channel,
		};

		rc = wire_peer_new(s->loop, &po, &el.iods[i]);
		if (rc < 0) {
			tw_err("mgrd %" PRIu32 ": iod %" PRIu32 " (%s:%d): %s",
			       el.me, i + 1, conf->iods[i].host,
			       conf->iods[i].port, strerror(-rc));
			free_peers();
			return rc;
		}
	}
	if (s->pool)
		mgr_pool_set_term(s->pool, v.term);

	wire_hello_init(&hello, conf->cluster_name,
			TWINFS__ROLE__ROLE_MGRD_PEER, s->incarnation);
	hello.node_id = el.me;
	hello.mgrd_term = v.term;
	{
		const struct tw_conf_mgrd *o = &conf->mgrd[2 - el.me];
		struct wire_peer_opts po = {
			.host = o->host,
			.port = o->port,
			.hello = &hello,
			.secret = conf->secret,
			.channel = conf->channel,
		};

		rc = wire_peer_new(s->loop, &po, &el.peer);
		if (rc < 0) {
			tw_err("mgrd %" PRIu32 ": the other mgrd at %s:%d: %s",
			       el.me, o->host, o->port, strerror(-rc));
			free_peers();
			return rc;
		}
	}
	uv_timer_init(s->loop, &el.tick);
	uv_timer_init(s->loop, &el.expiry);
	el.timers = true;
	uv_timer_start(&el.tick, on_tick, TICK_MS, TICK_MS);
	tw_info("mgrd %" PRIu32 ": election of the pair: %" PRIu32 " voters "
		"(quorum %" PRIu32 "), lease %" PRIu64 " ms (held %" PRIu64
		" ms from a request's sending), term %" PRIu64 "%s%s", el.me,
		el.n_voters, lease_quorum(el.n_voters), el.p.lease_ms,
		lease_holder_span(&el.p), v.term,
		v.stale == el.me ? "; this mgrd is MARKED STALE at our own "
		"vote" : "", el.accept_stale ? "; --accept-stale" : "");
	return 0;
}

static void free_peers(void)
{
	for (uint32_t i = 0; i < TW_MAX_IODS; i++)
		if (el.iods[i]) {
			wire_peer_free(el.iods[i]);
			el.iods[i] = NULL;
		}
	if (el.peer) {
		wire_peer_free(el.peer);
		el.peer = NULL;
	}
}

static void on_timer_closed(uv_handle_t *h)
{
	(void)h;
}

void mgr_elect_stop(void)
{
	if (!el.s)
		return;
	stale_waits_run(-ESHUTDOWN);
	el.gen++;
	free_peers();
	if (el.timers) {
		uv_timer_stop(&el.tick);
		uv_timer_stop(&el.expiry);
		uv_close((uv_handle_t *)&el.tick, on_timer_closed);
		uv_close((uv_handle_t *)&el.expiry, on_timer_closed);
		el.timers = false;
	}
	el.role = EL_FOLLOWER;
	el.s = NULL;
}

bool mgr_elect_is_active(void)
{
	if (!el.s || el.role != EL_ACTIVE)
		return false;
	if (!el.pair)
		return true;
	/* The clock, not the timer: after a stall, I/O is handled before
	 * the loop runs its timers (E2). */
	if (!lease_tally_valid(&el.t, &el.p, tw_now_ms())) {
		if (!el.lost_pending) {
			el.lost_pending = true;
			uv_timer_start(&el.expiry, on_expiry, 0, 0);
		}
		return false;
	}
	return true;
}

uint64_t mgr_elect_term(void)
{
	if (!el.pair)
		return 0;
	return el.role == EL_FOLLOWER ? el.vote.term : el.t.term;
}

void mgr_elect_peer_state(bool peer_alive, bool peer_in_sync)
{
	el.peer_reported = true;
	el.peer_alive = peer_alive;
	el.peer_in_sync = peer_in_sync;
	if (peer_alive)
		el.peer_seen_ms = tw_now_ms();
}

int mgr_elect_mark_standby_stale(void (*done)(int status, void *arg),
				 void *arg)
{
	struct stale_wait *w;

	if (!el.pair) {
		done(0, arg);
		return 0;
	}
	if (el.role != EL_ACTIVE || !mgr_elect_is_active())
		return -EPERM;
	if (el.want_stale && stale_marked()) {
		done(0, arg);
		return 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct stale_wait){ el.stale_waits, done, arg };
	el.stale_waits = w;
	if (!el.want_stale) {
		el.want_stale = true;
		lease_tally_stale_reset(&el.t);
	}
	el.next_ask_ms = tw_now_ms();   /* a round at the next tick */
	return 0;
}

void mgr_elect_standby_fresh(void)
{
	if (!el.pair || !el.want_stale)
		return;
	el.want_stale = false;
	el.peer_in_sync = true;
	el.peer_reported = true;
	lease_tally_stale_reset(&el.t);
	el.fresh_ms = tw_now_ms();
	/* Renew at the next tick, not a renewal period later: until the
	 * voters have cleared the mark, a takeover by this standby is
	 * refused even though it is in sync. */
	if (el.role == EL_ACTIVE)
		el.next_ask_ms = 0;
	tw_info("mgrd %" PRIu32 ": the standby is in sync: clearing its stale "
		"mark", el.me);
}

bool mgr_elect_standby_ready(void)
{
	uint64_t until;

	if (!el.pair || el.role != EL_ACTIVE || el.want_stale ||
	    !el.peer_in_sync)
		return false;
	/* A quorum granted a renewal sent after the mark was cleared, so a
	 * quorum will not refuse the standby as stale (E6). */
	until = lease_tally_until(&el.t, &el.p);
	return until && until - lease_holder_span(&el.p) >= el.fresh_ms;
}

/* The releases had their time to leave: end the process as a lost lease
 * does (the standby stands as soon as it misses us). */
static void on_stepped_down(uv_timer_t *t)
{
	(void)t;
	mgr_server_lost_lease(el.s);
}

int mgr_elect_step_down(void)
{
	uint64_t term = el.t.term;

	if (!el.pair)
		return -EOPNOTSUPP;
	if (el.role != EL_ACTIVE)
		return -EPERM;
	el.stepping_down = true;
	lose("switchover");
	/* Closed first, then released: a voter that ends our lease early
	 * (Lease.release) is safe only once we answer nothing (E2). */
	el.t.term = term;
	{
		struct lease_ask a = { term, el.me, false, false };

		lease_vote_release(&el.vote, &a, tw_now_ms());
	}
	for (uint32_t id = 1; id <= el.n_iods; id++)
		ask(el.iods[id - 1], id - 1, true);
	ask(el.peer, el.n_iods + (3 - el.me) - 1, true);
	el.quiet_until_ms = tw_now_ms() + 2 * el.p.lease_ms;
	uv_timer_start(&el.expiry, on_stepped_down, STEP_DOWN_MS, 0);
	return 0;
}
