/* test_raid.c - unit tests of the RAID-0 striping math and the RAID-1 twin
 * policy (raid/raid.h, docs/ARCHITECTURE.md "Data placement").
 *
 * The mapping is checked against an independent simulation (units dealt to
 * columns one by one, each column with its own cursor), not against the
 * same formula, for every 4 KiB-aligned offset and the unit edges over many
 * units of many layouts: S = 64K and 128K, C = 1..4, n_groups up to 5, every
 * starting group (so C < n_groups and lists that wrap around are covered).
 */
#include <criterion/criterion.h>
#include <inttypes.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "raid.h"

#define NUNITS 48   /* units walked per layout */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* Calls fn for every layout of the matrix; returns how many. */
static int for_each_layout(void (*fn)(const struct r0_layout *l))
{
	static const uint32_t sizes[] = { 64u << 10, 128u << 10 };
	int n = 0;

	for (size_t si = 0; si < 2; si++)
		for (uint32_t ng = 1; ng <= 5; ng++)
			for (uint32_t c = 1; c <= 4; c++)
				for (uint32_t first = 0; first < ng; first++) {
					struct r0_layout l;
					uint32_t want = c < ng ? c : ng;

					cr_assert_eq(r0_layout_make(&l, sizes[si], c,
								    first, ng), 0);
					cr_assert_eq(l.stripe_count, want);
					if (c > ng)
						continue; /* same layout as c == ng */
					fn(&l);
					n++;
				}
	return n;
}

/* Check one file offset against the simulated (column, sub offset). */
static void check_byte(const struct r0_layout *l, uint64_t o, uint32_t want_k,
		       uint64_t want_sub)
{
	uint32_t k = UINT32_MAX;
	uint64_t sub = r0_file_to_sub(l, o, &k);

	cr_assert_eq(k, want_k, "S %u C %u off %llu", l->stripe_size,
		     l->stripe_count, (unsigned long long)o);
	cr_assert_eq(sub, want_sub, "S %u C %u off %llu", l->stripe_size,
		     l->stripe_count, (unsigned long long)o);
	cr_assert_eq(r0_sub_to_file(l, k, sub), o);
}

static void mapping_one(const struct r0_layout *l)
{
	uint64_t s = l->stripe_size;
	uint64_t cursor[R0_MAX_STRIPE_COUNT] = { 0 };
	uint32_t col = 0;

	/* Deal units to columns round robin, as a person would by hand. */
	for (uint64_t u = 0; u < NUNITS; u++) {
		uint64_t base = u * s;

		for (uint64_t in = 0; in < s; in += 4096)
			check_byte(l, base + in, col, cursor[col] + in);
		check_byte(l, base + s - 1, col, cursor[col] + s - 1);
		check_byte(l, base + 1, col, cursor[col] + 1);
		if (u > 0) {
			/* Edges S-1, S, S+1 relative to the unit start. */
			uint32_t prev = col ? col - 1 : l->stripe_count - 1;

			check_byte(l, base - 1, prev, cursor[prev] - 1);
		}
		cursor[col] += s;
		col = (col + 1) % l->stripe_count;
	}
	/* Inverse first: every 4 KiB of every column maps back to itself. */
	for (uint32_t k = 0; k < l->stripe_count; k++) {
		for (uint64_t x = 0; x < 8 * s; x += 4096) {
			uint64_t edges[] = { x, x + 1, x + 4095 };

			for (size_t e = 0; e < 3; e++) {
				uint32_t kk;
				uint64_t o = r0_sub_to_file(l, k, edges[e]);

				cr_assert_eq(r0_file_to_sub(l, o, &kk), edges[e]);
				cr_assert_eq(kk, k);
			}
		}
	}
	/* Far offsets: 64-bit math must not truncate. */
	for (int i = 0; i < 2000; i++) {
		uint64_t o = rng() >> (1 + rng() % 20);
		uint32_t k;
		uint64_t sub = r0_file_to_sub(l, o, &k);
		uint64_t u = o / s;

		cr_assert_eq(k, u % l->stripe_count);
		cr_assert_eq(r0_sub_to_file(l, k, sub), o);
		cr_assert_eq(sub % s, o % s);
	}
}

Test(raid0, forward_inverse_exhaustive)
{
	cr_assert_eq(for_each_layout(mapping_one), 2 * (1 + 2 * 2 + 3 * 3 + 4 * 4 + 4 * 5));
}

static void check_split(const struct r0_layout *l, uint64_t off, uint64_t len)
{
	static struct r0_piece p[NUNITS * 4 + 8];
	uint64_t s = l->stripe_size;
	uint64_t want = r0_piece_count(l, off, len);
	int n = r0_split(l, off, len, p, (int)TW_ARRAY_SIZE(p));
	uint64_t pos = off;

	cr_assert_eq((uint64_t)n, want, "off %llu len %llu",
		     (unsigned long long)off, (unsigned long long)len);
	for (int i = 0; i < n; i++) {
		uint32_t k;

		cr_assert_eq(p[i].file_off, pos, "pieces in order, no gap");
		cr_assert_gt(p[i].len, 0);
		cr_assert_leq(p[i].len, s);
		cr_assert_eq(p[i].unit, pos / s);
		cr_assert_eq((pos + p[i].len - 1) / s, p[i].unit, "one unit");
		cr_assert_eq(p[i].sub_off, r0_file_to_sub(l, pos, &k));
		cr_assert_eq(p[i].column, k);
		/* Within a unit the subfile bytes are contiguous too. */
		cr_assert_eq(r0_file_to_sub(l, pos + p[i].len - 1, &k),
			     p[i].sub_off + p[i].len - 1);
		pos += p[i].len;
	}
	cr_assert_eq(pos, off + len, "pieces cover the range exactly");
	if (n > 0)
		cr_assert_eq(r0_split(l, off, len, p, n - 1), -E2BIG);
}

static void split_one(const struct r0_layout *l)
{
	uint64_t s = l->stripe_size;
	uint64_t offs[] = { 0, 1, 4096, s - 1, s, s + 1, 3 * s - 4096, 5 * s + 7 };
	uint64_t lens[] = { 0, 1, 4095, 4096, s - 1, s, s + 1, 2 * s,
			    3 * s + 1, 7 * s - 1, 16 * s };

	for (size_t i = 0; i < TW_ARRAY_SIZE(offs); i++)
		for (size_t j = 0; j < TW_ARRAY_SIZE(lens); j++)
			check_split(l, offs[i], lens[j]);
	for (int i = 0; i < 300; i++)
		check_split(l, rng() % (40 * s), rng() % (20 * s));
	/* Far away in the file. */
	check_split(l, (1ull << 50) - 3, 2 * s + 9);
}

Test(raid0, split)
{
	struct r0_layout l;
	struct r0_piece p[2];

	for_each_layout(split_one);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 2, 0, 2), 0);
	cr_assert_eq(r0_split(&l, 5, 0, p, 0), 0, "len 0 gives 0 pieces");
	cr_assert_eq(r0_piece_count(&l, 5, 0), 0);
	cr_assert_eq(r0_split(&l, 0, 1, p, 0), -E2BIG);
	cr_assert_eq(r0_split(&l, 0, 1, p, -1), -E2BIG);
	cr_assert_eq(r0_split(&l, UINT64_MAX, 2, p, 2), -EINVAL, "range wraps");
	cr_assert_eq(r0_split(&l, UINT64_MAX, 1, p, 2), 1, "last byte is fine");
}

/* Brute force: walk units, add what lands in column k below n. */
static uint64_t brute_subfile_size(const struct r0_layout *l, uint32_t k,
				   uint64_t n)
{
	uint64_t s = l->stripe_size, total = 0;

	for (uint64_t u = 0; u * s < n; u++)
		if (u % l->stripe_count == k)
			total += n - u * s < s ? n - u * s : s;
	return total;
}

static void sizes_one(const struct r0_layout *l)
{
	uint64_t s = l->stripe_size;
	uint64_t subs[R0_MAX_STRIPE_COUNT];
	uint64_t n;

	for (int i = 0; i < 600; i++) {
		switch (i % 4) {
		case 0:
			n = (uint64_t)i / 4 * 4096;
			break;
		case 1:
			n = (uint64_t)(i / 4) * s + (i % 3) - 1 + (i < 4);
			break;
		case 2:
			n = rng() % (12 * s * l->stripe_count);
			break;
		default:
			n = (uint64_t)(i / 4);
			break;
		}
		for (uint32_t k = 0; k < l->stripe_count; k++) {
			subs[k] = r0_subfile_size(l, k, n);
			cr_assert_eq(subs[k], brute_subfile_size(l, k, n),
				     "S %u C %u k %u n %llu", l->stripe_size,
				     l->stripe_count, k, (unsigned long long)n);
		}
		cr_assert_eq(r0_file_size_from_subfiles(l, subs), n,
			     "n %llu", (unsigned long long)n);
	}
	/* Far sizes: the identity only (brute force would take too long). */
	for (int i = 0; i < 500; i++) {
		n = rng() >> (2 + rng() % 30);
		for (uint32_t k = 0; k < l->stripe_count; k++)
			subs[k] = r0_subfile_size(l, k, n);
		cr_assert_eq(r0_file_size_from_subfiles(l, subs), n);
	}
}

Test(raid0, subfile_sizes)
{
	uint64_t zeros[R0_MAX_STRIPE_COUNT] = { 0 };
	struct r0_layout l;

	for_each_layout(sizes_one);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 3, 0, 3), 0);
	cr_assert_eq(r0_file_size_from_subfiles(&l, zeros), 0);
	/* A hole at the end of column 0 still defines the size. */
	uint64_t subs[3] = { 1, 0, 0 };

	cr_assert_eq(r0_file_size_from_subfiles(&l, subs), 1);
	subs[2] = 65536;
	cr_assert_eq(r0_file_size_from_subfiles(&l, subs), 3 * 65536);
}

/* r0_max_file_size(l, M) is the largest F whose subfiles all fit in M
 * bytes: F fits, F + 1 makes some subfile larger than M. */
static void max_size_one(const struct r0_layout *l)
{
	const uint64_t s = l->stripe_size;
	const uint64_t subs[] = { 1, s - 1, s, s + 1, 3 * s + 17,
				  (16ull << 40) - 4096, (1ull << 40) + 5 };

	for (size_t i = 0; i < TW_ARRAY_SIZE(subs); i++) {
		uint64_t m = subs[i], f = r0_max_file_size(l, m), worst = 0;

		for (uint32_t k = 0; k < l->stripe_count; k++)
			worst = TW_MAX(worst, r0_subfile_size(l, k, f));
		cr_assert_eq(worst, m, "S %" PRIu64 " C %u M %" PRIu64,
			     s, l->stripe_count, m);
		worst = 0;
		for (uint32_t k = 0; k < l->stripe_count; k++)
			worst = TW_MAX(worst, r0_subfile_size(l, k, f + 1));
		cr_assert_eq(worst, m + 1);
	}
}

Test(raid0, max_file_size)
{
	struct r0_layout l;

	for_each_layout(max_size_one);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 2, 0, 2), 0);
	/* No limit known, a limit at or past off_t's, and one whose product
	 * would pass it: capped at INT64_MAX. */
	cr_assert_eq(r0_max_file_size(&l, 0), (uint64_t)INT64_MAX);
	cr_assert_eq(r0_max_file_size(&l, (uint64_t)INT64_MAX), (uint64_t)INT64_MAX);
	cr_assert_eq(r0_max_file_size(&l, 1ull << 62), (uint64_t)INT64_MAX);
	/* ext4's 16 TiB - 4 KiB per subfile, two columns of 64 KiB. */
	cr_assert_eq(r0_max_file_size(&l, (16ull << 40) - 4096),
		     (32ull << 40) - 65536 - 4096 + 0ull);
}

Test(raid0, layout_make)
{
	struct r0_layout l;

	cr_assert_eq(r0_layout_make(&l, 512u << 10, 3, 3, 5), 0);
	cr_assert_eq(l.stripe_size, 512u << 10);
	cr_assert_eq(l.stripe_count, 3);
	cr_assert_eq(l.groups[0], 3);
	cr_assert_eq(l.groups[1], 4);
	cr_assert_eq(l.groups[2], 0, "wraps around");
	cr_assert_eq(l.groups[3], 0, "unused entries are zeroed");
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 0, 2, 4), 0);
	cr_assert_eq(l.stripe_count, 4, "count 0 means every group");
	cr_assert_eq(l.groups[0], 2);
	cr_assert_eq(l.groups[3], 1);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 9, 1, 2), 0);
	cr_assert_eq(l.stripe_count, 2, "clamped to n_groups");
	cr_assert_eq(l.groups[0], 1);
	cr_assert_eq(l.groups[1], 0);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 32, 31, 32), 0);
	cr_assert_eq(l.groups[1], 0);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 1, 2, 2), -EINVAL, "first >= n_groups");
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 1, 0, 0), -EINVAL);
	cr_assert_eq(r0_layout_make(&l, 64u << 10, 1, 0, 33), -EINVAL);
	cr_assert_eq(r0_layout_make(&l, 96u << 10, 1, 0, 2), -EINVAL);
	cr_assert_eq(r0_layout_make(&l, 32u << 10, 1, 0, 2), -EINVAL);
	cr_assert_eq(r0_layout_make(&l, 128u << 20, 1, 0, 2), -EINVAL);
	cr_assert_eq(r0_layout_make(&l, R0_MAX_STRIPE_SIZE, 1, 0, 2), 0);
	cr_assert_eq(r0_layout_make(&l, R0_MIN_STRIPE_SIZE, 1, 0, 2), 0);
}

Test(raid0, layout_check)
{
	struct r0_layout l;

	cr_assert_eq(r0_layout_make(&l, 1u << 20, 3, 0, 4), 0);
	cr_assert_eq(r0_layout_check(&l, 4), 0);
	cr_assert_eq(r0_layout_check(&l, 3), 0);
	cr_assert_eq(r0_layout_check(&l, 2), -EINVAL, "group 2 >= n_groups");
	l.groups[2] = 1;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL, "group listed twice");
	l.groups[2] = 2;
	l.stripe_count = 0;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL);
	l.stripe_count = R0_MAX_STRIPE_COUNT + 1;
	cr_assert_eq(r0_layout_check(&l, 64), -EINVAL);
	l.stripe_count = 3;
	l.stripe_size = (1u << 20) + 4096;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL, "not a power of two");
	l.stripe_size = 32u << 10;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL);
	l.stripe_size = 128u << 20;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL);
	l.stripe_size = 0;
	cr_assert_eq(r0_layout_check(&l, 4), -EINVAL);
}

Test(raid0, format_parse_round_trip)
{
	struct r0_layout l;
	char buf[256];
	uint32_t s, c, f;
	int n;

	cr_assert_eq(r0_layout_make(&l, 512u << 10, 2, 0, 2), 0);
	n = r0_layout_format(&l, buf, sizeof(buf));
	cr_assert_str_eq(buf, "stripe_size=524288 stripe_count=2 groups=0,1");
	cr_assert_eq(n, (int)strlen(buf));
	cr_assert_eq(r0_layout_format(&l, buf, (unsigned)n + 1), n);
	cr_assert_eq(r0_layout_format(&l, buf, (unsigned)n), -ENOSPC);
	cr_assert_eq(r0_layout_format(&l, buf, 10), -ENOSPC);

	for (uint32_t ng = 1; ng <= R0_MAX_STRIPE_COUNT; ng += 3) {
		for (uint32_t first = 0; first < ng; first += 2) {
			cr_assert_eq(r0_layout_make(&l, (64u << 10) << (first % 11), ng,
						  first, ng), 0);
			n = r0_layout_format(&l, buf, sizeof(buf));
			cr_assert_gt(n, 0);
			cr_assert_eq(r0_layout_parse_policy(buf, &s, &c, &f), 0, "%s", buf);
			cr_assert_eq(s, l.stripe_size);
			cr_assert_eq(c, l.stripe_count);
			cr_assert_eq(f, first);
		}
	}
	cr_assert_eq(r0_layout_parse_policy("1M 4 2", &s, &c, &f), 0);
	cr_assert_eq(s, 1u << 20);
	cr_assert_eq(c, 4);
	cr_assert_eq(f, 2);
	cr_assert_eq(r0_layout_parse_policy("  512K\t2 ", &s, &c, &f), 0);
	cr_assert_eq(s, 512u << 10);
	cr_assert_eq(c, 2);
	cr_assert_eq(f, UINT32_MAX, "first not given");
	cr_assert_eq(r0_layout_parse_policy("65536 0 -1", &s, &c, &f), 0);
	cr_assert_eq(c, 0, "0 = every group");
	cr_assert_eq(f, UINT32_MAX);
	cr_assert_eq(r0_layout_parse_policy("stripe_count=3 stripe_size=128K", &s, &c, &f), 0);
	cr_assert_eq(s, 128u << 10);
	cr_assert_eq(c, 3);
	cr_assert_eq(f, UINT32_MAX);

	static const char *const bad[] = {
		"", "   ", "1M", "1M 2 3 4", "96K 2", "32K 1", "128M 1", "1M 33",
		"1M x", "1M 2 x", "1M 2 32", "1M -2", "1G 1",
		"stripe_size=1M", "stripe_count=2",
		"stripe_size=1M stripe_count=2 bogus=1",
		"stripe_size=1M stripe_size=1M stripe_count=2",
		"stripe_size=1M stripe_count=2 groups=",
		"stripe_size=1M stripe_count=2 groups=a,b",
		"stripe_size=1M stripe_count=2 1",
		"stripe_size=100000 stripe_count=2",
	};
	for (size_t i = 0; i < TW_ARRAY_SIZE(bad); i++)
		cr_assert_eq(r0_layout_parse_policy(bad[i], &s, &c, &f), -EINVAL,
			     "accepted '%s'", bad[i]);
	char longer[400];

	memset(longer, ' ', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	memcpy(longer + 300, "1M 2", 4);
	cr_assert_eq(r0_layout_parse_policy(longer, &s, &c, &f), -EINVAL);
}

Test(raid1, twin_policy)
{
	/* Primaries alternate over inodes and columns so load spreads. */
	cr_assert_eq(r1_primary(0, 0), 0);
	cr_assert_eq(r1_primary(1, 0), 1);
	cr_assert_eq(r1_primary(1, 1), 0);
	cr_assert_eq(r1_primary(UINT64_MAX, 1), 0);
	for (uint64_t u = 0; u < 8; u++)
		cr_assert_eq(r1_read_twin(5, 2, u), (int)((7 + u) % 2));
}
