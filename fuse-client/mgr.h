/* mgr.h - the client's side of mgrd (mgr.c): sessions, numbered requests
 * with retransmission, the cluster map and routing to the iods, monitor
 * pings, failure reports. */
#ifndef TWINFS_FC_MGR_H
#define TWINFS_FC_MGR_H

#include "mount.h"

#define FC_TAKEOVER_POLL_MS    200          /* map poll while a twin fails */

struct fc_map_waiter {
	struct fc_map_waiter *next;
	void (*cb)(void *arg, int status);
	void *arg;
};

/* The HELLO of a connection to mgrd (control or not) or an iod. */
void fc_mgr_fill_hello(struct fc_client *cl, Twinfs__Hello *h, bool control);
/* The HELLO to an iod: our session, which the caps and the ticket we send
 * it must name (proto/FORMAT.md "Capabilities", "Tickets"), never the
 * session's secret, which is mgrd's business alone. */
void fc_mgr_fill_iod_hello(struct fc_client *cl, Twinfs__Hello *h);
/* Create the mgrd peers (data and control); no connection yet. */
int fc_mgr_init(struct fc_client *cl);
/* Send a request to mgrd with a fresh seq, retransmitting with the same seq
 * across transport errors until mgr_timeout (or timeout_ms when nonzero)
 * passes.  ctx_field: the body's ctx member (NULL for bodies without one).
 * op: the FUSE request's op (context, interrupts) or NULL.  cb runs exactly
 * once. */
void fc_mgr_send(struct fc_client *cl, struct fc_mgr_call *mc, uint16_t type,
		 ProtobufCMessage *body, Twinfs__Ctx **ctx_field,
		 struct fc_op *op, uint32_t timeout_ms, fc_mgr_cb cb, void *arg);
/* The RELEASE of a handle that never read, wrote or allocated: sent
 * with this mount's next mgrd request, or FC_REL_LATER_MS from now,
 * whichever comes first (mgr.c "Releases sent later").  0, or -ENOMEM
 * (then send it yourself). */
int fc_mgr_release_later(struct fc_client *cl, uint64_t ino, uint64_t fh);
/* Send every release queued by fc_mgr_release_later now. */
void fc_mgr_release_flush(struct fc_client *cl);
/* Fail queued retransmissions (stopping). */
void fc_mgr_shutdown(struct fc_client *cl);
/* Answer -EINTR for every mgrd call whose FUSE request was interrupted:
 * the waiting ends now, a late reply is dropped. */
void fc_mgr_interrupts(struct fc_client *cl);
bool fc_is_transport_err(int status);
/* An mgrd call failed so: send it again (to whichever mgrd is active):
 * a transport error, or -EREMOTE (an mgrd that is not, or no longer, the
 * active). */
bool fc_mgr_retryable(int status);
void fc_mgr_start_monitor(struct fc_client *cl);

/* Map (mgr.c): install a ClusterMap (creates/updates iod peers). */
void fc_map_install(struct fc_client *cl, const Twinfs__ClusterMap *map);
/* Refresh the map with GET_MAP; concurrent refreshes share one request.
 * w (caller-owned, cb and arg set; may be NULL) is called back exactly
 * once, later, with 0 or -errno; it must live until then. */
void fc_map_refresh(struct fc_client *cl, struct fc_map_waiter *w);
/* The iod to send writes of column `column` of ino to (its primary, or the
 * surviving twin); NULL when neither twin can take writes. */
struct fc_iod *fc_map_write_iod(struct fc_client *cl, uint64_t ino,
				uint32_t group, uint32_t column);
/* The twin to read unit `unit` from; `avoid` (may be NULL) is one that just
 * failed.  NULL if no twin is readable. */
struct fc_iod *fc_map_read_iod(struct fc_client *cl, uint64_t ino,
			       uint32_t group, uint32_t column, uint64_t unit,
			       const struct fc_iod *avoid);
/* The group's twins and their states and flags as one number (changes
 * whenever the map changes anything about the group); *settled is false
 * while a twin is suspect (mgrd has not decided yet). */
uint32_t fc_group_sig(struct fc_client *cl, uint32_t group, bool *settled);
/* Whether neither twin of the group may serve (r1_group_health FAILED). */
bool fc_group_failed(struct fc_client *cl, uint32_t group);
/* "group 1: iod 3 (...) is down, iod 4 (...) is down and stale (epoch 9)" */
const char *fc_group_desc(struct fc_client *cl, uint32_t group, char *buf,
			  size_t len);
/* Tell mgrd that iod failed on the data path (or missed a ping) with
 * status; rate-limited per iod.  mgrd probes it and demotes it only if the
 * probe fails. */
void fc_report(struct fc_client *cl, struct fc_iod *iod, int status);
/* "iod 3 (127.0.0.1:7503)" */
const char *fc_iod_name(const struct fc_iod *iod, char *buf, size_t len);
/* Human cause of a data-path error: "timed out after 5 s", "Connection
 * refused", ... into buf. */
const char *fc_cause(struct fc_client *cl, int status, char *buf, size_t len);
/* The same for a call whose deadline was timeout_ms ("timed out after
 * 200 ms": a ping's is the shorter of the interval and the timeout). */
const char *fc_cause_after(int status, uint32_t timeout_ms, char *buf,
			   size_t len);

#endif
