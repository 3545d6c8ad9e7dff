/* resync.c - mgrd's side of resync (DESIGN.md "Twins", rejoin; issue 3
 * items 4-6): it starts, watches and completes the copy that brings a
 * `resyncing` iod back to `up`.  The copy itself is done by the source iod
 * (iod/resync.c); mgrd only coordinates:
 *
 *   - For every iod the map calls `resyncing` (needs_resync set), when
 *     auto_resync is on or the admin asked (REBUILD), and its twin is
 *     readable and has a peer: send RESYNC(target) to the twin, with no
 *     deadline; the source answers when the copy is done.  The first
 *     attempt is incremental (the source compares region checksums with
 *     the target and sends what differs); after two failures in a row,
 *     or when the admin asks (rebuild --full), the copy is full.
 *   - RESYNC_PROGRESS from the source updates the job's permille, shown in
 *     IodInfo.resync_permille (no epoch bump: GET_MAP shows it).
 *   - A successful reply applies R1_EV_RESYNC_DONE through
 *     mgr_srv_map_event (journaled, new epoch, pushed).
 *   - A failed reply, or a map change that makes the source unreadable or
 *     moves the target out of `resyncing`, marks the job failed or
 *     interrupted (a generation number makes a late reply harmless); it is
 *     started again RETRY_MS later, when both are reachable.
 *
 * Jobs are volatile: after an mgrd restart the map (journaled) still says
 * `resyncing`; the source's next RESYNC_PROGRESS makes the new mgrd adopt
 * a copy still running, and with auto_resync the job is sent again: a
 * source still copying joins the new request to its running copy (so it
 * goes on rather than restarting), a source that was restarted copies from
 * zero.  No cursor is journaled.  The source also reports completion with
 * RESYNC_PROGRESS(done), so a completion whose RESYNC reply was lost with
 * an old mgrd still brings the target up.
 */
#include "server_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS 500u
#define AGAIN_MS 100u
#define TICK_MS  200u

enum { RJ_NONE, RJ_RUNNING, RJ_DONE, RJ_FAILED, RJ_INTERRUPTED };

struct rjob {
	int state;
	uint32_t source;
	uint64_t gen;              /* replies of older generations are ignored */
	bool wanted;               /* admin asked (auto_resync off) */
	bool full;                 /* next attempt copies everything */
	uint32_t fails;            /* failed attempts in a row */
	uint32_t rate_mbps;
	uint32_t permille;
	uint64_t bytes_done, bytes_total;
	uint64_t start_ms, retry_ms;
	int err;
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
};

static const char *job_state_name(int st)
{
	switch (st) {
	case RJ_RUNNING: return "running";
	case RJ_DONE: return "done";
	case RJ_FAILED: return "failed";
	case RJ_INTERRUPTED: return "interrupted";
	default: return "not started";
	}
}

static bool readable(const struct mgr_map_iod *mi)
{
	return mi && (mi->state == MGR_IOD_UP || mi->state == MGR_IOD_SUSPECT) &&
	       !mi->needs_resync;
}

static void on_resync_reply(int status, struct wire_msg *reply, void *arg)
{
	struct rcall *k = arg;
	struct mgr_resync *r = k->r;
	struct rjob *j;
	struct mgr_map_iod *mi;
	char why[96];

	if (reply)
		wire_msg_free(reply);
	/* Cancelled: the pool is being freed (r may be closing) or the
	 * source handed the copy to a newer request. */
	if (status == -ECANCELED || r->stopping)
		goto out;
	j = &r->job[k->target - 1];
	if (j->gen != k->gen || j->state != RJ_RUNNING)
		goto out;
	mi = mgr_map_iod(&r->s->st.map, k->target);
	if (status == -EAGAIN) {
		/* The source's map is behind ours: not started, ask again. */
		j->state = RJ_INTERRUPTED;
		j->retry_ms = tw_now_ms() + AGAIN_MS;
		goto out;
	}
	if (status < 0) {
		j->state = RJ_FAILED;
		j->err = status;
		/* One failure may be a map change racing the copy (forwards
		 * of an older epoch are refused); a second in a row copies
		 * everything (e.g. the target holds a newer trunc_gen). */
		if (++j->fails >= 2)
			j->full = true;
		j->retry_ms = tw_now_ms() + RETRY_MS;
		tw_log_rl(TW_LOG_WARN, "mgrd: resync of iod %u from iod %u "
			  "failed: %s; retrying (%s) when both are reachable",
			  k->target, j->source, strerror(-status),
			  j->full ? "full copy" : "incremental");
		goto out;
	}
	j->state = RJ_DONE;
	j->full = false;
	j->fails = 0;
	j->permille = 1000;
	j->bytes_done = j->bytes_total;
	tw_info("mgrd: resync of iod %u from iod %u done in %llu ms",
		k->target, j->source,
		(unsigned long long)(tw_now_ms() - j->start_ms));
	if (mi && mi->state == MGR_IOD_RESYNCING) {
		snprintf(why, sizeof(why), "resync from iod %u done", j->source);
		mgr_srv_map_event(r->s, k->target, R1_EV_RESYNC_DONE, 0, why);
	}
out:
	free(k);
}

static void start_job(struct mgr_resync *r, struct mgr_map_iod *mi,
		      struct mgr_map_iod *src)
{
	struct mgr_server *s = r->s;
	struct rjob *j = &r->job[mi->id - 1];
	struct wire_peer *peer = mgr_pool_peer(s->pool, src->id);
	Twinfs__Resync q = TWINFS__RESYNC__INIT;
	struct rcall *k;
	int rc;

	if (!peer)
		return;
	k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->r = r;
	k->target = mi->id;
	k->gen = ++j->gen;
	q.target_iod = mi->id;
	q.full = j->full;
	q.rate_limit_mbps = j->rate_mbps;
	q.epoch = s->st.map.epoch;
	rc = wire_call(peer, TWINFS__MSG_TYPE__MSG_RESYNC, &q.base, NULL, 0, 0,
		       on_resync_reply, k);
	if (rc < 0) {
		free(k);
		j->state = RJ_FAILED;
		j->err = rc;
		j->retry_ms = tw_now_ms() + RETRY_MS;
		return;
	}
	if (j->state != RJ_FAILED && j->state != RJ_INTERRUPTED)
		tw_info("mgrd: resync of iod %u from iod %u starts (%s)",
			mi->id, src->id, j->full ? "full copy"
			: "incremental: region checksums");
	j->state = RJ_RUNNING;
	j->source = src->id;
	j->permille = 0;
	j->bytes_done = j->bytes_total = 0;
	j->start_ms = tw_now_ms();
	j->err = 0;
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

		if (mi->state != MGR_IOD_RESYNCING) {
			if (j->state == RJ_RUNNING) {
				j->state = RJ_INTERRUPTED;
				j->gen++;
			}
			j->permille = 0;
			if (mi->state == MGR_IOD_UP && !mi->needs_resync)
				j->wanted = false;
			continue;
		}
		if (j->state == RJ_RUNNING) {
			if (readable(src) && src->id == j->source)
				continue;
			tw_warn("mgrd: resync of iod %u interrupted: source iod "
				"%u is no longer readable", mi->id, j->source);
			j->state = RJ_INTERRUPTED;
			j->gen++;
			j->retry_ms = tw_now_ms() + RETRY_MS;
		}
		if (!s->conf->auto_resync && !j->wanted)
			continue;
		if (!readable(src) || tw_now_ms() < j->retry_ms)
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
	struct rjob *j;
	char why[96];

	if (!r || p->target_iod == 0 || p->target_iod > TW_MAX_IODS)
		return;
	j = &r->job[p->target_iod - 1];
	mi = mgr_map_iod(&r->s->st.map, p->target_iod);
	src = mgr_map_iod(&r->s->st.map, from_iod);
	if (!mi || !src || mi->group != src->group || mi == src ||
	    mi->state != MGR_IOD_RESYNCING || !readable(src))
		return;
	if (j->state != RJ_RUNNING || j->source != from_iod) {
		/* A copy we did not start (mgrd restarted meanwhile): adopt
		 * it; a RESYNC we send later joins it at the source. */
		if (j->state == RJ_RUNNING)
			return;
		tw_info("mgrd: iod %u is copying to iod %u (a resync started "
			"before this mgrd): following it", from_iod,
			p->target_iod);
		j->state = RJ_RUNNING;
		j->source = from_iod;
		j->gen++;
		j->start_ms = tw_now_ms();
	}
	j->permille = TW_MIN(p->permille, 999u);
	j->bytes_done = p->bytes_done;
	j->bytes_total = p->bytes_total;
	if (p->done) {
		/* The source finished: the same as its reply (which may have
		 * gone to a previous mgrd). */
		j->state = RJ_DONE;
		j->full = false;
		j->fails = 0;
		j->permille = 1000;
		j->gen++;
		tw_info("mgrd: resync of iod %u from iod %u done", mi->id,
			from_iod);
		snprintf(why, sizeof(why), "resync from iod %u done", from_iod);
		mgr_srv_map_event(r->s, mi->id, R1_EV_RESYNC_DONE, 0, why);
	}
}

uint32_t mgr_resync_permille(const struct mgr_resync *r, uint32_t id)
{
	if (!r || id == 0 || id > TW_MAX_IODS)
		return 0;
	return r->job[id - 1].permille;
}

int mgr_resync_rebuild(struct mgr_resync *r, uint32_t id, bool full,
		       uint32_t rate_mbps)
{
	struct mgr_map_iod *mi = mgr_map_iod(&r->s->st.map, id);
	struct rjob *j;

	if (!mi)
		return -ENOENT;
	j = &r->job[id - 1];
	if (mi->state == MGR_IOD_UP && !mi->needs_resync)
		return 0;                 /* nothing to copy */
	if (mi->state != MGR_IOD_RESYNCING)
		return -EAGAIN;           /* not reachable, or stale and alone */
	j->wanted = true;
	j->full = j->full || full;
	j->rate_mbps = rate_mbps;
	if (j->state != RJ_RUNNING)
		j->retry_ms = 0;
	tw_info("mgrd: admin asks for the resync of iod %u (job %s)", id,
		job_state_name(j->state));
	mgr_resync_check(r);
	return 0;
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
