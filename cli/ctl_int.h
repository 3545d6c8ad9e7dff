/* ctl_int.h - what the twinfsctl commands share (cli/ only): the
 * command context, exit codes, the config and connection helpers of
 * twinfsctl.c, and the commands living in their own files. */
#ifndef TWINFS_CTL_INT_H
#define TWINFS_CTL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "wire.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_DEGRADED = 3 };

struct ctl {
	const char *conf_path;
	struct tw_conf conf;
	bool conf_loaded;
	uint32_t timeout_ms;      /* 0 = from the config (request_timeout) */
	uint64_t incarnation;
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
int ctl_connect_mgrd(struct ctl *ctl, struct wire_sync **out);
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

/* scrub.c: twinfsctl scrub [--wait] [--status] [--json] [--rate MB/s]
 * [IOD] (docs/ARCHITECTURE.md "Integrity"). */
int cmd_scrub(struct ctl *ctl, int argc, char **argv);

/* client.c: twinfsctl keygen NAME [-o FILE]; client list | revoke NAME. */
int cmd_keygen(int argc, char **argv);
int cmd_client(struct ctl *ctl, int argc, char **argv);

/* backup.c: twinfsctl backup-meta FILE. */
int cmd_backup_meta(struct ctl *ctl, int argc, char **argv);

#endif
