/* ns.c - the namespace of twinfs-mgrd: inodes, directories, symlinks, hard
 * links, extended attributes, layouts, open counts and orphans.
 *
 * Pure and in memory: no I/O, no clock, no journal.  Every decision that is
 * not a function of the state (the time, a new inode number, a new file's
 * layout) is either passed in (replay) or made here from the state and
 * handed back to the caller (live) so that record.c can journal it; replay
 * of the same operations in the same order therefore rebuilds exactly the
 * same state.  Semantics follow Linux on ext4, errnos included
 * (proto/FORMAT.md "Namespace"); permission checks are made before, by
 * handlers.c (perm.c).
 *
 * Invariants (asserted where cheap, checked by test/unit/test_mgr_ns.c):
 *  N1. Inode numbers come from next_ino and are never reused.
 *  N2. A directory's nlink is 2 + its subdirectories; a file's nlink is its
 *      number of names; an inode with nlink 0 exists only while open
 *      (orphan), then is destroyed.
 *  N3. Cookies of a directory are unique, increasing with insertion, never
 *      reused; dir->order is sorted by cookie.
 *  N4. A destroyed regular file leaves a pending delete until its subfiles
 *      are gone (mgr_ns_pdel_done).
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --------------------------------------------------------------- helpers */

static uint32_t name_hash(const char *s, size_t len)
{
	/* The chains are short enough that a better hash does not matter,
	 * and collisions only cost a strcmp.  In memory only. */
	return (uint32_t)tw_fnv1a64(s, len);
}

int mgr_name_check(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strlen(name);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (len > MGR_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

static void touch_mc(struct mgr_inode *in, const struct mgr_time *now)
{
	in->mtime = *now;
	in->ctime = *now;
}

/* ------------------------------------------------------------ directories */

struct mgr_dir *mgr_dir_new(uint64_t parent)
{
	struct mgr_dir *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->next_cookie = MGR_FIRST_COOKIE;
	d->parent = parent;
	d->pol_first = -1;
	return d;
}

static void dir_free(struct mgr_dir *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->norder; i++)
		if (d->order[i])
			mgr_slab_free(d->order[i],
				      MGR_DIRENT_SIZE(d->order[i]->namelen));
	free(d->order);
	free(d->index);
	free(d);
}

/* Index e, which is at order slot `slot`. */
static void index_insert(uint32_t *index, uint32_t cap,
			 const struct mgr_dirent *e, uint32_t slot)
{
	uint32_t i = e->hash & (cap - 1);

	while (index[i])
		i = (i + 1) & (cap - 1);
	index[i] = slot + 1;
}

/* (Re)build the name index with cap slots from d->order. */
static int index_build(struct mgr_dir *d, uint32_t cap)
{
	uint32_t *x = calloc(cap, sizeof(*x));

	if (!x)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->norder; i++)
		if (d->order[i])
			index_insert(x, cap, d->order[i], i);
	free(d->index);
	d->index = x;
	d->index_cap = cap;
	return 0;
}

/* The index slot that holds e's order slot. */
static uint32_t index_pos(const struct mgr_dir *d, const struct mgr_dirent *e)
{
	uint32_t i = e->hash & (d->index_cap - 1);

	for (;;) {
		assert(d->index[i]);
		if (d->order[d->index[i] - 1] == e)
			return i;
		i = (i + 1) & (d->index_cap - 1);
	}
}

struct mgr_dirent *mgr_dir_find(const struct mgr_dir *d, const char *name)
{
	size_t len = strlen(name);
	uint32_t h = name_hash(name, len);

	if (!d->index)
		return NULL;
	for (uint32_t i = h & (d->index_cap - 1); d->index[i];
	     i = (i + 1) & (d->index_cap - 1)) {
		struct mgr_dirent *e = d->order[d->index[i] - 1];

		if (e->hash == h && e->namelen == len &&
		    memcmp(e->name, name, len) == 0)
			return e;
	}
	return NULL;
}

static uint32_t index_cap_for(uint32_t n)
{
	uint32_t cap = 16;

	while ((uint64_t)n * 4 > (uint64_t)cap * 3)
		cap *= 2;
	return cap;
}

int mgr_dir_reserve(struct mgr_dir *d, uint32_t n)
{
	uint32_t cap = index_cap_for(n);

	if (n > (1u << 30))
		return -ENOMEM;
	if (n > d->order_cap) {
		struct mgr_dirent **o = realloc(d->order, n * sizeof(*o));

		if (!o)
			return -ENOMEM;
		d->order = o;
		d->order_cap = n;
	}
	return cap > d->index_cap ? index_build(d, cap) : 0;
}

/* Squeeze the holes out of d->order (cookie order is kept); the index
 * follows the entries' new slots. */
static void dir_compact(struct mgr_dir *d)
{
	uint32_t w = 0;

	for (uint32_t r = 0; r < d->norder; r++) {
		if (!d->order[r])
			continue;
		d->order[w++] = d->order[r];
	}
	d->norder = w;
	if (!d->index)
		return;
	memset(d->index, 0, d->index_cap * sizeof(*d->index));
	for (uint32_t i = 0; i < d->norder; i++)
		index_insert(d->index, d->index_cap, d->order[i], i);
}

/* Insert a name; cookie 0 = take the next one (it is the same on replay,
 * since next_cookie is part of the state); a given cookie (snapshot load)
 * must be larger than every cookie in the directory. */
static int dir_add_cookie(struct mgr_dir *d, const char *name, uint64_t ino,
			  uint64_t cookie)
{
	size_t len = strlen(name);
	struct mgr_dirent *e;

	assert(len <= MGR_NAME_MAX);
	if ((uint64_t)(d->count + 1) * 4 > (uint64_t)d->index_cap * 3) {
		int rc;

		if (d->index_cap >= (1u << 31))
			return -ENOSPC;
		rc = index_build(d, index_cap_for(d->count + 1));
		if (rc < 0)
			return rc;
	}
	if (d->norder == d->order_cap) {
		if (d->count < d->norder / 2) {
			dir_compact(d);
		} else {
			uint32_t cap = d->order_cap ? d->order_cap * 2 : 4;
			struct mgr_dirent **o = realloc(d->order,
							cap * sizeof(*o));

			if (!o)
				return -ENOMEM;
			d->order = o;
			d->order_cap = cap;
		}
	}
	e = mgr_slab_alloc(MGR_DIRENT_SIZE(len));
	if (!e)
		return -ENOMEM;
	memcpy(e->name, name, len + 1);
	e->namelen = (uint8_t)len;
	e->hash = name_hash(name, len);
	e->ino = ino;
	if (cookie) {
		e->cookie = cookie;
		if (cookie >= d->next_cookie)
			d->next_cookie = cookie + 1;
	} else {
		e->cookie = d->next_cookie++;
	}
	index_insert(d->index, d->index_cap, e, d->norder);
	d->order[d->norder++] = e;
	d->count++;
	return 0;
}

static int dir_add(struct mgr_dir *d, const char *name, uint64_t ino,
		   struct mgr_dirent **out)
{
	(void)out;
	return dir_add_cookie(d, name, ino, 0);
}

int mgr_dir_restore(struct mgr_dir *d, const char *name, uint64_t ino,
		    uint64_t cookie)
{
	size_t len = strlen(name);

	if (len == 0 || len > MGR_NAME_MAX || cookie < MGR_FIRST_COOKIE ||
	    cookie < d->next_cookie || mgr_dir_find(d, name))
		return -EBADMSG;
	return dir_add_cookie(d, name, ino, cookie);
}

static void dir_del(struct mgr_dir *d, struct mgr_dirent *e)
{
	uint32_t mask = d->index_cap - 1, i = index_pos(d, e), j;
	uint32_t slot = d->index[i] - 1;

	/* Backward shift: move each later member of the probe run whose
	 * home is not between the hole and itself into the hole. */
	for (j = (i + 1) & mask; d->index[j]; j = (j + 1) & mask) {
		uint32_t h = d->order[d->index[j] - 1]->hash & mask;

		if (((j - h) & mask) >= ((j - i) & mask)) {
			d->index[i] = d->index[j];
			i = j;
		}
	}
	d->index[i] = 0;
	d->order[slot] = NULL;
	/* Trailing holes can simply be dropped. */
	while (d->norder > 0 && !d->order[d->norder - 1])
		d->norder--;
	d->count--;
	mgr_slab_free(e, MGR_DIRENT_SIZE(e->namelen));
	if (d->norder > 64 && d->count < d->norder / 4)
		dir_compact(d);
}

struct mgr_dirent *mgr_dir_next(const struct mgr_dir *d, uint64_t cookie)
{
	uint32_t lo = 0, hi = d->norder;

	/* Holes make binary search awkward: search over slots, stepping over
	 * a hole to the next live slot to read its cookie. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2, m = mid;

		while (m < hi && !d->order[m])
			m++;
		if (m == hi) {
			hi = mid;
			continue;
		}
		if (d->order[m]->cookie <= cookie)
			lo = m + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < d->norder; i++)
		if (d->order[i])
			return d->order[i];
	return NULL;
}

/* ---------------------------------------------------------------- inodes */

void mgr_inode_free(struct mgr_inode *in)
{
	struct mgr_xattr *x, *next;

	for (x = in->xattrs; x; x = next) {
		next = x->next;
		free(x->name);
		free(x->value);
		free(x);
	}
	dir_free(in->dir);
	if (S_ISREG(in->mode))
		free(in->col_blocks);
	else if (S_ISLNK(in->mode))
		free(in->target);
	mgr_layout_put(in->layout);
	mgr_slab_free(in, sizeof(*in));
}

struct mgr_inode *mgr_ns_get(const struct mgr_ns *ns, uint64_t ino)
{
	if (ino == 0)
		return NULL;
	return mgr_itab_get(&ns->inodes, ino);
}

static int get_dir(const struct mgr_ns *ns, uint64_t ino, struct mgr_inode **out)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (!S_ISDIR(in->mode))
		return -ENOTDIR;
	if (in->nlink == 0)
		return -ENOENT;  /* removed directory, still open */
	*out = in;
	return 0;
}

int mgr_ns_lookup(const struct mgr_ns *ns, uint64_t parent, const char *name,
		  struct mgr_inode **out)
{
	struct mgr_inode *dir;
	struct mgr_dirent *e;
	int rc = mgr_name_check(name);

	if (rc < 0)
		return rc;
	rc = get_dir(ns, parent, &dir);
	if (rc < 0)
		return rc;
	e = mgr_dir_find(dir->dir, name);
	if (!e)
		return -ENOENT;
	*out = mgr_ns_get(ns, e->ino);
	return *out ? 0 : -EIO;
}

uint64_t mgr_inode_blocks(const struct mgr_inode *in)
{
	uint64_t sum = 0;

	if (S_ISREG(in->mode) && in->col_blocks)
		for (uint32_t k = 0; k < in->layout->stripe_count; k++)
			sum += in->col_blocks[k];
	return sum;
}

/* The inode has no names and no opens: drop it, queue its subfiles. */
static void destroy(struct mgr_ns *ns, struct mgr_inode *in)
{
	mgr_itab_del(&ns->inodes, in->ino);
	free(tw_hmap_del(&ns->psize, in->ino));
	if (in->orphan) {
		in->orphan = false;
		ns->n_orphans--;
	}
	if (S_ISREG(in->mode) && in->layout->stripe_count > 0) {
		struct mgr_pdel *pd = calloc(1, sizeof(*pd));

		/* On ENOMEM the subfiles stay on the iods, referenced by
		 * no inode (nothing collects them yet: they take space,
		 * nothing else); the namespace stays consistent. */
		if (pd) {
			pd->ino = in->ino;
			pd->layout = *in->layout;
			if (tw_hmap_put(&ns->pdel, pd->ino, pd) < 0) {
				free(pd);
			} else if (ns->on_pdel) {
				ns->on_pdel(ns->on_pdel_arg, pd);
			}
		}
	}
	mgr_inode_free(in);
}

/* nlink dropped (or open count dropped): destroy or orphan as needed. */
static void maybe_destroy(struct mgr_ns *ns, struct mgr_inode *in)
{
	if (in->nlink > 0)
		return;
	if (in->open_count > 0) {
		if (!in->orphan) {
			in->orphan = true;
			ns->n_orphans++;
		}
		return;
	}
	destroy(ns, in);
}

struct mgr_inode *mgr_inode_new(uint64_t ino, uint32_t mode)
{
	struct mgr_inode *in = mgr_slab_alloc(sizeof(*in));

	if (!in)
		return NULL;
	memset(in, 0, sizeof(*in));
	in->ino = ino;
	in->mode = mode;
	in->layout = &mgr_layout_none;
	return in;
}

int mgr_ns_init(struct mgr_ns *ns, uint32_t n_groups, uint32_t def_stripe_size,
		uint32_t def_stripe_count, const struct mgr_time *now)
{
	struct mgr_inode *root;

	memset(ns, 0, sizeof(*ns));
	mgr_itab_init(&ns->inodes);
	tw_hmap_init(&ns->pdel);
	tw_hmap_init(&ns->psize);
	ns->n_groups = n_groups;
	ns->def_stripe_size = def_stripe_size ? def_stripe_size
					      : R0_DEF_STRIPE_SIZE;
	ns->def_stripe_count = def_stripe_count;
	ns->next_ino = MGR_ROOT_INO + 1;
	root = mgr_inode_new(MGR_ROOT_INO, S_IFDIR | 0755);
	if (!root)
		return -ENOMEM;
	root->dir = mgr_dir_new(MGR_ROOT_INO);
	if (!root->dir) {
		mgr_inode_free(root);
		return -ENOMEM;
	}
	root->nlink = 2;
	root->parent = MGR_ROOT_INO;
	root->atime = root->mtime = root->ctime = *now;
	if (mgr_itab_put(&ns->inodes, root) < 0) {
		mgr_inode_free(root);
		return -ENOMEM;
	}
	return 0;
}

void mgr_ns_free(struct mgr_ns *ns)
{
	struct mgr_inode *in;
	uint64_t k;
	void *v;

	for (size_t it = 0; mgr_itab_next(&ns->inodes, &it, &in);)
		mgr_inode_free(in);
	for (size_t it = 0; tw_hmap_next(&ns->pdel, &it, &k, &v);)
		free(v);
	for (size_t it = 0; tw_hmap_next(&ns->psize, &it, &k, &v);)
		free(v);
	mgr_itab_free(&ns->inodes);
	tw_hmap_free(&ns->pdel);
	tw_hmap_free(&ns->psize);
	memset(ns, 0, sizeof(*ns));
}

/* Make a layout of stripe_size (0 = cluster default) over stripe_count
 * groups (0 = every group) starting at `first` (-1 = round robin). */
static int pick_layout(struct mgr_ns *ns, uint32_t stripe_size,
		       uint32_t stripe_count, int32_t first,
		       struct r0_layout *l, uint64_t *rr_next)
{
	uint32_t f;

	if (ns->n_groups == 0)
		return -ENOSPC;  /* no storage configured */
	if (!stripe_size)
		stripe_size = ns->def_stripe_size;
	if (first >= 0) {
		f = (uint32_t)first % ns->n_groups;
		*rr_next = ns->rr_next;
	} else {
		f = (uint32_t)(ns->rr_next % ns->n_groups);
		*rr_next = ns->rr_next + 1;
	}
	return r0_layout_make(l, stripe_size, stripe_count, f, ns->n_groups);
}

/* A new file's layout: its directory's policy, else the cluster default. */
static int pick_dir_layout(struct mgr_ns *ns, const struct mgr_dir *d,
			   struct r0_layout *l, uint64_t *rr_next)
{
	if (d && d->has_policy)
		return pick_layout(ns, d->pol_stripe_size, d->pol_stripe_count,
				   d->pol_first, l, rr_next);
	return pick_layout(ns, 0, ns->def_stripe_count, -1, l, rr_next);
}

int mgr_inode_set_layout(struct mgr_inode *in, const struct r0_layout *l)
{
	const struct r0_layout *shared = mgr_layout_get(l);

	if (!shared)
		return -ENOMEM;
	free(in->col_blocks);
	in->col_blocks = NULL;
	mgr_layout_put(in->layout);
	in->layout = shared;
	return 0;
}

int mgr_inode_set_blocks(struct mgr_inode *in, uint32_t k, uint64_t blocks)
{
	assert(k < in->layout->stripe_count);
	if (!in->col_blocks) {
		if (blocks == 0)
			return 0;
		in->col_blocks = calloc(in->layout->stripe_count,
					sizeof(*in->col_blocks));
		if (!in->col_blocks)
			return -ENOMEM;
	}
	in->col_blocks[k] = blocks;
	return 0;
}

static struct mgr_xattr **xattr_find(struct mgr_inode *in, const char *name);

/* A new inode's mode and ACLs from its directory (posix_acl_create): with a
 * default ACL there, the umask is ignored, the mode is narrowed by that ACL
 * and the inode gets it as its access ACL (unless the mode says it all)
 * and, for a directory, as its default ACL too; without one, the umask
 * applies.  Symlinks have no ACLs. */
static int inherit_acl(struct mgr_inode *dir, struct mgr_inode *in,
		       uint32_t umask)
{
	struct mgr_xattr **def = xattr_find(dir, MGR_ACL_DEFAULT);
	uint32_t mode = in->mode;
	uint8_t *acl;
	int rc;

	if (S_ISLNK(in->mode))
		return 0;
	if (!def || mgr_acl_check((*def)->value, (*def)->len) < 0) {
		in->mode &= ~(umask & 0777);
		return 0;
	}
	acl = malloc((*def)->len);
	if (!acl)
		return -ENOMEM;
	memcpy(acl, (*def)->value, (*def)->len);
	rc = mgr_acl_create_masq(acl, (*def)->len, &mode);
	if (rc > 0)
		rc = mgr_inode_add_xattr(in, MGR_ACL_ACCESS, acl, (*def)->len);
	if (rc >= 0 && S_ISDIR(in->mode))
		rc = mgr_inode_add_xattr(in, MGR_ACL_DEFAULT, (*def)->value,
					 (*def)->len);
	free(acl);
	if (rc < 0)
		return rc;
	in->mode = mode;
	return 0;
}

int mgr_ns_create(struct mgr_ns *ns, struct mgr_create *c,
		  struct mgr_inode **out)
{
	struct mgr_inode *dir, *in = NULL;
	uint32_t type = c->mode & S_IFMT;
	int rc;

	rc = mgr_name_check(c->name);
	if (rc < 0)
		return rc;
	switch (type) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		break;
	case 0:
		type = S_IFREG;  /* mknod(2): a zero type means a file */
		break;
	default:
		return -EINVAL;
	}
	if (type == S_IFLNK) {
		size_t tl = c->target ? strlen(c->target) : 0;

		if (tl == 0)
			return -ENOENT;  /* symlink(2) with an empty target */
		if (tl > MGR_SYMLINK_MAX)
			return -ENAMETOOLONG;
	}
	rc = get_dir(ns, c->parent, &dir);
	if (rc < 0)
		return rc;
	if (mgr_dir_find(dir->dir, c->name))
		return -EEXIST;
	if (type == S_IFDIR && dir->nlink >= MGR_LINK_MAX)
		return -EMLINK;
	if (c->ino != 0 && (c->ino < ns->next_ino && mgr_ns_get(ns, c->ino)))
		return -EEXIST;  /* replay of an inconsistent record */

	if (type == S_IFREG && !c->has_layout) {
		rc = pick_dir_layout(ns, dir->dir, &c->layout, &c->rr_next);
		if (rc < 0)
			return rc;
		c->has_layout = true;
	}
	in = mgr_inode_new(c->ino ? c->ino : ns->next_ino,
		       type | (c->mode & 07777));
	if (!in)
		return -ENOMEM;
	rc = inherit_acl(dir, in, c->umask);
	if (rc < 0)
		goto fail;
	c->mode = in->mode;
	in->uid = c->uid;
	in->gid = c->gid;
	in->parent = c->parent;
	in->atime = in->mtime = in->ctime = c->now;
	if (dir->mode & S_ISGID) {
		/* BSD group semantics of setgid directories; subdirectories
		 * inherit the bit. */
		in->gid = dir->gid;
		if (type == S_IFDIR)
			in->mode |= S_ISGID;
	}
	if (type == S_IFCHR || type == S_IFBLK)
		in->rdev = c->rdev;
	if (type == S_IFREG) {
		rc = mgr_inode_set_layout(in, &c->layout);
		if (rc < 0)
			goto fail;
	} else if (type == S_IFDIR) {
		in->dir = mgr_dir_new(c->parent);
		if (!in->dir) {
			rc = -ENOMEM;
			goto fail;
		}
		/* Subdirectories inherit the striping policy, as Lustre. */
		if (dir->dir->has_policy) {
			in->dir->has_policy = true;
			in->dir->pol_stripe_size = dir->dir->pol_stripe_size;
			in->dir->pol_stripe_count = dir->dir->pol_stripe_count;
			in->dir->pol_first = dir->dir->pol_first;
		}
	} else if (type == S_IFLNK) {
		in->target = strdup(c->target);
		if (!in->target) {
			rc = -ENOMEM;
			goto fail;
		}
		in->size = strlen(c->target);
	}
	in->nlink = type == S_IFDIR ? 2 : 1;
	rc = mgr_itab_put(&ns->inodes, in);
	if (rc < 0)
		goto fail;
	rc = dir_add(dir->dir, c->name, in->ino, NULL);
	if (rc < 0) {
		mgr_itab_del(&ns->inodes, in->ino);
		goto fail;
	}
	/* Only a successful create consumes its decisions (N1). */
	c->ino = in->ino;
	if (in->ino >= ns->next_ino)
		ns->next_ino = in->ino + 1;
	if (type == S_IFREG)
		ns->rr_next = c->rr_next;
	if (type == S_IFDIR)
		dir->nlink++;
	touch_mc(dir, &c->now);
	*out = in;
	return 0;
fail:
	mgr_inode_free(in);
	return rc;
}

int mgr_ns_link(struct mgr_ns *ns, uint64_t ino, uint64_t newparent,
		const char *newname, const struct mgr_time *now,
		struct mgr_inode **out)
{
	struct mgr_inode *in, *dir;
	int rc = mgr_name_check(newname);

	if (rc < 0)
		return rc;
	in = mgr_ns_get(ns, ino);
	if (!in)
		return -ESTALE;
	rc = get_dir(ns, newparent, &dir);
	if (rc < 0)
		return rc;
	if (S_ISDIR(in->mode))
		return -EPERM;
	if (mgr_dir_find(dir->dir, newname))
		return -EEXIST;
	if (in->nlink == 0)
		return -ENOENT;  /* no linkat() of an unlinked file */
	if (in->nlink >= MGR_LINK_MAX)
		return -EMLINK;
	rc = dir_add(dir->dir, newname, ino, NULL);
	if (rc < 0)
		return rc;
	in->nlink++;
	in->ctime = *now;
	in->parent = newparent;
	touch_mc(dir, now);
	*out = in;
	return 0;
}

/* The inode `in` lost a name in directory dirin: drop its link count (a
 * directory's to 0, with its parent's ".." link) and destroy or orphan it. */
static void drop_link(struct mgr_ns *ns, struct mgr_inode *dirin,
		      struct mgr_inode *in, const struct mgr_time *now)
{
	if (S_ISDIR(in->mode)) {
		in->nlink = 0;
		dirin->nlink--;
	} else {
		in->nlink--;
	}
	in->ctime = *now;
	maybe_destroy(ns, in);
}

/* Remove the name e from directory dirin, then the link it held. */
static void drop_name(struct mgr_ns *ns, struct mgr_inode *dirin,
		      struct mgr_dirent *e, struct mgr_inode *in,
		      const struct mgr_time *now)
{
	dir_del(dirin->dir, e);
	drop_link(ns, dirin, in, now);
}

int mgr_ns_unlink(struct mgr_ns *ns, uint64_t parent, const char *name,
		  bool rmdir, const struct mgr_time *now)
{
	struct mgr_inode *dir, *in;
	struct mgr_dirent *e;
	int rc = mgr_name_check(name);

	if (rc < 0)
		return rc;
	rc = get_dir(ns, parent, &dir);
	if (rc < 0)
		return rc;
	e = mgr_dir_find(dir->dir, name);
	if (!e)
		return -ENOENT;
	in = mgr_ns_get(ns, e->ino);
	if (!in)
		return -EIO;
	if (rmdir) {
		if (!S_ISDIR(in->mode))
			return -ENOTDIR;
		if (in->dir->count > 0)
			return -ENOTEMPTY;
	} else if (S_ISDIR(in->mode)) {
		return -EISDIR;
	}
	touch_mc(dir, now);
	drop_name(ns, dir, e, in, now);
	return 0;
}

/* Is `ino` the directory `anc` or below it? */
static bool in_subtree(const struct mgr_ns *ns, uint64_t ino, uint64_t anc)
{
	/* Bounded walk: a cycle would be a bug, not a reason to hang. */
	for (uint32_t depth = 0; depth < 1u << 20; depth++) {
		const struct mgr_inode *in;

		if (ino == anc)
			return true;
		if (ino == MGR_ROOT_INO)
			return false;
		in = mgr_ns_get(ns, ino);
		if (!in || !in->dir)
			return false;
		ino = in->dir->parent;
	}
	return true;
}

/* A directory moves from old parent to new parent: fix ".." and links. */
static void move_dir(struct mgr_inode *child, struct mgr_inode *from,
		     struct mgr_inode *to)
{
	if (!S_ISDIR(child->mode) || from == to)
		return;
	child->dir->parent = to->ino;
	from->nlink--;
	to->nlink++;
}

int mgr_ns_rename(struct mgr_ns *ns, uint64_t parent, const char *name,
		  uint64_t newparent, const char *newname, uint32_t flags,
		  const struct mgr_time *now)
{
	struct mgr_inode *odir, *ndir, *src, *dst = NULL;
	struct mgr_dirent *oe, *ne;
	uint64_t src_ino;
	int rc;

	/* The whiteout itself is made by the caller (record.c), in the
	 * same record. */
	if (flags & ~(MGR_RENAME_NOREPLACE | MGR_RENAME_EXCHANGE |
		      MGR_RENAME_WHITEOUT))
		return -EINVAL;
	if ((flags & MGR_RENAME_EXCHANGE) &&
	    (flags & (MGR_RENAME_NOREPLACE | MGR_RENAME_WHITEOUT)))
		return -EINVAL;
	rc = mgr_name_check(name);
	if (rc == 0)
		rc = mgr_name_check(newname);
	if (rc < 0)
		return rc;
	rc = get_dir(ns, parent, &odir);
	if (rc == 0)
		rc = get_dir(ns, newparent, &ndir);
	if (rc < 0)
		return rc;
	oe = mgr_dir_find(odir->dir, name);
	if (!oe)
		return -ENOENT;
	src = mgr_ns_get(ns, oe->ino);
	if (!src)
		return -EIO;
	ne = mgr_dir_find(ndir->dir, newname);
	if (ne) {
		dst = mgr_ns_get(ns, ne->ino);
		if (!dst)
			return -EIO;
	}
	if ((flags & MGR_RENAME_EXCHANGE) && !dst)
		return -ENOENT;
	if ((flags & MGR_RENAME_NOREPLACE) && dst)
		return -EEXIST;
	/* Renaming a name onto itself, or onto another link of the same
	 * inode, succeeds and does nothing (POSIX). */
	if (dst == src)
		return 0;
	/* A directory may not move below itself; with EXCHANGE the target
	 * moves too. */
	if (S_ISDIR(src->mode) && in_subtree(ns, newparent, src->ino))
		return -EINVAL;
	if ((flags & MGR_RENAME_EXCHANGE) && S_ISDIR(dst->mode) &&
	    in_subtree(ns, parent, dst->ino))
		return -EINVAL;

	if (flags & MGR_RENAME_EXCHANGE) {
		/* Swap the inode numbers of the two entries (cookies stay with
		 * the names: each directory still lists a name at each). */
		if (S_ISDIR(src->mode) != S_ISDIR(dst->mode)) {
			if (S_ISDIR(src->mode) && ndir->nlink >= MGR_LINK_MAX)
				return -EMLINK;
			if (S_ISDIR(dst->mode) && odir->nlink >= MGR_LINK_MAX)
				return -EMLINK;
		}
		oe->ino = dst->ino;
		ne->ino = src->ino;
		if (S_ISDIR(src->mode))
			move_dir(src, odir, ndir);
		if (S_ISDIR(dst->mode))
			move_dir(dst, ndir, odir);
		src->parent = newparent;
		dst->parent = parent;
		src->ctime = *now;
		dst->ctime = *now;
		touch_mc(odir, now);
		touch_mc(ndir, now);
		return 0;
	}

	if (dst) {
		if (S_ISDIR(src->mode) && !S_ISDIR(dst->mode))
			return -ENOTDIR;
		if (!S_ISDIR(src->mode) && S_ISDIR(dst->mode))
			return -EISDIR;
		if (S_ISDIR(dst->mode) && dst->dir->count > 0)
			return -ENOTEMPTY;
	} else if (S_ISDIR(src->mode) && odir != ndir &&
		   ndir->nlink >= MGR_LINK_MAX) {
		return -EMLINK;
	}

	src_ino = src->ino;
	if (dst) {
		/* Replace: the existing entry now names the source (it keeps
		 * its cookie), and the target loses that link.  Nothing here
		 * can fail, so the rename is all or nothing. */
		ne->ino = src_ino;
		drop_link(ns, ndir, dst, now);
	} else {
		/* The only step that can fail (ENOMEM), before any change. */
		rc = dir_add(ndir->dir, newname, src_ino, NULL);
		if (rc < 0)
			return rc;
	}
	dir_del(odir->dir, oe);
	move_dir(src, odir, ndir);
	src->parent = newparent;
	src->ctime = *now;
	touch_mc(odir, now);
	touch_mc(ndir, now);
	return 0;
}

int mgr_ns_setattr_check(const struct mgr_ns *ns, uint64_t ino,
			 uint32_t valid)
{
	const struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (valid & MGR_SA_SIZE) {
		if (S_ISDIR(in->mode))
			return -EISDIR;
		if (!S_ISREG(in->mode))
			return -EINVAL;
	}
	return 0;
}

static struct tw_ts ts(const struct mgr_time *t)
{
	return (struct tw_ts){ t->sec, t->nsec };
}

/* The ctime of a change made now: mgrd's clock, unless the inode's ctime
 * is not older (a client's clock ahead of ours set it, or ours stepped
 * back): then just after it.  ctime only moves forward, which the client
 * relies on to tell the newer of two answers (fuse-client/inode.c). */
static struct mgr_time ctime_now(const struct mgr_inode *in,
				 const struct mgr_time *now)
{
	struct mgr_time t = in->ctime;

	if (tw_ts_cmp(ts(now), ts(&in->ctime)) > 0)
		return *now;
	if (++t.nsec == 1000000000u) {
		t.sec++;
		t.nsec = 0;
	}
	return t;
}

int mgr_ns_setattr(struct mgr_ns *ns, uint64_t ino,
		   const struct mgr_setattr *sa, const struct mgr_time *now,
		   struct mgr_inode **out)
{
	struct mgr_inode *in;
	int rc = mgr_ns_setattr_check(ns, ino, sa->valid);

	if (rc < 0)
		return rc;
	in = mgr_ns_get(ns, ino);
	if (sa->valid & MGR_SA_MODE) {
		struct mgr_xattr **acl = xattr_find(in, MGR_ACL_ACCESS);

		in->mode = (in->mode & S_IFMT) | (sa->mode & 07777);
		/* chmod updates the ACL it would otherwise contradict. */
		if (acl)
			mgr_acl_chmod((*acl)->value, (*acl)->len, in->mode);
	}
	if (sa->valid & MGR_SA_UID)
		in->uid = sa->uid;
	if (sa->valid & MGR_SA_GID)
		in->gid = sa->gid;
	if (sa->valid & MGR_SA_SIZE) {
		in->size = sa->size;
		if (sa->trunc_gen > in->trunc_gen)
			in->trunc_gen = sa->trunc_gen;
		in->data_version++;
		/* On ENOMEM the blocks stay as they were: st_blocks is
		 * advisory, and the record is already decided. */
		for (uint32_t k = 0; k < in->layout->stripe_count; k++)
			(void)mgr_inode_set_blocks(in, k, k < sa->n_blocks
							  ? sa->blocks[k] : 0);
		/* truncate(2) updates mtime and ctime. */
		in->mtime = *now;
	}
	if (sa->valid & MGR_SA_ATIME_NOW)
		in->atime = *now;
	else if (sa->valid & MGR_SA_ATIME)
		in->atime = sa->atime;
	if (sa->valid & MGR_SA_MTIME_NOW)
		in->mtime = *now;
	else if (sa->valid & MGR_SA_MTIME)
		in->mtime = sa->mtime;
	/* A ctime given (the kernel's writeback cache keeps its own) never
	 * moves it back: the kernel's clock is coarse, a tick behind ours,
	 * so it may be older than the ctime we stamped on the change before
	 * this one.  This change is the later one: it is stamped now. */
	if ((sa->valid & MGR_SA_CTIME) &&
	    tw_ts_cmp(ts(&sa->ctime), ts(&in->ctime)) >= 0)
		in->ctime = sa->ctime;
	else
		in->ctime = ctime_now(in, now);
	*out = in;
	return 0;
}

int mgr_ns_trunc_begin(struct mgr_ns *ns, uint64_t ino, uint64_t gen)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (gen > in->trunc_gen)
		in->trunc_gen = gen;
	return 0;
}

int mgr_ns_size_report(struct mgr_ns *ns, uint64_t ino, uint64_t size,
		       const struct mgr_time *mtime, uint64_t trunc_gen,
		       bool wrote, bool keep_times, uint32_t n,
		       const uint32_t *cols, const uint64_t *blocks,
		       struct mgr_inode **out)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	/* Reports from before a truncate must not resurrect the old size or
	 * the old allocation. */
	if (trunc_gen == in->trunc_gen) {
		if (size > in->size)
			in->size = size;
		for (uint32_t i = 0; i < n; i++)
			if (cols[i] < in->layout->stripe_count)
				(void)mgr_inode_set_blocks(in, cols[i],
							   blocks[i]);
	}
	if (wrote) {
		/* A report may come after a chmod or chown of the file that
		 * came after the writes (reports go at close): the status
		 * change is the later one, and ctime does not go back. */
		if (!keep_times) {
			in->mtime = *mtime;
			if (tw_ts_cmp(ts(&in->ctime), ts(mtime)) < 0)
				in->ctime = *mtime;
		}
		in->data_version++;
	}
	*out = in;
	return 0;
}

int mgr_ns_accessed(struct mgr_ns *ns, uint64_t ino, const struct mgr_time *at,
		    bool strict)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (strict || tw_relatime_due(ts(&in->atime), ts(&in->mtime),
				      ts(&in->ctime), ts(at)))
		in->atime = *at;
	return 0;
}

int mgr_ns_setstripe(struct mgr_ns *ns, uint64_t ino, uint32_t stripe_size,
		     uint32_t stripe_count, int32_t first, bool *has_layout,
		     struct r0_layout *layout, uint64_t *rr_next,
		     const struct mgr_time *now, struct mgr_inode **out)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);
	struct r0_layout probe;
	uint64_t rr;
	int rc;

	if (!in)
		return -ESTALE;
	if (stripe_size && (stripe_size < R0_MIN_STRIPE_SIZE ||
			    stripe_size > R0_MAX_STRIPE_SIZE ||
			    (stripe_size & (stripe_size - 1))))
		return -EINVAL;
	if (stripe_count > R0_MAX_STRIPE_COUNT)
		return -EINVAL;
	if (first >= 0 && (uint32_t)first >= ns->n_groups)
		return -EINVAL;
	if (first < -1)
		return -EINVAL;
	if (S_ISDIR(in->mode)) {
		/* Validate that the policy can make a layout at all. */
		rc = r0_layout_make(&probe, stripe_size ? stripe_size
					    : ns->def_stripe_size,
				    stripe_count, 0, ns->n_groups);
		if (rc < 0)
			return rc;
		in->dir->has_policy = true;
		in->dir->pol_stripe_size = stripe_size;
		in->dir->pol_stripe_count = stripe_count;
		in->dir->pol_first = first;
		in->ctime = *now;
		*out = in;
		return 0;
	}
	if (!S_ISREG(in->mode))
		return -EINVAL;
	if (in->data_version != 0 || in->size != 0)
		return -EBUSY;
	if (!*has_layout) {
		/* Exactly what the user asked for this file (count 0 = every
		 * group, size 0 = the cluster default). */
		rc = pick_layout(ns, stripe_size, stripe_count, first, layout,
				 &rr);
		if (rc < 0)
			return rc;
		*rr_next = rr;
		*has_layout = true;
	}
	rc = mgr_inode_set_layout(in, layout);
	if (rc < 0)
		return rc;
	ns->rr_next = *rr_next;
	in->ctime = *now;
	*out = in;
	return 0;
}

int mgr_ns_open(struct mgr_ns *ns, uint64_t ino)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (in->nlink == 0 && !in->orphan)
		return -ENOENT;
	if (in->open_count == MGR_OPEN_COUNT_MAX)
		return -EMFILE;
	in->open_count++;
	return 0;
}

int mgr_ns_close(struct mgr_ns *ns, uint64_t ino)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	if (!in)
		return -ESTALE;
	if (in->open_count == 0)
		return -EBADF;
	in->open_count--;
	if (in->open_count == 0)
		maybe_destroy(ns, in);
	return 0;
}

/* ---------------------------------------------------------------- xattrs */

static int xattr_name_check(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	/* Linux answers ERANGE for an empty or too long name. */
	if (len == 0 || len > MGR_XATTR_NAME_MAX)
		return -ERANGE;
	return 0;
}

static struct mgr_xattr **xattr_find(struct mgr_inode *in, const char *name)
{
	struct mgr_xattr **pp;

	for (pp = &in->xattrs; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0)
			return pp;
	return NULL;
}

/* Names and values together, what MGR_XATTR_TOTAL_MAX bounds: summed
 * when a value is set rather than kept in every inode. */
static size_t xattr_bytes(const struct mgr_inode *in)
{
	size_t n = 0;

	for (const struct mgr_xattr *x = in->xattrs; x; x = x->next)
		n += x->len + strlen(x->name);
	return n;
}

static void xattr_unlink(struct mgr_xattr **pp)
{
	struct mgr_xattr *x = *pp;

	*pp = x->next;
	free(x->name);
	free(x->value);
	free(x);
}

/* Setting an ACL (as ext4_set_acl): a default ACL only on directories; an
 * access ACL sets the permission bits of the mode, and one the mode says
 * all of is not stored (an old one is dropped).  Returns 1 when done here,
 * 0 when the value is to be stored as any xattr, or -errno. */
static int acl_set_check(struct mgr_inode *in, const char *name,
			 const void *value, uint32_t len, uint32_t flags,
			 const struct mgr_time *now)
{
	bool access = strcmp(name, MGR_ACL_ACCESS) == 0;
	struct mgr_xattr **pp;
	uint32_t mode = in->mode;

	if (!access && strcmp(name, MGR_ACL_DEFAULT) != 0)
		return 0;
	if (S_ISLNK(in->mode))
		return -EOPNOTSUPP;
	if (mgr_acl_check(value, len) < 0)
		return -EINVAL;
	if (!access)
		return S_ISDIR(in->mode) ? 0 : -EACCES;
	if (mgr_acl_equiv_mode(value, len, &mode) > 0)
		return 0;   /* stored; mgr_ns_setxattr then sets the mode */
	pp = xattr_find(in, name);
	if (pp)
		xattr_unlink(pp);
	in->mode = mode;
	if (flags & MGR_XATTR_KILL_SGID)
		in->mode &= ~(uint32_t)S_ISGID;
	in->ctime = *now;
	return 1;
}

int mgr_ns_setxattr(struct mgr_ns *ns, uint64_t ino, const char *name,
		    const void *value, uint32_t len, uint32_t flags,
		    const struct mgr_time *now)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);
	struct mgr_xattr **pp, *x;
	uint8_t *copy;
	size_t nl;
	int rc;

	if (!in)
		return -ESTALE;
	if (flags & ~(MGR_XATTR_CREATE | MGR_XATTR_REPLACE |
		      MGR_XATTR_KILL_SGID))
		return -EINVAL;
	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	if (len > MGR_XATTR_SIZE_MAX)
		return -E2BIG;
	if ((flags & MGR_XATTR_KILL_SGID) && strcmp(name, MGR_ACL_ACCESS))
		return -EINVAL;
	rc = acl_set_check(in, name, value, len, flags, now);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	pp = xattr_find(in, name);
	if (pp && (flags & MGR_XATTR_CREATE))
		return -EEXIST;
	if (!pp && (flags & MGR_XATTR_REPLACE))
		return -ENODATA;
	nl = strlen(name);
	if (xattr_bytes(in) - (pp ? (*pp)->len + nl : 0) + len + nl >
	    MGR_XATTR_TOTAL_MAX)
		return -ENOSPC;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, value, len);
	if (pp) {
		x = *pp;
		free(x->value);
	} else {
		x = calloc(1, sizeof(*x));
		if (!x || !(x->name = strdup(name))) {
			free(x);
			free(copy);
			return -ENOMEM;
		}
		/* Append: listxattr returns names in creation order. */
		for (pp = &in->xattrs; *pp; pp = &(*pp)->next)
			;
		*pp = x;
	}
	x->value = copy;
	x->len = len;
	in->ctime = *now;
	if (strcmp(name, MGR_ACL_ACCESS) == 0)
		mgr_acl_equiv_mode(value, len, &in->mode);
	if (flags & MGR_XATTR_KILL_SGID)
		in->mode &= ~(uint32_t)S_ISGID;
	return 0;
}

int mgr_inode_add_xattr(struct mgr_inode *in, const char *name,
			const void *value, uint32_t len)
{
	struct mgr_xattr *x, **pp;

	if (xattr_name_check(name) < 0 || len > MGR_XATTR_SIZE_MAX ||
	    xattr_find(in, name))
		return -EBADMSG;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->name = strdup(name);
	x->value = malloc(len ? len : 1);
	if (!x->name || !x->value) {
		free(x->name);
		free(x->value);
		free(x);
		return -ENOMEM;
	}
	if (len)
		memcpy(x->value, value, len);
	x->len = len;
	for (pp = &in->xattrs; *pp; pp = &(*pp)->next)
		;
	*pp = x;
	return 0;
}

int mgr_ns_getxattr(const struct mgr_ns *ns, uint64_t ino, const char *name,
		    void *buf, uint32_t size)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);
	struct mgr_xattr **pp;
	int rc;

	if (!in)
		return -ESTALE;
	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	pp = xattr_find(in, name);
	if (!pp)
		return -ENODATA;
	if (size == 0)
		return (int)(*pp)->len;
	if (size < (*pp)->len)
		return -ERANGE;
	if ((*pp)->len)  /* an empty value has no buffer */
		memcpy(buf, (*pp)->value, (*pp)->len);
	return (int)(*pp)->len;
}

/* trusted.* names are listed only to whom may read them (root). */
static bool xattr_listed(const struct mgr_xattr *x, bool trusted)
{
	return trusted || strncmp(x->name, "trusted.", 8) != 0;
}

int mgr_ns_listxattr(const struct mgr_ns *ns, uint64_t ino, char *buf,
		     uint32_t size, bool trusted)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);
	uint32_t need = 0;

	if (!in)
		return -ESTALE;
	for (struct mgr_xattr *x = in->xattrs; x; x = x->next)
		if (xattr_listed(x, trusted))
			need += (uint32_t)strlen(x->name) + 1;
	if (size == 0)
		return (int)need;
	if (size < need)
		return -ERANGE;
	for (struct mgr_xattr *x = in->xattrs; x; x = x->next) {
		size_t l = strlen(x->name) + 1;

		if (!xattr_listed(x, trusted))
			continue;

		memcpy(buf, x->name, l);
		buf += l;
	}
	return (int)need;
}

int mgr_ns_removexattr(struct mgr_ns *ns, uint64_t ino, const char *name,
		       const struct mgr_time *now)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);
	struct mgr_xattr **pp;
	int rc;

	if (!in)
		return -ESTALE;
	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	pp = xattr_find(in, name);
	if (!pp)
		return -ENODATA;
	xattr_unlink(pp);
	in->ctime = *now;
	return 0;
}

/* -------------------------------------------------------------- the rest */

void mgr_ns_pdel_done(struct mgr_ns *ns, uint64_t ino)
{
	free(tw_hmap_del(&ns->pdel, ino));
}

int mgr_ns_psize_add(struct mgr_ns *ns, uint64_t ino)
{
	const struct mgr_inode *in = mgr_ns_get(ns, ino);
	struct mgr_psize *ps;

	if (!in || !S_ISREG(in->mode) || mgr_ns_psize_pending(ns, ino))
		return 0;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->ino = ino;
	if (tw_hmap_put(&ns->psize, ino, ps) < 0) {
		free(ps);
		return -ENOMEM;
	}
	return 0;
}

int mgr_ns_size_found(struct mgr_ns *ns, uint64_t ino, uint64_t size,
		      uint64_t gen, const struct mgr_time *now)
{
	struct mgr_inode *in = mgr_ns_get(ns, ino);

	/* Checks first: a failed apply changes nothing (no entry exists for
	 * a destroyed inode or another type anyway). */
	if (!in)
		return -ESTALE;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	free(tw_hmap_del(&ns->psize, ino));
	if (gen != in->trunc_gen || size <= in->size)
		return 0;
	in->size = size;
	in->mtime = *now;
	in->ctime = ctime_now(in, now);
	in->data_version++;
	return 0;
}

/* The name of `ino` in directory `dirino` (linear: admin use only). */
static const struct mgr_dirent *name_in(const struct mgr_ns *ns,
					uint64_t dirino, uint64_t ino)
{
	const struct mgr_inode *d = mgr_ns_get(ns, dirino);

	if (!d || !d->dir)
		return NULL;
	for (uint32_t i = 0; i < d->dir->norder; i++)
		if (d->dir->order[i] && d->dir->order[i]->ino == ino)
			return d->dir->order[i];
	return NULL;
}

int mgr_ns_ino_path(const struct mgr_ns *ns, uint64_t ino, char *buf,
		    size_t size)
{
	const struct mgr_inode *in = mgr_ns_get(ns, ino);
	size_t pos = size;  /* built backwards from the end of buf */

	if (!in)
		return -ESTALE;
	if (size < 2)
		return -ENAMETOOLONG;
	buf[--pos] = '\0';
	if (ino == MGR_ROOT_INO) {
		buf[--pos] = '/';
		memmove(buf, buf + pos, size - pos);
		return 0;
	}
	for (uint32_t depth = 0; ino != MGR_ROOT_INO; depth++) {
		uint64_t parent = in->dir ? in->dir->parent : in->parent;
		const struct mgr_dirent *e = name_in(ns, parent, ino);

		/* A hard link whose newest name was removed: any other name
		 * will do (a full scan; admin use only). */
		if (!e && !in->dir && in->nlink > 0) {
			struct mgr_inode *d;

			for (size_t it = 0; !e &&
			     mgr_itab_next(&ns->inodes, &it, &d);) {
				if (d->dir) {
					e = name_in(ns, d->ino, ino);
					parent = d->ino;
				}
			}
		}

		if (!e || depth > 4096)
			return -ENOENT;
		if (pos < (size_t)e->namelen + 1)
			return -ENAMETOOLONG;
		pos -= e->namelen;
		memcpy(buf + pos, e->name, e->namelen);
		buf[--pos] = '/';
		ino = parent;
		in = mgr_ns_get(ns, ino);
		if (!in)
			return -ENOENT;
	}
	memmove(buf, buf + pos, size - pos);
	return 0;
}

/* What docs/ARCHITECTURE.md "Namespace" (memory per inode) counts on. */
_Static_assert(sizeof(struct mgr_inode) == 128, "struct mgr_inode grew");
_Static_assert(offsetof(struct mgr_dirent, name) == 21,
	       "struct mgr_dirent grew");
