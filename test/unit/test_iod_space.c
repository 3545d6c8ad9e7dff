/* test_iod_space.c - fallocate, hole punching and SEEK_DATA/SEEK_HOLE of
 * the iod store (iod/store_journal.c) in every journal mode: a punch zeroes
 * journal-resident and home data, frees whole blocks at home, survives a
 * crash (replay) without older journal copies coming back over it and
 * without destroying a write committed after it; allocation keeps size and
 * contents and fails with ENOSPC before anything changes; SEEK answers
 * count journal-resident blocks as data and ignore home bytes past a
 * pending truncate. */
#include <criterion/criterion.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iod_int.h"
#include "iod_store_sync.h"

#define B 4096u

static char tmpdir[128];
static char datadir[160];
static struct iod_store *st;
static int cur_mode;

static const struct iod_sub_layout L = {
	.stripe_size = 65536, .stripe_count = 2, .n_groups = 2,
	.groups = { 0, 1 } };

static int rm_cb(const char *p, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static int open_mode(int mode, uint64_t reserve)
{
	struct iod_store_opts o = { .dir = datadir, .iod_id = 1,
				    .cluster = "test", .journal_mode = mode,
				    .journal_size = 8u << 20,
				    .reserve = reserve };

	cur_mode = mode;
	return iod_store_open(&o, &st);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/twinfs-space-test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
	tw_log_init("test_iod_space", TW_LOG_ERR);
	st = NULL;
}

static void teardown(void)
{
	iod_store_close(st);
	st = NULL;
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(iod_space, .init = setup, .fini = teardown);

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 31u + seed * 7u + (i >> 8) + 1);
}

/* The subfile's whole content equals want[0..n). */
static void expect_content(uint64_t ino, const uint8_t *want, size_t n)
{
	uint8_t *out = NULL;
	long got = iod_store_read(st, ino, 0, 0, n + 100, &out, NULL);

	cr_assert_eq(got, (long)n, "mode %d: read %ld bytes, want %zu",
		     cur_mode, got, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(out[i], want[i], "mode %d: byte %zu is %u, "
			     "want %u", cur_mode, i, out[i], want[i]);
	free(out);
}

static long seek(uint64_t ino, uint64_t off, int whence)
{
	uint64_t res = 0, size;
	int rc = iod_store_seek(st, ino, 0, off, whence, &res, &size);

	return rc < 0 ? rc : rc == 0 ? -ENXIO : (long)res;
}

/* Process death: nothing more is written; the next open replays.  I/O
 * already handed to io_uring finishes first, as the kernel would let it
 * after a real death (test_iod_journal.c restart_dead). */
static void crash_and_reopen(void)
{
	while (iod_store_wait(st) == 0)
		;
	iod_store_abandon(st);
	st = NULL;
	cr_assert_eq(open_mode(cur_mode, 0), 0);
}

Test(iod_space, punch_zeroes_and_frees_in_every_mode)
{
	static uint8_t want[16 * B];

	for (int mode = 0; mode < 3; mode++) {
		uint64_t ino = 10 + (uint64_t)mode;
		struct iod_sub_stat ss;

		cr_assert_eq(open_mode(mode, 0), 0);
		fill(want, sizeof(want), (unsigned)mode);
		/* 16 blocks, still in the journal in data=journal. */
		cr_assert_eq(s_write(st, ino, 0, 0, want, sizeof(want), 1, &L,
				     NULL), 0);
		cr_assert_eq(s_punch(st, ino, 0, B, 2 * B + 100, 1, &ss), 0);
		memset(want + B, 0, 2 * B + 100);
		cr_assert_eq(ss.size, sizeof(want));
		expect_content(ino, want, sizeof(want));
		/* Whole blocks are holes at once (the punch reached home
		 * before its reply); the partial one stays data. */
		cr_assert_eq(seek(ino, 0, SEEK_HOLE), B);
		cr_assert_eq(seek(ino, B, SEEK_DATA), 3 * B);
		cr_assert_eq(seek(ino, 0, SEEK_DATA), 0);
		/* Past the end: nothing changes, no growth. */
		cr_assert_eq(s_punch(st, ino, 0, sizeof(want) - 10, 50 * B, 1,
				     &ss), 0);
		memset(want + sizeof(want) - 10, 0, 10);
		cr_assert_eq(ss.size, sizeof(want));
		expect_content(ino, want, sizeof(want));
		/* An absent subfile stays absent. */
		cr_assert_eq(s_punch(st, 99, 0, 0, B, 1, &ss), 0);
		cr_assert_eq(iod_store_stat(st, 99, 0, &ss), 0);
		cr_assert_not(ss.exists);
		/* Older trunc_gen refused. */
		cr_assert_eq(s_truncate(st, ino, 0, sizeof(want), 5, NULL), 0);
		cr_assert_eq(s_punch(st, ino, 0, 0, B, 4, NULL), -ESTALE);
		crash_and_reopen();
		expect_content(ino, want, sizeof(want));
		cr_assert_eq(seek(ino, 0, SEEK_HOLE), B);
		iod_store_close(st);
		st = NULL;
	}
}

/* data=journal: blocks journaled before the punch can never come back
 * over the hole (checkpoint or replay), and a write committed after the
 * punch, while the punch still waits for its checkpoint, survives both. */
Test(iod_space, punch_orders_with_resident_blocks)
{
	static uint8_t want[8 * B], w1[B];
	int pflag = 0, wflag = 0;

	int w0flag = 0, preflag = 0, p2flag = 0;

	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	fill(want, sizeof(want), 3);
	/* W0, the punch and W1 all join one running transaction (another
	 * one is closing meanwhile): W1 must not update W0's copy of block 1
	 * in place, before the punch record. */
	cr_assert_eq(iod_store_write(st, 21, 0, 0, want, B, NULL, 1, &L, false,
				     NULL, sync_cb, &preflag), 0);
	cr_assert_eq(iod_store_write(st, 20, 0, 0, want, sizeof(want), NULL, 1, &L,
				     false, NULL, sync_cb, &w0flag), 0);
	cr_assert_eq(iod_store_punch(st, 20, 0, 0, 4 * B, 1, false, NULL, sync_cb,
				     &pflag), 0);
	fill(w1, sizeof(w1), 9);
	cr_assert_eq(iod_store_write(st, 20, 0, B, w1, sizeof(w1), NULL, 1, &L,
				     false, NULL, sync_cb, &wflag), 0);
	memset(want, 0, 4 * B);
	memcpy(want + B, w1, sizeof(w1));
	/* (Until the punch is answered, a reader may still see the old
	 * bytes of its range: it is not acknowledged yet.)  The write was
	 * committed after the punch, into the transaction the punch's
	 * record froze: it must survive the punch's checkpoint and a
	 * replay of both. */
	cr_assert_eq(sync_wait(st, &w0flag), 0);
	cr_assert_eq(sync_wait(st, &wflag), 0);
	cr_assert_eq(sync_wait(st, &pflag), 0);
	expect_content(20, want, sizeof(want));
	crash_and_reopen();
	expect_content(20, want, sizeof(want));
	/* The same without the crash: through the checkpoint. */
	cr_assert_eq(iod_store_punch(st, 20, 0, 0, 4 * B, 1, false, NULL, sync_cb,
				     &p2flag), 0);
	wflag = 0;
	cr_assert_eq(iod_store_write(st, 20, 0, 2 * B, w1, sizeof(w1), NULL, 1, &L,
				     false, NULL, sync_cb, &wflag), 0);
	memset(want, 0, 4 * B);
	memcpy(want + 2 * B, w1, sizeof(w1));
	cr_assert_eq(sync_wait(st, &wflag), 0);
	cr_assert_eq(sync_wait(st, &p2flag), 0);
	iod_store_close(st);
	st = NULL;
	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	expect_content(20, want, sizeof(want));
	cr_assert_eq(seek(20, 0, SEEK_DATA), 2 * B);
	cr_assert_eq(seek(20, 2 * B, SEEK_HOLE), 3 * B);
}

Test(iod_space, fallocate_keeps_size_and_contents)
{
	static uint8_t want[2 * B];

	for (int mode = 0; mode < 3; mode++) {
		uint64_t ino = 30 + (uint64_t)mode;
		struct iod_sub_stat ss;

		cr_assert_eq(open_mode(mode, 0), 0);
		/* Creates the subfile, allocates, size stays 0. */
		cr_assert_eq(s_fallocate(st, ino, 0, 0, 256 * B, 1, &L, &ss), 0);
		cr_assert(ss.exists);
		cr_assert_eq(ss.size, 0);
		cr_assert_geq(ss.blocks, 256 * B / 512, "mode %d: %lu blocks",
			      mode, (unsigned long)ss.blocks);
		fill(want, sizeof(want), 4);
		cr_assert_eq(s_write(st, ino, 0, 0, want, sizeof(want), 1, &L,
				     NULL), 0);
		cr_assert_eq(s_fallocate(st, ino, 0, 100, 8 * B, 1, &L, &ss), 0);
		cr_assert_eq(ss.size, sizeof(want));
		expect_content(ino, want, sizeof(want));
		crash_and_reopen();
		expect_content(ino, want, sizeof(want));
		iod_store_close(st);
		st = NULL;
	}
}

/* ENOSPC before anything is created, allocated or journaled. */
Test(iod_space, fallocate_enospc_changes_nothing)
{
	for (int mode = 0; mode < 3; mode++) {
		struct iod_sub_stat ss;

		cr_assert_eq(open_mode(mode, 1ull << 62), 0);
		cr_assert_eq(s_fallocate(st, 40, 0, 0, B, 1, &L, NULL), -ENOSPC);
		cr_assert_eq(iod_store_stat(st, 40, 0, &ss), 0);
		cr_assert_not(ss.exists);
		iod_store_close(st);
		st = NULL;
	}
}

/* SEEK in data=journal: resident blocks are data; home bytes past a
 * truncate that is not yet checkpointed are not. */
Test(iod_space, seek_resident_blocks_and_pending_cut)
{
	static uint8_t b[32 * B];

	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	fill(b, sizeof(b), 5);
	/* Checkpointed home: 32 blocks of data. */
	cr_assert_eq(s_write(st, 50, 0, 0, b, sizeof(b), 1, &L, NULL), 0);
	iod_store_close(st);
	st = NULL;
	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	/* Now in the journal only: cut to 2 blocks, one block at 20. */
	cr_assert_eq(s_truncate(st, 50, 0, 2 * B, 2, NULL), 0);
	cr_assert_eq(s_write(st, 50, 0, 20 * B, b, B, 2, &L, NULL), 0);
	cr_assert_eq(seek(50, 0, SEEK_HOLE), 2 * B);
	cr_assert_eq(seek(50, 2 * B, SEEK_DATA), 20 * B);
	cr_assert_eq(seek(50, 20 * B + 5, SEEK_DATA), 20 * B + 5);
	cr_assert_eq(seek(50, 20 * B, SEEK_HOLE), 21 * B);
	cr_assert_eq(seek(50, 21 * B, SEEK_DATA), -ENXIO);
	cr_assert_eq(seek(50, 21 * B, SEEK_HOLE), -ENXIO);
	/* After the checkpoint, the same answers from home. */
	iod_store_close(st);
	st = NULL;
	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	cr_assert_eq(seek(50, 0, SEEK_HOLE), 2 * B);
	cr_assert_eq(seek(50, 2 * B, SEEK_DATA), 20 * B);
	cr_assert_eq(seek(50, 20 * B, SEEK_HOLE), 21 * B);
	/* Absent subfile: no data. */
	cr_assert_eq(seek(51, 0, SEEK_DATA), -ENXIO);
	cr_assert_eq(seek(50, 0, 7), -EINVAL);
}

/* ZERO_RANGE: a punch whose range is allocated again: zeros, blocks
 * held, size unchanged. */
Test(iod_space, zero_range_reads_zeros_and_stays_allocated)
{
	static uint8_t want[64 * B];

	for (int mode = 0; mode < 3; mode++) {
		uint64_t ino = 60 + (uint64_t)mode;
		struct iod_sub_stat before, after;
		int flag = 0;

		cr_assert_eq(open_mode(mode, 0), 0);
		fill(want, sizeof(want), 6);
		cr_assert_eq(s_write(st, ino, 0, 0, want, sizeof(want), 1, &L,
				     &before), 0);
		cr_assert_eq(iod_store_punch(st, ino, 0, 3 * B + 7, 40 * B, 1,
					     true, &after, sync_cb, &flag), 0);
		cr_assert_eq(sync_wait(st, &flag), 0);
		memset(want + 3 * B + 7, 0, 40 * B);
		cr_assert_eq(after.size, sizeof(want));
		expect_content(ino, want, sizeof(want));
		cr_assert_geq(after.blocks, sizeof(want) / 512 - 8,
			      "mode %d: %lu blocks after ZERO_RANGE", mode,
			      (unsigned long)after.blocks);
		crash_and_reopen();
		expect_content(ino, want, sizeof(want));
		iod_store_close(st);
		st = NULL;
	}
}

/* data=journal: a partial-block write issued while a punch still waits for
 * its checkpoint reads the punched bytes of its block as zeros, both from
 * home and from a resident copy older than the punch, so the bytes it does
 * not write stay punched whatever the checkpoint timing (otherwise one twin
 * may checkpoint the punch before the write and the other after, and the
 * twins differ: seen in t_fsx's two-mount race). */
Test(iod_space, partial_write_after_pending_punch_sees_zeros)
{
	static uint8_t old[4 * B], want[4 * B], part[100];
	int pflag = 0, w0flag = 0, w2flag = 0;

	cr_assert_eq(open_mode(TW_JNL_JOURNAL, 0), 0);
	fill(old, sizeof(old), 5);
	/* blocks 0-1 at home (another punch waits for the checkpoint that
	 * takes them there), blocks 2-3 resident in the journal */
	cr_assert_eq(s_write(st, 30, 0, 0, old, 2 * B, 1, &L, NULL), 0);
	cr_assert_eq(s_write(st, 31, 0, 0, old, B, 1, &L, NULL), 0);
	cr_assert_eq(s_punch(st, 31, 0, 0, B, 1, NULL), 0);
	cr_assert_eq(s_write(st, 30, 0, 2 * B, old + 2 * B, 2 * B, 1, &L, NULL),
		     0);
	/* The punch, then partial writes into blocks 0 and 2 before the
	 * loop runs (the punch cannot have reached home yet). */
	cr_assert_eq(iod_store_punch(st, 30, 0, 0, 4 * B, 1, false, NULL,
				     sync_cb, &pflag), 0);
	fill(part, sizeof(part), 11);
	cr_assert_eq(iod_store_write(st, 30, 0, 100, part, sizeof(part), NULL, 1, &L,
				     false, NULL, sync_cb, &w0flag), 0);
	cr_assert_eq(iod_store_write(st, 30, 0, 2 * B + 100, part,
				     sizeof(part), NULL, 1, &L, false, NULL, sync_cb,
				     &w2flag), 0);
	memset(want, 0, sizeof(want));
	memcpy(want + 100, part, sizeof(part));
	memcpy(want + 2 * B + 100, part, sizeof(part));
	expect_content(30, want, sizeof(want));      /* before any checkpoint */
	cr_assert_eq(sync_wait(st, &w0flag), 0);
	cr_assert_eq(sync_wait(st, &w2flag), 0);
	cr_assert_eq(sync_wait(st, &pflag), 0);
	expect_content(30, want, sizeof(want));      /* after it */
	crash_and_reopen();
	expect_content(30, want, sizeof(want));      /* after replay */
}
