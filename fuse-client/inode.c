/* inode.c - the client's inode table: attributes as mgrd last gave them,
 * the lookup count the kernel holds, this client's own unreported writes
 * and the cached absence of a few xattrs.
 *
 * nodeid == mgrd inode number (root = 1), generation from Attr.  Lookup
 * counts are exact (docs/ARCHITECTURE.md "Client"): +1 for every entry
 * the kernel accepts (lookup, create, mknod, mkdir, symlink, link, each
 * READDIRPLUS entry except . and ..), -n on forget; the inode is freed at
 * zero.  The root is never forgotten by the kernel; it is created with
 * one lookup at mount.
 *
 * Size: a writer's data reaches the iods before its size reaches mgrd (the
 * next SIZE_REPORT).  Until then the size we show is the larger of mgrd's
 * and the highest end this client wrote under the same trunc_gen
 * (fc_merge_size); a truncate bumps trunc_gen and drops the local size.
 *
 * Names, for log lines only: each inode keeps the directory and name it
 * was last given to the kernel under (fc_inode_named); a rename this
 * mount made moves it and an unlink drops it (fc_inode_renamed,
 * fc_inode_unnamed, found through cl->names).  A
 * rename on another mount is not seen: the name is then the old one until
 * the next lookup, which is why lines say "(ino N)" too.
 *
 * Locking: every field behind ino_lock; no other lock is taken under it.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "inode.h"
#include "mount.h"

/* One cached inode.  Exists while the kernel holds lookups on it (nlookup >
 * 0); freed when forget brings nlookup to 0.  Never pointed to across an
 * asynchronous step: ops keep the inode number and look it up again. */
struct fc_inode {
	uint64_t ino;
	uint64_t nlookup;          /* [ino_lock] entries the kernel accepted */
	struct fc_attr attr;       /* [ino_lock] */
	/* Highest end written by this client under local_gen: folded into the
	 * size we report until mgrd's size catches up. */
	uint64_t local_size;       /* [ino_lock] */
	uint64_t local_gen;        /* [ino_lock] trunc_gen of local_size */
	/* Bit i: the i-th name of fc_cached_xattrs is known absent while the
	 * ctime is unchanged (setting or removing an xattr changes ctime). */
	uint32_t xattr_absent;     /* [ino_lock] */
	int64_t xattr_ctime_sec;   /* [ino_lock] */
	uint32_t xattr_ctime_nsec; /* [ino_lock] */
	/* attr.acl_sig changed since the kernel last learned the ACLs. */
	bool acl_stale;            /* [ino_lock] */
	/* This mount changed the ACLs (the kernel forgot its copy itself):
	 * the next attributes bring the new acl_sig, adopted as it is. */
	bool acl_local;            /* [ino_lock] */
	/* attr came with a change this mount made (an Entry's parent_attr,
	 * a SETATTR's answer) at most attr_timeout ago: the kernel's GETATTR
	 * until then is answered from it (fc_inode_fresh); chown, for one,
	 * always asks for the mode first (FUSE's killpriv). */
	uint64_t fresh_until_ms;   /* [ino_lock] 0: ask mgrd */
	uint64_t fresh_gen;        /* [ino_lock] cl->fresh_gen when marked */
	/* mgrd destroyed the inode (an UNLINK's gone_ino): for good, since
	 * inode numbers are never reused. */
	bool gone;                 /* [ino_lock] */
	/* SETATTRs of mtime (report.c): the highest cl->times_seq of those
	 * started and not known failed (a write that took its place before
	 * it keeps its mtime), the highest of those that succeeded, and how
	 * many are unanswered. */
	uint64_t times_set_seq;    /* [ino_lock] */
	uint64_t times_ok_seq;     /* [ino_lock] */
	uint32_t times_pending;    /* [ino_lock] */
	/* The directory and name this mount last gave the kernel for it
	 * (an entry reply, or a rename it made), for log lines that name
	 * the file (fc_ino_path); name NULL: none yet (the root, say). */
	uint64_t parent;           /* [ino_lock] */
	char *name;                /* [ino_lock] owned */
};

/* Bits of fc_inode.xattr_absent: the names of cached_xattrs. */
enum { XATTR_CAPABILITY = 0, XATTR_SELINUX };

void fc_inodes_init(struct fc_client *cl)
{
	pthread_mutex_init(&cl->ino_lock, NULL);
	tw_hmap_init(&cl->inodes);
	tw_hmap_init(&cl->names);
}

void fc_inodes_free(struct fc_client *cl)
{
	size_t it = 0;
	uint64_t k;
	void *v;

	pthread_mutex_lock(&cl->ino_lock);
	while (tw_hmap_next(&cl->inodes, &it, &k, &v)) {
		free(((struct fc_inode *)v)->name);
		free(v);
	}
	tw_hmap_free(&cl->inodes);
	tw_hmap_free(&cl->names);
	pthread_mutex_unlock(&cl->ino_lock);
}

uint64_t fc_merge_size(uint64_t attr_size, uint64_t attr_gen,
		       uint64_t local_size, uint64_t local_gen)
{
	if (local_gen == attr_gen && local_size > attr_size)
		return local_size;
	return attr_size;
}

int fc_attr_from_pb(const Twinfs__Attr *pb, struct fc_attr *a)
{
	memset(a, 0, sizeof(*a));
	if (!pb || pb->ino == 0)
		return -EIO;
	a->ino = pb->ino;
	a->mode = pb->mode;
	a->nlink = pb->nlink;
	a->uid = pb->uid;
	a->gid = pb->gid;
	a->rdev = pb->rdev;
	a->size = pb->size;
	a->blocks = pb->blocks;
	a->atime_sec = pb->atime_sec;
	a->atime_nsec = pb->atime_nsec;
	a->mtime_sec = pb->mtime_sec;
	a->mtime_nsec = pb->mtime_nsec;
	a->ctime_sec = pb->ctime_sec;
	a->ctime_nsec = pb->ctime_nsec;
	a->trunc_gen = pb->trunc_gen;
	a->data_version = pb->data_version;
	a->generation = pb->generation;
	a->acl_sig = pb->acl_sig;
	a->cap_absent = pb->cap_absent;
	a->selinux_absent = pb->selinux_absent;
	a->policy_first = -1;
	if (!pb->layout)
		return 0;
	if (S_ISREG(pb->mode)) {
		const Twinfs__Layout *l = pb->layout;
		size_t k;

		/* Validated, never trusted: a bad layout makes the file's
		 * data unreachable (EIO), not the client crash. */
		if (l->stripe_count == 0 ||
		    l->stripe_count > R0_MAX_STRIPE_COUNT ||
		    l->n_groups != l->stripe_count ||
		    l->stripe_size < R0_MIN_STRIPE_SIZE ||
		    l->stripe_size > R0_MAX_STRIPE_SIZE ||
		    (l->stripe_size & (l->stripe_size - 1)))
			return 0;
		a->layout.stripe_size = l->stripe_size;
		a->layout.stripe_count = l->stripe_count;
		for (k = 0; k < l->n_groups; k++) {
			if (l->groups[k] >= TW_MAX_GROUPS)
				return 0;
			a->layout.groups[k] = l->groups[k];
		}
		a->has_layout = true;
	} else if (S_ISDIR(pb->mode)) {
		a->layout.stripe_size = pb->layout->stripe_size;
		a->layout.stripe_count = pb->layout->stripe_count;
		if (pb->layout->n_groups >= 1 &&
		    pb->layout->groups[0] < TW_MAX_GROUPS)
			a->policy_first = (int)pb->layout->groups[0];
		a->has_layout = pb->layout->stripe_size != 0;
	}
	return 0;
}

void fc_attr_to_stat(struct fc_client *cl, const struct fc_attr *a,
		     uint64_t size, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_atim.tv_sec = a->atime_sec;
	st->st_atim.tv_nsec = a->atime_nsec;
	st->st_mtim.tv_sec = a->mtime_sec;
	st->st_mtim.tv_nsec = a->mtime_nsec;
	st->st_ctim.tv_sec = a->ctime_sec;
	st->st_ctim.tv_nsec = a->ctime_nsec;
	if (S_ISREG(a->mode) && a->has_layout)
		st->st_blksize = a->layout.stripe_size;
	else if (S_ISDIR(a->mode) && a->has_layout)
		st->st_blksize = a->layout.stripe_size;
	else
		st->st_blksize = atomic_load(&cl->blksize);
	if (st->st_blksize == 0)
		st->st_blksize = R0_DEF_STRIPE_SIZE;
}

/* Whether a's ctime is before b's (every change at mgrd moves it forward). */
static bool ctime_before(const struct fc_attr *a, const struct fc_attr *b)
{
	return a->ctime_sec < b->ctime_sec ||
	       (a->ctime_sec == b->ctime_sec && a->ctime_nsec < b->ctime_nsec);
}

/* Store new attributes; drop the local size when a truncate superseded it.
 * Returns the merged size. */
static uint64_t store_attr_locked(struct fc_inode *in, const struct fc_attr *a)
{
	/* A reply that raced with a newer one must not roll back trunc_gen
	 * (the iods would refuse our writes until the next refresh). */
	if (a->trunc_gen < in->attr.trunc_gen && in->attr.ino)
		return fc_merge_size(in->attr.size, in->attr.trunc_gen,
				     in->local_size, in->local_gen);
	/* Nor may an older answer replace the fresh attributes of a
	 * directory (every change moves its ctime forward). */
	if (in->fresh_until_ms && ctime_before(a, &in->attr))
		return fc_merge_size(in->attr.size, in->attr.trunc_gen,
				     in->local_size, in->local_gen);
	if (in->xattr_absent && (a->ctime_sec != in->xattr_ctime_sec ||
				 a->ctime_nsec != in->xattr_ctime_nsec))
		in->xattr_absent = 0;
	if (in->attr.ino && a->acl_sig != in->attr.acl_sig && !in->acl_local)
		in->acl_stale = true;
	in->acl_local = false;
	in->attr = *a;
	/* mgrd's word on security.capability and security.selinux, under
	 * this ctime (the rule of the absence cache,
	 * fc_inode_set_xattr_absent). */
	if (a->cap_absent || a->selinux_absent) {
		in->xattr_absent |= (a->cap_absent ? 1u << XATTR_CAPABILITY : 0) |
				    (a->selinux_absent ? 1u << XATTR_SELINUX : 0);
		in->xattr_ctime_sec = a->ctime_sec;
		in->xattr_ctime_nsec = a->ctime_nsec;
	}
	if (in->local_gen != a->trunc_gen) {
		in->local_size = 0;
		in->local_gen = a->trunc_gen;
	}
	return fc_merge_size(a->size, a->trunc_gen, in->local_size,
			     in->local_gen);
}

enum entry_kind { ENTRY_ANY, ENTRY_NEW, ENTRY_NOT_OLDER };

/* Mark in fresh (fc_inode_fresh) for attr_timeout from now, if it holds
 * a itself (store_attr_locked keeps newer attributes it already had). */
static void mark_fresh_locked(struct fc_client *cl, struct fc_inode *in,
			      const struct fc_attr *a)
{
	uint64_t ms = (uint64_t)(cl->opts.attr_timeout * 1000.0);

	if (!ms || ctime_before(a, &in->attr))
		return;
	in->fresh_until_ms = tw_now_ms() + ms;
	in->fresh_gen = cl->fresh_gen;
}

/* Directory attributes mgrd has just answered with are as good as those
 * the kernel caches for attr_timeout: only requests answered by mgrd
 * change a directory, and this mount's own ones update or void the mark
 * (fc_inode_update_fresh, fc_inode_unfresh).  So a GETATTR the kernel
 * sends inside that time for another reason than expiry (after every
 * READDIR it drops the atime) is answered from them.  A file's size and
 * times also move with writes, so its mark comes only with its own
 * SETATTR's answer. */
static bool fresh_on_arrival(const struct fc_attr *a)
{
	return S_ISDIR(a->mode);
}

static int entry(struct fc_client *cl, const struct fc_attr *a,
		 struct fuse_entry_param *e, enum entry_kind kind,
		 bool arrived)
{
	struct fc_inode *in;
	uint64_t size = a->size;

	memset(e, 0, sizeof(*e));
	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, a->ino);
	/* Not older: then store_attr_locked below takes a whole, and the
	 * answer is a with the merged size, as the table now holds it. */
	if (in && (kind == ENTRY_NEW ||
		   (kind == ENTRY_NOT_OLDER &&
		    (a->trunc_gen < in->attr.trunc_gen ||
		     ctime_before(a, &in->attr))))) {
		pthread_mutex_unlock(&cl->ino_lock);
		return -EEXIST;
	}
	if (!in) {
		in = calloc(1, sizeof(*in));
		if (in && tw_hmap_put(&cl->inodes, a->ino, in) < 0) {
			free(in);
			in = NULL;
		}
		if (in) {
			in->ino = a->ino;
			in->local_gen = a->trunc_gen;
		}
	}
	if (in) {
		size = store_attr_locked(in, a);
		in->nlookup++;
		if (arrived && fresh_on_arrival(a))
			mark_fresh_locked(cl, in, a);
	}
	pthread_mutex_unlock(&cl->ino_lock);
	/* Without memory for the table the entry is still answered: the
	 * kernel's later forget of an unknown inode is ignored. */
	e->ino = a->ino;
	e->generation = a->generation;
	e->attr_timeout = cl->opts.attr_timeout;
	e->entry_timeout = cl->opts.entry_timeout;
	fc_attr_to_stat(cl, a, size, &e->attr);
	return 0;
}

void fc_inode_entry(struct fc_client *cl, const struct fc_attr *a,
		    struct fuse_entry_param *e)
{
	(void)entry(cl, a, e, ENTRY_ANY, false);
}

void fc_inode_entry_arrived(struct fc_client *cl, const struct fc_attr *a,
			    struct fuse_entry_param *e)
{
	(void)entry(cl, a, e, ENTRY_ANY, true);
}

int fc_inode_entry_new(struct fc_client *cl, const struct fc_attr *a,
		       struct fuse_entry_param *e)
{
	return entry(cl, a, e, ENTRY_NEW, false);
}

int fc_inode_entry_not_older(struct fc_client *cl, const struct fc_attr *a,
			     struct fuse_entry_param *e)
{
	return entry(cl, a, e, ENTRY_NOT_OLDER, false);
}

/* What update() marks fresh besides storing the attributes. */
enum fresh_mark {
	MARK_NONE,
	MARK_ARRIVED,    /* mgrd's answer just now: a directory's */
	MARK_OWN_CHANGE, /* they came with a change this mount made */
};

static uint64_t update(struct fc_client *cl, const struct fc_attr *a,
		       struct stat *st, enum fresh_mark mark)
{
	struct fc_inode *in;
	uint64_t size = a->size;
	struct fc_attr cur = *a;
	uint64_t ms = (uint64_t)(cl->opts.attr_timeout * 1000.0);

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, a->ino);
	if (in) {
		size = store_attr_locked(in, a);
		cur = in->attr;
		if (mark == MARK_OWN_CHANGE) {
			in->fresh_until_ms = ms ? tw_now_ms() + ms : 0;
			in->fresh_gen = cl->fresh_gen;
		} else if (mark == MARK_ARRIVED && fresh_on_arrival(a)) {
			mark_fresh_locked(cl, in, a);
		}
	}
	pthread_mutex_unlock(&cl->ino_lock);
	if (st)
		fc_attr_to_stat(cl, &cur, size, st);
	return size;
}

uint64_t fc_inode_update(struct fc_client *cl, const struct fc_attr *a,
			 struct stat *st)
{
	return update(cl, a, st, MARK_NONE);
}

uint64_t fc_inode_update_arrived(struct fc_client *cl, const struct fc_attr *a,
				 struct stat *st)
{
	return update(cl, a, st, MARK_ARRIVED);
}

uint64_t fc_inode_update_fresh(struct fc_client *cl, const struct fc_attr *a,
			       struct stat *st)
{
	return update(cl, a, st, MARK_OWN_CHANGE);
}

bool fc_inode_fresh(struct fc_client *cl, uint64_t ino, struct stat *st,
		    double *timeout)
{
	struct fc_inode *in;
	struct fc_attr a;
	uint64_t now = tw_now_ms(), size = 0;
	bool fresh = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in && now < in->fresh_until_ms && in->fresh_gen == cl->fresh_gen &&
	    !in->acl_stale) {
		a = in->attr;
		size = fc_merge_size(a.size, a.trunc_gen, in->local_size,
				     in->local_gen);
		*timeout = (double)(in->fresh_until_ms - now) / 1000.0;
		fresh = true;
	}
	pthread_mutex_unlock(&cl->ino_lock);
	if (fresh)
		fc_attr_to_stat(cl, &a, size, st);
	return fresh;
}

void fc_inodes_unfresh_all(struct fc_client *cl)
{
	pthread_mutex_lock(&cl->ino_lock);
	cl->fresh_gen++;
	pthread_mutex_unlock(&cl->ino_lock);
}

void fc_inode_unfresh(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		in->fresh_until_ms = 0;
	pthread_mutex_unlock(&cl->ino_lock);
}

bool fc_inode_take_acl_stale(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;
	bool stale = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		stale = in->acl_stale;
		in->acl_stale = false;
	}
	pthread_mutex_unlock(&cl->ino_lock);
	return stale;
}

void fc_inode_acl_local(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		in->acl_local = true;
		/* Unknown until the next attributes: not "none". */
		in->attr.acl_sig = 1;
	}
	pthread_mutex_unlock(&cl->ino_lock);
}

bool fc_inode_acl_none(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;
	bool none = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		none = in->attr.acl_sig == 0;
	pthread_mutex_unlock(&cl->ino_lock);
	return none;
}

/* FNV-1a of the name, mixed with the parent; never 0. */
static uint64_t name_key(uint64_t parent, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (parent * 0x9e3779b97f4a7c15ull);

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h ? h : 1;
}

/* Drop in's name (and its index entry, if it is still in's). */
static void unname_locked(struct fc_client *cl, struct fc_inode *in)
{
	uint64_t k;

	if (!in->name)
		return;
	k = name_key(in->parent, in->name);
	if (tw_hmap_get(&cl->names, k) == in)
		tw_hmap_del(&cl->names, k);
	free(in->name);
	in->name = NULL;
}

static void name_locked(struct fc_client *cl, struct fc_inode *in,
			uint64_t parent, const char *name)
{
	char *copy;

	if (in->name && in->parent == parent && strcmp(in->name, name) == 0)
		return;
	copy = strdup(name);
	unname_locked(cl, in);
	if (!copy)
		return;   /* the lines say "ino N" */
	in->parent = parent;
	in->name = copy;
	(void)tw_hmap_put(&cl->names, name_key(parent, name), in);
}

void fc_inode_named(struct fc_client *cl, uint64_t ino, uint64_t parent,
		    const char *name)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		name_locked(cl, in, parent, name);
	pthread_mutex_unlock(&cl->ino_lock);
}

/* The inode this mount knows as name in parent, or NULL. */
static struct fc_inode *by_name_locked(struct fc_client *cl, uint64_t parent,
				       const char *name)
{
	struct fc_inode *in = tw_hmap_get(&cl->names, name_key(parent, name));

	if (in && in->name && in->parent == parent &&
	    strcmp(in->name, name) == 0)
		return in;
	return NULL;
}

void fc_inode_unnamed(struct fc_client *cl, uint64_t parent,
		      const char *name)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = by_name_locked(cl, parent, name);
	if (in)
		unname_locked(cl, in);
	pthread_mutex_unlock(&cl->ino_lock);
}

void fc_inode_renamed(struct fc_client *cl, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname,
		      uint32_t flags)
{
	struct fc_inode *from, *to;

	pthread_mutex_lock(&cl->ino_lock);
	from = by_name_locked(cl, parent, name);
	to = by_name_locked(cl, newparent, newname);
	if (to && to != from) {
		if (flags & 2u)   /* RENAME_EXCHANGE: it takes the old name */
			name_locked(cl, to, parent, name);
		else              /* replaced: it has no name here now */
			unname_locked(cl, to);
	}
	if (from)
		name_locked(cl, from, newparent, newname);
	pthread_mutex_unlock(&cl->ino_lock);
}

const char *fc_ino_path(struct fc_client *cl, uint64_t ino, char *buf,
			size_t len)
{
	/* The path is built leaf first, right to left, in tmp; what does
	 * not fit (there or in buf beside the number) loses its head, the
	 * least telling part, to "...". */
	char tmp[1024], suffix[32];
	size_t at_pos = sizeof(tmp) - 1, n = 0, plen, slen, room;
	bool top = false, cut = false;
	struct fc_inode *in;
	uint64_t at = ino;

	assert(len > 0);
	tmp[at_pos] = '\0';
	pthread_mutex_lock(&cl->ino_lock);
	while (n < 32) {
		size_t l;

		in = tw_hmap_get(&cl->inodes, at);
		if (!in || !in->name) {
			top = at == FUSE_ROOT_ID;
			break;
		}
		l = strlen(in->name) + 1;
		if (l > at_pos) {
			cut = true;
			break;
		}
		at_pos -= l;
		tmp[at_pos] = '/';
		memcpy(tmp + at_pos + 1, in->name, l - 1);
		n++;
		at = in->parent;
	}
	pthread_mutex_unlock(&cl->ino_lock);
	if (n == 0) {
		snprintf(buf, len, "ino %" PRIu64, ino);
		return buf;
	}
	slen = (size_t)snprintf(suffix, sizeof(suffix), " (ino %" PRIu64 ")",
				ino);
	plen = sizeof(tmp) - 1 - at_pos;
	room = len > slen + 1 ? len - slen - 1 : 0;
	if (top && !cut && plen <= room) {
		snprintf(buf, len, "%s%s", tmp + at_pos, suffix);
	} else if (room > 3) {
		/* "..." and as much of the tail as fits */
		size_t keep = TW_MIN(plen, room - 3);

		snprintf(buf, len, "...%s%s", tmp + sizeof(tmp) - 1 - keep,
			 suffix);
	} else {
		snprintf(buf, len, "%s", suffix + 1);   /* "(ino N)" */
	}
	return buf;
}

void fc_inode_forget(struct fc_client *cl, uint64_t ino, uint64_t n)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		if (n >= in->nlookup) {
			tw_hmap_del(&cl->inodes, ino);
			unname_locked(cl, in);
			free(in);
		} else {
			in->nlookup -= n;
		}
	}
	pthread_mutex_unlock(&cl->ino_lock);
}

int fc_entry_from_reply(struct fc_client *cl, struct wire_msg *reply,
			struct fc_attr *a)
{
	const Twinfs__Entry *e;

	if (!reply || reply->body->descriptor != &twinfs__entry__descriptor)
		return -EIO;
	e = (const void *)reply->body;
	fc_parent_from_reply(cl, reply);
	return fc_attr_from_pb(e->attr, a);
}

void fc_parent_from_reply(struct fc_client *cl, const struct wire_msg *reply)
{
	const Twinfs__Entry *e;
	struct fc_attr p;

	if (!reply || reply->body->descriptor != &twinfs__entry__descriptor)
		return;
	e = (const void *)reply->body;
	if (e->parent_attr && fc_attr_from_pb(e->parent_attr, &p) == 0 &&
	    S_ISDIR(p.mode))
		fc_inode_update_fresh(cl, &p, NULL);
}

void fc_inode_set_gone(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		in->gone = true;
	pthread_mutex_unlock(&cl->ino_lock);
}

bool fc_inode_gone_stat(struct fc_client *cl, uint64_t ino, struct stat *st)
{
	struct fc_inode *in;
	struct fc_attr a;
	uint64_t size = 0;
	bool gone = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in && in->gone) {
		a = in->attr;
		size = fc_merge_size(a.size, a.trunc_gen, in->local_size,
				     in->local_gen);
		gone = true;
	}
	pthread_mutex_unlock(&cl->ino_lock);
	if (gone) {
		fc_attr_to_stat(cl, &a, size, st);
		st->st_nlink = 0;
	}
	return gone;
}

bool fc_inode_get(struct fc_client *cl, uint64_t ino, struct fc_attr *a,
		  uint64_t *size)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		if (a)
			*a = in->attr;
		if (size)
			*size = fc_merge_size(in->attr.size,
					      in->attr.trunc_gen,
					      in->local_size, in->local_gen);
	}
	pthread_mutex_unlock(&cl->ino_lock);
	return in != NULL;
}

static void note_write_locked(struct fc_inode *in, uint64_t end)
{
	if (in->local_gen != in->attr.trunc_gen) {
		in->local_gen = in->attr.trunc_gen;
		in->local_size = 0;
	}
	if (end > in->local_size)
		in->local_size = end;
}

void fc_inode_note_write(struct fc_client *cl, uint64_t ino, uint64_t end,
			 uint64_t trunc_gen)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in && trunc_gen == in->attr.trunc_gen)
		note_write_locked(in, end);
	pthread_mutex_unlock(&cl->ino_lock);
}

bool fc_inode_note_write_now(struct fc_client *cl, uint64_t ino, uint64_t end)
{
	struct fc_inode *in;
	bool ok;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	ok = in && S_ISREG(in->attr.mode) && in->attr.has_layout;
	if (ok)
		note_write_locked(in, end);
	pthread_mutex_unlock(&cl->ino_lock);
	return ok;
}

void fc_inode_times_start(struct fc_client *cl, uint64_t ino, uint64_t seq)
{
	struct fc_inode *in;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		in->times_set_seq = seq;
		in->times_pending++;
	}
	pthread_mutex_unlock(&cl->ino_lock);
}

bool fc_inode_times_end(struct fc_client *cl, uint64_t ino, uint64_t seq,
			bool ok)
{
	struct fc_inode *in;
	bool undo = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in && in->times_pending) {
		in->times_pending--;
		if (ok && seq > in->times_ok_seq)
			in->times_ok_seq = seq;
		/* None unanswered: only the ones that succeeded count.  (While
		 * an earlier one is unanswered, a failed latest one still
		 * counts: a rare window, replies coming in order.) */
		if (!in->times_pending)
			in->times_set_seq = in->times_ok_seq;
		undo = !ok && in->times_set_seq <= seq &&
		       in->times_ok_seq < seq;
	}
	pthread_mutex_unlock(&cl->ino_lock);
	return undo;
}

uint64_t fc_inode_times_seq(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;
	uint64_t seq = 0;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		seq = in->times_set_seq;
	pthread_mutex_unlock(&cl->ino_lock);
	return seq;
}

bool fc_inode_times_pending(struct fc_client *cl, uint64_t ino)
{
	struct fc_inode *in;
	bool pending = false;

	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		pending = in->times_pending != 0;
	pthread_mutex_unlock(&cl->ino_lock);
	return pending;
}

static const char *const cached_xattrs[] = {
	[XATTR_CAPABILITY] = "security.capability",
	[XATTR_SELINUX] = "security.selinux",
};

int fc_xattr_cache_index(const char *name)
{
	size_t i;

	for (i = 0; i < TW_ARRAY_SIZE(cached_xattrs); i++)
		if (strcmp(name, cached_xattrs[i]) == 0)
			return (int)i;
	return -1;
}

bool fc_inode_xattr_absent(struct fc_client *cl, uint64_t ino, int idx)
{
	struct fc_inode *in;
	bool absent = false;

	if (idx < 0)
		return false;
	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in)
		absent = (in->xattr_absent >> idx) & 1;
	pthread_mutex_unlock(&cl->ino_lock);
	return absent;
}

void fc_inode_set_new_file(struct fc_client *cl, uint64_t ino)
{
	for (size_t i = 0; i < TW_ARRAY_SIZE(cached_xattrs); i++)
		fc_inode_set_xattr_absent(cl, ino, (int)i, true);
}

void fc_inode_set_xattr_absent(struct fc_client *cl, uint64_t ino, int idx,
			       bool absent)
{
	struct fc_inode *in;

	if (idx < 0)
		return;
	pthread_mutex_lock(&cl->ino_lock);
	in = tw_hmap_get(&cl->inodes, ino);
	if (in) {
		if (absent) {
			/* Bits cached under another ctime are stale. */
			if (in->xattr_ctime_sec != in->attr.ctime_sec ||
			    in->xattr_ctime_nsec != in->attr.ctime_nsec)
				in->xattr_absent = 0;
			in->xattr_absent |= 1u << idx;
			in->xattr_ctime_sec = in->attr.ctime_sec;
			in->xattr_ctime_nsec = in->attr.ctime_nsec;
		} else {
			in->xattr_absent &= ~(1u << idx);
		}
	}
	pthread_mutex_unlock(&cl->ino_lock);
}
