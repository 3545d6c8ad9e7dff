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
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "wire_int.h"

struct wire_server {
	uv_loop_t *loop;
	uv_tcp_t listener;
	struct wire_server_ops ops;
	void *arg;
	struct wire_conn *conns;      /* open connections, linked by next */
	char *secret;                 /* NULL: AUTH refused */
	bool closing;
	bool listener_closed;
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
	bool authenticated;           /* proved the cluster secret */
	int auth_step;                /* 1: challenge sent (nonces valid) */
	uint8_t cnonce[WIRE_NONCE_LEN], snonce[WIRE_NONCE_LEN];
	struct wire_reader rd;
	char peer[80];
	void *data;
	uint64_t next_push_id;
	uint64_t last_rx_ms;          /* tw_now_ms of the last frame read */
};

static void server_maybe_done(struct wire_server *s);

static void conn_free_if_done(struct wire_conn *c)
{
	if (c->refs > 0 || !c->handle_closed)
		return;
	wire_reader_free(&c->rd);
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

void wire_conn_close(struct wire_conn *c)
{
	if (!c->open)
		return;
	c->open = false;
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (c->srv && c->srv->ops.on_close)
		c->srv->ops.on_close(c, c->srv->arg);
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

bool wire_conn_authenticated(const struct wire_conn *c)
{
	return c->authenticated;
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

/* MSG_AUTH, answered by the wire layer (proto/FORMAT.md "Authentication").
 * Returns 0 to go on reading, -ECANCELED when the connection was closed. */
static int on_auth(struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Auth *a = (const Twinfs__Auth *)m->body;
	Twinfs__AuthReply r = TWINFS__AUTH_REPLY__INIT;
	uint8_t proof[WIRE_PROOF_LEN];
	const char *secret = c->srv->secret;
	const char *why = NULL;
	int status = 0;

	if (!secret) {
		why = "no cluster secret is configured here";
		status = -EOPNOTSUPP;
	} else if (c->hello_seen || c->authenticated) {
		why = "AUTH after HELLO";
		status = -EPROTO;
	} else if (a->step == 1 && a->nonce.len == WIRE_NONCE_LEN) {
		memcpy(c->cnonce, a->nonce.data, WIRE_NONCE_LEN);
		if (tw_random(c->snonce, WIRE_NONCE_LEN) < 0 ||
		    wire_auth_proof(secret, WIRE_LABEL_SERVER, c->cnonce,
				    c->snonce, proof) < 0) {
			why = "cannot compute a proof";
			status = -EIO;
		} else {
			c->auth_step = 1;
			r.nonce.data = c->snonce;
			r.nonce.len = WIRE_NONCE_LEN;
			r.proof.data = proof;
			r.proof.len = WIRE_PROOF_LEN;
		}
	} else if (a->step == 2 && c->auth_step == 1 &&
		   wire_auth_check(secret, WIRE_LABEL_CLIENT, c->snonce,
				   c->cnonce, a->proof.data, a->proof.len)) {
		c->authenticated = true;
	} else {
		why = "wrong cluster secret or malformed AUTH";
		status = -EACCES;
	}
	wire_reply(c, &m->hdr, status, status ? NULL : &r.base, NULL, 0);
	wire_msg_free(m);
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
	return c->open ? 0 : -ECANCELED;
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
	wire_conn_ref(c);
	rc = wire_reader_feed(&c->rd, (size_t)n, on_frame, c, &why);
	if (rc < 0 && rc != -ECANCELED) {
		tw_log_rl(TW_LOG_WARN, "wire: closing connection from %s: %s",
			  c->peer, why);
		wire_conn_close(c);
	}
	wire_conn_unref(c);
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct wire_server *s = ls->data;
	struct wire_conn *c;

	if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "wire: accept failed: %s",
			  uv_strerror(status));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || wire_reader_init(&c->rd) < 0) {
		tw_log_rl(TW_LOG_ERR, "wire: out of memory accepting");
		free(c);
		return;
	}
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	c->srv = s;
	c->refs = 1;
	c->open = true;
	c->next_push_id = 1ull << 63;
	c->last_rx_ms = tw_now_ms();
	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
		c->open = false;
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	wire_peer_addr(&c->tcp, c->peer, sizeof(c->peer));
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
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

	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
		/* A host name: resolved once, at start, where blocking is
		 * fine (peers resolve off the loop, wire_peer.c). */
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_PASSIVE }, *res = NULL;
		char p[16];

		snprintf(p, sizeof(p), "%d", port);
		if (getaddrinfo(host, p, &hints, &res) != 0 || !res ||
		    res->ai_addrlen > sizeof(ss)) {
			if (res)
				freeaddrinfo(res);
			return -EINVAL;
		}
		memcpy(&ss, res->ai_addr, res->ai_addrlen);
		freeaddrinfo(res);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->ops = *ops;
	s->arg = arg;
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
	*out = s;
	return 0;
}

int wire_server_port(const struct wire_server *s)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) < 0)
		return -EINVAL;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void server_maybe_done(struct wire_server *s)
{
	if (!s->closing || !s->listener_closed || s->conns)
		return;
	if (s->close_cb)
		s->close_cb(s->close_arg);
	free(s->secret);
	free(s);
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
	uv_close((uv_handle_t *)&s->listener, on_listener_closed);
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
	       req->type == TWINFS__MSG_TYPE__MSG_FALLOCATE);
	if (!c->open)
		return -ENOTCONN;
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
	return wire_stream_write((uv_stream_t *)&c->tcp, buf, len, NULL, NULL);
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
	return wire_stream_write_z((uv_stream_t *)&c->tcp, buf, len, z, NULL,
				   NULL);
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
	return wire_stream_write((uv_stream_t *)&c->tcp, buf, len, NULL, NULL);
}
