/* locks.h - cluster-wide locks (locks.c, and ops_lock.c's handlers). */
#ifndef TWINFS_FC_LOCKS_H
#define TWINFS_FC_LOCKS_H

#include "mount.h"

/* locks.c: cluster-wide locks (proto/FORMAT.md "Locks"). */
void fc_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock);
void fc_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock, int sleep);
void fc_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op);
/* flush (release false) / release: release the locks of the closing owner
 * / open file at mgrd first when this mount ever locked, then hand the
 * request to `next` (on the loop thread, or at once). */
typedef void (*fc_close_fn)(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi);
void fc_lock_close(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   bool release, fc_close_fn next);
/* ops_lock.c: the ops table's flush, release and init. */
void fc_lock_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fc_lock_release(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
/* init: fc_init, then ask for POSIX and flock locks. */
void fc_lock_conn_init(void *userdata, struct fuse_conn_info *conn);
/* Loop thread: cancel at mgrd the parked requests of interrupted ops. */
void fc_lock_interrupts(struct fc_client *cl);
/* Loop thread: mgrd restarted (new incarnation): re-claim held locks. */
void fc_lock_reclaim(struct fc_client *cl);
/* After the loop has stopped. */
void fc_locks_free(struct fc_client *cl);

#endif
