/* http.c - the smallest HTTP/1.x responder that serves GET /metrics on a
 * libuv loop (metrics.h; docs/OPERATIONS.md "Metrics", docs/SECURITY.md).
 *
 * One request per connection: read the request head (request line and
 * headers, at most TW_HTTP_REQ_MAX bytes, within TW_HTTP_TIMEOUT_MS of the
 * accept), answer with "Connection: close", shut the write side down,
 * drop whatever the peer still sends until its EOF (TW_HTTP_LINGER_MS at
 * most: closing with unread bytes would reset the connection and could
 * destroy the answer) and close.  A request body is never parsed.  At
 * most TW_HTTP_CONNS_MAX connections are open; one more is accepted and
 * closed at once, so a burst of scrapers or port scanners costs the
 * daemon nothing but accepts.  Nothing here allocates a size a peer chose: the read buffer
 * is fixed, the answer is the exposition the daemon renders.
 *
 * Not here: keep-alive, chunked encoding, TLS, authentication.  The
 * address is loopback unless the operator configures another one.
 */
#include "metrics.h"
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

/* How long a connection is read and dropped after its answer. */
#define TW_HTTP_LINGER_MS 1000u

struct http_conn {
	uv_tcp_t tcp;                 /* first: the handle's data is the conn */
	struct tw_http *h;
	struct http_conn *next, *prev;
	uv_timer_t timer;             /* the read deadline */
	uv_write_t wreq;
	uv_shutdown_t sreq;
	char *out;                    /* the response, until the write ends */
	size_t rlen;
	bool answered;
	bool draining;                /* answered and shut down: reading to EOF */
	int closing;                  /* handles still to close (tcp, timer) */
	char rbuf[TW_HTTP_REQ_MAX];
};

struct tw_http {
	uv_loop_t *loop;
	uv_tcp_t listener;
	tw_http_render_fn fn;
	void *arg;
	struct http_conn *conns;
	unsigned n_conns;
	unsigned pending_closes;      /* refused handles and the listener */
	bool closing;
	void (*close_cb)(void *arg);
	void *close_arg;
};

/* ------------------------------------------------------------- parsing */

/* The head ends with an empty line: "\r\n\r\n" (or "\n\n" from lax
 * clients). */
static bool head_complete(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return true;
		if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
			return true;
	}
	return false;
}

int tw_http_parse(const char *buf, size_t len, int *status, bool *head)
{
	const char *sp1, *sp2, *eol, *path;
	size_t mlen, plen, vlen;

	*head = false;
	if (!head_complete(buf, len))
		return -EAGAIN;
	eol = memchr(buf, '\n', len);
	sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	if (!sp1) {
		*status = 400;
		return 0;
	}
	sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2) {
		*status = 400;
		return 0;
	}
	mlen = (size_t)(sp1 - buf);
	path = sp1 + 1;
	plen = (size_t)(sp2 - path);
	vlen = (size_t)(eol - sp2 - 1);
	if (vlen && sp2[vlen] == '\r')
		vlen--;
	if (vlen != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1') || mlen == 0 || plen == 0) {
		*status = 400;
		return 0;
	}
	if (mlen == 4 && memcmp(buf, "HEAD", 4) == 0)
		*head = true;
	else if (mlen != 3 || memcmp(buf, "GET", 3) != 0) {
		*status = 405;
		return 0;
	}
	/* /metrics, with or without a query string. */
	if ((plen == 8 || (plen > 8 && path[8] == '?')) &&
	    memcmp(path, "/metrics", 8) == 0)
		*status = 200;
	else
		*status = 404;
	return 0;
}

/* ------------------------------------------------------- connections */

static void maybe_free(struct tw_http *h)
{
	if (!h->closing || h->conns || h->pending_closes)
		return;
	void (*cb)(void *) = h->close_cb;
	void *arg = h->close_arg;

	free(h);
	if (cb)
		cb(arg);
}

static void on_conn_handle_closed(uv_handle_t *hd)
{
	struct http_conn *c = hd->data;
	struct tw_http *h = c->h;

	if (--c->closing > 0)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	h->n_conns--;
	free(c->out);
	free(c);
	maybe_free(h);
}

static void conn_close(struct http_conn *c)
{
	if (c->closing)
		return;
	c->closing = 2;
	uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
	uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_drain_deadline(uv_timer_t *t)
{
	conn_close(t->data);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf);

/* Closing a socket with unread bytes in it sends a reset, which may
 * destroy the answer before the peer read it (a head over the limit, a
 * pipelined request): read and drop until the peer's EOF, for at most
 * TW_HTTP_LINGER_MS. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct http_conn *c = req->data;

	if (status < 0 || c->closing) {
		conn_close(c);
		return;
	}
	c->draining = true;
	c->rlen = 0;
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0 ||
	    uv_timer_start(&c->timer, on_drain_deadline, TW_HTTP_LINGER_MS,
			   0) < 0)
		conn_close(c);
}

static void on_written(uv_write_t *req, int status)
{
	struct http_conn *c = req->data;

	free(c->out);
	c->out = NULL;
	if (status < 0 || c->closing) {
		conn_close(c);
		return;
	}
	c->sreq.data = c;
	if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
		conn_close(c);
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	default: return "Internal Server Error";
	}
}

static void respond(struct http_conn *c, int status, bool head)
{
	struct tw_mx body;
	const char *text = NULL;
	size_t text_len = 0;
	char hdr[256];
	int n;

	c->answered = true;
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_timer_stop(&c->timer);
	tw_mx_init(&body);
	if (status == 200) {
		int rc = c->h->fn(&body, c->h->arg);

		if (rc < 0 || body.err) {
			status = 500;
		} else {
			text = body.buf ? body.buf : "";
			text_len = body.len;
		}
	}
	if (status != 200) {
		text = reason(status);
		text_len = strlen(text);
	}
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %d %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %zu\r\n"
		     "Connection: close\r\n"
		     "%s"
		     "\r\n", status, reason(status),
		     status == 200 ? "text/plain; version=0.0.4; charset=utf-8"
				   : "text/plain; charset=utf-8",
		     text_len + (status == 200 ? 0 : 1),
		     status == 405 ? "Allow: GET, HEAD\r\n" : "");
	size_t total = (size_t)n + (head ? 0 : text_len + (status == 200 ? 0 : 1));

	c->out = malloc(total + 1);
	if (!c->out) {
		tw_mx_free(&body);
		conn_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)n);
	if (!head) {
		if (text_len)
			memcpy(c->out + n, text, text_len);
		if (status != 200)
			c->out[(size_t)n + text_len] = '\n';
	}
	tw_mx_free(&body);
	uv_buf_t b = uv_buf_init(c->out, (unsigned)total);

	c->wreq.data = c;
	if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
		free(c->out);
		c->out = NULL;
		conn_close(c);
	}
}

static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf)
{
	struct http_conn *c = hd->data;

	(void)hint;
	buf->base = c->rbuf + c->rlen;
	buf->len = sizeof(c->rbuf) - c->rlen;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct http_conn *c = st->data;
	bool head;
	int status;

	(void)buf;
	if (n == 0 || c->closing)
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	if (c->draining) {
		c->rlen = 0;
		return;
	}
	if (c->answered)
		return;
	c->rlen += (size_t)n;
	if (tw_http_parse(c->rbuf, c->rlen, &status, &head) == 0)
		respond(c, status, head);
	else if (c->rlen == sizeof(c->rbuf))
		respond(c, 431, false);
}

static void on_deadline(uv_timer_t *t)
{
	struct http_conn *c = t->data;

	if (!c->answered)
		respond(c, 408, false);
}

static void on_refused_closed(uv_handle_t *hd)
{
	struct tw_http *h = hd->data;

	free(hd);
	h->pending_closes--;
	maybe_free(h);
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct tw_http *h = ls->data;
	struct http_conn *c;

	if (status < 0 || h->closing)
		return;
	if (h->n_conns >= TW_HTTP_CONNS_MAX) {
		/* Accept and close: the backlog must not hold it. */
		uv_tcp_t *t = malloc(sizeof(*t));

		if (!t)
			return;
		uv_tcp_init(h->loop, t);
		t->data = h;
		(void)uv_accept(ls, (uv_stream_t *)t);
		h->pending_closes++;
		uv_close((uv_handle_t *)t, on_refused_closed);
		tw_log_rl(TW_LOG_WARN, "metrics: %u HTTP connections open: "
			  "closing a new one", h->n_conns);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->h = h;
	uv_tcp_init(h->loop, &c->tcp);
	uv_timer_init(h->loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	h->n_conns++;
	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_deadline, TW_HTTP_TIMEOUT_MS, 0);
}

/* ------------------------------------------------------------ listener */

static void free_failed(uv_handle_t *hd)
{
	free(hd->data);
}

int tw_http_listen(uv_loop_t *loop, const char *host, int port,
		   tw_http_render_fn fn, void *arg, struct tw_http **out)
{
	struct sockaddr_storage ss;
	struct tw_http *h;
	int rc;

	rc = tw_listen_addr(host, port, &ss);
	if (rc < 0)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->loop = loop;
	h->fn = fn;
	h->arg = arg;
	uv_tcp_init(loop, &h->listener);
	h->listener.data = h;
	rc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&h->listener, 64, on_connection);
	if (rc < 0) {
		uv_close((uv_handle_t *)&h->listener, free_failed);
		return rc;
	}
	*out = h;
	return 0;
}

int tw_http_port(const struct tw_http *h)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len) < 0)
		return -EINVAL;
	return tw_sockaddr_port(&ss);
}

static void on_listener_closed(uv_handle_t *hd)
{
	struct tw_http *h = hd->data;

	h->pending_closes--;
	maybe_free(h);
}

void tw_http_close(struct tw_http *h, void (*cb)(void *arg), void *arg)
{
	h->closing = true;
	h->close_cb = cb;
	h->close_arg = arg;
	h->pending_closes++;
	for (struct http_conn *c = h->conns; c; c = c->next)
		conn_close(c);
	uv_close((uv_handle_t *)&h->listener, on_listener_closed);
}
