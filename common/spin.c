/* spin.c - adaptive polling before a loop sleeps; the policy is spin.h's. */
#include "spin.h"

#include <assert.h>
#include <poll.h>

#include "common.h"

void tw_spin_init(struct tw_spin *s, uint32_t budget_us)
{
	assert(budget_us <= TW_SPIN_MAX_US);
	/* Optimistic: the first waits poll and show what they are. */
	*s = (struct tw_spin){ .budget_ns = (uint64_t)budget_us * 1000u,
			       .score = TW_SPIN_SCORE_MAX };
}

void tw_spin_arm(struct tw_spin *s, uint64_t now_ns)
{
	assert(now_ns > 0);
	s->since_ns = now_ns;
}

static bool may_poll(const struct tw_spin *s)
{
	return s->score >= TW_SPIN_SCORE_MAX / 2 ||
	       s->skipped + 1 >= TW_SPIN_PROBE;
}

void tw_spin_done(struct tw_spin *s, uint64_t now_ns)
{
	bool within;

	if (!s->since_ns)
		return;
	if (may_poll(s))
		s->skipped = 0;
	else
		s->skipped++;
	within = now_ns <= s->since_ns + s->budget_ns;
	s->score = (3 * s->score + (within ? TW_SPIN_SCORE_MAX : 0)) / 4;
	s->since_ns = 0;
}

void tw_spin_landed(struct tw_spin *s, uint64_t left, uint64_t now_ns)
{
	tw_spin_done(s, now_ns);
	if (left > 0)
		tw_spin_arm(s, now_ns);
}

uint64_t tw_spin_until(const struct tw_spin *s, uint64_t now_ns)
{
	uint64_t until = s->since_ns + s->budget_ns;

	if (!s->since_ns || !s->budget_ns || now_ns >= until || !may_poll(s))
		return 0;
	return until;
}

bool tw_spin_poll(int fd, uint64_t until_ns)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	do {
		if (poll(&p, 1, 0) > 0)
			return true;
	} while (tw_now_ns() < until_ns);
	return false;
}
