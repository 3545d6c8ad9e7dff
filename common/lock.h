/* lock.h - the byte-range lock table shared by mgrd (the cluster-wide
 * table, mgrd/handlers_lock.c) and the client (the mirror of its own granted
 * locks that it reclaims after an mgrd restart, fuse-client/ops_lock.c).
 *
 * Pure: no I/O, no clock, no threads (callers serialise).  Semantics are
 * Linux's (fs/locks.c), see common/lock.c for the numbered rules:
 *   - two kinds that never conflict with each other: POSIX byte-range locks
 *     (fcntl F_SETLK and OFD locks: FUSE sends both with an owner id) and
 *     flock (whole file, owner = the open file);
 *   - an owner is (session, owner id); its locks never conflict with
 *     each other; a new lock replaces the owner's locks on its range
 *     (split, upgrade, downgrade) and merges with adjacent or overlapping
 *     locks of the same type;
 *   - waiters are kept FIFO per inode for deadlock detection and grants.
 * Ranges are inclusive [start, end]; end = TW_LK_EOF means "to EOF".
 */
#ifndef TWINFS_COMMON_LOCK_H
#define TWINFS_COMMON_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"

#define TW_LK_EOF        UINT64_MAX
#define TW_LK_DEADLOCK_DEPTH 64u   /* longest wait-for chain followed */

enum tw_lk_type { TW_LK_UNLCK = 0, TW_LK_RDLCK = 1, TW_LK_WRLCK = 2 };
enum tw_lk_kind { TW_LK_POSIX = 0, TW_LK_FLOCK = 1 };

/* One lock (held, asked for, or reported as the conflicting one). */
struct tw_lk {
	struct tw_lk *next;       /* per inode, insertion order */
	uint64_t session;         /* owner = (session, owner) */
	uint64_t owner;           /* FUSE lock_owner */
	uint64_t file;            /* the open file it was taken through */
	uint32_t pid;             /* the process that set it (F_GETLK) */
	uint8_t kind;             /* enum tw_lk_kind */
	uint8_t type;             /* enum tw_lk_type */
	uint64_t start, end;      /* inclusive; flock: 0, TW_LK_EOF */
};

/* A parked blocking request (F_SETLKW, flock without LOCK_NB). */
struct tw_lk_waiter {
	struct tw_lk_waiter *next, *prev;  /* per inode, FIFO */
	uint64_t ino;
	struct tw_lk want;
	void *arg;                /* the caller's (the parked request) */
};

struct tw_lk_inode;
struct tw_lk_table {
	struct tw_hmap by_ino;    /* ino -> struct tw_lk_inode */
	uint64_t n_locks;
	uint64_t n_waiters;
};

void tw_lk_init(struct tw_lk_table *t);
/* Frees every lock; waiters are the caller's and must be removed first. */
void tw_lk_free(struct tw_lk_table *t);

/* Does `want` (type RD or WR) conflict with a lock on ino?  Returns true
 * and copies the first conflicting lock (insertion order, as Linux's
 * F_GETLK) into *conflict (may be NULL). */
bool tw_lk_test(const struct tw_lk_table *t, uint64_t ino,
		const struct tw_lk *want, struct tw_lk *conflict);
/* Apply `want` for its owner without looking at other owners (callers test
 * first): UNLCK removes the owner's locks of that kind on the range, RD/WR
 * replace them.  0 or -ENOMEM (then nothing changed); -EINVAL for a bad
 * type, kind or range. */
int tw_lk_set(struct tw_lk_table *t, uint64_t ino, const struct tw_lk *want);
/* Remove every POSIX lock of (session, owner) on ino (close of any fd:
 * FUSE's FLUSH).  Returns how many were removed. */
unsigned tw_lk_drop_owner(struct tw_lk_table *t, uint64_t ino,
			  uint64_t session, uint64_t owner);
/* Remove every lock (both kinds) taken through `file` of session on ino
 * (the last close of an open file: FUSE's RELEASE; OFD and flock locks). */
unsigned tw_lk_drop_file(struct tw_lk_table *t, uint64_t ino,
			 uint64_t session, uint64_t file);
/* Remove every lock of a session (expired, or a client gone). */
unsigned tw_lk_drop_session(struct tw_lk_table *t, uint64_t session);

/* Any lock (of any owner or kind) on ino? */
bool tw_lk_held(const struct tw_lk_table *t, uint64_t ino);

/* Iterate over every lock: for (const struct tw_lk *l = NULL;
 * (l = tw_lk_next(t, &it, &ino, l));) with size_t it = 0. */
const struct tw_lk *tw_lk_next(const struct tw_lk_table *t, size_t *it,
			       uint64_t *ino, const struct tw_lk *prev);

/* Waiters.  `w` is the caller's memory; it stays linked until removed. */
int tw_lk_wait_add(struct tw_lk_table *t, struct tw_lk_waiter *w);
void tw_lk_wait_del(struct tw_lk_table *t, struct tw_lk_waiter *w);
/* The first waiter of ino (FIFO) whose request no longer conflicts, or
 * NULL.  The caller grants it (tw_lk_set) and removes it, then asks again. */
struct tw_lk_waiter *tw_lk_wait_grantable(const struct tw_lk_table *t,
					  uint64_t ino);
/* The first waiter of ino in FIFO order, or NULL; then ->next. */
struct tw_lk_waiter *tw_lk_waiters(const struct tw_lk_table *t, uint64_t ino);
/* Would parking `want` on ino close a cycle of owners waiting for each
 * other (POSIX kind only, as Linux's posix_locks_deadlock)?  Follows the
 * chain "blocked by a lock of X, X waits for a lock of Y, ..." up to
 * TW_LK_DEADLOCK_DEPTH steps. */
bool tw_lk_deadlock(const struct tw_lk_table *t, uint64_t ino,
		    const struct tw_lk *want);

#endif
