/* loop.h - the I/O loop thread (loop.c): ops, the handoff from FUSE
 * workers, the one-reply rule, deferred callbacks (mount.h says who owns
 * what). */
#ifndef TWINFS_FC_LOOP_H
#define TWINFS_FC_LOOP_H

#include "mount.h"

typedef void (*fc_op_fn)(struct fc_op *op);

/* The head of every handed-off request.  Allocated by the handler with
 * fc_op_new (which captures the caller's context), then owned by the loop
 * thread from fc_loop_submit on; freed by the fc_op_reply_* functions (or
 * fc_op_free for ops with no FUSE request). */
struct fc_op {
	struct fc_op *next;        /* [queue_lock] handoff queue */
	fc_op_fn run;              /* first step, on the loop thread */
	void (*cleanup)(struct fc_op *op); /* frees the extension's buffers */
	struct fc_client *cl;
	fuse_req_t req;            /* NULL for internal ops */
	atomic_int interrupted;
	uint32_t uid, gid, pid, umask;
	uint32_t *groups;          /* fc_op_groups; freed with the op */
	uint32_t n_groups;
	uint64_t later_at;         /* [loop] fc_op_later */
	struct fc_op *later_next;  /* [loop] */
};

int fc_loop_start(struct fc_client *cl);
/* Stop the loop thread: finish every op (with errors), close every peer and
 * handle, join.  Idempotent.  Call from the main thread only. */
void fc_loop_stop(struct fc_client *cl);
/* Main thread, instead of fuse_session_loop_mt: the loop thread reads
 * /dev/fuse itself; returns when the session ended (unmount, signal). */
int fc_loop_serve(struct fc_client *cl);
/* Any thread: hand op to the loop thread. */
void fc_loop_submit(struct fc_client *cl, struct fc_op *op);
/* FUSE worker: hand a write op to the loop thread and answer its request
 * with count written, in that order as the application sees it; the op
 * goes on without a request (wbehind.c).  fuse_reply_write's result. */
int fc_loop_submit_written(struct fc_client *cl, struct fc_op *op,
			   size_t count);
/* Allocate a zeroed op of `size` bytes (>= sizeof(struct fc_op)), with the
 * request's context captured.  req may be NULL (internal op).  Returns NULL
 * on ENOMEM (then the caller replies ENOMEM itself). */
void *fc_op_new(struct fc_client *cl, fuse_req_t req, size_t size,
		fc_op_fn run);
/* FUSE worker: read the caller's supplementary groups (from /proc, so
 * only for the requests mgrd checks permissions of: FORMAT.md
 * "Permissions"); they go in the Ctx of every request the op sends.
 * Nothing for root, which passes every check, or on failure (mgrd then
 * counts the primary group only). */
#define FC_GROUPS_MAX 256
void fc_op_groups(struct fc_op *op);
/* Loop thread: reply and free the op.  Each returns what fuse_reply_*
 * returned (a negative errno when the kernel did not take the reply). */
int fc_op_reply_err(struct fc_op *op, int err);   /* err >= 0 */
int fc_op_reply_entry(struct fc_op *op, const struct fuse_entry_param *e);
int fc_op_reply_create(struct fc_op *op, const struct fuse_entry_param *e,
		       const struct fuse_file_info *fi);
int fc_op_reply_attr(struct fc_op *op, const struct stat *st, double timeout);
int fc_op_reply_open(struct fc_op *op, const struct fuse_file_info *fi);
int fc_op_reply_write(struct fc_op *op, size_t count);
/* Write-behind: answer the WRITE now and keep the op (its request is gone:
 * op->req becomes NULL, and its later fc_op_reply_* only frees it). */
int fc_op_reply_early_write(struct fc_op *op, size_t count);
int fc_op_reply_buf(struct fc_op *op, const void *buf, size_t size);
int fc_op_reply_iov(struct fc_op *op, const struct iovec *iov, int count);
int fc_op_reply_lseek(struct fc_op *op, off_t off);
int fc_op_reply_readlink(struct fc_op *op, const char *target);
int fc_op_reply_statfs(struct fc_op *op, const struct statvfs *st);
int fc_op_reply_xattr(struct fc_op *op, size_t count);
int fc_op_reply_lock(struct fc_op *op, const struct flock *lock);
/* Free an op without a reply (internal ops, or after replying by hand). */
void fc_op_free(struct fc_op *op);
bool fc_op_interrupted(const struct fc_op *op);
/* Loop thread: run op->run again after ms (at once when stopping). */
void fc_op_later(struct fc_op *op, uint32_t ms);
/* Loop thread: ops waiting in fc_op_later to run `run` become due now
 * (they run at the next tick of the later timer, within 50 ms). */
void fc_op_later_wake(struct fc_client *cl, fc_op_fn run);

/* Loop thread: wire_call that always ends in cb, exactly once: when
 * wire_call fails at once (or the client is stopping), cb runs later from
 * the loop with that status.  peer may be NULL (-ENOTCONN). */
void fc_call(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	     const ProtobufCMessage *body, const struct iovec *iov, int niov,
	     uint32_t timeout_ms, wire_reply_cb cb, void *arg);
/* Loop thread: cb(status, NULL, arg) later, from the loop. */
void fc_defer(struct fc_client *cl, wire_reply_cb cb, void *arg, int status);
/* fc_call with the data sent from z without a copy (wire_call_z);
 * z->release runs exactly once either way, also when the call could not
 * start. */
void fc_call_z(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	       const ProtobufCMessage *body, const struct wire_zdata *z,
	       uint32_t timeout_ms, wire_reply_cb cb, void *arg);

#endif
