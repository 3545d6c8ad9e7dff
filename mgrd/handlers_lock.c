/* handlers_lock.c - cluster-wide fcntl/OFD/flock locks (MSG_LOCK,
 * MSG_GETLK, MSG_UNLOCK_ALL, MSG_LOCK_CANCEL; proto/FORMAT.md "Locks").
 *
 * The table (common/lock.c: conflicts, split/merge, deadlocks) lives in
 * mgrd's memory only, owned per session: it is not journaled.  After a
 * start, a grace period of `lock_grace` lets the clients of the sessions
 * that survived in the journal re-claim the locks they hold (`reclaim`);
 * meanwhile every other request that could take a lock or test for one is
 * answered -EINPROGRESS and retried by the client (as NFS's GRACE).  The
 * grace also lasts until every readable iod has taken the fence list
 * (server.c "fencing"): a session that expired just before the restart
 * lost its locks with mgrd's memory, and its writes must be refused
 * before anyone else can lock what it held.
 *
 * A blocking request (wait) that conflicts is parked without an answer:
 * it is answered 0 when granted (after an unlock, a close, or a session
 * expiry), -EINTR when its client cancels it (MSG_LOCK_CANCEL, after a
 * signal), and never when its connection closes (the client sends it again
 * on the next connection; the same waiter_id replaces the parked one).
 * Sessions that expire lose their locks once they are fenced (server.c
 * calls mgr_locks_session_gone).
 */
#include "server_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Named limits: a peer cannot make mgrd allocate without bound (a set
 * can split one lock into two, so the table may pass the limit by one). */
#define LOCKS_MAX    (1u << 20)   /* held locks, all sessions */
#define WAITERS_MAX  (1u << 16)   /* parked requests, all sessions */

struct parked {
	struct tw_lk_waiter w;    /* w.arg = this */
	struct parked *next;      /* mgr_locks.parked */
	struct wire_conn *c;      /* referenced */
	struct wire_hdr hdr;
	uint64_t waiter_id;
};

struct mgr_locks {
	struct mgr_server *s;
	struct tw_lk_table t;
	struct parked *parked;
	uint64_t grace_until_ms;  /* 0: no grace */
	bool grace_logged;
};

uint64_t mgr_locks_count(const struct mgr_server *s)
{
	return s->locks ? s->locks->t.n_locks : 0;
}

int mgr_locks_new(struct mgr_server *s, bool grace)
{
	struct mgr_locks *lk = calloc(1, sizeof(*lk));
	uint32_t ms = tw_ms_or(s->conf->lock_grace_ms, TW_LOCK_GRACE_MS);

	if (!lk)
		return -ENOMEM;
	tw_lk_init(&lk->t);
	lk->s = s;
	if (grace) {
		lk->grace_until_ms = tw_now_ms() + ms;
		tw_info("mgrd: lock grace for %u ms: clients re-claim the locks "
			"they held; new locks wait until it ends", ms);
	} else if (s->st.sessions.fence_gen) {
		/* Nothing to re-claim, but a session that expired just before
		 * the restart may not be fenced everywhere yet. */
		lk->grace_until_ms = tw_now_ms();
	}
	s->locks = lk;
	return 0;
}

static void parked_unlink(struct mgr_locks *lk, struct parked *p)
{
	for (struct parked **pp = &lk->parked; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	tw_lk_wait_del(&lk->t, &p->w);
	wire_conn_unref(p->c);
	free(p);
}

void mgr_locks_free(struct mgr_server *s)
{
	struct mgr_locks *lk = s->locks;

	if (!lk)
		return;
	/* Unanswered: the connections close and the clients send them
	 * again to the next mgrd. */
	while (lk->parked)
		parked_unlink(lk, lk->parked);
	tw_lk_free(&lk->t);
	free(lk);
	s->locks = NULL;
}

static bool in_grace(struct mgr_locks *lk)
{
	if (!lk->grace_until_ms)
		return false;
	if (tw_now_ms() < lk->grace_until_ms || !mgr_srv_fenced(lk->s))
		return true;
	lk->grace_until_ms = 0;
	tw_info("mgrd: lock grace over: %llu locks re-claimed",
		(unsigned long long)lk->t.n_locks);
	return false;
}

static void reply_lock(struct wire_conn *c, const struct wire_hdr *h,
		       int status, const struct tw_lk *holder,
		       uint64_t session)
{
	Twinfs__LockReply r = TWINFS__LOCK_REPLY__INIT;

	if (status == -EAGAIN) {
		/* A conflict is an answer, not an error (see LockReply). */
		status = 0;
		r.denied = true;
	}
	if (holder) {
		r.type = (Twinfs__LockType)holder->type;
		r.start = holder->start;
		r.end = holder->end;
		r.pid = holder->pid;
		r.same_session = holder->session == session;
	}
	mgr_srv_reply(c, h, status, &r.base);
}

/* Per-session lock counts (max_locks_per_session).  Every change to the
 * table goes through these: tw_lk_set changes only its owner's locks, so
 * the change of the table's count is the session's; drops return theirs. */
static void count_locks(struct mgr_locks *lk, uint64_t session,
			uint64_t before)
{
	struct mgr_session *sess = mgr_session_get(&lk->s->st.sessions,
						   session);
	int64_t d = (int64_t)lk->t.n_locks - (int64_t)before;

	if (!sess)
		return;
	if (d < 0 && (uint64_t)-d > sess->n_locks)
		sess->n_locks = 0;   /* locks taken before a restart's reclaim */
	else
		sess->n_locks = (uint32_t)((int64_t)sess->n_locks + d);
}

static int lk_set(struct mgr_locks *lk, uint64_t ino, const struct tw_lk *want)
{
	uint64_t before = lk->t.n_locks;
	int rc = tw_lk_set(&lk->t, ino, want);

	count_locks(lk, want->session, before);
	return rc;
}

/* Whether the session may take one more lock.  An unlock or a change of a
 * range it holds may split one lock into two, so a session may pass the
 * limit by one, as the table may pass LOCKS_MAX. */
static bool session_may_lock(const struct mgr_locks *lk, uint64_t session)
{
	const struct mgr_session *sess = mgr_session_get(&lk->s->st.sessions,
							 session);
	uint32_t max = lk->s->conf->max_locks_per_session;

	return !sess || !max || sess->n_locks < max;
}

/* Grant every parked request of ino that fits now, in arrival order. */
static void grant(struct mgr_locks *lk, uint64_t ino)
{
	struct tw_lk_waiter *w;

	while ((w = tw_lk_wait_grantable(&lk->t, ino))) {
		struct parked *p = w->arg;
		int rc = session_may_lock(lk, w->want.session)
			 ? lk_set(lk, ino, &w->want) : -ENOLCK;

		reply_lock(p->c, &p->hdr, rc < 0 ? -ENOLCK : 0, NULL, 0);
		parked_unlink(lk, p);
	}
}

/* After removals in several inodes: grant in each inode with waiters. */
static void grant_all(struct mgr_locks *lk)
{
	size_t n = 0, cap = lk->t.n_waiters;
	uint64_t *inos = malloc((cap ? cap : 1) * sizeof(*inos));

	if (!inos)
		return;   /* they are granted at the next change of their inode */
	for (struct parked *p = lk->parked; p && n < cap; p = p->next)
		inos[n++] = p->w.ino;
	for (size_t i = 0; i < n; i++)
		grant(lk, inos[i]);
	free(inos);
}

static struct parked *parked_find(struct mgr_locks *lk, uint64_t session,
				  uint64_t waiter_id)
{
	for (struct parked *p = lk->parked; p; p = p->next)
		if (p->w.want.session == session && p->waiter_id == waiter_id)
			return p;
	return NULL;
}

/* Validate a Lock request into *want; -EINVAL when malformed. */
static int lock_from_pb(const Twinfs__Lock *q, uint64_t session,
			struct tw_lk *want)
{
	memset(want, 0, sizeof(*want));
	if ((unsigned)q->kind > TW_LK_FLOCK || (unsigned)q->type > TW_LK_WRLCK ||
	    q->start > q->end)
		return -EINVAL;
	want->session = session;
	want->owner = q->owner;
	want->file = q->file;
	want->pid = q->pid;
	want->kind = (uint8_t)q->kind;
	want->type = (uint8_t)q->type;
	want->start = q->kind == TWINFS__LOCK_KIND__LK_FLOCK ? 0 : q->start;
	want->end = q->kind == TWINFS__LOCK_KIND__LK_FLOCK ? TW_LK_EOF : q->end;
	return 0;
}

static void park(struct mgr_locks *lk, struct wire_conn *c,
		 const struct wire_msg *m, const struct tw_lk *want,
		 uint64_t ino, uint64_t waiter_id)
{
	struct parked *p = parked_find(lk, want->session, waiter_id);

	if (p) {
		/* The client sent it again on a new connection. */
		wire_conn_unref(p->c);
		p->c = c;
		p->hdr = m->hdr;
		wire_conn_ref(c);
		return;
	}
	p = lk->t.n_waiters < WAITERS_MAX ? calloc(1, sizeof(*p)) : NULL;
	if (!p) {
		mgr_srv_reply(c, &m->hdr, -ENOLCK, NULL);
		return;
	}
	p->w.ino = ino;
	p->w.want = *want;
	p->w.arg = p;
	p->c = c;
	p->hdr = m->hdr;
	p->waiter_id = waiter_id;
	if (tw_lk_wait_add(&lk->t, &p->w) < 0) {
		free(p);
		mgr_srv_reply(c, &m->hdr, -ENOLCK, NULL);
		return;
	}
	wire_conn_ref(c);
	p->next = lk->parked;
	lk->parked = p;
}

static void h_lock(struct mgr_locks *lk, uint64_t session, struct wire_conn *c,
		   struct wire_msg *m)
{
	const Twinfs__Lock *q = (const Twinfs__Lock *)m->body;
	struct tw_lk want, holder;
	int rc = lock_from_pb(q, session, &want);

	if (rc < 0)
		goto out;
	if (want.type == TW_LK_UNLCK) {
		rc = lk_set(lk, q->ino, &want);
		grant(lk, q->ino);
		goto out;
	}
	if (q->reclaim) {
		/* Only the owner's own lock comes back; a conflict means two
		 * clients claim one range (one came back too late). */
		if (tw_lk_test(&lk->t, q->ino, &want, &holder)) {
			tw_warn("mgrd: session %llu re-claims a lock on ino %llu "
				"that session %llu holds now: refused",
				(unsigned long long)session,
				(unsigned long long)q->ino,
				(unsigned long long)holder.session);
			rc = -ENOLCK;
		} else {
			rc = lk_set(lk, q->ino, &want);
		}
		goto out;
	}
	if (in_grace(lk)) {
		rc = -EINPROGRESS;
		goto out;
	}
	if (lk->t.n_locks >= LOCKS_MAX) {
		rc = -ENOLCK;
		goto out;
	}
	if (!session_may_lock(lk, session)) {
		/* POSIX's "too many segment locks": the session holds
		 * max_locks_per_session; it may still unlock. */
		tw_log_rl(TW_LOG_WARN, "mgrd: session %llu holds "
			  "max_locks_per_session (%u) locks: lock refused "
			  "(ENOLCK)", (unsigned long long)session,
			  lk->s->conf->max_locks_per_session);
		rc = -ENOLCK;
		goto out;
	}
	if (!tw_lk_test(&lk->t, q->ino, &want, &holder)) {
		rc = lk_set(lk, q->ino, &want);
		if (rc == 0)
			grant(lk, q->ino);   /* a downgrade may let readers in */
		goto out;
	}
	if (!q->wait) {
		reply_lock(c, &m->hdr, -EAGAIN, &holder, session);
		return;
	}
	if (tw_lk_deadlock(&lk->t, q->ino, &want)) {
		rc = -EDEADLK;
		goto out;
	}
	park(lk, c, m, &want, q->ino, q->waiter_id);
	return;
out:
	if (rc == -ENOMEM)
		rc = -ENOLCK;
	reply_lock(c, &m->hdr, rc, NULL, session);
}

static void h_getlk(struct mgr_locks *lk, uint64_t session,
		    struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Lock *q = (const Twinfs__Lock *)m->body;
	struct tw_lk want, holder;
	int rc = lock_from_pb(q, session, &want);

	if (rc == 0 && want.type == TW_LK_UNLCK)
		rc = -EINVAL;
	if (rc == 0 && in_grace(lk))
		rc = -EINPROGRESS;
	if (rc < 0) {
		reply_lock(c, &m->hdr, rc, NULL, session);
		return;
	}
	reply_lock(c, &m->hdr, 0, tw_lk_test(&lk->t, q->ino, &want, &holder)
		   ? &holder : NULL, session);
}

static void h_unlock_all(struct mgr_locks *lk, uint64_t session,
			 struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__LockDrop *q = (const Twinfs__LockDrop *)m->body;
	uint64_t before = lk->t.n_locks;

	if (q->by_file)
		tw_lk_drop_file(&lk->t, q->ino, session, q->file);
	else
		tw_lk_drop_owner(&lk->t, q->ino, session, q->owner);
	count_locks(lk, session, before);
	grant(lk, q->ino);
	mgr_srv_reply(c, &m->hdr, 0, NULL);
}

static void h_cancel(struct mgr_locks *lk, uint64_t session,
		     struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__LockCancel *q = (const Twinfs__LockCancel *)m->body;
	struct parked *p = parked_find(lk, session, q->waiter_id);

	/* Not found: granted (or refused) already; the client has or will
	 * have that answer. */
	if (p) {
		mgr_srv_reply(p->c, &p->hdr, -EINTR, NULL);
		parked_unlink(lk, p);
	}
	mgr_srv_reply(c, &m->hdr, 0, NULL);
}

void mgr_handle_lock(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m)
{
	struct mgr_conn *mc = wire_conn_get_data(c);
	struct mgr_locks *lk = s->locks;

	/* Locks belong to a session: one is bound by HELLO. */
	if (!mc || !mc->session || !lk) {
		mgr_srv_reply(c, &m->hdr, -ENOLCK, NULL);
		return;
	}
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_LOCK: h_lock(lk, mc->session, c, m); break;
	case TWINFS__MSG_TYPE__MSG_GETLK: h_getlk(lk, mc->session, c, m); break;
	case TWINFS__MSG_TYPE__MSG_UNLOCK_ALL:
		h_unlock_all(lk, mc->session, c, m);
		break;
	default: h_cancel(lk, mc->session, c, m); break;
	}
}

void mgr_locks_session_gone(struct mgr_server *s, uint64_t session)
{
	struct mgr_locks *lk = s->locks;
	struct mgr_session *sess = mgr_session_get(&s->st.sessions, session);
	unsigned n;

	if (!lk)
		return;
	for (struct parked *p = lk->parked, *next; p; p = next) {
		next = p->next;
		if (p->w.want.session == session)
			parked_unlink(lk, p);
	}
	n = tw_lk_drop_session(&lk->t, session);
	if (sess)
		sess->n_locks = 0;
	if (n)
		tw_info("mgrd: %u locks of expired session %llu released", n,
			(unsigned long long)session);
	grant_all(lk);
}

void mgr_locks_conn_closed(struct mgr_server *s, struct wire_conn *c)
{
	struct mgr_locks *lk = s->locks;

	if (!lk)
		return;
	for (struct parked *p = lk->parked, *next; p; p = next) {
		next = p->next;
		if (p->c == c)
			parked_unlink(lk, p);
	}
}
