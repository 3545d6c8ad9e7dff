/* cases_perm.c - POSIX conformance cases for permissions: chmod, chown (as
 * root and as uid 65534), suid/sgid clearing on write, setgid directories,
 * POSIX ACLs (through their xattrs).
 *
 * The rules every case follows are at the top of pt.h; the helpers are in
 * pt_util.c.
 */
#include "pt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ==================================================================== chmod */

static void chmod_file_0644(void)
{
	pt_mkfile("f", 0600, NULL, 0);
	pt_rc(NULL, chmod("f", 0644));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_file_0000(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, chmod("f", 0));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_file_07777(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, chmod("f", 07777));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_dir_01777(void)
{
	mkdir("d", 0755);
	pt_rc(NULL, chmod("d", 01777));
	pt_res("mode=0%03lo", pt_mode("d"));
}

static void chmod_fifo(void)
{
	mkfifo("p", 0644);
	pt_rc(NULL, chmod("p", 0600));
	pt_res("mode=0%03lo", pt_mode("p"));
}

static void chmod_enoent(void)
{
	pt_rc(NULL, chmod("missing", 0644));
}

static void chmod_enotdir(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, chmod("f/x", 0644));
}

static void chmod_ctime(void)
{
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, chmod("f", 0600));
	b = pt_stat("f");
	pt_res("ctime_changed=%d mtime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0,
	       pt_tscmp(a.st_mtim, b.st_mtim) != 0);
}

static void chmod_follows_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, chmod("l", 0600));
	pt_res("target=0%03lo link=0%03lo", pt_mode("f"), pt_mode("l"));
}

static void chmod_nofollow_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, fchmodat(AT_FDCWD, "l", 0600, AT_SYMLINK_NOFOLLOW));
	pt_res("target=0%03lo link=0%03lo", pt_mode("f"), pt_mode("l"));
}

static void chmod_fchmod(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc(NULL, fchmod(fd, 0640));
	close(fd);
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_fchmod_opath(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_PATH);
	pt_rc(NULL, fchmod(fd, 0600));
	close(fd);
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void nb_chmod_0600(void *arg)
{
	pt_rc(NULL, chmod(arg, 0600));
}

static void chmod_nobody_not_owner(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	pt_as_nobody(nb_chmod_0600, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_nobody_owner(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_chmod_0600, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void nb_chmod_02755(void *arg)
{
	pt_rc(NULL, chmod(arg, 02755));
}

static void chmod_nobody_sgid_foreign_group(void)
{
	/* Owner, but not a member of the file's group: S_ISGID is dropped
	 * silently (POSIX allows, Linux does). */
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, 0);
	pt_as_nobody(nb_chmod_02755, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chmod_nobody_sgid_own_group(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_chmod_02755, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void nb_chmod_01644(void *arg)
{
	pt_rc(NULL, chmod(arg, 01644));
}

static void chmod_nobody_sticky_file(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_chmod_01644, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

/* ==================================================================== chown */

static void chown_root_file(void)
{
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, chown("f", PT_NOBODY, PT_NOBODY));
	st = pt_stat("f");
	pt_res("uid=%u gid=%u", st.st_uid, st.st_gid);
}

static void chown_root_uid_only(void)
{
	struct stat st;

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, chown("f", PT_NOBODY, (gid_t)-1));
	st = pt_stat("f");
	pt_res("uid=%u gid=%u", st.st_uid, st.st_gid);
}

static void chown_noop_ctime(void)
{
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, chown("f", (uid_t)-1, (gid_t)-1));
	b = pt_stat("f");
	pt_res("ctime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0);
}

static void chown_ctime(void)
{
	struct stat a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = pt_stat("f");
	pt_pause();
	pt_rc(NULL, chown("f", PT_NOBODY, PT_NOBODY));
	b = pt_stat("f");
	pt_res("ctime_changed=%d mtime_changed=%d", pt_tscmp(a.st_ctim, b.st_ctim) < 0,
	       pt_tscmp(a.st_mtim, b.st_mtim) != 0);
}

static void chown_root_clears_suid(void)
{
	pt_mkfile("f", 06755, NULL, 0);
	pt_rc(NULL, chown("f", PT_NOBODY, PT_NOBODY));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chown_root_sgid_no_gexec(void)
{
	pt_mkfile("f", 06744, NULL, 0);
	pt_rc(NULL, chown("f", PT_NOBODY, PT_NOBODY));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chown_root_dir_keeps_bits(void)
{
	mkdir("d", 0755);
	chmod("d", 07755);
	pt_rc(NULL, chown("d", PT_NOBODY, PT_NOBODY));
	pt_res("mode=0%03lo", pt_mode("d"));
}

static void chown_follows_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, chown("l", PT_NOBODY, PT_NOBODY));
	pt_res("target_uid=%u link_uid=%u", pt_stat("f").st_uid, pt_stat("l").st_uid);
}

static void chown_lchown_symlink(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	symlink("f", "l");
	pt_rc(NULL, lchown("l", PT_NOBODY, PT_NOBODY));
	pt_res("target_uid=%u link_uid=%u link_gid=%u", pt_stat("f").st_uid,
	       pt_stat("l").st_uid, pt_stat("l").st_gid);
}

static void chown_fchown(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc(NULL, fchown(fd, PT_NOBODY, 0));
	close(fd);
	pt_res("uid=%u gid=%u", pt_stat("f").st_uid, pt_stat("f").st_gid);
}

static void chown_enoent(void)
{
	pt_rc(NULL, chown("missing", PT_NOBODY, PT_NOBODY));
}

static void nb_chown_to_root(void *arg)
{
	pt_rc(NULL, chown(arg, 0, (gid_t)-1));
}

static void chown_nobody_give_away(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	pt_as_nobody(nb_chown_to_root, "f");
	pt_res("uid=%u", pt_stat("f").st_uid);
}

static void nb_chown_take(void *arg)
{
	pt_rc(NULL, chown(arg, PT_NOBODY, PT_NOBODY));
}

static void chown_nobody_take_foreign(void)
{
	pt_mkfile("f", 0666, NULL, 0);
	pt_as_nobody(nb_chown_take, "f");
	pt_res("uid=%u", pt_stat("f").st_uid);
}

static void nb_chown_same(void *arg)
{
	pt_rc("same", chown(arg, PT_NOBODY, (gid_t)-1));
	pt_rc("minus1", chown(arg, (uid_t)-1, (gid_t)-1));
}

static void chown_nobody_noop(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, 0);
	pt_as_nobody(nb_chown_same, "f");
}

static void nb_chown_group(void *arg)
{
	pt_rc("own_group", chown(arg, (uid_t)-1, PT_NOBODY));
	pt_rc("group0", chown(arg, (uid_t)-1, 0));
}

static void chown_nobody_group(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, 0);
	pt_as_nobody(nb_chown_group, "f");
	pt_res("gid=%u", pt_stat("f").st_gid);
}

static void nb_chgrp_own(void *arg)
{
	pt_rc(NULL, chown(arg, (uid_t)-1, PT_NOBODY));
}

static void chown_nobody_clears_suid(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	chmod("f", 06755);
	pt_as_nobody(nb_chgrp_own, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void chown_nobody_dir_keeps_sgid(void)
{
	mkdir("d", 0755);
	chown("d", PT_NOBODY, PT_NOBODY);
	chmod("d", 02755);
	pt_as_nobody(nb_chgrp_own, "d");
	pt_res("mode=0%03lo", pt_mode("d"));
}

/* ============================================= suid/sgid cleared on write */

static void nb_write_one(void *arg)
{
	int fd = open(arg, O_WRONLY);

	pt_rc("open", fd);
	pt_res("write=%zd", write(fd, "x", 1));
	close(fd);
}

static void write_kill_suid(void)
{
	pt_mkfile("f", 04777, NULL, 0);
	pt_as_nobody(nb_write_one, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void write_kill_sgid(void)
{
	pt_mkfile("f", 02777, NULL, 0);
	pt_as_nobody(nb_write_one, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void write_sgid_no_gexec(void)
{
	pt_mkfile("f", 02767, NULL, 0);
	pt_as_nobody(nb_write_one, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void write_owner_kills_suid(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, PT_NOBODY);
	chmod("f", 06755);
	pt_as_nobody(nb_write_one, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void write_root_keeps_suid(void)
{
	int fd;

	pt_mkfile("f", 06777, NULL, 0);
	fd = open("f", O_WRONLY);
	pt_res("write=%zd", write(fd, "x", 1));
	close(fd);
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void nb_mmap_write(void *arg)
{
	int fd = open(arg, O_RDWR);
	char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (map == MAP_FAILED) {
		pt_rc("mmap", -1);
	} else {
		map[0] = 'm';
		msync(map, 4096, MS_SYNC);
		munmap(map, 4096);
		pt_res("mmap_write=ok");
	}
	close(fd);
}

static void write_mmap_suid(void)
{
	pt_mkfile("f", 04777, "data", 4);
	pt_as_nobody(nb_mmap_write, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

/* A v2 file capability (cap_net_raw=ep) on f, made with mode and data;
 * then change(arg "f") as uid 65534 (or as root, nobody false); then
 * whether the capability is still there and the mode. */
static void cap_after(mode_t mode, const char *data, void (*change)(void *),
		      bool nobody, const char *what)
{
	static const uint32_t cap[5] = { 0x02000001, 1u << 13, 0, 0, 0 };
	char buf[64];

	pt_mkfile("f", mode, data, data ? strlen(data) : 0);
	pt_rc("set", setxattr("f", "security.capability", cap, sizeof(cap), 0));
	if (nobody)
		pt_as_nobody(change, "f");
	else
		change("f");
	pt_rc(what, getxattr("f", "security.capability", buf, sizeof(buf)));
	pt_res("mode=0%03lo", pt_mode("f"));
}

static void write_security_capability_cleared(void)
{
	/* Cleared by a write from an unprivileged user, like setuid. */
	cap_after(0777, NULL, nb_write_one, true, "get_after_write");
}

static void nb_truncate_one(void *arg)
{
	pt_rc("truncate", truncate(arg, 1));
}

static void truncate_clears_capability(void)
{
	cap_after(0777, "data", nb_truncate_one, true, "get_after_truncate");
}

static void chown_to_nobody(void *arg)
{
	pt_rc("chown", chown(arg, PT_NOBODY, PT_NOBODY));
}

static void chown_clears_capability(void)
{
	cap_after(0755, NULL, chown_to_nobody, false, "get_after_chown");
}

static void nb_fallocate(void *arg)
{
	int fd = open(arg, O_WRONLY);

	pt_rc("open", fd);
	pt_rc("fallocate", fallocate(fd, 0, 0, 8192));
	close(fd);
}

static void fallocate_kills_suid_and_capability(void)
{
	/* fallocate changes the data as a write does (file_modified). */
	cap_after(06777, "data", nb_fallocate, true, "get_after_fallocate");
}

static void fallocate_root_keeps_suid(void)
{
	int fd;

	pt_mkfile("f", 04777, "data", 4);
	fd = open("f", O_WRONLY);
	pt_rc("fallocate", fallocate(fd, 0, 0, 8192));
	close(fd);
	pt_res("mode=0%03lo", pt_mode("f"));
}

/* =================================================================== setgid */

static void mk_sgid_dir(const char *path, gid_t gid)
{
	mkdir(path, 0755);
	chown(path, 0, gid);
	chmod(path, 02777);
}

static void setgid_file_inherits(void)
{
	int fd;

	mk_sgid_dir("d", PT_NOBODY);
	fd = open("d/f", O_WRONLY | O_CREAT, 0644);
	close(fd);
	pt_res("gid=%u mode=0%03lo", pt_stat("d/f").st_gid, pt_mode("d/f"));
}

static void setgid_subdir_inherits(void)
{
	mk_sgid_dir("d", PT_NOBODY);
	pt_rc(NULL, mkdir("d/s", 0755));
	pt_res("gid=%u mode=0%03lo", pt_stat("d/s").st_gid, pt_mode("d/s"));
}

static void setgid_special_inherit(void)
{
	mk_sgid_dir("d", PT_NOBODY);
	mkfifo("d/p", 0644);
	symlink("x", "d/l");
	mknod("d/s", S_IFSOCK | 0644, 0);
	pt_res("fifo_gid=%u symlink_gid=%u sock_gid=%u", pt_stat("d/p").st_gid,
	       pt_stat("d/l").st_gid, pt_stat("d/s").st_gid);
}

static void setgid_plain_dir(void)
{
	int fd;

	mkdir("d", 0755);
	chown("d", 0, PT_NOBODY);
	fd = open("d/f", O_WRONLY | O_CREAT, 0644);
	close(fd);
	pt_res("gid=%u", pt_stat("d/f").st_gid);
}

static void nb_create_sgid_file(void *arg)
{
	int fd = open(arg, O_WRONLY | O_CREAT, 02755);

	pt_rc(NULL, fd);
	close(fd);
}

static void setgid_nobody_foreign_group(void)
{
	/* The new file gets the directory's group, which nobody is not a
	 * member of: S_ISGID requested by the creator is dropped. */
	mk_sgid_dir("d", 0);
	pt_as_nobody(nb_create_sgid_file, "d/f");
	pt_res("uid=%u gid=%u mode=0%03lo", pt_stat("d/f").st_uid, pt_stat("d/f").st_gid,
	       pt_mode("d/f"));
}

static void nb_mkdir_any(void *arg)
{
	pt_rc(NULL, mkdir(arg, 0755));
}

static void setgid_nobody_mkdir(void)
{
	mk_sgid_dir("d", 0);
	pt_as_nobody(nb_mkdir_any, "d/s");
	pt_res("gid=%u mode=0%03lo", pt_stat("d/s").st_gid, pt_mode("d/s"));
}

static void setgid_nobody_plain_dir(void)
{
	pt_mkdir_mode("d", 0777);
	pt_as_nobody(nb_create_sgid_file, "d/f");
	pt_res("gid=%u mode=0%03lo", pt_stat("d/f").st_gid, pt_mode("d/f"));
}

static void setgid_rename_keeps_group(void)
{
	pt_mkfile("f", 0644, NULL, 0);
	mk_sgid_dir("d", PT_NOBODY);
	pt_rc(NULL, rename("f", "d/f"));
	pt_res("gid=%u", pt_stat("d/f").st_gid);
}

/* ===================================================================== acl */

/* The POSIX ACL xattr format (linux/posix_acl_xattr.h): a le32 version 2,
 * then entries of le16 tag, le16 perm, le32 id. */
struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

enum { ACL_USER_OBJ = 1, ACL_USER = 2, ACL_GROUP_OBJ = 4, ACL_GROUP = 8, ACL_MASK = 16,
       ACL_OTHER = 32 };

static size_t acl_blob(char *buf, const struct acl_entry *e, size_t count)
{
	uint32_t version = 2;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, count * sizeof(*e));
	return 4 + count * sizeof(*e);
}

static const struct acl_entry acl_named_user[] = {
	{ ACL_USER_OBJ, 6, UINT32_MAX }, { ACL_USER, 4, PT_NOBODY },
	{ ACL_GROUP_OBJ, 4, UINT32_MAX }, { ACL_MASK, 6, UINT32_MAX },
	{ ACL_OTHER, 0, UINT32_MAX },
};

static void acl_access_set(void)
{
	char buf[128];
	size_t len = acl_blob(buf, acl_named_user, 5);

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("set", setxattr("f", "system.posix_acl_access", buf, len, 0));
	pt_res("mode=0%03lo get=%zd", pt_mode("f"),
	       getxattr("f", "system.posix_acl_access", buf, sizeof(buf)));
}

static void acl_access_minimal(void)
{
	static const struct acl_entry minimal[] = {
		{ ACL_USER_OBJ, 7, UINT32_MAX }, { ACL_GROUP_OBJ, 5, UINT32_MAX },
		{ ACL_OTHER, 0, UINT32_MAX },
	};
	char buf[128];
	size_t len = acl_blob(buf, minimal, 3);

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc("set", setxattr("f", "system.posix_acl_access", buf, len, 0));
	pt_res("mode=0%03lo", pt_mode("f"));
	pt_rc("get", getxattr("f", "system.posix_acl_access", buf, sizeof(buf)));
}

static void acl_invalid(void)
{
	static const struct acl_entry no_other[] = {
		{ ACL_USER_OBJ, 7, UINT32_MAX }, { ACL_GROUP_OBJ, 5, UINT32_MAX },
	};
	char buf[128];
	size_t len = acl_blob(buf, no_other, 2);

	pt_mkfile("f", 0644, NULL, 0);
	pt_rc(NULL, setxattr("f", "system.posix_acl_access", buf, len, 0));
}

static void nb_read(void *arg)
{
	pt_rc(NULL, open(arg, O_RDONLY));
}

static void acl_grants_nobody(void)
{
	char buf[128];
	size_t len = acl_blob(buf, acl_named_user, 5);

	pt_mkfile("f", 0600, NULL, 0);
	pt_as_nobody(nb_read, "f");
	pt_rc("set", setxattr("f", "system.posix_acl_access", buf, len, 0));
	pt_as_nobody(nb_read, "f");
}

static void acl_default_inherit(void)
{
	static const struct acl_entry def[] = {
		{ ACL_USER_OBJ, 7, UINT32_MAX }, { ACL_USER, 7, PT_NOBODY },
		{ ACL_GROUP_OBJ, 5, UINT32_MAX }, { ACL_MASK, 7, UINT32_MAX },
		{ ACL_OTHER, 0, UINT32_MAX },
	};
	char buf[128];
	size_t len = acl_blob(buf, def, 5);
	int fd;

	mkdir("d", 0755);
	pt_rc("set_default", setxattr("d", "system.posix_acl_default", buf, len, 0));
	/* With a default ACL the umask does not apply. */
	umask(077);
	fd = open("d/f", O_WRONLY | O_CREAT, 0666);
	close(fd);
	mkdir("d/s", 0777);
	pt_res("file_mode=0%03lo file_acl=%zd", pt_mode("d/f"),
	       getxattr("d/f", "system.posix_acl_access", buf, sizeof(buf)));
	pt_res("dir_mode=0%03lo dir_acl=%zd dir_default=%zd", pt_mode("d/s"),
	       getxattr("d/s", "system.posix_acl_access", buf, sizeof(buf)),
	       getxattr("d/s", "system.posix_acl_default", buf, sizeof(buf)));
}

static void acl_chmod_updates_mask(void)
{
	char buf[128];
	size_t len = acl_blob(buf, acl_named_user, 5);
	struct acl_entry e[5];
	ssize_t n;

	pt_mkfile("f", 0644, NULL, 0);
	setxattr("f", "system.posix_acl_access", buf, len, 0);
	pt_rc("chmod", chmod("f", 0640));
	n = getxattr("f", "system.posix_acl_access", buf, sizeof(buf));
	pt_res("get=%zd", n);
	if (n == 44) {
		memcpy(e, buf + 4, sizeof(e));
		pt_res("mask_perm=%u", e[3].tag == ACL_MASK ? e[3].perm : 99);
	}
}

static void nb_set_acl(void *arg)
{
	char buf[128];
	size_t len = acl_blob(buf, acl_named_user, 5);

	pt_rc("set", setxattr(arg, "system.posix_acl_access", buf, len, 0));
}

static void acl_set_kills_sgid(void)
{
	/* The owner, outside the file's group, sets an ACL: setgid goes
	 * (posix_acl_update_mode), as it would with chmod. */
	pt_mkfile("f", 0644, NULL, 0);
	chown("f", PT_NOBODY, 0);
	chmod("f", 02755);
	pt_as_nobody(nb_set_acl, "f");
	pt_res("mode=0%03lo", pt_mode("f"));
}

const struct pt_case pt_cases_perm[] = {
	{ "chmod/file_0644", chmod_file_0644 },
	{ "chmod/file_0000", chmod_file_0000 },
	{ "chmod/file_07777", chmod_file_07777 },
	{ "chmod/dir_01777", chmod_dir_01777 },
	{ "chmod/fifo", chmod_fifo },
	{ "chmod/enoent", chmod_enoent },
	{ "chmod/enotdir", chmod_enotdir },
	{ "chmod/ctime", chmod_ctime },
	{ "chmod/follows_symlink", chmod_follows_symlink },
	{ "chmod/nofollow_symlink", chmod_nofollow_symlink },
	{ "chmod/fchmod", chmod_fchmod },
	{ "chmod/fchmod_opath", chmod_fchmod_opath },
	{ "chmod/nobody_not_owner", chmod_nobody_not_owner },
	{ "chmod/nobody_owner", chmod_nobody_owner },
	{ "chmod/nobody_sgid_foreign_group", chmod_nobody_sgid_foreign_group },
	{ "chmod/nobody_sgid_own_group", chmod_nobody_sgid_own_group },
	{ "chmod/nobody_sticky_file", chmod_nobody_sticky_file },

	{ "chown/root_file", chown_root_file },
	{ "chown/root_uid_only", chown_root_uid_only },
	{ "chown/noop_ctime", chown_noop_ctime },
	{ "chown/ctime", chown_ctime },
	{ "chown/root_clears_suid", chown_root_clears_suid },
	{ "chown/root_sgid_no_gexec", chown_root_sgid_no_gexec },
	{ "chown/root_dir_keeps_bits", chown_root_dir_keeps_bits },
	{ "chown/follows_symlink", chown_follows_symlink },
	{ "chown/lchown_symlink", chown_lchown_symlink },
	{ "chown/fchown", chown_fchown },
	{ "chown/enoent", chown_enoent },
	{ "chown/nobody_give_away", chown_nobody_give_away },
	{ "chown/nobody_take_foreign", chown_nobody_take_foreign },
	{ "chown/nobody_noop", chown_nobody_noop },
	{ "chown/nobody_group", chown_nobody_group },
	{ "chown/nobody_clears_suid", chown_nobody_clears_suid },
	{ "chown/nobody_dir_keeps_sgid", chown_nobody_dir_keeps_sgid },

	{ "write/kill_suid", write_kill_suid },
	{ "write/kill_sgid", write_kill_sgid },
	{ "write/sgid_no_gexec", write_sgid_no_gexec },
	{ "write/owner_kills_suid", write_owner_kills_suid },
	{ "write/root_keeps_suid", write_root_keeps_suid },
	{ "write/mmap_suid", write_mmap_suid },
	{ "write/security_capability_cleared", write_security_capability_cleared },
	{ "write/truncate_clears_capability", truncate_clears_capability },
	{ "write/chown_clears_capability", chown_clears_capability },
	{ "write/fallocate_kills_suid_and_capability",
	  fallocate_kills_suid_and_capability },
	{ "write/fallocate_root_keeps_suid", fallocate_root_keeps_suid },

	{ "setgid/file_inherits", setgid_file_inherits },
	{ "setgid/subdir_inherits", setgid_subdir_inherits },
	{ "setgid/special_inherit", setgid_special_inherit },
	{ "setgid/plain_dir", setgid_plain_dir },
	{ "setgid/nobody_foreign_group", setgid_nobody_foreign_group },
	{ "setgid/nobody_mkdir", setgid_nobody_mkdir },
	{ "setgid/nobody_plain_dir", setgid_nobody_plain_dir },
	{ "setgid/rename_keeps_group", setgid_rename_keeps_group },

	{ "acl/access_set", acl_access_set },
	{ "acl/access_minimal", acl_access_minimal },
	{ "acl/invalid", acl_invalid },
	{ "acl/grants_nobody", acl_grants_nobody },
	{ "acl/default_inherit", acl_default_inherit },
	{ "acl/chmod_updates_mask", acl_chmod_updates_mask },
	{ "acl/set_kills_sgid", acl_set_kills_sgid },
	{ NULL, NULL },
};
