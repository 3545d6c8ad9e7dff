/* log.c - one line per event on stderr, with level filter and rate limiting.
 *
 * Line format: "2026-11-22T10:54:01.123 twinfs-iod[3] WARN msg" (local time,
 * milliseconds).  Each line is formatted into one buffer and written with a
 * single write(2) so that lines from different threads never interleave.
 * Rate limiting (tw_log_rl) is keyed by the format string pointer, i.e. by
 * call site: a repeat within TW_RL_WINDOW_MS of the last printed line of that
 * site is counted, and the count is appended to the next printed line.
 * This file never logs file contents; callers must not pass them either.
 */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define TW_LOG_LINE_MAX  2048
#define TW_RL_WINDOW_MS  5000
/* Distinct rate-limited call sites we track; a program has a few dozen.
 * When the table is full, the oldest slot is reused (the count it held is
 * lost, which only costs a "suppressed" number, never a line). */
#define TW_RL_SLOTS      128

struct rl_slot {
	const char *fmt;        /* call site key; NULL = free */
	uint64_t last_ms;       /* when the last line of this site was printed */
	uint64_t suppressed;    /* repeats not printed since then */
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_progname[64] = "twinfs";       /* [log_lock] */
/* Read without the lock by tw_log_enabled: an int store is atomic enough for
 * a filter, and a stale level for one line is harmless. */
static volatile int log_level = TW_LOG_INFO;
static struct rl_slot rl_slots[TW_RL_SLOTS];    /* [log_lock] */

static const char *const level_names[] = { "ERR", "WARN", "INFO", "DEBUG" };

static int level_from_env(const char *s)
{
	static const char *const names[] = { "err", "warn", "info", "debug" };

	for (size_t i = 0; i < TW_ARRAY_SIZE(names); i++)
		if (strcasecmp(s, names[i]) == 0)
			return (int)i;
	/* Accept "error"/"warning" too: people type them. */
	if (strcasecmp(s, "error") == 0)
		return TW_LOG_ERR;
	if (strcasecmp(s, "warning") == 0)
		return TW_LOG_WARN;
	return -1;
}

void tw_log_init(const char *progname, enum tw_log_level level)
{
	const char *env = getenv("TWINFS_LOG_LEVEL");
	int lvl = (int)level;

	if (env && *env) {
		int e = level_from_env(env);

		if (e >= 0)
			lvl = e;
	}
	pthread_mutex_lock(&log_lock);
	if (progname) {
		const char *slash = strrchr(progname, '/');

		snprintf(log_progname, sizeof(log_progname), "%s",
			 slash ? slash + 1 : progname);
	}
	log_level = lvl;
	pthread_mutex_unlock(&log_lock);
}

bool tw_log_enabled(enum tw_log_level level)
{
	return (int)level <= log_level;
}

/* Format the prefix "TIME PROG[PID] LEVEL " into buf; returns its length. */
static size_t format_prefix_locked(char *buf, size_t size,
				   enum tw_log_level level)
{
	struct timespec ts;
	struct tm tm;
	size_t n;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	rc = snprintf(buf + n, size - n, ".%03ld %s[%ld] %s ",
		      ts.tv_nsec / 1000000, log_progname, (long)getpid(),
		      level_names[level]);
	if (rc < 0)
		return n;
	return TW_MIN(n + (size_t)rc, size - 1);
}

static void write_line(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(STDERR_FILENO, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return; /* stderr is gone: nowhere to report it */
		}
		buf += w;
		len -= (size_t)w;
	}
}

/* Emit one line; `suppressed` > 0 appends the repeat count. */
static void emit_locked(enum tw_log_level level, uint64_t suppressed,
			const char *fmt, va_list ap)
{
	char buf[TW_LOG_LINE_MAX];
	size_t n = format_prefix_locked(buf, sizeof(buf), level);
	int rc;

	rc = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	if (rc > 0)
		n = TW_MIN(n + (size_t)rc, sizeof(buf) - 1);
	if (suppressed > 0) {
		rc = snprintf(buf + n, sizeof(buf) - n,
			      " (%llu similar messages suppressed)",
			      (unsigned long long)suppressed);
		if (rc > 0)
			n = TW_MIN(n + (size_t)rc, sizeof(buf) - 1);
	}
	/* A message ending in '\n' must not produce an empty line. */
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	/* Truncated lines still end with a newline: room was kept by -1. */
	buf[n++] = '\n';
	write_line(buf, n);
}

void tw_log(enum tw_log_level level, const char *fmt, ...)
{
	va_list ap;
	int saved = errno; /* logging must not clobber the caller's errno */

	if (!tw_log_enabled(level))
		return;
	va_start(ap, fmt);
	pthread_mutex_lock(&log_lock);
	emit_locked(level, 0, fmt, ap);
	pthread_mutex_unlock(&log_lock);
	va_end(ap);
	errno = saved;
}

/* Find the slot of `fmt`, or claim a free one, or evict the stalest. */
static struct rl_slot *rl_slot_locked(const char *fmt)
{
	struct rl_slot *oldest = &rl_slots[0];

	for (size_t i = 0; i < TW_RL_SLOTS; i++) {
		struct rl_slot *s = &rl_slots[i];

		if (s->fmt == fmt)
			return s;
		if (!s->fmt) {
			s->fmt = fmt;
			s->last_ms = 0;
			s->suppressed = 0;
			return s;
		}
		if (s->last_ms < oldest->last_ms)
			oldest = s;
	}
	oldest->fmt = fmt;
	oldest->last_ms = 0;
	oldest->suppressed = 0;
	return oldest;
}

void tw_log_rl(enum tw_log_level level, const char *fmt, ...)
{
	struct rl_slot *slot;
	uint64_t now = tw_now_ms();
	va_list ap;
	int saved = errno;

	if (!tw_log_enabled(level))
		return;
	pthread_mutex_lock(&log_lock);
	slot = rl_slot_locked(fmt);
	if (slot->last_ms != 0 && now - slot->last_ms < TW_RL_WINDOW_MS) {
		slot->suppressed++;
	} else {
		va_start(ap, fmt);
		emit_locked(level, slot->suppressed, fmt, ap);
		va_end(ap);
		slot->suppressed = 0;
		/* now is never 0 in practice (monotonic since boot), but keep
		 * 0 meaning "never printed". */
		slot->last_ms = now ? now : 1;
	}
	pthread_mutex_unlock(&log_lock);
	errno = saved;
}
