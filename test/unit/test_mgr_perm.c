/* test_mgr_perm.c - mgrd's permission checks (mgrd/perm.c) against what
 * Linux answers on ext4 for the same caller and inode: mode bits, access
 * ACLs (named users, groups, the mask, supplementary groups), root's
 * override, the sticky bit, create/delete/rename, open flags, the
 * ownership rules of setattr with the setuid/setgid bits they drop, and
 * the xattr namespaces.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mgrd_int.h"

enum { UO = 1, U = 2, GO = 4, G = 8, MASK = 16, OTH = 32 };
#define NOID 0xffffffffu

struct ent { uint16_t tag, perm; uint32_t id; };

static struct mgr_inode *inode(uint32_t mode, uint32_t uid, uint32_t gid)
{
	struct mgr_inode *in = mgr_inode_new(100, mode);

	cr_assert_not_null(in);
	in->uid = uid;
	in->gid = gid;
	return in;
}

/* Attach an access ACL (little endian, as the kernel's xattr form) and
 * set the mode's group class to its mask, as mgrd keeps it. */
static void set_acl(struct mgr_inode *in, const struct ent *e, size_t n)
{
	uint8_t buf[4 + 16 * 8];
	uint32_t v = 2, len = (uint32_t)(4 + n * sizeof(*e));

	memcpy(buf, &v, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	cr_assert_geq(mgr_acl_equiv_mode(buf, len, &in->mode), 0);
	cr_assert_eq(mgr_inode_add_xattr(in, MGR_ACL_ACCESS, buf, len), 0);
}

static struct mgr_cred user(uint32_t uid, uint32_t gid)
{
	return (struct mgr_cred){ .uid = uid, .gid = gid };
}

static const struct mgr_cred root = { 0, 0, 0, NULL };

Test(perm, mode_bits_owner_group_other)
{
	struct mgr_inode *in = inode(S_IFREG | 0640, 1000, 100);
	struct mgr_cred owner = user(1000, 1000), grp = user(2000, 100);
	struct mgr_cred other = user(3000, 3000);

	cr_expect_eq(mgr_perm_check(&owner, in, MGR_MAY_READ | MGR_MAY_WRITE), 0);
	cr_expect_eq(mgr_perm_check(&owner, in, MGR_MAY_EXEC), -EACCES);
	cr_expect_eq(mgr_perm_check(&grp, in, MGR_MAY_READ), 0);
	cr_expect_eq(mgr_perm_check(&grp, in, MGR_MAY_WRITE), -EACCES);
	cr_expect_eq(mgr_perm_check(&other, in, MGR_MAY_READ), -EACCES);
	/* The owner class decides for the owner even when others may. */
	in->mode = S_IFREG | 0077;
	cr_expect_eq(mgr_perm_check(&owner, in, MGR_MAY_READ), -EACCES);
	/* A member of the group is held to the group bits. */
	in->mode = S_IFREG | 0604;
	cr_expect_eq(mgr_perm_check(&grp, in, MGR_MAY_READ), -EACCES);
	cr_expect_eq(mgr_perm_check(&other, in, MGR_MAY_READ), 0);
	mgr_inode_free(in);
}

Test(perm, supplementary_groups)
{
	struct mgr_inode *in = inode(S_IFDIR | 0770, 0, 50);
	uint32_t groups[] = { 7, 50 };
	struct mgr_cred cr = { 1000, 1000, 2, groups };
	struct mgr_cred none = user(1000, 1000);

	cr_expect_eq(mgr_perm_check(&cr, in, MGR_MAY_WRITE | MGR_MAY_EXEC), 0);
	cr_expect_eq(mgr_perm_check(&none, in, MGR_MAY_EXEC), -EACCES);
	cr_expect(mgr_cred_in_group(&cr, 7));
	cr_expect(!mgr_cred_in_group(&cr, 8));
	mgr_inode_free(in);
}

Test(perm, root_overrides_but_executes_only_executables)
{
	struct mgr_inode *f = inode(S_IFREG | 0000, 1000, 1000);
	struct mgr_inode *d = inode(S_IFDIR | 0000, 1000, 1000);

	cr_expect_eq(mgr_perm_check(&root, f, MGR_MAY_READ | MGR_MAY_WRITE), 0);
	cr_expect_eq(mgr_perm_check(&root, f, MGR_MAY_EXEC), -EACCES);
	cr_expect_eq(mgr_perm_check(&root, d, MGR_MAY_EXEC | MGR_MAY_WRITE), 0);
	f->mode = S_IFREG | 0001;
	cr_expect_eq(mgr_perm_check(&root, f, MGR_MAY_EXEC), 0);
	mgr_inode_free(f);
	mgr_inode_free(d);
}

Test(perm, acl_named_user_group_and_mask)
{
	/* user::rw- user:2000:rwx group::r-- group:60:rw- mask::r-x other::--- */
	const struct ent acl[] = {
		{ UO, 6, NOID }, { U, 7, 2000 }, { GO, 4, NOID },
		{ G, 6, 60 }, { MASK, 5, NOID }, { OTH, 0, NOID },
	};
	struct mgr_inode *in = inode(S_IFREG | 0600, 1000, 50);
	uint32_t g60[] = { 60 }, g50[] = { 50 };
	struct mgr_cred named = user(2000, 2000);
	struct mgr_cred in60 = { 3000, 3000, 1, g60 };
	struct mgr_cred in50 = { 3000, 3000, 1, g50 };
	struct mgr_cred other = user(4000, 4000);
	struct mgr_cred owner = user(1000, 1000);

	set_acl(in, acl, sizeof(acl) / sizeof(acl[0]));
	cr_assert_eq(in->mode & 0777, 0650);   /* group class = mask */
	/* The mask limits the named user's rwx to r-x. */
	cr_expect_eq(mgr_perm_check(&named, in, MGR_MAY_READ | MGR_MAY_EXEC), 0);
	cr_expect_eq(mgr_perm_check(&named, in, MGR_MAY_WRITE), -EACCES);
	/* group:60 grants rw-, the mask only r. */
	cr_expect_eq(mgr_perm_check(&in60, in, MGR_MAY_READ), 0);
	cr_expect_eq(mgr_perm_check(&in60, in, MGR_MAY_WRITE), -EACCES);
	/* The owning group through the ACL's group:: entry. */
	cr_expect_eq(mgr_perm_check(&in50, in, MGR_MAY_READ), 0);
	cr_expect_eq(mgr_perm_check(&in50, in, MGR_MAY_EXEC), -EACCES);
	cr_expect_eq(mgr_perm_check(&other, in, MGR_MAY_READ), -EACCES);
	/* The owner goes by the mode, not the mask. */
	cr_expect_eq(mgr_perm_check(&owner, in, MGR_MAY_READ | MGR_MAY_WRITE), 0);
	mgr_inode_free(in);
}

Test(perm, acl_group_match_that_does_not_grant_denies)
{
	/* A group entry matched but not granting: other is not consulted
	 * (posix_acl_permission's "found"). */
	const struct ent acl[] = {
		{ UO, 7, NOID }, { GO, 0, NOID }, { G, 4, 70 },
		{ MASK, 7, NOID }, { OTH, 6, NOID },
	};
	struct mgr_inode *in = inode(S_IFREG | 0700, 1000, 50);
	uint32_t g[] = { 50 };
	struct mgr_cred cr = { 3000, 3000, 1, g };
	struct mgr_cred other = user(4000, 4000);

	set_acl(in, acl, sizeof(acl) / sizeof(acl[0]));
	cr_expect_eq(mgr_perm_check(&cr, in, MGR_MAY_READ), -EACCES);
	cr_expect_eq(mgr_perm_check(&other, in, MGR_MAY_READ | MGR_MAY_WRITE), 0);
	mgr_inode_free(in);
}

Test(perm, create_delete_sticky)
{
	struct mgr_inode *rootdir = inode(S_IFDIR | 0755, 0, 0);
	struct mgr_inode *tmp = inode(S_IFDIR | 01777, 0, 0);
	struct mgr_inode *theirs = inode(S_IFREG | 0644, 2000, 2000);
	struct mgr_inode *mine = inode(S_IFREG | 0644, 1000, 1000);
	struct mgr_cred me = user(1000, 1000);

	cr_expect_eq(mgr_perm_create(&me, rootdir, S_IFREG | 0644, 0), -EACCES);
	cr_expect_eq(mgr_perm_delete(&me, rootdir, mine), -EACCES);
	cr_expect_eq(mgr_perm_create(&me, tmp, S_IFREG | 0644, 0), 0);
	cr_expect_eq(mgr_perm_delete(&me, tmp, mine), 0);
	cr_expect_eq(mgr_perm_delete(&me, tmp, theirs), -EPERM);
	cr_expect_eq(mgr_perm_delete(&root, tmp, theirs), 0);
	/* The directory's owner may. */
	tmp->uid = 1000;
	cr_expect_eq(mgr_perm_delete(&me, tmp, theirs), 0);
	/* Devices need root; a whiteout (0/0) does not. */
	cr_expect_eq(mgr_perm_create(&me, tmp, S_IFBLK | 0600, 0x801), -EPERM);
	cr_expect_eq(mgr_perm_create(&me, tmp, S_IFCHR | 0600, 0x101), -EPERM);
	cr_expect_eq(mgr_perm_create(&me, tmp, S_IFCHR, 0), 0);
	cr_expect_eq(mgr_perm_create(&root, tmp, S_IFBLK | 0600, 0x801), 0);
	mgr_inode_free(rootdir);
	mgr_inode_free(tmp);
	mgr_inode_free(theirs);
	mgr_inode_free(mine);
}

Test(perm, create_mode_strips_sgid)
{
	struct mgr_inode *dir = inode(S_IFDIR | 02777, 0, 50);
	struct mgr_cred me = user(1000, 1000);
	uint32_t g[] = { 50 };
	struct mgr_cred member = { 1000, 1000, 1, g };

	cr_expect_eq(mgr_perm_create_mode(&me, dir, S_IFREG | 02755),
		     S_IFREG | 0755);
	cr_expect_eq(mgr_perm_create_mode(&me, dir, S_IFREG | 02745),
		     S_IFREG | 02745);           /* no group execute */
	cr_expect_eq(mgr_perm_create_mode(&member, dir, S_IFREG | 02755),
		     S_IFREG | 02755);
	cr_expect_eq(mgr_perm_create_mode(&me, dir, S_IFDIR | 02755),
		     S_IFDIR | 02755);
	mgr_inode_free(dir);
}

Test(perm, rename_rules)
{
	struct mgr_inode *a = inode(S_IFDIR | 0777, 0, 0);
	struct mgr_inode *b = inode(S_IFDIR | 01777, 0, 0);
	struct mgr_inode *sub = inode(S_IFDIR | 0555, 1000, 1000);
	struct mgr_inode *theirs = inode(S_IFREG | 0644, 2000, 2000);
	struct mgr_inode *mine = inode(S_IFREG | 0644, 1000, 1000);
	struct mgr_cred me = user(1000, 1000);

	cr_expect_eq(mgr_perm_rename(&me, a, mine, b, NULL, 0), 0);
	/* Replacing another's file in a sticky directory. */
	cr_expect_eq(mgr_perm_rename(&me, a, mine, b, theirs, 0), -EPERM);
	/* A directory moving elsewhere needs write on itself (its ..). */
	cr_expect_eq(mgr_perm_rename(&me, a, sub, b, NULL, 0), -EACCES);
	cr_expect_eq(mgr_perm_rename(&me, a, sub, a, NULL, 0), 0);
	mgr_inode_free(a);
	mgr_inode_free(b);
	mgr_inode_free(sub);
	mgr_inode_free(theirs);
	mgr_inode_free(mine);
}

Test(perm, open_flags)
{
	struct mgr_inode *in = inode(S_IFREG | 0644, 0, 0);
	struct mgr_inode *x = inode(S_IFREG | 0711, 0, 0);
	struct mgr_cred me = user(1000, 1000);

	cr_expect_eq(mgr_perm_open(&me, in, O_RDONLY), 0);
	cr_expect_eq(mgr_perm_open(&me, in, O_WRONLY), -EACCES);
	cr_expect_eq(mgr_perm_open(&me, in, O_RDWR), -EACCES);
	cr_expect_eq(mgr_perm_open(&me, in, O_RDONLY | O_TRUNC), -EACCES);
	cr_expect_eq(mgr_perm_open(&me, in, O_RDONLY | O_NOATIME), -EPERM);
	cr_expect_eq(mgr_perm_open(&root, in, O_RDWR | O_NOATIME), 0);
	/* execve opens with __FMODE_EXEC: execute, not read. */
	cr_expect_eq(mgr_perm_open(&me, x, O_RDONLY), -EACCES);
	cr_expect_eq(mgr_perm_open(&me, x, O_RDONLY | 040), 0);
	cr_expect_eq(mgr_perm_open(&me, in, O_RDONLY | 040), -EACCES);
	mgr_inode_free(in);
	mgr_inode_free(x);
}

Test(perm, setattr_ownership)
{
	struct mgr_inode *in = inode(S_IFREG | 0644, 1000, 1000);
	uint32_t g[] = { 60 };
	struct mgr_cred owner = { 1000, 1000, 1, g };
	struct mgr_cred other = user(2000, 2000);
	uint32_t valid, mode;

	valid = MGR_SA_UID;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 0),
		     -EPERM);
	valid = MGR_SA_UID;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 1000,
				      0), 0);
	valid = MGR_SA_UID;
	cr_expect_eq(mgr_perm_setattr(&root, in, false, &valid, &mode, 0, 0), 0);
	/* chgrp: to a group the owner is in, not another. */
	valid = MGR_SA_GID;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 60),
		     0);
	valid = MGR_SA_GID;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 61),
		     -EPERM);
	valid = MGR_SA_GID;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0,
				      2000), -EPERM);
	/* chmod: owner only. */
	valid = MGR_SA_MODE;
	mode = 04755;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0, 0),
		     -EPERM);
	valid = MGR_SA_MODE;
	mode = 0600;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 0),
		     0);
	mgr_inode_free(in);
}

Test(perm, setattr_setuid_setgid_bits)
{
	struct mgr_inode *in = inode(S_IFREG | 06775, 1000, 50);
	struct mgr_cred owner = user(1000, 1000);
	struct mgr_cred stranger = user(2000, 2000);
	uint32_t g[] = { 50 };
	struct mgr_cred member = { 2000, 2000, 1, g };
	uint32_t valid, mode;

	/* The owner outside the group: setgid dropped from its chmod. */
	valid = MGR_SA_MODE;
	mode = 02770;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 0),
		     0);
	cr_expect_eq(mode, 0770);
	/* A writer (group member, g+w) may drop setuid/setgid only. */
	valid = MGR_SA_MODE;
	mode = 0775;
	cr_expect_eq(mgr_perm_setattr(&member, in, false, &valid, &mode, 0, 0),
		     0);
	valid = MGR_SA_MODE;
	mode = 0777;
	cr_expect_eq(mgr_perm_setattr(&member, in, false, &valid, &mode, 0, 0),
		     -EPERM);
	/* Not a writer: nothing, unless it holds the file open for writing. */
	valid = MGR_SA_MODE;
	mode = 0775;
	cr_expect_eq(mgr_perm_setattr(&stranger, in, false, &valid, &mode, 0, 0),
		     -EPERM);
	valid = MGR_SA_MODE;
	mode = 0775;
	cr_expect_eq(mgr_perm_setattr(&stranger, in, true, &valid, &mode, 0, 0),
		     0);
	/* chown without a mode drops setuid, and setgid with g+x. */
	valid = MGR_SA_UID | MGR_SA_GID;
	mode = 0;
	cr_expect_eq(mgr_perm_setattr(&root, in, false, &valid, &mode, 5, 5),
		     0);
	cr_expect_eq(valid, MGR_SA_UID | MGR_SA_GID | MGR_SA_MODE);
	cr_expect_eq(mode, 0775);
	in->mode = S_IFREG | 06745;    /* setgid without group execute stays */
	valid = MGR_SA_GID;
	mode = 0;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0,
				      1000), 0);
	cr_expect_eq(mode, 02745);
	mgr_inode_free(in);
}

Test(perm, setattr_size_and_times)
{
	struct mgr_inode *in = inode(S_IFREG | 0664, 1000, 50);
	uint32_t g[] = { 50 };
	struct mgr_cred writer = { 2000, 2000, 1, g };
	struct mgr_cred other = user(3000, 3000);
	struct mgr_cred owner = user(1000, 1000);
	uint32_t valid, mode = 0;

	valid = MGR_SA_SIZE;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0, 0),
		     -EACCES);
	valid = MGR_SA_SIZE;
	cr_expect_eq(mgr_perm_setattr(&other, in, true, &valid, &mode, 0, 0),
		     0);                          /* ftruncate */
	valid = MGR_SA_SIZE;
	cr_expect_eq(mgr_perm_setattr(&writer, in, false, &valid, &mode, 0, 0),
		     0);
	/* utimes to now: owner or writer; explicit times: owner. */
	valid = MGR_SA_ATIME | MGR_SA_ATIME_NOW | MGR_SA_MTIME |
		MGR_SA_MTIME_NOW;
	cr_expect_eq(mgr_perm_setattr(&writer, in, false, &valid, &mode, 0, 0),
		     0);
	valid = MGR_SA_ATIME | MGR_SA_ATIME_NOW | MGR_SA_MTIME |
		MGR_SA_MTIME_NOW;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0, 0),
		     -EACCES);
	valid = MGR_SA_MTIME;
	cr_expect_eq(mgr_perm_setattr(&writer, in, false, &valid, &mode, 0, 0),
		     -EPERM);
	valid = MGR_SA_MTIME;
	cr_expect_eq(mgr_perm_setattr(&owner, in, false, &valid, &mode, 0, 0),
		     0);
	/* The writeback cache's flush of times (with a ctime). */
	valid = MGR_SA_MTIME | MGR_SA_CTIME;
	cr_expect_eq(mgr_perm_setattr(&writer, in, false, &valid, &mode, 0, 0),
		     0);
	valid = MGR_SA_MTIME | MGR_SA_CTIME;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0, 0),
		     -EACCES);
	/* chown(f, -1, -1): ctime only, anyone. */
	valid = 0;
	cr_expect_eq(mgr_perm_setattr(&other, in, false, &valid, &mode, 0, 0),
		     0);
	mgr_inode_free(in);
}

Test(perm, xattr_namespaces)
{
	struct mgr_inode *f = inode(S_IFREG | 0664, 1000, 50);
	struct mgr_inode *lnk = inode(S_IFLNK | 0777, 1000, 1000);
	struct mgr_inode *tmp = inode(S_IFDIR | 01777, 0, 0);
	struct mgr_cred owner = user(1000, 1000);
	uint32_t g[] = { 50 };
	struct mgr_cred writer = { 2000, 2000, 1, g };
	struct mgr_cred other = user(3000, 3000);

	cr_expect_eq(mgr_perm_xattr(&owner, f, "trusted.x", false, false), -EPERM);
	cr_expect_eq(mgr_perm_xattr(&root, f, "trusted.x", false, false), 0);
	cr_expect_eq(mgr_perm_xattr(&owner, f, "security.capability", false,
				    false), -EPERM);
	cr_expect_eq(mgr_perm_xattr(&writer, f, "security.capability", true,
				    false), 0);
	cr_expect_eq(mgr_perm_xattr(&other, f, "security.capability", true,
				    false), -EPERM);
	cr_expect_eq(mgr_perm_xattr(&owner, f, MGR_ACL_ACCESS, false, false), 0);
	cr_expect_eq(mgr_perm_xattr(&writer, f, MGR_ACL_ACCESS, false, false),
		     -EPERM);
	cr_expect_eq(mgr_perm_xattr(&writer, f, "user.x", false, false), 0);
	cr_expect_eq(mgr_perm_xattr(&other, f, "user.x", true, false), -EACCES);
	cr_expect_eq(mgr_perm_xattr(&owner, lnk, "user.x", false, false), -EPERM);
	cr_expect_eq(mgr_perm_xattr(&owner, tmp, "user.x", false, false), -EPERM);
	mgr_inode_free(f);
	mgr_inode_free(lnk);
	mgr_inode_free(tmp);
}

/* Reading xattrs (xattr_permission with MAY_READ). */
Test(perm, getxattr)
{
	struct mgr_inode *f = inode(S_IFREG | 0640, 1000, 50);
	struct mgr_inode *lnk = inode(S_IFLNK | 0777, 1000, 1000);
	struct mgr_cred owner = user(1000, 1000);
	uint32_t g[] = { 50 };
	struct mgr_cred reader = { 2000, 2000, 1, g };
	struct mgr_cred other = user(3000, 3000);

	cr_expect_eq(mgr_perm_getxattr(&owner, f, "user.x"), 0);
	cr_expect_eq(mgr_perm_getxattr(&reader, f, "user.x"), 0);
	cr_expect_eq(mgr_perm_getxattr(&other, f, "user.x"), -EACCES);
	cr_expect_eq(mgr_perm_getxattr(&owner, lnk, "user.x"), -ENODATA);
	cr_expect_eq(mgr_perm_getxattr(&owner, f, "trusted.x"), -ENODATA);
	cr_expect_eq(mgr_perm_getxattr(&root, f, "trusted.x"), 0);
	cr_expect_eq(mgr_perm_getxattr(&other, f, "security.selinux"), 0);
	cr_expect_eq(mgr_perm_getxattr(&other, f, MGR_ACL_ACCESS), 0);
	cr_expect(!mgr_perm_lists_trusted(&owner));
	cr_expect(mgr_perm_lists_trusted(&root));
	mgr_inode_free(f);
	mgr_inode_free(lnk);
}
