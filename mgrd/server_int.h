/* server_int.h - what server.c shares with handlers.c (twinfs-mgrd
 * internal; see mgrd_int.h for the module map).
 *
 * server.c owns connections, HELLO, sessions' liveness, the map pushes,
 * exactly-once and the journal commit path; handlers.c holds one handler per
 * client request type and calls back into the commit path below.
 */
#ifndef TWINFS_MGRD_SERVER_INT_H
#define TWINFS_MGRD_SERVER_INT_H

#include "journal.h"
#include "lock.h"
#include "mgrd_int.h"
#include "wire.h"

struct mgr_conn {
	struct mgr_conn *next, *prev;
	struct wire_conn *wc;
	int role;                 /* TWINFS__ROLE__* */
	bool control;
	uint64_t session;         /* bound session, 0 = none */
	uint32_t iod_id;
	uint64_t pinged_ms;       /* the last PING mgrd pushed (conns_liveness) */
	uint64_t silent_since_ms; /* closed for silence: its last frame */
	/* ROLE_CLIENT: its identity's config (NULL: anonymous; points into
	 * the config, which outlives every connection) and the root of the
	 * subtree its HELLO mounted (MGR_ROOT_INO: all). */
	const struct tw_conf_client *client;
	uint64_t root_ino;
	struct mgr_server *srv;
};

/* ident.c: a revoked client key (mgrd/FORMAT.md section 4). */
#define MGR_FPR_LEN 32           /* SHA-256 of the key */
struct mgr_revoked {
	char name[TW_CLIENT_NAME_MAX];
	uint8_t fpr[MGR_FPR_LEN];
};

/* A ticket and its wrapped key, with the message that points at them. */
struct mgr_ticket_buf {
	Twinfs__Ticket msg;
	uint8_t ticket[WIRE_TICKET_MAX];
	uint8_t wrapped[WIRE_TICKET_KEY_LEN];
};

struct mgr_waiter {
	struct mgr_waiter *next;
	struct wire_conn *wc;     /* referenced */
	struct wire_hdr hdr;
};

/* A mutating request being worked on asynchronously. */
struct mgr_inflight {
	struct mgr_inflight *next;
	uint64_t session, seq;
	struct mgr_waiter *waiters;   /* retransmissions waiting for the answer */
};

struct mgr_server {
	uv_loop_t *loop;
	const struct tw_conf *conf;
	struct mgr_state st;
	bool st_init;
	struct mgr_journal jnl;
	bool jnl_open;
	struct wire_server *ws;
	struct mgr_iodpool *pool;
	struct mgr_monitor *mon;
	struct mgr_resync *resync;
	struct mgr_locks *locks;      /* handlers_lock.c, volatile */
	struct mgr_dleases *dl;       /* dlease.c, volatile */
	uv_timer_t dl_timer;          /* dlease.c */
	uint64_t incarnation;
	uv_timer_t commit_timer;
	/* The periodic commit's fdatasync, on libuv's thread pool while
	 * jnl.bg_syncing (mgr_journal_sync_start). */
	uv_work_t commit_work;
	struct jnl_rec_bgsync commit_sync;
	bool commit_again;            /* start another when this one ends */
	/* Inode numbers (mgr_srv_ino_reserve): the seq of the last
	 * INO_RESERVE record this process wrote (it set ns.ino_limit, which
	 * only those records move on the active), and the limit known
	 * durable (0 until a sync covered one). */
	uint64_t ino_reserved_seq, ino_durable;
	uint64_t ino_waits;           /* creates that waited for that sync */
	uv_timer_t sweep_timer;
	struct mgr_conn *conns;
	struct mgr_inflight *inflight;
	uint32_t session_timeout_ms;
	uint64_t last_sweep_ms;       /* conns_liveness: when it last ran */
	uint64_t awake_since_ms;      /* the end of mgrd's last stall */
	uint64_t space_snap_ms;       /* last snapshot for space (Space) */
	uint64_t space_read_ms;       /* when space_free was read (0 never) */
	int64_t space_free;           /* mgr_dir's free bytes then, -1 unknown */
	/* (Expired session id, the secret its HELLO presented) -> the id of
	 * the session h_hello gave in its place (volatile; keys are
	 * replaced_key(), values ids, not pointers): the client's other
	 * connection, with the same pair, gets the same one; any other
	 * secret does not. */
	struct tw_hmap replaced;
	/* Expired sessions whose locks wait until every readable iod has
	 * fenced them (fence_gen: the list generation that holds them). */
	struct fence_wait { uint64_t session, gen; } *fence_waits;
	size_t n_fence_waits, cap_fence_waits;
	/* ident.c */
	uint8_t ktkt[WIRE_TICKET_KEY_LEN];   /* seals tickets */
	bool has_ktkt;                       /* a cluster secret is set */
	struct mgr_revoked *revoked;
	size_t n_revoked;
	char why[256];                       /* key_fn's last refusal */
	/* The identity of the connection whose request handlers.c runs
	 * now (NULL: anonymous or admin), for squash (mgr_handle_client). */
	const struct tw_conf_client *req_client;
	bool kick_pdel;
	/* An mgrd pair (repl.c; NULL with one mgrd).  active: serving
	 * clients and iods (always with one mgrd; in a pair from
	 * mgr_server_became_active on). */
	struct mgr_repl *repl;
	struct mgr_backup *backup;    /* backup.c, NULL when none runs */
	bool active;
	bool timers_init;
	bool stopping;
	int closing;              /* handles still closing at stop */
	void (*done)(void *arg);
	void *done_arg;
};

/* The caller a request's Ctx names after root_squash (handlers.c);
 * groups must hold MGR_CRED_GROUPS_MAX, cr borrows it. */
void mgr_srv_cred(const struct mgr_server *s, const Twinfs__Ctx *ctx,
		  struct mgr_cred *cr, uint32_t *groups);

/* ident.c: client identities (proto/FORMAT.md "Client identities"). */
int mgr_ident_init(struct mgr_server *s);
/* The active: journal the whole revoked-key list as a REVOKED record,
 * which goes to the standby like any record (a no-op when empty). */
int mgr_ident_revoked_journal(struct mgr_server *s);
/* A standby: take the list of a REVOKED record and write DIR/revoked
 * (before the record enters our log). */
int mgr_ident_revoked_apply(struct mgr_server *s, const void *text,
			    size_t len);
void mgr_ident_free(struct mgr_server *s);
/* The identity a connection proved (NULL: none), by name and config. */
const char *mgr_ident_name(struct wire_conn *c);
const struct tw_conf_client *mgr_ident_conn(const struct mgr_server *s,
					    struct wire_conn *c);
/* A new ticket for session of cl into *tb; -ENOENT without a secret. */
int mgr_ident_ticket(struct mgr_server *s, const struct tw_conf_client *cl,
		     uint64_t session, struct mgr_ticket_buf *tb);
/* Resolve a HELLO's subdir for cl (NULL: anonymous, anything goes):
 * 0 with *ino, or -errno with a message in why. */
int mgr_ident_subdir(struct mgr_server *s, const struct tw_conf_client *cl,
		     const char *subdir, uint64_t *ino, char *why,
		     size_t why_len);
/* Whether ino is root or below it, by parent links. */
bool mgr_ident_in_subtree(const struct mgr_server *s, uint64_t root,
			  uint64_t ino);
void mgr_ident_h_ticket(struct mgr_server *s, struct mgr_conn *mc,
			struct wire_conn *c, struct wire_msg *m);
void mgr_ident_h_admin(struct mgr_server *s, struct mgr_conn *mc,
		       struct wire_conn *c, struct wire_msg *m);
/* Expire every session of identity `name` now and close its
 * connections (revocation). */
void mgr_srv_expire_identity(struct mgr_server *s, const char *name);

/* CLOCK_REALTIME into t. */
void mgr_srv_now(struct mgr_time *t);
/* Serving (and watching the iods): a single mgrd always once started;
 * one of a pair only while active and its lease is valid by the clock,
 * not by a timer (docs/ARCHITECTURE.md "Election" E2). */
bool mgr_srv_serving(const struct mgr_server *s);
/* A journal failure: memory is ahead of the log; exit without snapshot. */
void mgr_srv_fatal(struct mgr_server *s, const char *what, int rc)
	__attribute__((noreturn));
/* wire_reply with status (> 0 means 0) and body only when status == 0. */
void mgr_srv_reply(struct wire_conn *c, const struct wire_hdr *h, int status,
		   const ProtobufCMessage *body);
/* Send a cached reply again. */
void mgr_srv_resend(struct wire_conn *c, const struct wire_hdr *h,
		    const struct mgr_reply *r);
/* Fill op's exactly-once fields and clock from ctx; true when the request
 * was answered (a retransmission, from the cache or after an in-flight
 * twin). */
bool mgr_srv_dup_check(struct mgr_server *s, struct wire_conn *c,
		       const struct wire_msg *m, const Twinfs__Ctx *ctx,
		       struct mgr_op *op);
/* Record op with its status and packed reply (journal closed), then answer
 * on c (may be NULL).  Failed requests are recorded only when
 * exactly-once applies. */
void mgr_srv_finish(struct mgr_server *s, struct wire_conn *c,
		    const struct wire_hdr *h, struct mgr_op *op, int rc,
		    const ProtobufCMessage *body);
/* Apply and record an internal op (no reply). */
int mgr_srv_internal(struct mgr_server *s, struct mgr_op *op);
/* Make the inode-number limit durable before a create uses it. */
void mgr_srv_ino_reserve(struct mgr_server *s);
/* Before a change that grows the namespace (a new inode, name or xattr)
 * is applied: 0, or -ENOSPC while mgrd's own disk is down to its reserve
 * (server.c "Space").  name (NULL: none) in directory parent: 0 when it
 * is taken, since the change then fails with EEXIST. */
int mgr_srv_space(struct mgr_server *s, uint64_t parent, const char *name);

/* Apply a twin-policy event about iod `id` (mgr_map_event), journal the
 * records, log and push the new map.  Returns the number of records (0: no
 * change) or -errno.  `why` goes into the log line. */
int mgr_srv_map_event(struct mgr_server *s, uint32_t id, enum r1_event ev,
		      uint32_t missed, const char *why);
/* MAP_UPDATE to every control connection and every iod. */
void mgr_srv_push_map(struct mgr_server *s);

/* Every readable iod refuses the writes of every expired session
 * (server.c "fencing"). */
bool mgr_srv_fenced(const struct mgr_server *s);
/* The size of ino is still to be taken from the iods (server.c "Lost
 * writers"): true after answering m -EAGAIN (not recorded, so that the
 * client's retransmission is served anew); false: go on. */
bool mgr_srv_psize_wait(struct mgr_server *s, struct wire_conn *c,
			const struct wire_msg *m, uint64_t ino);

/* A client's request after the checks of on_request: parked by dlease.c
 * (true: it keeps m) or handled now (false: the caller frees m). */
bool mgr_srv_client_request(struct mgr_server *s, struct wire_conn *c,
			    struct wire_msg *m);

/* Descriptors mgrd keeps out of max_connections (tw_fd_budget), besides
 * two per iod: its journal, snapshot and state files, logs. */
#define MGR_FD_RESERVE 256u

/* dlease.c: name leases on directories (proto/FORMAT.md "Name leases").
 * A lease runs MGR_DL_MS from when mgrd handled the request that granted
 * or renewed it. */
#define MGR_DL_MS 1000u
struct mgr_dleases;
int mgr_dl_start(struct mgr_server *s);
/* Free every lease and parked request (stopping: never answered). */
void mgr_dl_stop(struct mgr_server *s);
/* A request that adds a name in a directory another session holds a lease
 * on (or any, during the restart grace) waits: true = parked, m kept. */
bool mgr_dl_park(struct mgr_server *s, struct wire_conn *c,
		 struct wire_msg *m);
/* MKDIR made dir: c's session holds a lease on it; its length in ms, or
 * 0. */
uint32_t mgr_dl_grant(struct mgr_server *s, struct wire_conn *c,
		      uint64_t dir);
/* c's session added a name in dir: its lease there (if any, and not being
 * recalled) runs again from now; its length in ms, or 0. */
uint32_t mgr_dl_renew(struct mgr_server *s, struct wire_conn *c,
		      uint64_t dir);
/* DIR_RETURN: the holder gave a lease back; the parked requests run. */
void mgr_dl_return(struct mgr_server *s, struct wire_conn *c,
		   const struct wire_msg *m);
/* Drop expired leases nobody waits for (every SWEEP_MS). */
void mgr_dl_sweep(struct mgr_server *s);

/* monitor.c: failure detection (docs/ARCHITECTURE.md "Twins").  Pings every
 * iod of a formed group every monitor_interval over the iodpool peers; a ping
 * not answered within min(monitor_interval, request_timeout), or a refused or
 * reset connection, is a miss (R1_EV_PING_MISSED with the count of misses
 * in a row; down_after of them make it down); an answer from the same
 * incarnation is R1_EV_PING_OK (suspect -> up, down -> rejoin).  A report
 * makes it probe at once (one probe in flight per iod, none within
 * MON_PROBE_GAP_MS of a successful one); only a failed probe demotes
 * (R1_EV_PROBE_FAILED). */
struct mgr_monitor;
int mgr_monitor_start(struct mgr_server *s, struct mgr_monitor **out);
/* Stop pinging; the monitor is freed once its timer has closed.  Call
 * before mgr_pool_free. */
void mgr_monitor_stop(struct mgr_monitor *m);
void mgr_monitor_report(struct mgr_monitor *m, uint32_t iod_id);
/* iod_id just became readable or writable (up, resyncing): ping its twin
 * now if that one is down, so a live but stale twin (whose rejoin needed
 * this one as its resync source) rejoins without waiting for the next
 * tick, up to monitor_interval later. */
void mgr_monitor_twin_back(struct mgr_monitor *m, uint32_t iod_id);
/* A new incarnation registered: forget its missed pings. */
void mgr_monitor_reset(struct mgr_monitor *m, uint32_t iod_id);

/* resync.c: starts, watches and completes resyncs (docs/ARCHITECTURE.md
 * "Twins"): RESYNC to the readable twin of every `resyncing` iod (when
 * auto_resync is on or the admin asked), R1_EV_RESYNC_DONE on success,
 * retries on failure.  mgr_resync_check runs after every map change and
 * every 200 ms. */
struct mgr_resync;
int mgr_resync_start(struct mgr_server *s, struct mgr_resync **out);
/* Before mgr_pool_free (its cancelled calls must find it stopping). */
void mgr_resync_stop(struct mgr_resync *r);
void mgr_resync_check(struct mgr_resync *r);
void mgr_resync_progress(struct mgr_resync *r, uint32_t from_iod,
			 const Twinfs__ResyncProgress *p);
uint32_t mgr_resync_permille(const struct mgr_resync *r, uint32_t id);
/* Iod id registers with a new, empty data directory: its next resync is
 * a new, full job (an incremental copy reads the write-intent logs, which
 * know nothing of a wiped disk). */
void mgr_resync_fresh(struct mgr_resync *r, uint32_t id);
/* RESYNC_STATUS (admin): answer with the job records (one iod, or every
 * iod that has one). */
void mgr_resync_status(struct mgr_resync *r, struct wire_conn *c,
		       const struct wire_msg *m);
/* REBUILD (admin), or an iod's report of lost data: (re)start the
 * resync of iod id now; `who` names the asker in the log line.  0 (also
 * when it is up: nothing to do), -ENOENT, or -EAGAIN when it is not
 * resyncing (down, or stale without a readable twin). */
int mgr_resync_rebuild(struct mgr_resync *r, uint32_t id, bool full,
		       uint32_t rate_mbps, const char *who);

/* handlers_lock.c: the cluster-wide lock table (proto/FORMAT.md "Locks").
 * mgr_locks_new: grace = there were sessions to come back (a restart);
 * without, locks still wait for the fence list (handlers_lock.c). */
struct mgr_locks;
int mgr_locks_new(struct mgr_server *s, bool grace);
/* Parked requests are dropped unanswered (the clients send them again). */
void mgr_locks_free(struct mgr_server *s);
/* Locks held now (metrics.c). */
uint64_t mgr_locks_count(const struct mgr_server *s);
/* MSG_LOCK, MSG_GETLK, MSG_UNLOCK_ALL, MSG_LOCK_CANCEL. */
void mgr_handle_lock(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m);
/* A session expired: its locks go, waiters they blocked are granted. */
void mgr_locks_session_gone(struct mgr_server *s, uint64_t session);
/* A connection closed: forget the requests parked on it. */
void mgr_locks_conn_closed(struct mgr_server *s, struct wire_conn *c);

/* repl.c: replication of an mgrd pair (docs/ARCHITECTURE.md "Metadata").
 * mgr_repl_start: dial/answer the other mgrd; mgr_repl_activate: this
 * mgrd became active in `term` (ship records, hold replies).
 * mgr_repl_hold: true when it took the reply, to send once the standby
 * acked everything closed before it (or is marked stale).
 * mgr_repl_request: REPL_* on a ROLE_MGRD_PEER connection (standby). */
struct mgr_repl;
int mgr_repl_start(struct mgr_server *s);
void mgr_repl_stop(struct mgr_server *s);
void mgr_repl_activate(struct mgr_server *s, uint64_t term);
bool mgr_repl_hold(struct mgr_server *s, struct wire_conn *c,
		   const struct wire_hdr *hdr, int status,
		   const ProtobufCMessage *body);
void mgr_repl_request(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m);
void mgr_repl_status(const struct mgr_server *s, Twinfs__MgrdStatus *st);
/* The active's mgrd id as this mgrd knows it (0: unknown). */
int mgr_repl_active_id(const struct mgr_server *s);
/* A standby holding every record the active closed (installed, in sync,
 * heard from the active lately): it may serve backup-meta. */
bool mgr_repl_standby_current(const struct mgr_server *s);
/* backup.c: MSG_MGRD_BACKUP (twinfsctl backup-meta). */
void mgr_backup_request(struct mgr_server *s, struct wire_conn *c,
			struct wire_msg *m);
void mgr_backup_stop(struct mgr_server *s);
/* server.c: s->st was loaded or replaced (a standby's install). */
void mgr_srv_state_loaded(struct mgr_server *s);

/* handlers.c: answer one request of a client or admin connection. */
void mgr_handle_client(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m);

#endif
