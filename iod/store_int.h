/* store_int.h - internals of the iod's subfile store, shared by store.c
 * (the home side: paths, xattrs, fd cache, deferred unlinks), store_id.c
 * (the data directory's identity and flag files), store_sync.c
 * (durability at home), store_scan.c (the listing) and
 * store_journal.c (every operation through the block journal, records,
 * the write-intent log).  Never included outside iod/store*.c.
 *
 * Everything runs on the iod's loop thread, except the drain of the
 * deferred unlinks (store_unlinkq_drain), which the checkpoint's helper
 * thread and, in ordered/writeback modes, the drainer run; unlink_lock
 * guards the queue they share, drain_lock lets one drain run at a time.
 */
#ifndef TWINFS_IOD_STORE_INT_H
#define TWINFS_IOD_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "iod_int.h"
#include "journal.h"
#include "oset.h"
#include "ra.h"

#define SUB_XATTR        "user.twinfs.sub"
#define WIL_XATTR        "user.twinfs.wil"
#define SUBDIR           "subfiles"
#define HASH_BUCKETS     1024u

/* Bits of sub.dirsync: directories whose entries changed when the subfile
 * was created and must be fsynced with it. */
#define DS_CD   1u   /* subfiles/ab/cd (the new file's entry) */
#define DS_AB   2u   /* subfiles/ab (a new cd) */
#define DS_TOP  4u   /* subfiles (a new ab) */

/* One cached subfile (home state). */
struct sub {
	uint64_t ino;
	uint32_t column;
	int fd;
	uint64_t trunc_gen;        /* from the xattr (0 when invalid) */
	bool xattr_valid;
	uint8_t dirsync;           /* DS_*: not yet made durable */
	bool unsynced;             /* ordered, writeback: not known to be
	                            * durable at home: set when the entry is
	                            * made and by every in-place change
	                            * (store_inplace), cleared when
	                            * store_sync_fds or store_sync_objs_fds
	                            * took it (S6) */
	struct iod_ra ra;          /* strided reads of it (ra.h) */
	struct sub *hnext;         /* hash chain */
	struct sub *prev, *next;   /* LRU list: head = most recent */
};

/* The logical state of a subfile while journal records about it are not
 * yet applied at home (store_journal.c, invariant J-S1). */
struct smeta {
	uint64_t obj;
	bool exists;
	uint64_t trunc_gen;
	bool has_layout;
	struct iod_sub_layout layout;
	uint64_t pending;          /* records not yet applied at home */
};

/* The live write-intent set of one subfile (store_intent.c).  Marks are
 * durable (journaled, SJ2); pins are in memory only and may name regions
 * no mark covers (a truncate's whole subfile), so only marks answer
 * store_intent_covers. */
struct intent {
	uint64_t obj;
	/* region + 1 -> (void *)value: bits 0..62 the touch generation + 1
	 * of its last mark (0: pinned only), bit 63 (INTENT_PIN) pinned */
	struct tw_hmap regions;
	bool all;                  /* marked whole (overflow), since all_gen */
	bool all_pinned;           /* pinned whole */
	uint64_t all_gen;
};

struct iod_store {
	char dir[PATH_MAX];
	char jpath[PATH_MAX + 16]; /* DIR/journal: jbd keeps the pointer */
	int dir_fd;                /* DIR */
	int sub_fd;                /* DIR/subfiles */
	uint32_t iod_id;
	uint8_t uuid[IOD_UUID_LEN];
	bool is_new;
	uint64_t max_size;         /* largest file the home file system
	                            * holds (store_probe_max_size) */
	bool replay_owed;          /* a replay is owed (the file below) */
	bool owed_on_disk;         /* ... and DIR/twinfs-replay-owed exists */
	bool owed_marks;           /* ... and the pins (in memory) do not name
				    * all it owes: since before this start,
				    * or a pin could not be recorded */
	bool resync_live;          /* DIR/twinfs-resync-live exists */

	struct sub *buckets[HASH_BUCKETS];
	struct sub lru;            /* sentinel */
	unsigned n_cached, max_cached;

	/* S6: directories with an entry made since store_sync_fds last took
	 * them (bit per directory): subfiles (a new ab), ab (a new cd),
	 * ab/cd (a new subfile).  Kept per directory, not per subfile: a
	 * subfile created in a cd that another one's creation made needs
	 * cd's entry in ab durable too, and an entry's bits die with it. */
	bool dirty_top;
	uint8_t dirty_ab[256 / 8];
	uint8_t dirty_cd[256][256 / 8];

	/* Deferred unlinks (store.c, S4). */
	pthread_mutex_t unlink_lock;
	pthread_cond_t unlink_cond;
	struct tw_hmap unlink_q;   /* obj + 1 -> (void *)1, under the lock */
	uint64_t unlink_busy;      /* obj + 1 being unlinked, or 0 (lock) */
	atomic_size_t unlink_pending; /* queued + busy: 0 = nothing to do */
	pthread_mutex_t drain_lock; /* one drain at a time: unlink_busy is
	                             * one slot */
	int unlink_err;            /* first failed deferred unlink, sticky:
	                            * every later drain returns it (lock) */
	bool drainer_running;      /* it still takes work (lock) */
	bool drainer_started;      /* loop: a drainer not yet joined */
	pthread_t drainer;         /* store_unlinkq_kick's thread */

	/* store_journal.c */
	struct jbd *j;
	enum jbd_mode mode;
	uint64_t reserve;
	struct tw_hmap smeta;      /* obj + 1 -> struct smeta * */
	struct tw_hmap intents;    /* obj + 1 -> struct intent * */
	uint64_t n_marked;         /* regions in the live set */
	uint64_t touch_gen;        /* current intent generation */
	bool abort_reported;
	void (*on_abort)(void *arg);
	void *abort_arg;

	/* store_lost.c */
	struct tw_hmap lost;       /* obj + 1 -> struct store_lost * */
	uint64_t lost_news;        /* subfiles ever added to it */

	/* store_scan.c: the index of the names at home (X1, X2) */
	struct store_index {
		bool built;           /* filled from the directories */
		struct tw_oset keys;  /* store_obj()s */
	} index;

	/* store_csum.c */
	int csum_fd;               /* DIR/csums */
	int csum_cfd;              /* the last checksum file used, or -1 */
	uint64_t csum_cobj;        /* ... of this object */
	bool csum_on;              /* entries are written (data=journal) */
	bool csum_check;           /* ... and checked (C3) */
	uint64_t csum_blocks_checked;
	uint64_t csum_mismatches;  /* blocks found not matching */
	uint64_t csum_bad_obj, csum_bad_off;   /* the last read's first */
	struct iod_csum_stats csum_stats;
	/* iod_store_checksum: mismatches only counted (csum_soft_bad), and
	 * the regions holding one (iod_store_checksum_bad) */
	bool csum_soft;
	uint64_t csum_soft_bad;
	uint32_t csum_bad_regions[IOD_CSUM_BAD_MAX];
	size_t n_csum_bad_regions;
	/* Blocks marked bad whose record is not applied at home yet (C4):
	 * few (a resync's unrepairable blocks), so a plain array. */
	struct csum_pend *csum_pend;
	size_t n_csum_pend, cap_csum_pend;
	/* The plain CRC32C of each whole block the last store_csum_check
	 * matched inside the buffer it checked (csum_rd_buf, of object
	 * csum_rd_obj at csum_rd_off; NULL: none), block csum_rd_first
	 * first, csum_rd_ok false where it matched none: a READ's data_crc
	 * is combined from them (store_journal.c), so the bytes are summed
	 * once.  Valid only within the read that made them: every read
	 * clears csum_rd_buf before its own check. */
	const void *csum_rd_buf;
	uint64_t csum_rd_obj, csum_rd_off, csum_rd_first;
	size_t n_csum_rd, cap_csum_rd;
	uint32_t *csum_rd;
	bool *csum_rd_ok;
};

/* A subfile held as lost (store_lost.c). */
struct store_lost {
	int err;                   /* why it could not go home (-errno) */
	uint64_t seq;              /* the journal transaction */
};

/* Object id of the journal: ino << 8 | column (IOD_MAX_INO keeps it
 * unique). */
static inline uint64_t store_obj(uint64_t ino, uint32_t column)
{
	return ino << 8 | column;
}

static inline uint64_t store_obj_ino(uint64_t obj)
{
	return obj >> 8;
}

static inline uint32_t store_obj_column(uint64_t obj)
{
	return (uint32_t)(obj & 0xff);
}

/* store_lost.c: subfiles whose journaled changes could not go home.
 * load: at open, before the journal replays (-EBADMSG for a damaged
 * list); add: hold obj as lost (journal.h home_failed); drop: obj was
 * deleted; check: -EIO when (ino, column) is held as lost, else 0. */
int store_lost_load(struct iod_store *s);
void store_lost_free(struct iod_store *s);
int store_lost_add(struct iod_store *s, uint64_t obj, int err, uint64_t seq);
void store_lost_drop(struct iod_store *s, uint64_t obj);
int store_lost_check(const struct iod_store *s, uint64_t ino, uint32_t column);

/* The entry of a block marked bad (store_csum.c C4). */
#define CSUM_MARK 0xfffffffeu

/* A mark of block blk of obj journaled in transaction seq. */
struct csum_pend {
	uint64_t obj, blk, seq;
};

/* store_csum.c: block checksums at home (its header has C1-C4).
 * block: the stored CRC32C of len bytes of a block zero-padded to 4 KiB
 * (never 0: 0 marks an unchecked entry); range: the blocks first..last a
 * byte range touches (pure).  open: DIR/csums, before replay; upgrade:
 * after replay, computes every entry when DIR/twinfs-csum-v2 is absent
 * (converts them from DIR/twinfs-csum-v1; drops both outside
 * data=journal), then checking starts.  home: the
 * journal's ops.home_blocks; check: its ops.home_check (-EBADMSG, with
 * csum_bad_* set, when a home block that is not journal-resident does not
 * match); cut, punch, forget: a truncate, a punch, an unlink or a
 * creation at home; sync: fsync the subfile's checksum file;
 * verify_block: re-check one block of home (0: good or unchecked);
 * mark: set a block's entry to CSUM_MARK (the bad-copy record);
 * pend_add / pend_drop / pend_check: the marks journaled and not yet
 * home (drop: those of blocks lo..hi journaled at or before seq; check:
 * -EBADMSG, or counted in csum_soft_bad, when [off, off + len) has one). */
uint32_t store_csum_block(const void *buf, size_t len);
void store_csum_range(uint64_t off, uint64_t len, uint64_t *first,
		      uint64_t *last);
int store_csum_open(struct iod_store *s, bool journal_mode);
int store_csum_upgrade(struct iod_store *s);
void store_csum_close(struct iod_store *s);
int store_csum_home(struct iod_store *s, uint64_t obj, uint64_t blk,
		    const struct iovec *iov, int n, const uint32_t *sums);
int store_csum_check(struct iod_store *s, uint64_t obj, int fd, uint64_t hsize,
		     uint64_t off, const void *buf, size_t len);
int store_csum_cut(struct iod_store *s, uint64_t ino, uint32_t column,
		   uint64_t size);
int store_csum_punch(struct iod_store *s, uint64_t ino, uint32_t column,
		     uint64_t off, uint64_t len);
int store_csum_forget(struct iod_store *s, uint64_t ino, uint32_t column);
void store_csum_uncache(struct iod_store *s, uint64_t ino, uint32_t column);
int store_csum_sync(struct iod_store *s, uint64_t ino, uint32_t column);
int store_csum_verify_block(struct iod_store *s, uint64_t ino, uint32_t column,
			    uint64_t blk);
int store_csum_mark(struct iod_store *s, uint64_t ino, uint32_t column,
		    uint64_t blk);
int store_csum_pend_add(struct iod_store *s, uint64_t obj, uint64_t blk,
			uint64_t seq);
void store_csum_pend_drop(struct iod_store *s, uint64_t obj, uint64_t lo,
			  uint64_t hi, uint64_t seq);
int store_csum_pend_check(struct iod_store *s, uint64_t obj, uint64_t off,
			  uint64_t len);

/* store.c: home side */
/* Bits of the S6 dirty maps. */
static inline void store_bit_set(uint8_t *map, unsigned i)
{
	map[i / 8] |= (uint8_t)(1u << (i % 8));
}

static inline bool store_bit_get(const uint8_t *map, unsigned i)
{
	return map[i / 8] & (1u << (i % 8));
}

static inline void store_bit_clear(uint8_t *map, unsigned i)
{
	map[i / 8] &= (uint8_t)~(1u << (i % 8));
}

/* The fan-out directories ab/cd of ino (the top bytes of a mix of it). */
void store_sub_dirs(uint64_t ino, unsigned *ab, unsigned *cd);
/* "ab/cd/<ino>.<col>", relative to DIR/subfiles. */
int store_rel_subpath(uint64_t ino, uint32_t column, char *buf, size_t len);
/* fsync the directory rel under base_fd (absent: 0). */
int store_fsync_dirat(int base_fd, const char *rel);
/* The cached entry of (ino, column), or NULL. */
struct sub *store_cache_find(struct iod_store *s, uint64_t ino,
			     uint32_t column);
/* Open a subfile by its relative path: fd or -errno. */
int store_open_existing(struct iod_store *s, const char *rel);
/* Wait for (or run) a queued unlink of (ino, column) at rel (S4). */
void store_unlinkq_settle(struct iod_store *s, uint64_t ino, uint32_t column,
			  const char *rel);

/* store_id.c: the identity file and the flag files */
int store_id_check(struct iod_store *s, const char *cluster);
int store_flags_load(struct iod_store *s);
int store_quarantine_journal(struct iod_store *s);

int store_home_open(struct iod_store *s, const struct iod_store_opts *opts);
/* A mutation of [off, off + len) of a subfile: -EINVAL as iod_check_range,
 * -EFBIG when its end passes s->max_size (nothing is journaled: the
 * checkpoint could never write it home), -EIO when the subfile is held as
 * lost (store_lost.c). */
int store_check_mutation(const struct iod_store *s, uint64_t ino,
			 uint32_t column, uint64_t off, uint64_t len);
void store_home_close(struct iod_store *s);
void store_flags_clean_stop(struct iod_store *s);
/* Find or open a subfile; with layout non-NULL create it if absent
 * (xattr first, S2) with trunc_gen.  -ENOENT when absent and not
 * creating. */
int store_get_sub(struct iod_store *s, uint64_t ino, uint32_t column,
		  const struct iod_sub_layout *layout, uint64_t trunc_gen,
		  struct sub **out);
/* Raise the recorded trunc_gen to at least trunc_gen (never lowers it:
 * replay and checkpoint re-apply records, which must be idempotent). */
int store_raise_gen(struct iod_store *s, struct sub *e, uint64_t trunc_gen,
		    const struct iod_sub_layout *layout);
/* store_get_sub (creating with layout only when `create`), then
 * store_raise_gen to gen with layout: the first two steps of every
 * in-place change and of the replay of a record. */
int store_sub_at_gen(struct iod_store *s, uint64_t ino, uint32_t column,
		     bool create, const struct iod_sub_layout *layout,
		     uint64_t gen, struct sub **out);
/* Unlink a subfile (absent is fine), dropping its cached fd. */
int store_unlink(struct iod_store *s, uint64_t ino, uint32_t column);
/* The same, with the unlinkat left to store_unlinkq_drain (S4): the
 * checkpoint's delete records.  Falls back to store_unlink without
 * memory. */
int store_unlink_later(struct iod_store *s, uint64_t ino, uint32_t column);
/* Run the deferred unlinks; any thread (the checkpoint's helper thread as
 * ops.home_bg, or store_sync_objs on the loop).  Returns the first error
 * other than ENOENT of any deferred unlink so far (sticky: the journal
 * aborts on it, until a restart replays the deletes). */
int store_unlinkq_drain(struct iod_store *s);
/* ordered/writeback deletes: drain the queue soon on a thread of its own
 * (the drainer), so that neither the loop nor the space a delete frees
 * waits for a checkpoint.  Loop thread only. */
void store_unlinkq_kick(struct iod_store *s);
/* The subfile exists (cached or on disk). */
bool store_sub_exists(struct iod_store *s, uint64_t ino, uint32_t column);
/* fsync the subfiles (and directories of creations and unlinks). */
int store_sync_objs(struct iod_store *s, const uint64_t *objs, size_t n);
/* writeback mode's fsync of ino on the journal's helper thread
 * (jbd_sync_files, S6): into fds, new descriptors whose fsync makes ino's
 * data at home durable: each subfile changed in place since the last call
 * (every existing one that is not cached: an evicted entry forgot), then
 * each directory on its path with an entry not yet made durable.
 * columns: a bit mask of the columns to sync, 0 for all.  *n: how many;
 * *cols: the cached columns taken.  Nothing is marked synced until
 * store_sync_fds_taken (once the journal holds the descriptors).  0, or
 * -errno with nothing left open. */
#define STORE_SYNC_FDS_MAX (IOD_MAX_COLUMNS + 3)
int store_sync_fds(struct iod_store *s, uint64_t ino, uint32_t columns,
		   int fds[STORE_SYNC_FDS_MAX], size_t *n, uint32_t *cols);
void store_sync_fds_taken(struct iod_store *s, uint64_t ino, uint32_t cols);
/* ordered mode's commit (jbd ops.home_sync_fds, S6): as store_sync_fds
 * for the subfiles of the journal objects objs[0..n) (sorted), at most max
 * descriptors into fds, and marks them taken.  Returns how many, or
 * -E2BIG (taken too) when one syncfs serves better: more than max, or a
 * directory on their paths gained an entry, or one of them was unlinked
 * since (the unlink must be durable too); -errno with nothing open and
 * nothing taken. */
int store_sync_objs_fds(struct iod_store *s, const uint64_t *objs, size_t n,
			int *fds, size_t max);
/* writeback mode's synchronous write (S6): fsync, on this thread, the
 * directories on ino's path with an entry not yet durable; every one of
 * them when `all` (a batch that took their bits may not have synced them
 * yet). */
int store_sync_path(struct iod_store *s, uint64_t ino, bool all);
/* ordered, writeback: e's data or allocation was changed in place under
 * handle h (jbd_inplace), so an fsync of its file must fsync it. */
int store_inplace(struct jbd_handle *h, struct sub *e);
int store_home_stat(struct sub *e, struct iod_sub_stat *st);
/* The layout in e's xattr, or -EBADMSG. */
int store_home_layout(struct sub *e, struct iod_sub_layout *l);
/* Every subfile name at home after the cursor, sorted (the index,
 * store_scan.c); *n set, *truncated when more follow.  The caller frees
 * *keys, which may be NULL when *n is 0. */
struct store_key {
	uint64_t ino;
	uint32_t column;
};
int store_scan(struct iod_store *s, uint64_t after_ino, uint32_t after_column,
	       size_t max, struct store_key **keys, size_t *n, bool *truncated);
int store_key_cmp(const void *a, const void *b);
/* A name was created at home / is logically gone from it (X1). */
void store_index_added(struct iod_store *s, uint64_t ino, uint32_t column);
void store_index_removed(struct iod_store *s, uint64_t ino, uint32_t column);
void store_index_free(struct iod_store *s);
/* Persisted write-intent ranges of a subfile (WIL_XATTR). */
#define WIL_MAX_RANGES 120u
/* A change of more regions than this marks the whole subfile. */
#define WIL_MAX_COUNT  (1u << 16)
struct wil_range {
	uint64_t first, count;
};
int store_wil_get(struct sub *e, struct wil_range *r, unsigned *n, bool *all);
int store_wil_set(struct sub *e, const struct wil_range *r, unsigned n,
		  bool all);


/* ---- iod journal records (payload format: store_journal.c) ---- */
enum { REC_CREATE = 1, REC_MARK, REC_CLEAR, REC_TRUNC, REC_DELETE, REC_PUNCH,
       REC_BADCOPY };
#define REC_VERSION      1u
#define CLEAR_ALL        1u
#define CLEAR_MAX        240u          /* ranges per clear record */

struct rec_hdr {
	uint16_t op;
	uint16_t version;
	uint32_t reserved;
	uint64_t trunc_gen;
};
_Static_assert(sizeof(struct rec_hdr) == 16, "record header");

struct rec_create {
	struct rec_hdr h;
	uint32_t stripe_size, stripe_count, n_groups, reserved;
	uint32_t groups[IOD_MAX_COLUMNS];
};
_Static_assert(sizeof(struct rec_create) == 160, "create record");

struct rec_mark {
	struct rec_hdr h;
	uint64_t first, count;
};
_Static_assert(sizeof(struct rec_mark) == 32, "mark record");

struct rec_clear {
	struct rec_hdr h;
	uint32_t n, flags;
	struct { uint64_t first, count; } r[CLEAR_MAX];
};
_Static_assert(sizeof(struct rec_clear) <= JBD_REC_MAX, "clear record");

struct rec_trunc {
	struct rec_hdr h;
	uint64_t size;
};
_Static_assert(sizeof(struct rec_trunc) == 24, "truncate record");

struct rec_punch {
	struct rec_hdr h;
	uint64_t off, len;
};
_Static_assert(sizeof(struct rec_punch) == 32, "punch record");

struct rec_badcopy {
	struct rec_hdr h;
	uint64_t off, len;
};
_Static_assert(sizeof(struct rec_badcopy) == 32, "bad-copy record");

/* store_journal.c */
int store_check_ids(uint64_t ino, uint32_t column);
/* Report a journal abort once (log line, on_abort). */
void store_check_abort(struct iod_store *s);
/* -EIO (reported once) if the journal has aborted, else 0: every change
 * starts here. */
int store_refuse_aborted(struct iod_store *s);
/* The logical state of a subfile (SJ1): its smeta, else home. */
struct store_lstate {
	bool exists;
	bool xattr_valid;
	uint64_t trunc_gen;
};
int store_logical(struct iod_store *s, uint64_t ino, uint32_t column,
		  struct store_lstate *ls);
/* Size, blocks and trunc_gen as a reader sees them (through the journal). */
int store_stat_logical(struct iod_store *s, uint64_t ino, uint32_t column,
		       struct iod_sub_stat *st);
/* After a successful commit: the subfile's logical state and nrec more
 * pending records (SJ1). */
int store_meta_install(struct iod_store *s, uint64_t obj, bool exists,
		       uint64_t trunc_gen, const struct iod_sub_layout *layout,
		       unsigned nrec);
/* The start of a change to a subfile at trunc_gen: store_refuse_aborted,
 * *ls its logical state, -ESTALE for a trunc_gen older than the
 * subfile's, else 0 with *gen the newer of the two. */
int store_change_start(struct iod_store *s, uint64_t ino, uint32_t column,
		       uint64_t trunc_gen, struct store_lstate *ls,
		       uint64_t *gen);
/* After a successful commit of nrec records to obj, which exists:
 * store_meta_install, and with touch regions first..last in the live
 * intent set.  Out of memory here leaves the request journaled and
 * answered; only the bookkeeping is short, and a log line says so. */
void store_track(struct iod_store *s, uint64_t obj, uint64_t gen,
		 const struct iod_sub_layout *layout, unsigned nrec,
		 bool touch, uint64_t first, uint64_t last);
/* Journal the creation record of obj in h. */
int store_rec_create(struct jbd_handle *h, uint64_t obj, uint64_t gen,
		     const struct iod_sub_layout *l);
/* Journal a mark record of obj in h: count 1 MiB regions from first (0:
 * only raises trunc_gen to gen). */
int store_rec_mark(struct jbd_handle *h, uint64_t obj, uint64_t gen,
		   uint64_t first, uint64_t count);
/* cb runs once every handle committed before this one is closed: the
 * reply of a request that changes nothing, in order with the others. */
int store_barrier(struct iod_store *s, iod_store_cb cb, void *arg);
/* The start of a truncate or punch, which leave an absent subfile absent:
 * -EIO once aborted; absent: cb runs as a barrier (*st says absent) and 0
 * is returned; -ESTALE for a trunc_gen older than the subfile's; else 1
 * with *gen the newer of the two. */
int store_existing_start(struct iod_store *s, uint64_t ino, uint32_t column,
			 uint64_t trunc_gen, struct iod_sub_stat *st,
			 iod_store_cb cb, void *arg, uint64_t *gen);

/* store_space.c: punch [off, off+len) of e at home (zeros written up to
 * its size where the file system cannot punch). */
int store_home_punch(struct sub *e, uint64_t off, uint64_t len);
void store_hdr_init(struct rec_hdr *h, int op, uint64_t trunc_gen);
/* One more pending record of obj that does not change its logical state
 * (SJ1). */
int store_meta_keep(struct iod_store *s, uint64_t obj);

/* store_intent.c: the live write-intent set and its persisted part */
struct intent *store_intent_get(struct iod_store *s, uint64_t obj,
				bool create);
void store_intent_drop(struct iod_store *s, struct intent *in);
/* Are regions first..last all in the live set? */
bool store_intent_covers(struct iod_store *s, uint64_t obj, uint64_t first,
			 uint64_t last);
/* Add (or re-touch with the current generation) regions first..last. */
int store_intent_touch(struct iod_store *s, uint64_t obj, uint64_t first,
		       uint64_t last);
/* Apply a mark (add) or clear to the persisted set of e (everything: a
 * clear of all). */
int store_wil_change(struct sub *e, bool add, const struct wil_range *chg,
		     unsigned n_chg, bool everything);
/* At open, after replay: the live set from every subfile's xattr. */
int store_intents_rebuild(struct iod_store *s);
void store_intents_free(struct iod_store *s);

#endif
