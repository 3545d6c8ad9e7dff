/* cases_meta.c - POSIX conformance cases for times and extended attributes:
 * utimensat/futimens (UTIME_NOW, UTIME_OMIT, ns round trips) and
 * user/trusted xattrs.
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

/* ================================================================ utimensat */

static void utimensat_explicit(void)
{
	struct timespec t[2] = { { 1000000000, 123456789 }, { 1200000000, 987654321 } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime=%lld.%09ld mtime=%lld.%09ld", (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_one_ns(void)
{
	struct timespec t[2] = { { 1, 1 }, { 2, 999999999 } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime=%lld.%09ld mtime=%lld.%09ld", (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_pre_epoch(void)
{
	struct timespec t[2] = { { -1000000000, 5 }, { -1, 0 } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime=%lld.%09ld mtime=%lld.%09ld", (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_after_2038(void)
{
	struct timespec t[2] = { { 4000000000LL, 0 }, { 8000000000LL, 42 } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime=%lld.%09ld mtime=%lld.%09ld", (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_now(void)
{
	struct timespec t[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } }, before;
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	utimensat(AT_FDCWD, "f", old, 0);
	/* The fs clock is coarse: compare with a time slightly in the past. */
	before = pt_now();
	before.tv_sec -= 1;
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime_recent=%d mtime_recent=%d atime_eq_mtime=%d",
	       pt_tscmp(before, st.st_atim) < 0, pt_tscmp(before, st.st_mtim) < 0,
	       pt_tscmp(st.st_atim, st.st_mtim) == 0);
}

static void utimensat_null(void)
{
	struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } }, before;
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	utimensat(AT_FDCWD, "f", old, 0);
	before = pt_now();
	before.tv_sec -= 1;
	pt_rc(NULL, utimensat(AT_FDCWD, "f", NULL, 0));
	st = pt_stat("f");
	pt_res("atime_recent=%d mtime_recent=%d", pt_tscmp(before, st.st_atim) < 0,
	       pt_tscmp(before, st.st_mtim) < 0);
}

static void utimensat_omit_atime(void)
{
	struct timespec old[2] = { { 1000, 111 }, { 2000, 222 } };
	struct timespec t[2] = { { 0, UTIME_OMIT }, { 3000, 333 } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	utimensat(AT_FDCWD, "f", old, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime=%lld.%09ld mtime=%lld.%09ld", (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_omit_mtime_now_atime(void)
{
	struct timespec old[2] = { { 1000, 111 }, { 2000, 222 } };
	struct timespec t[2] = { { 0, UTIME_NOW }, { 0, UTIME_OMIT } };
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	utimensat(AT_FDCWD, "f", old, 0);
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	st = pt_stat("f");
	pt_res("atime_changed=%d mtime=%lld.%09ld", st.st_atim.tv_sec > 1000,
	       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void utimensat_omit_both(void)
{
	struct timespec t[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	b = pt_stat("f");
	pt_res("ctime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void utimensat_ctime(void)
{
	struct timespec t[2] = { { 1000, 0 }, { 1000, 0 } };
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, utimensat(AT_FDCWD, "f", t, 0));
	b = pt_stat("f");
	pt_res("ctime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void utimensat_symlink_nofollow(void)
{
	struct timespec t[2] = { { 5000, 5 }, { 6000, 6 } };

	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, utimensat(AT_FDCWD, "l", t, AT_SYMLINK_NOFOLLOW));
	pt_res("link_mtime=%lld.%09ld target_mtime_is_6000=%d",
	       (long long)pt_stat("l").st_mtim.tv_sec, pt_stat("l").st_mtim.tv_nsec,
	       pt_stat("f").st_mtim.tv_sec == 6000);
}

static void utimensat_symlink_follow(void)
{
	struct timespec t[2] = { { 5000, 5 }, { 6000, 6 } };

	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, utimensat(AT_FDCWD, "l", t, 0));
	pt_res("target_mtime=%lld.%09ld link_mtime_is_6000=%d",
	       (long long)pt_stat("f").st_mtim.tv_sec, pt_stat("f").st_mtim.tv_nsec,
	       pt_stat("l").st_mtim.tv_sec == 6000);
}

static void utimensat_dir(void)
{
	struct timespec t[2] = { { 7000, 7 }, { 8000, 8 } };

	mkdir("d", 0755);
	pt_rc(NULL, utimensat(AT_FDCWD, "d", t, 0));
	pt_res("mtime=%lld.%09ld", (long long)pt_stat("d").st_mtim.tv_sec, pt_stat("d").st_mtim.tv_nsec);
}

static void utimensat_futimens(void)
{
	struct timespec t[2] = { { 7000, 7 }, { 8000, 8 } };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc(NULL, futimens(fd, t));
	close(fd);
	pt_res("mtime=%lld.%09ld", (long long)pt_stat("f").st_mtim.tv_sec, pt_stat("f").st_mtim.tv_nsec);
}

static void utimensat_enoent(void)
{
	pt_rc(NULL, utimensat(AT_FDCWD, "missing", NULL, 0));
}

static void utimensat_einval(void)
{
	struct timespec bad_ns[2] = { { 0, 1000000000 }, { 0, 0 } };
	struct timespec neg_ns[2] = { { 0, 0 }, { 0, -1 } };

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("nsec_1e9", utimensat(AT_FDCWD, "f", bad_ns, 0));
	pt_rc("nsec_negative", utimensat(AT_FDCWD, "f", neg_ns, 0));
	pt_rc("bad_flags", utimensat(AT_FDCWD, "f", NULL, 0x4000));
}

static void nb_utime_now(void *arg)
{
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };

	pt_rc("null", utimensat(AT_FDCWD, arg, NULL, 0));
	pt_rc("now", utimensat(AT_FDCWD, arg, now, 0));
}

static void nb_utime_explicit(void *arg)
{
	struct timespec t[2] = { { 1000, 0 }, { 1000, 0 } };
	struct timespec omit_now[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };

	pt_rc("explicit", utimensat(AT_FDCWD, arg, t, 0));
	pt_rc("omit_now", utimensat(AT_FDCWD, arg, omit_now, 0));
}

static void utimensat_nobody_writable(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	pt_as_nobody(nb_utime_now, "f");
	pt_as_nobody(nb_utime_explicit, "f");
}

static void utimensat_nobody_readonly(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_as_nobody(nb_utime_now, "f");
	pt_as_nobody(nb_utime_explicit, "f");
}

static void utimensat_nobody_owner(void)
{
	pt_mkfile("f", 0444, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_utime_now, "f");
	pt_as_nobody(nb_utime_explicit, "f");
	pt_res("mtime_is_1000=%d", pt_stat("f").st_mtim.tv_sec == 1000);
}

/* ==================================================================== xattr */

static void xattr_set_get(void)
{
	char buf[64] = "";
	ssize_t n;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("set", setxattr("f", "user.foo", "bar", 3, 0));
	n = getxattr("f", "user.foo", buf, sizeof(buf));
	pt_res("get=%zd value=%.*s", n, n > 0 ? (int)n : 0, buf);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends the user.* and trusted.* names of path, sorted (the order of
 * listxattr is unspecified); other namespaces (security.selinux, ACLs
 * set by the system) are left out. */
static void res_xattr_names(const char *path, int nofollow)
{
	char list[4096];
	const char *names[64];
	size_t count = 0;
	ssize_t n = nofollow ? llistxattr(path, list, sizeof(list))
			     : listxattr(path, list, sizeof(list));

	if (n < 0) {
		pt_rc("list", n);
		return;
	}
	for (ssize_t off = 0; off < n && count < 64; off += (ssize_t)strlen(list + off) + 1)
		if (!strncmp(list + off, "user.", 5) || !strncmp(list + off, "trusted.", 8))
			names[count++] = list + off;
	qsort(names, count, sizeof(names[0]), cmp_str);
	pt_res("names=");
	for (size_t i = 0; i < count; i++)
		pt_res("%s", names[i]);
}

static void xattr_list(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.b", "1", 1, 0);
	setxattr("f", "user.a", "2", 1, 0);
	setxattr("f", "user.c", "", 0, 0);
	res_xattr_names("f", 0);
}

static void xattr_remove(void)
{
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.foo", "bar", 3, 0);
	pt_rc("remove", removexattr("f", "user.foo"));
	pt_rc("get", getxattr("f", "user.foo", buf, sizeof(buf)));
	pt_rc("remove_again", removexattr("f", "user.foo"));
	res_xattr_names("f", 0);
}

static void xattr_get_missing(void)
{
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, getxattr("f", "user.nothing", buf, sizeof(buf)));
}

static void xattr_create_flag(void)
{
	char buf[8] = "";

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("first", setxattr("f", "user.x", "1", 1, XATTR_CREATE));
	pt_rc("second", setxattr("f", "user.x", "2", 1, XATTR_CREATE));
	getxattr("f", "user.x", buf, sizeof(buf) - 1);
	pt_res("value=%s", buf);
}

static void xattr_replace_flag(void)
{
	char buf[8] = "";

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("missing", setxattr("f", "user.x", "1", 1, XATTR_REPLACE));
	setxattr("f", "user.x", "1", 1, 0);
	pt_rc("existing", setxattr("f", "user.x", "22", 2, XATTR_REPLACE));
	getxattr("f", "user.x", buf, sizeof(buf) - 1);
	pt_res("value=%s", buf);
	pt_rc("both_flags", setxattr("f", "user.x", "3", 1, XATTR_CREATE | XATTR_REPLACE));
	pt_rc("bad_flag", setxattr("f", "user.x", "3", 1, 0x10));
}

static void xattr_size_query(void)
{
	char buf[4];

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.x", "0123456789", 10, 0);
	pt_res("size=%zd", getxattr("f", "user.x", NULL, 0));
	pt_rc("small_buffer", getxattr("f", "user.x", buf, sizeof(buf)));
	pt_res("list_size_ge_7=%d", listxattr("f", NULL, 0) >= 7);
	pt_rc("list_small", listxattr("f", buf, 2));
}

static void xattr_value_len(size_t len)
{
	char *val = malloc(len), *back = malloc(len);
	ssize_t n;

	for (size_t i = 0; i < len; i++)
		val[i] = (char)pt_pat(12, i);
	pt_mkfile("f", 0644, NULL, 0);
	if (pt_rc("set", setxattr("f", "user.big", val, len, 0)) == 0) {
		n = getxattr("f", "user.big", back, len);
		pt_res("get=%zd same=%d", n, n == (ssize_t)len && !memcmp(val, back, len));
	}
	free(val);
	free(back);
}

static void xattr_value_1000(void) { xattr_value_len(1000); }
static void xattr_value_4000(void) { xattr_value_len(4000); }
static void xattr_value_65536(void) { xattr_value_len(65536); }
static void xattr_value_65537(void) { xattr_value_len(65537); }

static void xattr_get_big_buffer(void)
{
	/* A buffer bigger than XATTR_SIZE_MAX is fine for getxattr. */
	char *buf = malloc(200000);

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.x", "abc", 3, 0);
	pt_res("get=%zd", getxattr("f", "user.x", buf, 200000));
	free(buf);
}

static void xattr_name_len(void)
{
	char name[300];
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	memcpy(name, "user.", 5);
	memset(name + 5, 'n', 250);
	name[255] = '\0';
	pt_rc("set_255", setxattr("f", name, "v", 1, 0));
	pt_res("get_255=%zd", getxattr("f", name, buf, sizeof(buf)));
	name[255] = 'n';
	name[256] = '\0';
	pt_rc("set_256", setxattr("f", name, "v", 1, 0));
	pt_rc("get_256", getxattr("f", name, buf, sizeof(buf)));
}

static void xattr_bad_names(void)
{
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("empty_suffix", setxattr("f", "user.", "v", 1, 0));
	pt_rc("empty", setxattr("f", "", "v", 1, 0));
	pt_rc("no_namespace", setxattr("f", "foo", "v", 1, 0));
	pt_rc("unknown_namespace", setxattr("f", "foo.bar", "v", 1, 0));
	pt_rc("get_unknown_namespace", getxattr("f", "foo.bar", buf, sizeof(buf)));
}

static void xattr_symlink_eperm(void)
{
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc("lset", lsetxattr("l", "user.x", "v", 1, 0));
	pt_rc("lget", lgetxattr("l", "user.x", buf, sizeof(buf)));
	pt_rc("set_follows", setxattr("l", "user.y", "v", 1, 0));
	pt_res("target_has_y=%d", getxattr("f", "user.y", buf, sizeof(buf)) == 1);
}

static void xattr_fifo_eperm(void)
{
	char buf[8];

	mkfifo("p", 0644);
	pt_rc("set", setxattr("p", "user.x", "v", 1, 0));
	pt_rc("get", getxattr("p", "user.x", buf, sizeof(buf)));
	mknod("c", S_IFCHR | 0644, 0x103);
	pt_rc("set_chr", setxattr("c", "user.x", "v", 1, 0));
}

static void xattr_dir(void)
{
	char buf[8] = "";

	mkdir("d", 0755);
	pt_rc("set", setxattr("d", "user.x", "dv", 2, 0));
	getxattr("d", "user.x", buf, sizeof(buf) - 1);
	pt_res("value=%s", buf);
}

static void xattr_fd(void)
{
	char buf[8] = "";
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc("fset", fsetxattr(fd, "user.x", "fd", 2, 0));
	pt_res("fget=%zd", fgetxattr(fd, "user.x", buf, sizeof(buf) - 1));
	pt_res("value=%s", buf);
	pt_rc("fremove", fremovexattr(fd, "user.x"));
	close(fd);
}

static void xattr_trusted_root(void)
{
	char buf[8] = "";

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("set", setxattr("f", "trusted.t", "tv", 2, 0));
	pt_res("get=%zd", getxattr("f", "trusted.t", buf, sizeof(buf) - 1));
	res_xattr_names("f", 0);
}

static void nb_xattr_trusted(void *arg)
{
	char buf[8];

	pt_rc("set", setxattr(arg, "trusted.n", "v", 1, 0));
	pt_rc("get", getxattr(arg, "trusted.t", buf, sizeof(buf)));
	res_xattr_names(arg, 0);
}

static void xattr_trusted_nobody(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	setxattr("f", "trusted.t", "tv", 2, 0);
	setxattr("f", "user.u", "uv", 2, 0);
	pt_as_nobody(nb_xattr_trusted, "f");
}

static void nb_xattr_user(void *arg)
{
	char buf[8];

	pt_rc("set", setxattr(arg, "user.n", "v", 1, 0));
	pt_rc("get", getxattr(arg, "user.u", buf, sizeof(buf)));
	pt_rc("remove", removexattr(arg, "user.u"));
}

static void xattr_user_nobody_readonly(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.u", "uv", 2, 0);
	pt_as_nobody(nb_xattr_user, "f");
}

static void xattr_user_nobody_unreadable(void)
{
	pt_mkfile("f", 0600, NULL, 0);
	setxattr("f", "user.u", "uv", 2, 0);
	pt_as_nobody(nb_xattr_user, "f");
}

static void xattr_user_nobody_writable(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	setxattr("f", "user.u", "uv", 2, 0);
	pt_as_nobody(nb_xattr_user, "f");
}

static void xattr_empty_value(void)
{
	char buf[8];

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("set", setxattr("f", "user.e", "", 0, 0));
	pt_res("get=%zd", getxattr("f", "user.e", buf, sizeof(buf)));
}

static void xattr_binary_value(void)
{
	const char val[8] = { 0, 1, 0, (char)0xff, '\n', 0, 'x', 0 };
	char buf[8];
	ssize_t n;

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.bin", val, sizeof(val), 0);
	n = getxattr("f", "user.bin", buf, sizeof(buf));
	pt_res("get=%zd same=%d", n, n == 8 && !memcmp(buf, val, 8));
}

static void xattr_ctime(void)
{
	struct stat a, b, c;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc("set", setxattr("f", "user.x", "v", 1, 0));
	b = pt_stat("f");
	pt_pause();
	pt_rc("remove", removexattr("f", "user.x"));
	c = pt_stat("f");
	pt_res("set_ctime_changed=%d remove_ctime_changed=%d mtime_changed=%d",
	       pt_tscmp(a.st_ctim, b.st_ctim) < 0, pt_tscmp(b.st_ctim, c.st_ctim) < 0,
	       pt_tscmp(a.st_mtim, c.st_mtim) != 0);
}

static void xattr_many(void)
{
	char name[32], val[100];
	int failed = 0, wrong = 0;

	pt_mkfile("f", 0644, NULL, 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "user.attr%02d", i);
		memset(val, 'a' + i, sizeof(val));
		if (setxattr("f", name, val, sizeof(val), 0) < 0)
			failed++;
	}
	for (int i = 0; i < 20; i++) {
		char buf[100];

		snprintf(name, sizeof(name), "user.attr%02d", i);
		if (getxattr("f", name, buf, sizeof(buf)) != 100 || buf[99] != 'a' + i)
			wrong++;
	}
	pt_res("failed=%d wrong=%d", failed, wrong);
}

static void xattr_follows_links_and_renames(void)
{
	char buf[8] = "";

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "user.x", "kept", 4, 0);
	link("f", "g");
	rename("f", "h");
	getxattr("g", "user.x", buf, sizeof(buf) - 1);
	pt_res("via_link=%s", buf);
	memset(buf, 0, sizeof(buf));
	getxattr("h", "user.x", buf, sizeof(buf) - 1);
	pt_res("via_rename=%s", buf);
}

static void xattr_enoent(void)
{
	char buf[8];

	pt_rc("get", getxattr("missing", "user.x", buf, sizeof(buf)));
	pt_rc("set", setxattr("missing", "user.x", "v", 1, 0));
}

const struct pt_case pt_cases_meta[] = {
	{ "utimensat/explicit", utimensat_explicit },
	{ "utimensat/one_ns", utimensat_one_ns },
	{ "utimensat/pre_epoch", utimensat_pre_epoch },
	{ "utimensat/after_2038", utimensat_after_2038 },
	{ "utimensat/now", utimensat_now },
	{ "utimensat/null", utimensat_null },
	{ "utimensat/omit_atime", utimensat_omit_atime },
	{ "utimensat/omit_mtime_now_atime", utimensat_omit_mtime_now_atime },
	{ "utimensat/omit_both", utimensat_omit_both },
	{ "utimensat/ctime", utimensat_ctime },
	{ "utimensat/symlink_nofollow", utimensat_symlink_nofollow },
	{ "utimensat/symlink_follow", utimensat_symlink_follow },
	{ "utimensat/dir", utimensat_dir },
	{ "utimensat/futimens", utimensat_futimens },
	{ "utimensat/enoent", utimensat_enoent },
	{ "utimensat/einval", utimensat_einval },
	{ "utimensat/nobody_writable", utimensat_nobody_writable },
	{ "utimensat/nobody_readonly", utimensat_nobody_readonly },
	{ "utimensat/nobody_owner", utimensat_nobody_owner },

	{ "xattr/set_get", xattr_set_get },
	{ "xattr/list", xattr_list },
	{ "xattr/remove", xattr_remove },
	{ "xattr/get_missing", xattr_get_missing },
	{ "xattr/create_flag", xattr_create_flag },
	{ "xattr/replace_flag", xattr_replace_flag },
	{ "xattr/size_query", xattr_size_query },
	{ "xattr/value_1000", xattr_value_1000 },
	{ "xattr/value_4000", xattr_value_4000 },
	{ "xattr/value_65536", xattr_value_65536 },
	{ "xattr/value_65537", xattr_value_65537 },
	{ "xattr/get_big_buffer", xattr_get_big_buffer },
	{ "xattr/name_len", xattr_name_len },
	{ "xattr/bad_names", xattr_bad_names },
	{ "xattr/symlink_eperm", xattr_symlink_eperm },
	{ "xattr/fifo_eperm", xattr_fifo_eperm },
	{ "xattr/dir", xattr_dir },
	{ "xattr/fd", xattr_fd },
	{ "xattr/trusted_root", xattr_trusted_root },
	{ "xattr/trusted_nobody", xattr_trusted_nobody },
	{ "xattr/user_nobody_readonly", xattr_user_nobody_readonly },
	{ "xattr/user_nobody_unreadable", xattr_user_nobody_unreadable },
	{ "xattr/user_nobody_writable", xattr_user_nobody_writable },
	{ "xattr/empty_value", xattr_empty_value },
	{ "xattr/binary_value", xattr_binary_value },
	{ "xattr/ctime", xattr_ctime },
	{ "xattr/many", xattr_many },
	{ "xattr/follows_links_and_renames", xattr_follows_links_and_renames },
	{ "xattr/enoent", xattr_enoent },
	{ NULL, NULL },
};
