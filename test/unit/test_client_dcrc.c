/* test_client_dcrc.c - the sums a write carries from its entry into the
 * client (fuse-client/dcrc.c): combining CRC32Cs equals summing the
 * concatenation; every piece of a write, at any stripe size, gets the sum
 * of its bytes from the entry sums; a range that cuts a chunk is summed
 * again and checked; bytes changed after entry are never given a sum of
 * their own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dcrc.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static uint8_t *random_buf(size_t len)
{
	uint8_t *b = malloc(len ? len : 1);

	cr_assert(b);
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)next();
	return b;
}

Test(dcrc, combine_equals_sum_of_concatenation)
{
	size_t len = (1u << 20) + 77;
	uint8_t *b = random_buf(len);
	uint32_t whole = tw_crc32c(0, b, len);
	size_t cuts[] = { 0, 1, 7, 4096, 65535, 65536, 65537, 500000,
			  len - 1, len };

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t k = cuts[i];
		uint32_t a = tw_crc32c(0, b, k);
		uint32_t c = tw_crc32c(0, b + k, len - k);

		cr_assert_eq(tw_crc32c_combine(a, c, len - k), whole,
			     "cut at %zu", k);
	}
	for (int t = 0; t < 200; t++) {
		size_t k1 = next() % (len + 1), k2 = next() % (len + 1);

		if (k1 > k2) {
			size_t x = k1;

			k1 = k2;
			k2 = x;
		}
		uint32_t a = tw_crc32c(0, b, k1);
		uint32_t m = tw_crc32c(0, b + k1, k2 - k1);
		uint32_t z = tw_crc32c(0, b + k2, len - k2);

		cr_assert_eq(tw_crc32c_combine(tw_crc32c_combine(a, m, k2 - k1),
					       z, len - k2), whole);
		cr_assert_eq(tw_crc32c_combine(a, tw_crc32c_combine(m, z,
								    len - k2),
					       len - k1), whole);
	}
	/* The empty string sums to 0 and is neutral on either side. */
	cr_assert_eq(tw_crc32c(0, b, 0), 0);
	cr_assert_eq(tw_crc32c_combine(whole, 0, 0), whole);
	cr_assert_eq(tw_crc32c_combine(0, whole, len), whole);
	free(b);
}

/* Every piece of a write at offset off, split at stripe units of size s
 * (as r0_split cuts it), gets the sum of its bytes. */
static void check_pieces(const uint8_t *b, size_t len, uint64_t off,
			 uint32_t s)
{
	struct fc_dcrc *c = fc_dcrc_new(b, len, off);
	size_t from = 0;

	cr_assert(c);
	while (from < len) {
		uint64_t unit_end = ((off + from) / s + 1) * s;
		size_t to = unit_end - off < len ? (size_t)(unit_end - off) : len;
		uint32_t crc = 1;

		cr_assert_eq(fc_dcrc_range(c, b, from, to - from, &crc), 0);
		cr_assert_eq(crc, tw_crc32c(0, b + from, to - from),
			     "off %llu unit %u piece [%zu, %zu)",
			     (unsigned long long)off, s, from, to);
		from = to;
	}
	free(c);
}

Test(dcrc, every_piece_at_every_stripe_size)
{
	size_t len = (1u << 20);
	uint8_t *b = random_buf(len);
	uint64_t offs[] = { 0, 1, 4096, 65535, 65536, 65536 + 100,
			    3 * 65536 - 7, (1ull << 40) + 12345 };
	uint32_t sizes[] = { 64u << 10, 128u << 10, 512u << 10, 1u << 20,
			     64u << 20 };
	size_t lens[] = { 1, 100, 65536, 65537, 300000, 1u << 20 };

	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
				check_pieces(b, lens[k], offs[i], sizes[j]);
	free(b);
}

/* A write that moved after entry (O_APPEND) or was shortened: ranges
 * that cut chunks are summed again, and still right. */
Test(dcrc, ranges_that_cut_chunks)
{
	size_t len = 400000;
	uint8_t *b = random_buf(len);
	struct fc_dcrc *c = fc_dcrc_new(b, len, 1000);

	cr_assert(c);
	for (int t = 0; t < 300; t++) {
		size_t from = next() % (len + 1);
		size_t n = next() % (len - from + 1);
		uint32_t crc;

		cr_assert_eq(fc_dcrc_range(c, b, from, n, &crc), 0);
		cr_assert_eq(crc, tw_crc32c(0, b + from, n));
	}
	free(c);
	free(b);
}

Test(dcrc, empty_write)
{
	uint8_t x = 0;
	struct fc_dcrc *c = fc_dcrc_new(&x, 0, 123);
	uint32_t crc = 1;

	cr_assert(c);
	cr_assert_eq(c->n, 0);
	cr_assert_eq(fc_dcrc_range(c, &x, 0, 0, &crc), 0);
	cr_assert_eq(crc, 0);
	free(c);
}

/* Bytes damaged in the buffer after entry: a piece of whole chunks still
 * gets the sum of the bytes that entered (the iod refuses what it
 * receives); a range cutting the damaged chunk is refused here. */
Test(dcrc, damage_after_entry_is_never_summed)
{
	size_t len = 300000;
	uint8_t *b = random_buf(len);
	uint32_t before = tw_crc32c(0, b, 65536);
	struct fc_dcrc *c = fc_dcrc_new(b, len, 0);
	uint32_t crc;

	cr_assert(c);
	b[1234] ^= 0x40;
	cr_assert_eq(fc_dcrc_range(c, b, 0, 65536, &crc), 0);
	cr_assert_eq(crc, before);
	cr_assert_neq(crc, tw_crc32c(0, b, 65536));
	cr_assert_eq(fc_dcrc_range(c, b, 0, 70000, &crc), 0);
	cr_assert_neq(crc, tw_crc32c(0, b, 70000));
	cr_assert_eq(fc_dcrc_range(c, b, 1000, 2000, &crc), -EBADMSG);
	cr_assert_eq(fc_dcrc_range(c, b, 0, 1000, &crc), -EBADMSG);
	/* Chunks the damage is not in are unaffected. */
	cr_assert_eq(fc_dcrc_range(c, b, 70000, 1000, &crc), 0);
	cr_assert_eq(crc, tw_crc32c(0, b + 70000, 1000));
	free(c);
	free(b);
}
