/* ops_dir.c - directories: opendir, readdir, readdirplus, releasedir and
 * fsyncdir.
 *
 * Offsets are mgrd's cookies (FORMAT.md "Readdir"): "." and ".." are
 * synthesised with offsets 1 and 2, mgrd's entries carry cookies >= 3 that
 * are stable per entry, so a seek to any offset the kernel saw resumes
 * right after that entry.  One READDIR round trip fetches up to
 * FC_READDIR_BATCH entries; the batch is kept in the open directory
 * (struct fc_dir) and serves the kernel's following page-sized calls.
 *
 * Lookup counts: each READDIRPLUS entry except "." and ".." that fits the
 * buffer adds one lookup (fc_inode_entry) before the reply; entries that do
 * not fit are not counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"

#define FC_READDIR_BATCH       256          /* entries per READDIR round trip */

/* fi->fh of a directory: one cached READDIR batch.  Touched by the readdir
 * op on the loop thread and freed by releasedir on a worker: the kernel
 * runs one readdir of an open directory at a time (f_pos lock) and sends
 * releasedir only after the last one was answered; the op touches nothing
 * of the directory after its reply. */
struct fc_dir {
	uint64_t ino;
	struct wire_msg *batch;    /* ReaddirReply or NULL */
	uint64_t batch_from;       /* cookie the batch was asked after */
	bool batch_plus;
};

struct rdop {
	struct fc_op op;
	struct fc_mgr_call mc;
	struct fc_dir *dir;
	uint64_t ino;
	uint64_t off;
	size_t size;
	bool plus;
	Twinfs__Readdir rd;
	Twinfs__Getattr ga;
};

static struct fc_client *client(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

void fc_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fc_dir *dir = calloc(1, sizeof(*dir));

	if (!dir) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dir->ino = ino;
	fi->fh = (uintptr_t)dir;
	/* No cache_readdir: other clients change directories too. */
	if (fuse_reply_open(req, fi) < 0)
		free(dir);
}

static void dir_drop_batch(struct fc_dir *dir)
{
	if (dir->batch)
		wire_msg_free(dir->batch);
	dir->batch = NULL;
}

void fc_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fc_dir *dir = (struct fc_dir *)(uintptr_t)fi->fh;

	(void)ino;
	/* The kernel sends no readdir of this handle after releasedir. */
	dir_drop_batch(dir);
	free(dir);
	fuse_reply_err(req, 0);
}

/* Index of the first batch entry after cookie `off`, or -1 when the batch
 * does not cover `off`. */
static int batch_index(const struct fc_dir *dir, uint64_t off, bool plus)
{
	const Twinfs__ReaddirReply *r;
	size_t i;

	/* Offset 0 (opendir or rewinddir) always reads afresh.  A batch
	 * with attributes also serves a plain read (names, inode numbers
	 * and types are in both); the kernel sends its last read of a
	 * listing, the one that finds the end, plain (it asks for
	 * attributes only at offset 0 or once lookups followed), and
	 * `rm -r` would otherwise cost one more mgrd round trip for each
	 * directory. */
	if (!dir->batch || (plus && !dir->batch_plus) || off == 0)
		return -1;
	r = (const void *)dir->batch->body;
	if (off == dir->batch_from ||
	    (off < 3 && dir->batch_from < 3))
		return 0;
	for (i = 0; i < r->n_entries; i++)
		if (r->entries[i]->cookie == off)
			return (int)i + 1;
	return -1;
}

static size_t add_dot(struct rdop *r, char *buf, size_t left,
		      const char *name, uint64_t next_off)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_ino = r->ino;
	st.st_mode = S_IFDIR;
	if (r->plus) {
		struct fuse_entry_param e;

		/* ino 0: the kernel takes no lookup for . and .. */
		memset(&e, 0, sizeof(e));
		e.attr = st;
		return fuse_add_direntry_plus(r->op.req, buf, left, name, &e,
					      (off_t)next_off);
	}
	return fuse_add_direntry(r->op.req, buf, left, name, &st,
				 (off_t)next_off);
}

/* Fill the reply from the batch starting at index `from`; arrived: the
 * batch is mgrd's answer to this very request (fc_inode_entry_arrived). */
static void reply_from_batch(struct rdop *r, int from, bool arrived)
{
	struct fc_client *cl = r->op.cl;
	const Twinfs__ReaddirReply *rep = NULL;
	char *buf = malloc(r->size ? r->size : 1);
	size_t used = 0, n;
	size_t i;

	if (!buf) {
		fc_op_reply_err(&r->op, ENOMEM);
		return;
	}
	if (r->off < 1) {
		n = add_dot(r, buf, r->size, ".", 1);
		if (n > r->size)
			goto out;
		used += n;
	}
	if (r->off < 2) {
		n = add_dot(r, buf + used, r->size - used, "..", 2);
		if (n > r->size - used)
			goto out;
		used += n;
	}
	if (from < 0 || !r->dir->batch)
		goto out;
	rep = (const void *)r->dir->batch->body;
	for (i = (size_t)from; i < rep->n_entries; i++) {
		const Twinfs__Dirent *de = rep->entries[i];
		struct fc_attr a;
		struct stat st;

		if (!de->name || de->ino == 0 || !de->name[0])
			continue;
		if (r->plus) {
			struct fuse_entry_param e;

			n = fuse_add_direntry_plus(r->op.req, NULL, 0, de->name,
						   NULL, 0);
			if (n > r->size - used)
				break;
			if (de->attr && fc_attr_from_pb(de->attr, &a) == 0 &&
			    a.ino == de->ino) {
				if (arrived)
					fc_inode_entry_arrived(cl, &a, &e);
				else
					fc_inode_entry(cl, &a, &e);
				fc_inode_named(cl, a.ino, r->ino, de->name);
			} else {
				/* No attributes: a plain entry (nodeid 0
				 * makes the kernel take no lookup). */
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = de->ino;
				e.attr.st_mode = de->mode & S_IFMT;
			}
			fuse_add_direntry_plus(r->op.req, buf + used,
					       r->size - used, de->name, &e,
					       (off_t)de->cookie);
		} else {
			memset(&st, 0, sizeof(st));
			st.st_ino = de->ino;
			st.st_mode = de->mode & S_IFMT;
			n = fuse_add_direntry(r->op.req, buf + used,
					      r->size - used, de->name, &st,
					      (off_t)de->cookie);
			if (n > r->size - used)
				break;
		}
		used += n;
	}
out:
	/* Lookups were counted for every plus entry in buf; if the kernel
	 * does not take the buffer, it sends no forget for them either.
	 * Such a refusal only happens when the request was aborted, and then
	 * the whole connection is going away. */
	fc_op_reply_buf(&r->op, buf, used);
	free(buf);
}

static void readdir_done(struct fc_mgr_call *mc, int status,
			 struct wire_msg *reply)
{
	struct rdop *r = mc->arg;

	if (status == 0 &&
	    reply->body->descriptor != &twinfs__readdir_reply__descriptor)
		status = -EIO;
	if (status < 0) {
		if (reply)
			wire_msg_free(reply);
		fc_op_reply_err(&r->op, -status);
		return;
	}
	dir_drop_batch(r->dir);
	r->dir->batch = reply;
	r->dir->batch_from = r->rd.cookie;
	r->dir->batch_plus = r->plus;
	reply_from_batch(r, 0, true);
}

static void readdir_run(struct fc_op *op)
{
	struct rdop *r = (struct rdop *)op;
	const Twinfs__ReaddirReply *rep;
	int idx = batch_index(r->dir, r->off, r->plus);

	if (idx >= 0) {
		rep = (const void *)r->dir->batch->body;
		/* Serve from the batch while it has entries past off; at its
		 * end ask mgrd for more unless it said eof. */
		if ((size_t)idx < rep->n_entries || rep->eof) {
			reply_from_batch(r, idx, false);
			return;
		}
	}
	twinfs__readdir__init(&r->rd);
	r->rd.ino = r->ino;
	r->rd.cookie = r->off < 3 ? 0 : r->off;
	r->rd.max_entries = FC_READDIR_BATCH;
	r->rd.plus = r->plus;
	fc_mgr_send(op->cl, &r->mc, TWINFS__MSG_TYPE__MSG_READDIR, &r->rd.base,
		    &r->rd.ctx, op, 0, readdir_done, r);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct rdop *r;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	r = fc_op_new(client(req), req, sizeof(*r), readdir_run);
	if (!r) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fc_op_groups(&r->op);   /* mgrd checks read permission */
	r->dir = (struct fc_dir *)(uintptr_t)fi->fh;
	r->ino = ino;
	r->off = (uint64_t)off;
	r->size = size;
	r->plus = plus;
	fc_loop_submit(r->op.cl, &r->op);
}

void fc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

void fc_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void fsyncdir_done(struct fc_mgr_call *mc, int status,
			  struct wire_msg *reply)
{
	struct rdop *r = mc->arg;

	if (reply)
		wire_msg_free(reply);
	fc_op_reply_err(&r->op, status < 0 ? -status : 0);
}

static void fsyncdir_run(struct fc_op *op)
{
	struct rdop *r = (struct rdop *)op;

	twinfs__getattr__init(&r->ga);
	r->ga.ino = r->ino;
	fc_mgr_send(op->cl, &r->mc, TWINFS__MSG_TYPE__MSG_FSYNCDIR,
		    &r->ga.base, &r->ga.ctx, op, 0, fsyncdir_done, r);
}

void fc_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct rdop *r;

	(void)datasync;
	(void)fi;
	r = fc_op_new(client(req), req, sizeof(*r), fsyncdir_run);
	if (!r) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r->ino = ino;
	fc_loop_submit(r->op.cl, &r->op);
}
