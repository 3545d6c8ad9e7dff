/* dop.h - the data op, shared by ops_data.c (read, write, fallocate,
 * fsync: the failover machinery) and ops_file.c (open, create, flush,
 * release); included only by those two.  Lifetimes are as ops_data.c's
 * opening comment says: an op owns a reference on its fc_file from its
 * first step on the loop thread until it is freed.
 */
#ifndef TWINFS_DOP_H
#define TWINFS_DOP_H

#include "cap.h"
#include "file.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "wbehind.h"

struct piece {
	struct dop *d;
	struct r0_piece p;
	struct fc_iod *iod;      /* where the current attempt went */
	int status;              /* 1 = pending/not sent, 0 = done, <0 error */
	uint32_t failed_iod;     /* write: the iod the error names (its twin
				  * or itself), 0 = not said */
	int attempts;
	uint32_t issue_sig;      /* fc_group_sig when the attempt was sent */
	struct wire_msg *reply;  /* read: the READ reply holding the data */
	uint32_t got;            /* read: bytes of it; zeros up to p.len */
	uint32_t crc;            /* write: CRC32C of the piece's data, made
				  * at its first send of the sums taken as
				  * the data entered (Write.data_crc) */
	bool has_crc;
};

struct dop {
	struct fc_op op;
	struct fc_mgr_call mc;
	struct fc_map_waiter mw;
	struct fc_cap_waiter cw; /* a cap fetch of refresh or cap_first */
	int cap_tries;           /* cap fetches before a round (cap_first) */
	struct fc_file *f;       /* holds a reference while the op runs */
	uint64_t ino;
	struct fuse_file_info fi;
	char *name;              /* create */
	uint64_t dl_ticket, dl_sent_ms;   /* create: dlease.c */
	union {
		Twinfs__Open open;
		Twinfs__Mknod mknod;
		Twinfs__Release release;
		Twinfs__Getattr getattr;
		Twinfs__AppendReserve append;
		Twinfs__Setattr setattr;     /* write: kill_privs */
		Twinfs__Xattr xattr;         /* write: kill_cap */
	} m;
	/* read / write */
	uint64_t off;
	size_t size;             /* requested; for reads the clamped length */
	uint8_t *buf;            /* write: the data (copied) */
	struct fc_wbuf *wbuf;    /* write: holds buf (sends borrow it) */
	struct fc_attr attr;     /* layout and trunc_gen used */
	struct piece *pieces;
	int npieces, pending;
	int tries;               /* attribute fetches and takeover rounds */
	int stale_tries;         /* -ESTALE rounds (trunc_gen or epoch) */
	int crc_tries;           /* write: rounds sent again after data
				  * failed Write.data_crc (at an iod, or in
				  * our buffer) */
	int refresh_pending;
	uint64_t deadline;
	/* takeover: waiting for mgrd to demote a failed iod */
	uint64_t wait_since;     /* when the wait for a new map began */
	bool map_polled;         /* the map was fetched during this op */
	fc_op_fn reissue;        /* the round to run once the map moved */
	bool is_read;
	uint64_t wait_epoch;     /* map epoch when the wait began */
	int iod_err;             /* fsync: first error from an iod */
	bool timed_out;          /* a failed piece timed out (costly retry) */
	/* fsync / flush / release */
	int err;
	bool datasync;
	/* fallocate runs as a write whose pieces are FALLOCATE messages */
	enum { DOP_WRITE = 0, DOP_ALLOC, DOP_PUNCH, DOP_ZERO } kind;
	bool keep_size;          /* DOP_ALLOC, DOP_ZERO: FALLOC_FL_KEEP_SIZE */
	bool append;             /* O_APPEND: offset reserved at mgrd */
	bool writepage;          /* write: page-cache writeback */
	bool early;              /* write: answered by the FUSE worker */
	uint64_t times_seq;      /* write: fc_times_seq when it took its place */
	int flags;               /* write: the descriptor's flags now */
	bool kill;               /* write: set mode kill_mode first */
	uint32_t kill_mode;
	bool kill_cap;           /* write: drop security.capability first */
	int wb_err;              /* flush/release/fsync: a write-behind's */
	bool any_err;            /* fsync: also when this handle never wrote */
	fc_op_fn after;          /* after_writes: the step to run then */
	/* write: later writes joined into this one's WRITE (ops_data.c),
	 * ended with it; rider_next links them */
	struct dop *riders, **riders_tail, *rider_next;
	struct fc_wb wb;         /* place in the inode's order (wbehind.c) */
};

/* fi->fh of a regular file. */
static inline struct fc_file *fc_fh_file(const struct fuse_file_info *fi)
{
	return (struct fc_file *)(uintptr_t)fi->fh;
}

/* Whether an open with these flags is direct_io (ops_file.c says why). */
unsigned fc_open_direct_io(int flags);
/* A zeroed data op for req, first step run (NULL: ENOMEM). */
struct dop *fc_dop_new(fuse_req_t req, fc_op_fn run);
/* Hand d to the loop; !d or !ok: answer ENOMEM and free what d holds. */
void fc_dop_submit(fuse_req_t req, struct dop *d, bool ok);
/* Run next(&d->op) once every earlier write of d->ino landed (also those
 * answered early, wbehind.c), with the error of a failed one that d->f
 * has not reported yet in d->wb_err (ops_file.c), if d->f wrote or
 * d->any_err is set: the close of a handle that only read does not take
 * the writer's error. */
void fc_after_writes(struct dop *d, fc_op_fn next);

#endif
