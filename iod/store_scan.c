/* store_scan.c - the listing of the subfiles at home (SUBFILES, resync,
 * verify): every name under DIR/subfiles after a cursor, sorted, read
 * from the directories themselves (misplaced or foreign names are
 * skipped).
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

/* --------------------------------------------------------------- listing */

int store_key_cmp(const void *a, const void *b)
{
	const struct store_key *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	return 0;
}

static bool key_after(uint64_t ino, uint32_t column, uint64_t a_ino,
		      uint32_t a_column)
{
	return ino > a_ino || (ino == a_ino && column > a_column);
}

/* "ab" -> 0..255, or -1 unless exactly two lowercase hex digits. */
static int parse_hex2(const char *n)
{
	int v = 0;

	for (int i = 0; i < 2; i++) {
		char c = n[i];

		if (c >= '0' && c <= '9')
			v = v * 16 + (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (c - 'a' + 10);
		else
			return -1;
	}
	return n[2] == '\0' ? v : -1;
}

/* "<16 hex>.<col>" -> 0, or -1 for any other name. */
static int parse_subname(const char *n, uint64_t *ino, uint32_t *column)
{
	uint64_t v = 0;
	uint32_t c = 0;
	int i;

	for (i = 0; i < 16; i++) {
		char ch = n[i];

		if (ch >= '0' && ch <= '9')
			v = v * 16 + (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v = v * 16 + (uint64_t)(ch - 'a' + 10);
		else
			return -1;
	}
	if (n[i++] != '.')
		return -1;
	if (n[i] < '0' || n[i] > '9' || (n[i] == '0' && n[i + 1] != '\0'))
		return -1;
	for (; n[i]; i++) {
		if (n[i] < '0' || n[i] > '9')
			return -1;
		c = c * 10 + (uint32_t)(n[i] - '0');
		if (c >= IOD_MAX_COLUMNS)
			return -1;
	}
	*ino = v;
	*column = c;
	return 0;
}

struct collect {
	struct store_key *keys;
	size_t n, cap;   /* cap = 2 * max + 1 */
	size_t max;
	bool truncated;  /* some candidate was dropped: not eof */
};

static void collect_add(struct collect *c, uint64_t ino, uint32_t column)
{
	if (c->n == c->cap) {
		/* Keep the max smallest: sort, drop the rest. */
		qsort(c->keys, c->n, sizeof(*c->keys), store_key_cmp);
		c->n = c->max;
		c->truncated = true;
	}
	c->keys[c->n++] = (struct store_key){ ino, column };
}

/* Open directory rel under dir_fd for reading: 1 and *d, 0 when it is
 * absent (nothing to list), or -errno. */
static int open_dir(int dir_fd, const char *rel, DIR **d)
{
	int fd = openat(dir_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	*d = fdopendir(fd);
	if (!*d) {
		close(fd);
		return -errno;
	}
	return 1;
}

static int scan_cd(struct iod_store *s, int ab, int cd, uint64_t after_ino,
		   uint32_t after_column, struct collect *c)
{
	char rel[8];
	DIR *d;
	struct dirent *de;
	int rc;

	snprintf(rel, sizeof(rel), "%02x/%02x", ab, cd);
	rc = open_dir(s->sub_fd, rel, &d);
	if (rc <= 0)
		return rc;
	while ((de = readdir(d)) != NULL) {
		uint64_t ino;
		uint32_t column;
		unsigned a, b;

		if (parse_subname(de->d_name, &ino, &column) < 0)
			continue;
		store_sub_dirs(ino, &a, &b);
		if ((int)a != ab || (int)b != cd)
			continue;   /* misplaced: not ours to serve */
		if (!key_after(ino, column, after_ino, after_column))
			continue;
		collect_add(c, ino, column);
	}
	closedir(d);
	return 0;
}

static int scan_dir_names(int dir_fd, const char *rel, bool present[256])
{
	DIR *d;
	struct dirent *de;
	int rc;

	memset(present, 0, 256 * sizeof(bool));
	rc = open_dir(dir_fd, rel, &d);
	if (rc <= 0)
		return rc;
	while ((de = readdir(d)) != NULL) {
		int v = parse_hex2(de->d_name);

		if (v >= 0)
			present[v] = true;
	}
	closedir(d);
	return 0;
}

int store_scan(struct iod_store *s, uint64_t after_ino, uint32_t after_column,
	       size_t max, struct store_key **keys, size_t *n, bool *truncated)
{
	struct collect c = { .max = max };
	bool ab_present[256], cd_present[256];
	char rel[8];
	int rc = 0;

	*keys = NULL;
	*n = 0;
	*truncated = false;
	c.cap = 2 * max + 1;
	c.keys = malloc(c.cap * sizeof(*c.keys));
	if (!c.keys)
		return -ENOMEM;
	rc = scan_dir_names(s->sub_fd, ".", ab_present);
	for (int ab = 0; rc == 0 && ab < 256; ab++) {
		if (!ab_present[ab])
			continue;
		snprintf(rel, sizeof(rel), "%02x", ab);
		rc = scan_dir_names(s->sub_fd, rel, cd_present);
		for (int cd = 0; rc == 0 && cd < 256; cd++)
			if (cd_present[cd])
				rc = scan_cd(s, ab, cd, after_ino,
					     after_column, &c);
	}
	if (rc < 0) {
		free(c.keys);
		return rc;
	}
	qsort(c.keys, c.n, sizeof(*c.keys), store_key_cmp);
	*truncated = c.truncated || c.n > max;
	*n = TW_MIN(c.n, max);
	*keys = c.keys;
	return 0;
}
