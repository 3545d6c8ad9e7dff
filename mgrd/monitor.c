/* monitor.c - mgrd's failure detection (docs/ARCHITECTURE.md "Twins"): it
 * pings every iod of a formed group every monitor_interval and probes at
 * once an iod a client or an iod reported, and turns what it sees into
 * events of raid's twin policy (r1_apply through mgr_srv_map_event, which
 * journals the map change and pushes it).  It decides nothing about states
 * itself.
 *
 *   answered ping/probe, same incarnation  -> R1_EV_PING_OK (suspect -> up,
 *                                             down -> rejoin: resyncing, or
 *                                             up when alone and not stale)
 *   answered, another incarnation          -> nothing: that process has not
 *                                             registered yet, and its
 *                                             registration is the event
 *   ping not answered within min(monitor_interval, request_timeout), or
 *   connection refused / reset             -> R1_EV_PING_MISSED(missed in a
 *                                             row): suspect, then down after
 *                                             down_after
 *   probe failed (no answer within         -> R1_EV_PROBE_FAILED: down
 *   request_timeout / 2, or refused/reset)
 *
 * One report never demotes a server mgrd can reach: only a failed probe
 * does.  Silence (a timeout, an unreachable network) demotes only when
 * another iod has answered since the silent ping was sent: when mgrd hears
 * from nobody, its own network is the likelier failure (a partition, or
 * mgrd itself was stopped and its deadlines fired before it read the
 * answers), and demoting one twin of every group would make reads fail
 * until the resyncs end.  A probe therefore pings the other iods too
 * (witnesses).  A refused or reset connection is an answer from the host
 * and demotes as before.  Probes are rate-limited per iod: one in flight, and none within
 * MON_PROBE_GAP_MS after one that succeeded (a flood of reports about a
 * live iod costs one ping each MON_PROBE_GAP_MS).
 *
 * Pings travel on the iodpool's peers (mgr_pool_peer).  mgrd sends iods
 * only small requests (truncate, delete, statfs, fsync), so a ping never
 * waits behind bulk data; an fsync in flight is the worst case, and it is
 * bounded by the same request_timeout.
 *
 * Groups that have not formed (a twin never registered, map.c) are left
 * alone: their first registrations decide.
 */
#include "server_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MON_PROBE_GAP_MS 500u
#define MON_FIRST_MS 100u       /* the first round of pings after start */

struct mon_iod {
	bool ping_busy;
	bool probe_busy;
	uint32_t missed;          /* pings missed in a row */
	uint64_t probe_ok_ms;     /* last successful probe */
	uint64_t ok_ms;           /* last answer to a ping or probe */
	bool probe_wanted;        /* a report arrived while a ping was out */
};

struct mgr_monitor {
	struct mgr_server *s;
	uv_timer_t timer;
	uint32_t interval_ms;
	uint32_t ping_timeout_ms;
	uint32_t probe_timeout_ms;
	bool stopping;
	struct mon_iod iod[TW_MAX_IODS];   /* [id - 1] */
};

struct ping {
	struct mgr_monitor *m;
	uint32_t id;
	bool probe;
	uint64_t sent_ms;
	Twinfs__Ping body;
};

static void send_ping(struct mgr_monitor *m, uint32_t id, bool probe);

/* No answer at all, as opposed to an answer from the host's network. */
static bool is_silence(int status)
{
	return status == -ETIMEDOUT || status == -EHOSTUNREACH ||
	       status == -ENETUNREACH || status == -ENETDOWN;
}

/* Has an iod other than id answered at or after `since` (ms)? */
static bool heard_other_since(const struct mgr_monitor *m, uint32_t id,
			      uint64_t since)
{
	for (uint32_t i = 0; i < TW_MAX_IODS; i++)
		if (i + 1 != id && m->iod[i].ok_ms && m->iod[i].ok_ms >= since)
			return true;
	return false;
}

static void on_pong(int status, struct wire_msg *reply, void *arg)
{
	struct ping *pg = arg;
	struct mgr_monitor *m = pg->m;
	struct mgr_server *s = m->s;
	struct mgr_map_iod *mi;
	struct mon_iod *mo;
	char why[96];

	if (m->stopping)
		goto out;
	mi = mgr_map_iod(&s->st.map, pg->id);
	mo = &m->iod[pg->id - 1];
	if (pg->probe)
		mo->probe_busy = false;
	else
		mo->ping_busy = false;
	if (!mi || !mgr_map_formed(&s->st.map, mi))
		goto out;
	if (status == 0 && reply && reply->body &&
	    reply->body->descriptor == &twinfs__ping__descriptor) {
		const Twinfs__Ping *p = (const Twinfs__Ping *)reply->body;

		mo->missed = 0;
		mo->ok_ms = tw_now_ms();
		if (pg->probe)
			mo->probe_ok_ms = mo->ok_ms;
		if (p->incarnation != mi->incarnation)
			goto out;   /* restarted; its registration decides */
		if (mi->state == MGR_IOD_SUSPECT || mi->state == MGR_IOD_DOWN)
			mgr_srv_map_event(s, pg->id, R1_EV_PING_OK, 0,
					  pg->probe ? "answered a probe"
						    : "answered a ping");
		goto out;
	}
	if (status == 0)
		status = -EPROTO;
	if (status == -ECANCELED)
		goto out;
	if (is_silence(status) && !heard_other_since(m, pg->id, pg->sent_ms)) {
		tw_log_rl(TW_LOG_WARN, "mgrd: iod %u did not answer a %s, and no "
			  "other iod has answered since it was sent: mgrd itself "
			  "may be cut off; nobody is demoted", pg->id,
			  pg->probe ? "probe" : "ping");
		goto out;
	}
	if (pg->probe) {
		snprintf(why, sizeof(why), "probe after a report failed: %s",
			 status == -ETIMEDOUT ? "no answer in time"
					      : strerror(-status));
		mgr_srv_map_event(s, pg->id, R1_EV_PROBE_FAILED, 0, why);
		mo->missed = 0;
		goto out;
	}
	mo->missed++;
	snprintf(why, sizeof(why), "%u missed ping%s, last: %s", mo->missed,
		 mo->missed == 1 ? "" : "s",
		 status == -ETIMEDOUT ? "no answer in time" : strerror(-status));
	mgr_srv_map_event(s, pg->id, R1_EV_PING_MISSED, mo->missed, why);
out:
	if (!m->stopping && pg->id >= 1 && pg->id <= TW_MAX_IODS &&
	    m->iod[pg->id - 1].probe_wanted && !m->iod[pg->id - 1].probe_busy) {
		m->iod[pg->id - 1].probe_wanted = false;
		send_ping(m, pg->id, true);
	}
	if (reply)
		wire_msg_free(reply);
	free(pg);
}

static void send_ping(struct mgr_monitor *m, uint32_t id, bool probe)
{
	struct mgr_server *s = m->s;
	struct wire_peer *peer = mgr_pool_peer(s->pool, id);
	struct mon_iod *mo = &m->iod[id - 1];
	struct ping *pg;
	int rc;

	if (!peer || m->stopping)
		return;
	pg = calloc(1, sizeof(*pg));
	if (!pg)
		return;
	pg->m = m;
	pg->id = id;
	pg->probe = probe;
	pg->sent_ms = tw_now_ms();
	twinfs__ping__init(&pg->body);
	pg->body.epoch = s->st.map.epoch;
	pg->body.incarnation = s->incarnation;
	rc = wire_call(peer, TWINFS__MSG_TYPE__MSG_PING, &pg->body.base, NULL,
		       0, probe ? m->probe_timeout_ms : m->ping_timeout_ms,
		       on_pong, pg);
	if (rc < 0) {
		free(pg);
		return;
	}
	if (probe)
		mo->probe_busy = true;
	else
		mo->ping_busy = true;
	if (!probe)
		return;
	/* Witnesses: a probe that times out demotes only if another iod
	 * answers meanwhile (see the top of the file). */
	for (uint32_t i = 0; i < s->st.map.n_iods && i < TW_MAX_IODS; i++) {
		struct mgr_map_iod *w = &s->st.map.iods[i];

		if (w->id != id && mgr_map_formed(&s->st.map, w) &&
		    !m->iod[i].ping_busy)
			send_ping(m, w->id, false);
	}
}

static void on_tick(uv_timer_t *t)
{
	struct mgr_monitor *m = t->data;
	struct mgr_map *map = &m->s->st.map;

	if (m->stopping || m->s->stopping || !mgr_srv_serving(m->s))
		return;   /* a standby watches nothing (docs "Election") */
	for (uint32_t i = 0; i < map->n_iods && i < TW_MAX_IODS; i++) {
		struct mgr_map_iod *mi = &map->iods[i];

		if (!mgr_map_formed(map, mi) || m->iod[i].ping_busy)
			continue;
		send_ping(m, mi->id, false);
	}
}

void mgr_monitor_report(struct mgr_monitor *m, uint32_t iod_id)
{
	struct mgr_map *map = &m->s->st.map;
	struct mgr_map_iod *mi = mgr_map_iod(map, iod_id);
	struct mon_iod *mo;

	if (!mi || iod_id > TW_MAX_IODS || m->stopping)
		return;
	mo = &m->iod[iod_id - 1];
	/* Already demoted: the reporter only needs the map (it polls). */
	if (mi->state == MGR_IOD_DOWN || !mgr_map_formed(map, mi))
		return;
	if (mo->probe_busy)
		return;
	if (mo->probe_ok_ms && tw_now_ms() - mo->probe_ok_ms < MON_PROBE_GAP_MS)
		return;
	send_ping(m, iod_id, true);
}

void mgr_monitor_twin_back(struct mgr_monitor *m, uint32_t iod_id)
{
	struct mgr_map *map = &m->s->st.map;
	struct mgr_map_iod *mi = mgr_map_iod(map, iod_id);
	struct mgr_map_iod *tw;

	if (!mi || m->stopping || mi->state == MGR_IOD_DOWN ||
	    mi->state == MGR_IOD_SUSPECT)
		return;
	tw = mgr_map_twin(map, mi->group, 1 - (int)mi->twin_index);
	if (!tw || tw->state != MGR_IOD_DOWN || !mgr_map_formed(map, tw) ||
	    m->iod[tw->id - 1].ping_busy)
		return;
	send_ping(m, tw->id, false);
}

void mgr_monitor_reset(struct mgr_monitor *m, uint32_t iod_id)
{
	if (iod_id < 1 || iod_id > TW_MAX_IODS)
		return;
	m->iod[iod_id - 1].missed = 0;
	m->iod[iod_id - 1].probe_ok_ms = 0;
}

int mgr_monitor_start(struct mgr_server *s, struct mgr_monitor **out)
{
	struct mgr_monitor *m = calloc(1, sizeof(*m));
	uint32_t rt = tw_ms_or(s->conf->request_timeout_ms,
			       TW_REQUEST_TIMEOUT_MS);

	if (!m)
		return -ENOMEM;
	m->s = s;
	m->interval_ms = s->conf->monitor_interval_ms
			 ? TW_MAX(s->conf->monitor_interval_ms, 100u) : 30000;
	m->ping_timeout_ms = TW_MIN(m->interval_ms, rt);
	/* Half the request timeout: the reporter waited rt/2 for its
	 * attempt, so detection plus demotion fit in one request_timeout
	 * (fuse-client/ops_data.c, "Failover budget"). */
	m->probe_timeout_ms = TW_MAX(rt / 2, 1u);
	uv_timer_init(s->loop, &m->timer);
	m->timer.data = m;
	/* The first round goes out right after start: an mgrd that restarts
	 * finds the iods as its journal left them, and one that is marked
	 * down but runs again (it came back while mgrd was away, or while
	 * its twin was down and nothing could resync it) rejoins at once,
	 * not a monitor_interval later.  One ping each; a miss alone demotes
	 * nobody. */
	uv_timer_start(&m->timer, on_tick, TW_MIN(m->interval_ms, MON_FIRST_MS),
		       m->interval_ms);
	tw_info("mgrd: monitor pings every iod every %u ms (a miss: no answer "
		"in %u ms), down after %u misses; probes wait %u ms",
		m->interval_ms, m->ping_timeout_ms,
		s->conf->down_after ? s->conf->down_after : 2,
		m->probe_timeout_ms);
	*out = m;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

void mgr_monitor_stop(struct mgr_monitor *m)
{
	if (!m || m->stopping)
		return;
	m->stopping = true;
	uv_timer_stop(&m->timer);
	uv_close((uv_handle_t *)&m->timer, on_timer_closed);
}
