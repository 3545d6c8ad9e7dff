/* wbehind.c - write-behind and the ordering of data operations on one
 * inode (docs/ARCHITECTURE.md "Client": write-behind).
 *
 * A buffered write(2) is answered as soon as its data is copied and
 * queued for the loop thread (or, past the worker's checks, once its
 * pieces are on their way to the iods); the application goes on while
 * the twins journal it.  What that must not change:
 *   - Order.  Every write (and fallocate) holds its byte range from the
 *     moment it passes fc_wb_enter until it ends (fc_wb_release).  An
 *     operation whose range overlaps a held range, or a range that an
 *     earlier operation still waits for, waits in one FIFO: two writes of
 *     the same bytes land in the order the kernel sent them, also when the
 *     first one is retried on the surviving twin after the second one was
 *     sent.
 *   - Visibility.  A read waits for the writes of its range; flush, fsync,
 *     release, a size change and SEEK_DATA/HOLE wait for every write of
 *     the inode (end = UINT64_MAX), so close-to-open holds: close returns
 *     once the data is on the iods and the size report went out.  An
 *     mtime set does not wait: the writes it overtakes keep its mtime
 *     (report.c, fc_times_set).
 *   - Errors.  A write answered early that fails for good (both twins
 *     down, ENOSPC) records its errno on the inode with a new sequence
 *     number, as the kernel's errseq_t does for page-cache writeback:
 *     every handle open at that time returns it once, from its next fsync,
 *     or from its next flush or release if it wrote (fc_wb_take_err).  So
 *     each of two writers' close fails, a handle that only read does not
 *     take the error from a writer, and a handle opened later does not
 *     see it.  Unlike errseq_t there is no "seen" bit (a handle opened
 *     after a failure nobody reported yet does not get it): every writer
 *     open at the time gets it, since its flush waits for all writes of
 *     the inode.  writepage's writes are never answered early.  With
 *     -o writeback_cache their failures are recorded too
 *     (fc_wb_note_writeback_err): the kernel gives such an error to every
 *     file's fsync, but to the first close of any handle only (which may
 *     be one that only read), so every handle opened for writing takes it
 *     at flush (fc_wb_writer): the kernel writes its pages back through
 *     whichever handle it picks.  An fsync skips it (the kernel reported
 *     it to that file before it sent FSYNC).  The
 *     record stays while the client runs (a map entry, at most 32 bytes,
 *     an inode that ever failed a write).
 *   - Joining.  A small write answered early may be parked (fc_wb_park):
 *     it holds its range but is not sent yet, so that the next write of
 *     its file can ride in the same WRITE (ops_data.c).  An operation that
 *     must wait for a parked write's range kicks it out at once
 *     (fc_wb_enter), so no read, flush, fsync, release, truncate or lock
 *     ever waits for the park; ops_data.c bounds the rest.
 *   - Memory.  At most FC_WB_MAX_BYTES and FC_WB_MAX_OPS are answered
 *     early at a time; past that a write is answered when it lands, which
 *     throttles the writer.
 * O_DIRECT, O_SYNC, O_DSYNC, O_APPEND and page-cache writeback (writepage)
 * are never answered early; the caller decides (ops_data.c).  A write is
 * answered either on the loop once it holds its range (fc_wb_detach), or
 * by the FUSE worker as it hands the write to the loop (fc_wb_reserve, and
 * fc_wb_adopt once held): the handoff queue is FIFO and the op is queued
 * before the answer goes out, so every later request of the application
 * enters the order after the write.
 *
 * Everything here runs on the loop thread, except fc_wb_reserve (any
 * thread: the caps are atomic).  Held ranges and waiters are short lists
 * (bounded by the caps and the kernel's requests in flight), so they are
 * scanned linearly.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>

#include "file.h"
#include "loop.h"
#include "mount.h"
#include "wbehind.h"

static bool overlaps(const struct fc_wb *a, uint64_t ino, uint64_t off,
		     uint64_t end)
{
	if (ino && a->ino && a->ino != ino)
		return false;
	return a->off < end && off < a->end;
}

/* Whether [off, end) of ino must wait: a held range overlaps it, or a
 * waiter queued before `upto` (NULL: all of them) does. */
static bool blocked(const struct fc_client *cl, uint64_t ino, uint64_t off,
		    uint64_t end, const struct fc_wb *upto)
{
	const struct fc_wb *w;

	for (w = cl->wb_held; w; w = w->next)
		if (overlaps(w, ino, off, end))
			return true;
	for (w = cl->wb_wait_head; w && w != upto; w = w->next)
		if (overlaps(w, ino, off, end))
			return true;
	return false;
}

static void hold(struct fc_client *cl, struct fc_wb *w)
{
	w->prev = NULL;
	w->next = cl->wb_held;
	if (cl->wb_held)
		cl->wb_held->prev = w;
	cl->wb_held = w;
	w->held = true;
}

bool fc_wb_enter(struct fc_client *cl, struct fc_wb *w, struct fc_op *op,
		 uint64_t ino, uint64_t off, uint64_t end, bool hold_range,
		 fc_op_fn next)
{
	assert(!w->held && !w->waiting);
	if (end <= off)
		end = off + 1;   /* an empty write still keeps its place */
	w->ino = ino;
	w->off = off;
	w->end = end;
	w->op = op;
	w->fn = next;
	w->hold_range = hold_range;
	w->behind = false;
	if (!blocked(cl, ino, off, end, NULL)) {
		if (hold_range)
			hold(cl, w);
		return true;
	}
	w->waiting = true;
	w->next = NULL;
	if (cl->wb_wait_tail)
		cl->wb_wait_tail->next = w;
	else
		cl->wb_wait_head = w;
	cl->wb_wait_tail = w;
	/* What it waits for may be parked: send it now.  After queuing, so
	 * that even a send ending at once (it never does: fc_call defers its
	 * failures) would find w in place. */
	fc_wb_kick(cl, ino);
	return false;
}

static void unpark(struct fc_client *cl, struct fc_wb *w)
{
	assert(w->parked);
	if (w->park_prev)
		w->park_prev->park_next = w->park_next;
	else
		cl->wb_parked = w->park_next;
	if (w->park_next)
		w->park_next->park_prev = w->park_prev;
	else
		cl->wb_parked_tail = w->park_prev;
	w->park_prev = w->park_next = NULL;
	w->parked = false;
	/* None left: the next park starts a whole FC_JOIN_WAIT_MS of its
	 * own (a no-op on a timer never started, as in the unit tests). */
	if (!cl->wb_parked)
		uv_timer_stop(&cl->park_timer);
}

bool fc_wb_park(struct fc_client *cl, struct fc_wb *w, fc_op_fn send)
{
	assert(w->held && w->behind && !w->parked);
	assert(!fc_wb_parked(cl, w->ino));
	/* A waiter queued before w held its range (it waited for an earlier
	 * write, which w's range may block now) kicked nothing: w goes. */
	for (const struct fc_wb *q = cl->wb_wait_head; q; q = q->next)
		if (!q->ino || q->ino == w->ino)
			return false;
	w->send = send;
	w->parked = true;
	w->park_next = NULL;
	w->park_prev = cl->wb_parked_tail;
	if (cl->wb_parked_tail)
		cl->wb_parked_tail->park_next = w;
	else
		cl->wb_parked = w;
	cl->wb_parked_tail = w;
	return true;
}

struct fc_op *fc_wb_parked(const struct fc_client *cl, uint64_t ino)
{
	for (const struct fc_wb *w = cl->wb_parked; w; w = w->park_next)
		if (w->ino == ino)
			return w->op;
	return NULL;
}

void fc_wb_kick(struct fc_client *cl, uint64_t ino)
{
	struct fc_wb *w = cl->wb_parked, *next;

	/* Unlinked before it is sent: a send may park nothing, but it may
	 * end ops (a failed piece), which may kick again. */
	for (; w; w = next) {
		next = w->park_next;
		if (ino && w->ino != ino)
			continue;
		unpark(cl, w);
		w->send(w->op);
		next = cl->wb_parked;   /* the list may have changed */
	}
}

/* Start every waiter that nothing before it blocks any more, in order. */
static void wake(struct fc_client *cl)
{
	struct fc_wb *w, *prev = NULL, *ready = NULL, **tail = &ready;

	w = cl->wb_wait_head;
	while (w) {
		struct fc_wb *next = w->next;

		if (blocked(cl, w->ino, w->off, w->end, w)) {
			prev = w;
			w = next;
			continue;
		}
		/* Unlink; hold its range at once, so the waiters behind it
		 * see it, before anything runs. */
		if (prev)
			prev->next = next;
		else
			cl->wb_wait_head = next;
		if (cl->wb_wait_tail == w)
			cl->wb_wait_tail = prev;
		w->waiting = false;
		if (w->hold_range)
			hold(cl, w);
		w->ready_next = NULL;
		*tail = w;
		tail = &w->ready_next;
		w = next;
	}
	while ((w = ready)) {
		ready = w->ready_next;
		w->fn(w->op);
	}
}

void fc_wb_unreserve(struct fc_client *cl, size_t bytes)
{
	atomic_fetch_sub(&cl->wb_bytes, bytes);
	atomic_fetch_sub(&cl->wb_ops, 1);
}

bool fc_wb_reserve(struct fc_client *cl, size_t bytes)
{
	/* Two counters, each taken then given back when over: a racing
	 * reservation may fail needlessly, never pass the caps. */
	if (atomic_fetch_add(&cl->wb_ops, 1) >= FC_WB_MAX_OPS) {
		atomic_fetch_sub(&cl->wb_ops, 1);
		return false;
	}
	if (atomic_fetch_add(&cl->wb_bytes, bytes) + bytes > FC_WB_MAX_BYTES) {
		fc_wb_unreserve(cl, bytes);
		return false;
	}
	return true;
}

void fc_wb_adopt(struct fc_wb *w, size_t bytes)
{
	assert(w->held && !w->behind);
	w->behind = true;
	w->bytes = bytes;
}

bool fc_wb_detach(struct fc_client *cl, struct fc_wb *w, size_t bytes)
{
	if (!fc_wb_reserve(cl, bytes))
		return false;
	fc_wb_adopt(w, bytes);
	return true;
}

/* Bit of a wb_errs value: the error is a page-cache writeback's. */
#define FC_WB_ERR_WRITEBACK 0x8000u

static void note_err(struct fc_client *cl, uint64_t ino, int err,
		     bool writeback)
{
	_Static_assert(sizeof(uintptr_t) >= 8, "seq << 16 needs 64 bits");
	assert(err > 0 && err < (int)FC_WB_ERR_WRITEBACK);
	uintptr_t v = (uintptr_t)(++cl->wb_err_seq << 16) | (uintptr_t)err |
		      (writeback ? FC_WB_ERR_WRITEBACK : 0);
	if (tw_hmap_put(&cl->wb_errs, ino, (void *)v) < 0)
		tw_log_rl(TW_LOG_ERR, "ino %" PRIu64 ": lost a write error "
			  "(out of memory)", ino);
	atomic_store(&cl->wb_errs_any, true);
}

void fc_wb_release(struct fc_client *cl, struct fc_wb *w, int err)
{
	if (!w->held)
		return;
	if (w->parked)
		unpark(cl, w);
	if (w->prev)
		w->prev->next = w->next;
	else
		cl->wb_held = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->held = false;
	if (w->behind) {
		assert(atomic_load(&cl->wb_ops) > 0 &&
		       atomic_load(&cl->wb_bytes) >= w->bytes);
		fc_wb_unreserve(cl, w->bytes);
		if (err)
			note_err(cl, w->ino, err, false);
		w->behind = false;
	}
	if (cl->wb_wait_head)
		wake(cl);
}

void fc_wb_note_writeback_err(struct fc_client *cl, uint64_t ino, int err)
{
	note_err(cl, ino, err, true);
}

bool fc_wb_writer(const struct fc_client *cl, struct fc_file *f)
{
	return atomic_load(&f->wrote) ||
	       (cl->opts.writeback_cache && (f->flags & O_ACCMODE) != O_RDONLY);
}

int fc_wb_take_err(struct fc_client *cl, struct fc_file *f, bool for_fsync)
{
	uintptr_t v = (uintptr_t)tw_hmap_get(&cl->wb_errs, f->ino);
	if (v >> 16 <= f->err_seen)
		return 0;
	f->err_seen = v >> 16;
	if (for_fsync && (v & FC_WB_ERR_WRITEBACK))
		return 0;
	return (int)(v & (FC_WB_ERR_WRITEBACK - 1));
}

uint64_t fc_wb_err_seq(const struct fc_client *cl, uint64_t ino)
{
	return (uintptr_t)tw_hmap_get(&cl->wb_errs, ino) >> 16;
}

bool fc_wb_idle(const struct fc_client *cl)
{
	return !cl->wb_held && !cl->wb_wait_head;
}
