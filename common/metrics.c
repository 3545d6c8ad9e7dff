/* metrics.c - histograms and the Prometheus text exposition format 0.0.4
 * (metrics.h; the metric names are listed in docs/OPERATIONS.md
 * "Metrics").
 *
 * Not here: which metrics a daemon exports (mgrd/metrics.c,
 * iod/metrics.c) and the HTTP side (http.c).
 *
 * Format rules this writer keeps: a family's HELP and TYPE lines come
 * before its samples; label values escape backslash, double quote and
 * newline, HELP text backslash and newline; histogram buckets are
 * cumulative, end with le="+Inf" equal to _count, and are followed by
 * _sum and _count.
 */
#include "metrics.h"
#include "common.h"
#include "stall.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const double tw_hist_latency_bounds[TW_HIST_MAX_BOUNDS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

int tw_hist_init(struct tw_hist *h, const double *bounds, unsigned n)
{
	memset(h, 0, sizeof(*h));
	if (!bounds)
		return 0;
	if (n == 0 || n > TW_HIST_MAX_BOUNDS)
		return -EINVAL;
	for (unsigned i = 1; i < n; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return -EINVAL;
	h->bounds = bounds;
	h->n_bounds = n;
	return 0;
}

void tw_hist_observe(struct tw_hist *h, double v)
{
	const double *b = h->bounds ? h->bounds : tw_hist_latency_bounds;
	unsigned n = h->bounds ? h->n_bounds : TW_HIST_MAX_BOUNDS;
	unsigned i = 0;

	while (i < n && v > b[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += v;
}

void tw_hist_observe_ns(struct tw_hist *h, uint64_t ns)
{
	tw_hist_observe(h, (double)ns / 1e9);
}

/* ---------------------------------------------------------------- writer */

void tw_mx_init(struct tw_mx *x)
{
	memset(x, 0, sizeof(*x));
}

void tw_mx_free(struct tw_mx *x)
{
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

static bool reserve(struct tw_mx *x, size_t more)
{
	size_t cap;
	char *nb;

	if (x->err)
		return false;
	if (x->len + more + 1 <= x->cap)
		return true;
	cap = x->cap ? x->cap : 4096;
	while (cap < x->len + more + 1)
		cap *= 2;
	nb = realloc(x->buf, cap);
	if (!nb) {
		x->err = -ENOMEM;
		return false;
	}
	x->buf = nb;
	x->cap = cap;
	return true;
}

static void put(struct tw_mx *x, const char *s, size_t n)
{
	if (!reserve(x, n))
		return;
	memcpy(x->buf + x->len, s, n);
	x->len += n;
	x->buf[x->len] = '\0';
}

static void puts_(struct tw_mx *x, const char *s)
{
	put(x, s, strlen(s));
}

static void printf_(struct tw_mx *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void printf_(struct tw_mx *x, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	put(x, tmp, TW_MIN((size_t)n, sizeof(tmp) - 1));
}

size_t tw_mx_escape(char *out, size_t outlen, const char *in, bool label)
{
	size_t n = 0;

	for (; *in; in++) {
		const char *rep = NULL;
		char one[2] = { *in, 0 };

		if (*in == '\\')
			rep = "\\\\";
		else if (*in == '\n')
			rep = "\\n";
		else if (*in == '"' && label)
			rep = "\\\"";
		else
			rep = one;
		for (; *rep; rep++, n++)
			if (n + 1 < outlen)
				out[n] = *rep;
	}
	if (outlen)
		out[TW_MIN(n, outlen - 1)] = '\0';
	return n;
}

static void put_escaped(struct tw_mx *x, const char *s, bool label)
{
	size_t need = tw_mx_escape(NULL, 0, s, label);

	if (!reserve(x, need))
		return;
	tw_mx_escape(x->buf + x->len, need + 1, s, label);
	x->len += need;
}

void tw_mx_family(struct tw_mx *x, const char *name, enum tw_mx_type type,
		  const char *help)
{
	static const char *const types[] = {
		[TW_MX_COUNTER] = "counter",
		[TW_MX_GAUGE] = "gauge",
		[TW_MX_HISTOGRAM] = "histogram",
	};

	puts_(x, "# HELP ");
	puts_(x, name);
	puts_(x, " ");
	put_escaped(x, help, false);
	puts_(x, "\n# TYPE ");
	puts_(x, name);
	puts_(x, " ");
	puts_(x, types[type]);
	puts_(x, "\n");
}

/* name{labels[,le="extra"]} followed by one space. */
static void put_series(struct tw_mx *x, const char *name, const char *suffix,
		       const struct tw_label *l, size_t n, const char *le)
{
	puts_(x, name);
	if (suffix)
		puts_(x, suffix);
	if (n || le) {
		puts_(x, "{");
		for (size_t i = 0; i < n; i++) {
			if (i)
				puts_(x, ",");
			puts_(x, l[i].name);
			puts_(x, "=\"");
			put_escaped(x, l[i].value ? l[i].value : "", true);
			puts_(x, "\"");
		}
		if (le) {
			if (n)
				puts_(x, ",");
			puts_(x, "le=\"");
			puts_(x, le);
			puts_(x, "\"");
		}
		puts_(x, "}");
	}
	puts_(x, " ");
}

static void put_double(struct tw_mx *x, double v)
{
	if (isnan(v))
		puts_(x, "NaN");
	else if (isinf(v))
		puts_(x, v > 0 ? "+Inf" : "-Inf");
	else
		printf_(x, "%.17g", v);
}

void tw_mx_u64(struct tw_mx *x, const char *name, const struct tw_label *l,
	       size_t n, uint64_t v)
{
	put_series(x, name, NULL, l, n, NULL);
	printf_(x, "%" PRIu64 "\n", v);
}

void tw_mx_f64(struct tw_mx *x, const char *name, const struct tw_label *l,
	       size_t n, double v)
{
	put_series(x, name, NULL, l, n, NULL);
	put_double(x, v);
	puts_(x, "\n");
}

void tw_mx_hist(struct tw_mx *x, const char *name, const struct tw_label *l,
		size_t n, const struct tw_hist *h)
{
	const double *b = h->bounds ? h->bounds : tw_hist_latency_bounds;
	unsigned nb = h->bounds ? h->n_bounds : TW_HIST_MAX_BOUNDS;
	uint64_t cum = 0;
	char le[40];

	for (unsigned i = 0; i < nb; i++) {
		cum += h->bucket[i];
		snprintf(le, sizeof(le), "%.9g", b[i]);
		put_series(x, name, "_bucket", l, n, le);
		printf_(x, "%" PRIu64 "\n", cum);
	}
	/* +Inf is the count, whatever the buckets say. */
	put_series(x, name, "_bucket", l, n, "+Inf");
	printf_(x, "%" PRIu64 "\n", h->count);
	put_series(x, name, "_sum", l, n, NULL);
	put_double(x, h->sum);
	puts_(x, "\n");
	put_series(x, name, "_count", l, n, NULL);
	printf_(x, "%" PRIu64 "\n", h->count);
}

void tw_mx_process(struct tw_mx *x, const char *daemon, double start_s)
{
	struct tw_label bl[] = {
		{ "version", TW_VERSION },
		{ "daemon", daemon },
	};
	const struct tw_stall *st = tw_stall_get();
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	tw_mx_family(x, "twinfs_build_info", TW_MX_GAUGE,
		     "Always 1; the labels say which build runs.");
	tw_mx_u64(x, "twinfs_build_info", bl, TW_ARRAY_SIZE(bl), 1);
	tw_mx_family(x, "twinfs_process_start_time_seconds", TW_MX_GAUGE,
		     "Start time of the process since the Unix epoch, seconds.");
	tw_mx_f64(x, "twinfs_process_start_time_seconds", NULL, 0, start_s);
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	tw_mx_family(x, "twinfs_process_resident_memory_bytes", TW_MX_GAUGE,
		     "Resident set size (/proc/self/statm), bytes.");
	tw_mx_u64(x, "twinfs_process_resident_memory_bytes", NULL, 0,
		  (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE));
	tw_mx_family(x, "twinfs_loop_stalls_total", TW_MX_COUNTER,
		     "Times the event loop was held for 100 ms or more "
		     "(every request waited; the log says why).");
	tw_mx_u64(x, "twinfs_loop_stalls_total", NULL, 0, st->count);
	tw_mx_family(x, "twinfs_loop_stall_max_seconds", TW_MX_GAUGE,
		     "The longest of those stalls, seconds.");
	tw_mx_f64(x, "twinfs_loop_stall_max_seconds", NULL, 0,
		  (double)st->max_ms / 1000.0);
}
