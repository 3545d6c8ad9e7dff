/* lock.c - the byte-range lock table (lock.h): conflicts, split and merge,
 * release by owner, file or session, FIFO waiters and deadlock detection.
 * It decides nothing about time, grace or the network (mgrd does).
 *
 * Rules (Linux fs/locks.c; test/unit/test_lock.c checks each by number):
 *   L1 Locks of different kinds never conflict (flock vs fcntl).
 *   L2 Locks of one owner (session, owner) never conflict with each other.
 *   L3 Two locks of different owners conflict when their ranges overlap
 *      and at least one is a write lock.
 *   L4 Setting a lock (or UNLCK) first removes the owner's locks of that
 *      kind on the range, splitting a lock that sticks out on one or both
 *      sides; a lock of another type inside the range is replaced
 *      (upgrade, downgrade).
 *   L5 A new lock merges with the owner's locks of the same type that
 *      touch it (adjacent byte ranges); the merged lock takes the new
 *      lock's file and pid.
 *   L6 After any change, the owner's locks of one kind on an inode are
 *      disjoint.
 *   L7 Waiters are granted in arrival order among those that fit.
 */
#include "lock.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

struct tw_lk_inode {
	struct tw_lk *locks;              /* insertion order (F_GETLK) */
	struct tw_lk_waiter *whead, *wtail;
};

void tw_lk_init(struct tw_lk_table *t)
{
	tw_hmap_init(&t->by_ino);
	t->n_locks = 0;
	t->n_waiters = 0;
}

static void inode_free(struct tw_lk_inode *li)
{
	struct tw_lk *l, *next;

	for (l = li->locks; l; l = next) {
		next = l->next;
		free(l);
	}
	free(li);
}

void tw_lk_free(struct tw_lk_table *t)
{
	uint64_t k;
	void *v;

	assert(t->n_waiters == 0);
	for (size_t it = 0; tw_hmap_next(&t->by_ino, &it, &k, &v);)
		inode_free(v);
	tw_hmap_free(&t->by_ino);
	t->n_locks = 0;
}

static struct tw_lk_inode *inode_get(const struct tw_lk_table *t, uint64_t ino)
{
	return tw_hmap_get(&t->by_ino, ino);
}

static struct tw_lk_inode *inode_make(struct tw_lk_table *t, uint64_t ino)
{
	struct tw_lk_inode *li = inode_get(t, ino);

	if (li)
		return li;
	li = calloc(1, sizeof(*li));
	if (!li)
		return NULL;
	if (tw_hmap_put(&t->by_ino, ino, li) < 0) {
		free(li);
		return NULL;
	}
	return li;
}

/* Forget an inode without locks or waiters. */
static void inode_gc(struct tw_lk_table *t, uint64_t ino, struct tw_lk_inode *li)
{
	if (li->locks || li->whead)
		return;
	tw_hmap_del(&t->by_ino, ino);
	free(li);
}

static bool same_owner(const struct tw_lk *a, const struct tw_lk *b)
{
	return a->session == b->session && a->owner == b->owner;
}

static bool overlap(const struct tw_lk *a, const struct tw_lk *b)
{
	return a->start <= b->end && b->start <= a->end;
}

/* L1-L3 */
static bool conflicts(const struct tw_lk *held, const struct tw_lk *want)
{
	return held->kind == want->kind && !same_owner(held, want) &&
	       overlap(held, want) &&
	       (held->type == TW_LK_WRLCK || want->type == TW_LK_WRLCK);
}

static const struct tw_lk *first_conflict(const struct tw_lk_inode *li,
					  const struct tw_lk *want)
{
	for (const struct tw_lk *l = li ? li->locks : NULL; l; l = l->next)
		if (conflicts(l, want))
			return l;
	return NULL;
}

bool tw_lk_test(const struct tw_lk_table *t, uint64_t ino,
		const struct tw_lk *want, struct tw_lk *conflict)
{
	const struct tw_lk *l = first_conflict(inode_get(t, ino), want);

	if (!l)
		return false;
	if (conflict) {
		*conflict = *l;
		conflict->next = NULL;
	}
	return true;
}

static bool valid(const struct tw_lk *w)
{
	return w->type <= TW_LK_WRLCK && w->kind <= TW_LK_FLOCK &&
	       w->start <= w->end;
}

int tw_lk_set(struct tw_lk_table *t, uint64_t ino, const struct tw_lk *want)
{
	struct tw_lk_inode *li;
	struct tw_lk *spare[2] = { NULL, NULL }, *nl = NULL, **pp, *l;
	uint64_t start = want->start, end = want->end;
	int nspare = 0;

	if (!valid(want))
		return -EINVAL;
	li = want->type == TW_LK_UNLCK ? inode_get(t, ino) : inode_make(t, ino);
	if (!li)
		return want->type == TW_LK_UNLCK ? 0 : -ENOMEM;
	/* Everything that can fail happens before the first change: a split
	 * needs one node, the new lock another. */
	spare[0] = malloc(sizeof(*spare[0]));
	spare[1] = malloc(sizeof(*spare[1]));
	if (!spare[0] || !spare[1]) {
		free(spare[0]);
		free(spare[1]);
		inode_gc(t, ino, li);
		return -ENOMEM;
	}
	/* L4: cut [start, end] out of the owner's locks of this kind; L5:
	 * absorb its touching locks of the same type into the new range. */
	for (pp = &li->locks; (l = *pp);) {
		bool mine = l->kind == want->kind && same_owner(l, want);
		bool touch_left = end != TW_LK_EOF && l->start == end + 1;
		bool touch_right = start != 0 && l->end == start - 1;

		if (!mine) {
			pp = &l->next;
			continue;
		}
		if (want->type != TW_LK_UNLCK && l->type == want->type &&
		    (overlap(l, want) || touch_left || touch_right)) {
			/* Merged: the new lock grows over it (computed on
			 * the original range: owner's locks are disjoint,
			 * L6, so at most one sticks out on each side). */
			if (l->start < start)
				start = l->start;
			if (l->end > end)
				end = l->end;
			*pp = l->next;
			free(l);
			t->n_locks--;
			continue;
		}
		if (!overlap(l, want)) {
			pp = &l->next;
			continue;
		}
		if (l->start < want->start && l->end > want->end) {
			/* Split: keep [l->start, want->start - 1] in l and
			 * add the right part behind it. */
			struct tw_lk *r = spare[nspare++];

			*r = *l;
			r->start = want->end + 1;
			l->end = want->start - 1;
			r->next = l->next;
			l->next = r;
			t->n_locks++;
			pp = &r->next;
		} else if (l->start < want->start) {
			l->end = want->start - 1;
			pp = &l->next;
		} else if (l->end > want->end) {
			l->start = want->end + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			free(l);
			t->n_locks--;
		}
	}
	if (want->type != TW_LK_UNLCK) {
		nl = spare[nspare++];
		*nl = *want;
		nl->start = start;
		nl->end = end;
		nl->next = NULL;
		*pp = nl;   /* pp is the tail link */
		t->n_locks++;
	}
	assert(nspare <= 2);
	while (nspare < 2)
		free(spare[nspare++]);
	inode_gc(t, ino, li);
	return 0;
}

/* Remove the locks of ino for which match() holds; returns the count. */
static unsigned drop_if(struct tw_lk_table *t, uint64_t ino,
			bool (*match)(const struct tw_lk *l, uint64_t a,
				      uint64_t b),
			uint64_t a, uint64_t b)
{
	struct tw_lk_inode *li = inode_get(t, ino);
	struct tw_lk **pp, *l;
	unsigned n = 0;

	if (!li)
		return 0;
	for (pp = &li->locks; (l = *pp);) {
		if (match(l, a, b)) {
			*pp = l->next;
			free(l);
			t->n_locks--;
			n++;
		} else {
			pp = &l->next;
		}
	}
	inode_gc(t, ino, li);
	return n;
}

static bool match_owner(const struct tw_lk *l, uint64_t session, uint64_t owner)
{
	return l->kind == TW_LK_POSIX && l->session == session &&
	       l->owner == owner;
}

static bool match_file(const struct tw_lk *l, uint64_t session, uint64_t file)
{
	return l->session == session && l->file == file;
}

static bool match_session(const struct tw_lk *l, uint64_t session,
			  uint64_t unused)
{
	(void)unused;
	return l->session == session;
}

unsigned tw_lk_drop_owner(struct tw_lk_table *t, uint64_t ino,
			  uint64_t session, uint64_t owner)
{
	return drop_if(t, ino, match_owner, session, owner);
}

unsigned tw_lk_drop_file(struct tw_lk_table *t, uint64_t ino,
			 uint64_t session, uint64_t file)
{
	return drop_if(t, ino, match_file, session, file);
}

unsigned tw_lk_drop_session(struct tw_lk_table *t, uint64_t session)
{
	uint64_t *inos, k;
	size_t n = 0;
	unsigned dropped = 0;
	void *v;

	/* drop_if may delete map entries: collect the keys first. */
	inos = malloc((t->by_ino.count ? t->by_ino.count : 1) * sizeof(*inos));
	if (!inos) {
		/* One at a time, restarting after every deletion. */
		for (bool again = true; again;) {
			again = false;
			for (size_t it = 0; tw_hmap_next(&t->by_ino, &it, &k, &v);) {
				unsigned d = drop_if(t, k, match_session,
						     session, 0);

				if (d) {
					dropped += d;
					again = true;
					break;
				}
			}
		}
		return dropped;
	}
	for (size_t it = 0; tw_hmap_next(&t->by_ino, &it, &k, &v);)
		inos[n++] = k;
	for (size_t i = 0; i < n; i++)
		dropped += drop_if(t, inos[i], match_session, session, 0);
	free(inos);
	return dropped;
}

bool tw_lk_held(const struct tw_lk_table *t, uint64_t ino)
{
	const struct tw_lk_inode *li = inode_get(t, ino);

	return li && li->locks;
}

const struct tw_lk *tw_lk_next(const struct tw_lk_table *t, size_t *it,
			       uint64_t *ino, const struct tw_lk *prev)
{
	uint64_t k;
	void *v;

	if (prev && prev->next)
		return prev->next;
	while (tw_hmap_next(&t->by_ino, it, &k, &v)) {
		struct tw_lk_inode *li = v;

		if (li->locks) {
			*ino = k;
			return li->locks;
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- waiters */

int tw_lk_wait_add(struct tw_lk_table *t, struct tw_lk_waiter *w)
{
	struct tw_lk_inode *li = inode_make(t, w->ino);

	if (!li)
		return -ENOMEM;
	w->next = NULL;
	w->prev = li->wtail;
	if (li->wtail)
		li->wtail->next = w;
	else
		li->whead = w;
	li->wtail = w;
	t->n_waiters++;
	return 0;
}

void tw_lk_wait_del(struct tw_lk_table *t, struct tw_lk_waiter *w)
{
	struct tw_lk_inode *li = inode_get(t, w->ino);

	assert(li);
	if (w->prev)
		w->prev->next = w->next;
	else
		li->whead = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		li->wtail = w->prev;
	w->next = w->prev = NULL;
	t->n_waiters--;
	inode_gc(t, w->ino, li);
}

struct tw_lk_waiter *tw_lk_waiters(const struct tw_lk_table *t, uint64_t ino)
{
	struct tw_lk_inode *li = inode_get(t, ino);

	return li ? li->whead : NULL;
}

/* L7 */
struct tw_lk_waiter *tw_lk_wait_grantable(const struct tw_lk_table *t,
					  uint64_t ino)
{
	const struct tw_lk_inode *li = inode_get(t, ino);

	for (struct tw_lk_waiter *w = li ? li->whead : NULL; w; w = w->next)
		if (!first_conflict(li, &w->want))
			return w;
	return NULL;
}

/* A waiter of owner (session, owner) of the POSIX kind, or NULL. */
static const struct tw_lk_waiter *waiter_of(const struct tw_lk_table *t,
					    const struct tw_lk *who)
{
	uint64_t k;
	void *v;

	for (size_t it = 0; tw_hmap_next(&t->by_ino, &it, &k, &v);) {
		const struct tw_lk_inode *li = v;

		for (const struct tw_lk_waiter *w = li->whead; w; w = w->next)
			if (w->want.kind == TW_LK_POSIX &&
			    same_owner(&w->want, who))
				return w;
	}
	return NULL;
}

bool tw_lk_deadlock(const struct tw_lk_table *t, uint64_t ino,
		    const struct tw_lk *want)
{
	const struct tw_lk *blocker;

	if (want->kind != TW_LK_POSIX)
		return false;
	blocker = first_conflict(inode_get(t, ino), want);
	for (unsigned i = 0; blocker && i < TW_LK_DEADLOCK_DEPTH; i++) {
		const struct tw_lk_waiter *w;

		if (same_owner(blocker, want))
			return true;
		w = waiter_of(t, blocker);
		if (!w)
			return false;
		blocker = first_conflict(inode_get(t, w->ino), &w->want);
	}
	return false;
}
