/* raid.h - the whole public interface of libraid.
 *
 * RAID-0: the striping math of DESIGN.md "Data placement".  Byte o of a file
 * is in unit u = o / S, column k = u mod C, stored by group groups[k] in
 * subfile (ino, k) at offset (u / C) * S + o mod S.  Inverse: offset x of
 * column k is byte ((x / S) * C + k) * S + x mod S.
 *
 * RAID-1: the twin policy: which twin of a group is a subfile's primary (it
 * orders writes), and which twin serves a read.
 *
 * Pure functions, no I/O, no allocation; safe from any thread.
 */
#ifndef TWINFS_RAID_H
#define TWINFS_RAID_H

#include <stdbool.h>
#include <stdint.h>

#define R0_MIN_STRIPE_SIZE  (64u << 10)
#define R0_MAX_STRIPE_SIZE  (64u << 20)
#define R0_DEF_STRIPE_SIZE  (512u << 10)
#define R0_MAX_STRIPE_COUNT 32u          /* == TW_MAX_GROUPS */

struct r0_layout {
	uint32_t stripe_size;               /* S: power of two, 64 KiB..64 MiB */
	uint32_t stripe_count;              /* C: 1..R0_MAX_STRIPE_COUNT */
	uint32_t groups[R0_MAX_STRIPE_COUNT]; /* groups[k] stores column k */
};

/* One contiguous piece of a file range that lies in one stripe unit. */
struct r0_piece {
	uint32_t column;    /* k */
	uint64_t file_off;  /* offset in the file */
	uint64_t sub_off;   /* offset in subfile (ino, k) */
	uint32_t len;       /* bytes, <= stripe_size */
	uint64_t unit;      /* u = file_off / S, for read-twin selection */
};

/* 0 if valid, -EINVAL otherwise (size not a power of two or out of range,
 * count 0 or too large, a group >= n_groups, or a group listed twice). */
int r0_layout_check(const struct r0_layout *l, uint32_t n_groups);

/* Build the layout of a new file: C consecutive groups (mod n_groups)
 * starting at `first`.  count 0 means every group; count is clamped to
 * n_groups.  Returns 0 or -EINVAL. */
int r0_layout_make(struct r0_layout *l, uint32_t stripe_size, uint32_t count,
		   uint32_t first, uint32_t n_groups);

/* Forward mapping of one byte: returns the subfile offset, sets *column. */
uint64_t r0_file_to_sub(const struct r0_layout *l, uint64_t file_off,
			uint32_t *column);
/* Inverse mapping: the file offset of byte sub_off of column k. */
uint64_t r0_sub_to_file(const struct r0_layout *l, uint32_t column,
			uint64_t sub_off);

/* Split [off, off+len) into pieces, one per stripe unit, in file order.
 * Returns the number of pieces written (at most max), or -E2BIG if more
 * than max would be needed.  len 0 gives 0 pieces. */
int r0_split(const struct r0_layout *l, uint64_t off, uint64_t len,
	     struct r0_piece *out, int max);

/* How many pieces r0_split needs for [off, off+len). */
uint64_t r0_piece_count(const struct r0_layout *l, uint64_t off, uint64_t len);

/* Size subfile (ino, k) must have for a file of file_size bytes: the number
 * of file bytes below file_size that map to column k. */
uint64_t r0_subfile_size(const struct r0_layout *l, uint32_t column,
			 uint64_t file_size);

/* The smallest file size consistent with the given subfile sizes (one per
 * column, stripe_count entries): max over k of sub_to_file(k, size_k-1)+1,
 * 0 if all are empty.  Used when a writer vanished without a size report. */
uint64_t r0_file_size_from_subfiles(const struct r0_layout *l,
				    const uint64_t *sub_sizes);

/* Format "stripe_size=524288 stripe_count=2 groups=0,1" into buf; returns
 * the length or -ENOSPC. */
int r0_layout_format(const struct r0_layout *l, char *buf, unsigned buflen);
/* Parse "S C [FIRST]" or the format above with sizes allowing K/M suffixes
 * (used by setstripe via xattr twinfs.layout): on success fills stripe_size,
 * stripe_count and first (UINT32_MAX when not given). */
int r0_layout_parse_policy(const char *s, uint32_t *stripe_size,
			   uint32_t *stripe_count, uint32_t *first);

/* --- RAID-1 twin policy --- */

/* Twin index (0 or 1) of the primary of subfile (ino, column) while both
 * twins are up: (ino + column) mod 2. */
static inline int r1_primary(uint64_t ino, uint32_t column)
{
	return (int)((ino + column) % 2);
}

/* Twin index to read stripe unit `unit` of (ino, column) from while both are
 * up: units alternate between the twins (the seed's split read). */
static inline int r1_read_twin(uint64_t ino, uint32_t column, uint64_t unit)
{
	return (int)((ino + column + unit) % 2);
}

#endif
