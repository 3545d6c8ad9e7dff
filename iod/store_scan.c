/* store_scan.c - the listing of the subfiles at home (SUBFILES, resync,
 * scrub, the open's passes): every name under DIR/subfiles after a
 * cursor, sorted, from an index that the directories fill once (misplaced
 * or foreign names are skipped) and creations and removals keep up to
 * date ("index" below).
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

/* Every name at home, unsorted: the index's first fill. */
struct collect {
	uint64_t *objs;
	size_t n, cap;
};

static int collect_add(struct collect *c, uint64_t obj)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 4096;
		uint64_t *p = realloc(c->objs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		c->objs = p;
		c->cap = cap;
	}
	c->objs[c->n++] = obj;
	return 0;
}

static int obj_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int scan_cd(struct iod_store *s, int ab, int cd, struct collect *c)
{
	char rel[8];
	DIR *d;
	struct dirent *de;
	int rc;

	snprintf(rel, sizeof(rel), "%02x/%02x", ab, cd);
	rc = open_dir(s->sub_fd, rel, &d);
	if (rc <= 0)
		return rc;
	while (rc >= 0 && (de = readdir(d)) != NULL) {
		uint64_t ino;
		uint32_t column;
		unsigned a, b;

		if (parse_subname(de->d_name, &ino, &column) < 0 ||
		    store_check_ids(ino, column) < 0)
			continue;   /* not a name the store makes */
		store_sub_dirs(ino, &a, &b);
		if ((int)a != ab || (int)b != cd)
			continue;   /* misplaced: not ours to serve */
		rc = collect_add(c, store_obj(ino, column));
	}
	closedir(d);
	return rc < 0 ? rc : 0;
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

/* ----------------------------------------------------------------- index
 *
 * The listing is paged by a cursor (SUBFILES, resync, scrub, the open's
 * passes), and names are spread over up to 65,536 directories by a hash,
 * so a page read from the directories costs a walk of all of them: at
 * 33,000 subfiles a 256-name page took 0.3 s of the loop, a resync's first
 * count 35 s, long enough for the monitor to call the source down and the
 * resync to start over, forever; the scrub, which lists one subfile at a
 * time, walked them once per subfile.  So the tree is walked once, at the
 * first listing, into an ordered set of store_obj()s (common/oset.h); a
 * page is then a search in it.
 *
 *   X1  The index holds every name at home that may exist: filled from
 *       the directories, then every creation at home (store_get_sub) is
 *       added before anything can list it.  A name leaves it only when it
 *       is logically gone (store_unlink after its unlinkat;
 *       store_unlink_later, after which nothing opens the path before the
 *       unlink ran, S4).  The listing still asks each name's state
 *       (store_stat_logical).
 *   X2  Memory runs out on an add: the index is dropped (built = false)
 *       and the next listing walks the tree again.  Never a subset (X1).
 *
 * Loop thread only, as the fd cache. */

static void index_drop(struct store_index *x)
{
	tw_oset_free(&x->keys);
	x->built = false;
}

void store_index_free(struct iod_store *s)
{
	index_drop(&s->index);
}

static int index_build(struct iod_store *s)
{
	struct store_index *x = &s->index;
	struct collect c = { 0 };
	bool ab_present[256], cd_present[256];
	char rel[8];
	int rc;

	index_drop(x);
	rc = scan_dir_names(s->sub_fd, ".", ab_present);
	for (int ab = 0; rc == 0 && ab < 256; ab++) {
		if (!ab_present[ab])
			continue;
		snprintf(rel, sizeof(rel), "%02x", ab);
		rc = scan_dir_names(s->sub_fd, rel, cd_present);
		for (int cd = 0; rc == 0 && cd < 256; cd++)
			if (cd_present[cd])
				rc = scan_cd(s, ab, cd, &c);
	}
	if (rc == 0 && c.n) {
		/* unique: a key has one path, and misplaced names are skipped */
		qsort(c.objs, c.n, sizeof(*c.objs), obj_cmp);
		rc = tw_oset_load(&x->keys, c.objs, c.n);
	}
	free(c.objs);
	if (rc < 0)
		return rc;
	x->built = true;
	return 0;
}

void store_index_added(struct iod_store *s, uint64_t ino, uint32_t column)
{
	struct store_index *x = &s->index;

	if (x->built && tw_oset_add(&x->keys, store_obj(ino, column)) < 0)
		index_drop(x);   /* X2 */
}

void store_index_removed(struct iod_store *s, uint64_t ino, uint32_t column)
{
	if (s->index.built)
		tw_oset_del(&s->index.keys, store_obj(ino, column));
}

int store_scan(struct iod_store *s, uint64_t after_ino, uint32_t after_column,
	       size_t max, struct store_key **keys, size_t *n, bool *truncated)
{
	struct store_index *x = &s->index;
	uint64_t *objs;
	size_t got;
	int rc;

	*keys = NULL;
	*n = 0;
	*truncated = false;
	if (after_ino > IOD_MAX_INO)
		return 0;   /* nothing after it (a peer's cursor) */
	if (!x->built) {
		rc = index_build(s);
		if (rc < 0)
			return rc;
	}
	max = TW_MIN(max, x->keys.count);
	objs = malloc((max + 1) * sizeof(*objs));
	*keys = malloc((max + 1) * sizeof(**keys));
	if (!objs || !*keys) {
		free(objs);
		free(*keys);
		*keys = NULL;
		return -ENOMEM;
	}
	/* (ino, 255) is after every real column of ino, as any larger one */
	got = tw_oset_after(&x->keys, store_obj(after_ino,
				TW_MIN(after_column, 255u)), objs, max,
			    truncated);
	for (size_t i = 0; i < got; i++)
		(*keys)[i] = (struct store_key){ store_obj_ino(objs[i]),
						 store_obj_column(objs[i]) };
	free(objs);
	*n = got;
	return 0;
}
