/* heal.c - self-healing reads (docs/ARCHITECTURE.md "Integrity").
 *
 * A READ whose home blocks do not match their checksums (store_csum.c,
 * -EBADMSG from iod_store_read) is served from the twin: the same range,
 * widened to whole 4 KiB blocks, is read over the twin connection (the
 * twin checks its own copy; a twin's READ never heals in turn, so two bad
 * copies cannot bounce), the reply's data is checked against the CRC it
 * carries, the client gets its bytes from it, and every block of ours
 * that still fails its check when the reply arrives is written again
 * from the twin's copy through our journal.  A block written meanwhile is
 * journal-resident or matches again, so a heal never overwrites a newer
 * write (store_csum_verify_block is 0 for it).
 *
 * Both copies bad (or no readable twin): EIO for that request only, and
 * an error log; other ranges read fine.  Every finding is logged with the
 * subfile (ino, column), offset and iod, counted (metrics.c) and reported
 * to mgrd, which logs the file's path (mgr.c iod_mgr_report_bad_block).
 */
#include "iod_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HEAL_BS 4096u

struct heal {
	struct iod *d;
	struct wire_conn *c;
	struct wire_hdr hdr;       /* the client's request */
	uint64_t ino;
	uint32_t column;
	uint64_t off, len;         /* what the client asked */
	uint64_t aoff, alen;       /* ... widened to blocks */
	uint64_t bad_off;          /* the first bad block found */
};

static void heal_free(struct heal *h)
{
	if (h->c)
		wire_conn_unref(h->c);
	free(h);
}

/* One healing write done. */
static void rewrite_done(void *arg, int rc)
{
	struct heal *h = arg;
	struct iod_csum_stats *cs = iod_store_csum_stats(h->d->store);

	if (rc == 0) {
		cs->healed++;
		tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": subfile ino %" PRIu64
			  " column %" PRIu32 " block at %" PRIu64 ": copy "
			  "rewritten from iod %" PRIu32 "'s", h->d->id, h->ino,
			  h->column, h->bad_off, h->d->twin_id);
	} else {
		tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %" PRIu64
			  " column %" PRIu32 ": rewriting the bad block at %"
			  PRIu64 " failed: %s", h->d->id, h->ino, h->column,
			  h->bad_off, strerror(-rc));
	}
	free(h);
}

/* Rewrite, from the twin's data (at h->aoff, n bytes, subfile size
 * sub_size), every block of ours in that range that still fails. */
static void repair(struct heal *h, const uint8_t *data, uint64_t n,
		   uint64_t sub_size)
{
	struct iod *d = h->d;
	struct iod_sub_stat st;

	if (iod_store_stat(d->store, h->ino, h->column, &st) < 0 ||
	    !st.exists)
		return;
	for (uint64_t b = h->aoff; b < h->aoff + n; b += HEAL_BS) {
		uint64_t len = TW_MIN((uint64_t)HEAL_BS, h->aoff + n - b);
		struct heal *w;

		/* a whole block, or the last one up to both sizes */
		if (len < HEAL_BS && (b + len != sub_size || sub_size != st.size))
			continue;
		if (iod_store_csum_verify(d->store, h->ino, h->column,
					  b / HEAL_BS) != -EBADMSG)
			continue;
		w = calloc(1, sizeof(*w));
		if (!w)
			return;
		*w = *h;
		w->c = NULL;
		w->bad_off = b;
		if (iod_store_write(d->store, h->ino, h->column, b,
				    data + (b - h->aoff), (size_t)len,
				    st.trunc_gen, NULL, false, NULL,
				    rewrite_done, w) < 0) {
			tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %"
				  PRIu64 " column %" PRIu32 ": cannot rewrite "
				  "the bad block at %" PRIu64, d->id, h->ino,
				  h->column, b);
			free(w);
		}
	}
}

static void both_bad(struct heal *h, int why)
{
	struct iod_csum_stats *cs = iod_store_csum_stats(h->d->store);

	cs->unhealed++;
	tw_log_rl(TW_LOG_ERR, "iod %" PRIu32 ": subfile ino %" PRIu64
		  " column %" PRIu32 " block at %" PRIu64 " fails its "
		  "checksum here and cannot be read from twin iod %" PRIu32
		  " (%s): reads of [%" PRIu64 ", +%" PRIu64 ") get EIO",
		  h->d->id, h->ino, h->column, h->bad_off, h->d->twin_id,
		  strerror(-why), h->off, h->len);
	iod_mgr_report_bad_block(h->d, h->ino, h->column, h->bad_off, false);
	if (h->c && wire_conn_is_open(h->c))
		wire_reply(h->c, &h->hdr, -EIO, NULL, NULL, 0);
}

static void twin_read_done(int status, struct wire_msg *reply, void *arg)
{
	struct heal *h = arg;
	const Twinfs__ReadReply *rr;
	Twinfs__ReadReply out = TWINFS__READ_REPLY__INIT;
	struct iovec v;
	uint64_t lo, n;

	if (status == 0 && (!reply || !reply->body ||
			    reply->data_len > h->alen))
		status = -EPROTO;
	if (status == 0) {
		rr = (const Twinfs__ReadReply *)reply->body;
		if (rr->has_crc &&
		    tw_crc32c(0, reply->data, reply->data_len) != rr->data_crc)
			status = -EBADMSG;   /* damaged on the way */
	}
	if (status < 0) {
		both_bad(h, status);
		goto out;
	}
	rr = (const Twinfs__ReadReply *)reply->body;
	iod_mgr_report_bad_block(h->d, h->ino, h->column, h->bad_off, true);
	/* the client's part of it */
	lo = h->off - h->aoff;
	n = reply->data_len > lo ? TW_MIN(h->len, reply->data_len - lo) : 0;
	out.sub_size = rr->sub_size;
	out.data_crc = tw_crc32c(0, n ? reply->data + lo : (const uint8_t *)"",
				 (size_t)n);
	out.has_crc = true;
	v.iov_base = n ? reply->data + lo : NULL;
	v.iov_len = (size_t)n;
	if (h->c && wire_conn_is_open(h->c))
		wire_reply(h->c, &h->hdr, 0, &out.base, &v, n ? 1 : 0);
	repair(h, reply->data, reply->data_len, rr->sub_size);
out:
	if (reply)
		wire_msg_free(reply);
	heal_free(h);
}

/* Read [off, off + len) of (ino, column) from the twin; c (may be NULL:
 * the scrub) gets the client's reply to hdr. */
static void heal_start(struct iod *d, struct wire_conn *c,
		       const struct wire_hdr *hdr, uint64_t ino,
		       uint32_t column, uint64_t off, uint64_t len)
{
	Twinfs__Read q = TWINFS__READ__INIT;
	struct iod_csum_stats *cs = iod_store_csum_stats(d->store);
	struct heal *h;
	uint64_t end;

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
	h->bad_off = cs->bad_off;
	h->aoff = off / HEAL_BS * HEAL_BS;
	end = (off + len + HEAL_BS - 1) / HEAL_BS * HEAL_BS;
	h->alen = end - h->aoff;
	if (h->alen > WIRE_MAX_DATA) {
		h->aoff = off;
		h->alen = len;
	}
	if (!d->twin_peer || !iod_twin_peer_readable(d)) {
		both_bad(h, -ENOTCONN);
		heal_free(h);
		return;
	}
	q.ino = h->ino;
	q.column = h->column;
	q.offset = h->aoff;
	q.length = (uint32_t)h->alen;
	q.epoch = d->map.epoch;
	if (wire_call(d->twin_peer, TWINFS__MSG_TYPE__MSG_READ, &q.base, NULL,
		      0, d->conf->request_timeout_ms / 2, twin_read_done,
		      h) < 0) {
		both_bad(h, -ENOTCONN);
		heal_free(h);
	}
}

void iod_heal_read(struct iod *d, struct wire_conn *c, const struct wire_msg *m,
		   bool from_twin)
{
	const Twinfs__Read *r = (const Twinfs__Read *)m->body;
	struct iod_csum_stats *cs = iod_store_csum_stats(d->store);

	cs->read_mismatches++;
	tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": subfile ino %" PRIu64
		  " column %" PRIu32 ": block at %" PRIu64 " fails its "
		  "checksum%s", d->id, r->ino, r->column, cs->bad_off,
		  from_twin ? " (a read for the twin: not healed from it)"
			    : "; reading it from the twin");
	if (from_twin) {
		/* the twin heals from us: never back again (both bad) */
		iod_reply_status(c, m, -EBADMSG);
		return;
	}
	heal_start(d, c, &m->hdr, r->ino, r->column, r->offset, r->length);
}

void iod_heal_range(struct iod *d, uint64_t ino, uint32_t column,
		    uint64_t off, uint64_t len)
{
	struct iod_csum_stats *cs = iod_store_csum_stats(d->store);

	tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": scrub: subfile ino %" PRIu64
		  " column %" PRIu32 ": block at %" PRIu64 " fails its "
		  "checksum; reading it from the twin", d->id, ino, column,
		  cs->bad_off);
	heal_start(d, NULL, NULL, ino, column, off, len);
}
