/* journal.h - the whole public interface of libjournal.
 *
 * Record mode (mgrd): an append-only log of opaque records, each closed
 * (written to the log file with write(2), so it survives the death of the
 * process) before jnl_rec_append returns, and synced (fdatasync, survives
 * power loss) by jnl_rec_sync.  Replay delivers every closed record in order
 * and stops at the first torn or corrupt one, which is discarded together
 * with everything after it.  A snapshot (the caller's serialised state) is
 * written to a temporary file, fsynced, renamed and the directory fsynced;
 * then the log is trimmed.  Format: journal/FORMAT.md.
 *
 * The ext3-style block journal for iods (issue 4) will live beside it.
 *
 * Not thread-safe: one owner thread per log.
 */
#ifndef TWINFS_JOURNAL_H
#define TWINFS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define JNL_REC_MAX (4u << 20)     /* largest record payload */

struct jnl_rec;

/* Called for the snapshot (if any) and then each closed record, in order.
 * Return 0 to go on, a negative errno to stop replay with that error. */
typedef int (*jnl_snap_cb)(const void *buf, size_t len, void *arg);
typedef int (*jnl_replay_cb)(uint64_t seq, const void *buf, size_t len,
			     void *arg);

/* Open (or create) the log in directory `dir` (files "snapshot" and
 * "journal"), replaying: snap_cb once with the snapshot's payload (not at
 * all when there is none), then replay_cb for each closed record after it.
 * A torn tail is cut off (logged with its offset).  Returns 0 or -errno;
 * -EBADMSG when the snapshot itself is corrupt. */
int jnl_rec_open(const char *dir, jnl_snap_cb snap_cb,
		 jnl_replay_cb replay_cb, void *arg, struct jnl_rec **out);

/* Append one record (len <= JNL_REC_MAX) and close it (written to the log
 * file).  Sets *seq to its sequence number when seq is non-NULL.  Returns 0
 * or -errno; after an I/O error the log is aborted and every later append
 * fails with -EIO (sticky). */
int jnl_rec_append(struct jnl_rec *j, const void *buf, size_t len,
		   uint64_t *seq);

/* fdatasync the log: every record appended so far survives power loss. */
int jnl_rec_sync(struct jnl_rec *j);

/* Bytes in the log since the last snapshot (the caller decides when to
 * snapshot). */
uint64_t jnl_rec_log_bytes(const struct jnl_rec *j);

/* Write a snapshot of the caller's whole state (buf, len), make it durable,
 * and trim the log: after a crash at any point, replay yields either the
 * old snapshot + the full log, or the new snapshot + records appended after
 * this call.  Returns 0 or -errno. */
int jnl_rec_snapshot(struct jnl_rec *j, const void *buf, size_t len);

void jnl_rec_close(struct jnl_rec *j);

/* Fault injection for crash tests: the N-th write(2)-level operation from
 * now (1-based) fails (mode 0), is torn to its first half (mode 1), or is
 * dropped silently (mode 2); 0 disables.  Test-only. */
void jnl_rec_inject_fault(struct jnl_rec *j, unsigned nth, int mode);

#endif
