/* kio.c - the client's I/O on /dev/fuse: libfuse's own read and writev,
 * except that the INIT reply also asks the kernel for
 * FUSE_DIRECT_IO_ALLOW_MMAP when the kernel offers it.
 *
 * Why: a file opened O_APPEND is direct_io (ops_file.c fc_open_direct_io:
 * each append is reserved at mgrd, whole), and without that flag the
 * kernel refuses a shared mmap of a direct_io descriptor with ENODEV,
 * where ext4 allows it.  With it (protocol 7.39, Linux 6.6 and later) the
 * kernel maps such a file through its page cache, as any other.  libfuse
 * 3.14, Debian 12's, cannot ask for it (FUSE_CAP_DIRECT_IO_ALLOW_MMAP came
 * in 3.16), so this file asks in its place; with a libfuse that can, it
 * goes away.  A kernel that does not offer the flag gets the reply
 * libfuse wrote, byte for byte.
 *
 * The only state is the INIT request's unique id and whether the kernel
 * offered the flag, written by the one read that carries INIT, before any
 * other request exists (FUSE sends nothing else until INIT is answered).
 */
#include "kio.h"

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
static atomic_bool kernel_offers;

static ssize_t kio_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *ih = buf;

	(void)userdata;
	if (n >= (ssize_t)(sizeof(*ih) + sizeof(struct fuse_init_in)) &&
	    ih->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(ih + 1);
		bool offers = (in->flags & FUSE_INIT_EXT) &&
			      (in->flags2 & ALLOW_MMAP_FLAGS2);

		atomic_store(&kernel_offers, offers);
		atomic_store(&init_unique, ih->unique);
	}
	return n;
}

/* The INIT reply, if this is it: ask for the flag (its flags2 field is
 * read by the kernel only with FUSE_INIT_EXT set in flags). */
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
	if (oh->error != 0 || !atomic_load(&kernel_offers) ||
	    iov[1].iov_len < INIT_OUT_FLAGS2 + sizeof(flags2))
		return;
	out = iov[1].iov_base;
	memcpy(&flags, out + INIT_OUT_FLAGS, sizeof(flags));
	memcpy(&flags2, out + INIT_OUT_FLAGS2, sizeof(flags2));
	flags |= FUSE_INIT_EXT;
	flags2 |= ALLOW_MMAP_FLAGS2;
	memcpy(out + INIT_OUT_FLAGS, &flags, sizeof(flags));
	memcpy(out + INIT_OUT_FLAGS2, &flags2, sizeof(flags2));
	tw_debug("INIT: asked the kernel for FUSE_DIRECT_IO_ALLOW_MMAP");
}

static ssize_t kio_writev(int fd, struct iovec *iov, int count,
			  void *userdata)
{
	(void)userdata;
	patch_init_reply(iov, count);
	return writev(fd, iov, count);
}

int fc_kio_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = kio_read,
		.writev = kio_writev,
	};
	int fd = fuse_session_fd(se);

	if (fd < 0)
		return -EBADF;
	/* libfuse only records io and fd here: the mount made by
	 * fuse_session_mount stays as it is. */
	return fuse_session_custom_io(se, &io, fd) == 0 ? 0 : -EINVAL;
}
