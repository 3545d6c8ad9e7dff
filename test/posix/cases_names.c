/* cases_names.c - POSIX conformance cases for the name space: link, mkdir,
 * mkfifo, mknod (fifos, sockets, devices), rmdir, symlink, unlink (sticky
 * directories included).
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

/* ===================================================================== link */

static void link_basic(void)
{
	pt_mkfile("f", 0644, "abc", 3);
	pt_rc(NULL, link("f", "g"));
	pt_res("nlink=%ld same_inode=%d content=%s", pt_nlink("f"), pt_same_inode("f", "g"),
	       pt_contents("g"));
}

static void link_eexist(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_mkfile("g", 0644, NULL, 0);
	pt_rc(NULL, link("f", "g"));
	pt_res("nlink=%ld", pt_nlink("f"));
}

static void link_dir_eperm(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, link("d", "e"));
}

static void link_enoent_source(void)
{
	pt_rc(NULL, link("missing", "g"));
}

static void link_enoent_dest_dir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, link("f", "nodir/g"));
}

static void link_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, link("f", "f/g"));
}

static void link_across_dirs(void)
{
	mkdir("a", 0755);
	mkdir("b", 0755);
	pt_mkfile("a/f", 0644, "xy", 2);
	pt_rc(NULL, link("a/f", "b/g"));
	pt_res("nlink=%ld content=%s", pt_nlink("b/g"), pt_contents("b/g"));
}

static void link_symlink_nofollow(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, linkat(AT_FDCWD, "l", AT_FDCWD, "h", 0));
	pt_res("type=%s nlink_link=%ld nlink_target=%ld", pt_type("h"), pt_nlink("l"),
	       pt_nlink("f"));
}

static void link_symlink_follow(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, linkat(AT_FDCWD, "l", AT_FDCWD, "h", AT_SYMLINK_FOLLOW));
	pt_res("type=%s nlink_target=%ld", pt_type("h"), pt_nlink("f"));
}

static void link_ctime(void)
{
	struct stat a, b, pa, pb;

	pt_mkfile("f", 0644, NULL, 0);
	mkdir("d", 0755);
	a = pt_stat("f");
	pa = pt_stat("d");
	pt_pause();
	pt_rc(NULL, link("f", "d/g"));
	b = pt_stat("f");
	pb = pt_stat("d");
	pt_res("ctime_changed=%d parent_mtime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0,
	       pt_tscmp(pa.st_mtim, pb.st_mtim) < 0);
}

static void link_unlink_one(void)
{
	pt_mkfile("f", 0644, "abc", 3);
	link("f", "g");
	pt_rc(NULL, unlink("f"));
	pt_res("nlink=%ld content=%s", pt_nlink("g"), pt_contents("g"));
}

/* The other name of a file whose attributes this mount set a moment ago
 * (a chmod's answer is cached) shows the unlink's new nlink and ctime. */
static void link_unlink_other_name(void)
{
	struct stat a, b;

	pt_mkfile("f", 0644, "abc", 3);
	link("f", "g");
	chmod("f", 0600);
	a = pt_stat("f");
	pt_rc(NULL, unlink("g"));
	b = pt_stat("f");
	pt_res("nlink_before=%ld nlink=%ld ctime_changed=%d", (long)a.st_nlink,
	       (long)b.st_nlink, pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void link_enametoolong(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("255", link("f", pt_longname(NAME_MAX)));
	pt_rc("256", link("f", pt_longname(NAME_MAX + 1)));
}

static void link_fifo(void)
{
	mkfifo("p", 0644);
	pt_rc(NULL, link("p", "q"));
	pt_res("type=%s nlink=%ld", pt_type("q"), pt_nlink("p"));
}

static void link_special(void)
{
	/* Any non-directory may be linked: sockets and devices too. */
	mknod("s", S_IFSOCK | 0644, 0);
	mknod("c", S_IFCHR | 0644, makedev(1, 3));
	pt_rc("sock", link("s", "s2"));
	pt_rc("chr", link("c", "c2"));
	pt_res("sock_nlink=%ld chr_type=%s", pt_nlink("s"), pt_type("c2"));
}

static void nb_link(void *arg)
{
	(void)arg;
	pt_rc(NULL, link("f", "w/g"));
}

static void link_nobody_protected(void)
{
	/* fs.protected_hardlinks: a user may not link a file he neither owns
	 * nor may read and write.  The outcome depends on that sysctl, which
	 * is the same for the oracle and the target on one host. */
	pt_mkfile("f", 0600, NULL, 0);
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_link, NULL);
}

static void link_nlink_max_dir(void)
{
	/* Links of a file from 10 directories. */
	char name[32];
	int bad = 0;

	pt_mkfile("f", 0644, NULL, 0);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		mkdir(name, 0755);
		snprintf(name, sizeof(name), "d%d/f", i);
		if (link("f", name) < 0)
			bad++;
	}
	pt_res("failed=%d nlink=%ld", bad, pt_nlink("f"));
}

/* ==================================================================== mkdir */

static void mkdir_basic(void)
{
	pt_rc(NULL, mkdir("d", 0755));
	pt_res("type=%s mode=0%03lo nlink=%ld", pt_type("d"), pt_mode("d"), pt_nlink("d"));
}

static void mkdir_umask(void)
{
	umask(027);
	pt_rc(NULL, mkdir("d", 0777));
	pt_res("mode=0%03lo", pt_mode("d"));
}

static void mkdir_special_bits(void)
{
	umask(0);
	pt_rc(NULL, mkdir("d", 07777));
	pt_res("mode=0%03lo", pt_mode("d"));
}

static void mkdir_eexist_dir(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, mkdir("d", 0755));
}

static void mkdir_eexist_file(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, mkdir("f", 0755));
}

static void mkdir_eexist_dangling_symlink(void)
{
	symlink("nowhere", "l");
	pt_rc(NULL, mkdir("l", 0755));
	pt_res("nowhere=%s", pt_type("nowhere"));
}

static void mkdir_enoent(void)
{
	pt_rc(NULL, mkdir("nodir/d", 0755));
}

static void mkdir_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, mkdir("f/d", 0755));
}

static void mkdir_parent_nlink(void)
{
	mkdir("p", 0755);
	pt_res("before=%ld", pt_nlink("p"));
	mkdir("p/a", 0755);
	mkdir("p/b", 0755);
	pt_mkfile("p/f", 0644, NULL, 0);
	pt_res("after=%ld", pt_nlink("p"));
}

static void mkdir_name_255(void)
{
	pt_rc(NULL, mkdir(pt_longname(NAME_MAX), 0755));
	pt_res("type=%s", pt_type(pt_longname(NAME_MAX)));
}

static void mkdir_name_256(void)
{
	pt_rc(NULL, mkdir(pt_longname(NAME_MAX + 1), 0755));
}

static void mkdir_parent_times(void)
{
	struct stat a, b;

	mkdir("p", 0755);
	a = pt_stat("p");
	pt_pause();
	pt_rc(NULL, mkdir("p/d", 0755));
	b = pt_stat("p");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void mkdir_trailing_slash(void)
{
	pt_rc(NULL, mkdir("d/", 0755));
	pt_res("type=%s", pt_type("d"));
}

static void mkdir_empty_readdir(void)
{
	DIR *d;
	struct dirent *e;
	int dot = 0, dotdot = 0, other = 0;

	mkdir("d", 0755);
	d = opendir("d");
	while (d && (e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, "."))
			dot++;
		else if (!strcmp(e->d_name, ".."))
			dotdot++;
		else
			other++;
	}
	if (d)
		closedir(d);
	pt_res("dot=%d dotdot=%d other=%d", dot, dotdot, other);
}

static void nb_mkdir(void *arg)
{
	pt_rc(NULL, mkdir(arg, 0755));
}

static void mkdir_nobody_eacces(void)
{
	pt_as_nobody(nb_mkdir, "d");
}

static void mkdir_nobody_owner(void)
{
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_mkdir, "w/d");
	pt_res("uid=%u gid=%u", pt_stat("w/d").st_uid, pt_stat("w/d").st_gid);
}

/* =================================================================== mkfifo */

static void mkfifo_basic(void)
{
	struct stat st;

	pt_rc(NULL, mkfifo("p", 0644));
	st = pt_stat("p");
	pt_res("type=%s mode=0%03lo size=%lld nlink=%ld", pt_type("p"), pt_mode("p"),
	       (long long)st.st_size, (long)st.st_nlink);
}

static void mkfifo_eexist(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, mkfifo("f", 0644));
}

static void mkfifo_enoent(void)
{
	pt_rc(NULL, mkfifo("nodir/p", 0644));
}

static void mkfifo_enxio(void)
{
	int rfd, wfd;

	mkfifo("p", 0644);
	wfd = open("p", O_WRONLY | O_NONBLOCK);
	pt_rc("write_no_reader", wfd);
	if (wfd >= 0)
		close(wfd);
	rfd = open("p", O_RDONLY | O_NONBLOCK);
	pt_rc("read_nonblock", rfd);
	wfd = open("p", O_WRONLY | O_NONBLOCK);
	pt_rc("write_with_reader", wfd);
	if (rfd >= 0)
		close(rfd);
	if (wfd >= 0)
		close(wfd);
}

static void mkfifo_data(void)
{
	char buf[16] = "";
	pid_t pid;
	int fd;
	ssize_t n;

	mkfifo("p", 0644);
	pid = fork();
	if (pid == 0) {
		fd = open("p", O_WRONLY);
		n = write(fd, "hello", 5);
		_exit(n == 5 ? 0 : 1);
	}
	fd = open("p", O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	waitpid(pid, NULL, 0);
	pt_res("read=%zd data=%s", n, n > 0 ? buf : "");
}

static void nb_mkfifo(void *arg)
{
	pt_rc(NULL, mkfifo(arg, 0644));
}

static void mkfifo_nobody(void)
{
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_mkfifo, "p");
	pt_as_nobody(nb_mkfifo, "w/p");
}

static void mkfifo_umask(void)
{
	umask(077);
	pt_rc(NULL, mkfifo("p", 0666));
	pt_res("mode=0%03lo", pt_mode("p"));
}

/* ==================================================================== mknod */

static void mknod_fifo(void)
{
	pt_rc(NULL, mknod("p", S_IFIFO | 0640, 0));
	pt_res("type=%s mode=0%03lo", pt_type("p"), pt_mode("p"));
}

static void mknod_sock(void)
{
	pt_rc(NULL, mknod("s", S_IFSOCK | 0640, 0));
	pt_res("type=%s mode=0%03lo", pt_type("s"), pt_mode("s"));
}

static void mknod_chr(void)
{
	struct stat st;

	pt_rc(NULL, mknod("c", S_IFCHR | 0644, makedev(1, 3)));
	st = pt_stat("c");
	pt_res("type=%s rdev=%u:%u", pt_type("c"), major(st.st_rdev), minor(st.st_rdev));
}

static void mknod_blk(void)
{
	struct stat st;

	pt_rc(NULL, mknod("b", S_IFBLK | 0600, makedev(7, 200)));
	st = pt_stat("b");
	pt_res("type=%s rdev=%u:%u mode=0%03lo", pt_type("b"), major(st.st_rdev),
	       minor(st.st_rdev), pt_mode("b"));
}

static void mknod_chr_big_minor(void)
{
	struct stat st;

	pt_rc(NULL, mknod("c", S_IFCHR | 0600, makedev(300, 70000)));
	st = pt_stat("c");
	pt_res("rdev=%u:%u", major(st.st_rdev), minor(st.st_rdev));
}

static void mknod_reg(void)
{
	pt_rc("typed", mknod("f", S_IFREG | 0640, 0));
	pt_rc("untyped", mknod("g", 0640, 0));
	pt_res("f=%s g=%s size=%lld", pt_type("f"), pt_type("g"), (long long)pt_stat("f").st_size);
}

static void mknod_dir_eperm(void)
{
	pt_rc(NULL, mknod("d", S_IFDIR | 0755, 0));
}

static void mknod_bad_type(void)
{
	pt_rc(NULL, mknod("x", 0170000 | 0644, 0));
}

static void mknod_eexist(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, mknod("f", S_IFIFO | 0644, 0));
}

static void nb_mknod_chr(void *arg)
{
	pt_rc(NULL, mknod(arg, S_IFCHR | 0644, makedev(1, 3)));
}

static void mknod_nobody_chr(void)
{
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_mknod_chr, "w/c");
}

static void nb_mknod_fifo(void *arg)
{
	pt_rc(NULL, mknod(arg, S_IFIFO | 0644, 0));
}

static void mknod_nobody_fifo(void)
{
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_mknod_fifo, "w/p");
	pt_res("uid=%u", pt_stat("w/p").st_uid);
}

static void mknod_chr_open(void)
{
	int fd;

	/* Opening a device node is served by the kernel of the client; it
	 * fails with EACCES on a nodev mount. */
	mknod("null", S_IFCHR | 0666, makedev(1, 3));
	fd = open("null", O_WRONLY);
	pt_rc("open", fd);
	if (fd >= 0) {
		pt_res("write=%zd", write(fd, "abc", 3));
		close(fd);
	}
}

static void mknod_bind_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "sock" };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	pt_rc("bind", bind(s, (struct sockaddr *)&sa, sizeof(sa)));
	pt_res("type=%s", pt_type("sock"));
	pt_rc("bind_again", bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&sa,
				 sizeof(sa)));
	close(s);
}

static void mknod_socket_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "sock" };
	int s = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);

	bind(s, (struct sockaddr *)&sa, sizeof(sa));
	listen(s, 1);
	pt_rc("connect", connect(c, (struct sockaddr *)&sa, sizeof(sa)));
	close(s);
	close(c);
}

/* ==================================================================== rmdir */

static void rmdir_basic(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, rmdir("d"));
	pt_res("d=%s", pt_type("d"));
}

/* Read d to its end and close it (NULL: nothing). */
static void read_listing(DIR *d)
{
	if (!d)
		return;
	while (readdir(d))
		;
	closedir(d);
}

/* A directory listed a moment ago (its attributes came with its parent's
 * listing and its own), removed while open: fstat of the open descriptor
 * shows nlink 0, and the parent's nlink drops. */
static void rmdir_open_fstat(void)
{
	struct stat a, b;
	int fd;

	mkdir("p", 0755);
	mkdir("p/d", 0755);
	read_listing(opendir("p"));
	fd = open("p/d", O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		pt_res("open=%s", pt_errname(errno));
		return;
	}
	read_listing(fdopendir(dup(fd)));
	fstat(fd, &a);
	pt_rc(NULL, rmdir("p/d"));
	fstat(fd, &b);
	close(fd);
	pt_res("nlink_before=%ld nlink=%ld parent_nlink=%ld", (long)a.st_nlink,
	       (long)b.st_nlink, pt_nlink("p"));
}

static void rmdir_enotempty(void)
{
	mkdir("d", 0755);
	pt_mkfile("d/f", 0644, NULL, 0);
	pt_rc(NULL, rmdir("d"));
}

static void rmdir_enotempty_subdir(void)
{
	mkdir("d", 0755);
	mkdir("d/e", 0755);
	pt_rc(NULL, rmdir("d"));
}

static void rmdir_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("file", rmdir("f"));
	mkdir("d", 0755);
	symlink("d", "l");
	pt_rc("symlink_to_dir", rmdir("l"));
}

static void rmdir_dot(void)
{
	mkdir("d", 0755);
	pt_rc("dot", rmdir("d/."));
	pt_rc("dotdot", rmdir("d/.."));
	pt_rc("cwd_dot", rmdir("."));
}

static void rmdir_enoent(void)
{
	pt_rc(NULL, rmdir("missing"));
}

static void rmdir_parent_nlink(void)
{
	mkdir("p", 0755);
	mkdir("p/d", 0755);
	pt_res("before=%ld", pt_nlink("p"));
	pt_rc(NULL, rmdir("p/d"));
	pt_res("after=%ld", pt_nlink("p"));
}

static void rmdir_open_dir(void)
{
	struct stat st;
	int fd, entries = 0;
	DIR *d;
	struct dirent *e;

	mkdir("d", 0755);
	fd = open("d", O_RDONLY | O_DIRECTORY);
	pt_rc(NULL, rmdir("d"));
	pt_rc("fstat", fstat(fd, &st));
	pt_res("nlink=%ld", (long)st.st_nlink);
	d = fdopendir(fd);
	while (d && (e = readdir(d)) != NULL)
		entries++;
	pt_res("entries=%d", entries);
	pt_rc("creat_inside", openat(fd, "x", O_WRONLY | O_CREAT, 0644));
	if (d)
		closedir(d);
}

static void rmdir_trailing_slash(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, rmdir("d/"));
}

static void nb_rmdir(void *arg)
{
	pt_rc(NULL, rmdir(arg));
}

static void rmdir_sticky_nobody(void)
{
	pt_mkdir_mode("w", 01777);
	mkdir("w/d", 0777);
	pt_as_nobody(nb_rmdir, "w/d");
	pt_res("d=%s", pt_type("w/d"));
}

/* ================================================================== symlink */

static void symlink_basic(void)
{
	char buf[64];
	ssize_t n;

	pt_rc(NULL, symlink("some/target", "l"));
	n = readlink("l", buf, sizeof(buf));
	pt_res("readlink=%zd content=%.*s size=%lld mode=0%03lo", n, n > 0 ? (int)n : 0, buf,
	       (long long)pt_stat("l").st_size, pt_mode("l"));
}

static void symlink_len(size_t len)
{
	char *target = malloc(len + 1), *buf = malloc(PATH_MAX + 1);
	ssize_t n;

	if (!target || !buf)
		goto out;
	/* Components of 100 bytes so that no single name exceeds NAME_MAX. */
	memset(target, 'x', len);
	for (size_t i = 100; i < len; i += 101)
		target[i] = '/';
	target[len] = '\0';
	if (pt_rc(NULL, symlink(target, "l")) == 0) {
		n = readlink("l", buf, PATH_MAX + 1);
		pt_res("readlink=%zd same=%d size=%lld", n,
		       n == (ssize_t)len && !memcmp(buf, target, len),
		       (long long)pt_stat("l").st_size);
	}
out:
	free(target);
	free(buf);
}

static void symlink_4095(void) { symlink_len(PATH_MAX - 1); }
static void symlink_4096(void) { symlink_len(PATH_MAX); }
static void symlink_60(void) { symlink_len(60); }      /* ext4 fast symlink limit */
static void symlink_1000(void) { symlink_len(1000); }

static void symlink_eexist(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("file", symlink("x", "f"));
	symlink("x", "l");
	pt_rc("symlink", symlink("y", "l"));
}

static void symlink_enoent(void)
{
	pt_rc("parent", symlink("x", "nodir/l"));
	pt_rc("empty_target", symlink("", "l"));
}

static void symlink_dangling(void)
{
	struct stat st;

	symlink("nowhere", "l");
	pt_rc("stat", stat("l", &st));
	pt_rc("lstat", lstat("l", &st));
}

static void symlink_readlink_einval(void)
{
	char buf[16];

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("file", readlink("f", buf, sizeof(buf)));
	mkdir("d", 0755);
	pt_rc("dir", readlink("d", buf, sizeof(buf)));
}

static void symlink_readlink_short(void)
{
	char buf[16] = "";
	ssize_t n;

	symlink("abcdefgh", "l");
	n = readlink("l", buf, 3);
	pt_res("readlink=%zd content=%.3s", n, buf);
}

static void symlink_loop(void)
{
	struct stat st;

	symlink("a", "a");
	pt_rc("self", stat("a", &st));
	symlink("c", "b");
	symlink("b", "c");
	pt_rc("pair", stat("b", &st));
}

static void symlink_chain(int depth)
{
	char name[32], target[32];
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	for (int i = 0; i < depth; i++) {
		snprintf(name, sizeof(name), "l%d", i);
		if (i == 0)
			snprintf(target, sizeof(target), "f");
		else
			snprintf(target, sizeof(target), "l%d", i - 1);
		symlink(target, name);
	}
	snprintf(name, sizeof(name), "l%d", depth - 1);
	pt_rc(NULL, stat(name, &st));
}

static void symlink_chain_40(void) { symlink_chain(40); }
static void symlink_chain_41(void) { symlink_chain(41); }

static void symlink_names(void)
{
	pt_rc("255", symlink("x", pt_longname(NAME_MAX)));
	pt_rc("256", symlink("x", pt_longname(NAME_MAX + 1)));
}

static void symlink_relative_resolution(void)
{
	mkdir("a", 0755);
	mkdir("b", 0755);
	pt_mkfile("b/f", 0644, "rel", 3);
	pt_rc(NULL, symlink("../b/f", "a/l"));
	pt_res("content=%s", pt_contents("a/l"));
}

static void symlink_dir_traversal(void)
{
	mkdir("d", 0755);
	pt_mkfile("d/f", 0644, "in", 2);
	symlink("d", "l");
	pt_res("content=%s", pt_contents("l/f"));
	pt_res("trailing_slash_type=%s", pt_type("l/"));
}

static void nb_symlink(void *arg)
{
	pt_rc(NULL, symlink("x", arg));
}

static void symlink_nobody(void)
{
	pt_mkdir_mode("w", 0777);
	pt_as_nobody(nb_symlink, "l");
	pt_as_nobody(nb_symlink, "w/l");
	pt_res("uid=%u", pt_stat("w/l").st_uid);
}

static void symlink_parent_times(void)
{
	struct stat a, b;

	mkdir("p", 0755);
	a = pt_stat("p");
	pt_pause();
	pt_rc(NULL, symlink("x", "p/l"));
	b = pt_stat("p");
	pt_res("mtime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0);
}

/* =================================================================== unlink */

static void unlink_basic(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, unlink("f"));
	pt_res("f=%s", pt_type("f"));
}

static void unlink_enoent(void)
{
	pt_rc("plain", unlink("missing"));
	pt_rc("parent", unlink("nodir/f"));
}

static void unlink_dir(void)
{
	mkdir("d", 0755);
	pt_rc("unlink", unlink("d"));
	pt_rc("unlinkat_removedir_file",
	      (pt_mkfile("f", 0644, NULL, 0), unlinkat(AT_FDCWD, "f", AT_REMOVEDIR)));
	pt_rc("unlinkat_removedir_dir", unlinkat(AT_FDCWD, "d", AT_REMOVEDIR));
}

static void unlink_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("component", unlink("f/x"));
	pt_rc("trailing_slash", unlink("f/"));
}

static void unlink_open_file(void)
{
	char buf[16] = "";
	struct stat st;
	int fd;

	pt_mkfile("f", 0644, "before", 6);
	fd = open("f", O_RDWR);
	pt_rc(NULL, unlink("f"));
	pt_res("write=%zd", pwrite(fd, "AFTER!", 6, 6));
	pt_res("read=%zd", pread(fd, buf, 12, 0));
	pt_res("content=%s", buf);
	fstat(fd, &st);
	pt_res("nlink=%ld size=%lld", (long)st.st_nlink, (long long)st.st_size);
	pt_rc("ftruncate", ftruncate(fd, 3));
	pt_rc("fchmod", fchmod(fd, 0600));
	close(fd);
	pt_res("f=%s", pt_type("f"));
}

static void unlink_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, unlink("l"));
	pt_res("l=%s f=%s", pt_type("l"), pt_type("f"));
}

static void unlink_hardlink_nlink(void)
{
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	link("f", "g");
	a = pt_stat("g");
	pt_pause();
	pt_rc(NULL, unlink("f"));
	b = pt_stat("g");
	pt_res("nlink=%ld ctime_changed=%d", (long)b.st_nlink, pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void unlink_parent_times(void)
{
	struct stat a, b;

	mkdir("p", 0755);
	pt_mkfile("p/f", 0644, NULL, 0);
	a = pt_stat("p");
	pt_pause();
	pt_rc(NULL, unlink("p/f"));
	b = pt_stat("p");
	pt_res("mtime_changed=%d ctime_changed=%d", pt_tscmp(a.st_mtim, b.st_mtim) < 0,
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void unlink_special(void)
{
	mkfifo("p", 0644);
	mknod("s", S_IFSOCK | 0644, 0);
	mknod("c", S_IFCHR | 0644, makedev(1, 3));
	pt_rc("fifo", unlink("p"));
	pt_rc("sock", unlink("s"));
	pt_rc("chr", unlink("c"));
}

static void nb_unlink(void *arg)
{
	pt_rc(NULL, unlink(arg));
}

static void unlink_sticky_nobody_foreign(void)
{
	pt_mkdir_mode("w", 01777);
	pt_mkfile("w/f", 0666, NULL, 0);
	pt_as_nobody(nb_unlink, "w/f");
	pt_res("f=%s", pt_type("w/f"));
}

static void unlink_sticky_nobody_own(void)
{
	pt_mkdir_mode("w", 01777);
	pt_mkfile("w/f", 0644, NULL, 0);
	chown("w/f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_unlink, "w/f");
	pt_res("f=%s", pt_type("w/f"));
}

static void unlink_sticky_nobody_dir_owner(void)
{
	pt_mkdir_mode("w", 01777);
	chown("w", PT_NOBODY, PT_NOBODY);
	pt_mkfile("w/f", 0644, NULL, 0);
	pt_as_nobody(nb_unlink, "w/f");
	pt_res("f=%s", pt_type("w/f"));
}

static void unlink_sticky_root(void)
{
	pt_mkdir_mode("w", 01777);
	pt_mkfile("w/f", 0644, NULL, 0);
	chown("w/f", PT_NOBODY, PT_NOBODY);
	pt_rc(NULL, unlink("w/f"));
}

static void unlink_nonsticky_nobody(void)
{
	pt_mkdir_mode("w", 0777);
	pt_mkfile("w/f", 0600, NULL, 0);
	pt_as_nobody(nb_unlink, "w/f");
	pt_res("f=%s", pt_type("w/f"));
}

static void unlink_nobody_dir_not_writable(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	pt_as_nobody(nb_unlink, "f");
}

const struct pt_case pt_cases_names[] = {
	{ "link/basic", link_basic },
	{ "link/eexist", link_eexist },
	{ "link/dir_eperm", link_dir_eperm },
	{ "link/enoent_source", link_enoent_source },
	{ "link/enoent_dest_dir", link_enoent_dest_dir },
	{ "link/enotdir", link_enotdir },
	{ "link/across_dirs", link_across_dirs },
	{ "link/symlink_nofollow", link_symlink_nofollow },
	{ "link/symlink_follow", link_symlink_follow },
	{ "link/ctime", link_ctime },
	{ "link/unlink_one", link_unlink_one },
	{ "link/unlink_other_name", link_unlink_other_name },
	{ "link/enametoolong", link_enametoolong },
	{ "link/fifo", link_fifo },
	{ "link/special", link_special },
	{ "link/nobody_protected", link_nobody_protected },
	{ "link/ten_dirs", link_nlink_max_dir },

	{ "mkdir/basic", mkdir_basic },
	{ "mkdir/umask", mkdir_umask },
	{ "mkdir/special_bits", mkdir_special_bits },
	{ "mkdir/eexist_dir", mkdir_eexist_dir },
	{ "mkdir/eexist_file", mkdir_eexist_file },
	{ "mkdir/eexist_dangling_symlink", mkdir_eexist_dangling_symlink },
	{ "mkdir/enoent", mkdir_enoent },
	{ "mkdir/enotdir", mkdir_enotdir },
	{ "mkdir/parent_nlink", mkdir_parent_nlink },
	{ "mkdir/name_255", mkdir_name_255 },
	{ "mkdir/name_256", mkdir_name_256 },
	{ "mkdir/parent_times", mkdir_parent_times },
	{ "mkdir/trailing_slash", mkdir_trailing_slash },
	{ "mkdir/empty_readdir", mkdir_empty_readdir },
	{ "mkdir/nobody_eacces", mkdir_nobody_eacces },
	{ "mkdir/nobody_owner", mkdir_nobody_owner },

	{ "mkfifo/basic", mkfifo_basic },
	{ "mkfifo/eexist", mkfifo_eexist },
	{ "mkfifo/enoent", mkfifo_enoent },
	{ "mkfifo/enxio", mkfifo_enxio },
	{ "mkfifo/data", mkfifo_data },
	{ "mkfifo/nobody", mkfifo_nobody },
	{ "mkfifo/umask", mkfifo_umask },

	{ "mknod/fifo", mknod_fifo },
	{ "mknod/sock", mknod_sock },
	{ "mknod/chr", mknod_chr },
	{ "mknod/blk", mknod_blk },
	{ "mknod/chr_big_minor", mknod_chr_big_minor },
	{ "mknod/reg", mknod_reg },
	{ "mknod/dir_eperm", mknod_dir_eperm },
	{ "mknod/bad_type", mknod_bad_type },
	{ "mknod/eexist", mknod_eexist },
	{ "mknod/nobody_chr", mknod_nobody_chr },
	{ "mknod/nobody_fifo", mknod_nobody_fifo },
	{ "mknod/chr_open", mknod_chr_open },
	{ "mknod/bind_socket", mknod_bind_socket },
	{ "mknod/socket_connect", mknod_socket_connect },

	{ "rmdir/basic", rmdir_basic },
	{ "rmdir/open_fstat", rmdir_open_fstat },
	{ "rmdir/enotempty", rmdir_enotempty },
	{ "rmdir/enotempty_subdir", rmdir_enotempty_subdir },
	{ "rmdir/enotdir", rmdir_enotdir },
	{ "rmdir/dot", rmdir_dot },
	{ "rmdir/enoent", rmdir_enoent },
	{ "rmdir/parent_nlink", rmdir_parent_nlink },
	{ "rmdir/open_dir", rmdir_open_dir },
	{ "rmdir/trailing_slash", rmdir_trailing_slash },
	{ "rmdir/sticky_nobody", rmdir_sticky_nobody },

	{ "symlink/basic", symlink_basic },
	{ "symlink/target_4095", symlink_4095 },
	{ "symlink/target_4096", symlink_4096 },
	{ "symlink/target_60", symlink_60 },
	{ "symlink/target_1000", symlink_1000 },
	{ "symlink/eexist", symlink_eexist },
	{ "symlink/enoent", symlink_enoent },
	{ "symlink/dangling", symlink_dangling },
	{ "symlink/readlink_einval", symlink_readlink_einval },
	{ "symlink/readlink_short", symlink_readlink_short },
	{ "symlink/loop", symlink_loop },
	{ "symlink/chain_40", symlink_chain_40 },
	{ "symlink/chain_41", symlink_chain_41 },
	{ "symlink/names", symlink_names },
	{ "symlink/relative_resolution", symlink_relative_resolution },
	{ "symlink/dir_traversal", symlink_dir_traversal },
	{ "symlink/nobody", symlink_nobody },
	{ "symlink/parent_times", symlink_parent_times },

	{ "unlink/basic", unlink_basic },
	{ "unlink/enoent", unlink_enoent },
	{ "unlink/dir", unlink_dir },
	{ "unlink/enotdir", unlink_enotdir },
	{ "unlink/open_file", unlink_open_file },
	{ "unlink/symlink", unlink_symlink },
	{ "unlink/hardlink_nlink", unlink_hardlink_nlink },
	{ "unlink/parent_times", unlink_parent_times },
	{ "unlink/special", unlink_special },
	{ "unlink/sticky_nobody_foreign", unlink_sticky_nobody_foreign },
	{ "unlink/sticky_nobody_own", unlink_sticky_nobody_own },
	{ "unlink/sticky_nobody_dir_owner", unlink_sticky_nobody_dir_owner },
	{ "unlink/sticky_root", unlink_sticky_root },
	{ "unlink/nonsticky_nobody", unlink_nonsticky_nobody },
	{ "unlink/nobody_dir_not_writable", unlink_nobody_dir_not_writable },
	{ NULL, NULL },
};
