/* spin.h - waiting for an answer that comes quickly by polling the loop
 * instead of sleeping in it (docs/ARCHITECTURE.md "Waiting without
 * sleeping").  A process woken from epoll_wait by the answer pays a wakeup,
 * 6-8 us on a VM; one that polls its loop's epoll fd for a few us pays
 * nothing when the answer comes within them.  The policy adapts: it polls
 * only while most waits it measured (a moving score of those that came
 * within the budget) would have been caught, so a slow peer or an idle
 * caller costs no CPU.  One owner thread. */
#ifndef TWINFS_SPIN_H
#define TWINFS_SPIN_H

#include <stdbool.h>
#include <stdint.h>

/* The largest budget: past it a wakeup is the smaller cost. */
#define TW_SPIN_MAX_US 1000u

struct tw_spin {
	uint64_t budget_ns;   /* how long one wait may poll; 0: never */
	uint64_t since_ns;    /* when the armed wait began; 0: none armed */
	uint32_t score;       /* 0..TW_SPIN_SCORE_MAX: recent waits within
			       * the budget, the newest weighing 1/4 */
	uint32_t skipped;     /* waits not polled since the last one polled */
};

/* Every TW_SPIN_PROBE-th wait polls even when the average says not to: a
 * wait that is not polled is measured with the wakeup in it, which could
 * keep a short one above the budget for ever. */
#define TW_SPIN_PROBE 32u
#define TW_SPIN_SCORE_MAX 1024u   /* polls at half of it or more */

/* budget_us <= TW_SPIN_MAX_US; 0 turns polling off. */
void tw_spin_init(struct tw_spin *s, uint32_t budget_us);

/* A wait begins at now_ns (> 0), replacing one armed. */
void tw_spin_arm(struct tw_spin *s, uint64_t now_ns);

static inline bool tw_spin_armed(const struct tw_spin *s)
{
	return s->since_ns != 0;
}

/* The awaited event came at now_ns: whether its wait fit in the budget
 * joins the score, and the wait is disarmed.  Nothing when none is
 * armed. */
void tw_spin_done(struct tw_spin *s, uint64_t now_ns);

/* Of several requests in flight, the one awaited was answered at now_ns
 * and `left` are still in flight: tw_spin_done, then, when left > 0, a
 * wait armed from now_ns for the next answer. */
void tw_spin_landed(struct tw_spin *s, uint64_t left, uint64_t now_ns);

/* Until when to poll at now_ns: the armed wait's start plus the budget,
 * or 0 (do not poll) when none is armed, the budget is spent or 0, or
 * most recent waits were longer than the budget (but for a probe). */
uint64_t tw_spin_until(const struct tw_spin *s, uint64_t now_ns);

/* Polls fd (an epoll fd is readable when an event is ready) until it is
 * readable, true, or the monotonic clock reaches until_ns, false. */
bool tw_spin_poll(int fd, uint64_t until_ns);

#endif
