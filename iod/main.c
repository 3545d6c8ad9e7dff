/* main.c - twinfs-iod: command line, start-up, signals.
 *
 *   twinfs-iod -c CONF -i ID [-v] [--no-mgr] [--quarantine-journal]
 *
 * Runs in the foreground and logs to stderr.  Opens its data directory
 * ([iod ID] dir, store.c), registers with mgrd (mgr.c), connects to its twin
 * (twin.c) and serves [iod ID] host:port (server.c), all on one libuv loop.
 * The store's journal is opened and replayed before anything else starts,
 * so nothing is served (or registered with mgrd) before replay finished.
 * SIGTERM or SIGINT: stop accepting, fail outstanding forwards, let every
 * journaled request complete, then close the journal (sync + checkpoint),
 * exit 0 (1 when the journal had aborted).  --no-mgr is for tests: no
 * mgrd, map from the config.  --quarantine-journal is the way out for a
 * journal that cannot be replayed (the start said so and why): it is kept
 * aside, untouched, as DIR/journal.quarantined-<time>, and the iod starts
 * with a new journal and a new identity, as a replaced disk, so mgrd
 * rebuilds it in full from its twin before it serves a read
 * (OPERATIONS.md in docs/, "A journal that cannot be replayed").
 *
 * Environment: TWINFS_TEST_FAULTS=1 (failure drills only) makes SIGUSR1
 * fail the next journal write with EIO (iod_store_inject_journal_eio), so
 * that a test can abort the journal of a running iod; with it,
 * TWINFS_TEST_REPLAY_EIO=1 fails every home write of the replay at start
 * with EIO (a journal that cannot be replayed).
 */
#include "iod_int.h"
#include "journal.h"
#include "stall.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct iod daemon_state;
static uv_signal_t sig_term, sig_int;
static uv_signal_t sig_fault, sig_fault2;   /* TWINFS_TEST_FAULTS only */
static bool fault_knob;

static void usage(FILE *f)
{
	fprintf(f, "usage: twinfs-iod -c CONF -i ID [-v] [--no-mgr] "
		"[--quarantine-journal]\n"
		"       twinfs-iod --help | --version\n"
		"  -c CONF     cluster configuration (twinfs.conf)\n"
		"  -i ID       serve as [iod ID] of CONF\n"
		"  -v          debug logging\n"
		"  --no-mgr    tests only: run without mgrd, map from CONF\n"
		"  --quarantine-journal\n"
		"              the journal cannot be replayed: keep it aside as\n"
		"              DIR/journal.quarantined-TIME, start empty, and be\n"
		"              rebuilt in full from the twin (as a new disk)\n");
}

void iod_journal_aborted(void *arg)
{
	struct iod *d = arg;

	/* The journal's own line just before this one names the operation
	 * that failed and its errno. */
	tw_err("iod %" PRIu32 ": journal %s/journal aborted after an I/O "
	       "error on it (EIO): refusing every write, truncate and delete "
	       "with EIO and failing pings; reported to mgrd so that twin iod %"
	       PRIu32 " serves alone until this iod is restarted (replay) and "
	       "resynced", d->id, d->me->dir, d->twin_id);
	iod_mgr_report_self(d);
}

/* TWINFS_TEST_FAULTS=1 (failure drills only): SIGUSR1 makes the next
 * journal write fail with EIO, as a dying disk would. */
static void on_fault_signal(uv_signal_t *s, int signum)
{
	struct iod *d = s->data;

	(void)signum;
	tw_warn("iod %" PRIu32 ": SIGUSR1 with TWINFS_TEST_FAULTS=1: the next "
		"journal write fails with EIO", d->id);
	iod_store_inject_journal_eio(d->store);
}

/* ... and SIGUSR2 makes this iod refuse the next client write its twin
 * forwards to it with ENOSPC, as a full disk would: the twin applied it,
 * this iod did not (the write-intent pin and resync drills).
 * TWINFS_TEST_REFUSE names variants, comma-separated: "stale" refuses
 * with ESTALE instead, as a twin that already holds a newer map would
 * (the stale-forward drills); "truncate" refuses the next forwarded
 * TRUNCATE instead, whether mgrd's or a resync's (the whole-copy drill);
 * "resync" the next WRITE of a resync instead of a client's (the drill
 * of a map change racing a copy). */
static void on_fault2_signal(uv_signal_t *s, int signum)
{
	struct iod *d = s->data;
	const char *how = getenv("TWINFS_TEST_REFUSE");

	(void)signum;
	d->fault_refusal = how && strstr(how, "stale") ? -ESTALE : -ENOSPC;
	d->fault_refuse_type = how && strstr(how, "truncate")
			       ? TWINFS__MSG_TYPE__MSG_TRUNCATE
			       : TWINFS__MSG_TYPE__MSG_WRITE;
	d->fault_refuse_resync = how && strstr(how, "resync");
	tw_warn("iod %" PRIu32 ": SIGUSR2 with TWINFS_TEST_FAULTS=1: the next "
		"forwarded %s is refused with %s", d->id,
		d->fault_refuse_type == TWINFS__MSG_TYPE__MSG_TRUNCATE
		? "TRUNCATE" : d->fault_refuse_resync ? "resync write"
		: "client write",
		d->fault_refusal == -ESTALE ? "ESTALE" : "ENOSPC");
	d->fault_refuse_fwd = true;
}

static void on_jnl_poll(uv_poll_t *p, int status, int events)
{
	struct iod *d = p->data;

	(void)status;
	(void)events;
	iod_store_process(d->store);
}

static void on_jnl_prepare(uv_prepare_t *p)
{
	struct iod *d = p->data;
	uint64_t until;

	/* First: the requests a release delivers commit, and their closes
	 * wait for the iod_store_process below (owner_drains). */
	iod_mem_poll(d);
	if (iod_store_ready(d->store))
		iod_store_process_ready(d->store);
	/* Last: the journal's writes are out, the twin's answer is next. */
	until = tw_spin_until(&d->twin_spin, tw_now_ns());
	if (until)
		(void)tw_spin_poll(uv_backend_fd(d->loop), until);
}

static void on_jnl_tick(uv_timer_t *t)
{
	struct iod *d = t->data;

	iod_store_tick(d->store);
	iod_mem_tick(d);
}

static int jnl_handles_start(struct iod *d)
{
	int rc = uv_poll_init(d->loop, &d->jnl_poll,
			      iod_store_event_fd(d->store));

	if (rc < 0)
		return rc;
	d->jnl_poll.data = d;
	uv_prepare_init(d->loop, &d->jnl_prepare);
	d->jnl_prepare.data = d;
	uv_timer_init(d->loop, &d->jnl_timer);
	d->jnl_timer.data = d;
	d->jnl_handles = true;
	rc = uv_poll_start(&d->jnl_poll, UV_READABLE, on_jnl_poll);
	if (rc == 0)
		rc = uv_prepare_start(&d->jnl_prepare, on_jnl_prepare);
	if (rc == 0)
		rc = uv_timer_start(&d->jnl_timer, on_jnl_tick, 200, 200);
	return rc;
}

static void jnl_handles_stop(struct iod *d)
{
	if (!d->jnl_handles)
		return;
	d->jnl_handles = false;
	uv_poll_stop(&d->jnl_poll);
	uv_prepare_stop(&d->jnl_prepare);
	uv_timer_stop(&d->jnl_timer);
	uv_close((uv_handle_t *)&d->jnl_poll, NULL);
	uv_close((uv_handle_t *)&d->jnl_prepare, NULL);
	uv_close((uv_handle_t *)&d->jnl_timer, NULL);
}

static void on_final_sync(void *arg, int rc)
{
	struct iod *d = arg;

	if (rc < 0)
		tw_err("iod %" PRIu32 ": final sync failed: %s", d->id,
		       strerror(-rc));
	jnl_handles_stop(d);
}

static void shutdown_daemon(struct iod *d)
{
	if (d->closing)
		return;
	d->closing = true;
	tw_info("iod %" PRIu32 ": shutting down", d->id);
	tw_stall_stop(d->loop);
	iod_metrics_stop(d);
	iod_scrub_stop(d);
	iod_mem_fini(d);
	iod_server_stop(d);
	iod_resync_stop(d);
	iod_twin_stop(d);
	iod_mgr_stop(d);
	uv_close((uv_handle_t *)&sig_term, NULL);
	uv_close((uv_handle_t *)&sig_int, NULL);
	if (fault_knob) {
		uv_close((uv_handle_t *)&sig_fault, NULL);
		uv_close((uv_handle_t *)&sig_fault2, NULL);
	}
	/* Keep the journal's loop hooks until everything already journaled
	 * has completed (its callbacks reply on connections), then stop. */
	if (!d->jnl_handles ||
	    iod_store_fsync(d->store, 0, 0, on_final_sync, d) < 0)
		jnl_handles_stop(d);
}

static void on_signal(uv_signal_t *s, int signum)
{
	(void)signum;
	shutdown_daemon(s->data);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-mgr", no_argument, NULL, 'N' },
		{ "quarantine-journal", no_argument, NULL, 'Q' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct iod *d = &daemon_state;
	struct iod_store_opts so = { 0 };
	struct tw_conf *conf = NULL;
	const char *conf_path = NULL;
	char err[512], *end;
	long id = -1;
	bool verbose = false, no_mgr = false, ran = false, quarantine = false;
	struct jbd_stats js = { 0 };
	int opt, rc, status = 1;

	while ((opt = getopt_long(argc, argv, "c:i:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_path = optarg;
			break;
		case 'i':
			errno = 0;
			id = strtol(optarg, &end, 10);
			if (errno || *end || id < 1 || id > TW_MAX_IODS) {
				fprintf(stderr, "twinfs-iod: bad iod id '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'N':
			no_mgr = true;
			break;
		case 'Q':
			quarantine = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("twinfs-iod %s (protocol %u)\n", TW_VERSION,
			       WIRE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!conf_path || id < 0 || optind != argc) {
		usage(stderr);
		return 2;
	}
	tw_log_init("twinfs-iod", verbose ? TW_LOG_DEBUG : TW_LOG_INFO);
	tw_malloc_tune();

	conf = malloc(sizeof(*conf));
	if (!conf) {
		tw_err("out of memory");
		return 1;
	}
	rc = tw_conf_load(conf_path, conf, err, sizeof(err));
	if (rc < 0) {
		tw_err("%s", err[0] ? err : strerror(-rc));
		goto out;
	}
	memset(d, 0, sizeof(*d));
	d->conf = conf;
	tw_spin_init(&d->twin_spin, conf->twin_spin_us);
	d->id = (uint32_t)id;
	d->me = tw_conf_iod(conf, (int)id);
	d->no_mgr = no_mgr;
	if (!d->me) {
		tw_err("%s: no [iod %ld] section", conf_path, id);
		goto out;
	}
	for (int i = 0; i < conf->n_iods; i++)
		if (conf->iods[i].group == d->me->group &&
		    conf->iods[i].id != d->me->id)
			d->twin_id = (uint32_t)conf->iods[i].id;
	if (d->twin_id == 0) {
		tw_err("%s: iod %ld has no twin in group %d", conf_path, id,
		       d->me->group);
		goto out;
	}
	do {
		rc = tw_random(&d->incarnation, sizeof(d->incarnation));
	} while (rc == 0 && d->incarnation == 0);
	if (rc < 0) {
		tw_err("getrandom: %s", strerror(-rc));
		goto out;
	}

	fault_knob = getenv("TWINFS_TEST_FAULTS") &&
		     strcmp(getenv("TWINFS_TEST_FAULTS"), "1") == 0;
	so.dir = d->me->dir;
	so.iod_id = d->id;
	so.cluster = conf->cluster_name;
	so.journal_size = conf->journal_size;
	so.reserve = conf->iod_reserve;
	so.journal_mode = (int)conf->journal_mode;
	so.commit_interval_ms = conf->commit_interval_ms;
	so.on_abort = iod_journal_aborted;
	so.abort_arg = d;
	so.quarantine_journal = quarantine;
	/* Measurement only (test/bench/csum_cost.sh): no block checksums. */
	so.bench_no_csum = getenv("TWINFS_BENCH_NO_CSUM") &&
			   strcmp(getenv("TWINFS_BENCH_NO_CSUM"), "1") == 0;
	so.test_replay_eio = fault_knob && getenv("TWINFS_TEST_REPLAY_EIO") &&
			     strcmp(getenv("TWINFS_TEST_REPLAY_EIO"), "1") == 0;
	/* Replay happens in here, before registration (mgr.c) and serving. */
	rc = iod_store_open(&so, &d->store);
	if (rc == -ENOTRECOVERABLE) {
		/* The journal's line before this one says where and what. */
		tw_err("iod %ld: REFUSING TO START: the journal %s/journal is "
		       "damaged in the middle (a transaction committed after "
		       "the bad one had been synced follows it), so replaying "
		       "up to the damage would drop synced writes.  It is "
		       "untouched.  To go on: "
		       "start once with --quarantine-journal (the journal is "
		       "kept aside as journal.quarantined-TIME and the iod is "
		       "rebuilt in full from its twin); docs/OPERATIONS.md "
		       "\"A damaged record log or journal\"", id, d->me->dir);
		goto out;
	}
	if (rc < 0) {
		/* Busy: another process owns it, and quarantining a live
		 * journal would lose what that process acknowledged. */
		tw_err("iod %ld: cannot use data directory %s: %s%s", id,
		       d->me->dir, strerror(-rc), rc == -EBADMSG ? "" :
		       rc == -EBUSY ? "; another process holds its journal "
		       "(stop the other twinfs-iod on it first)" :
		       "; if its journal cannot be replayed, start it once "
		       "with --quarantine-journal (the journal is kept aside "
		       "and the iod is rebuilt from its twin)");
		goto out;
	}

	signal(SIGPIPE, SIG_IGN);
	d->loop = uv_default_loop();
	uv_signal_init(d->loop, &sig_term);
	uv_signal_init(d->loop, &sig_int);
	sig_term.data = sig_int.data = d;
	uv_signal_start(&sig_term, on_signal, SIGTERM);
	uv_signal_start(&sig_int, on_signal, SIGINT);
	if (fault_knob) {
		uv_signal_init(d->loop, &sig_fault);
		sig_fault.data = d;
		uv_signal_start(&sig_fault, on_fault_signal, SIGUSR1);
		uv_signal_init(d->loop, &sig_fault2);
		sig_fault2.data = d;
		uv_signal_start(&sig_fault2, on_fault2_signal, SIGUSR2);
		tw_warn("iod %ld: TWINFS_TEST_FAULTS=1: SIGUSR1 fails the next "
			"journal write, SIGUSR2 refuses the next forwarded "
			"client write (failure drills only)", id);
	}

	if (tw_stall_start(d->loop) < 0 ||
	    jnl_handles_start(d) < 0 || iod_mgr_start(d) < 0 ||
	    iod_twin_start(d) < 0 || iod_twin_intent_start(d) < 0 ||
	    iod_vote_open(d) < 0 || iod_server_start(d) < 0 || iod_metrics_start(d) < 0 ||
	    iod_scrub_init(d) < 0) {
		shutdown_daemon(d);
		uv_run(d->loop, UV_RUN_DEFAULT);
		goto out;
	}
	tw_info("iod %ld (group %d, twin %d; twin is iod %" PRIu32 ") "
		"incarnation %016" PRIx64, id, d->me->group, d->me->twin_index,
		d->twin_id, d->incarnation);
	uv_run(d->loop, UV_RUN_DEFAULT);

	/* A clean stop leaves everything acknowledged on stable storage and
	 * checkpointed (iod_store_close below). */
	rc = iod_store_aborted(d->store);
	status = rc < 0 ? 1 : 0;
	iod_store_journal_stats(d->store, &js);
	ran = true;
out:
	if (d->loop) {
		uv_loop_close(d->loop);
	}
	iod_store_close(d->store);   /* jbd_close: sync + checkpoint */
	/* Only now is it stopped: the close syncs, checkpoints and drops the
	 * clean-stop flags (store.c), which a reader of this line may check. */
	if (ran)
		tw_info("iod %ld: stopped (%" PRIu64 " requests forwarded to "
			"the twin; journal: %" PRIu64 " commits, %" PRIu64
			" log syncs, %" PRIu64 " checkpoints; home: %" PRIu64
			" syncfs, %" PRIu64 " fsync batches of %" PRIu64
			" files and directories)", id, d->n_forwarded,
			js.commits, js.syncs, js.checkpoints, js.home_syncfs,
			js.home_fsyncs, js.home_fsync_fds);
	free(conf);
	return status;
}
