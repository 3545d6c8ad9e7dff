/* mgr.c - the iod's registration with mgrd and its copy of the cluster map.
 *
 * At start the iod sends IOD_REGISTER{iod_id, uuid, incarnation} to mgrd
 * over one wire_peer (HELLO role IOD, node_id = our id), retrying every
 * second until mgrd answers with the ClusterMap; until then server.c
 * answers everything but HELLO, PING and MAP_UPDATE with -EAGAIN.  After
 * every reconnection to mgrd (an mgrd restart; the timer reconnects within a
 * second) the iod registers again with the same incarnation, so mgrd learns
 * it is alive and pushes it map updates again; the incarnation changes
 * only when the iod process restarts (random 64 bits at start).
 *
 * The map changes only by mgrd's word: the IOD_REGISTER reply, GET_MAP
 * replies (asked when a request or HELLO reply carries a newer epoch), and
 * MAP_UPDATE pushes, either on our peer (on_push) or as a request on a
 * connection mgrd opened to us (server.c).  A map older than ours is
 * ignored.  Maps are validated before use: ids, groups, hosts and ports in
 * range.
 *
 * Reports (MSG_REPORT): a forward to the twin that failed on the transport
 * (twin.c T3), and ourselves once our journal has aborted (J12): we keep
 * reporting every REGISTER_RETRY_MS until the map says we are down.  Also
 * a twin that missed writes we applied (Report.missed_writes) while the
 * map still has it readable: a forward failed but mgrd did not demote it
 * (its probe answered, or mgrd was away and kept it up at its restart).
 * Reads would then find the two twins different; mgrd resyncs it.  We
 * report once the twin is still readable a request_timeout after the
 * failed forward (a dead twin is demoted by then), and keep reporting
 * until the map shows it unreadable.
 *
 * Fencing (proto/FORMAT.md "Fencing"): mgrd's list of expired client
 * sessions comes with every map mgrd sends us (so a map that makes us
 * primary again brings the list the other iods answered), with the
 * IOD_REGISTER reply (taken as it is: it is in place before we serve
 * anything), and in FENCE requests (server.c); otherwise a list with a
 * newer gen replaces ours.  twin.c refuses the WRITE and FALLOCATE of a
 * fenced session.
 *
 * An mgrd pair (proto/FORMAT.md "mgrd pair"): the peer connects to the
 * current address of d->mgrs; a failed connection, an -EREMOTE refusal or
 * an unanswered registration moves it to the active named or the other
 * mgrd (common/mgrlist.h), and the iod registers there as after an mgrd
 * restart.  The first answer from another mgrd is logged once.
 *
 * --no-mgr (tests only): the map comes from the config with epoch 0 and
 * every iod up, and the iod serves at once.
 */
#include "iod_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define REGISTER_RETRY_MS 1000u

static const char *state_name(int s)
{
	switch (s) {
	case TWINFS__IOD_STATE__IOD_UP: return "up";
	case TWINFS__IOD_STATE__IOD_SUSPECT: return "suspect";
	case TWINFS__IOD_STATE__IOD_DOWN: return "down";
	case TWINFS__IOD_STATE__IOD_RESYNCING: return "resyncing";
	default: return "?";
	}
}

void iod_map_from_conf(struct iod *d)
{
	memset(&d->map, 0, sizeof(d->map));
	d->map.epoch = 0;
	d->map.n_groups = (uint32_t)d->conf->n_groups;
	for (int i = 0; i < d->conf->n_iods && i < TW_MAX_IODS; i++) {
		const struct tw_conf_iod *ci = &d->conf->iods[i];
		struct iod_map_iod *mi;

		if (ci->id < 1 || ci->id > TW_MAX_IODS)
			continue;
		mi = &d->map.iods[ci->id];
		mi->present = true;
		mi->group = (uint32_t)ci->group;
		mi->twin_index = (uint32_t)ci->twin_index;
		snprintf(mi->host, sizeof(mi->host), "%s", ci->host);
		mi->port = ci->port;
		mi->state = TWINFS__IOD_STATE__IOD_UP;
	}
}

int iod_map_apply(struct iod *d, const Twinfs__ClusterMap *m)
{
	struct iod_map *nm;
	const struct iod_map_iod *me, *twin;
	int old_twin_state;

	/* The fence list has its own order (gen), whatever the epoch. */
	if (m->fence && iod_fence_take(d, m->fence, false) < 0)
		return -EPROTO;
	if (m->epoch < d->map.epoch) {
		tw_debug("map epoch %" PRIu64 " older than ours (%" PRIu64
			 "): ignored", m->epoch, d->map.epoch);
		return 0;
	}
	if (m->n_iods > TW_MAX_IODS || m->n_groups > TW_MAX_GROUPS)
		return -EPROTO;
	nm = calloc(1, sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	nm->epoch = m->epoch;
	nm->n_groups = m->n_groups;
	nm->max_subfile_size = m->max_subfile_size;
	for (size_t i = 0; i < m->n_iods; i++) {
		const Twinfs__IodInfo *ii = m->iods[i];
		struct iod_map_iod *mi;

		if (!ii || ii->id < 1 || ii->id > TW_MAX_IODS ||
		    ii->group >= TW_MAX_GROUPS || ii->twin_index > 1 ||
		    !ii->host || strlen(ii->host) >= TW_HOST_MAX ||
		    ii->port < 1 || ii->port > 65535 ||
		    (int)ii->state < 0 || ii->state > TWINFS__IOD_STATE__IOD_RESYNCING ||
		    nm->iods[ii->id].present) {
			tw_log_rl(TW_LOG_ERR, "map epoch %" PRIu64 " from mgrd "
				  "is malformed (iod entry %zu); ignored",
				  m->epoch, i);
			free(nm);
			return -EPROTO;
		}
		mi = &nm->iods[ii->id];
		mi->present = true;
		mi->group = ii->group;
		mi->twin_index = ii->twin_index;
		snprintf(mi->host, sizeof(mi->host), "%s", ii->host);
		mi->port = (int)ii->port;
		mi->state = ii->state;
		mi->needs_resync = ii->needs_resync;
		mi->incarnation = ii->incarnation;
	}
	me = &nm->iods[d->id];
	if (me->present && (me->group != (uint32_t)d->me->group ||
			    me->twin_index != (uint32_t)d->me->twin_index))
		tw_log_rl(TW_LOG_ERR, "map epoch %" PRIu64 " places iod %" PRIu32
			  " in group %" PRIu32 " twin %" PRIu32 ", the config "
			  "says group %d twin %d; using the config", m->epoch,
			  d->id, me->group, me->twin_index, d->me->group,
			  d->me->twin_index);
	old_twin_state = d->map.iods[d->twin_id].state;
	if (nm->epoch != d->map.epoch)
		tw_info("cluster map epoch %" PRIu64 " (was %" PRIu64 ")",
			nm->epoch, d->map.epoch);
	d->map = *nm;
	free(nm);
	twin = &d->map.iods[d->twin_id];
	if (twin->present && twin->state != old_twin_state)
		tw_info("twin iod %" PRIu32 " is %s in epoch %" PRIu64,
			d->twin_id, state_name(twin->state), d->map.epoch);
	iod_twin_map_changed(d);
	if (twin->present && twin->state != old_twin_state &&
	    twin->state == TWINFS__IOD_STATE__IOD_DOWN && twin->needs_resync)
		iod_twin_demoted(d);
	return 0;
}

/* ------------------------------------------------------------- fencing */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int iod_fence_take(struct iod *d, const Twinfs__Fence *f, bool replace)
{
	if (f->n_sessions > WIRE_FENCE_MAX || f->n_sessions > f->gen)
		return -EPROTO;
	if (!replace && f->gen <= d->fence_gen)
		return 0;            /* an older list (or ours again) */
	if (f->n_sessions) {   /* protobuf-c leaves an empty list NULL */
		memcpy(d->fenced, f->sessions,
		       f->n_sessions * sizeof(d->fenced[0]));
		qsort(d->fenced, f->n_sessions, sizeof(d->fenced[0]), cmp_u64);
	}
	if (f->gen != d->fence_gen)
		tw_info("iod %" PRIu32 ": fence list %" PRIu64 " from mgrd: "
			"writes of %zu expired client sessions are refused",
			d->id, f->gen, f->n_sessions);
	d->n_fenced = (uint32_t)f->n_sessions;
	d->fence_gen = f->gen;
	return 0;
}

bool iod_fenced(const struct iod *d, uint64_t session)
{
	return session && bsearch(&session, d->fenced, d->n_fenced,
				  sizeof(d->fenced[0]), cmp_u64);
}

/* ----------------------------------------------------------- register */

static void send_register(struct iod *d);

/* Whether the peer's current (or last) connection is to d->mgrs' current
 * address: a failure from one already left counts no more. */
static bool at_current(struct iod *d)
{
	const struct tw_mgr_addr *a = tw_mgrlist_cur(&d->mgrs);
	char name[TW_HOST_MAX + 16];

	snprintf(name, sizeof(name), "%s:%d", a->host, a->port);
	return strcmp(wire_peer_name(d->mgr_peer), name) == 0;
}

/* An attempt on the current mgrd failed (reply: a HELLO refusal, which
 * may name the active).  One mgrd: retried in place, as ever. */
static void mgr_addr_failed(struct iod *d, int status,
			    const Twinfs__HelloReply *reply)
{
	const struct tw_mgr_addr *a;
	const char *why = wire_peer_refusal(d->mgr_peer);
	uint32_t delay;

	if (d->closing || !at_current(d) ||
	    (status != -EREMOTE && d->mgrs.n < 2))
		return;
	if (status == -EREMOTE && reply)
		tw_mgrlist_learn_id(&d->mgrs, reply->mgrd_id);
	delay = tw_mgrlist_failed(&d->mgrs, status == -EREMOTE ?
				  TW_MGR_REMOTE : TW_MGR_UNREACHABLE,
				  status == -EREMOTE && *why ? why
				  : strerror(-status),
				  status == -EREMOTE && reply ?
				  reply->active_addr : NULL,
				  d->conf->mgr_timeout_ms);
	d->mgr_hold_ms = tw_now_ms() + delay;
	a = tw_mgrlist_cur(&d->mgrs);
	wire_peer_set_addr(d->mgr_peer, a->host, a->port);
	if (wire_peer_connected(d->mgr_peer))
		wire_peer_reset(d->mgr_peer);   /* unanswered: leave it */
}

static void on_register_reply(int status, struct wire_msg *reply, void *arg)
{
	struct iod *d = arg;
	const Twinfs__ClusterMap *map;
	int rc;

	d->reg_inflight = false;
	if (status < 0 || !reply || !reply->body ||
	    reply->body->descriptor != &twinfs__cluster_map__descriptor) {
		if (status == 0)
			status = -EPROTO;
		if (status != -ECANCELED)
			tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": registration "
				  "with mgrd %s failed: %s; retrying",
				  d->id, wire_peer_name(d->mgr_peer),
				  strerror(-status));
		if (status == -ETIMEDOUT)
			mgr_addr_failed(d, status, NULL);
		goto out;
	}
	map = (const Twinfs__ClusterMap *)reply->body;
	/* mgrd's list as it is now, even with a lower gen than ours (mgrd
	 * lost its journal's tail with its host: its list is the truth);
	 * iod_map_apply then finds it taken. */
	rc = map->fence ? iod_fence_take(d, map->fence, true) : 0;
	if (rc == 0)
		rc = iod_map_apply(d, map);
	if (rc < 0)
		goto out;
	if (!d->registered)
		tw_info("iod %" PRIu32 " registered with mgrd %s (epoch %"
			PRIu64 ", incarnation %016" PRIx64 ")", d->id,
			wire_peer_name(d->mgr_peer), d->map.epoch,
			d->incarnation);
	d->registered = true;
	d->ever_registered = true;
out:
	if (reply)
		wire_msg_free(reply);
}

static void send_register(struct iod *d)
{
	Twinfs__IodRegister r = TWINFS__IOD_REGISTER__INIT;
	int rc;

	if (d->reg_inflight || d->closing || !d->mgr_peer)
		return;
	r.iod_id = d->id;
	r.uuid.data = (uint8_t *)iod_store_uuid(d->store);
	r.uuid.len = IOD_UUID_LEN;
	r.incarnation = d->incarnation;
	r.fresh = iod_store_is_new(d->store);
	r.max_subfile_size = iod_store_max_size(d->store);
	rc = wire_call(d->mgr_peer, TWINFS__MSG_TYPE__MSG_IOD_REGISTER, &r.base,
		       NULL, 0, REGISTER_RETRY_MS * 3, on_register_reply, d);
	if (rc < 0) {
		tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": cannot send "
			  "IOD_REGISTER: %s", d->id, strerror(-rc));
		return;
	}
	d->reg_inflight = true;
}

static void on_map_reply(int status, struct wire_msg *reply, void *arg)
{
	struct iod *d = arg;

	d->map_inflight = false;
	if (status == 0 && reply && reply->body &&
	    reply->body->descriptor == &twinfs__cluster_map__descriptor)
		iod_map_apply(d, (const Twinfs__ClusterMap *)reply->body);
	else if (status != -ECANCELED)
		tw_log_rl(TW_LOG_WARN, "GET_MAP from mgrd failed: %s",
			  strerror(status < 0 ? -status : EPROTO));
	if (reply)
		wire_msg_free(reply);
}

void iod_mgr_refresh(struct iod *d)
{
	Twinfs__Empty e = TWINFS__EMPTY__INIT;

	if (d->no_mgr || !d->mgr_peer || d->map_inflight || d->closing)
		return;
	if (wire_call(d->mgr_peer, TWINFS__MSG_TYPE__MSG_GET_MAP, &e.base,
		      NULL, 0, d->conf->request_timeout_ms, on_map_reply,
		      d) == 0)
		d->map_inflight = true;
}

static void on_report_reply(int status, struct wire_msg *reply, void *arg)
{
	(void)status;
	if (reply)
		wire_msg_free(reply);
	free(arg);
}

/* kind: 0 a failure, 1 missed writes (of iod_id, our twin), 2 lost data
 * (ours). */
enum { REPORT_FAILURE, REPORT_MISSED, REPORT_LOST };

static void send_report(struct iod *d, uint32_t iod_id, int status, int kind)
{
	Twinfs__Report *r = calloc(1, sizeof(*r));

	if (!r)
		return;
	twinfs__report__init(r);
	r->iod_id = iod_id;
	r->error = status;
	r->epoch = d->map.epoch;
	r->reporter_iod = d->id;
	r->missed_writes = kind == REPORT_MISSED;
	r->lost_data = kind == REPORT_LOST;
	if (kind == REPORT_LOST)
		(void)iod_store_lost_first(d->store, &r->lost_ino,
					   &r->lost_column);
	if (wire_call(d->mgr_peer, TWINFS__MSG_TYPE__MSG_REPORT, &r->base, NULL,
		      0, d->conf->request_timeout_ms, on_report_reply, r) < 0)
		free(r);
}

void iod_mgr_report_bad_block(struct iod *d, uint64_t ino, uint32_t column,
			      uint64_t off, bool healed)
{
	Twinfs__Report *r;

	if (d->no_mgr || !d->mgr_peer || d->closing)
		return;
	r = calloc(1, sizeof(*r));
	if (!r)
		return;
	twinfs__report__init(r);
	r->iod_id = d->id;
	r->reporter_iod = d->id;
	r->error = -EBADMSG;
	r->epoch = d->map.epoch;
	r->bad_block = true;
	r->lost_ino = ino;
	r->lost_column = column;
	r->bad_offset = off;
	r->bad_healed = healed;
	if (wire_call(d->mgr_peer, TWINFS__MSG_TYPE__MSG_REPORT, &r->base, NULL,
		      0, d->conf->request_timeout_ms, on_report_reply, r) < 0)
		free(r);
}

void iod_mgr_report(struct iod *d, uint32_t iod_id, int status)
{
	uint64_t now = tw_now_ms();

	if (d->no_mgr || !d->mgr_peer || d->closing)
		return;
	/* mgrd probes once per report anyway; one per epoch and
	 * IOD_REPORT_GAP_MS is plenty. */
	if (d->report_epoch == d->map.epoch &&
	    now - d->report_ms < IOD_REPORT_GAP_MS)
		return;
	d->report_epoch = d->map.epoch;
	d->report_ms = now;
	send_report(d, iod_id, status, REPORT_FAILURE);
}

void iod_mgr_report_self(struct iod *d)
{
	if (d->no_mgr || !d->mgr_peer || d->closing)
		return;
	send_report(d, d->id, -EIO, REPORT_FAILURE);
}

/* Whether to tell mgrd (again) that we hold subfiles as lost: at once
 * when one is new, then every IOD_LOST_REPORT_MS while any is left (a full
 * resync deletes them; mgrd turns an incremental one into a full one). */
#define IOD_LOST_REPORT_MS 5000u

static bool lost_due(struct iod *d)
{
	uint64_t now = tw_now_ms(), news = iod_store_lost_news(d->store);

	if (iod_store_n_lost(d->store) == 0)
		return false;
	if (news == d->lost_reported && now - d->lost_report_ms <
	    IOD_LOST_REPORT_MS)
		return false;
	d->lost_reported = news;
	d->lost_report_ms = now;
	return true;
}

/* Whether the twin still looks readable to us although it missed writes
 * we applied; clears the flag once it does not. */
static bool missed_unheard(struct iod *d)
{
	if (d->missed_unheard && !iod_twin_peer_readable(d))
		d->missed_unheard = false;   /* mgrd knows: it resyncs */
	return d->missed_unheard;
}

void iod_mgr_report_missed(struct iod *d)
{
	if (!d->missed_unheard)
		d->missed_since_ms = tw_now_ms();
	d->missed_unheard = true;
}

/* A failed forward is first mgrd's to judge: a dead twin is demoted
 * within request_timeout (its probe fails).  Only a twin still readable
 * after that, by our map, is reported as having missed writes. */
static bool missed_due(struct iod *d)
{
	return missed_unheard(d) && d->registered &&
	       tw_now_ms() - d->missed_since_ms >= d->conf->request_timeout_ms;
}

/* Whether mgrd still has to learn that our journal aborted: our own entry
 * is not yet down in the map (a probe within 500 ms of a successful one
 * is skipped, and mgrd may have been away when we reported). */
static bool abort_unheard(const struct iod *d)
{
	const struct iod_map_iod *me = &d->map.iods[d->id];

	return iod_store_aborted(d->store) < 0 && me->present &&
	       me->state != TWINFS__IOD_STATE__IOD_DOWN;
}

static void on_mgr_connect(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *reply, void *arg)
{
	struct iod *d = arg;
	char msg[512];

	(void)p;
	if (status < 0) {
		mgr_addr_failed(d, status, reply);
		return;   /* the retry timer tries again */
	}
	if (at_current(d) && reply)
		tw_mgrlist_learn_id(&d->mgrs, reply->mgrd_id);
	if (at_current(d) && tw_mgrlist_ok(&d->mgrs, msg, sizeof(msg)))
		tw_info("iod %" PRIu32 ": %s", d->id, msg);
	/* After an mgrd restart: tell it we are alive (same incarnation). */
	if (d->ever_registered)
		send_register(d);
	if (reply && reply->epoch > d->map.epoch)
		iod_mgr_refresh(d);
}

static void on_mgr_push(struct wire_peer *p, struct wire_msg *m, void *arg)
{
	struct iod *d = arg;

	(void)p;
	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_MAP_UPDATE && m->body &&
	    m->body->descriptor == &twinfs__cluster_map__descriptor)
		iod_map_apply(d, (const Twinfs__ClusterMap *)m->body);
	else
		tw_log_rl(TW_LOG_WARN, "mgrd pushed %s; ignored",
			  wire_type_name(m->hdr.type));
	wire_msg_free(m);
}

static void on_timer(uv_timer_t *t)
{
	struct iod *d = t->data;

	if (tw_now_ms() < d->mgr_hold_ms)
		return;   /* the pair's backoff (mgrlist.h) */
	if (!d->registered) {
		send_register(d);
		return;
	}
	if (abort_unheard(d))
		iod_mgr_report_self(d);
	iod_twin_stale_check(d);
	if (missed_due(d))
		send_report(d, d->twin_id, -EIO, REPORT_MISSED);
	if (lost_due(d))
		send_report(d, d->id, -EIO, REPORT_LOST);
	/* Stay connected: mgrd pushes map updates only to iods connected to
	 * it, and a reconnection re-registers (on_mgr_connect). */
	if (!wire_peer_connected(d->mgr_peer))
		wire_peer_connect(d->mgr_peer);
}

int iod_mgr_start(struct iod *d)
{
	Twinfs__Hello hello;
	struct wire_peer_opts o = { 0 };
	int rc;

	if (d->no_mgr) {
		iod_map_from_conf(d);
		d->registered = true;
		tw_warn("iod %" PRIu32 ": --no-mgr: serving without mgrd, map "
			"from the config (tests only)", d->id);
		return 0;
	}
	/* The twin's address is known from the config until mgrd answers,
	 * but nothing is served before registration. */
	iod_map_from_conf(d);
	iod_hello(d, &hello);
	rc = tw_mgrlist_conf(&d->mgrs, d->conf);
	if (rc < 0) {
		tw_err("iod %" PRIu32 ": bad mgrd addresses in the config",
		       d->id);
		return rc;
	}
	o.host = tw_mgrlist_cur(&d->mgrs)->host;
	o.port = tw_mgrlist_cur(&d->mgrs)->port;
	o.hello = &hello;
	o.secret = d->conf->secret;
	o.channel = d->conf->channel;
	o.on_connect = on_mgr_connect;
	o.on_push = on_mgr_push;
	o.arg = d;
	o.reconnect_ms = REGISTER_RETRY_MS;
	rc = wire_peer_new(d->loop, &o, &d->mgr_peer);
	if (rc < 0) {
		tw_err("mgrd %s:%d: %s", o.host, o.port, strerror(-rc));
		return rc;
	}
	uv_timer_init(d->loop, &d->mgr_timer);
	d->mgr_timer.data = d;
	d->mgr_timer_init = true;
	uv_timer_start(&d->mgr_timer, on_timer, REGISTER_RETRY_MS,
		       REGISTER_RETRY_MS);
	send_register(d);
	return 0;
}

void iod_mgr_stop(struct iod *d)
{
	if (d->mgr_timer_init) {
		uv_timer_stop(&d->mgr_timer);
		uv_close((uv_handle_t *)&d->mgr_timer, NULL);
		d->mgr_timer_init = false;
	}
	if (d->mgr_peer) {
		wire_peer_free(d->mgr_peer);
		d->mgr_peer = NULL;
	}
}
