/* ops_meta.c - namespace and attribute operations: init, lookup, forget,
 * getattr, setattr, readlink, mknod, mkdir, unlink, rmdir, symlink, rename,
 * link, statfs and the xattr calls (with the client-side twinfs.layout and
 * the cached absence of security.capability and security.selinux).
 *
 * Every handler copies its arguments into a struct mop and hands it to the
 * loop (fc_loop_submit); the loop sends one mgrd request (mgr.c numbers and
 * retransmits it) and the completion replies.  Entry replies add one lookup
 * before fuse_reply_entry and take it back when the kernel refused the
 * reply.  open/create/flush/release live in ops_file.c, read/write in
 * ops_data.c, directories in ops_dir.c.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "dlease.h"
#include "dpath.h"
#include "file.h"
#include "inode.h"
#include "kio.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"
#include "report.h"
#include "statahead.h"
#include "tune.h"
#include "wbehind.h"

#define FC_MAX_IO              (1u << 20)   /* max_write / max_read */
#define FC_LAYOUT_XATTR        "twinfs.layout"

struct mop {
	struct fc_op op;
	struct fc_mgr_call mc;
	char *name, *name2;      /* owned */
	uint8_t *value;          /* owned */
	size_t size;
	uint64_t ino;
	int kind;
	union {
		Twinfs__Lookup lookup;
		Twinfs__Getattr getattr;
		Twinfs__Setattr setattr;
		Twinfs__Mknod mknod;
		Twinfs__Mkdir mkdir;
		Twinfs__Unlink unlink;
		Twinfs__Symlink symlink;
		Twinfs__Link link;
		Twinfs__Rename rename;
		Twinfs__Xattr xattr;
		Twinfs__Setstripe setstripe;
	} m;
	Twinfs__Layout layout_pb;
	struct fc_wb wb;         /* setattr: waits for earlier writes */
	struct fc_report_set reports; /* setattr: carried inside it */
	int report_rounds;       /* setattr: times it looked for reports */
	bool writes_landed;      /* setattr: it did */
	bool embed_tried;        /* setattr without size or mtime: it did */
	uint64_t times_seq;      /* setattr of mtime: fc_times_set's, or 0 */
	uint64_t fh_session;     /* ftruncate: its open's session, or 0 */
	bool fresh;              /* setattr: the answer's attributes are fresh */
	bool kill_cap;           /* setattr: drop security.capability first */
	Twinfs__Xattr kill_x;    /* setattr: its REMOVEXATTR */
	uint64_t dl_ticket, dl_sent_ms;   /* name-adding ops: dlease.c */
};

#define MGR_LIST_MAX (64u << 10)   /* mgrd's largest listxattr reply */
#define FC_XATTR_KILL_SGID 4u       /* Xattr.flags: see acl_kills_sgid */

enum { XK_GET = 1, XK_SET, XK_LIST, XK_REMOVE, XK_LAYOUT_GET,
       XK_LAYOUT_SET };

static struct fc_client *client(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void mop_cleanup(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	assert(m->reports.n == 0);
	free(m->name);
	free(m->name2);
	free(m->value);
}

/* Never submitted: freed by hand (not counted as outstanding). */
static void mop_discard(struct mop *m)
{
	mop_cleanup(&m->op);
	free(m->op.groups);
	free(m);
}

/* A mop for run on ino, with a copy of name unless it is NULL; NULL once
 * req is answered with ENOMEM. */
static struct mop *mop_new(fuse_req_t req, fc_op_fn run, fuse_ino_t ino,
			   const char *name)
{
	struct mop *m = fc_op_new(client(req), req, sizeof(*m), run);

	if (m) {
		m->op.cleanup = mop_cleanup;
		m->ino = ino;
		if (name && !(m->name = strdup(name))) {
			mop_discard(m);
			m = NULL;
		}
	}
	if (!m)
		fuse_reply_err(req, ENOMEM);
	return m;
}

/* mop_new for a request mgrd checks the caller's permissions for: with
 * the caller's groups. */
static struct mop *mop_checked(fuse_req_t req, fc_op_fn run, fuse_ino_t ino,
			       const char *name)
{
	struct mop *m = mop_new(req, run, ino, name);

	if (m)
		fc_op_groups(&m->op);
	return m;
}

/* Names are checked here as mgrd would (FORMAT.md "Namespace"), so a bad
 * name costs no round trip. */
static int check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -EINVAL;
	if (len > TW_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

static void submit(struct mop *m)
{
	fc_loop_submit(m->op.cl, &m->op);
}

/* m may add name to dir (dlease.c D1): counted, with its ticket, before
 * it is sent. */
static void adds_name(struct mop *m, uint64_t dir, const char *name)
{
	m->dl_ticket = fc_dl_adding(&m->op.cl->dl, dir, name);
	m->dl_sent_ms = tw_now_ms();
}

/* submit, or where a copy m needed failed (!ok) answer ENOMEM. */
static void submit_or_enomem(fuse_req_t req, struct mop *m, bool ok)
{
	if (ok) {
		submit(m);
		return;
	}
	mop_discard(m);
	fuse_reply_err(req, ENOMEM);
}

/* mop_new for an op on the entry name of parent, after checking the name
 * as mgrd would; NULL once req is answered. */
static struct mop *mop_entry(fuse_req_t req, fc_op_fn run, fuse_ino_t parent,
			     const char *name)
{
	int rc = check_name(name);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return NULL;
	}
	return mop_checked(req, run, parent, name);
}

/* ---------------------------------------------------------------- init */

void fc_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fc_client *cl = userdata;

	conn->max_write = FC_MAX_IO;
	conn->max_readahead = FC_MAX_IO;
	if (conn->max_background < 64)
		conn->max_background = 64;
	if (conn->congestion_threshold < 48)
		conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
		conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Attributes with a new size or mtime drop the kernel's cached pages
	 * (libfuse's default, relied on: a lock granted, locks.c, and a
	 * GETATTR after another mount's close). */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* O_TRUNC must arrive as setattr(size) so it goes through mgrd's
	 * truncate (trunc_gen).  Not HANDLE_KILLPRIV (v1): the clearing of
	 * privileges is the kernel's, or ours with HANDLE_KILLPRIV_V2
	 * (kio.c, docs/ARCHITECTURE.md "Privileges on a write"). */
	conn->want &= ~(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_EXPORT_SUPPORT |
			FUSE_CAP_HANDLE_KILLPRIV);
	/* POSIX ACLs: the kernel caches and enforces them and leaves the
	 * rest to the file system, which mgrd does (FORMAT.md "POSIX
	 * ACLs"): the mode follows a new access ACL, chmod updates the
	 * ACL, new inodes inherit the default ACL, for which mgrd needs the
	 * unmasked mode and the umask (DONT_MASK). */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) &&
	    (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* The kernel's writeback cache owns size and mtime and ignores other
	 * clients (docs/ARCHITECTURE.md "Client"): only on request. */
	if (cl->opts.writeback_cache &&
	    (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	} else {
		if (cl->opts.writeback_cache)
			tw_log(TW_LOG_WARN, "the kernel offers no writeback "
			       "cache: -o writeback_cache ignored");
		/* From here on the flag says what the kernel does. */
		cl->opts.writeback_cache = 0;
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	}
	conn->time_gran = 1;
}

void fc_destroy(void *userdata)
{
	/* The orderly shutdown (final size reports, closing the peers) is run
	 * by main.c before the session is destroyed. */
	(void)userdata;
}

/* ------------------------------------------------------ entry replies */

/* The kernel caches an inode's ACLs until it is told otherwise: when mgrd's
 * acl_sig shows that they changed (set on another mount, or a chmod changed
 * the mask), drop them, with the cached attributes, before the reply that
 * brought the news, so the permission check it precedes sees the new ACL.
 * Sent from the loop, as all of the client's invalidations are
 * (docs/ARCHITECTURE.md "Client"): offset -1 takes no page lock, and the
 * inode is one the kernel is asking about (GETATTR holds a reference;
 * LOOKUP of a known inode finds it cached), so the kernel-side lookup
 * waits for no request of ours. */
static void forget_stale_acl(struct fc_client *cl, uint64_t ino)
{
	if (fc_inode_take_acl_stale(cl, ino) && cl->se)
		fuse_lowlevel_notify_inval_inode(cl->se, ino, -1, 0);
}

static void reply_entry_from(struct mop *m, int status, struct wire_msg *reply)
{
	struct fc_client *cl = m->op.cl;
	struct fuse_entry_param e;
	struct fc_attr a;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (status == 0 && m->dl_sent_ms) {
		const Twinfs__Entry *en = (const Twinfs__Entry *)reply->body;

		fc_dl_granted(&cl->dl, a.ino, en->lease_ms, m->dl_sent_ms,
			      m->dl_ticket);
		fc_dl_renewed(&cl->dl, m->ino, en->parent_lease_ms,
			      m->dl_sent_ms, m->dl_ticket);
	}
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		fc_op_reply_err(&m->op, -status);
		return;
	}
	fc_inode_entry_arrived(cl, &a, &e);
	fc_inode_named(cl, a.ino, m->ino, m->name);   /* LINK: the new one */
	forget_stale_acl(cl, a.ino);
	if (fc_op_reply_entry(&m->op, &e) < 0)
		fc_inode_forget(cl, a.ino, 1);
}

static void entry_done(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	reply_entry_from(mc->arg, status, reply);
}

static void empty_done(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	if (reply)
		wire_msg_free(reply);
	fc_op_reply_err(&m->op, status < 0 ? -status : 0);
}

/* The victim of a successful UNLINK or RMDIR changed (its nlink and
 * ctime, or it is gone): its fresh mark must not answer for it.  mgrd
 * names it (Entry.gone_ino, or Entry.attr when it lives on); an older
 * mgrd does not, and then no fresh mark holds. */
static void victim_changed(struct fc_client *cl, const struct wire_msg *reply)
{
	const Twinfs__Entry *e = NULL;
	struct fc_attr a;

	if (reply && reply->body->descriptor == &twinfs__entry__descriptor)
		e = (const void *)reply->body;
	if (e && e->gone_ino) {
		/* Before the kernel has the answer: it writes the victim's
		 * ctime back next (fc_setattr answers it). */
		fc_inode_set_gone(cl, e->gone_ino);
		fc_inode_unfresh(cl, e->gone_ino);
	} else if (e && e->attr && fc_attr_from_pb(e->attr, &a) == 0) {
		fc_inode_unfresh(cl, a.ino);
		fc_inode_update(cl, &a, NULL);
	} else {
		fc_inodes_unfresh_all(cl);
	}
}

/* UNLINK, RMDIR: the parent's new attributes come with the answer. */
static void unlink_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	if (status == 0) {
		victim_changed(mc->cl, reply);
		fc_parent_from_reply(mc->cl, reply);
		fc_dl_removed(&mc->cl->dl, m->ino, m->name);
		fc_inode_unnamed(mc->cl, m->ino, m->name);
	}
	empty_done(mc, status, reply);
}

/* RENAME: both directories, the moved inode and a replaced one changed
 * without telling us their attributes: the kernel's next GETATTR of any
 * of them asks mgrd. */
static void rename_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	fc_inodes_unfresh_all(mc->cl);
	/* EXCHANGE and WHITEOUT leave a name where the old one was. */
	if (status == 0 && !(m->m.rename.flags & 6u))
		fc_dl_removed(&mc->cl->dl, m->m.rename.parent, m->name);
	if (status == 0)
		fc_inode_renamed(mc->cl, m->m.rename.parent, m->name,
				 m->m.rename.newparent, m->name2,
				 m->m.rename.flags);
	empty_done(mc, status, reply);
}

#define SEND(m, TYPE, field, cb) \
	fc_mgr_send((m)->op.cl, &(m)->mc, TWINFS__MSG_TYPE__MSG_##TYPE, \
		    &(m)->m.field.base, &(m)->m.field.ctx, &(m)->op, 0, \
		    (cb), (m))

/* -------------------------------------------------------------- lookup */

static void lookup_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	twinfs__lookup__init(&m->m.lookup);
	m->m.lookup.parent = m->ino;
	m->m.lookup.name = m->name;
	SEND(m, LOOKUP, lookup, entry_done);
}

/* Answer from a listing fetched ahead (statahead.c), on this thread;
 * false: ask mgrd. */
static bool lookup_ahead(struct fc_client *cl, fuse_req_t req,
			 uint64_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct fc_sa_fetch f;
	struct fc_attr a;
	uint64_t age_ms = 0;
	enum fc_sa_result r;
	double age;

	r = fc_sa_find(&cl->sa, parent, name, tw_now_ms(), &a, &age_ms, &f);
	if (f.dir)
		fc_sa_start(cl, &f, req);
	if (r != FC_SA_HIT || fc_inode_entry_not_older(cl, &a, &e) < 0)
		return false;
	fc_inode_named(cl, a.ino, parent, name);
	/* As long as the kernel may keep a LOOKUP answered when the
	 * listing was asked for, no longer. */
	age = (double)age_ms / 1000.0;
	e.entry_timeout = cl->opts.entry_timeout - age;
	e.attr_timeout = cl->opts.attr_timeout - age;
	if (fuse_reply_entry(req, &e) < 0)
		fc_inode_forget(cl, a.ino, 1);
	return true;
}

void fc_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mop *m;
	int rc = check_name(name);

	fc_tune_once(client(req));
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (fc_dl_absent(&client(req)->dl, parent, name, tw_now_ms())) {
		fuse_reply_err(req, ENOENT);   /* dlease.c */
		return;
	}
	if (lookup_ahead(client(req), req, parent, name))
		return;
	m = mop_checked(req, lookup_run, parent, name);
	if (m)
		submit(m);
}

/* -------------------------------------------------------------- forget */

void fc_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fc_inode_forget(client(req), ino, nlookup);
	fuse_reply_none(req);
}

void fc_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets)
{
	struct fc_client *cl = client(req);
	size_t i;

	for (i = 0; i < count; i++)
		fc_inode_forget(cl, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* ------------------------------------------------------------- getattr */

static void attr_done(struct fc_mgr_call *mc, int status,
		      struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct fc_client *cl = m->op.cl;
	struct fc_attr a;
	struct stat st;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		fc_op_reply_err(&m->op, -status);
		return;
	}
	if (m->fresh)
		fc_inode_update_fresh(cl, &a, &st);
	else
		fc_inode_update_arrived(cl, &a, &st);
	forget_stale_acl(cl, a.ino);
	fc_op_reply_attr(&m->op, &st, cl->opts.attr_timeout);
}

/* GETATTR waits request_timeout for mgrd, then answers from the cached
 * attributes when there are some: the kernel asks again whenever they expire
 * (1 s), also during data I/O to an open file, which must go on while mgrd is
 * away (docs/ARCHITECTURE.md "Metadata": mgrd down).  Without cached
 * attributes it goes on waiting, up to mgr_timeout in all. */
static void getattr_run(struct fc_op *op);

static void getattr_done(struct fc_mgr_call *mc, int status,
			 struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct fc_client *cl = m->op.cl;
	struct fc_attr a;
	struct stat st;
	uint64_t size;

	/* Inode numbers are never reused, so -ESTALE for a directory the
	 * kernel still holds means it was removed while open: fstat of it
	 * works on ext4 and shows nlink 0.  (Open regular files are kept as
	 * orphans by mgrd and never get here.) */
	if (status == -ESTALE && fc_inode_get(cl, m->ino, &a, NULL) &&
	    S_ISDIR(a.mode)) {
		if (reply)   /* an error reply may carry an empty body */
			wire_msg_free(reply);
		a.nlink = 0;
		fc_attr_to_stat(cl, &a, a.size, &st);
		fc_op_reply_attr(&m->op, &st, cl->opts.attr_timeout);
		return;
	}
	if (status == -EIO && !reply && m->kind == 0) {
		m->kind = 1;
		if (fc_inode_get(cl, m->ino, &a, &size)) {
			tw_log_rl(TW_LOG_WARN, "getattr ino %" PRIu64 ": mgrd "
				  "%s did not answer within %u ms: answering "
				  "from this client's cache (may be stale)",
				  m->ino, cl->mgr ? wire_peer_name(cl->mgr)
				  : "?", cl->opts.request_timeout_ms);
			fc_attr_to_stat(cl, &a, size, &st);
			fc_op_reply_attr(&m->op, &st, cl->opts.attr_timeout);
			return;
		}
		getattr_run(&m->op);
		return;
	}
	attr_done(mc, status, reply);
}

static void getattr_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;
	struct fc_client *cl = op->cl;
	uint32_t rt = cl->opts.request_timeout_ms;

	twinfs__getattr__init(&m->m.getattr);
	m->m.getattr.ino = m->ino;
	fc_mgr_send(cl, &m->mc, TWINFS__MSG_TYPE__MSG_GETATTR,
		    &m->m.getattr.base, &m->m.getattr.ctx, op,
		    m->kind == 0 ? rt : (cl->opts.mgr_timeout_ms > rt
					 ? cl->opts.mgr_timeout_ms - rt : 1),
		    getattr_done, m);
}

void fc_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mop *m;
	struct stat st;
	double timeout;

	(void)fi;
	fc_tune_once(client(req));
	/* The attributes came with our own change a moment ago, or are a
	 * directory's that mgrd sent less than attr_timeout ago (the kernel
	 * dropped its copy because of that change, or of a READDIR's atime). */
	if (fc_inode_fresh(client(req), ino, &st, &timeout)) {
		fuse_reply_attr(req, &st, timeout);
		return;
	}
	m = mop_new(req, getattr_run, ino, NULL);
	if (m)
		submit(m);
}

/* ------------------------------------------------------------- setattr */

static void setattr_run(struct fc_op *op);
static void setattr_cap_done(struct fc_mgr_call *mc, int status,
			     struct wire_msg *reply);

/* mop.kind of a SETATTR */
enum { REPORTED = 1, KILL_SGID };

/* Whether the caller is outside group gid and not root (which stands for
 * CAP_FSETID: the request carries no capabilities).  Worker thread: the
 * supplementary groups are read from /proc. */
static bool outside_group(fuse_req_t req, uint32_t gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[64];
	int n;

	if (ctx->uid == 0 || ctx->gid == gid)
		return false;
	n = fuse_req_getgroups(req, (int)TW_ARRAY_SIZE(groups), groups);
	for (int i = 0; i < n && i < (int)TW_ARRAY_SIZE(groups); i++)
		if (groups[i] == gid)
			return false;
	return true;
}

bool fc_write_kills_privs(fuse_req_t req, fuse_ino_t ino, bool fsetid,
			  uint32_t *mode)
{
	struct fc_attr a;
	uint32_t kill = 0;

	if (fsetid ||
	    !fc_inode_get(client(req), ino, &a, NULL) || !S_ISREG(a.mode))
		return false;
	if (a.mode & S_ISUID)
		kill |= S_ISUID;
	if ((a.mode & S_ISGID) &&
	    ((a.mode & S_IXGRP) || outside_group(req, a.gid)))
		kill |= S_ISGID;
	if (!kill)
		return false;
	*mode = a.mode & 07777 & ~kill;
	return true;
}

/* Whether a request with nothing to set must drop the setgid bit of ino:
 * Linux (setattr_should_drop_sgid) drops it on write, truncate and chown
 * -1 -1 by a caller outside the group and without CAP_FSETID even without
 * group execute, which the kernel's FUSE killpriv emulation ignores.
 * *mode gets the mode to change. */
static bool drop_sgid(fuse_req_t req, fuse_ino_t ino, uint32_t *mode)
{
	struct fc_attr a;

	if (!fc_inode_get(client(req), ino, &a, NULL) || !S_ISREG(a.mode) ||
	    (a.mode & (S_ISGID | S_IXGRP)) != S_ISGID ||
	    !outside_group(req, a.gid))
		return false;
	*mode = a.mode & 07777;
	return true;
}

static const char cap_name[] = "security.capability";

bool fc_may_have_cap(struct fc_client *cl, fuse_ino_t ino)
{
	return !fc_inode_xattr_absent(cl, ino, fc_xattr_cache_index(cap_name));
}

void fc_kill_cap_send(struct fc_op *op, struct fc_mgr_call *mc,
		      Twinfs__Xattr *x, fuse_ino_t ino, fc_mgr_cb cb,
		      void *arg)
{
	twinfs__xattr__init(x);
	x->ino = ino;
	x->name = (char *)cap_name;
	/* mgrd lets anyone who may write remove it (perm.c). */
	fc_mgr_send(op->cl, mc, TWINFS__MSG_TYPE__MSG_REMOVEXATTR, &x->base,
		    &x->ctx, op, 0, cb, arg);
}

int fc_kill_cap_done(struct fc_client *cl, fuse_ino_t ino, int status,
		     struct wire_msg *reply)
{
	if (reply)
		wire_msg_free(reply);
	if (status == 0)
		fc_inode_unfresh(cl, ino);   /* the ctime moved */
	if (status != 0 && status != -ENODATA)
		return status;
	fc_inode_set_xattr_absent(cl, ino, fc_xattr_cache_index(cap_name),
				  true);
	return 0;
}

/* Whether a SETATTR is the kernel's writeback cache writing an inode's
 * times back: mtime and ctime only, as fuse_flush_times sends them. */
static bool times_flush(const struct fc_client *cl, uint32_t valid)
{
	const uint32_t times = TWINFS__SETATTR_VALID__SA_MTIME |
		TWINFS__SETATTR_VALID__SA_CTIME;

	return cl->opts.writeback_cache &&
	       (valid & TWINFS__SETATTR_VALID__SA_MTIME) && !(valid & ~times);
}

/* Whether a failed SETATTR is such a write-back of the times of a file
 * that is gone (mgrd destroyed it: a file replaced by rename, or an
 * unlink's victim that no gone_ino named).  Those times belong to
 * nothing, and an error would be kept by the kernel and fail a later
 * syncfs (ESTALE).  ESTALE is mgrd's word that the inode is gone for
 * good: it is marked so (fc_setattr answers the next one itself), and
 * this one is answered with the attributes we had, nlink 0.  (A
 * utimensat of mtime alone by path, through a name this mount still
 * caches, of a file that another mount removed, also succeeds instead of
 * ENOENT: the same request.  An open file is never destroyed, so
 * futimens is unaffected.) */
static bool gone_times_flush(struct mop *m, int status, struct stat *st)
{
	struct fc_client *cl = m->op.cl;

	if (status != -ESTALE || !times_flush(cl, m->m.setattr.valid))
		return false;
	fc_inode_set_gone(cl, m->ino);
	return fc_inode_gone_stat(cl, m->ino, st);
}

static void setattr_done(struct fc_mgr_call *mc, int status,
			 struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct stat st;

	/* Before the reports end: a flush waiting for them reports next,
	 * and must carry mtime if this failed (report.c). */
	if (m->times_seq)
		fc_times_done(m->op.cl, m->ino, m->times_seq, status);
	fc_report_embed_done(m->op.cl, &m->reports, status);
	if (gone_times_flush(m, status, &st)) {
		if (reply)
			wire_msg_free(reply);
		fc_op_reply_attr(&m->op, &st, 0);
		return;
	}
	/* A chmod updated the ACL's mask at mgrd; the kernel forgot its
	 * cached ACLs when it sent us the SETATTR. */
	if (status == 0 &&
	    (m->m.setattr.valid & TWINFS__SETATTR_VALID__SA_MODE))
		fc_inode_acl_local(m->op.cl, m->ino);
	m->fresh = true;
	attr_done(mc, status, reply);
}

/* Rounds of waiting for an inode's reports before a SETATTR goes out
 * anyway (a report that keeps failing must not hold it for ever). */
#define SETATTR_REPORT_ROUNDS 3

static void setattr_reported(void *arg, int status)
{
	struct mop *m = arg;

	/* A failed report is logged by the report itself.  What we waited
	 * for may have been another SETATTR carrying the reports, and it may
	 * have failed: look again, so they ride in this one. */
	(void)status;
	if (m->report_rounds < SETATTR_REPORT_ROUNDS)
		m->kind = 0;
	setattr_run(&m->op);
}

static void setattr_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;
	const uint32_t ordered = TWINFS__SETATTR_VALID__SA_SIZE |
		TWINFS__SETATTR_VALID__SA_MTIME;

	/* ftruncate through a descriptor opened under a session mgrd
	 * expired: dead, as its writes are (ops_data.c write_start); it
	 * must not cut what another client wrote since. */
	if (m->fh_session &&
	    fc_open_expired(op->cl, m->ino, m->fh_session, "truncate")) {
		fc_op_reply_err(op, EIO);
		return;
	}
	/* A truncate drops security.capability before anything else
	 * (fc_setattr). */
	if (m->kill_cap) {
		fc_kill_cap_send(op, &m->mc, &m->kill_x, m->ino,
				 setattr_cap_done, m);
		return;
	}

	/* A write of the inode held back to be joined (ops_data.c) goes
	 * out now: the writer has moved on (tar's utimensat, fchown and
	 * fchmod), and its data lands while this runs. */
	fc_wb_kick(op->cl, m->ino);
	/* An mtime set takes its place now: earlier writes still in flight
	 * keep the mtime it sets when they land (report.c, fc_times_set). */
	if ((m->m.setattr.valid & TWINFS__SETATTR_VALID__SA_MTIME) &&
	    !m->times_seq)
		m->times_seq = fc_times_set(op->cl, m->ino);
	/* A size change comes after every earlier write, also those
	 * answered early (wbehind.c): a truncate must not be undone by a
	 * write still in flight. */
	if ((m->m.setattr.valid & TWINFS__SETATTR_VALID__SA_SIZE) &&
	    !m->writes_landed) {
		m->writes_landed = true;
		if (!fc_wb_enter(op->cl, &m->wb, op, m->ino, 0, UINT64_MAX,
				 false, setattr_run))
			return;
	}
	/* The reports of writes that landed ride in the SETATTR itself, or,
	 * while reports of them are in flight, go before it (fc_report_ino
	 * says why).  Any other SETATTR (chown, chmod) takes the reports
	 * that are ready along, so that the close has none to send, and
	 * waits for none. */
	if ((m->m.setattr.valid & ordered) && !m->kind) {
		m->kind = REPORTED;
		m->report_rounds++;
		if (!fc_report_embed(op->cl, m->ino, &m->reports) &&
		    fc_report_ino(op->cl, m->ino, setattr_reported, m))
			return;
	} else if (!(m->m.setattr.valid & ordered) && !m->embed_tried) {
		m->embed_tried = true;
		fc_report_embed(op->cl, m->ino, &m->reports);
	}
	if (m->m.setattr.valid == 0) {
		/* Nothing to set: chown(f, -1, -1), or the kernel's request to
		 * kill privileges that it turned into no mode change.  Both
		 * change the ctime, as on ext4, which a SETATTR without valid
		 * bits does at mgrd; the kill may still have to drop a setgid
		 * without group execute (fc_setattr). */
		if (m->kind == KILL_SGID) {
			m->m.setattr.valid = TWINFS__SETATTR_VALID__SA_MODE;
			m->m.setattr.mode = (uint32_t)m->size &
					    ~(uint32_t)S_ISGID;
		}
	}
	m->m.setattr.ino = m->ino;
	m->m.setattr.n_reports = m->reports.n;
	m->m.setattr.reports = m->reports.n ? m->reports.sr : NULL;
	SEND(m, SETATTR, setattr, setattr_done);
}

static void setattr_cap_done(struct fc_mgr_call *mc, int status,
			     struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	status = fc_kill_cap_done(m->op.cl, m->ino, status, reply);
	if (status < 0) {
		fc_op_reply_err(&m->op, fc_errno(status));
		return;
	}
	m->kill_cap = false;
	setattr_run(&m->op);
}

void fc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi)
{
	struct mop *m;
	struct stat st;
	Twinfs__Setattr *s;
	int64_t now_sec;
	uint32_t now_nsec;
	const int known = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
		FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME |
		FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
		FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;

	/* The time write-back of a file our own UNLINK destroyed (mgrd said
	 * so, gone_ino): answered here, as mgrd would (ESTALE, then
	 * gone_times_flush), without the round trip (rm -rf). */
	if (times_flush(client(req), (uint32_t)(to_set & known)) &&
	    fc_inode_gone_stat(client(req), ino, &st)) {
		fuse_reply_attr(req, &st, 0);
		return;
	}
	m = mop_checked(req, setattr_run, ino, NULL);
	if (!m)
		return;
	s = &m->m.setattr;
	twinfs__setattr__init(s);
	/* SA_* are FUSE_SET_ATTR_* (twinfs.proto). */
	s->valid = (uint32_t)(to_set & known);
	tw_realtime(&now_sec, &now_nsec);
	if (to_set & FUSE_SET_ATTR_MODE)
		s->mode = attr->st_mode;
	if (to_set & FUSE_SET_ATTR_UID)
		s->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		s->gid = attr->st_gid;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		s->size = (uint64_t)attr->st_size;
		/* ftruncate: the kernel names the open file (a regular
		 * file's: truncate needs one open for writing). */
		if (fi && fi->fh)
			m->fh_session = ((const struct fc_file *)(uintptr_t)
					  fi->fh)->session;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		/* Both bits and our clock: mgrd may use either.  With the
		 * writeback cache the kernel sends a "now" mtime as its own
		 * clock's time, and that same time comes with ATIME_NOW: then
		 * that time and no NOW bit, so that touch(1) leaves atime ==
		 * mtime, as ext4. */
		s->valid |= TWINFS__SETATTR_VALID__SA_ATIME;
		if (client(req)->opts.writeback_cache &&
		    attr->st_atim.tv_sec > 0) {
			s->valid &= ~(uint32_t)TWINFS__SETATTR_VALID__SA_ATIME_NOW;
			now_sec = attr->st_atim.tv_sec;
			now_nsec = (uint32_t)attr->st_atim.tv_nsec;
		}
		s->atime_sec = now_sec;
		s->atime_nsec = now_nsec;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		s->atime_sec = attr->st_atim.tv_sec;
		s->atime_nsec = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		s->valid |= TWINFS__SETATTR_VALID__SA_MTIME;
		s->mtime_sec = now_sec;
		s->mtime_nsec = now_nsec;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		s->mtime_sec = attr->st_mtim.tv_sec;
		s->mtime_nsec = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		s->ctime_sec = attr->st_ctim.tv_sec;
		s->ctime_nsec = (uint32_t)attr->st_ctim.tv_nsec;
	}
	if (s->valid == 0) {
		uint32_t mode;

		if (drop_sgid(req, ino, &mode)) {
			m->kind = KILL_SGID;
			m->size = mode;
		}
	}
	/* FUSE_HANDLE_KILLPRIV_V2 (kio.c): a truncate by a caller the
	 * kernel says lacks CAP_FSETID drops setuid and setgid in the same
	 * SETATTR, and security.capability, for anyone, before it.  chown's
	 * are mgrd's (perm.c) and the kernel's. */
	if ((s->valid & TWINFS__SETATTR_VALID__SA_SIZE) &&
	    fc_kio_killpriv_v2()) {
		uint32_t mode;

		if (!(s->valid & TWINFS__SETATTR_VALID__SA_MODE) &&
		    fc_kio_kill_suidgid() &&
		    fc_write_kills_privs(req, ino, false, &mode)) {
			s->valid |= TWINFS__SETATTR_VALID__SA_MODE;
			s->mode = mode;
		}
		m->kill_cap = fc_may_have_cap(client(req), ino);
	}
	submit(m);
}

/* ------------------------------------------------------------ readlink */

static void readlink_done(struct fc_mgr_call *mc, int status,
			  struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	if (status == 0 &&
	    reply->body->descriptor == &twinfs__readlink_reply__descriptor) {
		const Twinfs__ReadlinkReply *r = (const void *)reply->body;

		fc_op_reply_readlink(&m->op, r->target ? r->target : "");
	} else {
		fc_op_reply_err(&m->op, status < 0 ? -status : EIO);
	}
	if (reply)
		wire_msg_free(reply);
}

static void readlink_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	twinfs__getattr__init(&m->m.getattr);
	m->m.getattr.ino = m->ino;
	SEND(m, READLINK, getattr, readlink_done);
}

void fc_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mop *m = mop_new(req, readlink_run, ino, NULL);

	if (m)
		submit(m);
}

/* ------------------------------------------------- mknod, mkdir, ... */

static void mknod_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	m->m.mknod.parent = m->ino;
	m->m.mknod.name = m->name;
	SEND(m, MKNOD, mknod, entry_done);
}

void fc_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev)
{
	struct mop *m = mop_entry(req, mknod_run, parent, name);

	if (!m)
		return;
	twinfs__mknod__init(&m->m.mknod);
	/* Unmasked (FUSE_CAP_DONT_MASK): mgrd applies the umask in the
	 * request's ctx, or the parent's default ACL. */
	m->m.mknod.mode = mode;
	m->m.mknod.rdev = (uint32_t)rdev;
	adds_name(m, parent, name);
	submit(m);
}

static void mkdir_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	m->m.mkdir.parent = m->ino;
	m->m.mkdir.name = m->name;
	SEND(m, MKDIR, mkdir, entry_done);
}

void fc_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode)
{
	struct mop *m = mop_entry(req, mkdir_run, parent, name);

	if (!m)
		return;
	twinfs__mkdir__init(&m->m.mkdir);
	m->m.mkdir.mode = mode | S_IFDIR;
	m->m.mkdir.lease = m->op.cl->dl.on;
	adds_name(m, parent, name);
	submit(m);
}

static void unlink_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	twinfs__unlink__init(&m->m.unlink);
	m->m.unlink.parent = m->ino;
	m->m.unlink.name = m->name;
	if (m->kind)
		SEND(m, RMDIR, unlink, unlink_done);
	else
		SEND(m, UNLINK, unlink, unlink_done);
}

static void unlink_common(fuse_req_t req, fuse_ino_t parent,
			  const char *name, int is_rmdir)
{
	struct mop *m = mop_entry(req, unlink_run, parent, name);

	if (!m)
		return;
	m->kind = is_rmdir;
	submit(m);
}

void fc_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, 0);
}

void fc_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, 1);
}

static void symlink_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	twinfs__symlink__init(&m->m.symlink);
	m->m.symlink.parent = m->ino;
	m->m.symlink.name = m->name;
	m->m.symlink.target = m->name2;
	SEND(m, SYMLINK, symlink, entry_done);
}

void fc_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name)
{
	struct mop *m;
	int rc = check_name(name);

	if (rc == 0 && strlen(link) >= PATH_MAX)
		rc = -ENAMETOOLONG;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	m = mop_checked(req, symlink_run, parent, name);
	if (!m)
		return;
	adds_name(m, parent, name);
	m->name2 = strdup(link);
	submit_or_enomem(req, m, m->name2 != NULL);
}

static void rename_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	SEND(m, RENAME, rename, rename_done);
}

void fc_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct mop *m;
	int rc = check_name(name);

	if (rc == 0)
		rc = check_name(newname);
	/* RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2, RENAME_WHITEOUT = 4 on
	 * the wire as in Linux (the kernel checked CAP_MKNOD). */
	if (rc == 0 && (flags & ~7u))
		rc = -EINVAL;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	m = mop_checked(req, rename_run, parent, name);
	if (!m)
		return;
	m->name2 = strdup(newname);
	twinfs__rename__init(&m->m.rename);
	m->m.rename.parent = parent;
	m->m.rename.name = m->name;
	m->m.rename.newparent = newparent;
	m->m.rename.newname = m->name2;
	m->m.rename.flags = flags;
	adds_name(m, newparent, newname);
	submit_or_enomem(req, m, m->name2 != NULL);
}

static void link_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	SEND(m, LINK, link, entry_done);
}

void fc_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname)
{
	struct mop *m = mop_entry(req, link_run, newparent, newname);

	if (!m)
		return;
	twinfs__link__init(&m->m.link);
	m->m.link.ino = ino;
	m->m.link.newparent = newparent;
	m->m.link.newname = m->name;
	adds_name(m, newparent, newname);
	submit(m);
}

/* -------------------------------------------------------------- statfs */

static void statfs_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct mop *m = mc->arg;

	if (status == 0 &&
	    reply->body->descriptor == &twinfs__statfs_reply__descriptor) {
		const Twinfs__StatfsReply *r = (const void *)reply->body;
		struct statvfs st;

		memset(&st, 0, sizeof(st));
		st.f_bsize = r->bsize ? r->bsize : 4096;
		st.f_frsize = st.f_bsize;
		st.f_blocks = r->blocks;
		st.f_bfree = r->bfree;
		st.f_bavail = r->bavail;
		st.f_files = r->files;
		st.f_ffree = r->ffree;
		st.f_favail = r->ffree;
		st.f_namemax = r->namemax ? r->namemax : TW_NAME_MAX;
		fc_op_reply_statfs(&m->op, &st);
	} else {
		fc_op_reply_err(&m->op, status < 0 ? -status : EIO);
	}
	if (reply)
		wire_msg_free(reply);
}

static void statfs_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;

	twinfs__getattr__init(&m->m.getattr);
	m->m.getattr.ino = m->ino;
	SEND(m, STATFS, getattr, statfs_done);
}

void fc_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct mop *m = mop_new(req, statfs_run, ino, NULL);

	if (m)
		submit(m);
}

/* -------------------------------------------------------------- xattrs */

static bool is_layout(const char *name)
{
	return strcmp(name, FC_LAYOUT_XATTR) == 0;
}

/* Namespaces as ext4 knows them (system.* reaches us only for names the
 * kernel's ACL handlers do not take); twinfs.layout is the client's own.
 * Unknown ones are EOPNOTSUPP, a bare prefix EINVAL. */
static int check_xattr_name(const char *name)
{
	static const char *const ns[] = { "user.", "trusted.", "security." };

	if (is_layout(name))
		return 0;
	for (size_t i = 0; i < TW_ARRAY_SIZE(ns); i++) {
		size_t l = strlen(ns[i]);

		if (strncmp(name, ns[i], l) == 0)
			return name[l] ? 0 : -EINVAL;
	}
	if (strncmp(name, "system.posix_acl_", 17) == 0)
		return 0;
	return -EOPNOTSUPP;
}


/* Answer a get/list with `value` of `len` bytes for a caller buffer of
 * m->size bytes (0 = ask the size). */
static void reply_value(struct mop *m, const void *value, size_t len)
{
	if (m->size == 0)
		fc_op_reply_xattr(&m->op, len);
	else if (len > m->size)
		fc_op_reply_err(&m->op, ERANGE);
	else
		fc_op_reply_buf(&m->op, value, len);
}

/* As ext4: trusted.* names are listed only to privileged callers (root
 * here: the request carries no capabilities).  mgrd sent the whole list
 * (fc_listxattr asks for it), filtered here in place. */
static void reply_list_unprivileged(struct mop *m, uint8_t *names, size_t len)
{
	size_t in = 0, out = 0;

	while (in < len) {
		size_t l = strnlen((char *)names + in, len - in) + 1;

		if (strncmp((char *)names + in, "trusted.", 8) != 0) {
			memmove(names + out, names + in, TW_MIN(l, len - in));
			out += TW_MIN(l, len - in);
		}
		in += l;
	}
	reply_value(m, names, out);
}

static void xattr_done(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct fc_client *cl = m->op.cl;

	if (m->kind == XK_GET && m->name && status == -ENODATA)
		fc_inode_set_xattr_absent(cl, m->ino,
					  fc_xattr_cache_index(m->name), true);
	if ((m->kind == XK_SET || m->kind == XK_REMOVE) && m->name)
		fc_inode_set_xattr_absent(cl, m->ino,
					  fc_xattr_cache_index(m->name), false);
	if ((m->kind == XK_SET || m->kind == XK_REMOVE) && status == 0 &&
	    strncmp(m->name, "system.posix_acl_", 17) == 0)
		fc_inode_acl_local(cl, m->ino);
	/* The ctime moved without new attributes. */
	if (m->kind != XK_GET && m->kind != XK_LIST && status == 0)
		fc_inode_unfresh(cl, m->ino);
	if (status < 0) {
		if (reply)
			wire_msg_free(reply);
		fc_op_reply_err(&m->op, -status);
		return;
	}
	if (m->kind == XK_GET || m->kind == XK_LIST) {
		const Twinfs__XattrReply *r = (const void *)reply->body;

		if (reply->body->descriptor != &twinfs__xattr_reply__descriptor) {
			fc_op_reply_err(&m->op, EIO);
		} else if (m->kind == XK_LIST && m->op.uid != 0) {
			reply_list_unprivileged(m, r->value.data, r->value.len);
		} else if (m->size == 0 && r->value.len == 0) {
			fc_op_reply_xattr(&m->op, r->size);
		} else {
			reply_value(m, r->value.data, r->value.len);
		}
	} else {
		fc_op_reply_err(&m->op, 0);
	}
	wire_msg_free(reply);
}

static void layout_get_done(struct fc_mgr_call *mc, int status,
			    struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct fc_client *cl = m->op.cl;
	struct fc_attr a;
	char buf[512];
	int len;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		fc_op_reply_err(&m->op, -status);
		return;
	}
	fc_inode_update(cl, &a, NULL);
	if (S_ISREG(a.mode) && a.has_layout) {
		len = r0_layout_format(&a.layout, buf, sizeof(buf));
		/* The largest size the file may reach (pathconf's
		 * FILESIZEBITS cannot say it: glibc guesses it from the file
		 * system's magic number). */
		if (len >= 0 && (size_t)len < sizeof(buf))
			len += snprintf(buf + len, sizeof(buf) - (size_t)len,
					" max_file_size=%" PRIu64,
					fc_file_limit(cl, &a.layout));
	} else if (S_ISDIR(a.mode)) {
		/* A directory's policy: what its new files get.  groups is
		 * empty when new files start at a round-robin group. */
		uint32_t size = a.has_layout ? a.layout.stripe_size :
			cl->def_stripe_size;
		uint32_t count = a.has_layout ? a.layout.stripe_count :
			cl->def_stripe_count;
		uint32_t k;

		if (count == 0 || count > cl->n_groups)
			count = cl->n_groups;
		len = snprintf(buf, sizeof(buf),
			       "stripe_size=%u stripe_count=%u groups=",
			       size ? size : R0_DEF_STRIPE_SIZE, count);
		for (k = 0; a.policy_first >= 0 && k < count &&
		     len < (int)sizeof(buf) - 8; k++)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len,
					"%s%u", k ? "," : "",
					((uint32_t)a.policy_first + k) %
					TW_MAX(cl->n_groups, 1u));
	} else {
		fc_op_reply_err(&m->op, ENODATA);
		return;
	}
	if (len < 0) {
		fc_op_reply_err(&m->op, EIO);
		return;
	}
	reply_value(m, buf, (size_t)len);
}

static void setstripe_done(struct fc_mgr_call *mc, int status,
			   struct wire_msg *reply)
{
	struct mop *m = mc->arg;
	struct fc_client *cl = m->op.cl;
	struct fc_attr a;

	if (status == 0 && fc_entry_from_reply(cl, reply, &a) == 0)
		fc_inode_update(cl, &a, NULL);
	if (reply)
		wire_msg_free(reply);
	fc_op_reply_err(&m->op, status < 0 ? -status : 0);
}

static void xattr_run(struct fc_op *op)
{
	struct mop *m = (struct mop *)op;
	Twinfs__Xattr *x = &m->m.xattr;

	switch (m->kind) {
	case XK_LAYOUT_GET:
		twinfs__getattr__init(&m->m.getattr);
		m->m.getattr.ino = m->ino;
		SEND(m, GETATTR, getattr, layout_get_done);
		return;
	case XK_LAYOUT_SET:
		SEND(m, SETSTRIPE, setstripe, setstripe_done);
		return;
	default:
		break;
	}
	x->ino = m->ino;
	x->name = m->name ? m->name : (char *)"";
	switch (m->kind) {
	case XK_GET:
		x->size = (uint32_t)m->size;
		SEND(m, GETXATTR, xattr, xattr_done);
		break;
	case XK_LIST:
		/* Unprivileged callers get a filtered list: fetch it all. */
		x->size = m->op.uid != 0 ? MGR_LIST_MAX : (uint32_t)m->size;
		SEND(m, LISTXATTR, xattr, xattr_done);
		break;
	case XK_SET:
		x->value.data = m->value;
		SEND(m, SETXATTR, xattr, xattr_done);
		break;
	default:
		SEND(m, REMOVEXATTR, xattr, xattr_done);
		break;
	}
}

void fc_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size)
{
	struct fc_client *cl = client(req);
	struct mop *m;
	int rc = check_xattr_name(name);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* The kernel asks for security.capability before a write (every
	 * write without HANDLE_KILLPRIV_V2, kio.c), and for the ACLs of
	 * every inode it checks: absence is answered from
	 * the cache (docs/ARCHITECTURE.md "Client"; acl_sig, FORMAT.md
	 * "POSIX ACLs"). */
	if (fc_inode_xattr_absent(cl, ino, fc_xattr_cache_index(name)) ||
	    (strncmp(name, "system.posix_acl_", 17) == 0 &&
	     fc_inode_acl_none(cl, ino))) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	/* user.* needs read permission at mgrd: with the caller's groups. */
	m = strncmp(name, "user.", 5) == 0
	    ? mop_checked(req, xattr_run, ino, name)
	    : mop_new(req, xattr_run, ino, name);
	if (!m)
		return;
	m->size = size;
	m->kind = is_layout(name) ? XK_LAYOUT_GET : XK_GET;
	twinfs__xattr__init(&m->m.xattr);
	submit(m);
}

void fc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mop *m = mop_new(req, xattr_run, ino, NULL);

	if (!m)
		return;
	m->size = size;
	m->kind = XK_LIST;
	twinfs__xattr__init(&m->m.xattr);
	submit(m);
}

/* Setting an access ACL drops setgid when the caller is outside the
 * file's group (posix_acl_update_mode).  The kernel says so with
 * FUSE_SETXATTR_ACL_KILL_SGID, which libfuse 3.14 does not pass on, so
 * the client decides as the kernel would; mgrd applies it with the mode
 * (Xattr.flags 4). */
static bool acl_kills_sgid(fuse_req_t req, fuse_ino_t ino)
{
	struct fc_attr a;

	return fc_inode_get(client(req), ino, &a, NULL) &&
	       (a.mode & S_ISGID) && outside_group(req, a.gid);
}

void fc_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	struct mop *m;
	int rc;

	if (is_layout(name)) {
		char buf[128];
		uint32_t ss, sc, first;

		if (size >= sizeof(buf)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(buf, value, size);
		buf[size] = '\0';
		if (r0_layout_parse_policy(buf, &ss, &sc, &first) < 0) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		m = mop_checked(req, xattr_run, ino, NULL);
		if (!m)
			return;
		m->kind = XK_LAYOUT_SET;
		twinfs__setstripe__init(&m->m.setstripe);
		m->m.setstripe.ino = ino;
		m->m.setstripe.stripe_size = ss;
		m->m.setstripe.stripe_count = sc;
		m->m.setstripe.first = first == UINT32_MAX ? -1 :
			(int32_t)first;
		submit(m);
		return;
	}
	rc = check_xattr_name(name);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	m = mop_checked(req, xattr_run, ino, name);
	if (!m)
		return;
	m->kind = XK_SET;
	m->value = malloc(size ? size : 1);
	if (m->value)
		memcpy(m->value, value, size);
	twinfs__xattr__init(&m->m.xattr);
	m->m.xattr.value.len = size;
	m->m.xattr.flags = (uint32_t)(flags & (XATTR_CREATE | XATTR_REPLACE));
	if (strcmp(name, "system.posix_acl_access") == 0 &&
	    acl_kills_sgid(req, ino))
		m->m.xattr.flags |= FC_XATTR_KILL_SGID;
	submit_or_enomem(req, m, m->value != NULL);
}

void fc_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct mop *m;
	int rc;

	if (is_layout(name)) {
		/* Never stored, so never removable. */
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	rc = check_xattr_name(name);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	m = mop_checked(req, xattr_run, ino, name);
	if (!m)
		return;
	m->kind = XK_REMOVE;
	twinfs__xattr__init(&m->m.xattr);
	submit(m);
}
