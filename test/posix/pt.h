/* pt.h - shared declarations of the POSIX conformance suite (test/posix/).
 *
 * A case is a small function that runs with the current directory set to a
 * fresh, empty, root-owned directory (mode 0755) on the file system under
 * test, with umask 022, as root, in its own process (a crash or a hang only
 * loses that case).  It describes the exact outcome by appending words to a
 * result line with pt_res()/pt_rc(); posixtest.c prints "id<TAB>result".
 *
 * Rules every case follows so that two file systems can be compared line by
 * line (README.md, "Writing a case"):
 *   - the result never holds inode numbers, pids, device numbers of the
 *     file system, absolute times or block counts; times are compared with
 *     each other (mtime_changed=1), ids with each other (pid_match=1);
 *   - errors are printed by name (errno=ENOENT), never by number;
 *   - everything a case creates lives below its directory, which the runner
 *     removes afterwards, and every process it forks is in its process
 *     group, which the runner kills afterwards.
 */
#ifndef PT_H
#define PT_H

#include <sys/stat.h>
#include <sys/types.h>
#include <stddef.h>
#include <time.h>

/* Seconds a case may run; the runner arms alarm() with it and reports
 * "timeout" when SIGALRM kills the case. */
#define PT_CASE_TIMEOUT 20

/* The unprivileged identity used by the cases that drop root. */
#define PT_NOBODY 65534

struct pt_case {
	const char *id;     /* "syscall/what", unique, stable */
	void (*fn)(void);
};

/* NULL-terminated tables, one per source file. */
extern const struct pt_case pt_cases_perm[];   /* cases_perm.c */
extern const struct pt_case pt_cases_names[];  /* cases_names.c */
extern const struct pt_case pt_cases_open[];   /* cases_open.c */
extern const struct pt_case pt_cases_data[];   /* cases_data.c */
extern const struct pt_case pt_cases_meta[];   /* cases_meta.c */
extern const struct pt_case pt_cases_locks[];  /* cases_locks.c */

/* Longest result line, NUL included. */
#define PT_RES_MAX 1024

/* The runner's side of the result line: clear it before a case, read it
 * after. */
void pt_res_reset(void);
const char *pt_res_get(void);
/* "SIGBUS" etc. for sig. */
void pt_signame(int sig, char *buf, size_t len);

/* Appends one word (printf format) to the result line, space separated. */
void pt_res(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends "ok" when rc >= 0, else "errno=NAME" of the current errno; with a
 * label, "label:ok" / "label:errno=NAME".  Returns rc. */
long pt_rc(const char *label, long rc);
/* "errno=NAME" for e (a positive errno). */
const char *pt_errname(int e);

/* Runs fn(arg) in a forked child whose uid and gid are PT_NOBODY, with no
 * supplementary groups; what the child appends is appended to the result
 * line of the caller.  A child killed by a signal appends "child=SIGNAME". */
void pt_as_nobody(void (*fn)(void *arg), void *arg);

/* Sleeps long enough for the coarse file-system clock to tick (20 ms), so
 * that a timestamp taken after the pause is strictly greater. */
void pt_pause(void);

/* Creates a regular file holding len bytes of data (NULL: nothing), then sets
 * its mode exactly (umask does not apply).  Returns 0 or -errno. */
int pt_mkfile(const char *path, mode_t mode, const void *data, size_t len);
/* Reads the whole file (at most cap bytes) into buf; returns the byte count
 * or -errno. */
long pt_readfile(const char *path, void *buf, size_t cap);
/* 1 when len bytes of buf are all zero. */
int pt_allzero(const void *buf, size_t len);
/* Permission and type bits of path (lstat), or -errno. */
long pt_mode(const char *path);
/* Link count of path (lstat), or -errno. */
long pt_nlink(const char *path);
/* "file", "dir", "symlink", "fifo", "sock", "chr", "blk" or "none". */
const char *pt_type(const char *path);
/* -1, 0, 1 like strcmp. */
int pt_tscmp(struct timespec a, struct timespec b);
/* CLOCK_REALTIME now. */
struct timespec pt_now(void);
/* lstat of path; all zero when it fails. */
struct stat pt_stat(const char *path);
/* 1 when a and b (lstat) are the same inode. */
int pt_same_inode(const char *a, const char *b);
/* A name of n bytes ('a' repeated, n <= 511) in a static buffer. */
const char *pt_longname(size_t n);
/* Contents of a small file as a string (static buffer), or its errno name. */
const char *pt_contents(const char *path);
/* mkdir, then chmod to exactly mode (umask does not apply). */
void pt_mkdir_mode(const char *path, mode_t mode);
/* A new file of mode 0644 holding len bytes of pattern seed. */
int pt_mkpattern(const char *path, unsigned seed, size_t len);
/* 1 when bytes [off, off+len) of fd are pattern seed (at the same offsets). */
int pt_is_pattern(int fd, unsigned seed, off_t off, size_t len);
/* 1 when bytes [off, off+len) of fd can be read and are all zero. */
int pt_is_zero(int fd, off_t off, size_t len);

/* A deterministic byte pattern: byte i of stream seed. */
static inline unsigned char pt_pat(unsigned seed, size_t i)
{
	return (unsigned char)((i * 31u + seed * 7u + (i >> 8)) & 0xff);
}

#endif
