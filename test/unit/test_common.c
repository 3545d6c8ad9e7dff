/* test_common.c - unit tests of libcommon: CRC32C (vectors, chaining, the
 * SSE4.2 path against the table path), the hash map against a reference
 * array, the config parser (a good file and each kind of error) and the
 * size/time parsers, the adaptive polling policy (spin.h), the loop stall
 * watch (stall.h), the wakeup probe and its policy (wake.h).  No root, no
 * network.
 */
#include <criterion/criterion.h>

#include <sched.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "oset.h"
#include "spin.h"
#include "stall.h"
#include "vote.h"
#include "wake.h"

/* Internal test hooks of crc32c.c (not in common.h). */
uint32_t tw__crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t tw__crc32c_hw(uint32_t crc, const void *buf, size_t len);
int tw__crc32c_have_hw(void);

/* ----------------------------------------------------------------- crc32c */

/* Deterministic generator so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

Test(crc32c, known_vectors)
{
	static const unsigned char zeros[32];
	unsigned char ones[32], incr[32], decr[32];

	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		incr[i] = (unsigned char)i;
		decr[i] = (unsigned char)(31 - i);
	}
	cr_assert_eq(tw_crc32c(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(tw_crc32c(0, "", 0), 0u);
	cr_assert_eq(tw_crc32c(0, "a", 1), 0xC1D04330u);
	/* RFC 3720 appendix B.4 vectors. */
	cr_assert_eq(tw_crc32c(0, zeros, 32), 0x8A9136AAu);
	cr_assert_eq(tw_crc32c(0, ones, 32), 0x62A8AB43u);
	cr_assert_eq(tw_crc32c(0, incr, 32), 0x46DD794Eu);
	cr_assert_eq(tw_crc32c(0, decr, 32), 0x113FDB5Cu);
	cr_assert_eq(tw__crc32c_sw(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(tw__crc32c_hw(0, "123456789", 9), 0xE3069283u);
}

Test(crc32c, chaining)
{
	unsigned char buf[4096];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rng();
	uint32_t whole = tw_crc32c(0, buf, sizeof(buf));

	for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
		uint32_t a = tw_crc32c(0, buf, cut);

		cr_assert_eq(tw_crc32c(a, buf + cut, sizeof(buf) - cut), whole,
			     "cut %zu", cut);
		a = tw__crc32c_sw(0, buf, cut);
		cr_assert_eq(tw__crc32c_sw(a, buf + cut, sizeof(buf) - cut), whole);
	}
	/* Byte at a time. */
	uint32_t c = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		c = tw_crc32c(c, buf + i, 1);
	cr_assert_eq(c, whole);
}

/* The journal's commit sum: a seeded chain over whole 4 KiB blocks, each
 * summed once on its own (the fast case), must equal one pass over all. */
Test(crc32c, combine_whole_blocks)
{
	enum { NB = 9, BS = 4096 };
	unsigned char *buf = malloc(NB * BS + 1);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < NB * BS + 1; i++)
		buf[i] = (unsigned char)rng();
	uint32_t seed = (uint32_t)rng();
	uint32_t chain = seed;

	for (int b = 0; b < NB; b++)
		chain = tw_crc32c_combine(chain, tw_crc32c(0, buf + b * BS, BS),
					  BS);
	cr_assert_eq(chain, tw_crc32c(seed, buf, NB * BS));
	/* Lengths next to the fast case take the general path. */
	for (size_t len = BS - 1; len <= BS + 1; len++) {
		uint32_t a = tw_crc32c(0, buf, 100);

		cr_assert_eq(tw_crc32c_combine(a, tw_crc32c(0, buf + 100, len),
					       len),
			     tw_crc32c(0, buf, 100 + len), "len %zu", len);
	}
	free(buf);
}

Test(crc32c, sse_equals_software)
{
	unsigned char *buf = malloc(70000);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < 70000; i++)
		buf[i] = (unsigned char)rng();
	if (!tw__crc32c_have_hw())
		cr_log_warn("no SSE4.2 on this CPU: only the software path runs");
	for (size_t align = 0; align < 16; align++) {
		for (size_t len = 0; len < 300; len++) {
			uint32_t seed = (uint32_t)rng();

			cr_assert_eq(tw__crc32c_hw(seed, buf + align, len),
				     tw__crc32c_sw(seed, buf + align, len),
				     "align %zu len %zu", align, len);
		}
	}
	for (int i = 0; i < 500; i++) {
		size_t off = rng() % 4096, len = rng() % (70000 - 4096);

		cr_assert_eq(tw__crc32c_hw(0, buf + off, len),
			     tw__crc32c_sw(0, buf + off, len));
		cr_assert_eq(tw_crc32c(0, buf + off, len),
			     tw__crc32c_sw(0, buf + off, len));
	}
	free(buf);
}

/* ------------------------------------------------------------------ hmap */

#define NKEYS 100000

/* Reference: key i+1 maps to &vals[i] when present[i]. */
struct ref {
	uint64_t keys[NKEYS];
	bool present[NKEYS];
	int vals[NKEYS];
};

static void check_against(const struct tw_hmap *m, const struct ref *r)
{
	size_t n = 0;

	for (int i = 0; i < NKEYS; i++) {
		void *v = tw_hmap_get(m, r->keys[i]);

		if (r->present[i]) {
			cr_assert_eq(v, &r->vals[i], "key %llu",
				     (unsigned long long)r->keys[i]);
			n++;
		} else {
			cr_assert_null(v);
		}
	}
	cr_assert_eq(m->count, n);
}

Test(hmap, put_get_del_iterate_100k)
{
	struct ref *r = calloc(1, sizeof(*r));
	struct tw_hmap m;

	cr_assert_not_null(r);
	tw_hmap_init(&m);
	cr_assert_null(tw_hmap_get(&m, 1));
	cr_assert_null(tw_hmap_del(&m, 1));
	cr_assert_eq(tw_hmap_put(&m, 0, r), -EINVAL);
	/* Half sequential keys (like inode numbers), half random. */
	for (int i = 0; i < NKEYS; i++)
		r->keys[i] = i < NKEYS / 2 ? (uint64_t)i + 1 : (rng() | 1u << 20);
	for (int i = 0; i < NKEYS; i++) {
		cr_assert_eq(tw_hmap_put(&m, r->keys[i], &r->vals[i]), 0);
		r->present[i] = true;
	}
	check_against(&m, r);
	/* Replacing keeps the count. */
	cr_assert_eq(tw_hmap_put(&m, r->keys[7], &r->vals[8]), 0);
	cr_assert_eq(tw_hmap_get(&m, r->keys[7]), &r->vals[8]);
	cr_assert_eq(tw_hmap_put(&m, r->keys[7], &r->vals[7]), 0);
	cr_assert_eq(m.count, NKEYS);
	/* Random deletes and re-inserts. */
	for (int round = 0; round < 3 * NKEYS; round++) {
		int i = (int)(rng() % NKEYS);

		if (r->present[i]) {
			cr_assert_eq(tw_hmap_del(&m, r->keys[i]), &r->vals[i]);
			r->present[i] = false;
		} else {
			cr_assert_null(tw_hmap_del(&m, r->keys[i]));
			cr_assert_eq(tw_hmap_put(&m, r->keys[i], &r->vals[i]), 0);
			r->present[i] = true;
		}
	}
	check_against(&m, r);
	/* Iteration returns each present key exactly once. */
	bool *seen = calloc(NKEYS, sizeof(*seen));
	size_t n = 0;
	uint64_t k;
	void *v;

	for (size_t it = 0; tw_hmap_next(&m, &it, &k, &v);) {
		int i = (int)((int *)v - r->vals);

		cr_assert(i >= 0 && i < NKEYS);
		cr_assert_eq(r->keys[i], k);
		cr_assert(r->present[i]);
		cr_assert(!seen[i], "key returned twice");
		seen[i] = true;
		n++;
	}
	cr_assert_eq(n, m.count);
	free(seen);
	tw_hmap_free(&m);
	cr_assert_eq(m.count, 0);
	cr_assert_null(tw_hmap_get(&m, r->keys[0]));
	free(r);
}

Test(hmap, delete_during_iteration)
{
	struct ref *r = calloc(1, sizeof(*r));
	bool *seen = calloc(NKEYS, sizeof(*seen));
	struct tw_hmap m;
	uint64_t k;
	void *v;
	size_t visited = 0;

	cr_assert(r && seen);
	tw_hmap_init(&m);
	for (int i = 0; i < NKEYS; i++) {
		r->keys[i] = i % 2 ? (uint64_t)i + 1 : rng() | 1;
		cr_assert_eq(tw_hmap_put(&m, r->keys[i], &r->vals[i]), 0);
		r->present[i] = true;
	}
	/* Delete about two thirds of the entries as they are visited: every
	 * entry must still be visited exactly once. */
	for (size_t it = 0; tw_hmap_next(&m, &it, &k, &v);) {
		int i = (int)((int *)v - r->vals);

		cr_assert(!seen[i], "key %llu returned twice", (unsigned long long)k);
		seen[i] = true;
		visited++;
		if (rng() % 3 != 0) {
			cr_assert_eq(tw_hmap_del(&m, k), v);
			r->present[i] = false;
		}
	}
	cr_assert_eq(visited, NKEYS);
	check_against(&m, r);
	/* Deleting everything during iteration empties the map. */
	for (size_t it = 0; tw_hmap_next(&m, &it, &k, &v);)
		cr_assert_eq(tw_hmap_del(&m, k), v);
	cr_assert_eq(m.count, 0);
	tw_hmap_free(&m);
	free(seen);
	free(r);
}

/* ------------------------------------------------------------ size, time */

Test(parse, sizes)
{
	uint64_t v;

	cr_assert_eq(tw_parse_size("4096", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(tw_parse_size("512K", &v), 0);
	cr_assert_eq(v, 512u << 10);
	cr_assert_eq(tw_parse_size("1m", &v), 0);
	cr_assert_eq(v, 1u << 20);
	cr_assert_eq(tw_parse_size("2G", &v), 0);
	cr_assert_eq(v, 2ull << 30);
	cr_assert_eq(tw_parse_size("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_lt(tw_parse_size("", &v), 0);
	cr_assert_lt(tw_parse_size("K", &v), 0);
	cr_assert_lt(tw_parse_size("12Q", &v), 0);
	cr_assert_lt(tw_parse_size("12KK", &v), 0);
	cr_assert_lt(tw_parse_size("-1", &v), 0);
	cr_assert_lt(tw_parse_size(" 1", &v), 0);
	cr_assert_lt(tw_parse_size("1.5M", &v), 0);
	cr_assert_eq(tw_parse_size("99999999999999999999", &v), -ERANGE);
	cr_assert_eq(tw_parse_size("17179869184G", &v), -ERANGE);
}

Test(parse, times)
{
	uint32_t v;

	cr_assert_eq(tw_parse_ms("100ms", &v), 0);
	cr_assert_eq(v, 100);
	cr_assert_eq(tw_parse_ms("30s", &v), 0);
	cr_assert_eq(v, 30000);
	cr_assert_eq(tw_parse_ms("2m", &v), 0);
	cr_assert_eq(v, 120000);
	cr_assert_eq(tw_parse_ms("5", &v), 0);
	cr_assert_eq(v, 5000);
	cr_assert_lt(tw_parse_ms("", &v), 0);
	cr_assert_eq(tw_parse_ms("5h", &v), 0);
	cr_assert_eq(v, 5u * 3600 * 1000);
	cr_assert_eq(tw_parse_ms("7d", &v), 0);
	cr_assert_eq(v, 7u * 24 * 3600 * 1000);
	cr_assert_eq(tw_parse_ms("50d", &v), -ERANGE);
	cr_assert_lt(tw_parse_ms("5w", &v), 0);
	cr_assert_lt(tw_parse_ms("5 s", &v), 0);
	cr_assert_lt(tw_parse_ms("ms", &v), 0);
	cr_assert_lt(tw_parse_ms("5mss", &v), 0);
	cr_assert_eq(tw_parse_ms("4294967295ms", &v), 0);
	cr_assert_eq(v, UINT32_MAX);
	cr_assert_eq(tw_parse_ms("4294968s", &v), -ERANGE);
}

/* ----------------------------------------------------------------- conf */

static char conf_path[64];

static void write_conf(const char *text)
{
	snprintf(conf_path, sizeof(conf_path), "/tmp/twinfs-test-conf.XXXXXX");
	int fd = mkstemp(conf_path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Load `text`; returns rc and leaves the message in err. */
static int load(const char *text, struct tw_conf *c, char *err, size_t len)
{
	int rc;

	write_conf(text);
	rc = tw_conf_load(conf_path, c, err, len);
	unlink(conf_path);
	return rc;
}

/* A secret in a file readable by others is refused, the message naming
 * the file, its mode and the fix; so is the example's placeholder. */
Test(conf, secret_file_rules)
{
	static const char text[] = "[cluster]\nsecret = 0123abcd\n"
				   "[iod 1]\nhost = h1\ndir = /d1\n"
				   "[iod 2]\nhost = h2\ndir = /d2\n";
	struct tw_conf c;
	char err[512];
	char want[128];

	write_conf(text);
	cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)), 0, "%s",
		     err);
	for (mode_t m = 0640; m <= 0644; m += 4) {
		cr_assert_eq(chmod(conf_path, m), 0);
		cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)),
			     -EACCES, "mode %o", (unsigned)m);
		snprintf(want, sizeof(want), "mode %04o", (unsigned)m);
		cr_assert(strstr(err, want) && strstr(err, conf_path) &&
			  strstr(err, "chmod 600"), "message: %s", err);
	}
	/* no secret: any mode */
	unlink(conf_path);
	write_conf("[iod 1]\nhost = h1\ndir = /d1\n"
		   "[iod 2]\nhost = h2\ndir = /d2\n");
	cr_assert_eq(chmod(conf_path, 0644), 0);
	cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)), 0, "%s",
		     err);
	unlink(conf_path);
	cr_assert_eq(load("[cluster]\nsecret = CHANGE-ME  # openssl rand\n"
			  "[iod 1]\nhost = h1\ndir = /d1\n"
			  "[iod 2]\nhost = h2\ndir = /d2\n", &c, err,
			  sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "openssl rand -hex 32"), "message: %s", err);
}

#define FOUR_IODS \
	"[iod 1]\nhost = h1\ndir = /d1\n" \
	"[iod 2]\nhost = h2\ndir = /d2\n" \
	"[iod 3]\nhost = h3\ndir = /d3\n" \
	"[iod 4]\nhost = h4\ndir = /d4\n"

Test(conf, defaults)
{
	struct tw_conf c;

	tw_conf_defaults(&c);
	cr_assert_str_eq(c.cluster_name, "twinfs");
	cr_assert_str_eq(c.secret, "");
	cr_assert_eq(c.stripe_size, 512u << 10);
	cr_assert_eq(c.stripe_count, 0);
	cr_assert_eq(c.monitor_interval_ms, 30000);
	cr_assert_eq(c.down_after, 2);
	cr_assert_eq(c.request_timeout_ms, 5000);
	cr_assert_eq(c.mgr_timeout_ms, 120000);
	cr_assert_eq(c.commit_interval_ms, 5000);
	cr_assert_eq(c.session_timeout_ms, 90000);
	cr_assert_eq(c.lock_grace_ms, 5000);
	cr_assert(c.auto_resync);
	cr_assert(!c.root_squash);
	cr_assert_str_eq(c.mgr_host, "127.0.0.1");
	cr_assert_eq(c.mgr_port, 7500);
	cr_assert_eq(c.journal_mode, TW_JNL_JOURNAL);
	cr_assert_eq(c.journal_size, 256ull << 20);
	cr_assert_eq(c.iod_reserve, 64ull << 20);
	cr_assert_eq(c.scrub_interval_ms, 7u * 24 * 3600 * 1000);
	cr_assert_eq(c.scrub_rate_mb, 32);
	cr_assert_eq(c.twin_spin_us, 40);
	cr_assert_eq(c.n_iods, 0);
}

Test(conf, good_file)
{
	struct tw_conf c;
	char err[256];
	int rc = load(
		"# a test cluster\n"
		"[cluster]\n"
		"name = lab   ; inline comment\n"
		"secret = s3cr#t\n"
		"stripe_size = 1M\n"
		"stripe_count = 1\n"
		"monitor_interval = 100ms\n"
		"down_after = 3\n"
		"request_timeout = 2s\n"
		"mgr_timeout = 1m\n"
		"commit_interval = 1\n"
		"auto_resync = no\n"
		"root_squash = yes\n"
		"lock_grace = 1500ms\n"
		"\n"
		"[mgrd]\n"
		"  host = 10.0.0.5\n"
		"port=7600\n"
		"dir = /var/lib/twinfs/mgrd\n"
		"[iod]\n"
		"journal_mode = ordered\n"
		"journal_size = 64M\n"
		"reserve = 2G\n"
		"scrub_interval = 1d\n"
		"scrub_rate = 100\n"
		"twin_spin_us = 0\n"
		/* out of order and with explicit groups: 1+3, 2+4 */
		"[iod 2]\nhost = h2\nport = 7002\ndir = /d2\ngroup = 1\n"
		"[iod 1]\nhost = h1\nport = 7001\ndir = /d1\ngroup = 0\n"
		"[iod 4]\nhost = h4\nport = 7004\ndir = /d4\ngroup = 1\n"
		"[iod 3]\nhost = h3\nport = 7003\ndir = /d3\ngroup = 0\n",
		&c, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(c.cluster_name, "lab");
	cr_assert_str_eq(c.secret, "s3cr#t");
	cr_assert_eq(c.stripe_size, 1u << 20);
	cr_assert_eq(c.stripe_count, 1);
	cr_assert_eq(c.monitor_interval_ms, 100);
	cr_assert_eq(c.down_after, 3);
	cr_assert_eq(c.request_timeout_ms, 2000);
	cr_assert_eq(c.mgr_timeout_ms, 60000);
	cr_assert_eq(c.commit_interval_ms, 1000);
	cr_assert_eq(c.session_timeout_ms, 300, "3 x monitor_interval");
	cr_assert(!c.auto_resync);
	cr_assert(c.root_squash);
	cr_assert_eq(c.lock_grace_ms, 1500);
	cr_assert_str_eq(c.mgr_host, "10.0.0.5");
	cr_assert_eq(c.mgr_port, 7600);
	cr_assert_str_eq(c.mgr_dir, "/var/lib/twinfs/mgrd");
	cr_assert_eq(c.journal_mode, TW_JNL_ORDERED);
	cr_assert_eq(c.journal_size, 64u << 20);
	cr_assert_eq(c.iod_reserve, 2ull << 30);
	cr_assert_eq(c.scrub_interval_ms, 24u * 3600 * 1000);
	cr_assert_eq(c.scrub_rate_mb, 100);
	cr_assert_eq(c.twin_spin_us, 0);
	cr_assert_eq(c.n_iods, 4);
	cr_assert_eq(c.n_groups, 2);
	for (int i = 0; i < 4; i++) {
		const struct tw_conf_iod *d = tw_conf_iod(&c, i + 1);

		cr_assert_eq(d, &c.iods[i]);
		cr_assert_eq(d->id, i + 1);
		cr_assert_eq(d->port, 7001 + i);
		cr_assert_eq(d->group, i % 2);
		cr_assert_eq(d->twin_index, i / 2);
	}
	cr_assert_str_eq(c.iods[2].host, "h3");
	cr_assert_str_eq(c.iods[2].dir, "/d3");
	cr_assert_null(tw_conf_iod(&c, 0));
	cr_assert_null(tw_conf_iod(&c, 5));
}

Test(conf, implicit_groups_and_ports)
{
	struct tw_conf c;
	char err[256];
	int rc = load("[cluster]\nsession_timeout = 7s\nmonitor_interval = 1s\n"
		      FOUR_IODS, &c, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(c.session_timeout_ms, 7000, "explicit value kept");
	cr_assert_eq(c.n_groups, 2);
	cr_assert_eq(c.iods[0].group, 0);
	cr_assert_eq(c.iods[1].group, 0);
	cr_assert_eq(c.iods[2].group, 1);
	cr_assert_eq(c.iods[3].group, 1);
	cr_assert_eq(c.iods[1].twin_index, 1);
	cr_assert_eq(c.iods[2].twin_index, 0);
	cr_assert_eq(c.iods[2].port, 7503);
	cr_assert_eq(c.journal_mode, TW_JNL_JOURNAL);
}

/* Expect failure with a message containing `what` and ":line:". */
static void expect_error(const char *text, int line, const char *what)
{
	struct tw_conf c;
	char err[256], where[32];
	int rc = load(text, &c, err, sizeof(err));

	cr_assert_eq(rc, -EINVAL, "accepted: %s", text);
	cr_assert_not_null(strstr(err, conf_path), "%s", err);
	if (line > 0) {
		snprintf(where, sizeof(where), ":%d: ", line);
		cr_assert_not_null(strstr(err, where), "want line %d: %s", line, err);
	}
	cr_assert_not_null(strstr(err, what), "want '%s': %s", what, err);
}

Test(conf, errors)
{
	expect_error("[cluster]\nstripe_size = 12Q\n" FOUR_IODS, 2, "bad size");
	expect_error("[cluster]\nstripe_size = 96K\n" FOUR_IODS, 2, "power of two");
	expect_error("[cluster]\nstripe_size = 32K\n" FOUR_IODS, 2, "power of two");
	expect_error("[cluster]\nstripe_size = 128M\n" FOUR_IODS, 2, "power of two");
	expect_error("[iod]\njournal_size = lots\n" FOUR_IODS, 2, "bad size");
	expect_error("[iod]\nreserve = lots\n" FOUR_IODS, 2, "bad size");
	expect_error("[iod]\nreserve = 8M\n" FOUR_IODS, 2, "minimum 16M");
	expect_error("[iod]\nscrub_rate = 0\n" FOUR_IODS, 2, "1..10000");
	expect_error("[iod]\ntwin_spin_us = 1001\n" FOUR_IODS, 2, "0..1000");
	expect_error("[iod]\ntwin_spin_us = 20us\n" FOUR_IODS, 2, "0..1000");
	expect_error("[iod]\nscrub_interval = weekly\n" FOUR_IODS, 2,
		     "bad time");
	expect_error("[cluster]\nmonitor_interval = 5w\n" FOUR_IODS, 2, "bad time");
	expect_error("[cluster]\nrequest_timeout = 0\n" FOUR_IODS, 2, "greater than 0");
	expect_error("[cluster]\nauto_resync = maybe\n" FOUR_IODS, 2, "boolean");
	expect_error("[iod]\njournal_mode = fast\n" FOUR_IODS, 2, "journal, ordered");
	expect_error("[mgrd]\nport = 70000\n" FOUR_IODS, 2, "bad port");
	expect_error("[cluster]\ncolour = blue\n" FOUR_IODS, 2, "unknown key");
	expect_error("[cluster]\nname = a\nname = b\n" FOUR_IODS, 3, "set twice");
	expect_error("[clutser]\n" FOUR_IODS, 1, "unknown section");
	expect_error("[cluster\n" FOUR_IODS, 1, "malformed");
	expect_error("name = x\n" FOUR_IODS, 1, "outside of any section");
	expect_error("[cluster]\njust words\n" FOUR_IODS, 2, "key = value");
	expect_error("[cluster]\n[cluster]\n" FOUR_IODS, 2, "duplicate section");
	/* Duplicate iod: line 13 is the second [iod 1]. */
	expect_error(FOUR_IODS "[iod 1]\nhost = h9\n", 13, "duplicate section [iod 1]");
	expect_error("[iod 0]\n", 1, "bad iod number");
	expect_error("[iod 65]\n", 1, "bad iod number");
	/* A group with one iod: iods 1..3, iod 3 alone in group 1. */
	expect_error("[iod 1]\n[iod 2]\nport = 7600\n[iod 3]\nport = 7700\n", 4,
		     "twin group 1 has only iod 3");
	/* A group with three iods. */
	expect_error(FOUR_IODS "[iod 5]\ngroup = 0\nhost = h5\n[iod 6]\nhost = h6\n",
		     13, "already holds iods 1 and 2");
	/* A gap in the groups. */
	expect_error("[iod 1]\nhost = a\ngroup = 2\n[iod 2]\nhost = b\ngroup = 2\n",
		     0, "twin group 0 has no iods");
	/* A gap in the ids: line 10 is [iod 4]. */
	expect_error("[iod 1]\nhost=a\n[iod 2]\nhost=b\n[iod 3]\nhost=c\n"
		     "[iod 5]\nhost=d\n", 7, "[iod 4] is missing");
	expect_error("[cluster]\nname = x\n", 0, "no [iod N]");
	/* Address and directory clashes. */
	expect_error("[iod 1]\nport = 9000\n[iod 2]\nport = 9000\n", 3, "address of iod 1");
	expect_error("[iod 1]\ndir = /x\n[iod 2]\ndir = /x\n", 3, "directory /x");
	expect_error("[iod 1]\nport = 7500\n[iod 2]\n", 1, "address of mgrd");
	expect_error("[cluster]\nstripe_count = 33\n" FOUR_IODS, 2, "bad count");
	expect_error("[cluster]\nchannel = tls\n" FOUR_IODS, 2,
		     "integrity, encrypt or none");
}

/* [mgrd 1] + [mgrd 2]: a pair; the mgr_* fields are mgrd 1's until
 * tw_conf_select_mgrd (twinfs-mgrd --id) picks the other. */
Test(conf, mgrd_pair)
{
	struct tw_conf c;
	char err[256];

	cr_assert_eq(load("[mgrd]\nmax_locks_per_session = 9\n"
			  "[mgrd 2]\nhost = 10.0.0.6\nport = 7600\n"
			  "dir = /m2\nmetrics = 10.0.0.6:8600\n"
			  "[mgrd 1]\nhost = 10.0.0.5\ndir = /m1\n" FOUR_IODS,
			  &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.n_mgrds, 2);
	cr_assert_eq(c.mgrd_self, 1);
	cr_assert_eq(c.max_locks_per_session, 9);
	cr_assert_str_eq(c.mgrd[0].host, "10.0.0.5");
	cr_assert_eq(c.mgrd[0].port, 7500, "default port");
	cr_assert_str_eq(c.mgrd[0].dir, "/m1");
	cr_assert_eq(c.mgrd[0].metrics_port, 0);
	cr_assert_str_eq(c.mgrd[1].host, "10.0.0.6");
	cr_assert_eq(c.mgrd[1].port, 7600);
	cr_assert_str_eq(c.mgrd[1].dir, "/m2");
	cr_assert_str_eq(c.mgrd[1].metrics_host, "10.0.0.6");
	cr_assert_eq(c.mgrd[1].metrics_port, 8600);
	cr_assert_str_eq(c.mgr_host, "10.0.0.5");
	cr_assert_eq(c.mgr_port, 7500);
	cr_assert_str_eq(c.mgr_dir, "/m1");
	cr_assert_eq(tw_conf_select_mgrd(&c, 2), 0);
	cr_assert_eq(c.mgrd_self, 2);
	cr_assert_str_eq(c.mgr_host, "10.0.0.6");
	cr_assert_eq(c.mgr_port, 7600);
	cr_assert_str_eq(c.mgr_dir, "/m2");
	cr_assert_eq(c.mgr_metrics_port, 8600);
	cr_assert_eq(tw_conf_select_mgrd(&c, 3), -EINVAL);
	cr_assert_eq(tw_conf_select_mgrd(&c, 0), -EINVAL);

	/* one mgrd: as before, and mgrd[0] mirrors [mgrd] */
	cr_assert_eq(load("[mgrd]\nhost = 10.0.0.9\nport = 7700\ndir = /m\n"
			  FOUR_IODS, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.n_mgrds, 1);
	cr_assert_eq(c.mgrd_self, 1);
	cr_assert_str_eq(c.mgrd[0].host, "10.0.0.9");
	cr_assert_eq(c.mgrd[0].port, 7700);
	cr_assert_str_eq(c.mgrd[0].dir, "/m");
	cr_assert_eq(tw_conf_select_mgrd(&c, 1), 0);
	cr_assert_eq(tw_conf_select_mgrd(&c, 2), -EINVAL);
	cr_assert_eq(load(FOUR_IODS, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.n_mgrds, 1);
	cr_assert_str_eq(c.mgrd[0].host, "127.0.0.1");
	cr_assert_eq(c.mgrd[0].port, 7500);
}

Test(conf, mgrd_pair_errors)
{
	expect_error("[mgrd 1]\nhost = a\n" FOUR_IODS, 1,
		     "[mgrd 1] without [mgrd 2]");
	expect_error("[mgrd 2]\nhost = a\n" FOUR_IODS, 1,
		     "[mgrd 2] without [mgrd 1]");
	expect_error("[mgrd 3]\n" FOUR_IODS, 1, "bad mgrd number");
	expect_error("[mgrd 0]\n" FOUR_IODS, 1, "bad mgrd number");
	expect_error("[mgrd 1]\n[mgrd 2]\nhost = b\n[mgrd 1]\n" FOUR_IODS, 4,
		     "duplicate section [mgrd 1]");
	expect_error("[mgrd]\nlease_tim = 1\n", 2, "unknown key");
	expect_error("[mgrd 1]\nmax_locks_per_session = 5\n", 2,
		     "unknown key 'max_locks_per_session' in [mgrd N]");
	/* [mgrd]'s address next to a pair, named at its line */
	expect_error("[mgrd]\nmax_locks_per_session = 5\ndir = /x\n"
		     "[mgrd 1]\nhost = a\n[mgrd 2]\nhost = b\n" FOUR_IODS, 3,
		     "[mgrd] holds host, port, dir or metrics");
	expect_error("[mgrd 1]\nhost = a\n[mgrd 2]\nhost = a\n" FOUR_IODS, 3,
		     "mgrd 2 uses a:7500, the address of mgrd 1");
	expect_error("[mgrd 1]\ndir = /m\n[mgrd 2]\nport = 7600\ndir = /m\n"
		     FOUR_IODS, 3, "directory /m");
	expect_error("[mgrd 1]\n[mgrd 2]\nport = 7501\n[iod 1]\n[iod 2]\n",
		     4, "iod 1 uses 127.0.0.1:7501, the address of mgrd 2");
	expect_error("[mgrd 1]\nmetrics = 127.0.0.1:7600\n[mgrd 2]\n"
		     "port = 7600\n" FOUR_IODS, 1,
		     "[mgrd 1] metrics 127.0.0.1:7600 is the address of mgrd 2");
}

Test(conf, channel)
{
	struct tw_conf c;
	char err[256];

	tw_conf_defaults(&c);
	cr_assert_eq(c.channel, TW_CHANNEL_DEFAULT);
	cr_assert_str_eq(tw_channel_name(c.channel), "integrity");
	cr_assert_eq(load("[cluster]\nchannel = encrypt\n" FOUR_IODS, &c, err,
			  sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.channel, TW_CHANNEL_ENCRYPT);
	cr_assert_eq(load("[cluster]\nchannel = none\n" FOUR_IODS, &c, err,
			  sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.channel, TW_CHANNEL_NONE);
}

/* deploy/twinfs.conf.example must stay loadable once its placeholder
 * secret is replaced, and be refused before; found next to this source
 * (meson runs tests from the build directory, __FILE__ is relative to it). */
Test(conf, shipped_example)
{
	char path[PATH_MAX], err[512], *text, *at;
	const char *slash = strrchr(__FILE__, '/');
	struct tw_conf c;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%.*s/../../deploy/twinfs.conf.example",
		 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	if (access(path, R_OK) != 0)
		cr_skip_test("%s not found", path);
	cr_assert_eq(tw_conf_load(path, &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "placeholder"), "%s", err);
	/* the operator's step: a generated secret, in a 0600 copy */
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	text = calloc(1, (size_t)st.st_size + 1);
	cr_assert_eq(read(fd, text, (size_t)st.st_size), st.st_size);
	close(fd);
	at = strstr(text, "secret = CHANGE-ME");
	cr_assert_not_null(at);
	memcpy(at + strlen("secret = "), "0123456789", 9);
	write_conf(text);
	free(text);
	cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)), 0, "%s", err);
	unlink(conf_path);
	cr_assert_str_eq(c.mgr_host, "10.0.0.5");
	cr_assert_eq(c.n_iods, 4);
	cr_assert_eq(c.n_groups, 2);
	cr_assert_eq(c.iods[3].port, 7504);
	cr_assert_eq(c.iods[3].group, 1);
	cr_assert_eq(c.stripe_size, 512u << 10);
}

Test(conf, missing_file)
{
	struct tw_conf c;
	char err[256];

	cr_assert_eq(tw_conf_load("/nonexistent/twinfs.conf", &c, err, sizeof(err)),
		     -ENOENT);
	cr_assert_not_null(strstr(err, "/nonexistent/twinfs.conf"));
}

/* ----------------------------------------------------------------- misc */

Test(util, io_and_mkdir)
{
	char dir[] = "/tmp/twinfs-test-util.XXXXXX", path[256], buf[16];
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a/b//c/", dir);
	cr_assert_eq(tw_mkdir_p(path), 0);
	cr_assert_eq(tw_mkdir_p(path), 0, "existing is fine");
	snprintf(path, sizeof(path), "%s/a/b/c/f", dir);
	fd = open(path, O_CREAT | O_RDWR, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(tw_pwrite_all(fd, "hello", 5, 10), 0);
	cr_assert_eq(tw_pread_full(fd, buf, sizeof(buf), 8), 7);
	cr_assert_eq(memcmp(buf, "\0\0hello", 7), 0);
	cr_assert_eq(tw_pread_full(fd, buf, sizeof(buf), 100), 0);
	close(fd);
	cr_assert_eq(tw_mkdir_p(path), -ENOTDIR);
	cr_assert_eq(tw_random(buf, sizeof(buf)), 0);
	uint64_t t0 = tw_now_ns();

	cr_assert_geq(tw_now_ns(), t0);
	cr_assert_leq(tw_now_ms(), tw_now_ns() / 1000000 + 1);
	int64_t s;
	uint32_t ns;

	tw_realtime(&s, &ns);
	cr_assert_gt(s, 1600000000);
	cr_assert_lt(ns, 1000000000u);
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(log, lines_and_rate_limit)
{
	/* Smoke test: goes to stderr; checks it does not crash or clobber
	 * errno. */
	tw_log_init("test_common", TW_LOG_DEBUG);
	errno = EAGAIN;
	tw_info("hello %d", 1);
	cr_assert_eq(errno, EAGAIN);
	for (int i = 0; i < 10; i++)
		tw_log_rl(TW_LOG_WARN, "repeated %d", i);
	cr_assert(tw_log_enabled(TW_LOG_DEBUG));
	tw_log_init("test_common", TW_LOG_WARN);
	cr_assert(!tw_log_enabled(TW_LOG_INFO));
	cr_assert(tw_log_enabled(TW_LOG_ERR));
}

Test(time, relatime_rule)
{
	struct tw_ts t100 = { 100, 5 }, t100b = { 100, 6 }, t200 = { 200, 0 };
	struct tw_ts day = { 100 + 24 * 3600, 4 };

	/* atime <= mtime or <= ctime (equal included): update. */
	cr_assert(tw_relatime_due(t100, t100, t100, t200));
	cr_assert(tw_relatime_due(t100, t100b, t100, t200));
	cr_assert(tw_relatime_due(t100b, t100, t100b, t200));
	/* Newer than both and less than a day old: keep. */
	cr_assert(!tw_relatime_due(t100b, t100, t100, t200));
	/* A day later: update again. */
	cr_assert(tw_relatime_due(t100b, t100, t100, day));
	cr_assert(!tw_relatime_due(t200, t100, t100, day));
}

/* Published FNV-1a 64 test vectors. */
Test(util, fnv1a64_vectors)
{
	cr_assert_eq(tw_fnv1a64("", 0), 0xcbf29ce484222325ull);
	cr_assert_eq(tw_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
	cr_assert_eq(tw_fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

/* [client NAME]: keys, defaults (squash from root_squash), normalized
 * export, networks; and the errors that name the line. */
Test(conf, client_sections)
{
	static const char key[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	char text[2048], err[512];
	const struct tw_conf_client *cl;
	struct tw_conf c;

	snprintf(text, sizeof(text),
		 "[cluster]\nroot_squash = true\n"
		 "[iod 1]\nhost = h1\ndir = /d1\n"
		 "[iod 2]\nhost = h2\ndir = /d2\n"
		 "[client lab3]\nkey = %s\nexport = //scratch//x/\n"
		 "access = ro\nnetworks = 10.1.2.3/8, ::1\n"
		 "[client all]\nkey = %s\nsquash = all\nanonuid = 7\n", key, key);
	cr_assert_eq(load(text, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.n_clients, 2);
	cl = tw_conf_client(&c, "lab3");
	cr_assert_not_null(cl);
	cr_assert_eq(cl->key[1], 0x11);
	cr_assert_str_eq(cl->export_path, "/scratch/x");
	cr_assert(cl->read_only);
	cr_assert_eq(cl->squash, TW_SQUASH_ROOT);   /* from root_squash */
	cr_assert_eq(cl->anonuid, 65534);
	cr_assert_eq(cl->n_networks, 2);
	cr_assert(tw_cidr_match(&cl->networks[0], "10.200.0.1"));
	cr_assert(tw_cidr_match(&cl->networks[0], "::ffff:10.0.0.9"));
	cr_assert(!tw_cidr_match(&cl->networks[0], "11.0.0.1"));
	cr_assert(tw_cidr_match(&cl->networks[1], "::1"));
	cr_assert(!tw_cidr_match(&cl->networks[1], "127.0.0.1"));
	cl = tw_conf_client(&c, "all");
	cr_assert_eq(cl->squash, TW_SQUASH_ALL);
	cr_assert_eq(cl->anonuid, 7);
	cr_assert_str_eq(cl->export_path, "/");
	cr_assert_null(tw_conf_client(&c, "nobody"));

	/* A key missing, malformed, a bad name, a bad network. */
	snprintf(text, sizeof(text), "[iod 1]\n[iod 2]\n[client x]\n"
		 "access = ro\n");
	cr_assert_eq(load(text, &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "has no key"), "%s", err);
	snprintf(text, sizeof(text), "[iod 1]\n[iod 2]\n[client x]\n"
		 "key = 12\n");
	cr_assert_eq(load(text, &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, ":4:"), "%s", err);
	snprintf(text, sizeof(text), "[iod 1]\n[iod 2]\n[client a/b]\n");
	cr_assert_eq(load(text, &c, err, sizeof(err)), -EINVAL);
	snprintf(text, sizeof(text), "[iod 1]\n[iod 2]\n[client x]\nkey = %s\n"
		 "networks = 10.0.0.0/33\n", key);
	cr_assert_eq(load(text, &c, err, sizeof(err)), -EINVAL);
	snprintf(text, sizeof(text), "[iod 1]\n[iod 2]\n[client x]\nkey = %s\n"
		 "export = /a/../b\n", key);
	cr_assert_eq(load(text, &c, err, sizeof(err)), -EINVAL);
}

/* A file with client keys follows the secret's 0600 rule. */
Test(conf, client_keys_file_mode)
{
	static const char text[] =
		"[iod 1]\n[iod 2]\n[client x]\nkey = "
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
	struct tw_conf c;
	char err[512];

	write_conf(text);
	chmod(conf_path, 0644);
	cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)), -EACCES);
	chmod(conf_path, 0600);
	cr_assert_eq(tw_conf_load(conf_path, &c, err, sizeof(err)), 0, "%s",
		     err);
	unlink(conf_path);
}

/* [mgrd] lease_time (docs/ARCHITECTURE.md "Election"). */
Test(conf, mgrd_lease_time)
{
	struct tw_conf c;
	char err[256];

	cr_assert_eq(load("[mgrd]\n" FOUR_IODS, &c, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(c.mgrd_lease_ms, 3000);
	cr_assert_eq(load("[mgrd]\nlease_time = 1500ms\n" FOUR_IODS, &c, err,
			  sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.mgrd_lease_ms, 1500);
	expect_error("[mgrd]\nlease_time = 100ms\n", 2, "out of range");
	expect_error("[mgrd]\nlease_time = 2m\n", 2, "out of range");
	expect_error("[mgrd]\nlease_time = soon\n", 2, "bad time");
}

/* [mgrd] snapshot_timeout (mgrd/snapfork.c): a time, 0 or off = none. */
Test(conf, mgrd_snapshot_timeout)
{
	static const struct {
		const char *val;
		uint32_t ms;
	} ok[] = { { "30m", 1800000 }, { "90", 90000 }, { "off", 0 },
		   { "0", 0 } };
	struct tw_conf c;
	char err[256], text[512];

	cr_assert_eq(load("[mgrd]\n" FOUR_IODS, &c, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(c.snapshot_timeout_ms, 600000);
	for (size_t i = 0; i < TW_ARRAY_SIZE(ok); i++) {
		snprintf(text, sizeof(text),
			 "[mgrd]\nsnapshot_timeout = %s\n" FOUR_IODS, ok[i].val);
		cr_assert_eq(load(text, &c, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(c.snapshot_timeout_ms, ok[i].ms, "%s", ok[i].val);
	}
	expect_error("[mgrd]\nsnapshot_timeout = never\n", 2, "bad time");
}

/* The vote file (common/FORMAT.md "Vote file"): absent = a new voter,
 * a round trip, and damage or another version refused, never read as a
 * forgotten promise. */
Test(vote, file)
{
	char dir[] = "/tmp/twinfs-test-vote.XXXXXX", path[64];
	struct tw_vote_disk v = { 7, 2, 1 }, w;
	unsigned char b;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(tw_vote_load(dir, &w), 0);
	cr_assert_eq(w.term, 0);
	cr_assert_eq(w.holder, 0);
	cr_assert_eq(tw_vote_save(dir, &v), 0);
	cr_assert_eq(tw_vote_load(dir, &w), 0);
	cr_assert_eq(w.term, 7);
	cr_assert_eq(w.holder, 2);
	cr_assert_eq(w.stale, 1);
	v.term = 1ull << 40;
	cr_assert_eq(tw_vote_save(dir, &v), 0);
	cr_assert_eq(tw_vote_load(dir, &w), 0);
	cr_assert_eq(w.term, 1ull << 40);
	snprintf(path, sizeof(path), "%s/" TW_VOTE_FILE, dir);
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	/* a flipped bit of the term: the crc catches it */
	cr_assert_eq(pread(fd, &b, 1, 8), 1);
	b ^= 1;
	cr_assert_eq(pwrite(fd, &b, 1, 8), 1);
	cr_assert_eq(tw_vote_load(dir, &w), -EUCLEAN);
	/* short */
	cr_assert_eq(ftruncate(fd, 10), 0);
	cr_assert_eq(tw_vote_load(dir, &w), -EUCLEAN);
	close(fd);
	unlink(path);
	rmdir(dir);
}

/* oset.c against a model (a bitmap over a small key space, so that adds,
 * deletes and cursors collide often): every listing from every kind of
 * cursor, page sizes across chunk boundaries, chunks split and merged,
 * and the bound of O2 (no more chunks than twice the keys need). */
#define OSET_SPACE 20000u
static bool oset_model[OSET_SPACE];

static void oset_check(const struct tw_oset *s, uint64_t after, size_t max)
{
	static uint64_t out[OSET_SPACE + 1];
	bool more;
	size_t n = tw_oset_after(s, after, out, max, &more);
	uint64_t k = after + 1;

	if (after == UINT64_MAX) {
		cr_assert(n == 0 && !more);
		return;
	}
	cr_assert_leq(n, max);
	for (size_t i = 0; i < n; i++) {
		while (k < OSET_SPACE && !oset_model[k])
			k++;
		cr_assert_lt(k, OSET_SPACE, "key %llu listed, not in the set",
			     (unsigned long long)out[i]);
		cr_assert_eq(out[i], k, "after %llu: key %zu is %llu, want %llu",
			     (unsigned long long)after, i,
			     (unsigned long long)out[i], (unsigned long long)k);
		k++;
	}
	while (k < OSET_SPACE && !oset_model[k])
		k++;
	/* more exactly when a key follows the last one written */
	cr_assert_eq(more, k < OSET_SPACE, "after %llu, max %zu: more %d",
		     (unsigned long long)after, max, more);
	if (n < max)
		cr_assert_not(more, "a short page, and more");
}

Test(oset, against_a_model)
{
	struct tw_oset s;
	uint64_t seed = 12345;
	size_t count = 0;

	tw_oset_init(&s);
	cr_assert_not(tw_oset_del(&s, 5));
	oset_check(&s, 0, 10);
	for (int round = 0; round < 6; round++) {
		/* adds outweigh deletes in even rounds, deletes in odd ones */
		for (int op = 0; op < 30000; op++) {
			uint64_t k;
			bool add;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			k = (seed >> 33) % OSET_SPACE;
			add = ((seed >> 20) % 10) < (round % 2 ? 3u : 7u);
			if (add) {
				cr_assert_eq(tw_oset_add(&s, k), 0);
				count += !oset_model[k];
				oset_model[k] = true;
			} else {
				cr_assert_eq(tw_oset_del(&s, k), oset_model[k]);
				count -= oset_model[k];
				oset_model[k] = false;
			}
			cr_assert_eq(tw_oset_has(&s, k), oset_model[k]);
		}
		cr_assert_eq(s.count, count);
		cr_assert_leq(s.n_chunks, 2 * (count / TW_OSET_CHUNK) + 2,
			      "%zu chunks for %zu keys", s.n_chunks, count);
		oset_check(&s, 0, OSET_SPACE);
		oset_check(&s, 0, 0);
		for (uint64_t a = 0; a < OSET_SPACE; a += 997)
			for (size_t max = 1; max < 3 * TW_OSET_CHUNK; max += 131)
				oset_check(&s, a, max);
		oset_check(&s, UINT64_MAX, 10);
		oset_check(&s, OSET_SPACE, 10);
		/* paging visits every key once, in order */
		{
			uint64_t page[100], a = 0, prev = 0;
			size_t seen = 0;
			bool more = true, first = true;

			while (more) {
				size_t n = tw_oset_after(&s, a, page, 100, &more);

				for (size_t i = 0; i < n; i++) {
					cr_assert(first || page[i] > prev);
					prev = page[i];
					first = false;
				}
				seen += n;
				if (n)
					a = page[n - 1];
			}
			/* the cursor 0 is exclusive: key 0 is not seen */
			cr_assert_eq(seen, count - oset_model[0],
				     "paging saw %zu of %zu", seen, count);
		}
	}
	/* A set loaded from sorted keys is the same set, and takes adds and
	 * deletes as one built by adds. */
	{
		static uint64_t all[OSET_SPACE];
		struct tw_oset l;
		size_t n = 0;

		for (uint64_t k = 0; k < OSET_SPACE; k++)
			if (oset_model[k])
				all[n++] = k;
		tw_oset_init(&l);
		cr_assert_eq(tw_oset_load(&l, all, n), 0);
		cr_assert_eq(l.count, count);
		for (uint64_t a = 0; a < OSET_SPACE; a += 1999)
			oset_check(&l, a, 700);
		for (uint64_t k = 0; k < OSET_SPACE; k += 3) {
			if (oset_model[k])
				cr_assert(tw_oset_del(&l, k));
			else
				cr_assert_eq(tw_oset_add(&l, k), 0);
			oset_model[k] = !oset_model[k];
		}
		oset_check(&l, 0, OSET_SPACE);
		tw_oset_free(&l);
		for (uint64_t k = 0; k < OSET_SPACE; k += 3)
			oset_model[k] = !oset_model[k];
	}
	/* Keys at both ends of the range. */
	cr_assert_eq(tw_oset_add(&s, UINT64_MAX), 0);
	cr_assert_eq(tw_oset_add(&s, 0), 0);
	cr_assert(tw_oset_has(&s, UINT64_MAX));
	cr_assert(tw_oset_del(&s, UINT64_MAX));
	tw_oset_free(&s);
	cr_assert_eq(s.count, 0);
}

/* ------------------------------------------------------------------ spin */

#define US 1000ull   /* ns */

Test(spin, off_never_polls)
{
	struct tw_spin s;

	tw_spin_init(&s, 0);
	tw_spin_arm(&s, 1000 * US);
	cr_assert_eq(tw_spin_until(&s, 1000 * US), 0);
}

Test(spin, armed_wait_polls_until_its_budget)
{
	struct tw_spin s;

	tw_spin_init(&s, 20);
	cr_assert_eq(tw_spin_until(&s, 1000 * US), 0, "nothing armed");
	tw_spin_arm(&s, 1000 * US);
	cr_assert(tw_spin_armed(&s));
	cr_assert_eq(tw_spin_until(&s, 1005 * US), 1020 * US,
		     "from the wait's start, not from now");
	cr_assert_eq(tw_spin_until(&s, 1020 * US), 0, "budget spent");
	tw_spin_done(&s, 1008 * US);
	cr_assert(!tw_spin_armed(&s));
	cr_assert_eq(tw_spin_until(&s, 1009 * US), 0, "disarmed");
	cr_assert_eq(s.score, TW_SPIN_SCORE_MAX, "an 8 us wait fits in 20");
	tw_spin_done(&s, 2000 * US);   /* no wait armed: nothing counted */
	cr_assert_eq(s.score, TW_SPIN_SCORE_MAX);
}

/* One wait in three beyond the budget keeps the polling; waits that
 * mostly outgrow it stop it; after that only every TW_SPIN_PROBE-th wait
 * polls, and quick ones bring polling back at once. */
Test(spin, adapts_to_the_waits_measured)
{
	struct tw_spin s;
	uint64_t t = 1000 * US;
	int polled = 0;

	tw_spin_init(&s, 40);
	for (int i = 0; i < 30; i++, t += 1000 * US) {
		tw_spin_arm(&s, t);
		cr_assert_neq(tw_spin_until(&s, t), 0, "wait %d polls", i);
		tw_spin_done(&s, t + (i % 3 == 2 ? 90 : 25) * US);
	}

	/* A peer gone slow or a caller gone idle: three long waits. */
	for (int i = 0; i < 3; i++, t += 1000 * US) {
		tw_spin_arm(&s, t);
		tw_spin_done(&s, t + 50000 * US);
	}
	for (int i = 0; i < 3 * (int)TW_SPIN_PROBE; i++, t += 1000 * US) {
		tw_spin_arm(&s, t);
		if (tw_spin_until(&s, t))
			polled++;
		tw_spin_done(&s, t + 50000 * US);
	}
	cr_assert_eq(polled, 3, "one probe in every %u waits", TW_SPIN_PROBE);

	/* Quick again: the next probe finds it, and polling goes on. */
	polled = 0;
	for (int i = 0; i < (int)TW_SPIN_PROBE + 5; i++, t += 1000 * US) {
		tw_spin_arm(&s, t);
		if (tw_spin_until(&s, t))
			polled++;
		tw_spin_done(&s, t + 3 * US);
	}
	cr_assert_geq(polled, 5, "polling came back (%d polled)", polled);
	tw_spin_arm(&s, t);
	cr_assert_neq(tw_spin_until(&s, t), 0);
}

/* Requests in flight: each answer ends the wait of the oldest and arms
 * one for the next while any is left. */
Test(spin, landed_rearms_while_requests_are_in_flight)
{
	struct tw_spin s;

	tw_spin_init(&s, 40);
	tw_spin_arm(&s, 1000 * US);
	tw_spin_landed(&s, 1, 1010 * US);
	cr_assert(tw_spin_armed(&s), "one left: armed again");
	cr_assert_eq(tw_spin_until(&s, 1011 * US), 1050 * US,
		     "from the answer, not from the first send");
	tw_spin_landed(&s, 0, 1100 * US);
	cr_assert(!tw_spin_armed(&s), "none left");
	cr_assert_eq(s.score, (3 * TW_SPIN_SCORE_MAX + 0) / 4,
		     "the 90 us wait missed the 40 us budget");
}

Test(spin, poll_returns_when_readable_or_at_the_deadline)
{
	int p[2];
	uint64_t t0;

	cr_assert_eq(pipe(p), 0);
	t0 = tw_now_ns();
	cr_assert(!tw_spin_poll(p[0], t0 + 300 * US), "nothing to read");
	cr_assert(tw_now_ns() >= t0 + 300 * US, "polled to the deadline");
	cr_assert_eq(write(p[1], "x", 1), 1);
	t0 = tw_now_ns();
	cr_assert(tw_spin_poll(p[0], t0 + 1000000 * US), "readable");
	cr_assert(tw_now_ns() - t0 < 500000 * US, "at once, not at the "
		  "deadline");
	cr_assert(tw_spin_poll(p[0], 0), "a deadline passed still looks once");
	close(p[0]);
	close(p[1]);
}

/* ------------------------------------------------------- tw_wait_free */

static int free_on_third(void *arg)
{
	int *calls = arg;

	return ++*calls == 3 ? 1 : 0;
}

static int fails(void *arg)
{
	(void)arg;
	return -EIO;
}

Test(wait_free, asks_until_free_or_the_bound)
{
	unsigned waited;
	int calls = 0;

	cr_assert_eq(tw_wait_free(free_on_third, &calls, 1000, &waited), 0);
	cr_assert_eq(calls, 3);
	cr_assert_eq(waited, 20, "two 10 ms waits");
	calls = -100;
	cr_assert_eq(tw_wait_free(free_on_third, &calls, 0, &waited),
		     -ETIMEDOUT, "0: asked once");
	cr_assert_eq(calls, -99);
	cr_assert_eq(waited, 0);
	calls = -100;
	cr_assert_eq(tw_wait_free(free_on_third, &calls, 30, &waited),
		     -ETIMEDOUT);
	cr_assert_eq(calls, -96, "at 0, 10, 20 and 30 ms");
	cr_assert_eq(waited, 30);
	cr_assert_eq(tw_wait_free(fails, NULL, 1000, &waited), -EIO);
	cr_assert_eq(waited, 0);
}

Test(wait_free, flock_free_tells_held_from_taken)
{
	char path[] = "/tmp/twinfs-flock-XXXXXX";
	int a = mkstemp(path), b, bad = -1;
	unsigned waited;

	cr_assert(a >= 0);
	b = open(path, O_RDONLY);
	cr_assert(b >= 0);
	cr_assert_eq(tw_flock_free(&a), 1);
	cr_assert_eq(tw_flock_free(&a), 1, "its own lock again");
	cr_assert_eq(tw_flock_free(&b), 0, "another open file holds it");
	cr_assert_eq(tw_wait_free(tw_flock_free, &b, 20, &waited),
		     -ETIMEDOUT);
	close(a);
	cr_assert_eq(tw_wait_free(tw_flock_free, &b, 20, &waited), 0);
	cr_assert_eq(waited, 0);
	cr_assert_eq(tw_flock_free(&bad), -EBADF);
	close(b);
	unlink(path);
}

/* ------------------------------------------------------------ stall watch */

static struct tw_cpu cpu_at(uint64_t user_ms, uint64_t sys_ms, uint64_t waits,
			    uint64_t preempts)
{
	return (struct tw_cpu){ user_ms * 1000, sys_ms * 1000, waits,
				preempts };
}

Test(stall, late_ticks_are_stalls_with_what_the_thread_did)
{
	struct tw_stall s = { 0 };
	struct tw_cpu c, spent = { 0 };

	c = cpu_at(10, 5, 100, 3);
	cr_assert_eq(tw_stall_note(&s, 5000, &c, &spent), 0, "first: records");
	c = cpu_at(11, 5, 104, 3);
	cr_assert_eq(tw_stall_note(&s, 5100, &c, &spent), 0, "on time");
	c = cpu_at(12, 6, 110, 3);
	cr_assert_eq(tw_stall_note(&s, 5100 + TW_STALL_PERIOD_MS +
				   TW_STALL_WARN_MS - 1, &c, &spent), 0,
		     "late, but by less than the warning");
	cr_assert_eq(s.count, 0);
	/* held 412 ms: 30 ms of CPU, 2 sleeps, 40 preemptions */
	s.last_ms = 6000;
	c = cpu_at(32, 16, 112, 43);
	cr_assert_eq(tw_stall_note(&s, 6000 + TW_STALL_PERIOD_MS + 412, &c,
				   &spent), 412);
	cr_assert_eq(spent.user_us, 20000);
	cr_assert_eq(spent.sys_us, 10000);
	cr_assert_eq(spent.waits, 2);
	cr_assert_eq(spent.preempts, 40);
	cr_assert_eq(s.count, 1);
	cr_assert_eq(s.max_ms, 412);
	c = cpu_at(33, 16, 113, 43);
	cr_assert_eq(tw_stall_note(&s, s.last_ms + TW_STALL_PERIOD_MS + 150,
				   &c, &spent), 150);
	cr_assert_eq(s.count, 2);
	cr_assert_eq(s.max_ms, 412, "the longest stays");
	/* a counter that went back (it cannot, but never wraps) */
	c = cpu_at(0, 0, 0, 0);
	cr_assert_eq(tw_stall_note(&s, s.last_ms + TW_STALL_PERIOD_MS + 200,
				   &c, &spent), 200);
	cr_assert_eq(spent.user_us, 0);
	cr_assert_eq(spent.waits, 0);
}

static void hold_loop(uv_timer_t *t)
{
	(void)t;
	usleep(350 * 1000);     /* a callback that blocks the loop */
}

static void end_loop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

/* The watch on a real loop sees a callback that sleeps 350 ms as a
 * stall of about that long (the tick due inside it runs 250-350 ms
 * late). */
Test(stall, a_blocking_callback_is_seen)
{
	uv_loop_t loop;
	uv_timer_t hold, end;
	const struct tw_stall *s;

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(tw_stall_start(&loop), 0);
	uv_timer_init(&loop, &hold);
	uv_timer_init(&loop, &end);
	uv_timer_start(&hold, hold_loop, 250, 0);
	uv_timer_start(&end, end_loop, 900, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	s = tw_stall_get();
	cr_assert_geq(s->count, 1);
	cr_assert_geq(s->max_ms, 200, "held %lu ms", (unsigned long)s->max_ms);
	/* not the whole run either (a loaded host only adds to it) */
	cr_assert_leq(s->max_ms, 350 + 1500, "held %lu ms",
		      (unsigned long)s->max_ms);
	/* Another loop's stop leaves this watch running. */
	{
		uv_loop_t other;
		uint64_t seen = s->count;

		cr_assert_eq(uv_loop_init(&other), 0);
		tw_stall_stop(&other);
		cr_assert_eq(uv_loop_close(&other), 0);
		uv_timer_start(&hold, hold_loop, 150, 0);
		uv_timer_start(&end, end_loop, 800, 0);
		uv_run(&loop, UV_RUN_DEFAULT);
		cr_assert_gt(s->count, seen);
	}
	tw_stall_stop(&loop);
	uv_close((uv_handle_t *)&hold, NULL);
	uv_close((uv_handle_t *)&end, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ------------------------------------------------------------------ wake */

Test(wake, median)
{
	uint64_t one[] = { 7 }, odd[] = { 30, 10, 20 }, even[] = { 4, 1, 3, 2 };

	cr_assert_eq(tw_wake_median(NULL, 0), 0);
	cr_assert_eq(tw_wake_median(one, 1), 7);
	cr_assert_eq(tw_wake_median(odd, 3), 20);
	cr_assert_eq(odd[0], 10);   /* sorted in place */
	cr_assert_eq(tw_wake_median(even, 4), 3);   /* the upper middle */
}

Test(wake, figure_is_least_median)
{
	uint64_t r[3][TW_WAKE_SAMPLES];
	unsigned i;

	/* A busy round (20 us), a quiet one with a cold start (3 us, its
	 * first five samples 30 us), a middling one (12 us). */
	for (i = 0; i < TW_WAKE_SAMPLES; i++) {
		r[0][i] = 20000 + i;
		r[1][i] = i < 5 ? 30000 : 3000;
		r[2][i] = 12000;
	}
	cr_assert_eq(tw_wake_figure(r, 3), 3000);
	cr_assert_eq(tw_wake_figure(r, 1), 20000 + TW_WAKE_SAMPLES / 2);
	cr_assert_eq(tw_wake_figure(r, 0), 0);
}

Test(wake, policy)
{
	/* Cheap: a polling idle (3 us) and session 41's VM (6-8 us). */
	cr_assert(tw_wake_is_cheap(0, 2600));
	cr_assert(tw_wake_is_cheap(0, 8000));
	cr_assert(tw_wake_is_cheap(0, TW_WAKE_CHEAP_NS));
	/* Dear: a halting idle or a busy CPU (20-30 us), and the 12.7 us
	 * that some rounds of a polling idle show beside daemons. */
	cr_assert_not(tw_wake_is_cheap(0, TW_WAKE_CHEAP_NS + 1));
	cr_assert_not(tw_wake_is_cheap(0, 12700));
	cr_assert_not(tw_wake_is_cheap(0, 22400));
	/* One CPU: no idle exit in a handoff. */
	cr_assert(tw_wake_is_cheap(-ENOTSUP, 0));
	/* A failed probe says nothing: the workers, whatever the figure. */
	cr_assert_not(tw_wake_is_cheap(-ENOMEM, 1000));
	cr_assert_not(tw_wake_is_cheap(-ETIMEDOUT, 0));
	cr_assert_not(tw_wake_is_cheap(-EINVAL, 0));
}

/* The probe itself runs: two threads that wake each other 64 times, and
 * end.  Not a timing check (the figure is the host's), only that it
 * measures. */
Test(wake, probe_measures)
{
	cpu_set_t set;
	uint64_t ns = 0;
	int rc = tw_wake_probe(&ns);

	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	if (CPU_COUNT(&set) < 2) {
		cr_assert_eq(rc, -ENOTSUP);
		return;
	}
	cr_assert_eq(rc, 0, "probe: %s", strerror(-rc));
	cr_assert_gt(ns, 0);
}
