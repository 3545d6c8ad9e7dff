/* twin.c - the server-driven twin protocol (RAID-1), iod side.
 *
 * WRITE, TRUNCATE, DELETE and FSYNC arriving with `forwarded = false` make
 * this iod the primary of the request: it checks the epoch (and, in the
 * store, trunc_gen), applies the request to its store, forwards the same
 * message with `forwarded = true` and the same bulk data to its twin, and
 * replies to the sender when both have applied it (status: the first
 * error).  A forwarded request (only accepted from a connection whose HELLO
 * named our twin) is applied and answered, never forwarded again.
 *
 * Invariants:
 *   T1  Same order on both twins.  Every forward goes over ONE wire_peer
 *       (one TCP connection) to the twin, and the local apply and the
 *       wire_call that queues the forward happen in the same synchronous
 *       handler call on the single loop thread, with nothing in between
 *       that could run another request.  wire_peer sends calls in call
 *       order (its local queue is FIFO), and the twin applies forwarded
 *       requests in arrival order on its own single loop.  So for every
 *       subfile the twin applies exactly the primary's order, and two
 *       clients writing the same bytes leave both twins with the same
 *       winner.  Keep apply+forward synchronous: no await between them.
 *   T2  Only the primary orders.  A non-forwarded WRITE or TRUNCATE for a
 *       subfile whose primary in our map (r1_write_primary, the same
 *       policy clients and mgrd route with) is the other twin is refused
 *       when the request carries our epoch: two primaries for one subfile
 *       would break T1.  DELETE and FSYNC are order-insensitive and are
 *       accepted by either twin.
 *   T3  Never hang: forwards carry request_timeout / 2 (so that the
 *       sender's attempt, mgrd's probe and the demotion fit in one
 *       request_timeout, fuse-client/ops_data.c); an unreachable twin
 *       (connect refused, reset, timeout, not registered) makes the reply
 *       -EIO and is reported to mgrd (MSG_REPORT with reporter_iod), which
 *       probes it.  The iod never decides on its own that its twin is
 *       gone: only mgrd does, in a new epoch (T4); the sender waits for
 *       that epoch and retries.
 *   T4  Completing alone: when our map says the twin may not take writes
 *       (r1_must_forward is false) AND marks it needs_resync (so it will
 *       never be read before a resync, R1 invariants 1 and 2), and the
 *       request carries that same epoch, the request is applied locally and
 *       answered without forwarding.  A twin that is down without
 *       needs_resync (e.g. not registered yet at cluster start) still gets
 *       every forward, and its absence makes the reply -EIO (T3).  With a newer
 *       epoch in the request we forward anyway (forwarding is never
 *       unsafe).  Marking regions in the write-intent log is still to do;
 *       until then a demoted twin needs a full resync.
 *
 * A connection lost with forwards outstanding leaves the twin's state for
 * those requests unknown; the sender got -EIO and the twin will need a
 * resync (write-intent log, later).
 */
#include "iod_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)TWINFS__IOD_STATE__IOD_UP == (int)R1_UP &&
	       (int)TWINFS__IOD_STATE__IOD_SUSPECT == (int)R1_SUSPECT &&
	       (int)TWINFS__IOD_STATE__IOD_DOWN == (int)R1_DOWN &&
	       (int)TWINFS__IOD_STATE__IOD_RESYNCING == (int)R1_RESYNCING,
	       "IodState and enum r1_state must agree");

/* A request applied locally and waiting for the twin. */
struct fwd {
	struct iod *d;
	struct wire_conn *c;       /* referenced until the reply */
	struct wire_hdr hdr;       /* the sender's request header */
	uint64_t ino;
	uint32_t column;
	bool has_stat;             /* WRITE / TRUNCATE reply with blocks */
	struct iod_sub_stat st;
};

static const char *type_name(uint16_t t)
{
	return wire_type_name(t);
}

/* ------------------------------------------------------------- the peer */

static void on_twin_connect(struct wire_peer *p, int status,
			    const Twinfs__HelloReply *reply, void *arg)
{
	struct iod *d = arg;

	if (status == 0) {
		if (reply && reply->node_id != d->twin_id)
			tw_err("twin at %s answers as iod %" PRIu32 ", expected "
			       "iod %" PRIu32 "; check the config",
			       wire_peer_name(p), reply->node_id, d->twin_id);
		else
			tw_info("connected to twin iod %" PRIu32 " (%s)",
				d->twin_id, wire_peer_name(p));
	} else {
		tw_log_rl(TW_LOG_WARN, "twin iod %" PRIu32 " (%s:%d): cannot "
			  "connect: %s", d->twin_id, d->twin_host,
			  d->twin_port, strerror(-status));
	}
}

static int peer_open(struct iod *d, const char *host, int port)
{
	Twinfs__Hello hello;
	struct wire_peer_opts o = { 0 };
	int rc;

	iod_hello(d, &hello);
	o.host = host;
	o.port = port;
	o.hello = &hello;
	o.on_connect = on_twin_connect;
	o.arg = d;
	rc = wire_peer_new(d->loop, &o, &d->twin_peer);
	if (rc < 0) {
		tw_err("twin iod %" PRIu32 " (%s:%d): %s", d->twin_id, host,
		       port, strerror(-rc));
		return rc;
	}
	snprintf(d->twin_host, sizeof(d->twin_host), "%s", host);
	d->twin_port = port;
	return 0;
}

static const struct iod_map_iod *twin_info(const struct iod *d)
{
	const struct iod_map_iod *t = &d->map.iods[d->twin_id];

	return t->present ? t : NULL;
}

int iod_twin_start(struct iod *d)
{
	const struct iod_map_iod *t = twin_info(d);
	const struct tw_conf_iod *ct = tw_conf_iod(d->conf, (int)d->twin_id);

	if (t)
		return peer_open(d, t->host, t->port);
	if (!ct)
		return -EINVAL;
	return peer_open(d, ct->host, ct->port);
}

void iod_twin_map_changed(struct iod *d)
{
	const struct iod_map_iod *t = twin_info(d);

	if (!t || d->closing)
		return;
	if (d->twin_peer && t->port == d->twin_port &&
	    strcmp(t->host, d->twin_host) == 0)
		return;
	tw_info("twin iod %" PRIu32 " moves to %s:%d", d->twin_id, t->host,
		t->port);
	/* Outstanding forwards fail with -ECANCELED (-> -EIO replies). */
	if (d->twin_peer)
		wire_peer_free(d->twin_peer);
	d->twin_peer = NULL;
	peer_open(d, t->host, t->port);
}

void iod_twin_stop(struct iod *d)
{
	if (d->twin_peer) {
		wire_peer_free(d->twin_peer);
		d->twin_peer = NULL;
	}
}

/* ----------------------------------------------------------- the replies */

static void reply_stat(struct wire_conn *c, const struct wire_hdr *hdr,
		       int rc, bool has_stat, const struct iod_sub_stat *st)
{
	Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;

	if (rc > 0)
		rc = -EIO;
	if (rc < 0 || !has_stat) {
		wire_reply(c, hdr, rc, NULL, NULL, 0);
		return;
	}
	wr.blocks = st->blocks;
	wr.sub_size = st->size;
	wire_reply(c, hdr, 0, &wr.base, NULL, 0);
}

static bool is_transport_error(int status)
{
	switch (status) {
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ECANCELED:
	case -EAGAIN:          /* twin up but not registered yet */
	case -ESHUTDOWN:       /* twin shutting down */
		return true;
	default:
		return false;
	}
}

static void on_forward_reply(int status, struct wire_msg *reply, void *arg)
{
	struct fwd *f = arg;
	struct iod *d = f->d;

	if (reply)
		wire_msg_free(reply);
	if (status < 0 && is_transport_error(status)) {
		tw_log_rl(TW_LOG_ERR, "%s ino %" PRIu64 " column %" PRIu32 ": "
			  "twin iod %" PRIu32 " (%s:%d) did not apply it: %s; "
			  "reported to mgrd, answering -EIO", type_name(f->hdr.type),
			  f->ino, f->column, d->twin_id, d->twin_host,
			  d->twin_port, strerror(-status));
		if (status != -ECANCELED && status != -EAGAIN &&
		    status != -ESHUTDOWN)
			iod_mgr_report(d, d->twin_id, status);
		status = -EIO;
	} else if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "%s ino %" PRIu64 " column %" PRIu32 ": "
			  "twin iod %" PRIu32 " refused it: %s",
			  type_name(f->hdr.type), f->ino, f->column,
			  d->twin_id, strerror(-status));
	}
	reply_stat(f->c, &f->hdr, status, f->has_stat, &f->st);
	wire_conn_unref(f->c);
	free(f);
}

/* --------------------------------------------------------- applying one */

/* Apply a validated mutation to the local store.  Fills *st for WRITE and
 * TRUNCATE.  Returns 0 or -errno. */
static int apply_local(struct iod *d, struct wire_msg *m,
		       struct iod_sub_stat *st)
{
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		const Twinfs__Write *w = (const Twinfs__Write *)m->body;
		struct iod_sub_layout l = { 0 };
		int rc;

		l.stripe_size = w->layout->stripe_size;
		l.stripe_count = w->layout->stripe_count;
		l.n_groups = (uint32_t)w->layout->n_groups;
		memcpy(l.groups, w->layout->groups,
		       l.n_groups * sizeof(uint32_t));
		rc = iod_store_write(d->store, w->ino, w->column, w->offset,
				     m->data, m->data_len, w->trunc_gen, &l, st);
		if (rc == 0 && w->sync)
			rc = iod_store_fsync(d->store, w->ino);
		return rc;
	}
	case TWINFS__MSG_TYPE__MSG_TRUNCATE: {
		const Twinfs__Truncate *t = (const Twinfs__Truncate *)m->body;

		return iod_store_truncate(d->store, t->ino, t->column, t->size,
					  t->trunc_gen, st);
	}
	case TWINFS__MSG_TYPE__MSG_DELETE: {
		const Twinfs__Delete *x = (const Twinfs__Delete *)m->body;
		int rc = 0, r;

		if (x->n_columns == 0)
			return iod_store_delete(d->store, x->ino, UINT32_MAX);
		for (size_t i = 0; i < x->n_columns; i++) {
			r = iod_store_delete(d->store, x->ino, x->columns[i]);
			if (r < 0 && rc == 0)
				rc = r;
		}
		return rc;
	}
	case TWINFS__MSG_TYPE__MSG_FSYNC: {
		const Twinfs__Fsync *f = (const Twinfs__Fsync *)m->body;

		return iod_store_fsync(d->store, f->ino);
	}
	default:
		return -EINVAL;
	}
}

/* The (epoch, forwarded, ino, column) of a mutation; set *forwarded_p to
 * the message's own field so that it can be flipped for the forward. */
static void fields_of(struct wire_msg *m, uint64_t *epoch, protobuf_c_boolean **fwd_p,
		      uint64_t *ino, uint32_t *column)
{
	*column = 0;
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		Twinfs__Write *w = (Twinfs__Write *)m->body;

		*epoch = w->epoch;
		*fwd_p = &w->forwarded;
		*ino = w->ino;
		*column = w->column;
		break;
	}
	case TWINFS__MSG_TYPE__MSG_TRUNCATE: {
		Twinfs__Truncate *t = (Twinfs__Truncate *)m->body;

		*epoch = t->epoch;
		*fwd_p = &t->forwarded;
		*ino = t->ino;
		*column = t->column;
		break;
	}
	case TWINFS__MSG_TYPE__MSG_DELETE: {
		Twinfs__Delete *x = (Twinfs__Delete *)m->body;

		*epoch = x->epoch;
		*fwd_p = &x->forwarded;
		*ino = x->ino;
		break;
	}
	default: {
		Twinfs__Fsync *f = (Twinfs__Fsync *)m->body;

		*epoch = f->epoch;
		*fwd_p = &f->forwarded;
		*ino = f->ino;
		break;
	}
	}
}

/* Our group as raid's twin policy sees it, indexed by twin_index.  An iod
 * missing from the map counts as up: forwarding to it is never unsafe,
 * only possibly failing. */
static void group_twins(const struct iod *d, struct r1_twin t[2])
{
	const struct iod_map_iod *me = &d->map.iods[d->id];
	const struct iod_map_iod *tw = twin_info(d);
	int mine = d->me->twin_index;

	t[mine].state = me->present ? (enum r1_state)me->state : R1_UP;
	t[mine].needs_resync = me->present && me->needs_resync;
	t[!mine].state = tw ? (enum r1_state)tw->state : R1_UP;
	t[!mine].needs_resync = tw && tw->needs_resync;
}

bool iod_twin_self_readable(const struct iod *d)
{
	struct r1_twin t[2];

	group_twins(d, t);
	return r1_readable(&t[d->me->twin_index]);
}

void iod_twin_request(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const struct iod_conn *ic = wire_conn_get_data(c);
	uint16_t type = m->hdr.type;
	struct iod_sub_stat st = { 0 };
	bool has_stat = type == TWINFS__MSG_TYPE__MSG_WRITE ||
			type == TWINFS__MSG_TYPE__MSG_TRUNCATE;
	uint64_t epoch, ino;
	uint32_t column;
	protobuf_c_boolean *forwarded;
	struct r1_twin twins[2];
	bool forward;
	struct fwd *f;
	struct iovec iov;
	int rc;

	fields_of(m, &epoch, &forwarded, &ino, &column);

	if (epoch < d->map.epoch) {
		rc = -ESTALE;
		goto reply;
	}
	if (epoch > d->map.epoch)
		iod_mgr_refresh(d);   /* we are behind; serve on meanwhile */

	if (*forwarded) {
		/* Only our twin may hand us an already ordered request. */
		if (ic->role != TWINFS__ROLE__ROLE_IOD ||
		    ic->node_id != d->twin_id) {
			tw_log_rl(TW_LOG_WARN, "%s: forwarded %s from a peer "
				  "that is not twin iod %" PRIu32 "; refused",
				  wire_conn_peer(c), type_name(type),
				  d->twin_id);
			rc = -EPERM;
			goto reply;
		}
		rc = apply_local(d, m, &st);
		goto reply;
	}

	/* T2: only the primary orders writes and truncates.  A sender with a
	 * newer map than ours knows better; we are refreshing. */
	group_twins(d, twins);
	if (has_stat && epoch == d->map.epoch) {
		int p = r1_write_primary(twins, ino, column);

		if (p != d->me->twin_index) {
			tw_log_rl(TW_LOG_WARN, "%s: %s ino %" PRIu64 " column %"
				  PRIu32 " sent to iod %" PRIu32 ", which is "
				  "not its primary in epoch %" PRIu64 "; "
				  "refused", wire_conn_peer(c),
				  type_name(type), ino, column, d->id,
				  d->map.epoch);
			rc = p < 0 ? -EIO : -EINVAL;
			goto reply;
		}
	}
	/* T4: forward unless mgrd has demoted the twin in the epoch we and
	 * the sender hold (it then needs resync, R1 invariant 2). */
	forward = r1_must_forward(twins, d->me->twin_index) ||
		  !twins[!d->me->twin_index].needs_resync ||
		  epoch > d->map.epoch;

	/* T1: apply, then queue the forward, in this one call. */
	rc = apply_local(d, m, &st);
	if (rc < 0) {
		if (rc != -ESTALE)
			tw_log_rl(TW_LOG_ERR, "%s ino %" PRIu64 " column %"
				  PRIu32 ": %s", type_name(type), ino, column,
				  strerror(-rc));
		goto reply;
	}
	if (!forward) {
		tw_log_rl(TW_LOG_INFO, "twin iod %" PRIu32 " is not writable in "
			  "epoch %" PRIu64 ": completing requests alone",
			  d->twin_id, d->map.epoch);
		goto reply;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		rc = -ENOMEM;
		goto reply;
	}
	f->d = d;
	f->c = c;
	f->hdr = m->hdr;
	f->ino = ino;
	f->column = column;
	f->has_stat = has_stat;
	f->st = st;
	*forwarded = true;
	iov.iov_base = m->data;
	iov.iov_len = m->data_len;
	rc = d->twin_peer
		? wire_call(d->twin_peer, type, m->body, &iov,
			    m->data_len ? 1 : 0,
			    TW_MAX(d->conf->request_timeout_ms / 2, 1u),
			    on_forward_reply, f)
		: -ENOTCONN;
	if (rc < 0) {
		free(f);
		tw_log_rl(TW_LOG_ERR, "%s ino %" PRIu64 ": cannot forward to "
			  "twin iod %" PRIu32 ": %s", type_name(type), ino,
			  d->twin_id, strerror(-rc));
		rc = -EIO;
		goto reply;
	}
	wire_conn_ref(c);
	d->n_forwarded++;
	wire_msg_free(m);    /* wire_call copied body and data */
	return;
reply:
	reply_stat(c, &m->hdr, rc, has_stat, &st);
	wire_msg_free(m);
}
