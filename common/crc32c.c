/* crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Same convention as iSCSI, ext4 and the SSE4.2 crc32 instruction: the
 * running value is inverted on entry and exit, so a fresh sum starts from 0
 * and sums chain (see common.h).  Check value: crc32c("123456789") ==
 * 0xE3069283.  Two implementations produce identical results: a
 * slicing-by-8 table path for any CPU and a hardware path using the SSE4.2
 * crc32 instruction, chosen once at run time.  The tables are built on first
 * use under pthread_once so the file has no large constant arrays.
 */
#include "common.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

typedef uint32_t (*crc_fn)(uint32_t crc, const unsigned char *p, size_t len);
static crc_fn crc_impl;

static void build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
		crc_table[0][i] = c;
	}
	/* table[t][i] = the CRC of byte i followed by t zero bytes, which
	 * lets the software path consume 8 bytes per step. */
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
				crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* Raw (not inverted) software update: the caller inverts. */
static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* Slicing-by-8 reads the word in memory order, so little-endian only;
	 * elsewhere the byte loop below does all the work. */
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8); /* unaligned-safe; the data is little-endian */
		w ^= crc;
		crc = crc_table[7][w & 0xff] ^
		      crc_table[6][(w >> 8) & 0xff] ^
		      crc_table[5][(w >> 16) & 0xff] ^
		      crc_table[4][(w >> 24) & 0xff] ^
		      crc_table[3][(w >> 32) & 0xff] ^
		      crc_table[2][(w >> 40) & 0xff] ^
		      crc_table[1][(w >> 48) & 0xff] ^
		      crc_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
#endif
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

/* The map that appends len zero bytes to a CRC register is linear over
 * GF(2): a 32x32 bit matrix, squared to double len (the method of zlib's
 * crc32_combine), then tabulated a byte of the register at a time. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;

	for (; vec; vec >>= 1, mat++)
		if (vec & 1)
			sum ^= *mat;
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		sq[n] = gf2_times(mat, mat[n]);
}

/* tab: the map that appends len zero bytes (len a power of two >= 2). */
static void zeros_table(uint32_t tab[4][256], size_t len)
{
	uint32_t even[32], odd[32], row = 1;

	odd[0] = CRC32C_POLY;          /* one zero bit */
	for (int n = 1; n < 32; n++, row <<= 1)
		odd[n] = row;
	gf2_square(even, odd);         /* two bits */
	gf2_square(odd, even);         /* four bits */
	for (;;) {                     /* odd: one byte, then doubling */
		gf2_square(even, odd);
		len >>= 1;
		if (len == 0) {
			memcpy(odd, even, sizeof(odd));
			break;
		}
		gf2_square(odd, even);
		len >>= 1;
		if (len == 0)
			break;
	}
	for (uint32_t n = 0; n < 256; n++) {
		tab[0][n] = gf2_times(odd, n);
		tab[1][n] = gf2_times(odd, n << 8);
		tab[2][n] = gf2_times(odd, n << 16);
		tab[3][n] = gf2_times(odd, n << 24);
	}
}

static uint32_t crc_shift(uint32_t tab[4][256], uint32_t crc)
{
	return tab[0][crc & 0xff] ^ tab[1][(crc >> 8) & 0xff] ^
	       tab[2][(crc >> 16) & 0xff] ^ tab[3][crc >> 24];
}

/* Appending a whole journal block (4 KiB) is what the journal's commit
 * sum does once per block (tw_crc32c_combine's fast case). */
#define CRC_BLOCK 4096u
static uint32_t crc_block[4][256];

#if defined(__x86_64__)
#include <nmmintrin.h>

/* The crc32 instruction takes 3 cycles but can start one per cycle, so
 * the hardware path runs three streams over three adjacent spans and
 * joins them: crc(A || B) = shift(crc(A), |B|) ^ crc(B) on the raw
 * register, where shift appends |B| zero bytes, a linear map over GF(2)
 * tabulated for the two span lengths (the method of zlib's
 * crc32_combine).  About 3x one stream: the block checksums of every
 * read and checkpoint (docs/ARCHITECTURE.md "Integrity") ride on it. */
#define CRC_LONG  8192u
#define CRC_SHORT 256u
static uint32_t crc_long[4][256], crc_short[4][256];

/* Compiled for SSE4.2 only in this function, so the rest of the library
 * still runs on CPUs without it; it is called only when the CPU has it. */
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	/* Align to 8 so the 64-bit loads in the main loop do not split
	 * cache lines. */
	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	for (size_t span = CRC_LONG; span >= CRC_SHORT; span = CRC_SHORT) {
		while (len >= 3 * span) {
			uint64_t c1 = 0, c2 = 0, w0, w1, w2;
			const unsigned char *end = p + span;

			do {
				memcpy(&w0, p, 8);
				memcpy(&w1, p + span, 8);
				memcpy(&w2, p + 2 * span, 8);
				c = _mm_crc32_u64(c, w0);
				c1 = _mm_crc32_u64(c1, w1);
				c2 = _mm_crc32_u64(c2, w2);
				p += 8;
			} while (p < end);
			c = crc_shift(span == CRC_LONG ? crc_long : crc_short,
				      (uint32_t)c) ^ (uint32_t)c1;
			c = crc_shift(span == CRC_LONG ? crc_long : crc_short,
				      (uint32_t)c) ^ (uint32_t)c2;
			p += 2 * span;
			len -= 3 * span;
		}
		if (span == CRC_SHORT)
			break;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static void crc_init(void)
{
	build_tables();
	zeros_table(crc_block, CRC_BLOCK);
	crc_impl = crc_sw;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2")) {
		zeros_table(crc_long, CRC_LONG);
		zeros_table(crc_short, CRC_SHORT);
		crc_impl = crc_hw;
	}
#endif
}

uint32_t tw_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_impl(~crc, buf, len);
}

/* a * b mod P, in the reflected order tw_crc32c uses (bit 31 is x^0);
 * a != 0. */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

/* x^(8 * len) mod P, reflected: never 0 (x is a unit mod P). */
static uint32_t x8nmodp(uint64_t len)
{
	uint32_t p = 1u << 31;        /* x^0 */
	uint32_t sq = 1u << 23;       /* x^8, then x^16, x^32, ... */

	while (len) {
		if (len & 1)
			p = multmodp(sq, p);
		sq = multmodp(sq, sq);
		len >>= 1;
	}
	return p;
}

/* Without its pre- and post-inversion CRC32C is linear over GF(2), and
 * for the conditioned sum crc(a || b) = crc(a) * x^(8|b|) mod P  xor
 * crc(b): the two conditionings cancel. */
uint32_t tw_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	if (len2 == CRC_BLOCK) {
		pthread_once(&crc_once, crc_init);
		return crc_shift(crc_block, crc1) ^ crc2;
	}
	return multmodp(x8nmodp(len2), crc1) ^ crc2;
}

/* For the unit tests: force one implementation (hw = true needs SSE4.2).
 * Not in common.h because nothing else should care which path runs. */
uint32_t tw__crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t tw__crc32c_hw(uint32_t crc, const void *buf, size_t len);
int tw__crc32c_have_hw(void);

uint32_t tw__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw(~crc, buf, len);
}

int tw__crc32c_have_hw(void)
{
	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	return crc_impl == crc_hw;
#else
	return 0;
#endif
}

uint32_t tw__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	if (crc_impl == crc_hw)
		return ~crc_hw(~crc, buf, len);
#endif
	return ~crc_sw(~crc, buf, len);
}
