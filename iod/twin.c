/* twin.c - the server-driven twin protocol (RAID-1), iod side.
 *
 * WRITE, TRUNCATE, FALLOCATE (allocate or punch), DELETE and FSYNC
 * arriving with `forwarded = false` make
 * this iod the primary of the request: it checks the epoch (and, in the
 * store, trunc_gen), applies the request to its store, forwards the same
 * message with `forwarded = true` and the same bulk data to its twin, and
 * replies to the sender when both have applied it (status: the first
 * error).  A forwarded request (only accepted from a connection whose HELLO
 * named our twin) is applied and answered, never forwarded again.
 *
 * Invariants:
 *   T1  Same order on both twins.  The local order of mutations is the
 *       order of their jbd_commit calls (the journal's log order; the
 *       transaction closes later, asynchronously, but its content and
 *       position are fixed at jbd_commit, and in ordered/writeback modes
 *       the in-place write happens inside the same call).  Every forward
 *       goes over ONE wire_peer (one TCP connection) to the twin, and the
 *       store call that commits locally and the wire_call that queues the
 *       forward happen in the same synchronous handler call on the single
 *       loop thread, with nothing in between that could run another
 *       request; we do NOT wait for the local close before forwarding.
 *       wire_peer sends calls in call order (its local queue is FIFO), and
 *       the twin commits forwarded requests in arrival order on its own
 *       single loop.  So forward order = local order for every subfile,
 *       and two clients writing the same bytes leave both twins with the
 *       same winner.  Keep commit+forward synchronous: no await between.
 *   T5  Replies only from completions: a request is answered once its
 *       local transaction is closed (synced for Write.sync and FSYNC: the
 *       store's callback) AND the twin answered (it replies from its own
 *       close), so a write reply means a closed transaction on every twin
 *       it went to (guarantee 1, docs/ARCHITECTURE.md "Guarantees").
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
 *       unsafe).  The store marks every written region in the write-intent
 *       log in the write's own transaction (both twins); intent_cycle below
 *       clears regions once both twins have synced them, so regions written
 *       while the twin is away stay marked for its resync.
 *
 *   T6  Fencing (proto/FORMAT.md "Fencing"): a WRITE or FALLOCATE naming
 *       a client session mgrd has fenced is refused (-EKEYEXPIRED) before
 *       it is applied, by the primary and, forwarded, by the twin.  mgrd
 *       waits for every readable iod's answer to the fence before it
 *       takes sizes or releases locks.
 *
 * A connection lost with forwards outstanding leaves the twin's state for
 * those requests unknown; the sender got -EIO, and the regions stay pinned
 * in our write-intent log.  A dead twin is demoted and resynced; one that
 * stays readable is reported to mgrd as having missed writes (mgr.c), which
 * resyncs it.
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

/* A request committed locally, waiting for its local transaction and (when
 * forwarded) the twin: replied to when both are done (T5). */
struct op {
	struct iod *d;
	struct wire_conn *c;       /* referenced until the reply */
	struct wire_hdr hdr;       /* the sender's request header */
	uint64_t ino;
	uint32_t column;
	bool has_stat;             /* WRITE / TRUNCATE reply with blocks */
	struct iod_sub_stat st;
	int pending;               /* completions still to come: local, twin */
	int rc;                    /* the first error */
	uint32_t rc_iod;           /* ... where it happened: us or the twin */
	uint64_t off, len;         /* WRITE, FALLOCATE: the range (pins) */
	uint8_t needs, gives;      /* ... IOD_STALE_* (stale_fwd.c) */
	uint64_t size;             /* TRUNCATE: the new size */
	uint32_t cols;             /* DELETE: the columns, bit c = column c */
	uint64_t seq;              /* ours: its place in d->fwd_seq order */
	uint64_t fwd_len;          /* data bytes forwarded (d->fwd_bytes) */
};

/* The twin does not hold what we applied: keep the regions marked until
 * its resync (never cleared by intent_cycle). */
static void pin_missed(struct iod *d, const struct op *o, bool report)
{
	uint64_t len;

	if (o->hdr.type == TWINFS__MSG_TYPE__MSG_WRITE ||
	    o->hdr.type == TWINFS__MSG_TYPE__MSG_FALLOCATE)
		len = o->len;
	else if (o->hdr.type == TWINFS__MSG_TYPE__MSG_TRUNCATE)
		len = UINT64_MAX;
	else
		return;
	d->n_pins++;
	if (iod_store_intent_pin(d->store, o->ino, o->column, o->off,
				 len) < 0) {
		tw_log_rl(TW_LOG_ERR, "write-intent log: cannot pin ino %"
			  PRIu64 " column %" PRIu32 ": the twin's next resumed "
			  "resync sends every marked region before its cursor",
			  o->ino, o->column);
		iod_store_owe_marks(d->store);
	}
	/* Its region may lie before a resync's cursor (resync.c). */
	if (iod_store_set_replay_owed(d->store, true) < 0)
		tw_log_rl(TW_LOG_ERR, "%s: cannot record that the twin's "
			  "resync owes a replay: a restart of this iod before "
			  "it completes forgets it", d->me->dir);
	/* If mgrd does not demote the twin for this (it answers its probe,
	 * or mgrd kept it up at a restart), it must still be resynced. */
	if (report)
		iod_mgr_report_missed(d);
}

/* ---------------------------------------------------- stale forwards */

/* A forward the twin refused as stale (its map or the subfile's trunc_gen
 * is newer than the request's) is pinned, and the sender got -ESTALE: it
 * sends the write again through the newer map's primary, to both twins,
 * which heals the difference.  Reporting it at once would resync a twin
 * that is fine whenever a forward crosses a map change; never reporting
 * it would leave the twins apart when the retry never comes (the client
 * died, gave up, or was fenced).  So the forward waits here (stale_fwd.c):
 * a later mutation that reached both, ours forwarded or the twin's
 * forwarded to us, heals what it covers; what is left 3 x request_timeout
 * later is reported as missed writes.  A refused FSYNC changed nothing and
 * waits for nothing. */

static void stale_note(struct iod *d, const struct op *o)
{
	struct iod_stale_fwd f = {
		.ino = o->ino, .column = o->column, .seq = o->seq,
		.due_ms = tw_now_ms() + 3ull * d->conf->request_timeout_ms };
	const char *why = "too many such forwards wait for a retry";

	switch (o->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE:
	case TWINFS__MSG_TYPE__MSG_FALLOCATE:
		f.kind = IOD_STALE_RANGE;
		f.needs = o->needs;
		f.off = o->off;
		f.len = o->len;
		break;
	case TWINFS__MSG_TYPE__MSG_TRUNCATE:
		f.kind = IOD_STALE_TRUNC;
		f.off = o->size;
		break;
	case TWINFS__MSG_TYPE__MSG_DELETE:
		f.kind = IOD_STALE_DELETE;
		f.cols = o->cols;
		break;
	default:
		/* FSYNC: changes nothing either twin reads; the sender asks
		 * again through the newer map. */
		return;
	}
	if (f.kind == IOD_STALE_RANGE && f.len == 0)
		why = "it has no range a retry could cover";
	else if (iod_stale_add(&d->stale, &f) == 0)
		return;
	tw_log_rl(TW_LOG_WARN, "%s ino %" PRIu64 " column %" PRIu32 ": twin "
		  "iod %" PRIu32 " refused it as stale and %s: reporting it as "
		  "missed", wire_type_name(o->hdr.type), o->ino, o->column,
		  d->twin_id, why);
	iod_mgr_report_missed(d);   /* cannot wait for a retry */
}

/* Mutation o reached both twins, and was applied here after the entries
 * below `seq`: it heals what it makes equal on both (stale_fwd.c). */
static void stale_heal(struct iod *d, const struct op *o, uint64_t seq)
{
	switch (o->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE:
	case TWINFS__MSG_TYPE__MSG_FALLOCATE:
		iod_stale_heal_range(&d->stale, seq, o->ino, o->column, o->off,
				     o->len, o->gives);
		break;
	case TWINFS__MSG_TYPE__MSG_TRUNCATE:
		iod_stale_heal_trunc(&d->stale, seq, o->ino, o->column,
				     o->size);
		break;
	case TWINFS__MSG_TYPE__MSG_DELETE:
		iod_stale_heal_delete(&d->stale, seq, o->ino, o->cols);
		break;
	default:
		break;
	}
}

void iod_twin_stale_check(struct iod *d)
{
	const struct iod_stale_fwd *f = iod_stale_due(&d->stale, tw_now_ms());

	if (!f)
		return;
	tw_log_rl(TW_LOG_WARN, "%s ino %" PRIu64 " column %" PRIu32 ": no "
		  "write healed the forward twin iod %" PRIu32 " refused as "
		  "stale: reporting it as missed",
		  f->kind == IOD_STALE_TRUNC ? "TRUNCATE"
		  : f->kind == IOD_STALE_DELETE ? "DELETE" : "range of",
		  f->ino, f->column, d->twin_id);
	iod_mgr_report_missed(d);
	iod_stale_clear(&d->stale);
}

void iod_twin_stale_forget(struct iod *d)
{
	iod_stale_clear(&d->stale);
}

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
	o.secret = d->conf->secret;
	o.channel = d->conf->channel;
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

void iod_twin_demoted(struct iod *d)
{
	const struct iod_map_iod *t = twin_info(d);

	if (!t || d->closing || !d->twin_peer)
		return;
	/* Outstanding forwards fail with -ECANCELED (-> -EIO replies). */
	wire_peer_free(d->twin_peer);
	d->twin_peer = NULL;
	peer_open(d, t->host, t->port);
}

void iod_twin_stop(struct iod *d)
{
	if (d->intent_timer_init) {
		uv_timer_stop(&d->intent_timer);
		uv_close((uv_handle_t *)&d->intent_timer, NULL);
		d->intent_timer_init = false;
	}
	if (d->twin_peer) {
		wire_peer_free(d->twin_peer);
		d->twin_peer = NULL;
	}
}

/* ----------------------------------------------------------- the replies */

/* The reply to a mutation; a failed WRITE, TRUNCATE or FALLOCATE names the
 * iod it failed at (FORMAT.md §1: the requester cannot tell a refusal of
 * ours from our twin's otherwise). */
static void reply_stat(struct wire_conn *c, const struct wire_hdr *hdr,
		       int rc, uint32_t rc_iod, bool has_stat,
		       const struct iod_sub_stat *st)
{
	Twinfs__WriteReply wr = TWINFS__WRITE_REPLY__INIT;

	if (rc > 0)
		rc = -EIO;
	if (rc < 0 && has_stat && rc_iod) {
		wr.failed_iod = rc_iod;
		wire_reply(c, hdr, rc, &wr.base, NULL, 0);
		return;
	}
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

/* One completion of o (ours or the twin's, at iod `where`). */
static void op_done(struct op *o, int rc, uint32_t where)
{
	if (rc < 0 && o->rc == 0) {
		o->rc = rc;
		o->rc_iod = where;
	}
	if (--o->pending > 0)
		return;
	reply_stat(o->c, &o->hdr, o->rc, o->rc_iod, o->has_stat, &o->st);
	wire_conn_unref(o->c);
	free(o);
}

static void on_forward_reply(int status, struct wire_msg *reply, void *arg)
{
	struct op *f = arg;
	struct iod *d = f->d;

	if (reply)
		wire_msg_free(reply);
	assert(d->fwd_unanswered > 0);
	d->fwd_unanswered--;
	tw_spin_landed(&d->twin_spin, d->fwd_unanswered, tw_now_ns());
	assert(d->fwd_bytes >= f->fwd_len);
	d->fwd_bytes -= f->fwd_len;
	/* -ESTALE: the twin holds a newer map (or trunc_gen); the sender
	 * sends the write again ("Stale forwards" above). */
	if (status < 0)
		pin_missed(d, f, status != -ESTALE);
	if (status == -ESTALE)
		stale_note(d, f);
	else if (status == 0)
		stale_heal(d, f, f->seq);
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
	/* -ECANCELED while we close is our own stop, not the twin's. */
	op_done(f, status, d->closing ? d->id : d->twin_id);
}

static void on_local_done(void *arg, int rc)
{
	struct op *o = arg;

	if (rc < 0)
		tw_log_rl(TW_LOG_ERR, "%s ino %" PRIu64 " column %" PRIu32
			  ": journal: %s", type_name(o->hdr.type), o->ino,
			  o->column, strerror(-rc));
	op_done(o, rc, o->d->id);
}

/* --------------------------------------------------------- applying one */

/* The columns of a DELETE or FSYNC as a mask, bit c = column c (server.c
 * checked them: < 32). */
static uint32_t col_mask(const uint32_t *columns, size_t n)
{
	uint32_t cols = 0;

	for (size_t i = 0; i < n; i++)
		cols |= 1u << columns[i];
	return cols;
}

/* Commit a validated mutation to the local store (its transaction closes
 * later: on_local_done(o) runs then, T5).  Fills o->st for WRITE and
 * TRUNCATE.  Returns 0, or -errno and on_local_done never runs. */
static int apply_local(struct iod *d, struct wire_msg *m,
		       const uint32_t *sums, struct op *o)
{
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		const Twinfs__Write *w = (const Twinfs__Write *)m->body;
		struct iod_sub_layout l = { 0 };

		l.stripe_size = w->layout->stripe_size;
		l.stripe_count = w->layout->stripe_count;
		l.n_groups = (uint32_t)w->layout->n_groups;
		memcpy(l.groups, w->layout->groups,
		       l.n_groups * sizeof(uint32_t));
		if (w->bad_copy)   /* a resync's unrepairable blocks */
			return iod_store_write_bad(d->store, w->ino, w->column,
						   w->offset, m->data,
						   m->data_len, w->trunc_gen,
						   &l, &o->st, on_local_done,
						   o);
		return iod_store_write(d->store, w->ino, w->column, w->offset,
				       m->data, m->data_len, sums,
				       w->trunc_gen, &l, w->sync, &o->st,
				       on_local_done, o);
	}
	case TWINFS__MSG_TYPE__MSG_TRUNCATE: {
		const Twinfs__Truncate *t = (const Twinfs__Truncate *)m->body;

		return iod_store_truncate(d->store, t->ino, t->column, t->size,
					  t->trunc_gen, &o->st, on_local_done,
					  o);
	}
	case TWINFS__MSG_TYPE__MSG_FALLOCATE: {
		const Twinfs__Fallocate *f = (const Twinfs__Fallocate *)m->body;
		struct iod_sub_layout l = { 0 };

		if (f->punch)
			return iod_store_punch(d->store, f->ino, f->column,
					       f->offset, f->length,
					       f->trunc_gen, f->zero, &o->st,
					       on_local_done, o);
		l.stripe_size = f->layout->stripe_size;
		l.stripe_count = f->layout->stripe_count;
		l.n_groups = (uint32_t)f->layout->n_groups;
		memcpy(l.groups, f->layout->groups,
		       l.n_groups * sizeof(uint32_t));
		return iod_store_fallocate(d->store, f->ino, f->column,
					   f->offset, f->length, f->trunc_gen,
					   &l, &o->st, on_local_done, o);
	}
	case TWINFS__MSG_TYPE__MSG_DELETE: {
		const Twinfs__Delete *x = (const Twinfs__Delete *)m->body;

		return iod_store_delete(d->store, x->ino, x->columns,
					x->n_columns, on_local_done, o);
	}
	case TWINFS__MSG_TYPE__MSG_FSYNC: {
		const Twinfs__Fsync *f = (const Twinfs__Fsync *)m->body;

		return iod_store_fsync(d->store, f->ino,
				       col_mask(f->columns, f->n_columns),
				       on_local_done, o);
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
	case TWINFS__MSG_TYPE__MSG_FALLOCATE: {
		Twinfs__Fallocate *f = (Twinfs__Fallocate *)m->body;

		*epoch = f->epoch;
		*fwd_p = &f->forwarded;
		*ino = f->ino;
		*column = f->column;
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

bool iod_twin_peer_readable(const struct iod *d)
{
	struct r1_twin t[2];

	group_twins(d, t);
	return r1_readable(&t[!d->me->twin_index]);
}

/* A mutation this iod could not apply (forwarded: sent by its twin, which
 * applied it); ENOSPC says what the space is. */
static void log_refusal(struct iod *d, uint16_t type, uint64_t ino,
			uint32_t column, int rc, bool forwarded)
{
	char why[PATH_MAX + 160] = "";

	if (rc == -ENOSPC)
		iod_store_space_why(d->store, why, sizeof(why));
	tw_log_rl(TW_LOG_ERR, "%s%s ino %" PRIu64 " column %" PRIu32
		  ": %s%s%s%s", forwarded ? "forwarded " : "", type_name(type),
		  ino, column, strerror(-rc), why[0] ? " (" : "", why,
		  why[0] ? ")" : "");
}

/* A client's WRITE or FALLOCATE under a session mgrd has fenced. */
static bool fenced_request(struct iod *d, struct wire_conn *c,
			   const struct wire_msg *m, uint64_t ino)
{
	uint64_t session = 0;

	if (m->hdr.type == TWINFS__MSG_TYPE__MSG_WRITE)
		session = ((const Twinfs__Write *)m->body)->session;
	else if (m->hdr.type == TWINFS__MSG_TYPE__MSG_FALLOCATE)
		session = ((const Twinfs__Fallocate *)m->body)->session;
	if (!iod_fenced(d, session))
		return false;
	tw_log_rl(TW_LOG_WARN, "%s: %s ino %" PRIu64 " of client session %"
		  PRIu64 " refused: mgrd expired that session (fenced)",
		  wire_conn_peer(c), type_name(m->hdr.type), ino, session);
	return true;
}

void iod_twin_request(struct iod *d, struct wire_conn *c, struct wire_msg *m,
		      const uint32_t *sums)
{
	const struct iod_conn *ic = wire_conn_get_data(c);
	uint16_t type = m->hdr.type;
	struct iod_sub_stat st = { 0 };
	bool has_stat = type == TWINFS__MSG_TYPE__MSG_WRITE ||
			type == TWINFS__MSG_TYPE__MSG_TRUNCATE ||
			type == TWINFS__MSG_TYPE__MSG_FALLOCATE;
	uint64_t epoch, ino;
	uint32_t column;
	protobuf_c_boolean *forwarded;
	struct r1_twin twins[2];
	bool forward;
	struct op *o = NULL;
	struct wire_zdata z;
	int rc;

	fields_of(m, &epoch, &forwarded, &ino, &column);

	if (epoch < d->map.epoch) {
		rc = -ESTALE;
		goto reply;
	}
	if (epoch > d->map.epoch)
		iod_mgr_refresh(d);   /* we are behind; serve on meanwhile */

	o = calloc(1, sizeof(*o));
	if (!o) {
		rc = -ENOMEM;
		goto reply;
	}
	o->d = d;
	o->c = c;
	o->hdr = m->hdr;
	o->ino = ino;
	o->column = column;
	o->has_stat = has_stat;
	if (type == TWINFS__MSG_TYPE__MSG_WRITE) {
		o->off = ((const Twinfs__Write *)m->body)->offset;
		o->len = m->data_len;
		o->needs = o->gives = IOD_STALE_CONTENTS | IOD_STALE_SIZE |
				      IOD_STALE_ALLOC;
	} else if (type == TWINFS__MSG_TYPE__MSG_FALLOCATE) {
		const Twinfs__Fallocate *f = (const Twinfs__Fallocate *)m->body;

		o->off = f->offset;
		o->len = f->length;
		/* A zeroing may allocate: it heals only the bytes. */
		o->gives = f->punch ? IOD_STALE_CONTENTS : IOD_STALE_ALLOC;
		o->needs = o->gives | (f->punch && f->zero ? IOD_STALE_ALLOC
							   : 0);
	} else if (type == TWINFS__MSG_TYPE__MSG_TRUNCATE) {
		o->size = ((const Twinfs__Truncate *)m->body)->size;
	} else if (type == TWINFS__MSG_TYPE__MSG_DELETE) {
		const Twinfs__Delete *x = (const Twinfs__Delete *)m->body;

		/* None listed: every column. */
		o->cols = x->n_columns ? col_mask(x->columns, x->n_columns)
				       : UINT32_MAX;
	}

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
		/* Fencing here too: a primary that has not heard of the
		 * fence (cut off from mgrd) must not get a fenced write onto
		 * a twin that has.  It pins the write like any refused
		 * forward (FORMAT.md "Fencing" says who is resynced). */
		if (fenced_request(d, c, m, ino)) {
			rc = -EKEYEXPIRED;
			goto reply;
		}
		if (d->fault_refuse_fwd && type == d->fault_refuse_type &&
		    (type != TWINFS__MSG_TYPE__MSG_WRITE ||
		     (((const Twinfs__Write *)m->body)->session == 0) ==
		     d->fault_refuse_resync)) {
			d->fault_refuse_fwd = false;   /* main.c: drills only */
			rc = d->fault_refusal;
			tw_warn("forwarded %s ino %" PRIu64 " column %" PRIu32
				" refused with %s (TWINFS_TEST_FAULTS)",
				type_name(type), ino, column,
				rc == -ESTALE ? "ESTALE" : "ENOSPC");
			goto reply;
		}
		o->pending = 1;
		rc = apply_local(d, m, sums, o);
		if (rc < 0) {
			if (rc == -ENOSPC)
				log_refusal(d, type, ino, column, rc, true);
			goto reply;
		}
		/* The twin ordered it: both have it, and here it comes after
		 * every forward of ours whose refusal we have had. */
		stale_heal(d, o, UINT64_MAX);
		wire_conn_ref(c);
		wire_msg_free(m);
		return;
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
	/* Fencing: a client session mgrd expired writes no more (mgr.c). */
	if (fenced_request(d, c, m, ino)) {
		rc = -EKEYEXPIRED;
		goto reply;
	}
	/* T4: forward unless mgrd has demoted the twin in the epoch we and
	 * the sender hold (it then needs resync, R1 invariant 2). */
	forward = r1_must_forward(twins, d->me->twin_index) ||
		  !twins[!d->me->twin_index].needs_resync ||
		  epoch > d->map.epoch;

	/* A write the resyncing twin may never get if we die before its
	 * answer (no pin then): noted first, durably (store.c).  A sender
	 * with a newer map may know of a resync we have not heard of yet:
	 * noted too (a spare note costs one replay of marks). */
	if (forward && has_stat &&
	    (twins[!d->me->twin_index].needs_resync ||
	     twins[!d->me->twin_index].state == R1_RESYNCING ||
	     epoch > d->map.epoch) &&
	    iod_store_note_resync_live(d->store) < 0)
		tw_log_rl(TW_LOG_ERR, "%s: cannot note a write forwarded to "
			  "resyncing twin iod %" PRIu32 ": a restart of this "
			  "iod before its resync completes may leave them "
			  "apart", d->me->dir, d->twin_id);
	/* T1: commit locally, then queue the forward, in this one call.  The
	 * close (the log write) runs before the loop sleeps (main.c's
	 * uv_prepare), so the forward is on the wire first. */
	o->pending = 1;
	o->seq = ++d->fwd_seq;
	rc = apply_local(d, m, sums, o);
	if (rc < 0) {
		if (rc != -ESTALE)
			log_refusal(d, type, ino, column, rc, false);
		goto reply;
	}
	wire_conn_ref(c);
	if (!forward) {
		pin_missed(d, o, true);
		tw_log_rl(TW_LOG_INFO, "twin iod %" PRIu32 " is not writable in "
			  "epoch %" PRIu64 ": completing requests alone",
			  d->twin_id, d->map.epoch);
		wire_msg_free(m);
		return;
	}
	*forwarded = true;
	/* The data goes to the twin as it came, without a copy: the store
	 * holds its own (jbd_write copies), so the forward takes the
	 * buffer and frees it once written (wire_zdata). */
	z = (struct wire_zdata){ .base = m->data, .len = m->data_len,
				 .release = free, .arg = m->data };
	o->pending++;
	o->fwd_len = z.len;
	d->fwd_bytes += z.len;   /* before: a reply may come at once */
	rc = d->twin_peer
		? wire_call_z(d->twin_peer, type, m->body, &z,
			      TW_MAX(d->conf->request_timeout_ms / 2, 1u),
			      on_forward_reply, o)
		: -ENOTCONN;
	if (rc == 0)
		m->data = NULL;   /* the forward's now */
	if (rc < 0) {
		d->fwd_bytes -= o->fwd_len;
		tw_log_rl(TW_LOG_ERR, "%s ino %" PRIu64 ": cannot forward to "
			  "twin iod %" PRIu32 ": %s", type_name(type), ino,
			  d->twin_id, strerror(-rc));
		/* The local commit still completes and answers (-EIO). */
		pin_missed(d, o, true);
		op_done(o, -EIO, rc == -ENOTCONN ? d->twin_id : d->id);
	} else {
		d->n_forwarded++;
		if (d->fwd_unanswered++ == 0)
			tw_spin_arm(&d->twin_spin, tw_now_ns());
	}
	wire_msg_free(m);    /* wire_call_z packed the body */
	return;
reply:
	free(o);
	reply_stat(c, &m->hdr, rc, d->id, has_stat, &st);
	wire_msg_free(m);
}

/* ------------------------------------------------- ordered checksums */

/* twinfsctl verify compares "region checksums that both twins compute
 * through their journals at the same point in the primary's order"
 * (docs/ARCHITECTURE.md "Twins").  Two independent CHECKSUM calls cannot:
 * a write between them is in one and not the other, and verify reported
 * twins that agree as different while a file was written.
 *
 * So the primary takes its checksums and queues the same request on
 * twin_peer in one synchronous call, as T1 does for a mutation.  Every
 * mutation of the subfile is ordered here and forwarded on that one
 * connection, and the twin applies forwarded mutations and answers this
 * request in arrival order on its one loop: both checksums see exactly
 * the mutations ordered before the request (resync.c's skip of equal
 * regions rests on the same argument).  DELETE is not ordered (T2): a
 * subfile being deleted can look absent on one twin only; nor are the
 * forwards of a former primary still in flight on its own connection when
 * the primary changes.  So verify re-checks a difference before it
 * reports one.
 *
 * Both twins compute on their loops, ahead of demand I/O, so one call
 * covers at most IOD_CSUM_BOTH_BYTES; verify walks a subfile call by
 * call.  Each call is a consistent cut of its own regions and the size. */
struct cks_op {
	struct iod *d;
	struct wire_conn *c;
	struct wire_hdr hdr;
	uint64_t ino;
	uint32_t column;
	uint64_t size;
	uint32_t *crcs;
	size_t n_crcs;
	uint32_t bad[IOD_CSUM_BAD_MAX];   /* regions failing block checksums */
	size_t n_bad;
};

static void on_cks_twin(int status, struct wire_msg *reply, void *arg)
{
	struct cks_op *k = arg;
	Twinfs__ChecksumReply r = TWINFS__CHECKSUM_REPLY__INIT;
	const Twinfs__ChecksumReply *t = NULL;

	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor !=
			    &twinfs__checksum_reply__descriptor))
		status = -EPROTO;
	if (status < 0) {
		tw_log_rl(TW_LOG_WARN, "CHECKSUM ino %" PRIu64 " column %"
			  PRIu32 ": twin iod %" PRIu32 " (%s:%d): %s",
			  k->ino, k->column, k->d->twin_id, k->d->twin_host,
			  k->d->twin_port, strerror(-status));
		wire_reply(k->c, &k->hdr, status, NULL, NULL, 0);
	} else {
		t = (const Twinfs__ChecksumReply *)reply->body;
		r.size = k->size;
		r.n_crcs = k->n_crcs;
		r.crcs = k->crcs;
		r.n_bad_regions = k->n_bad;
		r.bad_regions = k->bad;
		r.twin_size = t->size;
		r.n_twin_crcs = t->n_crcs;
		r.twin_crcs = t->crcs;
		r.n_twin_bad_regions = t->n_bad_regions;
		r.twin_bad_regions = t->bad_regions;
		wire_reply(k->c, &k->hdr, 0, &r.base, NULL, 0);
	}
	if (reply)
		wire_msg_free(reply);
	wire_conn_unref(k->c);
	free(k->crcs);
	free(k);
}

void iod_twin_checksum(struct iod *d, struct wire_conn *c,
		       const struct wire_msg *m)
{
	const Twinfs__Checksum *q = (const Twinfs__Checksum *)m->body;
	Twinfs__Checksum fq = *q;
	int mine = d->me->twin_index;
	struct r1_twin twins[2];
	struct cks_op *k = NULL;
	uint32_t max;
	long n;
	int rc;

	if (q->epoch < d->map.epoch) {
		rc = -ESTALE;              /* the caller's map is old */
		goto fail;
	}
	if (q->epoch > d->map.epoch) {
		iod_mgr_refresh(d);        /* ours is: ask again soon */
		rc = -EAGAIN;
		goto fail;
	}
	group_twins(d, twins);
	if (!r1_readable(&twins[0]) || !r1_readable(&twins[1])) {
		rc = -EBUSY;               /* a twin that may lack writes */
		goto fail;
	}
	if (r1_write_primary(twins, q->ino, q->column) != mine) {
		rc = -EINVAL;
		goto fail;
	}
	if (!d->twin_peer) {
		rc = -ENOTCONN;
		goto fail;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		rc = -ENOMEM;
		goto fail;
	}
	/* One region at least, however large (region_size <= 64 MiB); at
	 * most IOD_CSUM_BOTH_SPAN of the subfile, of which we read at most
	 * IOD_CSUM_BOTH_BYTES (holes are free). */
	max = (uint32_t)TW_MAX(IOD_CSUM_BOTH_SPAN / q->region_size, 1u);
	if (q->max_regions && q->max_regions < max)
		max = q->max_regions;
	/* Ours and the forward in this one call: nothing runs between. */
	n = iod_store_checksum(d->store, q->ino, q->column, q->region_size,
			       q->first_region, max, IOD_CSUM_BOTH_BYTES,
			       &k->size, &k->crcs);
	if (n < 0) {
		rc = (int)n;
		goto fail;
	}
	k->n_crcs = (size_t)n;
	{
		const uint32_t *bad;

		k->n_bad = iod_store_checksum_bad(d->store, &bad);
		memcpy(k->bad, bad, k->n_bad * sizeof(*bad));
	}
	k->d = d;
	k->c = c;
	k->hdr = m->hdr;
	k->ino = q->ino;
	k->column = q->column;
	fq.both = false;
	/* The twin covers the regions we did (the same cut), or, when we
	 * have none there (a shorter subfile), what a dense call reads. */
	fq.max_regions = n > 0 ? (uint32_t)n :
			 TW_MIN(max, TW_MAX(IOD_CSUM_BOTH_BYTES / q->region_size, 1u));
	rc = wire_call(d->twin_peer, TWINFS__MSG_TYPE__MSG_CHECKSUM, &fq.base,
		       NULL, 0, TW_MAX(d->conf->request_timeout_ms / 2, 1u),
		       on_cks_twin, k);
	if (rc < 0)
		goto fail;
	wire_conn_ref(c);
	return;
fail:
	if (k)
		free(k->crcs);
	free(k);
	wire_reply(c, &m->hdr, rc, NULL, NULL, 0);
}

/* ------------------------------------------------ write-intent clearing */

/* Every commit_interval, while regions are marked: take a token, sync our
 * journal and have the twin sync its own (a forwarded FSYNC, ino 0); when
 * both succeeded every region last written before the token is synced on
 * both twins, so it is cleared (store_journal.c SJ3).  Works the same for
 * regions we hold as primary and as secondary: a secondary's write was
 * committed on the primary before it was forwarded to us.  A failure
 * (twin away) leaves the regions marked: that is what its resync reads. */
struct icycle {
	struct iod *d;
	uint64_t token;
	int pending;
	int rc;
};

static void icycle_done(struct icycle *ic, int rc)
{
	struct iod *d = ic->d;

	if (rc < 0 && ic->rc == 0)
		ic->rc = rc;
	if (--ic->pending > 0)
		return;
	d->intent_busy = false;
	if (ic->rc == 0 && !d->closing) {
		rc = iod_store_intent_clear(d->store, ic->token);
		if (rc < 0)
			tw_log_rl(TW_LOG_ERR, "write-intent log: clearing: %s",
				  strerror(-rc));
	} else if (ic->rc < 0) {
		tw_log_rl(TW_LOG_INFO, "write-intent log: %" PRIu64 " regions "
			  "stay marked: twin iod %" PRIu32 " not synced (%s)",
			  iod_store_n_marked(d->store), d->twin_id,
			  strerror(-ic->rc));
	}
	free(ic);
}

static void icycle_local(void *arg, int rc)
{
	icycle_done(arg, rc);
}

static void icycle_twin(int status, struct wire_msg *reply, void *arg)
{
	if (reply)
		wire_msg_free(reply);
	icycle_done(arg, status);
}

static void on_intent_timer(uv_timer_t *t)
{
	struct iod *d = t->data;
	Twinfs__Fsync fs = TWINFS__FSYNC__INIT;
	struct icycle *ic;
	int rc;

	const struct iod_map_iod *tw = twin_info(d);

	/* A twin that is not up, or that mgrd says missed writes, cannot
	 * have synced what we hold: nothing may be cleared.  Nor while we
	 * are not readable (resyncing): our marks name what we may hold
	 * that the twin does not, which our resync reads (INTENTS). */
	if (d->intent_busy || d->closing || !d->registered ||
	    iod_store_n_marked(d->store) == 0 || !d->twin_peer ||
	    iod_store_aborted(d->store) || !iod_twin_self_readable(d) ||
	    (tw && (tw->state != TWINFS__IOD_STATE__IOD_UP || tw->needs_resync)))
		return;
	ic = calloc(1, sizeof(*ic));
	if (!ic)
		return;
	ic->d = d;
	ic->token = iod_store_intent_epoch(d->store);
	ic->pending = 1;
	d->intent_busy = true;
	rc = iod_store_fsync(d->store, 0, 0, icycle_local, ic);
	if (rc < 0) {
		d->intent_busy = false;
		free(ic);
		return;
	}
	fs.ino = 0;
	fs.epoch = d->map.epoch;
	fs.forwarded = true;
	ic->pending++;
	rc = wire_call(d->twin_peer, TWINFS__MSG_TYPE__MSG_FSYNC, &fs.base,
		       NULL, 0, d->conf->request_timeout_ms, icycle_twin, ic);
	if (rc < 0)
		icycle_done(ic, rc);
}

int iod_twin_intent_start(struct iod *d)
{
	uint32_t iv = tw_ms_or(d->conf->commit_interval_ms,
			       TW_COMMIT_INTERVAL_MS);

	uv_timer_init(d->loop, &d->intent_timer);
	d->intent_timer.data = d;
	d->intent_timer_init = true;
	return uv_timer_start(&d->intent_timer, on_intent_timer, iv, iv);
}
