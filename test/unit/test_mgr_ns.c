/* test_mgr_ns.c - mgrd's namespace (mgrd/ns.c) and its persistence
 * (mgrd/record.c: records, replay, snapshots).
 *
 * Namespace tests call the mgr_ns_* functions directly and check Linux/ext4
 * errnos.  Persistence tests drive a random workload through the live path
 * (mgr_op_apply + mgr_journal_commit, as server.c does) into a journal in a
 * temporary directory, drop everything without a snapshot ("crash"), replay
 * into a fresh state and compare the two states byte for byte through the
 * canonical snapshot encoding (inode counter and reply caches included).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "journal.h"
#include "mgrd_int.h"

static struct mgr_ns ns;
static const struct mgr_time T0 = { 1000, 5 };

static void ns_setup(void)
{
	tw_log_init("test_mgr_ns", TW_LOG_WARN);
	cr_assert_eq(mgr_ns_init(&ns, 2, 0, 0, &T0), 0);
}

static void ns_teardown(void)
{
	mgr_ns_free(&ns);
}

static uint64_t mk(uint64_t parent, const char *name, uint32_t mode)
{
	struct mgr_create c = { .parent = parent, .name = name, .mode = mode,
				.uid = 10, .gid = 20, .now = T0 };
	struct mgr_inode *in;
	int rc;

	if (S_ISLNK(mode))
		c.target = "target";
	rc = mgr_ns_create(&ns, &c, &in);
	cr_assert_eq(rc, 0, "create %s: %d", name, rc);
	return in->ino;
}

static int mkrc(uint64_t parent, const char *name, uint32_t mode)
{
	struct mgr_create c = { .parent = parent, .name = name, .mode = mode,
				.now = T0, .target = "t" };
	struct mgr_inode *in;

	return mgr_ns_create(&ns, &c, &in);
}

static uint64_t lk(uint64_t parent, const char *name)
{
	struct mgr_inode *in;
	int rc = mgr_ns_lookup(&ns, parent, name, &in);

	return rc < 0 ? 0 : in->ino;
}

static uint32_t nlink(uint64_t ino)
{
	return mgr_ns_get(&ns, ino)->nlink;
}

static int ren(uint64_t p, const char *n, uint64_t np, const char *nn,
	       uint32_t flags)
{
	return mgr_ns_rename(&ns, p, n, np, nn, flags, &T0);
}

TestSuite(ns, .init = ns_setup, .fini = ns_teardown);

Test(ns, create_lookup_errnos)
{
	char longname[300];
	struct mgr_inode *in;
	uint64_t f = mk(1, "f", S_IFREG | 0644);
	uint64_t d = mk(1, "d", S_IFDIR | 0755);

	cr_assert_eq(f, 2);
	cr_assert_eq(d, 3);
	cr_assert_eq(lk(1, "f"), f);
	cr_assert_eq(mkrc(1, "f", S_IFREG | 0644), -EEXIST);
	cr_assert_eq(mkrc(1, "f", S_IFDIR | 0755), -EEXIST);
	cr_assert_eq(mgr_ns_lookup(&ns, 1, "nope", &in), -ENOENT);
	cr_assert_eq(mgr_ns_lookup(&ns, f, "x", &in), -ENOTDIR);
	cr_assert_eq(mgr_ns_lookup(&ns, 999, "x", &in), -ESTALE);
	cr_assert_eq(mkrc(f, "x", S_IFREG), -ENOTDIR);
	cr_assert_eq(mkrc(1, "", S_IFREG), -EINVAL);
	cr_assert_eq(mkrc(1, ".", S_IFREG), -EINVAL);
	cr_assert_eq(mkrc(1, "..", S_IFDIR), -EINVAL);
	cr_assert_eq(mkrc(1, "a/b", S_IFREG), -EINVAL);
	memset(longname, 'x', 255);
	longname[255] = '\0';
	cr_assert_eq(mkrc(1, longname, S_IFREG), 0);
	longname[255] = 'x';
	longname[256] = '\0';
	cr_assert_eq(mkrc(1, longname, S_IFREG), -ENAMETOOLONG);
	/* nlink: root 2 + one subdirectory; a failed create uses no ino. */
	cr_assert_eq(nlink(1), 3);
	cr_assert_eq(nlink(d), 2);
	cr_assert_eq(nlink(f), 1);
	cr_assert_eq(ns.next_ino, 5);
	/* uid/gid from the caller; symlink target and size. */
	in = mgr_ns_get(&ns, mk(d, "l", S_IFLNK | 0777));
	cr_assert_str_eq(in->target, "target");
	cr_assert_eq(in->size, 6);
	cr_assert_eq(in->uid, 10);
	cr_assert_eq(mkrc(1, "empty", S_IFLNK | 0777) , 0);
	{
		struct mgr_create c = { .parent = 1, .name = "e2",
					.mode = S_IFLNK, .now = T0,
					.target = "" };
		cr_assert_eq(mgr_ns_create(&ns, &c, &in), -ENOENT);
	}
}

Test(ns, layouts_and_setgid)
{
	struct mgr_inode *a, *b, *dir, *in;
	uint64_t d;
	bool hl = false;
	struct r0_layout l;
	uint64_t rr = 0;

	a = mgr_ns_get(&ns, mk(1, "a", S_IFREG | 0644));
	b = mgr_ns_get(&ns, mk(1, "b", S_IFREG | 0644));
	cr_assert_eq(a->layout->stripe_count, 2);
	cr_assert_eq(a->layout->stripe_size, R0_DEF_STRIPE_SIZE);
	/* Round robin over the first group. */
	cr_assert_neq(a->layout->groups[0], b->layout->groups[0]);
	d = mk(1, "d", S_IFDIR | 0755);
	cr_assert_eq(mgr_ns_setstripe(&ns, d, 1 << 20, 1, 1, &hl, &l, &rr,
				      &T0, &dir), 0);
	for (int i = 0; i < 4; i++) {
		char n[8];

		snprintf(n, sizeof(n), "f%d", i);
		in = mgr_ns_get(&ns, mk(d, n, S_IFREG | 0644));
		cr_assert_eq(in->layout->stripe_size, 1 << 20);
		cr_assert_eq(in->layout->stripe_count, 1);
		cr_assert_eq(in->layout->groups[0], 1);
	}
	/* Subdirectories inherit the policy. */
	dir = mgr_ns_get(&ns, mk(d, "sub", S_IFDIR | 0755));
	cr_assert(dir->dir->has_policy);
	/* Setstripe on a file: only while never written. */
	hl = false;
	cr_assert_eq(mgr_ns_setstripe(&ns, a->ino, 65536, 1, 0, &hl, &l, &rr,
				      &T0, &in), 0);
	cr_assert_eq(in->layout->stripe_size, 65536);
	cr_assert_eq(in->layout->groups[0], 0);
	in->data_version = 1;
	hl = false;
	cr_assert_eq(mgr_ns_setstripe(&ns, a->ino, 65536, 1, 0, &hl, &l, &rr,
				      &T0, &in), -EBUSY);
	hl = false;
	cr_assert_eq(mgr_ns_setstripe(&ns, d, 1000, 1, 0, &hl, &l, &rr,
				      &T0, &in), -EINVAL);
	/* setgid directory: group and bit inherited. */
	dir = mgr_ns_get(&ns, mk(1, "g", S_IFDIR | 02775));
	dir->gid = 77;
	in = mgr_ns_get(&ns, mk(dir->ino, "x", S_IFREG | 0644));
	cr_assert_eq(in->gid, 77);
	in = mgr_ns_get(&ns, mk(dir->ino, "y", S_IFDIR | 0755));
	cr_assert_eq(in->gid, 77);
	cr_assert(in->mode & S_ISGID);
}

Test(ns, unlink_rmdir_link)
{
	struct mgr_inode *in;
	uint64_t d = mk(1, "d", S_IFDIR | 0755);
	uint64_t f = mk(d, "f", S_IFREG | 0644);

	cr_assert_eq(mgr_ns_unlink(&ns, 1, "d", false, &T0), -EISDIR);
	cr_assert_eq(mgr_ns_unlink(&ns, 1, "d", true, &T0), -ENOTEMPTY);
	cr_assert_eq(mgr_ns_unlink(&ns, d, "f", true, &T0), -ENOTDIR);
	cr_assert_eq(mgr_ns_unlink(&ns, d, "g", false, &T0), -ENOENT);
	cr_assert_eq(mgr_ns_link(&ns, d, 1, "dl", &T0, &in), -EPERM);
	cr_assert_eq(mgr_ns_link(&ns, f, 1, "d", &T0, &in), -EEXIST);
	cr_assert_eq(mgr_ns_link(&ns, f, 1, "fl", &T0, &in), 0);
	cr_assert_eq(nlink(f), 2);
	cr_assert_eq(mgr_ns_unlink(&ns, d, "f", false, &T0), 0);
	cr_assert_eq(nlink(f), 1);
	cr_assert_eq(lk(1, "fl"), f);
	cr_assert_eq(mgr_ns_unlink(&ns, d, "f", false, &T0), -ENOENT);
	cr_assert_eq(mgr_ns_unlink(&ns, 1, "d", true, &T0), 0);
	cr_assert_eq(nlink(1), 2);
	cr_assert_null(mgr_ns_get(&ns, d));
	cr_assert_eq(mgr_ns_unlink(&ns, 1, "fl", false, &T0), 0);
	cr_assert_null(mgr_ns_get(&ns, f));
	/* The destroyed file's subfiles wait for deletion. */
	cr_assert_not_null(tw_hmap_get(&ns.pdel, f));
	mgr_ns_pdel_done(&ns, f);
	cr_assert_null(tw_hmap_get(&ns.pdel, f));
	/* Inode numbers are never reused. */
	cr_assert_gt(mk(1, "new", S_IFREG), f);
}

Test(ns, orphans)
{
	uint64_t f = mk(1, "f", S_IFREG | 0644);

	cr_assert_eq(mgr_ns_open(&ns, f), 0);
	cr_assert_eq(mgr_ns_open(&ns, f), 0);
	cr_assert_eq(mgr_ns_unlink(&ns, 1, "f", false, &T0), 0);
	cr_assert_not_null(mgr_ns_get(&ns, f));
	cr_assert(mgr_ns_get(&ns, f)->orphan);
	cr_assert_eq(ns.n_orphans, 1);
	cr_assert_null(tw_hmap_get(&ns.pdel, f));
	cr_assert_eq(mgr_ns_close(&ns, f), 0);
	cr_assert_not_null(mgr_ns_get(&ns, f));
	cr_assert_eq(mgr_ns_close(&ns, f), 0);
	cr_assert_null(mgr_ns_get(&ns, f));
	cr_assert_eq(ns.n_orphans, 0);
	cr_assert_not_null(tw_hmap_get(&ns.pdel, f));
}

Test(ns, rename_rules)
{
	uint64_t a = mk(1, "a", S_IFDIR | 0755);
	uint64_t b = mk(a, "b", S_IFDIR | 0755);
	uint64_t c = mk(1, "c", S_IFDIR | 0755);
	uint64_t f = mk(1, "f", S_IFREG | 0644);
	uint64_t g = mk(1, "g", S_IFREG | 0644);
	uint64_t e = mk(1, "e", S_IFDIR | 0755);
	struct mgr_inode *in;

	cr_assert_eq(ren(1, "a", 1, "x", 3), -EINVAL);
	cr_assert_eq(ren(1, "a", 1, "x", 8), -EINVAL);
	cr_assert_eq(ren(1, "a", 1, "x", 6), -EINVAL);  /* EXCHANGE|WHITEOUT */
	cr_assert_eq(ren(1, "zz", 1, "x", 0), -ENOENT);
	/* A directory into its own subtree. */
	cr_assert_eq(ren(1, "a", a, "x", 0), -EINVAL);
	cr_assert_eq(ren(1, "a", b, "x", 0), -EINVAL);
	/* Type rules. */
	cr_assert_eq(ren(1, "f", 1, "c", 0), -EISDIR);
	cr_assert_eq(ren(1, "c", 1, "f", 0), -ENOTDIR);
	cr_assert_eq(ren(1, "c", 1, "a", 0), -ENOTEMPTY);
	/* rename(a/b, a): the target is an ancestor, not empty. */
	cr_assert_eq(ren(a, "b", 1, "a", 0), -ENOTEMPTY);
	cr_assert_eq(ren(1, "f", 1, "g", MGR_RENAME_NOREPLACE), -EEXIST);
	cr_assert_eq(ren(1, "f", 1, "nothere", MGR_RENAME_EXCHANGE), -ENOENT);
	/* Same inode: no-op. */
	cr_assert_eq(mgr_ns_link(&ns, f, 1, "f2", &T0, &in), 0);
	cr_assert_eq(ren(1, "f", 1, "f2", 0), 0);
	cr_assert_eq(lk(1, "f"), f);
	cr_assert_eq(lk(1, "f2"), f);
	cr_assert_eq(nlink(f), 2);
	/* Over an existing file: the target loses its name. */
	cr_assert_eq(ren(1, "f2", 1, "g", 0), 0);
	cr_assert_eq(lk(1, "g"), f);
	cr_assert_eq(lk(1, "f2"), 0);
	cr_assert_null(mgr_ns_get(&ns, g));
	cr_assert_eq(nlink(f), 2);
	/* A directory over an empty directory in another parent. */
	cr_assert_eq(nlink(1), 2 + 3);
	cr_assert_eq(ren(1, "c", a, "b", 0), 0);
	cr_assert_null(mgr_ns_get(&ns, b));
	cr_assert_eq(lk(a, "b"), c);
	cr_assert_eq(mgr_ns_get(&ns, c)->dir->parent, a);
	cr_assert_eq(nlink(1), 2 + 2);
	cr_assert_eq(nlink(a), 3);
	/* Move a directory across parents: ".." and links. */
	cr_assert_eq(ren(1, "e", c, "e", 0), 0);
	cr_assert_eq(mgr_ns_get(&ns, e)->dir->parent, c);
	cr_assert_eq(nlink(1), 2 + 1);
	cr_assert_eq(nlink(c), 3);
	/* Exchange a file and a directory in different parents. */
	cr_assert_eq(ren(1, "f", c, "e", MGR_RENAME_EXCHANGE), 0);
	cr_assert_eq(lk(1, "f"), e);
	cr_assert_eq(lk(c, "e"), f);
	cr_assert_eq(mgr_ns_get(&ns, e)->dir->parent, 1);
	cr_assert_eq(nlink(1), 2 + 2);
	cr_assert_eq(nlink(c), 2);
	/* Exchange that would put a directory below itself. */
	cr_assert_eq(ren(1, "a", c, "e", MGR_RENAME_EXCHANGE), -EINVAL);
	cr_assert_eq(ren(a, "b", 1, "a", MGR_RENAME_EXCHANGE), -EINVAL);
	/* Simple rename keeps the inode. */
	cr_assert_eq(ren(1, "g", 1, "h", MGR_RENAME_NOREPLACE), 0);
	cr_assert_eq(lk(1, "h"), f);
	cr_assert_eq(lk(1, "g"), 0);
	/* Replacing an open file makes it an orphan. */
	{
		uint64_t o = mk(1, "o", S_IFREG | 0644);

		cr_assert_eq(mgr_ns_open(&ns, o), 0);
		cr_assert_eq(ren(1, "h", 1, "o", 0), 0);
		cr_assert(mgr_ns_get(&ns, o)->orphan);
		cr_assert_eq(mgr_ns_close(&ns, o), 0);
		cr_assert_null(mgr_ns_get(&ns, o));
	}
}

Test(ns, xattrs)
{
	uint64_t f = mk(1, "f", S_IFREG | 0644);
	char buf[128];
	static char big[MGR_XATTR_SIZE_MAX + 1];
	char name[300];

	cr_assert_eq(mgr_ns_getxattr(&ns, f, "user.a", buf, sizeof(buf)),
		     -ENODATA);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.a", "v1", 2,
				     MGR_XATTR_REPLACE, &T0), -ENODATA);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.a", "v1", 2,
				     MGR_XATTR_CREATE, &T0), 0);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.a", "v2", 2,
				     MGR_XATTR_CREATE, &T0), -EEXIST);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.a", "val3", 4,
				     MGR_XATTR_REPLACE, &T0), 0);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.b", "", 0, 0, &T0), 0);
	cr_assert_eq(mgr_ns_getxattr(&ns, f, "user.a", NULL, 0), 4);
	cr_assert_eq(mgr_ns_getxattr(&ns, f, "user.a", buf, 3), -ERANGE);
	cr_assert_eq(mgr_ns_getxattr(&ns, f, "user.a", buf, 4), 4);
	cr_assert_eq(memcmp(buf, "val3", 4), 0);
	cr_assert_eq(mgr_ns_getxattr(&ns, f, "user.b", buf, 4), 0);
	cr_assert_eq(mgr_ns_listxattr(&ns, f, NULL, 0, true), 14);
	cr_assert_eq(mgr_ns_listxattr(&ns, f, buf, 13, true), -ERANGE);
	cr_assert_eq(mgr_ns_listxattr(&ns, f, buf, sizeof(buf), true), 14);
	cr_assert_eq(memcmp(buf, "user.a\0user.b\0", 14), 0);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.big", big, sizeof(big), 0,
				     &T0), -E2BIG);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.big", big,
				     MGR_XATTR_SIZE_MAX, 0, &T0), 0);
	memset(name, 'n', 256);
	name[256] = '\0';
	cr_assert_eq(mgr_ns_setxattr(&ns, f, name, "x", 1, 0, &T0), -ERANGE);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "", "x", 1, 0, &T0), -ERANGE);
	cr_assert_eq(mgr_ns_setxattr(&ns, f, "user.c", "x", 1, 4, &T0),
		     -EINVAL);
	cr_assert_eq(mgr_ns_removexattr(&ns, f, "user.a", &T0), 0);
	cr_assert_eq(mgr_ns_removexattr(&ns, f, "user.a", &T0), -ENODATA);
	cr_assert_eq(mgr_ns_listxattr(&ns, f, buf, sizeof(buf), true), 16);
	cr_assert_eq(mgr_ns_getxattr(&ns, 999, "user.a", buf, 4), -ESTALE);
}

Test(ns, setattr_size_report)
{
	uint64_t f = mk(1, "f", S_IFREG | 0644);
	uint64_t d = mk(1, "d", S_IFDIR | 0755);
	struct mgr_inode *in;
	struct mgr_time t1 = { 2000, 0 }, t2 = { 3000, 7 };
	uint32_t cols[2] = { 0, 1 };
	uint64_t blocks[2] = { 8, 16 };
	struct mgr_setattr sa = { .valid = MGR_SA_SIZE, .size = 100,
				  .trunc_gen = 1 };

	cr_assert_eq(mgr_ns_setattr(&ns, d, &sa, &t1, &in), -EISDIR);
	cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &t1, &in), 0);
	cr_assert_eq(in->size, 100);
	cr_assert_eq(in->trunc_gen, 1);
	cr_assert_eq(in->mtime.sec, 2000);
	cr_assert_eq(in->data_version, 1);
	/* A stale report does not resurrect the old size. */
	cr_assert_eq(mgr_ns_size_report(&ns, f, 5000, &t2, 0, false, false, 2,
					cols, blocks, &in), 0);
	cr_assert_eq(in->size, 100);
	cr_assert_eq(mgr_inode_blocks(in), 0);
	cr_assert_eq(mgr_ns_size_report(&ns, f, 5000, &t2, 1, true, false, 2,
					cols, blocks, &in), 0);
	cr_assert_eq(in->size, 5000);
	cr_assert_eq(in->mtime.sec, 3000);
	cr_assert_eq(in->data_version, 2);
	cr_assert_eq(mgr_inode_blocks(in), 24);
	cr_assert_eq(mgr_ns_size_report(&ns, f, 10, &t2, 1, false, false, 0,
					NULL, NULL, &in), 0);
	cr_assert_eq(in->size, 5000);
	/* Writes from before an explicit mtime set: their size and a new
	 * data_version count, the times stay. */
	{
		struct mgr_time t3 = { 4000, 0 };

		cr_assert_eq(mgr_ns_size_report(&ns, f, 6000, &t3, 1, true,
						true, 0, NULL, NULL, &in), 0);
		cr_assert_eq(in->size, 6000);
		cr_assert_eq(in->mtime.sec, 3000);
		cr_assert_eq(in->ctime.sec, 3000);
		cr_assert_eq(in->data_version, 3);
	}
	/* Writes reported after a later status change: mtime is theirs,
	 * ctime does not go back. */
	{
		struct mgr_time t4 = { 3500, 0 }, t5 = { 2500, 0 };

		sa = (struct mgr_setattr){ .valid = MGR_SA_MODE, .mode = 0640 };
		cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &t4, &in), 0);
		cr_assert_eq(in->ctime.sec, 3500);
		cr_assert_eq(mgr_ns_size_report(&ns, f, 6000, &t5, 1, true,
						false, 0, NULL, NULL, &in), 0);
		cr_assert_eq(in->mtime.sec, 2500);
		cr_assert_eq(in->ctime.sec, 3500);
	}
	sa = (struct mgr_setattr){ .valid = MGR_SA_MODE | MGR_SA_UID |
				   MGR_SA_MTIME, .mode = 0600 | S_IFDIR,
				   .uid = 5, .mtime = t1 };
	cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &t2, &in), 0);
	cr_assert_eq(in->mode, S_IFREG | 0600);
	cr_assert_eq(in->uid, 5);
	cr_assert_eq(in->mtime.sec, 2000);
	/* mgrd's clock (t2) is behind the ctime (t4): just after it. */
	cr_assert_eq(in->ctime.sec, 3500);
	cr_assert_eq(in->ctime.nsec, 1);
	/* A ctime given by the kernel (writeback cache) is kept, unless it
	 * is older than the current one: then the change is stamped now. */
	{
		struct mgr_time t6 = { 3600, 5 }, t7 = { 3550, 0 },
				now = { 3700, 0 }, behind = { 3000, 0 };

		sa = (struct mgr_setattr){ .valid = MGR_SA_SIZE | MGR_SA_CTIME,
					   .size = 10, .trunc_gen = 2,
					   .ctime = t6 };
		cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &now, &in), 0);
		cr_assert_eq(in->ctime.sec, 3600);
		cr_assert_eq(in->ctime.nsec, 5);
		sa.ctime = t7;
		sa.size = 20;
		cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &now, &in), 0);
		cr_assert_eq(in->size, 20);
		cr_assert_eq(in->ctime.sec, 3700);
		cr_assert_eq(in->ctime.nsec, 0);
		sa.ctime = t7;
		cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &behind, &in), 0);
		cr_assert_eq(in->ctime.sec, 3700);
		cr_assert_eq(in->ctime.nsec, 1);
	}
}

/* Cookies: stable, monotonic, never reused, readdir resumes after any
 * cookie while entries come and go; 10,000 entries. */
/* A vanished writer's size, as the iods' subfiles show it (server.c "Lost
 * writers"): taken only when larger and of the same trunc_gen; the
 * pending entry ends either way, and with the inode. */
Test(ns, size_found_from_iods)
{
	uint64_t f = mk(1, "f", S_IFREG | 0644);
	uint64_t d = mk(1, "d", S_IFDIR | 0755);
	struct mgr_time t1 = { 2000, 0 }, t2 = { 3000, 7 };
	struct mgr_setattr sa = { .valid = MGR_SA_SIZE, .size = 100,
				  .trunc_gen = 1 };
	struct mgr_inode *in;

	cr_assert_eq(mgr_ns_setattr(&ns, f, &sa, &t1, &in), 0);
	cr_assert_eq(mgr_ns_psize_add(&ns, d), 0);
	cr_assert(!mgr_ns_psize_pending(&ns, d));
	cr_assert_eq(mgr_ns_psize_add(&ns, 999), 0);
	cr_assert(!mgr_ns_psize_pending(&ns, 999));
	cr_assert_eq(mgr_ns_psize_add(&ns, f), 0);
	cr_assert_eq(mgr_ns_psize_add(&ns, f), 0);
	cr_assert(mgr_ns_psize_pending(&ns, f));
	cr_assert_eq(ns.psize.count, 1);
	/* A truncate since the probe started: its size stands. */
	cr_assert_eq(mgr_ns_size_found(&ns, f, 5000, 0, &t2), 0);
	cr_assert(!mgr_ns_psize_pending(&ns, f));
	cr_assert_eq(in->size, 100);
	/* Not larger: nothing changes. */
	cr_assert_eq(mgr_ns_psize_add(&ns, f), 0);
	cr_assert_eq(mgr_ns_size_found(&ns, f, 100, 1, &t2), 0);
	cr_assert_eq(in->size, 100);
	cr_assert_eq(in->mtime.sec, 2000);
	cr_assert_eq(in->data_version, 1);
	/* Larger: the size, new times, a new data_version. */
	cr_assert_eq(mgr_ns_psize_add(&ns, f), 0);
	cr_assert_eq(mgr_ns_size_found(&ns, f, 5000, 1, &t2), 0);
	cr_assert(!mgr_ns_psize_pending(&ns, f));
	cr_assert_eq(in->size, 5000);
	cr_assert_eq(in->mtime.sec, 3000);
	cr_assert_eq(in->ctime.sec, 3000);
	cr_assert_eq(in->data_version, 2);
	/* Destroyed while pending: the entry goes with it. */
	cr_assert_eq(mgr_ns_psize_add(&ns, f), 0);
	cr_assert_eq(mgr_ns_unlink(&ns, 1, "f", false, &t2), 0);
	cr_assert(!mgr_ns_psize_pending(&ns, f));
	cr_assert_eq(mgr_ns_size_found(&ns, f, 6000, 1, &t2), -ESTALE);
}

Test(ns, readdir_cookies_10k)
{
	enum { N = 10000 };
	uint64_t d = mk(1, "d", S_IFDIR | 0755);
	struct mgr_dir *dir = mgr_ns_get(&ns, d)->dir;
	static uint64_t cookie_of[2 * N];
	static unsigned char seen[2 * N];
	struct mgr_dirent *e;
	uint64_t last = 0, pos = 0;
	char n[32];
	int count = 0;

	for (int i = 0; i < N; i++) {
		snprintf(n, sizeof(n), "file-%d", i);
		mk(d, n, S_IFREG | 0644);
		cookie_of[i] = mgr_dir_find(dir, n)->cookie;
		cr_assert_eq(cookie_of[i], (uint64_t)MGR_FIRST_COOKIE + i);
	}
	for (int i = 0; i < N; i++) {
		snprintf(n, sizeof(n), "file-%d", i);
		cr_assert_not_null(mgr_dir_find(dir, n));
	}
	/* Iterate; halfway, remove every odd entry and add N new ones. */
	while ((e = mgr_dir_next(dir, pos))) {
		int idx;

		cr_assert_gt(e->cookie, last);
		last = pos = e->cookie;
		cr_assert_eq(sscanf(e->name, "file-%d", &idx), 1);
		cr_assert_eq(seen[idx], 0, "entry %d seen twice", idx);
		seen[idx] = 1;
		count++;
		if (count == N / 2) {
			for (int i = 1; i < N; i += 2) {
				snprintf(n, sizeof(n), "file-%d", i);
				cr_assert_eq(mgr_ns_unlink(&ns, d, n, false,
							   &T0), 0);
			}
			for (int i = N; i < 2 * N; i++) {
				snprintf(n, sizeof(n), "file-%d", i);
				mk(d, n, S_IFREG | 0644);
			}
		}
	}
	/* Every entry before the change, every even one after it, and
	 * every new one, exactly once. */
	for (int i = 0; i < 2 * N; i++) {
		bool expect = i >= N || i < N / 2 || i % 2 == 0;

		cr_assert_eq(seen[i], expect, "entry %d", i);
	}
	/* A removed name's cookie is never handed out again. */
	snprintf(n, sizeof(n), "file-%d", 1);
	mk(d, n, S_IFREG | 0644);
	cr_assert_eq(mgr_dir_find(dir, n)->cookie,
		     (uint64_t)MGR_FIRST_COOKIE + 2 * N);
	cr_assert_null(mgr_dir_next(dir, mgr_dir_find(dir, n)->cookie));
	cr_assert_eq(dir->count, N / 2 + N + 1);
}

Test(ns, ino_path)
{
	uint64_t a = mk(1, "a", S_IFDIR | 0755);
	uint64_t b = mk(a, "b", S_IFDIR | 0755);
	uint64_t f = mk(b, "f", S_IFREG | 0644);
	char buf[64];

	cr_assert_eq(mgr_ns_ino_path(&ns, f, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "/a/b/f");
	cr_assert_eq(mgr_ns_ino_path(&ns, 1, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "/");
	cr_assert_eq(mgr_ns_ino_path(&ns, f, buf, 4), -ENAMETOOLONG);
	/* A hard link whose newest name is gone is found by its other. */
	{
		struct mgr_inode *in;

		cr_assert_eq(mgr_ns_link(&ns, f, 1, "g", &T0, &in), 0);
		cr_assert_eq(mgr_ns_unlink(&ns, 1, "g", false, &T0), 0);
		cr_assert_eq(mgr_ns_ino_path(&ns, f, buf, sizeof(buf)), 0);
		cr_assert_str_eq(buf, "/a/b/f");
	}
}

/* ------------------------------------------------------------ persistence */

static struct tw_conf conf;

static void conf_setup(void)
{
	tw_log_init("test_mgr_ns", TW_LOG_WARN);
	tw_conf_defaults(&conf);
	conf.n_iods = 4;
	conf.n_groups = 2;
	for (int i = 0; i < 4; i++) {
		conf.iods[i].id = i + 1;
		conf.iods[i].group = i / 2;
		conf.iods[i].twin_index = i % 2;
		snprintf(conf.iods[i].host, sizeof(conf.iods[i].host),
			 "127.0.0.1");
		conf.iods[i].port = 17600 + i;
	}
}

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test_mgr_ns.XXXXXX");

	cr_assert_not_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *d)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	cr_assert_eq(system(cmd), 0);
}

static uint8_t *encode(const struct mgr_state *st, size_t *len)
{
	uint8_t *b;

	cr_assert_eq(mgr_state_encode(st, &b, len), 0);
	return b;
}

static void assert_same(const struct mgr_state *a, const struct mgr_state *b)
{
	size_t la, lb;
	uint8_t *ea = encode(a, &la), *eb = encode(b, &lb);

	cr_assert_eq(a->ns.next_ino, b->ns.next_ino);
	cr_assert_eq(a->ns.rr_next, b->ns.rr_next);
	cr_assert_eq(a->ns.inodes.count, b->ns.inodes.count);
	cr_assert_eq(a->ns.n_orphans, b->ns.n_orphans);
	cr_assert_eq(a->sessions.by_id.count, b->sessions.by_id.count);
	cr_assert_eq(a->map.epoch, b->map.epoch);
	cr_assert_eq(la, lb, "encoded sizes %zu vs %zu", la, lb);
	cr_assert_eq(memcmp(ea, eb, la), 0, "states differ");
	free(ea);
	free(eb);
}

/* A random workload through the live path.  Returns nothing; the caller
 * compares states. */
struct workload {
	struct mgr_state *st;
	struct mgr_journal *j;
	unsigned seed;
	uint64_t sessions[4];
	uint64_t seq[4];
	int64_t clock;
	unsigned ok[MGR_OP_MAX_], tried[MGR_OP_MAX_];
	unsigned max_orphans;
	/* crash tests: stop before the commit numbered stop_at (0-based) */
	int commits, stop_at;
	bool stopped;
};

static unsigned rnd(struct workload *w)
{
	return (unsigned)rand_r(&w->seed);
}

static uint64_t rnd_ino(struct workload *w)
{
	uint64_t n = w->st->ns.next_ino;

	return 1 + rnd(w) % n;
}

static uint64_t rnd_dir(struct workload *w)
{
	for (int i = 0; i < 8; i++) {
		struct mgr_inode *in = mgr_ns_get(&w->st->ns, rnd_ino(w));

		if (in && in->dir && in->nlink)
			return in->ino;
	}
	return 1;
}

static const char *rnd_name(struct workload *w)
{
	static char n[16];

	snprintf(n, sizeof(n), "n%u", rnd(w) % 24);
	return n;
}

/* A random existing name of directory `dir`, else a random name. */
static const char *rnd_entry(struct workload *w, uint64_t dir)
{
	struct mgr_inode *d = mgr_ns_get(&w->st->ns, dir);
	struct mgr_dirent *e;
	static char copy[MGR_NAME_MAX + 1];

	if (!d || !d->dir || d->dir->count == 0 || rnd(w) % 4 == 0)
		return rnd_name(w);
	e = mgr_dir_next(d->dir, rnd(w) % d->dir->next_cookie);
	if (!e)
		e = mgr_dir_next(d->dir, 0);
	/* A copy: the entry dies with the operation, the op outlives it. */
	snprintf(copy, sizeof(copy), "%s", e->name);
	return copy;
}

static void live(struct workload *w, struct mgr_op *op, int si)
{
	char reply[64];
	int rc;

	if (w->stopped || w->commits == w->stop_at) {
		w->stopped = true;
		return;
	}
	op->now.sec = ++w->clock;
	op->now.nsec = 17;
	if (si >= 0) {
		op->session = w->sessions[si];
		op->seq = ++w->seq[si];
		op->acked_seq = op->seq > 20 ? op->seq - 20 : 0;
	}
	rc = mgr_op_apply(w->st, op);
	op->status = rc;
	w->tried[op->type]++;
	if (rc == 0)
		w->ok[op->type]++;
	w->max_orphans = TW_MAX(w->max_orphans, w->st->ns.n_orphans);
	if (si >= 0) {
		/* A reply that depends on the outcome, as a packed Entry. */
		snprintf(reply, sizeof(reply), "rc=%d ino=%llu fh=%llu", rc,
			 (unsigned long long)op->new_ino,
			 (unsigned long long)op->fh);
		op->reply = reply;
		op->reply_len = (uint32_t)strlen(reply);
		op->reply_type = 13;
	} else if (rc < 0) {
		return;  /* internal ops are journaled only when they apply */
	}
	if (w->stop_at == -2) {
		/* Fault injection armed: a failed append ends the run, as it
		 * ends mgrd. */
		if (mgr_journal_commit(w->j, op) < 0) {
			w->stopped = true;
			return;
		}
	} else {
		cr_assert_eq(mgr_journal_commit(w->j, op), 0);
	}
	w->commits++;
}

static void new_session(struct workload *w, int si)
{
	struct mgr_op op = { .type = MGR_OP_SESSION_NEW };

	live(w, &op, -1);
	w->sessions[si] = op.session;
	w->seq[si] = 0;
}

static void step(struct workload *w)
{
	struct mgr_op op = { 0 };
	int si = (int)(rnd(w) % 4);
	static const uint32_t types[] = { S_IFREG | 0644, S_IFDIR | 0755,
					  S_IFLNK | 0777, S_IFIFO | 0600 };
	char nn[16];

	switch (rnd(w) % 16) {
	case 0: case 1: case 2:
		if (w->st->ns.next_ino >= w->st->ns.ino_limit) {
			struct mgr_op res = { .type = MGR_OP_INO_RESERVE };

			res.new_ino = w->st->ns.next_ino + 16;
			live(w, &res, -1);
		}
		if (rnd(w) % 4 == 0) {
			/* A resync job record (snapshotted and replayed). */
			struct mgr_op jr = { .type = MGR_OP_RESYNC_JOB };
			struct mgr_rjob_rec rec = { 0 };
			uint8_t buf[MGR_RJOB_BYTES_MAX];

			rec.state = (uint8_t)(rnd(w) % MGR_RJ_MAX_);
			rec.full = rnd(w) % 2;
			rec.has_cursor = rnd(w) % 2;
			rec.source = 2;
			rec.start_ms = rnd(w);
			rec.bytes_total = rnd(w) << 8;
			rec.bytes_done = rec.bytes_total / 2;
			rec.bytes_copied = rnd(w);
			rec.runs = rnd(w) % 5;
			rec.last_error = -(int32_t)(rnd(w) % 100);
			rec.cursor_ino = rnd(w);
			rec.cursor_offset = rnd(w) << 20;
			rec.uuid_len = 16;
			memset(rec.uuid, 0xa5, 16);
			jr.ino = 1 + rnd(w) % 4;
			jr.value = buf;
			jr.value_len = (uint32_t)mgr_rjob_pack(&rec, buf);
			live(w, &jr, -1);
		}
		op.type = MGR_OP_CREATE;
		op.parent = rnd_dir(w);
		op.name = rnd_name(w);
		op.mode = types[rnd(w) % 4];
		op.target = "some/where";
		op.uid = rnd(w) % 3;
		op.open = S_ISREG(op.mode) && rnd(w) % 2;
		break;
	case 3:
		op.type = rnd(w) % 2 ? MGR_OP_UNLINK : MGR_OP_RMDIR;
		op.parent = rnd_dir(w);
		op.name = rnd_entry(w, op.parent);
		/* Find an empty directory to remove now and then. */
		for (int i = 0; op.type == MGR_OP_RMDIR && i < 16; i++) {
			struct mgr_inode *d = mgr_ns_get(&w->st->ns,
							 rnd_ino(w));
			struct mgr_inode *p;

			if (!d || !d->dir || d->dir->count || d->ino == 1 ||
			    !d->nlink)
				continue;
			p = mgr_ns_get(&w->st->ns, d->dir->parent);
			for (uint32_t k = 0; k < p->dir->norder; k++)
				if (p->dir->order[k] &&
				    p->dir->order[k]->ino == d->ino) {
					static char nm[MGR_NAME_MAX + 1];

					snprintf(nm, sizeof(nm), "%s",
						 p->dir->order[k]->name);
					op.parent = p->ino;
					op.name = nm;
				}
			break;
		}
		break;
	case 4: case 5:
		op.type = MGR_OP_RENAME;
		op.parent = rnd_dir(w);
		op.name = rnd_entry(w, op.parent);
		op.newparent = rnd_dir(w);
		snprintf(nn, sizeof(nn), "%s", rnd_name(w));
		op.newname = nn;
		op.flags = rnd(w) % 3;
		break;
	case 6:
		op.type = MGR_OP_LINK;
		op.ino = rnd_ino(w);
		op.newparent = rnd_dir(w);
		op.newname = rnd_name(w);
		break;
	case 7:
		op.type = MGR_OP_OPEN;
		op.ino = rnd_ino(w);
		op.flags = rnd(w) % 3;   /* O_RDONLY, O_WRONLY, O_RDWR */
		break;
	case 8: {
		struct mgr_session *s = mgr_session_get(&w->st->sessions,
							w->sessions[si]);
		op.type = MGR_OP_RELEASE;
		op.fh = 1 + rnd(w) % (s ? s->next_fh : 1);
		break;
	}
	case 9:
		op.type = MGR_OP_SETXATTR;
		op.ino = rnd_ino(w);
		op.name = rnd(w) % 2 ? "user.a" : "user.b";
		op.value = "valuevalue";
		op.value_len = rnd(w) % 10;
		op.flags = rnd(w) % 3;
		break;
	case 10:
		op.type = MGR_OP_REMOVEXATTR;
		op.ino = rnd_ino(w);
		op.name = "user.a";
		break;
	case 11:
		op.type = MGR_OP_SETATTR;
		op.ino = rnd_ino(w);
		op.valid = MGR_SA_MODE | (rnd(w) % 2 ? MGR_SA_SIZE : 0) |
			   MGR_SA_ATIME_NOW;
		op.mode = rnd(w) % 0777;
		op.size = rnd(w) % 100000;
		op.trunc_gen = 1 + rnd(w) % 3;
		op.n_cols = 2;
		op.blocks[0] = 8;
		op.blocks[1] = 16;
		break;
	case 12:
		op.type = MGR_OP_SIZE_REPORT;
		op.ino = rnd_ino(w);
		op.size = rnd(w) % 1000000;
		op.mtime.sec = w->clock;
		op.wrote = rnd(w) % 2;
		op.n_cols = 1;
		op.cols[0] = rnd(w) % 2;
		op.blocks[0] = rnd(w) % 100;
		break;
	case 13:
		op.type = MGR_OP_SETSTRIPE;
		op.ino = rnd_dir(w);
		if (rnd(w) % 2)
			op.ino = rnd_ino(w);
		op.stripe_size = 65536u << (rnd(w) % 4);
		op.stripe_count = rnd(w) % 3;
		op.first = (int32_t)(rnd(w) % 3) - 1;
		break;
	case 14:
		if (rnd(w) % 8 == 0) {
			op.type = MGR_OP_SESSION_EXPIRE;
			op.session = w->sessions[si];
			live(w, &op, -1);
			new_session(w, si);
			return;
		}
		if (w->st->ns.psize.count && rnd(w) % 2) {
			/* A probe's answer: sometimes larger, sometimes of
			 * an older trunc_gen. */
			struct mgr_op sf = { .type = MGR_OP_SIZE_FOUND };
			const struct mgr_inode *in;
			uint64_t k;
			void *v;
			size_t it = 0;

			tw_hmap_next(&w->st->ns.psize, &it, &k, &v);
			in = mgr_ns_get(&w->st->ns, k);
			cr_assert(in);
			sf.ino = k;
			sf.trunc_gen = in->trunc_gen + rnd(w) % 2;
			sf.size = in->size + (rnd(w) % 3) * 4096;
			live(w, &sf, -1);
		}
		if (w->clock % 8 == 0) {   /* not rnd(): seeds keep their runs */
			/* the revoked-key list for a standby: no state */
			static char list[] = "rev1 0123456789abcdef0123456789"
				"abcdef0123456789abcdef0123456789abcdef\n";
			struct mgr_op rv = { .type = MGR_OP_REVOKED,
					     .value = list,
					     .value_len = sizeof(list) - 1 };

			live(w, &rv, -1);
		}
		if (tw_hmap_get(&w->st->ns.pdel, rnd_ino(w)) || 1) {
			uint64_t k;
			void *v;
			size_t it = 0;

			if (tw_hmap_next(&w->st->ns.pdel, &it, &k, &v)) {
				op.type = MGR_OP_PDEL_DONE;
				op.ino = k;
				live(w, &op, -1);
			}
		}
		return;
	case 15: {
		static const uint8_t uuid[2][16] = { { 1, 2, 3 }, { 4, 5, 6 } };
		static const enum r1_event evs[] = {
			R1_EV_PING_OK, R1_EV_PING_MISSED, R1_EV_PROBE_FAILED,
			R1_EV_RESYNC_DONE, R1_EV_ACCEPT_STALE,
		};
		struct mgr_op ops[2];
		uint32_t id = 1 + rnd(w) % 4;
		int rc;

		/* Registrations and monitor events: map changes of one or
		 * two records each, replayed like every other record. */
		if (rnd(w) % 2)
			rc = mgr_map_register(&w->st->map, id, uuid[id % 2], 16,
					      rnd(w) % 3, ops);
		else
			rc = mgr_map_event(&w->st->map, id,
					   evs[rnd(w) % 5], 1 + rnd(w) % 2, 2,
					   ops);
		for (int i = 0; i < rc; i++)
			live(w, &ops[i], -1);
		return;
	}
	}
	/* Sometimes a retransmission: same seq, must hit the cache. */
	live(w, &op, si);
	if (!w->stopped && rnd(w) % 16 == 0) {
		struct mgr_session *s = mgr_session_get(&w->st->sessions,
							op.session);
		const struct mgr_reply *r = mgr_session_reply(s, op.seq);

		cr_assert_not_null(r);
		cr_assert_eq(r->status, op.status);
		cr_assert_eq(r->len, op.reply_len);
	}
}

/* N2 and friends over the whole namespace: every entry names a live inode,
 * link counts match the names, ".." matches the entry, open counts match
 * the handles of all sessions, orphans are exactly nlink 0 + open. */
static void check_invariants(const struct mgr_state *st)
{
	const struct mgr_ns *n = &st->ns;
	struct tw_hmap names, subdirs, opens;
	struct mgr_inode *in_;
	uint64_t k, kk;
	void *v, *vv;
	uint32_t orphans = 0;

	tw_hmap_init(&names);
	tw_hmap_init(&subdirs);
	tw_hmap_init(&opens);
	/* Sizes to probe belong to regular files that still exist. */
	for (size_t it = 0; tw_hmap_next(&n->psize, &it, &k, &v);) {
		const struct mgr_inode *in = mgr_ns_get(n, k);

		cr_assert(in && S_ISREG(in->mode), "psize %llu",
			  (unsigned long long)k);
	}
	for (size_t it = 0; mgr_itab_next(&n->inodes, &it, &in_);) {
		const struct mgr_inode *in = in_;

		if (!in->dir)
			continue;
		for (uint32_t i = 0; i < in->dir->norder; i++) {
			const struct mgr_dirent *e = in->dir->order[i];
			const struct mgr_inode *c;

			if (!e)
				continue;
			c = mgr_ns_get(n, e->ino);
			cr_assert_not_null(c, "dangling entry %s", e->name);
			cr_assert_eq(mgr_dir_find(in->dir, e->name), e);
			tw_hmap_put(&names, e->ino, (void *)((uintptr_t)
				tw_hmap_get(&names, e->ino) + 1));
			if (c->dir) {
				cr_assert_eq(c->dir->parent, in->ino);
				tw_hmap_put(&subdirs, in->ino, (void *)((uintptr_t)
					tw_hmap_get(&subdirs, in->ino) + 1));
			}
		}
	}
	for (size_t it = 0; tw_hmap_next(&st->sessions.by_id, &it, &k, &v);) {
		const struct mgr_session *s = v;

		for (size_t it2 = 0; tw_hmap_next(&s->handles, &it2, &kk, &vv);) {
			const struct mgr_handle *h = vv;

			tw_hmap_put(&opens, h->ino, (void *)((uintptr_t)
				tw_hmap_get(&opens, h->ino) + 1));
		}
	}
	for (size_t it = 0; mgr_itab_next(&n->inodes, &it, &in_);) {
		const struct mgr_inode *in = in_;
		uintptr_t nn = (uintptr_t)tw_hmap_get(&names, k = in->ino);
		uintptr_t sd = (uintptr_t)tw_hmap_get(&subdirs, k);

		cr_assert_eq(in->open_count, (uintptr_t)tw_hmap_get(&opens, k),
			     "ino %llu open count", (unsigned long long)k);
		if (in->dir && in->nlink)
			cr_assert_eq(in->nlink, 2 + sd, "dir %llu nlink %u",
				     (unsigned long long)k, in->nlink);
		else if (in->ino != 1)
			cr_assert_eq(in->nlink, nn, "ino %llu nlink %u != %lu",
				     (unsigned long long)k, in->nlink,
				     (unsigned long)nn);
		if (in->nlink == 0) {
			cr_assert(in->orphan);
			cr_assert_gt(in->open_count, 0);
			orphans++;
		}
		cr_assert_lt(in->ino, n->next_ino);
	}
	cr_assert_eq(orphans, n->n_orphans);
	tw_hmap_free(&names);
	tw_hmap_free(&subdirs);
	tw_hmap_free(&opens);
}

/* A workload's run: the live state with its journal in a new directory
 * and four sessions (run_start); the state its log replays into after a
 * "crash" (run_crash_replay). */
struct run {
	char *dir;
	struct mgr_state live, replayed;
	struct mgr_journal j, j2;
	struct workload w;
};

static void run_start(struct run *r, unsigned seed)
{
	struct mgr_time now = { 1, 0 };

	memset(r, 0, sizeof(*r));
	r->dir = tmpdir();
	r->w.st = &r->live;
	r->w.j = &r->j;
	r->w.seed = seed;
	r->w.stop_at = -1;
	cr_assert_eq(mgr_state_init(&r->live, &conf, &now), 0);
	cr_assert_eq(mgr_journal_open(&r->j, r->dir, &r->live), 0);
	for (int i = 0; i < 4; i++)
		new_session(&r->w, i);
}

/* "Crash": close the log files without a snapshot; the log replays into
 * a state equal to the live one. */
static void run_crash_replay(struct run *r)
{
	struct mgr_time now = { 1, 0 };

	mgr_journal_close(&r->j);
	cr_assert_eq(mgr_state_init(&r->replayed, &conf, &now), 0);
	cr_assert_eq(mgr_journal_open(&r->j2, r->dir, &r->replayed), 0);
	assert_same(&r->live, &r->replayed);
	check_invariants(&r->replayed);
}

static void run_end(struct run *r)
{
	mgr_journal_close(&r->j2);
	mgr_state_free(&r->live);
	mgr_state_free(&r->replayed);
	rm_rf(r->dir);
	free(r->dir);
}

static void run_workload(unsigned seed, int steps, int snapshot_at,
			 bool clean_close)
{
	struct run r;
	struct workload *w = &r.w;

	run_start(&r, seed);
	for (int i = 0; i < steps; i++) {
		if (i == snapshot_at)
			cr_assert_eq(mgr_journal_snapshot(&r.j), 0);
		step(w);
		if (i % 97 == 0)
			check_invariants(&r.live);
	}
	if (clean_close)
		cr_assert_eq(mgr_journal_snapshot(&r.j), 0);
	/* The workload must exercise every operation, failing and not. */
	for (int t = 1; t < MGR_OP_MAX_; t++) {
		if (t == MGR_OP_TRUNC_BEGIN)
			continue;
		cr_assert_gt(w->ok[t], 0, "op %d never succeeded (seed %u)", t,
			     seed);
		if (getenv("MGR_TEST_VERBOSE"))
			fprintf(stderr, "op %2d: %u/%u\n", t, w->ok[t],
				w->tried[t]);
	}
	if (getenv("MGR_TEST_VERBOSE"))
		fprintf(stderr, "inodes %zu orphans %u (max %u) pdel %zu\n",
			r.live.ns.inodes.count, r.live.ns.n_orphans,
			w->max_orphans, r.live.ns.pdel.count);
	cr_assert_gt(w->max_orphans, 0);
	check_invariants(&r.live);
	run_crash_replay(&r);
	/* And the replayed state can go on. */
	w->st = &r.replayed;
	w->j = &r.j2;
	for (int i = 0; i < 50; i++)
		step(w);
	check_invariants(&r.replayed);
	run_end(&r);
}

TestSuite(persist, .init = conf_setup);

/* The N-th record append fails (mode 0) or is torn (mode 1): replay must
 * give exactly the state after the first N-1 records, which a second run
 * of the same workload stopped before its N-th commit produces live. */
static void crash_at(unsigned seed, unsigned nth, int mode)
{
	char *da = tmpdir(), *db = tmpdir();
	struct mgr_state a, b, ra;
	struct mgr_journal ja, jb, jra;
	struct mgr_time now = { 1, 0 };
	struct workload wa = { .st = &a, .j = &ja, .seed = seed,
			       .stop_at = -2 };
	struct workload wb = { .st = &b, .j = &jb, .seed = seed,
			       .stop_at = (int)nth - 1 };

	cr_assert_eq(mgr_state_init(&a, &conf, &now), 0);
	cr_assert_eq(mgr_journal_open(&ja, da, &a), 0);
	jnl_rec_inject_fault(ja.log, nth, mode);
	for (int i = 0; i < 4; i++)
		new_session(&wa, i);
	while (!wa.stopped)
		step(&wa);
	cr_assert_eq(wa.commits, (int)nth - 1);
	mgr_journal_close(&ja);

	cr_assert_eq(mgr_state_init(&b, &conf, &now), 0);
	cr_assert_eq(mgr_journal_open(&jb, db, &b), 0);
	for (int i = 0; i < 4; i++)
		new_session(&wb, i);
	while (!wb.stopped)
		step(&wb);
	cr_assert_eq(wb.commits, (int)nth - 1);

	cr_assert_eq(mgr_state_init(&ra, &conf, &now), 0);
	cr_assert_eq(mgr_journal_open(&jra, da, &ra), 0);
	assert_same(&ra, &b);
	check_invariants(&ra);
	mgr_journal_close(&jb);
	mgr_journal_close(&jra);
	mgr_state_free(&a);
	mgr_state_free(&b);
	mgr_state_free(&ra);
	rm_rf(da);
	rm_rf(db);
	free(da);
	free(db);
}

/* Periodic snapshots written by a child (record.c, snapfork.c) while the
 * workload goes on appending: they are installed, and the state replays
 * equal after a crash with one finished, and with one still running
 * (mgr_journal_close kills it; the log keeps both files). */
static void bg_snapshots(unsigned seed, bool wait_last)
{
	struct run r;

	run_start(&r, seed);
	r.j.snapshot_bytes = r.j.snapshot_bytes_cfg = 16384;
	for (int i = 0; i < 3000; i++)
		step(&r.w);
	/* bounded by iterations, not time: a slow machine only waits */
	for (int i = 0; (r.j.bg_child > 0 || r.j.snapshots == 0) && i < 60000;
	     i++) {
		usleep(1000);
		mgr_journal_poll(&r.j);
		if (r.j.bg_child == 0 && r.j.snapshots == 0)
			step(&r.w);
	}
	cr_assert_gt(r.j.snapshots, 0, "snapshots installed");
	cr_assert_eq(r.j.bg_child, 0);
	if (!wait_last)   /* most likely one running at the crash */
		for (int i = 0; i < 1000; i++)
			step(&r.w);
	run_crash_replay(&r);
	run_end(&r);
}

Test(persist, snapshots_written_by_a_child)
{
	bg_snapshots(5, true);
	bg_snapshots(6, false);
}

/* The periodic snapshot's first child hangs (stopped: snapfork.c's test
 * hook; each Criterion test runs in a process of its own, so it is this
 * process's first fork): past the timeout it is killed, the log keeps
 * every record, a later try installs a snapshot and the state replays
 * equal. */
Test(persist, snapshot_child_that_hangs_is_killed)
{
	uint64_t t0 = mgr_snap_timeouts();

	cr_assert_eq(setenv("TWINFS_TEST_SNAP_HANG", "1", 1), 0);
	mgr_snap_set_timeout(300);
	bg_snapshots(7, true);
	cr_assert_eq(mgr_snap_timeouts(), t0 + 1);
	unsetenv("TWINFS_TEST_SNAP_HANG");
	mgr_snap_set_timeout(TW_SNAPSHOT_TIMEOUT_MS);
}

static int snap_hang(const uint8_t *buf, size_t len, void *arg)
{
	(void)buf;
	(void)len;
	(void)arg;
	for (int i = 0; i < 600; i++)   /* bounded: a test's lifetime */
		sleep(1);
	return 0;
}

static int snap_quick(const uint8_t *buf, size_t len, void *arg)
{
	(void)buf;
	(void)len;
	(void)arg;
	return 0;
}

/* Polls until the child ended (bounded by iterations, not time). */
static int snap_wait_end(pid_t pid)
{
	int rc = 1;

	for (int i = 0; rc == 1 && i < 60000; i++) {
		rc = mgr_snap_wait(pid);
		if (rc == 1)
			usleep(1000);
	}
	return rc;
}

/* snapfork.c's timeout: a child that hangs is killed and reaped (no
 * zombie), mgr_snap_wait says -ETIMEDOUT, and the next fork works; 0
 * means no limit. */
Test(persist, snapshot_child_timeout)
{
	struct mgr_time now = { 1, 0 };
	struct mgr_state st;
	uint64_t t0 = mgr_snap_timeouts();
	pid_t pid;

	cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
	mgr_snap_set_timeout(200);
	pid = mgr_snap_fork_fn(&st, snap_hang, NULL, "/test/hang");
	cr_assert_gt(pid, 0);
	cr_assert(mgr_snap_busy());
	cr_assert_eq(mgr_snap_fork_fn(&st, snap_quick, NULL, "/test/quick"),
		     -EBUSY);
	cr_assert_eq(snap_wait_end(pid), -ETIMEDOUT);
	cr_assert_eq(mgr_snap_timeouts(), t0 + 1);
	cr_assert(!mgr_snap_busy());
	/* Killed and reaped: neither running nor a zombie. */
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), -1);
	cr_assert_eq(errno, ECHILD);
	cr_assert_eq(kill(pid, 0), -1);
	cr_assert_eq(errno, ESRCH);

	/* The next fork works and ends on its own. */
	pid = mgr_snap_fork_fn(&st, snap_quick, NULL, "/test/quick");
	cr_assert_gt(pid, 0);
	mgr_snap_set_timeout(0);   /* none: only the child's end ends it */
	cr_assert_eq(snap_wait_end(pid), 0);
	cr_assert(!mgr_snap_busy());
	cr_assert_eq(mgr_snap_timeouts(), t0 + 1);
	mgr_snap_set_timeout(TW_SNAPSHOT_TIMEOUT_MS);
	mgr_state_free(&st);
}

Test(persist, failed_or_torn_append_at_every_point)
{
	static const unsigned points[] = { 5, 6, 7, 9, 13, 21, 50, 123,
					   400, 999 };

	for (size_t i = 0; i < TW_ARRAY_SIZE(points); i++) {
		crash_at(3, points[i], 0);
		crash_at(4, points[i], 1);
	}
}

Test(persist, crash_replay_equals_live)
{
	for (unsigned seed = 1; seed <= 8; seed++)
		run_workload(seed, 2000, -1, false);
}

Test(persist, snapshot_in_the_middle)
{
	for (unsigned seed = 11; seed <= 14; seed++)
		run_workload(seed, 2000, 1000, false);
}

Test(persist, clean_shutdown_snapshot)
{
	run_workload(21, 1500, -1, true);
}

Test(persist, record_roundtrip_and_garbage)
{
	struct mgr_op op = { .type = MGR_OP_RENAME, .session = 3, .seq = 9,
			     .status = 0, .parent = 1, .name = "a",
			     .newparent = 2, .newname = "b", .flags = 1,
			     .now = { 5, 6 }, .n_cols = 1, .layout = {
				     .stripe_size = 65536, .stripe_count = 2,
				     .groups = { 1, 0 } } };
	struct mgr_op back;
	uint8_t *buf;
	size_t len;

	cr_assert_eq(mgr_op_encode(&op, &buf, &len), 0);
	cr_assert_eq(mgr_op_decode(buf, len, &back), 0);
	cr_assert_str_eq(back.name, "a");
	cr_assert_str_eq(back.newname, "b");
	cr_assert_null(back.target);
	cr_assert_eq(back.status, 0);
	cr_assert_eq(back.layout.groups[0], 1);
	cr_assert_eq(back.now.nsec, 6);
	/* Every truncation is refused, never read past. */
	for (size_t l = 0; l < len; l++)
		cr_assert_eq(mgr_op_decode(buf, l, &back), -EBADMSG);
	/* An embedded NUL in a name is refused. */
	{
		uint8_t *p = memmem(buf, len, "a\0", 2);

		cr_assert_not_null(p);
		p[0] = '\0';
		cr_assert_eq(mgr_op_decode(buf, len, &back), -EBADMSG);
	}
	free(buf);
}

/* A failed request's record keeps only the exactly-once fields: its
 * inputs may be the reason it failed (a 256-byte name) and must not make
 * the record undecodable. */
Test(persist, failed_record_with_bad_inputs)
{
	static char longname[5000];
	struct mgr_op op = { .type = MGR_OP_CREATE, .session = 1, .seq = 5,
			     .status = -ENAMETOOLONG, .reply_type = 14,
			     .parent = 1, .name = longname };
	struct mgr_op back;
	uint8_t *buf;
	size_t len;

	memset(longname, 'x', sizeof(longname) - 1);
	cr_assert_eq(mgr_op_encode(&op, &buf, &len), 0);
	cr_assert_eq(mgr_op_decode(buf, len, &back), 0);
	cr_assert_eq(back.status, -ENAMETOOLONG);
	cr_assert_eq(back.seq, 5);
	cr_assert_null(back.name);
	free(buf);
}

Test(persist, snapshot_garbage_refused)
{
	struct mgr_state st, st2;
	struct mgr_time now = { 1, 0 };
	uint8_t *buf;
	size_t len;

	cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
	cr_assert_eq(mgr_state_encode(&st, &buf, &len), 0);
	cr_assert_eq(mgr_state_init(&st2, &conf, &now), 0);
	for (size_t l = 0; l < len; l += 3)
		cr_assert_lt(mgr_state_decode(&st2, buf, l), 0);
	buf[len / 2] ^= 1;
	cr_assert_eq(mgr_state_decode(&st2, buf, len), -EBADMSG);
	free(buf);
	mgr_state_free(&st);
	mgr_state_free(&st2);
}

/* ---------------------------------------------------- sessions and map */

/* Fencing: every expiry joins the list, the newest MGR_FENCE_MAX are kept
 * oldest first, and a snapshot carries them. */
Test(persist, fence_list_keeps_the_newest)
{
	struct mgr_state st, st2;
	struct mgr_time now = { 1, 0 };
	const uint32_t n = MGR_FENCE_MAX + 6;
	uint8_t *buf;
	size_t len;

	cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct mgr_op op = { .type = MGR_OP_SESSION_NEW };
		uint64_t id;

		cr_assert_eq(mgr_op_apply(&st, &op), 0);
		id = op.session;
		cr_assert_neq(id, 0);
		op = (struct mgr_op){ .type = MGR_OP_SESSION_EXPIRE,
				      .session = id };
		cr_assert_eq(mgr_op_apply(&st, &op), 0);
		cr_assert_eq(st.sessions.fenced[st.sessions.n_fenced - 1], id);
	}
	/* An unknown session is not expired, so not fenced. */
	{
		struct mgr_op op = { .type = MGR_OP_SESSION_EXPIRE,
				     .session = 999999 };

		cr_assert_lt(mgr_op_apply(&st, &op), 0);
	}
	cr_assert_eq(st.sessions.fence_gen, n);
	cr_assert_eq(st.sessions.n_fenced, MGR_FENCE_MAX);
	for (uint32_t i = 1; i < MGR_FENCE_MAX; i++)
		cr_assert_lt(st.sessions.fenced[i - 1], st.sessions.fenced[i]);
	cr_assert_eq(st.sessions.fenced[0], 7);   /* ids 1..6 dropped */
	cr_assert_eq(mgr_state_encode(&st, &buf, &len), 0);
	cr_assert_eq(mgr_state_init(&st2, &conf, &now), 0);
	cr_assert_eq(mgr_state_decode(&st2, buf, len), 0);
	cr_assert_eq(st2.sessions.fence_gen, n);
	cr_assert_eq(st2.sessions.n_fenced, MGR_FENCE_MAX);
	cr_assert_eq(memcmp(st2.sessions.fenced, st.sessions.fenced,
			    MGR_FENCE_MAX * sizeof(uint64_t)), 0);
	assert_same(&st, &st2);
	free(buf);
	mgr_state_free(&st);
	mgr_state_free(&st2);
}

Test(persist, reply_cache_trim_and_cap)
{
	struct mgr_sessions ss;
	struct mgr_session *s;

	mgr_sessions_init(&ss);
	s = mgr_session_create(&ss, 0);
	cr_assert_eq(s->id, 1);
	cr_assert_null(mgr_session_create(&ss, 1));
	for (uint64_t seq = 1; seq <= 10; seq++)
		cr_assert_eq(mgr_session_cache(s, seq, 0, 14, 0, "x", 1), 0);
	/* The same seq twice keeps the first answer. */
	cr_assert_eq(mgr_session_cache(s, 3, 0, 14, -EEXIST, NULL, 0), 0);
	cr_assert_eq(mgr_session_reply(s, 3)->status, 0);
	/* acked_seq 5 forgets 1..5 (with the next cached reply). */
	cr_assert_eq(mgr_session_cache(s, 11, 5, 14, -ENOENT, NULL, 0), 0);
	cr_assert_null(mgr_session_reply(s, 5));
	cr_assert_not_null(mgr_session_reply(s, 6));
	cr_assert_eq(mgr_session_reply(s, 11)->status, -ENOENT);
	cr_assert_eq(s->nreplies, 6);
	/* Bounded: the oldest go first. */
	for (uint64_t seq = 12; seq < 12 + MGR_REPLY_CACHE_MAX; seq++)
		cr_assert_eq(mgr_session_cache(s, seq, 0, 14, 0, NULL, 0), 0);
	cr_assert_eq(s->nreplies, MGR_REPLY_CACHE_MAX);
	cr_assert_null(mgr_session_reply(s, 11));
	cr_assert_not_null(mgr_session_reply(s, 12));
	/* Handles. */
	cr_assert_eq(mgr_session_add_handle(s, s->next_fh, 7, 0), 0);
	cr_assert_eq(mgr_session_add_handle(s, 1, 8, 0), -EEXIST);
	cr_assert_eq(s->next_fh, 2);
	cr_assert_eq(mgr_session_handle(s, 1)->ino, 7);
	mgr_sessions_free(&ss);
}

Test(persist, map_register)
{
	struct mgr_map m;
	struct mgr_op ops[2];
	static const uint8_t u1[16] = { 1 }, u2[16] = { 2 };
	struct r0_layout l;

	mgr_map_init(&m, &conf);
	cr_assert_eq(m.epoch, 1);
	cr_assert_eq(m.iods[0].state, MGR_IOD_DOWN);
	cr_assert_eq(mgr_map_register(&m, 9, u1, 16, 1, ops), -ENOENT);
	cr_assert_eq(mgr_map_register(&m, 1, u1, 0, 1, ops), -EINVAL);
	/* Formation: iod 1 alone is recorded but stays down. */
	cr_assert_eq(mgr_map_register(&m, 1, u1, 16, 1, ops), 1);
	cr_assert_eq(ops[0].epoch, 2);
	cr_assert_eq(ops[0].iod_state, MGR_IOD_DOWN);
	/* Apply it as a record would. */
	{
		struct mgr_state st;
		struct mgr_time now = { 1, 0 };
		int n;

		cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
		cr_assert_eq(mgr_op_apply(&st, &ops[0]), 0);
		cr_assert_eq(st.map.epoch, 2);
		cr_assert_eq(st.map.iods[0].state, MGR_IOD_DOWN);
		cr_assert(!mgr_map_formed(&st.map, &st.map.iods[0]));
		/* Same UUID, same incarnation: nothing changes. */
		cr_assert_eq(mgr_map_register(&st.map, 1, u1, 16, 1, ops), 0);
		/* Another UUID for the same id is refused. */
		cr_assert_eq(mgr_map_register(&st.map, 1, u2, 16, 1, ops),
			     -EEXIST);
		/* Its twin registers for the first time: both up at once. */
		n = mgr_map_register(&st.map, 2, u2, 16, 7, ops);
		cr_assert_eq(n, 2);
		for (int i = 0; i < n; i++) {
			cr_assert_eq(ops[i].epoch, 3);
			cr_assert_eq(mgr_op_apply(&st, &ops[i]), 0);
		}
		cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
		cr_assert_eq(st.map.iods[1].state, MGR_IOD_UP);
		cr_assert(mgr_map_formed(&st.map, &st.map.iods[1]));
		/* Primaries: (ino + column) % 2 while both twins are up,
		 * else the survivor; NULL when neither is up. */
		cr_assert_eq(r0_layout_make(&l, 65536, 2, 0, 2), 0);
		cr_assert_eq(mgr_map_primary(&st.map, &l, 4, 0)->id, 1);
		cr_assert_eq(mgr_map_primary(&st.map, &l, 5, 0)->id, 2);
		cr_assert_null(mgr_map_primary(&st.map, &l, 5, 1));
		/* A restart of an up twin (new incarnation) is a failure
		 * plus a rejoin: resyncing, never read. */
		n = mgr_map_register(&st.map, 1, u1, 16, 2, ops);
		cr_assert_eq(n, 1);
		cr_assert_eq(ops[0].iod_state, MGR_IOD_RESYNCING);
		cr_assert(ops[0].needs_resync);
		cr_assert_eq(ops[0].incarnation, 2);
		cr_assert_eq(mgr_op_apply(&st, &ops[0]), 0);
		cr_assert_eq(st.map.epoch, 4);
		cr_assert_eq(mgr_map_primary(&st.map, &l, 4, 0)->id, 2);
		/* mgrd restarts (seen is volatile): the first registration
		 * of the up twin keeps its state; the resyncing one stays
		 * resyncing; a second restart is a failure plus a rejoin
		 * again (alone with a resyncing partner: back up, since it
		 * holds every write). */
		st.map.iods[0].seen = st.map.iods[1].seen = false;
		n = mgr_map_register(&st.map, 2, u2, 16, 8, ops);
		cr_assert_eq(n, 1);
		cr_assert_eq(ops[0].iod_state, MGR_IOD_UP);
		cr_assert_eq(ops[0].incarnation, 8);
		cr_assert_eq(mgr_op_apply(&st, &ops[0]), 0);
		n = mgr_map_register(&st.map, 1, u1, 16, 3, ops);
		cr_assert_eq(n, 1);
		cr_assert_eq(ops[0].iod_state, MGR_IOD_RESYNCING);
		cr_assert_eq(mgr_op_apply(&st, &ops[0]), 0);
		n = mgr_map_register(&st.map, 2, u2, 16, 9, ops);
		cr_assert_eq(n, 1);
		cr_assert_eq(ops[0].iod_state, MGR_IOD_UP);
		cr_assert_eq(ops[0].incarnation, 9);
		mgr_state_free(&st);
	}
}

/* A replaced data directory (fresh, another UUID) is accepted and stale:
 * resyncing next to a readable twin, never promoted alone; without
 * `fresh` it is refused. */
#define APPLY(n_) do { for (int i_ = 0; i_ < (n_); i_++) \
	cr_assert_eq(mgr_op_apply(&st, &ops[i_]), 0); } while (0)
Test(persist, map_register_fresh)
{
	struct mgr_state st;
	struct mgr_time now = { 1, 0 };
	struct mgr_op ops[2];
	static const uint8_t u1[16] = { 1 }, u2[16] = { 2 }, u3[16] = { 3 },
			     u4[16] = { 4 };
	int n;

	cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
	n = mgr_map_register(&st.map, 1, u1, 16, 1, ops);
	APPLY(n);
	n = mgr_map_register(&st.map, 2, u2, 16, 1, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
	cr_assert_eq(mgr_map_register_ex(&st.map, 1, u3, 16, 2, false, ops),
		     -EEXIST);
	n = mgr_map_register_ex(&st.map, 1, u3, 16, 2, true, ops);
	cr_assert_eq(n, 1);
	cr_assert_eq(ops[0].iod_state, MGR_IOD_RESYNCING);
	cr_assert(ops[0].needs_resync);
	APPLY(n);
	cr_assert_eq(memcmp(st.map.iods[0].uuid, u3, 16), 0);
	/* Even right after an mgrd restart (up kept otherwise). */
	n = mgr_map_event(&st.map, 1, R1_EV_RESYNC_DONE, 0, 2, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
	st.map.iods[0].seen = st.map.iods[1].seen = false;
	n = mgr_map_register_ex(&st.map, 1, u4, 16, 3, true, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_RESYNCING);
	cr_assert(st.map.iods[0].needs_resync);
	/* Alone (twin down), a replaced directory stays down. */
	n = mgr_map_event(&st.map, 2, R1_EV_PROBE_FAILED, 0, 2, ops);
	APPLY(n);
	n = mgr_map_register_ex(&st.map, 1, u1, 16, 4, true, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_DOWN);
	cr_assert(st.map.iods[0].needs_resync);
	mgr_state_free(&st);
}
#undef APPLY

/* The monitor's events through mgr_map_event: suspect, down after
 * down_after misses, the survivor marks the loser stale, a stale twin is
 * never promoted, and records raising needs_resync come first. */
Test(persist, map_events)
{
	struct mgr_state st;
	struct mgr_time now = { 1, 0 };
	struct mgr_op ops[2];
	static const uint8_t u1[16] = { 1 }, u2[16] = { 2 };
	int n;

#define APPLY(n_) do { for (int i_ = 0; i_ < (n_); i_++) \
	cr_assert_eq(mgr_op_apply(&st, &ops[i_]), 0); } while (0)
	cr_assert_eq(mgr_state_init(&st, &conf, &now), 0);
	n = mgr_map_register(&st.map, 1, u1, 16, 1, ops);
	APPLY(n);
	n = mgr_map_register(&st.map, 2, u2, 16, 1, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
	/* One miss: suspect, still readable. */
	n = mgr_map_event(&st.map, 2, R1_EV_PING_MISSED, 1, 2, ops);
	cr_assert_eq(n, 1);
	APPLY(n);
	cr_assert_eq(st.map.iods[1].state, MGR_IOD_SUSPECT);
	/* Answering again: up. */
	n = mgr_map_event(&st.map, 2, R1_EV_PING_OK, 0, 2, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[1].state, MGR_IOD_UP);
	/* A failed probe: down and stale (iod 1 goes on alone). */
	n = mgr_map_event(&st.map, 2, R1_EV_PROBE_FAILED, 0, 2, ops);
	cr_assert_eq(n, 1);
	APPLY(n);
	cr_assert_eq(st.map.iods[1].state, MGR_IOD_DOWN);
	cr_assert(st.map.iods[1].needs_resync);
	/* Now iod 1 dies too: down, not stale; group failed. */
	n = mgr_map_event(&st.map, 1, R1_EV_PING_MISSED, 2, 2, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_DOWN);
	cr_assert(!st.map.iods[0].needs_resync);
	/* The stale one comes back first: it stays down. */
	n = mgr_map_event(&st.map, 2, R1_EV_PING_OK, 0, 2, ops);
	cr_assert_eq(n, 0);
	/* The good one comes back: up alone; the stale one then resyncs. */
	n = mgr_map_event(&st.map, 1, R1_EV_PING_OK, 0, 2, ops);
	cr_assert_eq(n, 1);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
	n = mgr_map_event(&st.map, 2, R1_EV_PING_OK, 0, 2, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[1].state, MGR_IOD_RESYNCING);
	/* Resync done (twinfsctl rebuild, part B): up again. */
	n = mgr_map_event(&st.map, 2, R1_EV_RESYNC_DONE, 0, 2, ops);
	APPLY(n);
	cr_assert_eq(st.map.iods[1].state, MGR_IOD_UP);
	cr_assert(!st.map.iods[1].needs_resync);
	/* Both down, the second without needs_resync; the second returns
	 * alone: two records, the one raising needs_resync first. */
	n = mgr_map_event(&st.map, 1, R1_EV_PROBE_FAILED, 0, 2, ops);
	APPLY(n);
	n = mgr_map_event(&st.map, 2, R1_EV_PROBE_FAILED, 0, 2, ops);
	APPLY(n);
	cr_assert(st.map.iods[0].needs_resync);
	cr_assert(!st.map.iods[1].needs_resync);
	n = mgr_map_event(&st.map, 1, R1_EV_ACCEPT_STALE, 0, 2, ops);
	cr_assert_eq(n, 2);
	cr_assert_eq(ops[0].ino, 2);
	cr_assert(ops[0].needs_resync);
	cr_assert_eq(ops[0].epoch, ops[1].epoch);
	APPLY(n);
	cr_assert_eq(st.map.iods[0].state, MGR_IOD_UP);
	cr_assert_eq(mgr_map_event(&st.map, 9, R1_EV_PING_OK, 0, 2, ops),
		     -ENOENT);
#undef APPLY
	mgr_state_free(&st);
}

/* The resync job record: every field round-trips; a wrong version, state,
 * flag, UUID length or total length is refused. */
Test(rjob, pack_unpack_and_malformed)
{
	struct mgr_rjob_rec a = { 0 }, b;
	uint8_t buf[MGR_RJOB_BYTES_MAX + 1];
	size_t n;

	memset(&a, 0, sizeof(a));   /* padding too: compared with memcmp */
	a.state = MGR_RJ_INTERRUPTED;
	a.full = true;
	a.has_cursor = true;
	a.source = 7;
	a.start_ms = 1763820000123ull;
	a.end_ms = 1763820099456ull;
	a.files_total = 11;
	a.files_done = 5;
	a.bytes_total = 1ull << 40;
	a.bytes_done = 3ull << 30;
	a.bytes_copied = 5ull << 30;
	a.runs = 3;
	a.errors = 2;
	a.last_error = -EIO;
	a.cursor_ino = 0x123456789ull;
	a.cursor_column = 9;
	a.cursor_offset = 17ull << 20;
	a.replay = true;
	a.target_incarnation = 0xfeedfacecafebeefull;
	a.rate_mbps = 250;
	a.unrepairable = 3;
	a.uuid_len = 16;
	for (int i = 0; i < 16; i++)
		a.uuid[i] = (uint8_t)(i * 7);
	n = mgr_rjob_pack(&a, buf);
	cr_assert_eq(n, 116u + 16u);
	cr_assert_eq(mgr_rjob_unpack(buf, n, &b), 0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	cr_assert_eq(mgr_rjob_unpack(buf, n - 1, &b), -EBADMSG);
	cr_assert_eq(mgr_rjob_unpack(buf, n + 1, &b), -EBADMSG);
	buf[0] = 3;
	cr_assert_eq(mgr_rjob_unpack(buf, n, &b), -EBADMSG);
	/* version 1: 108 bytes before the UUID, no unrepairable count */
	{
		uint8_t v1[MGR_RJOB_BYTES_MAX];

		memcpy(v1, buf, 108);
		memcpy(v1 + 108, buf + 116, 16);
		v1[0] = 1;
		cr_assert_eq(mgr_rjob_unpack(v1, 108 + 16, &b), 0);
		cr_assert_eq(b.unrepairable, 0);
		cr_assert_eq(b.rate_mbps, 250);
		cr_assert_eq(memcmp(b.uuid, a.uuid, 16), 0);
		cr_assert_eq(mgr_rjob_unpack(v1, 116 + 16, &b), -EBADMSG);
	}
	buf[0] = 2;
	buf[1] = MGR_RJ_MAX_;
	cr_assert_eq(mgr_rjob_unpack(buf, n, &b), -EBADMSG);
	buf[1] = MGR_RJ_DONE;
	buf[2] = 0x08;
	cr_assert_eq(mgr_rjob_unpack(buf, n, &b), -EBADMSG);
	buf[2] = 0;
	buf[3] = MGR_UUID_MAX + 1;
	cr_assert_eq(mgr_rjob_unpack(buf, n, &b), -EBADMSG);
}
