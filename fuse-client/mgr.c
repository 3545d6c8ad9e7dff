/* mgr.c - the client's side of mgrd: sessions, numbered requests with
 * retransmission, the cluster map and the monitor pings.
 *
 * Exactly once (proto/FORMAT.md "Sessions and exactly-once"): every request
 * gets the next seq of the session when first sent and keeps it across
 * retransmissions.  A request that fails with a transport error is sent
 * again (same seq) after a backoff, until its deadline (mgr_timeout) passes;
 * then it fails with EIO.  acked_seq is one less than the oldest request
 * still waiting for its reply, so mgrd may drop every reply below it.
 * The session id comes from mgrd's first HELLO reply and is put into the
 * HELLO of both mgrd peers (wire_peer_set_hello) so reconnects resume it.
 *
 * The map: GET_MAP at start, again on MAP_UPDATE pushes, on -ESTALE from an
 * iod and when a ping shows a newer epoch.  One wire_peer per iod, created
 * from the map.  Routing follows raid's twin policy on the map's states
 * (r1_write_primary, r1_read_pick, r1_read_fallback).
 *
 * Interrupts (docs/ARCHITECTURE.md "Client": leases and interrupts): a
 * request that waits to be sent again (mgrd unreachable) ends with EINTR
 * as soon as its caller is interrupted.  One on the wire waits for its
 * answer as long as mgrd is alive: the interrupt sends mgrd a ping on the
 * control connection, and the request ends with EINTR only when
 * FC_MGR_INTR_GRACE_MS passed without an answer to it (mgrd hung or cut
 * off), or when the attempt times out.  mgrd applies what it received
 * whether or not we wait (a truncate through a hung twin takes seconds),
 * and on a local file system mkdir, open(O_CREAT) or rename never fail
 * with EINTR: a program told EINTR for a change that was made retries
 * into EEXIST or ENOENT.  Only a silent mgrd leaves the outcome unknown,
 * as a timeout does.  The same holds for calls without a ctx that an op
 * waits for (a non-blocking LOCK, GETLK; locks.c then treats the lock
 * table as uncertain).
 *
 * An mgrd pair (proto/FORMAT.md "mgrd pair"): both peers connect to the
 * current address of cl->mgrs.  A failed attempt there (no connection,
 * -EREMOTE, or with two addresses a request or ping unanswered in time)
 * moves both to the active it named or to the other address, as
 * common/mgrlist.h decides; requests are then sent again with their seq
 * on the new active, which resumes the session, exactly as after an mgrd
 * restart.  The first answer from another mgrd than before is logged
 * once, with why.
 *
 * Failover monitor: every monitor_interval, a PING to mgrd on the control
 * connection and to every iod the map does not call down; a ping not
 * answered within min(request_timeout, monitor_interval) is reported to
 * mgrd (MSG_REPORT, on the control connection) like a data-path error.
 *
 * Everything here runs on the loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlease.h"
#include "ident.h"
#include "locks.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "statahead.h"

#define FC_MGR_RETRY_MIN_MS    100
#define FC_MGR_RETRY_MAX_MS    2000
/* How long an interrupted mgrd request on the wire waits for its answer
 * before it ends with EINTR, unless mgrd answers a ping meanwhile
 * (fc_mgr_interrupts). */
#define FC_MGR_INTR_GRACE_MS   1000
#define FC_REPORT_GAP_MS       200          /* reports of one iod, per epoch */

struct fc_mgr_flight {
	struct fc_mgr_call *mc;    /* NULL once abandoned */
	struct fc_client *cl;
};

bool fc_is_transport_err(int status)
{
	switch (status) {
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ENOTCONN:
	case -EPIPE:
	case -ECONNABORTED:
	case -EAGAIN:
		return true;
	default:
		return false;
	}
}

bool fc_mgr_retryable(int status)
{
	return status == -EREMOTE || fc_is_transport_err(status);
}

const char *fc_cause_after(int status, uint32_t timeout_ms, char *buf,
			   size_t len)
{
	if (status == -ETIMEDOUT && timeout_ms % 1000 == 0)
		snprintf(buf, len, "timed out after %u s", timeout_ms / 1000);
	else if (status == -ETIMEDOUT)
		snprintf(buf, len, "timed out after %u ms", timeout_ms);
	else
		snprintf(buf, len, "failed: %s", strerror(-status));
	return buf;
}

const char *fc_cause(struct fc_client *cl, int status, char *buf, size_t len)
{
	return fc_cause_after(status, cl->opts.request_timeout_ms, buf, len);
}

const char *fc_iod_name(const struct fc_iod *iod, char *buf, size_t len)
{
	snprintf(buf, len, "iod %u (%s:%d)", iod->id, iod->host, iod->port);
	return buf;
}

/* ------------------------------------------------------------ sessions */

void fc_mgr_fill_hello(struct fc_client *cl, Twinfs__Hello *h, bool control)
{
	wire_hello_init(h, cl->opts.cluster, TWINFS__ROLE__ROLE_CLIENT,
			cl->incarnation);
	h->session_id = cl->session;
	h->session_secret.data = cl->session_secret;
	h->session_secret.len = cl->session_secret_len;
	h->hostname = cl->hostname;
	h->control = control;
	h->subdir = cl->opts.subdir ? cl->opts.subdir : (char *)"";
}

/* The HELLO to an iod: our session, which the caps we send it must name
 * (proto/FORMAT.md "Capabilities"), never its secret, which is mgrd's
 * business alone. */
void fc_mgr_fill_iod_hello(struct fc_client *cl, Twinfs__Hello *h)
{
	fc_mgr_fill_hello(cl, h, false);
	h->subdir = (char *)"";
	h->session_secret.data = NULL;
	h->session_secret.len = 0;
}

/* mgrd named the session bound to a connection: normally ours; a new one
 * when mgrd lost ours (then exactly-once and open handles of the old one
 * are gone).  Future HELLOs carry it, with its secret; the iod
 * connections are made again to carry it (their caps name it), and the
 * calls on them retry as after any lost connection. */
static void adopt_session(struct fc_client *cl, struct wire_peer *p,
			  const Twinfs__HelloReply *reply)
{
	uint64_t session = reply->session_id;
	const ProtobufCBinaryData *sec = &reply->session_secret;
	Twinfs__Hello h;

	if (session == 0 || (session == cl->session &&
			     sec->len == cl->session_secret_len &&
			     (sec->len == 0 ||
			      memcmp(sec->data, cl->session_secret,
				     sec->len) == 0)))
		return;
	if (cl->session && session != cl->session)
		tw_warn("mgrd %s did not resume session %" PRIu64
			" (now %" PRIu64 "): open files may have been released",
			wire_peer_name(p), cl->session, session);
	cl->session = session;
	cl->session_secret_len = TW_MIN(sec->len, sizeof(cl->session_secret));
	if (cl->session_secret_len)   /* data is NULL when absent */
		memcpy(cl->session_secret, sec->data, cl->session_secret_len);
	fc_mgr_fill_hello(cl, &h, false);
	if (cl->mgr)
		wire_peer_set_hello(cl->mgr, &h);
	fc_mgr_fill_hello(cl, &h, true);
	if (cl->ctl)
		wire_peer_set_hello(cl->ctl, &h);
	fc_mgr_fill_iod_hello(cl, &h);
	for (uint32_t id = 1; id <= TW_MAX_IODS; id++)
		if (cl->iods[id].peer &&
		    wire_peer_set_hello(cl->iods[id].peer, &h) == 0)
			wire_peer_reset(cl->iods[id].peer);
}

/* Whether p's current (or last) connection is to mgrs' current address:
 * a failure reported from an address already left counts no more. */
static bool at_current(struct fc_client *cl, struct wire_peer *p)
{
	const struct tw_mgr_addr *a = tw_mgrlist_cur(&cl->mgrs);
	char name[TW_HOST_MAX + 16];

	snprintf(name, sizeof(name), "%s:%d", a->host, a->port);
	return strcmp(wire_peer_name(p), name) == 0;
}

/* An attempt on the current mgrd failed (status; reply: a HELLO refusal,
 * may name the active).  With one address only -EREMOTE moves (to the
 * active it names); everything else keeps today's retrying in place. */
static void mgr_addr_failed(struct fc_client *cl, struct wire_peer *p,
			    int status, const Twinfs__HelloReply *reply)
{
	const struct tw_mgr_addr *a;
	const char *hint = NULL;
	char cause[192];
	uint32_t delay;

	if (cl->stopping || !at_current(cl, p) ||
	    (status != -EREMOTE && cl->mgrs.n < 2))
		return;
	if (status == -EREMOTE && reply) {
		hint = reply->active_addr;
		tw_mgrlist_learn_id(&cl->mgrs, reply->mgrd_id);
	}
	if (status == -EREMOTE && *wire_peer_refusal(p))
		snprintf(cause, sizeof(cause), "%s", wire_peer_refusal(p));
	else
		fc_cause(cl, status, cause, sizeof(cause));
	delay = tw_mgrlist_failed(&cl->mgrs, status == -EREMOTE ?
				  TW_MGR_REMOTE : TW_MGR_UNREACHABLE, cause,
				  hint, cl->opts.mgr_timeout_ms);
	cl->mgr_hold_ms = tw_now_ms() + delay;
	a = tw_mgrlist_cur(&cl->mgrs);
	tw_debug("mgrd %s: %s; next try %s:%d in %u ms", wire_peer_name(p),
		 cause, a->host, a->port, delay);
	wire_peer_set_addr(cl->mgr, a->host, a->port);
	wire_peer_set_addr(cl->ctl, a->host, a->port);
	/* A connection still up to the one left (it left a request or a
	 * ping unanswered) goes: its calls are sent again to the new
	 * address.  So does a connect still in flight to it (a silent
	 * host: the kernel would try for a minute or more before the new
	 * address were tried).  A peer whose connecting failed is idle. */
	if (wire_peer_connected(cl->mgr) || wire_peer_connecting(cl->mgr))
		wire_peer_reset(cl->mgr);
	if (wire_peer_connected(cl->ctl) || wire_peer_connecting(cl->ctl))
		wire_peer_reset(cl->ctl);
}

/* The current mgrd answered a HELLO: say so once when it is another one
 * than before (then true). */
static bool mgr_addr_ok(struct fc_client *cl, struct wire_peer *p,
			const Twinfs__HelloReply *reply)
{
	char msg[512];

	if (!at_current(cl, p))
		return false;
	tw_mgrlist_learn_id(&cl->mgrs, reply->mgrd_id);
	if (!tw_mgrlist_ok(&cl->mgrs, msg, sizeof(msg)))
		return false;
	tw_info("%s", msg);
	return true;
}

static void on_mgr_connect(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *reply, void *arg)
{
	struct fc_client *cl = arg;
	bool restarted, switched;

	if (status < 0) {
		cl->mgr_last_connect_err = status;
		mgr_addr_failed(cl, p, status, reply);
		return;
	}
	cl->mgr_last_connect_err = 0;
	switched = mgr_addr_ok(cl, p, reply);
	fc_dl_drop_all(&cl->dl);   /* dlease.c D4 */
	if (cl->mgr_down_logged) {
		tw_info("mgrd %s reachable again", wire_peer_name(p));
		cl->mgr_down_logged = false;
	}
	if (cl->mgr_incarnation && reply->incarnation != cl->mgr_incarnation)
		tw_info("mgrd %s %s; resuming session %" PRIu64,
			wire_peer_name(p), switched ? "is the other of the pair"
						    : "restarted", cl->session);
	restarted = cl->mgr_incarnation &&
		    reply->incarnation != cl->mgr_incarnation;
	cl->mgr_incarnation = reply->incarnation;
	adopt_session(cl, p, reply);
	fc_ident_hello(cl, reply);
	/* Locks live in mgrd's memory: take ours again within its grace. */
	if (restarted)
		fc_lock_reclaim(cl);
}

static void pushed(struct fc_client *cl, struct wire_msg *m)
{
	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_DIR_RECALL && m->body &&
	    m->body->descriptor == &twinfs__getattr__descriptor) {
		/* Pushed on both connections: the second finds nothing. */
		fc_ident_swap(cl, m->body);
		fc_dl_recall(cl, ((const Twinfs__Getattr *)m->body)->ino);
	} else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_MAP_UPDATE &&
		   m->body &&
		   m->body->descriptor == &twinfs__cluster_map__descriptor) {
		const Twinfs__ClusterMap *map = (const void *)m->body;

		tw_debug("map update pushed: epoch %" PRIu64, map->epoch);
		fc_map_install(cl, map);
	}
	wire_msg_free(m);
}

static void on_mgr_push(struct wire_peer *p, struct wire_msg *m, void *arg)
{
	(void)p;
	pushed(arg, m);
}

static void on_ctl_connect(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *reply, void *arg)
{
	struct fc_client *cl = arg;

	cl->ctl_ok = status == 0;
	if (status < 0) {
		mgr_addr_failed(cl, p, status, reply);
		return;
	}
	mgr_addr_ok(cl, p, reply);
	fc_dl_drop_all(&cl->dl);   /* dlease.c D4 */
	adopt_session(cl, p, reply);
	fc_ident_hello(cl, reply);
	if (reply->epoch > cl->epoch && !cl->stopping)
		fc_map_refresh(cl, NULL);
}

int fc_mgr_init(struct fc_client *cl)
{
	char id[sizeof(WIRE_CLIENT_PREFIX) + TW_CLIENT_NAME_MAX];
	struct wire_peer_opts o;
	Twinfs__Hello h;
	int rc;

	memset(&o, 0, sizeof(o));
	o.host = tw_mgrlist_cur(&cl->mgrs)->host;
	o.port = tw_mgrlist_cur(&cl->mgrs)->port;
	o.hello = &h;
	o.on_connect = on_mgr_connect;
	o.on_push = on_mgr_push;
	o.arg = cl;
	o.reconnect_ms = 200;
	o.channel = cl->opts.channel;
	if (cl->opts.has_ident) {
		/* proto/FORMAT.md "Client identities" */
		snprintf(id, sizeof(id), "%s%s", WIRE_CLIENT_PREFIX,
			 cl->opts.ident);
		o.identity = (const uint8_t *)id;
		o.identity_len = strlen(id);
		o.key = cl->opts.ident_key;
		o.key_len = TW_CLIENT_KEY_LEN;
	}
	fc_mgr_fill_hello(cl, &h, false);
	rc = wire_peer_new(&cl->loop, &o, &cl->mgr);
	if (rc < 0)
		return rc;
	fc_mgr_fill_hello(cl, &h, true);
	o.on_connect = on_ctl_connect;
	rc = wire_peer_new(&cl->loop, &o, &cl->ctl);
	if (rc < 0)
		return rc;
	cl->next_seq = 1;
	return 0;
}

/* --------------------------------------------------- numbered requests */

static void list_append(struct fc_mgr_list *l, struct fc_mgr_call *mc)
{
	mc->list = l;
	mc->list_next = NULL;
	mc->list_prev = l->tail;
	if (l->tail)
		l->tail->list_next = mc;
	else
		l->head = mc;
	l->tail = mc;
}

static void list_remove(struct fc_mgr_call *mc)
{
	struct fc_mgr_list *l = mc->list;

	if (!l)
		return;
	if (mc->list_prev)
		mc->list_prev->list_next = mc->list_next;
	else
		l->head = mc->list_next;
	if (mc->list_next)
		mc->list_next->list_prev = mc->list_prev;
	else
		l->tail = mc->list_prev;
	mc->list = NULL;
}

static uint64_t acked_seq(struct fc_client *cl)
{
	if (cl->seq.head)
		return cl->seq.head->ctx.seq - 1;
	return cl->next_seq - 1;
}

/* What a request of this mount may change, for the listings fetched
 * ahead (statahead.c): when it is sent and again when it ends. */
static void sa_note(struct fc_client *cl, uint16_t type,
		    const ProtobufCMessage *body)
{
	if (type == TWINFS__MSG_TYPE__MSG_UNLINK ||
	    type == TWINFS__MSG_TYPE__MSG_RMDIR) {
		const Twinfs__Unlink *u = (const Twinfs__Unlink *)body;

		fc_sa_removed(&cl->sa, u->parent, u->name ? u->name : "");
	} else if (fc_mgr_type_changes(type)) {
		fc_sa_changed(&cl->sa);
	}
}

static void mgr_attempt(struct fc_mgr_call *mc);
static void retry_timer_cb(uv_timer_t *t);
static void schedule_retry(struct fc_mgr_call *mc, uint64_t now, bool at_once);

static void mgr_finish(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	/* Before the answer: a lookup it lets through sees no older listing
	 * (statahead.c). */
	sa_note(mc->cl, mc->type, mc->body);
	list_remove(mc);
	if (reply)
		fc_ident_swap(mc->cl, reply->body);   /* subtree mounts */
	mc->cb(mc, status, reply);
}

/* docs/ARCHITECTURE.md "Waiting without sleeping": mgrd's answer is
 * polled for (loop.c) from the oldest attempt in flight. */
static void mgr_flight_sent(struct fc_client *cl)
{
	if (cl->mgr_flights++ == 0)
		tw_spin_arm(&cl->mgr_spin, tw_now_ns());
}

static void mgr_flight_landed(struct fc_client *cl)
{
	assert(cl->mgr_flights > 0);
	tw_spin_landed(&cl->mgr_spin, --cl->mgr_flights, tw_now_ns());
}

static void mgr_reply_cb(int status, struct wire_msg *reply, void *arg)
{
	struct fc_mgr_flight *fl = arg;
	struct fc_mgr_call *mc = fl->mc;
	struct fc_client *cl;
	uint64_t now = tw_now_ms();

	cl = fl->cl;
	free(fl);
	mgr_flight_landed(cl);
	if (!mc) {
		/* Abandoned after an interrupt: nobody waits any more. */
		if (reply)
			wire_msg_free(reply);
		return;
	}
	mc->flight = NULL;
	cl = mc->cl;

	if (!fc_mgr_retryable(status) || cl->stopping) {
		if (status == -ECANCELED)
			status = -EIO;
		mgr_finish(mc, status, reply);
		return;
	}
	/* A pair: an attempt unanswered in its time counts against that
	 * mgrd (a stopped active, a cut link); the other may be active. */
	if (status == -ETIMEDOUT)
		mgr_addr_failed(cl, cl->mgr, status, NULL);
	if (reply)   /* mgrd's own -EAGAIN: an answer without a body */
		wire_msg_free(reply);
	/* Transport error: the request may or may not have been applied;
	 * retransmit with the same seq so mgrd answers from its record.
	 * -EAGAIN is mgrd itself asking for the retry: the file's writer
	 * vanished and its size is being read from the iods. */
	if (status == -EAGAIN) {
		tw_log_rl(TW_LOG_INFO, "mgrd %s: %s waits while mgrd reads from "
			  "the iods the size of a file whose writer vanished",
			  cl->mgr ? wire_peer_name(cl->mgr) : "?",
			  wire_type_name(mc->type));
	} else if (!cl->mgr_down_logged) {
		char cause[64];

		tw_log_rl(TW_LOG_WARN, "mgrd %s: %s; retrying for up to "
			  "%.1f s", cl->mgr ? wire_peer_name(cl->mgr) : "?",
			  fc_cause(cl, status, cause, sizeof(cause)),
			  (mc->deadline_ms > now ?
			   mc->deadline_ms - now : 0) / 1000.0);
		cl->mgr_down_logged = true;
	}
	if (now >= mc->deadline_ms) {
		tw_log_rl(TW_LOG_ERR, "mgrd %s: %s request gave up after "
			  "%.1f s", cl->mgr ? wire_peer_name(cl->mgr) : "?",
			  wire_type_name(mc->type),
			  (now - mc->start_ms) / 1000.0);
		mgr_finish(mc, -EIO, NULL);
		return;
	}
	if (mc->op && fc_op_interrupted(mc->op)) {
		mgr_finish(mc, -EINTR, NULL);
		return;
	}
	schedule_retry(mc, now, status == -ETIMEDOUT);
}

static void schedule_retry(struct fc_mgr_call *mc, uint64_t now, bool at_once)
{
	struct fc_client *cl = mc->cl;

	mc->backoff_ms = mc->backoff_ms ? mc->backoff_ms * 2 : FC_MGR_RETRY_MIN_MS;
	if (mc->backoff_ms > FC_MGR_RETRY_MAX_MS)
		mc->backoff_ms = FC_MGR_RETRY_MAX_MS;
	/* A timed-out attempt already waited; retry at once, unless the
	 * mgrd pair's backoff holds every attempt (mgrlist.h). */
	mc->retry_at_ms = at_once ? now : now + mc->backoff_ms;
	if (mc->retry_at_ms < cl->mgr_hold_ms)
		mc->retry_at_ms = cl->mgr_hold_ms;
	if (mc->retry_at_ms > mc->deadline_ms)
		mc->retry_at_ms = mc->deadline_ms;
	mc->retry_next = cl->retry_head;
	cl->retry_head = mc;
	mc->in_retry_list = true;
	if (!uv_is_active((uv_handle_t *)&cl->retry_timer))
		uv_timer_start(&cl->retry_timer, retry_timer_cb, 50, 50);
}

static void retry_timer_cb(uv_timer_t *t)
{
	struct fc_client *cl = t->data;
	struct fc_mgr_call **pp = &cl->retry_head, *due = NULL, *mc;
	uint64_t now = tw_now_ms();

	while ((mc = *pp)) {
		bool intr = mc->op && fc_op_interrupted(mc->op);

		if (mc->retry_at_ms <= now || intr) {
			*pp = mc->retry_next;
			mc->in_retry_list = false;
			mc->retry_next = due;
			due = mc;
		} else {
			pp = &mc->retry_next;
		}
	}
	while ((mc = due)) {
		due = mc->retry_next;
		if (mc->op && fc_op_interrupted(mc->op))
			mgr_finish(mc, -EINTR, NULL);
		else
			mgr_attempt(mc);
	}
	if (cl->mgr_intr_waiting)
		fc_mgr_interrupts(cl);
	if (!cl->retry_head && !cl->mgr_intr_waiting)
		uv_timer_stop(t);
}

static void mgr_attempt(struct fc_mgr_call *mc)
{
	struct fc_client *cl = mc->cl;
	uint64_t now = tw_now_ms();
	uint64_t left = mc->deadline_ms > now ? mc->deadline_ms - now : 1;
	/* One attempt waits at most this long before we retransmit: long
	 * enough for a slow mgrd (it may itself wait on iods for a truncate),
	 * short enough to notice a silent peer. */
	uint64_t attempt = TW_MAX(2ull * cl->opts.request_timeout_ms, 10000ull);

	if (attempt > left)
		attempt = left;
	mc->attempts++;
	mc->ctx.acked_seq = acked_seq(cl);
	mc->flight = malloc(sizeof(*mc->flight));
	if (!mc->flight) {
		/* Never complete from inside the call: try again later. */
		schedule_retry(mc, now, false);
		return;
	}
	mc->flight->mc = mc;
	mc->flight->cl = cl;
	mgr_flight_sent(cl);
	fc_call(cl, cl->mgr, mc->type, mc->body, NULL, 0, (uint32_t)attempt,
		mgr_reply_cb, mc->flight);
}

static void send_ping(struct fc_client *cl, struct fc_iod *iod);

/* The interrupted calls of list l that end now onto *victims; *waiting:
 * one still waits out its grace, *probe: mgrd is to be pinged. */
static void interrupted_calls(struct fc_client *cl, struct fc_mgr_list *l,
			      uint64_t now, struct fc_mgr_call **victims,
			      bool *waiting, bool *probe)
{
	for (struct fc_mgr_call *mc = l->head; mc; mc = mc->list_next) {
		if (!mc->op || !fc_op_interrupted(mc->op))
			continue;
		if (!mc->in_retry_list) {
			/* On the wire: ask mgrd whether it is alive (a ping
			 * on the control connection), and wait on while it
			 * is, or for the grace; the attempt's own timeout
			 * still bounds the wait. */
			if (!mc->intr_ms) {
				mc->intr_ms = now;
				*probe = true;
			}
			if (now - mc->intr_ms < FC_MGR_INTR_GRACE_MS ||
			    cl->mgr_pong_ms >= mc->intr_ms) {
				*waiting = true;
				continue;
			}
		}
		mc->intr_next = *victims;
		*victims = mc;
	}
}

void fc_mgr_interrupts(struct fc_client *cl)
{
	struct fc_mgr_call *mc, *victims = NULL, **pp;
	uint64_t now = tw_now_ms();
	bool waiting = false, probe = false;

	interrupted_calls(cl, &cl->seq, now, &victims, &waiting, &probe);
	interrupted_calls(cl, &cl->unnumbered, now, &victims, &waiting,
			  &probe);
	if (probe && !cl->stopping)
		send_ping(cl, NULL);
	cl->mgr_intr_waiting = waiting;
	if (waiting && !cl->stopping &&
	    !uv_is_active((uv_handle_t *)&cl->retry_timer))
		uv_timer_start(&cl->retry_timer, retry_timer_cb, 50, 50);
	while ((mc = victims)) {
		victims = mc->intr_next;
		if (mc->flight) {
			mc->flight->mc = NULL;
			mc->flight = NULL;
		}
		if (mc->in_retry_list) {
			for (pp = &cl->retry_head; *pp; pp = &(*pp)->retry_next)
				if (*pp == mc) {
					*pp = mc->retry_next;
					break;
				}
			mc->in_retry_list = false;
		}
		mgr_finish(mc, -EINTR, NULL);
	}
}

static void send_now(struct fc_client *cl, struct fc_mgr_call *mc,
		     uint16_t type, ProtobufCMessage *body,
		     Twinfs__Ctx **ctx_field, struct fc_op *op,
		     uint32_t timeout_ms, fc_mgr_cb cb, void *arg);

/* ------------------------------------------------ releases sent later */

/* A create-close or open-close cycle (tar x, a build's probes, `touch`)
 * ends in a RELEASE that mgrd must see but nobody waits for: the kernel
 * does not wait for its answer.  Sent at once, it costs mgrd and this
 * loop a wakeup each, between the application's requests.  So the RELEASE
 * of a handle that never read, wrote or allocated (nothing to report,
 * no error to return) waits for this mount's next mgrd request and goes
 * out just before it, in the same turn of the loop, or FC_REL_LATER_MS
 * later when no request comes.  mgrd sees the requests of this mount in
 * the same order as if each RELEASE had been sent at once; only other
 * mounts can see the handle open for at most FC_REL_LATER_MS more, as
 * across a slow network (an unlink from them then leaves the file as an
 * orphan until the RELEASE lands, "Open files, deletion, locks"). */
#define FC_REL_LATER_MS 2u

struct fc_rel_later {
	struct fc_mgr_call mc;
	Twinfs__Release m;
	struct fc_rel_later *next;
};

static void rel_done(struct fc_mgr_call *mc, int status,
		     struct wire_msg *reply)
{
	struct fc_rel_later *r = mc->arg;

	if (reply)
		wire_msg_free(reply);
	if (status < 0 && status != -ECANCELED)
		tw_debug("RELEASE of ino %" PRIu64 " (handle %" PRIu64 "): %s",
			 r->m.ino, r->m.fh, strerror(-status));
	free(r);
}

void fc_mgr_release_flush(struct fc_client *cl)
{
	struct fc_rel_later *r = cl->rel_head, *next;

	cl->rel_head = cl->rel_tail = NULL;
	uv_timer_stop(&cl->rel_timer);
	for (; r; r = next) {
		next = r->next;
		send_now(cl, &r->mc, TWINFS__MSG_TYPE__MSG_RELEASE, &r->m.base,
			 &r->m.ctx, NULL, 0, rel_done, r);
	}
}

static void rel_timer_cb(uv_timer_t *t)
{
	fc_mgr_release_flush(t->data);
}

int fc_mgr_release_later(struct fc_client *cl, uint64_t ino, uint64_t fh)
{
	struct fc_rel_later *r;

	if (cl->stopping || !(r = calloc(1, sizeof(*r))))
		return -ENOMEM;
	twinfs__release__init(&r->m);
	r->m.ino = ino;
	r->m.fh = fh;
	if (cl->rel_tail)
		cl->rel_tail->next = r;
	else
		cl->rel_head = r;
	cl->rel_tail = r;
	if (!uv_is_active((uv_handle_t *)&cl->rel_timer))
		uv_timer_start(&cl->rel_timer, rel_timer_cb, FC_REL_LATER_MS,
			       0);
	return 0;
}

void fc_mgr_send(struct fc_client *cl, struct fc_mgr_call *mc, uint16_t type,
		 ProtobufCMessage *body, Twinfs__Ctx **ctx_field,
		 struct fc_op *op, uint32_t timeout_ms, fc_mgr_cb cb, void *arg)
{
	if (cl->rel_head)
		fc_mgr_release_flush(cl);
	send_now(cl, mc, type, body, ctx_field, op, timeout_ms, cb, arg);
}

static void send_now(struct fc_client *cl, struct fc_mgr_call *mc,
		     uint16_t type, ProtobufCMessage *body,
		     Twinfs__Ctx **ctx_field, struct fc_op *op,
		     uint32_t timeout_ms, fc_mgr_cb cb, void *arg)
{
	sa_note(cl, type, body);
	memset(mc, 0, sizeof(*mc));
	mc->cl = cl;
	mc->type = type;
	mc->body = body;
	mc->op = op;
	mc->cb = cb;
	mc->arg = arg;
	mc->start_ms = tw_now_ms();
	mc->deadline_ms = mc->start_ms +
		(timeout_ms ? timeout_ms : cl->opts.mgr_timeout_ms);
	twinfs__ctx__init(&mc->ctx);
	if (ctx_field) {
		*ctx_field = &mc->ctx;
		mc->ctx.session = cl->session;
		mc->ctx.seq = cl->next_seq++;
		if (op) {
			mc->ctx.uid = op->uid;
			mc->ctx.gid = op->gid;
			mc->ctx.umask = op->umask;
			mc->ctx.pid = op->pid;
			mc->ctx.n_groups = op->n_groups;
			mc->ctx.groups = op->groups;
		}
		list_append(&cl->seq, mc);
	} else if (op) {
		list_append(&cl->unnumbered, mc);
	}
	/* Interrupted before this step began: let the loop end it soon. */
	if (op && fc_op_interrupted(op)) {
		atomic_store(&cl->intr_pending, 1);
		uv_async_send(&cl->async);
	}
	mgr_attempt(mc);
}

void fc_mgr_shutdown(struct fc_client *cl)
{
	struct fc_mgr_call *mc;

	while ((mc = cl->retry_head)) {
		cl->retry_head = mc->retry_next;
		mc->in_retry_list = false;
		mgr_finish(mc, -EIO, NULL);
	}
}

/* ---------------------------------------------------------------- map */

static void iod_connect_cb(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *reply, void *arg)
{
	(void)reply;
	(void)arg;
	if (status < 0)
		tw_log_rl(TW_LOG_WARN, "iod %s: cannot connect: %s",
			  wire_peer_name(p), strerror(-status));
}

void fc_map_install(struct fc_client *cl, const Twinfs__ClusterMap *map)
{
	bool seen[TW_MAX_IODS + 1] = { false };
	uint64_t old_epoch = cl->epoch;
	size_t i;
	uint32_t id;

	if (cl->have_map && map->epoch < cl->epoch) {
		tw_debug("ignoring map epoch %" PRIu64 " older than %" PRIu64,
			 map->epoch, cl->epoch);
		return;
	}
	if (cl->have_map && map->epoch != cl->epoch)
		tw_info("cluster map epoch %" PRIu64 " -> %" PRIu64,
			cl->epoch, map->epoch);
	cl->epoch = map->epoch;
	cl->n_groups = TW_MIN(map->n_groups, (uint32_t)TW_MAX_GROUPS);
	cl->def_stripe_size = map->stripe_size;
	cl->def_stripe_count = map->stripe_count;
	if (map->stripe_size)
		atomic_store(&cl->blksize, map->stripe_size);
	if (map->max_subfile_size != atomic_load(&cl->max_subfile)) {
		tw_info("largest subfile the iods hold: %" PRIu64 " bytes",
			map->max_subfile_size);
		atomic_store(&cl->max_subfile, map->max_subfile_size);
	}
	memset(cl->group_iod, 0, sizeof(cl->group_iod));
	for (i = 0; i < map->n_iods; i++) {
		const Twinfs__IodInfo *in = map->iods[i];
		struct fc_iod *iod;

		if (!in || in->id == 0 || in->id > TW_MAX_IODS ||
		    in->group >= TW_MAX_GROUPS || in->twin_index > 1 ||
		    !in->host || strlen(in->host) >= TW_HOST_MAX ||
		    in->port == 0 || in->port > 65535) {
			tw_log_rl(TW_LOG_WARN, "map: ignoring invalid iod entry");
			continue;
		}
		iod = &cl->iods[in->id];
		seen[in->id] = true;
		if (iod->peer && (strcmp(iod->host, in->host) != 0 ||
				  iod->port != (int)in->port)) {
			wire_peer_free(iod->peer);
			iod->peer = NULL;
		}
		iod->id = in->id;
		iod->group = in->group;
		iod->twin = in->twin_index;
		snprintf(iod->host, sizeof(iod->host), "%s", in->host);
		iod->port = (int)in->port;
		iod->state = in->state;
		iod->needs_resync = in->needs_resync;
		cl->group_iod[in->group][in->twin_index] = (int)in->id;
		if (!iod->peer && !cl->stopping) {
			struct wire_peer_opts o;
			Twinfs__Hello h;

			memset(&o, 0, sizeof(o));
			fc_mgr_fill_iod_hello(cl, &h);
			o.host = iod->host;
			o.port = iod->port;
			o.hello = &h;
			o.on_connect = iod_connect_cb;
			o.arg = cl;
			o.reconnect_ms = 200;
			o.channel = cl->opts.channel;
			if (cl->tkt_id_len) {   /* ident.c */
				o.identity = cl->tkt_id;
				o.identity_len = cl->tkt_id_len;
				o.key = cl->tkt_key;
				o.key_len = WIRE_TICKET_KEY_LEN;
			}
			if (wire_peer_new(&cl->loop, &o, &iod->peer) < 0) {
				tw_err("iod %u: cannot create peer", iod->id);
				iod->peer = NULL;
			}
		}
	}
	for (id = 1; id <= TW_MAX_IODS; id++) {
		if (!seen[id] && cl->iods[id].id) {
			if (cl->iods[id].peer)
				wire_peer_free(cl->iods[id].peer);
			memset(&cl->iods[id], 0, sizeof(cl->iods[id]));
		}
	}
	cl->have_map = true;
	if (map->epoch != old_epoch && cl->map_changed)
		cl->map_changed(cl);
}

static void map_reply_cb(struct fc_mgr_call *mc, int status,
			 struct wire_msg *reply)
{
	struct fc_client *cl = mc->cl;
	struct fc_map_waiter *w;

	if (status == 0) {
		if (reply->body->descriptor == &twinfs__cluster_map__descriptor)
			fc_map_install(cl, (const void *)reply->body);
		else
			status = -EPROTO;
	}
	if (reply)
		wire_msg_free(reply);
	cl->map_refreshing = false;
	w = cl->map_waiters;
	cl->map_waiters = NULL;
	while (w) {
		struct fc_map_waiter *next = w->next;

		w->cb(w->arg, status);
		w = next;
	}
}

void fc_map_refresh(struct fc_client *cl, struct fc_map_waiter *w)
{
	if (w) {
		w->next = cl->map_waiters;
		cl->map_waiters = w;
	}
	if (cl->map_refreshing)
		return;
	cl->map_refreshing = true;
	twinfs__empty__init(&cl->map_body);
	/* Bounded by request_timeout: callers hold a data-path deadline. */
	fc_mgr_send(cl, &cl->map_mc, TWINFS__MSG_TYPE__MSG_GET_MAP,
		    &cl->map_body.base, NULL, NULL,
		    cl->opts.request_timeout_ms, map_reply_cb, NULL);
}

static struct fc_iod *twin(struct fc_client *cl, uint32_t group, int t)
{
	int id;

	if (group >= TW_MAX_GROUPS)
		return NULL;
	id = cl->group_iod[group][t];
	return id ? &cl->iods[id] : NULL;
}

/* The group as raid's twin policy sees it.  A twin missing from the map is
 * down and stale: never used. */
static void group_twins(struct fc_client *cl, uint32_t group,
			struct r1_twin t[2], struct fc_iod *tw[2])
{
	for (int i = 0; i < 2; i++) {
		tw[i] = twin(cl, group, i);
		t[i].state = tw[i] && tw[i]->id ? (enum r1_state)tw[i]->state
						: R1_DOWN;
		t[i].needs_resync = !tw[i] || !tw[i]->id || tw[i]->needs_resync;
	}
}

struct fc_iod *fc_map_write_iod(struct fc_client *cl, uint64_t ino,
				uint32_t group, uint32_t column)
{
	struct r1_twin t[2];
	struct fc_iod *tw[2];
	int p;

	/* r1_write_primary: the primary while both twins are readable, else
	 * the readable one (it forwards to a resyncing twin itself). */
	group_twins(cl, group, t, tw);
	p = r1_write_primary(t, ino, column);
	return p < 0 ? NULL : tw[p];
}

struct fc_iod *fc_map_read_iod(struct fc_client *cl, uint64_t ino,
			       uint32_t group, uint32_t column, uint64_t unit,
			       const struct fc_iod *avoid)
{
	struct r1_twin t[2];
	struct fc_iod *tw[2];
	int r;

	group_twins(cl, group, t, tw);
	r = r1_read_pick(t, ino, column, unit);
	if (r >= 0 && avoid && tw[r] == avoid)
		r = r1_read_fallback(t, r);
	return r < 0 ? NULL : tw[r];
}

const char *fc_group_desc(struct fc_client *cl, uint32_t group, char *buf,
			  size_t len)
{
	struct fc_iod *tw[2];
	struct r1_twin t[2];
	char a[96] = "none", b[96] = "none";

	group_twins(cl, group, t, tw);
	if (tw[0])
		fc_iod_name(tw[0], a, sizeof(a));
	if (tw[1])
		fc_iod_name(tw[1], b, sizeof(b));
	snprintf(buf, len, "group %u: %s is %s%s, %s is %s%s (epoch %" PRIu64
		 ")", group, a, r1_state_name(t[0].state),
		 t[0].needs_resync ? " and stale" : "", b,
		 r1_state_name(t[1].state), t[1].needs_resync ? " and stale" : "",
		 cl->epoch);
	return buf;
}

uint32_t fc_group_sig(struct fc_client *cl, uint32_t group, bool *settled)
{
	struct r1_twin t[2];
	struct fc_iod *tw[2];

	group_twins(cl, group, t, tw);
	*settled = t[0].state != R1_SUSPECT && t[1].state != R1_SUSPECT;
	return (uint32_t)t[0].state | (uint32_t)t[0].needs_resync << 2 |
	       (uint32_t)t[1].state << 3 | (uint32_t)t[1].needs_resync << 5 |
	       (tw[0] ? tw[0]->id : 0) << 8 | (tw[1] ? tw[1]->id : 0) << 16;
}

bool fc_group_failed(struct fc_client *cl, uint32_t group)
{
	struct r1_twin t[2];
	struct fc_iod *tw[2];

	group_twins(cl, group, t, tw);
	return r1_group_health(t) == R1_FAILED;
}

/* ------------------------------------------------------------- reports */

struct fc_report_call {
	Twinfs__Report body;
};

static void report_reply_cb(int status, struct wire_msg *reply, void *arg)
{
	(void)status;
	if (reply)
		wire_msg_free(reply);
	free(arg);
}

void fc_report(struct fc_client *cl, struct fc_iod *iod, int status)
{
	struct fc_report_call *rc;
	uint64_t now = tw_now_ms();

	if (!iod || !iod->id || cl->stopping || status == -ECANCELED)
		return;
	/* One report per iod per epoch and FC_REPORT_GAP_MS: mgrd probes
	 * once anyway, and a burst of failing pieces must not flood it. */
	if (iod->report_epoch == cl->epoch &&
	    now - iod->report_ms < FC_REPORT_GAP_MS)
		return;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return;
	iod->report_epoch = cl->epoch;
	iod->report_ms = now;
	twinfs__report__init(&rc->body);
	rc->body.iod_id = iod->id;
	rc->body.error = status;
	rc->body.epoch = cl->epoch;
	tw_debug("reporting iod %u to mgrd: %s", iod->id, strerror(-status));
	/* On the control connection: never queued behind metadata. */
	fc_call(cl, cl->ctl, TWINFS__MSG_TYPE__MSG_REPORT, &rc->body.base, NULL,
		0, cl->opts.request_timeout_ms, report_reply_cb, rc);
}

/* ------------------------------------------------------------- monitor */

struct fc_ping {
	struct fc_client *cl;
	struct fc_iod *iod;   /* NULL: mgrd */
	Twinfs__Ping body;
	uint64_t sent_ms;
};

static uint32_t ping_timeout_ms(const struct fc_client *cl)
{
	return TW_MIN(cl->opts.request_timeout_ms,
		      cl->opts.monitor_interval_ms);
}

static void ping_reply_cb(int status, struct wire_msg *reply, void *arg)
{
	struct fc_ping *pg = arg;
	struct fc_client *cl = pg->cl;

	if (!pg->iod) {
		bool was_ok = cl->ctl_ok;

		cl->ctl_ok = status == 0;
		/* When it was sent: an answer older than an interrupt,
		 * delivered late, proves nothing about mgrd now. */
		if (status == 0 && pg->sent_ms > cl->mgr_pong_ms)
			cl->mgr_pong_ms = pg->sent_ms;
		if (status == 0 && reply->body->descriptor ==
		    &twinfs__ping__descriptor) {
			const Twinfs__Ping *p = (const void *)reply->body;

			if (p->epoch > cl->epoch && !cl->stopping)
				fc_map_refresh(cl, NULL);
		} else if (status < 0 && was_ok && !cl->stopping) {
			char cause[64];

			tw_log_rl(TW_LOG_WARN, "mgrd %s: ping %s",
				  cl->ctl ? wire_peer_name(cl->ctl) : "?",
				  fc_cause_after(status, ping_timeout_ms(cl),
						 cause, sizeof(cause)));
		}
		if (status == -ETIMEDOUT)
			mgr_addr_failed(cl, cl->ctl, status, NULL);
	} else if (status < 0 && status != -ECANCELED && !cl->stopping) {
		char name[96], cause[64];
		uint32_t id = (uint32_t)(pg->iod - cl->iods);

		/* The slot may have been reused; name it from the slot.  A
		 * missed ping is reported like a data-path error. */
		if (cl->iods[id].id) {
			tw_log_rl(TW_LOG_WARN, "%s: ping %s; reported to mgrd",
				  fc_iod_name(&cl->iods[id], name, sizeof(name)),
				  fc_cause_after(status, ping_timeout_ms(cl),
						 cause, sizeof(cause)));
			fc_report(cl, &cl->iods[id], status);
		}
	}
	if (reply)
		wire_msg_free(reply);
	free(pg);
}

static void send_ping(struct fc_client *cl, struct fc_iod *iod)
{
	struct fc_ping *pg = calloc(1, sizeof(*pg));

	if (!pg)
		return;
	pg->cl = cl;
	pg->iod = iod;
	pg->sent_ms = tw_now_ms();
	twinfs__ping__init(&pg->body);
	pg->body.epoch = cl->epoch;
	pg->body.incarnation = cl->incarnation;
	fc_call(cl, iod ? iod->peer : cl->ctl, TWINFS__MSG_TYPE__MSG_PING,
		&pg->body.base, NULL, 0, ping_timeout_ms(cl), ping_reply_cb,
		pg);
}

static void ping_timer_cb(uv_timer_t *t)
{
	struct fc_client *cl = t->data;
	uint32_t id;

	if (cl->stopping)
		return;
	send_ping(cl, NULL);
	fc_ident_renew(cl);
	/* Iods the map already calls down are mgrd's business. */
	for (id = 1; id <= TW_MAX_IODS; id++)
		if (cl->iods[id].id && cl->iods[id].peer &&
		    cl->iods[id].state != TWINFS__IOD_STATE__IOD_DOWN)
			send_ping(cl, &cl->iods[id]);
	/* While the control connection is down, try it every second so the
	 * session does not expire and map pushes resume soon. */
	uv_timer_start(t, ping_timer_cb,
		       cl->ctl_ok ? cl->opts.monitor_interval_ms : 1000, 0);
}

void fc_mgr_start_monitor(struct fc_client *cl)
{
	wire_peer_connect(cl->ctl);
	uv_timer_start(&cl->ping_timer, ping_timer_cb, 1000, 0);
}
