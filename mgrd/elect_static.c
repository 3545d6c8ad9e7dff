/* elect_static.c - a STAND-IN for the election module (mgrd/elect.h),
 * for testing replication before the election exists: mgrd 1 of a pair is
 * active from its start in term 1 and never loses its lease, mgrd 2 is
 * its standby and never takes over; marking the standby stale succeeds at
 * once (no voters are asked).  Nothing here is safe against two actives:
 * the election module replaces this file.
 */
#include "elect.h"
#include "server_int.h"

#include <errno.h>

static struct {
	struct mgr_server *s;
	bool active;
} el;

int mgr_elect_start(struct mgr_server *s)
{
	el.s = s;
	el.active = s->conf->mgrd_self == 1;
	if (el.active) {
		tw_info("mgrd: election stand-in (elect_static.c): mgrd 1 is "
			"active in term 1");
		mgr_server_became_active(s, 1);
	}
	return 0;
}

void mgr_elect_stop(void)
{
	el.s = NULL;
	el.active = false;
}

bool mgr_elect_is_active(void)
{
	return el.active;
}

uint64_t mgr_elect_term(void)
{
	return 1;
}

void mgr_elect_peer_state(bool peer_alive, bool peer_in_sync)
{
	(void)peer_alive;
	(void)peer_in_sync;
}

int mgr_elect_mark_standby_stale(void (*done)(int status, void *arg),
				 void *arg)
{
	if (!el.active)
		return -EPERM;
	done(0, arg);
	return 0;
}

void mgr_elect_standby_fresh(void)
{
}

int mgr_elect_step_down(void)
{
	return -EOPNOTSUPP;
}
