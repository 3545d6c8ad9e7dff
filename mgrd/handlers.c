/* handlers.c - one handler per client/admin request type of the
 * operations contract (proto/FORMAT.md section 3): decode and validate the
 * request, apply it to the state (mutating ones through a struct mgr_op and
 * the commit path of server.c), build the reply.
 *
 * Mutating handlers follow one pattern (see server.c): dup_check, fill the
 * op, mgr_op_apply, finish (record closed, then reply).  SETATTR with a size
 * waits for the iods' TRUNCATE first.  Read-only handlers answer from the
 * state directly.  Permissions are checked here, before the op is
 * applied, against the caller its Ctx names after root_squash (perm.c,
 * FORMAT.md "Permissions"): records hold decided operations, so replay
 * never checks again.
 */
#include "server_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define READDIR_MAX_ENTRIES 1024u
#define READDIR_MAX_BYTES   (WIRE_MAX_MSG - (64u << 10))
#define NOBODY              65534u
#define FILES_FREE          (1ull << 32)

/* Attribute buffers for one Attr with its layout. */
struct attr_buf {
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[R0_MAX_STRIPE_COUNT];
};

/* A checksum of the inode's ACLs: clients forget the kernel's cached ACLs
 * when it changes (another mount set them, or chmod changed the mask), and
 * answer "no ACL" themselves when it is 0 (odd whenever there is one). */
static uint32_t acl_sig(const struct mgr_inode *in)
{
	uint32_t crc = 0;
	bool any = false;

	for (const struct mgr_xattr *x = in->xattrs; x; x = x->next)
		if (strncmp(x->name, "system.posix_acl_", 17) == 0) {
			crc = tw_crc32c(crc, x->name, strlen(x->name));
			crc = tw_crc32c(crc, x->value, x->len);
			any = true;
		}
	return any ? crc | 1 : 0;
}

static void fill_attr(const struct mgr_server *s, struct attr_buf *ab,
		      const struct mgr_inode *in)
{
	const struct mgr_ns *ns = &s->st.ns;

	twinfs__attr__init(&ab->a);
	twinfs__layout__init(&ab->l);
	ab->a.ino = in->ino;
	ab->a.mode = in->mode;
	ab->a.nlink = in->nlink;
	ab->a.uid = in->uid;
	ab->a.gid = in->gid;
	ab->a.size = in->size;
	ab->a.rdev = mgr_inode_rdev(in);
	ab->a.atime_sec = in->atime.sec;
	ab->a.atime_nsec = in->atime.nsec;
	ab->a.mtime_sec = in->mtime.sec;
	ab->a.mtime_nsec = in->mtime.nsec;
	ab->a.ctime_sec = in->ctime.sec;
	ab->a.ctime_nsec = in->ctime.nsec;
	ab->a.trunc_gen = in->trunc_gen;
	ab->a.data_version = in->data_version;
	ab->a.acl_sig = acl_sig(in);
	ab->a.cap_absent = mgr_ns_getxattr(ns, in->ino, "security.capability",
					   NULL, 0) == -ENODATA;
	ab->a.selinux_absent = mgr_ns_getxattr(ns, in->ino, "security.selinux",
					       NULL, 0) == -ENODATA;
	if (S_ISREG(in->mode)) {
		ab->a.blocks = mgr_inode_blocks(in);
		ab->l.stripe_size = in->layout->stripe_size;
		ab->l.stripe_count = in->layout->stripe_count;
		memcpy(ab->groups, in->layout->groups,
		       in->layout->stripe_count * sizeof(uint32_t));
		ab->l.n_groups = in->layout->stripe_count;
		ab->l.groups = ab->groups;
		ab->a.layout = &ab->l;
	} else if (S_ISDIR(in->mode)) {
		const struct mgr_dir *d = in->dir;

		ab->a.blocks = 8;  /* one 4 KiB block, as ext4 shows */
		/* The policy a new file here would get. */
		if (d->has_policy) {
			ab->l.stripe_size = d->pol_stripe_size
					    ? d->pol_stripe_size
					    : ns->def_stripe_size;
			ab->l.stripe_count = d->pol_stripe_count;
			if (d->pol_first >= 0) {
				ab->groups[0] = (uint32_t)d->pol_first;
				ab->l.n_groups = 1;
				ab->l.groups = ab->groups;
			}
		} else {
			ab->l.stripe_size = ns->def_stripe_size;
			ab->l.stripe_count = ns->def_stripe_count;
		}
		if (ab->l.stripe_count == 0 || ab->l.stripe_count > ns->n_groups)
			ab->l.stripe_count = ns->n_groups;
		ab->a.layout = &ab->l;
	}
}

/* The caller a request names.  A request without a Ctx is mgrd's own
 * kind of caller, root (admin tools).  groups[] must hold
 * MGR_CRED_GROUPS_MAX; cr borrows it. */
static void cred_of(const struct mgr_server *s, const Twinfs__Ctx *ctx,
		    struct mgr_cred *cr, uint32_t *groups)
{
	/* The identity's squash (proto/FORMAT.md "Permissions"); anonymous
	 * clients get [cluster] root_squash. */
	const struct tw_conf_client *cl = s->req_client;
	enum tw_squash q = cl ? cl->squash : s->conf->root_squash
		? TW_SQUASH_ROOT : TW_SQUASH_NONE;
	uint32_t anonuid = cl ? cl->anonuid : NOBODY;
	uint32_t anongid = cl ? cl->anongid : NOBODY;

	cr->uid = ctx ? ctx->uid : 0;
	cr->gid = ctx ? ctx->gid : 0;
	cr->n_groups = ctx ? (uint32_t)TW_MIN(ctx->n_groups,
					      (size_t)MGR_CRED_GROUPS_MAX) : 0;
	cr->groups = groups;
	if (q == TW_SQUASH_ALL) {
		cr->uid = anonuid;
		cr->gid = anongid;
		cr->n_groups = 0;
		return;
	}
	if (q == TW_SQUASH_ROOT && cr->uid == 0)
		cr->uid = anonuid;
	if (q == TW_SQUASH_ROOT && cr->gid == 0)
		cr->gid = anongid;
	for (uint32_t i = 0; i < cr->n_groups; i++)
		groups[i] = q == TW_SQUASH_ROOT && ctx->groups[i] == 0
			? anongid : ctx->groups[i];
}

void mgr_srv_cred(const struct mgr_server *s, const Twinfs__Ctx *ctx,
		  struct mgr_cred *cr, uint32_t *groups)
{
	cred_of(s, ctx, cr, groups);
}

/* A cap for an open of in under op's session, into buf (WIRE_CAP_LEN),
 * set in *cap and *lifetime_ms; nothing without a secret or a live
 * session (the client then asks MSG_CAP, or needs none). */
static void open_cap(const struct mgr_server *s, const struct mgr_op *op,
		     const struct mgr_inode *in, uint32_t flags, uint8_t *buf,
		     ProtobufCBinaryData *cap, uint32_t *lifetime_ms)
{
	if (!mgr_cap_enabled() || !in || !S_ISREG(in->mode) ||
	    mgr_cap_issue(s, op->session, in, (flags & O_ACCMODE) != O_RDONLY,
			  buf, lifetime_ms) < 0)
		return;
	cap->data = buf;
	cap->len = WIRE_CAP_LEN;
}

static void creds(const struct mgr_server *s, const Twinfs__Ctx *ctx,
		  struct mgr_op *op)
{
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct mgr_cred cr;

	cred_of(s, ctx, &cr, groups);
	op->uid = cr.uid;
	op->gid = cr.gid;
}

/* Whether the request's session has ino open for writing: ftruncate and
 * the kernel's writes behind a SETATTR act through such a descriptor,
 * whatever the mode says now. */
static bool write_handle(const struct mgr_server *s, uint64_t session,
			 uint64_t ino)
{
	const struct mgr_session *sess = mgr_session_get(&s->st.sessions,
							 session);
	uint64_t k;
	void *v;

	if (!sess)
		return false;
	for (size_t it = 0; tw_hmap_next(&sess->handles, &it, &k, &v);) {
		const struct mgr_handle *fh = v;

		if (fh->ino == ino && (fh->flags & O_ACCMODE) != O_RDONLY)
			return true;
	}
	return false;
}

/* Search permission on the directory named by ino, if it is one (the
 * namespace answers the other cases). */
static int may_lookup(const struct mgr_server *s, const struct mgr_cred *cr,
		      uint64_t dirino)
{
	const struct mgr_inode *dir = mgr_ns_get(&s->st.ns, dirino);

	return dir ? mgr_perm_lookup(cr, dir) : 0;
}

/* A new name in dirino: search first, then, when the name is free (an
 * existing one is EEXIST, as Linux finds it before may_create), write. */
static int may_create(const struct mgr_server *s, const struct mgr_cred *cr,
		      uint64_t dirino, const char *name, uint32_t mode,
		      uint32_t rdev)
{
	const struct mgr_inode *dir = mgr_ns_get(&s->st.ns, dirino);
	struct mgr_inode *in;
	int rc;

	if (!dir)
		return 0;
	rc = mgr_perm_lookup(cr, dir);
	if (rc < 0 || !name || mgr_ns_lookup(&s->st.ns, dirino, name, &in) == 0)
		return rc;
	return mgr_perm_create(cr, dir, mode, rdev);
}

/* Removing name from dirino: search, then (when it exists) may_delete. */
static int may_delete(const struct mgr_server *s, const struct mgr_cred *cr,
		      uint64_t dirino, const char *name)
{
	const struct mgr_inode *dir = mgr_ns_get(&s->st.ns, dirino);
	struct mgr_inode *victim;
	int rc;

	if (!dir)
		return 0;
	rc = mgr_perm_lookup(cr, dir);
	if (rc < 0 || !name ||
	    mgr_ns_lookup(&s->st.ns, dirino, name, &victim) < 0)
		return rc;
	return mgr_perm_delete(cr, dir, victim);
}

/* parent (0: none): a namespace change also answers with the directory's
 * attributes after it, which the client serves the kernel's next GETATTR
 * of it from (the kernel drops them after every create and unlink). */
static void reply_entry_in(struct mgr_server *s, struct wire_conn *c,
			   const struct wire_hdr *h, struct mgr_op *op, int rc,
			   const struct mgr_inode *in, uint64_t fh,
			   uint64_t parent)
{
	Twinfs__Entry e = TWINFS__ENTRY__INIT;
	struct attr_buf ab, pb;
	const struct mgr_inode *dir;
	uint8_t cap[WIRE_CAP_LEN];

	if (rc == 0 && in) {
		fill_attr(s, &ab, in);
		e.attr = &ab.a;
		e.fh = fh;
	}
	/* fh: a create that opened the file (MKNOD open=true). */
	if (rc == 0 && in && fh)
		open_cap(s, op, in, op->flags, cap, &e.cap, &e.cap_lifetime_ms);
	if (rc == 0 && parent && (dir = mgr_ns_get(&s->st.ns, parent))) {
		fill_attr(s, &pb, dir);
		e.parent_attr = &pb.a;
	}
	/* Name leases (dlease.c): a new directory's goes to its maker, and
	 * a name added where the session holds one renews it (L2). */
	if (rc == 0 && op->lease && in)
		e.lease_ms = mgr_dl_grant(s, c, in->ino);
	if (rc == 0 && parent && h->type != TWINFS__MSG_TYPE__MSG_UNLINK &&
	    h->type != TWINFS__MSG_TYPE__MSG_RMDIR)
		e.parent_lease_ms = mgr_dl_renew(s, c, parent);
	if (rc == 0)
		e.gone_ino = op->gone_ino;
	mgr_srv_finish(s, c, h, op, rc, rc == 0 ? &e.base : NULL);
}

static void reply_entry(struct mgr_server *s, struct wire_conn *c,
			const struct wire_hdr *h, struct mgr_op *op, int rc,
			const struct mgr_inode *in, uint64_t fh)
{
	reply_entry_in(s, c, h, op, rc, in, fh, 0);
}

static void h_lookup(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m)
{
	const Twinfs__Lookup *q = (const Twinfs__Lookup *)m->body;
	Twinfs__Entry e = TWINFS__ENTRY__INIT;
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct attr_buf ab;
	struct mgr_inode *in;
	struct mgr_cred cr;
	int rc;

	cred_of(s, q->ctx, &cr, groups);
	rc = may_lookup(s, &cr, q->parent);
	if (rc == 0)
		rc = mgr_ns_lookup(&s->st.ns, q->parent, q->name, &in);

	if (rc < 0) {
		mgr_srv_reply(c, &m->hdr, rc, NULL);
		return;
	}
	fill_attr(s, &ab, in);
	e.attr = &ab.a;
	mgr_srv_reply(c, &m->hdr, 0, &e.base);
}

static void h_getattr(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	const Twinfs__Getattr *q = (const Twinfs__Getattr *)m->body;
	Twinfs__Entry e = TWINFS__ENTRY__INIT;
	struct attr_buf ab;
	struct mgr_inode *in = mgr_ns_get(&s->st.ns, q->ino);

	if (!in) {
		mgr_srv_reply(c, &m->hdr, -ESTALE, NULL);
		return;
	}
	fill_attr(s, &ab, in);
	e.attr = &ab.a;
	mgr_srv_reply(c, &m->hdr, 0, &e.base);
}

static void h_readlink(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m)
{
	const Twinfs__Getattr *q = (const Twinfs__Getattr *)m->body;
	Twinfs__ReadlinkReply r = TWINFS__READLINK_REPLY__INIT;
	struct mgr_inode *in = mgr_ns_get(&s->st.ns, q->ino);

	if (!in) {
		mgr_srv_reply(c, &m->hdr, -ESTALE, NULL);
		return;
	}
	if (!S_ISLNK(in->mode)) {
		mgr_srv_reply(c, &m->hdr, -EINVAL, NULL);
		return;
	}
	r.target = in->target;
	mgr_srv_reply(c, &m->hdr, 0, &r.base);
}

static void h_readdir(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	const Twinfs__Readdir *q = (const Twinfs__Readdir *)m->body;
	Twinfs__ReaddirReply r = TWINFS__READDIR_REPLY__INIT;
	struct mgr_inode *in = mgr_ns_get(&s->st.ns, q->ino);
	uint32_t max = q->max_entries && q->max_entries < READDIR_MAX_ENTRIES
		       ? q->max_entries : READDIR_MAX_ENTRIES;
	Twinfs__Dirent *ents = NULL, **ptrs = NULL;
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct attr_buf *abs = NULL;
	struct mgr_dirent *e;
	struct mgr_cred cr;
	size_t bytes = 0;
	uint32_t n = 0;
	int rc;

	if (!in) {
		mgr_srv_reply(c, &m->hdr, -ESTALE, NULL);
		return;
	}
	if (!in->dir) {
		mgr_srv_reply(c, &m->hdr, -ENOTDIR, NULL);
		return;
	}
	/* Read permission, which the kernel checks at opendir; mgrd checks
	 * every READDIR, as an NFS server does, so a listing sent around
	 * the kernel is refused too. */
	cred_of(s, q->ctx, &cr, groups);
	rc = mgr_perm_check(&cr, in, MGR_MAY_READ);
	if (rc < 0) {
		mgr_srv_reply(c, &m->hdr, rc, NULL);
		return;
	}
	ents = calloc(max, sizeof(*ents));
	ptrs = calloc(max, sizeof(*ptrs));
	if (q->plus)
		abs = calloc(max, sizeof(*abs));
	if (!ents || !ptrs || (q->plus && !abs)) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		goto out;
	}
	for (e = mgr_dir_next(in->dir, q->cookie); e && n < max;
	     e = mgr_dir_next(in->dir, e->cookie)) {
		struct mgr_inode *child = mgr_ns_get(&s->st.ns, e->ino);
		/* Name, numbers and tags; an Attr with layout is < 300. */
		size_t est = e->namelen + 48u + (q->plus ? 320u : 0u);

		if (!child)
			continue;
		if (bytes + est > READDIR_MAX_BYTES)
			break;
		bytes += est;
		twinfs__dirent__init(&ents[n]);
		ents[n].name = e->name;
		ents[n].ino = e->ino;
		ents[n].mode = child->mode;
		ents[n].cookie = e->cookie;
		if (q->plus) {
			fill_attr(s, &abs[n], child);
			ents[n].attr = &abs[n].a;
		}
		ptrs[n] = &ents[n];
		n++;
	}
	r.n_entries = n;
	r.entries = ptrs;
	r.eof = e == NULL;
	mgr_srv_reply(c, &m->hdr, 0, &r.base);
out:
	free(ents);
	free(ptrs);
	free(abs);
}

/* A reply given later, from an iod-pool callback: the connection stays
 * referenced until then (statfs, sync). */
struct deferred {
	struct mgr_server *s;
	struct wire_conn *c;
	struct wire_hdr hdr;
};

/* NULL after answering ENOMEM itself. */
static struct deferred *defer_begin(struct mgr_server *s, struct wire_conn *c,
				    const struct wire_msg *m)
{
	struct deferred *d = calloc(1, sizeof(*d));

	if (!d) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		return NULL;
	}
	d->s = s;
	d->c = c;
	d->hdr = m->hdr;
	wire_conn_ref(c);
	return d;
}

static void defer_reply(struct deferred *d, int status,
			const ProtobufCMessage *body)
{
	mgr_srv_reply(d->c, &d->hdr, status, body);
	wire_conn_unref(d->c);
	free(d);
}

static void statfs_done(int status, const struct mgr_statfs *sf, void *arg)
{
	struct deferred *d = arg;
	Twinfs__StatfsReply sr = TWINFS__STATFS_REPLY__INIT;
	uint64_t files = d->s->st.ns.inodes.count;

	/* Without an iod answering, df still works: zero blocks. */
	(void)status;
	sr.bsize = 4096;
	sr.blocks = sf->blocks;
	sr.bfree = sf->bfree;
	sr.bavail = sf->bavail;
	sr.files = files + FILES_FREE;
	sr.ffree = FILES_FREE;
	sr.namemax = MGR_NAME_MAX;
	defer_reply(d, 0, &sr.base);
}

static void h_statfs(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m)
{
	struct deferred *d = defer_begin(s, c, m);
	int rc;

	if (!d)
		return;
	rc = mgr_pool_statfs(s->pool, statfs_done, d);
	if (rc < 0)
		defer_reply(d, rc, NULL);
}

static void h_getxattr(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m, bool list)
{
	const Twinfs__Xattr *q = (const Twinfs__Xattr *)m->body;
	Twinfs__XattrReply r = TWINFS__XATTR_REPLY__INIT;
	uint32_t size = TW_MIN(q->size, MGR_XATTR_SIZE_MAX);
	uint8_t *buf = size ? malloc(size) : NULL;
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	const struct mgr_inode *in;
	struct mgr_cred cr;
	int rc = 0;

	if (size && !buf) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		return;
	}
	cred_of(s, q->ctx, &cr, groups);
	if (list) {
		rc = mgr_ns_listxattr(&s->st.ns, q->ino, (char *)buf, size,
				      mgr_perm_lists_trusted(&cr));
	} else {
		in = mgr_ns_get(&s->st.ns, q->ino);
		if (in && q->name)
			rc = mgr_perm_getxattr(&cr, in, q->name);
		if (rc == 0)
			rc = mgr_ns_getxattr(&s->st.ns, q->ino, q->name, buf,
					     size);
	}
	/* A list longer than a reply may hold is E2BIG, as Linux's. */
	if (rc > (int)MGR_XATTR_SIZE_MAX && list)
		rc = -E2BIG;
	if (rc >= 0) {
		r.size = (uint32_t)rc;
		if (size) {
			r.value.data = buf;
			r.value.len = (size_t)rc;
		}
	}
	mgr_srv_reply(c, &m->hdr, rc, &r.base);
	free(buf);
}

static void h_ino_path(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m)
{
	const Twinfs__Getattr *q = (const Twinfs__Getattr *)m->body;
	Twinfs__InoPath r = TWINFS__INO_PATH__INIT;
	char *buf = malloc(PATH_MAX * 4);
	int rc;

	if (!buf) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		return;
	}
	rc = mgr_ns_ino_path(&s->st.ns, q->ino, buf, PATH_MAX * 4);
	r.path = buf;
	mgr_srv_reply(c, &m->hdr, rc, &r.base);
	free(buf);
}

static void sync_done(int status, void *arg)
{
	defer_reply(arg, status < 0 ? -EIO : 0, NULL);
}

static void h_sync(struct mgr_server *s, struct wire_conn *c,
		   struct wire_msg *m, bool journal_only)
{
	struct deferred *d;
	int rc = mgr_journal_sync(&s->jnl);

	if (rc < 0)
		mgr_srv_fatal(s, "sync", rc);
	if (journal_only) {
		const Twinfs__Getattr *q = (const Twinfs__Getattr *)m->body;

		mgr_srv_reply(c, &m->hdr, q->ino && !mgr_ns_get(&s->st.ns, q->ino)
				  ? -ESTALE : 0, NULL);
		return;
	}
	d = defer_begin(s, c, m);
	if (!d)
		return;
	rc = mgr_pool_sync(s->pool, sync_done, d);
	if (rc < 0)
		defer_reply(d, rc, NULL);
}

/* ------------------------------------------------------ mutating requests */

static void h_mknod(struct mgr_server *s, struct wire_conn *c,
		    struct wire_msg *m, uint16_t type)
{
	struct mgr_op op = { .type = MGR_OP_CREATE };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	const Twinfs__Ctx *ctx;
	struct mgr_inode *in;
	struct mgr_cred cr;
	int rc;

	switch (type) {
	case TWINFS__MSG_TYPE__MSG_MKNOD: {
		const Twinfs__Mknod *q = (const Twinfs__Mknod *)m->body;

		ctx = q->ctx;
		if (mgr_srv_dup_check(s, c, m, ctx, &op))
			return;
		cred_of(s, ctx, &cr, groups);
		op.parent = q->parent;
		op.name = q->name;
		op.mode = q->mode;
		if ((op.mode & S_IFMT) == 0)
			op.mode |= S_IFREG;
		op.rdev = q->rdev;
		op.open = q->open;
		op.flags = q->open_flags;
		if (S_ISDIR(op.mode) || S_ISLNK(op.mode)) {
			rc = -EINVAL;  /* mknod(2) makes neither */
			goto out;
		}
		if (q->open && !S_ISREG(op.mode)) {
			rc = -EINVAL;
			goto out;
		}
		rc = may_lookup(s, &cr, q->parent);
		if (rc < 0)
			goto out;
		/* create without O_EXCL on an existing name opens it. */
		if (q->open && !q->excl &&
		    mgr_ns_lookup(&s->st.ns, q->parent, q->name, &in) == 0) {
			if (S_ISDIR(in->mode)) {
				rc = -EISDIR;
				goto out;
			}
			rc = mgr_perm_open(&cr, in, q->open_flags);
			if (rc < 0)
				goto out;
			if (mgr_srv_psize_wait(s, c, m, in->ino))
				return;
			op.type = MGR_OP_OPEN;
			op.open = false;
			op.ino = in->ino;
			rc = mgr_op_apply(&s->st, &op);
			reply_entry(s, c, &m->hdr, &op, rc, op.out, op.fh);
			return;
		}
		break;
	}
	case TWINFS__MSG_TYPE__MSG_MKDIR: {
		const Twinfs__Mkdir *q = (const Twinfs__Mkdir *)m->body;

		ctx = q->ctx;
		if (mgr_srv_dup_check(s, c, m, ctx, &op))
			return;
		cred_of(s, ctx, &cr, groups);
		op.parent = q->parent;
		op.name = q->name;
		op.mode = S_IFDIR | (q->mode & 07777);
		op.lease = q->lease;
		break;
	}
	default: {
		const Twinfs__Symlink *q = (const Twinfs__Symlink *)m->body;

		ctx = q->ctx;
		if (mgr_srv_dup_check(s, c, m, ctx, &op))
			return;
		cred_of(s, ctx, &cr, groups);
		op.parent = q->parent;
		op.name = q->name;
		op.mode = S_IFLNK | 0777;
		op.target = q->target;
		break;
	}
	}
	creds(s, ctx, &op);
	/* The client leaves the umask to us (FUSE_CAP_DONT_MASK): it does
	 * not apply under a default ACL (ns.c inherit_acl). */
	op.umask = ctx ? ctx->umask & 0777 : 0;
	rc = may_create(s, &cr, op.parent, op.name, op.mode, op.rdev);
	if (rc < 0)
		goto out;
	if ((in = mgr_ns_get(&s->st.ns, op.parent)))
		op.mode = mgr_perm_create_mode(&cr, in, op.mode);
	rc = mgr_srv_space(s, op.parent, op.name);
	if (rc < 0)
		goto out;
	mgr_srv_ino_reserve(s);
	rc = mgr_op_apply(&s->st, &op);
out:
	reply_entry_in(s, c, &m->hdr, &op, rc, op.out, op.open ? op.fh : 0,
		       op.parent);
}

static void h_unlink(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m, bool rmdir)
{
	const Twinfs__Unlink *q = (const Twinfs__Unlink *)m->body;
	struct mgr_op op = { .type = rmdir ? MGR_OP_RMDIR : MGR_OP_UNLINK };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct mgr_inode *victim;
	const struct mgr_inode *alive = NULL;
	struct mgr_cred cr;
	uint64_t vino = 0;
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	cred_of(s, q->ctx, &cr, groups);
	op.parent = q->parent;
	op.name = q->name;
	if (q->name &&
	    mgr_ns_lookup(&s->st.ns, q->parent, q->name, &victim) == 0)
		vino = victim->ino;
	rc = may_delete(s, &cr, q->parent, q->name);
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	/* The client must know which inode changed: gone (its last name, no
	 * handle kept it as an orphan: Entry.gone_ino), or living on with a
	 * new nlink and ctime (Entry.attr). */
	if (rc == 0 && vino && !(alive = mgr_ns_get(&s->st.ns, vino)))
		op.gone_ino = vino;
	reply_entry_in(s, c, &m->hdr, &op, rc, alive, 0, op.parent);
}

static void h_link(struct mgr_server *s, struct wire_conn *c,
		   struct wire_msg *m)
{
	const Twinfs__Link *q = (const Twinfs__Link *)m->body;
	struct mgr_op op = { .type = MGR_OP_LINK };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct mgr_cred cr;
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	cred_of(s, q->ctx, &cr, groups);
	op.ino = q->ino;
	op.newparent = q->newparent;
	op.newname = q->newname;
	rc = may_create(s, &cr, op.newparent, op.newname, 0, 0);
	if (rc == 0)
		rc = mgr_srv_space(s, op.newparent, op.newname);
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	reply_entry_in(s, c, &m->hdr, &op, rc, op.out, 0, op.newparent);
}

/* Both directories are searched; then, when the source exists, the
 * rules of perm.c.  The namespace answers every other error. */
static int may_rename(const struct mgr_server *s, const Twinfs__Rename *q)
{
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct mgr_inode *odir, *ndir, *src, *dst = NULL;
	struct mgr_cred cr;
	int rc;

	cred_of(s, q->ctx, &cr, groups);
	rc = may_lookup(s, &cr, q->parent);
	if (rc == 0)
		rc = may_lookup(s, &cr, q->newparent);
	odir = mgr_ns_get(&s->st.ns, q->parent);
	ndir = mgr_ns_get(&s->st.ns, q->newparent);
	if (rc < 0 || !odir || !ndir || !odir->dir || !ndir->dir || !q->name ||
	    !q->newname ||
	    mgr_ns_lookup(&s->st.ns, q->parent, q->name, &src) < 0)
		return rc;
	if (mgr_ns_lookup(&s->st.ns, q->newparent, q->newname, &dst) < 0)
		dst = NULL;
	if (dst == src)
		return 0;   /* a rename onto a hard link of itself does nothing */
	return mgr_perm_rename(&cr, odir, src, ndir, dst, q->flags);
}

static void h_rename(struct mgr_server *s, struct wire_conn *c,
		     struct wire_msg *m)
{
	const Twinfs__Rename *q = (const Twinfs__Rename *)m->body;
	struct mgr_op op = { .type = MGR_OP_RENAME };
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	op.parent = q->parent;
	op.name = q->name;
	op.newparent = q->newparent;
	op.newname = q->newname;
	op.flags = q->flags;
	rc = may_rename(s, q);
	if (rc == 0 && (op.flags & MGR_RENAME_WHITEOUT)) {
		creds(s, q->ctx, &op);   /* the whiteout's owner */
		rc = mgr_srv_space(s, 0, NULL);  /* the whiteout: a new inode */
		if (rc == 0)
			mgr_srv_ino_reserve(s);
	}
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	mgr_srv_finish(s, c, &m->hdr, &op, rc, NULL);
}

static void h_open(struct mgr_server *s, struct wire_conn *c,
		   struct wire_msg *m)
{
	const Twinfs__Open *q = (const Twinfs__Open *)m->body;
	struct mgr_op op = { .type = MGR_OP_OPEN };
	Twinfs__OpenReply r = TWINFS__OPEN_REPLY__INIT;
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	const struct mgr_inode *in;
	struct mgr_cred cr;
	struct attr_buf ab;
	uint8_t cap[WIRE_CAP_LEN];
	int rc = 0;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op) ||
	    mgr_srv_psize_wait(s, c, m, q->ino))
		return;
	op.ino = q->ino;
	op.flags = q->flags;
	cred_of(s, q->ctx, &cr, groups);
	if ((in = mgr_ns_get(&s->st.ns, q->ino)))
		rc = mgr_perm_open(&cr, in, q->flags);
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	if (rc == 0) {
		fill_attr(s, &ab, op.out);
		r.attr = &ab.a;
		r.fh = op.fh;
		open_cap(s, &op, op.out, q->flags, cap, &r.cap,
			 &r.cap_lifetime_ms);
	}
	mgr_srv_finish(s, c, &m->hdr, &op, rc, &r.base);
}

static void h_release(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	const Twinfs__Release *q = (const Twinfs__Release *)m->body;
	struct mgr_op op = { .type = MGR_OP_RELEASE };
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	op.ino = q->ino;
	op.fh = q->fh;
	rc = mgr_op_apply(&s->st, &op);
	mgr_srv_finish(s, c, &m->hdr, &op, rc, NULL);
}

static void h_setxattr(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m, bool remove)
{
	const Twinfs__Xattr *q = (const Twinfs__Xattr *)m->body;
	struct mgr_op op = { .type = remove ? MGR_OP_REMOVEXATTR
					    : MGR_OP_SETXATTR };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	const struct mgr_inode *in;
	struct mgr_cred cr;
	int rc = 0;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	op.ino = q->ino;
	op.name = q->name;
	op.flags = q->flags;
	cred_of(s, q->ctx, &cr, groups);
	if ((in = mgr_ns_get(&s->st.ns, q->ino)) && q->name)
		rc = mgr_perm_xattr(&cr, in, q->name, remove,
				    write_handle(s, op.session, q->ino));
	if (rc < 0) {
		/* rc: EACCES or EPERM */
	} else if (q->value.len > MGR_XATTR_SIZE_MAX) {
		rc = -E2BIG;
	} else if (strcmp(q->name, "twinfs.layout") == 0) {
		rc = -EOPNOTSUPP;  /* the client's own, never stored */
	} else if (!remove && (rc = mgr_srv_space(s, 0, NULL)) < 0) {
		/* rc: ENOSPC */
	} else {
		op.value = q->value.data;
		op.value_len = (uint32_t)q->value.len;
		rc = mgr_op_apply(&s->st, &op);
	}
	mgr_srv_finish(s, c, &m->hdr, &op, rc, NULL);
}

/* The op of a size report; -EINVAL if it is malformed. */
static int report_op(const Twinfs__SizeReport *q, struct mgr_op *op)
{
	op->ino = q->ino;
	op->size = q->size;
	op->mtime.sec = q->mtime_sec;
	op->mtime.nsec = q->mtime_nsec;
	op->trunc_gen = q->trunc_gen;
	op->wrote = q->wrote;
	if (q->wrote && q->keep_times)
		op->valid |= MGR_REPORT_KEEP_TIMES;
	if (q->accessed) {
		op->valid |= MGR_REPORT_ACCESSED |
			     (q->strictatime ? MGR_REPORT_STRICTATIME : 0);
		op->atime.sec = q->atime_sec;
		op->atime.nsec = q->atime_nsec;
	}
	if (q->n_blocks > MGR_OP_MAX_COLS || q->mtime_nsec >= 1000000000u ||
	    q->atime_nsec >= 1000000000u)
		return -EINVAL;
	for (size_t i = 0; i < q->n_blocks; i++) {
		op->cols[i] = q->blocks[i]->column;
		op->blocks[i] = q->blocks[i]->blocks;
	}
	op->n_cols = (uint32_t)q->n_blocks;
	return 0;
}

static void h_size_report(struct mgr_server *s, struct wire_conn *c,
			  struct wire_msg *m)
{
	const Twinfs__SizeReport *q = (const Twinfs__SizeReport *)m->body;
	struct mgr_op op = { .type = MGR_OP_SIZE_REPORT };
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	rc = report_op(q, &op);
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	/* fsync's report: guarantee 2 (docs/ARCHITECTURE.md "Guarantees")
	 * wants the size synced at mgrd before the fsync reply, not only
	 * closed. */
	if (rc == 0 && q->sync) {
		int src = mgr_journal_sync(&s->jnl);
		if (src < 0)
			mgr_srv_fatal(s, "sync", src);
	}
	reply_entry(s, c, &m->hdr, &op, rc, op.out, 0);
}

/* A SETATTR's size reports (FORMAT.md "Size, truncate, data_version"):
 * checked together, then each applied and journaled as a SIZE_REPORT of
 * its own, just before the SETATTR itself.  A retransmission of the
 * SETATTR is answered from the reply cache.  After a failure, or a crash
 * between these records and the SETATTR's, the client reports the same
 * writes again: the size stays, data_version counts them once more, and
 * mtime and ctime take the report's mtime again unless it keeps the times
 * (after a failed SETATTR of mtime: the time of that failure). */
static int setattr_reports(struct mgr_server *s, const Twinfs__Setattr *q,
			   bool apply)
{
	if (q->n_reports > WIRE_SETATTR_REPORTS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < q->n_reports; i++) {
		struct mgr_op op = { .type = MGR_OP_SIZE_REPORT };
		int rc = q->reports[i]->ino == q->ino
			 ? report_op(q->reports[i], &op) : -EINVAL;

		if (rc == 0 && apply)
			rc = mgr_srv_internal(s, &op);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* O_APPEND across mounts (docs/ARCHITECTURE.md "Metadata"): reserve q->length
 * bytes at the end of the file.  The new size is journaled as a size report of
 * the current trunc_gen (replay re-applies it exactly), so the next
 * reservation, from any mount, starts after this one; a retransmission is
 * answered from the reply cache with the same offset. */
static void h_append_reserve(struct mgr_server *s, struct wire_conn *c,
			     struct wire_msg *m)
{
	const Twinfs__AppendReserve *q = (const Twinfs__AppendReserve *)m->body;
	Twinfs__AppendReply r = TWINFS__APPEND_REPLY__INIT;
	struct mgr_op op = { .type = MGR_OP_SIZE_REPORT };
	struct mgr_inode *in;
	uint64_t off = 0;
	int rc = 0;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op) ||
	    mgr_srv_psize_wait(s, c, m, q->ino))   /* appends go at the end */
		return;
	in = mgr_ns_get(&s->st.ns, q->ino);
	if (!in)
		rc = -ESTALE;
	else if (!S_ISREG(in->mode))
		rc = S_ISDIR(in->mode) ? -EISDIR : -EINVAL;
	if (rc == 0) {
		off = in->size;
		/* The caller's own writes not yet reported count too. */
		if (q->trunc_gen == in->trunc_gen && q->local_end > off)
			off = q->local_end;
		uint64_t lim = mgr_map_file_limit(&s->st.map, in->layout);

		/* The whole reservation or nothing: the offset is ours to
		 * choose, a short append is not. */
		if (off > lim || q->length > lim - off)
			rc = -EFBIG;
	}
	if (rc == 0) {
		op.ino = q->ino;
		op.size = off + q->length;
		op.trunc_gen = in->trunc_gen;
		op.mtime = op.now;
		r.offset = off;
		r.trunc_gen = in->trunc_gen;
		rc = mgr_op_apply(&s->st, &op);
	}
	mgr_srv_finish(s, c, &m->hdr, &op, rc, &r.base);
}

static void h_setstripe(struct mgr_server *s, struct wire_conn *c,
			struct wire_msg *m)
{
	const Twinfs__Setstripe *q = (const Twinfs__Setstripe *)m->body;
	struct mgr_op op = { .type = MGR_OP_SETSTRIPE };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	const struct mgr_inode *in;
	struct mgr_cred cr;
	int rc;

	/* A file not yet written as far as mgrd knows may still get a new
	 * layout: not while its vanished writer's subfiles are being read. */
	if (mgr_srv_dup_check(s, c, m, q->ctx, &op) ||
	    mgr_srv_psize_wait(s, c, m, q->ino))
		return;
	op.ino = q->ino;
	op.stripe_size = q->stripe_size;
	op.stripe_count = q->stripe_count;
	op.first = q->first;
	cred_of(s, q->ctx, &cr, groups);
	/* As any xattr outside the known namespaces (twinfs.layout). */
	in = mgr_ns_get(&s->st.ns, q->ino);
	rc = in ? mgr_perm_check(&cr, in, MGR_MAY_WRITE) : 0;
	if (rc == 0)
		rc = mgr_op_apply(&s->st, &op);
	reply_entry(s, c, &m->hdr, &op, rc, op.out, 0);
}

/* SETATTR: with a size it waits for the iods (see the top of the file). */
struct trunc_req {
	struct mgr_server *s;
	struct wire_conn *c;
	struct wire_hdr hdr;
	struct mgr_op op;
	struct mgr_inflight *inf;     /* NULL without exactly-once */
};

static void inflight_end(struct mgr_server *s, struct mgr_inflight *f)
{
	struct mgr_inflight **pp;

	for (pp = &s->inflight; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	free(f);
}

static void trunc_done(int status, const uint64_t *blocks, uint32_t n,
		       void *arg)
{
	struct trunc_req *r = arg;
	struct mgr_server *s = r->s;
	struct mgr_op *op = &r->op;
	const struct mgr_reply *cached = NULL;
	int rc = status;

	if (s->stopping) {
		/* No records after the final snapshot; the client retries
		 * against the next mgrd. */
		rc = -EIO;
		mgr_srv_reply(r->c, &r->hdr, rc, NULL);
	} else {
		if (rc == 0) {
			op->n_cols = TW_MIN(n, (uint32_t)MGR_OP_MAX_COLS);
			for (uint32_t k = 0; k < op->n_cols; k++) {
				op->cols[k] = k;
				op->blocks[k] = blocks[k];
			}
			mgr_srv_now(&op->now);
			rc = mgr_op_apply(&s->st, op);
		} else {
			tw_log_rl(TW_LOG_WARN, "mgrd: truncate of ino %llu to "
				  "%llu failed: %s",
				  (unsigned long long)op->ino,
				  (unsigned long long)op->size,
				  strerror(-rc));
			rc = -EIO;
		}
		reply_entry(s, r->c, &r->hdr, op, rc, op->out, 0);
		if (r->inf) {
			struct mgr_session *sess =
				mgr_session_get(&s->st.sessions, op->session);

			cached = sess ? mgr_session_reply(sess, op->seq) : NULL;
		}
	}
	if (r->inf) {
		for (struct mgr_waiter *w = r->inf->waiters, *next; w; w = next) {
			next = w->next;
			if (cached)
				mgr_srv_resend(w->wc, &w->hdr, cached);
			else
				mgr_srv_reply(w->wc, &w->hdr, rc < 0 ? rc : -EIO, NULL);
			wire_conn_unref(w->wc);
			free(w);
		}
		inflight_end(s, r->inf);
	}
	wire_conn_unref(r->c);
	free(r);
}

static void h_setattr(struct mgr_server *s, struct wire_conn *c,
		      struct wire_msg *m)
{
	const Twinfs__Setattr *q = (const Twinfs__Setattr *)m->body;
	struct mgr_op op = { .type = MGR_OP_SETATTR };
	struct mgr_op begin = { .type = MGR_OP_TRUNC_BEGIN };
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct trunc_req *r;
	struct mgr_inode *in;
	struct mgr_cred cr;
	int rc;

	if (mgr_srv_dup_check(s, c, m, q->ctx, &op))
		return;
	op.ino = q->ino;
	op.valid = q->valid;
	op.mode = q->mode;
	op.uid = q->uid;
	op.gid = q->gid;
	op.size = q->size;
	op.atime.sec = q->atime_sec;
	op.atime.nsec = q->atime_nsec;
	op.mtime.sec = q->mtime_sec;
	op.mtime.nsec = q->mtime_nsec;
	op.ctime.sec = q->ctime_sec;
	op.ctime.nsec = q->ctime_nsec;
	if (q->atime_nsec >= 1000000000u || q->mtime_nsec >= 1000000000u ||
	    q->ctime_nsec >= 1000000000u) {
		mgr_srv_finish(s, c, &m->hdr, &op, -EINVAL, NULL);
		return;
	}
	/* A truncate waits for a vanished writer's size too: growing the
	 * file from the size it last reported would show its bytes past that
	 * size where zeros belong. */
	if ((q->valid & MGR_SA_SIZE) && mgr_srv_psize_wait(s, c, m, q->ino))
		return;
	rc = setattr_reports(s, q, false);
	if (rc == 0)
		rc = mgr_ns_setattr_check(&s->st.ns, q->ino, q->valid);
	if (rc == 0 && (in = mgr_ns_get(&s->st.ns, q->ino))) {
		cred_of(s, q->ctx, &cr, groups);
		rc = mgr_perm_setattr(&cr, in, write_handle(s, op.session,
							    q->ino),
				      &op.valid, &op.mode, op.uid, op.gid);
	}
	if (rc == 0 && (q->valid & MGR_SA_SIZE)) {
		in = mgr_ns_get(&s->st.ns, q->ino);
		if (q->size > (uint64_t)INT64_MAX ||
		    (in && S_ISREG(in->mode) &&
		     q->size > mgr_map_file_limit(&s->st.map, in->layout)))
			rc = -EFBIG;
	}
	if (rc == 0)
		rc = setattr_reports(s, q, true);
	if (rc < 0 || !(q->valid & MGR_SA_SIZE)) {
		if (rc == 0)
			rc = mgr_op_apply(&s->st, &op);
		reply_entry(s, c, &m->hdr, &op, rc, op.out, 0);
		return;
	}
	in = mgr_ns_get(&s->st.ns, q->ino);
	r = calloc(1, sizeof(*r));
	if (!r) {
		mgr_srv_finish(s, c, &m->hdr, &op, -ENOMEM, NULL);
		return;
	}
	if (op.session && op.seq) {
		r->inf = calloc(1, sizeof(*r->inf));
		if (!r->inf) {
			free(r);
			mgr_srv_finish(s, c, &m->hdr, &op, -ENOMEM, NULL);
			return;
		}
		r->inf->session = op.session;
		r->inf->seq = op.seq;
		r->inf->next = s->inflight;
		s->inflight = r->inf;
	}
	/* The new generation is journaled before any iod sees it, so that
	 * after a crash mgrd never hands out a generation older than the
	 * one the subfiles carry. */
	begin.ino = q->ino;
	begin.trunc_gen = in->trunc_gen + 1;
	rc = mgr_srv_internal(s, &begin);
	op.trunc_gen = begin.trunc_gen;
	r->s = s;
	r->c = c;
	r->hdr = m->hdr;
	r->op = op;
	wire_conn_ref(c);
	if (rc == 0)
		rc = mgr_pool_truncate(s->pool, q->ino, in->layout, q->size,
				       begin.trunc_gen, trunc_done, r);
	if (rc < 0)
		trunc_done(rc, NULL, 0, r);
}

/* ------------------------------------------------------------- dispatch */

/* Requests that change something: refused -EROFS for access = ro. */
static bool changes(uint16_t t, const ProtobufCMessage *body)
{
	switch (t) {
	case TWINFS__MSG_TYPE__MSG_SETATTR:
	case TWINFS__MSG_TYPE__MSG_MKNOD:
	case TWINFS__MSG_TYPE__MSG_MKDIR:
	case TWINFS__MSG_TYPE__MSG_SYMLINK:
	case TWINFS__MSG_TYPE__MSG_UNLINK:
	case TWINFS__MSG_TYPE__MSG_RMDIR:
	case TWINFS__MSG_TYPE__MSG_LINK:
	case TWINFS__MSG_TYPE__MSG_RENAME:
	case TWINFS__MSG_TYPE__MSG_SETXATTR:
	case TWINFS__MSG_TYPE__MSG_REMOVEXATTR:
	case TWINFS__MSG_TYPE__MSG_SIZE_REPORT:
	case TWINFS__MSG_TYPE__MSG_SETSTRIPE:
	case TWINFS__MSG_TYPE__MSG_APPEND_RESERVE:
		return true;
	case TWINFS__MSG_TYPE__MSG_OPEN: {
		const Twinfs__Open *o = (const Twinfs__Open *)body;

		return body->descriptor == &twinfs__open__descriptor &&
		       ((o->flags & O_ACCMODE) != O_RDONLY ||
			(o->flags & O_TRUNC));
	}
	default:
		return false;
	}
}

/* Every inode a request names (its uint64 fields ino, parent and
 * newparent) must lie in the session's subtree (proto/FORMAT.md
 * "Exports"): 0 or -EACCES. */
static int subtree_check(const struct mgr_server *s, uint64_t root,
			 const ProtobufCMessage *body)
{
	static const char *const names[] = { "ino", "parent", "newparent" };

	if (root <= MGR_ROOT_INO)   /* 0: an admin's connection */
		return 0;
	for (size_t i = 0; i < TW_ARRAY_SIZE(names); i++) {
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(
				body->descriptor, names[i]);
		uint64_t ino;

		if (!f || f->type != PROTOBUF_C_TYPE_UINT64 ||
		    f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		memcpy(&ino, (const char *)body + f->offset, sizeof(ino));
		if (ino && !mgr_ident_in_subtree(s, root, ino))
			return -EACCES;
	}
	return 0;
}

void mgr_handle_client(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m)
{
	uint16_t t = m->hdr.type;
	const struct mgr_conn *mc = wire_conn_get_data(c);

	/* Identity rules (proto/FORMAT.md "Client identities"): before the
	 * handler, so a refusal changes nothing and is not recorded. */
	s->req_client = mc ? mc->client : NULL;
	if (mc && mc->client && mc->client->read_only && changes(t, m->body)) {
		mgr_srv_reply(c, &m->hdr, -EROFS, NULL);
		return;
	}
	if (mc && subtree_check(s, mc->root_ino, m->body) < 0) {
		tw_log_rl(TW_LOG_WARN, "mgrd: %s %s: an inode outside the "
			  "subtree the client mounted: EACCES",
			  wire_conn_peer(c), wire_type_name(t));
		mgr_srv_reply(c, &m->hdr, -EACCES, NULL);
		return;
	}

	switch (t) {
	case TWINFS__MSG_TYPE__MSG_LOOKUP: h_lookup(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_GETATTR: h_getattr(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_SETATTR: h_setattr(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_MKNOD:
	case TWINFS__MSG_TYPE__MSG_MKDIR:
	case TWINFS__MSG_TYPE__MSG_SYMLINK: h_mknod(s, c, m, t); break;
	case TWINFS__MSG_TYPE__MSG_UNLINK: h_unlink(s, c, m, false); break;
	case TWINFS__MSG_TYPE__MSG_RMDIR: h_unlink(s, c, m, true); break;
	case TWINFS__MSG_TYPE__MSG_READLINK: h_readlink(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_LINK: h_link(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_RENAME: h_rename(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_OPEN: h_open(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_CAP: mgr_cap_handle(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_RELEASE: h_release(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_READDIR: h_readdir(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_STATFS: h_statfs(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_SETXATTR: h_setxattr(s, c, m, false); break;
	case TWINFS__MSG_TYPE__MSG_GETXATTR: h_getxattr(s, c, m, false); break;
	case TWINFS__MSG_TYPE__MSG_LISTXATTR: h_getxattr(s, c, m, true); break;
	case TWINFS__MSG_TYPE__MSG_REMOVEXATTR: h_setxattr(s, c, m, true); break;
	case TWINFS__MSG_TYPE__MSG_SIZE_REPORT: h_size_report(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_APPEND_RESERVE: h_append_reserve(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_SETSTRIPE: h_setstripe(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_INO_PATH: h_ino_path(s, c, m); break;
	case TWINFS__MSG_TYPE__MSG_SYNC: h_sync(s, c, m, false); break;
	case TWINFS__MSG_TYPE__MSG_FSYNCDIR: h_sync(s, c, m, true); break;
	case TWINFS__MSG_TYPE__MSG_LOCK:
	case TWINFS__MSG_TYPE__MSG_GETLK:
	case TWINFS__MSG_TYPE__MSG_UNLOCK_ALL:
	case TWINFS__MSG_TYPE__MSG_LOCK_CANCEL: mgr_handle_lock(s, c, m); break;
	default:
		mgr_srv_reply(c, &m->hdr, -EOPNOTSUPP, NULL);
		break;
	}
}
