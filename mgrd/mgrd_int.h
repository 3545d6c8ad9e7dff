/* mgrd_int.h - internal interface of twinfs-mgrd (never installed).
 *
 * Modules, one job each:
 *   ns.c       the namespace: inodes, directories, links, xattrs, layouts,
 *              open counts, orphans.  Pure, in memory, no I/O, no clock:
 *              every decision that is not a function of the state (time,
 *              inode number, layout) is passed in or handed back, so a
 *              journal replay re-applies it without re-deciding.
 *   itab.c     the inode table: number -> inode, pointers only.
 *   lay.c      file layouts shared by reference among inodes.
 *   slab.c     headerless small objects for inodes and directory entries.
 *   acl.c      POSIX ACLs in xattr form (pure helpers for ns.c).
 *   perm.c     permission checks of a request's caller (pure helpers
 *              for handlers.c).
 *   record.c   the journal record of each mutating operation (struct
 *              mgr_op), its apply function (shared by the live path and
 *              replay), and the snapshot of the whole state.  The byte
 *              formats are in mgrd/FORMAT.md.
 *   snapfork.c the one child process that writes the state as of its
 *              fork: the periodic snapshot (written while the log goes
 *              on), a standby's join by snapshot, backup-meta.
 *   session.c  sessions, per-session reply cache (exactly-once) and open
 *              handles; expiry.
 *   map.c      the cluster map (iod states, UUIDs, epoch).
 *   iodpool.c  mgrd as a client of the iods (TRUNCATE, DELETE, STATFS,
 *              FSYNC).
 *   monitor.c  failure detection: pings every iod, probes reported ones,
 *              turns misses into twin-policy events (server_int.h).
 *   server.c   connections, HELLO, dispatch, the commit path with
 *              exactly-once, IOD_REGISTER and map pushes, session expiry,
 *              timers, start and stop (server_int.h: shared with
 *              handlers.c).
 *   handlers.c one handler per client/admin request type.
 *   handlers_lock.c  fcntl/OFD/flock locks: the cluster-wide table
 *              (common/lock.c), waiters, grace after a restart.
 *   dlease.c   name leases: a directory's maker answers absent names
 *              itself; other sessions' name-adding requests wait for the
 *              recall (server_int.h).
 *   resync.c   mgrd's side of a twin's resync: starts, watches and
 *              completes the copy, keeps the job record (server_int.h).
 *   rjob.c     the byte format of that job record (mgrd/FORMAT.md).
 *   cap.c      data-path capabilities: issued with OPEN, create and
 *              MSG_CAP when the cluster has a secret.
 *   repl.c     an mgrd pair's replication: the active ships every closed
 *              record to the standby and holds replies until it acked
 *              (server_int.h; docs/ARCHITECTURE.md "mgrd pair").
 *   elect.c    the pair's election (elect.h; docs/ARCHITECTURE.md
 *              "Election"): lease, renewal, candidacy, our own vote.
 *   main.c     command line, config, signals.
 *
 * Threading: everything runs on the one libuv loop thread.
 *
 * Lifetime rule for the live path of a mutating request (server.c):
 *   build a struct mgr_op from the request -> mgr_op_apply (decides and
 *   changes the state) -> pack the reply into the op -> mgr_op_commit
 *   (journal record closed, reply cached) -> send the reply.
 * Replay runs mgr_op_decode -> mgr_op_apply -> mgr_op_cache for each record.
 */
#ifndef TWINFS_MGRD_INT_H
#define TWINFS_MGRD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>

#include "common.h"
#include "raid.h"

/* ----------------------------------------------------------------- limits */

#define MGR_ROOT_INO        1u
#define MGR_NAME_MAX        255u
#define MGR_SYMLINK_MAX     4095u           /* PATH_MAX - 1 */
#define MGR_XATTR_NAME_MAX  255u
#define MGR_XATTR_SIZE_MAX  (64u << 10)
#define MGR_XATTR_TOTAL_MAX (1u << 20)      /* all values + names of one inode */
#define MGR_LINK_MAX        65000u          /* as ext4 */
#define MGR_UUID_MAX        64u
#define MGR_REPLY_CACHE_MAX 1024u           /* replies kept per session */
#define MGR_FIRST_COOKIE    3u              /* 1 and 2 are . and .. */

#define MGR_RENAME_NOREPLACE 1u
#define MGR_RENAME_EXCHANGE  2u
#define MGR_RENAME_WHITEOUT  4u   /* leave a 0/0 char device at the source */
#define MGR_XATTR_CREATE     1u
#define MGR_XATTR_REPLACE    2u
#define MGR_XATTR_KILL_SGID  4u   /* access ACL set from outside the group */

/* Setattr valid bits, as twinfs.proto SetattrValid (FUSE_SET_ATTR_*). */
#define MGR_SA_MODE      1u
#define MGR_SA_UID       2u
#define MGR_SA_GID       4u
#define MGR_SA_SIZE      8u
#define MGR_SA_ATIME     16u
#define MGR_SA_MTIME     32u
#define MGR_SA_ATIME_NOW 128u
#define MGR_SA_MTIME_NOW 256u
#define MGR_SA_CTIME     1024u

/* ------------------------------------------------------------------ slab */

/* Inodes and directory entries (slab.c): size classes of 8 bytes up to
 * MGR_SLAB_MAX, no per-object header, pages never returned while objects
 * live.  The size given to free is the one given to alloc.  Loop thread
 * only. */
#define MGR_SLAB_MAX 512u

struct mgr_slab_stats {
	size_t pages;             /* of 64 KiB */
	size_t objects;           /* live */
	size_t bytes;             /* live, rounded to their classes */
};

/* NULL when out of memory; 0 < size <= MGR_SLAB_MAX. */
void *mgr_slab_alloc(size_t size);
void mgr_slab_free(void *p, size_t size);   /* p may be NULL */
void mgr_slab_stats(struct mgr_slab_stats *st);
/* With no object live, give every page back and return 0; else keep them
 * and return the number of live objects (a leak, at exit). */
size_t mgr_slab_release(void);

/* ------------------------------------------------------------- namespace */

/* Packed to 12 bytes: three in every inode (docs/ARCHITECTURE.md
 * "Namespace": memory per inode). */
struct mgr_time {
	int64_t sec;
	uint32_t nsec;
} __attribute__((packed, aligned(4)));

struct mgr_xattr {
	struct mgr_xattr *next;   /* insertion order */
	char *name;
	uint8_t *value;
	uint32_t len;
};

/* Allocated from the slab with MGR_DIRENT_SIZE(namelen) bytes: a name of
 * up to 10 bytes takes 32 (docs/ARCHITECTURE.md "Namespace": memory per
 * inode).  Its place in mgr_dir.order is found through the name index. */
struct mgr_dirent {
	uint64_t ino;
	uint64_t cookie;
	uint32_t hash;
	uint8_t namelen;          /* <= MGR_NAME_MAX */
	char name[];              /* NUL-terminated */
};

#define MGR_DIRENT_SIZE(namelen) \
	(offsetof(struct mgr_dirent, name) + (size_t)(namelen) + 1)

/* A directory: an array sorted by cookie (holes where entries were
 * removed, compacted when half are holes) so that readdir resumes after
 * any cookie by binary search, and a name index over it: open addressing
 * with linear probing, each slot an order slot + 1 (0 = empty), load at
 * most 3/4, rebuilt whenever compaction moves entries. */
struct mgr_dir {
	uint32_t *index;          /* NULL until the first entry */
	uint32_t index_cap;       /* power of two, 0 with index NULL */
	uint32_t count;           /* live entries */
	struct mgr_dirent **order;
	uint32_t norder;          /* used slots, holes included */
	uint32_t order_cap;
	uint64_t next_cookie;     /* monotonic, from MGR_FIRST_COOKIE */
	uint64_t parent;          /* ".." */
	/* Layout policy for new files (setstripe on the directory). */
	bool has_policy;
	uint32_t pol_stripe_size;
	uint32_t pol_stripe_count;  /* 0 = every group */
	int32_t pol_first;          /* -1 = round robin */
};

/* Fields ordered so that nothing pads (136 bytes, from the slab:
 * docs/ARCHITECTURE.md "Namespace", memory per inode). */
struct mgr_inode {
	uint64_t ino;
	uint64_t size;
	uint64_t trunc_gen;
	uint64_t data_version;
	uint64_t parent;          /* directory of the newest name (INO_PATH) */
	/* Regular files: shared by reference (lay.c), never NULL;
	 * &mgr_layout_none (stripe_count 0) otherwise. */
	const struct r0_layout *layout;
	/* What only one file type has, by S_IFMT of mode. */
	union {
		/* Regular files: layout->stripe_count entries, or NULL
		 * while every one is 0 (an empty file never gets it). */
		uint64_t *col_blocks;
		char *target;     /* symlinks */
		uint32_t rdev;    /* character and block devices */
	};
	struct mgr_dir *dir;      /* directories, NULL for the rest */
	struct mgr_xattr *xattrs;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid, gid;
	uint32_t open_count : 31; /* handles in all sessions, at most
				   * MGR_OPEN_COUNT_MAX */
	uint32_t orphan : 1;      /* nlink 0 but open: destroyed at last close */
	struct mgr_time atime, mtime, ctime;
};

#define MGR_OPEN_COUNT_MAX 0x7fffffffu

/* st_rdev: 0 but for devices (the field shares its room). */
static inline uint32_t mgr_inode_rdev(const struct mgr_inode *in)
{
	return S_ISCHR(in->mode) || S_ISBLK(in->mode) ? in->rdev : 0;
}

/* A destroyed regular file whose subfiles still have to be deleted. */
struct mgr_pdel {
	uint64_t ino;
	struct r0_layout layout;
	/* volatile */
	uint32_t attempts;
	uint64_t next_try_ms;
	bool busy;
};

/* A regular file a vanished writer had open for writing (its session
 * expired without a final size report): its size is taken from the iods
 * before anyone opens it again (docs/ARCHITECTURE.md "Metadata": sessions
 * and exactly-once; server.c). */
struct mgr_psize {
	uint64_t ino;
	/* volatile */
	bool busy;                /* a probe of its subfiles is out */
};

/* The inode table (itab.c): inode pointers keyed by their own number. */
struct mgr_itab {
	uintptr_t *slots;         /* cap entries: inode pointer | tag, 0 = empty */
	size_t cap;               /* power of two, 0 when empty */
	size_t count;
};

void mgr_itab_init(struct mgr_itab *t);
void mgr_itab_free(struct mgr_itab *t);   /* the table only */
struct mgr_inode *mgr_itab_get(const struct mgr_itab *t, uint64_t ino);
/* 0, -EEXIST (the number is in the table) or -ENOMEM. */
int mgr_itab_put(struct mgr_itab *t, struct mgr_inode *in);
struct mgr_inode *mgr_itab_del(struct mgr_itab *t, uint64_t ino);
/* Room for n inodes without growing (snapshot load).  0 or -ENOMEM. */
int mgr_itab_reserve(struct mgr_itab *t, size_t n);
/* for (size_t it = 0; mgr_itab_next(t, &it, &in);): no changes meanwhile. */
bool mgr_itab_next(const struct mgr_itab *t, size_t *it,
		   struct mgr_inode **in);
/* Every inode, by ascending number (caller frees the array), NULL on
 * ENOMEM. */
struct mgr_inode **mgr_itab_sorted(const struct mgr_itab *t, size_t *n);

struct mgr_ns {
	struct mgr_itab inodes;   /* ino -> struct mgr_inode */
	uint64_t next_ino;        /* never reused */
	/* Numbers below ino_limit may have been handed out before a crash
	 * that lost unsynced records: the limit is journaled and synced
	 * before next_ino reaches it, and a restart continues from it. */
	uint64_t ino_limit;
	uint64_t rr_next;         /* round-robin first group of the next file */
	uint32_t n_groups;
	uint32_t def_stripe_size;
	uint32_t def_stripe_count;  /* 0 = every group */
	struct tw_hmap pdel;      /* ino -> struct mgr_pdel (pending deletes) */
	struct tw_hmap psize;     /* ino -> struct mgr_psize (sizes to probe) */
	uint32_t n_orphans;
	/* Called when an inode is destroyed and a pending delete was queued
	 * (iodpool kicks the deleter).  May be NULL. */
	void (*on_pdel)(void *arg, struct mgr_pdel *pd);
	void *on_pdel_arg;
};

/* --------------------------------------------------------- POSIX ACLs */

#define MGR_ACL_ACCESS  "system.posix_acl_access"
#define MGR_ACL_DEFAULT "system.posix_acl_default"

/* The ACL xattr format and its validity rule are at the top of acl.c.
 * Returns the number of entries, or -EINVAL. */
int mgr_acl_check(const void *value, uint32_t len);
/* The permission bits an access ACL implies replace those of *mode (other
 * bits kept).  Returns 1 when the ACL says more than the mode can (named
 * entries or a mask: it must be kept), 0 when the mode says it all, or
 * -EINVAL for an invalid ACL. */
int mgr_acl_equiv_mode(const void *value, uint32_t len, uint32_t *mode);
/* chmod: the owner, group class (the mask if any) and other entries take
 * the permission bits of mode.  Changes nothing in an invalid ACL. */
void mgr_acl_chmod(void *value, uint32_t len, uint32_t mode);
/* Turn a copy of the directory's default ACL into a new inode's access
 * ACL for the requested *mode, and narrow *mode to it.  Returns 1 when the
 * result must be stored, 0 when the mode says it all, -EINVAL. */
int mgr_acl_create_masq(void *value, uint32_t len, uint32_t *mode);
/* What the access ACL grants cr on a file of file_uid/file_gid
 * (posix_acl_permission; want: MGR_MAY_*): 0 or -EACCES; -EAGAIN for an
 * invalid ACL (then the mode decides). */
struct mgr_cred;
int mgr_acl_permission(const void *value, uint32_t len,
		       const struct mgr_cred *cr, uint32_t file_uid,
		       uint32_t file_gid, uint32_t want);

/* --------------------------------------------------------- permissions */

/* perm.c: the caller's permissions, as Linux checks them (proto/FORMAT.md
 * "Permissions").  Every check returns 0, -EACCES (permission bits, ACL)
 * or -EPERM (ownership rules); uid 0 passes as a holder of every
 * capability would. */
#define MGR_MAY_EXEC      1u
#define MGR_MAY_WRITE     2u
#define MGR_MAY_READ      4u
#define MGR_CRED_GROUPS_MAX 256u  /* supplementary groups mgrd looks at */

/* The caller: Ctx uid, gid and groups after root_squash. */
struct mgr_cred {
	uint32_t uid, gid;
	uint32_t n_groups;
	const uint32_t *groups;   /* borrowed */
};

bool mgr_cred_in_group(const struct mgr_cred *cr, uint32_t gid);
/* want: MGR_MAY_*; mode bits, then the access ACL (posix_acl_permission). */
int mgr_perm_check(const struct mgr_cred *cr, const struct mgr_inode *in,
		   uint32_t want);
/* Search permission on a directory a request names a name in. */
int mgr_perm_lookup(const struct mgr_cred *cr, const struct mgr_inode *dir);
/* A new name in dir (w+x); devices only for root (CAP_MKNOD). */
int mgr_perm_create(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    uint32_t mode, uint32_t rdev);
/* The mode a new inode in dir gets setgid dropped from (mode_strip_sgid). */
uint32_t mgr_perm_create_mode(const struct mgr_cred *cr,
			      const struct mgr_inode *dir, uint32_t mode);
/* The sticky bit of dir protects victim: -EPERM. */
int mgr_perm_sticky(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    const struct mgr_inode *victim);
/* Removing victim's name from dir (w+x, sticky). */
int mgr_perm_delete(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    const struct mgr_inode *victim);
/* src in odir to ndir, replacing or exchanging with dst (NULL: none). */
int mgr_perm_rename(const struct mgr_cred *cr, const struct mgr_inode *odir,
		    const struct mgr_inode *src, const struct mgr_inode *ndir,
		    const struct mgr_inode *dst, uint32_t flags);
/* OPEN with these open(2) flags. */
int mgr_perm_open(const struct mgr_cred *cr, const struct mgr_inode *in,
		  uint32_t flags);
/* SETATTR of *valid (MGR_SA_*) with *mode, uid, gid.  write_handle: the
 * caller's session has the inode open for writing.  May change the
 * request: setgid dropped from a chmod outside the group, setuid/setgid
 * dropped by a chown (*valid gains MGR_SA_MODE). */
int mgr_perm_setattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		     bool write_handle, uint32_t *valid, uint32_t *mode,
		     uint32_t uid, uint32_t gid);
/* SETXATTR or REMOVEXATTR of name. */
/* Reading the xattr name (GETXATTR): 0, -ENODATA (trusted.* for a
 * non-root caller, user.* of other than files and directories: Linux
 * reads them as absent) or -EACCES (user.* without read permission). */
int mgr_perm_getxattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		      const char *name);
/* Whether LISTXATTR shows trusted.* names to the caller (root only). */
bool mgr_perm_lists_trusted(const struct mgr_cred *cr);
int mgr_perm_xattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		   const char *name, bool remove, bool write_handle);

/* --------------------------------------------------------- capabilities */

/* cap.c (proto/FORMAT.md "Capabilities").  Only with a cluster secret:
 * without one every function here answers -EOPNOTSUPP. */
struct mgr_server;
struct wire_conn;
struct wire_msg;
struct tw_conf;
/* Derive the cap key from conf's secret (none: caps off).  0 or -errno. */
int mgr_cap_init(const struct tw_conf *conf);
bool mgr_cap_enabled(void);
/* Seal a cap for in (a regular file) and session into out (WIRE_CAP_LEN
 * bytes), write rights when write; *lifetime_ms: how long it is valid.
 * The caller checked the permission.  0; -EOPNOTSUPP without a secret;
 * -EKEYEXPIRED when the session is not live; -EINVAL not a regular file;
 * -EIO. */
int mgr_cap_issue(const struct mgr_server *s, uint64_t session,
		  const struct mgr_inode *in, bool write, uint8_t *out,
		  uint32_t *lifetime_ms);
/* MSG_CAP from a client: answers m on c (m stays the caller's). */
void mgr_cap_handle(struct mgr_server *s, struct wire_conn *c,
		    struct wire_msg *m);

/* What a create decides; zero/false fields are decided by mgr_ns_create
 * and filled in (live), given ones are used as they are (replay). */
struct mgr_create {
	uint64_t parent;
	const char *name;
	uint32_t mode;            /* includes the type; final on return */
	uint32_t umask;           /* applied unless the parent has a default
				   * ACL (live only: records hold the final
				   * mode, and replay passes 0) */
	uint32_t rdev;
	uint32_t uid, gid;
	const char *target;       /* symlinks */
	struct mgr_time now;
	/* decided */
	uint64_t ino;             /* 0 = allocate */
	bool has_layout;          /* false = pick (regular files) */
	struct r0_layout layout;
	uint64_t rr_next;         /* the round-robin counter after the pick */
};

struct mgr_setattr {
	uint32_t valid;           /* MGR_SA_* */
	uint32_t mode, uid, gid;
	uint64_t size;
	struct mgr_time atime, mtime, ctime;
	uint64_t trunc_gen;       /* SA_SIZE: the generation the iods got */
	uint32_t n_blocks;        /* SA_SIZE: per-column blocks after truncate */
	const uint64_t *blocks;
};

int mgr_ns_init(struct mgr_ns *ns, uint32_t n_groups, uint32_t def_stripe_size,
		uint32_t def_stripe_count, const struct mgr_time *now);
void mgr_ns_free(struct mgr_ns *ns);

/* 0, -EINVAL (empty, '/', ".", "..") or -ENAMETOOLONG. */
int mgr_name_check(const char *name);

struct mgr_inode *mgr_ns_get(const struct mgr_ns *ns, uint64_t ino);
/* -ESTALE: no such inode; -ENOTDIR; -ENOENT. */
int mgr_ns_lookup(const struct mgr_ns *ns, uint64_t parent, const char *name,
		  struct mgr_inode **out);
struct mgr_dirent *mgr_dir_find(const struct mgr_dir *d, const char *name);
/* The first entry with a cookie greater than `cookie`, or NULL. */
struct mgr_dirent *mgr_dir_next(const struct mgr_dir *d, uint64_t cookie);

int mgr_ns_create(struct mgr_ns *ns, struct mgr_create *c,
		  struct mgr_inode **out);
int mgr_ns_link(struct mgr_ns *ns, uint64_t ino, uint64_t newparent,
		const char *newname, const struct mgr_time *now,
		struct mgr_inode **out);
int mgr_ns_unlink(struct mgr_ns *ns, uint64_t parent, const char *name,
		  bool rmdir, const struct mgr_time *now);
int mgr_ns_rename(struct mgr_ns *ns, uint64_t parent, const char *name,
		  uint64_t newparent, const char *newname, uint32_t flags,
		  const struct mgr_time *now);
/* Validation only, for SA_SIZE before the iods are asked. */
int mgr_ns_setattr_check(const struct mgr_ns *ns, uint64_t ino,
			 uint32_t valid);
int mgr_ns_setattr(struct mgr_ns *ns, uint64_t ino,
		   const struct mgr_setattr *sa, const struct mgr_time *now,
		   struct mgr_inode **out);
/* Bump trunc_gen to at least gen (a truncate was started). */
int mgr_ns_trunc_begin(struct mgr_ns *ns, uint64_t ino, uint64_t gen);
/* wrote: mtime = *mtime, ctime = the later of ctime and *mtime, and
 * data_version += 1, or only the data_version with keep_times
 * (proto/FORMAT.md "Size, truncate"). */
int mgr_ns_size_report(struct mgr_ns *ns, uint64_t ino, uint64_t size,
		       const struct mgr_time *mtime, uint64_t trunc_gen,
		       bool wrote, bool keep_times, uint32_t n,
		       const uint32_t *cols, const uint64_t *blocks,
		       struct mgr_inode **out);
/* SIZE_REPORT records: op->valid says the file was read, or that the
 * writes keep the times (MGR_REPORT_*). */
#define MGR_REPORT_ACCESSED    1u   /* op->atime is the time of the read */
#define MGR_REPORT_STRICTATIME 2u   /* update atime even if recent */
#define MGR_REPORT_KEEP_TIMES  4u   /* wrote before an explicit mtime set:
				     * mtime and ctime stay */
/* A read at `at` (relatime, as Linux's relatime_need_update): atime = at
 * when atime <= mtime, atime <= ctime, atime is 24 h older than `at`, or
 * strict; else nothing.  ctime is untouched. */
int mgr_ns_accessed(struct mgr_ns *ns, uint64_t ino, const struct mgr_time *at,
		    bool strict);
/* Directory: set its policy; regular file: its layout while never written
 * (-EBUSY else).  `layout` is the decision for files (live: pass
 * has_layout false and it is filled in). */
int mgr_ns_setstripe(struct mgr_ns *ns, uint64_t ino, uint32_t stripe_size,
		     uint32_t stripe_count, int32_t first, bool *has_layout,
		     struct r0_layout *layout, uint64_t *rr_next,
		     const struct mgr_time *now, struct mgr_inode **out);
int mgr_ns_open(struct mgr_ns *ns, uint64_t ino);
/* Drop one open count; destroys an orphan at the last close. */
int mgr_ns_close(struct mgr_ns *ns, uint64_t ino);

int mgr_ns_setxattr(struct mgr_ns *ns, uint64_t ino, const char *name,
		    const void *value, uint32_t len, uint32_t flags,
		    const struct mgr_time *now);
/* Returns the value length; copies it when size >= length (size 0: only
 * the length); -ERANGE when 0 < size < length; -ENODATA. */
int mgr_ns_getxattr(const struct mgr_ns *ns, uint64_t ino, const char *name,
		    void *buf, uint32_t size);
int mgr_ns_listxattr(const struct mgr_ns *ns, uint64_t ino, char *buf,
		     uint32_t size, bool trusted);
int mgr_ns_removexattr(struct mgr_ns *ns, uint64_t ino, const char *name,
		       const struct mgr_time *now);

/* Layouts shared by reference (lay.c): an interned copy of l with one
 * more reference (&mgr_layout_none for stripe_count 0), NULL on ENOMEM;
 * put drops a reference. */
extern const struct r0_layout mgr_layout_none;
const struct r0_layout *mgr_layout_get(const struct r0_layout *l);
void mgr_layout_put(const struct r0_layout *l);
/* Column k's blocks of a regular file (allocates the array for a value
 * other than 0).  0 or -ENOMEM. */
int mgr_inode_set_blocks(struct mgr_inode *in, uint32_t k, uint64_t blocks);

/* Building blocks for loading a snapshot (record.c). */
struct mgr_dir *mgr_dir_new(uint64_t parent);
/* Room for n entries without growing (snapshot load).  0 or -ENOMEM. */
int mgr_dir_reserve(struct mgr_dir *d, uint32_t n);
/* Add an entry with a given cookie, larger than any in d: -EBADMSG else. */
int mgr_dir_restore(struct mgr_dir *d, const char *name, uint64_t ino,
		    uint64_t cookie);
struct mgr_inode *mgr_inode_new(uint64_t ino, uint32_t mode);
void mgr_inode_free(struct mgr_inode *in);
int mgr_inode_set_layout(struct mgr_inode *in, const struct r0_layout *l);
/* Append an xattr (snapshot load: no flags, no times). */
int mgr_inode_add_xattr(struct mgr_inode *in, const char *name,
			const void *value, uint32_t len);

/* Pending deletes. */
void mgr_ns_pdel_done(struct mgr_ns *ns, uint64_t ino);

/* Sizes to take from the iods (struct mgr_psize).  Adding one twice, or
 * one for a destroyed inode or not a regular file, does nothing. */
int mgr_ns_psize_add(struct mgr_ns *ns, uint64_t ino);
static inline bool mgr_ns_psize_pending(const struct mgr_ns *ns, uint64_t ino)
{
	return tw_hmap_get(&ns->psize, ino) != NULL;
}
/* The probe's answer: the file is at least `size` bytes, as its subfiles
 * were at trunc_gen `gen`.  A truncate since (another gen) makes it moot;
 * a larger size is taken, with mtime and ctime `now` and data_version
 * bumped (the vanished writes changed the data).  Ends the pending entry
 * either way; -ESTALE for a destroyed inode, -EINVAL for one that is not a
 * regular file (neither has an entry). */
int mgr_ns_size_found(struct mgr_ns *ns, uint64_t ino, uint64_t size,
		      uint64_t gen, const struct mgr_time *now);

/* Path of an inode from the root, "/" for the root.  -ENOENT (orphan),
 * -ENAMETOOLONG. */
int mgr_ns_ino_path(const struct mgr_ns *ns, uint64_t ino, char *buf,
		    size_t size);

/* Sum of per-column blocks (512-byte units). */
uint64_t mgr_inode_blocks(const struct mgr_inode *in);

/* ------------------------------------------------------------- sessions */

struct mgr_reply {
	struct mgr_reply *next;   /* insertion order */
	uint64_t seq;
	int32_t status;
	uint16_t type;            /* MsgType of the request */
	uint32_t len;
	uint8_t data[];           /* packed reply body */
};

struct mgr_handle {
	uint64_t fh;
	uint64_t ino;
	uint32_t flags;
};

#define MGR_SESSION_SECRET_LEN 16u

struct mgr_session {
	uint64_t id;
	/* What a HELLO must present to resume it (proto/FORMAT.md
	 * "Sessions"): random at creation, journaled with SESSION_NEW.  A
	 * session of an older data directory has none and is never resumed. */
	uint8_t secret[MGR_SESSION_SECRET_LEN];
	bool has_secret;
	/* The client identity that created it ("" = anonymous): journaled
	 * with SESSION_NEW (field `name`) and in the snapshot, so only that
	 * identity resumes it, across restarts too (proto/FORMAT.md
	 * "Client identities"). */
	char ident[TW_CLIENT_NAME_MAX];
	uint64_t next_fh;
	struct tw_hmap handles;   /* fh -> struct mgr_handle */
	struct tw_hmap replies;   /* seq -> struct mgr_reply */
	struct mgr_reply *rhead, *rtail;
	uint32_t nreplies;
	/* volatile */
	uint32_t n_conns;
	uint64_t idle_since_ms;   /* when n_conns dropped to 0 */
	uint64_t grace_ms;        /* idle time allowed before expiry */
	/* Who holds it, for max_sessions_per_client (server.c client_key);
	 * 0 until a client binds it after a restart. */
	uint64_t client_key;
	uint32_t n_locks;         /* locks held (handlers_lock.c) */
	/* Set by the HELLO that binds it, from its identity's config
	 * (server.c session_bind): access = ro; the subtree's root. */
	bool read_only;
	uint64_t root_ino;
};

/* Whether the session may change anything (its identity's access = rw,
 * or anonymous): what mgrd checks before a mutation, and what issuing a
 * capability to write must check. */
bool mgr_session_may_write(const struct mgr_session *s);

/* Fencing (proto/FORMAT.md "Fencing"): the newest MGR_FENCE_MAX expired
 * sessions, oldest first, whose writes the iods refuse.  Derived from the
 * journal (SESSION_EXPIRE) and kept in the snapshot, so a replay gives the
 * same list; fence_gen counts every expiry ever journaled. */
#define MGR_FENCE_MAX 1024u

struct mgr_sessions {
	struct tw_hmap by_id;     /* id -> struct mgr_session */
	uint64_t next_id;
	uint64_t fence_gen;
	uint32_t n_fenced;
	uint64_t fenced[MGR_FENCE_MAX];
};

void mgr_sessions_init(struct mgr_sessions *ss);
void mgr_sessions_free(struct mgr_sessions *ss);
struct mgr_session *mgr_session_get(const struct mgr_sessions *ss, uint64_t id);
/* Create session `id` (replay) or a new one (id 0). */
struct mgr_session *mgr_session_create(struct mgr_sessions *ss, uint64_t id);
void mgr_session_destroy(struct mgr_sessions *ss, struct mgr_session *s);
/* Add an expired session to the fence list (dropping the oldest when
 * full) and count it in fence_gen. */
void mgr_sessions_fence(struct mgr_sessions *ss, uint64_t id);
const struct mgr_reply *mgr_session_reply(const struct mgr_session *s,
					  uint64_t seq);
/* Remember a reply (copied); trims replies with seq <= acked and keeps at
 * most MGR_REPLY_CACHE_MAX. */
int mgr_session_cache(struct mgr_session *s, uint64_t seq, uint64_t acked,
		      uint16_t type, int32_t status, const void *data,
		      uint32_t len);
int mgr_session_add_handle(struct mgr_session *s, uint64_t fh, uint64_t ino,
			   uint32_t flags);
struct mgr_handle *mgr_session_handle(const struct mgr_session *s, uint64_t fh);
void mgr_session_del_handle(struct mgr_session *s, uint64_t fh);
/* Sorted ids/fhs for deterministic iteration (caller frees). */
uint64_t *mgr_hmap_sorted_keys(const struct tw_hmap *m, size_t *n);

/* ------------------------------------------------------------------ map */

enum mgr_iod_state {
	MGR_IOD_UP = 0,           /* values as twinfs.proto IodState */
	MGR_IOD_SUSPECT = 1,
	MGR_IOD_DOWN = 2,
	MGR_IOD_RESYNCING = 3,
};

struct mgr_map_iod {
	uint32_t id;              /* 1..n */
	uint32_t group;
	uint32_t twin_index;
	char host[TW_HOST_MAX];
	int port;
	/* journaled */
	enum mgr_iod_state state;
	uint8_t uuid[MGR_UUID_MAX];
	uint32_t uuid_len;        /* 0 = never registered */
	uint64_t incarnation;
	bool needs_resync;
	/* volatile: registered since this mgrd started (map.c, restarts) */
	bool seen;
	uint64_t max_subfile;     /* volatile: its registration's limit
	                           * (IodRegister.max_subfile_size; 0 none) */
};

struct mgr_map {
	uint64_t epoch;           /* from 1, journaled */
	uint32_t n_iods;
	uint32_t n_groups;
	uint32_t stripe_size, stripe_count;   /* cluster defaults */
	struct mgr_map_iod iods[TW_MAX_IODS]; /* iods[i].id == i + 1 */
};

struct mgr_op;
void mgr_map_init(struct mgr_map *m, const struct tw_conf *conf);
struct mgr_map_iod *mgr_map_iod(struct mgr_map *m, uint32_t id);
/* The twin of group g with twin index t, or NULL. */
struct mgr_map_iod *mgr_map_twin(struct mgr_map *m, uint32_t group, int t);
/* Twin that orders writes of (ino, column) now (r1_write_primary): the
 * primary while both twins are readable, else the readable one; NULL when
 * neither is. */
struct mgr_map_iod *mgr_map_primary(struct mgr_map *m,
				    const struct r0_layout *l, uint64_t ino,
				    uint32_t column);
/* The largest size a subfile may reach: the smallest limit an iod
 * registered since mgrd started (0: none yet), and the largest size a
 * file of layout l may reach under it (INT64_MAX while none is known: the
 * iods still hold every request to their own). */
uint64_t mgr_map_max_subfile(const struct mgr_map *m);
uint64_t mgr_map_file_limit(const struct mgr_map *m,
			    const struct r0_layout *l);
/* mi serves reads (r1_readable: up or suspect, without needs_resync). */
bool mgr_map_readable(const struct mgr_map_iod *mi);
/* Both twins of mi's group have registered at least once. */
bool mgr_map_formed(struct mgr_map *m, const struct mgr_map_iod *mi);

/* Apply a twin-policy event (r1_apply) about iod `id`: fills ops[] with
 * one MAP_IOD record per iod whose state or needs_resync changes (at most
 * two, those raising needs_resync first, each with epoch + 1) and returns
 * their number: 0 when nothing changes, -ENOENT for an unknown id, -EINVAL
 * for an event not allowed in the current state.  Nothing is applied: the
 * caller applies and journals the ops in order. */
int mgr_map_event(struct mgr_map *m, uint32_t id, enum r1_event ev,
		  uint32_t missed, uint32_t down_after, struct mgr_op *ops);

/* IOD_REGISTER: decide, as mgr_map_event (ops[], count; 0 when nothing
 * changes: the same incarnation again).  A new incarnation is
 * R1_EV_REGISTER (failure plus rejoin), except while the group forms and
 * at the first registration since mgrd started (see map.c).  Marks the iod
 * seen.  -ENOENT for an unknown id, -EINVAL for a bad UUID, -EEXIST when
 * the id is registered with another UUID.  ops[].uuid borrows `uuid`. */
int mgr_map_register(struct mgr_map *m, uint32_t id, const void *uuid,
		     uint32_t uuid_len, uint64_t incarnation,
		     struct mgr_op *ops);
/* The same, for a data directory created by this start (`fresh`): a UUID
 * other than the recorded one replaces it and the iod needs resync (a
 * wiped or replaced disk, full rebuild) instead of -EEXIST. */
int mgr_map_register_ex(struct mgr_map *m, uint32_t id, const void *uuid,
			uint32_t uuid_len, uint64_t incarnation, bool fresh,
			struct mgr_op *ops);

/* ---------------------------------------------------- resync job records */

/* The journaled part of the resync job of one target iod (rjob.c; byte
 * format in mgrd/FORMAT.md, section 3).  resync.c owns the volatile part
 * and journals a MGR_OP_RESYNC_JOB record whenever this changes, so
 * `rebuild --status` and the copy cursor survive an mgrd restart. */
enum mgr_rjob_state {
	MGR_RJ_NONE = 0,          /* not started */
	MGR_RJ_RUNNING = 1,
	MGR_RJ_DONE = 2,
	MGR_RJ_FAILED = 3,
	MGR_RJ_INTERRUPTED = 4,
	MGR_RJ_MAX_
};

struct mgr_rjob_rec {
	uint8_t state;            /* enum mgr_rjob_state */
	bool full;
	bool has_cursor;
	bool replay;              /* target may have missed writes: resend marks */
	uint32_t source;          /* iod id, 0 = none yet */
	uint64_t start_ms, end_ms;  /* Unix time in ms, 0 = not yet */
	uint64_t files_total, files_done;
	uint64_t bytes_total, bytes_done, bytes_copied;
	uint32_t runs, errors;
	int32_t last_error;
	uint64_t cursor_ino;      /* has_cursor: subfiles up to it are copied */
	uint32_t cursor_column;
	uint64_t cursor_offset;   /* ... and its bytes below this offset */
	uint64_t target_incarnation;  /* of the target's last run */
	uint32_t rate_mbps;       /* rebuild --rate-limit, 0 = none */
	uint64_t unrepairable;    /* blocks bad on the only readable copy,
	                           * sent marked bad (iod/resync.c) */
	uint8_t uuid[MGR_UUID_MAX];   /* the target's UUID the cursor is for */
	uint32_t uuid_len;
};

#define MGR_RJOB_BYTES_MAX (116u + MGR_UUID_MAX)

/* Encode into buf (MGR_RJOB_BYTES_MAX bytes); returns the length. */
size_t mgr_rjob_pack(const struct mgr_rjob_rec *r, uint8_t *buf);
/* 0 or -EBADMSG (wrong version, length or a field out of range). */
int mgr_rjob_unpack(const void *buf, size_t len, struct mgr_rjob_rec *r);

/* --------------------------------------------------------------- state */

struct mgr_state {
	struct mgr_ns ns;
	struct mgr_sessions sessions;
	struct mgr_map map;
	struct mgr_rjob_rec rjobs[TW_MAX_IODS];   /* [target id - 1] */
};

int mgr_state_init(struct mgr_state *st, const struct tw_conf *conf,
		   const struct mgr_time *now);
void mgr_state_free(struct mgr_state *st);

/* ------------------------------------------------------------ records */

enum mgr_op_type {
	MGR_OP_NONE = 0,
	MGR_OP_SETATTR = 1,
	MGR_OP_CREATE = 2,        /* MKNOD, MKDIR, SYMLINK */
	MGR_OP_LINK = 3,
	MGR_OP_UNLINK = 4,
	MGR_OP_RMDIR = 5,
	MGR_OP_RENAME = 6,
	MGR_OP_OPEN = 7,
	MGR_OP_RELEASE = 8,
	MGR_OP_SETXATTR = 9,
	MGR_OP_REMOVEXATTR = 10,
	MGR_OP_SIZE_REPORT = 11,
	MGR_OP_SETSTRIPE = 12,
	MGR_OP_SESSION_NEW = 13,
	MGR_OP_SESSION_EXPIRE = 14,
	MGR_OP_MAP_IOD = 15,      /* one iod's journaled map fields + epoch */
	MGR_OP_PDEL_DONE = 16,
	MGR_OP_TRUNC_BEGIN = 17,
	MGR_OP_INO_RESERVE = 18,  /* ino_limit = new_ino (synced before use) */
	MGR_OP_RESYNC_JOB = 19,   /* rjobs[ino - 1] = value (rjob.c) */
	MGR_OP_SIZE_FOUND = 20,   /* mgr_ns_size_found(ino, size, trunc_gen) */
	/* value = the whole revoked-key list (mgrd/FORMAT.md section 4):
	 * not state; ident.c writes it to DIR/revoked on a standby */
	MGR_OP_REVOKED = 21,
	MGR_OP_MAX_
};

#define MGR_OP_MAX_COLS R0_MAX_STRIPE_COUNT

/* One mutating operation: its inputs, its decided outputs and, for client
 * requests, the exactly-once triple.  Strings and buffers are borrowed
 * (from the request, or from the record buffer during replay). */
struct mgr_op {
	uint8_t type;
	/* exactly-once; session 0 = not cached */
	uint64_t session, seq, acked_seq;
	int32_t status;
	uint16_t reply_type;
	const void *reply;
	uint32_t reply_len;
	/* inputs */
	uint64_t ino, parent, newparent;
	const char *name, *newname, *target;
	const void *value;
	uint32_t value_len;
	uint32_t mode, rdev, uid, gid, flags, valid;
	uint32_t umask;           /* CREATE, live only: never encoded */
	bool lease;               /* MKDIR, live only: grant a name lease */
	uint64_t size, trunc_gen;
	struct mgr_time atime, mtime, ctime;
	bool wrote;
	bool open;                /* CREATE: create + open (reply has fh) */
	uint32_t stripe_size, stripe_count;
	int32_t first;
	uint32_t n_cols;
	uint32_t cols[MGR_OP_MAX_COLS];
	uint64_t blocks[MGR_OP_MAX_COLS];
	const void *uuid;
	uint32_t uuid_len;
	uint64_t incarnation;
	uint32_t iod_state;
	bool needs_resync;
	/* decided */
	struct mgr_time now;
	uint64_t new_ino;         /* create; setattr/open: unused */
	uint64_t fh;              /* open / create+open */
	bool has_layout;
	struct r0_layout layout;
	uint64_t rr_next;
	uint64_t epoch;
	/* results of apply, not encoded */
	struct mgr_inode *out;
	/* the handler's, not encoded: UNLINK: the inode it destroyed */
	uint64_t gone_ino;
};

/* Apply an op to the state: live (op decisions not set yet: they are
 * filled in) or replay (decisions given).  Returns 0 or -errno; on replay
 * of a record whose status is < 0 nothing is applied. */
int mgr_op_apply(struct mgr_state *st, struct mgr_op *op);
/* Put op's reply into its session's reply cache (no-op for session 0). */
int mgr_op_cache(struct mgr_state *st, const struct mgr_op *op);

/* Encode into a new buffer (*out, malloc'ed) / decode (op borrows buf). */
int mgr_op_encode(const struct mgr_op *op, uint8_t **out, size_t *len);
int mgr_op_decode(const void *buf, size_t len, struct mgr_op *op);

/* Snapshot of the whole journaled state (canonical: equal states give
 * equal bytes). */
int mgr_state_encode(const struct mgr_state *st, uint8_t **out, size_t *len);
/* Decode into an initialised, freshly made state (replaces its ns,
 * sessions and the journaled map fields). */
int mgr_state_decode(struct mgr_state *st, const void *buf, size_t len);

/* The journal of a state: open/replay, commit (append + cache), snapshot. */
struct jnl_rec;
/* snapfork.c: the one child that writes the state as it was at the fork
 * (docs/ARCHITECTURE.md "Record mode (mgrd)").  mgr_snap_fork_fn: the
 * child encodes the state (mgr_state_encode) and passes it to fn, its
 * exit status fn's success; `what` (the file fn writes) names it in the
 * timeout's warning; returns the pid, -EBUSY while another child runs,
 * or -errno.  mgr_snap_fork: fn writes it to the file path.
 * mgr_snap_wait: 1 running, 0 succeeded, -EIO failed (reaped),
 * -ETIMEDOUT ran longer than the timeout: killed, reaped and logged.
 * mgr_snap_kill: kills and reaps it.
 * mgr_snap_set_timeout: the limit in ms ([mgrd] snapshot_timeout; a
 * test's shorter one), 0 = none.  mgr_snap_timeouts: children killed for
 * it since start. */
typedef int (*mgr_snap_fn)(const uint8_t *buf, size_t len, void *arg);
pid_t mgr_snap_fork_fn(const struct mgr_state *st, mgr_snap_fn fn,
		       void *arg, const char *what);
pid_t mgr_snap_fork(const struct mgr_state *st, const char *path);
bool mgr_snap_busy(void);
int mgr_snap_wait(pid_t pid);
void mgr_snap_kill(pid_t pid);
void mgr_snap_set_timeout(uint32_t ms);
uint64_t mgr_snap_timeouts(void);

struct mgr_journal {
	struct jnl_rec *log;
	struct mgr_state *st;
	uint64_t snapshot_bytes;  /* snapshot when the log exceeds this */
	uint64_t snap_len;        /* the last snapshot's payload (0: none
	                           * written since start) */
	uint64_t records;         /* replayed + appended */
	uint64_t snapshots;       /* written since start (metrics) */
	bool dirty;               /* appended since the last sync began */
	bool bg_syncing;          /* a sync started off the loop thread
	                           * (mgr_journal_sync_start) is not done */
	/* The periodic snapshot is written by a child (snapfork.c) as of
	 * seq bg_seq while the log goes on (journal.h jnl_rec_snap_begin). */
	pid_t bg_child;           /* 0 = none running */
	uint64_t bg_seq, bg_fork_ms;
	char bg_path[PATH_MAX + 16];  /* DIR/snapshot.tmp, the child's file */
	uint64_t snapshot_bytes_cfg;  /* snapshot_bytes after a success */
	/* Called with the seq and bytes of every record closed by commit
	 * or append (an mgrd pair's active ships them: repl.c); NULL =
	 * none. */
	void (*on_record)(void *arg, uint64_t seq, const void *buf,
			  size_t len);
	void *on_record_arg;
};

int mgr_journal_open(struct mgr_journal *j, const char *dir,
		     struct mgr_state *st);
/* mgr_journal_open with jnl_rec_open_flags's flags (journal.h): the
 * operator's JNL_REC_ACCEPT_CORRUPT (twinfs-mgrd --accept-corrupt-log). */
int mgr_journal_open_flags(struct mgr_journal *j, const char *dir,
			   struct mgr_state *st, unsigned flags);
/* Encode, append (closed on return), cache the reply; snapshot if the log
 * grew too large.  An append failure is fatal to mgrd's guarantees: the
 * caller must stop serving. */
int mgr_journal_commit(struct mgr_journal *j, const struct mgr_op *op);
/* The same for a record already encoded (buf) and decoded into op, with
 * op applied: the standby's path for the active's records (repl.c). */
int mgr_journal_append(struct mgr_journal *j, const void *buf, size_t len,
		       const struct mgr_op *op);
/* Make snap (a snapshot payload, mgr_state_encode's format) the log's
 * snapshot and trim the log: a standby installing the active's state. */
int mgr_journal_install(struct mgr_journal *j, const void *snap,
			size_t len);
/* The same as of seq `seq` of another mgrd's log: the next record gets
 * seq + 1, as it does there (a standby installing the active's snapshot:
 * both logs then hold each record at the same seq, repl.c). */
int mgr_journal_install_at(struct mgr_journal *j, const void *snap,
			   size_t len, uint64_t seq);
int mgr_journal_sync(struct mgr_journal *j);
/* mgr_journal_sync with its fdatasync on another thread (the periodic
 * commit: the loop goes on serving meanwhile; journal.h
 * jnl_rec_sync_start): 1 when *b is to be run there and then given back
 * to mgr_journal_sync_done (or, once the journal is closed, to
 * jnl_rec_sync_forget), 0 when nothing is to be synced, -errno. */
struct jnl_rec_bgsync;
int mgr_journal_sync_start(struct mgr_journal *j, struct jnl_rec_bgsync *b);
int mgr_journal_sync_done(struct mgr_journal *j, struct jnl_rec_bgsync *b);
/* A snapshot written now, on this thread (shutdown, the space check):
 * a snapshot being written in the background is given up first. */
int mgr_journal_snapshot(struct mgr_journal *j);
/* Reaps the child writing the periodic snapshot, if it ended, and
 * installs its snapshot (or retries later); called at each append and
 * from a timer (server.c). */
void mgr_journal_poll(struct mgr_journal *j);
/* The seq of the last record appended, and the seq up to which every
 * record is durable (journal.h jnl_rec_last_seq, jnl_rec_synced_seq). */
uint64_t mgr_journal_last_seq(const struct mgr_journal *j);
uint64_t mgr_journal_synced_seq(const struct mgr_journal *j);
/* Bytes in the log since the last snapshot. */
uint64_t mgr_journal_log_bytes(const struct mgr_journal *j);
void mgr_journal_close(struct mgr_journal *j);

/* ------------------------------------------------------------- iodpool */

struct uv_loop_s;
struct mgr_iodpool;

struct mgr_statfs {
	uint64_t bsize, blocks, bfree, bavail;
};

typedef void (*mgr_pool_cb)(int status, void *arg);
/* per_col[k]: column k's answer: its allocated blocks after a truncate,
 * its subfile's size for mgr_pool_subsizes. */
typedef void (*mgr_pool_cols_cb)(int status, const uint64_t *per_col,
				 uint32_t n, void *arg);
typedef void (*mgr_pool_statfs_cb)(int status, const struct mgr_statfs *sf,
				   void *arg);
/* All columns of a pending delete are gone: journal it (server.c). */
typedef void (*mgr_pool_pdel_cb)(uint64_t ino, void *arg);

/* An iod did not answer one of mgrd's own calls (unreachable, timed
 * out): treat it as a report (server.c -> monitor probe). */
typedef void (*mgr_pool_failed_cb)(uint32_t iod_id, void *arg);

int mgr_pool_new(struct uv_loop_s *loop, const struct tw_conf *conf,
		 struct mgr_map *map, struct mgr_ns *ns, uint64_t incarnation,
		 mgr_pool_pdel_cb on_pdel_done, mgr_pool_failed_cb on_iod_failed,
		 void *arg, struct mgr_iodpool **out);
/* Cancel outstanding calls (their callbacks run with -ECANCELED) and free
 * the pool once its handles are closed. */
void mgr_pool_free(struct mgr_iodpool *p);
/* TRUNCATE every column of (ino, layout) to the size of a file of `size`
 * bytes at the column's primary; cb once all answered (-EIO when any
 * failed).  Returns 0 (cb will run) or -errno. */
int mgr_pool_truncate(struct mgr_iodpool *p, uint64_t ino,
		      const struct r0_layout *l, uint64_t size, uint64_t gen,
		      mgr_pool_cols_cb cb, void *arg);
/* The size of every column's subfile of (ino, layout) at the column's
 * primary (a READ of 0 bytes: its ReadReply.sub_size, journaled writes
 * included); cb once all answered (the first error when any failed).
 * Returns 0 (cb will run) or -errno (a group without a reachable
 * primary: cb never runs). */
int mgr_pool_subsizes(struct mgr_iodpool *p, uint64_t ino,
		      const struct r0_layout *l, mgr_pool_cols_cb cb,
		      void *arg);
/* The functions below return 0 (cb runs later, exactly once), 1 (cb has
 * already run) or -errno (cb never runs). */
/* FSYNC(ino 0) at every up iod. */
int mgr_pool_sync(struct mgr_iodpool *p, mgr_pool_cb cb, void *arg);
/* Sum over groups of the smaller twin; cached about a second. */
int mgr_pool_statfs(struct mgr_iodpool *p, mgr_pool_statfs_cb cb, void *arg);
/* Try pending deletes (after an iod registers or a file dies): now if
 * mgrd is idle or the backlog is long, else once client requests pause. */
void mgr_pool_kick(struct mgr_iodpool *p);
/* A client request arrived: background deletes give way for a while. */
void mgr_pool_demand(struct mgr_iodpool *p);
/* Fencing (proto/FORMAT.md "Fencing"): FENCE {gen, ids[n]} to every iod
 * that has neither answered a list of gen or newer nor has one out;
 * on_fenced(arg) runs after each answer that moved an iod's generation.
 * A call that fails is sent again by the next mgr_pool_fence. */
void mgr_pool_fence(struct mgr_iodpool *p, uint64_t gen, const uint64_t *ids,
		    uint32_t n, void (*on_fenced)(void *arg), void *arg);
/* Whether every iod the map has readable answered a list of gen or newer. */
bool mgr_pool_fenced(const struct mgr_iodpool *p, uint64_t gen);
/* The peer of iod `id` (monitor pings share it), or NULL. */
struct wire_peer;
struct wire_peer *mgr_pool_peer(struct mgr_iodpool *p, uint32_t id);
/* elect.c: our HELLO to the iods carries this term from now on. */
void mgr_pool_set_term(struct mgr_iodpool *p, uint64_t term);

/* ---------------------------------------------- election (elect.c, elect.h) */

/* twinfs-mgrd --accept-stale, before mgr_elect_start: stand and win even
 * when marked stale (docs/ARCHITECTURE.md "Election" E6). */
void mgr_elect_accept_stale(void);
/* MSG_LEASE from the other mgrd: this mgrd as a voter; answers it. */
struct wire_conn;
struct wire_msg;
void mgr_elect_vote(struct wire_conn *c, const struct wire_msg *m);

/* -------------------------------------------------------------- server */

struct mgr_server;
/* Open the state (replay), listen; runs on `loop` until mgr_server_stop.
 * jnl_flags: as mgr_journal_open_flags. */
int mgr_server_start(struct uv_loop_s *loop, const struct tw_conf *conf,
		     unsigned jnl_flags, struct mgr_server **out);
/* Clean shutdown: stop listening, snapshot, close the journal; `done`
 * runs when every handle is closed. */
void mgr_server_stop(struct mgr_server *s, void (*done)(void *arg),
		     void *arg);

/* metrics.c: serve GET /metrics on [mgrd] metrics (*out NULL when off),
 * counting s's wire requests.  Stop before mgr_server_stop.  0 or
 * -errno. */
struct mgr_metrics;
int mgr_metrics_start(struct uv_loop_s *loop, struct mgr_server *s,
		      struct mgr_metrics **out);
void mgr_metrics_stop(struct mgr_metrics *m);

#endif
