/* test_iod_csum.c - block checksums of subfiles at home (iod/store_csum.c):
 * the table math (a block's CRC with zeros past the end, the blocks a
 * partial write touches), then a store in data=journal mode: a block
 * damaged at home is refused (-EBADMSG) while other blocks read fine, a
 * rewrite heals it, a cut or punch leaves no stale checksum, and a data
 * directory without checksums gets them computed at open; a resync's copy
 * of a bad block (iod_store_write_bad) stays bad, journal-resident and at
 * home, through a kill -9 (replay), a cut, a restart and a conversion from
 * version 1, until
 * new content replaces it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"
#include "iod_store_sync.h"

static char tmpdir[128], datadir[160];
static struct iod_store *st;
static const struct iod_sub_layout L = {
	.stripe_size = 65536, .stripe_count = 1, .n_groups = 1,
	.groups = { 0 } };

static int rm_cb(const char *p, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static void reopen(void)
{
	struct iod_store_opts o = {
		.dir = datadir, .iod_id = 1, .cluster = "test",
		.journal_size = 16u << 20, .journal_mode = TW_JNL_JOURNAL,
		.commit_interval_ms = 100,
	};

	if (st)
		iod_store_close(st);   /* checkpoints everything home */
	st = NULL;
	cr_assert_eq(iod_store_open(&o, &st), 0);
}

static void setup(void)
{
	tw_log_init("test_iod_csum", TW_LOG_ERR);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/twinfs-csum-test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
	st = NULL;
}

static void teardown(void)
{
	iod_store_close(st);
	st = NULL;
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(iod_csum, .init = setup, .fini = teardown);

Test(iod_csum, block_crc_pads_with_zeros_and_is_never_zero)
{
	uint8_t b[4096] = { 0 };

	for (size_t i = 0; i < 100; i++)
		b[i] = (uint8_t)(i * 7 + 1);
	cr_assert_eq(store_csum_block(b, 100), tw_crc32c(0, b, 4096));
	cr_assert_eq(store_csum_block(b, 4096), tw_crc32c(0, b, 4096));
	cr_assert_eq(store_csum_block(b, 0), store_csum_block(b + 2048, 2048));
	/* a full block's stored value equals the plain CRC unless it is 0 */
	for (unsigned s = 0; s < 64; s++) {
		memset(b, (int)s, sizeof(b));
		uint32_t c = tw_crc32c(0, b, sizeof(b));

		cr_assert_eq(store_csum_block(b, sizeof(b)), c ? c : UINT32_MAX);
		cr_assert_neq(store_csum_block(b, sizeof(b)), 0);
	}
}

Test(iod_csum, blocks_of_partial_writes)
{
	uint64_t f, l;

	store_csum_range(0, 4096, &f, &l);
	cr_assert(f == 0 && l == 0);
	store_csum_range(4095, 2, &f, &l);
	cr_assert(f == 0 && l == 1);
	store_csum_range(4096, 1, &f, &l);
	cr_assert(f == 1 && l == 1);
	store_csum_range(10000, 16, &f, &l);
	cr_assert(f == 2 && l == 2);
	store_csum_range(8191, 4097, &f, &l);
	cr_assert(f == 1 && l == 2);
	store_csum_range(1u << 20, 1u << 20, &f, &l);
	cr_assert(f == 256 && l == 511);
}

/* Overwrite 16 bytes at off of the home subfile (ino, col). */
static void rot(uint64_t ino, uint32_t col, uint64_t off)
{
	char rel[64], path[300];
	uint8_t junk[16];
	int fd;

	cr_assert_gt(iod_store_subpath(ino, col, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0, "%s", path);
	memset(junk, 0xa5, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), (off_t)off), 16);
	close(fd);
}

static long rd(uint64_t off, size_t len, const uint8_t *want)
{
	struct iod_sub_stat ss;
	uint8_t *out = NULL;
	long n = iod_store_read(st, 5, 0, off, len, &out, &ss);

	if (n > 0 && want)
		cr_assert_arr_eq(out, want + off, (size_t)n);
	free(out);
	return n;
}

Test(iod_csum, damaged_block_is_refused_and_healed_by_a_rewrite)
{
	static uint8_t a[100000];

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 31 + (i >> 12));
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(rd(0, sizeof(a), a), (long)sizeof(a));  /* resident */
	reopen();
	rot(5, 0, 10000);
	cr_assert_eq(rd(8192, 4096, a), -EBADMSG);
	cr_assert_eq(rd(9990, 20, a), -EBADMSG);
	cr_assert_eq(st->csum_bad_off, 8192);
	cr_assert_eq(rd(0, 8192, a), 8192);
	cr_assert_eq(rd(12288, sizeof(a) - 12288, a), (long)sizeof(a) - 12288);
	cr_assert_eq(store_csum_verify_block(st, 5, 0, 2), -EBADMSG);
	cr_assert_eq(store_csum_verify_block(st, 5, 0, 3), 0);
	/* the good copy written back through the journal */
	cr_assert_eq(s_write(st, 5, 0, 8192, a + 8192, 4096, 0, NULL, NULL), 0);
	cr_assert_eq(rd(0, sizeof(a), a), (long)sizeof(a));
	reopen();
	cr_assert_eq(rd(0, sizeof(a), a), (long)sizeof(a));
	/* the last, partial block */
	rot(5, 0, sizeof(a) - 20);
	cr_assert_eq(rd(sizeof(a) - 100, 100, a), -EBADMSG);
}

Test(iod_csum, cut_and_punch_leave_no_stale_checksum)
{
	static uint8_t a[50000], z[50000];

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 7 + 3);
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	reopen();
	cr_assert_eq(s_truncate(st, 5, 0, 10000, 1, NULL), 0);
	cr_assert_eq(s_truncate(st, 5, 0, 20000, 2, NULL), 0);
	cr_assert_eq(s_punch(st, 5, 0, 13000, 2000, 2, NULL), 0);
	reopen();
	memcpy(z, a, 10000);
	cr_assert_eq(rd(0, 20000, z), 20000);
	/* a re-created subfile does not inherit its old checksums */
	cr_assert_eq(s_delete(st, 5, 0), 0);
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, z, 20000, 3, &L, NULL), 0);
	reopen();
	cr_assert_eq(rd(0, 20000, z), 20000);
}

Test(iod_csum, data_dir_without_checksums_gets_them_at_open)
{
	static uint8_t a[30000];
	char path[300];

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 5 + 1);
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	iod_store_close(st);
	st = NULL;
	/* as a data directory from before checksums */
	snprintf(path, sizeof(path), "%s/twinfs-csum-v2", datadir);
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "rm -rf '%s/csums'", datadir);
	cr_assert_eq(system(path), 0);
	reopen();
	cr_assert(st->csum_check);
	cr_assert_eq(rd(0, sizeof(a), a), (long)sizeof(a));
	rot(5, 0, 20000);
	cr_assert_eq(rd(16384, 4096, a), -EBADMSG);
}

static int s_write_bad(uint64_t off, const void *buf, size_t len)
{
	int flag = 0;
	int rc = iod_store_write_bad(st, 5, 0, off, buf, len, 0, &L, NULL,
				     sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(st, &flag);
}

Test(iod_csum, bad_copy_stays_bad_until_rewritten)
{
	static uint8_t a[20000], junk[4096];
	uint8_t *out = NULL;
	char from[300], to[300];

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 13 + 5);
	memset(junk, 0x5a, sizeof(junk));
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(s_write_bad(8192, junk, 4096), 0);
	cr_assert_eq(s_write_bad(10, junk, 4096), -EINVAL);
	/* journal-resident: refused all the same, its neighbours served */
	cr_assert_eq(rd(8192, 4096, NULL), -EBADMSG);
	cr_assert_eq(rd(9000, 10, NULL), -EBADMSG);
	cr_assert_eq(store_csum_verify_block(st, 5, 0, 2), -EBADMSG);
	cr_assert_eq(rd(0, 8192, a), 8192);
	cr_assert_eq(rd(12288, sizeof(a) - 12288, a), (long)sizeof(a) - 12288);
	/* as it is: the source's bytes */
	cr_assert_eq(iod_store_read_unchecked(st, 5, 0, 8192, 4096, &out, NULL),
		     4096);
	cr_assert_arr_eq(out, junk, 4096);
	free(out);
	/* kill -9 before the checkpoint: replay marks it */
	iod_store_abandon(st);
	st = NULL;
	reopen();
	cr_assert_eq(rd(8192, 4096, NULL), -EBADMSG);
	cr_assert_eq(rd(0, 8192, a), 8192);
	cr_assert_eq(rd(12288, sizeof(a) - 12288, a), (long)sizeof(a) - 12288);
	/* the last, partial block too, then a cut to the same size */
	cr_assert_eq(s_write_bad(16384, junk, sizeof(a) - 16384), 0);
	cr_assert_eq(s_truncate(st, 5, 0, sizeof(a), 0, NULL), 0);
	reopen();                  /* home: marked entries */
	cr_assert_eq(rd(8192, 4096, NULL), -EBADMSG);
	cr_assert_eq(rd(16384, 100, NULL), -EBADMSG);
	cr_assert_eq(rd(0, 8192, a), 8192);
	cr_assert_eq(rd(12288, 4096, a), 4096);
	/* a version 1 data directory: converted, the marks stay */
	iod_store_close(st);
	st = NULL;
	snprintf(from, sizeof(from), "%s/twinfs-csum-v2", datadir);
	snprintf(to, sizeof(to), "%s/twinfs-csum-v1", datadir);
	cr_assert_eq(rename(from, to), 0);
	reopen();
	cr_assert(st->csum_check);
	cr_assert_eq(access(to, F_OK), -1);
	cr_assert_eq(rd(8192, 4096, NULL), -EBADMSG);
	cr_assert_eq(rd(0, 8192, a), 8192);
	/* new content of the whole block replaces the mark */
	cr_assert_eq(s_write(st, 5, 0, 8192, a + 8192, 4096, 0, NULL, NULL), 0);
	cr_assert_eq(rd(0, 16384, a), 16384);
	reopen();
	cr_assert_eq(rd(0, 16384, a), 16384);
	cr_assert_eq(rd(16384, 100, NULL), -EBADMSG);
	/* a cut past it removes the marked block */
	cr_assert_eq(s_truncate(st, 5, 0, 16384, 1, NULL), 0);
	cr_assert_eq(rd(0, 16384, a), 16384);
	reopen();
	cr_assert_eq(rd(0, 16384, a), 16384);
}

/* iod_store_read_crc's sum against one taken of the bytes it returned. */
static long rd_crc(uint64_t off, size_t len, const uint8_t *want)
{
	struct iod_sub_stat ss;
	uint8_t *out = NULL;
	uint32_t crc = 1;
	long n = iod_store_read_crc(st, 5, 0, off, len, &out, &ss, &crc);

	if (n > 0) {
		if (want)
			cr_assert_arr_eq(out, want + off, (size_t)n);
		cr_assert_eq(crc, tw_crc32c(0, out, (size_t)n),
			     "read of %zu at %llu: crc %08x, bytes %08x", len,
			     (unsigned long long)off, crc,
			     tw_crc32c(0, out, (size_t)n));
	} else if (n == 0) {
		cr_assert_eq(crc, 0);
	}
	free(out);
	return n;
}

/* A READ's data_crc is combined from the sums the checksum check took
 * (store_csum.c csum_rd): it must be the sum of the bytes returned,
 * whatever the journal changed over home's bytes after the check. */
Test(iod_csum, read_crc_is_the_crc_of_the_bytes_returned)
{
	static uint8_t a[200000], z[200000];
	uint64_t checked;

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 13 + (i >> 9));
	reopen();
	cr_assert_eq(s_write(st, 5, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(rd_crc(0, 65536, a), 65536);   /* resident */
	reopen();                                   /* home, with sums */
	checked = st->csum_blocks_checked;
	cr_assert_eq(rd_crc(0, 131072, a), 131072);
	cr_assert_eq(st->csum_blocks_checked - checked, 32,
		     "the check ran over the read: its sums are combined");
	cr_assert_eq(rd_crc(1000, 50000, a), 50000);          /* unaligned */
	cr_assert_eq(rd_crc(190000, 20000, a), 10000);        /* short tail */
	cr_assert_eq(rd_crc(sizeof(a), 4096, a), 0);          /* past it */
	/* one block resident again, the rest from home */
	memcpy(z, a, sizeof(a));
	memset(z + 8192, 0x5a, 4096);
	cr_assert_eq(s_write(st, 5, 0, 8192, z + 8192, 4096, 0, NULL, NULL), 0);
	cr_assert_eq(rd_crc(0, 65536, z), 65536);
	reopen();
	/* a pending punch and a pending cut and extension zero home bytes
	 * the check found good: those blocks are summed as returned */
	cr_assert_eq(s_punch(st, 5, 0, 20480, 8192, 0, NULL), 0);
	memset(z + 20480, 0, 8192);
	cr_assert_eq(rd_crc(0, 65536, z), 65536);
	cr_assert_eq(s_truncate(st, 5, 0, 100000, 1, NULL), 0);
	cr_assert_eq(s_truncate(st, 5, 0, 150000, 2, NULL), 0);
	memset(z + 100000, 0, sizeof(z) - 100000);
	cr_assert_eq(rd_crc(65536, 131072, z), 150000 - 65536);
	reopen();
	cr_assert_eq(rd_crc(0, 150000, z), 150000);
}
