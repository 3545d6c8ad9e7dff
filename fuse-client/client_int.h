/* client_int.h - internals of the twinfs FUSE client; included only by the
 * files of fuse-client/.
 *
 * Threads and who owns what (docs/ARCHITECTURE.md "Client"):
 *   - FUSE worker threads (fuse_session_loop_mt) run the fc_<op> handlers.
 *     They never touch the network: each handler copies what it needs into
 *     an op (struct fc_op and a per-kind extension) and hands it to the I/O
 *     loop with fc_loop_submit().  A few answers that need no server are
 *     given on the worker thread (forget, opendir, releasedir, a cached
 *     absent security.capability, fresh attributes, a lookup answered
 *     from a listing fetched ahead or, ENOENT, under a name lease).
 *   - The I/O loop thread (libuv) owns every wire_peer, the cluster map, the
 *     open-file state that changes with writes, the mgrd sequence numbers and
 *     all timers.  Every wire_* call and every fuse_reply_* of an op happens
 *     there.  Anything marked [loop] is touched only on that thread.
 *   - The inode table is shared: [ino_lock] fields are guarded by
 *     fc_client.ino_lock.  Lock order: queue_lock, ino_lock, sa.lock
 *     (statahead.c) and dl.lock (dlease.c) are leaves; never hold two.
 *
 * Exactly one fuse_reply_* per request: an op's reply goes through
 * fc_op_reply_*() (loop.c), which disarms the interrupt callback first and
 * frees the op after replying, so a second reply cannot happen.
 */
#ifndef TWINFS_CLIENT_INT_H
#define TWINFS_CLIENT_INT_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <uv.h>

#include "common.h"
#include "mgrlist.h"
#include "raid.h"
#include "wire.h"

#define FC_DEFAULT_PORT        7500
#define FC_MAX_IO              (1u << 20)   /* max_write / max_read */
#define FC_READDIR_BATCH       256          /* entries per READDIR round trip */
#define FC_REPORT_INTERVAL_MS  1000         /* size reports while dirty */
#define FC_MGR_RETRY_MIN_MS    100
#define FC_MGR_RETRY_MAX_MS    2000
/* How long an interrupted mgrd request on the wire waits for its answer
 * before it ends with EINTR, unless mgrd answers a ping meanwhile (mgr.c,
 * fc_mgr_interrupts). */
#define FC_MGR_INTR_GRACE_MS   1000
#define FC_TAKEOVER_POLL_MS    200          /* map poll while a twin fails */
#define FC_REPORT_GAP_MS       200          /* reports of one iod, per epoch */
#define FC_LAYOUT_XATTR        "twinfs.layout"
#define FC_READAHEAD_KB        4096         /* -o readahead= default */
#define FC_WB_MAX_BYTES        (32u << 20)  /* write-behind: bytes answered */
#define FC_WB_MAX_OPS          256          /* ... and writes, not landed */
#define FC_SA_DIRS             4            /* statahead: directories */
#define FC_DL_DIRS             64           /* name leases held at once */
#define FC_SA_BATCH            1024         /* ... entries per fetch */
#define FC_SA_DIR_BATCHES      4            /* ... batches per directory */
#define FC_SA_MIN_MISSES       2            /* ... lookups that start it */
#define FC_SA_BACKOFF_MIN_MS   500          /* ... pause after a waste */
#define FC_SA_BACKOFF_MAX_MS   16000

/* ------------------------------------------------------------- options */

struct fc_opts {
	/* The mount source: one mgrd or a pair, "HOST[:PORT][,HOST[:PORT]]"
	 * (fc_client.mgrs holds it parsed, and which one is in use). */
	char *mgr_source;
	char *cluster;                  /* -o cluster=, default "twinfs" */
	/* -o channel=: the weakest protection of frames after AUTH this
	 * mount accepts, on connections that authenticate with a key. */
	enum tw_channel channel;
	/* -o request_timeout=, mgr_timeout=, monitor_interval=; else the
	 * cluster's (ClusterMap, taken at mount), else 5000, 120000, 30000.
	 * Set before the FUSE session starts, constant afterwards. */
	unsigned request_timeout_ms;
	unsigned mgr_timeout_ms;
	unsigned monitor_interval_ms;
	bool request_timeout_set;       /* given as a mount option */
	bool mgr_timeout_set;
	bool monitor_interval_set;
	double attr_timeout;            /* -o attr_timeout=, seconds, 1.0 */
	double entry_timeout;           /* -o entry_timeout=, seconds, 1.0 */
	int writeback_cache;            /* -o writeback_cache */
	int atime;                      /* FC_ATIME_*: -o relatime (default),
					 * noatime, strictatime */
	char *mountpoint;
	unsigned readahead_kb;          /* -o readahead=, KiB; 0 kernel's */
	/* -o keyfile=: the identity proved to mgrd ("client:NAME"; ident.c),
	 * has_ident false without one.  -o subdir=: the subtree mounted. */
	bool has_ident;
	char ident[TW_CLIENT_NAME_MAX];
	uint8_t ident_key[TW_CLIENT_KEY_LEN];
	char *subdir;
	int foreground;                 /* -f */
};

enum { FC_ATIME_RELATIME = 0, FC_ATIME_NOATIME, FC_ATIME_STRICT };

/* ---------------------------------------------------------- attributes */

/* The attributes of an inode as mgrd last told them, unpacked from
 * Twinfs__Attr.  `layout` is valid for regular files when has_layout; for a
 * directory it holds the policy (stripe_count may be 0 = every group,
 * policy_first the first group or -1 = round robin). */
struct fc_attr {
	uint64_t ino;
	uint32_t mode, nlink, uid, gid, rdev;
	uint64_t size, blocks;
	int64_t atime_sec, mtime_sec, ctime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec;
	uint64_t trunc_gen, data_version, generation;
	uint32_t acl_sig;          /* changes with the inode's ACLs */
	bool cap_absent;           /* no security.capability (mgrd says) */
	bool has_layout;
	struct r0_layout layout;
	int policy_first;
};

/* One cached inode.  Exists while the kernel holds lookups on it (nlookup >
 * 0); freed when forget brings nlookup to 0.  Never pointed to across an
 * asynchronous step: ops keep the inode number and look it up again. */
struct fc_inode {
	uint64_t ino;
	uint64_t nlookup;          /* [ino_lock] entries the kernel accepted */
	struct fc_attr attr;       /* [ino_lock] */
	/* Highest end written by this client under local_gen: folded into the
	 * size we report until mgrd's size catches up. */
	uint64_t local_size;       /* [ino_lock] */
	uint64_t local_gen;        /* [ino_lock] trunc_gen of local_size */
	/* Bit i: the i-th name of fc_cached_xattrs is known absent while the
	 * ctime is unchanged (setting or removing an xattr changes ctime). */
	uint32_t xattr_absent;     /* [ino_lock] */
	int64_t xattr_ctime_sec;   /* [ino_lock] */
	uint32_t xattr_ctime_nsec; /* [ino_lock] */
	/* attr.acl_sig changed since the kernel last learned the ACLs. */
	bool acl_stale;            /* [ino_lock] */
	/* This mount changed the ACLs (the kernel forgot its copy itself):
	 * the next attributes bring the new acl_sig, adopted as it is. */
	bool acl_local;            /* [ino_lock] */
	/* attr came with a change this mount made (an Entry's parent_attr,
	 * a SETATTR's answer) at most attr_timeout ago: the kernel's GETATTR
	 * until then is answered from it (fc_inode_fresh); chown, for one,
	 * always asks for the mode first (FUSE's killpriv). */
	uint64_t fresh_until_ms;   /* [ino_lock] 0: ask mgrd */
	uint64_t fresh_gen;        /* [ino_lock] cl->fresh_gen when marked */
	/* mgrd destroyed the inode (an UNLINK's gone_ino): for good, since
	 * inode numbers are never reused. */
	bool gone;                 /* [ino_lock] */
	/* SETATTRs of mtime (report.c): the highest cl->times_seq of those
	 * started and not known failed (a write that took its place before
	 * it keeps its mtime), the highest of those that succeeded, and how
	 * many are unanswered. */
	uint64_t times_set_seq;    /* [ino_lock] */
	uint64_t times_ok_seq;     /* [ino_lock] */
	uint32_t times_pending;    /* [ino_lock] */
	/* The directory and name this mount last gave the kernel for it
	 * (an entry reply, or a rename it made), for log lines that name
	 * the file (fc_ino_path); name NULL: none yet (the root, say). */
	uint64_t parent;           /* [ino_lock] */
	char *name;                /* [ino_lock] owned */
};

/* --------------------------------------------------------- open files */

/* fi->fh of a regular file: created by open/create, freed at release once
 * no asynchronous report holds it (refs).  All fields [loop] except the
 * immutable ones set before the open reply. */
struct fc_file {
	uint64_t ino;              /* immutable */
	uint64_t mgr_fh;           /* immutable: mgrd's handle */
	/* immutable: the session mgrd opened it under; its writes name it,
	 * so that once mgrd expires that session the iods refuse them
	 * (proto/FORMAT.md "Fencing"), even after we took a new one. */
	uint64_t session;
	int flags;                 /* immutable: open flags */
	/* [any thread] a read, write or fallocate was submitted through this
	 * handle; until then FLUSH has nothing to wait for (fc_flush). */
	atomic_bool touched;
	/* [any thread] a write or fallocate was submitted through it: its
	 * flush and release return a failed write-behind's error. */
	atomic_bool wrote;
	/* [loop] the inode's write-behind error seq this handle reported, or
	 * had at open: each handle reports a failure once (wbehind.c). */
	uint64_t err_seen;
	int refs;                  /* [loop] base ref + reports in flight */
	uint64_t end;              /* [loop] highest end written under end_gen */
	uint64_t end_gen;          /* [loop] trunc_gen of those writes */
	uint64_t write_gen;        /* [loop] bumped by every completed write */
	uint64_t reported_gen;     /* [loop] write_gen covered by a report reply */
	int64_t mtime_sec;         /* [loop] time of the last write */
	uint32_t mtime_nsec;
	/* [loop] write_gen of the last write whose time mtime_sec is and
	 * that came after the inode's last explicit mtime set: its report
	 * sets mtime; without one (<= reported_gen) it keeps the times */
	uint64_t mtime_gen;
	/* A read since the last report, and when (the atime to report). */
	bool atime_pending;        /* [loop] */
	int64_t atime_sec;         /* [loop] */
	uint32_t atime_nsec;
	uint32_t cols_seen;        /* [loop] bit k: col_blocks[k] is known */
	uint64_t col_blocks[R0_MAX_STRIPE_COUNT]; /* [loop] from WriteReply */
	bool on_dirty_list;        /* [loop] */
	bool timer_report;         /* [loop] a timer report is in flight */
	/* [loop] its report inside a SETATTR in flight (fc_report_embed) */
	struct fc_report *embedded;
	struct fc_file *dirty_prev, *dirty_next; /* [loop] */
};

/* fi->fh of a directory: one cached READDIR batch.  Touched by the readdir
 * op on the loop thread and freed by releasedir on a worker: the kernel
 * runs one readdir of an open directory at a time (f_pos lock) and sends
 * releasedir only after the last one was answered; the op touches nothing
 * of the directory after its reply. */
struct fc_dir {
	uint64_t ino;
	struct wire_msg *batch;    /* ReaddirReply or NULL */
	uint64_t batch_from;       /* cookie the batch was asked after */
	bool batch_plus;
};

/* ------------------------------------------------------- the cluster map */

struct fc_iod {
	uint32_t id;               /* 0 = slot unused */
	uint32_t group, twin;
	char host[TW_HOST_MAX];
	int port;
	int state;                 /* TWINFS__IOD_STATE__* */
	bool needs_resync;
	struct wire_peer *peer;
	uint64_t report_epoch;     /* last MSG_REPORT about it: epoch, time */
	uint64_t report_ms;
};

struct fc_map_waiter {
	struct fc_map_waiter *next;
	void (*cb)(void *arg, int status);
	void *arg;
};

/* ------------------------------------------------------------ mgrd calls */

struct fc_op;
struct fc_mgr_call;
struct fc_mgr_flight {
	struct fc_mgr_call *mc;    /* NULL once abandoned */
};
/* status: mgrd's status, or -EIO when mgr_timeout passed, -EINTR when the
 * FUSE request was interrupted while waiting to retransmit.  The callee
 * owns reply (NULL when status < 0). */
typedef void (*fc_mgr_cb)(struct fc_mgr_call *mc, int status,
			  struct wire_msg *reply);

/* Outstanding mgrd calls, oldest first. [loop] */
struct fc_mgr_list {
	struct fc_mgr_call *head, *tail;
};

/* One mgrd request with its sequence number; embedded in the op that sends
 * it and alive until its callback runs.  The body is owned by the caller and
 * must live until the callback (it is re-sent on retransmission). [loop] */
struct fc_mgr_call {
	struct fc_client *cl;
	uint16_t type;
	ProtobufCMessage *body;
	Twinfs__Ctx ctx;           /* body's ctx field points here */
	uint64_t start_ms;
	uint64_t deadline_ms;
	uint32_t backoff_ms;
	uint64_t retry_at_ms;
	int attempts;
	struct fc_op *op;          /* for interrupts; may be NULL */
	fc_mgr_cb cb;
	void *arg;
	bool in_retry_list;
	/* The outstanding list it is in (fc_client's seq or unnumbered), or
	 * NULL; prev and next there. */
	struct fc_mgr_list *list;
	struct fc_mgr_call *list_prev, *list_next;
	struct fc_mgr_call *retry_next;
	/* The attempt on the wire; an interrupted call is detached from it
	 * (flight->mc = NULL) so its late reply is dropped. */
	struct fc_mgr_flight *flight;
	struct fc_mgr_call *intr_next;
	uint64_t intr_ms;          /* when an interrupt was first seen, 0 none */
};

/* --------------------------------------------------------------- ops */

typedef void (*fc_op_fn)(struct fc_op *op);

/* The head of every handed-off request.  Allocated by the handler with
 * fc_op_new (which captures the caller's context), then owned by the loop
 * thread from fc_loop_submit on; freed by the fc_op_reply_* functions (or
 * fc_op_free for ops with no FUSE request). */
struct fc_op {
	struct fc_op *next;        /* [queue_lock] handoff queue */
	fc_op_fn run;              /* first step, on the loop thread */
	void (*cleanup)(struct fc_op *op); /* frees the extension's buffers */
	struct fc_client *cl;
	fuse_req_t req;            /* NULL for internal ops */
	atomic_int interrupted;
	uint32_t uid, gid, pid, umask;
	uint32_t *groups;          /* fc_op_groups; freed with the op */
	uint32_t n_groups;
	uint64_t later_at;         /* [loop] fc_op_later */
	struct fc_op *later_next;  /* [loop] */
};

/* ------------------------------------------------------- write-behind */

/* An operation's place in the per-inode order of data operations
 * (wbehind.c); embedded in the op.  [loop] */
struct fc_wb {
	uint64_t ino;              /* 0: every inode */
	uint64_t off, end;         /* bytes [off, end); end UINT64_MAX: all */
	struct fc_op *op;          /* resumed with fn(op) when it waited */
	fc_op_fn fn;
	bool hold_range;           /* a write: holds the range until released */
	bool held;                 /* on cl->wb_held */
	bool waiting;              /* on the wait FIFO */
	bool behind;               /* answered before it landed */
	size_t bytes;              /* counted in cl->wb_bytes while behind */
	struct fc_wb *prev, *next; /* wb_held (doubly) or the FIFO (next) */
	struct fc_wb *ready_next;  /* wake()'s local list */
};

/* ---------------------------------------------------------- statahead */

/* Listings fetched ahead of lookups (statahead.c). */
struct fc_sa_batch;
struct fc_sa_dir {
	uint64_t ino;              /* 0: free slot */
	uint64_t gen;              /* fc_sa.gen the batches belong to */
	uint64_t last_use_ms;
	struct fc_sa_batch *head, *tail;   /* oldest -> newest */
	unsigned nbatches;
	struct tw_hmap index;      /* name key -> struct sa_ent */
	bool fetching;
	uint64_t fetch_seq;
	unsigned misses;           /* lookups missed since the last fetch */
	uint64_t backoff_ms, backoff_until_ms;
};

struct fc_sa {
	pthread_mutex_t lock;
	atomic_uint_fast64_t gen;  /* any thread: bumped by fc_sa_changed */
	uint64_t ttl_ms;           /* immutable: 0 turns statahead off */
	uint64_t fetch_seq;
	struct fc_sa_dir dirs[FC_SA_DIRS];
	/* statistics, logged at unmount */
	uint64_t n_lookups, n_hits, n_fetches, n_kept;
};

/* ------------------------------------------------------- name leases */

/* Leases on directories this mount made (dlease.c). */
struct fc_dl_dir {
	uint64_t dir;              /* 0: free slot */
	uint64_t expiry_ms;        /* D2 */
	uint64_t last_use_ms;
	struct tw_hmap names;      /* name hash -> (void *)count (D1) */
};

struct fc_dl {
	pthread_mutex_t lock;
	bool on;                   /* immutable */
	uint64_t gen;              /* D4: bumped by recalls, reconnections */
	struct fc_dl_dir dirs[FC_DL_DIRS];
	/* logged at unmount */
	uint64_t n_grants, n_absent, n_recalls, n_returned;
};

/* A fetch fc_sa_find decided; dir 0: none. */
struct fc_sa_fetch {
	uint64_t dir, cookie, gen, sent_ms, seq;
};

enum fc_sa_result { FC_SA_MISS, FC_SA_HIT };

/* ----------------------------------------------------------- the client */

struct fc_deferred {
	struct fc_deferred *next;
	wire_reply_cb cb;
	void *arg;
	int status;
};

struct fc_client {
	struct fc_opts opts;
	struct fuse_session *se;
	uint64_t incarnation;
	char hostname[TW_HOST_MAX];

	/* handoff: any thread -> loop thread */
	pthread_mutex_t queue_lock;
	struct fc_op *q_head, *q_tail;     /* [queue_lock] */
	bool stop_requested;               /* [queue_lock] */
	uv_loop_t loop;
	uv_async_t async;
	pthread_t thread;
	bool thread_started;

	/* [loop] state below */
	bool stopping;                     /* peers are gone: fail every call */
	atomic_int intr_pending;           /* any thread: an op was interrupted */
	long ops_outstanding;              /* submitted, not yet finished */
	struct fc_deferred *def_head, *def_tail;
	struct fc_op *later_head;
	uv_timer_t later_timer;

	/* mgrd: both peers connect to mgrs' current address; a failed
	 * attempt on it moves both (fc_mgr_addr_failed), and no retry is
	 * made before mgr_hold_ms (mgrlist.h's backoff). */
	struct wire_peer *mgr, *ctl;
	struct tw_mgrlist mgrs;
	uint64_t mgr_hold_ms;
	uint64_t session;
	/* What resumes it (HelloReply.session_secret): mgrd refuses a HELLO
	 * naming a live session without it. */
	uint8_t session_secret[16];
	size_t session_secret_len;
	/* ident.c: mgrd's inode of FUSE's root (1: the whole namespace;
	 * swapped with 1 at the mgrd boundary), access = ro, and the
	 * ticket the iods take: its AUTH identity ("ticket:" || ticket), its
	 * session key, when it expires and when to renew it. */
	uint64_t root_ino;
	bool read_only;
	uint8_t tkt_id[sizeof(WIRE_TICKET_PREFIX) + WIRE_TICKET_MAX];
	size_t tkt_id_len;
	uint8_t tkt_key[WIRE_TICKET_KEY_LEN];
	uint64_t tkt_session;      /* the session it was issued for */
	uint64_t tkt_renew_ms;     /* CLOCK_REALTIME ms; 0: no ticket */
	bool tkt_renewing;
	uint64_t mgr_incarnation;
	uint64_t next_seq;
	uint64_t last_answered_seq;
	/* Outstanding calls that an interrupt may end (fc_mgr_interrupts):
	 * the numbered ones, oldest seq first (acked_seq), and those with an
	 * op but no ctx (a non-blocking LOCK, GETLK). */
	struct fc_mgr_list seq, unnumbered;
	struct fc_mgr_call *retry_head;
	uv_timer_t retry_timer;
	bool mgr_down_logged;
	/* an interrupted request waits out FC_MGR_INTR_GRACE_MS on the wire:
	 * the retry timer looks at it again */
	bool mgr_intr_waiting;
	uint64_t mgr_pong_ms;              /* mgrd's last answer to a ping */
	int mgr_last_connect_err;

	/* map */
	uint64_t epoch;
	uint32_t n_groups;
	uint32_t def_stripe_size, def_stripe_count;
	bool have_map;
	struct fc_iod iods[TW_MAX_IODS + 1];   /* by id */
	int group_iod[TW_MAX_GROUPS][2];       /* iod id of each twin, 0 none */
	bool map_refreshing;
	/* Called when the map moves to a new epoch (fc_data_map_changed in
	 * the client; NULL in unit tests). */
	void (*map_changed)(struct fc_client *cl);
	struct fc_map_waiter *map_waiters;
	struct fc_mgr_call map_mc;          /* the GET_MAP in flight */
	Twinfs__Empty map_body;

	/* monitor */
	uv_timer_t ping_timer;
	bool ctl_ok;

	/* write-behind (wbehind.c) */
	struct fc_wb *wb_held;             /* [loop] writes in flight */
	struct fc_wb *wb_wait_head, *wb_wait_tail; /* [loop] FIFO */
	/* [atomic] writes answered (or reserved to be, fc_wb_reserve) and not
	 * landed, and their bytes */
	atomic_uint wb_ops;
	atomic_size_t wb_bytes;
	/* [loop] ino -> the latest failed write-behind of the inode:
	 * seq << 16 | FC_WB_ERR_WRITEBACK? | errno (wbehind.c); seqs from
	 * wb_err_seq, never 0 */
	struct tw_hmap wb_errs;
	uint64_t wb_err_seq;
	/* [atomic] some write error was recorded in wb_errs (fc_flush) */
	atomic_bool wb_errs_any;
	/* open files with unreported writes */
	struct fc_file *dirty_head;
	/* Size reports in flight per inode, and the SETATTRs waiting for an
	 * inode's count to reach zero (fc_report_ino). */
	struct tw_hmap reports_inflight;   /* [loop] ino -> count */
	struct fc_report_barrier *barriers; /* [loop] */
	uint64_t times_seq;   /* [loop] SETATTRs of mtime sent (report.c) */
	uv_timer_t report_timer;
	bool report_timer_on;
	int handles_open;

	/* start-up: the main thread waits for the first contact */
	pthread_mutex_t start_lock;
	pthread_cond_t start_cond;
	bool start_done;                   /* [start_lock] */
	int start_status;                  /* [start_lock] */
	char start_msg[256];               /* [start_lock] */
	/* shutdown flush */
	bool flush_done;                   /* [start_lock] */

	/* locks (ops_lock.c): created at the first lock request */
	struct fc_locks *locks;            /* [loop] */
	atomic_int locks_used;             /* any thread: a lock was asked for */

	/* inodes */
	pthread_mutex_t ino_lock;
	struct tw_hmap inodes;             /* [ino_lock] ino -> fc_inode */
	/* [ino_lock] hash of (parent, name) -> fc_inode, for renames; a
	 * hash shared by two names keeps the newer (inode.c). */
	struct tw_hmap names;
	/* Bumped by every unlink, rmdir and rename of this mount: they
	 * change inodes we know only by name (the nlink and ctime of the
	 * victim), so every fresh mark before them is void. */
	uint64_t fresh_gen;                /* [ino_lock] */
	struct fc_sa sa;                   /* statahead.c */
	struct fc_dl dl;                   /* dlease.c */
	/* tune.c: the first request after INIT set the readahead */
	atomic_int tuned;
	/* statistics for blksize of directories */
	atomic_uint blksize;
	/* Data-path capabilities (cap.c), [loop]: ino -> struct fc_cap;
	 * caps_on once mgrd gave one (it has a cluster secret). */
	struct tw_hmap caps;
	bool caps_on;
	size_t caps_sweep_at;
	/* The map's max_subfile_size (0: not known yet): with a file's
	 * layout, the largest size it may reach (fc_file_limit).  Read on
	 * FUSE workers too. */
	_Atomic uint64_t max_subfile;
};

/* ------------------------------------------------------------- loop.c */

int fc_loop_start(struct fc_client *cl);
/* Stop the loop thread: finish every op (with errors), close every peer and
 * handle, join.  Idempotent.  Call from the main thread only. */
void fc_loop_stop(struct fc_client *cl);
/* Any thread: hand op to the loop thread. */
void fc_loop_submit(struct fc_client *cl, struct fc_op *op);
/* FUSE worker: hand a write op to the loop thread and answer its request
 * with count written, in that order as the application sees it; the op
 * goes on without a request (wbehind.c).  fuse_reply_write's result. */
int fc_loop_submit_written(struct fc_client *cl, struct fc_op *op,
			   size_t count);
/* Allocate a zeroed op of `size` bytes (>= sizeof(struct fc_op)), with the
 * request's context captured.  req may be NULL (internal op).  Returns NULL
 * on ENOMEM (then the caller replies ENOMEM itself). */
void *fc_op_new(struct fc_client *cl, fuse_req_t req, size_t size,
		fc_op_fn run);
/* FUSE worker: read the caller's supplementary groups (from /proc, so
 * only for the requests mgrd checks permissions of: FORMAT.md
 * "Permissions"); they go in the Ctx of every request the op sends.
 * Nothing for root, which passes every check, or on failure (mgrd then
 * counts the primary group only). */
#define FC_GROUPS_MAX 256
void fc_op_groups(struct fc_op *op);
/* Loop thread: reply and free the op.  Each returns what fuse_reply_*
 * returned (a negative errno when the kernel did not take the reply). */
int fc_op_reply_err(struct fc_op *op, int err);   /* err >= 0 */
int fc_op_reply_entry(struct fc_op *op, const struct fuse_entry_param *e);
int fc_op_reply_create(struct fc_op *op, const struct fuse_entry_param *e,
		       const struct fuse_file_info *fi);
int fc_op_reply_attr(struct fc_op *op, const struct stat *st, double timeout);
int fc_op_reply_open(struct fc_op *op, const struct fuse_file_info *fi);
int fc_op_reply_write(struct fc_op *op, size_t count);
/* Write-behind: answer the WRITE now and keep the op (its request is gone:
 * op->req becomes NULL, and its later fc_op_reply_* only frees it). */
int fc_op_reply_early_write(struct fc_op *op, size_t count);
int fc_op_reply_buf(struct fc_op *op, const void *buf, size_t size);
int fc_op_reply_iov(struct fc_op *op, const struct iovec *iov, int count);
int fc_op_reply_lseek(struct fc_op *op, off_t off);
int fc_op_reply_readlink(struct fc_op *op, const char *target);
int fc_op_reply_statfs(struct fc_op *op, const struct statvfs *st);
int fc_op_reply_xattr(struct fc_op *op, size_t count);
int fc_op_reply_lock(struct fc_op *op, const struct flock *lock);
/* Free an op without a reply (internal ops, or after replying by hand). */
void fc_op_free(struct fc_op *op);
bool fc_op_interrupted(const struct fc_op *op);
/* Loop thread: run op->run again after ms (at once when stopping). */
void fc_op_later(struct fc_op *op, uint32_t ms);
/* Loop thread: ops waiting in fc_op_later to run `run` become due now
 * (they run at the next tick of the later timer, within 50 ms). */
void fc_op_later_wake(struct fc_client *cl, fc_op_fn run);

/* Loop thread: wire_call that always ends in cb, exactly once: when
 * wire_call fails at once (or the client is stopping), cb runs later from
 * the loop with that status.  peer may be NULL (-ENOTCONN). */
void fc_call(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	     const ProtobufCMessage *body, const struct iovec *iov, int niov,
	     uint32_t timeout_ms, wire_reply_cb cb, void *arg);
/* Loop thread: cb(status, NULL, arg) later, from the loop. */
void fc_defer(struct fc_client *cl, wire_reply_cb cb, void *arg, int status);
/* fc_call with the data sent from z without a copy (wire_call_z);
 * z->release runs exactly once either way, also when the call could not
 * start. */
void fc_call_z(struct fc_client *cl, struct wire_peer *peer, uint16_t type,
	       const ProtobufCMessage *body, const struct wire_zdata *z,
	       uint32_t timeout_ms, wire_reply_cb cb, void *arg);

/* -------------------------------------------------------------- cap.c */

/* Loop thread, all of them (proto/FORMAT.md "Capabilities"). */
struct fc_cap_waiter {
	struct fc_cap_waiter *next;
	void (*cb)(void *arg, int status);   /* 0 or mgrd's -errno */
	void *arg;
};
/* A cap from an OPEN or create reply (absent: nothing); op: the opener,
 * whose uid and gid later fetches name (may be NULL). */
void fc_cap_take(struct fc_client *cl, uint64_t ino, bool write,
		 const ProtobufCBinaryData *cap, uint32_t lifetime_ms,
		 const struct fc_op *op);
/* Fetch a cap for ino (write rights when write) with MSG_CAP; w (may be
 * NULL; caller-owned, alive until called) is called back exactly once,
 * later, also when the fetch failed (the iod then refuses again). */
void fc_cap_fetch(struct fc_client *cl, uint64_t ino, bool write,
		  const struct fc_op *op, struct fc_cap_waiter *w);
/* Point *out at the cached cap for ino if it is usable for write (out
 * borrows the cache: use it before returning to the loop); renews it in
 * the background past half its lifetime.  false, *out empty: none. */
bool fc_cap_attach(struct fc_client *cl, uint64_t ino, bool write,
		   ProtobufCBinaryData *out);
/* Caps are in use and none usable for write is cached: fetch first. */
bool fc_cap_missing(struct fc_client *cl, uint64_t ino, bool write);
/* An iod refused ino's cap as expired: never attach it again. */
void fc_cap_drop(struct fc_client *cl, uint64_t ino);
/* Free the cache (after the loop stopped). */
void fc_caps_free(struct fc_client *cl);

/* ------------------------------------------------------------ ident.c */

/* A HELLO reply from mgrd: the subtree's root, ro, and a new ticket. */
void fc_ident_hello(struct fc_client *cl, const Twinfs__HelloReply *r);
/* Take a ticket (HelloReply.ticket or a TICKET reply): unwrap Ks, and
 * give it to every iod peer for its next connections. */
int fc_ident_ticket(struct fc_client *cl, const Twinfs__Ticket *t);
/* From the ping timer: ask mgrd for a new ticket when it is due. */
void fc_ident_renew(struct fc_client *cl);
/* Swap inode 1 and the subtree's root in the ino, parent, newparent and
 * gone_ino fields of m and its sub-messages (an involution: applying it
 * twice restores m). */
void fc_ident_swap(const struct fc_client *cl, ProtobufCMessage *m);

/* -------------------------------------------------------------- mgr.c */

/* The HELLO of a connection to mgrd (control or not) or an iod. */
void fc_mgr_fill_hello(struct fc_client *cl, Twinfs__Hello *h, bool control);
/* The HELLO to an iod: our session, which the caps and the ticket we send
 * it must name (proto/FORMAT.md "Capabilities", "Tickets"), never the
 * session's secret, which is mgrd's business alone. */
void fc_mgr_fill_iod_hello(struct fc_client *cl, Twinfs__Hello *h);
/* Create the mgrd peers (data and control); no connection yet. */
int fc_mgr_init(struct fc_client *cl);
/* Send a request to mgrd with a fresh seq, retransmitting with the same seq
 * across transport errors until mgr_timeout (or timeout_ms when nonzero)
 * passes.  ctx_field: the body's ctx member (NULL for bodies without one).
 * op: the FUSE request's op (context, interrupts) or NULL.  cb runs exactly
 * once. */
void fc_mgr_send(struct fc_client *cl, struct fc_mgr_call *mc, uint16_t type,
		 ProtobufCMessage *body, Twinfs__Ctx **ctx_field,
		 struct fc_op *op, uint32_t timeout_ms, fc_mgr_cb cb, void *arg);
/* Fail queued retransmissions (stopping). */
void fc_mgr_shutdown(struct fc_client *cl);
/* Answer -EINTR for every mgrd call whose FUSE request was interrupted:
 * the waiting ends now, a late reply is dropped. */
void fc_mgr_interrupts(struct fc_client *cl);
bool fc_is_transport_err(int status);
/* An mgrd call failed so: send it again (to whichever mgrd is active):
 * a transport error, or -EREMOTE (an mgrd that is not, or no longer, the
 * active). */
bool fc_mgr_retryable(int status);
void fc_mgr_start_monitor(struct fc_client *cl);

/* Map (mgr.c): install a ClusterMap (creates/updates iod peers). */
void fc_map_install(struct fc_client *cl, const Twinfs__ClusterMap *map);
/* Refresh the map with GET_MAP; concurrent refreshes share one request.
 * w (caller-owned, cb and arg set; may be NULL) is called back exactly
 * once, later, with 0 or -errno; it must live until then. */
void fc_map_refresh(struct fc_client *cl, struct fc_map_waiter *w);
/* The iod to send writes of column `column` of ino to (its primary, or the
 * surviving twin); NULL when neither twin can take writes. */
struct fc_iod *fc_map_write_iod(struct fc_client *cl, uint64_t ino,
				uint32_t group, uint32_t column);
/* The twin to read unit `unit` from; `avoid` (may be NULL) is one that just
 * failed.  NULL if no twin is readable. */
struct fc_iod *fc_map_read_iod(struct fc_client *cl, uint64_t ino,
			       uint32_t group, uint32_t column, uint64_t unit,
			       const struct fc_iod *avoid);
/* The group's twins and their states and flags as one number (changes
 * whenever the map changes anything about the group); *settled is false
 * while a twin is suspect (mgrd has not decided yet). */
uint32_t fc_group_sig(struct fc_client *cl, uint32_t group, bool *settled);
/* Whether neither twin of the group may serve (r1_group_health FAILED). */
bool fc_group_failed(struct fc_client *cl, uint32_t group);
/* "group 1: iod 3 (...) is down, iod 4 (...) is down and stale (epoch 9)" */
const char *fc_group_desc(struct fc_client *cl, uint32_t group, char *buf,
			  size_t len);
/* Tell mgrd that iod failed on the data path (or missed a ping) with
 * status; rate-limited per iod.  mgrd probes it and demotes it only if the
 * probe fails. */
void fc_report(struct fc_client *cl, struct fc_iod *iod, int status);
/* "iod 3 (127.0.0.1:7503)" */
const char *fc_iod_name(const struct fc_iod *iod, char *buf, size_t len);
/* Human cause of a data-path error: "timed out after 5 s", "Connection
 * refused", ... into buf. */
const char *fc_cause(struct fc_client *cl, int status, char *buf, size_t len);

/* ------------------------------------------------------------- tune.c */

/* Set read_ahead_kb of the bdi of the twinfs mount on mountpoint (root
 * only).  0 or -errno. */
int fc_tune_readahead(const char *mountpoint, unsigned kb);
/* Any thread, any request after INIT: do it once, with the mount's
 * option; a failure is logged once and otherwise ignored. */
void fc_tune_once(struct fc_client *cl);

/* ---------------------------------------------------------- wbehind.c */

/* Run next(op) once no earlier data operation of ino (0: of any inode)
 * overlaps [off, end) (UINT64_MAX: the whole file).  Returns true when
 * that is so now: the caller goes on and next is not called.  Otherwise
 * the op waits in order and next(op) runs later, from a fc_wb_release.
 * hold_range (writes, fallocate): from then on the op holds the range
 * until fc_wb_release(w). */
bool fc_wb_enter(struct fc_client *cl, struct fc_wb *w, struct fc_op *op,
		 uint64_t ino, uint64_t off, uint64_t end, bool hold_range,
		 fc_op_fn next);
/* A write holding w may be answered before it lands (within the caps):
 * true, and it counts as write-behind until released. */
bool fc_wb_detach(struct fc_client *cl, struct fc_wb *w, size_t bytes);
/* Any thread: take one early answer of `bytes` from the caps (false: over
 * them).  The write's w takes it over with fc_wb_adopt once it holds its
 * range. */
bool fc_wb_reserve(struct fc_client *cl, size_t bytes);
void fc_wb_unreserve(struct fc_client *cl, size_t bytes);
void fc_wb_adopt(struct fc_wb *w, size_t bytes);
/* The op holding w ended: err 0, or the positive errno the application
 * would have seen (kept for the next flush/fsync/release when w was
 * answered early).  No-op when w holds nothing.  May run waiters. */
void fc_wb_release(struct fc_client *cl, struct fc_wb *w, int err);
/* Record err (a positive errno) of a page-cache writeback of ino
 * (-o writeback_cache), answered when it failed, for the writers' next
 * flush or release, as an early write's: the kernel gives it to the first
 * close of any handle only.  An fsync does not take it from us: the
 * kernel reports it to every file's fsync itself (errseq_t) before it
 * sends FSYNC. */
void fc_wb_note_writeback_err(struct fc_client *cl, uint64_t ino, int err);
/* Whether f's flush and release take the inode's write errors: it wrote
 * through FUSE, or (-o writeback_cache) it may have dirtied the kernel's
 * pages, which any handle's writeback sends. */
bool fc_wb_writer(const struct fc_client *cl, struct fc_file *f);
/* The errno of the latest failed early-answered write of f's inode, if f
 * has not reported it yet (0: none); afterwards f has.  for_fsync: an
 * error of page-cache writeback is not returned (the kernel did). */
int fc_wb_take_err(struct fc_client *cl, struct fc_file *f, bool for_fsync);
/* What a handle of ino opened now has seen (fc_file.err_seen). */
uint64_t fc_wb_err_seq(const struct fc_client *cl, uint64_t ino);
/* No write in flight and nobody waiting. */
bool fc_wb_idle(const struct fc_client *cl);

/* -------------------------------------------------------- statahead.c */

/* ttl_ms = min(entry_timeout, attr_timeout); 0 turns statahead off. */
void fc_sa_init(struct fc_sa *sa, uint64_t ttl_ms);
void fc_sa_free(struct fc_sa *sa);
/* Any thread: this mount changed (or may have changed) names or
 * attributes at mgrd; nothing fetched before is used. */
void fc_sa_changed(struct fc_sa *sa);
/* Whether an mgrd request of this type may change names or attributes. */
bool fc_mgr_type_changes(uint16_t type);
/* Look name up in what was fetched of parent.  FC_SA_HIT fills *a and
 * *age_ms (how old the answer is).  In any case, f->dir != 0 asks the caller to start that fetch
 * (fc_sa_start). */
enum fc_sa_result fc_sa_find(struct fc_sa *sa, uint64_t parent,
			     const char *name, uint64_t now_ms,
			     struct fc_attr *a, uint64_t *age_ms,
			     struct fc_sa_fetch *f);
/* A fetch ended: keeps reply (a ReaddirReply) or frees it. */
void fc_sa_fetched(struct fc_sa *sa, const struct fc_sa_fetch *f, int status,
		   struct wire_msg *reply, uint64_t now_ms);
/* Log how many lookups were answered ahead (at unmount). */
void fc_sa_log_stats(struct fc_sa *sa);
/* FUSE thread: send the READDIR of f from the loop, as the caller of req
 * (mgrd checks read permission: a caller who may only search the
 * directory gets no listing, and lookups go to mgrd). */
void fc_sa_start(struct fc_client *cl, const struct fc_sa_fetch *f,
		 fuse_req_t req);

/* ---------------------------------------------------------- dlease.c */

/* on = false: never answers (leases granted anyway are not used). */
void fc_dl_init(struct fc_dl *dl, bool on);
void fc_dl_free(struct fc_dl *dl);
void fc_dl_log_stats(struct fc_dl *dl);
/* Any thread.  Taken before a request that may be granted or renew a
 * lease is sent (with the time), passed back with its answer (D4). */
uint64_t fc_dl_ticket(struct fc_dl *dl);
/* Whether name surely does not exist in parent (a valid lease, and not
 * a name this mount added). */
bool fc_dl_absent(struct fc_dl *dl, uint64_t parent, const char *name,
		  uint64_t now_ms);
/* Before a request that may add name to parent is sent (D1); returns
 * its ticket, taken after the count. */
uint64_t fc_dl_adding(struct fc_dl *dl, uint64_t parent, const char *name);
/* mgrd removed name from parent. */
void fc_dl_removed(struct fc_dl *dl, uint64_t parent, const char *name);
/* An Entry's lease_ms (on dir, a new directory) and parent_lease_ms. */
void fc_dl_granted(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket);
void fc_dl_renewed(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket);
/* Drop dir's lease (any thread); fc_dl_recall also tells mgrd (loop). */
void fc_dl_recalled(struct fc_dl *dl, uint64_t dir);
void fc_dl_recall(struct fc_client *cl, uint64_t dir);
/* Drop every lease: the connection to mgrd was made again. */
void fc_dl_drop_all(struct fc_dl *dl);
/* Unmount (loop): drop every lease and give it back to mgrd, so that
 * another mount's create there does not wait for its expiry; done(arg)
 * once mgrd answered every DIR_RETURN (or the send failed). */
void fc_dl_return_all(struct fc_client *cl, void (*done)(void *arg),
		      void *arg);

/* ------------------------------------------------------------ inode.c */

void fc_inodes_init(struct fc_client *cl);
void fc_inodes_free(struct fc_client *cl);
/* Unpack a Twinfs__Attr; -EIO if it is missing or its layout is invalid for
 * a regular file. */
int fc_attr_from_pb(const Twinfs__Attr *pb, struct fc_attr *out);
/* Fill a struct stat from attributes and a merged size. */
void fc_attr_to_stat(struct fc_client *cl, const struct fc_attr *a,
		     uint64_t size, struct stat *st);
/* An entry is about to be replied: find or create the inode, store attr,
 * nlookup += 1 and fill e.  Undo with fc_inode_forget(ino, 1) if the kernel
 * did not take the reply. */
void fc_inode_entry(struct fc_client *cl, const struct fc_attr *a,
		    struct fuse_entry_param *e);
/* fc_inode_entry for an inode this mount does not know yet; -EEXIST (and
 * nothing changed) if it does. */
int fc_inode_entry_new(struct fc_client *cl, const struct fc_attr *a,
		       struct fuse_entry_param *e);
/* Refresh the cached attributes of ino if it is cached (no lookup change).
 * Fills *st when st is non-NULL with the merged size.  Returns the merged
 * size. */
uint64_t fc_inode_update(struct fc_client *cl, const struct fc_attr *a,
			 struct stat *st);
/* fc_inode_update for attributes that came with a change this mount made
 * (a SETATTR's answer, an Entry's parent_attr): they are also fresh for
 * attr_timeout (fc_inode_fresh). */
uint64_t fc_inode_update_fresh(struct fc_client *cl, const struct fc_attr *a,
			       struct stat *st);
/* Any thread: if ino's attributes are fresh (fc_inode_update_fresh) and
 * its ACLs are not stale, fill *st and *timeout (what is left of the
 * freshness, so the kernel keeps them no longer than attr_timeout from
 * mgrd's answer) and return true. */
bool fc_inode_fresh(struct fc_client *cl, uint64_t ino, struct stat *st,
		    double *timeout);
/* The directory changed in a way whose attributes we did not get (rename,
 * xattrs): the next GETATTR asks mgrd. */
void fc_inode_unfresh(struct fc_client *cl, uint64_t ino);
/* An unlink, rmdir or rename succeeded: no fresh mark made before holds. */
void fc_inodes_unfresh_all(struct fc_client *cl);
/* Whether the inode's ACLs changed since the last call (clears it). */
bool fc_inode_take_acl_stale(struct fc_client *cl, uint64_t ino);
/* An ACL-changing request of this mount (SETXATTR of an ACL, chmod)
 * succeeded: the kernel dropped its cached ACLs already. */
void fc_inode_acl_local(struct fc_client *cl, uint64_t ino);
/* The cached attributes say the inode has no ACL (acl_sig 0). */
bool fc_inode_acl_none(struct fc_client *cl, uint64_t ino);
/* forget: nlookup -= n; frees at zero. */
void fc_inode_forget(struct fc_client *cl, uint64_t ino, uint64_t n);
/* The kernel was given ino as `name` in directory parent. */
void fc_inode_named(struct fc_client *cl, uint64_t ino, uint64_t parent,
		    const char *name);
/* An UNLINK or RMDIR of name in parent this mount made succeeded: the
 * inode known by it keeps no name (an open file's lines say "ino N"). */
void fc_inode_unnamed(struct fc_client *cl, uint64_t parent,
		      const char *name);
/* A RENAME this mount made succeeded (flags as Rename.flags): the moved
 * inode (and with RENAME_EXCHANGE the other) takes its new name. */
void fc_inode_renamed(struct fc_client *cl, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname,
		      uint32_t flags);
/* For log lines: "/dir/file (ino N)" from the names this mount knows,
 * ".../file (ino N)" when a directory above is not known, "ino N" when
 * ino has no name here.  Returns buf. */
const char *fc_ino_path(struct fc_client *cl, uint64_t ino, char *buf,
			size_t len);
#define FC_PATH_LOG 320            /* a buffer for fc_ino_path */
/* Copy the cached attributes; false if ino is not cached. *size gets the
 * merged size (attr size or our own writes, whichever is larger). */
bool fc_inode_get(struct fc_client *cl, uint64_t ino, struct fc_attr *a,
		  uint64_t *size);
/* An UNLINK's answer named ino as destroyed (Entry.gone_ino). */
void fc_inode_set_gone(struct fc_client *cl, uint64_t ino);
/* If ino is cached and gone: its last attributes with nlink 0 in *st. */
bool fc_inode_gone_stat(struct fc_client *cl, uint64_t ino, struct stat *st);
/* A write [.., end) under trunc_gen completed: raise the local size. */
void fc_inode_note_write(struct fc_client *cl, uint64_t ino, uint64_t end,
			 uint64_t trunc_gen);
/* The same for a write answered now, under the cached trunc_gen; false
 * (nothing noted) unless ino is a cached regular file with a layout, as
 * a write needs. */
bool fc_inode_note_write_now(struct fc_client *cl, uint64_t ino, uint64_t end);
/* The SETATTRs of an inode's mtime (fc_inode.times_*; report.c): one
 * with seq starts; it ends (ok or failed), and the return says whether
 * the writes it overtook must set mtime after all (it failed and no later
 * one is unanswered or succeeded); the seq a write compares with; whether
 * any is unanswered. */
void fc_inode_times_start(struct fc_client *cl, uint64_t ino, uint64_t seq);
bool fc_inode_times_end(struct fc_client *cl, uint64_t ino, uint64_t seq,
			bool ok);
uint64_t fc_inode_times_seq(struct fc_client *cl, uint64_t ino);
bool fc_inode_times_pending(struct fc_client *cl, uint64_t ino);
/* Absence cache for the xattr names the kernel asks for all the time:
 * security.capability (before every write) and security.selinux (ls -l).
 * fc_xattr_cache_index: the name's bit, or -1 when it is not cached. */
int fc_xattr_cache_index(const char *name);
bool fc_inode_xattr_absent(struct fc_client *cl, uint64_t ino, int idx);
void fc_inode_set_xattr_absent(struct fc_client *cl, uint64_t ino, int idx,
			       bool absent);
/* ino was just created by this client: it holds none of those names, so
 * the kernel's question before each write needs no mgrd round trip (nor
 * mgrd at all: writes go on while it is away). */
void fc_inode_set_new_file(struct fc_client *cl, uint64_t ino);
/* Merged size rule, pure (unit-tested): the size to show for attributes a
 * when this client wrote up to local_size under local_gen. */
uint64_t fc_merge_size(uint64_t attr_size, uint64_t attr_gen,
		       uint64_t local_size, uint64_t local_gen);

/* The attributes of an Entry reply (-EIO if it is not one); also stores
 * its parent_attr (fc_parent_from_reply). */
int fc_entry_from_reply(struct fc_client *cl, struct wire_msg *reply,
			struct fc_attr *a);
/* Store an Entry reply's parent_attr, if any (fc_inode_update_fresh). */
void fc_parent_from_reply(struct fc_client *cl, const struct wire_msg *reply);

/* ----------------------------------------------------------- ops_*.c */

extern const struct fuse_lowlevel_ops fc_ops;

/* Send the size reports of every dirty open file of `ino` and wait until
 * every report of `ino` in flight, these and earlier ones still being
 * retransmitted, has its reply (loop thread).  Returns true when there was
 * something to wait for: done(arg, 0) runs once, later.  False: nothing in
 * flight, done never runs.  A SETATTR of size or mtime whose reports
 * cannot ride inside it (fc_report_embed) waits for this, so a report of
 * earlier writes cannot reach mgrd after it (retransmissions after an mgrd
 * restart are not ordered) and overwrite the mtime it set (cp -a, tar x). */
bool fc_report_ino(struct fc_client *cl, uint64_t ino,
		   void (*done)(void *arg, int status), void *arg);
struct fc_report_barrier;

void fc_init(void *userdata, struct fuse_conn_info *conn);
/* kio.c: after fuse_session_mount, before the session loop: our own
 * read/writev on /dev/fuse, so that INIT asks the kernel to allow a shared
 * mmap of direct_io (O_APPEND) descriptors.  0 or -errno. */
int fc_kio_install(struct fuse_session *se);
void fc_destroy(void *userdata);
void fc_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fc_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets);
void fc_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Worker thread (ops_meta.c): whether a write by the caller of req must
 * clear setuid or setgid of ino, as Linux's setattr_should_drop_suidgid
 * (root stands for CAP_FSETID, which the request does not carry): setuid
 * always, setgid with group execute or when the caller is outside the
 * file's group.  *mode gets the mode to set. */
bool fc_write_kills_privs(fuse_req_t req, fuse_ino_t ino, uint32_t *mode);
void fc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi);
void fc_readlink(fuse_req_t req, fuse_ino_t ino);
void fc_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void fc_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void fc_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name);
void fc_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);
void fc_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname);
void fc_statfs(fuse_req_t req, fuse_ino_t ino);
void fc_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void fc_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size);
void fc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fc_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

void fc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void fc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fc_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	      off_t off, struct fuse_file_info *fi);
void fc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);
void fc_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi);
void fc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);

void fc_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fc_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void fc_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);

/* The largest size a file of layout l may reach (proto/FORMAT.md "File
 * size limit"): writes past it are shortened or refused EFBIG here,
 * before their data leaves the client.  Any thread. */
uint64_t fc_file_limit(struct fc_client *cl, const struct r0_layout *l);
/* dpath.c: hold a write (write) or fallocate of [off, off + *size) to
 * the file's limit lim before anything is sent: a write that starts at or
 * past it fails EFBIG and one that crosses it is shortened (*size), as
 * the kernel does for a local file, except an O_DIRECT one (direct: the
 * kernel's asynchronous direct I/O turns a short reply into EIO, EFBIG
 * says why); a fallocate of any mode that ends past it fails EFBIG
 * (vfs_fallocate's rule).  0 or EFBIG. */
int fc_dpath_hold(bool write, bool direct, uint64_t off, size_t *size,
		  uint64_t lim);
/* dpath.c: what the application sees for an iod's error (a positive
 * errno): space, quota, size and read-only errors and EINTR as they are,
 * everything else EIO. */
int fc_user_err(int status);

/* ops_data.c helpers used by main.c / loop.c */
/* Loop thread: send final size reports of every dirty file; done(arg) runs
 * once all are answered (or failed). */
void fc_flush_all(struct fc_client *cl, void (*done)(void *arg), void *arg);
/* Loop thread: the map moved to a new epoch; data ops waiting for mgrd to
 * demote a failed iod look at it now (ops_data.c). */
void fc_data_map_changed(struct fc_client *cl);
/* Loop thread (report.c): drop a reference to f; frees it at zero. */
void fc_file_put(struct fc_client *cl, struct fc_file *f);
/* Loop thread (ops_file.c): whether an open of ino made under `session`
 * is dead, mgrd having expired that session while we hold another one
 * (proto/FORMAT.md "Fencing"): then logs that `what` ("write",
 * "truncate") through it fails with EIO. */
bool fc_open_expired(struct fc_client *cl, uint64_t ino, uint64_t session,
		     const char *what);
/* Loop thread (report.c): f has a completed, unreported write: put it on
 * the dirty list (reported every FC_REPORT_INTERVAL_MS). */
void fc_file_dirty(struct fc_client *cl, struct fc_file *f);
/* Whether a read through an open with these flags would update the atime
 * of a file with attributes a (the policy is mgrd's: relatime, or the
 * mount's noatime/strictatime; FORMAT.md "Size, truncate, data_version"). */
bool fc_atime_due(struct fc_client *cl, const struct fc_attr *a, int flags);
/* Loop thread (report.c): a read through f completed; its atime goes to
 * mgrd with the next report (flush, fsync, release), never per read. */
void fc_file_accessed(struct fc_client *cl, struct fc_file *f);
/* Size reports carried inside a SETATTR instead of sent ahead of it
 * (report.c, proto/FORMAT.md "Size, truncate, data_version"): one
 * message, so no report of the earlier writes can reach mgrd after a
 * SETATTR of size or mtime, and one round trip less for futimens after
 * writes (tar x, cp -a); a chown or chmod takes the reports that are ready
 * along, so that the close has none to send. */
#define FC_REPORT_SET_MAX WIRE_SETATTR_REPORTS_MAX
struct fc_report;
struct fc_report_set {
	size_t n;
	struct fc_report *r[FC_REPORT_SET_MAX];
	Twinfs__SizeReport *sr[FC_REPORT_SET_MAX];  /* r[i]'s bodies */
};
/* Loop thread: the reports of every open file of ino with unreported
 * writes or reads, into *set, counted in flight until
 * fc_report_embed_done; while one is out, its file sends no report of the
 * same writes (fc_report_start: a flush waits instead).  False: ino has
 * reports in flight already (fc_report_ino must wait for them), more dirty
 * files than FC_REPORT_SET_MAX, or no memory; *set is empty then. */
bool fc_report_embed(struct fc_client *cl, uint64_t ino,
		     struct fc_report_set *set);
/* Loop thread: the SETATTR carrying *set ended with status (0: mgrd
 * applied the reports); empties *set. */
void fc_report_embed_done(struct fc_client *cl, struct fc_report_set *set,
			  int status);
/* Loop thread (report.c): send f's size report if it has unreported
 * writes or an unreported read.  Returns true when a report was sent, or
 * f's writes are reported inside a SETATTR in flight (done runs later,
 * once the inode has no report in flight, and after a report of its own
 * if that SETATTR failed); false when there was nothing to do or no memory (done
 * never runs; *err says which).  A timer's report (from_timer) or one
 * without done never waits for a SETATTR: it is not sent.  op: the
 * request that waits (fsync), so that an interrupt ends the wait for a
 * silent mgrd with -EINTR (fc_mgr_send); NULL where none may (a close
 * must not fail with EINTR). */
bool fc_report_start(struct fc_client *cl, struct fc_file *f, bool from_timer,
		     void (*done)(void *arg, int status), void *arg,
		     struct fc_op *op, int *err);
/* Explicit mtime sets and the writes they overtake (report.c).  A SETATTR
 * of mtime does not wait for earlier writes still in flight: they keep its
 * mtime when they land (their reports say keep_times), and so do the
 * writes that landed before it, whose reports ride in it.  Loop thread.
 *   fc_times_set: a SETATTR of ino's mtime takes its place now; returns
 *     its seq (never 0) for fc_times_done.
 *   fc_times_done: it was answered (status), before its reports end:
 *     if it failed, and no later one is unanswered or succeeded, the
 *     writes it overtook set mtime after all (their time: now).
 *   fc_times_seq: for a write taking its place; fc_times_kept: whether a
 *     write that took its place at seq lands after a SETATTR of mtime. */
uint64_t fc_times_set(struct fc_client *cl, uint64_t ino);
void fc_times_done(struct fc_client *cl, uint64_t ino, uint64_t seq,
		   int status);
static inline uint64_t fc_times_seq(const struct fc_client *cl)
{
	return cl->times_seq;
}
bool fc_times_kept(struct fc_client *cl, uint64_t ino, uint64_t seq);

/* locks.c: cluster-wide locks (proto/FORMAT.md "Locks"). */
void fc_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock);
void fc_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock, int sleep);
void fc_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op);
/* flush (release false) / release: release the locks of the closing owner
 * / open file at mgrd first when this mount ever locked, then hand the
 * request to `next` (on the loop thread, or at once). */
typedef void (*fc_close_fn)(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi);
void fc_lock_close(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   bool release, fc_close_fn next);
/* ops_lock.c: the ops table's flush, release and init. */
void fc_lock_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_lock_release(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
/* init: fc_init, then ask for POSIX and flock locks. */
void fc_lock_conn_init(void *userdata, struct fuse_conn_info *conn);
/* Loop thread: cancel at mgrd the parked requests of interrupted ops. */
void fc_lock_interrupts(struct fc_client *cl);
/* Loop thread: mgrd restarted (new incarnation): re-claim held locks. */
void fc_lock_reclaim(struct fc_client *cl);
/* After the loop has stopped. */
void fc_locks_free(struct fc_client *cl);

/* main.c: the Ctx of the first contact etc. */
int fc_client_connect(struct fc_client *cl);

/* Map a remote status to what the FUSE caller should see. */
static inline int fc_errno(int status)
{
	return status < 0 ? -status : (status ? status : 0);
}

#endif
