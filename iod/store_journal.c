/* store_journal.c - every mutation of the iod's subfile store goes through
 * the block journal (journal.h "Block journal (iod)", docs/ARCHITECTURE.md
 * "Journal"); reads, sizes, listing and checksums see what the journal
 * holds.
 *
 * It implements the store's public operations (iod_int.h) on top of the
 * home side (store.c): the journal's callbacks (home_fd, home_sync, apply,
 * free_space), the iod's metadata records and the logical state of
 * subfiles whose records are not yet applied at home.  The write-intent
 * log's live set and clearing are in store_intent.c.  It does not do
 * networking or ordering between twins (twin.c).
 *
 * One request = one journal handle = all or nothing after a crash: a WRITE
 * is (create record if the subfile is new) + (mark record for the 1 MiB
 * regions it touches, when not already marked, carrying trunc_gen) + the
 * data (journal mode: jbd_write; ordered/writeback: written in place, then
 * jbd_inplace).  Records come before the data in the handle, so at
 * checkpoint and replay the subfile exists and carries the newer trunc_gen
 * before its data lands (store.c S2).  TRUNCATE is (a mark record for the
 * regions it changes, when not already marked: trunc_regions) + a record
 * with a cut at the new size, DELETE one with a cut of 0 (journal.h
 * jbd_record) per column named, whether or not its subfile exists; a
 * delete needs no mark, as a resync lists every subfile the target holds
 * and we do not (resync.c step 1).  A
 * PUNCH (fallocate PUNCH_HOLE) is a mark plus a punch record; FALLOCATE
 * allocates at home (both in store_space.c).
 *
 * When metadata takes effect at home (journal/FORMAT.md "Records and
 * modes"):
 *   journal    records are applied at checkpoint and replay; until then the
 *              logical state (exists, trunc_gen, layout) is kept in memory
 *              (struct smeta) and sizes/contents come from the journal index.
 *   ordered,   the store changes home in place when the request arrives
 *   writeback  (create, trunc_gen, ftruncate, unlink, data), exactly as a
 *              synchronous store would, and journals the records so that
 *              replay re-applies them after a machine crash (rule R keeps an
 *              old cut from destroying newer in-place data).  Applying them
 *              at close (JBD_PHASE_CLOSE) only persists intent marks: doing a
 *              cut again there could undo a later in-place write.
 *
 * Invariants (cited as SJ<n>):
 *   SJ1  A subfile has a struct smeta iff records about it are journaled
 *        but not yet applied at home (pending > 0); then the smeta is its
 *        logical state, else home (store.c) is.
 *   SJ2  The live intent set holds every region marked in a journaled
 *        record and not cleared in one; a write's regions are marked in
 *        the write's own handle unless already in the live set (then an
 *        earlier transaction, replayed before it, marked them).
 *   SJ3  A clear covers only regions whose last write was acknowledged
 *        before iod_store_intent_epoch returned the clear's token, so a
 *        sync of both twins started after that call covers it.
 *   SJ4  The callback of a request runs only from the journal's completion
 *        (transaction closed, or synced when asked), so a reply built in it
 *        is covered by guarantee 1 (docs/ARCHITECTURE.md "Guarantees").
 *
 * Record payloads (opaque to the journal, little-endian, version 1; every
 * one is an idempotent "set" so replay may apply it more than once, J15):
 *
 *   header (16): op u16 (1 create, 2 mark, 3 clear, 4 truncate, 5 delete,
 *                6 punch, 7 bad copy),
 *                version u16 = 1, reserved u32 = 0, trunc_gen u64
 *   create:  + stripe_size u32, stripe_count u32, n_groups u32, reserved
 *            u32, groups u32[32]                   (160 bytes)
 *            -> create the subfile if absent with its xattr; raise trunc_gen
 *   mark:    + first u64, count u64 (1 MiB regions; count 0: only the gen)
 *            -> raise trunc_gen, add the regions to user.twinfs.wil (more
 *            than WIL_MAX_COUNT: the whole subfile)
 *   clear:   + n u32, flags u32 (bit 0: everything), n x (first, count)
 *            -> remove the regions (or all) from user.twinfs.wil
 *   truncate:+ size u64 (journal cut = size) -> raise trunc_gen, ftruncate
 *   delete:  (journal cut = 0) -> unlink
 *   punch:   + off u64, len u64 (journal cut = the unchanged size, which
 *            freezes older resident blocks; data=journal only) -> raise
 *            trunc_gen, fallocate(PUNCH_HOLE | KEEP_SIZE) the range
 *   bad copy:+ off u64, len u64 (JBD_NO_CUT would let a later write update
 *            the copy in place: journal cut = the unchanged size, which
 *            freezes it; data=journal only; follows, in the same call, the
 *            handle writing that copy) -> raise trunc_gen, set the entry
 *            of every block of [off, off + len) below the home size to
 *            CSUM_MARK (store_csum.c C4)
 * The journal object id is ino << 8 | column (ino <= IOD_MAX_INO).
 */
#include "store_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CSUM_CHUNK       (1u << 20)

/* One request waiting for its transaction. */
struct sreq {
	struct iod_store *s;
	iod_store_cb cb;
	void *arg;
};

/* ------------------------------------------------------------ helpers */

void store_check_abort(struct iod_store *s)
{
	if (s->abort_reported || !s->j || !jbd_aborted(s->j))
		return;
	s->abort_reported = true;
	tw_err("data directory %s: THE JOURNAL HAS ABORTED after an I/O "
	       "error; this iod now refuses every write with EIO.  Restart it "
	       "(replay recovers everything acknowledged) after checking the "
	       "disk", s->dir);
	if (s->on_abort)
		s->on_abort(s->abort_arg);
}

int store_refuse_aborted(struct iod_store *s)
{
	if (!jbd_aborted(s->j))
		return 0;
	store_check_abort(s);
	return -EIO;
}

static void sreq_done(void *arg, int rc)
{
	struct sreq *r = arg;
	struct iod_store *s = r->s;

	if (rc < 0)
		store_check_abort(s);
	r->cb(r->arg, rc);
	free(r);
}

static struct sreq *sreq_new(struct iod_store *s, iod_store_cb cb, void *arg)
{
	struct sreq *r = calloc(1, sizeof(*r));

	if (r) {
		r->s = s;
		r->cb = cb;
		r->arg = arg;
	}
	return r;
}

/* Commit h (consumed) with r as its callback; frees r on error. */
static int commit(struct iod_store *s, struct jbd_handle *h, bool sync,
		  struct sreq *r)
{
	int64_t seq = jbd_commit(h, sync ? JBD_COMMIT_SYNC : 0, sreq_done, r);

	if (seq < 0) {
		free(r);
		store_check_abort(s);
		return (int)seq;
	}
	return 0;
}

/* Start a request: *r calls cb(arg) once *h, a new handle, is closed.
 * Both are set, or neither (-errno, nothing to undo).  Until h is
 * committed (commit or jbd_commit, which take them), an error drops both
 * with req_cancel. */
static int req_start(struct iod_store *s, iod_store_cb cb, void *arg,
		     struct sreq **r, struct jbd_handle **h)
{
	int rc;

	*h = NULL;
	*r = sreq_new(s, cb, arg);
	if (!*r)
		return -ENOMEM;
	rc = jbd_begin(s->j, h);
	if (rc < 0) {
		free(*r);
		*r = NULL;
	}
	return rc;
}

static void req_cancel(struct jbd_handle *h, struct sreq *r)
{
	jbd_cancel(h);
	free(r);
}

int store_check_ids(uint64_t ino, uint32_t column)
{
	return column < IOD_MAX_COLUMNS && ino <= IOD_MAX_INO ? 0 : -EINVAL;
}

void store_hdr_init(struct rec_hdr *h, int op, uint64_t trunc_gen)
{
	memset(h, 0, sizeof(*h));
	h->op = htole16((uint16_t)op);
	h->version = htole16(REC_VERSION);
	h->trunc_gen = htole64(trunc_gen);
}

/* ------------------------------------------------ logical state (SJ1) */

int store_logical(struct iod_store *s, uint64_t ino, uint32_t column,
		   struct store_lstate *ls)
{
	struct smeta *m = tw_hmap_get(&s->smeta, store_obj(ino, column) + 1);
	struct sub *e;
	int rc;

	if (m) {
		ls->exists = m->exists;
		ls->xattr_valid = true;
		ls->trunc_gen = m->trunc_gen;
		return 0;
	}
	rc = store_get_sub(s, ino, column, NULL, 0, &e);
	if (rc == -ENOENT) {
		*ls = (struct store_lstate){ .exists = false };
		return 0;
	}
	if (rc < 0)
		return rc;
	ls->exists = true;
	ls->xattr_valid = e->xattr_valid;
	ls->trunc_gen = e->trunc_gen;
	return 0;
}

/* After a successful commit: the subfile's logical state and nrec more
 * pending records (SJ1). */
int store_meta_install(struct iod_store *s, uint64_t obj, bool exists,
			uint64_t trunc_gen, const struct iod_sub_layout *layout,
			unsigned nrec)
{
	struct smeta *m;

	if (nrec == 0)
		return 0;
	m = tw_hmap_get(&s->smeta, obj + 1);
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m || tw_hmap_put(&s->smeta, obj + 1, m) < 0) {
			free(m);
			return -ENOMEM;
		}
		m->obj = obj;
	}
	m->exists = exists;
	m->trunc_gen = trunc_gen;
	if (layout) {
		m->layout = *layout;
		m->has_layout = true;
	}
	m->pending += nrec;
	return 0;
}

void store_track(struct iod_store *s, uint64_t obj, uint64_t gen,
		 const struct iod_sub_layout *layout, unsigned nrec,
		 bool touch, uint64_t first, uint64_t last)
{
	if (store_meta_install(s, obj, true, gen, layout, nrec) < 0 ||
	    (touch && store_intent_touch(s, obj, first, last) < 0))
		tw_log_rl(TW_LOG_ERR, "data directory %s: out of memory "
			  "tracking subfile %016" PRIx64 ".%" PRIu32, s->dir,
			  store_obj_ino(obj), store_obj_column(obj));
}

int store_change_start(struct iod_store *s, uint64_t ino, uint32_t column,
		       uint64_t trunc_gen, struct store_lstate *ls,
		       uint64_t *gen)
{
	int rc = store_refuse_aborted(s);

	if (rc == 0)
		rc = store_logical(s, ino, column, ls);
	if (rc < 0)
		return rc;
	if (trunc_gen < ls->trunc_gen)
		return -ESTALE;
	*gen = TW_MAX(trunc_gen, ls->trunc_gen);
	return 0;
}

static void meta_applied(struct iod_store *s, uint64_t obj)
{
	struct smeta *m = tw_hmap_get(&s->smeta, obj + 1);

	if (m && m->pending > 0 && --m->pending == 0) {
		tw_hmap_del(&s->smeta, obj + 1);
		free(m);
	}
}

/* One more pending record that does not change the logical state. */
int store_meta_keep(struct iod_store *s, uint64_t obj)
{
	struct smeta *m = tw_hmap_get(&s->smeta, obj + 1);
	struct store_lstate ls;
	int rc;

	if (m) {
		m->pending++;
		return 0;
	}
	rc = store_logical(s, store_obj_ino(obj), store_obj_column(obj), &ls);
	if (rc < 0)
		return rc;
	return store_meta_install(s, obj, ls.exists, ls.trunc_gen, NULL, 1);
}

/* The subfile at home: its stat and *e, or a zero stat and *e NULL when
 * it is absent. */
static int home_stat(struct iod_store *s, uint64_t ino, uint32_t column,
		     struct iod_sub_stat *home, struct sub **e)
{
	int rc = store_get_sub(s, ino, column, NULL, 0, e);

	*home = (struct iod_sub_stat){ 0 };
	if (rc == 0)
		rc = store_home_stat(*e, home);
	if (rc < 0)
		*e = NULL;
	return rc == -ENOENT ? 0 : rc;
}

/* store_stat_logical from the logical state ls and the home's stat
 * (home_stat). */
static void stat_logical_of(struct iod_store *s, uint64_t ino,
			    uint32_t column, const struct store_lstate *ls,
			    const struct iod_sub_stat *home,
			    struct iod_sub_stat *st)
{
	uint64_t size;

	if (!ls->exists) {
		*st = (struct iod_sub_stat){ .exists = false };
		return;
	}
	size = jbd_size(s->j, store_obj(ino, column), home->size);
	st->exists = true;
	st->size = size;
	st->trunc_gen = ls->trunc_gen;
	st->blocks = home->blocks;
	if (size > home->size) {
		/* Journal-resident blocks past the home end will be allocated
		 * after the checkpoint; count those, not the whole span, so a
		 * sparse file looks sparse before its checkpoint too.  (A
		 * resident overwrite inside the home range is counted as well:
		 * an estimate until the checkpoint makes it exact.) */
		uint64_t span = (size + 4095) / 4096 - (home->size + 4095) / 4096;
		uint64_t res = jbd_resident(s->j, store_obj(ino, column));

		st->blocks += TW_MIN(span, res) * 8;
	}
}

/* store_stat_logical with the home's stat already taken (home_stat). */
static int stat_logical_with(struct iod_store *s, uint64_t ino,
			     uint32_t column, const struct iod_sub_stat *home,
			     struct iod_sub_stat *st)
{
	struct store_lstate ls;
	int rc = store_logical(s, ino, column, &ls);

	if (rc == 0)
		stat_logical_of(s, ino, column, &ls, home, st);
	return rc;
}

/* store_stat_logical, also giving the home's fd (-1: none) and size, which
 * a read passes on to jbd_read_home: one fstat per read. */
static int stat_logical_home(struct iod_store *s, uint64_t ino,
			     uint32_t column, struct iod_sub_stat *st,
			     struct sub **home_sub, uint64_t *home_size)
{
	struct iod_sub_stat home;
	struct store_lstate ls;
	int rc;

	*home_sub = NULL;
	*home_size = 0;
	rc = store_logical(s, ino, column, &ls);
	if (rc < 0)
		return rc;
	if (!ls.exists) {
		*st = (struct iod_sub_stat){ .exists = false };
		return 0;
	}
	rc = home_stat(s, ino, column, &home, home_sub);
	if (rc < 0)
		return rc;
	*home_size = home.size;
	stat_logical_of(s, ino, column, &ls, &home, st);
	return 0;
}

int store_stat_logical(struct iod_store *s, uint64_t ino, uint32_t column,
			struct iod_sub_stat *st)
{
	struct sub *e;
	uint64_t hsize;

	return stat_logical_home(s, ino, column, st, &e, &hsize);
}

/* ------------------------------------------------ journal callbacks */

static int op_home_fd(void *arg, uint64_t obj, bool create, int *fd)
{
	static const struct iod_sub_layout none = { 0 };
	struct iod_store *s = arg;
	uint64_t ino = store_obj_ino(obj);
	uint32_t column = store_obj_column(obj);
	struct smeta *m = tw_hmap_get(&s->smeta, obj + 1);
	const struct iod_sub_layout *l = NULL;
	struct sub *e;
	int rc;

	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	if (create)
		l = m && m->has_layout ? &m->layout : &none;
	rc = store_get_sub(s, ino, column, l, m ? m->trunc_gen : 0, &e);
	if (rc < 0)
		return rc;
	*fd = e->fd;
	return 0;
}

static int op_home_sync(void *arg, const uint64_t *objs, size_t n)
{
	return store_sync_objs(arg, objs, n);
}

/* ordered mode: a commit fsyncs its own subfiles, not the disk (S6). */
static int op_home_sync_fds(void *arg, const uint64_t *objs, size_t n,
			    int *fds, size_t max)
{
	return store_sync_objs_fds(arg, objs, n, fds, max);
}

/* The checkpoint's helper thread, before its syncfs (S4). */
static int op_home_bg(void *arg)
{
	return store_unlinkq_drain(arg);
}

/* Block checksums (store_csum.c C1). */
static int op_home_blocks(void *arg, uint64_t obj, uint64_t blk,
			  const struct iovec *iov, int n, const uint32_t *sums)
{
	return store_csum_home(arg, obj, blk, iov, n, sums);
}

static int op_home_check(void *arg, uint64_t obj, int fd, uint64_t hsize,
			 uint64_t off, const void *buf, size_t len)
{
	return store_csum_check(arg, obj, fd, hsize, off, buf, len);
}

static int op_home_fs_fd(void *arg)
{
	struct iod_store *s = arg;

	return s->sub_fd;
}

static int64_t op_free_space(void *arg)
{
	struct iod_store *s = arg;
	struct statvfs sv;

	if (fstatvfs(s->dir_fd, &sv) < 0)
		return -errno;
	return (int64_t)((uint64_t)sv.f_bavail * (sv.f_frsize ? sv.f_frsize
							     : sv.f_bsize));
}

/* The home subfile of a record that cuts or punches, its trunc_gen raised
 * to gen: 1 and *e, or 0 when it is absent (deleted later in the log). */
static int home_at_gen(struct iod_store *s, uint64_t ino, uint32_t column,
		       uint64_t gen, struct sub **e)
{
	int rc = store_sub_at_gen(s, ino, column, false, NULL, gen, e);

	if (rc == -ENOENT)
		return 0;
	return rc < 0 ? rc : 1;
}

/* A record of want bytes that changes home (a cut, a punch, a mark) into
 * out, and its subfile: 1 and *e; 0 when there is nothing to do (not a
 * phase that changes home, or the subfile is absent); -EBADMSG for a
 * wrong length. */
static int rec_at_home(struct iod_store *s, bool home, uint64_t obj,
		       const void *rec, size_t len, void *out, size_t want,
		       uint64_t gen, struct sub **e)
{
	if (len != want)
		return -EBADMSG;
	if (!home)
		return 0;
	memcpy(out, rec, want);
	return home_at_gen(s, store_obj_ino(obj), store_obj_column(obj), gen,
			   e);
}

static int apply_rec(struct iod_store *s, enum jbd_phase phase, uint64_t seq,
		     uint64_t obj, const void *rec, size_t len)
{
	struct rec_hdr h;
	uint64_t ino = store_obj_ino(obj);
	uint32_t column = store_obj_column(obj);
	/* Ordered/writeback changed home in place already; only the intent
	 * xattr is written at close (see the top of this file). */
	bool home = phase != JBD_PHASE_CLOSE;
	struct sub *e;
	int rc, op;
	uint64_t gen;

	if (len < sizeof(h) || store_check_ids(ino, column) < 0)
		return -EBADMSG;
	memcpy(&h, rec, sizeof(h));
	op = le16toh(h.op);
	gen = le64toh(h.trunc_gen);
	if (le16toh(h.version) != REC_VERSION)
		return -EPROTO;
	switch (op) {
	case REC_CREATE: {
		struct rec_create c;
		struct iod_sub_layout l = { 0 };

		if (len != sizeof(c))
			return -EBADMSG;
		if (!home)
			return 0;
		memcpy(&c, rec, sizeof(c));
		l.stripe_size = le32toh(c.stripe_size);
		l.stripe_count = le32toh(c.stripe_count);
		l.n_groups = TW_MIN(le32toh(c.n_groups), (uint32_t)IOD_MAX_COLUMNS);
		for (uint32_t i = 0; i < l.n_groups; i++)
			l.groups[i] = le32toh(c.groups[i]);
		return store_sub_at_gen(s, ino, column, true, &l, gen, &e);
	}
	case REC_MARK: {
		struct rec_mark mk;
		struct wil_range r;

		if (len != sizeof(mk))
			return -EBADMSG;
		memcpy(&mk, rec, sizeof(mk));
		rc = store_get_sub(s, ino, column, NULL, 0, &e);
		if (rc == -ENOENT)
			return 0;        /* deleted later in the log */
		if (rc < 0)
			return rc;
		if (home) {
			rc = store_raise_gen(s, e, gen, NULL);
			if (rc < 0)
				return rc;
		}
		r.first = le64toh(mk.first);
		r.count = le64toh(mk.count);
		return r.count ? store_wil_change(e, true, &r, 1, false) : 0;
	}
	case REC_CLEAR: {
		struct rec_clear c;
		struct wil_range r[CLEAR_MAX];
		uint32_t n;

		if (len < offsetof(struct rec_clear, r))
			return -EBADMSG;
		memset(&c, 0, sizeof(c));
		memcpy(&c, rec, TW_MIN(len, sizeof(c)));
		n = le32toh(c.n);
		if (n > CLEAR_MAX || len != offsetof(struct rec_clear, r) + 16 * n)
			return -EBADMSG;
		rc = store_get_sub(s, ino, column, NULL, 0, &e);
		if (rc == -ENOENT)
			return 0;
		if (rc < 0)
			return rc;
		for (uint32_t i = 0; i < n; i++) {
			r[i].first = le64toh(c.r[i].first);
			r[i].count = le64toh(c.r[i].count);
		}
		return store_wil_change(e, false, r, n,
				  (le32toh(c.flags) & CLEAR_ALL) != 0);
	}
	case REC_TRUNC: {
		struct rec_trunc t;

		rc = rec_at_home(s, home, obj, rec, len, &t, sizeof(t), gen, &e);
		if (rc <= 0)
			return rc;
		if (ftruncate(e->fd, (off_t)le64toh(t.size)) < 0)
			return -errno;
		return store_csum_cut(s, ino, column, le64toh(t.size));
	}
	case REC_PUNCH: {
		struct rec_punch p;

		rc = rec_at_home(s, home, obj, rec, len, &p, sizeof(p), gen, &e);
		if (rc <= 0)
			return rc;
		/* Earlier blocks are home already (J10), later ones follow:
		 * punching again at replay is idempotent. */
		rc = store_home_punch(e, le64toh(p.off), le64toh(p.len));
		return rc < 0 ? rc : store_csum_punch(s, ino, column,
						      le64toh(p.off),
						      le64toh(p.len));
	}
	case REC_BADCOPY: {
		struct rec_badcopy b;
		uint64_t first, last;
		struct stat hs;

		rc = rec_at_home(s, home, obj, rec, len, &b, sizeof(b), gen, &e);
		if (rc <= 0)
			return rc;
		store_csum_range(le64toh(b.off), le64toh(b.len), &first, &last);
		/* the reads of these blocks fail from home from here on */
		store_csum_pend_drop(s, obj, first, last, seq);
		if (fstat(e->fd, &hs) < 0)
			return -errno;
		for (uint64_t k = first; rc >= 0 && k <= last &&
		     k * JBD_BLOCK_SIZE < (uint64_t)hs.st_size; k++)
			rc = store_csum_mark(s, ino, column, k);
		return rc < 0 ? rc : 0;
	}
	case REC_DELETE:
		if (len != sizeof(h))
			return -EBADMSG;
		if (!home)
			return 0;
		/* S4: a checkpoint leaves the unlinkat to its helper thread. */
		return phase == JBD_PHASE_CHECKPOINT ?
		       store_unlink_later(s, ino, column) :
		       store_unlink(s, ino, column);
	default:
		return -EBADMSG;
	}
}

static int op_apply(void *arg, enum jbd_phase phase, uint64_t seq,
		    uint64_t obj, uint64_t cut, const void *rec, size_t len)
{
	struct iod_store *s = arg;
	int rc = apply_rec(s, phase, seq, obj, rec, len);

	(void)cut;
	if (rc < 0)
		tw_err("data directory %s: applying a journal record of "
		       "subfile %016" PRIx64 ".%u (%s): %s", s->dir,
		       store_obj_ino(obj), store_obj_column(obj),
		       phase == JBD_PHASE_REPLAY ? "replay" :
		       phase == JBD_PHASE_CLOSE ? "close" : "checkpoint",
		       strerror(-rc));
	else if (phase != JBD_PHASE_REPLAY)
		meta_applied(s, obj);
	return rc;
}

/* ------------------------------------------------------- open, close */

static void free_state(struct iod_store *s)
{
	uint64_t key;
	void *val;

	for (size_t it = 0; tw_hmap_next(&s->smeta, &it, &key, &val);)
		free(val);
	tw_hmap_free(&s->smeta);
	free(s->csum_pend);
	s->csum_pend = NULL;
	s->n_csum_pend = s->cap_csum_pend = 0;
	store_intents_free(s);
	store_lost_free(s);
}

/* jbd_ops.home_failed: the journal could not bring obj home for a reason
 * of obj's own; hold it as lost (store_lost.c) rather than abort every
 * other subfile's service with it. */
static int op_home_failed(void *arg, uint64_t obj, uint64_t seq, int err)
{
	return store_lost_add(arg, obj, err, seq);
}

int iod_store_open(const struct iod_store_opts *opts, struct iod_store **out)
{
	struct jbd_replay_info info;
	struct jbd_opts jo = { 0 };
	struct iod_store *s;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	tw_hmap_init(&s->smeta);
	tw_hmap_init(&s->intents);
	s->on_abort = opts->on_abort;
	s->abort_arg = opts->abort_arg;
	rc = store_home_open(s, opts);
	if (rc < 0) {
		free(s);
		return rc;
	}
	rc = store_lost_load(s);
	if (rc < 0) {
		tw_err("data directory %s: the list of lost subfiles: %s",
		       s->dir, strerror(-rc));
		store_lost_free(s);
		store_home_close(s);
		free(s);
		return rc;
	}
	switch (opts->journal_mode) {
	case TW_JNL_ORDERED:
		s->mode = JBD_MODE_ORDERED;
		break;
	case TW_JNL_WRITEBACK:
		s->mode = JBD_MODE_WRITEBACK;
		break;
	default:
		s->mode = JBD_MODE_JOURNAL;
		break;
	}
	s->csum_stats.bench_off = opts->bench_no_csum;
	rc = store_csum_open(s, s->mode == JBD_MODE_JOURNAL &&
			     !opts->bench_no_csum);
	if (rc < 0) {
		tw_err("data directory %s: csums/: %s", s->dir, strerror(-rc));
		goto fail;
	}
	s->reserve = opts->reserve ? opts->reserve : IOD_RESERVE_DEFAULT;
	snprintf(s->jpath, sizeof(s->jpath), "%s/journal", s->dir);
	jo.path = s->jpath;
	jo.size = opts->journal_size;
	jo.mode = s->mode;
	jo.commit_interval_ms = opts->commit_interval_ms;
	jo.reserve = s->reserve;
	jo.ops.home_fd = op_home_fd;
	jo.ops.home_sync = op_home_sync;
	jo.ops.home_fs_fd = op_home_fs_fd;
	jo.ops.home_bg = op_home_bg;
	if (s->mode == JBD_MODE_ORDERED)
		jo.ops.home_sync_fds = op_home_sync_fds;
	jo.ops.apply = op_apply;
	jo.ops.free_space = op_free_space;
	jo.ops.home_failed = op_home_failed;
	if (s->mode == JBD_MODE_JOURNAL) {
		jo.ops.home_blocks = op_home_blocks;
		jo.ops.home_check = op_home_check;
	}
	jo.ops.arg = s;
	jo.io = opts->test_io;
	jo.test_replay_eio = opts->test_replay_eio;
	jo.owner_drains = true;   /* main.c: a uv_prepare before each sleep */
	/* Replay runs in here, before the iod registers with mgrd or
	 * serves anything. */
	rc = jbd_open(&jo, &info, &s->j);
	if (rc < 0) {
		tw_err("data directory %s: journal: %s", s->dir, strerror(-rc));
		goto fail;
	}
	rc = store_csum_upgrade(s);
	if (rc < 0)
		goto fail;
	rc = store_intents_rebuild(s);
	if (rc < 0) {
		tw_err("data directory %s: rebuilding the write-intent log: %s",
		       s->dir, strerror(-rc));
		goto fail;
	}
	tw_info("data directory %s: journal mode %s, %" PRIu64 " transactions "
		"replayed, %" PRIu64 " regions marked in the write-intent log",
		s->dir, s->mode == JBD_MODE_JOURNAL ? "journal" :
		s->mode == JBD_MODE_ORDERED ? "ordered" : "writeback",
		info.txns, s->n_marked);
	*out = s;
	return 0;
fail:
	if (s->j)
		jbd_abandon(s->j);
	free_state(s);
	store_home_close(s);
	free(s);
	return rc;
}

void iod_store_close(struct iod_store *s)
{
	if (!s)
		return;
	if (s->j) {
		bool aborted = jbd_aborted(s->j) < 0;
		int rc = jbd_close(s->j);   /* frees s->j */

		if (rc < 0)
			tw_err("data directory %s: closing the journal: %s "
			       "(the next start replays it)", s->dir,
			       strerror(-rc));
		else if (!aborted)
			store_flags_clean_stop(s);
	}
	free_state(s);
	store_home_close(s);
	free(s);
}

void iod_store_abandon(struct iod_store *s)
{
	if (!s)
		return;
	jbd_abandon(s->j);
	free_state(s);
	store_home_close(s);
	free(s);
}

int iod_store_event_fd(const struct iod_store *s)
{
	return jbd_event_fd(s->j);
}

bool iod_store_ready(const struct iod_store *s)
{
	return jbd_ready(s->j);
}

void iod_store_process(struct iod_store *s)
{
	jbd_process(s->j);
	store_check_abort(s);
}

void iod_store_process_ready(struct iod_store *s)
{
	jbd_process_ready(s->j);
	store_check_abort(s);
}

void iod_store_tick(struct iod_store *s)
{
	jbd_tick(s->j);
	store_check_abort(s);
}

int iod_store_wait(struct iod_store *s)
{
	int rc = jbd_wait(s->j);

	store_check_abort(s);
	return rc;
}

int iod_store_aborted(const struct iod_store *s)
{
	return jbd_aborted(s->j);
}

void iod_store_journal_home(struct iod_store *s)
{
	jbd_want_home(s->j);
}

void iod_store_journal_free_cache(struct iod_store *s)
{
	jbd_free_cache(s->j);
}

void iod_store_journal_drop_cache(struct iod_store *s)
{
	jbd_drop_cache(s->j);
}

void iod_store_journal_stats(const struct iod_store *s, struct jbd_stats *st)
{
	jbd_stats(s->j, st);
}

void iod_store_journal_hists(struct iod_store *s, struct tw_hist *commit,
			     struct tw_hist *checkpoint)
{
	jbd_set_latency_hists(s->j, commit, checkpoint);
}

void iod_store_inject_journal_eio(struct iod_store *s)
{
	jbd_inject_log_eio(s->j);
}

/* ------------------------------------------------------- operations */

int store_rec_create(struct jbd_handle *h, uint64_t obj, uint64_t gen,
		      const struct iod_sub_layout *l)
{
	struct rec_create c;
	uint32_t n = TW_MIN(l->n_groups, (uint32_t)IOD_MAX_COLUMNS);

	memset(&c, 0, sizeof(c));
	store_hdr_init(&c.h, REC_CREATE, gen);
	c.stripe_size = htole32(l->stripe_size);
	c.stripe_count = htole32(l->stripe_count);
	c.n_groups = htole32(n);
	for (uint32_t i = 0; i < n; i++)
		c.groups[i] = htole32(l->groups[i]);
	return jbd_record(h, obj, JBD_NO_CUT, &c, sizeof(c));
}

int store_rec_mark(struct jbd_handle *h, uint64_t obj, uint64_t gen,
		   uint64_t first, uint64_t count)
{
	struct rec_mark mk;

	store_hdr_init(&mk.h, REC_MARK, gen);
	mk.first = htole64(first);
	mk.count = htole64(count);
	return jbd_record(h, obj, JBD_NO_CUT, &mk, sizeof(mk));
}

int iod_store_write(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, const void *buf, size_t len,
		    const uint32_t *sums,
		    uint64_t trunc_gen, const struct iod_sub_layout *layout,
		    bool sync, struct iod_sub_stat *st, iod_store_cb cb,
		    void *arg)
{
	uint64_t obj = store_obj(ino, column);
	uint64_t first = off >> IOD_REGION_SHIFT;
	uint64_t last = len ? (off + len - 1) >> IOD_REGION_SHIFT : first;
	struct jbd_handle *h = NULL;
	struct sreq *r = NULL;
	struct store_lstate ls;
	struct iod_sub_stat home;
	bool create, mark;
	uint64_t gen;
	unsigned nrec = 0;
	int rc;

	rc = store_check_mutation(s, ino, column, off, len);
	if (rc < 0)
		return rc;
	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_change_start(s, ino, column, trunc_gen, &ls, &gen);
	if (rc < 0)
		return rc;
	if (!ls.exists && !layout)
		return -EINVAL;       /* absent and no layout to create it */
	create = !ls.exists || (!ls.xattr_valid && layout);
	mark = len > 0 && !store_intent_covers(s, obj, first, last);
	if (s->mode != JBD_MODE_JOURNAL && len > 0) {
		/* J13 for in-place data: before anything changes. */
		rc = jbd_admit(s->j, len);
		if (rc < 0)
			return rc;
	}
	rc = req_start(s, cb, arg, &r, &h);
	if (rc < 0)
		return rc;
	if (create) {
		rc = store_rec_create(h, obj, gen, layout);
		if (rc < 0)
			goto fail;
		nrec++;
	}
	if (mark || (gen > ls.trunc_gen && !create)) {
		rc = store_rec_mark(h, obj, gen, mark ? first : 0,
				    mark ? last - first + 1 : 0);
		if (rc < 0)
			goto fail;
		nrec++;
	}
	if (s->mode == JBD_MODE_JOURNAL) {
		/* One fstat for the journal's size and the reply's stat:
		 * home does not move before the stat below (a commit only
		 * queues the close; checkpoints run from jbd_process). */
		struct sub *e;

		rc = home_stat(s, ino, column, &home, &e);
		if (rc == 0)
			rc = jbd_write_home(h, obj, off, buf, len, sums,
					    home.size);
		if (rc < 0)
			goto fail;
	} else {
		struct sub *e;

		rc = store_sub_at_gen(s, ino, column, create, layout, gen, &e);
		if (rc == 0 && len > 0)
			rc = tw_pwrite_all(e->fd, buf, len, off);
		if (rc == 0 && sync && s->mode == JBD_MODE_WRITEBACK) {
			/* its data and the entries that reach it (S6) */
			rc = fsync(e->fd) < 0 ? -errno : 0;
			if (rc == 0)
				rc = store_sync_path(s, ino,
						     jbd_sync_files_busy(s->j));
			/* J12: after a failed fsync the kernel may have
			 * dropped the dirty pages; a later fsync that
			 * succeeds would prove nothing. */
			if (rc < 0) {
				jbd_abort_home(s->j, rc, "an fsync of a "
					       "synchronous in-place write");
				store_check_abort(s);
			}
		}
		if (rc == 0 && len > 0)
			rc = store_inplace(h, e);
		if (rc < 0)
			goto fail;
	}
	rc = commit(s, h, sync, r);
	h = NULL;
	r = NULL;
	if (rc < 0)
		return rc;
	if (len > 0 && s->n_csum_pend) {
		/* new content of those blocks, newer than their marks (C4) */
		uint64_t b0, b1;

		store_csum_range(off, len, &b0, &b1);
		store_csum_pend_drop(s, obj, b0, b1, UINT64_MAX);
	}
	store_track(s, obj, gen, create ? layout : NULL, nrec, len > 0,
		    first, last);
	if (st && (s->mode == JBD_MODE_JOURNAL ?
		   stat_logical_with(s, ino, column, &home, st) :
		   store_stat_logical(s, ino, column, st)) < 0)
		memset(st, 0, sizeof(*st));
	return 0;
fail:
	req_cancel(h, r);
	return rc;
}

static void write_bad_noop(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

int iod_store_write_bad(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, const void *buf, size_t len,
			uint64_t trunc_gen, const struct iod_sub_layout *layout,
			struct iod_sub_stat *st, iod_store_cb cb, void *arg)
{
	uint64_t obj = store_obj(ino, column);
	struct iod_sub_stat now;
	struct rec_badcopy b;
	struct jbd_handle *h = NULL;
	struct store_lstate ls;
	struct sreq *r;
	uint64_t first, last;
	int64_t seq;
	int rc;

	if (s->mode != JBD_MODE_JOURNAL || !s->csum_on)
		return -EOPNOTSUPP;  /* no checksums: nothing can say "bad" */
	if (len == 0 || off % JBD_BLOCK_SIZE)
		return -EINVAL;
	/* 1: the copy, as any write; its callback is the mark's (below,
	 * closed after it: transactions close in order). */
	rc = iod_store_write(s, ino, column, off, buf, len, NULL, trunc_gen,
			     layout, false, NULL, write_bad_noop, NULL);
	if (rc < 0)
		return rc;
	/* 2: the mark, in the same call, so nothing comes between.  A crash
	 * that keeps 1 and loses 2 loses the reply too, so the sender sends
	 * the copy again (iod/resync.c "Unrepairable blocks"). */
	rc = store_logical(s, ino, column, &ls);
	if (rc == 0)
		rc = store_stat_logical(s, ino, column, &now);
	if (rc < 0)
		return rc;
	rc = req_start(s, cb, arg, &r, &h);
	if (rc < 0)
		return rc;
	store_hdr_init(&b.h, REC_BADCOPY, ls.trunc_gen);
	b.off = htole64(off);
	b.len = htole64(len);
	rc = jbd_record(h, obj, now.size, &b, sizeof(b));
	if (rc < 0) {
		req_cancel(h, r);
		return rc;
	}
	seq = jbd_commit(h, 0, sreq_done, r);
	if (seq < 0) {
		free(r);
		store_check_abort(s);
		return (int)seq;
	}
	store_track(s, obj, ls.trunc_gen, NULL, 1, false, 0, 0);
	store_csum_range(off, len, &first, &last);
	for (uint64_t k = first; k <= last; k++)
		if (store_csum_pend_add(s, obj, k, (uint64_t)seq) < 0)
			tw_log_rl(TW_LOG_ERR, "data directory %s: out of "
				  "memory: subfile %016" PRIx64 ".%" PRIu32
				  " block %" PRIu64 " marked bad reads as "
				  "written until its checkpoint", s->dir, ino,
				  column, k);
	if (st && store_stat_logical(s, ino, column, st) < 0)
		memset(st, 0, sizeof(*st));
	return 0;
}

/* Prefetch what a strided stream of reads will ask next (ra.h), from
 * the home file only: what the journal holds is in memory already.  A
 * hint: a failure costs only the wait it would have saved. */
static void read_ahead(struct sub *e, uint64_t off, uint64_t len,
		       uint64_t home_size)
{
	struct iod_ra_range pf[IOD_RA_MAX];
	int n = iod_ra_note(&e->ra, off, len, home_size, IOD_RA_WINDOW, pf);

	for (int i = 0; i < n; i++)
		(void)posix_fadvise(e->fd, (off_t)pf[i].off, (off_t)pf[i].len,
				    POSIX_FADV_WILLNEED);
}

/* The CRC32C of the n bytes read at off into buf.  Where the journal
 * changed none of them (jbd_overlay_none), the sums the checksum check
 * took of the whole blocks it matched in this buffer are combined;
 * every other block (resident, punched, cut, partial, without a
 * checksum) is summed here. */
static uint32_t read_crc(struct iod_store *s, uint64_t obj,
			 const uint8_t *buf, uint64_t off, size_t n)
{
	bool have = s->csum_rd_buf == buf && s->csum_rd_obj == obj &&
		    s->csum_rd_off == off && jbd_overlay_none(s->j, obj, off, n);
	uint32_t crc = 0;

	for (size_t pos = 0; pos < n;) {
		uint64_t b = (off + pos) / JBD_BLOCK_SIZE;
		size_t piece = (size_t)TW_MIN((uint64_t)(n - pos),
					      JBD_BLOCK_SIZE -
					      (off + pos) % JBD_BLOCK_SIZE);
		uint64_t i = b - s->csum_rd_first;
		uint32_t c;

		if (have && piece == JBD_BLOCK_SIZE && b >= s->csum_rd_first &&
		    i < s->n_csum_rd && s->csum_rd_ok[i])
			c = s->csum_rd[i];
		else
			c = tw_crc32c(0, buf + pos, piece);
		crc = tw_crc32c_combine(crc, c, piece);
		pos += piece;
	}
	return crc;
}

long iod_store_read(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, size_t len, uint8_t **out,
		    struct iod_sub_stat *st)
{
	return iod_store_read_crc(s, ino, column, off, len, out, st, NULL);
}

long iod_store_read_crc(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, size_t len, uint8_t **out,
			struct iod_sub_stat *st, uint32_t *crc)
{
	struct iod_sub_stat local;
	uint64_t want, hsize;
	struct sub *e;
	uint8_t *buf;
	long n;
	int rc;

	*out = NULL;
	if (crc)
		*crc = 0;   /* of no bytes */
	if (!st)
		st = &local;
	rc = iod_check_range(column, off, len);
	if (rc < 0 || store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_lost_check(s, ino, column);
	if (rc < 0)
		return rc;
	rc = stat_logical_home(s, ino, column, st, &e, &hsize);
	if (rc < 0)
		return rc;
	if (!st->exists || off >= st->size || len == 0)
		return 0;
	/* Allocate what the subfile holds, not what the peer asked for. */
	want = TW_MIN((uint64_t)len, st->size - off);
	buf = malloc((size_t)want);
	if (!buf)
		return -ENOMEM;
	/* A read without a home file runs no check: no sums of an earlier
	 * buffer at the same address may pass for this one's. */
	s->csum_rd_buf = NULL;
	n = jbd_read_home(s->j, store_obj(ino, column), off, buf,
			  (size_t)want, e ? e->fd : -1, hsize);
	if (e)
		read_ahead(e, off, want, hsize);
	if (n > 0) {
		rc = store_csum_pend_check(s, store_obj(ino, column), off,
					   (uint64_t)n);
		if (rc < 0)
			n = rc;
	}
	if (n <= 0) {
		free(buf);
		return n;
	}
	if (crc)
		*crc = read_crc(s, store_obj(ino, column), buf, off, (size_t)n);
	*out = buf;
	return n;
}

/* An empty handle: cb once everything before it is closed. */
int store_barrier(struct iod_store *s, iod_store_cb cb, void *arg)
{
	struct jbd_handle *h;
	struct sreq *r;
	int rc = req_start(s, cb, arg, &r, &h);

	return rc < 0 ? rc : commit(s, h, false, r);
}

/* The start of a truncate or punch, which leave an absent subfile absent:
 * -EIO once aborted; absent: cb runs as a barrier (*st says absent) and 0
 * is returned; -ESTALE for a trunc_gen older than the subfile's; else 1
 * with *gen the newer of the two. */
int store_existing_start(struct iod_store *s, uint64_t ino, uint32_t column,
			  uint64_t trunc_gen, struct iod_sub_stat *st,
			  iod_store_cb cb, void *arg, uint64_t *gen)
{
	struct store_lstate ls;
	int rc;

	rc = store_change_start(s, ino, column, trunc_gen, &ls, gen);
	if (rc < 0)
		return rc;
	if (!ls.exists) {
		if (st)
			*st = (struct iod_sub_stat){ .exists = false };
		rc = store_barrier(s, cb, arg);
		return rc < 0 ? rc : 0;
	}
	return 1;
}

/* The write-intent regions a truncate from old to size changes (SJ2): a
 * shrink every region of the bytes it drops, which a twin that missed it
 * still holds (a later grow it does get would show them again); a grow,
 * or a truncate to the same size, only the region of the old end, where
 * its zeros start.  Either way the subfile is marked, so a resync sends
 * its exact size and trunc_gen (resync.c). */
static void trunc_regions(uint64_t old, uint64_t size, uint64_t *first,
			  uint64_t *last)
{
	*first = TW_MIN(old, size) >> IOD_REGION_SHIFT;
	*last = old > size ? (old - 1) >> IOD_REGION_SHIFT : *first;
}

int iod_store_truncate(struct iod_store *s, uint64_t ino, uint32_t column,
		       uint64_t size, uint64_t trunc_gen,
		       struct iod_sub_stat *st, iod_store_cb cb, void *arg)
{
	uint64_t obj = store_obj(ino, column);
	struct jbd_handle *h = NULL;
	struct iod_sub_stat before;
	struct rec_trunc t;
	struct sreq *r = NULL;
	uint64_t gen, first, last;
	bool mark;
	int rc;

	rc = store_check_mutation(s, ino, column, size, 0);
	if (rc < 0)
		return rc;
	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_existing_start(s, ino, column, trunc_gen, st, cb, arg, &gen);
	if (rc <= 0)
		return rc;
	rc = store_stat_logical(s, ino, column, &before);
	if (rc < 0)
		return rc;
	trunc_regions(before.size, size, &first, &last);
	mark = !store_intent_covers(s, obj, first, last);
	r = sreq_new(s, cb, arg);
	if (!r)
		return -ENOMEM;
	rc = jbd_begin(s->j, &h);
	if (rc < 0)
		goto fail;
	if (mark) {
		rc = store_rec_mark(h, obj, gen, first, last - first + 1);
		if (rc < 0)
			goto fail;
	}
	store_hdr_init(&t.h, REC_TRUNC, gen);
	t.size = htole64(size);
	rc = jbd_record(h, obj, size, &t, sizeof(t));
	if (rc < 0)
		goto fail;
	if (s->mode != JBD_MODE_JOURNAL) {
		struct sub *e;

		rc = store_sub_at_gen(s, ino, column, false, NULL, gen, &e);
		if (rc == 0 && ftruncate(e->fd, (off_t)size) < 0)
			rc = -errno;
		if (rc < 0)
			goto fail;
	}
	rc = commit(s, h, false, r);
	h = NULL;
	r = NULL;
	if (rc < 0)
		return rc;
	store_track(s, obj, gen, NULL, mark ? 2 : 1, true, first, last);
	/* marked blocks wholly past the new end are gone (C4) */
	store_csum_pend_drop(s, obj, (size + JBD_BLOCK_SIZE - 1) /
			     JBD_BLOCK_SIZE, UINT64_MAX, UINT64_MAX);
	if (st && store_stat_logical(s, ino, column, st) < 0)
		memset(st, 0, sizeof(*st));
	return 0;
fail:
	jbd_cancel(h);
	free(r);
	return rc;
}

int iod_store_delete(struct iod_store *s, uint64_t ino,
		     const uint32_t *columns, size_t n, iod_store_cb cb,
		     void *arg)
{
	uint32_t all[IOD_MAX_COLUMNS], gone[IOD_MAX_COLUMNS];
	struct jbd_handle *h = NULL;
	struct sreq *r = NULL;
	struct rec_hdr rh;
	size_t n_gone = 0;
	bool ask = n == 0;
	int rc;

	if (ino > IOD_MAX_INO || n > IOD_MAX_COLUMNS)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (columns[i] >= IOD_MAX_COLUMNS)
			return -EINVAL;
	if (n == 0) {
		for (uint32_t k = 0; k < IOD_MAX_COLUMNS; k++)
			all[k] = k;
		columns = all;
		n = IOD_MAX_COLUMNS;
	}
	rc = store_refuse_aborted(s);
	if (rc < 0)
		return rc;
	r = sreq_new(s, cb, arg);
	if (!r)
		return -ENOMEM;
	rc = jbd_begin(s->j, &h);
	if (rc < 0)
		goto fail;
	store_hdr_init(&rh, REC_DELETE, 0);
	for (size_t i = 0; i < n; i++) {
		struct store_lstate ls;
		bool dup = false;

		for (size_t k = 0; k < n_gone; k++)
			dup = dup || gone[k] == columns[i];
		if (dup)
			continue;
		/* A column named is deleted without asking whether its
		 * subfile exists: on a cold cache the question is an openat
		 * and an xattr read from the disk on the loop thread, half
		 * of an iod's CPU during an rm -rf; a delete record of an
		 * absent subfile costs its header, and its unlinkat (at
		 * checkpoint, replay or in the drainer) meets ENOENT, which
		 * every unlink takes as done.  Every column (n = 0) is still
		 * asked, or it would be 32 records. */
		if (ask) {
			rc = store_logical(s, ino, columns[i], &ls);
			if (rc < 0)
				goto fail;
			if (!ls.exists)
				continue;
		}
		rc = jbd_record(h, store_obj(ino, columns[i]), 0, &rh, sizeof(rh));
		if (rc < 0)
			goto fail;
		gone[n_gone++] = columns[i];
	}
	if (s->mode != JBD_MODE_JOURNAL) {
		/* In place, as every change of these modes, but the unlinkat
		 * itself on the drainer: on ext4 with discard one of a file
		 * with blocks took 0.2 ms, and an rm -rf stalled the loop
		 * (S4 orders it with any later use of the path). */
		for (size_t k = 0; k < n_gone; k++) {
			rc = store_unlink_later(s, ino, gone[k]);
			if (rc < 0)
				goto fail;
		}
	}
	rc = commit(s, h, false, r);
	h = NULL;
	r = NULL;
	if (n_gone > 0 && s->mode != JBD_MODE_JOURNAL)
		store_unlinkq_kick(s);
	if (rc < 0)
		return rc;
	/* A lost subfile is replaced by its deletion (absent ones too: its
	 * creation may be what could not go home). */
	for (size_t k = 0; k < n && s->lost.count; k++)
		store_lost_drop(s, store_obj(ino, columns[k]));
	for (size_t k = 0; k < n_gone; k++) {
		uint64_t obj = store_obj(ino, gone[k]);
		struct intent *in = store_intent_get(s, obj, false);

		/* The intent marks go with the subfile (its xattr), and
		 * so do its marked blocks (C4). */
		if (in)
			store_intent_drop(s, in);
		store_csum_pend_drop(s, obj, 0, UINT64_MAX, UINT64_MAX);
		if (store_meta_install(s, obj, false, 0, NULL, 1) < 0)
			tw_log_rl(TW_LOG_ERR, "data directory %s: out of "
				  "memory tracking a delete", s->dir);
	}
	return 0;
fail:
	jbd_cancel(h);
	free(r);
	return rc;
}

/* writeback mode without the journal's helper thread (tests' I/O layer):
 * make in-place data durable on this thread, the subfiles of ino only. */
static int sync_home_blocking(struct iod_store *s, uint64_t ino,
			      uint32_t columns)
{
	uint64_t objs[IOD_MAX_COLUMNS];
	size_t n = 0;

	if (ino == 0)
		return syncfs(s->sub_fd) < 0 ? -errno : 0;
	/* Only the subfiles this iod holds: an absent column has no data,
	 * and an unlink of one is a journal record that the jbd_sync after
	 * this makes durable (a column probe cost an openat and a directory
	 * fsync each, 32 per fsync). */
	for (uint32_t k = 0; k < IOD_MAX_COLUMNS; k++)
		if ((columns == 0 || ((columns >> k) & 1)) &&
		    store_sub_exists(s, ino, k))
			objs[n++] = store_obj(ino, k);
	return store_sync_objs(s, objs, n);
}

/* writeback mode's fsync of ino: its subfiles and the directories on
 * their path (S6), on the journal's helper thread, then the log sync.
 * -EOPNOTSUPP without the helper (the tests' I/O layer). */
static int sync_files(struct iod_store *s, uint64_t ino, uint32_t columns,
		      struct sreq *r)
{
	int fds[STORE_SYNC_FDS_MAX];
	uint32_t cols;
	size_t n;
	int rc;

	if (!jbd_can_sync_files(s->j))
		return -EOPNOTSUPP;
	rc = store_sync_fds(s, ino, columns, fds, &n, &cols);
	if (rc < 0)
		return rc;
	rc = jbd_sync_files(s->j, fds, n, sreq_done, r);
	if (rc < 0) {
		while (n > 0)
			close(fds[--n]);
		/* too many fsyncs waiting: one syncfs serves them all */
		return rc == -EBUSY ? jbd_sync_home(s->j, sreq_done, r) : rc;
	}
	store_sync_fds_taken(s, ino, cols);
	return 0;
}

int iod_store_fsync(struct iod_store *s, uint64_t ino, uint32_t columns,
		    iod_store_cb cb, void *arg)
{
	struct sreq *r;
	int rc;

	rc = store_refuse_aborted(s);
	if (rc < 0)
		return rc;
	r = sreq_new(s, cb, arg);
	if (!r)
		return -ENOMEM;
	if (s->mode != JBD_MODE_WRITEBACK) {
		rc = jbd_sync(s->j, sreq_done, r);
	} else {
		/* Data written in place is not ordered with the journal in
		 * writeback mode: as ext3's, an fsync writes the file's own
		 * data (ino 0, everything: a syncfs), on the journal's helper
		 * thread, then the log is synced.  On the loop, an fsync of a
		 * file with a lot of dirty data would stall every request of
		 * this iod (and its pings) for seconds. */
		rc = ino != 0 ? sync_files(s, ino, columns, r)
			      : jbd_sync_home(s->j, sreq_done, r);
		if (rc == -EOPNOTSUPP) {
			rc = sync_home_blocking(s, ino, columns);
			if (rc < 0) {
				/* J12, as the helper thread's fsync */
				jbd_abort_home(s->j, rc, "an fsync of in-place "
					       "data at home");
				store_check_abort(s);
				free(r);
				return rc;
			}
			rc = jbd_sync(s->j, sreq_done, r);
		}
	}
	if (rc < 0) {
		free(r);
		store_check_abort(s);
	}
	return rc;
}

int iod_store_stat(struct iod_store *s, uint64_t ino, uint32_t column,
		   struct iod_sub_stat *st)
{
	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	return store_stat_logical(s, ino, column, st);
}

int iod_store_layout(struct iod_store *s, uint64_t ino, uint32_t column,
		     struct iod_sub_layout *out)
{
	struct smeta *m;
	struct store_lstate ls;
	struct sub *e;
	int rc;

	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	rc = store_logical(s, ino, column, &ls);
	if (rc < 0)
		return rc;
	if (!ls.exists)
		return -ENOENT;
	m = tw_hmap_get(&s->smeta, store_obj(ino, column) + 1);
	if (m && m->has_layout) {
		*out = m->layout;
		return 0;
	}
	rc = store_get_sub(s, ino, column, NULL, 0, &e);
	if (rc < 0)
		return rc;
	return store_home_layout(e, out);
}

/* --------------------------------------------------------- listing */

static bool key_after(const struct store_key *k, uint64_t ino, uint32_t col)
{
	return k->ino > ino || (k->ino == ino && k->column > col);
}

int iod_store_list(struct iod_store *s, uint64_t after_ino,
		   uint32_t after_column, uint32_t max,
		   struct iod_sub_info *out, bool *eof)
{
	struct store_key *keys = NULL, *all = NULL;
	size_t n_home = 0, n_all = 0, extra = 0, n = 0;
	bool truncated;
	uint64_t key;
	void *val;
	int rc;

	*eof = true;
	if (max == 0)
		return 0;
	/* Deleted in the journal but still at home: scan that many more. */
	for (size_t it = 0; tw_hmap_next(&s->smeta, &it, &key, &val);)
		extra++;
	rc = store_scan(s, after_ino, after_column, max + extra, &keys,
			&n_home, &truncated);
	if (rc < 0)
		return rc;
	all = malloc((n_home + extra + 1) * sizeof(*all));
	if (!all) {
		free(keys);
		return -ENOMEM;
	}
	if (n_home)   /* keys may be NULL then */
		memcpy(all, keys, n_home * sizeof(*all));
	n_all = n_home;
	/* Created in the journal, not yet at home.  When the home scan was
	 * cut short, only names up to its last one are complete. */
	for (size_t it = 0; tw_hmap_next(&s->smeta, &it, &key, &val);) {
		struct smeta *m = val;
		struct store_key k = { store_obj_ino(m->obj),
				       store_obj_column(m->obj) };

		if (!m->exists || !key_after(&k, after_ino, after_column))
			continue;
		if (truncated && n_home > 0 && store_key_cmp(&k, &keys[n_home - 1]) > 0)
			continue;
		all[n_all++] = k;
	}
	free(keys);
	qsort(all, n_all, sizeof(*all), store_key_cmp);
	for (size_t i = 0; i < n_all && n < max; i++) {
		struct iod_sub_stat st;

		if (i > 0 && store_key_cmp(&all[i], &all[i - 1]) == 0)
			continue;
		rc = store_stat_logical(s, all[i].ino, all[i].column, &st);
		if (rc < 0 || !st.exists)
			continue;
		out[n++] = (struct iod_sub_info){
			.ino = all[i].ino, .column = all[i].column,
			.size = st.size, .blocks = st.blocks };
	}
	{
		/* eof only if nothing was left over anywhere. */
		size_t left = 0;
		struct iod_sub_info *lastp = n ? &out[n - 1] : NULL;

		for (size_t i = 0; i < n_all; i++) {
			struct store_key *k = &all[i];

			if (lastp && !key_after(k, lastp->ino, lastp->column))
				continue;
			if (!lastp && !key_after(k, after_ino, after_column))
				continue;
			left++;
		}
		*eof = !truncated && (n < max || left == 0);
		if (n == max && left > 0)
			*eof = false;
	}
	free(all);
	return (int)n;
}

/* ------------------------------------------------------- checksums */

/* CRC32C of len zero bytes (buf: CSUM_CHUNK zeros). */
static uint32_t crc_zeros(const uint8_t *zeros, uint64_t len)
{
	uint32_t crc = 0;

	while (len > 0) {
		size_t n = (size_t)TW_MIN(len, (uint64_t)CSUM_CHUNK);

		crc = tw_crc32c(crc, zeros, n);
		len -= n;
	}
	return crc;
}

long iod_store_checksum(struct iod_store *s, uint64_t ino, uint32_t column,
			uint32_t region_size, uint32_t first_region,
			uint32_t max_regions, uint64_t max_data,
			uint64_t *size, uint32_t **crcs)
{
	struct iod_sub_stat st = { 0 };
	uint64_t n_regions, off, data_at = 0, data_read = 0;
	bool seeked = false, have_zero = false;
	uint32_t *out = NULL, zero_crc = 0;
	uint8_t *buf = NULL, *zeros = NULL;
	long rc;

	*crcs = NULL;
	*size = 0;
	s->n_csum_bad_regions = 0;
	if (store_check_ids(ino, column) < 0 || region_size < IOD_CSUM_REGION_MIN ||
	    region_size > IOD_CSUM_REGION_MAX)
		return -EINVAL;
	rc = store_lost_check(s, ino, column);
	if (rc < 0)
		return rc;
	rc = store_stat_logical(s, ino, column, &st);
	if (rc < 0)
		return rc;
	if (!st.exists)
		return 0;
	n_regions = st.size / region_size + (st.size % region_size != 0);
	*size = st.size;
	n_regions = n_regions > first_region ? n_regions - first_region : 0;
	if (max_regions && n_regions > max_regions)
		n_regions = max_regions;
	if (n_regions > IOD_CSUM_MAX_REGIONS) {
		*size = 0;
		return -E2BIG;
	}
	if (n_regions == 0)
		return 0;
	out = calloc((size_t)n_regions, sizeof(*out));
	buf = malloc(CSUM_CHUNK);
	zeros = calloc(1, CSUM_CHUNK);
	if (!out || !buf || !zeros) {
		rc = -ENOMEM;
		goto fail;
	}
	/* Through the journal: exactly what a reader would see.  A region
	 * with no data (SEEK_DATA, journal-resident blocks included) is
	 * zeros and is not read: a sparse subfile of terabytes costs one
	 * seek per stretch of data, not a read of every hole. */
	off = (uint64_t)first_region * region_size;
	for (uint64_t r = 0; r < n_regions; r++) {
		uint64_t end = TW_MIN(st.size,
				      (first_region + r + 1) * (uint64_t)region_size);
		uint32_t crc = 0;

		if (!seeked || data_at < off) {
			uint64_t res, sz;

			rc = iod_store_seek(s, ino, column, off, SEEK_DATA,
					    &res, &sz);
			if (rc < 0)
				goto fail;
			data_at = rc == 1 ? res : UINT64_MAX;
			seeked = true;
		}
		if (data_at >= end) {
			if (end - off != region_size) {
				out[r] = crc_zeros(zeros, end - off);
			} else {
				if (!have_zero)
					zero_crc = crc_zeros(zeros, region_size);
				have_zero = true;
				out[r] = zero_crc;
			}
			off = end;
			continue;
		}
		/* A budget of bytes read (holes are free): at least this
		 * region, then stop. */
		data_read += end - off;
		if (max_data && data_read >= max_data && r + 1 < n_regions)
			n_regions = r + 1;
		/* docs/ARCHITECTURE.md "Integrity": a bad block is
		 * summed as it is on disk, and its region named */
		s->csum_soft = true;
		s->csum_soft_bad = 0;
		while (off < end) {
			size_t want = (size_t)TW_MIN((uint64_t)CSUM_CHUNK,
						     end - off);
			long got = jbd_read(s->j, store_obj(ino, column), off,
					    buf, want);

			if (got < 0) {
				s->csum_soft = false;
				rc = got;
				goto fail;
			}
			if (got == 0)
				break;
			store_csum_pend_check(s, store_obj(ino, column), off,
					      (uint64_t)got);
			crc = tw_crc32c(crc, buf, (size_t)got);
			off += (uint64_t)got;
		}
		s->csum_soft = false;
		if (s->csum_soft_bad &&
		    s->n_csum_bad_regions < IOD_CSUM_BAD_MAX)
			s->csum_bad_regions[s->n_csum_bad_regions++] =
				(uint32_t)(first_region + r);
		out[r] = crc;
		off = end;
	}
	free(buf);
	free(zeros);
	*crcs = out;
	return (long)n_regions;
fail:
	free(buf);
	free(zeros);
	free(out);
	*size = 0;
	return rc;
}
