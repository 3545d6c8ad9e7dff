/* resync.c - the source side of a twin's resync (docs/ARCHITECTURE.md
 * "Twins": resync and rebuild).
 *
 * mgrd sends RESYNC(target) to the readable twin of a group whose other
 * twin is `resyncing`.  While the target resyncs, this iod is the primary
 * of every subfile of the group (r1_write_primary: the only readable twin),
 * so every live WRITE/TRUNCATE/DELETE of the group is committed here and
 * forwarded to the target over d->twin_peer.  The copy uses that same peer
 * and the same forwarded messages, driven from this loop:
 *
 *   0. Count what there is to copy, for the progress, a few listing pages
 *      per pass of the loop (count_step): nothing is sent yet.
 *   1. Target-only subfiles: page through the target's SUBFILES listing;
 *      for each subfile this store does not hold, send a forwarded DELETE.
 *   2. For each subfile this store holds (iod_store_list, ascending):
 *        a. forwarded DELETE of it at the target, then a forwarded empty
 *           WRITE that recreates it with our layout and trunc_gen (so a
 *           target trunc_gen from writes we never saw cannot refuse us);
 *        b. chunk by chunk (1 MiB): read the chunk through the journal
 *           (iod_store_read, the newest acknowledged content, as reads
 *           see it) and, in the same synchronous call, send forwarded
 *           WRITEs for its non-zero 4 KiB blocks with the trunc_gen the
 *           read saw (sparseness is preserved: zero blocks stay holes);
 *           a stretch of holes here is not read at all ("Holes" below);
 *        c. at the end (a read past the end), a forwarded TRUNCATE to the
 *           exact size with the current trunc_gen.
 *   3. A forwarded FSYNC(ino 0) at the target, then the reply to mgrd,
 *      which applies R1_EV_RESYNC_DONE.
 *
 * Ordering argument: why copy and live writes cannot interleave wrongly
 * (docs/ARCHITECTURE.md "Twins") without a per-region lock: the primary's
 * order does that job.  Everything runs on this iod's single loop thread, and
 * twin.c's T1 makes the target apply forwarded messages in the order we queue
 * them on the one twin connection.  Each step above reads our store and queues
 * its messages in ONE synchronous call, so relative to any live mutation M
 * of the same subfile the step is either entirely before M (then M is
 * queued after it and the target applies M after the copy, exactly as we
 * did) or entirely after M (then the step read M's effect from our store
 * and its copy carries it, and M itself reached the target earlier and is
 * overwritten by the same or newer bytes).  So, byte by byte, the last
 * message the target applies for a byte is the one carrying the byte's
 * value in our store at that point of our order: after step 2 the target's
 * subfile equals ours, and live mutations keep it so.  Holes: a block we
 * skip because it reads as zeros was zero in the target too after step 2a,
 * unless a later forwarded mutation wrote it, which we applied first (then
 * we would not have read zeros, or a later mutation zeroed it on both).
 * Deletes of target-only subfiles are safe the same way: a subfile we do
 * not hold when we send the DELETE can only be created later by a
 * mutation we order after it.
 *
 * Incremental mode (Resync.full = false, mgrd's first attempt) copies
 * what the write-intent logs mark, as md does with its bitmap.  After step
 * 1 the source reads the target's marks (INTENTS, paged, on the twin
 * connection: they reflect every forward queued before) and merges them
 * with its own (intent_list.c).  Why the union covers every byte that may
 * differ: a write is marked in the same journal transaction that applies
 * it, on whichever twin applied it; marks are cleared only after both
 * twins synced (twin.c), never while the twin needs resync, and never on
 * an iod that is not readable (the target keeps the marks of writes it
 * applied as primary and never forwarded before it died).  Per subfile
 * (plan_subfile): unmarked, it is not read at all; with marked regions,
 * step 2a sends only the creating WRITE and region mode (copy_region)
 * sends each marked 1 MiB region whole (zeros included), read and queued
 * in one call as above, then the exact size (at once, in that call, after
 * a region our end cuts short: later marks lie past it); marked whole (a
 * truncate the twin missed, or
 * an overflowing mark list), step 2a also sends CHECKSUM (1 MiB regions,
 * RS_CSUM_REGIONS of them per call: the next window is asked once the
 * copy reaches it, before any of it is read) and step 2b compares, in the
 * same call that reads each region here, its CRC32C with the target's:
 * an identical region (same length) is skipped, a region the target does
 * not hold or holds as zeros is copied sparsely as above, any other
 * differing region is sent whole.  Why skipping is safe: for a byte of a
 * skipped region, the target's final value is that of the last forward
 * it applies after its window's CHECKSUM, or the checksummed one;
 * forwards after that CHECKSUM are exactly the mutations we applied after
 * it, in our order, so the last one touching the byte (if any) is also
 * the last one here, and the checksummed value equals ours otherwise.
 * A failure (e.g. the target holds a newer trunc_gen, refused with
 * -ESTALE) makes mgrd retry, with a full copy after two failures in a
 * row (not counting -ESTALE after a map change: mgrd/resync.c).  A wiped
 * target gets a full copy (mgrd: its logs know nothing).
 * The write-intent pins of the twin (twin.c pin_missed) are released when
 * a copy completes.
 *
 * Resuming (Resync.resume, proto/FORMAT.md "Resync jobs and resuming").
 * Every copy forward carries the position it completes and
 * resync_cursor.c reports, in RESYNC_PROGRESS, the newest position whose
 * forwards (and all before) the target acknowledged; mgrd journals it.  A
 * run given that cursor skips every subfile before it and that subfile's
 * bytes below its offset (the partly copied subfile is neither deleted
 * nor truncated first: step 2a only sends the creating WRITE), and copies
 * the rest as above; there, when replaying, a chunk a replayed mark names
 * goes whole (zeros as a punch), as the target may have missed a zeroing
 * past the cursor that a sparse copy would not send.  A subfile at or
 * before the cursor that must be copied whole (a replayed whole mark) is
 * not deleted first either: every chunk goes whole.  Why that is enough:
 * the bytes before the cursor were equal at the target when
 * acknowledged, and every later mutation of them
 * was forwarded to the target in order while it stayed `resyncing` (and
 * when the source was down, nobody could write the group).  When the
 * target may have missed writes (it restarted or left `resyncing`: mgrd
 * sets replay_marks), each 1 MiB region marked in our write-intent log at
 * or before the cursor is sent again whole (region mode), then the
 * subfile's exact size: a write acknowledged by us alone marks its region
 * in the same transaction, and marks are not cleared while the target
 * needs resync (twin.c), so they cover it.  The cursor never moves back
 * while replaying (set_pos).
 * A live mutation that the target did not apply while we copied (a pin
 * taken during the job) fails the job: its region may have been copied
 * before it, so only a new copy covers it, and the next run replays the
 * marks before its cursor even when mgrd does not ask (a pin while the
 * target stays resyncing is nothing mgrd hears of): the replay is owed,
 * durably (iod_store_replay_owed), until a run completes or one without a
 * cursor starts (every marked region lies ahead of it).  A restart of ours
 * after forwarding a live write to the resyncing target owes it too (the
 * forward may have died unanswered: iod_store_note_resync_live).  Owed
 * only for pins taken since we started, the replay sends only the pinned
 * regions (every forward that succeeded reached the target in order);
 * owed from before our start, the pins are gone (memory) and every mark
 * before the cursor is sent.
 * Unrepairable blocks (docs/ARCHITECTURE.md "Integrity").  A chunk or
 * region whose read here fails a block checksum (this is the only
 * readable copy) is read again as it is on disk, each of its blocks is
 * checked alone (read_bad_chunk), and it is sent as usual except that
 * each failing block goes alone, as its bytes are here, in a forwarded
 * WRITE with bad_copy: the target journals the copy and, in the same call,
 * a bad-copy record that marks the block bad (iod_store_write_bad,
 * iod/store_csum.c C4), and answers once both are in.  The copy goes on;
 * the block is counted (ResyncProgress.unrepairable), logged with subfile,
 * offset and this iod, and reported to mgrd (the file's path).  Reads of
 * it then get -EBADMSG on both twins: -EUCLEAN for a client (heal.c),
 * never the bad bytes, never zeros.  Such a chunk is never skipped as
 * identical: the target may hold the same bytes unmarked.  A crash of the
 * target between the copy and the mark loses the reply with the mark, so
 * the position was never acknowledged and a resumed run sends the chunk
 * again (the target stays `resyncing` until a run completes).
 *
 * Holes.  Before reading a chunk or marked region, the copy asks
 * SEEK_DATA through the journal (iod_store_seek: journal-resident blocks
 * are data, home bytes past a pending cut are not; it may call a hole
 * data, never data a hole), unless the previous read ended in data right
 * there (find_hole).  A hole of our subfile from there up to the chunk of
 * the next data (or our end) is skipped in that one call, with no read:
 * where the target holds zeros there anyway (a full copy after the
 * DELETE, the region past its size in an incremental one) nothing is
 * sent, exactly as for a chunk that reads as zeros; where it may hold
 * other bytes (every chunk whole, a replayed mark, the target's bytes in
 * an incremental copy, region mode: every chunk that would go whole) one
 * forwarded punch covers the whole stretch (region mode: the marked
 * stretch), as fwd_whole sends a region of zeros.  A seek and its punch
 * are one synchronous step like a read and its forwards, so the ordering
 * argument above is unchanged; the position moves past the hole only
 * with the punch that covers it, or with the next forward when nothing
 * needed sending (the target reads zeros there already).  Skipped bytes
 * count in bytes_done (the copy passed them), never in bytes_copied (not
 * read), and in the "bytes of holes" of the done line.  A punched subfile
 * of a TiB so costs a seek and a punch, not a million 1 MiB reads.
 *
 * A failure (a forward refused or lost, our map no longer lets us serve,
 * the target left `resyncing`) ends the job with an error; mgrd retries.
 */
#include "iod_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RS_CHUNK          (1u << 20)
/* CHECKSUM asks for this many RS_CHUNK regions at a time: the target
 * computes them on its loop, which must stay free for pings and
 * forwards (a whole 16 GiB subfile took seconds). */
#define RS_CSUM_REGIONS   (IOD_CSUM_BOTH_BYTES / RS_CHUNK)
#define RS_BLOCK          4096u
#define RS_WINDOW         (16u << 20)    /* bytes in flight to the target */
#define RS_LIST_BATCH     256u
#define RS_CHUNKS_PER_RUN 8              /* per loop pass, then yield */
#define RS_PROGRESS_MS    500u
#define RS_RING           8192u          /* positions awaiting their ack */
#define RS_BAD_LOGGED     256u           /* unrepairable blocks logged a run */
/* A chunk queues at most one write per 4 KiB block (one per other block
 * when sparse, one per block when every other one is unrepairable: see
 * fwd_with_bad), plus a create, a delete and a truncate: leave this much
 * room before each step. */
#define RS_RING_SLACK     (RS_CHUNK / RS_BLOCK + 8)


/* How the bytes at or after `then` of the current subfile are copied,
 * after its region mode (if any). */
enum { CONT_NONE, CONT_CHUNKS, CONT_CHECKSUMS };

struct rs_job {
	struct iod *d;
	uint32_t target;
	uint32_t rate_mbps;
	struct wire_conn *c;       /* mgrd's RESYNC, referenced; may be NULL */
	struct wire_hdr hdr;
	int phase;                 /* RS_COUNT, RS_TLIST, RS_COPY, ... */
	int rc;
	bool list_busy;
	/* target listing */
	uint64_t t_ino;
	uint32_t t_col;
	/* our listing */
	struct iod_sub_info batch[RS_LIST_BATCH];
	int n_batch, i_batch;
	bool s_eof;
	uint64_t s_ino;
	uint32_t s_col;
	/* the subfile being copied */
	bool cur;
	uint64_t cur_ino;
	uint32_t cur_col;
	uint64_t cur_off;
	struct iod_sub_layout cur_layout;
	/* incremental: the target's checksums of regions [t_first, t_end)
	 * of the current subfile (n_tcrc of them: fewer past its end) and
	 * its size, as of the CHECKSUM that window's copy follows */
	bool incremental;
	bool cur_wait;             /* CHECKSUM asked, not answered yet */
	uint32_t *tcrc;
	size_t n_tcrc;
	uint64_t t_first, t_end;
	uint64_t tsize;
	uint64_t skipped;          /* bytes found identical */
	/* in flight */
	int inflight;
	uint64_t inflight_bytes;
	/* RS_COUNT: the count's cursor (count_step) */
	uint64_t c_ino;
	uint32_t c_col;
	/* accounting */
	uint64_t files, bytes_sent, deleted;
	uint64_t total_bytes, done_bytes;
	uint64_t start_ms, progress_ms;
	uint64_t pins_at_start;    /* d->n_pins when the copy started */
	uint32_t run;              /* Resync.run of the request we answer */
	uv_timer_t timer;
	bool timer_armed;
	uint64_t budget_at;        /* uv_now of the pass budget_used counts */
	int budget_used;           /* chunks read in that pass */
	uint64_t files_total, bytes_copied;
	uint64_t unrepairable;     /* blocks sent marked bad (bad_chunk) */
	uint64_t holes;            /* bytes of holes skipped unread */
	/* Where the last read of the current subfile ended in data (its
	 * last block not zero): the next read there asks no SEEK_DATA.
	 * UINT64_MAX: none. */
	uint64_t read_end;
	/* Resume (Resync.resume): the position the previous runs reached. */
	bool resume;
	struct iod_rs_pos from;
	/* The write-intent marks that choose what to copy (incremental: ours
	 * and the target's; a full resume with replay: ours), sorted. */
	struct iod_intent_run *marks;
	size_t n_marks, i_mark;
	bool tmarks_eof;           /* the target's marks are all in */
	struct iod_intent_run t_after;   /* INTENTS paging: the last one */
	/* Region mode: sending the kept runs of marks[reg_i .. reg_end) of
	 * the current subfile (keep_run), then `cont`. */
	bool reg_mode;
	size_t reg_i, reg_end;
	uint64_t reg_next;
	/* Full, resumed inside the current subfile: its marks[chunk_m ..
	 * chunk_m1) past `then` make copy_chunk send their chunks whole
	 * (whole_chunk); empty otherwise. */
	size_t chunk_m, chunk_m1;
	bool cur_whole;            /* full: every chunk whole, no delete first */
	uint64_t cur_then;         /* bytes below are at the target already */
	int cont;                  /* CONT_*: after region mode */
	bool replay;               /* Resync.replay_marks */
	bool pins_only;            /* ... of the pinned marks alone */
	/* What the target has acknowledged (resync_cursor.c); `pos` is the
	 * position the next forward completes. */
	struct iod_rs_cursor cursor;
	struct iod_rs_pos pos;
};

enum { RS_COUNT, RS_TLIST, RS_TMARKS, RS_COPY, RS_SYNC, RS_END };

/* Pages of the listing counted per pass of the loop (count_step): about
 * 2,000 stats, a few ms warm. */
#define RS_COUNT_PAGES    8

struct rs_call {
	struct rs_job *j;
	bool has_slot;             /* slot: its position in j->cursor */
	uint64_t slot;
	uint64_t bytes;
	uint16_t type;
	uint64_t ino;
	uint32_t column;
};

static void pump(struct rs_job *j);

/* CRC32C of a whole region of zeros (computed at the first job). */
static uint32_t zero_crc;
static bool zero_crc_set;

static bool all_zero(const uint8_t *p, long n)
{
	for (long i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void on_progress_reply(int status, struct wire_msg *reply, void *arg)
{
	(void)status;
	(void)arg;
	if (reply)
		wire_msg_free(reply);
}

/* ------------------------------------------------------------- helpers */

static void fail(struct rs_job *j, int rc, const char *what)
{
	if (j->rc == 0) {
		j->rc = rc;
		tw_err("resync of iod %" PRIu32 ": %s: %s; stopping (mgrd "
		       "retries)", j->target, what, strerror(-rc));
		/* Most often the target holds a newer map epoch than we do
		 * (a map change raced the copy): catch up before the retry. */
		if (rc == -ESTALE)
			iod_mgr_refresh(j->d);
	}
}

static void send_progress(struct rs_job *j, bool force, bool done)
{
	struct iod *d = j->d;
	Twinfs__ResyncProgress *p;
	uint64_t now = tw_now_ms();

	if (!force && now - j->progress_ms < RS_PROGRESS_MS)
		return;
	j->progress_ms = now;
	if (d->no_mgr || !d->mgr_peer || d->closing)
		return;
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	twinfs__resync_progress__init(p);
	p->target_iod = j->target;
	p->run = j->run;
	p->bytes_done = j->done_bytes;
	p->bytes_total = j->total_bytes;
	p->files_done = j->files;
	p->files_total = j->files_total;
	p->bytes_copied = j->bytes_copied;
	p->unrepairable = j->unrepairable;
	if (j->cursor.has_done || j->resume) {
		const struct iod_rs_pos *c = j->cursor.has_done
					     ? &j->cursor.done : &j->from;

		p->has_cursor = true;
		p->cursor_ino = c->ino;
		p->cursor_column = c->column;
		p->cursor_offset = c->off;
	}
	p->done = done;
	p->permille = done ? 1000 : j->total_bytes
		? (uint32_t)TW_MIN(999u, j->done_bytes * 1000 / j->total_bytes)
		: 0;
	if (wire_call(d->mgr_peer, TWINFS__MSG_TYPE__MSG_RESYNC_PROGRESS,
		      &p->base, NULL, 0, d->conf->request_timeout_ms,
		      on_progress_reply, NULL) < 0)
		tw_debug("resync: cannot send progress");
	free(p);
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

/* The replay our pins owed is carried (a completed run, or one from the
 * start: see the header). */
static void replay_paid(const struct rs_job *j)
{
	/* A live forward queued after our last copy forward may still be
	 * unanswered: if we die before its answer, the twin may lack it. */
	if (iod_store_replay_paid(j->d->store, j->d->fwd_unanswered > 0) < 0)
		tw_log_rl(TW_LOG_WARN, "resync of iod %" PRIu32 ": cannot "
			  "clear the replay flag: the next resume replays "
			  "again", j->target);
}

/* Reply to mgrd (when still connected) and free the job once nothing is in
 * flight. */
static void finish(struct rs_job *j)
{
	struct iod *d = j->d;
	Twinfs__ResyncReply r = TWINFS__RESYNC_REPLY__INIT;
	uint64_t ms = tw_now_ms() - j->start_ms;

	if (j->inflight > 0 || j->list_busy || j->phase == RS_END)
		return;
	j->phase = RS_END;
	if (j->rc == 0 && d->n_pins != j->pins_at_start)
		/* A live mutation was applied here but not at the target
		 * while we copied: it may be after our copy of its region.
		 * Not done; mgrd sends the copy again. */
		fail(j, -EBUSY, "a live write did not reach the target "
		     "during the copy");
	if (j->rc == 0) {
		/* Only a run that completes has carried the pins: one that
		 * replayed and failed leaves them owed to the next. */
		replay_paid(j);
		iod_store_intent_unpin_all(d->store);
		d->missed_unheard = false;   /* the copy carried them */
		iod_twin_stale_forget(d);
		tw_info("resync of iod %" PRIu32 " done (%s): %" PRIu64
			" subfiles, %" PRIu64 " bytes read, %" PRIu64 " bytes "
			"sent, %" PRIu64 " bytes found identical, %" PRIu64
			" bytes of holes skipped unread, %" PRIu64
			" target-only subfiles deleted, %zu write-intent runs, %"
			PRIu64 " unrepairable blocks, %" PRIu64 " ms (%.1f "
			"MB/s)", j->target,
			j->incremental ? "incremental" : "full", j->files,
			j->bytes_copied, j->bytes_sent, j->skipped, j->holes,
			j->deleted, j->n_marks, j->unrepairable, ms,
			ms ? (double)j->bytes_sent / 1e3 / (double)ms : 0.0);
		/* Also on mgrd's own connection: if mgrd restarted, the
		 * RESYNC call we answer below is gone with it. */
		send_progress(j, true, true);
	}
	if (j->c) {
		r.files = j->files;
		r.bytes = j->bytes_sent;
		r.deleted = j->deleted;
		r.bytes_copied = j->bytes_copied;
		r.unrepairable = j->unrepairable;
		if (j->rc < 0)
			wire_reply(j->c, &j->hdr, j->rc, NULL, NULL, 0);
		else
			wire_reply(j->c, &j->hdr, 0, &r.base, NULL, 0);
		wire_conn_unref(j->c);
		j->c = NULL;
	}
	if (d->resync == j)
		d->resync = NULL;
	free(j->tcrc);
	j->tcrc = NULL;
	free(j->marks);
	j->marks = NULL;
	iod_rs_cursor_free(&j->cursor);
	uv_timer_stop(&j->timer);
	uv_close((uv_handle_t *)&j->timer, on_timer_closed);
}

/* Our map still lets us copy: we are readable, the target is resyncing. */
static int still_valid(struct rs_job *j)
{
	struct iod *d = j->d;
	const struct iod_map_iod *t = &d->map.iods[j->target];

	if (d->closing)
		return -ESHUTDOWN;
	if (!iod_twin_self_readable(d))
		return -ESTALE;
	if (t->present && t->state != TWINFS__IOD_STATE__IOD_RESYNCING)
		return -ECANCELED;
	if (!d->twin_peer)
		return -ENOTCONN;
	return 0;
}

static void on_call_reply(int status, struct wire_msg *reply, void *arg)
{
	struct rs_call *k = arg;
	struct rs_job *j = k->j;

	if (reply)
		wire_msg_free(reply);
	j->inflight--;
	j->inflight_bytes -= k->bytes;
	if (status == 0 && k->has_slot && j->cursor.slots)
		iod_rs_cursor_ack(&j->cursor, k->slot);
	if (status < 0) {
		char what[96];

		snprintf(what, sizeof(what), "%s ino %" PRIu64 " column %"
			 PRIu32 " at the target", wire_type_name(k->type),
			 k->ino, k->column);
		fail(j, status, what);
	}
	free(k);
	if (j->phase == RS_SYNC || j->rc < 0)
		finish(j);
	else
		pump(j);
}

/* Queue one forwarded message to the target (twin.c T1: one connection,
 * call order). */
static int fwd(struct rs_job *j, uint16_t type, const ProtobufCMessage *body,
	       const void *data, size_t len, uint64_t ino, uint32_t column)
{
	struct iod *d = j->d;
	struct rs_call *k = calloc(1, sizeof(*k));
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	int rc;

	if (!k)
		return -ENOMEM;
	k->j = j;
	k->bytes = len;
	k->type = type;
	k->ino = ino;
	k->column = column;
	/* Generous: the target's journal may stall on a checkpoint under
	 * this load; a dead target resets the connection, and a hung one is
	 * demoted by mgrd (the copy then fails at the latest here). */
	rc = wire_call(d->twin_peer, type, body, &iov, len ? 1 : 0,
		       TW_MAX(d->conf->request_timeout_ms * 10, 30000u),
		       on_call_reply, k);
	if (rc < 0) {
		free(k);
		return rc;
	}
	if (j->phase == RS_COPY) {
		/* Every copy forward completes the current position. */
		k->has_slot = true;
		k->slot = iod_rs_cursor_push(&j->cursor, &j->pos);
	}
	j->inflight++;
	j->inflight_bytes += len;
	return 0;
}

static int fwd_delete(struct rs_job *j, uint64_t ino, uint32_t column)
{
	Twinfs__Delete x = TWINFS__DELETE__INIT;
	uint32_t col = column;

	x.ino = ino;
	x.columns = &col;
	x.n_columns = 1;
	x.epoch = j->d->map.epoch;
	x.forwarded = true;
	return fwd(j, TWINFS__MSG_TYPE__MSG_DELETE, &x.base, NULL, 0, ino,
		   column);
}

/* bad: the source's copy of blocks that fail their checksum here, sent
 * as it is with Write.bad_copy: the target stores it marked bad (the
 * header, "Unrepairable blocks"). */
static int fwd_write_as(struct rs_job *j, uint64_t off, const void *buf,
			size_t len, uint64_t trunc_gen, bool bad)
{
	Twinfs__Write w = TWINFS__WRITE__INIT;
	Twinfs__Layout l = TWINFS__LAYOUT__INIT;

	l.stripe_size = j->cur_layout.stripe_size;
	l.stripe_count = j->cur_layout.stripe_count;
	l.n_groups = j->cur_layout.n_groups;
	l.groups = j->cur_layout.groups;
	w.ino = j->cur_ino;
	w.column = j->cur_col;
	w.offset = off;
	w.trunc_gen = trunc_gen;
	w.epoch = j->d->map.epoch;
	w.forwarded = true;
	w.bad_copy = bad;
	w.layout = &l;
	j->bytes_sent += len;
	return fwd(j, TWINFS__MSG_TYPE__MSG_WRITE, &w.base, buf, len,
		   j->cur_ino, j->cur_col);
}

static int fwd_write(struct rs_job *j, uint64_t off, const void *buf,
		     size_t len, uint64_t trunc_gen)
{
	return fwd_write_as(j, off, buf, len, trunc_gen, false);
}

static int fwd_truncate(struct rs_job *j, uint64_t size, uint64_t trunc_gen)
{
	Twinfs__Truncate t = TWINFS__TRUNCATE__INIT;

	t.ino = j->cur_ino;
	t.column = j->cur_col;
	t.size = size;
	t.trunc_gen = trunc_gen;
	t.epoch = j->d->map.epoch;
	t.forwarded = true;
	return fwd(j, TWINFS__MSG_TYPE__MSG_TRUNCATE, &t.base, NULL, 0,
		   j->cur_ino, j->cur_col);
}

/* Punch [off, off + len) of the current subfile at the target: a marked
 * region that reads as zeros here stays a hole there (FALLOCATE punch,
 * clamped to the target's size, never extending it). */
static int fwd_punch(struct rs_job *j, uint64_t off, uint64_t len,
		     uint64_t trunc_gen)
{
	Twinfs__Fallocate f = TWINFS__FALLOCATE__INIT;

	f.ino = j->cur_ino;
	f.column = j->cur_col;
	f.offset = off;
	f.length = len;
	f.punch = true;
	f.trunc_gen = trunc_gen;
	f.epoch = j->d->map.epoch;
	f.forwarded = true;
	return fwd(j, TWINFS__MSG_TYPE__MSG_FALLOCATE, &f.base, NULL, 0,
		   j->cur_ino, j->cur_col);
}

/* Send n bytes read at off whole, zeros included (the target may hold
 * other bytes there): all zeros as a punch, so holes stay holes. */
static int fwd_whole(struct rs_job *j, uint64_t off, const uint8_t *buf,
		     long n, uint64_t trunc_gen)
{
	if (n <= 0)
		return 0;
	if (all_zero(buf, n))
		return fwd_punch(j, off, (uint64_t)n, trunc_gen);
	return fwd_write(j, off, buf, (size_t)n, trunc_gen);
}

/* ------------------------------------------------ 1: target-only files */

static void list_target(struct rs_job *j);
static void list_tmarks(struct rs_job *j);

static void on_target_list(int status, struct wire_msg *reply, void *arg)
{
	struct rs_job *j = arg;
	const Twinfs__SubfilesReply *r;
	bool eof = true;

	j->list_busy = false;
	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor !=
			    &twinfs__subfiles_reply__descriptor))
		status = -EPROTO;
	if (status < 0) {
		fail(j, status, "listing the target's subfiles");
		goto out;
	}
	if (j->rc == 0 && (status = still_valid(j)) < 0)
		fail(j, status, "map changed");
	r = (const Twinfs__SubfilesReply *)reply->body;
	for (size_t i = 0; j->rc == 0 && i < r->n_subfiles; i++) {
		const Twinfs__SubfileInfo *si = r->subfiles[i];
		struct iod_sub_stat st;
		int rc = iod_store_stat(j->d->store, si->ino, si->column, &st);

		j->t_ino = si->ino;
		j->t_col = si->column;
		if (rc == 0 && st.exists)
			continue;
		/* We do not hold it: checked and deleted in this one call,
		 * so a later creation here is ordered after the DELETE. */
		if (rc == 0)
			rc = fwd_delete(j, si->ino, si->column);
		if (rc < 0)
			fail(j, rc, "deleting a target-only subfile");
		else
			j->deleted++;
	}
	eof = r->eof || r->n_subfiles == 0;
out:
	if (reply)
		wire_msg_free(reply);
	if (j->rc < 0) {
		finish(j);
		return;
	}
	if (!eof) {
		list_target(j);
		return;
	}
	if (j->incremental) {
		j->phase = RS_TMARKS;
		list_tmarks(j);
		return;
	}
	j->phase = RS_COPY;
	pump(j);
}

static void list_target(struct rs_job *j)
{
	Twinfs__Subfiles q = TWINFS__SUBFILES__INIT;
	int rc = still_valid(j);

	q.after_ino = j->t_ino;
	q.after_column = j->t_col;
	q.max = 1024;
	if (rc == 0)
		rc = wire_call(j->d->twin_peer, TWINFS__MSG_TYPE__MSG_SUBFILES,
			       &q.base, NULL, 0,
			       TW_MAX(j->d->conf->request_timeout_ms, 1000u),
			       on_target_list, j);
	if (rc < 0) {
		fail(j, rc, "listing the target's subfiles");
		finish(j);
		return;
	}
	j->list_busy = true;
}

/* ------------------------------------------- 1b: the target's marks */

/* Incremental: the target's write-intent marks join ours (INTENTS on the
 * twin connection, so they reflect every forward queued before). */
static void on_tmarks(int status, struct wire_msg *reply, void *arg)
{
	struct rs_job *j = arg;
	const Twinfs__IntentsReply *r;
	struct iod_intent_run *add = NULL;
	size_t n = 0;
	int rc;

	j->list_busy = false;
	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor !=
			    &twinfs__intents_reply__descriptor))
		status = -EPROTO;
	if (status < 0) {
		fail(j, status, "reading the target's write-intent log");
		goto out;
	}
	r = (const Twinfs__IntentsReply *)reply->body;
	if (r->n_runs) {
		add = calloc(r->n_runs, sizeof(*add));
		if (!add) {
			fail(j, -ENOMEM, "reading the target's write-intent log");
			goto out;
		}
	}
	for (size_t i = 0; i < r->n_runs; i++) {
		const Twinfs__IntentRun *ir = r->runs[i];

		if (ir->column >= IOD_MAX_COLUMNS ||
		    (ir->count == 0 || (ir->count != UINT64_MAX &&
					ir->first + ir->count < ir->first))) {
			fail(j, -EPROTO, "the target's write-intent log");
			goto out;
		}
		/* The target's: never our pins. */
		add[n++] = (struct iod_intent_run){ ir->ino, ir->column,
						    ir->first, ir->count,
						    false };
	}
	if (n) {
		j->t_after = add[n - 1];
		rc = iod_intent_merge(&j->marks, &j->n_marks, add, n);
		if (rc < 0)
			fail(j, rc, "merging the target's write-intent log");
	}
	j->tmarks_eof = r->eof || n == 0;
out:
	free(add);
	if (reply)
		wire_msg_free(reply);
	if (j->rc < 0) {
		finish(j);
		return;
	}
	if (!j->tmarks_eof) {
		list_tmarks(j);
		return;
	}
	j->phase = RS_COPY;
	pump(j);
}

static void list_tmarks(struct rs_job *j)
{
	Twinfs__Intents q = TWINFS__INTENTS__INIT;
	int rc = still_valid(j);

	q.after_ino = j->t_after.ino;
	q.after_column = j->t_after.column;
	q.after_first = j->t_after.first;
	if (rc == 0)
		rc = wire_call(j->d->twin_peer, TWINFS__MSG_TYPE__MSG_INTENTS,
			       &q.base, NULL, 0,
			       TW_MAX(j->d->conf->request_timeout_ms, 1000u),
			       on_tmarks, j);
	if (rc < 0) {
		fail(j, rc, "reading the target's write-intent log");
		finish(j);
		return;
	}
	j->list_busy = true;
}

/* --------------------------------------------------------- 2: copying */

static void on_checksums(int status, struct wire_msg *reply, void *arg)
{
	struct rs_job *j = arg;
	const Twinfs__ChecksumReply *r;

	j->inflight--;
	j->cur_wait = false;
	free(j->tcrc);
	j->tcrc = NULL;
	j->n_tcrc = 0;
	j->tsize = 0;
	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor !=
			    &twinfs__checksum_reply__descriptor))
		status = -EPROTO;
	if (status < 0) {
		fail(j, status, "checksums at the target");
	} else {
		r = (const Twinfs__ChecksumReply *)reply->body;
		j->tsize = r->size;
		if (r->n_crcs) {
			j->tcrc = malloc(r->n_crcs * sizeof(uint32_t));
			if (!j->tcrc)
				fail(j, -ENOMEM, "checksums at the target");
			else
				memcpy(j->tcrc, r->crcs,
				       r->n_crcs * sizeof(uint32_t));
			j->n_tcrc = j->tcrc ? r->n_crcs : 0;
		}
	}
	if (reply)
		wire_msg_free(reply);
	if (j->rc < 0)
		finish(j);
	else
		pump(j);
}

static int ask_checksums(struct rs_job *j)
{
	Twinfs__Checksum q = TWINFS__CHECKSUM__INIT;
	int rc;

	q.ino = j->cur_ino;
	q.column = j->cur_col;
	q.region_size = RS_CHUNK;
	q.first_region = (uint32_t)(j->cur_off / RS_CHUNK);
	q.max_regions = RS_CSUM_REGIONS;
	rc = wire_call(j->d->twin_peer, TWINFS__MSG_TYPE__MSG_CHECKSUM,
		       &q.base, NULL, 0,
		       TW_MAX(j->d->conf->request_timeout_ms * 10, 30000u),
		       on_checksums, j);
	if (rc < 0)
		return rc;
	j->inflight++;
	j->cur_wait = true;
	j->t_first = q.first_region;
	j->t_end = j->t_first + RS_CSUM_REGIONS;
	return 0;
}

/* The next window's checksums are due: the copy reached the end of the
 * last one, and the target held bytes past it then.  Asked before any
 * chunk of the window is read, so the skip argument (the header) holds
 * window by window. */
static bool checksums_due(const struct rs_job *j)
{
	return j->cont == CONT_CHECKSUMS && !j->reg_mode && !j->cur_wait &&
	       j->cur_off / RS_CHUNK >= j->t_end && j->cur_off < j->tsize;
}

/* Listing order of (ino, column) against a position's subfile. */
static int key_cmp(uint64_t ino, uint32_t column, const struct iod_rs_pos *p)
{
	if (ino != p->ino)
		return ino < p->ino ? -1 : 1;
	if (column != p->column)
		return column < p->column ? -1 : 1;
	return 0;
}

/* Whether byte off of subfile (ino, column) lies before a resume's
 * starting point. */
static bool before_from(const struct rs_job *j, uint64_t ino,
			uint32_t column, uint64_t off)
{
	int c = key_cmp(ino, column, &j->from);

	return j->resume && (c < 0 || (c == 0 && off < j->from.off));
}

/* The position the next forwards complete: (current subfile, off), but
 * never one before a resume's starting point (replaying marks there must
 * not move the cursor back). */
static void set_pos(struct rs_job *j, uint64_t off)
{
	struct iod_rs_pos p = { j->cur_ino, j->cur_col, off };

	j->pos = before_from(j, p.ino, p.column, off) ? j->from : p;
}

/* The last forward queued since the cursor's tail was tail0 (if any)
 * completes the current position j->pos (set after queueing it). */
static void completes_pos(struct rs_job *j, uint64_t tail0)
{
	if (j->cursor.tail > tail0)
		iod_rs_cursor_set_off(&j->cursor, j->cursor.tail - 1,
				      j->pos.off);
}

/* Resume: the marks of subfile (ino, column) are marks[*m0 .. *m1); *all
 * when one covers the whole subfile.  Subfiles come in listing order, the
 * marks are sorted the same way. */
static void find_marks(struct rs_job *j, uint64_t ino, uint32_t column,
		       size_t *m0, size_t *m1, bool *all, bool *all_pinned)
{
	struct iod_rs_pos key = { ino, column, 0 };

	while (j->i_mark < j->n_marks &&
	       key_cmp(j->marks[j->i_mark].ino, j->marks[j->i_mark].column,
		       &key) < 0)
		j->i_mark++;
	*m0 = j->i_mark;
	*all = *all_pinned = false;
	while (j->i_mark < j->n_marks &&
	       key_cmp(j->marks[j->i_mark].ino, j->marks[j->i_mark].column,
		       &key) == 0) {
		if (j->marks[j->i_mark].count == UINT64_MAX) {
			*all = true;
			*all_pinned |= j->marks[j->i_mark].pinned;
		}
		j->i_mark++;
	}
	*m1 = j->i_mark;
}

/* Whether the target may have missed a write in mark run mk (a replay
 * sends it; only the pinned ones when those are all it missed). */
static bool replayed(const struct rs_job *j, const struct iod_intent_run *mk)
{
	return j->replay && (!j->pins_only || mk->pinned);
}

/* Whether region mode sends mark run mk of the current subfile: marks
 * below `then` (already at the target) when replayed; marks from `then`
 * on when the marks choose what to copy (incremental).  A full copy
 * reaches marks past `then` itself (whole_chunk). */
static bool keep_run(const struct rs_job *j, const struct iod_intent_run *mk)
{
	uint64_t off = mk->first * RS_CHUNK;

	if (mk->count == UINT64_MAX)
		return false;
	if (off < j->cur_then)
		return replayed(j, mk);
	return j->incremental && j->cur_then != UINT64_MAX;
}

/* Full, in the subfile a resume left half copied (not deleted first): a
 * chunk that reads as zeros is not sent, yet the target may hold other
 * bytes there if it missed a zeroing (a punch, a write of zeros).  So a
 * chunk in regions r0..r1 that a replayed mark names goes whole.  Chunks
 * come in order, so passed runs are dropped from the front. */
static bool whole_chunk(struct rs_job *j, uint64_t r0, uint64_t r1)
{
	const struct iod_intent_run *mk;

	while (j->chunk_m < j->chunk_m1 &&
	       ((mk = &j->marks[j->chunk_m])->count == UINT64_MAX ||
		mk->first + mk->count <= r0))
		j->chunk_m++;
	for (size_t i = j->chunk_m; i < j->chunk_m1; i++) {
		mk = &j->marks[i];
		if (mk->first > r1)
			break;
		if (mk->count != UINT64_MAX && mk->first + mk->count > r0 &&
		    replayed(j, mk))
			return true;
	}
	return false;
}

/* Decide how subfile si is copied (proto/FORMAT.md "Resync jobs and
 * resuming"; the header of this file).  `then`: its bytes below are at
 * the target already (a resume's cursor; 0 otherwise).  Region mode sends
 * the kept marks; then CONT_CHUNKS copies from `then` on (full: every
 * block; the partly copied subfile of a resume is not deleted first),
 * CONT_CHECKSUMS compares region checksums from `then` on (incremental,
 * a subfile marked whole), CONT_NONE sends the exact size.  Credits
 * done_bytes for what no chunk copy will count.  Returns false when there
 * is nothing to send. */
static bool plan_subfile(struct rs_job *j, const struct iod_sub_info *si)
{
	int cmp = j->resume ? key_cmp(si->ino, si->column, &j->from) : 1;
	size_t m0 = 0, m1 = 0;
	bool all = false, all_pinned = false;

	j->cur_then = cmp > 0 ? 0 : (cmp < 0 || j->from.off == UINT64_MAX)
		      ? UINT64_MAX : j->from.off;
	if (j->marks)
		find_marks(j, si->ino, si->column, &m0, &m1, &all,
			   &all_pinned);
	j->cur_whole = false;
	if (all && j->replay && (!j->pins_only || all_pinned)) {
		j->cur_then = 0;          /* may differ anywhere: copy it all */
		/* ... but at or before the cursor, which says the target
		 * holds it, a full copy must not delete it first: a failure
		 * mid-copy would leave it short with the cursor past it, and
		 * a whole pin does not survive a restart of ours.  Every
		 * chunk goes whole instead (copy_chunk). */
		j->cur_whole = cmp <= 0 && !j->incremental;
		if (j->cur_whole)
			tw_log_rl(TW_LOG_INFO, "resync of iod %" PRIu32
				  ": ino %" PRIu64 " column %" PRIu32 " lies "
				  "before the cursor and is marked whole: "
				  "sending every chunk whole", j->target,
				  si->ino, si->column);
	}
	j->cont = CONT_NONE;
	if (j->cur_then != UINT64_MAX) {
		if (!j->incremental)
			j->cont = CONT_CHUNKS;
		else if (all)
			j->cont = CONT_CHECKSUMS;
	}
	j->chunk_m = j->chunk_m1 = 0;
	if (j->cont == CONT_CHUNKS && j->cur_then != 0 && j->replay) {
		j->chunk_m = m0;
		j->chunk_m1 = m1;
	}
	j->reg_mode = false;
	for (size_t i = m0; i < m1 && !j->reg_mode; i++)
		if (keep_run(j, &j->marks[i])) {
			j->reg_mode = true;
			j->reg_i = i;
			j->reg_end = m1;
			j->reg_next = j->marks[i].first;
		}
	j->cur_off = j->cur_then == UINT64_MAX ? 0 : j->cur_then;
	j->read_end = UINT64_MAX;
	j->done_bytes += j->cont == CONT_NONE ? si->size
			 : TW_MIN(j->cur_off, si->size);
	return j->reg_mode || j->cont != CONT_NONE;
}

/* Step 2a for the next subfile we hold; false when there is none. */
static bool next_subfile(struct rs_job *j)
{
	struct iod *d = j->d;

	for (;;) {
		const struct iod_sub_info *si;
		struct iod_sub_stat st;
		int rc;

		if (j->i_batch >= j->n_batch) {
			bool eof = true;
			int n;

			if (j->s_eof)
				return false;
			n = iod_store_list(d->store, j->s_ino, j->s_col,
					   RS_LIST_BATCH, j->batch, &eof);
			if (n < 0) {
				fail(j, n, "listing our subfiles");
				return false;
			}
			j->n_batch = n;
			j->i_batch = 0;
			j->s_eof = eof || n == 0;
			if (n == 0)
				return false;
		}
		si = &j->batch[j->i_batch++];
		j->s_ino = si->ino;
		j->s_col = si->column;
		rc = iod_store_stat(d->store, si->ino, si->column, &st);
		if (rc == 0 && !st.exists)
			continue;      /* deleted since the listing */
		if (rc == 0)
			rc = iod_store_layout(d->store, si->ino, si->column,
					      &j->cur_layout);
		if (rc < 0) {
			fail(j, rc, "reading a subfile's state");
			return false;
		}
		j->cur = true;
		j->cur_ino = si->ino;
		j->cur_col = si->column;
		j->files++;
		if (!plan_subfile(j, si)) {
			j->cur = false;
			continue;         /* nothing differs, or copied before */
		}
		set_pos(j, 0);
		if (j->cont == CONT_CHUNKS && j->cur_off == 0 && !j->reg_mode &&
		    !j->cur_whole) {
			/* A full copy: the target's subfile goes first. */
			rc = fwd_delete(j, si->ino, si->column);
			if (rc == 0)
				rc = fwd_write(j, 0, NULL, 0, st.trunc_gen);
		} else {
			/* Create it if absent (a no-op otherwise); CHECKSUM
			 * travels on the same connection, so the target's
			 * checksums reflect every forward before it (region
			 * mode asks when it is done). */
			rc = fwd_write(j, 0, NULL, 0, st.trunc_gen);
			if (rc == 0 && j->cont == CONT_CHECKSUMS && !j->reg_mode)
				rc = ask_checksums(j);
		}
		if (rc < 0)
			fail(j, rc, "starting a subfile's copy");
		return rc == 0;
	}
}

/* Unrepairable blocks (docs/ARCHITECTURE.md "Integrity"): the chunk at
 * off fails a block checksum here, on the only readable copy.  Read it as
 * it is on disk and set bad[k] for each of its blocks that fails (each
 * logged, counted and reported to mgrd, which logs the file's path).
 * Returns the bytes read, or -errno (-EBADMSG again if no block fails
 * when checked alone: the failure cannot be placed). */
static long read_bad_chunk(struct rs_job *j, uint64_t off, uint8_t **buf,
			   struct iod_sub_stat *st, bool *bad)
{
	struct iod *d = j->d;
	unsigned nbad = 0;
	char msg[320];
	long n;

	n = iod_store_read_unchecked(d->store, j->cur_ino, j->cur_col, off,
				     RS_CHUNK, buf, st);
	if (n <= 0)
		return n;
	for (long k = 0; (uint64_t)k * RS_BLOCK < (uint64_t)n; k++) {
		uint64_t b = off + (uint64_t)k * RS_BLOCK;
		int rc = iod_store_csum_verify(d->store, j->cur_ino,
					       j->cur_col, b / RS_BLOCK);

		bad[k] = rc == -EBADMSG;
		if (rc < 0 && rc != -EBADMSG) {
			free(*buf);
			*buf = NULL;
			return rc;
		}
		if (!bad[k])
			continue;
		nbad++;
		snprintf(msg, sizeof(msg), "resync of iod %" PRIu32 ": subfile "
			 "ino %" PRIu64 " column %" PRIu32 " block at %" PRIu64
			 " fails its checksum on iod %" PRIu32 ", the only "
			 "readable copy: sent marked bad, unrepairable (reads "
			 "of it get EIO on both twins until that range of the "
			 "file is rewritten or the file removed)", j->target,
			 j->cur_ino, j->cur_col, b, d->id);
		/* each one, up to RS_BAD_LOGGED a run; then rate limited (a
		 * whole bad disk region must not flood the log: the done
		 * line has the count) */
		if (j->unrepairable++ < RS_BAD_LOGGED)
			tw_err("%s", msg);
		else
			tw_log_rl(TW_LOG_ERR, "resync: %s", msg);
		iod_mgr_report_bad_block(d, j->cur_ino, j->cur_col, b, false);
	}
	if (nbad == 0) {
		free(*buf);
		*buf = NULL;
		return -EBADMSG;
	}
	return n;
}

/* Sparse: the non-zero 4 KiB blocks of n bytes read at off, in runs
 * (zero blocks stay holes). */
static int fwd_sparse(struct rs_job *j, uint64_t off, const uint8_t *buf,
		      long n, uint64_t trunc_gen)
{
	int rc = 0;

	for (long b = 0; b < n && rc == 0;) {
		long e;

		while (b < n && all_zero(buf + b,
				TW_MIN((long)RS_BLOCK, n - b)))
			b += RS_BLOCK;
		if (b >= n)
			break;
		e = b;
		while (e < n && !all_zero(buf + e,
				TW_MIN((long)RS_BLOCK, n - e)))
			e += RS_BLOCK;
		e = TW_MIN(e, n);
		rc = fwd_write(j, off + (uint64_t)b, buf + b, (size_t)(e - b),
			       trunc_gen);
		b = e;
	}
	return rc;
}

/* A chunk with unrepairable blocks (bad[], read_bad_chunk): each bad
 * block goes as it is with Write.bad_copy (the target marks it bad); the
 * stretches between them as the chunk would go, whole or sparse. */
static int fwd_with_bad(struct rs_job *j, uint64_t off, const uint8_t *buf,
			long n, const bool *bad, bool whole,
			uint64_t trunc_gen)
{
	int rc = 0;

	for (long b = 0; b < n && rc == 0;) {
		long k = b / (long)RS_BLOCK, e = b;

		if (bad[k]) {
			e = TW_MIN(b + (long)RS_BLOCK, n);
			rc = fwd_write_as(j, off + (uint64_t)b, buf + b,
					  (size_t)(e - b), trunc_gen, true);
			b = e;
			continue;
		}
		while (e < n && !bad[e / (long)RS_BLOCK])
			e = TW_MIN(e + (long)RS_BLOCK, n);
		rc = whole ? fwd_whole(j, off + (uint64_t)b, buf + b, e - b,
				       trunc_gen)
			   : fwd_sparse(j, off + (uint64_t)b, buf + b, e - b,
					trunc_gen);
		b = e;
	}
	return rc;
}

/* Holes (the header): the n bytes read at off end in data (their last
 * 4 KiB are not all zeros), so a read that follows them asks no
 * SEEK_DATA first: a subfile full of data costs no seek per chunk. */
static void note_read(struct rs_job *j, uint64_t off, const uint8_t *buf,
		      long n)
{
	long last = TW_MAX(n - (long)RS_BLOCK, 0L);

	j->read_end = n > 0 && !all_zero(buf + last, n - last)
		      ? off + (uint64_t)n : UINT64_MAX;
}

/* Holes (the header): whether the current subfile holds no data here from
 * off on, as SEEK_DATA through the journal sees it; then *end is where
 * that stops, past off (the start of the chunk of the next data, or our
 * end), and *st our state (the trunc_gen to punch with), all in this
 * call.  false: read from off as before: when the last read ended in data
 * right there, the next data lies in this chunk, off is at or past our
 * end (the read finds it), or the seek fails (the read reports it). */
static bool find_hole(struct rs_job *j, uint64_t off, uint64_t *end,
		      struct iod_sub_stat *st)
{
	uint64_t res, size;
	int rc;

	if (off == j->read_end)
		return false;
	rc = iod_store_seek(j->d->store, j->cur_ino, j->cur_col, off,
			    SEEK_DATA, &res, &size);
	if (rc < 0 || (rc == 0 && off >= size))
		return false;
	*end = rc == 0 ? size : res - res % RS_CHUNK;
	if (*end <= off)
		return false;
	/* the seek's state, sampled in the same call */
	rc = iod_store_stat(j->d->store, j->cur_ino, j->cur_col, st);
	return rc == 0 && st->exists && st->size >= *end;
}

/* Step 2b over a hole here, [cur_off, end) (find_hole), in this call and
 * unread: nothing is sent where a chunk of zeros would send nothing (the
 * target reads zeros there: a full copy after its DELETE, past the
 * target's size in an incremental one); one punch of it all where a
 * chunk would go whole or the target may hold other bytes. */
static void skip_hole(struct rs_job *j, uint64_t end,
		      const struct iod_sub_stat *st)
{
	uint64_t tail0 = j->cursor.tail, len = end - j->cur_off;
	int rc = 0;

	set_pos(j, j->cur_off);
	if (j->cur_whole || (j->incremental && j->cur_off < j->tsize) ||
	    whole_chunk(j, j->cur_off / RS_CHUNK, (end - 1) / RS_CHUNK))
		rc = fwd_punch(j, j->cur_off, len, st->trunc_gen);
	if (rc < 0) {
		fail(j, rc, "punching a hole at the target");
		return;
	}
	/* The punch completes the hole; when nothing was sent, the next
	 * forward carries the position past it (the target reads zeros). */
	set_pos(j, end);
	completes_pos(j, tail0);
	j->cur_off = end;
	/* bytes_done is the copy's position in the sizes it counted
	 * (count_bytes), holes included; bytes_copied what it read. */
	j->done_bytes += len;
	j->holes += len;
}

/* Step 2b/2c: one chunk of the current subfile, read and sent in this
 * call (a hole here: skip_hole). */
static void copy_chunk(struct rs_job *j)
{
	struct iod_sub_stat st = { 0 };
	bool bad[RS_CHUNK / RS_BLOCK], has_bad = false;
	uint8_t *buf = NULL;
	uint64_t end;
	long n;
	int rc = 0;

	uint64_t tail0 = j->cursor.tail;

	if (find_hole(j, j->cur_off, &end, &st)) {
		skip_hole(j, end, &st);
		return;
	}
	n = iod_store_read(j->d->store, j->cur_ino, j->cur_col, j->cur_off,
			   RS_CHUNK, &buf, &st);
	if (n == -EBADMSG) {
		n = read_bad_chunk(j, j->cur_off, &buf, &st, bad);
		has_bad = n > 0;
	}
	if (n < 0) {
		fail(j, (int)n, "reading a subfile");
		return;
	}
	note_read(j, j->cur_off, buf, n);
	set_pos(j, j->cur_off);
	if (n == 0) {
		/* Past the end (or deleted meanwhile: its DELETE was
		 * forwarded, nothing more to send). */
		set_pos(j, UINT64_MAX);
		if (st.exists)
			rc = fwd_truncate(j, st.size, st.trunc_gen);
		if (rc < 0)
			fail(j, rc, "truncating at the target");
		j->cur = false;
		return;
	}
	if (has_bad) {
		/* Never skipped as identical: the target may hold the same
		 * bytes unmarked.  Incremental: the target may hold other
		 * bytes, so whole. */
		rc = fwd_with_bad(j, j->cur_off, buf, n, bad,
				  j->cur_whole || j->incremental ||
				  whole_chunk(j, j->cur_off / RS_CHUNK,
					      (j->cur_off + (uint64_t)n - 1) /
					      RS_CHUNK), st.trunc_gen);
		goto next;
	}
	if (j->cur_whole ||
	    whole_chunk(j, j->cur_off / RS_CHUNK,
			(j->cur_off + (uint64_t)n - 1) / RS_CHUNK)) {
		rc = fwd_whole(j, j->cur_off, buf, n, st.trunc_gen);
		goto next;
	}
	if (j->incremental) {
		uint64_t r = j->cur_off / RS_CHUNK - j->t_first;
		uint64_t tlen = j->tsize > j->cur_off
				? TW_MIN(j->tsize - j->cur_off, (uint64_t)RS_CHUNK)
				: 0;
		uint32_t crc = tw_crc32c(0, buf, (size_t)n);

		if (r < j->n_tcrc && tlen == (uint64_t)n && j->tcrc[r] == crc) {
			/* Identical at the target (every forward before the
			 * CHECKSUM included, later ones follow): skip. */
			j->skipped += (uint64_t)n;
			goto next;
		}
		if (!(tlen == 0 || (tlen == RS_CHUNK && r < j->n_tcrc &&
				    j->tcrc[r] == zero_crc))) {
			/* The target holds other bytes here: send it all,
			 * zeros included. */
			rc = fwd_write(j, j->cur_off, buf, (size_t)n,
				       st.trunc_gen);
			goto next;
		}
		/* The target's region reads as zeros: like a full copy. */
	}
	rc = fwd_sparse(j, j->cur_off, buf, n, st.trunc_gen);
next:
	free(buf);
	if (rc < 0) {
		fail(j, rc, "sending a chunk");
		return;
	}
	/* The chunk's last forward completes the whole chunk. */
	set_pos(j, j->cur_off + (uint64_t)n);
	completes_pos(j, tail0);
	j->cur_off += (uint64_t)n;
	j->done_bytes += (uint64_t)n;
	j->bytes_copied += (uint64_t)n;
}

/* The position a region-mode forward completes: its offset, but never
 * past `then` when a chunk or checksum pass from `then` still follows
 * (the bytes between are not at the target yet, and mgrd resumes from
 * the newest acknowledged position). */
static void set_region_pos(struct rs_job *j, uint64_t off)
{
	set_pos(j, j->cont == CONT_NONE ? off : TW_MIN(off, j->cur_then));
}

/* Region mode over a hole here from off (find_hole: up to end), in this
 * call and unread: one punch (region mode sends every region whole) as
 * far as the marked stretch goes, the kept runs from reg_i on that follow
 * without a gap (a client's punch of a TiB marks its regions one by one).
 * The next call goes on from its end; at our end, the exact size goes in
 * this call, as after a short region (copy_region). */
static void region_hole(struct rs_job *j, uint64_t off, uint64_t end,
			const struct iod_sub_stat *st)
{
	uint64_t tail0 = j->cursor.tail, mend = off;
	int rc;

	for (size_t i = j->reg_i; i < j->reg_end && mend < end; i++) {
		const struct iod_intent_run *mk = &j->marks[i];

		if (!keep_run(j, mk) || mk->first > mend / RS_CHUNK)
			break;
		mend = mk->first + mk->count > UINT64_MAX / RS_CHUNK
		       ? UINT64_MAX
		       : TW_MAX(mend, (mk->first + mk->count) * RS_CHUNK);
	}
	/* marks[reg_i] is kept and holds reg_next: mend > off */
	assert(mend > off);
	end = TW_MIN(end, mend);
	set_region_pos(j, off);
	rc = fwd_punch(j, off, end - off, st->trunc_gen);
	set_region_pos(j, end);
	if (rc == 0 && end == st->size)
		rc = fwd_truncate(j, st->size, st->trunc_gen);
	if (rc < 0) {
		fail(j, rc, "punching a marked hole at the target");
		return;
	}
	completes_pos(j, tail0);
	j->holes += end - off;         /* not read: not in bytes_copied */
	if (end == st->size) {
		j->reg_i = j->reg_end;   /* later marks lie past our end */
		return;
	}
	/* end is a chunk boundary short of our end: go on from the first
	 * run not wholly before it (the loop at the top of copy_region
	 * skips it if it is not kept). */
	j->reg_next = end / RS_CHUNK;
	while (j->reg_i < j->reg_end &&
	       j->marks[j->reg_i].count != UINT64_MAX &&
	       j->marks[j->reg_i].first + j->marks[j->reg_i].count <=
	       j->reg_next)
		j->reg_i++;
	if (j->reg_i < j->reg_end)
		j->reg_next = TW_MAX(j->reg_next, j->marks[j->reg_i].first);
}

/* Region mode: send the next kept marked region whole (zeros included:
 * the target may hold other bytes there; a region of zeros as a punch, so
 * holes stay holes), in the one call that reads it (a hole here:
 * region_hole); after the last one, go on as plan_subfile decided. */
static void copy_region(struct rs_job *j)
{
	struct iod_sub_stat st = { 0 };
	bool bad[RS_CHUNK / RS_BLOCK], has_bad = false;
	uint64_t off, end, tail0 = j->cursor.tail;
	uint8_t *buf = NULL;
	long n;
	int rc = 0;

	while (j->reg_i < j->reg_end && !keep_run(j, &j->marks[j->reg_i]))
		if (++j->reg_i < j->reg_end)
			j->reg_next = j->marks[j->reg_i].first;
	if (j->reg_i >= j->reg_end) {
		j->reg_mode = false;
		if (j->cont == CONT_CHECKSUMS && (rc = ask_checksums(j)) < 0)
			fail(j, rc, "checksums at the target");
		if (j->cont != CONT_NONE)
			return;           /* copy_chunk goes on from cur_off */
		set_pos(j, UINT64_MAX);
		rc = iod_store_stat(j->d->store, j->cur_ino, j->cur_col, &st);
		if (rc == 0 && st.exists)
			rc = fwd_truncate(j, st.size, st.trunc_gen);
		if (rc < 0)
			fail(j, rc, "truncating at the target");
		j->cur = false;
		return;
	}
	off = j->reg_next * RS_CHUNK;
	if (find_hole(j, off, &end, &st)) {
		region_hole(j, off, end, &st);
		return;
	}
	n = iod_store_read(j->d->store, j->cur_ino, j->cur_col, off, RS_CHUNK,
			   &buf, &st);
	if (n == -EBADMSG) {
		n = read_bad_chunk(j, off, &buf, &st, bad);
		has_bad = n > 0;
	}
	if (n < 0) {
		fail(j, (int)n, "reading a marked region");
		return;
	}
	note_read(j, off, buf, n);
	set_region_pos(j, off);
	rc = has_bad ? fwd_with_bad(j, off, buf, n, bad, true, st.trunc_gen)
		     : fwd_whole(j, off, buf, n, st.trunc_gen);
	free(buf);
	set_region_pos(j, off + (uint64_t)n);
	/* Short: our end lies in this region or before it.  The target may
	 * hold bytes past it (a shrink it missed), which a live grow queued
	 * before our next call would keep: cut it to our size in this same
	 * call (the ordering argument above). */
	if (rc == 0 && (uint64_t)n < RS_CHUNK && st.exists)
		rc = fwd_truncate(j, st.size, st.trunc_gen);
	if (rc < 0) {
		fail(j, rc, "sending a marked region");
		return;
	}
	completes_pos(j, tail0);
	j->bytes_copied += (uint64_t)n;
	if ((uint64_t)n < RS_CHUNK) {
		/* Every later mark of the subfile (they are sorted) lies
		 * past our end, where the target now holds nothing either. */
		j->reg_i = j->reg_end;
		return;
	}
	if (++j->reg_next >= j->marks[j->reg_i].first +
			     j->marks[j->reg_i].count &&
	    ++j->reg_i < j->reg_end)
		j->reg_next = j->marks[j->reg_i].first;
}

static void count_step(struct rs_job *j);
static void count_done(struct rs_job *j);

static void on_timer(uv_timer_t *t)
{
	struct rs_job *j = t->data;

	j->timer_armed = false;
	if (j->phase == RS_COUNT)
		count_step(j);
	else
		pump(j);
}

static void arm(struct rs_job *j, uint64_t ms)
{
	if (j->timer_armed)
		return;
	j->timer_armed = true;
	uv_timer_start(&j->timer, on_timer, ms, 0);
}

/* RS_COUNT: the bytes and subfiles to visit, for the progress.  A few
 * pages per pass of the loop, not all at once: the count stats every
 * subfile, seconds at a million of them (minutes with a cold cache), and
 * a loop held that long answers no ping, so mgrd would call the source
 * down and the group would lose its only readable twin.  Then the copy
 * proper starts with the target's listing. */
static void count_step(struct rs_job *j)
{
	int rc = still_valid(j);

	for (int p = 0; rc == 0 && p < RS_COUNT_PAGES; p++) {
		bool eof;
		int n = iod_store_list(j->d->store, j->c_ino, j->c_col,
				       RS_LIST_BATCH, j->batch, &eof);

		if (n < 0) {
			rc = n;
			break;
		}
		for (int i = 0; i < n; i++)
			j->total_bytes += j->batch[i].size;
		j->files_total += (uint64_t)n;
		if (n > 0) {
			j->c_ino = j->batch[n - 1].ino;
			j->c_col = j->batch[n - 1].column;
		}
		if (eof || n == 0) {
			count_done(j);
			return;
		}
	}
	if (rc < 0) {
		fail(j, rc, "counting what to copy");
		finish(j);
		return;
	}
	arm(j, 0);
}

static void start_sync(struct rs_job *j)
{
	Twinfs__Fsync f = TWINFS__FSYNC__INIT;
	int rc;

	j->phase = RS_SYNC;
	f.ino = 0;
	f.epoch = j->d->map.epoch;
	f.forwarded = true;
	rc = fwd(j, TWINFS__MSG_TYPE__MSG_FSYNC, &f.base, NULL, 0, 0, 0);
	if (rc < 0)
		fail(j, rc, "syncing the target");
	finish(j);
}

static void pump(struct rs_job *j)
{
	uint64_t now = uv_now(j->d->loop);
	int rc;

	if (j->phase != RS_COPY)
		return;
	/* The chunk budget is per pass of the loop (uv_now moves once per
	 * pass), not per call: every forward's reply pumps, and one pass can
	 * deliver dozens of replies. */
	if (now != j->budget_at) {
		j->budget_at = now;
		j->budget_used = 0;
	}
	if (j->rc == 0 && (rc = still_valid(j)) < 0)
		fail(j, rc, "map changed");
	while (j->rc == 0 && j->inflight_bytes < RS_WINDOW &&
	       iod_rs_cursor_room(&j->cursor) >= RS_RING_SLACK) {
		if (j->rate_mbps) {
			uint64_t el = tw_now_ms() - j->start_ms + 1;
			uint64_t allowed = el * j->rate_mbps * 1000;

			if (j->bytes_sent > allowed) {
				arm(j, (j->bytes_sent - allowed) /
				       ((uint64_t)j->rate_mbps * 1000) + 1);
				break;
			}
		}
		if (j->budget_used >= RS_CHUNKS_PER_RUN) {
			/* Yield for 1 ms, not 0: libuv 1.44 (Debian 12) runs
			 * a 0 ms timer re-armed from its own callback again
			 * in the same pass, before any I/O.  Chunks of holes
			 * send nothing, so the window never fills, and the
			 * copy of a large sparse subfile held the loop for
			 * seconds: no pings answered, and mgrd demoted the
			 * source in the middle of its copy. */
			arm(j, 1);
			break;
		}
		if (!j->cur && !next_subfile(j)) {
			if (j->rc == 0 && j->inflight == 0)
				start_sync(j);
			break;
		}
		if (j->cur && checksums_due(j)) {
			int err = ask_checksums(j);

			if (err < 0) {
				fail(j, err, "checksums at the target");
				break;
			}
		}
		if (j->cur && j->cur_wait)
			break;             /* on_checksums pumps again */
		if (j->cur && j->reg_mode)
			copy_region(j);
		else if (j->cur)
			copy_chunk(j);
		j->budget_used++;
	}
	send_progress(j, false, false);
	if (j->rc < 0)
		finish(j);
}

/* ------------------------------------------------------------ requests */

/* Our marks, when they choose what to copy (an incremental copy) or may
 * name writes the target missed before a resume's cursor (replay_marks):
 * marks are cleared only once both twins synced them, never while the
 * target needs resync (twin.c), and never on the target while it
 * resyncs, so ours and the target's cover every byte that may differ. */
static int load_marks(struct rs_job *j, const Twinfs__Resync *q)
{
	struct iod *d = j->d;

	j->resume = q->resume;
	j->replay = q->resume && q->replay_marks;
	if (q->resume && !q->replay_marks &&
	    iod_store_replay_owed(d->store)) {
		/* A live write reached us alone since the last run that
		 * completed (its forward failed while the target stayed
		 * resyncing): mgrd cannot know; its region may be before the
		 * cursor.  Owed until a run completes (finish), not just
		 * starts: a replaying run that fails replays nothing past
		 * the point it reached. */
		j->replay = true;
		/* Pinned since we started: the pins name every region the
		 * target lacks (forwards that succeeded are at the target,
		 * in order); owed from before, or with a pin that could not
		 * be recorded, only the marks do. */
		j->pins_only = !iod_store_replay_owed_marks(d->store);
		tw_info("resync of iod %" PRIu32 ": writes of ours did not "
			"reach it since the last completed run: replaying %s "
			"before the cursor", j->target, j->pins_only
			? "the regions it missed (pinned)" : "the marks");
	}
	if (!q->resume)
		/* A run from the start covers every pin so far: its region is
		 * marked and lies ahead of the cursor (a pin during the run
		 * sets the flag again, and fails the run). */
		replay_paid(j);
	j->from.ino = q->resume_ino;
	j->from.column = q->resume_column;
	j->from.off = q->resume_offset;
	if (!j->incremental && !j->replay)
		return 0;
	return iod_intent_list(j->d->store, &j->marks, &j->n_marks);
}

void iod_resync_request(struct iod *d, struct wire_conn *c,
			struct wire_msg *m)
{
	const struct iod_conn *ic = wire_conn_get_data(c);
	const Twinfs__Resync *q = (const Twinfs__Resync *)m->body;
	struct rs_job *j;
	int rc;

	if (ic->role != TWINFS__ROLE__ROLE_MGRD) {
		iod_reply_status(c, m, -EPERM);
		return;
	}
	if (!m->body || m->body->descriptor != &twinfs__resync__descriptor ||
	    q->target_iod != d->twin_id || m->data_len != 0) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	if (q->epoch > d->map.epoch)
		iod_mgr_refresh(d);
	j = d->resync;
	if (j && j->phase != RS_END) {
		/* mgrd restarted (or asked again): join the running job. */
		if (j->c) {
			wire_reply(j->c, &j->hdr, -ECANCELED, NULL, NULL, 0);
			wire_conn_unref(j->c);
		}
		wire_conn_ref(c);
		j->c = c;
		j->hdr = m->hdr;
		j->rate_mbps = q->rate_limit_mbps;
		j->run = q->run;
		tw_info("resync of iod %" PRIu32 ": mgrd asked again; the "
			"running copy goes on", j->target);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		iod_reply_status(c, m, -ENOMEM);
		return;
	}
	j->d = d;
	j->target = q->target_iod;
	j->rate_mbps = q->rate_limit_mbps;
	j->run = q->run;
	j->start_ms = tw_now_ms();
	j->pins_at_start = d->n_pins;
	j->incremental = !q->full;
	if (!zero_crc_set) {
		uint8_t *z = calloc(1, RS_CHUNK);

		if (z) {
			zero_crc = tw_crc32c(0, z, RS_CHUNK);
			zero_crc_set = true;
			free(z);
		} else {
			j->incremental = false;
		}
	}
	uv_timer_init(d->loop, &j->timer);
	j->timer.data = j;
	rc = still_valid(j);
	if (rc < 0) {
		/* E.g. mgrd's map push has not reached us yet (it travels on
		 * another connection): -EAGAIN, mgrd asks again soon. */
		tw_log_rl(TW_LOG_INFO, "resync of iod %" PRIu32 " not started "
			  "in map epoch %" PRIu64 " (mgrd's: %" PRIu64 "): %s",
			  j->target, d->map.epoch, q->epoch, strerror(-rc));
		uv_close((uv_handle_t *)&j->timer, on_timer_closed);
		iod_reply_status(c, m, -EAGAIN);
		return;
	}
	wire_conn_ref(c);
	j->c = c;
	j->hdr = m->hdr;
	if (iod_rs_cursor_init(&j->cursor, RS_RING) < 0 ||
	    load_marks(j, q) < 0) {
		iod_rs_cursor_free(&j->cursor);
		free(j->marks);
		uv_close((uv_handle_t *)&j->timer, on_timer_closed);
		iod_reply_status(c, m, -ENOMEM);
		wire_conn_unref(c);
		return;
	}
	d->resync = j;
	j->phase = RS_COUNT;
	arm(j, 0);
}

/* The count is done: the copy starts (the target's listing first). */
static void count_done(struct rs_job *j)
{
	tw_info("resync of iod %" PRIu32 " starts: %s of %" PRIu64
		" bytes in %" PRIu64 " subfiles%s", j->target, j->incremental
		? "incremental copy (write-intent log)" : "full copy",
		j->total_bytes, j->files_total,
		j->rate_mbps ? " (rate-limited)" : "");
	if (j->resume) {
		size_t before = 0, pinned = 0;

		for (size_t i = 0; i < j->n_marks; i++)
			if (before_from(j, j->marks[i].ino, j->marks[i].column,
					j->marks[i].first * RS_CHUNK)) {
				before++;
				pinned += j->marks[i].pinned;
			}
		tw_info("resync of iod %" PRIu32 " resumes after ino %" PRIu64
			" column %" PRIu32 " offset %" PRIu64 "; %zu of our "
			"write-intent runs lie before it, %zu pinned: %s",
			j->target, j->from.ino, j->from.column, j->from.off,
			before, pinned, !j->replay ? "the target holds them"
			: j->pins_only ? "the pinned ones sent again"
			: "sent again");
	}
	j->phase = RS_TLIST;
	send_progress(j, true, false);
	list_target(j);
}

bool iod_resync_progress(const struct iod *d, uint32_t *target,
			 uint64_t *done, uint64_t *total)
{
	const struct rs_job *j = d->resync;

	if (!j)
		return false;
	*target = j->target;
	*done = j->done_bytes;
	*total = j->total_bytes;
	return true;
}

void iod_resync_stop(struct iod *d)
{
	struct rs_job *j = d->resync;

	if (!j)
		return;
	fail(j, -ESHUTDOWN, "shutting down");
	finish(j);
}
