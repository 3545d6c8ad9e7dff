/* dlease.c - name leases on directories this mount made: LOOKUPs of names
 * that do not exist, answered without mgrd (proto/FORMAT.md "Name leases",
 * mgrd/dlease.c).
 *
 * The kernel asks LOOKUP before every create; in a directory being filled
 * (`tar x`, a job writing its outputs) the answer is always ENOENT, one
 * mgrd round trip each.  MKDIR's answer gives this session a lease on the
 * new, empty directory: until it ends, no other session adds a name there
 * (mgrd holds their requests back, recalling the lease first).  So the
 * names it has are the ones this mount added, and a LOOKUP of any other
 * name is answered ENOENT here, on the FUSE worker.
 *
 * What must hold:
 *   D1  A name this mount may have added is never answered ENOENT: it is
 *       counted in the directory's set before its request goes out
 *       (fc_dl_adding), and uncounted only when mgrd said it was removed
 *       (fc_dl_removed).  The set counts 64-bit name hashes, so a
 *       collision only sends a LOOKUP to mgrd.
 *   D2  A lease is used only before its expiry: the grant's or renewal's
 *       lease_ms counted from before its request was sent (mgrd counts
 *       from when it handled it), minus FC_DL_MARGIN_MS.
 *   D3  A recall drops the lease (under the lock the LOOKUPs take) before
 *       DIR_RETURN goes out, so no answer after mgrd's release uses it.
 *   D4  A grant or renewal that was in flight across a recall of any
 *       directory, or a reconnection to mgrd, is ignored (gen): its
 *       answer may come from before mgrd took the lease back, or be a
 *       retransmission's recorded reply.
 * An unmount gives every lease back (fc_dl_return_all): another mount's
 * create there need not wait for the expiry.
 * Bounded: FC_DL_DIRS directories (the least recently used goes), and a
 * directory with more than FC_DL_NAMES names stops being leased here.
 *
 * Any thread; everything is guarded by dl->lock.
 */
#include <stdlib.h>
#include <string.h>

#include "dlease.h"
#include "mgr.h"
#include "mount.h"

#define FC_DL_MARGIN_MS 50u
#define FC_DL_RETURN_WAIT_MS 1000u   /* the lease's length at mgrd */
#define FC_DL_NAMES     (1u << 20)

static uint64_t name_key(const char *s)
{
	uint64_t h = tw_fnv1a64(s, strlen(s));

	return h ? h : 1;   /* 0 is not a valid tw_hmap key */
}

void fc_dl_init(struct fc_dl *dl, bool on)
{
	memset(dl, 0, sizeof(*dl));
	pthread_mutex_init(&dl->lock, NULL);
	dl->on = on;
	dl->gen = 1;
	for (size_t i = 0; i < FC_DL_DIRS; i++)
		tw_hmap_init(&dl->dirs[i].names);
}

static void slot_clear(struct fc_dl_dir *d)
{
	d->dir = 0;
	d->expiry_ms = 0;
	tw_hmap_free(&d->names);
	tw_hmap_init(&d->names);
}

void fc_dl_free(struct fc_dl *dl)
{
	for (size_t i = 0; i < FC_DL_DIRS; i++)
		tw_hmap_free(&dl->dirs[i].names);
	pthread_mutex_destroy(&dl->lock);
}

void fc_dl_log_stats(struct fc_dl *dl)
{
	if (dl->n_grants)
		tw_info("name leases: %llu granted, %llu lookups answered "
			"without mgrd, %llu recalled, %llu given back at "
			"unmount",
			(unsigned long long)dl->n_grants,
			(unsigned long long)dl->n_absent,
			(unsigned long long)dl->n_recalls,
			(unsigned long long)dl->n_returned);
}

static struct fc_dl_dir *find(struct fc_dl *dl, uint64_t dir)
{
	for (size_t i = 0; i < FC_DL_DIRS; i++)
		if (dl->dirs[i].dir == dir)
			return &dl->dirs[i];
	return NULL;
}

uint64_t fc_dl_ticket(struct fc_dl *dl)
{
	uint64_t g;

	pthread_mutex_lock(&dl->lock);
	g = dl->gen;
	pthread_mutex_unlock(&dl->lock);
	return g;
}

bool fc_dl_absent(struct fc_dl *dl, uint64_t parent, const char *name,
		  uint64_t now_ms)
{
	struct fc_dl_dir *d;
	bool absent = false;

	if (!dl->on)
		return false;
	pthread_mutex_lock(&dl->lock);
	d = find(dl, parent);
	if (d && now_ms < d->expiry_ms) {
		absent = tw_hmap_get(&d->names, name_key(name)) == NULL;
		d->last_use_ms = now_ms;
		if (absent)
			dl->n_absent++;
	}
	pthread_mutex_unlock(&dl->lock);
	return absent;
}

/* Count name in or out of parent's set (D1), if parent is leased;
 * returns gen as it is after that. */
static uint64_t count(struct fc_dl *dl, uint64_t parent, const char *name,
		      int delta)
{
	struct fc_dl_dir *d;
	uint64_t k = name_key(name), gen;
	uintptr_t n;

	if (!dl->on)
		return 0;
	pthread_mutex_lock(&dl->lock);
	d = find(dl, parent);
	n = d ? (uintptr_t)tw_hmap_get(&d->names, k) : 0;
	if (d && delta > 0) {
		/* Without room to count it, the lease is no use. */
		if (d->names.count >= FC_DL_NAMES ||
		    tw_hmap_put(&d->names, k, (void *)(n + 1)) < 0)
			slot_clear(d);
	} else if (d && n > 1) {
		tw_hmap_put(&d->names, k, (void *)(n - 1));   /* no growth */
	} else if (d && n == 1) {
		tw_hmap_del(&d->names, k);
	}
	gen = dl->gen;
	pthread_mutex_unlock(&dl->lock);
	return gen;
}

uint64_t fc_dl_adding(struct fc_dl *dl, uint64_t parent, const char *name)
{
	return count(dl, parent, name, 1);
}

void fc_dl_removed(struct fc_dl *dl, uint64_t parent, const char *name)
{
	(void)count(dl, parent, name, -1);
}

void fc_dl_granted(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket)
{
	struct fc_dl_dir *d, *victim = NULL;

	if (!dl->on || !lease_ms || lease_ms <= FC_DL_MARGIN_MS)
		return;
	pthread_mutex_lock(&dl->lock);
	if (ticket == dl->gen && !find(dl, dir)) {
		/* A free slot, or the least recently used. */
		for (size_t i = 0; i < FC_DL_DIRS; i++) {
			d = &dl->dirs[i];
			if (d->dir == 0) {
				victim = d;
				break;
			}
			if (!victim || d->last_use_ms < victim->last_use_ms)
				victim = d;
		}
		slot_clear(victim);
		victim->dir = dir;
		victim->expiry_ms = sent_ms + lease_ms - FC_DL_MARGIN_MS;
		victim->last_use_ms = sent_ms;
		dl->n_grants++;
	}
	pthread_mutex_unlock(&dl->lock);
}

void fc_dl_renewed(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket)
{
	struct fc_dl_dir *d;
	uint64_t until;

	if (!dl->on || !lease_ms || lease_ms <= FC_DL_MARGIN_MS)
		return;
	until = sent_ms + lease_ms - FC_DL_MARGIN_MS;
	pthread_mutex_lock(&dl->lock);
	d = find(dl, dir);
	if (ticket == dl->gen && d && until > d->expiry_ms)
		d->expiry_ms = until;
	pthread_mutex_unlock(&dl->lock);
}

void fc_dl_recalled(struct fc_dl *dl, uint64_t dir)
{
	struct fc_dl_dir *d;

	pthread_mutex_lock(&dl->lock);
	dl->gen++;
	d = find(dl, dir);
	if (d) {
		slot_clear(d);
		dl->n_recalls++;
	}
	pthread_mutex_unlock(&dl->lock);
}

/* Drop every lease (D4: and every grant in flight).  With dirs, the
 * directories whose lease may still run at mgrd go there (counted as
 * given back); returns their number. */
static size_t take_all(struct fc_dl *dl, uint64_t dirs[FC_DL_DIRS])
{
	uint64_t now = tw_now_ms();
	size_t n = 0;

	pthread_mutex_lock(&dl->lock);
	dl->gen++;
	for (size_t i = 0; i < FC_DL_DIRS; i++) {
		struct fc_dl_dir *d = &dl->dirs[i];

		if (!d->dir)
			continue;
		/* mgrd's expiry is at most the margin later than ours. */
		if (dirs && now < d->expiry_ms + FC_DL_MARGIN_MS)
			dirs[n++] = d->dir;
		slot_clear(d);
	}
	dl->n_returned += n;
	pthread_mutex_unlock(&dl->lock);
	return n;
}

void fc_dl_drop_all(struct fc_dl *dl)
{
	(void)take_all(dl, NULL);
}

/* ------------------------------------------------ the recall, on the loop */

/* The DIR_RETURNs of an unmount: done(arg) after the last answer. */
struct dl_return_all {
	int pending;
	void (*done)(void *arg);
	void *arg;
};

struct dl_return {
	struct fc_mgr_call mc;
	Twinfs__Getattr g;
	struct dl_return_all *all;   /* or NULL: a recall's */
};

static void return_all_one(struct dl_return_all *all)
{
	if (--all->pending == 0) {
		all->done(all->arg);
		free(all);
	}
}

static void return_done(struct fc_mgr_call *mc, int status,
			struct wire_msg *reply)
{
	struct dl_return *r = mc->arg;

	/* Lost: mgrd lets the lease expire (at most its length). */
	(void)status;
	if (reply)
		wire_msg_free(reply);
	if (r->all)
		return_all_one(r->all);
	free(r);
}

/* Give dir's lease back, waiting for mgrd at most timeout_ms (0: the
 * default); false without memory (return_done does not run then). */
static bool send_return(struct fc_client *cl, uint64_t dir,
			struct dl_return_all *all, uint32_t timeout_ms)
{
	struct dl_return *r = calloc(1, sizeof(*r));

	if (!r)
		return false;
	twinfs__getattr__init(&r->g);
	r->g.ino = dir;
	r->all = all;
	fc_mgr_send(cl, &r->mc, TWINFS__MSG_TYPE__MSG_DIR_RETURN, &r->g.base,
		    &r->g.ctx, NULL, timeout_ms, return_done, r);
	return true;
}

void fc_dl_recall(struct fc_client *cl, uint64_t dir)
{
	fc_dl_recalled(&cl->dl, dir);   /* D3: before the answer */
	(void)send_return(cl, dir, NULL, 0);
}

void fc_dl_return_all(struct fc_client *cl, void (*done)(void *arg),
		      void *arg)
{
	uint64_t dirs[FC_DL_DIRS];
	size_t n = take_all(&cl->dl, dirs);
	struct dl_return_all *all = calloc(1, sizeof(*all));

	if (!all) {
		done(arg);
		return;
	}
	*all = (struct dl_return_all){ 1, done, arg };
	/* No longer than the lease itself: after that mgrd ends it anyway.
	 * Counted first: the answer may come before fc_mgr_send returns. */
	for (size_t i = 0; i < n; i++) {
		all->pending++;
		if (!send_return(cl, dirs[i], all, FC_DL_RETURN_WAIT_MS))
			all->pending--;
	}
	return_all_one(all);
}
