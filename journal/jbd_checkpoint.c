/* jbd_checkpoint.c - moving synced transactions home and advancing the
 * log tail.
 *
 * A checkpoint takes the oldest run of SYNCED transactions (never a closed
 * but unsynced one: J7) and walks their items in log order: data blocks
 * are written home with io_uring (at most cp_max_inflight at once; a run of
 * JBD_DIRECT_MIN full blocks or more with O_DIRECT when the log is written
 * so: cp_dfd), records
 * (data=journal) are handed to ops.apply once every earlier home write has
 * completed, so home sees exactly the log order replay would produce (J10).
 * Then the objects are made durable, and only then the
 * superblock gets the new tail and is fdatasynced (linked), after which the
 * log blocks are free (J8) and the index entries of those transactions are
 * dropped (J14).  A crash anywhere in between leaves the old tail, so
 * replay simply applies the same transactions again (J15).
 *
 * Making home durable: with ops.home_fs_fd (and real I/O) one syncfs(2)
 * of the home file system, run on a short-lived helper thread so the
 * owner's event loop never waits for the disk; a checkpoint after a burst
 * of small files would otherwise fsync thousands of objects and their
 * directories on the loop, stalling every request for seconds (long
 * enough for the failover monitor to declare a live iod down).  The
 * same thread first runs ops.home_bg, the owner's blocking home work (the
 * iod's unlinks of deleted subfiles, each a synchronous wait for the disk
 * when it frees blocks).  The thread touches nothing but its fd, home_bg
 * and its result; it wakes the owner through the journal's eventfd.
 * Without home_fs_fd, or under the test I/O layer, ops.home_sync runs
 * synchronously.
 *
 * Starts when the log is half used, when a close waits for space, when a
 * synced cut has home space to give back (frees_due), and on
 * jbd_checkpoint / jbd_close.
 */
#include "jbd_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CP_ITEMS -> (CP_HOMESYNC ->) CP_SUPER -> cp_finish */
enum { CP_ITEMS = 1, CP_HOMESYNC, CP_SUPER };

#define CP_MAX_IOV 256          /* blocks per home writev */
/* O_DIRECT descriptors a checkpoint keeps open at most: each object already
 * holds one dup'd descriptor (cp_fd), and a checkpoint of many small files
 * must not run out of descriptors for those; past this, buffered. */
#define CP_MAX_DFDS 1024
/* A checkpoint that ran out of descriptors or memory waits this long
 * before it tries the same item again (cp_pause). */
#define CP_RETRY_MS 100

/* Home writes a checkpoint keeps in flight at most: three quarters of the
 * journal's max_inflight, so log writes (the requests clients wait for)
 * always find room on the ring and never queue behind home writes. */
static unsigned cp_max_inflight(const struct jbd *j)
{
	return TW_MAX(j->max_inflight - j->max_inflight / 4, 1u);
}

/* A home write in flight: blocks [lo, hi) of obj. */
struct cp_busy {
	const struct jbd_io *io;
	uint64_t obj, lo, hi;
};

struct jbd_cp {
	struct jbd_txn *first, *last;   /* inclusive, consecutive, SYNCED */
	struct jbd_txn *cur;
	size_t item;
	unsigned inflight;
	int state;
	struct tw_hmap fds;             /* obj + 1 -> dup'd fd + 1 */
	struct tw_hmap dfds;            /* obj + 1 -> O_DIRECT fd + 1, or -1
	                                 * when it cannot be opened (cp_dfd) */
	struct cp_busy *busy;           /* home writes in flight */
	unsigned n_busy;
	struct tw_hmap seen;            /* obj + 1 -> 1: objs without repeats */
	struct tw_hmap aside;           /* obj + 1 -> 1: set aside by the owner
	                                 * (jbd_ops.home_failed): its other
	                                 * items are skipped */
	uint64_t *objs;
	size_t n_objs, cap_objs;
	struct jbd_bgsync home;         /* CP_HOMESYNC */
	bool paused;                    /* out of descriptors or memory */
	uint64_t paused_ms;
	uint64_t new_tail, new_seq, freed;
	uint8_t sb[JBD_BLOCK_SIZE];
};

void jbd__cp_wait(struct jbd *j)
{
	if (j->cp != NULL)
		jbd__bgsync_wait(&j->cp->home);
}

void jbd__cp_fini(struct jbd *j)
{
	struct jbd_cp *cp = j->cp;
	if (cp == NULL)
		return;
	jbd__bgsync_wait(&cp->home);
	uint64_t key;
	void *val;
	for (size_t it = 0; tw_hmap_next(&cp->fds, &it, &key, &val);)
		close((int)((intptr_t)val - 1));
	tw_hmap_free(&cp->fds);
	for (size_t it = 0; tw_hmap_next(&cp->dfds, &it, &key, &val);)
		if ((intptr_t)val > 0)
			close((int)((intptr_t)val - 1));
	tw_hmap_free(&cp->dfds);
	free(cp->busy);
	tw_hmap_free(&cp->seen);
	tw_hmap_free(&cp->aside);
	free(cp->objs);
	free(cp);
	j->cp = NULL;
	j->cp_active = false;
}

static int cp_note_obj(struct jbd_cp *cp, uint64_t obj)
{
	if (tw_hmap_get(&cp->seen, obj + 1) != NULL)
		return 0;
	if (tw_hmap_put(&cp->seen, obj + 1, (void *)1) < 0)
		return -ENOMEM;
	if (cp->n_objs == cp->cap_objs) {
		size_t cap = cp->cap_objs ? cp->cap_objs * 2 : 16;
		uint64_t *n = realloc(cp->objs, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		cp->objs = n;
		cp->cap_objs = cap;
	}
	cp->objs[cp->n_objs++] = obj;
	return 0;
}

static int cp_fd(struct jbd *j, struct jbd_cp *cp, uint64_t obj, int *fd)
{
	void *v = tw_hmap_get(&cp->fds, obj + 1);
	if (v != NULL) {
		*fd = (int)((intptr_t)v - 1);
		return 0;
	}
	int rc = jbd__home_dup(j, obj, true, fd);
	if (rc < 0)
		return rc;
	rc = tw_hmap_put(&cp->fds, obj + 1, (void *)(intptr_t)(*fd + 1));
	if (rc < 0) {
		close(*fd);
		return rc;
	}
	rc = cp_note_obj(cp, obj);
	if (rc < 0) {
		/* Not cached either: a retry must note obj (home sync). */
		tw_hmap_del(&cp->fds, obj + 1);
		close(*fd);
	}
	return rc;
}

/* A record may replace the home object behind obj (a delete followed by a
 * re-creation): forget the fd this checkpoint holds for it, so later blocks
 * of obj go to the object the caller's home_fd names now. */
static void cp_forget_fd(struct jbd_cp *cp, uint64_t obj)
{
	void *v = tw_hmap_del(&cp->fds, obj + 1);

	if (v != NULL)
		close((int)((intptr_t)v - 1));
	v = tw_hmap_del(&cp->dfds, obj + 1);
	if (v != NULL && (intptr_t)v > 0)
		close((int)((intptr_t)v - 1));
}

/* The home object's fd (from cp_fd) opened again with O_DIRECT, or -1.
 * Runs of at least JBD_DIRECT_MIN full blocks go home through it when the
 * journal writes its log with O_DIRECT (same checks, jbd.c open_direct):
 * with both twins on one disk every byte is copied into the page cache of
 * its home file at checkpoint otherwise, the largest CPU cost left on the
 * write path.  (Such a block is then read from the disk, not from the page
 * cache, the first time after the checkpoint.)  A failed open is
 * remembered as "none". */
static int cp_dfd(struct jbd *j, struct jbd_cp *cp, uint64_t obj, int fd)
{
	if (!j->direct || !j->direct_home)
		return -1;
	intptr_t v = (intptr_t)tw_hmap_get(&cp->dfds, obj + 1);
	if (v != 0)
		return v > 0 ? (int)(v - 1) : -1;
	if (cp->dfds.count >= CP_MAX_DFDS)
		return -1;
	int d = jbd__reopen_direct(fd);
	if (tw_hmap_put(&cp->dfds, obj + 1,
			(void *)(d >= 0 ? (intptr_t)d + 1 : -1)) < 0) {
		if (d >= 0)
			close(d);
		return -1;
	}
	return d;
}

/* J18: ops.home_blocks for a run of data items, it[0..run), with each
 * block's own sum (J5), a stack's worth at a time. */
static int cp_home_blocks(struct jbd *j, const struct jbd_item *it,
			  const struct iovec *iov, size_t run)
{
	uint32_t sums[256];
	int rc = 0;

	for (size_t done = 0; rc == 0 && done < run;) {
		size_t k = TW_MIN(run - done, TW_ARRAY_SIZE(sums));

		for (size_t i = 0; i < k; i++)
			sums[i] = it[done + i].crc;
		rc = j->ops.home_blocks(j->ops.arg, it->obj, it->blk + done,
					iov + done, (int)k, sums);
		done += k;
	}
	return rc;
}

/* Does a home write in flight touch blocks [lo, hi) of obj? */
static bool cp_is_busy(const struct jbd_cp *cp, uint64_t obj, uint64_t lo,
		       uint64_t hi)
{
	for (unsigned i = 0; i < cp->n_busy; i++) {
		const struct cp_busy *b = &cp->busy[i];
		if (b->obj == obj && b->lo < hi && lo < b->hi)
			return true;
	}
	return false;
}

static void cp_unbusy(struct jbd_cp *cp, const struct jbd_io *io)
{
	for (unsigned i = 0; i < cp->n_busy; i++) {
		if (cp->busy[i].io == io) {
			cp->busy[i] = cp->busy[--cp->n_busy];
			return;
		}
	}
	assert(!"a home write not in the busy list");
}

static void cp_step(struct jbd *j);

static bool cp_is_aside(const struct jbd_cp *cp, uint64_t obj)
{
	return tw_hmap_get(&cp->aside, obj + 1) != NULL;
}

/* An item of obj failed with rc: true when obj is (now) set aside, so the
 * checkpoint goes on without it (jbd_ops.home_failed). */
/* Whether a home write of obj is in flight. */
static bool cp_obj_busy(const struct jbd_cp *cp, uint64_t obj)
{
	for (unsigned i = 0; i < cp->n_busy; i++)
		if (cp->busy[i].obj == obj)
			return true;
	return false;
}

/* Close the descriptors this checkpoint holds for objects without a write
 * in flight (cp_fd opens them again when needed); returns how many. */
static unsigned cp_release_fds(struct jbd_cp *cp)
{
	uint64_t keys[64];
	unsigned n, total = 0;

	do {
		uint64_t key;
		void *val;

		n = 0;
		for (size_t it = 0; n < TW_ARRAY_SIZE(keys) &&
		     tw_hmap_next(&cp->fds, &it, &key, &val);)
			if (!cp_obj_busy(cp, key - 1))
				keys[n++] = key;
		for (unsigned k = 0; k < n; k++)
			cp_forget_fd(cp, keys[k] - 1);
		total += n;
	} while (n == TW_ARRAY_SIZE(keys));
	return total;
}

/* The process, not the object nor the disk, is short of something: out
 * of descriptors (a daemon with many connections, many objects in one
 * checkpoint) or of memory.  Unlike jbd_obj_error, not the object's: it
 * is not set aside; unlike EIO, retrying helps, and aborting the journal
 * for it would stop every write for a passing shortage. */
static bool cp_resource_error(int rc)
{
	return rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM;
}

/* Stop the walk at the current item and try it again later: from
 * cp_io_done when writes are in flight, else from jbd__cp_kick after
 * CP_RETRY_MS.  Blocks and records are idempotent, so the retry may
 * redo what the failed step did in part. */
static void cp_pause(struct jbd *j, struct jbd_cp *cp, int rc,
		     const char *what)
{
	(void)j;
	cp->paused = true;
	cp->paused_ms = tw_now_ms();
	tw_log_rl(TW_LOG_WARN, "journal: checkpoint waits: %s: %s; retrying "
		  "every %d ms", what, strerror(-rc), CP_RETRY_MS);
}

static bool cp_set_aside(struct jbd *j, struct jbd_cp *cp, uint64_t obj,
			 int rc)
{
	uint64_t seq = cp->cur ? cp->cur->seq : cp->last->seq;

	if (cp_is_aside(cp, obj))
		return true;      /* a second write in flight failed too */
	if (!jbd__obj_set_aside(j, obj, seq, rc))
		return false;
	if (tw_hmap_put(&cp->aside, obj + 1, (void *)1) < 0)
		return false;
	return true;
}

static void cp_io_done(struct jbd *j, struct jbd_io *io, int rc)
{
	struct jbd_cp *cp = j->cp;
	assert(cp != NULL && cp->inflight > 0);
	cp->inflight--;
	if (io->kind == JBD_IO_HOME)
		cp_unbusy(cp, io);
	if (rc < 0 && io->kind == JBD_IO_HOME &&
	    cp_set_aside(j, cp, io->obj, rc))
		rc = 0;
	if (rc < 0) {
		jbd__abort(j, rc, io->kind == JBD_IO_HOME ?
			   "checkpoint write to a home object" :
			   "writing the superblock");
		return;
	}
	cp_step(j);
}

/* Everything home and durable: forget the checkpointed transactions. */
static void cp_finish(struct jbd *j)
{
	struct jbd_cp *cp = j->cp;
	assert(cp->n_busy == 0);
	struct jbd_txn *t = j->txn_head;
	uint64_t last_seq = cp->last->seq;
	while (t != NULL && t->seq <= last_seq) {
		assert(t->state == TXN_CHECKPOINTING);
		for (size_t i = 0; i < t->n_items; i++) {
			struct jbd_item *it = &t->items[i];
			/* What the commit counted (data=journal only),
			 * whatever became of the object's index since. */
			if (it->kind == ITEM_DATA &&
			    j->opts.mode == JBD_MODE_JOURNAL) {
				assert(j->pending_home >= it->len);
				j->pending_home -= it->len;
				j->free_valid = false;   /* J13: taken home */
			}
			struct jbd_obj *o = jbd__obj(j, it->obj, false);
			if (o == NULL)
				continue;   /* writeback/ordered keep no index */
			if (it->kind == ITEM_DATA) {
				struct jbd_ent *e = tw_hmap_get(&o->blocks, it->blk + 1);
				if (e != NULL && e->txn == t && e->item == i) {
					tw_hmap_del(&o->blocks, it->blk + 1);
					free(e);
				}
			}
			if (it->kind == ITEM_REC && it->hole_len > 0) {
				for (size_t k = 0; k < o->n_holes; k++)
					if (o->holes[k].seq == t->seq &&
					    o->holes[k].item == i) {
						memmove(&o->holes[k], &o->holes[k + 1],
							(o->n_holes - k - 1) *
							sizeof(o->holes[0]));
						o->n_holes--;
						break;
					}
			}
			if (it->kind == ITEM_REC && it->cut != JBD_NO_CUT) {
				for (size_t c = 0; c < o->n_cuts; c++)
					if (o->cuts[c].seq == t->seq &&
					    o->cuts[c].cut == it->cut) {
						memmove(&o->cuts[c], &o->cuts[c + 1],
							(o->n_cuts - c - 1) *
							sizeof(o->cuts[0]));
						o->n_cuts--;
						break;
					}
			}
			if (it->kind != ITEM_INPLACE && o->nref > 0)
				o->nref--;
			jbd__obj_maybe_free(j, o);
		}
		j->txn_head = t->next;
		if (j->txn_head == NULL)
			j->txn_tail = NULL;
		jbd__txn_free(j, t);
		t = j->txn_head;
	}
	j->used -= cp->freed;
	j->tail = cp->new_tail;
	j->tail_seq = cp->new_seq;
	j->checkpointed_seq = last_seq;
	j->st.checkpoints++;
	if (j->cp_hist && j->cp_start_ns)
		tw_hist_observe_ns(j->cp_hist, tw_now_ns() - j->cp_start_ns);
	j->full_wait = false;
	jbd__cp_fini(j);
	struct jbd_waiter **pp = &j->cp_waiters;
	while (*pp) {
		struct jbd_waiter *w = *pp;
		if (w->seq <= j->checkpointed_seq) {
			*pp = w->next;
			jbd__queue_cb(j, w->cb, w->arg, 0);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	jbd__commit_kick(j);
}

static void cp_super(struct jbd *j)
{
	struct jbd_cp *cp = j->cp;
	/* J6: the tail is the first transaction not checkpointed, or the
	 * head (next write) when none is in the log yet. */
	struct jbd_txn *nx = cp->last->next;
	if (nx != NULL && (nx->state == TXN_CLOSING || nx->state == TXN_CLOSED ||
			   nx->state == TXN_SYNCED))
		cp->new_tail = nx->start;
	else
		cp->new_tail = j->head;
	cp->new_seq = cp->last->seq + 1;
	jbd__super_encode(j, cp->sb, cp->new_tail, cp->new_seq);
	struct jbd_io *w = jbd__io_new(IO_WRITE, JBD_IO_LOG, j->fd, 0,
				       cp_io_done, cp);
	struct jbd_io *f = jbd__io_new(IO_FSYNC, JBD_IO_LOG, j->fd, 0,
				       cp_io_done, cp);
	if (w == NULL || f == NULL) {
		free(w);
		free(f);
		jbd__abort(j, -ENOMEM, "queueing the superblock");
		return;
	}
	w->iov[0].iov_base = cp->sb;
	w->iov[0].iov_len = JBD_BLOCK_SIZE;
	w->iovcnt = 1;
	w->link = true;
	cp->state = CP_SUPER;
	cp->inflight += 2;
	jbd__io_submit(j, w);
	jbd__io_submit(j, f);
}

/* Make every object of the checkpoint durable; false while it is still
 * running (cp_step runs again when the thread wakes the owner). */
static bool cp_home_sync(struct jbd *j, struct jbd_cp *cp)
{
	int rc;
	if (cp->state == CP_HOMESYNC) {
		if (!jbd__bgsync_poll(&cp->home, &rc))
			return false;
	} else if (jbd__bgsync_usable(j)) {
		rc = jbd__bgsync_start(j, &cp->home, true);
		if (rc == 0) {
			cp->state = CP_HOMESYNC;
			return false;
		}
	} else {
		rc = j->ops.home_sync(j->ops.arg, cp->objs, cp->n_objs);
	}
	if (rc < 0) {
		jbd__abort(j, rc, "syncing home objects");
		return false;
	}
	return true;
}

static void cp_step(struct jbd *j)
{
	struct jbd_cp *cp = j->cp;
	if (j->aborted || cp == NULL)
		return;
	if (cp->state == CP_SUPER) {
		if (cp->inflight == 0)
			cp_finish(j);
		return;
	}
	if (cp->state == CP_HOMESYNC) {
		if (cp_home_sync(j, cp))
			cp_super(j);
		return;
	}
	while (cp->cur != NULL) {
		if (cp->item == cp->cur->n_items) {
			cp->cur = cp->cur == cp->last ? NULL : cp->cur->next;
			cp->item = 0;
			continue;
		}
		struct jbd_item *it = &cp->cur->items[cp->item];
		int rc = 0;
		cp->paused = false;
		if (cp->aside.count && cp_is_aside(cp, it->obj)) {
			cp->item++;       /* the owner holds obj as lost */
			continue;
		}
		if (it->kind == ITEM_DATA) {
			/* CP_ITEMS: only home writes are in flight */
			assert(cp->n_busy == cp->inflight);
			if (cp->inflight >= cp_max_inflight(j))
				return;
			int fd;
			rc = cp_fd(j, cp, it->obj, &fd);
			if ((rc == -EMFILE || rc == -ENFILE) &&
			    cp_release_fds(cp) > 0)
				rc = cp_fd(j, cp, it->obj, &fd);
			if (rc < 0 && cp_resource_error(rc)) {
				cp_pause(j, cp, rc, "opening a home object");
				return;
			}
			if (rc < 0 && cp_set_aside(j, cp, it->obj, rc))
				continue;
			if (rc < 0) {
				jbd__abort(j, rc, "opening a home object");
				return;
			}
			/* Coalesce the following blocks of the same object that
			 * continue this one into one writev. */
			size_t run = 1;
			while (run < CP_MAX_IOV && cp->item + run < cp->cur->n_items) {
				const struct jbd_item *nx = &cp->cur->items[cp->item + run];
				const struct jbd_item *pv = nx - 1;
				if (nx->kind != ITEM_DATA || nx->obj != it->obj ||
				    nx->blk != pv->blk + 1 || pv->len != JBD_BLOCK_SIZE)
					break;
				run++;
			}
			/* Two writes of one home block must never be in flight
			 * together: io_uring does not keep them in order (ext4
			 * runs O_DIRECT writes in parallel, an EAGAIN is retried
			 * behind later requests, an async buffered write may
			 * finish inline before one waiting in io-wq).  So the
			 * walk waits here while a write in flight touches one
			 * of these blocks; cp_io_done runs it again.  Writes of
			 * other blocks, of this object too, go out together, up
			 * to cp_max_inflight: 4 KiB random overwrites of one file
			 * would otherwise go home one at a time, each costing
			 * the loop a wakeup, while the same loop serves the
			 * writes that fill the log. */
			if (cp_is_busy(cp, it->obj, it->blk, it->blk + run))
				return;
			/* Only the last block of a run can be short.  A run as
			 * long as a stream's transaction skips the page cache
			 * (cp_dfd); a shorter one (a small write, a small file)
			 * goes home through it, as the log writes it: its copy
			 * is small, and its blocks, the ones an application
			 * reads back soonest, are then read from memory after
			 * the checkpoint, not from the disk. */
			bool full = it[run - 1].len == JBD_BLOCK_SIZE;
			int dfd = full && run >= JBD_DIRECT_MIN ?
				  cp_dfd(j, cp, it->obj, fd) : -1;
			struct jbd_io *io = jbd__io_new(IO_WRITE, JBD_IO_HOME, fd,
							it->blk * JBD_BLOCK_SIZE,
							cp_io_done, cp);
			if (io == NULL) {
				jbd__abort(j, -ENOMEM, "queueing a home write");
				return;
			}
			if (run > TW_ARRAY_SIZE(io->iov_inline)) {
				io->iov_owned = calloc(run, sizeof(struct iovec));
				if (io->iov_owned == NULL) {
					jbd__io_free(io);
					jbd__abort(j, -ENOMEM, "queueing a home write");
					return;
				}
				io->iov = io->iov_owned;
			}
			/* only the valid bytes: never extend past the size */
			for (size_t k = 0; k < run; k++) {
				io->iov[k].iov_base = it[k].buf;
				io->iov[k].iov_len = it[k].len;
			}
			io->iovcnt = (int)run;
			io->obj = it->obj;
			if (j->ops.home_blocks) {
				rc = cp_home_blocks(j, it, io->iov, run);
				if (rc < 0) {
					jbd__io_free(io);
					if (cp_set_aside(j, cp, it->obj, rc))
						continue;
					jbd__abort(j, rc, "writing home "
						   "checksums");
					return;
				}
			}
			if (dfd >= 0) {
				io->alt_fd = fd;
				io->fd = dfd;
				j->st.direct_home_writes++;
			}
			assert(cp->n_busy < cp_max_inflight(j));
			cp->busy[cp->n_busy++] = (struct cp_busy){
				.io = io, .obj = it->obj, .lo = it->blk,
				.hi = it->blk + run };
			if (cp->n_busy > j->st.home_inflight_max)
				j->st.home_inflight_max = cp->n_busy;
			cp->inflight++;
			jbd__io_submit(j, io);
			cp->item += run;
			continue;
		} else if (it->kind == ITEM_REC) {
			if (cp->inflight > 0)
				return;     /* J10: records after earlier blocks */
			if (j->opts.mode == JBD_MODE_JOURNAL && j->ops.apply) {
				rc = j->ops.apply(j->ops.arg, JBD_PHASE_CHECKPOINT,
						  cp->cur->seq, it->obj, it->cut,
						  it->buf, it->len);
				if ((rc == -EMFILE || rc == -ENFILE) &&
				    cp_release_fds(cp) > 0)
					rc = j->ops.apply(j->ops.arg,
							  JBD_PHASE_CHECKPOINT,
							  cp->cur->seq, it->obj,
							  it->cut, it->buf,
							  it->len);
				if (rc < 0 && cp_resource_error(rc)) {
					cp_pause(j, cp, rc, "applying a record");
					return;
				}
				if (rc < 0 && cp_set_aside(j, cp, it->obj, rc))
					continue;
				if (rc < 0) {
					jbd__abort(j, rc, "applying a record");
					return;
				}
				cp_forget_fd(cp, it->obj);
			}
			rc = cp_note_obj(cp, it->obj);
		} else {
			rc = cp_note_obj(cp, it->obj);
		}
		if (rc < 0 && cp_resource_error(rc)) {
			cp_pause(j, cp, rc, "noting a home object");
			return;
		}
		if (rc < 0) {
			jbd__abort(j, rc, "checkpoint (out of memory)");
			return;
		}
		cp->item++;
	}
	if (cp->inflight > 0)
		return;
	if (cp_home_sync(j, cp))
		cp_super(j);
}

/* Whether a cut waits to give its home space back: once synced, at most
 * one such checkpoint per commit interval (ext3 frees a deleted file's
 * blocks at its commit; without this a delete stayed in the log until the
 * log was half used, forever on an idle iod, and a full home file system
 * refused every write after the rm); at once when admission refused a
 * write meanwhile (jbd.c admit). */
static bool frees_due(const struct jbd *j)
{
	if (j->frees_seq <= j->checkpointed_seq)
		return false;
	if (j->urgent_seq > j->checkpointed_seq)
		return true;
	return j->frees_seq <= j->synced_seq &&
	       tw_now_ms() - j->frees_cp_ms >= j->opts.commit_interval_ms;
}

void jbd__cp_kick(struct jbd *j)
{
	if (j->cp != NULL && j->cp->state == CP_HOMESYNC)
		cp_step(j);     /* the syncfs thread may have finished */
	/* A walk that waits for descriptors or memory with nothing in
	 * flight (with writes in flight, cp_io_done retries it). */
	if (j->cp != NULL && j->cp->paused && j->cp->inflight == 0 &&
	    tw_now_ms() - j->cp->paused_ms >= CP_RETRY_MS)
		cp_step(j);
	if (j->aborted || j->cp_active)
		goto out;
	bool want = j->full_wait || j->used >= j->nlog / 2 || frees_due(j) ||
		    j->home_seq > j->checkpointed_seq;
	for (struct jbd_waiter *w = j->cp_waiters; w; w = w->next)
		if (w->seq > j->checkpointed_seq)
			want = true;
	/* waiters whose target is already checkpointed (empty log) */
	struct jbd_waiter **pp = &j->cp_waiters;
	while (*pp) {
		struct jbd_waiter *w = *pp;
		if (w->seq <= j->checkpointed_seq) {
			*pp = w->next;
			jbd__queue_cb(j, w->cb, w->arg, 0);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	if (!want)
		goto out;
	struct jbd_txn *first = j->txn_head;
	if (first == NULL || first->state != TXN_SYNCED) {
		/* J7: only synced transactions go home; ask for a sync */
		if (first != NULL && first->state == TXN_CLOSED &&
		    j->want_sync < j->closed_seq) {
			j->want_sync = j->closed_seq;
			jbd__sync_kick(j);
		}
		goto out;
	}
	struct jbd_cp *cp = calloc(1, sizeof(*cp));
	if (cp == NULL) {
		jbd__abort(j, -ENOMEM, "starting a checkpoint");
		goto out;
	}
	tw_hmap_init(&cp->fds);
	tw_hmap_init(&cp->dfds);
	cp->busy = calloc(cp_max_inflight(j), sizeof(*cp->busy));
	if (cp->busy == NULL) {
		free(cp);
		jbd__abort(j, -ENOMEM, "starting a checkpoint");
		goto out;
	}
	tw_hmap_init(&cp->seen);
	tw_hmap_init(&cp->aside);
	cp->first = first;
	struct jbd_txn *t = first;
	for (;;) {
		t->state = TXN_CHECKPOINTING;
		cp->freed += t->nblocks;
		cp->last = t;
		if (t->next == NULL || t->next->state != TXN_SYNCED)
			break;
		t = t->next;
	}
	cp->cur = first;
	cp->state = CP_ITEMS;
	j->cp = cp;
	j->cp_active = true;
	j->frees_cp_ms = tw_now_ms();
	j->cp_start_ns = j->cp_hist ? tw_now_ns() : 0;
	cp_step(j);
out:
	jbd__io_pump(j);
}
