/* cap.h - the cache of data-path capabilities (cap.c). */
#ifndef TWINFS_FC_CAP_H
#define TWINFS_FC_CAP_H

#include "mount.h"

/* Loop thread, all of them (proto/FORMAT.md "Capabilities"). */
struct fc_cap_waiter {
	struct fc_cap_waiter *next;
	void (*cb)(void *arg, int status);   /* 0 or mgrd's -errno */
	void *arg;
};
/* A cap from an OPEN or create reply (absent: nothing); op: the opener,
 * whose uid and gid later fetches name (may be NULL). */
void fc_cap_take(struct fc_client *cl, uint64_t ino, bool write,
		 const ProtobufCBinaryData *cap, uint32_t lifetime_ms,
		 const struct fc_op *op);
/* Fetch a cap for ino (write rights when write) with MSG_CAP; w (may be
 * NULL; caller-owned, alive until called) is called back exactly once,
 * later, also when the fetch failed (the iod then refuses again). */
void fc_cap_fetch(struct fc_client *cl, uint64_t ino, bool write,
		  const struct fc_op *op, struct fc_cap_waiter *w);
/* Point *out at the cached cap for ino if it is usable for write (out
 * borrows the cache: use it before returning to the loop); renews it in
 * the background past half its lifetime.  false, *out empty: none. */
bool fc_cap_attach(struct fc_client *cl, uint64_t ino, bool write,
		   ProtobufCBinaryData *out);
/* Caps are in use and none usable for write is cached: fetch first. */
bool fc_cap_missing(struct fc_client *cl, uint64_t ino, bool write);
/* An iod refused ino's cap as expired: never attach it again. */
void fc_cap_drop(struct fc_client *cl, uint64_t ino);
/* Free the cache (after the loop stopped). */
void fc_caps_free(struct fc_client *cl);

#endif
