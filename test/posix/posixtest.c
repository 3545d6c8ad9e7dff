/* posixtest.c - runner of the POSIX conformance suite (test/posix/).
 *
 * Usage: posixtest [-l] [-k SUBSTRING] DIR
 *
 * Creates DIR/posixtest.XXXXXX, and for every case of the tables in
 * cases_*.c (in the order of pt.h) creates a fresh subdirectory, forks a child
 * in its own process group that changes into it and runs the case, and
 * prints "id<TAB>result".  The child has 20 s (a hung case prints
 * "timeout"); afterwards the runner kills what is left of the process group
 * and removes the subdirectory.  The output only depends on the semantics of
 * the file system, so the outputs of two file systems can be diffed
 * (run.sh).  It does not judge results: ext4 is the oracle.
 *
 * Must run as root (the unprivileged cases drop to uid/gid 65534 in forked
 * children, the root cases create devices and chown).  The helpers the
 * cases share are in pt_util.c.
 */
#include "pt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


/* ------------------------------------------------------------------- runner */

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		return rmdir(path) < 0 ? -1 : 0;
	return unlink(path) < 0 ? -1 : 0;
}

/* Removes path and everything below it; returns 0 or -errno. */
static int rm_tree(const char *path)
{
	if (nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS) < 0)
		return -errno;
	return 0;
}

/* Runs one case in casedir (created here) and fills result. */
static void run_case(const struct pt_case *c, const char *casedir,
		     char *result, size_t len)
{
	int fds[2];
	pid_t pid;
	int status;
	ssize_t n;
	size_t got = 0;

	result[0] = '\0';
	if (mkdir(casedir, 0755) < 0 || chmod(casedir, 0755) < 0) {
		snprintf(result, len, "setup=%s", pt_errname(errno));
		return;
	}
	if (pipe(fds) < 0) {
		snprintf(result, len, "setup=%s", pt_errname(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(result, len, "setup=%s", pt_errname(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		umask(022);
		alarm(PT_CASE_TIMEOUT);
		pt_res_reset();
		if (chdir(casedir) < 0)
			pt_res("setup=%s", pt_errname(errno));
		else
			c->fn();
		n = write(fds[1], pt_res_get(), strlen(pt_res_get()));
		(void)n;
		_exit(0);
	}
	close(fds[1]);
	setpgid(pid, pid);  /* both sides, so it holds before either runs on */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* Leftover helpers of the case (lock holders, writers) die with it. */
	kill(-pid, SIGKILL);
	/* The child wrote its whole line before exiting; leftover helpers may
	 * still hold the write end, so do not wait for EOF. */
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	while (got < len - 1 && (n = read(fds[0], result + got, len - 1 - got)) > 0)
		got += (size_t)n;
	result[got] = '\0';
	close(fds[0]);
	if (WIFSIGNALED(status)) {
		if (WTERMSIG(status) == SIGALRM) {
			snprintf(result, len, "timeout");
		} else {
			char name[16];

			pt_signame(WTERMSIG(status), name, sizeof(name));
			snprintf(result, len, "crash=%s", name);
		}
	} else if (got == 0) {
		snprintf(result, len, "noresult");
	}
	/* The runner is a child subreaper: orphaned helpers of the case are
	 * reparented to it; reap them all so none still works in the
	 * directory when it is removed. */
	while (waitpid(-pid, NULL, 0) > 0 || errno == EINTR)
		;
}

static void usage(void)
{
	fprintf(stderr, "usage: posixtest [-l] [-k SUBSTRING] DIR\n"
			"  -l            list case ids and exit\n"
			"  -k SUBSTRING  run only the cases whose id contains it\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const struct pt_case *tables[] = { pt_cases_perm, pt_cases_names, pt_cases_open,
					    pt_cases_data, pt_cases_meta, pt_cases_locks };
	const char *filter = NULL;
	int list = 0, opt, removal_failed = 0;
	char top[4096], casedir[4200], result[PT_RES_MAX];
	unsigned count = 0;

	while ((opt = getopt(argc, argv, "lk:")) != -1) {
		switch (opt) {
		case 'l': list = 1; break;
		case 'k': filter = optarg; break;
		default: usage();
		}
	}
	if (list) {
		for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
			for (const struct pt_case *c = tables[t]; c->id; c++)
				printf("%s\n", c->id);
		return 0;
	}
	if (optind != argc - 1)
		usage();
	if (geteuid() != 0) {
		fprintf(stderr, "posixtest: must run as root\n");
		return 2;
	}
	/* Line buffering so a partial run still shows which case hung. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	snprintf(top, sizeof(top), "%s/posixtest.XXXXXX", argv[optind]);
	if (!mkdtemp(top)) {
		fprintf(stderr, "posixtest: mkdtemp %s: %s\n", top, strerror(errno));
		return 2;
	}
	/* The unprivileged cases must be able to reach their directory. */
	if (chmod(top, 0755) < 0) {
		fprintf(stderr, "posixtest: chmod %s: %s\n", top, strerror(errno));
		rmdir(top);
		return 2;
	}
	snprintf(casedir, sizeof(casedir), "%s/case", top);
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		for (const struct pt_case *c = tables[t]; c->id; c++) {
			int rc;

			if (filter && !strstr(c->id, filter))
				continue;
			run_case(c, casedir, result, sizeof(result));
			printf("%s\t%s\n", c->id, result);
			count++;
			rc = rm_tree(casedir);
			if (rc < 0 && rc != -ENOENT) {
				fprintf(stderr, "posixtest: %s: cannot remove %s: %s\n",
					c->id, casedir, strerror(-rc));
				removal_failed = 1;
				/* Keep going in a new directory. */
				snprintf(casedir, sizeof(casedir), "%s/case.%u", top, count);
			}
		}
	}
	if (rm_tree(top) < 0) {
		fprintf(stderr, "posixtest: cannot remove %s: %s\n", top, strerror(errno));
		removal_failed = 1;
	}
	fprintf(stderr, "posixtest: %u cases run\n", count);
	return removal_failed ? 1 : 0;
}
