/* vote.c - the vote file (vote.h; common/FORMAT.md "Vote file"). */
#include "vote.h"

#include "common.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define VOTE_MAGIC   0x54565754u   /* "TWVT" */
#define VOTE_VERSION 1u
#define VOTE_TMP     TW_VOTE_FILE ".tmp"

struct vote_disk {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved0;
	uint64_t term;
	uint32_t holder;
	uint32_t stale;
	uint8_t reserved1[36];
	uint32_t crc;
};
_Static_assert(sizeof(struct vote_disk) == 64, "vote file layout");
_Static_assert(offsetof(struct vote_disk, crc) == 60, "vote file layout");

static int path_of(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int tw_vote_load(const char *dir, struct tw_vote_disk *v)
{
	char path[PATH_MAX];
	struct vote_disk d;
	ssize_t n;
	int fd, rc;

	memset(v, 0, sizeof(*v));
	rc = path_of(path, sizeof(path), dir, TW_VOTE_FILE);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = pread(fd, &d, sizeof(d), 0);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return rc;
	if (n != (ssize_t)sizeof(d) || le32toh(d.magic) != VOTE_MAGIC ||
	    le32toh(d.crc) != tw_crc32c(0, &d, offsetof(struct vote_disk, crc))) {
		tw_err("%s is damaged: this voter's promise in the mgrd "
		       "election is lost; stop both mgrds, move the file "
		       "aside, and start again", path);
		return -EUCLEAN;
	}
	if (le16toh(d.version) != VOTE_VERSION) {
		tw_err("%s has version %u, this program knows %u: run the "
		       "TwinFS release that wrote it", path,
		       le16toh(d.version), VOTE_VERSION);
		return -EUCLEAN;
	}
	v->term = le64toh(d.term);
	v->holder = le32toh(d.holder);
	v->stale = le32toh(d.stale);
	return 0;
}

int tw_vote_save(const char *dir, const struct tw_vote_disk *v)
{
	struct vote_disk d;
	int dfd, rc;
	memset(&d, 0, sizeof(d));
	d.magic = htole32(VOTE_MAGIC);
	d.version = htole16(VOTE_VERSION);
	d.term = htole64(v->term);
	d.holder = htole32(v->holder);
	d.stale = htole32(v->stale);
	d.crc = htole32(tw_crc32c(0, &d, offsetof(struct vote_disk, crc)));

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		rc = -errno;
	else {
		rc = tw_replace_file(dfd, VOTE_TMP, TW_VOTE_FILE, &d,
				     sizeof(d));
		close(dfd);
	}
	if (rc < 0)
		tw_err("cannot record the election promise (term %" PRIu64
		       ") in %s/%s: %s", v->term, dir, TW_VOTE_FILE,
		       strerror(-rc));
	return rc;
}
