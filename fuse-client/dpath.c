/* dpath.c - the data path's decisions that need no request, loop or
 * network: how far a write or fallocate may go (the file size limit) and
 * what an application sees for an iod's error.  ops_data.c makes them on
 * live requests; test/unit/test_client_dpath.c checks them alone.
 */
#include <errno.h>
#include <stdatomic.h>

#include "dpath.h"
#include "mount.h"

uint64_t fc_file_limit(struct fc_client *cl, const struct r0_layout *l)
{
	return r0_max_file_size(l, atomic_load(&cl->max_subfile));
}

int fc_dpath_hold(bool write, bool direct, uint64_t off, size_t *size,
		  uint64_t lim)
{
	if (write) {
		if (*size == 0)
			return 0;
		if (off < lim && (*size <= lim - off || !direct)) {
			*size = (size_t)TW_MIN((uint64_t)*size, lim - off);
			return 0;
		}
		return EFBIG;
	}
	return off <= lim && *size <= lim - off ? 0 : EFBIG;
}

int fc_user_err(int status)
{
	switch (status) {
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
	case -EROFS:
	case -EINTR:
	case -EOPNOTSUPP:      /* an older iod without FALLOCATE */
		return -status;
	default:
		return EIO;
	}
}
