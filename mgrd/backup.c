/* backup.c - MSG_MGRD_BACKUP, behind `twinfsctl backup-meta FILE`
 * (docs/OPERATIONS.md "Backup and restore"; proto/FORMAT.md "mgrd pair").
 *
 * A consistent copy of the namespace without stopping mgrd: the first
 * request forks (mgr_snap_fork, as a standby's join does), the child
 * writes the state as it was at the fork to DIR/backup.snap while mgrd
 * keeps serving (the fork is its only pause, said in the reply), and the
 * requests that follow fetch the file in chunks on the same connection.
 * One backup at a time (one whose admin went away gives way to the
 * next); the file goes once its last chunk is sent, when the next backup
 * starts, or at stop.  While another child of mgrd writes a snapshot (the
 * periodic one, a join's: snapfork.c), the fork waits for it.  A child
 * that runs longer than snapshot_timeout is killed (snapfork.c) and the
 * request fails with -ETIME.
 */
#include "server_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKUP_CHUNK   (4u << 20)
#define BACKUP_POLL_MS 20u
#define BACKUP_FILE    "backup.snap"

struct mgr_backup {
	struct mgr_server *s;
	uv_timer_t timer;
	struct wire_conn *wc;     /* referenced: the admin's connection */
	struct wire_hdr hdr;      /* the first request, answered when written */
	pid_t child;
	bool waiting;             /* for another snapshot child to end */
	uint64_t id, total;
	uint32_t pause_ms;
	int fd;
	char path[PATH_MAX + sizeof(BACKUP_FILE) + 1];
};

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void backup_end(struct mgr_backup *b)
{
	mgr_snap_kill(b->child);
	if (b->fd >= 0)
		close(b->fd);
	unlink(b->path);
	if (b->wc)
		wire_conn_unref(b->wc);
	b->s->backup = NULL;
	uv_timer_stop(&b->timer);
	uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

void mgr_backup_stop(struct mgr_server *s)
{
	if (s->backup)
		backup_end(s->backup);
}

/* Answer with the chunk at offset; the last one ends the backup. */
static void send_chunk(struct mgr_backup *b, const struct wire_hdr *hdr,
		       uint64_t offset)
{
	Twinfs__MgrdBackupReply r = TWINFS__MGRD_BACKUP_REPLY__INIT;
	size_t n;
	uint8_t *buf;
	struct iovec iov;
	ssize_t got;

	if (offset > b->total) {
		wire_reply(b->wc, hdr, -EINVAL, NULL, NULL, 0);
		return;
	}
	n = (size_t)TW_MIN((uint64_t)BACKUP_CHUNK, b->total - offset);
	buf = malloc(n ? n : 1);
	if (!buf) {
		wire_reply(b->wc, hdr, -ENOMEM, NULL, NULL, 0);
		return;
	}
	got = n ? pread(b->fd, buf, n, (off_t)offset) : 0;
	if (got != (ssize_t)n) {
		free(buf);
		wire_reply(b->wc, hdr, -EIO, NULL, NULL, 0);
		backup_end(b);
		return;
	}
	r.id = b->id;
	r.total = b->total;
	r.offset = offset;
	r.pause_ms = b->pause_ms;
	iov.iov_base = buf;
	iov.iov_len = n;
	wire_reply(b->wc, hdr, 0, &r.base, n ? &iov : NULL, n ? 1 : 0);
	free(buf);
	if (offset + n == b->total)
		backup_end(b);
}

/* The fork; -EBUSY while another snapshot child runs. */
static pid_t backup_fork(struct mgr_backup *b)
{
	uint64_t t0 = tw_now_ms();
	pid_t pid = mgr_snap_fork(&b->s->st, b->path);

	b->pause_ms = (uint32_t)(tw_now_ms() - t0);
	if (pid > 0)
		b->child = pid;
	return pid;
}

static void on_poll(uv_timer_t *t)
{
	struct mgr_backup *b = t->data;
	struct stat st;
	int rc;

	if (b->waiting) {
		pid_t pid = backup_fork(b);

		if (pid == -EBUSY && wire_conn_is_open(b->wc))
			return;
		b->waiting = false;
		if (pid > 0)
			return;
		rc = pid < 0 ? (int)pid : -ENOTCONN;
		wire_reply(b->wc, &b->hdr, rc, NULL, NULL, 0);
		backup_end(b);
		return;
	}
	rc = mgr_snap_wait(b->child);
	if (rc > 0)
		return;
	b->child = 0;
	if (rc == 0) {
		b->fd = open(b->path, O_RDONLY | O_CLOEXEC);
		if (b->fd < 0 || fstat(b->fd, &st) < 0)
			rc = -errno;
		else
			b->total = (uint64_t)st.st_size;
	}
	uv_timer_stop(&b->timer);
	if (rc < 0 || !wire_conn_is_open(b->wc)) {
		tw_warn("mgrd: backup %llu failed: %s",
			(unsigned long long)b->id, rc == -ETIMEDOUT ?
			"the snapshot process ran longer than "
			"snapshot_timeout" : strerror(rc < 0 ? -rc : ENOTCONN));
		/* -ETIME, not -ETIMEDOUT: twinfsctl tells it from its own
		 * request's timeout (proto/FORMAT.md MSG_MGRD_BACKUP). */
		wire_reply(b->wc, &b->hdr, rc == -ETIMEDOUT ? -ETIME :
			   rc < 0 ? rc : -ENOTCONN, NULL, NULL, 0);
		backup_end(b);
		return;
	}
	tw_info("mgrd: backup %llu: %llu bytes of state written by the "
		"fork (mgrd paused %u ms for it)", (unsigned long long)b->id,
		(unsigned long long)b->total, b->pause_ms);
	send_chunk(b, &b->hdr, 0);
}

static void start(struct mgr_server *s, struct wire_conn *c,
		  const struct wire_msg *m)
{
	static uint64_t next_id;
	struct mgr_backup *b = calloc(1, sizeof(*b));
	pid_t pid;

	if (!b) {
		wire_reply(c, &m->hdr, -ENOMEM, NULL, NULL, 0);
		return;
	}
	b->s = s;
	b->fd = -1;
	b->id = ++next_id;
	snprintf(b->path, sizeof(b->path), "%s/" BACKUP_FILE,
		 s->conf->mgr_dir);
	pid = backup_fork(b);
	if (pid < 0 && pid != -EBUSY) {
		wire_reply(c, &m->hdr, (int)pid, NULL, NULL, 0);
		free(b);
		return;
	}
	b->waiting = pid == -EBUSY;
	b->wc = c;
	wire_conn_ref(c);
	b->hdr = m->hdr;
	s->backup = b;
	uv_timer_init(s->loop, &b->timer);
	b->timer.data = b;
	uv_timer_start(&b->timer, on_poll, BACKUP_POLL_MS, BACKUP_POLL_MS);
}

void mgr_backup_request(struct mgr_server *s, struct wire_conn *c,
			struct wire_msg *m)
{
	const Twinfs__MgrdBackup *q = (const Twinfs__MgrdBackup *)m->body;
	const struct mgr_conn *mc = wire_conn_get_data(c);
	struct mgr_backup *b = s->backup;

	if (!mc || mc->role != TWINFS__ROLE__ROLE_ADMIN) {
		wire_reply(c, &m->hdr, -EPERM, NULL, NULL, 0);
		return;
	}
	if (q->id == 0) {
		/* One at a time; one whose admin went away is dropped. */
		if (b && wire_conn_is_open(b->wc)) {
			wire_reply(c, &m->hdr, -EBUSY, NULL, NULL, 0);
			return;
		}
		if (b)
			backup_end(b);
		start(s, c, m);
		return;
	}
	if (!b || b->id != q->id || b->wc != c || b->child || b->waiting) {
		wire_reply(c, &m->hdr, -ESTALE, NULL, NULL, 0);
		return;
	}
	send_chunk(b, &m->hdr, q->offset);
}
