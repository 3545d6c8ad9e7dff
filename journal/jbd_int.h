/* jbd_int.h - internals of the block journal, shared by jbd.c (handles,
 * index, reads), jbd_io.c (io_uring and the test I/O layer), jbd_commit.c
 * (close, sync), jbd_checkpoint.c and jbd_recovery.c.  Never included
 * outside journal/.  The on-disk structs mirror journal/FORMAT.md (part 2);
 * "J<n>" in comments cites its numbered invariants.
 *
 * Everything runs on the owner thread: no locks.
 */
#ifndef TWINFS_JBD_INT_H
#define TWINFS_JBD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <liburing.h>

#include "common.h"
#include "journal.h"
#include "metrics.h"

/* ------------------------------------------------------------ on disk */

#define JBD_MAGIC        0x4a425754u   /* "TWBJ" as little-endian bytes */
#define JBD_VERSION      2   /* commit blocks carry synced_to */
#define JBD_VERSION_1    1   /* still replayed at open, then reset to 2 */
#define JBD_T_SUPER      1
#define JBD_T_DESC       2
#define JBD_T_COMMIT     3
#define JBD_T_RECORD     4

#define JBD_TAG_ESCAPED  0x1u
#define JBD_TAG_LAST     0x2u
#define JBD_TAG_INPLACE  0x4u
#define JBD_TAG_KNOWN    (JBD_TAG_ESCAPED | JBD_TAG_LAST | JBD_TAG_INPLACE)

struct jbd_hdr_disk {            /* every metadata block starts with it */
	uint32_t magic;
	uint16_t type;
	uint16_t flags;          /* zero */
	uint64_t seq;
};
_Static_assert(sizeof(struct jbd_hdr_disk) == 16, "block header");

struct jbd_super_disk {
	struct jbd_hdr_disk h;   /* seq = sequence expected at start */
	uint32_t block_size;     /* 4096 */
	uint16_t version;        /* JBD_VERSION */
	uint16_t mode;           /* informational: enum jbd_mode */
	uint64_t nblocks;        /* journal blocks including this one */
	uint64_t start;          /* log block of the oldest live txn (tail) */
	uint8_t uuid[16];
	uint8_t reserved[68];
	uint32_t crc;            /* crc32c(0, bytes 0..123) */
};
_Static_assert(sizeof(struct jbd_super_disk) == 128, "superblock");

struct jbd_desc_disk {
	struct jbd_hdr_disk h;
	uint32_t ntags;
	uint32_t reserved;
};
_Static_assert(sizeof(struct jbd_desc_disk) == 24, "descriptor header");

struct jbd_tag_disk {
	uint64_t obj;
	uint64_t blk;            /* block number within the object */
	uint32_t len;            /* valid bytes 1..4096; 0 with INPLACE */
	uint32_t flags;
};
_Static_assert(sizeof(struct jbd_tag_disk) == 24, "tag");

#define JBD_TAGS_PER_DESC \
	((JBD_BLOCK_SIZE - sizeof(struct jbd_desc_disk)) / sizeof(struct jbd_tag_disk))

struct jbd_rechdr_disk {         /* record block header */
	struct jbd_hdr_disk h;
	uint32_t nrec;
	uint32_t used;           /* bytes used in the block, incl. headers */
};
_Static_assert(sizeof(struct jbd_rechdr_disk) == 24, "record block header");

struct jbd_rec_disk {            /* one record, payload follows, padded to 8 */
	uint64_t obj;
	uint64_t cut;
	uint32_t len;
	uint32_t flags;          /* zero */
};
_Static_assert(sizeof(struct jbd_rec_disk) == 24, "record header");
_Static_assert(JBD_REC_MAX == JBD_BLOCK_SIZE - 2 * 24, "JBD_REC_MAX");

struct jbd_commit_disk {
	struct jbd_hdr_disk h;
	uint32_t nblocks;        /* blocks of the txn before this one */
	uint32_t crc;            /* see FORMAT.md (part 2) "Checksum" */
	int64_t sec;             /* realtime of the close, informational */
	uint32_t nsec;
	uint32_t reserved;
	uint64_t synced_to;      /* version 2: synced_seq when it was built */
};
_Static_assert(sizeof(struct jbd_commit_disk) == 48, "commit block");
/* Version 1 commit blocks end before synced_to. */
#define JBD_COMMIT_V1_SIZE 40u

#define JBD_REC_ALIGN(n) (((n) + 7u) & ~7u)

/* ------------------------------------------------------------ in memory */

enum { ITEM_DATA = 1, ITEM_INPLACE, ITEM_REC };

struct jbd_item {
	uint8_t kind;
	bool escaped;            /* DATA: first 4 bytes equal the magic */
	uint32_t len;            /* DATA: valid bytes; REC: payload bytes */
	uint64_t obj;
	uint64_t blk;            /* DATA */
	uint64_t cut;            /* REC */
	uint64_t hole_off, hole_len;  /* REC: punches this range (jbd_hole) */
	uint8_t *buf;            /* DATA: 4096 bytes; REC: payload (owned) */
	uint32_t crc;            /* DATA: tw_crc32c(0, buf, 4096), taken as
				  * buf was filled (J5, J18) */
};

/* Incremental layout of a transaction in log blocks (descriptors, data,
 * record blocks, commit), so admission never walks a whole txn. */
struct jbd_layout {
	int cur;                 /* 0, T_DESC or T_RECORD: open metadata block */
	uint32_t tags;           /* tags in the open descriptor */
	uint32_t rec_used;       /* bytes used in the open record block */
	uint64_t blocks;         /* excluding the commit block */
};

enum jbd_txn_state {
	TXN_RUNNING = 0,         /* accepting handles */
	TXN_SEALED,              /* full, waiting to close (FIFO) */
	TXN_CLOSING,             /* log writes in flight */
	TXN_CLOSED,              /* commit block written */
	TXN_SYNCED,              /* fdatasync done */
	TXN_CHECKPOINTING,       /* being written home */
};

struct jbd_waiter {
	jbd_done_cb cb;
	void *arg;
	uint64_t seq;            /* for sync / checkpoint waiters */
	bool sync;               /* handle waiter: wants synced */
	struct jbd_waiter *next;
};

struct jbd_txn {
	uint64_t seq;
	enum jbd_txn_state state;
	struct jbd_item *items;
	size_t n_items, cap_items;
	struct jbd_layout lay;
	uint64_t data_blocks;    /* DATA items: block copies held in memory
	                          * (jbd_stats copy_bytes, unlogged_bytes) */
	uint64_t start;          /* first log block (from CLOSING on) */
	uint64_t nblocks;        /* log blocks including the commit */
	bool behind;             /* got a request while another closed:
	                          * part of a stream (jbd__commit_kick) */
	struct jbd_waiter *waiters;   /* handle callbacks */
	/* CLOSING: */
	uint8_t **meta;          /* metadata blocks, in log order, from the
	                          * block cache (jbd__close_bufs_free) */
	size_t n_meta;
	uint8_t **esc;           /* escaped copies (NULL where none) */
	unsigned ios_pending;
	struct jbd_txn *next;    /* seq order */
};

/* Index entry: the newest journal-resident copy of (obj, blk). */
struct jbd_ent {
	struct jbd_txn *txn;
	size_t item;             /* index into txn->items */
	uint32_t valid;          /* bytes of the copy that are current */
	bool frozen;             /* a cut followed: never update in place */
};

struct jbd_cut {
	uint64_t seq;
	uint64_t cut;
};

/* A punched range not yet checkpointed: every copy older than the record
 * (txn seq, item) that punches it, and home, read as zeros there. */
struct jbd_hole {
	uint64_t seq;
	size_t item;
	uint64_t off, end;
};

/* Per-object journal state (data=journal only). */
struct jbd_obj {
	uint64_t obj;
	struct tw_hmap blocks;   /* blk + 1 -> struct jbd_ent * */
	uint64_t wend;           /* logical size from writes/cuts */
	bool has_wend;
	struct jbd_cut *cuts;    /* cuts not yet checkpointed, seq order */
	size_t n_cuts, cap_cuts;
	struct jbd_hole *holes;  /* punches not yet checkpointed, log order */
	size_t n_holes, cap_holes;
	uint64_t nref;           /* items in live txns */
};

/* One I/O request of the I/O layer. */
enum { IO_WRITE = 1, IO_FSYNC };

struct jbd_io;
typedef void (*jbd_io_done)(struct jbd *j, struct jbd_io *io, int rc);

struct jbd_io {
	int op;
	enum jbd_io_kind kind;
	int fd;
	int alt_fd;              /* fd is O_DIRECT: the same file buffered,
	                          * for a refused or short write; else -1 */
	struct iovec *iov;       /* advanced on short writes */
	int iovcnt;
	struct iovec iov_inline[4];
	struct iovec *iov_owned;  /* heap vector (freed with the request) */
	uint64_t off;
	bool link;               /* IOSQE_IO_LINK to the next request */
	uint64_t obj;            /* checkpoint home write: its object */
	jbd_io_done done;
	void *ctx;
	int rc;                  /* set on completion */
	struct jbd_io *next;
};

/* One syncfs(2) of the home file system on a short-lived thread, so the
 * owner never waits for the disk (checkpoint, ordered commits), or the
 * fsync(2) of a batch of descriptors (jbd_sync_files).  The thread touches
 * only fd, bg, fds and rc, and wakes the owner through efd. */
struct jbd_bgsync {
	pthread_t thread;
	bool started;            /* owner: started, result not collected */
	bool joined;             /* owner: thread joined (wait) */
	atomic_bool done;        /* thread -> owner */
	int fd, efd, rc;
	int (*bg)(void *arg);    /* run before the syncfs, or NULL */
	void *bg_arg;
	int *fds;                /* non-NULL: fsync and close these instead
	                          * of the syncfs; freed when the thread is
	                          * joined (nfds stays until the next start) */
	size_t nfds;
};

/* jbd_sync_files: one caller, from the call until the log sync.  fds are
 * the caller's until its batch starts (then the thread's: n is 0). */
struct jbd_fjob {
	int *fds;
	size_t n;
	jbd_done_cb cb;
	void *arg;
	struct jbd_fjob *next;
};

struct jbd {
	struct jbd_opts opts;
	struct jbd_ops ops;
	const struct jbd_io_ops *io;
	int fd;                  /* journal file */
	int dfd;                 /* the same file opened O_DIRECT, or -1 */
	bool direct;             /* batched log writes go through dfd */
	bool direct_home;        /* ... and checkpoints' runs of at least
	                          * JBD_DIRECT_MIN full blocks go home with
	                          * O_DIRECT (dfd is held by the ring) */
	int efd;                 /* eventfd */
	/* The block cache (jbd_blocks.c): slabs of data-block buffers and
	 * a stack of the blocks given back, with room for all of them. */
	uint8_t **slabs;
	size_t n_slabs, cap_slabs;
	void **cache;
	size_t n_cache, cap_cache;
	uint64_t cache_free_bytes;  /* slabs jbd_free_cache marked, none
	                             * of whose blocks was taken since */
	bool cache_marked;          /* jbd_free_cache ran, and no block was
	                             * taken or given back since */
	struct io_uring ring;
	bool ring_ok;
	uint8_t uuid[16];
	uint32_t crc_seed;
	uint64_t nblocks;        /* total, incl. the superblock */
	uint64_t nlog;           /* log blocks: 1 .. nblocks-1 */
	uint64_t max_txn;        /* blocks incl. commit: nlog / 4 (J9) */
	int aborted;             /* 0 or -EIO: sticky (J12) */

	/* log space: [tail, head) modulo the log, used blocks */
	uint64_t tail, head, used;
	uint64_t tail_seq;       /* seq expected at tail (the superblock's) */

	uint64_t next_seq;
	uint64_t closed_seq, synced_seq, checkpointed_seq;
	struct jbd_txn *running;
	/* Sealed..checkpointing, seq order.  States never decrease along the
	 * list (CHECKPOINTING* SYNCED* CLOSED* CLOSING? SEALED*), so two
	 * cursors name where the next close and the next sync start; without
	 * them every close and sync walked the whole list, quadratic in the
	 * number of transactions between checkpoints. */
	struct jbd_txn *txn_head, *txn_tail;
	struct jbd_txn *first_sealed;   /* oldest SEALED, or NULL */
	struct jbd_txn *first_closed;   /* oldest CLOSED (not synced), or NULL */
	bool closing;
	bool kick_deferred;      /* owner_drains: a commit left its close to
	                          * the owner's next jbd_process */
	/* ordered mode and jbd_sync_home: in-place data of transactions up
	 * to osync_seq is durable; osync covers every transaction sealed
	 * when it started */
	struct jbd_bgsync osync;
	uint64_t osync_target, osync_seq;
	struct jbd_waiter *home_waiters; /* jbd_sync_home, until osync */
	/* ordered mode with ops.home_sync_fds: the in-place objects of
	 * every transaction sealed when ofsync started are fsynced by it;
	 * those up to ofsync_seq are durable (J11 holds up to the larger of
	 * osync_seq and ofsync_seq) */
	struct jbd_bgsync ofsync;
	uint64_t ofsync_target, ofsync_seq;
	/* jbd_sync_files: one batch of callers' descriptors at a time is
	 * fsynced on fsync_bg (fjobs_run); callers that come meanwhile wait
	 * for the next batch (fjobs_wait, oldest first) */
	struct jbd_bgsync fsync_bg;
	struct jbd_fjob *fjobs_run, *fjobs_wait, *fjobs_wait_tail;
	size_t fjobs_fds;        /* descriptors held: waiting and running */

	/* sync */
	bool syncing;
	uint64_t sync_target;
	struct jbd_waiter *sync_waiters;
	uint64_t want_sync;      /* highest seq someone wants synced */
	uint64_t last_sync_ms;
	uint64_t unsynced_blocks;

	/* checkpoint */
	bool cp_active;
	bool want_cp_all;
	struct jbd_waiter *cp_waiters;
	struct jbd_cp *cp;
	bool full_wait;          /* a close waits for log space */
	/* Home space to give back (data=journal): the newest transaction
	 * holding a cut (a delete, truncate or punch record), whose space
	 * the home file system gets back only when it is checkpointed. */
	uint64_t frees_seq;
	uint64_t frees_cp_ms;    /* when a checkpoint last started for it */
	/* The newest cut that admission refused a write while it waited:
	 * urgent until checkpointed (urgent_seq > checkpointed_seq). */
	uint64_t urgent_seq;
	/* Space is short while data waits in the log (jbd_want_home): the
	 * newest transaction to checkpoint now (home_seq > checkpointed_seq),
	 * so that pending_home, which counts every journaled byte as new
	 * home space, shrinks to what home really takes. */
	uint64_t home_seq;
	/* Admission's last free_space() answer, less what it admitted since
	 * (jbd.c, admit), and when it was read.  free_valid is cleared when
	 * a checkpoint lowers pending_home: the space it took at home was
	 * counted there until then. */
	int64_t free_left;
	uint64_t free_ms;
	bool free_valid;

	/* jbd_set_latency_hists: the owner's histograms (NULL: untimed) and
	 * when the current close and checkpoint started (owner thread). */
	struct tw_hist *commit_hist, *cp_hist;
	uint64_t close_start_ns, cp_start_ns;

	/* index (data=journal) */
	struct tw_hmap objs;     /* obj + 1 -> struct jbd_obj * */
	uint64_t pending_home;   /* data bytes not yet checkpointed */
	/* Block copies (DATA items) held by live transactions, and of them
	 * those of transactions not yet written to the log (RUNNING and
	 * SEALED): the journal's memory (jbd_stats). */
	uint64_t copy_blocks, unlogged_blocks;

	/* I/O layer */
	struct jbd_io *q_head, *q_tail;  /* not yet submitted */
	struct jbd_io *done_head, *done_tail; /* completed (sync layer) */
	unsigned inflight, max_inflight;
	unsigned log_inflight;   /* of inflight, requests on the journal
	                          * file (log, superblock, its fsyncs) */
	bool fault_log_eio;      /* jbd_inject_log_eio armed (test only) */
	int fault_direct;        /* jbd_inject_direct_fault: 0, 1, -EINVAL */

	/* deferred callbacks */
	struct jbd_waiter *cb_head, *cb_tail;
	bool in_process;

	struct jbd_stats st;
};

/* Memory alignment of every block buffer the log is written from, so that
 * batched transactions can go through dfd (O_DIRECT); jbd_open opens dfd
 * only when the file system asks for no more (statx STATX_DIOALIGN). */
#define JBD_BUF_ALIGN      512u
/* A transaction of at least this many blocks (64 KiB) that filled while
 * another closed goes to the log through dfd (jbd__commit_kick); a
 * checkpoint writes a run of at least this many full blocks home with
 * O_DIRECT (jbd_checkpoint.c). */
#define JBD_DIRECT_MIN     16u

/* jbd_blocks.c: a 4 KiB block buffer (aligned to its size, so O_DIRECT
 * takes it) for a data item, an escaped copy or a metadata block, or
 * NULL; given back with jbd__blk_put, never free().  jbd__blocks_fini at
 * close. */
#define JBD_SLAB_BYTES     (2u << 20)
void *jbd__blk_get(struct jbd *j);
void jbd__blk_put(struct jbd *j, void *blk);
void jbd__blocks_fini(struct jbd *j);

/* jbd.c */
int jbd__reopen_direct(int fd);
/* Give a closing transaction's metadata blocks and escaped copies back
 * to the block cache (once written, or when it is freed). */
void jbd__close_bufs_free(struct jbd *j, struct jbd_txn *t);
void jbd__seal(struct jbd *j);
struct jbd_obj *jbd__obj(struct jbd *j, uint64_t obj, bool create);
void jbd__obj_maybe_free(struct jbd *j, struct jbd_obj *o);
void jbd__abort(struct jbd *j, int rc, const char *what);
/* A checkpoint or replay of obj (transaction seq) failed with err: true
 * when the owner set obj aside (jbd_ops.home_failed), so the caller
 * skips obj's other items and goes on; false: abort or fail as before. */
bool jbd__obj_set_aside(struct jbd *j, uint64_t obj, uint64_t seq, int err);
void jbd__queue_cb(struct jbd *j, jbd_done_cb cb, void *arg, int rc);
/* jbd_io.c: make the owner's event loop run jbd_process (the eventfd;
 * nothing before it exists). */
void jbd__wake(struct jbd *j);
void jbd__txn_free(struct jbd *j, struct jbd_txn *t);
uint64_t jbd__log_next(const struct jbd *j, uint64_t blk, uint64_t n);
void jbd__super_encode(const struct jbd *j, uint8_t *block, uint64_t start,
		       uint64_t seq);
int jbd__home_dup(struct jbd *j, uint64_t obj, bool create, int *fd);

/* jbd_io.c */
int jbd__io_init(struct jbd *j);
void jbd__io_fini(struct jbd *j);
struct jbd_io *jbd__io_new(int op, enum jbd_io_kind kind, int fd,
			   uint64_t off, jbd_io_done done, void *ctx);
void jbd__io_free(struct jbd_io *io);
void jbd__io_submit(struct jbd *j, struct jbd_io *io);
void jbd__io_pump(struct jbd *j);
/* Read the eventfd, so that it stays quiet until the next completion:
 * once per jbd_process, before it reaps (a completion after the read
 * writes it again). */
void jbd__io_clear_event(struct jbd *j);
/* Reap completions; returns how many were handled. */
int jbd__io_reap(struct jbd *j, bool wait);
bool jbd__io_busy(const struct jbd *j);
/* Background syncfs of the home file system: available with real I/O and
 * ops.home_fs_fd.  start: 0 or -errno; poll: true once finished, *rc its
 * result (collected once); wait blocks until the thread ended, leaving the
 * result for poll (jbd_wait, close). */
bool jbd__bgsync_usable(const struct jbd *j);
/* Start b's thread; with_bg: run ops.home_bg (if any) before the
 * syncfs (the checkpoint's). */
int jbd__bgsync_start(struct jbd *j, struct jbd_bgsync *b, bool with_bg);
/* Start b's thread on fsync(2) and close(2) of fds[0..n) (b owns the
 * array from here and frees it once the thread is joined; on failure the
 * array and the descriptors stay the caller's). */
int jbd__bgsync_start_fds(struct jbd *j, struct jbd_bgsync *b, int *fds,
			  size_t n);
bool jbd__bgsync_poll(struct jbd_bgsync *b, int *rc);
void jbd__bgsync_wait(struct jbd_bgsync *b);
/* Synchronous helpers (open, replay): through the test layer when set. */
int jbd__pwrite_sync(struct jbd *j, enum jbd_io_kind kind, int fd,
		     const void *buf, size_t len, uint64_t off);
int jbd__fsync_sync(struct jbd *j, enum jbd_io_kind kind, int fd);
int jbd__pread_full(struct jbd *j, enum jbd_io_kind kind, int fd, void *buf,
		    size_t len, uint64_t off);

/* jbd_commit.c */
void jbd__layout_add(struct jbd_layout *l, const struct jbd_item *it);
void jbd__commit_kick(struct jbd *j);
void jbd__sync_kick(struct jbd *j);
void jbd__home_kick(struct jbd *j);
void jbd__files_kick(struct jbd *j);
/* Fail every job of *list with rc, closing the descriptors it still owns
 * (abort); queue the callbacks unless `silent` (abandon). */
void jbd__fjobs_fail(struct jbd *j, struct jbd_fjob **list, int rc,
		     bool silent);

/* jbd_checkpoint.c */
void jbd__cp_kick(struct jbd *j);
/* Block until a running home sync of the checkpoint ends (jbd_wait). */
void jbd__cp_wait(struct jbd *j);
void jbd__cp_fini(struct jbd *j);

/* jbd_recovery.c */
int jbd__recover(struct jbd *j, struct jbd_replay_info *info);

#endif
