/* statahead.h - lookups answered from directory listings fetched ahead
 * (statahead.c); its table, struct fc_sa, is in mount.h. */
#ifndef TWINFS_FC_STATAHEAD_H
#define TWINFS_FC_STATAHEAD_H

#include "mount.h"

#define FC_SA_BATCH            1024         /* statahead: entries per fetch */
#define FC_SA_DIR_BATCHES      4            /* ... batches per directory */
#define FC_SA_MIN_MISSES       2            /* ... lookups that start it */
#define FC_SA_BACKOFF_MIN_MS   500          /* ... pause after a waste */
#define FC_SA_BACKOFF_MAX_MS   16000

/* A fetch fc_sa_find decided; dir 0: none. */
struct fc_sa_fetch {
	uint64_t dir, cookie, gen, sent_ms, seq, rm_seq;
};

enum fc_sa_result { FC_SA_MISS, FC_SA_HIT };

/* ttl_ms = min(entry_timeout, attr_timeout); 0 turns statahead off. */
void fc_sa_init(struct fc_sa *sa, uint64_t ttl_ms);
void fc_sa_free(struct fc_sa *sa);
/* Any thread: this mount changed (or may have changed) names or
 * attributes at mgrd; nothing fetched before is used. */
void fc_sa_changed(struct fc_sa *sa);
/* Any thread: this mount removes (or removed) name from dir (UNLINK,
 * RMDIR), at mgrd; called when the request is sent and when it ends. */
void fc_sa_removed(struct fc_sa *sa, uint64_t dir, const char *name);
/* Whether an mgrd request of this type may change names or attributes
 * in a way fc_sa_removed does not cover. */
bool fc_mgr_type_changes(uint16_t type);
/* Look name up in what was fetched of parent.  FC_SA_HIT fills *a and
 * *age_ms (how old the answer is).  In any case, f->dir != 0 asks the caller to start that fetch
 * (fc_sa_start). */
enum fc_sa_result fc_sa_find(struct fc_sa *sa, uint64_t parent,
			     const char *name, uint64_t now_ms,
			     struct fc_attr *a, uint64_t *age_ms,
			     struct fc_sa_fetch *f);
/* A fetch ended: keeps reply (a ReaddirReply) or frees it. */
void fc_sa_fetched(struct fc_sa *sa, const struct fc_sa_fetch *f, int status,
		   struct wire_msg *reply, uint64_t now_ms);
/* Log how many lookups were answered ahead (at unmount). */
void fc_sa_log_stats(struct fc_sa *sa);
/* FUSE thread: send the READDIR of f from the loop, as the caller of req
 * (mgrd checks read permission: a caller who may only search the
 * directory gets no listing, and lookups go to mgrd). */
void fc_sa_start(struct fc_client *cl, const struct fc_sa_fetch *f,
		 fuse_req_t req);

#endif
