/* dlease.h - name leases on directories this mount made (dlease.c); its
 * table, struct fc_dl, is in mount.h. */
#ifndef TWINFS_FC_DLEASE_H
#define TWINFS_FC_DLEASE_H

#include "mount.h"

/* on = false: never answers (leases granted anyway are not used). */
void fc_dl_init(struct fc_dl *dl, bool on);
void fc_dl_free(struct fc_dl *dl);
void fc_dl_log_stats(struct fc_dl *dl);
/* Any thread.  Taken before a request that may be granted or renew a
 * lease is sent (with the time), passed back with its answer (D4). */
uint64_t fc_dl_ticket(struct fc_dl *dl);
/* Whether name surely does not exist in parent (a valid lease, and not
 * a name this mount added). */
bool fc_dl_absent(struct fc_dl *dl, uint64_t parent, const char *name,
		  uint64_t now_ms);
/* Before a request that may add name to parent is sent (D1); returns
 * its ticket, taken after the count. */
uint64_t fc_dl_adding(struct fc_dl *dl, uint64_t parent, const char *name);
/* mgrd removed name from parent. */
void fc_dl_removed(struct fc_dl *dl, uint64_t parent, const char *name);
/* An Entry's lease_ms (on dir, a new directory) and parent_lease_ms. */
void fc_dl_granted(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket);
void fc_dl_renewed(struct fc_dl *dl, uint64_t dir, uint32_t lease_ms,
		   uint64_t sent_ms, uint64_t ticket);
/* Drop dir's lease (any thread); fc_dl_recall also tells mgrd (loop). */
void fc_dl_recalled(struct fc_dl *dl, uint64_t dir);
void fc_dl_recall(struct fc_client *cl, uint64_t dir);
/* Drop every lease: the connection to mgrd was made again. */
void fc_dl_drop_all(struct fc_dl *dl);
/* Unmount (loop): drop every lease and give it back to mgrd, so that
 * another mount's create there does not wait for its expiry; done(arg)
 * once mgrd answered every DIR_RETURN (or the send failed). */
void fc_dl_return_all(struct fc_client *cl, void (*done)(void *arg),
		      void *arg);

#endif
