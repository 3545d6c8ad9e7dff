/* wire_sync.c - blocking request/reply on a private libuv loop, for the CLI
 * and tests.  Not for daemons or the FUSE client (their threads must never
 * block on the network).  Every call has a deadline: nothing here can hang.
 */
#include <errno.h>
#include <stdlib.h>

#include "common.h"
#include "wire_int.h"

struct wire_sync {
	uv_loop_t loop;
	struct wire_peer *peer;
	uint32_t timeout_ms;
};

struct sync_result {
	bool done;
	int status;
	struct wire_msg *reply;
};

static void on_reply(int status, struct wire_msg *reply, void *arg)
{
	struct sync_result *r = arg;

	r->done = true;
	r->status = status;
	r->reply = reply;
}

void wire_sync_set_timeout(struct wire_sync *s, uint32_t timeout_ms)
{
	s->timeout_ms = timeout_ms ? timeout_ms : 10000;
}

int wire_sync_call(struct wire_sync *s, uint16_t type,
		   const ProtobufCMessage *body, const struct iovec *iov,
		   int niov, struct wire_msg **reply)
{
	struct sync_result r = { 0 };
	int rc;

	rc = wire_call(s->peer, type, body, iov, niov, s->timeout_ms,
		       on_reply, &r);
	if (rc < 0)
		return rc;
	while (!r.done)
		uv_run(&s->loop, UV_RUN_ONCE);
	if (r.status < 0) {
		wire_msg_free(r.reply);
		return r.status;
	}
	if (reply)
		*reply = r.reply;
	else
		wire_msg_free(r.reply);
	return r.status;
}

int wire_sync_open(const char *host, int port, const Twinfs__Hello *hello,
		   const char *secret, enum tw_channel channel,
		   uint32_t timeout_ms, struct wire_sync **out)
{
	return wire_sync_open2(host, port, hello, secret, channel, timeout_ms,
			       true, out);
}

int wire_sync_open2(const char *host, int port, const Twinfs__Hello *hello,
		    const char *secret, enum tw_channel channel,
		    uint32_t timeout_ms, bool ping_first, struct wire_sync **out)
{
	struct wire_peer_opts o = {
		.host = host, .port = port, .hello = hello, .secret = secret,
		.channel = channel,
	};
	struct wire_sync *s = calloc(1, sizeof(*s));
	Twinfs__Ping ping = TWINFS__PING__INIT;
	int rc;

	if (!s)
		return -ENOMEM;
	s->timeout_ms = timeout_ms ? timeout_ms : 10000;
	rc = uv_loop_init(&s->loop);
	if (rc < 0) {
		free(s);
		return rc;
	}
	rc = wire_peer_new(&s->loop, &o, &s->peer);
	if (rc < 0) {
		uv_loop_close(&s->loop);
		free(s);
		return rc;
	}
	/* A PING proves the connection and the HELLO exchange; without it
	 * the first call does. */
	rc = ping_first ? wire_sync_call(s, TWINFS__MSG_TYPE__MSG_PING,
					 &ping.base, NULL, 0, NULL) : 0;
	if (rc < 0) {
		wire_sync_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void wire_sync_close(struct wire_sync *s)
{
	if (!s)
		return;
	wire_peer_free(s->peer);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	uv_loop_close(&s->loop);
	free(s);
}
