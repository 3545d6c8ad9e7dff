/* main.c - the twinfs client program: options, first contact with mgrd,
 * mount, the FUSE session loop and an orderly exit.
 *
 *   twinfs MGRHOST[:PORT][,MGRHOST2[:PORT2]] MOUNTPOINT [-o OPTIONS] [-f] [-d]
 *
 * Two addresses: an mgrd pair; the client follows whichever is active
 * (mgr.c).
 *
 * Also run by mount.fuse3 for fstab entries of type fuse.twinfs.  Custom
 * options (cluster=, request_timeout=, mgr_timeout=, monitor_interval=,
 * attr_timeout=, entry_timeout=, writeback_cache, readahead=, spin_us=,
 * mgr_spin_us=, nostatahead, nonamelease, io_thread_reads, worker_reads
 * and the atime options:
 * relatime, noatime, strictatime, atime, norelatime, nodiratime,
 * diratime, lazytime, nolazytime) are taken here (the three timers, when
 * not given, from the cluster's map at the first contact:
 * adopt_cluster_timers); the rest go to libfuse.  default_permissions is
 * always on: the kernel checks permissions first, which spares mgrd's
 * checks (FORMAT.md "Permissions") the requests it would refuse anyway.
 *
 * Daemonising: the process forks first (before any thread exists); the
 * child contacts mgrd (HELLO, GET_MAP, GETATTR of the root) and mounts, and
 * only then tells the waiting parent to exit 0.  A failed contact or mount
 * is printed on the terminal, naming mgrd's address and the cause, and the
 * parent exits 1.  Until then the terminal is the mount command's, whose
 * output scripts check: a successful mount prints nothing there, so only
 * warnings and errors are logged before the child detaches.
 * (fuse_daemonize cannot do this: its parent always exits 0, and forking
 * after the I/O thread started would lose the thread.)
 *
 * Exit: fusermount3 -u (or a signal) ends the session loop; final size
 * reports go out, every outstanding op is answered, the loop thread stops,
 * then the session is unmounted and destroyed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cap.h"
#include "dlease.h"
#include "inode.h"
#include "kio.h"
#include "locks.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"
#include "ops.h"
#include "report.h"
#include "statahead.h"
#include "tune.h"
#include "wbehind.h"
#include "wake.h"

#define FC_DEFAULT_PORT        7500

static const struct fuse_lowlevel_ops fc_ops = {
	.init = fc_lock_conn_init,
	.destroy = fc_destroy,
	.lookup = fc_lookup,
	.forget = fc_forget,
	.forget_multi = fc_forget_multi,
	.getattr = fc_getattr,
	.setattr = fc_setattr,
	.readlink = fc_readlink,
	.mknod = fc_mknod,
	.mkdir = fc_mkdir,
	.unlink = fc_unlink,
	.rmdir = fc_rmdir,
	.symlink = fc_symlink,
	.rename = fc_rename,
	.link = fc_link,
	.open = fc_open,
	.create = fc_create,
	.read = fc_read,
	.write = fc_write,
	.flush = fc_lock_flush,
	.release = fc_lock_release,
	.fsync = fc_fsync,
	.fallocate = fc_fallocate,
	.lseek = fc_lseek,
	.opendir = fc_opendir,
	.readdir = fc_readdir,
	.readdirplus = fc_readdirplus,
	.releasedir = fc_releasedir,
	.fsyncdir = fc_fsyncdir,
	.statfs = fc_statfs,
	.setxattr = fc_setxattr,
	.getxattr = fc_getxattr,
	.listxattr = fc_listxattr,
	.removexattr = fc_removexattr,
	.getlk = fc_getlk,
	.setlk = fc_setlk,
	.flock = fc_flock,
};

/* ------------------------------------------------------------- options */

struct cmdline {
	char *mgr_addr;
	char *cluster;
	char *channel;
	unsigned request_timeout;
	unsigned mgr_timeout;
	unsigned monitor_interval;
	double attr_timeout;
	double entry_timeout;
	int writeback_cache;
	unsigned readahead;
	unsigned spin_us;
	unsigned mgr_spin_us;
	int nostatahead;
	int nonamelease;
	int io_thread_reads;
	char *keyfile;
	char *subdir;
	int atime;
	int help;
	int version;
};

enum { KEY_HELP, KEY_VERSION, KEY_RELATIME, KEY_NOATIME, KEY_STRICTATIME,
       KEY_ATIME, KEY_ATIME_NOOP };

#define OPT(t, p) { t, offsetof(struct cmdline, p), 1 }
#define OPT_UNSET UINT_MAX   /* a timer option not given */
static const struct fuse_opt optspec[] = {
	OPT("cluster=%s", cluster),
	OPT("channel=%s", channel),
	OPT("request_timeout=%u", request_timeout),
	OPT("mgr_timeout=%u", mgr_timeout),
	OPT("monitor_interval=%u", monitor_interval),
	OPT("attr_timeout=%lf", attr_timeout),
	OPT("entry_timeout=%lf", entry_timeout),
	OPT("writeback_cache", writeback_cache),
	OPT("readahead=%u", readahead),
	OPT("spin_us=%u", spin_us),
	OPT("mgr_spin_us=%u", mgr_spin_us),
	OPT("nostatahead", nostatahead),
	OPT("nonamelease", nonamelease),
	OPT("io_thread_reads", io_thread_reads),
	{ "worker_reads", offsetof(struct cmdline, io_thread_reads), 0 },
	OPT("keyfile=%s", keyfile),
	OPT("subdir=%s", subdir),
	FUSE_OPT_KEY("relatime", KEY_RELATIME),
	FUSE_OPT_KEY("noatime", KEY_NOATIME),
	FUSE_OPT_KEY("strictatime", KEY_STRICTATIME),
	FUSE_OPT_KEY("atime", KEY_ATIME),
	FUSE_OPT_KEY("norelatime", KEY_ATIME_NOOP),
	FUSE_OPT_KEY("nodiratime", KEY_ATIME_NOOP),
	FUSE_OPT_KEY("diratime", KEY_ATIME_NOOP),
	FUSE_OPT_KEY("lazytime", KEY_ATIME_NOOP),
	FUSE_OPT_KEY("nolazytime", KEY_ATIME_NOOP),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct cmdline *c = data;

	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (!c->mgr_addr) {
			c->mgr_addr = strdup(arg);
			return 0;
		}
		return 1;   /* the mountpoint, for fuse_parse_cmdline */
	case KEY_HELP:
		c->help = 1;
		return 0;
	case KEY_VERSION:
		c->version = 1;
		return 0;
	/* The kernel never updates the atime of a FUSE inode (S_NOATIME):
	 * the policy is ours.  noatime also goes on to the mount flags. */
	case KEY_RELATIME:
		c->atime = FC_ATIME_RELATIME;
		return 0;
	case KEY_NOATIME:
		c->atime = FC_ATIME_NOATIME;
		return 1;
	case KEY_STRICTATIME:
		c->atime = FC_ATIME_STRICT;
		return 0;
	/* atime undoes an earlier noatime (libfuse clears the flag too), as
	 * on ext4, where the default it falls back to is relatime. */
	case KEY_ATIME:
		c->atime = FC_ATIME_RELATIME;
		return 1;
	/* Accepted as ext4 accepts them, for fstab lines written for it.
	 * They change nothing here: norelatime only drops relatime, which
	 * Linux then applies anyway unless strictatime is given; no
	 * directory's atime is updated by reading it (every mount is
	 * nodiratime, diratime cannot change that); and times reach mgrd
	 * lazily already (atime with the close), which is lazytime's
	 * point. */
	case KEY_ATIME_NOOP:
		return 0;
	default:
		return 1;
	}
}

static void usage(const char *prog)
{
	printf("usage: %s MGRHOST[:PORT][,MGRHOST2[:PORT2]] MOUNTPOINT "
	       "[-o OPTIONS] [-f] [-d]\n"
	       "\n"
	       "TwinFS options:\n"
	       "    -o cluster=NAME          cluster name (default \"twinfs\")\n"
	       "    -o channel=MODE          weakest protection of frames "
	       "after AUTH:\n"
	       "                             integrity (default), encrypt or "
	       "none\n"
	       "    -o request_timeout=MS    data-path deadline (default: the "
	       "cluster's, else 5000)\n"
	       "    -o mgr_timeout=MS        how long mgrd requests are retried "
	       "(default: the cluster's, else 120000)\n"
	       "    -o monitor_interval=MS   ping interval (default: the "
	       "cluster's, else 30000)\n"
	       "    -o attr_timeout=SECONDS  attribute cache time (default 1.0)\n"
	       "    -o entry_timeout=SECONDS name cache time (default 1.0)\n"
	       "    -o writeback_cache       kernel writeback cache (single "
	       "writer only)\n"
	       "    -o relatime|noatime|strictatime  atime policy (default "
	       "relatime)\n"
	       "    -o atime                 relatime again after noatime\n"
	       "    -o nodiratime|diratime|norelatime|lazytime|nolazytime\n"
	       "                             accepted, change nothing: "
	       "directories never\n"
	       "                             get atime updates (as with "
	       "nodiratime)\n"
	       "    -o readahead=KIB         kernel readahead window (default "
	       "4096; 0: the kernel's 128)\n"
	       "    -o spin_us=US            poll up to US microseconds for "
	       "the kernel's next\n"
	       "                             request after a reply before "
	       "sleeping (default 20;\n"
	       "                             0: never; at most 1000; only "
	       "where the\n"
	       "                             I/O thread reads)\n"
	       "    -o mgr_spin_us=US        the same for mgrd's answer to a "
	       "request (default 40)\n"
	       "    -o nostatahead           no listing fetched ahead of "
	       "lookups\n"
	       "    -o nonamelease           ask mgrd every lookup, also of "
	       "names absent\n"
	       "                             from directories this mount "
	       "made\n"
	       "    -o io_thread_reads       the I/O thread reads /dev/fuse "
	       "itself\n"
	       "    -o worker_reads          libfuse's worker threads read "
	       "/dev/fuse and hand\n"
	       "                             each request to the I/O thread; "
	       "-o max_threads\n"
	       "                             and -o clone_fd apply only to "
	       "those\n"
	       "                             (neither: the I/O thread where "
	       "waking an idle\n"
	       "                             CPU is measured cheap or there "
	       "is one CPU,\n"
	       "                             else the workers)\n"
	       "    -o keyfile=FILE          prove the client identity in FILE "
	       "(lines 'name = NAME',\n"
	       "                             'key = HEX'; twinfsctl keygen "
	       "writes it; mode 0600);\n"
	       "                             needed when the cluster has a "
	       "secret\n"
	       "    -o subdir=PATH           mount this directory of TwinFS "
	       "(default /); an\n"
	       "                             identity with an export may "
	       "mount only in it\n"
	       "\n", prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* --------------------------------------------------------- first contact */

struct connect_op {
	struct fc_op op;
	struct fc_mgr_call mc;
	Twinfs__Empty empty;
	Twinfs__Getattr ga;
	uint64_t deadline;
	int last_err;
};

static void start_finish(struct fc_client *cl, int status, const char *msg)
{
	pthread_mutex_lock(&cl->start_lock);
	cl->start_status = status;
	if (msg)
		snprintf(cl->start_msg, sizeof(cl->start_msg), "%s", msg);
	cl->start_done = true;
	pthread_cond_broadcast(&cl->start_cond);
	pthread_mutex_unlock(&cl->start_lock);
}

static void connect_step(struct fc_op *op);

static void connect_fail(struct connect_op *c, int status, const char *what)
{
	struct fc_client *cl = c->op.cl;
	char msg[256], who[TW_HOST_MAX + 48];
	int err = cl->mgr_last_connect_err ? cl->mgr_last_connect_err : status;

	/* The mgrd last tried (the other of a pair may have failed too). */
	snprintf(who, sizeof(who), "mgrd %s", wire_peer_name(cl->mgr));
	if ((err == -EACCES || err == -EREMOTE) && *wire_peer_refusal(cl->mgr))
		/* mgrd's reason names the identity, the export, or the
		 * active of a pair. */
		snprintf(msg, sizeof(msg), "%s: %s", who,
			 wire_peer_refusal(cl->mgr));
	else if (err == -EACCES)
		snprintf(msg, sizeof(msg), "%s refused the client: %s "
			 "(a cluster with a secret needs -o keyfile=FILE)",
			 who, strerror(-err));
	else if (err == -EPROTO)
		snprintf(msg, sizeof(msg), "%s refused the client: %s "
			 "(is the cluster name \"%s\" right?)",
			 who, strerror(-err), cl->opts.cluster);
	else if (err == -ECONNRESET)
		/* mgrd closes what it cannot read, e.g. another release's
		 * frames, and logs why. */
		snprintf(msg, sizeof(msg), "%s: %s: %s (mgrd's log "
			 "says why it closed the connection; another TwinFS "
			 "release?)", who, what, strerror(-err));
	else
		snprintf(msg, sizeof(msg), "%s: %s: %s", who, what,
			 err == -ETIMEDOUT ? "no answer (timed out)" :
			 strerror(-err));
	start_finish(cl, status < 0 ? status : -EIO, msg);
	fc_op_free(&c->op);
}

static void root_done(struct fc_mgr_call *mc, int status,
		      struct wire_msg *reply)
{
	struct connect_op *c = mc->arg;
	struct fc_client *cl = c->op.cl;
	struct fuse_entry_param e;
	struct fc_attr a;

	if (status == 0)
		status = fc_entry_from_reply(cl, reply, &a);
	if (reply)
		wire_msg_free(reply);
	if (status == 0 && !S_ISDIR(a.mode))
		status = -ENOTDIR;
	if (status < 0) {
		connect_fail(c, status, "GETATTR of the root failed");
		return;
	}
	/* The kernel holds the root without a lookup: count one. */
	fc_inode_entry(cl, &a, &e);
	fc_mgr_start_monitor(cl);
	tw_log(TW_LOG_INFO, "connected to mgrd %s, session %" PRIu64 ", map epoch %"
	       PRIu64 ", %u groups", wire_peer_name(cl->mgr),
	       cl->session, cl->epoch, cl->n_groups);
	start_finish(cl, 0, NULL);
	fc_op_free(&c->op);
}

/* The cluster's timers (twinfs.conf [cluster]) for those the mount options
 * leave unset: a client with a shorter request_timeout than the servers'
 * would give EIO while a twin's failover is still within its time.  Runs
 * on the loop before the FUSE session starts (the main thread waits for
 * the connect), so no worker reads these meanwhile. */
static const char *adopt_timer(unsigned *ms, bool set, uint32_t cluster,
			       uint32_t min)
{
	if (set)
		return "mount option";
	if (cluster < min)               /* 0: an mgrd that sends none */
		return "default";
	*ms = cluster;
	return "cluster";
}

static void adopt_cluster_timers(struct fc_client *cl,
				 const Twinfs__ClusterMap *map)
{
	struct fc_opts *o = &cl->opts;
	const char *rt = adopt_timer(&o->request_timeout_ms,
				     o->request_timeout_set,
				     map->request_timeout_ms, 1);
	const char *mt = adopt_timer(&o->mgr_timeout_ms, o->mgr_timeout_set,
				     map->mgr_timeout_ms, 1);
	const char *mi = adopt_timer(&o->monitor_interval_ms,
				     o->monitor_interval_set,
				     map->monitor_interval_ms, 100);

	tw_info("timers: request_timeout %u ms (%s), mgr_timeout %u ms (%s), "
		"monitor_interval %u ms (%s)", o->request_timeout_ms, rt,
		o->mgr_timeout_ms, mt, o->monitor_interval_ms, mi);
}

static void map_done(int status, struct wire_msg *reply, void *arg)
{
	struct connect_op *c = arg;
	struct fc_client *cl = c->op.cl;

	if (status == 0 &&
	    reply->body->descriptor != &twinfs__cluster_map__descriptor)
		status = -EPROTO;
	if (status == 0) {
		adopt_cluster_timers(cl, (const void *)reply->body);
		fc_map_install(cl, (const void *)reply->body);
	}
	if (reply)
		wire_msg_free(reply);
	if (status < 0) {
		c->last_err = status;
		/* mgrd may still be starting: retry transport errors until
		 * request_timeout, then fail with the cause. */
		if (fc_mgr_retryable(status) && tw_now_ms() < c->deadline &&
		    cl->mgr_last_connect_err != -EPROTO &&
		    cl->mgr_last_connect_err != -EACCES) {
			c->op.run = connect_step;
			fc_op_later(&c->op, 250);
			return;
		}
		connect_fail(c, status, "cannot get the cluster map");
		return;
	}
	twinfs__getattr__init(&c->ga);
	c->ga.ino = FUSE_ROOT_ID;
	fc_mgr_send(cl, &c->mc, TWINFS__MSG_TYPE__MSG_GETATTR, &c->ga.base,
		    &c->ga.ctx, NULL, cl->opts.request_timeout_ms, root_done, c);
}

static void connect_step(struct fc_op *op)
{
	struct connect_op *c = (struct connect_op *)op;
	struct fc_client *cl = op->cl;
	uint64_t left = c->deadline > tw_now_ms() ?
		c->deadline - tw_now_ms() : 1;

	/* GET_MAP without retransmission: the first contact reports its
	 * cause (refused, timed out, wrong cluster) instead of retrying. */
	twinfs__empty__init(&c->empty);
	fc_call(cl, cl->mgr, TWINFS__MSG_TYPE__MSG_GET_MAP, &c->empty.base,
		NULL, 0, (uint32_t)left, map_done, c);
}

static void connect_run(struct fc_op *op)
{
	struct connect_op *c = (struct connect_op *)op;

	c->deadline = tw_now_ms() + op->cl->opts.request_timeout_ms;
	connect_step(op);
}

static int fc_client_connect(struct fc_client *cl)
{
	struct connect_op *c = fc_op_new(cl, NULL, sizeof(*c), connect_run);
	struct timespec ts;
	int rc = 0;

	if (!c)
		return -ENOMEM;
	fc_loop_submit(cl, &c->op);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2 * (cl->opts.request_timeout_ms / 1000) + 10;
	pthread_mutex_lock(&cl->start_lock);
	while (!cl->start_done && rc == 0)
		rc = pthread_cond_timedwait(&cl->start_cond, &cl->start_lock,
					    &ts);
	if (!cl->start_done) {
		snprintf(cl->start_msg, sizeof(cl->start_msg),
			 "mgrd %s: no answer", cl->opts.mgr_source);
		cl->start_status = -ETIMEDOUT;
	}
	rc = cl->start_status;
	pthread_mutex_unlock(&cl->start_lock);
	return rc;
}

/* ------------------------------------------------------------ shutdown */

struct flush_op {
	struct fc_op op;
	struct fc_wb wb;
};

static void flush_all_done(void *arg)
{
	struct fc_client *cl = arg;

	pthread_mutex_lock(&cl->start_lock);
	cl->flush_done = true;
	pthread_cond_broadcast(&cl->start_cond);
	pthread_mutex_unlock(&cl->start_lock);
}

/* Name leases go back once the reports are out (dlease.c). */
static void reports_flushed(void *arg)
{
	struct fc_client *cl = arg;

	fc_dl_return_all(cl, flush_all_done, cl);
}

static void flush_reports(struct fc_op *op)
{
	struct fc_client *cl = op->cl;

	fc_op_free(op);
	fc_flush_all(cl, reports_flushed, cl);
}

/* Writes answered early land first (each within its deadline). */
static void flush_run(struct fc_op *op)
{
	struct flush_op *f = (struct flush_op *)op;

	if (fc_wb_enter(op->cl, &f->wb, op, 0, 0, UINT64_MAX, false,
			flush_reports))
		flush_reports(op);
}

/* Send the last size reports and give the name leases back (bounded
 * wait), then stop the loop: every op still outstanding is answered with
 * an error. */
static void client_shutdown(struct fc_client *cl)
{
	struct flush_op *f;
	struct timespec ts;
	int rc = 0;

	if (!cl->thread_started)
		return;
	f = fc_op_new(cl, NULL, sizeof(*f), flush_run);
	if (f) {
		fc_loop_submit(cl, &f->op);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		pthread_mutex_lock(&cl->start_lock);
		while (!cl->flush_done && rc == 0)
			rc = pthread_cond_timedwait(&cl->start_cond,
						    &cl->start_lock, &ts);
		pthread_mutex_unlock(&cl->start_lock);
	}
	fc_loop_stop(cl);
	fc_sa_log_stats(&cl->sa);
	fc_dl_log_stats(&cl->dl);
}

/* ---------------------------------------------------------------- main */

static void notify_parent(int *fd, char status)
{
	if (*fd < 0)
		return;
	if (write(*fd, &status, 1) != 1 && status == 0)
		status = 1;
	close(*fd);
	*fd = -1;
}

/* Fork; the parent waits for the child's verdict and exits with it. */
static int daemon_fork(int *notify_fd)
{
	int p[2];
	pid_t pid;

	if (pipe(p) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char c = 1;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		_exit(c == 0 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	*notify_fd = p[1];
	return 0;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	if (chdir("/") < 0) {
		/* nothing to do: the mount does not depend on the cwd */
	}
}

/* Neither io_thread_reads nor worker_reads given: the probe's result
 * (taken before the I/O thread starts, so that it has the CPUs to
 * itself) decides who reads /dev/fuse.  A handoff to the I/O thread
 * costs a wakeup of an idle CPU; where that is cheap the I/O thread's
 * reads win, where it is dear the workers, that run on the application's
 * CPU, do (docs/ARCHITECTURE.md "Threads and ownership"). */
struct readers_probe {
	int rc;          /* tw_wake_probe's */
	uint64_t ns;     /* its figure when rc is 0 */
};

/* 1: the I/O thread reads, 0: the workers; logged, once the log is the
 * daemon's.  Every line starts with the way, for the log's readers. */
static int choose_readers(const struct readers_probe *p)
{
	bool io = tw_wake_is_cheap(p->rc, p->ns);

	if (p->rc == -ENOTSUP)
		tw_info("the I/O thread reads /dev/fuse: this process may use "
			"one CPU only (-o worker_reads overrides)");
	else if (p->rc < 0)
		tw_warn("libfuse's workers read /dev/fuse: cannot measure "
			"what waking an idle CPU costs (%s; -o io_thread_reads "
			"overrides)", strerror(-p->rc));
	else
		tw_info("%s /dev/fuse: waking an idle CPU takes %.1f us "
			"here (the least median of %u rounds; up to %.1f us is "
			"cheap; -o %s overrides)", io ? "the I/O thread reads"
			: "libfuse's workers read", (double)p->ns / 1000.0,
			TW_WAKE_ROUNDS, TW_WAKE_CHEAP_NS / 1000.0,
			io ? "worker_reads" : "io_thread_reads");
	return io;
}

/* Free what parsing made and the client itself, so that a leak checker
 * has nothing to say either; rc.  Alone where nothing started yet (help,
 * version, a bad option); the end of main's out path otherwise. */
static int free_and_exit(struct fc_client *cl, struct cmdline *c,
			 struct fuse_args *args, int rc)
{
	fc_inodes_free(cl);
	tw_hmap_free(&cl->reports_inflight);
	tw_hmap_free(&cl->wb_errs);
	fc_caps_free(cl);
	fuse_opt_free_args(args);
	free(c->mgr_addr);
	free(c->cluster);
	free(c->channel);
	free(c->keyfile);
	free(c->subdir);
	free(cl);
	return rc;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fopts = { 0 };
	struct cmdline c;
	struct fc_client *cl;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg;
	char opt[TW_MGRLIST_MAX * (TW_HOST_MAX + 24) + 32];
	struct readers_probe probe = { .rc = -EAGAIN };
	int notify_fd = -1, rc, ret = 1;
	enum tw_log_level log_level;
	const char *prog = "twinfs";

	memset(&c, 0, sizeof(c));
	memset(&fopts, 0, sizeof(fopts));
	c.request_timeout = OPT_UNSET;   /* the cluster's, else a default */
	c.mgr_timeout = OPT_UNSET;
	c.monitor_interval = OPT_UNSET;
	c.attr_timeout = 1.0;
	c.entry_timeout = 1.0;
	c.readahead = FC_READAHEAD_KB;
	c.spin_us = FC_SPIN_US;
	c.mgr_spin_us = FC_MGR_SPIN_US;
	c.io_thread_reads = -1;  /* neither option: chosen by wake cost */
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	pthread_mutex_init(&cl->queue_lock, NULL);
	pthread_mutex_init(&cl->start_lock, NULL);
	pthread_cond_init(&cl->start_cond, NULL);
	fc_inodes_init(cl);
	tw_hmap_init(&cl->reports_inflight);
	tw_hmap_init(&cl->wb_errs);
	tw_hmap_init(&cl->caps);
	atomic_init(&cl->blksize, R0_DEF_STRIPE_SIZE);
	if (fuse_opt_parse(&args, &c, optspec, opt_proc) < 0)
		return 1;
	if (c.help || c.version) {
		if (c.help) {
			usage(argv[0]);
		} else {
			printf("twinfs %s (protocol %u)\n", TW_VERSION,
			       WIRE_VERSION);
			printf("FUSE library version %s\n", fuse_pkgversion());
		}
		return free_and_exit(cl, &c, &args, 0);
	}
	if (c.keyfile) {
		char kerr[512];

		if (tw_client_keyfile_load(c.keyfile, cl->opts.ident,
					   cl->opts.ident_key, kerr,
					   sizeof(kerr)) < 0) {
			fprintf(stderr, "%s: %s\n", prog, kerr);
			return free_and_exit(cl, &c, &args, 1);
		}
		cl->opts.has_ident = true;
		free(c.keyfile);
		c.keyfile = NULL;
	}
	cl->opts.subdir = c.subdir;
	if (!c.mgr_addr) {
		fprintf(stderr, "%s: missing MGRHOST[:PORT]\n", prog);
		fprintf(stderr, "usage: %s MGRHOST[:PORT] MOUNTPOINT "
			"[-o OPTIONS] [-f] [-d]\n", prog);
		return free_and_exit(cl, &c, &args, 1);
	}
	if (tw_mgrlist_parse(&cl->mgrs, c.mgr_addr, FC_DEFAULT_PORT) < 0) {
		fprintf(stderr, "%s: bad mgrd address '%s' (want "
			"HOST[:PORT] or, for an mgrd pair, "
			"HOST1[:PORT1],HOST2[:PORT2])\n", prog, c.mgr_addr);
		return free_and_exit(cl, &c, &args, 1);
	}
	cl->opts.mgr_source = c.mgr_addr;
	cl->opts.request_timeout_set = c.request_timeout != OPT_UNSET;
	cl->opts.mgr_timeout_set = c.mgr_timeout != OPT_UNSET;
	cl->opts.monitor_interval_set = c.monitor_interval != OPT_UNSET;
	if (!cl->opts.request_timeout_set)
		c.request_timeout = TW_REQUEST_TIMEOUT_MS;
	if (!cl->opts.mgr_timeout_set)
		c.mgr_timeout = TW_MGR_TIMEOUT_MS;
	if (!cl->opts.monitor_interval_set)
		c.monitor_interval = TW_MONITOR_INTERVAL_MS;
	if (c.request_timeout == 0 || c.mgr_timeout == 0 ||
	    c.monitor_interval < 100 || c.attr_timeout < 0 ||
	    c.entry_timeout < 0) {
		fprintf(stderr, "%s: bad option value (timeouts must be "
			"positive, monitor_interval >= 100 ms)\n", prog);
		return free_and_exit(cl, &c, &args, 1);
	}
	if (c.spin_us > TW_SPIN_MAX_US || c.mgr_spin_us > TW_SPIN_MAX_US) {
		fprintf(stderr, "%s: bad %s=%u (0..%u microseconds)\n", prog,
			c.spin_us > TW_SPIN_MAX_US ? "spin_us" : "mgr_spin_us",
			c.spin_us > TW_SPIN_MAX_US ? c.spin_us : c.mgr_spin_us,
			TW_SPIN_MAX_US);
		return free_and_exit(cl, &c, &args, 1);
	}
	if (c.channel && tw_channel_parse(c.channel, &cl->opts.channel) < 0) {
		fprintf(stderr, "%s: bad channel '%s' (integrity, encrypt or "
			"none)\n", prog, c.channel);
		return free_and_exit(cl, &c, &args, 1);
	}
	free(c.channel);
	c.channel = NULL;
	cl->opts.cluster = c.cluster ? c.cluster : strdup("twinfs");
	c.cluster = NULL;   /* cl->opts owns it now (subdir, mgr_addr: c) */
	cl->opts.request_timeout_ms = c.request_timeout;
	cl->map_changed = fc_data_map_changed;
	cl->opts.mgr_timeout_ms = c.mgr_timeout;
	cl->opts.monitor_interval_ms = c.monitor_interval;
	cl->opts.attr_timeout = c.attr_timeout;
	cl->opts.entry_timeout = c.entry_timeout;
	cl->opts.writeback_cache = c.writeback_cache;
	cl->opts.readahead_kb = c.readahead;
	cl->opts.spin_us = c.spin_us;
	cl->opts.mgr_spin_us = c.mgr_spin_us;
	cl->opts.atime = c.atime;
	/* Answers fetched ahead live as long as the shorter kernel cache. */
	fc_sa_init(&cl->sa, c.nostatahead ? 0 : (uint64_t)(1000.0 *
		   TW_MIN(c.attr_timeout, c.entry_timeout)));
	fc_dl_init(&cl->dl, !c.nonamelease);

	/* Ours first, so the user's own -o fsname=... wins.  A pair's comma
	 * is escaped: libfuse splits -o values at bare commas. */
	snprintf(opt, sizeof(opt), "-ofsname=%s:%d", cl->mgrs.addr[0].host,
		 cl->mgrs.addr[0].port);
	if (cl->mgrs.n > 1) {
		char a[TW_HOST_MAX + 16], b[TW_HOST_MAX + 16];

		snprintf(opt, sizeof(opt), "-ofsname=%s\\,%s",
			 tw_mgr_addr_str(&cl->mgrs.addr[0], a, sizeof(a)),
			 tw_mgr_addr_str(&cl->mgrs.addr[1], b, sizeof(b)));
	}
	/* From here a refusal goes through out, which frees all of it. */
	if (fuse_opt_insert_arg(&args, 1, opt) < 0 ||
	    fuse_opt_insert_arg(&args, 2, "-osubtype=twinfs") < 0 ||
	    fuse_opt_insert_arg(&args, 3, "-odefault_permissions") < 0)
		goto out;
	if (fuse_parse_cmdline(&args, &fopts) != 0)
		goto out;
	if (!fopts.mountpoint) {
		fprintf(stderr, "%s: missing MOUNTPOINT\n", prog);
		goto out;
	}
	cl->opts.mountpoint = fopts.mountpoint;
	cl->opts.foreground = fopts.foreground;
	log_level = fopts.debug ? TW_LOG_DEBUG : TW_LOG_INFO;
	/* Quiet on the mount command's terminal (see the top of the file);
	 * in the foreground (also -d) stderr is the log from the start. */
	tw_log_init(prog, fopts.foreground ? log_level : TW_LOG_WARN);
	tw_malloc_tune();
	/* Only what the mount chose: it proves a key only with an identity
	 * (proto/FORMAT.md "Channel protection"). */
	if (cl->opts.channel == TW_CHANNEL_NONE)
		wire_channel_announce(prog, cl->opts.channel, true);

	se = fuse_session_new(&args, &fc_ops, sizeof(fc_ops), cl);
	cl->se = se;   /* for kernel cache invalidations */
	if (!se)
		goto out;   /* libfuse printed why */
	signal(SIGPIPE, SIG_IGN);

	if (!fopts.foreground) {
		rc = daemon_fork(&notify_fd);
		if (rc < 0) {
			fprintf(stderr, "%s: cannot fork: %s\n", prog,
				strerror(-rc));
			goto out;
		}
	}

	if (getrandom(&cl->incarnation, sizeof(cl->incarnation), 0) !=
	    sizeof(cl->incarnation))
		cl->incarnation = tw_now_ns() ^ (uint64_t)getpid();
	if (gethostname(cl->hostname, sizeof(cl->hostname) - 1) < 0)
		snprintf(cl->hostname, sizeof(cl->hostname), "?");

	if (c.io_thread_reads < 0)
		probe.rc = tw_wake_probe(&probe.ns);
	rc = fc_loop_start(cl);
	if (rc < 0) {
		fprintf(stderr, "%s: cannot start the I/O loop: %s\n", prog,
			strerror(-rc));
		goto out;
	}
	rc = fc_client_connect(cl);
	if (rc < 0) {
		fprintf(stderr, "%s: cannot mount %s: %s\n", prog,
			fopts.mountpoint, cl->start_msg);
		goto out;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out;
	if (fuse_session_mount(se, fopts.mountpoint) != 0) {
		fprintf(stderr, "%s: cannot mount %s (see the message "
			"above)\n", prog, fopts.mountpoint);
		fuse_remove_signal_handlers(se);
		goto out;
	}
	if (fc_kio_install(se) < 0)
		tw_warn("cannot take over /dev/fuse I/O: a shared mmap of a "
			"file opened O_APPEND fails with ENODEV");
	notify_parent(&notify_fd, 0);
	if (!fopts.foreground) {
		detach_stdio();
		tw_log_init(NULL, log_level);
	}

	/* Either libfuse's workers read /dev/fuse and hand each request to
	 * the I/O thread, or the I/O thread reads it itself (loop.c
	 * fc_loop_serve), no handoff between threads.  Unless an option
	 * says which, the cost of a wakeup here decides
	 * (docs/ARCHITECTURE.md "Threads and ownership"). */
	if (c.io_thread_reads < 0)
		c.io_thread_reads = choose_readers(&probe);
	if (c.io_thread_reads) {
		rc = fc_loop_serve(cl);
		if (rc < 0)
			tw_err("cannot read /dev/fuse on the I/O thread: %s",
			       strerror(-rc));
		ret = rc < 0;
	} else if (fopts.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg) {
			ret = 1;
		} else {
			fuse_loop_cfg_set_clone_fd(cfg, fopts.clone_fd);
			fuse_loop_cfg_set_max_threads(cfg, fopts.max_threads);
			ret = fuse_session_loop_mt(se, cfg);
			fuse_loop_cfg_destroy(cfg);
		}
	}
	ret = ret != 0;
	client_shutdown(cl);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
out:
	notify_parent(&notify_fd, 1);
	client_shutdown(cl);
	if (se)
		fuse_session_destroy(se);
	fc_files_free(cl);
	fc_sa_free(&cl->sa);
	fc_dl_free(&cl->dl);
	free(fopts.mountpoint);
	free(cl->opts.cluster);
	explicit_bzero(cl->opts.ident_key, sizeof(cl->opts.ident_key));
	return free_and_exit(cl, &c, &args, ret);
}
