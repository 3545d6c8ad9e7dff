/* store_sync.c - durability at home: fsync of subfiles and of the
 * directories their creations and unlinks changed (invariants S3, S4 and
 * S6 of store.c), for the journal's checkpoint, ordered mode's commits and
 * writeback mode's fsync.
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
#include <sys/stat.h>
#include <unistd.h>

static int sync_dirs(struct iod_store *s, uint64_t ino, uint8_t dirsync)
{
	unsigned ab, cd;
	char rel[8];
	int rc = 0, r;

	if (!dirsync)
		return 0;
	store_sub_dirs(ino, &ab, &cd);
	if (dirsync & DS_CD) {
		snprintf(rel, sizeof(rel), "%02x/%02x", ab, cd);
		r = store_fsync_dirat(s->sub_fd, rel);
		rc = rc ? rc : r;
	}
	if (dirsync & DS_AB) {
		snprintf(rel, sizeof(rel), "%02x", ab);
		r = store_fsync_dirat(s->sub_fd, rel);
		rc = rc ? rc : r;
	}
	if ((dirsync & DS_TOP) && fsync(s->sub_fd) < 0)
		rc = rc ? rc : -errno;
	return rc;
}

bool store_sub_exists(struct iod_store *s, uint64_t ino, uint32_t column)
{
	struct sub *e = store_cache_find(s, ino, column);
	struct stat st;
	char rel[48];

	if (e != NULL)
		return e->fd >= 0;
	if (store_rel_subpath(ino, column, rel, sizeof(rel)) < 0)
		return false;
	store_unlinkq_settle(s, ino, column, rel);
	return fstatat(s->sub_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* ops.home_sync of the journal: every object's data and xattrs, the
 * directory entries of its creation (S3) or of its unlink. */
int store_sync_objs(struct iod_store *s, const uint64_t *objs, size_t n)
{
	int rc = store_unlinkq_drain(s);   /* S4: before their entries sync */

	for (size_t i = 0; i < n; i++) {
		uint64_t ino = store_obj_ino(objs[i]);
		uint32_t column = store_obj_column(objs[i]);
		struct sub *e = store_cache_find(s, ino, column);
		uint8_t ds = DS_CD | DS_AB | DS_TOP;   /* unknown: all */
		int r = 0;

		if (e != NULL && e->fd < 0) {
			ds = DS_CD;   /* known absent (S5): its entry */
		} else if (e == NULL) {
			char rel[48];
			int fd;

			if (store_rel_subpath(ino, column, rel, sizeof(rel)) < 0)
				continue;
			fd = openat(s->sub_fd, rel, O_RDONLY | O_NOFOLLOW |
				    O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0) {
				if (fsync(fd) < 0)
					r = -errno;
				close(fd);
			} else if (errno != ENOENT) {
				r = -errno;
			} else {
				ds = DS_CD;   /* unlinked: its entry */
			}
		} else {
			if (fsync(e->fd) < 0)
				r = -errno;
			ds = e->dirsync;
		}
		if (r == 0)
			r = sync_dirs(s, ino, ds);
		if (r == 0)
			r = store_csum_sync(s, ino, column);
		if (r == 0 && e != NULL)
			e->dirsync = 0;
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

/* S6: the directories on ino's path with an entry not yet durable (every
 * one when `all`), relative to subfiles/ ("." for itself); how many. */
static size_t path_dirty_dirs(const struct iod_store *s, uint64_t ino,
			      bool all, char rel[3][8])
{
	unsigned ab, cd;
	size_t n = 0;

	store_sub_dirs(ino, &ab, &cd);
	if (all || store_bit_get(s->dirty_cd[ab], cd))
		snprintf(rel[n++], sizeof(rel[0]), "%02x/%02x", ab, cd);
	if (all || store_bit_get(s->dirty_ab, ab))
		snprintf(rel[n++], sizeof(rel[0]), "%02x", ab);
	if (all || s->dirty_top)
		snprintf(rel[n++], sizeof(rel[0]), ".");
	return n;
}

/* S6: the directories on ino's path are durable (or taken to be). */
static void path_dirs_synced(struct iod_store *s, uint64_t ino)
{
	unsigned ab, cd;

	store_sub_dirs(ino, &ab, &cd);
	store_bit_clear(s->dirty_cd[ab], cd);
	store_bit_clear(s->dirty_ab, ab);
	s->dirty_top = false;
}

/* S6: a new descriptor of subfile (ino, c) to fsync, if it may hold data
 * not yet durable: 1 with *fd, 0 when synced since its last change,
 * SUB_ABSENT when there is no such subfile, or -errno.  *cached: the cache
 * entry's flag is the one to clear once the descriptor is taken. */
#define SUB_ABSENT 2
static int sub_sync_fd(struct iod_store *s, uint64_t ino, uint32_t c,
		       int *fd, bool *cached)
{
	struct sub *e = store_cache_find(s, ino, c);
	char rel[48];

	*cached = e != NULL;
	if (e != NULL) {
		if (e->fd < 0)
			return SUB_ABSENT;   /* known absent (S5) */
		if (!e->unsynced)
			return 0;
		*fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
		return *fd < 0 ? -errno : 1;
	}
	if (store_rel_subpath(ino, c, rel, sizeof(rel)) < 0)
		return SUB_ABSENT;
	store_unlinkq_settle(s, ino, c, rel);   /* S4 */
	*fd = store_open_existing(s, rel);
	if (*fd == -ENOENT)
		return SUB_ABSENT;
	return *fd < 0 ? *fd : 1;
}

int store_sync_fds(struct iod_store *s, uint64_t ino, uint32_t columns,
		   int fds[STORE_SYNC_FDS_MAX], size_t *n, uint32_t *cols)
{
	char dirs[3][8];
	size_t k = 0, nd;
	int rc = 0;

	*cols = 0;
	for (uint32_t c = 0; c < IOD_MAX_COLUMNS && rc == 0; c++) {
		bool cached;
		int fd;

		if (columns != 0 && !((columns >> c) & 1))
			continue;
		rc = sub_sync_fd(s, ino, c, &fd, &cached);
		if (rc == 1) {
			fds[k++] = fd;
			if (cached)
				*cols |= 1u << c;
		}
		rc = TW_MIN(rc, 0);
	}
	/* An absent column has no data, and its unlink is a journal record,
	 * which the log sync after these makes durable.  A directory that is
	 * gone has nothing to sync (as fsync_dirat). */
	nd = path_dirty_dirs(s, ino, false, dirs);
	for (size_t i = 0; i < nd && rc == 0; i++) {
		int fd = openat(s->sub_fd, dirs[i],
				O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd >= 0)
			fds[k++] = fd;
		else if (errno != ENOENT)
			rc = -errno;
	}
	assert(k <= STORE_SYNC_FDS_MAX);
	if (rc < 0) {
		while (k > 0)
			close(fds[--k]);
		*cols = 0;
	}
	*n = k;
	return rc;
}

void store_sync_fds_taken(struct iod_store *s, uint64_t ino, uint32_t cols)
{
	for (uint32_t c = 0; c < IOD_MAX_COLUMNS; c++) {
		struct sub *e = (cols >> c) & 1 ? store_cache_find(s, ino, c) : NULL;

		if (e != NULL)
			e->unsynced = false;
	}
	path_dirs_synced(s, ino);
}

/* objs (sorted) are taken: whatever is written from now on sets their
 * bits again. */
static void objs_taken(struct iod_store *s, const uint64_t *objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t ino = store_obj_ino(objs[i]);
		struct sub *e = store_cache_find(s, ino, store_obj_column(objs[i]));

		if (e != NULL)
			e->unsynced = false;
		path_dirs_synced(s, ino);
	}
}

int store_sync_objs_fds(struct iod_store *s, const uint64_t *objs, size_t n,
			int *fds, size_t max)
{
	size_t k = 0;
	int rc = 0;

	/* A creation's batch is one syncfs: each directory's fsync is one
	 * more flush of the disk cache (a 4 KiB file in a new directory,
	 * here: 189 us with its own fsync, 300 with its two directories',
	 * 224-255 with a syncfs; small_4k through the mount lost a fifth). */
	for (size_t i = 0; i < n; i++) {
		char dirs[3][8];

		if (path_dirty_dirs(s, store_obj_ino(objs[i]), false, dirs) > 0) {
			objs_taken(s, objs, n);
			return -E2BIG;
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		bool cached;
		int fd;

		rc = sub_sync_fd(s, store_obj_ino(objs[i]),
				 store_obj_column(objs[i]), &fd, &cached);
		if (rc == SUB_ABSENT) {
			/* unlinked since it was written in place: its pages
			 * are gone with the inode, so only a durable unlink
			 * keeps the older content from coming back after a
			 * crash; the syncfs makes it durable */
			rc = -E2BIG;
		} else if (rc == 1) {
			if (k == max) {
				close(fd);
				rc = -E2BIG;
				break;
			}
			fds[k++] = fd;
			rc = 0;
		}
	}
	if (rc < 0) {
		while (k > 0)
			close(fds[--k]);
		if (rc != -E2BIG)
			return rc;
	}
	objs_taken(s, objs, n);
	return rc < 0 ? rc : (int)k;
}

int store_sync_path(struct iod_store *s, uint64_t ino, bool all)
{
	char dirs[3][8];
	size_t nd = path_dirty_dirs(s, ino, all, dirs);
	int rc = 0;

	for (size_t i = 0; i < nd && rc == 0; i++)
		rc = store_fsync_dirat(s->sub_fd, dirs[i]);
	if (rc == 0)
		path_dirs_synced(s, ino);
	return rc;
}

int store_inplace(struct jbd_handle *h, struct sub *e)
{
	e->unsynced = true;
	return jbd_inplace(h, store_obj(e->ino, e->column));
}
