/* store_id.c - the data directory's identity and its flag files: which
 * iod and cluster DIR belongs to, the replay and live-resync flags that a
 * restart must not forget, and the quarantine of a journal that cannot be
 * replayed (twinfs-iod --quarantine-journal).
 *
 * Identity file DIR/twinfs-id (128 bytes, little-endian):
 *
 *   off size field
 *     0    4 magic        0x44495754 ("TWID")
 *     4    2 version      1
 *     6    2 reserved     0
 *     8    4 iod_id
 *    12    4 reserved     0
 *    16   16 uuid         random at creation
 *    32   64 cluster      cluster name, NUL-padded (at most 63 bytes)
 *    96   28 reserved     0
 *   124    4 crc32c       over bytes 0..123
 *
 * Written once, to twinfs-id.tmp, fsynced, renamed, the directory fsynced.
 * Valid iff magic, version and crc match; an invalid one is never replaced
 * automatically (it may be another daemon's directory).
 *
 * Replay flag DIR/twinfs-replay-owed (empty; only its presence counts):
 * the twin missed a live write of ours (a pin) since our last resync of it
 * completed, so a resumed resync must send our marks before its cursor
 * again (resync.c).  Created and the directory fsynced when set, so a
 * restart of this iod does not forget it; unlinked without a sync when a
 * resync run completes or one from the start begins (resync.c; one that
 * comes back costs a replay, nothing else).
 *
 * DIR/twinfs-resync-live (empty): we forwarded a live write to our twin
 * while it was resyncing, since our last resync of it completed.  Created
 * (directory fsynced) before that write is applied here.  Found at open,
 * it means we may have died with such a forward unanswered, a write we
 * hold and the twin may not: it sets the replay flag, and is removed.  A
 * clean stop whose journal closed removes it too: every forward was then
 * answered or pinned, and a pin sets the replay flag (on disk) itself.
 */

#include "store_int.h"

#include <assert.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID_MAGIC         0x44495754u
#define ID_VERSION       1u
#define ID_FILE          "twinfs-id"
#define ID_TMP           "twinfs-id.tmp"
#define OWED_FILE        "twinfs-replay-owed"
#define LIVE_FILE        "twinfs-resync-live"

struct id_disk {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved0;
	uint32_t iod_id;
	uint32_t reserved1;
	uint8_t uuid[IOD_UUID_LEN];
	char cluster[IOD_CLUSTER_MAX];
	uint8_t reserved2[28];
	uint32_t crc;
};
_Static_assert(sizeof(struct id_disk) == 128, "identity file layout");

/* ------------------------------------------------------------- identity */

static int id_create(struct iod_store *s, const char *cluster)
{
	struct id_disk d;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = tw_random(s->uuid, sizeof(s->uuid));
	if (rc < 0)
		return rc;
	d.magic = htole32(ID_MAGIC);
	d.version = htole16(ID_VERSION);
	d.iod_id = htole32(s->iod_id);
	memcpy(d.uuid, s->uuid, sizeof(d.uuid));
	strncpy(d.cluster, cluster, sizeof(d.cluster) - 1);
	d.crc = htole32(tw_crc32c(0, &d, offsetof(struct id_disk, crc)));

	rc = tw_replace_file(s->dir_fd, ID_TMP, ID_FILE, &d, sizeof(d));
	if (rc < 0)
		return rc;
	s->is_new = true;
	tw_info("data directory %s is new: iod %" PRIu32 " of cluster '%s'",
		s->dir, s->iod_id, cluster);
	return 0;
}

/* twinfs-iod --quarantine-journal: DIR/journal goes aside, untouched, as
 * DIR/journal.quarantined-<unix time>, and the identity file goes with it
 * (twinfs-id.quarantined-<time>): id_check then makes a new identity, so
 * the iod registers as a new disk (IodRegister.fresh, a new UUID) and mgrd
 * rebuilds it in full from its twin before it serves anything.  What the
 * journal held that its twin does not is in the kept file. */
int store_quarantine_journal(struct iod_store *s)
{
	char jname[64], iname[64];
	long t = (long)time(NULL);

	snprintf(jname, sizeof(jname), "journal.quarantined-%ld", t);
	snprintf(iname, sizeof(iname), ID_FILE ".quarantined-%ld", t);
	if (renameat(s->dir_fd, "journal", s->dir_fd, jname) < 0 &&
	    errno != ENOENT) {
		tw_err("data directory %s: cannot set the journal aside as "
		       "%s: %s", s->dir, jname, strerror(errno));
		return -errno;
	}
	if (renameat(s->dir_fd, ID_FILE, s->dir_fd, iname) < 0 &&
	    errno != ENOENT) {
		tw_err("data directory %s: cannot set %s aside: %s", s->dir,
		       ID_FILE, strerror(errno));
		return -errno;
	}
	if (fsync(s->dir_fd) < 0)
		return -errno;
	tw_warn("data directory %s: journal QUARANTINED as %s/%s (kept, not "
		"replayed): this iod starts empty-handed as a new disk and is "
		"rebuilt in full from its twin; writes only that journal held "
		"are lost unless the twin has them", s->dir, s->dir, jname);
	return 0;
}

int store_id_check(struct iod_store *s, const char *cluster)
{
	struct id_disk d;
	char theirs[IOD_CLUSTER_MAX];
	long n;
	int fd;

	fd = openat(s->dir_fd, ID_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return id_create(s, cluster);
		tw_err("data directory %s: cannot open %s: %s", s->dir,
		       ID_FILE, strerror(errno));
		return -errno;
	}
	n = tw_pread_full(fd, &d, sizeof(d), 0);
	close(fd);
	if (n < 0)
		return (int)n;
	if ((size_t)n != sizeof(d) || le32toh(d.magic) != ID_MAGIC ||
	    le16toh(d.version) != ID_VERSION ||
	    le32toh(d.crc) != tw_crc32c(0, &d, offsetof(struct id_disk, crc))) {
		tw_err("data directory %s: %s is not a valid TwinFS identity "
		       "file (damaged or another version); refusing to start",
		       s->dir, ID_FILE);
		return -EBADMSG;
	}
	memcpy(theirs, d.cluster, sizeof(theirs));
	theirs[sizeof(theirs) - 1] = '\0';
	if (le32toh(d.iod_id) != s->iod_id || strcmp(theirs, cluster) != 0) {
		tw_err("data directory %s belongs to iod %" PRIu32 " of cluster "
		       "'%s', not to iod %" PRIu32 " of cluster '%s'; refusing "
		       "to start (check -i and the [iod N] dir in the config)",
		       s->dir, le32toh(d.iod_id), theirs, s->iod_id, cluster);
		return -EINVAL;
	}
	memcpy(s->uuid, d.uuid, sizeof(s->uuid));
	return 0;
}

bool iod_store_replay_owed(const struct iod_store *s)
{
	return s->replay_owed;
}

bool iod_store_replay_owed_marks(const struct iod_store *s)
{
	return s->replay_owed && s->owed_marks;
}

void iod_store_owe_marks(struct iod_store *s)
{
	s->owed_marks = true;   /* in memory: the flag file says the rest */
	(void)iod_store_set_replay_owed(s, true);
}

/* Create (and sync) or remove one of the flag files above. */
static int flag_file(struct iod_store *s, const char *name, bool on)
{
	int fd;

	if (!on)
		return unlinkat(s->dir_fd, name, 0) < 0 && errno != ENOENT
		       ? -errno : 0;
	fd = openat(s->dir_fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	return fsync(s->dir_fd) < 0 ? -errno : 0;
}

int iod_store_set_replay_owed(struct iod_store *s, bool owed)
{
	int rc;

	if (s->replay_owed == owed)
		return 0;
	/* Owed in memory at once, whatever the disk says: a failure only
	 * risks a restart forgetting it. */
	s->replay_owed = owed;
	rc = flag_file(s, OWED_FILE, owed);
	s->owed_on_disk = owed && rc == 0;
	if (!owed)
		s->owed_marks = false;
	return rc;
}

/* Remove the live note, if there is one. */
static int live_drop(struct iod_store *s)
{
	int rc = s->resync_live ? flag_file(s, LIVE_FILE, false) : 0;

	if (rc == 0)
		s->resync_live = false;
	return rc;
}

int iod_store_replay_paid(struct iod_store *s, bool keep_live)
{
	int rc = iod_store_set_replay_owed(s, false);

	/* The live flag goes only after the owed one (a restart between
	 * them replays once more, never less). */
	if (rc == 0 && !keep_live)
		rc = live_drop(s);
	return rc;
}

int iod_store_note_resync_live(struct iod_store *s)
{
	if (s->resync_live)
		return 0;
	s->resync_live = true;
	return flag_file(s, LIVE_FILE, true);
}

/* At open: the flags left by the last run of this iod. */
int store_flags_load(struct iod_store *s)
{
	if (faccessat(s->dir_fd, LIVE_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
	    errno != ENOENT) {
		tw_info("data directory %s: this iod may have stopped with a "
			"write to its resyncing twin unanswered: its next "
			"resumed resync replays the marks before its cursor",
			s->dir);
		if (iod_store_set_replay_owed(s, true) < 0)
			return -EIO;
		s->owed_marks = true;
		if (flag_file(s, LIVE_FILE, false) < 0)
			return -EIO;
		return 0;
	}
	/* Anything but "absent" counts as owed: a replay too many costs
	 * copies, one too few leaves the twins apart. */
	s->replay_owed = faccessat(s->dir_fd, OWED_FILE, F_OK,
				   AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
	s->owed_on_disk = s->replay_owed;
	s->owed_marks = s->replay_owed;
	return 0;
}

/* A clean stop (the journal closed): every forward to the resyncing twin
 * was answered, or failed and was pinned, which set the replay flag.  The
 * pins themselves live in memory, but the marks of the writes they pinned
 * are journaled with those writes, so they are on disk now, and a replay
 * owed at the next start sends every mark before the cursor.  The live
 * flag adds nothing then, unless the replay flag could not be written. */
void store_flags_clean_stop(struct iod_store *s)
{
	if (!s->replay_owed || s->owed_on_disk)
		(void)live_drop(s);
}
