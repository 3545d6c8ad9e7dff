/* resync.c - mgrd's side of resync (docs/ARCHITECTURE.md "Twins": resync
 * and rebuild): it starts, watches and completes the copy that brings a
 * `resyncing` iod back to `up`, and keeps the job record that
 * `twinfsctl rebuild --status` shows.  The copy itself is done by the
 * source iod (iod/resync.c); mgrd only coordinates:
 *
 *   - For every iod the map calls `resyncing` (needs_resync set), when
 *     auto_resync is on or the admin asked (REBUILD), and its twin is
 *     readable and has a peer: send RESYNC(target) to the twin, with no
 *     deadline; the source answers when the copy is done.  The first
 *     attempt is incremental (the source compares region checksums with
 *     the target and sends what differs); after two failures in a row
 *     not for want of space, or when the admin asks (rebuild
 *     --full), the copy is full.
 *   - RESYNC_PROGRESS from the source updates the job's counters and its
 *     cursor (the last subfile whose every forward the target has
 *     acknowledged), shown in IodInfo.resync_permille and RESYNC_STATUS.
 *   - A successful reply applies R1_EV_RESYNC_DONE through
 *     mgr_srv_map_event (journaled, new epoch, pushed).
 *   - A failed reply, or a map change that makes the source unreadable or
 *     moves the target out of `resyncing`, marks the job failed or
 *     interrupted (a generation number makes a late reply harmless, and
 *     the run number in RESYNC and RESYNC_PROGRESS a late progress); it
 *     is started again RETRY_MS later, when both are reachable.  Failures
 *     in a row wait longer, up to RETRY_MAX_MS (retry_wait).  A second
 *     odd failure in a row turns the copy into a full one; a failure for
 *     want of space, one for a live write the target missed during the
 *     copy (-EBUSY) and an -ESTALE after the map changed during the run
 *     (a map change racing the copy) are not odd.
 *
 * The job record (struct mgr_rjob_rec in the state: state, times,
 * counters, cursor) is journaled as a MGR_OP_RESYNC_JOB record at every
 * change of state and at most every JOURNAL_MS of progress, so it survives
 * an mgrd restart.  A job resumes rather than restarts: the next RESYNC of
 * the same job carries the cursor (Resync.resume_*) and the source copies
 * only the subfiles after it, plus the regions its write-intent log marks
 * in those before it (writes the target may have missed while it was
 * away).  The cursor is dropped when the target's UUID changes (a wiped
 * disk holds nothing) and when the job falls back to a full copy after
 * failures.  After an mgrd restart the source's next RESYNC_PROGRESS makes
 * the new mgrd adopt a copy still running; a RESYNC sent then joins it at
 * the source.  The source also reports completion with
 * RESYNC_PROGRESS(done), so a completion whose RESYNC reply was lost with
 * an old mgrd still brings the target up.
 */
#include "server_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS   500u
#define RETRY_MAX_MS 30000u  /* failures in a row back off to this */
#define AGAIN_MS   100u
#define TICK_MS    200u
#define JOURNAL_MS 1000u     /* progress records at most this often */
/* A copy mgrd follows without a call of its own (adopted from the
 * source's RESYNC_PROGRESS after an mgrd restart, or after its own call
 * was answered) has no reply to end it: silent this long, it is asked
 * again (a RESYNC joins a copy still running at the source, else starts
 * one), so a copy that ended without a word cannot leave the job running
 * forever.  A job with its call out waits for the reply: a copy is silent
 * for long stretches (listing the target, checksums, a full send window,
 * the final fsync). */
#define SILENT_MS  10000u

/* The volatile part of a job; the journaled part is s->st.rjobs[]. */
struct rjob {
	bool active;               /* a copy of generation gen runs */
	bool call_out;             /* ... and our RESYNC call awaits its reply */
	uint64_t gen;              /* replies of older generations are ignored */
	bool wanted;               /* admin asked (auto_resync off) */
	bool new_job;              /* the next run starts a new job record */
	bool want_full;            /* ... copying everything (rebuild --full) */
	uint32_t fails;            /* failed attempts in a row */
	uint32_t odd_fails;        /* ... of them in a row not for space */
	uint64_t retry_ms;
	bool copied_known;         /* last_copied is the source's run counter */
	uint64_t last_copied;      /* last ResyncProgress.bytes_copied */
	uint64_t last_unrep;       /* ... .unrepairable (same rules) */
	uint64_t journal_ms;       /* last progress record */
	uint64_t heard_ms;         /* RESYNC sent or progress heard */
	/* Run numbers (Resync.run): drawn from run_seq, never reset (a
	 * late progress of an older job's run must not pass for the
	 * current one); the current run is sent_run, answered once
	 * closed_run equals it.  0: none since this mgrd started. */
	uint32_t run_seq, sent_run, closed_run;
};

struct mgr_resync {
	struct mgr_server *s;
	uv_timer_t timer;
	bool stopping;
	struct rjob job[TW_MAX_IODS];      /* [target id - 1] */
};

struct rcall {
	struct mgr_resync *r;
	uint32_t target;
	uint64_t gen;
	uint32_t run;              /* Resync.run */
	uint64_t epoch;            /* Resync.epoch: the map the run began in */
};

static const char *job_state_name(int st)
{
	switch (st) {
	case MGR_RJ_RUNNING: return "running";
	case MGR_RJ_DONE: return "done";
	case MGR_RJ_FAILED: return "failed";
	case MGR_RJ_INTERRUPTED: return "interrupted";
	default: return "not started";
	}
}

static bool readable(const struct mgr_map_iod *mi)
{
	return mi && (mi->state == MGR_IOD_UP || mi->state == MGR_IOD_SUSPECT) &&
	       !mi->needs_resync;
}

static uint64_t unix_ms(void)
{
	struct mgr_time t;

	mgr_srv_now(&t);
	return (uint64_t)t.sec * 1000u + t.nsec / 1000000u;
}

static struct mgr_rjob_rec *rec_of(struct mgr_resync *r, uint32_t id)
{
	assert(id >= 1 && id <= TW_MAX_IODS);
	return &r->s->st.rjobs[id - 1];
}

/* Journal the job record of iod `id` as it is now (applying the record
 * rewrites the same bytes). */
static void journal_job(struct mgr_resync *r, uint32_t id)
{
	struct mgr_op op = { .type = MGR_OP_RESYNC_JOB, .ino = id };
	uint8_t buf[MGR_RJOB_BYTES_MAX];

	op.value = buf;
	op.value_len = (uint32_t)mgr_rjob_pack(rec_of(r, id), buf);
	if (mgr_srv_internal(r->s, &op) < 0)
		tw_log_rl(TW_LOG_ERR, "mgrd: resync of iod %u: cannot journal "
			  "its job record", id);
	r->job[id - 1].journal_ms = tw_now_ms();
}

/* The job of `id` stops in state st (not running). */
static void job_end(struct mgr_resync *r, uint32_t id, int st, int err)
{
	struct mgr_rjob_rec *rec = rec_of(r, id);
	struct rjob *j = &r->job[id - 1];

	j->active = false;
	j->call_out = false;
	j->gen++;
	if (rec->state != MGR_RJ_RUNNING && st != MGR_RJ_DONE)
		return;                   /* already recorded */
	rec->state = (uint8_t)st;
	rec->end_ms = unix_ms();
	if (err < 0) {
		rec->errors++;
		rec->last_error = err;
	}
	if (st == MGR_RJ_DONE) {
		rec->files_done = rec->files_total;
		rec->bytes_done = rec->bytes_total;
		rec->has_cursor = false;
		j->fails = j->odd_fails = 0;
		j->new_job = true;
	}
	journal_job(r, id);
}

/* The wait before the next run after `fails` failures in a row: RETRY_MS
 * twice, then doubling up to RETRY_MAX_MS.  A cause that lasts (a target
 * whose disk is full) must not become a copy attempt every half second. */
static uint64_t retry_wait(uint32_t fails)
{
	uint32_t shift = fails > 2 ? TW_MIN(fails - 2, 10u) : 0;

	return TW_MIN((uint64_t)RETRY_MS << shift, (uint64_t)RETRY_MAX_MS);
}

/* A failure for want of space at the target (or the source). */
static bool for_space(int status)
{
	return status == -ENOSPC || status == -EDQUOT;
}

static void on_resync_reply(int status, struct wire_msg *reply, void *arg)
{
	struct rcall *k = arg;
	struct mgr_resync *r = k->r;
	struct rjob *j;
	struct mgr_rjob_rec *rec;
	struct mgr_map_iod *mi;
	uint64_t copied = 0, unrep = 0;
	bool has_copied = false;
	char why[96];

	if (status == 0 && reply && reply->body &&
	    reply->body->descriptor == &twinfs__resync_reply__descriptor) {
		const Twinfs__ResyncReply *rr =
			(const Twinfs__ResyncReply *)reply->body;

		copied = rr->bytes_copied;
		unrep = rr->unrepairable;
		has_copied = true;
	}
	if (reply)
		wire_msg_free(reply);
	/* Cancelled: the pool is being freed (r may be closing) or the
	 * source handed the copy to a newer request. */
	if (status == -ECANCELED || r->stopping)
		goto out;
	j = &r->job[k->target - 1];
	rec = rec_of(r, k->target);
	if (j->gen != k->gen || !j->active)
		goto out;
	j->call_out = false;
	j->closed_run = k->run;
	/* The final count: the last RESYNC_PROGRESS travels on another
	 * connection and may come after this reply (then it is dropped). */
	if (has_copied && j->copied_known && copied >= j->last_copied) {
		rec->bytes_copied += copied - j->last_copied;
		j->last_copied = copied;
		if (unrep >= j->last_unrep) {
			rec->unrepairable += unrep - j->last_unrep;
			j->last_unrep = unrep;
		}
	}
	mi = mgr_map_iod(&r->s->st.map, k->target);
	if (status == -EAGAIN) {
		/* The source's map is behind ours: not started, ask again
		 * (the record says running: it is, in a moment). */
		j->active = false;
		j->gen++;
		j->retry_ms = tw_now_ms() + AGAIN_MS;
		goto out;
	}
	if (status < 0) {
		uint64_t wait = retry_wait(++j->fails);
		/* The map changed since the run began (any iod's state, e.g.
		 * another group's resync ending): a forward of the older
		 * epoch reached a target that had the newer map already. */
		bool raced = status == -ESTALE &&
			     r->s->st.map.epoch > k->epoch;

		/* A failure that is not such a race may be one that copying
		 * again cannot cure (e.g. the target holds a newer
		 * trunc_gen): a second in a row copies everything from zero.
		 * A race does not count: two of them (a cluster where
		 * several groups resync at once) turned incremental copies
		 * of whole disks into full ones.  It leaves the count as it
		 * was, so races between two odd failures do not hide them.
		 * Not for want of space either: a full copy needs more of
		 * it, and undoes what the incremental runs copied; nor when
		 * the failure before was for space (then the source
		 * restarting, say, is the first odd one).  Nor -EBUSY: a
		 * live write the target refused or never answered while we
		 * copied (the source's write-intent log keeps it pinned);
		 * the next run, resuming, sends it again.  Waiting longer
		 * each time in a row all the same: a target that keeps
		 * refusing writes would otherwise get a run every 0.5 s. */
		if (!raced)
			j->odd_fails = for_space(status) || status == -EBUSY
				       ? 0 : j->odd_fails + 1;
		if (j->odd_fails >= 2) {
			rec->full = true;
			rec->has_cursor = false;
		}
		j->retry_ms = tw_now_ms() + wait;
		if (status == -EBUSY)
			tw_log_rl(TW_LOG_WARN, "mgrd: resync of iod %u from "
				  "iod %u: a live write did not reach iod %u "
				  "during the copy; copying again in %llu ms",
				  k->target, rec->source, k->target,
				  (unsigned long long)wait);
		else
			tw_log_rl(TW_LOG_WARN, "mgrd: resync of iod %u from "
				  "iod %u failed: %s%s; retrying (%s) in %llu "
				  "ms when both are reachable", k->target,
				  rec->source, strerror(-status), raced
				  ? " (the map changed during the copy)" : "",
				  rec->full ? "full copy" : "incremental",
				  (unsigned long long)wait);
		job_end(r, k->target, MGR_RJ_FAILED, status);
		goto out;
	}
	tw_info("mgrd: resync of iod %u from iod %u done in %llu ms",
		k->target, rec->source,
		(unsigned long long)(unix_ms() - rec->start_ms));
	job_end(r, k->target, MGR_RJ_DONE, 0);
	if (mi && mi->state == MGR_IOD_RESYNCING) {
		snprintf(why, sizeof(why), "resync from iod %u done",
			 rec->source);
		mgr_srv_map_event(r->s, k->target, R1_EV_RESYNC_DONE, 0, why);
	}
out:
	free(k);
}

/* Open a new job record for target mi (a first run, a run after a done
 * job, or an admin's --full). */
static void job_new(struct mgr_rjob_rec *rec, const struct mgr_map_iod *mi,
		    bool full)
{
	memset(rec, 0, sizeof(*rec));
	rec->full = full;
	rec->start_ms = unix_ms();
	memcpy(rec->uuid, mi->uuid, mi->uuid_len);
	rec->uuid_len = mi->uuid_len;
	rec->target_incarnation = mi->incarnation;
}

static void start_job(struct mgr_resync *r, struct mgr_map_iod *mi,
		      struct mgr_map_iod *src)
{
	struct mgr_server *s = r->s;
	struct rjob *j = &r->job[mi->id - 1];
	struct mgr_rjob_rec *rec = rec_of(r, mi->id);
	struct wire_peer *peer = mgr_pool_peer(s->pool, src->id);
	Twinfs__Resync q = TWINFS__RESYNC__INIT;
	struct rcall *k;
	int rc;

	if (!peer)
		return;
	if (j->new_job || rec->state == MGR_RJ_NONE ||
	    rec->state == MGR_RJ_DONE) {
		/* A record "not started" but full: mgr_resync_fresh. */
		uint32_t rate = rec->rate_mbps;

		job_new(rec, mi, j->want_full ||
			(rec->state == MGR_RJ_NONE && rec->full));
		rec->rate_mbps = rate;
		j->new_job = false;
		j->want_full = false;
	}
	if (rec->uuid_len != mi->uuid_len ||
	    memcmp(rec->uuid, mi->uuid, mi->uuid_len) != 0) {
		/* A wiped or replaced disk: what the cursor covers is gone. */
		rec->has_cursor = false;
		rec->full = true;
		memcpy(rec->uuid, mi->uuid, mi->uuid_len);
		rec->uuid_len = mi->uuid_len;
	}
	if (rec->has_cursor && rec->target_incarnation != mi->incarnation)
		/* The target restarted since the last run: writes may have
		 * gone to the source alone while it was away. */
		rec->replay = true;
	rec->target_incarnation = mi->incarnation;
	k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->r = r;
	k->target = mi->id;
	k->gen = ++j->gen;
	k->run = ++j->run_seq;
	q.run = k->run;
	q.target_iod = mi->id;
	q.full = rec->full;
	q.rate_limit_mbps = rec->rate_mbps;
	q.epoch = s->st.map.epoch;
	k->epoch = q.epoch;
	q.resume = rec->has_cursor;
	q.resume_ino = rec->cursor_ino;
	q.resume_column = rec->cursor_column;
	q.resume_offset = rec->cursor_offset;
	q.replay_marks = rec->replay;
	rc = wire_call(peer, TWINFS__MSG_TYPE__MSG_RESYNC, &q.base, NULL, 0, 0,
		       on_resync_reply, k);
	if (rc < 0) {
		free(k);
		j->retry_ms = tw_now_ms() + RETRY_MS;
		return;
	}
	j->sent_run = j->run_seq;
	if (rec->state != MGR_RJ_RUNNING || rec->source != src->id)
		tw_info("mgrd: resync of iod %u from iod %u %s (%s)", mi->id,
			src->id, rec->runs ? "resumes" : "starts",
			rec->full ? "full copy" : "incremental: write-intent log");
	j->active = true;
	j->call_out = true;
	j->heard_ms = tw_now_ms();
	j->copied_known = true;
	j->last_copied = 0;
	j->last_unrep = 0;
	rec->state = MGR_RJ_RUNNING;
	rec->source = src->id;
	rec->end_ms = 0;
	rec->runs++;
	journal_job(r, mi->id);
}

void mgr_resync_check(struct mgr_resync *r)
{
	struct mgr_server *s;
	struct mgr_map *map;

	if (!r || r->stopping)
		return;
	s = r->s;
	map = &s->st.map;
	if (s->stopping)
		return;
	for (uint32_t i = 0; i < map->n_iods && i < TW_MAX_IODS; i++) {
		struct mgr_map_iod *mi = &map->iods[i];
		struct mgr_map_iod *src = mgr_map_twin(map, mi->group,
						       !mi->twin_index);
		struct rjob *j = &r->job[i];
		struct mgr_rjob_rec *rec = &s->st.rjobs[i];

		if (mi->state != MGR_IOD_RESYNCING) {
			if (rec->state == MGR_RJ_RUNNING) {
				tw_warn("mgrd: resync of iod %u interrupted: "
					"it is no longer resyncing", mi->id);
				/* Its twin may take writes alone now. */
				rec->replay = true;
				job_end(r, mi->id, MGR_RJ_INTERRUPTED, 0);
			}
			if (mi->state == MGR_IOD_UP && !mi->needs_resync)
				j->wanted = false;
			/* Its next resync (it left resyncing: it went down,
			 * or up) does not wait out an earlier back-off. */
			j->fails = j->odd_fails = 0;
			j->retry_ms = 0;
			continue;
		}
		if (rec->state == MGR_RJ_RUNNING && j->active &&
		    !j->call_out && tw_now_ms() - j->heard_ms > SILENT_MS) {
			tw_warn("mgrd: resync of iod %u: nothing from iod %u "
				"for %u s; asking again", mi->id, rec->source,
				SILENT_MS / 1000);
			j->active = false;
			j->gen++;
			j->retry_ms = 0;
		}
		if (rec->state == MGR_RJ_RUNNING && j->active) {
			if (readable(src) && src->id == rec->source)
				continue;
			tw_warn("mgrd: resync of iod %u interrupted: source iod "
				"%u is no longer readable", mi->id, rec->source);
			job_end(r, mi->id, MGR_RJ_INTERRUPTED, 0);
			j->retry_ms = tw_now_ms() + RETRY_MS;
		}
		if (!s->conf->auto_resync && !j->wanted)
			continue;
		if (j->active || !readable(src) || tw_now_ms() < j->retry_ms)
			continue;
		start_job(r, mi, src);
	}
}

static void on_tick(uv_timer_t *t)
{
	mgr_resync_check(t->data);
}

void mgr_resync_progress(struct mgr_resync *r, uint32_t from_iod,
			 const Twinfs__ResyncProgress *p)
{
	struct mgr_map_iod *mi, *src;
	struct mgr_rjob_rec *rec;
	struct rjob *j;
	char why[96];

	if (!r || p->target_iod == 0 || p->target_iod > TW_MAX_IODS)
		return;
	j = &r->job[p->target_iod - 1];
	rec = rec_of(r, p->target_iod);
	mi = mgr_map_iod(&r->s->st.map, p->target_iod);
	src = mgr_map_iod(&r->s->st.map, from_iod);
	if (!mi || !src || mi->group != src->group || mi == src ||
	    mi->state != MGR_IOD_RESYNCING || !readable(src))
		return;
	if (p->run && j->sent_run &&
	    (p->run != j->sent_run || j->closed_run == j->sent_run)) {
		/* Not the run we asked for last, or one whose reply we have
		 * had (they travel on different connections): that run is
		 * over.  A copy we did not ask for since we started (sent_run
		 * 0, or an iod that sends no run) is adopted below. */
		tw_debug("mgrd: resync of iod %u: progress of run %u, not "
			 "of the current run %u, dropped", p->target_iod,
			 p->run, j->sent_run);
		return;
	}
	if (!j->active || rec->source != from_iod) {
		/* A copy we did not start (mgrd restarted meanwhile): adopt
		 * it; a RESYNC we send later joins it at the source. */
		if (j->active)
			return;
		tw_info("mgrd: iod %u is copying to iod %u (a resync started "
			"before this mgrd): following it", from_iod,
			p->target_iod);
		if (rec->state == MGR_RJ_NONE || rec->state == MGR_RJ_DONE)
			job_new(rec, mi, false);
		rec->state = MGR_RJ_RUNNING;
		rec->source = from_iod;
		rec->end_ms = 0;
		assert(!j->call_out);   /* only an active job has a call */
		j->active = true;
		j->gen++;
		/* Someone wanted it (auto_resync or an admin before the
		 * restart): with auto_resync off it is still asked again. */
		j->wanted = true;
		/* Its counter includes bytes the journaled record already
		 * has (up to its last progress record): count from here. */
		j->copied_known = false;
	}
	j->heard_ms = tw_now_ms();
	if (!j->copied_known || p->bytes_copied < j->last_copied ||
	    p->unrepairable < j->last_unrep) {
		/* a new run's counters (or the first we hear) */
		j->copied_known = true;
		j->last_copied = p->bytes_copied;
		j->last_unrep = p->unrepairable;
	}
	rec->bytes_copied += p->bytes_copied - j->last_copied;
	j->last_copied = p->bytes_copied;
	if (p->unrepairable > j->last_unrep)
		tw_err("mgrd: resync of iod %u from iod %u: %llu more "
		       "blocks bad on the only readable copy, sent marked bad "
		       "(unrepairable; the iod logs each with its subfile, "
		       "and this log each file's path)", p->target_iod,
		       from_iod,
		       (unsigned long long)(p->unrepairable - j->last_unrep));
	rec->unrepairable += p->unrepairable - j->last_unrep;
	j->last_unrep = p->unrepairable;
	rec->files_total = p->files_total;
	rec->files_done = p->files_done;
	rec->bytes_total = p->bytes_total;
	rec->bytes_done = p->bytes_done;
	if (p->has_cursor) {
		rec->has_cursor = true;
		rec->cursor_ino = p->cursor_ino;
		rec->cursor_column = p->cursor_column;
		rec->cursor_offset = p->cursor_offset;
	}
	if (p->done) {
		/* The source finished: the same as its reply (which may have
		 * gone to a previous mgrd). */
		tw_info("mgrd: resync of iod %u from iod %u done", mi->id,
			from_iod);
		job_end(r, mi->id, MGR_RJ_DONE, 0);
		snprintf(why, sizeof(why), "resync from iod %u done", from_iod);
		mgr_srv_map_event(r->s, mi->id, R1_EV_RESYNC_DONE, 0, why);
		return;
	}
	if (tw_now_ms() - j->journal_ms >= JOURNAL_MS)
		journal_job(r, mi->id);
}

uint32_t mgr_resync_permille(const struct mgr_resync *r, uint32_t id)
{
	const struct mgr_rjob_rec *rec;

	if (!r || id == 0 || id > TW_MAX_IODS)
		return 0;
	rec = &r->s->st.rjobs[id - 1];
	if (rec->state == MGR_RJ_DONE)
		return 1000;
	if (rec->state != MGR_RJ_RUNNING || rec->bytes_total == 0)
		return 0;
	return (uint32_t)TW_MIN(999u, rec->bytes_done * 1000 /
				rec->bytes_total);
}

void mgr_resync_fresh(struct mgr_resync *r, uint32_t id)
{
	struct mgr_rjob_rec *rec;

	if (!r || id == 0 || id > TW_MAX_IODS)
		return;
	rec = rec_of(r, id);
	/* Journaled before the map record that takes the new UUID, so no
	 * crash can leave the new disk with an incremental job. */
	memset(rec, 0, sizeof(*rec));
	rec->full = true;
	r->job[id - 1].new_job = true;
	r->job[id - 1].want_full = true;
	r->job[id - 1].fails = r->job[id - 1].odd_fails = 0;
	journal_job(r, id);
}

int mgr_resync_rebuild(struct mgr_resync *r, uint32_t id, bool full,
		       uint32_t rate_mbps, const char *who)
{
	struct mgr_map_iod *mi = mgr_map_iod(&r->s->st.map, id);
	struct mgr_rjob_rec *rec;
	struct rjob *j;
	bool again;

	if (!mi)
		return -ENOENT;
	j = &r->job[id - 1];
	rec = rec_of(r, id);
	if (mgr_map_readable(mi)) {
		/* A live twin: nothing is marked for it, so what the admin
		 * repairs is a difference no write-intent log knows of (one
		 * twinfsctl verify reports).  It is copied again in full
		 * from its partner, taking writes meanwhile and serving no
		 * reads (R1_EV_REBUILD).  Everything the job's first run
		 * reads is set before the event: the map change may start
		 * it at once. */
		struct rjob old = *j;
		uint32_t old_rate = rec->rate_mbps;
		int rc;

		j->wanted = j->new_job = j->want_full = true;
		rec->rate_mbps = rate_mbps;
		rc = mgr_srv_map_event(r->s, id, R1_EV_REBUILD, 0,
				       "admin: rebuild of a live twin");
		if (rc <= 0 || mi->state != MGR_IOD_RESYNCING) {
			/* Its twin is not up, or the map record failed. */
			*j = old;
			rec->rate_mbps = old_rate;
			return -EAGAIN;
		}
		full = true;
	}
	if (mi->state != MGR_IOD_RESYNCING)
		return -EAGAIN;           /* not reachable, or stale and alone */
	/* Asked again for what already runs (an iod repeats its report
	 * until the copy clears it): nothing new to say. */
	again = j->wanted && j->active && rate_mbps == rec->rate_mbps &&
		(!full || (rec->full && rec->state == MGR_RJ_RUNNING));
	j->wanted = true;
	if (full && !(rec->full && rec->state == MGR_RJ_RUNNING)) {
		/* --full: a new job copying everything from zero. */
		j->new_job = true;
		j->want_full = true;
	}
	rec->rate_mbps = rate_mbps;
	if (!j->active) {
		j->retry_ms = 0;
		/* The admin's run starts a new streak. */
		j->fails = j->odd_fails = 0;
	}
	if (!again)
		tw_info("mgrd: %s asks for the resync of iod %u (job %s)", who,
			id, job_state_name(rec->state));
	mgr_resync_check(r);
	return 0;
}

static void fill_job(Twinfs__ResyncJob *o, uint32_t id,
		     const struct mgr_rjob_rec *rec)
{
	twinfs__resync_job__init(o);
	o->target_iod = id;
	o->source_iod = rec->source;
	o->state = (Twinfs__ResyncJobState)rec->state;
	o->full = rec->full;
	o->start_unix_ms = rec->start_ms;
	o->end_unix_ms = rec->end_ms;
	o->files_total = rec->files_total;
	o->files_done = rec->files_done;
	o->bytes_total = rec->bytes_total;
	o->bytes_done = rec->bytes_done;
	o->bytes_copied = rec->bytes_copied;
	o->runs = rec->runs;
	o->errors = rec->errors;
	o->last_error = rec->last_error;
	o->unrepairable = rec->unrepairable;
}

void mgr_resync_status(struct mgr_resync *r, struct wire_conn *c,
		       const struct wire_msg *m)
{
	const Twinfs__ResyncStatus *q = (const Twinfs__ResyncStatus *)m->body;
	Twinfs__ResyncStatusReply rep = TWINFS__RESYNC_STATUS_REPLY__INIT;
	Twinfs__ResyncJob jobs[TW_MAX_IODS], *ptrs[TW_MAX_IODS];
	const struct mgr_map *map = &r->s->st.map;
	size_t n = 0;

	if (q->iod && !mgr_map_iod(&r->s->st.map, q->iod)) {
		mgr_srv_reply(c, &m->hdr, -ENOENT, NULL);
		return;
	}
	for (uint32_t id = 1; id <= map->n_iods && id <= TW_MAX_IODS; id++) {
		const struct mgr_rjob_rec *rec = &r->s->st.rjobs[id - 1];

		/* One iod: its record even when never started; all: those
		 * with a record. */
		if (q->iod ? id != q->iod : rec->state == MGR_RJ_NONE)
			continue;
		fill_job(&jobs[n], id, rec);
		ptrs[n] = &jobs[n];
		n++;
	}
	rep.jobs = ptrs;
	rep.n_jobs = n;
	mgr_srv_reply(c, &m->hdr, 0, &rep.base);
}

int mgr_resync_start(struct mgr_server *s, struct mgr_resync **out)
{
	struct mgr_resync *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->s = s;
	uv_timer_init(s->loop, &r->timer);
	r->timer.data = r;
	uv_timer_start(&r->timer, on_tick, TICK_MS, TICK_MS);
	if (!s->conf->auto_resync)
		tw_info("mgrd: auto_resync is off: resyncing iods wait for "
			"`twinfsctl rebuild IOD`");
	for (uint32_t i = 0; i < TW_MAX_IODS; i++) {
		uint8_t st = s->st.rjobs[i].state;

		if (st != MGR_RJ_RUNNING && st != MGR_RJ_FAILED &&
		    st != MGR_RJ_INTERRUPTED)
			continue;
		/* An unfinished job goes on, even with auto_resync off: the
		 * admin asked for it before this mgrd started. */
		r->job[i].wanted = true;
		tw_info("mgrd: resync of iod %u was %s before this mgrd "
			"started (%llu of %llu bytes): it resumes", i + 1,
			job_state_name(st),
			(unsigned long long)s->st.rjobs[i].bytes_done,
			(unsigned long long)s->st.rjobs[i].bytes_total);
	}
	*out = r;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

void mgr_resync_stop(struct mgr_resync *r)
{
	if (!r || r->stopping)
		return;
	r->stopping = true;
	uv_timer_stop(&r->timer);
	uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}
