/* wbehind.h - write-behind and the per-inode order of data operations
 * (wbehind.c). */
#ifndef TWINFS_FC_WBEHIND_H
#define TWINFS_FC_WBEHIND_H

#include "loop.h"
#include "mount.h"

#define FC_WB_MAX_BYTES        (32u << 20)  /* write-behind: bytes answered */
#define FC_WB_MAX_OPS          256          /* ... and writes, not landed */

/* An operation's place in the per-inode order of data operations
 * (wbehind.c); embedded in the op.  [loop] */
struct fc_wb {
	uint64_t ino;              /* 0: every inode */
	uint64_t off, end;         /* bytes [off, end); end UINT64_MAX: all */
	struct fc_op *op;          /* resumed with fn(op) when it waited */
	fc_op_fn fn;
	bool hold_range;           /* a write: holds the range until released */
	bool held;                 /* on cl->wb_held */
	bool waiting;              /* on the wait FIFO */
	bool behind;               /* answered before it landed */
	bool parked;               /* on cl->wb_parked: held, not sent */
	size_t bytes;              /* counted in cl->wb_bytes while behind */
	struct fc_wb *prev, *next; /* wb_held (doubly) or the FIFO (next) */
	struct fc_wb *ready_next;  /* wake()'s local list */
	struct fc_wb *park_prev, *park_next;  /* cl->wb_parked (doubly) */
	fc_op_fn send;             /* parked: sends the op (fc_wb_kick) */
};

/* Run next(op) once no earlier data operation of ino (0: of any inode)
 * overlaps [off, end) (UINT64_MAX: the whole file).  Returns true when
 * that is so now: the caller goes on and next is not called.  Otherwise
 * the op waits in order and next(op) runs later, from a fc_wb_release.
 * hold_range (writes, fallocate): from then on the op holds the range
 * until fc_wb_release(w). */
bool fc_wb_enter(struct fc_client *cl, struct fc_wb *w, struct fc_op *op,
		 uint64_t ino, uint64_t off, uint64_t end, bool hold_range,
		 fc_op_fn next);
/* A write holding w may be answered before it lands (within the caps):
 * true, and it counts as write-behind until released. */
bool fc_wb_detach(struct fc_client *cl, struct fc_wb *w, size_t bytes);
/* Any thread: take one early answer of `bytes` from the caps (false: over
 * them).  The write's w takes it over with fc_wb_adopt once it holds its
 * range. */
bool fc_wb_reserve(struct fc_client *cl, size_t bytes);
void fc_wb_unreserve(struct fc_client *cl, size_t bytes);
void fc_wb_adopt(struct fc_wb *w, size_t bytes);
/* The op holding w ended: err 0, or the positive errno the application
 * would have seen (kept for the next flush/fsync/release when w was
 * answered early).  No-op when w holds nothing.  May run waiters. */
void fc_wb_release(struct fc_client *cl, struct fc_wb *w, int err);
/* Record err (a positive errno) of a page-cache writeback of ino
 * (-o writeback_cache), answered when it failed, for the writers' next
 * flush or release, as an early write's: the kernel gives it to the first
 * close of any handle only.  An fsync does not take it from us: the
 * kernel reports it to every file's fsync itself (errseq_t) before it
 * sends FSYNC. */
void fc_wb_note_writeback_err(struct fc_client *cl, uint64_t ino, int err);
/* Whether f's flush and release take the inode's write errors: it wrote
 * through FUSE, or (-o writeback_cache) it may have dirtied the kernel's
 * pages, which any handle's writeback sends. */
bool fc_wb_writer(const struct fc_client *cl, struct fc_file *f);
/* The errno of the latest failed early-answered write of f's inode, if f
 * has not reported it yet (0: none); afterwards f has.  for_fsync: an
 * error of page-cache writeback is not returned (the kernel did). */
int fc_wb_take_err(struct fc_client *cl, struct fc_file *f, bool for_fsync);
/* What a handle of ino opened now has seen (fc_file.err_seen). */
uint64_t fc_wb_err_seq(const struct fc_client *cl, uint64_t ino);
/* Parking (ops_data.c joins a file's small sequential writes into one
 * WRITE): a write answered early that holds its range may wait unsent for
 * the next write of its file, until fc_wb_kick runs send(op).  Whoever
 * must wait for a parked write's range kicks it (fc_wb_enter), and no
 * write parks while an operation of its inode (or of every inode) waits:
 * false, and the caller sends it now.  The caller bounds the rest
 * (ops_data.c: FC_JOIN_WAIT_MS, a SETATTR of the inode, stopping). */
bool fc_wb_park(struct fc_client *cl, struct fc_wb *w, fc_op_fn send);
/* The parked write of ino, or NULL (at most one per inode: ops_data.c
 * kicks one before it parks the next). */
struct fc_op *fc_wb_parked(const struct fc_client *cl, uint64_t ino);
/* Send every parked write of ino (0: of every inode), in the order they
 * were parked. */
void fc_wb_kick(struct fc_client *cl, uint64_t ino);
/* No write in flight and nobody waiting. */
bool fc_wb_idle(const struct fc_client *cl);

#endif
