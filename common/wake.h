/* wake.h - what waking a thread on another, idle CPU costs here
 * (docs/ARCHITECTURE.md "Threads and ownership").  A request handed from
 * one thread to another pays that wakeup: about 3 us where an idle CPU
 * polls before it halts, 20-30 us on a VM whose idle vCPUs halt at once
 * (docs/OPERATIONS.md "CPU idle latency").  Which of the client's ways of
 * reading /dev/fuse is faster turns on it, so the mount measures it. */
#ifndef TWINFS_WAKE_H
#define TWINFS_WAKE_H

#include <stdbool.h>
#include <stdint.h>

/* The probe: TW_WAKE_ROUNDS rounds of TW_WAKE_SAMPLES wakeups, each
 * TW_WAKE_GAP_US after the previous answer (the gap of a program's
 * requests in a stream: long enough that the woken CPU has gone idle,
 * short enough that one that polls before halting still polls), the
 * rounds TW_WAKE_PAUSE_MS apart; about 40 ms in all.  A round's median
 * is what an idle CPU costs unless something else held the CPUs then
 * (daemons starting beside a mount: a busy CPU costs about 20 us, idle
 * setting or not); the least of the rounds' medians is the figure. */
#define TW_WAKE_ROUNDS   4u
#define TW_WAKE_SAMPLES 16u
#define TW_WAKE_GAP_US  50u
#define TW_WAKE_PAUSE_MS 10u
/* The longest wait for one answer (and for the sleeper to end): past it
 * the probe gives up with -ETIMEDOUT. */
#define TW_WAKE_WAIT_MS 200u

/* A figure at or below which a wakeup counts as cheap: between the
 * 3 us of an idle CPU that polls and the 20-30 us of one that halts or
 * is busy, and above the 6-8 us that favoured the I/O thread's reads
 * (test/bench/RESULTS.md "Session 41"). */
#define TW_WAKE_CHEAP_NS 10000u

/* Wake a thread pinned to one allowed CPU from a thread pinned to
 * another, as above, and set *ns to the least round median of the time
 * from the eventfd write to the sleeper running.  Returns 0; -ENOTSUP
 * when the process may use only one CPU (no other CPU to wake: a
 * handoff costs a context switch, never an idle exit); -ETIMEDOUT when
 * an answer took longer than TW_WAKE_WAIT_MS; or -errno when a thread,
 * an eventfd or the pinning fails. */
int tw_wake_probe(uint64_t *ns);

/* Whether a handoff between threads is cheap here, from the probe's
 * result: a figure at or below TW_WAKE_CHEAP_NS, or one CPU only (the
 * handoff is a context switch, no idle exit).  A probe that failed says
 * no: the choice that loses less where it is wrong (RESULTS.md "Session
 * 54").  Pure. */
bool tw_wake_is_cheap(int probe_rc, uint64_t ns);

/* The median of n samples (sorts them in place); 0 when n is 0.  Pure. */
uint64_t tw_wake_median(uint64_t *samples, unsigned n);
/* The probe's figure from n rounds of samples: the least of the rounds'
 * medians (sorts each round in place); 0 when n is 0.  Pure. */
uint64_t tw_wake_figure(uint64_t rounds[][TW_WAKE_SAMPLES], unsigned n);

#endif
