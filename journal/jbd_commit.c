/* jbd_commit.c - closing and syncing transactions of the block journal.
 *
 * close (jbd__commit_kick): the oldest sealed transaction, or the running
 * one, is laid out as descriptor / data / record blocks and a commit block
 * carrying the CRC32C of the whole transaction, and written to the log at
 * the head with one batch of writev requests (J3, J5).  When every write
 * has returned the transaction is CLOSED: its handles' callbacks run (the
 * write may be acknowledged, docs/ARCHITECTURE.md "Guarantees").  Only one transaction
 * closes at a time, so everything committed meanwhile shares the next close
 * (group commit).  A transaction that does not fit the free log space waits
 * for the checkpoint (J8); it never fails for space.
 *
 * sync (jbd__sync_kick): fdatasync of the journal file, linked to the close
 * when someone already waits for it; afterwards every closed transaction is
 * SYNCED.  Syncs happen on demand (jbd_sync, JBD_COMMIT_SYNC), when a
 * quarter of the log is closed but unsynced, and every commit_interval
 * (jbd_tick).
 *
 * The format and invariants J1.. are in journal/FORMAT.md (part 2).
 */
#include "jbd_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IO_MAX_IOV   256      /* blocks per writev */

void jbd__layout_add(struct jbd_layout *l, const struct jbd_item *it)
{
	if (it->kind == ITEM_REC) {
		uint32_t need = (uint32_t)sizeof(struct jbd_rec_disk) +
				JBD_REC_ALIGN(it->len);
		if (l->cur != JBD_T_RECORD || l->rec_used + need > JBD_BLOCK_SIZE) {
			l->cur = JBD_T_RECORD;
			l->rec_used = sizeof(struct jbd_rechdr_disk);
			l->blocks++;
		}
		l->rec_used += need;
		return;
	}
	if (l->cur != JBD_T_DESC || l->tags == JBD_TAGS_PER_DESC) {
		l->cur = JBD_T_DESC;
		l->tags = 0;
		l->blocks++;
	}
	l->tags++;
	if (it->kind == ITEM_DATA)
		l->blocks++;
}

static void hdr_put(uint8_t *block, uint16_t type, uint64_t seq)
{
	struct jbd_hdr_disk h = {
		.magic = htole32(JBD_MAGIC),
		.type = htole16(type),
		.flags = 0,
		.seq = htole64(seq),
	};
	memcpy(block, &h, sizeof(h));
}

/* Block i of the txn in log order: a metadata block or a data item. */
struct slot {
	int32_t meta;            /* index into t->meta, or -1 */
	int32_t item;            /* data item, or -1 */
};

/* Lay out t (J3): fills t->meta and the slots; returns the block count
 * including the commit block, which must equal t->lay.blocks + 1. */
static int build(struct jbd *j, struct jbd_txn *t, struct slot **slots_out)
{
	uint64_t n = t->lay.blocks + 1;
	t->nblocks = n;          /* sizes t->esc for the frees */
	struct slot *slots = calloc(n, sizeof(*slots));
	size_t nmeta;
	/* metadata blocks = all blocks minus data blocks */
	size_t ndata = 0;
	for (size_t i = 0; i < t->n_items; i++)
		if (t->items[i].kind == ITEM_DATA)
			ndata++;
	nmeta = n - ndata;
	/* From the block cache like the data: a fresh aligned allocation
	 * per commit landed on pages a trim had handed back, one page fault
	 * each (a twelfth of a primary iod's CPU on 4 KiB writes). */
	t->meta = calloc(nmeta, sizeof(*t->meta));
	for (size_t i = 0; t->meta != NULL && i < nmeta; i++) {
		t->meta[i] = jbd__blk_get(j);
		if (t->meta[i] == NULL)
			break;
		t->n_meta++;
		memset(t->meta[i], 0, JBD_BLOCK_SIZE);
	}
	t->esc = calloc(n, sizeof(*t->esc));
	if (slots == NULL || t->meta == NULL || t->n_meta < nmeta ||
	    t->esc == NULL) {
		free(slots);
		return -ENOMEM;
	}
	size_t s = 0, m = 0;
	int cur = 0;
	uint8_t *desc = NULL, *recb = NULL;
	struct jbd_tag_disk *last_tag = NULL;
	uint32_t ntags = 0, rec_used = 0, nrec = 0;
	for (size_t i = 0; i < t->n_items; i++) {
		struct jbd_item *it = &t->items[i];
		if (it->kind == ITEM_REC) {
			uint32_t need = (uint32_t)sizeof(struct jbd_rec_disk) +
					JBD_REC_ALIGN(it->len);
			if (cur != JBD_T_RECORD || rec_used + need > JBD_BLOCK_SIZE) {
				if (last_tag)
					last_tag->flags |= htole32(JBD_TAG_LAST);
				last_tag = NULL;
				cur = JBD_T_RECORD;
				recb = t->meta[m];
				hdr_put(recb, JBD_T_RECORD, t->seq);
				rec_used = sizeof(struct jbd_rechdr_disk);
				nrec = 0;
				slots[s].meta = (int32_t)m++;
				slots[s].item = -1;
				s++;
			}
			struct jbd_rec_disk r = {
				.obj = htole64(it->obj),
				.cut = htole64(it->cut),
				.len = htole32(it->len),
			};
			memcpy(recb + rec_used, &r, sizeof(r));
			memcpy(recb + rec_used + sizeof(r), it->buf, it->len);
			rec_used += need;
			nrec++;
			struct jbd_rechdr_disk *rh = (void *)recb;
			rh->nrec = htole32(nrec);
			rh->used = htole32(rec_used);
			continue;
		}
		if (cur != JBD_T_DESC || ntags == JBD_TAGS_PER_DESC) {
			if (last_tag)
				last_tag->flags |= htole32(JBD_TAG_LAST);
			cur = JBD_T_DESC;
			desc = t->meta[m];
			hdr_put(desc, JBD_T_DESC, t->seq);
			ntags = 0;
			slots[s].meta = (int32_t)m++;
			slots[s].item = -1;
			s++;
		}
		struct jbd_tag_disk *tag = (void *)(desc +
			sizeof(struct jbd_desc_disk) + ntags * sizeof(*tag));
		tag->obj = htole64(it->obj);
		tag->blk = htole64(it->blk);
		uint32_t fl = 0;
		if (it->kind == ITEM_INPLACE) {
			fl |= JBD_TAG_INPLACE;
			tag->len = 0;
		} else {
			tag->len = htole32(it->len);
			if (it->escaped)
				fl |= JBD_TAG_ESCAPED;
		}
		tag->flags = htole32(fl);
		last_tag = tag;
		ntags++;
		((struct jbd_desc_disk *)desc)->ntags = htole32(ntags);
		if (it->kind == ITEM_DATA) {
			slots[s].meta = -1;
			slots[s].item = (int32_t)i;
			if (it->escaped) {
				/* J4: the log copy starts with zeros */
				t->esc[s] = jbd__blk_get(j);
				if (t->esc[s] == NULL) {
					free(slots);
					return -ENOMEM;
				}
				memcpy(t->esc[s], it->buf, JBD_BLOCK_SIZE);
				memset(t->esc[s], 0, 4);
			}
			s++;
		}
	}
	if (last_tag)
		last_tag->flags |= htole32(JBD_TAG_LAST);
	/* commit block */
	uint8_t *cb = t->meta[m];
	slots[s].meta = (int32_t)m++;
	slots[s].item = -1;
	s++;
	assert(s == n && m == nmeta);   /* layout_add and build agree (J3) */
	hdr_put(cb, JBD_T_COMMIT, t->seq);
	struct jbd_commit_disk *c = (void *)cb;
	c->nblocks = htole32((uint32_t)(n - 1));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	c->sec = (int64_t)htole64((uint64_t)ts.tv_sec);
	c->nsec = htole32((uint32_t)ts.tv_nsec);
	/* J17: only sequences whose fdatasync has returned count as synced,
	 * so a later transaction never claims an unsynced earlier one. */
	assert(j->synced_seq < t->seq);
	c->synced_to = htole64(j->synced_seq);
	/* J5: CRC32C seeded with the UUID over every block, then commit
	 * bytes 0..19 and synced_to.  A data block joins by its own sum,
	 * the caller's or taken when jbd_write filled it (items of a closing
	 * transaction no longer change: only the running one is updated in
	 * place). */
	uint32_t crc = j->crc_seed;
	for (size_t k = 0; k + 1 < n; k++) {
		if (slots[k].meta >= 0)
			crc = tw_crc32c(crc, t->meta[slots[k].meta],
					JBD_BLOCK_SIZE);
		else if (t->esc[k])
			crc = tw_crc32c(crc, t->esc[k], JBD_BLOCK_SIZE);
		else
			crc = tw_crc32c_combine(crc,
						t->items[slots[k].item].crc,
						JBD_BLOCK_SIZE);
	}
	crc = tw_crc32c(crc, cb, offsetof(struct jbd_commit_disk, crc));
	crc = tw_crc32c(crc, &c->synced_to, sizeof(c->synced_to));
	c->crc = htole32(crc);
	t->nblocks = n;
	*slots_out = slots;
	return 0;
}

static void sync_done(struct jbd *j, uint64_t target);

static void close_finish(struct jbd *j, struct jbd_txn *t)
{
	t->state = TXN_CLOSED;
	if (j->first_closed == NULL)
		j->first_closed = t;
	j->closing = false;
	j->closed_seq = t->seq;
	j->st.commits++;
	if (j->commit_hist && j->close_start_ns)
		tw_hist_observe_ns(j->commit_hist, tw_now_ns() - j->close_start_ns);
	j->st.log_blocks += t->nblocks;
	j->unsynced_blocks += t->nblocks;
	jbd__close_bufs_free(j, t);
	/* ordered / writeback: the records take effect now, in log order
	 * (FORMAT.md (part 2) "Records"). */
	if (j->opts.mode != JBD_MODE_JOURNAL && j->ops.apply != NULL) {
		for (size_t i = 0; i < t->n_items; i++) {
			struct jbd_item *it = &t->items[i];
			if (it->kind != ITEM_REC)
				continue;
			int rc = j->ops.apply(j->ops.arg, JBD_PHASE_CLOSE, t->seq,
					      it->obj, it->cut, it->buf, it->len);
			if (rc < 0) {
				jbd__abort(j, rc, "applying a record");
				return;
			}
		}
	}
	struct jbd_waiter **pp = &t->waiters;
	while (*pp) {
		struct jbd_waiter *w = *pp;
		if (!w->sync) {
			*pp = w->next;
			jbd__queue_cb(j, w->cb, w->arg, 0);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	if (j->unsynced_blocks >= j->nlog / 4 && j->want_sync < j->closed_seq)
		j->want_sync = j->closed_seq;
}

static void close_io_done(struct jbd *j, struct jbd_io *io, int rc)
{
	struct jbd_txn *t = io->ctx;
	if (io->op == IO_FSYNC && rc == -ECANCELED) {
		j->syncing = false;     /* jbd__sync_kick issues a new one */
		return;
	}
	if (rc < 0)
		jbd__abort(j, rc, "writing a transaction to the log");
	if (io->op == IO_FSYNC) {
		if (!j->aborted)
			sync_done(j, t->seq);
		return;
	}
	assert(t->ios_pending > 0);
	if (--t->ios_pending == 0 && !j->aborted)
		close_finish(j, t);
}

/* The transaction to close next: the oldest sealed one, else the running
 * one if it holds anything (it is sealed now). */
static struct jbd_txn *next_to_close(struct jbd *j)
{
	if (j->first_sealed == NULL && j->running && j->running->n_items > 0)
		jbd__seal(j);
	return j->first_sealed;
}

/* Collect b's finished run (osync or ofsync): 1 while it runs, 0 when
 * none runs (*seq then covers what the last one did: its target), -errno
 * when it failed. */
static int bgsync_collect(struct jbd_bgsync *b, uint64_t target,
			  uint64_t *seq)
{
	int rc;
	if (!b->started)
		return 0;
	if (!jbd__bgsync_poll(b, &rc))
		return 1;
	if (rc < 0)
		return rc;
	*seq = target;
	return 0;
}

static int osync_collect(struct jbd *j)
{
	return bgsync_collect(&j->osync, j->osync_target, &j->osync_seq);
}

static bool ordered_covered(const struct jbd *j, const struct jbd_txn *t)
{
	return t->seq <= j->osync_seq || t->seq <= j->ofsync_seq;
}

static int obj_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* J11 with ops.home_sync_fds: fsync on ofsync what the owner names for
 * the in-place objects of t and every transaction sealed after it (one
 * batch covers them all: their writes had returned before they joined a
 * handle), or, when the owner says -E2BIG, run one syncfs there instead.
 * Either starts after the owner took its objects' state, and the next
 * batch only after it finished.  1 when started, 0 when nothing was left
 * to fsync (they are covered now: whatever took them has finished), or
 * -errno. */
static int ofsync_start(struct jbd *j, struct jbd_txn *t)
{
	size_t n = 0;
	for (const struct jbd_txn *u = t; u; u = u->next)
		for (size_t i = 0; i < u->n_items; i++)
			if (u->items[i].kind == ITEM_INPLACE)
				n++;
	assert(n > 0);
	uint64_t *objs = malloc(n * sizeof(*objs));
	int *fds = malloc(JBD_SYNC_FILES_MAX_FDS * sizeof(*fds));
	if (objs == NULL || fds == NULL) {
		free(objs);
		free(fds);
		return -ENOMEM;
	}
	n = 0;
	for (const struct jbd_txn *u = t; u; u = u->next)
		for (size_t i = 0; i < u->n_items; i++)
			if (u->items[i].kind == ITEM_INPLACE)
				objs[n++] = u->items[i].obj;
	qsort(objs, n, sizeof(*objs), obj_cmp);
	size_t m = 1;
	for (size_t i = 1; i < n; i++)
		if (objs[i] != objs[m - 1])
			objs[m++] = objs[i];
	int k = j->ops.home_sync_fds(j->ops.arg, objs, m, fds,
				     JBD_SYNC_FILES_MAX_FDS);
	free(objs);
	assert(k <= (int)JBD_SYNC_FILES_MAX_FDS);
	uint64_t target = j->txn_tail->seq;
	int rc;
	if (k == -E2BIG) {
		free(fds);
		rc = jbd__bgsync_start(j, &j->ofsync, false);
	} else if (k <= 0) {
		free(fds);
		if (k == 0)
			j->ofsync_seq = target;
		return k;
	} else {
		rc = jbd__bgsync_start_fds(j, &j->ofsync, fds, (size_t)k);
		if (rc < 0) {
			for (int i = 0; i < k; i++)
				close(fds[i]);
			free(fds);
		}
	}
	if (rc < 0)
		return rc;
	j->ofsync_target = target;
	return 1;
}

/* J11: the in-place data of t is durable before its commit block is
 * written.  Returns 0 when it is, 1 while a helper thread makes it so (the
 * close waits; commit_kick runs again when the thread wakes the owner), or
 * -errno.  With ops.home_sync_fds the helper fsyncs the objects' own
 * descriptors (ofsync_start); without, it runs one syncfs (osync), which
 * covers every transaction sealed when it started: their in-place writes
 * had returned before they joined a handle. */
static int ordered_sync(struct jbd *j, struct jbd_txn *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n_items; i++)
		if (t->items[i].kind == ITEM_INPLACE)
			n++;
	if (n == 0 || ordered_covered(j, t))
		return 0;
	if (jbd__bgsync_usable(j)) {
		int rc = bgsync_collect(&j->ofsync, j->ofsync_target,
					&j->ofsync_seq);
		if (rc != 0)
			return rc;
		rc = osync_collect(j);
		if (rc < 0)
			return rc;
		if (ordered_covered(j, t))
			return 0;
		if (j->ops.home_sync_fds != NULL)
			return ofsync_start(j, t);
		if (rc == 1)
			return 1;   /* a syncfs runs: wait for it */
		j->osync_target = j->txn_tail->seq;
		rc = jbd__bgsync_start(j, &j->osync, false);
		return rc < 0 ? rc : 1;
	}
	uint64_t *objs = malloc(n * sizeof(*objs));
	if (objs == NULL)
		return -ENOMEM;
	n = 0;
	for (size_t i = 0; i < t->n_items; i++)
		if (t->items[i].kind == ITEM_INPLACE)
			objs[n++] = t->items[i].obj;
	int rc = j->ops.home_sync(j->ops.arg, objs, n);
	free(objs);
	return rc;
}

void jbd__commit_kick(struct jbd *j)
{
	if (j->aborted || j->closing)
		goto out;
	/* peek without sealing first: the space check must not reorder */
	struct jbd_txn *t = j->first_sealed;
	uint64_t need;
	if (t == NULL && j->running && j->running->n_items > 0)
		need = j->running->lay.blocks + 1;
	else if (t != NULL)
		need = t->lay.blocks + 1;
	else
		goto out;
	/* J8: never write over blocks not yet checkpointed. */
	if (j->nlog - j->used < need) {
		if (!j->full_wait)
			j->st.full_waits++;
		j->full_wait = true;
		if (j->want_sync < j->closed_seq)
			j->want_sync = j->closed_seq;
		goto out;
	}
	t = next_to_close(j);
	assert(t != NULL && t->lay.blocks + 1 == need);
	if (j->opts.mode == JBD_MODE_ORDERED) {
		int rc = ordered_sync(j, t);
		if (rc < 0)
			jbd__abort(j, rc, "syncing in-place data before a commit");
		if (rc != 0)
			goto out;
	}
	struct slot *slots = NULL;
	int rc = build(j, t, &slots);
	if (rc < 0) {
		jbd__abort(j, rc, "laying out a transaction");
		goto out;
	}
	t->start = j->head;
	t->state = TXN_CLOSING;
	j->unlogged_blocks -= t->data_blocks;
	j->first_sealed = t->next;   /* SEALED or NULL: list order */
	j->closing = true;
	j->close_start_ns = j->commit_hist ? tw_now_ns() : 0;
	j->head = jbd__log_next(j, j->head, t->nblocks);
	j->used += t->nblocks;
	/* A stream (t filled while another closed) skips the page cache: the
	 * copy into it was a third of all CPU of a 4 x 256 MiB write, and the
	 * stream has the device's bandwidth to itself anyway.  A lone request
	 * stays buffered, where closing costs a memcpy, not a device round
	 * trip (64 KiB O_DIRECT writes through the mount: 455 -> 593 us
	 * with dfd).  Both are "closed" the same way (docs/ARCHITECTURE.md "Journal"). */
	bool direct = j->direct && t->behind && t->nblocks >= JBD_DIRECT_MIN;
	int fd = direct ? j->dfd : j->fd;
	if (direct)
		j->st.direct_txns++;
	/* writev runs: contiguous in the file, at most IO_MAX_IOV blocks */
	uint64_t k = 0;
	while (k < t->nblocks) {
		uint64_t pos = jbd__log_next(j, t->start, k);
		uint64_t run = TW_MIN(t->nblocks - k, j->nblocks - pos);
		run = TW_MIN(run, (uint64_t)IO_MAX_IOV);
		struct jbd_io *io = jbd__io_new(IO_WRITE, JBD_IO_LOG, fd,
						pos * JBD_BLOCK_SIZE,
						close_io_done, t);
		if (io != NULL && direct)
			io->alt_fd = j->fd;
		struct iovec *iov = io ? calloc(run, sizeof(*iov)) : NULL;
		if (iov == NULL) {
			free(io);
			free(slots);
			jbd__abort(j, -ENOMEM, "queueing log writes");
			goto out;
		}
		for (uint64_t b = 0; b < run; b++) {
			struct slot *sl = &slots[k + b];
			void *p;
			if (sl->meta >= 0)
				p = t->meta[sl->meta];
			else if (t->esc[k + b])
				p = t->esc[k + b];
			else
				p = t->items[sl->item].buf;
			iov[b].iov_base = p;
			iov[b].iov_len = JBD_BLOCK_SIZE;
		}
		/* the iovec array lives in the request (freed with it) */
		io->iov = iov;
		io->iov_owned = iov;
		io->iovcnt = (int)run;
		t->ios_pending++;
		jbd__io_submit(j, io);
		k += run;
	}
	free(slots);
	/* A waiting fsync rides on the close as a linked request. */
	if (j->want_sync >= t->seq && !j->syncing && t->ios_pending <= 8) {
		struct jbd_io *fs = jbd__io_new(IO_FSYNC, JBD_IO_LOG, j->fd, 0,
						close_io_done, t);
		if (fs != NULL) {
			for (struct jbd_io *x = j->q_head; x; x = x->next)
				if (x->ctx == t)
					x->link = true;
			j->syncing = true;
			j->sync_target = t->seq;
			jbd__io_submit(j, fs);
		}
	}
out:
	jbd__io_pump(j);
}

static void sync_io_done(struct jbd *j, struct jbd_io *io, int rc)
{
	if (rc < 0) {
		jbd__abort(j, rc, "fdatasync of the log");
		return;
	}
	sync_done(j, (uint64_t)(uintptr_t)io->ctx);
}

static void sync_done(struct jbd *j, uint64_t target)
{
	j->syncing = false;
	if (target <= j->synced_seq)
		return;
	j->synced_seq = target;
	j->last_sync_ms = tw_now_ms();
	j->st.syncs++;
	struct jbd_txn *t;
	for (t = j->first_closed; t && t->seq <= target; t = t->next) {
		if (t->state != TXN_CLOSED)
			break;          /* CLOSING or SEALED: none closed beyond */
		t->state = TXN_SYNCED;
		j->unsynced_blocks -= t->nblocks;
		struct jbd_waiter *w;
		while ((w = t->waiters) != NULL) {
			t->waiters = w->next;
			jbd__queue_cb(j, w->cb, w->arg, 0);
			free(w);
		}
	}
	j->first_closed = (t && t->state == TXN_CLOSED) ? t : NULL;
	struct jbd_waiter **pp = &j->sync_waiters;
	while (*pp) {
		struct jbd_waiter *w = *pp;
		if (w->seq <= target) {
			*pp = w->next;
			jbd__queue_cb(j, w->cb, w->arg, 0);
			free(w);
		} else {
			pp = &w->next;
		}
	}
}

void jbd__sync_kick(struct jbd *j)
{
	if (j->aborted || j->syncing)
		return;
	if (j->want_sync <= j->synced_seq || j->closed_seq <= j->synced_seq)
		return;
	struct jbd_io *io = jbd__io_new(IO_FSYNC, JBD_IO_LOG, j->fd, 0,
					sync_io_done,
					(void *)(uintptr_t)j->closed_seq);
	if (io == NULL) {
		jbd__abort(j, -ENOMEM, "queueing fdatasync");
		return;
	}
	j->syncing = true;
	j->sync_target = j->closed_seq;
	jbd__io_submit(j, io);
	jbd__io_pump(j);
}

/* The highest sequence holding anything (0 when the journal is idle). */
static uint64_t last_seq(const struct jbd *j)
{
	if (j->running && j->running->n_items > 0)
		return j->running->seq;
	uint64_t s = j->closed_seq;
	if (j->txn_tail && j->txn_tail->seq > s)
		s = j->txn_tail->seq;
	return s;
}

int jbd_sync(struct jbd *j, jbd_done_cb cb, void *arg)
{
	if (j->aborted)
		return j->aborted;
	uint64_t target = last_seq(j);
	if (target <= j->synced_seq) {
		jbd__queue_cb(j, cb, arg, 0);
		jbd__wake(j);
		return 0;
	}
	struct jbd_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->cb = cb;
	w->arg = arg;
	w->seq = target;
	w->next = j->sync_waiters;
	j->sync_waiters = w;
	if (j->want_sync < target)
		j->want_sync = target;
	jbd__commit_kick(j);
	jbd__sync_kick(j);
	return 0;
}

int jbd_sync_home(struct jbd *j, jbd_done_cb cb, void *arg)
{
	if (j->aborted)
		return j->aborted;
	if (!jbd__bgsync_usable(j))
		return -EOPNOTSUPP;
	struct jbd_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->cb = cb;
	w->arg = arg;
	w->seq = last_seq(j);
	w->next = j->home_waiters;
	j->home_waiters = w;
	jbd__home_kick(j);
	return 0;
}

/* jbd_sync_home's waiters: once osync covers a waiter's transaction, it
 * waits for the log sync like any jbd_sync; while some are not covered, a
 * syncfs runs (osync, shared with ordered mode's closes).  A waiter's
 * transaction may still be running: it is sealed first, so the syncfs
 * covers it (its in-place writes returned before it joined a handle). */
void jbd__home_kick(struct jbd *j)
{
	if (j->home_waiters == NULL || j->aborted)
		return;
	int rc = osync_collect(j);
	if (rc != 0) {
		if (rc < 0)
			jbd__abort(j, rc, "syncing the home file system");
		return;
	}
	struct jbd_waiter **pp = &j->home_waiters;
	while (*pp) {
		struct jbd_waiter *w = *pp;
		if (w->seq > j->osync_seq) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		rc = jbd_sync(j, w->cb, w->arg);
		if (rc < 0)
			jbd__queue_cb(j, w->cb, w->arg, rc);
		free(w);
	}
	/* the jbd_sync calls above may have started osync for an ordered
	 * close (ordered_sync): the waiters left wait for that one */
	if (j->home_waiters == NULL || j->osync.started)
		return;
	if (j->running && j->running->n_items > 0)
		jbd__seal(j);
	j->osync_target = last_seq(j);
	rc = jbd__bgsync_start(j, &j->osync, false);
	if (rc < 0)
		jbd__abort(j, rc, "starting a syncfs of the home file system");
}

bool jbd_can_sync_files(const struct jbd *j)
{
	return jbd__bgsync_usable(j);
}

bool jbd_sync_files_busy(const struct jbd *j)
{
	return j->fsync_bg.started || j->fjobs_wait != NULL;
}

int jbd_sync_files(struct jbd *j, const int *fds, size_t n, jbd_done_cb cb,
		   void *arg)
{
	if (j->aborted)
		return j->aborted;
	if (!jbd__bgsync_usable(j))
		return -EOPNOTSUPP;
	/* Nothing to fsync: the log sync, unless a batch runs or waits,
	 * which may hold this file's descriptors (its data was taken by an
	 * earlier call that has not finished) */
	if (n == 0 && !jbd_sync_files_busy(j))
		return jbd_sync(j, cb, arg);
	if (j->fjobs_fds + n > JBD_SYNC_FILES_MAX_FDS)
		return -EBUSY;
	struct jbd_fjob *f = calloc(1, sizeof(*f));
	int *own = n > 0 ? malloc(n * sizeof(*own)) : NULL;
	if (f == NULL || (n > 0 && own == NULL)) {
		free(f);
		free(own);
		return -ENOMEM;
	}
	if (n > 0)
		memcpy(own, fds, n * sizeof(*own));
	f->fds = own;
	f->n = n;
	f->cb = cb;
	f->arg = arg;
	j->fjobs_fds += n;
	if (j->fjobs_wait_tail)
		j->fjobs_wait_tail->next = f;
	else
		j->fjobs_wait = f;
	j->fjobs_wait_tail = f;
	jbd__files_kick(j);
	return 0;
}

void jbd__fjobs_fail(struct jbd *j, struct jbd_fjob **list, int rc,
		     bool silent)
{
	struct jbd_fjob *f;
	while ((f = *list) != NULL) {
		*list = f->next;
		for (size_t i = 0; i < f->n; i++)
			close(f->fds[i]);
		j->fjobs_fds -= f->n;
		if (!silent)
			jbd__queue_cb(j, f->cb, f->arg, rc);
		free(f->fds);
		free(f);
	}
}

/* Jobs whose descriptors are synced go on to the log sync. */
static void fjobs_to_log(struct jbd *j, struct jbd_fjob **list)
{
	struct jbd_fjob *f;
	while ((f = *list) != NULL) {
		*list = f->next;
		assert(f->n == 0);
		int r = j->aborted ? j->aborted : jbd_sync(j, f->cb, f->arg);
		if (r < 0)
			jbd__queue_cb(j, f->cb, f->arg, r);
		free(f->fds);
		free(f);
	}
}

/* jbd_sync_files: collect a finished batch (its callers go on to the log
 * sync), then start the next with every caller that waits.  Runs after an
 * abort too, to reap the thread. */
void jbd__files_kick(struct jbd *j)
{
	struct jbd_bgsync *b = &j->fsync_bg;
	int rc;
	if (b->started) {
		if (!jbd__bgsync_poll(b, &rc))
			return;
		j->fjobs_fds -= b->nfds;
		b->nfds = 0;
		if (rc < 0)
			jbd__abort(j, rc, "an fsync of a file's data at home");
		fjobs_to_log(j, &j->fjobs_run);
	}
	if (j->aborted || j->fjobs_wait == NULL)
		return;
	size_t n = 0;
	for (struct jbd_fjob *f = j->fjobs_wait; f; f = f->next)
		n += f->n;
	if (n == 0) {   /* callers that only waited for the last batch */
		j->fjobs_wait_tail = NULL;
		fjobs_to_log(j, &j->fjobs_wait);
		return;
	}
	int *fds = malloc(n * sizeof(*fds));
	if (fds == NULL)
		return;   /* the next kick tries again */
	n = 0;
	for (struct jbd_fjob *f = j->fjobs_wait; f; f = f->next)
		for (size_t i = 0; i < f->n; i++)
			fds[n++] = f->fds[i];
	rc = jbd__bgsync_start_fds(j, b, fds, n);
	if (rc < 0) {
		free(fds);
		jbd__abort(j, rc, "starting an fsync of a file's data at home");
		return;
	}
	/* the thread owns the descriptors now */
	for (struct jbd_fjob *f = j->fjobs_wait; f; f = f->next)
		f->n = 0;
	j->fjobs_run = j->fjobs_wait;
	j->fjobs_wait = j->fjobs_wait_tail = NULL;
}

void jbd_want_home(struct jbd *j)
{
	uint64_t target = last_seq(j);

	if (j->aborted || j->opts.mode != JBD_MODE_JOURNAL ||
	    j->pending_home == 0 || j->home_seq >= target)
		return;
	j->home_seq = target;
	if (j->want_sync < target)
		j->want_sync = target;
	/* No kick from here: admission calls this inside a handle.  The
	 * owner runs jbd_process, whose kicks sync and checkpoint. */
	jbd__wake(j);
}

int jbd_checkpoint(struct jbd *j, jbd_done_cb cb, void *arg)
{
	if (j->aborted)
		return j->aborted;
	struct jbd_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	uint64_t target = last_seq(j);
	w->cb = cb;
	w->arg = arg;
	w->seq = target;
	w->next = j->cp_waiters;
	j->cp_waiters = w;
	if (j->want_sync < target)
		j->want_sync = target;
	jbd__commit_kick(j);
	jbd__sync_kick(j);
	jbd__cp_kick(j);
	jbd__wake(j);
	return 0;
}
