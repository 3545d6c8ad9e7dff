/* map.c - the cluster map: every iod of the config with its group, twin
 * index and address (from the config, not journaled) and its state, UUID,
 * incarnation and resync flag (journaled as MGR_OP_MAP_IOD records, each
 * carrying the new epoch).  Only mgrd changes the map; the epoch starts at 1
 * and grows with every change.
 *
 * State changes follow raid's twin policy (r1_apply, raid.h): this file
 * only turns an event about one iod into the MAP_IOD records that describe
 * the result (mgr_map_event), and adds what the policy leaves to mgrd:
 *
 *   Group formation.  At the very first start no twin holds data, and the
 *   policy would make the first twin to register `up` alone and its partner
 *   stale forever.  So a twin whose partner has never registered is recorded
 *   (UUID, incarnation) but stays `down`; when the partner registers for the
 *   first time, both become `up` in one epoch.  Nothing was written before,
 *   so neither can be stale.  A group "has formed" once both twins have a
 *   UUID recorded; the monitor (monitor.c) leaves unformed groups alone.
 *
 *   Record order.  One event can change both twins (a twin rejoining alone
 *   goes `up` and marks its down partner needs_resync).  Each change is its
 *   own MAP_IOD record carrying the same new epoch; records that raise
 *   needs_resync come first, so a crash between them leaves a map that is
 *   only more conservative (a stale flag too many, never one too few).
 *
 *   Replaced directories.  An iod whose data directory was created by this
 *   start (IOD_REGISTER.fresh: a wiped or new disk) and carries a UUID other
 *   than the recorded one is accepted: its new UUID is recorded and it is
 *   stale (needs_resync), so it is never read or promoted before a full
 *   resync from its partner.  A differing UUID without `fresh` (another
 *   iod's or an old directory) is refused.
 *
 *   mgrd restarts.  At the first registration of an iod since mgrd started
 *   (`seen` is volatile), a new incarnation of an iod the journal calls up
 *   or suspect keeps that state: the whole cluster (or the group) was
 *   restarted together, and mgrd never let its partner complete a write
 *   alone while it was up in the map (a demotion is journaled before any
 *   iod acts on it), so it missed no acknowledged write.  What it may lack
 *   are writes its twin applied and could not forward (never acknowledged);
 *   the twin reports those (Report.missed_writes, server.c) and the iod is
 *   resynced.  From then on a new incarnation is a failure plus a rejoin
 *   (R1_EV_REGISTER).
 *
 * Pushing the map to clients and iods is server.c's job.
 */
#include "mgrd_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

void mgr_map_init(struct mgr_map *m, const struct tw_conf *conf)
{
	memset(m, 0, sizeof(*m));
	m->epoch = 1;
	m->n_iods = (uint32_t)conf->n_iods;
	m->n_groups = (uint32_t)conf->n_groups;
	m->stripe_size = conf->stripe_size;
	m->stripe_count = conf->stripe_count;
	for (uint32_t i = 0; i < m->n_iods; i++) {
		const struct tw_conf_iod *ci = &conf->iods[i];
		struct mgr_map_iod *mi = &m->iods[i];

		mi->id = (uint32_t)ci->id;
		mi->group = (uint32_t)ci->group;
		mi->twin_index = (uint32_t)ci->twin_index;
		snprintf(mi->host, sizeof(mi->host), "%s", ci->host);
		mi->port = ci->port;
		mi->state = MGR_IOD_DOWN;
	}
}

uint64_t mgr_map_max_subfile(const struct mgr_map *m)
{
	uint64_t lim = 0;

	for (uint32_t i = 0; i < m->n_iods; i++) {
		uint64_t v = m->iods[i].max_subfile;

		if (v != 0 && (lim == 0 || v < lim))
			lim = v;
	}
	return lim;
}

uint64_t mgr_map_file_limit(const struct mgr_map *m, const struct r0_layout *l)
{
	return r0_max_file_size(l, mgr_map_max_subfile(m));
}

struct mgr_map_iod *mgr_map_iod(struct mgr_map *m, uint32_t id)
{
	if (id == 0 || id > m->n_iods)
		return NULL;
	return &m->iods[id - 1];
}

struct mgr_map_iod *mgr_map_twin(struct mgr_map *m, uint32_t group, int t)
{
	for (uint32_t i = 0; i < m->n_iods; i++)
		if (m->iods[i].group == group &&
		    m->iods[i].twin_index == (uint32_t)t)
			return &m->iods[i];
	return NULL;
}

/* The group of `mi` as raid's twin policy sees it, indexed by twin index.
 * A missing partner (a config with a lone iod) counts as down and stale:
 * it can never be read or take writes. */
static void group_twins(struct mgr_map *m, const struct mgr_map_iod *mi,
			struct r1_twin t[2], struct mgr_map_iod *tw[2])
{
	for (int i = 0; i < 2; i++) {
		tw[i] = mgr_map_twin(m, mi->group, i);
		t[i].state = tw[i] ? (enum r1_state)tw[i]->state : R1_DOWN;
		t[i].needs_resync = tw[i] ? tw[i]->needs_resync : true;
	}
}

bool mgr_map_readable(const struct mgr_map_iod *mi)
{
	const struct r1_twin t = { (enum r1_state)mi->state,
				   mi->needs_resync };

	return r1_readable(&t);
}

struct mgr_map_iod *mgr_map_primary(struct mgr_map *m,
				    const struct r0_layout *l, uint64_t ino,
				    uint32_t column)
{
	struct mgr_map_iod *a = NULL, *tw[2];
	struct r1_twin t[2];
	int p;

	if (column >= l->stripe_count)
		return NULL;
	for (uint32_t i = 0; i < m->n_iods && !a; i++)
		if (m->iods[i].group == l->groups[column])
			a = &m->iods[i];
	if (!a)
		return NULL;
	group_twins(m, a, t, tw);
	p = r1_write_primary(t, ino, column);
	return p < 0 ? NULL : tw[p];
}

bool mgr_map_formed(struct mgr_map *m, const struct mgr_map_iod *mi)
{
	struct mgr_map_iod *o = mgr_map_twin(m, mi->group, !mi->twin_index);

	return mi->uuid_len && (!o || o->uuid_len);
}

static void op_for(const struct mgr_map *m, const struct mgr_map_iod *mi,
		   enum mgr_iod_state state, bool needs_resync,
		   struct mgr_op *op)
{
	memset(op, 0, sizeof(*op));
	op->type = MGR_OP_MAP_IOD;
	op->ino = mi->id;
	op->uuid = mi->uuid;
	op->uuid_len = mi->uuid_len;
	op->incarnation = mi->incarnation;
	op->iod_state = state;
	op->needs_resync = needs_resync;
	op->epoch = m->epoch + 1;
}

/* Turn the twins' new states into records, needs_resync raisers first. */
static int records(struct mgr_map *m, struct mgr_map_iod *tw[2],
		   const struct r1_twin t[2], struct mgr_op *ops)
{
	int n = 0;

	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 2; i++) {
			bool raises;

			if (!tw[i] || ((enum r1_state)tw[i]->state == t[i].state &&
				       tw[i]->needs_resync == t[i].needs_resync))
				continue;
			raises = t[i].needs_resync && !tw[i]->needs_resync;
			if (raises != (pass == 0))
				continue;
			op_for(m, tw[i], (enum mgr_iod_state)t[i].state,
			       t[i].needs_resync, &ops[n++]);
		}
	return n;
}

int mgr_map_event(struct mgr_map *m, uint32_t id, enum r1_event ev,
		  uint32_t missed, uint32_t down_after, struct mgr_op *ops)
{
	struct mgr_map_iod *mi = mgr_map_iod(m, id), *tw[2];
	struct r1_twin t[2];
	int rc;

	if (!mi)
		return -ENOENT;
	group_twins(m, mi, t, tw);
	rc = r1_apply(t, (int)mi->twin_index, ev, missed, down_after);
	if (rc <= 0)
		return rc;
	return records(m, tw, t, ops);
}

int mgr_map_register(struct mgr_map *m, uint32_t id, const void *uuid,
		     uint32_t uuid_len, uint64_t incarnation,
		     struct mgr_op *ops)
{
	return mgr_map_register_ex(m, id, uuid, uuid_len, incarnation, false,
				   ops);
}

int mgr_map_register_ex(struct mgr_map *m, uint32_t id, const void *uuid,
			uint32_t uuid_len, uint64_t incarnation, bool fresh,
			struct mgr_op *ops)
{
	struct mgr_map_iod *mi = mgr_map_iod(m, id), *o, *tw[2];
	struct r1_twin t[2];
	bool replaced = false;
	int n;

	if (!mi)
		return -ENOENT;
	if (uuid_len == 0 || uuid_len > MGR_UUID_MAX)
		return -EINVAL;
	if (mi->uuid_len &&
	    (mi->uuid_len != uuid_len || memcmp(mi->uuid, uuid, uuid_len))) {
		/* A directory with another identity is refused; a new one
		 * (wiped or replaced disk) replaces the recorded identity and
		 * holds nothing: it needs a full resync (see the top). */
		if (!fresh)
			return -EEXIST;
		replaced = true;
	}
	/* The same process again (it reconnected, or mgrd restarted): not
	 * an event.  If it is down, the monitor's next answered ping brings
	 * it back. */
	if (!replaced && mi->uuid_len && mi->incarnation == incarnation) {
		mi->seen = true;
		return 0;
	}
	o = mgr_map_twin(m, mi->group, !mi->twin_index);
	if (!replaced && mi->uuid_len && !mi->seen &&
	    (mi->state == MGR_IOD_UP || mi->state == MGR_IOD_SUSPECT)) {
		/* First registration since mgrd started: keep the journaled
		 * state, record the new incarnation (see the top). */
		mi->seen = true;
		op_for(m, mi, mi->state, mi->needs_resync, &ops[0]);
		ops[0].incarnation = incarnation;
		return 1;
	}
	mi->seen = true;
	group_twins(m, mi, t, tw);
	if (o && !o->uuid_len) {
		/* Formation: wait for the partner's first registration. */
		op_for(m, mi, MGR_IOD_DOWN, mi->needs_resync, &ops[0]);
		ops[0].uuid = uuid;
		ops[0].uuid_len = uuid_len;
		ops[0].incarnation = incarnation;
		return 1;
	}
	if (o && !mi->uuid_len && o->state == MGR_IOD_DOWN &&
	    !o->needs_resync && !mi->needs_resync) {
		/* The partner waits for us: the group forms, both up. */
		op_for(m, o, MGR_IOD_UP, false, &ops[0]);
		op_for(m, mi, MGR_IOD_UP, false, &ops[1]);
		ops[1].uuid = uuid;
		ops[1].uuid_len = uuid_len;
		ops[1].incarnation = incarnation;
		return 2;
	}
	/* A new incarnation: a failure plus a rejoin (R1_EV_REGISTER).  A
	 * replaced directory is stale whatever it was: never promoted alone,
	 * and resynced in full when its partner is readable. */
	if (replaced)
		t[mi->twin_index].needs_resync = true;
	if (r1_apply(t, (int)mi->twin_index, R1_EV_REGISTER, 0, 1) < 0)
		return -EINVAL;
	n = records(m, tw, t, ops);
	for (int i = 0; i < n; i++)
		if (ops[i].ino == id) {
			ops[i].uuid = uuid;
			ops[i].uuid_len = uuid_len;
			ops[i].incarnation = incarnation;
			return n;
		}
	/* The states did not change (e.g. a stale twin alone stays down):
	 * the new identity is still recorded. */
	assert(n < 2);
	op_for(m, mi, mi->state, mi->needs_resync, &ops[n]);
	ops[n].uuid = uuid;
	ops[n].uuid_len = uuid_len;
	ops[n].incarnation = incarnation;
	return n + 1;
}
