/* statahead.c - answer LOOKUPs from directory listings fetched ahead.
 *
 * A program that stats many names of one directory (find, rsync, ls
 * without READDIRPLUS, `stat` of each file, a compiler's include search)
 * costs one mgrd round trip per name: five wakeups of idle CPUs each.
 * After two lookups of one directory miss, the client fetches the
 * directory's listing with attributes (READDIR plus, FC_SA_BATCH entries a
 * round trip) and answers the following lookups of that directory on the
 * FUSE worker, without the loop or mgrd.  This is what the kernel does with
 * a READDIRPLUS reply, started by lookups instead of getdents.
 *
 * What it must not change:
 *   - Staleness.  An answer is never older than the kernel's own caches
 *     allow: a batch is used for ttl = min(entry_timeout, attr_timeout)
 *     from the moment its fetch was decided, and the answer's timeouts are
 *     what is left of that, so the kernel holds it no longer than it would
 *     hold a LOOKUP answered when the fetch went out.  ttl 0 turns the
 *     whole thing off.
 *   - This mount's own changes.  Every mgrd request of this mount that can
 *     change a name or attributes (fc_mgr_type_changes) bumps `gen` when it
 *     is sent and when it ends; a batch fetched under another gen is never
 *     used, and a fetch that ended under another gen than it started with
 *     is thrown away.
 *   - This mount's removals (UNLINK, RMDIR: fc_sa_removed, also when sent
 *     and when ended) void nothing, so that an unlink loop is answered
 *     ahead: the removed name leaves the index, and a fetch in flight
 *     across the removal drops it from what it brings (the last
 *     FC_SA_RM_RING removals are remembered; past that it is thrown
 *     away).  What else a removal changes: its directory's attributes and
 *     those of a file with another name.  So an entry of a directory, or
 *     of a file with more than one link, is used only from a batch whose
 *     fetch began after the last removal.
 *   - Known inodes.  For an inode the kernel holds, a hit is used only if
 *     its attributes are not older than the table's (ctime, trunc_gen:
 *     fc_inode_entry_not_older), and the answer carries the table's
 *     merged size (one this mount wrote and has not reported).
 *   - Absence.  A name not in the batches is asked of mgrd, never
 *     answered ENOENT: a file another client created must be found at
 *     once (a job's ranks open what rank 0 created after a barrier).
 *     Only a name lease (dlease.c), which mgrd recalls before another
 *     client adds a name, answers absence.
 * Wasted work is bounded: at most FC_SA_DIRS directories, FC_SA_DIR_BATCHES
 * batches each; only misses with no change of this mount between them
 * start a fetch (so `tar x`, a lookup before each create, starts none); a
 * directory whose fetches go unused (voided in flight, or answering next
 * to nothing) is left alone for a growing while.
 *
 * Any thread; everything below is guarded by sa->lock except gen.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "statahead.h"

/* One READDIR plus reply and the index entries of its dirents. */
struct sa_ent {
	const Twinfs__Dirent *d;
	struct fc_sa_batch *b;
};

struct fc_sa_batch {
	struct wire_msg *msg;       /* ReaddirReply */
	uint64_t sent_ms;           /* when its fetch was decided */
	uint64_t last_cookie;       /* of its last entry: next batch after */
	uint64_t rm_seq;            /* fc_sa.rm_seq when its fetch began */
	bool eof;                   /* the end of the directory (or empty) */
	unsigned hits;
	size_t n;
	struct sa_ent *ents;        /* n entries, indexed in dir->index */
	struct fc_sa_batch *next;   /* older -> newer */
};

/* 0 is not a valid tw_hmap key. */
static uint64_t name_key(const char *s)
{
	uint64_t h = tw_fnv1a64(s, strlen(s));

	return h ? h : 1;
}

void fc_sa_init(struct fc_sa *sa, uint64_t ttl_ms)
{
	size_t i;

	memset(sa, 0, sizeof(*sa));
	pthread_mutex_init(&sa->lock, NULL);
	atomic_init(&sa->gen, 1);
	sa->ttl_ms = ttl_ms;
	for (i = 0; i < FC_SA_DIRS; i++)
		tw_hmap_init(&sa->dirs[i].index);
}

/* A fetch was not worth its round trip (it was thrown away, or its batch
 * answered next to nothing): leave the directory alone for a while, twice
 * as long each time in a row. */
static void wasted(struct fc_sa_dir *d, uint64_t now_ms)
{
	d->backoff_ms = d->backoff_ms ? d->backoff_ms * 2
				      : FC_SA_BACKOFF_MIN_MS;
	if (d->backoff_ms > FC_SA_BACKOFF_MAX_MS)
		d->backoff_ms = FC_SA_BACKOFF_MAX_MS;
	d->backoff_until_ms = now_ms + d->backoff_ms;
}

static void drop_head(struct fc_sa_dir *d, uint64_t now_ms)
{
	struct fc_sa_batch *b = d->head;
	size_t i;

	assert(b);
	for (i = 0; i < b->n; i++) {
		uint64_t k = name_key(b->ents[i].d->name);

		/* A colliding or repeated name was not indexed for b. */
		if (tw_hmap_get(&d->index, k) == &b->ents[i])
			tw_hmap_del(&d->index, k);
	}
	if (b->hits * 16 < b->n && b->hits < 16)
		wasted(d, now_ms);
	else
		d->backoff_ms = 0;
	d->head = b->next;
	if (!d->head)
		d->tail = NULL;
	d->nbatches--;
	wire_msg_free(b->msg);
	free(b->ents);
	free(b);
}

static void drop_all(struct fc_sa_dir *d, uint64_t now_ms)
{
	while (d->head)
		drop_head(d, now_ms);
}

void fc_sa_free(struct fc_sa *sa)
{
	size_t i;

	for (i = 0; i < FC_SA_DIRS; i++) {
		drop_all(&sa->dirs[i], 0);
		tw_hmap_free(&sa->dirs[i].index);
	}
	pthread_mutex_destroy(&sa->lock);
}

void fc_sa_log_stats(struct fc_sa *sa)
{
	pthread_mutex_lock(&sa->lock);
	if (sa->ttl_ms)
		tw_log(TW_LOG_INFO, "statahead: %" PRIu64 " of %" PRIu64
		       " lookups answered from listings fetched ahead (%"
		       PRIu64 " fetched, %" PRIu64 " kept)", sa->n_hits,
		       sa->n_lookups, sa->n_fetches, sa->n_kept);
	pthread_mutex_unlock(&sa->lock);
}

void fc_sa_changed(struct fc_sa *sa)
{
	atomic_fetch_add(&sa->gen, 1);
}

/* Forget name in d if it came from batch b (NULL: any batch). */
static void unindex(struct fc_sa_dir *d, uint64_t key, const char *name,
		    const struct fc_sa_batch *b)
{
	struct sa_ent *e = tw_hmap_get(&d->index, key);

	if (e && (!b || e->b == b) && (!name || strcmp(e->d->name, name) == 0))
		tw_hmap_del(&d->index, key);
}

void fc_sa_removed(struct fc_sa *sa, uint64_t dir, const char *name)
{
	uint64_t key = name_key(name);
	size_t i;

	if (sa->ttl_ms == 0)
		return;
	pthread_mutex_lock(&sa->lock);
	sa->rm_seq++;
	sa->rm_ring[sa->rm_seq % FC_SA_RM_RING].dir = dir;
	sa->rm_ring[sa->rm_seq % FC_SA_RM_RING].key = key;
	for (i = 0; i < FC_SA_DIRS; i++)
		if (sa->dirs[i].ino == dir)
			unindex(&sa->dirs[i], key, name, NULL);
	pthread_mutex_unlock(&sa->lock);
}

/* Whether a removal of this mount since b's fetch began may have changed
 * e's attributes: a directory's (its mtime, ctime and link count move
 * with every removal in it) or a file's with more than one name (one of
 * them may be gone).  A one-name file's attributes change only with the
 * removal of its own name, which takes the name out of the index. */
static bool removal_may_change(const struct fc_sa *sa, const struct sa_ent *e,
			       const struct fc_attr *a)
{
	return e->b->rm_seq != sa->rm_seq &&
	       (S_ISDIR(a->mode) || a->nlink > 1);
}

/* The slot of dir, or (create) the least recently used one, emptied. */
static struct fc_sa_dir *slot(struct fc_sa *sa, uint64_t dir, bool create,
			      uint64_t now_ms)
{
	struct fc_sa_dir *d, *lru = NULL;
	size_t i;

	for (i = 0; i < FC_SA_DIRS; i++) {
		d = &sa->dirs[i];
		if (d->ino == dir)
			return d;
		if (!lru || d->last_use_ms < lru->last_use_ms)
			lru = d;
	}
	if (!create)
		return NULL;
	drop_all(lru, now_ms);
	lru->ino = dir;
	lru->misses = 0;
	lru->fetching = false;
	lru->backoff_ms = 0;
	lru->backoff_until_ms = 0;
	return lru;
}

/* Drop what may no longer be used: everything after a change of this
 * mount, expired batches from the oldest on. */
static void expire(struct fc_sa *sa, struct fc_sa_dir *d, uint64_t gen,
		   uint64_t now_ms)
{
	if (d->gen != gen) {
		drop_all(d, now_ms);
		d->gen = gen;
		/* Misses count only while nothing changes between them: the
		 * lookup before each create of `tar x` starts no fetch. */
		d->misses = 0;
		return;
	}
	while (d->head && now_ms >= d->head->sent_ms + sa->ttl_ms)
		drop_head(d, now_ms);
}

static void start_fetch(struct fc_sa *sa, struct fc_sa_dir *d, uint64_t gen,
			uint64_t cookie, uint64_t now_ms,
			struct fc_sa_fetch *f)
{
	d->fetching = true;
	d->fetch_seq = ++sa->fetch_seq;
	sa->n_fetches++;
	d->misses = 0;
	f->dir = d->ino;
	f->cookie = cookie;
	f->gen = gen;
	f->sent_ms = now_ms;
	f->seq = d->fetch_seq;
	f->rm_seq = sa->rm_seq;
}

enum fc_sa_result fc_sa_find(struct fc_sa *sa, uint64_t parent,
			     const char *name, uint64_t now_ms,
			     struct fc_attr *a, uint64_t *age_ms,
			     struct fc_sa_fetch *f)
{
	enum fc_sa_result res = FC_SA_MISS;
	uint64_t gen = atomic_load(&sa->gen);
	struct fc_sa_dir *d;
	struct sa_ent *e;

	memset(f, 0, sizeof(*f));
	if (sa->ttl_ms == 0)
		return FC_SA_MISS;
	pthread_mutex_lock(&sa->lock);
	sa->n_lookups++;
	d = slot(sa, parent, true, now_ms);
	d->last_use_ms = now_ms;
	expire(sa, d, gen, now_ms);
	e = tw_hmap_get(&d->index, name_key(name));
	if (e && strcmp(e->d->name, name) == 0 &&
	    fc_attr_from_pb(e->d->attr, a) == 0 && a->ino == e->d->ino &&
	    !removal_may_change(sa, e, a)) {
		e->b->hits++;
		sa->n_hits++;
		*age_ms = now_ms - d->head->sent_ms;
		res = FC_SA_HIT;
		/* Read on ahead once half of the newest batch was used. */
		if (!d->fetching && !d->tail->eof &&
		    2 * (size_t)d->tail->hits >= d->tail->n)
			start_fetch(sa, d, gen, d->tail->last_cookie, now_ms,
				    f);
	} else if (!d->fetching && now_ms >= d->backoff_until_ms &&
		   ++d->misses >= FC_SA_MIN_MISSES) {
		/* Nothing held: from the start.  Past the end of what is
		 * held: on from there.  At eof, a miss is a name the listing
		 * did not have: mgrd answers it. */
		if (!d->head)
			start_fetch(sa, d, gen, 0, now_ms, f);
		else if (!d->tail->eof)
			start_fetch(sa, d, gen, d->tail->last_cookie, now_ms,
				    f);
	}
	pthread_mutex_unlock(&sa->lock);
	return res;
}

/* Index the dirents of b that carry attributes. */
static int index_batch(struct fc_sa_dir *d, struct fc_sa_batch *b)
{
	const Twinfs__ReaddirReply *r = (const void *)b->msg->body;
	size_t i;

	b->ents = calloc(r->n_entries ? r->n_entries : 1, sizeof(*b->ents));
	if (!b->ents)
		return -ENOMEM;
	for (i = 0; i < r->n_entries; i++) {
		const Twinfs__Dirent *de = r->entries[i];
		uint64_t k;

		if (!de->name || !de->name[0] || de->ino == 0 || !de->attr)
			continue;
		k = name_key(de->name);
		b->ents[b->n].d = de;
		b->ents[b->n].b = b;
		if (!tw_hmap_get(&d->index, k) &&
		    tw_hmap_put(&d->index, k, &b->ents[b->n]) < 0)
			return -ENOMEM;
		b->n++;
	}
	return 0;
}

void fc_sa_fetched(struct fc_sa *sa, const struct fc_sa_fetch *f, int status,
		   struct wire_msg *reply, uint64_t now_ms)
{
	const Twinfs__ReaddirReply *r;
	struct fc_sa_batch *b = NULL;
	struct fc_sa_dir *d;

	pthread_mutex_lock(&sa->lock);
	d = slot(sa, f->dir, false, now_ms);
	if (!d || !d->fetching || d->fetch_seq != f->seq)
		goto out;               /* the slot went to another directory */
	d->fetching = false;
	if (status < 0 || !reply ||
	    reply->body->descriptor != &twinfs__readdir_reply__descriptor) {
		wasted(d, now_ms);
		goto out;
	}
	expire(sa, d, atomic_load(&sa->gen), now_ms);
	/* Changed while in flight, or no longer the continuation of what is
	 * held (it expired meanwhile): not usable. */
	if (f->gen != d->gen ||
	    sa->rm_seq - f->rm_seq > FC_SA_RM_RING ||
	    (f->cookie != 0 &&
	     (!d->tail || d->tail->last_cookie != f->cookie)) ||
	    (f->cookie == 0 && d->head)) {
		wasted(d, now_ms);
		goto out;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out;
	b->msg = reply;
	reply = NULL;
	b->sent_ms = f->sent_ms;
	b->rm_seq = f->rm_seq;
	r = (const void *)b->msg->body;
	/* An empty batch that is not eof would be asked again forever. */
	b->eof = r->eof || r->n_entries == 0;
	if (r->n_entries)
		b->last_cookie = r->entries[r->n_entries - 1]->cookie;
	if (d->tail)
		d->tail->next = b;
	else
		d->head = b;
	d->tail = b;
	d->nbatches++;
	sa->n_kept++;
	if (index_batch(d, b) < 0) {
		drop_all(d, now_ms);
	} else {
		/* Names this mount removed while the fetch was in flight
		 * (mgrd may have listed them before): not from b.  A key
		 * collision only sends a lookup to mgrd. */
		for (uint64_t s = f->rm_seq + 1; s <= sa->rm_seq; s++)
			if (sa->rm_ring[s % FC_SA_RM_RING].dir == d->ino)
				unindex(d, sa->rm_ring[s % FC_SA_RM_RING].key,
					NULL, b);
	}
	while (d->nbatches > FC_SA_DIR_BATCHES)
		drop_head(d, now_ms);
out:
	pthread_mutex_unlock(&sa->lock);
	if (reply)
		wire_msg_free(reply);
}

/* Requests that cannot change a name or attributes, as mgrd lists them,
 * and the removals, which fc_sa_removed follows name by name. */
bool fc_mgr_type_changes(uint16_t type)
{
	switch (type) {
	case TWINFS__MSG_TYPE__MSG_HELLO:
	case TWINFS__MSG_TYPE__MSG_PING:
	case TWINFS__MSG_TYPE__MSG_LOOKUP:
	case TWINFS__MSG_TYPE__MSG_GETATTR:
	case TWINFS__MSG_TYPE__MSG_READLINK:
	case TWINFS__MSG_TYPE__MSG_READDIR:
	case TWINFS__MSG_TYPE__MSG_STATFS:
	case TWINFS__MSG_TYPE__MSG_GETXATTR:
	case TWINFS__MSG_TYPE__MSG_LISTXATTR:
	case TWINFS__MSG_TYPE__MSG_GET_MAP:
	case TWINFS__MSG_TYPE__MSG_INO_PATH:
	case TWINFS__MSG_TYPE__MSG_SYNC:
	case TWINFS__MSG_TYPE__MSG_FSYNCDIR:
	case TWINFS__MSG_TYPE__MSG_REPORT:
	case TWINFS__MSG_TYPE__MSG_GETLK:
	case TWINFS__MSG_TYPE__MSG_UNLINK:   /* fc_sa_removed */
	case TWINFS__MSG_TYPE__MSG_RMDIR:
		return false;
	default:
		return true;
	}
}

/* ------------------------------------------------------------ the fetch */

struct sa_op {
	struct fc_op op;
	struct fc_mgr_call mc;
	struct fc_sa_fetch f;
	Twinfs__Readdir rd;
};

static void fetch_done(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	struct sa_op *s = mc->arg;

	fc_sa_fetched(&mc->cl->sa, &s->f, status, reply, tw_now_ms());
	fc_op_free(&s->op);
}

static void fetch_run(struct fc_op *op)
{
	struct sa_op *s = (struct sa_op *)op;

	twinfs__readdir__init(&s->rd);
	s->rd.ino = s->f.dir;
	s->rd.cookie = s->f.cookie;
	s->rd.max_entries = FC_SA_BATCH;
	s->rd.plus = true;
	fc_mgr_send(op->cl, &s->mc, TWINFS__MSG_TYPE__MSG_READDIR, &s->rd.base,
		    &s->rd.ctx, op, 0, fetch_done, s);
}

void fc_sa_start(struct fc_client *cl, const struct fc_sa_fetch *f,
		 fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct sa_op *s = fc_op_new(cl, NULL, sizeof(*s), fetch_run);

	if (!s) {
		/* Not started: the slot stays "fetching" until it is reused;
		 * lookups go to mgrd meanwhile. */
		return;
	}
	s->f = *f;
	s->op.uid = ctx->uid;
	s->op.gid = ctx->gid;
	/* The caller's groups, read now: the op answers no request. */
	s->op.req = req;
	fc_op_groups(&s->op);
	s->op.req = NULL;
	fc_loop_submit(cl, &s->op);
}
