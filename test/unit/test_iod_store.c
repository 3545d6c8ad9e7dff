/* test_iod_store.c - the iod's local subfile store (iod/store.c) in a
 * temporary directory: data round trips, holes, short reads, trunc_gen
 * refusal, truncate, delete, fsync, checksums, listing order and cursor,
 * the identity file and the replay flags, the fd cache, and that no
 * request field can name a path outside the data directory (store.c
 * invariant S1). */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "iod_int.h"
#include "iod_store_sync.h"

static char tmpdir[128];
static char datadir[160];
static struct iod_store *st;

static const struct iod_sub_layout layout2 = {
	.stripe_size = 65536, .stripe_count = 2, .n_groups = 2,
	.groups = { 0, 1 } };

static int rm_cb(const char *p, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static int open_store(uint32_t id, const char *cluster, unsigned max_fds,
		      struct iod_store **out)
{
	struct iod_store_opts o = { .dir = datadir, .iod_id = id,
				    .cluster = cluster, .max_fds = max_fds,
				    .journal_size = 8u << 20 };
	return iod_store_open(&o, out);
}

/* Close (sync + checkpoint: everything reaches the subfiles) and reopen. */
static void reopen(void)
{
	iod_store_close(st);
	cr_assert_eq(open_store(1, "test", 0, &st), 0);
}

/* A stop without the journal's close, as after kill -9. */
static void crash_reopen(void)
{
	iod_store_abandon(st);
	cr_assert_eq(open_store(1, "test", 0, &st), 0);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/twinfs-iod-test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
	tw_log_init("test_iod_store", TW_LOG_ERR);
	cr_assert_eq(open_store(1, "test", 0, &st), 0);
}

static void teardown(void)
{
	iod_store_close(st);
	st = NULL;
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(iod_store, .init = setup, .fini = teardown);

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 31u + seed * 7u + (i >> 8));
}

Test(iod_store, write_read_roundtrip)
{
	uint8_t in[10000], *out;
	struct iod_sub_stat ss;
	long n;

	fill(in, sizeof(in), 1);
	cr_assert_eq(s_write(st, 42, 1, 0, in, sizeof(in), 0,
				     &layout2, &ss), 0);
	cr_assert(ss.exists);
	cr_assert_eq(ss.size, sizeof(in));
	cr_assert_gt(ss.blocks, 0);
	n = iod_store_read(st, 42, 1, 0, sizeof(in), &out, &ss);
	cr_assert_eq(n, (long)sizeof(in));
	cr_assert_eq(ss.size, sizeof(in));
	cr_assert_arr_eq(out, in, sizeof(in));
	free(out);
	/* A middle piece. */
	n = iod_store_read(st, 42, 1, 100, 50, &out, NULL);
	cr_assert_eq(n, 50);
	cr_assert_arr_eq(out, in + 100, 50);
	free(out);
}

Test(iod_store, holes_and_short_reads)
{
	uint8_t in[4096], *out;
	uint8_t zero[4096] = { 0 };
	struct iod_sub_stat ss;
	long n;

	fill(in, sizeof(in), 2);
	/* Write at 1 MiB: everything before is a hole. */
	cr_assert_eq(s_write(st, 7, 0, 1 << 20, in, sizeof(in), 0,
				     &layout2, &ss), 0);
	cr_assert_eq(ss.size, (1u << 20) + sizeof(in));
	n = iod_store_read(st, 7, 0, 4096, sizeof(zero), &out, NULL);
	cr_assert_eq(n, (long)sizeof(zero));
	cr_assert_arr_eq(out, zero, sizeof(zero));
	free(out);
	/* Straddling the end: short. */
	n = iod_store_read(st, 7, 0, (1 << 20) + 4000, 1000, &out, &ss);
	cr_assert_eq(n, 96);
	cr_assert_arr_eq(out, in + 4000, 96);
	free(out);
	/* Past the end: 0 bytes, size reported. */
	n = iod_store_read(st, 7, 0, 5 << 20, 1000, &out, &ss);
	cr_assert_eq(n, 0);
	cr_assert_null(out);
	cr_assert_eq(ss.size, (1u << 20) + sizeof(in));
	/* Absent subfile: 0 bytes, not an error. */
	n = iod_store_read(st, 8, 0, 0, 1000, &out, &ss);
	cr_assert_eq(n, 0);
	cr_assert_not(ss.exists);
	cr_assert_eq(ss.size, 0);
}

Test(iod_store, trunc_gen_refusal)
{
	uint8_t b[100];
	struct iod_sub_stat ss;

	fill(b, sizeof(b), 3);
	cr_assert_eq(s_write(st, 9, 0, 0, b, sizeof(b), 5, &layout2,
				     &ss), 0);
	cr_assert_eq(ss.trunc_gen, 5);
	cr_assert_eq(s_write(st, 9, 0, 0, b, sizeof(b), 4, &layout2,
				     NULL), -ESTALE);
	cr_assert_eq(s_write(st, 9, 0, 0, b, sizeof(b), 5, &layout2,
				     NULL), 0);
	/* A newer one is stored, and survives a reopen (it is in the
	 * xattr, not only in the cache). */
	cr_assert_eq(s_write(st, 9, 0, 0, b, sizeof(b), 7, &layout2,
				     NULL), 0);
	iod_store_close(st);
	cr_assert_eq(open_store(1, "test", 0, &st), 0);
	cr_assert_eq(s_write(st, 9, 0, 0, b, sizeof(b), 6, &layout2,
				     NULL), -ESTALE);
	cr_assert_eq(iod_store_stat(st, 9, 0, &ss), 0);
	cr_assert_eq(ss.trunc_gen, 7);
	/* Truncate with an older gen is refused too. */
	cr_assert_eq(s_truncate(st, 9, 0, 0, 6, NULL), -ESTALE);
}

Test(iod_store, xattr_contents)
{
	uint8_t b[10] = { 1 };
	uint8_t x[176];
	char rel[64], path[PATH_MAX];

	cr_assert_eq(s_write(st, 0x1234, 1, 0, b, sizeof(b), 3,
				     &layout2, NULL), 0);
	reopen();   /* checkpointed: the subfile is at home */
	cr_assert_gt(iod_store_subpath(0x1234, 1, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	cr_assert_eq(getxattr(path, "user.twinfs.sub", x, sizeof(x)), 176);
	cr_assert_eq(x[0], 0x54);   /* "TWSB" little-endian */
	cr_assert_eq(x[8], 0x34);   /* ino low byte */
	cr_assert_eq(x[9], 0x12);
	cr_assert_eq(x[16], 1);     /* column */
	cr_assert_eq(x[24], 3);     /* trunc_gen */
	cr_assert_eq(x[32], 2);     /* stripe_count */
	cr_assert_eq(x[44], 1);     /* groups[1] */
}

Test(iod_store, truncate)
{
	uint8_t in[8192], *out;
	struct iod_sub_stat ss;
	long n;

	fill(in, sizeof(in), 4);
	cr_assert_eq(s_write(st, 11, 0, 0, in, sizeof(in), 1,
				     &layout2, NULL), 0);
	cr_assert_eq(s_truncate(st, 11, 0, 1000, 2, &ss), 0);
	cr_assert_eq(ss.size, 1000);
	cr_assert_eq(ss.trunc_gen, 2);
	n = iod_store_read(st, 11, 0, 0, sizeof(in), &out, NULL);
	cr_assert_eq(n, 1000);
	cr_assert_arr_eq(out, in, 1000);
	free(out);
	/* Growing exposes zeros. */
	cr_assert_eq(s_truncate(st, 11, 0, 3000, 3, &ss), 0);
	n = iod_store_read(st, 11, 0, 0, 4000, &out, NULL);
	cr_assert_eq(n, 3000);
	for (int i = 1000; i < 3000; i++)
		cr_assert_eq(out[i], 0);
	free(out);
	/* Writes of the old generation are refused now. */
	cr_assert_eq(s_write(st, 11, 0, 0, in, 10, 1, &layout2, NULL),
		     -ESTALE);
	/* Absent: a no-op that creates nothing. */
	cr_assert_eq(s_truncate(st, 12, 0, 5000, 9, &ss), 0);
	cr_assert_not(ss.exists);
	cr_assert_eq(iod_store_stat(st, 12, 0, &ss), 0);
	cr_assert_not(ss.exists);
}

Test(iod_store, delete)
{
	uint8_t b[100];
	struct iod_sub_stat ss;
	uint8_t *out;

	fill(b, sizeof(b), 5);
	for (uint32_t k = 0; k < 3; k++)
		cr_assert_eq(s_write(st, 13, k, 0, b, sizeof(b), 0,
			     &(struct iod_sub_layout){ 65536, 3, 3, { 0, 1, 2 } },
			     NULL), 0);
	cr_assert_eq(s_delete(st, 13, 1), 0);
	cr_assert_eq(iod_store_stat(st, 13, 1, &ss), 0);
	cr_assert_not(ss.exists);
	cr_assert_eq(iod_store_read(st, 13, 1, 0, 100, &out, NULL), 0);
	cr_assert_eq(iod_store_stat(st, 13, 0, &ss), 0);
	cr_assert(ss.exists);
	/* Absent is fine; every column. */
	cr_assert_eq(s_delete(st, 13, 1), 0);
	cr_assert_eq(s_delete(st, 13, UINT32_MAX), 0);
	cr_assert_eq(iod_store_stat(st, 13, 0, &ss), 0);
	cr_assert_not(ss.exists);
	cr_assert_eq(iod_store_stat(st, 13, 2, &ss), 0);
	cr_assert_not(ss.exists);
	cr_assert_eq(s_delete(st, 13, 32), -EINVAL);
	cr_assert_eq(s_fsync(st, 0), 0);
}

Test(iod_store, fsync_and_fd_cache_eviction)
{
	uint8_t b[64];
	uint8_t *out;

	/* A tiny cache so that dirty subfiles are evicted before the sync. */
	iod_store_close(st);
	cr_assert_eq(open_store(1, "test", 4, &st), 0);
	for (uint64_t ino = 100; ino < 140; ino++) {
		fill(b, sizeof(b), (unsigned)ino);
		cr_assert_eq(s_write(st, ino, 0, 0, b, sizeof(b), 0,
					     &layout2, NULL), 0);
	}
	cr_assert_eq(s_fsync(st, 105), 0);
	cr_assert_eq(s_fsync(st, 0), 0);
	cr_assert_eq(s_fsync(st, 0), 0);
	for (uint64_t ino = 100; ino < 140; ino++) {
		fill(b, sizeof(b), (unsigned)ino);
		cr_assert_eq(iod_store_read(st, ino, 0, 0, 64, &out, NULL), 64);
		cr_assert_arr_eq(out, b, 64);
		free(out);
	}
}

Test(iod_store, checksums)
{
	uint8_t a[3 * 4096 + 100];
	uint64_t size;
	uint32_t *c1, *c2, *c3;
	long n1, n2, n3;

	fill(a, sizeof(a), 6);
	cr_assert_eq(s_write(st, 20, 0, 0, a, sizeof(a), 0, &layout2,
				     NULL), 0);
	cr_assert_eq(s_write(st, 21, 0, 0, a, sizeof(a), 0, &layout2,
				     NULL), 0);
	n1 = iod_store_checksum(st, 20, 0, 4096, 0, 0, 0, &size, &c1);
	cr_assert_eq(n1, 4);
	cr_assert_eq(size, sizeof(a));
	n2 = iod_store_checksum(st, 21, 0, 4096, 0, 0, 0, &size, &c2);
	cr_assert_eq(n2, 4);
	cr_assert_arr_eq(c1, c2, 4 * sizeof(uint32_t));
	/* The CRC is of the contents as served: region 3 is 100 bytes. */
	cr_assert_eq(c1[0], tw_crc32c(0, a, 4096));
	cr_assert_eq(c1[3], tw_crc32c(0, a + 3 * 4096, 100));
	/* Change one byte in region 2: only that region differs. */
	a[2 * 4096 + 5] ^= 1;
	cr_assert_eq(s_write(st, 21, 0, 2 * 4096 + 5,
				     &a[2 * 4096 + 5], 1, 0, &layout2, NULL), 0);
	n3 = iod_store_checksum(st, 21, 0, 4096, 0, 0, 0, &size, &c3);
	cr_assert_eq(n3, 4);
	cr_assert_eq(c3[0], c1[0]);
	cr_assert_eq(c3[1], c1[1]);
	cr_assert_neq(c3[2], c1[2]);
	cr_assert_eq(c3[3], c1[3]);
	free(c1);
	free(c2);
	free(c3);
	/* Absent: size 0, no regions. */
	cr_assert_eq(iod_store_checksum(st, 22, 0, 4096, 0, 0, 0, &size, &c1), 0);
	cr_assert_eq(size, 0);
	cr_assert_null(c1);
	/* Bad region sizes. */
	cr_assert_eq(iod_store_checksum(st, 20, 0, 0, 0, 0, 0, &size, &c1), -EINVAL);
	cr_assert_eq(iod_store_checksum(st, 20, 0, 100, 0, 0, 0, &size, &c1), -EINVAL);
	cr_assert_eq(iod_store_checksum(st, 20, 0, 1u << 31, 0, 0, 0, &size, &c1),
		     -EINVAL);
}

Test(iod_store, checksum_too_many_regions)
{
	uint8_t b = 1;
	uint64_t size;
	uint32_t *c;

	/* A sparse subfile of 1 TiB: 2^28 regions of 4 KiB is too many. */
	cr_assert_eq(s_write(st, 30, 0, 1ull << 40, &b, 1, 0,
				     &layout2, NULL), 0);
	cr_assert_eq(iod_store_checksum(st, 30, 0, 4096, 0, 0, 0, &size, &c), -E2BIG);
	/* A bounded range of it is fine: the last 4 regions. */
	cr_assert_eq(iod_store_checksum(st, 30, 0, 4096, (1u << 28) - 3, 8,
					0, &size, &c), 4);
	cr_assert_eq(size, (1ull << 40) + 1);
	cr_assert_eq(c[0], c[1]);       /* two holes */
	cr_assert_eq(c[3], tw_crc32c(0, &b, 1));
	free(c);
}

/* Holes are not read but checksum as zeros, and a data budget stops the
 * call after the region that reached it: a sparse subfile of 64 GiB with
 * three stretches of data is covered in one call without reading 64 GiB. */
Test(iod_store, checksum_holes_and_budget)
{
	uint8_t a[8192], z[4096] = { 0 };
	uint64_t size;
	uint32_t *c;
	long n;

	fill(a, sizeof(a), 3);
	cr_assert_eq(s_write(st, 31, 0, 0, a, 4096, 0, &layout2, NULL), 0);
	cr_assert_eq(s_write(st, 31, 0, 5ull << 20, a, sizeof(a), 0, &layout2,
			     NULL), 0);
	cr_assert_eq(s_write(st, 31, 0, (64ull << 30) - 100, a, 100, 0,
			     &layout2, NULL), 0);
	/* 1 MiB regions: 65536 of them, three with data. */
	n = iod_store_checksum(st, 31, 0, 1u << 20, 0, 0, 0, &size, &c);
	cr_assert_eq(n, 65536);
	cr_assert_eq(size, 64ull << 30);
	cr_assert_neq(c[0], c[1]);
	cr_assert_eq(c[1], c[4]);           /* holes: zeros' CRC */
	cr_assert_neq(c[5], c[1]);
	cr_assert_eq(c[6], c[1]);
	cr_assert_neq(c[65535], c[1]);
	{
		uint32_t crc = 0;

		for (int i = 0; i < 256; i++)
			crc = tw_crc32c(crc, z, sizeof(z));
		cr_assert_eq(c[1], crc);
	}
	free(c);
	/* A budget of 1 byte: the first region with data, then stop; the
	 * holes before the next data are free. */
	n = iod_store_checksum(st, 31, 0, 1u << 20, 0, 0, 1, &size, &c);
	cr_assert_eq(n, 1);
	free(c);
	n = iod_store_checksum(st, 31, 0, 1u << 20, 1, 0, 1, &size, &c);
	cr_assert_eq(n, 5);                 /* 1..4 holes, 5 data */
	free(c);
}

/* Ranges of regions (first_region, max_regions) give the same CRCs as the
 * whole-subfile call, and nothing past the end. */
Test(iod_store, checksum_ranges)
{
	uint8_t a[5 * 4096 + 7];
	uint64_t size;
	uint32_t *all, *part;

	fill(a, sizeof(a), 9);
	cr_assert_eq(s_write(st, 40, 1, 0, a, sizeof(a), 0, &layout2, NULL),
		     0);
	cr_assert_eq(iod_store_checksum(st, 40, 1, 4096, 0, 0, 0, &size, &all),
		     6);
	for (uint32_t first = 0; first < 8; first++)
		for (uint32_t max = 1; max < 4; max++) {
			long want = first >= 6 ? 0 : (long)TW_MIN(6 - first, max);

			size = 0;
			cr_assert_eq(iod_store_checksum(st, 40, 1, 4096, first,
							max, 0, &size, &part),
				     want, "first %u max %u", first, max);
			cr_assert_eq(size, sizeof(a));
			if (want)
				cr_assert_arr_eq(part, all + first,
						 (size_t)want * sizeof(*part));
			else
				cr_assert_null(part);
			free(part);
		}
	free(all);
}

Test(iod_store, listing_order_and_cursor)
{
	uint8_t b[10] = { 0 };
	struct iod_sub_info out[64];
	bool eof;
	int n;
	/* Inserted out of order, and inos that hash to many directories. */
	uint64_t inos[] = { 900, 3, 70000, 1ull << 40, 5, 2 };
	struct iod_sub_layout l3 = { 65536, 3, 3, { 0, 1, 2 } };

	for (size_t i = 0; i < TW_ARRAY_SIZE(inos); i++)
		for (uint32_t k = 0; k < 3; k += 2)
			cr_assert_eq(s_write(st, inos[i], k, 0, b,
				     (size_t)(i + 1), 0, &l3, NULL), 0);
	/* A stranger in the tree is ignored. */
	{
		char p[PATH_MAX];
		int fd;

		snprintf(p, sizeof(p), "%s/subfiles/junk", datadir);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		cr_assert_geq(fd, 0);
		close(fd);
	}
	n = iod_store_list(st, 0, 0, 64, out, &eof);
	cr_assert_eq(n, 12);
	cr_assert(eof);
	for (int i = 1; i < n; i++)
		cr_assert(out[i - 1].ino < out[i].ino ||
			  (out[i - 1].ino == out[i].ino &&
			   out[i - 1].column < out[i].column));
	cr_assert_eq(out[0].ino, 2);
	cr_assert_eq(out[0].column, 0);
	cr_assert_eq(out[0].size, 6);
	cr_assert_eq(out[1].ino, 2);
	cr_assert_eq(out[1].column, 2);
	cr_assert_eq(out[11].ino, 1ull << 40);

	/* Paging by 5 with the cursor visits everything once, in order. */
	{
		uint64_t ai = 0;
		uint32_t ac = 0;
		int total = 0;
		struct iod_sub_info page[5];

		for (;;) {
			n = iod_store_list(st, ai, ac, 5, page, &eof);
			cr_assert_geq(n, 0);
			for (int i = 0; i < n; i++) {
				cr_assert_eq(page[i].ino, out[total + i].ino);
				cr_assert_eq(page[i].column,
					     out[total + i].column);
			}
			total += n;
			if (eof)
				break;
			cr_assert_eq(n, 5);
			ai = page[n - 1].ino;
			ac = page[n - 1].column;
		}
		cr_assert_eq(total, 12);
	}
	/* The cursor is exclusive and column-aware. */
	n = iod_store_list(st, 5, 0, 64, out, &eof);
	cr_assert_eq(n, 7);
	cr_assert_eq(out[0].ino, 5);
	cr_assert_eq(out[0].column, 2);
}

Test(iod_store, identity_file)
{
	struct iod_store *other;
	uint8_t uuid[16];

	cr_assert(iod_store_is_new(st));
	memcpy(uuid, iod_store_uuid(st), 16);
	iod_store_close(st);
	st = NULL;
	/* Same id and cluster: accepted, same UUID, not new. */
	cr_assert_eq(open_store(1, "test", 0, &st), 0);
	cr_assert_not(iod_store_is_new(st));
	cr_assert_arr_eq(iod_store_uuid(st), uuid, 16);
	/* Another iod id or another cluster: refused. */
	cr_assert_eq(open_store(2, "test", 0, &other), -EINVAL);
	cr_assert_eq(open_store(1, "other", 0, &other), -EINVAL);
	/* A damaged identity file: refused, never replaced. */
	{
		char p[PATH_MAX];
		int fd;

		snprintf(p, sizeof(p), "%s/twinfs-id", datadir);
		fd = open(p, O_WRONLY);
		cr_assert_geq(fd, 0);
		cr_assert_eq(pwrite(fd, "X", 1, 40), 1);
		close(fd);
	}
	cr_assert_eq(open_store(1, "test", 0, &other), -EBADMSG);
}

Test(iod_store, paths_stay_inside_the_data_dir)
{
	/* Extreme values of every field that reaches a path or an offset. */
	uint64_t inos[] = { 0, 1, UINT64_MAX, 0x2f2e2e2f2e2e2f2eull /* "/../.." */ };
	uint32_t cols[] = { 0, 31, 32, UINT32_MAX };
	uint8_t b[4] = { 1, 2, 3, 4 };
	char rel[64];
	uint8_t *out;
	uint64_t size;
	uint32_t *c;

	for (size_t i = 0; i < TW_ARRAY_SIZE(inos); i++) {
		for (size_t j = 0; j < TW_ARRAY_SIZE(cols); j++) {
			int n = iod_store_subpath(inos[i], cols[j], rel,
						  sizeof(rel));

			cr_assert_gt(n, 0);
			cr_assert_eq(strncmp(rel, "subfiles/", 9), 0);
			cr_assert_null(strstr(rel, ".."));
			for (int k = 9; rel[k]; k++)
				cr_assert(strchr("0123456789abcdef./", rel[k]) &&
					  !(rel[k] == '.' && rel[k + 1] == '/'),
					  "bad char in %s", rel);
			if (cols[j] >= 32 || inos[i] > IOD_MAX_INO) {
				/* Journal object ids are ino << 8 | column:
				 * larger inos are refused, never aliased. */
				cr_assert_eq(s_write(st, inos[i], cols[j],
					0, b, 4, 0, &layout2, NULL), -EINVAL);
				cr_assert_eq(iod_store_read(st, inos[i], cols[j],
					0, 4, &out, NULL), -EINVAL);
				cr_assert_eq(s_truncate(st, inos[i],
					cols[j], 0, 0, NULL), -EINVAL);
				cr_assert_eq(iod_store_checksum(st, inos[i],
					cols[j], 4096, 0, 0, 0, &size, &c), -EINVAL);
			} else {
				cr_assert_eq(s_write(st, inos[i], cols[j],
					0, b, 4, 0, &layout2, NULL), 0);
			}
		}
	}
	/* Offsets that would pass 2^63. */
	cr_assert_eq(s_write(st, 1, 0, (uint64_t)INT64_MAX - 2, b, 4, 0,
				     &layout2, NULL), -EINVAL);
	cr_assert_eq(s_write(st, 1, 0, UINT64_MAX, b, 4, 0, &layout2,
				     NULL), -EINVAL);
	cr_assert_eq(iod_store_read(st, 1, 0, UINT64_MAX - 1, 4, &out, NULL),
		     -EINVAL);
	cr_assert_eq(s_truncate(st, 1, 0, UINT64_MAX, 0, NULL), -EINVAL);

	/* Everything created is under DIR/subfiles; nothing appeared in the
	 * parent of DIR. */
	{
		DIR *d = opendir(tmpdir);
		struct dirent *de;
		int n = 0;

		cr_assert_not_null(d);
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				n++;
		closedir(d);
		cr_assert_eq(n, 1, "only data/ in %s", tmpdir);
	}
}

Test(iod_store, symlink_in_tree_not_followed)
{
	char rel[64], path[PATH_MAX], target[PATH_MAX];
	uint8_t b[4] = { 9, 9, 9, 9 };
	uint8_t *out;
	struct stat sb;
	int fd;

	/* Someone plants a symlink where subfile (50, 0) would live. */
	cr_assert_eq(s_write(st, 50, 1, 0, b, 4, 0, &layout2, NULL), 0);
	reopen();   /* checkpointed: its directory exists at home */
	cr_assert_gt(iod_store_subpath(50, 0, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	snprintf(target, sizeof(target), "%s/outside", tmpdir);
	fd = open(target, O_CREAT | O_WRONLY, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(symlink(target, path), 0);
	cr_assert_lt(s_write(st, 50, 0, 0, b, 4, 0, &layout2, NULL), 0);
	cr_assert_lt(iod_store_read(st, 50, 0, 0, 4, &out, NULL), 0);
	cr_assert_eq(stat(target, &sb), 0);
	cr_assert_eq(sb.st_size, 0);
}

static bool exists_in_data(const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", datadir, name);
	return access(p, F_OK) == 0;
}

/* The replay a twin's resync owes survives a restart of this iod
 * (store.c "Replay flag"), and so does a live write forwarded to the
 * resyncing twin that may have died unanswered. */
Test(iod_store, replay_owed_flags)
{
	cr_assert(!iod_store_replay_owed(st));
	cr_assert_eq(iod_store_set_replay_owed(st, true), 0);
	cr_assert(exists_in_data("twinfs-replay-owed"));
	reopen();
	cr_assert(iod_store_replay_owed(st));
	cr_assert_eq(iod_store_set_replay_owed(st, false), 0);
	cr_assert(!exists_in_data("twinfs-replay-owed"));
	reopen();
	cr_assert(!iod_store_replay_owed(st));

	/* A live write noted, then a clean stop: every forward was answered
	 * or pinned (which owes the replay itself), so the note goes. */
	cr_assert_eq(iod_store_note_resync_live(st), 0);
	cr_assert(exists_in_data("twinfs-resync-live"));
	reopen();
	cr_assert(!iod_store_replay_owed(st));
	cr_assert(!exists_in_data("twinfs-resync-live"));

	/* A live write noted, then a crash: owed, the note gone. */
	cr_assert_eq(iod_store_note_resync_live(st), 0);
	cr_assert(exists_in_data("twinfs-resync-live"));
	cr_assert(!iod_store_replay_owed(st));
	crash_reopen();
	cr_assert(iod_store_replay_owed(st));
	cr_assert(!exists_in_data("twinfs-resync-live"));
	cr_assert(exists_in_data("twinfs-replay-owed"));

	/* A completed run with a forward unanswered keeps the note... */
	cr_assert_eq(iod_store_note_resync_live(st), 0);
	cr_assert_eq(iod_store_replay_paid(st, true), 0);
	cr_assert(exists_in_data("twinfs-resync-live"));
	cr_assert(!exists_in_data("twinfs-replay-owed"));
	/* ... one without clears both; a note after it is made again. */
	cr_assert_eq(iod_store_replay_paid(st, false), 0);
	cr_assert(!exists_in_data("twinfs-resync-live"));
	cr_assert(!exists_in_data("twinfs-replay-owed"));
	cr_assert_eq(iod_store_note_resync_live(st), 0);
	cr_assert(exists_in_data("twinfs-resync-live"));
}
