/* session.c - client sessions: the per-session reply cache that makes
 * mutating requests exactly-once (docs/ARCHITECTURE.md "Metadata";
 * Lustre's last_rcvd) and the open handles (fh -> ino) of each session.
 *
 * Pure bookkeeping: creation, expiry and handle changes are driven by
 * journaled records (record.c), so that replay rebuilds the same sessions,
 * handles and cached replies.  Liveness (connections, idle time, grace after
 * a restart) is volatile and handled by server.c.
 *
 * Reply cache: replies are kept in insertion order (the order of the
 * journal records) and trimmed from the oldest while their seq is at most
 * the client's acked_seq, and to MGR_REPLY_CACHE_MAX entries; both rules
 * depend only on the record sequence, so replay trims identically.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void mgr_sessions_init(struct mgr_sessions *ss)
{
	tw_hmap_init(&ss->by_id);
	ss->next_id = 1;
	ss->fence_gen = 0;
	ss->n_fenced = 0;
}

static void session_free(struct mgr_session *s)
{
	uint64_t k;
	void *v;
	struct mgr_reply *r, *next;

	for (size_t it = 0; tw_hmap_next(&s->handles, &it, &k, &v);)
		free(v);
	tw_hmap_free(&s->handles);
	for (r = s->rhead; r; r = next) {
		next = r->next;
		free(r);
	}
	tw_hmap_free(&s->replies);
	free(s);
}

void mgr_sessions_free(struct mgr_sessions *ss)
{
	uint64_t k;
	void *v;

	for (size_t it = 0; tw_hmap_next(&ss->by_id, &it, &k, &v);)
		session_free(v);
	tw_hmap_free(&ss->by_id);
}

struct mgr_session *mgr_session_get(const struct mgr_sessions *ss, uint64_t id)
{
	return id ? tw_hmap_get(&ss->by_id, id) : NULL;
}

struct mgr_session *mgr_session_create(struct mgr_sessions *ss, uint64_t id)
{
	struct mgr_session *s;

	if (id == 0)
		id = ss->next_id;
	if (tw_hmap_get(&ss->by_id, id))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->next_fh = 1;
	tw_hmap_init(&s->handles);
	tw_hmap_init(&s->replies);
	if (tw_hmap_put(&ss->by_id, id, s) < 0) {
		session_free(s);
		return NULL;
	}
	if (id >= ss->next_id)
		ss->next_id = id + 1;
	return s;
}

void mgr_session_destroy(struct mgr_sessions *ss, struct mgr_session *s)
{
	tw_hmap_del(&ss->by_id, s->id);
	session_free(s);
}

void mgr_sessions_fence(struct mgr_sessions *ss, uint64_t id)
{
	assert(id != 0);
	if (ss->n_fenced == MGR_FENCE_MAX) {
		memmove(ss->fenced, ss->fenced + 1,
			(MGR_FENCE_MAX - 1) * sizeof(ss->fenced[0]));
		ss->n_fenced--;
	}
	ss->fenced[ss->n_fenced++] = id;
	ss->fence_gen++;
}

const struct mgr_reply *mgr_session_reply(const struct mgr_session *s,
					  uint64_t seq)
{
	return seq ? tw_hmap_get(&s->replies, seq) : NULL;
}

static void drop_oldest(struct mgr_session *s)
{
	struct mgr_reply *r = s->rhead;

	s->rhead = r->next;
	if (!s->rhead)
		s->rtail = NULL;
	/* A seq may have been cached twice only through a bug; delete the
	 * map entry only if it still points here. */
	if (tw_hmap_get(&s->replies, r->seq) == r)
		tw_hmap_del(&s->replies, r->seq);
	s->nreplies--;
	free(r);
}

int mgr_session_cache(struct mgr_session *s, uint64_t seq, uint64_t acked,
		      uint16_t type, int32_t status, const void *data,
		      uint32_t len)
{
	struct mgr_reply *r;

	while (s->rhead && s->rhead->seq <= acked)
		drop_oldest(s);
	if (seq == 0 || tw_hmap_get(&s->replies, seq))
		return 0;
	r = malloc(sizeof(*r) + len);
	if (!r)
		return -ENOMEM;
	r->next = NULL;
	r->seq = seq;
	r->status = status;
	r->type = type;
	r->len = len;
	if (len)
		memcpy(r->data, data, len);
	if (tw_hmap_put(&s->replies, seq, r) < 0) {
		free(r);
		return -ENOMEM;
	}
	if (s->rtail)
		s->rtail->next = r;
	else
		s->rhead = r;
	s->rtail = r;
	s->nreplies++;
	while (s->nreplies > MGR_REPLY_CACHE_MAX)
		drop_oldest(s);
	return 0;
}

int mgr_session_add_handle(struct mgr_session *s, uint64_t fh, uint64_t ino,
			   uint32_t flags)
{
	struct mgr_handle *h;

	if (fh == 0 || tw_hmap_get(&s->handles, fh))
		return -EEXIST;
	h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fh = fh;
	h->ino = ino;
	h->flags = flags;
	if (tw_hmap_put(&s->handles, fh, h) < 0) {
		free(h);
		return -ENOMEM;
	}
	if (fh >= s->next_fh)
		s->next_fh = fh + 1;
	return 0;
}

struct mgr_handle *mgr_session_handle(const struct mgr_session *s, uint64_t fh)
{
	return fh ? tw_hmap_get(&s->handles, fh) : NULL;
}

void mgr_session_del_handle(struct mgr_session *s, uint64_t fh)
{
	free(tw_hmap_del(&s->handles, fh));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t *mgr_hmap_sorted_keys(const struct tw_hmap *m, size_t *n)
{
	uint64_t *keys = malloc((m->count ? m->count : 1) * sizeof(*keys));
	uint64_t k;
	void *v;
	size_t i = 0;

	if (!keys)
		return NULL;
	for (size_t it = 0; tw_hmap_next(m, &it, &k, &v);)
		keys[i++] = k;
	qsort(keys, i, sizeof(*keys), cmp_u64);
	*n = i;
	return keys;
}

bool mgr_session_may_write(const struct mgr_session *s)
{
	return !s->read_only;
}
