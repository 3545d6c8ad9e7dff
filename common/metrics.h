/* metrics.h - Prometheus metrics of the daemons: fixed-bucket histograms,
 * the text exposition format 0.0.4, and a minimal HTTP responder that
 * serves GET /metrics on a libuv loop (docs/OPERATIONS.md "Metrics").
 *
 * Counters and gauges are plain integers owned by whoever updates them;
 * only histograms need a type.  Everything is meant for one thread, the
 * daemon's loop thread: a value updated by another thread must be read
 * with an atomic load before it is handed to the writer.
 *
 * Functions return 0 or a negative errno.
 */
#ifndef TWINFS_METRICS_H
#define TWINFS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ histograms */

/* Upper bounds of the latency buckets, in seconds: 100 us .. 10 s. */
#define TW_HIST_MAX_BOUNDS 16
extern const double tw_hist_latency_bounds[TW_HIST_MAX_BOUNDS];

/* A histogram.  All zeros is a valid empty latency histogram (bounds
 * NULL means tw_hist_latency_bounds); tw_hist_init picks other bounds.
 * bucket[i] counts observations in (bounds[i-1], bounds[i]] and
 * bucket[n_bounds] those above the last bound: not cumulative here, the
 * writer sums them. */
struct tw_hist {
	const double *bounds;     /* ascending; NULL = latency bounds */
	unsigned n_bounds;        /* <= TW_HIST_MAX_BOUNDS */
	uint64_t bucket[TW_HIST_MAX_BOUNDS + 1];
	uint64_t count;
	double sum;
};

/* bounds: n ascending values (n <= TW_HIST_MAX_BOUNDS), borrowed for the
 * histogram's lifetime; NULL = the latency bounds.  -EINVAL otherwise. */
int tw_hist_init(struct tw_hist *h, const double *bounds, unsigned n);
void tw_hist_observe(struct tw_hist *h, double v);
/* A duration in nanoseconds, observed in seconds. */
void tw_hist_observe_ns(struct tw_hist *h, uint64_t ns);

/* ------------------------------------------------ the exposition writer */

/* A growing text buffer.  The first allocation failure sticks in err
 * (-ENOMEM) and later writes are dropped: check it once at the end. */
struct tw_mx {
	char *buf;                /* malloc'd; NUL-terminated while err == 0 */
	size_t len, cap;
	int err;
};

struct tw_label {
	const char *name;         /* [a-zA-Z_][a-zA-Z0-9_]* (not checked) */
	const char *value;        /* any UTF-8; escaped by the writer */
};

enum tw_mx_type { TW_MX_COUNTER, TW_MX_GAUGE, TW_MX_HISTOGRAM };

void tw_mx_init(struct tw_mx *x);
void tw_mx_free(struct tw_mx *x);
/* "# HELP name help" and "# TYPE name type": once per family, before its
 * samples.  help is escaped (backslash, newline). */
void tw_mx_family(struct tw_mx *x, const char *name, enum tw_mx_type type,
		  const char *help);
/* One sample "name{l1="v1",...} value".  n may be 0 (labels NULL). */
void tw_mx_u64(struct tw_mx *x, const char *name, const struct tw_label *l,
	       size_t n, uint64_t v);
void tw_mx_f64(struct tw_mx *x, const char *name, const struct tw_label *l,
	       size_t n, double v);
/* The samples of histogram h: name_bucket{...,le="B"} (cumulative, one per
 * bound and le="+Inf"), name_sum, name_count. */
void tw_mx_hist(struct tw_mx *x, const char *name, const struct tw_label *l,
		size_t n, const struct tw_hist *h);
/* Label value escaping of the format: \ -> \\, " -> \", newline -> \n.
 * Writes at most outlen bytes with the NUL; returns the length it needed
 * (as snprintf). */
size_t tw_mx_escape(char *out, size_t outlen, const char *in, bool label);

/* Common samples of every daemon: twinfs_build_info{version,daemon},
 * twinfs_process_start_time_seconds, twinfs_process_resident_memory_bytes
 * (/proc/self/statm). start_s: Unix time of the start. */
void tw_mx_process(struct tw_mx *x, const char *daemon, double start_s);

/* ------------------------------------------------------- the responder */

/* Limits of the HTTP responder (docs/OPERATIONS.md "Metrics"). */
#define TW_HTTP_REQ_MAX     (8u << 10)  /* request line and headers */
#define TW_HTTP_CONNS_MAX   16u         /* past it: accepted, closed */
#define TW_HTTP_TIMEOUT_MS  5000u       /* whole request read by then */

/* Fill x with the exposition (called for every GET /metrics, on the
 * loop thread).  A negative return (or x->err) answers 500. */
typedef int (*tw_http_render_fn)(struct tw_mx *x, void *arg);

struct tw_http;
struct uv_loop_s;

/* Listen on host:port (IPv4/IPv6 literal or "localhost"; port 0: any).
 * HTTP/1.0 and 1.1, one request per connection, "Connection: close":
 * GET (or HEAD) /metrics -> 200, another path -> 404, another method ->
 * 405, malformed -> 400, headers over TW_HTTP_REQ_MAX -> 431.  0 and
 * *out, or -errno (-EADDRINUSE, -EINVAL for a bad host). */
int tw_http_listen(struct uv_loop_s *loop, const char *host, int port,
		   tw_http_render_fn fn, void *arg, struct tw_http **out);
/* The port bound (after port 0). */
int tw_http_port(const struct tw_http *h);
/* Stop listening, close every connection, free h once all handles have
 * closed; cb (may be NULL) runs then. */
void tw_http_close(struct tw_http *h, void (*cb)(void *arg), void *arg);

/* Parse the request head in buf[0, len) (no NUL needed): 0 when complete
 * with *status the answer (200, 400, 404, 405) and *head for HEAD;
 * -EAGAIN when the blank line that ends the head has not arrived yet.
 * Pure; exposed for the unit tests. */
int tw_http_parse(const char *buf, size_t len, int *status, bool *head);

#endif
