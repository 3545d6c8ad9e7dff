/* jbd_io.c - the I/O layer of the block journal: every write and fsync the
 * journal issues (log appends, the superblock, checkpoint home writes) goes
 * through jbd__io_submit, which runs it on io_uring (a lone small log
 * append while nothing else on the journal file is in flight: with
 * pwritev on the caller's thread, run_inline), or, when the caller set
 * jbd_opts.io (tests), synchronously through that table so a fault layer
 * can fail, tear or drop the N-th write and keep a shadow of synced
 * bytes.
 * jbd_inject_log_eio (drills on real daemons) fails the next log write here,
 * before it reaches either layer.
 *
 * Requests wait in a software queue and are submitted in batches with at
 * most max_inflight in the kernel; a full ring is a normal condition (we
 * submit what we have and retry later, never assert).  Completions follow
 * liburing's io_uring-cp pattern: error / short (resubmit the rest) /
 * complete.  The eventfd registered with the ring (or written by the
 * synchronous layer and run_inline; not by run_inline when the owner
 * drains before it sleeps, jbd_opts.owner_drains) tells the owner's loop
 * that completions are ready.
 *
 * O_DIRECT writes (log writes on dfd, jbd_commit.c; full-block home
 * writes of the checkpoint) carry the buffered descriptor of the same file
 * in alt_fd: one refused with EINVAL is redone there and turns O_DIRECT
 * off for the journal (queued ones move to alt_fd when submitted); the
 * rest of a short one is written there, where any alignment goes.
 */
#include "jbd_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#define RING_ENTRIES 256

int jbd__io_init(struct jbd *j)
{
	j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->efd < 0)
		return -errno;
	j->max_inflight = j->opts.max_inflight ? j->opts.max_inflight : 64;
	if (j->max_inflight > RING_ENTRIES)
		j->max_inflight = RING_ENTRIES;
	if (j->io != NULL)
		return 0;
	int rc = io_uring_queue_init(RING_ENTRIES, &j->ring, 0);
	if (rc < 0)
		return rc;
	j->ring_ok = true;
	rc = io_uring_register_eventfd(&j->ring, j->efd);
	if (rc < 0)
		return rc;
	return 0;
}

void jbd__io_fini(struct jbd *j)
{
	if (j->ring_ok)
		io_uring_queue_exit(&j->ring);
	j->ring_ok = false;
	if (j->efd >= 0)
		close(j->efd);
	j->efd = -1;
	struct jbd_io *io;
	while ((io = j->q_head) != NULL) {
		j->q_head = io->next;
		jbd__io_free(io);
	}
	while ((io = j->done_head) != NULL) {
		j->done_head = io->next;
		jbd__io_free(io);
	}
}

struct jbd_io *jbd__io_new(int op, enum jbd_io_kind kind, int fd,
			   uint64_t off, jbd_io_done done, void *ctx)
{
	struct jbd_io *io = calloc(1, sizeof(*io));
	if (io == NULL)
		return NULL;
	io->op = op;
	io->kind = kind;
	io->fd = fd;
	io->off = off;
	io->done = done;
	io->ctx = ctx;
	io->iov = io->iov_inline;
	io->alt_fd = -1;
	return io;
}

void jbd__io_free(struct jbd_io *io)
{
	if (io == NULL)
		return;
	free(io->iov_owned);
	free(io);
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Drop the first n bytes of io's vector (after a short write), and the
 * empty entries after them, so that what is left starts with a byte to
 * write (a write of nothing would read as EOF). */
static void iov_advance(struct jbd_io *io, size_t n)
{
	io->off += n;
	while (io->iovcnt > 0 && (n > 0 || io->iov[0].iov_len == 0)) {
		if (n >= io->iov[0].iov_len) {
			n -= io->iov[0].iov_len;
			io->iov++;
			io->iovcnt--;
		} else {
			io->iov[0].iov_base = (uint8_t *)io->iov[0].iov_base + n;
			io->iov[0].iov_len -= n;
			n = 0;
		}
	}
}

static void done_push(struct jbd *j, struct jbd_io *io, int rc);

void jbd__wake(struct jbd *j)
{
	uint64_t one = 1;
	ssize_t w;

	if (j->efd < 0)
		return;           /* not open yet (an abort in jbd_open) */
	w = write(j->efd, &one, sizeof(one));
	(void)w;
}

void jbd_inject_log_eio(struct jbd *j)
{
	j->fault_log_eio = true;
}

void jbd_inject_direct_fault(struct jbd *j, int err)
{
	assert(err == -EINVAL || err == 0);
	j->fault_direct = err == 0 ? 1 : err;
}

void jbd__io_submit(struct jbd *j, struct jbd_io *io)
{
	if (j->fault_log_eio && io->op == IO_WRITE && io->kind == JBD_IO_LOG) {
		/* Test fault: complete it as the disk would fail it.  It
		 * never enters the queue, so no chain links through it. */
		j->fault_log_eio = false;
		tw_warn("journal %s: injected fault: a log write of %zu bytes "
			"at offset %" PRIu64 " fails with EIO", j->opts.path,
			iov_total(io->iov, io->iovcnt), io->off);
		done_push(j, io, -EIO);
		jbd__wake(j);
		return;
	}
	io->next = NULL;
	if (j->q_tail)
		j->q_tail->next = io;
	else
		j->q_head = io;
	j->q_tail = io;
}

static void push_front(struct jbd *j, struct jbd_io *io)
{
	io->next = j->q_head;
	j->q_head = io;
	if (j->q_tail == NULL)
		j->q_tail = io;
}

static void done_push(struct jbd *j, struct jbd_io *io, int rc)
{
	io->rc = rc;
	io->next = NULL;
	if (j->done_tail)
		j->done_tail->next = io;
	else
		j->done_head = io;
	j->done_tail = io;
}

/* Run one request through the synchronous test layer. */
static void run_sync(struct jbd *j, struct jbd_io *io)
{
	const struct jbd_io_ops *x = j->io;
	if (io->op == IO_FSYNC) {
		done_push(j, io, x->fsync(x->arg, io->kind, io->fd));
		return;
	}
	while (io->iovcnt > 0) {
		if (io->iov[0].iov_len == 0) {
			io->iov++;
			io->iovcnt--;
			continue;
		}
		long n = x->pwrite(x->arg, io->kind, io->fd, io->iov[0].iov_base,
				   io->iov[0].iov_len, io->off);
		if (n < 0) {
			done_push(j, io, (int)n);
			return;
		}
		if (n == 0) {
			done_push(j, io, -EIO);
			return;
		}
		iov_advance(io, (size_t)n);
	}
	done_push(j, io, 0);
}

/* A lone small log append, while no other request on the journal file is
 * in flight, is written here with pwritev and completes through the done
 * list like the test layer's.
 * Through the ring it would be punted to an io-wq worker (ext4 cannot
 * take a buffered write without blocking), whose wakeup and completion
 * cost two context switches, on this kind of VM each a wakeup of an idle
 * vCPU (tens of us), for a copy of a few pages.
 *   - Only while nothing on the journal file is in flight on the ring:
 *     io-wq keeps buffered writes of one file in order, and a write done
 *     here must not pass one still queued there.  Checkpoint writes to
 *     home objects may be in flight: they are other files, and while a
 *     checkpoint runs (under a steady load, most of the time) every log
 *     append would otherwise take the io-wq hop.
 *   - Only a lone log append (nothing queued behind it): one per commit of
 *     requests that arrived, so the loop thread does no more of it than
 *     the requests bring.  The checkpoint's home writes stay on the ring;
 *     inline, each completion would queue the next, and a whole
 *     checkpoint would run in one jbd_process call, blocking the loop.
 *   - Never O_DIRECT writes, links or fsyncs. */
#define INLINE_MAX (128u << 10)

static bool run_inline(struct jbd *j, struct jbd_io *io)
{
	if (j->log_inflight > 0 || io->next != NULL || io->kind != JBD_IO_LOG ||
	    io->op != IO_WRITE || io->alt_fd >= 0 || io->link)
		return false;
	size_t total = iov_total(io->iov, io->iovcnt);
	if (total == 0 || total > INLINE_MAX)
		return false;
	j->q_head = io->next;
	if (j->q_head == NULL)
		j->q_tail = NULL;
	while (io->iovcnt > 0) {
		ssize_t n = pwritev(io->fd, io->iov, io->iovcnt, (off_t)io->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			done_push(j, io, -errno);
			return true;
		}
		if (n == 0) {
			done_push(j, io, -EIO);
			return true;
		}
		iov_advance(io, (size_t)n);
	}
	j->st.inline_writes++;
	done_push(j, io, 0);
	return true;
}

static unsigned chain_len(const struct jbd_io *io)
{
	unsigned n = 1;
	while (io->link && io->next) {
		io = io->next;
		n++;
	}
	return n;
}

void jbd__io_pump(struct jbd *j)
{
	if (j->io != NULL) {
		bool any = false;
		struct jbd_io *io;
		while ((io = j->q_head) != NULL) {
			j->q_head = io->next;
			if (j->q_head == NULL)
				j->q_tail = NULL;
			run_sync(j, io);
			any = true;
		}
		if (any)
			jbd__wake(j);
		return;
	}
	if (!j->ring_ok)
		return;
	unsigned queued = 0;
	bool inlined = false;
	while (j->q_head != NULL) {
		if (run_inline(j, j->q_head)) {
			inlined = true;
			continue;
		}
		unsigned n = chain_len(j->q_head);
		if (j->inflight + n > j->max_inflight && j->inflight > 0)
			break;
		if (io_uring_sq_space_left(&j->ring) < n)
			break;          /* full ring: submit what we have */
		for (unsigned i = 0; i < n; i++) {
			struct jbd_io *io = j->q_head;
			j->q_head = io->next;
			if (j->q_head == NULL)
				j->q_tail = NULL;
			struct io_uring_sqe *sqe = io_uring_get_sqe(&j->ring);
			assert(sqe != NULL); /* space checked above */
			if (io->alt_fd >= 0 && !j->direct) {
				io->fd = io->alt_fd;  /* O_DIRECT was given up */
				io->alt_fd = -1;
			}
			if (io->op == IO_FSYNC)
				io_uring_prep_fsync(sqe, io->fd,
						    IORING_FSYNC_DATASYNC);
			else
				io_uring_prep_writev(sqe, io->fd, io->iov,
						     (unsigned)io->iovcnt, io->off);
			if (io->link && i + 1 < n)
				sqe->flags |= IOSQE_IO_LINK;
			io_uring_sqe_set_data(sqe, io);
			j->inflight++;
			if (io->kind == JBD_IO_LOG)
				j->log_inflight++;
			queued++;
		}
	}
	if (queued > 0) {
		int rc;
		do {
			rc = io_uring_submit(&j->ring);
		} while (rc == -EINTR);
		if (rc < 0)
			jbd__abort(j, rc, "io_uring_submit");
	}
	/* jbd_process drains the done list itself before it returns; an
	 * owner that drains before it sleeps needs no wakeup either. */
	if (inlined && !j->in_process && !j->opts.owner_drains)
		jbd__wake(j);
}

bool jbd__io_busy(const struct jbd *j)
{
	return j->inflight > 0 || j->q_head != NULL || j->done_head != NULL;
}

/* Handle one completion: error / short / complete. */
static void complete(struct jbd *j, struct jbd_io *io, int res)
{
	if (res == -EINTR || res == -EAGAIN ||
	    (res == -ECANCELED && io->op == IO_WRITE)) {
		/* A linked write is cancelled when an earlier link was
		 * short; run it again.  A cancelled linked fsync goes to
		 * its owner, which issues a fresh one after the writes. */
		io->link = false;
		jbd__io_submit(j, io);
		return;
	}
	if (j->fault_direct && io->alt_fd >= 0 && io->op == IO_WRITE) {
		/* Test fault (jbd_inject_direct_fault): report what the
		 * kernel did as refused, or as short by all but one block.
		 * Both are rewritten through alt_fd: the same bytes again. */
		size_t total = iov_total(io->iov, io->iovcnt);
		if (j->fault_direct == -EINVAL)
			res = -EINVAL;
		else if (res > 0 && total > JBD_BLOCK_SIZE)
			res = JBD_BLOCK_SIZE;
		j->fault_direct = 0;
	}
	if (res == -EINVAL && io->alt_fd >= 0) {
		/* O_DIRECT refused what statx promised: write this and every
		 * later O_DIRECT write through the page cache (jbd__io_pump
		 * moves the queued ones to their alt_fd). */
		if (j->direct)
			tw_warn("journal %s: O_DIRECT write refused (%s); the "
				"log and the checkpoints write through the page "
				"cache from now on", j->opts.path, strerror(-res));
		j->direct = false;
		j->st.direct_fallbacks++;
		io->fd = io->alt_fd;
		io->alt_fd = -1;
		io->link = false;
		push_front(j, io);
		return;
	}
	if (res < 0) {
		io->done(j, io, res);
		jbd__io_free(io);
		return;
	}
	if (io->op == IO_WRITE) {
		size_t total = iov_total(io->iov, io->iovcnt);
		if (res == 0 && total > 0) {
			io->done(j, io, -EIO);
			jbd__io_free(io);
			return;
		}
		if ((size_t)res < total) {
			iov_advance(io, (size_t)res);
			if (io->alt_fd >= 0) {
				io->fd = io->alt_fd;  /* the rest may be unaligned */
				io->alt_fd = -1;
			}
			io->link = false;
			push_front(j, io);
			return;
		}
	}
	io->done(j, io, 0);
	jbd__io_free(io);
}

void jbd__io_clear_event(struct jbd *j)
{
	if (j->efd >= 0) {
		uint64_t v;
		ssize_t r = read(j->efd, &v, sizeof(v));
		(void)r;
	}
}

int jbd__io_reap(struct jbd *j, bool wait)
{
	int handled = 0;
	/* Completed without the ring: the synchronous layer's requests and
	 * injected faults (jbd_inject_log_eio). */
	struct jbd_io *io;
	while ((io = j->done_head) != NULL) {
		j->done_head = io->next;
		if (j->done_head == NULL)
			j->done_tail = NULL;
		io->done(j, io, io->rc);
		jbd__io_free(io);
		handled++;
	}
	if (j->io != NULL || !j->ring_ok)
		return handled;
	struct io_uring_cqe *cqe;
	if (wait && j->inflight > 0 && handled == 0) {
		int rc;
		do {
			rc = io_uring_wait_cqe(&j->ring, &cqe);
		} while (rc == -EINTR);
		if (rc < 0) {
			jbd__abort(j, rc, "io_uring_wait_cqe");
			return 0;
		}
	}
	while (io_uring_peek_cqe(&j->ring, &cqe) == 0) {
		io = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&j->ring, cqe);
		j->inflight--;
		if (io->kind == JBD_IO_LOG) {
			assert(j->log_inflight > 0);
			j->log_inflight--;
		}
		complete(j, io, res);
		handled++;
	}
	return handled;
}

int jbd__pwrite_sync(struct jbd *j, enum jbd_io_kind kind, int fd,
		     const void *buf, size_t len, uint64_t off)
{
	if (j->io == NULL)
		return tw_pwrite_all(fd, buf, len, off);
	const uint8_t *p = buf;
	while (len > 0) {
		long n = j->io->pwrite(j->io->arg, kind, fd, p, len, off);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int jbd__fsync_sync(struct jbd *j, enum jbd_io_kind kind, int fd)
{
	if (j->io != NULL)
		return j->io->fsync(j->io->arg, kind, fd);
	return fdatasync(fd) < 0 ? -errno : 0;
}

int jbd__pread_full(struct jbd *j, enum jbd_io_kind kind, int fd, void *buf,
		    size_t len, uint64_t off)
{
	long n;
	if (j->io != NULL && j->io->pread != NULL) {
		size_t got = 0;
		while (got < len) {
			n = j->io->pread(j->io->arg, kind, fd, (uint8_t *)buf + got,
					 len - got, off + got);
			if (n < 0)
				return (int)n;
			if (n == 0)
				break;
			got += (size_t)n;
		}
		n = (long)got;
	} else {
		n = tw_pread_full(fd, buf, len, off);
		if (n < 0)
			return (int)n;
	}
	if ((size_t)n < len)
		memset((uint8_t *)buf + n, 0, len - (size_t)n);
	return (int)n;
}

/* ------------------------------------------------------ background syncfs */

bool jbd__bgsync_usable(const struct jbd *j)
{
	return j->io == NULL && j->ops.home_fs_fd != NULL && j->efd >= 0;
}

static void *bgsync_main(void *arg)
{
	struct jbd_bgsync *b = arg;
	if (b->fds != NULL) {
		/* every descriptor, even after a failure: each is closed */
		b->rc = 0;
		for (size_t i = 0; i < b->nfds; i++) {
			if (fsync(b->fds[i]) < 0 && b->rc == 0)
				b->rc = -errno;
			close(b->fds[i]);
		}
	} else {
		b->rc = b->bg != NULL ? b->bg(b->bg_arg) : 0;
		if (b->rc == 0)
			b->rc = syncfs(b->fd) < 0 ? -errno : 0;
	}
	atomic_store_explicit(&b->done, true, memory_order_release);
	uint64_t one = 1;
	ssize_t w = write(b->efd, &one, sizeof(one));
	(void)w;
	return NULL;
}

static int bgsync_spawn(struct jbd *j, struct jbd_bgsync *b)
{
	b->efd = j->efd;
	b->rc = 0;
	atomic_store_explicit(&b->done, false, memory_order_relaxed);
	int rc = pthread_create(&b->thread, NULL, bgsync_main, b);
	if (rc != 0)
		return -rc;
	b->started = true;
	b->joined = false;
	return 0;
}

int jbd__bgsync_start(struct jbd *j, struct jbd_bgsync *b, bool with_bg)
{
	assert(!b->started && jbd__bgsync_usable(j));
	b->fd = j->ops.home_fs_fd(j->ops.arg);
	b->bg = with_bg ? j->ops.home_bg : NULL;
	b->bg_arg = j->ops.arg;
	b->fds = NULL;
	b->nfds = 0;
	int rc = bgsync_spawn(j, b);
	if (rc == 0)
		j->st.home_syncfs++;
	return rc;
}

int jbd__bgsync_start_fds(struct jbd *j, struct jbd_bgsync *b, int *fds,
			  size_t n)
{
	assert(!b->started && jbd__bgsync_usable(j) && fds != NULL);
	b->fd = -1;
	b->bg = NULL;
	b->fds = fds;
	b->nfds = n;
	int rc = bgsync_spawn(j, b);
	if (rc < 0) {
		b->fds = NULL;   /* the caller's again */
		b->nfds = 0;
		return rc;
	}
	j->st.home_fsyncs++;
	j->st.home_fsync_fds += n;
	return 0;
}

bool jbd__bgsync_poll(struct jbd_bgsync *b, int *rc)
{
	if (!b->started ||
	    !atomic_load_explicit(&b->done, memory_order_acquire))
		return false;
	jbd__bgsync_wait(b);
	b->started = false;
	*rc = b->rc;
	return true;
}

void jbd__bgsync_wait(struct jbd_bgsync *b)
{
	if (b->started && !b->joined) {
		pthread_join(b->thread, NULL);
		b->joined = true;
		free(b->fds);   /* the thread closed the descriptors */
		b->fds = NULL;
	}
}
