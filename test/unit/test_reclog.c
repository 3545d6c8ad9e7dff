/* test_reclog.c - unit and crash tests of the record-mode journal
 * (journal/reclog.c).
 *
 * The crash tests follow SQLite's crash*.test: a fixed workload of appends,
 * syncs and snapshots runs with the N-th write-level operation failed, torn
 * or dropped (jnl_rec_inject_fault), for N = 1, 2, ... until the workload
 * completes without reaching the fault; then the handle is "crashed" (closed
 * without any further I/O: every record was already written with pwrite, so
 * closing the descriptors is what process death does), the log is reopened
 * and the invariants of journal/FORMAT.md are checked (cited as "inv N").
 * The other tests damage the files on purpose: torn tails at every byte,
 * garbage, flipped bytes, huge length fields, corrupt snapshots.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "journal.h"

/* Fault modes of jnl_rec_inject_fault (journal.h). */
#define FAULT_FAIL 0
#define FAULT_TEAR 1
#define FAULT_DROP 2

#define LOG_HDR 64u    /* FORMAT.md: log header bytes */
#define REC_HDR 32u    /* FORMAT.md: record header bytes (version 2) */

/* ------------------------------------------------------------ helpers */

struct rec {
	uint64_t seq;
	size_t len;
	uint8_t *data;
};

/* A history of records: the caller's "state" in these tests. */
struct hist {
	struct rec *v;
	size_t n, cap;
	int snap_calls;
	int replay_calls;
	int fail_at;          /* replay_cb fails on this call (1-based), 0 = never */
};

static void hist_push(struct hist *h, uint64_t seq, const void *data, size_t len)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 16;
		h->v = realloc(h->v, h->cap * sizeof(*h->v));
		cr_assert_not_null(h->v);
	}
	h->v[h->n].seq = seq;
	h->v[h->n].len = len;
	h->v[h->n].data = malloc(len ? len : 1);
	cr_assert_not_null(h->v[h->n].data);
	if (len)
		memcpy(h->v[h->n].data, data, len);
	h->n++;
}

static void hist_free(struct hist *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i].data);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

static void hist_truncate(struct hist *h, size_t n)
{
	for (size_t i = n; i < h->n; i++)
		free(h->v[i].data);
	if (n < h->n)
		h->n = n;
}

/* Serialised state: u64 count, then per record u64 seq, u64 len, bytes. */
static uint8_t *hist_serialise(const struct hist *h, size_t *len)
{
	size_t total = 8, off = 0;
	uint8_t *buf;

	for (size_t i = 0; i < h->n; i++)
		total += 16 + h->v[i].len;
	buf = malloc(total);
	cr_assert_not_null(buf);
	memcpy(buf, &h->n, 8);
	off = 8;
	for (size_t i = 0; i < h->n; i++) {
		uint64_t l = h->v[i].len;

		memcpy(buf + off, &h->v[i].seq, 8);
		memcpy(buf + off + 8, &l, 8);
		memcpy(buf + off + 16, h->v[i].data, h->v[i].len);
		off += 16 + h->v[i].len;
	}
	*len = total;
	return buf;
}

static int snap_cb(const void *buf, size_t len, void *arg)
{
	struct hist *h = arg;
	const uint8_t *p = buf;
	uint64_t n;
	size_t off = 8;

	h->snap_calls++;
	hist_truncate(h, 0);
	if (len < 8)
		return -EPROTO;
	memcpy(&n, p, 8);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq, l;

		if (len - off < 16)
			return -EPROTO;
		memcpy(&seq, p + off, 8);
		memcpy(&l, p + off + 8, 8);
		if (len - off - 16 < l)
			return -EPROTO;
		hist_push(h, seq, p + off + 16, l);
		off += 16 + l;
	}
	return off == len ? 0 : -EPROTO;
}

static int replay_cb(uint64_t seq, const void *buf, size_t len, void *arg)
{
	struct hist *h = arg;

	h->replay_calls++;
	if (h->fail_at && h->replay_calls == h->fail_at)
		return -ECANCELED;
	/* inv 8: records come in seq order, contiguous after the state. */
	if (h->n > 0 && seq != h->v[h->n - 1].seq + 1)
		return -EILSEQ;
	hist_push(h, seq, buf, len);
	return 0;
}

static void assert_hist_eq(const struct hist *got, const struct hist *want,
			   size_t want_n, const char *what)
{
	cr_assert_eq(got->n, want_n, "%s: replayed %zu records, want %zu",
		     what, got->n, want_n);
	for (size_t i = 0; i < want_n; i++) {
		cr_assert_eq(got->v[i].seq, want->v[i].seq, "%s: record %zu seq",
			     what, i);
		cr_assert_eq(got->v[i].len, want->v[i].len, "%s: record %zu len",
			     what, i);
		cr_assert(memcmp(got->v[i].data, want->v[i].data,
				 want->v[i].len) == 0, "%s: record %zu bytes",
			  what, i);
	}
}

/* Deterministic record i: lengths vary, one empty, one larger than a page. */
static size_t rec_len(unsigned i)
{
	if (i == 3)
		return 0;
	if (i == 7)
		return 5000;
	return (i * 37u) % 300u + 1;
}

static void rec_fill(unsigned i, uint8_t *buf, size_t len)
{
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(i * 131u + k * 7u + (k >> 8));
}

static char *make_dir(void)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (base == NULL || *base == '\0')
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	cr_assert(asprintf(&path, "%s/reclog-XXXXXX", base) > 0);
	cr_assert_not_null(mkdtemp(path));
	return path;
}

static void rm_dir(char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		cr_assert_eq(unlinkat(dirfd(d), e->d_name, 0), 0);
	}
	closedir(d);
	cr_assert_eq(rmdir(path), 0);
	free(path);
}

static char *file_in(const char *dir, const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static uint8_t *read_whole(const char *dir, const char *name, size_t *len)
{
	char *p = file_in(dir, name);
	struct stat st;
	uint8_t *buf;
	int fd = open(p, O_RDONLY);

	cr_assert(fd >= 0, "open %s", p);
	cr_assert_eq(fstat(fd, &st), 0);
	buf = malloc(st.st_size ? st.st_size : 1);
	cr_assert_not_null(buf);
	cr_assert_eq(tw_pread_full(fd, buf, st.st_size, 0), st.st_size);
	close(fd);
	free(p);
	*len = st.st_size;
	return buf;
}

static void write_whole(const char *dir, const char *name, const void *buf,
			size_t len)
{
	char *p = file_in(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0);
	cr_assert_eq(tw_pwrite_all(fd, buf, len, 0), 0);
	close(fd);
	free(p);
}

static uint64_t file_size(const char *dir, const char *name)
{
	char *p = file_in(dir, name);
	struct stat st;

	cr_assert_eq(stat(p, &st), 0);
	free(p);
	return st.st_size;
}

static int open_into(const char *dir, struct hist *h, struct jnl_rec **j)
{
	hist_truncate(h, 0);
	h->snap_calls = h->replay_calls = 0;
	*j = NULL;
	return jnl_rec_open(dir, snap_cb, replay_cb, h, j);
}

/* Appends records first..first+n-1 and pushes them to `want`. */
static void append_n(struct jnl_rec *j, struct hist *want, unsigned first,
		     unsigned n)
{
	uint8_t buf[5000];

	for (unsigned i = first; i < first + n; i++) {
		size_t len = rec_len(i);
		uint64_t seq = 0;

		rec_fill(i, buf, len);
		cr_assert_eq(jnl_rec_append(j, buf, len, &seq), 0);
		if (want->n)
			cr_assert_eq(seq, want->v[want->n - 1].seq + 1,
				     "inv 2: seqs contiguous");
		hist_push(want, seq, buf, len);
	}
}

/* Offset of record k (0-based) in a log whose records are first.. */
static uint64_t rec_off(unsigned first, unsigned k)
{
	uint64_t off = LOG_HDR;

	for (unsigned i = first; i < first + k; i++)
		off += REC_HDR + rec_len(i);
	return off;
}

/* --------------------------------------------------------- basic tests */

Test(reclog, roundtrip)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	uint64_t bytes = 0, seq;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(got.snap_calls, 0, "no snapshot, no snap_cb");
	cr_assert_eq(got.n, 0);
	cr_assert_eq(jnl_rec_log_bytes(j), 0);
	append_n(j, &want, 0, 10);
	cr_assert_eq(want.v[0].seq, 1, "first seq is 1");
	for (unsigned i = 0; i < 10; i++)
		bytes += REC_HDR + rec_len(i);
	cr_assert_eq(jnl_rec_log_bytes(j), bytes);
	cr_assert_eq(jnl_rec_sync(j), 0);
	jnl_rec_close(j);

	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "reopen");
	cr_assert_eq(jnl_rec_log_bytes(j), bytes);
	cr_assert_eq(jnl_rec_append(j, "x", 1, &seq), 0);
	cr_assert_eq(seq, 11, "inv 10: next seq follows the last record");
	cr_assert_eq(jnl_rec_append(j, NULL, 0, NULL), 0);
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, snapshot_roundtrip)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	uint8_t *state;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	/* A snapshot of the empty state: seq 0, log base 1. */
	state = hist_serialise(&want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
	free(state);
	append_n(j, &want, 0, 5);
	state = hist_serialise(&want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
	free(state);
	cr_assert_eq(jnl_rec_log_bytes(j), 0, "log trimmed by the snapshot");
	append_n(j, &want, 5, 3);
	jnl_rec_close(j);

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(got.snap_calls, 1);
	cr_assert_eq(got.replay_calls, 3, "only records after the snapshot");
	assert_hist_eq(&got, &want, want.n, "snapshot + log");
	append_n(j, &want, 8, 1);
	cr_assert_eq(want.v[want.n - 1].seq, 9);
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, creates_its_directory)
{
	char *dir = make_dir(), *sub = file_in(dir, "mgrd-journal");
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;

	cr_assert_eq(open_into(sub, &got, &j), 0);
	append_n(j, &want, 0, 2);
	jnl_rec_close(j);
	cr_assert_eq(open_into(sub, &got, &j), 0);
	assert_hist_eq(&got, &want, 2, "in a created directory");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(sub);
	rm_dir(dir);
}

Test(reclog, second_owner_is_refused)
{
	char *dir = make_dir();
	struct hist got = { 0 };
	struct jnl_rec *j, *k;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(jnl_rec_open(dir, NULL, NULL, NULL, &k), -EBUSY);
	jnl_rec_close(j);
	cr_assert_eq(jnl_rec_open(dir, NULL, NULL, NULL, &k), 0);
	jnl_rec_close(k);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, bad_arguments)
{
	char *dir = make_dir();
	struct hist got = { 0 };
	struct jnl_rec *j;
	static uint8_t big[JNL_REC_MAX + 1];
	uint64_t seq;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(jnl_rec_append(j, big, JNL_REC_MAX + 1, NULL), -EMSGSIZE);
	cr_assert_eq(jnl_rec_append(j, NULL, 5, NULL), -EINVAL);
	cr_assert_eq(jnl_rec_snapshot(j, NULL, 5), -EINVAL);
	/* Rejected arguments do not abort the log. */
	cr_assert_eq(jnl_rec_append(j, "ok", 2, &seq), 0);
	cr_assert_eq(seq, 1);
	jnl_rec_close(j);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, record_of_4MiB)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	uint8_t *big = malloc(JNL_REC_MAX);
	uint64_t seq;

	cr_assert_not_null(big);
	for (size_t i = 0; i < JNL_REC_MAX; i++)
		big[i] = (uint8_t)(i * 2654435761u >> 13);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 2);
	cr_assert_eq(jnl_rec_append(j, big, JNL_REC_MAX, &seq), 0);
	hist_push(&want, seq, big, JNL_REC_MAX);
	append_n(j, &want, 2, 2);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "4 MiB record");
	jnl_rec_close(j);
	free(big);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* ---------------------------------------- a sync off the owner thread */

/* synced_to of record k (0-based) of a log whose records are 0.. */
static uint64_t synced_to_of(const uint8_t *image, size_t len, unsigned k)
{
	uint64_t off = rec_off(0, k) + 16, v;

	cr_assert_leq(off + 8, len);
	memcpy(&v, image + off, 8);
	return le64toh(v);
}

static void *run_sync(void *arg)
{
	jnl_rec_sync_run(arg);
	return NULL;
}

/* Records appended while the fdatasync runs on another thread are not
 * counted as synced by it (inv 12); those taken at the start are, once
 * done. */
Test(reclog, background_sync_counts_only_what_it_took)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec_bgsync b;
	struct jnl_rec *j;
	pthread_t t;
	uint8_t *image;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 0, "nothing to sync yet");
	append_n(j, &want, 0, 3);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	cr_assert_eq(b.upto, 3);
	/* an open file of its own (the log's is read-write): a writeback
	 * error then reaches the owner's fdatasync as well as this one */
	cr_assert_eq(fcntl(b.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	cr_assert_eq(pthread_create(&t, NULL, run_sync, &b), 0);
	append_n(j, &want, 3, 2);       /* seqs 4, 5 while it runs */
	cr_assert_eq(pthread_join(t, NULL), 0);
	append_n(j, &want, 5, 1);       /* before done: still unsynced */
	cr_assert_eq(jnl_rec_synced_seq(j), 0, "not before done");
	cr_assert_eq(jnl_rec_sync_done(j, &b), 0);
	cr_assert_eq(b.fd, -1, "its descriptor closed");
	cr_assert_eq(jnl_rec_synced_seq(j), 3, "only what it took");
	append_n(j, &want, 6, 1);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	cr_assert_eq(b.upto, 7);
	jnl_rec_sync_run(&b);
	cr_assert_eq(jnl_rec_sync_done(j, &b), 0);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 0, "all synced");
	cr_assert_eq(jnl_rec_synced_seq(j), 7);
	append_n(j, &want, 7, 1);
	jnl_rec_close(j);

	image = read_whole(dir, "journal", &len);
	for (unsigned k = 0; k <= 5; k++)
		cr_assert_eq(synced_to_of(image, len, k), 0, "record %u", k);
	cr_assert_eq(synced_to_of(image, len, 6), 3);
	cr_assert_eq(synced_to_of(image, len, 7), 7);
	free(image);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "reopen");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* A log replaced between start and done (here by another mgrd's snapshot
 * at a lower seq, inv 14) keeps its own synced_seq: the sync was of a
 * file no longer in use, and its seqs are another history's. */
Test(reclog, background_sync_of_a_replaced_log)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 }, other = { 0 };
	struct jnl_rec_bgsync b;
	struct jnl_rec *j;
	uint8_t *state, *image;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 10);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	cr_assert_eq(b.upto, 10);
	for (unsigned i = 0; i < 2; i++)
		hist_push(&other, i + 1, "z", 1);
	state = hist_serialise(&other, &len);
	cr_assert_eq(jnl_rec_snapshot_at(j, state, len, 2), 0);
	free(state);
	jnl_rec_sync_run(&b);
	cr_assert_eq(b.rc, 0);
	cr_assert_eq(jnl_rec_sync_done(j, &b), 0);
	cr_assert_eq(jnl_rec_append(j, "a", 1, NULL), 0);   /* seq 3 */
	jnl_rec_close(j);
	image = read_whole(dir, "journal", &len);
	cr_assert_eq(len, LOG_HDR + REC_HDR + 1);
	cr_assert_eq(synced_to_of(image, len, 0), 2,
		     "the snapshot's seq, not the old log's 10");
	free(image);
	hist_free(&want);
	hist_free(&got);
	hist_free(&other);
	rm_dir(dir);
}

/* A snapshot at the current seq, installed while a background sync of the
 * log it replaces runs, counts as synced up to its seq: that sync's done
 * is ignored (another log), and the snapshot holds those records synced.
 * mgrd's inode ranges count on it (server.c mgr_srv_ino_reserve). */
Test(reclog, snapshot_counts_as_synced)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec_bgsync b;
	struct jnl_rec *j;
	uint8_t *state;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 4);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	append_n(j, &want, 4, 2);
	cr_assert_eq(jnl_rec_synced_seq(j), 0);
	state = hist_serialise(&want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
	free(state);
	cr_assert_eq(jnl_rec_synced_seq(j), 6, "the snapshot's seq");
	jnl_rec_sync_run(&b);
	cr_assert_eq(jnl_rec_sync_done(j, &b), 0);
	cr_assert_eq(jnl_rec_synced_seq(j), 6, "not lowered by the old sync");
	append_n(j, &want, 6, 1);
	cr_assert_eq(jnl_rec_synced_seq(j), 6);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "reopen");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* A failed fdatasync aborts the log as jnl_rec_sync's would (inv 5); a
 * forgotten one just closes its descriptor. */
Test(reclog, background_sync_failure_aborts)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec_bgsync b;
	struct jnl_rec *j;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 2);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	jnl_rec_sync_forget(&b);
	cr_assert_eq(b.fd, -1);
	jnl_rec_inject_fault(j, 1, FAULT_TEAR);
	cr_assert_eq(jnl_rec_sync_start(j, &b), 1);
	jnl_rec_sync_run(&b);
	cr_assert_eq(b.rc, -EIO);
	cr_assert_eq(jnl_rec_sync_done(j, &b), -EIO);
	cr_assert_eq(jnl_rec_append(j, "x", 1, NULL), -EIO, "aborted");
	cr_assert_eq(jnl_rec_sync_start(j, &b), -EIO);
	cr_assert_eq(b.fd, -1);
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* ------------------------------------------------------ damaged logs */

/* Writes a log of records 0..n-1 in `dir`, with a jnl_rec_sync after the
 * first `synced` of them (none when 0); returns its bytes. */
static uint8_t *make_log_synced(const char *dir, unsigned n, unsigned synced,
				struct hist *want, size_t *len)
{
	struct hist got = { 0 };
	struct jnl_rec *j;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, want, 0, synced);
	if (synced > 0)
		cr_assert_eq(jnl_rec_sync(j), 0);
	append_n(j, want, synced, n - synced);
	jnl_rec_close(j);
	hist_free(&got);
	return read_whole(dir, "journal", len);
}

/* A log of records 0..n-1 none of which was synced. */
static uint8_t *make_log(const char *dir, unsigned n, struct hist *want,
			 size_t *len)
{
	return make_log_synced(dir, n, 0, want, len);
}

/* Replays `image` as the log of a fresh directory; expects the first
 * `want_n` records of `want` and the file cut at `want_size`; then checks
 * that a second replay gives the same (inv 8) and that an append follows the
 * last record (inv 10). */
static void replay_image(const uint8_t *image, size_t len,
			 const struct hist *want, size_t want_n,
			 uint64_t want_size, const char *what)
{
	char *dir = make_dir();
	struct hist got = { 0 };
	struct jnl_rec *j;
	uint64_t seq;

	write_whole(dir, "journal", image, len);
	cr_assert_eq(open_into(dir, &got, &j), 0, "%s: open", what);
	assert_hist_eq(&got, want, want_n, what);
	cr_assert_eq(file_size(dir, "journal"), want_size,
		     "%s: file cut at the end of the last valid record", what);
	jnl_rec_close(j);

	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, want, want_n, "second replay (inv 8)");
	cr_assert_eq(jnl_rec_append(j, "z", 1, &seq), 0);
	cr_assert_eq(seq, want_n + 1, "%s: inv 10", what);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(got.n, want_n + 1);
	jnl_rec_close(j);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, torn_tail_at_every_byte)
{
	char *dir = make_dir();
	struct hist want = { 0 };
	size_t len;
	const unsigned n = 6;
	uint8_t *image = make_log(dir, n, &want, &len);
	uint64_t last = rec_off(0, n - 1);

	cr_assert_eq(len, rec_off(0, n));
	for (uint64_t cut = last; cut < len; cut++)
		replay_image(image, cut, &want, n - 1, last, "torn tail");
	replay_image(image, len, &want, n, len, "whole log");
	/* A log cut inside its header is not a torn tail: it never
	 * happens (written as journal.tmp, inv 1), so it is refused. */
	{
		char *d2 = make_dir();
		struct hist got = { 0 };
		struct jnl_rec *j;

		write_whole(d2, "journal", image, LOG_HDR - 1);
		cr_assert_eq(open_into(d2, &got, &j), -EBADMSG);
		hist_free(&got);
		rm_dir(d2);
	}
	free(image);
	hist_free(&want);
	rm_dir(dir);
}

Test(reclog, garbage_after_the_end)
{
	char *dir = make_dir(), *other = make_dir();
	struct hist want = { 0 }, want2 = { 0 };
	size_t len, len2;
	const unsigned n = 5;
	uint8_t *image = make_log(dir, n, &want, &len);
	uint8_t *image2 = make_log(other, n + 1, &want2, &len2);
	static const size_t glen[] = { 1, 23, 24, 25, 100, 5000, 70000 };
	uint8_t *buf = malloc(len + 70000 + 4096);

	cr_assert_not_null(buf);
	srand(42);
	for (size_t g = 0; g < TW_ARRAY_SIZE(glen); g++) {
		memcpy(buf, image, len);
		for (size_t i = 0; i < glen[g]; i++)
			buf[len + i] = (uint8_t)rand();
		replay_image(buf, len + glen[g], &want, n, len, "random garbage");
		/* Zeros, as a hole left by a lost write looks. */
		memset(buf + len, 0, glen[g]);
		replay_image(buf, len + glen[g], &want, n, len, "zeros");
	}
	/* A plausible header: right magic and seq, bad checksum. */
	memcpy(buf, image, len);
	memcpy(buf + len, image2 + rec_off(0, n), REC_HDR + rec_len(n));
	buf[len + REC_HDR] ^= 0xff;
	replay_image(buf, len + REC_HDR + rec_len(n), &want, n, len,
		     "bad crc");
	/* A valid record with the right seq from another log: its CRC is
	 * seeded with the other log id, so it must not be replayed. */
	memcpy(buf + len, image2 + rec_off(0, n), REC_HDR + rec_len(n));
	replay_image(buf, len + REC_HDR + rec_len(n), &want, n, len,
		     "record of another log");
	/* Valid records of this very log at the wrong place (a duplicate of
	 * the last, a stale first): their CRC matches, only the seq rule
	 * (inv 2) stops them. */
	for (unsigned k = 0; k < n; k += n - 1) {
		uint64_t o = rec_off(0, k), l = REC_HDR + rec_len(k);

		memcpy(buf, image, len);
		memcpy(buf + len, image + o, l);
		replay_image(buf, len + l, &want, n, len, "stale seq");
	}
	/* Sanity: in its own log that very record is valid. */
	replay_image(image2, len2, &want2, n + 1, len2, "other log");
	free(buf);
	free(image);
	free(image2);
	hist_free(&want);
	hist_free(&want2);
	rm_dir(dir);
	rm_dir(other);
}

/* The one file of `dir` whose name starts with prefix (asserts there is
 * exactly one); NULL when there is none. */
static char *only_file_like(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *found = NULL;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		cr_assert_null(found, "one %s* file", prefix);
		found = strdup(e->d_name);
	}
	closedir(d);
	return found;
}

/* `image` holds a damaged record with valid ones after it (inv 11): open
 * refuses with -ENOTRECOVERABLE and leaves the file as it was, and again;
 * with JNL_REC_ACCEPT_CORRUPT it copies the file aside, whole, and cuts it
 * at the damage (want_n records, want_size bytes), as a torn tail. */
static void replay_damaged_image(const uint8_t *image, size_t len,
				 const struct hist *want, size_t want_n,
				 uint64_t want_size, const char *what)
{
	char *dir = make_dir(), *copy;
	struct hist got = { 0 };
	struct jnl_rec *j;
	uint8_t *now;
	size_t now_len;
	uint64_t seq;

	write_whole(dir, "journal", image, len);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(open_into(dir, &got, &j), -ENOTRECOVERABLE,
			     "%s: refused (inv 11)", what);
		cr_assert_null(j);
		now = read_whole(dir, "journal", &now_len);
		cr_assert(now_len == len && memcmp(now, image, len) == 0,
			  "%s: the file is untouched", what);
		free(now);
		cr_assert_null(only_file_like(dir, "journal.corrupt-"));
	}

	hist_truncate(&got, 0);
	cr_assert_eq(jnl_rec_open_flags(dir, JNL_REC_ACCEPT_CORRUPT, snap_cb,
					replay_cb, &got, &j), 0,
		     "%s: accepted", what);
	assert_hist_eq(&got, want, want_n, what);
	cr_assert_eq(file_size(dir, "journal"), want_size,
		     "%s: cut at the damage", what);
	cr_assert_eq(jnl_rec_append(j, "z", 1, &seq), 0);
	cr_assert_eq(seq, want_n + 1, "%s: inv 10", what);
	jnl_rec_close(j);
	copy = only_file_like(dir, "journal.corrupt-");
	cr_assert_not_null(copy, "%s: a copy was kept", what);
	now = read_whole(dir, copy, &now_len);
	cr_assert(now_len == len && memcmp(now, image, len) == 0,
		  "%s: the copy is the damaged file, whole", what);
	free(now);
	free(copy);
	cr_assert_eq(open_into(dir, &got, &j), 0, "%s: reopen", what);
	cr_assert_eq(got.n, want_n + 1);
	jnl_rec_close(j);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, corrupt_byte_in_the_middle)
{
	char *dir = make_dir();
	struct hist want = { 0 };
	size_t len;
	const unsigned n = 8, m = 4;
	/* Records 0..m synced (seq m + 1 is record m), so every later record
	 * says synced_to >= m + 1 (inv 12). */
	uint8_t *image = make_log_synced(dir, n, m + 1, &want, &len);
	uint64_t from = rec_off(0, m), to = rec_off(0, m + 1);

	/* Every byte of record m (header and payload), two bits each: valid
	 * records written after it was synced follow, so it is damage,
	 * never a torn tail. */
	for (uint64_t off = from; off < to; off++) {
		for (int bit = 0; bit < 8; bit += 7) {
			image[off] ^= (uint8_t)(1u << bit);
			replay_damaged_image(image, len, &want, m, from,
					     "flipped bit");
			image[off] ^= (uint8_t)(1u << bit);
		}
	}
	/* The same damage in the last record is a torn tail (nothing valid
	 * follows): cut as before. */
	image[rec_off(0, n - 1) + REC_HDR + 3] ^= 1;
	replay_image(image, len, &want, n - 1, rec_off(0, n - 1),
		     "flipped bit in the last record");
	/* A hole of zeros in the middle where a synced record was is
	 * damage too. */
	memset(image + from, 0, to - from);
	replay_damaged_image(image, len, &want, m, from, "zeroed record");
	free(image);
	hist_free(&want);
	rm_dir(dir);
}

/* Inv 12, the power loss of a disk that does not keep write order: record
 * m was written, not synced, and lost (a hole of zeros), torn, or left
 * with a bad byte, while records m+1.. written after it, none synced,
 * survived.  Nothing synced is lost by cutting at m, so open cuts there as
 * at a torn tail and starts; records 0..m-1 (and m-1 itself synced) stay. */
Test(reclog, unsynced_record_lost_before_later_ones)
{
	char *dir = make_dir();
	struct hist want = { 0 };
	size_t len;
	const unsigned n = 8, m = 4;
	uint8_t *image = make_log_synced(dir, n, m, &want, &len);
	uint64_t from = rec_off(0, m), to = rec_off(0, m + 1);

	for (uint64_t off = from; off < to; off += 7) {
		image[off] ^= 0x10;
		replay_image(image, len, &want, m, from,
			     "bad byte in an unsynced record");
		image[off] ^= 0x10;
	}
	/* torn: the second half of the write never landed */
	uint8_t *torn = malloc(len);
	cr_assert_not_null(torn);
	memcpy(torn, image, len);
	memset(torn + from + (to - from) / 2, 0, (to - from) - (to - from) / 2);
	replay_image(torn, len, &want, m, from, "torn unsynced record");
	/* lost whole */
	memset(torn + from, 0, to - from);
	replay_image(torn, len, &want, m, from, "lost unsynced record");
	/* lost, and so is a later one: still only unsynced records */
	memset(torn + rec_off(0, m + 2), 0, rec_off(0, m + 3) - rec_off(0, m + 2));
	replay_image(torn, len, &want, m, from, "two lost unsynced records");
	free(torn);
	/* Never synced at all (the first record lost). */
	free(image);
	hist_free(&want);
	rm_dir(dir);
	dir = make_dir();
	image = make_log(dir, n, &want, &len);
	memset(image + rec_off(0, 0), 0, rec_off(0, 1) - rec_off(0, 0));
	replay_image(image, len, &want, 0, rec_off(0, 0),
		     "first record lost, none synced");
	free(image);
	hist_free(&want);
	rm_dir(dir);
}

/* A version 1 log (24-byte record headers, no synced_to) as an older mgrd
 * wrote it: records 0..n-1 of rec_fill, log id all 0x5a, base seq 1. */
static uint8_t *make_v1_log(unsigned n, size_t *len)
{
	uint8_t id[16], buf[5000], *img;
	uint32_t seed, crc;
	size_t off = LOG_HDR, cap = LOG_HDR;

	for (unsigned i = 0; i < n; i++)
		cap += 24 + rec_len(i);
	img = calloc(1, cap);
	cr_assert_not_null(img);
	memset(id, 0x5a, sizeof(id));
	memcpy(img, "TWRL", 4);
	img[4] = 1;                         /* version 1 */
	img[6] = LOG_HDR;                   /* hdr_size */
	memcpy(img + 8, id, 16);
	img[24] = 1;                        /* base_seq */
	crc = htole32(tw_crc32c(0, img, 60));
	memcpy(img + 60, &crc, 4);
	seed = tw_crc32c(0, id, 16);
	for (unsigned i = 0; i < n; i++) {
		uint32_t rlen = (uint32_t)rec_len(i), le;
		uint64_t seq = htole64(i + 1);

		rec_fill(i, buf, rlen);
		memcpy(img + off, "TWRR", 4);
		img[off + 4] = 1;           /* type */
		memcpy(img + off + 8, &seq, 8);
		le = htole32(rlen);
		memcpy(img + off + 16, &le, 4);
		memcpy(img + off + 24, buf, rlen);
		crc = tw_crc32c(tw_crc32c(seed, img + off, 20), buf, rlen);
		le = htole32(crc);
		memcpy(img + off + 20, &le, 4);
		off += 24 + rlen;
	}
	*len = off;
	return img;
}

/* FORMAT.md "Versions and compatibility" (inv 13): a version 1 log is
 * read with the rule it was written under (a bad record ends it, whatever
 * follows: it does not say what was synced), then rewritten as version 2
 * with the same records before the first append. */
Test(reclog, version_1_log_is_read_and_upgraded)
{
	const unsigned n = 6, m = 2;
	struct hist want = { 0 }, got = { 0 };
	uint8_t buf[5000], *img, *now;
	size_t len, now_len;
	struct jnl_rec *j;
	uint64_t seq;

	for (unsigned i = 0; i < n; i++) {
		rec_fill(i, buf, rec_len(i));
		hist_push(&want, i + 1, buf, rec_len(i));
	}
	for (int damaged = 0; damaged < 2; damaged++) {
		char *dir = make_dir();
		size_t keep = damaged ? m : n;

		img = make_v1_log(n, &len);
		if (damaged) {
			size_t from = LOG_HDR;

			for (unsigned i = 0; i < m; i++)
				from += 24 + rec_len(i);
			memset(img + from, 0, 24 + rec_len(m));
		}
		write_whole(dir, "journal", img, len);
		hist_truncate(&got, 0);
		cr_assert_eq(open_into(dir, &got, &j), 0, "v1 open");
		assert_hist_eq(&got, &want, keep, "v1 records");
		cr_assert_eq(jnl_rec_append(j, "z", 1, &seq), 0);
		cr_assert_eq(seq, keep + 1, "v1: next seq");
		jnl_rec_close(j);
		now = read_whole(dir, "journal", &now_len);
		cr_assert_eq(now[4], 3, "upgraded to version 3");
		cr_assert_eq(now_len, rec_off(0, (unsigned)keep) + REC_HDR + 1,
			     "v2 records");
		free(now);
		hist_truncate(&got, 0);
		cr_assert_eq(open_into(dir, &got, &j), 0);
		cr_assert_eq(got.n, keep + 1);
		hist_truncate(&got, keep);
		assert_hist_eq(&got, &want, keep, "after the upgrade");
		jnl_rec_close(j);
		free(img);
		rm_dir(dir);
	}
	hist_free(&want);
	hist_free(&got);
}

Test(reclog, huge_length_fields_do_not_allocate)
{
	char *dir = make_dir();
	struct hist want = { 0 };
	size_t len;
	const unsigned n = 3;
	uint8_t *image = make_log(dir, n, &want, &len);
	size_t big = len + REC_HDR + JNL_REC_MAX + 2;
	uint8_t *buf = calloc(1, big);
	static const uint32_t lens[] = { 0xffffffffu, 0x80000000u,
					 JNL_REC_MAX + 1 };

	cr_assert_not_null(buf);
#if !defined(__SANITIZE_ADDRESS__)
	{
		/* With 256 MiB of address space to spare, a 4 GiB
		 * allocation sized by the length field would fail open
		 * with -ENOMEM (inv 9). */
		struct rlimit rl;
		unsigned long pages = 0;
		FILE *f = fopen("/proc/self/statm", "r");

		cr_assert_not_null(f);
		cr_assert_eq(fscanf(f, "%lu", &pages), 1);
		fclose(f);
		rl.rlim_cur = rl.rlim_max = pages * (rlim_t)sysconf(_SC_PAGESIZE)
			+ (256u << 20);
		cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
	}
#endif
	for (size_t k = 0; k < TW_ARRAY_SIZE(lens); k++) {
		memcpy(buf, image, len);
		memset(buf + len, 0x5a, big - len);
		tw_put_le32(buf + len, 0x52525754u);       /* "TWRR" */
		buf[len + 4] = 1;                       /* type */
		buf[len + 5] = buf[len + 6] = buf[len + 7] = 0;
		tw_put_le64(buf + len + 8, n + 1);         /* the right seq */
		tw_put_le32(buf + len + 16, lens[k]);
		/* The file really holds JNL_REC_MAX + 1 bytes after the
		 * header, so only the limit check can stop the last case. */
		replay_image(buf, big, &want, n, len, "huge length");
	}
	free(buf);
	free(image);
	hist_free(&want);
	rm_dir(dir);
}

Test(reclog, replay_is_idempotent)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 }, got2 = { 0 };
	struct jnl_rec *j;
	uint8_t *state, *a, *b;
	size_t len, alen, blen;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 4);
	state = hist_serialise(&want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
	free(state);
	append_n(j, &want, 4, 4);
	jnl_rec_close(j);
	/* Tear the last record and add garbage. */
	a = read_whole(dir, "journal", &alen);
	a = realloc(a, alen + 10);
	memset(a + alen - 3, 0xee, 13);
	write_whole(dir, "journal", a, alen + 10);
	free(a);

	cr_assert_eq(open_into(dir, &got, &j), 0);
	jnl_rec_close(j);
	a = read_whole(dir, "journal", &alen);
	cr_assert_eq(open_into(dir, &got2, &j), 0);
	jnl_rec_close(j);
	b = read_whole(dir, "journal", &blen);
	assert_hist_eq(&got, &want, want.n - 1, "first replay");
	assert_hist_eq(&got2, &got, got.n, "second replay (inv 8)");
	cr_assert_eq(alen, blen);
	cr_assert(memcmp(a, b, alen) == 0, "the second replay writes nothing");
	free(a);
	free(b);
	hist_free(&want);
	hist_free(&got);
	hist_free(&got2);
	rm_dir(dir);
}

Test(reclog, callback_error_stops_replay)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	size_t len;
	uint8_t *image = make_log(dir, 5, &want, &len);

	got.fail_at = 3;
	cr_assert_eq(open_into(dir, &got, &j), -ECANCELED);
	cr_assert_null(j);
	cr_assert_eq(got.replay_calls, 3, "no callback after the error");
	got.fail_at = 0;
	cr_assert_eq(open_into(dir, &got, &j), 0, "nothing was lost");
	assert_hist_eq(&got, &want, 5, "after callback error");
	jnl_rec_close(j);
	free(image);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* ---------------------------------------------------- damaged snapshot */

/* A directory holding a snapshot of records 0..3 and a log of 4..5. */
static void make_snapshotted(const char *dir, struct hist *want)
{
	struct hist got = { 0 };
	struct jnl_rec *j;
	uint8_t *state;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, want, 0, 4);
	state = hist_serialise(want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
	free(state);
	append_n(j, want, 4, 2);
	jnl_rec_close(j);
	hist_free(&got);
}

Test(reclog, corrupt_snapshot_is_refused)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	size_t len;
	uint8_t *snap;

	make_snapshotted(dir, &want);
	snap = read_whole(dir, "snapshot", &len);
	/* Every byte flipped, one at a time. */
	for (size_t off = 0; off < len; off++) {
		snap[off] ^= 0x10;
		write_whole(dir, "snapshot", snap, len);
		/* Bytes 4-5 are the version: unsupported, not corrupt. */
		cr_assert_eq(open_into(dir, &got, &j),
			     off == 4 || off == 5 ? -EPROTONOSUPPORT : -EBADMSG,
			     "flipped byte %zu", off);
		cr_assert_eq(got.snap_calls + got.replay_calls, 0,
			     "no callback on a corrupt snapshot");
		snap[off] ^= 0x10;
	}
	/* Truncated, extended. */
	write_whole(dir, "snapshot", snap, len - 1);
	cr_assert_eq(open_into(dir, &got, &j), -EBADMSG);
	write_whole(dir, "snapshot", snap, 10);
	cr_assert_eq(open_into(dir, &got, &j), -EBADMSG);
	snap = realloc(snap, len + 1);
	snap[len] = 0;
	write_whole(dir, "snapshot", snap, len + 1);
	cr_assert_eq(open_into(dir, &got, &j), -EBADMSG);
	/* Restored: everything is back. */
	write_whole(dir, "snapshot", snap, len);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "restored snapshot");
	jnl_rec_close(j);
	free(snap);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

Test(reclog, missing_or_corrupt_files_are_refused)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	size_t slen, llen;
	uint8_t *snap, *log;
	char *p;

	make_snapshotted(dir, &want);
	snap = read_whole(dir, "snapshot", &slen);
	log = read_whole(dir, "journal", &llen);

	/* Log header damaged: the log is never torn there (inv 1). */
	for (size_t off = 0; off < LOG_HDR; off++) {
		log[off] ^= 1;
		write_whole(dir, "journal", log, llen);
		/* Byte 4: version 3 becomes 2, a known version whose
		 * header then fails its CRC. */
		cr_assert_eq(open_into(dir, &got, &j),
			     off == 5 ? -EPROTONOSUPPORT : -EBADMSG,
			     "log header byte %zu", off);
		log[off] ^= 1;
	}
	write_whole(dir, "journal", log, llen);

	/* Snapshot without log. */
	p = file_in(dir, "journal");
	cr_assert_eq(unlink(p), 0);
	free(p);
	cr_assert_eq(open_into(dir, &got, &j), -EBADMSG);
	write_whole(dir, "journal", log, llen);

	/* Log starting after seq 1 without snapshot (inv 6). */
	p = file_in(dir, "snapshot");
	cr_assert_eq(unlink(p), 0);
	free(p);
	cr_assert_eq(open_into(dir, &got, &j), -EBADMSG);
	write_whole(dir, "snapshot", snap, slen);

	/* Leftover temporaries are ignored and removed (inv 7). */
	write_whole(dir, "snapshot.tmp", "garbage", 7);
	write_whole(dir, "journal.tmp", "garbage", 7);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "with leftovers");
	jnl_rec_close(j);
	p = file_in(dir, "snapshot.tmp");
	cr_assert_neq(access(p, F_OK), 0);
	free(p);
	p = file_in(dir, "journal.tmp");
	cr_assert_neq(access(p, F_OK), 0);
	free(p);

	free(snap);
	free(log);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* A crash between the snapshot's rename and the log's, followed by the loss
 * of the old log's unsynced tail (which the snapshot covers): the reopened
 * log must not leave a seq gap before the next record (inv 6, inv 10). */
Test(reclog, stale_log_behind_snapshot)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	uint8_t *state;
	size_t len;
	uint64_t seq;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 6);
	state = hist_serialise(&want, &len);
	jnl_rec_inject_fault(j, 7, FAULT_FAIL);   /* the log's rename */
	cr_assert_eq(jnl_rec_snapshot(j, state, len), -EIO);
	cr_assert_eq(jnl_rec_append(j, "x", 1, NULL), -EIO, "inv 5");
	free(state);
	jnl_rec_close(j);
	/* The old log lost its last two records. */
	{
		char *p = file_in(dir, "journal");

		cr_assert_eq(truncate(p, rec_off(0, 4)), 0);
		free(p);
	}
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "snapshot covers the lost tail");
	cr_assert_eq(got.replay_calls, 0);
	cr_assert_eq(jnl_rec_append(j, "y", 1, &seq), 0);
	cr_assert_eq(seq, 7);
	hist_push(&want, seq, "y", 1);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "no gap after the snapshot");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* A failed log replacement after the snapshot's rename keeps the old log,
 * which goes on taking records; replay skips those the snapshot holds. */
Test(reclog, old_log_kept_after_failed_replacement)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	uint8_t *state;
	size_t len;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 3);
	state = hist_serialise(&want, &len);
	jnl_rec_inject_fault(j, 5, FAULT_FAIL);   /* journal.tmp's header */
	cr_assert_eq(jnl_rec_snapshot(j, state, len), -EIO);
	free(state);
	append_n(j, &want, 3, 3);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(got.snap_calls, 1);
	cr_assert_eq(got.replay_calls, 3, "records <= snapshot seq skipped");
	assert_hist_eq(&got, &want, want.n, "old log");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* --------------------------------------------------------- crash tests */

/* The workloads, one call a letter: A = append the next record, Y =
 * sync, S = snapshot of the state (every record acknowledged so far);
 * a snapshot in the background, the child's part done in process: B =
 * begin, W = the child writes the state as of the begin's seq, F =
 * finish, X = abandon (a child that failed or was killed).
 *
 * workload: appends after the last snapshot test the drop cases that no
 * later snapshot repairs: before and after its last sync. */
static const char workload[] = "AAAYAAASAAAASSAYAAAAASAAAYAA";
#define NCALLS (sizeof(workload) - 1)
#define SNAP_OPS 8   /* FORMAT.md "Write sequence of a snapshot" */
/* bg_workload: the first B..X leaves journal.next pending; the second B
 * keeps it, and its F installs a snapshot that covers both files. */
static const char bg_workload[] = "AAAYAAABAAAXAAYBAAWAAFAAYA";
#define BG_NCALLS (sizeof(bg_workload) - 1)
#define MAX_CALLS TW_MAX(NCALLS, BG_NCALLS)

struct run {
	int rc[MAX_CALLS];
	size_t acks_before[MAX_CALLS];   /* acked.n when call c started */
	struct hist acked;               /* appends that returned 0 */
};

/* The state as of seq n: the first n acknowledged records. */
static uint8_t *serialise_prefix(const struct hist *h, size_t n, size_t *len)
{
	struct hist pre = *h;

	cr_assert_leq(n, h->n);
	pre.n = n;
	return hist_serialise(&pre, len);
}

/* Opens a fresh log in `dir`, arms the fault and runs the calls of ops
 * (a workload above). */
static void run_workload(const char *dir, const char *ops, unsigned nth,
			 int mode, struct run *r)
{
	struct hist got = { 0 };
	struct jnl_rec *j;
	unsigned next = 0;
	uint64_t bseq = 0;
	bool begun = false;
	uint8_t buf[5000];

	cr_assert_leq(strlen(ops), MAX_CALLS);
	memset(r, 0, sizeof(*r));
	cr_assert_eq(open_into(dir, &got, &j), 0);
	jnl_rec_inject_fault(j, nth, mode);
	for (size_t c = 0; ops[c]; c++) {
		size_t len;
		uint8_t *state;
		uint64_t seq = 0;

		r->acks_before[c] = r->acked.n;
		switch (ops[c]) {
		case 'A':
			len = rec_len(next);
			rec_fill(next++, buf, len);
			r->rc[c] = jnl_rec_append(j, buf, len, &seq);
			if (r->rc[c] == 0) {
				cr_assert_eq(seq, r->acked.n + 1,
					     "inv 2: contiguous seqs");
				hist_push(&r->acked, seq, buf, len);
			}
			break;
		case 'Y':
			r->rc[c] = jnl_rec_sync(j);
			break;
		case 'S':
			state = hist_serialise(&r->acked, &len);
			r->rc[c] = jnl_rec_snapshot(j, state, len);
			free(state);
			break;
		case 'B':
			r->rc[c] = jnl_rec_snap_begin(j, &bseq);
			begun = r->rc[c] == 0;
			if (begun)
				cr_assert_eq(bseq, r->acked.n, "begin's seq");
			break;
		case 'W':
			if (!begun)
				break;
			state = serialise_prefix(&r->acked, bseq, &len);
			r->rc[c] = jnl_rec_snap_write(j, bseq, state, len);
			free(state);
			if (r->rc[c] < 0) {
				jnl_rec_snap_abandon(j);
				begun = false;
			}
			break;
		case 'F':
			if (begun)
				r->rc[c] = jnl_rec_snap_finish(j);
			begun = false;
			break;
		case 'X':
			if (begun)
				jnl_rec_snap_abandon(j);
			begun = false;
			break;
		default:
			cr_assert_fail("call '%c'", ops[c]);
		}
	}
	/* The crash: no further I/O; the records are in the file already. */
	jnl_rec_close(j);
	hist_free(&got);
}

/* The log reopened as j replayed *got: an append goes on at the next seq
 * (inv 10) and a second replay gives the same (inv 8).  Closes j. */
static void check_goes_on(const char *dir, struct jnl_rec *j,
			  struct hist *got, const char *what, unsigned nth)
{
	struct hist got2 = { 0 };
	uint64_t seq;

	cr_assert_eq(jnl_rec_append(j, "post", 4, &seq), 0);
	cr_assert_eq(seq, got->n + 1, "%s N=%u: inv 10", what, nth);
	hist_push(got, seq, "post", 4);
	jnl_rec_close(j);
	cr_assert_eq(open_into(dir, &got2, &j), 0);
	assert_hist_eq(&got2, got, got->n, "replay after recovery (inv 8)");
	jnl_rec_close(j);
	hist_free(&got2);
}

/* Reopens after the crash: expects `want_rc`, and when 0 the first want_n
 * acknowledged records; then checks idempotence and that the log goes on
 * without a gap. */
static void check_recovery(const char *dir, const struct run *r, int want_rc,
			   size_t want_n, const char *what, unsigned nth)
{
	struct hist got = { 0 };
	struct jnl_rec *j;

	cr_assert_eq(open_into(dir, &got, &j), want_rc, "%s N=%u: open", what,
		     nth);
	if (want_rc == 0) {
		assert_hist_eq(&got, &r->acked, want_n, what);
		check_goes_on(dir, j, &got, what, nth);
	}
	hist_free(&got);
}

static int first_error(const struct run *r)
{
	for (size_t c = 0; c < NCALLS; c++)
		if (r->rc[c] != 0)
			return (int)c;
	return -1;
}

static bool aborts(char call, unsigned step)
{
	/* FORMAT.md "Fault modes": appends and syncs abort; a snapshot
	 * aborts only when the log's rename may have happened (steps 7-8). */
	return call != 'S' || step >= 7;
}

static bool snapshot_after(size_t c)
{
	return strchr(workload + c + 1, 'S') != NULL;
}

/* fail and tear: the call holding op N fails, nothing that failed appears,
 * every acknowledged record is replayed (inv 4, inv 8). */
static void check_failed(const char *dir, const struct run *r, size_t fc,
			 unsigned step, unsigned nth, const char *mode)
{
	cr_assert_eq(first_error(r), (int)fc, "%s N=%u: same call fails", mode,
		     nth);
	for (size_t c = fc + 1; c < NCALLS; c++) {
		if (aborts(workload[fc], step))
			cr_assert_eq(r->rc[c], -EIO, "%s N=%u: sticky EIO (inv 5)",
				     mode, nth);
		else
			cr_assert_eq(r->rc[c], 0, "%s N=%u: call %zu after a "
				     "snapshot failure", mode, nth, c);
	}
	check_recovery(dir, r, 0, r->acked.n, mode, nth);
}

/* The operator's decision after -ENOTRECOVERABLE: the records before the
 * damage, then the log goes on. */
static void accept_and_check(const char *dir, size_t want_n, unsigned nth)
{
	struct hist got = { 0 };
	struct jnl_rec *j = NULL;
	uint64_t seq;

	cr_assert_eq(jnl_rec_open_flags(dir, JNL_REC_ACCEPT_CORRUPT, snap_cb,
					replay_cb, &got, &j), 0,
		     "drop append N=%u: accepted", nth);
	cr_assert_eq(got.n, want_n, "drop append N=%u: records before the "
		     "hole", nth);
	cr_assert_eq(jnl_rec_append(j, "post", 4, &seq), 0);
	cr_assert_eq(seq, want_n + 1, "drop append N=%u: inv 10", nth);
	jnl_rec_close(j);
	hist_free(&got);
}

/* Does a sync follow call c, and an append follow that sync? */
static bool synced_then_appended(size_t c)
{
	const char *y = strchr(workload + c + 1, 'Y');

	return y != NULL && strchr(y, 'A') != NULL;
}

/* drop: FORMAT.md "Fault modes" lists the outcome for each operation. */
static void check_dropped(const char *dir, const struct run *r, size_t fc,
			  unsigned step, unsigned nth)
{
	char call = workload[fc];

	for (size_t c = 0; c < NCALLS; c++)
		cr_assert_eq(r->rc[c], 0, "drop N=%u: nothing reports it", nth);
	if (snapshot_after(fc) || call == 'Y' ||
	    (call == 'S' && step % 2 == 0)) {
		check_recovery(dir, r, 0, r->acked.n, "drop (repaired)", nth);
	} else if (call == 'A' && !synced_then_appended(fc)) {
		/* Nothing follows the hole, or only records written before
		 * a sync: a torn tail, as at a power loss (inv 12). */
		check_recovery(dir, r, 0, r->acks_before[fc], "drop append",
			       nth);
	} else if (call == 'A') {
		/* A sync "covered" the dropped record and later ones say
		 * so: a synced record is gone, damage (inv 11), refused;
		 * accepted, the records before the hole survive. */
		check_recovery(dir, r, -ENOTRECOVERABLE, 0, "drop append",
			       nth);
		accept_and_check(dir, r->acks_before[fc], nth);
	} else if (step == 7) {
		/* Later records went to journal.tmp, which recovery
		 * discards: the state is the snapshot's. */
		check_recovery(dir, r, 0, r->acks_before[fc], "drop log rename",
			       nth);
	} else {
		/* Steps 1, 3, 5: detected, never silently wrong. */
		cr_assert(step == 1 || step == 3 || step == 5);
		check_recovery(dir, r, -EBADMSG, 0, "drop snapshot write", nth);
	}
}

Test(reclog, crash_at_every_write, .timeout = 120)
{
	unsigned first_op[NCALLS] = { 0 };
	unsigned nth, hits[3] = { 0 };
	struct run r;

	for (nth = 1;; nth++) {
		char *dir = make_dir();
		int fc;
		unsigned step;

		run_workload(dir, workload, nth, FAULT_FAIL, &r);
		fc = first_error(&r);
		if (fc < 0) {
			/* The workload completed without reaching op N. */
			check_recovery(dir, &r, 0, r.acked.n, "no fault", nth);
			hist_free(&r.acked);
			rm_dir(dir);
			break;
		}
		if (first_op[fc] == 0)
			first_op[fc] = nth;
		step = nth - first_op[fc] + 1;
		cr_assert(workload[fc] == 'S' ? step <= SNAP_OPS : step == 1,
			  "N=%u: op %u of call %d", nth, step, fc);
		check_failed(dir, &r, fc, step, nth, "fail");
		hist_free(&r.acked);
		rm_dir(dir);
		hits[0]++;

		dir = make_dir();
		run_workload(dir, workload, nth, FAULT_TEAR, &r);
		check_failed(dir, &r, fc, step, nth, "tear");
		hist_free(&r.acked);
		rm_dir(dir);
		hits[1]++;

		dir = make_dir();
		run_workload(dir, workload, nth, FAULT_DROP, &r);
		check_dropped(dir, &r, fc, step, nth);
		hist_free(&r.acked);
		rm_dir(dir);
		hits[2]++;
	}
	/* Every call was reached, and each snapshot took SNAP_OPS ops. */
	for (size_t c = 0; c < NCALLS; c++)
		cr_assert_neq(first_op[c], 0, "call %zu never faulted", c);
	{
		unsigned total = 0;

		for (size_t c = 0; c < NCALLS; c++)
			total += workload[c] == 'S' ? SNAP_OPS : 1;
		cr_assert_eq(nth, total + 1, "ops in the workload");
	}
	cr_assert_eq(hits[0], hits[1]);
	cr_assert_eq(hits[0], hits[2]);
	cr_log_info("crash test: %u fault points x 3 modes", hits[0]);
}

/* ------------------------------------------- reading back, another seq */

/* jnl_rec_iter gives back every closed record from any start, through the
 * sparse index and past it, and records appended after it reached the
 * end; a snapshot that replaces the log ends it with -ESTALE. */
Test(reclog, iter_reads_back_closed_records)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	struct jnl_rec_iter it;
	void *buf;
	size_t len;
	uint64_t seq;
	uint8_t *state;
	size_t slen;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 700);
	jnl_rec_close(j);
	/* the index is rebuilt by replay */
	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 700, 100);
	for (uint64_t start = 1; start <= 801; start += 97) {
		cr_assert_eq(jnl_rec_iter_start(j, start, &it), 0);
		for (uint64_t s = start; s <= 800; s++) {
			cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 1);
			cr_assert_eq(seq, s);
			cr_assert_eq(len, want.v[s - 1].len);
			cr_assert_eq(memcmp(buf, want.v[s - 1].data, len), 0);
			free(buf);
		}
		cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 0);
	}
	append_n(j, &want, 800, 1);
	cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 1);
	cr_assert_eq(seq, 801);
	free(buf);
	cr_assert_eq(jnl_rec_iter_start(j, 0, &it), -ENOENT);
	cr_assert_eq(jnl_rec_iter_start(j, 803, &it), -ENOENT);
	cr_assert_eq(jnl_rec_iter_start(j, 800, &it), 0);
	state = hist_serialise(&want, &slen);
	cr_assert_eq(jnl_rec_snapshot(j, state, slen), 0);
	free(state);
	cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), -ESTALE);
	cr_assert_eq(jnl_rec_first_seq(j), 802);
	cr_assert_eq(jnl_rec_last_seq(j), 801);
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* Invariant 14: a snapshot at another log's seq below this log's last
 * record, with a crash at every write-level step: reopened, the journal
 * holds the old state or the new one, never the new snapshot with the
 * old records above its seq; and appends go on at the seq after. */
Test(reclog, snapshot_at_lower_seq_crash_at_every_step)
{
	for (unsigned nth = 1; nth <= 12; nth++) {
		char *dir = make_dir();
		struct hist want = { 0 }, got = { 0 }, other = { 0 };
		struct jnl_rec *j;
		uint8_t *state;
		size_t len;
		int rc;

		cr_assert_eq(open_into(dir, &got, &j), 0);
		append_n(j, &want, 0, 20);
		/* the other log's state: 5 records of another history */
		for (unsigned i = 0; i < 5; i++)
			hist_push(&other, i + 1, "z", 1);
		state = hist_serialise(&other, &len);
		jnl_rec_inject_fault(j, nth, FAULT_FAIL);
		rc = jnl_rec_snapshot_at(j, state, len, 5);
		free(state);
		if (rc == 0) {
			uint64_t seq;

			cr_assert_eq(jnl_rec_last_seq(j), 5);
			cr_assert_eq(jnl_rec_append(j, "y", 1, &seq), 0);
			cr_assert_eq(seq, 6);
			hist_push(&other, 6, "y", 1);
		} else {
			cr_assert_eq(jnl_rec_append(j, "y", 1, NULL), -EIO,
				     "step %u: a failed snapshot_at aborts",
				     nth);
		}
		jnl_rec_close(j);
		cr_assert_eq(open_into(dir, &got, &j), 0, "step %u", nth);
		if (got.snap_calls == 1 && got.n >= 5 && got.v[0].len == 1 &&
		    got.v[0].data[0] == 'z') {
			/* the new state, with at most the new record */
			cr_assert_leq(got.n, rc == 0 ? 6u : 5u);
			assert_hist_eq(&got, &other, got.n, "new state");
		} else {
			/* the old one, its records dropped or kept whole */
			cr_assert(got.n == 0 || got.n == 20,
				  "step %u: %zu old records", nth, got.n);
			assert_hist_eq(&got, &want, got.n, "old state");
		}
		jnl_rec_close(j);
		hist_free(&want);
		hist_free(&got);
		hist_free(&other);
		rm_dir(dir);
	}
}

/* ------------------------------------- snapshot in the background (inv 16) */

/* Every write-level operation of the workload failed, torn or dropped in
 * turn; reopened, the journal gives exactly the acknowledged records
 * (fail, tear) or a prefix of them or a refusal (drop), is idempotent and
 * goes on without a gap. */
Test(reclog, background_snapshot_crash_at_every_step, .timeout = 120)
{
	const int modes[] = { FAULT_FAIL, FAULT_TEAR, FAULT_DROP };
	unsigned nth, total = 0, failed_calls = 0;

	/* appends and syncs are one operation each; begin 5 (sync, log
	 * header, fsync, rename, dir fsync) the first time, 0 the second;
	 * write 2; finish 4 (FORMAT.md "Write sequences") */
	for (size_t c = 0; c < BG_NCALLS; c++)
		total += bg_workload[c] == 'A' || bg_workload[c] == 'Y' ? 1 :
			 bg_workload[c] == 'W' ? 2 : bg_workload[c] == 'F' ? 4 :
			 0;
	total += 5;
	for (nth = 1; nth <= total + 1; nth++) {
		for (size_t m = 0; m < 3; m++) {
			char *dir = make_dir();
			struct hist got = { 0 };
			struct run r;
			struct jnl_rec *j;
			bool any_err = false;
			int rc;

			run_workload(dir, bg_workload, nth, modes[m], &r);
			for (size_t c = 0; c < BG_NCALLS; c++)
				any_err |= r.rc[c] != 0;
			if (modes[m] == FAULT_FAIL && any_err)
				failed_calls++;
			if (nth == total + 1)
				cr_assert(!any_err, "every operation counted");
			rc = open_into(dir, &got, &j);
			if (modes[m] != FAULT_DROP) {
				cr_assert_eq(rc, 0, "N=%u mode %d: open", nth,
					     modes[m]);
				assert_hist_eq(&got, &r.acked, r.acked.n,
					       "background snapshot");
			} else if (rc != 0) {
				cr_assert(rc == -EBADMSG ||
					  rc == -ENOTRECOVERABLE,
					  "N=%u drop: open %d", nth, rc);
				hist_free(&got);
				hist_free(&r.acked);
				rm_dir(dir);
				continue;
			} else {
				cr_assert_leq(got.n, r.acked.n);
				assert_hist_eq(&got, &r.acked, got.n,
					       "drop: a prefix");
			}
			check_goes_on(dir, j, &got, "background snapshot", nth);
			hist_free(&got);
			hist_free(&r.acked);
			rm_dir(dir);
		}
	}
	cr_assert_eq(failed_calls, total, "each operation failed a call");
}

static bool file_exists(const char *dir, const char *name)
{
	char *p = file_in(dir, name);
	bool yes = access(p, F_OK) == 0;

	free(p);
	return yes;
}

/* Reads every record back from every start with an iterator. */
static void check_iter_all(struct jnl_rec *j, const struct hist *want,
			   uint64_t first)
{
	struct jnl_rec_iter it;
	void *buf;
	size_t len;
	uint64_t seq;

	for (uint64_t start = first; start <= want->n + 1; start++) {
		cr_assert_eq(jnl_rec_iter_start(j, start, &it), 0, "start %llu",
			     (unsigned long long)start);
		for (uint64_t s = start; s <= want->n; s++) {
			cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq),
				     1);
			cr_assert_eq(seq, s);
			cr_assert_eq(len, want->v[s - 1].len);
			cr_assert(memcmp(buf, want->v[s - 1].data, len) == 0);
			free(buf);
		}
		cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 0);
	}
	cr_assert_eq(jnl_rec_iter_start(j, first - 1, &it),
		     first > 1 ? -ENOENT : -ENOENT);
}

/* A process death while journal.next is pending: open keeps both files,
 * iterators read across them from every position, the log goes on, and
 * the next background snapshot (no switch: the pending one is reused)
 * drops `journal`; an iterator still in it ends with -ESTALE, one in
 * journal.next reads on. */
Test(reclog, background_snapshot_pending_across_reopen)
{
	char *dir = make_dir();
	struct hist want = { 0 }, got = { 0 };
	struct jnl_rec *j;
	struct jnl_rec_iter in_old, in_next;
	uint64_t seq, s2;
	uint8_t *state;
	size_t len;
	void *buf;

	cr_assert_eq(open_into(dir, &got, &j), 0);
	append_n(j, &want, 0, 300);
	cr_assert_eq(jnl_rec_snap_begin(j, &seq), 0);
	cr_assert_eq(seq, 300);
	cr_assert_eq(jnl_rec_snap_begin(j, &s2), -EBUSY, "one at a time");
	append_n(j, &want, 300, 30);
	check_iter_all(j, &want, 1);
	cr_assert(file_exists(dir, "journal.next"));
	jnl_rec_close(j);   /* the crash, child unfinished */

	cr_assert_eq(open_into(dir, &got, &j), 0);
	assert_hist_eq(&got, &want, want.n, "pending: both files");
	cr_assert(file_exists(dir, "journal.next"), "still pending");
	cr_assert_eq(jnl_rec_first_seq(j), 1);
	append_n(j, &want, 330, 3);
	check_iter_all(j, &want, 1);
	cr_assert_eq(jnl_rec_iter_start(j, 5, &in_old), 0);
	cr_assert_eq(jnl_rec_iter_start(j, 320, &in_next), 0);

	cr_assert_eq(jnl_rec_snap_begin(j, &seq), 0);
	cr_assert_eq(seq, 333, "no switch: the pending journal.next stays");
	state = hist_serialise(&want, &len);
	cr_assert_eq(jnl_rec_snapshot(j, state, len), -EBUSY);
	append_n(j, &want, 333, 4);
	cr_assert_eq(jnl_rec_snap_write(j, seq, state, len), 0);
	free(state);
	cr_assert_eq(jnl_rec_snap_finish(j), 0);
	cr_assert(!file_exists(dir, "journal.next"));
	cr_assert_eq(jnl_rec_iter_next(&in_old, &buf, &len, &s2), -ESTALE);
	cr_assert_eq(jnl_rec_iter_next(&in_next, &buf, &len, &s2), 1);
	cr_assert_eq(s2, 320);
	free(buf);
	cr_assert_eq(jnl_rec_first_seq(j), 301, "journal.next's base");
	check_iter_all(j, &want, 301);
	jnl_rec_close(j);

	cr_assert_eq(open_into(dir, &got, &j), 0);
	cr_assert_eq(got.snap_calls, 1);
	cr_assert_eq(got.replay_calls, 4, "records <= the snapshot skipped");
	assert_hist_eq(&got, &want, want.n, "after finish");
	jnl_rec_close(j);
	hist_free(&want);
	hist_free(&got);
	rm_dir(dir);
}

/* A snapshot installed beside a pending journal.next: the synchronous
 * one finishes the switch, one at another log's seq drops it. */
Test(reclog, synchronous_snapshot_with_journal_next)
{
	for (int at = 0; at < 2; at++) {
		char *dir = make_dir();
		struct hist want = { 0 }, got = { 0 }, other = { 0 };
		struct jnl_rec *j;
		uint64_t seq;
		uint8_t *state;
		size_t len;

		cr_assert_eq(open_into(dir, &got, &j), 0);
		append_n(j, &want, 0, 10);
		cr_assert_eq(jnl_rec_snap_begin(j, &seq), 0);
		append_n(j, &want, 10, 5);
		jnl_rec_snap_abandon(j);
		if (at) {
			hist_push(&other, 1, "z", 1);
			hist_push(&other, 2, "z", 1);
			state = hist_serialise(&other, &len);
			cr_assert_eq(jnl_rec_snapshot_at(j, state, len, 2), 0);
		} else {
			state = hist_serialise(&want, &len);
			cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
		}
		free(state);
		cr_assert(!file_exists(dir, "journal.next"));
		cr_assert_eq(jnl_rec_append(j, "y", 1, &seq), 0);
		cr_assert_eq(seq, at ? 3u : 16u);
		hist_push(at ? &other : &want, seq, "y", 1);
		jnl_rec_close(j);
		cr_assert_eq(open_into(dir, &got, &j), 0);
		assert_hist_eq(&got, at ? &other : &want,
			       at ? other.n : want.n, "after the snapshot");
		jnl_rec_close(j);
		hist_free(&want);
		hist_free(&got);
		hist_free(&other);
		rm_dir(dir);
	}
}

/* A snapshot larger than the 8 MiB pieces it is written and synced in,
 * both ways (reclog.c write_snap_tmp): read back byte for byte. */
struct big {
	size_t len;
	int calls;
	bool same;
};

static uint8_t big_byte(size_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static int big_cb(const void *buf, size_t len, void *arg)
{
	struct big *b = arg;
	const uint8_t *p = buf;

	b->calls++;
	b->same = len == b->len;
	for (size_t i = 0; b->same && i < len; i++)
		b->same = p[i] == big_byte(i);
	return 0;
}

Test(reclog, snapshot_larger_than_a_piece)
{
	const size_t len = (20u << 20) + 5;
	uint8_t *state = malloc(len);

	cr_assert_not_null(state);
	for (size_t i = 0; i < len; i++)
		state[i] = big_byte(i);
	for (int bg = 0; bg < 2; bg++) {
		char *dir = make_dir();
		struct big b = { .len = len };
		struct jnl_rec *j;
		uint64_t seq;

		cr_assert_eq(jnl_rec_open(dir, big_cb, NULL, &b, &j), 0);
		cr_assert_eq(jnl_rec_append(j, "r", 1, NULL), 0);
		if (bg) {
			cr_assert_eq(jnl_rec_snap_begin(j, &seq), 0);
			cr_assert_eq(jnl_rec_snap_write(j, seq, state, len), 0);
			cr_assert_eq(jnl_rec_snap_finish(j), 0);
		} else {
			cr_assert_eq(jnl_rec_snapshot(j, state, len), 0);
		}
		cr_assert_eq(jnl_rec_snap_len(j), len);
		jnl_rec_close(j);
		cr_assert_eq(jnl_rec_open(dir, big_cb, NULL, &b, &j), 0);
		cr_assert_eq(b.calls, 1);
		cr_assert(b.same, "bg %d: the snapshot's bytes", bg);
		jnl_rec_close(j);
		rm_dir(dir);
	}
	free(state);
}
