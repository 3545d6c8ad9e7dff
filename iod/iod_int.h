/* iod_int.h - internal interface of twinfs-iod (never installed, used only
 * inside iod/).
 *
 * Modules:
 *   store.c   subfiles on the local file system: paths, xattrs, open and
 *             close, fd cache, deferred unlinks (the "home" side; no
 *             network); its neighbours store_id.c (the data directory's
 *             identity and flag files), store_sync.c (durability at home)
 *             and store_scan.c (the listing)
 *   store_journal.c  every mutation through the block journal (DIR/journal),
 *             reads/sizes/listing/checksums through its index, records
 *   store_intent.c   the write-intent log (marked regions, clearing)
 *   intent_list.c    a sorted copy of its marks (resync, INTENTS)
 *   store_space.c    fallocate, hole punching, SEEK_DATA/SEEK_HOLE
 *   store_lost.c     subfiles whose journaled changes could not go home
 *   ra.c      read-ahead of a twin's every-other-row reads (ra.h, pure)
 *   twin.c    the server-driven twin protocol (primary applies, forwards)
 *   stale_fwd.c      forwards the twin refused as stale, until healed
 *   resync.c  the source side of a twin's resync (copy, live writes)
 *   resync_cursor.c  where an interrupted resync copy may resume
 *   mgr.c     registration with mgrd and the cluster map
 *   vote.c    a voter of the mgrd pair's election; term fencing of mgrd
 *   server.c  the listener, HELLO, who may send what, dispatch
 *   main.c    command line, signals, the loop
 *
 * Everything runs on one thread, the libuv loop thread.  That single thread
 * is what makes the twin ordering invariant hold (twin.c, invariant T1).
 */
#ifndef TWINFS_IOD_INT_H
#define TWINFS_IOD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include <uv.h>

#include "common.h"
#include "spin.h"
#include "lease.h"
#include "mgrlist.h"
#include "raid.h"
#include "wire.h"

/* ------------------------------------------------------------------ store */

#define IOD_MAX_COLUMNS      R0_MAX_STRIPE_COUNT   /* columns are 0..31 */
#define IOD_MAX_OFFSET       ((uint64_t)INT64_MAX) /* off + len must stay below */
#define IOD_FD_CACHE_DEFAULT 256
/* Descriptors kept out of max_connections (tw_fd_budget): the subfile
 * cache, the journal's and a checkpoint's (one per object it writes home,
 * plus up to 1024 O_DIRECT ones: journal/jbd_checkpoint.c), peers. */
#define IOD_FD_RESERVE       (IOD_FD_CACHE_DEFAULT + 2048u)
#define IOD_UUID_LEN         16
#define IOD_CLUSTER_MAX      64                    /* as tw_conf.cluster_name */
/* Checksum regions: bounds on region_size and on the number of regions one
 * reply may carry (4 bytes each, well under WIRE_MAX_MSG). */
#define IOD_CSUM_REGION_MIN  (4u << 10)
#define IOD_CSUM_REGION_MAX  (64u << 20)
#define IOD_CSUM_MAX_REGIONS (200u * 1000u)
/* An ordered checksum (Checksum.both) covers at most this many bytes per
 * call: it runs on the loop of both twins, ahead of demand I/O. */
#define IOD_CSUM_BOTH_BYTES  (16u << 20)
/* ... and spans at most this many bytes of the subfile: holes are not
 * read, so a sparse subfile of terabytes is verified in few calls. */
#define IOD_CSUM_BOTH_SPAN   (4ull << 30)
/* A plain CHECKSUM reads at most this many bytes of data per call (holes
 * are free): it runs synchronously on the loop, and without a bound one
 * call could ask for IOD_CSUM_MAX_REGIONS regions of 64 MiB, terabytes.
 * A reply that stops early carries fewer regions; callers go on from
 * first_region + n_crcs (proto/FORMAT.md "Checksums"). */
#define IOD_CSUM_PLAIN_BYTES (64u << 20)
#define IOD_STALE_MAX        64u

struct iod_store;
struct jbd_io_ops;

/* stale_fwd.c: forwards the twin refused as stale, until a mutation that
 * reached both twins heals what each may have left different (see the
 * file's header).  Pure. */
enum iod_stale_kind {
	IOD_STALE_RANGE,           /* [off, off + len) of (ino, column) */
	IOD_STALE_TRUNC,           /* a truncate of (ino, column) to off */
	IOD_STALE_DELETE,          /* a delete of ino's columns `cols` */
};
/* What a refused range may have left different, and what a mutation that
 * reached both twins makes equal again (IOD_STALE_RANGE's `needs`). */
#define IOD_STALE_CONTENTS 1u      /* the bytes */
#define IOD_STALE_SIZE     2u      /* the subfile's size (a write extends) */
#define IOD_STALE_ALLOC    4u      /* blocks allocated at home */
struct iod_stale_fwd {
	uint8_t kind;              /* enum iod_stale_kind */
	uint8_t needs;             /* RANGE: IOD_STALE_* */
	uint64_t ino;
	uint32_t column;           /* RANGE, TRUNC */
	uint32_t cols;             /* DELETE: bit c = column c (0..31) */
	uint64_t off, len;         /* RANGE: bytes; TRUNC: off = the size */
	uint64_t seq;              /* the refused forward's place in our order */
	uint64_t due_ms;           /* reported as missed from then on */
};
struct iod_stale_list {
	struct iod_stale_fwd e[IOD_STALE_MAX];
	uint32_t n;
};
/* 0, or -ENOSPC when IOD_STALE_MAX entries wait already. */
int iod_stale_add(struct iod_stale_list *l, const struct iod_stale_fwd *f);
/* A WRITE or FALLOCATE of [off, off + len) that gives `provides`
 * (IOD_STALE_*) reached both twins, applied here after every entry whose
 * seq is below `seq` (only those are healed). */
void iod_stale_heal_range(struct iod_stale_list *l, uint64_t seq,
			  uint64_t ino, uint32_t column, uint64_t off,
			  uint64_t len, uint8_t provides);
/* ... a TRUNCATE to size; ... a DELETE of columns `cols` (bit mask). */
void iod_stale_heal_trunc(struct iod_stale_list *l, uint64_t seq,
			  uint64_t ino, uint32_t column, uint64_t size);
void iod_stale_heal_delete(struct iod_stale_list *l, uint64_t seq,
			   uint64_t ino, uint32_t cols);
/* The first entry due at now_ms, or NULL. */
const struct iod_stale_fwd *iod_stale_due(const struct iod_stale_list *l,
					  uint64_t now_ms);
void iod_stale_clear(struct iod_stale_list *l);

/* The layout recorded in a subfile's xattr (a copy of the file's layout at
 * the subfile's creation). */
struct iod_sub_layout {
	uint32_t stripe_size;
	uint32_t stripe_count;
	uint32_t n_groups;
	uint32_t groups[IOD_MAX_COLUMNS];
};

struct iod_sub_stat {
	uint64_t size;      /* bytes */
	uint64_t blocks;    /* 512-byte blocks allocated (st_blocks) */
	uint64_t trunc_gen; /* from the xattr; 0 when absent */
	bool exists;
};

struct iod_sub_info {
	uint64_t ino;
	uint32_t column;
	uint64_t size;
	uint64_t blocks;
};

struct iod_store_opts {
	const char *dir;       /* data directory (created if missing) */
	uint32_t iod_id;
	const char *cluster;   /* cluster name, < IOD_CLUSTER_MAX bytes */
	unsigned max_fds;      /* fd cache size; 0 = IOD_FD_CACHE_DEFAULT */
	/* The block journal DIR/journal (docs/ARCHITECTURE.md "Journal"): */
	uint64_t journal_size;         /* 0 = JBD_DEFAULT_SIZE */
	int journal_mode;              /* enum tw_journal_mode */
	uint32_t commit_interval_ms;   /* 0 = 5 s */
	uint64_t reserve;              /* home bytes kept free; 0 = default */
	/* Called once, on the loop thread, when the journal aborts (J12):
	 * from then on every mutation fails with -EIO.  May be NULL. */
	void (*on_abort)(void *arg);
	void *abort_arg;
	/* Keep DIR/journal aside (DIR/journal.quarantined-<unix time>) and
	 * start with a new journal and a new identity (UUID), as a replaced
	 * disk: mgrd rebuilds the iod in full from its twin (twinfs-iod
	 * --quarantine-journal). */
	bool quarantine_journal;
	/* Measurement only (TWINFS_BENCH_NO_CSUM=1, test/bench/csum_cost.sh):
	 * no block checksums and no READ reply CRCs, as before them; the
	 * next normal start computes every checksum again (store_csum.c C3). */
	bool bench_no_csum;
	/* Tests only (TWINFS_TEST_REPLAY_EIO=1 with TWINFS_TEST_FAULTS=1):
	 * replay fails with EIO (journal.h jbd_opts.test_replay_eio). */
	bool test_replay_eio;
	/* Tests only: the journal's synchronous I/O layer (fault injection,
	 * journal.h struct jbd_io_ops); NULL = io_uring. */
	const struct jbd_io_ops *test_io;
};

#define IOD_MAX_INO          ((1ull << 56) - 1)    /* journal ids: ino << 8 */
#define IOD_RESERVE_DEFAULT  (64ull << 20)
#define IOD_REGION_SHIFT     20                    /* write-intent: 1 MiB */

/* Open the store: create DIR and DIR/subfiles if missing, check or create
 * DIR/twinfs-id, open the journal DIR/journal and replay it (so nothing is
 * served before replay has finished), then rebuild the write-intent set.
 * Refuses (-EINVAL, with an error log naming both) a directory that
 * belongs to another iod id or cluster, and (-EBADMSG) one whose identity
 * file or journal superblock is corrupt.  Returns 0 and sets *out, or
 * -errno. */
int iod_store_open(const struct iod_store_opts *opts, struct iod_store **out);
/* Clean close: close, sync and checkpoint the journal (blocking), close
 * every cached fd, free the store. */
void iod_store_close(struct iod_store *s);
/* Test only: free everything without any further I/O (process death). */
void iod_store_abandon(struct iod_store *s);
/* The data directory's 16-byte UUID. */
const uint8_t *iod_store_uuid(const struct iod_store *s);
/* Whether the identity file was created by this open (a new directory). */
bool iod_store_is_new(const struct iod_store *s);

/* The journal's event loop hooks (journal.h "Event loop"): poll the fd
 * for UV_READABLE and call iod_store_process; call
 * iod_store_process_ready before the loop sleeps whenever
 * iod_store_ready (the journal's owner_drains: a
 * request's transaction is closed there, after its handler returned,
 * and an inline close completes there without a wakeup); call
 * iod_store_tick a few times per second.  iod_store_wait blocks until
 * some progress was made (returns 1 when idle): tests and shutdown. */
int iod_store_event_fd(const struct iod_store *s);
bool iod_store_ready(const struct iod_store *s);
void iod_store_process(struct iod_store *s);
void iod_store_process_ready(struct iod_store *s);
void iod_store_tick(struct iod_store *s);
int iod_store_wait(struct iod_store *s);
/* 0, or -EIO once the journal has aborted (sticky). */
int iod_store_aborted(const struct iod_store *s);
/* The journal's counters (journal.h). */
struct jbd_stats;
void iod_store_journal_stats(const struct iod_store *s, struct jbd_stats *st);
/* Checkpoint what the journal holds now (jbd_want_home; data=journal). */
void iod_store_journal_home(struct iod_store *s);
/* Mark the journal's spare blocks free (jbd_free_cache), or unmap them
 * (jbd_drop_cache). */
void iod_store_journal_free_cache(struct iod_store *s);
void iod_store_journal_drop_cache(struct iod_store *s);
/* Time the journal's closes and checkpoints into these histograms
 * (journal.h jbd_set_latency_hists; NULL, NULL stops). */
struct tw_hist;
void iod_store_journal_hists(struct iod_store *s, struct tw_hist *commit,
			     struct tw_hist *checkpoint);
/* Subfile descriptors held in the fd cache now. */
unsigned iod_store_fds_cached(const struct iod_store *s);
/* Test only (TWINFS_TEST_FAULTS, main.c): the next journal write fails
 * with EIO, which aborts the journal (journal.h jbd_inject_log_eio). */
void iod_store_inject_journal_eio(struct iod_store *s);

/* Block checksums (store_csum.c, docs/ARCHITECTURE.md "Integrity"):
 * iod_store_read fails with -EBADMSG when a home block it read does not
 * match its checksum (bad_off: the first such block of the last read).
 * The counters are what metrics.c exports; heal.c keeps the last three. */
struct iod_csum_stats {
	uint64_t checked;          /* home blocks checked on reads */
	uint64_t mismatches;       /* ... found not matching */
	uint64_t bad_off;          /* the last read's first bad block */
	uint64_t read_mismatches;  /* reads that found one */
	uint64_t healed;           /* blocks rewritten from the twin */
	uint64_t unhealed;         /* blocks a read found bad on both copies */
	uint64_t wire_mismatches;  /* WRITE data refused (Write.data_crc) */
	bool enabled;              /* checked here (data=journal) */
	bool bench_off;            /* iod_store_opts.bench_no_csum */
};
/* The regions (absolute indexes) of the last iod_store_checksum call that
 * hold a block failing its checksum at home, at most IOD_CSUM_BAD_MAX:
 * their CRCs cover the bytes as they are on disk (twinfsctl verify names
 * the twin whose copy is bad). */
#define IOD_CSUM_BAD_MAX 64u
size_t iod_store_checksum_bad(const struct iod_store *s,
			      const uint32_t **regions);
/* Refreshed from the store at each call. */
struct iod_csum_stats *iod_store_csum_stats(struct iod_store *s);
/* Re-check block blk of subfile (ino, column) at home: -EBADMSG when it
 * fails; 0 when it matches, is unchecked or is journal-resident. */
int iod_store_csum_verify(struct iod_store *s, uint64_t ino, uint32_t column,
			  uint64_t blk);
/* iod_store_read, but a home block failing its checksum is read as it is
 * on disk (no -EBADMSG): heal.c takes each block from where it checks. */
long iod_store_read_unchecked(struct iod_store *s, uint64_t ino,
			      uint32_t column, uint64_t off, size_t len,
			      uint8_t **out, struct iod_sub_stat *st);

/* Subfiles held as lost (store_lost.c): their journaled changes could not
 * be brought home (a checkpoint or replay failed for a reason of the
 * subfile's own), so they are not served here until a delete (a full
 * resync's) replaces them.  n_lost counts them; lost_news grows with every
 * one added (the daemon reports to mgrd when it moves); lost_first names
 * one (false when none). */
size_t iod_store_n_lost(const struct iod_store *s);
uint64_t iod_store_lost_news(const struct iod_store *s);
bool iod_store_lost_first(const struct iod_store *s, uint64_t *ino,
			  uint32_t *column);

/* The largest size a subfile may reach here: the home file system's
 * limit, probed at open.  Every write, truncate, fallocate and punch whose
 * end passes it is refused with -EFBIG before anything is journaled. */
uint64_t iod_store_max_size(const struct iod_store *s);

/* Validation shared by the server and the store: column < 32, and
 * off + len <= IOD_MAX_OFFSET without overflow.  0 or -EINVAL. */
int iod_check_range(uint32_t column, uint64_t off, uint64_t len);

/* Completion of a mutation: rc is 0 once the request is in a CLOSED
 * journal transaction (survives the death of the process), or SYNCED when
 * the request asked for it; or a negative errno (-EIO after an abort).
 * Runs from iod_store_process/iod_store_wait, never from inside the call
 * that started the request.  As in libuv: when the call returns an error
 * the callback is never called. */
typedef void (*iod_store_cb)(void *arg, int rc);

/* Write len bytes at off of subfile (ino, column), creating it (with its
 * xattr recording `layout`, which must be non-NULL for a creation) on the
 * first write.  A trunc_gen older than the subfile's is refused with
 * -ESTALE; a newer one is recorded.  The write, its creation, its
 * trunc_gen and its write-intent mark are ONE journal transaction's worth
 * (one handle): all or nothing after a crash.  sync: cb only once synced.
 * *st (if non-NULL) holds the logical size and blocks after the write.
 * buf is copied (journal mode) or written in place before the return. */
int iod_store_write(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, const void *buf, size_t len,
		    const uint32_t *sums,
		    uint64_t trunc_gen, const struct iod_sub_layout *layout,
		    bool sync, struct iod_sub_stat *st, iod_store_cb cb,
		    void *arg);

/* A resync's copy of blocks whose only readable copy fails its checksum
 * (docs/ARCHITECTURE.md "Integrity"): written as iod_store_write does,
 * then, in a second handle of the same call, marked bad (store_csum.c C4),
 * so every read of them fails with -EBADMSG as on the source, until new
 * content replaces them.  off block-aligned, len > 0; data=journal only
 * (-EOPNOTSUPP otherwise).  cb runs once the mark's transaction closed. */
int iod_store_write_bad(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, const void *buf, size_t len,
			uint64_t trunc_gen, const struct iod_sub_layout *layout,
			struct iod_sub_stat *st, iod_store_cb cb, void *arg);

/* Read up to len bytes at off into a new buffer (*out, caller frees; NULL
 * when 0 bytes), through the journal's index: the newest acknowledged
 * content.  Returns the number of bytes (short at the subfile's end, 0 for
 * an absent subfile) or -errno; *st gets the subfile's logical size. */
long iod_store_read(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, size_t len, uint8_t **out,
		    struct iod_sub_stat *st);
/* iod_store_read, and *crc the CRC32C of the bytes returned (0 bytes:
 * 0), mostly combined from the block checksums the read verified
 * instead of summed again (a READ's data_crc, proto/FORMAT.md
 * "Integrity"). */
long iod_store_read_crc(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, size_t len, uint8_t **out,
			struct iod_sub_stat *st, uint32_t *crc);

/* Cut (or extend with a hole) subfile (ino, column) to size and record
 * trunc_gen.  An absent subfile is left absent (cb still runs, with 0, as a
 * barrier).  A trunc_gen older than the subfile's is refused with -ESTALE. */
int iod_store_truncate(struct iod_store *s, uint64_t ino, uint32_t column,
		       uint64_t size, uint64_t trunc_gen,
		       struct iod_sub_stat *st, iod_store_cb cb, void *arg);

/* fallocate(2) without changing size or contents: allocate [off, off+len)
 * of subfile (ino, column) at home, creating the subfile (with `layout`,
 * non-NULL) if absent.  -ENOSPC (nothing allocated) when the home file
 * system cannot hold len bytes beyond the reserve.  In data=journal the
 * creation is journaled and checkpointed first (the subfile must exist at
 * home to hold the allocation).  cb once allocated; *st as for a write. */
int iod_store_fallocate(struct iod_store *s, uint64_t ino, uint32_t column,
			uint64_t off, uint64_t len, uint64_t trunc_gen,
			const struct iod_sub_layout *layout,
			struct iod_sub_stat *st, iod_store_cb cb, void *arg);

/* Punch a hole: [off, off+len) reads as zeros, its blocks are freed, the
 * size never changes; the regions are marked in the write-intent log in
 * the same transaction (resync copies them).  data=journal: a punch record
 * after every earlier journaled block of the subfile, so checkpoint and
 * replay can never bring older blocks back over the hole; cb runs once the
 * record has been checkpointed (the hole is at home: SEEK sees it).
 * ordered/writeback: punched in place, then journaled like an in-place
 * write.  An absent subfile stays absent (cb still runs).  *st is the
 * state after the punch (sampled when cb runs in data=journal).  zero
 * (FALLOC_FL_ZERO_RANGE): the punched range is allocated again at home
 * before cb runs (unwritten blocks read as zeros). */
int iod_store_punch(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t off, uint64_t len, uint64_t trunc_gen, bool zero,
		    struct iod_sub_stat *st, iod_store_cb cb, void *arg);

/* SEEK_DATA (whence 3) or SEEK_HOLE (4) from off in subfile (ino,
 * column) as a reader sees it: journal-resident blocks are data, home
 * bytes past a pending cut are not.  Returns 1 and sets *res, or 0 when
 * there is none (no data at or after off; off at or past the end), or
 * -errno.  *size gets the subfile's logical size. */
int iod_store_seek(struct iod_store *s, uint64_t ino, uint32_t column,
		   uint64_t off, int whence, uint64_t *res, uint64_t *size);

/* Delete subfiles (ino, columns[0..n-1]); n = 0: every column of ino.
 * Absent ones are fine (a named one is journaled as deleted unasked). */
int iod_store_delete(struct iod_store *s, uint64_t ino,
		     const uint32_t *columns, size_t n, iod_store_cb cb,
		     void *arg);

/* cb once everything acknowledged so far is synced (ino 0: every
 * subfile; the journal is one log, so ino only matters in writeback mode,
 * where the subfiles of ino are fsynced in place first: those of the
 * columns in the bit mask `columns`, every column when 0). */
int iod_store_fsync(struct iod_store *s, uint64_t ino, uint32_t columns,
		    iod_store_cb cb, void *arg);

/* Logical size, blocks and trunc_gen of a subfile (exists = false when
 * absent).  Until a checkpoint, blocks counts journal-resident blocks
 * past the home size as allocated (an estimate). */
int iod_store_stat(struct iod_store *s, uint64_t ino, uint32_t column,
		   struct iod_sub_stat *st);

/* Up to max subfiles whose (ino, column) is greater than (after_ino,
 * after_column), in ascending (ino, column) order, as a reader sees them
 * (created or deleted in the journal but not yet at home included).
 * Returns the count and sets *eof when no further subfile exists. */
int iod_store_list(struct iod_store *s, uint64_t after_ino,
		   uint32_t after_column, uint32_t max,
		   struct iod_sub_info *out, bool *eof);

/* CRC32C of each region_size bytes of the subfile's contents as a reader
 * sees them (through the journal), the last region may be short: regions
 * first_region.. , at most max_regions of them (0: all), and none after
 * the one during which max_data bytes (0: no limit) were read: regions
 * without data (holes) are not read and cost nothing.  Returns the
 * number of regions and sets *crcs (new array, caller frees; NULL when 0)
 * and *size (the whole subfile's), or -errno (-EINVAL for a bad
 * region_size, -E2BIG when there would be more than IOD_CSUM_MAX_REGIONS).
 * An absent subfile has size 0 and no regions.  Synchronous: the caller
 * bounds the work with max_regions. */
long iod_store_checksum(struct iod_store *s, uint64_t ino, uint32_t column,
			uint32_t region_size, uint32_t first_region,
			uint32_t max_regions, uint64_t max_data,
			uint64_t *size, uint32_t **crcs);

/* ---- write-intent log (store_journal.c) ----
 *
 * A 1 MiB region of a subfile is marked in the same transaction as a write
 * that touches it, and cleared once both twins have synced it
 * (docs/ARCHITECTURE.md "Twins").  Clearing is two steps:
 * iod_store_intent_epoch() returns a token and starts a new generation; once a
 * sync of this iod AND of its twin, both started after the call, have
 * completed, iod_store_intent_clear(token) journals the clearing of every
 * region not touched since (a region written meanwhile stays marked). */
uint64_t iod_store_intent_epoch(struct iod_store *s);
int iod_store_intent_clear(struct iod_store *s, uint64_t token);
/* The twin missed a write of [off, off + len) (len UINT64_MAX: anything of
 * the subfile, e.g. a truncate): its regions are never cleared by a cycle,
 * only by the twin's resync (a completed copy releases the pins,
 * resync.c).  In memory only: after a restart of this iod, mgrd's
 * journaled needs_resync of the twin keeps the cycle from running
 * (twin.c) while the marks themselves are persisted. */
int iod_store_intent_pin(struct iod_store *s, uint64_t ino, uint32_t column,
			 uint64_t off, uint64_t len);
/* Whether the twin missed a write of ours (a pin) since our last resync
 * of it completed: then a resumed resync replays the marks before its
 * cursor (resync.c).  Durable (DIR/twinfs-replay-owed, store.c): set by
 * every pin, cleared when a resync run completes or one from the start (no
 * cursor) begins.  Setting it syncs the data directory once. */
bool iod_store_replay_owed(const struct iod_store *s);
int iod_store_set_replay_owed(struct iod_store *s, bool owed);
/* A resync run carried what was owed: clear the flag, and the live note
 * (iod_store_note_resync_live) unless keep_live (a forward to the twin is
 * still unanswered: a restart must still owe the replay for it). */
int iod_store_replay_paid(struct iod_store *s, bool keep_live);
/* ... and the pins (in memory) do not name everything the twin may lack,
 * the marks do: owed since before this start of the iod, or a pin could
 * not be recorded (iod_store_owe_marks).  Otherwise the pinned regions
 * are exactly what it lacks. */
bool iod_store_replay_owed_marks(const struct iod_store *s);
/* A pin could not be recorded: owe the replay of every mark. */
void iod_store_owe_marks(struct iod_store *s);
/* Before applying a live write that is forwarded to a resyncing twin: a
 * restart that finds this noted (a forward may have died unanswered) sets
 * the replay flag.  Cleared with it.  Syncs the data directory once. */
int iod_store_note_resync_live(struct iod_store *s);
/* The twin's resync copied everything: pinned marks become ordinary ones
 * (touched now), cleared by the next cycle once both twins synced; what
 * was only pinned goes. */
void iod_store_intent_unpin_all(struct iod_store *s);
/* Regions marked now; count = UINT64_MAX: the whole subfile (the
 * persisted list overflowed).  pinned: the twin missed a write there since
 * this iod started (pins live in memory: after a restart they are plain
 * marks).  Order unspecified.  cb returns 0 to go on. */
typedef int (*iod_intent_cb)(void *arg, uint64_t ino, uint32_t column,
			     uint64_t first_region, uint64_t count,
			     bool pinned);
int iod_store_intents(struct iod_store *s, iod_intent_cb cb, void *arg);
/* Number of marked regions (an "all" subfile counts once). */
uint64_t iod_store_n_marked(const struct iod_store *s);

/* statvfs of the data directory's file system as writes see it: f_bavail
 * without the admission reserve, f_bfree and f_bavail without the data the
 * journal still has to write home. */
int iod_store_statfs(struct iod_store *s, struct statvfs *out);
/* Why a write found no room, for its log line: "N MiB free in DIR: M MiB
 * kept in reserve, P MiB of journaled data not yet home". */
void iod_store_space_why(struct iod_store *s, char *buf, size_t len);

/* The layout recorded for a subfile (pending create record, else its
 * xattr).  -ENOENT when absent, -EBADMSG when it has no valid xattr. */
int iod_store_layout(struct iod_store *s, uint64_t ino, uint32_t column,
		     struct iod_sub_layout *out);

/* Relative path of a subfile under DIR ("subfiles/ab/cd/<ino>.<col>"),
 * exposed for tests.  Returns the length or -ENAMETOOLONG. */
int iod_store_subpath(uint64_t ino, uint32_t column, char *buf, size_t len);

/* ---------------------------------------------------------- the daemon */

/* One iod as the cluster map describes it (mgr.c keeps it current). */
struct iod_map_iod {
	bool present;
	uint32_t group;
	uint32_t twin_index;
	char host[TW_HOST_MAX];
	int port;
	int state;                 /* TWINFS__IOD_STATE__* == enum r1_state */
	bool needs_resync;
	uint64_t incarnation;
};

struct iod_map {
	uint64_t epoch;
	uint32_t n_groups;
	uint64_t max_subfile_size; /* the cluster's limit (0: not known) */
	struct iod_map_iod iods[TW_MAX_IODS + 1];   /* by id; [0] unused */
};

/* What a connection's HELLO said (wire_conn_set_data). */
struct iod_conn {
	bool hello_ok;
	int role;                  /* TWINFS__ROLE__* */
	uint32_t node_id;
	uint64_t session;          /* ROLE_CLIENT: iod_conn_session() */
	/* ROLE_MGRD (vote.c): its term, and the list of mgrd connections */
	uint64_t mgrd_term;
	struct wire_conn *conn;    /* set while on the list */
	struct iod_conn *mnext, *mprev;
};

/* What a client proved with a ticket (server.c key_fn; wire_conn_principal):
 * the ticket's contents (proto/FORMAT.md "Tickets"). */
struct iod_ticket_principal {
	struct wire_ticket t;
};

/* The mgrd session a client connection is bound to: its ticket's, or
 * with no cluster secret the session its HELLO named; 0 for other roles. */
uint64_t iod_conn_session(const struct wire_conn *c);

struct iod {
	uv_loop_t *loop;
	const struct tw_conf *conf;
	const struct tw_conf_iod *me;
	uint32_t id;
	uint32_t twin_id;          /* the other iod of our group (config) */
	uint64_t incarnation;      /* random per process start */
	struct iod_store *store;
	struct wire_server *server;
	uint8_t ktkt[WIRE_TICKET_KEY_LEN];   /* opens tickets: with a secret */
	bool no_mgr;               /* test mode: no mgrd, map from the config */
	bool closing;

	/* mgr.c */
	struct iod_map map;
	bool registered;           /* serve data requests only when true */
	bool ever_registered;
	bool reg_inflight, map_inflight;
	struct wire_peer *mgr_peer;
	struct tw_mgrlist mgrs;    /* the config's mgrds; cur: the one tried */
	uint64_t mgr_hold_ms;      /* no new attempt before (mgrlist.h) */
	uv_timer_t mgr_timer;
	bool mgr_timer_init;
	uint64_t report_epoch;     /* last MSG_REPORT about the twin */
	uint64_t report_ms;
	bool missed_unheard;       /* twin.c pinned a write the twin lacks;
				    * mgrd has not made it resync yet */
	uint64_t missed_since_ms;  /* when missed_unheard was set */
	uint64_t lost_reported;    /* iod_store_lost_news at the last report
	                            * of lost subfiles, and its time */
	uint64_t lost_report_ms;
	/* Capabilities (server.c): K_cap of the cluster secret; caps are
	 * demanded of clients only when has_cap_key. */
	uint8_t cap_key[WIRE_CAP_KEY_LEN];
	bool has_cap_key;
	/* Fencing: mgrd's expired sessions, sorted, and their list's gen. */
	uint64_t fenced[WIRE_FENCE_MAX];
	uint32_t n_fenced;
	uint64_t fence_gen;

	/* mem.c: connections held while too much write data waits */
	struct wire_conn **held;   /* each referenced */
	size_t n_held, cap_held;
	uint64_t n_holds;          /* connections held, ever (metrics) */
	uint64_t mem_peak;         /* most copies + forwards since a trim */
	uint64_t n_trims;          /* malloc_trim calls, ever */
	uint64_t mem_commits;      /* jbd_stats commits at mem_commit_ms */
	uint64_t mem_commit_ms;    /* when a commit was last seen (or the
				    * idle checkpoint started) */
	uint64_t mem_commit_seen_ms; /* when a commit was last seen */

	/* main.c: the journal's loop hooks */
	uv_poll_t jnl_poll;
	uv_prepare_t jnl_prepare;   /* iod_store_ready before each sleep */
	uv_timer_t jnl_timer;
	bool jnl_handles;

	/* twin.c */
	struct wire_peer *twin_peer;
	uv_timer_t intent_timer;   /* write-intent clearing cycle */
	bool intent_timer_init;
	bool intent_busy;
	char twin_host[TW_HOST_MAX];
	int twin_port;
	uint64_t n_forwarded;      /* requests forwarded, for logs */
	uint64_t fwd_seq;          /* mutations ordered here (stale_fwd.c) */
	uint64_t n_pins;           /* mutations the twin did not apply */
	uint64_t fwd_unanswered;   /* forwards to the twin awaiting a reply */
	uint64_t fwd_bytes;        /* ... and their data bytes (mem.c) */
	/* The twin's answer, polled for before the loop sleeps while it
	 * comes quickly ([iod] twin_spin_us; docs/ARCHITECTURE.md "Waiting
	 * without sleeping"): armed from the oldest forward unanswered. */
	struct tw_spin twin_spin;
	/* Forwards the twin refused as stale, waiting for the sender's
	 * retry to heal them (twin.c "Stale forwards"). */
	struct iod_stale_list stale;
	/* TWINFS_TEST_FAULTS (main.c, SIGUSR2): refuse the next forwarded
	 * request of type fault_refuse_type (a client WRITE, a resync's WRITE
	 * with TWINFS_TEST_REFUSE=resync, or any TRUNCATE with
	 * TWINFS_TEST_REFUSE=truncate) with fault_refusal (-ENOSPC, or
	 * -ESTALE with TWINFS_TEST_REFUSE=stale). */
	bool fault_refuse_fwd;
	bool fault_refuse_resync;  /* a WRITE of session 0: the resync's */
	uint16_t fault_refuse_type;
	int fault_refusal;

	/* resync.c: the copy to our resyncing twin, or NULL */
	struct rs_job *resync;

	/* metrics.c: GET /metrics, or NULL when [iod N] metrics is off */
	struct iod_metrics *metrics;
	/* scrub.c, or NULL once stopped */
	struct iod_scrub *scrub;

	/* vote.c: our promise in the mgrd election, mgrd connections */
	struct lease_vote vote;
	struct iod_conn *mgrd_conns;
};

/* server.c */
int iod_server_start(struct iod *d);
void iod_server_stop(struct iod *d);
/* Fill hello with this iod's identity (ROLE_IOD, node_id = our id). */
void iod_hello(const struct iod *d, Twinfs__Hello *hello);
/* A reply built only from a status (no body). */
void iod_reply_status(struct wire_conn *c, const struct wire_msg *m, int rc);

/* heal.c: a READ (m, whose iod_store_read said -EBADMSG) served block by
 * block from where each block is good, our bad blocks rewritten from the
 * twin; EIO when it covers a block bad on both.  from_twin: the twin
 * asked, so it gets -EBADMSG; a READ of several blocks then heals each of
 * ours alone (heal.c header).  Replies to m; the caller frees m. */
void iod_heal_read(struct iod *d, struct wire_conn *c,
		   const struct wire_msg *m, bool from_twin);
/* The same for the scrub: each of our bad blocks in [off, off + len) of
 * (ino, column) read alone from the twin and rewritten; no reply. */
void iod_heal_range(struct iod *d, uint64_t ino, uint32_t column,
		    uint64_t off, uint64_t len);

/* scrub.c: the background scrub (its header).  init: at start, resuming
 * one left running (DIR/twinfs-scrub); stop: at shutdown; request: a
 * SCRUB (start, or only the status), answered. */
struct iod_scrub;
int iod_scrub_init(struct iod *d);
void iod_scrub_stop(struct iod *d);
void iod_scrub_request(struct iod *d, struct wire_conn *c,
		       const struct wire_msg *m);
/* What /metrics shows of it: running or not, the current (or last) run's
 * subfiles and bytes read and reads that found a bad block, runs done. */
struct iod_scrub_stats {
	bool running;
	uint64_t subfiles, bytes, bad, runs;
};
void iod_scrub_stats(const struct iod *d, struct iod_scrub_stats *out);
/* vote.c: the election's voter (docs/ARCHITECTURE.md "Election") */
/* Load the promise from the data directory; start the quiet period. */
int iod_vote_open(struct iod *d);
/* A ROLE_MGRD HELLO of `term`: 0 (the connection is tracked) or -ESTALE. */
int iod_vote_hello(struct iod *d, struct wire_conn *c, struct iod_conn *ic,
		   uint64_t term);
/* The connection of ic closes: forget it. */
void iod_vote_conn_gone(struct iod *d, struct iod_conn *ic);
/* MSG_LEASE from mgrd: decide, persist, answer (does not free m). */
void iod_vote_request(struct iod *d, struct wire_conn *c, struct wire_msg *m);

/* mgr.c */
/* Tell mgrd a block of (ino, column) at off failed its checksum here
 * (healed: from the twin), for its log line with the file's path. */
void iod_mgr_report_bad_block(struct iod *d, uint64_t ino, uint32_t column,
			      uint64_t off, bool healed);
/* Fill the map from the config (epoch 0, everyone up): --no-mgr, and the
 * twin's address until mgrd answers. */
void iod_map_from_conf(struct iod *d);
/* Validate and install a map pushed or returned by mgrd; an older epoch
 * is ignored.  Returns 0 or -EPROTO for a malformed map. */
int iod_map_apply(struct iod *d, const Twinfs__ClusterMap *m);
int iod_mgr_start(struct iod *d);
/* Ask mgrd for the map now (a request carried a newer epoch). */
void iod_mgr_refresh(struct iod *d);
void iod_mgr_stop(struct iod *d);
/* Tell mgrd that iod_id (our twin) failed a forward with status; it
 * probes and demotes it only if the probe fails.  Rate-limited. */
#define IOD_REPORT_GAP_MS 200u
void iod_mgr_report(struct iod *d, uint32_t iod_id, int status);
/* Our journal aborted: report ourselves (iod_id = reporter_iod = our id,
 * -EIO).  mgrd's probe then fails (server.c answers PING with -EIO once
 * aborted) and it demotes us; mgr.c repeats the report every second until
 * our map says we are down. */
void iod_mgr_report_self(struct iod *d);
/* The twin lacks writes we applied (twin.c pin_missed): if our map still
 * has it readable a request_timeout later, tell mgrd, and again every
 * second until the map shows it unreadable (resyncing). */
void iod_mgr_report_missed(struct iod *d);
/* Fencing (proto/FORMAT.md "Fencing"): take mgrd's list of expired
 * sessions when its gen is newer than ours, or always with `replace`;
 * -EPROTO when malformed. */
int iod_fence_take(struct iod *d, const Twinfs__Fence *f, bool replace);
/* Whether writes of client session `session` are refused (0: never). */
bool iod_fenced(const struct iod *d, uint64_t session);

/* main.c */
/* The journal aborted (J12): the store refuses writes with EIO from now on.
 * Logs it and reports us to mgrd, so that our twin completes writes alone
 * (needs_resync on us) until we are restarted, replayed and resynced. */
void iod_journal_aborted(void *arg);

/* mem.c: the memory bound (docs/OPERATIONS.md "Memory").  Block copies
 * waiting for journal space (jbd_stats unlogged_bytes) and data of
 * forwards awaiting the twin (fwd_bytes) are each limited to
 * iod_mem_limit(journal size), a quarter of it: past it (iod_mem_over)
 * iod_mem_after_request holds the connection a write came on; iod_mem_poll
 * (before every loop sleep) reads every held one again once both are at
 * most half of it (iod_mem_may_release). */
bool iod_mem_over(uint64_t unlogged, uint64_t fwd, uint64_t limit);
bool iod_mem_may_release(uint64_t unlogged, uint64_t fwd, uint64_t limit);
uint64_t iod_mem_limit(uint64_t journal_bytes);
void iod_mem_after_request(struct iod *d, struct wire_conn *c);
void iod_mem_poll(struct iod *d);
void iod_mem_release_all(struct iod *d);
void iod_mem_fini(struct iod *d);
/* Every journal tick (200 ms): after 2 x commit_interval without a
 * commit, checkpoint what the journal holds (its copies are freed); once
 * no copy is left and no commit came for a commit_interval, mark the
 * journal's spare slabs free (MADV_FREE); unmap them and give freed
 * memory back to the system (malloc_trim) once the copies and forwards
 * held are at most a quarter of their peak since the last trim and at
 * least 32 MiB below it, and no commit came for IOD_MEM_REST_INTERVALS
 * commit_intervals (rested; iod_mem_trim_due): after a burst, not at a
 * checkpoint of a stream or between bursts, whose next writes would fault
 * every page back in. */
#define IOD_MEM_REST_INTERVALS 12u
bool iod_mem_trim_due(uint64_t peak, uint64_t now, bool quiet);
void iod_mem_tick(struct iod *d);

/* twin.c */
int iod_twin_start(struct iod *d);
/* Start the write-intent clearing cycle (every commit_interval). */
int iod_twin_intent_start(struct iod *d);
/* The map changed: follow the twin's address. */
void iod_twin_map_changed(struct iod *d);
/* mgrd demoted the twin (T4 now completes alone): forwards still waiting
 * for it fail at once (-EIO; the sender retries with the new epoch)
 * instead of at their deadline. */
void iod_twin_demoted(struct iod *d);
void iod_twin_stop(struct iod *d);
/* Whether our map lets this iod serve reads (R1 invariant 1). */
bool iod_twin_self_readable(const struct iod *d);
/* Our twin, by our map (one missing from it counts as readable). */
bool iod_twin_peer_readable(const struct iod *d);
/* Report as missed writes the stale-refused forwards no retry healed in
 * time (mgr.c's timer); forget them all after a resync. */
void iod_twin_stale_check(struct iod *d);
void iod_twin_stale_forget(struct iod *d);
/* resync.c: RESYNC from mgrd (we are the source; the reply comes when the
 * copy is done); stop a running copy at shutdown. */
struct rs_job;
void iod_resync_request(struct iod *d, struct wire_conn *c,
			struct wire_msg *m);
void iod_resync_stop(struct iod *d);

/* intent_list.c: the write-intent marks in (ino, column, first) order.
 * count UINT64_MAX: the whole subfile.  pinned: ours, and pinned
 * (iod_intent_cb); a merge keeps it when either copy has it. */
struct iod_intent_run {
	uint64_t ino;
	uint32_t column;
	uint64_t first, count;
	bool pinned;
};
int iod_intent_run_cmp(const struct iod_intent_run *a,
		       const struct iod_intent_run *b);
/* Every mark now, sorted; *out is malloc'ed (NULL when none). */
int iod_intent_list(struct iod_store *s, struct iod_intent_run **out,
		    size_t *n);
/* Add runs to a sorted list (realloc'ed), keep it sorted, drop exact
 * duplicates. */
int iod_intent_merge(struct iod_intent_run **v, size_t *n,
		     const struct iod_intent_run *add, size_t n_add);

/* resync_cursor.c: the copy position the target has acknowledged (see
 * there).  (ino, column, off): every subfile before (ino, column) in
 * listing order and its bytes below off (UINT64_MAX: all) are copied. */
struct iod_rs_pos {
	uint64_t ino;
	uint32_t column;
	uint64_t off;
};
struct iod_rs_slot {
	struct iod_rs_pos pos;
	bool acked;
};
struct iod_rs_cursor {
	struct iod_rs_slot *slots;   /* FIFO of queued positions */
	uint32_t cap;
	uint64_t head, tail;         /* ids; slot of id is id % cap */
	bool has_done;
	struct iod_rs_pos done;      /* newest position acknowledged in order */
};
int iod_rs_cursor_init(struct iod_rs_cursor *c, uint32_t cap);
void iod_rs_cursor_free(struct iod_rs_cursor *c);
/* Free slots (push asserts at least one). */
uint32_t iod_rs_cursor_room(const struct iod_rs_cursor *c);
/* Queue the position a message about to be sent completes; returns its
 * id, to pass to ack when the message is acknowledged. */
uint64_t iod_rs_cursor_push(struct iod_rs_cursor *c,
			    const struct iod_rs_pos *p);
/* Raise the offset of a queued, unacknowledged position. */
void iod_rs_cursor_set_off(struct iod_rs_cursor *c, uint64_t id,
			   uint64_t off);
/* The message of id was applied; true when `done` moved. */
bool iod_rs_cursor_ack(struct iod_rs_cursor *c, uint64_t id);

/* WRITE, TRUNCATE, FALLOCATE, DELETE, FSYNC after validation: apply (and
 * forward when we are the primary), reply exactly once.  Takes ownership
 * of m.  sums: a WRITE's data by journal block (jbd_sums, taken as its
 * data_crc was checked), or NULL; used only during the call. */
void iod_twin_request(struct iod *d, struct wire_conn *c, struct wire_msg *m,
		      const uint32_t *sums);
/* CHECKSUM with `both` (twinfsctl verify): our checksums and the twin's,
 * taken at the same point of our write order.  Answers the request. */
void iod_twin_checksum(struct iod *d, struct wire_conn *c,
		       const struct wire_msg *m);

/* ---------------------------------------------------- resync, metrics */

/* While this iod copies to its twin (resync.c): true, with the target and
 * the bytes copied of the total to copy. */
bool iod_resync_progress(const struct iod *d, uint32_t *target,
			 uint64_t *done, uint64_t *total);

/* metrics.c: serve GET /metrics on [iod N] metrics (nothing when off),
 * counting the wire server's requests and timing the journal.  Start
 * after iod_server_start; stop before iod_server_stop.  0 or -errno. */
int iod_metrics_start(struct iod *d);
void iod_metrics_stop(struct iod *d);

#endif
