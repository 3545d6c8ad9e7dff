/* rjob.c - the byte format of a resync job record (the value of a
 * MGR_OP_RESYNC_JOB record and of each job in a version-2 snapshot; see
 * mgrd/FORMAT.md section 3, which this file implements).  What the fields
 * mean and when they change is resync.c's business; this file only packs
 * and validates them.
 *
 * Layout, little-endian, 116 bytes + the UUID (version 1: 108, without
 * unrepairable, is still read as 0 of them):
 *
 *   off size field
 *     0    1 version        2
 *     1    1 state          enum mgr_rjob_state, < MGR_RJ_MAX_
 *     2    1 flags          bit 0 full, bit 1 has_cursor, bit 2 replay
 *                           (the target may have missed writes before the
 *                           cursor: resend write-intent marks), others 0
 *     3    1 uuid_len       <= MGR_UUID_MAX
 *     4    4 source         iod id (0 = none yet)
 *     8    8 start_ms       Unix ms when the job started (0 = never)
 *    16    8 end_ms         Unix ms when it ended (0 = not ended)
 *    24    8 files_total
 *    32    8 files_done
 *    40    8 bytes_total
 *    48    8 bytes_done
 *    56    8 bytes_copied
 *    64    4 runs
 *    68    4 errors
 *    72    4 last_error     i32, negative errno or 0
 *    76    4 cursor_column
 *    80    8 cursor_ino
 *    88    8 cursor_offset  bytes of that subfile below it are copied too
 *    96    8 target_incarnation  the target's incarnation the cursor is for
 *   104    4 rate_mbps      the admin's --rate-limit (0 = none)
 *   108    8 unrepairable   blocks the runs found bad on the only readable
 *                           copy and sent marked bad
 *   116    n uuid           the target's data-directory UUID
 *
 * Validity rule: version 1 or 2, state and flags in range, uuid_len within
 * the limit, and exactly 108 (version 1) or 116 (2) + uuid_len bytes.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#define RJOB_VERSION   2u
#define RJOB_FIXED1    108u              /* version 1 */
#define RJOB_FIXED     116u
#define RJF_FULL       0x01u
#define RJF_CURSOR     0x02u
#define RJF_REPLAY     0x04u

size_t mgr_rjob_pack(const struct mgr_rjob_rec *r, uint8_t *buf)
{
	assert(r->uuid_len <= MGR_UUID_MAX && r->state < MGR_RJ_MAX_);
	buf[0] = RJOB_VERSION;
	buf[1] = r->state;
	buf[2] = (uint8_t)((r->full ? RJF_FULL : 0) |
			   (r->has_cursor ? RJF_CURSOR : 0) |
			   (r->replay ? RJF_REPLAY : 0));
	buf[3] = (uint8_t)r->uuid_len;
	tw_put_le32(buf + 4, r->source);
	tw_put_le64(buf + 8, r->start_ms);
	tw_put_le64(buf + 16, r->end_ms);
	tw_put_le64(buf + 24, r->files_total);
	tw_put_le64(buf + 32, r->files_done);
	tw_put_le64(buf + 40, r->bytes_total);
	tw_put_le64(buf + 48, r->bytes_done);
	tw_put_le64(buf + 56, r->bytes_copied);
	tw_put_le32(buf + 64, r->runs);
	tw_put_le32(buf + 68, r->errors);
	tw_put_le32(buf + 72, (uint32_t)r->last_error);
	tw_put_le32(buf + 76, r->cursor_column);
	tw_put_le64(buf + 80, r->cursor_ino);
	tw_put_le64(buf + 88, r->cursor_offset);
	tw_put_le64(buf + 96, r->target_incarnation);
	tw_put_le32(buf + 104, r->rate_mbps);
	tw_put_le64(buf + 108, r->unrepairable);
	memcpy(buf + RJOB_FIXED, r->uuid, r->uuid_len);
	return RJOB_FIXED + r->uuid_len;
}

int mgr_rjob_unpack(const void *buf, size_t len, struct mgr_rjob_rec *r)
{
	const uint8_t *p = buf;
	size_t fixed = len && p[0] == 1 ? RJOB_FIXED1 : RJOB_FIXED;

	if (len < fixed || (p[0] != RJOB_VERSION && p[0] != 1) ||
	    p[1] >= MGR_RJ_MAX_ ||
	    (p[2] & ~(RJF_FULL | RJF_CURSOR | RJF_REPLAY)) || p[3] > MGR_UUID_MAX ||
	    len != fixed + p[3])
		return -EBADMSG;
	memset(r, 0, sizeof(*r));
	r->state = p[1];
	r->full = p[2] & RJF_FULL;
	r->has_cursor = p[2] & RJF_CURSOR;
	r->replay = p[2] & RJF_REPLAY;
	r->uuid_len = p[3];
	r->source = tw_get_le32(p + 4);
	r->start_ms = tw_get_le64(p + 8);
	r->end_ms = tw_get_le64(p + 16);
	r->files_total = tw_get_le64(p + 24);
	r->files_done = tw_get_le64(p + 32);
	r->bytes_total = tw_get_le64(p + 40);
	r->bytes_done = tw_get_le64(p + 48);
	r->bytes_copied = tw_get_le64(p + 56);
	r->runs = tw_get_le32(p + 64);
	r->errors = tw_get_le32(p + 68);
	r->last_error = (int32_t)tw_get_le32(p + 72);
	r->cursor_column = tw_get_le32(p + 76);
	r->cursor_ino = tw_get_le64(p + 80);
	r->cursor_offset = tw_get_le64(p + 88);
	r->target_incarnation = tw_get_le64(p + 96);
	r->rate_mbps = tw_get_le32(p + 104);
	if (fixed == RJOB_FIXED)
		r->unrepairable = tw_get_le64(p + 108);
	memcpy(r->uuid, p + fixed, r->uuid_len);
	return 0;
}
