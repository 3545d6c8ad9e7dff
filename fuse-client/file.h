/* file.h - an open regular file, fi->fh (created by ops_file.c; its
 * writes' state is kept by ops_data.c, report.c and wbehind.c). */
#ifndef TWINFS_FC_FILE_H
#define TWINFS_FC_FILE_H

#include "mount.h"

/* fi->fh of a regular file: created by open/create, freed at release once
 * no asynchronous report holds it (refs).  All fields [loop] except the
 * immutable ones set before the open reply. */
struct fc_file {
	uint64_t ino;              /* immutable */
	uint64_t mgr_fh;           /* immutable: mgrd's handle */
	/* immutable: the session mgrd opened it under; its writes name it,
	 * so that once mgrd expires that session the iods refuse them
	 * (proto/FORMAT.md "Fencing"), even after we took a new one. */
	uint64_t session;
	int flags;                 /* immutable: open flags */
	/* [any thread] a read, write or fallocate was submitted through this
	 * handle; until then FLUSH has nothing to wait for (fc_flush). */
	atomic_bool touched;
	/* [any thread] a write or fallocate was submitted through it: its
	 * flush and release return a failed write-behind's error. */
	atomic_bool wrote;
	/* [loop] the inode's write-behind error seq this handle reported, or
	 * had at open: each handle reports a failure once (wbehind.c). */
	uint64_t err_seen;
	int refs;                  /* [loop] base ref + reports in flight */
	uint64_t end;              /* [loop] highest end written under end_gen */
	uint64_t end_gen;          /* [loop] trunc_gen of those writes */
	uint64_t write_gen;        /* [loop] bumped by every completed write */
	uint64_t reported_gen;     /* [loop] write_gen covered by a report reply */
	int64_t mtime_sec;         /* [loop] time of the last write */
	uint32_t mtime_nsec;
	/* [loop] write_gen of the last write whose time mtime_sec is and
	 * that came after the inode's last explicit mtime set: its report
	 * sets mtime; without one (<= reported_gen) it keeps the times */
	uint64_t mtime_gen;
	/* A read since the last report, and when (the atime to report). */
	bool atime_pending;        /* [loop] */
	int64_t atime_sec;         /* [loop] */
	uint32_t atime_nsec;
	uint32_t cols_seen;        /* [loop] bit k: col_blocks[k] is known */
	uint64_t col_blocks[R0_MAX_STRIPE_COUNT]; /* [loop] from WriteReply */
	bool on_dirty_list;        /* [loop] */
	bool timer_report;         /* [loop] a timer report is in flight */
	/* [loop] its report inside a SETATTR in flight (fc_report_embed) */
	struct fc_report *embedded;
	struct fc_file *dirty_prev, *dirty_next; /* [loop] */
	struct fc_file *all_prev, *all_next;     /* [loop] cl->files */
};

#endif
