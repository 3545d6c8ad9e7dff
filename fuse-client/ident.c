/* ident.c - the client's identity (proto/FORMAT.md "Client identities",
 * "Tickets", "Exports"): the ticket mgrd issues for the iods, its renewal,
 * and the subtree mount's inode swap at the mgrd boundary.
 *
 * The key (-o keyfile=) is proved to mgrd by the wire layer (mgr.c gives
 * it to both mgrd peers).  mgrd answers with a ticket whose session key
 * Ks is wrapped with that key; Ks and the ticket go to every iod peer
 * (wire_peer_set_identity) and are proved on its next connection.
 * Connections already made stay as they are: an iod checks a ticket only
 * at AUTH.
 *
 * Subtree mounts: FUSE's root is inode 1; mgrd's root of the subtree is
 * root_ino.  Requests to mgrd and their replies swap the two (fc_call,
 * mgr.c), so the kernel sees a bijection and the rest of the client never
 * knows.  Inode numbers at the iods are the real ones: only directories
 * are swapped, and directories have no data.
 *
 * Everything here runs on the loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ident.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"

void fc_ident_hello(struct fc_client *cl, const Twinfs__HelloReply *r)
{
	uint64_t root = r->root_ino ? r->root_ino : FUSE_ROOT_ID;

	if (cl->root_ino && root != cl->root_ino)
		/* The subtree's directory was replaced while we were away:
		 * inode numbers are never reused, so ours is gone. */
		tw_warn("mgrd: the mounted subtree %s is now inode %" PRIu64
			" (was %" PRIu64 "); paths under it are stale",
			cl->opts.subdir ? cl->opts.subdir : "/", root,
			cl->root_ino);
	else
		cl->root_ino = root;
	if (r->read_only && !cl->read_only)
		tw_info("mgrd: identity '%s' is read-only (access = ro): "
			"every change fails with EROFS", cl->opts.ident);
	cl->read_only = r->read_only;
	if (r->ticket)
		fc_ident_ticket(cl, r->ticket);
}

int fc_ident_ticket(struct fc_client *cl, const Twinfs__Ticket *t)
{
	size_t plen = strlen(WIRE_TICKET_PREFIX);
	uint8_t ks[WIRE_TICKET_KEY_LEN];
	uint64_t now = wire_realtime_ms(), life;
	Twinfs__Hello h;
	int rc;

	if (!cl->opts.has_ident || t->ticket.len > WIRE_TICKET_MAX ||
	    t->ticket.len == 0 || t->wrapped_key.len != WIRE_TICKET_KEY_LEN)
		return -EPROTO;
	rc = wire_ticket_wrap(cl->opts.ident_key, TW_CLIENT_KEY_LEN,
			      t->ticket.data, t->ticket.len,
			      t->wrapped_key.data, ks);
	if (rc < 0)
		return rc;
	memcpy(cl->tkt_id, WIRE_TICKET_PREFIX, plen);
	memcpy(cl->tkt_id + plen, t->ticket.data, t->ticket.len);
	cl->tkt_id_len = plen + t->ticket.len;
	memcpy(cl->tkt_key, ks, sizeof(ks));
	explicit_bzero(ks, sizeof(ks));
	cl->tkt_session = cl->session;
	/* Renew at half its life (at least a minute ahead of expiry when it
	 * lives longer than two): the ping timer looks at this. */
	life = t->expiry_ms > now ? t->expiry_ms - now : 0;
	cl->tkt_renew_ms = now + life / 2;
	fc_mgr_fill_iod_hello(cl, &h);
	for (uint32_t id = 1; id <= TW_MAX_IODS; id++) {
		struct wire_peer *p = cl->iods[id].peer;

		if (!p)
			continue;
		wire_peer_set_hello(p, &h);
		wire_peer_set_identity(p, cl->tkt_id, cl->tkt_id_len,
				       cl->tkt_key, WIRE_TICKET_KEY_LEN);
	}
	return 0;
}

static void renew_cb(int status, struct wire_msg *reply, void *arg)
{
	struct fc_client *cl = arg;

	cl->tkt_renewing = false;
	if (status == 0 && reply->body->descriptor == &twinfs__ticket__descriptor)
		status = fc_ident_ticket(cl, (const Twinfs__Ticket *)reply->body);
	if (status < 0)
		tw_log_rl(TW_LOG_WARN, "mgrd: renewing the ticket for the "
			  "iods failed: %s; trying again at the next ping",
			  strerror(-status));
	if (reply)
		wire_msg_free(reply);
}

void fc_ident_renew(struct fc_client *cl)
{
	static Twinfs__Empty empty = TWINFS__EMPTY__INIT;

	if (!cl->tkt_renew_ms || cl->tkt_renewing || !cl->ctl_ok ||
	    wire_realtime_ms() < cl->tkt_renew_ms)
		return;
	cl->tkt_renewing = true;
	fc_call(cl, cl->ctl, TWINFS__MSG_TYPE__MSG_TICKET, &empty.base, NULL,
		0, cl->opts.request_timeout_ms, renew_cb, cl);
}

static uint64_t swap1(const struct fc_client *cl, uint64_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return cl->root_ino;
	if (ino == cl->root_ino)
		return FUSE_ROOT_ID;
	return ino;
}

void fc_ident_swap(const struct fc_client *cl, ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d;

	if (!m || cl->root_ino <= FUSE_ROOT_ID)
		return;
	d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *at = (char *)m + f->offset;

		if (f->type == PROTOBUF_C_TYPE_UINT64 &&
		    f->label != PROTOBUF_C_LABEL_REPEATED &&
		    (!strcmp(f->name, "ino") || !strcmp(f->name, "parent") ||
		     !strcmp(f->name, "newparent") ||
		     !strcmp(f->name, "gone_ino"))) {
			uint64_t v;

			memcpy(&v, at, sizeof(v));
			v = swap1(cl, v);
			memcpy(at, &v, sizeof(v));
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
			   f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n;
			ProtobufCMessage **sub;

			memcpy(&n, (char *)m + f->quantifier_offset, sizeof(n));
			memcpy(&sub, at, sizeof(sub));
			for (size_t j = 0; j < n; j++)
				fc_ident_swap(cl, sub[j]);
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			ProtobufCMessage *sub;

			memcpy(&sub, at, sizeof(sub));
			fc_ident_swap(cl, sub);
		}
	}
}
