/* kio.c - the client's I/O on /dev/fuse: libfuse's own read and writev,
 * except that the INIT reply also asks the kernel for two flags libfuse
 * 3.14, Debian 12's, cannot ask for, and that each request read leaves
 * behind the one field of it that libfuse does not pass on.
 *
 * - FUSE_DIRECT_IO_ALLOW_MMAP: a file opened O_APPEND is direct_io
 *   (ops_file.c fc_open_direct_io: each append is reserved at mgrd,
 *   whole), and without the flag the kernel refuses a shared mmap of a
 *   direct_io descriptor with ENODEV, where ext4 allows it.  With it
 *   (protocol 7.39, Linux 6.6 and later) the kernel maps such a file
 *   through its page cache, as any other.  (FUSE_CAP_DIRECT_IO_ALLOW_MMAP
 *   came in libfuse 3.16.)
 * - FUSE_HANDLE_KILLPRIV_V2 (protocol 7.33, Linux 5.11 and later): the
 *   file system, not the kernel, clears setuid, setgid and
 *   security.capability when a file's data changes
 *   (docs/ARCHITECTURE.md "Client", "Privileges on a write").  Without it
 *   the kernel asks for security.capability with a GETXATTR before every
 *   write, one more round trip through this process each time.  The
 *   kernel tells who lacks CAP_FSETID in FUSE_WRITE_KILL_SUIDGID (WRITE)
 *   and FATTR_KILL_SUIDGID (SETATTR), which libfuse 3.14 drops: fc_kio_read
 *   keeps that bit for the handler the same thread runs next
 *   (fc_kio_kill_suidgid).  libfuse reads a request and runs its handler
 *   on one thread, without reading another in between, both on the loop
 *   (fc_loop_serve) and on its workers (-o worker_reads).
 *
 * A kernel that offers neither flag gets the reply libfuse wrote, byte
 * for byte.  The state is the INIT request's unique id and what the
 * kernel offered, written by the one read that carries INIT, before any
 * other request exists (FUSE sends nothing else until INIT is answered),
 * and what was negotiated, written with the reply.  Each reply also
 * leaves its time (fc_kio_last_reply_ns), for the loop's polling
 * (docs/ARCHITECTURE.md "Waiting without sleeping").
 */
#include "kio.h"
#include "common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

/* From the kernel's <linux/fuse.h> of protocol 7.39 (Debian 12's headers
 * stop at 7.38): bit 36 of the 64-bit init flags, i.e. bit 4 of flags2. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#define ALLOW_MMAP_FLAGS2 ((uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32))

#define INIT_OUT_FLAGS   offsetof(struct fuse_init_out, flags)
#define INIT_OUT_FLAGS2  offsetof(struct fuse_init_out, flags2)

static _Atomic uint64_t init_unique;   /* 0: INIT not seen (or done) */
static atomic_bool offers_mmap;        /* FUSE_DIRECT_IO_ALLOW_MMAP */
static atomic_bool offers_killpriv;    /* FUSE_HANDLE_KILLPRIV_V2 */
static atomic_bool killpriv_v2;        /* negotiated */
static _Atomic uint64_t last_reply_ns; /* tw_now_ns of the last reply */
/* The kill bit of the request this thread read last (see the top). */
static _Thread_local bool kill_suidgid;

/* The kill bit of a WRITE or SETATTR of n bytes, header included. */
static bool request_kills(const struct fuse_in_header *ih, ssize_t n)
{
	const size_t hdr = sizeof(*ih);

	if (ih->opcode == FUSE_WRITE &&
	    (size_t)n >= hdr + offsetof(struct fuse_write_in, write_flags) +
			 sizeof(uint32_t)) {
		const struct fuse_write_in *in = (const void *)(ih + 1);

		return (in->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
	}
	if (ih->opcode == FUSE_SETATTR &&
	    (size_t)n >= hdr + sizeof(struct fuse_setattr_in)) {
		const struct fuse_setattr_in *in = (const void *)(ih + 1);

		return (in->valid & FATTR_KILL_SUIDGID) != 0;
	}
	return false;
}

ssize_t fc_kio_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *ih = buf;

	(void)userdata;
	kill_suidgid = n >= (ssize_t)sizeof(*ih) && request_kills(ih, n);
	if (n >= (ssize_t)(sizeof(*ih) + sizeof(struct fuse_init_in)) &&
	    ih->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(ih + 1);

		atomic_store(&offers_mmap, (in->flags & FUSE_INIT_EXT) &&
					   (in->flags2 & ALLOW_MMAP_FLAGS2));
		atomic_store(&offers_killpriv,
			     (in->flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
		atomic_store(&init_unique, ih->unique);
	}
	return n;
}

/* The INIT reply, if this is it: ask for the flags the kernel offers
 * (flags2 is read by the kernel only with FUSE_INIT_EXT set in flags). */
static void patch_init_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *oh;
	uint8_t *out;
	uint32_t flags, flags2;
	uint64_t want = atomic_load(&init_unique);

	if (want == 0 || count < 2 || iov[0].iov_len < sizeof(*oh))
		return;
	oh = iov[0].iov_base;
	if (oh->unique != want)
		return;
	atomic_store(&init_unique, 0);
	if (oh->error != 0 ||
	    iov[1].iov_len < INIT_OUT_FLAGS2 + sizeof(flags2))
		return;
	out = iov[1].iov_base;
	memcpy(&flags, out + INIT_OUT_FLAGS, sizeof(flags));
	memcpy(&flags2, out + INIT_OUT_FLAGS2, sizeof(flags2));
	if (atomic_load(&offers_mmap)) {
		flags |= FUSE_INIT_EXT;
		flags2 |= ALLOW_MMAP_FLAGS2;
		tw_debug("INIT: asked the kernel for FUSE_DIRECT_IO_ALLOW_MMAP");
	}
	if (atomic_load(&offers_killpriv)) {
		flags |= FUSE_HANDLE_KILLPRIV_V2;
		atomic_store(&killpriv_v2, true);
		tw_debug("INIT: asked the kernel for FUSE_HANDLE_KILLPRIV_V2");
	}
	memcpy(out + INIT_OUT_FLAGS, &flags, sizeof(flags));
	memcpy(out + INIT_OUT_FLAGS2, &flags2, sizeof(flags2));
}

uint64_t fc_kio_last_reply_ns(void)
{
	return atomic_load_explicit(&last_reply_ns, memory_order_relaxed);
}

bool fc_kio_killpriv_v2(void)
{
	return atomic_load(&killpriv_v2);
}

bool fc_kio_kill_suidgid(void)
{
	return kill_suidgid;
}

ssize_t fc_kio_writev(int fd, struct iovec *iov, int count,
		      void *userdata)
{
	ssize_t n;

	(void)userdata;
	patch_init_reply(iov, count);
	n = writev(fd, iov, count);
	atomic_store_explicit(&last_reply_ns, tw_now_ns(), memory_order_relaxed);
	return n;
}

int fc_kio_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = fc_kio_read,
		.writev = fc_kio_writev,
	};
	int fd = fuse_session_fd(se);

	if (fd < 0)
		return -EBADF;
	/* libfuse only records io and fd here: the mount made by
	 * fuse_session_mount stays as it is. */
	return fuse_session_custom_io(se, &io, fd) == 0 ? 0 : -EINVAL;
}
