/* hopfs.c - the fastest a client/server design can be on this machine: a
 * benchmark's ceiling for TwinFS, not a file system to use (README.md here, "The ceiling").
 *
 *   hopfs serve DIR PORT [TWIN_PORT]
 *       Serve DIR on 127.0.0.1:PORT.  With TWIN_PORT, every WRITE is also
 *       sent to the hopfs server there (TWRITE) and answered only when
 *       both copies are written: TwinFS's primary -> twin chain.
 *   hopfs serve -j DIR PORT [TWIN_PORT]
 *       The same, each server journaling every write first as TwinFS's
 *       iods do in data=journal: a descriptor block, the data and a
 *       commit block (CRC32C of the data and of the descriptor) in one
 *       pwritev to a 64 MiB circular log, before the answer.  The data
 *       goes home later, from a copy kept in memory, as TwinFS's
 *       checkpoint does: on another thread once half the log's worth
 *       waits, and before any request that is not a write.  That thread
 *       syncs the file system every 5 s (TwinFS's commit_interval: the
 *       log synced, the checkpoints' home writes synced).  What TwinFS's
 *       guarantee "acknowledged = in the journal of both twins, synced
 *       within commit_interval" adds to the hops at the least: no
 *       replay, index or checksum check.
 *   hopfs mount MOUNTPOINT PORT [FUSE options]
 *       Mount the server on 127.0.0.1:PORT (runs in the foreground).
 *
 * Why it exists.  bindfs answers each FUSE request in its own process.
 * TwinFS, like every parallel file system, answers it in another one: a
 * metadata request costs a round trip to mgrd, a read one to an iod, a
 * write two (client -> primary -> twin).  On this two-vCPU VM a wakeup
 * that crosses CPUs costs 15-30 us (RESULTS.md), so those hops alone may
 * put a target out of reach.  hopfs does the hops and nothing else, with
 * the fewest wakeups a hop allows:
 *   - the FUSE worker that read the request sends it on its own TCP
 *     connection and blocks for the answer (no handoff to an I/O thread);
 *   - one server thread per connection makes the system call and answers;
 *   - no journal, no checksums, no caches, no locks across machines, no
 *     failover, no size reports: nothing TwinFS's guarantees need.
 * What it measures is therefore an upper bound for any design with
 * TwinFS's hops; test/bench/run --ceiling runs it beside bindfs.
 *
 * Inodes are the server's st_ino (the server's root is FUSE's 1); the
 * client maps each to the last path it learned for it, so hard links and
 * renames of directories with children are not kept right.  A bench tool.
 *
 * Wire (loopback only, host byte order, one request at a time per
 * connection):
 *   request: struct hop_req, then len bytes of payload
 *   reply:   struct hop_rep, then len bytes of payload
 * Payloads per op are listed at enum hop_op; struct stat and struct
 * statvfs travel in this machine's own layout (both ends are one build).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"

/* The ops.  "path" is a NUL-terminated path relative to the served
 * directory ("" for its root); replies carry a struct stat where noted. */
enum hop_op {
	HOP_LOOKUP = 1, /* path -> stat */
	HOP_STAT,       /* fd (or -1), path -> stat */
	HOP_SETATTR,    /* fd, u1 FUSE_SET_ATTR_* mask, u2 mode, u3 uid << 32 |
			 * gid, u4 size; struct timespec[2] (atime, mtime),
			 * path -> stat */
	HOP_CREATE,     /* u1 open flags, u2 mode; path -> status fd, stat */
	HOP_OPEN,       /* u1 open flags; path -> status fd */
	HOP_READ,       /* fd, u1 offset, u2 size -> the bytes */
	HOP_WRITE,      /* fd, u1 offset, u2 ino; the bytes -> status count */
	HOP_RELEASE,    /* fd */
	HOP_FSYNC,      /* fd, u1 datasync */
	HOP_MKDIR,      /* u1 mode; path -> stat */
	HOP_UNLINK,     /* path */
	HOP_RMDIR,      /* path */
	HOP_SYMLINK,    /* target, path -> stat */
	HOP_READLINK,   /* path -> the target, not terminated */
	HOP_RENAME,     /* old path, new path */
	HOP_READDIR,    /* path -> struct hop_dirent records */
	HOP_STATFS,     /* -> struct statvfs */
	HOP_TWRITE,     /* u1 offset, u2 ino; the bytes -> status count (the
			 * twin writes file DIR/<ino>) */
};

struct hop_req {
	uint32_t len;   /* payload bytes */
	uint16_t op;    /* enum hop_op */
	uint16_t pad;   /* zero */
	int64_t fd;     /* the server's descriptor, -1 when none */
	uint64_t u1, u2, u3, u4;
};

struct hop_rep {
	uint32_t len;   /* payload bytes */
	int32_t status; /* >= 0, or a negative errno */
};

/* One directory entry in a HOP_READDIR reply, followed by namelen bytes
 * of name, not terminated.  The attributes make READDIRPLUS possible, as
 * TwinFS's mgrd answers it. */
struct hop_dirent {
	struct stat st; /* st_ino 0: fstatat failed (raced with a removal) */
	uint32_t namelen;
	uint32_t pad;
};

#define HOP_MAX_IO  (1u << 20)          /* max_write / max_read */
#define HOP_BUF     (HOP_MAX_IO + 8192) /* a payload: data plus a path */
#define HOP_DIRBUF  (16u << 20)         /* one directory's listing: ~100k
					 * entries; malloc maps it, and only
					 * the pages written are touched */

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int writev_full(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int hop_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One call on connection fd: send q with payload (p1, n1)(p2, n2), read
 * the reply's payload into out (at most cap bytes).  Returns the status;
 * *got is the payload length.  -EPROTO when it would not fit. */
static int hop_call(int fd, struct hop_req *q, const void *p1, size_t n1,
		    const void *p2, size_t n2, void *out, size_t cap,
		    size_t *got)
{
	struct iovec iov[3] = {
		{ q, sizeof(*q) }, { (void *)p1, n1 }, { (void *)p2, n2 } };
	struct hop_rep r;
	int rc;

	q->len = (uint32_t)(n1 + n2);
	rc = writev_full(fd, iov, 3);
	if (rc == 0)
		rc = read_full(fd, &r, sizeof(r));
	if (rc < 0)
		return rc;
	if (r.len > cap)
		return -EPROTO;
	rc = read_full(fd, out, r.len);
	if (rc < 0)
		return rc;
	if (got)
		*got = r.len;
	return r.status;
}

/* ================================================================ server */

/* Open files a twin keeps, as an iod keeps its subfiles open; past this
 * it closes them all and starts again (bounded, and rare in a run). */
#define HOP_TWIN_FDS 1024

/* -j: the log's size; it wraps, as TwinFS's does once checkpointed. */
#define HOP_LOG_BYTES (64ull << 20)
#define HOP_BLK 4096u

/* -j: the checkpoint starts when the writes waiting to go home hold half
 * the log, as TwinFS's does at half of its journal; a server that finds
 * the whole log's worth waiting writes them home itself. */
#define HOP_CK_START (HOP_LOG_BYTES / 2)

/* -j: a write journaled and answered, waiting to go home. */
struct hop_home {
	struct hop_home *next;
	int fd;
	uint64_t off;
	size_t len;
	uint8_t data[];         /* a copy, as an iod keeps journaled blocks */
};

struct srv {
	int dir_fd;
	int twin_port;          /* 0: no twin */
	pthread_mutex_t lock;   /* twin_fds, n_twin_fds, log_pos, log_seq,
				 * ck_* */
	struct tw_hmap twin_fds; /* ino -> fd + 1, on the twin side */
	size_t n_twin_fds;
	int log_fd;             /* -j: an unnamed file in DIR, else -1 */
	uint64_t log_pos, log_seq;
	struct hop_home *ck_head, *ck_tail; /* waiting to go home, in order */
	uint64_t ck_bytes;
	pthread_cond_t ck_cond; /* ck_bytes reached HOP_CK_START */
	pthread_mutex_t ck_run; /* one checkpoint at a time: writes home in
				 * the order they were answered */
};

static struct srv S;

static void checkpoint(void);

static int twin_fd(uint64_t ino)
{
	char name[32];
	intptr_t v;
	int fd;

	pthread_mutex_lock(&S.lock);
	v = (intptr_t)tw_hmap_get(&S.twin_fds, ino);
	if (!v && S.n_twin_fds >= HOP_TWIN_FDS) {
		uint64_t k;
		void *fv;

		/* the writes waiting to go home hold these descriptors */
		pthread_mutex_unlock(&S.lock);
		checkpoint();
		pthread_mutex_lock(&S.lock);

		for (size_t it = 0; tw_hmap_next(&S.twin_fds, &it, &k, &fv);) {
			close((int)(intptr_t)fv - 1);
			tw_hmap_del(&S.twin_fds, k);
		}
		S.n_twin_fds = 0;
	}
	if (!v) {
		snprintf(name, sizeof(name), "%" PRIu64, ino);
		fd = openat(S.dir_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC,
			    0644);
		if (fd >= 0 && tw_hmap_put(&S.twin_fds, ino,
					   (void *)(intptr_t)(fd + 1)) < 0) {
			close(fd);
			fd = -ENOMEM;
		} else if (fd < 0) {
			fd = -errno;
		} else {
			S.n_twin_fds++;
		}
	} else {
		fd = (int)v - 1;
	}
	pthread_mutex_unlock(&S.lock);
	return fd;
}

/* -j: journal len bytes of p, to be written at off of file ino (the
 * descriptor's tag), as one transaction: descriptor, data (the last block
 * padded with zeros), commit.  Returns 0 or -errno. */
static int log_append(const void *p, size_t len, uint64_t ino, uint64_t off)
{
	static const uint8_t zeros[HOP_BLK];
	uint8_t desc[HOP_BLK], commit[HOP_BLK];
	size_t nblk = (len + HOP_BLK - 1) / HOP_BLK;
	size_t pad = nblk * HOP_BLK - len;
	uint64_t need = (nblk + 2) * HOP_BLK, pos, seq, hdr[6];
	uint32_t crc = tw_crc32c(0, p, len);
	struct iovec iov[4];
	int n = 0;
	ssize_t w;

	pthread_mutex_lock(&S.lock);
	if (S.log_pos + need > HOP_LOG_BYTES)
		S.log_pos = 0;
	pos = S.log_pos;
	S.log_pos += need;
	seq = ++S.log_seq;
	pthread_mutex_unlock(&S.lock);
	memset(desc, 0, sizeof(desc));
	hdr[0] = 0x4a504f48; /* "HOPJ" */
	hdr[1] = seq;
	hdr[2] = ino;
	hdr[3] = off;
	hdr[4] = len;
	hdr[5] = crc;
	memcpy(desc, hdr, sizeof(hdr));
	memset(commit, 0, sizeof(commit));
	hdr[0] = 0x43504f48; /* "HOPC" */
	hdr[2] = tw_crc32c(crc, desc, sizeof(desc));
	memcpy(commit, hdr, 3 * sizeof(hdr[0]));
	iov[n++] = (struct iovec){ desc, sizeof(desc) };
	iov[n++] = (struct iovec){ (void *)p, len };
	if (pad)
		iov[n++] = (struct iovec){ (void *)zeros, pad };
	iov[n++] = (struct iovec){ commit, sizeof(commit) };
	w = pwritev(S.log_fd, iov, n, (off_t)pos);
	if (w < 0)
		return -errno;
	return (uint64_t)w == need ? 0 : -EIO;
}

/* -j: one write home (logged, not returned: the answer has gone). */
static void write_home(int fd, const void *p, size_t len, uint64_t off)
{
	if (pwrite(fd, p, len, (off_t)off) < 0)
		fprintf(stderr, "hopfs: a write home: %s\n", strerror(errno));
}

/* -j: the writes waiting to go home, written there in the order they
 * were answered (TwinFS's checkpoint). */
static void checkpoint(void)
{
	pthread_mutex_lock(&S.ck_run);
	pthread_mutex_lock(&S.lock);
	struct hop_home *h = S.ck_head;

	S.ck_head = S.ck_tail = NULL;
	S.ck_bytes = 0;
	pthread_mutex_unlock(&S.lock);
	while (h) {
		struct hop_home *next = h->next;

		write_home(h->fd, h->data, h->len, h->off);
		free(h);
		h = next;
	}
	pthread_mutex_unlock(&S.ck_run);
}

/* -j: a write journaled and answered goes home later: on the
 * checkpointer's thread once half the log waits, or here when the whole
 * log does (the checkpointer is behind). */
static void home_later(int fd, const void *p, size_t len, uint64_t off)
{
	struct hop_home *h = malloc(sizeof(*h) + len);
	bool self;

	if (h == NULL) {
		write_home(fd, p, len, off);
		return;
	}
	*h = (struct hop_home){ .fd = fd, .off = off, .len = len };
	memcpy(h->data, p, len);
	pthread_mutex_lock(&S.lock);
	if (S.ck_tail)
		S.ck_tail->next = h;
	else
		S.ck_head = h;
	S.ck_tail = h;
	S.ck_bytes += len;
	self = S.ck_bytes >= HOP_LOG_BYTES;
	if (S.ck_bytes >= HOP_CK_START)
		pthread_cond_signal(&S.ck_cond);
	pthread_mutex_unlock(&S.lock);
	if (self)
		checkpoint();
}

/* -j: every TW_COMMIT_INTERVAL_MS the log goes to the disk (syncfs), as
 * TwinFS's journal syncs its log; the checkpoint runs then too, and as
 * soon as half the log waits for it. */
static void *log_syncer(void *arg)
{
	struct timespec next, now;

	(void)arg;
	clock_gettime(CLOCK_REALTIME, &next);
	next.tv_sec += TW_COMMIT_INTERVAL_MS / 1000u;
	for (;;) {
		int rc = 0;

		pthread_mutex_lock(&S.lock);
		while (S.ck_bytes < HOP_CK_START && rc == 0)
			rc = pthread_cond_timedwait(&S.ck_cond, &S.lock, &next);
		pthread_mutex_unlock(&S.lock);
		clock_gettime(CLOCK_REALTIME, &now);
		/* on time whatever the checkpoints in between */
		if (now.tv_sec > next.tv_sec ||
		    (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
			if (syncfs(S.log_fd) < 0)
				fprintf(stderr, "hopfs: syncfs: %s\n",
					strerror(errno));
			next = now;
			next.tv_sec += TW_COMMIT_INTERVAL_MS / 1000u;
		}
		checkpoint();
	}
	return NULL;
}

/* The path in a payload: "" is the served directory itself. */
static const char *rel(const char *p)
{
	return *p ? p : ".";
}

static int stat_of(int fd, const char *path, struct stat *st)
{
	int rc = fd >= 0 ? fstat(fd, st)
			 : fstatat(S.dir_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);

	return rc < 0 ? -errno : 0;
}

/* A write journaled, to go home once answered (-j). */
struct hop_later {
	int fd;                 /* -1: none */
	const void *p;          /* in the connection's request buffer */
	size_t len;
	uint64_t off;
};

/* Serve one request; the reply payload goes to out (*olen bytes), a
 * write home left for after the answer to *home (-j). */
static int serve_one(const struct hop_req *q, char *p, char *out,
		     size_t *olen, int *twin, struct hop_later *home)
{
	struct stat *st = (struct stat *)out;
	int rc = 0, fd;

	*olen = 0;
	switch (q->op) {
	case HOP_LOOKUP:
	case HOP_STAT:
		rc = stat_of(q->op == HOP_STAT ? (int)q->fd : -1, p, st);
		break;
	case HOP_SETATTR: {
		struct timespec ts[2];
		const char *path = p + sizeof(ts);
		int fdq = (int)q->fd;

		if (q->len < sizeof(ts) + 1)
			return -EPROTO;
		memcpy(ts, p, sizeof(ts));
		if ((q->u1 & FUSE_SET_ATTR_MODE) &&
		    fchmodat(S.dir_fd, rel(path), (mode_t)q->u2, 0) < 0)
			rc = -errno;
		if (!rc && (q->u1 & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
		    fchownat(S.dir_fd, rel(path),
			     (q->u1 & FUSE_SET_ATTR_UID) ? (uid_t)(q->u3 >> 32)
							 : (uid_t)-1,
			     (q->u1 & FUSE_SET_ATTR_GID) ? (gid_t)q->u3
							 : (gid_t)-1,
			     AT_SYMLINK_NOFOLLOW) < 0)
			rc = -errno;
		if (!rc && (q->u1 & FUSE_SET_ATTR_SIZE)) {
			int tfd = fdq >= 0 ? fdq : openat(S.dir_fd, path,
							  O_WRONLY | O_CLOEXEC);

			if (tfd < 0 || ftruncate(tfd, (off_t)q->u4) < 0)
				rc = -errno;
			if (tfd >= 0 && tfd != fdq)
				close(tfd);
		}
		if (!rc && (q->u1 & (FUSE_SET_ATTR_ATIME |
				     FUSE_SET_ATTR_MTIME))) {
			if (!(q->u1 & FUSE_SET_ATTR_ATIME))
				ts[0].tv_nsec = UTIME_OMIT;
			else if (q->u1 & FUSE_SET_ATTR_ATIME_NOW)
				ts[0].tv_nsec = UTIME_NOW;
			if (!(q->u1 & FUSE_SET_ATTR_MTIME))
				ts[1].tv_nsec = UTIME_OMIT;
			else if (q->u1 & FUSE_SET_ATTR_MTIME_NOW)
				ts[1].tv_nsec = UTIME_NOW;
			if (utimensat(S.dir_fd, rel(path), ts,
				      AT_SYMLINK_NOFOLLOW) < 0)
				rc = -errno;
		}
		if (!rc)
			rc = stat_of(fdq, path, st);
		break;
	}
	case HOP_CREATE:
		fd = openat(S.dir_fd, p, ((int)q->u1 & ~O_DIRECT) | O_CREAT |
			    O_CLOEXEC, (mode_t)q->u2);
		if (fd < 0)
			return -errno;
		rc = stat_of(fd, p, st);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		*olen = sizeof(*st);
		return fd;
	case HOP_OPEN:
		/* The server's page cache stands in for TwinFS's iods, which
		 * read and write their files through it too. */
		fd = openat(S.dir_fd, p, ((int)q->u1 & ~(O_DIRECT | O_CREAT)) |
			    O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	case HOP_READ: {
		ssize_t n = pread((int)q->fd, out,
				  TW_MIN(q->u2, (uint64_t)HOP_MAX_IO),
				  (off_t)q->u1);

		if (n < 0)
			return -errno;
		*olen = (size_t)n;
		return 0;
	}
	case HOP_WRITE:
	case HOP_TWRITE: {
		struct hop_req t = { .op = HOP_TWRITE, .fd = -1,
				     .u1 = q->u1, .u2 = q->u2 };
		bool fwd = q->op == HOP_WRITE && S.twin_port;
		ssize_t n;

		if (fwd && *twin < 0)
			*twin = hop_connect(S.twin_port);
		if (fwd && *twin < 0)
			return *twin;
		/* Send to the twin first, write here meanwhile, then wait:
		 * the chain TwinFS's primary runs. */
		if (fwd) {
			struct iovec iov[2] = { { &t, sizeof(t) },
						{ p, q->len } };

			t.len = q->len;
			rc = writev_full(*twin, iov, 2);
			if (rc < 0) {
				close(*twin);
				*twin = -1;
				return rc;
			}
		}
		fd = q->op == HOP_TWRITE ? twin_fd(q->u2) : (int)q->fd;
		if (fd >= 0 && S.log_fd >= 0) {
			rc = log_append(p, q->len, q->u2, q->u1);
			if (rc == 0) {
				*home = (struct hop_later){ fd, p, q->len,
							    q->u1 };
				rc = (int)q->len;
			}
		} else {
			n = fd < 0 ? fd : pwrite(fd, p, q->len, (off_t)q->u1);
			rc = n < 0 ? (fd < 0 ? fd : -errno) : (int)n;
		}
		if (fwd) {
			struct hop_rep r;
			int e = read_full(*twin, &r, sizeof(r));

			if (e < 0 || r.len) {
				close(*twin);
				*twin = -1;
				return e < 0 ? e : -EPROTO;
			}
			if (r.status < 0 && rc >= 0)
				rc = r.status;
		}
		return rc;
	}
	case HOP_RELEASE:
		return close((int)q->fd) < 0 ? -errno : 0;
	case HOP_FSYNC:
		rc = q->u1 ? fdatasync((int)q->fd) : fsync((int)q->fd);
		return rc < 0 ? -errno : 0;
	case HOP_MKDIR:
		if (mkdirat(S.dir_fd, p, (mode_t)q->u1) < 0)
			return -errno;
		rc = stat_of(-1, p, st);
		break;
	case HOP_UNLINK:
	case HOP_RMDIR:
		rc = unlinkat(S.dir_fd, p, q->op == HOP_RMDIR ? AT_REMOVEDIR
							      : 0);
		return rc < 0 ? -errno : 0;
	case HOP_SYMLINK: {
		const char *path = p + strlen(p) + 1;

		if (strlen(p) + 1 >= q->len)
			return -EPROTO;
		if (symlinkat(p, S.dir_fd, path) < 0)
			return -errno;
		rc = stat_of(-1, path, st);
		break;
	}
	case HOP_READLINK: {
		ssize_t n = readlinkat(S.dir_fd, p, out, PATH_MAX);

		if (n < 0)
			return -errno;
		*olen = (size_t)n;
		return 0;
	}
	case HOP_RENAME:
		if (strlen(p) + 1 >= q->len)
			return -EPROTO;
		rc = renameat(S.dir_fd, p, S.dir_fd, p + strlen(p) + 1);
		return rc < 0 ? -errno : 0;
	case HOP_READDIR: {
		int dfd = openat(S.dir_fd, rel(p), O_RDONLY | O_DIRECTORY |
				 O_CLOEXEC);
		DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
		struct dirent *e;
		size_t off = 0;

		if (!d) {
			rc = -errno;
			if (dfd >= 0)
				close(dfd);
			return rc;
		}
		while ((e = readdir(d)) != NULL) {
			struct hop_dirent h = {
				.namelen = (uint32_t)strlen(e->d_name) };

			if (fstatat(dfd, e->d_name, &h.st,
				    AT_SYMLINK_NOFOLLOW) < 0)
				memset(&h.st, 0, sizeof(h.st));

			if (off + sizeof(h) + h.namelen > HOP_DIRBUF) {
				rc = -EFBIG;
				break;
			}
			memcpy(out + off, &h, sizeof(h));
			memcpy(out + off + sizeof(h), e->d_name, h.namelen);
			off += sizeof(h) + h.namelen;
		}
		closedir(d);
		*olen = off;
		return rc;
	}
	case HOP_STATFS:
		if (fstatvfs(S.dir_fd, (struct statvfs *)out) < 0)
			return -errno;
		*olen = sizeof(struct statvfs);
		return 0;
	default:
		return -ENOSYS;
	}
	if (rc == 0)
		*olen = sizeof(*st);
	return rc;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, twin = -1;
	char *in = malloc(HOP_BUF), *out = malloc(HOP_DIRBUF);
	struct hop_req q;

	while (in && out && read_full(fd, &q, sizeof(q)) == 0) {
		struct hop_rep r;
		size_t olen;

		if (q.len > HOP_BUF - 1 || read_full(fd, in, q.len) < 0)
			break;
		in[q.len] = 0;  /* paths end within the payload */
		/* -j: what any other request sees (a read, a size, a
		 * release of the descriptor) is home first */
		if (S.log_fd >= 0 && q.op != HOP_WRITE && q.op != HOP_TWRITE)
			checkpoint();
		struct hop_later home = { .fd = -1 };
		r.status = serve_one(&q, in, out, &olen, &twin, &home);
		r.len = (uint32_t)olen;
		struct iovec iov[2] = { { &r, sizeof(r) }, { out, olen } };

		if (writev_full(fd, iov, 2) < 0)
			break;
		/* Journaled and answered: home at the checkpoint. */
		if (home.fd >= 0)
			home_later(home.fd, home.p, home.len, home.off);
	}
	if (twin >= 0)
		close(twin);
	close(fd);
	free(in);
	free(out);
	return NULL;
}

static int serve(const char *dir, int port, int twin_port, bool journal)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, ls;

	signal(SIGPIPE, SIG_IGN);       /* a peer gone is an error, not death */
	S.dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (S.dir_fd < 0) {
		perror(dir);
		return 1;
	}
	S.twin_port = twin_port;
	S.log_fd = -1;
	pthread_mutex_init(&S.lock, NULL);
	pthread_mutex_init(&S.ck_run, NULL);
	pthread_cond_init(&S.ck_cond, NULL);
	if (journal) {
		S.log_fd = openat(S.dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
				  0600);
		if (S.log_fd < 0 || ftruncate(S.log_fd, HOP_LOG_BYTES) < 0) {
			fprintf(stderr, "hopfs: the log in %s: %s\n", dir,
				strerror(errno));
			return 1;
		}
		pthread_t t;

		if (pthread_create(&t, NULL, log_syncer, NULL)) {
			fprintf(stderr, "hopfs: cannot start the syncer\n");
			return 1;
		}
		pthread_detach(t);
	}
	tw_hmap_init(&S.twin_fds);
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0) {
		perror("hopfs: socket");
		return 1;
	}
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(ls, 64) < 0) {
		fprintf(stderr, "hopfs: 127.0.0.1:%d: %s\n", port,
			strerror(errno));
		return 1;
	}
	for (;;) {
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("hopfs: accept");
			return 1;
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)c)) {
			close(c);
			continue;
		}
		pthread_detach(t);
	}
}

/* ================================================================ client */

struct cli {
	int port;
	uint64_t root_ino;      /* the server's st_ino of its root */
	pthread_mutex_t lock;   /* paths */
	struct tw_hmap paths;   /* FUSE ino -> strdup'd path */
	pthread_key_t conn_key; /* this worker's connection, fd + 1 */
};

static struct cli C;

static void conn_close(void *v)
{
	close((int)(intptr_t)v - 1);
}

/* This FUSE worker's own connection: a worker sends and waits itself. */
static int conn(void)
{
	intptr_t v = (intptr_t)pthread_getspecific(C.conn_key);
	int fd;

	if (v)
		return (int)v - 1;
	fd = hop_connect(C.port);
	if (fd >= 0)
		pthread_setspecific(C.conn_key, (void *)(intptr_t)(fd + 1));
	return fd;
}

/* A worker's reply buffer (HOP_BUF).  Never freed: libfuse 3.14 keeps
 * its workers to the end. */
static __thread char *tbuf;

static char *buf(void)
{
	if (!tbuf)
		tbuf = malloc(HOP_BUF);
	return tbuf;
}

/* The call; on a broken connection the worker drops it (the next call
 * connects again). */
static int call(struct hop_req *q, const void *p1, size_t n1,
		const void *p2, size_t n2, void *out, size_t cap, size_t *got)
{
	int fd = conn(), rc;

	if (fd < 0)
		return fd;
	rc = hop_call(fd, q, p1, n1, p2, n2, out, cap, got);
	if (rc == -ECONNRESET || rc == -EPIPE || rc == -EPROTO) {
		close(fd);
		pthread_setspecific(C.conn_key, NULL);
	}
	return rc;
}

static fuse_ino_t fuse_ino(uint64_t st_ino)
{
	return st_ino == C.root_ino ? FUSE_ROOT_ID : st_ino;
}

/* ino's path (a copy, to free), or NULL. */
static char *path_of(fuse_ino_t ino)
{
	char *p;

	if (ino == FUSE_ROOT_ID)
		return strdup("");
	pthread_mutex_lock(&C.lock);
	p = tw_hmap_get(&C.paths, ino);
	p = p ? strdup(p) : NULL;
	pthread_mutex_unlock(&C.lock);
	return p;
}

static char *child(fuse_ino_t parent, const char *name)
{
	char *p = path_of(parent), *c = NULL;

	if (p && asprintf(&c, "%s%s%s", p, *p ? "/" : "", name) < 0)
		c = NULL;
	free(p);
	return c;
}

/* Remember path as ino's; out of memory, ino's later calls fail ESTALE. */
static void learn(uint64_t ino, const char *path)
{
	char *p = strdup(path), *old;

	if (!p || ino == C.root_ino) {
		free(p);
		return;
	}
	pthread_mutex_lock(&C.lock);
	old = tw_hmap_get(&C.paths, ino);
	if (tw_hmap_put(&C.paths, ino, p) < 0)
		free(p);
	else
		free(old);
	pthread_mutex_unlock(&C.lock);
}

static void reply_entry(fuse_req_t req, const char *path, struct stat *st)
{
	struct fuse_entry_param e = { .attr_timeout = 1.0,
				      .entry_timeout = 1.0 };

	learn(st->st_ino, path);
	st->st_ino = fuse_ino(st->st_ino);
	e.ino = st->st_ino;
	e.attr = *st;
	fuse_reply_entry(req, &e);
}

/* A call whose payload is a path and whose answer is a struct stat, then
 * an entry reply. */
static void path_entry(fuse_req_t req, struct hop_req *q, char *path,
		       const void *pre, size_t npre)
{
	struct stat st;
	size_t got;
	int rc;

	if (!path) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = call(q, pre, npre, path, strlen(path) + 1, &st, sizeof(st), &got);
	if (rc == -ENOENT && q->op == HOP_LOOKUP) {
		/* A negative entry, cached as TwinFS's are. */
		struct fuse_entry_param e = { .entry_timeout = 1.0 };

		fuse_reply_entry(req, &e);
	} else if (rc < 0 || got != sizeof(st))
		fuse_reply_err(req, rc < 0 ? -rc : EPROTO);
	else
		reply_entry(req, path, &st);
	free(path);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct hop_req q = { .op = HOP_LOOKUP, .fd = -1 };

	path_entry(req, &q, child(parent, name), NULL, 0);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct hop_req q = { .op = HOP_MKDIR, .fd = -1, .u1 = mode };

	path_entry(req, &q, child(parent, name), NULL, 0);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	struct hop_req q = { .op = HOP_SYMLINK, .fd = -1 };

	path_entry(req, &q, child(parent, name), target, strlen(target) + 1);
}

static void attr_reply(fuse_req_t req, int rc, struct stat *st, size_t got)
{
	if (rc < 0 || got != sizeof(*st)) {
		fuse_reply_err(req, rc < 0 ? -rc : EPROTO);
		return;
	}
	st->st_ino = fuse_ino(st->st_ino);
	fuse_reply_attr(req, st, 1.0);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_STAT, .fd = fi ? (int64_t)fi->fh : -1 };
	char *path = path_of(ino);
	struct stat st;
	size_t got = 0;
	int rc = path ? call(&q, path, strlen(path) + 1, NULL, 0, &st,
			     sizeof(st), &got) : -ESTALE;

	free(path);
	attr_reply(req, rc, &st, got);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct hop_req q = {
		.op = HOP_SETATTR, .fd = fi ? (int64_t)fi->fh : -1,
		.u1 = (uint64_t)to_set, .u2 = attr->st_mode,
		.u3 = (uint64_t)attr->st_uid << 32 | attr->st_gid,
		.u4 = (uint64_t)attr->st_size };
	struct timespec ts[2] = { attr->st_atim, attr->st_mtim };
	char *path = path_of(ino);
	struct stat st;
	size_t got = 0;
	int rc = path ? call(&q, ts, sizeof(ts), path, strlen(path) + 1, &st,
			     sizeof(st), &got) : -ESTALE;

	free(path);
	attr_reply(req, rc, &st, got);
}

/* As TwinFS (fuse-client/ops_file.c): O_DIRECT and O_APPEND opens are
 * direct I/O, so the kernel sends their requests as they come. */
static unsigned direct_io(int flags)
{
	return (flags & (O_DIRECT | O_APPEND)) ? 1 : 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_CREATE, .fd = -1,
			     .u1 = (uint64_t)fi->flags, .u2 = mode };
	char *path = child(parent, name);
	struct fuse_entry_param e = { .attr_timeout = 1.0,
				      .entry_timeout = 1.0 };
	size_t got = 0;
	int rc = path ? call(&q, path, strlen(path) + 1, NULL, 0, &e.attr,
			     sizeof(e.attr), &got) : -ESTALE;

	if (rc < 0 || got != sizeof(e.attr)) {
		fuse_reply_err(req, rc < 0 ? -rc : EPROTO);
	} else {
		learn(e.attr.st_ino, path);
		e.ino = e.attr.st_ino = fuse_ino(e.attr.st_ino);
		fi->fh = (uint64_t)rc;
		fi->direct_io = direct_io(fi->flags);
		fuse_reply_create(req, &e, fi);
	}
	free(path);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_OPEN, .fd = -1,
			     .u1 = (uint64_t)fi->flags };
	char *path = path_of(ino);
	int rc = path ? call(&q, path, strlen(path) + 1, NULL, 0, NULL, 0,
			     NULL) : -ESTALE;

	free(path);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)rc;
	fi->direct_io = direct_io(fi->flags);
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_READ, .fd = (int64_t)fi->fh,
			     .u1 = (uint64_t)off, .u2 = size };
	char *b = buf();
	size_t got = 0;
	int rc = b ? call(&q, NULL, 0, NULL, 0, b, HOP_BUF, &got) : -ENOMEM;

	(void)ino;
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, b, got);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *data,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_WRITE, .fd = (int64_t)fi->fh,
			     .u1 = (uint64_t)off, .u2 = ino };
	int rc = call(&q, data, size, NULL, 0, NULL, 0, NULL);

	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0); /* every write was answered by the server */
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_RELEASE, .fd = (int64_t)fi->fh };

	(void)ino;
	fuse_reply_err(req, -call(&q, NULL, 0, NULL, 0, NULL, 0, NULL));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_FSYNC, .fd = (int64_t)fi->fh,
			     .u1 = (uint64_t)datasync };

	(void)ino;
	fuse_reply_err(req, -call(&q, NULL, 0, NULL, 0, NULL, 0, NULL));
}

static void name_op(fuse_req_t req, enum hop_op op, fuse_ino_t parent,
		    const char *name)
{
	struct hop_req q = { .op = op, .fd = -1 };
	char *path = child(parent, name);
	int rc = path ? call(&q, path, strlen(path) + 1, NULL, 0, NULL, 0,
			     NULL) : -ESTALE;

	free(path);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	name_op(req, HOP_UNLINK, parent, name);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	name_op(req, HOP_RMDIR, parent, name);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct hop_req q = { .op = HOP_RENAME, .fd = -1 };
	char *a = child(parent, name), *b = child(newparent, newname);
	int rc = flags ? -EINVAL : (a && b) ?
		call(&q, a, strlen(a) + 1, b, strlen(b) + 1, NULL, 0, NULL) :
		-ESTALE;

	free(a);
	free(b);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct hop_req q = { .op = HOP_READLINK, .fd = -1 };
	char *path = path_of(ino), *b = buf();
	size_t got = 0;
	int rc = path && b ? call(&q, path, strlen(path) + 1, NULL, 0, b,
				  HOP_BUF - 1, &got) : -ENOMEM;

	free(path);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	b[got] = 0;
	fuse_reply_readlink(req, b);
}

/* A directory handle: the whole listing, fetched at opendir. */
struct dirh {
	char *data;
	size_t len;
	char *path;     /* the directory's, for the entries' paths */
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct hop_req q = { .op = HOP_READDIR, .fd = -1 };
	char *path = path_of(ino);
	struct dirh *h = calloc(1, sizeof(*h));
	int rc = -ENOMEM;

	if (path && h && (h->data = malloc(HOP_DIRBUF)))
		rc = call(&q, path, strlen(path) + 1, NULL, 0, h->data,
			  HOP_DIRBUF, &h->len);
	if (rc < 0) {
		free(path);
		if (h)
			free(h->data);
		free(h);
		fuse_reply_err(req, -rc);
		return;
	}
	h->path = path;
	fi->fh = (uint64_t)(uintptr_t)h;
	fuse_reply_open(req, fi);
}

static void list(fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi, bool plus)
{
	struct dirh *h = (struct dirh *)(uintptr_t)fi->fh;
	char *out = malloc(size), name[256];
	size_t pos = (size_t)off, used = 0;

	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* off is the byte offset of the next record in the listing. */
	while (pos + sizeof(struct hop_dirent) <= h->len) {
		struct hop_dirent e;
		off_t next;
		size_t n;

		memcpy(&e, h->data + pos, sizeof(e));
		if (e.namelen >= sizeof(name))
			break;
		memcpy(name, h->data + pos + sizeof(e), e.namelen);
		name[e.namelen] = 0;
		next = (off_t)(pos + sizeof(e) + e.namelen);
		if (!plus || !e.st.st_ino || !strcmp(name, ".") ||
		    !strcmp(name, "..")) {
			struct stat st = { .st_ino = fuse_ino(e.st.st_ino),
					   .st_mode = e.st.st_mode & S_IFMT };

			n = plus ? fuse_add_direntry_plus(req, out + used,
				size - used, name,
				&(struct fuse_entry_param){ .attr = st }, next)
				 : fuse_add_direntry(req, out + used,
				size - used, name, &st, next);
		} else {
			struct fuse_entry_param ep = { .attr = e.st,
						       .attr_timeout = 1.0,
						       .entry_timeout = 1.0 };
			char *path = NULL;

			ep.ino = ep.attr.st_ino = fuse_ino(e.st.st_ino);
			n = fuse_add_direntry_plus(req, out + used, size - used,
						   name, &ep, next);
			/* Learned only when it fits: the kernel takes the
			 * entry (and a lookup count) only then. */
			if (n <= size - used &&
			    asprintf(&path, "%s%s%s", h->path,
				     *h->path ? "/" : "", name) >= 0) {
				learn(e.st.st_ino, path);
				free(path);
			}
		}
		if (n > size - used)
			break;
		used += n;
		pos = (size_t)next;
	}
	fuse_reply_buf(req, out, used);
	free(out);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	list(req, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	list(req, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirh *h = (struct dirh *)(uintptr_t)fi->fh;

	(void)ino;
	free(h->data);
	free(h->path);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct hop_req q = { .op = HOP_STATFS, .fd = -1 };
	struct statvfs sv;
	size_t got = 0;
	int rc = call(&q, NULL, 0, NULL, 0, &sv, sizeof(sv), &got);

	(void)ino;
	if (rc < 0 || got != sizeof(sv))
		fuse_reply_err(req, rc < 0 ? -rc : EPROTO);
	else
		fuse_reply_statfs(req, &sv);
}

static void op_init(void *ud, struct fuse_conn_info *c)
{
	(void)ud;
	/* As TwinFS asks (fuse-client/ops_meta.c fc_init). */
	c->max_write = HOP_MAX_IO;
	c->max_readahead = HOP_MAX_IO;
	if (c->max_background < 64)
		c->max_background = 64;
	if (c->congestion_threshold < 48)
		c->congestion_threshold = 48;
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.create = op_create,
};

static int mount_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc;
	struct fuse_session *se;
	struct hop_req q = { .op = HOP_LOOKUP, .fd = -1 };
	struct stat st;
	size_t got = 0;
	int rc, fd, i;

	/* argv: MOUNTPOINT PORT [FUSE options] */
	C.port = atoi(argv[1]);
	pthread_mutex_init(&C.lock, NULL);
	tw_hmap_init(&C.paths);
	pthread_key_create(&C.conn_key, conn_close);
	fd = conn();
	rc = fd < 0 ? fd : call(&q, "", 1, NULL, 0, &st, sizeof(st), &got);
	if (rc < 0 || got != sizeof(st)) {
		fprintf(stderr, "hopfs: server 127.0.0.1:%d: %s\n", C.port,
			strerror(rc < 0 ? -rc : EPROTO));
		return 1;
	}
	C.root_ino = st.st_ino;
	fuse_opt_add_arg(&args, "hopfs");
	for (i = 2; i < argc; i++)
		fuse_opt_add_arg(&args, argv[i]);
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_set_signal_handlers(se) ||
	    fuse_session_mount(se, argv[0])) {
		fprintf(stderr, "hopfs: cannot mount %s\n", argv[0]);
		return 1;
	}
	lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, 10); /* TwinFS's default */
	rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool j = argc >= 3 && !strcmp(argv[2], "-j");

	if (argc >= 4 + j && !strcmp(argv[1], "serve"))
		return serve(argv[2 + j], atoi(argv[3 + j]),
			     argc > 4 + j ? atoi(argv[4 + j]) : 0, j);
	if (argc >= 4 && !strcmp(argv[1], "mount"))
		return mount_main(argc - 2, argv + 2);
	fprintf(stderr, "usage: hopfs serve [-j] DIR PORT [TWIN_PORT]\n"
			"       hopfs mount MOUNTPOINT PORT [FUSE options]\n");
	return 2;
}
