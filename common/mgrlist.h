/* mgrlist.h - the addresses of an mgrd (one, or a pair) and which one a
 * client, an iod or twinfsctl tries next (docs/ARCHITECTURE.md "Metadata",
 * the pair: everyone follows the active).  Pure: no I/O, no clock; the
 * caller makes the attempts and waits the delays this returns.
 *
 * Rule: try the listed addresses in order.  When an attempt fails (no
 * connection, no answer, or HELLO refused with -EREMOTE because that mgrd
 * is not the active), go to the active it named (HelloReply.active_addr)
 * if it named one, else to the next listed address.  The first move after
 * an answer is immediate; every further failure before the next answer
 * waits twice as long as the one before, from TW_MGRLIST_BACKOFF_MIN_MS up
 * to the caller's bound: two mgrds naming each other never make a hot
 * loop.
 */
#ifndef TWINFS_MGRLIST_H
#define TWINFS_MGRLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define TW_MGRLIST_MAX            2      /* addresses a list may hold */
#define TW_MGRLIST_BACKOFF_MIN_MS 100u
#define TW_MGRLIST_BACKOFF_MAX_MS 2000u

struct tw_mgr_addr {
	char host[TW_HOST_MAX];
	int port;
};

enum tw_mgr_outcome {
	TW_MGR_UNREACHABLE,   /* refused, timed out, closed, unanswered */
	TW_MGR_REMOTE,        /* HELLO refused with -EREMOTE: not the active */
};

struct tw_mgrlist {
	/* addr[0..n-1]: the list (mgrd i+1); addr[n]: an active an mgrd
	 * named that the list does not hold (then cur == n). */
	struct tw_mgr_addr addr[TW_MGRLIST_MAX + 1];
	int n;
	int ids[TW_MGRLIST_MAX + 1];   /* mgrd id each said it is; 0 unknown */
	int cur;              /* the address to try now */
	int used;             /* the last that answered; -1: none yet */
	unsigned fails;       /* failed attempts since the last answer */
	char why[192];        /* the failure that moved cur away from used */
};

/* "HOST", "HOST:PORT", "[V6]", "[V6]:PORT" or a bare IPv6 literal; port
 * default_port when absent.  0 or -EINVAL. */
int tw_mgr_addr_parse(const char *s, int default_port, struct tw_mgr_addr *a);
/* "ADDR[,ADDR]" (each as tw_mgr_addr_parse; no empty element, no address
 * twice).  0 or -EINVAL; *l starts at the first. */
int tw_mgrlist_parse(struct tw_mgrlist *l, const char *s, int default_port);
/* An empty list, then tw_mgrlist_add for each (the config's mgrds, in id
 * order).  Add: 0, -EINVAL (bad host or port, or listed twice) or -E2BIG. */
void tw_mgrlist_init(struct tw_mgrlist *l);
int tw_mgrlist_add(struct tw_mgrlist *l, const char *host, int port);

/* The config's mgrds, in id order ([mgrd], or [mgrd 1] and [mgrd 2]).
 * 0 or -EINVAL. */
int tw_mgrlist_conf(struct tw_mgrlist *l, const struct tw_conf *c);

static inline const struct tw_mgr_addr *
tw_mgrlist_cur(const struct tw_mgrlist *l)
{
	return &l->addr[l->cur];
}

/* cur said it is mgrd `id` of its pair (HelloReply.mgrd_id; 0: unpaired,
 * ignored): names use it, not the position in the list. */
void tw_mgrlist_learn_id(struct tw_mgrlist *l, uint32_t id);
/* "mgrd 2 at 10.0.0.6:7500": the id it said, else its position ("mgrd at
 * H:P" for a named active the list does not hold; "H:P" alone in a
 * one-address list); [V6]:PORT. */
const char *tw_mgrlist_name(const struct tw_mgrlist *l, int i, char *buf,
			    size_t len);
/* "H:P" or "[V6]:P": the form HelloReply.active_addr takes. */
const char *tw_mgr_addr_str(const struct tw_mgr_addr *a, char *buf,
			    size_t len);

/* The attempt on cur failed.  cause: why, for the log ("connection
 * refused", the refusal text); hint: the active it named ("" or NULL:
 * none).  Moves cur and returns the ms to wait before the next attempt
 * (bounded by max_ms, which is never exceeded; 0 = TW_MGRLIST_BACKOFF_MAX_MS).
 * With one address and no hint, cur stays. */
uint32_t tw_mgrlist_failed(struct tw_mgrlist *l, enum tw_mgr_outcome o,
			   const char *cause, const char *hint,
			   uint32_t max_ms);
/* cur answered.  true when it is not the one that answered before (the
 * first answer counts when it is not the list's first address): then msg
 * holds "using mgrd 2 at H:P (mgrd 1 at H:P: connection refused)", to be
 * logged once for this switch. */
bool tw_mgrlist_ok(struct tw_mgrlist *l, char *msg, size_t len);

#endif
