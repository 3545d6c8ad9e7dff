/* dlease.c - name leases: a session may answer "no such name" in a
 * directory it made without asking mgrd (proto/FORMAT.md "Name leases").
 *
 * `tar x` and a job creating its output files ask LOOKUP before each
 * create, a round trip that always answers ENOENT.  MKDIR gives the
 * creating session a lease on the new (empty) directory: while it holds it,
 * no other session adds a name there, so the client knows every name the
 * directory has (those it added itself) and answers the rest ENOENT.
 *
 * Rules:
 *   L1  A request of another session that adds a name in a leased
 *       directory (MKNOD, MKDIR, SYMLINK, LINK, RENAME into it) waits
 *       (parked, unanswered) until the holder gave the lease back
 *       (DIR_RETURN, after a DIR_RECALL push on each of its connections)
 *       or the lease expired.  Requests that only read or remove names
 *       never wait: a removal only makes a "may exist" of the holder's
 *       wrong in the safe direction.
 *   L2  A lease runs MGR_DL_MS from when mgrd handled the request that
 *       granted or renewed it; the client counts from before it sent
 *       that request, minus a margin, so it stops answering first.  The
 *       holder's own MKNOD, MKDIR, SYMLINK and LINK in the directory renew
 *       it, unless a recall has started.
 *   L3  Leases live in memory only.  For MGR_DL_MS after mgrd starts
 *       with sessions in its state, every name-adding request of any
 *       session waits: a lease granted before a restart may still be in
 *       use.
 *   L4  A session's lease ends at its expiry even if the holder never
 *       answers the recall (hung, cut off): a create elsewhere waits at
 *       most MGR_DL_MS.
 *
 * Everything runs on mgrd's loop.
 */
#include "server_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

/* A request waiting for a lease to end (L1) or for the restart grace (L3). */
struct dl_parked {
	struct dl_parked *next;
	struct wire_conn *c;         /* referenced */
	struct wire_msg *m;          /* owned */
};

struct dl_lease {
	uint64_t dir, session;
	uint64_t expiry_ms;
	bool recalling;
	struct dl_parked *head, *tail;
};

struct mgr_dleases {
	struct tw_hmap by_dir;       /* dir -> struct dl_lease */
	uint64_t grace_until_ms;     /* L3 */
	struct dl_parked *grace_head, *grace_tail;
};

static void park_append(struct dl_parked **head, struct dl_parked **tail,
			struct dl_parked *p)
{
	p->next = NULL;
	if (*tail)
		(*tail)->next = p;
	else
		*head = p;
	*tail = p;
}

/* Handle the parked requests in the order they came. */
static void run_parked(struct mgr_server *s, struct dl_parked *p)
{
	while (p) {
		struct dl_parked *next = p->next;

		/* It may park again (a grace-parked one on a new lease). */
		if (!wire_conn_is_open(p->c) || s->stopping ||
		    !mgr_srv_client_request(s, p->c, p->m))
			wire_msg_free(p->m);
		wire_conn_unref(p->c);
		free(p);
		p = next;
	}
}

static void lease_end(struct mgr_server *s, struct dl_lease *l)
{
	struct dl_parked *p = l->head;

	tw_hmap_del(&s->dl->by_dir, l->dir);
	free(l);
	run_parked(s, p);
}

static void arm(struct mgr_server *s);

static void on_timer(uv_timer_t *t)
{
	struct mgr_server *s = t->data;
	struct mgr_dleases *d = s->dl;
	uint64_t now = tw_now_ms(), k;
	struct dl_parked *g = NULL;
	void *v;

	if (d->grace_head && now >= d->grace_until_ms) {
		g = d->grace_head;
		d->grace_head = d->grace_tail = NULL;
	}
	/* Collect first: running a request may add or end leases. */
	for (;;) {
		struct dl_lease *due = NULL;

		if (!s->dl)
			return;   /* stopping */

		for (size_t it = 0; tw_hmap_next(&d->by_dir, &it, &k, &v);) {
			struct dl_lease *l = v;

			if (l->recalling && now >= l->expiry_ms) {
				due = l;
				break;
			}
		}
		if (!due)
			break;
		tw_info("mgrd: name lease on directory %llu: session %llu did "
			"not give it back; it expired",
			(unsigned long long)due->dir,
			(unsigned long long)due->session);
		lease_end(s, due);
	}
	run_parked(s, g);
	arm(s);
}

/* The timer at the earliest of the grace end and the recalls' expiries. */
static void arm(struct mgr_server *s)
{
	struct mgr_dleases *d = s->dl;
	uint64_t when = UINT64_MAX, now = tw_now_ms(), k;
	void *v;

	if (d->grace_head)
		when = d->grace_until_ms;
	for (size_t it = 0; tw_hmap_next(&d->by_dir, &it, &k, &v);) {
		struct dl_lease *l = v;

		if (l->recalling)
			when = TW_MIN(when, l->expiry_ms);
	}
	if (when == UINT64_MAX) {
		uv_timer_stop(&s->dl_timer);
		return;
	}
	uv_timer_start(&s->dl_timer, on_timer, when > now ? when - now : 0,
		       0);
}

int mgr_dl_start(struct mgr_server *s)
{
	struct mgr_dleases *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	tw_hmap_init(&d->by_dir);
	/* L3: without sessions in the state, nobody can hold a lease. */
	if (s->st.sessions.by_id.count > 0)
		d->grace_until_ms = tw_now_ms() + MGR_DL_MS;
	s->dl = d;
	return 0;
}

void mgr_dl_stop(struct mgr_server *s)
{
	struct mgr_dleases *d = s->dl;
	uint64_t k;
	void *v;

	if (!d)
		return;
	/* s->stopping: run_parked frees the requests without handling
	 * them. */
	assert(s->stopping);
	for (size_t it = 0; tw_hmap_next(&d->by_dir, &it, &k, &v);) {
		struct dl_lease *l = v;

		run_parked(s, l->head);
		free(l);
	}
	tw_hmap_free(&d->by_dir);
	run_parked(s, d->grace_head);
	free(d);
	s->dl = NULL;
}

/* The directory a name-adding request adds to, or 0. */
static uint64_t adds_to(const struct wire_msg *m)
{
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_MKNOD:
		return ((const Twinfs__Mknod *)m->body)->parent;
	case TWINFS__MSG_TYPE__MSG_MKDIR:
		return ((const Twinfs__Mkdir *)m->body)->parent;
	case TWINFS__MSG_TYPE__MSG_SYMLINK:
		return ((const Twinfs__Symlink *)m->body)->parent;
	case TWINFS__MSG_TYPE__MSG_LINK:
		return ((const Twinfs__Link *)m->body)->newparent;
	case TWINFS__MSG_TYPE__MSG_RENAME:
		return ((const Twinfs__Rename *)m->body)->newparent;
	}
	return 0;
}

/* DIR_RECALL to every connection of the holder. */
static void recall(struct mgr_server *s, struct dl_lease *l)
{
	Twinfs__Getattr g = TWINFS__GETATTR__INIT;
	int sent = 0;

	g.ino = l->dir;
	for (struct mgr_conn *mc = s->conns; mc; mc = mc->next)
		if (mc->session == l->session &&
		    wire_conn_push(mc->wc, TWINFS__MSG_TYPE__MSG_DIR_RECALL,
				   &g.base) == 0)
			sent++;
	l->recalling = true;
	tw_debug("mgrd: recalling the name lease on directory %llu from "
		 "session %llu (%d connections)", (unsigned long long)l->dir,
		 (unsigned long long)l->session, sent);
}

bool mgr_dl_park(struct mgr_server *s, struct wire_conn *c,
		 struct wire_msg *m)
{
	struct mgr_dleases *d = s->dl;
	struct mgr_conn *mc = wire_conn_get_data(c);
	uint64_t dir = adds_to(m), now = tw_now_ms();
	struct dl_parked *p;
	struct dl_lease *l;

	if (!d || !dir || !mc)
		return false;
	l = tw_hmap_get(&d->by_dir, dir);
	if (now >= d->grace_until_ms) {
		if (!l || l->session == mc->session)
			return false;
		if (now >= l->expiry_ms) {
			lease_end(s, l);   /* nothing parked on a quiet one */
			return false;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return false;   /* L1 costs memory; without it, wait no more */
	p->c = c;
	p->m = m;
	wire_conn_ref(c);
	if (now < d->grace_until_ms) {
		park_append(&d->grace_head, &d->grace_tail, p);
	} else {
		park_append(&l->head, &l->tail, p);
		if (!l->recalling)
			recall(s, l);
	}
	arm(s);
	return true;
}

uint32_t mgr_dl_grant(struct mgr_server *s, struct wire_conn *c,
		      uint64_t dir)
{
	struct mgr_conn *mc = c ? wire_conn_get_data(c) : NULL;
	struct dl_lease *l;

	if (!s->dl || !mc || !mc->session || !dir)
		return 0;
	l = tw_hmap_get(&s->dl->by_dir, dir);
	if (l)
		return 0;   /* inode numbers are never reused: cannot be */
	l = calloc(1, sizeof(*l));
	if (!l)
		return 0;
	l->dir = dir;
	l->session = mc->session;
	l->expiry_ms = tw_now_ms() + MGR_DL_MS;
	if (tw_hmap_put(&s->dl->by_dir, dir, l) < 0) {
		free(l);
		return 0;
	}
	return MGR_DL_MS;
}

uint32_t mgr_dl_renew(struct mgr_server *s, struct wire_conn *c,
		      uint64_t dir)
{
	struct mgr_conn *mc = c ? wire_conn_get_data(c) : NULL;
	struct dl_lease *l;
	uint64_t now = tw_now_ms();

	if (!s->dl || !mc || !mc->session || !dir)
		return 0;
	l = tw_hmap_get(&s->dl->by_dir, dir);
	if (!l || l->session != mc->session || l->recalling ||
	    now >= l->expiry_ms)
		return 0;
	l->expiry_ms = now + MGR_DL_MS;
	return MGR_DL_MS;
}

void mgr_dl_return(struct mgr_server *s, struct wire_conn *c,
		   const struct wire_msg *m)
{
	const Twinfs__Getattr *q = (const Twinfs__Getattr *)m->body;
	struct mgr_conn *mc = wire_conn_get_data(c);
	struct dl_lease *l = s->dl ? tw_hmap_get(&s->dl->by_dir, q->ino)
				   : NULL;

	/* Reply first: the requests it frees answer after it. */
	mgr_srv_reply(c, &m->hdr, 0, NULL);
	if (l && mc && l->session == mc->session) {
		lease_end(s, l);
		arm(s);
	}
}

void mgr_dl_sweep(struct mgr_server *s)
{
	uint64_t now = tw_now_ms(), k;
	void *v;

	if (!s->dl)
		return;
	for (size_t it = 0; tw_hmap_next(&s->dl->by_dir, &it, &k, &v);) {
		struct dl_lease *l = v;

		/* Deleting the current key while iterating is allowed. */
		if (!l->recalling && now >= l->expiry_ms) {
			tw_hmap_del(&s->dl->by_dir, k);
			free(l);
		}
	}
}
