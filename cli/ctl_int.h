/* ctl_int.h - what the twinfsctl commands share (cli/ only): the
 * command context, exit codes, the config and connection helpers of
 * twinfsctl.c, and the commands living in their own files. */
#ifndef TWINFS_CTL_INT_H
#define TWINFS_CTL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "mgrlist.h"
#include "wire.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_DEGRADED = 3 };

struct ctl {
	const char *conf_path;
	struct tw_conf conf;
	bool conf_loaded;
	uint32_t timeout_ms;      /* 0 = from the config (request_timeout) */
	bool timeout_set;         /* timeout_ms is -t's, not the config's */
	uint64_t incarnation;
	/* mgrd.c: the config's mgrds; mgr_addr: the one in use ("" until a
	 * command connects; ctl_mgrd_addr) */
	struct tw_mgrlist mgrs;
	char mgr_addr[TW_HOST_MAX + 16];
};

/* One mgrd as `status` shows it (MSG_MGRD_STATUS; role "down" when it
 * could not be asked, rc then says why). */
struct ctl_mgrd {
	int id;
	char addr[TW_HOST_MAX + 16];
	char role[16];
	char peer_role[16];
	bool known;             /* term .. last_contact_ms are its answer */
	uint64_t term, applied, lag, last_contact_ms;
	int rc;
};

extern const char *progname;

void usage(FILE *f);
/* A human cause for a negative errno ("connection refused", ...). */
const char *errno_cause(int rc);
int ctl_load_conf(struct ctl *ctl);
/* Open a blocking admin connection to `what` at host:port; prints the
 * reason on failure unless quiet. */
int ctl_connect(struct ctl *ctl, const char *what, const char *host,
		int port, uint32_t timeout_ms, bool quiet,
		struct wire_sync **out);
/* mgrd.c: an admin connection to the active mgrd (of a pair: asked in
 * turn, proto/FORMAT.md "mgrd pair"); prints why none on failure unless
 * quiet. */
/* ctl_connect without the PING that proves the connection: the first
 * call does (MSG_MGRD_STATUS, which an mgrd in any role answers). */
int ctl_connect2(struct ctl *ctl, const char *what, const char *host,
		 int port, uint32_t timeout_ms, bool quiet, bool ping,
		 struct wire_sync **out);
int ctl_connect_mgrd(struct ctl *ctl, struct wire_sync **out);
int ctl_connect_mgrd_q(struct ctl *ctl, bool quiet, struct wire_sync **out);
/* "host:port" of the mgrd last connected (else the first configured). */
const char *ctl_mgrd_addr(struct ctl *ctl);
/* Every configured mgrd's MSG_MGRD_STATUS into out[0..*n-1] (at most
 * TW_MGRLIST_MAX); 0. */
int ctl_mgrds(struct ctl *ctl, struct ctl_mgrd *out, int *n);
/* An admin connection to the standby of a pair, if one says it is in
 * sync with a live active (its address into addr): 0, or -ENOENT. */
int ctl_connect_standby(struct ctl *ctl, struct wire_sync **out, char *addr,
			size_t len);
/* Connect to the active mgrd, send it `type` with an Empty body (its
 * address into addr), print why on failure: 0 or -errno. */
int ctl_mgrd_call_empty(struct ctl *ctl, uint16_t type, char *addr,
			size_t len);
/* The same, printing nothing on error when quiet. */
int ctl_mgrd_call_empty_q(struct ctl *ctl, uint16_t type, char *addr,
			  size_t len, bool quiet);
/* twinfsctl mgrd switchover */
int cmd_mgrd(struct ctl *ctl, int argc, char **argv);
/* One request; prints "<what> (<addr>): <TYPE> failed: cause" on error
 * unless quiet. */
int ctl_call(struct wire_sync *s, const char *what, const char *addr,
	     uint16_t type, const ProtobufCMessage *body,
	     struct wire_msg **reply, bool quiet);
/* GET_MAP; *reply owns *map. */
int ctl_get_map(struct ctl *ctl, struct wire_sync *mgr,
		struct wire_msg **reply, Twinfs__ClusterMap **map);
const char *state_name(Twinfs__IodState s);

/* rebuild.c: twinfsctl rebuild (start, --wait with progress, --status,
 * --accept-stale). */
int cmd_rebuild(struct ctl *ctl, int argc, char **argv);
/* n[id - 1]: the unrepairable blocks of the resync job record of each
 * target iod (ResyncJob.unrepairable), 0 without one; quiet. */
int ctl_unrepairable(struct ctl *ctl, uint64_t *n);

/* scrub.c: twinfsctl scrub [--wait] [--status] [--json] [--rate MB/s]
 * [IOD] (docs/ARCHITECTURE.md "Integrity"). */
int cmd_scrub(struct ctl *ctl, int argc, char **argv);

/* client.c: twinfsctl keygen NAME [-o FILE]; client list | revoke NAME. */
int cmd_keygen(int argc, char **argv);
int cmd_client(struct ctl *ctl, int argc, char **argv);

/* backup.c: twinfsctl backup-meta FILE. */
int cmd_backup_meta(struct ctl *ctl, int argc, char **argv);

#endif
