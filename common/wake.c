/* wake.c - the cost of waking a thread on an idle CPU (wake.h).
 *
 * Two threads, each pinned to its own CPU of the process's mask: the
 * sleeper blocks in read(2) on an eventfd; the waker, after busy-waiting
 * TW_WAKE_GAP_US (so that its own CPU does not halt and add a timer's
 * slack), notes the time, writes the eventfd and waits for the sleeper's
 * answer on a second one.  The sleeper notes when it runs; the difference
 * is one wakeup: the eventfd write, the IPI, the idle exit, the switch.
 * Between rounds the waker sleeps, so that a round that met other work
 * on the CPUs is followed by one that may not.
 *
 * The mount waits for the probe, so it must end whatever the CPUs do: the
 * waker waits for each answer at most TW_WAKE_WAIT_MS, and a sleeper that
 * cannot run (its CPU held by a real-time task) is left behind, detached,
 * with what it uses. */
#include "wake.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define WAKE_STOP 2u   /* the eventfd value that ends the sleeper */

struct wake_run {
	int go, back;            /* eventfds: waker -> sleeper, and back */
	int cpu_waker, cpu_sleeper;
	uint64_t woke_ns;        /* the sleeper's clock when it ran */
	uint64_t samples[TW_WAKE_ROUNDS][TW_WAKE_SAMPLES];
	int err;                 /* the waker's first failure, -errno */
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* One 8-byte eventfd transfer, retried on EINTR. */
static int efd_io(int fd, uint64_t *v, bool out)
{
	ssize_t n;

	do {
		n = out ? write(fd, v, sizeof(*v)) : read(fd, v, sizeof(*v));
	} while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(*v))
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* Read fd once it is readable, waiting at most TW_WAKE_WAIT_MS: 0,
 * -ETIMEDOUT or -errno. */
static int efd_take(int fd, uint64_t *v)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do {
		n = poll(&p, 1, TW_WAKE_WAIT_MS);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 0 ? -ETIMEDOUT : efd_io(fd, v, false);
}

static void *sleeper(void *arg)
{
	struct wake_run *w = arg;
	uint64_t v;

	/* Unpinned, it would still answer, only less truthfully. */
	(void)pin(w->cpu_sleeper);
	v = 1;   /* ready: the first sample finds it pinned and waiting */
	if (efd_io(w->back, &v, true) < 0)
		return NULL;
	for (;;) {
		if (efd_io(w->go, &v, false) < 0 || v >= WAKE_STOP)
			break;
		__atomic_store_n(&w->woke_ns, tw_now_ns(), __ATOMIC_RELEASE);
		v = 1;
		if (efd_io(w->back, &v, true) < 0)
			break;
	}
	return NULL;
}

static void *waker(void *arg)
{
	struct wake_run *w = arg;
	uint64_t v, t0, until;
	unsigned i;
	int rc;

	rc = pin(w->cpu_waker);
	if (rc == 0)
		rc = efd_take(w->back, &v);   /* the sleeper is ready */
	for (i = 0; rc == 0 && i < TW_WAKE_ROUNDS * TW_WAKE_SAMPLES; i++) {
		if (i && i % TW_WAKE_SAMPLES == 0)
			usleep(TW_WAKE_PAUSE_MS * 1000u);
		until = tw_now_ns() + (uint64_t)TW_WAKE_GAP_US * 1000u;
		while (tw_now_ns() < until)
			;
		t0 = tw_now_ns();
		v = 1;
		rc = efd_io(w->go, &v, true);
		if (rc == 0)
			rc = efd_take(w->back, &v);
		if (rc == 0) {
			uint64_t t1 = __atomic_load_n(&w->woke_ns,
						      __ATOMIC_ACQUIRE);
			w->samples[i / TW_WAKE_SAMPLES][i % TW_WAKE_SAMPLES] =
				t1 > t0 ? t1 - t0 : 0;
		}
	}
	w->err = rc;
	v = WAKE_STOP;
	if (efd_io(w->go, &v, true) < 0 && !w->err)
		w->err = -EIO;
	return NULL;
}

/* The first two CPUs the process may run on; -ENOTSUP with fewer. */
static int two_cpus(int *a, int *b)
{
	cpu_set_t set;
	int cpu, found = 0;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -errno;
	for (cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		*(found ? b : a) = cpu;
		found++;
	}
	return found == 2 ? 0 : -ENOTSUP;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

bool tw_wake_is_cheap(int probe_rc, uint64_t ns)
{
	if (probe_rc == -ENOTSUP)
		return true;
	return probe_rc == 0 && ns <= TW_WAKE_CHEAP_NS;
}

uint64_t tw_wake_median(uint64_t *samples, unsigned n)
{
	if (!n)
		return 0;
	qsort(samples, n, sizeof(*samples), cmp_u64);
	return samples[n / 2];
}

uint64_t tw_wake_figure(uint64_t rounds[][TW_WAKE_SAMPLES], unsigned n)
{
	uint64_t least = 0;
	unsigned r;

	for (r = 0; r < n; r++) {
		uint64_t m = tw_wake_median(rounds[r], TW_WAKE_SAMPLES);

		if (r == 0 || m < least)
			least = m;
	}
	return least;
}

/* Join t, waiting at most TW_WAKE_WAIT_MS; false: detached instead. */
static bool join_or_leave(pthread_t t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)(TW_WAKE_WAIT_MS % 1000u) * 1000000L;
	ts.tv_sec += TW_WAKE_WAIT_MS / 1000u + ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	if (pthread_timedjoin_np(t, NULL, &ts) == 0)
		return true;
	pthread_detach(t);
	return false;
}

int tw_wake_probe(uint64_t *ns)
{
	struct wake_run *w;
	pthread_t ts, tw;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->go = w->back = -1;
	rc = two_cpus(&w->cpu_waker, &w->cpu_sleeper);
	if (rc < 0)
		goto out;
	w->go = eventfd(0, EFD_CLOEXEC);
	if (w->go < 0 || (w->back = eventfd(0, EFD_CLOEXEC)) < 0) {
		rc = -errno;
		goto out;
	}
	rc = -pthread_create(&ts, NULL, sleeper, w);
	if (rc < 0)
		goto out;
	rc = -pthread_create(&tw, NULL, waker, w);
	if (rc < 0) {
		uint64_t v = WAKE_STOP;

		(void)efd_io(w->go, &v, true);
	} else {
		pthread_join(tw, NULL);   /* it ends: every wait is bounded */
		rc = w->err;
	}
	if (!join_or_leave(ts))
		return rc < 0 ? rc : -ETIMEDOUT;   /* w is the sleeper's now */
	if (rc == 0)
		*ns = tw_wake_figure(w->samples, TW_WAKE_ROUNDS);
out:
	if (w->go >= 0)
		close(w->go);
	if (w->back >= 0)
		close(w->back);
	free(w);
	return rc;
}
