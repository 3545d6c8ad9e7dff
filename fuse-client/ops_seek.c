/* ops_seek.c - lseek(2) SEEK_DATA and SEEK_HOLE (FUSE_LSEEK), answered
 * from the subfiles.
 *
 * The kernel handles SEEK_SET/CUR/END itself and sends only SEEK_DATA and
 * SEEK_HOLE.  After a GETATTR (the size, as close-to-open allows, merged
 * with our own unreported writes), every column k is asked once: SEEK
 * (raid striping: x_k = r0_subfile_size(k, off) is the first byte of
 * column k at or after file offset off, and the column's bytes map to
 * the file in increasing order), on either readable twin; on failure the
 * other twin is asked once, then the op fails with EIO.  When a twin
 * refused our map's epoch (-ESTALE: the map moved on) and the other one
 * cannot answer either, the whole seek starts again on a newer map,
 * FC_SEEK_STALE_TRIES times at most.
 * Then:
 *   SEEK_DATA  the smallest file offset of a column's data answer; none,
 *              or at/after the size: ENXIO.
 *   SEEK_HOLE  the smallest file offset of a column's hole answer (a
 *              column without data past x_k is a hole from x_k on),
 *              capped at the size (the end of the file is a hole).
 * off at or past the size: ENXIO for both, as Linux.
 * Everything runs on the loop thread; exactly one reply per request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"
#include "wbehind.h"

struct seek_col {
	struct seek_op *so;
	uint32_t column;
	uint64_t sub_off;
	struct fc_iod *iod;
	int attempts;
	bool saw_stale;            /* a twin refused our epoch this round */
};

/* Rounds of a seek on a new map after an iod said -ESTALE. */
#define FC_SEEK_STALE_TRIES 8

struct seek_op {
	struct fc_op op;
	struct fc_mgr_call mc;
	struct fc_map_waiter mw;
	struct fc_cap_waiter cw;   /* a cap fetch (seek_start) */
	int cap_tries;             /* ... at most 2 per seek */
	bool rekey;                /* an iod said -EKEYREJECTED this round */
	int stale_tries;
	bool stale;                /* a column said -ESTALE this round */
	uint64_t epoch;            /* the map's epoch this round was sent with */
	Twinfs__Getattr getattr;
	uint64_t ino;
	uint64_t off;
	int whence;
	struct fc_attr attr;
	uint64_t size;
	struct seek_col cols[R0_MAX_STRIPE_COUNT];
	int pending;
	int err;                   /* first failure (errno, > 0) */
	uint64_t best;             /* smallest candidate so far */
	struct fc_wb wb;           /* waits for earlier writes (wbehind.c) */
};

static void seek_send(struct seek_op *so, struct seek_col *sc);
static void seek_start(struct fc_op *op);

static void seek_map_done(void *arg, int status)
{
	struct seek_op *so = arg;

	if (status < 0) {
		fc_op_reply_err(&so->op, EIO);
		return;
	}
	/* mgrd's map has not moved past ours yet (an iod learned of the new
	 * epoch first): ask again a little later, not at once. */
	if (so->op.cl->epoch <= so->epoch) {
		so->op.run = seek_start;
		fc_op_later(&so->op, FC_TAKEOVER_POLL_MS);
		return;
	}
	seek_start(&so->op);
}

static void seek_finish(struct seek_op *so)
{
	/* Our cap was refused as expired (or absent): seek_start fetches
	 * a fresh one and the seek starts again. */
	if (so->rekey && !so->stale) {
		so->rekey = false;
		if (so->cap_tries < 2 && !so->op.cl->stopping) {
			so->err = 0;
			seek_start(&so->op);
			return;
		}
		if (!so->err)
			so->err = EIO;
	}
	if (so->stale) {
		so->stale = false;
		so->err = 0;
		so->stale_tries++;
		so->mw.cb = seek_map_done;
		so->mw.arg = so;
		fc_map_refresh(so->op.cl, &so->mw);
		return;
	}
	if (so->err) {
		fc_op_reply_err(&so->op, so->err);
		return;
	}
	/* off < size here: the end of the file is always a hole. */
	if (so->whence == SEEK_HOLE)
		so->best = TW_MIN(so->best, so->size);
	else if (so->best >= so->size) {
		fc_op_reply_err(&so->op, ENXIO);
		return;
	}
	fc_op_reply_lseek(&so->op, (off_t)so->best);
}

static void seek_col_cb(int status, struct wire_msg *reply, void *arg)
{
	struct seek_col *sc = arg;
	struct seek_op *so = sc->so;
	struct fc_client *cl = so->op.cl;
	const Twinfs__SeekReply *r = NULL;

	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor != &twinfs__seek_reply__descriptor))
		status = -EIO;
	if (status == 0) {
		r = (const Twinfs__SeekReply *)reply->body;
		if (r->found)
			so->best = TW_MIN(so->best,
					  r0_sub_to_file(&so->attr.layout,
							 sc->column, r->offset));
		else if (so->whence == SEEK_HOLE)
			so->best = TW_MIN(so->best,
					  r0_sub_to_file(&so->attr.layout,
							 sc->column, sc->sub_off));
	}
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		struct fc_iod *failed = sc->iod;
		char name[96], cause[64];

		if (fc_is_transport_err(status))
			fc_report(cl, failed, status);
		if (status == -EKEYREJECTED) {
			cl->caps_on = true;
			fc_cap_drop(cl, so->ino);
			so->rekey = true;
			goto out;
		}
		/* Remembered before trying the other twin: when that one is
		 * the twin that died, its error says nothing of the map, and
		 * the refusal of our epoch is what says a new one exists. */
		if (status == -ESTALE)
			sc->saw_stale = true;
		sc->iod = sc->attempts < 2 && !cl->stopping &&
			  status != -EACCES && status != -EKEYEXPIRED
			  ? fc_map_read_iod(cl, so->ino,
					    so->attr.layout.groups[sc->column],
					    sc->column, 0, failed)
			  : NULL;
		if (sc->iod && sc->iod != failed) {
			seek_send(so, sc);
			return;
		}
		/* A twin refused our epoch (the other may be the one that
		 * died): seek_finish starts again on a new map. */
		if ((status == -ESTALE || (sc->saw_stale &&
					   fc_is_transport_err(status))) &&
		    so->stale_tries < FC_SEEK_STALE_TRIES && !cl->stopping) {
			so->stale = true;
			goto out;
		}
		if (failed) {
			char path[FC_PATH_LOG];

			tw_log_rl(TW_LOG_WARN, "lseek %s: %s %s",
				  fc_ino_path(cl, so->ino, path, sizeof(path)),
				  fc_iod_name(failed, name, sizeof(name)),
				  fc_cause(cl, status, cause, sizeof(cause)));
		}
		/* An older iod without SEEK: ENOSYS makes the kernel answer
		 * lseek itself from now on (the whole file is data). */
		if (!so->err)
			so->err = status == -EOPNOTSUPP ? ENOSYS : EIO;
	}
out:
	if (--so->pending == 0)
		seek_finish(so);
}

static void seek_send(struct seek_op *so, struct seek_col *sc)
{
	struct fc_client *cl = so->op.cl;
	Twinfs__Seek q;

	sc->attempts++;
	twinfs__seek__init(&q);
	q.ino = so->ino;
	q.column = sc->column;
	q.offset = sc->sub_off;
	q.whence = (uint32_t)so->whence;
	q.epoch = cl->epoch;
	fc_cap_attach(cl, so->ino, false, &q.cap);
	fc_call(cl, sc->iod ? sc->iod->peer : NULL, TWINFS__MSG_TYPE__MSG_SEEK,
		&q.base, NULL, 0, TW_MAX(cl->opts.request_timeout_ms, 1u),
		seek_col_cb, sc);
}

static void seek_attr_done(struct fc_mgr_call *mc, int status,
			   struct wire_msg *reply)
{
	struct seek_op *so = mc->arg;
	struct fc_client *cl = so->op.cl;
	const struct r0_layout *l;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &so->attr);
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		fc_op_reply_err(&so->op, fc_errno(status));
		return;
	}
	so->size = fc_inode_update(cl, &so->attr, NULL);
	l = &so->attr.layout;
	if (!S_ISREG(so->attr.mode) || !so->attr.has_layout) {
		fc_op_reply_err(&so->op, S_ISDIR(so->attr.mode) ? EISDIR : EINVAL);
		return;
	}
	if (so->off >= so->size) {
		fc_op_reply_err(&so->op, ENXIO);
		return;
	}
	so->best = UINT64_MAX;
	so->epoch = cl->epoch;
	so->pending = 1;   /* guard while sending */
	for (uint32_t k = 0; k < l->stripe_count; k++) {
		struct seek_col *sc = &so->cols[k];

		sc->so = so;
		sc->column = k;
		sc->attempts = 0;
		sc->saw_stale = false;
		sc->sub_off = r0_subfile_size(l, k, so->off);
		sc->iod = fc_map_read_iod(cl, so->ino, l->groups[k], k, 0, NULL);
		so->pending++;
		seek_send(so, sc);
	}
	if (--so->pending == 0)
		seek_finish(so);
}

static void seek_getattr(struct seek_op *so)
{
	struct fc_client *cl = so->op.cl;

	twinfs__getattr__init(&so->getattr);
	so->getattr.ino = so->ino;
	fc_mgr_send(cl, &so->mc, TWINFS__MSG_TYPE__MSG_GETATTR,
		    &so->getattr.base, &so->getattr.ctx, &so->op, 0,
		    seek_attr_done, so);
}

/* A failed fetch is left to the iods to answer. */
static void seek_cap_done(void *arg, int status)
{
	(void)status;
	seek_getattr(arg);
}

/* With caps in use and none cached for ino, one is fetched first
 * (proto/FORMAT.md "Capabilities"). */
static void seek_start(struct fc_op *op)
{
	struct seek_op *so = (struct seek_op *)op;
	struct fc_client *cl = op->cl;

	if (fc_cap_missing(cl, so->ino, false) && so->cap_tries < 2 &&
	    !cl->stopping) {
		so->cap_tries++;
		so->cw.cb = seek_cap_done;
		so->cw.arg = so;
		fc_cap_fetch(cl, so->ino, false, op, &so->cw);
		return;
	}
	seek_getattr(so);
}

/* Data and holes as of every write that came before (wbehind.c). */
static void seek_run(struct fc_op *op)
{
	struct seek_op *so = (struct seek_op *)op;

	if (fc_wb_enter(op->cl, &so->wb, op, so->ino, 0, UINT64_MAX, false,
			seek_start))
		seek_start(op);
}

void fc_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi)
{
	struct fc_client *cl = fuse_req_userdata(req);
	struct seek_op *so;

	(void)fi;
	/* With the kernel's writeback cache, written bytes may still be
	 * dirty pages that no iod has seen, past the size we know: our
	 * answer would call them a hole, or ENXIO.  ENOSYS makes the kernel
	 * answer every lseek of this mount itself, from its own size (all
	 * data, one hole at the end), which is right. */
	if (cl->opts.writeback_cache) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	so = fc_op_new(cl, req, sizeof(*so), seek_run);
	if (!so) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	so->ino = ino;
	so->off = (uint64_t)off;
	so->whence = whence;
	fc_loop_submit(so->op.cl, &so->op);
}
