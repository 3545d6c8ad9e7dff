/* resync_cursor.c - where a resync copy may resume, so that it survives
 * the restart of either iod or mgrd (docs/ARCHITECTURE.md "Twins").
 *
 * The copy (resync.c) queues forwarded messages to the target in copy
 * order; each carries the copy position it completes: (ino, column, off)
 * means every subfile before (ino, column) in listing order, and that
 * subfile's bytes below off (UINT64_MAX: all of it, size included), are
 * queued at or before this message.  The target applies forwards in queue
 * order (twin.c T1) but its replies may come back in any order, so the
 * position is *done* only when its message and every message queued
 * before it have been acknowledged: a FIFO of positions, popped from the
 * head while acknowledged.  The done position is what mgrd journals and
 * hands back in Resync.resume_*; it never includes bytes the target might
 * not hold.
 *
 * It does not decide what to copy and owns no I/O.
 */
#include "iod_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int iod_rs_cursor_init(struct iod_rs_cursor *c, uint32_t cap)
{
	memset(c, 0, sizeof(*c));
	c->slots = calloc(cap, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	c->cap = cap;
	return 0;
}

void iod_rs_cursor_free(struct iod_rs_cursor *c)
{
	free(c->slots);
	c->slots = NULL;
}

uint32_t iod_rs_cursor_room(const struct iod_rs_cursor *c)
{
	return c->cap - (uint32_t)(c->tail - c->head);
}

uint64_t iod_rs_cursor_push(struct iod_rs_cursor *c, const struct iod_rs_pos *p)
{
	struct iod_rs_slot *s;

	assert(iod_rs_cursor_room(c) > 0);
	s = &c->slots[c->tail % c->cap];
	s->pos = *p;
	s->acked = false;
	return c->tail++;
}

void iod_rs_cursor_set_off(struct iod_rs_cursor *c, uint64_t id, uint64_t off)
{
	assert(id >= c->head && id < c->tail);
	c->slots[id % c->cap].pos.off = off;
}

bool iod_rs_cursor_ack(struct iod_rs_cursor *c, uint64_t id)
{
	bool moved = false;

	assert(id >= c->head && id < c->tail);
	c->slots[id % c->cap].acked = true;
	while (c->head < c->tail && c->slots[c->head % c->cap].acked) {
		c->done = c->slots[c->head % c->cap].pos;
		c->has_done = true;
		c->head++;
		moved = true;
	}
	return moved;
}
