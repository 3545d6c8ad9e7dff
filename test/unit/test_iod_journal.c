/* test_iod_journal.c - the iod's subfile store over the block journal
 * (iod/store_journal.c), in each of the three modes (journal, ordered,
 * writeback): data, truncate, delete and checksums as a reader sees them
 * before and after checkpoints; restart by clean close and by process
 * death (iod_store_abandon: nothing more is written, the next open
 * replays); trunc_gen refusal across restarts; listing of subfiles that
 * exist only in the journal; a delete and re-creation inside one
 * checkpoint; the write-intent log (marked in the write's transaction,
 * rebuilt at open, cleared only for regions not written since the token).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iod_int.h"
#include "iod_store_sync.h"
#include "journal.h"

#define MIB (1u << 20)

static char tmpdir[128];
static char datadir[160];
static struct iod_store *st;
static int cur_mode;

static const struct iod_sub_layout L = {
	.stripe_size = 65536, .stripe_count = 2, .n_groups = 2,
	.groups = { 0, 1 } };

static const char *const mode_names[] = { "journal", "ordered", "writeback" };

static int rm_cb(const char *p, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static unsigned test_max_fds;   /* the fd cache's size; 0: default */

static int open_mode(int mode, struct iod_store **out)
{
	struct iod_store_opts o = {
		.dir = datadir, .iod_id = 1, .cluster = "test",
		.journal_size = 16u << 20, .journal_mode = mode,
		.commit_interval_ms = 100, .max_fds = test_max_fds,
	};
	return iod_store_open(&o, out);
}

/* A fresh data directory in mode `mode`. */
static void fresh(int mode)
{
	if (st)
		iod_store_close(st);
	st = NULL;
	if (tmpdir[0])
		nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/twinfs-iodj-test.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
	cur_mode = mode;
	cr_assert_eq(open_mode(mode, &st), 0, "open in %s mode",
		     mode_names[mode]);
}

static void restart_clean(void)
{
	iod_store_close(st);
	st = NULL;
	cr_assert_eq(open_mode(cur_mode, &st), 0);
}

/* Process death: nothing more is written; reopen replays the journal.
 * Requests already handed to io_uring are let finish first, as the kernel
 * would after a real death (a ring torn down with requests in flight
 * keeps the journal file, and so its flock, open for a moment). */
static void restart_dead(void)
{
	while (iod_store_wait(st) == 0)
		;
	iod_store_abandon(st);
	st = NULL;
	cr_assert_eq(open_mode(cur_mode, &st), 0);
}

static void setup(void)
{
	tw_log_init("test_iod_journal", TW_LOG_ERR);
	tmpdir[0] = '\0';
	st = NULL;
}

static void teardown(void)
{
	iod_store_close(st);
	st = NULL;
	if (tmpdir[0])
		nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(iod_journal, .init = setup, .fini = teardown);

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13u + seed * 101u + (i >> 9));
}

/* The subfile reads back as exactly want[0..n). */
static void expect(uint64_t ino, uint32_t col, const uint8_t *want, size_t n)
{
	struct iod_sub_stat ss;
	uint8_t *out = NULL;
	long got = iod_store_read(st, ino, col, 0, n + 4096, &out, &ss);

	cr_assert_eq(got, (long)n, "%s: read %ld, want %zu",
		     mode_names[cur_mode], got, n);
	cr_assert_eq(ss.size, n);
	if (n)
		cr_assert_arr_eq(out, want, n, "%s: contents",
				 mode_names[cur_mode]);
	free(out);
	/* Verify sees what a reader sees. */
	uint64_t size;
	uint32_t *crcs;
	long nr = iod_store_checksum(st, ino, col, 4096, 0, 0, 0, &size, &crcs);

	cr_assert_eq(size, n);
	cr_assert_eq(nr, (long)((n + 4095) / 4096));
	for (long r = 0; r < nr; r++) {
		size_t lo = (size_t)r * 4096, hi = TW_MIN(n, lo + 4096);

		cr_assert_eq(crcs[r], tw_crc32c(0, want + lo, hi - lo),
			     "%s: crc of region %ld", mode_names[cur_mode], r);
	}
	free(crcs);
}

static void expect_absent(uint64_t ino, uint32_t col)
{
	struct iod_sub_stat ss;

	cr_assert_eq(iod_store_stat(st, ino, col, &ss), 0);
	cr_assert_not(ss.exists, "%s: subfile %lu.%u should be absent",
		      mode_names[cur_mode], (unsigned long)ino, col);
}

/* A workload touching data, overwrites, truncate both ways, delete and
 * re-creation; `model` holds what (7, 0) must contain, *n its size. */
static void workload(uint8_t *model, size_t *n)
{
	static uint8_t a[200000], b[10000];

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	cr_assert_eq(s_write(st, 7, 0, 0, a, sizeof(a), 1, &L, NULL), 0);
	/* unaligned overwrite inside */
	cr_assert_eq(s_write(st, 7, 0, 5000, b, sizeof(b), 1, &L, NULL), 0);
	memcpy(model, a, sizeof(a));
	memcpy(model + 5000, b, sizeof(b));
	/* shrink into a block, then grow with zeros */
	cr_assert_eq(s_truncate(st, 7, 0, 12345, 2, NULL), 0);
	cr_assert_eq(s_truncate(st, 7, 0, 30000, 3, NULL), 0);
	memset(model + 12345, 0, 30000 - 12345);
	/* write past the end */
	cr_assert_eq(s_write(st, 7, 0, 40000, b, 100, 3, &L, NULL), 0);
	memset(model + 30000, 0, 10000);
	memcpy(model + 40000, b, 100);
	*n = 40100;
	/* another subfile deleted, one deleted and re-created */
	cr_assert_eq(s_write(st, 8, 1, 0, a, 5000, 0, &L, NULL), 0);
	cr_assert_eq(s_delete(st, 8, 1), 0);
	cr_assert_eq(s_write(st, 9, 0, 0, a, 9000, 0, &L, NULL), 0);
	cr_assert_eq(s_delete(st, 9, UINT32_MAX), 0);
	cr_assert_eq(s_write(st, 9, 0, 0, b, 3000, 0, &L, NULL), 0);
}

static void check_workload(const uint8_t *model, size_t n)
{
	static uint8_t b[10000];

	fill(b, sizeof(b), 2);
	expect(7, 0, model, n);
	expect_absent(8, 1);
	expect(9, 0, b, 3000);
}

Test(iod_journal, all_modes_restart_clean_and_after_death)
{
	static uint8_t model[200000];
	size_t n;

	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		workload(model, &n);
		check_workload(model, n);
		restart_dead();           /* replay, no checkpoint before */
		check_workload(model, n);
		restart_dead();           /* replay is idempotent */
		check_workload(model, n);
		restart_clean();          /* checkpoint everything home */
		check_workload(model, n);
		cr_assert_eq(s_fsync(st, 0), 0);
		cr_assert_eq(s_fsync(st, 7), 0);
	}
}

/* writeback mode: an fsync of a subfile, and one of everything (ino 0)
 * after another write, go through the journal's background syncfs
 * (jbd_sync_home; what it covers is tested in test_jbd.c) and complete
 * after the call; the data reads back after a process death. */
Test(iod_journal, writeback_fsync_in_background)
{
	static uint8_t a[256 * 1024];

	fresh(2);
	fill(a, sizeof(a), 5);
	for (uint64_t ino = 31; ino <= 32; ino++) {
		int flag = 0;
		uint64_t what = ino == 31 ? 31 : 0;

		cr_assert_eq(s_write(st, ino, 0, 0, a, sizeof(a), 0, &L, NULL),
			     0);
		cr_assert_eq(iod_store_fsync(st, what, 0, sync_cb, &flag), 0);
		cr_assert_eq(flag, 0, "fsync of ino %lu finished inside the call",
			     (unsigned long)what);
		cr_assert_eq(sync_wait(st, &flag), 0);
	}
	restart_dead();
	expect(31, 0, a, sizeof(a));
	expect(32, 0, a, sizeof(a));
}

/* writeback mode: an fsync of a file fsyncs only its subfiles changed in
 * place since the last (jbd_sync_files), of the columns asked for, and
 * never the whole home file system; ino 0 still means a syncfs. */
Test(iod_journal, writeback_fsync_of_a_file)
{
	static uint8_t a[64 * 1024];
	struct jbd_stats j0, j1;
	int flag;

	fresh(2);
	fill(a, sizeof(a), 6);
	cr_assert_eq(s_write(st, 41, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 41, 1, 0, a, sizeof(a), 0, &L, NULL), 0);
	iod_store_journal_stats(st, &j0);
	flag = 0;
	cr_assert_eq(iod_store_fsync(st, 41, 1u << 0, sync_cb, &flag), 0);
	cr_assert_eq(sync_wait(st, &flag), 0);
	iod_store_journal_stats(st, &j1);
	cr_assert_eq(j1.home_fsyncs, j0.home_fsyncs + 1);
	cr_assert_eq(j1.home_syncfs, j0.home_syncfs, "a syncfs for one file");
	cr_assert_eq(j1.synced_seq, j1.closed_seq);
	/* column 0 again, unchanged: the log alone */
	flag = 0;
	cr_assert_eq(iod_store_fsync(st, 41, 1u << 0, sync_cb, &flag), 0);
	cr_assert_eq(sync_wait(st, &flag), 0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(j0.home_fsyncs, j1.home_fsyncs, "synced data synced again");
	/* every column: column 1 is still unsynced */
	cr_assert_eq(s_fsync(st, 41), 0);
	iod_store_journal_stats(st, &j1);
	cr_assert_eq(j1.home_fsyncs, j0.home_fsyncs + 1);
	cr_assert_eq(s_fsync(st, 41), 0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(j0.home_fsyncs, j1.home_fsyncs);
	/* a punch changes the subfile in place too */
	cr_assert_eq(s_punch(st, 41, 1, 0, 4096, 0, NULL), 0);
	cr_assert_eq(s_fsync(st, 41), 0);
	iod_store_journal_stats(st, &j1);
	cr_assert_eq(j1.home_fsyncs, j0.home_fsyncs + 1);
	/* everything (ino 0): the syncfs */
	cr_assert_eq(s_fsync(st, 0), 0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(j0.home_syncfs, j1.home_syncfs + 1);
	restart_dead();
	expect(41, 0, a, sizeof(a));
	memset(a, 0, 4096);
	expect(41, 1, a, sizeof(a));
}

/* fsync(ino, columns) in writeback mode: the descriptors a batch fsyncs
 * (home_fsync_fds) since `before`. */
static uint64_t fsync_fds(uint64_t ino, uint32_t columns,
			  const struct jbd_stats *before)
{
	struct jbd_stats now;
	int flag = 0;

	cr_assert_eq(iod_store_fsync(st, ino, columns, sync_cb, &flag), 0);
	cr_assert_eq(sync_wait(st, &flag), 0);
	iod_store_journal_stats(st, &now);
	return now.home_fsync_fds - before->home_fsync_fds;
}

/* S6: the directories on a subfile's path are synced by the first fsync
 * that comes after they changed, whichever subfile made them: a subfile
 * created in a directory that another's creation made, and one whose
 * cache entry was evicted and made again, still get the new directories'
 * entries synced (the bits are per directory, not per entry); a
 * synchronous write syncs them itself. */
Test(iod_journal, writeback_fsync_syncs_new_directories)
{
	static uint8_t a[4096];
	struct jbd_stats j0;

	fill(a, sizeof(a), 7);
	fresh(2);
	/* column 0 makes ab, ab/cd and its entry; column 1 adds its own
	 * entry to ab/cd; its fsync alone must also sync ab (cd's entry)
	 * and subfiles/ (ab's): its subfile and three directories */
	cr_assert_eq(s_write(st, 51, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 51, 1, 0, a, sizeof(a), 0, &L, NULL), 0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(fsync_fds(51, 1u << 1, &j0), 4);
	/* then column 0 has only its data left */
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(fsync_fds(51, 1u << 0, &j0), 1);

	/* a fd cache of one entry: ino 52's column 0 is evicted by column
	 * 1 before any fsync, and cached again by a rewrite; the fsync still
	 * syncs the directories its creation made */
	test_max_fds = 1;
	fresh(2);
	test_max_fds = 0;
	cr_assert_eq(s_write(st, 52, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 52, 1, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 52, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(fsync_fds(52, 1u << 0, &j0), 4);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(fsync_fds(52, 0, &j0), 1, "column 1 (uncached)");
	restart_dead();
	expect(52, 0, a, sizeof(a));
	expect(52, 1, a, sizeof(a));

	/* a synchronous write (O_SYNC) makes the entries that reach its new
	 * subfile durable itself, before it is answered */
	fresh(2);
	cr_assert_eq(s_write_x(st, 53, 0, 0, a, sizeof(a), 0, &L, true, NULL),
		     0);
	iod_store_journal_stats(st, &j0);
	cr_assert_eq(fsync_fds(53, 0, &j0), 1, "directories left unsynced");
}

/* One write of len bytes of a at off into (61, col); then how many syncfs
 * runs, fsync batches and descriptors it cost. */
static void ordered_write(uint32_t col, uint64_t off, const uint8_t *a,
			  size_t len, uint64_t syncfs, uint64_t fsyncs,
			  uint64_t fds)
{
	struct jbd_stats j0, j1;

	iod_store_journal_stats(st, &j0);
	cr_assert_eq(s_write(st, 61, col, off, a, len, 0, &L, NULL), 0);
	iod_store_journal_stats(st, &j1);
	cr_assert_eq(j1.home_syncfs - j0.home_syncfs, syncfs,
		     "write of %zu at %lu in column %u: syncfs runs", len,
		     (unsigned long)off, col);
	cr_assert_eq(j1.home_fsyncs - j0.home_fsyncs, fsyncs);
	cr_assert_eq(j1.home_fsync_fds - j0.home_fsync_fds, fds);
}

/* ordered mode (J11, S6): before a write's commit the journal's helper
 * thread fsyncs that write's subfile, not the home file system; a
 * creation, which adds directory entries, is one syncfs instead (a
 * directory's fsync is one more flush of the disk), and so is a batch
 * whose subfile was unlinked after its write (only a durable unlink keeps
 * the older content from coming back).  Replay reads the data back (a
 * process death keeps the page cache: this is not a power loss). */
Test(iod_journal, ordered_commit_fsyncs_its_subfiles)
{
	static uint8_t a[16384];

	fill(a, sizeof(a), 8);
	test_max_fds = 1;
	fresh(1);
	test_max_fds = 0;
	/* a new subfile: new entries in ab/cd, ab and subfiles/ */
	ordered_write(0, 0, a, sizeof(a), 1, 0, 0);
	/* a rewrite: the subfile alone */
	ordered_write(0, 4096, a, 4096, 0, 1, 1);
	/* another column in the same ab/cd is a creation; it evicts column
	 * 0 from the one-entry cache, whose next rewrite opens it again */
	ordered_write(1, 0, a, sizeof(a), 1, 0, 0);
	ordered_write(0, 8192, a, 4096, 0, 1, 1);
	/* column 1 again (evicted by that rewrite): its subfile alone */
	ordered_write(1, 0, a, 4096, 0, 1, 1);
	/* a write of no bytes changes nothing in place: no fsync */
	ordered_write(0, 0, a, 0, 0, 0, 0);
	restart_dead();
	memcpy(a + 4096, a, 4096);
	memcpy(a + 8192, a, 4096);
	expect(61, 0, a, sizeof(a));
	fill(a, sizeof(a), 8);
	expect(61, 1, a, sizeof(a));

	/* a rewrite, and the file's delete before the rewrite's commit ran
	 * (the owner drains: the close waits for the next process) */
	struct jbd_stats j0, j1;
	int wf = 0, df = 0;

	iod_store_journal_stats(st, &j0);
	cr_assert_eq(iod_store_write(st, 61, 0, 0, a, 4096, NULL, 0, &L, false,
				     NULL, sync_cb, &wf), 0);
	cr_assert_eq(iod_store_delete(st, 61, NULL, 0, sync_cb, &df), 0);
	cr_assert_eq(sync_wait(st, &wf), 0);
	cr_assert_eq(sync_wait(st, &df), 0);
	iod_store_journal_stats(st, &j1);
	cr_assert_eq(j1.home_syncfs, j0.home_syncfs + 1,
		     "the unlink was not made durable with the rewrite");
	cr_assert_eq(j1.home_fsyncs, j0.home_fsyncs);
}

/* ordered/writeback: a delete is answered once its record is closed; the
 * unlinkat runs on the store's drainer thread, not on the loop and not at
 * the next checkpoint: the subfile leaves home with no further request.
 * A later look at it (S4) never finds it, and a re-creation of the same
 * subfile is not unlinked by the drain. */
Test(iod_journal, delete_unlinks_on_the_drainer)
{
	static uint8_t a[8192];
	char rel[64], path[PATH_MAX];
	struct stat sb;

	fill(a, sizeof(a), 2);
	for (int mode = 1; mode < 3; mode++) {
		int i;

		fresh(mode);
		cr_assert_gt(iod_store_subpath(71, 0, rel, sizeof(rel)), 0);
		snprintf(path, sizeof(path), "%s/%s", datadir, rel);
		cr_assert_eq(s_write(st, 71, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
		cr_assert_eq(stat(path, &sb), 0);
		cr_assert_eq(s_delete(st, 71, 0), 0);
		for (i = 0; i < 2000 && stat(path, &sb) == 0; i++)
			usleep(1000);
		cr_assert_lt(i, 2000, "mode %d: the drainer left %s", mode,
			     rel);
		/* deleted, then made again at once: the new one stays */
		cr_assert_eq(s_write(st, 71, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
		cr_assert_eq(s_delete(st, 71, 0), 0);
		struct iod_sub_stat ss;

		cr_assert_eq(iod_store_stat(st, 71, 0, &ss), 0);
		cr_assert_not(ss.exists, "mode %d: deleted, still seen", mode);
		cr_assert_eq(s_write(st, 71, 0, 0, a, 4096, 0, &L, NULL), 0);
		usleep(20000);
		cr_assert_eq(stat(path, &sb), 0, "mode %d: the re-creation "
			     "was unlinked", mode);
		cr_assert_eq(sb.st_size, 4096);
		restart_dead();
		expect(71, 0, a, 4096);
	}
}

/* A deferred unlink that fails (the subfile's path became a non-empty
 * directory: EISDIR) fails the next checkpoint's drain, so the log keeps
 * the delete record: the next start replays it, and fails again while
 * the directory is there.  Had the tail moved, the start would succeed
 * and the deleted subfile stay at home for good. */
Test(iod_journal, failed_deferred_unlink_keeps_the_delete)
{
	uint8_t a[4096];
	char rel[64], path[PATH_MAX], inner[PATH_MAX + 8];
	int fd;

	fill(a, sizeof(a), 3);
	fresh(1);
	cr_assert_gt(iod_store_subpath(81, 0, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	snprintf(inner, sizeof(inner), "%s/x", path);
	cr_assert_eq(s_write(st, 81, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkdir(path, 0755), 0);
	fd = open(inner, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(s_delete(st, 81, 0), 0);
	iod_store_close(st);   /* its checkpoint's drain fails */
	st = NULL;
	cr_assert_neq(open_mode(1, &st), 0, "the log lost the delete record");
	st = NULL;
	cr_assert_eq(unlink(inner), 0);
	cr_assert_eq(rmdir(path), 0);
	cr_assert_eq(open_mode(1, &st), 0);
	struct stat sb;
	cr_assert_neq(stat(path, &sb), 0);
}

/* In journal mode the data of a closed transaction is only in the log
 * before a checkpoint: replay is what brings it home. */
Test(iod_journal, journal_mode_replay_brings_data_home)
{
	static uint8_t a[64 * 1024];
	char rel[64], path[PATH_MAX];
	struct stat sb;

	fresh(0);
	fill(a, sizeof(a), 9);
	cr_assert_eq(s_write(st, 21, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	cr_assert_gt(iod_store_subpath(21, 0, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	cr_assert_neq(stat(path, &sb), 0, "not at home before a checkpoint");
	expect(21, 0, a, sizeof(a));
	restart_dead();
	cr_assert_eq(stat(path, &sb), 0, "replayed home");
	cr_assert_eq(sb.st_size, (off_t)sizeof(a));
	expect(21, 0, a, sizeof(a));
}

Test(iod_journal, sync_writes)
{
	uint8_t b[4096];

	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		fill(b, sizeof(b), 3);
		cr_assert_eq(s_write_x(st, 5, 0, 0, b, sizeof(b), 0, &L, true,
				       NULL), 0);
		restart_dead();
		expect(5, 0, b, sizeof(b));
	}
}

Test(iod_journal, trunc_gen_refusal_survives_restart)
{
	uint8_t b[100];
	struct iod_sub_stat ss;

	fill(b, sizeof(b), 4);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		cr_assert_eq(s_write(st, 11, 0, 0, b, sizeof(b), 5, &L, &ss), 0);
		cr_assert_eq(ss.trunc_gen, 5);
		cr_assert_eq(s_write(st, 11, 0, 0, b, 10, 4, &L, NULL), -ESTALE);
		cr_assert_eq(s_truncate(st, 11, 0, 50, 7, &ss), 0);
		cr_assert_eq(ss.trunc_gen, 7);
		cr_assert_eq(ss.size, 50);
		/* a write carrying a newer gen records it too */
		cr_assert_eq(s_write(st, 12, 0, 0, b, 10, 1, &L, NULL), 0);
		cr_assert_eq(s_write(st, 12, 0, 0, b, 10, 9, &L, NULL), 0);
		restart_dead();
		cr_assert_eq(s_write(st, 11, 0, 0, b, 10, 6, &L, NULL), -ESTALE);
		cr_assert_eq(s_truncate(st, 11, 0, 0, 6, NULL), -ESTALE);
		cr_assert_eq(iod_store_stat(st, 11, 0, &ss), 0);
		cr_assert_eq(ss.trunc_gen, 7);
		cr_assert_eq(ss.size, 50);
		cr_assert_eq(s_write(st, 12, 0, 0, b, 10, 8, &L, NULL), -ESTALE);
		restart_clean();
		cr_assert_eq(s_write(st, 11, 0, 0, b, 10, 6, &L, NULL), -ESTALE);
		cr_assert_eq(iod_store_stat(st, 12, 0, &ss), 0);
		cr_assert_eq(ss.trunc_gen, 9);
	}
}

/* Journal mode: a delete and a re-creation of the same subfile land in one
 * checkpoint run; the new data must go to the new file (the checkpoint
 * must not keep an fd of the unlinked one). */
Test(iod_journal, delete_and_recreate_in_one_checkpoint)
{
	static uint8_t a[3 * 4096], b[2 * 4096 + 7];

	fill(a, sizeof(a), 5);
	fill(b, sizeof(b), 6);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		cr_assert_eq(s_write(st, 30, 2, 0, a, sizeof(a), 0, &L, NULL), 0);
		cr_assert_eq(s_delete(st, 30, 2), 0);
		expect_absent(30, 2);
		cr_assert_eq(s_write(st, 30, 2, 0, b, sizeof(b), 0, &L, NULL), 0);
		expect(30, 2, b, sizeof(b));
		restart_clean();
		expect(30, 2, b, sizeof(b));
		restart_dead();
		expect(30, 2, b, sizeof(b));
	}
}

static bool on_disk(uint64_t ino, uint32_t col)
{
	char rel[64], path[256];
	struct stat sb;

	cr_assert_gt(iod_store_subpath(ino, col, rel, sizeof(rel)), 0);
	snprintf(path, sizeof(path), "%s/%s", datadir, rel);
	return stat(path, &sb) == 0;
}

/* Write MiB of filler to (ino, 0), which fills the 16 MiB log past half
 * and so starts a checkpoint of everything before it; then wait until
 * the journal is idle (that checkpoint done). */
static void checkpoint_by_filler(uint64_t ino, size_t mib)
{
	static uint8_t f[MIB];

	fill(f, sizeof(f), 9);
	for (size_t i = 0; i < mib; i++)
		cr_assert_eq(s_write(st, ino, 0, i * MIB, f, MIB, 0, &L, NULL),
			     0);
	while (iod_store_wait(st) == 0)
		;
}

/* Journal mode, S4: a checkpoint's delete records leave their unlinkat
 * to the checkpoint's helper thread (ops.home_bg); the files must be
 * gone once that checkpoint is done, and stay gone across a death.  A
 * subfile re-created while its unlink is queued is the test above. */
Test(iod_journal, checkpoint_unlinks_deleted_subfiles)
{
	static uint8_t a[8192];
	const uint64_t first = 100, n = 64;

	fill(a, sizeof(a), 3);
	fresh(JBD_MODE_JOURNAL);
	for (uint64_t i = first; i < first + n; i++)
		cr_assert_eq(s_write(st, i, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
	checkpoint_by_filler(500, 10);
	for (uint64_t i = first; i < first + n; i++)
		cr_assert(on_disk(i, 0), "subfile %lu.0 not home after a "
			  "checkpoint", (unsigned long)i);
	for (uint64_t i = first; i < first + n; i++)
		cr_assert_eq(s_delete(st, i, 0), 0);
	for (uint64_t i = first; i < first + n; i++)
		expect_absent(i, 0);
	checkpoint_by_filler(501, 10);
	for (uint64_t i = first; i < first + n; i++) {
		cr_assert_not(on_disk(i, 0), "subfile %lu.0 still on disk "
			      "after the checkpoint of its delete",
			      (unsigned long)i);
		expect_absent(i, 0);
	}
	/* One more created after the drain is a new file. */
	cr_assert_eq(s_write(st, first, 0, 0, a, 100, 0, &L, NULL), 0);
	expect(first, 0, a, 100);
	restart_dead();
	expect(first, 0, a, 100);
	for (uint64_t i = first + 1; i < first + n; i++)
		expect_absent(i, 0);
}

/* S5: a subfile the store has seen absent (cached as such) is created
 * by a later write, in every mode, and is there after a checkpoint (the
 * clean close) and a death. */
Test(iod_journal, absent_then_created)
{
	static uint8_t a[5000];

	fill(a, sizeof(a), 4);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		expect_absent(40, 0);
		expect_absent(40, 0);
		cr_assert_not(on_disk(40, 0));
		cr_assert_eq(s_write(st, 40, 0, 0, a, sizeof(a), 0, &L, NULL),
			     0);
		expect(40, 0, a, sizeof(a));
		restart_clean();
		cr_assert(on_disk(40, 0), "%s: not home", mode_names[mode]);
		expect(40, 0, a, sizeof(a));
		cr_assert_eq(s_delete(st, 40, 0), 0);
		expect_absent(40, 0);
		cr_assert_eq(s_write(st, 40, 0, 0, a, 100, 0, &L, NULL), 0);
		restart_dead();
		expect(40, 0, a, 100);
	}
}

/* A column named in a delete is journaled as deleted without asking
 * whether its subfile exists (iod_store_delete): in every mode, deleting
 * an absent column succeeds, leaves the file's other column alone, and
 * its replay (after a death) and its checkpoint (a clean close) meet
 * ENOENT without an error. */
Test(iod_journal, delete_of_an_absent_column)
{
	static uint8_t a[6000];

	fill(a, sizeof(a), 5);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		cr_assert_eq(s_write(st, 90, 0, 0, a, sizeof(a), 0, &L, NULL),
			     0);
		cr_assert_eq(s_delete(st, 90, 1), 0, "%s", mode_names[mode]);
		cr_assert_eq(s_delete(st, 91, 0), 0, "%s", mode_names[mode]);
		expect_absent(90, 1);
		expect_absent(91, 0);
		expect(90, 0, a, sizeof(a));
		restart_dead();
		expect(90, 0, a, sizeof(a));
		expect_absent(90, 1);
		expect_absent(91, 0);
		restart_clean();
		cr_assert(on_disk(90, 0), "%s: 90.0 not home",
			  mode_names[mode]);
		cr_assert_not(on_disk(90, 1));
		cr_assert_not(on_disk(91, 0));
		expect(90, 0, a, sizeof(a));
		/* and a real delete after them still removes the file */
		cr_assert_eq(s_delete(st, 90, 0), 0);
		restart_clean();
		cr_assert_not(on_disk(90, 0), "%s: 90.0 still home",
			      mode_names[mode]);
		expect_absent(90, 0);
	}
}

Test(iod_journal, listing_sees_the_journal)
{
	uint8_t b[10] = { 1 };
	struct iod_sub_info out[16];
	bool eof;
	int n;

	fresh(0);
	cr_assert_eq(s_write(st, 3, 0, 0, b, sizeof(b), 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 4, 1, 0, b, sizeof(b), 0, &L, NULL), 0);
	restart_clean();                           /* both at home */
	cr_assert_eq(s_delete(st, 3, 0), 0);        /* only in the journal */
	cr_assert_eq(s_write(st, 2, 1, 0, b, 5, 0, &L, NULL), 0);
	n = iod_store_list(st, 0, 0, 16, out, &eof);
	cr_assert_eq(n, 2);
	cr_assert(eof);
	cr_assert_eq(out[0].ino, 2);
	cr_assert_eq(out[0].column, 1);
	cr_assert_eq(out[0].size, 5);
	cr_assert_eq(out[1].ino, 4);
	/* paging */
	n = iod_store_list(st, 0, 0, 1, out, &eof);
	cr_assert_eq(n, 1);
	cr_assert_not(eof);
	n = iod_store_list(st, out[0].ino, out[0].column, 1, out, &eof);
	cr_assert_eq(n, 1);
	cr_assert_eq(out[0].ino, 4);
}

/* The listing's index (store_scan.c X1, X2) against a model, in every
 * mode: filled from the directories at the first listing, then kept up
 * to date by creations and deletions at home (in place, or by a
 * checkpoint), a name deleted and created again, and thousands of
 * creations and deletions; a restart's fresh walk agrees. */
#define IX_N 4400u
static bool ix_model[IX_N];

static uint64_t ix_ino(unsigned k)
{
	return 1000 + (uint64_t)k / 2;
}

static void ix_expect(const char *when)
{
	struct iod_sub_info page[256];
	uint64_t ai = 0;
	uint32_t ac = 0;
	unsigned k = 0;
	bool eof = false;

	while (!eof) {
		int n = iod_store_list(st, ai, ac, 256, page, &eof);

		cr_assert_geq(n, 0, "%s: list: %s", when, strerror(-n));
		for (int i = 0; i < n; i++) {
			if (page[i].ino < 1000)
				continue;   /* the filler */
			while (k < IX_N && !ix_model[k])
				k++;
			cr_assert_lt(k, IX_N, "%s (%s mode): %" PRIu64 ".%u "
				     "listed, not in the model", when,
				     mode_names[cur_mode], page[i].ino,
				     page[i].column);
			cr_assert(page[i].ino == ix_ino(k) &&
				  page[i].column == k % 2, "%s (%s mode): "
				  "listed %" PRIu64 ".%u, expected %" PRIu64
				  ".%u", when, mode_names[cur_mode],
				  page[i].ino, page[i].column, ix_ino(k),
				  k % 2);
			k++;
		}
		if (n) {
			ai = page[n - 1].ino;
			ac = page[n - 1].column;
		}
	}
	for (; k < IX_N; k++)
		cr_assert_not(ix_model[k], "%s (%s mode): %" PRIu64 ".%u not "
			      "listed", when, mode_names[cur_mode], ix_ino(k),
			      k % 2);
}

static void ix_set(unsigned k, bool on)
{
	uint8_t b = (uint8_t)k;

	if (on)
		cr_assert_eq(s_write(st, ix_ino(k), k % 2, 0, &b, 1, 0, &L,
				     NULL), 0);
	else
		cr_assert_eq(s_delete(st, ix_ino(k), k % 2), 0);
	ix_model[k] = on;
}

Test(iod_journal, listing_index_follows_home, .timeout = 600)
{
	struct iod_sub_info out[4];
	bool eof;

	for (int mode = 0; mode < 3; mode++) {
		memset(ix_model, 0, sizeof(ix_model));
		fresh(mode);
		for (unsigned k = 0; k < 40; k++)
			ix_set(k, true);
		restart_clean();
		ix_expect("after a restart");          /* the index is built */
		for (unsigned k = 40; k < 80; k++)
			ix_set(k, true);
		for (unsigned k = 0; k < 40; k += 3)
			ix_set(k, false);
		ix_set(3, true);                        /* deleted, made again */
		ix_expect("after creations and deletions");
		checkpoint_by_filler(500, 10);
		ix_expect("after a checkpoint");
		for (unsigned k = 80; k < IX_N; k++)
			ix_set(k, true);
		ix_expect("after many creations");
		checkpoint_by_filler(501, 10);
		for (unsigned k = 100; k < IX_N; k += 2)
			ix_set(k, false);
		checkpoint_by_filler(502, 10);
		ix_expect("after many deletions");
		restart_clean();
		ix_expect("after a second restart");   /* walked again */
		/* A peer's cursor past every ino or column: nothing after
		 * it, or the same as its ino's last column. */
		cr_assert_eq(iod_store_list(st, UINT64_MAX, 0, 4, out, &eof),
			     0);
		cr_assert(eof);
		cr_assert_eq(iod_store_list(st, ix_ino(41), 300, 4, out,
					    &eof), 4);
		cr_assert_eq(out[0].ino, ix_ino(42));
		cr_assert_eq(out[0].column, 0);
	}
}

struct marks {
	uint64_t regions[64];
	int n;
	bool all;
	int n_pinned;              /* regions (or "all") reported pinned */
};

static int mark_cb(void *arg, uint64_t ino, uint32_t col, uint64_t first,
		   uint64_t count, bool pinned)
{
	struct marks *m = arg;

	if (pinned)
		m->n_pinned++;
	cr_assert_eq(ino, 40);
	cr_assert_eq(col, 1);
	if (count == UINT64_MAX) {
		m->all = true;
		return 0;
	}
	for (uint64_t r = 0; r < count && m->n < 64; r++)
		m->regions[m->n++] = first + r;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct marks marked(void)
{
	struct marks m = { .n = 0 };

	cr_assert_eq(iod_store_intents(st, mark_cb, &m), 0);
	qsort(m.regions, (size_t)m.n, sizeof(m.regions[0]), cmp_u64);
	return m;
}

/* A clearing cycle with both twins synced now: every unpinned mark goes. */
static void clear_now(void)
{
	uint64_t token = iod_store_intent_epoch(st);

	cr_assert_eq(iod_store_intent_clear(st, token), 0);
}

Test(iod_journal, write_intent_marked_rebuilt_and_cleared)
{
	static uint8_t b[MIB + 2];
	struct marks m;

	fill(b, sizeof(b), 7);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		/* region 0; regions 3 and 4 (straddling); region 9 */
		cr_assert_eq(s_write(st, 40, 1, 100, b, 10, 0, &L, NULL), 0);
		cr_assert_eq(s_write(st, 40, 1, 4ull * MIB - 1, b, 2, 0, &L,
				     NULL), 0);
		cr_assert_eq(s_write(st, 40, 1, 9ull * MIB, b, MIB, 0, &L,
				     NULL), 0);
		m = marked();
		cr_assert_eq(m.n, 4);
		cr_assert_eq(m.regions[0], 0);
		cr_assert_eq(m.regions[1], 3);
		cr_assert_eq(m.regions[2], 4);
		cr_assert_eq(m.regions[3], 9);
		cr_assert_eq(iod_store_n_marked(st), 4);

		restart_dead();            /* rebuilt from replay */
		m = marked();
		cr_assert_eq(m.n, 4, "%s: %d marked after replay",
			     mode_names[mode], m.n);
		restart_clean();           /* rebuilt from the xattr */
		m = marked();
		cr_assert_eq(m.n, 4);
		cr_assert_eq(m.regions[3], 9);

		/* Clear: a region written after the token stays. */
		uint64_t token = iod_store_intent_epoch(st);

		cr_assert_eq(s_write(st, 40, 1, 3ull * MIB, b, 1, 0, &L, NULL), 0);
		cr_assert_eq(iod_store_intent_clear(st, token), 0);
		m = marked();
		cr_assert_eq(m.n, 1);
		cr_assert_eq(m.regions[0], 3);
		restart_dead();
		m = marked();
		cr_assert_eq(m.n, 1, "%s: %d marked after clear + replay",
			     mode_names[mode], m.n);
		cr_assert_eq(m.regions[0], 3);
		token = iod_store_intent_epoch(st);
		cr_assert_eq(iod_store_intent_clear(st, token), 0);
		cr_assert_eq(iod_store_n_marked(st), 0);
		/* the clear's own transaction closes, then it is gone for
		 * good */
		cr_assert_eq(s_fsync(st, 0), 0);
		restart_clean();
		cr_assert_eq(iod_store_n_marked(st), 0);
		/* deleting a subfile drops its marks */
		cr_assert_eq(s_write(st, 40, 1, 0, b, 1, 0, &L, NULL), 0);
		cr_assert_eq(iod_store_n_marked(st), 1);
		cr_assert_eq(s_delete(st, 40, 1), 0);
		cr_assert_eq(iod_store_n_marked(st), 0);
	}
}

/* Many regions: the persisted list overflows to "the whole subfile",
 * which a resync treats as fully marked; clearing repairs it. */
Test(iod_journal, write_intent_overflow)
{
	uint8_t b[1] = { 1 };
	struct marks m;

	fresh(0);
	for (uint64_t r = 0; r < 300; r += 2)
		cr_assert_eq(s_write(st, 40, 1, r * MIB, b, 1, 0, &L, NULL), 0);
	cr_assert_eq(iod_store_n_marked(st), 150);
	restart_clean();
	m = marked();
	cr_assert(m.all, "overflowed list reads as the whole subfile");
	uint64_t token = iod_store_intent_epoch(st);

	cr_assert_eq(iod_store_intent_clear(st, token), 0);
	cr_assert_eq(iod_store_n_marked(st), 0);
	restart_clean();
	cr_assert_eq(iod_store_n_marked(st), 0);
}

/* A truncate is marked in its own transaction, like a write: a shrink
 * every region of the bytes it drops, a grow the region of the old end;
 * a shrink of more regions than a list holds marks the whole subfile. */
Test(iod_journal, write_intent_truncate_marks)
{
	static uint8_t b[MIB];
	struct marks m;

	fill(b, sizeof(b), 3);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		for (uint64_t r = 0; r < 5; r++)
			cr_assert_eq(s_write(st, 40, 1, r * MIB, b, MIB, 0, &L,
					     NULL), 0);
		cr_assert_eq(s_fsync(st, 0), 0);
		clear_now();
		cr_assert_eq(iod_store_n_marked(st), 0);
		/* 5 MiB -> 1.5 MiB: regions 1..4 */
		cr_assert_eq(s_truncate(st, 40, 1, MIB + MIB / 2, 0, NULL), 0);
		m = marked();
		cr_assert_eq(m.n, 4, "%s: %d marked", mode_names[mode], m.n);
		cr_assert_eq(m.regions[0], 1);
		cr_assert_eq(m.regions[3], 4);
		restart_dead();           /* the mark is in the journal */
		m = marked();
		cr_assert_eq(m.n, 4, "%s: %d marked after replay",
			     mode_names[mode], m.n);
		clear_now();
		/* 1.5 MiB -> 7 MiB: region 1, where the zeros start */
		cr_assert_eq(s_truncate(st, 40, 1, 7 * MIB, 0, NULL), 0);
		m = marked();
		cr_assert_eq(m.n, 1);
		cr_assert_eq(m.regions[0], 1);
		restart_clean();          /* and in the xattr */
		m = marked();
		cr_assert_eq(m.n, 1);
		cr_assert_eq(m.regions[0], 1);
		clear_now();
		/* 80 GiB (sparse) -> 0: too many regions to list */
		cr_assert_eq(s_truncate(st, 40, 1, 80ull << 30, 0, NULL), 0);
		clear_now();
		cr_assert_eq(s_truncate(st, 40, 1, 0, 0, NULL), 0);
		m = marked();
		cr_assert(m.all, "%s: a big shrink marks the whole subfile",
			  mode_names[mode]);
		cr_assert_eq(iod_store_n_marked(st), 1);
		restart_dead();
		m = marked();
		cr_assert(m.all);
		cr_assert_eq(m.n_pinned, 0);
	}
}

/* ENOSPC before journaling: a reserve larger than the disk. */
Test(iod_journal, enospc_before_journaling)
{
	uint8_t b[4096] = { 0 };
	struct iod_store_opts o = {
		.dir = NULL, .iod_id = 1, .cluster = "test",
		.journal_size = 16u << 20, .reserve = 1ull << 62,
	};

	fresh(0);
	iod_store_close(st);
	o.dir = datadir;
	for (int mode = 0; mode < 3; mode++) {
		o.journal_mode = mode;
		cur_mode = mode;
		cr_assert_eq(iod_store_open(&o, &st), 0);
		cr_assert_eq(s_write(st, 50, 0, 0, b, sizeof(b), 0, &L, NULL),
			     -ENOSPC);
		expect_absent(50, 0);
		iod_store_close(st);
	}
	st = NULL;
}

/* A region the twin missed (a failed forward) is never cleared by a
 * cycle; a truncate the twin missed pins the whole subfile. */
Test(iod_journal, write_intent_pinned_regions_stay)
{
	uint8_t b[16] = { 1 };
	struct marks m;
	uint64_t token;

	fresh(0);
	cr_assert_eq(s_write(st, 40, 1, 0, b, 1, 0, &L, NULL), 0);
	cr_assert_eq(s_write(st, 40, 1, 2ull * MIB, b, 1, 0, &L, NULL), 0);
	cr_assert_eq(iod_store_intent_pin(st, 40, 1, 2ull * MIB, 1), 0);
	token = iod_store_intent_epoch(st);
	/* a later write to the pinned region does not unpin it */
	cr_assert_eq(s_write(st, 40, 1, 2ull * MIB, b, 1, 0, &L, NULL), 0);
	token = iod_store_intent_epoch(st);
	cr_assert_eq(iod_store_intent_clear(st, token), 0);
	m = marked();
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.regions[0], 2);
	cr_assert_eq(m.n_pinned, 1);
	/* a plain mark beside it is listed, not pinned */
	cr_assert_eq(s_write(st, 40, 1, 5ull * MIB, b, 1, 0, &L, NULL), 0);
	m = marked();
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.n_pinned, 1);
	cr_assert_eq(iod_store_intent_pin(st, 40, 1, 0, UINT64_MAX), 0);
	token = iod_store_intent_epoch(st);
	cr_assert_eq(iod_store_intent_clear(st, token), 0);
	m = marked();
	cr_assert(m.all);
	cr_assert_eq(m.n_pinned, 1);
	/* a completed resync unpins: the marks stay, plain */
	iod_store_intent_unpin_all(st);
	m = marked();
	cr_assert_not(m.all);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.regions[0], 2);
	cr_assert_eq(m.regions[1], 5);
	cr_assert_eq(m.n_pinned, 0);
	cr_assert_eq(iod_store_n_marked(st), 2);
}

/* A pin lives in memory, a mark on disk: a subfile or region that is
 * pinned but not marked is still marked by its next write or truncate,
 * so a restart (the pins gone) leaves them named.  A region only pinned
 * goes with the pin. */
Test(iod_journal, write_intent_pins_are_not_marks)
{
	static uint8_t b[MIB];
	struct marks m;

	fill(b, sizeof(b), 5);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		cr_assert_eq(s_write(st, 40, 1, 0, b, MIB, 0, &L, NULL), 0);
		cr_assert_eq(s_write(st, 40, 1, 5 * MIB, b, MIB, 0, &L, NULL),
			     0);
		clear_now();
		/* the twin missed a truncate (6 -> 5 MiB): pinned whole,
		 * and the truncate marked region 5 */
		cr_assert_eq(s_truncate(st, 40, 1, 5 * MIB, 0, NULL), 0);
		cr_assert_eq(iod_store_intent_pin(st, 40, 1, 0, UINT64_MAX),
			     0);
		/* later changes under the pin: each still journals a mark */
		cr_assert_eq(s_truncate(st, 40, 1, 1 * MIB, 0, NULL), 0);
		cr_assert_eq(s_write(st, 40, 1, 8 * MIB, b, MIB, 0, &L, NULL),
			     0);
		m = marked();
		cr_assert(m.all);
		cr_assert_eq(m.n_pinned, 1);
		restart_dead();            /* the pin is gone, the marks not */
		m = marked();
		cr_assert_not(m.all, "%s", mode_names[mode]);
		cr_assert_eq(m.n, 6, "%s: %d marked", mode_names[mode], m.n);
		cr_assert_eq(m.regions[0], 1);   /* 5 -> 1 MiB: 1..4 */
		cr_assert_eq(m.regions[3], 4);
		cr_assert_eq(m.regions[4], 5);   /* 6 -> 5 MiB */
		cr_assert_eq(m.regions[5], 8);   /* the write */
		/* a region only pinned (a missed allocation): the next
		 * write to it marks it; one unpinned goes */
		cr_assert_eq(iod_store_intent_pin(st, 40, 1, 20 * MIB, 1), 0);
		cr_assert_eq(iod_store_intent_pin(st, 40, 1, 30 * MIB, 1), 0);
		cr_assert_eq(iod_store_n_marked(st), 8);
		cr_assert_eq(s_write(st, 40, 1, 20 * MIB, b, 1, 0, &L, NULL),
			     0);
		iod_store_intent_unpin_all(st);
		m = marked();
		cr_assert_eq(m.n, 7);
		cr_assert_eq(m.regions[6], 20);
		cr_assert_eq(m.n_pinned, 0);
		cr_assert_eq(iod_store_n_marked(st), 7);
		restart_dead();
		m = marked();
		cr_assert_eq(m.n, 7, "%s: %d marked", mode_names[mode], m.n);
		cr_assert_eq(m.regions[6], 20);
	}
}

/* A subfile both marked whole (a big shrink) and pinned whole: unpinning
 * keeps the mark, touched at the unpin, so a cycle whose token came
 * before it does not clear it; one after does. */
Test(iod_journal, write_intent_unpin_keeps_a_whole_mark)
{
	uint8_t b[1] = { 1 };
	uint64_t before;
	struct marks m;

	fresh(0);
	cr_assert_eq(s_write(st, 40, 1, 0, b, 1, 0, &L, NULL), 0);
	cr_assert_eq(s_truncate(st, 40, 1, 80ull << 30, 0, NULL), 0);
	clear_now();
	cr_assert_eq(iod_store_intent_pin(st, 40, 1, 0, UINT64_MAX), 0);
	cr_assert_eq(s_truncate(st, 40, 1, 0, 0, NULL), 0);
	m = marked();
	cr_assert(m.all);
	cr_assert_eq(m.n_pinned, 1);
	cr_assert_eq(iod_store_n_marked(st), 1);
	before = iod_store_intent_epoch(st);
	iod_store_intent_unpin_all(st);
	m = marked();
	cr_assert(m.all);
	cr_assert_eq(m.n_pinned, 0);
	cr_assert_eq(iod_store_n_marked(st), 1);
	cr_assert_eq(iod_store_intent_clear(st, before), 0);
	cr_assert_eq(iod_store_n_marked(st), 1, "cleared by an older token");
	clear_now();
	cr_assert_eq(iod_store_n_marked(st), 0);
}

/* ---- sticky abort (J12): an I/O error on the journal ---- */

static bool fail_log;

static long t_pwrite(void *arg, enum jbd_io_kind kind, int fd,
		     const void *buf, size_t len, uint64_t off)
{
	(void)arg;
	if (fail_log && kind == JBD_IO_LOG)
		return -EIO;
	return pwrite(fd, buf, len, (off_t)off);
}

static int t_fsync(void *arg, enum jbd_io_kind kind, int fd)
{
	(void)arg;
	(void)kind;
	return fdatasync(fd) < 0 ? -errno : 0;
}

static long t_pread(void *arg, enum jbd_io_kind kind, int fd, void *buf,
		    size_t len, uint64_t off)
{
	(void)arg;
	(void)kind;
	return pread(fd, buf, len, (off_t)off);
}

static const struct jbd_io_ops test_io = {
	.pwrite = t_pwrite, .fsync = t_fsync, .pread = t_pread,
};

static int aborts;

static void on_abort(void *arg)
{
	(void)arg;
	aborts++;
}

Test(iod_journal, sticky_abort_refuses_writes)
{
	uint8_t a[8192], b[100];
	struct iod_store_opts o = {
		.iod_id = 1, .cluster = "test", .journal_size = 16u << 20,
		.test_io = &test_io, .on_abort = on_abort,
	};

	fill(a, sizeof(a), 11);
	fill(b, sizeof(b), 12);
	for (int mode = 0; mode < 3; mode++) {
		fresh(mode);
		iod_store_close(st);
		o.dir = datadir;
		o.journal_mode = mode;
		fail_log = false;
		aborts = 0;
		cr_assert_eq(iod_store_open(&o, &st), 0);
		cr_assert_eq(s_write(st, 60, 0, 0, a, sizeof(a), 0, &L, NULL), 0);
		fail_log = true;
		cr_assert_eq(s_write(st, 60, 0, 0, b, sizeof(b), 0, &L, NULL),
			     -EIO, "%s: the write of a failed close fails",
			     mode_names[mode]);
		cr_assert_eq(aborts, 1, "the hook runs once");
		cr_assert_eq(iod_store_aborted(st), -EIO);
		/* every later mutation is refused at once */
		cr_assert_eq(s_write(st, 61, 0, 0, b, 1, 0, &L, NULL), -EIO);
		cr_assert_eq(s_truncate(st, 60, 0, 0, 0, NULL), -EIO);
		cr_assert_eq(s_delete(st, 60, 0), -EIO);
		cr_assert_eq(s_fsync(st, 0), -EIO);
		cr_assert_eq(aborts, 1);
		/* restart and replay: what was acknowledged is there */
		fail_log = false;
		iod_store_close(st);
		st = NULL;
		cr_assert_eq(open_mode(mode, &st), 0);
		struct iod_sub_stat ss;
		uint8_t *out;

		cr_assert_eq(iod_store_read(st, 60, 0, 0, sizeof(a), &out, &ss),
			     (long)sizeof(a));
		if (mode == 0)
			cr_assert_arr_eq(out, a, sizeof(a),
					 "journal mode: nothing of the failed "
					 "write is visible");
		else
			cr_assert_arr_eq(out + sizeof(b), a + sizeof(b),
					 sizeof(a) - sizeof(b));
		free(out);
	}
}

/* mem.c's rule: a quarter of the journal for block copies waiting for log
 * space and as much for data awaiting the twin; past either the sender is
 * held, and held senders are read again once both are at half. */
Test(iod_journal, memory_bound_rule)
{
	uint64_t lim = iod_mem_limit(256ull << 20);

	cr_assert_eq(lim, 64ull << 20);
	cr_assert_eq(iod_mem_limit(16ull << 20), 4ull << 20);
	cr_assert(!iod_mem_over(0, 0, lim));
	cr_assert(!iod_mem_over(lim, lim, lim), "at the limit: not over");
	cr_assert(iod_mem_over(lim + 1, 0, lim));
	cr_assert(iod_mem_over(0, lim + 1, lim));
	cr_assert(iod_mem_may_release(lim / 2, lim / 2, lim));
	cr_assert(!iod_mem_may_release(lim / 2 + 1, 0, lim));
	cr_assert(!iod_mem_may_release(0, lim / 2 + 1, lim));
	/* between half and the limit: neither hold nor release (hysteresis) */
	cr_assert(!iod_mem_over(lim * 3 / 4, lim * 3 / 4, lim));
	cr_assert(!iod_mem_may_release(lim * 3 / 4, 0, lim));
}

/* ... and its trim: only once the copies fell well below their peak,
 * and the journal is quiet. */
Test(iod_journal, memory_trim_rule)
{
	const uint64_t M = 1ull << 20;

	cr_assert(!iod_mem_trim_due(0, 0, true));
	cr_assert(!iod_mem_trim_due(20 * M, 0, true), "a small peak: not "
		  "worth it");
	cr_assert(iod_mem_trim_due(256 * M, 64 * M, true));
	cr_assert(iod_mem_trim_due(64 * M, 0, true));
	cr_assert(!iod_mem_trim_due(256 * M, 128 * M, true), "a stream's "
		  "checkpoint: still half");
	cr_assert(!iod_mem_trim_due(64 * M, 64 * M, true));
	cr_assert(!iod_mem_trim_due(256 * M, 0, false), "the journal still "
		  "commits: its next writes would fault the pages in again");
}
