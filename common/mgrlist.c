/* mgrlist.c - the addresses of an mgrd pair and the rule for which to try
 * next (mgrlist.h says the rule). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mgrlist.h"

int tw_mgr_addr_parse(const char *s, int default_port, struct tw_mgr_addr *a)
{
	const char *colon, *h = s;
	size_t hl;
	char *end;
	long p = default_port;

	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb)
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(rb - h);
		colon = rb[1] == ':' ? rb + 1 : NULL;
		if (rb[1] && !colon)
			return -EINVAL;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			colon = NULL;   /* bare IPv6 literal */
		hl = colon ? (size_t)(colon - s) : strlen(s);
	}
	if (colon) {
		if (!colon[1] || colon[1] == '+' || colon[1] == '-')
			return -EINVAL;
		errno = 0;
		p = strtol(colon + 1, &end, 10);
		if (errno || *end)
			return -EINVAL;
	}
	if (p <= 0 || p > 65535 || hl == 0 || hl >= sizeof(a->host) ||
	    memchr(h, ',', hl) || memchr(h, '[', hl) || memchr(h, ']', hl))
		return -EINVAL;
	memcpy(a->host, h, hl);
	a->host[hl] = '\0';
	a->port = (int)p;
	return 0;
}

static bool addr_eq(const struct tw_mgr_addr *a, const struct tw_mgr_addr *b)
{
	return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

void tw_mgrlist_init(struct tw_mgrlist *l)
{
	memset(l, 0, sizeof(*l));
	l->used = -1;
}

int tw_mgrlist_add(struct tw_mgrlist *l, const char *host, int port)
{
	struct tw_mgr_addr a;

	if (l->n >= TW_MGRLIST_MAX)
		return -E2BIG;
	if (!host || !*host || strlen(host) >= sizeof(a.host) || port <= 0 ||
	    port > 65535)
		return -EINVAL;
	snprintf(a.host, sizeof(a.host), "%s", host);
	a.port = port;
	for (int i = 0; i < l->n; i++)
		if (addr_eq(&l->addr[i], &a))
			return -EINVAL;
	l->addr[l->n++] = a;
	return 0;
}

int tw_mgrlist_conf(struct tw_mgrlist *l, const struct tw_conf *c)
{
	int rc = 0;

	tw_mgrlist_init(l);
	if (c->n_mgrds < 2)   /* [mgrd], or a file before the pair */
		return tw_mgrlist_add(l, c->mgr_host, c->mgr_port);
	for (int i = 0; i < c->n_mgrds && i < TW_MAX_MGRDS && rc == 0; i++)
		rc = tw_mgrlist_add(l, c->mgrd[i].host, c->mgrd[i].port);
	return rc < 0 ? -EINVAL : 0;
}

int tw_mgrlist_parse(struct tw_mgrlist *l, const char *s, int default_port)
{
	char one[TW_HOST_MAX + 16];

	tw_mgrlist_init(l);
	if (!s)
		return -EINVAL;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		struct tw_mgr_addr a;
		int rc;

		if (len == 0 || len >= sizeof(one))
			return -EINVAL;
		memcpy(one, s, len);
		one[len] = '\0';
		if (tw_mgr_addr_parse(one, default_port, &a) < 0)
			return -EINVAL;
		rc = tw_mgrlist_add(l, a.host, a.port);
		if (rc < 0)
			return -EINVAL;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

const char *tw_mgr_addr_str(const struct tw_mgr_addr *a, char *buf,
			    size_t len)
{
	bool v6 = strchr(a->host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%d", v6 ? "[" : "", a->host, v6 ? "]" : "",
		 a->port);
	return buf;
}

const char *tw_mgrlist_name(const struct tw_mgrlist *l, int i, char *buf,
			    size_t len)
{
	char a[TW_HOST_MAX + 16];
	int id = l->ids[i] ? l->ids[i] : i < l->n && l->n > 1 ? i + 1 : 0;

	tw_mgr_addr_str(&l->addr[i], a, sizeof(a));
	if (id)
		snprintf(buf, len, "mgrd %d at %s", id, a);
	else if (i >= l->n)
		snprintf(buf, len, "mgrd at %s", a);
	else
		snprintf(buf, len, "%s", a);
	return buf;
}

void tw_mgrlist_learn_id(struct tw_mgrlist *l, uint32_t id)
{
	if (id >= 1 && id <= TW_MGRLIST_MAX)
		l->ids[l->cur] = (int)id;
}

/* The index the hint names: listed, or the extra slot (filled); -1 when
 * there is no usable hint or it names cur itself. */
static int hint_index(struct tw_mgrlist *l, const char *hint)
{
	struct tw_mgr_addr a;

	if (!hint || !*hint || tw_mgr_addr_parse(hint, 0, &a) < 0)
		return -1;
	for (int i = 0; i < l->n; i++)
		if (addr_eq(&l->addr[i], &a))
			return i == l->cur ? -1 : i;
	if (l->cur == l->n && addr_eq(&l->addr[l->n], &a))
		return -1;
	l->addr[l->n] = a;
	l->ids[l->n] = 0;
	return l->n;
}

uint32_t tw_mgrlist_failed(struct tw_mgrlist *l, enum tw_mgr_outcome o,
			   const char *cause, const char *hint,
			   uint32_t max_ms)
{
	char name[TW_HOST_MAX + 32];
	uint32_t cap = max_ms ? TW_MIN(max_ms, TW_MGRLIST_BACKOFF_MAX_MS)
			      : TW_MGRLIST_BACKOFF_MAX_MS;
	uint32_t delay;
	int next;

	(void)o;   /* both move on; a hint comes only with -EREMOTE */
	snprintf(l->why, sizeof(l->why), "%s: %s",
		 tw_mgrlist_name(l, l->cur, name, sizeof(name)),
		 cause && *cause ? cause : "failed");
	next = hint_index(l, hint);
	if (next < 0)
		next = l->cur >= l->n ? 0 : (l->cur + 1) % l->n;
	l->cur = next;
	l->fails++;
	if (l->fails == 1)
		return 0;
	delay = l->fails - 2 >= 16 ? cap
		: TW_MGRLIST_BACKOFF_MIN_MS << (l->fails - 2);
	return TW_MIN(delay, cap);
}

bool tw_mgrlist_ok(struct tw_mgrlist *l, char *msg, size_t len)
{
	char name[TW_HOST_MAX + 32];
	bool switched = l->cur != l->used && (l->used >= 0 || l->cur != 0);

	l->fails = 0;
	if (switched)
		snprintf(msg, len, "using %s (%s)",
			 tw_mgrlist_name(l, l->cur, name, sizeof(name)),
			 *l->why ? l->why : "named by the other");
	else if (len)
		*msg = '\0';
	l->used = l->cur;
	return switched;
}
