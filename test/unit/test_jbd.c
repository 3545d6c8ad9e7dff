/* test_jbd.c - unit tests of the block journal (journal.h "Block journal
 * (iod)", journal/FORMAT.md (part 2)).
 *
 * Crash tests in SQLite's style: a fault layer (struct jbd_io_ops) sits
 * under every write and fsync the journal issues, and under the fake home
 * store's own writes (record application, home fsync).  For every N of a
 * workload of mixed transactions it fails, tears or drops the N-th
 * operation; tearing and dropping also kill the "process" (every later
 * operation is silently lost).  Optionally a power loss follows: every
 * file goes back to what its last fsync made durable (a shadow copy).
 * Then the journal is reopened (replay) on the surviving files and the
 * numbered checks run:
 *
 *   C1  the recovered state equals the model after some prefix k of the
 *       committed transactions: nothing uncommitted is visible and no block
 *       is half-old half-new (the whole state matches one prefix);
 *   C2  k >= the last transaction acknowledged closed before the crash
 *       (process crash) or synced (power loss);
 *   C3  a second open (replay again) yields the same state;
 *   C4  a crash during replay followed by a clean replay yields the same
 *       state as a clean replay.
 *
 * The home store is in memory: memfds, one per object.  Other tests run
 * the real io_uring path: wraparound, a full journal making writers wait,
 * ENOSPC admission, the sticky abort, ordered mode's rule R, overlay
 * reads.
 */
#include <criterion/criterion.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"
#include "journal.h"

#define MAGIC_LE   0x4a425754u   /* FORMAT.md (part 2): "TWBJ" */
#define N_OBJS     4             /* objects 1..3 (0 unused) */
#define MAXSZ      (64u << 10)
#define BS         JBD_BLOCK_SIZE

/* ------------------------------------------------------- fault layer */

enum fmode { F_NONE = 0, F_FAIL, F_TEAR, F_DROP };
enum { HIT_NONE = 0, HIT_LOG, HIT_SUPER, HIT_LOG_SYNC, HIT_HOME, HIT_HOME_SYNC,
       HIT_APPLY, HIT_MAX };

struct fobj {
	int fd;                  /* memfd: the current (page cache) content */
	ino_t ino;
	bool exists;
	bool s_exists;           /* shadow: what the last fsync made durable */
	uint8_t *s_data;
	uint64_t s_size;
};

struct fault {
	/* counters */
	unsigned ops;            /* write-level operations so far */
	unsigned nth;            /* 0 = no fault */
	enum fmode mode;
	bool dead;               /* the process "died": drop everything */
	bool failed;
	int hit;                 /* what the N-th operation was (HIT_*) */
	/* journal file */
	char path[256];
	ino_t log_ino;
	bool log_loaded;
	uint8_t *log_cur, *log_shadow;
	uint64_t log_size;
	/* home store */
	struct fobj obj[N_OBJS];
	/* ordering probes */
	unsigned home_syncs, log_writes_after_home_sync;
	int64_t free_space;      /* < 0: no admission */
	unsigned free_calls;     /* free_space() asked */
	/* Every home write of object home_err_obj fails with home_err (an
	 * error of the object's own, such as EFBIG); 0: none. */
	int home_err;
	uint64_t home_err_obj;
};

static struct fault F;

static int fault_take_hit(int hit)
{
	if (F.dead)
		return F_DROP;
	F.ops++;
	if (F.nth != 0 && F.ops == F.nth) {
		F.hit = hit;
		if (F.mode == F_TEAR || F.mode == F_DROP)
			F.dead = true;
		if (F.mode == F_FAIL)
			F.failed = true;
		return F.mode;
	}
	return F_NONE;
}

static void log_load(int fd)
{
	if (F.log_loaded)
		return;
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	F.log_size = (uint64_t)st.st_size;
	free(F.log_cur);
	free(F.log_shadow);
	F.log_cur = malloc(F.log_size);
	F.log_shadow = malloc(F.log_size);
	cr_assert_eq(pread(fd, F.log_cur, F.log_size, 0), (ssize_t)F.log_size);
	memcpy(F.log_shadow, F.log_cur, F.log_size);
	F.log_ino = st.st_ino;
	F.log_loaded = true;
}

static struct fobj *fobj_of_fd(int fd)
{
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	for (int i = 1; i < N_OBJS; i++)
		if (F.obj[i].fd >= 0 && F.obj[i].ino == st.st_ino)
			return &F.obj[i];
	return NULL;
}

static long f_pwrite(void *arg, enum jbd_io_kind kind, int fd,
		     const void *buf, size_t len, uint64_t off)
{
	if (kind == JBD_IO_LOG)
		log_load(fd);
	if (kind == JBD_IO_HOME && F.home_err &&
	    fobj_of_fd(fd) == &F.obj[F.home_err_obj])
		return F.home_err;
	int f = fault_take_hit(kind == JBD_IO_HOME ? HIT_HOME :
			       off == 0 ? HIT_SUPER : HIT_LOG);
	if (f == F_DROP)
		return (long)len;   /* lost, but the caller cannot tell */
	if (f == F_FAIL)
		return -EIO;
	size_t n = f == F_TEAR ? len / 2 : len;   /* a torn write: a prefix */
	if (f == F_TEAR && n == 0)
		return (long)len;
	ssize_t w = pwrite(fd, buf, n, (off_t)off);
	cr_assert_eq(w, (ssize_t)n);
	if (kind == JBD_IO_LOG) {
		memcpy(F.log_cur + off, buf, n);
		if (F.home_syncs > 0)
			F.log_writes_after_home_sync++;
	}
	return (long)n;
}

static void shadow_obj(struct fobj *o)
{
	struct stat st;
	cr_assert_eq(fstat(o->fd, &st), 0);
	free(o->s_data);
	o->s_size = (uint64_t)st.st_size;
	o->s_data = malloc(o->s_size + 1);
	cr_assert_eq(pread(o->fd, o->s_data, o->s_size, 0), (ssize_t)o->s_size);
	o->s_exists = o->exists;
}

static int f_fsync(void *arg, enum jbd_io_kind kind, int fd)
{
	if (kind == JBD_IO_LOG)
		log_load(fd);
	int f = fault_take_hit(kind == JBD_IO_HOME ? HIT_HOME_SYNC : HIT_LOG_SYNC);
	if (f == F_DROP || f == F_TEAR)
		return 0;
	if (f == F_FAIL)
		return -EIO;
	if (kind == JBD_IO_LOG) {
		memcpy(F.log_shadow, F.log_cur, F.log_size);
	} else {
		struct fobj *o = fobj_of_fd(fd);
		if (o)
			shadow_obj(o);
	}
	return 0;
}

static long f_pread(void *arg, enum jbd_io_kind kind, int fd, void *buf,
		    size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off);
}

static const struct jbd_io_ops fault_io = {
	.pwrite = f_pwrite, .fsync = f_fsync, .pread = f_pread, .arg = NULL,
};

/* Power loss: every file back to its last synced content. */
static void power_loss(void)
{
	if (F.log_loaded) {
		int fd = open(F.path, O_WRONLY);
		cr_assert(fd >= 0);
		cr_assert_eq(pwrite(fd, F.log_shadow, F.log_size, 0),
			     (ssize_t)F.log_size);
		close(fd);
		F.log_loaded = false;
	}
	for (int i = 1; i < N_OBJS; i++) {
		struct fobj *o = &F.obj[i];
		if (o->fd < 0)
			continue;
		cr_assert_eq(ftruncate(o->fd, 0), 0);
		if (o->s_size)
			cr_assert_eq(pwrite(o->fd, o->s_data, o->s_size, 0),
				     (ssize_t)o->s_size);
		o->exists = o->s_exists;
	}
}

/* ------------------------------------------------- the fake home store */

enum { REC_TRUNC = 1, REC_DELETE, REC_NOTE };

struct rec {
	uint32_t op;
	uint32_t pad;
	uint64_t size;
};

static int h_home_fd(void *arg, uint64_t obj, bool create, int *fd)
{
	cr_assert(obj >= 1 && obj < N_OBJS, "obj %lu", (unsigned long)obj);
	struct fobj *o = &F.obj[obj];
	if (o->fd < 0) {
		if (!create)
			return -ENOENT;
		o->fd = memfd_create("obj", MFD_CLOEXEC);
		cr_assert(o->fd >= 0);
		struct stat st;
		fstat(o->fd, &st);
		o->ino = st.st_ino;
	}
	if (!o->exists) {
		if (!create)
			return -ENOENT;
		o->exists = true;
		cr_assert_eq(ftruncate(o->fd, 0), 0);
	}
	*fd = o->fd;
	return 0;
}

static int h_home_sync(void *arg, const uint64_t *objs, size_t n)
{
	F.home_syncs++;
	for (size_t i = 0; i < n; i++) {
		struct fobj *o = &F.obj[objs[i]];
		if (o->fd < 0)
			continue;
		int rc = f_fsync(NULL, JBD_IO_HOME, o->fd);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static unsigned applied_close, applied_cp, applied_replay;

static int h_apply(void *arg, enum jbd_phase phase, uint64_t seq,
		   uint64_t obj, uint64_t cut, const void *buf, size_t len)
{
	struct rec r;
	cr_assert_eq(len, sizeof(r));
	memcpy(&r, buf, sizeof(r));
	if (phase == JBD_PHASE_CLOSE)
		applied_close++;
	else if (phase == JBD_PHASE_CHECKPOINT)
		applied_cp++;
	else
		applied_replay++;
	if (r.op == REC_NOTE)
		return 0;
	struct fobj *o = &F.obj[obj];
	int f = fault_take_hit(HIT_APPLY);
	if (f == F_DROP || f == F_TEAR)
		return 0;
	if (f == F_FAIL)
		return -EIO;
	if (o->fd < 0 || !o->exists)
		return 0;
	if (r.op == REC_TRUNC) {
		cr_assert_eq(ftruncate(o->fd, (off_t)r.size), 0);
	} else {
		cr_assert_eq(ftruncate(o->fd, 0), 0);
		o->exists = false;
	}
	return 0;
}

static int64_t h_free_space(void *arg)
{
	F.free_calls++;
	return F.free_space < 0 ? INT64_MAX / 2 : F.free_space;
}

static char tmpdir[128];

static void fault_reset(void)
{
	for (int i = 1; i < N_OBJS; i++) {
		if (F.obj[i].fd >= 0)
			close(F.obj[i].fd);
		free(F.obj[i].s_data);
	}
	free(F.log_cur);
	free(F.log_shadow);
	memset(&F, 0, sizeof(F));
	for (int i = 0; i < N_OBJS; i++)
		F.obj[i].fd = -1;
	F.free_space = -1;
	snprintf(F.path, sizeof(F.path), "%s/journal", tmpdir);
}

static void setup(void)
{
	tw_log_init("test_jbd", TW_LOG_ERR);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_jbd.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	memset(&F, 0, sizeof(F));
	for (int i = 0; i < N_OBJS; i++)
		F.obj[i].fd = -1;
	fault_reset();
}

/* The file homes of checkpoint_short_runs_through_page_cache, if any. */
static int file_home[N_OBJS] = { -1, -1, -1, -1 };

static void file_homes_remove(void)
{
	for (int i = 1; i < N_OBJS; i++) {
		char p[200];
		if (file_home[i] >= 0)
			close(file_home[i]);
		file_home[i] = -1;
		snprintf(p, sizeof(p), "%s/home.%d", tmpdir, i);
		unlink(p);
	}
}

static void teardown(void)
{
	file_homes_remove();
	fault_reset();
	char p[300];
	snprintf(p, sizeof(p), "%s/journal", tmpdir);
	unlink(p);
	rmdir(tmpdir);
}

static struct jbd_opts mkopts(uint64_t size, enum jbd_mode mode, bool faulty)
{
	struct jbd_opts o = {
		.path = F.path,
		.size = size,
		.mode = mode,
		.commit_interval_ms = 100000,
		.ops = {
			.home_fd = h_home_fd,
			.home_sync = h_home_sync,
			.apply = h_apply,
			.free_space = h_free_space,
		},
		.io = faulty ? &fault_io : NULL,
	};
	return o;
}

/* ---------------------------------------------------------- the model */

struct mstate {
	uint8_t data[N_OBJS][MAXSZ];
	uint64_t size[N_OBJS];
};

enum { OP_W = 1, OP_T, OP_D, OP_N };

struct mop {
	int op;
	uint64_t obj, off, len;
	uint32_t seed;
	bool magic;
	int64_t seq;             /* transaction, from jbd_commit */
};

#define MAX_MOPS 512
static struct mop mops[MAX_MOPS];
static int n_mops;

static void fill(uint8_t *p, const struct mop *m)
{
	uint32_t x = m->seed * 2654435761u + 1;
	for (uint64_t i = 0; i < m->len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
	if (m->magic) {
		/* jbd2 escaping: blocks whose first 4 bytes are the magic */
		uint32_t mg = htole32(MAGIC_LE);
		for (uint64_t o = (m->off + BS - 1) / BS * BS; o + 4 <= m->off + m->len;
		     o += BS)
			memcpy(p + (o - m->off), &mg, 4);
	}
}

static void model_apply(struct mstate *s, const struct mop *m)
{
	uint64_t o = m->obj;
	switch (m->op) {
	case OP_W: {
		uint8_t buf[MAXSZ];
		fill(buf, m);
		if (m->off > s->size[o])
			memset(s->data[o] + s->size[o], 0, m->off - s->size[o]);
		memcpy(s->data[o] + m->off, buf, m->len);
		if (m->off + m->len > s->size[o])
			s->size[o] = m->off + m->len;
		break;
	}
	case OP_T:
		if (m->len > s->size[o])
			memset(s->data[o] + s->size[o], 0, m->len - s->size[o]);
		s->size[o] = m->len;
		break;
	case OP_D:
		s->size[o] = 0;
		break;
	default:
		break;
	}
}

static void model_at(struct mstate *s, int64_t k)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < n_mops; i++)
		if (mops[i].seq > 0 && mops[i].seq <= k)
			model_apply(s, &mops[i]);
}

/* Read the whole recovered state through the journal. */
static void read_state(struct jbd *j, struct mstate *s)
{
	memset(s, 0, sizeof(*s));
	for (uint64_t o = 1; o < N_OBJS; o++) {
		long n = jbd_read(j, o, 0, s->data[o], MAXSZ);
		cr_assert(n >= 0, "read obj %lu: %ld", (unsigned long)o, n);
		s->size[o] = (uint64_t)n;
		memset(s->data[o] + n, 0, MAXSZ - (size_t)n);
	}
}

static bool state_eq(const struct mstate *a, const struct mstate *b)
{
	for (int o = 1; o < N_OBJS; o++) {
		if (a->size[o] != b->size[o])
			return false;
		if (memcmp(a->data[o], b->data[o], a->size[o]) != 0)
			return false;
	}
	return true;
}

/* ------------------------------------------------------- the workload */

enum { S_W = 1, S_T, S_D, S_N, S_TW, S_GROUP, S_SYNC, S_CP, S_WSYNC };

struct step {
	int kind;
	uint64_t obj, off, len;
	bool magic;
	uint64_t off2, len2;     /* S_TW: the write after the cut */
};

static const struct step workload[] = {
	{ S_W, 1, 0, 8192, false, 0, 0 },
	{ S_W, 2, 100, 5000, true, 0, 0 },
	{ S_GROUP, 3, 0, 0, false, 0, 0 },
	{ S_W, 1, 4000, 300, false, 0, 0 },
	{ S_W, 3, 0, 4096, true, 0, 0 },
	{ S_N, 2, 0, 0, false, 0, 0 },
	{ S_SYNC, 0, 0, 0, false, 0, 0 },
	{ S_W, 1, 2048, 6000, false, 0, 0 },
	{ S_T, 1, 0, 5000, false, 0, 0 },
	{ S_W, 1, 6000, 100, false, 0, 0 },
	{ S_CP, 0, 0, 0, false, 0, 0 },
	{ S_TW, 2, 0, 1000, false, 3000, 4000 },
	{ S_D, 3, 0, 0, false, 0, 0 },
	{ S_W, 3, 8192, 4096, true, 0, 0 },
	{ S_WSYNC, 1, 0, 12288, true, 0, 0 },
	{ S_GROUP, 2, 0, 0, false, 0, 0 },
	{ S_T, 2, 0, 0, false, 0, 0 },
	{ S_W, 2, 0, 4096, false, 0, 0 },
	{ S_W, 1, 30000, 9000, false, 0, 0 },
	{ S_SYNC, 0, 0, 0, false, 0, 0 },
	{ S_W, 2, 1, 3, false, 0, 0 },
	{ S_D, 1, 0, 0, false, 0, 0 },
	{ S_CP, 0, 0, 0, false, 0, 0 },
	{ S_W, 1, 0, 100, false, 0, 0 },
	{ S_T, 3, 0, 9000, false, 0, 0 },
	{ S_W, 3, 8000, 5000, true, 0, 0 },
	{ S_W, 2, 0, 20000, false, 0, 0 },
	{ S_W, 2, 16384, 20000, true, 0, 0 },
	{ S_W, 3, 0, 16384, false, 0, 0 },
	{ S_W, 1, 4096, 24576, false, 0, 0 },
	{ S_T, 2, 0, 10000, false, 0, 0 },
	{ S_W, 2, 9000, 2000, false, 0, 0 },
	{ S_W, 3, 100, 40000, false, 0, 0 },
	{ S_SYNC, 0, 0, 0, false, 0, 0 },
	{ S_W, 1, 0, 4096, true, 0, 0 },
	{ S_T, 1, 0, 2, false, 0, 0 },
	{ S_W, 1, 10, 10, false, 0, 0 },
};

struct wl {
	struct jbd *j;
	int64_t acked_closed;    /* C2, process crash */
	int64_t acked_synced;    /* C2, power loss */
	int64_t last_seq;
	bool stop;
};

struct ackctx {
	struct wl *w;
	int64_t seq;
	bool sync;
	bool done;
	int rc;
};

static struct ackctx acks[MAX_MOPS];
static int n_acks;

static void ack_cb(void *arg, int rc)
{
	struct ackctx *a = arg;
	a->done = true;
	a->rc = rc;
	if (rc != 0 || F.dead)
		return;
	if (a->seq > a->w->acked_closed)
		a->w->acked_closed = a->seq;
	if (a->sync && a->seq > a->w->acked_synced)
		a->w->acked_synced = a->seq;
}

static void wait_done(struct jbd *j, struct ackctx *a)
{
	while (!a->done)
		if (jbd_wait(j) == 1 && !a->done)
			break;
}

static void wait_all(struct wl *w)
{
	for (int i = 0; i < n_acks; i++)
		wait_done(w->j, &acks[i]);
}

/* Add one request (one step) to a handle and record its model ops. */
static int do_ops(struct jbd_handle *h, const struct step *s, uint32_t seed,
		  int *first_mop)
{
	struct mop m = { .obj = s->obj, .seed = seed, .magic = s->magic };
	*first_mop = n_mops;
	int rc = 0;
	uint8_t buf[MAXSZ];
	struct rec r = { 0 };
	switch (s->kind) {
	case S_W:
	case S_WSYNC:
		m.op = OP_W;
		m.off = s->off;
		m.len = s->len;
		fill(buf, &m);
		rc = jbd_write(h, s->obj, s->off, buf, s->len);
		mops[n_mops++] = m;
		break;
	case S_T:
	case S_TW:
		m.op = OP_T;
		m.len = s->len;
		r.op = REC_TRUNC;
		r.size = s->len;
		rc = jbd_record(h, s->obj, s->len, &r, sizeof(r));
		mops[n_mops++] = m;
		if (rc == 0 && s->kind == S_TW) {
			struct mop m2 = { .op = OP_W, .obj = s->obj, .off = s->off2,
					  .len = s->len2, .seed = seed + 7 };
			fill(buf, &m2);
			rc = jbd_write(h, s->obj, s->off2, buf, s->len2);
			mops[n_mops++] = m2;
		}
		break;
	case S_D:
		m.op = OP_D;
		r.op = REC_DELETE;
		rc = jbd_record(h, s->obj, 0, &r, sizeof(r));
		mops[n_mops++] = m;
		break;
	case S_N:
		m.op = OP_N;
		r.op = REC_NOTE;
		rc = jbd_record(h, s->obj, JBD_NO_CUT, &r, sizeof(r));
		mops[n_mops++] = m;
		break;
	}
	return rc;
}

/* Run one request: begin, ops, commit; returns false to stop. */
static bool request(struct wl *w, const struct step *s, uint32_t seed,
		    bool wait)
{
	struct jbd_handle *h;
	if (jbd_begin(w->j, &h) != 0)
		return false;
	int first;
	int rc = do_ops(h, s, seed, &first);
	if (rc != 0) {
		cr_assert_eq(rc, -EIO, "op: %d", rc);
		jbd_cancel(h);
		n_mops = first;
		return false;
	}
	struct ackctx *a = &acks[n_acks++];
	memset(a, 0, sizeof(*a));
	a->w = w;
	a->sync = s->kind == S_WSYNC;
	int64_t seq = jbd_commit(h, a->sync ? JBD_COMMIT_SYNC : 0, ack_cb, a);
	if (seq < 0) {
		n_acks--;
		n_mops = first;
		return false;
	}
	a->seq = seq;
	for (int i = first; i < n_mops; i++)
		mops[i].seq = seq;
	if (seq > w->last_seq)
		w->last_seq = seq;
	if (wait)
		wait_done(w->j, a);
	return !F.dead && !jbd_aborted(w->j);
}

static void sync_cb(void *arg, int rc)
{
	struct ackctx *a = arg;
	a->done = true;
	a->rc = rc;
	if (rc == 0 && !F.dead && a->seq > a->w->acked_synced)
		a->w->acked_synced = a->seq;
}

static void run_workload(struct wl *w, int repeat)
{
	n_mops = 0;
	n_acks = 0;
	uint32_t seed = 1;
	for (int r = 0; r < repeat; r++) {
		for (size_t i = 0; i < TW_ARRAY_SIZE(workload); i++) {
			const struct step *s = &workload[i];
			if (s->kind == S_GROUP) {
				/* the next s->obj requests share one close */
				size_t k;
				for (k = 1; k <= s->obj && i + k < TW_ARRAY_SIZE(workload); k++)
					if (!request(w, &workload[i + k], seed++, false))
						return;
				wait_all(w);
				i += k - 1;
			} else if (s->kind == S_SYNC || s->kind == S_CP) {
				struct ackctx a = { .w = w, .seq = w->last_seq };
				int rc = s->kind == S_SYNC ? jbd_sync(w->j, sync_cb, &a)
							   : jbd_checkpoint(w->j, sync_cb, &a);
				if (rc != 0)
					return;
				wait_done(w->j, &a);
			} else if (!request(w, s, seed++, true)) {
				return;
			}
			if (F.dead || jbd_aborted(w->j))
				return;
		}
	}
}

/* ------------------------------------------------------- crash tests */

/* Count the write-level operations of the fault-free workload. */
static unsigned count_ops(uint64_t jsize)
{
	fault_reset();
	struct jbd_opts o = mkopts(jsize, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	unsigned base = F.ops;
	struct wl w = { .j = j };
	run_workload(&w, 2);
	unsigned n = F.ops - base;
	struct jbd_stats st;
	jbd_stats(j, &st);
	/* the crash runs go round the circular log more than twice */
	cr_assert(st.log_blocks > 2 * st.nblocks, "log blocks %lu",
		  (unsigned long)st.log_blocks);
	cr_assert(st.checkpoints > 3);
	/* and the state is the model's */
	struct mstate got, want;
	read_state(j, &got);
	model_at(&want, w.last_seq);
	cr_assert(state_eq(&got, &want), "fault-free run differs from the model");
	cr_assert_eq(jbd_close(j), 0);
	return n;
}

static struct mstate g_got, g_want, g_again;

/* What the crash runs exercised, checked so the test cannot pass vacuously. */
static struct {
	unsigned runs, lost_unacked, replayed, torn, with_acks;
	unsigned hit[HIT_MAX];
} crash_stats;

static void crash_one(uint64_t jsize, enum fmode mode, unsigned nth,
		      bool powerloss)
{
	fault_reset();
	struct jbd_opts o = mkopts(jsize, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	F.nth = F.ops + nth;
	F.mode = mode;
	struct wl w = { .j = j };
	run_workload(&w, 2);
	if (!F.dead) {
		/* FAIL: the process goes on aborted; now it dies */
		F.dead = true;
	}
	jbd_abandon(j);
	if (powerloss)
		power_loss();
	F.dead = false;
	F.nth = 0;
	F.log_loaded = false;

	struct jbd_replay_info info;
	int rc = jbd_open(&o, &info, &j);
	cr_assert_eq(rc, 0, "reopen after crash (mode %d n %u): %d", mode, nth, rc);
	read_state(j, &g_got);
	int64_t lo = powerloss ? w.acked_synced : w.acked_closed;
	int64_t k;
	bool found = false;
	for (k = w.last_seq; k >= 0 && k >= lo; k--) {
		model_at(&g_want, k);
		if (state_eq(&g_got, &g_want)) {
			found = true;
			break;
		}
	}
	/* C1 + C2 */
	cr_assert(found, "mode %d n %u powerloss %d: recovered state matches no "
		  "prefix in [%ld, %ld]", mode, nth, powerloss, (long)lo,
		  (long)w.last_seq);
	crash_stats.runs++;
	crash_stats.hit[F.hit]++;
	if (k < w.last_seq)
		crash_stats.lost_unacked++;
	if (info.txns > 0)
		crash_stats.replayed++;
	if (info.torn_tail)
		crash_stats.torn++;
	if (lo > 0)
		crash_stats.with_acks++;
	cr_assert_eq(jbd_close(j), 0);
	/* C3: replay again, same state */
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	read_state(j, &g_again);
	cr_assert(state_eq(&g_got, &g_again), "second open changed the state");
	jbd_abandon(j);
}

static void crash_all(enum fmode mode, bool powerloss)
{
	uint64_t jsize = 96 * BS;
	unsigned total = count_ops(jsize);
	cr_assert(total > 50, "workload too small: %u ops", total);
	memset(&crash_stats, 0, sizeof(crash_stats));
	for (unsigned n = 1; n <= total + 1; n++)
		crash_one(jsize, mode, n, powerloss);
	if (getenv("JBD_TEST_VERBOSE"))
		fprintf(stderr, "mode %d powerloss %d: %u ops, %u runs, %u lost "
			"unacknowledged work, %u replayed, %u torn tails, %u "
			"with acknowledgements\n", mode, powerloss, total,
			crash_stats.runs, crash_stats.lost_unacked,
			crash_stats.replayed, crash_stats.torn,
			crash_stats.with_acks);
	if (getenv("JBD_TEST_VERBOSE"))
		fprintf(stderr, "  crashed at: log %u, superblock %u, log sync %u, "
			"home write %u, home sync %u, record apply %u\n",
			crash_stats.hit[HIT_LOG], crash_stats.hit[HIT_SUPER],
			crash_stats.hit[HIT_LOG_SYNC], crash_stats.hit[HIT_HOME],
			crash_stats.hit[HIT_HOME_SYNC], crash_stats.hit[HIT_APPLY]);
	/* commit, checkpoint (home writes, records, home sync, the tail
	 * write) and sync were all hit */
	for (int h = HIT_LOG; h < HIT_MAX; h++)
		cr_assert(crash_stats.hit[h] > 0, "no crash at kind %d", h);
	cr_assert(crash_stats.replayed > total / 4);
	cr_assert(crash_stats.with_acks > total / 2);
}

TestSuite(jbd_crash, .init = setup, .fini = teardown, .timeout = 60);

Test(jbd_crash, tear_process) { crash_all(F_TEAR, false); }
Test(jbd_crash, drop_process) { crash_all(F_DROP, false); }
Test(jbd_crash, fail_process) { crash_all(F_FAIL, false); }
Test(jbd_crash, tear_powerloss) { crash_all(F_TEAR, true); }
Test(jbd_crash, drop_powerloss) { crash_all(F_DROP, true); }
Test(jbd_crash, fail_powerloss) { crash_all(F_FAIL, true); }

/* C4: crash during replay, for every write of the replay. */
Test(jbd_crash, during_replay)
{
	uint64_t jsize = 256 * BS;
	/* a log full of committed, never checkpointed transactions */
	fault_reset();
	struct jbd_opts o = mkopts(jsize, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	struct wl w = { .j = j };
	/* only the first part, which fits without an automatic checkpoint */
	n_mops = 0;
	n_acks = 0;
	for (size_t i = 0; i < 12; i++) {
		const struct step *s = &workload[i];
		if (s->kind == S_W || s->kind == S_T || s->kind == S_D ||
		    s->kind == S_TW || s->kind == S_N)
			cr_assert(request(&w, s, (uint32_t)i + 1, true));
	}
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.checkpoints, 0);
	F.dead = true;
	jbd_abandon(j);
	F.dead = false;
	F.log_loaded = false;
	/* keep the crashed files to restart from each time */
	int lfd = open(F.path, O_RDONLY);
	uint8_t *log0 = malloc(jsize);
	cr_assert_eq(pread(lfd, log0, jsize, 0), (ssize_t)jsize);
	close(lfd);
	model_at(&g_want, w.acked_closed);
	/* count the replay's operations */
	unsigned base = F.ops;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	unsigned total = F.ops - base;
	read_state(j, &g_got);
	cr_assert(state_eq(&g_got, &g_want), "clean replay differs from model");
	jbd_abandon(j);
	cr_assert(total > 10);
	for (int mode = F_FAIL; mode <= F_DROP; mode++) {
		for (unsigned n = 1; n <= total; n++) {
			/* back to the crashed files: fresh objects, old log */
			for (int i = 1; i < N_OBJS; i++) {
				if (F.obj[i].fd >= 0)
					cr_assert_eq(ftruncate(F.obj[i].fd, 0), 0);
				F.obj[i].exists = false;
			}
			lfd = open(F.path, O_WRONLY);
			cr_assert_eq(pwrite(lfd, log0, jsize, 0), (ssize_t)jsize);
			close(lfd);
			F.log_loaded = false;
			F.dead = false;
			F.ops = 0;
			F.nth = n;
			F.mode = (enum fmode)mode;
			int rc = jbd_open(&o, NULL, &j);
			if (rc == 0)
				jbd_abandon(j);
			F.dead = false;
			F.nth = 0;
			F.log_loaded = false;
			cr_assert_eq(jbd_open(&o, NULL, &j), 0);
			read_state(j, &g_got);
			cr_assert(state_eq(&g_got, &g_want),
				  "replay crashed at op %u (mode %d) then replayed: "
				  "state differs", n, mode);
			jbd_abandon(j);
		}
	}
	free(log0);
}

/* ------------------------------------------------------- other tests */

TestSuite(jbd, .init = setup, .fini = teardown, .timeout = 60);

static void cnt_cb(void *arg, int rc)
{
	int *p = arg;
	if (rc == 0)
		(*p)++;
	else
		*p = -1000;
}

static void write1(struct jbd *j, uint64_t obj, uint64_t off, const void *buf,
		   size_t len, int *cnt)
{
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, obj, off, buf, len), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, cnt) > 0);
}

static void drain(struct jbd *j)
{
	while (jbd_wait(j) == 0)
		;
}

/* Checkpoint everything, wait, and return the stats. */
static void checkpoint_all(struct jbd *j, struct jbd_stats *st)
{
	cr_assert_eq(jbd_checkpoint(j, NULL, NULL), 0);
	drain(j);
	jbd_stats(j, st);
	cr_assert(st->checkpointed_seq >= st->closed_seq, "checkpointed");
}

/* owner_drains: commits leave their close to the owner's jbd_process,
 * which it calls while jbd_ready() holds, before it would sleep; requests
 * committed together share one close, and a close written inline wakes
 * nobody through the eventfd. */
Test(jbd, owner_drains)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	o.owner_drains = true;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	drain(j);
	cr_assert_not(jbd_ready(j));
	uint8_t a[BS], b[BS];
	memset(a, 0x5a, sizeof(a));
	memset(b, 0xa5, sizeof(b));
	int cnt = 0;
	struct jbd_stats st0, st;
	jbd_stats(j, &st0);
	write1(j, 1, 0, a, sizeof(a), &cnt);
	write1(j, 2, BS, b, sizeof(b), &cnt);
	write1(j, 1, 2 * BS, b, sizeof(b), &cnt);
	cr_assert_eq(cnt, 0, "callbacks never run inside the call");
	cr_assert(jbd_ready(j), "the close waits for the owner");
	jbd_stats(j, &st);
	cr_assert_eq(st.commits, st0.commits, "nothing closed before jbd_process");
	/* committed means readable, closed or not */
	uint8_t r[BS];
	cr_assert_eq(jbd_read(j, 2, BS, r, sizeof(r)), (long)sizeof(r));
	cr_assert_eq(memcmp(r, b, sizeof(r)), 0);
	/* the owner's way: drain while ready, else poll the eventfd */
	for (int spins = 0; cnt < 3 && spins < 100; spins++) {
		if (!jbd_ready(j)) {
			struct pollfd pfd = { .fd = jbd_event_fd(j),
					      .events = POLLIN };
			cr_assert(poll(&pfd, 1, 5000) == 1,
				  "eventfd never became readable");
		}
		jbd_process(j);
	}
	cr_assert_eq(cnt, 3);
	jbd_stats(j, &st);
	cr_assert_eq(st.commits, st0.commits + 1, "one close for all three");
	if (st.inline_writes > st0.inline_writes) {
		/* written on this thread: nothing left in the eventfd */
		struct pollfd pfd = { .fd = jbd_event_fd(j), .events = POLLIN };
		cr_assert_eq(poll(&pfd, 1, 0), 0, "an inline close woke the loop");
	}
	cr_assert_not(jbd_ready(j));
	drain(j);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	cr_assert_eq(memcmp(r, a, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* The block cache: blocks freed by a checkpoint come back, full of old
 * bytes, for the next writes; a short write into a new block must still
 * read back zeros around it, and jbd_drop_cache leaves the journal
 * working (ASan sees any block lost or freed twice). */
Test(jbd, reused_blocks_start_clean)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	struct jbd_stats st;
	uint8_t a[8 * BS], r[8 * BS], want[8 * BS];
	int cnt = 0;

	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	memset(a, 0xee, sizeof(a));
	write1(j, 1, 0, a, sizeof(a), &cnt);
	drain(j);
	checkpoint_all(j, &st);
	/* obj 2: 6 bytes in the middle of its third block, a hole before */
	write1(j, 2, 2 * BS + 1000, "reused", 6, &cnt);
	drain(j);
	memset(want, 0, sizeof(want));
	memcpy(want + 2 * BS + 1000, "reused", 6);
	cr_assert_eq(jbd_read(j, 2, 0, r, 3 * BS), 2 * BS + 1006);
	cr_assert_eq(memcmp(r, want, 2 * BS + 1006), 0);
	checkpoint_all(j, &st);
	cr_assert_eq(jbd_read(j, 2, 0, r, 3 * BS), 2 * BS + 1006);
	cr_assert_eq(memcmp(r, want, 2 * BS + 1006), 0);
	jbd_drop_cache(j);
	write1(j, 1, BS, "again", 5, &cnt);
	drain(j);
	memcpy(want, a, sizeof(a));
	memcpy(want + BS, "again", 5);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	cr_assert_eq(cnt, 3);
	cr_assert_eq(jbd_close(j), 0);
}

/* A journal whose block cache holds two slabs: `a` (len bytes, filled
 * here) written three times to object 1, in three transactions: 768
 * blocks, two slabs of 512.  No slab before the first write. */
static struct jbd *open_two_slabs(uint8_t *a, size_t len, int *cnt)
{
	struct jbd_opts o = mkopts(8 << 20, JBD_MODE_JOURNAL, false);
	struct jbd_stats st;
	struct jbd *j;

	cr_assert_eq(len, 256 * BS);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 0, "no slab before a write");
	for (size_t i = 0; i < len; i++)
		a[i] = (uint8_t)(i * 7 + i / BS);
	for (int k = 0; k < 3; k++)
		write1(j, 1, (uint64_t)k * len, a, len, cnt);
	drain(j);
	return j;
}

/* The block cache's slabs (jbd_blocks.c): a stream maps them as it needs
 * blocks, jbd_drop_cache unmaps every slab whose blocks are all back and
 * keeps one that still holds a copy, whose bytes stay readable. */
Test(jbd, block_cache_slabs)
{
	const uint64_t slab = 2 << 20;
	static uint8_t a[256 * BS];
	uint8_t r[BS];
	struct jbd *j;
	struct jbd_stats st;
	int cnt = 0;

	j = open_two_slabs(a, sizeof(a), &cnt);
	jbd_stats(j, &st);
	cr_assert_eq(st.copy_bytes, 3 * sizeof(a));
	cr_assert_eq(st.cache_bytes, 2 * slab, "%llu bytes of slabs",
		     (unsigned long long)st.cache_bytes);
	jbd_drop_cache(j);    /* every block is out: nothing to unmap */
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 2 * slab);
	checkpoint_all(j, &st);
	cr_assert_eq(st.copy_bytes, 0);
	/* one copy out again: its slab stays, the other goes */
	write1(j, 2, 0, a + BS, BS, &cnt);
	drain(j);
	jbd_drop_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, slab, "%llu bytes of slabs",
		     (unsigned long long)st.cache_bytes);
	cr_assert_eq(jbd_read(j, 2, 0, r, BS), BS);
	cr_assert_eq(memcmp(r, a + BS, BS), 0);
	cr_assert_eq(jbd_read(j, 1, 2 * sizeof(a) + 5 * BS, r, BS), BS);
	cr_assert_eq(memcmp(r, a + 5 * BS, BS), 0);
	checkpoint_all(j, &st);
	jbd_drop_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 0, "all back: all unmapped");
	/* and the cache maps again for the next write */
	write1(j, 3, 0, a, 2 * BS, &cnt);
	drain(j);
	cr_assert_eq(jbd_read(j, 3, BS, r, BS), BS);
	cr_assert_eq(memcmp(r, a + BS, BS), 0);
	cr_assert_eq(cnt, 5);
	cr_assert_eq(jbd_close(j), 0);
}

/* jbd_free_cache marks the spare slabs free but keeps them: the next
 * writes take their blocks without a new slab, and jbd_drop_cache still
 * unmaps them. */
Test(jbd, block_cache_marked_free_is_reused)
{
	static uint8_t a[256 * BS];
	int cnt = 0;
	struct jbd *j = open_two_slabs(a, sizeof(a), &cnt);
	const uint64_t slab = 2 << 20;
	struct jbd_stats st;
	uint8_t r[BS];

	jbd_free_cache(j);     /* every block is out: nothing to mark */
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 2 * slab);
	cr_assert_eq(st.cache_free_bytes, 0);
	checkpoint_all(j, &st);
	jbd_free_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 2 * slab, "marked free, still mapped");
	cr_assert_eq(st.cache_free_bytes, 2 * slab);
	/* the next write reuses a marked block: no new slab, none free */
	write1(j, 2, 0, a + 3 * BS, 2 * BS, &cnt);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 2 * slab, "%llu bytes of slabs",
		     (unsigned long long)st.cache_bytes);
	cr_assert_eq(st.cache_free_bytes, 0);
	cr_assert_eq(jbd_read(j, 2, BS, r, BS), BS);
	cr_assert_eq(memcmp(r, a + 4 * BS, BS), 0);
	/* the slab without a copy is marked again; the drop unmaps it */
	jbd_free_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_free_bytes, slab);
	jbd_drop_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, slab);
	cr_assert_eq(st.cache_free_bytes, 0);
	checkpoint_all(j, &st);
	jbd_drop_cache(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.cache_bytes, 0, "all back: all unmapped");
	cr_assert_eq(cnt, 4);
	cr_assert_eq(jbd_close(j), 0);
}

/* Sums taken by the caller (the iod's, as it checks a WRITE's data_crc):
 * jbd_sums combines to the whole sum, and a write that uses them leaves a
 * log whose commit checksums replay accepts (a wrong sum would make it
 * drop the transaction), escaped block and unaligned ends included. */
Test(jbd, caller_sums_replay)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	enum { OFF = 3000, LEN = 5 * BS + 123 };
	uint8_t a[LEN], r[OFF + LEN], want[OFF + LEN];
	uint32_t sums[8];
	uint32_t mg = htole32(MAGIC_LE);
	int cnt = 0;

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 13 + 5);
	memcpy(a + 2 * BS - OFF, &mg, 4);     /* block 2 starts with it */
	cr_assert_eq(jbd_sums_count(OFF, LEN), 6);
	cr_assert_eq(jbd_sums_count(0, BS), 1);
	cr_assert_eq(jbd_sums_count(BS - 1, 2), 2);
	cr_assert_eq(jbd_sums_count(5, 0), 0);
	cr_assert_eq(jbd_sums(OFF, a, LEN, sums), tw_crc32c(0, a, LEN));
	cr_assert_eq(sums[0], tw_crc32c(0, a, BS - OFF));
	cr_assert_eq(sums[1], tw_crc32c(0, a + BS - OFF, BS));
	cr_assert_eq(sums[5], tw_crc32c(0, a + 5 * BS - OFF,
					 OFF + LEN - 5 * BS));

	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write_sums(h, 1, OFF, a, LEN, sums), 0);
	cr_assert(jbd_commit(h, JBD_COMMIT_SYNC, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 1);
	jbd_abandon(j);                      /* nothing home: replay it */
	memset(want, 0, sizeof(want));
	memcpy(want + OFF, a, LEN);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* io_uring path: overlay reads before the checkpoint, group commit, the
 * escape, the data home after close, and across a reopen. */
Test(jbd, uring_basic)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert(jbd_event_fd(j) >= 0);
	uint8_t a[3 * BS], b[100];
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 7);
	uint32_t mg = htole32(MAGIC_LE);
	memcpy(a + BS, &mg, 4);              /* an escaped block */
	memset(b, 0xab, sizeof(b));
	int cnt = 0;
	write1(j, 1, 0, a, sizeof(a), &cnt);
	write1(j, 1, 5000, b, sizeof(b), &cnt);  /* joins the running txn */
	write1(j, 2, 10, b, sizeof(b), &cnt);
	cr_assert_eq(cnt, 0, "callbacks never run inside the call");
	/* the loop's way: poll the eventfd, then jbd_process */
	for (int spins = 0; cnt < 3 && spins < 100; spins++) {
		struct pollfd pfd = { .fd = jbd_event_fd(j), .events = POLLIN };
		cr_assert(poll(&pfd, 1, 5000) == 1, "eventfd never became readable");
		jbd_process(j);
	}
	cr_assert_eq(cnt, 3);
	drain(j);
	cr_assert_eq(cnt, 3);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert(st.commits >= 1 && st.commits <= 3);
	/* nothing is home yet, reads see the journal */
	cr_assert_eq(F.obj[1].fd, -1);
	uint8_t r[3 * BS];
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	uint8_t want[3 * BS];
	memcpy(want, a, sizeof(a));
	memcpy(want + 5000, b, sizeof(b));
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	cr_assert_eq(jbd_read(j, 2, 0, r, 200), 110);
	/* the escaped block is zeroed at its start in the log file */
	int lfd = open(F.path, O_RDONLY);
	uint8_t *log = malloc(1 << 20);
	cr_assert_eq(pread(lfd, log, 1 << 20, 0), 1 << 20);
	close(lfd);
	bool found_zeroed = false;
	for (size_t blk = 1; blk < (1 << 20) / BS; blk++)
		if (memcmp(log + blk * BS + 4, a + BS + 4, BS - 4) == 0 &&
		    memcmp(log + blk * BS, "\0\0\0\0", 4) == 0)
			found_zeroed = true;
	cr_assert(found_zeroed);
	free(log);
	cr_assert_eq(jbd_close(j), 0);
	/* checkpointed home: exact sizes, no rounding to blocks */
	struct stat sb;
	fstat(F.obj[1].fd, &sb);
	cr_assert_eq(sb.st_size, 3 * BS);
	fstat(F.obj[2].fd, &sb);
	cr_assert_eq(sb.st_size, 110);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* Lone small requests go to the log inline (no io-wq hop); the
 * checkpoint's home writes stay on the ring, or one completion would queue
 * the next and a whole checkpoint would run inside one jbd_process call. */
Test(jbd, inline_log_not_home)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	o.buffered = true;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t b[300], r[300 * 3];
	int cnt = 0;
	for (int i = 0; i < 12; i++) {
		memset(b, 'a' + i, sizeof(b));
		write1(j, 1 + (uint64_t)(i % 3), (uint64_t)(i / 3) * 300, b,
		       sizeof(b), &cnt);
		drain(j);
	}
	cr_assert_eq(cnt, 12);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.inline_writes, st.commits, "inline %lu of %lu commits",
		     (unsigned long)st.inline_writes,
		     (unsigned long)st.commits);
	uint64_t before = st.inline_writes;
	checkpoint_all(j, &st);
	cr_assert_eq(st.inline_writes, before, "a home write went inline");
	for (uint64_t obj = 1; obj <= 3; obj++) {
		struct stat sb;
		fstat(F.obj[obj].fd, &sb);
		cr_assert_eq(sb.st_size, 4 * 300, "home of obj %lu",
			     (unsigned long)obj);
		cr_assert_eq(jbd_read(j, obj, 0, r, sizeof(r)), 900);
		for (int k = 0; k < 3; k++)
			cr_assert_eq(r[k * 300], 'a' + (int)obj - 1 + 3 * k);
	}
	cr_assert_eq(jbd_close(j), 0);
}

/* Wraparound many times with io_uring, automatic checkpoints and syncs. */
Test(jbd, uring_wraparound)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t model[3][16 * BS];
	uint8_t buf[3 * BS];
	int cnt = 0, issued = 0;
	uint32_t x = 1;
	for (int i = 0; i < 600; i++) {
		uint64_t obj = 1 + (uint64_t)(i % 2);
		x = x * 1103515245u + 12345u;
		uint64_t off = (x >> 8) % (13 * BS);
		size_t len = 1 + (x >> 4) % (2 * BS);
		for (size_t k = 0; k < len; k++)
			buf[k] = (uint8_t)(x + k * 31);
		memcpy(model[obj] + off, buf, len);
		write1(j, obj, off, buf, len, &cnt);
		issued++;
		if (i % 7 == 0)
			drain(j);
		if (i % 50 == 0)
			jbd_tick(j);
	}
	drain(j);
	cr_assert_eq(cnt, issued);
	struct jbd_stats st;
	jbd_stats(j, &st);
	/* 63 log blocks: the head went round many times */
	cr_assert(st.checkpoints > 20, "checkpoints %lu", (unsigned long)st.checkpoints);
	cr_assert(st.next_seq > 60, "seq %lu", (unsigned long)st.next_seq);
	uint8_t r[16 * BS];
	static uint8_t r2[16 * BS];
	for (uint64_t obj = 1; obj <= 2; obj++) {
		long n = jbd_read(j, obj, 0, r, sizeof(r));
		cr_assert(n > 0);
		cr_assert_eq(memcmp(r, model[obj], (size_t)n), 0, "obj %lu", (unsigned long)obj);
		/* the caller's own fstat of the home: the same bytes */
		int hfd = F.obj[obj].fd;
		uint64_t hsize = 0;
		struct stat sb;
		if (hfd >= 0) {
			cr_assert_eq(fstat(hfd, &sb), 0);
			hsize = (uint64_t)sb.st_size;
		}
		cr_assert_eq(jbd_read_home(j, obj, 0, r2, sizeof(r2), hfd, hsize), n);
		cr_assert_eq(memcmp(r2, r, (size_t)n), 0, "obj %lu", (unsigned long)obj);
	}
	cr_assert_eq(jbd_close(j), 0);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	for (uint64_t obj = 1; obj <= 2; obj++) {
		long n = jbd_read(j, obj, 0, r, sizeof(r));
		cr_assert_eq(memcmp(r, model[obj], (size_t)n), 0);
	}
	cr_assert_eq(jbd_close(j), 0);
}

/* What jbd_open checks before it opens the log a second time with
 * O_DIRECT (jbd.c open_direct), asked independently of the library. */
static bool fs_takes_direct(const char *path)
{
	struct statx sx;
	return statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx) == 0 &&
	       (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_mem_align != 0 &&
	       sx.stx_dio_mem_align <= 512 && sx.stx_dio_offset_align != 0 &&
	       sx.stx_dio_offset_align <= BS;
}

/* Homes that are files next to the journal (the fixture's are memfds,
 * which do not take O_DIRECT), for the checkpoint's choice between the
 * page cache and O_DIRECT; file_homes_remove (teardown) removes them. */

static int h_file_home_fd(void *arg, uint64_t obj, bool create, int *fd)
{
	(void)arg;
	cr_assert(obj >= 1 && obj < N_OBJS, "obj %lu", (unsigned long)obj);
	if (file_home[obj] < 0) {
		char p[200];
		snprintf(p, sizeof(p), "%s/home.%lu", tmpdir,
			 (unsigned long)obj);
		file_home[obj] = open(p, O_RDWR | O_CLOEXEC |
				      (create ? O_CREAT : 0), 0600);
		if (file_home[obj] < 0)
			return -errno;
	}
	*fd = file_home[obj];
	return 0;
}

static int h_file_home_sync(void *arg, const uint64_t *objs, size_t n)
{
	(void)arg;
	for (size_t i = 0; i < n; i++)
		if (file_home[objs[i]] >= 0 && fsync(file_home[objs[i]]) < 0)
			return -errno;
	return 0;
}

/* A checkpoint sends a run as long as a stream's transaction home with
 * O_DIRECT (where the file system takes it) and a lone 4 KiB block
 * through the page cache, where a read after the checkpoint finds it;
 * both homes hold their bytes. */
Test(jbd, checkpoint_short_runs_through_page_cache)
{
	struct jbd_opts o = mkopts(8 << 20, JBD_MODE_JOURNAL, false);
	o.ops.home_fd = h_file_home_fd;
	o.ops.home_sync = h_file_home_sync;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t big[32 * BS], r[32 * BS];
	uint8_t small[BS];
	memset(small, 's', sizeof(small));
	for (size_t k = 0; k < sizeof(big); k++)
		big[k] = (uint8_t)(k * 7 + k / BS);
	int cnt = 0;
	write1(j, 1, 0, small, sizeof(small), &cnt);
	drain(j);
	write1(j, 2, 0, big, sizeof(big), &cnt);
	drain(j);
	cr_assert_eq(cnt, 2);
	struct jbd_stats st;
	checkpoint_all(j, &st);
	/* One O_DIRECT write where the journal may write home so: the
	 * 32-block run, never the lone block.  (Where it may not, e.g. on
	 * tmpfs, both go through the page cache and this tells nothing.) */
	cr_assert_eq(st.direct_home_writes, st.direct_home ? 1 : 0,
		     "direct home writes %lu",
		     (unsigned long)st.direct_home_writes);
	/* the lone block is in the page cache: read without waiting */
	struct iovec v = { .iov_base = r, .iov_len = BS };
	cr_assert_eq(preadv2(file_home[1], &v, 1, 0, RWF_NOWAIT), (ssize_t)BS,
		     "the lone block was not cached after the checkpoint");
	cr_assert_eq(pread(file_home[1], r, sizeof(r), 0), (ssize_t)BS);
	cr_assert_eq(memcmp(r, small, BS), 0);
	cr_assert_eq(pread(file_home[2], r, sizeof(r), 0), (ssize_t)sizeof(big));
	cr_assert_eq(memcmp(r, big, sizeof(big)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* A checkpoint sends home writes of different blocks of one object
 * together (4 KiB random overwrites of one file would otherwise go home one
 * at a time), and holds back a write of a block while an earlier write of
 * that block is in flight, also when that write is one of a run: home ends
 * with the last copy of every block. */
Test(jbd, checkpoint_one_object_in_parallel_in_log_order)
{
	struct jbd_opts o = mkopts(8 << 20, JBD_MODE_JOURNAL, false);
	o.ops.home_fd = h_file_home_fd;
	o.ops.home_sync = h_file_home_sync;
	o.max_inflight = 128;    /* room for all 69: only the rule holds back */
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t b[4 * BS], r[BS];
	int cnt = 0;
	/* 64 transactions, one block each, neighbours (a run never crosses
	 * transactions), then one run of 4 blocks */
	for (int k = 0; k < 64; k++) {
		memset(b, 'A' + k % 26, BS);
		write1(j, 1, (uint64_t)k * BS, b, BS, &cnt);
		drain(j);
	}
	memset(b, 'R', sizeof(b));
	write1(j, 1, 100 * BS, b, 4 * BS, &cnt);        /* blocks 100-103 */
	drain(j);
	/* rewrites: block 0, block 1, block 102 inside the run; a short
	 * block at the end that touches nothing in flight */
	memset(b, 'z', BS);
	write1(j, 1, 0, b, BS, &cnt);
	drain(j);
	memset(b, 'y', BS);
	write1(j, 1, BS, b, BS, &cnt);
	drain(j);
	memset(b, 'm', BS);
	write1(j, 1, 102 * BS, b, BS, &cnt);
	drain(j);
	memset(b, 's', 100);
	write1(j, 1, 104 * BS, b, 100, &cnt);
	drain(j);
	cr_assert_eq(cnt, 69);
	struct jbd_stats st;
	checkpoint_all(j, &st);
	/* the first 65 writes went out together; the rewrite of block 0
	 * waited for the first write of block 0, and all after it waited */
	cr_assert_eq(st.home_inflight_max, 65, "home writes in flight %lu",
		     (unsigned long)st.home_inflight_max);
	for (int k = 0; k <= 104; k++) {
		int want = k == 0 ? 'z' : k == 1 ? 'y' : k < 64 ? 'A' + k % 26 :
			   k == 102 ? 'm' : k >= 100 && k < 104 ? 'R' :
			   k == 104 ? 's' : 0;
		size_t len = k == 104 ? 100 : BS;
		cr_assert_eq(pread(file_home[1], r, BS, (off_t)k * BS),
			     (ssize_t)len, "block %d", k);
		cr_assert_eq(r[0], want, "block %d: %d, want %d", k, r[0],
			     want);
		cr_assert_eq(r[len - 1], want);
	}
	cr_assert_eq(jbd_close(j), 0);
}

/* Home of object 3 for the next test: a pipe that is full, so the
 * checkpoint's write to it stays in flight until the test reads. */
static int h_pipe_home_fd(void *arg, uint64_t obj, bool create, int *fd)
{
	if (obj != 3)
		return h_file_home_fd(arg, obj, create, fd);
	*fd = file_home[3];
	return 0;
}

static int h_pipe_home_sync(void *arg, const uint64_t *objs, size_t n)
{
	(void)arg;
	for (size_t i = 0; i < n; i++)
		if (objs[i] != 3 && file_home[objs[i]] >= 0 &&
		    fsync(file_home[objs[i]]) < 0)
			return -errno;
	return 0;
}

/* Process the journal's events for up to ms milliseconds, or until *cnt
 * reaches want.  Never jbd_wait: it would wait for the stuck write. */
static void process_until(struct jbd *j, int *cnt, int want, int ms)
{
	for (int t = 0; t < ms && *cnt < want; t++) {
		struct pollfd p = { .fd = jbd_event_fd(j), .events = POLLIN };
		poll(&p, 1, 1);
		jbd_process(j);
	}
}

/* A lone log append goes inline while the checkpoint's home writes (other
 * files) are in flight on the ring: under a steady load a checkpoint runs
 * most of the time, and every append would otherwise take the io-wq hop. */
Test(jbd, inline_log_while_home_write_in_flight)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	file_home[3] = p[1];     /* closed by teardown */
	int cap = fcntl(p[1], F_SETPIPE_SZ, BS);
	cr_assert(cap >= (int)BS, "F_SETPIPE_SZ: %d", cap);
	uint8_t *fill = calloc(1, (size_t)cap);
	cr_assert_eq(write(p[1], fill, (size_t)cap), cap);  /* now full */
	struct jbd_opts o = mkopts(8 << 20, JBD_MODE_JOURNAL, false);
	o.ops.home_fd = h_pipe_home_fd;
	o.ops.home_sync = h_pipe_home_sync;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t b[BS], small[100];
	memset(b, 'p', sizeof(b));
	memset(small, 's', sizeof(small));
	int cnt = 0, cp_done = 0;
	write1(j, 3, 0, b, sizeof(b), &cnt);
	drain(j);
	cr_assert_eq(jbd_checkpoint(j, cnt_cb, &cp_done), 0);
	/* wait (bounded) until the checkpoint has issued its home write:
	 * before that the log's fdatasync may still be in flight */
	struct jbd_stats st;
	jbd_stats(j, &st);
	for (int t = 0; t < 5000 && st.home_inflight_max == 0; t++) {
		struct pollfd pe = { .fd = jbd_event_fd(j), .events = POLLIN };
		poll(&pe, 1, 1);
		jbd_process(j);
		jbd_stats(j, &st);
	}
	cr_assert_eq(st.home_inflight_max, 1, "the home write was not issued");
	cr_assert_eq(cp_done, 0, "the write to the full pipe finished");
	uint64_t before = st.inline_writes;
	write1(j, 1, 0, small, sizeof(small), &cnt);
	process_until(j, &cnt, 2, 2000);
	cr_assert_eq(cnt, 2, "the append did not close");
	jbd_stats(j, &st);
	cr_assert_eq(st.inline_writes, before + 1,
		     "the append waited for the ring (inline %lu -> %lu)",
		     (unsigned long)before, (unsigned long)st.inline_writes);
	cr_assert_eq(cp_done, 0);
	/* let the home write through: the filler, then the block */
	uint8_t *got = malloc((size_t)cap + BS);
	size_t n = 0;
	for (int t = 0; t < 2000 && n < (size_t)cap + BS; t++) {
		struct pollfd pr = { .fd = p[0], .events = POLLIN };
		if (poll(&pr, 1, 1) > 0) {
			ssize_t k = read(p[0], got + n, (size_t)cap + BS - n);
			cr_assert(k > 0);
			n += (size_t)k;
		}
		jbd_process(j);
	}
	cr_assert_eq(n, (size_t)cap + BS);
	cr_assert_eq(memcmp(got + cap, b, BS), 0);
	process_until(j, &cp_done, 1, 2000);
	cr_assert_eq(cp_done, 1, "checkpoint %d", cp_done);
	cr_assert_eq(jbd_close(j), 0);
	free(got);
	free(fill);
	close(p[0]);
}

enum dfault { DF_NONE, DF_EINVAL, DF_SHORT };

/* A lone request, then a stream of 95 issued without waiting (they fill
 * transactions while another closes: those go to the log with O_DIRECT
 * where the file system allows it), optionally with the first O_DIRECT
 * write refused (EINVAL: everything after goes through the page cache) or
 * short (the rest goes through the page cache).  Reads see every byte;
 * after a process death the replay of the log alone gives every byte
 * back. */
static void stream_then_death(bool buffered, enum dfault fault)
{
	struct jbd_opts o = mkopts(8 << 20, JBD_MODE_JOURNAL, false);
	o.buffered = buffered;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	if (fault != DF_NONE)
		jbd_inject_direct_fault(j, fault == DF_EINVAL ? -EINVAL : 0);
	static uint8_t model[3][4 << 20], buf[32 * BS], r[4 << 20];
	memset(model, 0, sizeof(model));
	uint64_t size[3] = { 0, 0, 0 };
	int cnt = 0;
	uint32_t x = 7;
	for (int i = 0; i < 96; i++) {
		uint64_t obj = 1 + (uint64_t)(i % 2);
		x = x * 1103515245u + 12345u;
		/* mostly new blocks, so that the stream fills several
		 * transactions (rewrites of a running one update it) */
		size_t len = BS * (1 + (x >> 8) % 32) - (x >> 4) % 100;
		uint64_t off = (uint64_t)(i / 2) * (80 << 10) + (x >> 13) % 5000;
		for (size_t k = 0; k < len; k++)
			buf[k] = (uint8_t)(x >> 16) + (uint8_t)(k * 13);
		memcpy(model[obj] + off, buf, len);
		size[obj] = TW_MAX(size[obj], off + len);
		write1(j, obj, off, buf, len, &cnt);
		if (i == 0)
			drain(j);
	}
	drain(j);
	cr_assert_eq(cnt, 96);
	struct jbd_stats st;
	jbd_stats(j, &st);
	/* the lone first request went to the log without the ring */
	cr_assert(st.inline_writes >= 1, "inline %lu",
		  (unsigned long)st.inline_writes);
	if (buffered || !fs_takes_direct(F.path)) {
		cr_assert_eq(st.direct_txns, 0);
		cr_assert_eq(st.direct_fallbacks, 0);
	} else if (fault == DF_EINVAL) {
		cr_assert_eq(st.direct_txns, 1, "direct %lu",
			     (unsigned long)st.direct_txns);
		cr_assert_eq(st.direct_fallbacks, 1);
	} else {
		cr_assert(st.direct_txns > 1 && st.direct_txns < st.commits,
			  "direct %lu of %lu", (unsigned long)st.direct_txns,
			  (unsigned long)st.commits);
		cr_assert_eq(st.direct_fallbacks, 0);
	}
	for (uint64_t obj = 1; obj <= 2; obj++) {
		cr_assert_eq(jbd_read(j, obj, 0, r, sizeof(r)), (long)size[obj]);
		cr_assert_eq(memcmp(r, model[obj], size[obj]), 0, "obj %lu",
			     (unsigned long)obj);
	}
	jbd_abandon(j);
	struct jbd_replay_info info;
	cr_assert_eq(jbd_open(&o, &info, &j), 0);
	cr_assert(info.txns >= 2 && !info.torn_tail, "replayed %lu",
		  (unsigned long)info.txns);
	for (uint64_t obj = 1; obj <= 2; obj++) {
		cr_assert_eq(jbd_read(j, obj, 0, r, sizeof(r)), (long)size[obj]);
		cr_assert_eq(memcmp(r, model[obj], size[obj]), 0,
			     "obj %lu after replay", (unsigned long)obj);
	}
	cr_assert_eq(jbd_close(j), 0);
	/* everything checkpointed: the homes themselves hold every byte
	 * (full blocks may have gone home with O_DIRECT) */
	for (uint64_t obj = 1; obj <= 2; obj++) {
		struct stat sb;
		cr_assert_eq(fstat(F.obj[obj].fd, &sb), 0);
		cr_assert_eq((uint64_t)sb.st_size, size[obj]);
		cr_assert_eq(pread(F.obj[obj].fd, r, size[obj], 0),
			     (ssize_t)size[obj]);
		cr_assert_eq(memcmp(r, model[obj], size[obj]), 0,
			     "obj %lu at home", (unsigned long)obj);
	}
}

Test(jbd, stream_direct_then_death) { stream_then_death(false, DF_NONE); }
Test(jbd, stream_buffered_then_death) { stream_then_death(true, DF_NONE); }
Test(jbd, stream_direct_refused) { stream_then_death(false, DF_EINVAL); }
Test(jbd, stream_direct_short) { stream_then_death(false, DF_SHORT); }

/* The lock of O_DIRECT writes in flight (jbd.c wait_old_direct_writes):
 * while anybody holds an OFD lock on byte 0 of the journal file, as the
 * O_DIRECT descriptor of a dead owner does until its last write lands,
 * jbd_open waits; it opens once the lock is gone. */
static atomic_int unlocked;

static void *unlock_later(void *arg)
{
	usleep(300 * 1000);
	atomic_store(&unlocked, 1);
	close((int)(intptr_t)arg);
	return NULL;
}

/* A journal made and closed, then held by lock(fd) on a descriptor of
 * its own, which a thread closes 300 ms later: jbd_open must wait for
 * that and then open. */
static void open_after_unlock(int (*lock)(int fd))
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_close(j), 0);
	int lfd = open(F.path, O_WRONLY);
	cr_assert(lfd >= 0);
	cr_assert_eq(lock(lfd), 0);
	pthread_t th;
	atomic_store(&unlocked, 0);
	cr_assert_eq(pthread_create(&th, NULL, unlock_later,
				    (void *)(intptr_t)lfd), 0);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(atomic_load(&unlocked), 1, "opened under the lock");
	pthread_join(th, NULL);
	cr_assert_eq(jbd_close(j), 0);
}

/* the closed journal's io_uring ring, torn down in the background,
 * still holds its O_DIRECT descriptor, and its byte lock, for a moment */
static int lock_direct_byte(int fd)
{
	struct flock l = {
		.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1,
	};
	return fcntl(fd, F_OFD_SETLKW, &l);
}

Test(jbd, open_waits_for_old_direct_writes)
{
	open_after_unlock(lock_direct_byte);
}

/* The owner's flock (jbd.c lock_owner): a dead owner's io_uring ring
 * holds the journal's descriptor, and so its flock, until the kernel has
 * torn the ring down; jbd_open waits for the lock instead of calling the
 * journal in use. */
static int lock_owner_flock(int fd)
{
	return flock(fd, LOCK_EX);
}

Test(jbd, open_waits_for_old_owner_lock)
{
	open_after_unlock(lock_owner_flock);
}

/* A full journal makes writers wait for the checkpoint; none fails. */
Test(jbd, full_journal_waits)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[3 * BS];
	memset(buf, 0x5a, sizeof(buf));
	int cnt = 0;
	/* 60 requests of 3 blocks, no waiting: ~4x the journal */
	for (int i = 0; i < 60; i++) {
		struct jbd_handle *h;
		cr_assert_eq(jbd_begin(j, &h), 0);
		cr_assert_eq(jbd_write(h, 1 + (uint64_t)(i % 3), (uint64_t)i * BS,
				       buf, sizeof(buf)), 0);
		cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	}
	drain(j);
	cr_assert_eq(cnt, 60);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert(st.full_waits > 0);
	cr_assert(st.checkpoints > 0);
	/* a request larger than a quarter of the journal is refused */
	struct jbd_handle *h;
	static uint8_t big[20 * BS];
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, big, sizeof(big)), -E2BIG);
	jbd_cancel(h);
	cr_assert_eq(jbd_close(j), 0);
}

/* Admission: ENOSPC before journaling, nothing in the log. */
Test(jbd, enospc_admission)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	o.reserve = 8 * BS;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	F.free_space = 10 * BS;
	uint8_t buf[2 * BS];
	memset(buf, 1, sizeof(buf));
	int cnt = 0;
	write1(j, 1, 0, buf, sizeof(buf), &cnt);  /* 2 blocks fit */
	drain(j);
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, 1), -ENOSPC,
		     "pending journal bytes count against the free space");
	jbd_cancel(h);
	struct jbd_stats st;
	jbd_stats(j, &st);
	uint64_t seq = st.next_seq;
	F.free_space = 100 * BS;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, 1), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) == (int64_t)seq);
	drain(j);
	cr_assert_eq(cnt, 2);
	cr_assert_eq(jbd_close(j), 0);
}

/* Admission asks the free space once per JBD_FREE_TTL_MS (100 ms) while
 * far from the line, at every write near it, and an answer it trusted
 * ages out: a disk filled by someone else refuses writes from then on. */
Test(jbd, admission_free_space_cached)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	o.reserve = 8 * BS;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	F.free_space = 1ll << 30;
	uint8_t buf[BS];
	memset(buf, 5, sizeof(buf));
	int cnt = 0;
	for (int i = 0; i < 8; i++)
		write1(j, 1, (uint64_t)i * BS, buf, sizeof(buf), &cnt);
	cr_assert_eq(F.free_calls, 1, "far from the line: asked once, not "
		     "%u times", F.free_calls);
	F.free_space = 16 << 20;    /* within JBD_FREE_SLACK of the line */
	usleep(110 * 1000);
	for (int i = 0; i < 4; i++)
		write1(j, 1, (uint64_t)i * BS, buf, sizeof(buf), &cnt);
	cr_assert_eq(F.free_calls, 5, "near the line: asked at each write "
		     "(%u)", F.free_calls);
	F.free_space = 1ll << 30;
	usleep(110 * 1000);
	write1(j, 1, 0, buf, sizeof(buf), &cnt);
	F.free_space = 9 * BS;      /* filled by another writer */
	usleep(110 * 1000);
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 2, 0, buf, sizeof(buf)), -ENOSPC,
		     "an answer older than the TTL is asked again");
	jbd_cancel(h);
	drain(j);
	cr_assert_eq(cnt, 13);
	cr_assert_eq(jbd_close(j), 0);
}

/* Page cache (docs/ARCHITECTURE.md "The block journal"): a new journal's zero
 * fill is not left in the page cache, where its large folios would make
 * every append walk and dirty a whole folio.  Counted with mincore; tmpfs
 * keeps its pages whatever the advice. */
Test(jbd, open_leaves_log_uncached)
{
	struct statfs sf;
	cr_assert_eq(statfs(tmpdir, &sf), 0);
	if (sf.f_type == TMPFS_MAGIC)
		cr_skip_test("%s is tmpfs: no page cache to drop", tmpdir);
	struct jbd_opts o = mkopts(1024 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int fd = open(F.path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	size_t len = 1024 * BS;
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *vec = calloc(len / pg, 1);
	cr_assert_not_null(vec);
	cr_assert_eq(mincore(m, len, vec), 0);
	size_t resident = 0;
	for (size_t i = 0; i < len / pg; i++)
		resident += vec[i] & 1;
	cr_assert_lt(resident, 16, "%zu of %zu pages of a new journal stay "
		     "cached", resident, len / pg);
	free(vec);
	munmap(m, len);
	close(fd);
	cr_assert_eq(jbd_close(j), 0);
}

/* Sticky abort: an I/O error on the journal fails everything after. */
Test(jbd, sticky_abort)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[BS];
	memset(buf, 3, sizeof(buf));
	int ok = 0, bad = 0;
	write1(j, 1, 0, buf, sizeof(buf), &ok);
	drain(j);
	cr_assert_eq(ok, 1);
	F.nth = F.ops + 1;
	F.mode = F_FAIL;
	write1(j, 1, 0, buf, sizeof(buf), &bad);
	drain(j);
	cr_assert_eq(bad, -1000, "the callback got the error");
	cr_assert_eq(jbd_aborted(j), -EIO);
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), -EIO);
	cr_assert_eq(jbd_sync(j, NULL, NULL), -EIO);
	cr_assert_eq(jbd_checkpoint(j, NULL, NULL), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
	/* replay keeps what was closed */
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t r[BS];
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), BS);
	cr_assert_eq(memcmp(r, buf, BS), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* jbd_inject_log_eio (the iod's TWINFS_TEST_FAULTS drill knob) aborts the
 * journal through the ordinary error path, on io_uring and on the
 * synchronous layer alike; replay keeps what was closed before it. */
static void injected_eio(bool faulty)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, faulty);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t a[BS], b[BS], r[BS];
	memset(a, 0x5a, sizeof(a));
	memset(b, 0xa5, sizeof(b));
	int ok = 0, bad = 0;
	write1(j, 1, 0, a, sizeof(a), &ok);
	drain(j);
	cr_assert_eq(ok, 1);
	jbd_inject_log_eio(j);
	cr_assert_eq(jbd_aborted(j), 0, "armed, not yet fired");
	write1(j, 1, 0, b, sizeof(b), &bad);
	drain(j);
	cr_assert_eq(bad, -1000, "the request got the error");
	cr_assert_eq(jbd_aborted(j), -EIO);
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), BS);
	cr_assert_eq(memcmp(r, a, BS), 0, "the failed write never lands");
	cr_assert_eq(jbd_aborted(j), 0, "the fault fired once");
	write1(j, 1, 0, b, sizeof(b), &ok);
	drain(j);
	cr_assert_eq(ok, 2);
	cr_assert_eq(jbd_close(j), 0);
}

/* A home write that fails for a reason of the object's own (EFBIG) sets
 * that object aside through ops.home_failed, at checkpoint and at
 * replay: the journal does not abort, replay does not fail, and every
 * other object goes home.  Without the callback, or for a disk's error
 * (EIO), the old rule holds: abort, or a replay that fails. */
static unsigned aside_calls;
static uint64_t aside_obj;

static int h_home_failed(void *arg, uint64_t obj, uint64_t seq, int err)
{
	cr_assert_eq(err, -EFBIG);
	cr_assert(seq > 0);
	aside_calls++;
	aside_obj = obj;
	return 0;
}

static void home_bytes(uint64_t obj, uint64_t off, void *buf, size_t len)
{
	cr_assert_eq(pread(F.obj[obj].fd, buf, len, (off_t)off),
		     (ssize_t)len);
}

Test(jbd, object_error_sets_it_aside)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd_stats st;
	struct jbd *j;
	uint8_t a[BS], b[BS], r[BS];
	int ok = 0;

	o.ops.home_failed = h_home_failed;
	cr_assert(jbd_obj_error(-EFBIG) && jbd_obj_error(-EPERM));
	cr_assert(!jbd_obj_error(-EIO) && !jbd_obj_error(-ENOSPC));
	memset(a, 0xa1, sizeof(a));
	memset(b, 0xb2, sizeof(b));
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	write1(j, 1, 0, a, sizeof(a), &ok);
	write1(j, 2, 0, b, sizeof(b), &ok);
	write1(j, 2, BS, b, sizeof(b), &ok);
	drain(j);
	cr_assert_eq(ok, 3);
	/* checkpoint: object 2 cannot go home */
	F.home_err = -EFBIG;
	F.home_err_obj = 2;
	checkpoint_all(j, &st);
	cr_assert_eq(st.aborted, 0, "no abort for one object's error");
	cr_assert_eq(aside_calls, 1, "once per checkpoint, however many writes");
	cr_assert_eq(aside_obj, 2);
	home_bytes(1, 0, r, sizeof(r));
	cr_assert_eq(memcmp(r, a, BS), 0, "the other object went home");
	/* replay: a crash with both objects' writes in the log */
	write1(j, 1, 0, b, sizeof(b), &ok);
	write1(j, 2, 0, a, sizeof(a), &ok);
	drain(j);
	jbd_abandon(j);
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0, "replay goes on");
	cr_assert_eq(aside_calls, 2);
	home_bytes(1, 0, r, sizeof(r));
	cr_assert_eq(memcmp(r, b, BS), 0, "object 1 replayed");
	write1(j, 1, 0, a, sizeof(a), &ok);
	write1(j, 2, 0, b, sizeof(b), &ok);
	drain(j);
	jbd_abandon(j);
	/* the old rules: no callback, or a disk's error */
	o.ops.home_failed = NULL;
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), -EFBIG);
	o.ops.home_failed = h_home_failed;
	F.home_err = -EIO;
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), -EIO);
	F.home_err = 0;
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* Out of descriptors (EMFILE) while opening a home object is the
 * process's shortage, not the object's: the checkpoint waits and tries
 * the same object again; the journal does not abort and the object is not
 * set aside. */
static int emfile_left;
static unsigned emfile_calls;

static int h_emfile_home_fd(void *arg, uint64_t obj, bool create, int *fd)
{
	if (emfile_left > 0) {
		emfile_left--;
		emfile_calls++;
		return -EMFILE;
	}
	return h_home_fd(arg, obj, create, fd);
}

Test(jbd, checkpoint_waits_for_descriptors)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd_stats st;
	struct jbd *j;
	uint8_t a[BS], r[BS];
	uint64_t t0;
	int ok = 0;

	o.ops.home_fd = h_emfile_home_fd;
	o.ops.home_failed = h_home_failed;   /* asserts EFBIG if called */
	aside_calls = 0;
	cr_assert(!jbd_obj_error(-EMFILE) && !jbd_obj_error(-ENFILE));
	memset(a, 0xc3, sizeof(a));
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	write1(j, 1, 0, a, sizeof(a), &ok);
	write1(j, 2, 0, a, sizeof(a), &ok);
	drain(j);
	cr_assert_eq(ok, 2);
	emfile_left = 3;
	t0 = tw_now_ms();
	checkpoint_all(j, &st);
	cr_assert_eq(st.aborted, 0, "EMFILE does not abort the journal");
	cr_assert_eq(aside_calls, 0, "nor sets the object aside");
	cr_assert_eq(emfile_calls, 3);
	cr_assert(tw_now_ms() - t0 >= 100, "it waited before trying again");
	home_bytes(1, 0, r, sizeof(r));
	cr_assert_eq(memcmp(r, a, BS), 0);
	home_bytes(2, 0, r, sizeof(r));
	cr_assert_eq(memcmp(r, a, BS), 0);
	cr_assert_eq(jbd_close(j), 0);
}

Test(jbd, injected_log_eio_uring) { injected_eio(false); }
Test(jbd, injected_log_eio_sync) { injected_eio(true); }

/* Torn tail: garbage after the last commit is never applied. */
Test(jbd, torn_tail_discarded)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t a[BS], b[BS];
	memset(a, 'a', BS);
	memset(b, 'b', BS);
	int cnt = 0;
	write1(j, 1, 0, a, BS, &cnt);
	drain(j);
	/* the second transaction's data block is torn, then the process dies
	 * (a torn commit block whose first 40 bytes landed would be valid:
	 * everything before it is complete) */
	F.nth = F.ops + 2;
	F.mode = F_TEAR;
	write1(j, 1, 0, b, BS, &cnt);
	drain(j);
	cr_assert(F.dead);
	jbd_abandon(j);
	F.dead = false;
	F.nth = 0;
	F.log_loaded = false;
	struct jbd_replay_info info;
	cr_assert_eq(jbd_open(&o, &info, &j), 0);
	cr_assert_eq(info.txns, 1, "txns %lu torn %d", (unsigned long)info.txns, info.torn_tail);
	cr_assert(info.torn_tail);
	uint8_t r[BS];
	cr_assert_eq(jbd_read(j, 1, 0, r, BS), BS);
	cr_assert_eq(memcmp(r, a, BS), 0, "never half-old half-new");
	cr_assert_eq(jbd_close(j), 0);
}

/* Reads the whole journal file. */
static uint8_t *journal_image(size_t *len)
{
	struct stat st;
	int fd = open(F.path, O_RDONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(fstat(fd, &st), 0);
	uint8_t *buf = malloc((size_t)st.st_size);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void journal_flip(uint64_t off)
{
	int fd = open(F.path, O_RDWR);
	uint8_t c;
	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, &c, 1, (off_t)off), 1);
	c ^= 0x10;
	cr_assert_eq(pwrite(fd, &c, 1, (off_t)off), 1);
	close(fd);
}

/* n transactions of one data block each (descriptor, data, commit) of
 * object 1, block 0, filled with 'a', 'b', ..., left in the log by a
 * process death, the log synced after the first `synced` of them (never
 * when 0): returns the first one's log block. */
static uint64_t txns_then_death(int n, int synced)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	struct jbd_stats st;
	uint8_t b[BS];
	int cnt = 0, scnt = 0;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	jbd_stats(j, &st);
	for (int i = 0; i < n; i++) {
		memset(b, 'a' + i, BS);
		write1(j, 1, 0, b, BS, &cnt);
		drain(j);
		if (i + 1 == synced) {
			cr_assert_eq(jbd_sync(j, cnt_cb, &scnt), 0);
			drain(j);
			cr_assert_eq(scnt, 1);
		}
	}
	cr_assert_eq(cnt, n);
	struct jbd_stats now;
	jbd_stats(j, &now);
	cr_assert_eq(now.synced_seq, st.synced_seq + (uint64_t)synced,
		     "only the first %d synced", synced);
	jbd_abandon(j);
	F.log_loaded = false;
	return st.head;
}

/* Three transactions, the first two synced (J17: the third says so). */
static uint64_t three_txns_then_death(void)
{
	return txns_then_death(3, 2);
}

/* Opens the journal left by txns_then_death: expects `txns` replayed and
 * object 1 holding the block of the last of them ('a' + txns - 1). */
static struct jbd *reopen_expect(int txns, const char *what)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd_replay_info info;
	struct jbd *j;
	uint8_t r[BS], want[BS];
	cr_assert_eq(jbd_open(&o, &info, &j), 0, "%s: open", what);
	cr_assert_eq(info.txns, (uint64_t)txns, "%s: replayed", what);
	cr_assert(info.torn_tail, "%s: a tail was cut", what);
	memset(want, 'a' + txns - 1, BS);
	cr_assert_eq(jbd_read(j, 1, 0, r, BS), BS);
	cr_assert_eq(memcmp(r, want, BS), 0, "%s: state", what);
	return j;
}

/* J17, the power loss of a disk that does not keep write order: the
 * second of four transactions, written and not synced, is lost (its
 * blocks zero), torn, or has a bad byte, while the third and fourth,
 * written after it and not synced either, survived.  Nothing synced is
 * lost by stopping at the second, so the open replays the first and
 * starts.  The next sequence skips the leftovers (J2): a new transaction
 * written over the second and third ends where the old fourth begins,
 * and that one is never replayed. */
Test(jbd, unsynced_txn_lost_before_later_ones)
{
	for (int how = 0; how < 4; how++) {
		uint64_t first = txns_then_death(4, 1);
		uint64_t second = first + 3;
		if (how == 0) {
			uint8_t z[BS] = { 0 };
			int fd = open(F.path, O_WRONLY);
			cr_assert(fd >= 0);
			for (uint64_t b = second; b < second + 3; b++)
				cr_assert_eq(pwrite(fd, z, BS, (off_t)(b * BS)), BS);
			close(fd);
		} else if (how == 1) {
			/* torn: the commit block never landed */
			uint8_t z[BS] = { 0 };
			int fd = open(F.path, O_WRONLY);
			cr_assert(fd >= 0);
			cr_assert_eq(pwrite(fd, z, BS, (off_t)((second + 2) * BS)), BS);
			close(fd);
		} else {
			/* a bad byte in the descriptor or the data */
			journal_flip((second + (uint64_t)(how - 2)) * BS + 9);
		}
		struct jbd *j = reopen_expect(1, "unsynced txn lost");
		/* one transaction of 4 data blocks: descriptor, 4 data,
		 * commit, the 6 blocks of the old second and third */
		uint8_t big[4 * BS];
		int cnt = 0;
		memset(big, 'x', sizeof(big));
		write1(j, 2, 0, big, sizeof(big), &cnt);
		drain(j);
		cr_assert_eq(cnt, 1);
		struct jbd_stats st;
		jbd_stats(j, &st);
		cr_assert_eq(st.head, first + 9, "ends where the old fourth starts");
		jbd_abandon(j);
		F.log_loaded = false;
		struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
		struct jbd_replay_info info;
		cr_assert_eq(jbd_open(&o, &info, &j), 0);
		cr_assert_eq(info.txns, 1, "only the new transaction");
		uint8_t r[BS], want[BS];
		memset(want, 'a', BS);
		cr_assert_eq(jbd_read(j, 1, 0, r, BS), BS);
		cr_assert_eq(memcmp(r, want, BS), 0,
			     "the old fourth transaction was not replayed");
		cr_assert_eq(jbd_close(j), 0);
		cr_assert_eq(unlink(F.path), 0);
		fault_reset();
	}
}

/* J16: a damaged block in the middle transaction, with a committed one
 * after it, is not a torn tail: the open fails with -ENOTRECOVERABLE and
 * writes nothing (the file stays as it was, byte for byte). */
Test(jbd, damage_before_committed_txn_refused)
{
	/* a byte of each block of the middle transaction: descriptor, data,
	 * commit */
	for (uint64_t k = 0; k < 3; k++) {
		uint64_t first = three_txns_then_death();
		journal_flip((first + 3 + k) * BS + (k == 1 ? 100 : 9));
		size_t len, len2;
		uint8_t *before = journal_image(&len);
		struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
		struct jbd *j = NULL;
		struct jbd_replay_info info;
		cr_assert_eq(jbd_open(&o, &info, &j), -ENOTRECOVERABLE,
			     "block %lu of the middle txn", (unsigned long)k);
		uint8_t *after = journal_image(&len2);
		cr_assert(len == len2 && memcmp(before, after, len) == 0,
			  "the journal is untouched");
		free(before);
		free(after);
		/* the way out for an iod (--quarantine-journal) is a new
		 * journal file: nothing of the old one is read */
		cr_assert_eq(unlink(F.path), 0);
		cr_assert_eq(jbd_open(&o, &info, &j), 0);
		cr_assert_eq(info.txns, 0);
		cr_assert_eq(jbd_close(j), 0);
		cr_assert_eq(unlink(F.path), 0);
	}
}

/* The same damage in the last transaction is a torn tail: cut, the two
 * before it replayed. */
Test(jbd, damage_in_last_txn_is_a_torn_tail)
{
	uint64_t first = three_txns_then_death();
	journal_flip((first + 7) * BS + 100);
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	struct jbd_replay_info info;
	cr_assert_eq(jbd_open(&o, &info, &j), 0);
	cr_assert_eq(info.txns, 2);
	cr_assert(info.torn_tail);
	uint8_t r[BS], want[BS];
	memset(want, 'b', BS);
	cr_assert_eq(jbd_read(j, 1, 0, r, BS), BS);
	cr_assert_eq(memcmp(r, want, BS), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* Rewrites the journal left by txns_then_death(n, ...) as version 1
 * wrote it: superblock version 1, commit blocks without synced_to (zero,
 * out of the checksum). */
static void journal_to_v1(uint64_t first, int n)
{
	uint8_t sb[BS], blk[BS];
	uint32_t crc;
	int fd = open(F.path, O_RDWR);
	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, sb, BS, 0), BS);
	sb[20] = 1;
	sb[21] = 0;
	crc = htole32(tw_crc32c(0, sb, 124));
	memcpy(sb + 124, &crc, 4);
	cr_assert_eq(pwrite(fd, sb, BS, 0), BS);
	uint32_t seed = tw_crc32c(0, sb + 40, 16);
	for (int t = 0; t < n; t++) {
		uint64_t b0 = first + 3 * (uint64_t)t;
		crc = seed;
		for (uint64_t k = 0; k < 2; k++) {
			cr_assert_eq(pread(fd, blk, BS, (off_t)((b0 + k) * BS)), BS);
			crc = tw_crc32c(crc, blk, BS);
		}
		cr_assert_eq(pread(fd, blk, BS, (off_t)((b0 + 2) * BS)), BS);
		cr_assert_eq(blk[4], 3, "a commit block");
		memset(blk + 40, 0, 8);
		crc = htole32(tw_crc32c(crc, blk, 20));
		memcpy(blk + 20, &crc, 4);
		cr_assert_eq(pwrite(fd, blk, BS, (off_t)((b0 + 2) * BS)), BS);
	}
	close(fd);
}

/* FORMAT.md (part 2) "Compatibility", J17: a version 1 journal is
 * replayed with the rule it was written under (its commits do not say
 * what was synced, so a bad transaction ends the log whatever follows),
 * and the reset superblock is version 2. */
Test(jbd, version_1_journal_is_replayed)
{
	for (int damaged = 0; damaged < 2; damaged++) {
		uint64_t first = txns_then_death(3, 2);
		journal_to_v1(first, 3);
		if (damaged)
			journal_flip((first + 4) * BS + 100);
		struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, true);
		struct jbd_replay_info info;
		struct jbd *j;
		uint8_t r[BS], want[BS];
		cr_assert_eq(jbd_open(&o, &info, &j), 0, "v1 open");
		cr_assert_eq(info.txns, damaged ? 1 : 3);
		memset(want, damaged ? 'a' : 'c', BS);
		cr_assert_eq(jbd_read(j, 1, 0, r, BS), BS);
		cr_assert_eq(memcmp(r, want, BS), 0, "v1 state");
		cr_assert_eq(jbd_close(j), 0);
		uint8_t *img;
		size_t len;
		img = journal_image(&len);
		cr_assert_eq(img[20], 2, "the superblock is version 2 now");
		free(img);
		cr_assert_eq(jbd_open(&o, &info, &j), 0);
		cr_assert_eq(info.txns, 0);
		cr_assert_eq(jbd_close(j), 0);
		cr_assert_eq(unlink(F.path), 0);
		fault_reset();
	}
}

/* ordered mode: in-place data is synced before the commit; a cut followed
 * by in-place data of the same object is not replayed (rule R). */
Test(jbd, ordered_rule_r)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_ORDERED, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int fd;
	cr_assert_eq(h_home_fd(NULL, 1, true, &fd), 0);
	uint8_t a[2 * BS];
	memset(a, 'x', sizeof(a));
	cr_assert_eq(pwrite(fd, a, sizeof(a), 0), (ssize_t)sizeof(a));
	int cnt = 0;
	struct jbd_handle *h;
	/* txn 1: truncate to 0 (applied at close) */
	struct rec r = { .op = REC_TRUNC, .size = 0 };
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, a, 1), -EINVAL);
	cr_assert_eq(jbd_record(h, 1, 0, &r, sizeof(r)), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(applied_close, 1);
	struct stat sb;
	fstat(fd, &sb);
	cr_assert_eq(sb.st_size, 0);
	/* txn 2: new data in place, then its metadata transaction */
	uint8_t b[BS];
	memset(b, 'y', sizeof(b));
	cr_assert_eq(pwrite(fd, b, sizeof(b), 0), BS);
	unsigned syncs0 = F.home_syncs;
	F.log_writes_after_home_sync = 0;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_inplace(h, 1), 0);
	struct rec note = { .op = REC_NOTE };
	cr_assert_eq(jbd_record(h, 1, JBD_NO_CUT, &note, sizeof(note)), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 2);
	cr_assert_eq(F.home_syncs, syncs0 + 1, "in-place data synced before commit");
	cr_assert(F.log_writes_after_home_sync > 0, "the commit came after");
	struct ackctx a2 = { 0 };
	struct wl w = { .j = j };
	a2.w = &w;
	cr_assert_eq(jbd_sync(j, sync_cb, &a2), 0);
	wait_done(j, &a2);
	/* crash + power loss: the replay must not cut the new data */
	F.dead = true;
	jbd_abandon(j);
	F.dead = false;
	power_loss();
	F.log_loaded = false;
	struct jbd_replay_info info;
	cr_assert_eq(jbd_open(&o, &info, &j), 0);
	cr_assert_eq(info.txns, 2);
	cr_assert_eq(info.skipped_cuts, 1);
	uint8_t got[BS];
	cr_assert_eq(jbd_read(j, 1, 0, got, BS), BS);
	cr_assert_eq(memcmp(got, b, BS), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* writeback mode: records only, no ordering syncs. */
Test(jbd, writeback_records)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_WRITEBACK, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int fd;
	cr_assert_eq(h_home_fd(NULL, 2, true, &fd), 0);
	uint8_t a[BS];
	memset(a, 'w', sizeof(a));
	cr_assert_eq(pwrite(fd, a, sizeof(a), 0), BS);
	unsigned s0 = F.home_syncs;
	int cnt = 0;
	struct jbd_handle *h;
	struct rec r = { .op = REC_TRUNC, .size = 100 };
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_inplace(h, 2), 0);
	cr_assert_eq(jbd_record(h, 2, 100, &r, sizeof(r)), 0);
	cr_assert(jbd_commit(h, JBD_COMMIT_SYNC, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 1);
	cr_assert_eq(F.home_syncs, s0, "writeback never syncs data before commit");
	uint8_t got[BS];
	cr_assert_eq(jbd_read(j, 2, 0, got, BS), 100);
	cr_assert_eq(jbd_close(j), 0);
}

/* ops.home_fs_fd for jbd_sync_home: the test directory (or -1 when
 * home_fs_bad, so the syncfs fails); counts the syncfs runs started. */
static int home_fs_calls;
static int home_fs_fd_dir = -1;
static bool home_fs_bad;

static int h_home_fs_fd(void *arg)
{
	(void)arg;
	home_fs_calls++;
	if (home_fs_bad)
		return -1;
	if (home_fs_fd_dir < 0)
		home_fs_fd_dir = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return home_fs_fd_dir;
}

/* One request: record r of obj (cut: jbd_record's), after an in-place
 * write of obj when `inplace`. */
static void commit_record(struct jbd *j, uint64_t obj, uint64_t cut,
			  const struct rec *r, bool inplace, int *cnt)
{
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	if (inplace)
		cr_assert_eq(jbd_inplace(h, obj), 0);
	cr_assert_eq(jbd_record(h, obj, cut, r, sizeof(*r)), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, cnt) > 0);
}

static void commit_inplace(struct jbd *j, uint64_t obj, int *cnt)
{
	struct rec note = { .op = REC_NOTE };
	commit_record(j, obj, JBD_NO_CUT, &note, true, cnt);
}

/* writeback mode's fsync: a syncfs on a helper thread that covers every
 * in-place write committed before the call, then the log sync.  A request
 * still in the running transaction is covered (the transaction is sealed,
 * so a later request cannot join it unsynced); one syncfs serves later
 * calls with nothing new; the callback waits for the syncfs (a failed one
 * aborts); without home_fs_fd the caller must sync home itself. */
Test(jbd, sync_home_in_background)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_WRITEBACK, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_sync_home(j, NULL, NULL), -EOPNOTSUPP);
	cr_assert_eq(jbd_close(j), 0);

	o.ops.home_fs_fd = h_home_fs_fd;
	home_fs_calls = 0;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int cnt = 0, synced = 0;
	commit_inplace(j, 1, &cnt);          /* A: starts closing at once */
	commit_inplace(j, 2, &cnt);          /* B: waits in the running txn */
	cr_assert_eq(jbd_sync_home(j, cnt_cb, &synced), 0);
	cr_assert_eq(home_fs_calls, 1, "the syncfs did not start at once");
	commit_inplace(j, 3, &cnt);          /* C: after the call */
	drain(j);
	cr_assert_eq(synced, 1);
	cr_assert_eq(cnt, 3);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.home_syncfs, 1);
	cr_assert_eq(st.synced_seq, st.closed_seq);
	/* C is not covered by the first syncfs: a second one runs */
	cr_assert_eq(jbd_sync_home(j, cnt_cb, &synced), 0);
	drain(j);
	cr_assert_eq(synced, 2);
	cr_assert_eq(home_fs_calls, 2, "C was covered by a syncfs before it");
	/* nothing new: served by the syncfs that ran */
	cr_assert_eq(jbd_sync_home(j, cnt_cb, &synced), 0);
	drain(j);
	cr_assert_eq(synced, 3);
	cr_assert_eq(home_fs_calls, 2);
	/* a failed syncfs fails the fsync and aborts the journal */
	home_fs_bad = true;
	commit_inplace(j, 1, &cnt);
	cr_assert_eq(jbd_sync_home(j, cnt_cb, &synced), 0);
	drain(j);
	home_fs_bad = false;
	cr_assert_eq(synced, -1000, "the fsync did not wait for the syncfs");
	cr_assert_eq(jbd_aborted(j), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
	close(home_fs_fd_dir);
	home_fs_fd_dir = -1;
}

static bool fd_closed(int fd)
{
	return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

static int open_tmp_file(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "data", 4, 0), 4);
	return fd;
}

/* writeback mode's fsync of one file (jbd_sync_files): the caller's
 * descriptors are fsynced and closed on a helper thread, then the log is
 * synced; no syncfs runs.  A caller that comes while a batch runs goes in
 * the next one; one with nothing to fsync still waits for the running
 * batch (it may hold that file's data).  A failed fsync fails its caller
 * and aborts; without home_fs_fd the call refuses and the caller keeps
 * its descriptors. */
Test(jbd, sync_files_in_background)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_WRITEBACK, false);
	struct jbd *j;
	struct jbd_stats st;
	int fds[2];
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_not(jbd_can_sync_files(j));
	fds[0] = open_tmp_file("sf.a");
	cr_assert_eq(jbd_sync_files(j, fds, 1, NULL, NULL), -EOPNOTSUPP);
	cr_assert_not(fd_closed(fds[0]), "closed though refused");
	close(fds[0]);
	cr_assert_eq(jbd_close(j), 0);

	o.ops.home_fs_fd = h_home_fs_fd;
	home_fs_calls = 0;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert(jbd_can_sync_files(j));
	int cnt = 0, a = 0, b = 0, c = 0;
	commit_inplace(j, 1, &cnt);
	fds[0] = open_tmp_file("sf.a");
	fds[1] = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fds[1], 0);
	int fd2 = open_tmp_file("sf.b");
	cr_assert_eq(jbd_sync_files(j, fds, 2, cnt_cb, &a), 0);
	cr_assert_eq(jbd_sync_files(j, &fd2, 1, cnt_cb, &b), 0);
	cr_assert_eq(jbd_sync_files(j, NULL, 0, cnt_cb, &c), 0);
	cr_assert_eq(a + b + c, 0, "a callback ran inside its call");
	drain(j);
	cr_assert_eq(a, 1);
	cr_assert_eq(b, 1);
	cr_assert_eq(c, 1);
	cr_assert_eq(cnt, 1);
	cr_assert(fd_closed(fds[0]) && fd_closed(fds[1]) && fd_closed(fd2),
		  "the helper did not close the descriptors");
	jbd_stats(j, &st);
	cr_assert_eq(st.home_fsyncs, 2, "b waited for a's batch: two");
	cr_assert_eq(st.home_syncfs, 0, "a file's fsync ran a syncfs");
	cr_assert_eq(home_fs_calls, 0);
	cr_assert_eq(st.synced_seq, st.closed_seq, "the log was not synced");
	/* nothing running: no descriptors is the log sync alone */
	commit_inplace(j, 2, &cnt);
	cr_assert_eq(jbd_sync_files(j, NULL, 0, cnt_cb, &c), 0);
	drain(j);
	cr_assert_eq(c, 2);
	jbd_stats(j, &st);
	cr_assert_eq(st.home_fsyncs, 2);
	cr_assert_eq(st.synced_seq, st.closed_seq);
	/* at most JBD_SYNC_FILES_MAX_FDS held at once: the rest -EBUSY,
	 * left to the caller */
	static int many[JBD_SYNC_FILES_MAX_FDS];
	int one = open_tmp_file("sf.c");
	for (size_t i = 0; i < JBD_SYNC_FILES_MAX_FDS; i++)
		cr_assert_geq(many[i] = dup(one), 0);
	cr_assert_eq(jbd_sync_files(j, many, JBD_SYNC_FILES_MAX_FDS, cnt_cb,
				    &b), 0);
	cr_assert_eq(jbd_sync_files(j, &one, 1, cnt_cb, &b), -EBUSY);
	cr_assert_not(fd_closed(one));
	drain(j);
	cr_assert_eq(b, 2);
	cr_assert_eq(jbd_sync_files(j, &one, 1, cnt_cb, &b), 0);
	drain(j);
	cr_assert_eq(b, 3);
	jbd_stats(j, &st);
	cr_assert_eq(st.home_fsyncs, 4);
	cr_assert_eq(st.home_fsync_fds, 3 + JBD_SYNC_FILES_MAX_FDS + 1);
	/* an fsync that fails (a pipe's: EINVAL) fails the caller, aborts
	 * the journal and still closes the descriptor */
	int p[2];
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(jbd_sync_files(j, &p[0], 1, cnt_cb, &a), 0);
	drain(j);
	cr_assert_eq(a, -1000, "the fsync's failure was not reported");
	cr_assert_eq(jbd_aborted(j), -EIO);
	cr_assert(fd_closed(p[0]));
	close(p[1]);
	cr_assert_eq(jbd_sync_files(j, NULL, 0, cnt_cb, &a), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
	if (home_fs_fd_dir >= 0)
		close(home_fs_fd_dir);
	home_fs_fd_dir = -1;
}

/* ops.home_sync_fds for ordered mode: records the objects asked for,
 * answers a new descriptor of a scratch file per object (a pipe's when
 * sync_fds_fail, whose fsync fails), or -E2BIG / 0 as told. */
static uint64_t sync_fds_objs[8];
static size_t sync_fds_n;
static int sync_fds_calls, sync_fds_answer = 1;   /* 1: one fd per obj */
static bool sync_fds_fail;

static int h_home_sync_fds(void *arg, const uint64_t *objs, size_t n,
			   int *fds, size_t max)
{
	(void)arg;
	sync_fds_calls++;
	sync_fds_n = n < 8 ? n : 8;
	memcpy(sync_fds_objs, objs, sync_fds_n * sizeof(*objs));
	if (sync_fds_answer <= 0)
		return sync_fds_answer;
	cr_assert_leq(n, max);
	for (size_t i = 0; i < n; i++) {
		if (sync_fds_fail) {
			int p[2];
			cr_assert_eq(pipe(p), 0);
			close(p[1]);
			fds[i] = p[0];
		} else {
			fds[i] = open_tmp_file("of.x");
		}
	}
	return (int)n;
}

/* One in-place commit of obj, home_sync_fds answering `answer`; then the
 * syncfs runs and fsync batches started so far. */
static void ordered_step(struct jbd *j, uint64_t obj, int answer, int *cnt,
			 uint64_t syncfs, uint64_t fsyncs)
{
	struct jbd_stats st;
	sync_fds_answer = answer;
	commit_inplace(j, obj, cnt);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.home_syncfs, syncfs);
	cr_assert_eq(st.home_fsyncs, fsyncs);
}

/* ordered mode with ops.home_sync_fds (J11, FORMAT.md "Records and
 * modes"): before a commit block the helper thread fsyncs the descriptors
 * the owner names for the in-place objects of every sealed transaction
 * (each object once, sorted), not the file system; -E2BIG falls back to
 * the syncfs, 0 commits at once, a failed fsync aborts. */
Test(jbd, ordered_commit_fsyncs_its_objects)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_ORDERED, false);
	struct jbd *j;
	struct jbd_stats st;
	o.ops.home_fs_fd = h_home_fs_fd;
	o.ops.home_sync_fds = h_home_sync_fds;
	home_fs_calls = 0;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int cnt = 0;
	unsigned syncs0 = F.home_syncs;
	commit_inplace(j, 5, &cnt);   /* A: starts its batch at once */
	cr_assert_eq(sync_fds_calls, 1);
	cr_assert_eq(sync_fds_n, 1);
	cr_assert_eq(sync_fds_objs[0], 5);
	commit_inplace(j, 9, &cnt);   /* B, C: the next transaction */
	commit_inplace(j, 5, &cnt);
	drain(j);
	cr_assert_eq(cnt, 3);
	/* B and C joined one transaction while A's batch ran */
	cr_assert_eq(sync_fds_calls, 2, "B and C did not share one batch");
	cr_assert_eq(sync_fds_n, 2);
	cr_assert(sync_fds_objs[0] == 5 && sync_fds_objs[1] == 9,
		  "objects not each once and sorted");
	jbd_stats(j, &st);
	cr_assert_eq(st.home_fsyncs, 2);
	cr_assert_eq(st.home_fsync_fds, 3);
	cr_assert_eq(st.home_syncfs, 0, "an ordered commit ran a syncfs");
	cr_assert_eq(home_fs_calls, 0);
	cr_assert_eq(F.home_syncs, syncs0, "home_sync ran on the owner");
	/* the owner asks for one syncfs instead */
	ordered_step(j, 7, -E2BIG, &cnt, 1, 2);
	cr_assert_eq(cnt, 4);
	/* nothing left unsynced (a batch already took it): no thread */
	ordered_step(j, 7, 0, &cnt, 1, 2);
	cr_assert_eq(cnt, 5);
	/* a failed fsync aborts, and the commit is not acknowledged */
	sync_fds_answer = 1;
	sync_fds_fail = true;
	commit_inplace(j, 3, &cnt);
	drain(j);
	cr_assert_eq(cnt, -1000, "the failed fsync was not reported");
	cr_assert_eq(jbd_aborted(j), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
	sync_fds_fail = false;
	if (home_fs_fd_dir >= 0)
		close(home_fs_fd_dir);
	home_fs_fd_dir = -1;
}

/* Many concurrent requests share one close (group commit). */
Test(jbd, group_commit)
{
	struct jbd_opts o = mkopts(1 << 20, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[512];
	memset(buf, 9, sizeof(buf));
	int cnt = 0;
	for (int i = 0; i < 40; i++)
		write1(j, 1 + (uint64_t)(i % 3), (uint64_t)i * 512, buf, sizeof(buf), &cnt);
	drain(j);
	cr_assert_eq(cnt, 40);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert(st.commits <= 3, "commits %lu for 40 requests",
		  (unsigned long)st.commits);
	cr_assert_eq(jbd_close(j), 0);
}

/* A corrupt superblock is refused, never "repaired". */
Test(jbd, bad_superblock)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	struct jbd *j2;
	cr_assert_eq(jbd_open(&o, NULL, &j2), -EBUSY, "one owner per journal");
	cr_assert_eq(jbd_close(j), 0);
	/* Flip a byte of the UUID (writing a fixed byte left the superblock
	 * unchanged when the random UUID already had it: 1 run in 256). */
	int fd = open(F.path, O_RDWR);
	uint8_t byte;
	cr_assert_eq(pread(fd, &byte, 1, 40), 1);
	byte ^= 0xff;
	cr_assert_eq(pwrite(fd, &byte, 1, 40), 1);
	close(fd);
	cr_assert_eq(jbd_open(&o, NULL, &j), -EBADMSG);
}

static void record1(struct jbd *j, uint64_t obj, uint64_t cut, int *cnt)
{
	struct rec r = { .op = cut == 0 ? REC_DELETE : REC_TRUNC, .size = cut };
	commit_record(j, obj, cut, &r, false, cnt);
}

/* Pending cuts hide home data from reads until checkpointed; a write after
 * a cut in the same running transaction is never moved before the cut. */
Test(jbd, cut_overlay_and_order)
{
	struct jbd_opts o = mkopts(128 * BS, JBD_MODE_JOURNAL, true);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t a[4 * BS], r[4 * BS], want[4 * BS];
	memset(a, 'a', sizeof(a));
	int cnt = 0;
	write1(j, 1, 0, a, sizeof(a), &cnt);
	drain(j);
	cr_assert_eq(jbd_checkpoint(j, NULL, NULL), 0);
	drain(j);
	struct stat sb;
	fstat(F.obj[1].fd, &sb);
	cr_assert_eq(sb.st_size, 4 * BS, "home holds the data");
	/* cut to 5000, then grow to 12000: home still has 'a' up to 16K */
	record1(j, 1, 5000, &cnt);
	record1(j, 1, 12000, &cnt);
	drain(j);
	fstat(F.obj[1].fd, &sb);
	cr_assert_eq(sb.st_size, 4 * BS, "records wait for the checkpoint");
	memset(want, 0, sizeof(want));
	memset(want, 'a', 5000);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), 12000);
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	/* one running transaction: W(block 0), cut(100), W(200..300) */
	uint8_t b[BS], c[100];
	memset(b, 'b', sizeof(b));
	memset(c, 'c', sizeof(c));
	write1(j, 2, 0, a, 10, &cnt);        /* keeps a close in flight */
	write1(j, 2, 0, b, BS, &cnt);
	record1(j, 2, 100, &cnt);
	write1(j, 2, 200, c, sizeof(c), &cnt);
	drain(j);
	memset(want, 0, sizeof(want));
	memset(want, 'b', 100);
	memset(want + 200, 'c', 100);
	cr_assert_eq(jbd_read(j, 2, 0, r, sizeof(r)), 300);
	cr_assert_eq(memcmp(r, want, 300), 0);
	/* crash (process): replay gives the same */
	F.dead = true;
	jbd_abandon(j);
	F.dead = false;
	F.log_loaded = false;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_read(j, 2, 0, r, sizeof(r)), 300);
	cr_assert_eq(memcmp(r, want, 300), 0);
	memset(want, 0, sizeof(want));
	memset(want, 'a', 5000);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), 12000);
	cr_assert_eq(memcmp(r, want, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* commit_interval: closed transactions get synced by jbd_tick. */
Test(jbd, commit_interval_sync)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	o.commit_interval_ms = 20;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[100] = { 1 };
	int cnt = 0;
	write1(j, 1, 0, buf, sizeof(buf), &cnt);
	drain(j);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(cnt, 1);
	cr_assert(st.closed_seq > st.synced_seq, "closed, not yet synced");
	jbd_tick(j);
	drain(j);
	jbd_stats(j, &st);
	cr_assert(st.closed_seq > st.synced_seq, "not before the interval");
	usleep(30 * 1000);
	jbd_tick(j);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.closed_seq, st.synced_seq);
	cr_assert_eq(jbd_close(j), 0);
}

/* An empty request is a barrier, never stuck. */
Test(jbd, empty_handle_barrier)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	int cnt = 0;
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 1);
	uint8_t buf[10] = { 0 };
	write1(j, 1, 0, buf, sizeof(buf), &cnt);
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert(jbd_commit(h, JBD_COMMIT_SYNC, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 3);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.synced_seq, st.closed_seq);
	cr_assert_eq(jbd_close(j), 0);
}

/* A tiny cap on requests in flight: everything queues, nothing is lost. */
Test(jbd, inflight_cap)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	o.max_inflight = 1;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t buf[12 * BS], r[12 * BS];
	int cnt = 0;
	for (int i = 0; i < 30; i++) {
		memset(buf, 'a' + i % 26, sizeof(buf));
		write1(j, 1 + (uint64_t)(i % 2), 0, buf, sizeof(buf), &cnt);
	}
	drain(j);
	cr_assert_eq(cnt, 30);
	cr_assert_eq(jbd_read(j, 1, 0, r, sizeof(r)), (long)sizeof(r));
	memset(buf, 'a' + 28 % 26, sizeof(buf));
	cr_assert_eq(memcmp(r, buf, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_read(j, 2, 0, r, sizeof(r)), (long)sizeof(r));
	memset(buf, 'a' + 29 % 26, sizeof(buf));
	cr_assert_eq(memcmp(r, buf, sizeof(r)), 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* Tick every 60 ms until object obj is gone from home (obj 0: never) or
 * n ticks passed; returns the ticks taken. */
static int tick_until_gone(struct jbd *j, uint64_t obj, int n)
{
	int i;
	for (i = 0; i < n && (obj == 0 || F.obj[obj].exists); i++) {
		usleep(60 * 1000);
		jbd_tick(j);
		drain(j);
	}
	return i;
}

/* A synced cut (a delete, a truncate) gives its home space back within a
 * commit interval, with the log nowhere near half used: an idle iod kept
 * a deleted subfile's blocks forever, and a full home file system refused
 * every write after the rm.  Plain writes still wait for half the log
 * (they absorb overwrites there). */
Test(jbd, cut_checkpointed_within_commit_interval)
{
	struct jbd_opts o = mkopts(256 * BS, JBD_MODE_JOURNAL, true);
	o.commit_interval_ms = 50;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t a[4 * BS];
	memset(a, 'a', sizeof(a));
	int cnt = 0;
	struct jbd_stats st;
	write1(j, 1, 0, a, sizeof(a), &cnt);
	write1(j, 2, 0, a, sizeof(a), &cnt);
	drain(j);
	checkpoint_all(j, &st);
	uint64_t cps = st.checkpoints;
	cr_assert(F.obj[1].exists && F.obj[2].exists, "home holds both");

	write1(j, 2, 0, a, BS, &cnt);
	drain(j);
	cr_assert_eq(tick_until_gone(j, 0, 6), 6);
	jbd_stats(j, &st);
	cr_assert_eq(st.synced_seq, st.closed_seq, "the ticks synced");
	cr_assert_eq(st.checkpoints, cps, "a write alone waits for half the log");

	record1(j, 1, 0, &cnt);
	drain(j);
	cr_assert(F.obj[1].exists, "not before its sync");
	int ticks = tick_until_gone(j, 1, 40);
	cr_assert(!F.obj[1].exists, "the delete reached home (%d ticks)", ticks);
	jbd_stats(j, &st);
	cr_assert_gt(st.checkpoints, cps);
	cr_assert_eq(st.checkpointed_seq, st.closed_seq);
	cr_assert_eq(cnt, 4);
	cr_assert_eq(jbd_close(j), 0);
}

/* The memory the journal holds (docs/OPERATIONS.md "Memory"): a copy of
 * every journaled block from its commit until its checkpoint; of them,
 * the copies of transactions not yet in the log (waiting for space) are
 * unlogged_bytes.  The copies in the log never exceed the log; the rest
 * wait, counted, for the owner to bound. */
Test(jbd, memory_accounting)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[3 * BS];
	memset(buf, 0x6d, sizeof(buf));
	int cnt = 0;
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.copy_bytes, 0);
	cr_assert_eq(st.unlogged_bytes, 0);
	/* 60 requests of 3 blocks, no waiting: ~3x the log */
	for (int i = 0; i < 60; i++)
		write1(j, 1 + (uint64_t)(i % 3), (uint64_t)i * BS, buf,
		       sizeof(buf), &cnt);
	jbd_stats(j, &st);
	cr_assert_eq(st.copy_bytes, 180 * BS, "one copy per journaled block");
	cr_assert_gt(st.unlogged_bytes, 0, "the rest waits for log space");
	cr_assert_leq(st.copy_bytes - st.unlogged_bytes, st.nblocks * BS,
		      "the copies in the log fit the log");
	drain(j);
	cr_assert_eq(cnt, 60);
	checkpoint_all(j, &st);
	cr_assert_eq(st.copy_bytes, 0, "the checkpoint frees every copy");
	cr_assert_eq(st.unlogged_bytes, 0);
	/* A rewrite of a block in the running transaction updates its copy. */
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, BS), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, BS), 0);
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	jbd_stats(j, &st);
	cr_assert_leq(st.copy_bytes, 2 * BS);
	drain(j);
	checkpoint_all(j, &st);
	cr_assert_eq(st.copy_bytes, 0);
	cr_assert_eq(jbd_close(j), 0);
}

/* Admission that finds home full while rewrites wait in the log puts them
 * home at once: pending_home counts each journaled block as new home
 * space, so rewrites of one block held back far more than home takes, and
 * an idle iod refused writes (and df showed no space) until its log was
 * half used.  The writer's retry finds the space. */
Test(jbd, enospc_checkpoints_pending_rewrites)
{
	struct jbd_opts o = mkopts(256 * BS, JBD_MODE_JOURNAL, false);
	o.reserve = 8 * BS;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	F.free_space = 100 * BS;
	uint8_t buf[BS];
	int cnt = 0;
	for (int i = 0; i < 12; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		write1(j, 1, 0, buf, sizeof(buf), &cnt);
		drain(j);
	}
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.pending_home, 12 * BS);
	cr_assert_lt(st.checkpointed_seq, st.closed_seq, "an idle log waits");

	/* Room for the block and the reserve, not for pending_home. */
	F.free_space = 16 * BS;
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, BS), -ENOSPC);
	jbd_cancel(h);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.pending_home, 0, "the refused write checkpointed "
		     "the rewrites");
	cr_assert_eq(st.checkpointed_seq, st.closed_seq);
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 1, 0, buf, BS), 0, "the retry fits");
	cr_assert(jbd_commit(h, 0, cnt_cb, &cnt) > 0);
	drain(j);
	cr_assert_eq(cnt, 13);
	cr_assert_eq(jbd_close(j), 0);
}

/* A write that lengthens a block the running transaction already holds
 * (a short write, then a longer one: an appending writer) updates that
 * copy in place; pending_home counts the longer length, which the
 * checkpoint takes off again.  It counted only the first, and the
 * checkpoint's larger subtraction wrapped it: statfs then showed no free
 * space at all on an iod with most of its disk free. */
Test(jbd, pending_home_counts_a_lengthened_block)
{
	struct jbd_opts o = mkopts(256 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[BS];
	memset(buf, 'p', sizeof(buf));
	int cnt = 0;
	/* The first closes its transaction; the two after it share the
	 * next one, where the third lengthens the second's copy. */
	write1(j, 1, 0, buf, 100, &cnt);
	write1(j, 1, 0, buf, 2000, &cnt);
	write1(j, 1, 0, buf, 3000, &cnt);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.pending_home, 100 + 3000, "each transaction's "
		     "longest copy: %llu", (unsigned long long)st.pending_home);
	drain(j);
	cr_assert_eq(cnt, 3);
	checkpoint_all(j, &st);
	cr_assert_eq(st.pending_home, 0, "all home: %llu",
		     (unsigned long long)st.pending_home);
	struct stat sb;
	cr_assert_eq(fstat(F.obj[1].fd, &sb), 0);
	cr_assert_eq(sb.st_size, 3000, "home holds the longest");
	cr_assert_eq(jbd_close(j), 0);
}

/* jbd_want_home (a statfs short of space) checkpoints what the log holds,
 * and is a no-op when nothing new was journaled since. */
Test(jbd, want_home_checkpoints)
{
	struct jbd_opts o = mkopts(256 * BS, JBD_MODE_JOURNAL, false);
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	uint8_t buf[2 * BS];
	memset(buf, 'w', sizeof(buf));
	int cnt = 0;
	write1(j, 1, 0, buf, sizeof(buf), &cnt);
	drain(j);
	struct jbd_stats st;
	jbd_stats(j, &st);
	cr_assert_eq(st.pending_home, 2 * BS);
	uint64_t cps = st.checkpoints;
	jbd_want_home(j);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.pending_home, 0);
	cr_assert_eq(st.checkpoints, cps + 1);
	cr_assert(F.obj[1].exists, "the data is home");
	jbd_want_home(j);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_eq(st.checkpoints, cps + 1, "nothing new: no checkpoint");
	cr_assert_eq(jbd_close(j), 0);
}

/* Admission that finds home full while a cut waits in the log starts
 * that cut's checkpoint at once, not a commit interval later (here 100 s):
 * the writer's retry finds the space. */
Test(jbd, enospc_checkpoints_pending_cut)
{
	struct jbd_opts o = mkopts(256 * BS, JBD_MODE_JOURNAL, false);
	o.reserve = 8 * BS;
	struct jbd *j;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	static uint8_t a[4 * BS];
	memset(a, 'a', sizeof(a));
	int cnt = 0;
	struct jbd_stats st;
	write1(j, 1, 0, a, sizeof(a), &cnt);
	drain(j);
	checkpoint_all(j, &st);
	record1(j, 1, 0, &cnt);
	drain(j);
	jbd_stats(j, &st);
	cr_assert_lt(st.checkpointed_seq, st.closed_seq, "the delete waits");
	cr_assert(F.obj[1].exists);

	F.free_space = 4 * BS;
	struct jbd_handle *h;
	cr_assert_eq(jbd_begin(j, &h), 0);
	cr_assert_eq(jbd_write(h, 2, 0, a, BS), -ENOSPC);
	jbd_cancel(h);
	drain(j);
	cr_assert(!F.obj[1].exists, "the refused write checkpointed the delete");
	jbd_stats(j, &st);
	cr_assert_eq(st.checkpointed_seq, st.closed_seq);
	cr_assert_eq(cnt, 2);
	cr_assert_eq(jbd_close(j), 0);
}

/* J12: the owner's failed fsync of in-place data (writeback) aborts the
 * journal as the library's own would: every later request fails. */
Test(jbd, owner_fsync_failure_aborts)
{
	struct jbd_opts o = mkopts(64 * BS, JBD_MODE_WRITEBACK, true);
	struct jbd *j;
	struct jbd_handle *h;
	cr_assert_eq(jbd_open(&o, NULL, &j), 0);
	cr_assert_eq(jbd_aborted(j), 0);
	jbd_abort_home(j, -EIO, "a test fsync of in-place data");
	cr_assert_eq(jbd_aborted(j), -EIO);
	cr_assert_eq(jbd_begin(j, &h), -EIO);
	cr_assert_eq(jbd_sync(j, NULL, NULL), -EIO);
	cr_assert_eq(jbd_close(j), -EIO);
}
