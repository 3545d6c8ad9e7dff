/* journal.h - the whole public interface of libjournal.
 *
 * Record mode (mgrd): an append-only log of opaque records, each closed
 * (written to the log file with write(2), so it survives the death of the
 * process) before jnl_rec_append returns, and synced (fdatasync, survives
 * power loss) by jnl_rec_sync.  Replay delivers every closed record in order
 * and stops at the first torn one, which is discarded together with
 * everything after it, also valid records written before it was synced
 * (a power loss may keep those and lose it); a bad record followed by one
 * written after it had been synced is damage and fails the open instead
 * (jnl_rec_open).  A snapshot (the caller's serialised state) is
 * written to a temporary file, fsynced, renamed and the directory fsynced;
 * then the log is trimmed.  Format: journal/FORMAT.md.
 *
 * The ext3-style block journal of the iods is the second half of this
 * header ("Block journal (iod)"); both formats: journal/FORMAT.md.
 *
 * Not thread-safe: one owner thread per log (jnl_rec_sync_run is the one
 * step that runs elsewhere).
 */
#ifndef TWINFS_JOURNAL_H
#define TWINFS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define JNL_REC_MAX (4u << 20)     /* largest record payload */

struct jnl_rec;

/* Called for the snapshot (if any) and then each closed record, in order.
 * Return 0 to go on, a negative errno to stop replay with that error. */
typedef int (*jnl_snap_cb)(const void *buf, size_t len, void *arg);
typedef int (*jnl_replay_cb)(uint64_t seq, const void *buf, size_t len,
			     void *arg);

/* Open (or create) the log in directory `dir` (files "snapshot" and
 * "journal"), replaying: snap_cb once with the snapshot's payload (not at
 * all when there is none), then replay_cb for each closed record after it.
 * A torn tail is cut off (logged with its offset), and so is an unsynced
 * tail a power loss lost in part (FORMAT.md invariant 12).  A version 1
 * log is upgraded (invariant 13).  Returns 0 or -errno; -EBADMSG when the
 * snapshot itself is corrupt; -ENOTRECOVERABLE when a bad record has a
 * valid record after it that was written after the bad one had been
 * synced (damage, not a torn tail: invariant 11), the file untouched; the
 * callbacks have then run for the records before it, and the caller
 * discards that state. */
int jnl_rec_open(const char *dir, jnl_snap_cb snap_cb,
		 jnl_replay_cb replay_cb, void *arg, struct jnl_rec **out);

/* The operator's decision for -ENOTRECOVERABLE: copy the log aside
 * ("journal.corrupt-<unix time>"), then cut it at the damage as a torn
 * tail, dropping the valid records after it. */
#define JNL_REC_ACCEPT_CORRUPT 1u
/* Wait up to 10 s for the directory's lock instead of -EBUSY at once: a
 * forked child of a killed owner (a snapshot in the background) holds it
 * until it is gone, which a sync in progress may delay. */
#define JNL_REC_WAIT_LOCK 2u
/* jnl_rec_open with flags (JNL_REC_ACCEPT_CORRUPT, JNL_REC_WAIT_LOCK;
 * others -EINVAL). */
int jnl_rec_open_flags(const char *dir, unsigned flags, jnl_snap_cb snap_cb,
		       jnl_replay_cb replay_cb, void *arg,
		       struct jnl_rec **out);

/* Append one record (len <= JNL_REC_MAX) and close it (written to the log
 * file).  Sets *seq to its sequence number when seq is non-NULL.  Returns 0
 * or -errno; after an I/O error the log is aborted and every later append
 * fails with -EIO (sticky). */
int jnl_rec_append(struct jnl_rec *j, const void *buf, size_t len,
		   uint64_t *seq);

/* fdatasync the log: every record appended so far survives power loss. */
int jnl_rec_sync(struct jnl_rec *j);

/* jnl_rec_sync in three steps, so that the fdatasync runs on another
 * thread while the owner goes on appending (a periodic commit must not
 * stop the owner's requests behind a disk flush):
 *   jnl_rec_sync_start (owner): takes the records appended so far; 1 when
 *     there is something to sync (then run and done must follow), 0 when
 *     they are synced already, -EIO once aborted, another -errno when the
 *     log file cannot be opened again (the caller may jnl_rec_sync).
 *   jnl_rec_sync_run (any thread): the fdatasync, of an open file of its
 *     own on the log file (the owner may close or replace its own
 *     meanwhile; a writeback error is reported to both).
 *   jnl_rec_sync_done (owner): records the result; the records taken count
 *     as synced only now (FORMAT.md invariant 12), and only if the log file
 *     is still the one synced (a newer one was synced when it took over).
 *     A failed fdatasync aborts the log, as jnl_rec_sync's would.
 *   jnl_rec_sync_forget: instead of done, when the log is closed. */
struct jnl_rec_bgsync {
	int fd;                  /* the log file, opened again */
	uint64_t upto;           /* the last record taken */
	uint8_t log_id[16];      /* of the log file synced */
	int fault;               /* fault injection, taken at start */
	int rc;                  /* the fdatasync's result */
};
int jnl_rec_sync_start(struct jnl_rec *j, struct jnl_rec_bgsync *b);
void jnl_rec_sync_run(struct jnl_rec_bgsync *b);
int jnl_rec_sync_done(struct jnl_rec *j, struct jnl_rec_bgsync *b);
void jnl_rec_sync_forget(struct jnl_rec_bgsync *b);

/* Bytes in the log since the last snapshot (the caller decides when to
 * snapshot); with `journal.next`, of both files. */
uint64_t jnl_rec_log_bytes(const struct jnl_rec *j);

/* Write a snapshot of the caller's whole state (buf, len), make it durable,
 * and trim the log: after a crash at any point, replay yields either the
 * old snapshot + the full log, or the new snapshot + records appended after
 * this call.  Returns 0 or -errno. */
int jnl_rec_snapshot(struct jnl_rec *j, const void *buf, size_t len);

/* jnl_rec_snapshot of a state as of seq `seq` of another log (an mgrd
 * pair's standby installing the active's snapshot, so that both logs give
 * a record the same seq): the next append gets seq + 1.  Records above
 * seq in this log are dropped first (FORMAT.md invariant 14).  A failure
 * aborts the log. */
int jnl_rec_snapshot_at(struct jnl_rec *j, const void *buf, size_t len,
			uint64_t seq);

/* A snapshot in the background (FORMAT.md invariant 16), written by
 * another process (a fork of the caller) while appends go on:
 *   jnl_rec_snap_begin: the snapshot will hold the state as of *seq (the
 *     last record appended); syncs `journal` and starts the log file
 *     `journal.next` at *seq + 1, where the appends go from now on (none
 *     when one is there already, from a begin that did not finish: it is
 *     kept).  -EBUSY while one is begun;
 *   jnl_rec_snap_write: in the other process, the state as of that seq
 *     (buf, len) to `snapshot.tmp`, synced; it touches no other file;
 *   jnl_rec_snap_finish: after it succeeded, installs `snapshot.tmp` as
 *     the snapshot and `journal.next` as `journal` (the records up to seq
 *     are dropped with the old `journal`);
 *   jnl_rec_snap_abandon: after it failed (or was killed): removes
 *     `snapshot.tmp`; appends stay in `journal.next` and the next begin
 *     keeps it.
 * At every crash open gives the same records: the old snapshot with both
 * files, or the new snapshot and `journal.next` (renamed if need be).
 * While one is begun, jnl_rec_snapshot(_at) fail with -EBUSY.  Iterators
 * read on from `journal` into `journal.next`; finish ends those still in
 * `journal` with -ESTALE. */
int jnl_rec_snap_begin(struct jnl_rec *j, uint64_t *seq);
int jnl_rec_snap_write(struct jnl_rec *j, uint64_t seq, const void *buf,
		       size_t len);
int jnl_rec_snap_finish(struct jnl_rec *j);
void jnl_rec_snap_abandon(struct jnl_rec *j);

/* The payload bytes of the snapshot in use (0 without one). */
uint64_t jnl_rec_snap_len(const struct jnl_rec *j);

/* The seq of the last record appended or replayed (the snapshot's when
 * none follows it; 0 for an empty journal). */
uint64_t jnl_rec_last_seq(const struct jnl_rec *j);
/* The seq up to which every record is durable (invariant 12: set by
 * open, by a returned fdatasync, and by a snapshot to its seq). */
uint64_t jnl_rec_synced_seq(const struct jnl_rec *j);
/* The seq of the first record the log files hold (records below it are
 * only in the snapshot). */
uint64_t jnl_rec_first_seq(const struct jnl_rec *j);

/* Reading closed records back from the current log while appending goes
 * on (an mgrd pair's active catching its standby up): start at `seq`
 * (first_seq .. last_seq + 1; else -ENOENT), then next gives each record
 * in order: 1 with *buf (malloc'd, the caller frees), *len, *seq; 0 when
 * every record closed so far was read (later appends are read by later
 * calls); -ESTALE once a snapshot replaced the log; -errno on a read
 * error or a record that fails its checks. */
struct jnl_rec_iter {
	struct jnl_rec *j;
	uint8_t log_id[16];
	uint64_t off, seq;
};
int jnl_rec_iter_start(struct jnl_rec *j, uint64_t seq,
		       struct jnl_rec_iter *it);
int jnl_rec_iter_next(struct jnl_rec_iter *it, void **buf, size_t *len,
		      uint64_t *seq);

void jnl_rec_close(struct jnl_rec *j);

/* Fault injection for crash tests: the N-th write(2)-level operation from
 * now (1-based) fails (mode 0), is torn to its first half (mode 1), or is
 * dropped silently (mode 2); 0 disables.  Test-only. */
void jnl_rec_inject_fault(struct jnl_rec *j, unsigned nth, int mode);

/* ===================================================== Block journal (iod)
 *
 * The ext3/JBD-style block journal of the iods (docs/ARCHITECTURE.md
 * "Journal"; byte format, validity rule, invariants J1.. and state diagram in
 * journal/FORMAT.md (part 2)).  A preallocated journal file of 4 KiB blocks
 * holds a superblock and a circular log of transactions.  The caller (the
 * iod's subfile store) names home objects by an opaque u64 (e.g.
 * ino << 8 | column) and supplies their fds; the library journals whole
 * blocks of them (data=journal) plus opaque metadata records, closes
 * transactions (commit block written), syncs them (fdatasync), checkpoints
 * them home with io_uring and replays them at open.
 *
 * Threading: not thread-safe; one owner thread (the iod's loop).  The
 * library never blocks except in jbd_open, jbd_close, jbd_wait, the
 * caller's own callbacks and the synchronous reads of jbd_read.
 *
 * Event loop: jbd_event_fd() is an eventfd that becomes readable when
 * completions are ready; poll it (uv_poll, UV_READABLE) and call
 * jbd_process().  Call jbd_tick() about every 100 ms-1 s (uv_timer) for
 * the commit_interval sync.  Tests may instead call jbd_wait().
 * An owner that sets jbd_opts.owner_drains also calls jbd_process()
 * whenever jbd_ready() holds before its loop sleeps (uv_prepare).  Then
 *   - a commit leaves the close of its transaction to that call, so the
 *     owner finishes its request first (an iod forwards it to its twin)
 *     and requests that arrived together share one close;
 *   - work the library finished on the owner's own thread (a log append
 *     written inline) waits for that call instead of writing the
 *     eventfd, which would cost the loop a wakeup and three system calls
 *     per request.
 *
 * Callbacks: when a function that takes a callback returns an error, the
 * callback is never called.  Otherwise it is called exactly once, from
 * jbd_process/jbd_wait/jbd_close (never from inside the call that
 * registered it), with 0 or a negative errno (-EIO once aborted).
 * Callbacks may begin and commit new requests, but must not call
 * jbd_close or jbd_abandon.
 */

#include <stdbool.h>
#include <sys/uio.h>

#define JBD_BLOCK_SIZE     4096u
#define JBD_DEFAULT_SIZE   (256ull << 20)
#define JBD_MIN_SIZE       (64ull * JBD_BLOCK_SIZE)
#define JBD_REC_MAX        4048u            /* largest record payload */
#define JBD_NO_CUT         UINT64_MAX       /* record that cuts nothing */

enum jbd_mode {
	JBD_MODE_JOURNAL = 0,   /* data + records through the log */
	JBD_MODE_ORDERED,       /* data in place, synced before the commit */
	JBD_MODE_WRITEBACK,     /* data in place, no ordering */
};

/* When a record is handed to ops.apply (FORMAT.md (part 2) "Records"). */
enum jbd_phase {
	JBD_PHASE_CLOSE = 1,      /* ordered/writeback: right after closing */
	JBD_PHASE_CHECKPOINT,     /* journal mode: at checkpoint, log order */
	JBD_PHASE_REPLAY,         /* every mode: at replay, log order */
};

/* Kinds of write-level operations, for the test I/O layer. */
enum jbd_io_kind {
	JBD_IO_LOG = 1,         /* journal file (log blocks and superblock) */
	JBD_IO_HOME,            /* a home object (checkpoint and replay) */
};

struct jbd;
struct jbd_handle;

/* The caller's home store.  All callbacks run on the owner thread and are
 * synchronous; they return 0 or a negative errno. */
struct jbd_ops {
	/* An fd of object obj open for reading and writing.  The library
	 * dup()s it when it needs it beyond the call, so the caller may
	 * close or evict it afterwards.  create = false: -ENOENT when the
	 * object does not exist.  A checkpoint asks again after applying a
	 * record of obj (a delete and a re-creation may have replaced the
	 * file behind the id).  Required. */
	int (*home_fd)(void *arg, uint64_t obj, bool create, int *fd);
	/* Make everything written to these objects (data, size, the
	 * creation's directory entries) durable.  Called by the checkpoint
	 * before the tail moves, at the end of replay, and in ordered mode
	 * for the in-place objects before a transaction's commit.  Required. */
	int (*home_sync)(void *arg, const uint64_t *objs, size_t n);
	/* Optional: an fd on the file system holding every home object (the
	 * library does not close it).  When set, the checkpoint makes home
	 * durable with one syncfs(2) of that file system on a helper thread
	 * instead of calling home_sync on the owner thread; the only calls
	 * made from another thread are syncfs on this fd and home_bg. */
	int (*home_fs_fd)(void *arg);
	/* Optional, used only with home_fs_fd: blocking home work that the
	 * checkpoint runs on its helper thread just before that syncfs, so
	 * that the syncfs covers it and the owner's loop never waits for it
	 * (the iod's deferred unlinks).  It must guard whatever it shares
	 * with the owner thread itself; an error aborts the journal like a
	 * failed syncfs.  Without it (or without the helper thread),
	 * home_sync must do that work first. */
	int (*home_bg)(void *arg);
	/* Optional, ordered mode with home_fs_fd: descriptors whose fsync(2)
	 * makes the in-place data of objs[0..n) durable, with the directory
	 * entries that name them, opened now, so they cover every in-place
	 * write that has returned.  The library fsyncs and closes them on
	 * its helper thread before the commit blocks of the transactions
	 * holding those objects, instead of a syncfs of the whole home file
	 * system (ext3's ordered mode writes the transaction's data, not the
	 * disk's).  Returns how many it put in fds (at most max; 0 when
	 * nothing is left unsynced), -E2BIG when one syncfs of the home file
	 * system serves better (more than max, or many small files: each
	 * fsync flushes the disk's cache; the library runs that syncfs in
	 * the same place, started after the call), or -errno (the journal
	 * aborts). */
	int (*home_sync_fds)(void *arg, const uint64_t *objs, size_t n,
			     int *fds, size_t max);
	/* Apply one metadata record (payload rec, len bytes; cut as passed
	 * to jbd_record) of transaction seq.  Replay may apply a record more
	 * than once (after a crash during replay or checkpoint), so records
	 * must be idempotent "set" operations.  Required when records are
	 * used. */
	int (*apply)(void *arg, enum jbd_phase phase, uint64_t seq,
		     uint64_t obj, uint64_t cut, const void *rec, size_t len);
	/* Free bytes on the home file system (statvfs f_bavail * f_frsize).
	 * Optional: NULL disables admission control. */
	int64_t (*free_space)(void *arg);
	/* Optional: a checkpoint or replay could not bring obj home (a home
	 * write, opening it, or applying one of its records in transaction
	 * seq failed with err) for a reason that is the object's, not the
	 * disk's (jbd_obj_error).  Return 0 to set obj aside: the library
	 * skips obj's other blocks and records in that checkpoint or replay
	 * and goes on (the caller owns what obj now holds: it must not
	 * serve it as if the writes had landed); a negative errno, or no
	 * callback, aborts the journal (J12) or fails replay as any other
	 * error.  Such an error, were it to abort, would come back at every
	 * replay and keep the whole store from starting for one object. */
	int (*home_failed)(void *arg, uint64_t obj, uint64_t seq, int err);
	/* Optional, data=journal: n consecutive blocks of obj from block blk
	 * (iov[i] holds block blk + i's valid bytes, the last maybe short)
	 * are being written home by a checkpoint or a replay.  Called before
	 * the write is issued; the tail moves only after home_sync (or the
	 * syncfs) that follows, so whatever the caller writes here with the
	 * data (the iod's block checksums) is redone by replay after any
	 * crash in between.  An error is handled as a failed home write.
	 * sums, when not NULL: sums[i] = tw_crc32c(0) of block blk + i's
	 * whole 4096 bytes as journaled, so a full block (iov_len 4096)
	 * need not be read again; replay passes NULL. */
	int (*home_blocks)(void *arg, uint64_t obj, uint64_t blk,
			   const struct iovec *iov, int n,
			   const uint32_t *sums);
	/* Optional: jbd_read read len bytes of obj at off from home (fd,
	 * home size hsize) into buf, before patching in journal-resident
	 * blocks: a negative errno (the iod's -EBADMSG for a block whose
	 * checksum does not match) fails the read. */
	int (*home_check)(void *arg, uint64_t obj, int fd, uint64_t hsize,
			  uint64_t off, const void *buf, size_t len);
	void *arg;
};

/* Whether err (negative errno) from a home object's write, open or record
 * is the object's own (EFBIG, EINVAL, EPERM, EACCES, ENAMETOOLONG, ...:
 * retrying cannot help and other objects are fine), not the disk's or
 * the process's (EIO, ENOSPC, EDQUOT, EROFS, ENOMEM, EMFILE, ...) nor a
 * damaged home tree's (EISDIR, ENOTDIR: a directory where an object
 * belongs, which the operator must see before anything starts). */
bool jbd_obj_error(int err);

/* A synchronous I/O layer that replaces io_uring and plain pread/pwrite for
 * every journal and home operation the library issues (tests inject
 * faults and simulate power loss with it).  pwrite may write a prefix and
 * return its length; the library retries the rest.  NULL = real I/O. */
struct jbd_io_ops {
	long (*pwrite)(void *arg, enum jbd_io_kind kind, int fd,
		       const void *buf, size_t len, uint64_t off);
	int (*fsync)(void *arg, enum jbd_io_kind kind, int fd);
	long (*pread)(void *arg, enum jbd_io_kind kind, int fd, void *buf,
		      size_t len, uint64_t off);
	void *arg;
};

struct jbd_opts {
	const char *path;            /* journal file (created if missing);
	                              * kept, must live until jbd_close */
	uint64_t size;               /* bytes; 0 = JBD_DEFAULT_SIZE; an
	                              * existing journal keeps its size */
	enum jbd_mode mode;
	uint32_t commit_interval_ms; /* 0 = TW_COMMIT_INTERVAL_MS */
	uint64_t reserve;            /* bytes kept free at home (admission) */
	unsigned max_inflight;       /* io_uring requests in flight; 0 = 64 */
	bool buffered;               /* never use O_DIRECT (else batched
	                              * transactions go to the log with it and
	                              * checkpoints write runs of at least 16
	                              * full blocks home with it, where the
	                              * file system allows; FORMAT.md) */
	bool owner_drains;           /* the owner calls jbd_process() when
	                              * jbd_ready() before it sleeps ("Event
	                              * loop" above) */
	struct jbd_ops ops;
	const struct jbd_io_ops *io; /* test only; NULL = io_uring */
	bool test_replay_eio;        /* test only: every home write of a
	                              * replay fails with EIO, as a failing
	                              * disk's would (the drill of
	                              * twinfs-iod --quarantine-journal) */
};

/* What jbd_open replayed (also logged at INFO). */
struct jbd_replay_info {
	uint64_t txns;               /* committed transactions applied */
	uint64_t first_seq, last_seq;
	uint64_t blocks, records, skipped_cuts;
	bool torn_tail;              /* the scan stopped at a bad block */
};

/* Open (creating and zero-filling) the journal, replay it into the home
 * store through ops, reset the log (as version 2, whatever version it
 * was).  Replay stops at a torn tail, and at the unsynced tail a power
 * loss left in part (FORMAT.md J16, J17).  info may be NULL.  Returns 0
 * or -errno; -EBADMSG when the superblock is corrupt, -EPROTO for an
 * unknown version, -EINVAL for bad opts, -EBUSY when another open holds
 * the journal (flock), -ENOTRECOVERABLE when a bad transaction is
 * followed by one committed after it had been synced (damage, J16), the
 * journal untouched. */
int jbd_open(const struct jbd_opts *opts, struct jbd_replay_info *info,
	     struct jbd **out);

/* Clean close: close, sync and checkpoint everything (blocking), then free.
 * Returns 0, or -EIO when the journal was aborted (nothing more is written;
 * the next open replays). */
int jbd_close(struct jbd *j);

/* Test only: free everything without any further I/O (process death). */
void jbd_abandon(struct jbd *j);

/* ---- transactions (one handle = one request, atomic) ---- */

/* Start a request.  Returns 0 or -EIO (aborted). */
int jbd_begin(struct jbd *j, struct jbd_handle **out);

/* data=journal only: journal len bytes at off of obj (partial blocks are
 * read-modify-written from the newest content).  -ENOSPC when the home
 * file system lacks the space beyond the reserve (nothing journaled),
 * -E2BIG when the request would exceed a quarter of the journal, -EINVAL
 * in the other modes.  The handle stays usable after an error; commit or
 * cancel it. */
int jbd_write(struct jbd_handle *h, uint64_t obj, uint64_t off,
	      const void *buf, size_t len);

/* Sums of a write's data by journal block, so each byte is read once
 * (J5).  jbd_sums_count: the blocks [off, off + len) touches.  jbd_sums:
 * sums[k] = tw_crc32c(0) of buf's bytes in block off / 4096 + k (whole
 * blocks, the first and last maybe in part); returns tw_crc32c(0, buf,
 * len), combined from them.  Pure; any thread.  jbd_write_sums: jbd_write
 * with sums that jbd_sums took of this same buf (NULL: none); a block the
 * write covers whole takes its sum from them instead of summing it. */
size_t jbd_sums_count(uint64_t off, size_t len);
uint32_t jbd_sums(uint64_t off, const void *buf, size_t len, uint32_t *sums);
int jbd_write_sums(struct jbd_handle *h, uint64_t obj, uint64_t off,
		   const void *buf, size_t len, const uint32_t *sums);
/* jbd_write_sums with obj's size at home already known to the caller (0:
 * no home), from its own fstat on the owner's thread in the same call, so
 * nothing moved in between: one fstat per write instead of two. */
int jbd_write_home(struct jbd_handle *h, uint64_t obj, uint64_t off,
		   const void *buf, size_t len, const uint32_t *sums,
		   uint64_t home_size);

/* A metadata record for obj (len <= JBD_REC_MAX, copied).  cut is the size
 * obj has after this record when it truncates (0 for a delete), else
 * JBD_NO_CUT; the library uses it for reads, sizes and the replay rule R
 * (FORMAT.md (part 2)).  A cut must come before the handle's writes to obj
 * (-EINVAL otherwise). */
int jbd_record(struct jbd_handle *h, uint64_t obj, uint64_t cut,
	       const void *rec, size_t len);

/* data=journal: the last record of obj in this handle punches [off,
 * off+len) (the caller applies it at home at checkpoint).  Until then,
 * reads (jbd_overlay) and the read-modify-write of a later partial block
 * see zeros there in home and in every copy older than that record, so a
 * write after the punch never brings the punched bytes back.  -EINVAL
 * without such a record or in another mode. */
int jbd_hole(struct jbd_handle *h, uint64_t obj, uint64_t off, uint64_t len);

/* ordered/writeback: the caller has written data of obj in place (its
 * pwrite returned).  In ordered mode it is made durable before the commit
 * block is written (the fsync of ops.home_sync_fds's descriptors, else a
 * syncfs of home_fs_fd, else home_sync(obj)).  -EINVAL in journal mode. */
int jbd_inplace(struct jbd_handle *h, uint64_t obj);

#define JBD_COMMIT_SYNC  1u   /* call back when synced, not when closed */

/* Hand the handle to the running transaction (consumes h, even on error).
 * cb(arg, rc) runs once the transaction is closed (or synced with
 * JBD_COMMIT_SYNC).  A full journal delays the callback until the
 * checkpoint frees space; it never fails for space.  An empty handle is a
 * barrier: cb runs once everything committed before it is closed (synced
 * with JBD_COMMIT_SYNC).  Returns the transaction's sequence number (> 0)
 * or -errno (cb not called). */
typedef void (*jbd_done_cb)(void *arg, int rc);
int64_t jbd_commit(struct jbd_handle *h, unsigned flags, jbd_done_cb cb,
		   void *arg);

/* Admission for data the caller writes in place (ordered/writeback): 0 when
 * bytes more fit at home beyond the reserve and what the journal still has
 * to checkpoint, else -ENOSPC.  jbd_write does this itself. */
int jbd_admit(struct jbd *j, uint64_t bytes);

/* Drop a handle without journaling anything. */
void jbd_cancel(struct jbd_handle *h);

/* Close the running transaction and fdatasync the journal: cb once every
 * transaction committed before this call is synced.  cb may be NULL. */
int jbd_sync(struct jbd *j, jbd_done_cb cb, void *arg);

/* writeback mode's fsync of everything (of one file: jbd_sync_files): cb
 * once a syncfs of the home file system that started after every in-place
 * write committed before this call has finished (on a helper thread: the
 * owner's loop never waits for the disk), and the log is synced
 * (jbd_sync).  -EOPNOTSUPP where no background syncfs is possible (no
 * ops.home_fs_fd, the test I/O layer): the caller then syncs home itself
 * and calls jbd_sync. */
int jbd_sync_home(struct jbd *j, jbd_done_cb cb, void *arg);

/* writeback mode's fsync of one file, as ext3's: cb once fsync(2) of each
 * of fds[0..n) has returned (on a helper thread, in a batch with other
 * callers'), then the log is synced (jbd_sync).  fds are the caller's
 * descriptors of the file's data and of the directories its creation
 * changed, opened before the call, so they cover every in-place write
 * that returned before it; the journal closes them (the caller keeps them
 * only when the call fails).  Unlike jbd_sync_home, the rest of the home
 * file system's dirty data is not written: another writer's gigabytes do
 * not delay this fsync.  A failed fsync aborts the journal.  -EOPNOTSUPP
 * as jbd_sync_home; -EBUSY when the journal would hold more than
 * JBD_SYNC_FILES_MAX_FDS descriptors (the caller may use jbd_sync_home).  With n == 0 (nothing changed since the last call) cb
 * still waits for the batch that runs or waits, which may hold the file's
 * descriptors from an earlier call, then for the log sync. */
#define JBD_SYNC_FILES_MAX_FDS 256   /* held at once; more: -EBUSY */
int jbd_sync_files(struct jbd *j, const int *fds, size_t n, jbd_done_cb cb,
		   void *arg);
/* jbd_sync_files (and jbd_sync_home) will not say -EOPNOTSUPP. */
bool jbd_can_sync_files(const struct jbd *j);
/* A jbd_sync_files batch runs or waits: descriptors taken from the caller
 * may not be synced yet. */
bool jbd_sync_files_busy(const struct jbd *j);

/* Sync, then checkpoint every transaction (the log becomes empty): cb once
 * the tail has moved.  cb may be NULL. */
int jbd_checkpoint(struct jbd *j, jbd_done_cb cb, void *arg);
/* data=journal: space is short while data waits in the log.  Checkpoint
 * what is journaled now, without waiting for the log to fill: pending_home
 * (jbd_stats) counts every journaled byte as new home space, also
 * overwrites of blocks home holds already and blocks written again in
 * later transactions, so it may hold back far more than home will take.
 * A no-op when nothing new was journaled since the last call. */
void jbd_want_home(struct jbd *j);

/* ---- reads through the index of journal-resident blocks ---- */

/* Logical size of obj: the home size with every journal-resident write and
 * cut applied.  home_size: the object's size at home (0 when absent). */
uint64_t jbd_size(struct jbd *j, uint64_t obj, uint64_t home_size);

/* How many distinct blocks of obj the index holds (written, not yet
 * checkpointed home).  O(1); used to estimate allocation (st_blocks). */
uint64_t jbd_resident(struct jbd *j, uint64_t obj);

/* Whether block blk of obj is journal-resident; the first resident block
 * >= blk (UINT64_MAX when none; O(resident blocks of obj)); the smallest
 * cut of obj not yet checkpointed (JBD_NO_CUT when none: home bytes past
 * it are stale).  For SEEK_DATA/SEEK_HOLE: resident blocks are data. */
bool jbd_resident_has(struct jbd *j, uint64_t obj, uint64_t blk);
uint64_t jbd_resident_next(struct jbd *j, uint64_t obj, uint64_t blk);
uint64_t jbd_min_cut(struct jbd *j, uint64_t obj);

/* Patch buf (len bytes of obj at off, already read from home, zero-filled
 * past the home end) with the journal-resident blocks and pending cuts. */
void jbd_overlay(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
		 size_t len);
/* Whether jbd_overlay leaves [off, off + len) of obj as home has it (no
 * resident block, pending punch or pending cut in it): then what was
 * computed over those home bytes still holds after the overlay. */
bool jbd_overlay_none(struct jbd *j, uint64_t obj, uint64_t off, size_t len);

/* Read from home (pread on home_fd) and overlay: the newest content.
 * Returns the bytes up to the logical size (short at the end, 0 past it)
 * or -errno. */
long jbd_read(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
	      size_t len);
/* jbd_read with obj's home fd and size already known to the caller (fd -1:
 * no home), e.g. from its own fstat of the same read: one fstat per read
 * instead of two.  Same owner-thread rule, so nothing moves in between. */
long jbd_read_home(struct jbd *j, uint64_t obj, uint64_t off, void *buf,
		   size_t len, int fd, uint64_t hsize);

/* ---- events ---- */

int jbd_event_fd(const struct jbd *j);
/* Reap completions, advance commits/syncs/checkpoints, run callbacks. */
void jbd_process(struct jbd *j);
/* Whether a close or completions wait for jbd_process() without having
 * written the eventfd (jbd_opts.owner_drains).  Cheap: no system call. */
bool jbd_ready(const struct jbd *j);
/* jbd_process for the owner_drains call before the loop sleeps, when
 * jbd_ready() holds: the same work without reading the eventfd, which
 * stays readable if a completion wrote it, so its poll's jbd_process
 * clears it (a read that found nothing was one system call per request). */
void jbd_process_ready(struct jbd *j);
/* Time-driven work: sync after commit_interval. */
void jbd_tick(struct jbd *j);
/* Block until some progress was made (or nothing is pending); returns 0,
 * or 1 when idle.  Test and shutdown helper. */
int jbd_wait(struct jbd *j);

/* ---- state ---- */

struct jbd_stats {
	uint64_t nblocks;            /* journal size in blocks */
	uint64_t used_blocks;        /* between tail and head */
	uint64_t next_seq, closed_seq, synced_seq, checkpointed_seq;
	uint64_t commits, syncs, checkpoints, full_waits;
	uint64_t log_blocks;         /* blocks written to the log, ever */
	uint64_t direct_txns;        /* transactions written with O_DIRECT */
	uint64_t direct_home_writes; /* checkpoint writes home by O_DIRECT */
	uint64_t home_syncfs;        /* background syncfs runs started
	                              * (checkpoints, ordered closes,
	                              * jbd_sync_home) */
	uint64_t home_fsyncs;        /* batches of fsyncs started
	                              * (jbd_sync_files, ordered commits) */
	uint64_t home_fsync_fds;     /* and the descriptors they fsynced */
	bool direct_home;            /* long runs may go home by O_DIRECT:
	                              * the log does, and the ring holds its
	                              * O_DIRECT descriptor */
	uint64_t direct_fallbacks;   /* O_DIRECT writes refused (EINVAL) and
	                              * redone through the page cache */
	uint64_t inline_writes;      /* lone small log appends done with
	                              * pwritev, not the ring (jbd_io.c) */
	uint64_t home_inflight_max;  /* most checkpoint home writes issued
	                              * and not yet completed at once, ever
	                              * (queued or in the kernel) */
	uint64_t tail, head;         /* log block numbers */
	uint64_t pending_home;       /* data=journal: bytes in the log not
	                              * yet home (admission counts them as
	                              * used) */
	uint64_t copy_bytes;         /* data=journal: the 4 KiB block copies
	                              * held in memory, from jbd_commit until
	                              * their transaction is checkpointed
	                              * (at most the log, plus unlogged_bytes;
	                              * docs/OPERATIONS.md "Memory") */
	uint64_t unlogged_bytes;     /* of copy_bytes, those of transactions
	                              * not yet written to the log (waiting
	                              * for log space when it is full): the
	                              * owner bounds them (iod: a quarter of
	                              * the journal) by reading no more
	                              * requests */
	uint64_t cache_bytes;        /* the block cache's slabs: copy_bytes,
	                              * escaped copies in flight and the
	                              * spare blocks (jbd_drop_cache) */
	uint64_t cache_free_bytes;   /* of cache_bytes, the slabs the last
	                              * jbd_free_cache marked free (the kernel
	                              * may have taken their pages); 0 again
	                              * once any block is taken */
	int aborted;                 /* 0 or -EIO */
};
void jbd_stats(const struct jbd *j, struct jbd_stats *st);
/* Give back the freed 4 KiB blocks the journal keeps for its next writes
 * (not counted in copy_bytes; with the copies, never more than copy_bytes
 * was at its peak, plus a slab), for an owner whose process is idle.
 * jbd_free_cache marks every slab whose blocks are all spare free
 * (MADV_FREE): still mapped, its pages are the kernel's to take when it
 * needs memory, and writes that come before it does reuse them without a
 * fault.  jbd_drop_cache unmaps those slabs: for an owner about to return
 * its free memory (malloc_trim) after a longer rest. */
void jbd_free_cache(struct jbd *j);
void jbd_drop_cache(struct jbd *j);
/* Time every close (its log writes: start to CLOSED) into commit and
 * every checkpoint (start to the tail moved) into checkpoint, seconds;
 * either may be NULL (untimed).  Both complete on the owner's thread, so
 * plain histograms do (metrics.h); they must outlive j or the next
 * call. */
struct tw_hist;
void jbd_set_latency_hists(struct jbd *j, struct tw_hist *commit,
			   struct tw_hist *checkpoint);

/* Sticky abort: 0, or -EIO after an I/O error on the journal. */
int jbd_aborted(const struct jbd *j);

/* The owner's own fsync of in-place data (writeback mode's synchronous
 * write, or its blocking sync where no helper thread runs) failed with
 * rc (what: for the log line): abort the journal (J12) exactly as a
 * failed fsync inside the library does, since the kernel may have
 * dropped the dirty pages and a later fsync that succeeds proves
 * nothing. */
void jbd_abort_home(struct jbd *j, int rc, const char *what);

/* Test only (failure drills on real daemons): the next write submitted to
 * the journal file completes with -EIO without reaching the disk, exactly
 * as a failing disk would make it, so the journal aborts (J12) through its
 * ordinary error path.  Works with io_uring and with a jbd_io_ops layer. */
void jbd_inject_log_eio(struct jbd *j);

/* Test only: the next write done with O_DIRECT is reported as refused
 * (err -EINVAL: it and every later one go through the page cache) or, with
 * err 0, as short by all but its first block (the rest goes through the
 * page cache), whatever the kernel did. */
void jbd_inject_direct_fault(struct jbd *j, int err);

#endif
