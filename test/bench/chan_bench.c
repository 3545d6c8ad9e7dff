/* chan_bench.c - what protecting frames costs (proto/FORMAT.md "Channel
 * protection"): every channel mode against none, in one run, over a real
 * wire_listen server and wire_peer on loopback.
 *
 *   chan_bench [--quick] [--runs N] [--secs S] [--out FILE.tsv]
 *
 * The server runs its own loop on a second thread (as a daemon would be a
 * second process), holding the cluster secret with minimum "none"; the peer
 * holds it too and states each mode as its minimum, so the connection runs
 * that mode.  Workloads, each for S seconds (default 2, --quick 0.2):
 *
 *   seq_write_1m   WRITEs of 1 MiB, zero-copy (wire_call_z), 8 in flight
 *   seq_read_1m    READs answered with 1 MiB, zero-copy (wire_reply_z)
 *   write_4k_qd1   WRITEs of 4 KiB, one at a time (the round trip)
 *   read_4k_qd1    READs of 4 KiB, one at a time
 *   write_4k_qd16  WRITEs of 4 KiB, 16 in flight (CPU, not latency, bound)
 *
 * plus, with no socket at all, the AEAD alone on 1 MiB frames: this
 * module's integrity (GMAC) and encrypt (AES-256-GCM) seal and open, and
 * for comparison HMAC-SHA256 and ChaCha20-Poly1305 from the same library.
 *
 * Each figure is the median of N runs (default 3, --quick 1), modes
 * interleaved within a run.  Prints a table with each mode's ratio to none;
 * --out writes TSV: mode, workload, value, unit, ratio_to_none, and the
 * CPU seconds of the process (both ends) per GiB moved for the 1 MiB
 * workloads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "wire.h"
#include "../../proto/wire_int.h"

#define BIG (1u << 20)
#define SECRET "bench-secret"
#define MAX_RUNS 15

static uint8_t big[BIG];

/* ---------------------------------------------------------- the server */

struct srv {
	uv_loop_t loop;
	uv_async_t stop;
	struct wire_server *ws;
	pthread_t thread;
};

static void nop_release(void *arg)
{
	(void)arg;
}

static void srv_on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	(void)arg;
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_HELLO: {
		Twinfs__HelloReply hr = TWINFS__HELLO_REPLY__INIT;
		wire_reply(c, &m->hdr, 0, &hr.base, NULL, 0);
		break;
	}
	case TWINFS__MSG_TYPE__MSG_READ: {
		Twinfs__ReadReply rr = TWINFS__READ_REPLY__INIT;
		struct wire_zdata z = {
			.base = big,
			.len = TW_MIN(((Twinfs__Read *)m->body)->length, BIG),
			.release = nop_release,
		};
		if (wire_reply_z(c, &m->hdr, &rr.base, &z) < 0)
			wire_reply(c, &m->hdr, -EIO, NULL, NULL, 0);
		break;
	}
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;
		wr.sub_size = m->data_len;
		wire_reply(c, &m->hdr, 0, &wr.base, NULL, 0);
		break;
	}
	default:
		wire_reply(c, &m->hdr, -EOPNOTSUPP, NULL, NULL, 0);
	}
	wire_msg_free(m);
}

static void srv_stop(uv_async_t *a)
{
	struct srv *s = a->data;

	wire_server_close(s->ws, NULL, NULL);
	uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;

	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

static int srv_start(struct srv *s)
{
	static const struct wire_server_ops ops = { srv_on_request, NULL };
	int rc;

	rc = uv_loop_init(&s->loop);
	if (rc == 0)
		rc = wire_listen(&s->loop, "127.0.0.1", 0, &ops, s, &s->ws);
	if (rc == 0)
		rc = wire_server_set_secret(s->ws, SECRET);
	if (rc == 0)
		rc = wire_server_set_channel(s->ws, TW_CHANNEL_NONE);
	if (rc == 0)
		rc = uv_async_init(&s->loop, &s->stop, srv_stop);
	if (rc < 0)
		return rc;
	s->stop.data = s;
	return -pthread_create(&s->thread, NULL, srv_main, s);
}

/* ------------------------------------------------------------ the peer */

struct load {
	uv_loop_t *loop;
	struct wire_peer *peer;
	uint16_t type;              /* WRITE or READ */
	uint32_t size;              /* data per request */
	int depth, inflight;
	uint64_t t_end;             /* ns: issue nothing after */
	uint64_t ops, bytes;
	int errors;
};

static void load_issue(struct load *l);

static void on_reply(int status, struct wire_msg *m, void *arg)
{
	struct load *l = arg;

	l->inflight--;
	if (status < 0) {
		if (l->errors++ == 0)
			fprintf(stderr, "chan_bench: %s failed: %s\n",
				wire_type_name(l->type), strerror(-status));
	} else {
		l->ops++;
		l->bytes += l->size;
	}
	wire_msg_free(m);
	load_issue(l);
}

static void load_issue(struct load *l)
{
	while (l->inflight < l->depth && !l->errors &&
	       tw_now_ns() < l->t_end) {
		int rc;

		if (l->type == TWINFS__MSG_TYPE__MSG_WRITE) {
			Twinfs__Write w = TWINFS__WRITE__INIT;
			struct wire_zdata z = { .base = big, .len = l->size,
						.release = nop_release };
			rc = wire_call_z(l->peer, l->type, &w.base, &z, 10000,
					 on_reply, l);
		} else {
			Twinfs__Read r = TWINFS__READ__INIT;
			r.length = l->size;
			rc = wire_call(l->peer, l->type, &r.base, NULL, 0,
				       10000, on_reply, l);
		}
		if (rc < 0) {
			l->errors++;
			return;
		}
		l->inflight++;
	}
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

struct workload {
	const char *name;
	uint16_t type;
	uint32_t size;
	int depth;
	const char *unit;           /* MB/s or ops/s */
};

static const struct workload workloads[] = {
	{ "seq_write_1m", TWINFS__MSG_TYPE__MSG_WRITE, BIG, 8, "MB/s" },
	{ "seq_read_1m", TWINFS__MSG_TYPE__MSG_READ, BIG, 8, "MB/s" },
	{ "write_4k_qd1", TWINFS__MSG_TYPE__MSG_WRITE, 4096, 1, "ops/s" },
	{ "read_4k_qd1", TWINFS__MSG_TYPE__MSG_READ, 4096, 1, "ops/s" },
	{ "write_4k_qd16", TWINFS__MSG_TYPE__MSG_WRITE, 4096, 16, "ops/s" },
};
#define N_WL TW_ARRAY_SIZE(workloads)

static const enum tw_channel modes[] = { TW_CHANNEL_NONE,
	TW_CHANNEL_INTEGRITY, TW_CHANNEL_ENCRYPT };
#define N_MODES TW_ARRAY_SIZE(modes)

/* One workload on one connection in one mode: the figure, and the CPU
 * seconds per GiB moved in *cpu.  Returns -1 on errors. */
static double run_one(uv_loop_t *loop, int port, enum tw_channel mode,
		      const struct workload *w, double secs, double *cpu)
{
	Twinfs__Hello hello;
	struct wire_peer_opts o = {
		.host = "127.0.0.1", .port = port, .hello = &hello,
		.secret = SECRET, .channel = mode,
	};
	struct load l = { .loop = loop, .type = w->type, .size = w->size,
			  .depth = w->depth };
	uint64_t t0, t1;
	double c0, val;

	wire_hello_init(&hello, "bench", TWINFS__ROLE__ROLE_ADMIN, 1);
	if (wire_peer_new(loop, &o, &l.peer) < 0)
		return -1;
	/* Connect (AUTH, HELLO) and warm up outside the measurement. */
	l.t_end = tw_now_ns() + 50 * 1000 * 1000ull;
	load_issue(&l);
	while (l.inflight)
		uv_run(loop, UV_RUN_ONCE);
	if (l.errors || wire_peer_channel(l.peer) != mode) {
		fprintf(stderr, "chan_bench: %s: connection runs %s, not %s\n",
			w->name, tw_channel_name(wire_peer_channel(l.peer)),
			tw_channel_name(mode));
		wire_peer_free(l.peer);
		uv_run(loop, UV_RUN_DEFAULT);
		return -1;
	}
	l.ops = l.bytes = 0;
	c0 = cpu_s();
	t0 = tw_now_ns();
	l.t_end = t0 + (uint64_t)(secs * 1e9);
	load_issue(&l);
	while (l.inflight)
		uv_run(loop, UV_RUN_ONCE);
	t1 = tw_now_ns();
	*cpu = l.bytes ? (cpu_s() - c0) / ((double)l.bytes / (1 << 30)) : 0;
	val = !strcmp(w->unit, "MB/s") ? (double)l.bytes / 1e6
				       : (double)l.ops;
	val /= (double)(t1 - t0) / 1e9;
	wire_peer_free(l.peer);
	uv_run(loop, UV_RUN_DEFAULT);
	return l.errors ? -1 : val;
}

/* ---------------------------------------------- the AEAD, no sockets */

/* MB/s of fn over 1 MiB buffers for secs. */
static double aead_rate(int (*fn)(void *arg), void *arg, double secs)
{
	uint64_t t0 = tw_now_ns(), t, n = 0;

	do {
		if (fn(arg) < 0)
			return -1;
		n++;
		t = tw_now_ns();
	} while (t - t0 < (uint64_t)(secs * 1e9));
	return (double)n * BIG / 1e6 / ((double)(t - t0) / 1e9);
}

struct seal_arg {
	struct wire_seal *tx, *rx;
	uint8_t *frame;             /* header + 1 MiB copied data */
	size_t len;
};

static int do_seal_open(void *arg)
{
	struct seal_arg *a = arg;
	uint8_t tag[WIRE_TAG_LEN], *zcopy;
	int rc;

	rc = wire_seal_frame(a->tx, a->frame, a->len, NULL, &zcopy, tag);
	if (rc == 0)
		rc = wire_seal_open(a->rx, a->frame, NULL, 0,
				    a->frame + WIRE_HDR_SIZE,
				    a->len - WIRE_HDR_SIZE, tag);
	return rc;
}

static int do_hmac(void *arg)
{
	uint8_t out[32];
	unsigned int n;

	(void)arg;
	return HMAC(EVP_sha256(), SECRET, sizeof(SECRET) - 1, big, BIG, out,
		    &n) ? 0 : -EIO;
}

static int do_chacha(void *arg)
{
	EVP_CIPHER_CTX *ctx = arg;
	static uint8_t out[BIG];
	uint8_t tag[16], iv[12] = { 0 };
	int n;

	return EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) &&
	       EVP_EncryptUpdate(ctx, out, &n, big, BIG) &&
	       EVP_EncryptFinal_ex(ctx, out, &n) &&
	       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag)
	       ? 0 : -EIO;
}

/* Seal + open of a 1 MiB frame in a mode (both ends' work, one core). */
static double aead_mode(enum tw_channel mode, double secs)
{
	static const uint8_t n1[WIRE_NONCE_LEN] = { 1 }, n2[WIRE_NONCE_LEN];
	struct seal_arg a = { 0 }, b = { 0 };
	struct iovec iov = { big, BIG };
	Twinfs__Write w = TWINFS__WRITE__INIT;
	double rate;
	int err;

	if (wire_seal_start(mode, (const uint8_t *)SECRET, sizeof(SECRET) - 1,
			    n1, n2, false, &a.tx, &b.rx) < 0 ||
	    wire_seal_start(mode, (const uint8_t *)SECRET, sizeof(SECRET) - 1,
			    n1, n2, true, &b.tx, &a.rx) < 0)
		return -1;
	a.frame = wire_frame_build(TWINFS__MSG_TYPE__MSG_WRITE, 0, 0, 1,
				   &w.base, &iov, 1, &a.len, &err);
	/* The frame has an empty body: its data starts at the header's end. */
	rate = a.frame && a.len == WIRE_HDR_SIZE + BIG
	       ? aead_rate(do_seal_open, &a, secs) : -1;
	free(a.frame);
	wire_seal_free(a.tx);
	wire_seal_free(a.rx);
	wire_seal_free(b.tx);
	wire_seal_free(b.rx);
	return rate;
}

/* ---------------------------------------------------------------- main */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	static double val[N_MODES][N_WL][MAX_RUNS];
	static double cpu[N_MODES][N_WL][MAX_RUNS];
	double secs = 2, med[N_MODES][N_WL], cmed[N_MODES][N_WL];
	const char *out_path = NULL;
	int runs = 3, rc = 0;
	uv_loop_t loop;
	struct srv s;
	FILE *out = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			secs = 0.2;
			runs = 1;
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--secs") && i + 1 < argc) {
			secs = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
			out_path = argv[++i];
		} else {
			fprintf(stderr, "usage: chan_bench [--quick] [--runs N] "
				"[--secs S] [--out FILE.tsv]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || secs <= 0) {
		fprintf(stderr, "chan_bench: --runs 1..%d, --secs > 0\n",
			MAX_RUNS);
		return 2;
	}
	tw_log_init("chan_bench", TW_LOG_WARN);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 131 ^ (i >> 7));
	if (srv_start(&s) < 0 || uv_loop_init(&loop) < 0) {
		fprintf(stderr, "chan_bench: cannot start the server\n");
		return 1;
	}
	for (int r = 0; r < runs; r++)
		for (size_t w = 0; w < N_WL; w++)
			for (size_t m = 0; m < N_MODES; m++) {
				/* Rotate the modes' order, so that a drifting
				 * machine favours none of them. */
				size_t mm = (m + (size_t)r + w) % N_MODES;

				val[mm][w][r] = run_one(&loop,
					wire_server_port(s.ws), modes[mm],
					&workloads[w], secs, &cpu[mm][w][r]);
				if (val[mm][w][r] < 0)
					rc = 1;
			}
	uv_async_send(&s.stop);
	pthread_join(s.thread, NULL);
	uv_loop_close(&s.loop);
	uv_loop_close(&loop);

	if (out_path && !(out = fopen(out_path, "w"))) {
		perror(out_path);
		return 1;
	}
	if (out)
		fprintf(out, "mode\tworkload\tvalue\tunit\tratio_to_none\t"
			"cpu_s_per_gib\n");
	printf("%-14s", "workload");
	for (size_t m = 0; m < N_MODES; m++)
		printf(" %12s", tw_channel_name(modes[m]));
	printf("   ratios to none; medians of %d run(s) of %.1f s\n", runs,
	       secs);
	for (size_t w = 0; w < N_WL; w++) {
		const struct workload *wl = &workloads[w];

		for (size_t m = 0; m < N_MODES; m++) {
			med[m][w] = median(val[m][w], runs);
			cmed[m][w] = median(cpu[m][w], runs);
		}
		printf("%-14s", wl->name);
		for (size_t m = 0; m < N_MODES; m++)
			printf(" %12.1f", med[m][w]);
		printf("   %s;", wl->unit);
		for (size_t m = 1; m < N_MODES; m++)
			printf(" %s %.2f", tw_channel_name(modes[m]),
			       med[0][w] > 0 ? med[m][w] / med[0][w] : 0);
		if (wl->size == BIG)
			printf("; cpu s/GiB %.2f %.2f %.2f", cmed[0][w],
			       cmed[1][w], cmed[2][w]);
		printf("\n");
		for (size_t m = 0; out && m < N_MODES; m++)
			fprintf(out, "%s\t%s\t%.1f\t%s\t%.3f\t%.3f\n",
				tw_channel_name(modes[m]), wl->name,
				med[m][w], wl->unit,
				med[0][w] > 0 ? med[m][w] / med[0][w] : 0,
				wl->size == BIG ? cmed[m][w] : 0);
	}

	/* The AEAD alone: what a choice of algorithm costs per byte. */
	{
		EVP_CIPHER_CTX *cc = EVP_CIPHER_CTX_new();
		static const uint8_t key[32];
		double gmac, gcm, hmac, chacha = -1;

		gmac = aead_mode(TW_CHANNEL_INTEGRITY, secs);
		gcm = aead_mode(TW_CHANNEL_ENCRYPT, secs);
		/* One HMAC per end, as a seal and an open are. */
		hmac = aead_rate(do_hmac, NULL, secs) / 2;
		if (cc && EVP_EncryptInit_ex(cc, EVP_chacha20_poly1305(), NULL,
					     key, NULL))
			chacha = aead_rate(do_chacha, cc, secs) / 2;
		EVP_CIPHER_CTX_free(cc);
		printf("aead_1m (seal+open, one core, MB/s): integrity/GMAC "
		       "%.0f  encrypt/AES-256-GCM %.0f  [HMAC-SHA256 %.0f  "
		       "ChaCha20-Poly1305 %.0f]\n", gmac, gcm, hmac, chacha);
		if (out) {
			fprintf(out, "integrity\taead_1m\t%.1f\tMB/s\t\t\n",
				gmac);
			fprintf(out, "encrypt\taead_1m\t%.1f\tMB/s\t\t\n", gcm);
			fprintf(out, "hmac-sha256\taead_1m\t%.1f\tMB/s\t\t\n",
				hmac);
			fprintf(out, "chacha20-poly1305\taead_1m\t%.1f\tMB/s\t"
				"\t\n", chacha);
		}
		if (gmac < 0 || gcm < 0)
			rc = 1;
	}
	if (out)
		fclose(out);
	return rc;
}
