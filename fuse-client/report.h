/* report.h - a writer's size reports and the explicit mtime sets they
 * must not undo (report.c).  Loop thread unless said otherwise. */
#ifndef TWINFS_FC_REPORT_H
#define TWINFS_FC_REPORT_H

#include "mount.h"

#define FC_REPORT_INTERVAL_MS  1000         /* size reports while dirty */

/* Send the size reports of every dirty open file of `ino` and wait until
 * every report of `ino` in flight, these and earlier ones still being
 * retransmitted, has its reply (loop thread).  Returns true when there was
 * something to wait for: done(arg, 0) runs once, later.  False: nothing in
 * flight, done never runs.  A SETATTR of size or mtime whose reports
 * cannot ride inside it (fc_report_embed) waits for this, so a report of
 * earlier writes cannot reach mgrd after it (retransmissions after an mgrd
 * restart are not ordered) and overwrite the mtime it set (cp -a, tar x). */
bool fc_report_ino(struct fc_client *cl, uint64_t ino,
		   void (*done)(void *arg, int status), void *arg);

/* Loop thread: send final size reports of every dirty file; done(arg) runs
 * once all are answered (or failed). */
void fc_flush_all(struct fc_client *cl, void (*done)(void *arg), void *arg);
/* Loop thread: drop a reference to f; frees it at zero. */
void fc_file_put(struct fc_client *cl, struct fc_file *f);
/* At exit, the loop stopped: free every file still open. */
void fc_files_free(struct fc_client *cl);
/* Loop thread: f has a completed, unreported write: put it on
 * the dirty list (reported every FC_REPORT_INTERVAL_MS). */
void fc_file_dirty(struct fc_client *cl, struct fc_file *f);
/* Whether a read through an open with these flags would update the atime
 * of a file with attributes a (the policy is mgrd's: relatime, or the
 * mount's noatime/strictatime; FORMAT.md "Size, truncate, data_version"). */
bool fc_atime_due(struct fc_client *cl, const struct fc_attr *a, int flags);
/* Loop thread: a read through f completed; its atime goes to
 * mgrd with the next report (flush, fsync, release), never per read. */
void fc_file_accessed(struct fc_client *cl, struct fc_file *f);
/* Size reports carried inside a SETATTR instead of sent ahead of it
 * (proto/FORMAT.md "Size, truncate, data_version"): one
 * message, so no report of the earlier writes can reach mgrd after a
 * SETATTR of size or mtime, and one round trip less for futimens after
 * writes (tar x, cp -a); a chown or chmod takes the reports that are ready
 * along, so that the close has none to send. */
#define FC_REPORT_SET_MAX WIRE_SETATTR_REPORTS_MAX
struct fc_report;
struct fc_report_set {
	size_t n;
	struct fc_report *r[FC_REPORT_SET_MAX];
	Twinfs__SizeReport *sr[FC_REPORT_SET_MAX];  /* r[i]'s bodies */
};
/* Loop thread: the reports of every open file of ino with unreported
 * writes or reads, into *set, counted in flight until
 * fc_report_embed_done; while one is out, its file sends no report of the
 * same writes (fc_report_start: a flush waits instead).  False: ino has
 * reports in flight already (fc_report_ino must wait for them), more dirty
 * files than FC_REPORT_SET_MAX, or no memory; *set is empty then. */
bool fc_report_embed(struct fc_client *cl, uint64_t ino,
		     struct fc_report_set *set);
/* Loop thread: the SETATTR carrying *set ended with status (0: mgrd
 * applied the reports); empties *set. */
void fc_report_embed_done(struct fc_client *cl, struct fc_report_set *set,
			  int status);
/* Loop thread: send f's size report if it has unreported
 * writes or an unreported read.  Returns true when a report was sent, or
 * f's writes are reported inside a SETATTR in flight (done runs later,
 * once the inode has no report in flight, and after a report of its own
 * if that SETATTR failed); false when there was nothing to do or no memory (done
 * never runs; *err says which).  A timer's report (from_timer) or one
 * without done never waits for a SETATTR: it is not sent.  op: the
 * request that waits (fsync), so that an interrupt ends the wait for a
 * silent mgrd with -EINTR (fc_mgr_send); NULL where none may (a close
 * must not fail with EINTR). */
bool fc_report_start(struct fc_client *cl, struct fc_file *f, bool from_timer,
		     void (*done)(void *arg, int status), void *arg,
		     struct fc_op *op, int *err);
/* Explicit mtime sets and the writes they overtake.  A SETATTR
 * of mtime does not wait for earlier writes still in flight: they keep its
 * mtime when they land (their reports say keep_times), and so do the
 * writes that landed before it, whose reports ride in it.  Loop thread.
 *   fc_times_set: a SETATTR of ino's mtime takes its place now; returns
 *     its seq (never 0) for fc_times_done.
 *   fc_times_done: it was answered (status), before its reports end:
 *     if it failed, and no later one is unanswered or succeeded, the
 *     writes it overtook set mtime after all (their time: now).
 *   fc_times_seq: for a write taking its place; fc_times_kept: whether a
 *     write that took its place at seq lands after a SETATTR of mtime. */
uint64_t fc_times_set(struct fc_client *cl, uint64_t ino);
void fc_times_done(struct fc_client *cl, uint64_t ino, uint64_t seq,
		   int status);
static inline uint64_t fc_times_seq(const struct fc_client *cl)
{
	return cl->times_seq;
}
bool fc_times_kept(struct fc_client *cl, uint64_t ino, uint64_t seq);

#endif
