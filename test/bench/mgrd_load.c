/* mgrd_load.c - drive one mgrd directly over the wire as a client (no FUSE,
 * no iods: a create only decides a layout), to measure the namespace at
 * scale (test/bench/mgrd_scale.sh).
 *
 *   mgrd_load run  HOST PORT N [PER_DIR] [DEPTH] [PID] [CLUSTER]
 *       One session; N empty regular files, PER_DIR (default 1000) per
 *       directory under the root (directory d%u is made just before its
 *       first file f%u), DEPTH requests in flight (default 64).  At each
 *       checkpoint (10 k, 100 k, 1 M, 10 M and N) it prints one line:
 *       the create rate over the last min(checkpoint, 10 k) creates, the
 *       rate of 10 k LOOKUPs of random names created so far (what stat(2)
 *       of a path costs mgrd), and, with PID (mgrd's), mgrd's VmRSS and
 *       its growth since the start per inode made.
 *   mgrd_load ping HOST PORT [TIMEOUT_S] [CLUSTER]
 *       Until an mgrd answers a GETATTR of the root (retrying every 10 ms
 *       up to TIMEOUT_S, default 600): prints the seconds it took.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common.h"
#include "wire.h"

#define RING 4096u                  /* > DEPTH: seqs whose reply came */
#define WINDOW 10000u               /* creates / lookups per measurement */

struct ld {
	uv_loop_t *loop;
	struct wire_peer *peer;
	uint64_t session, next_seq, acked;
	uint8_t done[RING];
	uint64_t n, per_dir, ndirs;
	uint32_t depth, inflight;
	int pid;
	uint64_t *dir_ino;          /* [d]: 0 = not made yet */
	uint8_t *dir_state;         /* 0 none, 1 asked, 2 made */
	uint64_t next;              /* next file index to create */
	uint64_t cps[8];
	uint32_t ncps, cp;          /* checkpoints, the next one */
	uint64_t win_start;         /* file index the create window began at */
	uint64_t t0;
	bool stat_phase, started, failed;
	uint64_t stat_sent, stat_done, stat_base;   /* files existing */
	uint64_t rnd;
	long rss0_kb;
	uint64_t errors;
	double create_rate;
};

static long rss_kb(int pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* acked_seq: every seq up to it has its reply (mgrd drops those). */
static void ctx_fill(struct ld *l, Twinfs__Ctx *ctx, uint64_t *seq)
{
	*seq = l->next_seq++;
	l->done[*seq % RING] = 0;
	ctx->session = l->session;
	ctx->seq = *seq;
	ctx->acked_seq = l->acked;
	ctx->umask = 022;
}

static void seq_done(struct ld *l, uint64_t seq)
{
	l->done[seq % RING] = 1;
	while (l->acked + 1 < l->next_seq && l->done[(l->acked + 1) % RING])
		l->acked++;
}

struct call {
	struct ld *l;
	uint64_t seq;
	uint64_t dir;               /* mkdir: its index; else UINT64_MAX */
};

static void pump(struct ld *l);

static void on_reply(int status, struct wire_msg *reply, void *arg)
{
	struct call *c = arg;
	struct ld *l = c->l;

	l->inflight--;
	seq_done(l, c->seq);
	if (status < 0 && l->errors++ < 5)
		fprintf(stderr, "mgrd_load: request %" PRIu64 ": %s\n", c->seq,
			strerror(-status));
	if (status < 0 && (status == -ECONNRESET || status == -ETIMEDOUT ||
			   status == -ECONNREFUSED || status == -ECANCELED))
		l->failed = true;
	if (c->dir != UINT64_MAX) {
		const Twinfs__Entry *e = reply ? (const void *)reply->body
					       : NULL;

		if (status == 0 && e->attr) {
			l->dir_ino[c->dir] = e->attr->ino;
			l->dir_state[c->dir] = 2;
		} else {
			l->failed = true;
		}
	} else if (l->stat_phase) {
		l->stat_done++;
	}
	if (reply)
		wire_msg_free(reply);
	free(c);
	pump(l);
}

static int send_call(struct ld *l, uint16_t type, ProtobufCMessage *body,
		     uint64_t seq, uint64_t dir)
{
	struct call *c = malloc(sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->l = l;
	c->seq = seq;
	c->dir = dir;
	if (wire_call(l->peer, type, body, NULL, 0, 60000, on_reply, c) < 0) {
		free(c);
		return -EIO;
	}
	l->inflight++;
	return 0;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double secs_since(uint64_t t0)
{
	return (double)(tw_now_ns() - t0) / 1e9;
}

static void finish(struct ld *l)
{
	printf("done: files=%" PRIu64 " dirs=%" PRIu64 " errors=%" PRIu64
	       "\n", l->next, (l->next + l->per_dir - 1) / l->per_dir,
	       l->errors);
	fflush(stdout);
	wire_peer_free(l->peer);
	l->peer = NULL;
}

/* The checkpoint's stat window ended: report, go on creating. */
static void report(struct ld *l)
{
	uint64_t cp = l->cps[l->cp];
	double stat_rate = (double)WINDOW / secs_since(l->t0);
	long rss = rss_kb(l->pid);
	uint64_t inodes = cp + (cp + l->per_dir - 1) / l->per_dir;

	printf("checkpoint files=%" PRIu64 " create_rate=%.0f/s "
	       "stat_rate=%.0f/s", cp, l->create_rate, stat_rate);
	if (rss >= 0)
		printf(" rss_kb=%ld bytes_per_inode=%.0f", rss,
		       (double)(rss - l->rss0_kb) * 1024.0 / (double)inodes);
	printf("\n");
	fflush(stdout);
	l->stat_phase = false;
	l->cp++;
	if (l->cp == l->ncps) {
		finish(l);
		return;
	}
	l->win_start = UINT64_MAX;
	pump(l);
}

static void pump(struct ld *l)
{
	if (!l->peer)
		return;
	if (l->failed) {
		if (l->inflight == 0) {
			fprintf(stderr, "mgrd_load: giving up after errors\n");
			finish(l);
		}
		return;
	}
	if (l->stat_phase) {
		while (l->stat_sent < WINDOW && l->inflight < l->depth) {
			Twinfs__Lookup q = TWINFS__LOOKUP__INIT;
			Twinfs__Ctx ctx = TWINFS__CTX__INIT;
			uint64_t i = xorshift(&l->rnd) % l->stat_base, seq;
			char name[32];

			snprintf(name, sizeof(name), "f%" PRIu64, i);
			ctx_fill(l, &ctx, &seq);
			q.ctx = &ctx;
			q.parent = l->dir_ino[i / l->per_dir];
			q.name = name;
			if (send_call(l, TWINFS__MSG_TYPE__MSG_LOOKUP, &q.base,
				      seq, UINT64_MAX) < 0) {
				l->failed = true;
				return;
			}
			l->stat_sent++;
		}
		if (l->stat_done == WINDOW && l->inflight == 0)
			report(l);
		return;
	}
	while (l->inflight < l->depth && l->cp < l->ncps) {
		uint64_t cp = l->cps[l->cp];
		uint64_t w = TW_MIN(cp, (uint64_t)WINDOW);
		uint64_t d = l->next / l->per_dir;

		/* Measurement windows start and end drained. */
		if (l->next == cp - w && l->win_start != l->next) {
			if (l->inflight)
				return;
			l->win_start = l->next;
			l->t0 = tw_now_ns();
		}
		if (l->next == cp) {
			if (l->inflight)
				return;
			l->create_rate = (double)w / secs_since(l->t0);
			l->stat_phase = true;
			l->stat_sent = l->stat_done = 0;
			l->stat_base = cp;
			l->t0 = tw_now_ns();
			pump(l);
			return;
		}
		if (l->dir_state[d] != 2) {
			Twinfs__Mkdir q = TWINFS__MKDIR__INIT;
			Twinfs__Ctx ctx = TWINFS__CTX__INIT;
			char name[32];
			uint64_t seq;

			if (l->dir_state[d] == 1)
				return;     /* its reply pumps again */
			snprintf(name, sizeof(name), "d%" PRIu64, d);
			ctx_fill(l, &ctx, &seq);
			q.ctx = &ctx;
			q.parent = 1;
			q.name = name;
			q.mode = 0755;
			l->dir_state[d] = 1;
			if (send_call(l, TWINFS__MSG_TYPE__MSG_MKDIR, &q.base,
				      seq, d) < 0)
				l->failed = true;
			return;
		}
		{
			Twinfs__Mknod q = TWINFS__MKNOD__INIT;
			Twinfs__Ctx ctx = TWINFS__CTX__INIT;
			char name[32];
			uint64_t seq;

			snprintf(name, sizeof(name), "f%" PRIu64, l->next);
			ctx_fill(l, &ctx, &seq);
			q.ctx = &ctx;
			q.parent = l->dir_ino[d];
			q.name = name;
			q.mode = S_IFREG | 0644;
			if (send_call(l, TWINFS__MSG_TYPE__MSG_MKNOD, &q.base,
				      seq, UINT64_MAX) < 0) {
				l->failed = true;
				return;
			}
			l->next++;
		}
	}
}

static void on_connect(struct wire_peer *p, int status,
		       const Twinfs__HelloReply *reply, void *arg)
{
	struct ld *l = arg;

	(void)p;
	if (status < 0) {
		fprintf(stderr, "mgrd_load: connect: %s\n", strerror(-status));
		if (!l->started) {
			l->failed = true;
			finish(l);
		}
		return;
	}
	if (l->started)
		return;
	l->started = true;
	l->session = reply ? reply->session_id : 0;
	if (l->session == 0) {
		fprintf(stderr, "mgrd_load: no session\n");
		l->failed = true;
		finish(l);
		return;
	}
	l->rss0_kb = rss_kb(l->pid);
	printf("start: session=%" PRIu64 " rss_kb=%ld\n", l->session,
	       l->rss0_kb);
	fflush(stdout);
	pump(l);
}

static int do_run(const char *host, int port, uint64_t n, uint64_t per_dir,
		  uint32_t depth, int pid, const char *cluster)
{
	static const uint64_t fixed[] = { 10000, 100000, 1000000, 10000000 };
	struct ld l = { 0 };
	struct wire_peer_opts o = { 0 };
	Twinfs__Hello hello;
	int rc;

	if (n == 0 || per_dir == 0 || depth == 0 || depth >= RING / 2)
		return 2;
	l.loop = uv_default_loop();
	l.n = n;
	l.per_dir = per_dir;
	l.depth = depth;
	l.pid = pid;
	l.next_seq = 1;
	l.rnd = 0x9e3779b97f4a7c15ull;
	l.win_start = UINT64_MAX;
	l.ndirs = (n + per_dir - 1) / per_dir;
	l.dir_ino = calloc(l.ndirs, sizeof(*l.dir_ino));
	l.dir_state = calloc(l.ndirs, 1);
	if (!l.dir_ino || !l.dir_state)
		return 1;
	for (size_t i = 0; i < TW_ARRAY_SIZE(fixed); i++)
		if (fixed[i] < n)
			l.cps[l.ncps++] = fixed[i];
	l.cps[l.ncps++] = n;
	wire_hello_init(&hello, cluster, TWINFS__ROLE__ROLE_CLIENT,
			tw_now_ns());
	o.host = host;
	o.port = port;
	o.hello = &hello;
	o.on_connect = on_connect;
	o.arg = &l;
	rc = wire_peer_new(l.loop, &o, &l.peer);
	if (rc < 0) {
		fprintf(stderr, "mgrd_load: %s\n", strerror(-rc));
		return 1;
	}
	wire_peer_connect(l.peer);
	uv_run(l.loop, UV_RUN_DEFAULT);
	uv_loop_close(l.loop);
	free(l.dir_ino);
	free(l.dir_state);
	return l.failed || l.errors ? 1 : 0;
}

static int do_ping(const char *host, int port, double timeout_s,
		   const char *cluster)
{
	uint64_t t0 = tw_now_ns();
	Twinfs__Hello hello;

	wire_hello_init(&hello, cluster, TWINFS__ROLE__ROLE_CLIENT,
			tw_now_ns());
	while (secs_since(t0) < timeout_s) {
		Twinfs__Getattr q = TWINFS__GETATTR__INIT;
		Twinfs__Ctx ctx = TWINFS__CTX__INIT;
		struct wire_msg *reply = NULL;
		struct wire_sync *s;
		int rc = wire_sync_open2(host, port, &hello, NULL,
					 TW_CHANNEL_DEFAULT, 1000, false, &s);

		if (rc == 0) {
			q.ctx = &ctx;
			q.ino = 1;
			rc = wire_sync_call(s, TWINFS__MSG_TYPE__MSG_GETATTR,
					    &q.base, NULL, 0, &reply);
			if (reply)
				wire_msg_free(reply);
			wire_sync_close(s);
			if (rc == 0) {
				printf("serving after %.3f s\n",
				       secs_since(t0));
				return 0;
			}
		}
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	fprintf(stderr, "mgrd_load: not serving after %.0f s\n", timeout_s);
	return 1;
}

int main(int argc, char **argv)
{
	tw_log_init("mgrd_load", TW_LOG_WARN);
	if (argc >= 5 && strcmp(argv[1], "run") == 0)
		return do_run(argv[2], atoi(argv[3]),
			      strtoull(argv[4], NULL, 0),
			      argc > 5 ? strtoull(argv[5], NULL, 0) : 1000,
			      argc > 6 ? (uint32_t)atoi(argv[6]) : 64,
			      argc > 7 ? atoi(argv[7]) : 0,
			      argc > 8 ? argv[8] : "twinfs");
	if (argc >= 4 && strcmp(argv[1], "ping") == 0)
		return do_ping(argv[2], atoi(argv[3]),
			       argc > 4 ? atof(argv[4]) : 600,
			       argc > 5 ? argv[5] : "twinfs");
	fprintf(stderr, "usage: mgrd_load run HOST PORT N [PER_DIR] [DEPTH] "
		"[PID] [CLUSTER]\n       mgrd_load ping HOST PORT "
		"[TIMEOUT_S] [CLUSTER]\n");
	return 2;
}
