/* ops.h - the FUSE request handlers (ops_meta.c, ops_dir.c, ops_file.c,
 * ops_data.c, ops_seek.c), which main.c's ops table names, and what they
 * give one another. */
#ifndef TWINFS_FC_OPS_H
#define TWINFS_FC_OPS_H

#include "mount.h"

void fc_init(void *userdata, struct fuse_conn_info *conn);
void fc_destroy(void *userdata);
void fc_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fc_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets);
void fc_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Worker thread (ops_meta.c): whether a write by the caller of req must
 * clear setuid or setgid of ino, as Linux's setattr_should_drop_suidgid:
 * never when the caller has CAP_FSETID (fsetid: the kernel's word,
 * fc_kio_kill_suidgid, or root where the request does not say); else
 * setuid always, setgid with group execute or when the caller is outside
 * the file's group.  *mode gets the mode to set. */
bool fc_write_kills_privs(fuse_req_t req, fuse_ino_t ino, bool fsetid,
			  uint32_t *mode);
void fc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi);
/* With FUSE_HANDLE_KILLPRIV_V2 (kio.c) a change of a file's data (write,
 * truncate, fallocate) drops its security.capability first, for any
 * caller, as Linux's file_remove_privs does; the kernel no longer does.
 * fc_may_have_cap: whether ino may have one (it is not known absent).
 * fc_kill_cap_send: the REMOVEXATTR for op, in x through mc, cb(mc, ...)
 * with arg.  fc_kill_cap_done, in cb: 0 once it is gone (absent counts),
 * else -errno; frees reply. */
bool fc_may_have_cap(struct fc_client *cl, fuse_ino_t ino);
void fc_kill_cap_send(struct fc_op *op, struct fc_mgr_call *mc,
		      Twinfs__Xattr *x, fuse_ino_t ino, fc_mgr_cb cb,
		      void *arg);
int fc_kill_cap_done(struct fc_client *cl, fuse_ino_t ino, int status,
		     struct wire_msg *reply);
void fc_readlink(fuse_req_t req, fuse_ino_t ino);
void fc_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void fc_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void fc_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fc_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name);
void fc_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);
void fc_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname);
void fc_statfs(fuse_req_t req, fuse_ino_t ino);
void fc_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void fc_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size);
void fc_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fc_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

void fc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void fc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fc_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	      off_t off, struct fuse_file_info *fi);
void fc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);
void fc_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi);
void fc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);

void fc_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fc_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void fc_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);

/* Loop thread: the map moved to a new epoch; data ops waiting for mgrd to
 * demote a failed iod look at it now (ops_data.c). */
void fc_data_map_changed(struct fc_client *cl);
/* Loop thread (ops_file.c): whether an open of ino made under `session`
 * is dead, mgrd having expired that session while we hold another one
 * (proto/FORMAT.md "Fencing"): then logs that `what` ("write",
 * "truncate") through it fails with EIO. */
bool fc_open_expired(struct fc_client *cl, uint64_t ino, uint64_t session,
		     const char *what);

#endif
