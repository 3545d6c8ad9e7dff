/* test_metrics.c - unit tests of common/metrics.c, common/http.c's request
 * parser and the `metrics` setting of common/conf.c: the exposition text
 * byte for byte (HELP/TYPE, label escaping, histogram buckets cumulative
 * with +Inf, _sum and _count), bucket boundaries, the writer's sticky
 * error, request heads good and malformed, metrics addresses.  No
 * network.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "metrics.h"

/* ------------------------------------------------------------- writer */

Test(metrics, counter_and_gauge_text)
{
	struct tw_mx x;
	struct tw_label l[] = { { "type", "WRITE" }, { "iod", "3" } };

	tw_mx_init(&x);
	tw_mx_family(&x, "twinfs_requests_total", TW_MX_COUNTER,
		     "Requests read.");
	tw_mx_u64(&x, "twinfs_requests_total", l, 2, 18446744073709551615ull);
	tw_mx_family(&x, "twinfs_up", TW_MX_GAUGE, "Up.");
	tw_mx_u64(&x, "twinfs_up", NULL, 0, 1);
	tw_mx_f64(&x, "twinfs_up", NULL, 0, 0.5);
	cr_assert_eq(x.err, 0);
	cr_assert_str_eq(x.buf,
		"# HELP twinfs_requests_total Requests read.\n"
		"# TYPE twinfs_requests_total counter\n"
		"twinfs_requests_total{type=\"WRITE\",iod=\"3\"} 18446744073709551615\n"
		"# HELP twinfs_up Up.\n"
		"# TYPE twinfs_up gauge\n"
		"twinfs_up 1\n"
		"twinfs_up 0.5\n");
	cr_assert_eq(x.len, strlen(x.buf));
	tw_mx_free(&x);
}

Test(metrics, label_and_help_escaping)
{
	struct tw_mx x;
	struct tw_label l[] = { { "path", "a\\b\"c\nd" } };
	char small[4];

	tw_mx_init(&x);
	tw_mx_family(&x, "m", TW_MX_GAUGE, "back\\slash \"quote\"\nline");
	tw_mx_u64(&x, "m", l, 1, 7);
	cr_assert_str_eq(x.buf,
		"# HELP m back\\\\slash \"quote\"\\nline\n"
		"# TYPE m gauge\n"
		"m{path=\"a\\\\b\\\"c\\nd\"} 7\n");
	tw_mx_free(&x);
	/* snprintf-like: the length it needs, truncated output. */
	cr_assert_eq(tw_mx_escape(small, sizeof(small), "\"\"", true), 4);
	cr_assert_str_eq(small, "\\\"\\");
	cr_assert_eq(tw_mx_escape(NULL, 0, "ab\n", false), 4);
}

Test(metrics, special_values)
{
	struct tw_mx x;

	tw_mx_init(&x);
	tw_mx_f64(&x, "a", NULL, 0, INFINITY);
	tw_mx_f64(&x, "b", NULL, 0, -INFINITY);
	tw_mx_f64(&x, "c", NULL, 0, NAN);
	cr_assert_str_eq(x.buf, "a +Inf\nb -Inf\nc NaN\n");
	tw_mx_free(&x);
}

Test(metrics, histogram_cumulative_inf_sum_count)
{
	static const double bounds[] = { 0.1, 1, 10 };
	struct tw_label l[] = { { "type", "READ" } };
	struct tw_hist h;
	struct tw_mx x;

	cr_assert_eq(tw_hist_init(&h, bounds, 3), 0);
	tw_hist_observe(&h, 0.05);   /* <= 0.1 */
	tw_hist_observe(&h, 0.1);    /* le is inclusive: still 0.1 */
	tw_hist_observe(&h, 5);      /* <= 10 */
	tw_hist_observe(&h, 100);    /* +Inf only */
	tw_mx_init(&x);
	tw_mx_hist(&x, "lat_seconds", l, 1, &h);
	cr_assert_str_eq(x.buf,
		"lat_seconds_bucket{type=\"READ\",le=\"0.1\"} 2\n"
		"lat_seconds_bucket{type=\"READ\",le=\"1\"} 2\n"
		"lat_seconds_bucket{type=\"READ\",le=\"10\"} 3\n"
		"lat_seconds_bucket{type=\"READ\",le=\"+Inf\"} 4\n"
		"lat_seconds_sum{type=\"READ\"} 105.15000000000001\n"
		"lat_seconds_count{type=\"READ\"} 4\n");
	tw_mx_free(&x);
}

Test(metrics, histogram_default_latency_buckets)
{
	struct tw_hist h;
	struct tw_mx x;
	uint64_t prev = 0, v;
	unsigned n = 0;
	char *line, *save = NULL;

	memset(&h, 0, sizeof(h));           /* all zeros: latency bounds */
	tw_hist_observe_ns(&h, 50 * 1000);           /* 50 us */
	tw_hist_observe_ns(&h, 3 * 1000 * 1000);     /* 3 ms */
	tw_hist_observe_ns(&h, 20ull * 1000000000);  /* 20 s: +Inf */
	cr_assert_eq(h.bucket[0], 1);
	cr_assert_eq(h.bucket[TW_HIST_MAX_BOUNDS], 1);
	cr_assert_eq(h.count, 3);
	tw_mx_init(&x);
	tw_mx_hist(&x, "d", NULL, 0, &h);
	/* Every bucket line's value never decreases; the last one is +Inf. */
	for (line = strtok_r(x.buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "d_bucket{", 9) != 0)
			continue;
		v = strtoull(strrchr(line, ' ') + 1, NULL, 10);
		cr_assert_geq(v, prev, "%s", line);
		prev = v;
		n++;
		if (n == TW_HIST_MAX_BOUNDS + 1)
			cr_assert(strstr(line, "le=\"+Inf\"} 3"), "%s", line);
	}
	cr_assert_eq(n, TW_HIST_MAX_BOUNDS + 1);
	tw_mx_free(&x);
}

Test(metrics, hist_init_rejects_bad_bounds)
{
	static const double desc[] = { 1, 0.5 };
	static const double dup[] = { 1, 1 };
	struct tw_hist h;

	cr_assert_eq(tw_hist_init(&h, desc, 2), -EINVAL);
	cr_assert_eq(tw_hist_init(&h, dup, 2), -EINVAL);
	cr_assert_eq(tw_hist_init(&h, desc, 0), -EINVAL);
	cr_assert_eq(tw_hist_init(&h, desc, TW_HIST_MAX_BOUNDS + 1), -EINVAL);
	cr_assert_eq(tw_hist_init(&h, NULL, 0), 0);
}

Test(metrics, process_families)
{
	struct tw_mx x;

	tw_mx_init(&x);
	tw_mx_process(&x, "iod", 1700000000.25);
	cr_assert_eq(x.err, 0);
	cr_assert(strstr(x.buf, "twinfs_build_info{version=\"" TW_VERSION
			 "\",daemon=\"iod\"} 1\n"));
	cr_assert(strstr(x.buf, "twinfs_process_start_time_seconds 1700000000.25\n"));
	cr_assert(strstr(x.buf, "twinfs_process_resident_memory_bytes "));
	cr_assert_null(strstr(x.buf, "twinfs_process_resident_memory_bytes 0\n"));
	/* no watch started in this process: none seen */
	cr_assert(strstr(x.buf, "twinfs_loop_stalls_total 0\n"));
	cr_assert(strstr(x.buf, "twinfs_loop_stall_max_seconds 0\n"));
	tw_mx_free(&x);
}

/* ----------------------------------------------------- request parser */

static int parse(const char *req, int *status, bool *head)
{
	return tw_http_parse(req, strlen(req), status, head);
}

Test(http, requests)
{
	int st = 0;
	bool head;

	cr_assert_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 200);
	cr_assert_not(head);
	cr_assert_eq(parse("GET /metrics?x=1 HTTP/1.0\n\n", &st, &head), 0);
	cr_assert_eq(st, 200);
	cr_assert_eq(parse("HEAD /metrics HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 200);
	cr_assert(head);
	cr_assert_eq(parse("GET /other HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 404);
	cr_assert_eq(parse("GET /metricsx HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 404);
	cr_assert_eq(parse("POST /metrics HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 405);
	cr_assert_eq(parse("GETX /metrics HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 405);
	/* malformed */
	cr_assert_eq(parse("GET\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 400);
	cr_assert_eq(parse("GET /metrics\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 400);
	cr_assert_eq(parse("GET /metrics HTTP/2.0\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 400);
	cr_assert_eq(parse("GET /metrics FTP/1.1x\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 400);
	cr_assert_eq(parse(" /metrics HTTP/1.1\r\n\r\n", &st, &head), 0);
	cr_assert_eq(st, 400);
	/* incomplete: the blank line has not come */
	cr_assert_eq(parse("GET /metrics HTTP/1.1\r\n", &st, &head), -EAGAIN);
	cr_assert_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r", &st, &head),
		     -EAGAIN);
	cr_assert_eq(parse("", &st, &head), -EAGAIN);
	/* a NUL inside is just a byte, not the end */
	cr_assert_eq(tw_http_parse("GET /metrics\0 HTTP/1.1\r\n\r\n", 26, &st,
				   &head), 0);
	cr_assert_eq(st, 404);
}

/* ------------------------------------------------------ the setting */

Test(conf, metrics_addresses)
{
	char host[TW_HOST_MAX];
	int port = -1;

	cr_assert_eq(tw_parse_metrics_addr("127.0.0.1:8500", host, &port), 0);
	cr_assert_str_eq(host, "127.0.0.1");
	cr_assert_eq(port, 8500);
	cr_assert_eq(tw_parse_metrics_addr("9100", host, &port), 0);
	cr_assert_str_eq(host, "127.0.0.1");
	cr_assert_eq(port, 9100);
	cr_assert_eq(tw_parse_metrics_addr("[::1]:9100", host, &port), 0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(tw_parse_metrics_addr("mon.example:80", host, &port), 0);
	cr_assert_str_eq(host, "mon.example");
	cr_assert_eq(tw_parse_metrics_addr("off", host, &port), 0);
	cr_assert_eq(port, 0);
	cr_assert_eq(tw_parse_metrics_addr("::1:9100", host, &port), -EINVAL);
	cr_assert_eq(tw_parse_metrics_addr("h:0", host, &port), -EINVAL);
	cr_assert_eq(tw_parse_metrics_addr("h:65536", host, &port), -EINVAL);
	cr_assert_eq(tw_parse_metrics_addr(":80", host, &port), -EINVAL);
	cr_assert_eq(tw_parse_metrics_addr("h:", host, &port), -EINVAL);
	cr_assert_eq(tw_parse_metrics_addr("[]:80", host, &port), -EINVAL);
}

static int load(const char *text, struct tw_conf *c, char *err, size_t len)
{
	char path[64];
	int fd, rc;

	snprintf(path, sizeof(path), "/tmp/twinfs-test-metrics.XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	rc = tw_conf_load(path, c, err, len);
	unlink(path);
	return rc;
}

Test(conf, metrics_setting)
{
	struct tw_conf c;
	char err[512] = "";

	cr_assert_eq(load("[mgrd]\nmetrics = 127.0.0.1:8500\n"
			  "[iod 1]\ndir = /d1\nmetrics = 0.0.0.0:8501\n"
			  "[iod 2]\ndir = /d2\n", &c, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(c.mgr_metrics_port, 8500);
	cr_assert_str_eq(c.iods[0].metrics_host, "0.0.0.0");
	cr_assert_eq(c.iods[0].metrics_port, 8501);
	cr_assert_eq(c.iods[1].metrics_port, 0);       /* off by default */
	/* clashes with a server port or another metrics address */
	cr_assert_eq(load("[mgrd]\nmetrics = 127.0.0.1:7501\n"
			  "[iod 1]\ndir = /d1\n[iod 2]\ndir = /d2\n",
			  &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "is the address of iod 1"), "%s", err);
	cr_assert_eq(load("[mgrd]\nmetrics = 8600\n"
			  "[iod 1]\ndir = /d1\nmetrics = 127.0.0.1:8600\n"
			  "[iod 2]\ndir = /d2\n", &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "[mgrd] metrics 127.0.0.1:8600 is the address of the metrics of iod 1"), "%s", err);
	cr_assert_eq(load("[iod 1]\ndir = /d1\nmetrics = nope:\n"
			  "[iod 2]\ndir = /d2\n", &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, ":3: metrics: bad address"), "%s", err);
}
