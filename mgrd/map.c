/* map.c - the cluster map: every iod of the config with its group, twin
 * index and address (from the config, not journaled) and its state, UUID,
 * incarnation and resync flag (journaled as MGR_OP_MAP_IOD records, each
 * carrying the new epoch).  Only mgrd changes the map; the epoch starts at 1
 * and grows with every change.
 *
 * For now an iod is `down` until it registers and `up` from then on;
 * failure detection, `suspect` and resync are a later issue (DESIGN.md
 * "Twins").  Pushing the map to clients is server.c's job.
 */
#include "mgrd_int.h"

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

struct mgr_map_iod *mgr_map_primary(struct mgr_map *m,
				    const struct r0_layout *l, uint64_t ino,
				    uint32_t column)
{
	int p = r1_primary(ino, column);
	struct mgr_map_iod *a, *b;

	if (column >= l->stripe_count)
		return NULL;
	a = mgr_map_twin(m, l->groups[column], p);
	b = mgr_map_twin(m, l->groups[column], !p);
	if (a && a->state == MGR_IOD_UP)
		return a;
	if (b && b->state == MGR_IOD_UP)
		return b;
	return NULL;
}

int mgr_map_register(struct mgr_map *m, uint32_t id, const void *uuid,
		     uint32_t uuid_len, uint64_t incarnation,
		     struct mgr_op *op)
{
	struct mgr_map_iod *mi = mgr_map_iod(m, id);

	if (!mi)
		return -ENOENT;
	if (uuid_len == 0 || uuid_len > MGR_UUID_MAX)
		return -EINVAL;
	if (mi->uuid_len &&
	    (mi->uuid_len != uuid_len || memcmp(mi->uuid, uuid, uuid_len)))
		return -EEXIST;
	if (mi->uuid_len && mi->state == MGR_IOD_UP &&
	    mi->incarnation == incarnation)
		return 0;
	memset(op, 0, sizeof(*op));
	op->type = MGR_OP_MAP_IOD;
	op->ino = id;
	op->uuid = uuid;
	op->uuid_len = uuid_len;
	op->incarnation = incarnation;
	op->iod_state = MGR_IOD_UP;
	op->needs_resync = mi->needs_resync;
	op->epoch = m->epoch + 1;
	return 1;
}
