/* jbd.c - the block journal's front: open and close, request handles,
 * the index of journal-resident blocks and the reads that overlay it, the
 * sticky abort and the callback queue.
 *
 * It does not write the log (jbd_commit.c), move data home
 * (jbd_checkpoint.c) or replay (jbd_recovery.c).  The format, validity
 * rule, invariants J1.. and the transaction state diagram are in
 * journal/FORMAT.md (part 2).
 *
 * A handle collects one request's items (data blocks, in-place marks,
 * records) privately; jbd_commit moves them into the running transaction
 * all at once, so a request is never split across transactions (J9) and
 * a failed request leaves nothing behind.  The index maps (obj, blk) to the
 * newest copy in a live transaction's memory; entries go away when that
 * transaction is checkpointed or a cut removes the block (J14).
 */
#include "jbd_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct jbd_handle {
	struct jbd *j;
	struct jbd_item *items;
	size_t n_items, cap_items;
	struct jbd_layout lay;
	uint64_t data_bytes;
};

/* ------------------------------------------------------------ helpers */

uint64_t jbd__log_next(const struct jbd *j, uint64_t blk, uint64_t n)
{
	/* log blocks are 1 .. nblocks-1 */
	uint64_t x = (blk - 1 + n) % j->nlog;
	return x + 1;
}

void jbd__super_encode(const struct jbd *j, uint8_t *block, uint64_t start,
		       uint64_t seq)
{
	struct jbd_super_disk sb;
	memset(block, 0, JBD_BLOCK_SIZE);
	memset(&sb, 0, sizeof(sb));
	sb.h.magic = htole32(JBD_MAGIC);
	sb.h.type = htole16(JBD_T_SUPER);
	sb.h.seq = htole64(seq);
	sb.block_size = htole32(JBD_BLOCK_SIZE);
	sb.version = htole16(JBD_VERSION);
	sb.mode = htole16((uint16_t)j->opts.mode);
	sb.nblocks = htole64(j->nblocks);
	sb.start = htole64(start);
	memcpy(sb.uuid, j->uuid, 16);
	sb.crc = htole32(tw_crc32c(0, &sb, offsetof(struct jbd_super_disk, crc)));
	memcpy(block, &sb, sizeof(sb));
}

void jbd__queue_cb(struct jbd *j, jbd_done_cb cb, void *arg, int rc)
{
	if (cb == NULL)
		return;
	struct jbd_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		/* Out of memory for a deferred callback: call it now rather
		 * than lose it (it is the only ordering we can keep). */
		cb(arg, rc);
		return;
	}
	w->cb = cb;
	w->arg = arg;
	w->seq = (uint64_t)(int64_t)rc;
	if (j->cb_tail)
		j->cb_tail->next = w;
	else
		j->cb_head = w;
	j->cb_tail = w;
}

static void run_cbs(struct jbd *j)
{
	struct jbd_waiter *w;
	while ((w = j->cb_head) != NULL) {
		j->cb_head = w->next;
		if (j->cb_head == NULL)
			j->cb_tail = NULL;
		int rc = (int)(int64_t)w->seq;
		jbd_done_cb cb = w->cb;
		void *arg = w->arg;
		free(w);
		cb(arg, rc);
	}
}

static void fail_waiters(struct jbd *j, struct jbd_waiter **list, int rc)
{
	struct jbd_waiter *w;
	while ((w = *list) != NULL) {
		*list = w->next;
		jbd__queue_cb(j, w->cb, w->arg, rc);
		free(w);
	}
}

/* J12: the first I/O error on the journal aborts it for good; every
 * pending and later operation fails with -EIO. */
void jbd__abort(struct jbd *j, int rc, const char *what)
{
	if (j->aborted)
		return;
	j->aborted = -EIO;
	j->st.aborted = -EIO;
	tw_err("journal %s: %s failed (%s); journal aborted, every later "
	       "operation fails with EIO until restart and replay",
	       j->opts.path, what, strerror(rc < 0 ? -rc : EIO));
	if (j->running)
		fail_waiters(j, &j->running->waiters, -EIO);
	for (struct jbd_txn *t = j->txn_head; t; t = t->next)
		fail_waiters(j, &t->waiters, -EIO);
	fail_waiters(j, &j->sync_waiters, -EIO);
	fail_waiters(j, &j->cp_waiters, -EIO);
	fail_waiters(j, &j->home_waiters, -EIO);
	jbd__fjobs_fail(j, &j->fjobs_run, -EIO, false);
	jbd__fjobs_fail(j, &j->fjobs_wait, -EIO, false);
	j->fjobs_wait_tail = NULL;
	/* wake the owner: the failed callbacks run at its next jbd_process
	 * (an abort inside a public call would otherwise leave them queued) */
	jbd__wake(j);
}

int jbd_aborted(const struct jbd *j)
{
	return j->aborted;
}

void jbd_abort_home(struct jbd *j, int rc, const char *what)
{
	jbd__abort(j, rc, what);
}

bool jbd_obj_error(int err)
{
	switch (-err) {
	case EFBIG:
	case EINVAL:
	case EPERM:
	case EACCES:
	case ENAMETOOLONG:
	case ELOOP:
	case EOVERFLOW:
	case ERANGE:
	case EBADMSG:
		return true;
	default:
		return false;
	}
}

bool jbd__obj_set_aside(struct jbd *j, uint64_t obj, uint64_t seq, int err)
{
	if (!jbd_obj_error(err) || !j->ops.home_failed)
		return false;
	return j->ops.home_failed(j->ops.arg, obj, seq, err) == 0;
}

int jbd__home_dup(struct jbd *j, uint64_t obj, bool create, int *fd)
{
	int hfd = -1;
	int rc = j->ops.home_fd(j->ops.arg, obj, create, &hfd);
	if (rc < 0)
		return rc;
	int d = fcntl(hfd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return -errno;
	*fd = d;
	return 0;
}

/* -------------------------------------------------------------- index */

struct jbd_obj *jbd__obj(struct jbd *j, uint64_t obj, bool create)
{
	struct jbd_obj *o = tw_hmap_get(&j->objs, obj + 1);
	if (o != NULL || !create)
		return o;
	o = calloc(1, sizeof(*o));
	if (o == NULL)
		return NULL;
	o->obj = obj;
	tw_hmap_init(&o->blocks);
	if (tw_hmap_put(&j->objs, obj + 1, o) < 0) {
		free(o);
		return NULL;
	}
	return o;
}

void jbd__obj_maybe_free(struct jbd *j, struct jbd_obj *o)
{
	if (o->nref > 0 || o->blocks.count > 0 || o->n_cuts > 0 ||
	    o->n_holes > 0)
		return;
	tw_hmap_del(&j->objs, o->obj + 1);
	tw_hmap_free(&o->blocks);
	free(o->cuts);
	free(o->holes);
	free(o);
}

static uint64_t min_cut(const struct jbd_obj *o)
{
	uint64_t m = JBD_NO_CUT;
	for (size_t i = 0; i < o->n_cuts; i++)
		if (o->cuts[i].cut < m)
			m = o->cuts[i].cut;
	return m;
}

uint64_t jbd_size(struct jbd *j, uint64_t obj, uint64_t home_size)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);
	if (o == NULL)
		return home_size;
	if (o->n_cuts > 0)
		return o->wend;
	if (o->has_wend && o->wend > home_size)
		return o->wend;
	return home_size;
}

uint64_t jbd_resident(struct jbd *j, uint64_t obj)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);

	return o ? o->blocks.count : 0;
}

bool jbd_resident_has(struct jbd *j, uint64_t obj, uint64_t blk)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);

	return o && tw_hmap_get(&o->blocks, blk + 1) != NULL;
}

uint64_t jbd_resident_next(struct jbd *j, uint64_t obj, uint64_t blk)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);
	uint64_t best = UINT64_MAX, key;
	void *val;

	if (o == NULL)
		return best;
	/* A scan of the object's entries: only SEEK_DATA asks, and they are
	 * bounded by the journal's size in blocks. */
	for (size_t it = 0; tw_hmap_next(&o->blocks, &it, &key, &val);)
		if (key - 1 >= blk && key - 1 < best)
			best = key - 1;
	return best;
}

uint64_t jbd_min_cut(struct jbd *j, uint64_t obj)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);

	return o ? min_cut(o) : JBD_NO_CUT;
}

/* The newest content of block blk of obj into out (4096 bytes): the index
 * copy, else home bytes (already in out) masked by pending cuts. */
/* Zero the pending punches of o newer than the copy e (all of them for
 * home content, e == NULL) within block blk of out. */
static void apply_holes(const struct jbd_obj *o, const struct jbd_ent *e,
			uint64_t blk, uint8_t *out)
{
	uint64_t base = blk * JBD_BLOCK_SIZE;
	for (size_t i = 0; i < o->n_holes; i++) {
		const struct jbd_hole *h = &o->holes[i];
		if (e != NULL && (h->seq < e->txn->seq ||
				  (h->seq == e->txn->seq && h->item < e->item)))
			continue;   /* the copy was written after the punch */
		uint64_t lo = TW_MAX(h->off, base);
		uint64_t hi = TW_MIN(h->end, base + JBD_BLOCK_SIZE);
		if (lo < hi)
			memset(out + (lo - base), 0, hi - lo);
	}
}

static void overlay_block(struct jbd_obj *o, uint64_t blk, uint8_t *out)
{
	if (o == NULL)
		return;
	struct jbd_ent *e = tw_hmap_get(&o->blocks, blk + 1);
	if (e != NULL) {
		memcpy(out, e->txn->items[e->item].buf, e->valid);
		memset(out + e->valid, 0, JBD_BLOCK_SIZE - e->valid);
		apply_holes(o, e, blk, out);
		return;
	}
	apply_holes(o, NULL, blk, out);
	uint64_t c = min_cut(o);
	uint64_t base = blk * JBD_BLOCK_SIZE;
	if (c == JBD_NO_CUT || c >= base + JBD_BLOCK_SIZE)
		return;
	uint64_t keep = c > base ? c - base : 0;
	memset(out + keep, 0, JBD_BLOCK_SIZE - keep);
}

/* Whether overlay_block leaves block blk of o as home has it: no copy in
 * the index, no pending punch over it, no pending cut (cut: min_cut(o))
 * before its end. */
static bool block_plain(const struct jbd_obj *o, uint64_t blk, uint64_t cut)
{
	uint64_t base = blk * JBD_BLOCK_SIZE;

	if (cut != JBD_NO_CUT && cut < base + JBD_BLOCK_SIZE)
		return false;
	for (size_t i = 0; i < o->n_holes; i++)
		if (o->holes[i].off < base + JBD_BLOCK_SIZE &&
		    o->holes[i].end > base)
			return false;
	return tw_hmap_get(&o->blocks, blk + 1) == NULL;
}

bool jbd_overlay_none(struct jbd *j, uint64_t obj, uint64_t off, size_t len)
{
	const struct jbd_obj *o = jbd__obj(j, obj, false);
	if (o == NULL || len == 0)
		return true;
	uint64_t cut = min_cut(o);
	for (uint64_t blk = off / JBD_BLOCK_SIZE;
	     blk * JBD_BLOCK_SIZE < off + len; blk++)
		if (!block_plain(o, blk, cut))
			return false;
	return true;
}

void jbd_overlay(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
		 size_t len)
{
	struct jbd_obj *o = jbd__obj(j, obj, false);
	if (o == NULL || len == 0)
		return;
	uint8_t blockbuf[JBD_BLOCK_SIZE];
	uint8_t *p = buf;
	uint64_t end = off + len, cut = min_cut(o);
	for (uint64_t blk = off / JBD_BLOCK_SIZE;
	     blk * JBD_BLOCK_SIZE < end; blk++) {
		uint64_t b0 = blk * JBD_BLOCK_SIZE;
		uint64_t lo = TW_MAX(b0, off), hi = TW_MIN(b0 + JBD_BLOCK_SIZE, end);
		/* Home's bytes stand: no round trip through blockbuf (a
		 * stream of a subfile still known to the journal). */
		if (block_plain(o, blk, cut))
			continue;
		memset(blockbuf, 0, sizeof(blockbuf));
		memcpy(blockbuf + (lo - b0), p + (lo - off), hi - lo);
		overlay_block(o, blk, blockbuf);
		memcpy(p + (lo - off), blockbuf + (lo - b0), hi - lo);
	}
}

static int home_size_of(struct jbd *j, uint64_t obj, uint64_t *size, int *fdp)
{
	int fd = -1;
	*size = 0;
	if (fdp)
		*fdp = -1;
	int rc = j->ops.home_fd(j->ops.arg, obj, false, &fd);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	struct stat stb;
	if (fstat(fd, &stb) < 0)
		return -errno;
	*size = (uint64_t)stb.st_size;
	if (fdp)
		*fdp = fd;
	return 0;
}

long jbd_read(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
	      size_t len)
{
	uint64_t hsize;
	int fd;
	int rc = home_size_of(j, obj, &hsize, &fd);
	if (rc < 0)
		return rc;
	return jbd_read_home(j, obj, off, buf, len, fd, hsize);
}

long jbd_read_home(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
		   size_t len, int fd, uint64_t hsize)
{
	int rc;

	if (fd >= 0) {
		rc = jbd__pread_full(j, JBD_IO_HOME, fd, buf, len, off);
		if (rc >= 0 && j->ops.home_check)
			rc = j->ops.home_check(j->ops.arg, obj, fd, hsize, off,
					       buf, len);
		if (rc < 0)
			return rc;
	} else {
		memset(buf, 0, len);
	}
	jbd_overlay(j, obj, off, buf, len);
	uint64_t size = jbd_size(j, obj, hsize);
	if (off >= size)
		return 0;
	return (long)TW_MIN((uint64_t)len, size - off);
}

/* ------------------------------------------------------------ handles */

/* fd's file opened again with O_DIRECT, through /proc/self/fd so that it
 * is fd's file even if its path was replaced; -1 if it cannot be. */
int jbd__reopen_direct(int fd)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

void jbd__close_bufs_free(struct jbd *j, struct jbd_txn *t)
{
	for (size_t i = 0; i < t->n_meta; i++)
		jbd__blk_put(j, t->meta[i]);
	free(t->meta);
	t->meta = NULL;
	t->n_meta = 0;
	if (t->esc) {
		for (size_t i = 0; i < t->nblocks; i++)
			jbd__blk_put(j, t->esc[i]);
		free(t->esc);
		t->esc = NULL;
	}
}

int jbd_begin(struct jbd *j, struct jbd_handle **out)
{
	if (j->aborted)
		return j->aborted;
	struct jbd_handle *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->j = j;
	*out = h;
	return 0;
}

/* Release one item's buffer: a data block goes back to the block cache,
 * anything else (a record) to the heap. */
static void item_release(struct jbd *j, struct jbd_item *it)
{
	if (it->kind == ITEM_DATA)
		jbd__blk_put(j, it->buf);
	else
		free(it->buf);
	it->buf = NULL;
}

static void items_free(struct jbd *j, struct jbd_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		item_release(j, &items[i]);
	free(items);
}

void jbd_cancel(struct jbd_handle *h)
{
	if (h == NULL)
		return;
	items_free(h->j, h->items, h->n_items);
	free(h);
}

static struct jbd_item *h_push(struct jbd_handle *h)
{
	if (h->n_items == h->cap_items) {
		size_t cap = h->cap_items ? h->cap_items * 2 : 8;
		struct jbd_item *n = realloc(h->items, cap * sizeof(*n));
		if (n == NULL)
			return NULL;
		h->items = n;
		h->cap_items = cap;
	}
	struct jbd_item *it = &h->items[h->n_items];
	memset(it, 0, sizeof(*it));
	return it;
}

/* Would the handle plus one more item of this kind exceed a quarter of the
 * journal?  (J9; the commit block counts.) */
static bool h_too_big(const struct jbd_handle *h, const struct jbd_item *it)
{
	struct jbd_layout l = h->lay;
	jbd__layout_add(&l, it);
	return l.blocks + 1 > h->j->max_txn;
}

static uint64_t h_cut(const struct jbd_handle *h, uint64_t obj)
{
	uint64_t m = JBD_NO_CUT;
	for (size_t i = 0; i < h->n_items; i++)
		if (h->items[i].kind == ITEM_REC && h->items[i].obj == obj &&
		    h->items[i].cut < m)
			m = h->items[i].cut;
	return m;
}

/* Logical size of obj as this handle sees it so far; known: obj's size at
 * home when the caller has it (jbd_write_home), else NULL. */
static int h_size(struct jbd_handle *h, uint64_t obj, const uint64_t *known,
		  uint64_t *size)
{
	uint64_t hs;
	if (known != NULL) {
		hs = *known;
	} else {
		int rc = home_size_of(h->j, obj, &hs, NULL);
		if (rc < 0)
			return rc;
	}
	uint64_t s = jbd_size(h->j, obj, hs);
	/* the handle's own cuts and writes, in order */
	for (size_t i = 0; i < h->n_items; i++) {
		const struct jbd_item *it = &h->items[i];
		if (it->obj != obj)
			continue;
		if (it->kind == ITEM_REC && it->cut != JBD_NO_CUT)
			s = it->cut;
		else if (it->kind == ITEM_DATA)
			s = TW_MAX(s, it->blk * JBD_BLOCK_SIZE + it->len);
	}
	*size = s;
	return 0;
}

/* The newest content of (obj, blk) including this handle's own items. */
static int h_old_block(struct jbd_handle *h, uint64_t obj, uint64_t blk,
		       uint8_t *out)
{
	for (size_t i = h->n_items; i-- > 0;) {
		const struct jbd_item *it = &h->items[i];
		if (it->kind == ITEM_DATA && it->obj == obj && it->blk == blk) {
			memcpy(out, it->buf, JBD_BLOCK_SIZE);
			return 0;
		}
	}
	struct jbd *j = h->j;
	memset(out, 0, JBD_BLOCK_SIZE);
	int fd;
	uint64_t hs;
	int rc = home_size_of(j, obj, &hs, &fd);
	if (rc < 0)
		return rc;
	if (fd >= 0 && blk * JBD_BLOCK_SIZE < hs) {
		rc = jbd__pread_full(j, JBD_IO_HOME, fd, out, JBD_BLOCK_SIZE,
				     blk * JBD_BLOCK_SIZE);
		if (rc < 0)
			return rc;
	}
	overlay_block(jbd__obj(j, obj, false), blk, out);
	uint64_t c = h_cut(h, obj);
	uint64_t base = blk * JBD_BLOCK_SIZE;
	if (c != JBD_NO_CUT && c < base + JBD_BLOCK_SIZE) {
		uint64_t keep = c > base ? c - base : 0;
		memset(out + keep, 0, JBD_BLOCK_SIZE - keep);
	}
	return 0;
}

/* How long admission trusts a free_space() answer, and how far above the
 * line it must stay to be trusted at all: a statvfs per 4 KiB write was a
 * tenth of an iod's system calls.  Our own use of the space is counted
 * exactly (pending_home, the bytes admitted since, a checkpoint's home
 * writes), so only other writers of the file system go unseen, for at
 * most JBD_FREE_TTL_MS; near the line every write asks again. */
#define JBD_FREE_TTL_MS  100u
#define JBD_FREE_SLACK   (64ull << 20)

static int admit(struct jbd *j, uint64_t bytes)
{
	if (j->ops.free_space == NULL)
		return 0;
	uint64_t need = j->opts.reserve + j->pending_home + bytes;
	uint64_t now = tw_now_ms();
	/* only what it admitted comes off, and never more than it held */
	assert(!j->free_valid || j->free_left >= 0);
	if (!j->free_valid || now - j->free_ms >= JBD_FREE_TTL_MS ||
	    (uint64_t)j->free_left < need + JBD_FREE_SLACK) {
		int64_t f = j->ops.free_space(j->ops.arg);
		if (f < 0)
			return (int)f;
		j->free_left = f;
		j->free_ms = now;
		j->free_valid = true;
	}
	int64_t free_b = j->free_left;
	if ((uint64_t)free_b < need) {
		/* Checkpoint the cuts now, not a commit interval later: the
		 * writer that retries finds the space (ext3 commits and retries
		 * an allocation that found the disk full). */
		if (j->frees_seq > j->checkpointed_seq &&
		    j->urgent_seq < j->frees_seq) {
			j->urgent_seq = j->frees_seq;
			jbd__wake(j);    /* the owner runs jbd_process */
		}
		/* So does the data in the log, which pending_home counts at
		 * its worst (jbd_want_home): a rewrite takes no new space. */
		if ((uint64_t)free_b >= j->opts.reserve + bytes)
			jbd_want_home(j);
		return -ENOSPC;
	}
	/* Counted again by pending_home at commit in journal mode: a worst
	 * case that only brings the next fresh answer sooner. */
	j->free_left -= (int64_t)bytes;
	return 0;
}

int jbd_admit(struct jbd *j, uint64_t bytes)
{
	if (j->aborted)
		return j->aborted;
	return admit(j, bytes);
}

size_t jbd_sums_count(uint64_t off, size_t len)
{
	if (len == 0)
		return 0;
	return (size_t)((off + len - 1) / JBD_BLOCK_SIZE - off / JBD_BLOCK_SIZE
			+ 1);
}

uint32_t jbd_sums(uint64_t off, const void *buf, size_t len, uint32_t *sums)
{
	const uint8_t *p = buf;
	uint32_t crc = 0;

	for (size_t k = 0, pos = 0; pos < len; k++) {
		size_t piece = (size_t)TW_MIN((uint64_t)(len - pos),
					      JBD_BLOCK_SIZE -
					      (off + pos) % JBD_BLOCK_SIZE);

		sums[k] = tw_crc32c(0, p + pos, piece);
		crc = tw_crc32c_combine(crc, sums[k], piece);
		pos += piece;
	}
	return crc;
}

int jbd_write(struct jbd_handle *h, uint64_t obj, uint64_t off,
	      const void *buf, size_t len)
{
	return jbd_write_sums(h, obj, off, buf, len, NULL);
}

static int write_items(struct jbd_handle *h, uint64_t obj, uint64_t off,
		       const void *buf, size_t len, const uint32_t *sums,
		       const uint64_t *home_size)
{
	struct jbd *j = h->j;
	if (j->aborted)
		return j->aborted;
	if (j->opts.mode != JBD_MODE_JOURNAL || obj == UINT64_MAX)
		return -EINVAL;
	if (len == 0)
		return 0;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return -EINVAL;
	/* J13: admission before anything is journaled. */
	int rc = admit(j, h->data_bytes + len);
	if (rc < 0)
		return rc;
	uint64_t first = off / JBD_BLOCK_SIZE;
	uint64_t last = (off + len - 1) / JBD_BLOCK_SIZE;
	/* Size check first so a refused request leaves the handle as it was. */
	{
		struct jbd_layout l = h->lay;
		struct jbd_item probe = { .kind = ITEM_DATA };
		for (uint64_t b = first; b <= last; b++)
			jbd__layout_add(&l, &probe);
		if (l.blocks + 1 > j->max_txn)
			return -E2BIG;
	}
	uint64_t size;
	rc = h_size(h, obj, home_size, &size);
	if (rc < 0)
		return rc;
	uint64_t new_size = TW_MAX(size, off + len);
	size_t n0 = h->n_items;
	const uint8_t *src = buf;
	for (uint64_t b = first; b <= last; b++) {
		uint64_t b0 = b * JBD_BLOCK_SIZE;
		uint64_t lo = TW_MAX(b0, off), hi = TW_MIN(b0 + JBD_BLOCK_SIZE, off + len);
		uint8_t *blk = jbd__blk_get(j);
		if (blk == NULL) {
			rc = -ENOMEM;
			goto undo;
		}
		if (lo != b0 || hi != b0 + JBD_BLOCK_SIZE) {
			rc = h_old_block(h, obj, b, blk);
			if (rc < 0) {
				jbd__blk_put(j, blk);
				goto undo;
			}
		}
		memcpy(blk + (lo - b0), src + (lo - off), hi - lo);
		/* J5: the block's one sum, for the commit and the home
		 * checksum: the caller's when it took one of this whole
		 * block, else taken now, while the block is in the cache. */
		uint32_t crc = sums && hi - lo == JBD_BLOCK_SIZE ?
			       sums[b - first] :
			       tw_crc32c(0, blk, JBD_BLOCK_SIZE);
		struct jbd_item *it = h_push(h);
		if (it == NULL) {
			jbd__blk_put(j, blk);
			rc = -ENOMEM;
			goto undo;
		}
		it->kind = ITEM_DATA;
		it->obj = obj;
		it->blk = b;
		it->buf = blk;
		it->crc = crc;
		it->len = (uint32_t)TW_MIN((uint64_t)JBD_BLOCK_SIZE, new_size - b0);
		uint32_t m;
		memcpy(&m, blk, 4);
		it->escaped = le32toh(m) == JBD_MAGIC;
		jbd__layout_add(&h->lay, it);
		h->n_items++;
	}
	h->data_bytes += len;
	return 0;
undo:
	for (size_t i = n0; i < h->n_items; i++)
		item_release(j, &h->items[i]);
	h->n_items = n0;
	/* layout is conservative after an undo: recompute */
	memset(&h->lay, 0, sizeof(h->lay));
	for (size_t i = 0; i < h->n_items; i++)
		jbd__layout_add(&h->lay, &h->items[i]);
	return rc;
}

int jbd_write_sums(struct jbd_handle *h, uint64_t obj, uint64_t off,
		   const void *buf, size_t len, const uint32_t *sums)
{
	return write_items(h, obj, off, buf, len, sums, NULL);
}

int jbd_write_home(struct jbd_handle *h, uint64_t obj, uint64_t off,
		   const void *buf, size_t len, const uint32_t *sums,
		   uint64_t home_size)
{
	return write_items(h, obj, off, buf, len, sums, &home_size);
}

int jbd_hole(struct jbd_handle *h, uint64_t obj, uint64_t off, uint64_t len)
{
	if (h->j->opts.mode != JBD_MODE_JOURNAL || len == 0 ||
	    off + len < off)
		return -EINVAL;
	for (size_t i = h->n_items; i-- > 0;) {
		struct jbd_item *it = &h->items[i];
		if (it->kind == ITEM_REC && it->obj == obj) {
			it->hole_off = off;
			it->hole_len = len;
			return 0;
		}
	}
	return -EINVAL;
}

int jbd_record(struct jbd_handle *h, uint64_t obj, uint64_t cut,
	       const void *rec, size_t len)
{
	struct jbd *j = h->j;
	if (j->aborted)
		return j->aborted;
	if (len > JBD_REC_MAX || obj == UINT64_MAX)
		return -EINVAL;
	if (cut != JBD_NO_CUT) {
		for (size_t i = 0; i < h->n_items; i++)
			if (h->items[i].kind == ITEM_DATA && h->items[i].obj == obj)
				return -EINVAL;
	}
	struct jbd_item probe = { .kind = ITEM_REC, .len = (uint32_t)len };
	if (h_too_big(h, &probe))
		return -E2BIG;
	uint8_t *copy = malloc(len ? len : 1);
	if (copy == NULL)
		return -ENOMEM;
	if (len)
		memcpy(copy, rec, len);
	struct jbd_item *it = h_push(h);
	if (it == NULL) {
		free(copy);
		return -ENOMEM;
	}
	it->kind = ITEM_REC;
	it->obj = obj;
	it->cut = cut;
	it->len = (uint32_t)len;
	it->buf = copy;
	jbd__layout_add(&h->lay, it);
	h->n_items++;
	return 0;
}

int jbd_inplace(struct jbd_handle *h, uint64_t obj)
{
	struct jbd *j = h->j;
	if (j->aborted)
		return j->aborted;
	if (j->opts.mode == JBD_MODE_JOURNAL || obj == UINT64_MAX)
		return -EINVAL;
	for (size_t i = 0; i < h->n_items; i++)
		if (h->items[i].kind == ITEM_INPLACE && h->items[i].obj == obj)
			return 0;
	struct jbd_item probe = { .kind = ITEM_INPLACE };
	if (h_too_big(h, &probe))
		return -E2BIG;
	struct jbd_item *it = h_push(h);
	if (it == NULL)
		return -ENOMEM;
	it->kind = ITEM_INPLACE;
	it->obj = obj;
	jbd__layout_add(&h->lay, it);
	h->n_items++;
	return 0;
}

static struct jbd_txn *txn_new(struct jbd *j)
{
	struct jbd_txn *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->seq = j->next_seq++;
	t->state = TXN_RUNNING;
	return t;
}

void jbd__txn_free(struct jbd *j, struct jbd_txn *t)
{
	j->copy_blocks -= t->data_blocks;
	if (t->state == TXN_RUNNING || t->state == TXN_SEALED)
		j->unlogged_blocks -= t->data_blocks;
	items_free(j, t->items, t->n_items);
	jbd__close_bufs_free(j, t);
	struct jbd_waiter *w;
	while ((w = t->waiters) != NULL) {
		t->waiters = w->next;
		free(w);
	}
	free(t);
}

/* RUNNING -> SEALED: the running transaction joins the list's end. */
void jbd__seal(struct jbd *j)
{
	struct jbd_txn *t = j->running;
	assert(t != NULL);
	j->running = NULL;
	t->state = TXN_SEALED;
	t->next = NULL;
	if (j->txn_tail)
		j->txn_tail->next = t;
	else
		j->txn_head = t;
	j->txn_tail = t;
	if (j->first_sealed == NULL)
		j->first_sealed = t;
}

/* Index a data item that just joined txn t (data=journal). */
static int index_data(struct jbd *j, struct jbd_txn *t, size_t idx)
{
	struct jbd_item *it = &t->items[idx];
	struct jbd_obj *o = jbd__obj(j, it->obj, true);
	if (o == NULL)
		return -ENOMEM;
	struct jbd_ent *e = tw_hmap_get(&o->blocks, it->blk + 1);
	if (e == NULL) {
		e = calloc(1, sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		if (tw_hmap_put(&o->blocks, it->blk + 1, e) < 0) {
			free(e);
			return -ENOMEM;
		}
	}
	e->txn = t;
	e->item = idx;
	e->valid = it->len;
	e->frozen = false;
	o->nref++;
	uint64_t end = it->blk * JBD_BLOCK_SIZE + it->len;
	if (!o->has_wend || end > o->wend)
		o->wend = end;
	o->has_wend = true;
	return 0;
}

/* A punching record joined txn t as item idx: remember its range for
 * reads until it is checkpointed (jbd_hole). */
static int index_hole(struct jbd *j, struct jbd_txn *t, size_t idx)
{
	const struct jbd_item *it = &t->items[idx];
	struct jbd_obj *o = jbd__obj(j, it->obj, true);
	if (o == NULL)
		return -ENOMEM;
	if (o->n_holes == o->cap_holes) {
		size_t cap = o->cap_holes ? o->cap_holes * 2 : 4;
		struct jbd_hole *n = realloc(o->holes, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		o->holes = n;
		o->cap_holes = cap;
	}
	o->holes[o->n_holes++] = (struct jbd_hole){
		.seq = t->seq, .item = idx,
		.off = it->hole_off, .end = it->hole_off + it->hole_len,
	};
	return 0;
}

/* A cut record joined txn t: drop index entries past the cut, trim the
 * straddling one, remember the cut for reads until it is checkpointed. */
static int index_cut(struct jbd *j, struct jbd_txn *t, const struct jbd_item *it)
{
	struct jbd_obj *o = jbd__obj(j, it->obj, true);
	if (o == NULL)
		return -ENOMEM;
	o->nref++;
	if (it->cut == JBD_NO_CUT)
		return 0;
	if (o->n_cuts == o->cap_cuts) {
		size_t cap = o->cap_cuts ? o->cap_cuts * 2 : 4;
		struct jbd_cut *n = realloc(o->cuts, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		o->cuts = n;
		o->cap_cuts = cap;
	}
	o->cuts[o->n_cuts].seq = t->seq;
	o->cuts[o->n_cuts].cut = it->cut;
	o->n_cuts++;
	o->wend = it->cut;
	o->has_wend = true;
	uint64_t key;
	void *val;
	for (size_t iter = 0; tw_hmap_next(&o->blocks, &iter, &key, &val);) {
		struct jbd_ent *e = val;
		uint64_t base = (key - 1) * JBD_BLOCK_SIZE;
		if (base >= it->cut) {
			tw_hmap_del(&o->blocks, key);
			free(e);
		} else if (base + e->valid > it->cut) {
			e->valid = (uint32_t)(it->cut - base);
			e->frozen = true;
		} else {
			e->frozen = true;
		}
	}
	return 0;
}

static int txn_push(struct jbd_txn *t, struct jbd_item *it)
{
	if (t->n_items == t->cap_items) {
		size_t cap = t->cap_items ? t->cap_items * 2 : 64;
		struct jbd_item *n = realloc(t->items, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		t->items = n;
		t->cap_items = cap;
	}
	t->items[t->n_items++] = *it;
	jbd__layout_add(&t->lay, it);
	return 0;
}

int64_t jbd_commit(struct jbd_handle *h, unsigned flags, jbd_done_cb cb,
		   void *arg)
{
	struct jbd *j = h->j;
	int64_t rc;
	struct jbd_waiter *w = NULL;
	if (j->aborted) {
		rc = j->aborted;
		goto out_cancel;
	}
	if (h->n_items == 0 && (j->running == NULL || j->running->n_items == 0)) {
		/* An empty request completes when everything committed
		 * before it has (a barrier). */
		jbd_cancel(h);
		if (flags & JBD_COMMIT_SYNC) {
			rc = jbd_sync(j, cb, arg);
			return rc < 0 ? rc : (int64_t)TW_MAX(j->closed_seq, 1);
		}
		struct jbd_txn *last = j->txn_tail;
		if (last != NULL && (last->state == TXN_SEALED ||
				     last->state == TXN_CLOSING)) {
			w = calloc(1, sizeof(*w));
			if (w == NULL)
				return -ENOMEM;
			w->cb = cb;
			w->arg = arg;
			w->seq = last->seq;
			w->next = last->waiters;
			last->waiters = w;
			return (int64_t)last->seq;
		}
		jbd__queue_cb(j, cb, arg, 0);
		jbd__wake(j);
		return (int64_t)TW_MAX(j->closed_seq, 1);
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		rc = -ENOMEM;
		goto out_cancel;
	}
	/* Make room: a request never straddles transactions (J9). */
	if (j->running != NULL && j->running->n_items > 0) {
		struct jbd_layout l = j->running->lay;
		for (size_t i = 0; i < h->n_items; i++)
			jbd__layout_add(&l, &h->items[i]);
		if (l.blocks + 1 > j->max_txn)
			jbd__seal(j);
	}
	if (j->running == NULL) {
		j->running = txn_new(j);
		if (j->running == NULL) {
			rc = -ENOMEM;
			goto out_cancel;
		}
	}
	struct jbd_txn *t = j->running;
	t->behind = t->behind || j->closing;
	for (size_t i = 0; i < h->n_items; i++) {
		struct jbd_item *it = &h->items[i];
		if (it->kind == ITEM_DATA) {
			/* Update the running txn's copy in place when it
			 * holds the newest one and no cut followed it. */
			struct jbd_obj *o = jbd__obj(j, it->obj, false);
			struct jbd_ent *e = o ? tw_hmap_get(&o->blocks, it->blk + 1)
					      : NULL;
			if (e != NULL && e->txn == t && !e->frozen) {
				struct jbd_item *old = &t->items[e->item];
				memcpy(old->buf, it->buf, JBD_BLOCK_SIZE);
				old->crc = it->crc;
				/* Longer now: count what it adds, as for a new
				 * item, so the checkpoint takes off what was
				 * counted. */
				if (it->len > old->len)
					j->pending_home += it->len - old->len;
				old->len = TW_MAX(old->len, it->len);
				old->escaped = it->escaped;
				e->valid = old->len;
				uint64_t end = it->blk * JBD_BLOCK_SIZE + it->len;
				if (end > o->wend)
					o->wend = end;
				jbd__blk_put(j, it->buf);
				it->buf = NULL;
				continue;
			}
		}
		if (txn_push(t, it) < 0) {
			/* Out of memory half-way: we cannot take back what
			 * is already in the running txn; abort (J12). */
			for (size_t k = i; k < h->n_items; k++)
				item_release(j, &h->items[k]);
			jbd__abort(j, -ENOMEM, "commit (out of memory)");
			rc = -EIO;
			free(w);
			w = NULL;
			goto out_free;
		}
		it->buf = NULL;     /* owned by the txn now */
		size_t idx = t->n_items - 1;
		int r = 0;
		if (j->opts.mode == JBD_MODE_JOURNAL) {
			if (t->items[idx].kind == ITEM_DATA) {
				t->data_blocks++;
				j->copy_blocks++;
				j->unlogged_blocks++;
				r = index_data(j, t, idx);
				j->pending_home += t->items[idx].len;
			} else if (t->items[idx].kind == ITEM_REC) {
				r = index_cut(j, t, &t->items[idx]);
				if (t->items[idx].cut != JBD_NO_CUT)
					j->frees_seq = t->seq;
				if (r == 0 && t->items[idx].hole_len > 0)
					r = index_hole(j, t, idx);
			}
		}
		if (r < 0) {
			jbd__abort(j, r, "index (out of memory)");
			rc = -EIO;
			free(w);
			w = NULL;
			goto out_free;
		}
	}
	w->cb = cb;
	w->arg = arg;
	w->seq = t->seq;
	w->sync = (flags & JBD_COMMIT_SYNC) != 0;
	w->next = t->waiters;
	t->waiters = w;
	if (w->sync && j->want_sync < t->seq)
		j->want_sync = t->seq;
	rc = (int64_t)t->seq;
	free(h->items);
	free(h);
	/* An owner that drains before it sleeps closes the transaction
	 * then: the caller finishes its request first (the iod sends the
	 * forward to its twin before the log write, T1 in iod/twin.c), and
	 * requests that arrived together share one close. */
	if (j->opts.owner_drains && !j->in_process)
		j->kick_deferred = true;
	else
		jbd__commit_kick(j);
	return rc;
out_cancel:
	free(w);
out_free:
	jbd_cancel(h);
	return rc;
}

/* ------------------------------------------------------------- events */

int jbd_event_fd(const struct jbd *j)
{
	return j->efd;
}

static void process(struct jbd *j, bool clear_event)
{
	if (j->in_process)
		return;
	j->in_process = true;
	j->kick_deferred = false;   /* the loop below kicks the close */
	if (clear_event)
		jbd__io_clear_event(j);
	for (;;) {
		jbd__io_pump(j);
		int n = jbd__io_reap(j, false);
		jbd__commit_kick(j);
		jbd__sync_kick(j);
		jbd__home_kick(j);
		jbd__files_kick(j);
		jbd__cp_kick(j);
		jbd__io_pump(j);
		if (n == 0 && j->done_head == NULL)
			break;
	}
	j->in_process = false;
	run_cbs(j);
}

void jbd_process(struct jbd *j)
{
	process(j, true);
}

void jbd_process_ready(struct jbd *j)
{
	process(j, false);
}

bool jbd_ready(const struct jbd *j)
{
	return j->done_head != NULL || j->kick_deferred;
}

void jbd_tick(struct jbd *j)
{
	if (j->aborted)
		return;
	uint64_t now = tw_now_ms();
	uint32_t iv = j->opts.commit_interval_ms;
	if (j->closed_seq > j->synced_seq && now - j->last_sync_ms >= iv) {
		if (j->want_sync < j->closed_seq)
			j->want_sync = j->closed_seq;
	}
	jbd_process(j);
}

static bool pending_work(const struct jbd *j)
{
	if (jbd__io_busy(j))
		return true;
	if (j->aborted)
		return false;
	if (j->running && j->running->n_items > 0)
		return true;
	if (j->first_sealed || j->closing || j->cp_active)
		return true;
	if (j->sync_waiters || j->cp_waiters || j->cp_active ||
	    j->home_waiters || j->fjobs_run || j->fjobs_wait)
		return true;
	if (j->want_sync > j->synced_seq && j->want_sync <= j->closed_seq)
		return true;
	return false;
}

int jbd_wait(struct jbd *j)
{
	jbd_process(j);
	if (!pending_work(j)) {
		run_cbs(j);
		return 1;
	}
	if (j->io == NULL && j->inflight > 0)
		jbd__io_reap(j, true);
	else {
		jbd__cp_wait(j);
		jbd__bgsync_wait(&j->osync);
		jbd__bgsync_wait(&j->ofsync);
		jbd__bgsync_wait(&j->fsync_bg);
	}
	jbd_process(j);
	return 0;
}

void jbd_set_latency_hists(struct jbd *j, struct tw_hist *commit,
			   struct tw_hist *checkpoint)
{
	j->commit_hist = commit;
	j->cp_hist = checkpoint;
	j->close_start_ns = j->cp_start_ns = 0;
}

void jbd_stats(const struct jbd *j, struct jbd_stats *st)
{
	*st = j->st;
	st->nblocks = j->nblocks;
	st->used_blocks = j->used;
	st->next_seq = j->next_seq;
	st->closed_seq = j->closed_seq;
	st->synced_seq = j->synced_seq;
	st->checkpointed_seq = j->checkpointed_seq;
	st->tail = j->tail;
	st->head = j->head;
	st->pending_home = j->pending_home;
	st->copy_bytes = j->copy_blocks * JBD_BLOCK_SIZE;
	st->cache_bytes = (uint64_t)j->n_slabs * JBD_SLAB_BYTES;
	st->cache_free_bytes = j->cache_free_bytes;
	st->unlogged_bytes = j->unlogged_blocks * JBD_BLOCK_SIZE;
	st->aborted = j->aborted;
	st->direct_home = j->direct_home;
}

/* ------------------------------------------------------- open / close */

static int create_journal(struct jbd *j, uint64_t size)
{
	int rc = 0;
	/* Preallocate with zeros (journal/FORMAT.md "Geometry"): write them, so later appends
	 * never allocate and the log never reads stale bytes of another
	 * file. */
	uint8_t *zero = calloc(1, 1u << 20);
	if (zero == NULL)
		return -ENOMEM;
	for (uint64_t off = 0; off < size; off += 1u << 20) {
		size_t n = (size_t)TW_MIN((uint64_t)(1u << 20), size - off);
		rc = tw_pwrite_all(j->fd, zero, n, off);
		if (rc < 0)
			break;
	}
	free(zero);
	if (rc < 0)
		return rc;
	rc = tw_random(j->uuid, sizeof(j->uuid));
	if (rc < 0)
		return rc;
	j->nblocks = size / JBD_BLOCK_SIZE;
	uint8_t block[JBD_BLOCK_SIZE];
	jbd__super_encode(j, block, 1, 1);
	rc = jbd__pwrite_sync(j, JBD_IO_LOG, j->fd, block, JBD_BLOCK_SIZE, 0);
	if (rc < 0)
		return rc;
	if (fsync(j->fd) < 0)
		return -errno;
	/* the new name must survive too */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", j->opts.path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	tw_info("journal %s: created, %" PRIu64 " blocks of %u bytes",
		j->opts.path, j->nblocks, JBD_BLOCK_SIZE);
	return 0;
}

/* Byte 0 of the journal file carries an OFD write lock through dfd while
 * it is open.  flock on fd says whether a live process owns the journal;
 * but when an owner dies its O_DIRECT writes may still be in flight on
 * io_uring, holding dfd's file (not fd's, which the flock is on), and
 * would land on a log the next owner has already replayed and reused.
 * The lock on byte 0 goes away only when the last of them completes, so
 * jbd_open waits for it (bounded): the device finishes a write in ms. */
static const struct flock dfd_lock = {
	.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1,
};
#define DFD_WAIT_MS 10000

static int direct_writes_done(void *arg)
{
	struct jbd *j = arg;
	struct flock l = dfd_lock;

	if (fcntl(j->fd, F_OFD_GETLK, &l) < 0)
		return errno == EINVAL ? 1 : -errno; /* no OFD locks: no dfd */
	return l.l_type == F_UNLCK;
}

static int wait_old_direct_writes(struct jbd *j)
{
	unsigned waited;
	int rc = tw_wait_free(direct_writes_done, j, DFD_WAIT_MS, &waited);

	if (rc == -ETIMEDOUT) {
		tw_err("journal %s: O_DIRECT writes of its previous owner "
		       "still in flight after %u ms", j->opts.path, waited);
		return -EBUSY;
	}
	return rc;
}

/* One owner per journal: a second iod on the same directory would
 * interleave two logs.  The flock is on fd, which the io_uring ring also
 * holds while requests on it are in flight; a dead owner's ring is torn
 * down by the kernel after the process is gone, so its flock can outlive
 * it by a moment (a restart right after a stop, or after kill -9).  So a
 * held lock is waited for as long as the direct writes are
 * (DFD_WAIT_MS) before the journal counts as in use. */
static int lock_owner(struct jbd *j)
{
	unsigned waited;
	int rc = tw_wait_free(tw_flock_free, &j->fd, DFD_WAIT_MS, &waited);

	if (rc == -ETIMEDOUT) {
		tw_err("journal %s: in use by another process (still locked "
		       "after %u ms): is another iod running on this data "
		       "directory?", j->opts.path, waited);
		return -EBUSY;
	}
	if (rc < 0)
		tw_err("journal %s: flock: %s", j->opts.path, strerror(-rc));
	else if (waited > 0)
		tw_info("journal %s: its previous owner let it go after %u ms",
			j->opts.path, waited);
	return rc;
}

/* A second descriptor with O_DIRECT for the log writes of batched
 * transactions (jbd_commit.c), when the file system takes buffers and
 * offsets aligned as ours are (statx STATX_DIOALIGN, Linux 6.1) and a
 * page is no larger than a block (so no page holds both buffered and
 * direct blocks): it saves the copy of every journaled byte into the page
 * cache.  Without it every write goes through fd. */
static void open_direct(struct jbd *j)
{
	const char *why = NULL;
	struct statx sx;

	if (j->io != NULL)
		return;                 /* the test layer writes synchronously */
	if (j->opts.buffered)
		why = "as configured";
	else if (sysconf(_SC_PAGESIZE) > (long)JBD_BLOCK_SIZE)
		why = "pages larger than a journal block";
	else if (statx(j->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) < 0 ||
		 !(sx.stx_mask & STATX_DIOALIGN) ||
		 sx.stx_dio_mem_align == 0 ||
		 sx.stx_dio_mem_align > JBD_BUF_ALIGN ||
		 sx.stx_dio_offset_align == 0 ||
		 sx.stx_dio_offset_align > JBD_BLOCK_SIZE)
		why = "the file system does not take O_DIRECT as aligned here";
	if (why == NULL) {
		j->dfd = jbd__reopen_direct(j->fd);
		if (j->dfd < 0) {
			why = "cannot open it with O_DIRECT";
		} else if (fcntl(j->dfd, F_OFD_SETLK, &dfd_lock) < 0) {
			why = "cannot lock it for O_DIRECT";
			close(j->dfd);
			j->dfd = -1;
		}
	}
	j->direct = why == NULL;
	/* Home writes with O_DIRECT hold only their own files; registered
	 * with the ring, dfd (and so its lock) lives until the ring is torn
	 * down, which happens only after its last request completed: then
	 * wait_old_direct_writes also waits for a dead owner's checkpoint. */
	j->direct_home = j->direct && j->ring_ok &&
			 io_uring_register_files(&j->ring, &j->dfd, 1) == 0;
	tw_info("journal %s: streams of writes go to the log %s%s%s%s",
		j->opts.path, why ? "through the page cache" : "with O_DIRECT",
		why ? ": " : "", why ? why : "",
		j->direct && !j->direct_home ?
		" (checkpoints through the page cache: the ring does not "
		"take the descriptor)" : "");
}

/* Drop the journal file's page cache once it is created or replayed
 * (docs/ARCHITECTURE.md "The block journal", Page cache).  The zero fill of
 * create_journal and replay's reads leave it in large folios (up to 1 MiB
 * here); each later append of a few blocks into such a folio walks all its
 * buffer heads twice and dirties the whole folio, about 20 us of system
 * time per 4 KiB write over the four iods of a local cluster.  Appends then
 * make folios of their own size.  Only advice: dirty pages stay, and a
 * refusal costs nothing but that time. */
static void drop_log_cache(struct jbd *j)
{
	(void)posix_fadvise(j->fd, 0, 0, POSIX_FADV_DONTNEED);
}

int jbd_open(const struct jbd_opts *opts, struct jbd_replay_info *info,
	     struct jbd **out)
{
	int rc;
	struct jbd_replay_info dummy;
	if (info == NULL)
		info = &dummy;
	memset(info, 0, sizeof(*info));
	if (opts == NULL || opts->path == NULL || opts->ops.home_fd == NULL ||
	    opts->ops.home_sync == NULL || opts->mode > JBD_MODE_WRITEBACK)
		return -EINVAL;
	uint64_t size = opts->size ? opts->size : JBD_DEFAULT_SIZE;
	if (size < JBD_MIN_SIZE || size % JBD_BLOCK_SIZE != 0)
		return -EINVAL;
	struct jbd *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->opts = *opts;
	j->ops = opts->ops;
	j->io = opts->io;
	j->fd = -1;
	j->dfd = -1;
	j->efd = -1;
	if (j->opts.commit_interval_ms == 0)
		j->opts.commit_interval_ms = TW_COMMIT_INTERVAL_MS;
	tw_hmap_init(&j->objs);
	j->fd = open(opts->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0) {
		rc = -errno;
		tw_err("journal %s: open: %s", opts->path, strerror(-rc));
		goto fail;
	}
	rc = lock_owner(j);
	if (rc < 0)
		goto fail;
	rc = wait_old_direct_writes(j);
	if (rc < 0)
		goto fail;
	struct stat stb;
	if (fstat(j->fd, &stb) < 0) {
		rc = -errno;
		goto fail;
	}
	if (stb.st_size == 0) {
		rc = create_journal(j, size);
		if (rc < 0) {
			tw_err("journal %s: create: %s", opts->path, strerror(-rc));
			goto fail;
		}
	} else if ((uint64_t)stb.st_size != size) {
		tw_warn("journal %s: existing journal is %" PRIu64 " bytes, "
			"not the configured %" PRIu64 "; keeping its size",
			opts->path, (uint64_t)stb.st_size, size);
	}
	rc = jbd__io_init(j);
	if (rc < 0) {
		tw_err("journal %s: io_uring setup: %s", opts->path, strerror(-rc));
		goto fail;
	}
	rc = jbd__recover(j, info);
	if (rc < 0)
		goto fail;
	drop_log_cache(j);
	j->max_txn = j->nlog / 4;
	j->last_sync_ms = tw_now_ms();
	open_direct(j);
	*out = j;
	return 0;
fail:
	jbd_abandon(j);
	return rc;
}

static void free_index(struct jbd *j)
{
	uint64_t key;
	void *val;
	for (size_t it = 0; tw_hmap_next(&j->objs, &it, &key, &val);) {
		struct jbd_obj *o = val;
		uint64_t k2;
		void *v2;
		for (size_t i2 = 0; tw_hmap_next(&o->blocks, &i2, &k2, &v2);)
			free(v2);
		tw_hmap_free(&o->blocks);
		free(o->cuts);
		free(o->holes);
		free(o);
	}
	tw_hmap_free(&j->objs);
}

void jbd_abandon(struct jbd *j)
{
	if (j == NULL)
		return;
	jbd__cp_fini(j);
	jbd__bgsync_wait(&j->osync);    /* it writes the eventfd */
	jbd__bgsync_wait(&j->ofsync);
	jbd__bgsync_wait(&j->fsync_bg);
	jbd__io_fini(j);
	if (j->running)
		jbd__txn_free(j, j->running);
	struct jbd_txn *t;
	while ((t = j->txn_head) != NULL) {
		j->txn_head = t->next;
		jbd__txn_free(j, t);
	}
	struct jbd_waiter *w;
	while ((w = j->sync_waiters) != NULL) {
		j->sync_waiters = w->next;
		free(w);
	}
	while ((w = j->cp_waiters) != NULL) {
		j->cp_waiters = w->next;
		free(w);
	}
	while ((w = j->home_waiters) != NULL) {
		j->home_waiters = w->next;
		free(w);
	}
	jbd__fjobs_fail(j, &j->fjobs_run, -EIO, true);
	jbd__fjobs_fail(j, &j->fjobs_wait, -EIO, true);
	while ((w = j->cb_head) != NULL) {
		j->cb_head = w->next;
		free(w);
	}
	free_index(j);
	jbd__blocks_fini(j);
	if (j->dfd >= 0)
		close(j->dfd);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

static void close_done(void *arg, int rc)
{
	int *p = arg;
	*p = rc == 0 ? 1 : rc;
}

int jbd_close(struct jbd *j)
{
	if (j == NULL)
		return 0;
	int rc = 0;
	if (!j->aborted) {
		int done = 0;
		rc = jbd_checkpoint(j, close_done, &done);
		if (rc == 0) {
			/* and the jbd_sync_home and jbd_sync_files
			 * callers, whose callbacks free their requests */
			while ((done == 0 || j->home_waiters ||
				j->fjobs_run || j->fjobs_wait) && !j->aborted)
				if (jbd_wait(j) == 1 && done == 0)
					break;
			rc = done == 1 ? 0 : (done < 0 ? done : -EIO);
		}
	}
	/* let in-flight requests finish before their buffers go */
	while (j->io == NULL && j->inflight > 0)
		jbd__io_reap(j, true);
	run_cbs(j);
	if (j->aborted)
		rc = -EIO;
	jbd_abandon(j);
	return rc;
}
