/* pt_util.c - helpers shared by the cases of the POSIX conformance suite:
 * the result line, the switch to an unprivileged child, and small file
 * utilities.  Declared in pt.h, which also states the rules of a case.
 */
#include "pt.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The result line of the case running in this process. */
static char pt_line[PT_RES_MAX];

void pt_res_reset(void)
{
	pt_line[0] = '\0';
}

const char *pt_res_get(void)
{
	return pt_line;
}

const char *pt_errname(int e)
{
	const char *name = strerrorname_np(e);
	static char buf[32];

	if (!name) {
		snprintf(buf, sizeof(buf), "%d", e);
		return buf;
	}
	return name;
}

void pt_res(const char *fmt, ...)
{
	size_t used = strlen(pt_line);
	va_list ap;

	if (used && used < sizeof(pt_line) - 1)
		pt_line[used++] = ' ';
	va_start(ap, fmt);
	vsnprintf(pt_line + used, sizeof(pt_line) - used, fmt, ap);
	va_end(ap);
}

long pt_rc(const char *label, long rc)
{
	int saved = errno;

	if (rc >= 0) {
		if (label)
			pt_res("%s:ok", label);
		else
			pt_res("ok");
	} else if (label) {
		pt_res("%s:errno=%s", label, pt_errname(saved));
	} else {
		pt_res("errno=%s", pt_errname(saved));
	}
	errno = saved;
	return rc;
}

void pt_signame(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "%d", sig);
}

void pt_as_nobody(void (*fn)(void *arg), void *arg)
{
	int fds[2];
	pid_t pid;
	int status;
	char buf[PT_RES_MAX];
	ssize_t n;
	size_t got = 0;

	if (pipe(fds) < 0) {
		pt_res("pipe=%s", pt_errname(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		pt_res("fork=%s", pt_errname(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		pt_res_reset();
		if (setgroups(0, NULL) < 0 ||
		    setresgid(PT_NOBODY, PT_NOBODY, PT_NOBODY) < 0 ||
		    setresuid(PT_NOBODY, PT_NOBODY, PT_NOBODY) < 0)
			pt_res("setresuid=%s", pt_errname(errno));
		else
			fn(arg);
		n = write(fds[1], pt_line, strlen(pt_line));
		(void)n;
		_exit(0);
	}
	close(fds[1]);
	while (got < sizeof(buf) - 1 &&
	       (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got)
		pt_res("%s", buf);
	if (WIFSIGNALED(status)) {
		char name[16];

		pt_signame(WTERMSIG(status), name, sizeof(name));
		pt_res("child=%s", name);
	}
}

void pt_pause(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int pt_mkfile(const char *path, mode_t mode, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			rc = -errno;
			goto out;
		}
		data = (const char *)data + n;
		len -= (size_t)n;
	}
	if (fchmod(fd, mode) < 0)
		rc = -errno;
out:
	close(fd);
	return rc;
}

long pt_readfile(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	size_t got = 0;
	long rc;

	if (fd < 0)
		return -errno;
	while (got < cap) {
		ssize_t n = read(fd, (char *)buf + got, cap - got);

		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	rc = (long)got;
out:
	close(fd);
	return rc;
}

int pt_allzero(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

long pt_mode(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	return st.st_mode & 07777;
}

long pt_nlink(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	return (long)st.st_nlink;
}

const char *pt_type(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return "none";
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "sock";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	}
	return "unknown";
}

int pt_tscmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}


struct stat pt_stat(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		memset(&st, 0, sizeof(st));
	return st;
}

int pt_same_inode(const char *a, const char *b)
{
	struct stat sa, sb;

	if (lstat(a, &sa) < 0 || lstat(b, &sb) < 0)
		return 0;
	return sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

const char *pt_longname(size_t n)
{
	static char buf[NAME_MAX * 2 + 2];

	if (n > sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	memset(buf, 'a', n);
	buf[n] = '\0';
	return buf;
}

const char *pt_contents(const char *path)
{
	static char buf[64];
	long n = pt_readfile(path, buf, sizeof(buf) - 1);

	if (n < 0)
		return pt_errname((int)-n);
	buf[n] = '\0';
	return buf;
}

void pt_mkdir_mode(const char *path, mode_t mode)
{
	mkdir(path, 0700);
	chmod(path, mode);
}

int pt_mkpattern(const char *path, unsigned seed, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	int rc;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		buf[i] = pt_pat(seed, i);
	rc = pt_mkfile(path, 0644, buf, len);
	free(buf);
	return rc;
}

int pt_is_pattern(int fd, unsigned seed, off_t off, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	ssize_t n;
	int ok;

	if (!buf)
		return 0;
	n = pread(fd, buf, len, off);
	ok = n == (ssize_t)len;
	for (size_t i = 0; ok && i < len; i++)
		if (buf[i] != pt_pat(seed, (size_t)off + i))
			ok = 0;
	free(buf);
	return ok;
}

int pt_is_zero(int fd, off_t off, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	ssize_t n;
	int ok;

	if (!buf)
		return 0;
	n = pread(fd, buf, len, off);
	ok = n == (ssize_t)len && pt_allzero(buf, len);
	free(buf);
	return ok;
}

struct timespec pt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}
