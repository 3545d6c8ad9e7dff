/* wire_conn.c - the server side of TwinFS connections: listen, accept, read
 * frames, hand requests to the daemon, send its replies.
 *
 * Lifetime: a wire_conn is reference counted.  The server holds one
 * reference while the TCP handle is open; a daemon that answers
 * asynchronously takes its own (wire_conn_ref) and drops it after replying.
 * The struct is freed when the handle is closed and the last reference
 * dropped, so a late wire_reply() on a closed connection is safe (it returns
 * -ENOTCONN).
 *
 * A protocol violation (invalid frame per proto/FORMAT.md, or a first frame
 * that is not HELLO) closes that connection only, with one log line naming
 * the peer and the reason.
 *
 * Limits (wire_server_set_limits, proto/FORMAT.md section 2), so that no
 * peer can make a daemon run out of descriptors or memory:
 *   - max_connections: past it a new connection is accepted and closed at
 *     once.  Should accept fail with EMFILE anyway (libuv's own reserve
 *     descriptor spent), the server closes its reserve descriptor so the
 *     next accept succeeds, closes that connection and reopens the
 *     reserve: the backlog drains instead of spinning.
 *   - hello_timeout: a connection whose HELLO has not been answered 0 by
 *     then is closed.  Such connections wait on a list in accept order,
 *     which is deadline order, under one timer.  Until then a frame may
 *     carry at most WIRE_PRE_HELLO_MSG bytes of body and no data.
 *   - max_queued_reply_bytes: once that many reply bytes wait in libuv's
 *     write queue the server stops reading the connection (frames already
 *     read wait in its reader) and reads again when the queue has drained
 *     below half: a peer that never reads cannot grow the daemon.
 *
 * After AUTH, frames are sealed both ways in the mode AUTH chose
 * (wire_seal.c): from the frame after the step-2 reply on.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "common.h"
#include "wire_int.h"

/* AUTH and HELLO bodies are a few dozen bytes (names of at most 255);
 * nothing bigger is read before a HELLO was answered. */
#define WIRE_PRE_HELLO_MSG 4096u

struct wire_server {
	uv_loop_t *loop;
	uv_tcp_t listener;
	struct wire_server_ops ops;
	void *arg;
	struct wire_conn *conns;      /* open connections, linked by next */
	uint32_t n_open;              /* connections not yet closing */
	/* Not yet past HELLO, in accept (= deadline) order. */
	struct wire_conn *hello_head, *hello_tail;
	uv_timer_t hello_timer;       /* the head's deadline */
	struct wire_server_limits lim;
	int reserve_fd;               /* spent on EMFILE (file header), or -1 */
	bool reserve_spent;           /* refuse the next connection */
	uv_tcp_t spare;               /* refuses a connection without malloc */
	bool spare_busy;
	unsigned n_refusing;          /* refused handles not yet closed */
	uint64_t n_refused;
	char *secret;                 /* NULL: AUTH with the secret refused */
	wire_key_fn key_fn;           /* NULL: AUTH naming an identity refused */
	void *key_arg;
	enum tw_channel channel_min;  /* weakest mode after AUTH, not DEFAULT */
	struct wire_stats *stats;     /* the daemon's metrics, or NULL */
	bool closing;
	bool listener_closed;
	bool timer_closed;
	void (*close_cb)(void *arg);
	void *close_arg;
};

struct wire_conn {
	uv_tcp_t tcp;                 /* first: the handle's data is the conn */
	struct wire_server *srv;      /* NULL once detached from a closed server */
	struct wire_conn *next, *prev;
	int refs;
	bool open;                    /* not yet closing */
	bool handle_closed;
	bool hello_seen;              /* the first frame was HELLO */
	bool hello_done;              /* a HELLO was answered 0 */
	bool read_paused;             /* too many reply bytes queued */
	bool held;                    /* the daemon's wire_conn_hold */
	bool feeding;                 /* inside wire_reader_feed */
	struct wire_conn *hnext, *hprev; /* server's hello list */
	bool on_hello_list;
	uint64_t accepted_ms;
	bool authenticated;           /* proved the cluster secret */
	void *principal;              /* proved an identity (key_fn's) */
	int auth_step;                /* 1: challenge sent (nonces, key valid) */
	uint8_t cnonce[WIRE_NONCE_LEN], snonce[WIRE_NONCE_LEN];
	uint8_t key[WIRE_KEY_MAX];    /* the key step 2 must prove */
	size_t key_len;
	void *pending_principal;      /* key_fn's, until step 2 proves it */
	enum tw_channel chan_cmin;    /* AUTH step 1: the peer's minimum */
	enum tw_channel chan_smin;    /* AUTH step 1: the server's then */
	enum tw_channel chan;         /* AUTH step 1: the mode chosen */
	struct wire_seal *tx_seal;    /* seals what we send; NULL: clear */
	struct wire_reader rd;
	char peer[80];
	void *data;
	uint64_t next_push_id;
	uint64_t last_rx_ms;          /* tw_now_ms of the last frame read */
};

static void server_maybe_done(struct wire_server *s);
static void conn_read_again(struct wire_conn *c);
static void conn_hello_done(struct wire_conn *c);
static int conn_write(struct wire_conn *c, uint8_t *buf, size_t len,
		      const struct wire_zdata *z);
static void conn_maybe_resume(struct wire_conn *c);

static void conn_free_if_done(struct wire_conn *c)
{
	if (c->refs > 0 || !c->handle_closed)
		return;
	wire_reader_free(&c->rd);
	free(c->principal);
	free(c->pending_principal);
	wire_seal_free(c->tx_seal);
	explicit_bzero(c->key, sizeof(c->key));
	free(c);
}

void wire_conn_ref(struct wire_conn *c)
{
	c->refs++;
}

void wire_conn_unref(struct wire_conn *c)
{
	assert(c->refs > 0);
	c->refs--;
	conn_free_if_done(c);
}

bool wire_conn_is_open(const struct wire_conn *c)
{
	return c->open;
}

const char *wire_conn_peer(const struct wire_conn *c)
{
	return c->peer;
}

void wire_conn_set_data(struct wire_conn *c, void *data)
{
	c->data = data;
}

void *wire_conn_get_data(const struct wire_conn *c)
{
	return c->data;
}

uint64_t wire_conn_last_rx_ms(const struct wire_conn *c)
{
	return c->last_rx_ms;
}

static void on_conn_closed(uv_handle_t *h)
{
	struct wire_conn *c = h->data;
	struct wire_server *s = c->srv;

	c->handle_closed = true;
	if (s) {
		if (c->prev)
			c->prev->next = c->next;
		else
			s->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		c->srv = NULL;
	}
	/* Drop the reference the server held for the open handle. */
	wire_conn_unref(c);
	if (s)
		server_maybe_done(s);
}

static void hello_list_del(struct wire_server *s, struct wire_conn *c)
{
	if (!c->on_hello_list)
		return;
	if (c->hprev)
		c->hprev->hnext = c->hnext;
	else
		s->hello_head = c->hnext;
	if (c->hnext)
		c->hnext->hprev = c->hprev;
	else
		s->hello_tail = c->hprev;
	c->hnext = c->hprev = NULL;
	c->on_hello_list = false;
}

void wire_conn_close(struct wire_conn *c)
{
	if (!c->open)
		return;
	c->open = false;
	if (c->srv) {
		hello_list_del(c->srv, c);
		c->srv->n_open--;
		if (c->srv->stats)
			c->srv->stats->conns_open = c->srv->n_open;
	}
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (c->srv && c->srv->ops.on_close)
		c->srv->ops.on_close(c, c->srv->arg);
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

bool wire_conn_authenticated(const struct wire_conn *c)
{
	return c->authenticated;
}

void *wire_conn_principal(const struct wire_conn *c)
{
	return c->principal;
}

int wire_server_set_channel(struct wire_server *s, enum tw_channel min)
{
	if (min == TW_CHANNEL_DEFAULT)
		min = TW_CHANNEL_DEFAULT_MODE;
	if (!wire_channel_valid(min))
		return -EINVAL;
	s->channel_min = min;
	return 0;
}

enum tw_channel wire_conn_channel(const struct wire_conn *c)
{
	return c->tx_seal ? c->chan : TW_CHANNEL_NONE;
}

void wire_server_set_key_fn(struct wire_server *s, wire_key_fn fn, void *arg)
{
	s->key_fn = fn;
	s->key_arg = arg;
}

int wire_server_set_secret(struct wire_server *s, const char *secret)
{
	char *copy = NULL;

	if (secret && *secret && !(copy = strdup(secret)))
		return -ENOMEM;
	free(s->secret);
	s->secret = copy;
	return 0;
}

/* AUTH step 1: which key the proofs use (Auth.identity: empty = the
 * cluster secret, else key_fn's).  Returns 0, or a status with *why. */
static int auth_key(struct wire_conn *c, const Twinfs__Auth *a,
		    const char **why)
{
	struct wire_server *s = c->srv;
	size_t n;
	int rc;

	if (a->identity.len == 0) {
		if (!s->secret) {
			*why = "no cluster secret is configured here";
			return -EOPNOTSUPP;
		}
		n = strlen(s->secret);
		if (n > WIRE_KEY_MAX) {
			*why = "the cluster secret is too long";
			return -EIO;
		}
		memcpy(c->key, s->secret, n);
		c->key_len = n;
		return 0;
	}
	if (!s->key_fn || a->identity.len > WIRE_IDENTITY_MAX) {
		*why = "identities are not accepted here";
		return -EACCES;
	}
	*why = "refused";
	rc = s->key_fn(c, a->identity.data, a->identity.len, c->key,
		       &c->key_len, &c->pending_principal, why, s->key_arg);
	if (rc == 0 && (c->key_len == 0 || c->key_len > WIRE_KEY_MAX)) {
		*why = "no usable key";
		rc = -EIO;
	}
	return rc < 0 ? rc : 0;
}

/* AUTH step 1: the mode later frames run (the stronger of both minimums)
 * and the bytes both proofs cover, so that a rewritten minimum or choice
 * fails the handshake.  Returns 0, or a status with *why. */
static int auth_channel(struct wire_conn *c, const Twinfs__Auth *a,
			uint8_t bind[WIRE_BIND_LEN], const char **why)
{
	enum tw_channel smin = c->srv->channel_min;

	if (!wire_channel_valid(a->channel)) {
		*why = "unknown channel mode";
		return -EPROTO;
	}
	c->chan_cmin = (enum tw_channel)a->channel;
	c->chan_smin = smin;
	c->chan = wire_channel_choose(c->chan_cmin, smin);
	wire_channel_bind(bind, c->chan_cmin, smin, c->chan);
	return 0;
}

/* MSG_AUTH, answered by the wire layer (proto/FORMAT.md "Authentication").
 * Returns 0 to go on reading, -ECANCELED when the connection was closed. */
static int on_auth(struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Auth *a = (const Twinfs__Auth *)m->body;
	Twinfs__AuthReply r = TWINFS__AUTH_REPLY__INIT;
	uint8_t proof[WIRE_PROOF_LEN], bind[WIRE_BIND_LEN] = { 0 };
	const char *why = NULL;
	int status = 0;

	if (c->auth_step == 1)   /* what step 2's proof must cover */
		wire_channel_bind(bind, c->chan_cmin, c->chan_smin, c->chan);
	if (c->hello_seen || c->authenticated || c->principal) {
		why = "AUTH after HELLO";
		status = -EPROTO;
	} else if (a->step == 1 && c->auth_step == 0 &&
		   a->nonce.len == WIRE_NONCE_LEN) {
		memcpy(c->cnonce, a->nonce.data, WIRE_NONCE_LEN);
		status = auth_channel(c, a, bind, &why);
		if (status == 0)
			status = auth_key(c, a, &why);
		if (status == 0 &&
		    (tw_random(c->snonce, WIRE_NONCE_LEN) < 0 ||
		     wire_auth_proof(c->key, c->key_len, WIRE_LABEL_SERVER,
				     c->cnonce, c->snonce, bind, proof) < 0)) {
			why = "cannot compute a proof";
			status = -EIO;
		}
		if (status == 0) {
			c->auth_step = 1;
			r.nonce.data = c->snonce;
			r.nonce.len = WIRE_NONCE_LEN;
			r.proof.data = proof;
			r.proof.len = WIRE_PROOF_LEN;
			r.channel = c->chan;
			r.channel_min = c->chan_smin;
		}
	} else if (a->step == 2 && c->auth_step == 1 &&
		   wire_auth_check(c->key, c->key_len, WIRE_LABEL_CLIENT,
				   c->snonce, c->cnonce, bind, a->proof.data,
				   a->proof.len)) {
		c->auth_step = 2;
		if (c->pending_principal) {
			c->principal = c->pending_principal;
			c->pending_principal = NULL;
		} else {
			c->authenticated = true;
		}
	} else {
		why = c->pending_principal ? "wrong key or malformed AUTH"
			: "wrong cluster secret or malformed AUTH";
		status = -EACCES;
	}
	if (status < 0)
		r.refusal = (char *)why;
	wire_reply(c, &m->hdr, status, &r.base, NULL, 0);
	wire_msg_free(m);
	/* The step-2 reply went in the clear; what follows is sealed. */
	if (status == 0 && c->auth_step == 2 && c->chan != TW_CHANNEL_NONE &&
	    wire_seal_start(c->chan, c->key, c->key_len, c->cnonce,
			    c->snonce, true, &c->tx_seal, &c->rd.seal) < 0) {
		why = "cannot derive the channel keys";
		status = -EIO;
	}
	if (status == 0)
		return 0;
	tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: "
		  "authentication failed: %s", c->peer, why);
	wire_conn_close(c);
	return -ECANCELED;
}

static int on_frame(struct wire_msg *m, void *arg)
{
	struct wire_conn *c = arg;

	c->last_rx_ms = tw_now_ms();
	if (m->hdr.flags & WIRE_F_REPLY) {
		/* Replies to our pushes carry nothing we need but that the
		 * peer is alive (last_rx_ms). */
		wire_msg_free(m);
		return 0;
	}
	m->hdr.rx_ns = 0;
	if (c->srv && c->srv->stats) {
		struct wire_stats *st = c->srv->stats;
		unsigned t = m->hdr.type % WIRE_STATS_TYPES;

		m->hdr.rx_ns = tw_now_ns();
		st->requests[t]++;
		st->req_data_bytes[t] += m->data_len;
	}
	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_AUTH)
		return on_auth(c, m);
	if (!c->hello_seen && m->hdr.type != TWINFS__MSG_TYPE__MSG_HELLO) {
		tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: "
			  "first frame is %s, not HELLO", c->peer,
			  wire_type_name(m->hdr.type));
		wire_msg_free(m);
		wire_conn_close(c);
		return -ECANCELED;
	}
	c->hello_seen = true;
	c->srv->ops.on_request(c, m, c->srv->arg);
	if (!c->open)
		return -ECANCELED;
	/* The replies it queued passed the limit: the frames already read
	 * wait in the reader until the peer drains (conn_resume). */
	return c->read_paused || c->held ? WIRE_R_PAUSE : 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct wire_conn *c = h->data;

	(void)hint;
	wire_reader_alloc(&c->rd, buf);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct wire_conn *c = st->data;
	const char *why;
	int rc;

	(void)buf;
	if (n == 0)
		return;
	if (n < 0) {
		if (n != UV_EOF)
			tw_debug("wire: connection from %s: %s", c->peer,
				 uv_strerror((int)n));
		wire_conn_close(c);
		return;
	}
	if (c->srv && c->srv->stats)
		c->srv->stats->rx_bytes += (uint64_t)n;
	wire_conn_ref(c);
	c->feeding = true;
	rc = wire_reader_feed(&c->rd, (size_t)n, on_frame, c, &why);
	c->feeding = false;
	if (rc < 0 && rc != -ECANCELED && rc != WIRE_R_PAUSE) {
		tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: %s",
			  c->peer, why);
		wire_conn_close(c);
	}
	conn_maybe_resume(c);
	wire_conn_unref(c);
}

/* ------------------------------------------------------ queued replies */

static void conn_write_done(void *arg, int status, size_t len)
{
	(void)status;
	(void)len;
	conn_maybe_resume(arg);
}

/* Every frame a server sends on c: takes buf (and z as
 * wire_stream_write_z).  Past the queued-bytes limit, stop reading. */
static int conn_write(struct wire_conn *c, uint8_t *buf, size_t len,
		      const struct wire_zdata *z)
{
	uv_stream_t *st = (uv_stream_t *)&c->tcp;
	uint64_t max = c->srv ? c->srv->lim.max_queued_reply_bytes : 0;
	int rc;

	if (c->srv && c->srv->stats)
		c->srv->stats->tx_bytes += len + (z ? z->len : 0) +
					   (c->tx_seal ? WIRE_TAG_LEN : 0);
	rc = wire_stream_write_sealed(st, c->tx_seal, buf, len, z,
				      conn_write_done, c);

	if (rc < 0 || !max || c->read_paused || !c->open)
		return rc;
	if (uv_stream_get_write_queue_size(st) > max) {
		c->read_paused = true;
		uv_read_stop(st);
		tw_log_rl(TW_LOG_WARN, "wire: %s does not read its replies "
			  "(%zu bytes queued, max_queued_reply_bytes %llu): "
			  "not reading its requests until they drain",
			  c->peer, uv_stream_get_write_queue_size(st),
			  (unsigned long long)max);
	}
	return rc;
}

/* Read again once the queue has drained below half the limit: first the
 * frames that waited in the reader, then the socket. */
static void conn_maybe_resume(struct wire_conn *c)
{
	uv_stream_t *st = (uv_stream_t *)&c->tcp;

	if (!c->read_paused || !c->open || c->feeding || !c->srv ||
	    uv_stream_get_write_queue_size(st) >
	    c->srv->lim.max_queued_reply_bytes / 2)
		return;
	c->read_paused = false;
	if (!c->held)
		conn_read_again(c);
}

/* Deliver the frames that waited in the reader, then read the socket again
 * unless a frame paused the connection anew. */
static void conn_read_again(struct wire_conn *c)
{
	uv_stream_t *st = (uv_stream_t *)&c->tcp;
	const char *why;
	int rc;

	wire_conn_ref(c);
	c->feeding = true;
	rc = wire_reader_feed(&c->rd, 0, on_frame, c, &why);
	c->feeding = false;
	if (rc < 0 && rc != -ECANCELED && rc != WIRE_R_PAUSE) {
		tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: %s",
			  c->peer, why);
		wire_conn_close(c);
	}
	if (c->open && !c->read_paused && !c->held)
		uv_read_start(st, on_alloc, on_read);
	wire_conn_unref(c);
}

void wire_conn_hold(struct wire_conn *c)
{
	if (c->held || !c->open)
		return;
	c->held = true;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

bool wire_conn_held(const struct wire_conn *c)
{
	return c->held;
}

void wire_conn_release(struct wire_conn *c)
{
	if (!c->held)
		return;
	c->held = false;
	if (!c->open || c->read_paused)
		return;
	if (c->feeding) {
		/* Inside its own request: the feed goes on by itself. */
		uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
		return;
	}
	conn_read_again(c);
}

/* ------------------------------------------------------------- HELLO */

static void on_hello_timer(uv_timer_t *t);

/* One timer for every connection waiting for HELLO: the list is in accept
 * order, so its head's deadline is the next. */
static void hello_timer_arm(struct wire_server *s)
{
	uint64_t now, due;

	if (!s->hello_head || !s->lim.hello_timeout_ms || s->closing) {
		uv_timer_stop(&s->hello_timer);
		return;
	}
	now = tw_now_ms();
	due = s->hello_head->accepted_ms + s->lim.hello_timeout_ms;
	uv_timer_start(&s->hello_timer, on_hello_timer,
		       due > now ? due - now : 0, 0);
}

static void on_hello_timer(uv_timer_t *t)
{
	struct wire_server *s = t->data;
	uint64_t now = tw_now_ms();

	while (s->hello_head && s->hello_head->accepted_ms +
	       s->lim.hello_timeout_ms <= now) {
		struct wire_conn *c = s->hello_head;

		tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: no "
			  "HELLO within hello_timeout (%u ms)", c->peer,
			  s->lim.hello_timeout_ms);
		wire_conn_close(c);     /* takes it off the list */
	}
	hello_timer_arm(s);
}

static void conn_hello_done(struct wire_conn *c)
{
	if (c->hello_done)
		return;
	c->hello_done = true;
	c->rd.max_msg = WIRE_MAX_MSG;
	c->rd.max_data = WIRE_MAX_DATA;
	if (c->srv)
		hello_list_del(c->srv, c);
}

/* ------------------------------------------------------------- accept */

static void on_refused_closed(uv_handle_t *h)
{
	struct wire_server *s = h->data;

	s->n_refusing--;
	if (h == (uv_handle_t *)&s->spare)
		s->spare_busy = false;
	else
		free(h);
	server_maybe_done(s);
}

/* Take the connection libuv accepted and close it at once, so that the
 * backlog drains and the peer hears a close, not silence.  (Not taking
 * it would stop libuv polling the listener until it is taken.) */
static void refuse(struct wire_server *s, const char *why)
{
	uv_tcp_t *t = malloc(sizeof(*t));
	char peer[80] = "?";

	if (!t && !s->spare_busy) {
		/* Out of memory: the handle kept for this. */
		t = &s->spare;
		s->spare_busy = true;
	}
	if (!t) {
		tw_log_rl(TW_LOG_ERR, "wire: cannot refuse a connection (%s): "
			  "out of memory; accepting resumes with the next",
			  why);
		return;
	}
	uv_tcp_init(s->loop, t);
	t->data = s;
	s->n_refusing++;
	if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)t) == 0)
		wire_peer_addr(t, peer, sizeof(peer));
	uv_close((uv_handle_t *)t, on_refused_closed);
	s->n_refused++;
	tw_log_rl(TW_LOG_WARN, "wire: refused connection from %s: %s", peer,
		  why);
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct wire_server *s = ls->data;
	struct wire_conn *c;
	char why[96];

	if (status == UV_EMFILE || status == UV_ENFILE) {
		/* libuv's own reserve is spent: free ours so that its next
		 * accept (it tries again at once) succeeds, and refuse that
		 * connection below. */
		tw_log_rl(TW_LOG_ERR, "wire: accept failed: %s; closing the "
			  "pending connections", uv_strerror(status));
		if (s->reserve_fd >= 0) {
			close(s->reserve_fd);
			s->reserve_fd = -1;
			s->reserve_spent = true;
		}
		return;
	}
	if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "wire: accept failed: %s",
			  uv_strerror(status));
		return;
	}
	if (s->reserve_spent) {
		refuse(s, "out of file descriptors");
		s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		s->reserve_spent = false;
		return;
	}
	if (s->lim.max_connections && s->n_open >= s->lim.max_connections) {
		snprintf(why, sizeof(why), "%u connections open "
			 "(max_connections)", s->n_open);
		if (s->stats)
			s->stats->conns_refused++;
		refuse(s, why);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || wire_reader_init(&c->rd) < 0) {
		free(c);
		refuse(s, "out of memory");
		return;
	}
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	c->srv = s;
	c->refs = 1;
	c->open = true;
	c->next_push_id = 1ull << 63;
	c->last_rx_ms = c->accepted_ms = tw_now_ms();
	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
		c->open = false;
		c->srv = NULL;
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	wire_peer_addr(&c->tcp, c->peer, sizeof(c->peer));
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_open++;
	if (s->stats) {
		s->stats->conns_open = s->n_open;
		s->stats->conns_accepted++;
	}
	/* Until HELLO: small frames only, and a deadline. */
	c->rd.max_msg = WIRE_PRE_HELLO_MSG;
	c->rd.max_data = 0;
	c->hprev = s->hello_tail;
	if (s->hello_tail)
		s->hello_tail->hnext = c;
	else
		s->hello_head = c;
	s->hello_tail = c;
	c->on_hello_list = true;
	if (!uv_is_active((uv_handle_t *)&s->hello_timer))
		hello_timer_arm(s);
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int wire_server_set_limits(struct wire_server *s,
			   const struct wire_server_limits *lim)
{
	s->lim = *lim;
	uv_timer_stop(&s->hello_timer);
	hello_timer_arm(s);
	return 0;
}

/* The listener is not the first member: free the server, not the handle. */
static void free_failed_server(uv_handle_t *h)
{
	free(h->data);
}

int wire_listen(uv_loop_t *loop, const char *host, int port,
		const struct wire_server_ops *ops, void *arg,
		struct wire_server **out)
{
	struct sockaddr_storage ss;
	struct wire_server *s;
	int rc;

	/* A host name is resolved once, at start, where blocking is fine
	 * (peers resolve off the loop, wire_peer.c). */
	rc = tw_listen_addr(host, port, &ss);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->ops = *ops;
	s->arg = arg;
	s->channel_min = TW_CHANNEL_DEFAULT_MODE;
	uv_tcp_init(loop, &s->listener);
	s->listener.data = s;
	rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
	if (rc < 0) {
		/* The listener handle must still be closed before freeing. */
		s->closing = true;
		uv_close((uv_handle_t *)&s->listener, free_failed_server);
		return rc;
	}
	uv_timer_init(loop, &s->hello_timer);
	s->hello_timer.data = s;
	/* Spent when accept fails with EMFILE (file header). */
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	*out = s;
	return 0;
}

int wire_server_port(const struct wire_server *s)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) < 0)
		return -EINVAL;
	return tw_sockaddr_port(&ss);
}

static void server_maybe_done(struct wire_server *s)
{
	if (!s->closing || !s->listener_closed || !s->timer_closed ||
	    s->conns || s->n_refusing)
		return;
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	if (s->close_cb)
		s->close_cb(s->close_arg);
	free(s->secret);
	free(s);
}

static void on_hello_timer_closed(uv_handle_t *h)
{
	struct wire_server *s = h->data;

	s->timer_closed = true;
	server_maybe_done(s);
}

static void on_listener_closed(uv_handle_t *h)
{
	struct wire_server *s = h->data;

	s->listener_closed = true;
	server_maybe_done(s);
}

void wire_server_close(struct wire_server *s, void (*cb)(void *arg), void *arg)
{
	struct wire_conn *c, *next;

	s->closing = true;
	s->close_cb = cb;
	s->close_arg = arg;
	for (c = s->conns; c; c = next) {
		next = c->next;
		wire_conn_close(c);
	}
	uv_close((uv_handle_t *)&s->hello_timer, on_hello_timer_closed);
	uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}

void wire_server_set_stats(struct wire_server *s, struct wire_stats *st)
{
	s->stats = st;
	if (st)
		st->conns_open = s->n_open;
}

/* A reply to req is queued (data: its bulk bytes): time the request. */
static void stats_reply(struct wire_conn *c, const struct wire_hdr *req,
			size_t data)
{
	struct wire_stats *st = c->srv ? c->srv->stats : NULL;
	unsigned t = req->type % WIRE_STATS_TYPES;
	uint64_t now;

	if (!st || !req->rx_ns)
		return;
	now = tw_now_ns();
	tw_hist_observe_ns(&st->latency[t], now > req->rx_ns ? now - req->rx_ns : 0);
	st->reply_data_bytes[t] += data;
}

int wire_reply(struct wire_conn *c, const struct wire_hdr *req, int32_t status,
	       const ProtobufCMessage *body, const struct iovec *iov, int niov)
{
	uint8_t *buf;
	size_t len;
	int err;

	assert(status <= 0);
	assert(status == 0 || niov == 0);
	/* FORMAT.md §1: the only error bodies. */
	assert(status == 0 || !body ||
	       req->type == TWINFS__MSG_TYPE__MSG_WRITE ||
	       req->type == TWINFS__MSG_TYPE__MSG_TRUNCATE ||
	       req->type == TWINFS__MSG_TYPE__MSG_FALLOCATE ||
	       req->type == TWINFS__MSG_TYPE__MSG_AUTH ||
	       req->type == TWINFS__MSG_TYPE__MSG_HELLO ||
	       req->type == TWINFS__MSG_TYPE__MSG_LEASE);
	if (!c->open)
		return -ENOTCONN;
	if (req->type == TWINFS__MSG_TYPE__MSG_HELLO && status == 0)
		conn_hello_done(c);
	buf = wire_frame_build(req->type, WIRE_F_REPLY, status, req->req_id,
			       body, iov, niov, &len, &err);
	if (!buf) {
		tw_log_rl(TW_LOG_ERR, "wire: cannot build %s reply to %s: %s",
			  wire_type_name(req->type), c->peer, strerror(-err));
		/* The requester must still get an answer. */
		buf = wire_frame_build(req->type, WIRE_F_REPLY, err,
				       req->req_id, NULL, NULL, 0, &len, &err);
		if (!buf)
			return err;
	}
	if (c->srv && c->srv->stats) {
		size_t data = 0;

		for (int i = 0; i < niov; i++)
			data += iov[i].iov_len;
		stats_reply(c, req, data);
	}
	return conn_write(c, buf, len, NULL);
}

int wire_reply_z(struct wire_conn *c, const struct wire_hdr *req,
		 const ProtobufCMessage *body, const struct wire_zdata *z)
{
	uint8_t *buf;
	size_t len;
	int err;

	if (!c->open)
		return -ENOTCONN;
	buf = wire_frame_head(req->type, WIRE_F_REPLY, 0, req->req_id, body,
			      z->len, &len, &err);
	if (!buf) {
		tw_log_rl(TW_LOG_ERR, "wire: cannot build %s reply to %s: %s",
			  wire_type_name(req->type), c->peer, strerror(-err));
		/* Answered with the error; z stays the caller's. */
		(void)wire_reply(c, req, err, NULL, NULL, 0);
		return err;
	}
	stats_reply(c, req, z->len);
	return conn_write(c, buf, len, z);
}

int wire_conn_push(struct wire_conn *c, uint16_t type,
		   const ProtobufCMessage *body)
{
	uint8_t *buf;
	size_t len;
	int err;

	if (!c->open)
		return -ENOTCONN;
	buf = wire_frame_build(type, 0, 0, c->next_push_id++, body, NULL, 0,
			       &len, &err);
	if (!buf)
		return err;
	return conn_write(c, buf, len, NULL);
}
