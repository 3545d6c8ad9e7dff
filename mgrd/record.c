/* record.c - mgrd's journal records, their apply function, and snapshots.
 *
 * Every mutating operation is one struct mgr_op.  The live path applies it
 * (mgr_op_apply decides what is not a function of the state: inode number,
 * layout, file handle; the caller has already read the clock into op->now)
 * and then mgr_journal_commit encodes the op with its decisions and its
 * reply, appends it to the record log (closed on return) and caches the
 * reply for exactly-once.  Replay decodes each record, applies it with the
 * decisions it carries (never reading the clock or a counter) and caches
 * its reply, so the rebuilt state equals the one before the crash, reply
 * cache included.  A record of a failed request (status < 0) changes
 * nothing; it is kept so that a retransmission gets the same error.
 *
 * The byte formats of records and snapshots are in mgrd/FORMAT.md; the
 * encoders here are the reference.  Snapshots are canonical (inodes,
 * sessions, handles in ascending order), so equal states encode to equal
 * bytes: the unit tests compare states that way.
 */
#include "mgrd_int.h"
#include "journal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define REC_VERSION   1u
#define SNAP_MAGIC    0x534d5754u   /* "TWMS" */
#define SNAP_VERSION  6u               /* 2 adds the resync job records,
					* 3 the sizes to probe, 4 the
					* fenced sessions, 5 the sessions'
					* resume secrets, 6 their client
					* identities */
#define STR_NULL      0xffffffffu
#define SNAPSHOT_BYTES_DEFAULT (64ull << 20)
#define SNAPSHOT_RETRY_BYTES   (16ull << 20)

/* ------------------------------------------------------------- encoding */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void put(struct wbuf *b, const void *d, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	if (n)  /* d may be NULL for an empty field */
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void put_u8(struct wbuf *b, uint8_t v) { put(b, &v, 1); }

static void put_u16(struct wbuf *b, uint16_t v)
{
	uint8_t x[2];

	tw_put_le16(x, v);
	put(b, x, 2);
}

static void put_u32(struct wbuf *b, uint32_t v)
{
	uint8_t x[4];

	tw_put_le32(x, v);
	put(b, x, 4);
}

static void put_u64(struct wbuf *b, uint64_t v)
{
	uint8_t x[8];

	tw_put_le64(x, v);
	put(b, x, 8);
}

static void put_bytes(struct wbuf *b, const void *d, uint32_t n)
{
	put_u32(b, n);
	if (n)
		put(b, d, n);
}

/* Strings carry their NUL so that the decoder can hand out pointers into
 * the buffer; NULL is length STR_NULL. */
static void put_str(struct wbuf *b, const char *s)
{
	if (!s) {
		put_u32(b, STR_NULL);
		return;
	}
	put_u32(b, (uint32_t)strlen(s));
	put(b, s, strlen(s) + 1);
}

static void put_time(struct wbuf *b, const struct mgr_time *t)
{
	put_u64(b, (uint64_t)t->sec);
	put_u32(b, t->nsec);
}

static void put_layout(struct wbuf *b, const struct r0_layout *l)
{
	put_u32(b, l->stripe_size);
	put_u32(b, l->stripe_count);
	for (uint32_t k = 0; k < l->stripe_count && k < R0_MAX_STRIPE_COUNT; k++)
		put_u32(b, l->groups[k]);
}

struct rbuf {
	const uint8_t *p;
	size_t len, pos;
	int err;
};

static const uint8_t *get(struct rbuf *b, size_t n)
{
	const uint8_t *p;

	if (b->err || n > b->len - b->pos) {
		b->err = -EBADMSG;
		return NULL;
	}
	p = b->p + b->pos;
	b->pos += n;
	return p;
}

static uint8_t get_u8(struct rbuf *b)
{
	const uint8_t *p = get(b, 1);

	return p ? p[0] : 0;
}

static uint16_t get_u16(struct rbuf *b)
{
	const uint8_t *p = get(b, 2);

	return p ? tw_get_le16(p) : 0;
}

static uint32_t get_u32(struct rbuf *b)
{
	const uint8_t *p = get(b, 4);

	return p ? tw_get_le32(p) : 0;
}

static uint64_t get_u64(struct rbuf *b)
{
	const uint8_t *p = get(b, 8);

	return p ? tw_get_le64(p) : 0;
}

static const void *get_bytes(struct rbuf *b, uint32_t *n, uint32_t max)
{
	*n = get_u32(b);
	if (*n > max) {
		b->err = -EBADMSG;
		*n = 0;
		return NULL;
	}
	return *n ? get(b, *n) : NULL;
}

static const char *get_str(struct rbuf *b, uint32_t max)
{
	uint32_t n = get_u32(b);
	const char *s;

	if (b->err || n == STR_NULL)
		return NULL;
	if (n > max) {
		b->err = -EBADMSG;
		return NULL;
	}
	s = (const char *)get(b, (size_t)n + 1);
	/* Exactly n bytes before the NUL: no embedded NUL. */
	if (s && (s[n] != '\0' || strlen(s) != n)) {
		b->err = -EBADMSG;
		return NULL;
	}
	return s;
}

static void get_time(struct rbuf *b, struct mgr_time *t)
{
	t->sec = (int64_t)get_u64(b);
	t->nsec = get_u32(b);
	if (t->nsec >= 1000000000u)
		b->err = -EBADMSG;
}

static void get_layout(struct rbuf *b, struct r0_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->stripe_size = get_u32(b);
	l->stripe_count = get_u32(b);
	if (l->stripe_count > R0_MAX_STRIPE_COUNT) {
		b->err = -EBADMSG;
		return;
	}
	for (uint32_t k = 0; k < l->stripe_count; k++)
		l->groups[k] = get_u32(b);
}

/* --------------------------------------------------------------- records */

#define OPF_WROTE        0x1u
#define OPF_HAS_LAYOUT   0x2u
#define OPF_NEEDS_RESYNC 0x4u
#define OPF_OPEN         0x8u

int mgr_op_encode(const struct mgr_op *in_op, uint8_t **out, size_t *len)
{
	struct wbuf b = { 0 };
	struct mgr_op failed;
	const struct mgr_op *op = in_op;
	uint16_t f;

	/* A failed request changed nothing: keep only what exactly-once
	 * needs.  Its inputs may break every limit (that is often why it
	 * failed), and replay never looks at them. */
	if (in_op->status < 0) {
		memset(&failed, 0, sizeof(failed));
		failed.type = in_op->type;
		failed.session = in_op->session;
		failed.seq = in_op->seq;
		failed.acked_seq = in_op->acked_seq;
		failed.status = in_op->status;
		failed.reply_type = in_op->reply_type;
		failed.reply = in_op->reply;
		failed.reply_len = in_op->reply_len;
		op = &failed;
	}
	f = (op->wrote ? OPF_WROTE : 0) |
		     (op->has_layout ? OPF_HAS_LAYOUT : 0) |
		     (op->needs_resync ? OPF_NEEDS_RESYNC : 0) |
		     (op->open ? OPF_OPEN : 0);

	put_u8(&b, REC_VERSION);
	put_u8(&b, op->type);
	put_u16(&b, f);
	put_u64(&b, op->session);
	put_u64(&b, op->seq);
	put_u64(&b, op->acked_seq);
	put_u32(&b, (uint32_t)op->status);
	put_u16(&b, op->reply_type);
	put_bytes(&b, op->reply, op->reply_len);
	put_u64(&b, op->ino);
	put_u64(&b, op->parent);
	put_u64(&b, op->newparent);
	put_str(&b, op->name);
	put_str(&b, op->newname);
	put_str(&b, op->target);
	put_bytes(&b, op->value, op->value_len);
	put_u32(&b, op->mode);
	put_u32(&b, op->rdev);
	put_u32(&b, op->uid);
	put_u32(&b, op->gid);
	put_u32(&b, op->flags);
	put_u32(&b, op->valid);
	put_u64(&b, op->size);
	put_u64(&b, op->trunc_gen);
	put_time(&b, &op->atime);
	put_time(&b, &op->mtime);
	put_time(&b, &op->ctime);
	put_u32(&b, op->stripe_size);
	put_u32(&b, op->stripe_count);
	put_u32(&b, (uint32_t)op->first);
	put_u32(&b, op->n_cols);
	for (uint32_t i = 0; i < op->n_cols && i < MGR_OP_MAX_COLS; i++) {
		put_u32(&b, op->cols[i]);
		put_u64(&b, op->blocks[i]);
	}
	put_bytes(&b, op->uuid, op->uuid_len);
	put_u64(&b, op->incarnation);
	put_u32(&b, op->iod_state);
	put_time(&b, &op->now);
	put_u64(&b, op->new_ino);
	put_u64(&b, op->fh);
	put_layout(&b, &op->layout);
	put_u64(&b, op->rr_next);
	put_u64(&b, op->epoch);
	if (b.err) {
		free(b.p);
		return b.err;
	}
	if (b.len > JNL_REC_MAX) {
		free(b.p);
		return -E2BIG;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

int mgr_op_decode(const void *buf, size_t len, struct mgr_op *op)
{
	struct rbuf b = { .p = buf, .len = len };
	uint16_t f;

	memset(op, 0, sizeof(*op));
	if (get_u8(&b) != REC_VERSION)
		return -EBADMSG;
	op->type = get_u8(&b);
	if (op->type == MGR_OP_NONE || op->type >= MGR_OP_MAX_)
		return -EBADMSG;
	f = get_u16(&b);
	op->wrote = f & OPF_WROTE;
	op->has_layout = f & OPF_HAS_LAYOUT;
	op->needs_resync = f & OPF_NEEDS_RESYNC;
	op->open = f & OPF_OPEN;
	op->session = get_u64(&b);
	op->seq = get_u64(&b);
	op->acked_seq = get_u64(&b);
	op->status = (int32_t)get_u32(&b);
	op->reply_type = get_u16(&b);
	op->reply = get_bytes(&b, &op->reply_len, JNL_REC_MAX);
	op->ino = get_u64(&b);
	op->parent = get_u64(&b);
	op->newparent = get_u64(&b);
	op->name = get_str(&b, MGR_XATTR_NAME_MAX);
	op->newname = get_str(&b, MGR_NAME_MAX);
	op->target = get_str(&b, MGR_SYMLINK_MAX);
	op->value = get_bytes(&b, &op->value_len, MGR_XATTR_SIZE_MAX);
	op->mode = get_u32(&b);
	op->rdev = get_u32(&b);
	op->uid = get_u32(&b);
	op->gid = get_u32(&b);
	op->flags = get_u32(&b);
	op->valid = get_u32(&b);
	op->size = get_u64(&b);
	op->trunc_gen = get_u64(&b);
	get_time(&b, &op->atime);
	get_time(&b, &op->mtime);
	get_time(&b, &op->ctime);
	op->stripe_size = get_u32(&b);
	op->stripe_count = get_u32(&b);
	op->first = (int32_t)get_u32(&b);
	op->n_cols = get_u32(&b);
	if (op->n_cols > MGR_OP_MAX_COLS)
		return -EBADMSG;
	for (uint32_t i = 0; i < op->n_cols; i++) {
		op->cols[i] = get_u32(&b);
		op->blocks[i] = get_u64(&b);
	}
	op->uuid = get_bytes(&b, &op->uuid_len, MGR_UUID_MAX);
	op->incarnation = get_u64(&b);
	op->iod_state = get_u32(&b);
	get_time(&b, &op->now);
	op->new_ino = get_u64(&b);
	op->fh = get_u64(&b);
	get_layout(&b, &op->layout);
	op->rr_next = get_u64(&b);
	op->epoch = get_u64(&b);
	if (b.err)
		return b.err;
	if (b.pos != b.len)
		return -EBADMSG;
	return 0;
}

/* ----------------------------------------------------------------- apply */

static int apply_create(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_create c = {
		.parent = op->parent, .name = op->name, .mode = op->mode,
		.umask = op->umask, .rdev = op->rdev, .uid = op->uid,
		.gid = op->gid,
		.target = op->target, .now = op->now, .ino = op->new_ino,
		.has_layout = op->has_layout, .layout = op->layout,
		.rr_next = op->rr_next,
	};
	struct mgr_session *s = NULL;
	int rc;

	if (op->open) {
		/* Check before creating: a create+open either does both or
		 * nothing. */
		s = mgr_session_get(&st->sessions, op->session);
		if (!s)
			return -EINVAL;
		if ((op->mode & S_IFMT) != S_IFREG)
			return -EINVAL;
	}
	if (s) {
		/* The handle first (it can only fail for memory), so that a
		 * failed create+open leaves no trace (all or nothing). */
		uint64_t saved_next_fh = s->next_fh;

		if (!op->fh)
			op->fh = s->next_fh;
		rc = mgr_session_add_handle(s, op->fh, 0, op->flags);
		if (rc < 0)
			return rc;
		rc = mgr_ns_create(&st->ns, &c, &op->out);
		if (rc < 0) {
			mgr_session_del_handle(s, op->fh);
			s->next_fh = saved_next_fh;
			return rc;
		}
		mgr_session_handle(s, op->fh)->ino = c.ino;
		op->out->open_count++;
	} else {
		rc = mgr_ns_create(&st->ns, &c, &op->out);
		if (rc < 0)
			return rc;
	}
	op->new_ino = c.ino;
	op->mode = c.mode;   /* umask or default ACL applied: replay keeps it */
	op->has_layout = c.has_layout;
	op->layout = c.layout;
	op->rr_next = c.rr_next;
	return 0;
}

/* RENAME_WHITEOUT (overlayfs): the rename, then a 0/0 character device
 * owned by the caller (op uid/gid) under the old name, in one record.  Its
 * number is decided like a create's (new_ino).  The create cannot find the
 * name taken, so only memory can fail it. */
static int apply_rename(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_create c = {
		.parent = op->parent, .name = op->name, .mode = S_IFCHR,
		.uid = op->uid, .gid = op->gid, .now = op->now,
		.ino = op->new_ino,
	};
	struct mgr_inode *wh;
	int rc = mgr_ns_rename(&st->ns, op->parent, op->name, op->newparent,
			       op->newname, op->flags, &op->now);

	if (rc < 0 || !(op->flags & MGR_RENAME_WHITEOUT))
		return rc;
	rc = mgr_ns_create(&st->ns, &c, &wh);
	if (rc == 0)
		op->new_ino = c.ino;
	return rc;
}

static int apply_setattr(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_setattr sa = {
		.valid = op->valid, .mode = op->mode, .uid = op->uid,
		.gid = op->gid, .size = op->size, .atime = op->atime,
		.mtime = op->mtime, .ctime = op->ctime,
		.trunc_gen = op->trunc_gen, .n_blocks = op->n_cols,
		.blocks = op->blocks,
	};

	return mgr_ns_setattr(&st->ns, op->ino, &sa, &op->now, &op->out);
}

static int apply_open(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_session *s = mgr_session_get(&st->sessions, op->session);
	int rc;

	if (!s)
		return -EINVAL;
	if (!mgr_ns_get(&st->ns, op->ino))
		return -ESTALE;
	if (!op->fh)
		op->fh = s->next_fh;
	rc = mgr_ns_open(&st->ns, op->ino);
	if (rc < 0)
		return rc;
	rc = mgr_session_add_handle(s, op->fh, op->ino, op->flags);
	if (rc < 0) {
		mgr_ns_close(&st->ns, op->ino);
		return rc;
	}
	op->out = mgr_ns_get(&st->ns, op->ino);
	return 0;
}

static int apply_release(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_session *s = mgr_session_get(&st->sessions, op->session);
	struct mgr_handle *h;
	uint64_t ino;

	if (!s)
		return -EINVAL;
	h = mgr_session_handle(s, op->fh);
	if (!h || (op->ino && h->ino != op->ino))
		return -EBADF;
	ino = h->ino;
	mgr_session_del_handle(s, op->fh);
	return mgr_ns_close(&st->ns, ino);
}

static int apply_expire(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_session *s = mgr_session_get(&st->sessions, op->session);
	uint64_t *fhs, *added;
	size_t n, n_added = 0;

	if (!s)
		return -ENOENT;
	/* Sorted, so that orphans are destroyed in the same order on
	 * replay (pending deletes are queued in that order). */
	fhs = mgr_hmap_sorted_keys(&s->handles, &n);
	added = fhs ? malloc((n ? n : 1) * sizeof(*added)) : NULL;
	if (!added) {
		free(fhs);
		return -ENOMEM;
	}
	/* A writer gone without its final size report: the size is taken
	 * from the iods.  These first, so that a failure changes nothing
	 * (an orphan destroyed at its close below leaves the set again). */
	for (size_t i = 0; i < n; i++) {
		const struct mgr_handle *h = mgr_session_handle(s, fhs[i]);

		if ((h->flags & O_ACCMODE) == O_RDONLY ||
		    mgr_ns_psize_pending(&st->ns, h->ino))
			continue;
		if (mgr_ns_psize_add(&st->ns, h->ino) < 0) {
			while (n_added)
				free(tw_hmap_del(&st->ns.psize,
						 added[--n_added]));
			free(added);
			free(fhs);
			return -ENOMEM;
		}
		added[n_added++] = h->ino;
	}
	for (size_t i = 0; i < n; i++)
		mgr_ns_close(&st->ns, mgr_session_handle(s, fhs[i])->ino);
	free(added);
	free(fhs);
	mgr_session_destroy(&st->sessions, s);
	mgr_sessions_fence(&st->sessions, op->session);
	return 0;
}

static int apply_map_iod(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_map_iod *mi = mgr_map_iod(&st->map, (uint32_t)op->ino);

	if (op->epoch > st->map.epoch)
		st->map.epoch = op->epoch;
	/* An iod dropped from the config: keep the epoch, ignore the rest. */
	if (!mi)
		return 0;
	if (op->uuid_len > MGR_UUID_MAX || op->iod_state > MGR_IOD_RESYNCING)
		return -EINVAL;
	/* op->uuid may point at mi->uuid itself (a state-only change); it is
	 * NULL when uuid_len is 0, which memmove may not be given. */
	if (op->uuid_len)
		memmove(mi->uuid, op->uuid, op->uuid_len);
	mi->uuid_len = op->uuid_len;
	mi->incarnation = op->incarnation;
	mi->state = (enum mgr_iod_state)op->iod_state;
	mi->needs_resync = op->needs_resync;
	return 0;
}

int mgr_op_apply(struct mgr_state *st, struct mgr_op *op)
{
	struct mgr_session *s;
	bool dummy_layout;

	op->out = NULL;
	switch (op->type) {
	case MGR_OP_SETATTR:
		return apply_setattr(st, op);
	case MGR_OP_CREATE:
		return apply_create(st, op);
	case MGR_OP_LINK:
		return mgr_ns_link(&st->ns, op->ino, op->newparent,
				   op->newname, &op->now, &op->out);
	case MGR_OP_UNLINK:
	case MGR_OP_RMDIR:
		return mgr_ns_unlink(&st->ns, op->parent, op->name,
				     op->type == MGR_OP_RMDIR, &op->now);
	case MGR_OP_RENAME:
		return apply_rename(st, op);
	case MGR_OP_OPEN:
		return apply_open(st, op);
	case MGR_OP_RELEASE:
		return apply_release(st, op);
	case MGR_OP_SETXATTR:
		return mgr_ns_setxattr(&st->ns, op->ino, op->name, op->value,
				       op->value_len, op->flags, &op->now);
	case MGR_OP_REMOVEXATTR:
		return mgr_ns_removexattr(&st->ns, op->ino, op->name,
					  &op->now);
	case MGR_OP_SIZE_REPORT: {
		int rc = mgr_ns_size_report(&st->ns, op->ino, op->size,
					    &op->mtime, op->trunc_gen,
					    op->wrote,
					    op->valid & MGR_REPORT_KEEP_TIMES,
					    op->n_cols, op->cols, op->blocks,
					    &op->out);

		if (rc == 0 && (op->valid & MGR_REPORT_ACCESSED))
			rc = mgr_ns_accessed(&st->ns, op->ino, &op->atime,
					     op->valid &
					     MGR_REPORT_STRICTATIME);
		return rc;
	}
	case MGR_OP_SETSTRIPE:
		dummy_layout = op->has_layout;
		{
			int rc = mgr_ns_setstripe(&st->ns, op->ino,
						  op->stripe_size,
						  op->stripe_count, op->first,
						  &dummy_layout, &op->layout,
						  &op->rr_next, &op->now,
						  &op->out);

			op->has_layout = dummy_layout;
			return rc;
		}
	case MGR_OP_SESSION_NEW:
		s = mgr_session_create(&st->sessions, op->session);
		if (!s)
			return -EEXIST;
		op->session = s->id;
		/* The resume secret travels in the uuid field, the client
		 * identity in name. */
		if (op->uuid_len == MGR_SESSION_SECRET_LEN) {
			memcpy(s->secret, op->uuid, MGR_SESSION_SECRET_LEN);
			s->has_secret = true;
		}
		if (op->name && strlen(op->name) >= sizeof(s->ident))
			return -EINVAL;
		if (op->name)
			snprintf(s->ident, sizeof(s->ident), "%s", op->name);
		return 0;
	case MGR_OP_SESSION_EXPIRE:
		return apply_expire(st, op);
	case MGR_OP_MAP_IOD:
		return apply_map_iod(st, op);
	case MGR_OP_PDEL_DONE:
		mgr_ns_pdel_done(&st->ns, op->ino);
		return 0;
	case MGR_OP_SIZE_FOUND:
		return mgr_ns_size_found(&st->ns, op->ino, op->size,
					 op->trunc_gen, &op->now);
	case MGR_OP_TRUNC_BEGIN:
		return mgr_ns_trunc_begin(&st->ns, op->ino, op->trunc_gen);
	case MGR_OP_INO_RESERVE:
		if (op->new_ino > st->ns.ino_limit)
			st->ns.ino_limit = op->new_ino;
		return 0;
	case MGR_OP_REVOKED:
		/* the list is DIR/revoked's, not the state's (ident.c) */
		return 0;
	case MGR_OP_RESYNC_JOB:
		if (op->ino == 0 || op->ino > TW_MAX_IODS)
			return -EINVAL;
		return mgr_rjob_unpack(op->value, op->value_len,
				       &st->rjobs[op->ino - 1]);
	default:
		return -EINVAL;
	}
}

int mgr_op_cache(struct mgr_state *st, const struct mgr_op *op)
{
	struct mgr_session *s;

	if (!op->session || !op->seq || op->type == MGR_OP_SESSION_NEW ||
	    op->type == MGR_OP_SESSION_EXPIRE)
		return 0;
	s = mgr_session_get(&st->sessions, op->session);
	if (!s)
		return 0;
	return mgr_session_cache(s, op->seq, op->acked_seq, op->reply_type,
				 op->status, op->reply, op->reply_len);
}

/* ------------------------------------------------------------- snapshots */

static void put_inode(struct wbuf *b, const struct mgr_inode *in)
{
	uint32_t nx = 0;

	put_u64(b, in->ino);
	put_u32(b, in->mode);
	put_u32(b, in->nlink);
	put_u32(b, in->uid);
	put_u32(b, in->gid);
	put_u32(b, mgr_inode_rdev(in));
	put_u64(b, in->size);
	put_u64(b, in->trunc_gen);
	put_u64(b, in->data_version);
	put_time(b, &in->atime);
	put_time(b, &in->mtime);
	put_time(b, &in->ctime);
	put_u64(b, in->parent);
	put_u32(b, in->open_count);
	put_u8(b, in->orphan);
	if (S_ISREG(in->mode)) {
		put_layout(b, in->layout);
		for (uint32_t k = 0; k < in->layout->stripe_count; k++)
			put_u64(b, in->col_blocks ? in->col_blocks[k] : 0);
	} else if (S_ISLNK(in->mode)) {
		put_str(b, in->target);
	} else if (S_ISDIR(in->mode)) {
		const struct mgr_dir *d = in->dir;

		put_u64(b, d->parent);
		put_u64(b, d->next_cookie);
		put_u8(b, d->has_policy);
		put_u32(b, d->pol_stripe_size);
		put_u32(b, d->pol_stripe_count);
		put_u32(b, (uint32_t)d->pol_first);
		put_u32(b, d->count);
		for (uint32_t i = 0; i < d->norder; i++) {
			const struct mgr_dirent *e = d->order[i];

			if (!e)
				continue;
			put_u64(b, e->cookie);
			put_u64(b, e->ino);
			put_str(b, e->name);
		}
	}
	for (const struct mgr_xattr *x = in->xattrs; x; x = x->next)
		nx++;
	put_u32(b, nx);
	for (const struct mgr_xattr *x = in->xattrs; x; x = x->next) {
		put_str(b, x->name);
		put_bytes(b, x->value, x->len);
	}
}

/* A job record worth a snapshot entry: any but the initial one. */
static bool rjob_kept(const struct mgr_rjob_rec *r)
{
	return r->state != MGR_RJ_NONE || r->full || r->has_cursor;
}

int mgr_state_encode(const struct mgr_state *st, uint8_t **out, size_t *len)
{
	struct wbuf b = { 0 };
	struct mgr_inode **inodes;
	uint64_t *keys;
	size_t n;

	put_u32(&b, SNAP_MAGIC);
	put_u32(&b, SNAP_VERSION);
	put_u64(&b, st->ns.next_ino);
	put_u64(&b, st->ns.ino_limit);
	put_u64(&b, st->ns.rr_next);
	put_u64(&b, st->sessions.next_id);
	put_u64(&b, st->map.epoch);
	put_u32(&b, st->map.n_iods);
	for (uint32_t i = 0; i < st->map.n_iods; i++) {
		const struct mgr_map_iod *mi = &st->map.iods[i];

		put_u32(&b, mi->id);
		put_u32(&b, mi->state);
		put_bytes(&b, mi->uuid, mi->uuid_len);
		put_u64(&b, mi->incarnation);
		put_u8(&b, mi->needs_resync);
	}

	inodes = mgr_itab_sorted(&st->ns.inodes, &n);
	if (!inodes)
		goto nomem;
	put_u64(&b, n);
	for (size_t i = 0; i < n; i++)
		put_inode(&b, inodes[i]);
	free(inodes);

	keys = mgr_hmap_sorted_keys(&st->ns.pdel, &n);
	if (!keys)
		goto nomem;
	put_u64(&b, n);
	for (size_t i = 0; i < n; i++) {
		const struct mgr_pdel *pd = tw_hmap_get(&st->ns.pdel, keys[i]);

		put_u64(&b, pd->ino);
		put_layout(&b, &pd->layout);
	}
	free(keys);

	keys = mgr_hmap_sorted_keys(&st->sessions.by_id, &n);
	if (!keys)
		goto nomem;
	put_u64(&b, n);
	for (size_t i = 0; i < n; i++) {
		const struct mgr_session *s =
			mgr_session_get(&st->sessions, keys[i]);
		uint64_t *fhs;
		size_t nf;

		put_u64(&b, s->id);
		put_bytes(&b, s->secret, s->has_secret ?
			  MGR_SESSION_SECRET_LEN : 0);
		put_str(&b, s->ident[0] ? s->ident : NULL);
		put_u64(&b, s->next_fh);
		fhs = mgr_hmap_sorted_keys(&s->handles, &nf);
		if (!fhs) {
			free(keys);
			goto nomem;
		}
		put_u32(&b, (uint32_t)nf);
		for (size_t j = 0; j < nf; j++) {
			const struct mgr_handle *h =
				mgr_session_handle(s, fhs[j]);

			put_u64(&b, h->fh);
			put_u64(&b, h->ino);
			put_u32(&b, h->flags);
		}
		free(fhs);
		put_u32(&b, s->nreplies);
		for (const struct mgr_reply *r = s->rhead; r; r = r->next) {
			put_u64(&b, r->seq);
			put_u32(&b, (uint32_t)r->status);
			put_u16(&b, r->type);
			put_bytes(&b, r->data, r->len);
		}
	}
	free(keys);
	{
		uint32_t nj = 0;

		for (uint32_t i = 0; i < TW_MAX_IODS; i++)
			nj += rjob_kept(&st->rjobs[i]);
		put_u32(&b, nj);
		for (uint32_t i = 0; i < TW_MAX_IODS; i++) {
			uint8_t rb[MGR_RJOB_BYTES_MAX];

			if (!rjob_kept(&st->rjobs[i]))
				continue;
			put_u32(&b, i + 1);
			put_bytes(&b, rb, (uint32_t)mgr_rjob_pack(&st->rjobs[i],
								  rb));
		}
	}
	keys = mgr_hmap_sorted_keys(&st->ns.psize, &n);
	if (!keys)
		goto nomem;
	put_u64(&b, n);
	for (size_t i = 0; i < n; i++)
		put_u64(&b, keys[i]);
	free(keys);
	put_u64(&b, st->sessions.fence_gen);
	put_u32(&b, st->sessions.n_fenced);
	for (uint32_t i = 0; i < st->sessions.n_fenced; i++)
		put_u64(&b, st->sessions.fenced[i]);
	put_u32(&b, tw_crc32c(0, b.p, b.len));
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	*len = b.len;
	return 0;
nomem:
	free(b.p);
	return -ENOMEM;
}

static int get_inode(struct rbuf *b, struct mgr_ns *ns)
{
	struct mgr_inode *in;
	uint64_t ino = get_u64(b);
	uint32_t mode = get_u32(b), nx, open_count, rdev;
	int rc = -EBADMSG;

	/* A number twice: mgr_itab_put's -EEXIST below. */
	if (b->err || ino == 0)
		return -EBADMSG;
	in = mgr_inode_new(ino, mode);
	if (!in)
		return -ENOMEM;
	in->nlink = get_u32(b);
	in->uid = get_u32(b);
	in->gid = get_u32(b);
	rdev = get_u32(b);
	if (S_ISCHR(mode) || S_ISBLK(mode))
		in->rdev = rdev;
	in->size = get_u64(b);
	in->trunc_gen = get_u64(b);
	in->data_version = get_u64(b);
	get_time(b, &in->atime);
	get_time(b, &in->mtime);
	get_time(b, &in->ctime);
	in->parent = get_u64(b);
	open_count = get_u32(b);
	if (open_count > MGR_OPEN_COUNT_MAX)
		goto fail;
	in->open_count = open_count;
	in->orphan = get_u8(b) != 0;
	if (S_ISREG(mode)) {
		struct r0_layout l;

		get_layout(b, &l);
		if (b->err)
			goto fail;
		rc = mgr_inode_set_layout(in, &l);
		if (rc < 0)
			goto fail;
		rc = -EBADMSG;
		for (uint32_t k = 0; k < l.stripe_count; k++)
			if (mgr_inode_set_blocks(in, k, get_u64(b)) < 0) {
				rc = -ENOMEM;
				goto fail;
			}
	} else if (S_ISLNK(mode)) {
		const char *t = get_str(b, MGR_SYMLINK_MAX);

		if (!t || !(in->target = strdup(t)))
			goto fail;
	} else if (S_ISDIR(mode)) {
		uint64_t next_cookie;
		uint32_t count;

		in->dir = mgr_dir_new(get_u64(b));
		if (!in->dir) {
			rc = -ENOMEM;
			goto fail;
		}
		next_cookie = get_u64(b);
		in->dir->has_policy = get_u8(b);
		in->dir->pol_stripe_size = get_u32(b);
		in->dir->pol_stripe_count = get_u32(b);
		in->dir->pol_first = (int32_t)get_u32(b);
		count = get_u32(b);
		/* Sized once; an entry takes at least 22 bytes of snapshot,
		 * which bounds a corrupt count. */
		rc = mgr_dir_reserve(in->dir, (uint32_t)TW_MIN(
			(size_t)count, (b->len - b->pos) / 22));
		if (rc < 0)
			goto fail;
		for (uint32_t i = 0; i < count && !b->err; i++) {
			uint64_t cookie = get_u64(b), eino = get_u64(b);
			const char *name = get_str(b, MGR_NAME_MAX);

			if (!name || eino == 0)
				goto fail;
			rc = mgr_dir_restore(in->dir, name, eino, cookie);
			if (rc < 0)
				goto fail;
		}
		rc = -EBADMSG;
		if (next_cookie < in->dir->next_cookie)
			goto fail;
		in->dir->next_cookie = next_cookie;
	}
	nx = get_u32(b);
	for (uint32_t i = 0; i < nx && !b->err; i++) {
		const char *name = get_str(b, MGR_XATTR_NAME_MAX);
		uint32_t vl;
		const void *v = get_bytes(b, &vl, MGR_XATTR_SIZE_MAX);

		if (b->err || !name)
			goto fail;
		rc = mgr_inode_add_xattr(in, name, v, vl);
		if (rc < 0)
			goto fail;
	}
	if (b->err)
		goto fail;
	if (in->orphan)
		ns->n_orphans++;
	rc = mgr_itab_put(&ns->inodes, in);
	if (rc == -EEXIST)
		rc = -EBADMSG;
	if (rc < 0)
		goto fail;
	return 0;
fail:
	mgr_inode_free(in);
	return rc < 0 ? rc : -EBADMSG;
}

int mgr_state_decode(struct mgr_state *st, const void *buf, size_t len)
{
	struct rbuf b = { .p = buf, .len = len };
	struct mgr_ns *ns = &st->ns;
	uint64_t n, next_ino, ino_limit, rr_next, next_sid, epoch;
	uint32_t n_iods, version;
	int rc = -EBADMSG;

	if (len < 12 || tw_crc32c(0, buf, len - 4) !=
	    (uint32_t)(((const uint8_t *)buf)[len - 4] |
		       ((const uint8_t *)buf)[len - 3] << 8 |
		       ((const uint8_t *)buf)[len - 2] << 16 |
		       (uint32_t)((const uint8_t *)buf)[len - 1] << 24))
		return -EBADMSG;
	b.len = len - 4;
	if (get_u32(&b) != SNAP_MAGIC)
		return -EBADMSG;
	version = get_u32(&b);
	if (version < 1 || version > SNAP_VERSION)
		return -EBADMSG;
	next_ino = get_u64(&b);
	ino_limit = get_u64(&b);
	rr_next = get_u64(&b);
	next_sid = get_u64(&b);
	epoch = get_u64(&b);
	n_iods = get_u32(&b);
	if (b.err || n_iods > TW_MAX_IODS)
		return -EBADMSG;
	for (uint32_t i = 0; i < n_iods; i++) {
		struct mgr_op op = { .type = MGR_OP_MAP_IOD };

		op.ino = get_u32(&b);
		op.iod_state = get_u32(&b);
		op.uuid = get_bytes(&b, &op.uuid_len, MGR_UUID_MAX);
		op.incarnation = get_u64(&b);
		op.needs_resync = get_u8(&b);
		if (b.err)
			return -EBADMSG;
		rc = apply_map_iod(st, &op);
		if (rc < 0)
			return rc;
	}
	st->map.epoch = epoch;

	/* Replace the namespace (the fresh one holds only the root). */
	{
		uint32_t g = ns->n_groups, ss = ns->def_stripe_size,
			 sc = ns->def_stripe_count;
		void (*cb)(void *, struct mgr_pdel *) = ns->on_pdel;
		void *cb_arg = ns->on_pdel_arg;

		mgr_ns_free(ns);
		mgr_itab_init(&ns->inodes);
		tw_hmap_init(&ns->pdel);
		tw_hmap_init(&ns->psize);
		ns->n_groups = g;
		ns->def_stripe_size = ss;
		ns->def_stripe_count = sc;
		ns->on_pdel = cb;
		ns->on_pdel_arg = cb_arg;
	}
	ns->next_ino = next_ino;
	ns->ino_limit = ino_limit;
	ns->rr_next = rr_next;
	n = get_u64(&b);
	/* The table sized once (no rehash while loading); an inode takes at
	 * least 64 bytes of snapshot, which bounds a corrupt count. */
	rc = mgr_itab_reserve(&ns->inodes, TW_MIN(n, (b.len - b.pos) / 64));
	if (rc < 0)
		return rc;
	for (uint64_t i = 0; i < n && !b.err; i++) {
		rc = get_inode(&b, ns);
		if (rc < 0)
			return rc;
	}
	if (b.err || !mgr_ns_get(ns, MGR_ROOT_INO))
		return -EBADMSG;
	n = get_u64(&b);
	for (uint64_t i = 0; i < n && !b.err; i++) {
		struct mgr_pdel *pd = calloc(1, sizeof(*pd));

		if (!pd)
			return -ENOMEM;
		pd->ino = get_u64(&b);
		get_layout(&b, &pd->layout);
		if (b.err || pd->ino == 0 ||
		    tw_hmap_put(&ns->pdel, pd->ino, pd) < 0) {
			free(pd);
			return -EBADMSG;
		}
	}

	mgr_sessions_free(&st->sessions);
	mgr_sessions_init(&st->sessions);
	n = get_u64(&b);
	for (uint64_t i = 0; i < n && !b.err; i++) {
		struct mgr_session *s = mgr_session_create(&st->sessions,
							   get_u64(&b));
		uint32_t nh, nr;

		if (!s)
			return -EBADMSG;
		if (version >= 5) {
			uint32_t sl;
			const void *sec = get_bytes(&b, &sl,
						    MGR_SESSION_SECRET_LEN);

			if (sl != 0 && sl != MGR_SESSION_SECRET_LEN)
				return -EBADMSG;
			if (sl) {
				memcpy(s->secret, sec, sl);
				s->has_secret = true;
			}
		}
		if (version >= 6) {
			const char *id = get_str(&b, TW_CLIENT_NAME_MAX - 1);

			if (id)
				snprintf(s->ident, sizeof(s->ident), "%s", id);
		}
		s->next_fh = get_u64(&b);
		nh = get_u32(&b);
		for (uint32_t j = 0; j < nh && !b.err; j++) {
			uint64_t fh = get_u64(&b), ino = get_u64(&b);
			uint32_t fl = get_u32(&b);

			if (b.err || mgr_session_add_handle(s, fh, ino, fl) < 0)
				return -EBADMSG;
		}
		nr = get_u32(&b);
		for (uint32_t j = 0; j < nr && !b.err; j++) {
			uint64_t seq = get_u64(&b);
			int32_t status = (int32_t)get_u32(&b);
			uint16_t type = get_u16(&b);
			uint32_t dl;
			const void *d = get_bytes(&b, &dl, JNL_REC_MAX);

			if (b.err || mgr_session_cache(s, seq, 0, type, status,
						       d, dl) < 0)
				return -EBADMSG;
		}
	}
	if (next_sid > st->sessions.next_id)
		st->sessions.next_id = next_sid;
	memset(st->rjobs, 0, sizeof(st->rjobs));
	n = version >= 2 ? get_u32(&b) : 0;
	for (uint64_t i = 0; i < n && !b.err; i++) {
		uint32_t id = get_u32(&b), rl;
		const void *r = get_bytes(&b, &rl, MGR_RJOB_BYTES_MAX);

		if (b.err || id == 0 || id > TW_MAX_IODS ||
		    mgr_rjob_unpack(r, rl, &st->rjobs[id - 1]) < 0)
			return -EBADMSG;
	}
	n = version >= 3 ? get_u64(&b) : 0;
	for (uint64_t i = 0; i < n && !b.err; i++) {
		rc = mgr_ns_psize_add(ns, get_u64(&b));
		if (rc < 0)
			return rc;
	}
	if (version >= 4) {
		uint64_t gen = get_u64(&b);

		n = get_u32(&b);
		if (b.err || n > MGR_FENCE_MAX || n > gen)
			return -EBADMSG;
		for (uint64_t i = 0; i < n && !b.err; i++)
			if ((st->sessions.fenced[i] = get_u64(&b)) == 0 &&
			    !b.err)
				return -EBADMSG;
		st->sessions.n_fenced = (uint32_t)n;
		st->sessions.fence_gen = gen;
	}
	if (b.err || b.pos != b.len)
		return -EBADMSG;
	return 0;
}

/* --------------------------------------------------------------- journal */

static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int snap_cb(const void *buf, size_t len, void *arg)
{
	struct mgr_journal *j = arg;
	uint64_t t0 = tw_now_ms(), c0 = cpu_ms();
	int rc = mgr_state_decode(j->st, buf, len);

	/* Wall and CPU time: on a busy machine the two tell a slow start
	 * from a starved one. */
	if (rc < 0)
		tw_err("mgrd: snapshot does not decode: %d", rc);
	else
		tw_info("mgrd: snapshot of %zu bytes decoded in %llu ms "
			"(%llu ms of CPU): %zu inodes", len,
			(unsigned long long)(tw_now_ms() - t0),
			(unsigned long long)(cpu_ms() - c0),
			j->st->ns.inodes.count);
	return rc;
}

static int replay_cb(uint64_t seq, const void *buf, size_t len, void *arg)
{
	struct mgr_journal *j = arg;
	struct mgr_op op;
	int rc = mgr_op_decode(buf, len, &op);

	if (rc < 0) {
		tw_err("mgrd: journal record %llu does not decode",
		       (unsigned long long)seq);
		return rc;
	}
	if (op.status >= 0) {
		rc = mgr_op_apply(j->st, &op);
		if (rc < 0) {
			/* The state and the log disagree: starting would
			 * serve a namespace that was never acknowledged. */
			tw_err("mgrd: journal record %llu (op %u) does not "
			       "apply: %d", (unsigned long long)seq, op.type,
			       rc);
			return -EUCLEAN;
		}
	}
	rc = mgr_op_cache(j->st, &op);
	j->records++;
	return rc;
}

int mgr_journal_open(struct mgr_journal *j, const char *dir,
		     struct mgr_state *st)
{
	return mgr_journal_open_flags(j, dir, st, 0);
}

int mgr_journal_open_flags(struct mgr_journal *j, const char *dir,
			   struct mgr_state *st, unsigned flags)
{
	const char *env = getenv("TWINFS_TEST_SNAPSHOT_BYTES");

	memset(j, 0, sizeof(*j));
	j->st = st;
	/* A test forces snapshots under load with a small log. */
	j->snapshot_bytes_cfg = env && *env ? strtoull(env, NULL, 10) :
			       SNAPSHOT_BYTES_DEFAULT;
	j->snapshot_bytes = j->snapshot_bytes_cfg;
	snprintf(j->bg_path, sizeof(j->bg_path), "%s/snapshot.tmp", dir);
	/* A snapshot child of a killed mgrd may still be exiting. */
	return jnl_rec_open_flags(dir, flags | JNL_REC_WAIT_LOCK, snap_cb,
				  replay_cb, j, &j->log);
}

int mgr_journal_commit(struct mgr_journal *j, const struct mgr_op *op)
{
	uint8_t *buf;
	size_t len;
	int rc = mgr_op_encode(op, &buf, &len);

	if (rc < 0)
		return rc;
	rc = mgr_journal_append(j, buf, len, op);
	free(buf);
	return rc;
}

/* ------------------------------------------- the periodic snapshot
 *
 * Written by a child (snapfork.c) as of the seq of the last record
 * appended at the fork, while this process serves and appends to the
 * log's next file (journal.h jnl_rec_snap_begin; docs/ARCHITECTURE.md
 * "Record mode (mgrd)"). */

/* In the child: the state it encoded, as the log's snapshot.tmp. */
static int bg_write(const uint8_t *buf, size_t len, void *arg)
{
	struct mgr_journal *j = arg;

	return jnl_rec_snap_write(j->log, j->bg_seq, buf, len);
}

/* Try again one interval (snapshot_bytes_cfg) of log later, at most
 * 16 MiB, not at every append (each try writes the whole state).  The
 * log keeps every record meanwhile: `journal` and `journal.next` stay
 * until a snapshot is installed (jnl_rec_snap_abandon), so a try that
 * failed, or whose child was killed, loses nothing. */
static void bg_retry_later(struct mgr_journal *j, const char *what, int rc)
{
	uint64_t more = TW_MIN(j->snapshot_bytes_cfg, SNAPSHOT_RETRY_BYTES);

	j->snapshot_bytes = jnl_rec_log_bytes(j->log) + more;
	tw_warn("mgrd: snapshot %s (%s); the log keeps every record and "
		"grows, the next try after %llu KiB more", what, strerror(-rc),
		(unsigned long long)(more >> 10));
}

static void bg_start(struct mgr_journal *j)
{
	uint64_t t0 = tw_now_ms();
	pid_t pid;
	int rc;

	if (mgr_snap_busy())
		return;   /* a join's or a backup's child: a later append */
	rc = jnl_rec_snap_begin(j->log, &j->bg_seq);
	if (rc < 0) {
		bg_retry_later(j, "could not start", rc);
		return;
	}
	pid = mgr_snap_fork_fn(j->st, bg_write, j, j->bg_path);
	if (pid < 0) {
		jnl_rec_snap_abandon(j->log);
		bg_retry_later(j, "could not fork", (int)pid);
		return;
	}
	j->bg_child = pid;
	j->bg_fork_ms = tw_now_ms();
	tw_info("mgrd: snapshot at seq %llu being written by process %d "
		"(fork took %llu ms)", (unsigned long long)j->bg_seq, (int)pid,
		(unsigned long long)(j->bg_fork_ms - t0));
}

void mgr_journal_poll(struct mgr_journal *j)
{
	int rc;

	if (j->bg_child <= 0)
		return;
	rc = mgr_snap_wait(j->bg_child);
	if (rc > 0)
		return;
	j->bg_child = 0;
	if (rc == 0)
		rc = jnl_rec_snap_finish(j->log);
	else
		jnl_rec_snap_abandon(j->log);
	if (rc < 0) {
		/* A child that ran too long was killed: not a failure of
		 * the log, and snapfork.c said why. */
		bg_retry_later(j, rc == -ETIMEDOUT ? "not written in time"
						   : "failed", rc);
		return;
	}
	j->snap_len = jnl_rec_snap_len(j->log);
	j->snapshot_bytes = j->snapshot_bytes_cfg;
	j->snapshots++;
	tw_info("mgrd: snapshot at seq %llu installed (%llu bytes, written "
		"in %llu ms)", (unsigned long long)j->bg_seq,
		(unsigned long long)j->snap_len,
		(unsigned long long)(tw_now_ms() - j->bg_fork_ms));
}

/* Gives up a snapshot being written in the background (its child
 * killed): the log keeps both files until the next one. */
static void bg_stop(struct mgr_journal *j)
{
	if (j->bg_child <= 0)
		return;
	mgr_snap_kill(j->bg_child);
	j->bg_child = 0;
	jnl_rec_snap_abandon(j->log);
}

int mgr_journal_append(struct mgr_journal *j, const void *buf, size_t len,
		       const struct mgr_op *op)
{
	uint64_t seq;
	int rc = jnl_rec_append(j->log, buf, len, &seq);

	if (rc < 0)
		return rc;
	j->dirty = true;
	j->records++;
	/* Closed: the standby gets the same bytes (repl.c). */
	if (j->on_record)
		j->on_record(j->on_record_arg, seq, buf, len);
	rc = mgr_op_cache(j->st, op);
	if (rc < 0)
		return rc;
	if (j->bg_child > 0)
		mgr_journal_poll(j);
	else if (jnl_rec_log_bytes(j->log) > j->snapshot_bytes)
		bg_start(j);
	return 0;
}

int mgr_journal_install(struct mgr_journal *j, const void *snap,
			size_t len)
{
	return mgr_journal_install_at(j, snap, len, jnl_rec_last_seq(j->log));
}

int mgr_journal_install_at(struct mgr_journal *j, const void *snap,
			   size_t len, uint64_t seq)
{
	int rc;

	bg_stop(j);
	rc = jnl_rec_snapshot_at(j->log, snap, len, seq);
	if (rc == 0) {
		j->dirty = false;
		j->snap_len = len;
		j->snapshot_bytes = j->snapshot_bytes_cfg;
		j->snapshots++;
	}
	return rc;
}

int mgr_journal_sync(struct mgr_journal *j)
{
	int rc;

	/* A sync still running elsewhere may cover the records, but its
	 * caller is not told when: this one syncs on its own. */
	if (!j->dirty && !j->bg_syncing)
		return 0;
	rc = jnl_rec_sync(j->log);
	if (rc == 0)
		j->dirty = false;
	return rc;
}

int mgr_journal_sync_start(struct mgr_journal *j, struct jnl_rec_bgsync *b)
{
	int rc;

	assert(!j->bg_syncing);
	if (!j->dirty)
		return 0;
	rc = jnl_rec_sync_start(j->log, b);
	if (rc < 0)
		return rc;
	j->dirty = false;
	j->bg_syncing = rc == 1;
	return rc;
}

int mgr_journal_sync_done(struct mgr_journal *j, struct jnl_rec_bgsync *b)
{
	assert(j->bg_syncing);
	j->bg_syncing = false;
	return jnl_rec_sync_done(j->log, b);
}

int mgr_journal_snapshot(struct mgr_journal *j)
{
	uint8_t *buf;
	size_t len;
	int rc = mgr_state_encode(j->st, &buf, &len);

	if (rc < 0)
		return rc;
	rc = mgr_journal_install(j, buf, len);
	free(buf);
	/* The encoding's buffer grew by realloc through the heap, and what
	 * it freed there stays resident between long-lived objects: a
	 * namespace made through a mount kept about 70 bytes an inode more
	 * than its objects (docs/ARCHITECTURE.md "Namespace": memory per
	 * inode).  Give those pages back; a snapshot is rare. */
	malloc_trim(0);
	return rc;
}

uint64_t mgr_journal_last_seq(const struct mgr_journal *j)
{
	return jnl_rec_last_seq(j->log);
}

uint64_t mgr_journal_synced_seq(const struct mgr_journal *j)
{
	return jnl_rec_synced_seq(j->log);
}

uint64_t mgr_journal_log_bytes(const struct mgr_journal *j)
{
	return jnl_rec_log_bytes(j->log);
}

void mgr_journal_close(struct mgr_journal *j)
{
	if (j->log)
		bg_stop(j);
	if (j->log)
		jnl_rec_close(j->log);
	j->log = NULL;
}

/* ----------------------------------------------------------------- state */

int mgr_state_init(struct mgr_state *st, const struct tw_conf *conf,
		   const struct mgr_time *now)
{
	memset(st, 0, sizeof(*st));
	mgr_map_init(&st->map, conf);
	mgr_sessions_init(&st->sessions);
	return mgr_ns_init(&st->ns, (uint32_t)conf->n_groups,
			   conf->stripe_size, conf->stripe_count, now);
}

void mgr_state_free(struct mgr_state *st)
{
	mgr_ns_free(&st->ns);
	mgr_sessions_free(&st->sessions);
}
