/* ops_file.c - the life of an open file: open, create, flush, release,
 * and the wait for earlier writes that flush, release and fsync share
 * (fc_after_writes).  Reads, writes, fallocate and fsync, with their
 * failover, are in ops_data.c; the size reports in report.c.
 *
 * Open and create fetch the attributes with the handle (close-to-open:
 * keep_cache only when nothing changed since we last saw them).  Flush and
 * release wait until every write of the inode landed (write-behind,
 * wbehind.c), then send the size report; release also closes mgrd's
 * handle.  Everything here runs on the loop thread except the handlers'
 * packing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "dlease.h"
#include "dop.h"
#include "dpath.h"
#include "file.h"
#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"
#include "report.h"
#include "tune.h"
#include "wbehind.h"

static struct fc_client *client(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ------------------------------------------------------------- files */

/* [loop] */
static struct fc_file *file_new(struct fc_client *cl, uint64_t ino,
				uint64_t mgr_fh, int flags,
				const struct fc_attr *a)
{
	struct fc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->ino = ino;
	f->err_seen = fc_wb_err_seq(cl, ino);
	f->mgr_fh = mgr_fh;
	f->session = cl->session;   /* the reply came on a connection of it */
	f->flags = flags;
	f->refs = 1;
	f->end_gen = a->trunc_gen;
	f->all_next = cl->files;
	if (cl->files)
		cl->files->all_prev = f;
	cl->files = f;
	return f;
}

bool fc_open_expired(struct fc_client *cl, uint64_t ino, uint64_t session,
		     const char *what)
{
	if (session == cl->session)
		return false;
	char path[FC_PATH_LOG];

	tw_log_rl(TW_LOG_ERR, "%s %s: the file was opened under "
		  "session %" PRIu64 ", which mgrd expired (this mount is now "
		  "session %" PRIu64 "); it fails with EIO, a new open works "
		  "again", what, fc_ino_path(cl, ino, path, sizeof(path)),
		  session, cl->session);
	return true;
}

/* ---------------------------------------------------------- open/create */

/* O_APPEND bypasses the kernel's cache: through the page cache the kernel
 * may cut one write(2) into several WRITE requests, each of which would get
 * its own reservation at mgrd (append_reserve), so another mount's record
 * could land in the middle; direct I/O sends up to max_write bytes as one
 * request.  The kernel then leaves the killing of setuid/setgid to us
 * (ops_data.c kill_privs) and refuses a shared mmap of the descriptor
 * unless the connection allows it (fc_init).
 *
 * O_DIRECT alone is the kernel's: on a file that is not direct_io it sends
 * each O_DIRECT read and write to us as it comes (after writing back and
 * before dropping the cached pages of the range), clears setuid/setgid
 * itself, and a shared mmap of the same descriptor goes through the page
 * cache, as on ext4.  Its writes carry O_DIRECT, so they are never
 * answered before they land (ops_data.c maybe_behind). */
unsigned fc_open_direct_io(int flags)
{
	return (flags & O_APPEND) ? 1 : 0;
}

static void release_only_done(struct fc_mgr_call *mc, int status,
			      struct wire_msg *reply)
{
	(void)status;
	if (reply)
		wire_msg_free(reply);
	free(mc->arg);
}

/* The kernel refused an open/create reply (the syscall was interrupted):
 * close mgrd's handle again. */
static void release_orphan(struct fc_client *cl, uint64_t ino, uint64_t fh)
{
	struct {
		struct fc_mgr_call mc;
		Twinfs__Release rel;
	} *r = calloc(1, sizeof(*r));

	if (!r)
		return;
	twinfs__release__init(&r->rel);
	r->rel.ino = ino;
	r->rel.fh = fh;
	fc_mgr_send(cl, &r->mc, TWINFS__MSG_TYPE__MSG_RELEASE, &r->rel.base,
		    &r->rel.ctx, NULL, 0, release_only_done, r);
}

static void open_done(struct fc_mgr_call *mc, int status,
		      struct wire_msg *reply)
{
	struct dop *d = mc->arg;
	struct fc_client *cl = d->op.cl;
	const Twinfs__OpenReply *r;
	struct fc_attr old, a;
	bool had;
	struct fc_file *f;
	uint64_t fh;

	if (status == 0 &&
	    reply->body->descriptor != &twinfs__open_reply__descriptor)
		status = -EIO;
	if (status < 0) {
		if (reply)
			wire_msg_free(reply);
		fc_op_reply_err(&d->op, -status);
		return;
	}
	r = (const void *)reply->body;
	fh = r->fh;
	status = fc_attr_from_pb(r->attr, &a);
	fc_cap_take(cl, d->ino, (d->fi.flags & O_ACCMODE) != O_RDONLY, &r->cap,
		    r->cap_lifetime_ms, &d->op);
	wire_msg_free(reply);
	if (status < 0) {
		release_orphan(cl, d->ino, fh);
		fc_op_reply_err(&d->op, EIO);
		return;
	}
	/* Close-to-open: keep the kernel's cached pages only if nobody
	 * changed the data since we last saw the attributes. */
	had = fc_inode_get(cl, d->ino, &old, NULL);
	d->fi.keep_cache = had && old.size == a.size &&
		old.mtime_sec == a.mtime_sec &&
		old.mtime_nsec == a.mtime_nsec &&
		old.data_version == a.data_version &&
		old.trunc_gen == a.trunc_gen &&
		/* The kernel would serve reads from its page cache, which
		 * we never see: not when a read must update the atime. */
		!fc_atime_due(cl, &a, d->fi.flags);
	fc_inode_update(cl, &a, NULL);
	f = file_new(cl, d->ino, fh, d->fi.flags, &a);
	if (!f) {
		release_orphan(cl, d->ino, fh);
		fc_op_reply_err(&d->op, ENOMEM);
		return;
	}
	d->fi.fh = (uintptr_t)f;
	d->fi.direct_io = fc_open_direct_io(d->fi.flags);
	if (d->fi.direct_io)
		d->fi.keep_cache = 0;
	/* Without keep_cache the kernel drops the cached pages, but it keeps
	 * its cached attributes (i_size!) until attr_timeout: invalidate them
	 * so the next stat, or a read past the old size, asks us again.
	 * Close-to-open demands it (another mount may have truncated).  Like
	 * every invalidation of ours, it is sent from the loop
	 * (docs/ARCHITECTURE.md "Client"), which is safe here: it is
	 * attributes only (offset -1: no page locks) for a file being
	 * opened, and the kernel holds no lock across OPEN. */
	if (!d->fi.keep_cache && cl->se)
		fuse_lowlevel_notify_inval_inode(cl->se, d->ino, -1, 0);
	if (fc_op_reply_open(&d->op, &d->fi) < 0) {
		release_orphan(cl, f->ino, fh);
		fc_file_put(cl, f);
	}
}

static void open_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	twinfs__open__init(&d->m.open);
	d->m.open.ino = d->ino;
	d->m.open.flags = (uint32_t)d->fi.flags;
	fc_mgr_send(op->cl, &d->mc, TWINFS__MSG_TYPE__MSG_OPEN,
		    &d->m.open.base, &d->m.open.ctx, op, 0, open_done, d);
}

void fc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dop *d = fc_dop_new(req, open_run);

	fc_tune_once(client(req));
	if (d) {
		d->ino = ino;
		d->fi = *fi;
		fc_op_groups(&d->op);
	}
	fc_dop_submit(req, d, true);
}

static void create_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct dop *d = mc->arg;
	struct fc_client *cl = d->op.cl;
	struct fuse_entry_param e;
	struct fc_attr a;
	struct fc_file *f;
	uint64_t fh = 0;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (status == 0) {
		const Twinfs__Entry *en = (const Twinfs__Entry *)reply->body;

		fh = en->fh;
		fc_cap_take(cl, a.ino, (d->fi.flags & O_ACCMODE) != O_RDONLY,
			    &en->cap, en->cap_lifetime_ms, &d->op);
		fc_dl_renewed(&cl->dl, d->ino, en->parent_lease_ms,
			      d->dl_sent_ms, d->dl_ticket);
	}
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		fc_op_reply_err(&d->op, -status);
		return;
	}
	f = file_new(cl, a.ino, fh, d->fi.flags, &a);
	if (!f) {
		release_orphan(cl, a.ino, fh);
		fc_op_reply_err(&d->op, ENOMEM);
		return;
	}
	fc_inode_entry(cl, &a, &e);
	fc_inode_named(cl, a.ino, d->ino, d->name);   /* d->ino: the parent */
	fc_inode_set_new_file(cl, a.ino);
	d->fi.fh = (uintptr_t)f;
	d->fi.direct_io = fc_open_direct_io(d->fi.flags);
	d->fi.keep_cache = 0;
	if (fc_op_reply_create(&d->op, &e, &d->fi) < 0) {
		release_orphan(cl, a.ino, fh);
		fc_inode_forget(cl, a.ino, 1);
		fc_file_put(cl, f);
	}
}

static void create_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	d->m.mknod.parent = d->ino;
	d->m.mknod.name = d->name;
	fc_mgr_send(op->cl, &d->mc, TWINFS__MSG_TYPE__MSG_MKNOD,
		    &d->m.mknod.base, &d->m.mknod.ctx, op, 0, create_done, d);
}

void fc_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi)
{
	struct dop *d;
	size_t len = strlen(name);

	if (len == 0 || len > TW_NAME_MAX) {
		fuse_reply_err(req, len ? ENAMETOOLONG : EINVAL);
		return;
	}
	d = fc_dop_new(req, create_run);
	if (d) {
		d->ino = parent;
		d->fi = *fi;
		d->name = strdup(name);
		twinfs__mknod__init(&d->m.mknod);
		d->m.mknod.mode = (mode & ~S_IFMT) | S_IFREG;
		d->m.mknod.open = true;
		d->m.mknod.open_flags = (uint32_t)fi->flags;
		d->m.mknod.excl = (fi->flags & O_EXCL) != 0;
		fc_op_groups(&d->op);
		/* dlease.c D1: counted, with its ticket, before it is sent. */
		d->dl_ticket = fc_dl_adding(&d->op.cl->dl, parent, name);
		d->dl_sent_ms = tw_now_ms();
	}
	fc_dop_submit(req, d, d && d->name);
}

/* ------------------------------------------------------ flush, release */


static void writes_landed(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	/* any_err: an fsync, which reports a failed write of any handle. */
	if (d->f && (d->any_err || fc_wb_writer(op->cl, d->f)))
		d->wb_err = fc_wb_take_err(op->cl, d->f, d->any_err);
	d->after(op);
}

void fc_after_writes(struct dop *d, fc_op_fn next)
{
	d->after = next;
	if (fc_wb_enter(d->op.cl, &d->wb, &d->op, d->ino, 0, UINT64_MAX,
			false, writes_landed))
		writes_landed(&d->op);
}

static void flush_report_done(void *arg, int status)
{
	struct dop *d = arg;

	fc_op_reply_err(&d->op, d->wb_err ? d->wb_err :
				status < 0 ? fc_user_err(status) : 0);
}

static void flush_report(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	int err;

	if (!fc_report_start(op->cl, d->f, false, flush_report_done, d, NULL,
			     &err))
		fc_op_reply_err(op, d->wb_err ? d->wb_err : -err);
}

static void flush_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	d->f->refs++;
	fc_after_writes(d, flush_report);
}

/* An op on the open file fi of ino, first step run. */
static void submit_file_op(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi, fc_op_fn run)
{
	struct dop *d = fc_dop_new(req, run);

	if (d) {
		d->ino = ino;
		d->f = fc_fh_file(fi);
	}
	fc_dop_submit(req, d, true);
}

void fc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* A handle that never read, wrote or allocated has no writes to
	 * wait for, no size or atime to report: answer here, without the
	 * hop to the loop thread (open-close and create-close).  Writes of
	 * other handles of the inode are theirs to wait for and report.
	 * With -o writeback_cache a handle open for writing may have
	 * dirtied pages that another handle's writeback sent: it takes
	 * their errors (fc_wb_writer), when there are any.  The kernel
	 * waited for every writeback reply before it sent the FLUSH, and
	 * a writeback's error is recorded before its reply. */
	struct fc_client *cl = fuse_req_userdata(req);

	if (!atomic_load(&fc_fh_file(fi)->touched) &&
	    (!fc_wb_writer(cl, fc_fh_file(fi)) ||
	     !atomic_load(&cl->wb_errs_any))) {
		fuse_reply_err(req, 0);
		return;
	}
	submit_file_op(req, ino, fi, flush_run);
}

static void release_done(struct fc_mgr_call *mc, int status,
			 struct wire_msg *reply)
{
	struct dop *d = mc->arg;

	if (reply)
		wire_msg_free(reply);
	if (status < 0 && !d->err)
		d->err = status;
	fc_op_reply_err(&d->op, d->wb_err ? d->wb_err :
				d->err ? fc_user_err(d->err) : 0);
}

static void release_send(struct dop *d)
{
	/* Nothing to wait for or report: the kernel, which does not wait
	 * for this answer anyway, gets it now, and mgrd the RELEASE with
	 * this mount's next request (fc_mgr_release_later). */
	if (!d->err && !d->wb_err && !atomic_load(&d->f->touched) &&
	    fc_mgr_release_later(d->op.cl, d->ino, d->f->mgr_fh) == 0) {
		fc_op_reply_err(&d->op, 0);
		return;
	}
	twinfs__release__init(&d->m.release);
	d->m.release.ino = d->ino;
	d->m.release.fh = d->f->mgr_fh;
	fc_mgr_send(d->op.cl, &d->mc, TWINFS__MSG_TYPE__MSG_RELEASE,
		    &d->m.release.base, &d->m.release.ctx, NULL, 0,
		    release_done, d);
}

static void release_report_done(void *arg, int status)
{
	struct dop *d = arg;

	if (status < 0)
		d->err = status;
	release_send(d);
}

static void release_report(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;
	int err;

	if (!fc_report_start(op->cl, d->f, false, release_report_done, d,
			     NULL, &err))
		release_send(d);
}

static void release_run(struct fc_op *op)
{
	struct dop *d = (struct dop *)op;

	/* mmap writes can arrive after FLUSH, so RELEASE reports too.  The
	 * op owns the open's reference from here (dropped at cleanup). */
	fc_after_writes(d, release_report);
}

void fc_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	submit_file_op(req, ino, fi, release_run);
}
