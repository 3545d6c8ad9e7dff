/* dpath.h - the data path's decisions that need no request, loop or
 * network (dpath.c). */
#ifndef TWINFS_FC_DPATH_H
#define TWINFS_FC_DPATH_H

#include "mount.h"

/* The largest size a file of layout l may reach (proto/FORMAT.md "File
 * size limit"): writes past it are shortened or refused EFBIG here,
 * before their data leaves the client.  Any thread. */
uint64_t fc_file_limit(struct fc_client *cl, const struct r0_layout *l);
/* Hold a write (write) or fallocate of [off, off + *size) to
 * the file's limit lim before anything is sent: a write that starts at or
 * past it fails EFBIG and one that crosses it is shortened (*size), as
 * the kernel does for a local file, except an O_DIRECT one (direct: the
 * kernel's asynchronous direct I/O turns a short reply into EIO, EFBIG
 * says why); a fallocate of any mode that ends past it fails EFBIG
 * (vfs_fallocate's rule).  0 or EFBIG. */
int fc_dpath_hold(bool write, bool direct, uint64_t off, size_t *size,
		  uint64_t lim);
/* What the application sees for an iod's error (a positive
 * errno): space, quota, size and read-only errors and EINTR as they are,
 * everything else EIO. */
int fc_user_err(int status);

#endif
