/* ident.h - the client's identity (ident.c): tickets for the iods, their
 * renewal, the subtree mount's inode swap. */
#ifndef TWINFS_FC_IDENT_H
#define TWINFS_FC_IDENT_H

#include "mount.h"

/* A HELLO reply from mgrd: the subtree's root, ro, and a new ticket. */
void fc_ident_hello(struct fc_client *cl, const Twinfs__HelloReply *r);
/* Take a ticket (HelloReply.ticket or a TICKET reply): unwrap Ks, and
 * give it to every iod peer for its next connections. */
int fc_ident_ticket(struct fc_client *cl, const Twinfs__Ticket *t);
/* From the ping timer: ask mgrd for a new ticket when it is due. */
void fc_ident_renew(struct fc_client *cl);
/* Swap inode 1 and the subtree's root in the ino, parent, newparent and
 * gone_ino fields of m and its sub-messages (an involution: applying it
 * twice restores m). */
void fc_ident_swap(const struct fc_client *cl, ProtobufCMessage *m);

#endif
