/* cases_data.c - POSIX conformance cases for file data: truncate, ftruncate,
 * read/write/pread/pwrite, sync calls, copy_file_range, readdir, fallocate,
 * lseek SEEK_DATA/SEEK_HOLE, mmap and O_APPEND.
 *
 * The rules every case follows are at the top of pt.h; the helpers are in
 * pt_util.c.
 */
#include "pt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ================================================================= truncate */

static void truncate_grow(void)
{
	int fd;

	pt_mkpattern("f", 1, 1000);
	pt_rc(NULL, truncate("f", 10000));
	fd = open("f", O_RDONLY);
	pt_res("size=%lld head=%d tail_zero=%d", (long long)pt_stat("f").st_size,
	       pt_is_pattern(fd, 1, 0, 1000), pt_is_zero(fd, 1000, 9000));
	close(fd);
}

static void truncate_shrink(void)
{
	int fd;

	pt_mkpattern("f", 2, 10000);
	pt_rc(NULL, truncate("f", 1234));
	fd = open("f", O_RDONLY);
	pt_res("size=%lld head=%d", (long long)pt_stat("f").st_size, pt_is_pattern(fd, 2, 0, 1234));
	close(fd);
}

static void truncate_shrink_grow_zeroes(void)
{
	/* The bytes cut off by a shrink must not come back on a later grow,
	 * even inside the same block. */
	int fd;

	pt_mkpattern("f", 3, 8192);
	truncate("f", 1000);
	pt_rc(NULL, truncate("f", 8192));
	fd = open("f", O_RDONLY);
	pt_res("head=%d zero=%d", pt_is_pattern(fd, 3, 0, 1000), pt_is_zero(fd, 1000, 7192));
	close(fd);
}

static void truncate_negative(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, truncate("f", -1));
}

static void truncate_dir(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, truncate("d", 0));
}

static void truncate_enoent(void)
{
	pt_rc(NULL, truncate("missing", 0));
}

static void truncate_symlink_follows(void)
{
	pt_mkpattern("f", 4, 100);
	symlink("f", "l");
	pt_rc(NULL, truncate("l", 10));
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void truncate_times(void)
{
	struct stat a, b;

	pt_mkpattern("f", 5, 100);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, truncate("f", 50));
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void truncate_same_size_times(void)
{
	struct stat a, b;

	pt_mkpattern("f", 5, 100);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, truncate("f", 100));
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void truncate_big_sparse(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, truncate("f", 1LL << 40));
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void nb_truncate(void *arg)
{
	pt_rc(NULL, truncate(arg, 1));
}

static void truncate_nobody_eacces(void)
{
	pt_mkpattern("f", 6, 10);
	pt_as_nobody(nb_truncate, "f");
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void truncate_nobody_kills_suid(void)
{
	pt_mkpattern("f", 6, 10);
	chown("f", PT_NOBODY, PT_NOBODY);
	chmod("f", 06755);
	pt_as_nobody(nb_truncate, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void ftruncate_basic(void)
{
	int fd;

	pt_mkpattern("f", 7, 100);
	fd = open("f", O_RDWR);
	pt_rc("shrink", ftruncate(fd, 10));
	pt_rc("grow", ftruncate(fd, 5000));
	pt_res("size=%lld zero=%d", (long long)pt_stat("f").st_size, pt_is_zero(fd, 10, 4990));
	close(fd);
}

static void ftruncate_rdonly(void)
{
	int fd;

	pt_mkpattern("f", 7, 100);
	fd = open("f", O_RDONLY);
	pt_rc(NULL, ftruncate(fd, 10));
	close(fd);
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void ftruncate_negative(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	pt_rc(NULL, ftruncate(fd, -1));
	close(fd);
}

static void ftruncate_dir(void)
{
	int fd;

	mkdir("d", 0755);
	fd = open("d", O_RDONLY | O_DIRECTORY);
	pt_rc(NULL, ftruncate(fd, 0));
	close(fd);
}

static void ftruncate_badfd(void)
{
	pt_rc(NULL, ftruncate(-1, 0));
}

static void nb_ftruncate_open_fd(void *arg)
{
	int fd = open("f", O_RDWR);

	pt_rc("open", fd);
	pt_rc("chmod", chmod("f", 0));
	pt_rc("ftruncate_after_chmod_000", ftruncate(fd, 3));
	pt_rc("truncate_after_chmod_000", truncate("f", 2));
	close(fd);
	(void)arg;
}

static void ftruncate_nobody_fd_permission(void)
{
	/* Permission is checked at open; the fd keeps its rights. */
	pt_mkpattern("f", 8, 10);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_ftruncate_open_fd, NULL);
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

/* ======================================================================= rw */

static void rw_pwrite_hole(void)
{
	int fd = open("f", O_RDWR | O_CREAT, 0644);

	pt_res("pwrite=%zd", pwrite(fd, "z", 1, 10000));
	pt_res("size=%lld zero=%d", (long long)pt_stat("f").st_size, pt_is_zero(fd, 0, 10000));
	close(fd);
}

static void rw_read_eof(void)
{
	char buf[16];
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	fd = open("f", O_RDONLY);
	pt_res("read=%zd", read(fd, buf, sizeof(buf)));
	pt_res("read_at_eof=%zd", read(fd, buf, sizeof(buf)));
	pt_res("pread_past_eof=%zd", pread(fd, buf, sizeof(buf), 100));
	close(fd);
}

static void rw_write_times(void)
{
	struct stat a, b;
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	fd = open("f", O_WRONLY);
	pt_res("write=%zd", write(fd, "abc", 3));
	close(fd);
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void rw_write_zero_len(void)
{
	struct stat a, b;
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	a = pt_stat("f");
	pt_pause();
	fd = open("f", O_WRONLY);
	pt_res("write=%zd", write(fd, "", 0));
	close(fd);
	b = pt_stat("f");
	pt_res("mtime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0);
}

static void rw_relatime(void)
{
	/* Under relatime (the default of ext4 and tmpfs) a read updates an
	 * atime older than mtime, then not again within a day. */
	struct timespec times[2] = { { 1000000, 0 }, { 0, UTIME_OMIT } };
	struct stat a, b, c;
	char buf[4];
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	utimensat(AT_FDCWD, "f", times, 0);
	a = pt_stat("f");
	fd = open("f", O_RDONLY);
	pt_res("read=%zd", read(fd, buf, sizeof(buf)));
	close(fd);
	b = pt_stat("f");
	pt_pause();
	fd = open("f", O_RDONLY);
	pt_res("read=%zd", read(fd, buf, sizeof(buf)));
	close(fd);
	c = pt_stat("f");
	pt_res("first_read_atime_changed=%d second_read_atime_changed=%d",
	       pt_tscmp(a.st_atim, b.st_atim) < 0, pt_tscmp(b.st_atim, c.st_atim) < 0);
}

static void rw_large_readback(void)
{
	const size_t len = 3 * 1024 * 1024 + 123;
	int fd;

	pt_rc(NULL, pt_mkpattern("f", 9, len));
	fd = open("f", O_RDONLY);
	pt_res("size=%lld match=%d", (long long)pt_stat("f").st_size, pt_is_pattern(fd, 9, 0, len));
	close(fd);
}

static void rw_unaligned_overwrite(void)
{
	unsigned char buf[8192];
	int fd, ok = 1;

	pt_mkpattern("f", 10, 8192);
	fd = open("f", O_RDWR);
	pt_res("pwrite=%zd", pwrite(fd, "XYZ", 3, 4095));
	pread(fd, buf, sizeof(buf), 0);
	for (size_t i = 0; i < sizeof(buf); i++) {
		unsigned char want = pt_pat(10, i);

		if (i == 4095)
			want = 'X';
		else if (i == 4096)
			want = 'Y';
		else if (i == 4097)
			want = 'Z';
		if (buf[i] != want)
			ok = 0;
	}
	close(fd);
	pt_res("match=%d", ok);
}

static void rw_sync_paths(void)
{
	int fd = open("f", O_RDWR | O_CREAT | O_SYNC, 0644), dfd;

	pt_res("osync_write=%zd", write(fd, "abc", 3));
	pt_rc("fsync", fsync(fd));
	pt_rc("fdatasync", fdatasync(fd));
	close(fd);
	fd = open("g", O_RDWR | O_CREAT | O_DSYNC, 0644);
	pt_res("odsync_write=%zd", write(fd, "abc", 3));
	close(fd);
	dfd = open(".", O_RDONLY | O_DIRECTORY);
	pt_rc("fsync_dir", fsync(dfd));
	close(dfd);
	pt_rc("syncfs", syncfs(dfd = open(".", O_RDONLY)));
	close(dfd);
}

static void rw_bad_offsets(void)
{
	char c;
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	fd = open("f", O_RDWR);
	pt_rc("pread_negative", pread(fd, &c, 1, -1));
	pt_rc("pwrite_negative", pwrite(fd, &c, 1, -1));
	close(fd);
}

static void rw_read_dir(void)
{
	char buf[16];
	int fd;

	mkdir("d", 0755);
	fd = open("d", O_RDONLY);
	pt_rc(NULL, read(fd, buf, sizeof(buf)));
	close(fd);
}

static void rw_copy_file_range(void)
{
	int in, out;
	ssize_t n;

	pt_mkpattern("a", 11, 100000);
	in = open("a", O_RDONLY);
	out = open("b", O_WRONLY | O_CREAT, 0644);
	n = copy_file_range(in, NULL, out, NULL, 100000, 0);
	pt_rc("copy", n);
	close(out);
	out = open("b", O_RDONLY);
	pt_res("size=%lld match=%d", (long long)pt_stat("b").st_size, pt_is_pattern(out, 11, 0, 100000));
	close(in);
	close(out);
}

static void rw_statvfs_namemax(void)
{
	struct statvfs sv;

	pt_rc(NULL, statvfs(".", &sv));
	pt_res("namemax=%lu", sv.f_namemax);
}

static void readdir_many(void)
{
	char name[32];
	DIR *d;
	struct dirent *e;
	int count = 0, seen[200] = { 0 }, missing = 0, dups = 0;

	mkdir("d", 0755);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "d/file%03d", i);
		pt_mkfile(name, 0644, NULL, 0);
	}
	d = opendir("d");
	while (d && (e = readdir(d)) != NULL) {
		int i;

		count++;
		if (sscanf(e->d_name, "file%d", &i) == 1 && i >= 0 && i < 200)
			if (seen[i]++)
				dups++;
	}
	if (d)
		closedir(d);
	for (int i = 0; i < 200; i++)
		missing += !seen[i];
	pt_res("entries=%d missing=%d dups=%d", count, missing, dups);
}

static void readdir_d_type(void)
{
	DIR *d;
	struct dirent *e;
	char types[6][16] = { "" };
	const char *names[] = { "f", "d", "l", "p", "s", "c" };

	mkdir("x", 0755);
	pt_mkfile("x/f", 0644, NULL, 0);
	mkdir("x/d", 0755);
	symlink("f", "x/l");
	mkfifo("x/p", 0644);
	mknod("x/s", S_IFSOCK | 0644, 0);
	mknod("x/c", S_IFCHR | 0644, 0x103);
	d = opendir("x");
	while (d && (e = readdir(d)) != NULL)
		for (int i = 0; i < 6; i++)
			if (!strcmp(e->d_name, names[i]))
				snprintf(types[i], sizeof(types[i]), "%d", e->d_type);
	if (d)
		closedir(d);
	for (int i = 0; i < 6; i++)
		pt_res("%s=%s", names[i], types[i]);
}

static void readdir_after_unlink(void)
{
	DIR *d;
	struct dirent *e;
	int count = 0;

	mkdir("d", 0755);
	pt_mkfile("d/a", 0644, NULL, 0);
	pt_mkfile("d/b", 0644, NULL, 0);
	unlink("d/a");
	d = opendir("d");
	while (d && (e = readdir(d)) != NULL)
		count += strcmp(e->d_name, "a") == 0;
	if (d)
		closedir(d);
	pt_res("a_listed=%d", count);
}

/* ================================================================ fallocate */

static void fallocate_default(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, 0, 0, 8192));
	pt_res("size=%lld zero=%d", (long long)pt_stat("f").st_size, pt_is_zero(fd, 0, 8192));
	close(fd);
}

static void fallocate_keep_size(void)
{
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 65536));
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
	close(fd);
}

static void fallocate_middle_keeps_data(void)
{
	int fd;

	pt_mkpattern("f", 13, 10000);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, 0, 100, 20000));
	pt_res("size=%lld data=%d zero=%d", (long long)pt_stat("f").st_size,
	       pt_is_pattern(fd, 13, 0, 10000), pt_is_zero(fd, 10000, 10100));
	close(fd);
}

static void fallocate_punch(void)
{
	int fd;

	pt_mkpattern("f", 14, 12288);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096));
	pt_res("size=%lld head=%d hole=%d tail=%d", (long long)pt_stat("f").st_size,
	       pt_is_pattern(fd, 14, 0, 4096), pt_is_zero(fd, 4096, 4096),
	       pt_is_pattern(fd, 14, 8192, 4096));
	close(fd);
}

static void fallocate_punch_unaligned(void)
{
	int fd;

	pt_mkpattern("f", 15, 10000);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 5000));
	pt_res("size=%lld head=%d hole=%d tail=%d", (long long)pt_stat("f").st_size,
	       pt_is_pattern(fd, 15, 0, 100), pt_is_zero(fd, 100, 5000),
	       pt_is_pattern(fd, 15, 5100, 4900));
	close(fd);
}

static void fallocate_punch_past_eof(void)
{
	int fd;

	pt_mkpattern("f", 16, 5000);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4000, 100000));
	pt_res("size=%lld head=%d hole=%d", (long long)pt_stat("f").st_size,
	       pt_is_pattern(fd, 16, 0, 4000), pt_is_zero(fd, 4000, 1000));
	close(fd);
}

static void fallocate_punch_no_keep_size(void)
{
	int fd;

	pt_mkpattern("f", 17, 8192);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096));
	close(fd);
}

static void fallocate_zero_range(void)
{
	int fd;

	pt_mkpattern("f", 18, 12288);
	fd = open("f", O_RDWR);
	if (pt_rc(NULL, fallocate(fd, FALLOC_FL_ZERO_RANGE, 1000, 3000)) == 0)
		pt_res("zero=%d tail=%d", pt_is_zero(fd, 1000, 3000), pt_is_pattern(fd, 18, 4000, 8288));
	close(fd);
}

static void fallocate_collapse(void)
{
	int fd;

	pt_mkpattern("f", 19, 16384);
	fd = open("f", O_RDWR);
	if (pt_rc(NULL, fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 4096, 4096)) == 0)
		pt_res("size=%lld", (long long)pt_stat("f").st_size);
	close(fd);
}

static void fallocate_insert(void)
{
	int fd;

	pt_mkpattern("f", 20, 16384);
	fd = open("f", O_RDWR);
	if (pt_rc(NULL, fallocate(fd, FALLOC_FL_INSERT_RANGE, 4096, 4096)) == 0)
		pt_res("size=%lld hole=%d", (long long)pt_stat("f").st_size, pt_is_zero(fd, 4096, 4096));
	close(fd);
}

static void fallocate_bad(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc("rdonly", fallocate(fd, 0, 0, 4096));
	close(fd);
	fd = open("f", O_RDWR);
	pt_rc("len_0", fallocate(fd, 0, 0, 0));
	pt_rc("offset_negative", fallocate(fd, 0, -1, 10));
	pt_rc("bad_mode", fallocate(fd, 0x4000, 0, 10));
	close(fd);
	mkdir("d", 0755);
	fd = open("d", O_RDONLY);
	pt_rc("dir", fallocate(fd, 0, 0, 10));
	close(fd);
}

static void fallocate_append_fd(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_WRONLY | O_APPEND);
	pt_rc(NULL, fallocate(fd, 0, 0, 4096));
	close(fd);
}

/* ==================================================================== lseek */

/* A 2 MiB file with data only in [1 MiB, 1 MiB + 4 KiB). */
static int mk_sparse(void)
{
	int fd = open("f", O_RDWR | O_CREAT, 0644);
	char buf[4096];

	memset(buf, 'd', sizeof(buf));
	if (pwrite(fd, buf, sizeof(buf), 1 << 20) != (ssize_t)sizeof(buf))
		pt_res("setup=short");
	if (ftruncate(fd, 2 << 20) < 0)
		pt_res("setup=ftruncate");
	fsync(fd);
	return fd;
}

static void lseek_data_hole(void)
{
	int fd = mk_sparse();

	pt_res("data_0=%lld", (long long)lseek(fd, 0, SEEK_DATA));
	pt_res("hole_0=%lld", (long long)lseek(fd, 0, SEEK_HOLE));
	pt_res("hole_1m=%lld", (long long)lseek(fd, 1 << 20, SEEK_HOLE));
	pt_res("data_1m_100=%lld", (long long)lseek(fd, (1 << 20) + 100, SEEK_DATA));
	close(fd);
}

static void lseek_data_valid(void)
{
	/* Linux allows a file system without hole tracking to report the
	 * whole file as data (SEEK_DATA returns the offset, SEEK_HOLE the
	 * size): both answers are accepted here. */
	int fd = mk_sparse();
	off_t d = lseek(fd, 0, SEEK_DATA), h = lseek(fd, 0, SEEK_HOLE);

	pt_res("data_valid=%d hole_valid=%d", d == (1 << 20) || d == 0,
	       h == 0 || h == (2 << 20));
	close(fd);
}

static void lseek_trailing_hole(void)
{
	int fd = mk_sparse();

	pt_rc("data_in_trailing_hole", lseek(fd, (1 << 20) + 8192, SEEK_DATA));
	pt_rc("data_at_eof", lseek(fd, 2 << 20, SEEK_DATA));
	pt_rc("hole_at_eof", lseek(fd, 2 << 20, SEEK_HOLE));
	pt_res("hole_in_trailing_hole=%lld", (long long)lseek(fd, (1 << 20) + 8192, SEEK_HOLE));
	close(fd);
}

static void lseek_dense(void)
{
	int fd;

	pt_mkpattern("f", 21, 8192);
	fd = open("f", O_RDONLY);
	pt_res("data_100=%lld hole_0=%lld", (long long)lseek(fd, 100, SEEK_DATA),
	       (long long)lseek(fd, 0, SEEK_HOLE));
	close(fd);
}

static void lseek_empty(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc("data", lseek(fd, 0, SEEK_DATA));
	pt_rc("hole", lseek(fd, 0, SEEK_HOLE));
	close(fd);
}

static void lseek_after_punch(void)
{
	int fd;

	pt_mkpattern("f", 22, 3 * 65536);
	fd = open("f", O_RDWR);
	fsync(fd);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 65536) < 0)
		pt_res("punch=%s", pt_errname(errno));
	pt_res("hole_0=%lld data_64k=%lld", (long long)lseek(fd, 0, SEEK_HOLE),
	       (long long)lseek(fd, 65536, SEEK_DATA));
	close(fd);
}

static void lseek_basic(void)
{
	int fd;

	pt_mkpattern("f", 23, 100);
	fd = open("f", O_RDWR);
	pt_res("end_minus_10=%lld", (long long)lseek(fd, -10, SEEK_END));
	pt_res("cur_plus_5=%lld", (long long)lseek(fd, 5, SEEK_CUR));
	pt_rc("set_negative", lseek(fd, -1, SEEK_SET));
	pt_rc("end_too_negative", lseek(fd, -101, SEEK_END));
	pt_rc("bad_whence", lseek(fd, 0, 99));
	pt_res("far=%lld", (long long)lseek(fd, 1LL << 40, SEEK_SET));
	close(fd);
}

static void lseek_write_past_eof(void)
{
	int fd;

	pt_mkpattern("f", 24, 10);
	fd = open("f", O_RDWR);
	lseek(fd, 1 << 20, SEEK_SET);
	pt_res("write=%zd", write(fd, "end", 3));
	pt_res("size=%lld gap_zero=%d", (long long)pt_stat("f").st_size,
	       pt_is_zero(fd, 10, (1 << 20) - 10));
	close(fd);
}

static void lseek_pipe(void)
{
	int p[2];

	if (pipe(p) < 0)
		return;
	pt_rc(NULL, lseek(p[0], 0, SEEK_SET));
	close(p[0]);
	close(p[1]);
}

/* ===================================================================== mmap */

static void mmap_shared_write_msync(void)
{
	char *map;
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	ftruncate(fd, 8192);
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	for (size_t i = 0; i < 8192; i++)
		map[i] = (char)pt_pat(25, i);
	pt_rc("msync", msync(map, 8192, MS_SYNC));
	pt_res("via_read=%d", pt_is_pattern(fd, 25, 0, 8192));
	munmap(map, 8192);
	close(fd);
}

static void mmap_reopen_after_unmap(void)
{
	char *map;
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	ftruncate(fd, 5000);
	map = mmap(NULL, 5000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		return;
	}
	for (size_t i = 0; i < 5000; i++)
		map[i] = (char)pt_pat(26, i);
	munmap(map, 5000);
	fd = open("f", O_RDONLY);
	pt_res("size=%lld match=%d", (long long)pt_stat("f").st_size, pt_is_pattern(fd, 26, 0, 5000));
	close(fd);
}

static void mmap_sees_write(void)
{
	char *map;
	int fd;

	pt_mkpattern("f", 27, 4096);
	fd = open("f", O_RDWR);
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	pwrite(fd, "WXYZ", 4, 1000);
	pt_res("seen=%d", !memcmp(map + 1000, "WXYZ", 4));
	munmap(map, 4096);
	close(fd);
}

static void mmap_private_not_written(void)
{
	char *map;
	int fd;

	pt_mkpattern("f", 28, 4096);
	fd = open("f", O_RDWR);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	memset(map, 'P', 100);
	msync(map, 4096, MS_SYNC);
	pt_res("file_unchanged=%d", pt_is_pattern(fd, 28, 0, 4096));
	munmap(map, 4096);
	close(fd);
}

static void mmap_sigbus(void)
{
	int status, fd;
	pid_t pid;
	char *map;

	pt_mkpattern("f", 29, 100);
	fd = open("f", O_RDWR);
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	pid = fork();
	if (pid == 0) {
		volatile char c;

		/* The default action, even under a sanitizer that catches it. */
		signal(SIGBUS, SIG_DFL);
		c = map[4096 + 10];

		(void)c;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	pt_res("beyond_eof_page=%s", WIFSIGNALED(status) ? (WTERMSIG(status) == SIGBUS ?
	       "SIGBUS" : "other_signal") : "no_signal");
	pt_res("tail_of_last_page_zero=%d", pt_allzero(map + 100, 4096 - 100));
	munmap(map, 8192);
	close(fd);
}

static void mmap_rdonly_fd_shared_write(void)
{
	void *map;
	int fd;

	pt_mkpattern("f", 30, 4096);
	fd = open("f", O_RDONLY);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	pt_rc("shared_write", map == MAP_FAILED ? -1 : 0);
	if (map != MAP_FAILED)
		munmap(map, 4096);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	pt_rc("private_write", map == MAP_FAILED ? -1 : 0);
	if (map != MAP_FAILED)
		munmap(map, 4096);
	close(fd);
}

static void mmap_mtime(void)
{
	struct stat a, b;
	char *map;
	int fd;

	pt_mkpattern("f", 31, 4096);
	fd = open("f", O_RDWR);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	a = pt_stat("f");
	pt_pause();
	map[0] = 'M';
	msync(map, 4096, MS_SYNC);
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
	munmap(map, 4096);
	close(fd);
}

static void mmap_truncate_shrink_grow(void)
{
	char *map;
	int fd;

	pt_mkpattern("f", 32, 8192);
	fd = open("f", O_RDWR);
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
		close(fd);
		return;
	}
	ftruncate(fd, 1000);
	ftruncate(fd, 8192);
	pt_res("map_zero=%d file_zero=%d", pt_allzero(map + 1000, 7192), pt_is_zero(fd, 1000, 7192));
	munmap(map, 8192);
	close(fd);
}

/* =================================================================== append */

static void append_two_fds(void)
{
	char buf[64] = "";
	int a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_WRONLY | O_APPEND);
	b = open("f", O_WRONLY | O_APPEND);
	write(a, "aa", 2);
	write(b, "bbb", 3);
	write(a, "c", 1);
	write(b, "dd", 2);
	close(a);
	close(b);
	pt_readfile("f", buf, sizeof(buf) - 1);
	pt_res("content=%s", buf);
}

static void append_vs_plain_fd(void)
{
	char buf[64] = "";
	int a, b;

	pt_mkfile("f", 0644, "0123456789", 10);
	a = open("f", O_WRONLY | O_APPEND);
	b = open("f", O_WRONLY);
	write(b, "XY", 2);           /* overwrites at 0 */
	write(a, "end", 3);          /* appends */
	close(a);
	close(b);
	pt_readfile("f", buf, sizeof(buf) - 1);
	pt_res("content=%s", buf);
}

static void append_processes(void)
{
	enum { RECORDS = 500, RECLEN = 100 };
	pid_t pids[2];
	char *buf;
	long n;
	int good[2] = { 0, 0 }, bad = 0;

	pt_mkfile("f", 0644, NULL, 0);
	for (int p = 0; p < 2; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			char rec[RECLEN];
			int fd = open("f", O_WRONLY | O_APPEND);

			memset(rec, 'A' + p, RECLEN - 1);
			rec[RECLEN - 1] = '\n';
			for (int i = 0; i < RECORDS; i++)
				if (write(fd, rec, RECLEN) != RECLEN)
					_exit(1);
			_exit(0);
		}
	}
	waitpid(pids[0], NULL, 0);
	waitpid(pids[1], NULL, 0);
	buf = malloc(2 * RECORDS * RECLEN + 1);
	n = pt_readfile("f", buf, 2 * RECORDS * RECLEN + 1);
	for (long off = 0; off + RECLEN <= n; off += RECLEN) {
		char c = buf[off];
		int ok = (c == 'A' || c == 'B') && buf[off + RECLEN - 1] == '\n';

		for (int i = 1; ok && i < RECLEN - 1; i++)
			ok = buf[off + i] == c;
		if (ok)
			good[c - 'A']++;
		else
			bad++;
	}
	free(buf);
	pt_res("size=%ld a=%d b=%d torn=%d", n, good[0], good[1], bad);
}

static void append_pwrite(void)
{
	char buf[64] = "";
	int fd;

	pt_mkfile("f", 0644, "0123456789", 10);
	fd = open("f", O_WRONLY | O_APPEND);
	/* Linux appends even with an explicit offset (documented bug). */
	pt_res("pwrite=%zd", pwrite(fd, "XY", 2, 0));
	close(fd);
	pt_readfile("f", buf, sizeof(buf) - 1);
	pt_res("content=%s", buf);
}

static void append_clear_flag(void)
{
	char buf[64] = "";
	int fd;

	pt_mkfile("f", 0644, "0123456789", 10);
	fd = open("f", O_WRONLY | O_APPEND);
	pt_rc("setfl", fcntl(fd, F_SETFL, 0));
	lseek(fd, 0, SEEK_SET);
	write(fd, "XY", 2);
	close(fd);
	pt_readfile("f", buf, sizeof(buf) - 1);
	pt_res("content=%s", buf);
}

static void append_read_position(void)
{
	char buf[8] = "";
	int fd;

	pt_mkfile("f", 0644, "0123456789", 10);
	fd = open("f", O_RDWR | O_APPEND);
	lseek(fd, 2, SEEK_SET);
	pt_res("read=%zd", read(fd, buf, 3));
	pt_res("data=%s", buf);
	write(fd, "Z", 1);
	pt_res("pos_after_write=%lld", (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
}

const struct pt_case pt_cases_data[] = {
	{ "truncate/grow", truncate_grow },
	{ "truncate/shrink", truncate_shrink },
	{ "truncate/shrink_grow_zeroes", truncate_shrink_grow_zeroes },
	{ "truncate/negative", truncate_negative },
	{ "truncate/dir", truncate_dir },
	{ "truncate/enoent", truncate_enoent },
	{ "truncate/symlink_follows", truncate_symlink_follows },
	{ "truncate/times", truncate_times },
	{ "truncate/same_size_times", truncate_same_size_times },
	{ "truncate/big_sparse", truncate_big_sparse },
	{ "truncate/nobody_eacces", truncate_nobody_eacces },
	{ "truncate/nobody_kills_suid", truncate_nobody_kills_suid },

	{ "ftruncate/basic", ftruncate_basic },
	{ "ftruncate/rdonly", ftruncate_rdonly },
	{ "ftruncate/negative", ftruncate_negative },
	{ "ftruncate/dir", ftruncate_dir },
	{ "ftruncate/badfd", ftruncate_badfd },
	{ "ftruncate/nobody_fd_permission", ftruncate_nobody_fd_permission },

	{ "rw/pwrite_hole", rw_pwrite_hole },
	{ "rw/read_eof", rw_read_eof },
	{ "rw/write_times", rw_write_times },
	{ "rw/write_zero_len", rw_write_zero_len },
	{ "rw/relatime", rw_relatime },
	{ "rw/large_readback", rw_large_readback },
	{ "rw/unaligned_overwrite", rw_unaligned_overwrite },
	{ "rw/sync_paths", rw_sync_paths },
	{ "rw/bad_offsets", rw_bad_offsets },
	{ "rw/read_dir", rw_read_dir },
	{ "rw/copy_file_range", rw_copy_file_range },
	{ "rw/statvfs_namemax", rw_statvfs_namemax },

	{ "readdir/many", readdir_many },
	{ "readdir/d_type", readdir_d_type },
	{ "readdir/after_unlink", readdir_after_unlink },

	{ "fallocate/default", fallocate_default },
	{ "fallocate/keep_size", fallocate_keep_size },
	{ "fallocate/middle_keeps_data", fallocate_middle_keeps_data },
	{ "fallocate/punch", fallocate_punch },
	{ "fallocate/punch_unaligned", fallocate_punch_unaligned },
	{ "fallocate/punch_past_eof", fallocate_punch_past_eof },
	{ "fallocate/punch_no_keep_size", fallocate_punch_no_keep_size },
	{ "fallocate/zero_range", fallocate_zero_range },
	{ "fallocate/collapse", fallocate_collapse },
	{ "fallocate/insert", fallocate_insert },
	{ "fallocate/bad", fallocate_bad },
	{ "fallocate/append_fd", fallocate_append_fd },

	{ "lseek/data_hole", lseek_data_hole },
	{ "lseek/data_valid", lseek_data_valid },
	{ "lseek/trailing_hole", lseek_trailing_hole },
	{ "lseek/dense", lseek_dense },
	{ "lseek/empty", lseek_empty },
	{ "lseek/after_punch", lseek_after_punch },
	{ "lseek/basic", lseek_basic },
	{ "lseek/write_past_eof", lseek_write_past_eof },
	{ "lseek/pipe", lseek_pipe },

	{ "mmap/shared_write_msync", mmap_shared_write_msync },
	{ "mmap/reopen_after_unmap", mmap_reopen_after_unmap },
	{ "mmap/sees_write", mmap_sees_write },
	{ "mmap/private_not_written", mmap_private_not_written },
	{ "mmap/sigbus", mmap_sigbus },
	{ "mmap/rdonly_fd_shared_write", mmap_rdonly_fd_shared_write },
	{ "mmap/mtime", mmap_mtime },
	{ "mmap/truncate_shrink_grow", mmap_truncate_shrink_grow },

	{ "append/two_fds", append_two_fds },
	{ "append/vs_plain_fd", append_vs_plain_fd },
	{ "append/processes", append_processes },
	{ "append/pwrite", append_pwrite },
	{ "append/clear_flag", append_clear_flag },
	{ "append/read_position", append_read_position },
	{ NULL, NULL },
};
