/* test_client_kio.c - the client's read and writev on /dev/fuse
 * (fuse-client/kio.c), driven through pipes in place of the device: the
 * INIT reply asks for exactly the flags the kernel offered, and the
 * client says it clears privileges itself (fc_kio_killpriv_v2) exactly
 * when it asked for FUSE_HANDLE_KILLPRIV_V2; each WRITE and SETATTR
 * leaves its kill bit for the handler, and any other request clears it;
 * a reply that is not INIT's goes out byte for byte.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "common.h"
#include "kio.h"

#define MMAP_FLAGS2 (1u << 4)   /* FUSE_DIRECT_IO_ALLOW_MMAP >> 32 */

static int req_pipe[2], rep_pipe[2];

static void setup(void)
{
	cr_assert_eq(pipe(req_pipe), 0);
	cr_assert_eq(pipe(rep_pipe), 0);
}

static void teardown(void)
{
	close(req_pipe[0]);
	close(req_pipe[1]);
	close(rep_pipe[0]);
	close(rep_pipe[1]);
}

TestSuite(client_kio, .init = setup, .fini = teardown);

/* The kernel sends one request of len bytes; fc_kio_read reads it. */
static void kernel_sends(const void *req, size_t len)
{
	uint8_t buf[512];

	cr_assert_eq(write(req_pipe[1], req, len), (ssize_t)len);
	cr_assert_eq(fc_kio_read(req_pipe[0], buf, sizeof(buf), NULL),
		     (ssize_t)len);
	cr_assert_eq(memcmp(buf, req, len), 0, "the request is passed on");
}

/* The kernel sends request opcode with body in (len bytes). */
static void send_op(uint32_t opcode, uint64_t unique, const void *in,
		    size_t len)
{
	uint8_t buf[256];
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + len),
				    .opcode = opcode, .unique = unique };

	cr_assert_leq(sizeof(h) + len, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), in, len);
	kernel_sends(buf, sizeof(h) + len);
}

static void send_init(uint64_t unique, uint32_t flags, uint32_t flags2)
{
	struct fuse_init_in in = { .major = 7, .minor = 38, .flags = flags,
				   .flags2 = flags2 };

	send_op(FUSE_INIT, unique, &in, sizeof(in));
}

/* libfuse answers INIT (request unique) with flags; what reaches the
 * kernel is returned in *got. */
static void reply_init(uint64_t unique, uint32_t flags,
		       struct fuse_init_out *got)
{
	struct fuse_out_header oh = { .unique = unique };
	struct fuse_init_out out = { .major = 7, .minor = 38,
				     .flags = flags };
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { &out, sizeof(out) } };
	uint8_t buf[sizeof(oh) + sizeof(out)];

	oh.len = sizeof(buf);
	cr_assert_eq(fc_kio_writev(rep_pipe[1], iov, 2, NULL),
		     (ssize_t)sizeof(buf));
	cr_assert_eq(read(rep_pipe[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	memcpy(got, buf + sizeof(oh), sizeof(*got));
}

Test(client_kio, asks_for_what_the_kernel_offers)
{
	struct fuse_init_out got;

	send_init(7, FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV_V2 | FUSE_INIT_EXT,
		  MMAP_FLAGS2);
	cr_assert(!fc_kio_killpriv_v2(), "nothing negotiated before the reply");
	reply_init(7, FUSE_ASYNC_READ, &got);
	cr_assert_eq(got.flags, FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV_V2 |
				FUSE_INIT_EXT);
	cr_assert_eq(got.flags2, MMAP_FLAGS2);
	cr_assert(fc_kio_killpriv_v2());
}

Test(client_kio, leaves_a_reply_alone_when_nothing_is_offered)
{
	struct fuse_init_out got;

	send_init(9, FUSE_ASYNC_READ | FUSE_INIT_EXT, 0);
	reply_init(9, FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS, &got);
	cr_assert_eq(got.flags, FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS);
	cr_assert_eq(got.flags2, 0);
	cr_assert(!fc_kio_killpriv_v2(),
		  "the kernel still clears privileges: the client must not "
		  "believe it does");
}

Test(client_kio, only_the_init_reply_is_patched)
{
	struct fuse_init_out got;

	send_init(11, FUSE_HANDLE_KILLPRIV_V2, 0);
	/* Another request's reply of the same shape goes out unchanged. */
	reply_init(12, 0, &got);
	cr_assert_eq(got.flags, 0);
	cr_assert(!fc_kio_killpriv_v2());
	reply_init(11, 0, &got);
	cr_assert_eq(got.flags, FUSE_HANDLE_KILLPRIV_V2);
	cr_assert(fc_kio_killpriv_v2());
}

/* The loop polls for the next request after the last reply
 * (docs/ARCHITECTURE.md "Waiting without sleeping"): every reply leaves
 * its time, whether or not it is INIT's. */
Test(client_kio, each_reply_leaves_its_time)
{
	struct fuse_init_out got;
	uint64_t t0 = tw_now_ns(), t1;

	send_init(13, 0, 0);
	reply_init(14, 0, &got);
	t1 = fc_kio_last_reply_ns();
	cr_assert(t1 >= t0 && t1 <= tw_now_ns());
	reply_init(13, 0, &got);
	cr_assert(fc_kio_last_reply_ns() >= t1);
}

Test(client_kio, an_init_that_failed_asks_for_nothing)
{
	struct fuse_out_header oh = { .len = sizeof(oh), .error = -EPROTO,
				      .unique = 5 };
	struct iovec iov[1] = { { &oh, sizeof(oh) } };
	uint8_t buf[sizeof(oh)];

	send_init(5, FUSE_HANDLE_KILLPRIV_V2, 0);
	cr_assert_eq(fc_kio_writev(rep_pipe[1], iov, 1, NULL),
		     (ssize_t)sizeof(oh));
	cr_assert_eq(read(rep_pipe[0], buf, sizeof(buf)), (ssize_t)sizeof(oh));
	cr_assert_eq(memcmp(buf, &oh, sizeof(oh)), 0);
	cr_assert(!fc_kio_killpriv_v2());
}

static void send_write(uint32_t write_flags)
{
	struct {
		struct fuse_write_in in;
		char data[4];
	} w = { .in = { .size = 4, .write_flags = write_flags },
		.data = "abc" };

	send_op(FUSE_WRITE, 20, &w, sizeof(w));
}

static void send_setattr(uint32_t valid)
{
	struct fuse_setattr_in in = { .valid = valid };

	send_op(FUSE_SETATTR, 21, &in, sizeof(in));
}

static void send_getattr(void)
{
	/* The bit FUSE_WRITE_KILL_SUIDGID has in a WRITE, where a WRITE
	 * would carry it: only a WRITE's counts. */
	struct fuse_getattr_in in = { .getattr_flags = FUSE_WRITE_KILL_SUIDGID };

	send_op(FUSE_GETATTR, 22, &in, sizeof(in));
}

Test(client_kio, each_request_leaves_its_own_kill_bit)
{
	send_write(FUSE_WRITE_KILL_SUIDGID | FUSE_WRITE_LOCKOWNER);
	cr_assert(fc_kio_kill_suidgid());
	send_write(FUSE_WRITE_LOCKOWNER);
	cr_assert(!fc_kio_kill_suidgid(), "root's write (CAP_FSETID)");
	send_setattr(FATTR_SIZE | FATTR_KILL_SUIDGID);
	cr_assert(fc_kio_kill_suidgid());
	send_getattr();
	cr_assert(!fc_kio_kill_suidgid(), "another request clears it");
	send_setattr(FATTR_SIZE);
	cr_assert(!fc_kio_kill_suidgid());
}

Test(client_kio, a_short_write_request_kills_nothing)
{
	send_write(FUSE_WRITE_KILL_SUIDGID);
	send_op(FUSE_WRITE, 30, NULL, 0);
	cr_assert(!fc_kio_kill_suidgid());
}
