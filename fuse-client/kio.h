/* kio.h - the client's I/O on /dev/fuse (kio.c). */
#ifndef TWINFS_FC_KIO_H
#define TWINFS_FC_KIO_H

#include "mount.h"

/* After fuse_session_mount, before the session loop: our own
 * read/writev on /dev/fuse, so that INIT asks the kernel to allow a shared
 * mmap of direct_io (O_APPEND) descriptors.  0 or -errno. */
int fc_kio_install(struct fuse_session *se);

#endif
