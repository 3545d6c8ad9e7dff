/* vote.c - the iod as a voter in the mgrd pair's election
 * (docs/ARCHITECTURE.md "Election"; the rules are raid/lease.h).
 *
 * LEASE comes from ROLE_MGRD connections only (server.c role_may).  The
 * promise (term, holder, stale) is written durably to DIR/twinfs-vote
 * (common/FORMAT.md "Vote file") before the reply that depends on it; a
 * start grants nothing for one lease_time (E4).
 *
 * Term fencing (E3): every ROLE_MGRD connection carries the term its HELLO
 * said (Hello.mgrd_term), raised to a term granted on it.  A HELLO older
 * than the promise is refused -ESTALE; promising a newer term closes every
 * mgrd connection of an older one, so the old active's map pushes, fences
 * and truncates stop at once, and its reconnection is refused.
 */
#include "iod_int.h"

#include "lease.h"
#include "vote.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static void vote_params(const struct iod *d, struct lease_params *p)
{
	*p = (struct lease_params){
		.lease_ms = d->conf->mgrd_lease_ms,
		.drift_ppm = LEASE_DEF_DRIFT_PPM,
		.margin_ms = LEASE_DEF_MARGIN_MS,
	};
}

int iod_vote_open(struct iod *d)
{
	struct tw_vote_disk v;
	struct lease_params p;
	int rc = tw_vote_load(d->me->dir, &v);

	if (rc < 0)
		return rc;
	vote_params(d, &p);
	memset(&d->vote, 0, sizeof(d->vote));
	d->vote.term = v.term;
	d->vote.holder = v.holder;
	d->vote.stale = v.stale;
	lease_vote_restart(&d->vote, &p, tw_now_ms());
	if (v.term)
		tw_info("iod %" PRIu32 ": election promise term %" PRIu64
			" to mgrd %" PRIu32 "%s; granting nothing for %" PRIu64
			" ms", d->id, v.term, v.holder,
			v.stale ? " (the other mgrd marked stale)" : "",
			p.lease_ms);
	return 0;
}

/* ------------------------------------------------------ mgrd connections */

static void conn_link(struct iod *d, struct iod_conn *ic, struct wire_conn *c)
{
	ic->conn = c;
	ic->mnext = d->mgrd_conns;
	if (ic->mnext)
		ic->mnext->mprev = ic;
	ic->mprev = NULL;
	d->mgrd_conns = ic;
}

void iod_vote_conn_gone(struct iod *d, struct iod_conn *ic)
{
	if (!ic->conn)
		return;
	if (ic->mprev)
		ic->mprev->mnext = ic->mnext;
	else
		d->mgrd_conns = ic->mnext;
	if (ic->mnext)
		ic->mnext->mprev = ic->mprev;
	ic->conn = NULL;
	ic->mnext = ic->mprev = NULL;
}

int iod_vote_hello(struct iod *d, struct wire_conn *c, struct iod_conn *ic,
		   uint64_t term)
{
	if (term < d->vote.term) {
		tw_log_rl(TW_LOG_WARN, "mgrd at %s refused: its term %" PRIu64
			  " is older than term %" PRIu64 " promised to mgrd %"
			  PRIu32 " (an mgrd that lost its lease)",
			  wire_conn_peer(c), term, d->vote.term,
			  d->vote.holder);
		return -ESTALE;
	}
	ic->mgrd_term = term;
	if (!ic->conn)
		conn_link(d, ic, c);
	return 0;
}

/* E3: close every mgrd connection of a term older than the promise. */
static void fence_older(struct iod *d)
{
	struct iod_conn *ic = d->mgrd_conns, *next;

	for (; ic; ic = next) {
		next = ic->mnext;
		if (ic->mgrd_term >= d->vote.term)
			continue;
		tw_info("iod %" PRIu32 ": closing mgrd connection %s of term %"
			PRIu64 ": term %" PRIu64 " is promised to mgrd %"
			PRIu32, d->id, wire_conn_peer(ic->conn), ic->mgrd_term,
			d->vote.term, d->vote.holder);
		/* on_close unlinks it (iod_vote_conn_gone) */
		struct wire_conn *c = ic->conn;

		iod_vote_conn_gone(d, ic);
		wire_conn_close(c);
	}
}

/* ------------------------------------------------------------------ LEASE */

void iod_vote_request(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Lease *q = (const Twinfs__Lease *)m->body;
	Twinfs__LeaseReply r = TWINFS__LEASE_REPLY__INIT;
	struct iod_conn *ic = wire_conn_get_data(c);
	struct lease_vote old = d->vote;
	struct lease_params p;
	struct lease_ask a;
	uint64_t wait = 0;
	int rc;

	if (!m->body || m->body->descriptor != &twinfs__lease__descriptor) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	vote_params(d, &p);
	a = (struct lease_ask){ q->term, q->candidate, q->accept_stale,
				q->standby_stale };
	if (q->release)
		rc = lease_vote_release(&d->vote, &a, tw_now_ms());
	else
		rc = lease_vote_decide(&d->vote, &p, &a, tw_now_ms(), &wait);
	if (rc == 0 && lease_vote_persist_differs(&old, &d->vote)) {
		struct tw_vote_disk v = { d->vote.term, d->vote.holder,
					  d->vote.stale };

		rc = tw_vote_save(d->me->dir, &v);
		if (rc < 0) {
			d->vote = old;   /* nothing promised that is not on disk */
			rc = -EIO;
		} else if (d->vote.term != old.term) {
			tw_info("iod %" PRIu32 ": election term %" PRIu64
				" granted to mgrd %" PRIu32 "%s", d->id,
				d->vote.term, d->vote.holder,
				q->accept_stale ? " (accepting a stale mgrd)" :
				"");
		}
	}
	if (rc == 0) {
		if (ic->mgrd_term < q->term)
			ic->mgrd_term = q->term;
		if (d->vote.term != old.term)
			fence_older(d);
	}
	r.term = d->vote.term;
	r.holder = d->vote.holder;
	r.stale = d->vote.stale;
	r.wait_ms = wait > UINT32_MAX ? UINT32_MAX : (uint32_t)wait;
	wire_reply(c, &m->hdr, rc, &r.base, NULL, 0);
}
