/* twin.c - the RAID-1 twin policy: how mgrd moves an iod between up,
 * suspect, down and resyncing, and how iods and clients pick the twin that
 * orders writes and the twin that serves a read.
 *
 * The state diagram and the numbered R1 invariants are in raid.h; the tests
 * in test/unit/test_twin.c drive every event from every state of both twins
 * and check the invariants after each.  Pure functions: no I/O, no clock.
 */
#include "raid.h"

#include <errno.h>
#include <stddef.h>

bool r1_writable(const struct r1_twin *t)
{
	return t->state == R1_UP || t->state == R1_SUSPECT ||
	       t->state == R1_RESYNCING;
}

bool r1_readable(const struct r1_twin *t)
{
	/* R1 invariant 1: a twin that missed writes is never read. */
	return (t->state == R1_UP || t->state == R1_SUSPECT) &&
	       !t->needs_resync;
}

/* The twin failed.  If its partner can go on alone, the partner will take
 * writes this twin misses, so this twin needs a resync (R1 invariant 2).
 * If the partner cannot, the group stops taking writes and nothing is
 * missed: the flag keeps whatever value it had. */
static void demote(struct r1_twin *me, const struct r1_twin *other)
{
	me->state = R1_DOWN;
	if (r1_readable(other))
		me->needs_resync = true;
}

/* A twin came back (new incarnation, or answering again after being
 * demoted).  With a readable partner it always resyncs: even a twin that
 * never missed a ping may have lost writes that were in flight when it
 * restarted, and the partner's write-intent log names them.  Alone, it
 * serves only if it holds every acknowledged write. */
static void rejoin(struct r1_twin *me, struct r1_twin *other)
{
	if (r1_readable(other)) {
		me->state = R1_RESYNCING;
		me->needs_resync = true;
		return;
	}
	if (me->needs_resync) {
		/* Stale and alone: never promoted (only ACCEPT_STALE). */
		me->state = R1_DOWN;
		return;
	}
	me->state = R1_UP;
	/* It now takes writes alone; the partner will miss them. */
	if (other->state == R1_DOWN)
		other->needs_resync = true;
}

int r1_apply(struct r1_twin t[2], int which, enum r1_event ev,
	     uint32_t missed, uint32_t down_after)
{
	struct r1_twin *me = &t[which], *other = &t[!which];
	struct r1_twin old0 = t[0], old1 = t[1];

	if (which != 0 && which != 1)
		return -EINVAL;
	switch (ev) {
	case R1_EV_PING_OK:
		if (me->state == R1_SUSPECT)
			me->state = R1_UP;
		else if (me->state == R1_DOWN)
			rejoin(me, other);
		break;
	case R1_EV_PING_MISSED:
		if (me->state == R1_DOWN)
			break;
		if (missed >= down_after)
			demote(me, other);
		else if (me->state == R1_UP)
			me->state = R1_SUSPECT;
		break;
	case R1_EV_PROBE_FAILED:
		if (me->state != R1_DOWN)
			demote(me, other);
		break;
	case R1_EV_REGISTER:
		/* A restart of a live twin is a failure plus a rejoin. */
		if (me->state != R1_DOWN)
			demote(me, other);
		rejoin(me, other);
		break;
	case R1_EV_RESYNC_DONE:
		if (me->state != R1_RESYNCING)
			return -EINVAL;
		me->state = R1_UP;
		me->needs_resync = false;
		break;
	case R1_EV_ACCEPT_STALE:
		/* Only meaningful for a live stale twin whose partner cannot
		 * serve: the admin accepts that writes made while it was
		 * away may be lost. */
		if (!me->needs_resync || r1_readable(other))
			return -EINVAL;
		me->state = R1_UP;
		me->needs_resync = false;
		if (other->state == R1_DOWN)
			other->needs_resync = true;
		break;
	case R1_EV_REBUILD:
		/* The admin has a live twin copied again from its partner
		 * (twinfsctl verify found them different where no write-intent
		 * log marks anything).  It keeps taking writes while it is
		 * copied, as after a rejoin.  Its partner must be up, not
		 * merely readable: a suspect partner that then fails would
		 * leave the group with no twin to read. */
		if (other->state != R1_UP || other->needs_resync ||
		    (me->state != R1_UP && me->state != R1_SUSPECT))
			return -EINVAL;
		me->state = R1_RESYNCING;
		me->needs_resync = true;
		break;
	default:
		return -EINVAL;
	}
	return old0.state != t[0].state || old0.needs_resync != t[0].needs_resync ||
	       old1.state != t[1].state || old1.needs_resync != t[1].needs_resync;
}

int r1_write_primary(const struct r1_twin t[2], uint64_t ino, uint32_t column)
{
	bool r0 = r1_readable(&t[0]), r1 = r1_readable(&t[1]);

	if (r0 && r1)
		return r1_primary(ino, column);
	if (r0)
		return 0;
	if (r1)
		return 1;
	return -EIO;
}

bool r1_must_forward(const struct r1_twin t[2], int p)
{
	return r1_writable(&t[!p]);
}

int r1_read_pick(const struct r1_twin t[2], uint64_t ino, uint32_t column,
		 uint64_t unit)
{
	bool r0 = r1_readable(&t[0]), r1 = r1_readable(&t[1]);

	if (r0 && r1) {
		/* Prefer an up twin over a suspect one: a suspect twin may
		 * be hung and cost a whole request timeout. */
		if (t[0].state == R1_UP && t[1].state == R1_SUSPECT)
			return 0;
		if (t[1].state == R1_UP && t[0].state == R1_SUSPECT)
			return 1;
		return r1_read_twin(ino, column, unit);
	}
	if (r0)
		return 0;
	if (r1)
		return 1;
	return -EIO;
}

int r1_read_fallback(const struct r1_twin t[2], int failed)
{
	return r1_readable(&t[!failed]) ? !failed : -EIO;
}

enum r1_health r1_group_health(const struct r1_twin t[2])
{
	bool r0 = r1_readable(&t[0]), r1 = r1_readable(&t[1]);

	if (r0 && r1)
		return R1_HEALTHY;
	return (r0 || r1) ? R1_DEGRADED : R1_FAILED;
}

const char *r1_state_name(enum r1_state s)
{
	switch (s) {
	case R1_UP: return "up";
	case R1_SUSPECT: return "suspect";
	case R1_DOWN: return "down";
	case R1_RESYNCING: return "resyncing";
	}
	return "?";
}
