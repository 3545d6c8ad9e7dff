/* vote.h - a voter's persisted promise in the mgrd pair's election
 * (docs/ARCHITECTURE.md "Election" E4): the file DIR/twinfs-vote that an
 * iod keeps in its data directory and an mgrd in its own.  Byte format:
 * common/FORMAT.md "Vote file".  The rules that change it are raid/lease.h.
 */
#ifndef TWINFS_VOTE_H
#define TWINFS_VOTE_H

#include <stdint.h>

#define TW_VOTE_FILE "twinfs-vote"

struct tw_vote_disk {
	uint64_t term;     /* the highest term promised */
	uint32_t holder;   /* the mgrd id it was promised to, 0 none */
	uint32_t stale;    /* the mgrd id marked stale, 0 none */
};

/* Reads DIR/twinfs-vote.  0 with *v filled, or zeros when there is no
 * file (a new voter); -EUCLEAN for a damaged or unknown-version file
 * (logged with what to do); another negative errno for an I/O error. */
int tw_vote_load(const char *dir, struct tw_vote_disk *v);

/* Replaces DIR/twinfs-vote durably: a temporary file, fsync, rename,
 * fsync of DIR.  0 or a negative errno; on error the old file stands. */
int tw_vote_save(const char *dir, const struct tw_vote_disk *v);

#endif
