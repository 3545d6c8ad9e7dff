/* snapfork.c - the child process that writes mgrd's state as it was at
 * the fork while mgrd goes on serving (docs/ARCHITECTURE.md "Record mode
 * (mgrd)"): the record log's periodic snapshot (record.c), a standby's
 * join by snapshot (repl.c) and backup-meta (backup.c) all use it.
 *
 * One child at a time: each holds a copy-on-write image of the state, so
 * two would add up to twice the pages the parent rewrites meanwhile, and
 * they would compete for the disk; a second fork gets -EBUSY and its
 * caller tries again later.
 *
 * A child that runs longer than snapshot_timeout is killed: one that
 * hangs (a stalled disk, a bug) would otherwise hold that one place for
 * ever, stopping the periodic snapshots (the record log then grows
 * without bound) and every later join and backup.  mgr_snap_wait, which
 * each caller polls, does it and says -ETIMEDOUT; the warning names the
 * file, the pid and how long the child ran.  Why 10 minutes by default:
 * the child encodes the whole state and writes it, syncing every
 * SNAP_SYNC_BYTES.  At 10 M inodes that is 1.64 GB (test/bench/RESULTS.md
 * "mgrd at scale"); 1 M inodes (162 MB) took 10 s on a shared 2-core VM
 * ("backup-meta pause at scale"), so about 100 s at 10 M there.  In
 * 600 s a healthy 10 M-inode child is killed only if it writes below
 * 2.7 MB/s, far below any working disk, even a busy one; a larger
 * namespace or a slower disk raises the setting (man/twinfs.conf.5).
 * Shorter would risk killing healthy children, and their snapshot would
 * then never be written; longer only delays noticing a hang.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t running;          /* the child, 0 = none */
static uint64_t running_since; /* its fork (tw_now_ms) */
static char running_what[PATH_MAX + 32];   /* what it writes */
static uint32_t timeout_ms = TW_SNAPSHOT_TIMEOUT_MS;   /* 0 = none */
static unsigned forks;         /* since start (the test hook's count) */
static uint64_t timeouts;

/* The state to a plain file, synced every SNAP_SYNC_BYTES: on a
 * journaling file system (ext4's ordered data) the parent's next
 * record-log sync would otherwise wait for all of a large file's dirty
 * data, a pause as long as writing the whole state out
 * (test/bench/RESULTS.md "backup-meta pause at scale"). */
#define SNAP_SYNC_BYTES (8u << 20)
static int write_file(const uint8_t *buf, size_t len, void *arg)
{
	const char *path = arg;
	size_t off = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	while (off < len) {
		size_t n = TW_MIN(len - off, (size_t)SNAP_SYNC_BYTES);
		ssize_t w = write(fd, buf + off, n);

		if (w <= 0 || fdatasync(fd) < 0) {
			close(fd);
			return -EIO;
		}
		off += (size_t)w;
	}
	return close(fd) == 0 ? 0 : -EIO;
}

void mgr_snap_set_timeout(uint32_t ms)
{
	timeout_ms = ms;
}

uint64_t mgr_snap_timeouts(void)
{
	return timeouts;
}

/* Test hook: TWINFS_TEST_SNAP_HANG=N makes the N-th child this process
 * forks stop itself before it encodes (a hang for the timeout to end). */
static bool test_hang(void)
{
	const char *env = getenv("TWINFS_TEST_SNAP_HANG");

	return env && *env && strtoul(env, NULL, 10) == forks;
}

/* Test hook: TWINFS_TEST_SNAP_SLOW_MS=M makes every child sleep M ms
 * before it encodes (a disk slower than a request's timeout). */
static unsigned test_slow_ms(void)
{
	const char *env = getenv("TWINFS_TEST_SNAP_SLOW_MS");

	return env && *env ? (unsigned)strtoul(env, NULL, 10) : 0;
}

pid_t mgr_snap_fork_fn(const struct mgr_state *st, mgr_snap_fn fn,
		       void *arg, const char *what)
{
	pid_t parent = getpid(), pid;
	bool hang;
	unsigned slow_ms;

	if (running > 0)
		return -EBUSY;
	forks++;
	hang = test_hang();
	slow_ms = test_slow_ms();
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		uint8_t *buf;
		size_t len;
		int rc;

		/* It dies with mgrd: a child that outlived a kill -9 would
		 * hold the flock of mgrd's directory (an inherited
		 * descriptor) and refuse the restart until it is done. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
		    getppid() != parent)
			_exit(1);
		if (hang)
			raise(SIGSTOP);
		if (slow_ms)
			usleep(slow_ms * 1000u);
		rc = mgr_state_encode(st, &buf, &len);

		/* _exit: no atexit handler and no leak check of the
		 * parent's state runs in the child. */
		_exit(rc == 0 && fn(buf, len, arg) == 0 ? 0 : 1);
	}
	running = pid;
	running_since = tw_now_ms();
	snprintf(running_what, sizeof(running_what), "%s", what);
	return pid;
}

pid_t mgr_snap_fork(const struct mgr_state *st, const char *path)
{
	return mgr_snap_fork_fn(st, write_file, (void *)path, path);
}

bool mgr_snap_busy(void)
{
	return running > 0;
}

/* SIGKILL and wait for it: the caller removes or rewrites the child's
 * file next, so it must be gone, not dying.  SIGKILL ends a stopped
 * child, or one in a killable wait, at once; one in an uninterruptible
 * disk wait ends when that I/O returns, and the disk is mgrd's own
 * directory's, whose log syncs would wait for it as well. */
static void kill_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (running == pid)
		running = 0;
}

int mgr_snap_wait(pid_t pid)
{
	int wst;
	pid_t got = waitpid(pid, &wst, WNOHANG);
	uint64_t ran;

	if (got == 0) {
		assert(pid == running);   /* one child at a time */
		ran = tw_now_ms() - running_since;
		if (timeout_ms == 0 || ran <= timeout_ms)
			return 1;
		kill_reap(pid);
		timeouts++;
		tw_warn("mgrd: the snapshot process %d writing %s ran %llu ms, "
			"longer than snapshot_timeout (%u ms): killed",
			(int)pid, running_what, (unsigned long long)ran,
			timeout_ms);
		return -ETIMEDOUT;
	}
	if (running == pid)
		running = 0;
	if (got < 0 || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
		return -EIO;
	return 0;
}

void mgr_snap_kill(pid_t pid)
{
	if (pid > 0)
		kill_reap(pid);
}
