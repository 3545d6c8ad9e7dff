/* heal.c - self-healing reads (docs/ARCHITECTURE.md "Integrity").
 *
 * A READ whose home blocks do not match their checksums (store_csum.c,
 * -EBADMSG from iod_store_read) is healed block by block.  The range,
 * widened to whole 4 KiB blocks, is asked from the twin over the twin
 * connection (the twin checks its own copy; the reply's data is checked
 * against the CRC it carries).  If the twin cannot give the whole range
 * (a bad block of its own somewhere in it), each of our bad blocks is
 * asked again alone.  When the twin's answers are in, the range is read
 * here again without failing on bad blocks and each block is served from
 * where it is good: ours when it checks (or was written meanwhile: it is
 * journal-resident or matches again), else the twin's.  Every block of
 * ours still failing with a good copy from the twin is written again
 * from it through our journal; a block written meanwhile checks, so a
 * heal never overwrites a newer write (store_csum_verify_block is 0).
 *
 * Both copies of a block bad (or no readable twin): EIO for a request
 * that covers that block, and only for it (a read of its neighbours is
 * served), and an error log.  Never wrong bytes.
 *
 * Healing in turn, without bouncing: a twin's READ of several blocks that
 * fails here (a bad block of ours in it) gets -EBADMSG, and each of our
 * bad blocks in it is then healed from the twin with a READ of that one
 * block.  A twin's READ of one block never heals in turn.  Only a heal on
 * behalf of a client sends a READ of several blocks, so a chain is at
 * most: client READ here, several-block READ there, one-block READs back
 * here.  That way a read across blocks bad on different twins heals both
 * copies.  The scrub heals one block at a time.
 *
 * Every finding is logged with the subfile (ino, column), offset and iod,
 * counted (metrics.c) and reported to mgrd, which logs the file's path
 * (mgr.c iod_mgr_report_bad_block).
 */
#include "iod_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HEAL_BS 4096u

struct heal {
	struct iod *d;
	struct wire_conn *c;       /* NULL: no client waits (scrub, twin) */
	struct wire_hdr hdr;       /* the client's request */
	uint64_t ino;
	uint32_t column;
	uint64_t off, len;         /* what the client asked */
	uint64_t aoff, alen;       /* ... widened to blocks */
	uint32_t nblk;             /* blocks in [aoff, aoff + alen) */
	uint8_t *twin;             /* alen bytes: the twin's copy ... */
	uint32_t *twin_len;        /* ... of each block: bytes held, or
	                            * UINT32_MAX when not held */
	uint64_t twin_size;        /* the twin's subfile size */
	int why;                   /* the twin's first error */
	int pending;               /* twin READs in flight */
};

/* One block's healing write. */
struct rewrite {
	struct iod *d;
	uint64_t ino;
	uint32_t column;
	uint64_t off;
};

static void heal_free(struct heal *h)
{
	if (h->c)
		wire_conn_unref(h->c);
	free(h->twin);
	free(h->twin_len);
	free(h);
}

static void rewrite_done(void *arg, int rc)
{
	struct rewrite *w = arg;
	struct iod_csum_stats *cs = iod_store_csum_stats(w->d->store);

	if (rc == 0) {
		cs->healed++;
		tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": subfile ino %" PRIu64
			  " column %" PRIu32 " block at %" PRIu64 ": copy "
			  "rewritten from iod %" PRIu32 "'s", w->d->id, w->ino,
			  w->column, w->off, w->d->twin_id);
	} else {
		tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %" PRIu64
			  " column %" PRIu32 ": rewriting the bad block at %"
			  PRIu64 " failed: %s", w->d->id, w->ino, w->column,
			  w->off, strerror(-rc));
	}
	free(w);
}

/* Rewrite block k (len bytes from the twin's copy) when it still fails
 * here: a whole block, or the last one when both sizes agree. */
static void repair_block(struct heal *h, uint32_t k,
			 const struct iod_sub_stat *st)
{
	struct iod *d = h->d;
	uint64_t b = h->aoff + (uint64_t)k * HEAL_BS;
	uint32_t len = h->twin_len[k];
	struct rewrite *w;

	if (len < HEAL_BS && (b + len != h->twin_size || h->twin_size != st->size))
		return;
	w = calloc(1, sizeof(*w));
	if (!w)
		return;
	*w = (struct rewrite){ d, h->ino, h->column, b };
	if (iod_store_write(d->store, h->ino, h->column, b,
			    h->twin + (uint64_t)k * HEAL_BS, len, NULL,
			    st->trunc_gen,
			    NULL, false, NULL, rewrite_done, w) < 0) {
		tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %" PRIu64
			  " column %" PRIu32 ": cannot rewrite the bad block "
			  "at %" PRIu64, d->id, h->ino, h->column, b);
		free(w);
	}
}

static void both_bad(struct heal *h, uint64_t b)
{
	struct iod_csum_stats *cs = iod_store_csum_stats(h->d->store);

	cs->unhealed++;
	tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %" PRIu64
		  " column %" PRIu32 " block at %" PRIu64 " fails its "
		  "checksum here and cannot be read from twin iod %" PRIu32
		  " (%s): reads of it get EIO", h->d->id, h->ino, h->column, b,
		  h->d->twin_id, strerror(h->why ? -h->why : EBADMSG));
	iod_mgr_report_bad_block(h->d, h->ino, h->column, b, false);
}

static void reply_status(struct heal *h, int rc)
{
	if (h->c && wire_conn_is_open(h->c))
		wire_reply(h->c, &h->hdr, rc, NULL, NULL, 0);
}

/* Every twin answer is in: serve each block from where it is good, EIO
 * when the client's range covers a block good nowhere, repair ours. */
static void heal_finish(struct heal *h)
{
	struct iod *d = h->d;
	Twinfs__ReadReply out = TWINFS__READ_REPLY__INIT;
	struct iod_sub_stat st = { 0 };
	uint8_t *buf = NULL;
	bool eio = false;
	struct iovec v;
	uint64_t lo, n;
	long got;

	got = iod_store_read_unchecked(d->store, h->ino, h->column, h->aoff,
				       (size_t)h->alen, &buf, &st);
	if (got < 0) {
		reply_status(h, (int)got);
		goto out;
	}
	for (uint32_t k = 0; (uint64_t)k * HEAL_BS < (uint64_t)got; k++) {
		uint64_t b = h->aoff + (uint64_t)k * HEAL_BS;
		uint64_t blen = TW_MIN((uint64_t)HEAL_BS, (uint64_t)got - k * HEAL_BS);

		if (iod_store_csum_verify(d->store, h->ino, h->column,
					  b / HEAL_BS) != -EBADMSG)
			continue;
		if (h->twin_len[k] != UINT32_MAX && h->twin_len[k] >= blen) {
			memcpy(buf + (uint64_t)k * HEAL_BS,
			       h->twin + (uint64_t)k * HEAL_BS, (size_t)blen);
			iod_mgr_report_bad_block(d, h->ino, h->column, b, true);
			repair_block(h, k, &st);
			continue;
		}
		both_bad(h, b);
		if (b < h->off + h->len && b + HEAL_BS > h->off)
			eio = true;
	}
	/* The twin said its copy is bad too: final (-EUCLEAN, the client
	 * does not retry it); no readable twin: -EIO, a failover's error. */
	if (eio) {
		reply_status(h, h->why == -EBADMSG ? -EUCLEAN : -EIO);
		goto out;
	}
	if (!h->c || !wire_conn_is_open(h->c))
		goto out;
	/* the client's part of it */
	lo = h->off - h->aoff;
	n = (uint64_t)got > lo ? TW_MIN(h->len, (uint64_t)got - lo) : 0;
	out.sub_size = st.size;
	out.data_crc = tw_crc32c(0, n ? buf + lo : (const uint8_t *)"",
				 (size_t)n);
	out.has_crc = true;
	v.iov_base = n ? buf + lo : NULL;
	v.iov_len = (size_t)n;
	wire_reply(h->c, &h->hdr, 0, &out.base, &v, n ? 1 : 0);
out:
	free(buf);
	heal_free(h);
}

/* A twin READ of [aoff + k * HEAL_BS, +len) answered: keep the blocks it
 * holds whole (or up to the twin's end). */
static int take_reply(struct heal *h, uint32_t k, uint64_t len, int status,
		      struct wire_msg *reply)
{
	const Twinfs__ReadReply *rr;

	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor !=
			    &twinfs__read_reply__descriptor ||
			    reply->data_len > len))
		status = -EPROTO;
	if (status == 0) {
		rr = (const Twinfs__ReadReply *)reply->body;
		if (rr->has_crc &&
		    tw_crc32c(0, reply->data, reply->data_len) != rr->data_crc)
			status = -EBADMSG;   /* damaged on the way */
	}
	if (status < 0)
		return status;
	rr = (const Twinfs__ReadReply *)reply->body;
	h->twin_size = rr->sub_size;
	if (reply->data_len)
		memcpy(h->twin + (uint64_t)k * HEAL_BS, reply->data,
		       reply->data_len);
	for (uint64_t p = 0; p < reply->data_len; p += HEAL_BS, k++)
		h->twin_len[k] = (uint32_t)TW_MIN((uint64_t)HEAL_BS,
						  reply->data_len - p);
	return 0;
}

struct blk_call {
	struct heal *h;
	uint32_t k;
};

static void twin_block_done(int status, struct wire_msg *reply, void *arg)
{
	struct blk_call *bc = arg;
	struct heal *h = bc->h;

	status = take_reply(h, bc->k, HEAL_BS, status, reply);
	if (status < 0 && h->why == 0)
		h->why = status;
	if (reply)
		wire_msg_free(reply);
	free(bc);
	if (--h->pending == 0)
		heal_finish(h);
}

static int twin_read(struct heal *h, uint64_t off, uint64_t len,
		     wire_reply_cb cb, void *arg)
{
	Twinfs__Read q = TWINFS__READ__INIT;
	struct iod *d = h->d;

	if (!d->twin_peer || !iod_twin_peer_readable(d))
		return -ENOTCONN;
	q.ino = h->ino;
	q.column = h->column;
	q.offset = off;
	q.length = (uint32_t)len;
	q.epoch = d->map.epoch;
	return wire_call(d->twin_peer, TWINFS__MSG_TYPE__MSG_READ, &q.base,
			 NULL, 0, d->conf->request_timeout_ms / 2, cb, arg);
}

/* Each block of ours that fails, alone from the twin; then heal_finish. */
static void ask_blocks(struct heal *h)
{
	h->pending = 1;            /* held until every READ is sent */
	for (uint32_t k = 0; k < h->nblk; k++) {
		uint64_t b = h->aoff + (uint64_t)k * HEAL_BS;
		struct blk_call *bc;
		int rc;

		if (h->twin_len[k] != UINT32_MAX ||
		    iod_store_csum_verify(h->d->store, h->ino, h->column,
					  b / HEAL_BS) != -EBADMSG)
			continue;
		bc = malloc(sizeof(*bc));
		if (!bc)
			break;
		bc->h = h;
		bc->k = k;
		rc = twin_read(h, b, HEAL_BS, twin_block_done, bc);
		if (rc < 0) {
			free(bc);
			if (h->why == 0)
				h->why = rc;
			break;
		}
		h->pending++;
	}
	if (--h->pending == 0)
		heal_finish(h);
}

static void twin_range_done(int status, struct wire_msg *reply, void *arg)
{
	struct heal *h = arg;

	h->pending--;
	status = take_reply(h, 0, h->alen, status, reply);
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		h->why = status;
		if (h->nblk > 1) {
			/* a bad block of the twin's own in the range:
			 * ours one by one */
			ask_blocks(h);
			return;
		}
	}
	heal_finish(h);
}

/* Heal [off, off + len) of (ino, column) from the twin; c (may be NULL)
 * gets the client's reply to hdr. */
static void heal_start(struct iod *d, struct wire_conn *c,
		       const struct wire_hdr *hdr, uint64_t ino,
		       uint32_t column, uint64_t off, uint64_t len)
{
	struct heal *h;
	uint64_t end;
	int rc;

	h = calloc(1, sizeof(*h));
	if (!h) {
		if (c)
			wire_reply(c, hdr, -EIO, NULL, NULL, 0);
		return;
	}
	h->d = d;
	h->c = c;
	if (c) {
		wire_conn_ref(c);
		h->hdr = *hdr;
	}
	h->ino = ino;
	h->column = column;
	h->off = off;
	h->len = len;
	h->aoff = off / HEAL_BS * HEAL_BS;
	end = (off + len + HEAL_BS - 1) / HEAL_BS * HEAL_BS;
	h->alen = TW_MAX(end - h->aoff, (uint64_t)HEAL_BS);
	h->nblk = (uint32_t)(h->alen / HEAL_BS);
	h->twin = malloc(h->alen);
	h->twin_len = malloc(h->nblk * sizeof(*h->twin_len));
	if (!h->twin || !h->twin_len) {
		reply_status(h, -EIO);
		heal_free(h);
		return;
	}
	memset(h->twin_len, 0xff, h->nblk * sizeof(*h->twin_len));
	if (h->alen > WIRE_MAX_DATA) {
		ask_blocks(h);
		return;
	}
	rc = twin_read(h, h->aoff, h->alen, twin_range_done, h);
	if (rc < 0) {
		h->why = rc;
		heal_finish(h);
		return;
	}
	h->pending = 1;
}

/* The blocks of ours in [off, off + len) that fail, each healed alone. */
static void heal_each(struct iod *d, uint64_t ino, uint32_t column,
		      uint64_t off, uint64_t len)
{
	for (uint64_t b = off / HEAL_BS; b * HEAL_BS < off + len; b++)
		if (iod_store_csum_verify(d->store, ino, column, b) == -EBADMSG)
			heal_start(d, NULL, NULL, ino, column, b * HEAL_BS,
				   HEAL_BS);
}

void iod_heal_read(struct iod *d, struct wire_conn *c, const struct wire_msg *m,
		   bool from_twin)
{
	const Twinfs__Read *r = (const Twinfs__Read *)m->body;
	struct iod_csum_stats *cs = iod_store_csum_stats(d->store);
	uint64_t first = r->offset / HEAL_BS;
	uint64_t last = r->length ? (r->offset + r->length - 1) / HEAL_BS : first;

	cs->read_mismatches++;
	tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": subfile ino %" PRIu64
		  " column %" PRIu32 ": block at %" PRIu64 " fails its "
		  "checksum%s", d->id, r->ino, r->column, cs->bad_off,
		  !from_twin ? "; reading it from the twin"
		  : last > first ? " (a read for the twin: healed alone)"
				 : " (a read for the twin: not healed from it)");
	if (!from_twin) {
		heal_start(d, c, &m->hdr, r->ino, r->column, r->offset,
			   r->length);
		return;
	}
	/* the twin asks our blocks one by one next (heal.c header) */
	iod_reply_status(c, m, -EBADMSG);
	if (last > first)
		heal_each(d, r->ino, r->column, r->offset, r->length);
}

void iod_heal_range(struct iod *d, uint64_t ino, uint32_t column,
		    uint64_t off, uint64_t len)
{
	struct iod_csum_stats *cs = iod_store_csum_stats(d->store);

	tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": scrub: subfile ino %" PRIu64
		  " column %" PRIu32 ": block at %" PRIu64 " fails its "
		  "checksum; reading it from the twin", d->id, ino, column,
		  cs->bad_off);
	heal_each(d, ino, column, off, len);
}
