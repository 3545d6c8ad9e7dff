/* store.c - the home side of the iod's subfile store: where a subfile
 * lives on the local file system, its xattrs, opening and closing the data
 * directory, an fd cache and the deferred unlinks.  Its neighbours: the
 * identity and flag files (store_id.c), durability of files and
 * directories (store_sync.c), the listing (store_scan.c).
 *
 * It does not change subfiles on its own initiative: every mutation goes
 * through the block journal (store_journal.c), which calls back into the
 * helpers here when it checkpoints or replays (and, in ordered/writeback
 * modes, when the store writes in place).  It knows nothing of the network,
 * the twin or epochs (twin.c and server.c do).
 *
 * Layout of the data directory DIR:
 *
 *   DIR/twinfs-id                       identity (format: store_id.c)
 *   DIR/subfiles/<ab>/<cd>/<ino>.<col>  one subfile per (ino, column)
 *
 * <ino> is the inode number as 16 lowercase hex digits, <col> the column in
 * decimal (0..31), <ab> and <cd> the top two bytes (hex) of a 64-bit mix of
 * ino, so that all columns of one file share a directory and no directory
 * grows past ~1/65536 of the files.
 *
 * Invariants:
 *   S1  Every path the store touches is built by snprintf from numbers only
 *       (iod_store_subpath); nothing a peer sends is ever part of a name,
 *       and subfiles are opened relative to DIR/subfiles with O_NOFOLLOW, so
 *       no request can make the iod touch a path outside DIR.
 *   S2  A subfile's xattr is written before its first byte of data, and a
 *       newer trunc_gen is stored in it before the write or truncate that
 *       carries it is applied, so a crash never leaves data of a newer
 *       generation under an older recorded one.
 *   S3  A creation's new directory entries are made durable with the
 *       subfile by store_sync_objs: exactly (sub.dirsync) while the entry is
 *       cached, conservatively (its cd, ab and the top directory) after an
 *       eviction.  Durability of data is the journal's business (J7, J11).
 *   S4  A checkpoint's delete records only queue their unlinkat
 *       (store_unlink_later), and so do ordered/writeback deletes, which
 *       also start the drainer thread (store_unlinkq_kick); the
 *       checkpoint's helper thread runs the queue before its syncfs
 *       (ops.home_bg), store_sync_objs before it syncs, so every unlink
 *       is durable before the log tail moves (J8); a drainer's failure
 *       fails that drain.  Unlinking a subfile that has blocks waits for
 *       the disk (on ext4 mounted with discard, about 0.2 ms each):
 *       thousands after an `rm -rf` stalled the loop, and every request
 *       with it, for seconds.  One drain runs at a time (drain_lock).
 *       Order still holds: nothing opens or creates a subfile by its path
 *       (store_get_sub, store_sub_exists, store_unlink) while its unlink
 *       is queued or running; it does the unlink first, or waits for it.
 *   S6  writeback mode's fsync of a file (store_sync_fds) fsyncs that
 *       file's subfiles changed in place (sub.unsynced; every uncached
 *       one) and the directories on its path that gained an entry since
 *       they were last taken (dirty_top, dirty_ab, dirty_cd, set by
 *       store_get_sub's creations), all on the journal's helper thread.
 *       Ordered mode's commit takes the same state for the subfiles its
 *       transactions wrote in place (store_sync_objs_fds): the journal's
 *       helper thread fsyncs those subfiles, or runs one syncfs when a
 *       directory on their paths is among them.
 *       What an earlier life of the iod left is durable before the first
 *       request: replay syncs every object of the log it replays (S3's
 *       conservative path), and a checkpoint syncs home before the tail
 *       moves.  A bit is cleared when taken; a later fsync that finds it
 *       clear waits for the batch that holds it (jbd_sync_files; in
 *       ordered mode every later commit waits for the running batch).
 *       writeback's synchronous write fsyncs its subfile and those
 *       directories on the loop (store_sync_path; all three while a batch
 *       may hold them), as it always fsynced the subfile there.
 *   S5  The fd cache also remembers subfiles known to be absent at home
 *       (fd -1): a write to a new subfile asked for its home file three
 *       times (state, size, the reply's stat), an openat and ENOENT each,
 *       on both twins.  Every creation goes through store_get_sub, which
 *       replaces such an entry, and every unlink drops the entry first.
 *
 * Subfile xattr "user.twinfs.sub" (176 bytes, little-endian):
 *
 *   off size field
 *     0    4 magic        0x42535754 ("TWSB")
 *     4    2 version      1
 *     6    2 length       176
 *     8    8 ino
 *    16    4 column
 *    20    4 stripe_size
 *    24    8 trunc_gen    the generation of the last truncate (or newer write)
 *    32    4 stripe_count
 *    36    4 n_groups     entries of groups[] in use (== stripe_count)
 *    40  128 groups[32]
 *   168    4 reserved     0
 *   172    4 crc32c       over bytes 0..171
 *
 * Valid iff magic, version, length and crc match.  A subfile whose xattr is
 * missing or invalid (a crash between create and setxattr, or damage) is
 * served with trunc_gen 0 and gets a fresh xattr on its next write.
 *
 * Write-intent xattr "user.twinfs.wil" (the persisted part of the
 * write-intent log, store_journal.c; absent = nothing marked):
 *
 *   off size field
 *     0    4 magic        0x4c495754 ("TWIL")
 *     4    2 version      1
 *     6    2 n            ranges that follow, <= 120
 *     8    4 flags        bit 0 ALL: the whole subfile is marked
 *    12    4 crc32c       over bytes 0..11 and the ranges
 *    16 16*n ranges       (first region, count), regions of 1 MiB,
 *                         sorted, disjoint, not adjacent
 *
 * Valid iff magic, version, n and crc match; an invalid one counts as ALL
 * (a resync copies too much rather than too little).
 *
 */
#include "store_int.h"

#include <assert.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define SUB_MAGIC        0x42535754u
#define SUB_VERSION      1u
#define WIL_MAGIC        0x4c495754u
#define WIL_VERSION      1u
#define WIL_F_ALL        1u

struct sub_xattr_disk {
	uint32_t magic;
	uint16_t version;
	uint16_t length;
	uint64_t ino;
	uint32_t column;
	uint32_t stripe_size;
	uint64_t trunc_gen;
	uint32_t stripe_count;
	uint32_t n_groups;
	uint32_t groups[IOD_MAX_COLUMNS];
	uint32_t reserved;
	uint32_t crc;
};
_Static_assert(sizeof(struct sub_xattr_disk) == 176, "subfile xattr layout");

struct wil_disk {
	uint32_t magic;
	uint16_t version;
	uint16_t n;
	uint32_t flags;
	uint32_t crc;
	struct { uint64_t first, count; } r[WIL_MAX_RANGES];
};
_Static_assert(sizeof(struct wil_disk) == 16 + 16 * WIL_MAX_RANGES,
	       "write-intent xattr layout");

/* ------------------------------------------------------------ utilities */

static uint64_t mix64(uint64_t x)
{
	/* splitmix64's finaliser: every input bit affects the top bytes. */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

int iod_check_range(uint32_t column, uint64_t off, uint64_t len)
{
	if (column >= IOD_MAX_COLUMNS)
		return -EINVAL;
	if (off > IOD_MAX_OFFSET || len > IOD_MAX_OFFSET - off)
		return -EINVAL;
	return 0;
}

int store_check_mutation(const struct iod_store *s, uint64_t ino,
			 uint32_t column, uint64_t off, uint64_t len)
{
	int rc = iod_check_range(column, off, len);

	if (rc < 0)
		return rc;
	if (off + len > s->max_size)
		return -EFBIG;
	return store_lost_check(s, ino, column);
}

uint64_t iod_store_max_size(const struct iod_store *s)
{
	return s->max_size;
}

/* The largest size a file of the home file system can have (its
 * s_maxbytes: ext4 with 4 KiB blocks 16 TiB - 4 KiB, XFS 8 EiB - 1), found
 * by bisecting ftruncate(2) on an unnamed file: a write past it fails with
 * EFBIG at checkpoint, on both twins at once, so every request is held to
 * it before it is journaled.  No assumption about the file system: the
 * kernel's own answer.  Costs about 63 ftruncates of an empty file. */
static int probe_max_size(struct iod_store *s)
{
	uint64_t lo = 0, hi = (uint64_t)INT64_MAX;
	int fd = openat(s->sub_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	bool named = false;

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR ||
		       errno == EINVAL)) {
		/* No O_TMPFILE here: a named file, unlinked at once. */
		fd = openat(s->sub_fd, ".twinfs-probe",
			    O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
		named = fd >= 0;
	}
	if (fd < 0)
		return -errno;
	if (named)
		(void)unlinkat(s->sub_fd, ".twinfs-probe", 0);
	if (ftruncate(fd, (off_t)hi) == 0) {
		lo = hi;
	} else {
		/* ftruncate(lo) succeeds, ftruncate(hi) fails */
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;

			if (ftruncate(fd, (off_t)mid) == 0)
				lo = mid;
			else if (errno == EFBIG || errno == EINVAL)
				hi = mid;
			else
				break;   /* keep the last size that worked */
		}
	}
	(void)ftruncate(fd, 0);
	close(fd);
	if (lo == 0)
		return -EFBIG;
	s->max_size = lo;
	return 0;
}

/* Directory part "ab/cd" and file name "<ino>.<col>" (S1: numbers only). */
void store_sub_dirs(uint64_t ino, unsigned *ab, unsigned *cd)
{
	uint64_t h = mix64(ino);

	*ab = (unsigned)(h >> 56);
	*cd = (unsigned)((h >> 48) & 0xff);
}

int iod_store_subpath(uint64_t ino, uint32_t column, char *buf, size_t len)
{
	unsigned ab, cd;
	int n;

	store_sub_dirs(ino, &ab, &cd);
	n = snprintf(buf, len, SUBDIR "/%02x/%02x/%016" PRIx64 ".%" PRIu32,
		     ab, cd, ino, column);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return n;
}

/* Path relative to DIR/subfiles (skips the "subfiles/" prefix). */
int store_rel_subpath(uint64_t ino, uint32_t column, char *buf, size_t len)
{
	char full[64];
	int n = iod_store_subpath(ino, column, full, sizeof(full));

	if (n < 0)
		return n;
	if ((size_t)n - strlen(SUBDIR "/") + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf, full + strlen(SUBDIR "/"), (size_t)n - strlen(SUBDIR "/") + 1);
	return 0;
}

static void xattr_encode(struct sub_xattr_disk *d, uint64_t ino,
			 uint32_t column, uint64_t trunc_gen,
			 const struct iod_sub_layout *l)
{
	memset(d, 0, sizeof(*d));
	d->magic = htole32(SUB_MAGIC);
	d->version = htole16(SUB_VERSION);
	d->length = htole16((uint16_t)sizeof(*d));
	d->ino = htole64(ino);
	d->column = htole32(column);
	d->trunc_gen = htole64(trunc_gen);
	if (l) {
		uint32_t n = TW_MIN(l->n_groups, (uint32_t)IOD_MAX_COLUMNS);

		d->stripe_size = htole32(l->stripe_size);
		d->stripe_count = htole32(l->stripe_count);
		d->n_groups = htole32(n);
		for (uint32_t i = 0; i < n; i++)
			d->groups[i] = htole32(l->groups[i]);
	}
	d->crc = htole32(tw_crc32c(0, d, offsetof(struct sub_xattr_disk, crc)));
}

/* 0 and the fields, or -EBADMSG. */
static int xattr_decode(const struct sub_xattr_disk *d, uint64_t ino,
			uint32_t column, uint64_t *trunc_gen)
{
	if (le32toh(d->magic) != SUB_MAGIC ||
	    le16toh(d->version) != SUB_VERSION ||
	    le16toh(d->length) != sizeof(*d) ||
	    le32toh(d->crc) != tw_crc32c(0, d, offsetof(struct sub_xattr_disk, crc)))
		return -EBADMSG;
	/* A subfile that claims another identity was renamed by hand. */
	if (le64toh(d->ino) != ino || le32toh(d->column) != column)
		return -EBADMSG;
	*trunc_gen = le64toh(d->trunc_gen);
	return 0;
}

int store_fsync_dirat(int base_fd, const char *rel)
{
	int fd = openat(base_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* ------------------------------------------------------------ open/close */

/* Fill s (allocated and zeroed by the caller) from opts: the data
 * directory, its identity, DIR/subfiles.  On error everything opened here
 * is closed again. */
int store_home_open(struct iod_store *s, const struct iod_store_opts *opts)
{
	int rc;

	pthread_mutex_init(&s->unlink_lock, NULL);
	pthread_cond_init(&s->unlink_cond, NULL);
	pthread_mutex_init(&s->drain_lock, NULL);
	tw_hmap_init(&s->unlink_q);
	tw_oset_init(&s->index.keys);
	atomic_init(&s->unlink_pending, 0);
	if (!opts->dir || !opts->cluster ||
	    strlen(opts->cluster) >= IOD_CLUSTER_MAX ||
	    strlen(opts->dir) >= PATH_MAX)
		return -EINVAL;
	s->dir_fd = s->sub_fd = s->csum_fd = s->csum_cfd = -1;
	s->iod_id = opts->iod_id;
	s->max_cached = opts->max_fds ? opts->max_fds : IOD_FD_CACHE_DEFAULT;
	s->lru.prev = s->lru.next = &s->lru;
	memcpy(s->dir, opts->dir, strlen(opts->dir) + 1);

	rc = tw_mkdir_p(s->dir);
	if (rc < 0) {
		tw_err("data directory %s: cannot create: %s", s->dir,
		       strerror(-rc));
		goto fail;
	}
	s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0) {
		rc = -errno;
		tw_err("data directory %s: %s", s->dir, strerror(-rc));
		goto fail;
	}
	if (opts->quarantine_journal) {
		rc = store_quarantine_journal(s);
		if (rc < 0)
			goto fail;
	}
	rc = store_id_check(s, opts->cluster);
	if (rc < 0)
		goto fail;
	rc = store_flags_load(s);
	if (rc < 0) {
		tw_err("data directory %s: cannot record a replay the twin's "
		       "resync owes", s->dir);
		goto fail;
	}
	if (mkdirat(s->dir_fd, SUBDIR, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	s->sub_fd = openat(s->dir_fd, SUBDIR, O_RDONLY | O_DIRECTORY |
			   O_NOFOLLOW | O_CLOEXEC);
	if (s->sub_fd < 0) {
		rc = -errno;
		tw_err("data directory %s: %s/: %s", s->dir, SUBDIR,
		       strerror(-rc));
		goto fail;
	}
	rc = probe_max_size(s);
	if (rc < 0) {
		tw_err("data directory %s: cannot find the largest file its "
		       "file system holds: %s", s->dir, strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->dir_fd = -1;
	return rc;
}

static void lru_unlink(struct sub *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_push_front(struct iod_store *s, struct sub *e)
{
	e->next = s->lru.next;
	e->prev = &s->lru;
	s->lru.next->prev = e;
	s->lru.next = e;
}

static unsigned bucket_of(uint64_t ino, uint32_t column)
{
	return (unsigned)(mix64(ino * 33u + column) % HASH_BUCKETS);
}

static void cache_remove(struct iod_store *s, struct sub *e)
{
	struct sub **pp = &s->buckets[bucket_of(e->ino, e->column)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(e);
	s->n_cached--;
}

/* Close every cached fd (without syncing) and the directories.  Unlinks
 * still queued are dropped (a running drainer finishes the queue first):
 * their transactions are still in the log (the tail moves only after the
 * drain), so replay applies them again. */
void store_home_close(struct iod_store *s)
{
	while (s->lru.next != &s->lru) {
		struct sub *e = s->lru.next;

		cache_remove(s, e);
		if (e->fd >= 0)
			close(e->fd);
		free(e);
	}
	if (s->drainer_started)
		pthread_join(s->drainer, NULL);
	s->drainer_started = false;
	assert(s->unlink_busy == 0);
	tw_hmap_free(&s->unlink_q);
	store_index_free(s);
	pthread_cond_destroy(&s->unlink_cond);
	pthread_mutex_destroy(&s->unlink_lock);
	pthread_mutex_destroy(&s->drain_lock);
	if (s->sub_fd >= 0)
		close(s->sub_fd);
	store_csum_close(s);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->sub_fd = s->dir_fd = -1;
}

const uint8_t *iod_store_uuid(const struct iod_store *s)
{
	return s->uuid;
}

unsigned iod_store_fds_cached(const struct iod_store *s)
{
	return s->n_cached;
}

bool iod_store_is_new(const struct iod_store *s)
{
	return s->is_new;
}

/* ------------------------------------------------------------- fd cache */

static void evict_one(struct iod_store *s)
{
	struct sub *e = s->lru.prev;

	assert(e != &s->lru);
	/* S3: its dirsync bits are lost; store_sync_objs then syncs every
	 * directory on the path of an uncached subfile. */
	cache_remove(s, e);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

/* The process is out of descriptors (EMFILE, ENFILE): that is no fault of
 * the subfile being opened, and the request, or the checkpoint, that
 * wants it must not fail for it while this cache holds hundreds.  Close
 * the least recent half (the entries a caller may be holding are the most
 * recent) and say whether any went. */
static bool shed_fds(struct iod_store *s)
{
	uint32_t n = s->n_cached / 2 + 1;
	bool any = false;

	while (n-- > 0 && s->lru.prev != &s->lru) {
		any |= s->lru.prev->fd >= 0;
		evict_one(s);
	}
	if (any)
		tw_log_rl(TW_LOG_WARN, "data directory: out of file "
			  "descriptors; closed the least recent half of the "
			  "subfile cache");
	return any;
}

static bool out_of_fds(int rc)
{
	return rc == -EMFILE || rc == -ENFILE;
}

/* Add e (not cached yet), evicting the least recent entries past the
 * cache's size. */
static void cache_insert(struct iod_store *s, struct sub *e)
{
	while (s->n_cached >= s->max_cached)
		evict_one(s);
	e->hnext = s->buckets[bucket_of(e->ino, e->column)];
	s->buckets[bucket_of(e->ino, e->column)] = e;
	lru_push_front(s, e);
	s->n_cached++;
}

/* S5: remember that (ino, column) is absent at home (best effort). */
static void cache_absent(struct iod_store *s, uint64_t ino, uint32_t column)
{
	struct sub *e = calloc(1, sizeof(*e));

	if (!e)
		return;
	e->ino = ino;
	e->column = column;
	e->fd = -1;
	cache_insert(s, e);
}

struct sub *store_cache_find(struct iod_store *s, uint64_t ino,
			      uint32_t column)
{
	struct sub *e = s->buckets[bucket_of(ino, column)];

	for (; e; e = e->hnext)
		if (e->ino == ino && e->column == column)
			return e;
	return NULL;
}

/* S6: a subfile of ino got its entry in ab/cd. */
static void path_entry_added(struct iod_store *s, uint64_t ino)
{
	unsigned ab, cd;

	store_sub_dirs(ino, &ab, &cd);
	store_bit_set(s->dirty_cd[ab], cd);
}

static int mkdir_fanout(struct iod_store *s, uint64_t ino, uint8_t *dirsync)
{
	unsigned ab, cd;
	char rel[8];

	store_sub_dirs(ino, &ab, &cd);
	snprintf(rel, sizeof(rel), "%02x", ab);
	if (mkdirat(s->sub_fd, rel, 0700) == 0) {
		*dirsync |= DS_TOP;
		s->dirty_top = true;   /* S6 */
	} else if (errno != EEXIST) {
		return -errno;
	}
	snprintf(rel, sizeof(rel), "%02x/%02x", ab, cd);
	if (mkdirat(s->sub_fd, rel, 0700) == 0) {
		*dirsync |= DS_AB;
		store_bit_set(s->dirty_ab, ab);
	} else if (errno != EEXIST) {
		return -errno;
	}
	return 0;
}

/* Open (ino, column) without creating it: an fd of a regular file, or
 * -ENOENT. */
int store_open_existing(struct iod_store *s, const char *rel)
{
	struct stat st;
	int fd;

	/* O_NONBLOCK: a fifo planted in the tree must not block the loop;
	 * it has no effect on regular files. */
	fd = openat(s->sub_fd, rel, O_RDWR | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EIO : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		tw_log_rl(TW_LOG_ERR, "data directory: %s is not a regular "
			  "file; not serving it", rel);
		return -EIO;
	}
	return fd;
}

/* S4: the deferred unlink of rel failed (any thread, unlink_lock not
 * held).  Sticky, as the journal's abort that it causes: the next drain
 * (the checkpoint's, before its syncfs) returns it, so the tail never
 * moves past a delete record whose unlink did not happen. */
static void unlink_failed(struct iod_store *s, const char *rel, int err)
{
	tw_log_rl(TW_LOG_ERR, "data directory %s: unlinking deleted subfile "
		  "%s: %s (the next checkpoint fails, and replay unlinks it "
		  "again)", s->dir, rel, strerror(-err));
	pthread_mutex_lock(&s->unlink_lock);
	if (s->unlink_err == 0)
		s->unlink_err = err;
	pthread_mutex_unlock(&s->unlink_lock);
}

/* S4: before (ino, column) is opened, created or unlinked by its path
 * rel, its deferred unlink runs now (queued) or has finished (running on
 * the helper thread: wait for it, one unlinkat at most). */
void store_unlinkq_settle(struct iod_store *s, uint64_t ino,
			   uint32_t column, const char *rel)
{
	uint64_t key = store_obj(ino, column) + 1;
	bool mine;

	if (atomic_load(&s->unlink_pending) == 0)
		return;
	pthread_mutex_lock(&s->unlink_lock);
	mine = tw_hmap_del(&s->unlink_q, key) != NULL;
	while (!mine && s->unlink_busy == key)
		pthread_cond_wait(&s->unlink_cond, &s->unlink_lock);
	pthread_mutex_unlock(&s->unlink_lock);
	if (!mine)
		return;
	if (unlinkat(s->sub_fd, rel, 0) < 0 && errno != ENOENT)
		unlink_failed(s, rel, -errno);
	atomic_fetch_sub(&s->unlink_pending, 1);
}

/* Find or open a subfile; with `layout` non-NULL create it if absent
 * (writing its xattr first, S2) with trunc_gen.  Returns 0 and sets *out,
 * -ENOENT when absent and not creating, or -errno. */
int store_get_sub(struct iod_store *s, uint64_t ino, uint32_t column,
		  const struct iod_sub_layout *layout, uint64_t trunc_gen,
		  struct sub **out)
{
	struct sub_xattr_disk xd;
	char rel[48];
	struct sub *e;
	uint8_t dirsync = 0;
	bool created = false, known_absent = false;
	int fd, rc;
	ssize_t n;

	e = store_cache_find(s, ino, column);
	if (e && e->fd < 0 && layout) {
		/* Known absent (S5), and created now. */
		cache_remove(s, e);
		free(e);
		e = NULL;
		known_absent = true;
	}
	if (e) {
		lru_unlink(e);
		lru_push_front(s, e);
		if (e->fd < 0)
			return -ENOENT;   /* S5 */
		*out = e;
		return 0;
	}
	rc = store_rel_subpath(ino, column, rel, sizeof(rel));
	if (rc < 0)
		return rc;
	fd = -ENOENT;
	if (!known_absent) {
		store_unlinkq_settle(s, ino, column, rel);
		fd = store_open_existing(s, rel);
		if (out_of_fds(fd) && shed_fds(s))
			fd = store_open_existing(s, rel);
		if (fd == -ENOENT && !layout) {
			cache_absent(s, ino, column);
			return fd;
		}
	}
	if (fd == -ENOENT && layout) {
		rc = mkdir_fanout(s, ino, &dirsync);
		/* checksums of an earlier life of the subfile (C2) */
		if (rc == 0)
			rc = store_csum_forget(s, ino, column);
		if (rc < 0)
			return rc;
		fd = openat(s->sub_fd, rel, O_RDWR | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = -errno;
			if (out_of_fds(rc) && shed_fds(s)) {
				fd = openat(s->sub_fd, rel, O_RDWR | O_CREAT |
					    O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					    0600);
				rc = fd < 0 ? -errno : 0;
			}
			if (fd < 0)
				return rc;
		}
		created = true;
		dirsync |= DS_CD;
		path_entry_added(s, ino);
		xattr_encode(&xd, ino, column, trunc_gen, layout);
		if (fsetxattr(fd, SUB_XATTR, &xd, sizeof(xd), 0) < 0) {
			rc = -errno;
			close(fd);
			unlinkat(s->sub_fd, rel, 0);
			tw_log_rl(TW_LOG_ERR, "data directory %s: cannot set "
				  "xattr " SUB_XATTR " on %s: %s", s->dir, rel,
				  strerror(-rc));
			return rc;
		}
		store_index_added(s, ino, column);   /* X1 */
	}
	if (fd < 0)
		return fd;

	e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return -ENOMEM;
	}
	e->ino = ino;
	e->column = column;
	e->fd = fd;
	e->dirsync = dirsync;
	e->unsynced = true;   /* an earlier life may have left dirty data */
	if (created) {
		e->trunc_gen = trunc_gen;
		e->xattr_valid = true;
	} else {
		n = fgetxattr(fd, SUB_XATTR, &xd, sizeof(xd));
		if (n == (ssize_t)sizeof(xd) &&
		    xattr_decode(&xd, ino, column, &e->trunc_gen) == 0) {
			e->xattr_valid = true;
		} else {
			tw_log_rl(TW_LOG_WARN, "data directory %s: subfile %s "
				  "has no valid " SUB_XATTR "; serving it with "
				  "trunc_gen 0", s->dir, rel);
			e->trunc_gen = 0;
		}
	}
	cache_insert(s, e);
	*out = e;
	return 0;
}

int store_raise_gen(struct iod_store *s, struct sub *e, uint64_t trunc_gen,
		    const struct iod_sub_layout *layout)
{
	struct sub_xattr_disk xd;

	(void)s;
	if (trunc_gen <= e->trunc_gen && (e->xattr_valid || !layout))
		return 0;
	if (!e->xattr_valid && !layout) {
		/* Keep the gen in memory; the next write rewrites the xattr
		 * with its layout. */
		e->trunc_gen = trunc_gen;
		return 0;
	}
	trunc_gen = TW_MAX(trunc_gen, e->trunc_gen);
	if (e->xattr_valid) {
		/* Rewrite keeping the stored layout. */
		ssize_t n = fgetxattr(e->fd, SUB_XATTR, &xd, sizeof(xd));
		uint64_t old;

		if (n != (ssize_t)sizeof(xd) ||
		    xattr_decode(&xd, e->ino, e->column, &old) < 0)
			return -EIO;
		xd.trunc_gen = htole64(trunc_gen);
		xd.crc = htole32(tw_crc32c(0, &xd,
				offsetof(struct sub_xattr_disk, crc)));
	} else {
		xattr_encode(&xd, e->ino, e->column, trunc_gen, layout);
	}
	if (fsetxattr(e->fd, SUB_XATTR, &xd, sizeof(xd), 0) < 0)
		return -errno;
	e->trunc_gen = trunc_gen;
	e->xattr_valid = true;
	return 0;
}

int store_sub_at_gen(struct iod_store *s, uint64_t ino, uint32_t column,
		     bool create, const struct iod_sub_layout *layout,
		     uint64_t gen, struct sub **out)
{
	int rc = store_get_sub(s, ino, column, create ? layout : NULL, gen,
			       out);

	if (rc == 0)
		rc = store_raise_gen(s, *out, gen, layout);
	return rc;
}

int store_home_layout(struct sub *e, struct iod_sub_layout *l)
{
	struct sub_xattr_disk xd;
	uint64_t gen;
	ssize_t n = fgetxattr(e->fd, SUB_XATTR, &xd, sizeof(xd));

	if (n != (ssize_t)sizeof(xd) ||
	    xattr_decode(&xd, e->ino, e->column, &gen) < 0)
		return -EBADMSG;
	memset(l, 0, sizeof(*l));
	l->stripe_size = le32toh(xd.stripe_size);
	l->stripe_count = le32toh(xd.stripe_count);
	l->n_groups = TW_MIN(le32toh(xd.n_groups), (uint32_t)IOD_MAX_COLUMNS);
	for (uint32_t i = 0; i < l->n_groups; i++)
		l->groups[i] = le32toh(xd.groups[i]);
	return 0;
}

int store_home_stat(struct sub *e, struct iod_sub_stat *st)
{
	struct stat sb;

	if (!st)
		return 0;
	if (fstat(e->fd, &sb) < 0)
		return -errno;
	st->size = (uint64_t)sb.st_size;
	st->blocks = (uint64_t)sb.st_blocks;
	st->trunc_gen = e->trunc_gen;
	st->exists = true;
	return 0;
}

static void uncache(struct iod_store *s, uint64_t ino, uint32_t column)
{
	struct sub *e = store_cache_find(s, ino, column);

	if (e) {
		cache_remove(s, e);
		if (e->fd >= 0)
			close(e->fd);
		free(e);
	}
}

int store_unlink(struct iod_store *s, uint64_t ino, uint32_t column)
{
	char rel[48];
	int rc;

	uncache(s, ino, column);
	rc = store_rel_subpath(ino, column, rel, sizeof(rel));
	if (rc < 0)
		return rc;
	store_unlinkq_settle(s, ino, column, rel);
	if (unlinkat(s->sub_fd, rel, 0) < 0 && errno != ENOENT)
		return -errno;
	store_index_removed(s, ino, column);
	return store_csum_forget(s, ino, column);
}

int store_unlink_later(struct iod_store *s, uint64_t ino, uint32_t column)
{
	uint64_t key = store_obj(ino, column) + 1;
	int rc;

	if (store_check_ids(ino, column) < 0)
		return -EINVAL;
	uncache(s, ino, column);
	store_csum_uncache(s, ino, column);   /* unlinked on another thread */
	pthread_mutex_lock(&s->unlink_lock);
	if (tw_hmap_get(&s->unlink_q, key) != NULL) {
		rc = 0;
	} else {
		rc = tw_hmap_put(&s->unlink_q, key, (void *)1);
		if (rc == 0)
			atomic_fetch_add(&s->unlink_pending, 1);
	}
	pthread_mutex_unlock(&s->unlink_lock);
	if (rc < 0)
		return store_unlink(s, ino, column);
	store_index_removed(s, ino, column);  /* gone for readers now (S4) */
	return 0;
}

/* One drain of the queue (drain_lock held): the first error. */
static int unlinkq_run(struct iod_store *s)
{
	size_t it = 0;
	int rc = 0;

	pthread_mutex_lock(&s->unlink_lock);
	while (s->unlink_q.count > 0) {
		uint64_t key;
		void *v;
		char rel[48];

		/* The cursor survives the unlocked unlinkat (deleting visited
		 * keys moves no unvisited one past it); a settle's delete may,
		 * so at the end look again from the top. */
		if (!tw_hmap_next(&s->unlink_q, &it, &key, &v)) {
			it = 0;
			continue;
		}
		tw_hmap_del(&s->unlink_q, key);
		s->unlink_busy = key;
		pthread_mutex_unlock(&s->unlink_lock);
		/* a failure is recorded before drain_lock is let go: a drain
		 * that runs next must see it (the checkpoint's, whose tail
		 * would move) */
		if (store_rel_subpath(store_obj_ino(key - 1),
				store_obj_column(key - 1), rel,
				sizeof(rel)) == 0 &&
		    ((unlinkat(s->sub_fd, rel, 0) < 0 && errno != ENOENT) ||
		     (s->csum_fd >= 0 && unlinkat(s->csum_fd, rel, 0) < 0 &&
		      errno != ENOENT))) {
			int err = -errno;

			if (rc == 0)
				rc = err;
			unlink_failed(s, rel, err);
		}
		pthread_mutex_lock(&s->unlink_lock);
		s->unlink_busy = 0;
		atomic_fetch_sub(&s->unlink_pending, 1);
		pthread_cond_broadcast(&s->unlink_cond);
	}
	pthread_mutex_unlock(&s->unlink_lock);
	return rc;
}

int store_unlinkq_drain(struct iod_store *s)
{
	int rc;

	pthread_mutex_lock(&s->drain_lock);
	rc = unlinkq_run(s);
	pthread_mutex_unlock(&s->drain_lock);
	/* a failure of a drainer's or a settle's fails this drain too */
	pthread_mutex_lock(&s->unlink_lock);
	if (rc == 0)
		rc = s->unlink_err;
	pthread_mutex_unlock(&s->unlink_lock);
	return rc;
}

/* The drainer: drains until it finds the queue empty; it says so under
 * the lock, so a kick after that starts another. */
static void *drainer_main(void *arg)
{
	struct iod_store *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->drain_lock);
		(void)unlinkq_run(s);   /* it records a failure itself */
		pthread_mutex_unlock(&s->drain_lock);
		pthread_mutex_lock(&s->unlink_lock);
		if (s->unlink_q.count == 0) {
			s->drainer_running = false;
			pthread_mutex_unlock(&s->unlink_lock);
			return NULL;
		}
		pthread_mutex_unlock(&s->unlink_lock);
	}
}

void store_unlinkq_kick(struct iod_store *s)
{
	bool start;

	pthread_mutex_lock(&s->unlink_lock);
	start = s->unlink_q.count > 0 && !s->drainer_running;
	if (start)
		s->drainer_running = true;
	pthread_mutex_unlock(&s->unlink_lock);
	if (!start)
		return;
	/* the last one said it is done: it returns at once */
	if (s->drainer_started)
		pthread_join(s->drainer, NULL);
	s->drainer_started =
		pthread_create(&s->drainer, NULL, drainer_main, s) == 0;
	if (!s->drainer_started) {
		/* the checkpoint's drain, or a settle, does them */
		pthread_mutex_lock(&s->unlink_lock);
		s->drainer_running = false;
		pthread_mutex_unlock(&s->unlink_lock);
	}
}

/* --------------------------------------------------- write-intent xattr */

static uint32_t wil_crc(const struct wil_disk *d, unsigned n)
{
	uint32_t crc = tw_crc32c(0, d, 12);

	return tw_crc32c(crc, d->r, 16u * n);
}

int store_wil_get(struct sub *e, struct wil_range *r, unsigned *n, bool *all)
{
	struct wil_disk d;
	ssize_t got = fgetxattr(e->fd, WIL_XATTR, &d, sizeof(d));
	unsigned cnt;

	*n = 0;
	*all = false;
	if (got < 0)
		return errno == ENODATA ? 0 : -errno;
	cnt = got >= 16 ? le16toh(d.n) : 0;
	if (got < 16 || le32toh(d.magic) != WIL_MAGIC ||
	    le16toh(d.version) != WIL_VERSION || cnt > WIL_MAX_RANGES ||
	    (size_t)got != 16u + 16u * cnt ||
	    le32toh(d.crc) != wil_crc(&d, cnt)) {
		tw_log_rl(TW_LOG_WARN, "subfile %016" PRIx64 ".%" PRIu32
			  ": invalid " WIL_XATTR "; treating the whole "
			  "subfile as marked", e->ino, e->column);
		*all = true;
		return 0;
	}
	*all = (le32toh(d.flags) & WIL_F_ALL) != 0;
	for (unsigned i = 0; i < cnt; i++) {
		r[i].first = le64toh(d.r[i].first);
		r[i].count = le64toh(d.r[i].count);
	}
	*n = cnt;
	return 0;
}

int store_wil_set(struct sub *e, const struct wil_range *r, unsigned n,
		  bool all)
{
	struct wil_disk d;

	if (n == 0 && !all) {
		if (fremovexattr(e->fd, WIL_XATTR) < 0 && errno != ENODATA)
			return -errno;
		return 0;
	}
	if (n > WIL_MAX_RANGES)
		return -EINVAL;
	memset(&d, 0, sizeof(d));
	d.magic = htole32(WIL_MAGIC);
	d.version = htole16(WIL_VERSION);
	d.n = htole16((uint16_t)n);
	d.flags = htole32(all ? WIL_F_ALL : 0);
	for (unsigned i = 0; i < n; i++) {
		d.r[i].first = htole64(r[i].first);
		d.r[i].count = htole64(r[i].count);
	}
	d.crc = htole32(wil_crc(&d, n));
	if (fsetxattr(e->fd, WIL_XATTR, &d, 16u + 16u * n, 0) < 0)
		return -errno;
	return 0;
}

/* blocks less n, at least 0 */
static fsblkcnt_t blocks_less(fsblkcnt_t blocks, uint64_t n)
{
	return blocks > n ? blocks - (fsblkcnt_t)n : 0;
}

void iod_store_space_why(struct iod_store *s, char *buf, size_t len)
{
	struct jbd_stats js;
	struct statvfs sv;
	uint64_t bs;

	if (fstatvfs(s->dir_fd, &sv) < 0) {
		snprintf(buf, len, "statvfs of %s: %s", s->dir,
			 strerror(errno));
		return;
	}
	bs = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	jbd_stats(s->j, &js);
	snprintf(buf, len, "%" PRIu64 " MiB free in %s: %" PRIu64 " MiB kept "
		 "in reserve ([iod] reserve), %" PRIu64 " MiB of journaled "
		 "data not yet home", (uint64_t)sv.f_bavail * bs >> 20, s->dir,
		 s->reserve >> 20, js.pending_home >> 20);
}

int iod_store_statfs(struct iod_store *s, struct statvfs *out)
{
	struct jbd_stats js;
	uint64_t bs, pending, reserve;

	if (fstatvfs(s->dir_fd, out) < 0)
		return -errno;
	/* What writes can still fill: admission (J13) keeps the reserve
	 * free and counts the log's data not yet home as used.  The reserve
	 * is free but not available, as ext4's blocks kept for root. */
	bs = out->f_frsize ? out->f_frsize : out->f_bsize;
	if (bs == 0)
		return 0;
	jbd_stats(s->j, &js);
	pending = (js.pending_home + bs - 1) / bs;
	reserve = (s->reserve + bs - 1) / bs;
	/* pending_home is a worst case (rewrites count as new space): when
	 * it takes more than half of what would be available, have the
	 * journal put the data home now, so that the next statfs shows what
	 * home really holds, not a disk (nearly) full until the log fills. */
	if (pending && out->f_bavail < 2 * pending + reserve)
		jbd_want_home(s->j);
	out->f_bfree = blocks_less(out->f_bfree, pending);
	out->f_bavail = blocks_less(out->f_bavail, pending + reserve);
	return 0;
}
