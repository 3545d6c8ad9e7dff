/* test_iod_ra.c - the read-ahead of strided reads (iod/ra.c): what a
 * twin sees while both twins serve a stream (every other row) is found
 * and prefetched ahead, each range once; sequential, random and backward
 * reads, and anything past the subfile's end, are never named. */
#include <criterion/criterion.h>

#include <string.h>

#include "ra.h"

#define K 1024ull
#define M (1024ull * 1024)
#define ROW (512 * K)

static struct iod_ra_range pf[IOD_RA_MAX];

Test(iod_ra, twin_rows_are_prefetched_from_the_third_read)
{
	struct iod_ra ra = { 0 };

	/* one twin of a pair: rows 0, 2, 4, ... of 512 KiB */
	cr_assert_eq(iod_ra_note(&ra, 0, ROW, 64 * M, 2 * M, pf), 0);
	cr_assert_eq(iod_ra_note(&ra, 1 * M, ROW, 64 * M, 2 * M, pf), 0,
		     "one gap is not a stride yet");
	cr_assert_eq(iod_ra_note(&ra, 2 * M, ROW, 64 * M, 2 * M, pf), 4);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(pf[i].off, (3 + (uint64_t)i) * M);
		cr_assert_eq(pf[i].len, ROW);
	}
	/* steady state: one new range per read, the next one not named */
	cr_assert_eq(iod_ra_note(&ra, 3 * M, ROW, 64 * M, 2 * M, pf), 1);
	cr_assert_eq(pf[0].off, 7 * M);
	cr_assert_eq(iod_ra_note(&ra, 4 * M, ROW, 64 * M, 2 * M, pf), 1);
	cr_assert_eq(pf[0].off, 8 * M);
}

Test(iod_ra, a_long_stream_names_each_row_once_and_ahead_of_its_read)
{
	static bool named[512];
	struct iod_ra ra = { 0 };
	uint64_t size = 512 * M;

	for (uint64_t r = 0; r < 512; r++) {
		int n = iod_ra_note(&ra, r * M, ROW, size, 2 * M, pf);

		if (r >= 3)
			cr_assert(named[r], "row at %llu MiB read before "
				  "it was prefetched", (unsigned long long)r);
		for (int i = 0; i < n; i++) {
			uint64_t k = pf[i].off / M;

			cr_assert_eq(pf[i].off % M, 0);
			cr_assert(k > r && k <= r + 4, "named %llu at read %llu",
				  (unsigned long long)k, (unsigned long long)r);
			cr_assert(!named[k], "row %llu named twice",
				  (unsigned long long)k);
			named[k] = true;
		}
	}
}

Test(iod_ra, sequential_random_and_backward_reads_name_nothing)
{
	static const uint64_t rnd[] = { 7, 3, 11, 12, 40, 2, 9, 33, 1, 20 };
	struct iod_ra ra = { 0 };

	for (uint64_t i = 0; i < 32; i++)
		cr_assert_eq(iod_ra_note(&ra, i * ROW, ROW, 64 * M, 2 * M, pf),
			     0, "sequential: the kernel's read-ahead");
	memset(&ra, 0, sizeof(ra));
	for (size_t i = 0; i < sizeof(rnd) / sizeof(rnd[0]); i++)
		cr_assert_eq(iod_ra_note(&ra, rnd[i] * M, 4 * K, 64 * M, 2 * M,
					 pf), 0);
	memset(&ra, 0, sizeof(ra));
	for (uint64_t i = 0; i < 8; i++)
		cr_assert_eq(iod_ra_note(&ra, (20 - 2 * i) * M, ROW, 64 * M,
					 2 * M, pf), 0);
	memset(&ra, 0, sizeof(ra));
	for (uint64_t i = 0; i < 4; i++)
		cr_assert_eq(iod_ra_note(&ra, i * (IOD_RA_MAX_STRIDE + M), ROW,
					 64 * 1024 * M, 2 * M, pf), 0,
			     "gaps past IOD_RA_MAX_STRIDE are jumps");
}

Test(iod_ra, nothing_past_the_end_and_the_last_range_is_cut)
{
	struct iod_ra ra = { 0 };
	uint64_t size = 4 * M + 100;

	iod_ra_note(&ra, 0, ROW, size, 2 * M, pf);
	iod_ra_note(&ra, 1 * M, ROW, size, 2 * M, pf);
	cr_assert_eq(iod_ra_note(&ra, 2 * M, ROW, size, 2 * M, pf), 2);
	cr_assert_eq(pf[0].off, 3 * M);
	cr_assert_eq(pf[0].len, ROW);
	cr_assert_eq(pf[1].off, 4 * M);
	cr_assert_eq(pf[1].len, 100);
	cr_assert_eq(iod_ra_note(&ra, 3 * M, ROW, size, 2 * M, pf), 0);
}

Test(iod_ra, a_broken_stride_stops_until_seen_twice_again)
{
	struct iod_ra ra = { 0 };

	iod_ra_note(&ra, 0, ROW, 256 * M, 2 * M, pf);
	iod_ra_note(&ra, 1 * M, ROW, 256 * M, 2 * M, pf);
	cr_assert_eq(iod_ra_note(&ra, 2 * M, ROW, 256 * M, 2 * M, pf), 4);
	/* a jump (another reader, a seek) */
	cr_assert_eq(iod_ra_note(&ra, 100 * M, ROW, 256 * M, 2 * M, pf), 0);
	cr_assert_eq(iod_ra_note(&ra, 101 * M, ROW, 256 * M, 2 * M, pf), 0);
	/* seen twice again: the whole window, not only what follows the
	 * old stream's last range */
	cr_assert_eq(iod_ra_note(&ra, 102 * M, ROW, 256 * M, 2 * M, pf), 4);
	cr_assert_eq(pf[0].off, 103 * M);
	cr_assert_eq(pf[3].off, 106 * M);
}

Test(iod_ra, the_window_sets_the_depth)
{
	struct iod_ra ra = { 0 };
	int n;

	iod_ra_note(&ra, 0, ROW, 256 * M, 0, pf);
	iod_ra_note(&ra, 1 * M, ROW, 256 * M, 0, pf);
	cr_assert_eq(iod_ra_note(&ra, 2 * M, ROW, 256 * M, 0, pf), 0,
		     "window 0: off");
	memset(&ra, 0, sizeof(ra));
	iod_ra_note(&ra, 0, ROW, 256 * M, 100, pf);
	iod_ra_note(&ra, 1 * M, ROW, 256 * M, 100, pf);
	cr_assert_eq(iod_ra_note(&ra, 2 * M, ROW, 256 * M, 100, pf), 1,
		     "a window below one read: one read ahead");
	memset(&ra, 0, sizeof(ra));
	iod_ra_note(&ra, 0, 4 * K, 256 * M, 2 * M, pf);
	iod_ra_note(&ra, 8 * K, 4 * K, 256 * M, 2 * M, pf);
	n = iod_ra_note(&ra, 16 * K, 4 * K, 256 * M, 2 * M, pf);
	cr_assert_eq(n, IOD_RA_MAX, "small reads: at most IOD_RA_MAX");
	cr_assert_eq(pf[n - 1].off, 16 * K + IOD_RA_MAX * 8 * K);
}
