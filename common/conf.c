/* conf.c - twinfs.conf: the INI file every daemon, the client and the CLI
 * read (docs/ARCHITECTURE.md "Operations").
 *
 * Grammar, one item per line:
 *   [section]                 cluster | mgrd | iod | iod N   (N = 1..64)
 *                             | mgrd N (N = 1, 2) | client NAME
 *   key = value               value is trimmed; quotes are not special
 *   # comment, ; comment      at line start, or after whitespace in a value
 * Sizes take K/M/G suffixes (powers of 1024), times ms/s/m/h/d (bare =
 * seconds).
 * Unknown sections and keys, repeated sections and repeated keys are errors:
 * a typo in a cluster file must not silently fall back to a default.
 *
 * After parsing, the cluster is validated as a whole: iod ids are dense from
 * 1, every twin group 0..n_groups-1 holds exactly two iods (twin_index by
 * ascending id), and no two servers share an address or an iod directory.
 * Defaults not stated in common.h: an iod's host is 127.0.0.1, its port
 * 7500 + N, its group (N - 1) / 2 (iods 1+2 form group 0, 3+4 group 1, ...).
 * An mgrd pair is [mgrd 1] + [mgrd 2] (both, each with its own host, port,
 * dir, metrics); [mgrd] then holds only the shared settings, so a file
 * cannot say two things about where the one mgrd is.
 * Every error names FILE:LINE and the cause.
 *
 * A file that holds [cluster] secret must be readable by its owner only
 * (ssh's rule for private keys): with group or other bits set, loading it
 * fails with -EACCES and a message naming the mode and the chmod that fixes
 * it, so a readable secret is noticed at the first start, not after it
 * leaked.  The example file's placeholder secret (anything starting with
 * "CHANGE-ME", any case) is refused (-EINVAL): a cluster must never run on
 * a secret that is printed in the source tree.
 */
#include "common.h"
#include "spin.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <arpa/inet.h>

#define CONF_LINE_MAX 4096
#define IOD_DEF_PORT_BASE 7500
/* A ticket carries the name (proto/wire.h WIRE_TICKET_NAME_MAX). */
#define WIRE_NAME_LIMIT 63

enum sect { S_NONE, S_CLUSTER, S_MGRD, S_IOD_ALL, S_IOD, S_CLIENT,
	    S_MGRD_N };

struct parse {
	const char *path;
	struct tw_conf *conf;
	char *err;
	size_t errlen;
	int line;
	enum sect sect;
	int iod_id;                       /* current [iod N], when S_IOD */
	int mgrd_id;                      /* current [mgrd N], when S_MGRD_N */
	int mgrd_line[TW_MAX_MGRDS + 1];  /* line of [mgrd N], 0 = absent */
	int mgrd_addr_line;               /* first host/port/dir/metrics in [mgrd] */
	uint64_t seen_keys;               /* bit per key of this section */
	int sect_line[S_IOD];             /* first line of each plain section */
	int iod_line[TW_MAX_IODS + 1];    /* line of [iod N], 0 = absent */
	bool iod_group_set[TW_MAX_IODS + 1];
	bool session_timeout_set;
	int client_line[TW_MAX_CLIENTS];  /* line of [client NAME] */
	bool client_squash_set[TW_MAX_CLIENTS];
	bool client_key_set[TW_MAX_CLIENTS];
	bool key_inline;                  /* a [client] holds key = */
};

static int fail(struct parse *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Write "path:line: message" (or "path: message" for line 0). */
static int fail(struct parse *p, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->err && p->errlen > 0) {
		if (line > 0)
			snprintf(p->err, p->errlen, "%s:%d: %s", p->path, line, msg);
		else
			snprintf(p->err, p->errlen, "%s: %s", p->path, msg);
	}
	return -EINVAL;
}

/* ------------------------------------------------------- value parsers */

/* Leading decimal digits of s as u64; *end points past them. */
static int parse_u64_prefix(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *q = s;

	if (!isdigit((unsigned char)*q))
		return -EINVAL;
	for (; isdigit((unsigned char)*q); q++) {
		unsigned d = (unsigned)(*q - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	*end = q;
	return 0;
}

int tw_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v, mult = 1;
	int rc;

	if (!s)
		return -EINVAL;
	rc = parse_u64_prefix(s, &v, &end);
	if (rc < 0)
		return rc;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mult = 1ull << 10;
		end++;
		break;
	case 'm': case 'M':
		mult = 1ull << 20;
		end++;
		break;
	case 'g': case 'G':
		mult = 1ull << 30;
		end++;
		break;
	default:
		return -EINVAL;
	}
	if (*end != '\0')
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

int tw_parse_ms(const char *s, uint32_t *out)
{
	const char *end;
	uint64_t v, mult;
	int rc;

	if (!s)
		return -EINVAL;
	rc = parse_u64_prefix(s, &v, &end);
	if (rc < 0)
		return rc;
	if (strcmp(end, "ms") == 0)
		mult = 1;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		mult = 1000;
	else if (strcmp(end, "m") == 0)
		mult = 60 * 1000;
	else if (strcmp(end, "h") == 0)
		mult = 3600 * 1000;
	else if (strcmp(end, "d") == 0)
		mult = 24 * 3600 * 1000;
	else
		return -EINVAL;
	if (v > UINT32_MAX / mult)
		return -ERANGE;
	*out = (uint32_t)(v * mult);
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < TW_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_int_range(const char *s, long lo, long hi, long *out)
{
	const char *end;
	uint64_t v;

	if (parse_u64_prefix(s, &v, &end) < 0 || *end != '\0')
		return -EINVAL;
	if (v < (uint64_t)lo || v > (uint64_t)hi)
		return -ERANGE;
	*out = (long)v;
	return 0;
}

/* ------------------------------------------------------------ defaults */

void tw_conf_defaults(struct tw_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	snprintf(conf->cluster_name, sizeof(conf->cluster_name), "twinfs");
	conf->stripe_size = 512u << 10;
	conf->stripe_count = 0;
	conf->monitor_interval_ms = TW_MONITOR_INTERVAL_MS;
	conf->down_after = 2;
	conf->request_timeout_ms = TW_REQUEST_TIMEOUT_MS;
	conf->mgr_timeout_ms = TW_MGR_TIMEOUT_MS;
	conf->commit_interval_ms = TW_COMMIT_INTERVAL_MS;
	conf->lock_grace_ms = TW_LOCK_GRACE_MS;
	conf->mgrd_lease_ms = TW_MGRD_LEASE_MS;
	conf->session_timeout_ms = 3 * conf->monitor_interval_ms;
	conf->auto_resync = true;
	conf->root_squash = false;
	conf->ticket_lifetime_ms = 3600 * 1000;
	snprintf(conf->mgr_host, sizeof(conf->mgr_host), "127.0.0.1");
	conf->mgr_port = 7500;
	conf->n_mgrds = 1;
	conf->mgrd_self = 1;
	for (int i = 0; i < TW_MAX_MGRDS; i++) {
		snprintf(conf->mgrd[i].host, sizeof(conf->mgrd[i].host),
			 "127.0.0.1");
		conf->mgrd[i].port = 7500;
	}
	conf->journal_mode = TW_JNL_JOURNAL;
	conf->journal_size = 256ull << 20;
	conf->iod_reserve = 64ull << 20;
	conf->scrub_interval_ms = 7u * 24 * 3600 * 1000;
	conf->scrub_rate_mb = 32;
	conf->twin_spin_us = TW_TWIN_SPIN_US;
	conf->max_connections = 4096;
	conf->hello_timeout_ms = 5 * 1000;
	conf->max_queued_reply_bytes = 32ull << 20;
	conf->cap_lifetime_ms = 300 * 1000;
	conf->max_sessions_per_client = 64;
	conf->max_locks_per_session = 100000;
	conf->snapshot_timeout_ms = TW_SNAPSHOT_TIMEOUT_MS;
}

int tw_channel_parse(const char *s, enum tw_channel *out)
{
	static const char *const names[] = {
		[TW_CHANNEL_NONE] = "none",
		[TW_CHANNEL_INTEGRITY] = "integrity",
		[TW_CHANNEL_ENCRYPT] = "encrypt",
	};

	for (size_t i = TW_CHANNEL_NONE; i < TW_ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum tw_channel)i;
			return 0;
		}
	return -EINVAL;
}

const char *tw_channel_name(enum tw_channel c)
{
	switch (c == TW_CHANNEL_DEFAULT ? TW_CHANNEL_DEFAULT_MODE : c) {
	case TW_CHANNEL_NONE: return "none";
	case TW_CHANNEL_INTEGRITY: return "integrity";
	case TW_CHANNEL_ENCRYPT: return "encrypt";
	default: return "?";
	}
}

const struct tw_conf_iod *tw_conf_iod(const struct tw_conf *conf, int id)
{
	if (id < 1 || id > conf->n_iods)
		return NULL;
	/* iods[] is sorted and dense after tw_conf_load. */
	if (conf->iods[id - 1].id == id)
		return &conf->iods[id - 1];
	for (int i = 0; i < conf->n_iods; i++)
		if (conf->iods[i].id == id)
			return &conf->iods[i];
	return NULL;
}

/* ----------------------------------------------------------- key tables */

static int set_str(struct parse *p, const char *key, const char *val,
		   char *dst, size_t size)
{
	size_t len = strlen(val);

	if (len == 0)
		return fail(p, p->line, "%s: empty value", key);
	if (len >= size)
		return fail(p, p->line, "%s: value longer than %zu bytes",
			    key, size - 1);
	memcpy(dst, val, len + 1);
	return 0;
}

static int set_ms(struct parse *p, const char *key, const char *val,
		  uint32_t *dst)
{
	uint32_t ms;

	if (tw_parse_ms(val, &ms) < 0)
		return fail(p, p->line, "%s: bad time '%s' (use e.g. 500ms, 5s, 2m, 1h, 7d)",
			    key, val);
	if (ms == 0)
		return fail(p, p->line, "%s: must be greater than 0", key);
	*dst = ms;
	return 0;
}

static int set_port(struct parse *p, const char *key, const char *val,
		    int *dst)
{
	long v;

	if (parse_int_range(val, 1, 65535, &v) < 0)
		return fail(p, p->line, "%s: bad port '%s' (1..65535)", key, val);
	*dst = (int)v;
	return 0;
}

int tw_parse_metrics_addr(const char *s, char *host, int *port)
{
	const char *colon, *h = s;
	size_t hlen;
	long v;

	if (strcmp(s, "off") == 0) {
		host[0] = '\0';
		*port = 0;
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon) {
		if (parse_int_range(s, 1, 65535, &v) < 0)
			return -EINVAL;
		snprintf(host, TW_HOST_MAX, "127.0.0.1");
		*port = (int)v;
		return 0;
	}
	hlen = (size_t)(colon - s);
	if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') {
		h = s + 1;
		hlen -= 2;
	} else if (memchr(s, ':', hlen)) {
		return -EINVAL;       /* an IPv6 literal needs brackets */
	}
	if (hlen == 0 || hlen >= TW_HOST_MAX ||
	    parse_int_range(colon + 1, 1, 65535, &v) < 0)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (int)v;
	return 0;
}

static int set_metrics(struct parse *p, const char *key, const char *val,
		       char *host, int *port)
{
	if (tw_parse_metrics_addr(val, host, port) < 0)
		return fail(p, p->line, "%s: bad address '%s' (HOST:PORT, "
			    "[IPV6]:PORT, PORT or off)", key, val);
	return 0;
}

static int set_bool(struct parse *p, const char *key, const char *val,
		    bool *dst)
{
	if (parse_bool(val, dst) < 0)
		return fail(p, p->line, "%s: bad boolean '%s' (true or false)",
			    key, val);
	return 0;
}

static int cluster_key(struct parse *p, int idx, const char *key,
		       const char *val)
{
	struct tw_conf *c = p->conf;
	uint64_t size;
	long v;

	switch (idx) {
	case 0:
		return set_str(p, key, val, c->cluster_name,
			       sizeof(c->cluster_name));
	case 1:
		return set_str(p, key, val, c->secret, sizeof(c->secret));
	case 2:
		if (tw_parse_size(val, &size) < 0)
			return fail(p, p->line, "%s: bad size '%s' (use e.g. 512K, 1M)",
				    key, val);
		/* Same rule as r0_layout_check; libcommon cannot use libraid. */
		if (size < (64u << 10) || size > (64u << 20) ||
		    (size & (size - 1)) != 0)
			return fail(p, p->line,
				    "%s: %s is not a power of two between 64K and 64M",
				    key, val);
		c->stripe_size = (uint32_t)size;
		return 0;
	case 3:
		if (parse_int_range(val, 0, TW_MAX_GROUPS, &v) < 0)
			return fail(p, p->line, "%s: bad count '%s' (0..%d, 0 = all groups)",
				    key, val, TW_MAX_GROUPS);
		c->stripe_count = (uint32_t)v;
		return 0;
	case 4:
		return set_ms(p, key, val, &c->monitor_interval_ms);
	case 5:
		if (parse_int_range(val, 1, 1000, &v) < 0)
			return fail(p, p->line, "%s: bad count '%s' (1..1000 intervals)",
				    key, val);
		c->down_after = (uint32_t)v;
		return 0;
	case 6:
		return set_ms(p, key, val, &c->request_timeout_ms);
	case 7:
		return set_ms(p, key, val, &c->mgr_timeout_ms);
	case 8:
		return set_ms(p, key, val, &c->commit_interval_ms);
	case 9:
		p->session_timeout_set = true;
		return set_ms(p, key, val, &c->session_timeout_ms);
	case 10:
		return set_bool(p, key, val, &c->auto_resync);
	case 11:
		return set_bool(p, key, val, &c->root_squash);
	case 12:
		return set_ms(p, key, val, &c->lock_grace_ms);
	case 13:
		if (parse_int_range(val, TW_CONNS_MIN, TW_CONNS_MAX, &v) < 0)
			return fail(p, p->line, "%s: bad count '%s' (%d..%d)",
				    key, val, TW_CONNS_MIN, TW_CONNS_MAX);
		c->max_connections = (uint32_t)v;
		return 0;
	case 14:
		return set_ms(p, key, val, &c->hello_timeout_ms);
	case 15:
		if (tw_parse_size(val, &size) < 0)
			return fail(p, p->line, "%s: bad size '%s' (use e.g. 512K, 32M)",
				    key, val);
		/* Below one frame's worth a connection would stop after
		 * every reply; above 4G the figure means nothing. */
		if (size < TW_QUEUED_REPLY_MIN || size > (4ull << 30))
			return fail(p, p->line, "%s: %s is not between 64K and 4G",
				    key, val);
		c->max_queued_reply_bytes = size;
		return 0;
	case 16:
		/* A cap must outlive the round trip that fetched it; past a
		 * day a leaked one is as good as a permanent key. */
		if (set_ms(p, key, val, &c->cap_lifetime_ms) < 0)
			return -EINVAL;
		if (c->cap_lifetime_ms < 1000 || c->cap_lifetime_ms > 86400000u)
			return fail(p, p->line, "%s: %s is not between 1s and "
				    "1 day", key, val);
		return 0;
	case 17:
		if (tw_channel_parse(val, &c->channel) < 0)
			return fail(p, p->line, "%s: bad mode '%s' (integrity, "
				    "encrypt or none)", key, val);
		return 0;
	case 18:
		if (set_ms(p, key, val, &c->ticket_lifetime_ms) < 0)
			return -EINVAL;
		/* The client renews at half the lifetime: below a minute it
		 * would do little else; above a day a revoked key's reads
		 * would last too long at iods mgrd cannot reach. */
		if (c->ticket_lifetime_ms < 60 * 1000 ||
		    c->ticket_lifetime_ms > 24u * 3600 * 1000)
			return fail(p, p->line, "%s: %s is not between 1m and "
				    "24h", key, val);
		return 0;
	}
	return -EINVAL;
}

static const char *const cluster_keys[] = {
	"name", "secret", "stripe_size", "stripe_count", "monitor_interval",
	"down_after", "request_timeout", "mgr_timeout", "commit_interval",
	"session_timeout", "auto_resync", "root_squash", "lock_grace",
	"max_connections", "hello_timeout", "max_queued_reply_bytes",
	"cap_lifetime",
	"channel",
	"ticket_lifetime",
};

static int mgrd_key(struct parse *p, int idx, const char *key, const char *val)
{
	struct tw_conf *c = p->conf;
	long v;

	/* where the one mgrd is: refused next to [mgrd N] (check_mgrds) */
	if ((idx <= 2 || idx == 5) && !p->mgrd_addr_line)
		p->mgrd_addr_line = p->line;
	switch (idx) {
	case 0:
		return set_str(p, key, val, c->mgr_host, sizeof(c->mgr_host));
	case 1:
		return set_port(p, key, val, &c->mgr_port);
	case 2:
		return set_str(p, key, val, c->mgr_dir, sizeof(c->mgr_dir));
	case 3:
		if (parse_int_range(val, 1, TW_SESSIONS_PER_CLIENT_MAX, &v) < 0)
			return fail(p, p->line, "%s: bad count '%s' (1..%d)",
				    key, val, TW_SESSIONS_PER_CLIENT_MAX);
		c->max_sessions_per_client = (uint32_t)v;
		return 0;
	case 4:
		if (parse_int_range(val, 1, TW_LOCKS_PER_SESSION_MAX, &v) < 0)
			return fail(p, p->line, "%s: bad count '%s' (1..%d)",
				    key, val, TW_LOCKS_PER_SESSION_MAX);
		c->max_locks_per_session = (uint32_t)v;
		return 0;
	case 5:
		return set_metrics(p, key, val, c->mgr_metrics_host,
				   &c->mgr_metrics_port);
	case 6:
		/* docs/ARCHITECTURE.md "Election": the holder's span must
		 * stay well above the drift and margin it loses. */
		if (set_ms(p, key, val, &c->mgrd_lease_ms) < 0)
			return -EINVAL;
		if (c->mgrd_lease_ms < TW_MGRD_LEASE_MIN_MS ||
		    c->mgrd_lease_ms > TW_MGRD_LEASE_MAX_MS)
			return fail(p, p->line, "%s: %s is out of range "
				    "(%ums..%us)", key, val,
				    TW_MGRD_LEASE_MIN_MS,
				    TW_MGRD_LEASE_MAX_MS / 1000);
		return 0;
	case 7:
		/* 0 = none: a child that hangs is never killed. */
		if (strcmp(val, "0") == 0 || strcmp(val, "off") == 0) {
			c->snapshot_timeout_ms = 0;
			return 0;
		}
		return set_ms(p, key, val, &c->snapshot_timeout_ms);
	}
	return -EINVAL;
}

static const char *const mgrd_keys[] = { "host", "port", "dir",
					 "max_sessions_per_client",
					 "max_locks_per_session", "metrics",
					 "lease_time", "snapshot_timeout" };

static int mgrd_n_key(struct parse *p, int idx, const char *key,
		      const char *val)
{
	struct tw_conf_mgrd *m = &p->conf->mgrd[p->mgrd_id - 1];

	switch (idx) {
	case 0:
		return set_str(p, key, val, m->host, sizeof(m->host));
	case 1:
		return set_port(p, key, val, &m->port);
	case 2:
		return set_str(p, key, val, m->dir, sizeof(m->dir));
	case 3:
		return set_metrics(p, key, val, m->metrics_host,
				   &m->metrics_port);
	}
	return -EINVAL;
}

static const char *const mgrd_n_keys[] = { "host", "port", "dir", "metrics" };

/* A size of at least min_mib MiB into *out. */
static int set_size_min(struct parse *p, const char *key, const char *val,
			unsigned min_mib, uint64_t *out)
{
	uint64_t size;

	if (tw_parse_size(val, &size) < 0)
		return fail(p, p->line, "%s: bad size '%s' (use e.g. 256M, 1G)",
			    key, val);
	if (size < ((uint64_t)min_mib << 20))
		return fail(p, p->line, "%s: %s is below the minimum %uM", key,
			    val, min_mib);
	*out = size;
	return 0;
}

static int iod_all_key(struct parse *p, int idx, const char *key,
		       const char *val)
{
	struct tw_conf *c = p->conf;
	long v;

	switch (idx) {
	case 0:
		if (strcmp(val, "journal") == 0)
			c->journal_mode = TW_JNL_JOURNAL;
		else if (strcmp(val, "ordered") == 0)
			c->journal_mode = TW_JNL_ORDERED;
		else if (strcmp(val, "writeback") == 0)
			c->journal_mode = TW_JNL_WRITEBACK;
		else
			return fail(p, p->line,
				    "%s: '%s' is not journal, ordered or writeback",
				    key, val);
		return 0;
	case 1:
		/* A transaction is at most a quarter of the journal and must
		 * hold a 1 MiB write plus its descriptors. */
		return set_size_min(p, key, val, 8, &c->journal_size);
	case 2:
		/* Room for what the file system spends on the subfiles beyond
		 * their data (inodes, extents, xattrs), which admission does
		 * not count. */
		return set_size_min(p, key, val, 16, &c->iod_reserve);
	case 3:
		/* 0 = only on request (twinfsctl scrub). */
		if (strcmp(val, "0") == 0 || strcmp(val, "off") == 0) {
			c->scrub_interval_ms = 0;
			return 0;
		}
		return set_ms(p, key, val, &c->scrub_interval_ms);
	case 4: {
		char *end;

		v = strtol(val, &end, 10);
		if (*val == '\0' || *end || v < 1 || v > 10000)
			return fail(p, p->line, "%s: '%s' is not 1..10000 (MB/s)",
				    key, val);
		c->scrub_rate_mb = (uint32_t)v;
		return 0;
	}
	case 5:
		if (parse_int_range(val, 0, TW_SPIN_MAX_US, &v) < 0)
			return fail(p, p->line, "%s: '%s' is not 0..%u "
				    "(microseconds)", key, val, TW_SPIN_MAX_US);
		c->twin_spin_us = (uint32_t)v;
		return 0;
	}
	return -EINVAL;
}

static const char *const iod_all_keys[] = { "journal_mode", "journal_size",
					    "reserve", "scrub_interval",
					    "scrub_rate", "twin_spin_us" };

static int iod_key(struct parse *p, int idx, const char *key, const char *val)
{
	struct tw_conf_iod *d = &p->conf->iods[p->iod_id - 1];
	long v;

	switch (idx) {
	case 0:
		return set_str(p, key, val, d->host, sizeof(d->host));
	case 1:
		return set_port(p, key, val, &d->port);
	case 2:
		return set_str(p, key, val, d->dir, sizeof(d->dir));
	case 3:
		if (parse_int_range(val, 0, TW_MAX_GROUPS - 1, &v) < 0)
			return fail(p, p->line, "%s: bad group '%s' (0..%d)",
				    key, val, TW_MAX_GROUPS - 1);
		d->group = (int)v;
		p->iod_group_set[p->iod_id] = true;
		return 0;
	case 4:
		return set_metrics(p, key, val, d->metrics_host,
				   &d->metrics_port);
	}
	return -EINVAL;
}

static const char *const iod_keys[] = { "host", "port", "dir", "group",
					"metrics" };

/* ------------------------------------------------------ client identities */

static char *trim(char *s);
static void strip_comment(char *s);

bool tw_client_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= TW_CLIENT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

static int hex_key(const char *s, uint8_t key[TW_CLIENT_KEY_LEN])
{
	if (strlen(s) != 2 * TW_CLIENT_KEY_LEN)
		return -EINVAL;
	for (size_t i = 0; i < TW_CLIENT_KEY_LEN; i++) {
		unsigned v;

		if (!isxdigit((unsigned char)s[2 * i]) ||
		    !isxdigit((unsigned char)s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		key[i] = (uint8_t)v;
	}
	return 0;
}

int tw_cidr_parse(const char *s, struct tw_cidr *out)
{
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	long prefix;
	int bits;

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = 4;
		bits = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = 6;
		bits = 128;
	} else {
		return -EINVAL;
	}
	prefix = bits;
	if (slash && parse_int_range(slash + 1, 0, bits, &prefix) < 0)
		return -EINVAL;
	out->prefix = (uint8_t)prefix;
	/* Keep only the network's bits: "10.1.2.3/8" means 10.0.0.0/8. */
	for (int i = 0; i < bits / 8; i++) {
		int keep = (int)prefix - 8 * i;

		if (keep <= 0)
			out->addr[i] = 0;
		else if (keep < 8)
			out->addr[i] &= (uint8_t)(0xff00u >> keep);
	}
	return 0;
}

bool tw_cidr_match(const struct tw_cidr *net, const char *addr)
{
	uint8_t a[16];
	int bits = net->prefix;

	if (net->family == 4) {
		if (inet_pton(AF_INET, addr, a) != 1) {
			/* An IPv4 client on a dual-stack socket. */
			if (strncasecmp(addr, "::ffff:", 7) != 0 ||
			    inet_pton(AF_INET, addr + 7, a) != 1)
				return false;
		}
	} else if (inet_pton(AF_INET6, addr, a) != 1) {
		return false;
	}
	for (int i = 0; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

		if ((a[i] & mask) != net->addr[i])
			return false;
	}
	return true;
}

const struct tw_conf_client *tw_conf_client(const struct tw_conf *conf,
					    const char *name)
{
	for (int i = 0; i < conf->n_clients; i++)
		if (strcmp(conf->clients[i].name, name) == 0)
			return &conf->clients[i];
	return NULL;
}

int tw_client_keyfile_load(const char *path, char *name,
			   uint8_t key[TW_CLIENT_KEY_LEN], char *err,
			   size_t errlen)
{
	char line[256], got_name[TW_CLIENT_NAME_MAX] = "";
	bool got_key = false;
	struct stat st;
	int rc = 0, lineno = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
		snprintf(err, errlen, "%s: a key file must be readable by its "
			 "owner only (mode %04o); refusing it.  Fix: chmod 600 "
			 "%s", path, (unsigned)(st.st_mode & 07777), path);
		rc = -EACCES;
		goto out;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq, *k, *v;

		lineno++;
		strip_comment(line);
		s = trim(line);
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq)
			goto bad;
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		if (strcmp(k, "name") == 0 && tw_client_name_ok(v)) {
			snprintf(got_name, sizeof(got_name), "%s", v);
		} else if (strcmp(k, "key") == 0 && hex_key(v, key) == 0) {
			got_key = true;
		} else {
			goto bad;
		}
	}
	if (!got_key || (name && !got_name[0])) {
		snprintf(err, errlen, "%s: needs the lines 'name = NAME' and "
			 "'key = <64 hex digits>' (twinfsctl keygen writes "
			 "one)", path);
		rc = -EINVAL;
		goto out;
	}
	if (name)
		memcpy(name, got_name, TW_CLIENT_NAME_MAX);
	goto out;
bad:
	snprintf(err, errlen, "%s:%d: expected 'name = NAME' or 'key = <64 hex "
		 "digits>'", path, lineno);
	rc = -EINVAL;
out:
	fclose(f);
	return rc;
}

static int client_key(struct parse *p, int idx, const char *key,
		      const char *val)
{
	int ci = p->conf->n_clients - 1;
	struct tw_conf_client *cl = &p->conf->clients[ci];
	char kerr[512], kname[TW_CLIENT_NAME_MAX];
	char buf[CONF_LINE_MAX];
	long v;
	int rc;

	switch (idx) {
	case 0:          /* key */
		if (hex_key(val, cl->key) < 0)
			return fail(p, p->line, "%s: not %d hex digits "
				    "(twinfsctl keygen makes one)", key,
				    2 * TW_CLIENT_KEY_LEN);
		if (p->client_key_set[ci])
			return fail(p, p->line, "key and key_file both set");
		p->client_key_set[ci] = true;
		p->key_inline = true;
		return 0;
	case 1:          /* key_file */
		if (p->client_key_set[ci])
			return fail(p, p->line, "key and key_file both set");
		rc = tw_client_keyfile_load(val, kname, cl->key, kerr,
					    sizeof(kerr));
		if (rc == -EINVAL)   /* a bare key file: no name line */
			rc = tw_client_keyfile_load(val, NULL, cl->key, kerr,
						    sizeof(kerr));
		else if (rc == 0 && strcmp(kname, cl->name) != 0)
			return fail(p, p->line, "%s: %s holds the key of "
				    "'%s', not '%s'", key, val, kname,
				    cl->name);
		if (rc < 0) {
			fail(p, p->line, "%s", kerr);
			return rc;
		}
		p->client_key_set[ci] = true;
		return 0;
	case 2: {        /* export */
		char *q;

		if (val[0] != '/' || strlen(val) >= TW_EXPORT_MAX ||
		    strstr(val, "/../") || strstr(val, "/./") ||
		    (strlen(val) >= 3 && strcmp(val + strlen(val) - 3,
						"/..") == 0))
			return fail(p, p->line, "%s: '%s' is not an absolute "
				    "path without . or .. components", key,
				    val);
		/* Normalize: no repeated or trailing slashes. */
		q = cl->export_path;
		for (const char *r = val; *r; r++)
			if (!(*r == '/' && q > cl->export_path && q[-1] == '/'))
				*q++ = *r;
		if (q > cl->export_path + 1 && q[-1] == '/')
			q--;
		*q = '\0';
		return 0;
	}
	case 3:          /* access */
		if (strcmp(val, "rw") == 0)
			cl->read_only = false;
		else if (strcmp(val, "ro") == 0)
			cl->read_only = true;
		else
			return fail(p, p->line, "%s: '%s' is not rw or ro",
				    key, val);
		return 0;
	case 4:          /* squash */
		if (strcmp(val, "none") == 0)
			cl->squash = TW_SQUASH_NONE;
		else if (strcmp(val, "root") == 0)
			cl->squash = TW_SQUASH_ROOT;
		else if (strcmp(val, "all") == 0)
			cl->squash = TW_SQUASH_ALL;
		else
			return fail(p, p->line, "%s: '%s' is not none, root "
				    "or all", key, val);
		p->client_squash_set[ci] = true;
		return 0;
	case 5:
	case 6:
		if (parse_int_range(val, 0, UINT32_MAX - 1, &v) < 0)
			return fail(p, p->line, "%s: bad id '%s'", key, val);
		*(idx == 5 ? &cl->anonuid : &cl->anongid) = (uint32_t)v;
		return 0;
	case 7: {        /* networks */
		char *save = NULL, *tok;

		snprintf(buf, sizeof(buf), "%s", val);
		cl->n_networks = 0;
		for (tok = strtok_r(buf, ", \t", &save); tok;
		     tok = strtok_r(NULL, ", \t", &save)) {
			if (strcmp(tok, "any") == 0 && cl->n_networks == 0 &&
			    !strtok_r(NULL, ", \t", &save))
				return 0;
			if (cl->n_networks == TW_CLIENT_NETS_MAX)
				return fail(p, p->line, "%s: more than %d "
					    "networks", key,
					    TW_CLIENT_NETS_MAX);
			if (tw_cidr_parse(tok, &cl->networks[cl->n_networks])
			    < 0)
				return fail(p, p->line, "%s: '%s' is not an "
					    "address or ADDRESS/PREFIX", key,
					    tok);
			cl->n_networks++;
		}
		if (cl->n_networks == 0)
			return fail(p, p->line, "%s: empty", key);
		return 0;
	}
	}
	return -EINVAL;
}

static const char *const client_keys[] = { "key", "key_file", "export",
					   "access", "squash", "anonuid",
					   "anongid", "networks" };

static int handle_key(struct parse *p, const char *key, const char *val)
{
	static const char *const sect_names[] = {
		"", "[cluster]", "[mgrd]", "[iod]", "[iod N]",
		"[client NAME]", "[mgrd N]",
	};
	const char *const *keys;
	size_t n_keys;
	int (*set)(struct parse *, int, const char *, const char *);

	switch (p->sect) {
	case S_CLUSTER:
		keys = cluster_keys;
		n_keys = TW_ARRAY_SIZE(cluster_keys);
		set = cluster_key;
		break;
	case S_MGRD:
		keys = mgrd_keys;
		n_keys = TW_ARRAY_SIZE(mgrd_keys);
		set = mgrd_key;
		break;
	case S_IOD_ALL:
		keys = iod_all_keys;
		n_keys = TW_ARRAY_SIZE(iod_all_keys);
		set = iod_all_key;
		break;
	case S_IOD:
		keys = iod_keys;
		n_keys = TW_ARRAY_SIZE(iod_keys);
		set = iod_key;
		break;
	case S_CLIENT:
		keys = client_keys;
		n_keys = TW_ARRAY_SIZE(client_keys);
		set = client_key;
		break;
	case S_MGRD_N:
		keys = mgrd_n_keys;
		n_keys = TW_ARRAY_SIZE(mgrd_n_keys);
		set = mgrd_n_key;
		break;
	default:
		return fail(p, p->line, "'%s' outside of any section", key);
	}
	for (size_t i = 0; i < n_keys; i++) {
		if (strcmp(key, keys[i]) != 0)
			continue;
		if (p->seen_keys & (1ull << i))
			return fail(p, p->line, "%s set twice in this section", key);
		p->seen_keys |= 1ull << i;
		return set(p, (int)i, key, val);
	}
	return fail(p, p->line, "unknown key '%s' in %s", key, sect_names[p->sect]);
}

/* ------------------------------------------------------------- sections */

static int open_iod_section(struct parse *p, const char *num)
{
	struct tw_conf_iod *d;
	long id;

	if (parse_int_range(num, 1, TW_MAX_IODS, &id) < 0)
		return fail(p, p->line, "bad iod number '%s' (1..%d)", num,
			    TW_MAX_IODS);
	if (p->iod_line[id])
		return fail(p, p->line, "duplicate section [iod %ld] (first at line %d)",
			    id, p->iod_line[id]);
	p->iod_line[id] = p->line;
	p->sect = S_IOD;
	p->iod_id = (int)id;
	d = &p->conf->iods[id - 1];
	d->id = (int)id;
	d->group = (int)(id - 1) / 2;
	d->port = IOD_DEF_PORT_BASE + (int)id;
	snprintf(d->host, sizeof(d->host), "127.0.0.1");
	return 0;
}

static int open_mgrd_section(struct parse *p, const char *num)
{
	long id;

	if (parse_int_range(num, 1, TW_MAX_MGRDS, &id) < 0)
		return fail(p, p->line, "bad mgrd number '%s' (1 or 2: an mgrd "
			    "pair)", num);
	if (p->mgrd_line[id])
		return fail(p, p->line, "duplicate section [mgrd %ld] (first "
			    "at line %d)", id, p->mgrd_line[id]);
	p->mgrd_line[id] = p->line;
	p->sect = S_MGRD_N;
	p->mgrd_id = (int)id;
	return 0;
}

static int open_client_section(struct parse *p, const char *name)
{
	struct tw_conf *c = p->conf;
	const struct tw_conf_client *prev = tw_conf_client(c, name);
	struct tw_conf_client *cl;

	if (!tw_client_name_ok(name) ||
	    strlen(name) > WIRE_NAME_LIMIT)
		return fail(p, p->line, "bad client name '%s' (1..%d of "
			    "A-Z a-z 0-9 . _ -)", name, WIRE_NAME_LIMIT);
	if (prev)
		return fail(p, p->line, "duplicate section [client %s] (first "
			    "at line %d)", name,
			    p->client_line[prev - c->clients]);
	if (c->n_clients == TW_MAX_CLIENTS)
		return fail(p, p->line, "more than %d [client] sections",
			    TW_MAX_CLIENTS);
	cl = &c->clients[c->n_clients];
	memset(cl, 0, sizeof(*cl));
	snprintf(cl->name, sizeof(cl->name), "%s", name);
	snprintf(cl->export_path, sizeof(cl->export_path), "/");
	cl->anonuid = TW_ANON_ID;
	cl->anongid = TW_ANON_ID;
	p->client_line[c->n_clients++] = p->line;
	p->sect = S_CLIENT;
	return 0;
}

/* `name` is the text between the brackets, trimmed. */
static int open_section(struct parse *p, char *name)
{
	static const char *const plain[] = { "", "cluster", "mgrd", "iod" };

	p->seen_keys = 0;
	if (strncmp(name, "iod", 3) == 0 && isspace((unsigned char)name[3])) {
		char *num = name + 3;

		while (isspace((unsigned char)*num))
			num++;
		return open_iod_section(p, num);
	}
	if (strncmp(name, "mgrd", 4) == 0 && isspace((unsigned char)name[4]))
		return open_mgrd_section(p, trim(name + 4));
	if (strncmp(name, "client", 6) == 0 && isspace((unsigned char)name[6]))
		return open_client_section(p, trim(name + 6));
	for (int s = S_CLUSTER; s <= S_IOD_ALL; s++) {
		if (strcmp(name, plain[s]) != 0)
			continue;
		if (p->sect_line[s])
			return fail(p, p->line, "duplicate section [%s] (first at line %d)",
				    name, p->sect_line[s]);
		p->sect_line[s] = p->line;
		p->sect = (enum sect)s;
		return 0;
	}
	return fail(p, p->line, "unknown section [%s]", name);
}

/* ----------------------------------------------------------------- lines */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Cut a comment: '#' or ';' at the start or after whitespace. */
static void strip_comment(char *s)
{
	for (char *q = s; *q; q++) {
		if ((*q == '#' || *q == ';') &&
		    (q == s || isspace((unsigned char)q[-1]))) {
			*q = '\0';
			return;
		}
	}
}

static int parse_line(struct parse *p, char *raw)
{
	char *s, *eq, *key, *val;

	strip_comment(raw);
	s = trim(raw);
	if (*s == '\0')
		return 0;
	if (*s == '[') {
		char *close = strchr(s, ']');

		if (!close || close[1] != '\0')
			return fail(p, p->line, "malformed section header '%s'", s);
		*close = '\0';
		return open_section(p, trim(s + 1));
	}
	eq = strchr(s, '=');
	if (!eq)
		return fail(p, p->line, "expected 'key = value', got '%s'", s);
	*eq = '\0';
	key = trim(s);
	val = trim(eq + 1);
	if (*key == '\0')
		return fail(p, p->line, "missing key before '='");
	return handle_key(p, key, val);
}

/* ------------------------------------------------------------ validation */

static int check_iods(struct parse *p)
{
	struct tw_conf *c = p->conf;
	int members[TW_MAX_GROUPS] = { 0 };
	int first[TW_MAX_GROUPS] = { 0 };
	int second[TW_MAX_GROUPS] = { 0 };
	int n = 0, max_group = -1;

	for (int id = 1; id <= TW_MAX_IODS; id++)
		if (p->iod_line[id])
			n = id;
	if (n == 0)
		return fail(p, 0, "no [iod N] section: a cluster needs at least two iods");
	for (int id = 1; id <= n; id++)
		if (!p->iod_line[id])
			return fail(p, p->iod_line[n],
				    "[iod %d] defined but [iod %d] is missing (ids must be 1..N)",
				    n, id);
	c->n_iods = n;
	for (int i = 0; i < n; i++) {
		struct tw_conf_iod *d = &c->iods[i];

		/* twin_index by ascending id: the first member seen is 0. */
		d->twin_index = members[d->group]++;
		if (d->twin_index == 0)
			first[d->group] = d->id;
		else if (d->twin_index == 1)
			second[d->group] = d->id;
		else
			return fail(p, p->iod_line[d->id],
				    "iod %d: group %d already holds iods %d and %d; a twin group holds exactly two",
				    d->id, d->group, first[d->group],
				    second[d->group]);
		max_group = TW_MAX(max_group, d->group);
	}
	c->n_groups = max_group + 1;
	for (int g = 0; g < c->n_groups; g++) {
		if (members[g] == 0)
			return fail(p, 0, "twin group %d has no iods (groups must be 0..%d)",
				    g, c->n_groups - 1);
		if (members[g] == 1)
			return fail(p, p->iod_line[first[g]],
				    "twin group %d has only iod %d; a twin group holds exactly two",
				    g, first[g]);
	}
	return 0;
}

/* [mgrd N] both or neither, and never next to [mgrd]'s address keys;
 * then mgrd[] and the mgr_* fields agree (mgrd[0] is the one mgrd). */
static int check_mgrds(struct parse *p)
{
	struct tw_conf *c = p->conf;
	int n = !!p->mgrd_line[1] + !!p->mgrd_line[2];

	if (n == 0) {
		struct tw_conf_mgrd *m = &c->mgrd[0];

		c->n_mgrds = 1;
		snprintf(m->host, sizeof(m->host), "%s", c->mgr_host);
		m->port = c->mgr_port;
		snprintf(m->dir, sizeof(m->dir), "%s", c->mgr_dir);
		snprintf(m->metrics_host, sizeof(m->metrics_host), "%s",
			 c->mgr_metrics_host);
		m->metrics_port = c->mgr_metrics_port;
		return 0;
	}
	if (n == 1) {
		int have = p->mgrd_line[1] ? 1 : 2;

		return fail(p, p->mgrd_line[have], "[mgrd %d] without [mgrd %d]: "
			    "an mgrd pair needs both (one mgrd: put host, port, "
			    "dir in [mgrd])", have, 3 - have);
	}
	if (p->mgrd_addr_line)
		return fail(p, p->mgrd_addr_line, "[mgrd] holds host, port, dir "
			    "or metrics but [mgrd 1] and [mgrd 2] are set: give "
			    "each mgrd's in its own section");
	c->n_mgrds = 2;
	if (strcmp(c->mgrd[0].host, c->mgrd[1].host) == 0) {
		if (c->mgrd[0].port == c->mgrd[1].port)
			return fail(p, p->mgrd_line[2], "mgrd 2 uses %s:%d, "
				    "the address of mgrd 1", c->mgrd[1].host,
				    c->mgrd[1].port);
		if (c->mgrd[0].dir[0] &&
		    strcmp(c->mgrd[0].dir, c->mgrd[1].dir) == 0)
			return fail(p, p->mgrd_line[2], "mgrd 2 uses directory "
				    "%s on %s, as mgrd 1 does", c->mgrd[1].dir,
				    c->mgrd[1].host);
	}
	return tw_conf_select_mgrd(c, 1);
}

int tw_conf_select_mgrd(struct tw_conf *c, int id)
{
	const struct tw_conf_mgrd *m;

	if (id < 1 || id > c->n_mgrds)
		return -EINVAL;
	m = &c->mgrd[id - 1];
	c->mgrd_self = id;
	snprintf(c->mgr_host, sizeof(c->mgr_host), "%s", m->host);
	c->mgr_port = m->port;
	snprintf(c->mgr_dir, sizeof(c->mgr_dir), "%s", m->dir);
	snprintf(c->mgr_metrics_host, sizeof(c->mgr_metrics_host), "%s",
		 m->metrics_host);
	c->mgr_metrics_port = m->metrics_port;
	return 0;
}

/* "mgrd" for the one mgrd, "mgrd N" in a pair. */
static const char *mgrd_name(const struct tw_conf *c, int id)
{
	if (c->n_mgrds == 1)
		return "mgrd";
	return id == 1 ? "mgrd 1" : "mgrd 2";
}

/* Two servers on one address, or two iods on one directory of one host,
 * would fight over the same port or the same subfiles. */
/* Whether host:port is a server port or another metrics address of the
 * file (the one of `self`, an iod id or -N for mgrd N, excluded). */
static const char *metrics_clash(const struct tw_conf *c, int self,
				 const char *host, int port)
{
	static char who[64];

	for (int i = 0; i < c->n_mgrds; i++) {
		const struct tw_conf_mgrd *m = &c->mgrd[i];

		if (strcmp(host, m->host) == 0 && port == m->port)
			return mgrd_name(c, i + 1);
		if (self != -(i + 1) && m->metrics_port == port &&
		    strcmp(host, m->metrics_host) == 0) {
			snprintf(who, sizeof(who), "the metrics of %s",
				 mgrd_name(c, i + 1));
			return who;
		}
	}
	for (int i = 0; i < c->n_iods; i++) {
		const struct tw_conf_iod *d = &c->iods[i];

		if (strcmp(host, d->host) == 0 && port == d->port) {
			snprintf(who, sizeof(who), "iod %d", d->id);
			return who;
		}
		if (d->id != self && d->metrics_port == port &&
		    strcmp(host, d->metrics_host) == 0) {
			snprintf(who, sizeof(who), "the metrics of iod %d", d->id);
			return who;
		}
	}
	return NULL;
}

static int check_metrics(struct parse *p)
{
	struct tw_conf *c = p->conf;
	const char *who;

	for (int i = 0; i < c->n_mgrds; i++) {
		const struct tw_conf_mgrd *m = &c->mgrd[i];

		if (m->metrics_port &&
		    (who = metrics_clash(c, -(i + 1), m->metrics_host,
					 m->metrics_port)) != NULL)
			return fail(p, c->n_mgrds == 1 ? p->sect_line[S_MGRD]
						       : p->mgrd_line[i + 1],
				    "[%s] metrics %s:%d is the address of %s",
				    mgrd_name(c, i + 1), m->metrics_host,
				    m->metrics_port, who);
	}
	for (int i = 0; i < c->n_iods; i++) {
		const struct tw_conf_iod *d = &c->iods[i];

		if (d->metrics_port &&
		    (who = metrics_clash(c, d->id, d->metrics_host,
					 d->metrics_port)) != NULL)
			return fail(p, p->iod_line[d->id],
				    "[iod %d] metrics %s:%d is the address of %s",
				    d->id, d->metrics_host, d->metrics_port, who);
	}
	return 0;
}

static int check_addresses(struct parse *p)
{
	struct tw_conf *c = p->conf;

	for (int i = 0; i < c->n_iods; i++) {
		const struct tw_conf_iod *a = &c->iods[i];

		for (int m = 0; m < c->n_mgrds; m++)
			if (strcmp(a->host, c->mgrd[m].host) == 0 &&
			    a->port == c->mgrd[m].port)
				return fail(p, p->iod_line[a->id],
					    "iod %d uses %s:%d, the address "
					    "of %s", a->id, a->host, a->port,
					    mgrd_name(c, m + 1));
		for (int j = 0; j < i; j++) {
			const struct tw_conf_iod *b = &c->iods[j];

			if (strcmp(a->host, b->host) != 0)
				continue;
			if (a->port == b->port)
				return fail(p, p->iod_line[a->id],
					    "iod %d uses %s:%d, the address of iod %d",
					    a->id, a->host, a->port, b->id);
			if (a->dir[0] && strcmp(a->dir, b->dir) == 0)
				return fail(p, p->iod_line[a->id],
					    "iod %d uses directory %s on %s, as iod %d does",
					    a->id, a->dir, a->host, b->id);
		}
	}
	return 0;
}

static int validate(struct parse *p)
{
	struct tw_conf *c = p->conf;
	int rc;

	rc = check_iods(p);
	if (rc < 0)
		return rc;
	rc = check_mgrds(p);
	if (rc < 0)
		return rc;
	rc = check_addresses(p);
	if (rc < 0)
		return rc;
	rc = check_metrics(p);
	if (rc < 0)
		return rc;
	for (int i = 0; i < c->n_clients; i++) {
		if (!p->client_key_set[i])
			return fail(p, p->client_line[i], "[client %s] has no "
				    "key (key = or key_file =; twinfsctl "
				    "keygen %s makes one)", c->clients[i].name,
				    c->clients[i].name);
		if (!p->client_squash_set[i])
			c->clients[i].squash = c->root_squash ? TW_SQUASH_ROOT
							      : TW_SQUASH_NONE;
	}
	if (!p->session_timeout_set) {
		uint64_t st = 3ull * c->monitor_interval_ms;

		c->session_timeout_ms = st > UINT32_MAX ? UINT32_MAX : (uint32_t)st;
	}
	return 0;
}

#define SECRET_PLACEHOLDER "CHANGE-ME"

/* The secret's two rules (top of this file), checked on the open file. */
static int check_secret(struct parse *p, int fd)
{
	struct stat st;

	if (p->conf->secret[0] &&
	    strncasecmp(p->conf->secret, SECRET_PLACEHOLDER,
			strlen(SECRET_PLACEHOLDER)) == 0)
		return fail(p, 0, "[cluster] secret is still the example's "
			    "placeholder '%s': generate one with "
			    "`openssl rand -hex 32` and put the same value in "
			    "this file on every host", p->conf->secret);
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((st.st_mode & 077) != 0) {
		fail(p, 0, "holds [cluster] secret or client keys but is "
		     "readable by group or "
		     "others (mode %04o); refusing it.  Fix: chmod 600 %s",
		     (unsigned)(st.st_mode & 07777), p->path);
		return -EACCES;
	}
	return 0;
}

int tw_conf_load(const char *path, struct tw_conf *conf, char *err,
		 size_t errlen)
{
	struct parse *p;
	char line[CONF_LINE_MAX];
	FILE *f;
	int rc = 0;

	if (err && errlen)
		err[0] = '\0';
	tw_conf_defaults(conf);
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	/* The parse state holds per-iod arrays; keep it off small stacks. */
	p = calloc(1, sizeof(*p));
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	p->path = path;
	p->conf = conf;
	p->err = err;
	p->errlen = errlen;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		p->line++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f)) {
			rc = fail(p, p->line, "line longer than %d bytes",
				  CONF_LINE_MAX - 2);
			goto out;
		}
		rc = parse_line(p, line);
		if (rc < 0)
			goto out;
	}
	if (ferror(f)) {
		rc = fail(p, 0, "read error");
		goto out;
	}
	rc = validate(p);
	if (rc == 0 && (conf->secret[0] != '\0' || p->key_inline))
		rc = check_secret(p, fileno(f));
out:
	free(p);
	fclose(f);
	return rc;
}
