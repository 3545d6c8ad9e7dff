/* rebuild.c - twinfsctl rebuild: asks mgrd to (re)start the resync of an
 * iod (REBUILD) or to accept a stale one, and with --wait follows it to
 * the end, showing bytes done / total, rate and ETA from mgrd's job record
 * (RESYNC_STATUS, proto/FORMAT.md "Resync jobs and resuming"): redrawn in
 * place on a terminal, a plain line a second otherwise.  --status prints
 * the job records, as beegfs-ctl --resyncstats does (--json for
 * machines).  The map's resync_permille gives the percentage and the
 * iod's state tells when it is done or failed.
 *
 * It looks at the map before asking: REBUILD of an iod up and in sync is a
 * full copy of a healthy twin, so that needs --full (without it: the
 * outcome of a job that just ended, or a refusal, exit 2); --wait on a
 * down iod waits, bounded, for it to register (mgrd refuses REBUILD until
 * then); --wait on a running job joins it without a new REBUILD.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "ctl_int.h"
#include "wire.h"

/* ------------------------------------------------------------- rebuild */

/* What the map says of one iod. */
struct rb_iod {
	Twinfs__IodState state;
	bool needs_resync;
	uint32_t permille;
	char text[64];             /* "down, needs resync" */
};

/* GET_MAP and iod `id` in it: 0, -ENOENT not in the map, or the -errno of
 * the call (mgrd restarting: the caller keeps waiting). */
static int rebuild_look(struct ctl *ctl, uint32_t id, struct rb_iod *out)
{
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL;
	Twinfs__ClusterMap *map;
	int rc;

	rc = ctl_connect_mgrd_q(ctl, true, &mgr);
	if (rc < 0)
		return rc;
	rc = ctl_get_map(ctl, mgr, &reply, &map);
	if (rc == 0) {
		rc = -ENOENT;
		for (size_t i = 0; i < map->n_iods; i++) {
			const Twinfs__IodInfo *io = map->iods[i];

			if (io->id != id)
				continue;
			out->state = io->state;
			out->needs_resync = io->needs_resync;
			out->permille = io->resync_permille;
			snprintf(out->text, sizeof(out->text), "%s%s",
				 state_name(io->state),
				 io->needs_resync ? ", needs resync" : "");
			rc = 0;
		}
	}
	if (reply)
		wire_msg_free(reply);
	wire_sync_close(mgr);
	return rc;
}

/* One poll of iod `id` in the map: 1 up, 0 still resyncing (permille set),
 * -1 down or stale, -2 no answer (mgrd restarting: keep waiting). */
static int rebuild_poll(struct ctl *ctl, uint32_t id, uint32_t *permille,
			char *state, size_t len)
{
	struct rb_iod io;

	if (rebuild_look(ctl, id, &io) < 0)
		return -2;
	*permille = io.permille;
	snprintf(state, len, "%s", io.text);
	if (io.state == TWINFS__IOD_STATE__IOD_UP && !io.needs_resync)
		return 1;
	if (io.state == TWINFS__IOD_STATE__IOD_RESYNCING)
		return 0;
	return -1;
}

/* RESYNC_STATUS for one iod (0: every iod with a job); *reply owns *st. */
static int rebuild_jobs(struct ctl *ctl, uint32_t id, bool quiet,
			struct wire_msg **reply, Twinfs__ResyncStatusReply **st)
{
	Twinfs__ResyncStatus q = TWINFS__RESYNC_STATUS__INIT;
	struct wire_sync *mgr = NULL;
	char addr[TW_HOST_MAX + 16];
	int rc;

	rc = ctl_connect_mgrd_q(ctl, quiet, &mgr);
	if (rc < 0)
		return rc;
	snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
	q.iod = id;
	rc = ctl_call(mgr, "mgrd", addr, TWINFS__MSG_TYPE__MSG_RESYNC_STATUS,
		      &q.base, reply, quiet);
	wire_sync_close(mgr);
	if (rc == 0)
		*st = (Twinfs__ResyncStatusReply *)(*reply)->body;
	return rc;
}

int ctl_unrepairable(struct ctl *ctl, uint64_t *n)
{
	struct wire_msg *reply = NULL;
	Twinfs__ResyncStatusReply *st;
	int rc = rebuild_jobs(ctl, 0, true, &reply, &st);

	memset(n, 0, TW_MAX_IODS * sizeof(*n));
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < st->n_jobs; i++)
		if (st->jobs[i]->target_iod >= 1 &&
		    st->jobs[i]->target_iod <= TW_MAX_IODS)
			n[st->jobs[i]->target_iod - 1] =
				st->jobs[i]->unrepairable;
	wire_msg_free(reply);
	return 0;
}

static const char *job_state(Twinfs__ResyncJobState s)
{
	switch (s) {
	case TWINFS__RESYNC_JOB_STATE__RJ_RUNNING: return "running";
	case TWINFS__RESYNC_JOB_STATE__RJ_DONE: return "done";
	case TWINFS__RESYNC_JOB_STATE__RJ_FAILED: return "failed";
	case TWINFS__RESYNC_JOB_STATE__RJ_INTERRUPTED: return "interrupted";
	default: return "not started";
	}
}

/* "2026-11-22 14:03:04" (UTC), or "-" for 0. */
static void fmt_time(char *buf, size_t len, uint64_t unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	if (!unix_ms || !gmtime_r(&t, &tm) ||
	    !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "-");
}

/* Seconds the job has run: until its end, or until now. */
static double job_secs(const Twinfs__ResyncJob *jb)
{
	struct timespec now;
	uint64_t end = jb->end_unix_ms;

	if (!jb->start_unix_ms)
		return 0;
	if (!end) {
		clock_gettime(CLOCK_REALTIME, &now);
		end = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	}
	return end > jb->start_unix_ms ? (double)(end - jb->start_unix_ms) / 1e3
				       : 0;
}

/* Why a run of a job failed (ResyncJob.last_error, a negative errno). */
static const char *job_error(int err)
{
	if (err == -EBUSY)   /* mgrd/resync.c: copied again, resuming */
		return "a live write did not reach the target during the copy";
	return errno_cause(err);
}

static void job_text(const Twinfs__ResyncJob *jb)
{
	char t0[32], t1[32];
	double secs = job_secs(jb);

	fmt_time(t0, sizeof(t0), jb->start_unix_ms);
	fmt_time(t1, sizeof(t1), jb->end_unix_ms);
	printf("iod %u: resync job %s\n", jb->target_iod, job_state(jb->state));
	if (jb->state == TWINFS__RESYNC_JOB_STATE__RJ_NOT_STARTED)
		return;
	printf("  source:       iod %u (%s copy, %u run%s)\n", jb->source_iod,
	       jb->full ? "full" : "incremental", jb->runs,
	       jb->runs == 1 ? "" : "s");
	printf("  started:      %s UTC\n", t0);
	printf("  ended:        %s%s\n", t1, jb->end_unix_ms ? " UTC" : "");
	printf("  files:        %" PRIu64 " of %" PRIu64 " done\n",
	       jb->files_done, jb->files_total);
	printf("  bytes:        %" PRIu64 " of %" PRIu64 " done (%.1f%%), %"
	       PRIu64 " read and copied or compared\n", jb->bytes_done,
	       jb->bytes_total, jb->bytes_total ? 100.0 *
	       (double)jb->bytes_done / (double)jb->bytes_total : 0.0,
	       jb->bytes_copied);
	printf("  rate:         %.1f MB/s\n", secs > 0 ?
	       (double)jb->bytes_copied / 1e6 / secs : 0.0);
	printf("  errors:       %u%s%s\n", jb->errors,
	       jb->last_error ? ", last: " : "",
	       jb->last_error ? job_error(jb->last_error) : "");
	if (jb->unrepairable)
		printf("  unrepairable: %" PRIu64 " blocks bad on both twins "
		       "(copied marked bad: reads of them get EIO; the iods' "
		       "and mgrd's logs name each file and offset)\n",
		       jb->unrepairable);
}

static void job_json(const Twinfs__ResyncJob *jb, bool first)
{
	printf("%s{\"iod\":%u,\"state\":\"%s\",\"source\":%u,\"full\":%s,"
	       "\"start_unix_ms\":%" PRIu64 ",\"end_unix_ms\":%" PRIu64
	       ",\"files_total\":%" PRIu64 ",\"files_done\":%" PRIu64
	       ",\"bytes_total\":%" PRIu64 ",\"bytes_done\":%" PRIu64
	       ",\"bytes_copied\":%" PRIu64 ",\"runs\":%u,\"errors\":%u,"
	       "\"last_error\":%d,\"unrepairable\":%" PRIu64 "}",
	       first ? "" : ",", jb->target_iod,
	       job_state(jb->state), jb->source_iod,
	       jb->full ? "true" : "false", jb->start_unix_ms,
	       jb->end_unix_ms, jb->files_total, jb->files_done,
	       jb->bytes_total, jb->bytes_done, jb->bytes_copied, jb->runs,
	       jb->errors, jb->last_error, jb->unrepairable);
}

/* rebuild --status [--json] [IOD]: exit 1 when a shown job failed. */
static int rebuild_status(struct ctl *ctl, uint32_t id, bool json)
{
	struct wire_msg *reply = NULL;
	Twinfs__ResyncStatusReply *st;
	int rc = rebuild_jobs(ctl, id, false, &reply, &st), ex = EXIT_OK;

	if (rc < 0)
		return EXIT_FAIL;
	if (json)
		printf("{\"jobs\":[");
	else if (st->n_jobs == 0)
		printf("no resync job since this cluster was created\n");
	for (size_t i = 0; i < st->n_jobs; i++) {
		if (json)
			job_json(st->jobs[i], i == 0);
		else
			job_text(st->jobs[i]);
		if (st->jobs[i]->state == TWINFS__RESYNC_JOB_STATE__RJ_FAILED)
			ex = EXIT_FAIL;
	}
	if (json)
		printf("]}\n");
	wire_msg_free(reply);
	return ex;
}

/* Live progress of a rebuild being waited for. */
struct rb_progress {
	uint64_t t_ms, done;       /* previous sample */
	double rate;               /* bytes/s, smoothed */
	uint64_t last_print;
};

static void fmt_mb(char *buf, size_t len, uint64_t bytes)
{
	if (bytes >= (10ull << 30))
		snprintf(buf, len, "%.1f GiB", (double)bytes / (1u << 30));
	else
		snprintf(buf, len, "%.1f MiB", (double)bytes / (1u << 20));
}

/* One line: in place on a terminal (\r), else a plain line at most every
 * second. */
static void rebuild_bar(struct rb_progress *pg, uint32_t id, uint32_t pm,
			const Twinfs__ResyncJob *jb, bool tty, double secs)
{
	uint64_t now = tw_now_ms(), done = jb ? jb->bytes_done : 0;
	uint64_t total = jb ? jb->bytes_total : 0;
	char d[32], t[32], eta[32] = "--", bar[31], unrep[48] = "";
	int fill = (int)(pm * 30 / 1000);

	if (pg->t_ms && now > pg->t_ms && done >= pg->done) {
		double r = (double)(done - pg->done) * 1000.0 /
			   (double)(now - pg->t_ms);

		pg->rate = pg->rate > 0 ? 0.7 * pg->rate + 0.3 * r : r;
	}
	pg->t_ms = now;
	pg->done = done;
	if (!tty && now - pg->last_print < 1000 && pm < 1000)
		return;
	pg->last_print = now;
	fmt_mb(d, sizeof(d), done);
	fmt_mb(t, sizeof(t), total);
	if (pg->rate > 1 && total > done)
		snprintf(eta, sizeof(eta), "%.0f s",
			 (double)(total - done) / pg->rate);
	else if (pm >= 1000)
		snprintf(eta, sizeof(eta), "0 s");
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	if (jb && jb->unrepairable)
		snprintf(unrep, sizeof(unrep), "  %" PRIu64 " unrepairable",
			 jb->unrepairable);
	printf("%srebuild iod %u [%s] %5.1f%%  %s / %s  %.1f MB/s  ETA %s  "
	       "(%.0f s)%s%s", tty ? "\r" : "", id, bar, pm / 10.0, d, t,
	       pg->rate / 1e6, eta, secs, unrep, tty ? "\033[K" : "\n");
	fflush(stdout);
}

/* One progress frame of iod id, with its job record when mgrd answers. */
static void rebuild_frame(struct ctl *ctl, struct rb_progress *pg, uint32_t id,
			  uint32_t pm, bool tty, uint64_t start)
{
	struct wire_msg *jr = NULL;
	Twinfs__ResyncStatusReply *st = NULL;

	if (rebuild_jobs(ctl, id, true, &jr, &st) < 0)
		st = NULL;
	rebuild_bar(pg, id, pm, st && st->n_jobs ? st->jobs[0] : NULL, tty,
		    (double)(tw_now_ms() - start) / 1000.0);
	if (jr)
		wire_msg_free(jr);
}

/* How long rebuild --wait waits for a down iod to register, and how long
 * after its end a job still counts as the one the admin asks about: an
 * iod started a moment ago takes a few heartbeats to register, and a
 * short resync may end before twinfsctl looks. */
static uint64_t rebuild_grace_ms(const struct ctl *ctl)
{
	uint64_t rt = tw_ms_or(ctl->conf.request_timeout_ms,
			       TW_REQUEST_TIMEOUT_MS);

	return TW_MAX(rt * 3, 30000u);
}

static uint64_t wall_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* rebuild --wait of an iod that is down (or suspect): mgrd refuses
 * REBUILD until it registers, and an iod just started has not yet.  Wait
 * for it, bounded, saying so on stderr.  0 once it is neither down nor
 * suspect (*io filled), -ETIMEDOUT (message printed) when it stays so,
 * -ENOENT when mgrd knows no such iod. */
static int rebuild_await_register(struct ctl *ctl, uint32_t id,
				  struct rb_iod *io)
{
	uint64_t t0 = tw_now_ms(), limit = rebuild_grace_ms(ctl);
	bool said = false;
	int rc;

	snprintf(io->text, sizeof(io->text), "not answering (mgrd)");
	for (;;) {
		rc = rebuild_look(ctl, id, io);
		if (rc == -ENOENT)
			return rc;
		if (rc == 0 && io->state != TWINFS__IOD_STATE__IOD_DOWN &&
		    io->state != TWINFS__IOD_STATE__IOD_SUSPECT)
			return 0;
		if (tw_now_ms() - t0 >= limit) {
			fprintf(stderr, "%s: rebuild iod %u: it is still %s "
				"after waiting %.0f s for it to register with "
				"mgrd (is its twinfs-iod running?)\n", progname,
				id, io->text, (double)(tw_now_ms() - t0) / 1e3);
			return -ETIMEDOUT;
		}
		if (!said && rc == 0) {
			fprintf(stderr, "%s: waiting for iod %u to register "
				"(%s) for up to %.0f s ...\n", progname, id,
				io->text, (double)limit / 1e3);
			said = true;
		}
		usleep(200 * 1000);
	}
}

/* The job record of iod id into *jb (state RJ_NOT_STARTED when it has
 * none); 0 or -errno (message printed). */
static int rebuild_job_of(struct ctl *ctl, uint32_t id, Twinfs__ResyncJob *jb)
{
	struct wire_msg *reply = NULL;
	Twinfs__ResyncStatusReply *st;
	int rc = rebuild_jobs(ctl, id, false, &reply, &st);

	twinfs__resync_job__init(jb);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < st->n_jobs; i++)
		if (st->jobs[i]->target_iod == id) {
			*jb = *st->jobs[i];
			jb->base.unknown_fields = NULL;
			jb->base.n_unknown_fields = 0;
		}
	wire_msg_free(reply);
	return 0;
}

/* rebuild [--wait] IOD, without --full, of an iod up and in sync: nothing
 * is marked for it, so REBUILD would copy the whole healthy twin again
 * (mgr_resync_rebuild), hours of I/O nobody asked for.  When a job of it
 * ended lately (a resync that finished before twinfsctl looked) its
 * outcome is the answer; otherwise the admin must say --full.  Returns
 * the exit status. */
static int rebuild_in_sync(struct ctl *ctl, uint32_t id)
{
	Twinfs__ResyncJob jb;
	uint64_t now = wall_ms(), grace = rebuild_grace_ms(ctl);
	char t1[32];
	bool ended = false;

	if (rebuild_job_of(ctl, id, &jb) < 0)
		return EXIT_FAIL;
	switch (jb.state) {
	case TWINFS__RESYNC_JOB_STATE__RJ_DONE:
	case TWINFS__RESYNC_JOB_STATE__RJ_FAILED:
	case TWINFS__RESYNC_JOB_STATE__RJ_INTERRUPTED:
		ended = true;
		break;
	default:
		break;
	}
	if (!ended || !jb.end_unix_ms || jb.end_unix_ms + grace < now) {
		fprintf(stderr, "%s: rebuild iod %u: refused: iod %u is up and "
			"in sync; a full copy of a healthy twin needs --full\n",
			progname, id, id);
		return EXIT_USAGE;
	}
	fmt_time(t1, sizeof(t1), jb.end_unix_ms);
	printf("rebuild iod %u: up; its last resync job (%s copy from iod %u) "
	       "ended %s at %s UTC, %.0f s ago: nothing to start\n", id,
	       jb.full ? "full" : "incremental", jb.source_iod,
	       job_state(jb.state), t1,
	       now > jb.end_unix_ms ? (double)(now - jb.end_unix_ms) / 1e3 : 0.0);
	return jb.state == TWINFS__RESYNC_JOB_STATE__RJ_DONE ? EXIT_OK
							      : EXIT_FAIL;
}

int cmd_rebuild(struct ctl *ctl, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "full", no_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, 'w' },
		{ "accept-stale", no_argument, NULL, 'a' },
		{ "rate-limit", required_argument, NULL, 'r' },
		{ "status", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'H' },
		{ 0 }
	};
	Twinfs__Rebuild q = TWINFS__REBUILD__INIT;
	struct rb_progress pg = { 0 };
	bool status = false, json = false;
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL;
	char addr[TW_HOST_MAX + 16], state[64] = "";
	bool wait = false, tty = isatty(STDOUT_FILENO), rate = false;
	bool join = false;
	uint32_t pm = 0;
	uint64_t start = tw_now_ms();
	unsigned long v;
	char *end;
	int opt, rc, bad = 0;

	/* 0, not 1: glibc then re-reads the option string, so options may
	 * follow IOD (main's '+' would otherwise stick). */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'f': q.full = true; break;
		case 'w': wait = true; break;
		case 'a': q.accept_stale = true; break;
		case 's': status = true; break;
		case 'j': json = true; break;
		case 'r':
			v = strtoul(optarg, &end, 10);
			if (*end || v > 1000000) {
				fprintf(stderr, "%s: --rate-limit wants MB/s\n",
					progname);
				return EXIT_USAGE;
			}
			q.rate_limit_mbps = (uint32_t)v;
			rate = true;
			break;
		case 'H': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 && !(status && optind == argc)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (status && optind == argc) {
		if (ctl_load_conf(ctl) < 0)
			return EXIT_FAIL;
		return rebuild_status(ctl, 0, json);
	}
	v = strtoul(argv[optind], &end, 10);
	if (*end || v == 0 || v > TW_MAX_IODS) {
		fprintf(stderr, "%s: rebuild: \"%s\" is not an iod id\n",
			progname, argv[optind]);
		return EXIT_USAGE;
	}
	q.iod = (uint32_t)v;
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	if (status)
		return rebuild_status(ctl, q.iod, json);
	if (!q.accept_stale) {
		struct rb_iod io;
		Twinfs__ResyncJob jb;

		/* Look before asking: REBUILD of a down iod is refused, and
		 * of an up one it is a full copy. */
		if (wait) {
			rc = rebuild_await_register(ctl, q.iod, &io);
			if (rc == -ETIMEDOUT)
				return EXIT_FAIL;
		} else {
			rc = rebuild_look(ctl, q.iod, &io);
		}
		if (rc == 0 && io.state == TWINFS__IOD_STATE__IOD_UP &&
		    !io.needs_resync && !q.full)
			return rebuild_in_sync(ctl, q.iod);
		/* Joining a running job sends no REBUILD: it would reset the
		 * job's rate limit to this command's (none). */
		if (rc == 0 && wait && !q.full && !rate &&
		    io.state == TWINFS__IOD_STATE__IOD_RESYNCING &&
		    rebuild_job_of(ctl, q.iod, &jb) == 0 &&
		    jb.state == TWINFS__RESYNC_JOB_STATE__RJ_RUNNING) {
			printf("rebuild iod %u: joining its running resync job "
			       "(%s copy from iod %u)\n", q.iod,
			       jb.full ? "full" : "incremental", jb.source_iod);
			join = true;
		}
	}
	rc = 0;
	if (!join) {
		if (ctl_connect_mgrd(ctl, &mgr) < 0)
			return EXIT_FAIL;
		snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
		rc = wire_sync_call(mgr, TWINFS__MSG_TYPE__MSG_REBUILD,
				    &q.base, NULL, 0, &reply);
		if (reply)
			wire_msg_free(reply);
		wire_sync_close(mgr);
	}
	if (rc < 0) {
		fprintf(stderr, "%s: rebuild iod %u: mgrd (%s) refused: %s\n",
			progname, q.iod, addr,
			rc == -EAGAIN ? "it is not resyncing (down, or stale "
					"with no readable twin: see "
					"--accept-stale)"
			: rc == -EINVAL && q.accept_stale
			? "it is not stale, or its twin can serve (then it "
			  "resyncs)"
			: errno_cause(rc));
		return EXIT_FAIL;
	}
	if (q.accept_stale) {
		printf("rebuild iod %u: accepted as stale WITHOUT resync; writes "
		       "it missed are lost\n", q.iod);
		return EXIT_OK;
	}
	if (!wait) {
		printf("rebuild iod %u: started\n", q.iod);
		return EXIT_OK;
	}
	for (;;) {
		rc = rebuild_poll(ctl, q.iod, &pm, state, sizeof(state));
		if (rc == 1)
			break;
		if (rc == -1 && ++bad >= 5) {
			if (tty)
				printf("\n");
			fprintf(stderr, "%s: rebuild iod %u failed: it is %s\n",
				progname, q.iod, state);
			return EXIT_FAIL;
		}
		if (rc == 0) {
			bad = 0;
			rebuild_frame(ctl, &pg, q.iod, pm, tty, start);
		}
		usleep(200 * 1000);
	}
	if (tty)   /* the last frame at 100 %, with the final counters */
		rebuild_frame(ctl, &pg, q.iod, 1000, tty, start);
	printf("%srebuild iod %u: done, up (%.1f s)\n", tty ? "\n" : "",
	       q.iod, (double)(tw_now_ms() - start) / 1000.0);
	return EXIT_OK;
}

