/* raid0.c - RAID-0 striping math (docs/ARCHITECTURE.md "Data placement").
 *
 * A file of layout (S, C, groups[]) is cut into stripe units of S bytes;
 * unit u lives in column k = u mod C, at subfile offset (u / C) * S.  Every
 * function here is a closed formula over 64-bit offsets: no I/O, no
 * allocation, no state, so it is safe from any thread.  S is a power of two
 * (checked by r0_layout_check), but the code divides rather than shifts
 * because the compiler cannot know that and the formulas then read as in
 * raid.h; none of this is on a path where a division matters.
 *
 * Callers must pass layouts that passed r0_layout_check (or came from
 * r0_layout_make); the mapping functions assert only what would otherwise
 * divide by zero.  test/unit/test_raid.c checks both mapping directions
 * exhaustively over several layouts.
 */
#include "raid.h"

#include "common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define POLICY_MAX 256  /* longest policy string r0_layout_parse_policy reads */

static bool stripe_size_ok(uint64_t s)
{
	return s >= R0_MIN_STRIPE_SIZE && s <= R0_MAX_STRIPE_SIZE &&
	       (s & (s - 1)) == 0;
}

int r0_layout_check(const struct r0_layout *l, uint32_t n_groups)
{
	uint32_t c = l->stripe_count;

	if (!stripe_size_ok(l->stripe_size))
		return -EINVAL;
	if (c == 0 || c > R0_MAX_STRIPE_COUNT)
		return -EINVAL;
	for (uint32_t k = 0; k < c; k++) {
		if (l->groups[k] >= n_groups)
			return -EINVAL;
		/* Two columns on one group would put both on the same twins
		 * and silently halve the redundancy of the spread. */
		for (uint32_t j = 0; j < k; j++)
			if (l->groups[j] == l->groups[k])
				return -EINVAL;
	}
	return 0;
}

int r0_layout_make(struct r0_layout *l, uint32_t stripe_size, uint32_t count,
		   uint32_t first, uint32_t n_groups)
{
	/* first must name a group: a caller with a round-robin counter
	 * reduces it mod n_groups itself, and a bad `setstripe -i` is an
	 * error rather than a silent wrap. */
	if (n_groups == 0 || n_groups > R0_MAX_STRIPE_COUNT || first >= n_groups)
		return -EINVAL;
	if (!stripe_size_ok(stripe_size))
		return -EINVAL;
	if (count == 0 || count > n_groups)
		count = n_groups;
	memset(l, 0, sizeof(*l));
	l->stripe_size = stripe_size;
	l->stripe_count = count;
	for (uint32_t k = 0; k < count; k++)
		l->groups[k] = (first + k) % n_groups;
	return r0_layout_check(l, n_groups);
}

uint64_t r0_file_to_sub(const struct r0_layout *l, uint64_t file_off,
			uint32_t *column)
{
	uint64_t s = l->stripe_size, c = l->stripe_count;
	uint64_t unit = file_off / s;

	assert(s > 0 && c > 0);
	if (column)
		*column = (uint32_t)(unit % c);
	return (unit / c) * s + file_off % s;
}

uint64_t r0_sub_to_file(const struct r0_layout *l, uint32_t column,
			uint64_t sub_off)
{
	uint64_t s = l->stripe_size, c = l->stripe_count;

	assert(s > 0 && c > 0 && column < c);
	return ((sub_off / s) * c + column) * s + sub_off % s;
}

uint64_t r0_piece_count(const struct r0_layout *l, uint64_t off, uint64_t len)
{
	uint64_t s = l->stripe_size, last;

	if (len == 0)
		return 0;
	/* The last byte, saturated: a range past 2^64 is the caller's bug,
	 * and saturating keeps the count finite. */
	last = len - 1 > UINT64_MAX - off ? UINT64_MAX : off + (len - 1);
	return last / s - off / s + 1;
}

int r0_split(const struct r0_layout *l, uint64_t off, uint64_t len,
	     struct r0_piece *out, int max)
{
	uint64_t s = l->stripe_size;
	uint64_t n = r0_piece_count(l, off, len);

	if (len - (len ? 1 : 0) > UINT64_MAX - off)
		return -EINVAL; /* the range wraps past 2^64 */
	if (max < 0 || n > (uint64_t)max)
		return -E2BIG;
	for (uint64_t i = 0; i < n; i++) {
		struct r0_piece *p = &out[i];
		uint64_t in_unit = off % s;
		uint64_t piece = TW_MIN(s - in_unit, len);

		p->file_off = off;
		p->unit = off / s;
		p->sub_off = r0_file_to_sub(l, off, &p->column);
		p->len = (uint32_t)piece;
		off += piece;
		len -= piece;
	}
	return (int)n;
}

uint64_t r0_subfile_size(const struct r0_layout *l, uint32_t column,
			 uint64_t file_size)
{
	uint64_t s = l->stripe_size, c = l->stripe_count;
	uint64_t full = file_size / s;  /* complete units below file_size */
	uint64_t rem = file_size % s;   /* bytes of the partial unit `full` */
	uint64_t units;

	assert(s > 0 && c > 0 && column < c);
	/* Complete units of this column: one per full round of C, plus one
	 * if the last partial round reaches past it. */
	units = full / c + (column < full % c ? 1 : 0);
	/* Column k's bytes are contiguous from offset 0 of its subfile, so
	 * the size is the count of bytes, not a maximum. */
	if (rem > 0 && full % c == column)
		return units * s + rem;
	return units * s;
}

uint64_t r0_max_file_size(const struct r0_layout *l, uint64_t max_sub)
{
	uint64_t s = l->stripe_size, c = l->stripe_count;
	uint64_t units = max_sub / s, rem = max_sub % s;

	assert(s > 0 && c > 0);
	if (max_sub == 0 || max_sub >= (uint64_t)INT64_MAX)
		return (uint64_t)INT64_MAX;
	/* units * s * c + rem <= INT64_MAX, without overflow (s * c is at
	 * most 2^31). */
	if (units > ((uint64_t)INT64_MAX - rem) / (s * c))
		return (uint64_t)INT64_MAX;
	return units * s * c + rem;
}

uint64_t r0_file_size_from_subfiles(const struct r0_layout *l,
				    const uint64_t *sub_sizes)
{
	uint64_t size = 0;

	for (uint32_t k = 0; k < l->stripe_count; k++) {
		uint64_t end;

		if (sub_sizes[k] == 0)
			continue;
		end = r0_sub_to_file(l, k, sub_sizes[k] - 1) + 1;
		size = TW_MAX(size, end);
	}
	return size;
}

int r0_layout_format(const struct r0_layout *l, char *buf, unsigned buflen)
{
	size_t used;
	int n;

	n = snprintf(buf, buflen, "stripe_size=%u stripe_count=%u groups=",
		     l->stripe_size, l->stripe_count);
	if (n < 0 || (unsigned)n >= buflen)
		return -ENOSPC;
	used = (size_t)n;
	for (uint32_t k = 0; k < l->stripe_count && k < R0_MAX_STRIPE_COUNT; k++) {
		n = snprintf(buf + used, buflen - used, "%s%u", k ? "," : "",
			     l->groups[k]);
		if (n < 0 || (size_t)n >= buflen - used)
			return -ENOSPC;
		used += (size_t)n;
	}
	return (int)used;
}

/* ----------------------------------------------------- policy parsing */

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_stripe_size(const char *s, uint32_t *out)
{
	uint64_t v;

	if (tw_parse_size(s, &v) < 0 || !stripe_size_ok(v))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int parse_count(const char *s, uint32_t *out)
{
	/* 0 means "every group", as stripe_count in twinfs.conf. */
	if (parse_u32(s, out) < 0 || *out > R0_MAX_STRIPE_COUNT)
		return -EINVAL;
	return 0;
}

/* A group index, or -1 (as lfs setstripe -i -1) for "not given". */
static int parse_first(const char *s, uint32_t *out)
{
	if (strcmp(s, "-1") == 0) {
		*out = UINT32_MAX;
		return 0;
	}
	if (parse_u32(s, out) < 0 || *out >= R0_MAX_STRIPE_COUNT)
		return -EINVAL;
	return 0;
}

/* "stripe_size=S stripe_count=C [groups=G0,G1,...]": first is G0.  Only
 * the first group matters to a policy, but the list must still be well
 * formed so a typo is not half-accepted. */
static int parse_keyed(char **tok, int n, uint32_t *size, uint32_t *count,
		       uint32_t *first)
{
	bool have_size = false, have_count = false, have_groups = false;

	for (int i = 0; i < n; i++) {
		char *eq = strchr(tok[i], '=');
		char *val;

		if (!eq)
			return -EINVAL;
		*eq = '\0';
		val = eq + 1;
		if (strcmp(tok[i], "stripe_size") == 0 && !have_size) {
			if (parse_stripe_size(val, size) < 0)
				return -EINVAL;
			have_size = true;
		} else if (strcmp(tok[i], "stripe_count") == 0 && !have_count) {
			if (parse_count(val, count) < 0)
				return -EINVAL;
			have_count = true;
		} else if (strcmp(tok[i], "groups") == 0 && !have_groups) {
			char *save = NULL, *g;
			uint32_t v;
			int k = 0;

			for (g = strtok_r(val, ",", &save); g;
			     g = strtok_r(NULL, ",", &save), k++) {
				if (parse_u32(g, &v) < 0 || v >= R0_MAX_STRIPE_COUNT ||
				    k >= (int)R0_MAX_STRIPE_COUNT)
					return -EINVAL;
				if (k == 0)
					*first = v;
			}
			if (k == 0)
				return -EINVAL;
			have_groups = true;
		} else {
			return -EINVAL; /* unknown or repeated key */
		}
	}
	return have_size && have_count ? 0 : -EINVAL;
}

int r0_layout_parse_policy(const char *s, uint32_t *stripe_size,
			   uint32_t *stripe_count, uint32_t *first)
{
	char buf[POLICY_MAX];
	char *tok[R0_MAX_STRIPE_COUNT], *save = NULL, *t;
	uint32_t size = 0, count = 0, f = UINT32_MAX;
	size_t len = strlen(s);
	int n = 0, rc;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len + 1);
	for (t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
		if (n == (int)TW_ARRAY_SIZE(tok))
			return -EINVAL;
		tok[n++] = t;
	}
	if (n == 0)
		return -EINVAL;
	if (strchr(tok[0], '=')) {
		rc = parse_keyed(tok, n, &size, &count, &f);
	} else {
		if (n < 2 || n > 3)
			return -EINVAL;
		rc = parse_stripe_size(tok[0], &size);
		if (rc == 0)
			rc = parse_count(tok[1], &count);
		if (rc == 0 && n == 3)
			rc = parse_first(tok[2], &f);
	}
	if (rc < 0)
		return -EINVAL;
	*stripe_size = size;
	*stripe_count = count;
	*first = f;
	return 0;
}
