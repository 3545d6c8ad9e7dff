/* main.c - twinfs-mgrd: command line, config, signals, the event loop.
 *
 *   twinfs-mgrd -c CONF [--id N] [-v] [--accept-corrupt-log] [--accept-stale]
 *
 * --id N says which mgrd of a pair ([mgrd 1], [mgrd 2]) this process is;
 * default 1, the only one without a pair.
 * --dump-state FILE loads the state from the (stopped) mgrd's dir and
 * writes its snapshot payload (mgrd/FORMAT.md section 2, canonical: equal
 * states give equal bytes) to FILE, then exits: the two mgrds of a pair
 * compare byte for byte.
 * --restore-state FILE makes the empty or absent dir hold the state of
 * FILE (a snapshot: --dump-state's, or twinfsctl backup-meta's), then
 * exits (docs/OPERATIONS.md "Backup and restore").
 * Runs in the foreground and logs to stderr.  SIGTERM and SIGINT stop it
 * cleanly (final snapshot, journal closed); kill -9 loses nothing that was
 * acknowledged, because every reply follows its closed journal record.
 * A record log damaged in the middle (valid records after a bad one) stops
 * the start; --accept-corrupt-log is the operator's decision to copy it
 * aside and cut it at the damage (journal/FORMAT.md invariant 11,
 * docs/OPERATIONS.md).
 */
#include "mgrd_int.h"
#include "journal.h"
#include "stall.h"
#include "wire.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

static uv_signal_t sig_term, sig_int;
static struct mgr_server *server;
static struct mgr_metrics *metrics;

static void usage(FILE *f)
{
	fprintf(f, "usage: twinfs-mgrd -c CONF [--id N] [-v] "
		"[--accept-corrupt-log] [--accept-stale]\n"
		"       twinfs-mgrd --help | --version\n"
		   "  -c CONF  cluster config (twinfs.conf)\n"
		   "  --id N   which mgrd of a pair ([mgrd N]) this is; "
		"default 1\n"
		   "  --dump-state FILE\n"
		   "           write the state in DIR as a snapshot to FILE "
		"and exit\n"
		   "  --restore-state FILE\n"
		   "           make the empty DIR hold the snapshot FILE and "
		"exit\n"
		   "  -v       verbose (debug log)\n"
		   "  --accept-corrupt-log\n"
		   "           the record log is damaged in the middle: copy it\n"
		   "           to DIR/journal.corrupt-TIME and cut it at the\n"
		   "           damage, dropping the records after it\n"
		   "  --accept-stale\n"
		   "           of a pair: become active even though the other\n"
		   "           mgrd marked this one stale (it lacks replies the\n"
		   "           other gave; they are lost)\n");
}

static void on_stopped(void *arg)
{
	(void)arg;
	uv_close((uv_handle_t *)&sig_term, NULL);
	uv_close((uv_handle_t *)&sig_int, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
	(void)h;
	tw_info("mgrd: %s received, stopping", strsignal(signum));
	uv_signal_stop(&sig_term);
	uv_signal_stop(&sig_int);
	tw_stall_stop(h->loop);
	mgr_metrics_stop(metrics);
	metrics = NULL;
	if (server)
		mgr_server_stop(server, on_stopped, NULL);
	server = NULL;
}

/* --dump-state: replay DIR into a state and write its snapshot. */
static int dump_state(const struct tw_conf *conf, unsigned jnl_flags,
		      const char *path)
{
	struct mgr_state st;
	struct mgr_journal j;
	struct mgr_time now = { 0, 0 };
	uint8_t *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc = mgr_state_init(&st, conf, &now);

	if (rc == 0) {
		rc = mgr_journal_open_flags(&j, conf->mgr_dir, &st, jnl_flags);
		if (rc == 0) {
			mgr_journal_close(&j);
			rc = mgr_state_encode(&st, &buf, &len);
		}
	}
	mgr_state_free(&st);
	if (rc < 0) {
		tw_err("mgrd: %s: %s", conf->mgr_dir, strerror(-rc));
		return 1;
	}
	f = fopen(path, "we");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		tw_err("mgrd: %s: %s", path, strerror(errno));
		free(buf);
		return 1;
	}
	free(buf);
	tw_info("mgrd: state of %s written to %s (%zu bytes)", conf->mgr_dir,
		path, len);
	return 0;
}

/* --restore-state: FILE must decode; DIR must hold no state yet. */
static int restore_state(const struct tw_conf *conf, const char *path)
{
	struct mgr_state st;
	struct mgr_journal j;
	struct mgr_time now = { 0, 0 };
	char probe[PATH_MAX + 16];
	uint8_t *buf = NULL;
	long len = -1;
	FILE *f = fopen(path, "re");
	int rc = -EINVAL;

	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len)) &&
	    fread(buf, 1, (size_t)len, f) == (size_t)len)
		rc = 0;
	if (f)
		fclose(f);
	if (rc < 0) {
		tw_err("mgrd: %s: cannot read it", path);
		free(buf);
		return 1;
	}
	snprintf(probe, sizeof(probe), "%s/journal", conf->mgr_dir);
	if (access(probe, F_OK) == 0) {
		tw_err("mgrd: %s already holds a state: restore into an empty "
		       "directory (move this one aside first)", conf->mgr_dir);
		free(buf);
		return 1;
	}
	rc = mgr_state_init(&st, conf, &now);
	if (rc == 0) {
		rc = mgr_state_decode(&st, buf, (size_t)len);
		if (rc < 0)
			tw_err("mgrd: %s is not an mgrd snapshot this release "
			       "reads", path);
	}
	mgr_state_free(&st);
	if (rc == 0)
		rc = tw_mkdir_p(conf->mgr_dir);
	if (rc == 0) {
		rc = mgr_state_init(&st, conf, &now);
		if (rc == 0)
			rc = mgr_journal_open(&j, conf->mgr_dir, &st);
		if (rc == 0) {
			rc = mgr_journal_install(&j, buf, (size_t)len);
			mgr_journal_close(&j);
		}
		mgr_state_free(&st);
	}
	free(buf);
	if (rc < 0) {
		tw_err("mgrd: restoring %s into %s: %s", path, conf->mgr_dir,
		       strerror(-rc));
		return 1;
	}
	tw_info("mgrd: %s now holds the state of %s", conf->mgr_dir, path);
	return 0;
}

int main(int argc, char **argv)
{
	static struct tw_conf conf;
	const char *path = NULL;
	char err[512] = "";
	size_t live;
	static const struct option longopts[] = {
		{ "accept-corrupt-log", no_argument, NULL, 'A' },
		{ "accept-stale", no_argument, NULL, 'S' },
		{ "id", required_argument, NULL, 'i' },
		{ "dump-state", required_argument, NULL, 'D' },
		{ "restore-state", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	bool verbose = false;
	unsigned jnl_flags = 0;
	uv_loop_t *loop;
	int opt, rc, id = 1;
	char *end;
	const char *dump = NULL, *restore = NULL;

	while ((opt = getopt_long(argc, argv, "c:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'v': verbose = true; break;
		case 'A': jnl_flags |= JNL_REC_ACCEPT_CORRUPT; break;
		case 'D': dump = optarg; break;
		case 'R': restore = optarg; break;
		case 'S': mgr_elect_accept_stale(); break;
		case 'i':
			id = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || id < 1 ||
			    id > TW_MAX_MGRDS) {
				fprintf(stderr, "twinfs-mgrd: --id %s: 1 or 2\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("twinfs-mgrd %s (protocol %u)\n", TW_VERSION,
			       WIRE_VERSION);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || optind != argc) {
		usage(stderr);
		return 2;
	}
	tw_log_init("twinfs-mgrd", verbose ? TW_LOG_DEBUG : TW_LOG_INFO);
	rc = tw_conf_load(path, &conf, err, sizeof(err));
	if (rc < 0) {
		tw_err("mgrd: %s", err[0] ? err : strerror(-rc));
		return 1;
	}
	if (tw_conf_select_mgrd(&conf, id) < 0) {
		tw_err("mgrd: %s: --id %d, but the file has no [mgrd %d] "
		       "(%d mgrd%s)", path, id, id, conf.n_mgrds,
		       conf.n_mgrds == 1 ? "" : "s");
		return 1;
	}
	if (!conf.mgr_dir[0]) {
		tw_err("mgrd: %s: [mgrd%s] dir is not set", path,
		       conf.n_mgrds == 1 ? "" : id == 1 ? " 1" : " 2");
		return 1;
	}
	if (dump)
		return dump_state(&conf, jnl_flags, dump);
	if (restore)
		return restore_state(&conf, restore);
	signal(SIGPIPE, SIG_IGN);
	loop = uv_default_loop();
	rc = tw_stall_start(loop);
	if (rc == 0)
		rc = mgr_server_start(loop, &conf, jnl_flags, &server);
	if (rc < 0) {
		tw_stall_stop(loop);
		return 1;
	}
	rc = mgr_metrics_start(loop, server, &metrics);
	if (rc < 0) {
		tw_stall_stop(loop);
		mgr_server_stop(server, NULL, NULL);
		uv_run(loop, UV_RUN_DEFAULT);
		return 1;
	}
	uv_signal_init(loop, &sig_term);
	uv_signal_init(loop, &sig_int);
	uv_signal_start(&sig_term, on_signal, SIGTERM);
	uv_signal_start(&sig_int, on_signal, SIGINT);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	/* The state is freed by now: an object left in the slab is a leak
	 * the leak checker cannot see (slab.c). */
	live = mgr_slab_release();
	if (live)
		tw_err("mgrd: %zu namespace objects were never freed", live);
	tw_info("mgrd: stopped");
	return 0;
}
