/* mount.h - the state of one twinfs mount (struct fc_client) and the types
 * it holds by value; included by every file of fuse-client/.  Each
 * module's interface is its own header (the module map below): a change
 * to one recompiles only its users, and what a file uses is what it
 * includes.
 *
 * Threads and who owns what (docs/ARCHITECTURE.md "Client"):
 *   - The fc_<op> handlers run on the thread that read the request from
 *     /dev/fuse: libfuse's worker threads (fuse_session_loop_mt) or the
 *     I/O loop thread itself (loop.c fc_loop_serve), as -o worker_reads
 *     or -o io_thread_reads says, else as main.c chooses by what a
 *     wakeup costs (common/wake.h).  Either way a handler never touches the
 *     network: it copies what it needs into an op (struct fc_op and a
 *     per-kind extension) and hands it to the loop with fc_loop_submit(),
 *     which on the loop runs it as soon as the handler returns.  A few
 *     answers that need no server are given by the handler (forget,
 *     opendir, releasedir, a cached absent security.capability, fresh
 *     attributes, a lookup answered from a listing fetched ahead or,
 *     ENOENT, under a name lease).  So a handler may take only leaf
 *     locks and never waits for the loop.
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
 *
 * Module map (docs/ARCHITECTURE.md "Module map"): header, the file(s)
 * behind it, their job.
 *   mount.h      the mount state; options, attributes, the iod slots, an
 *                mgrd call, the statahead and name-lease tables
 *   loop.h       loop.c: the I/O loop thread, ops, handoff, replies
 *   mgr.h        mgr.c: mgrd calls (numbered, retransmitted), the map,
 *                routing to iods, monitor pings, failure reports
 *   inode.h      inode.c: inode table, lookup counts, cached attributes
 *   file.h       struct fc_file, the open regular file (ops_file.c)
 *   report.h     report.c: size reports, explicit mtime sets
 *   wbehind.h    wbehind.c: write-behind, per-inode order of data ops
 *   dpath.h      dpath.c: the data path's pure decisions
 *   dcrc.h       dcrc.c: the CRC32C a write carries from its entry
 *   dop.h        ops_data.c, ops_file.c: the data op they share
 *   cap.h        cap.c: capabilities per inode
 *   ident.h      ident.c: tickets, the subtree root swap
 *   statahead.h  statahead.c: lookups answered from listings fetched ahead
 *   dlease.h     dlease.c: name leases
 *   locks.h      locks.c, ops_lock.c: cluster-wide locks
 *   ops.h        ops_meta.c, ops_dir.c, ops_file.c, ops_data.c,
 *                ops_seek.c: the FUSE request handlers
 *   tune.h       tune.c: the readahead window
 *   kio.h        kio.c: the client's I/O on /dev/fuse
 *   main.c       options, first contact, mount, session loop, exit
 */
#ifndef TWINFS_FC_MOUNT_H
#define TWINFS_FC_MOUNT_H

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
#include "spin.h"
#include "wire.h"

#define FC_SA_DIRS             4            /* statahead: directories */
#define FC_SA_RM_RING          64           /* ... removals remembered */
#define FC_DL_DIRS             64           /* name leases held at once */
#define FC_SPIN_US             20           /* -o spin_us default */
#define FC_MGR_SPIN_US         40           /* -o mgr_spin_us default */

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
	unsigned spin_us;               /* -o spin_us=, FC_SPIN_US; 0 off */
	unsigned mgr_spin_us;           /* -o mgr_spin_us=, FC_MGR_SPIN_US */
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
	bool selinux_absent;       /* no security.selinux (mgrd says) */
	bool has_layout;
	struct r0_layout layout;
	int policy_first;
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

/* ------------------------------------------------------------ mgrd calls */

struct fc_op;
struct fc_mgr_call;
struct fc_mgr_flight;
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
	/* This mount's removals (fc_sa_removed): the last FC_SA_RM_RING,
	 * for fetches that were in flight across them. */
	uint64_t rm_seq;
	struct { uint64_t dir, key; } rm_ring[FC_SA_RM_RING];
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

/* ----------------------------------------------------------- the client */

struct fc_deferred;
struct fc_map_waiter;
struct fc_wb;
struct fc_file;
struct fc_report_barrier;
struct fc_locks;

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
	/* /dev/fuse read by the loop itself (loop.c fc_loop_serve) */
	atomic_bool fuse_on_loop;          /* main: the loop is to read */
	uv_poll_t fuse_poll;               /* [loop] */
	bool fuse_polling;                 /* [loop] fuse_poll initialized */
	struct fuse_buf fuse_buf;          /* [loop] */
	int fuse_done_fd;                  /* eventfd: wakes main when the
					    * session ended (fc_loop_start to
					    * fc_loop_stop) */

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
	/* [loop] writes held back to be joined (wbehind.c fc_wb_park),
	 * oldest first, and the timer that sends them: started at a park
	 * (ops_data.c), stopped once none is left (wbehind.c) */
	struct fc_wb *wb_parked, *wb_parked_tail;
	uv_timer_t park_timer;
	/* docs/ARCHITECTURE.md "Waiting without sleeping": the kernel's next
	 * request after a reply, and mgrd's answer, polled for before the
	 * loop sleeps. */
	uv_prepare_t spin_prepare;
	struct tw_spin spin;
	uint64_t spin_read_ns;          /* when the last request was read */
	struct tw_spin mgr_spin;        /* armed from the oldest flight */
	uint32_t mgr_flights;           /* attempts sent, not yet answered */
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
	/* [loop] every open file: those whose RELEASE never came (the
	 * kernel sends none once unmounted) are freed at exit */
	struct fc_file *files;
	/* Size reports in flight per inode, and the SETATTRs waiting for an
	 * inode's count to reach zero (fc_report_ino). */
	struct tw_hmap reports_inflight;   /* [loop] ino -> count */
	struct fc_report_barrier *barriers; /* [loop] */
	uint64_t times_seq;   /* [loop] SETATTRs of mtime sent (report.c) */
	uv_timer_t report_timer;
	bool report_timer_on;
	/* RELEASEs waiting for this mount's next mgrd request (mgr.c) */
	struct fc_rel_later *rel_head, *rel_tail;   /* [loop] */
	uv_timer_t rel_timer;
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

/* Map a remote status to what the FUSE caller should see. */
static inline int fc_errno(int status)
{
	return status < 0 ? -status : (status ? status : 0);
}

#endif
