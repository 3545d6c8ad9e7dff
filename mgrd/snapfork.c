/* snapfork.c - the child process that writes mgrd's state as it was at
 * the fork while mgrd goes on serving (docs/ARCHITECTURE.md "Record mode
 * (mgrd)"): the record log's periodic snapshot (record.c), a standby's
 * join by snapshot (repl.c) and backup-meta (backup.c) all use it.
 *
 * One child at a time: each holds a copy-on-write image of the state, so
 * two would add up to twice the pages the parent rewrites meanwhile, and
 * they would compete for the disk; a second fork gets -EBUSY and its
 * caller tries again later.
 */
#include "mgrd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t running;    /* the child, 0 = none */

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

pid_t mgr_snap_fork_fn(const struct mgr_state *st, mgr_snap_fn fn,
		       void *arg)
{
	pid_t parent = getpid(), pid;

	if (running > 0)
		return -EBUSY;
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
		rc = mgr_state_encode(st, &buf, &len);

		/* _exit: no atexit handler and no leak check of the
		 * parent's state runs in the child. */
		_exit(rc == 0 && fn(buf, len, arg) == 0 ? 0 : 1);
	}
	running = pid;
	return pid;
}

pid_t mgr_snap_fork(const struct mgr_state *st, const char *path)
{
	return mgr_snap_fork_fn(st, write_file, (void *)path);
}

bool mgr_snap_busy(void)
{
	return running > 0;
}

static void reaped(pid_t pid)
{
	if (running == pid)
		running = 0;
}

int mgr_snap_wait(pid_t pid)
{
	int wst;
	pid_t got = waitpid(pid, &wst, WNOHANG);

	if (got == 0)
		return 1;
	reaped(pid);
	if (got < 0 || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
		return -EIO;
	return 0;
}

void mgr_snap_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	reaped(pid);
}
