/* store_csum.c - block checksums of the subfiles at home
 * (docs/ARCHITECTURE.md "Integrity").
 *
 * Every 4 KiB block of a subfile (JBD_BLOCK_SIZE, the journal's block: a
 * checkpoint always holds a block's whole new content in memory, so its
 * checksum costs no read) has a 4-byte CRC32C in the subfile's checksum
 * file DIR/csums/ab/cd/<ino>.<col> (the subfile's own relative path):
 * entry b at byte 4 * b, little-endian.  The CRC covers the block's bytes
 * with zeros past the end of the subfile; a CRC of 0 or of 0xfffffffe is
 * stored as 0xffffffff, so entry 0 means "unchecked" (a hole, a punched or
 * cut block, a block written in place, a missing file) and entry
 * 0xfffffffe (CSUM_MARK) means "marked bad": it matches no content (C4).
 *
 * Invariants (cited as C<n>):
 *   C1  data=journal: a block's entry is written when the checkpoint (or
 *       replay) writes the block home (journal.h ops.home_blocks), before
 *       the tail moves past it; a crash in between leaves the transaction
 *       in the log and replay writes both again.  So once the tail has
 *       moved, data and entry agree, and until then the block is
 *       journal-resident and read from its verified memory copy.
 *   C2  Entries are only ever set from the content written with them, or
 *       zeroed (cut, punch, creation, in-place write): an entry never
 *       claims a content the block does not have after any crash.
 *   C3  Checked only while DIR/twinfs-csum-v1 exists: it is created once
 *       every subfile's entries were computed (store_csum_upgrade), and
 *       removed at the start of an ordered or writeback run, whose
 *       in-place writes keep no entries (a torn in-place write would leave
 *       them disagreeing with data no one can call wrong).
 *   C4  A block is marked bad (entry CSUM_MARK) only by a bad-copy record
 *       (store_journal.c op 7, journaled after the block's data: a resync
 *       copied it from a source whose only copy failed its checksum,
 *       docs/ARCHITECTURE.md "Integrity"), applied at checkpoint and
 *       replay after that data's own entry.  A mark survives a cut or a
 *       punch that leaves part of its block (the rest is still the bad
 *       copy); only new content of the whole block replaces it.  Until
 *       the record is applied, the block is journal-resident and the
 *       pending list (store_csum_pend_*) makes reads fail on it as on a
 *       marked block at home.  Format: DIR/twinfs-csum-v2 (v1 had no
 *       reserved value; store_csum_upgrade converts its entries).
 */
#include "store_int.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CSUM_DIR   "csums"
#define CSUM_FLAG  "twinfs-csum-v2"
#define CSUM_FLAG1 "twinfs-csum-v1"     /* before C4: no CSUM_MARK */
#define CSUM_BS    JBD_BLOCK_SIZE

/* ------------------------------------------------------------ pure part */

/* The CRC32C of a block zero-padded to 4 KiB, as computed. */
static uint32_t csum_raw(const void *buf, size_t len)
{
	static const uint8_t zeros[CSUM_BS];

	if (len > CSUM_BS)
		len = CSUM_BS;
	return tw_crc32c(tw_crc32c(0, buf, len), zeros, CSUM_BS - len);
}

/* A CRC as stored: never 0 or CSUM_MARK (C4). */
static uint32_t csum_stored(uint32_t crc)
{
	return crc && crc != CSUM_MARK ? crc : UINT32_MAX;
}

uint32_t store_csum_block(const void *buf, size_t len)
{
	return csum_stored(csum_raw(buf, len));
}

void store_csum_range(uint64_t off, uint64_t len, uint64_t *first,
		      uint64_t *last)
{
	*first = off / CSUM_BS;
	*last = len ? (off + len - 1) / CSUM_BS : *first;
}

/* ----------------------------------------------------------- the files */

enum { CSUM_READ, CSUM_WRITE, CSUM_CREATE };

/* The last checksum file used stays open (csum_cfd, of csum_cobj): reads
 * and checkpoints of one subfile in a row cost no open.  csum_put instead
 * of close; store_csum_uncache before its unlink. */
static void csum_put(struct iod_store *s, int fd)
{
	if (fd != s->csum_cfd)
		close(fd);
}

void store_csum_uncache(struct iod_store *s, uint64_t ino, uint32_t column)
{
	if (s->csum_cfd >= 0 && s->csum_cobj == store_obj(ino, column)) {
		close(s->csum_cfd);
		s->csum_cfd = -1;
	}
}

static int csum_open(struct iod_store *s, uint64_t ino, uint32_t column,
		     int how)
{
	bool create = how == CSUM_CREATE;
	char rel[48];
	unsigned ab, cd;
	int fd;

	(void)how;
	if (s->csum_cfd >= 0 && s->csum_cobj == store_obj(ino, column))
		return s->csum_cfd;
	if (store_rel_subpath(ino, column, rel, sizeof(rel)) < 0)
		return -EINVAL;
	fd = openat(s->csum_fd, rel, O_RDWR | (create ? O_CREAT : 0) |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0 || errno != ENOENT || !create)
		goto out;
	store_sub_dirs(ino, &ab, &cd);
	char d[8];
	snprintf(d, sizeof(d), "%02x", ab);
	if (mkdirat(s->csum_fd, d, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(d, sizeof(d), "%02x/%02x", ab, cd);
	if (mkdirat(s->csum_fd, d, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(s->csum_fd, rel, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
out:
	if (fd < 0)
		return -errno;
	if (s->csum_cfd >= 0)
		close(s->csum_cfd);
	s->csum_cfd = fd;
	s->csum_cobj = store_obj(ino, column);
	return fd;
}

/* The existing checksum file of a subfile, for writing, and its stat;
 * -ENOENT when there is none. */
static int csum_open_stat(struct iod_store *s, uint64_t ino, uint32_t column,
			  struct stat *st)
{
	int fd = csum_open(s, ino, column, CSUM_WRITE);

	if (fd >= 0 && fstat(fd, st) < 0) {
		int rc = -errno;

		csum_put(s, fd);
		return rc;
	}
	return fd;
}

/* Entries first..first+n-1 into e[] (0 past the file's end). */
static int csum_load(int fd, uint64_t first, size_t n, uint32_t *e)
{
	size_t got = 0;

	while (got < n * 4) {
		ssize_t r = pread(fd, (uint8_t *)e + got, n * 4 - got,
				  (off_t)(first * 4 + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	memset((uint8_t *)e + got, 0, n * 4 - got);
	for (size_t i = 0; i < n; i++)
		e[i] = le32toh(e[i]);
	return 0;
}

int store_csum_home(struct iod_store *s, uint64_t obj, uint64_t blk,
		    const struct iovec *iov, int n, const uint32_t *sums)
{
	uint32_t e[256];
	int fd, rc = 0;

	if (!s->csum_on || n <= 0)
		return 0;
	fd = csum_open(s, store_obj_ino(obj), store_obj_column(obj),
		       CSUM_CREATE);
	if (fd < 0)
		return fd;
	for (int done = 0; rc == 0 && done < n;) {
		int k = TW_MIN(n - done, (int)TW_ARRAY_SIZE(e));

		for (int i = 0; i < k; i++) {
			const struct iovec *v = &iov[done + i];
			/* A full block's sum came with it (journal.h
			 * ops.home_blocks); a short one's bytes past the end
			 * count as zeros, which its buffer need not hold. */
			uint32_t c = sums && v->iov_len == CSUM_BS ?
				     csum_stored(sums[done + i]) :
				     store_csum_block(v->iov_base, v->iov_len);

			e[i] = htole32(c);
		}
		rc = tw_pwrite_all(fd, e, (size_t)k * 4, (blk + (uint64_t)done) * 4);
		done += k;
	}
	csum_put(s, fd);
	return rc;
}

/* Zero entries first..last (C2), and with cut the file's end after last.
 * keep_first / keep_last: that edge block is only partly changed, so a
 * mark there stays (C4). */
static int csum_zero(struct iod_store *s, uint64_t ino, uint32_t column,
		     uint64_t first, uint64_t last, bool cut, bool keep_first,
		     bool keep_last)
{
	uint32_t z[256] = { 0 };
	struct stat st;
	int fd = csum_open_stat(s, ino, column, &st);
	int rc = 0;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	if (keep_first || keep_last) {
		uint32_t e[1];

		if (keep_first && csum_load(fd, first, 1, e) == 0 &&
		    e[0] == CSUM_MARK)
			first++;
		if (keep_last && last >= first &&
		    csum_load(fd, last, 1, e) == 0 && e[0] == CSUM_MARK) {
			if (last == first) {
				first = last + 1;       /* nothing to zero */
			} else {
				last--;
			}
		}
	}
	if (cut && ftruncate(fd, (off_t)((last + 1) * 4)) < 0) {
		rc = -errno;
		goto out;
	}
	last = TW_MIN(last, (uint64_t)st.st_size / 4);
	if (first > last || first * 4 >= (uint64_t)st.st_size)
		goto out;   /* only kept marks, or past the end: zeros already */
	/* A hole reads as zeros: one call for any number of entries, and
	 * no block written for a sparse range (a punch across a TiB of a
	 * sparse subfile would otherwise write 256 MiB of zeros here). */
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)(first * 4),
		      (off_t)(TW_MIN((last + 1) * 4, (uint64_t)st.st_size) -
			      first * 4)) == 0)
		goto out;
	if (errno != EOPNOTSUPP) {
		rc = -errno;
		goto out;
	}
	for (uint64_t b = first; rc == 0 && b <= last && b * 4 < (uint64_t)st.st_size;) {
		uint64_t k = TW_MIN(last - b + 1, (uint64_t)TW_ARRAY_SIZE(z));

		rc = tw_pwrite_all(fd, z, (size_t)k * 4, b * 4);
		b += k;
	}
out:
	csum_put(s, fd);
	return rc;
}

int store_csum_cut(struct iod_store *s, uint64_t ino, uint32_t column,
		   uint64_t size)
{
	if (size == 0)
		return store_csum_forget(s, ino, column);
	/* the block holding the new end changes (zeros past it): unchecked,
	 * unless marked bad (C4: its bytes below the end are the bad copy) */
	uint64_t b = (size - 1) / CSUM_BS;

	return csum_zero(s, ino, column, b, b, true, true, false);
}

int store_csum_punch(struct iod_store *s, uint64_t ino, uint32_t column,
		     uint64_t off, uint64_t len)
{
	uint64_t first, last;

	if (len == 0)
		return 0;
	store_csum_range(off, len, &first, &last);
	return csum_zero(s, ino, column, first, last, false,
			 off % CSUM_BS != 0, (off + len) % CSUM_BS != 0);
}

int store_csum_mark(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t blk)
{
	uint32_t e = htole32(CSUM_MARK);
	int fd, rc;

	if (!s->csum_on)
		return 0;
	fd = csum_open(s, ino, column, CSUM_CREATE);
	if (fd < 0)
		return fd;
	rc = tw_pwrite_all(fd, &e, 4, blk * 4);
	csum_put(s, fd);
	return rc;
}

/* ------------------------------------------------- marks not yet home */

int store_csum_pend_add(struct iod_store *s, uint64_t obj, uint64_t blk,
			uint64_t seq)
{
	if (s->n_csum_pend == s->cap_csum_pend) {
		size_t cap = s->cap_csum_pend ? 2 * s->cap_csum_pend : 8;
		struct csum_pend *n = realloc(s->csum_pend, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->csum_pend = n;
		s->cap_csum_pend = cap;
	}
	s->csum_pend[s->n_csum_pend++] = (struct csum_pend){ obj, blk, seq };
	return 0;
}

void store_csum_pend_drop(struct iod_store *s, uint64_t obj, uint64_t lo,
			  uint64_t hi, uint64_t seq)
{
	for (size_t i = 0; i < s->n_csum_pend;) {
		const struct csum_pend *p = &s->csum_pend[i];

		if (p->obj == obj && p->blk >= lo && p->blk <= hi &&
		    p->seq <= seq)
			s->csum_pend[i] = s->csum_pend[--s->n_csum_pend];
		else
			i++;
	}
	if (s->n_csum_pend == 0) {
		free(s->csum_pend);
		s->csum_pend = NULL;
		s->cap_csum_pend = 0;
	}
}

int store_csum_pend_check(struct iod_store *s, uint64_t obj, uint64_t off,
			  uint64_t len)
{
	uint64_t first, last, bad = UINT64_MAX;

	if (s->n_csum_pend == 0 || len == 0)
		return 0;
	store_csum_range(off, len, &first, &last);
	for (size_t i = 0; i < s->n_csum_pend; i++) {
		const struct csum_pend *p = &s->csum_pend[i];

		if (p->obj == obj && p->blk >= first && p->blk <= last &&
		    p->blk < bad)
			bad = p->blk;
	}
	if (bad == UINT64_MAX)
		return 0;
	if (s->csum_soft) {
		s->csum_soft_bad++;
		return 0;
	}
	s->csum_bad_obj = obj;
	s->csum_bad_off = bad * CSUM_BS;
	s->csum_mismatches++;
	return -EBADMSG;
}

int store_csum_forget(struct iod_store *s, uint64_t ino, uint32_t column)
{
	char rel[48];

	store_csum_uncache(s, ino, column);
	if (s->csum_fd < 0 || store_rel_subpath(ino, column, rel, sizeof(rel)) < 0)
		return 0;
	if (unlinkat(s->csum_fd, rel, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int store_csum_sync(struct iod_store *s, uint64_t ino, uint32_t column)
{
	int fd = s->csum_on ? csum_open(s, ino, column, CSUM_READ) : -ENOENT;
	int rc = 0;

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (fsync(fd) < 0)
		rc = -errno;
	csum_put(s, fd);
	return rc;
}

/* ----------------------------------------------------------- checking */

/* Room for n sums of the blocks a check matches (csum_rd); false when
 * there is none: then the read's data_crc is summed again, nothing
 * else changes. */
static bool rd_reserve(struct iod_store *s, size_t n)
{
	uint32_t *sums;
	bool *ok;

	if (n <= s->cap_csum_rd)
		return true;
	sums = realloc(s->csum_rd, n * sizeof(*sums));
	if (!sums)
		return false;
	s->csum_rd = sums;
	ok = realloc(s->csum_rd_ok, n * sizeof(*ok));
	if (!ok)
		return false;
	s->csum_rd_ok = ok;
	s->cap_csum_rd = n;
	return true;
}

int store_csum_check(struct iod_store *s, uint64_t obj, int fd, uint64_t hsize,
		     uint64_t off, const void *buf, size_t len)
{
	uint64_t first, last, end;
	uint32_t *e = NULL;
	bool rd;
	uint8_t *tmp = NULL;
	size_t n;
	int cfd, rc = 0, bad = 0;

	s->csum_rd_buf = NULL;
	if (!s->csum_check || len == 0 || off >= hsize)
		return 0;
	end = TW_MIN(off + len, hsize);
	store_csum_range(off, end - off, &first, &last);
	cfd = csum_open(s, store_obj_ino(obj), store_obj_column(obj), CSUM_READ);
	if (cfd == -ENOENT)
		return 0;
	if (cfd < 0)
		return cfd;
	n = (size_t)(last - first + 1);
	e = malloc(n * 4);
	if (!e) {
		rc = -ENOMEM;
		goto out;
	}
	rc = csum_load(cfd, first, n, e);
	rd = rd_reserve(s, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint64_t b = first + i, bs = b * CSUM_BS;
		size_t valid = (size_t)TW_MIN((uint64_t)CSUM_BS, hsize - bs);
		bool inside = bs >= off && bs + valid <= off + len;
		const uint8_t *p;
		uint32_t raw;

		if (rd)
			s->csum_rd_ok[i] = false;
		if (e[i] == 0 || jbd_resident_has(s->j, obj, b))
			continue;
		if (inside) {
			p = (const uint8_t *)buf + (bs - off);
		} else {
			if (!tmp && !(tmp = malloc(CSUM_BS))) {
				rc = -ENOMEM;
				break;
			}
			long r = tw_pread_full(fd, tmp, valid, bs);

			if (r < 0) {
				rc = (int)r;
				break;
			}
			memset(tmp + r, 0, CSUM_BS - (size_t)r);
			p = tmp;
		}
		s->csum_blocks_checked++;
		raw = csum_raw(p, valid);
		if (csum_stored(raw) == e[i]) {
			if (rd && inside && valid == CSUM_BS) {
				s->csum_rd[i] = raw;
				s->csum_rd_ok[i] = true;
			}
			continue;
		}
		if (s->csum_soft) {
			s->csum_soft_bad++;
			continue;
		}
		if (bad++ == 0) {
			s->csum_bad_obj = obj;
			s->csum_bad_off = bs;
		}
		s->csum_mismatches++;
	}
	if (rc == 0 && bad)
		rc = -EBADMSG;
	if (rc == 0 && rd) {
		s->csum_rd_buf = buf;
		s->csum_rd_obj = obj;
		s->csum_rd_off = off;
		s->csum_rd_first = first;
		s->n_csum_rd = n;
	}
out:
	free(tmp);
	free(e);
	csum_put(s, cfd);
	return rc;
}

int store_csum_verify_block(struct iod_store *s, uint64_t ino, uint32_t column,
			    uint64_t blk)
{
	uint64_t obj = store_obj(ino, column);
	uint8_t *b;
	struct sub *e;
	struct stat st;
	int rc;

	if (!s->csum_check)
		return 0;
	for (size_t i = 0; i < s->n_csum_pend; i++)
		if (s->csum_pend[i].obj == obj && s->csum_pend[i].blk == blk)
			return -EBADMSG;     /* C4: marked, not home yet */
	if (jbd_resident_has(s->j, obj, blk))
		return 0;
	rc = store_get_sub(s, ino, column, NULL, 0, &e);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	if (fstat(e->fd, &st) < 0)
		return -errno;
	if (blk * CSUM_BS >= (uint64_t)st.st_size)
		return 0;
	b = malloc(CSUM_BS);
	if (!b)
		return -ENOMEM;
	long r = tw_pread_full(e->fd, b, CSUM_BS, blk * CSUM_BS);

	rc = r < 0 ? (int)r : 0;
	if (rc == 0) {
		memset(b + r, 0, CSUM_BS - (size_t)r);
		uint64_t saved_obj = s->csum_bad_obj, saved_off = s->csum_bad_off;
		uint64_t saved_n = s->csum_mismatches, saved_c = s->csum_blocks_checked;

		rc = store_csum_check(s, obj, e->fd, (uint64_t)st.st_size,
				      blk * CSUM_BS, b, CSUM_BS);
		/* a re-check is not a new finding */
		s->csum_bad_obj = saved_obj;
		s->csum_bad_off = saved_off;
		s->csum_mismatches = saved_n;
		s->csum_blocks_checked = saved_c;
	}
	free(b);
	return rc;
}

/* --------------------------------------------------------- open, upgrade */

int store_csum_open(struct iod_store *s, bool journal_mode)
{
	if (mkdirat(s->dir_fd, CSUM_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	s->csum_fd = openat(s->dir_fd, CSUM_DIR, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
	if (s->csum_fd < 0)
		return -errno;
	/* Replay (in data=journal) writes entries for what it brings home
	 * (C1), before checking starts (store_csum_upgrade). */
	s->csum_on = journal_mode;
	s->csum_check = false;
	s->csum_cfd = -1;
	return 0;
}

void store_csum_close(struct iod_store *s)
{
	if (s->csum_cfd >= 0)
		close(s->csum_cfd);
	s->csum_cfd = -1;
	if (s->csum_fd >= 0)
		close(s->csum_fd);
	s->csum_fd = -1;
	free(s->csum_rd);
	free(s->csum_rd_ok);
	s->csum_rd = NULL;
	s->csum_rd_ok = NULL;
	s->cap_csum_rd = 0;
	s->csum_rd_buf = NULL;
}

/* Compute every entry of one subfile from what home holds. */
static int csum_compute(struct iod_store *s, uint64_t ino, uint32_t column,
			uint8_t *buf, size_t cap)
{
	uint64_t obj = store_obj(ino, column);
	struct sub *e;
	struct stat st;
	int rc;

	rc = store_csum_forget(s, ino, column);
	if (rc == 0)
		rc = store_get_sub(s, ino, column, NULL, 0, &e);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	if (fstat(e->fd, &st) < 0)
		return -errno;
	for (uint64_t off = 0; rc == 0 && off < (uint64_t)st.st_size; off += cap) {
		size_t len = (size_t)TW_MIN((uint64_t)cap, (uint64_t)st.st_size - off);
		struct iovec v[256];
		int n = 0;

		long r = tw_pread_full(e->fd, buf, len, off);

		rc = r < 0 ? (int)r : 0;
		if (r >= 0 && (size_t)r < len)
			memset(buf + r, 0, len - (size_t)r);
		for (size_t p = 0; rc == 0 && p < len; p += CSUM_BS) {
			v[n].iov_base = buf + p;
			v[n].iov_len = TW_MIN((size_t)CSUM_BS, len - p);
			n++;
		}
		if (rc == 0)
			rc = store_csum_home(s, obj, off / CSUM_BS, v, n, NULL);
	}
	return rc;
}

static int flag_create(struct iod_store *s)
{
	int fd = openat(s->dir_fd, CSUM_FLAG, O_WRONLY | O_CREAT | O_TRUNC |
			O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && fsync(s->dir_fd) < 0)
		rc = -errno;
	return rc;
}

/* A version 1 entry CSUM_MARK was the block's own CRC or a block gone bad
 * since: the first becomes 0xffffffff (store_csum_block), the second stays
 * and now says "marked bad", which it is. */
static int csum_convert(struct iod_store *s, uint64_t ino, uint32_t column,
			uint8_t *blk)
{
	uint32_t e[1024];
	struct sub *sub;
	struct stat st, hs;
	int fd = csum_open_stat(s, ino, column, &st), rc = 0;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	for (uint64_t b0 = 0; rc == 0 && b0 * 4 < (uint64_t)st.st_size;
	     b0 += TW_ARRAY_SIZE(e)) {
		rc = csum_load(fd, b0, TW_ARRAY_SIZE(e), e);
		for (size_t i = 0; rc == 0 && i < TW_ARRAY_SIZE(e); i++) {
			uint64_t b = b0 + i;
			uint32_t ff = htole32(UINT32_MAX);
			long r;

			if (e[i] != CSUM_MARK)
				continue;
			rc = store_get_sub(s, ino, column, NULL, 0, &sub);
			if (rc < 0)
				break;
			if (fstat(sub->fd, &hs) < 0) {
				rc = -errno;
				break;
			}
			if (b * CSUM_BS >= (uint64_t)hs.st_size)
				continue;
			r = tw_pread_full(sub->fd, blk, CSUM_BS, b * CSUM_BS);
			if (r < 0) {
				rc = (int)r;
				break;
			}
			if (csum_raw(blk, (size_t)r) == CSUM_MARK)
				rc = tw_pwrite_all(fd, &ff, 4, b * 4);
		}
	}
	csum_put(s, fd);
	return rc == -ENOENT ? 0 : rc;
}

int store_csum_upgrade(struct iod_store *s)
{
	bool have = faccessat(s->dir_fd, CSUM_FLAG, F_OK,
			      AT_SYMLINK_NOFOLLOW) == 0;
	bool have1 = faccessat(s->dir_fd, CSUM_FLAG1, F_OK,
			       AT_SYMLINK_NOFOLLOW) == 0;
	uint64_t after_ino = 0, n_subs = 0;
	uint32_t after_col = 0;
	uint8_t *buf;
	int rc = 0;

	if (!s->csum_on) {
		/* C3: in-place writes keep no entries from here on */
		if ((have && unlinkat(s->dir_fd, CSUM_FLAG, 0) < 0) ||
		    (have1 && unlinkat(s->dir_fd, CSUM_FLAG1, 0) < 0) ||
		    ((have || have1) && fsync(s->dir_fd) < 0))
			return -errno;
		return 0;
	}
	if (have) {
		s->csum_check = true;
		return 0;
	}
	if (have1)
		tw_info("data directory %s: converting block checksums of "
			"every subfile to version 2 (%s; entries of the "
			"value now reserved for marked-bad blocks)", s->dir,
			CSUM_FLAG);
	else
		tw_info("data directory %s: computing block checksums of "
			"every subfile (a data directory without %s: older "
			"than checksums, or last run in ordered/writeback "
			"mode)", s->dir, CSUM_FLAG);
	buf = malloc(1u << 20);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct store_key *keys;
		size_t n;
		bool more;

		rc = store_scan(s, after_ino, after_col, 4096, &keys, &n, &more);
		if (rc < 0)
			break;
		for (size_t i = 0; rc == 0 && i < n; i++) {
			rc = have1 ? csum_convert(s, keys[i].ino,
						  keys[i].column, buf)
				   : csum_compute(s, keys[i].ino,
						  keys[i].column, buf, 1u << 20);
			n_subs++;
		}
		if (n) {
			after_ino = keys[n - 1].ino;
			after_col = keys[n - 1].column;
		}
		free(keys);
		if (rc < 0 || !more)
			break;
	}
	free(buf);
	if (rc == 0 && syncfs(s->dir_fd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = flag_create(s);
	if (rc == 0 && have1 && (unlinkat(s->dir_fd, CSUM_FLAG1, 0) < 0 ||
				 fsync(s->dir_fd) < 0))
		rc = -errno;
	if (rc < 0) {
		tw_err("data directory %s: computing block checksums: %s",
		       s->dir, strerror(-rc));
		return rc;
	}
	tw_info("data directory %s: block checksums of %" PRIu64 " subfiles "
		"%s", s->dir, n_subs, have1 ? "converted" : "computed");
	s->csum_check = true;
	return 0;
}

/* ------------------------------------------------------- the interface */

struct iod_csum_stats *iod_store_csum_stats(struct iod_store *s)
{
	s->csum_stats.checked = s->csum_blocks_checked;
	s->csum_stats.mismatches = s->csum_mismatches;
	s->csum_stats.bad_off = s->csum_bad_off;
	s->csum_stats.enabled = s->csum_check;
	return &s->csum_stats;
}

size_t iod_store_checksum_bad(const struct iod_store *s,
			      const uint32_t **regions)
{
	*regions = s->csum_bad_regions;
	return s->n_csum_bad_regions;
}

int iod_store_csum_verify(struct iod_store *s, uint64_t ino, uint32_t column,
			  uint64_t blk)
{
	return store_csum_verify_block(s, ino, column, blk);
}

long iod_store_read_unchecked(struct iod_store *s, uint64_t ino,
			      uint32_t column, uint64_t off, size_t len,
			      uint8_t **out, struct iod_sub_stat *st)
{
	uint64_t bad = s->csum_soft_bad;
	long n;

	/* as iod_store_checksum: bad blocks read as they are on disk */
	s->csum_soft = true;
	n = iod_store_read(s, ino, column, off, len, out, st);
	s->csum_soft = false;
	s->csum_soft_bad = bad;
	return n;
}
