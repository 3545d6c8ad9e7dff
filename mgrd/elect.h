/* elect.h - who of an mgrd pair is active (docs/ARCHITECTURE.md
 * "Metadata"): the interface between the election module and the rest of
 * mgrd.  The election module decides; server.c and repl.c (replication)
 * call it and implement the two callbacks at the end.  With one mgrd
 * (n_mgrds 1) none of it runs: that mgrd is always active.
 */
#ifndef TWINFS_MGRD_ELECT_H
#define TWINFS_MGRD_ELECT_H

#include <stdbool.h>
#include <stdint.h>

struct mgr_server;

/* After journal replay; 0 or -errno. */
int mgr_elect_start(struct mgr_server *s);
void mgr_elect_stop(void);
/* Holds a valid lease now. */
bool mgr_elect_is_active(void);
uint64_t mgr_elect_term(void);
/* From replication: the peer answers, and is in sync (has acked every
 * record this mgrd closed; on the standby: it is caught up). */
void mgr_elect_peer_state(bool peer_alive, bool peer_in_sync);
/* Before the active replies to anything the standby has not acked: a
 * quorum marks the standby stale; done(0) then, done(-errno) when that
 * failed (the caller holds its replies and tries again).  0, or -errno
 * (done never runs). */
int mgr_elect_mark_standby_stale(void (*done)(int status, void *arg),
				 void *arg);
/* The standby acked everything again: the stale mark may go. */
void mgr_elect_standby_fresh(void);
/* Switchover may go: the standby is in sync and a quorum of voters has
 * renewed since its stale mark was cleared, so it can win. */
bool mgr_elect_standby_ready(void);
/* Switchover: stop serving at once, release the lease at every voter so
 * the in-sync standby wins without waiting for it to run out, and end
 * the process (mgr_server_lost_lease) STEP_DOWN_MS later. */
int mgr_elect_step_down(void);

/* Callbacks into server.c. */
void mgr_server_became_active(struct mgr_server *s, uint64_t term);
void mgr_server_lost_lease(struct mgr_server *s);

#endif
