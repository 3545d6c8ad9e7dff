/* ops_data.c - the data path: read, write, fallocate and fsync, with
 * their failover; the data op (dop.h) they share with ops_file.c (open,
 * create, flush, release).
 *
 * Failover budget (docs/ARCHITECTURE.md "Client": failover budget): one
 * deadline per read, write or fsync, FC_OP_DEADLINE(rt) = 2 x request_timeout.
 * Each attempt on an iod waits at most request_timeout / 2 (attempt_ms); the
 * iod's forward to its twin and mgrd's probe use the same half, so a hung
 * server is noticed (rt/2), reported, probed and demoted by mgrd (rt/2) within
 * one request_timeout, and the op still has request_timeout left to finish on
 * the survivor.  A killed server (connection refused/reset) is noticed,
 * probed and demoted in milliseconds.
 *
 * Write: the range is split into stripe-unit pieces (r0_split); each piece
 * goes to the iod r1_write_primary picks in the map (fc_map_write_iod), all
 * in parallel.  The reply is sent when every piece succeeded.  -ESTALE (old
 * trunc_gen or epoch) refreshes the map and the attributes and retries (a
 * few rounds).  A transport error is reported to mgrd at once (fc_report);
 * then, like EIO (a primary whose twin died fails writes until mgrd demotes
 * the twin), the op waits for a map with a higher epoch (pushed, or polled
 * with GET_MAP every FC_TAKEOVER_POLL_MS) and sends the failed pieces again
 * with it; after attempt_ms + 500 ms without a new map (mgrd's probe found
 * the server alive) it retries anyway.  When the map says neither twin of a
 * group may serve, the op fails at once with EIO and a log line naming the
 * group and both iods.  The deadline ends every wait.  -EKEYEXPIRED is
 * final too: the file was opened under a session mgrd has since expired,
 * and the iods refuse its writes (proto/FORMAT.md "Fencing").
 *
 * Read: clamped to the size known (mgrd's or our own writes); each piece
 * goes to the twin r1_read_pick chooses, and on failure (reported like a
 * write's) at once to the other one (r1_read_fallback); if neither can
 * serve now, the op waits for a new map as writes do.  Holes and short
 * pieces are zero-filled up to the clamped size.
 *
 * Copies: a write's data is copied once, out of libfuse's buffer (the
 * request outlives the handler); the WRITE frames send it from there
 * (wire_call_z, the buffer is freed by the last of the op and its
 * frames).  A read is answered from the READ replies' own buffers with
 * one fuse_reply_iov (read_reply).  1 MiB through memcpy costs about as
 * much CPU as the kernel's own copy of it into the socket.
 *
 * Write-behind (wbehind.c): a buffered write is answered by the FUSE
 * worker as it is handed to the loop (early_ok), or else by the loop once
 * its pieces are known (maybe_behind), within caps; every data op first
 * takes its place in the inode's order (fc_wb_enter): writes and
 * fallocate hold their range until write_end, reads wait for the writes
 * of their range, flush/fsync/release (after_writes) and unlocks
 * (locks.c) for all of the inode's, and flush/fsync/release return the
 * error of a failed early-answered write.
 *
 * Size reports (SIZE_REPORT) go out on flush, fsync, release and every
 * second while a file has unreported writes (FORMAT.md "Size, truncate");
 * they live in report.c.
 *
 * Lifetimes: struct fc_file (fi->fh) is freed when its last reference
 * goes: the open's own (dropped at release) or a write or report in
 * flight.  Everything here runs on the loop thread except the handlers'
 * packing.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "dcrc.h"
#include "dop.h"
#include "dpath.h"
#include "file.h"
#include "inode.h"
#include "kio.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"
#include "report.h"
#include "wbehind.h"

/* -ESTALE rounds per request: a truncate moved trunc_gen, or the map moved
 * to a new epoch (possibly while a failed twin was being demoted). */
#define FC_STALE_TRIES 8

static struct fc_client *client(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* A write's data, shared by the op and the WRITE frames that send it
 * without a copy (wire_zdata): freed by the last of them.  Allocated on
 * the worker, then only touched on the loop thread.  crc: the sums taken
 * as the bytes entered (dcrc.c), which every WRITE's data_crc comes
 * from; NULL without checksums (TWINFS_BENCH_NO_CSUM). */
struct fc_wbuf {
	int refs;
	struct fc_dcrc *crc;
	size_t cap;                /* bytes[] allocated (joined writes) */
	uint8_t bytes[];
};

static void wbuf_put(void *arg)
{
	struct fc_wbuf *b = arg;

	if (b && --b->refs == 0) {
		free(b->crc);
		free(b);
	}
}

static void dop_cleanup(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	assert(!d->riders);                 /* ended with d (write_end) */
	fc_wb_release(op->cl, &d->wb, 0);   /* normally released already */
	if (d->f)
		fc_file_put(op->cl, d->f);
	free(d->name);
	wbuf_put(d->wbuf);
	for (int i = 0; d->pieces && i < d->npieces; i++)
		wire_msg_free(d->pieces[i].reply);
	free(d->pieces);
}

struct dop *fc_dop_new(fuse_req_t req, fc_op_fn run)
{
	struct dop *d = fc_op_new(client(req), req, sizeof(*d), run);

	if (d)
		d->op.cleanup = dop_cleanup;
	return d;
}

void fc_dop_submit(fuse_req_t req, struct dop *d, bool ok)
{
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!ok) {
		free(d->name);
		wbuf_put(d->wbuf);
		free(d->op.groups);
		free(d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fc_loop_submit(d->op.cl, &d->op);
}

static uint64_t remaining_ms(const struct dop *d)
{
	uint64_t now = tw_now_ms();

	return d->deadline > now ? d->deadline - now : 0;
}

/* The deadline of a whole data op: see the top of this file. */
#define FC_OP_DEADLINE(rt) (2ull * (rt))

/* How long one attempt on one iod may take: half the request timeout,
 * capped by what is left of the op's deadline. */
static uint32_t attempt_ms(const struct dop *d)
{
	uint64_t half = TW_MAX(d->op.cl->opts.request_timeout_ms / 2, 1u);
	uint64_t left = remaining_ms(d);

	return (uint32_t)TW_MAX(TW_MIN(half, left), 1);
}

/* Errors after which another round may succeed once mgrd has moved the
 * map on: the server is unreachable, or (EIO) a primary could not reach
 * its twin.  -EHOSTDOWN marks a piece whose group has no usable twin in a
 * freshly fetched map: final. */
static bool takeover_err(int status)
{
	return fc_is_transport_err(status) || status == -EIO ||
	       status == -EBUSY || status == -ECANCELED;
}

static void takeover_poll(struct fc_op *op);
static uint64_t read_row(const struct dop *d, const struct piece *pc);

/* Whether the map has moved on for some failed piece: it goes elsewhere
 * than the attempt that failed (or nowhere: its group failed), or its
 * group changed since the attempt was sent and no twin of it is suspect
 * any more (e.g. the primary
 * answered EIO because its twin died, and mgrd has now demoted that twin:
 * same target, but it completes alone).  A map that only makes the failed
 * iod suspect is not enough: the policy still routes to a suspect
 * primary. */
static bool takeover_rerouted(struct dop *d, bool fetched)
{
	struct fc_client *cl = d->op.cl;

	/* fsync has no pieces: any new map may route it elsewhere. */
	if (d->npieces == 0)
		return cl->epoch != d->wait_epoch;
	for (int i = 0; i < d->npieces; i++) {
		struct piece *pc = &d->pieces[i];
		uint32_t k = pc->p.column;
		struct fc_iod *now;

		if (pc->status >= 0)
			continue;
		now = d->is_read
		      ? fc_map_read_iod(cl, d->ino, d->attr.layout.groups[k],
					k, read_row(d, pc), NULL)
		      : fc_map_write_iod(cl, d->ino, d->attr.layout.groups[k],
					 k);
		if (now != pc->iod)
			return true;
		/* Still no twin to use, in a map just fetched: the group has
		 * failed; answer EIO now rather than at the deadline. */
		if (!now && fetched)
			return true;
		{
			bool settled;
			uint32_t sig = fc_group_sig(cl, d->attr.layout.groups[k],
						    &settled);

			if (settled && sig != pc->issue_sig)
				return true;
		}
	}
	return false;
}

static void takeover_map_done(void *arg, int status)
{
	struct dop *d = arg;
	struct fc_client *cl = d->op.cl;
	uint64_t waited = tw_now_ms() - d->wait_since;

	(void)status;
	d->map_polled = true;
	/* A retry that fails fast (refused, EIO) is cheap: after one poll
	 * interval go again even if the map looks the same (the iod may be
	 * behind mgrd's map).  One that timed out costs attempt_ms: wait for
	 * the map to move, or for mgrd's probe to have found it alive. */
	if (takeover_rerouted(d, true) ||
	    (!d->timed_out && waited >= FC_TAKEOVER_POLL_MS) ||
	    waited >= attempt_ms(d) + 500u ||
	    remaining_ms(d) <= FC_TAKEOVER_POLL_MS || cl->stopping ||
	    fc_op_interrupted(&d->op)) {
		d->op.run = d->reissue;
		d->op.run(&d->op);
		return;
	}
	d->op.run = takeover_poll;
	fc_op_later(&d->op, FC_TAKEOVER_POLL_MS);
}

static void takeover_poll(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	/* A MAP_UPDATE push may already have moved the pieces. */
	if (takeover_rerouted(d, false)) {
		takeover_map_done(d, 0);
		return;
	}
	d->mw.cb = takeover_map_done;
	d->mw.arg = d;
	fc_map_refresh(op->cl, &d->mw);
}

void fc_data_map_changed(struct fc_client *cl)
{
	fc_op_later_wake(cl, takeover_poll);
}

/* Wait for mgrd to demote what failed, then run `reissue`. */
static void takeover_start(struct dop *d, fc_op_fn reissue)
{
	d->reissue = reissue;
	d->wait_since = tw_now_ms();
	d->wait_epoch = d->op.cl->epoch;
	d->timed_out = false;
	for (int i = 0; i < d->npieces; i++)
		if (d->pieces[i].status == -ETIMEDOUT)
			d->timed_out = true;
	d->op.run = takeover_poll;
	/* A killed server is demoted within milliseconds: look soon. */
	fc_op_later(&d->op, FC_TAKEOVER_POLL_MS / 4);
}

/* The piece's group has no usable twin: one log line naming both. */
static void log_group_failed(struct dop *d, const char *what,
			     const struct piece *pc)
{
	struct fc_client *cl = d->op.cl;
	char desc[320], path[FC_PATH_LOG];

	tw_log_rl(TW_LOG_ERR, "%s %s: no twin can serve: %s; "
		  "answering EIO", what, fc_ino_path(cl, d->ino, path, sizeof(path)),
		  fc_group_desc(cl, d->attr.layout.groups[pc->p.column], desc,
				sizeof(desc)));
}


/* --------------------------------------------------- attribute refresh */

/* Data ops need the layout and trunc_gen: from the cache, or GETATTR. */
static void attr_refresh_done(struct fc_mgr_call *mc, int status,
			      struct wire_msg *reply);

static void need_attr(struct dop *d, fc_op_fn next)
{
	struct fc_client *cl = d->op.cl;

	d->op.run = next;
	twinfs__getattr__init(&d->m.getattr);
	d->m.getattr.ino = d->ino;
	d->refresh_pending++;
	fc_mgr_send(cl, &d->mc, TWINFS__MSG_TYPE__MSG_GETATTR,
		    &d->m.getattr.base, &d->m.getattr.ctx, &d->op,
		    (uint32_t)TW_MAX(remaining_ms(d), 1), attr_refresh_done, d);
}

static void refresh_step_done(struct dop *d, int status);

static void attr_refresh_done(struct fc_mgr_call *mc, int status,
			      struct wire_msg *reply)
{
	struct dop *d = mc->arg;
	struct fc_attr a;

	if (status == 0)
		status = fc_entry_from_reply(d->op.cl, reply, &a);
	if (reply)
		wire_msg_free(reply);
	if (status == 0)
		fc_inode_update(d->op.cl, &a, NULL);
	refresh_step_done(d, status);
}

static void map_refresh_done(void *arg, int status)
{
	refresh_step_done(arg, status);
}

/* A failed cap fetch is no failure of the op: the iod answers it. */
static void cap_refresh_done(void *arg, int status)
{
	(void)status;
	refresh_step_done(arg, 0);
}

static void cap_fetch(struct dop *d)
{
	d->refresh_pending++;
	d->cw.cb = cap_refresh_done;
	d->cw.arg = d;
	fc_cap_fetch(d->op.cl, d->ino, !d->is_read, &d->op, &d->cw);
}

/* Refresh attributes and (when want_map) the map, then run d->op.run.
 * With caps in use a fresh one comes along: after -ESTALE it must carry
 * the new trunc_gen, after -EKEYREJECTED it replaces the refused one
 * (both from mgrd in this order, so the cap is at least as new as the
 * attributes). */
static void refresh(struct dop *d, bool want_map, fc_op_fn next)
{
	d->err = 0;
	d->refresh_pending = 1;   /* guard while starting both */
	if (want_map) {
		d->refresh_pending++;
		d->mw.cb = map_refresh_done;
		d->mw.arg = d;
		fc_map_refresh(d->op.cl, &d->mw);
	}
	need_attr(d, next);
	if (d->op.cl->caps_on)
		cap_fetch(d);
	refresh_step_done(d, 0);
}

/* Before a round: true when d waits for a cap (page-cache writeback after
 * the release, an mmap, a renewal that did not come); next runs then.
 * Twice per op at most: after that the iod's answer decides. */
static bool cap_first(struct dop *d, fc_op_fn next)
{
	if (!fc_cap_missing(d->op.cl, d->ino, !d->is_read) ||
	    d->cap_tries >= 2 || d->op.cl->stopping)
		return false;
	d->cap_tries++;
	d->err = 0;
	d->op.run = next;
	d->refresh_pending = 1;
	cap_fetch(d);
	refresh_step_done(d, 0);
	return true;
}

/* An iod's refusal of a cap: no other twin or round helps but
 * -EKEYREJECTED's (fetch a fresh one, round_end). */
static bool cap_refusal(int status)
{
	return status == -EACCES || status == -EKEYREJECTED ||
	       status == -EKEYEXPIRED;
}

static void refresh_step_done(struct dop *d, int status)
{
	if (status < 0 && !d->err)
		d->err = status;
	if (--d->refresh_pending > 0)
		return;
	d->op.run(&d->op);
}

/* Load d->attr from the cache; false when it must be fetched first. */
static bool load_attr(struct dop *d)
{
	return fc_inode_get(d->op.cl, d->ino, &d->attr, NULL) &&
		S_ISREG(d->attr.mode) && d->attr.has_layout;
}

/* ---------------------------------------------------------------- write */

/* Hold a write-like op to its file's limit before anything is sent
 * (fc_dpath_hold), saying so when it is refused.  0, or EFBIG. */
static int hold_to_limit(struct dop *d)
{
	uint64_t lim = fc_file_limit(d->op.cl, &d->attr.layout);
	char path[FC_PATH_LOG];

	if (fc_dpath_hold(d->kind == DOP_WRITE, d->flags & O_DIRECT, d->off,
			  &d->size, lim) == 0)
		return 0;
	tw_log_rl(TW_LOG_INFO, "%s %s: refused (File too large): it ends past "
		  "%" PRIu64 " bytes, the largest file its layout allows",
		  d->kind == DOP_WRITE ? "write" : "fallocate",
		  fc_ino_path(d->op.cl, d->ino, path, sizeof(path)), lim);
	return EFBIG;
}

static void write_issue(struct fc_op *op);

/* The session a WRITE or FALLOCATE names, which the iods refuse once mgrd
 * has fenced it: the one its descriptor was opened under.  Page-cache
 * writeback (writeback_cache, shared mmap) comes through whichever
 * writable handle the kernel picks, so it names ours: refused while we
 * hold the expired session, written under the new one after that. */
static uint64_t write_session(const struct dop *d)
{
	return d->writepage ? d->op.cl->session : d->f->session;
}

/* The iod a failed piece names as the one that failed (FORMAT.md §1): the
 * primary answers with its twin's refusal too.  NULL: the primary itself
 * (or an error reply that does not say). */
static const struct fc_iod *failed_twin(struct fc_client *cl,
					const struct piece *pc)
{
	uint32_t id = pc->failed_iod;

	if (id == 0 || id == pc->iod->id || id > TW_MAX_IODS ||
	    cl->iods[id].id != id)
		return NULL;
	return &cl->iods[id];
}

static void log_piece_err(struct dop *d, const char *what,
			  const struct piece *pc)
{
	struct fc_client *cl = d->op.cl;
	char name[96], cause[64], twin[96], path[FC_PATH_LOG];
	const struct fc_iod *tw = pc->iod ? failed_twin(cl, pc) : NULL;

	fc_ino_path(cl, d->ino, path, sizeof(path));
	if (pc->status == -EKEYEXPIRED)
		tw_log_rl(TW_LOG_ERR, "%s %s: refused by %s: it "
			  "names session %" PRIu64 " (the file's open), which "
			  "mgrd expired (this mount was out of its reach for "
			  "longer than session_timeout); writes through that "
			  "open fail with EIO, a new open writes again", what,
			  path, pc->iod ? fc_iod_name(pc->iod, name,
							sizeof(name)) : "?",
			  write_session(d));
	else if (tw)
		tw_log_rl(TW_LOG_WARN, "%s %s: %s %s (twin of %s, which "
			  "forwarded it)", what, path,
			  fc_iod_name(tw, twin, sizeof(twin)),
			  fc_cause(cl, pc->status, cause, sizeof(cause)),
			  fc_iod_name(pc->iod, name, sizeof(name)));
	else if (pc->iod)
		tw_log_rl(TW_LOG_WARN, "%s %s: %s %s", what, path,
			  fc_iod_name(pc->iod, name, sizeof(name)),
			  fc_cause(cl, pc->status, cause, sizeof(cause)));
	else if (pc->status == -EBADMSG)
		tw_log_rl(TW_LOG_ERR, "%s %s: data changed in the client's "
			  "buffer after it entered (CRC32C), not sent", what,
			  path);
	else
		tw_log_rl(TW_LOG_WARN, "%s %s: no twin of group "
			  "%u is up", what, path,
			  d->attr.layout.groups[pc->p.column]);
}

static void write_landed(struct dop *d);

/* The end of a write or fallocate: give up its place in the inode's
 * order, then answer (an early-answered write is only freed). */
static void write_end(struct dop *d, int err)
{
	struct dop *r;

	/* The writes that rode in d's WRITE end with it, as if each had
	 * landed (or failed) on its own, in their order. */
	while ((r = d->riders)) {
		d->riders = r->rider_next;
		/* Its bytes landed under d's trunc_gen, which a stale round
		 * may have moved on since r joined: r's own would take the
		 * open file's end back to the older one (report.c). */
		r->attr.trunc_gen = d->attr.trunc_gen;
		if (err == 0)
			write_landed(r);
		write_end(r, err);
	}
	/* With the kernel's writeback cache every write is page-cache
	 * writeback, answered when it fails; the kernel gives that error to
	 * the first close of any handle of the file (one that only read,
	 * too), then forgets it: the writers' closes must fail as well.
	 * Recorded before the release, which may run a waiting flush. */
	if (err && d->writepage && d->op.cl->opts.writeback_cache)
		fc_wb_note_writeback_err(d->op.cl, d->ino, err);
	fc_wb_release(d->op.cl, &d->wb, err);
	if (d->kind == DOP_WRITE && err == 0)
		fc_op_reply_write(&d->op, d->size);
	else
		fc_op_reply_err(&d->op, err);
}

/* After every piece of d answered, for what ("read", "write"): 0 when
 * all succeeded; 1 when d goes on with reissue; else the first failed
 * piece's status, logged, and *transport if a piece lost its server.
 * -EHOSTDOWN (neither twin of a group may serve) is final.  One stale
 * round (a truncate moved trunc_gen, or the map moved on) refreshes the
 * map and the attributes; transport errors and EIO wait for mgrd's new
 * map and send the failed pieces again, while the deadline allows (one
 * deadline per op). */
static int round_end(struct dop *d, const char *what, fc_op_fn reissue,
		     bool *transport)
{
	struct fc_client *cl = d->op.cl;
	struct piece *bad = NULL;
	bool stale = false;

	*transport = false;
	for (int i = 0; i < d->npieces; i++) {
		struct piece *pc = &d->pieces[i];

		if (pc->status == 0)
			continue;
		if (pc->status == -EHOSTDOWN) {
			log_group_failed(d, what, pc);
			*transport = false;
			return -EHOSTDOWN;
		}
		if (pc->status == -EKEYEXPIRED) {   /* fenced: final */
			log_piece_err(d, what, pc);
			*transport = false;
			return -EKEYEXPIRED;
		}
		if (pc->status == -EKEYREJECTED) {
			/* Expired, absent, or older than our trunc_gen:
			 * refresh (with a new cap) as for a stale round. */
			d->op.cl->caps_on = true;
			fc_cap_drop(d->op.cl, d->ino);
			stale = true;
		} else if (pc->status == -ESTALE)
			stale = true;
		else if (takeover_err(pc->status))
			*transport = true;
		if (!bad)
			bad = pc;
	}
	if (!bad)
		return 0;
	/* docs/ARCHITECTURE.md "Integrity": data damaged on its way to the
	 * iod (Write.data_crc) is sent once more. */
	if (bad->status == -EBADMSG && d->kind == DOP_WRITE &&
	    d->crc_tries < 1 && !cl->stopping) {
		d->crc_tries++;
		log_piece_err(d, what, bad);
		reissue(&d->op);
		return 1;
	}
	if (stale && d->stale_tries < FC_STALE_TRIES && !cl->stopping) {
		d->stale_tries++;
		refresh(d, true, reissue);
		return 1;
	}
	if (*transport && remaining_ms(d) > FC_TAKEOVER_POLL_MS &&
	    !cl->stopping && !fc_op_interrupted(&d->op)) {
		takeover_start(d, reissue);
		return 1;
	}
	log_piece_err(d, what, bad);
	return bad->status;
}

static void write_finish(struct dop *d)
{
	bool transport;
	int rc = round_end(d, "write", write_issue, &transport);

	if (rc == 0) {
		write_landed(d);
		write_end(d, 0);
	} else if (rc < 0) {
		write_end(d, fc_op_interrupted(&d->op) && transport ? EINTR :
			  fc_user_err(rc));
	}
}

/* What a write or fallocate that landed changes in its open file and in
 * the client's view of the inode. */
static void write_landed(struct dop *d)
{
	struct fc_client *cl = d->op.cl;
	struct fc_file *f = d->f;
	uint64_t end = d->off + d->size;
	bool grows = d->kind == DOP_WRITE ||
		     ((d->kind == DOP_ALLOC || d->kind == DOP_ZERO) &&
		      !d->keep_size);

	if (f->end_gen != d->attr.trunc_gen) {
		f->end_gen = d->attr.trunc_gen;
		f->end = 0;
	}
	if (grows && end > f->end)
		f->end = end;
	/* KEEP_SIZE allocation changes neither data nor size: its blocks go
	 * with the next report.  A write overtaken by an explicit mtime set
	 * keeps that mtime (report.c). */
	if (d->kind != DOP_ALLOC || !d->keep_size) {
		f->write_gen++;
		if (!fc_times_kept(cl, d->ino, d->times_seq)) {
			tw_realtime(&f->mtime_sec, &f->mtime_nsec);
			f->mtime_gen = f->write_gen;
		}
	}
	if (grows)
		fc_inode_note_write(cl, d->ino, end, d->attr.trunc_gen);
	fc_file_dirty(cl, f);
}

static void write_piece_cb(int status, struct wire_msg *reply, void *arg)
{
	struct piece *pc = arg;
	struct dop *d = pc->d;

	pc->status = status;
	pc->failed_iod = wire_failed_iod(reply);
	if (status < 0 && fc_is_transport_err(status))
		fc_report(d->op.cl, pc->iod, status);
	if (status == 0) {
		if (reply->body->descriptor == &twinfs__write_reply__descriptor) {
			const Twinfs__WriteReply *wr = (const void *)reply->body;
			uint32_t k = pc->p.column;
			struct fc_file *f = d->f;

			/* Writes of one file may be in flight together
			 * (write-behind) and answer out of order: allocation
			 * only grows with writes, so an older count must not
			 * replace a newer one.  A punch, or a new trunc_gen,
			 * sets it. */
			bool older = d->kind == DOP_WRITE &&
				     (f->cols_seen & (1u << k)) &&
				     f->end_gen == d->attr.trunc_gen &&
				     wr->blocks < f->col_blocks[k];

			if (!older)
				f->col_blocks[k] = wr->blocks;
			f->cols_seen |= 1u << k;
		} else {
			pc->status = -EIO;
		}
	}
	if (reply)
		wire_msg_free(reply);
	if (--d->pending == 0)
		write_finish(d);
}

static void write_piece_cb(int status, struct wire_msg *reply, void *arg);

/* The file's layout as sent with a WRITE or FALLOCATE (borrows groups). */
static void layout_pb(struct r0_layout *l, Twinfs__Layout *pb)
{
	twinfs__layout__init(pb);
	pb->stripe_size = l->stripe_size;
	pb->stripe_count = l->stripe_count;
	pb->n_groups = l->stripe_count;
	pb->groups = l->groups;
}

/* A piece of a fallocate: FALLOCATE to the column's primary, which
 * forwards it to its twin as it does a WRITE. */
static void space_send(struct dop *d, struct piece *pc, uint32_t timeout_ms)
{
	struct fc_client *cl = d->op.cl;
	Twinfs__Fallocate fa;
	Twinfs__Layout lpb;

	twinfs__fallocate__init(&fa);
	layout_pb(&d->attr.layout, &lpb);
	fa.ino = d->ino;
	fa.column = pc->p.column;
	fa.offset = pc->p.sub_off;
	fa.length = pc->p.len;
	fa.punch = d->kind == DOP_PUNCH || d->kind == DOP_ZERO;
	fa.zero = d->kind == DOP_ZERO;
	fa.trunc_gen = d->attr.trunc_gen;
	fa.epoch = cl->epoch;
	fa.session = write_session(d);
	fa.layout = &lpb;
	fc_cap_attach(cl, d->ino, true, &fa.cap);
	fc_call(cl, pc->iod ? pc->iod->peer : NULL,
		TWINFS__MSG_TYPE__MSG_FALLOCATE, &fa.base, NULL, 0,
		timeout_ms, write_piece_cb, pc);
}

/* A fallocate's pieces: one per column (in chunks of at most
 * SPACE_CHUNK), the column's subfile range for the file range being
 * [bytes of the column below off, bytes below off + len) (r0_subfile_size).
 * file_off and unit of a piece are unused. */
#define SPACE_CHUNK (1u << 30)

static int space_pieces(struct dop *d)
{
	const struct r0_layout *l = &d->attr.layout;
	uint64_t n = 0, cap = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t k = 0; k < l->stripe_count; k++) {
			uint64_t a = r0_subfile_size(l, k, d->off);
			uint64_t b = r0_subfile_size(l, k, d->off + d->size);

			for (; a < b; n++) {
				uint32_t len = (uint32_t)TW_MIN(b - a,
						(uint64_t)SPACE_CHUNK);

				if (pass == 1) {
					assert(n < cap);
					d->pieces[n] = (struct piece){
						.d = d, .status = 1,
						.p = { .column = k, .sub_off = a,
						       .len = len } };
				}
				a += len;
			}
		}
		if (pass == 0) {
			cap = n;
			n = 0;
			d->pieces = calloc(cap ? cap : 1, sizeof(*d->pieces));
			if (!d->pieces)
				return -ENOMEM;
		}
	}
	d->npieces = (int)n;
	return 0;
}

/* Write-behind (wbehind.c): answer a buffered write once its pieces are
 * known, before they land.  Never for O_DIRECT, O_SYNC/O_DSYNC (the
 * caller asked to wait), O_APPEND (direct_io, reserved at mgrd), a write
 * that clears setuid/setgid (kill_privs) or page-cache writeback.  The
 * size it makes is ours from now on (a stat before it lands must not
 * shrink the file under the kernel). */
static void maybe_behind(struct dop *d)
{
	struct fc_client *cl = d->op.cl;

	if (d->kind != DOP_WRITE || !d->op.req || d->writepage ||
	    d->append || d->kill || d->kill_cap ||
	    (d->flags & (O_DIRECT | O_DSYNC | O_APPEND)) ||
	    (d->f->flags & (O_DIRECT | O_DSYNC)))
		return;
	if (!fc_wb_detach(cl, &d->wb, d->size))
		return;
	fc_inode_note_write(cl, d->ino, d->off + d->size, d->attr.trunc_gen);
	fc_op_reply_early_write(&d->op, d->size);
}

/* Tests only (TWINFS_TEST_FAULTS=1 and TWINFS_TEST_CORRUPT_WRITE=N): the
 * data of the next N WRITE frames leaves with one byte flipped (in a copy:
 * the data itself stays right for the resend), so the iod must refuse it
 * (t_integrity.sh). */
static void fault_corrupt(struct wire_zdata *z)
{
	static int left = -1;     /* I/O thread only */
	uint8_t *copy;

	if (left < 0) {
		const char *f = getenv("TWINFS_TEST_FAULTS");
		const char *n = getenv("TWINFS_TEST_CORRUPT_WRITE");

		left = f && strcmp(f, "1") == 0 && n ? atoi(n) : 0;
		if (left > 0)
			tw_warn("TWINFS_TEST_FAULTS=1: the data of the next %d "
				"WRITE frames is damaged on its way", left);
	}
	if (left <= 0 || z->len == 0 || !(copy = malloc(z->len)))
		return;
	left--;
	memcpy(copy, z->base, z->len);
	copy[z->len / 2] ^= 0x5a;
	z->release(z->arg);
	*z = (struct wire_zdata){ .base = copy, .len = z->len,
				  .release = free, .arg = copy };
}

/* Measurement only (TWINFS_BENCH_NO_CSUM=1, test/bench/csum_cost.sh): WRITE
 * data goes without its CRC. */
static bool bench_no_csum(void)
{
	static atomic_int off = -1;   /* FUSE workers: the same answer */

	if (atomic_load(&off) < 0) {
		const char *v = getenv("TWINFS_BENCH_NO_CSUM");

		atomic_store(&off, v && strcmp(v, "1") == 0);
	}
	return atomic_load(&off) > 0;
}

/* The piece's Write.data_crc, made of the sums taken as its bytes
 * entered (dcrc.c), never of the buffer as it is now (docs/ARCHITECTURE.md
 * "Integrity").  False: bytes of the piece changed in our buffer since;
 * the piece fails -EBADMSG, unsent. */
static bool piece_crc(struct dop *d, struct piece *pc)
{
	assert(d->wbuf);
	if (pc->has_crc || !d->wbuf->crc)
		return true;
	if (fc_dcrc_range(d->wbuf->crc, d->buf, pc->p.file_off - d->off,
			  pc->p.len, &pc->crc) < 0) {
		pc->iod = NULL;
		pc->status = -EBADMSG;
		return false;
	}
	pc->has_crc = true;
	return true;
}

/* ------------------------------------------------ joining small writes
 *
 * tar, cp of small files and many other writers write a file in records
 * of a few KiB; each would be a WRITE to the primary and its forward to
 * the twin, and an iod spends about as much on a small WRITE as on one of
 * 64 KiB.  So a write answered early (write-behind) that is smaller than
 * FC_JOIN_MAX and ends inside its stripe unit is parked (wbehind.c): it
 * holds its range but waits, unsent, for the next write of its open file.
 * When that one continues it in the same stripe unit, its bytes are
 * copied behind the parked write's and it rides in the same WRITE: one
 * piece, one Write.data_crc combined from the two sums taken as the bytes
 * entered (tw_crc32c_combine: the data is never summed again from our
 * copy), ended with it (write_end), success or failure, as if each had
 * landed on its own.  A parked write goes out when it cannot grow any
 * more (FC_JOIN_MAX, the end of its unit), when a write that does not
 * continue it comes, when anything must wait for its range (a read,
 * flush, fsync, release, truncate or lock: fc_wb_enter kicks it), at a
 * SETATTR of its inode (tar's utimensat, fchown, fchmod: the data lands
 * while they run), when the client stops, and FC_JOIN_WAIT_MS after it
 * was parked at the latest.  A write never parks while an operation of
 * its inode waits (fc_wb_park), so the park delays only the landing of
 * writes already answered, never an operation someone waits for.  A
 * rider's bytes land under the trunc_gen its WRITE carried, the parked
 * write's (write_end). */
#define FC_JOIN_MAX     (64u << 10)
#define FC_JOIN_WAIT_MS 1

static void write_send(struct fc_op *op);

/* Whether d may still grow by a write that continues it. */
static bool join_open(const struct dop *d)
{
	const struct r0_piece *p = &d->pieces[0].p;

	return d->size < FC_JOIN_MAX &&
	       (p->file_off + p->len) % d->attr.layout.stripe_size != 0;
}

/* Whether d, just split into its pieces, may wait for the next write. */
static bool parkable(const struct dop *d)
{
	return d->kind == DOP_WRITE && d->wb.behind && d->npieces == 1 &&
	       d->pieces[0].attempts == 0 && !d->op.cl->stopping &&
	       join_open(d);
}

static void park_timer_cb(uv_timer_t *t)
{
	fc_wb_kick(t->data, 0);
}

/* Join d, a parkable write, into p, the parked write of its inode, when d
 * continues p in p's stripe unit through the same open file: true, and d
 * rides with p from now on.  False: nothing changed, or (a piece's bytes
 * changed in our buffer since they entered) that piece failed -EBADMSG
 * and goes its own way, as an unjoined one would. */
static bool join(struct dop *p, struct dop *d)
{
	struct piece *a = &p->pieces[0], *b = &d->pieces[0];
	uint64_t s = p->attr.layout.stripe_size;
	size_t total = p->size + d->size;

	if (p->f != d->f || p->attr.trunc_gen != d->attr.trunc_gen ||
	    a->p.column != b->p.column ||
	    a->p.file_off + a->p.len != b->p.file_off ||
	    a->p.sub_off + a->p.len != b->p.sub_off ||
	    a->p.file_off / s != (b->p.file_off + b->p.len - 1) / s ||
	    total > FC_JOIN_MAX ||
	    (p->wbuf->crc == NULL) != (d->wbuf->crc == NULL))
		return false;
	if (!piece_crc(p, a) || !piece_crc(d, b))
		return false;
	if (p->wbuf->cap < total) {
		size_t cap = TW_MIN(TW_MAX(2 * total, (size_t)16 << 10),
				    (size_t)FC_JOIN_MAX);
		struct fc_wbuf *nb;

		assert(p->wbuf->refs == 1);   /* unsent: no frame holds it */
		nb = realloc(p->wbuf, sizeof(*nb) + cap);
		if (!nb)
			return false;
		nb->cap = cap;
		p->wbuf = nb;
		p->buf = nb->bytes;
	}
	memcpy(p->buf + p->size, d->buf, d->size);
	if (a->has_crc)
		a->crc = tw_crc32c_combine(a->crc, b->crc, b->p.len);
	a->p.len += b->p.len;
	p->size = total;
	wbuf_put(d->wbuf);
	d->wbuf = NULL;
	d->buf = NULL;
	d->rider_next = NULL;
	if (!p->riders)
		p->riders_tail = &p->riders;
	*p->riders_tail = d;
	p->riders_tail = &d->rider_next;
	return true;
}

/* Before d's first send: true when d was parked or joined into the
 * parked write of its inode (it is sent later, or with that one). */
static bool park_or_join(struct dop *d)
{
	struct fc_client *cl = d->op.cl;
	struct dop *p = (struct dop *)fc_wb_parked(cl, d->ino);
	bool may = parkable(d);

	if (p && may && join(p, d)) {
		if (!join_open(p))
			fc_wb_kick(cl, d->ino);
		return true;
	}
	if (p)
		fc_wb_kick(cl, d->ino);   /* goes out before d */
	/* Its bytes changed in our buffer (join): it fails unsent. */
	if (!may || d->pieces[0].status != 1)
		return false;
	if (!fc_wb_park(cl, &d->wb, write_send))
		return false;   /* someone waits for the inode: send now */
	if (!uv_is_active((uv_handle_t *)&cl->park_timer))
		uv_timer_start(&cl->park_timer, park_timer_cb,
			       FC_JOIN_WAIT_MS, 0);
	return true;
}

static void write_issue(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	struct fc_client *cl = op->cl;
	int i, n;

	if (!load_attr(d)) {
		if (d->tries++ > 1 || cl->stopping) {
			char path[FC_PATH_LOG];

			tw_log_rl(TW_LOG_WARN, "write %s: no usable layout",
				  fc_ino_path(cl, d->ino, path, sizeof(path)));
			write_end(d, EIO);
			return;
		}
		refresh(d, !cl->have_map, write_issue);
		return;
	}
	if (cap_first(d, write_issue))
		return;
	/* Answered by the worker under the trunc_gen it had then: the size
	 * is ours under the one the write goes out with too (a truncate by
	 * another mount may have come in between). */
	if (d->early)
		fc_inode_note_write(cl, d->ino, d->off + d->size,
				    d->attr.trunc_gen);
	if (!d->pieces && hold_to_limit(d) != 0) {
		write_end(d, EFBIG);
		return;
	}
	if (!d->pieces && d->kind != DOP_WRITE) {
		if (space_pieces(d) < 0) {
			write_end(d, ENOMEM);
			return;
		}
		if (d->npieces == 0) {
			write_end(d, 0);
			return;
		}
	} else if (!d->pieces) {
		uint64_t cnt = r0_piece_count(&d->attr.layout, d->off, d->size);

		d->pieces = calloc(cnt ? cnt : 1, sizeof(*d->pieces));
		if (!d->pieces) {
			write_end(d, ENOMEM);
			return;
		}
		n = 0;
		{
			struct r0_piece *tmp = calloc(cnt ? cnt : 1,
						      sizeof(*tmp));

			if (tmp)
				n = r0_split(&d->attr.layout, d->off, d->size,
					     tmp, (int)cnt);
			for (i = 0; tmp && i < n; i++) {
				d->pieces[i].d = d;
				d->pieces[i].p = tmp[i];
				d->pieces[i].status = 1;
			}
			free(tmp);
			if (!tmp || n < 0) {
				write_end(d, tmp ? EIO : ENOMEM);
				return;
			}
		}
		d->npieces = n;
		if (n == 0) {
			write_end(d, 0);
			return;
		}
		maybe_behind(d);
		if (park_or_join(d))
			return;
	} else {
		/* A new round: layouts never change once written, but
		 * trunc_gen and the map may have. */
		for (i = 0; i < d->npieces; i++)
			if (d->pieces[i].status != 0)
				d->pieces[i].status = 1;
	}
	write_send(op);
}

/* Send every piece of d that has not answered yet (status 1). */
static void write_send(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	struct fc_client *cl = op->cl;
	uint64_t left;
	int i;

	left = attempt_ms(d);
	d->pending = 1;   /* guard while issuing */
	for (i = 0; i < d->npieces; i++) {
		struct piece *pc = &d->pieces[i];
		Twinfs__Write w;
		Twinfs__Layout lpb;
		struct wire_zdata z;
		uint32_t k = pc->p.column;

		if (pc->status != 1)
			continue;
		if (d->kind == DOP_WRITE && !piece_crc(d, pc))
			continue;
		pc->iod = fc_map_write_iod(cl, d->ino,
					   d->attr.layout.groups[k], k);
		if (!pc->iod && d->map_polled &&
		    fc_group_failed(cl, d->attr.layout.groups[k])) {
			pc->status = -EHOSTDOWN;
			continue;
		}
		pc->attempts++;
		{
			bool settled;

			pc->issue_sig = fc_group_sig(cl, d->attr.layout.groups[k],
						     &settled);
		}
		d->pending++;
		if (d->kind != DOP_WRITE) {
			space_send(d, pc, (uint32_t)left);
			continue;
		}
		twinfs__write__init(&w);
		layout_pb(&d->attr.layout, &lpb);
		w.ino = d->ino;
		w.column = k;
		w.offset = pc->p.sub_off;
		w.trunc_gen = d->attr.trunc_gen;
		w.epoch = cl->epoch;
		w.sync = (d->f->flags & O_DSYNC) != 0;
		w.session = write_session(d);
		w.layout = &lpb;
		fc_cap_attach(cl, d->ino, true, &w.cap);
		/* Sent from d->buf itself: the frame holds a reference. */
		d->wbuf->refs++;
		z = (struct wire_zdata){
			.base = d->buf + (pc->p.file_off - d->off),
			.len = pc->p.len, .release = wbuf_put, .arg = d->wbuf };
		w.data_crc = pc->crc;
		w.has_crc = pc->has_crc;
		fault_corrupt(&z);
		fc_call_z(cl, pc->iod ? pc->iod->peer : NULL,
			  TWINFS__MSG_TYPE__MSG_WRITE, &w.base, &z,
			  (uint32_t)left, write_piece_cb, pc);
	}
	if (--d->pending == 0)
		write_finish(d);
}

/* O_APPEND: the offset comes from a reservation at mgrd
 * (docs/ARCHITECTURE.md "Metadata"), so appends from two mounts never
 * overlap.  One reservation per WRITE request; such files are opened
 * direct_io (fc_open_direct_io), so one write(2) of up to max_write bytes
 * is one request, atomic across mounts. */
static void append_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct dop *d = mc->arg;

	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor != &twinfs__append_reply__descriptor))
		status = -EIO;
	if (status == 0) {
		const Twinfs__AppendReply *r = (const void *)reply->body;

		d->off = r->offset;
		/* Our reservation is under mgrd's trunc_gen. */
		if (r->trunc_gen > d->attr.trunc_gen)
			d->attr.trunc_gen = r->trunc_gen;
	}
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		char path[FC_PATH_LOG];

		tw_log_rl(TW_LOG_WARN, "append %s: reserving %zu "
			  "bytes at mgrd: %s",
			  fc_ino_path(d->op.cl, d->ino, path, sizeof(path)),
			  d->size,
			  strerror(-status));
		write_end(d, fc_errno(status));
		return;
	}
	d->append = false;
	write_issue(&d->op);
}

static void append_reserve(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	struct fc_client *cl = op->cl;
	uint64_t local = 0;

	if (!load_attr(d)) {
		if (d->tries++ > 1 || cl->stopping) {
			write_end(d, EIO);
			return;
		}
		refresh(d, !cl->have_map, append_reserve);
		return;
	}
	/* The merged size counts this client's writes mgrd has not seen. */
	fc_inode_get(cl, d->ino, NULL, &local);
	twinfs__append_reserve__init(&d->m.append);
	d->m.append.ino = d->ino;
	d->m.append.length = d->size;
	d->m.append.trunc_gen = d->attr.trunc_gen;
	d->m.append.local_end = local;
	fc_mgr_send(cl, &d->mc, TWINFS__MSG_TYPE__MSG_APPEND_RESERVE,
		    &d->m.append.base, &d->m.append.ctx, op, 0, append_done, d);
}

static void write_begin(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	if (d->append && d->size > 0)
		append_reserve(op);
	else
		write_issue(op);
}

/* Privileges on a write (docs/ARCHITECTURE.md "Privileges on a
 * write").  Without
 * FUSE_HANDLE_KILLPRIV_V2 the kernel clears setuid/setgid and
 * security.capability before a write through its cache
 * (file_remove_privs), but leaves setuid/setgid to the file system for a
 * direct_io handle (FUSE_WRITE_KILL_SUIDGID, which libfuse does not pass
 * on).  With it (kio.c) every write is ours.  Such a write drops
 * security.capability at mgrd (kill_cap), then sets the mode (kill_privs),
 * before its data goes out, as the kernel's requests would. */
static void kill_privs(struct fc_op *op);

static void kill_cap_done(struct fc_mgr_call *mc, int status,
			  struct wire_msg *reply)
{
	struct dop *d = mc->arg;

	status = fc_kill_cap_done(d->op.cl, d->ino, status, reply);
	if (status < 0) {
		write_end(d, fc_errno(status));
		return;
	}
	d->kill_cap = false;
	if (d->kill)
		kill_privs(&d->op);
	else
		write_begin(&d->op);
}

static void kill_done(struct fc_mgr_call *mc, int status,
		      struct wire_msg *reply)
{
	struct dop *d = mc->arg;
	struct fc_client *cl = d->op.cl;
	struct fc_attr a;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		write_end(d, fc_errno(status));
		return;
	}
	fc_inode_update(cl, &a, NULL);
	/* The kernel keeps the old mode until attr_timeout: a WRITE brings
	 * it no attributes.  Attributes only (offset -1: no page lock), as
	 * open_done sends from the loop. */
	if (cl->se)
		fuse_lowlevel_notify_inval_inode(cl->se, d->ino, -1, 0);
	write_begin(&d->op);
}

static void kill_privs(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	twinfs__setattr__init(&d->m.setattr);
	d->m.setattr.ino = d->ino;
	d->m.setattr.valid = TWINFS__SETATTR_VALID__SA_MODE;
	d->m.setattr.mode = d->kill_mode;
	fc_mgr_send(op->cl, &d->mc, TWINFS__MSG_TYPE__MSG_SETATTR,
		    &d->m.setattr.base, &d->m.setattr.ctx, op, 0, kill_done,
		    d);
}

static void write_start(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	/* Answered by the worker (fc_write): it holds its range now. */
	if (d->early && !d->wb.behind)
		fc_wb_adopt(&d->wb, d->size);

	/* A descriptor opened under a session mgrd expired is dead (we hold
	 * a new one): the iods would refuse its writes (proto/FORMAT.md
	 * "Fencing"), and an append would first reserve bytes at mgrd that
	 * nobody writes.  Page-cache writeback is not a descriptor's: it
	 * names the current session (write_session). */
	if (!d->writepage &&
	    fc_open_expired(op->cl, d->ino, d->f->session, "write")) {
		write_end(d, EIO);
		return;
	}

	d->deadline = tw_now_ms() +
		      FC_OP_DEADLINE(op->cl->opts.request_timeout_ms);
	if (d->kill_cap)
		fc_kill_cap_send(op, &d->mc, &d->m.xattr, d->ino,
				 kill_cap_done, d);
	else if (d->kill)
		kill_privs(op);
	else
		write_begin(op);
}

/* A write or fallocate holds its range in the inode's order (wbehind.c)
 * from here to write_end; an append's offset is not known yet: it holds
 * the whole file. */
static void write_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	uint64_t off = d->append ? 0 : d->off;
	uint64_t end = d->append ? UINT64_MAX : d->off + d->size;

	d->f->refs++;
	d->times_seq = fc_times_seq(op->cl);
	if (fc_wb_enter(op->cl, &d->wb, op, d->ino, off, end, true,
			write_start))
		write_start(op);
}

/* A write-like op on [off, off + size) of an open file. */
static struct dop *range_dop(fuse_req_t req, fuse_ino_t ino,
			     struct fuse_file_info *fi, uint64_t off,
			     size_t size)
{
	struct dop *d = fc_dop_new(req, write_run);

	if (d) {
		d->ino = ino;
		d->f = fc_fh_file(fi);
		d->off = off;
		d->size = size;
		atomic_store(&d->f->touched, true);
		atomic_store(&d->f->wrote, true);
	}
	return d;
}

/* Below this end a write fits every layout (a one-column file's limit is
 * the subfile's): an early answer never promises bytes that
 * hold_to_limit would refuse.  While the map has not said, 1 TiB. */
static uint64_t early_limit(struct fc_client *cl)
{
	uint64_t m = atomic_load(&cl->max_subfile);

	return m ? m : 1ull << 40;
}

/* Write-behind answered on the FUSE worker (wbehind.c), which spares the
 * application the wait for the loop thread to wake: the writes
 * maybe_behind would answer early, when this client has the inode's
 * attributes, so that the size the write makes is noted before the
 * application sees the answer (a stat must not shrink it), and within the
 * caps. */
static bool early_ok(struct dop *d)
{
	struct fc_client *cl = d->op.cl;

	if (d->size == 0 || d->append || d->writepage || d->kill ||
	    d->kill_cap ||
	    (d->flags & (O_DIRECT | O_DSYNC | O_APPEND)) ||
	    (d->f->flags & (O_DIRECT | O_DSYNC)) ||
	    d->off + d->size > early_limit(cl) ||
	    !fc_wb_reserve(cl, d->size))
		return false;
	/* Reserved first: a note cannot be taken back. */
	if (!fc_inode_note_write_now(cl, d->ino, d->off + d->size)) {
		fc_wb_unreserve(cl, d->size);
		return false;
	}
	return true;
}

/* What a change of d's data by the caller of req must drop first (see
 * kill_cap_done): fsetid, whether the caller has CAP_FSETID; all, whether
 * the kernel leaves all of it to us, else only a direct_io handle's
 * setuid/setgid is ours. */
static void data_kills(fuse_req_t req, struct dop *d, bool fsetid, bool all)
{
	if (all || fc_open_direct_io(d->f->flags))
		d->kill = fc_write_kills_privs(req, d->ino, fsetid,
					       &d->kill_mode);
	d->kill_cap = all && fc_may_have_cap(d->op.cl, d->ino);
}

void fc_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	      off_t off, struct fuse_file_info *fi)
{
	struct dop *d;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	d = range_dop(req, ino, fi, (uint64_t)off, size);
	if (d) {
		/* The kernel sends the descriptor's current flags with each
		 * write: fcntl(F_SETFL) may have changed O_APPEND.  Page
		 * cache writeback (writepage) carries its own offset. */
		d->append = (fi->flags & O_APPEND) != 0 && !fi->writepage;
		d->writepage = fi->writepage != 0;
		d->flags = fi->flags;
		if (!d->writepage && size > 0) {
			bool v2 = fc_kio_killpriv_v2();

			data_kills(req, d, v2 ? !fc_kio_kill_suidgid() :
					   fuse_req_ctx(req)->uid == 0, v2);
		}
		d->wbuf = malloc(sizeof(*d->wbuf) + (size ? size : 1));
		if (d->wbuf) {
			d->wbuf->refs = 1;
			d->wbuf->cap = size;
			/* Summed as the bytes enter, from the kernel's
			 * buffer: the WRITEs' data_crc (dcrc.c). */
			d->wbuf->crc = bench_no_csum() ? NULL :
				fc_dcrc_new(buf, size, (uint64_t)off);
			if (!bench_no_csum() && !d->wbuf->crc) {
				free(d->wbuf);
				d->wbuf = NULL;
			}
		}
		if (d->wbuf) {
			d->buf = d->wbuf->bytes;
			memcpy(d->buf, buf, size);
		}
		/* The reference on d->f is taken on the loop thread
		 * (write_run); fc_dop_submit() frees a failed op without cleanup. */
	}
	if (d && d->buf && early_ok(d)) {
		d->early = true;
		fc_loop_submit_written(d->op.cl, &d->op, size);
		return;
	}
	fc_dop_submit(req, d, d && d->buf);
}

/* fallocate(2): the default mode and KEEP_SIZE allocate on both twins of
 * every stripe unit touched (default mode then extends the size through
 * mgrd as a write does, by its report); PUNCH_HOLE|KEEP_SIZE zeroes the
 * range through each column's primary; ZERO_RANGE (with or without
 * KEEP_SIZE) punches and allocates again, and may extend the size.
 * COLLAPSE_RANGE, INSERT_RANGE and anything else: EOPNOTSUPP. */
void fc_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi)
{
	struct dop *d;
	int kind;

	if (off < 0 || len <= 0 || off > INT64_MAX - len) {
		fuse_reply_err(req, off < 0 || len <= 0 ? EINVAL : EFBIG);
		return;
	}
	if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE)
		kind = DOP_ALLOC;
	else if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		kind = DOP_PUNCH;
	else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE)
		kind = DOP_ZERO;
	else {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	d = range_dop(req, ino, fi, (uint64_t)off, (size_t)len);
	if (d) {
		d->kind = kind;
		d->keep_size = (mode & FALLOC_FL_KEEP_SIZE) != 0;
		/* ext4 drops privileges on fallocate as on a write
		 * (file_modified); FUSE's kernel side never checks, with or
		 * without KILLPRIV_V2, and FALLOCATE says nothing of
		 * CAP_FSETID: root stands for it. */
		data_kills(req, d, fuse_req_ctx(req)->uid == 0, true);
	}
	fc_dop_submit(req, d, true);
}

/* ----------------------------------------------------------------- read */

static void read_send(struct dop *d, struct piece *pc);

/* The unit's index within its subfile (its stripe row), for
 * r1_read_twin: with the file-wide unit number u, u mod C == column, so
 * for an even stripe_count (ino + column + u) mod 2 would be the same for
 * every unit of a column and reads would never alternate between twins. */
static uint64_t read_row(const struct dop *d, const struct piece *pc)
{
	return pc->p.unit / d->attr.layout.stripe_count;
}
static void read_issue(struct fc_op *op);

/* Zeros for the parts of a read that no subfile holds (holes, short
 * subfiles).  Never written: its pages stay the kernel's zero page. */
static uint8_t zeros[1u << 16];

/* Answer a read from the pieces' replies, in file order (r0_split), with
 * zeros after each piece's data up to its length: one writev to the
 * kernel, no copy into a buffer of our own. */
static void read_reply(struct dop *d)
{
	struct iovec *iov;
	int n = 0, cap = 0;

	for (int i = 0; i < d->npieces; i++) {
		const struct piece *pc = &d->pieces[i];

		cap += 1 + (int)((pc->p.len - pc->got + sizeof(zeros) - 1) /
				 sizeof(zeros));
	}
	iov = malloc((size_t)(cap ? cap : 1) * sizeof(*iov));
	if (!iov) {
		fc_op_reply_err(&d->op, ENOMEM);
		return;
	}
	for (int i = 0; i < d->npieces; i++) {
		const struct piece *pc = &d->pieces[i];
		uint64_t zero = pc->p.len - pc->got;

		assert(i == 0 || pc->p.file_off == pc[-1].p.file_off +
		       pc[-1].p.len);
		if (pc->got)
			iov[n++] = (struct iovec){ pc->reply->data, pc->got };
		while (zero) {
			size_t z = (size_t)TW_MIN(zero, (uint64_t)sizeof(zeros));

			iov[n++] = (struct iovec){ zeros, z };
			zero -= z;
		}
	}
	assert(n <= cap);
	fc_op_reply_iov(&d->op, iov, n);
	free(iov);
}

static void read_finish(struct dop *d)
{
	bool transport;
	int rc = round_end(d, "read", read_issue, &transport);

	if (rc == 0) {
		if (d->f)
			fc_file_accessed(d->op.cl, d->f);
		read_reply(d);
	} else if (rc < 0) {
		/* An interrupted read gives up on any error but a group
		 * with no twin up. */
		fc_op_reply_err(&d->op, rc != -EHOSTDOWN &&
				fc_op_interrupted(&d->op) ? EINTR :
				fc_user_err(rc));
	}
}

static void read_piece_cb(int status, struct wire_msg *reply, void *arg)
{
	struct piece *pc = arg;
	struct dop *d = pc->d;

	/* The data stays in the reply until the answer (read_reply). */
	wire_msg_free(pc->reply);
	pc->reply = NULL;
	pc->got = 0;
	if (status == 0 && reply->body &&
	    reply->body->descriptor == &twinfs__read_reply__descriptor &&
	    ((const Twinfs__ReadReply *)reply->body)->has_crc &&
	    ((const Twinfs__ReadReply *)reply->body)->data_crc !=
	    tw_crc32c(0, reply->data, reply->data_len))
		status = -EBADMSG;   /* damaged on the way: the twin serves */
	if (status == 0) {
		pc->got = TW_MIN(reply->data_len, pc->p.len);
		pc->reply = reply;
		reply = NULL;
	} else if (status == -ENOENT) {
		/* Subfiles are created by the first write: a missing one
		 * reads as zeros. */
		status = 0;
	}
	if (reply)
		wire_msg_free(reply);
	if (status == 0) {
		pc->status = 0;
	} else {
		struct fc_client *cl = d->op.cl;
		struct fc_iod *other = NULL;

		pc->status = status;
		if (fc_is_transport_err(status))
			fc_report(cl, pc->iod, status);
		/* -EUCLEAN: bad on both twins (proto/FORMAT.md "Integrity"),
		 * which the iod found with its twin: final. */
		if (status != -ESTALE && status != -EUCLEAN &&
		    !cap_refusal(status) &&
		    !cl->stopping &&
		    !fc_op_interrupted(&d->op) && remaining_ms(d) > 0 &&
		    pc->attempts < 2) {
			uint32_t k = pc->p.column;

			other = fc_map_read_iod(cl, d->ino,
						d->attr.layout.groups[k], k,
						read_row(d, pc), pc->iod);
			if (other == pc->iod)
				other = NULL;
		}
		if (other && pc->iod) {
			char name[96], cause[64], path[FC_PATH_LOG];

			tw_log_rl(TW_LOG_WARN, "read %s: %s %s; "
				  "trying its twin iod %u",
				  fc_ino_path(cl, d->ino, path, sizeof(path)),
				  fc_iod_name(pc->iod, name, sizeof(name)),
				  fc_cause(cl, status, cause, sizeof(cause)),
				  other->id);
		}
		if (other) {
			pc->iod = other;
			read_send(d, pc);
			return;
		}
	}
	if (--d->pending == 0)
		read_finish(d);
}

static void read_send(struct dop *d, struct piece *pc)
{
	struct fc_client *cl = d->op.cl;
	Twinfs__Read r;
	uint32_t k = pc->p.column;

	pc->attempts++;
	{
		bool settled;

		pc->issue_sig = fc_group_sig(cl, d->attr.layout.groups[k],
					     &settled);
	}
	twinfs__read__init(&r);
	r.ino = d->ino;
	r.column = k;
	r.offset = pc->p.sub_off;
	r.length = pc->p.len;
	r.epoch = cl->epoch;
	fc_cap_attach(cl, d->ino, false, &r.cap);
	fc_call(cl, pc->iod ? pc->iod->peer : NULL, TWINFS__MSG_TYPE__MSG_READ,
		&r.base, NULL, 0, attempt_ms(d), read_piece_cb, pc);
}

static void read_issue(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	struct fc_client *cl = op->cl;
	uint64_t size;
	int i, n;

	if (!load_attr(d)) {
		if (d->tries++ > 1 || cl->stopping) {
			char path[FC_PATH_LOG];

			tw_log_rl(TW_LOG_WARN, "read %s: no usable layout",
				  fc_ino_path(cl, d->ino, path, sizeof(path)));
			fc_op_reply_err(op, EIO);
			return;
		}
		refresh(d, !cl->have_map, read_issue);
		return;
	}
	if (cap_first(d, read_issue))
		return;
	if (!d->pieces) {
		uint64_t cnt;
		struct r0_piece *tmp;

		fc_inode_get(cl, d->ino, NULL, &size);
		if (d->off >= size) {
			fc_op_reply_buf(op, NULL, 0);
			return;
		}
		if (d->size > size - d->off)
			d->size = (size_t)(size - d->off);
		cnt = r0_piece_count(&d->attr.layout, d->off, d->size);
		d->pieces = calloc(cnt ? cnt : 1, sizeof(*d->pieces));
		tmp = calloc(cnt ? cnt : 1, sizeof(*tmp));
		if (!d->pieces || !tmp) {
			free(tmp);
			fc_op_reply_err(op, ENOMEM);
			return;
		}
		n = r0_split(&d->attr.layout, d->off, d->size, tmp, (int)cnt);
		for (i = 0; i < n; i++) {
			d->pieces[i].d = d;
			d->pieces[i].p = tmp[i];
		}
		free(tmp);
		if (n < 0) {
			fc_op_reply_err(op, EIO);
			return;
		}
		d->npieces = n;
		if (n == 0) {
			fc_op_reply_buf(op, NULL, 0);
			return;
		}
	}
	d->pending = 1;
	for (i = 0; i < d->npieces; i++) {
		struct piece *pc = &d->pieces[i];
		uint32_t k = pc->p.column;

		if (pc->status == 0 && pc->attempts)
			continue;
		pc->attempts = 0;
		pc->iod = fc_map_read_iod(cl, d->ino, d->attr.layout.groups[k],
					  k, read_row(d, pc), NULL);
		if (!pc->iod && d->map_polled &&
		    fc_group_failed(cl, d->attr.layout.groups[k])) {
			pc->status = -EHOSTDOWN;
			pc->attempts = 1;
			continue;
		}
		d->pending++;
		read_send(d, pc);
	}
	if (--d->pending == 0)
		read_finish(d);
}

static void read_start(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	d->deadline = tw_now_ms() +
		      FC_OP_DEADLINE(op->cl->opts.request_timeout_ms);
	d->is_read = true;
	read_issue(op);
}

/* A read sees the writes of its range that came before it, also those
 * answered early (wbehind.c). */
static void read_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	if (d->f)
		d->f->refs++;
	if (fc_wb_enter(op->cl, &d->wb, op, d->ino, d->off,
			d->off + d->size, false, read_start))
		read_start(op);
}

void fc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct dop *d;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	d = fc_dop_new(req, read_run);
	if (d) {
		d->ino = ino;
		d->off = (uint64_t)off;
		d->size = size;
		/* For the atime; the reference is taken on the loop thread. */
		d->f = fi ? fc_fh_file(fi) : NULL;
		if (d->f)
			atomic_store(&d->f->touched, true);
	}
	fc_dop_submit(req, d, true);
}


static void fsync_issue(struct fc_op *op);

static void fsync_one_done(struct dop *d, int status)
{
	struct fc_client *cl = d->op.cl;

	if (status < 0 && !d->err)
		d->err = status;
	if (--d->pending > 0)
		return;
	/* Only iods failed: wait for mgrd's new map and sync again (the
	 * mgrd step is idempotent), within the op's deadline.  -ESTALE is
	 * an iod refusing our map's epoch: the map moved on (a twin came
	 * back, or was set down) while we synced. */
	if (d->iod_err && d->err == d->iod_err &&
	    (takeover_err(d->iod_err) || d->iod_err == -ESTALE) &&
	    remaining_ms(d) > FC_TAKEOVER_POLL_MS && !cl->stopping &&
	    !fc_op_interrupted(&d->op)) {
		d->err = 0;
		d->iod_err = 0;
		takeover_start(d, fsync_issue);
		return;
	}
	if (d->err) {
		char path[FC_PATH_LOG];

		tw_log_rl(TW_LOG_WARN, "fsync %s: %s",
			  fc_ino_path(d->op.cl, d->ino, path, sizeof(path)),
			  strerror(-d->err));
	}
	fc_op_reply_err(&d->op, d->wb_err ? d->wb_err :
				d->err ? fc_user_err(d->err) : 0);
}

struct fsync_call {
	struct dop *d;
	struct fc_iod *iod;
};

static void fsync_iod_cb(int status, struct wire_msg *reply, void *arg)
{
	struct fsync_call *fc = arg;
	struct dop *d = fc->d;

	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		if (fc_is_transport_err(status))
			fc_report(d->op.cl, fc->iod, status);
		if (!d->iod_err)
			d->iod_err = status;
		if (!d->err)
			d->err = status;
	}
	free(fc);
	fsync_one_done(d, 0);
}

static void fsync_mgr_done(struct fc_mgr_call *mc, int status,
			   struct wire_msg *reply)
{
	if (reply)
		wire_msg_free(reply);
	fsync_one_done(mc->arg, status);
}

/* mgrd closes a size report's record before replying but syncs its
 * journal only every commit_interval; FSYNCDIR (any inode) syncs it now,
 * so the size is durable when fsync returns (guarantee 2,
 * docs/ARCHITECTURE.md "Guarantees").
 * Both waits for mgrd end with EINTR when the fsync is interrupted and
 * mgrd is silent (fc_mgr_send). */
static void fsync_mgr_sync(struct dop *d)
{
	twinfs__getattr__init(&d->m.getattr);
	d->m.getattr.ino = d->ino;
	fc_mgr_send(d->op.cl, &d->mc, TWINFS__MSG_TYPE__MSG_FSYNCDIR,
		    &d->m.getattr.base, &d->m.getattr.ctx, &d->op, 0,
		    fsync_mgr_done, d);
}

static void fsync_report_done(void *arg, int status)
{
	struct dop *d = arg;

	if (status < 0) {
		fsync_one_done(d, status);
		return;
	}
	fsync_mgr_sync(d);
}

static void fsync_issue(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	struct fc_client *cl = op->cl;
	uint32_t cols[TW_MAX_IODS + 1] = { 0 }, nocols = 0;
	struct fc_iod *col_iod[R0_MAX_STRIPE_COUNT];
	struct fsync_call *fc;
	uint32_t k;
	int err;

	if (!load_attr(d)) {
		if (d->tries++ == 0) {
			refresh(d, !cl->have_map, fsync_issue);
			return;
		}
		fc_op_reply_err(op, EIO);
		return;
	}
	d->err = 0;
	d->pending = 2;   /* the mgrd step and the guard while issuing */
	if (!fc_report_start(cl, d->f, false, fsync_report_done, d, op,
			     &err)) {
		if (err)
			d->err = err;
		fsync_mgr_sync(d);
	}
	/* Every column's primary, once, with the columns it orders: it syncs
	 * them and forwards to its twin, so both twins hold the data synced
	 * when this replies. */
	for (k = 0; k < d->attr.layout.stripe_count; k++) {
		struct fc_iod *iod = fc_map_write_iod(cl, d->ino,
						      d->attr.layout.groups[k],
						      k);

		col_iod[k] = iod;
		if (iod)
			cols[iod->id] |= 1u << k;
		else
			nocols |= 1u << k;
	}
	for (k = 0; k < d->attr.layout.stripe_count; k++) {
		struct fc_iod *iod = col_iod[k];
		uint32_t *mask = iod ? &cols[iod->id] : &nocols;
		uint32_t list[R0_MAX_STRIPE_COUNT];
		Twinfs__Fsync fs;

		if (*mask == 0)
			continue;   /* sent with an earlier column */
		twinfs__fsync__init(&fs);
		fs.ino = d->ino;
		fs.epoch = cl->epoch;
		for (uint32_t c = 0; c < R0_MAX_STRIPE_COUNT; c++)
			if ((*mask >> c) & 1)
				list[fs.n_columns++] = c;
		fs.columns = list;
		*mask = 0;
		fc = calloc(1, sizeof(*fc));
		if (!fc) {
			if (!d->err)
				d->err = -ENOMEM;
			continue;
		}
		fc->d = d;
		fc->iod = iod;
		d->pending++;
		fc_call(cl, iod ? iod->peer : NULL, TWINFS__MSG_TYPE__MSG_FSYNC,
			&fs.base, NULL, 0, attempt_ms(d), fsync_iod_cb, fc);
	}
	fsync_one_done(d, 0);
}

static void fsync_start(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	d->deadline = tw_now_ms() +
		      FC_OP_DEADLINE(op->cl->opts.request_timeout_ms);
	fsync_issue(op);
}

static void fsync_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	d->f->refs++;
	d->any_err = true;   /* fsync reports a failed write of any handle */
	fc_after_writes(d, fsync_start);
}

void fc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct dop *d = fc_dop_new(req, fsync_run);

	if (d) {
		d->ino = ino;
		d->f = fc_fh_file(fi);
		d->datasync = datasync != 0;
	}
	fc_dop_submit(req, d, true);
}
