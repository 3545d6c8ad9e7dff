/* test_client_dpath.c - the client data path's decisions alone
 * (fuse-client/dpath.c): a write is shortened at the file size limit
 * unless it is O_DIRECT, refused EFBIG when it starts at or past it; a
 * fallocate that ends past it is refused whole; errors an application may
 * see pass, the rest become EIO.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "dpath.h"

#define LIM 1000000u

Test(dpath, write_within_limit_unchanged)
{
	size_t n = 4096;

	cr_assert_eq(fc_dpath_hold(true, false, 0, &n, LIM), 0);
	cr_assert_eq(n, 4096);
	n = 40;
	cr_assert_eq(fc_dpath_hold(true, true, LIM - 40, &n, LIM), 0);
	cr_assert_eq(n, 40);
}

Test(dpath, buffered_write_crossing_is_shortened)
{
	size_t n = 100;

	cr_assert_eq(fc_dpath_hold(true, false, LIM - 10, &n, LIM), 0);
	cr_assert_eq(n, 10);
}

Test(dpath, direct_write_crossing_fails_whole)
{
	size_t n = 100;

	cr_assert_eq(fc_dpath_hold(true, true, LIM - 10, &n, LIM), EFBIG);
	cr_assert_eq(n, 100);
}

Test(dpath, write_at_or_past_limit_fails)
{
	size_t n = 1;

	cr_assert_eq(fc_dpath_hold(true, false, LIM, &n, LIM), EFBIG);
	cr_assert_eq(fc_dpath_hold(true, false, UINT64_MAX, &n, LIM), EFBIG);
	n = 0;          /* an empty write anywhere is a no-op */
	cr_assert_eq(fc_dpath_hold(true, false, UINT64_MAX, &n, LIM), 0);
}

Test(dpath, fallocate_past_limit_fails_whole)
{
	size_t n = 10;

	cr_assert_eq(fc_dpath_hold(false, false, LIM - 10, &n, LIM), 0);
	n = 11;
	cr_assert_eq(fc_dpath_hold(false, false, LIM - 10, &n, LIM), EFBIG);
	cr_assert_eq(n, 11);
	n = 0;
	cr_assert_eq(fc_dpath_hold(false, false, LIM + 1, &n, LIM), EFBIG);
}

Test(dpath, user_errors)
{
	cr_assert_eq(fc_user_err(-ENOSPC), ENOSPC);
	cr_assert_eq(fc_user_err(-EDQUOT), EDQUOT);
	cr_assert_eq(fc_user_err(-EFBIG), EFBIG);
	cr_assert_eq(fc_user_err(-EROFS), EROFS);
	cr_assert_eq(fc_user_err(-EINTR), EINTR);
	cr_assert_eq(fc_user_err(-ETIMEDOUT), EIO);
	cr_assert_eq(fc_user_err(-EKEYEXPIRED), EIO);
	cr_assert_eq(fc_user_err(-ECONNRESET), EIO);
}
