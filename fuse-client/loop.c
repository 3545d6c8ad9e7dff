/* loop.c - the client's I/O loop thread, the handoff queue and the
 * reading of /dev/fuse.
 *
 * Handlers never block on the network: a handler packs its request into
 * an op and calls fc_loop_submit(), which appends it to a mutex-protected
 * queue.  The loop thread drains the queue and runs each op's first step;
 * from then on the op lives on the loop thread until one of the
 * fc_op_reply_*() functions answers the kernel and frees it.
 *
 * Who reads /dev/fuse (docs/ARCHITECTURE.md "Threads and ownership"):
 *   - libfuse's workers (-o worker_reads), and each submission
 *     wakes the loop with uv_async_send().  Where waking an idle vCPU is
 *     dear, a worker that only the application wakes tends to run on the
 *     application's vCPU, and requests answered without a server cost no
 *     such wakeup (test/bench/RESULTS.md "Session 54").
 *   - The loop itself (-o io_thread_reads, fc_loop_serve): the FUSE
 *     fd is one more handle of the loop, non-blocking, polled for input.
 *     A handler then runs on the loop, and what it queued runs as soon as
 *     it returns, in the same turn: a request that needs a server is on
 *     the wire without a second thread being woken, faster where wakeups
 *     are cheap (RESULTS.md "Session 41" and "Session 56").
 *   Without either option main.c measures a wakeup (common/wake.h) and
 *   takes the loop where it is cheap.
 * This file also owns deferred callbacks (fc_call: a wire_call that fails
 * at once still completes through its callback, later) and the orderly
 * stop of the loop.
 *
 * Interrupts: fc_loop_submit registers an interrupt callback that only sets
 * op->interrupted (a write answered by the worker, fc_loop_submit_written,
 * has no request to interrupt).  Before replying, fc_op_reply_*()
 * re-registers NULL, which takes libfuse's per-request lock and so waits
 * out a running callback; after that nothing can touch the op, and it is
 * freed.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ident.h"
#include "kio.h"
#include "locks.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "stall.h"
#include "wbehind.h"

struct fc_deferred {
	struct fc_deferred *next;
	wire_reply_cb cb;
	void *arg;
	int status;
};

/* ------------------------------------------------------------ handoff */

static void interrupt_cb(fuse_req_t req, void *data)
{
	struct fc_op *op = data;

	(void)req;
	atomic_store(&op->interrupted, 1);
	atomic_store(&op->cl->intr_pending, 1);
	uv_async_send(&op->cl->async);
}

void *fc_op_new(struct fc_client *cl, fuse_req_t req, size_t size,
		fc_op_fn run)
{
	struct fc_op *op = calloc(1, size);

	if (!op)
		return NULL;
	op->cl = cl;
	op->req = req;
	op->run = run;
	atomic_init(&op->interrupted, 0);
	if (req) {
		const struct fuse_ctx *ctx = fuse_req_ctx(req);

		op->uid = ctx->uid;
		op->gid = ctx->gid;
		op->pid = (uint32_t)ctx->pid;
		op->umask = ctx->umask;
	}
	return op;
}

void fc_op_groups(struct fc_op *op)
{
	gid_t buf[FC_GROUPS_MAX];
	int n;

	if (!op->req || op->uid == 0 || op->groups)
		return;
	n = fuse_req_getgroups(op->req, FC_GROUPS_MAX, buf);
	if (n <= 0)
		return;
	/* The count is the process's, which may exceed what was copied. */
	if (n > FC_GROUPS_MAX)
		n = FC_GROUPS_MAX;
	op->groups = malloc((size_t)n * sizeof(*op->groups));
	if (!op->groups)
		return;
	for (int i = 0; i < n; i++)
		op->groups[i] = (uint32_t)buf[i];
	op->n_groups = (uint32_t)n;
}

/* Append op to the handoff queue; queue_lock held. */
static void queue_locked(struct fc_client *cl, struct fc_op *op)
{
	op->next = NULL;
	if (cl->q_tail)
		cl->q_tail->next = op;
	else
		cl->q_head = op;
	cl->q_tail = op;
}

/* Set while the loop runs a handler for a request it read itself
 * (fuse_read_cb): what the handler queues runs when it returns. */
static __thread bool in_handler;

void fc_loop_submit(struct fc_client *cl, struct fc_op *op)
{
	if (op->req)
		fuse_req_interrupt_func(op->req, interrupt_cb, op);
	pthread_mutex_lock(&cl->queue_lock);
	queue_locked(cl, op);
	pthread_mutex_unlock(&cl->queue_lock);
	if (!in_handler)
		uv_async_send(&cl->async);
}

int fc_loop_submit_written(struct fc_client *cl, struct fc_op *op,
			   size_t count)
{
	fuse_req_t req = op->req;

	assert(req);
	/* Queued before the answer: whatever the application sends after
	 * it is queued after this op.  From the unlock on the op is the
	 * loop's (and may be gone). */
	op->req = NULL;
	pthread_mutex_lock(&cl->queue_lock);
	queue_locked(cl, op);
	pthread_mutex_unlock(&cl->queue_lock);
	if (!in_handler)
		uv_async_send(&cl->async);
	return fuse_reply_write(req, count);
}

bool fc_op_interrupted(const struct fc_op *op)
{
	return atomic_load(&((struct fc_op *)op)->interrupted) != 0;
}

void fc_op_free(struct fc_op *op)
{
	struct fc_client *cl = op->cl;

	if (op->cleanup)
		op->cleanup(op);
	cl->ops_outstanding--;
	free(op->groups);
	free(op);
}

/* Disarm the interrupt callback: after this returns no interrupt callback
 * runs or will run for op->req. */
static void disarm(struct fc_op *op)
{
	if (op->req)
		fuse_req_interrupt_func(op->req, NULL, NULL);
}

/* An op answered early (fc_op_reply_early_write, fc_loop_submit_written)
 * has no request left: its final "reply" only frees it. */
#define REPLY(op, call) do {                     \
		int rc_ = 0;                     \
		disarm(op);                      \
		if ((op)->req)                   \
			rc_ = (call);            \
		fc_op_free(op);                  \
		return rc_;                      \
	} while (0)

int fc_op_reply_err(struct fc_op *op, int err)
{
	REPLY(op, fuse_reply_err(op->req, err));
}

int fc_op_reply_entry(struct fc_op *op, const struct fuse_entry_param *e)
{
	REPLY(op, fuse_reply_entry(op->req, e));
}

int fc_op_reply_create(struct fc_op *op, const struct fuse_entry_param *e,
		       const struct fuse_file_info *fi)
{
	REPLY(op, fuse_reply_create(op->req, e, fi));
}

int fc_op_reply_attr(struct fc_op *op, const struct stat *st, double timeout)
{
	REPLY(op, fuse_reply_attr(op->req, st, timeout));
}

int fc_op_reply_open(struct fc_op *op, const struct fuse_file_info *fi)
{
	REPLY(op, fuse_reply_open(op->req, fi));
}

int fc_op_reply_write(struct fc_op *op, size_t count)
{
	REPLY(op, fuse_reply_write(op->req, count));
}

int fc_op_reply_early_write(struct fc_op *op, size_t count)
{
	int rc;

	assert(op->req);
	disarm(op);
	rc = fuse_reply_write(op->req, count);
	op->req = NULL;
	/* An interrupt that came before the answer no longer concerns the
	 * write: it must go on landing, not give up with EINTR. */
	atomic_store(&op->interrupted, 0);
	return rc;
}

int fc_op_reply_lseek(struct fc_op *op, off_t off)
{
	REPLY(op, fuse_reply_lseek(op->req, off));
}

int fc_op_reply_buf(struct fc_op *op, const void *buf, size_t size)
{
	REPLY(op, fuse_reply_buf(op->req, buf, size));
}

int fc_op_reply_iov(struct fc_op *op, const struct iovec *iov, int count)
{
	REPLY(op, fuse_reply_iov(op->req, iov, count));
}

int fc_op_reply_readlink(struct fc_op *op, const char *target)
{
	REPLY(op, fuse_reply_readlink(op->req, target));
}

int fc_op_reply_statfs(struct fc_op *op, const struct statvfs *st)
{
	REPLY(op, fuse_reply_statfs(op->req, st));
}

int fc_op_reply_xattr(struct fc_op *op, size_t count)
{
	REPLY(op, fuse_reply_xattr(op->req, count));
}

int fc_op_reply_lock(struct fc_op *op, const struct flock *lock)
{
	REPLY(op, fuse_reply_lock(op->req, lock));
}

/* ------------------------------------------------------- deferred calls */

static void call_failed(struct fc_client *cl, int rc, wire_reply_cb cb,
			void *arg)
{
	struct fc_deferred *d;

	/* A call that failed at once completes through the callback later,
	 * from the loop, so callers see one path.  Without memory we cannot
	 * defer: complete now (callers tolerate it; this is the only
	 * synchronous completion). */
	d = malloc(sizeof(*d));
	if (!d) {
		cb(rc, NULL, arg);
		return;
	}
	d->cb = cb;
	d->arg = arg;
	d->status = rc;
	d->next = NULL;
	if (cl->def_tail)
		cl->def_tail->next = d;
	else
		cl->def_head = d;
	cl->def_tail = d;
	uv_async_send(&cl->async);
}

void fc_defer(struct fc_client *cl, wire_reply_cb cb, void *arg, int status)
{
	call_failed(cl, status, cb, arg);
}

void fc_call(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	     const ProtobufCMessage *body, const struct iovec *iov, int niov,
	     uint32_t timeout_ms, wire_reply_cb cb, void *arg)
{
	int rc = -ENOTCONN;

	bool to_mgrd = peer && (peer == cl->mgr || peer == cl->ctl);

	if (cl->stopping) {
		rc = -ECANCELED;
	} else if (peer) {
		/* A subtree mount's inodes as mgrd knows them (ident.c);
		 * wire_call packs the body before it returns. */
		if (to_mgrd)
			fc_ident_swap(cl, (ProtobufCMessage *)body);
		rc = wire_call(peer, type, body, iov, niov, timeout_ms, cb, arg);
		if (to_mgrd)
			fc_ident_swap(cl, (ProtobufCMessage *)body);
	}
	if (rc < 0)
		call_failed(cl, rc, cb, arg);
}

void fc_call_z(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	       const ProtobufCMessage *body, const struct wire_zdata *z,
	       uint32_t timeout_ms, wire_reply_cb cb, void *arg)
{
	int rc = -ENOTCONN;

	if (cl->stopping)
		rc = -ECANCELED;
	else if (peer)
		rc = wire_call_z(peer, type, body, z, timeout_ms, cb, arg);
	if (rc < 0) {
		z->release(z->arg);   /* the wire layer never took it */
		call_failed(cl, rc, cb, arg);
	}
}

static void run_deferred(struct fc_client *cl)
{
	/* Callbacks may defer more; run until empty. */
	while (cl->def_head) {
		struct fc_deferred *d = cl->def_head;

		cl->def_head = d->next;
		if (!cl->def_head)
			cl->def_tail = NULL;
		d->cb(d->status, NULL, d->arg);
		free(d);
	}
}

/* ------------------------------------------------------------ later */

static void later_cb(uv_timer_t *t)
{
	struct fc_client *cl = t->data;
	struct fc_op **pp = &cl->later_head, *op, *due = NULL;
	uint64_t now = tw_now_ms();

	while ((op = *pp)) {
		if (op->later_at <= now || cl->stopping) {
			*pp = op->later_next;
			op->later_next = due;
			due = op;
		} else {
			pp = &op->later_next;
		}
	}
	while ((op = due)) {
		due = op->later_next;
		op->run(op);
	}
	run_deferred(cl);
	if (!cl->later_head)
		uv_timer_stop(t);
}

void fc_op_later_wake(struct fc_client *cl, fc_op_fn run)
{
	for (struct fc_op *op = cl->later_head; op; op = op->later_next)
		if (op->run == run)
			op->later_at = 0;
}

void fc_op_later(struct fc_op *op, uint32_t ms)
{
	struct fc_client *cl = op->cl;

	op->later_at = tw_now_ms() + ms;
	op->later_next = cl->later_head;
	cl->later_head = op;
	if (!uv_is_active((uv_handle_t *)&cl->later_timer))
		uv_timer_start(&cl->later_timer, later_cb, 50, 50);
}

/* ---------------------------------------------------------- the thread */

static void close_cb(uv_handle_t *h)
{
	struct fc_client *cl = h->data;

	cl->handles_open--;
}

static void maybe_close_handles(struct fc_client *cl)
{
	if (!cl->stopping || cl->ops_outstanding > 0 || cl->def_head ||
	    cl->handles_open == 0 || uv_is_closing((uv_handle_t *)&cl->async))
		return;
	uv_close((uv_handle_t *)&cl->retry_timer, close_cb);
	uv_close((uv_handle_t *)&cl->ping_timer, close_cb);
	uv_close((uv_handle_t *)&cl->report_timer, close_cb);
	uv_close((uv_handle_t *)&cl->rel_timer, close_cb);
	uv_close((uv_handle_t *)&cl->later_timer, close_cb);
	uv_close((uv_handle_t *)&cl->park_timer, close_cb);
	uv_close((uv_handle_t *)&cl->spin_prepare, close_cb);
	uv_close((uv_handle_t *)&cl->async, close_cb);
	tw_stall_stop(&cl->loop);
	if (cl->fuse_polling)
		uv_close((uv_handle_t *)&cl->fuse_poll, close_cb);
}

static void stop_poll_cb(uv_timer_t *t)
{
	struct fc_client *cl = t->data;

	run_deferred(cl);
	if (cl->later_head)
		later_cb(&cl->later_timer);
	maybe_close_handles(cl);
}

static void stop_now(struct fc_client *cl)
{
	uint32_t i;

	if (cl->stopping)
		return;
	cl->stopping = true;
	if (cl->fuse_polling)
		uv_poll_stop(&cl->fuse_poll);
	uv_timer_stop(&cl->ping_timer);
	uv_timer_stop(&cl->report_timer);
	/* Writes held back to be joined go out now, and end with the peers
	 * below. */
	fc_wb_kick(cl, 0);
	/* Sent, then failed with the peer below: every one is freed. */
	fc_mgr_release_flush(cl);
	fc_mgr_shutdown(cl);
	/* Poll every 10 ms until every op has finished, then close. */
	uv_timer_start(&cl->retry_timer, stop_poll_cb, 10, 10);
	/* Freeing a peer fails its calls with -ECANCELED; the ops answer the
	 * kernel (or nobody, if the session is gone) and finish. */
	if (cl->mgr) {
		wire_peer_free(cl->mgr);
		cl->mgr = NULL;
	}
	if (cl->ctl) {
		wire_peer_free(cl->ctl);
		cl->ctl = NULL;
	}
	for (i = 0; i <= TW_MAX_IODS; i++) {
		if (cl->iods[i].peer) {
			wire_peer_free(cl->iods[i].peer);
			cl->iods[i].peer = NULL;
		}
	}
}

/* Run every queued op; returns whether a stop was asked for. */
static bool run_queue(struct fc_client *cl)
{
	struct fc_op *op;
	bool stop;

	for (;;) {
		pthread_mutex_lock(&cl->queue_lock);
		op = cl->q_head;
		if (op) {
			cl->q_head = op->next;
			if (!cl->q_head)
				cl->q_tail = NULL;
		}
		stop = cl->stop_requested;
		pthread_mutex_unlock(&cl->queue_lock);
		if (!op)
			break;
		cl->ops_outstanding++;
		op->run(op);
		run_deferred(cl);
	}
	run_deferred(cl);
	if (atomic_exchange(&cl->intr_pending, 0)) {
		fc_mgr_interrupts(cl);
		fc_lock_interrupts(cl);
		run_deferred(cl);
	}
	return stop;
}

/* ------------------------------------------------- /dev/fuse on the loop */

/* Requests read per wakeup before the loop looks at its sockets again. */
#define FC_FUSE_BATCH 8

/* The session has ended (fuse_session_exit): wake main's wait. */
static void fuse_wake_main(struct fc_client *cl)
{
	uint64_t one = 1;

	if (write(cl->fuse_done_fd, &one, sizeof(one)) < 0) {
		/* an eventfd that is not full cannot fail */
	}
}

static void fuse_read_cb(uv_poll_t *h, int status, int events)
{
	struct fc_client *cl = h->data;
	int rc = 0;

	(void)events;
	/* An unmount shows as POLLERR, which libuv reports as UV_EBADF:
	 * the read below then finds ENODEV and libfuse ends the session. */
	for (int i = 0; i < FC_FUSE_BATCH; i++) {
		rc = fuse_session_receive_buf(cl->se, &cl->fuse_buf);
		if (rc == -EAGAIN || rc == -EINTR) {
			if (status == 0)
				return;
			break;
		}
		if (rc <= 0 || fuse_session_exited(cl->se))
			break;
		cl->spin_read_ns = tw_now_ns();
		tw_spin_done(&cl->spin, cl->spin_read_ns);
		in_handler = true;
		fuse_session_process_buf(cl->se, &cl->fuse_buf);
		in_handler = false;
		/* What the handler queued runs now, before the next read. */
		(void)run_queue(cl);
	}
	if (!fuse_session_exited(cl->se) && status == 0 && rc > 0)
		return;   /* more to read: the poll fires again */
	/* Unmounted (ENODEV), or the device failed: main takes it from
	 * here, as after fuse_session_loop_mt. */
	if (!fuse_session_exited(cl->se))
		tw_warn("reading /dev/fuse failed: %s",
			strerror(rc < 0 ? -rc : -status));
	fuse_session_exit(cl->se);
	uv_poll_stop(h);
	fuse_wake_main(cl);
}

/* docs/ARCHITECTURE.md "Waiting without sleeping": where the loop reads
 * /dev/fuse, a reply sent after the last request read means it waits for
 * the kernel's next request, which a caller in a loop sends within a few
 * us; an mgrd request in flight, for an answer that comes within tens of
 * us.  Poll for them before sleeping, while such waits stay within -o
 * spin_us and -o mgr_spin_us. */
static void spin_prepare_cb(uv_prepare_t *p)
{
	struct fc_client *cl = p->data;
	uint64_t reply = fc_kio_last_reply_ns(), now = tw_now_ns(), until;

	if (cl->fuse_polling && reply > cl->spin_read_ns)
		tw_spin_arm(&cl->spin, reply);
	until = TW_MAX(tw_spin_until(&cl->spin, now),
		       tw_spin_until(&cl->mgr_spin, now));
	if (until)
		(void)tw_spin_poll(uv_backend_fd(&cl->loop), until);
}

static void fuse_poll_start(struct fc_client *cl)
{
	int fd = fuse_session_fd(cl->se);
	int rc;

	cl->fuse_poll.data = cl;
	rc = fd < 0 ? -EBADF : uv_poll_init(&cl->loop, &cl->fuse_poll, fd);
	if (rc == 0) {
		cl->fuse_polling = true;
		cl->handles_open++;
		rc = uv_poll_start(&cl->fuse_poll, UV_READABLE, fuse_read_cb);
	}
	if (rc < 0) {
		tw_err("cannot read /dev/fuse on the I/O loop: %s",
			 uv_strerror(rc));
		fuse_session_exit(cl->se);
		fuse_wake_main(cl);
	}
}

static void async_cb(uv_async_t *a)
{
	struct fc_client *cl = a->data;
	bool stop = run_queue(cl);

	if (atomic_load(&cl->fuse_on_loop) && !cl->fuse_polling &&
	    !cl->stopping)
		fuse_poll_start(cl);
	if (stop)
		stop_now(cl);
	/* Deferred failures and freed peers may finish ops on later turns;
	 * the retry timer (running while stopping) calls maybe_close too. */
	maybe_close_handles(cl);
}

int fc_loop_serve(struct fc_client *cl)
{
	int fd = fuse_session_fd(cl->se);
	int fl = fcntl(fd, F_GETFL);
	sigset_t ends, old;
	struct pollfd pfd;

	/* Non-blocking: a request withdrawn between poll and read (its
	 * caller killed) must not park the loop in read(). */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	/* The signals libfuse's handlers end the session on reach only this
	 * thread (the loop blocks them all).  Blocked here except inside
	 * ppoll, so one that comes before the wait is not lost. */
	sigemptyset(&ends);
	sigaddset(&ends, SIGHUP);
	sigaddset(&ends, SIGINT);
	sigaddset(&ends, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &ends, &old);
	atomic_store(&cl->fuse_on_loop, true);
	uv_async_send(&cl->async);
	pfd = (struct pollfd){ .fd = cl->fuse_done_fd, .events = POLLIN };
	while (!fuse_session_exited(cl->se))
		(void)ppoll(&pfd, 1, NULL, &old);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

static void *loop_main(void *arg)
{
	struct fc_client *cl = arg;

	/* On this thread: the watch reads the CPU time of its caller. */
	if (tw_stall_start(&cl->loop) < 0)
		tw_warn("cannot watch the I/O loop for stalls");
	uv_run(&cl->loop, UV_RUN_DEFAULT);
	return NULL;
}

int fc_loop_start(struct fc_client *cl)
{
	sigset_t all, old;
	int rc;

	cl->fuse_done_fd = eventfd(0, EFD_CLOEXEC);
	if (cl->fuse_done_fd < 0)
		return -errno;
	rc = uv_loop_init(&cl->loop);
	if (rc < 0)
		return rc;
	cl->loop.data = cl;
	rc = uv_async_init(&cl->loop, &cl->async, async_cb);
	if (rc < 0)
		return rc;
	cl->async.data = cl;
	uv_timer_init(&cl->loop, &cl->retry_timer);
	cl->retry_timer.data = cl;
	uv_timer_init(&cl->loop, &cl->ping_timer);
	cl->ping_timer.data = cl;
	uv_timer_init(&cl->loop, &cl->report_timer);
	cl->report_timer.data = cl;
	uv_timer_init(&cl->loop, &cl->later_timer);
	cl->later_timer.data = cl;
	uv_timer_init(&cl->loop, &cl->rel_timer);
	cl->rel_timer.data = cl;
	uv_timer_init(&cl->loop, &cl->park_timer);
	cl->park_timer.data = cl;
	uv_prepare_init(&cl->loop, &cl->spin_prepare);
	cl->spin_prepare.data = cl;
	tw_spin_init(&cl->spin, cl->opts.spin_us);
	tw_spin_init(&cl->mgr_spin, cl->opts.mgr_spin_us);
	if (cl->opts.spin_us || cl->opts.mgr_spin_us)
		uv_prepare_start(&cl->spin_prepare, spin_prepare_cb);
	cl->handles_open = 8;
	rc = fc_mgr_init(cl);
	if (rc < 0)
		return rc;
	/* Signals belong to the main thread (libfuse's exit handler must
	 * interrupt fuse_session_loop_mt's wait there). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&cl->thread, NULL, loop_main, cl);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	cl->thread_started = true;
	return 0;
}

void fc_loop_stop(struct fc_client *cl)
{
	if (!cl->thread_started)
		return;
	pthread_mutex_lock(&cl->queue_lock);
	cl->stop_requested = true;
	pthread_mutex_unlock(&cl->queue_lock);
	uv_async_send(&cl->async);
	pthread_join(cl->thread, NULL);
	cl->thread_started = false;
	/* Everything was closed by the loop; free what is left of the loop. */
	uv_loop_close(&cl->loop);
	free(cl->fuse_buf.mem);
	cl->fuse_buf.mem = NULL;
	close(cl->fuse_done_fd);
	cl->fuse_done_fd = -1;
	fc_locks_free(cl);
}

