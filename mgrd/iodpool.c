/* iodpool.c - mgrd as a client of the iods: one wire_peer per configured
 * iod (HELLO role MGRD), and the things mgrd asks of them:
 *
 *   TRUNCATE  every column of a file at its primary, for SETATTR size
 *             (the caller replies only after all answered); a column
 *             whose group fails meanwhile is retried at its primary in
 *             the next map (up to TRUNC_TRIES times);
 *   DELETE    the subfiles of destroyed inodes, asynchronously, retried
 *             with exponential backoff (1 s .. 60 s) until every column's
 *             primary said yes; the list itself is journaled state
 *             (mgr_ns.pdel), so it survives restarts.  Deletes are
 *             background work and give way to client requests (the
 *             seed's "demand before background" rule): with PDEL_MAX_BUSY
 *             in flight, they run back to back once mgrd has seen no
 *             client request for PDEL_IDLE_MS, and at once when the
 *             backlog reaches PDEL_BACKLOG; while requests keep coming,
 *             only the PDEL_TICK_MS tick starts them (at most
 *             PDEL_MAX_BUSY a tick, 640 a second), so space still comes
 *             back under a load that never pauses.  An unlink storm on
 *             one 2-vCPU machine: 143 us an unlink with a DELETE to each
 *             primary (and its twin) after every unlink, 80 us without;
 *   READ      of 0 bytes, every column of a file at its primary: the
 *             subfile sizes, for a file whose writer vanished without a
 *             size report (server.c "Lost writers");
 *   STATFS    summed over groups, each group counted once (each figure
 *             its smaller twin's; an iod's "available" leaves out its
 *             admission reserve and the data its journal has yet to write
 *             home), cached for STATFS_CACHE_MS;
 *   FSYNC     ino 0 at every up iod, for MSG_SYNC;
 *   FENCE     the expired sessions whose writes the iods must refuse
 *             (proto/FORMAT.md "Fencing"), to every iod that has not
 *             taken the newest list; the server waits for every
 *             readable iod's answer before it releases an expired
 *             session's locks or probes its files' sizes.
 *
 * The monitor (monitor.c) sends its pings and probes over the same peers
 * (mgr_pool_peer): mgrd's own traffic to an iod is a few small requests,
 * never bulk data, so a ping does not wait behind megabytes.
 *
 * Fan-out bookkeeping: each request to several iods is a `struct fanout`
 * that counts outstanding calls; its callback runs when the count reaches
 * zero, exactly once.  Callbacks never run before the starting function
 * returns (wire_call's rule), so callers may set up state after calling.
 */
#include "mgrd_int.h"
#include "elect.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define STATFS_CACHE_MS   1000u
#define PDEL_TICK_MS      100u     /* progress under constant demand */
#define PDEL_WAIT_MS      1000u    /* a group without a primary: retry */
#define PDEL_BACKOFF_MAX  60000u
#define PDEL_MAX_BUSY     64u      /* deletes in flight at once */
#define PDEL_IDLE_MS      20u      /* no client request for this long */
#define PDEL_BACKLOG      65536u   /* run at once from this many pending */

struct mgr_iodpool {
	uv_loop_t *loop;
	const struct tw_conf *conf;
	struct mgr_map *map;
	struct mgr_ns *ns;
	struct wire_peer *peers[TW_MAX_IODS];   /* [id - 1] */
	uint32_t n_peers;
	uint32_t timeout_ms;
	mgr_pool_pdel_cb on_pdel_done;
	mgr_pool_failed_cb on_iod_failed;
	void *arg;
	uv_timer_t timer;
	bool timer_init;
	struct call *retries;                /* truncates waiting to retry */
	uv_timer_t retry_timer;
	uint32_t pdel_busy;
	uint64_t demand_ms;                  /* last client request */
	/* No pending delete can start before this (0: look now).  Spares
	 * the scan of a long list that waits out a down group. */
	uint64_t due_ms;
	uv_timer_t idle_timer;               /* next look at the deletes */
	uint64_t incarnation;                /* for our HELLO (set_term) */
	/* statfs cache */
	struct mgr_statfs sf;
	uint64_t sf_ms;
	bool sf_valid;
	bool closing;
	int closing_handles;
	/* FENCE: per iod [id - 1], the newest list generation it answered
	 * and the one out now (0: none); on_fenced after each answer. */
	uint64_t fence_taken[TW_MAX_IODS];
	uint64_t fence_out[TW_MAX_IODS];
	void (*on_fenced)(void *arg);
	void *fenced_arg;
};

struct fanout {
	struct mgr_iodpool *pool;
	int pending;
	int status;
	/* what to call at the end */
	mgr_pool_cb cb;
	mgr_pool_cols_cb cols_cb;
	mgr_pool_statfs_cb statfs_cb;
	void *arg;
	/* per-call results */
	uint32_t n_cols;
	uint64_t per_col[R0_MAX_STRIPE_COUNT];  /* blocks, or subfile sizes */
	uint64_t ino;                        /* pending delete */
	struct {
		bool answered;
		struct mgr_statfs sf;
	} iod[TW_MAX_IODS];
};

struct call {
	struct fanout *f;
	uint32_t index;   /* column (truncate) or iod index (statfs) */
	/* truncate: what to send again after a failover */
	struct call *retry_next;
	uint64_t retry_at_ms;
	uint32_t tries;
	uint32_t iod_id;  /* where the last attempt went */
	uint64_t sub_size, gen;
	struct r0_layout layout;
};

static bool iod_writable(const struct mgr_map_iod *mi)
{
	return mi->state == MGR_IOD_UP || mi->state == MGR_IOD_SUSPECT ||
	       mi->state == MGR_IOD_RESYNCING;
}

static struct wire_peer *peer_of(struct mgr_iodpool *p,
				 const struct mgr_map_iod *mi)
{
	return mi && mi->id >= 1 && mi->id <= p->n_peers ? p->peers[mi->id - 1]
							 : NULL;
}

static void fanout_done(struct fanout *f)
{
	struct mgr_iodpool *p = f->pool;

	if (--f->pending > 0)
		return;
	if (f->cols_cb) {
		f->cols_cb(f->status, f->per_col, f->n_cols, f->arg);
	} else if (f->statfs_cb) {
		struct mgr_statfs sum = { .bsize = 4096 };
		bool any = false;

		/* Each group counts once, each figure its smaller twin's: a
		 * mirrored write fills both, so the fuller twin bounds what
		 * it can still write (whichever disk is the larger). */
		for (uint32_t g = 0; g < p->map->n_groups; g++) {
			struct mgr_statfs grp = { 0 };
			bool seen = false;

			for (uint32_t i = 0; i < p->map->n_iods; i++) {
				const struct mgr_map_iod *mi = &p->map->iods[i];
				const struct mgr_statfs *t = &f->iod[i].sf;

				if (mi->group != g || !f->iod[i].answered)
					continue;
				if (!seen || t->blocks < grp.blocks)
					grp.blocks = t->blocks;
				if (!seen || t->bfree < grp.bfree)
					grp.bfree = t->bfree;
				if (!seen || t->bavail < grp.bavail)
					grp.bavail = t->bavail;
				seen = true;
			}
			if (!seen)
				continue;
			any = true;
			sum.blocks += grp.blocks;
			sum.bfree += grp.bfree;
			sum.bavail += grp.bavail;
		}
		if (any) {
			p->sf = sum;
			p->sf_ms = tw_now_ms();
			p->sf_valid = true;
		}
		f->statfs_cb(any ? 0 : -EIO, &sum, f->arg);
	} else if (f->cb) {
		f->cb(f->status, f->arg);
	}
	free(f);
}

/* ------------------------------------------------------------- truncate */

/* A column's TRUNCATE failed because an iod of its group did (the primary
 * unreachable, or its forward to the twin failed: -EIO).  The monitor has
 * been told or will notice; retry at the column's primary in the map of
 * then, at most TRUNC_TRIES times, after TRUNC_RETRY_MS: a killed iod is
 * demoted in milliseconds, a hung one within request_timeout / 2 of the
 * failed attempt. */
#define TRUNC_TRIES 3u

static int trunc_send(struct mgr_iodpool *p, struct call *c);

static bool failover_err(int status)
{
	switch (status) {
	case -EIO:
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ENOTCONN:
	case -EAGAIN:
	case -ESTALE:     /* the map moved on while it was on its way */
		return true;
	default:
		return false;
	}
}

/* Our own call to a column's primary failed: an iod that did not answer
 * counts as a report, and the monitor probes it.  (-EIO is its twin's
 * failure, -ESTALE a map that moved on: the iod itself answered.) */
static void report_failed(struct mgr_iodpool *p, const struct call *c,
			  int status)
{
	if (status < 0 && status != -EIO && status != -ESTALE &&
	    failover_err(status) && c->iod_id && p->on_iod_failed &&
	    !p->closing)
		p->on_iod_failed(c->iod_id, p->arg);
}

/* The peer of the primary of call c's column in the current map, noted in
 * c->iod_id; NULL when there is none reachable or the pool closes. */
static struct wire_peer *call_primary(struct mgr_iodpool *p, struct call *c)
{
	struct mgr_map_iod *mi = mgr_map_primary(p->map, &c->layout,
						 c->f->ino, c->index);
	struct wire_peer *peer = peer_of(p, mi);

	if (!peer || p->closing)
		return NULL;
	c->iod_id = mi->id;
	return peer;
}

static void on_retry_timer(uv_timer_t *t)
{
	struct mgr_iodpool *p = t->data;
	struct call **pp = &p->retries, *due = NULL, *c;
	uint64_t now = tw_now_ms();

	while ((c = *pp)) {
		if (c->retry_at_ms <= now) {
			*pp = c->retry_next;
			c->retry_next = due;
			due = c;
		} else {
			pp = &c->retry_next;
		}
	}
	if (!p->retries)
		uv_timer_stop(t);
	while ((c = due)) {
		due = c->retry_next;
		if (trunc_send(p, c) < 0) {
			struct fanout *f = c->f;

			f->status = -EIO;
			free(c);
			fanout_done(f);
		}
	}
}

/* Where a failed TRUNCATE failed, for the log: "iod P" (the primary we
 * sent it to), or "iod T (twin of iod P)" when the primary's error reply
 * names its twin, iod `at` (FORMAT.md §1; 0: none named). */
static const char *trunc_where(const struct call *c, uint32_t at, char *buf,
			       size_t len)
{
	if (at && at != c->iod_id)
		snprintf(buf, len, "iod %u (twin of iod %u)", at, c->iod_id);
	else if (c->iod_id)
		snprintf(buf, len, "iod %u", c->iod_id);
	else
		snprintf(buf, len, "no iod");
	return buf;
}

static void on_truncate(int status, struct wire_msg *reply, void *arg)
{
	struct call *c = arg;
	struct fanout *f = c->f;
	struct mgr_iodpool *p = f->pool;
	uint32_t failed_iod = wire_failed_iod(reply);
	char at[64];

	if (reply && status < 0) {
		wire_msg_free(reply);
		reply = NULL;
	}
	report_failed(p, c, status);
	if (status < 0 && failover_err(status) && c->tries < TRUNC_TRIES &&
	    !p->closing) {
		tw_log_rl(TW_LOG_INFO, "mgrd: truncate ino %llu column %u: "
			  "%s: %s; retrying at the column's primary of the "
			  "next map", (unsigned long long)f->ino, c->index,
			  trunc_where(c, failed_iod, at, sizeof(at)),
			  strerror(-status));
		/* A refused or reset connection is demoted at once; a
		 * timeout or a failed forward takes mgrd's probe (rt/2). */
		c->retry_at_ms = tw_now_ms() +
			(status == -ECONNREFUSED || status == -ECONNRESET ||
			 status == -ESTALE
			 ? 100u : TW_MAX(p->timeout_ms / 2, 1u) + 100u);
		c->retry_next = p->retries;
		p->retries = c;
		if (!uv_is_active((uv_handle_t *)&p->retry_timer))
			uv_timer_start(&p->retry_timer, on_retry_timer, 50, 50);
		return;
	}
	if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "mgrd: truncate ino %llu column %u: "
			  "%s: %s", (unsigned long long)f->ino, c->index,
			  trunc_where(c, failed_iod, at, sizeof(at)),
			  strerror(-status));
		f->status = -EIO;
	} else {
		const Twinfs__WriteReply *wr =
			(const Twinfs__WriteReply *)reply->body;

		f->per_col[c->index] = wr->blocks;
	}
	if (reply)
		wire_msg_free(reply);
	free(c);
	fanout_done(f);
}

/* Send (again) one column's TRUNCATE to its primary now.  0: on_truncate
 * will run; -errno: it will not. */
static int trunc_send(struct mgr_iodpool *p, struct call *c)
{
	struct wire_peer *peer = call_primary(p, c);
	Twinfs__Truncate t = TWINFS__TRUNCATE__INIT;

	if (!peer)
		return -EIO;
	c->tries++;
	t.ino = c->f->ino;
	t.column = c->index;
	t.size = c->sub_size;
	t.trunc_gen = c->gen;
	t.epoch = p->map->epoch;
	return wire_call(peer, TWINFS__MSG_TYPE__MSG_TRUNCATE, &t.base, NULL, 0,
			 p->timeout_ms, on_truncate, c);
}

/* One call per column of (ino, l), each set up (layout, subfile size of a
 * file of `size` bytes, gen) and sent by `send` to the column's primary;
 * cb once all answered.  0, or -errno when nothing was sent (cb never
 * runs): a column without a reachable primary sends nothing at all. */
static int cols_fanout(struct mgr_iodpool *p, uint64_t ino,
		       const struct r0_layout *l, uint64_t size, uint64_t gen,
		       int (*send)(struct mgr_iodpool *, struct call *),
		       mgr_pool_cols_cb cb, void *arg)
{
	struct fanout *f;
	int rc = 0;

	if (l->stripe_count == 0 || l->stripe_count > R0_MAX_STRIPE_COUNT)
		return -EINVAL;
	for (uint32_t k = 0; k < l->stripe_count; k++)
		if (!peer_of(p, mgr_map_primary(p->map, l, ino, k)))
			return -EIO;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->pool = p;
	f->cols_cb = cb;
	f->arg = arg;
	f->ino = ino;
	f->n_cols = l->stripe_count;
	f->pending = 1;  /* held until every call is sent */
	for (uint32_t k = 0; k < l->stripe_count; k++) {
		struct call *c = calloc(1, sizeof(*c));

		if (!c) {
			f->status = -ENOMEM;
			break;
		}
		c->f = f;
		c->index = k;
		c->layout = *l;
		c->sub_size = r0_subfile_size(l, k, size);
		c->gen = gen;
		f->pending++;
		rc = send(p, c);
		if (rc < 0) {
			f->pending--;
			free(c);
			f->status = -EIO;
			break;
		}
	}
	/* From here the callback runs exactly once (maybe with an error). */
	f->pending--;
	if (f->pending == 0) {
		/* Nothing was sent at all: the callback must not run. */
		free(f);
		return rc < 0 ? rc : -ENOMEM;
	}
	return 0;
}

int mgr_pool_truncate(struct mgr_iodpool *p, uint64_t ino,
		      const struct r0_layout *l, uint64_t size, uint64_t gen,
		      mgr_pool_cols_cb cb, void *arg)
{
	return cols_fanout(p, ino, l, size, gen, trunc_send, cb, arg);
}

/* -------------------------------------------------------- subfile sizes */

static void on_subsize(int status, struct wire_msg *reply, void *arg)
{
	struct call *c = arg;
	struct fanout *f = c->f;
	struct mgr_iodpool *p = f->pool;

	if (status == 0) {
		const Twinfs__ReadReply *rr =
			(const Twinfs__ReadReply *)reply->body;

		f->per_col[c->index] = rr->sub_size;
	} else {
		/* The caller tries again later, in the next map. */
		report_failed(p, c, status);
		if (f->status == 0)
			f->status = status;
	}
	if (reply)
		wire_msg_free(reply);
	free(c);
	fanout_done(f);
}

/* One column's READ of 0 bytes at its primary.  0: on_subsize will run. */
static int subsize_send(struct mgr_iodpool *p, struct call *c)
{
	struct wire_peer *peer = call_primary(p, c);
	Twinfs__Read r = TWINFS__READ__INIT;

	if (!peer)
		return -EIO;
	r.ino = c->f->ino;
	r.column = c->index;
	r.epoch = p->map->epoch;
	return wire_call(peer, TWINFS__MSG_TYPE__MSG_READ, &r.base, NULL, 0,
			 p->timeout_ms, on_subsize, c);
}

int mgr_pool_subsizes(struct mgr_iodpool *p, uint64_t ino,
		      const struct r0_layout *l, mgr_pool_cols_cb cb,
		      void *arg)
{
	return cols_fanout(p, ino, l, 0, 0, subsize_send, cb, arg);
}

/* ---------------------------------------------------------------- fsync */

static void on_simple(int status, struct wire_msg *reply, void *arg)
{
	struct fanout *f = arg;

	if (status < 0)
		f->status = -EIO;
	if (reply)
		wire_msg_free(reply);
	fanout_done(f);
}

int mgr_pool_sync(struct mgr_iodpool *p, mgr_pool_cb cb, void *arg)
{
	struct fanout *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->pool = p;
	f->cb = cb;
	f->arg = arg;
	f->pending = 1;
	for (uint32_t i = 0; i < p->map->n_iods; i++) {
		Twinfs__Fsync fs = TWINFS__FSYNC__INIT;

		/* Every iod that takes writes, resyncing ones included:
		 * they hold forwarded writes too. */
		if (!iod_writable(&p->map->iods[i]) || !p->peers[i])
			continue;
		fs.epoch = p->map->epoch;
		f->pending++;
		if (wire_call(p->peers[i], TWINFS__MSG_TYPE__MSG_FSYNC,
			      &fs.base, NULL, 0, p->timeout_ms, on_simple,
			      f) < 0) {
			f->pending--;
			f->status = -EIO;
		}
	}
	if (f->pending == 1) {
		/* No iod to ask: answer at once. */
		int st = f->status;

		free(f);
		cb(st, arg);
		return 1;
	}
	f->pending--;
	return 0;
}

/* ---------------------------------------------------------------- fence */

_Static_assert(MGR_FENCE_MAX == WIRE_FENCE_MAX, "one fence list limit");

struct fence_call {
	struct mgr_iodpool *p;
	uint32_t index;           /* iod id - 1 */
	uint64_t gen;
};

static void on_fence(int status, struct wire_msg *reply, void *arg)
{
	struct fence_call *fc = arg;
	struct mgr_iodpool *p = fc->p;

	if (reply)
		wire_msg_free(reply);
	if (!p->closing) {
		if (p->fence_out[fc->index] == fc->gen)
			p->fence_out[fc->index] = 0;
		if (status == 0 && fc->gen > p->fence_taken[fc->index]) {
			p->fence_taken[fc->index] = fc->gen;
			if (p->on_fenced)
				p->on_fenced(p->fenced_arg);
		}
	}
	free(fc);
}

void mgr_pool_fence(struct mgr_iodpool *p, uint64_t gen, const uint64_t *ids,
		    uint32_t n, void (*on_fenced)(void *arg), void *arg)
{
	Twinfs__Fence f = TWINFS__FENCE__INIT;

	p->on_fenced = on_fenced;
	p->fenced_arg = arg;
	f.gen = gen;
	f.n_sessions = n;
	f.sessions = (uint64_t *)ids;
	for (uint32_t i = 0; i < p->n_peers; i++) {
		struct fence_call *fc;

		if (!p->peers[i] || p->fence_taken[i] >= gen ||
		    p->fence_out[i] >= gen)
			continue;
		fc = malloc(sizeof(*fc));
		if (!fc)
			return;          /* the next sweep */
		*fc = (struct fence_call){ .p = p, .index = i, .gen = gen };
		if (wire_call(p->peers[i], TWINFS__MSG_TYPE__MSG_FENCE,
			      &f.base, NULL, 0, p->timeout_ms, on_fence,
			      fc) < 0) {
			free(fc);
			continue;
		}
		p->fence_out[i] = gen;
	}
}

bool mgr_pool_fenced(const struct mgr_iodpool *p, uint64_t gen)
{
	for (uint32_t i = 0; i < p->map->n_iods; i++) {
		const struct mgr_map_iod *mi = &p->map->iods[i];

		if (mgr_map_readable(mi) && mi->id >= 1 &&
		    mi->id <= p->n_peers && p->fence_taken[mi->id - 1] < gen)
			return false;
	}
	return true;
}

/* --------------------------------------------------------------- statfs */

static void on_statfs(int status, struct wire_msg *reply, void *arg)
{
	struct call *c = arg;
	struct fanout *f = c->f;

	if (status == 0) {
		const Twinfs__StatfsReply *r =
			(const Twinfs__StatfsReply *)reply->body;
		uint64_t bs = r->bsize ? r->bsize : 4096;

		/* Normalise to 4 KiB blocks. */
		f->iod[c->index].answered = true;
		f->iod[c->index].sf.blocks = r->blocks * bs / 4096;
		f->iod[c->index].sf.bfree = r->bfree * bs / 4096;
		f->iod[c->index].sf.bavail = r->bavail * bs / 4096;
	}
	if (reply)
		wire_msg_free(reply);
	free(c);
	fanout_done(f);
}

int mgr_pool_statfs(struct mgr_iodpool *p, mgr_pool_statfs_cb cb, void *arg)
{
	struct fanout *f;

	if (p->sf_valid && tw_now_ms() - p->sf_ms < STATFS_CACHE_MS) {
		cb(0, &p->sf, arg);
		return 1;  /* answered synchronously */
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->pool = p;
	f->statfs_cb = cb;
	f->arg = arg;
	f->pending = 1;
	for (uint32_t i = 0; i < p->map->n_iods; i++) {
		Twinfs__Empty e = TWINFS__EMPTY__INIT;
		struct call *c;

		if ((p->map->iods[i].state != MGR_IOD_UP &&
		     p->map->iods[i].state != MGR_IOD_SUSPECT) || !p->peers[i])
			continue;
		c = calloc(1, sizeof(*c));
		if (!c)
			break;
		c->f = f;
		c->index = i;
		f->pending++;
		if (wire_call(p->peers[i], TWINFS__MSG_TYPE__MSG_IOD_STATFS,
			      &e.base, NULL, 0, p->timeout_ms, on_statfs,
			      c) < 0) {
			f->pending--;
			free(c);
		}
	}
	if (f->pending == 1) {
		struct mgr_statfs none = { .bsize = 4096 };

		free(f);
		cb(p->sf_valid ? 0 : -EIO, p->sf_valid ? &p->sf : &none, arg);
		return 1;
	}
	f->pending--;
	return 0;
}

/* ------------------------------------------------------- pending deletes */

static void on_delete(int status, struct wire_msg *reply, void *arg)
{
	struct call *c = arg;
	struct fanout *f = c->f;

	if (status < 0)
		f->status = status;
	if (reply)
		wire_msg_free(reply);
	free(c);
	fanout_done(f);
}

static void on_idle(uv_timer_t *t);

/* A pending delete finished (all columns answered). */
static void pdel_done(int status, void *arg)
{
	struct fanout *f = arg;   /* freed by fanout_done after this */
	struct mgr_iodpool *p = f->pool;
	struct mgr_pdel *pd;

	p->pdel_busy--;
	if (p->closing)
		return;
	pd = tw_hmap_get(&p->ns->pdel, f->ino);
	if (!pd)
		return;
	pd->busy = false;
	if (status == 0) {
		p->on_pdel_done(pd->ino, p->arg);  /* journals, frees pd */
		/* The next ones, from the loop: a delete that completes
		 * synchronously must not recurse through the list. */
		if (!uv_is_active((uv_handle_t *)&p->idle_timer))
			uv_timer_start(&p->idle_timer, on_idle, 0, 0);
		return;
	}
	pd->attempts++;
	{
		uint64_t backoff = 1000ull << TW_MIN(pd->attempts, 6u);

		pd->next_try_ms = tw_now_ms() + TW_MIN(backoff,
						       PDEL_BACKOFF_MAX);
		p->due_ms = TW_MIN(p->due_ms, pd->next_try_ms);
	}
	tw_log_rl(TW_LOG_WARN, "mgrd: deleting subfiles of ino %llu failed "
		  "(%s, attempt %u); retrying", (unsigned long long)pd->ino,
		  strerror(-status), pd->attempts);
}

static void pdel_start(struct mgr_iodpool *p, struct mgr_pdel *pd)
{
	const struct r0_layout *l = &pd->layout;
	struct fanout *f;

	/* All primaries must be up: a down twin group gets it later. */
	for (uint32_t k = 0; k < l->stripe_count; k++)
		if (!peer_of(p, mgr_map_primary(p->map, l, pd->ino, k))) {
			pd->next_try_ms = tw_now_ms() + PDEL_WAIT_MS;
			p->due_ms = TW_MIN(p->due_ms, pd->next_try_ms);
			return;
		}
	f = calloc(1, sizeof(*f));
	if (!f) {
		p->due_ms = 0;   /* still due: the next tick tries again */
		return;
	}
	f->pool = p;
	f->cb = pdel_done;
	f->arg = f;
	f->ino = pd->ino;
	f->pending = 1;
	pd->busy = true;
	p->pdel_busy++;
	for (uint32_t k = 0; k < l->stripe_count; k++) {
		struct mgr_map_iod *mi = mgr_map_primary(p->map, l, pd->ino, k);
		Twinfs__Delete d = TWINFS__DELETE__INIT;
		uint32_t col = k;
		struct call *c = calloc(1, sizeof(*c));

		if (!c) {
			f->status = -ENOMEM;
			break;
		}
		c->f = f;
		c->index = k;
		d.ino = pd->ino;
		d.n_columns = 1;
		d.columns = &col;
		d.epoch = p->map->epoch;
		f->pending++;
		if (wire_call(peer_of(p, mi), TWINFS__MSG_TYPE__MSG_DELETE,
			      &d.base, NULL, 0, p->timeout_ms, on_delete,
			      c) < 0) {
			f->pending--;
			free(c);
			f->status = -EIO;
			break;
		}
	}
	/* Drop the hold: completes now if nothing was sent. */
	fanout_done(f);
}

/* Start every pending delete that is due, up to PDEL_MAX_BUSY in flight,
 * and note when the next of the others will be. */
static void pdel_run(struct mgr_iodpool *p)
{
	uint64_t now = tw_now_ms(), k;
	void *v;

	if (now < p->due_ms)
		return;
	p->due_ms = UINT64_MAX;   /* lowered by every wait seen or set */
	for (size_t it = 0; tw_hmap_next(&p->ns->pdel, &it, &k, &v);) {
		struct mgr_pdel *pd = v;

		if (p->pdel_busy >= PDEL_MAX_BUSY) {
			p->due_ms = 0;   /* not all seen: look again */
			break;
		}
		if (pd->busy)
			continue;
		if (pd->next_try_ms > now) {
			p->due_ms = TW_MIN(p->due_ms, pd->next_try_ms);
			continue;
		}
		/* pdel_start may complete synchronously and delete pd (the
		 * map allows deleting the current key while iterating). */
		pdel_start(p, pd);
	}
}

/* Run the deletes now if mgrd is idle (or the backlog long), else look
 * again when the client requests may have stopped. */
static void kick(struct mgr_iodpool *p)
{
	uint64_t now = tw_now_ms();
	uint64_t quiet = now - TW_MIN(p->demand_ms, now);

	if (p->closing || p->ns->pdel.count == 0)
		return;
	if (quiet < PDEL_IDLE_MS && p->ns->pdel.count < PDEL_BACKLOG) {
		uv_timer_start(&p->idle_timer, on_idle, PDEL_IDLE_MS - quiet, 0);
		return;
	}
	pdel_run(p);
}

static void on_idle(uv_timer_t *t)
{
	kick(t->data);
}

void mgr_pool_kick(struct mgr_iodpool *p)
{
	p->due_ms = 0;   /* a new delete, or a group came back */
	kick(p);
}

void mgr_pool_demand(struct mgr_iodpool *p)
{
	p->demand_ms = tw_now_ms();
}

static void on_tick(uv_timer_t *t)
{
	struct mgr_iodpool *p = t->data;

	if (!p->closing && p->ns->pdel.count)
		pdel_run(p);   /* progress even under constant demand */
}

struct wire_peer *mgr_pool_peer(struct mgr_iodpool *p, uint32_t id)
{
	return id >= 1 && id <= p->n_peers ? p->peers[id - 1] : NULL;
}

/* ------------------------------------------------------------ lifecycle */

static void on_iod_connect(struct wire_peer *peer, int status,
			   const Twinfs__HelloReply *reply, void *arg)
{
	(void)arg;
	(void)reply;
	if (status < 0)
		tw_log_rl(TW_LOG_WARN, "mgrd: cannot reach iod at %s: %s",
			  wire_peer_name(peer), strerror(-status));
	else
		tw_debug("mgrd: connected to iod at %s", wire_peer_name(peer));
}

int mgr_pool_new(struct uv_loop_s *loop, const struct tw_conf *conf,
		 struct mgr_map *map, struct mgr_ns *ns, uint64_t incarnation,
		 mgr_pool_pdel_cb on_pdel_done, mgr_pool_failed_cb on_iod_failed,
		 void *arg, struct mgr_iodpool **out)
{
	struct mgr_iodpool *p = calloc(1, sizeof(*p));
	Twinfs__Hello hello;
	int rc;

	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->conf = conf;
	p->map = map;
	p->ns = ns;
	p->on_pdel_done = on_pdel_done;
	p->on_iod_failed = on_iod_failed;
	p->arg = arg;
	p->incarnation = incarnation;
	p->timeout_ms = tw_ms_or(conf->request_timeout_ms,
				 TW_REQUEST_TIMEOUT_MS);
	wire_hello_init(&hello, conf->cluster_name, TWINFS__ROLE__ROLE_MGRD,
			incarnation);
	hello.mgrd_term = mgr_elect_term();   /* iods refuse older terms */
	for (int i = 0; i < conf->n_iods; i++) {
		struct wire_peer_opts o = {
			.host = conf->iods[i].host,
			.port = conf->iods[i].port,
			.hello = &hello,
			.on_connect = on_iod_connect,
			.arg = p,
			.secret = conf->secret,
			.channel = conf->channel,
		};

		rc = wire_peer_new(loop, &o, &p->peers[i]);
		if (rc < 0) {
			tw_err("mgrd: iod %d (%s:%d): %s", conf->iods[i].id,
			       conf->iods[i].host, conf->iods[i].port,
			       strerror(-rc));
			p->n_peers = (uint32_t)i;
			mgr_pool_free(p);
			return rc;
		}
	}
	p->n_peers = (uint32_t)conf->n_iods;
	uv_timer_init(loop, &p->retry_timer);
	p->retry_timer.data = p;
	uv_timer_init(loop, &p->idle_timer);
	p->idle_timer.data = p;
	uv_timer_init(loop, &p->timer);
	p->timer_init = true;
	p->timer.data = p;
	uv_timer_start(&p->timer, on_tick, PDEL_TICK_MS, PDEL_TICK_MS);
	*out = p;
	return 0;
}

/* The election's term in our HELLO to the iods (proto/FORMAT.md
 * "Election": they refuse an older one), for the next connections. */
void mgr_pool_set_term(struct mgr_iodpool *p, uint64_t term)
{
	Twinfs__Hello hello;

	wire_hello_init(&hello, p->conf->cluster_name,
			TWINFS__ROLE__ROLE_MGRD, p->incarnation);
	hello.mgrd_term = term;
	for (uint32_t i = 0; i < p->n_peers; i++)
		if (wire_peer_set_hello(p->peers[i], &hello) < 0)
			tw_warn("mgrd: iod %" PRIu32 ": HELLO of term %" PRIu64
				" not set", i + 1, term);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct mgr_iodpool *p = h->data;

	if (--p->closing_handles == 0)
		free(p);
}

void mgr_pool_free(struct mgr_iodpool *p)
{
	struct call *c;

	p->closing = true;
	/* Truncates waiting to retry end now (their fanouts complete). */
	while ((c = p->retries)) {
		p->retries = c->retry_next;
		c->f->status = -EIO;
		fanout_done(c->f);
		free(c);
	}
	for (uint32_t i = 0; i < p->n_peers; i++)
		if (p->peers[i])
			wire_peer_free(p->peers[i]);
	if (p->timer_init) {
		p->closing_handles = 3;
		uv_timer_stop(&p->timer);
		uv_timer_stop(&p->retry_timer);
		uv_timer_stop(&p->idle_timer);
		uv_close((uv_handle_t *)&p->timer, on_timer_closed);
		uv_close((uv_handle_t *)&p->retry_timer, on_timer_closed);
		uv_close((uv_handle_t *)&p->idle_timer, on_timer_closed);
	} else {
		free(p);
	}
}
