/* kio.h - the client's I/O on /dev/fuse (kio.c). */
#ifndef TWINFS_FC_KIO_H
#define TWINFS_FC_KIO_H

#include "mount.h"

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/* After fuse_session_mount, before the session loop: our own
 * read/writev on /dev/fuse, so that INIT asks the kernel to allow a shared
 * mmap of direct_io (O_APPEND) descriptors and to leave the clearing of
 * privileges on a write to us (FUSE_HANDLE_KILLPRIV_V2).  0 or -errno. */
int fc_kio_install(struct fuse_session *se);
/* Whether FUSE_HANDLE_KILLPRIV_V2 was negotiated: then this client clears
 * setuid, setgid and security.capability on writes, truncates and
 * fallocates (docs/ARCHITECTURE.md "Privileges on a write").  Any
 * thread, after INIT. */
bool fc_kio_killpriv_v2(void);
/* In a WRITE's or SETATTR's handler: whether the kernel said the caller
 * lacks CAP_FSETID (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID).  Only
 * on the thread that read the request, before it reads another. */
bool fc_kio_kill_suidgid(void);
/* tw_now_ns when the last reply was written to the kernel, 0 before. */
uint64_t fc_kio_last_reply_ns(void);
/* The read and writev fc_kio_install gives libfuse (fuse_custom_io);
 * public for test_client_kio.c. */
ssize_t fc_kio_read(int fd, void *buf, size_t len, void *userdata);
ssize_t fc_kio_writev(int fd, struct iovec *iov, int count, void *userdata);

#endif
