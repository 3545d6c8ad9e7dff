/* twinfsctl.c - the TwinFS admin CLI.
 *
 *   twinfsctl [-c CONF] [-t MS] COMMAND [ARGS]
 *
 * status, verify, sync and df talk to mgrd and the iods with blocking
 * requests (wire_sync_*) as ROLE_ADMIN, using the cluster name and the mgrd
 * address of the config file.  getstripe and setstripe work on a mounted
 * path through the special xattr `twinfs.layout` that the client answers
 * itself (proto/FORMAT.md "Special xattr"), so they need no config.
 *
 * rebuild (rebuild.c) starts, follows and reports resyncs.
 * What this file does not do: repair (there is no fsck yet).  Every
 * message names the object, the server and the cause.
 *
 * Exit codes: 0 success; 1 an error (a server could not be reached, a
 * request failed, twins differ); 2 usage; 3 `status` found a degraded group
 * or an unreachable iod.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "ctl_int.h"
#include "raid.h"
#include "wire.h"

#define CTL_DEFAULT_CONF   "/etc/twinfs/twinfs.conf"
#define CTL_LAYOUT_XATTR   "twinfs.layout"
#define CTL_REGION_SIZE    (1u << 20)   /* verify compares 1 MiB regions */
#define CTL_SUBFILES_PAGE  1024u        /* SUBFILES entries asked per call */
#define CTL_VERIFY_RETRIES 2            /* re-checks of a differing subfile */
#define CTL_VERIFY_REGIONS 4096u        /* regions per CHECKSUM call, at
                                         * most: the iod stops after 16 MiB
                                         * of data (holes are not read) */
#define CTL_VERIFY_MAP_TRIES 20         /* map refreshes per subfile */
#define CTL_MAX_REPORTED_REGIONS 8      /* per differing subfile */

const char *progname = "twinfsctl";

/* ------------------------------------------------------------- helpers */

void usage(FILE *f)
{
	fprintf(f,
"usage: twinfsctl [-c CONF] [-t MS] COMMAND [ARGS]\n"
"       twinfsctl --help | --version\n"
"\n"
"  -c CONF     cluster config (default $TWINFS_CONF, else " CTL_DEFAULT_CONF ")\n"
"  -t MS       per-request timeout in ms (default: the config's request_timeout;\n"
"              verify uses at least 120 s per checksum)\n"
"\n"
"commands:\n"
"  status [--json]          servers, their states and reachability, each iod's\n"
"                           checksum counters and last scrub; exits 3 if a\n"
"                           group is degraded, an iod does not answer, or one\n"
"                           mgrd of a pair is down or syncing\n"
"  verify                   compare every subfile on both twins of its group\n"
"  sync                     make everything acknowledged durable now\n"
"  backup-meta FILE         copy mgrd's state (the namespace) to FILE while it\n"
"                           serves (restore: docs/OPERATIONS.md)\n"
"  rebuild [--full] [--wait] [--rate-limit MB/s] IOD\n"
"                           (re)start the resync of iod IOD from its twin; --wait\n"
"                           waits for a down IOD to register, shows progress and\n"
"                           exits 0 once IOD is up, 1 if it fails, and joins a\n"
"                           running job; an up IOD in sync is copied again only\n"
"                           with --full (without: its recent job's outcome, or\n"
"                           refused with exit 2)\n"
"  rebuild --accept-stale IOD  promote a stale iod whose twin cannot serve, WITHOUT\n"
"                           resync: writes it missed are lost\n"
"  rebuild --status [--json] [IOD]  resync jobs: state, start and end, files and\n"
"                           bytes to copy and copied, rate, errors\n"
"  scrub [--wait] [--status] [--json] [--rate MB/s] [IOD]\n"
"                           check every block of every iod (or of IOD) against\n"
"                           its checksum in the background, healing bad ones\n"
"                           from the twin; --status only shows how it goes;\n"
"                           exits 1 if a block is bad on both twins\n"
"  df [-h]                  capacity per iod and for the file system\n"
"  getstripe [-c|-S|-i|--raw] PATH...   show a file's or directory's layout\n"
"  setstripe -S SIZE -c COUNT [-i GROUP] DIR|EMPTYFILE\n"
"                           set a directory's policy or an empty file's layout\n"
"                           (COUNT -1 or 0 = every group; GROUP -1 = round robin)\n"
"  keygen NAME [-o FILE]    write a new client key file (mode 0600; default\n"
"                           NAME.key) and print the [client NAME] stanza\n"
"  client list              client identities: export, access, squash, live\n"
"                           sessions, revoked, key fingerprint, networks\n"
"  client revoke NAME       refuse NAME's current key from now on; its live\n"
"                           sessions expire and its writes are fenced at once\n"
"  mgrd switchover          make the standby mgrd of a pair the active; waits\n"
"                           until it has taken over\n");
}

const char *errno_cause(int rc)
{
	switch (rc) {
	case -ECONNREFUSED: return "connection refused (is it running?)";
	case -ETIMEDOUT:    return "timed out";
	case -ECONNRESET:   return "connection reset";
	case -EHOSTUNREACH: return "host unreachable";
	case -EPROTO:       return "protocol error (wrong cluster name or version?)";
	case -ENOTCONN:     return "answers, but not registered with mgrd yet";
	case -EACCES:       return "refused: wrong or missing cluster secret";
	default:            return strerror(-rc);
	}
}

int ctl_load_conf(struct ctl *ctl)
{
	char err[512] = "";
	int rc;

	if (ctl->conf_loaded)
		return 0;
	rc = tw_conf_load(ctl->conf_path, &ctl->conf, err, sizeof(err));
	if (rc < 0) {
		if (err[0])
			fprintf(stderr, "%s: %s\n", progname, err);
		else
			fprintf(stderr, "%s: config %s: %s\n", progname,
				ctl->conf_path, strerror(-rc));
		return rc;
	}
	ctl->conf_loaded = true;
	/* The daemons warn of a cluster without a secret; a CLI warns only
	 * of what it chose itself. */
	if (*ctl->conf.secret && ctl->conf.channel == TW_CHANNEL_NONE)
		wire_channel_announce(progname, ctl->conf.channel, true);
	if (ctl->timeout_ms == 0)
		ctl->timeout_ms = tw_ms_or(ctl->conf.request_timeout_ms,
					   TW_REQUEST_TIMEOUT_MS);
	return 0;
}

/* Open a blocking admin connection to `what` (e.g. "mgrd", "iod 3") at
 * host:port; prints the reason on failure. */
int ctl_connect(struct ctl *ctl, const char *what, const char *host,
		       int port, uint32_t timeout_ms, bool quiet,
		       struct wire_sync **out)
{
	return ctl_connect2(ctl, what, host, port, timeout_ms, quiet, true,
			    out);
}

int ctl_connect2(struct ctl *ctl, const char *what, const char *host,
		 int port, uint32_t timeout_ms, bool quiet, bool ping,
		 struct wire_sync **out)
{
	Twinfs__Hello hello;
	char hostname[256] = "";
	int rc;

	wire_hello_init(&hello, ctl->conf.cluster_name, TWINFS__ROLE__ROLE_ADMIN,
			ctl->incarnation);
	if (gethostname(hostname, sizeof(hostname) - 1) == 0)
		hello.hostname = hostname;
	rc = wire_sync_open2(host, port, &hello, ctl->conf.secret,
			     ctl->conf.channel, timeout_ms, ping, out);
	if (rc < 0 && !quiet)
		fprintf(stderr, "%s: %s (%s:%d): %s\n", progname, what, host,
			port, errno_cause(rc));
	return rc;
}

/* One request; prints "<what> (<addr>): <TYPE> failed: cause" on error. */
int ctl_call(struct wire_sync *s, const char *what, const char *addr,
		    uint16_t type, const ProtobufCMessage *body,
		    struct wire_msg **reply, bool quiet)
{
	int rc = wire_sync_call(s, type, body, NULL, 0, reply);

	if (rc < 0 && !quiet)
		fprintf(stderr, "%s: %s (%s): %s failed: %s\n", progname, what,
			addr, wire_type_name(type), errno_cause(rc));
	return rc;
}

int ctl_get_map(struct ctl *ctl, struct wire_sync *mgr,
		       struct wire_msg **reply, Twinfs__ClusterMap **map)
{
	Twinfs__Empty empty = TWINFS__EMPTY__INIT;
	char addr[TW_HOST_MAX + 16];
	int rc;

	snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
	rc = ctl_call(mgr, "mgrd", addr, TWINFS__MSG_TYPE__MSG_GET_MAP,
		      &empty.base, reply, false);
	if (rc < 0)
		return rc;
	*map = (Twinfs__ClusterMap *)(*reply)->body;
	return 0;
}

const char *state_name(Twinfs__IodState s)
{
	switch (s) {
	case TWINFS__IOD_STATE__IOD_UP:        return "up";
	case TWINFS__IOD_STATE__IOD_SUSPECT:   return "suspect";
	case TWINFS__IOD_STATE__IOD_DOWN:      return "down";
	case TWINFS__IOD_STATE__IOD_RESYNCING: return "resyncing";
	default:                               return "unknown";
	}
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static double elapsed_ms(uint64_t start_ns)
{
	return (double)(tw_now_ns() - start_ns) / 1e6;
}

/* -------------------------------------------------------------- status */

struct iod_probe {
	bool reachable;
	int rc;            /* 0 or the connect/ping error */
	double rtt_ms;
	/* its checksum counters and last scrub (SCRUB without start,
	 * docs/ARCHITECTURE.md "Integrity"), when it answered */
	bool has_scrub;
	Twinfs__ScrubReply scrub;
};

static void probe_iod(struct ctl *ctl, const Twinfs__IodInfo *info,
		      uint64_t epoch, struct iod_probe *p)
{
	Twinfs__Ping ping = TWINFS__PING__INIT;
	struct wire_sync *s = NULL;
	struct wire_msg *reply = NULL;
	char what[32], addr[TW_HOST_MAX + 16];
	uint64_t t0;
	int rc;

	snprintf(what, sizeof(what), "iod %u", info->id);
	snprintf(addr, sizeof(addr), "%s:%u", info->host, info->port);
	rc = ctl_connect(ctl, what, info->host, (int)info->port,
			 ctl->timeout_ms, true, &s);
	if (rc < 0)
		goto out;
	ping.epoch = epoch;
	ping.incarnation = ctl->incarnation;
	t0 = tw_now_ns();
	rc = ctl_call(s, what, addr, TWINFS__MSG_TYPE__MSG_PING, &ping.base,
		      &reply, true);
	if (rc >= 0) {
		const Twinfs__Ping *pr = (const Twinfs__Ping *)reply->body;

		p->rtt_ms = elapsed_ms(t0);
		/* An iod answers pings before it has registered (it holds
		 * no map: epoch 0) and, after a restart, with a new
		 * incarnation mgrd has not seen yet; it serves no data in
		 * either case, so it is not counted as up. */
		if (pr->epoch == 0 || (info->incarnation &&
		    pr->incarnation != info->incarnation))
			rc = -ENOTCONN;
	}
	if (rc >= 0) {
		Twinfs__Scrub q = TWINFS__SCRUB__INIT;   /* status only */
		struct wire_msg *sr = NULL;

		if (ctl_call(s, what, addr, TWINFS__MSG_TYPE__MSG_SCRUB,
			     &q.base, &sr, true) >= 0) {
			p->scrub = *(const Twinfs__ScrubReply *)sr->body;
			p->scrub.base.unknown_fields = NULL;
			p->scrub.base.n_unknown_fields = 0;
			p->has_scrub = true;
		}
		if (sr)
			wire_msg_free(sr);
	}
out:
	p->rc = rc < 0 ? rc : 0;
	p->reachable = rc >= 0;
	if (reply)
		wire_msg_free(reply);
	if (s)
		wire_sync_close(s);
}

/* The pair's table in `status`: one line per mgrd. */
static void print_mgrds(FILE *f, const struct ctl_mgrd *m, int n)
{
	fprintf(f, "%-5s %-22s %-8s %-6s %-8s %s\n", "MGRD", "ADDRESS", "ROLE",
		"TERM", "LAG", "LAST CONTACT");
	for (int i = 0; i < n; i++) {
		char term[24] = "-", lag[24] = "-", last[64] = "-";

		if (m[i].known) {
			snprintf(term, sizeof(term), "%" PRIu64, m[i].term);
			snprintf(lag, sizeof(lag), "%" PRIu64, m[i].lag);
			if (m[i].last_contact_ms)
				snprintf(last, sizeof(last), "%.1f s ago (peer "
					 "%s)", m[i].last_contact_ms / 1000.0,
					 *m[i].peer_role ? m[i].peer_role
							 : "?");
			else
				snprintf(last, sizeof(last), "never (peer %s)",
					 *m[i].peer_role ? m[i].peer_role
							 : "?");
		} else if (m[i].rc < 0) {
			snprintf(last, sizeof(last), "unreachable: %s",
				 errno_cause(m[i].rc));
		}
		fprintf(f, "%-5d %-22s %-8s %-6s %-8s %s\n", m[i].id,
			m[i].addr, m[i].role, term, lag, last);
	}
}

/* "mgrds":[{"id":1,"address":"H:P","role":"active","term":N,"lag":N,
 * "last_contact_ms":N},..]: null where the mgrd could not say. */
static void json_mgrds(const struct ctl_mgrd *m, int n)
{
	printf("\"mgrds\":[");
	for (int i = 0; i < n; i++) {
		printf("%s{\"id\":%d,\"address\":", i ? "," : "", m[i].id);
		json_string(stdout, m[i].addr);
		printf(",\"role\":");
		json_string(stdout, m[i].role);
		if (m[i].known)
			printf(",\"term\":%" PRIu64 ",\"lag\":%" PRIu64
			       ",\"last_contact_ms\":%" PRIu64
			       ",\"peer_role\":", m[i].term, m[i].lag,
			       m[i].last_contact_ms);
		else
			printf(",\"term\":null,\"lag\":null,"
			       "\"last_contact_ms\":null,\"peer_role\":null");
		if (m[i].known)
			json_string(stdout, m[i].peer_role);
		if (m[i].rc < 0) {
			printf(",\"error\":");
			json_string(stdout, errno_cause(m[i].rc));
		}
		printf("}");
	}
	printf("]");
}

/* "2026-12-05 01:02:03 UTC" of CLOCK_REALTIME seconds t. */
static void utc_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm))
		strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
	else
		snprintf(buf, len, "%lld", (long long)t);
}

/* The checksum lines of `status`, one per iod: the blocks found bad,
 * healed and bad on both since it started, and its last finished scrub.
 * "iod N checksums: ..." so that no column of the iod table above can
 * be mistaken for it by a script. */
static void print_csums(const Twinfs__ClusterMap *map,
			const struct iod_probe *p)
{
	for (size_t i = 0; i < map->n_iods; i++) {
		const Twinfs__ScrubReply *r = &p[i].scrub;
		char when[48], last[160];

		if (!p[i].has_scrub) {
			printf("iod %u checksums: unknown (no answer)\n",
			       map->iods[i]->id);
			continue;
		}
		if (!r->csum_enabled) {
			printf("iod %u checksums: none kept here "
			       "(ordered/writeback)\n", map->iods[i]->id);
			continue;
		}
		utc_time(r->last_done, when, sizeof(when));
		if (r->running)
			snprintf(last, sizeof(last), "running, %" PRIu64
				 " bytes read", r->bytes);
		else if (r->last_known)
			snprintf(last, sizeof(last), "%s, %" PRIu64 " bad, %"
				 PRIu64 " healed, %" PRIu64 " unrepairable",
				 when, r->last_bad, r->last_healed,
				 r->last_unhealed);
		else
			snprintf(last, sizeof(last), "none finished");
		printf("iod %u checksums: %" PRIu64 " bad blocks found, %" PRIu64
		       " healed, %" PRIu64 " unrepairable; last scrub: %s\n",
		       map->iods[i]->id, r->csum_mismatches, r->csum_healed,
		       r->csum_unhealed, last);
	}
}

/* ,"csum":{..},"scrub":{..} of one iod: null when it did not answer. */
static void json_csums(const struct iod_probe *p)
{
	const Twinfs__ScrubReply *r = &p->scrub;

	if (!p->has_scrub) {
		printf(",\"csum\":null,\"scrub\":null");
		return;
	}
	printf(",\"csum\":{\"enabled\":%s,\"bad\":%" PRIu64 ",\"healed\":%"
	       PRIu64 ",\"unrepairable\":%" PRIu64 "}",
	       r->csum_enabled ? "true" : "false", r->csum_mismatches,
	       r->csum_healed, r->csum_unhealed);
	printf(",\"scrub\":{\"running\":%s,\"runs\":%" PRIu64,
	       r->running ? "true" : "false", r->runs);
	if (r->last_known)
		printf(",\"last_done\":%" PRId64 ",\"last_bad\":%" PRIu64
		       ",\"last_healed\":%" PRIu64 ",\"last_unrepairable\":%"
		       PRIu64 "}", r->last_done, r->last_bad, r->last_healed,
		       r->last_unhealed);
	else
		printf(",\"last_done\":null}");
}

/* Fetch the map again and keep it if it lists the same iods in the same
 * order (the probes are indexed like the first one); else keep the first. */
static void refresh_map(struct ctl *ctl, struct wire_sync *mgr,
			struct wire_msg **reply, Twinfs__ClusterMap **map)
{
	Twinfs__Empty empty = TWINFS__EMPTY__INIT;
	struct wire_msg *r2 = NULL;
	Twinfs__ClusterMap *m2;
	bool same;

	if (ctl_call(mgr, "mgrd", ctl_mgrd_addr(ctl),
		     TWINFS__MSG_TYPE__MSG_GET_MAP, &empty.base, &r2, true) < 0) {
		if (r2)
			wire_msg_free(r2);
		return;
	}
	m2 = (Twinfs__ClusterMap *)r2->body;
	same = m2->n_iods == (*map)->n_iods;
	for (size_t i = 0; same && i < m2->n_iods; i++)
		same = m2->iods[i]->id == (*map)->iods[i]->id;
	if (!same) {
		wire_msg_free(r2);
		return;
	}
	wire_msg_free(*reply);
	*reply = r2;
	*map = m2;
}

static int cmd_status(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL;
	Twinfs__ClusterMap *map;
	struct iod_probe *probes = NULL;
	struct ctl_mgrd mgrds[TW_MGRLIST_MAX];
	uint64_t unrep[TW_MAX_IODS];
	bool json = false, degraded[TW_MAX_GROUPS] = { false };
	int opt, rc, ret = EXIT_FAIL, n_degraded = 0, n_unreachable = 0;
	int n_mgrds = 0, mgrds_bad = 0;
	size_t i;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		switch (opt) {
		case 'j': json = true; break;
		case 'H': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	/* A pair: both mgrds' own word on their roles first; one down or
	 * syncing leaves the metadata without its copy (exit 3). */
	ctl_mgrds(ctl, mgrds, &n_mgrds);
	for (int m = 0; n_mgrds > 1 && m < n_mgrds; m++)
		if (strcmp(mgrds[m].role, "active") != 0 &&
		    strcmp(mgrds[m].role, "standby") != 0)
			mgrds_bad++;
	if (ctl_connect_mgrd(ctl, &mgr) < 0) {
		if (n_mgrds > 1)
			print_mgrds(stderr, mgrds, n_mgrds);
		return EXIT_FAIL;
	}
	rc = ctl_get_map(ctl, mgr, &reply, &map);
	if (rc < 0)
		goto out;

	probes = calloc(map->n_iods ? map->n_iods : 1, sizeof(*probes));
	if (!probes) {
		fprintf(stderr, "%s: out of memory\n", progname);
		goto out;
	}
	for (i = 0; i < map->n_iods; i++)
		probe_iod(ctl, map->iods[i], map->epoch, &probes[i]);
	/* A hung iod holds its probe for the whole timeout, and mgrd may
	 * change its state meanwhile: print the states as they are when
	 * the probes end, not as they were before them. */
	refresh_map(ctl, mgr, &reply, &map);
	for (i = 0; i < map->n_iods; i++) {
		const Twinfs__IodInfo *io = map->iods[i];

		if (!probes[i].reachable)
			n_unreachable++;
		if ((io->state != TWINFS__IOD_STATE__IOD_UP || io->needs_resync) &&
		    io->group < TW_MAX_GROUPS && !degraded[io->group]) {
			degraded[io->group] = true;
			n_degraded++;
		}
	}

	/* docs/ARCHITECTURE.md "Integrity": blocks the last resync of each
	 * iod found bad on both twins */
	ctl_unrepairable(ctl, unrep);
	if (json) {
		bool first = true;

		printf("{\"cluster\":");
		json_string(stdout, ctl->conf.cluster_name);
		printf(",\"mgrd\":");
		json_string(stdout, ctl_mgrd_addr(ctl));
		printf(",\"epoch\":%" PRIu64
		       ",\"n_groups\":%u,\"stripe_size\":%u,\"stripe_count\":%u,",
		       map->epoch, map->n_groups, map->stripe_size,
		       map->stripe_count);
		json_mgrds(mgrds, n_mgrds);
		printf(",\"iods\":[");
		for (i = 0; i < map->n_iods; i++) {
			const Twinfs__IodInfo *io = map->iods[i];

			printf("%s{\"id\":%u,\"group\":%u,\"twin\":%u,\"host\":",
			       i ? "," : "", io->id, io->group, io->twin_index);
			json_string(stdout, io->host);
			printf(",\"port\":%u,\"state\":\"%s\",\"needs_resync\":%s,"
			       "\"resync_permille\":%u,\"incarnation\":%" PRIu64
			       ",\"reachable\":%s",
			       io->port, state_name(io->state),
			       io->needs_resync ? "true" : "false",
			       io->resync_permille, io->incarnation,
			       probes[i].reachable ? "true" : "false");
			if (probes[i].reachable)
				printf(",\"ping_ms\":%.3f", probes[i].rtt_ms);
			else {
				printf(",\"error\":");
				json_string(stdout, errno_cause(probes[i].rc));
			}
			json_csums(&probes[i]);
			printf(",\"resync_unrepairable\":%" PRIu64 "}",
			       io->id >= 1 && io->id <= TW_MAX_IODS
			       ? unrep[io->id - 1] : 0);
		}
		printf("],\"degraded_groups\":[");
		for (i = 0; i < TW_MAX_GROUPS; i++) {
			if (!degraded[i])
				continue;
			printf("%s%zu", first ? "" : ",", i);
			first = false;
		}
		printf("],\"healthy\":%s}\n",
		       n_degraded == 0 && n_unreachable == 0 && mgrds_bad == 0
		       ? "true" : "false");
	} else {
		char count[16];

		if (map->stripe_count)
			snprintf(count, sizeof(count), "%u", map->stripe_count);
		else
			snprintf(count, sizeof(count), "all");
		printf("cluster %s  mgrd %s  epoch %" PRIu64 "  groups %u  "
		       "default layout: stripe_size %u, stripe_count %s\n",
		       ctl->conf.cluster_name, ctl_mgrd_addr(ctl), map->epoch,
		       map->n_groups, map->stripe_size, count);
		if (n_mgrds > 1)
			print_mgrds(stdout, mgrds, n_mgrds);
		printf("%-5s %-6s %-5s %-22s %-10s %s\n", "IOD", "GROUP",
		       "TWIN", "ADDRESS", "STATE", "PING");
		for (i = 0; i < map->n_iods; i++) {
			const Twinfs__IodInfo *io = map->iods[i];
			char addr[TW_HOST_MAX + 16], state[48], ping[64];

			snprintf(addr, sizeof(addr), "%s:%u", io->host, io->port);
			if (io->state == TWINFS__IOD_STATE__IOD_RESYNCING)
				snprintf(state, sizeof(state), "resyncing %u.%u%%",
					 io->resync_permille / 10,
					 io->resync_permille % 10);
			else
				snprintf(state, sizeof(state), "%s%s",
					 state_name(io->state),
					 io->needs_resync ? ",needs-resync" : "");
			if (probes[i].reachable)
				snprintf(ping, sizeof(ping), "%.2f ms",
					 probes[i].rtt_ms);
			else
				snprintf(ping, sizeof(ping), "unreachable: %s",
					 errno_cause(probes[i].rc));
			printf("%-5u %-6u %-5u %-22s %-10s %s\n", io->id,
			       io->group, io->twin_index, addr, state, ping);
		}
		print_csums(map, probes);
		for (i = 0; i < map->n_iods; i++) {
			uint32_t id = map->iods[i]->id;

			if (id >= 1 && id <= TW_MAX_IODS && unrep[id - 1])
				printf("iod %u resync: %" PRIu64 " unrepairable "
				       "blocks (bad on both twins, copied "
				       "marked bad: reads of them get EIO; "
				       "twinfsctl rebuild --status %u)\n", id,
				       unrep[id - 1], id);
		}
		if (n_degraded == 0 && n_unreachable == 0)
			printf("all %zu iods up, %u groups healthy\n",
			       map->n_iods, map->n_groups);
		else
			printf("%d of %u groups degraded, %d iods unreachable\n",
			       n_degraded, map->n_groups, n_unreachable);
		if (mgrds_bad)
			printf("mgrd pair degraded: %d of %d mgrds down or "
			       "syncing\n", mgrds_bad, n_mgrds);
	}
	ret = (n_degraded || n_unreachable || mgrds_bad) ? EXIT_DEGRADED
							 : EXIT_OK;
out:
	free(probes);
	if (reply)
		wire_msg_free(reply);
	if (mgr)
		wire_sync_close(mgr);
	return ret;
}

/* ---------------------------------------------------------------- sync */

static int cmd_sync(struct ctl *ctl, int argc, char **argv)
{
	char addr[TW_HOST_MAX + 16];
	int rc;

	if (argc > 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	/* MSG_SYNC makes mgrd sync its journal and have every up iod sync
	 * its data (FORMAT.md: "make everything durable now"). */
	rc = ctl_mgrd_call_empty(ctl, TWINFS__MSG_TYPE__MSG_SYNC, addr,
				 sizeof(addr));
	if (rc < 0)
		return EXIT_FAIL;
	printf("sync: done\n");
	return EXIT_OK;
}

/* ------------------------------------------------------------------ df */

static void fmt_kib(char *buf, size_t len, uint64_t bytes, bool human)
{
	static const char units[] = "KMGTPE";
	double v = (double)bytes / 1024.0;
	int u = 0;

	if (!human) {
		snprintf(buf, len, "%" PRIu64, bytes / 1024);
		return;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f%c", v, units[u]);
}

static void df_line(const char *name, uint64_t size, uint64_t avail,
		    uint64_t free_b, bool human, const char *note)
{
	char s[32], us[32], av[32];
	uint64_t used = size > free_b ? size - free_b : 0;
	unsigned pct = 0;

	if (used + avail)
		pct = (unsigned)((used * 100 + (used + avail) - 1) / (used + avail));
	fmt_kib(s, sizeof(s), size, human);
	fmt_kib(us, sizeof(us), used, human);
	fmt_kib(av, sizeof(av), avail, human);
	printf("%-24s %14s %14s %14s %4u%% %s\n", name, s, us, av, pct, note);
}

static int cmd_df(struct ctl *ctl, int argc, char **argv)
{
	Twinfs__Empty empty = TWINFS__EMPTY__INIT;
	Twinfs__Getattr root = TWINFS__GETATTR__INIT;
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL, *fsreply = NULL;
	Twinfs__ClusterMap *map;
	uint64_t grp_size[TW_MAX_GROUPS] = { 0 }, grp_avail[TW_MAX_GROUPS] = { 0 };
	uint64_t grp_free[TW_MAX_GROUPS] = { 0 };
	bool grp_seen[TW_MAX_GROUPS] = { false };
	uint64_t tot_size = 0, tot_avail = 0, tot_free = 0;
	bool human = false;
	char addr[TW_HOST_MAX + 16];
	int opt, rc, ret = EXIT_FAIL;
	size_t i;

	optind = 1;
	while ((opt = getopt(argc, argv, "h")) != -1) {
		if (opt == 'h')
			human = true;
		else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	if (ctl_connect_mgrd(ctl, &mgr) < 0)
		return EXIT_FAIL;
	if (ctl_get_map(ctl, mgr, &reply, &map) < 0)
		goto out;

	printf("%-24s %14s %14s %14s %5s %s\n", "SERVER",
	       human ? "Size" : "1K-blocks", "Used", "Available", "Use%", "");
	for (i = 0; i < map->n_iods; i++) {
		const Twinfs__IodInfo *io = map->iods[i];
		struct wire_sync *s = NULL;
		struct wire_msg *r = NULL;
		char what[32], name[64];

		snprintf(what, sizeof(what), "iod %u", io->id);
		snprintf(addr, sizeof(addr), "%s:%u", io->host, io->port);
		snprintf(name, sizeof(name), "iod %u (group %u)", io->id,
			 io->group);
		rc = ctl_connect(ctl, what, io->host, (int)io->port,
				 ctl->timeout_ms, true, &s);
		if (rc >= 0)
			rc = ctl_call(s, what, addr,
				      TWINFS__MSG_TYPE__MSG_IOD_STATFS,
				      &empty.base, &r, true);
		if (rc < 0) {
			printf("%-24s %14s %14s %14s %5s %s: %s\n", name, "-",
			       "-", "-", "-", addr, errno_cause(rc));
		} else {
			const Twinfs__StatfsReply *st =
				(const Twinfs__StatfsReply *)r->body;
			uint64_t bs = st->bsize ? st->bsize : 4096;
			uint64_t size = st->blocks * bs, avail = st->bavail * bs;
			uint64_t fr = st->bfree * bs;

			df_line(name, size, avail, fr, human, addr);
			/* A group holds what its smaller twin holds. */
			if (io->group < TW_MAX_GROUPS) {
				unsigned g = io->group;

				if (!grp_seen[g] || size < grp_size[g])
					grp_size[g] = size;
				if (!grp_seen[g] || avail < grp_avail[g])
					grp_avail[g] = avail;
				if (!grp_seen[g] || fr < grp_free[g])
					grp_free[g] = fr;
				grp_seen[g] = true;
			}
		}
		if (r)
			wire_msg_free(r);
		if (s)
			wire_sync_close(s);
	}
	for (i = 0; i < TW_MAX_GROUPS; i++) {
		tot_size += grp_size[i];
		tot_avail += grp_avail[i];
		tot_free += grp_free[i];
	}
	df_line("filesystem (mirrored)", tot_size, tot_avail, tot_free, human,
		"");

	/* Inode usage comes from mgrd's STATFS (root inode). */
	snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
	root.ino = 1;
	rc = ctl_call(mgr, "mgrd", addr, TWINFS__MSG_TYPE__MSG_STATFS,
		      &root.base, &fsreply, false);
	if (rc >= 0) {
		const Twinfs__StatfsReply *st =
			(const Twinfs__StatfsReply *)fsreply->body;

		printf("inodes: %" PRIu64 " total, %" PRIu64 " used, %" PRIu64
		       " free; name max %u\n", st->files,
		       st->files > st->ffree ? st->files - st->ffree : 0,
		       st->ffree, st->namemax);
		ret = EXIT_OK;
	}
out:
	if (fsreply)
		wire_msg_free(fsreply);
	if (reply)
		wire_msg_free(reply);
	if (mgr)
		wire_sync_close(mgr);
	return ret;
}

/* -------------------------------------------------------------- verify */

struct sub_ent {
	uint64_t ino;
	uint32_t column;
	uint64_t size;
};

struct sub_list {
	struct sub_ent *v;
	size_t n, cap;
};

static int sub_push(struct sub_list *l, uint64_t ino, uint32_t col,
		    uint64_t size)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 1024;
		struct sub_ent *nv = realloc(l->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = (struct sub_ent){ ino, col, size };
	return 0;
}

static int sub_cmp(const void *a, const void *b)
{
	const struct sub_ent *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	return 0;
}

struct vserver {
	const Twinfs__IodInfo *info;
	struct wire_sync *s;
	char what[32];
	char addr[TW_HOST_MAX + 16];
};

/* List every subfile an iod holds, page by page. */
static int list_subfiles(struct vserver *v, struct sub_list *out)
{
	Twinfs__Subfiles req = TWINFS__SUBFILES__INIT;
	int rc;

	req.max = CTL_SUBFILES_PAGE;
	for (;;) {
		struct wire_msg *r = NULL;
		const Twinfs__SubfilesReply *sr;
		size_t i;
		bool eof;

		rc = ctl_call(v->s, v->what, v->addr,
			      TWINFS__MSG_TYPE__MSG_SUBFILES, &req.base, &r,
			      false);
		if (rc < 0)
			return rc;
		sr = (const Twinfs__SubfilesReply *)r->body;
		for (i = 0; i < sr->n_subfiles; i++) {
			rc = sub_push(out, sr->subfiles[i]->ino,
				      sr->subfiles[i]->column,
				      sr->subfiles[i]->size);
			if (rc < 0)
				break;
		}
		eof = sr->eof || sr->n_subfiles == 0;
		if (sr->n_subfiles) {
			req.after_ino = sr->subfiles[sr->n_subfiles - 1]->ino;
			req.after_column = sr->subfiles[sr->n_subfiles - 1]->column;
		}
		wire_msg_free(r);
		if (rc < 0)
			return rc;
		if (eof)
			break;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), sub_cmp);
	return 0;
}

/* One group being verified: its twins (by twin index) and the map epoch
 * the ordered checksums are asked in. */
struct vgroup {
	struct ctl *ctl;
	struct wire_sync *mgr;
	uint32_t group;
	uint64_t epoch;
	struct vserver *twin[2];
};

struct vdiff {
	char why[256];
	bool differ;
	bool mismatch;     /* sizes or region CRCs differ (not only bad) */
	uint64_t size;     /* bytes compared (the primary's size) */
	/* by twin index: regions holding a block that fails its checksum
	 * at home (ChecksumReply.bad_regions), and the first of them */
	uint64_t n_bad[2], first_bad[2];
};

/* Note one call's figures, twin by twin index, in d. */
static void diff_regions(struct vdiff *d, uint64_t first,
			 const uint64_t size[2], uint32_t *const crcs[2],
			 const size_t n[2], size_t *len, size_t *shown)
{
	if (size[0] != size[1])
		d->mismatch = true;
	if (size[0] != size[1] && !d->differ) {
		d->differ = true;
		*len = (size_t)snprintf(d->why, sizeof(d->why),
					"size %" PRIu64 " vs %" PRIu64,
					size[0], size[1]);
	}
	for (size_t i = 0; i < TW_MIN(n[0], n[1]); i++) {
		uint64_t r = first + i;

		if (crcs[0][i] == crcs[1][i])
			continue;
		if (!d->differ || *len == 0) {
			*len = (size_t)snprintf(d->why, sizeof(d->why),
						"region %" PRIu64, r);
		} else if (*shown < CTL_MAX_REPORTED_REGIONS &&
			   *len < sizeof(d->why) - 32) {
			*len += (size_t)snprintf(d->why + *len,
						 sizeof(d->why) - *len,
						 *shown ? ",%" PRIu64
						 : ", region %" PRIu64, r);
		} else if (*shown == CTL_MAX_REPORTED_REGIONS &&
			   *len < sizeof(d->why) - 8) {
			*len += (size_t)snprintf(d->why + *len,
						 sizeof(d->why) - *len, ",...");
		}
		(*shown)++;
		d->differ = true;
		d->mismatch = true;
	}
}

/* docs/ARCHITECTURE.md "Integrity": twin t's copy has blocks failing their
 * checksums in these regions. */
static void note_bad(struct vdiff *d, int t, const uint32_t *r, size_t n)
{
	if (n && d->n_bad[t] == 0)
		d->first_bad[t] = r[0];
	d->n_bad[t] += n;
	if (n && !d->why[0])
		snprintf(d->why, sizeof(d->why), "region %" PRIu32 " fails its "
			 "block checksums", r[0]);
	if (n)
		d->differ = true;
}

/* Compare (ino, col) on both twins: fills d.  The checksums are asked of
 * the subfile's primary with Checksum.both, which has both twins take
 * them at one point of its write order (iod/twin.c "Ordered checksums"),
 * so a file written meanwhile cannot look different.  One call covers
 * CTL_VERIFY_REGIONS regions (the iods compute on their loops); the walk
 * ends at the size the first call saw, so a growing file ends it too.
 * Returns 0, or -errno: -ESTALE / -EAGAIN (the map moved on), -EBUSY (the
 * group is not healthy any more), or the failure, already printed. */
static int compare_subfile(struct vgroup *g, uint64_t ino, uint32_t col,
			   struct vdiff *d)
{
	int p = r1_primary(ino, col);     /* both twins are readable */
	struct vserver *v = g->twin[p];
	uint64_t first = 0, end = 0;
	size_t len = 0, shown = 0;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	for (;;) {
		Twinfs__Checksum req = TWINFS__CHECKSUM__INIT;
		const Twinfs__ChecksumReply *cr;
		struct wire_msg *r = NULL;
		uint64_t size[2];
		uint32_t *crcs[2];
		size_t n[2];

		req.ino = ino;
		req.column = col;
		req.region_size = CTL_REGION_SIZE;
		req.first_region = (uint32_t)first;
		req.max_regions = CTL_VERIFY_REGIONS;
		req.both = true;
		req.epoch = g->epoch;
		rc = wire_sync_call(v->s, TWINFS__MSG_TYPE__MSG_CHECKSUM,
				    &req.base, NULL, 0, &r);
		if (rc == -ESTALE || rc == -EAGAIN || rc == -EINVAL ||
		    rc == -EBUSY)
			break;
		if (rc < 0) {
			fprintf(stderr, "%s: %s (%s): CHECKSUM ino %" PRIu64
				" column %u (both twins) failed: %s\n",
				progname, v->what, v->addr, ino, col,
				errno_cause(rc));
			break;
		}
		cr = (const Twinfs__ChecksumReply *)r->body;
		/* By twin index: the primary's figures, then its twin's. */
		size[p] = cr->size;
		crcs[p] = cr->crcs;
		n[p] = cr->n_crcs;
		size[!p] = cr->twin_size;
		crcs[!p] = cr->twin_crcs;
		n[!p] = cr->n_twin_crcs;
		note_bad(d, p, cr->bad_regions, cr->n_bad_regions);
		note_bad(d, !p, cr->twin_bad_regions, cr->n_twin_bad_regions);
		if (first == 0) {
			d->size = cr->size;
			end = TW_MAX(cr->size, cr->twin_size);
		}
		diff_regions(d, first, size, crcs, n, &len, &shown);
		first += TW_MAX(n[0], n[1]);
		wire_msg_free(r);
		if (TW_MAX(n[0], n[1]) == 0 ||
		    first * (uint64_t)CTL_REGION_SIZE >= end ||
		    first >= UINT32_MAX)
			break;
	}
	return rc;
}

static void ino_path(struct wire_sync *mgr, const char *mgr_addr, uint64_t ino,
		     char *buf, size_t len)
{
	Twinfs__Getattr req = TWINFS__GETATTR__INIT;
	struct wire_msg *r = NULL;
	int rc;

	req.ino = ino;
	rc = wire_sync_call(mgr, TWINFS__MSG_TYPE__MSG_INO_PATH, &req.base,
			    NULL, 0, &r);
	if (rc >= 0) {
		const Twinfs__InoPath *p = (const Twinfs__InoPath *)r->body;

		snprintf(buf, len, "%s", p->path && p->path[0] ? p->path :
			 "(no name)");
	} else if (rc == -ENOENT || rc == -ESTALE) {
		snprintf(buf, len, "(unlinked)");
	} else {
		snprintf(buf, len, "(path unknown: mgrd %s: %s)", mgr_addr,
			 errno_cause(rc));
	}
	if (r)
		wire_msg_free(r);
}

/* Both twins can be compared: each serves reads (up or suspect, holding
 * every write), as the iods require for an ordered checksum. */
static bool iod_comparable(const Twinfs__IodInfo *io)
{
	const struct r1_twin t = { (enum r1_state)io->state,
				   io->needs_resync };

	return r1_readable(&t);
}

/* Take the current map's epoch for group g if both its twins can still be
 * compared, else name the twin that cannot and return -EBUSY.  `during`:
 * the group's verify had started. */
static int vgroup_refresh(struct vgroup *g, bool during)
{
	struct wire_msg *reply = NULL;
	Twinfs__ClusterMap *map;
	int rc = ctl_get_map(g->ctl, g->mgr, &reply, &map);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < map->n_iods; i++) {
		const Twinfs__IodInfo *io = map->iods[i];

		if (io->group != g->group || io->twin_index > 1 ||
		    iod_comparable(io))
			continue;
		fprintf(stderr, "%s: group %u: iod %u (%s:%u) %s %s%s; %s\n",
			progname, g->group, io->id, io->host, io->port,
			during ? "became" : "is", state_name(io->state),
			io->needs_resync ? " and needs resync" : "",
			during ? "the rest of the group was not compared"
			       : "its twins cannot be compared");
		rc = -EBUSY;
	}
	if (rc == 0)
		g->epoch = map->epoch;
	wire_msg_free(reply);
	return rc;
}

/* Verify every subfile either twin of g holds; n_diff[0] counts those
 * that differ between the twins, n_diff[1] those whose twins agree but
 * hold blocks bad on both (BAD-BOTH alone).  Returns 0, 1 when the
 * group could not be verified to the end (said on stderr), or -errno when
 * a twin's listing failed. */
static int verify_group(struct vgroup *g, const char *mgr_addr,
			uint64_t *n_sub, uint64_t *n_bytes, uint64_t *n_diff)
{
	struct vserver *a = g->twin[0], *b = g->twin[1];
	struct sub_list la = { 0 }, lb = { 0 };
	size_t i = 0, j = 0;
	int rc;

	rc = list_subfiles(a, &la);
	if (rc >= 0)
		rc = list_subfiles(b, &lb);
	if (rc < 0)
		goto out;
	while (i < la.n || j < lb.n) {
		const struct sub_ent *e;
		struct vdiff d;
		int c, attempt = 0, map_tries = 0;

		if (i >= la.n)
			c = 1;
		else if (j >= lb.n)
			c = -1;
		else
			c = sub_cmp(&la.v[i], &lb.v[j]);
		e = c <= 0 ? &la.v[i] : &lb.v[j];
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;

		/* The checksums are a consistent cut of the primary's write
		 * order, but a DELETE is not ordered: a subfile being
		 * deleted can be gone from one twin only, for a moment.  A
		 * real divergence persists, so a difference is re-checked. */
		for (;;) {
			rc = compare_subfile(g, e->ino, e->column, &d);
			/* The map moved on (or the iods' view of the group
			 * did): take the new one, or stop if the group can
			 * no longer be compared. */
			if ((rc == -ESTALE || rc == -EAGAIN || rc == -EINVAL ||
			     rc == -EBUSY) &&
			    map_tries++ < CTL_VERIFY_MAP_TRIES) {
				usleep(100 * 1000);
				rc = vgroup_refresh(g, true);
				if (rc < 0)
					break;
				continue;
			}
			if (rc < 0)
				break;
			if (!d.differ || attempt++ >= CTL_VERIFY_RETRIES)
				break;
			usleep(300 * 1000);
		}
		if (rc < 0) {
			/* -EBUSY was named by vgroup_refresh. */
			if (rc != -EBUSY)
				fprintf(stderr, "%s: group %u: ino %" PRIu64
					" column %u: %s; the rest of the group "
					"was not compared\n", progname,
					g->group, e->ino, e->column,
					errno_cause(rc));
			rc = 1;
			goto out;
		}
		(*n_sub)++;
		*n_bytes += d.size;
		if (d.differ) {
			char path[PATH_MAX + 64];
			/* docs/ARCHITECTURE.md "Integrity": the same bytes on
			 * both, bad on both (a resync's unrepairable block):
			 * BAD-BOTH alone, no difference between the twins */
			bool same = !d.mismatch && d.n_bad[0] && d.n_bad[1];

			ino_path(g->mgr, mgr_addr, e->ino, path, sizeof(path));
			if (!same)
				printf("DIFFER %s (ino %" PRIu64 " column %u): "
				       "iod %u vs iod %u: %s\n", path, e->ino,
				       e->column, a->info->id, b->info->id,
				       d.why);
			for (int t = 0; t < 2; t++) {
				if (!d.n_bad[t])
					continue;
				if (d.n_bad[!t])
					printf("BAD-BOTH %s (ino %" PRIu64
					       " column %u): region %" PRIu64
					       " fails its block checksums on "
					       "both twins: reads of its bad "
					       "blocks get EIO\n", path, e->ino,
					       e->column, d.first_bad[t]);
				else
					printf("GOOD %s (ino %" PRIu64 " column "
					       "%u): iod %u's copy is good, iod "
					       "%u's fails its block checksums "
					       "(%" PRIu64 " regions from region %"
					       PRIu64 "); reading the file "
					       "rewrites it from iod %u\n", path,
					       e->ino, e->column,
					       g->twin[!t]->info->id,
					       g->twin[t]->info->id, d.n_bad[t],
					       d.first_bad[t], g->twin[!t]->info->id);
				break;
			}
			fflush(stdout);
			n_diff[same]++;
		}
	}
out:
	free(la.v);
	free(lb.v);
	return rc;
}

static int cmd_verify(struct ctl *ctl, int argc, char **argv)
{
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL;
	Twinfs__ClusterMap *map;
	struct vserver *vs = NULL;
	uint64_t n_sub = 0, n_bytes = 0, n_diff[2] = { 0, 0 };
	uint32_t cks_timeout;
	char mgr_addr[TW_HOST_MAX + 16];
	struct vgroup vg;
	int ret = EXIT_FAIL, rc, skipped = 0;
	uint32_t g;
	size_t i;

	if (argc > 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	if (ctl_connect_mgrd(ctl, &mgr) < 0)
		return EXIT_FAIL;
	snprintf(mgr_addr, sizeof(mgr_addr), "%s", ctl_mgrd_addr(ctl));
	if (ctl_get_map(ctl, mgr, &reply, &map) < 0)
		goto out;
	vs = calloc(map->n_iods ? map->n_iods : 1, sizeof(*vs));
	if (!vs)
		goto out;
	/* A checksum reads a whole subfile: give it time. */
	cks_timeout = TW_MAX(ctl->timeout_ms, 120000u);

	for (g = 0; g < map->n_groups; g++) {
		struct vserver *twin[2] = { NULL, NULL };

		for (i = 0; i < map->n_iods; i++) {
			const Twinfs__IodInfo *io = map->iods[i];

			if (io->group != g || io->twin_index > 1)
				continue;
			twin[io->twin_index] = &vs[i];
			vs[i].info = io;
			snprintf(vs[i].what, sizeof(vs[i].what), "iod %u", io->id);
			snprintf(vs[i].addr, sizeof(vs[i].addr), "%s:%u",
				 io->host, io->port);
		}
		if (!twin[0] || !twin[1]) {
			fprintf(stderr, "%s: group %u: the map lists fewer than "
				"two twins\n", progname, g);
			skipped++;
			continue;
		}
		/* The newest map for this group: earlier groups may have
		 * taken minutes. */
		vg = (struct vgroup){ .ctl = ctl, .mgr = mgr, .group = g,
				      .twin = { twin[0], twin[1] } };
		rc = vgroup_refresh(&vg, false);
		if (rc == -EBUSY) {
			skipped++;
			continue;
		}
		if (rc < 0)
			goto out;
		for (i = 0; i < 2; i++) {
			rc = ctl_connect(ctl, twin[i]->what, twin[i]->info->host,
					 (int)twin[i]->info->port, cks_timeout,
					 false, &twin[i]->s);
			if (rc < 0)
				goto out;
		}
		rc = verify_group(&vg, mgr_addr, &n_sub, &n_bytes, n_diff);
		if (rc < 0)
			goto out;
		skipped += rc;
	}
	if (n_diff[1])
		printf("verify: %" PRIu64 " of %" PRIu64 " subfiles hold blocks "
		       "bad on both twins (BAD-BOTH above): restore those "
		       "ranges of the files from a backup, or remove them\n",
		       n_diff[1], n_sub);
	if (n_diff[0]) {
		printf("verify: %" PRIu64 " of %" PRIu64 " subfiles differ "
		       "between twins; `twinfsctl rebuild --full IOD` copies iod IOD "
		       "again from its twin\n", n_diff[0], n_sub);
		ret = EXIT_FAIL;
	} else if (n_diff[1]) {
		ret = EXIT_FAIL;
	} else if (skipped) {
		printf("verify: %" PRIu64 " subfiles, %" PRIu64 " bytes, twins "
		       "identical; %d groups not verified\n", n_sub, n_bytes,
		       skipped);
		ret = EXIT_FAIL;
	} else {
		printf("verify: %" PRIu64 " subfiles, %" PRIu64 " bytes, twins "
		       "identical\n", n_sub, n_bytes);
		ret = EXIT_OK;
	}
out:
	if (vs) {
		for (i = 0; i < map->n_iods; i++)
			if (vs[i].s)
				wire_sync_close(vs[i].s);
		free(vs);
	}
	if (reply)
		wire_msg_free(reply);
	if (mgr)
		wire_sync_close(mgr);
	return ret;
}

/* --------------------------------------------------- getstripe/setstripe */

struct layout_view {
	uint64_t stripe_size;
	long stripe_count;          /* 0 = every group (directory policy) */
	uint32_t groups[R0_MAX_STRIPE_COUNT];
	unsigned n_groups;
	uint64_t max_file_size;     /* regular files; 0 = not said */
};

/* Parse the client's "stripe_size=S stripe_count=C groups=a,b,..." */
static int parse_layout_xattr(const char *s, struct layout_view *lv)
{
	char buf[512], *save = NULL, *tok;

	memset(lv, 0, sizeof(*lv));
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, " \t\n", &save); tok;
	     tok = strtok_r(NULL, " \t\n", &save)) {
		char *eq = strchr(tok, '='), *v;

		if (!eq)
			return -EINVAL;
		*eq = '\0';
		v = eq + 1;
		if (strcmp(tok, "stripe_size") == 0) {
			if (tw_parse_size(v, &lv->stripe_size) < 0)
				return -EINVAL;
		} else if (strcmp(tok, "stripe_count") == 0) {
			lv->stripe_count = strtol(v, NULL, 10);
		} else if (strcmp(tok, "max_file_size") == 0) {
			lv->max_file_size = strtoull(v, NULL, 10);
		} else if (strcmp(tok, "groups") == 0) {
			char *save2 = NULL, *g;

			for (g = strtok_r(v, ",", &save2); g;
			     g = strtok_r(NULL, ",", &save2)) {
				if (lv->n_groups == R0_MAX_STRIPE_COUNT)
					return -EINVAL;
				lv->groups[lv->n_groups++] =
					(uint32_t)strtoul(g, NULL, 10);
			}
		}
		/* Unknown keys are ignored: the client may add fields. */
	}
	return 0;
}

static int cmd_getstripe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-count", no_argument, NULL, 'c' },
		{ "stripe-size", no_argument, NULL, 'S' },
		{ "stripe-index", no_argument, NULL, 'i' },
		{ "raw", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	bool only_c = false, only_s = false, only_i = false, raw = false;
	int opt, ret = EXIT_OK, k;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "cSir", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': only_c = true; break;
		case 'S': only_s = true; break;
		case 'i': only_i = true; break;
		case 'r': raw = true; break;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "%s: getstripe: no PATH given\n", progname);
		return EXIT_USAGE;
	}
	for (k = optind; k < argc; k++) {
		const char *path = argv[k];
		char val[512];
		struct layout_view lv;
		struct stat st;
		ssize_t n;
		long first;
		unsigned g;

		if (stat(path, &st) < 0) {
			fprintf(stderr, "%s: %s: %s\n", progname, path,
				strerror(errno));
			ret = EXIT_FAIL;
			continue;
		}
		n = getxattr(path, CTL_LAYOUT_XATTR, val, sizeof(val) - 1);
		if (n < 0) {
			int e = errno;

			if (e == ENODATA || e == ENOTSUP)
				fprintf(stderr, "%s: %s: no TwinFS layout (not on "
					"a TwinFS mount, or not a regular file "
					"or directory)\n", progname, path);
			else
				fprintf(stderr, "%s: %s: getxattr %s: %s\n",
					progname, path, CTL_LAYOUT_XATTR,
					strerror(e));
			ret = EXIT_FAIL;
			continue;
		}
		val[n] = '\0';
		if (raw) {
			printf("%s\n", val);
			continue;
		}
		if (parse_layout_xattr(val, &lv) < 0) {
			fprintf(stderr, "%s: %s: cannot parse layout \"%s\"\n",
				progname, path, val);
			ret = EXIT_FAIL;
			continue;
		}
		first = lv.n_groups ? (long)lv.groups[0] : -1;
		if (only_c || only_s || only_i) {
			if (only_c)
				printf("%ld\n", lv.stripe_count ? lv.stripe_count : -1);
			if (only_s)
				printf("%" PRIu64 "\n", lv.stripe_size);
			if (only_i)
				printf("%ld\n", first);
			continue;
		}
		printf("%s\n", path);
		if (S_ISDIR(st.st_mode)) {
			printf("stripe_count:  %ld stripe_size:   %" PRIu64
			       " pattern:       raid10 stripe_offset: %ld\n",
			       lv.stripe_count ? lv.stripe_count : -1,
			       lv.stripe_size, first);
			continue;
		}
		printf("lmm_stripe_count:  %ld\n", lv.stripe_count);
		printf("lmm_stripe_size:   %" PRIu64 "\n", lv.stripe_size);
		printf("lmm_pattern:       raid10\n");
		printf("lmm_stripe_offset: %ld\n", first);
		if (lv.max_file_size)
			printf("lmm_max_file_size: %" PRIu64 "\n",
			       lv.max_file_size);
		printf("\tcolumn\t group\n");
		for (g = 0; g < lv.n_groups; g++)
			printf("\t%6u\t%6u\n", g, lv.groups[g]);
	}
	return ret;
}

static int cmd_setstripe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-size", required_argument, NULL, 'S' },
		{ "stripe-count", required_argument, NULL, 'c' },
		{ "stripe-index", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t size = 0;
	long count = -2, first = -1;
	char val[96], *end;
	const char *path;
	struct stat st;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "S:c:i:", opts, NULL)) != -1) {
		switch (opt) {
		case 'S':
			if (tw_parse_size(optarg, &size) < 0 ||
			    size < R0_MIN_STRIPE_SIZE || size > R0_MAX_STRIPE_SIZE ||
			    (size & (size - 1))) {
				fprintf(stderr, "%s: setstripe: stripe size \"%s\" "
					"must be a power of two from 64K to 64M\n",
					progname, optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
			errno = 0;
			count = strtol(optarg, &end, 10);
			if (errno || *end || count < -1 ||
			    count > (long)R0_MAX_STRIPE_COUNT) {
				fprintf(stderr, "%s: setstripe: stripe count \"%s\" "
					"must be -1 (every group) or 0..%u\n",
					progname, optarg, R0_MAX_STRIPE_COUNT);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			errno = 0;
			first = strtol(optarg, &end, 10);
			if (errno || *end || first < -1 ||
			    first >= (long)R0_MAX_STRIPE_COUNT) {
				fprintf(stderr, "%s: setstripe: group \"%s\" must "
					"be -1 (round robin) or a group number\n",
					progname, optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || (size == 0 && count == -2)) {
		fprintf(stderr, "usage: %s setstripe -S SIZE -c COUNT [-i GROUP] "
			"DIR|EMPTYFILE\n", progname);
		return EXIT_USAGE;
	}
	path = argv[optind];
	if (size == 0 || count == -2) {
		/* One of the two was left out: keep the current value. */
		char cur[512];
		struct layout_view lv;
		ssize_t n = getxattr(path, CTL_LAYOUT_XATTR, cur, sizeof(cur) - 1);

		if (n >= 0) {
			cur[n] = '\0';
			if (parse_layout_xattr(cur, &lv) == 0) {
				if (size == 0)
					size = lv.stripe_size;
				if (count == -2)
					count = lv.stripe_count;
			}
		}
		if (size == 0)
			size = R0_DEF_STRIPE_SIZE;
		if (count == -2)
			count = 0;
	}
	if (count < 0)
		count = 0;

	/* Like `lfs setstripe`, a missing file is created empty. */
	if (stat(path, &st) < 0) {
		int fd;

		if (errno != ENOENT) {
			fprintf(stderr, "%s: %s: %s\n", progname, path,
				strerror(errno));
			return EXIT_FAIL;
		}
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0) {
			fprintf(stderr, "%s: create %s: %s\n", progname, path,
				strerror(errno));
			return EXIT_FAIL;
		}
		close(fd);
	}
	if (first >= 0)
		snprintf(val, sizeof(val), "%" PRIu64 " %ld %ld", size, count,
			 first);
	else
		snprintf(val, sizeof(val), "%" PRIu64 " %ld", size, count);
	if (setxattr(path, CTL_LAYOUT_XATTR, val, strlen(val), 0) < 0) {
		int e = errno;

		switch (e) {
		case EBUSY:
			fprintf(stderr, "%s: %s: the file has been written; "
				"only an empty, never written file or a "
				"directory takes a new layout\n", progname, path);
			break;
		case EINVAL:
			fprintf(stderr, "%s: %s: layout \"%s\" refused (group "
				"out of range?)\n", progname, path, val);
			break;
		case ENOTSUP:
			fprintf(stderr, "%s: %s: not on a TwinFS mount\n",
				progname, path);
			break;
		default:
			fprintf(stderr, "%s: %s: setxattr %s \"%s\": %s\n",
				progname, path, CTL_LAYOUT_XATTR, val,
				strerror(e));
		}
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	static const struct option top_opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl ctl;
	const char *env;
	int opt;

	memset(&ctl, 0, sizeof(ctl));
	env = getenv("TWINFS_CONF");
	ctl.conf_path = env && *env ? env : CTL_DEFAULT_CONF;
	tw_conf_defaults(&ctl.conf);
	tw_log_init("twinfsctl", TW_LOG_WARN);
	if (tw_random(&ctl.incarnation, sizeof(ctl.incarnation)) < 0)
		ctl.incarnation = tw_now_ns() ^ (uint64_t)getpid();

	/* '+': stop at the command, whose own options may reuse letters. */
	while ((opt = getopt_long(argc, argv, "+c:t:hV", top_opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			ctl.conf_path = optarg;
			break;
		case 't': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || v == 0 || v > 3600000) {
				fprintf(stderr, "%s: -t wants milliseconds, got "
					"\"%s\"\n", progname, optarg);
				return EXIT_USAGE;
			}
			ctl.timeout_ms = (uint32_t)v;
			ctl.timeout_set = true;
			break;
		}
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("twinfsctl %s (protocol %u)\n", TW_VERSION,
			       WIRE_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	argc -= optind;
	argv += optind;

	if (strcmp(argv[0], "status") == 0)
		return cmd_status(&ctl, argc, argv);
	if (strcmp(argv[0], "verify") == 0)
		return cmd_verify(&ctl, argc, argv);
	if (strcmp(argv[0], "sync") == 0)
		return cmd_sync(&ctl, argc, argv);
	if (strcmp(argv[0], "df") == 0)
		return cmd_df(&ctl, argc, argv);
	if (strcmp(argv[0], "rebuild") == 0)
		return cmd_rebuild(&ctl, argc, argv);
	if (strcmp(argv[0], "getstripe") == 0)
		return cmd_getstripe(argc, argv);
	if (strcmp(argv[0], "setstripe") == 0)
		return cmd_setstripe(argc, argv);
	if (strcmp(argv[0], "scrub") == 0)
		return cmd_scrub(&ctl, argc, argv);
	if (strcmp(argv[0], "keygen") == 0)
		return cmd_keygen(argc, argv);
	if (strcmp(argv[0], "client") == 0)
		return cmd_client(&ctl, argc, argv);
	if (strcmp(argv[0], "mgrd") == 0)
		return cmd_mgrd(&ctl, argc, argv);
	if (strcmp(argv[0], "backup-meta") == 0)
		return cmd_backup_meta(&ctl, argc, argv);
	if (strcmp(argv[0], "help") == 0 || strcmp(argv[0], "--help") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	fprintf(stderr, "%s: unknown command \"%s\"\n", progname, argv[0]);
	usage(stderr);
	return EXIT_USAGE;
}
