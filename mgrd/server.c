/* server.c - the network face of twinfs-mgrd: connections, HELLO and
 * session binding, dispatch (client requests go to handlers.c), the commit
 * path with exactly-once replay of retransmissions, IOD_REGISTER, REPORT,
 * map changes (journaled, then pushed) and pushes, commit timer, session
 * expiry, start and clean stop.  Failure detection is monitor.c's.
 *
 * Request path of a mutating operation (the guarantee "an mgrd reply means
 * its journal record is closed", docs/ARCHITECTURE.md "Guarantees"):
 *   dup_check (a cached reply for (session, seq) is re-sent as it is)
 *   -> build a struct mgr_op, read the clock into op.now
 *   -> mgr_op_apply (state changes, decisions filled in)
 *   -> mgr_srv_finish(): pack the reply, mgr_journal_commit (record
 *      closed, reply cached), then wire_reply.
 * A journal append failure is fatal: the state in memory is ahead of the
 * log, so mgrd exits at once (no snapshot) and restarts from the log.
 *
 * SETATTR with a size is asynchronous: a TRUNC_BEGIN record bumps
 * trunc_gen, the iods truncate (iodpool.c), then the SETATTR record closes
 * and the reply goes out.  A retransmission arriving meanwhile waits for the
 * same answer (struct mgr_inflight).
 *
 * Sessions live while they have a connection; after session_timeout (after
 * a restart: twice that, the grace for clients to come back) without one,
 * a SESSION_EXPIRE record releases their handles (orphans die).  A client
 * connection that stays silent (a hung or stopped client keeps its TCP
 * connection: the kernel still answers for it) is pinged by mgrd after a
 * third of the silence limit, and closed at the limit, session_timeout but
 * at least SILENT_MIN_MS; its session then expires at the next sweep
 * (conns_liveness).  Silence counts only while mgrd itself ran: after a
 * stall of mgrd (SIGSTOP, a late sweep) it counts from the stall's end.
 */
#include "elect.h"
#include "server_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define SWEEP_MS            1000u
/* The silence limit's floor: a partition or a stall shorter than this
 * must not cost a live client its session (open files, locks), even with
 * the short session_timeout of drills (1.5 s). */
#define SILENT_MIN_MS       30000u
#define INO_RESERVE_CHUNK   4096u

/* ---------------------------------------------------------------- basics */

void mgr_srv_now(struct mgr_time *t)
{
	int64_t sec;
	uint32_t nsec;

	tw_realtime(&sec, &nsec);   /* struct mgr_time is packed */
	t->sec = sec;
	t->nsec = nsec;
}

void mgr_srv_fatal(struct mgr_server *s, const char *what, int rc)
{
	(void)s;
	tw_err("mgrd: journal %s failed: %s; exiting without a snapshot so "
	       "that the next start replays only what was acknowledged", what,
	       strerror(-rc));
	_exit(2);
}

void mgr_srv_reply(struct wire_conn *c, const struct wire_hdr *h, int status,
		  const ProtobufCMessage *body)
{
	const struct mgr_conn *mc = wire_conn_get_data(c);

	if (status > 0)
		status = 0;
	/* A pair's active answers once the standby has what it answers
	 * about (repl.c). */
	if (mc && mc->srv && mc->srv->repl &&
	    mgr_repl_hold(mc->srv, c, h, status, status < 0 ? NULL : body))
		return;
	wire_reply(c, h, status, status < 0 ? NULL : body, NULL, 0);
}

/* --------------------------------------------------------- exactly once */

void mgr_srv_resend(struct wire_conn *c, const struct wire_hdr *h,
		   const struct mgr_reply *r)
{
	ProtobufCMessage *body = NULL;

	if (r->status < 0) {
		mgr_srv_reply(c, h, r->status, NULL);
		return;
	}
	if (r->len) {
		body = wire_body_decode(r->type, true, r->data, r->len);
		if (!body) {
			mgr_srv_reply(c, h, -EIO, NULL);
			return;
		}
	}
	mgr_srv_reply(c, h, 0, body);
	if (body)
		protobuf_c_message_free_unpacked(body, NULL);
}

static struct mgr_inflight *inflight_find(struct mgr_server *s, uint64_t session,
				      uint64_t seq)
{
	for (struct mgr_inflight *f = s->inflight; f; f = f->next)
		if (f->session == session && f->seq == seq)
			return f;
	return NULL;
}

/* Fill op's exactly-once fields from ctx.  Returns true when the request
 * has been answered (a retransmission, or refused).  A request may act
 * only for the session its connection holds: another live session's open
 * handles, reply cache and in-flight requests are not its to touch (a
 * RELEASE of them would close another mount's files).  One naming a
 * session that is gone (expired, or replaced at a reconnection while the
 * request was on its way) is served without exactly-once, as before. */
bool mgr_srv_dup_check(struct mgr_server *s, struct wire_conn *c,
		      const struct wire_msg *m, const Twinfs__Ctx *ctx,
		      struct mgr_op *op)
{
	const struct mgr_conn *mc = wire_conn_get_data(c);
	struct mgr_session *sess;
	const struct mgr_reply *r;
	struct mgr_inflight *f;

	mgr_srv_now(&op->now);
	if (!ctx || !ctx->session)
		return false;
	sess = mgr_session_get(&s->st.sessions, ctx->session);
	if (!sess)
		return false;  /* expired: served without exactly-once */
	if (!mc || mc->session != ctx->session) {
		tw_log_rl(TW_LOG_WARN, "mgrd: %s sent %s in the name of "
			  "session %llu, but its connection holds session "
			  "%llu: refused (EPERM)", wire_conn_peer(c),
			  wire_type_name(m->hdr.type),
			  (unsigned long long)ctx->session,
			  (unsigned long long)(mc ? mc->session : 0));
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return true;
	}
	op->session = ctx->session;
	op->seq = ctx->seq;
	op->acked_seq = ctx->acked_seq;
	if (!ctx->seq)
		return false;
	r = mgr_session_reply(sess, ctx->seq);
	if (r) {
		tw_debug("mgrd: session %llu seq %llu: retransmission, "
			 "answered from the reply cache",
			 (unsigned long long)ctx->session,
			 (unsigned long long)ctx->seq);
		mgr_srv_resend(c, &m->hdr, r);
		return true;
	}
	f = inflight_find(s, ctx->session, ctx->seq);
	if (f) {
		struct mgr_waiter *w = calloc(1, sizeof(*w));

		if (!w) {
			mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
			return true;
		}
		w->wc = c;
		w->hdr = m->hdr;
		wire_conn_ref(c);
		w->next = f->waiters;
		f->waiters = w;
		return true;
	}
	return false;
}

/* Journal op with its reply, then answer.  rc < 0 records a failure only
 * for exactly-once requests (nothing changed). */
void mgr_srv_finish(struct mgr_server *s, struct wire_conn *c,
		   const struct wire_hdr *h, struct mgr_op *op, int rc,
		   const ProtobufCMessage *body)
{
	uint8_t *packed = NULL;
	size_t len = 0;
	int jrc;

	if (rc > 0)
		rc = 0;
	op->status = rc;
	if (rc == 0 && body) {
		len = protobuf_c_message_get_packed_size(body);
		packed = malloc(len ? len : 1);
		if (!packed)
			mgr_srv_fatal(s, "reply", -ENOMEM);
		protobuf_c_message_pack(body, packed);
	}
	op->reply = packed;
	op->reply_len = (uint32_t)len;
	op->reply_type = h ? h->type : 0;
	if (rc == 0 || (op->session && op->seq)) {
		jrc = mgr_journal_commit(&s->jnl, op);
		if (jrc < 0)
			mgr_srv_fatal(s, "append", jrc);
	}
	if (c)
		mgr_srv_reply(c, h, rc, body);
	free(packed);
	if (s->kick_pdel) {
		s->kick_pdel = false;
		mgr_pool_kick(s->pool);
	}
}

/* Apply and journal an internal op (no client, no reply). */
int mgr_srv_internal(struct mgr_server *s, struct mgr_op *op)
{
	int rc;

	mgr_srv_now(&op->now);
	rc = mgr_op_apply(&s->st, op);
	if (rc < 0)
		return rc;
	mgr_srv_finish(s, NULL, NULL, op, 0, NULL);
	return 0;
}

/* ----------------------------------------------------------------- space */

/* mgrd's own disk.  Every change appends a record to the log, which only a
 * snapshot shrinks, and a failed append is fatal (memory would be ahead of
 * the log): with the disk full mgrd exited at the next change, and again
 * after every restart, rm included.  So mgrd keeps room for itself: a
 * snapshot of its state (the last one's size, or an estimate per inode)
 * plus SPACE_RESERVE for the records until then.  Below that, a change
 * that grows the namespace (a new inode, name or xattr) is refused with
 * ENOSPC before it is applied, while the others (unlink, rmdir, setattr,
 * release, size reports, sessions, map changes) go on in the reserve; and
 * a snapshot compacts the log, from those changes and from the sweep, so
 * that what rm and rmdir removed frees the space: when the log holds
 * SPACE_SNAP_MIN since the last one, at most once per SPACE_SNAP_MS. */
#define SPACE_RESERVE   (64ull << 20)
#define SPACE_SNAP_MS   1000u
#define SPACE_SNAP_MIN  (1ull << 20)    /* a smaller log is not worth it */
#define SPACE_PER_INODE 256u            /* snapshot bytes, before the first */
/* statvfs is a few microseconds of every create: far from the line its
 * answer is reused for SPACE_READ_MS; within SPACE_RESERVE of the line it
 * is read at every change, as an iod reads its own (journal/FORMAT.md
 * J13). */
#define SPACE_READ_MS   100u

/* Whether the free space (*free_out, -1 unknown) is below what mgrd
 * keeps.  fresh: read it now, whatever was read before. */
static bool space_short(struct mgr_server *s, bool fresh, int64_t *free_out)
{
	struct statvfs sv;
	uint64_t fr, need, snap, now = tw_now_ms();

	snap = TW_MAX(s->jnl.snap_len,
		      (uint64_t)s->st.ns.inodes.count * SPACE_PER_INODE);
	need = SPACE_RESERVE + snap;
	if (!fresh && s->space_read_ms &&
	    now - s->space_read_ms < SPACE_READ_MS && s->space_free >= 0 &&
	    (uint64_t)s->space_free >= need + SPACE_RESERVE) {
		*free_out = s->space_free;
		return false;
	}
	s->space_read_ms = now;
	*free_out = s->space_free = -1;
	if (statvfs(s->conf->mgr_dir, &sv) < 0)
		return false;   /* unknown: the append itself will tell */
	fr = (uint64_t)sv.f_bavail * (sv.f_frsize ? sv.f_frsize : sv.f_bsize);
	*free_out = s->space_free = (int64_t)fr;
	return fr < need;
}

/* Snapshot to compact the log, if it is worth it and not too soon. */
static void space_compact(struct mgr_server *s, int64_t fr)
{
	uint64_t now = tw_now_ms();
	int rc;

	if (mgr_journal_log_bytes(&s->jnl) < SPACE_SNAP_MIN ||
	    now - s->space_snap_ms < SPACE_SNAP_MS)
		return;
	s->space_snap_ms = now;
	rc = mgr_journal_snapshot(&s->jnl);
	tw_warn("mgrd: %s has %lld KiB free, less than mgrd keeps for a "
		"snapshot and its records: snapshot to compact the log %s",
		s->conf->mgr_dir, (long long)(fr >> 10),
		rc < 0 ? strerror(-rc) : "done");
}

/* Whether mgrd is still short after the compaction, if one was due. */
static bool space_short_now(struct mgr_server *s, int64_t *free_out)
{
	if (!space_short(s, false, free_out))
		return false;
	space_compact(s, *free_out);
	return space_short(s, true, free_out);
}

int mgr_srv_space(struct mgr_server *s, uint64_t parent, const char *name)
{
	struct mgr_inode *taken;
	int64_t fr;

	if (name && mgr_ns_lookup(&s->st.ns, parent, name, &taken) == 0)
		return 0;   /* the change fails with EEXIST, whatever the space */
	if (!space_short_now(s, &fr))
		return 0;
	tw_log_rl(TW_LOG_ERR, "mgrd: %s has %lld KiB free, less than mgrd "
		  "keeps (a snapshot of its state and a reserve of %llu "
		  "MiB): creates, links and xattrs fail with ENOSPC until "
		  "space is freed there (removals go on)", s->conf->mgr_dir,
		  (long long)(fr >> 10),
		  (unsigned long long)(SPACE_RESERVE >> 20));
	return -ENOSPC;
}

static void commit_soon(struct mgr_server *s);

/* Before a create may use inode number next_ino, the limit above it must
 * be durable: inode numbers come from a range whose bound is journaled
 * (docs/ARCHITECTURE.md "Metadata") and synced before its first number is
 * used.  The next range is journaled once half of the current one is
 * used, and a background commit started at once makes it durable, so a
 * create waits for that sync only when creates outran it (a busy disk
 * made the wait 5 to 11 ms, once every INO_RESERVE_CHUNK creates). */
void mgr_srv_ino_reserve(struct mgr_server *s)
{
	struct mgr_ns *ns = &s->st.ns;
	int rc;

	if (ns->next_ino + INO_RESERVE_CHUNK / 2 >= ns->ino_limit) {
		struct mgr_op op = { .type = MGR_OP_INO_RESERVE };

		op.new_ino = TW_MAX(ns->next_ino, ns->ino_limit) +
			     INO_RESERVE_CHUNK;
		if (mgr_srv_internal(s, &op) < 0)
			mgr_srv_fatal(s, "reserve", -ENOMEM);
		assert(ns->ino_limit == op.new_ino);
		s->ino_reserved_seq = mgr_journal_last_seq(&s->jnl);
		commit_soon(s);
	}
	if (s->ino_reserved_seq &&
	    mgr_journal_synced_seq(&s->jnl) >= s->ino_reserved_seq)
		s->ino_durable = ns->ino_limit;
	if (ns->next_ino < s->ino_durable)
		return;
	s->ino_waits++;
	rc = mgr_journal_sync(&s->jnl);
	if (rc < 0)
		mgr_srv_fatal(s, "sync", rc);
	assert(mgr_journal_synced_seq(&s->jnl) >= s->ino_reserved_seq);
	s->ino_durable = ns->ino_limit;
	assert(ns->next_ino < s->ino_durable);
}

static void on_pdel_queued(void *arg, struct mgr_pdel *pd)
{
	struct mgr_server *s = arg;

	(void)pd;
	/* Not now: we are inside an apply whose record is not written yet,
	 * and a PDEL_DONE must never precede it in the log. */
	s->kick_pdel = true;
}

static void on_pdel_done(uint64_t ino, void *arg)
{
	struct mgr_server *s = arg;
	struct mgr_op op = { .type = MGR_OP_PDEL_DONE, .ino = ino };

	if (mgr_srv_internal(s, &op) == 0)
		tw_debug("mgrd: subfiles of ino %llu deleted",
			 (unsigned long long)ino);
}

static void on_iod_failed(uint32_t iod_id, void *arg)
{
	struct mgr_server *s = arg;

	if (s->mon && !s->stopping)
		mgr_monitor_report(s->mon, iod_id);
}

/* --------------------------------------------------------- lost writers */

/* A session expired with files open for writing (apply_expire put them in
 * ns.psize): the writes it sent to the iods may be past the size it last
 * reported.  docs/ARCHITECTURE.md "Metadata": mgrd takes the size from
 * the iods before anyone opens the file.  Each column's subfile size at its
 * primary gives the smallest file size that holds them
 * (r0_file_size_from_subfiles), journaled as SIZE_FOUND.  Until then an
 * OPEN of the file (MKNOD's of an existing name too), a truncate, an
 * APPEND_RESERVE or a SETSTRIPE is answered -EAGAIN, which clients retry
 * like an unreachable mgrd (fuse-client/mgr.c).  A probe that fails (a
 * group without a primary) is tried again at the next sweep. */

struct psize_probe {
	struct mgr_server *s;
	uint64_t ino;
	uint64_t gen;             /* trunc_gen when the probe started */
};

static void psize_found(struct mgr_server *s, uint64_t ino, uint64_t gen,
			uint64_t size)
{
	struct mgr_op op = { .type = MGR_OP_SIZE_FOUND, .ino = ino,
			     .size = size, .trunc_gen = gen };
	const struct mgr_inode *in = mgr_ns_get(&s->st.ns, ino);
	uint64_t was = in ? in->size : 0;

	if (mgr_srv_internal(s, &op) < 0)
		return;
	in = mgr_ns_get(&s->st.ns, ino);
	if (in && in->size != was)
		tw_info("mgrd: ino %llu: its writer's session expired; size "
			"%llu taken from the iods (%llu reported)",
			(unsigned long long)ino,
			(unsigned long long)in->size, (unsigned long long)was);
}

static void psize_done(int status, const uint64_t *subs, uint32_t n,
		       void *arg)
{
	struct psize_probe *pr = arg;
	struct mgr_server *s = pr->s;
	struct mgr_psize *ps;
	const struct mgr_inode *in;

	if (s->stopping) {   /* cancelled: nothing is journaled any more */
		free(pr);
		return;
	}
	ps = tw_hmap_get(&s->st.ns.psize, pr->ino);
	in = mgr_ns_get(&s->st.ns, pr->ino);
	if (ps)
		ps->busy = false;
	if (!ps || !in) {     /* destroyed meanwhile */
		free(pr);
		return;
	}
	if (status < 0 || n != in->layout->stripe_count) {
		tw_log_rl(TW_LOG_WARN, "mgrd: size of ino %llu from the iods: "
			  "%s; trying again", (unsigned long long)pr->ino,
			  strerror(status < 0 ? -status : EPROTO));
	} else {
		psize_found(s, pr->ino, pr->gen,
			    r0_file_size_from_subfiles(in->layout, subs));
	}
	free(pr);
}

/* Start ps's probe unless one is out. */
static void psize_start(struct mgr_server *s, struct mgr_psize *ps)
{
	const struct mgr_inode *in = mgr_ns_get(&s->st.ns, ps->ino);
	struct psize_probe *pr;
	int rc;

	/* Fencing first: the writer must not add bytes after the probe. */
	if (ps->busy || !in || !mgr_srv_fenced(s))
		return;
	if (in->layout->stripe_count == 0) {
		psize_found(s, in->ino, in->trunc_gen, 0);  /* no subfiles */
		return;
	}
	pr = malloc(sizeof(*pr));
	if (!pr)
		return;      /* the next sweep */
	*pr = (struct psize_probe){ .s = s, .ino = in->ino,
				    .gen = in->trunc_gen };
	rc = mgr_pool_subsizes(s->pool, in->ino, in->layout, psize_done, pr);
	if (rc < 0) {
		tw_log_rl(TW_LOG_WARN, "mgrd: size of ino %llu from the iods: "
			  "%s; trying again", (unsigned long long)in->ino,
			  strerror(-rc));
		free(pr);
		return;
	}
	ps->busy = true;
}

/* Start a probe for every pending size without one out. */
static void psize_run(struct mgr_server *s)
{
	uint64_t *inos;
	size_t n;

	if (s->stopping || s->st.ns.psize.count == 0)
		return;
	inos = mgr_hmap_sorted_keys(&s->st.ns.psize, &n);
	if (!inos)
		return;
	for (size_t i = 0; i < n; i++) {
		struct mgr_psize *ps = tw_hmap_get(&s->st.ns.psize, inos[i]);

		if (ps)   /* psize_found may have ended it */
			psize_start(s, ps);
	}
	free(inos);
}

bool mgr_srv_psize_wait(struct mgr_server *s, struct wire_conn *c,
			const struct wire_msg *m, uint64_t ino)
{
	struct mgr_psize *ps = tw_hmap_get(&s->st.ns.psize, ino);

	if (!ps)
		return false;
	psize_start(s, ps);
	/* Not recorded: the retransmission is served anew. */
	mgr_srv_reply(c, &m->hdr, -EAGAIN, NULL);
	return true;
}

/* ------------------------------------------------------------- fencing */

/* proto/FORMAT.md "Fencing".  An expired session's client may be alive
 * (partitioned from mgrd, or stopped) and still reach the iods: its
 * writes must not land after mgrd took its files' sizes or gave its locks
 * to someone else.  So SESSION_EXPIRE adds it to the journaled fence
 * list, which goes to every iod (FENCE, and every map sent to an iod); the
 * size probes and the release of its locks wait until every readable iod
 * answered a list that holds it.  An iod that mgrd cannot reach holds
 * them up until the monitor demotes it (then it is nobody's copy). */

bool mgr_srv_fenced(const struct mgr_server *s)
{
	return mgr_pool_fenced(s->pool, s->st.sessions.fence_gen);
}

static void fence_release_locks(struct mgr_server *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n_fence_waits; i++) {
		struct fence_wait w = s->fence_waits[i];

		if (!mgr_pool_fenced(s->pool, w.gen)) {
			s->fence_waits[k++] = w;
			continue;
		}
		tw_info("mgrd: session %llu fenced: every readable iod refuses "
			"its writes", (unsigned long long)w.session);
		mgr_locks_session_gone(s, w.session);
	}
	s->n_fence_waits = k;
}

static void on_fenced(void *arg)
{
	struct mgr_server *s = arg;

	if (s->stopping)
		return;
	fence_release_locks(s);
	psize_run(s);
}

/* Send the list where it is missing; release what is fenced. */
static void fence_run(struct mgr_server *s)
{
	const struct mgr_sessions *ss = &s->st.sessions;

	if (s->stopping)
		return;
	if (ss->fence_gen && !mgr_srv_fenced(s))
		mgr_pool_fence(s->pool, ss->fence_gen, ss->fenced,
			       ss->n_fenced, on_fenced, s);
	fence_release_locks(s);
}

/* The locks of an expired session wait for its fence.  Without memory
 * for the wait they go at once (a lock must not be held for ever). */
static void fence_wait_add(struct mgr_server *s, uint64_t session)
{
	if (s->n_fence_waits == s->cap_fence_waits) {
		size_t cap = s->cap_fence_waits ? 2 * s->cap_fence_waits : 8;
		struct fence_wait *w = realloc(s->fence_waits,
					       cap * sizeof(*w));

		if (!w) {
			mgr_locks_session_gone(s, session);
			return;
		}
		s->fence_waits = w;
		s->cap_fence_waits = cap;
	}
	s->fence_waits[s->n_fence_waits++] = (struct fence_wait){
		.session = session, .gen = s->st.sessions.fence_gen };
}

/* -------------------------------------------------------------- the map */

struct map_buf {
	Twinfs__ClusterMap cm;
	Twinfs__IodInfo info[TW_MAX_IODS];
	Twinfs__IodInfo *ptrs[TW_MAX_IODS];
	Twinfs__Fence fence;
};

/* What an iod's copy of the map carries besides the map: the fence list
 * (borrowed), so that an iod the map makes primary again has the list
 * that every other readable iod answered. */
static void fill_fence(const struct mgr_server *s, struct map_buf *mb)
{
	twinfs__fence__init(&mb->fence);
	mb->fence.gen = s->st.sessions.fence_gen;
	mb->fence.n_sessions = s->st.sessions.n_fenced;
	mb->fence.sessions = (uint64_t *)s->st.sessions.fenced;
	mb->cm.fence = &mb->fence;
}

static void fill_map(const struct mgr_server *s, struct map_buf *mb)
{
	const struct mgr_map *m = &s->st.map;

	twinfs__cluster_map__init(&mb->cm);
	mb->cm.epoch = m->epoch;
	mb->cm.n_groups = m->n_groups;
	mb->cm.stripe_size = m->stripe_size;
	mb->cm.stripe_count = m->stripe_count;
	mb->cm.request_timeout_ms = s->conf->request_timeout_ms;
	mb->cm.mgr_timeout_ms = s->conf->mgr_timeout_ms;
	mb->cm.monitor_interval_ms = s->conf->monitor_interval_ms;
	mb->cm.max_subfile_size = mgr_map_max_subfile(m);
	for (uint32_t i = 0; i < m->n_iods; i++) {
		const struct mgr_map_iod *mi = &m->iods[i];
		Twinfs__IodInfo *ii = &mb->info[i];

		twinfs__iod_info__init(ii);
		ii->id = mi->id;
		ii->group = mi->group;
		ii->twin_index = mi->twin_index;
		ii->host = (char *)mi->host;
		ii->port = (uint32_t)mi->port;
		ii->state = (Twinfs__IodState)mi->state;
		ii->incarnation = mi->incarnation;
		ii->needs_resync = mi->needs_resync;
		if (mi->state == MGR_IOD_RESYNCING)
			ii->resync_permille = mgr_resync_permille(s->resync,
								  mi->id);
		mb->ptrs[i] = ii;
	}
	mb->cm.n_iods = m->n_iods;
	mb->cm.iods = mb->ptrs;
}

void mgr_srv_push_map(struct mgr_server *s)
{
	struct map_buf mb;

	fill_map(s, &mb);
	fill_fence(s, &mb);
	for (struct mgr_conn *mc = s->conns; mc; mc = mc->next) {
		bool iod = mc->role == TWINFS__ROLE__ROLE_IOD;

		mb.cm.fence = iod ? &mb.fence : NULL;
		if (mc->control || iod)
			wire_conn_push(mc->wc, TWINFS__MSG_TYPE__MSG_MAP_UPDATE,
				       &mb.cm.base);
	}
}

/* ------------------------------------------------------------- sessions */

/* Who a client is, for max_sessions_per_client: its authenticated
 * identity, else its address without the port.  The HELLO hostname is the
 * client's own claim (a peer could name itself anew for every session),
 * so it is not used. */
static uint64_t client_key(struct wire_conn *c)
{
	const char *name = mgr_ident_name(c);
	const char *peer = wire_conn_peer(c);
	const char *colon = strrchr(peer, ':');
	size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
	uint64_t k;

	if (name)   /* a tag no address starts with */
		k = tw_fnv1a64(name, strlen(name)) ^ 0x6964656e74000000ull;
	else
		k = tw_fnv1a64(peer, len);
	return k ? k : 1;
}

/* Sessions a client holds now: a walk of every session, run only when a
 * HELLO asks for a new one. */
static uint32_t client_sessions(const struct mgr_server *s, uint64_t key)
{
	uint32_t n = 0;
	uint64_t id;
	void *v;

	for (size_t it = 0; tw_hmap_next(&s->st.sessions.by_id, &it, &id, &v);)
		if (((const struct mgr_session *)v)->client_key == key)
			n++;
	return n;
}

static void session_bind(struct mgr_server *s, struct mgr_conn *mc,
			 struct mgr_session *sess)
{
	sess->client_key = client_key(mc->wc);
	sess->read_only = mc->client && mc->client->read_only;
	sess->root_ino = mc->root_ino;
	mc->session = sess->id;
	sess->n_conns++;
	/* The client is back: the restart grace is over. */
	sess->grace_ms = s->session_timeout_ms;
}

static void session_unbind(struct mgr_server *s, struct mgr_conn *mc)
{
	struct mgr_session *sess = mgr_session_get(&s->st.sessions,
						   mc->session);

	mc->session = 0;
	if (!sess || sess->n_conns == 0)
		return;
	/* Closed for silence: idle since it went silent. */
	if (--sess->n_conns == 0)
		sess->idle_since_ms = mc->silent_since_ms ? mc->silent_since_ms
							  : tw_now_ms();
}

/* mgrd's PING, answered or pushed: its map epoch and incarnation. */
static Twinfs__Ping ping_body(const struct mgr_server *s)
{
	Twinfs__Ping p = TWINFS__PING__INIT;

	p.epoch = s->st.map.epoch;
	p.incarnation = s->incarnation;
	return p;
}

/* A client connection silent for a third of the limit gets a PING push
 * (every client answers pushes); one silent for the whole limit is closed.
 * Connections of clients only: iods have the monitor, admin tools are
 * short-lived. */
static void conns_liveness(struct mgr_server *s, uint64_t now)
{
	uint64_t limit = TW_MAX(s->session_timeout_ms, SILENT_MIN_MS);
	struct mgr_conn *next;

	/* A sweep this late means mgrd did not run (stopped, or starved):
	 * nobody could be heard meanwhile. */
	if (now - s->last_sweep_ms > 3 * SWEEP_MS)
		s->awake_since_ms = now;
	s->last_sweep_ms = now;

	/* next first: closing a connection frees its mgr_conn (on_close). */
	for (struct mgr_conn *mc = s->conns; mc; mc = next) {
		uint64_t rx = TW_MAX(wire_conn_last_rx_ms(mc->wc),
				     s->awake_since_ms), quiet;

		next = mc->next;
		if (mc->role != TWINFS__ROLE__ROLE_CLIENT || !mc->session ||
		    now <= rx)
			continue;
		quiet = now - rx;
		if (quiet >= limit) {
			tw_warn("mgrd: client %s (session %llu) silent for %llu "
				"ms: closing its connection; the session "
				"expires", wire_conn_peer(mc->wc),
				(unsigned long long)mc->session,
				(unsigned long long)quiet);
			mc->silent_since_ms = rx;
			wire_conn_close(mc->wc);
		} else if (quiet >= limit / 3 &&
			   now - mc->pinged_ms >= limit / 3) {
			Twinfs__Ping p = ping_body(s);

			if (wire_conn_push(mc->wc, TWINFS__MSG_TYPE__MSG_PING,
					   &p.base) == 0)
				mc->pinged_ms = now;
		}
	}
}

static void on_sweep(uv_timer_t *t)
{
	struct mgr_server *s = t->data;
	uint64_t now = tw_now_ms(), *ids;
	int64_t fr;
	size_t n;

	if (s->stopping)
		return;
	/* a snapshot child that ended while no record came */
	mgr_journal_poll(&s->jnl);
	(void)space_short_now(s, &fr);   /* compacts the log if short */
	mgr_dl_sweep(s);
	conns_liveness(s, now);
	ids = mgr_hmap_sorted_keys(&s->st.sessions.by_id, &n);
	for (size_t i = 0; ids && i < n; i++) {
		struct mgr_session *sess = mgr_session_get(&s->st.sessions,
							   ids[i]);
		struct mgr_op op = { .type = MGR_OP_SESSION_EXPIRE };
		uint32_t handles;
		uint64_t idle;

		if (!sess || sess->n_conns > 0 ||
		    now - sess->idle_since_ms < sess->grace_ms)
			continue;
		handles = (uint32_t)sess->handles.count;
		idle = now - sess->idle_since_ms;
		op.session = sess->id;
		if (mgr_srv_internal(s, &op) == 0)
			tw_info("mgrd: session %llu expired after %llu ms "
				"without a connection; %u open handles "
				"released", (unsigned long long)ids[i],
				(unsigned long long)idle, handles);
		fence_wait_add(s, ids[i]);
	}
	free(ids);
	fence_run(s);
	/* The sizes those expiries left, those that failed, a replay's. */
	psize_run(s);
}

void mgr_srv_expire_identity(struct mgr_server *s, const char *name)
{
	struct mgr_conn *mc, *next;
	uint64_t *ids;
	size_t n;

	/* Unbound first: the expiry below must not wait for on_close.
	 * next first: closing a connection frees its mgr_conn. */
	for (mc = s->conns; mc; mc = next) {
		const char *id = mgr_ident_name(mc->wc);

		next = mc->next;
		if (mc->role != TWINFS__ROLE__ROLE_CLIENT || !id ||
		    strcmp(id, name) != 0)
			continue;
		if (mc->session)
			session_unbind(s, mc);
		wire_conn_close(mc->wc);
	}
	ids = mgr_hmap_sorted_keys(&s->st.sessions.by_id, &n);
	for (size_t i = 0; ids && i < n; i++) {
		struct mgr_session *sess = mgr_session_get(&s->st.sessions,
							   ids[i]);
		struct mgr_op op = { .type = MGR_OP_SESSION_EXPIRE };

		if (!sess || strcmp(sess->ident, name) != 0)
			continue;
		op.session = sess->id;
		if (mgr_srv_internal(s, &op) == 0)
			tw_info("mgrd: session %llu of revoked client '%s' "
				"expired", (unsigned long long)ids[i], name);
		fence_wait_add(s, ids[i]);
	}
	free(ids);
	fence_run(s);
	psize_run(s);
}

/* ------------------------------------------------------------- requests */

/* Whether a HELLO's secret is that of session s (constant time). */
static bool session_secret_ok(const struct mgr_session *s,
			      const ProtobufCBinaryData *secret)
{
	return s->has_secret && secret->len == MGR_SESSION_SECRET_LEN &&
	       CRYPTO_memcmp(s->secret, secret->data,
			     MGR_SESSION_SECRET_LEN) == 0;
}

/* The key of s->replaced: a dead session id and the secret its HELLO
 * presented (its 16 random bytes folded in whole: without them nobody
 * finds the key but by a 2^-64 chance). */
static uint64_t replaced_key(uint64_t id, const ProtobufCBinaryData *secret)
{
	uint8_t b[MGR_SESSION_SECRET_LEN] = { 0 };
	uint64_t lo, hi, k;

	if (secret->len)      /* data is NULL when the field is absent */
		memcpy(b, secret->data, TW_MIN(secret->len, sizeof(b)));
	memcpy(&lo, b, 8);
	memcpy(&hi, b + 8, 8);
	k = id * 0x9e3779b97f4a7c15ull ^ lo ^ (hi << 29 | hi >> 35);
	return k ? k : 1;
}

/* Refuse a HELLO with a reason the client prints (HelloReply.refusal),
 * log it with the peer, and close. */
static void hello_refuse(struct wire_conn *c, const struct wire_msg *m,
			 int status, const char *why)
{
	Twinfs__HelloReply r = TWINFS__HELLO_REPLY__INIT;

	tw_log_rl(TW_LOG_WARN, "mgrd: refusing HELLO from %s: %s",
		  wire_conn_peer(c), why);
	r.refusal = (char *)why;
	wire_reply(c, &m->hdr, status, &r.base, NULL, 0);
	wire_conn_close(c);
}

/* "host:port" of the active as this mgrd knows it, "" unknown. */
static char *active_addr(const struct mgr_server *s, char *buf, size_t size)
{
	int id = mgr_repl_active_id(s);

	buf[0] = '\0';
	if (id >= 1 && id <= s->conf->n_mgrds)
		snprintf(buf, size, "%s:%d", s->conf->mgrd[id - 1].host,
			 s->conf->mgrd[id - 1].port);
	return buf;
}

/* A client or iod asked an mgrd of a pair that is not the active
 * (proto/FORMAT.md "mgrd pair"): -EREMOTE, and where the active is. */
static void hello_not_active(struct mgr_server *s, struct wire_conn *c,
			     const struct wire_msg *m)
{
	Twinfs__HelloReply r = TWINFS__HELLO_REPLY__INIT;
	char addr[TW_HOST_MAX + 16], why[256];
	int id = mgr_repl_active_id(s);

	active_addr(s, addr, sizeof(addr));
	if (addr[0])
		snprintf(why, sizeof(why), "mgrd %d is %s; the active is "
			 "mgrd %d at %s", s->conf->mgrd_self,
			 s->repl ? "standby" : "not active", id, addr);
	else
		snprintf(why, sizeof(why), "mgrd %d is not active; the active "
			 "is not known here", s->conf->mgrd_self);
	tw_log_rl(TW_LOG_INFO, "mgrd: refusing HELLO from %s: %s",
		  wire_conn_peer(c), why);
	r.refusal = why;
	r.mgrd_id = (uint32_t)s->conf->mgrd_self;
	r.mgrd_term = mgr_elect_term();
	r.active_addr = addr;
	wire_reply(c, &m->hdr, -EREMOTE, &r.base, NULL, 0);
	wire_conn_close(c);
}

bool mgr_srv_serving(const struct mgr_server *s)
{
	return s->active && (!s->repl || mgr_elect_is_active());
}

static void h_hello(struct mgr_server *s, struct wire_conn *c,
		    struct wire_msg *m)
{
	const Twinfs__Hello *h = (const Twinfs__Hello *)m->body;
	Twinfs__HelloReply r = TWINFS__HELLO_REPLY__INIT;
	struct mgr_conn *mc = wire_conn_get_data(c);
	struct mgr_session *sess = NULL;
	const struct tw_conf_client *cl = NULL;
	const char *ident = mgr_ident_name(c);
	uint64_t root_ino = MGR_ROOT_INO;
	struct mgr_ticket_buf tb;
	char why[256], addr[TW_HOST_MAX + 16];

	if (mc) {
		mgr_srv_reply(c, &m->hdr, -EINVAL, NULL);  /* a second HELLO */
		return;
	}
	if (strcmp(h->cluster, s->conf->cluster_name) != 0 ||
	    h->proto_version != WIRE_VERSION) {
		tw_log_rl(TW_LOG_WARN, "mgrd: refusing %s: cluster \"%s\" "
			  "version %u (we are \"%s\" version %u)",
			  wire_conn_peer(c), h->cluster, h->proto_version,
			  s->conf->cluster_name, WIRE_VERSION);
		mgr_srv_reply(c, &m->hdr, -EPROTO, NULL);
		wire_conn_close(c);
		return;
	}
	switch (h->role) {
	case TWINFS__ROLE__ROLE_CLIENT:
		/* proto/FORMAT.md "Client identities": with a secret, a
		 * client proves a [client NAME] key; without one (loopback
		 * development) anonymous clients are served as before. */
		if (ident)
			cl = tw_conf_client(s->conf, ident);
		if (ident && !cl) {
			/* Proved, then removed from the config: impossible
			 * until the config can be reloaded. */
			hello_refuse(c, m, -EACCES, "unknown client");
			return;
		}
		if (s->conf->secret[0] && !cl) {
			hello_refuse(c, m, -EACCES, "mgrd requires a client "
				     "identity: mount with -o keyfile=FILE "
				     "(twinfsctl keygen makes one)");
			return;
		}
		if (mgr_ident_subdir(s, cl, h->subdir, &root_ino, why,
				     sizeof(why)) < 0) {
			hello_refuse(c, m, -EACCES, why);
			return;
		}
		break;
	case TWINFS__ROLE__ROLE_ADMIN:
	case TWINFS__ROLE__ROLE_IOD:
	case TWINFS__ROLE__ROLE_MGRD_PEER:
		/* proto/FORMAT.md "Authentication": iods, admins and the
		 * other mgrd prove the cluster secret (MSG_AUTH) whenever
		 * there is one; clients prove an identity instead (above). */
		if (h->role == TWINFS__ROLE__ROLE_MGRD_PEER &&
		    (!s->repl || (int)h->node_id != 3 - s->conf->mgrd_self)) {
			hello_refuse(c, m, -EPROTO, "not the other mgrd of "
				     "this pair");
			return;
		}
		if (s->conf->secret[0] && !wire_conn_authenticated(c)) {
			tw_log_rl(TW_LOG_WARN, "mgrd: refusing %s: role %s "
				  "without the cluster secret",
				  wire_conn_peer(c), wire_role_name(h->role));
			mgr_srv_reply(c, &m->hdr, -EACCES, NULL);
			wire_conn_close(c);
			return;
		}
		break;
	default:
		tw_log_rl(TW_LOG_WARN, "mgrd: refusing %s: role %d",
			  wire_conn_peer(c), h->role);
		mgr_srv_reply(c, &m->hdr, -EPROTO, NULL);
		wire_conn_close(c);
		return;
	}
	if (!mgr_srv_serving(s) &&
	    (h->role == TWINFS__ROLE__ROLE_CLIENT ||
	     h->role == TWINFS__ROLE__ROLE_IOD)) {
		hello_not_active(s, c, m);
		return;
	}
	/* Only a client's connections hold its session: one that names a
	 * session in an admin HELLO would otherwise keep it alive. */
	if (h->role == TWINFS__ROLE__ROLE_CLIENT) {
		uint64_t rkey = replaced_key(h->session_id, &h->session_secret);

		sess = mgr_session_get(&s->st.sessions, h->session_id);
		/* Resuming a live session takes its secret: session ids are
		 * sequential, and a session holds locks, open handles and
		 * cached replies. */
		if (sess && !session_secret_ok(sess, &h->session_secret)) {
			tw_log_rl(TW_LOG_WARN, "mgrd: refusing %s%s%s: it asks "
				  "to resume session %llu without that "
				  "session's secret", wire_conn_peer(c),
				  h->hostname[0] ? " " : "", h->hostname,
				  (unsigned long long)h->session_id);
			mgr_srv_reply(c, &m->hdr, -EACCES, NULL);
			wire_conn_close(c);
			return;
		}
		/* A client's two connections come back with the dead id
		 * one after the other, the second before the client heard
		 * of the first's new session: both get the same one. */
		if (!sess && h->session_id)
			sess = mgr_session_get(&s->st.sessions, (uintptr_t)
				tw_hmap_get(&s->replaced, rkey));
		/* A session is its identity's: another's HELLO (even with
		 * the secret, which it could only have stolen) may not
		 * take over its locks and handles. */
		if (sess && strcmp(sess->ident, ident ? ident : "") != 0) {
			snprintf(why, sizeof(why), "session %llu belongs to "
				 "another client identity",
				 (unsigned long long)sess->id);
			hello_refuse(c, m, -EACCES, why);
			return;
		}
		if (!sess) {
			struct mgr_op op = { .type = MGR_OP_SESSION_NEW };
			uint8_t secret[MGR_SESSION_SECRET_LEN];
			uint32_t max = s->conf->max_sessions_per_client;
			uint32_t n = client_sessions(s, client_key(c));

			/* A peer that opens sessions without end would
			 * grow mgrd's tables and its journal: it waits
			 * until one of its sessions expires. */
			if (max && n >= max) {
				tw_log_rl(TW_LOG_WARN, "mgrd: refusing a new "
					  "session to %s: it holds %u "
					  "(max_sessions_per_client); one "
					  "must expire first",
					  wire_conn_peer(c), n);
				mgr_srv_reply(c, &m->hdr, -EAGAIN, NULL);
				wire_conn_close(c);
				return;
			}
			if (tw_random(secret, sizeof(secret)) < 0) {
				mgr_srv_reply(c, &m->hdr, -EIO, NULL);
				wire_conn_close(c);
				return;
			}
			op.uuid = secret;
			op.uuid_len = sizeof(secret);
			op.name = ident;   /* the session's identity */
			if (h->session_id)
				tw_warn("mgrd: %s asks for session %llu, which "
					"expired or never existed; giving it a "
					"new one", wire_conn_peer(c),
					(unsigned long long)h->session_id);
			if (mgr_srv_internal(s, &op) < 0) {
				mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
				return;
			}
			sess = mgr_session_get(&s->st.sessions, op.session);
			sess->grace_ms = s->session_timeout_ms;
			/* Unrecorded, the client's other connection would get
			 * a second new session, and its requests (on this one)
			 * would name a session this one does not hold: refused
			 * (mgr_srv_dup_check).  The client tries again; this
			 * session, never bound, expires. */
			if (h->session_id &&
			    tw_hmap_put(&s->replaced, rkey,
					(void *)(uintptr_t)sess->id) < 0) {
				mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
				wire_conn_close(c);
				return;
			}
			tw_info("mgrd: new session %llu for %s%s%s%s%s%s",
				(unsigned long long)sess->id,
				wire_conn_peer(c), h->hostname[0] ? " " : "",
				h->hostname, ident ? " (client '" : "",
				ident ? ident : "", ident ? "')" : "");
		}
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		wire_conn_close(c);
		return;
	}
	mc->wc = c;
	mc->srv = s;
	mc->role = h->role;
	mc->control = h->control;
	mc->iod_id = h->role == TWINFS__ROLE__ROLE_IOD ? h->node_id : 0;
	mc->client = cl;
	mc->root_ino = root_ino;
	mc->next = s->conns;
	if (s->conns)
		s->conns->prev = mc;
	s->conns = mc;
	wire_conn_set_data(c, mc);
	if (sess)
		session_bind(s, mc, sess);
	r.incarnation = s->incarnation;
	r.session_id = mc->session;
	r.epoch = s->st.map.epoch;
	if (s->repl) {
		r.mgrd_id = (uint32_t)s->conf->mgrd_self;
		r.mgrd_term = mgr_elect_term();
		r.active_addr = active_addr(s, addr, sizeof(addr));
	}
	if (sess && sess->has_secret) {
		r.session_secret.data = sess->secret;
		r.session_secret.len = MGR_SESSION_SECRET_LEN;
	}
	if (h->role == TWINFS__ROLE__ROLE_CLIENT) {
		r.root_ino = root_ino;
		r.read_only = cl && cl->read_only;
		if (cl && sess &&
		    mgr_ident_ticket(s, cl, sess->id, &tb) == 0)
			r.ticket = &tb.msg;
	}
	mgr_srv_reply(c, &m->hdr, 0, &r.base);
}

static void h_get_map(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	const struct mgr_conn *mc = wire_conn_get_data(c);
	struct map_buf mb;

	fill_map(s, &mb);
	if (mc && mc->role == TWINFS__ROLE__ROLE_IOD)
		fill_fence(s, &mb);
	mgr_srv_reply(c, &m->hdr, 0, &mb.cm.base);
}

static void h_ping(struct mgr_server *s, struct wire_conn *c,
		   struct wire_msg *m)
{
	Twinfs__Ping p = ping_body(s);

	mgr_srv_reply(c, &m->hdr, 0, &p.base);
}

static const char *iod_state_name(uint32_t st)
{
	return st <= MGR_IOD_RESYNCING ? r1_state_name((enum r1_state)st) : "?";
}

/* Apply and journal a map change (ops from mgr_map_event or
 * mgr_map_register, in their order), log it, push the new map to every
 * control connection and iod.  A journal failure is fatal (mgr_srv_finish). */
static void map_commit(struct mgr_server *s, struct mgr_op *ops, int n,
		       const char *why)
{
	for (int i = 0; i < n; i++) {
		struct mgr_map_iod *mi = mgr_map_iod(&s->st.map,
						     (uint32_t)ops[i].ino);
		uint32_t old_state = mi ? mi->state : 0;
		bool old_resync = mi && mi->needs_resync;
		int rc = mgr_srv_internal(s, &ops[i]);

		if (rc < 0) {
			tw_err("mgrd: map change of iod %llu refused: %s",
			       (unsigned long long)ops[i].ino, strerror(-rc));
			continue;
		}
		if (!mi)
			continue;
		if (old_state != mi->state || old_resync != mi->needs_resync)
			tw_info("mgrd: iod %u (%s:%d, group %u) %s -> %s%s "
				"(%s); map epoch %llu", mi->id, mi->host,
				mi->port, mi->group, iod_state_name(old_state),
				iod_state_name(mi->state),
				mi->needs_resync ? ", needs resync" : "", why,
				(unsigned long long)s->st.map.epoch);
		if (mi->state == MGR_IOD_RESYNCING && old_state != mi->state)
			tw_warn("mgrd: iod %u is resyncing: it receives writes "
				"but serves no reads until its resync completes%s",
				mi->id, s->conf->auto_resync ? ""
				: " (auto_resync is off: `twinfsctl rebuild` "
				  "starts it)");
		if (old_state != mi->state && s->mon && !s->stopping)
			mgr_monitor_twin_back(s->mon, mi->id);
	}
	if (n > 0) {
		mgr_srv_push_map(s);
		mgr_pool_kick(s->pool);
		mgr_resync_check(s->resync);
		fence_run(s);   /* an iod readable again must answer it */
	}
}

int mgr_srv_map_event(struct mgr_server *s, uint32_t id, enum r1_event ev,
		      uint32_t missed, const char *why)
{
	struct mgr_op ops[2];
	uint32_t down_after = s->conf->down_after ? s->conf->down_after : 2;
	int n = mgr_map_event(&s->st.map, id, ev, missed, down_after, ops);

	if (n > 0)
		map_commit(s, ops, n, why);
	return n;
}

static void h_iod_register(struct mgr_server *s, struct mgr_conn *mc,
			   struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__IodRegister *q = (const Twinfs__IodRegister *)m->body;
	struct mgr_op ops[2];
	struct map_buf mb;
	int rc;

	if (mc->role != TWINFS__ROLE__ROLE_IOD) {
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	/* Only under the id its HELLO named (and, with a secret, proved
	 * it holds the cluster's): one connection, one iod. */
	if (q->iod_id != mc->iod_id) {
		tw_log_rl(TW_LOG_WARN, "mgrd: %s said HELLO as iod %u, "
			  "registers as iod %u: refused", wire_conn_peer(c),
			  mc->iod_id, q->iod_id);
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	{
		struct mgr_map_iod *mi = mgr_map_iod(&s->st.map, q->iod_id);

		if (q->fresh && mi && mi->uuid_len &&
		    (mi->uuid_len != q->uuid.len ||
		     memcmp(mi->uuid, q->uuid.data, q->uuid.len)))
		{
			tw_warn("mgrd: iod %u registers with a new, empty data "
				"directory (replaced or wiped disk): it gets a "
				"full rebuild from its twin", q->iod_id);
			mgr_resync_fresh(s->resync, q->iod_id);
		}
	}
	rc = mgr_map_register_ex(&s->st.map, q->iod_id, q->uuid.data,
				 (uint32_t)q->uuid.len, q->incarnation,
				 q->fresh, ops);
	if (rc == -EEXIST) {
		tw_err("mgrd: iod %u at %s registers with a data directory "
		       "whose UUID differs from the one recorded for iod %u: "
		       "refused (a wrong directory, or an old copy of one; "
		       "to give it a new disk, move its twinfs-id aside: "
		       "it then registers as new and is rebuilt from its "
		       "twin)", q->iod_id, wire_conn_peer(c), q->iod_id);
	} else if (rc == -ENOENT) {
		tw_warn("mgrd: %s registers as iod %u, which is not in the "
			"config: refused", wire_conn_peer(c), q->iod_id);
	}
	if (rc < 0) {
		mgr_srv_reply(c, &m->hdr, rc, NULL);
		return;
	}
	mc->iod_id = q->iod_id;
	{
		struct mgr_map_iod *mi = mgr_map_iod(&s->st.map, q->iod_id);
		uint64_t was = mgr_map_max_subfile(&s->st.map);

		mi->max_subfile = q->max_subfile_size;
		/* A lower limit reaches every client and iod now, even when
		 * the registration changes nothing else in the map. */
		if (mgr_map_max_subfile(&s->st.map) != was) {
			tw_info("mgrd: iod %u holds subfiles of up to %" PRIu64
				" bytes: the cluster's limit is now %" PRIu64,
				q->iod_id, q->max_subfile_size,
				mgr_map_max_subfile(&s->st.map));
			if (rc == 0)
				mgr_srv_push_map(s);
		}
	}
	if (rc > 0) {
		struct mgr_map_iod *mi = mgr_map_iod(&s->st.map, q->iod_id);
		bool first = mi && !mi->uuid_len;

		tw_info("mgrd: iod %u registered from %s (incarnation %llx)%s",
			q->iod_id, wire_conn_peer(c),
			(unsigned long long)q->incarnation,
			first ? ", first time" : "");
		map_commit(s, ops, rc, first ? "first registration"
					     : "registered: new incarnation");
		if (mi && !mgr_map_formed(&s->st.map, mi))
			tw_info("mgrd: iod %u waits for its twin's first "
				"registration before group %u serves",
				mi->id, mi->group);
		mgr_monitor_reset(s->mon, q->iod_id);
	}
	fill_map(s, &mb);
	/* Before the iod serves anything: the sessions it must refuse.  It
	 * takes this list as it is, even with a lower gen than its own (a
	 * journal tail lost with the host: ours is the truth now). */
	fill_fence(s, &mb);
	mgr_srv_reply(c, &m->hdr, 0, &mb.cm.base);
	/* Its answer to FENCE is what counts (a reply can be lost). */
	fence_run(s);
}

/* Report.missed_writes: the twin `reporter` applied writes that iod
 * `missed` never did, and the map still lets `missed` be read.  It is
 * resynced from the reporter (R1_EV_REBUILD; incremental: the reporter's
 * write-intent log pins those regions).  Only the twin itself may say so,
 * and only while it can serve the copy. */
static int missed_writes(struct mgr_server *s, const struct mgr_conn *mc,
			 uint32_t missed, uint32_t reporter)
{
	struct mgr_map_iod *mi = mgr_map_iod(&s->st.map, missed);
	struct mgr_map_iod *ri = mgr_map_iod(&s->st.map, reporter);
	char why[128];
	int rc;

	if (!mi || !ri || mc->role != TWINFS__ROLE__ROLE_IOD ||
	    mc->iod_id != reporter || ri->group != mi->group ||
	    ri->twin_index == mi->twin_index)
		return -EPERM;
	if (!mgr_map_readable(mi))
		return 0;                 /* already not read: it resyncs */
	snprintf(why, sizeof(why), "it missed writes iod %u applied (a "
		 "forward failed)", reporter);
	rc = mgr_srv_map_event(s, missed, R1_EV_REBUILD, 0, why);
	if (rc < 0)
		return -EAGAIN;           /* the reporter is not up: later */
	tw_warn("mgrd: iod %u missed writes that its twin iod %u applied, "
		"yet answers: it resyncs from iod %u", missed, reporter,
		reporter);
	return 0;
}

/* Report.lost_data: iod `id` holds subfiles as lost (its journal could
 * not bring their changes home).  It is rebuilt in full from its twin
 * (as twinfsctl rebuild --full: the full copy deletes each subfile first,
 * which clears the iod's list), and serves no read meanwhile.  -EAGAIN
 * while the twin cannot serve: the iod reports again. */
static int lost_data(struct mgr_server *s, const struct mgr_conn *mc,
		     const Twinfs__Report *q)
{
	char path[256];
	int rc;

	if (mc->role != TWINFS__ROLE__ROLE_IOD || mc->iod_id != q->iod_id ||
	    q->reporter_iod != q->iod_id)
		return -EPERM;
	if (mgr_ns_ino_path(&s->st.ns, q->lost_ino, path, sizeof(path)) < 0)
		snprintf(path, sizeof(path), "(no path)");
	rc = mgr_resync_rebuild(s->resync, q->iod_id, true, 0,
				"its report of lost data");
	if (rc == 0)
		tw_log_rl(TW_LOG_ERR, "mgrd: iod %u holds %s (ino %llu column "
			  "%u) as lost (%s): its twin serves it, and iod %u "
			  "is rebuilt from its twin in full", q->iod_id, path,
			  (unsigned long long)q->lost_ino, q->lost_column,
			  strerror(q->error < 0 ? -q->error : EIO), q->iod_id);
	else
		tw_log_rl(TW_LOG_ERR, "mgrd: iod %u holds %s (ino %llu column "
			  "%u) as lost (%s), and its twin cannot serve it now: "
			  "reads of that file fail with EIO until one can",
			  q->iod_id, path, (unsigned long long)q->lost_ino,
			  q->lost_column,
			  strerror(q->error < 0 ? -q->error : EIO));
	return rc < 0 ? -EAGAIN : 0;
}

/* Report.bad_block: a block of a file failed its checksum on iod `id`
 * (docs/ARCHITECTURE.md "Integrity"); the iod healed it from its twin or
 * answered EIO.  Only logged here, with the file's path. */
static int bad_block(struct mgr_server *s, const struct mgr_conn *mc,
		     const Twinfs__Report *q)
{
	char path[256];

	if (mc->role != TWINFS__ROLE__ROLE_IOD || mc->iod_id != q->iod_id ||
	    q->reporter_iod != q->iod_id)
		return -EPERM;
	if (mgr_ns_ino_path(&s->st.ns, q->lost_ino, path, sizeof(path)) < 0)
		snprintf(path, sizeof(path), "(no path)");
	tw_log_rl(q->bad_healed ? TW_LOG_WARN : TW_LOG_ERR, "mgrd: iod %u: "
		  "%s (ino %llu column %u) subfile offset %llu failed its "
		  "checksum: %s", q->iod_id, path,
		  (unsigned long long)q->lost_ino, q->lost_column,
		  (unsigned long long)q->bad_offset, q->bad_healed ?
		  "served from its twin and rewritten" :
		  "the twin's copy is bad too, reads of it get EIO");
	return 0;
}

static void h_report(struct mgr_server *s, struct mgr_conn *mc,
		     struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Report *q = (const Twinfs__Report *)m->body;

	if (!mgr_map_iod(&s->st.map, q->iod_id)) {
		mgr_srv_reply(c, &m->hdr, -ENOENT, NULL);
		return;
	}
	if (q->lost_data) {
		mgr_srv_reply(c, &m->hdr, lost_data(s, mc, q), NULL);
		return;
	}
	if (q->bad_block) {
		mgr_srv_reply(c, &m->hdr, bad_block(s, mc, q), NULL);
		return;
	}
	if (q->missed_writes) {
		mgr_srv_reply(c, &m->hdr,
			      missed_writes(s, mc, q->iod_id, q->reporter_iod),
			      NULL);
		return;
	}
	/* An iod reports itself when its journal aborted (proto/FORMAT.md
	 * "Failure reports"); it fails our probe, which demotes it. */
	if (mc->role == TWINFS__ROLE__ROLE_IOD && mc->iod_id == q->iod_id &&
	    q->reporter_iod == q->iod_id)
		tw_err("mgrd: iod %u (%s) reports itself failed: its journal "
		       "aborted (%s); probing it, its twin takes over",
		       q->iod_id, wire_conn_peer(c),
		       strerror(q->error < 0 ? -q->error : EIO));
	else
		tw_log_rl(TW_LOG_INFO, "mgrd: %s %llu (%s) reports iod %u: %s "
			  "(epoch %llu); probing it",
			  q->reporter_iod ? "iod" : "client session",
			  q->reporter_iod ? (unsigned long long)q->reporter_iod
					  : (unsigned long long)mc->session,
			  wire_conn_peer(c), q->iod_id,
			  strerror(q->error < 0 ? -q->error : EIO),
			  (unsigned long long)q->epoch);
	/* Answered at once: the reporter waits for the map, not for us. */
	mgr_srv_reply(c, &m->hdr, 0, NULL);
	mgr_monitor_report(s->mon, q->iod_id);
}

/* REBUILD (admin): restart a resync, or accept a stale twin. */
static void h_rebuild(struct mgr_server *s, struct mgr_conn *mc,
		      struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__Rebuild *q = (const Twinfs__Rebuild *)m->body;
	int rc;

	if (mc->role != TWINFS__ROLE__ROLE_ADMIN) {
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	if (!mgr_map_iod(&s->st.map, q->iod)) {
		mgr_srv_reply(c, &m->hdr, -ENOENT, NULL);
		return;
	}
	if (q->accept_stale) {
		tw_err("mgrd: ADMIN OVERRIDE from %s: iod %u is promoted "
		       "WITHOUT resync (rebuild --accept-stale): writes "
		       "acknowledged while it was away MAY BE LOST",
		       wire_conn_peer(c), q->iod);
		rc = mgr_srv_map_event(s, q->iod, R1_EV_ACCEPT_STALE, 0,
				       "admin: rebuild --accept-stale");
		if (rc == -EINVAL)
			tw_warn("mgrd: iod %u: --accept-stale refused: it is "
				"not stale, or its twin can serve (then it "
				"resyncs)", q->iod);
		mgr_srv_reply(c, &m->hdr, rc < 0 ? rc : 0, NULL);
		return;
	}
	rc = mgr_resync_rebuild(s->resync, q->iod, q->full,
				q->rate_limit_mbps, "admin");
	mgr_srv_reply(c, &m->hdr, rc, NULL);
}

/* ------------------------------------------------------------- dispatch */

static bool client_role(const struct mgr_conn *mc)
{
	return mc->role == TWINFS__ROLE__ROLE_CLIENT ||
	       mc->role == TWINFS__ROLE__ROLE_ADMIN;
}

/* twinfsctl mgrd switchover (proto/FORMAT.md "mgrd pair"): answered, then
 * this mgrd stops serving and releases its lease, and the in-sync standby
 * takes over; clients follow and retransmit, so nothing fails.  Refused
 * with -EAGAIN while the standby could not win (not in sync, or its stale
 * mark not yet cleared at a quorum), -EOPNOTSUPP without a pair. */
static void h_switchover(struct mgr_server *s, const struct mgr_conn *mc,
			 struct wire_conn *c, const struct wire_msg *m)
{
	if (mc->role != TWINFS__ROLE__ROLE_ADMIN) {
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	if (!s->repl) {
		mgr_srv_reply(c, &m->hdr, -EOPNOTSUPP, NULL);
		return;
	}
	if (!mgr_elect_standby_ready()) {
		mgr_srv_reply(c, &m->hdr, -EAGAIN, NULL);
		return;
	}
	tw_info("mgrd: mgrd %d: switchover asked by %s: handing over to the "
		"standby", s->conf->mgrd_self, wire_conn_peer(c));
	mgr_srv_reply(c, &m->hdr, 0, NULL);
	(void)mgr_elect_step_down();
}

static void on_request(struct wire_conn *c, struct wire_msg *m, void *arg)
{
	struct mgr_server *s = arg;
	struct mgr_conn *mc = wire_conn_get_data(c);
	uint16_t t = m->hdr.type;

	if (s->stopping) {
		mgr_srv_reply(c, &m->hdr, -ESHUTDOWN, NULL);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_HELLO) {
		h_hello(s, c, m);
		goto out;
	}
	if (!mc) {
		/* wire_conn enforces HELLO first; a refused HELLO leaves no
		 * conn data and the connection is closing. */
		mgr_srv_reply(c, &m->hdr, -EPROTO, NULL);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_LEASE) {
		if (mc->role == TWINFS__ROLE__ROLE_MGRD_PEER)
			mgr_elect_vote(c, m);
		else
			mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		goto out;
	}
	if (mc->role == TWINFS__ROLE__ROLE_MGRD_PEER) {
		mgr_repl_request(s, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_MGRD_STATUS) {
		Twinfs__MgrdStatus st = TWINFS__MGRD_STATUS__INIT;

		mgr_repl_status(s, &st);
		/* the answer shows the peer's view only: not held */
		wire_reply(c, &m->hdr, 0, &st.base, NULL, 0);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_MGRD_BACKUP && !mgr_srv_serving(s) &&
	    mgr_repl_standby_current(s)) {
		/* a standby in sync holds every acknowledged record: its
		 * copy costs the active nothing (docs/OPERATIONS.md
		 * "Backup and restore") */
		mgr_backup_request(s, c, m);
		goto out;
	}
	if (!mgr_srv_serving(s)) {
		/* proto/FORMAT.md "mgrd pair": only the active serves; the
		 * lease's clock decides, not a timer (Election E2) */
		wire_reply(c, &m->hdr, -EREMOTE, NULL, NULL, 0);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_MGRD_SWITCHOVER) {
		h_switchover(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_PING) {
		h_ping(s, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_MGRD_BACKUP) {
		mgr_backup_request(s, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_GET_MAP) {
		h_get_map(s, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_IOD_REGISTER) {
		h_iod_register(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_REPORT) {
		h_report(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_RESYNC_PROGRESS) {
		if (mc->role == TWINFS__ROLE__ROLE_IOD)
			mgr_resync_progress(s->resync, mc->iod_id,
				(const Twinfs__ResyncProgress *)m->body);
		mgr_srv_reply(c, &m->hdr, mc->role == TWINFS__ROLE__ROLE_IOD
			      ? 0 : -EPERM, NULL);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_REBUILD) {
		h_rebuild(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_TICKET) {
		mgr_ident_h_ticket(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_CLIENT_ADMIN) {
		mgr_ident_h_admin(s, mc, c, m);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_RESYNC_STATUS) {
		if (mc->role == TWINFS__ROLE__ROLE_ADMIN)
			mgr_resync_status(s->resync, c, m);
		else
			mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		goto out;
	}
	if (!client_role(mc)) {
		mgr_srv_reply(c, &m->hdr, -EOPNOTSUPP, NULL);
		goto out;
	}
	if (t == TWINFS__MSG_TYPE__MSG_DIR_RETURN) {
		mgr_dl_return(s, c, m);
		goto out;
	}
	if (mgr_srv_client_request(s, c, m))
		return;   /* parked: dlease.c keeps m */
out:
	wire_msg_free(m);
}

bool mgr_srv_client_request(struct mgr_server *s, struct wire_conn *c,
			    struct wire_msg *m)
{
	if (mgr_dl_park(s, c, m))
		return true;
	mgr_pool_demand(s->pool);
	mgr_handle_client(s, c, m);
	return false;
}

static void on_close(struct wire_conn *c, void *arg)
{
	struct mgr_server *s = arg;
	struct mgr_conn *mc = wire_conn_get_data(c);

	if (!mc)
		return;
	wire_conn_set_data(c, NULL);
	mgr_locks_conn_closed(s, c);
	if (mc->session)
		session_unbind(s, mc);
	/* A registered iod's connection dropped: it may have died.  Probe
	 * it now (a refused connection demotes it at once) instead of
	 * learning it at the next ping, up to 2 x monitor_interval later. */
	if (mc->iod_id && s->mon && !s->stopping)
		mgr_monitor_report(s->mon, mc->iod_id);
	if (mc->prev)
		mc->prev->next = mc->next;
	else
		s->conns = mc->next;
	if (mc->next)
		mc->next->prev = mc->prev;
	free(mc);
}

/* ----------------------------------------------------------- lifecycle */

void mgr_srv_state_loaded(struct mgr_server *s)
{
	s->st.ns.on_pdel = on_pdel_queued;
	s->st.ns.on_pdel_arg = s;
}

/* Serve: what a single mgrd does at start, and an mgrd of a pair when it
 * becomes active.  The standby runs none of it: it changes its state
 * only by the active's records. */
static int activate(struct mgr_server *s)
{
	uint64_t *ids;
	size_t n;
	int rc;

	/* Numbers up to the journaled limit may have been handed out by
	 * records that a power loss took away (here or, after a takeover,
	 * at the old active): never use them again.  Not on a standby,
	 * whose state must stay the active's. */
	if (s->st.ns.next_ino < s->st.ns.ino_limit)
		s->st.ns.next_ino = s->st.ns.ino_limit;
	/* Grace after a restart (or a takeover): clients have two
	 * timeouts to come back before their handles (and the orphans
	 * they keep) go. */
	ids = mgr_hmap_sorted_keys(&s->st.sessions.by_id, &n);
	for (size_t i = 0; ids && i < n; i++) {
		struct mgr_session *sess = mgr_session_get(&s->st.sessions,
							   ids[i]);

		sess->idle_since_ms = tw_now_ms();
		sess->grace_ms = 2ull * s->session_timeout_ms;
	}
	free(ids);
	/* Locks are not journaled: the clients of these sessions re-claim
	 * theirs within lock_grace (handlers_lock.c). */
	rc = mgr_locks_new(s, s->st.sessions.by_id.count > 0);
	if (rc < 0)
		return rc;
	rc = mgr_pool_new(s->loop, s->conf, &s->st.map, &s->st.ns,
			  s->incarnation, on_pdel_done, on_iod_failed, s,
			  &s->pool);
	if (rc < 0)
		return rc;
	rc = mgr_monitor_start(s, &s->mon);
	if (rc < 0)
		return rc;
	rc = mgr_resync_start(s, &s->resync);
	if (rc < 0)
		return rc;
	uv_timer_start(&s->sweep_timer, on_sweep, SWEEP_MS, SWEEP_MS);
	s->last_sweep_ms = tw_now_ms();
	/* L3 (dlease.c): the restart grace runs from here. */
	rc = mgr_dl_start(s);
	if (rc < 0)
		tw_warn("mgrd: no name leases: %s", strerror(-rc));
	s->active = true;
	return 0;
}

void mgr_server_became_active(struct mgr_server *s, uint64_t term)
{
	int rc;

	tw_info("mgrd: mgrd %d is active in term %llu", s->conf->mgrd_self,
		(unsigned long long)term);
	mgr_repl_activate(s, term);
	rc = activate(s);
	if (rc < 0)
		mgr_srv_fatal(s, "activation", rc);
}

/* Lost the lease: another mgrd may be active now, and this one's state
 * may hold records the new one never had.  Stop at once (no snapshot:
 * the log holds every closed record); restarted, it joins as standby
 * and takes the active's whole state (repl.c). */
void mgr_server_lost_lease(struct mgr_server *s)
{
	tw_err("mgrd: mgrd %d lost its lease; exiting so that it rejoins as "
	       "the standby", s->conf->mgrd_self);
	_exit(3);
}

static void stop_step(void *arg);
static void commit_start(struct mgr_server *s);

static void commit_work(uv_work_t *w)
{
	struct mgr_server *s = w->data;

	jnl_rec_sync_run(&s->commit_sync);
}

static void commit_work_done(uv_work_t *w, int status)
{
	struct mgr_server *s = w->data;
	int rc;

	(void)status;   /* never cancelled */
	if (s->stopping) {
		/* the journal is closed, synced before (mgr_server_stop) */
		jnl_rec_sync_forget(&s->commit_sync);
		stop_step(s);
		return;
	}
	rc = mgr_journal_sync_done(&s->jnl, &s->commit_sync);
	if (rc < 0)
		mgr_srv_fatal(s, "sync", rc);
	if (s->commit_again) {
		s->commit_again = false;
		commit_start(s);
	}
}

/* The periodic commit: what was journaled since the last one is made
 * durable by an fdatasync on libuv's thread pool, so that requests go on
 * meanwhile (a flush behind a busy disk took up to 0.4 s on the loop).
 * A tick while the last one runs is skipped; the next takes its records. */
static void on_commit_timer(uv_timer_t *t)
{
	struct mgr_server *s = t->data;

	if (!s->jnl.bg_syncing)
		commit_start(s);
}

/* A commit now, not at the next tick (an inode range reserved ahead):
 * after the running one, if one runs, since it may not cover the newest
 * records. */
static void commit_soon(struct mgr_server *s)
{
	if (s->jnl.bg_syncing)
		s->commit_again = true;
	else
		commit_start(s);
}

static void commit_start(struct mgr_server *s)
{
	int rc;

	assert(!s->jnl.bg_syncing);
	rc = mgr_journal_sync_start(&s->jnl, &s->commit_sync);
	if (rc < 0 && rc != -EIO)
		rc = mgr_journal_sync(&s->jnl);   /* no descriptor: here */
	if (rc < 0)
		mgr_srv_fatal(s, "sync", rc);
	if (rc == 0)
		return;
	s->commit_work.data = s;
	rc = uv_queue_work(s->loop, &s->commit_work, commit_work,
			   commit_work_done);
	assert(rc == 0);        /* fails only without a work callback */
}

int mgr_server_start(struct uv_loop_s *loop, const struct tw_conf *conf,
		     unsigned jnl_flags, struct mgr_server **out)
{
	struct mgr_server *s = calloc(1, sizeof(*s));
	struct wire_server_ops ops = { .on_request = on_request,
				       .on_close = on_close };
	struct mgr_time now;
	int rc;

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->conf = conf;
	s->session_timeout_ms = conf->session_timeout_ms
				? conf->session_timeout_ms : 90000;
	rc = tw_random(&s->incarnation, sizeof(s->incarnation));
	if (rc < 0)
		goto fail;
	rc = mgr_cap_init(conf);
	if (rc < 0)
		goto fail;
	mgr_srv_now(&now);
	rc = mgr_state_init(&s->st, conf, &now);
	if (rc < 0)
		goto fail;
	s->st_init = true;
	rc = tw_mkdir_p(conf->mgr_dir);
	if (rc < 0) {
		tw_err("mgrd: state directory %s: %s", conf->mgr_dir,
		       strerror(-rc));
		goto fail;
	}
	mgr_snap_set_timeout(conf->snapshot_timeout_ms);
	rc = mgr_journal_open_flags(&s->jnl, conf->mgr_dir, &s->st, jnl_flags);
	if (rc == -ENOTRECOVERABLE) {
		/* The journal's line before this one says where and what. */
		tw_err("mgrd: REFUSING TO START: the record log %s/journal is "
		       "damaged in the middle (a record written after the bad "
		       "one had been synced follows it), so cutting it would "
		       "drop synced, acknowledged changes.  "
		       "It is untouched.  To go on: keep a copy of %s, then "
		       "start once with --accept-corrupt-log, which copies "
		       "the log to journal.corrupt-TIME and cuts it at the "
		       "damage (the records after it are lost); "
		       "docs/OPERATIONS.md \"A damaged record log or "
		       "journal\"", conf->mgr_dir, conf->mgr_dir);
		goto fail;
	}
	if (rc < 0) {
		tw_err("mgrd: cannot open the journal in %s: %s",
		       conf->mgr_dir, strerror(-rc));
		goto fail;
	}
	s->jnl_open = true;
	mgr_srv_state_loaded(s);
	tw_info("mgrd: state loaded from %s: %zu inodes, %u orphans, %zu "
		"sessions, %zu pending deletes, next ino %llu, map epoch %llu",
		conf->mgr_dir, s->st.ns.inodes.count, s->st.ns.n_orphans,
		s->st.sessions.by_id.count, s->st.ns.pdel.count,
		(unsigned long long)s->st.ns.next_ino,
		(unsigned long long)s->st.map.epoch);
	uv_timer_init(loop, &s->commit_timer);
	s->commit_timer.data = s;
	uv_timer_init(loop, &s->sweep_timer);
	s->sweep_timer.data = s;
	uv_timer_init(loop, &s->dl_timer);
	s->dl_timer.data = s;
	s->timers_init = true;
	if (conf->n_mgrds == 1)
		rc = activate(s);
	else
		rc = mgr_repl_start(s);
	if (rc < 0)
		goto fail;
	if (!conf->secret[0] && !wire_host_is_loopback(conf->mgr_host)) {
		tw_err("mgrd: refusing to listen on %s:%d without a cluster "
		       "secret: set [cluster] secret in the config (every "
		       "daemon and twinfsctl need the same one)",
		       conf->mgr_host, conf->mgr_port);
		rc = -EACCES;
		goto fail;
	}
	rc = wire_listen(loop, conf->mgr_host, conf->mgr_port, &ops, s,
			 &s->ws);
	if (rc == 0)
		rc = wire_server_set_secret(s->ws, conf->secret);
	if (rc == 0)
		rc = wire_server_set_channel(s->ws, conf->channel);
	if (rc == 0)
		wire_channel_announce("mgrd", conf->channel, *conf->secret);
	if (rc == 0)
		rc = mgr_ident_init(s);
	if (rc == 0) {
		struct wire_server_limits lim = {
			.hello_timeout_ms = conf->hello_timeout_ms,
			.max_queued_reply_bytes = conf->max_queued_reply_bytes,
		};

		/* mgrd's own descriptors: its journal, state files and the
		 * connections it makes to every iod. */
		rc = tw_fd_budget("mgrd", conf->max_connections,
				  MGR_FD_RESERVE + 2 * TW_MAX_IODS,
				  &lim.max_connections);
		if (rc == 0)
			rc = wire_server_set_limits(s->ws, &lim);
	}
	if (rc < 0) {
		tw_err("mgrd: cannot listen on %s:%d: %s", conf->mgr_host,
		       conf->mgr_port, strerror(-rc));
		goto fail;
	}
	uv_timer_start(&s->commit_timer, on_commit_timer,
		       tw_ms_or(conf->commit_interval_ms, TW_COMMIT_INTERVAL_MS),
		       tw_ms_or(conf->commit_interval_ms, TW_COMMIT_INTERVAL_MS));
	tw_info("mgrd: cluster \"%s\" listening on %s:%d, %d iods in %d "
		"groups%s", conf->cluster_name, conf->mgr_host, conf->mgr_port,
		conf->n_iods, conf->n_groups, conf->n_mgrds == 1 ? "" :
		conf->mgrd_self == 1 ? "; mgrd 1 of a pair" :
				       "; mgrd 2 of a pair");
	if (s->repl) {
		rc = mgr_elect_start(s);
		if (rc < 0) {
			tw_err("mgrd: election: %s", strerror(-rc));
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	mgr_elect_stop();
	mgr_repl_stop(s);
	if (s->timers_init) {
		/* never started: closed before the loop runs them */
		uv_close((uv_handle_t *)&s->commit_timer, NULL);
		uv_close((uv_handle_t *)&s->sweep_timer, NULL);
		uv_close((uv_handle_t *)&s->dl_timer, NULL);
		uv_run(loop, UV_RUN_NOWAIT);
	}
	if (s->resync)
		mgr_resync_stop(s->resync);
	if (s->mon)
		mgr_monitor_stop(s->mon);
	if (s->pool)
		mgr_pool_free(s->pool);
	mgr_locks_free(s);
	if (s->jnl_open)
		mgr_journal_close(&s->jnl);
	if (s->st_init)
		mgr_state_free(&s->st);
	tw_hmap_free(&s->replaced);
	free(s->fence_waits);
	mgr_ident_free(s);
	free(s);
	return rc;
}

static void stop_step(void *arg)
{
	struct mgr_server *s = arg;

	if (--s->closing > 0)
		return;
	mgr_state_free(&s->st);
	tw_hmap_free(&s->replaced);
	free(s->fence_waits);
	mgr_ident_free(s);
	if (s->done)
		s->done(s->done_arg);
	free(s);
}

static void on_handle_closed(uv_handle_t *h)
{
	stop_step(h->data);
}

void mgr_server_stop(struct mgr_server *s, void (*done)(void *arg),
		     void *arg)
{
	int rc;

	if (s->stopping)
		return;
	s->stopping = true;
	s->done = done;
	s->done_arg = arg;
	/* The snapshot first: from here on nothing is journaled. */
	rc = mgr_journal_snapshot(&s->jnl);
	if (rc < 0)
		tw_err("mgrd: final snapshot failed: %s; the journal still "
		       "holds everything", strerror(-rc));
	else
		tw_info("mgrd: snapshot written; shutting down");
	mgr_journal_sync(&s->jnl);
	if (s->repl)
		mgr_elect_stop();
	mgr_repl_stop(s);
	mgr_backup_stop(s);
	mgr_journal_close(&s->jnl);
	mgr_locks_free(s);
	mgr_dl_stop(s);
	s->closing = 4 + s->jnl.bg_syncing;
	uv_timer_stop(&s->commit_timer);
	uv_timer_stop(&s->sweep_timer);
	uv_timer_stop(&s->dl_timer);
	uv_close((uv_handle_t *)&s->commit_timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->sweep_timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->dl_timer, on_handle_closed);
	/* Before the pool: its cancelled pings must find the monitor
	 * stopping (it is freed only when its timer has closed). */
	mgr_monitor_stop(s->mon);
	mgr_resync_stop(s->resync);
	if (s->pool)
		mgr_pool_free(s->pool);
	wire_server_close(s->ws, stop_step, s);
}
