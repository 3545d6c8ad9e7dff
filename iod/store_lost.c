/* store_lost.c - subfiles whose journaled changes could not be brought
 * home, held as lost until a delete replaces them.
 *
 * The journal's checkpoint and replay set an object aside when one of its
 * writes, its open or one of its records fails for a reason that is the
 * object's own (journal.h jbd_obj_error: EFBIG, EINVAL, EPERM, ...), instead
 * of aborting the journal or refusing to start the whole iod for it.  Its
 * home file then lacks acknowledged writes, so from that moment this iod
 * must never serve it: reads, checksums, seeks and every mutation but a
 * delete of it fail with EIO (store_lost_check), the daemon reports it to
 * mgrd, which has the twin serve the file and rebuilds this iod from it
 * with a full copy (that copy deletes each subfile first, which clears the
 * entry).  When both twins lost the same subfile, reads of it fail with
 * EIO on both: never wrong bytes.
 *
 * Format of DIR/twinfs-lost (text, one subfile a line, at most
 * STORE_LOST_MAX lines):
 *
 *   <ino> <column> <errno> <transaction>\n
 *
 * Rewritten whole on every change (twinfs-lost.tmp, fsync, rename, fsync
 * of DIR), so a crash leaves the old list or the new one.  A line that does
 * not parse makes the open fail: a lost subfile must never be forgotten.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOST_FILE     "twinfs-lost"
#define LOST_TMP      "twinfs-lost.tmp"
#define STORE_LOST_MAX 65536u

/* Write the whole list to DIR/twinfs-lost (or remove it when empty). */
static int lost_save(struct iod_store *s)
{
	uint64_t key;
	void *val;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (s->lost.count == 0) {
		if (unlinkat(s->dir_fd, LOST_FILE, 0) < 0 && errno != ENOENT)
			return -errno;
		return fsync(s->dir_fd) < 0 ? -errno : 0;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		return -errno;
	for (size_t it = 0; tw_hmap_next(&s->lost, &it, &key, &val);) {
		const struct store_lost *l = val;

		fprintf(f, "%" PRIu64 " %" PRIu32 " %d %" PRIu64 "\n",
			store_obj_ino(key - 1), store_obj_column(key - 1),
			l->err, l->seq);
	}
	rc = fclose(f) != 0 ? -ENOMEM :
	     tw_replace_file(s->dir_fd, LOST_TMP, LOST_FILE, buf, len);
	free(buf);
	return rc;
}

static int lost_put(struct iod_store *s, uint64_t obj, int err, uint64_t seq)
{
	struct store_lost *l = malloc(sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->err = err;
	l->seq = seq;
	if (tw_hmap_put(&s->lost, obj + 1, l) < 0) {
		free(l);
		return -ENOMEM;
	}
	return 0;
}

int store_lost_load(struct iod_store *s)
{
	char line[128];
	FILE *f;
	int fd, rc = 0;

	tw_hmap_init(&s->lost);
	fd = openat(s->dir_fd, LOST_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		uint64_t ino, seq;
		uint32_t column;
		int err;
		char end;

		if (sscanf(line, "%" SCNu64 " %" SCNu32 " %d %" SCNu64 "%c",
			   &ino, &column, &err, &seq, &end) != 5 || end != '\n' ||
		    ino == 0 || ino > IOD_MAX_INO || column >= IOD_MAX_COLUMNS ||
		    s->lost.count >= STORE_LOST_MAX) {
			tw_err("data directory %s: %s: line %zu is not a lost "
			       "subfile (\"INO COLUMN ERRNO TRANSACTION\")",
			       s->dir, LOST_FILE, s->lost.count + 1);
			rc = -EBADMSG;
			break;
		}
		if (!tw_hmap_get(&s->lost, store_obj(ino, column) + 1))
			rc = lost_put(s, store_obj(ino, column), err, seq);
	}
	fclose(f);
	if (rc == 0 && s->lost.count)
		tw_warn("data directory %s: %zu subfiles are held as lost (%s): "
			"they are not served here until a full resync from the "
			"twin replaces them", s->dir, s->lost.count, LOST_FILE);
	return rc;
}

void store_lost_free(struct iod_store *s)
{
	uint64_t key;
	void *val;

	for (size_t it = 0; tw_hmap_next(&s->lost, &it, &key, &val);)
		free(val);
	tw_hmap_free(&s->lost);
}

int store_lost_add(struct iod_store *s, uint64_t obj, int err, uint64_t seq)
{
	int rc;

	if (tw_hmap_get(&s->lost, obj + 1))
		return 0;
	if (s->lost.count >= STORE_LOST_MAX)
		return -ENOSPC;
	rc = lost_put(s, obj, err, seq);
	if (rc < 0)
		return rc;
	rc = lost_save(s);
	tw_err("data directory %s: subfile %" PRIu64 ".%" PRIu32 " (ino %"
	       PRIu64 " column %" PRIu32 ") cannot be brought home: %s "
	       "(journal transaction %" PRIu64 "); held as lost%s: this iod "
	       "answers EIO for it until a full resync from its twin replaces "
	       "it", s->dir, store_obj_ino(obj), store_obj_column(obj),
	       store_obj_ino(obj), store_obj_column(obj), strerror(-err), seq,
	       rc < 0 ? " (in memory only: recording it failed)" : "");
	s->lost_news++;
	return 0;    /* held in memory even when the file could not say it */
}

void store_lost_drop(struct iod_store *s, uint64_t obj)
{
	void *l = tw_hmap_del(&s->lost, obj + 1);

	if (!l)
		return;
	free(l);
	if (lost_save(s) < 0)
		tw_warn("data directory %s: %s still names subfile %" PRIu64
			".%" PRIu32 ", deleted since: it is dropped at the "
			"next change of the list", s->dir, LOST_FILE,
			store_obj_ino(obj), store_obj_column(obj));
	else
		tw_info("data directory %s: lost subfile %" PRIu64 ".%" PRIu32
			" deleted: no longer held as lost", s->dir,
			store_obj_ino(obj), store_obj_column(obj));
}

int store_lost_check(const struct iod_store *s, uint64_t ino, uint32_t column)
{
	if (s->lost.count == 0 || ino > IOD_MAX_INO || column >= IOD_MAX_COLUMNS)
		return 0;
	return tw_hmap_get(&s->lost, store_obj(ino, column) + 1) ? -EIO : 0;
}

size_t iod_store_n_lost(const struct iod_store *s)
{
	return s->lost.count;
}

uint64_t iod_store_lost_news(const struct iod_store *s)
{
	return s->lost_news;
}

bool iod_store_lost_first(const struct iod_store *s, uint64_t *ino,
			  uint32_t *column)
{
	uint64_t key;
	void *val;
	size_t it = 0;

	if (!tw_hmap_next(&s->lost, &it, &key, &val))
		return false;
	*ino = store_obj_ino(key - 1);
	*column = store_obj_column(key - 1);
	return true;
}
