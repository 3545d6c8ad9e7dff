/* perm.c - the permission checks mgrd makes for the caller a request
 * names (Ctx uid, gid and supplementary groups, after root_squash): Linux's
 * generic_permission with POSIX access ACLs (posix_acl_permission), the
 * sticky bit (check_sticky), may_create/may_delete/rename, may_open, the
 * ownership rules of setattr_prepare and chown_ok/chgrp_ok, and the xattr
 * namespaces (xattr_permission, the ACL xattrs, commoncap's security.*).
 *
 * Pure: no state, no allocation; handlers.c decides when to call what
 * (proto/FORMAT.md "Permissions").  Errnos are ext4's: -EACCES when the
 * permission bits or ACL refuse, -EPERM when an ownership rule does.
 *
 * No capability crosses FUSE, so uid 0 stands for every capability
 * (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_FSETID, CAP_SYS_ADMIN,
 * CAP_MKNOD); a process with a capability but another uid is checked as
 * that uid.  What this does not cover: protected_hardlinks (the kernel of
 * the mounting host applies it), immutable and append-only flags (TwinFS
 * has none), and reads other than OPEN (GETATTR, READDIR, GETXATTR).
 */
#include "mgrd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* __FMODE_EXEC in the open flags: the kernel's open for execve and
 * uselib, which needs execute permission only, and which FUSE passes on
 * as part of the flags (fuse_send_open). */
#define OPEN_FLAG_EXEC 040u

static bool is_root(const struct mgr_cred *cr)
{
	return cr->uid == 0;
}

bool mgr_cred_in_group(const struct mgr_cred *cr, uint32_t gid)
{
	if (cr->gid == gid)
		return true;
	for (uint32_t i = 0; i < cr->n_groups; i++)
		if (cr->groups[i] == gid)
			return true;
	return false;
}

static bool owner_or_root(const struct mgr_cred *cr,
			  const struct mgr_inode *in)
{
	return is_root(cr) || cr->uid == in->uid;
}

static const struct mgr_xattr *find_xattr(const struct mgr_inode *in,
					  const char *name)
{
	for (const struct mgr_xattr *x = in->xattrs; x; x = x->next)
		if (strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

int mgr_perm_check(const struct mgr_cred *cr, const struct mgr_inode *in,
		   uint32_t want)
{
	uint32_t mode = in->mode;

	want &= MGR_MAY_READ | MGR_MAY_WRITE | MGR_MAY_EXEC;
	if (is_root(cr)) {
		/* CAP_DAC_OVERRIDE executes a file only if someone may. */
		if ((want & MGR_MAY_EXEC) && !S_ISDIR(mode) &&
		    !(mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return -EACCES;
		return 0;
	}
	if (cr->uid == in->uid)
		return (want & ~(mode >> 6) & 7) ? -EACCES : 0;
	/* The group class bits are the ACL's mask: none, no ACL entry can
	 * grant anything (acl_permission_check). */
	if (mode & S_IRWXG) {
		const struct mgr_xattr *x = find_xattr(in, MGR_ACL_ACCESS);
		int rc = x ? mgr_acl_permission(x->value, x->len, cr, in->uid,
						in->gid, want) : -EAGAIN;

		if (rc != -EAGAIN)
			return rc;
	}
	if ((want & (mode ^ (mode >> 3))) && mgr_cred_in_group(cr, in->gid))
		mode >>= 3;
	return (want & ~mode & 7) ? -EACCES : 0;
}

int mgr_perm_lookup(const struct mgr_cred *cr, const struct mgr_inode *dir)
{
	if (!S_ISDIR(dir->mode))
		return 0;   /* the namespace answers -ENOTDIR */
	return mgr_perm_check(cr, dir, MGR_MAY_EXEC);
}

int mgr_perm_create(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    uint32_t mode, uint32_t rdev)
{
	int rc;

	if (!S_ISDIR(dir->mode))
		return 0;
	rc = mgr_perm_check(cr, dir, MGR_MAY_WRITE | MGR_MAY_EXEC);
	if (rc < 0)
		return rc;
	/* CAP_MKNOD; a 0/0 character device is a whiteout, anyone's. */
	if (!is_root(cr) && (S_ISBLK(mode) || (S_ISCHR(mode) && rdev != 0)))
		return -EPERM;
	return 0;
}

uint32_t mgr_perm_create_mode(const struct mgr_cred *cr,
			      const struct mgr_inode *dir, uint32_t mode)
{
	/* mode_strip_sgid: a file made setgid-executable in a setgid
	 * directory would run with a group its maker is not in. */
	if ((mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP) ||
	    S_ISDIR(mode) || !(dir->mode & S_ISGID) || is_root(cr) ||
	    mgr_cred_in_group(cr, dir->gid))
		return mode;
	return mode & ~(uint32_t)S_ISGID;
}

int mgr_perm_sticky(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    const struct mgr_inode *victim)
{
	if (!(dir->mode & S_ISVTX) || is_root(cr) || cr->uid == victim->uid ||
	    cr->uid == dir->uid)
		return 0;
	return -EPERM;
}

int mgr_perm_delete(const struct mgr_cred *cr, const struct mgr_inode *dir,
		    const struct mgr_inode *victim)
{
	int rc = mgr_perm_check(cr, dir, MGR_MAY_WRITE | MGR_MAY_EXEC);

	return rc < 0 ? rc : mgr_perm_sticky(cr, dir, victim);
}

int mgr_perm_rename(const struct mgr_cred *cr, const struct mgr_inode *odir,
		    const struct mgr_inode *src, const struct mgr_inode *ndir,
		    const struct mgr_inode *dst, uint32_t flags)
{
	int rc = mgr_perm_delete(cr, odir, src);

	if (rc == 0)
		rc = dst ? mgr_perm_delete(cr, ndir, dst)
			 : mgr_perm_check(cr, ndir, MGR_MAY_WRITE | MGR_MAY_EXEC);
	/* A directory that changes parent has its ".." rewritten (vfs_rename);
	 * an exchange moves both ways. */
	if (rc == 0 && odir != ndir && S_ISDIR(src->mode))
		rc = mgr_perm_check(cr, src, MGR_MAY_WRITE);
	if (rc == 0 && odir != ndir && dst && S_ISDIR(dst->mode) &&
	    (flags & MGR_RENAME_EXCHANGE))
		rc = mgr_perm_check(cr, dst, MGR_MAY_WRITE);
	return rc;
}

int mgr_perm_open(const struct mgr_cred *cr, const struct mgr_inode *in,
		  uint32_t flags)
{
	uint32_t want;
	int rc;

	switch (flags & O_ACCMODE) {
	case O_RDONLY: want = MGR_MAY_READ; break;
	case O_WRONLY: want = MGR_MAY_WRITE; break;
	default: want = MGR_MAY_READ | MGR_MAY_WRITE; break;
	}
	if (flags & O_TRUNC)
		want |= MGR_MAY_WRITE;
	if (flags & OPEN_FLAG_EXEC)
		want = MGR_MAY_EXEC;
	rc = mgr_perm_check(cr, in, want);
	if (rc == 0 && (flags & O_NOATIME) && !owner_or_root(cr, in))
		rc = -EPERM;
	return rc;
}

int mgr_perm_setattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		     bool write_handle, uint32_t *valid, uint32_t *mode,
		     uint32_t uid, uint32_t gid)
{
	const uint32_t ids = MGR_SA_UID | MGR_SA_GID;
	const uint32_t privs = S_ISUID | S_ISGID;
	bool owner = owner_or_root(cr, in);
	/* ftruncate and the writes behind a kill of setuid/setgid or a
	 * write-back of times come through a descriptor opened for
	 * writing, which counts even after a chmod took the bit away. */
	bool writer = write_handle ||
		      mgr_perm_check(cr, in, MGR_MAY_WRITE) == 0;
	uint32_t v = *valid, m = *mode;
	bool explicit_times =
		((v & MGR_SA_ATIME) && !(v & MGR_SA_ATIME_NOW)) ||
		((v & MGR_SA_MTIME) && !(v & MGR_SA_MTIME_NOW));

	if ((v & MGR_SA_UID) && !is_root(cr) &&
	    (cr->uid != in->uid || uid != in->uid))
		return -EPERM;
	if ((v & MGR_SA_GID) && !is_root(cr) &&
	    (cr->uid != in->uid ||
	     (gid != in->gid && !mgr_cred_in_group(cr, gid))))
		return -EPERM;
	if (v & MGR_SA_MODE) {
		uint32_t old = in->mode & 07777, new = m & 07777;
		bool only_kills = (new & ~old) == 0 &&
				  ((old ^ new) & ~privs) == 0;

		/* Anyone who may write may drop setuid and setgid: the
		 * kernel asks for it on a write by a non-owner. */
		if (!owner && !(only_kills && writer))
			return -EPERM;
		if (owner && !is_root(cr) && !mgr_cred_in_group(cr,
		    (v & MGR_SA_GID) ? gid : in->gid))
			m &= ~(uint32_t)S_ISGID;
	}
	if ((v & MGR_SA_SIZE) && !writer)
		return -EACCES;
	/* Times given explicitly are the owner's to set; "now" anyone's who
	 * may write.  The kernel's writeback cache sends its own clock's
	 * times with a ctime (its flush of times, a utimes to now): they
	 * count as "now", the only times a SETATTR with SA_CTIME sets. */
	if (explicit_times && !(v & MGR_SA_CTIME) && !owner)
		return -EPERM;
	if ((v & (MGR_SA_ATIME | MGR_SA_MTIME | MGR_SA_CTIME)) && !owner &&
	    !writer)
		return -EACCES;
	/* chown drops setuid, and setgid with group execute (notify_change's
	 * ATTR_KILL_SUID/SGID), for every caller; a mode sent along (the
	 * kernel's) already says what it becomes. */
	if ((v & ids) && !(v & MGR_SA_MODE) && !S_ISDIR(in->mode)) {
		uint32_t kill = in->mode & S_ISUID;

		if ((in->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
			kill |= S_ISGID;
		if (kill) {
			v |= MGR_SA_MODE;
			m = in->mode & 07777 & ~kill;
		}
	}
	*valid = v;
	*mode = m;
	return 0;
}

int mgr_perm_xattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		   const char *name, bool remove, bool write_handle)
{
	if (is_root(cr))
		return 0;
	if (strncmp(name, "trusted.", 8) == 0)
		return -EPERM;
	if (strncmp(name, "security.", 9) == 0) {
		/* The kernel drops a file's capabilities on a write by anyone
		 * (security_inode_killpriv), as it drops setuid. */
		if (remove && strcmp(name, "security.capability") == 0 &&
		    (write_handle || mgr_perm_check(cr, in, MGR_MAY_WRITE) == 0))
			return 0;
		return -EPERM;
	}
	/* The ACLs (set_posix_acl) and anything else in system.* */
	if (strncmp(name, "system.", 7) == 0)
		return cr->uid == in->uid ? 0 : -EPERM;
	if (strncmp(name, "user.", 5) == 0) {
		if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
			return -EPERM;
		if (S_ISDIR(in->mode) && (in->mode & S_ISVTX) &&
		    cr->uid != in->uid)
			return -EPERM;
	}
	return mgr_perm_check(cr, in, MGR_MAY_WRITE);
}

int mgr_perm_getxattr(const struct mgr_cred *cr, const struct mgr_inode *in,
		      const char *name)
{
	/* xattr_permission(MAY_READ): what may not be read reads as absent,
	 * except user.* on a file the caller may not read. */
	if (is_root(cr))
		return 0;
	if (strncmp(name, "trusted.", 8) == 0)
		return -ENODATA;
	if (strncmp(name, "user.", 5) != 0)
		return 0;           /* security.* and system.*: anyone */
	if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
		return -ENODATA;
	return mgr_perm_check(cr, in, MGR_MAY_READ);
}

bool mgr_perm_lists_trusted(const struct mgr_cred *cr)
{
	return is_root(cr);
}
