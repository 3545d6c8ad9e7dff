/* store_space.c - the store's space operations: fallocate (allocation at
 * home), hole punching and SEEK_DATA/SEEK_HOLE (iod_int.h), on top of the
 * journal plumbing of store_journal.c.
 *
 * A punch is one handle: a write-intent mark of its 1 MiB regions (resync
 * copies them) and, in data=journal, a punch record (store_journal.c
 * "Record payloads") whose cut at the unchanged size freezes every
 * resident block of the subfile, so that a later write becomes a new item
 * after the record instead of updating an older copy that the punch would
 * then destroy at checkpoint.  Checkpoint and replay apply the log in
 * order (journal/FORMAT.md J10), so blocks journaled before the punch can
 * never come back over the hole.  The reply waits for the checkpoint that
 * puts the hole at home: until then readers may see the old bytes of an
 * unacknowledged punch, afterwards home and the index agree and SEEK sees
 * the hole.  In ordered/writeback modes the hole is punched in place and
 * journaled like an in-place write (jbd_inplace; rule R keeps older cuts
 * from replaying over it).
 *
 * Allocation never changes contents or size, so it happens at home only:
 * in place in ordered/writeback, after the checkpoint of the subfile's
 * creation record in data=journal.  ENOSPC comes from jbd_admit before
 * anything is journaled.
 *
 * SEEK: journal-resident blocks are data; home bytes count only below the
 * home size, the logical size and the smallest pending cut.
 *
 * Everything runs on the iod's loop thread.
 */
#include "store_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fallocate or punch waiting for its checkpoint (data=journal) or its
 * close (ordered/writeback), then the home step. */
struct space_req {
	struct iod_store *s;
	uint64_t ino;
	uint32_t column;
	uint64_t off, len;
	bool alloc;                /* fallocate at home once checkpointed */
	struct iod_sub_stat *st;
	iod_store_cb cb;
	void *arg;
};

/* fallocate(KEEP_SIZE) at home: the subfile exists there (created in
 * place, or by the checkpoint of its create record). */
static int home_alloc(struct iod_store *s, uint64_t ino, uint32_t column,
		      uint64_t off, uint64_t len)
{
	struct sub *e;
	int rc = store_get_sub(s, ino, column, NULL, 0, &e);

	if (rc == -ENOENT)
		return 0;          /* deleted meanwhile: nothing to hold */
	if (rc < 0)
		return rc;
	if (fallocate(e->fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

/* Punch at home; a file system without hole punching gets zeros written
 * up to its size instead (the contents are what matter to readers). */
int store_home_punch(struct sub *e, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[65536];
	struct stat sb;

	if (fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	if (fstat(e->fd, &sb) < 0)
		return -errno;
	for (uint64_t end = TW_MIN(off + len, (uint64_t)sb.st_size); off < end;) {
		size_t n = (size_t)TW_MIN(end - off, (uint64_t)sizeof(zeros));
		int rc = tw_pwrite_all(e->fd, zeros, n, off);

		if (rc < 0)
			return rc;
		off += n;
	}
	return 0;
}

static void space_done(void *arg, int rc)
{
	struct space_req *q = arg;
	struct iod_store *s = q->s;

	if (rc < 0)
		store_check_abort(s);
	if (rc == 0 && q->alloc)
		rc = home_alloc(s, q->ino, q->column, q->off, q->len);
	if (q->st && store_stat_logical(s, q->ino, q->column, q->st) < 0)
		memset(q->st, 0, sizeof(*q->st));
	q->cb(q->arg, rc);
	free(q);
}

static void closed_noop(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

/* Commit h; data=journal: q runs once the checkpoint has moved everything
 * up to h home, else once h is closed.  Consumes h, and q on error. */
static int space_commit(struct iod_store *s, struct jbd_handle *h,
			struct space_req *q)
{
	int64_t seq;
	int rc;

	if (s->mode != JBD_MODE_JOURNAL) {
		seq = jbd_commit(h, 0, space_done, q);
		rc = seq < 0 ? (int)seq : 0;
	} else {
		seq = jbd_commit(h, 0, closed_noop, NULL);
		rc = seq < 0 ? (int)seq : jbd_checkpoint(s->j, space_done, q);
	}
	if (rc < 0) {
		store_check_abort(s);
		free(q);
	}
	return rc;
}

static struct space_req *space_new(struct iod_store *s, uint64_t ino,
				   uint32_t column, uint64_t off, uint64_t len,
				   struct iod_sub_stat *st, iod_store_cb cb,
				   void *arg)
{
	struct space_req *q = calloc(1, sizeof(*q));

	if (q)
		*q = (struct space_req){ .s = s, .ino = ino, .column = column,
					 .off = off, .len = len, .st = st,
					 .cb = cb, .arg = arg };
	return q;
}

int iod_store_fallocate(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, uint64_t len, uint64_t trunc_gen,
			const struct iod_sub_layout *layout,
			struct iod_sub_stat *st, iod_store_cb cb, void *arg)
{
	uint64_t obj = store_obj(ino, column);
	struct jbd_handle *h = NULL;
	struct space_req *q = NULL;
	struct store_lstate ls;
	bool create;
	uint64_t gen;
	int rc;

	assert(layout);
	if (len == 0 || store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_check_mutation(s, ino, column, off, len);
	if (rc < 0)
		return rc;
	rc = store_change_start(s, ino, column, trunc_gen, &ls, &gen);
	if (rc < 0)
		return rc;
	create = !ls.exists || !ls.xattr_valid;
	/* ENOSPC before anything is journaled or acknowledged (J13). */
	rc = jbd_admit(s->j, len);
	if (rc < 0)
		return rc;
	q = space_new(s, ino, column, off, len, st, cb, arg);
	if (!q)
		return -ENOMEM;
	rc = jbd_begin(s->j, &h);
	if (rc < 0)
		goto fail;
	if (create) {
		rc = store_rec_create(h, obj, gen, layout);
		if (rc < 0)
			goto fail;
	}
	if (s->mode == JBD_MODE_JOURNAL) {
		q->alloc = true;   /* at home once the creation got there */
	} else {
		struct sub *e;

		rc = store_sub_at_gen(s, ino, column, create, layout, gen, &e);
		if (rc == 0)
			rc = home_alloc(s, ino, column, off, len);
		if (rc == 0)
			rc = store_inplace(h, e);
		if (rc < 0)
			goto fail;
	}
	rc = space_commit(s, h, q);
	if (rc < 0)
		return rc;
	if (create)
		store_track(s, obj, gen, layout, 1, false, 0, 0);
	return 0;
fail:
	jbd_cancel(h);
	free(q);
	return rc;
}

int iod_store_punch(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, uint64_t len, uint64_t trunc_gen, bool zero,
		    struct iod_sub_stat *st, iod_store_cb cb, void *arg)
{
	uint64_t obj = store_obj(ino, column);
	uint64_t first = off >> IOD_REGION_SHIFT;
	uint64_t last = (off + len - 1) >> IOD_REGION_SHIFT;
	struct jbd_handle *h = NULL;
	struct space_req *q = NULL;
	struct iod_sub_stat now;
	unsigned nrec = 0;
	uint64_t gen;
	int rc;

	if (len == 0 || store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_check_mutation(s, ino, column, off, len);
	if (rc < 0)
		return rc;
	rc = store_existing_start(s, ino, column, trunc_gen, st, cb, arg, &gen);
	if (rc <= 0)
		return rc;
	rc = store_stat_logical(s, ino, column, &now);
	if (rc < 0)
		return rc;
	/* Bytes at or past the logical end are no data of the subfile (a
	 * grow shows zeros there), so a punch that keeps the size stops at
	 * it, unless it carries a newer trunc_gen, which its mark records.
	 * A punch of a whole sparse range (fallocate over a TiB) would
	 * otherwise journal a record per 1 GiB piece, each answered only
	 * after a checkpoint of all of them. */
	if (!zero && gen == now.trunc_gen) {
		if (off >= now.size) {
			if (st)
				*st = now;
			return store_barrier(s, cb, arg);
		}
		len = TW_MIN(len, now.size - off);
		last = (off + len - 1) >> IOD_REGION_SHIFT;
	}
	if (zero) {
		rc = jbd_admit(s->j, len);   /* ENOSPC before anything */
		if (rc < 0)
			return rc;
	}
	q = space_new(s, ino, column, off, len, st, cb, arg);
	if (!q)
		return -ENOMEM;
	rc = jbd_begin(s->j, &h);
	if (rc < 0)
		goto fail;
	/* The mark carries the regions to resync and the new trunc_gen. */
	rc = store_rec_mark(h, obj, gen, first, last - first + 1);
	if (rc < 0)
		goto fail;
	nrec++;
	if (s->mode == JBD_MODE_JOURNAL) {
		struct rec_punch p;

		/* A cut at the unchanged size freezes every resident block
		 * of the subfile: a later write to one of them becomes a
		 * new item after this record instead of updating an older
		 * copy in place, which the punch would then destroy at
		 * checkpoint (journal.h jbd_record, jbd.c index_cut). */
		store_hdr_init(&p.h, REC_PUNCH, gen);
		p.off = htole64(off);
		p.len = htole64(len);
		rc = jbd_record(h, obj, now.size, &p, sizeof(p));
		if (rc == 0)   /* reads and partial writes see the hole now */
			rc = jbd_hole(h, obj, off, len);
		if (rc < 0)
			goto fail;
		nrec++;
		q->alloc = zero;   /* once the hole is at home */
	} else {
		struct sub *e;

		rc = store_sub_at_gen(s, ino, column, false, NULL, gen, &e);
		if (rc == 0)
			rc = store_home_punch(e, off, len);
		if (rc == 0 && zero)
			rc = home_alloc(s, ino, column, off, len);
		if (rc == 0)
			rc = store_inplace(h, e);
		if (rc < 0)
			goto fail;
	}
	rc = space_commit(s, h, q);
	if (rc < 0)
		return rc;
	store_track(s, obj, gen, NULL, nrec, true, first, last);
	/* blocks wholly punched are zeros now, not a bad copy (C4) */
	if ((off + len) / JBD_BLOCK_SIZE > (off + JBD_BLOCK_SIZE - 1) /
	    JBD_BLOCK_SIZE)
		store_csum_pend_drop(s, obj, (off + JBD_BLOCK_SIZE - 1) /
				     JBD_BLOCK_SIZE,
				     (off + len) / JBD_BLOCK_SIZE - 1,
				     UINT64_MAX);
	return 0;
fail:
	jbd_cancel(h);
	free(q);
	return rc;
}

/* Home data at or after x below lim (the home size or a pending cut), or
 * UINT64_MAX. */
static uint64_t home_data(int fd, uint64_t x, uint64_t lim)
{
	off_t r;

	if (fd < 0 || x >= lim)
		return UINT64_MAX;
	r = lseek(fd, (off_t)x, SEEK_DATA);
	return r < 0 || (uint64_t)r >= lim ? UINT64_MAX : (uint64_t)r;
}

int iod_store_seek(struct iod_store *s, uint64_t ino, uint32_t column,
		   uint64_t off, int whence, uint64_t *res, uint64_t *size)
{
	uint64_t obj = store_obj(ino, column);
	struct iod_sub_stat st, home = { 0 };
	uint64_t lim, y;
	struct sub *e = NULL;
	bool journal = s->mode == JBD_MODE_JOURNAL;
	int fd = -1, rc;

	*size = 0;
	if ((whence != SEEK_DATA && whence != SEEK_HOLE) ||
	    iod_check_range(column, off, 0) < 0 || store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_lost_check(s, ino, column);
	if (rc < 0)
		return rc;
	rc = store_stat_logical(s, ino, column, &st);
	if (rc < 0)
		return rc;
	if (!st.exists || off >= st.size)
		return 0;
	*size = st.size;
	rc = store_get_sub(s, ino, column, NULL, 0, &e);
	if (rc == 0)
		rc = store_home_stat(e, &home);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (rc == 0)
		fd = e->fd;
	/* Home bytes count up to the home end, the logical end and (journal
	 * mode) the smallest pending cut: past it home holds stale bytes. */
	lim = TW_MIN(home.size, st.size);
	if (journal)
		lim = TW_MIN(lim, jbd_min_cut(s->j, obj));
	if (whence == SEEK_DATA) {
		uint64_t d = home_data(fd, off, lim);

		if (journal) {
			uint64_t b = jbd_resident_next(s->j, obj,
						       off / JBD_BLOCK_SIZE);

			if (b != UINT64_MAX)
				d = TW_MIN(d, TW_MAX(b * JBD_BLOCK_SIZE, off));
		}
		if (d >= st.size)
			return 0;
		*res = d;
		return 1;
	}
	/* SEEK_HOLE: step over home extents and resident blocks. */
	y = off;
	for (unsigned guard = 0; y < st.size && guard < (1u << 24); guard++) {
		if (journal && jbd_resident_has(s->j, obj, y / JBD_BLOCK_SIZE)) {
			y = (y / JBD_BLOCK_SIZE + 1) * JBD_BLOCK_SIZE;
			continue;
		}
		if (home_data(fd, y, lim) != y)
			break;
		{
			off_t hole = lseek(fd, (off_t)y, SEEK_HOLE);

			if (hole < 0)
				return -errno;
			/* Resident blocks inside the extent are data too:
			 * go on from the extent's end (or the limit). */
			y = TW_MAX(TW_MIN((uint64_t)hole, lim), y + 1);
		}
	}
	*res = TW_MIN(y, st.size);
	return 1;
}
