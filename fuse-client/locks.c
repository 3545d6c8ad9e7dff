/* locks.c - cluster-wide locks: the FUSE getlk, setlk and flock
 * handlers, lock release on close (flush: the closing process's POSIX
 * locks; release: the OFD and flock locks of the open file), and the
 * re-claim of held locks after an mgrd restart (proto/FORMAT.md "Locks").
 *
 * mgrd holds the table; the client keeps a mirror of the locks mgrd granted
 * it (common/lock.c, session field 0), updated on every granted change, so
 * that it knows what to re-claim and whether a close must tell mgrd.
 *
 * Blocking requests (F_SETLKW, flock without LOCK_NB) are parked at mgrd,
 * which answers when the lock is granted.  They are sent with wire_call
 * without a deadline and never occupy a FUSE worker thread (the loop thread
 * waits for the answer).  A signal makes the kernel send INTERRUPT: the
 * loop sends MSG_LOCK_CANCEL and mgrd answers the parked request -EINTR (or
 * it was granted first: then the lock is held and the call succeeds, as
 * on Linux when the lock is granted before the signal is seen).  A lost
 * connection is answered by sending the request again (the same waiter_id).
 *
 * F_GETLK reports the holder's pid when the holder is on this mount and 0
 * for a holder on another mount (pid of another host), as Linux's NFSv4
 * client does.
 *
 * Threads: the handlers run on FUSE workers and only build ops; everything
 * else runs on the loop thread ([loop]).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "inode.h"
#include "locks.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "report.h"
#include "wbehind.h"
#include "lock.h"

#define LOCK_RETRY_MS       200   /* grace at mgrd, or no connection */
#define LOCK_RECONNECT_MS   500   /* while holding locks: notice a restart */
#define LOCK_LOCAL_RETRIES  5     /* a denial by this mount's own lock ... */
#define LOCK_LOCAL_RETRY_MS 10    /* ... is asked again this much later */

struct fc_locks {
	struct tw_lk_table mine;      /* [loop] granted to this client */
	struct lop *waiting;          /* [loop] parked at mgrd */
	uint64_t next_waiter_id;      /* [loop] */
	bool poll_on;                 /* [loop] the reconnect poll runs */
	/* [loop] A request ended without an answer: mgrd may hold a lock the
	 * mirror lacks, so every close tells mgrd. */
	bool uncertain;
};

enum lop_kind { LOP_SET, LOP_GET, LOP_FLUSH, LOP_RELEASE, LOP_RECLAIM,
		LOP_POLL };

struct lop {
	struct fc_op op;
	enum lop_kind kind;
	struct fc_mgr_call mc;
	Twinfs__Lock lock;
	Twinfs__LockDrop drop;
	Twinfs__LockCancel cancel;
	uint64_t ino;
	struct tw_lk want;            /* LOP_SET: the mirror's change */
	bool wait;
	struct fuse_file_info fi;     /* flush/release: handed on afterwards */
	fc_close_fn next;             /* flush/release: the data path's */
	struct lop *wnext;            /* fc_locks.waiting */
	bool cancel_sent;
	unsigned local_retries;       /* LOP_SET: see set_mgr_cb */
	struct fc_wb wb;              /* unlock: waits for earlier writes */
	bool writes_landed;           /* ... and did */
	bool reported;                /* ... and their size reports */
	fc_op_fn resume;              /* ... then this step runs again */
};

static void unlock_reported(void *arg, int status)
{
	struct lop *l = arg;

	(void)status;   /* a failed report is logged by the report */
	l->resume(&l->op);
}

/* An unlock publishes this mount's writes to the file, as NFS's does:
 * whoever takes the lock next, on any mount, reads them and the size they
 * made.  So every earlier write lands first, also those answered early
 * (wbehind.c), and the file's size reports reach mgrd.  True: go on now;
 * false: run(op) again once that is done. */
static bool unlock_after_writes(struct lop *l, fc_op_fn run)
{
	if (!l->writes_landed) {
		l->writes_landed = true;
		if (!fc_wb_enter(l->op.cl, &l->wb, &l->op, l->ino, 0,
				 UINT64_MAX, false, run))
			return false;
	}
	if (!l->reported) {
		l->reported = true;
		l->resume = run;
		if (fc_report_ino(l->op.cl, l->ino, unlock_reported, l))
			return false;
	}
	return true;
}

static struct fc_locks *locks_get(struct fc_client *cl)
{
	if (!cl->locks) {
		cl->locks = calloc(1, sizeof(*cl->locks));
		if (cl->locks)
			tw_lk_init(&cl->locks->mine);
	}
	return cl->locks;
}

void fc_locks_free(struct fc_client *cl)
{
	if (!cl->locks)
		return;
	tw_lk_free(&cl->locks->mine);
	free(cl->locks);
	cl->locks = NULL;
}

/* ---------------------------------------------------- conversions */

static int type_from_fcntl(short t)
{
	switch (t) {
	case F_RDLCK: return TW_LK_RDLCK;
	case F_WRLCK: return TW_LK_WRLCK;
	case F_UNLCK: return TW_LK_UNLCK;
	}
	return -EINVAL;
}

/* libfuse hands the kernel's [start, end] as l_start/l_len (0 = to EOF). */
static int want_from_flock(const struct flock *fl, struct tw_lk *w)
{
	int type = type_from_fcntl(fl->l_type);

	if (type < 0 || fl->l_start < 0 || fl->l_len < 0)
		return -EINVAL;
	w->type = (uint8_t)type;
	w->kind = TW_LK_POSIX;
	w->start = (uint64_t)fl->l_start;
	w->end = fl->l_len == 0 ? TW_LK_EOF
				: (uint64_t)fl->l_start + (uint64_t)fl->l_len - 1;
	w->pid = (uint32_t)fl->l_pid;
	return 0;
}

static void lock_pb(struct lop *l)
{
	twinfs__lock__init(&l->lock);
	l->lock.ino = l->ino;
	l->lock.kind = (Twinfs__LockKind)l->want.kind;
	l->lock.type = (Twinfs__LockType)l->want.type;
	l->lock.start = l->want.start;
	l->lock.end = l->want.end;
	l->lock.owner = l->want.owner;
	l->lock.file = l->want.file;
	l->lock.pid = l->want.pid;
}

/* ------------------------------------------------------ the mirror */

static void reconnect_poll(struct fc_op *op);

/* Start the poll that reconnects to mgrd while locks are held, so that a
 * restarted mgrd is seen (and locks re-claimed) within its grace even on
 * an idle mount. */
static void poll_start(struct fc_client *cl)
{
	struct fc_locks *lk = cl->locks;
	struct lop *l;

	if (lk->poll_on || cl->stopping)
		return;
	l = fc_op_new(cl, NULL, sizeof(*l), reconnect_poll);
	if (!l)
		return;
	l->kind = LOP_POLL;
	lk->poll_on = true;
	cl->ops_outstanding++;
	fc_op_later(&l->op, LOCK_RECONNECT_MS);
}

static void reconnect_poll(struct fc_op *op)
{
	struct fc_client *cl = op->cl;
	struct fc_locks *lk = cl->locks;

	if (cl->stopping || lk->mine.n_locks == 0) {
		lk->poll_on = false;
		fc_op_free(op);
		return;
	}
	if (cl->mgr)
		wire_peer_connect(cl->mgr);
	fc_op_later(op, LOCK_RECONNECT_MS);
}

static void mirror_set(struct fc_client *cl, uint64_t ino,
		       const struct tw_lk *w)
{
	struct tw_lk m = *w;

	m.session = 0;
	if (tw_lk_set(&cl->locks->mine, ino, &m) < 0) {
		/* Held at mgrd but unknown here: closes must ask mgrd. */
		cl->locks->uncertain = true;
		tw_log_rl(TW_LOG_WARN, "lock on ino %" PRIu64 ": no memory to "
			  "record it; it is not re-claimed after an mgrd "
			  "restart", ino);
	}
	if (cl->locks->mine.n_locks)
		poll_start(cl);
}

/* ----------------------------------------------------------- replies */

static void waiting_remove(struct fc_locks *lk, struct lop *l)
{
	for (struct lop **pp = &lk->waiting; *pp; pp = &(*pp)->wnext)
		if (*pp == l) {
			*pp = l->wnext;
			break;
		}
}

static int user_status(int status)
{
	/* Transport failures surface as EIO after mgr_timeout (mgr.c);
	 * anything mgrd says goes to the caller as it is. */
	return status == -ECANCELED ? -EIO : status;
}

static void set_run(struct fc_op *op);

/* A lock granted revalidates what the kernel caches of the file, as NFS
 * does: the last holder, on another mount, may have changed it, and its
 * unlock published those writes and their size and mtime to mgrd
 * (unlock_after_writes).  Forgetting the kernel's attributes (offset -1:
 * no page lock, safe from the loop) makes its next read or stat ask
 * mgrd; a changed size or mtime then drops the cached pages in the kernel
 * (FUSE's auto_inval_data, which libfuse asks for).  Without it, SQLite
 * on two mounts read a page cache older than the lock and lost
 * transactions, or corrupted the database.  Not covered: pages mapped
 * with mmap (a fault on a cached page asks nothing), a same-size rewrite
 * whose mtime was then set back, and -o writeback_cache (the kernel keeps
 * its own size and mtime; that mode is for single writers). */
static void lock_revalidate(struct fc_client *cl, uint64_t ino)
{
	fc_inode_unfresh(cl, ino);
	if (cl->se)
		fuse_lowlevel_notify_inval_inode(cl->se, ino, -1, 0);
}

/* Whether a signal ends l with EINTR.  Never an unlock: on Linux F_UNLCK
 * and LOCK_UN do not fail with EINTR, and one that did would leave the
 * lock held by a program that believes it let go.  Ours may wait (for
 * the writes before it to land, through a failover; for mgrd), so it
 * waits on, as a close's UNLOCK_ALL does. */
static bool lop_interrupted(const struct lop *l)
{
	return l->want.type != TW_LK_UNLCK && fc_op_interrupted(&l->op);
}

/* The answer to a LOCK (setlk or flock) request. */
static void set_done(struct lop *l, int status)
{
	struct fc_client *cl = l->op.cl;

	if (status == -EINPROGRESS && !cl->stopping && !lop_interrupted(l)) {
		/* mgrd's grace after a restart: ask again. */
		fc_op_later(&l->op, LOCK_RETRY_MS);
		return;
	}
	if (status == -EINPROGRESS)
		status = lop_interrupted(l) ? -EINTR : -EIO;
	if (status == 0)
		mirror_set(cl, l->ino, &l->want);
	if (status == 0 && l->want.type != TW_LK_UNLCK)
		lock_revalidate(cl, l->ino);
	fc_op_reply_err(&l->op, -user_status(status));
}

static void set_mgr_cb(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	if (status == 0 && reply &&
	    ((const Twinfs__LockReply *)reply->body)->denied)
		status = -EAGAIN;
	if (reply)
		wire_msg_free(reply);
	if (status == -EIO || status == -EINTR)
		mc->cl->locks->uncertain = true;
	struct lop *l = mc->arg;
	if (status == -EAGAIN && l->local_retries < LOCK_LOCAL_RETRIES &&
	    !fc_op_interrupted(&l->op) &&
	    tw_lk_test(&mc->cl->locks->mine, l->ino, &l->want, NULL)) {
		/* The holder is an open file of this mount.  The kernel
		 * sends RELEASE, which drops a closed file's flock and OFD
		 * locks, asynchronously, and another FUSE worker may hand it
		 * to the loop after this request: close(a); flock(b, LOCK_NB)
		 * must not see a's lock.  Give the release a moment. */
		l->local_retries++;
		fc_op_later(&l->op, LOCK_LOCAL_RETRY_MS);
		return;
	}
	set_done(l, status);
}

static void wait_cb(int status, struct wire_msg *reply, void *arg)
{
	struct lop *l = arg;
	struct fc_client *cl = l->op.cl;

	if (reply)
		wire_msg_free(reply);
	waiting_remove(cl->locks, l);
	if (fc_is_transport_err(status) || status == -ECANCELED) {
		/* mgrd dropped the parked request with the connection, or
		 * granted it and the answer is lost: it may hold the lock. */
		cl->locks->uncertain = true;
		if (fc_op_interrupted(&l->op))
			status = -EINTR;
		else if (cl->stopping)
			status = -EIO;
		else {
			fc_op_later(&l->op, LOCK_RETRY_MS);
			return;
		}
	}
	set_done(l, status);
}

static void set_run(struct fc_op *op)
{
	struct lop *l = (struct lop *)op;
	struct fc_client *cl = op->cl;
	struct fc_locks *lk = locks_get(cl);

	if (!lk) {
		fc_op_reply_err(op, ENOLCK);
		return;
	}
	if (lop_interrupted(l)) {
		fc_op_reply_err(op, EINTR);
		return;
	}
	if (l->want.type == TW_LK_UNLCK && !unlock_after_writes(l, set_run))
		return;
	lock_pb(l);
	if (!l->wait) {
		/* An unlock's call is not ended by interrupts (no op). */
		fc_mgr_send(cl, &l->mc, TWINFS__MSG_TYPE__MSG_LOCK,
			    &l->lock.base, NULL,
			    l->want.type == TW_LK_UNLCK ? NULL : op, 0,
			    set_mgr_cb, l);
		return;
	}
	/* Parked at mgrd until granted: no deadline, one waiter_id for
	 * every attempt of this request. */
	if (!l->lock.waiter_id)
		l->lock.waiter_id = ++lk->next_waiter_id;
	l->lock.wait = true;
	l->cancel_sent = false;
	l->wnext = lk->waiting;
	lk->waiting = l;
	fc_call(cl, cl->mgr, TWINFS__MSG_TYPE__MSG_LOCK, &l->lock.base, NULL, 0,
		0, wait_cb, l);
}

static void cancel_cb(int status, struct wire_msg *reply, void *arg)
{
	(void)status;
	(void)arg;
	/* The parked request gets its own answer (-EINTR or granted), or a
	 * transport error when the connection went away. */
	if (reply)
		wire_msg_free(reply);
}

void fc_lock_interrupts(struct fc_client *cl)
{
	if (!cl->locks)
		return;
	for (struct lop *l = cl->locks->waiting; l; l = l->wnext) {
		if (l->cancel_sent || !fc_op_interrupted(&l->op))
			continue;
		l->cancel_sent = true;
		twinfs__lock_cancel__init(&l->cancel);
		l->cancel.waiter_id = l->lock.waiter_id;
		/* The body is packed by the call: l may go first. */
		fc_call(cl, cl->mgr, TWINFS__MSG_TYPE__MSG_LOCK_CANCEL,
			&l->cancel.base, NULL, 0, cl->opts.request_timeout_ms,
			cancel_cb, NULL);
	}
}

/* ------------------------------------------------------------ handlers */

static struct lop *lop_new(fuse_req_t req, enum lop_kind kind, fc_op_fn run,
			   fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fc_client *cl = fuse_req_userdata(req);
	struct lop *l = fc_op_new(cl, req, sizeof(*l), run);

	if (!l)
		return NULL;
	l->kind = kind;
	l->ino = ino;
	l->fi = *fi;
	l->want.owner = fi->lock_owner;
	l->want.file = fi->fh;
	atomic_store(&cl->locks_used, 1);
	return l;
}

void fc_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock, int sleep)
{
	struct tw_lk want;
	struct lop *l;
	int rc;

	memset(&want, 0, sizeof(want));
	rc = want_from_flock(lock, &want);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	l = lop_new(req, LOP_SET, set_run, ino, fi);
	if (!l) {
		fuse_reply_err(req, ENOLCK);
		return;
	}
	l->want.kind = want.kind;
	l->want.type = want.type;
	l->want.start = want.start;
	l->want.end = want.end;
	l->want.pid = want.pid;
	l->wait = sleep && want.type != TW_LK_UNLCK;
	fc_loop_submit(l->op.cl, &l->op);
}

void fc_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op)
{
	struct lop *l;
	int type;

	switch (op & ~LOCK_NB) {
	case LOCK_SH: type = TW_LK_RDLCK; break;
	case LOCK_EX: type = TW_LK_WRLCK; break;
	case LOCK_UN: type = TW_LK_UNLCK; break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	l = lop_new(req, LOP_SET, set_run, ino, fi);
	if (!l) {
		fuse_reply_err(req, ENOLCK);
		return;
	}
	l->want.kind = TW_LK_FLOCK;
	l->want.type = (uint8_t)type;
	l->want.start = 0;
	l->want.end = TW_LK_EOF;
	l->want.pid = l->op.pid;
	l->wait = !(op & LOCK_NB) && type != TW_LK_UNLCK;
	fc_loop_submit(l->op.cl, &l->op);
}

static void getlk_cb(struct fc_mgr_call *mc, int status,
		     struct wire_msg *reply)
{
	struct lop *l = mc->arg;
	const Twinfs__LockReply *r = reply ? (const void *)reply->body : NULL;
	struct flock fl;

	if (status == -EINPROGRESS && !fc_op_interrupted(&l->op) &&
	    !l->op.cl->stopping) {
		fc_op_later(&l->op, LOCK_RETRY_MS);
		goto out;
	}
	if (status < 0 || !r) {
		fc_op_reply_err(&l->op, status == -EINPROGRESS ? EINTR
				: -user_status(status < 0 ? status : -EIO));
		goto out;
	}
	memset(&fl, 0, sizeof(fl));
	fl.l_whence = SEEK_SET;
	if (r->type == TWINFS__LOCK_TYPE__LK_UNLCK) {
		fl.l_type = F_UNLCK;
	} else {
		fl.l_type = r->type == TWINFS__LOCK_TYPE__LK_RDLCK ? F_RDLCK
								  : F_WRLCK;
		fl.l_start = (off_t)r->start;
		fl.l_len = r->end == TW_LK_EOF ? 0
			   : (off_t)(r->end - r->start + 1);
		fl.l_pid = r->same_session ? (pid_t)r->pid : 0;
	}
	fc_op_reply_lock(&l->op, &fl);
out:
	if (reply)
		wire_msg_free(reply);
}

static void getlk_run(struct fc_op *op)
{
	struct lop *l = (struct lop *)op;

	if (fc_op_interrupted(op)) {
		fc_op_reply_err(op, EINTR);
		return;
	}
	lock_pb(l);
	fc_mgr_send(op->cl, &l->mc, TWINFS__MSG_TYPE__MSG_GETLK, &l->lock.base,
		    NULL, op, 0, getlk_cb, l);
}

void fc_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock)
{
	struct tw_lk want;
	struct lop *l;
	int rc;

	memset(&want, 0, sizeof(want));
	rc = want_from_flock(lock, &want);
	if (rc == 0 && want.type == TW_LK_UNLCK)
		rc = -EINVAL;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	l = lop_new(req, LOP_GET, getlk_run, ino, fi);
	if (!l) {
		fuse_reply_err(req, ENOLCK);
		return;
	}
	l->want.type = want.type;
	l->want.start = want.start;
	l->want.end = want.end;
	l->want.pid = want.pid;
	fc_loop_submit(l->op.cl, &l->op);
}

/* -------------------------------------------------- release on close */

/* Hand the request on to the data path's flush/release (ops_file.c), then
 * free this op.  The interrupt callback that points at this op is cleared
 * first (which waits out a running one): next may answer the request at
 * once (an idle handle's flush) instead of submitting an op that re-arms
 * it.  An interrupt meanwhile is kept by libfuse for the next callback. */
static void pass_on(struct lop *l)
{
	fuse_req_interrupt_func(l->op.req, NULL, NULL);
	l->next(l->op.req, l->ino, &l->fi);
	fc_op_free(&l->op);
}

static void drop_cb(struct fc_mgr_call *mc, int status, struct wire_msg *reply)
{
	struct lop *l = mc->arg;
	struct fc_client *cl = l->op.cl;

	if (reply)
		wire_msg_free(reply);
	if (status < 0)
		tw_log_rl(TW_LOG_WARN, "close of ino %" PRIu64 ": mgrd did not "
			  "release its locks: %s; they go when the session "
			  "expires", l->ino, strerror(-status));
	if (l->kind == LOP_FLUSH)
		tw_lk_drop_owner(&cl->locks->mine, l->ino, 0, l->fi.lock_owner);
	else
		tw_lk_drop_file(&cl->locks->mine, l->ino, 0, l->fi.fh);
	pass_on(l);
}

static void drop_run(struct fc_op *op)
{
	struct lop *l = (struct lop *)op;
	struct fc_client *cl = op->cl;
	struct fc_locks *lk = cl->locks;

	/* Nothing held on this inode and nothing in doubt: no round trip. */
	if (!lk || (!lk->uncertain && !lk->waiting &&
		    !tw_lk_held(&lk->mine, l->ino))) {
		pass_on(l);
		return;
	}
	if (!unlock_after_writes(l, drop_run))
		return;
	twinfs__lock_drop__init(&l->drop);
	l->drop.ino = l->ino;
	l->drop.by_file = l->kind == LOP_RELEASE;
	l->drop.owner = l->fi.lock_owner;
	l->drop.file = l->fi.fh;
	/* No op: an interrupted close still releases the locks. */
	fc_mgr_send(cl, &l->mc, TWINFS__MSG_TYPE__MSG_UNLOCK_ALL,
		    &l->drop.base, NULL, NULL, 0, drop_cb, l);
}

void fc_lock_close(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   bool release, fc_close_fn next)
{
	struct fc_client *cl = fuse_req_userdata(req);
	struct lop *l;

	/* A mount that never locked closes without the extra hop. */
	if (!atomic_load(&cl->locks_used) ||
	    !(l = fc_op_new(cl, req, sizeof(*l), drop_run))) {
		next(req, ino, fi);
		return;
	}
	l->kind = release ? LOP_RELEASE : LOP_FLUSH;
	l->ino = ino;
	l->fi = *fi;
	l->next = next;
	fc_loop_submit(cl, &l->op);
}

/* ------------------------------------------------------------- reclaim */

static void reclaim_cb(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	struct lop *l = mc->arg;

	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		/* Lost: another client took the range while we were away
		 * (after the grace) or mgrd refused it. */
		tw_err("lock on ino %" PRIu64 " [%" PRIu64 ", %" PRIu64 "] of "
		       "pid %u could not be re-claimed from mgrd %s after its "
		       "restart: %s; the process no longer holds it", l->ino,
		       l->want.start, l->want.end, l->want.pid,
		       mc->cl->mgr ? wire_peer_name(mc->cl->mgr) : "?",
		       strerror(-status));
		l->want.type = TW_LK_UNLCK;
		tw_lk_set(&mc->cl->locks->mine, l->ino, &l->want);
	}
	fc_op_free(&l->op);
}

void fc_lock_reclaim(struct fc_client *cl)
{
	const struct tw_lk *k = NULL;
	uint64_t ino;
	size_t it = 0;
	unsigned n = 0;

	if (!cl->locks || cl->stopping)
		return;
	while ((k = tw_lk_next(&cl->locks->mine, &it, &ino, k))) {
		struct lop *l = fc_op_new(cl, NULL, sizeof(*l), NULL);

		if (!l) {
			tw_err("re-claiming locks: out of memory");
			break;
		}
		l->kind = LOP_RECLAIM;
		l->ino = ino;
		l->want = *k;
		lock_pb(l);
		l->lock.reclaim = true;
		cl->ops_outstanding++;
		fc_mgr_send(cl, &l->mc, TWINFS__MSG_TYPE__MSG_LOCK,
			    &l->lock.base, NULL, NULL, 0, reclaim_cb, l);
		n++;
	}
	if (n)
		tw_info("mgrd %s restarted: re-claiming %u locks",
			cl->mgr ? wire_peer_name(cl->mgr) : "?", n);
}
