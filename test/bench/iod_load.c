/* iod_load.c - drive one twin group directly over the wire, for the
 * journal's end-to-end drills and measurements (no FUSE client needed).
 *
 *   iod_load write  HOST PORT INO SIZE [DEPTH] [BS] [CLUSTER]
 *       Sequential WRITEs of subfile (INO, column 0) of a file striped over
 *       group 0 only, BS bytes each (default 1 MiB), DEPTH in flight
 *       (default 8), then one FSYNC.  The bytes are a function of (INO,
 *       offset) (pattern below).  Errors do not stop it: it prints the
 *       acknowledged prefix and every failed range, and the rate in MB/s
 *       (acknowledged bytes / time until the last reply, FSYNC included).
 *       With IOD_LOAD_SYNC=1 in the environment every WRITE carries
 *       Write.sync (O_SYNC: answered once synced on both twins); the
 *       mean latency per write is printed too.
 *   iod_load check  HOST PORT INO SIZE [CLUSTER]
 *       CHECKSUM of (INO, 0) on that iod in 1 MiB regions, compared with
 *       the pattern: prints the regions that differ and "check: OK" when
 *       the first SIZE bytes are all as written.
 *
 * HOST:PORT must be the subfile's primary for writes (iod 1 for even INO,
 * iod 2 for odd, while both are up); check may ask either twin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "wire.h"

static void pattern(uint64_t ino, uint64_t off, uint8_t *buf, size_t len)
{
	/* 8-byte words; off is a multiple of 8 here */
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = ((off + i) / 8 + 1) * 0x9e3779b97f4a7c15ull ^ ino;

		memcpy(buf + i, &w, TW_MIN((size_t)8, len - i));
	}
}

struct ctx {
	uv_loop_t *loop;
	struct wire_peer *peer;
	uint64_t ino, size, bs, next, acked_bytes;
	uint64_t epoch;
	int depth, inflight;
	uint8_t *buf;
	uint64_t t0, t_end;
	bool fsync_sent, done, sync;
	uint64_t n_acked;
	int errors;
	uint8_t *res;               /* per request: 1 acknowledged, 2 failed */
};

static void issue(struct ctx *c);

static void on_write(int status, struct wire_msg *reply, void *arg)
{
	struct ctx *c = *(struct ctx **)arg;
	uint64_t idx = (uint64_t)(uintptr_t)((struct ctx **)arg)[1];

	free(arg);
	if (reply)
		wire_msg_free(reply);
	c->inflight--;
	if (status == 0) {
		c->res[idx] = 1;
		c->n_acked++;
		c->acked_bytes += TW_MIN(c->bs, c->size - idx * c->bs);
	} else {
		c->res[idx] = 2;
		if (c->errors++ < 5)
			fprintf(stderr, "write at %" PRIu64 ": %s\n",
				idx * c->bs, strerror(-status));
	}
	issue(c);
}

static void on_fsync(int status, struct wire_msg *reply, void *arg)
{
	struct ctx *c = arg;

	if (reply)
		wire_msg_free(reply);
	if (status < 0)
		fprintf(stderr, "fsync: %s\n", strerror(-status));
	c->t_end = tw_now_ns();
	c->done = true;
	wire_peer_free(c->peer);
}

static void issue(struct ctx *c)
{
	uint32_t groups[1] = { 0 };

	while (c->inflight < c->depth && c->next < c->size) {
		Twinfs__Write w = TWINFS__WRITE__INIT;
		Twinfs__Layout l = TWINFS__LAYOUT__INIT;
		uint64_t len = TW_MIN(c->bs, c->size - c->next);
		struct iovec iov;
		void **arg = malloc(2 * sizeof(void *));

		l.stripe_size = 1u << 20;
		l.stripe_count = 1;
		l.n_groups = 1;
		l.groups = groups;
		w.ino = c->ino;
		w.column = 0;
		w.offset = c->next;
		w.epoch = c->epoch;
		w.sync = c->sync;
		w.layout = &l;
		pattern(c->ino, c->next, c->buf, len);
		iov.iov_base = c->buf;
		iov.iov_len = len;
		arg[0] = c;
		arg[1] = (void *)(uintptr_t)(c->next / c->bs);
		if (wire_call(c->peer, TWINFS__MSG_TYPE__MSG_WRITE, &w.base,
			      &iov, 1, 30000, on_write, arg) < 0) {
			fprintf(stderr, "wire_call failed\n");
			exit(1);
		}
		c->inflight++;
		c->next += len;
	}
	if (c->inflight == 0 && c->next >= c->size && !c->fsync_sent) {
		Twinfs__Fsync f = TWINFS__FSYNC__INIT;

		f.ino = c->ino;
		f.epoch = c->epoch;
		c->fsync_sent = true;
		wire_call(c->peer, TWINFS__MSG_TYPE__MSG_FSYNC, &f.base, NULL,
			  0, 30000, on_fsync, c);
	}
}

static void on_connect(struct wire_peer *p, int status,
		       const Twinfs__HelloReply *reply, void *arg)
{
	struct ctx *c = arg;

	if (status < 0) {
		fprintf(stderr, "connect: %s\n", strerror(-status));
		return;
	}
	if (c->t0 == 0) {
		c->epoch = reply ? reply->epoch : 0;
		c->t0 = tw_now_ns();
		issue(c);
	}
}

static int do_write(const char *host, int port, uint64_t ino, uint64_t size,
		    int depth, uint64_t bs, const char *cluster)
{
	struct ctx c = { 0 };
	Twinfs__Hello hello;
	struct wire_peer_opts o = { 0 };
	uint64_t nreq = (size + bs - 1) / bs, prefix = 0;

	c.loop = uv_default_loop();
	c.ino = ino;
	c.size = size;
	c.bs = bs;
	c.depth = depth;
	c.buf = malloc(bs);
	c.res = calloc(nreq + 1, 1);
	c.sync = getenv("IOD_LOAD_SYNC") && strcmp(getenv("IOD_LOAD_SYNC"), "1") == 0;
	wire_hello_init(&hello, cluster, TWINFS__ROLE__ROLE_CLIENT, 1);
	o.host = host;
	o.port = port;
	o.hello = &hello;
	o.on_connect = on_connect;
	o.arg = &c;
	o.max_inflight_bytes = (uint64_t)depth * bs + (1u << 20);
	if (wire_peer_new(c.loop, &o, &c.peer) < 0)
		return 1;
	wire_peer_connect(c.peer);
	uv_run(c.loop, UV_RUN_DEFAULT);
	while (prefix < nreq && c.res[prefix] == 1)
		prefix++;
	printf("acked_prefix=%" PRIu64 " bytes\n",
	       TW_MIN(prefix * bs, size));
	for (uint64_t i = 0; i < nreq; i++)
		if (c.res[i] != 1)
			printf("failed: %" PRIu64 "+%" PRIu64 "\n", i * bs,
			       TW_MIN(bs, size - i * bs));
	if (c.t_end > c.t0)
		printf("rate=%.1f MB/s (%" PRIu64 " bytes acknowledged in "
		       "%.2f s, fsync included)\n",
		       (double)c.acked_bytes / 1e6 /
		       ((double)(c.t_end - c.t0) / 1e9),
		       c.acked_bytes, (double)(c.t_end - c.t0) / 1e9);
	if (c.t_end > c.t0 && c.n_acked)
		printf("writes=%" PRIu64 " %s, %.3f ms per write at depth %d\n",
		       c.n_acked, c.sync ? "O_SYNC" : "plain",
		       (double)(c.t_end - c.t0) / 1e6 / (double)c.n_acked *
		       depth, depth);
	free(c.buf);
	free(c.res);
	return c.errors ? 2 : 0;
}

static int do_check(const char *host, int port, uint64_t ino, uint64_t size,
		    const char *cluster)
{
	Twinfs__Hello hello;
	Twinfs__Checksum q = TWINFS__CHECKSUM__INIT;
	struct wire_sync *s;
	struct wire_msg *reply = NULL;
	uint8_t *buf = malloc(1u << 20);
	int rc, bad = 0;

	wire_hello_init(&hello, cluster, TWINFS__ROLE__ROLE_ADMIN, 1);
	rc = wire_sync_open(host, port, &hello, NULL, TW_CHANNEL_DEFAULT,
			    30000, &s);
	if (rc < 0) {
		fprintf(stderr, "connect: %s\n", strerror(-rc));
		return 1;
	}
	q.ino = ino;
	q.column = 0;
	q.region_size = 1u << 20;
	rc = wire_sync_call(s, TWINFS__MSG_TYPE__MSG_CHECKSUM, &q.base, NULL,
			    0, &reply);
	if (rc < 0) {
		fprintf(stderr, "checksum: %s\n", strerror(-rc));
		return 1;
	}
	const Twinfs__ChecksumReply *r = (const void *)reply->body;

	printf("subfile size %" PRIu64 ", %zu regions\n", r->size, r->n_crcs);
	if (r->size < size) {
		printf("check: subfile is shorter than %" PRIu64 "\n", size);
		bad++;
	}
	for (uint64_t k = 0; k * (1u << 20) < size; k++) {
		uint64_t off = k << 20;
		uint64_t len = TW_MIN((uint64_t)1 << 20, r->size - off);

		if (off >= r->size || k >= r->n_crcs)
			break;
		pattern(ino, off, buf, len);
		if (tw_crc32c(0, buf, len) != r->crcs[k]) {
			if (bad++ < 10)
				printf("region %" PRIu64 " (offset %" PRIu64
				       ") differs\n", k, off);
		}
	}
	printf("check: %s\n", bad ? "FAILED" : "OK");
	wire_msg_free(reply);
	wire_sync_close(s);
	free(buf);
	return bad ? 2 : 0;
}

int main(int argc, char **argv)
{
	tw_log_init("iod_load", TW_LOG_WARN);
	if (argc >= 6 && strcmp(argv[1], "write") == 0) {
		uint64_t size, bs = 1u << 20;

		tw_parse_size(argv[5], &size);
		if (argc > 7)
			tw_parse_size(argv[7], &bs);
		return do_write(argv[2], atoi(argv[3]),
				strtoull(argv[4], NULL, 0), size,
				argc > 6 ? atoi(argv[6]) : 8, bs,
				argc > 8 ? argv[8] : "twinfs");
	}
	if (argc >= 6 && strcmp(argv[1], "check") == 0) {
		uint64_t size;

		tw_parse_size(argv[5], &size);
		return do_check(argv[2], atoi(argv[3]),
				strtoull(argv[4], NULL, 0), size,
				argc > 6 ? argv[6] : "twinfs");
	}
	fprintf(stderr, "usage: iod_load write HOST PORT INO SIZE [DEPTH] [BS] "
		"[CLUSTER]\n       iod_load check HOST PORT INO SIZE "
		"[CLUSTER]\n");
	return 2;
}
