/* repl.c - replication of an mgrd pair (docs/ARCHITECTURE.md "Metadata",
 * proto/FORMAT.md "mgrd pair").
 *
 * The active dials the standby (a wire_peer, role ROLE_MGRD_PEER) and
 * drives everything with requests the standby answers with its position
 * (ReplPos).  A position's index is the record's seq in the record log:
 * the standby installs a snapshot at the active's seq
 * (mgr_journal_install_at), so both logs give a record the same seq.
 *   REPL_JOIN       -> the standby's position: the last seq of its log
 *                      and a CRC of its last records (up to TAIL_MAX);
 *   when the active's log holds those records with the same bytes (the
 *   same history), the catch-up comes from its log:
 *   REPL_CATCHUP    -> the standby takes the active's term at its
 *                      position; then REPL_RECORD of every record of the
 *                      active's log after it, read back from the file
 *                      (jnl_rec_iter) while the active serves, at most
 *                      CATCHUP_WINDOW records and CATCHUP_BYTES unacked,
 *                      then the live stream;
 *   else the whole state:
 *   fork()          -> the child writes mgr_state_encode of the state as
 *                      it was at the fork to DIR/repl-out.snap while the
 *                      active goes on serving; records closed from then
 *                      on wait in the backlog;
 *   REPL_SNAPSHOT   -> that file in chunks; the standby installs it as
 *                      its snapshot (log trimmed) and its state;
 *   REPL_RECORD     -> the backlog, then every record as it closes: the
 *                      same bytes, with (term, index); the standby
 *                      applies it, appends it to its record log (closed
 *                      by write(2)) and acks its index.  Without data: a
 *                      heartbeat carrying the active's index.
 * A standby whose log holds records the active never had (an old active's
 * unacknowledged tail) fails the CRC check and gets the whole state: it
 * loses them.
 *
 * Synchronous commit: while the pair runs, every reply of the active
 * (mgr_srv_reply) waits until the standby acked the newest record closed
 * when the reply was made; replies leave in the order they were made.  So
 * "an mgrd reply means its record is closed" holds on both mgrds.  When
 * the standby is not in sync (down, joining, not answering within
 * REPL_TIMEOUT_MS) the replies wait until the election module has had a
 * quorum mark the standby stale (mgr_elect_mark_standby_stale); then they
 * go unreplicated until the standby has acked everything again
 * (mgr_elect_standby_fresh).
 */
#include "elect.h"
#include "journal.h"
#include "server_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPL_TICK_MS        100u
#define REPL_HEARTBEAT_MS   300u
#define REPL_RETRY_MS       1000u
#define REPL_TIMEOUT_MS     3000u   /* a record or heartbeat unanswered */
#define REPL_SNAP_TIMEOUT_MS 30000u /* a snapshot chunk unanswered */
#define REPL_CHUNK          (4u << 20)
/* Records waiting behind a snapshot transfer: past this the join starts
 * over (a standby that slow would never catch up). */
#define REPL_BACKLOG_MAX    (256ull << 20)
#define REPL_SNAP_MAX       (64ull << 30)
#define REPL_SNAP_FILE      "repl-out.snap"
/* The standby's last records the join compares with the active's log. */
#define TAIL_MAX            16u
/* Records of a catch-up from the log sent and not yet acked; the test
 * environment variable TWINFS_TEST_REPL_WINDOW sets a smaller one, so
 * that a drill can kill the standby in the middle of a catch-up. */
#define CATCHUP_WINDOW      512u
/* ... and at most this many bytes of them (records reach 4 MiB). */
#define CATCHUP_BYTES       (16u << 20)

enum link_state { L_DOWN, L_JOINING, L_FORKING, L_SNAPSHOT, L_CATCHUP_ASK,
		  L_CATCHUP, L_STREAMING };

struct backlog_rec {
	struct backlog_rec *next;
	uint64_t index;
	size_t len;
	uint8_t data[];
};

struct held {
	struct held *next;
	struct wire_conn *wc;     /* referenced */
	struct wire_hdr hdr;
	uint64_t index;           /* released once the standby acked it */
	struct mgr_reply r;       /* the reply, as the reply cache keeps it */
};

struct call_ctx {
	struct mgr_repl *r;
	uint64_t gen;
};

struct mgr_repl {
	struct mgr_server *s;
	uv_timer_t timer;
	int self, other;          /* mgrd ids */
	/* active side */
	bool active;
	uint64_t term, index, acked;
	struct wire_peer *peer;
	enum link_state link;
	uint64_t gen;             /* of the link; stale callbacks see another */
	uint64_t next_try_ms, last_send_ms, last_ack_ms;
	pid_t child;
	uint64_t snap_index;
	int snap_fd;
	char snap_path[PATH_MAX + sizeof(REPL_SNAP_FILE) + 1];
	uint64_t snap_off, snap_total;
	struct backlog_rec *bl_head, *bl_tail;
	uint64_t bl_bytes;
	struct jnl_rec_iter it;   /* L_CATCHUP: the next record of our log */
	uint64_t cu_from, sent;   /* catch-up: the standby's position, the
	                           * newest record sent */
	uint64_t cu_window;       /* CATCHUP_WINDOW, or the test's */
	uint32_t cu_len[CATCHUP_WINDOW]; /* sent, unacked: seq % window */
	uint64_t cu_bytes;        /* their sum */
	bool in_sync, stale_ok, marking;
	bool releasing;           /* held_release sends: no holding */
	struct held *h_head, *h_tail;
	/* standby side */
	int active_id;            /* who joined us last (0 = nobody yet) */
	uint64_t s_term, s_index; /* position: applied and closed */
	bool s_installed;         /* s_term's snapshot is in */
	bool s_in_sync;
	uint64_t last_contact_ms;
	bool s_lost;              /* told the election the active is silent */
	uint8_t *rx;              /* a snapshot being received */
	uint64_t rx_len, rx_total, rx_term, rx_index;
};

static void repl_send_next_chunk(struct mgr_repl *r);
static void repl_mark_stale(struct mgr_repl *r);
static void catchup_pump(struct mgr_repl *r);

/* ------------------------------------------------------- held replies */

static void held_release(struct mgr_repl *r)
{
	struct held *h;

	if (r->releasing)
		return;
	r->releasing = true;
	while ((h = r->h_head) && (r->stale_ok || h->index <= r->acked)) {
		r->h_head = h->next;
		if (!r->h_head)
			r->h_tail = NULL;
		if (wire_conn_is_open(h->wc))
			mgr_srv_resend(h->wc, &h->hdr, &h->r);
		wire_conn_unref(h->wc);
		free(h);
	}
	r->releasing = false;
}

static void held_drop(struct mgr_repl *r)
{
	struct held *h;

	while ((h = r->h_head)) {
		r->h_head = h->next;
		wire_conn_unref(h->wc);
		free(h);
	}
	r->h_tail = NULL;
}

bool mgr_repl_hold(struct mgr_server *s, struct wire_conn *c,
		   const struct wire_hdr *hdr, int status,
		   const ProtobufCMessage *body)
{
	struct mgr_repl *r = s->repl;
	struct held *h;
	size_t len = 0;

	if (!r || !r->active || r->releasing)
		return false;
	if (!r->h_head && (r->stale_ok || r->acked >= r->index))
		return false;
	if (status == 0 && body)
		len = protobuf_c_message_get_packed_size(body);
	h = calloc(1, sizeof(*h) + len);
	if (!h)
		mgr_srv_fatal(s, "reply", -ENOMEM);
	h->wc = c;
	wire_conn_ref(c);
	h->hdr = *hdr;
	h->index = r->index;
	h->r.status = status;
	h->r.type = hdr->type;
	h->r.len = (uint32_t)len;
	if (len)
		protobuf_c_message_pack(body, h->r.data);
	if (r->h_tail)
		r->h_tail->next = h;
	else
		r->h_head = h;
	r->h_tail = h;
	return true;
}

/* ------------------------------------------------------- the link */

static void backlog_free(struct mgr_repl *r)
{
	struct backlog_rec *b;

	while ((b = r->bl_head)) {
		r->bl_head = b->next;
		free(b);
	}
	r->bl_tail = NULL;
	r->bl_bytes = 0;
}

static void snap_cleanup(struct mgr_repl *r)
{
	mgr_snap_kill(r->child);
	r->child = 0;
	if (r->snap_fd >= 0)
		close(r->snap_fd);
	r->snap_fd = -1;
	unlink(r->snap_path);
}

static void set_in_sync(struct mgr_repl *r, bool in_sync)
{
	if (in_sync == r->in_sync)
		return;
	r->in_sync = in_sync;
	mgr_elect_peer_state(in_sync || r->link != L_DOWN, in_sync);
	if (in_sync) {
		tw_info("mgrd: standby mgrd %d is in sync at index %llu",
			r->other, (unsigned long long)r->acked);
		r->stale_ok = false;
		mgr_elect_standby_fresh();
	} else {
		repl_mark_stale(r);
	}
}

static void link_fail(struct mgr_repl *r, const char *what, int status)
{
	/* A standby that is not there is logged once, not at every try. */
	if (r->link >= L_FORKING)
		tw_warn("mgrd: replication to mgrd %d: %s: %s; the standby "
			"is stale until it joins again", r->other, what,
			strerror(status < 0 ? -status : EIO));
	r->gen++;
	r->link = L_DOWN;
	wire_peer_reset(r->peer);
	backlog_free(r);
	snap_cleanup(r);
	r->next_try_ms = tw_now_ms() + REPL_RETRY_MS;
	mgr_elect_peer_state(false, false);
	set_in_sync(r, false);
	repl_mark_stale(r);
}

static void on_stale_done(int status, void *arg)
{
	struct mgr_repl *r = arg;

	r->marking = false;
	if (!r->active || r->in_sync)
		return;
	if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "mgrd: marking the standby stale "
			  "failed: %s; replies wait", strerror(-status));
		return;   /* the tick tries again */
	}
	r->stale_ok = true;
	held_release(r);
}

static void repl_mark_stale(struct mgr_repl *r)
{
	if (!r->active || r->in_sync || r->stale_ok || r->marking)
		return;
	r->marking = true;
	if (mgr_elect_mark_standby_stale(on_stale_done, r) < 0)
		r->marking = false;
}

static struct call_ctx *ctx_new(struct mgr_repl *r)
{
	struct call_ctx *x = malloc(sizeof(*x));

	if (!x)
		mgr_srv_fatal(r->s, "replication", -ENOMEM);
	x->r = r;
	x->gen = r->gen;
	return x;
}

/* The ReplPos of a reply, NULL (and the link failed) when it is bad. */
static const Twinfs__ReplPos *reply_pos(struct mgr_repl *r, int status,
					struct wire_msg *m, const char *what)
{
	const Twinfs__ReplPos *p = m ? (const Twinfs__ReplPos *)m->body : NULL;

	if (status < 0 || !p) {
		link_fail(r, what, status);
		return NULL;
	}
	r->last_ack_ms = tw_now_ms();
	return p;
}

static void on_record_reply(int status, struct wire_msg *m, void *arg)
{
	struct call_ctx *x = arg;
	struct mgr_repl *r = x->r;
	const Twinfs__ReplPos *p;

	if (x->gen == r->gen &&
	    (r->link == L_STREAMING || r->link == L_CATCHUP) &&
	    (p = reply_pos(r, status, m, "record")) != NULL) {
		if (r->link == L_CATCHUP && p->term == r->term)
			for (uint64_t i = r->acked + 1;
			     i <= TW_MIN(p->index, r->sent); i++)
				r->cu_bytes -= r->cu_len[i % CATCHUP_WINDOW];
		if (p->term == r->term && p->index > r->acked)
			r->acked = p->index;
		if (r->link == L_CATCHUP)
			catchup_pump(r);
		else if (r->acked >= r->index)
			set_in_sync(r, true);
		held_release(r);
	}
	free(x);
	if (m)
		wire_msg_free(m);
}

static void send_record(struct mgr_repl *r, uint64_t index, const void *buf,
			size_t len)
{
	Twinfs__ReplRecord rr = TWINFS__REPL_RECORD__INIT;
	struct iovec iov = { (void *)buf, len };
	struct call_ctx *x = ctx_new(r);
	int rc;

	rr.term = r->term;
	rr.index = index;
	rr.last = r->index;
	rc = wire_call(r->peer, TWINFS__MSG_TYPE__MSG_REPL_RECORD, &rr.base,
		       len ? &iov : NULL, len ? 1 : 0, REPL_TIMEOUT_MS,
		       on_record_reply, x);
	if (rc < 0) {
		free(x);
		link_fail(r, "send", rc);
		return;
	}
	r->last_send_ms = tw_now_ms();
}

void mgr_repl_record(void *arg, uint64_t seq, const void *buf, size_t len)
{
	struct mgr_repl *r = arg;
	struct backlog_rec *b;

	if (!r->active)
		return;
	assert(seq == r->index + 1);
	r->index = seq;
	switch (r->link) {
	case L_STREAMING:
		send_record(r, r->index, buf, len);
		break;
	case L_FORKING:
	case L_SNAPSHOT:
		if (r->bl_bytes + len > REPL_BACKLOG_MAX) {
			link_fail(r, "backlog behind the snapshot too large",
				  -ENOBUFS);
			break;
		}
		b = malloc(sizeof(*b) + len);
		if (!b)
			mgr_srv_fatal(r->s, "replication", -ENOMEM);
		b->next = NULL;
		b->index = r->index;
		b->len = len;
		memcpy(b->data, buf, len);
		if (r->bl_tail)
			r->bl_tail->next = b;
		else
			r->bl_head = b;
		r->bl_tail = b;
		r->bl_bytes += len;
		break;
	default:
		/* L_CATCHUP: our log holds it, the catch-up reads it there;
		 * otherwise the next join sends it. */
		break;
	}
}

static void on_snap_reply(int status, struct wire_msg *m, void *arg)
{
	struct call_ctx *x = arg;
	struct mgr_repl *r = x->r;
	struct backlog_rec *b;
	const Twinfs__ReplPos *p;

	if (x->gen != r->gen || r->link != L_SNAPSHOT ||
	    !(p = reply_pos(r, status, m, "snapshot")))
		goto out;
	if (r->snap_off < r->snap_total) {
		repl_send_next_chunk(r);
		goto out;
	}
	if (p->term != r->term || p->index != r->snap_index) {
		link_fail(r, "snapshot not installed", -EPROTO);
		goto out;
	}
	tw_info("mgrd: standby mgrd %d installed the snapshot at index "
		"%llu (%llu bytes); sending %llu bytes of records closed "
		"since", r->other, (unsigned long long)r->snap_index,
		(unsigned long long)r->snap_total,
		(unsigned long long)r->bl_bytes);
	snap_cleanup(r);
	r->acked = r->snap_index;
	r->link = L_STREAMING;
	while ((b = r->bl_head) && r->link == L_STREAMING) {
		r->bl_head = b->next;
		send_record(r, b->index, b->data, b->len);
		free(b);
	}
	if (r->link == L_STREAMING) {
		r->bl_tail = NULL;
		r->bl_bytes = 0;
		if (r->acked >= r->index)
			set_in_sync(r, true);
		else   /* an ack of the last backlog record will */
			mgr_elect_peer_state(true, false);
	}
out:
	free(x);
	if (m)
		wire_msg_free(m);
}

static void repl_send_next_chunk(struct mgr_repl *r)
{
	Twinfs__ReplSnapshot rs = TWINFS__REPL_SNAPSHOT__INIT;
	size_t n = (size_t)TW_MIN((uint64_t)REPL_CHUNK,
				  r->snap_total - r->snap_off);
	uint8_t *buf = malloc(n ? n : 1);
	struct iovec iov;
	struct call_ctx *x;
	ssize_t got;
	int rc;

	if (!buf)
		mgr_srv_fatal(r->s, "replication", -ENOMEM);
	got = n ? pread(r->snap_fd, buf, n, (off_t)r->snap_off) : 0;
	if (got != (ssize_t)n) {
		free(buf);
		link_fail(r, "reading the snapshot file", got < 0 ? -errno
							      : -EIO);
		return;
	}
	rs.term = r->term;
	rs.index = r->snap_index;
	rs.offset = r->snap_off;
	rs.total = r->snap_total;
	rs.last = r->index;
	iov.iov_base = buf;
	iov.iov_len = n;
	x = ctx_new(r);
	rc = wire_call(r->peer, TWINFS__MSG_TYPE__MSG_REPL_SNAPSHOT, &rs.base,
		       n ? &iov : NULL, n ? 1 : 0, REPL_SNAP_TIMEOUT_MS,
		       on_snap_reply, x);
	free(buf);
	if (rc < 0) {
		free(x);
		link_fail(r, "send", rc);
		return;
	}
	r->snap_off += n;
	r->last_send_ms = tw_now_ms();
}

static void start_fork(struct mgr_repl *r)
{
	uint64_t t0 = tw_now_ms();
	pid_t pid;

	r->snap_index = r->index;
	pid = mgr_snap_fork(&r->s->st, r->snap_path);
	if (pid < 0) {
		link_fail(r, "fork", pid);
		return;
	}
	r->child = pid;
	r->link = L_FORKING;
	tw_info("mgrd: standby mgrd %d joins: snapshot at index %llu being "
		"written by process %d (fork took %llu ms)", r->other,
		(unsigned long long)r->snap_index, (int)pid,
		(unsigned long long)(tw_now_ms() - t0));
	/* The revoked keys are not in the snapshot: a record after it
	 * carries them to the joiner. */
	mgr_ident_revoked_journal(r->s);
}

static void poll_fork(struct mgr_repl *r)
{
	struct stat st;
	int rc = mgr_snap_wait(r->child);

	/* A child that hangs is killed by snapfork.c past snapshot_timeout
	 * (not here: writing the state takes minutes at 10 M inodes). */
	if (rc > 0)
		return;
	r->child = 0;
	if (rc < 0) {
		/* The standby stays stale; the join is tried again. */
		link_fail(r, rc == -ETIMEDOUT ? "the snapshot process ran "
			  "longer than snapshot_timeout" : "writing the "
			  "snapshot", rc);
		return;
	}
	r->snap_fd = open(r->snap_path, O_RDONLY | O_CLOEXEC);
	if (r->snap_fd < 0 || fstat(r->snap_fd, &st) < 0) {
		link_fail(r, "opening the snapshot", -errno);
		return;
	}
	r->snap_total = (uint64_t)st.st_size;
	r->snap_off = 0;
	r->link = L_SNAPSHOT;
	repl_send_next_chunk(r);
}

/* CRC32C chained over the bytes of the n records of our log that end at
 * seq `last` (both sides of a join compute it, repl.c header). */
static int tail_crc(struct mgr_repl *r, uint64_t last, uint32_t n,
		    uint32_t *crc)
{
	struct jnl_rec_iter it;
	uint32_t c = 0;
	int rc;

	if (n == 0 || last < n)
		return -ENOENT;
	rc = jnl_rec_iter_start(r->s->jnl.log, last - n + 1, &it);
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		void *buf;
		size_t len;
		uint64_t seq;

		rc = jnl_rec_iter_next(&it, &buf, &len, &seq);
		if (rc == 0)
			rc = -ENOENT;   /* not closed here yet */
		if (rc < 0)
			break;
		c = tw_crc32c(c, buf, len);
		free(buf);
		rc = 0;
	}
	*crc = c;
	return rc;
}

/* The records of our log after `from`, CATCHUP_WINDOW at a time: sent as
 * REPL_RECORD; once every closed record is sent the live stream takes
 * over (mgr_repl_record sends the next ones as they close). */
static void catchup_pump(struct mgr_repl *r)
{
	while (r->link == L_CATCHUP && r->sent - r->acked < r->cu_window &&
	       (r->cu_bytes < CATCHUP_BYTES || r->sent == r->acked)) {
		void *buf;
		size_t len;
		uint64_t seq;
		int rc = jnl_rec_iter_next(&r->it, &buf, &len, &seq);

		if (rc < 0) {
			link_fail(r, "reading our log for the catch-up", rc);
			return;
		}
		if (rc == 0) {
			assert(r->sent == r->index);
			tw_info("mgrd: standby mgrd %d has every record of our "
				"log up to index %llu (%llu sent from the log)",
				r->other, (unsigned long long)r->sent,
				(unsigned long long)(r->sent - r->cu_from));
			r->link = L_STREAMING;
			if (r->acked >= r->index)
				set_in_sync(r, true);
			else   /* an ack of the last record will */
				mgr_elect_peer_state(true, false);
			return;
		}
		assert(seq == r->sent + 1);
		r->cu_len[seq % CATCHUP_WINDOW] = (uint32_t)len;
		r->cu_bytes += len;
		send_record(r, seq, buf, len);
		free(buf);
		r->sent = seq;
	}
}

static void on_catchup_reply(int status, struct wire_msg *m, void *arg)
{
	struct call_ctx *x = arg;
	struct mgr_repl *r = x->r;
	const Twinfs__ReplPos *p;
	int rc;

	if (x->gen != r->gen || r->link != L_CATCHUP_ASK ||
	    !(p = reply_pos(r, status, m, "catch-up")))
		goto out;
	if (p->term != r->term || p->index != r->cu_from) {
		link_fail(r, "catch-up refused", -EPROTO);
		goto out;
	}
	rc = jnl_rec_iter_start(r->s->jnl.log, r->cu_from + 1, &r->it);
	if (rc < 0) {   /* a snapshot trimmed our log meanwhile */
		link_fail(r, "catch-up from our log", rc);
		goto out;
	}
	tw_info("mgrd: standby mgrd %d joins from our log: records %llu to "
		"%llu", r->other, (unsigned long long)r->cu_from + 1,
		(unsigned long long)r->index);
	r->acked = r->sent = r->cu_from;
	r->cu_bytes = 0;
	r->link = L_CATCHUP;
	catchup_pump(r);
out:
	free(x);
	if (m)
		wire_msg_free(m);
}

/* Whether our log continues the standby's (join reply p): it holds the
 * standby's last TAIL records with the same bytes.  NULL: yes; else why
 * not, for the log. */
static const char *log_continues(struct mgr_repl *r, const Twinfs__ReplPos *p)
{
	uint32_t crc;

	if (p->tail_n == 0 || p->tail_n > TAIL_MAX)
		return "its log holds no record since its snapshot";
	if (p->index > r->index)
		return "its log is ahead of ours";
	if (p->index - p->tail_n + 1 < jnl_rec_first_seq(r->s->jnl.log))
		return "our log no longer holds its position";
	if (tail_crc(r, p->index, p->tail_n, &crc) < 0 || crc != p->tail_crc)
		return "its last records differ from ours";
	return NULL;
}

static void start_catchup(struct mgr_repl *r, uint64_t from)
{
	Twinfs__ReplCatchup q = TWINFS__REPL_CATCHUP__INIT;
	struct call_ctx *x = ctx_new(r);
	int rc;

	q.term = r->term;
	q.index = from;
	q.last = r->index;
	r->cu_from = from;
	r->link = L_CATCHUP_ASK;
	rc = wire_call(r->peer, TWINFS__MSG_TYPE__MSG_REPL_CATCHUP, &q.base,
		       NULL, 0, REPL_TIMEOUT_MS, on_catchup_reply, x);
	if (rc < 0) {
		free(x);
		link_fail(r, "send", rc);
	}
}

static void on_join_reply(int status, struct wire_msg *m, void *arg)
{
	struct call_ctx *x = arg;
	struct mgr_repl *r = x->r;
	const Twinfs__ReplPos *p;

	if (x->gen == r->gen && r->link == L_JOINING &&
	    (p = reply_pos(r, status, m, "join")) != NULL) {
		const char *why = log_continues(r, p);

		if (!why) {
			start_catchup(r, p->index);
		} else {
			tw_info("mgrd: standby mgrd %d answers at term %llu "
				"index %llu (ours %llu): %s; sending the whole "
				"state", r->other, (unsigned long long)p->term,
				(unsigned long long)p->index,
				(unsigned long long)r->index, why);
			start_fork(r);
		}
	}
	free(x);
	if (m)
		wire_msg_free(m);
}

static void start_join(struct mgr_repl *r)
{
	Twinfs__ReplJoin j = TWINFS__REPL_JOIN__INIT;
	struct call_ctx *x = ctx_new(r);
	int rc;

	j.from_id = (uint32_t)r->self;
	j.term = r->term;
	j.index = r->index;
	r->link = L_JOINING;
	rc = wire_call(r->peer, TWINFS__MSG_TYPE__MSG_REPL_JOIN, &j.base, NULL,
		       0, REPL_TIMEOUT_MS, on_join_reply, x);
	if (rc < 0) {
		free(x);
		r->link = L_DOWN;
		r->next_try_ms = tw_now_ms() + REPL_RETRY_MS;
	}
}

static void on_tick(uv_timer_t *t)
{
	struct mgr_repl *r = t->data;
	uint64_t now = tw_now_ms();

	if (!r->active) {
		/* A snapshot child that ended while no record came: else
		 * it holds snapfork.c's one place, and a backup-meta waits
		 * for it, until the next record (none while clients rest). */
		mgr_journal_poll(&r->s->jnl);
		/* The active sends at least every REPL_HEARTBEAT_MS: three
		 * missed and the election hears that it is silent. */
		if (r->last_contact_ms && !r->s_lost &&
		    now - r->last_contact_ms > 3 * REPL_HEARTBEAT_MS) {
			r->s_lost = true;
			mgr_elect_peer_state(false, r->s_in_sync);
		}
		return;
	}
	switch (r->link) {
	case L_DOWN:
		if (now >= r->next_try_ms)
			start_join(r);
		break;
	case L_FORKING:
		poll_fork(r);
		break;
	case L_STREAMING:
		if (now - r->last_send_ms >= REPL_HEARTBEAT_MS)
			send_record(r, r->index, NULL, 0);
		break;
	case L_CATCHUP:
		if (now - r->last_send_ms >= REPL_HEARTBEAT_MS)
			send_record(r, r->sent, NULL, 0);
		break;
	default:
		break;
	}
	repl_mark_stale(r);   /* one that failed is tried again */
}

/* -------------------------------------------------------- standby side */

static void pos_reply(struct mgr_repl *r, struct wire_conn *c,
		      const struct wire_msg *m, int status)
{
	Twinfs__ReplPos p = TWINFS__REPL_POS__INIT;

	p.term = r->s_term;
	p.index = r->s_index;
	if (status == 0 && m->hdr.type == TWINFS__MSG_TYPE__MSG_REPL_JOIN) {
		/* The records our log holds since its snapshot, at most
		 * TAIL_MAX, for the active to compare with its log. */
		uint64_t first = jnl_rec_first_seq(r->s->jnl.log);
		uint32_t n = r->s_index >= first ?
			(uint32_t)TW_MIN((uint64_t)TAIL_MAX,
					 r->s_index - first + 1) : 0;

		if (n && tail_crc(r, r->s_index, n, &p.tail_crc) == 0)
			p.tail_n = n;
	}
	wire_reply(c, &m->hdr, status, status < 0 ? NULL : &p.base, NULL, 0);
}

static void rx_free(struct mgr_repl *r)
{
	free(r->rx);
	r->rx = NULL;
	r->rx_len = r->rx_total = 0;
}

/* The whole snapshot is in: it becomes this mgrd's state and its log's
 * snapshot (the log trimmed: records of another history go with it). */
static int install(struct mgr_repl *r)
{
	struct mgr_server *s = r->s;
	struct mgr_state fresh;
	struct mgr_time now;
	int rc;

	mgr_srv_now(&now);
	rc = mgr_state_init(&fresh, s->conf, &now);
	if (rc == 0)
		rc = mgr_state_decode(&fresh, r->rx, r->rx_total);
	if (rc < 0) {
		mgr_state_free(&fresh);
		tw_err("mgrd: the active's snapshot does not decode: %s",
		       strerror(-rc));
		return rc;
	}
	/* At the active's seq: both logs then give a record the same seq,
	 * which a later join from the active's log relies on. */
	rc = mgr_journal_install_at(&s->jnl, r->rx, r->rx_total, r->rx_index);
	if (rc < 0) {
		mgr_state_free(&fresh);
		mgr_srv_fatal(s, "snapshot", rc);
	}
	mgr_state_free(&s->st);
	s->st = fresh;
	mgr_srv_state_loaded(s);
	r->s_term = r->rx_term;
	r->s_index = r->rx_index;
	r->s_installed = true;
	tw_info("mgrd: joined by snapshot: installed the active's snapshot at "
		"term %llu index %llu: %zu inodes, %zu sessions",
		(unsigned long long)r->s_term,
		(unsigned long long)r->s_index, s->st.ns.inodes.count,
		s->st.sessions.by_id.count);
	return 0;
}

/* In sync: every record the active had closed when it sent the last
 * message is applied here. */
static void note_sync(struct mgr_repl *r, uint64_t last)
{
	bool in_sync = r->s_index >= last;

	if (in_sync && !r->s_in_sync)
		tw_info("mgrd: in sync with mgrd %d at index %llu",
			r->active_id, (unsigned long long)r->s_index);
	r->s_in_sync = in_sync;
}

static int h_snapshot(struct mgr_repl *r, const struct wire_msg *m)
{
	const Twinfs__ReplSnapshot *q = (const Twinfs__ReplSnapshot *)m->body;
	int rc;

	if (q->offset == 0) {
		rx_free(r);
		if (q->total == 0 || q->total > REPL_SNAP_MAX)
			return -EINVAL;
		r->rx = malloc(q->total);
		if (!r->rx)
			return -ENOMEM;
		r->rx_total = q->total;
		r->rx_term = q->term;
		r->rx_index = q->index;
		r->s_installed = false;
		r->s_in_sync = false;
	}
	if (!r->rx || q->offset != r->rx_len || q->total != r->rx_total ||
	    q->term != r->rx_term || q->index != r->rx_index ||
	    m->data_len > r->rx_total - r->rx_len)
		return -EPROTO;
	if (m->data_len)
		memcpy(r->rx + r->rx_len, m->data, m->data_len);
	r->rx_len += m->data_len;
	if (r->rx_len < r->rx_total)
		return 0;
	rc = install(r);
	if (rc == 0)
		note_sync(r, q->last);
	return rc;
}

static int h_record(struct mgr_repl *r, const struct wire_msg *m)
{
	const Twinfs__ReplRecord *q = (const Twinfs__ReplRecord *)m->body;
	struct mgr_server *s = r->s;
	struct mgr_op op;
	int rc;

	if (!r->s_installed || q->term != r->s_term)
		return -ESTALE;
	if (!m->data_len) {   /* heartbeat */
		note_sync(r, q->last);
		return q->index < r->s_index ? -ESTALE : 0;
	}
	if (q->index != r->s_index + 1)
		return -ESTALE;
	if (jnl_rec_last_seq(s->jnl.log) != r->s_index) {
		/* Our log's seqs are not the active's: take the whole
		 * state (its install aligns them). */
		r->s_installed = false;
		return -EUCLEAN;
	}
	rc = mgr_op_decode(m->data, m->data_len, &op);
	if (rc < 0)
		return rc;
	if (op.status >= 0) {
		rc = mgr_op_apply(&s->st, &op);
		if (rc < 0) {
			/* Not the active's state: start over from a
			 * snapshot (the record is not in our log). */
			tw_err("mgrd: record %llu of mgrd %d (op %u) does not "
			       "apply: %s; asking for the whole state",
			       (unsigned long long)q->index, r->active_id,
			       op.type, strerror(-rc));
			r->s_installed = false;
			return -EUCLEAN;
		}
	}
	if (op.type == MGR_OP_REVOKED) {
		/* the list is a file of ours, written before the record
		 * enters the log (mgrd/FORMAT.md section 4) */
		rc = mgr_ident_revoked_apply(s, op.value, op.value_len);
		if (rc < 0)
			mgr_srv_fatal(s, "revoked", rc);
	}
	rc = mgr_journal_append(&s->jnl, m->data, m->data_len, &op);
	if (rc < 0)
		mgr_srv_fatal(s, "append", rc);
	r->s_index = q->index;
	note_sync(r, q->last);
	return 0;
}

/* The active's log continues ours from our position: records after it
 * follow. */
static int h_catchup(struct mgr_repl *r, const struct wire_msg *m)
{
	const Twinfs__ReplCatchup *q = (const Twinfs__ReplCatchup *)m->body;

	if (q->index != r->s_index ||
	    jnl_rec_last_seq(r->s->jnl.log) != r->s_index)
		return -ESTALE;
	rx_free(r);
	r->s_term = q->term;
	r->s_installed = true;
	tw_info("mgrd: joined from the log: mgrd %d sends its records %llu "
		"to %llu (term %llu)", r->active_id,
		(unsigned long long)q->index + 1, (unsigned long long)q->last,
		(unsigned long long)q->term);
	note_sync(r, q->last);
	return 0;
}

void mgr_repl_request(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	struct mgr_repl *r = s->repl;
	int rc;

	if (!r || mgr_elect_is_active()) {
		/* Two actives must never feed each other. */
		wire_reply(c, &m->hdr, -EBUSY, NULL, NULL, 0);
		return;
	}
	r->last_contact_ms = tw_now_ms();
	r->s_lost = false;
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_REPL_JOIN: {
		const Twinfs__ReplJoin *j = (const Twinfs__ReplJoin *)m->body;

		if (j->from_id < 1 || j->from_id > 2 ||
		    (int)j->from_id == r->self) {
			rc = -EINVAL;
			break;
		}
		r->active_id = (int)j->from_id;
		r->s_in_sync = false;
		/* Records again only after a snapshot or a catch-up. */
		r->s_installed = false;
		rx_free(r);
		tw_info("mgrd: mgrd %d (term %llu, index %llu) joins us as "
			"its standby; we are at term %llu index %llu",
			r->active_id, (unsigned long long)j->term,
			(unsigned long long)j->index,
			(unsigned long long)r->s_term,
			(unsigned long long)r->s_index);
		rc = 0;
		break;
	}
	case TWINFS__MSG_TYPE__MSG_REPL_CATCHUP:
		rc = h_catchup(r, m);
		break;
	case TWINFS__MSG_TYPE__MSG_REPL_SNAPSHOT:
		rc = h_snapshot(r, m);
		if (rc < 0)
			rx_free(r);
		break;
	case TWINFS__MSG_TYPE__MSG_REPL_RECORD:
		rc = h_record(r, m);
		break;
	default:
		rc = -EOPNOTSUPP;
	}
	mgr_elect_peer_state(true, r->s_in_sync);
	pos_reply(r, c, m, rc);
}

/* ---------------------------------------------------------- lifecycle */

void mgr_repl_activate(struct mgr_server *s, uint64_t term)
{
	struct mgr_repl *r = s->repl;

	r->active = true;
	r->term = term;
	/* Indexes are our log's seqs; nothing closed in this term is
	 * unacked yet. */
	r->index = jnl_rec_last_seq(s->jnl.log);
	r->acked = r->index;
	r->in_sync = false;
	r->stale_ok = false;
	r->link = L_DOWN;
	r->next_try_ms = 0;
	s->jnl.on_record = mgr_repl_record;
	s->jnl.on_record_arg = r;
	repl_mark_stale(r);
	wire_peer_connect(r->peer);
}

int mgr_repl_start(struct mgr_server *s)
{
	const struct tw_conf *conf = s->conf;
	struct mgr_repl *r = calloc(1, sizeof(*r));
	Twinfs__Hello hello;
	int rc;

	if (!r)
		return -ENOMEM;
	r->s = s;
	r->self = conf->mgrd_self;
	r->other = 3 - conf->mgrd_self;
	r->snap_fd = -1;
	r->cu_window = CATCHUP_WINDOW;
	{
		const char *w = getenv("TWINFS_TEST_REPL_WINDOW");

		if (w && atoi(w) > 0 && (unsigned)atoi(w) < CATCHUP_WINDOW)
			r->cu_window = (uint64_t)atoi(w);
	}
	snprintf(r->snap_path, sizeof(r->snap_path), "%s/" REPL_SNAP_FILE,
		 conf->mgr_dir);
	wire_hello_init(&hello, conf->cluster_name,
			TWINFS__ROLE__ROLE_MGRD_PEER, s->incarnation);
	hello.node_id = (uint32_t)r->self;
	{
		struct wire_peer_opts o = {
			.host = conf->mgrd[r->other - 1].host,
			.port = conf->mgrd[r->other - 1].port,
			.hello = &hello,
			.arg = r,
			.reconnect_ms = REPL_RETRY_MS,
			.secret = conf->secret,
			.channel = conf->channel,
		};

		rc = wire_peer_new(s->loop, &o, &r->peer);
	}
	if (rc < 0) {
		free(r);
		return rc;
	}
	uv_timer_init(s->loop, &r->timer);
	r->timer.data = r;
	uv_timer_start(&r->timer, on_tick, REPL_TICK_MS, REPL_TICK_MS);
	s->repl = r;
	/* Our position: the log as replayed (a join compares its tail). */
	r->s_index = jnl_rec_last_seq(s->jnl.log);
	snap_cleanup(r);   /* a file a crash left */
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

void mgr_repl_stop(struct mgr_server *s)
{
	struct mgr_repl *r = s->repl;

	if (!r)
		return;
	s->repl = NULL;
	s->jnl.on_record = NULL;
	r->active = false;
	/* The calls wire_peer_free fails are of no link any more. */
	r->gen++;
	r->link = L_DOWN;
	held_drop(r);
	backlog_free(r);
	snap_cleanup(r);
	rx_free(r);
	wire_peer_free(r->peer);
	uv_timer_stop(&r->timer);
	uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

/* ------------------------------------------------------------- status */

static const char *link_role(const struct mgr_repl *r)
{
	if (r->in_sync)
		return "standby";
	return r->link == L_DOWN ? "down" : "syncing";
}

void mgr_repl_status(const struct mgr_server *s, Twinfs__MgrdStatus *st)
{
	const struct mgr_repl *r = s->repl;
	uint64_t now = tw_now_ms();

	st->id = (uint32_t)s->conf->mgrd_self;
	if (!r) {
		st->role = "active";
		st->peer_role = "";
		return;
	}
	if (r->active) {
		st->role = "active";
		st->term = r->term;
		st->applied_index = r->index;
		st->lag_records = r->index - r->acked;
		st->last_contact_ms = r->last_ack_ms ? now - r->last_ack_ms
						     : 0;
		st->peer_role = (char *)link_role(r);
		return;
	}
	st->role = r->s_installed && r->s_in_sync ? "standby" : "syncing";
	st->term = r->s_term;
	st->applied_index = r->s_index;
	st->last_contact_ms = r->last_contact_ms ? now - r->last_contact_ms
						 : 0;
	st->peer_role = r->last_contact_ms &&
			now - r->last_contact_ms < REPL_TIMEOUT_MS ? "active"
								   : "down";
}

bool mgr_repl_standby_current(const struct mgr_server *s)
{
	const struct mgr_repl *r = s->repl;

	return r && !r->active && r->s_installed && r->s_in_sync &&
	       r->last_contact_ms &&
	       tw_now_ms() - r->last_contact_ms < REPL_TIMEOUT_MS;
}

int mgr_repl_active_id(const struct mgr_server *s)
{
	const struct mgr_repl *r = s->repl;

	if (!r)
		return 0;
	return r->active ? r->self : r->active_id;
}
