/* reclog.c - the record-mode journal of mgrd: an append-only log of opaque
 * records plus a snapshot of the caller's state.
 *
 * This file implements the files `journal` (log header + records) and
 * `snapshot` of journal/FORMAT.md: appending and closing records (one
 * pwrite each, each saying how far the log was synced), syncing, replay
 * with torn-tail cut-off (and its refusal when a record written after the
 * bad one had been synced follows it: damage, invariants 11, 12), the
 * upgrade of a version 1 log (invariant 13), the snapshot
 * protocol (snapshot.tmp, fsync, rename, fsync dir; then the same dance for a
 * fresh log), and the snapshot in the background (invariant 16: the log
 * goes on in journal.next while another process writes snapshot.tmp).  It does not implement the block journal of the iods.  The
 * byte layout, the validity rule, the numbered invariants cited by the
 * asserts below ("invariant N") and the state diagram live in FORMAT.md.
 *
 * Every write-level operation on the log's files (pwrite, ftruncate, rename,
 * fsync/fdatasync) goes through the op_* wrappers, which implement the fault
 * injection of jnl_rec_inject_fault for the crash tests.
 *
 * Not thread-safe: one owner thread per log (journal.h).
 */
#include "journal.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"

/* ------------------------------------------------------------ on-disk */

#define LOG_MAGIC     0x4c525754u   /* "TWRL" */
#define REC_MAGIC     0x52525754u   /* "TWRR" */
#define SNAP_MAGIC    0x53525754u   /* "TWRS" */
#define LOG_VERSION   3             /* records as 2; may have a journal.next */
#define LOG_VERSION_2 2             /* records carry synced_to */
#define LOG_VERSION_1 1             /* still read, then upgraded at open */
#define SNAP_VERSION  1
#define REC_TYPE_DATA 1

/* Largest snapshot payload (FORMAT.md "Limits"). */
#define SNAP_MAX      (16ull << 30)

#define LOG_NAME      "journal"
#define LOG_TMP_NAME  "journal.tmp"
#define NEXT_NAME     "journal.next"
#define SNAP_NAME     "snapshot"
#define SNAP_TMP_NAME "snapshot.tmp"

/* JNL_REC_WAIT_LOCK waits this long for the directory's lock. */
#define LOCK_WAIT_MS  10000u

/* One entry of the sparse log index per this many records. */
#define IDX_STEP      256u

/* Replay reads the log through a window of at least this many bytes. */
#define READ_WINDOW   (1u << 20)

/* All fields little-endian. */
struct log_hdr {
	uint32_t magic;          /* LOG_MAGIC */
	uint16_t version;        /* LOG_VERSION */
	uint16_t hdr_size;       /* sizeof(struct log_hdr) */
	uint8_t log_id[16];      /* random, new for every log generation */
	uint64_t base_seq;       /* seq of the first record of this log */
	uint8_t reserved[28];    /* zero */
	uint32_t crc;            /* crc32c(0, bytes 0..59) */
};
_Static_assert(sizeof(struct log_hdr) == 64, "log header is 64 bytes");

/* Record header of a version 2 log. */
struct rec_hdr {
	uint32_t magic;          /* REC_MAGIC */
	uint16_t type;           /* REC_TYPE_DATA */
	uint16_t flags;          /* zero */
	uint64_t seq;
	uint64_t synced_to;      /* highest seq synced when this was written */
	uint32_t len;            /* payload bytes, <= JNL_REC_MAX */
	uint32_t crc;            /* crc32c(seed(log_id), bytes 0..27 || payload) */
};
_Static_assert(sizeof(struct rec_hdr) == 32, "record header is 32 bytes");

/* Record header of a version 1 log: no synced_to. */
struct rec_hdr_v1 {
	uint32_t magic;          /* REC_MAGIC */
	uint16_t type;           /* REC_TYPE_DATA */
	uint16_t flags;          /* zero */
	uint64_t seq;
	uint32_t len;            /* payload bytes, <= JNL_REC_MAX */
	uint32_t crc;            /* crc32c(seed(log_id), bytes 0..19 || payload) */
};
_Static_assert(sizeof(struct rec_hdr_v1) == 24, "v1 record header is 24 bytes");

struct snap_hdr {
	uint32_t magic;          /* SNAP_MAGIC */
	uint16_t version;        /* SNAP_VERSION */
	uint16_t hdr_size;       /* sizeof(struct snap_hdr) */
	uint64_t seq;            /* last record included, 0 = none */
	uint64_t len;            /* payload bytes, <= SNAP_MAX */
	uint32_t reserved;       /* zero */
	uint32_t crc;            /* crc32c(crc32c(0, bytes 0..27), payload) */
};
_Static_assert(sizeof(struct snap_hdr) == 32, "snapshot header is 32 bytes");

#define LOG_HDR_SIZE  ((uint64_t)sizeof(struct log_hdr))
/* The largest record header of any version (reads are sized by it). */
#define REC_HDR_MAX   ((uint64_t)sizeof(struct rec_hdr))
#define SNAP_HDR_SIZE ((uint64_t)sizeof(struct snap_hdr))

/* ------------------------------------------------------------ handle */

enum fault_mode { FAULT_FAIL = 0, FAULT_TEAR = 1, FAULT_DROP = 2, FAULT_NONE = -1 };

struct jnl_rec {
	char *dir;
	int dirfd;               /* holds the flock that excludes other owners */
	int fd;                  /* the current log file (named `journal`) */
	uint8_t log_id[16];
	uint32_t crc_seed;       /* crc32c(0, log_id) */
	uint64_t base_seq;       /* first seq of the current log file */
	uint64_t next_seq;       /* seq of the next append (invariant 10) */
	uint64_t end_off;        /* just after the last closed record (invariant 3) */
	uint64_t synced_seq;     /* every record up to it survived an
	                          * fdatasync of this log (invariant 12) */
	unsigned log_version;    /* of the current log: LOG_VERSION(_1, _2) */
	uint64_t hdr_size;       /* its record header: 32, or 24 for v1 */
	uint64_t snap_seq;       /* seq of the snapshot named `snapshot` */
	uint64_t snap_len;       /* its payload bytes */
	bool aborted;            /* sticky -EIO (invariant 5) */
	/* Sparse index of the current log: idx[k] is the offset of record
	 * base_seq + k * IDX_STEP, for k < idx_n (jnl_rec_iter_start seeks
	 * by it instead of reading every header from the start). */
	uint64_t *idx;
	size_t idx_n, idx_cap;

	/* While a snapshot in the background is pending (invariant 16): the
	 * log named `journal`, records base_seq .. prev->end; the current log
	 * is then `journal.next`.  Only its file fields are used. */
	struct jnl_rec *prev;
	bool bg_on;              /* jnl_rec_snap_begin without finish/abandon */
	uint64_t bg_seq;         /* the seq it began at */

	void *wbuf;              /* append buffer: header + payload */
	size_t wbuf_cap;

	unsigned fault_nth;      /* 0 = no fault armed */
	int fault_mode;
};

/* ------------------------------------------------------ fault injection */

/* Counts one write-level operation; returns the fault to apply to it. */
static int fault_take(struct jnl_rec *j)
{
	if (j == NULL || j->fault_nth == 0)
		return FAULT_NONE;
	if (--j->fault_nth != 0)
		return FAULT_NONE;
	return j->fault_mode;
}

void jnl_rec_inject_fault(struct jnl_rec *j, unsigned nth, int mode)
{
	assert(nth == 0 || mode == FAULT_FAIL || mode == FAULT_TEAR ||
	       mode == FAULT_DROP);
	j->fault_nth = nth;
	j->fault_mode = mode;
}

/* pwritev until done (allow_short) or exactly once (!allow_short: a short
 * write is an error, the log's "one write(2) per record" rule). */
static int write_iov(int fd, const struct iovec *iov_in, int cnt, uint64_t off,
		     size_t limit, bool allow_short)
{
	struct iovec iov[2];
	size_t left = limit;
	int n = 0;

	assert(cnt >= 1 && cnt <= 2);
	for (int i = 0; i < cnt && left > 0; i++) {
		iov[n] = iov_in[i];
		if (iov[n].iov_len > left)
			iov[n].iov_len = left;
		left -= iov[n].iov_len;
		n++;
	}
	for (int i = 0; i < n;) {
		ssize_t w = pwritev(fd, iov + i, n - i, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += (uint64_t)w;
		while (i < n && (size_t)w >= iov[i].iov_len) {
			w -= (ssize_t)iov[i].iov_len;
			i++;
		}
		if (i < n) {
			if (!allow_short)
				return -EIO;
			iov[i].iov_base = (char *)iov[i].iov_base + w;
			iov[i].iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* One write-level operation.  Faults: fail = nothing written, -EIO; tear =
 * the first half (rounded down) written, -EIO; drop = nothing written, 0. */
static int op_write(struct jnl_rec *j, int fd, const struct iovec *iov, int cnt,
		    uint64_t off, bool allow_short)
{
	size_t total = 0;
	int rc;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	switch (fault_take(j)) {
	case FAULT_FAIL:
		return -EIO;
	case FAULT_DROP:
		return 0;
	case FAULT_TEAR:
		rc = write_iov(fd, iov, cnt, off, total / 2, true);
		return rc < 0 ? rc : -EIO;
	default:
		return write_iov(fd, iov, cnt, off, total, allow_short);
	}
}

/* For the operations below, tear means "took effect, then reported -EIO":
 * the caller cannot know whether it happened, as after a real error. */
static int fsync_faulted(int mode, int fd, bool data_only)
{
	if (mode == FAULT_FAIL)
		return -EIO;
	if (mode == FAULT_DROP)
		return 0;
	if ((data_only ? fdatasync(fd) : fsync(fd)) < 0)
		return -errno;
	return mode == FAULT_TEAR ? -EIO : 0;
}

static int op_fsync(struct jnl_rec *j, int fd, bool data_only)
{
	return fsync_faulted(fault_take(j), fd, data_only);
}

static int op_rename(struct jnl_rec *j, int dirfd, const char *from,
		     const char *to)
{
	int mode = fault_take(j);

	if (mode == FAULT_FAIL)
		return -EIO;
	if (mode == FAULT_DROP)
		return 0;
	if (renameat(dirfd, from, dirfd, to) < 0)
		return -errno;
	return mode == FAULT_TEAR ? -EIO : 0;
}

static int op_ftruncate(struct jnl_rec *j, int fd, uint64_t len)
{
	int mode = fault_take(j);

	if (mode == FAULT_FAIL)
		return -EIO;
	if (mode == FAULT_DROP)
		return 0;
	if (ftruncate(fd, (off_t)len) < 0)
		return -errno;
	return mode == FAULT_TEAR ? -EIO : 0;
}

/* -------------------------------------------------------------- helpers */

static void log_abort(struct jnl_rec *j, const char *what, int rc)
{
	if (!j->aborted)
		tw_err("journal %s: %s failed (%s); log aborted, every later "
		       "change fails with EIO", j->dir, what, strerror(-rc));
	j->aborted = true;
}

/* Record seq lies at offset off of the current log: note it when it is
 * the next point of the sparse index.  Without memory the index just
 * stops growing (seeks read more headers). */
static void idx_note(struct jnl_rec *j, uint64_t seq, uint64_t off)
{
	if (seq - j->base_seq != (uint64_t)j->idx_n * IDX_STEP)
		return;
	if (j->idx_n == j->idx_cap) {
		size_t cap = j->idx_cap ? 2 * j->idx_cap : 64;
		uint64_t *n = realloc(j->idx, cap * sizeof(*n));

		if (n == NULL)
			return;
		j->idx = n;
		j->idx_cap = cap;
	}
	j->idx[j->idx_n++] = off;
}

static uint32_t log_hdr_crc(const struct log_hdr *h)
{
	return tw_crc32c(0, h, offsetof(struct log_hdr, crc));
}

static uint32_t snap_hdr_crc(const struct snap_hdr *h)
{
	return tw_crc32c(0, h, offsetof(struct snap_hdr, crc));
}

/* CRC of a record: header bytes before the crc field (its last 4 bytes in
 * both versions), then the payload, seeded with the log id so that records
 * of another log never validate. */
static uint32_t rec_crc(const struct jnl_rec *j, const uint8_t *hdr,
			const void *payload, size_t len)
{
	uint32_t crc = tw_crc32c(j->crc_seed, hdr, (size_t)j->hdr_size - 4);

	return tw_crc32c(crc, payload, len);
}

/* Decodes the record header at p in the current log's version into host
 * order; a version 1 header gets synced_to 0 (nothing known synced). */
static void rec_decode(const struct jnl_rec *j, const uint8_t *p,
		       struct rec_hdr *out)
{
	struct rec_hdr_v1 v1;

	if (j->log_version != LOG_VERSION_1) {
		memcpy(out, p, sizeof(*out));
		out->magic = le32toh(out->magic);
		out->type = le16toh(out->type);
		out->flags = le16toh(out->flags);
		out->seq = le64toh(out->seq);
		out->synced_to = le64toh(out->synced_to);
		out->len = le32toh(out->len);
		out->crc = le32toh(out->crc);
		return;
	}
	memcpy(&v1, p, sizeof(v1));
	out->magic = le32toh(v1.magic);
	out->type = le16toh(v1.type);
	out->flags = le16toh(v1.flags);
	out->seq = le64toh(v1.seq);
	out->synced_to = 0;
	out->len = le32toh(v1.len);
	out->crc = le32toh(v1.crc);
}

/* Encodes a version 2 record header (crc computed over it and payload)
 * into hdr. */
static void rec_encode(const struct jnl_rec *j, uint8_t *hdr, uint64_t seq,
		       uint64_t synced_to, const void *payload, size_t len)
{
	struct rec_hdr h;

	assert(j->log_version == LOG_VERSION);  /* only v3 is written */
	memset(&h, 0, sizeof(h));
	h.magic = htole32(REC_MAGIC);
	h.type = htole16(REC_TYPE_DATA);
	h.seq = htole64(seq);
	h.synced_to = htole64(synced_to);
	h.len = htole32((uint32_t)len);
	memcpy(hdr, &h, sizeof(h));
	h.crc = htole32(rec_crc(j, hdr, payload, len));
	memcpy(hdr, &h, sizeof(h));
}

/* pread exactly len bytes; -EIO on a short read (the caller checked size). */
static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
	long n = tw_pread_full(fd, buf, len, off);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EIO;
}

static int unlink_tmp(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* A read window over the log file: [win_off, win_off + win_len). */
struct reader {
	int fd;
	uint64_t size;
	uint8_t *buf;
	size_t cap;
	uint64_t win_off;
	size_t win_len;
};

static int reader_get(struct reader *r, uint64_t off, size_t len,
		      const uint8_t **out);

/* Upgrade of a version 1 log: writes its closed records, [LOG_HDR_SIZE,
 * copy_end) of the current log, to fd from LOG_HDR_SIZE on as version 2
 * records of the log whose checksum seed is `seed`.  Their synced_to is
 * base - 1: nothing of the new file is known synced while it is written.
 * Sets *end to the offset after the last. */
static int copy_records_v2(struct jnl_rec *j, int fd, uint32_t seed,
			   uint64_t copy_end, uint64_t *end)
{
	struct jnl_rec to = { .crc_seed = seed, .log_version = LOG_VERSION,
			      .hdr_size = REC_HDR_MAX };
	struct reader r = { .fd = j->fd, .size = copy_end };
	uint64_t off = LOG_HDR_SIZE, out_off = LOG_HDR_SIZE;
	uint8_t hdr[sizeof(struct rec_hdr)];
	int rc = 0;

	while (off < copy_end) {
		const uint8_t *p = NULL;
		struct rec_hdr h;
		struct iovec iov[2];

		/* scan_log validated these records: the lengths fit. */
		rc = reader_get(&r, off, (size_t)j->hdr_size, &p);
		if (rc < 0)
			goto out;
		rec_decode(j, p, &h);
		rc = reader_get(&r, off, (size_t)(j->hdr_size + h.len), &p);
		if (rc < 0)
			goto out;
		rec_encode(&to, hdr, h.seq, j->base_seq - 1, p + j->hdr_size,
			   h.len);
		iov[0].iov_base = hdr;
		iov[0].iov_len = sizeof(hdr);
		iov[1].iov_base = (void *)(p + j->hdr_size);
		iov[1].iov_len = h.len;
		rc = op_write(j, fd, iov, h.len ? 2 : 1, out_off, true);
		if (rc < 0)
			goto out;
		off += j->hdr_size + h.len;
		out_off += sizeof(hdr) + h.len;
	}
	*end = out_off;
out:
	free(r.buf);
	return rc;
}

/* Write a fresh log with base seq `base` as journal.tmp, fsync, rename it to
 * `journal`, fsync the directory, and make it the current log.  With
 * copy_end > 0 the fresh log first gets the records of the current (version
 * 1) log up to copy_end, so that it replaces it with the same base
 * (invariant 13).  *committed tells the caller whether the rename may have
 * happened: if it may have and an error is returned, the name `journal`
 * may denote a file the handle does not write to, so the caller must
 * abort. */
static int create_log_as(struct jnl_rec *j, const char *name, uint64_t base,
			 uint64_t copy_end, bool *committed)
{
	struct log_hdr h;
	struct iovec iov;
	uint8_t id[16];
	uint64_t end = LOG_HDR_SIZE;
	int fd = -1, rc;

	*committed = false;
	rc = tw_random(id, sizeof(id));
	if (rc < 0)
		goto out;
	memset(&h, 0, sizeof(h));
	h.magic = htole32(LOG_MAGIC);
	h.version = htole16(LOG_VERSION);
	h.hdr_size = htole16(sizeof(h));
	memcpy(h.log_id, id, sizeof(id));
	h.base_seq = htole64(base);
	h.crc = htole32(log_hdr_crc(&h));

	fd = openat(j->dirfd, LOG_TMP_NAME, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	iov.iov_base = &h;
	iov.iov_len = sizeof(h);
	rc = op_write(j, fd, &iov, 1, 0, true);
	if (rc < 0)
		goto out;
	if (copy_end > 0) {
		rc = copy_records_v2(j, fd, tw_crc32c(0, id, sizeof(id)),
				     copy_end, &end);
		if (rc < 0)
			goto out;
	}
	rc = op_fsync(j, fd, false);
	if (rc < 0)
		goto out;
	*committed = true;
	rc = op_rename(j, j->dirfd, LOG_TMP_NAME, name);
	if (rc < 0)
		goto out;
	rc = op_fsync(j, j->dirfd, false);
	if (rc < 0)
		goto out;

	if (j->fd >= 0)
		close(j->fd);
	j->fd = fd;
	fd = -1;
	memcpy(j->log_id, id, sizeof(id));
	j->crc_seed = tw_crc32c(0, id, sizeof(id));
	j->base_seq = base;
	j->end_off = end;
	/* A copied log (copy_end > 0) stays without index entries (its next
	 * append is not at base_seq): seeks in it scan from the start. */
	j->idx_n = 0;
	j->log_version = LOG_VERSION;
	j->hdr_size = REC_HDR_MAX;
out:
	if (fd >= 0) {
		close(fd);
		unlink_tmp(j->dirfd, LOG_TMP_NAME);
	}
	return rc;
}

/* create_log_as the log named `journal`. */
static int create_log(struct jnl_rec *j, uint64_t base, uint64_t copy_end,
		      bool *committed)
{
	return create_log_as(j, LOG_NAME, base, copy_end, committed);
}

/* Moves the current log file's fields (descriptor, id, seqs, index) to a
 * new file-only handle: it becomes j->prev (invariant 16). */
static int prev_take(struct jnl_rec *j)
{
	struct jnl_rec *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return -ENOMEM;
	assert(j->prev == NULL);
	p->dirfd = -1;
	p->fd = j->fd;
	memcpy(p->log_id, j->log_id, sizeof(p->log_id));
	p->crc_seed = j->crc_seed;
	p->base_seq = j->base_seq;
	p->end_off = j->end_off;
	p->log_version = j->log_version;
	p->hdr_size = j->hdr_size;
	p->idx = j->idx;
	p->idx_n = j->idx_n;
	p->idx_cap = j->idx_cap;
	j->fd = -1;
	j->idx = NULL;
	j->idx_n = j->idx_cap = 0;
	j->prev = p;
	return 0;
}

/* Undoes prev_take (the new log did not come). */
static void prev_give_back(struct jnl_rec *j)
{
	struct jnl_rec *p = j->prev;

	assert(p != NULL && j->fd < 0);
	j->fd = p->fd;
	j->idx = p->idx;
	j->idx_n = p->idx_n;
	j->idx_cap = p->idx_cap;
	free(p);
	j->prev = NULL;
}

static void prev_drop(struct jnl_rec *j)
{
	jnl_rec_close(j->prev);
	j->prev = NULL;
}

/* ------------------------------------------------------------- replay */

/* Reads the snapshot, if any.  On success *present says whether there is
 * one; then *payload (malloc'd, caller frees; may be NULL when len is 0),
 * *len and *seq describe it. */
static int read_snapshot(struct jnl_rec *j, bool *present, void **payload,
			 uint64_t *len, uint64_t *seq)
{
	struct snap_hdr h;
	struct stat st;
	void *buf = NULL;
	int fd, rc;

	*present = false;
	*payload = NULL;
	fd = openat(j->dirfd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	rc = -EBADMSG;
	if ((uint64_t)st.st_size < SNAP_HDR_SIZE) {
		tw_err("journal %s: snapshot is %lld bytes, shorter than its "
		       "header", j->dir, (long long)st.st_size);
		goto out;
	}
	rc = read_exact(fd, &h, sizeof(h), 0);
	if (rc < 0)
		goto out;
	/* Magic, then version (a newer format is unsupported, not corrupt),
	 * then the fields.  The checksum covers header and payload, so it is
	 * checked last; before allocating, the length must match the file
	 * exactly and stay below SNAP_MAX (invariant 9). */
	rc = -EBADMSG;
	if (le32toh(h.magic) != SNAP_MAGIC) {
		tw_err("journal %s: snapshot has a bad magic", j->dir);
		goto out;
	}
	if (le16toh(h.version) != SNAP_VERSION) {
		tw_err("journal %s: snapshot version %u unsupported", j->dir,
		       le16toh(h.version));
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	if (le16toh(h.hdr_size) != sizeof(h) || h.reserved != 0) {
		tw_err("journal %s: snapshot header is corrupt", j->dir);
		goto out;
	}
	if (le64toh(h.len) > SNAP_MAX || le64toh(h.len) > SIZE_MAX ||
	    le64toh(h.len) != (uint64_t)st.st_size - SNAP_HDR_SIZE) {
		tw_err("journal %s: snapshot length %" PRIu64 " does not match "
		       "its file (%lld bytes)", j->dir, le64toh(h.len),
		       (long long)st.st_size);
		goto out;
	}
	if (h.len != 0) {
		buf = malloc(le64toh(h.len));
		if (buf == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		rc = read_exact(fd, buf, le64toh(h.len), SNAP_HDR_SIZE);
		if (rc < 0)
			goto out;
	}
	if (tw_crc32c(snap_hdr_crc(&h), buf, le64toh(h.len)) != le32toh(h.crc)) {
		tw_err("journal %s: snapshot checksum mismatch (seq %" PRIu64
		       ", %" PRIu64 " bytes)", j->dir, le64toh(h.seq),
		       le64toh(h.len));
		rc = -EBADMSG;
		goto out;
	}
	*present = true;
	*payload = buf;
	*len = le64toh(h.len);
	*seq = le64toh(h.seq);
	buf = NULL;
	rc = 0;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Opens and validates the log file's header (invariant 1). */
static int read_log_hdr(struct jnl_rec *j, int fd)
{
	struct log_hdr h;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < LOG_HDR_SIZE) {
		tw_err("journal %s: log is %lld bytes, shorter than its header",
		       j->dir, (long long)st.st_size);
		return -EBADMSG;
	}
	rc = read_exact(fd, &h, sizeof(h), 0);
	if (rc < 0)
		return rc;
	if (le32toh(h.magic) != LOG_MAGIC) {
		tw_err("journal %s: log has a bad magic", j->dir);
		return -EBADMSG;
	}
	if (le16toh(h.version) != LOG_VERSION &&
	    le16toh(h.version) != LOG_VERSION_2 &&
	    le16toh(h.version) != LOG_VERSION_1) {
		tw_err("journal %s: log version %u unsupported", j->dir,
		       le16toh(h.version));
		return -EPROTONOSUPPORT;
	}
	if (le16toh(h.hdr_size) != sizeof(h) ||
	    le32toh(h.crc) != log_hdr_crc(&h) || h.base_seq == 0) {
		tw_err("journal %s: log header is corrupt", j->dir);
		return -EBADMSG;
	}
	memcpy(j->log_id, h.log_id, sizeof(h.log_id));
	j->crc_seed = tw_crc32c(0, h.log_id, sizeof(h.log_id));
	j->base_seq = le64toh(h.base_seq);
	j->log_version = le16toh(h.version);
	j->hdr_size = j->log_version == LOG_VERSION_1 ?
		      sizeof(struct rec_hdr_v1) : sizeof(struct rec_hdr);
	return 0;
}

/* Makes [off, off + len) readable at *out.  The caller has checked that
 * off + len <= size and len <= REC_HDR_MAX + JNL_REC_MAX (invariant 9). */
static int reader_get(struct reader *r, uint64_t off, size_t len,
		      const uint8_t **out)
{
	size_t want;
	long n;

	assert(off + len <= r->size);              /* invariant 9 */
	assert(len <= REC_HDR_MAX + JNL_REC_MAX);  /* invariant 9 */
	if (off >= r->win_off && off + len <= r->win_off + r->win_len) {
		*out = r->buf + (off - r->win_off);
		return 0;
	}
	want = TW_MAX(len, (size_t)READ_WINDOW);
	if (r->cap < want) {
		uint8_t *nb = realloc(r->buf, want);

		if (nb == NULL)
			return -ENOMEM;
		r->buf = nb;
		r->cap = want;
	}
	want = (size_t)TW_MIN((uint64_t)r->cap, r->size - off);
	n = tw_pread_full(r->fd, r->buf, want, off);
	if (n < 0)
		return (int)n;
	if ((size_t)n < len)
		return -EIO;    /* the file shrank under us */
	r->win_off = off;
	r->win_len = (size_t)n;
	*out = r->buf;
	return 0;
}

/* Which check of the validity rule a record failed (for the log line). */
static const char *rec_flaw(const struct rec_hdr *h, uint64_t expect,
			    uint64_t room)
{
	if (h->magic != REC_MAGIC)
		return "bad magic";
	if (h->type != REC_TYPE_DATA)
		return "unknown record type";
	if (h->flags != 0)
		return "nonzero flags";
	if (h->seq != expect)
		return "sequence out of order";
	if (h->synced_to >= h->seq)
		return "synced_to not below its own seq";
	if (h->len > JNL_REC_MAX)
		return "length over the limit";
	if (h->len > room)
		return "length past the end of the file";
	return NULL;
}

/* Scans the records of the current log from its header on, delivering
 * those after snap_seq.  Sets *end to the offset after the last valid
 * record, *last to its seq (base - 1 when none) and *flaw to what is wrong
 * with the record at *end (NULL when the log ends cleanly there). */
static int scan_log(struct jnl_rec *j, jnl_replay_cb replay_cb, void *arg,
		    uint64_t *end, uint64_t *last, uint64_t *replayed,
		    uint64_t *size_out, const char **flaw)
{
	struct reader r = { .fd = j->fd };
	struct stat st;
	uint64_t off = LOG_HDR_SIZE, expect = j->base_seq;
	int rc = 0;

	*replayed = 0;
	*flaw = NULL;
	if (fstat(j->fd, &st) < 0)
		return -errno;
	r.size = (uint64_t)st.st_size;
	*size_out = r.size;
	for (;;) {
		const uint8_t *p = NULL;
		struct rec_hdr h;
		uint32_t len;

		if (r.size - off < j->hdr_size) {
			if (r.size > off)
				*flaw = "header cut short by the end of the file";
			break;
		}
		rc = reader_get(&r, off, (size_t)j->hdr_size, &p);
		if (rc < 0)
			goto out;
		rec_decode(j, p, &h);
		len = h.len;
		/* Validity rule: magic, type, flags, seq, synced_to, then the
		 * length against the limit and the file before reading the
		 * payload (invariant 9), then the checksum. */
		*flaw = rec_flaw(&h, expect, r.size - off - j->hdr_size);
		if (*flaw != NULL)
			break;
		rc = reader_get(&r, off, (size_t)(j->hdr_size + len), &p);
		if (rc < 0)
			goto out;
		if (rec_crc(j, p, p + j->hdr_size, len) != h.crc) {
			*flaw = "checksum mismatch";
			break;
		}
		idx_note(j, expect, off);
		if (expect > j->snap_seq) {
			rc = replay_cb ? replay_cb(expect, p + j->hdr_size, len,
						   arg) : 0;
			if (rc < 0)
				goto out;
			rc = 0;
			(*replayed)++;
		}
		off += j->hdr_size + len;
		expect++;
	}
	assert(off <= r.size);                       /* invariant 9 */
	*end = off;
	*last = expect - 1;
out:
	free(r.buf);
	return rc;
}

/* What lies after the first record that is not closed (invariant 11). */
struct later {
	uint64_t n;              /* valid records found after it */
	uint64_t first_seq, last_seq;
	bool witness;            /* one of them says the bad one was synced: */
	uint64_t witness_seq, witness_off, witness_synced_to;
};

/* Invariants 11 and 12: after the first record that is not closed (at
 * bad_off), looks for every later record that would be closed but for its
 * position: at any byte offset, magic, type 1, flags 0, seq >= min_seq
 * (above every record replay delivered), synced_to below its seq, a length
 * within the limit and the file, and a matching checksum, which is seeded
 * with this log's id, so leftovers of another log generation never match.
 * The first one whose synced_to >= min_seq is the witness: it was written
 * after the bad record had been synced.  Returns 0 with *l filled in, or
 * -errno. */
static int scan_after_bad(struct jnl_rec *j, uint64_t bad_off, uint64_t size,
			  uint64_t min_seq, struct later *l)
{
	static const uint8_t magic[4] = { 0x54, 0x57, 0x52, 0x52 }; /* TWRR */
	struct reader r = { .fd = j->fd, .size = size };
	uint64_t off = bad_off + 1;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	while (size - off >= j->hdr_size) {
		size_t chunk = (size_t)TW_MIN(size - off, (uint64_t)READ_WINDOW);
		const uint8_t *p = NULL, *hit;
		struct rec_hdr h;
		uint64_t cand;

		rc = reader_get(&r, off, chunk, &p);
		if (rc < 0)
			goto out;
		hit = memmem(p, chunk, magic, sizeof(magic));
		if (hit == NULL) {
			/* a magic may straddle the window's end */
			off += chunk - (sizeof(magic) - 1);
			continue;
		}
		cand = off + (uint64_t)(hit - p);
		off = cand + 1;
		if (size - cand < j->hdr_size)
			break;
		rc = reader_get(&r, cand, (size_t)j->hdr_size, &p);
		if (rc < 0)
			goto out;
		rec_decode(j, p, &h);
		if (h.type != REC_TYPE_DATA || h.flags != 0 ||
		    h.seq < min_seq || h.synced_to >= h.seq ||
		    h.len > JNL_REC_MAX || h.len > size - cand - j->hdr_size)
			continue;
		rc = reader_get(&r, cand, (size_t)(j->hdr_size + h.len), &p);
		if (rc < 0)
			goto out;
		if (rec_crc(j, p, p + j->hdr_size, h.len) != h.crc)
			continue;
		if (l->n++ == 0)
			l->first_seq = h.seq;
		l->last_seq = TW_MAX(l->last_seq, h.seq);
		if (!l->witness && h.synced_to >= min_seq) {
			l->witness = true;
			l->witness_seq = h.seq;
			l->witness_off = cand;
			l->witness_synced_to = h.synced_to;
		}
		/* Bytes inside a valid record are its payload, never a
		 * record of their own. */
		off = cand + j->hdr_size + h.len;
	}
out:
	free(r.buf);
	return rc;
}

/* The record at `end` is not closed (flaw says why).  With nothing valid
 * after it, or only records written before it was synced (invariant 12:
 * the loss of an unsynced write at power loss, whatever order the disk
 * kept), it is a torn tail, cut as invariant 8 says.  When a later record
 * was written after it had been synced, it is damage (invariant 11), which
 * fails with -ENOTRECOVERABLE and leaves the file as it is, unless the
 * caller accepts it: then the log is copied aside and cut all the same. */
static int cut_log(struct jnl_rec *j, const char *name, unsigned flags,
		   uint64_t end, uint64_t size, uint64_t next, const char *flaw)
{
	char path[PATH_MAX], copy[PATH_MAX + 32];
	struct later l;
	int rc;

	rc = scan_after_bad(j, end, size, next, &l);
	if (rc < 0) {
		tw_err("journal %s/%s: reading past the record at byte offset %"
		       PRIu64 ": %s", j->dir, name, end, strerror(-rc));
		return rc;
	}
	if (l.witness && !(flags & JNL_REC_ACCEPT_CORRUPT)) {
		tw_err("journal %s/%s: CORRUPT: the record at byte offset %"
		       PRIu64 " (where seq %" PRIu64 " was due) is damaged "
		       "(%s), yet the valid record seq %" PRIu64 " at byte "
		       "offset %" PRIu64 " was written after every record up "
		       "to seq %" PRIu64 " had been synced: a synced record "
		       "went bad, this is damage, not a torn tail; nothing "
		       "was cut, the file is untouched", j->dir, name,
		       end, next, flaw, l.witness_seq, l.witness_off,
		       l.witness_synced_to);
		return -ENOTRECOVERABLE;
	}
	snprintf(path, sizeof(path), "%s/%s", j->dir, name);
	if (l.witness) {
		rc = tw_copy_aside(path, copy, sizeof(copy));
		if (rc < 0) {
			tw_err("journal %s: cannot copy it aside before cutting "
			       "it: %s; nothing was cut", path, strerror(-rc));
			return rc;
		}
		tw_err("journal %s: CORRUPT record at byte offset %" PRIu64
		       " (seq %" PRIu64 ", %s) after it was synced (record "
		       "seq %" PRIu64 " at byte offset %" PRIu64 " says so): "
		       "accepted by the operator; the whole log was copied to "
		       "%s and is now cut at the damage: records from seq %"
		       PRIu64 " on (%" PRIu64 " bytes) are DROPPED", path,
		       end, next, flaw, l.witness_seq, l.witness_off, copy,
		       next, size - end);
	} else if (l.n > 0) {
		/* Invariant 12: the disk kept later writes and lost (or
		 * tore) this one, none of them synced. */
		tw_warn("journal %s: the record at byte offset %" PRIu64
			" (seq %" PRIu64 ") is bad (%s) and %" PRIu64 " valid "
			"record(s) follow it (seq %" PRIu64 "..%" PRIu64 "), "
			"%s: an unsynced tail lost in part at power loss; "
			"cutting there drops those %" PRIu64 " unsynced "
			"record(s), nothing that was synced", path, end, next,
			flaw, l.n, l.first_seq, l.last_seq,
			j->log_version == LOG_VERSION_1 ?
			"in a version 1 log, which does not say what was "
			"synced" : "none written after it was synced",
			l.n);
	}
	/* invariant 8: cut the torn tail so that later appends follow the
	 * last valid record and a second replay sees the same. */
	rc = op_ftruncate(j, j->fd, end);
	if (rc == 0)
		rc = op_fsync(j, j->fd, true);
	if (rc < 0) {
		tw_err("journal %s: cannot cut torn tail at offset %" PRIu64
		       ": %s", j->dir, end, strerror(-rc));
		return rc;
	}
	return 0;
}

/* fsync the directory holding `path`, so that a directory we just created
 * survives power loss. */
static int sync_parent(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = 0;

	if (copy == NULL)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		tw_err("journal %s: cannot sync its parent directory: %s", path,
		       strerror(-rc));
	free(copy);
	return rc;
}

/* Replays the records of the current log file (named `name`) after the
 * snapshot, cuts a torn tail and sets end_off; *last is the seq of its
 * last closed record (base - 1 when none). */
static int replay_file(struct jnl_rec *j, unsigned flags,
		       jnl_replay_cb replay_cb, void *arg, const char *name,
		       uint64_t *last)
{
	uint64_t end = 0, replayed = 0, size = 0;
	const char *flaw = NULL;
	int rc;

	rc = scan_log(j, replay_cb, arg, &end, last, &replayed, &size, &flaw);
	if (rc < 0)
		return rc;
	if (end < size) {
		rc = cut_log(j, name, flags, end, size, *last + 1,
			     flaw ? flaw : "unreadable");
		if (rc < 0)
			return rc;
		tw_warn("journal %s/%s: torn tail cut at offset %" PRIu64 " (%"
			PRIu64 " bytes dropped); replayed %" PRIu64 " records "
			"after snapshot seq %" PRIu64, j->dir, name, end,
			size - end, replayed, j->snap_seq);
	} else {
		tw_info("journal %s/%s: replayed %" PRIu64 " records after "
			"snapshot seq %" PRIu64 "; log ends at offset %" PRIu64,
			j->dir, name, replayed, j->snap_seq, end);
	}
	j->end_off = end;
	return 0;
}

/* Invariant 16: a `journal.next` beside `journal` (a snapshot in the
 * background did not finish) holds the records after journal's last
 * (*last on entry): its base is *last + 1, or at most snap_seq + 1 when
 * the new snapshot was installed.  Its records are replayed after
 * journal's.  When the snapshot covers all of `journal`, the switch is
 * finished here (journal.next renamed over it); else `journal` stays as
 * j->prev and appends go on to journal.next. */
static int open_next(struct jnl_rec *j, unsigned flags,
		     jnl_replay_cb replay_cb, void *arg, uint64_t *last)
{
	uint64_t journal_last = *last;
	int fd, rc;

	fd = openat(j->dirfd, NEXT_NAME, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (j->log_version != LOG_VERSION) {
		close(fd);
		tw_err("journal %s: %s beside a version %u %s", j->dir,
		       NEXT_NAME, j->log_version, LOG_NAME);
		return -EBADMSG;
	}
	rc = prev_take(j);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	j->fd = fd;
	rc = read_log_hdr(j, fd);
	if (rc < 0)
		return rc;
	if (j->log_version != LOG_VERSION || j->base_seq <= journal_last ||
	    j->base_seq > TW_MAX(journal_last, j->snap_seq) + 1) {
		tw_err("journal %s: %s (version %u) starts at seq %" PRIu64
		       " but %s ends at %" PRIu64 " and the snapshot at %"
		       PRIu64 "; records overlap or are missing", j->dir,
		       NEXT_NAME, j->log_version, j->base_seq, LOG_NAME,
		       journal_last, j->snap_seq);
		return -EBADMSG;
	}
	rc = replay_file(j, flags, replay_cb, arg, NEXT_NAME, last);
	if (rc < 0)
		return rc;
	if (j->base_seq > j->snap_seq + 1)
		return 0;   /* `journal` is still needed: pending */
	/* The new snapshot is in (its directory synced, invariant 7):
	 * finish the switch. */
	rc = op_rename(j, j->dirfd, NEXT_NAME, LOG_NAME);
	if (rc == 0)
		rc = op_fsync(j, j->dirfd, false);
	if (rc < 0) {
		tw_err("journal %s: cannot rename %s to %s: %s", j->dir,
		       NEXT_NAME, LOG_NAME, strerror(-rc));
		return rc;
	}
	prev_drop(j);
	return 0;
}

int jnl_rec_open(const char *dir, jnl_snap_cb snap_cb,
		 jnl_replay_cb replay_cb, void *arg, struct jnl_rec **out)
{
	return jnl_rec_open_flags(dir, 0, snap_cb, replay_cb, arg, out);
}

int jnl_rec_open_flags(const char *dir, unsigned flags, jnl_snap_cb snap_cb,
		       jnl_replay_cb replay_cb, void *arg, struct jnl_rec **out)
{
	struct jnl_rec *j;
	void *snap = NULL;
	uint64_t snap_len = 0, last = 0;
	bool have_snap = false, committed;
	unsigned waited;
	int rc;

	if (dir == NULL || out == NULL ||
	    (flags & ~(JNL_REC_ACCEPT_CORRUPT | JNL_REC_WAIT_LOCK)))
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->dirfd = -1;
	j->fd = -1;
	j->dir = strdup(dir);
	if (j->dir == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (mkdir(dir, 0700) == 0) {
		rc = sync_parent(dir);
		if (rc < 0)
			goto out;
	} else if (errno != EEXIST) {
		rc = -errno;
		tw_err("journal %s: mkdir: %s", dir, strerror(-rc));
		goto out;
	}
	j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0) {
		rc = -errno;
		tw_err("journal %s: open: %s", dir, strerror(-rc));
		goto out;
	}
	/* Two owners of one log would interleave records.  A child of a
	 * killed owner keeps the lock (an inherited descriptor) until it is
	 * gone, which a sync in progress may delay: the caller may wait. */
	rc = tw_wait_free(tw_flock_free, &j->dirfd,
			  (flags & JNL_REC_WAIT_LOCK) ? LOCK_WAIT_MS : 0,
			  &waited);
	if (rc < 0) {
		if (rc == -ETIMEDOUT)
			rc = -EBUSY;
		tw_err("journal %s: cannot lock: %s", dir,
		       rc != -EBUSY ? strerror(-rc) : waited > 0 ?
		       "still open by another owner after the wait" :
		       "already open by another owner");
		goto out;
	}
	if (waited > 0)
		tw_info("journal %s: its previous owner let it go after %u ms",
			dir, waited);
	/* Temporaries are never part of the state (invariant 7). */
	rc = unlink_tmp(j->dirfd, SNAP_TMP_NAME);
	if (rc == 0)
		rc = unlink_tmp(j->dirfd, LOG_TMP_NAME);
	if (rc < 0)
		goto out;

	rc = read_snapshot(j, &have_snap, &snap, &snap_len, &j->snap_seq);
	if (rc < 0)
		goto out;

	j->fd = openat(j->dirfd, LOG_NAME, O_RDWR | O_CLOEXEC);
	if (j->fd < 0 && errno != ENOENT) {
		rc = -errno;
		goto out;
	}
	if (j->fd < 0 && faccessat(j->dirfd, NEXT_NAME, F_OK, 0) == 0) {
		/* journal.next only ever follows a `journal` (invariant 16) */
		tw_err("journal %s: %s without %s", dir, NEXT_NAME, LOG_NAME);
		rc = -EBADMSG;
		goto out;
	}
	if (j->fd < 0) {
		if (have_snap) {
			/* We never remove the log; records after the
			 * snapshot may be lost.  Refuse rather than guess. */
			tw_err("journal %s: snapshot (seq %" PRIu64 ") without "
			       "a log", dir, j->snap_seq);
			rc = -EBADMSG;
			goto out;
		}
		rc = create_log(j, 1, 0, &committed);
		if (rc < 0)
			goto out;
	} else {
		rc = read_log_hdr(j, j->fd);
		if (rc < 0)
			goto out;
	}
	/* invariant 6: the log may start at or before snap_seq + 1, never
	 * after it (that would be a hole between snapshot and log). */
	if (j->base_seq > j->snap_seq + 1) {
		tw_err("journal %s: log starts at seq %" PRIu64 " but the %s "
		       "ends at %" PRIu64 "; records are missing", dir,
		       j->base_seq, have_snap ? "snapshot" : "(absent) snapshot",
		       j->snap_seq);
		rc = -EBADMSG;
		goto out;
	}

	j->snap_len = snap_len;
	if (have_snap && snap_cb != NULL) {
		rc = snap_cb(snap, (size_t)snap_len, arg);
		if (rc < 0)
			goto out;
	}
	free(snap);
	snap = NULL;

	rc = replay_file(j, flags, replay_cb, arg, LOG_NAME, &last);
	if (rc < 0)
		goto out;
	rc = open_next(j, flags, replay_cb, arg, &last);
	if (rc < 0)
		goto out;

	/* invariant 10: when the log holds nothing after the snapshot (a crash
	 * between the snapshot's rename and the log's, possibly followed by
	 * the loss of the log's unsynced tail), start a fresh log at
	 * snap_seq + 1, so that the next record never leaves a seq gap. */
	if (j->base_seq <= j->snap_seq && last <= j->snap_seq) {
		rc = create_log(j, j->snap_seq + 1, 0, &committed);
		if (rc < 0)
			goto out;
		last = j->snap_seq;
	}
	/* invariant 13: a version 1 or 2 log is rewritten as version 3, with
	 * the same base and records, before anything is appended to it. */
	if (j->log_version != LOG_VERSION) {
		assert(j->prev == NULL);  /* journal.next is only beside v3 */
		rc = create_log(j, j->base_seq, j->end_off, &committed);
		if (rc < 0)
			goto out;
		tw_info("journal %s: log upgraded to version %u (%" PRIu64
			" records kept)", dir, LOG_VERSION,
			last + 1 - j->base_seq);
	}
	/* invariant 12: what open found is synced from here on, so the
	 * records appended next may say so. */
	rc = op_fsync(j, j->fd, true);
	if (rc < 0) {
		tw_err("journal %s: fdatasync: %s", dir, strerror(-rc));
		goto out;
	}
	j->synced_seq = TW_MAX(last, j->snap_seq);
	j->next_seq = TW_MAX(last, j->snap_seq) + 1;
	assert(j->next_seq >= j->base_seq);   /* invariant 2 */
	*out = j;
	j = NULL;
out:
	free(snap);
	if (j != NULL)
		jnl_rec_close(j);
	return rc;
}

/* --------------------------------------------------------------- append */

int jnl_rec_append(struct jnl_rec *j, const void *buf, size_t len,
		   uint64_t *seq)
{
	struct iovec iov;
	size_t total;
	int rc;

	if (j->aborted)
		return -EIO;                     /* invariant 5 */
	if (len > JNL_REC_MAX)
		return -EMSGSIZE;
	if (buf == NULL && len != 0)
		return -EINVAL;
	total = (size_t)j->hdr_size + len;
	if (j->wbuf_cap < total) {
		void *nb = realloc(j->wbuf, total);

		if (nb == NULL)
			return -ENOMEM;
		j->wbuf = nb;
		j->wbuf_cap = total;
	}
	assert(j->end_off >= LOG_HDR_SIZE);      /* invariant 3 */
	assert(j->next_seq > j->snap_seq);       /* invariant 10 */
	assert(j->synced_seq < j->next_seq);     /* invariant 12 */
	rec_encode(j, j->wbuf, j->next_seq, j->synced_seq, buf, len);
	if (len != 0)
		memcpy((uint8_t *)j->wbuf + j->hdr_size, buf, len);

	/* invariant 4: one write(2) of header and payload at the end; the
	 * record is closed when it returns in full. */
	iov.iov_base = j->wbuf;
	iov.iov_len = total;
	rc = op_write(j, j->fd, &iov, 1, j->end_off, false);
	if (rc < 0) {
		log_abort(j, "append", rc);
		return rc;
	}
	idx_note(j, j->next_seq, j->end_off);
	j->end_off += total;
	if (seq != NULL)
		*seq = j->next_seq;
	j->next_seq++;                           /* invariant 2 */
	return 0;
}

int jnl_rec_sync(struct jnl_rec *j)
{
	int rc;

	if (j->aborted)
		return -EIO;                     /* invariant 5 */
	rc = op_fsync(j, j->fd, true);
	if (rc < 0) {
		/* After a failed fsync the kernel may have dropped the dirty
		 * pages: nothing appended so far can be trusted to be synced. */
		log_abort(j, "fdatasync", rc);
		return rc;
	}
	/* invariant 12: only a returned fdatasync moves synced_seq */
	j->synced_seq = j->next_seq - 1;
	return 0;
}

int jnl_rec_sync_start(struct jnl_rec *j, struct jnl_rec_bgsync *b)
{
	char path[64];

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (j->aborted)
		return -EIO;                     /* invariant 5 */
	b->upto = j->next_seq - 1;
	if (b->upto <= j->synced_seq)
		return 0;
	/* An open file of its own, not a dup: the kernel reports a failed
	 * writeback once per open file, and the owner's own fdatasync (a
	 * client's fsync meanwhile) must see it too. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", j->fd);
	b->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (b->fd < 0)
		return -errno;
	memcpy(b->log_id, j->log_id, sizeof(b->log_id));
	b->fault = fault_take(j);
	return 1;
}

void jnl_rec_sync_run(struct jnl_rec_bgsync *b)
{
	assert(b->fd >= 0);
	b->rc = fsync_faulted(b->fault, b->fd, true);
}

int jnl_rec_sync_done(struct jnl_rec *j, struct jnl_rec_bgsync *b)
{
	int rc = b->rc;

	jnl_rec_sync_forget(b);
	if (rc < 0) {
		log_abort(j, "fdatasync", rc);
		return rc;
	}
	if (j->aborted)
		return -EIO;
	/* invariant 12: only a returned fdatasync moves synced_seq, and only
	 * for the file it synced.  A log that took over since (a snapshot's
	 * fresh log, journal.next) began with everything before it synced. */
	if (memcmp(b->log_id, j->log_id, sizeof(b->log_id)) == 0 &&
	    b->upto > j->synced_seq) {
		assert(b->upto < j->next_seq);
		j->synced_seq = b->upto;
	}
	return 0;
}

void jnl_rec_sync_forget(struct jnl_rec_bgsync *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

uint64_t jnl_rec_log_bytes(const struct jnl_rec *j)
{
	uint64_t n = 0;

	assert(j->end_off >= LOG_HDR_SIZE);      /* invariant 3 */
	if (j->prev != NULL)
		n = j->prev->end_off - LOG_HDR_SIZE;
	return n + j->end_off - LOG_HDR_SIZE;
}

/* ------------------------------------------------------------- snapshot */

int jnl_rec_snapshot(struct jnl_rec *j, const void *buf, size_t len)
{
	return jnl_rec_snapshot_at(j, buf, len, j->next_seq - 1);
}

/* Steps 1-2 of a snapshot: snapshot.tmp holds header and payload, synced.
 * A large payload is written in SNAP_SYNC_BYTES pieces, each synced: on a
 * journaling file system (ext4's ordered data) the next sync of the log
 * would otherwise wait for all of a large file's dirty data. */
#define SNAP_SYNC_BYTES (8u << 20)
static int write_snap_tmp(struct jnl_rec *j, uint64_t seq, const void *buf,
			  size_t len)
{
	struct snap_hdr h;
	struct iovec iov[2];
	size_t off = 0;
	int fd, rc = 0;

	memset(&h, 0, sizeof(h));
	h.magic = htole32(SNAP_MAGIC);
	h.version = htole16(SNAP_VERSION);
	h.hdr_size = htole16(sizeof(h));
	h.seq = htole64(seq);
	h.len = htole64(len);
	h.crc = htole32(tw_crc32c(snap_hdr_crc(&h), buf, len));

	fd = openat(j->dirfd, SNAP_TMP_NAME,
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	for (;;) {
		size_t n = TW_MIN(len - off, (size_t)SNAP_SYNC_BYTES);

		/* iov[1] is this piece; the first goes after the header */
		iov[1].iov_base = (uint8_t *)buf + off;
		iov[1].iov_len = n;
		if (off == 0)
			rc = op_write(j, fd, iov, n != 0 ? 2 : 1, 0, true);
		else
			rc = op_write(j, fd, iov + 1, 1, SNAP_HDR_SIZE + off,
				      true);
		if (rc < 0)
			break;
		off += n;
		if (off == len)
			break;
		rc = op_fsync(j, fd, true);
		if (rc < 0)
			break;
	}
	if (rc == 0)
		rc = op_fsync(j, fd, false);
	close(fd);
	return rc;
}

/* Invariant 16: the snapshot is installed and covers all of `journal`;
 * journal.next becomes `journal`.  An error aborts: the name `journal`
 * may denote either file. */
static int finish_switch(struct jnl_rec *j)
{
	int rc;

	if (j->prev == NULL)
		return 0;
	rc = op_rename(j, j->dirfd, NEXT_NAME, LOG_NAME);
	if (rc == 0)
		rc = op_fsync(j, j->dirfd, false);
	if (rc < 0) {
		log_abort(j, "rename of " NEXT_NAME, rc);
		return rc;
	}
	prev_drop(j);
	return 0;
}

int jnl_rec_snapshot_at(struct jnl_rec *j, const void *buf, size_t len,
			uint64_t seq)
{
	bool committed, emptied = false;
	bool moved = seq != j->next_seq - 1;
	int rc;

	if (j->aborted)
		return -EIO;                     /* invariant 5 */
	if (j->bg_on)
		return -EBUSY;   /* snapshot.tmp is the child's */
	if ((uint64_t)len > SNAP_MAX)
		return -EFBIG;
	if (buf == NULL && len != 0)
		return -EINVAL;
	if (moved && j->prev != NULL) {
		/* Invariant 16: the old history's records after `journal`
		 * go first (a crash then gives a prefix of it, as below);
		 * the handle's file is unlinked, so every failure from here
		 * aborts. */
		emptied = true;
		rc = unlinkat(j->dirfd, NEXT_NAME, 0) < 0 ? -errno : 0;
		if (rc == 0)
			rc = op_fsync(j, j->dirfd, false);
		if (rc < 0)
			goto out;
		prev_drop(j);
	}
	if (seq < j->next_seq - 1) {
		/* Invariant 14: the log holds records above seq that the new
		 * snapshot does not include.  First an empty log whose base
		 * is valid with either snapshot (invariant 6), so that no
		 * crash from here on replays them onto the new one. */
		rc = create_log(j, TW_MIN(seq, j->snap_seq) + 1, 0, &committed);
		if (rc < 0) {
			if (committed)
				log_abort(j, "log replacement before snapshot",
					  rc);
			goto out;
		}
		/* The handle's seqs no longer match the log until the new
		 * one below is in: a failure from here aborts the log. */
		emptied = true;
	}

	/* Step 1-2: the complete snapshot under a temporary name, synced. */
	rc = write_snap_tmp(j, seq, buf, len);
	if (rc < 0)
		goto out_tmp;

	/* Step 3-4: install it (invariant 7: before the log that needs it).
	 * A failure from here to the log's rename leaves the old log in use;
	 * it holds every record, so it is consistent with either snapshot. */
	rc = op_rename(j, j->dirfd, SNAP_TMP_NAME, SNAP_NAME);
	if (rc < 0)
		goto out_tmp;
	j->snap_seq = seq;
	j->snap_len = len;
	rc = op_fsync(j, j->dirfd, false);
	if (rc < 0)
		goto out;
	/* A pending switch (invariant 16) is finished first, so that the
	 * fresh log below replaces the one holding the latest records. */
	rc = finish_switch(j);
	if (rc < 0)
		goto out;

	/* Step 5-8: replace the log by a fresh one starting at seq + 1. */
	rc = create_log(j, seq + 1, 0, &committed);
	if (rc < 0 && committed)
		log_abort(j, "log replacement after snapshot", rc);
	if (rc == 0) {
		/* The snapshot holds everything up to seq, synced
		 * (invariant 12); another log's seq (invariant 14) is
		 * continued from. */
		if (moved)
			j->next_seq = seq + 1;
		j->synced_seq = seq;
	}
	if (rc == 0)
		assert(j->next_seq == j->base_seq); /* invariant 2 */
	goto out;

out_tmp:
	unlink_tmp(j->dirfd, SNAP_TMP_NAME);
out:
	/* A snapshot at another log's seq that fails leaves seqs the
	 * handle cannot continue (invariant 14). */
	if (rc < 0 && (emptied || moved))
		log_abort(j, "snapshot at another log's seq", rc);
	if (rc < 0)
		tw_err("journal %s: snapshot at seq %" PRIu64 " failed: %s%s",
		       j->dir, seq, strerror(-rc),
		       j->aborted ? "" : "; still logging to the old log");
	return rc;
}

/* ------------------------------------------- snapshot in the background */

int jnl_rec_snap_begin(struct jnl_rec *j, uint64_t *seq)
{
	bool committed;
	int rc;

	if (j->aborted)
		return -EIO;                     /* invariant 5 */
	if (j->bg_on)
		return -EBUSY;
	*seq = j->next_seq - 1;
	if (j->prev == NULL) {
		/* Invariant 16: `journal` whole and synced (no hole before
		 * journal.next at a power loss), then journal.next. */
		rc = jnl_rec_sync(j);
		if (rc < 0)
			return rc;
		rc = prev_take(j);
		if (rc < 0)
			return rc;
		rc = create_log_as(j, NEXT_NAME, *seq + 1, 0, &committed);
		if (rc < 0) {
			prev_give_back(j);
			/* journal.next may exist: appends to `journal`
			 * would overlap it. */
			if (committed)
				log_abort(j, "creating " NEXT_NAME, rc);
			tw_err("journal %s: cannot start a snapshot in the "
			       "background: %s", j->dir, strerror(-rc));
			return rc;
		}
	}
	/* else: journal.next is there from a snapshot that did not finish;
	 * the one at *seq (>= its base - 1) covers `journal` all the same. */
	j->bg_on = true;
	j->bg_seq = *seq;
	return 0;
}

int jnl_rec_snap_write(struct jnl_rec *j, uint64_t seq, const void *buf,
		       size_t len)
{
	if ((uint64_t)len > SNAP_MAX)
		return -EFBIG;
	if (buf == NULL && len != 0)
		return -EINVAL;
	return write_snap_tmp(j, seq, buf, len);
}

int jnl_rec_snap_finish(struct jnl_rec *j)
{
	struct stat st;
	int rc;

	if (!j->bg_on)
		return -EINVAL;
	j->bg_on = false;
	if (j->aborted) {
		rc = -EIO;                       /* invariant 5 */
		goto out_tmp;
	}
	/* Invariant 7: the snapshot, with its directory synced, before the
	 * log that depends on it takes the name `journal`. */
	if (fstatat(j->dirfd, SNAP_TMP_NAME, &st, 0) < 0) {
		rc = -errno;
		goto out_tmp;
	}
	rc = op_rename(j, j->dirfd, SNAP_TMP_NAME, SNAP_NAME);
	if (rc < 0)
		goto out_tmp;
	j->snap_seq = j->bg_seq;
	j->snap_len = (uint64_t)st.st_size - TW_MIN((uint64_t)st.st_size,
						     SNAP_HDR_SIZE);
	rc = op_fsync(j, j->dirfd, false);
	if (rc == 0)
		rc = finish_switch(j);
	goto out;
out_tmp:
	unlink_tmp(j->dirfd, SNAP_TMP_NAME);
out:
	if (rc < 0)
		tw_err("journal %s: installing the snapshot at seq %" PRIu64
		       " failed: %s%s", j->dir, j->bg_seq, strerror(-rc),
		       j->aborted ? "" : "; the log keeps both files");
	return rc;
}

void jnl_rec_snap_abandon(struct jnl_rec *j)
{
	if (!j->bg_on)
		return;
	j->bg_on = false;
	unlink_tmp(j->dirfd, SNAP_TMP_NAME);
}

uint64_t jnl_rec_snap_len(const struct jnl_rec *j)
{
	return j->snap_len;
}

uint64_t jnl_rec_last_seq(const struct jnl_rec *j)
{
	return j->next_seq - 1;
}

uint64_t jnl_rec_synced_seq(const struct jnl_rec *j)
{
	return j->synced_seq;
}

uint64_t jnl_rec_first_seq(const struct jnl_rec *j)
{
	return j->prev != NULL ? j->prev->base_seq : j->base_seq;
}

/* ------------------------------------------------------------- reading */

/* The log file (j or j->prev) an iterator reads, by its log id; NULL
 * once a snapshot dropped it. */
static struct jnl_rec *iter_file(struct jnl_rec *j, const uint8_t *log_id)
{
	if (memcmp(log_id, j->log_id, sizeof(j->log_id)) == 0)
		return j;
	if (j->prev != NULL &&
	    memcmp(log_id, j->prev->log_id, sizeof(j->log_id)) == 0)
		return j->prev;
	return NULL;
}

/* The seq after the last closed record of file f of handle j. */
static uint64_t file_next_seq(const struct jnl_rec *j,
			      const struct jnl_rec *f)
{
	return f == j ? j->next_seq : j->base_seq;
}

int jnl_rec_iter_start(struct jnl_rec *j, uint64_t seq,
		       struct jnl_rec_iter *it)
{
	struct jnl_rec *f = j;
	size_t k;

	if (j->aborted)
		return -EIO;
	if (seq < jnl_rec_first_seq(j) || seq > j->next_seq)
		return -ENOENT;
	if (seq < j->base_seq)
		f = j->prev;   /* invariant 16: `journal` before journal.next */
	it->j = j;
	memcpy(it->log_id, f->log_id, sizeof(it->log_id));
	it->off = LOG_HDR_SIZE;
	it->seq = f->base_seq;
	if (f->idx_n > 0) {
		/* The last index point at or below seq. */
		k = (size_t)TW_MIN((seq - f->base_seq) / IDX_STEP,
				   (uint64_t)f->idx_n - 1);
		it->off = f->idx[k];
		it->seq = f->base_seq + (uint64_t)k * IDX_STEP;
	}
	/* Skip to seq, reading only headers. */
	while (it->seq < seq) {
		uint8_t hb[REC_HDR_MAX];
		struct rec_hdr h;
		int rc = read_exact(f->fd, hb, (size_t)f->hdr_size, it->off);

		if (rc < 0)
			return rc;
		rec_decode(f, hb, &h);
		if (rec_flaw(&h, it->seq, f->end_off - it->off - f->hdr_size))
			return -EBADMSG;
		it->off += f->hdr_size + h.len;
		it->seq++;
	}
	return 0;
}

int jnl_rec_iter_next(struct jnl_rec_iter *it, void **buf, size_t *len,
		      uint64_t *seq)
{
	struct jnl_rec *j = it->j, *f;
	uint8_t hb[REC_HDR_MAX];
	struct rec_hdr h;
	void *p;
	int rc;

	*buf = NULL;
	*len = 0;
	if (j->aborted)
		return -EIO;
	f = iter_file(j, it->log_id);
	if (f == NULL)
		return -ESTALE;   /* a snapshot replaced the log */
	if (f != j && it->seq >= file_next_seq(j, f)) {
		/* The end of `journal`: journal.next goes on (inv 16). */
		assert(it->seq == j->base_seq);
		f = j;
		memcpy(it->log_id, j->log_id, sizeof(it->log_id));
		it->off = LOG_HDR_SIZE;
	}
	if (it->seq >= file_next_seq(j, f))
		return 0;
	rc = read_exact(f->fd, hb, (size_t)f->hdr_size, it->off);
	if (rc < 0)
		return rc;
	rec_decode(f, hb, &h);
	if (rec_flaw(&h, it->seq, f->end_off - it->off - f->hdr_size))
		return -EBADMSG;
	p = malloc(h.len ? h.len : 1);
	if (p == NULL)
		return -ENOMEM;
	rc = read_exact(f->fd, p, h.len, it->off + f->hdr_size);
	if (rc == 0 && rec_crc(f, hb, p, h.len) != h.crc)
		rc = -EBADMSG;
	if (rc < 0) {
		free(p);
		return rc;
	}
	*buf = p;
	*len = h.len;
	*seq = it->seq;
	it->off += f->hdr_size + h.len;
	it->seq++;
	return 1;
}

void jnl_rec_close(struct jnl_rec *j)
{
	if (j == NULL)
		return;
	jnl_rec_close(j->prev);
	if (j->fd >= 0)
		close(j->fd);
	if (j->dirfd >= 0)
		close(j->dirfd);
	free(j->wbuf);
	free(j->idx);
	free(j->dir);
	free(j);
}
