/* test_client_wbehind.c - the order of data operations on an inode
 * (fuse-client/wbehind.c), without a loop or a network: overlapping writes
 * run in the order they entered; a read waits for the writes of its range
 * only; a whole-file wait (flush, fsync) waits for every write of the inode
 * and nothing else; waiters keep FIFO order among themselves; the caps on
 * early answers hold, also for the FUSE worker's reservations; the error of a failed early write is reported once;
 * a parked write (held back to be joined) is sent as soon as anything must
 * wait for its range, and only then;
 * and a random model check compares every start with a reference rule. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "loop.h"
#include "mount.h"
#include "wbehind.h"

#define MAX_OPS 64

struct top {
	struct fc_op op;
	struct fc_wb wb;
	int id;
	bool started;
	bool sent;                 /* parked, then sent by fc_wb_kick */
};

static int order[4096];
static int n_started;

static void start(struct fc_op *op)
{
	struct top *t = (struct top *)op;

	cr_assert(!t->started, "op %d started twice", t->id);
	t->started = true;
	order[n_started++] = t->id;
}

static struct fc_client *client_new(void)
{
	struct fc_client *cl = calloc(1, sizeof(*cl));

	cr_assert_not_null(cl);
	tw_hmap_init(&cl->wb_errs);
	n_started = 0;
	return cl;
}

static void client_free(struct fc_client *cl)
{
	cr_assert(fc_wb_idle(cl));
	cr_assert_eq(cl->wb_ops, 0);
	cr_assert_eq(cl->wb_bytes, 0);
	tw_hmap_free(&cl->wb_errs);
	free(cl);
}

/* Enter t; when it may go now, start it at once (as callers do). */
static void enter(struct fc_client *cl, struct top *t, int id, uint64_t ino,
		  uint64_t off, uint64_t end, bool hold)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->op.cl = cl;
	if (fc_wb_enter(cl, &t->wb, &t->op, ino, off, end, hold, start))
		start(&t->op);
}

Test(client_wbehind, overlapping_writes_keep_their_order)
{
	struct fc_client *cl = client_new();
	struct top a, b, c;

	enter(cl, &a, 1, 7, 0, 4096, true);
	enter(cl, &b, 2, 7, 1000, 2000, true);      /* overlaps a: waits */
	enter(cl, &c, 3, 7, 8192, 12288, true);     /* disjoint: runs */
	cr_assert_eq(n_started, 2);
	cr_assert(a.started && c.started && !b.started);
	fc_wb_release(cl, &c.wb, 0);
	cr_assert(!b.started);
	fc_wb_release(cl, &a.wb, 0);
	cr_assert(b.started);
	fc_wb_release(cl, &b.wb, 0);
	client_free(cl);
}

Test(client_wbehind, other_inodes_never_wait)
{
	struct fc_client *cl = client_new();
	struct top a, b;

	enter(cl, &a, 1, 7, 0, 4096, true);
	enter(cl, &b, 2, 8, 0, 4096, true);
	cr_assert(a.started && b.started);
	fc_wb_release(cl, &a.wb, 0);
	fc_wb_release(cl, &b.wb, 0);
	client_free(cl);
}

Test(client_wbehind, read_waits_for_its_range_only)
{
	struct fc_client *cl = client_new();
	struct top w, r1, r2;

	enter(cl, &w, 1, 7, 4096, 8192, true);
	enter(cl, &r1, 2, 7, 0, 4096, false);       /* before the write */
	enter(cl, &r2, 3, 7, 0, 5000, false);       /* overlaps it */
	cr_assert(r1.started && !r2.started);
	fc_wb_release(cl, &w.wb, 0);
	cr_assert(r2.started);
	/* A read holds nothing: a later write does not wait for it. */
	{
		struct top w2;

		enter(cl, &w2, 4, 7, 0, 8192, true);
		cr_assert(w2.started);
		fc_wb_release(cl, &w2.wb, 0);
	}
	client_free(cl);
}

Test(client_wbehind, whole_file_wait_and_fifo)
{
	struct fc_client *cl = client_new();
	struct top w1, w2, fl, w3, all;

	enter(cl, &w1, 1, 7, 0, 100, true);
	enter(cl, &w2, 2, 7, 1 << 20, (1 << 20) + 100, true);
	enter(cl, &fl, 3, 7, 0, UINT64_MAX, false); /* flush: waits for both */
	enter(cl, &w3, 4, 7, 5000, 6000, true);     /* behind the flush */
	cr_assert(w1.started && w2.started && !fl.started && !w3.started);
	fc_wb_release(cl, &w1.wb, 0);
	cr_assert(!fl.started && !w3.started);
	fc_wb_release(cl, &w2.wb, 0);
	/* The flush goes first, then the write that came after it. */
	cr_assert(fl.started && w3.started);
	cr_assert_eq(order[2], 3);
	cr_assert_eq(order[3], 4);
	/* ino 0 (shutdown): waits for writes of every inode. */
	enter(cl, &all, 5, 0, 0, UINT64_MAX, false);
	cr_assert(!all.started);
	fc_wb_release(cl, &w3.wb, 0);
	cr_assert(all.started);
	client_free(cl);
}

static int sent_order[16];
static int n_sent;

static void send_parked(struct fc_op *op)
{
	struct top *t = (struct top *)op;

	cr_assert(!t->sent, "op %d sent twice", t->id);
	cr_assert(!t->wb.parked);
	t->sent = true;
	sent_order[n_sent++] = t->id;
}

/* An early-answered write of ino held back unsent (ops_data.c joins). */
static void park(struct fc_client *cl, struct top *t, int id, uint64_t ino,
		 uint64_t off, uint64_t end)
{
	enter(cl, t, id, ino, off, end, true);
	cr_assert(t->started);
	cr_assert(fc_wb_detach(cl, &t->wb, end - off));
	cr_assert(fc_wb_park(cl, &t->wb, send_parked));
	cr_assert_eq(fc_wb_parked(cl, ino), &t->op);
}

Test(client_wbehind, parked_writes_go_when_waited_for)
{
	struct fc_client *cl = client_new();
	struct top a, b, c, r1, r2, fl, all;

	n_sent = 0;
	park(cl, &a, 1, 7, 0, 10240);
	park(cl, &b, 2, 8, 0, 4096);
	park(cl, &c, 3, 9, 0, 4096);
	/* What does not overlap it leaves it parked: a read elsewhere. */
	enter(cl, &r1, 10, 7, 20000, 30000, false);
	cr_assert(r1.started && !a.sent);
	/* A read of its bytes waits, and sends it: the read is not held up
	 * by the park. */
	enter(cl, &r2, 11, 7, 100, 200, false);
	cr_assert(!r2.started && a.sent && !b.sent && !c.sent);
	cr_assert_null(fc_wb_parked(cl, 7));
	fc_wb_release(cl, &a.wb, 0);
	cr_assert(r2.started);
	/* A flush of ino 8 sends ino 8's only. */
	enter(cl, &fl, 12, 8, 0, UINT64_MAX, false);
	cr_assert(!fl.started && b.sent && !c.sent);
	fc_wb_release(cl, &b.wb, 0);
	cr_assert(fl.started);
	/* A parked write released unsent (the client stopping) leaves the
	 * list. */
	fc_wb_release(cl, &c.wb, 5);
	cr_assert_null(fc_wb_parked(cl, 9));
	cr_assert_null(cl->wb_parked);
	/* ino 0 (shutdown) sends every one, oldest first. */
	n_sent = 0;
	park(cl, &a, 20, 7, 0, 100);
	park(cl, &b, 21, 8, 0, 100);
	enter(cl, &all, 22, 0, 0, UINT64_MAX, false);
	cr_assert(!all.started && a.sent && b.sent);
	cr_assert_eq(sent_order[0], 20);
	cr_assert_eq(sent_order[1], 21);
	fc_wb_release(cl, &b.wb, 0);
	fc_wb_release(cl, &a.wb, 0);
	cr_assert(all.started);
	/* fc_wb_kick by hand: the inode asked for, then all. */
	park(cl, &a, 30, 7, 0, 100);
	park(cl, &b, 31, 8, 0, 100);
	fc_wb_kick(cl, 8);
	cr_assert(b.sent && !a.sent);
	fc_wb_kick(cl, 0);
	cr_assert(a.sent);
	fc_wb_release(cl, &a.wb, 0);
	fc_wb_release(cl, &b.wb, 0);
	/* No park while something of the inode waits: a write in flight, a
	 * write behind it, a read behind that; the second write, once it
	 * holds its range, would block the read, which kicked nothing. */
	{
		struct top w1, w2, rd, other;

		enter(cl, &w1, 40, 7, 0, 8192, true);
		enter(cl, &w2, 41, 7, 4096, 12288, true);
		enter(cl, &rd, 42, 7, 8192, 12288, false);
		cr_assert(w1.started && !w2.started && !rd.started);
		fc_wb_release(cl, &w1.wb, 0);
		cr_assert(w2.started && !rd.started);
		cr_assert(fc_wb_detach(cl, &w2.wb, 8192));
		cr_assert(!fc_wb_park(cl, &w2.wb, send_parked));
		cr_assert_null(cl->wb_parked);
		/* Another inode's write still parks. */
		enter(cl, &other, 43, 8, 0, 100, true);
		cr_assert(fc_wb_detach(cl, &other.wb, 100));
		cr_assert(fc_wb_park(cl, &other.wb, send_parked));
		fc_wb_kick(cl, 0);
		fc_wb_release(cl, &other.wb, 0);
		fc_wb_release(cl, &w2.wb, 0);
		cr_assert(rd.started);
	}
	client_free(cl);
}

Test(client_wbehind, caps_and_errors)
{
	struct fc_client *cl = client_new();
	static struct top w[FC_WB_MAX_OPS + 1];
	int i;

	for (i = 0; i <= FC_WB_MAX_OPS; i++) {
		enter(cl, &w[i], i, 9, (uint64_t)i * 4096,
		      (uint64_t)(i + 1) * 4096, true);
		cr_assert(w[i].started);
		cr_assert_eq(fc_wb_detach(cl, &w[i].wb, 4096),
			     i < FC_WB_MAX_OPS, "op %d", i);
	}
	cr_assert_eq(cl->wb_ops, FC_WB_MAX_OPS);
	/* Two handles of ino 9 open, then two of the early writes fail:
	 * each handle reports the latest error once (errseq_t). */
	struct fc_file fa = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	struct fc_file fb = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	struct fc_file other = { .ino = 10, .err_seen = fc_wb_err_seq(cl, 10) };
	fc_wb_release(cl, &w[3].wb, 5 /* EIO */);
	fc_wb_release(cl, &w[4].wb, 28 /* ENOSPC */);
	for (i = 0; i <= FC_WB_MAX_OPS; i++)
		fc_wb_release(cl, &w[i].wb, 0);   /* no-op for 3 and 4 */
	struct fc_file late = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	cr_assert_eq(fc_wb_take_err(cl, &fa, false), 28);
	cr_assert_eq(fc_wb_take_err(cl, &fa, false), 0);
	cr_assert_eq(fc_wb_take_err(cl, &fb, false), 28, "each handle, not the first");
	cr_assert_eq(fc_wb_take_err(cl, &fb, false), 0);
	cr_assert_eq(fc_wb_take_err(cl, &late, false), 0, "opened after the error");
	cr_assert_eq(fc_wb_take_err(cl, &other, false), 0, "another inode");
	/* A write answered when it landed reports its own error. */
	{
		struct top big;

		enter(cl, &big, 1000, 9, 0, 1, true);
		cr_assert(!fc_wb_detach(cl, &big.wb, FC_WB_MAX_BYTES + 1));
		fc_wb_release(cl, &big.wb, 5);
		cr_assert_eq(fc_wb_take_err(cl, &fa, false), 0);
		cr_assert_eq(fc_wb_take_err(cl, &late, false), 0);
	}
	/* A later failure is news to every handle again. */
	{
		struct top again;

		enter(cl, &again, 1001, 9, 0, 1, true);
		cr_assert(fc_wb_detach(cl, &again.wb, 1));
		fc_wb_release(cl, &again.wb, 5);
		cr_assert_eq(fc_wb_take_err(cl, &fa, false), 5);
		cr_assert_eq(fc_wb_take_err(cl, &late, false), 5);
		cr_assert_eq(fc_wb_take_err(cl, &late, false), 0);
	}
	client_free(cl);
}

/* -o writeback_cache: a failed page-cache writeback is kept for every
 * handle's flush, as an early write's, but an fsync does not take it (the
 * kernel reported it to the file's fsync before it sent FSYNC); a later
 * early write's error is an fsync's again. */
Test(client_wbehind, writeback_errors_skip_fsync)
{
	struct fc_client *cl = client_new();
	struct fc_file fa = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	struct fc_file fb = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	struct top w;

	cr_assert(!atomic_load(&cl->wb_errs_any));
	fc_wb_note_writeback_err(cl, 9, 5);
	cr_assert(atomic_load(&cl->wb_errs_any));
	cr_assert_eq(fc_wb_take_err(cl, &fa, true), 0, "fsync: the kernel's");
	cr_assert_eq(fc_wb_take_err(cl, &fa, false), 0, "taken by the fsync");
	cr_assert_eq(fc_wb_take_err(cl, &fb, false), 5, "a writer's flush");
	cr_assert_eq(fc_wb_take_err(cl, &fb, false), 0);
	enter(cl, &w, 1, 9, 0, 1, true);
	cr_assert(fc_wb_detach(cl, &w.wb, 1));
	fc_wb_release(cl, &w.wb, 28);
	cr_assert_eq(fc_wb_take_err(cl, &fa, true), 28);
	client_free(cl);
}

/* Writes answered by the FUSE worker reserve from the same caps before
 * they enter the order; each one is given back when the write that
 * adopted it ends, with its error kept as for any early answer. */
Test(client_wbehind, worker_reservations_share_the_caps)
{
	struct fc_client *cl = client_new();
	struct fc_file f = { .ino = 9, .err_seen = fc_wb_err_seq(cl, 9) };
	struct top t, u;
	int i;

	for (i = 0; i < FC_WB_MAX_OPS - 1; i++)
		cr_assert(fc_wb_reserve(cl, 4096), "reservation %d", i);
	cr_assert(!fc_wb_reserve(cl, FC_WB_MAX_BYTES), "bytes over the cap");
	cr_assert_eq(cl->wb_ops, FC_WB_MAX_OPS - 1, "a refused one gives back");
	cr_assert(fc_wb_reserve(cl, 4096));
	cr_assert(!fc_wb_reserve(cl, 1), "ops over the cap");
	enter(cl, &t, 1, 9, 0, 4096, true);
	cr_assert(!fc_wb_detach(cl, &t.wb, 4096), "the loop's answer too");
	/* The first reserved write enters, holds and adopts its share. */
	fc_wb_adopt(&t.wb, 4096);
	fc_wb_release(cl, &t.wb, 5 /* EIO */);
	cr_assert_eq(cl->wb_ops, FC_WB_MAX_OPS - 1);
	cr_assert_eq(fc_wb_take_err(cl, &f, false), 5, "the error is kept");
	enter(cl, &u, 2, 9, 0, 4096, true);
	cr_assert(fc_wb_detach(cl, &u.wb, 4096), "room again");
	fc_wb_release(cl, &u.wb, 0);
	/* Give back the others as their writes would. */
	for (i = 0; i < FC_WB_MAX_OPS - 1; i++) {
		enter(cl, &t, 3 + i, 9, 0, 4096, true);
		fc_wb_adopt(&t.wb, 4096);
		fc_wb_release(cl, &t.wb, 0);
	}
	client_free(cl);
}

/* Random model: ops on two inodes, ranges in [0, 64), writes hold their
 * range; after every step, each op that has started must have had, when it
 * started, no earlier-entered, unreleased write overlapping it; and an op
 * may stay waiting only if some earlier-entered op that overlaps it has not
 * finished (started and, for writes, released) yet. */
struct mop_ {
	struct top t;
	uint64_t ino, off, end;
	bool hold, released;
	int seq;
};

static bool ovl(const struct mop_ *a, const struct mop_ *b)
{
	if (a->ino && b->ino && a->ino != b->ino)
		return false;
	return a->off < b->end && b->off < a->end;
}

Test(client_wbehind, random_model)
{
	int waited = 0;

	for (int round = 0; round < 200; round++) {
		struct fc_client *cl = client_new();
		static struct mop_ ops[MAX_OPS];
		int n = 0;
		uint64_t seed = (uint64_t)round * 0x9E3779B97F4A7C15ull + 1;

		memset(ops, 0, sizeof(ops));
		for (int step = 0; step < 400; step++) {
			seed ^= seed << 13;   /* xorshift64 */
			seed ^= seed >> 7;
			seed ^= seed << 17;
			uint64_t r = seed;

			if (n < MAX_OPS && (r % 3 != 0)) {
				struct mop_ *m = &ops[n];

				m->ino = (r >> 4) % 5 == 0 ? 0 : 1 + (r >> 6) % 2;
				m->off = (r >> 8) % 60;
				m->end = m->off + 1 + (r >> 14) % 8;
				if ((r >> 20) % 7 == 0)
					m->end = UINT64_MAX;
				m->hold = m->ino && (r >> 24) % 2;
				m->seq = n;
				enter(cl, &m->t, n, m->ino, m->off, m->end,
				      m->hold);
				waited += !m->t.started;
				n++;
			} else {
				/* Release a random started writer. */
				for (int k = 0; k < n; k++) {
					struct mop_ *m = &ops[(k + r) % n];

					if (m->hold && m->t.started &&
					    !m->released) {
						m->released = true;
						fc_wb_release(cl, &m->t.wb, 0);
						break;
					}
				}
			}
			/* Check: no waiting op is free to go. */
			for (int i = 0; i < n; i++) {
				bool blocked = false;

				if (ops[i].t.started)
					continue;
				for (int j = 0; j < i && !blocked; j++) {
					if (!ovl(&ops[i], &ops[j]))
						continue;
					if (!ops[j].t.started ||
					    (ops[j].hold && !ops[j].released))
						blocked = true;
				}
				cr_assert(blocked, "round %d: op %d waits "
					  "for nothing", round, i);
			}
		}
		/* Order: overlapping ops started in entry order. */
		for (int a = 0; a < n_started; a++)
			for (int b = a + 1; b < n_started; b++) {
				int x = order[a], y = order[b];

				cr_assert(!(y < x && ovl(&ops[x], &ops[y]) &&
					    (ops[x].hold || ops[y].hold)),
					  "round %d: op %d started before "
					  "op %d", round, x, y);
			}
		/* Drain. */
		for (int guard = 0; guard < 10 * MAX_OPS; guard++) {
			bool any = false;

			for (int i = 0; i < n; i++)
				if (ops[i].hold && ops[i].t.started &&
				    !ops[i].released) {
					ops[i].released = true;
					fc_wb_release(cl, &ops[i].t.wb, 0);
					any = true;
				}
			if (!any)
				break;
		}
		for (int i = 0; i < n; i++)
			cr_assert(ops[i].t.started, "round %d: op %d never "
				  "started", round, i);
		client_free(cl);
	}
	/* The model is only a check if ops did wait. */
	cr_assert_gt(waited, 1000, "only %d ops waited", waited);
}
