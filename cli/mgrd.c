/* mgrd.c - twinfsctl and the mgrd pair (proto/FORMAT.md "mgrd pair";
 * docs/OPERATIONS.md "mgrd pair"): finding the active mgrd for every
 * command, asking each mgrd its role for `status`, and
 * `twinfsctl mgrd switchover`.
 *
 * Finding the active: with one mgrd, a connection to it, as ever.  With a
 * pair, the addresses in order (common/mgrlist.h): an mgrd that answers
 * MSG_MGRD_STATUS with role "active" is used; one that answers with
 * another role (standby, syncing: an election may be under way) or
 * -EREMOTE sends us to the other, with mgrlist's backoff capped at
 * CTL_BACKOFF_MAX_MS (someone is waiting at the prompt, and an election
 * ends a lease after it starts, not 2 s later), until mgr_timeout.  A
 * round in which no mgrd could be reached at all ends at once: nothing
 * would change by waiting.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_int.h"

#define CTL_BACKOFF_MAX_MS 250u

/* MSG_MGRD_STATUS on s into *st (role copied): 0, or the call's -errno.
 * An mgrd without the pair (an older one: -EOPNOTSUPP) is the active of
 * a cluster of one. */
static int mgrd_status(struct wire_sync *s, struct ctl_mgrd *st)
{
	Twinfs__Empty empty = TWINFS__EMPTY__INIT;
	struct wire_msg *reply = NULL;
	int rc;

	rc = wire_sync_call(s, TWINFS__MSG_TYPE__MSG_MGRD_STATUS, &empty.base,
			    NULL, 0, &reply);
	if (rc == -EOPNOTSUPP) {
		snprintf(st->role, sizeof(st->role), "active");
		st->known = false;
		return 0;
	}
	if (rc < 0)
		return rc;
	if (reply->body->descriptor == &twinfs__mgrd_status__descriptor) {
		const Twinfs__MgrdStatus *m = (const void *)reply->body;

		snprintf(st->role, sizeof(st->role), "%s",
			 m->role && *m->role ? m->role : "unknown");
		snprintf(st->peer_role, sizeof(st->peer_role), "%s",
			 m->peer_role ? m->peer_role : "");
		st->term = m->term;
		st->applied = m->applied_index;
		st->lag = m->lag_records;
		st->last_contact_ms = m->last_contact_ms;
		st->known = true;
	} else {
		rc = -EPROTO;
	}
	wire_msg_free(reply);
	return rc;
}

/* Connect to the mgrd at host:port and ask its status: 0 with *out open
 * (the caller closes it), or a negative errno with nothing open. */
static int connect_status(struct ctl *ctl, const char *host, int port,
			  struct ctl_mgrd *st, struct wire_sync **out)
{
	struct wire_sync *s = NULL;
	int rc = ctl_connect2(ctl, "mgrd", host, port, ctl->timeout_ms, true,
			      false, &s);

	if (rc < 0)
		return rc;
	rc = mgrd_status(s, st);
	if (rc < 0) {
		wire_sync_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void mgrs_load(struct ctl *ctl)
{
	if (ctl->mgrs.n == 0 && tw_mgrlist_conf(&ctl->mgrs, &ctl->conf) < 0)
		tw_mgrlist_init(&ctl->mgrs);
}

const char *ctl_mgrd_addr(struct ctl *ctl)
{
	mgrs_load(ctl);
	if (ctl->mgrs.n == 0)
		snprintf(ctl->mgr_addr, sizeof(ctl->mgr_addr), "%s:%d",
			 ctl->conf.mgr_host, ctl->conf.mgr_port);
	else if (!*ctl->mgr_addr)
		tw_mgr_addr_str(tw_mgrlist_cur(&ctl->mgrs), ctl->mgr_addr,
				sizeof(ctl->mgr_addr));
	return ctl->mgr_addr;
}

int ctl_connect_mgrd_q(struct ctl *ctl, bool quiet, struct wire_sync **out)
{
	uint64_t deadline, now, left;
	int rc, unreachable = 0, tries = 0;
	char why[TW_MGRLIST_MAX + 1][200];

	mgrs_load(ctl);
	if (ctl->mgrs.n < 2) {
		*ctl->mgr_addr = '\0';
		return ctl_connect(ctl, "mgrd", ctl->conf.mgr_host,
				   ctl->conf.mgr_port, ctl->timeout_ms, quiet,
				   out);
	}
	deadline = tw_now_ms() + tw_ms_or(ctl->conf.mgr_timeout_ms,
					  TW_MGR_TIMEOUT_MS);
	memset(why, 0, sizeof(why));
	for (;;) {
		const struct tw_mgr_addr *a = tw_mgrlist_cur(&ctl->mgrs);
		int i = ctl->mgrs.cur;
		struct ctl_mgrd st = { 0 };
		struct wire_sync *s = NULL;
		enum tw_mgr_outcome o = TW_MGR_UNREACHABLE;
		char msg[512], name[TW_HOST_MAX + 32];
		uint32_t delay;

		tries++;
		tw_mgr_addr_str(a, ctl->mgr_addr, sizeof(ctl->mgr_addr));
		rc = connect_status(ctl, a->host, a->port, &st, &s);
		if (rc == 0 && strcmp(st.role, "active") == 0) {
			tw_mgrlist_ok(&ctl->mgrs, msg, sizeof(msg));
			*out = s;
			return 0;
		}
		if (rc == 0)
			wire_sync_close(s);
		if (rc == 0 || rc == -EREMOTE) {
			o = TW_MGR_REMOTE;
			snprintf(why[i], sizeof(why[i]), "%s",
				 rc == 0 ? st.role : "not the active");
		}
		if (o == TW_MGR_UNREACHABLE) {
			snprintf(why[i], sizeof(why[i]), "%s", errno_cause(rc));
			unreachable++;
		} else {
			unreachable = 0;
		}
		if (unreachable >= ctl->mgrs.n || tw_now_ms() >= deadline) {
			if (!quiet) {
				fprintf(stderr, "%s: no active mgrd%s:",
					progname, unreachable >= ctl->mgrs.n ?
					"" : " (waited mgr_timeout)");
				for (int j = 0; j < ctl->mgrs.n; j++)
					fprintf(stderr, "%s %s: %s", j ? ";" : "",
						tw_mgrlist_name(&ctl->mgrs, j,
								name,
								sizeof(name)),
						*why[j] ? why[j] : "not tried");
				fprintf(stderr, "\n");
			}
			return rc < 0 ? rc : -EREMOTE;
		}
		/* never 0: tw_mgrlist_failed takes 0 for its own 2 s cap */
		now = tw_now_ms();
		left = now < deadline ? deadline - now : 1;
		delay = tw_mgrlist_failed(&ctl->mgrs, o, why[i], NULL,
					  (uint32_t)TW_MIN(left,
							   CTL_BACKOFF_MAX_MS));
		if (delay)
			usleep(delay * 1000u);
	}
}

int ctl_connect_mgrd(struct ctl *ctl, struct wire_sync **out)
{
	return ctl_connect_mgrd_q(ctl, false, out);
}

int ctl_mgrds(struct ctl *ctl, struct ctl_mgrd *out, int *n)
{
	mgrs_load(ctl);
	*n = ctl->mgrs.n ? ctl->mgrs.n : 1;
	for (int i = 0; i < *n; i++) {
		struct ctl_mgrd *m = &out[i];
		struct wire_sync *s = NULL;
		const char *host = ctl->mgrs.n ? ctl->mgrs.addr[i].host
					       : ctl->conf.mgr_host;
		int port = ctl->mgrs.n ? ctl->mgrs.addr[i].port
				       : ctl->conf.mgr_port;
		int rc;

		memset(m, 0, sizeof(*m));
		m->id = i + 1;
		if (ctl->mgrs.n)
			tw_mgr_addr_str(&ctl->mgrs.addr[i], m->addr,
					sizeof(m->addr));
		else
			snprintf(m->addr, sizeof(m->addr), "%s:%d", host, port);
		rc = connect_status(ctl, host, port, m, &s);
		if (rc == 0)
			wire_sync_close(s);
		if (rc < 0) {
			snprintf(m->role, sizeof(m->role), "down");
			m->rc = rc;
			m->known = false;
		}
	}
	return 0;
}

int ctl_connect_standby(struct ctl *ctl, struct wire_sync **out, char *addr,
			size_t len)
{
	mgrs_load(ctl);
	for (int i = 0; i < ctl->mgrs.n; i++) {
		const struct tw_mgr_addr *a = &ctl->mgrs.addr[i];
		struct ctl_mgrd st = { 0 };
		struct wire_sync *s = NULL;

		if (connect_status(ctl, a->host, a->port, &st, &s) < 0)
			continue;
		if (strcmp(st.role, "standby") == 0 &&
		    strcmp(st.peer_role, "active") == 0) {
			tw_mgr_addr_str(a, addr, len);
			*out = s;
			return 0;
		}
		wire_sync_close(s);
	}
	return -ENOENT;
}

/* ---------------------------------------------- twinfsctl mgrd switchover */

int ctl_mgrd_call_empty(struct ctl *ctl, uint16_t type, char *addr,
			size_t len)
{
	return ctl_mgrd_call_empty_q(ctl, type, addr, len, false);
}

int ctl_mgrd_call_empty_q(struct ctl *ctl, uint16_t type, char *addr,
			  size_t len, bool quiet)
{
	Twinfs__Empty empty = TWINFS__EMPTY__INIT;
	struct wire_sync *mgr = NULL;
	struct wire_msg *reply = NULL;
	int rc;

	rc = ctl_connect_mgrd(ctl, &mgr);
	if (rc < 0)
		return rc;
	snprintf(addr, len, "%s", ctl_mgrd_addr(ctl));
	rc = ctl_call(mgr, "mgrd", addr, type, &empty.base, &reply, quiet);
	if (reply)
		wire_msg_free(reply);
	wire_sync_close(mgr);
	return rc;
}

int cmd_mgrd(struct ctl *ctl, int argc, char **argv)
{
	struct wire_sync *mgr = NULL;
	char old[TW_HOST_MAX + 16];
	uint32_t t;
	int rc;

	if (argc != 2 || strcmp(argv[1], "switchover") != 0) {
		fprintf(stderr, "usage: %s mgrd switchover\n", progname);
		return EXIT_USAGE;
	}
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	/* Answered once the standby took over: that takes an election,
	 * longer than one request. */
	t = ctl->timeout_ms;
	ctl->timeout_ms = TW_MAX(t, 60000u);
	/* -EAGAIN: the standby is not (yet) one that can win; it usually
	 * is within a renewal period of catching up.  Bounded: 20 s. */
	for (int i = 0; i < 40; i++) {
		rc = ctl_mgrd_call_empty_q(ctl,
					   TWINFS__MSG_TYPE__MSG_MGRD_SWITCHOVER,
					   old, sizeof(old), true);
		if (rc != -EAGAIN)
			break;
		if (i == 0)
			printf("switchover: waiting (up to 20 s) for the standby "
			       "to be in sync and known so to the voters\n");
		usleep(500 * 1000);
	}
	ctl->timeout_ms = t;
	if (rc == -EAGAIN) {
		fprintf(stderr, "%s: switchover refused by mgrd %s: the standby "
			"is not in sync (see twinfsctl status: its role and "
			"lag)\n", progname, old);
		return EXIT_FAIL;
	}
	if (rc == -EOPNOTSUPP) {
		fprintf(stderr, "%s: switchover: mgrd %s has no standby (the "
			"config names one mgrd)\n", progname, old);
		return EXIT_FAIL;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: switchover: mgrd %s: %s\n", progname, old,
			strerror(-rc));
		return EXIT_FAIL;
	}
	/* The old active answers admins until it exits: wait (bounded,
	 * 20 s) for the other one to be found active. */
	for (int i = 0;; i++) {
		*ctl->mgr_addr = '\0';
		rc = ctl_connect_mgrd_q(ctl, true, &mgr);
		if (rc == 0) {
			wire_sync_close(mgr);
			if (strcmp(ctl_mgrd_addr(ctl), old) != 0)
				break;
		}
		if (i == 100) {
			printf("switchover: mgrd %s stepped down; no other "
			       "active mgrd answers after 20 s\n", old);
			return EXIT_FAIL;
		}
		usleep(200 * 1000);
	}
	printf("switchover: done; the active is now mgrd %d at %s (was %s)\n",
	       ctl->mgrs.cur + 1, ctl_mgrd_addr(ctl), old);
	return EXIT_OK;
}
