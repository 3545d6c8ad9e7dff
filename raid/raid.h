/* raid.h - the whole public interface of libraid.
 *
 * RAID-0: the striping math of docs/ARCHITECTURE.md "Data placement".  Byte o of a file
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

/* The largest file size the layout allows when no subfile may be larger
 * than max_sub bytes (the iods' file systems' limit, probed at their
 * start): every column then holds max_sub / S whole units and column 0 the
 * max_sub % S bytes of one more.  Capped at INT64_MAX (off_t); max_sub 0
 * means "no limit known" and gives INT64_MAX. */
uint64_t r0_max_file_size(const struct r0_layout *l, uint64_t max_sub);

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

/* Twin index to read from while both are up: consecutive units of one
 * subfile alternate between the twins (the seed's split read).  `unit` is
 * the row within the subfile (sub_off / stripe_size), not the file-wide
 * unit: with an even stripe count the file-wide units of one column all
 * have the same parity and would never alternate. */
static inline int r1_read_twin(uint64_t ino, uint32_t column, uint64_t unit)
{
	return (int)((ino + column + unit) % 2);
}

/* --- RAID-1 twin states (docs/ARCHITECTURE.md "Twins") ---
 *
 * mgrd owns each iod's state in the cluster map; every change bumps the
 * epoch.  The rules below are the whole policy: mgrd applies events with
 * r1_apply(), iods and clients route with r1_write_primary() and
 * r1_read_pick().  Values match IodState in twinfs.proto.
 *
 *            ping missed           down_after misses / failed probe
 *     up ------------------> suspect ------------------------------> down
 *      ^  <------------------   |                                     |
 *      |       ping ok          '----------- failed probe ------------'
 *      |                                                              |
 *      |   resync done                register / ping ok (rejoin)     |
 *      '------------------ resyncing <--------------------------------'
 *
 *   The admin can also send a live (up or suspect) twin whose partner is
 *   up to resyncing (R1_EV_REBUILD: twinfsctl rebuild of a live iod, the
 *   repair for a difference twinfsctl verify found).
 *
 * R1 invariant 1: a twin with needs_resync is never read and never a
 *   primary (only r1_apply(R1_EV_ACCEPT_STALE) clears it without a resync).
 * R1 invariant 2: whenever exactly one twin of a group can take writes,
 *   the other has needs_resync set: it is missing those writes.
 * R1 invariant 3: writes are acknowledged only when every writable twin
 *   (up, suspect or resyncing) holds them; resyncing twins receive live
 *   writes from the primary while their old regions are copied.
 */
enum r1_state { R1_UP = 0, R1_SUSPECT = 1, R1_DOWN = 2, R1_RESYNCING = 3 };

struct r1_twin {
	enum r1_state state;
	bool needs_resync;      /* journaled by mgrd */
};

enum r1_event {
	R1_EV_PING_OK,          /* answered a ping or probe */
	R1_EV_PING_MISSED,      /* one missed ping (now `missed` in a row) */
	R1_EV_PROBE_FAILED,     /* probe after a data-path report failed */
	R1_EV_REGISTER,         /* (re)started: a new incarnation registered */
	R1_EV_RESYNC_DONE,      /* every marked region copied */
	R1_EV_ACCEPT_STALE,     /* admin: twinfsctl rebuild --accept-stale */
	R1_EV_REBUILD,          /* admin: twinfsctl rebuild of a live twin */
};

enum r1_health { R1_HEALTHY, R1_DEGRADED, R1_FAILED };

/* Apply an event to twin `which` (0 or 1) of group t.  `missed` is the count
 * of consecutive missed pings, `down_after` the configured threshold.
 * Returns 1 when the map changed (mgrd bumps the epoch and journals), 0 when
 * not, -EINVAL for an event that is not allowed in the current state (e.g.
 * R1_EV_ACCEPT_STALE on a twin that is not stale). */
int r1_apply(struct r1_twin t[2], int which, enum r1_event ev,
	     uint32_t missed, uint32_t down_after);

/* May take writes (receives them as primary or by forwarding). */
bool r1_writable(const struct r1_twin *t);
/* May serve reads and act as primary. */
bool r1_readable(const struct r1_twin *t);

/* The twin that orders writes for (ino, column): r1_primary() while both
 * are readable, else the readable one; -EIO when neither may. */
int r1_write_primary(const struct r1_twin t[2], uint64_t ino, uint32_t column);
/* Whether the primary `p` must forward to its twin. */
bool r1_must_forward(const struct r1_twin t[2], int p);
/* The twin to read stripe unit `unit` from: alternating while both are up,
 * avoiding a suspect twin while the other is up; -EIO if neither is
 * readable. */
int r1_read_pick(const struct r1_twin t[2], uint64_t ino, uint32_t column,
		 uint64_t unit);
/* After a read from `failed` failed: the other twin if readable, else
 * -EIO. */
int r1_read_fallback(const struct r1_twin t[2], int failed);
enum r1_health r1_group_health(const struct r1_twin t[2]);
const char *r1_state_name(enum r1_state s);

#endif
