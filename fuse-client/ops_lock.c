/* ops_lock.c - the FUSE-facing side of cluster-wide locks that chains
 * into the data path: flush and release first release the closing owner's
 * or open file's locks at mgrd (locks.c), then run ops_file.c's handler;
 * init asks the kernel for POSIX and flock locks.
 */
#include "locks.h"
#include "ops.h"

void fc_lock_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fc_lock_close(req, ino, fi, false, fc_flush);
}

void fc_lock_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fc_lock_close(req, ino, fi, true, fc_release);
}

void fc_lock_conn_init(void *userdata, struct fuse_conn_info *conn)
{
	fc_init(userdata, conn);
	if (conn->capable & FUSE_CAP_POSIX_LOCKS)
		conn->want |= FUSE_CAP_POSIX_LOCKS;
	if (conn->capable & FUSE_CAP_FLOCK_LOCKS)
		conn->want |= FUSE_CAP_FLOCK_LOCKS;
}
