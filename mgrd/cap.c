/* cap.c - the data-path capabilities mgrd issues (proto/FORMAT.md
 * "Capabilities"): sealed with the cluster secret's cap key for a live
 * client session and one inode, read or write, valid for
 * [cluster] cap_lifetime.  They ride in OpenReply and in the Entry of a
 * MKNOD with open=true, and are fetched again with MSG_CAP (renewal,
 * page-cache writeback after a release, a trunc_gen the old cap predates).
 *
 * Without a cluster secret there are no caps: the cluster is the loopback
 * dev mode, where the iods demand none (docs/SECURITY.md).  Nothing here
 * is journaled: a cap is a pure function of the state and the clock,
 * and an mgrd restart with the same secret issues the same kind.
 */
#include "server_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

/* The key is derived once: it depends only on the secret. */
static uint8_t cap_key[WIRE_CAP_KEY_LEN];
static bool cap_key_set;

int mgr_cap_init(const struct tw_conf *conf)
{
	int rc;

	cap_key_set = false;
	if (!conf->secret[0])
		return 0;
	rc = wire_cap_key(conf->secret, cap_key);
	if (rc < 0)
		return rc;
	cap_key_set = true;
	return 0;
}

bool mgr_cap_enabled(void)
{
	return cap_key_set;
}

/* Whether session holds an open handle of ino that allows write (or any
 * handle, for a read cap). */
static bool holds_handle(const struct mgr_session *sess, uint64_t ino,
			 bool write)
{
	uint64_t k;
	void *v;

	for (size_t it = 0; tw_hmap_next(&sess->handles, &it, &k, &v);) {
		const struct mgr_handle *fh = v;

		if (fh->ino == ino &&
		    (!write || (fh->flags & O_ACCMODE) != O_RDONLY))
			return true;
	}
	return false;
}

int mgr_cap_issue(const struct mgr_server *s, uint64_t session,
		  const struct mgr_inode *in, bool write, uint8_t *out,
		  uint32_t *lifetime_ms)
{
	struct wire_cap cap = { 0 };
	const struct mgr_session *sess;

	if (!cap_key_set)
		return -EOPNOTSUPP;
	/* An expired session is gone from the table (and fenced): its
	 * client gets no cap until it holds a new session. */
	sess = session ? mgr_session_get(&s->st.sessions, session) : NULL;
	if (!sess)
		return -EKEYEXPIRED;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	/* A read-only identity's session gets read caps only (proto/FORMAT.md
	 * "Client identities": access = ro). */
	if (write && !mgr_session_may_write(sess))
		return -EROFS;
	cap.flags = write ? WIRE_CAP_F_WRITE : 0;
	cap.session = session;
	cap.ino = in->ino;
	cap.trunc_gen = in->trunc_gen;
	cap.expiry_ms = wire_realtime_ms() + s->conf->cap_lifetime_ms;
	*lifetime_ms = s->conf->cap_lifetime_ms;
	return wire_cap_seal(cap_key, &cap, out);
}

void mgr_cap_handle(struct mgr_server *s, struct wire_conn *c,
		    struct wire_msg *m)
{
	const Twinfs__Cap *q = (const Twinfs__Cap *)m->body;
	const struct mgr_conn *mc = wire_conn_get_data(c);
	Twinfs__CapReply r = TWINFS__CAP_REPLY__INIT;
	uint8_t blob[WIRE_CAP_LEN];
	const struct mgr_session *sess;
	const struct mgr_inode *in;
	uint32_t groups[MGR_CRED_GROUPS_MAX];
	struct mgr_cred cr;
	uint64_t session;
	int rc;

	if (!cap_key_set) {
		mgr_srv_reply(c, &m->hdr, -EOPNOTSUPP, NULL);
		return;
	}
	session = q->ctx ? q->ctx->session : 0;
	/* Only for the session this connection is bound to (as every
	 * exactly-once request, server.c mgr_srv_dup_check). */
	if (!mc || !session || mc->session != session) {
		tw_log_rl(TW_LOG_WARN, "mgrd: %s asked a cap for ino %" PRIu64
			  " in the name of session %" PRIu64 ", but its "
			  "connection holds session %" PRIu64 ": refused",
			  wire_conn_peer(c), q->ino, session,
			  mc ? mc->session : 0);
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	sess = mgr_session_get(&s->st.sessions, session);
	in = mgr_ns_get(&s->st.ns, q->ino);
	if (!sess) {
		rc = -EKEYEXPIRED;
	} else if (!in) {
		rc = -ESTALE;
	} else if (!S_ISREG(in->mode)) {
		rc = -EINVAL;
	} else if (holds_handle(sess, in->ino, q->write)) {
		rc = 0;   /* the open already passed OPEN's check */
	} else {
		mgr_srv_cred(s, q->ctx, &cr, groups);
		rc = mgr_perm_open(&cr, in, q->write ? O_WRONLY : O_RDONLY);
	}
	if (rc == 0)
		rc = mgr_cap_issue(s, session, in, q->write, blob,
				   &r.lifetime_ms);
	if (rc == 0) {
		r.cap.data = blob;
		r.cap.len = sizeof(blob);
	}
	mgr_srv_reply(c, &m->hdr, rc, rc == 0 ? &r.base : NULL);
}
