/* util.c - clocks, whole-buffer positional I/O, mkdir -p, random bytes and
 * the copy a repair keeps of the file it changes (tw_copy_aside).
 *
 * Thin wrappers that turn the usual POSIX partial-success cases (short
 * writes, EINTR) into "all or -errno", so callers have one error path.
 * Nothing here allocates except tw_mkdir_p's path copy (on the stack).
 */
#include <malloc.h>
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t tw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tw_now_ms(void)
{
	return tw_now_ns() / 1000000u;
}

uint64_t tw_fnv1a64(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void tw_malloc_tune(void)
{
	/* Above the largest frame (1 MiB + header); the heap keeps up to
	 * 64 MiB free before trimming (the client's write-behind holds at
	 * most 32 MiB).  Fixed values also stop glibc's dynamic threshold. */
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int tw_ts_cmp(struct tw_ts a, struct tw_ts b)
{
	if (a.sec != b.sec)
		return a.sec < b.sec ? -1 : 1;
	return a.nsec < b.nsec ? -1 : a.nsec > b.nsec;
}

bool tw_relatime_due(struct tw_ts atime, struct tw_ts mtime,
		     struct tw_ts ctime, struct tw_ts now)
{
	return tw_ts_cmp(atime, mtime) <= 0 || tw_ts_cmp(atime, ctime) <= 0 ||
	       now.sec - atime.sec >= 24 * 3600;
}

void tw_realtime(int64_t *sec, uint32_t *nsec)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (sec)
		*sec = (int64_t)ts.tv_sec;
	if (nsec)
		*nsec = (uint32_t)ts.tv_nsec;
}

int tw_replace_file(int dir_fd, const char *tmp, const char *name,
		    const void *buf, size_t len)
{
	int fd, rc;

	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = tw_pwrite_all(fd, buf, len, 0);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		rc = -errno;
	if (rc == 0 && fsync(dir_fd) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dir_fd, tmp, 0);
	return rc;
}

int tw_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* pwrite returning 0 for len > 0 would loop forever; the
		 * kernel only does it when it cannot make progress. */
		if (w == 0)
			return -EIO;
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
	return 0;
}

long tw_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, p + done, len - done, (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break; /* EOF */
		done += (size_t)r;
	}
	return (long)done;
}

static int mkdir_one(const char *path)
{
	struct stat st;

	/* 0700: every directory this makes is a daemon's data directory (or
	 * a parent of one), readable by nobody else. */
	if (mkdir(path, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	/* EEXIST is only success if it is a directory (or a link to one). */
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int tw_mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t len;
	int rc;

	if (!path || !*path)
		return -EINVAL;
	len = strlen(path);
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	/* Create each prefix ending before a '/', skipping the root and
	 * repeated slashes, then the whole path. */
	for (size_t i = 1; i < len; i++) {
		if (buf[i] != '/' || buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		rc = mkdir_one(buf);
		buf[i] = '/';
		if (rc < 0)
			return rc;
	}
	return mkdir_one(buf);
}

int tw_random(void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t r = getrandom(p, len, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* A daemon that accepts connections until accept fails with EMFILE has
 * no descriptor left for its journal, its subfiles or a checkpoint: the
 * connection limit must leave `reserve` descriptors below the process's
 * limit.  Raise the soft limit toward the hard one if that is what it
 * takes, else lower the connection limit, and say so. */
int tw_fd_budget(const char *who, uint32_t want_conns, uint32_t reserve,
		 uint32_t *conns)
{
	struct rlimit rl;
	uint64_t need = (uint64_t)want_conns + reserve;

	*conns = want_conns;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		struct rlimit up = rl;

		up.rlim_cur = rl.rlim_max == RLIM_INFINITY ||
			      rl.rlim_max >= need ? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		uint64_t fit = rl.rlim_cur > (uint64_t)reserve + TW_CONNS_MIN
			       ? rl.rlim_cur - reserve : TW_CONNS_MIN;

		*conns = (uint32_t)TW_MIN(fit, (uint64_t)want_conns);
		tw_warn("%s: max_connections %u does not fit the descriptor "
			"limit (RLIMIT_NOFILE %llu, %u kept for the daemon's "
			"own files): lowered to %u; raise LimitNOFILE to keep "
			"it", who, want_conns, (unsigned long long)rl.rlim_cur,
			reserve, *conns);
	}
	return 0;
}

int tw_wait_free(int (*is_free)(void *arg), void *arg, unsigned max_ms,
		 unsigned *waited_ms)
{
	for (*waited_ms = 0;; *waited_ms += 10) {
		int rc = is_free(arg);

		if (rc != 0)
			return rc < 0 ? rc : 0;
		if (*waited_ms >= max_ms)
			return -ETIMEDOUT;
		usleep(10 * 1000);
	}
}

/* LOCK_NB: flock never sleeps, so it never fails with EINTR. */
int tw_flock_free(void *fd)
{
	if (flock(*(int *)fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	return errno == EWOULDBLOCK ? 0 : -errno;
}

int tw_copy_aside(const char *path, char *out, size_t outlen)
{
	char parent[PATH_MAX];
	int in = -1, dst = -1, dfd = -1, rc = 0;
	struct stat st;
	off_t left;

	if (snprintf(out, outlen, "%s.corrupt-%ld", path, (long)time(NULL)) >=
	    (int)outlen || snprintf(parent, sizeof(parent), "%s", path) >=
	    (int)sizeof(parent))
		return -ENAMETOOLONG;
	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0) {
		rc = -errno;
		goto out;
	}
	/* O_EXCL: an earlier copy made in the same second is never
	 * overwritten; the operator retries a second later. */
	dst = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (dst < 0) {
		rc = -errno;
		goto out;
	}
	for (left = st.st_size; left > 0;) {
		ssize_t n = copy_file_range(in, NULL, dst, NULL, (size_t)left, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0) {
			rc = -EIO;      /* the file shrank under us */
			goto out;
		}
		left -= n;
	}
	/* The copy must survive a crash of the repair that follows it. */
	if (fsync(dst) < 0) {
		rc = -errno;
		goto out;
	}
	dfd = open(dirname(parent), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		rc = -errno;
out:
	if (in >= 0)
		close(in);
	if (dst >= 0)
		close(dst);
	if (dfd >= 0)
		close(dfd);
	if (rc < 0 && dst >= 0)
		unlink(out);
	return rc;
}

int tw_listen_addr(const char *host, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *res = NULL;
	char p[16];

	memset(ss, 0, sizeof(*ss));
	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		return 0;
	}
	snprintf(p, sizeof(p), "%d", port);
	if (getaddrinfo(host, p, &hints, &res) != 0 || !res ||
	    res->ai_addrlen > sizeof(*ss)) {
		if (res)
			freeaddrinfo(res);
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int tw_sockaddr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}
