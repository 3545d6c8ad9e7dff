/* scrub.c - twinfsctl scrub: starts the background scrub of every iod (or
 * of one) with SCRUB (proto/FORMAT.md "Integrity"), or with --status only
 * asks how it goes; --wait follows until none runs; --json for machines.
 * Exit 1 when an iod cannot be asked or a block was found bad on both
 * twins (unhealed > 0). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "ctl_int.h"
#include "wire.h"

#define SCRUB_WAIT_POLL_MS 1000u

/* One SCRUB to iod io: 0 and *out (the caller frees the message *r). */
static int scrub_ask(struct ctl *ctl, const Twinfs__IodInfo *io, bool start,
		     uint32_t rate, struct wire_msg **r)
{
	Twinfs__Scrub q = TWINFS__SCRUB__INIT;
	struct wire_sync *s = NULL;
	char what[32], addr[TW_HOST_MAX + 16];
	int rc;

	snprintf(what, sizeof(what), "iod %u", io->id);
	snprintf(addr, sizeof(addr), "%s:%u", io->host, io->port);
	q.start = start;
	q.rate_mb = rate;
	rc = ctl_connect(ctl, what, io->host, (int)io->port, ctl->timeout_ms,
			 false, &s);
	if (rc >= 0)
		rc = ctl_call(s, what, addr, TWINFS__MSG_TYPE__MSG_SCRUB,
			      &q.base, r, false);
	if (s)
		wire_sync_close(s);
	return rc < 0 ? rc : 0;
}

static void scrub_print(const Twinfs__IodInfo *io, const Twinfs__ScrubReply *r,
			bool json, bool first)
{
	if (json)
		printf("%s{\"iod\": %u, \"running\": %s, \"rate_mb\": %u, "
		       "\"subfiles\": %" PRIu64 ", \"bytes\": %" PRIu64 ", "
		       "\"bad\": %" PRIu64 ", \"healed\": %" PRIu64 ", "
		       "\"unhealed\": %" PRIu64 ", \"runs\": %" PRIu64 "}",
		       first ? "" : ",\n ", io->id,
		       r->running ? "true" : "false", r->rate_mb, r->subfiles,
		       r->bytes, r->bad, r->healed, r->unhealed, r->runs);
	else
		printf("iod %u: %s, %" PRIu64 " subfiles, %" PRIu64 " bytes "
		       "read, %" PRIu64 " bad found, %" PRIu64 " blocks "
		       "healed, %" PRIu64 " bad on both twins, %" PRIu64
		       " runs done\n", io->id,
		       r->running ? "running" : "idle", r->subfiles, r->bytes,
		       r->bad, r->healed, r->unhealed, r->runs);
}

int cmd_scrub(struct ctl *ctl, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "status", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "rate", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	bool wait = false, status = false, json = false;
	uint32_t rate = 0, only = 0;
	struct wire_sync *mgr = NULL;
	struct wire_msg *mreply = NULL;
	Twinfs__ClusterMap *map;
	int opt, ret = EXIT_FAIL;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'w': wait = true; break;
		case 's': status = true; break;
		case 'j': json = true; break;
		case 'r': rate = (uint32_t)strtoul(optarg, NULL, 10); break;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc)
		only = (uint32_t)strtoul(argv[optind], NULL, 10);
	if (optind + (only ? 1 : 0) < argc || (optind < argc && !only)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (ctl_load_conf(ctl) < 0 || ctl_connect_mgrd(ctl, &mgr) < 0)
		return EXIT_FAIL;
	if (ctl_get_map(ctl, mgr, &mreply, &map) < 0)
		goto out;
	for (bool start = !status;; start = false) {
		bool running = false, failed = false, found = false;
		bool first = true;
		uint64_t unhealed = 0;

		if (json)
			printf("[");
		for (size_t i = 0; i < map->n_iods; i++) {
			const Twinfs__IodInfo *io = map->iods[i];
			struct wire_msg *r = NULL;

			if (only && io->id != only)
				continue;
			found = true;
			if (scrub_ask(ctl, io, start, rate, &r) < 0) {
				failed = true;
				continue;
			}
			const Twinfs__ScrubReply *sr =
				(const Twinfs__ScrubReply *)r->body;

			scrub_print(io, sr, json, first);
			first = false;
			running |= sr->running;
			unhealed += sr->unhealed;
			wire_msg_free(r);
		}
		if (json)
			printf("]\n");
		fflush(stdout);
		if (!found) {
			fprintf(stderr, "%s: scrub: no iod %u in the map\n",
				progname, only);
			break;
		}
		if (!wait || !running || failed) {
			ret = failed || unhealed ? EXIT_FAIL : EXIT_OK;
			break;
		}
		usleep(SCRUB_WAIT_POLL_MS * 1000);
	}
out:
	if (mreply)
		wire_msg_free(mreply);
	if (mgr)
		wire_sync_close(mgr);
	return ret;
}
