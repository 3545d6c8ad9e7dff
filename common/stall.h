/* stall.h - noticing that a daemon's event loop was held (docs/OPERATIONS.md
 * "Loop stalls").  Every request, ping and timer of a daemon waits while
 * one callback of its loop runs; a callback that runs for a second looks,
 * from mgrd's monitor, exactly like a hung server.  A timer on the loop
 * due every TW_STALL_PERIOD_MS measures how late it runs: a tick late by
 * TW_STALL_WARN_MS or more is a stall, logged with what the loop's thread
 * did meanwhile (getrusage RUSAGE_THREAD), so that a log says whether it
 * computed, waited in the kernel (a slow disk) or was not given a CPU.
 * One watch per process, on the thread that runs the loop. */
#ifndef TWINFS_STALL_H
#define TWINFS_STALL_H

#include <stdint.h>

#include <uv.h>

#define TW_STALL_PERIOD_MS 100u
#define TW_STALL_WARN_MS   100u

/* What a thread did: getrusage's counters, microseconds and counts. */
struct tw_cpu {
	uint64_t user_us, sys_us;
	uint64_t waits;       /* voluntary context switches: it blocked */
	uint64_t preempts;    /* involuntary: it was made to give the CPU up */
};

/* The watch's state; all zeros before the first tick. */
struct tw_stall {
	uint64_t last_ms;     /* the last tick, monotonic; 0: none yet */
	struct tw_cpu cpu;    /* the thread's counters at the last tick */
	uint64_t count;       /* stalls seen */
	uint64_t max_ms;      /* the longest, ms late */
};

/* The tick at now_ms, with the thread's counters `cpu` then: how many ms
 * later than due it ran, when that is a stall (count and max_ms updated,
 * *spent = what the thread did since the last tick), else 0.  The first
 * tick only records.  Pure: the unit tests drive it. */
uint64_t tw_stall_note(struct tw_stall *s, uint64_t now_ms,
		       const struct tw_cpu *cpu, struct tw_cpu *spent);

/* Start the watch on loop, whose thread calls this (its counters are the
 * ones read).  Its timer does not keep the loop alive (uv_unref).  A
 * second call is a no-op; 0 or a negative errno. */
int tw_stall_start(uv_loop_t *loop);
/* Close the timer (before the loop's last run), when the watch is on
 * loop: a second loop of the process, which the watch never started on,
 * does not close the first one's timer from its own thread. */
void tw_stall_stop(uv_loop_t *loop);
/* The process's watch (zeros when not started), for /metrics. */
const struct tw_stall *tw_stall_get(void);

#endif
