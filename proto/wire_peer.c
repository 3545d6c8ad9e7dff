/* wire_peer.c - the client side of TwinFS connections: one long-lived TCP
 * connection to a server, opened on demand, HELLO first, then pipelined
 * requests matched to replies by req_id, with per-call deadlines and a cap
 * on request bytes outstanding.
 *
 * Call states:    queued --(pump)--> sent --(reply)--> done
 *                    |                  |--(conn lost)--> done (-ECONNRESET)
 *                    '------------------'--(deadline)---> done (-ETIMEDOUT)
 * Every pending call is in `calls` (by req_id) and on the deadline list
 * (sorted by deadline); queued calls are also on the send queue.  Each call's
 * callback runs exactly once, never from inside wire_call().
 *
 * Connections are separate allocations (struct pconn) so that a connection
 * being closed never confuses the next one: frames read from a dead
 * connection are ignored.  Reconnects are spaced by reconnect_ms.
 *
 * A host name (not an address) is resolved on libuv's thread pool
 * (uv_getaddrinfo) before each connection, never on the loop: a resolver
 * that stalls for seconds must not stop a daemon's or a client's loop.
 * Its first WIRE_PEER_ADDRS addresses are tried in order until one
 * accepts the connection.
 *
 * With a key, AUTH comes first and chooses how later frames are protected;
 * from the HELLO on every frame each way is sealed (wire_seal.c).
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "wire_int.h"

#define HELLO_REQ_ID 0u

enum pstate { P_IDLE, P_RESOLVING, P_CONNECTING, P_AUTH, P_HELLO, P_READY };

#define WIRE_PEER_ADDRS 4

struct pcall {
	struct pcall *dl_prev, *dl_next;  /* deadline list */
	struct pcall *q_prev, *q_next;    /* send queue (queued calls only) */
	uint64_t req_id;
	uint64_t deadline;                /* ms, UINT64_MAX = none */
	uint8_t *frame;                   /* until sent; then owned by the write */
	size_t len;                       /* frame and z data */
	struct wire_zdata z;              /* wire_call_z's data, until sent */
	bool sent;
	wire_reply_cb cb;
	void *arg;
};

struct pconn {
	uv_tcp_t tcp;
	uv_connect_t creq;
	struct wire_peer *p;
	struct wire_reader rd;
	struct wire_seal *tx_seal;        /* seals what we send; NULL: clear */
	enum tw_channel chan;             /* AUTH's choice (step 1 reply) */
	enum tw_channel chan_smin;        /* the server's minimum it stated */
	uint8_t snonce[WIRE_NONCE_LEN];   /* the server's AUTH nonce */
	bool dead;                        /* detached from the peer */
};

struct wire_peer {
	uv_loop_t *loop;
	char host[TW_HOST_MAX];
	int port;
	char name[TW_HOST_MAX + 8];
	Twinfs__Hello *hello;             /* our own copy (packed+unpacked) */
	void (*on_connect)(struct wire_peer *, int, const Twinfs__HelloReply *, void *);
	void (*on_push)(struct wire_peer *, struct wire_msg *, void *);
	void *arg;
	uint64_t max_inflight;
	uint32_t reconnect_ms;
	/* What AUTH proves: the cluster secret's bytes (identity_len 0) or
	 * an identity's key; key_len 0 = no AUTH. */
	uint8_t key[WIRE_KEY_MAX];
	size_t key_len;
	uint8_t *identity;
	size_t identity_len;
	uint8_t cnonce[WIRE_NONCE_LEN];   /* this connection's AUTH nonce */
	enum tw_channel channel_min;      /* weakest mode after AUTH we take */
	char refusal[160];                /* the server's last reason */

	enum pstate state;
	struct pconn *conn;
	struct tw_hmap calls;             /* req_id -> pcall */
	struct pcall *dl_head, *dl_tail;
	struct pcall *q_head, *q_tail;
	uint64_t next_id;
	uint64_t inflight;                /* bytes of sent, unanswered calls */
	uint64_t last_attempt;            /* ms */
	uv_timer_t deadline_timer;
	uv_timer_t connect_timer;
	uv_getaddrinfo_t gai;             /* a host name being resolved */
	bool resolving;                   /* gai is out (counts in handles) */
	/* The addresses of this attempt, tried in the resolver's order:
	 * "localhost" may give ::1 first to a server bound to 127.0.0.1. */
	struct sockaddr_storage addrs[WIRE_PEER_ADDRS];
	int n_addrs, i_addr;
	int handles;                      /* open uv handles and requests */
	int depth;                        /* nesting of our callbacks */
	bool freeing;
};

static void peer_maybe_free(struct wire_peer *p);
static void schedule_connect(struct wire_peer *p);
static void start_connect(struct wire_peer *p);
static void conn_lost(struct wire_peer *p, int err);
static void pump(struct wire_peer *p);
static void on_deadline(uv_timer_t *t);
static int handshake_failed(struct wire_peer *p, int status,
			    const Twinfs__HelloReply *reply);

const char *wire_peer_name(const struct wire_peer *p)
{
	return p->name;
}

bool wire_peer_connected(const struct wire_peer *p)
{
	return p->state == P_READY;
}

bool wire_peer_connecting(const struct wire_peer *p)
{
	return p->state == P_CONNECTING;
}

enum tw_channel wire_peer_channel(const struct wire_peer *p)
{
	return p->conn && p->conn->tx_seal ? p->conn->chan : TW_CHANNEL_NONE;
}

/* ------------------------------------------------------------- lists */

static void dl_insert(struct wire_peer *p, struct pcall *c)
{
	struct pcall *at = p->dl_tail;

	/* Most calls share one timeout, so the right place is near the tail. */
	while (at && at->deadline > c->deadline)
		at = at->dl_prev;
	c->dl_prev = at;
	c->dl_next = at ? at->dl_next : p->dl_head;
	if (c->dl_next)
		c->dl_next->dl_prev = c;
	else
		p->dl_tail = c;
	if (at)
		at->dl_next = c;
	else
		p->dl_head = c;
}

static void dl_remove(struct wire_peer *p, struct pcall *c)
{
	if (c->dl_prev)
		c->dl_prev->dl_next = c->dl_next;
	else
		p->dl_head = c->dl_next;
	if (c->dl_next)
		c->dl_next->dl_prev = c->dl_prev;
	else
		p->dl_tail = c->dl_prev;
}

static void q_push(struct wire_peer *p, struct pcall *c)
{
	c->q_next = NULL;
	c->q_prev = p->q_tail;
	if (p->q_tail)
		p->q_tail->q_next = c;
	else
		p->q_head = c;
	p->q_tail = c;
}

static void q_remove(struct wire_peer *p, struct pcall *c)
{
	if (c->q_prev)
		c->q_prev->q_next = c->q_next;
	else
		p->q_head = c->q_next;
	if (c->q_next)
		c->q_next->q_prev = c->q_prev;
	else
		p->q_tail = c->q_prev;
}

/* Take a call out of every structure; the caller then completes it. */
static void call_detach(struct wire_peer *p, struct pcall *c)
{
	tw_hmap_del(&p->calls, c->req_id);
	dl_remove(p, c);
	if (c->sent)
		p->inflight -= c->len;
	else
		q_remove(p, c);
	free(c->frame);
	c->frame = NULL;
	if (c->z.release) {
		/* Never sent: nothing reads the data any more. */
		c->z.release(c->z.arg);
		c->z.release = NULL;
	}
}

static void call_complete(struct wire_peer *p, struct pcall *c, int status,
			  struct wire_msg *m)
{
	p->depth++;
	c->cb(status, m, c->arg);
	p->depth--;
	free(c);
}

/* Fail every pending call (or only the sent ones).  Detach them all first:
 * callbacks may issue new calls on this peer. */
static void fail_calls(struct wire_peer *p, int err, bool sent_only)
{
	struct pcall *list = NULL, *c, *next;

	for (c = p->dl_head; c; c = next) {
		next = c->dl_next;
		if (sent_only && !c->sent)
			continue;
		call_detach(p, c);
		c->dl_next = list;
		list = c;
	}
	/* Complete in the order they were issued (roughly): reverse. */
	struct pcall *rev = NULL;
	for (c = list; c; c = next) {
		next = c->dl_next;
		c->dl_next = rev;
		rev = c;
	}
	for (c = rev; c; c = next) {
		next = c->dl_next;
		call_complete(p, c, err, NULL);
	}
}

/* ---------------------------------------------------------- deadlines */

static void arm_deadline(struct wire_peer *p)
{
	uint64_t now = tw_now_ms();

	if (p->freeing)
		return;
	if (!p->dl_head || p->dl_head->deadline == UINT64_MAX) {
		uv_timer_stop(&p->deadline_timer);
		return;
	}
	uint64_t d = p->dl_head->deadline;
	uv_timer_start(&p->deadline_timer, on_deadline,
		       d > now ? d - now : 0, 0);
}

static void on_deadline(uv_timer_t *t)
{
	struct wire_peer *p = t->data;
	uint64_t now = tw_now_ms();
	struct pcall *c;

	while ((c = p->dl_head) && c->deadline <= now) {
		call_detach(p, c);
		tw_debug("wire: %s: request %llu timed out", p->name,
			 (unsigned long long)c->req_id);
		call_complete(p, c, -ETIMEDOUT, NULL);
		if (p->freeing)
			break;
	}
	arm_deadline(p);
	pump(p);
	peer_maybe_free(p);
}

/* ---------------------------------------------------------- connection */

static void on_pconn_closed(uv_handle_t *h)
{
	struct pconn *pc = h->data;
	struct wire_peer *p = pc->p;

	wire_reader_free(&pc->rd);
	wire_seal_free(pc->tx_seal);
	free(pc);
	p->handles--;
	peer_maybe_free(p);
}

static void pconn_close(struct wire_peer *p, struct pconn *pc)
{
	pc->dead = true;
	if (p->conn == pc)
		p->conn = NULL;
	uv_close((uv_handle_t *)&pc->tcp, on_pconn_closed);
}

static void on_written(void *arg, int status, size_t len)
{
	struct pconn *pc = arg;

	(void)len;
	if (status < 0 && !pc->dead) {
		tw_log_rl(TW_LOG_WARN, "wire: %s: write failed: %s",
			  pc->p->name, uv_strerror(status));
		conn_lost(pc->p, -ECONNRESET);
	}
}

static int send_frame(struct wire_peer *p, uint8_t *buf, size_t len,
		      const struct wire_zdata *z)
{
	return wire_stream_write_sealed((uv_stream_t *)&p->conn->tcp,
					p->conn->tx_seal, buf, len, z,
					on_written, p->conn);
}

static void pump(struct wire_peer *p)
{
	struct pcall *c;

	if (p->state != P_READY)
		return;
	while ((c = p->q_head)) {
		/* A lone call larger than the cap still goes: the cap bounds
		 * what is outstanding, it must not starve big requests. */
		if (p->inflight && p->inflight + c->len > p->max_inflight)
			break;
		q_remove(p, c);
		c->sent = true;
		p->inflight += c->len;
		uint8_t *buf = c->frame;
		c->frame = NULL;
		if (send_frame(p, buf, c->len - c->z.len, &c->z) < 0) {
			conn_lost(p, -ECONNRESET);   /* releases c->z */
			return;
		}
		c->z.release = NULL;   /* the write's now */
	}
}

static void conn_lost(struct wire_peer *p, int err)
{
	if (p->conn)
		pconn_close(p, p->conn);
	p->state = P_IDLE;
	fail_calls(p, err, false);
}

static void handle_push(struct wire_peer *p, struct wire_msg *m)
{
	struct wire_hdr req = m->hdr;
	uint8_t *buf;
	size_t len;
	int err;

	p->depth++;
	if (p->on_push)
		p->on_push(p, m, p->arg);
	else
		wire_msg_free(m);
	p->depth--;
	if (!p->conn)
		return;
	buf = wire_frame_build(req.type, WIRE_F_REPLY, 0, req.req_id, NULL,
			       NULL, 0, &len, &err);
	if (buf)
		send_frame(p, buf, len, NULL);
}

/* A refusal's reason, printable, for wire_peer_refusal(). */
static void keep_refusal(struct wire_peer *p, const char *why)
{
	size_t i;

	snprintf(p->refusal, sizeof(p->refusal), "%s", why ? why : "");
	for (i = 0; p->refusal[i]; i++)
		if ((unsigned char)p->refusal[i] < 0x20 ||
		    (unsigned char)p->refusal[i] == 0x7f)
			p->refusal[i] = '?';
}

const char *wire_peer_refusal(const struct wire_peer *p)
{
	return p->refusal;
}

static int on_hello_reply(struct wire_peer *p, struct wire_msg *m)
{
	int status = m->hdr.status;

	if (m->hdr.type != TWINFS__MSG_TYPE__MSG_HELLO) {
		wire_msg_free(m);
		return -EPROTO;
	}
	if (status < 0) {
		keep_refusal(p, ((const Twinfs__HelloReply *)m->body)->refusal);
		tw_log_rl(TW_LOG_WARN, "wire: %s refused HELLO: %s%s%s",
			  p->name, strerror(-status), *p->refusal ? ": " : "",
			  p->refusal);
		status = handshake_failed(p, status,
					  (const Twinfs__HelloReply *)m->body);
		wire_msg_free(m);
		return status;
	}
	p->state = P_READY;
	if (p->on_connect) {
		p->depth++;
		p->on_connect(p, 0, (Twinfs__HelloReply *)m->body, p->arg);
		p->depth--;
	}
	wire_msg_free(m);
	pump(p);
	return 0;
}

static void send_hello(struct wire_peer *p)
{
	uint8_t *buf;
	size_t len;
	int err;

	p->state = P_HELLO;
	buf = wire_frame_build(TWINFS__MSG_TYPE__MSG_HELLO, 0, 0, HELLO_REQ_ID,
			       &p->hello->base, NULL, 0, &len, &err);
	if (!buf) {
		conn_lost(p, err);
		return;
	}
	if (send_frame(p, buf, len, NULL) < 0)
		conn_lost(p, -ECONNRESET);
}

static void send_auth(struct wire_peer *p, uint32_t step, const uint8_t *proof)
{
	Twinfs__Auth a = TWINFS__AUTH__INIT;
	uint8_t *buf;
	size_t len;
	int err;

	a.step = step;
	if (step == 1) {
		a.nonce.data = p->cnonce;
		a.nonce.len = WIRE_NONCE_LEN;
		a.identity.data = p->identity;
		a.identity.len = p->identity_len;
		a.channel = p->channel_min;
	} else {
		a.proof.data = (uint8_t *)proof;
		a.proof.len = WIRE_PROOF_LEN;
	}
	buf = wire_frame_build(TWINFS__MSG_TYPE__MSG_AUTH, 0, 0, HELLO_REQ_ID,
			       &a.base, NULL, 0, &len, &err);
	if (!buf) {
		conn_lost(p, err);
		return;
	}
	if (send_frame(p, buf, len, NULL) < 0)
		conn_lost(p, -ECONNRESET);
}

/* A failed handshake (AUTH or HELLO refused): tell the owner (with the
 * HELLO refusal, which may name where to go instead), fail every call with
 * the reason, drop the connection. */
static int handshake_failed(struct wire_peer *p, int status,
			    const Twinfs__HelloReply *reply)
{
	if (p->on_connect) {
		p->depth++;
		p->on_connect(p, status, reply, p->arg);
		p->depth--;
	}
	if (p->conn)
		pconn_close(p, p->conn);
	p->state = P_IDLE;
	fail_calls(p, status, false);
	return -ECANCELED;
}

/* Replies to our two AUTH steps (proto/FORMAT.md "Authentication"). */
static int on_auth_reply(struct wire_peer *p, struct wire_msg *m)
{
	const Twinfs__AuthReply *r = (const Twinfs__AuthReply *)m->body;
	uint8_t proof[WIRE_PROOF_LEN], bind[WIRE_BIND_LEN];
	struct pconn *pc = p->conn;
	int status = m->hdr.status;

	if (status < 0) {
		keep_refusal(p, r->refusal);
		tw_log_rl(TW_LOG_WARN, "wire: %s refused our %s: %s%s%s",
			  p->name, p->identity_len ? "key" : "cluster secret",
			  strerror(-status), *p->refusal ? ": " : "",
			  p->refusal);
		wire_msg_free(m);
		return handshake_failed(p, status == -EOPNOTSUPP ? -EACCES
								 : status, NULL);
	}
	if (r->nonce.len == 0) {
		/* Step 2 accepted: from the HELLO on, everything is sealed. */
		wire_msg_free(m);
		if (pc->chan != TW_CHANNEL_NONE &&
		    wire_seal_start(pc->chan, p->key, p->key_len, p->cnonce,
				    pc->snonce, false, &pc->tx_seal,
				    &pc->rd.seal) < 0) {
			tw_log_rl(TW_LOG_ERR, "wire: %s: cannot derive the "
				  "channel keys", p->name);
			return handshake_failed(p, -EIO, NULL);
		}
		send_hello(p);
		return 0;
	}
	/* Step 1: the server chose the stronger of both minimums (a
	 * weaker choice is a downgrade), and must prove the key before we
	 * do, over the modes too: one rewritten on the way fails it. */
	if (!wire_channel_valid(r->channel) ||
	    !wire_channel_valid(r->channel_min) ||
	    r->channel != wire_channel_choose(p->channel_min,
					      r->channel_min)) {
		tw_log_rl(TW_LOG_WARN, "wire: %s chose channel mode %u for "
			  "minimums %s and %u: refusing", p->name,
			  (unsigned)r->channel,
			  tw_channel_name(p->channel_min),
			  (unsigned)r->channel_min);
		wire_msg_free(m);
		return handshake_failed(p, -EACCES, NULL);
	}
	pc->chan = (enum tw_channel)r->channel;
	pc->chan_smin = (enum tw_channel)r->channel_min;
	wire_channel_bind(bind, p->channel_min, pc->chan_smin, pc->chan);
	if (r->nonce.len != WIRE_NONCE_LEN ||
	    !wire_auth_check(p->key, p->key_len, WIRE_LABEL_SERVER, p->cnonce,
			     r->nonce.data, bind, r->proof.data,
			     r->proof.len) ||
	    wire_auth_proof(p->key, p->key_len, WIRE_LABEL_CLIENT,
			    r->nonce.data, p->cnonce, bind, proof) < 0) {
		tw_log_rl(TW_LOG_WARN, "wire: %s does not hold the %s (or "
			  "its answer was changed on the way)",
			  p->name, p->identity_len ? "key of our identity"
						   : "cluster secret");
		wire_msg_free(m);
		return handshake_failed(p, -EACCES, NULL);
	}
	memcpy(pc->snonce, r->nonce.data, WIRE_NONCE_LEN);
	wire_msg_free(m);
	send_auth(p, 2, proof);
	return 0;
}

static int on_frame(struct wire_msg *m, void *arg)
{
	struct pconn *pc = arg;
	struct wire_peer *p = pc->p;
	struct pcall *c;

	if (pc->dead) {
		wire_msg_free(m);
		return -ECANCELED;
	}
	if (!(m->hdr.flags & WIRE_F_REPLY)) {
		handle_push(p, m);
		return pc->dead ? -ECANCELED : 0;
	}
	if (m->hdr.req_id == HELLO_REQ_ID && p->state == P_AUTH &&
	    m->hdr.type == TWINFS__MSG_TYPE__MSG_AUTH)
		return on_auth_reply(p, m);
	if (m->hdr.req_id == HELLO_REQ_ID && p->state == P_HELLO)
		return on_hello_reply(p, m);
	c = tw_hmap_get(&p->calls, m->hdr.req_id);
	if (!c || !c->sent) {
		/* Late reply to a call that already timed out. */
		tw_debug("wire: %s: dropping reply to unknown request %llu",
			 p->name, (unsigned long long)m->hdr.req_id);
		wire_msg_free(m);
		return 0;
	}
	call_detach(p, c);
	arm_deadline(p);
	call_complete(p, c, m->hdr.status, m);
	pump(p);
	return pc->dead ? -ECANCELED : 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct pconn *pc = h->data;

	(void)hint;
	wire_reader_alloc(&pc->rd, buf);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct pconn *pc = st->data;
	struct wire_peer *p = pc->p;
	const char *why;
	int rc;

	(void)buf;
	if (n == 0 || pc->dead)
		return;
	if (n < 0) {
		tw_debug("wire: %s: connection lost: %s", p->name,
			 uv_strerror((int)n));
		conn_lost(p, -ECONNRESET);
		peer_maybe_free(p);
		return;
	}
	p->depth++;
	rc = wire_reader_feed(&pc->rd, (size_t)n, on_frame, pc, &why);
	p->depth--;
	if (rc < 0 && rc != -ECANCELED && !pc->dead) {
		tw_log_rl(TW_LOG_WARN, "wire: closing connection to %s: %s",
			  p->name, *why ? why : strerror(-rc));
		conn_lost(p, -ECONNRESET);
	}
	peer_maybe_free(p);
}

static void on_connected(uv_connect_t *req, int status)
{
	struct pconn *pc = req->data;
	struct wire_peer *p = pc->p;

	if (pc->dead)
		return;
	if (status < 0) {
		tw_debug("wire: cannot connect to %s: %s", p->name,
			 uv_strerror(status));
		pconn_close(p, pc);
		p->state = P_IDLE;
		if (!p->freeing && ++p->i_addr < p->n_addrs) {
			start_connect(p);   /* the name's next address */
			return;
		}
		if (p->on_connect) {
			p->depth++;
			p->on_connect(p, status, NULL, p->arg);
			p->depth--;
		}
		fail_calls(p, status, false);
		peer_maybe_free(p);
		return;
	}
	uv_tcp_nodelay(&pc->tcp, 1);
	uv_tcp_keepalive(&pc->tcp, 1, 10);
	uv_read_start((uv_stream_t *)&pc->tcp, on_alloc, on_read);
	p->refusal[0] = '\0';
	if (!p->key_len) {
		send_hello(p);
		return;
	}
	p->state = P_AUTH;
	if (tw_random(p->cnonce, WIRE_NONCE_LEN) < 0) {
		conn_lost(p, -EIO);
		return;
	}
	send_auth(p, 1, NULL);
}

/* Open the connection to addrs[i_addr] (state P_IDLE -> P_CONNECTING). */
static void start_connect(struct wire_peer *p)
{
	const struct sockaddr_storage *ss = &p->addrs[p->i_addr];
	struct pconn *pc;
	int rc;

	assert(p->state == P_IDLE && !p->freeing);
	pc = calloc(1, sizeof(*pc));
	if (!pc || wire_reader_init(&pc->rd) < 0) {
		free(pc);
		fail_calls(p, -ENOMEM, false);
		return;
	}
	pc->p = p;
	uv_tcp_init(p->loop, &pc->tcp);
	pc->tcp.data = pc;
	pc->creq.data = pc;
	p->handles++;
	p->conn = pc;
	p->state = P_CONNECTING;
	rc = uv_tcp_connect(&pc->creq, &pc->tcp, (const struct sockaddr *)ss,
			    on_connected);
	if (rc < 0) {
		pconn_close(p, pc);
		p->state = P_IDLE;
		if (++p->i_addr < p->n_addrs) {
			start_connect(p);   /* e.g. ::1 without IPv6 */
			return;
		}
		fail_calls(p, rc, false);
	}
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
			struct addrinfo *res)
{
	struct wire_peer *p = req->data;
	int n = 0;

	for (const struct addrinfo *a = status == 0 ? res : NULL;
	     a && n < WIRE_PEER_ADDRS; a = a->ai_next)
		if (a->ai_addrlen <= sizeof(p->addrs[0]))
			memcpy(&p->addrs[n++], a->ai_addr, a->ai_addrlen);
	if (res)
		uv_freeaddrinfo(res);
	p->resolving = false;
	p->handles--;
	if (p->freeing) {
		peer_maybe_free(p);
		return;
	}
	if (p->state != P_RESOLVING) {
		/* Reset meanwhile (its calls failed): start again if more
		 * came since. */
		if (p->q_head)
			schedule_connect(p);
		return;
	}
	p->state = P_IDLE;
	if (n == 0) {
		tw_log_rl(TW_LOG_WARN, "wire: cannot resolve %s: %s", p->host,
			  status < 0 ? uv_strerror(status) : "no address");
		fail_calls(p, -EHOSTUNREACH, false);
		return;
	}
	p->n_addrs = n;
	p->i_addr = 0;
	start_connect(p);
}

static void connect_now(struct wire_peer *p)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	char port[16];
	int rc;

	if (p->freeing || p->state != P_IDLE || p->resolving)
		return;
	p->last_attempt = tw_now_ms();
	snprintf(p->name, sizeof(p->name), "%s:%d", p->host, p->port);
	if (uv_ip4_addr(p->host, p->port, (struct sockaddr_in *)p->addrs) == 0 ||
	    uv_ip6_addr(p->host, p->port, (struct sockaddr_in6 *)p->addrs) == 0) {
		p->n_addrs = 1;
		p->i_addr = 0;
		start_connect(p);
		return;
	}
	snprintf(port, sizeof(port), "%d", p->port);
	p->gai.data = p;
	rc = uv_getaddrinfo(p->loop, &p->gai, on_resolved, p->host, port,
			    &hints);
	if (rc < 0) {
		tw_log_rl(TW_LOG_WARN, "wire: cannot resolve %s: %s", p->host,
			  uv_strerror(rc));
		fail_calls(p, -EHOSTUNREACH, false);
		return;
	}
	p->resolving = true;
	p->handles++;
	p->state = P_RESOLVING;
}

static void on_connect_timer(uv_timer_t *t)
{
	struct wire_peer *p = t->data;

	connect_now(p);
	peer_maybe_free(p);
}

/* Connect from a timer, never synchronously, so that wire_call() never runs
 * a callback and reconnects are spaced by reconnect_ms. */
static void schedule_connect(struct wire_peer *p)
{
	uint64_t now = tw_now_ms(), at = p->last_attempt + p->reconnect_ms;

	if (p->freeing || p->state != P_IDLE ||
	    uv_is_active((uv_handle_t *)&p->connect_timer))
		return;
	uv_timer_start(&p->connect_timer, on_connect_timer,
		       at > now ? at - now : 0, 0);
}

void wire_peer_connect(struct wire_peer *p)
{
	schedule_connect(p);
}

/* ------------------------------------------------------------ public */

/* A deep copy by packing and unpacking: the caller's Hello may point to
 * strings that do not outlive this call. */
int wire_peer_set_identity(struct wire_peer *p, const uint8_t *identity,
			   size_t identity_len, const uint8_t *key,
			   size_t key_len)
{
	uint8_t *copy = NULL;

	if (key_len > WIRE_KEY_MAX || identity_len > WIRE_IDENTITY_MAX ||
	    (identity_len == 0) != (key_len == 0))
		return -EINVAL;
	if (p->key_len && !p->identity_len)
		return -EINVAL;      /* holds the cluster secret */
	if (identity_len) {
		copy = malloc(identity_len);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, identity, identity_len);
		memcpy(p->key, key, key_len);
	}
	free(p->identity);
	p->identity = copy;
	p->identity_len = identity_len;
	p->key_len = key_len;
	return 0;
}

int wire_peer_set_hello(struct wire_peer *p, const Twinfs__Hello *hello)
{
	size_t len = protobuf_c_message_get_packed_size(&hello->base);
	uint8_t *buf = malloc(len ? len : 1);
	Twinfs__Hello *copy;

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(&hello->base, buf);
	copy = twinfs__hello__unpack(NULL, len, buf);
	free(buf);
	if (!copy)
		return -ENOMEM;
	if (p->hello)
		twinfs__hello__free_unpacked(p->hello, NULL);
	p->hello = copy;
	return 0;
}

int wire_peer_new(uv_loop_t *loop, const struct wire_peer_opts *o,
		  struct wire_peer **out)
{
	struct wire_peer *p;
	int rc;

	if (!o->host || strlen(o->host) >= TW_HOST_MAX || !o->hello ||
	    o->port <= 0 || o->port > 65535)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = loop;
	snprintf(p->host, sizeof(p->host), "%s", o->host);
	p->port = o->port;
	snprintf(p->name, sizeof(p->name), "%s:%d", o->host, o->port);
	p->on_connect = o->on_connect;
	p->on_push = o->on_push;
	p->arg = o->arg;
	p->max_inflight = o->max_inflight_bytes ? o->max_inflight_bytes
						: 64ull << 20;
	p->reconnect_ms = o->reconnect_ms ? o->reconnect_ms : 100;
	p->channel_min = o->channel == TW_CHANNEL_DEFAULT
			 ? TW_CHANNEL_DEFAULT_MODE : o->channel;
	if (!wire_channel_valid(p->channel_min)) {
		free(p);
		return -EINVAL;
	}
	if (o->secret && *o->secret) {
		if (strlen(o->secret) > WIRE_KEY_MAX) {
			free(p);
			return -EINVAL;
		}
		p->key_len = strlen(o->secret);
		memcpy(p->key, o->secret, p->key_len);
		rc = 0;
	} else {
		rc = wire_peer_set_identity(p, o->identity, o->identity_len,
					    o->key, o->key_len);
	}
	p->next_id = HELLO_REQ_ID;
	tw_hmap_init(&p->calls);
	if (rc == 0)
		rc = wire_peer_set_hello(p, o->hello);
	if (rc < 0) {
		free(p->identity);
		free(p);
		return rc;
	}
	uv_timer_init(loop, &p->deadline_timer);
	uv_timer_init(loop, &p->connect_timer);
	p->deadline_timer.data = p;
	p->connect_timer.data = p;
	p->handles = 2;
	*out = p;
	return 0;
}

static int call_start(struct wire_peer *p, uint16_t type,
		      const ProtobufCMessage *body, const struct iovec *iov,
		      int niov, const struct wire_zdata *z,
		      uint32_t timeout_ms, wire_reply_cb cb, void *arg)
{
	struct pcall *c;
	int err;

	assert(body && cb);
	if (p->freeing)
		return -ECANCELED;
	if (!wire_type_desc(type, false) ||
	    wire_type_desc(type, false) != body->descriptor)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (++p->next_id == HELLO_REQ_ID)
		++p->next_id;
	c->req_id = p->next_id;
	c->frame = z ? wire_frame_head(type, 0, 0, c->req_id, body, z->len,
				       &c->len, &err)
		     : wire_frame_build(type, 0, 0, c->req_id, body, iov, niov,
					&c->len, &err);
	if (!c->frame) {
		free(c);
		return err;
	}
	if (tw_hmap_put(&p->calls, c->req_id, c) < 0) {
		free(c->frame);
		free(c);
		return -ENOMEM;
	}
	if (z) {
		c->z = *z;   /* from here on, call_detach or the write release it */
		c->len += z->len;
	}
	c->cb = cb;
	c->arg = arg;
	c->deadline = timeout_ms ? tw_now_ms() + timeout_ms : UINT64_MAX;
	dl_insert(p, c);
	q_push(p, c);
	if (p->dl_head == c)
		arm_deadline(p);
	if (p->state == P_IDLE)
		schedule_connect(p);
	else
		pump(p);
	return 0;
}

int wire_call(struct wire_peer *p, uint16_t type, const ProtobufCMessage *body,
	      const struct iovec *iov, int niov, uint32_t timeout_ms,
	      wire_reply_cb cb, void *arg)
{
	return call_start(p, type, body, iov, niov, NULL, timeout_ms, cb, arg);
}

int wire_call_z(struct wire_peer *p, uint16_t type, const ProtobufCMessage *body,
		const struct wire_zdata *z, uint32_t timeout_ms,
		wire_reply_cb cb, void *arg)
{
	assert(z);
	return call_start(p, type, body, NULL, 0, z, timeout_ms, cb, arg);
}

void wire_peer_reset(struct wire_peer *p)
{
	if (p->state == P_IDLE && !p->conn)
		return;
	conn_lost(p, -ECONNRESET);
}

int wire_peer_set_addr(struct wire_peer *p, const char *host, int port)
{
	if (!host || strlen(host) >= TW_HOST_MAX || port <= 0 || port > 65535)
		return -EINVAL;
	/* The name stays the current connection's until the next one. */
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct wire_peer *p = h->data;

	p->handles--;
	peer_maybe_free(p);
}

static void peer_maybe_free(struct wire_peer *p)
{
	if (!p->freeing || p->depth > 0 || p->handles > 0)
		return;
	tw_hmap_free(&p->calls);
	twinfs__hello__free_unpacked(p->hello, NULL);
	free(p->identity);
	explicit_bzero(p->key, sizeof(p->key));
	free(p);
}

void wire_peer_free(struct wire_peer *p)
{
	if (p->freeing)
		return;
	p->freeing = true;
	fail_calls(p, -ECANCELED, false);
	if (p->resolving)
		uv_cancel((uv_req_t *)&p->gai);   /* on_resolved frees */
	if (p->conn)
		pconn_close(p, p->conn);
	p->state = P_IDLE;
	uv_close((uv_handle_t *)&p->deadline_timer, on_timer_closed);
	uv_close((uv_handle_t *)&p->connect_timer, on_timer_closed);
}
