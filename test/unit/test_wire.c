/* test_wire.c - the frame codec (every malformed-frame case of
 * proto/FORMAT.md), the stream reader fed byte by byte, and a server and a
 * peer talking over loopback on one loop: pipelining, bulk data, deadlines,
 * reconnects, and hostile bytes closing only the offending connection.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common.h"
#include "../../proto/wire_int.h"

/* The daemons ignore SIGPIPE (a peer gone is an error, not death), and
 * these tests close connections under writes on purpose: a write into a
 * socket the other end just closed must fail with EPIPE here too. */
static void __attribute__((constructor)) ignore_sigpipe(void)
{
	signal(SIGPIPE, SIG_IGN);
}

static void build_ping(uint8_t **buf, size_t *len, uint64_t id, uint32_t flags)
{
	Twinfs__Ping ping = TWINFS__PING__INIT;
	int err;

	ping.epoch = 7;
	*buf = wire_frame_build(TWINFS__MSG_TYPE__MSG_PING, flags, 0, id,
				&ping.base, NULL, 0, len, &err);
	cr_assert_not_null(*buf);
}

Test(codec, header_roundtrip)
{
	struct wire_hdr h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION,
		.type = TWINFS__MSG_TYPE__MSG_WRITE, .flags = WIRE_F_REPLY,
		.status = -ENOSPC, .req_id = 0x0123456789abcdefull,
		.msg_len = 17, .data_len = WIRE_MAX_DATA,
	}, g;
	uint8_t b[WIRE_HDR_SIZE];

	wire_hdr_encode(&h, b);
	cr_assert_eq(b[0], 'T');
	cr_assert_eq(b[1], 'W');
	cr_assert_eq(b[2], 'F');
	cr_assert_eq(b[3], 'S');
	cr_assert_eq(wire_hdr_decode(b, &g), 0);
	cr_assert_eq(memcmp(&h, &g, sizeof(h)), 0);
}

/* Each way a header can be invalid is refused before any allocation. */
Test(codec, header_malformed)
{
	struct wire_hdr ok = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION,
		.type = TWINFS__MSG_TYPE__MSG_PING,
	}, h, g;
	uint8_t b[WIRE_HDR_SIZE];

#define BAD(field, value) do { h = ok; h.field = value; \
	wire_hdr_encode(&h, b); \
	cr_assert_eq(wire_hdr_decode(b, &g), -EPROTO, #field " = " #value); \
} while (0)
	BAD(magic, 0x12345678);
	BAD(version, WIRE_VERSION + 1);
	BAD(version, WIRE_VERSION - 1);
	BAD(version, 0);
	BAD(type, 0);
	BAD(type, 9);
	BAD(type, 999);
	BAD(type, 0xffff);
	BAD(flags, 0x2);
	BAD(flags, 0x80000000u);
	BAD(msg_len, WIRE_MAX_MSG + 1);
	BAD(msg_len, 0xffffffffu);
	BAD(data_len, WIRE_MAX_DATA + 1);
	BAD(data_len, 0xffffffffu);
	BAD(status, -1);          /* a request with a status */
#undef BAD
	h = ok;
	h.flags = WIRE_F_REPLY;
	h.status = 5;             /* positive status */
	wire_hdr_encode(&h, b);
	cr_assert_eq(wire_hdr_decode(b, &g), -EPROTO);
	h.status = -100000;
	wire_hdr_encode(&h, b);
	cr_assert_eq(wire_hdr_decode(b, &g), -EPROTO);
	h.status = -EIO;
	wire_hdr_encode(&h, b);
	cr_assert_eq(wire_hdr_decode(b, &g), 0);
}

Test(codec, every_type_has_both_bodies)
{
	int n = 0;

	for (unsigned t = 0; t < 1000; t++) {
		if (!wire_type_desc((uint16_t)t, false))
			continue;
		cr_assert_not_null(wire_type_desc((uint16_t)t, true), "%u", t);
		cr_assert_str_neq(wire_type_name((uint16_t)t), "?");
		n++;
	}
	cr_assert_geq(n, 37);
	cr_assert_str_eq(wire_type_name(9999), "?");
}

/* ------------------------------------------------------------- reader */

struct collected {
	int n;
	struct wire_msg *m[16];
};

static int collect(struct wire_msg *m, void *arg)
{
	struct collected *c = arg;

	cr_assert_lt(c->n, 16);
	c->m[c->n++] = m;
	return 0;
}

/* Feed `len` bytes into the reader in chunks of `step`, as libuv would. */
static int feed(struct wire_reader *r, const uint8_t *bytes, size_t len,
		size_t step, struct collected *c, const char **why)
{
	size_t pos = 0;

	while (pos < len) {
		uv_buf_t b;
		wire_reader_alloc(r, &b);
		size_t n = TW_MIN(TW_MIN(step, len - pos), b.len);
		memcpy(b.base, bytes + pos, n);
		pos += n;
		int rc = wire_reader_feed(r, n, collect, c, why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

Test(reader, frames_any_chunking)
{
	uint8_t data[3000];
	Twinfs__Write w = TWINFS__WRITE__INIT;
	struct iovec iov = { data, sizeof(data) };
	uint8_t *f1, *f2, all[8192];
	size_t l1, l2;
	int err;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	w.ino = 42;
	w.offset = 1ull << 40;
	f1 = wire_frame_build(TWINFS__MSG_TYPE__MSG_WRITE, 0, 0, 5, &w.base,
			      &iov, 1, &l1, &err);
	build_ping(&f2, &l2, 6, 0);
	memcpy(all, f1, l1);
	memcpy(all + l1, f2, l2);

	for (size_t step = 1; step <= l1 + l2; step += (step < 40 ? 1 : 97)) {
		struct wire_reader r;
		struct collected c = { 0 };
		const char *why;

		cr_assert_eq(wire_reader_init(&r), 0);
		cr_assert_eq(feed(&r, all, l1 + l2, step, &c, &why), 0);
		cr_assert_eq(c.n, 2, "step %zu", step);
		Twinfs__Write *got = (Twinfs__Write *)c.m[0]->body;
		cr_assert_eq(got->ino, 42);
		cr_assert_eq(got->offset, 1ull << 40);
		cr_assert_eq(c.m[0]->data_len, sizeof(data));
		cr_assert_eq(memcmp(c.m[0]->data, data, sizeof(data)), 0);
		cr_assert_eq(c.m[1]->hdr.req_id, 6);
		cr_assert_eq(((Twinfs__Ping *)c.m[1]->body)->epoch, 7);
		for (int i = 0; i < c.n; i++)
			wire_msg_free(c.m[i]);
		wire_reader_free(&r);
	}
	free(f1);
	free(f2);
}

Test(reader, garbage_body_refused)
{
	uint8_t f[WIRE_HDR_SIZE + 4];
	struct wire_hdr h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION,
		.type = TWINFS__MSG_TYPE__MSG_LOOKUP, .msg_len = 4,
	};
	struct wire_reader r;
	struct collected c = { 0 };
	const char *why;

	wire_hdr_encode(&h, f);
	memset(f + WIRE_HDR_SIZE, 0xff, 4); /* not a valid protobuf */
	cr_assert_eq(wire_reader_init(&r), 0);
	cr_assert_eq(feed(&r, f, sizeof(f), 100, &c, &why), -EPROTO);
	cr_assert_eq(c.n, 0);
	wire_reader_free(&r);
}

/* A frame of another release is refused with its version named: the
 * usual cause after a partial upgrade. */
Test(reader, other_version_named)
{
	uint8_t f[WIRE_HDR_SIZE];
	struct wire_hdr h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION - 1,
		.type = TWINFS__MSG_TYPE__MSG_PING,
	};
	struct wire_reader r;
	struct collected c = { 0 };
	const char *why = NULL;
	char want[64];

	wire_hdr_encode(&h, f);
	cr_assert_eq(wire_reader_init(&r), 0);
	cr_assert_eq(feed(&r, f, sizeof(f), 5, &c, &why), -EPROTO);
	snprintf(want, sizeof(want), "protocol version %u, this is %u",
		 (unsigned)(WIRE_VERSION - 1), (unsigned)WIRE_VERSION);
	cr_assert_not_null(strstr(why, want), "%s", why);
	cr_assert_eq(c.n, 0);
	wire_reader_free(&r);
}

Test(reader, oversized_length_refused_without_allocating)
{
	uint8_t f[WIRE_HDR_SIZE];
	struct wire_hdr h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION,
		.type = TWINFS__MSG_TYPE__MSG_WRITE, .data_len = 0xfffffff0u,
	};
	struct wire_reader r;
	struct collected c = { 0 };
	const char *why;

	wire_hdr_encode(&h, f);
	cr_assert_eq(wire_reader_init(&r), 0);
	cr_assert_eq(feed(&r, f, sizeof(f), 7, &c, &why), -EPROTO);
	cr_assert_null(r.data);
	wire_reader_free(&r);
}

Test(reader, truncated_frame_waits)
{
	uint8_t *f;
	size_t l;
	struct wire_reader r;
	struct collected c = { 0 };
	const char *why;

	build_ping(&f, &l, 1, 0);
	cr_assert_eq(wire_reader_init(&r), 0);
	cr_assert_eq(feed(&r, f, l - 1, 3, &c, &why), 0);
	cr_assert_eq(c.n, 0);
	wire_reader_free(&r);
	free(f);
}

/* ----------------------------------------------------- loopback conns */

struct srv_state {
	int requests;
	int closes;
	struct wire_hdr held;       /* a request answered late */
	struct wire_conn *held_conn;
	bool hold_next;
	bool echo_z;                /* echo WRITE data with wire_reply_z */
	int z_released;             /* releases of those echoes */
};

/* A zero-copy buffer: a heap copy whose release counts and frees it. */
struct zbuf {
	int *released;
	uint8_t bytes[];
};

static void zbuf_release(void *arg)
{
	struct zbuf *b = arg;

	(*b->released)++;
	free(b);
}

static struct wire_zdata zbuf_new(const void *data, size_t len, int *released)
{
	struct zbuf *b = malloc(sizeof(*b) + (len ? len : 1));

	cr_assert_not_null(b);
	b->released = released;
	if (len)
		memcpy(b->bytes, data, len);
	return (struct wire_zdata){ .base = b->bytes, .len = len,
				    .release = zbuf_release, .arg = b };
}

static void srv_on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	struct srv_state *st = arg;

	st->requests++;
	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_HELLO) {
		Twinfs__HelloReply hr = TWINFS__HELLO_REPLY__INIT;
		hr.session_id = 99;
		wire_reply(c, &m->hdr, 0, &hr.base, NULL, 0);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_PING && st->hold_next) {
		st->hold_next = false;
		st->held = m->hdr;
		st->held_conn = c;
		wire_conn_ref(c);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_PING) {
		wire_reply(c, &m->hdr, 0, m->body, NULL, 0);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_WRITE && st->echo_z) {
		Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;
		struct wire_zdata z = zbuf_new(m->data, m->data_len,
					       &st->z_released);

		wr.sub_size = m->data_len;
		cr_assert_eq(wire_reply_z(c, &m->hdr, &wr.base, &z), 0);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_WRITE) {
		/* Echo the bulk data back in a READ-shaped reply. */
		Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;
		struct iovec iov = { m->data, m->data_len };
		wr.sub_size = m->data_len;
		wire_reply(c, &m->hdr, 0, &wr.base, &iov, 1);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_TRUNCATE) {
		/* An iod's error reply naming where it failed (FORMAT.md
		 * §1): its twin, iod 7. */
		Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;
		wr.failed_iod = 7;
		wire_reply(c, &m->hdr, -ENOSPC, &wr.base, NULL, 0);
	} else {
		wire_reply(c, &m->hdr, -EOPNOTSUPP, NULL, NULL, 0);
	}
	wire_msg_free(m);
}

static void srv_on_close(struct wire_conn *c, void *arg)
{
	struct srv_state *st = arg;

	(void)c;
	st->closes++;
}

struct cli_state {
	int replies;
	int status[64];
	uint64_t sizes[64];
	uint32_t failed_iod[64];
	int connects;
	uint64_t session;
};

struct cli_call {
	struct cli_state *st;
	int idx;
	const uint8_t *expect;
	size_t expect_len;
};

static void cli_on_reply(int status, struct wire_msg *m, void *arg)
{
	struct cli_call *cc = arg;

	cc->st->status[cc->idx] = status;
	cc->st->failed_iod[cc->idx] = wire_failed_iod(m);
	if (m && cc->expect) {
		cr_assert_eq(m->data_len, cc->expect_len);
		if (cc->expect_len)
			cr_assert_eq(memcmp(m->data, cc->expect,
					    cc->expect_len), 0);
		cc->st->sizes[cc->idx] = ((Twinfs__WriteReply *)m->body)->sub_size;
	}
	cc->st->replies++;
	wire_msg_free(m);
}

static void cli_on_connect(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *r, void *arg)
{
	struct cli_state *st = arg;

	(void)p;
	if (status == 0) {
		st->connects++;
		st->session = r->session_id;
	}
}

/* A server on a free loopback port and a peer to it (cap: the peer's
 * max_inflight_bytes, 0 = default).  Returns the port. */
static int pair_open(uv_loop_t *loop, struct srv_state *ss,
		     struct cli_state *cs, uint64_t cap,
		     struct wire_server **srv, struct wire_peer **peer)
{
	static const struct wire_server_ops ops = { srv_on_request,
						    srv_on_close };
	Twinfs__Hello hello;
	int port;

	cr_assert_eq(uv_loop_init(loop), 0);
	cr_assert_eq(wire_listen(loop, "127.0.0.1", 0, &ops, ss, srv), 0);
	port = wire_server_port(*srv);
	cr_assert_gt(port, 0);
	wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_CLIENT, 1);
	struct wire_peer_opts po = {
		.host = "127.0.0.1", .port = port, .hello = &hello,
		.on_connect = cli_on_connect, .arg = cs,
		.max_inflight_bytes = cap,
	};
	cr_assert_eq(wire_peer_new(loop, &po, peer), 0);
	return port;
}

static void run_until(uv_loop_t *loop, int *counter, int target)
{
	uint64_t end = tw_now_ms() + 10000;

	while (*counter < target && tw_now_ms() < end)
		uv_run(loop, UV_RUN_ONCE);
	cr_assert_geq(*counter, target, "timed out waiting");
}

Test(conn, pipelined_calls_bulk_data_and_deadlines)
{
	uv_loop_t loop;
	struct wire_server *srv;
	struct srv_state ss = { 0 };
	struct cli_state cs = { 0 };
	struct wire_peer *peer;
	static uint8_t big[1 << 20];
	struct cli_call calls[64];

	pair_open(&loop, &ss, &cs, 3 << 20, &srv, &peer);

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i ^ (i >> 9));
	/* 20 writes of 1 MiB with a 3 MiB cap: the cap must queue, not drop. */
	for (int i = 0; i < 20; i++) {
		Twinfs__Write w = TWINFS__WRITE__INIT;
		size_t len = sizeof(big) - (size_t)i * 1000;
		struct iovec iov = { big, len };
		calls[i] = (struct cli_call){ &cs, i, big, len };
		cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_WRITE,
				       &w.base, &iov, 1, 10000, cli_on_reply,
				       &calls[i]), 0);
	}
	cr_assert_eq(cs.replies, 0, "no callback from inside wire_call");
	run_until(&loop, &cs.replies, 20);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(cs.status[i], 0);
		cr_assert_eq(cs.sizes[i], sizeof(big) - (size_t)i * 1000);
	}
	cr_assert_eq(cs.connects, 1);
	cr_assert_eq(cs.session, 99);

	/* A request the server never answers times out; the late reply is
	 * dropped and the connection keeps working. */
	Twinfs__Ping ping = TWINFS__PING__INIT;
	ss.hold_next = true;
	calls[20] = (struct cli_call){ &cs, 20, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 200, cli_on_reply, &calls[20]), 0);
	run_until(&loop, &cs.replies, 21);
	cr_assert_eq(cs.status[20], -ETIMEDOUT);
	wire_reply(ss.held_conn, &ss.held, 0, &ping.base, NULL, 0);
	wire_conn_unref(ss.held_conn);
	calls[21] = (struct cli_call){ &cs, 21, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 2000, cli_on_reply, &calls[21]), 0);
	run_until(&loop, &cs.replies, 22);
	cr_assert_eq(cs.status[21], 0);

	/* An error status travels back. */
	Twinfs__Getattr ga = TWINFS__GETATTR__INIT;
	calls[22] = (struct cli_call){ &cs, 22, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_GETATTR, &ga.base,
			       NULL, 0, 2000, cli_on_reply, &calls[22]), 0);
	run_until(&loop, &cs.replies, 23);
	cr_assert_eq(cs.status[22], -EOPNOTSUPP);

	/* ... and an error reply's body, where FORMAT.md §1 allows one. */
	Twinfs__Truncate tr = TWINFS__TRUNCATE__INIT;
	calls[24] = (struct cli_call){ &cs, 24, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_TRUNCATE, &tr.base,
			       NULL, 0, 2000, cli_on_reply, &calls[24]), 0);
	run_until(&loop, &cs.replies, 24);
	cr_assert_eq(cs.status[24], -ENOSPC);
	cr_assert_eq(cs.failed_iod[24], 7);

	/* A mismatched body type is refused up front. */
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_LOOKUP, &ping.base,
			       NULL, 0, 2000, cli_on_reply, &calls[23]), -EINVAL);

	/* Reset: the next call reconnects and says HELLO again. */
	wire_peer_reset(peer);
	calls[23] = (struct cli_call){ &cs, 23, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 2000, cli_on_reply, &calls[23]), 0);
	run_until(&loop, &cs.replies, 25);
	cr_assert_eq(cs.status[23], 0);
	cr_assert_eq(cs.connects, 2);

	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* wire_call_z and wire_reply_z: the bytes arrive as sent, each buffer is
 * released exactly once (sent, dropped unsent, or refused). */
Test(conn, zero_copy_calls_and_replies)
{
	uv_loop_t loop;
	struct wire_server *srv;
	struct srv_state ss = { .echo_z = true };
	struct cli_state cs = { 0 };
	struct wire_peer *peer, *lost;
	static uint8_t big[1 << 20];
	struct cli_call calls[64];
	int released = 0;

	pair_open(&loop, &ss, &cs, 3 << 20, &srv, &peer);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 ^ (i >> 11));
	/* 12 calls of about 1 MiB (one empty) with a 3 MiB cap. */
	for (int i = 0; i < 12; i++) {
		Twinfs__Write w = TWINFS__WRITE__INIT;
		size_t len = i == 5 ? 0 : sizeof(big) - (size_t)i * 4093;
		struct wire_zdata z = zbuf_new(big, len, &released);

		calls[i] = (struct cli_call){ &cs, i, big, len };
		cr_assert_eq(wire_call_z(peer, TWINFS__MSG_TYPE__MSG_WRITE,
					 &w.base, &z, 10000, cli_on_reply,
					 &calls[i]), 0);
	}
	cr_assert_eq(released, 0, "nothing released from inside wire_call_z");
	run_until(&loop, &cs.replies, 12);
	run_until(&loop, &released, 12);
	run_until(&loop, &ss.z_released, 12);
	for (int i = 0; i < 12; i++) {
		cr_assert_eq(cs.status[i], 0);
		cr_assert_eq(cs.sizes[i], i == 5 ? 0 : sizeof(big) - (size_t)i * 4093);
	}

	/* Refused up front (wrong body type): not released, still ours. */
	{
		Twinfs__Ping ping = TWINFS__PING__INIT;
		struct wire_zdata z = zbuf_new(big, 10, &released);

		cr_assert_eq(wire_call_z(peer, TWINFS__MSG_TYPE__MSG_WRITE,
					 &ping.base, &z, 1000, cli_on_reply,
					 &calls[12]), -EINVAL);
		cr_assert_eq(released, 12);
		zbuf_release(z.arg);
		cr_assert_eq(released, 13);
	}

	/* Never sent: a peer whose port nobody listens on is freed with the
	 * call still queued; the call fails and its data is released. */
	{
		Twinfs__Hello hello;
		Twinfs__Write w = TWINFS__WRITE__INIT;
		struct wire_zdata z = zbuf_new(big, 4096, &released);
		struct wire_peer_opts lo = {
			/* privileged and unused: refused or unreachable */
			.host = "127.0.0.1", .port = 1, .hello = &hello,
		};

		wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_CLIENT, 1);
		cr_assert_eq(wire_peer_new(&loop, &lo, &lost), 0);
		calls[13] = (struct cli_call){ &cs, 13, NULL, 0 };
		cr_assert_eq(wire_call_z(lost, TWINFS__MSG_TYPE__MSG_WRITE,
					 &w.base, &z, 10000, cli_on_reply,
					 &calls[13]), 0);
		wire_peer_free(lost);
		run_until(&loop, &cs.replies, 13);
		cr_assert_lt(cs.status[13], 0);
		cr_assert_eq(released, 14);
	}

	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	cr_assert_eq(ss.z_released, 12);
}

static void raw_send(int port, const void *buf, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

Test(conn, hostile_bytes_close_only_that_connection)
{
	uv_loop_t loop;
	struct wire_server *srv;
	struct srv_state ss = { 0 };
	struct cli_state cs = { 0 };
	struct wire_peer *peer;
	Twinfs__Ping ping = TWINFS__PING__INIT;
	struct cli_call calls[8];
	uint8_t bad[WIRE_HDR_SIZE];
	uint8_t *f;
	size_t l;
	int port = pair_open(&loop, &ss, &cs, 0, &srv, &peer);
	calls[0] = (struct cli_call){ &cs, 0, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 2000, cli_on_reply, &calls[0]), 0);
	run_until(&loop, &cs.replies, 1);

	/* Bad magic; oversized; unknown type; a PING before HELLO. */
	memset(bad, 0x41, sizeof(bad));
	raw_send(port, bad, sizeof(bad));
	struct wire_hdr h = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
			      .type = TWINFS__MSG_TYPE__MSG_WRITE,
			      .data_len = 0x7fffffff };
	wire_hdr_encode(&h, bad);
	raw_send(port, bad, sizeof(bad));
	h.type = 777;
	h.data_len = 0;
	wire_hdr_encode(&h, bad);
	raw_send(port, bad, sizeof(bad));
	build_ping(&f, &l, 3, 0);
	raw_send(port, f, l);
	free(f);

	int target = 4;
	uint64_t end = tw_now_ms() + 5000;
	while (ss.closes < target && tw_now_ms() < end)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_geq(ss.closes, target);

	/* The well-behaved peer still gets answers on its connection. */
	calls[1] = (struct cli_call){ &cs, 1, NULL, 0 };
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 2000, cli_on_reply, &calls[1]), 0);
	run_until(&loop, &cs.replies, 2);
	cr_assert_eq(cs.status[1], 0);
	cr_assert_eq(cs.connects, 1);

	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(conn, refused_connection_fails_calls)
{
	uv_loop_t loop;
	struct cli_state cs = { 0 };
	struct wire_peer *peer;
	Twinfs__Hello hello;
	Twinfs__Ping ping = TWINFS__PING__INIT;
	struct cli_call call = { &cs, 0, NULL, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	/* Find a port nobody listens on: bind, read it, close. */
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);

	cr_assert_eq(uv_loop_init(&loop), 0);
	wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_CLIENT, 1);
	struct wire_peer_opts po = { .host = "127.0.0.1",
				     .port = ntohs(a.sin_port),
				     .hello = &hello };
	cr_assert_eq(wire_peer_new(&loop, &po, &peer), 0);
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 5000, cli_on_reply, &call), 0);
	run_until(&loop, &cs.replies, 1);
	cr_assert_eq(cs.status[0], -ECONNREFUSED);
	wire_peer_free(peer);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A host name is resolved off the loop (uv_getaddrinfo) and its
 * addresses tried in order: a peer to "localhost" reaches a server bound
 * to 127.0.0.1 even where the name gives ::1 first (Debian's /etc/hosts),
 * and a peer freed while its name is being resolved is freed once the
 * answer comes. */
Test(conn, host_name_resolved_off_the_loop)
{
	static const struct wire_server_ops ops = { srv_on_request,
						    srv_on_close };
	uv_loop_t loop;
	struct wire_server *srv;
	struct srv_state ss = { 0 };
	struct cli_state cs = { 0 };
	struct wire_peer *peer, *gone;
	Twinfs__Hello hello;
	Twinfs__Ping ping = TWINFS__PING__INIT;
	struct cli_call calls[2] = { { &cs, 0, NULL, 0 }, { &cs, 1, NULL, 0 } };

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(wire_listen(&loop, "127.0.0.1", 0, &ops, &ss, &srv), 0);
	wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_CLIENT, 1);
	struct wire_peer_opts po = {
		.host = "localhost", .port = wire_server_port(srv),
		.hello = &hello, .on_connect = cli_on_connect, .arg = &cs,
	};
	cr_assert_eq(wire_peer_new(&loop, &po, &peer), 0);
	cr_assert_eq(wire_peer_new(&loop, &po, &gone), 0);
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 5000, cli_on_reply, &calls[0]), 0);
	cr_assert_eq(wire_call(gone, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 5000, cli_on_reply, &calls[1]), 0);
	/* One pass: both peers' connect timers run and start resolving. */
	uv_run(&loop, UV_RUN_NOWAIT);
	wire_peer_free(gone);           /* its call ends -ECANCELED */
	run_until(&loop, &cs.replies, 2);
	cr_assert_eq(cs.status[0], 0, "PING through \"localhost\": %d",
		     cs.status[0]);
	cr_assert_eq(cs.status[1], -ECANCELED);
	cr_assert_eq(cs.connects, 1);
	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ------------------------------------------------------ authentication */

struct auth_srv {
	int hellos;
	bool authenticated;
};

static void auth_on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	struct auth_srv *st = arg;

	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_HELLO) {
		Twinfs__HelloReply hr = TWINFS__HELLO_REPLY__INIT;
		st->hellos++;
		st->authenticated = wire_conn_authenticated(c);
		wire_reply(c, &m->hdr, 0, &hr.base, NULL, 0);
	} else {
		wire_reply(c, &m->hdr, 0, m->body, NULL, 0);
	}
	wire_msg_free(m);
}

/* One PING through a peer holding `peer_secret` to a server holding
 * `srv_secret`; returns the call's status, sets *authed from the server. */
static int auth_round(const char *srv_secret, const char *peer_secret,
		      bool *authed)
{
	uv_loop_t loop;
	struct wire_server *srv;
	struct auth_srv ss = { 0 };
	struct wire_server_ops ops = { auth_on_request, NULL };
	struct cli_state cs = { 0 };
	struct wire_peer *peer;
	Twinfs__Hello hello;
	Twinfs__Ping ping = TWINFS__PING__INIT;
	struct cli_call call = { &cs, 0, NULL, 0 };

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(wire_listen(&loop, "127.0.0.1", 0, &ops, &ss, &srv), 0);
	cr_assert_eq(wire_server_set_secret(srv, srv_secret), 0);
	wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_ADMIN, 1);
	struct wire_peer_opts po = {
		.host = "127.0.0.1", .port = wire_server_port(srv),
		.hello = &hello, .secret = peer_secret,
	};
	cr_assert_eq(wire_peer_new(&loop, &po, &peer), 0);
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 5000, cli_on_reply, &call), 0);
	run_until(&loop, &cs.replies, 1);
	*authed = ss.authenticated;
	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	return cs.status[0];
}

Test(auth, right_secret_authenticates)
{
	bool authed = false;

	cr_assert_eq(auth_round("s3cret", "s3cret", &authed), 0);
	cr_assert(authed);
}

Test(auth, wrong_secret_refused)
{
	bool authed = true;

	cr_assert_eq(auth_round("s3cret", "guess", &authed), -EACCES);
}

Test(auth, no_secret_connects_unauthenticated)
{
	bool authed = true;

	/* The wire layer lets it say HELLO; the daemon decides by role. */
	cr_assert_eq(auth_round("s3cret", NULL, &authed), 0);
	cr_assert(!authed);
}

Test(auth, secret_against_server_without_one_refused)
{
	bool authed = true;

	/* A peer that holds a secret never talks to a server that cannot
	 * prove it (it could be an impostor). */
	cr_assert_eq(auth_round(NULL, "s3cret", &authed), -EACCES);
}

Test(auth, proofs_depend_on_every_input)
{
	uint8_t a[WIRE_NONCE_LEN] = { 1 }, b[WIRE_NONCE_LEN] = { 2 };
	uint8_t p1[WIRE_PROOF_LEN], p2[WIRE_PROOF_LEN];
	const uint8_t *k = (const uint8_t *)"k", *k2 = (const uint8_t *)"k2";
	uint8_t m[WIRE_BIND_LEN] = { 2, 2, 2 }, m2[WIRE_BIND_LEN] = { 1, 2, 2 };

	cr_assert_eq(wire_auth_proof(k, 1, WIRE_LABEL_CLIENT, a, b, m, p1), 0);
	cr_assert(wire_auth_check(k, 1, WIRE_LABEL_CLIENT, a, b, m, p1, sizeof(p1)));
	cr_assert(!wire_auth_check(k2, 2, WIRE_LABEL_CLIENT, a, b, m, p1, sizeof(p1)));
	cr_assert(!wire_auth_check(k, 1, WIRE_LABEL_SERVER, a, b, m, p1, sizeof(p1)));
	cr_assert(!wire_auth_check(k, 1, WIRE_LABEL_CLIENT, b, a, m, p1, sizeof(p1)));
	cr_assert(!wire_auth_check(k, 1, WIRE_LABEL_CLIENT, a, b, m, p1, 31));
	/* The channel modes are covered: a rewritten minimum fails. */
	cr_assert(!wire_auth_check(k, 1, WIRE_LABEL_CLIENT, a, b, m2, p1, sizeof(p1)));
	cr_assert_eq(wire_auth_proof(k, 1, WIRE_LABEL_CLIENT, a, b, m, p2), 0);
	cr_assert_eq(memcmp(p1, p2, sizeof(p1)), 0);
	cr_assert(wire_host_is_loopback("127.0.0.1"));
	cr_assert(wire_host_is_loopback("::1"));
	cr_assert(!wire_host_is_loopback("10.0.0.5"));
}

/* ------------------------------------------------------- sealed frames */

static const uint8_t seal_key[] = "s3cret";
static const uint8_t seal_nc[WIRE_NONCE_LEN] = { 1, 2, 3 };
static const uint8_t seal_ns[WIRE_NONCE_LEN] = { 9, 8, 7 };

/* Both ends of one connection: the client's tx/rx and the server's. */
struct seal_ends {
	struct wire_seal *ctx, *crx, *stx, *srx;
};

static void seal_ends_open(struct seal_ends *e, enum tw_channel mode)
{
	cr_assert_eq(wire_seal_start(mode, seal_key, sizeof(seal_key) - 1,
				     seal_nc, seal_ns, false, &e->ctx,
				     &e->crx), 0);
	cr_assert_eq(wire_seal_start(mode, seal_key, sizeof(seal_key) - 1,
				     seal_nc, seal_ns, true, &e->stx,
				     &e->srx), 0);
}

static void seal_ends_close(struct seal_ends *e)
{
	wire_seal_free(e->ctx);
	wire_seal_free(e->crx);
	wire_seal_free(e->stx);
	wire_seal_free(e->srx);
}

/* A WRITE of `len` data bytes (id req_id) as it goes on the wire sealed
 * by tx: the data copied into the frame, or zero-copy (zc). */
static uint8_t *seal_write_frame(struct wire_seal *tx, uint64_t req_id,
				 const uint8_t *data, size_t len, bool zc,
				 size_t *out_len)
{
	Twinfs__Write w = TWINFS__WRITE__INIT;
	struct iovec iov = { (void *)data, len };
	struct wire_zdata z = { .base = data, .len = len };
	uint8_t *buf, *zcopy, *out, tag[WIRE_TAG_LEN];
	size_t blen;
	int err;

	w.ino = 42;
	w.offset = req_id;
	buf = zc ? wire_frame_head(TWINFS__MSG_TYPE__MSG_WRITE, 0, 0, req_id,
				   &w.base, len, &blen, &err)
		 : wire_frame_build(TWINFS__MSG_TYPE__MSG_WRITE, 0, 0, req_id,
				    &w.base, &iov, 1, &blen, &err);
	cr_assert_not_null(buf);
	cr_assert_eq(wire_seal_frame(tx, buf, blen, zc ? &z : NULL, &zcopy,
				     tag), 0);
	out = malloc(blen + len + WIRE_TAG_LEN);
	cr_assert_not_null(out);
	memcpy(out, buf, blen);
	if (zc && len)
		memcpy(out + blen, zcopy ? zcopy : data, len);
	memcpy(out + blen + (zc ? len : 0), tag, WIRE_TAG_LEN);
	*out_len = blen + (zc ? len : 0) + WIRE_TAG_LEN;
	free(buf);
	free(zcopy);
	return out;
}

/* From now on r opens with rx (taken over: freed with the reader). */
static void seal_reader_install(struct wire_reader *r, struct wire_seal **rx)
{
	r->seal = *rx;
	*rx = NULL;
}

static void seal_reader(struct wire_reader *r, struct wire_seal **rx)
{
	cr_assert_eq(wire_reader_init(r), 0);
	seal_reader_install(r, rx);
}

static void check_write(const struct wire_msg *m, uint64_t id,
			const uint8_t *data, size_t len)
{
	cr_assert_eq(m->hdr.req_id, id);
	cr_assert_eq(((Twinfs__Write *)m->body)->ino, 42);
	cr_assert_eq(((Twinfs__Write *)m->body)->offset, id);
	cr_assert_eq(m->data_len, len);
	if (len)
		cr_assert_eq(memcmp(m->data, data, len), 0);
}

static const enum tw_channel seal_modes[] = { TW_CHANNEL_INTEGRITY,
					      TW_CHANNEL_ENCRYPT };

/* Every mode, copied and zero-copy data, any chunking: what was sealed
 * is delivered; in encrypt mode the data is not on the wire. */
Test(seal, round_trip_each_mode)
{
	static uint8_t data[70000];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 ^ (i >> 9));
	for (size_t mi = 0; mi < TW_ARRAY_SIZE(seal_modes); mi++) {
		for (size_t step = 7; step < 200000; step *= 9) {
			struct seal_ends e;
			struct wire_reader r;
			struct collected c = { 0 };
			uint8_t *f[3];
			size_t fl[3], lens[3] = { sizeof(data), 0, 4096 };
			const char *why;

			seal_ends_open(&e, seal_modes[mi]);
			seal_reader(&r, &e.srx);
			for (int k = 0; k < 3; k++) {
				f[k] = seal_write_frame(e.ctx, (uint64_t)k + 1,
							data, lens[k], k != 1,
							&fl[k]);
				/* Plain in integrity, hidden when encrypted. */
				bool seen = memmem(f[k], fl[k], data + 100,
						   64) != NULL;
				cr_assert_eq(seen, lens[k] > 164 &&
					     seal_modes[mi] == TW_CHANNEL_INTEGRITY);
			}
			for (int k = 0; k < 3; k++) {
				cr_assert_eq(feed(&r, f[k], fl[k], step, &c,
						  &why), 0, "%s", why);
				free(f[k]);
			}
			cr_assert_eq(c.n, 3);
			for (int k = 0; k < 3; k++) {
				check_write(c.m[k], (uint64_t)k + 1, data,
					    lens[k]);
				wire_msg_free(c.m[k]);
			}
			wire_reader_free(&r);
			seal_ends_close(&e);
		}
	}
}

/* Feed one sealed frame to a fresh reader; returns the feed's status and
 * how many frames were delivered. */
static int seal_try(enum tw_channel mode, const uint8_t *f, size_t len,
		    int *delivered)
{
	struct seal_ends e;
	struct wire_reader r;
	struct collected c = { 0 };
	const char *why;
	int rc;

	seal_ends_open(&e, mode);
	seal_reader(&r, &e.srx);
	rc = feed(&r, f, len, len, &c, &why);
	*delivered = c.n;
	for (int i = 0; i < c.n; i++)
		wire_msg_free(c.m[i]);
	wire_reader_free(&r);
	seal_ends_close(&e);
	return rc;
}

/* Any one bit flipped anywhere (header, body, data, tag): nothing is
 * delivered.  A flip in a length makes the reader wait for bytes that
 * never come, or fail; a flip anywhere else fails the tag. */
Test(seal, any_flipped_bit_rejected)
{
	uint8_t data[40];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i + 1);
	for (size_t mi = 0; mi < TW_ARRAY_SIZE(seal_modes); mi++) {
		for (int zc = 0; zc < 2; zc++) {
			struct seal_ends e;
			uint8_t *f;
			size_t len;
			int n, rc, failed = 0;

			seal_ends_open(&e, seal_modes[mi]);
			f = seal_write_frame(e.ctx, 5, data, sizeof(data), zc,
					     &len);
			seal_ends_close(&e);
			cr_assert_eq(seal_try(seal_modes[mi], f, len, &n), 0);
			cr_assert_eq(n, 1, "the unflipped frame opens");
			for (size_t bit = 0; bit < len * 8; bit++) {
				f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				rc = seal_try(seal_modes[mi], f, len, &n);
				f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				cr_assert_eq(n, 0, "bit %zu delivered", bit);
				failed += rc < 0;
				if (bit >= WIRE_HDR_SIZE * 8)
					cr_assert_eq(rc, -EBADMSG, "bit %zu",
						     bit);
			}
			cr_assert_gt(failed, (int)(len * 8) - 64);
			free(f);
		}
	}
}

/* The nonce is the frame's place in its direction: a replayed, dropped,
 * reordered or reflected frame fails; so does one opened under another
 * mode's keys. */
Test(seal, replay_reorder_drop_reflect_rejected)
{
	const uint8_t data[] = "twelve bytes";

	for (size_t mi = 0; mi < TW_ARRAY_SIZE(seal_modes); mi++) {
		enum tw_channel mode = seal_modes[mi];
		struct seal_ends e;
		uint8_t *a, *b;
		size_t al, bl;
		int n;

		seal_ends_open(&e, mode);
		a = seal_write_frame(e.ctx, 1, data, sizeof(data), false, &al);
		b = seal_write_frame(e.ctx, 2, data, sizeof(data), false, &bl);
		seal_ends_close(&e);
		uint8_t *ab = malloc(al + bl), *aa = malloc(2 * al),
			*ba = malloc(al + bl);
		memcpy(ab, a, al);
		memcpy(ab + al, b, bl);
		memcpy(aa, a, al);
		memcpy(aa + al, a, al);
		memcpy(ba, b, bl);
		memcpy(ba + bl, a, al);
		cr_assert_eq(seal_try(mode, ab, al + bl, &n), 0);
		cr_assert_eq(n, 2, "in order");
		cr_assert_eq(seal_try(mode, aa, 2 * al, &n), -EBADMSG);
		cr_assert_eq(n, 1, "replayed: only the first");
		cr_assert_eq(seal_try(mode, ba, al + bl, &n), -EBADMSG);
		cr_assert_eq(n, 0, "reordered");
		cr_assert_eq(seal_try(mode, b, bl, &n), -EBADMSG);
		cr_assert_eq(n, 0, "the first dropped");
		cr_assert_eq(seal_try(mode == TW_CHANNEL_ENCRYPT
				      ? TW_CHANNEL_INTEGRITY
				      : TW_CHANNEL_ENCRYPT, a, al, &n),
			     -EBADMSG);
		cr_assert_eq(n, 0, "another mode's keys");

		/* Reflected: the client's own frame sent back to it. */
		struct wire_reader r;
		struct collected c = { 0 };
		const char *why;
		seal_ends_open(&e, mode);
		free(a);
		a = seal_write_frame(e.ctx, 1, data, sizeof(data), false, &al);
		seal_reader(&r, &e.crx);
		cr_assert_eq(feed(&r, a, al, al, &c, &why), -EBADMSG);
		cr_assert_eq(c.n, 0);
		cr_assert(strstr(why, "frame authentication failed"), "%s",
			  why);
		wire_reader_free(&r);
		seal_ends_close(&e);
		free(a);
		free(b);
		free(ab);
		free(aa);
		free(ba);
	}
}

Test(seal, modes_negotiate_to_the_stronger)
{
	enum tw_channel m;

	cr_assert_eq(wire_channel_choose(TW_CHANNEL_NONE, TW_CHANNEL_ENCRYPT),
		     TW_CHANNEL_ENCRYPT);
	cr_assert_eq(wire_channel_choose(TW_CHANNEL_ENCRYPT,
					 TW_CHANNEL_INTEGRITY),
		     TW_CHANNEL_ENCRYPT);
	cr_assert_eq(wire_channel_choose(TW_CHANNEL_NONE, TW_CHANNEL_NONE),
		     TW_CHANNEL_NONE);
	cr_assert(!wire_channel_valid(0));
	cr_assert(!wire_channel_valid(4));
	cr_assert_eq(tw_channel_parse("encrypt", &m), 0);
	cr_assert_eq(m, TW_CHANNEL_ENCRYPT);
	cr_assert_eq(tw_channel_parse("integrity", &m), 0);
	cr_assert_eq(m, TW_CHANNEL_INTEGRITY);
	cr_assert_eq(tw_channel_parse("none", &m), 0);
	cr_assert_eq(m, TW_CHANNEL_NONE);
	cr_assert_eq(tw_channel_parse("tls", &m), -EINVAL);
	cr_assert_str_eq(tw_channel_name(TW_CHANNEL_DEFAULT),
			 tw_channel_name(TW_CHANNEL_DEFAULT_MODE));
}

/* --------------------------------------- sealed connections over loopback */

struct chan_srv {
	int hellos, pushes_sent;
	enum tw_channel seen;       /* wire_conn_channel at HELLO */
};

/* HELLO; PING answered after a MAP_UPDATE push; WRITE echoed with its
 * data copied (even offset) or zero-copy (odd). */
static void chan_on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	struct chan_srv *st = arg;

	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_HELLO) {
		Twinfs__HelloReply hr = TWINFS__HELLO_REPLY__INIT;
		st->hellos++;
		st->seen = wire_conn_channel(c);
		wire_reply(c, &m->hdr, 0, &hr.base, NULL, 0);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_WRITE) {
		Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;
		struct iovec iov = { m->data, m->data_len };

		wr.sub_size = m->data_len;
		if (((Twinfs__Write *)m->body)->offset & 1) {
			struct wire_zdata z = { .base = m->data,
						.len = m->data_len,
						.release = free,
						.arg = wire_msg_take_data(m) };
			cr_assert_eq(wire_reply_z(c, &m->hdr, &wr.base, &z), 0);
		} else {
			wire_reply(c, &m->hdr, 0, &wr.base, &iov, 1);
		}
	} else {
		Twinfs__ClusterMap map = TWINFS__CLUSTER_MAP__INIT;
		map.epoch = 77;
		cr_assert_eq(wire_conn_push(c, TWINFS__MSG_TYPE__MSG_MAP_UPDATE,
					    &map.base), 0);
		st->pushes_sent++;
		wire_reply(c, &m->hdr, 0, m->body, NULL, 0);
	}
	wire_msg_free(m);
}

static void chan_on_push(struct wire_peer *p, struct wire_msg *m, void *arg)
{
	struct cli_state *cs = arg;

	(void)p;
	cr_assert_eq(((Twinfs__ClusterMap *)m->body)->epoch, 77);
	cs->connects += 100;    /* pushes, counted apart from connects */
	wire_msg_free(m);
}

/* A byte relay between a peer and a server, on its own thread, that may
 * change frames on their way: the man in the middle.  Frames are
 * counted per direction; the first two each way are AUTH's, in the
 * clear, and every later one carries a tag when `sealed`. */
struct mitm {
	int listen_fd, port, srv_port;
	bool sealed;
	int flip_c2s, flip_s2c;     /* flip a data byte of that frame (-1 none) */
	bool downgrade;             /* rewrite the modes AUTH states */
	pthread_t thread;
};

/* Forward whole frames from `from` to `to` until either side closes. */
struct mitm_dir {
	int from, to, n, flip;
	bool c2s;
	uint8_t buf[2 << 20];       /* a whole frame of 1 MiB and more */
	size_t have;
};

static bool mitm_pump(struct mitm *x, struct mitm_dir *d)
{
	ssize_t n = read(d->from, d->buf + d->have, sizeof(d->buf) - d->have);
	struct wire_hdr h;

	if (n <= 0)
		return false;
	d->have += (size_t)n;
	for (;;) {
		size_t flen;

		if (d->have < WIRE_HDR_SIZE)
			return true;
		if (wire_hdr_decode(d->buf, &h) < 0)
			return false;
		flen = WIRE_HDR_SIZE + h.msg_len + h.data_len +
		       (x->sealed && d->n >= 2 ? WIRE_TAG_LEN : 0);
		if (flen > sizeof(d->buf))
			return false;   /* (no assert off the test's thread) */
		if (d->have < flen)
			return true;
		if (d->n == d->flip)
			d->buf[flen - WIRE_TAG_LEN - 1] ^= 0x10;
		/* AUTH step 1's modes are the last varints of its body. */
		if (x->downgrade && d->n == 0 && d->c2s &&
		    d->buf[flen - 2] == 0x28)
			d->buf[flen - 1] = TW_CHANNEL_NONE;
		if (x->downgrade && d->n == 0 && !d->c2s &&
		    d->buf[flen - 4] == 0x20)
			d->buf[flen - 3] = TW_CHANNEL_ENCRYPT;
		if (send(d->to, d->buf, flen, MSG_NOSIGNAL) != (ssize_t)flen)
			return false;
		memmove(d->buf, d->buf + flen, d->have - flen);
		d->have -= flen;
		d->n++;
	}
}

static void *mitm_main(void *arg)
{
	struct mitm *x = arg;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)x->srv_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int cfd = accept(x->listen_fd, NULL, NULL);
	int sfd = socket(AF_INET, SOCK_STREAM, 0);
	static struct mitm_dir up, down;

	if (cfd < 0 || sfd < 0 ||
	    connect(sfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return NULL;
	up = (struct mitm_dir){ .from = cfd, .to = sfd, .flip = x->flip_c2s,
				.c2s = true };
	down = (struct mitm_dir){ .from = sfd, .to = cfd,
				  .flip = x->flip_s2c };
	for (;;) {
		struct pollfd p[2] = { { cfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		if (poll(p, 2, 10000) <= 0)
			break;
		if ((p[0].revents && !mitm_pump(x, &up)) ||
		    (p[1].revents && !mitm_pump(x, &down)))
			break;
	}
	close(cfd);
	close(sfd);
	return NULL;
}

static void mitm_start(struct mitm *x, int srv_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	x->srv_port = srv_port;
	x->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(x->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(x->listen_fd, 1), 0);
	cr_assert_eq(getsockname(x->listen_fd, (struct sockaddr *)&a, &al), 0);
	x->port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&x->thread, NULL, mitm_main, x), 0);
}

static void mitm_stop(struct mitm *x)
{
	pthread_join(x->thread, NULL);
	close(x->listen_fd);
}

struct chan_result {
	int status[8];              /* PING, WRITE copied, WRITE zero-copy */
	int pushes;
	enum tw_channel peer_mode, srv_mode;
	int hellos;
};

/* A server with minimum smin and a peer with minimum cmin, both holding
 * the secret, directly or through x: a PING (answered after a push), a
 * 1 MiB WRITE with copied data both ways and one zero-copy both ways. */
static void chan_round(enum tw_channel smin, enum tw_channel cmin,
		       struct mitm *x, struct chan_result *res)
{
	uv_loop_t loop;
	struct wire_server *srv;
	struct chan_srv ss = { 0 };
	struct wire_server_ops ops = { chan_on_request, NULL };
	struct cli_state cs = { 0 };
	struct wire_peer *peer;
	Twinfs__Hello hello;
	Twinfs__Ping ping = TWINFS__PING__INIT;
	Twinfs__Write w0 = TWINFS__WRITE__INIT, w1 = TWINFS__WRITE__INIT;
	static uint8_t big[1 << 20];
	struct iovec iov = { big, sizeof(big) };
	struct cli_call calls[3] = { { &cs, 0, NULL, 0 },
				     { &cs, 1, big, sizeof(big) },
				     { &cs, 2, big, sizeof(big) - 5 } };
	struct wire_zdata z = { .base = big, .len = sizeof(big) - 5 };
	int port;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31 ^ (i >> 13));
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(wire_listen(&loop, "127.0.0.1", 0, &ops, &ss, &srv), 0);
	cr_assert_eq(wire_server_set_secret(srv, "s3cret"), 0);
	cr_assert_eq(wire_server_set_channel(srv, smin), 0);
	port = wire_server_port(srv);
	if (x) {
		mitm_start(x, port);
		port = x->port;
	}
	wire_hello_init(&hello, "test", TWINFS__ROLE__ROLE_ADMIN, 1);
	struct wire_peer_opts po = {
		.host = "127.0.0.1", .port = port, .hello = &hello,
		.secret = "s3cret", .channel = cmin, .on_push = chan_on_push,
		.arg = &cs,
	};
	cr_assert_eq(wire_peer_new(&loop, &po, &peer), 0);
	w1.offset = 1;   /* answered zero-copy */
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
			       NULL, 0, 5000, cli_on_reply, &calls[0]), 0);
	cr_assert_eq(wire_call(peer, TWINFS__MSG_TYPE__MSG_WRITE, &w0.base,
			       &iov, 1, 5000, cli_on_reply, &calls[1]), 0);
	cr_assert_eq(wire_call_z(peer, TWINFS__MSG_TYPE__MSG_WRITE, &w1.base,
				 &z, 5000, cli_on_reply, &calls[2]), 0);
	run_until(&loop, &cs.replies, 3);
	res->peer_mode = wire_peer_channel(peer);
	for (int i = 0; i < 3; i++)
		res->status[i] = cs.status[i];
	res->pushes = cs.connects / 100;
	res->hellos = ss.hellos;
	res->srv_mode = ss.seen;
	wire_peer_free(peer);
	wire_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	if (x)
		mitm_stop(x);
}

/* Every pair of minimums runs the stronger; data, zero-copy data and a
 * push arrive intact in each mode, through an honest relay too. */
Test(seal, loopback_every_mode)
{
	static const enum tw_channel all[] = { TW_CHANNEL_NONE,
		TW_CHANNEL_INTEGRITY, TW_CHANNEL_ENCRYPT };

	for (size_t si = 0; si < 3; si++) {
		for (size_t ci = 0; ci < 3; ci++) {
			struct chan_result r = { 0 };
			enum tw_channel want = all[si] > all[ci] ? all[si]
								 : all[ci];
			struct mitm relay = { .flip_c2s = -1, .flip_s2c = -1,
					      .sealed = want != TW_CHANNEL_NONE };

			chan_round(all[si], all[ci], si == ci ? &relay : NULL,
				   &r);
			for (int i = 0; i < 3; i++)
				cr_assert_eq(r.status[i], 0, "%zu/%zu call %d: %d",
					     si, ci, i, r.status[i]);
			cr_assert_eq(r.pushes, 1);
			cr_assert_eq(r.peer_mode, want, "%zu/%zu", si, ci);
			cr_assert_eq(r.srv_mode, want, "%zu/%zu", si, ci);
		}
	}
}

/* One byte changed after the handshake, either way: the connection is
 * closed, nothing of the frame is delivered, the calls fail. */
Test(seal, tampered_frame_closes_connection)
{
	for (size_t mi = 0; mi < TW_ARRAY_SIZE(seal_modes); mi++) {
		struct chan_result r = { 0 };
		/* c2s frame 2 is the HELLO: the server never sees it. */
		struct mitm hello = { .flip_c2s = 2, .flip_s2c = -1,
				      .sealed = true };
		/* s2c frame 3 is the push before the PING's reply. */
		struct mitm push = { .flip_c2s = -1, .flip_s2c = 3,
				     .sealed = true };

		chan_round(seal_modes[mi], seal_modes[mi], &hello, &r);
		cr_assert_eq(r.hellos, 0);
		for (int i = 0; i < 3; i++)
			cr_assert_lt(r.status[i], 0);
		memset(&r, 0, sizeof(r));
		chan_round(seal_modes[mi], seal_modes[mi], &push, &r);
		cr_assert_eq(r.hellos, 1);
		cr_assert_eq(r.pushes, 0, "the changed push was delivered");
		for (int i = 0; i < 3; i++)
			cr_assert_eq(r.status[i], -ECONNRESET);
	}
}

/* A man in the middle lowers the connecting side's minimum (encrypt ->
 * none, which the server would accept) and raises the choice back in the
 * reply: the server's proof no longer verifies and AUTH fails. */
Test(seal, downgrade_fails_the_handshake)
{
	struct chan_result r = { 0 };
	struct mitm x = { .flip_c2s = -1, .flip_s2c = -1, .downgrade = true,
			  .sealed = false };

	chan_round(TW_CHANNEL_NONE, TW_CHANNEL_ENCRYPT, &x, &r);
	cr_assert_eq(r.hellos, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(r.status[i], -EACCES);
}

/* The server turns sealing on from inside the callback of AUTH step 2,
 * while the frames after it may already sit in the reader's buffer: they
 * must be opened, not taken as clear. */
struct switch_state {
	struct collected c;
	struct wire_reader *r;
	struct wire_seal **rx;
};

static int collect_then_seal(struct wire_msg *m, void *arg)
{
	struct switch_state *st = arg;

	if (st->c.n == 0)
		seal_reader_install(st->r, st->rx);
	return collect(m, &st->c);
}

Test(seal, switch_applies_to_buffered_frames)
{
	const uint8_t data[] = "after the switch";

	for (size_t mi = 0; mi < TW_ARRAY_SIZE(seal_modes); mi++) {
		struct seal_ends e;
		struct wire_reader r;
		struct switch_state st = { .r = &r };
		uint8_t *clear, *sealed, all[4096];
		size_t cl, sl;
		uv_buf_t b;
		const char *why;
		int err;

		seal_ends_open(&e, seal_modes[mi]);
		st.rx = &e.srx;
		Twinfs__Write w = TWINFS__WRITE__INIT;

		clear = wire_frame_build(TWINFS__MSG_TYPE__MSG_WRITE, 0, 0, 1,
					 &w.base, NULL, 0, &cl, &err);
		sealed = seal_write_frame(e.ctx, 2, data, sizeof(data), true,
					  &sl);
		memcpy(all, clear, cl);
		memcpy(all + cl, sealed, sl);
		cr_assert_eq(wire_reader_init(&r), 0);
		wire_reader_alloc(&r, &b);
		memcpy(b.base, all, cl + sl);   /* one read: both frames */
		cr_assert_eq(wire_reader_feed(&r, cl + sl, collect_then_seal,
					      &st, &why), 0, "%s", why);
		cr_assert_eq(st.c.n, 2);
		check_write(st.c.m[1], 2, data, sizeof(data));
		for (int i = 0; i < st.c.n; i++)
			wire_msg_free(st.c.m[i]);
		wire_reader_free(&r);
		seal_ends_close(&e);
		free(clear);
		free(sealed);
	}
}

/* ------------------------------------------------------------ tickets */

static void ticket_fixture(struct wire_ticket *t, uint8_t ktkt[32])
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "lab3");
	t->session = 42;
	t->expiry_ms = 1000000;
	t->read_only = true;
	memset(t->nonce, 0x5a, sizeof(t->nonce));
	cr_assert_eq(wire_ticket_master("s3cret", ktkt), 0);
}

Test(wire_ticket, seal_open_round_trip)
{
	uint8_t ktkt[32], buf[WIRE_TICKET_MAX], ks[32], ks2[32];
	struct wire_ticket t, o;
	size_t len;

	ticket_fixture(&t, ktkt);
	cr_assert_eq(wire_ticket_seal(ktkt, &t, buf, &len, ks), 0);
	cr_assert_eq(len, 36 + 4 + 32);
	cr_assert_eq(buf[0], 1);
	cr_assert_eq(buf[1], 1);
	cr_assert_eq(buf[2], 4);
	cr_assert_eq(memcmp(buf + 36, "lab3", 4), 0);
	cr_assert_eq(wire_ticket_open(ktkt, buf, len, 999999, &o, ks2), 0);
	cr_assert_str_eq(o.name, "lab3");
	cr_assert_eq(o.session, 42);
	cr_assert_eq(o.expiry_ms, 1000000);
	cr_assert(o.read_only);
	cr_assert_eq(memcmp(ks, ks2, 32), 0);
}

Test(wire_ticket, refuses_forged_expired_and_malformed)
{
	uint8_t ktkt[32], other[32], buf[WIRE_TICKET_MAX], ks[32];
	struct wire_ticket t, o;
	size_t len;

	ticket_fixture(&t, ktkt);
	cr_assert_eq(wire_ticket_seal(ktkt, &t, buf, &len, ks), 0);
	cr_assert_eq(wire_ticket_open(ktkt, buf, len, 1000000, &o, ks),
		     -EKEYEXPIRED);
	/* Another cluster secret: the MAC does not match. */
	cr_assert_eq(wire_ticket_master("other", other), 0);
	cr_assert_eq(wire_ticket_open(other, buf, len, 1, &o, ks), -EBADMSG);
	/* Every single bit flipped in the body or the MAC is refused. */
	for (size_t i = 0; i < len; i++) {
		for (int b = 0; b < 8; b++) {
			int rc;

			buf[i] ^= (uint8_t)(1u << b);
			rc = wire_ticket_open(ktkt, buf, len, 1, &o, ks);
			cr_assert(rc == -EBADMSG || rc == -EPROTO,
				  "byte %zu bit %d: %d", i, b, rc);
			buf[i] ^= (uint8_t)(1u << b);
		}
	}
	/* Truncated and extended. */
	for (size_t l = 0; l < len; l++)
		cr_assert_lt(wire_ticket_open(ktkt, buf, l, 1, &o, ks), 0);
	cr_assert_eq(wire_ticket_open(ktkt, buf, len + 1, 1, &o, ks), -EPROTO);
	cr_assert_eq(wire_ticket_open(ktkt, buf, len, 1, &o, ks), 0);
}

Test(wire_ticket, wrap_is_keyed_by_the_client_key)
{
	uint8_t ktkt[32], buf[WIRE_TICKET_MAX], ks[32], w[32], u[32];
	uint8_t key[32], wrong[32];
	struct wire_ticket t;
	size_t len;

	ticket_fixture(&t, ktkt);
	memset(key, 7, sizeof(key));
	memset(wrong, 8, sizeof(wrong));
	cr_assert_eq(wire_ticket_seal(ktkt, &t, buf, &len, ks), 0);
	cr_assert_eq(wire_ticket_wrap(key, 32, buf, len, ks, w), 0);
	cr_assert_neq(memcmp(w, ks, 32), 0);
	cr_assert_eq(wire_ticket_wrap(key, 32, buf, len, w, u), 0);
	cr_assert_eq(memcmp(u, ks, 32), 0);
	cr_assert_eq(wire_ticket_wrap(wrong, 32, buf, len, w, u), 0);
	cr_assert_neq(memcmp(u, ks, 32), 0);
	/* Names are 1..63 bytes. */
	t.name[0] = '\0';
	cr_assert_eq(wire_ticket_seal(ktkt, &t, buf, &len, ks), -EINVAL);
}
