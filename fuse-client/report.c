/* report.c - a writer's size reports (SIZE_REPORT): the dirty list of
 * open files with unreported writes, the report sent on flush, fsync,
 * release and every FC_REPORT_INTERVAL_MS while dirty (proto/FORMAT.md
 * "Size, truncate, data_version"), and the final flush of every dirty file
 * at unmount, and the reports a SETATTR carries inside it
 * (fc_report_embed), and the writes an explicit mtime set overtakes
 * (fc_times_*).  Split out of ops_data.c, which calls it; everything here
 * runs on the loop thread.
 *
 * Lifetimes: struct fc_file is freed when its last reference goes (the
 * open's, or a write or report in flight: fc_file_put).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "report.h"

static void dirty_remove(struct fc_client *cl, struct fc_file *f)
{
	if (!f->on_dirty_list)
		return;
	if (f->dirty_prev)
		f->dirty_prev->dirty_next = f->dirty_next;
	else
		cl->dirty_head = f->dirty_next;
	if (f->dirty_next)
		f->dirty_next->dirty_prev = f->dirty_prev;
	f->on_dirty_list = false;
	f->dirty_prev = f->dirty_next = NULL;
}

static void file_free(struct fc_client *cl, struct fc_file *f)
{
	dirty_remove(cl, f);
	if (f->all_prev)
		f->all_prev->all_next = f->all_next;
	else if (cl->files == f)
		cl->files = f->all_next;
	if (f->all_next)
		f->all_next->all_prev = f->all_prev;
	free(f);
}

void fc_file_put(struct fc_client *cl, struct fc_file *f)
{
	if (--f->refs > 0)
		return;
	file_free(cl, f);
}

void fc_files_free(struct fc_client *cl)
{
	while (cl->files)
		file_free(cl, cl->files);
}

/* ------------------------------------------------------- size reports */

struct fc_report {
	struct fc_client *cl;
	struct fc_file *f;
	struct fc_mgr_call mc;
	Twinfs__SizeReport sr;
	Twinfs__ColumnBlocks cb[R0_MAX_STRIPE_COUNT];
	Twinfs__ColumnBlocks *cbp[R0_MAX_STRIPE_COUNT];
	uint64_t gen;
	uint64_t mtime_gen;          /* f->mtime_gen when it was made */
	bool from_timer;
	void (*done)(void *arg, int status);
	void *arg;
};

struct fc_report_barrier {
	struct fc_report_barrier *next;
	uint64_t ino;
	void (*done)(void *arg, int status);
	void *arg;
};

/* Add delta to ino's count of reports in flight; returns the new count. */
static uintptr_t inflight_add(struct fc_client *cl, uint64_t ino, int delta)
{
	uintptr_t n = (uintptr_t)tw_hmap_get(&cl->reports_inflight, ino);

	n += (uintptr_t)(intptr_t)delta;
	if (n == 0)
		tw_hmap_del(&cl->reports_inflight, ino);
	else if (tw_hmap_put(&cl->reports_inflight, ino, (void *)n) < 0)
		tw_log_rl(TW_LOG_ERR, "out of memory tracking size reports");
	return n;
}

/* ino has no report in flight any more: release the SETATTRs waiting. */
static void barriers_fire(struct fc_client *cl, uint64_t ino)
{
	struct fc_report_barrier **pp = &cl->barriers, *b, *ready = NULL;

	while ((b = *pp)) {
		if (b->ino == ino) {
			*pp = b->next;
			b->next = ready;
			ready = b;
		} else {
			pp = &b->next;
		}
	}
	while ((b = ready)) {
		ready = b->next;
		b->done(b->arg, 0);
		free(b);
	}
}

static bool file_dirty(const struct fc_file *f)
{
	return f->write_gen != f->reported_gen;
}

/* Whether f has something to report: writes, or a read's atime. */
static bool has_news(const struct fc_file *f)
{
	return file_dirty(f) || f->atime_pending;
}

bool fc_atime_due(struct fc_client *cl, const struct fc_attr *a, int flags)
{
	struct tw_ts now;

	if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_NOATIME) ||
	    cl->opts.atime == FC_ATIME_NOATIME)
		return false;
	if (cl->opts.atime == FC_ATIME_STRICT)
		return true;
	tw_realtime(&now.sec, &now.nsec);
	return tw_relatime_due((struct tw_ts){ a->atime_sec, a->atime_nsec },
			       (struct tw_ts){ a->mtime_sec, a->mtime_nsec },
			       (struct tw_ts){ a->ctime_sec, a->ctime_nsec },
			       now);
}

void fc_file_accessed(struct fc_client *cl, struct fc_file *f)
{
	struct fc_attr a = { 0 };   /* not cached: due unless noatime */

	/* A read mgrd would not count costs no report (the attributes are
	 * the open's or newer: close-to-open). */
	if (f->atime_pending)
		return;
	fc_inode_get(cl, f->ino, &a, NULL);
	if (!fc_atime_due(cl, &a, f->flags))
		return;
	f->atime_pending = true;
	tw_realtime(&f->atime_sec, &f->atime_nsec);
}

/* The end of report r, sent alone (report_done) or inside a SETATTR
 * (fc_report_embed_done): the file is clean up to r->gen if it landed. */
static void report_end(struct fc_report *r, int status, bool log)
{
	struct fc_client *cl = r->cl;
	struct fc_file *f = r->f;

	if (f->embedded == r)
		f->embedded = NULL;
	if (status == 0) {
		uint64_t upto = r->gen;

		/* A report that kept the times is no report of writes whose
		 * time may still have to become mtime: those of a SETATTR of
		 * mtime still unanswered (it may fail), or of one that failed
		 * since (fc_times_done).  The next report carries them. */
		if (r->sr.keep_times &&
		    (f->mtime_gen != r->mtime_gen ||
		     fc_inode_times_pending(cl, f->ino)))
			upto = f->reported_gen;
		if (upto - f->reported_gen < (UINT64_C(1) << 63))
			f->reported_gen = upto;
		if (!file_dirty(f))
			dirty_remove(cl, f);
	} else {
		/* The next report carries the read's atime again. */
		if (r->sr.accessed && !f->atime_pending) {
			f->atime_pending = true;
			f->atime_sec = r->sr.atime_sec;
			f->atime_nsec = r->sr.atime_nsec;
		}
		/* An interrupted fsync's: the timer reports again. */
		if (log && status != -EINTR &&
		    (status != -EIO || !cl->stopping)) {
			char path[FC_PATH_LOG];

			tw_log_rl(TW_LOG_WARN, "size report of %s to mgrd: %s",
				  fc_ino_path(cl, f->ino, path, sizeof(path)),
				  strerror(-status));
		}
	}
	if (r->from_timer)
		f->timer_report = false;
	/* A failed atime-only report fails no flush or fsync. */
	if (r->done)
		r->done(r->arg, r->sr.wrote ? status : 0);
	if (inflight_add(cl, f->ino, -1) == 0)
		barriers_fire(cl, f->ino);
	fc_file_put(cl, f);
	free(r);
}

static void report_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct fc_report *r = mc->arg;
	struct fc_attr a;

	if (status == 0 && fc_entry_from_reply(r->cl, reply, &a) == 0)
		fc_inode_update(r->cl, &a, NULL);
	if (reply)
		wire_msg_free(reply);
	report_end(r, status, true);
}

/* A report of f's writes and reads so far, counted in flight for f->ino;
 * NULL without memory. */
static struct fc_report *report_new(struct fc_client *cl, struct fc_file *f,
				    bool from_timer,
				    void (*done)(void *, int), void *arg)
{
	struct fc_report *r = calloc(1, sizeof(*r));
	uint32_t k;
	size_t n = 0;

	if (!r)
		return NULL;
	r->cl = cl;
	r->f = f;
	r->gen = f->write_gen;
	r->from_timer = from_timer;
	r->done = done;
	r->arg = arg;
	f->refs++;
	inflight_add(cl, f->ino, 1);
	if (from_timer)
		f->timer_report = true;
	twinfs__size_report__init(&r->sr);
	r->sr.ino = f->ino;
	r->sr.size = f->end;
	r->sr.trunc_gen = f->end_gen;
	r->sr.mtime_sec = f->mtime_sec;
	r->sr.mtime_nsec = f->mtime_nsec;
	r->sr.wrote = file_dirty(f);
	/* Every write since the last report came before an explicit mtime
	 * set, which may be at mgrd already (fc_times_set). */
	r->sr.keep_times = r->sr.wrote && f->mtime_gen <= f->reported_gen;
	r->mtime_gen = f->mtime_gen;
	if (f->atime_pending) {
		/* Best effort: a lost atime is not worth a retry. */
		f->atime_pending = false;
		r->sr.accessed = true;
		r->sr.atime_sec = f->atime_sec;
		r->sr.atime_nsec = f->atime_nsec;
		r->sr.strictatime = cl->opts.atime == FC_ATIME_STRICT;
	}
	for (k = 0; k < R0_MAX_STRIPE_COUNT; k++) {
		if (!(f->cols_seen & (1u << k)))
			continue;
		twinfs__column_blocks__init(&r->cb[n]);
		r->cb[n].column = k;
		r->cb[n].blocks = f->col_blocks[k];
		r->cbp[n] = &r->cb[n];
		n++;
	}
	r->sr.n_blocks = n;
	r->sr.blocks = n ? r->cbp : NULL;
	return r;
}

/* Run done(arg, 0) once ino has no report in flight; false without
 * memory. */
static bool barrier_add(struct fc_client *cl, uint64_t ino,
			void (*done)(void *arg, int status), void *arg)
{
	struct fc_report_barrier *b = calloc(1, sizeof(*b));

	if (!b)
		return false;
	b->ino = ino;
	b->done = done;
	b->arg = arg;
	b->next = cl->barriers;
	cl->barriers = b;
	return true;
}

/* A flush, fsync or release whose report rides in a SETATTR in flight. */
struct embed_wait {
	struct fc_client *cl;
	struct fc_file *f;
	void (*done)(void *arg, int status);
	void *arg;
	struct fc_op *op;
};

static void embed_wait_fire(void *arg, int status)
{
	struct embed_wait *w = arg;
	int err;

	(void)status;
	/* If the SETATTR failed, the file is still dirty: report it now. */
	if (!fc_report_start(w->cl, w->f, false, w->done, w->arg, w->op,
			     &err))
		w->done(w->arg, err);
	fc_file_put(w->cl, w->f);
	free(w);
}

bool fc_report_start(struct fc_client *cl, struct fc_file *f,
			 bool from_timer, void (*done)(void *, int),
			 void *arg, struct fc_op *op, int *err)
{
	struct fc_report *r;

	*err = 0;
	if (!has_news(f))
		return false;
	if (f->embedded && f->embedded->gen == f->write_gen) {
		/* These writes are reported inside a SETATTR in flight.  A
		 * second report of them (wrote, the mtime of the last write)
		 * could reach mgrd after it, a retransmission, and undo its
		 * mtime: wait until the inode has no report in flight, that
		 * SETATTR's included, then look again (a read's atime goes
		 * out then). */
		struct embed_wait *w;

		if (from_timer || !done)
			return false;
		w = calloc(1, sizeof(*w));
		if (!w || !barrier_add(cl, f->ino, embed_wait_fire, w)) {
			free(w);
			*err = -ENOMEM;
			return false;
		}
		*w = (struct embed_wait){ cl, f, done, arg, op };
		f->refs++;
		return true;
	}
	r = report_new(cl, f, from_timer, done, arg);
	if (!r) {
		*err = -ENOMEM;
		return false;
	}
	fc_mgr_send(cl, &r->mc, TWINFS__MSG_TYPE__MSG_SIZE_REPORT, &r->sr.base,
		    &r->sr.ctx, op, 0, report_done, r);
	return true;
}

bool fc_report_embed(struct fc_client *cl, uint64_t ino,
		     struct fc_report_set *set)
{
	struct fc_file *f;
	size_t n = 0;

	set->n = 0;
	/* Reports already on their way may be retransmitted after this
	 * SETATTR: the caller waits for them (fc_report_ino) instead. */
	if (tw_hmap_get(&cl->reports_inflight, ino))
		return false;
	for (f = cl->dirty_head; f; f = f->dirty_next)
		if (f->ino == ino && has_news(f))
			n++;
	if (n > FC_REPORT_SET_MAX)
		return false;
	for (f = cl->dirty_head; f; f = f->dirty_next) {
		struct fc_report *r;

		if (f->ino != ino || !has_news(f))
			continue;
		r = report_new(cl, f, false, NULL, NULL);
		if (!r) {
			fc_report_embed_done(cl, set, -ENOMEM);
			return false;
		}
		f->embedded = r;
		set->r[set->n] = r;
		set->sr[set->n] = &r->sr;
		set->n++;
	}
	return true;
}

void fc_report_embed_done(struct fc_client *cl, struct fc_report_set *set,
			  int status)
{
	size_t i, n = set->n;

	(void)cl;
	set->n = 0;
	/* Unlogged: the SETATTR's caller gets the error, and the files stay
	 * dirty, to be reported again. */
	for (i = 0; i < n; i++)
		report_end(set->r[i], status, false);
}

bool fc_report_ino(struct fc_client *cl, uint64_t ino,
		   void (*done)(void *arg, int status), void *arg)
{
	struct fc_file *f, *next;
	int err;

	for (f = cl->dirty_head; f; f = next) {
		next = f->dirty_next;
		if (f->ino == ino)
			fc_report_start(cl, f, false, NULL, NULL, NULL, &err);
	}
	if (!tw_hmap_get(&cl->reports_inflight, ino))
		return false;
	/* Without memory, best effort: the SETATTR goes out now. */
	return barrier_add(cl, ino, done, arg);
}

/* ------------------------------------------------ explicit mtime sets */

/* An explicit mtime set (utimensat, futimens: a SETATTR of SA_MTIME) comes
 * after every write the application made before it, also those answered
 * early and still in flight.  Waiting for them to land before sending it
 * cost tar x one write's round trip per file.  Instead the SETATTR goes
 * out at once, and what came before it keeps its mtime and ctime:
 *   - writes that landed before it: their reports ride inside it, applied
 *     before it (fc_report_embed); from here on mtime_gen says none of
 *     them sets mtime any more, should a report of them be sent again;
 *   - writes still in flight: they took their place in the inode's order
 *     (fc_times_seq) before the SETATTR's seq, so when they land they do
 *     not become the file's mtime (fc_times_kept), and their reports say
 *     keep_times: mgrd counts their size and data_version only.
 * A write that takes its place after the SETATTR sets mtime as usual.  A
 * size change still waits for every earlier write (ops_meta.c).
 *
 * If the SETATTR fails, what it overtook sets mtime after all: the time of
 * the failure stands for the writes' (fc_times_done).  So that none of
 * them is lost to a report that kept the times, such a report leaves its
 * writes unreported while a SETATTR of the inode's mtime is unanswered
 * (report_end; the SETATTR's answer comes first, mgrd answering in order,
 * so this is rare), and the file stays on the dirty list. */
uint64_t fc_times_set(struct fc_client *cl, uint64_t ino)
{
	uint64_t seq = ++cl->times_seq;
	struct fc_file *f;

	fc_inode_times_start(cl, ino, seq);
	for (f = cl->dirty_head; f; f = f->dirty_next)
		if (f->ino == ino)
			f->mtime_gen = 0;
	return seq;
}

void fc_times_done(struct fc_client *cl, uint64_t ino, uint64_t seq,
		   int status)
{
	struct fc_file *f;
	int64_t sec;
	uint32_t nsec;

	if (!fc_inode_times_end(cl, ino, seq, status == 0))
		return;
	tw_realtime(&sec, &nsec);
	for (f = cl->dirty_head; f; f = f->dirty_next) {
		if (f->ino != ino || !file_dirty(f))
			continue;
		f->mtime_sec = sec;
		f->mtime_nsec = nsec;
		f->mtime_gen = f->write_gen;
	}
}

bool fc_times_kept(struct fc_client *cl, uint64_t ino, uint64_t seq)
{
	return fc_inode_times_seq(cl, ino) > seq;
}

static void report_timer_cb(uv_timer_t *t)
{
	struct fc_client *cl = t->data;
	struct fc_file *f, *next;
	int err;

	for (f = cl->dirty_head; f; f = next) {
		next = f->dirty_next;
		if (!f->timer_report)
			fc_report_start(cl, f, true, NULL, NULL, NULL, &err);
	}
	if (!cl->dirty_head) {
		uv_timer_stop(t);
		cl->report_timer_on = false;
	}
}

void fc_file_dirty(struct fc_client *cl, struct fc_file *f)
{
	if (!f->on_dirty_list) {
		f->dirty_prev = NULL;
		f->dirty_next = cl->dirty_head;
		if (cl->dirty_head)
			cl->dirty_head->dirty_prev = f;
		cl->dirty_head = f;
		f->on_dirty_list = true;
	}
	if (!cl->report_timer_on && !cl->stopping) {
		uv_timer_start(&cl->report_timer, report_timer_cb,
			       FC_REPORT_INTERVAL_MS, FC_REPORT_INTERVAL_MS);
		cl->report_timer_on = true;
	}
}

struct flush_all {
	int pending;
	void (*done)(void *arg);
	void *arg;
};

static void flush_all_one(void *arg, int status)
{
	struct flush_all *fa = arg;

	(void)status;
	if (--fa->pending == 0) {
		fa->done(fa->arg);
		free(fa);
	}
}

void fc_flush_all(struct fc_client *cl, void (*done)(void *arg), void *arg)
{
	struct flush_all *fa = calloc(1, sizeof(*fa));
	struct fc_file *f, *next;
	int err;

	if (!fa) {
		done(arg);
		return;
	}
	fa->done = done;
	fa->arg = arg;
	fa->pending = 1;
	for (f = cl->dirty_head; f; f = next) {
		next = f->dirty_next;
		/* Counted first: the report may end before it returns. */
		fa->pending++;
		if (!fc_report_start(cl, f, false, flush_all_one, fa, NULL,
				     &err))
			fa->pending--;
	}
	flush_all_one(fa, 0);
}

