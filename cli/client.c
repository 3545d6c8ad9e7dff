/* client.c - twinfsctl keygen and twinfsctl client list|revoke: client
 * identities (docs/OPERATIONS.md "Client identities"; proto/FORMAT.md
 * "Client identities").
 *
 * keygen needs no cluster: it writes a key file (mode 0600, created
 * exclusively, so an existing key is never overwritten) and prints the
 * [client NAME] stanza for twinfs.conf.  list and revoke ask mgrd
 * (MSG_CLIENT_ADMIN, admin role).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_int.h"

int cmd_keygen(int argc, char **argv)
{
	uint8_t key[TW_CLIENT_KEY_LEN];
	char hexkey[2 * TW_CLIENT_KEY_LEN + 1], path[4096];
	const char *out = NULL, *name;
	int fd, opt, rc = EXIT_OK;
	FILE *f;

	optind = 0;   /* glibc: 0 restarts the scan, permuting again */
	while ((opt = getopt(argc, argv, "o:")) != -1) {
		if (opt != 'o') {
			usage(stderr);
			return EXIT_USAGE;
		}
		out = optarg;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s keygen NAME [-o FILE]\n", progname);
		return EXIT_USAGE;
	}
	name = argv[optind];
	if (!tw_client_name_ok(name) || strlen(name) > WIRE_TICKET_NAME_MAX) {
		fprintf(stderr, "%s: keygen: bad name '%s' (1..%u of A-Z a-z "
			"0-9 . _ -)\n", progname, name, WIRE_TICKET_NAME_MAX);
		return EXIT_USAGE;
	}
	if (!out) {
		snprintf(path, sizeof(path), "%s.key", name);
		out = path;
	}
	if (tw_random(key, sizeof(key)) < 0) {
		fprintf(stderr, "%s: keygen: no random bytes\n", progname);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < sizeof(key); i++)
		sprintf(hexkey + 2 * i, "%02x", key[i]);
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: keygen: %s: %s%s\n", progname, out,
			strerror(errno), errno == EEXIST ? " (a new key needs a "
			"new file: remove the old one first)" : "");
		return EXIT_FAIL;
	}
	f = fdopen(fd, "w");
	if (!f || fprintf(f, "# TwinFS client key: twinfs -o keyfile=%s\n"
			  "name = %s\nkey = %s\n", out, name, hexkey) < 0 ||
	    fflush(f) != 0 || fsync(fd) < 0) {
		fprintf(stderr, "%s: keygen: %s: %s\n", progname, out,
			strerror(errno));
		rc = EXIT_FAIL;
	}
	if (f)
		fclose(f);
	else
		close(fd);
	explicit_bzero(key, sizeof(key));
	if (rc != EXIT_OK)
		return rc;
	printf("# key file %s written (mode 0600): copy it to the client "
	       "host, mount with\n#   twinfs MGRHOST MOUNTPOINT -o keyfile=%s\n"
	       "# and add this to twinfs.conf on the mgrd host (then restart "
	       "mgrd):\n"
	       "[client %s]\nkey = %s\n#export = /\n#access = rw\n"
	       "#squash = root\n#networks = any\n", out, out, name, hexkey);
	explicit_bzero(hexkey, sizeof(hexkey));
	return EXIT_OK;
}

static int client_call(struct ctl *ctl, Twinfs__ClientAdmin *q,
		       struct wire_msg **reply)
{
	struct wire_sync *mgr = NULL;
	char addr[TW_HOST_MAX + 16];
	int rc;

	if (ctl_load_conf(ctl) < 0)
		return -EINVAL;
	if (ctl_connect_mgrd(ctl, &mgr) < 0)
		return -ENOTCONN;
	snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
	rc = ctl_call(mgr, "mgrd", addr, TWINFS__MSG_TYPE__MSG_CLIENT_ADMIN,
		      &q->base, reply, q->op == 2);
	wire_sync_close(mgr);
	return rc;
}

int cmd_client(struct ctl *ctl, int argc, char **argv)
{
	Twinfs__ClientAdmin q = TWINFS__CLIENT_ADMIN__INIT;
	struct wire_msg *reply = NULL;
	int rc;

	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		const Twinfs__ClientAdminReply *r;

		q.op = 1;
		rc = client_call(ctl, &q, &reply);
		if (rc < 0)
			return EXIT_FAIL;
		r = (const Twinfs__ClientAdminReply *)reply->body;
		printf("%-20s %-20s %-6s %-6s %-8s %-8s %-16s %s\n", "NAME",
		       "EXPORT", "ACCESS", "SQUASH", "SESSIONS", "REVOKED",
		       "KEY", "NETWORKS");
		for (size_t i = 0; i < r->n_clients; i++) {
			const Twinfs__ClientInfo *c = r->clients[i];

			printf("%-20s %-20s %-6s %-6s %-8u %-8s %-16s %s\n",
			       c->name, c->export_path,
			       c->read_only ? "ro" : "rw", c->squash,
			       c->sessions, c->revoked ? "yes" : "no",
			       c->fingerprint, c->networks);
		}
		wire_msg_free(reply);
		return EXIT_OK;
	}
	if (argc == 3 && strcmp(argv[1], "revoke") == 0) {
		q.op = 2;
		q.name = argv[2];
		rc = client_call(ctl, &q, &reply);
		if (reply)
			wire_msg_free(reply);
		if (rc == -ENOENT) {
			fprintf(stderr, "%s: client revoke: mgrd has no "
				"[client %s]\n", progname, argv[2]);
			return EXIT_FAIL;
		}
		if (rc < 0) {
			if (rc != -EINVAL && rc != -ENOTCONN)
				fprintf(stderr, "%s: client revoke %s: %s\n",
					progname, argv[2], errno_cause(rc));
			return EXIT_FAIL;
		}
		printf("client %s: key revoked; its sessions expired and its "
		       "connections closed.  To re-admit it, give it a new key "
		       "(twinfsctl keygen) and restart mgrd.\n", argv[2]);
		return EXIT_OK;
	}
	fprintf(stderr, "usage: %s client list | client revoke NAME\n",
		progname);
	return EXIT_USAGE;
}
