/* cases_open.c - POSIX conformance cases for open (creation flags,
 * truncation, errors, permissions) and rename (renameat2 flags, directories,
 * link counts).
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

/* ===================================================================== open */

static void open_creat(void)
{
	int fd = open("f", O_WRONLY | O_CREAT, 0644);

	pt_rc(NULL, fd);
	close(fd);
	pt_res("type=%s mode=0%03lo size=%lld nlink=%ld uid=%u gid=%u", pt_type("f"),
	       pt_mode("f"), (long long)pt_stat("f").st_size, pt_nlink("f"), pt_stat("f").st_uid,
	       pt_stat("f").st_gid);
}

static void open_creat_umask(void)
{
	int fd;

	umask(027);
	fd = open("f", O_WRONLY | O_CREAT, 0777);
	pt_rc(NULL, fd);
	close(fd);
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void open_creat_excl_eexist(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, open("f", O_WRONLY | O_CREAT | O_EXCL, 0644));
}

static void open_creat_excl_symlink(void)
{
	symlink("nowhere", "l");
	pt_rc(NULL, open("l", O_WRONLY | O_CREAT | O_EXCL, 0644));
	pt_res("nowhere=%s", pt_type("nowhere"));
}

static void open_creat_dangling_symlink(void)
{
	int fd;

	symlink("target", "l");
	fd = open("l", O_WRONLY | O_CREAT, 0640);
	pt_rc(NULL, fd);
	close(fd);
	pt_res("target=%s mode=0%03lo", pt_type("target"), pt_mode("target"));
}

static void open_creat_existing_keeps_mode(void)
{
	int fd;

	pt_mkfile("f", 0600, "abc", 3);
	fd = open("f", O_RDWR | O_CREAT, 0777);
	pt_rc(NULL, fd);
	close(fd);
	pt_res("mode=0%03lo size=%lld", pt_mode("f"), (long long)pt_stat("f").st_size);
}

static void open_trunc(void)
{
	int fd;

	pt_mkfile("f", 0644, "abcdef", 6);
	fd = open("f", O_WRONLY | O_TRUNC);
	pt_rc(NULL, fd);
	close(fd);
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void open_trunc_times(void)
{
	struct stat a, b;
	int fd;

	pt_mkfile("f", 0644, "abcdef", 6);
	a = pt_stat("f");
	pt_pause();
	fd = open("f", O_WRONLY | O_TRUNC);
	close(fd);
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void open_trunc_empty_times(void)
{
	struct stat a, b;
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	fd = open("f", O_WRONLY | O_TRUNC);
	close(fd);
	b = pt_stat("f");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void open_rdonly_trunc(void)
{
	int fd;

	pt_mkfile("f", 0644, "abcdef", 6);
	fd = open("f", O_RDONLY | O_TRUNC);
	pt_rc(NULL, fd);
	close(fd);
	pt_res("size=%lld", (long long)pt_stat("f").st_size);
}

static void open_append(void)
{
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	fd = open("f", O_WRONLY | O_APPEND);
	lseek(fd, 0, SEEK_SET);
	pt_res("write=%zd", write(fd, "XY", 2));
	pt_res("pos=%lld", (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
	pt_res("content=%s", pt_contents("f"));
}

static void open_directory_on_file(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, open("f", O_RDONLY | O_DIRECTORY));
}

static void open_directory_on_dir(void)
{
	int fd;

	mkdir("d", 0755);
	fd = open("d", O_RDONLY | O_DIRECTORY);
	pt_rc(NULL, fd);
	close(fd);
}

static void open_enoent(void)
{
	pt_rc("plain", open("missing", O_RDONLY));
	pt_rc("parent", open("nodir/f", O_RDWR | O_CREAT, 0644));
}

static void open_dir_for_write(void)
{
	mkdir("d", 0755);
	pt_rc("wronly", open("d", O_WRONLY));
	pt_rc("rdwr", open("d", O_RDWR));
	pt_rc("creat", open("d", O_RDONLY | O_CREAT, 0644));
}

static void open_name_255(void)
{
	int fd = open(pt_longname(NAME_MAX), O_WRONLY | O_CREAT, 0644);

	pt_rc(NULL, fd);
	close(fd);
	pt_res("type=%s", pt_type(pt_longname(NAME_MAX)));
}

static void open_name_256(void)
{
	pt_rc("creat", open(pt_longname(NAME_MAX + 1), O_WRONLY | O_CREAT, 0644));
	pt_rc("lookup", open(pt_longname(NAME_MAX + 1), O_RDONLY));
}

static void open_path_max(void)
{
	/* A path of PATH_MAX bytes (no room for the NUL) is too long. */
	char path[PATH_MAX + 1];

	memset(path, 'a', PATH_MAX);
	for (int i = 200; i < PATH_MAX; i += 200)
		path[i] = '/';
	path[PATH_MAX] = '\0';
	pt_rc(NULL, open(path, O_RDONLY));
}

static void open_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("component", open("f/x", O_RDONLY));
	pt_rc("trailing_slash", open("f/", O_RDONLY));
	pt_rc("creat_trailing_slash", open("new/", O_WRONLY | O_CREAT, 0644));
	pt_res("new=%s", pt_type("new"));
}

static void open_nofollow(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc("nofollow", open("l", O_RDONLY | O_NOFOLLOW));
	pt_rc("path_nofollow", open("l", O_PATH | O_NOFOLLOW));
}

static void open_symlink_loop(void)
{
	symlink("b", "a");
	symlink("a", "b");
	pt_rc(NULL, open("a", O_RDONLY));
}

static void open_excl_without_creat(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY | O_EXCL);
	pt_rc(NULL, fd);
	close(fd);
}

static void open_creat_excl_directory(void)
{
	pt_rc(NULL, open("x", O_RDONLY | O_CREAT | O_EXCL | O_DIRECTORY, 0755));
	pt_res("x=%s", pt_type("x"));
}

static void open_wrong_direction(void)
{
	char c;
	int fd;

	pt_mkfile("f", 0644, "abc", 3);
	fd = open("f", O_RDONLY);
	pt_rc("write_on_rdonly", write(fd, "x", 1));
	close(fd);
	fd = open("f", O_WRONLY);
	pt_rc("read_on_wronly", read(fd, &c, 1));
	close(fd);
}

static void open_tmpfile(void)
{
	char proc[64];
	int fd = open(".", O_RDWR | O_TMPFILE, 0600);

	pt_rc("open", fd);
	if (fd < 0)
		return;
	{
		struct stat st;

		fstat(fd, &st);
		pt_res("write=%zd nlink=%ld", write(fd, "abc", 3), (long)st.st_nlink);
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	pt_rc("linkat", linkat(AT_FDCWD, proc, AT_FDCWD, "f", AT_SYMLINK_FOLLOW));
	close(fd);
	pt_res("content=%s mode=0%03lo", pt_contents("f"), pt_mode("f"));
}

static void open_o_direct(void)
{
	int fd = open("f", O_RDWR | O_CREAT | O_DIRECT, 0644);
	void *buf = NULL;

	pt_rc("open", fd);
	if (fd < 0)
		return;
	if (posix_memalign(&buf, 4096, 4096) == 0 && buf) {
		memset(buf, 'z', 4096);
		pt_rc("write", pwrite(fd, buf, 4096, 0));
		memset(buf, 0, 4096);
		pt_rc("read", pread(fd, buf, 4096, 0));
		pt_res("match=%d", ((char *)buf)[4095] == 'z');
		free(buf);
	}
	close(fd);
}

static void nb_open_rdonly(void *arg)
{
	pt_rc(NULL, open(arg, O_RDONLY));
}

static void nb_open_wronly(void *arg)
{
	pt_rc(NULL, open(arg, O_WRONLY));
}

static void nb_open_creat(void *arg)
{
	pt_rc(NULL, open(arg, O_WRONLY | O_CREAT, 0644));
}

static void open_nobody_mode_000(void)
{
	pt_mkfile("f", 0, NULL, 0);
	pt_as_nobody(nb_open_rdonly, "f");
}

static void open_nobody_owner_mode_000(void)
{
	pt_mkfile("f", 0, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_open_rdonly, "f");
}

static void open_nobody_write_0644(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_as_nobody(nb_open_wronly, "f");
	pt_as_nobody(nb_open_rdonly, "f");
}

static void open_nobody_other_bits(void)
{
	/* Owner and group bits deny nobody nothing; only "other" counts. */
	pt_mkfile("f", 0604, NULL, 0);
	pt_as_nobody(nb_open_rdonly, "f");
	pt_as_nobody(nb_open_wronly, "f");
}

static void open_nobody_owner_bits_rule(void)
{
	/* The owner class applies even when it is more restrictive than
	 * "other". */
	pt_mkfile("f", 0066, NULL, 0);
	chown("f", PT_NOBODY, 0);
	pt_as_nobody(nb_open_rdonly, "f");
}

static void open_nobody_creat_eacces(void)
{
	pt_as_nobody(nb_open_creat, "f");
}

static void open_nobody_search_denied(void)
{
	mkdir("d", 0755);
	pt_mkfile("d/f", 0644, NULL, 0);
	chmod("d", 0700);
	pt_as_nobody(nb_open_rdonly, "d/f");
}

static void open_root_mode_000(void)
{
	int fd;

	pt_mkfile("f", 0, NULL, 0);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fd);
	close(fd);
}

/* =================================================================== rename */

static void rename_basic(void)
{
	pt_mkfile("a", 0644, "abc", 3);
	pt_rc(NULL, rename("a", "b"));
	pt_res("a=%s b=%s", pt_type("a"), pt_contents("b"));
}

static void rename_over_file(void)
{
	struct stat st;
	int fd;

	pt_mkfile("a", 0644, "new", 3);
	pt_mkfile("b", 0644, "old", 3);
	fd = open("b", O_RDONLY);
	pt_rc(NULL, rename("a", "b"));
	fstat(fd, &st);
	pt_res("a=%s b=%s replaced_nlink=%ld", pt_type("a"), pt_contents("b"), (long)st.st_nlink);
	close(fd);
}

static void rename_over_empty_dir(void)
{
	mkdir("a", 0755);
	pt_mkfile("a/f", 0644, NULL, 0);
	mkdir("b", 0755);
	pt_rc(NULL, rename("a", "b"));
	pt_res("a=%s b/f=%s", pt_type("a"), pt_type("b/f"));
}

static void rename_over_nonempty_dir(void)
{
	mkdir("a", 0755);
	mkdir("b", 0755);
	pt_mkfile("b/f", 0644, NULL, 0);
	pt_rc(NULL, rename("a", "b"));
}

static void rename_dir_over_file(void)
{
	mkdir("a", 0755);
	pt_mkfile("b", 0644, NULL, 0);
	pt_rc(NULL, rename("a", "b"));
}

static void rename_file_over_dir(void)
{
	pt_mkfile("a", 0644, NULL, 0);
	mkdir("b", 0755);
	pt_rc(NULL, rename("a", "b"));
}

static void rename_into_own_subtree(void)
{
	mkdir("a", 0755);
	mkdir("a/b", 0755);
	pt_rc("child", rename("a", "a/b/c"));
	pt_rc("self", rename("a", "a/c"));
}

static void rename_parent_onto_child(void)
{
	/* The target is a non-empty ancestor: ENOTEMPTY; an ancestor as
	 * source: EINVAL.  Linux checks EINVAL first. */
	mkdir("a", 0755);
	mkdir("a/b", 0755);
	pt_rc("ancestor_to_descendant", rename("a", "a/b"));
	pt_rc("descendant_to_ancestor", rename("a/b", "a"));
}

static void rename_noreplace_eexist(void)
{
	pt_mkfile("a", 0644, "a", 1);
	pt_mkfile("b", 0644, "b", 1);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE));
	pt_res("b=%s", pt_contents("b"));
}

static void rename_noreplace_ok(void)
{
	pt_mkfile("a", 0644, "a", 1);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE));
	pt_res("a=%s b=%s", pt_type("a"), pt_contents("b"));
}

static void rename_exchange_files(void)
{
	pt_mkfile("a", 0644, "A", 1);
	pt_mkfile("b", 0600, "B", 1);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE));
	pt_res("a=%s", pt_contents("a"));
	pt_res("a_mode=0%03lo b=%s b_mode=0%03lo", pt_mode("a"), pt_contents("b"), pt_mode("b"));
}

static void rename_exchange_file_dir(void)
{
	mkdir("p", 0755);
	mkdir("q", 0755);
	pt_mkfile("p/a", 0644, NULL, 0);
	mkdir("q/b", 0755);
	pt_rc(NULL, renameat2(AT_FDCWD, "p/a", AT_FDCWD, "q/b", RENAME_EXCHANGE));
	pt_res("p/a=%s q/b=%s p_nlink=%ld q_nlink=%ld", pt_type("p/a"), pt_type("q/b"),
	       pt_nlink("p"), pt_nlink("q"));
}

static void rename_exchange_enoent(void)
{
	pt_mkfile("a", 0644, NULL, 0);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE));
}

static void rename_exchange_noreplace_einval(void)
{
	pt_mkfile("a", 0644, NULL, 0);
	pt_mkfile("b", 0644, NULL, 0);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b",
			      RENAME_EXCHANGE | RENAME_NOREPLACE));
}

static void rename_exchange_subtree(void)
{
	mkdir("a", 0755);
	mkdir("a/b", 0755);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "a/b", RENAME_EXCHANGE));
}

static void rename_whiteout(void)
{
	struct stat st;

	pt_mkfile("a", 0644, NULL, 0);
	pt_rc(NULL, renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_WHITEOUT));
	st = pt_stat("a");
	pt_res("a=%s rdev=%u:%u b=%s", pt_type("a"), major(st.st_rdev), minor(st.st_rdev),
	       pt_type("b"));
}

static void rename_hardlinks_noop(void)
{
	pt_mkfile("a", 0644, NULL, 0);
	link("a", "b");
	pt_rc(NULL, rename("a", "b"));
	pt_res("a=%s b=%s nlink=%ld", pt_type("a"), pt_type("b"), pt_nlink("b"));
}

static void rename_self(void)
{
	pt_mkfile("a", 0644, "x", 1);
	pt_rc("file", rename("a", "a"));
	mkdir("d", 0755);
	pt_rc("dir", rename("d", "d"));
	pt_res("a=%s d=%s", pt_contents("a"), pt_type("d"));
}

static void rename_dir_nlinks(void)
{
	mkdir("p", 0755);
	mkdir("q", 0755);
	mkdir("p/d", 0755);
	pt_res("before=%ld,%ld", pt_nlink("p"), pt_nlink("q"));
	pt_rc(NULL, rename("p/d", "q/d"));
	pt_res("after=%ld,%ld d=%ld", pt_nlink("p"), pt_nlink("q"), pt_nlink("q/d"));
}

static void rename_dir_over_dir_nlinks(void)
{
	mkdir("p", 0755);
	mkdir("q", 0755);
	mkdir("p/d", 0755);
	mkdir("q/e", 0755);
	pt_res("before=%ld,%ld", pt_nlink("p"), pt_nlink("q"));
	pt_rc(NULL, rename("p/d", "q/e"));
	pt_res("after=%ld,%ld", pt_nlink("p"), pt_nlink("q"));
}

static void rename_dotdot_updated(void)
{
	mkdir("p", 0755);
	mkdir("q", 0755);
	mkdir("p/d", 0755);
	pt_rc(NULL, rename("p/d", "q/d"));
	pt_res("dotdot_is_q=%d", pt_same_inode("q/d/..", "q"));
}

static void rename_enoent(void)
{
	pt_rc("source", rename("missing", "b"));
	pt_mkfile("a", 0644, NULL, 0);
	pt_rc("dest_dir", rename("a", "nodir/b"));
}

static void rename_dot(void)
{
	mkdir("d", 0755);
	pt_rc("dot_source", rename("d/.", "x"));
	pt_rc("dot_target", rename("d", "d/."));
	pt_rc("dotdot_source", rename("d/..", "x"));
}

static void rename_enametoolong(void)
{
	pt_mkfile("a", 0644, NULL, 0);
	pt_rc("256", rename("a", pt_longname(NAME_MAX + 1)));
	pt_rc("255", rename("a", pt_longname(NAME_MAX)));
}

static void rename_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, rename("l", "m"));
	pt_res("m=%s f=%s", pt_type("m"), pt_type("f"));
}

static void rename_times(void)
{
	struct stat f0, f1, p0, p1, q0, q1;

	mkdir("p", 0755);
	mkdir("q", 0755);
	pt_mkfile("p/f", 0644, NULL, 0);
	f0 = pt_stat("p/f");
	p0 = pt_stat("p");
	q0 = pt_stat("q");
	pt_pause();
	pt_rc(NULL, rename("p/f", "q/f"));
	f1 = pt_stat("q/f");
	p1 = pt_stat("p");
	q1 = pt_stat("q");
	pt_res("file_ctime_changed=%d file_mtime_changed=%d src_mtime_changed=%d "
	       "dst_mtime_changed=%d", pt_tscmp(f0.st_ctim, f1.st_ctim) < 0,
	       pt_tscmp(f0.st_mtim, f1.st_mtim) != 0, pt_tscmp(p0.st_mtim, p1.st_mtim) < 0,
	       pt_tscmp(q0.st_mtim, q1.st_mtim) < 0);
}

static void rename_dir_trailing_slash(void)
{
	mkdir("d", 0755);
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("dir", rename("d/", "e/"));
	pt_rc("file", rename("f/", "g"));
}

static void rename_open_file_keeps_data(void)
{
	char buf[8] = "";
	int fd;

	pt_mkfile("a", 0644, "data", 4);
	fd = open("a", O_RDWR);
	rename("a", "b");
	pt_res("write=%zd", pwrite(fd, "DA", 2, 0));
	close(fd);
	pt_readfile("b", buf, 4);
	pt_res("b=%s", buf);
}

static void nb_rename(void *arg)
{
	(void)arg;
	pt_rc(NULL, rename("w/f", "w/g"));
}

static void rename_sticky_nobody(void)
{
	pt_mkdir_mode("w", 01777);
	pt_mkfile("w/f", 0666, NULL, 0);
	pt_as_nobody(nb_rename, NULL);
	pt_res("f=%s", pt_type("w/f"));
}

static void nb_rename_dir(void *arg)
{
	(void)arg;
	pt_rc("same_parent", rename("w/f", "w/g"));
	pt_rc("other_parent", rename("w/g", "w/x/g"));
}

static void rename_dir_unwritable_nobody(void)
{
	/* Moving a directory to another parent needs write access to it (its
	 * ".." changes); renaming it in place does not. */
	pt_mkdir_mode("w", 0777);
	mkdir("w/f", 0755);
	pt_mkdir_mode("w/x", 0777);
	pt_as_nobody(nb_rename_dir, NULL);
	pt_res("g=%s", pt_type("w/g"));
}

const struct pt_case pt_cases_open[] = {
	{ "open/creat", open_creat },
	{ "open/creat_umask", open_creat_umask },
	{ "open/creat_excl_eexist", open_creat_excl_eexist },
	{ "open/creat_excl_symlink", open_creat_excl_symlink },
	{ "open/creat_dangling_symlink", open_creat_dangling_symlink },
	{ "open/creat_existing_keeps_mode", open_creat_existing_keeps_mode },
	{ "open/trunc", open_trunc },
	{ "open/trunc_times", open_trunc_times },
	{ "open/trunc_empty_times", open_trunc_empty_times },
	{ "open/rdonly_trunc", open_rdonly_trunc },
	{ "open/append", open_append },
	{ "open/directory_on_file", open_directory_on_file },
	{ "open/directory_on_dir", open_directory_on_dir },
	{ "open/enoent", open_enoent },
	{ "open/dir_for_write", open_dir_for_write },
	{ "open/name_255", open_name_255 },
	{ "open/name_256", open_name_256 },
	{ "open/path_max", open_path_max },
	{ "open/enotdir", open_enotdir },
	{ "open/nofollow", open_nofollow },
	{ "open/symlink_loop", open_symlink_loop },
	{ "open/excl_without_creat", open_excl_without_creat },
	{ "open/creat_excl_directory", open_creat_excl_directory },
	{ "open/wrong_direction", open_wrong_direction },
	{ "open/tmpfile", open_tmpfile },
	{ "open/o_direct", open_o_direct },
	{ "open/nobody_mode_000", open_nobody_mode_000 },
	{ "open/nobody_owner_mode_000", open_nobody_owner_mode_000 },
	{ "open/nobody_write_0644", open_nobody_write_0644 },
	{ "open/nobody_other_bits", open_nobody_other_bits },
	{ "open/nobody_owner_bits_rule", open_nobody_owner_bits_rule },
	{ "open/nobody_creat_eacces", open_nobody_creat_eacces },
	{ "open/nobody_search_denied", open_nobody_search_denied },
	{ "open/root_mode_000", open_root_mode_000 },

	{ "rename/basic", rename_basic },
	{ "rename/over_file", rename_over_file },
	{ "rename/over_empty_dir", rename_over_empty_dir },
	{ "rename/over_nonempty_dir", rename_over_nonempty_dir },
	{ "rename/dir_over_file", rename_dir_over_file },
	{ "rename/file_over_dir", rename_file_over_dir },
	{ "rename/into_own_subtree", rename_into_own_subtree },
	{ "rename/parent_onto_child", rename_parent_onto_child },
	{ "rename/noreplace_eexist", rename_noreplace_eexist },
	{ "rename/noreplace_ok", rename_noreplace_ok },
	{ "rename/exchange_files", rename_exchange_files },
	{ "rename/exchange_file_dir", rename_exchange_file_dir },
	{ "rename/exchange_enoent", rename_exchange_enoent },
	{ "rename/exchange_noreplace_einval", rename_exchange_noreplace_einval },
	{ "rename/exchange_subtree", rename_exchange_subtree },
	{ "rename/whiteout", rename_whiteout },
	{ "rename/hardlinks_noop", rename_hardlinks_noop },
	{ "rename/self", rename_self },
	{ "rename/dir_nlinks", rename_dir_nlinks },
	{ "rename/dir_over_dir_nlinks", rename_dir_over_dir_nlinks },
	{ "rename/dotdot_updated", rename_dotdot_updated },
	{ "rename/enoent", rename_enoent },
	{ "rename/dot", rename_dot },
	{ "rename/enametoolong", rename_enametoolong },
	{ "rename/symlink", rename_symlink },
	{ "rename/times", rename_times },
	{ "rename/trailing_slash", rename_dir_trailing_slash },
	{ "rename/open_file_keeps_data", rename_open_file_keeps_data },
	{ "rename/sticky_nobody", rename_sticky_nobody },
	{ "rename/dir_unwritable_nobody", rename_dir_unwritable_nobody },
	{ NULL, NULL },
};
