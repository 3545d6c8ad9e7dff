/* test_client_loop.c - the client's I/O loop without FUSE or a network:
 * ops handed over from many threads each run exactly once on the loop
 * thread; fc_call on a missing peer still ends in its callback, once,
 * later; an mgrd call that cannot be sent is retried until its deadline
 * and then fails with EIO, once; the loop stops with nothing pending. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"

#define N_THREADS 4
#define N_OPS     2000

static atomic_int ran;
static atomic_int call_cbs;
static atomic_int call_status;
static atomic_int mgr_cbs;
static atomic_int mgr_status;
static atomic_llong mgr_elapsed_ms;

static struct fc_client *client_new(void)
{
	struct fc_client *cl = calloc(1, sizeof(*cl));

	cr_assert_not_null(cl);
	pthread_mutex_init(&cl->queue_lock, NULL);
	pthread_mutex_init(&cl->start_lock, NULL);
	pthread_cond_init(&cl->start_cond, NULL);
	fc_inodes_init(cl);
	/* never contacted: the tests detach it */
	cr_assert_eq(tw_mgrlist_parse(&cl->mgrs, "127.0.0.1:9", 7500), 0);
	cl->opts.cluster = "twinfs";
	cl->opts.request_timeout_ms = 200;
	cl->opts.mgr_timeout_ms = 400;
	cl->opts.monitor_interval_ms = 1000;
	return cl;
}

static void count_run(struct fc_op *op)
{
	atomic_fetch_add(&ran, 1);
	fc_op_free(op);
}

static void *submitter(void *arg)
{
	struct fc_client *cl = arg;
	int i;

	for (i = 0; i < N_OPS; i++) {
		struct fc_op *op = fc_op_new(cl, NULL, sizeof(*op), count_run);

		cr_assert_not_null(op);
		fc_loop_submit(cl, op);
	}
	return NULL;
}

Test(client_loop, ops_run_once_each)
{
	struct fc_client *cl = client_new();
	pthread_t t[N_THREADS];
	int i;

	atomic_store(&ran, 0);
	cr_assert_eq(fc_loop_start(cl), 0);
	for (i = 0; i < N_THREADS; i++)
		pthread_create(&t[i], NULL, submitter, cl);
	for (i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 500 && atomic_load(&ran) < N_THREADS * N_OPS; i++)
		usleep(10000);
	fc_loop_stop(cl);
	cr_assert_eq(atomic_load(&ran), N_THREADS * N_OPS);
	fc_inodes_free(cl);
	free(cl);
}

struct call_op {
	struct fc_op op;
	struct fc_mgr_call mc;
	Twinfs__Getattr ga;
	uint64_t t0;
};

static void call_cb(int status, struct wire_msg *reply, void *arg)
{
	struct fc_op *op = arg;

	cr_assert_null(reply);
	atomic_store(&call_status, status);
	atomic_fetch_add(&call_cbs, 1);
	fc_op_free(op);
}

static void call_run(struct fc_op *op)
{
	Twinfs__Empty e;

	twinfs__empty__init(&e);
	/* A missing peer: the callback comes later, not from inside. */
	fc_call(op->cl, NULL, TWINFS__MSG_TYPE__MSG_PING, &e.base, NULL, 0,
		100, call_cb, op);
	cr_assert_eq(atomic_load(&call_cbs), 0);
}

Test(client_loop, call_without_peer_completes_later_once)
{
	struct fc_client *cl = client_new();
	struct fc_op *op;
	int i;

	atomic_store(&call_cbs, 0);
	cr_assert_eq(fc_loop_start(cl), 0);
	op = fc_op_new(cl, NULL, sizeof(*op), call_run);
	fc_loop_submit(cl, op);
	for (i = 0; i < 200 && atomic_load(&call_cbs) == 0; i++)
		usleep(5000);
	usleep(50000);
	fc_loop_stop(cl);
	cr_assert_eq(atomic_load(&call_cbs), 1);
	cr_assert_eq(atomic_load(&call_status), -ENOTCONN);
	fc_inodes_free(cl);
	free(cl);
}

static void mgr_cb(struct fc_mgr_call *mc, int status, struct wire_msg *reply)
{
	struct call_op *c = mc->arg;

	cr_assert_null(reply);
	atomic_store(&mgr_status, status);
	atomic_store(&mgr_elapsed_ms, (long long)(tw_now_ms() - c->t0));
	atomic_fetch_add(&mgr_cbs, 1);
	fc_op_free(&c->op);
}

static void mgr_run(struct fc_op *op)
{
	struct call_op *c = (struct call_op *)op;
	struct fc_client *cl = op->cl;

	/* Detach mgrd: every attempt fails with -ENOTCONN (a transport
	 * error), so the call is retransmitted until mgr_timeout. */
	wire_peer_free(cl->mgr);
	cl->mgr = NULL;
	c->t0 = tw_now_ms();
	twinfs__getattr__init(&c->ga);
	c->ga.ino = 1;
	fc_mgr_send(cl, &c->mc, TWINFS__MSG_TYPE__MSG_GETATTR, &c->ga.base,
		    &c->ga.ctx, NULL, 0, mgr_cb, c);
	cr_assert_eq(c->ga.ctx->seq, 1);
}

Test(client_loop, mgr_call_retries_until_deadline_then_eio)
{
	struct fc_client *cl = client_new();
	struct call_op *c;
	int i;

	atomic_store(&mgr_cbs, 0);
	cr_assert_eq(fc_loop_start(cl), 0);
	c = fc_op_new(cl, NULL, sizeof(*c), mgr_run);
	fc_loop_submit(cl, &c->op);
	for (i = 0; i < 400 && atomic_load(&mgr_cbs) == 0; i++)
		usleep(10000);
	fc_loop_stop(cl);
	cr_assert_eq(atomic_load(&mgr_cbs), 1);
	cr_assert_eq(atomic_load(&mgr_status), -EIO);
	cr_assert_geq(atomic_load(&mgr_elapsed_ms), 400);
	cr_assert_lt(atomic_load(&mgr_elapsed_ms), 3000);
	fc_inodes_free(cl);
	free(cl);
}
