/* test_client_report.c - size reports carried inside a SETATTR
 * (fuse-client/report.c fc_report_embed), without a loop or a network:
 * every dirty handle of the inode and no other rides along, with its size,
 * mtime and write flag; they count as reports in flight until the SETATTR
 * ends; meanwhile no timer report and no second report of the same
 * writes goes out, and a flush waits for the SETATTR instead; success
 * makes the handles clean, failure leaves them dirty (and a read's atime
 * pending); reports already in flight or too many handles fall back to
 * reports sent ahead.  An explicit mtime set makes the reports of the
 * writes before it keep its times (fc_times_*). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "file.h"
#include "inode.h"
#include "mount.h"
#include "report.h"

static struct fc_client *client_new(void)
{
	struct fc_client *cl = calloc(1, sizeof(*cl));

	cr_assert_not_null(cl);
	cr_assert_eq(uv_loop_init(&cl->loop), 0);
	cr_assert_eq(uv_timer_init(&cl->loop, &cl->report_timer), 0);
	tw_hmap_init(&cl->reports_inflight);
	return cl;
}

static void client_free(struct fc_client *cl)
{
	cr_assert_null(cl->barriers);
	uv_close((uv_handle_t *)&cl->report_timer, NULL);
	uv_run(&cl->loop, UV_RUN_NOWAIT);
	cr_assert_eq(uv_loop_close(&cl->loop), 0);
	tw_hmap_free(&cl->reports_inflight);
	free(cl);
}

/* An open handle of ino with `gen` completed writes up to end, none
 * reported. */
static struct fc_file *file_new(struct fc_client *cl, uint64_t ino,
				uint64_t gen, uint64_t end)
{
	struct fc_file *f = calloc(1, sizeof(*f));

	cr_assert_not_null(f);
	f->ino = ino;
	f->refs = 1;
	f->end = end;
	f->end_gen = 1;
	f->write_gen = gen;
	f->mtime_sec = 1000 + (int64_t)ino;
	f->mtime_nsec = 7;
	f->mtime_gen = gen;
	if (gen)
		fc_file_dirty(cl, f);
	return f;
}

static uintptr_t inflight(struct fc_client *cl, uint64_t ino)
{
	return (uintptr_t)tw_hmap_get(&cl->reports_inflight, ino);
}

static bool dirty(const struct fc_file *f)
{
	return f->write_gen != f->reported_gen;
}

static int done_calls, done_status;

static void done_cb(void *arg, int status)
{
	(void)arg;
	done_calls++;
	done_status = status;
}

Test(client_report, embeds_every_dirty_handle_of_the_inode)
{
	struct fc_client *cl = client_new();
	struct fc_file *a = file_new(cl, 7, 3, 10240);
	struct fc_file *b = file_new(cl, 7, 1, 20480);
	struct fc_file *other = file_new(cl, 8, 2, 4096);
	struct fc_file *clean = file_new(cl, 7, 0, 0);
	struct fc_report_set set;
	bool seen_a = false, seen_b = false;

	cr_assert(fc_report_embed(cl, 7, &set));
	cr_assert_eq(set.n, 2);
	for (size_t i = 0; i < set.n; i++) {
		const Twinfs__SizeReport *sr = set.sr[i];

		cr_assert_eq(sr->ino, 7);
		cr_assert(sr->wrote);
		cr_assert_eq(sr->mtime_sec, 1007);
		cr_assert_eq(sr->trunc_gen, 1);
		if (sr->size == 10240)
			seen_a = true;
		if (sr->size == 20480)
			seen_b = true;
	}
	cr_assert(seen_a && seen_b);
	cr_assert_eq(inflight(cl, 7), 2);
	cr_assert_eq(inflight(cl, 8), 0);
	cr_assert_not_null(a->embedded);
	cr_assert_eq(a->refs, 2, "the report holds the handle");

	fc_report_embed_done(cl, &set, 0);
	cr_assert_eq(set.n, 0);
	cr_assert(!dirty(a) && !dirty(b));
	cr_assert(!a->on_dirty_list && !b->on_dirty_list);
	cr_assert_null(a->embedded);
	cr_assert(dirty(other) && other->on_dirty_list);
	cr_assert_eq(inflight(cl, 7), 0);
	cr_assert_eq(a->refs, 1);

	/* Nothing dirty: an empty set, nothing to wait for. */
	cr_assert(fc_report_embed(cl, 7, &set));
	cr_assert_eq(set.n, 0);
	cr_assert_eq(inflight(cl, 7), 0);

	other->reported_gen = other->write_gen;  /* as if reported */
	fc_file_put(cl, a);
	fc_file_put(cl, b);
	fc_file_put(cl, other);
	fc_file_put(cl, clean);
	client_free(cl);
}

/* The report of f that a SETATTR would carry now; applied (status 0). */
static Twinfs__SizeReport embed_one(struct fc_client *cl, uint64_t ino)
{
	struct fc_report_set set;
	Twinfs__SizeReport sr;

	cr_assert(fc_report_embed(cl, ino, &set));
	cr_assert_eq(set.n, 1);
	sr = *set.sr[0];
	fc_report_embed_done(cl, &set, 0);
	return sr;
}

/* A write landing as write_finish (ops_data.c) lands it: at seq, the
 * times seq when it took its place. */
static void land(struct fc_client *cl, struct fc_file *f, uint64_t seq,
		 int64_t now)
{
	f->write_gen++;
	if (!fc_times_kept(cl, f->ino, seq)) {
		f->mtime_sec = now;
		f->mtime_gen = f->write_gen;
	}
	fc_file_dirty(cl, f);
}

Test(client_report, mtime_set_overtakes_earlier_writes)
{
	struct fc_client *cl = client_new();
	struct fc_attr at = { .ino = 7, .mode = S_IFREG | 0644, .nlink = 1 };
	struct fuse_entry_param e;
	struct fc_report_set set;
	struct fc_file *f;
	Twinfs__SizeReport sr;
	uint64_t before, after, seq, s2;

	fc_inodes_init(cl);
	atomic_init(&cl->blksize, 65536);
	cl->opts.attr_timeout = cl->opts.entry_timeout = 1.0;
	fc_inode_entry(cl, &at, &e);
	f = file_new(cl, 7, 2, 8192);    /* two writes landed: mtime 1007 */

	/* A third write takes its place, then futimens: the landed writes
	 * ride in its SETATTR (applied first; either way they must not set
	 * mtime if sent again), which ends as setattr_done ends it. */
	before = fc_times_seq(cl);
	seq = fc_times_set(cl, 7);
	cr_assert(fc_report_embed(cl, 7, &set));
	cr_assert_eq(set.n, 1);
	cr_assert(set.sr[0]->wrote && set.sr[0]->keep_times);
	fc_times_done(cl, 7, seq, 0);
	fc_report_embed_done(cl, &set, 0);
	cr_assert(!dirty(f));
	/* The third write lands after it and keeps its mtime. */
	cr_assert(fc_times_kept(cl, 7, before));
	land(cl, f, before, 1500);
	cr_assert_eq(f->mtime_sec, 1007, "an overtaken write is no mtime");
	sr = embed_one(cl, 7);           /* e.g. inside the fchmod */
	cr_assert(sr.wrote && sr.keep_times);
	cr_assert(!dirty(f));

	/* A write after the set moves mtime again. */
	after = fc_times_seq(cl);
	cr_assert(!fc_times_kept(cl, 7, after));
	land(cl, f, after, 2000);
	sr = embed_one(cl, 7);
	cr_assert(sr.wrote && !sr.keep_times);
	cr_assert_eq(sr.mtime_sec, 2000);

	/* A set that fails gives mtime back to the writes it overtook,
	 * those landed (their time: now) and those still in flight.  A
	 * report that kept the times while it was unanswered does not
	 * count as their report. */
	before = fc_times_seq(cl);
	seq = fc_times_set(cl, 7);
	land(cl, f, before, 2500);
	sr = embed_one(cl, 7);
	cr_assert(sr.wrote && sr.keep_times);
	cr_assert(dirty(f), "reported while the set is unanswered");
	fc_times_done(cl, 7, seq, -EIO);
	cr_assert(!fc_times_kept(cl, 7, before));
	sr = embed_one(cl, 7);
	cr_assert(sr.wrote && !sr.keep_times);
	cr_assert_gt(sr.mtime_sec, 2000);
	cr_assert(!dirty(f));

	/* Two sets fail, the earlier first: the writes before both set
	 * mtime once the later one failed too. */
	before = fc_times_seq(cl);
	seq = fc_times_set(cl, 7);
	s2 = fc_times_set(cl, 7);
	fc_times_done(cl, 7, seq, -EIO);
	cr_assert(fc_times_kept(cl, 7, before), "the later one may succeed");
	fc_times_done(cl, 7, s2, -EIO);
	cr_assert(!fc_times_kept(cl, 7, before));
	/* A failed set next to a later one that succeeded: that one holds. */
	before = fc_times_seq(cl);
	seq = fc_times_set(cl, 7);
	s2 = fc_times_set(cl, 7);
	fc_times_done(cl, 7, s2, 0);
	fc_times_done(cl, 7, seq, -EIO);
	cr_assert(fc_times_kept(cl, 7, before));

	fc_file_put(cl, f);
	fc_inodes_free(cl);
	client_free(cl);
}

Test(client_report, no_second_report_while_embedded)
{
	struct fc_client *cl = client_new();
	struct fc_file *f = file_new(cl, 9, 5, 100);
	struct fc_report_set set;
	int err = 1;

	cr_assert(fc_report_embed(cl, 9, &set));
	cr_assert_eq(set.n, 1);
	/* A timer report or one nobody waits for is not sent: it would
	 * count in flight. */
	cr_assert(!fc_report_start(cl, f, true, NULL, NULL, NULL, &err));
	cr_assert_eq(err, 0);
	cr_assert(!fc_report_start(cl, f, false, NULL, NULL, NULL, &err));
	cr_assert_eq(err, 0);
	cr_assert_eq(inflight(cl, 9), 1, "nothing else went out");
	/* A flush waits for the SETATTR. */
	done_calls = 0;
	done_status = 1;
	cr_assert(fc_report_start(cl, f, false, done_cb, NULL, NULL, &err));
	cr_assert_eq(done_calls, 0);
	cr_assert_not_null(cl->barriers);
	/* A read's atime waits too: a report now would carry `wrote`. */
	f->atime_pending = true;
	cr_assert(!fc_report_start(cl, f, true, NULL, NULL, NULL, &err));
	f->atime_pending = false;

	fc_report_embed_done(cl, &set, 0);
	cr_assert_eq(done_calls, 1, "the flush went on once");
	cr_assert_eq(done_status, 0);
	cr_assert_null(cl->barriers);
	cr_assert(!dirty(f));
	cr_assert_eq(f->refs, 1, "the waiter let go of the handle");
	fc_file_put(cl, f);
	client_free(cl);
}

Test(client_report, failure_leaves_the_writes_dirty)
{
	struct fc_client *cl = client_new();
	struct fc_file *f = file_new(cl, 11, 2, 4096);
	struct fc_report_set set;

	f->atime_pending = true;
	f->atime_sec = 77;
	cr_assert(fc_report_embed(cl, 11, &set));
	cr_assert(set.sr[0]->accessed);
	cr_assert(!f->atime_pending);
	fc_report_embed_done(cl, &set, -EIO);
	cr_assert(f->atime_pending && f->atime_sec == 77,
		  "the read's atime goes out with the next report");
	cr_assert(dirty(f));
	cr_assert(f->on_dirty_list, "reported again later");
	cr_assert_null(f->embedded);
	cr_assert_eq(inflight(cl, 11), 0);
	cr_assert_eq(f->refs, 1);

	/* Writes that completed while the SETATTR was out stay dirty after
	 * it succeeds; they are not covered by it. */
	cr_assert(fc_report_embed(cl, 11, &set));
	f->write_gen++;
	fc_report_embed_done(cl, &set, 0);
	cr_assert_eq(f->reported_gen, 2);
	cr_assert(dirty(f) && f->on_dirty_list);

	f->reported_gen = f->write_gen;
	fc_file_put(cl, f);
	client_free(cl);
}

Test(client_report, falls_back_to_reports_sent_ahead)
{
	struct fc_client *cl = client_new();
	struct fc_file *f[FC_REPORT_SET_MAX + 1];
	struct fc_report_set first, second;
	size_t i;

	/* Reports of the inode already in flight: the caller must wait for
	 * them (fc_report_ino), since they may be retransmitted later. */
	f[0] = file_new(cl, 12, 1, 1);
	cr_assert(fc_report_embed(cl, 12, &first));
	cr_assert_eq(first.n, 1);
	cr_assert(!fc_report_embed(cl, 12, &second));
	cr_assert_eq(second.n, 0);
	cr_assert_eq(inflight(cl, 12), 1);
	fc_report_embed_done(cl, &first, 0);

	/* More dirty handles than one SETATTR carries. */
	for (i = 1; i <= FC_REPORT_SET_MAX; i++)
		f[i] = file_new(cl, 13, 1, i);
	f[0]->ino = 13;
	f[0]->write_gen++;
	fc_file_dirty(cl, f[0]);
	cr_assert(!fc_report_embed(cl, 13, &second));
	cr_assert_eq(second.n, 0);
	cr_assert_eq(inflight(cl, 13), 0);
	for (i = 0; i <= FC_REPORT_SET_MAX; i++) {
		cr_assert_null(f[i]->embedded);
		f[i]->reported_gen = f[i]->write_gen;
		fc_file_put(cl, f[i]);
	}
	client_free(cl);
}
