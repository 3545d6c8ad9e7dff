/* server.c - the iod's listener: HELLO, validation and dispatch.
 *
 * Every request is validated here before any module sees it: sizes against
 * the wire limits, columns against IOD_MAX_COLUMNS, offsets + lengths
 * against 2^63, layouts against raid.h's bounds.  Reads, listings,
 * checksums and statfs are answered here from the store; WRITE, TRUNCATE,
 * DELETE and FSYNC go to twin.c, which orders them with the twin.
 *
 * Rules (proto/FORMAT.md section 2): the first frame must be HELLO; until a
 * HELLO is accepted nothing else is served (the connection is closed);
 * a wrong cluster name or protocol version gets -EPROTO and the connection
 * is closed.  Before registration with mgrd only HELLO, PING and MAP_UPDATE
 * are served, the rest get -EAGAIN.  Every request gets exactly one reply.
 * Once the journal has aborted, PING is answered -EIO (mgrd demotes us).
 */
#include "iod_int.h"
#include "journal.h"     /* jbd_sums: a WRITE's data by journal block */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SUBFILES_MAX     4096u   /* entries per SUBFILES reply */
#define SUBFILES_DEFAULT 1024u
#define INTENTS_MAX      4096u   /* runs per INTENTS reply */

void iod_reply_status(struct wire_conn *c, const struct wire_msg *m, int rc)
{
	/* wire_reply needs a status <= 0; a positive one is a bug here. */
	if (rc > 0)
		rc = -EIO;
	wire_reply(c, &m->hdr, rc, NULL, NULL, 0);
}

void iod_hello(const struct iod *d, Twinfs__Hello *hello)
{
	wire_hello_init(hello, d->conf->cluster_name, TWINFS__ROLE__ROLE_IOD,
			d->incarnation);
	hello->node_id = d->id;
}

/* ------------------------------------------------------------ validation */

static bool body_is(const struct wire_msg *m, const ProtobufCMessageDescriptor *desc)
{
	return m->body && m->body->descriptor == desc;
}

static int check_layout(const struct iod *d, const Twinfs__Layout *l,
			uint32_t column)
{
	uint32_t s;

	if (!l)
		return -EINVAL;
	s = l->stripe_size;
	if (s < R0_MIN_STRIPE_SIZE || s > R0_MAX_STRIPE_SIZE || (s & (s - 1)))
		return -EINVAL;
	if (l->stripe_count == 0 || l->stripe_count > R0_MAX_STRIPE_COUNT ||
	    column >= l->stripe_count || l->n_groups != l->stripe_count)
		return -EINVAL;
	for (size_t i = 0; i < l->n_groups; i++)
		if (l->groups[i] >= TW_MAX_GROUPS)
			return -EINVAL;
	/* Column k is stored by group groups[k]: it must be ours, or the
	 * sender routed it to the wrong iod. */
	if (l->groups[column] != (uint32_t)d->me->group)
		return -EINVAL;
	return 0;
}

/* The largest size a subfile may reach: ours, or the cluster's (the
 * smallest any iod registered, our twin's included) when smaller.  Held
 * before a request is applied or forwarded: a request past the twin's
 * limit would be acknowledged here and fail there, or fail on both at
 * checkpoint. */
static uint64_t sub_limit(const struct iod *d)
{
	uint64_t own = iod_store_max_size(d->store);
	uint64_t map = d->map.max_subfile_size;

	return map != 0 && map < own ? map : own;
}

/* -EFBIG when [off, off + len) ends past sub_limit (a valid range: no
 * overflow). */
static int check_limit(const struct iod *d, uint64_t off, uint64_t len)
{
	return off + len > sub_limit(d) ? -EFBIG : 0;
}

/* 0, -EINVAL or -EFBIG; done before anything is applied or forwarded. */
static int validate_mutation(const struct iod *d, const struct wire_msg *m)
{
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		const Twinfs__Write *w = (const Twinfs__Write *)m->body;

		if (!body_is(m, &twinfs__write__descriptor) || w->ino == 0 ||
		    m->data_len > WIRE_MAX_DATA ||
		    /* only a resync source's forward (Write.bad_copy) */
		    (w->bad_copy && (!w->forwarded || m->data_len == 0 ||
				     w->offset % 4096u != 0)) ||
		    iod_check_range(w->column, w->offset, m->data_len) < 0)
			return -EINVAL;
		if (check_limit(d, w->offset, m->data_len) < 0)
			return -EFBIG;
		return check_layout(d, w->layout, w->column);
	}
	case TWINFS__MSG_TYPE__MSG_TRUNCATE: {
		const Twinfs__Truncate *t = (const Twinfs__Truncate *)m->body;

		if (!body_is(m, &twinfs__truncate__descriptor) || t->ino == 0 ||
		    m->data_len != 0 || iod_check_range(t->column, t->size, 0) < 0)
			return -EINVAL;
		return check_limit(d, t->size, 0);
	}
	case TWINFS__MSG_TYPE__MSG_DELETE: {
		const Twinfs__Delete *x = (const Twinfs__Delete *)m->body;

		if (!body_is(m, &twinfs__delete__descriptor) || x->ino == 0 ||
		    m->data_len != 0 || x->n_columns > IOD_MAX_COLUMNS)
			return -EINVAL;
		for (size_t i = 0; i < x->n_columns; i++)
			if (x->columns[i] >= IOD_MAX_COLUMNS)
				return -EINVAL;
		return 0;
	}
	case TWINFS__MSG_TYPE__MSG_FALLOCATE: {
		const Twinfs__Fallocate *f = (const Twinfs__Fallocate *)m->body;

		if (!body_is(m, &twinfs__fallocate__descriptor) || f->ino == 0 ||
		    m->data_len != 0 || f->length == 0 ||
		    iod_check_range(f->column, f->offset, f->length) < 0)
			return -EINVAL;
		if (check_limit(d, f->offset, f->length) < 0)
			return -EFBIG;
		return f->punch ? 0 : check_layout(d, f->layout, f->column);
	}
	case TWINFS__MSG_TYPE__MSG_FSYNC: {
		const Twinfs__Fsync *f = (const Twinfs__Fsync *)m->body;

		if (!body_is(m, &twinfs__fsync__descriptor) ||
		    m->data_len != 0 || f->n_columns > IOD_MAX_COLUMNS)
			return -EINVAL;
		for (size_t i = 0; i < f->n_columns; i++)
			if (f->columns[i] >= IOD_MAX_COLUMNS)
				return -EINVAL;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

/* ---------------------------------------------------------------- HELLO */

/* wire_key_fn: "ticket:" || ticket -> its session key Ks (proto/FORMAT.md
 * "Tickets").  The MAC proves mgrd sealed it; proving Ks proves the peer
 * unwrapped it with the client's key. */
static int key_fn(struct wire_conn *c, const uint8_t *id, size_t id_len,
		  uint8_t key[WIRE_KEY_MAX], size_t *key_len,
		  void **principal, const char **why, void *arg)
{
	struct iod *d = arg;
	size_t plen = strlen(WIRE_TICKET_PREFIX);
	struct iod_ticket_principal *p;
	struct wire_ticket t;
	int rc;

	if (!d->conf->secret[0] || id_len <= plen ||
	    memcmp(id, WIRE_TICKET_PREFIX, plen) != 0) {
		*why = "an iod accepts only tickets from mgrd";
		goto refuse;
	}
	rc = wire_ticket_open(d->ktkt, id + plen, id_len - plen,
			      wire_realtime_ms(), &t, key);
	if (rc == -EKEYEXPIRED)
		*why = "ticket expired (is this host's clock right?)";
	else if (rc < 0)
		*why = "not a ticket of this cluster's mgrd";
	else if (iod_fenced(d, t.session))
		*why = "the ticket's session has expired at mgrd";
	if (rc < 0 || iod_fenced(d, t.session))
		goto refuse;
	p = malloc(sizeof(*p));
	if (!p) {
		*why = "out of memory";
		return -ENOMEM;
	}
	p->t = t;
	*key_len = WIRE_TICKET_KEY_LEN;
	*principal = p;
	return 0;
refuse:
	tw_log_rl(TW_LOG_WARN, "iod %" PRIu32 ": refusing AUTH from %s: %s",
		  d->id, wire_conn_peer(c), *why);
	return -EACCES;
}

uint64_t iod_conn_session(const struct wire_conn *c)
{
	const struct iod_conn *ic = wire_conn_get_data(c);

	return ic && ic->role == TWINFS__ROLE__ROLE_CLIENT ? ic->session : 0;
}

/* A client's HELLO with a cluster secret: it must present a ticket
 * (AUTH), for the session it names.  0 or -EACCES with *why. */
static int client_hello_ok(struct iod *d, struct wire_conn *c,
			   const Twinfs__Hello *h, const char **why)
{
	const struct iod_ticket_principal *p = wire_conn_principal(c);

	if (!d->conf->secret[0])
		return 0;
	if (!p) {
		*why = "this iod requires a ticket from mgrd (mount with "
		       "-o keyfile=FILE)";
		return -EACCES;
	}
	if (h->session_id != p->t.session) {
		*why = "the HELLO names another session than its ticket";
		return -EACCES;
	}
	return 0;
}

static void on_hello(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Hello *h = (const Twinfs__Hello *)m->body;
	Twinfs__HelloReply r = TWINFS__HELLO_REPLY__INIT;
	struct iod_conn *ic = wire_conn_get_data(c);

	if (ic && ic->hello_ok) {
		/* A second HELLO: the state it would change is already set. */
		iod_reply_status(c, m, -EPROTO);
		wire_conn_close(c);
		return;
	}
	if (!body_is(m, &twinfs__hello__descriptor) || !h->cluster ||
	    strcmp(h->cluster, d->conf->cluster_name) != 0 ||
	    h->proto_version != WIRE_VERSION) {
		tw_log_rl(TW_LOG_WARN, "HELLO from %s refused: cluster '%s' "
			  "version %" PRIu32 " (we are '%s' version %u)",
			  wire_conn_peer(c),
			  body_is(m, &twinfs__hello__descriptor) && h->cluster
				  ? h->cluster : "?",
			  body_is(m, &twinfs__hello__descriptor)
				  ? h->proto_version : 0,
			  d->conf->cluster_name, WIRE_VERSION);
		iod_reply_status(c, m, -EPROTO);
		wire_conn_close(c);
		return;
	}
	/* proto/FORMAT.md "Authentication": mgrd, twins and admins prove
	 * the cluster secret whenever there is one; clients a ticket. */
	if (h->role == TWINFS__ROLE__ROLE_CLIENT) {
		const char *why = NULL;

		if (client_hello_ok(d, c, h, &why) < 0) {
			tw_log_rl(TW_LOG_WARN, "HELLO from %s refused: %s",
				  wire_conn_peer(c), why);
			r.refusal = (char *)why;
			wire_reply(c, &m->hdr, -EACCES, &r.base, NULL, 0);
			wire_conn_close(c);
			return;
		}
	} else if (d->conf->secret[0] && !wire_conn_authenticated(c)) {
		tw_log_rl(TW_LOG_WARN, "HELLO from %s refused: role %d without "
			  "the cluster secret", wire_conn_peer(c), h->role);
		iod_reply_status(c, m, -EACCES);
		wire_conn_close(c);
		return;
	}
	/* The only iod that talks to us is our twin (forwards, resync, the
	 * ordered checksums); any other iod id is a misrouted or forged peer.
	 * An unknown role is refused too: role_may knows only these. */
	if ((h->role == TWINFS__ROLE__ROLE_IOD && h->node_id != d->twin_id) ||
	    h->role < TWINFS__ROLE__ROLE_CLIENT ||
	    h->role > TWINFS__ROLE__ROLE_MGRD) {
		tw_log_rl(TW_LOG_WARN, "HELLO from %s refused: role %d node %"
			  PRIu32 " (our twin is iod %" PRIu32 ")",
			  wire_conn_peer(c), h->role, h->node_id, d->twin_id);
		iod_reply_status(c, m, -EPERM);
		wire_conn_close(c);
		return;
	}
	if (!ic) {
		ic = calloc(1, sizeof(*ic));
		if (!ic) {
			iod_reply_status(c, m, -ENOMEM);
			wire_conn_close(c);
			return;
		}
		wire_conn_set_data(c, ic);
	}
	/* docs/ARCHITECTURE.md "Election" E3: no mgrd of an older term. */
	if (h->role == TWINFS__ROLE__ROLE_MGRD &&
	    iod_vote_hello(d, c, ic, h->mgrd_term) < 0) {
		r.refusal = "this mgrd's term is older than the term the "
			    "iods promised: it lost its lease";
		wire_reply(c, &m->hdr, -ESTALE, &r.base, NULL, 0);
		wire_conn_close(c);
		return;
	}
	ic->hello_ok = true;
	ic->role = h->role;
	ic->node_id = h->node_id;
	ic->session = h->role == TWINFS__ROLE__ROLE_CLIENT ? h->session_id : 0;
	r.incarnation = d->incarnation;
	r.node_id = d->id;
	r.epoch = d->map.epoch;
	tw_debug("HELLO from %s: role %d node %" PRIu32, wire_conn_peer(c),
		 (int)h->role, h->node_id);
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
}

/* ------------------------------------------------------------ local ops */

static void on_ping(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	Twinfs__Ping p = TWINFS__PING__INIT;
	const Twinfs__Ping *q = (const Twinfs__Ping *)m->body;

	/* Pings carry the sender's map epoch (mgrd's monitor, clients): a
	 * newer one means we missed a push, e.g. while we were hung. */
	if (q && m->body->descriptor == &twinfs__ping__descriptor &&
	    q->epoch > d->map.epoch && d->registered)
		iod_mgr_refresh(d);

	/* A journal that aborted (J12) makes us unfit to hold data: fail
	 * every ping and probe, so that mgrd demotes us and never takes us
	 * back (ping ok -> rejoin) before a restart and its replay. */
	if (iod_store_aborted(d->store) < 0) {
		wire_reply(c, &m->hdr, -EIO, NULL, NULL, 0);
		return;
	}
	p.epoch = d->map.epoch;
	p.incarnation = d->incarnation;
	wire_reply(c, &m->hdr, 0, &p.base, NULL, 0);
}

static void on_read(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Read *r = (const Twinfs__Read *)m->body;
	Twinfs__ReadReply rr = TWINFS__READ_REPLY__INIT;
	struct iod_sub_stat st;
	struct wire_zdata z;
	uint8_t *buf = NULL;
	uint32_t crc = 0;
	bool sum;
	long n;

	if (!body_is(m, &twinfs__read__descriptor) || r->ino == 0 ||
	    r->length > WIRE_MAX_DATA || m->data_len != 0 ||
	    iod_check_range(r->column, r->offset, r->length) < 0) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	if (r->epoch < d->map.epoch) {
		iod_reply_status(c, m, -ESTALE);
		return;
	}
	if (r->epoch > d->map.epoch)
		iod_mgr_refresh(d);
	else if (!iod_twin_self_readable(d)) {
		/* R1 invariant 1: a twin that missed writes is never read. */
		iod_reply_status(c, m, -ESTALE);
		return;
	}
	sum = !iod_store_csum_stats(d->store)->bench_off;
	n = iod_store_read_crc(d->store, r->ino, r->column, r->offset,
			       r->length, &buf, &st, sum ? &crc : NULL);
	if (n == -EBADMSG) {
		/* docs/ARCHITECTURE.md "Integrity": from the twin */
		const struct iod_conn *ic = wire_conn_get_data(c);

		iod_heal_read(d, c, m, ic->role == TWINFS__ROLE__ROLE_IOD);
		return;
	}
	if (n < 0) {
		tw_log_rl(TW_LOG_ERR, "read ino %" PRIu64 " column %" PRIu32
			  " at %" PRIu64 ": %s", r->ino, r->column, r->offset,
			  strerror((int)-n));
		iod_reply_status(c, m, (int)n);
		return;
	}
	rr.sub_size = st.size;
	if (sum) {
		rr.data_crc = crc;
		rr.has_crc = true;
	}
	/* The data leaves from buf itself, freed once written. */
	z = (struct wire_zdata){ .base = buf, .len = (size_t)n,
				 .release = free, .arg = buf };
	if (wire_reply_z(c, &m->hdr, &rr.base, &z) < 0)
		free(buf);
}

/* SEEK_DATA / SEEK_HOLE in one subfile: a read, so either readable twin
 * answers (as READ). */
static void on_seek(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Seek *q = (const Twinfs__Seek *)m->body;
	Twinfs__SeekReply r = TWINFS__SEEK_REPLY__INIT;
	uint64_t res = 0, size = 0;
	int rc;

	if (!body_is(m, &twinfs__seek__descriptor) || q->ino == 0 ||
	    m->data_len != 0 || iod_check_range(q->column, q->offset, 0) < 0 ||
	    (q->whence != SEEK_DATA && q->whence != SEEK_HOLE)) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	if (q->epoch < d->map.epoch) {
		iod_reply_status(c, m, -ESTALE);
		return;
	}
	if (q->epoch > d->map.epoch)
		iod_mgr_refresh(d);
	else if (!iod_twin_self_readable(d)) {
		iod_reply_status(c, m, -ESTALE);
		return;
	}
	rc = iod_store_seek(d->store, q->ino, q->column, q->offset,
			    (int)q->whence, &res, &size);
	if (rc < 0) {
		tw_log_rl(TW_LOG_ERR, "seek ino %" PRIu64 " column %" PRIu32
			  " at %" PRIu64 ": %s", q->ino, q->column, q->offset,
			  strerror(-rc));
		iod_reply_status(c, m, rc);
		return;
	}
	r.found = rc == 1;
	r.offset = res;
	r.sub_size = size;
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
}

static void on_subfiles(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Subfiles *q = (const Twinfs__Subfiles *)m->body;
	Twinfs__SubfilesReply r = TWINFS__SUBFILES_REPLY__INIT;
	struct iod_sub_info *info = NULL;
	Twinfs__SubfileInfo *msgs = NULL;
	Twinfs__SubfileInfo **ptrs = NULL;
	uint32_t max;
	bool eof;
	int n;

	if (!body_is(m, &twinfs__subfiles__descriptor) ||
	    q->after_column >= IOD_MAX_COLUMNS || m->data_len != 0) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	max = q->max == 0 ? SUBFILES_DEFAULT : TW_MIN(q->max, SUBFILES_MAX);
	info = calloc(max, sizeof(*info));
	msgs = calloc(max, sizeof(*msgs));
	ptrs = calloc(max, sizeof(*ptrs));
	if (!info || !msgs || !ptrs) {
		iod_reply_status(c, m, -ENOMEM);
		goto out;
	}
	n = iod_store_list(d->store, q->after_ino, q->after_column, max, info,
			   &eof);
	if (n < 0) {
		iod_reply_status(c, m, n);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		twinfs__subfile_info__init(&msgs[i]);
		msgs[i].ino = info[i].ino;
		msgs[i].column = info[i].column;
		msgs[i].size = info[i].size;
		msgs[i].blocks = info[i].blocks;
		ptrs[i] = &msgs[i];
	}
	r.n_subfiles = (size_t)n;
	r.subfiles = ptrs;
	r.eof = eof;
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
out:
	free(info);
	free(msgs);
	free(ptrs);
}

/* INTENTS (our twin, resyncing us): our marked regions after a key, in
 * order, so the twin copies what either of us may hold differently.  It
 * travels on the twin connection behind every forward queued before it. */
static void on_intents(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Intents *q = (const Twinfs__Intents *)m->body;
	const struct iod_intent_run after = { q->after_ino, q->after_column,
					      q->after_first, 0, false };
	Twinfs__IntentsReply r = TWINFS__INTENTS_REPLY__INIT;
	struct iod_intent_run *v = NULL;
	Twinfs__IntentRun *msgs = NULL, **ptrs = NULL;
	size_t n = 0, i = 0, k = 0;
	uint32_t max;
	int rc;

	if (!body_is(m, &twinfs__intents__descriptor) || m->data_len != 0) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	max = q->max == 0 ? INTENTS_MAX : TW_MIN(q->max, INTENTS_MAX);
	rc = iod_intent_list(d->store, &v, &n);
	if (rc == 0) {
		msgs = calloc(max, sizeof(*msgs));
		ptrs = calloc(max, sizeof(*ptrs));
		if (!msgs || !ptrs)
			rc = -ENOMEM;
	}
	if (rc < 0) {
		iod_reply_status(c, m, rc);
		goto out;
	}
	while (i < n && iod_intent_run_cmp(&v[i], &after) <= 0)
		i++;
	for (; i < n && k < max; i++, k++) {
		twinfs__intent_run__init(&msgs[k]);
		msgs[k].ino = v[i].ino;
		msgs[k].column = v[i].column;
		msgs[k].first = v[i].first;
		msgs[k].count = v[i].count;
		ptrs[k] = &msgs[k];
	}
	r.runs = ptrs;
	r.n_runs = k;
	r.eof = i >= n;
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
out:
	free(v);
	free(msgs);
	free(ptrs);
}

static void on_checksum(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Checksum *q = (const Twinfs__Checksum *)m->body;
	const struct iod_conn *ic = wire_conn_get_data(c);
	Twinfs__ChecksumReply r = TWINFS__CHECKSUM_REPLY__INIT;
	uint32_t *crcs = NULL;
	uint64_t size;
	long n;

	if (!body_is(m, &twinfs__checksum__descriptor) || q->ino == 0 ||
	    q->column >= IOD_MAX_COLUMNS || m->data_len != 0 ||
	    q->region_size < IOD_CSUM_REGION_MIN ||
	    q->region_size > IOD_CSUM_REGION_MAX) {
		iod_reply_status(c, m, -EINVAL);
		return;
	}
	if (q->both) {
		iod_twin_checksum(d, c, m);   /* answers */
		return;
	}
	/* iod_store_checksum stops after the region during which it read
	 * max_data bytes, so it reads less than max_data + region_size:
	 * this max_data keeps that within IOD_CSUM_PLAIN_BYTES.  Not for our
	 * twin: its half of an ordered checksum (twin.c) must cover exactly
	 * the regions its own half did, which it bounds itself (a twin with
	 * data where the primary has holes would otherwise be cut short and
	 * look different). */
	n = iod_store_checksum(d->store, q->ino, q->column, q->region_size,
			       q->first_region, q->max_regions,
			       ic && ic->role == TWINFS__ROLE__ROLE_IOD ? 0 :
			       (uint64_t)IOD_CSUM_PLAIN_BYTES - q->region_size + 1,
			       &size, &crcs);
	if (n < 0) {
		iod_reply_status(c, m, (int)n);
		return;
	}
	r.size = size;
	r.n_crcs = (size_t)n;
	r.crcs = crcs;
	r.n_bad_regions = iod_store_checksum_bad(d->store,
			(const uint32_t **)&r.bad_regions);
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
	free(crcs);
}

static void on_statfs(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	Twinfs__StatfsReply r = TWINFS__STATFS_REPLY__INIT;
	struct statvfs sv;
	int rc = iod_store_statfs(d->store, &sv);

	if (rc < 0) {
		iod_reply_status(c, m, rc);
		return;
	}
	r.bsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	r.blocks = sv.f_blocks;
	r.bfree = sv.f_bfree;
	r.bavail = sv.f_bavail;
	r.files = sv.f_files;
	r.ffree = sv.f_ffree;
	r.namemax = (uint32_t)sv.f_namemax;
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
}

/* A request only mgrd may send, with a body of type desc: true, or false
 * after refusing it. */
static bool from_mgrd(struct wire_conn *c, const struct wire_msg *m,
		      const ProtobufCMessageDescriptor *desc)
{
	const struct iod_conn *ic = wire_conn_get_data(c);

	if (ic->role != TWINFS__ROLE__ROLE_MGRD) {
		iod_reply_status(c, m, -EPERM);
		return false;
	}
	if (!body_is(m, desc)) {
		iod_reply_status(c, m, -EINVAL);
		return false;
	}
	return true;
}

/* Only mgrd changes the map (docs/ARCHITECTURE.md "Twins"). */
static void on_map_update(struct iod *d, struct wire_conn *c,
			  struct wire_msg *m)
{
	if (from_mgrd(c, m, &twinfs__cluster_map__descriptor))
		iod_reply_status(c, m, iod_map_apply(d, (const
				 Twinfs__ClusterMap *)m->body));
}

/* FENCE: mgrd's list of expired sessions (mgr.c "Fencing"). */
static void on_fence(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	if (from_mgrd(c, m, &twinfs__fence__descriptor))
		iod_reply_status(c, m, iod_fence_take(d, (const Twinfs__Fence *)
						      m->body, false));
}

/* ---------------------------------------------------------- capabilities */

/* What check_cap needs of a data request (NULL cap: not one). */
struct cap_use {
	ProtobufCBinaryData *cap;
	uint64_t ino;
	bool write;
	uint64_t trunc_gen;
};

static void cap_use_of(struct wire_msg *m, struct cap_use *u)
{
	memset(u, 0, sizeof(*u));
	if (!body_is(m, wire_type_desc(m->hdr.type, false)))
		return;   /* the handler refuses it (-EINVAL) */
	switch (m->hdr.type) {
	case TWINFS__MSG_TYPE__MSG_READ: {
		Twinfs__Read *r = (Twinfs__Read *)m->body;

		*u = (struct cap_use){ &r->cap, r->ino, false, 0 };
		break;
	}
	case TWINFS__MSG_TYPE__MSG_SEEK: {
		Twinfs__Seek *q = (Twinfs__Seek *)m->body;

		*u = (struct cap_use){ &q->cap, q->ino, false, 0 };
		break;
	}
	case TWINFS__MSG_TYPE__MSG_WRITE: {
		Twinfs__Write *w = (Twinfs__Write *)m->body;

		*u = (struct cap_use){ &w->cap, w->ino, true, w->trunc_gen };
		break;
	}
	case TWINFS__MSG_TYPE__MSG_FALLOCATE: {
		Twinfs__Fallocate *f = (Twinfs__Fallocate *)m->body;

		*u = (struct cap_use){ &f->cap, f->ino, true, f->trunc_gen };
		break;
	}
	}
}

/* proto/FORMAT.md "Capabilities": with a cluster secret, a client's READ,
 * SEEK, WRITE and FALLOCATE carry a cap mgrd sealed for this inode and the
 * session the connection is bound to, with write rights to write, not
 * expired (WIRE_CAP_SKEW_MS allowed), of a session not fenced, and a
 * write names no trunc_gen past the cap's: the inode's when mgrd issued
 * it, so no client can wedge a file with a generation mgrd never gave.
 * 0; -EACCES for a cap that is not this client's for this request;
 * -EKEYREJECTED for one it should fetch again (absent, expired, older
 * than the trunc_gen it names); -EKEYEXPIRED for a fenced session.  Our
 * twin and mgrd need none; the cap is not forwarded. */
static int check_cap(struct iod *d, struct wire_conn *c, struct wire_msg *m)
{
	const struct iod_conn *ic = wire_conn_get_data(c);
	uint64_t session = iod_conn_session(c), now;
	const char *why;
	struct wire_cap cap;
	struct cap_use u;
	int rc;

	if (!d->has_cap_key || ic->role != TWINFS__ROLE__ROLE_CLIENT)
		return 0;
	cap_use_of(m, &u);
	if (!u.cap)
		return 0;
	if (u.cap->len == 0) {
		why = "carries no capability";
		rc = -EKEYREJECTED;
		goto refuse;
	}
	rc = wire_cap_open(d->cap_key, u.cap->data, u.cap->len, &cap);
	if (rc < 0) {
		why = rc == -EBADMSG ? "carries a forged capability (bad MAC)"
				     : "carries a malformed capability";
		rc = -EACCES;
	} else if (cap.ino != u.ino) {
		why = "carries a capability for another inode";
		rc = -EACCES;
	} else if (cap.session == 0 || cap.session != session) {
		why = "carries a capability of another session";
		rc = -EACCES;
	} else if (u.write && !(cap.flags & WIRE_CAP_F_WRITE)) {
		why = "writes with a read-only capability";
		rc = -EACCES;
	} else if (iod_fenced(d, cap.session)) {
		why = "carries a capability of a fenced session";
		rc = -EKEYEXPIRED;
	} else if ((now = wire_realtime_ms()) > cap.expiry_ms &&
		   now - cap.expiry_ms > WIRE_CAP_SKEW_MS) {
		why = "carries an expired capability";
		rc = -EKEYREJECTED;
	} else if (u.write && u.trunc_gen > cap.trunc_gen) {
		why = "names a trunc_gen newer than its capability's";
		rc = -EKEYREJECTED;
	} else {
		u.cap->len = 0;   /* the twin trusts us, not the client */
		return 0;
	}
refuse:
	/* Two call sites, so that a client's routine refetches (INFO) never
	 * hide a forgery (WARN) from the rate limit. */
	if (rc == -EKEYREJECTED)
		tw_log_rl(TW_LOG_INFO, "%s (session %" PRIu64 "): %s ino %"
			  PRIu64 " refused (%s): it %s; it may fetch a fresh "
			  "one", wire_conn_peer(c), session,
			  wire_type_name(m->hdr.type), u.ino, strerror(-rc),
			  why);
	else
		tw_log_rl(TW_LOG_WARN, "%s (session %" PRIu64 "): %s ino %"
			  PRIu64 " refused (%s): it %s", wire_conn_peer(c),
			  session, wire_type_name(m->hdr.type), u.ino,
			  strerror(-rc), why);
	return rc;
}

/* docs/ARCHITECTURE.md "Integrity": a WRITE's data must match the CRC its
 * sender took (Write.data_crc) before anything is journaled: -EBADMSG,
 * and the client sends it once more.  The sum is combined from the
 * data's sums by journal block, which *sums (the caller frees it) gives
 * the journal, so the bytes are read once (journal/FORMAT.md J5); NULL
 * when there is no data_crc or no memory for them. */
static int check_data_crc(struct iod *d, struct wire_conn *c,
			  const struct wire_msg *m, uint32_t **sums)
{
	const Twinfs__Write *w = (const Twinfs__Write *)m->body;
	uint32_t crc;

	*sums = NULL;
	if (m->hdr.type != TWINFS__MSG_TYPE__MSG_WRITE || !w->has_crc)
		return 0;
	if (m->data_len > 0)
		*sums = malloc(jbd_sums_count(w->offset, m->data_len) *
			       sizeof(**sums));
	if (*sums)
		crc = jbd_sums(w->offset, m->data, m->data_len, *sums);
	else
		crc = tw_crc32c(0, m->data_len ? m->data : (const uint8_t *)"",
				m->data_len);
	if (crc == w->data_crc)
		return 0;
	free(*sums);
	*sums = NULL;
	iod_store_csum_stats(d->store)->wire_mismatches++;
	tw_log_rl(TW_LOG_WARN, "%s: WRITE of ino %" PRIu64 " column %" PRIu32
		  " at %" PRIu64 " (%zu bytes) refused: its data does not "
		  "match the CRC its sender took (damaged on the way)",
		  wire_conn_peer(c), w->ino, w->column, w->offset,
		  (size_t)m->data_len);
	return -EBADMSG;
}

/* ------------------------------------------------------------- dispatch */

/* Who may ask what (proto/FORMAT.md "Who may send what to an iod"): a
 * client reads and writes file data; an admin (twinfsctl) only reads and
 * compares; mgrd and our twin (the only iod that talks to us: on_hello)
 * everything, the map and the fence list from mgrd alone.  A forward that
 * claims to be ordered already is checked again in twin.c. */
static bool role_may(int role, uint16_t type)
{
	switch (type) {
	case TWINFS__MSG_TYPE__MSG_PING:
		return true;
	case TWINFS__MSG_TYPE__MSG_MAP_UPDATE:
	case TWINFS__MSG_TYPE__MSG_FENCE:
	case TWINFS__MSG_TYPE__MSG_RESYNC:
	case TWINFS__MSG_TYPE__MSG_LEASE:
		return role == TWINFS__ROLE__ROLE_MGRD;
	case TWINFS__MSG_TYPE__MSG_SCRUB:
		return role == TWINFS__ROLE__ROLE_ADMIN ||
		       role == TWINFS__ROLE__ROLE_MGRD;
	case TWINFS__MSG_TYPE__MSG_READ:
	case TWINFS__MSG_TYPE__MSG_SEEK:
		return true;
	case TWINFS__MSG_TYPE__MSG_WRITE:
	case TWINFS__MSG_TYPE__MSG_FALLOCATE:
	case TWINFS__MSG_TYPE__MSG_FSYNC:
		return role != TWINFS__ROLE__ROLE_ADMIN;
	case TWINFS__MSG_TYPE__MSG_SUBFILES:
	case TWINFS__MSG_TYPE__MSG_CHECKSUM:
	case TWINFS__MSG_TYPE__MSG_INTENTS:
	case TWINFS__MSG_TYPE__MSG_IOD_STATFS:
		return role != TWINFS__ROLE__ROLE_CLIENT;
	default:   /* TRUNCATE, DELETE: mgrd's and the twin's */
		return role == TWINFS__ROLE__ROLE_MGRD ||
		       role == TWINFS__ROLE__ROLE_IOD;
	}
}

static void on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	struct iod *d = arg;
	const struct iod_conn *ic = wire_conn_get_data(c);
	uint16_t type = m->hdr.type;
	int rc;

	if (type == TWINFS__MSG_TYPE__MSG_HELLO) {
		on_hello(d, c, m);
		goto out;
	}
	if (!ic || !ic->hello_ok) {
		tw_log_rl(TW_LOG_WARN, "%s: %s before an accepted HELLO; "
			  "closing", wire_conn_peer(c), wire_type_name(type));
		wire_conn_close(c);
		goto out;
	}
	if (d->closing) {
		iod_reply_status(c, m, -ESHUTDOWN);
		goto out;
	}
	if (!role_may(ic->role, type)) {
		tw_log_rl(TW_LOG_WARN, "%s: %s refused: not a request its role "
			  "(%s) may send", wire_conn_peer(c),
			  wire_type_name(type), wire_role_name(ic->role));
		iod_reply_status(c, m, -EPERM);
		goto out;
	}
	/* A read-only identity's ticket (proto/FORMAT.md "Tickets"). */
	if ((type == TWINFS__MSG_TYPE__MSG_WRITE ||
	     type == TWINFS__MSG_TYPE__MSG_FALLOCATE) &&
	    ic->role == TWINFS__ROLE__ROLE_CLIENT && wire_conn_principal(c) &&
	    ((const struct iod_ticket_principal *)wire_conn_principal(c))
		    ->t.read_only) {
		iod_reply_status(c, m, -EROFS);
		goto out;
	}
	switch (type) {
	case TWINFS__MSG_TYPE__MSG_PING:
		on_ping(d, c, m);
		goto out;
	case TWINFS__MSG_TYPE__MSG_MAP_UPDATE:
		on_map_update(d, c, m);
		goto out;
	case TWINFS__MSG_TYPE__MSG_FENCE:
		on_fence(d, c, m);
		goto out;
	case TWINFS__MSG_TYPE__MSG_LEASE:   /* no registration needed */
		iod_vote_request(d, c, m);
		goto out;
	case TWINFS__MSG_TYPE__MSG_WRITE:
	case TWINFS__MSG_TYPE__MSG_READ:
	case TWINFS__MSG_TYPE__MSG_TRUNCATE:
	case TWINFS__MSG_TYPE__MSG_DELETE:
	case TWINFS__MSG_TYPE__MSG_FSYNC:
	case TWINFS__MSG_TYPE__MSG_SUBFILES:
	case TWINFS__MSG_TYPE__MSG_CHECKSUM:
	case TWINFS__MSG_TYPE__MSG_INTENTS:
	case TWINFS__MSG_TYPE__MSG_IOD_STATFS:
	case TWINFS__MSG_TYPE__MSG_RESYNC:
	case TWINFS__MSG_TYPE__MSG_FALLOCATE:
	case TWINFS__MSG_TYPE__MSG_SEEK:
	case TWINFS__MSG_TYPE__MSG_SCRUB:
		break;
	default:
		iod_reply_status(c, m, -EOPNOTSUPP);
		goto out;
	}
	/* Serve nothing until registered (docs/ARCHITECTURE.md "Twins"). */
	if (!d->registered) {
		iod_reply_status(c, m, -EAGAIN);
		goto out;
	}
	rc = check_cap(d, c, m);
	if (rc < 0) {
		iod_reply_status(c, m, rc);
		goto out;
	}
	switch (type) {
	case TWINFS__MSG_TYPE__MSG_READ:
		on_read(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_SUBFILES:
		on_subfiles(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_CHECKSUM:
		on_checksum(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_INTENTS:
		on_intents(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_IOD_STATFS:
		on_statfs(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_RESYNC:
		iod_resync_request(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_SEEK:
		on_seek(d, c, m);
		break;
	case TWINFS__MSG_TYPE__MSG_SCRUB:
		if (body_is(m, &twinfs__scrub__descriptor) && m->data_len == 0)
			iod_scrub_request(d, c, m);
		else
			iod_reply_status(c, m, -EINVAL);
		break;
	default:
		rc = validate_mutation(d, m);
		if (rc == -EFBIG) {
			tw_log_rl(TW_LOG_WARN, "%s: %s refused (File too "
				  "large): it ends past %" PRIu64 " bytes, the "
				  "largest subfile this group holds",
				  wire_conn_peer(c), wire_type_name(type),
				  sub_limit(d));
			iod_reply_status(c, m, rc);
			break;
		}
		if (rc < 0) {
			tw_log_rl(TW_LOG_WARN, "%s: invalid %s refused",
				  wire_conn_peer(c), wire_type_name(type));
			iod_reply_status(c, m, rc);
			break;
		}
		uint32_t *sums;

		rc = check_data_crc(d, c, m, &sums);
		if (rc < 0) {
			iod_reply_status(c, m, rc);
			break;
		}
		iod_twin_request(d, c, m, sums);   /* takes m */
		free(sums);
		if (type == TWINFS__MSG_TYPE__MSG_WRITE)
			iod_mem_after_request(d, c);
		return;
	}
out:
	wire_msg_free(m);
}

static void on_close(struct wire_conn *c, void *arg)
{
	struct iod_conn *ic = wire_conn_get_data(c);

	if (ic)
		iod_vote_conn_gone(arg, ic);
	wire_conn_set_data(c, NULL);
	free(ic);
}

static const struct wire_server_ops server_ops = {
	.on_request = on_request,
	.on_close = on_close,
};

int iod_server_start(struct iod *d)
{
	int rc;

	if (!d->conf->secret[0] && !wire_host_is_loopback(d->me->host)) {
		tw_err("iod %" PRIu32 ": refusing to listen on %s:%d without a "
		       "cluster secret: set [cluster] secret in the config",
		       d->id, d->me->host, d->me->port);
		return -EACCES;
	}
	d->has_cap_key = false;
	if (d->conf->secret[0]) {
		rc = wire_cap_key(d->conf->secret, d->cap_key);
		if (rc < 0)
			return rc;
		d->has_cap_key = true;
	}
	rc = wire_listen(d->loop, d->me->host, d->me->port, &server_ops, d,
			 &d->server);
	if (rc == 0)
		rc = wire_server_set_secret(d->server, d->conf->secret);
	if (rc == 0)
		rc = wire_server_set_channel(d->server, d->conf->channel);
	if (rc == 0)
		wire_channel_announce("iod", d->conf->channel,
				      *d->conf->secret);
	if (rc == 0 && d->conf->secret[0]) {
		rc = wire_ticket_master(d->conf->secret, d->ktkt);
		wire_server_set_key_fn(d->server, key_fn, d);
	}
	if (rc == 0) {
		struct wire_server_limits lim = {
			.hello_timeout_ms = d->conf->hello_timeout_ms,
			.max_queued_reply_bytes =
				d->conf->max_queued_reply_bytes,
		};
		char who[32];

		snprintf(who, sizeof(who), "iod %" PRIu32, d->id);
		rc = tw_fd_budget(who, d->conf->max_connections,
				  IOD_FD_RESERVE, &lim.max_connections);
		if (rc == 0)
			rc = wire_server_set_limits(d->server, &lim);
	}
	if (rc < 0) {
		tw_err("iod %" PRIu32 ": cannot listen on %s:%d: %s", d->id,
		       d->me->host, d->me->port, strerror(-rc));
		return rc;
	}
	tw_info("iod %" PRIu32 " listening on %s:%d, data in %s", d->id,
		d->me->host, d->me->port, d->me->dir);
	return 0;
}

void iod_server_stop(struct iod *d)
{
	if (d->server) {
		wire_server_close(d->server, NULL, NULL);
		d->server = NULL;
	}
}
