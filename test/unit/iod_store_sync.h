/* iod_store_sync.h - synchronous wrappers of the iod store's asynchronous
 * mutations for unit tests: start the request, then drive the journal with
 * iod_store_wait until its callback ran.  Each returns what the request
 * completed with (0 or -errno), or the call's own error.  A callback that
 * never runs while the journal is idle is reported as -EDEADLK. */
#ifndef TWINFS_TEST_IOD_STORE_SYNC_H
#define TWINFS_TEST_IOD_STORE_SYNC_H

#include <errno.h>

#include "iod_int.h"

static inline void sync_cb(void *arg, int rc)
{
	int *flag = arg;

	*flag = rc == 0 ? 1 : rc;
}

static inline int sync_wait(struct iod_store *s, int *flag)
{
	while (*flag == 0)
		if (iod_store_wait(s) == 1 && *flag == 0)
			return -EDEADLK;
	return *flag == 1 ? 0 : *flag;
}

static inline int s_write_x(struct iod_store *s, uint64_t ino, uint32_t col,
			    uint64_t off, const void *buf, size_t len,
			    uint64_t gen, const struct iod_sub_layout *l,
			    bool sync, struct iod_sub_stat *st)
{
	int flag = 0;
	int rc = iod_store_write(s, ino, col, off, buf, len, NULL, gen, l, sync, st,
				 sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

static inline int s_write(struct iod_store *s, uint64_t ino, uint32_t col,
			  uint64_t off, const void *buf, size_t len,
			  uint64_t gen, const struct iod_sub_layout *l,
			  struct iod_sub_stat *st)
{
	return s_write_x(s, ino, col, off, buf, len, gen, l, false, st);
}

static inline int s_truncate(struct iod_store *s, uint64_t ino, uint32_t col,
			     uint64_t size, uint64_t gen,
			     struct iod_sub_stat *st)
{
	int flag = 0;
	int rc = iod_store_truncate(s, ino, col, size, gen, st, sync_cb,
				    &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

/* column UINT32_MAX: every column (as the old synchronous interface). */
static inline int s_delete(struct iod_store *s, uint64_t ino, uint32_t col)
{
	int flag = 0;
	int rc = col == UINT32_MAX
		? iod_store_delete(s, ino, NULL, 0, sync_cb, &flag)
		: iod_store_delete(s, ino, &col, 1, sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

static inline int s_punch(struct iod_store *s, uint64_t ino, uint32_t col,
			  uint64_t off, uint64_t len, uint64_t gen,
			  struct iod_sub_stat *st)
{
	int flag = 0;
	int rc = iod_store_punch(s, ino, col, off, len, gen, false, st,
				 sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

static inline int s_fallocate(struct iod_store *s, uint64_t ino, uint32_t col,
			      uint64_t off, uint64_t len, uint64_t gen,
			      const struct iod_sub_layout *l,
			      struct iod_sub_stat *st)
{
	int flag = 0;
	int rc = iod_store_fallocate(s, ino, col, off, len, gen, l, st,
				     sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

static inline int s_fsync(struct iod_store *s, uint64_t ino)
{
	int flag = 0;
	int rc = iod_store_fsync(s, ino, 0, sync_cb, &flag);

	return rc < 0 ? rc : sync_wait(s, &flag);
}

#endif
