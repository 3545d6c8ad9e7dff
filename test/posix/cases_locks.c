/* cases_locks.c - POSIX conformance cases for locks: fcntl byte-range locks
 * between processes (F_SETLK, F_SETLKW, F_GETLK, deadlock detection, release
 * on close and exit), OFD locks and flock.
 *
 * The rules every case follows are at the top of pt.h; the helpers are in
 * pt_util.c.
 */
#include "pt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ==================================================================== locks */

static double elapsed_ms(struct timespec a, struct timespec b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

/* A lock holder: a forked process that opens the file, takes a lock and
 * then obeys one-byte commands sent by the case. */
struct holder {
	pid_t pid;
	int cmd;   /* write end: commands */
	int ack;   /* read end: one int per command (0 or errno) */
};

enum { LK_POSIX, LK_OFD, LK_FLOCK };

static int do_lock(int fd, int kind, int cmd_wait, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start,
			    .l_len = len };

	switch (kind) {
	case LK_POSIX:
		return fcntl(fd, cmd_wait ? F_SETLKW : F_SETLK, &fl);
	case LK_OFD:
		return fcntl(fd, cmd_wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	default:
		return flock(fd, (type == F_WRLCK ? LOCK_EX : type == F_RDLCK ? LOCK_SH : LOCK_UN) |
				 (cmd_wait ? 0 : LOCK_NB));
	}
}

/* Commands: 'u' unlock the range, 'c' close the fd, 'o' open and close a
 * second fd of the file, 'd' unlock after 300 ms (no ack), 'w' take a
 * write lock on [100, 101) waiting (ack when granted). */
static void holder_main(const char *path, int kind, short type, off_t start, off_t len,
			int cmd, int ack)
{
	int fd = open(path, O_RDWR), rc, other;
	char c;

	rc = do_lock(fd, kind, 0, type, start, len) < 0 ? errno : 0;
	if (write(ack, &rc, sizeof(rc)) != sizeof(rc))
		_exit(1);
	while (read(cmd, &c, 1) == 1) {
		switch (c) {
		case 'u':
			rc = do_lock(fd, kind, 0, F_UNLCK, start, len) < 0 ? errno : 0;
			break;
		case 'c':
			rc = close(fd) < 0 ? errno : 0;
			break;
		case 'o':
			other = open(path, O_RDONLY);
			rc = close(other) < 0 ? errno : 0;
			break;
		case 'd':
			pt_pause();
			for (int i = 0; i < 15; i++)
				pt_pause();
			do_lock(fd, kind, 0, F_UNLCK, start, len);
			continue;
		case 'w':
			rc = do_lock(fd, kind, 1, F_WRLCK, 100, 1) < 0 ? errno : 0;
			break;
		default:
			rc = EINVAL;
		}
		if (write(ack, &rc, sizeof(rc)) != sizeof(rc))
			_exit(1);
	}
	_exit(0);
}

/* Starts a holder; returns the errno of its lock attempt (0: granted). */
static int holder_start(struct holder *h, const char *path, int kind, short type,
			off_t start, off_t len)
{
	int cmd[2], ack[2], rc = EIO;

	if (pipe(cmd) < 0 || pipe(ack) < 0)
		return errno;
	h->pid = fork();
	if (h->pid == 0) {
		close(cmd[1]);
		close(ack[0]);
		holder_main(path, kind, type, start, len, cmd[0], ack[1]);
	}
	close(cmd[0]);
	close(ack[1]);
	h->cmd = cmd[1];
	h->ack = ack[0];
	if (read(h->ack, &rc, sizeof(rc)) != sizeof(rc))
		rc = EIO;
	return rc;
}

static int holder_cmd(struct holder *h, char c)
{
	int rc = EIO;

	if (write(h->cmd, &c, 1) != 1)
		return EIO;
	if (c == 'd')
		return 0;
	if (read(h->ack, &rc, sizeof(rc)) != sizeof(rc))
		rc = EIO;
	return rc;
}

static void holder_stop(struct holder *h)
{
	close(h->cmd);
	close(h->ack);
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
}

static void res_errno(const char *label, int e)
{
	if (e)
		pt_res("%s:errno=%s", label, pt_errname(e));
	else
		pt_res("%s:ok", label);
}

/* Tries a non-blocking lock from a separate process, which then exits. */
static int probe_lock(const char *path, int kind, short type, off_t start, off_t len)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(path, O_RDWR);

		_exit(do_lock(fd, kind, 0, type, start, len) < 0 ? errno : 0);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
}

static void lock_wr_wr(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	res_errno("holder", holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 10));
	res_errno("second_write", probe_lock("f", LK_POSIX, F_WRLCK, 5, 1));
	res_errno("second_read", probe_lock("f", LK_POSIX, F_RDLCK, 0, 0));
	holder_stop(&h);
}

static void lock_rd_rd(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	res_errno("holder", holder_start(&h, "f", LK_POSIX, F_RDLCK, 0, 10));
	res_errno("second_read", probe_lock("f", LK_POSIX, F_RDLCK, 0, 10));
	res_errno("second_write", probe_lock("f", LK_POSIX, F_WRLCK, 9, 1));
	holder_stop(&h);
}

static void lock_disjoint(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	res_errno("holder", holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 5));
	res_errno("after", probe_lock("f", LK_POSIX, F_WRLCK, 5, 5));
	res_errno("beyond_eof", probe_lock("f", LK_POSIX, F_WRLCK, 1000, 0));
	res_errno("overlap", probe_lock("f", LK_POSIX, F_WRLCK, 4, 2));
	holder_stop(&h);
}

static void lock_rdonly_fd(void)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc("write_lock_on_rdonly", fcntl(fd, F_SETLK, &fl));
	fl.l_type = F_RDLCK;
	pt_rc("read_lock_on_rdonly", fcntl(fd, F_SETLK, &fl));
	close(fd);
	fd = open("f", O_WRONLY);
	pt_rc("read_lock_on_wronly", fcntl(fd, F_SETLK, &fl));
	close(fd);
}

static void lock_bad_args(void)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = -5 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	pt_rc("negative_start", fcntl(fd, F_SETLK, &fl));
	fl.l_start = 0;
	fl.l_type = 42;
	pt_rc("bad_type", fcntl(fd, F_SETLK, &fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = 7;
	pt_rc("bad_whence", fcntl(fd, F_SETLK, &fl));
	close(fd);
}

/* F_GETLK from the case process: appends the reported type, range and
 * whether l_pid is the holder. */
static void res_getlk(int cmd, short type, off_t start, off_t len, pid_t holder)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start,
			    .l_len = len };
	int fd = open("f", O_RDWR);

	if (pt_rc("getlk", fcntl(fd, cmd, &fl)) < 0)
		goto out;
	pt_res("type=%s", fl.l_type == F_UNLCK ? "unlck" : fl.l_type == F_RDLCK ? "rdlck" :
	       fl.l_type == F_WRLCK ? "wrlck" : "bad");
	if (fl.l_type != F_UNLCK)
		pt_res("start=%lld len=%lld pid=%s", (long long)fl.l_start, (long long)fl.l_len,
		       fl.l_pid == holder ? "holder" : fl.l_pid == -1 ? "-1" : "other");
out:
	close(fd);
}

static void lock_getlk_holder(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 2, 5);
	res_getlk(F_GETLK, F_RDLCK, 0, 0, h.pid);
	holder_stop(&h);
}

static void lock_getlk_read_holder(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	holder_start(&h, "f", LK_POSIX, F_RDLCK, 0, 0);
	res_getlk(F_GETLK, F_WRLCK, 100, 1, h.pid);
	res_getlk(F_GETLK, F_RDLCK, 100, 1, h.pid);
	holder_stop(&h);
}

static void lock_getlk_none(void)
{
	struct holder h;

	pt_mkfile("f", 0644, "0123456789", 10);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 5);
	res_getlk(F_GETLK, F_WRLCK, 5, 5, h.pid);
	holder_stop(&h);
}

static void lock_split_range(void)
{
	/* Unlocking the middle of a lock leaves two locks. */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	fcntl(fd, F_SETLK, &fl);
	fl.l_type = F_UNLCK;
	fl.l_start = 40;
	fl.l_len = 20;
	pt_rc("unlock_middle", fcntl(fd, F_SETLK, &fl));
	res_errno("probe_10", probe_lock("f", LK_POSIX, F_WRLCK, 10, 1));
	res_errno("probe_50", probe_lock("f", LK_POSIX, F_WRLCK, 50, 1));
	res_errno("probe_70", probe_lock("f", LK_POSIX, F_WRLCK, 70, 1));
	close(fd);
}

static void lock_upgrade_merge(void)
{
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	fcntl(fd, F_SETLK, &fl);
	fl.l_type = F_WRLCK;
	fl.l_start = 5;
	pt_rc("upgrade_part", fcntl(fd, F_SETLK, &fl));
	res_errno("probe_read_2", probe_lock("f", LK_POSIX, F_RDLCK, 2, 1));
	res_errno("probe_read_7", probe_lock("f", LK_POSIX, F_RDLCK, 7, 1));
	close(fd);
}

static void lock_setlkw_waits(void)
{
	struct holder h;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	struct timespec a, b;
	int fd, rc;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 10);
	fd = open("f", O_RDWR);
	a = pt_now();
	holder_cmd(&h, 'd');
	rc = fcntl(fd, F_SETLKW, &fl);
	b = pt_now();
	pt_rc("setlkw", rc);
	pt_res("waited=%d", elapsed_ms(a, b) >= 150);
	close(fd);
	holder_stop(&h);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void arm_interrupt(unsigned seconds)
{
	struct sigaction sa = { .sa_handler = on_alarm };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);  /* no SA_RESTART: waits end with EINTR */
	alarm(seconds);
}

/* Back to the runner's watchdog: SIGALRM kills the case again. */
static void disarm_interrupt(void)
{
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	alarm(PT_CASE_TIMEOUT);
}

static void lock_setlkw_eintr(void)
{
	struct holder h;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 10);
	fd = open("f", O_RDWR);
	arm_interrupt(1);
	pt_rc("setlkw", fcntl(fd, F_SETLKW, &fl));
	disarm_interrupt();
	res_errno("holder_unlock", holder_cmd(&h, 'u'));
	/* The interrupted waiter must have left no lock behind. */
	res_errno("probe_after", probe_lock("f", LK_POSIX, F_WRLCK, 0, 10));
	close(fd);
	holder_stop(&h);
}

static void lock_deadlock(void)
{
	struct holder h;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	fcntl(fd, F_SETLK, &fl);           /* we hold [100, 101) below, the holder [0, 1) */
	fl.l_start = 100;
	fcntl(fd, F_SETLK, &fl);
	fl.l_start = 0;
	fl.l_type = F_UNLCK;
	fcntl(fd, F_SETLK, &fl);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 1);
	if (write(h.cmd, "w", 1) != 1)     /* holder now waits for [100, 101) */
		pt_res("cmd=failed");
	for (int i = 0; i < 10; i++)
		pt_pause();
	fl.l_type = F_WRLCK;
	arm_interrupt(3);
	pt_rc("setlkw", fcntl(fd, F_SETLKW, &fl));
	disarm_interrupt();
	close(fd);
	holder_stop(&h);
}

static void lock_released_on_close(void)
{
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 0);
	res_errno("before", probe_lock("f", LK_POSIX, F_WRLCK, 0, 0));
	res_errno("close", holder_cmd(&h, 'c'));
	res_errno("after", probe_lock("f", LK_POSIX, F_WRLCK, 0, 0));
	holder_stop(&h);
}

static void lock_released_on_other_fd_close(void)
{
	/* POSIX: closing any fd of the file drops the process's locks. */
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 0);
	res_errno("other_close", holder_cmd(&h, 'o'));
	res_errno("after", probe_lock("f", LK_POSIX, F_WRLCK, 0, 0));
	holder_stop(&h);
}

static void lock_released_on_exit(void)
{
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 0);
	holder_stop(&h);
	res_errno("after_exit", probe_lock("f", LK_POSIX, F_WRLCK, 0, 0));
}

static void lock_unlock_explicit(void)
{
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_POSIX, F_WRLCK, 0, 0);
	res_errno("unlock", holder_cmd(&h, 'u'));
	res_errno("after", probe_lock("f", LK_POSIX, F_WRLCK, 0, 0));
	holder_stop(&h);
}

static void ofd_same_process(void)
{
	int a, b;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_RDWR);
	b = open("f", O_RDWR);
	pt_rc("first", fcntl(a, F_OFD_SETLK, &fl));
	pt_rc("second_fd", fcntl(b, F_OFD_SETLK, &fl));
	pt_rc("same_fd_again", fcntl(a, F_OFD_SETLK, &fl));
	close(a);
	pt_rc("after_close", fcntl(b, F_OFD_SETLK, &fl));
	close(b);
}

static void ofd_vs_posix(void)
{
	int a, b;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_RDWR);
	b = open("f", O_RDWR);
	pt_rc("ofd", fcntl(a, F_OFD_SETLK, &fl));
	pt_rc("posix_same_process", fcntl(b, F_SETLK, &fl));
	close(a);
	close(b);
}

static void ofd_getlk(void)
{
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_OFD, F_WRLCK, 0, 10);
	res_getlk(F_OFD_GETLK, F_WRLCK, 0, 0, h.pid);
	res_getlk(F_GETLK, F_WRLCK, 0, 0, h.pid);
	holder_stop(&h);
}

static void ofd_pid_einval(void)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_pid = 1 };
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDWR);
	pt_rc(NULL, fcntl(fd, F_OFD_SETLK, &fl));
	close(fd);
}

static void ofd_survives_other_close(void)
{
	/* Unlike POSIX locks, closing another fd does not drop an OFD lock. */
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	holder_start(&h, "f", LK_OFD, F_WRLCK, 0, 0);
	res_errno("other_close", holder_cmd(&h, 'o'));
	res_errno("probe", probe_lock("f", LK_OFD, F_WRLCK, 0, 0));
	res_errno("close", holder_cmd(&h, 'c'));
	res_errno("probe_after_close", probe_lock("f", LK_OFD, F_WRLCK, 0, 0));
	holder_stop(&h);
}

static void flock_ex_nb(void)
{
	int a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_RDONLY);
	b = open("f", O_RDONLY);
	pt_rc("first", flock(a, LOCK_EX | LOCK_NB));
	pt_rc("second", flock(b, LOCK_EX | LOCK_NB));
	pt_rc("second_shared", flock(b, LOCK_SH | LOCK_NB));
	close(a);
	pt_rc("after_close", flock(b, LOCK_EX | LOCK_NB));
	close(b);
}

static void flock_shared(void)
{
	int a, b;

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_RDONLY);
	b = open("f", O_RDONLY);
	pt_rc("first", flock(a, LOCK_SH | LOCK_NB));
	pt_rc("second", flock(b, LOCK_SH | LOCK_NB));
	pt_rc("upgrade", flock(a, LOCK_EX | LOCK_NB));
	close(a);
	close(b);
}

static void flock_across_processes(void)
{
	struct holder h;

	pt_mkfile("f", 0644, NULL, 0);
	res_errno("holder", holder_start(&h, "f", LK_FLOCK, F_WRLCK, 0, 0));
	res_errno("probe", probe_lock("f", LK_FLOCK, F_RDLCK, 0, 0));
	res_errno("unlock", holder_cmd(&h, 'u'));
	res_errno("probe_after", probe_lock("f", LK_FLOCK, F_WRLCK, 0, 0));
	holder_stop(&h);
}

static void flock_inherited_by_fork(void)
{
	/* A flock belongs to the open file description, shared with a
	 * forked child: the lock lives until both close. */
	int fd, status, go[2];
	pid_t pid;
	char b;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	flock(fd, LOCK_EX);
	if (pipe(go) < 0) {
		pt_res("pipe:errno=%s", pt_errname(errno));
		close(fd);
		return;
	}
	pid = fork();
	if (pid == 0) {
		/* hold the copy until the parent has probed (no timing) */
		close(go[1]);
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);  /* the child's copy closes here */
	}
	close(go[0]);
	close(fd);
	res_errno("probe_child_alive", probe_lock("f", LK_FLOCK, F_WRLCK, 0, 0));
	close(go[1]);
	waitpid(pid, &status, 0);
	res_errno("probe_child_gone", probe_lock("f", LK_FLOCK, F_WRLCK, 0, 0));
}

static void flock_vs_fcntl(void)
{
	int a, b;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	pt_mkfile("f", 0644, NULL, 0);
	a = open("f", O_RDWR);
	b = open("f", O_RDWR);
	pt_rc("flock", flock(a, LOCK_EX | LOCK_NB));
	pt_rc("ofd_after_flock", fcntl(b, F_OFD_SETLK, &fl));
	close(a);
	close(b);
}

static void flock_bad_op(void)
{
	int fd;

	pt_mkfile("f", 0644, NULL, 0);
	fd = open("f", O_RDONLY);
	pt_rc(NULL, flock(fd, 0));
	close(fd);
}

const struct pt_case pt_cases_locks[] = {
	{ "lock/wr_wr", lock_wr_wr },
	{ "lock/rd_rd", lock_rd_rd },
	{ "lock/disjoint", lock_disjoint },
	{ "lock/rdonly_fd", lock_rdonly_fd },
	{ "lock/bad_args", lock_bad_args },
	{ "lock/getlk_holder", lock_getlk_holder },
	{ "lock/getlk_read_holder", lock_getlk_read_holder },
	{ "lock/getlk_none", lock_getlk_none },
	{ "lock/split_range", lock_split_range },
	{ "lock/upgrade_merge", lock_upgrade_merge },
	{ "lock/setlkw_waits", lock_setlkw_waits },
	{ "lock/setlkw_eintr", lock_setlkw_eintr },
	{ "lock/deadlock", lock_deadlock },
	{ "lock/released_on_close", lock_released_on_close },
	{ "lock/released_on_other_fd_close", lock_released_on_other_fd_close },
	{ "lock/released_on_exit", lock_released_on_exit },
	{ "lock/unlock_explicit", lock_unlock_explicit },

	{ "ofd/same_process", ofd_same_process },
	{ "ofd/vs_posix", ofd_vs_posix },
	{ "ofd/getlk", ofd_getlk },
	{ "ofd/pid_einval", ofd_pid_einval },
	{ "ofd/survives_other_close", ofd_survives_other_close },

	{ "flock/ex_nb", flock_ex_nb },
	{ "flock/shared", flock_shared },
	{ "flock/across_processes", flock_across_processes },
	{ "flock/inherited_by_fork", flock_inherited_by_fork },
	{ "flock/vs_fcntl", flock_vs_fcntl },
	{ "flock/bad_op", flock_bad_op },
	{ NULL, NULL },
};
