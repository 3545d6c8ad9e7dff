/* wire_ticket.c - the tickets mgrd issues to authenticated clients and
 * iods check (proto/FORMAT.md "Tickets"): the body's layout, its MAC, the
 * session key Ks derived from it and the wrapping that gives Ks only to
 * the holder of the client's key.
 *
 * Not here: who may have a ticket (mgrd/ident.c) and what an iod does
 * with one (iod/server.c).  All keys are HMAC-SHA256 outputs; MACs are
 * compared in constant time.
 *
 * Body, little-endian, 36 + n bytes, then a 32-byte MAC:
 *
 *   off  size  field
 *     0     1  version      1
 *     1     1  flags        bit 0: read-only identity; other bits 0
 *     2     1  name_len     n, 1..WIRE_TICKET_NAME_MAX
 *     3     1  reserved     0
 *     4     8  session      mgrd session id the ticket is bound to
 *    12     8  expiry_ms    CLOCK_REALTIME ms after which it is refused
 *    20    16  nonce        random: no two tickets share a Ks
 *    36     n  name         the identity ([client NAME]), no NUL
 *  36+n    32  mac          HMAC-SHA256(K_tkt, "twinfs-ticket-mac" || body)
 *
 * K_tkt = HMAC-SHA256(cluster secret, "twinfs-ticket-key");
 * Ks    = HMAC-SHA256(K_tkt, "twinfs-ticket-session" || body);
 * wrap  = Ks XOR HMAC-SHA256(client key, "twinfs-ticket-wrap" || body).
 * Validity rule: the length is 36 + name_len + 32 with name_len and the
 * reserved bits as above, version is 1, and the MAC matches; then it is
 * refused if now >= expiry_ms.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "wire.h"

#define TKT_HDR 36u

static const char LABEL_KEY[] = "twinfs-ticket-key";
static const char LABEL_MAC[] = "twinfs-ticket-mac";
static const char LABEL_SESSION[] = "twinfs-ticket-session";
static const char LABEL_WRAP[] = "twinfs-ticket-wrap";

/* HMAC-SHA256(key, label || msg); msg is at most a ticket body. */
static int hmac2(const uint8_t *key, size_t key_len, const char *label,
		 const uint8_t *msg, size_t msg_len, uint8_t out[32])
{
	uint8_t buf[32 + WIRE_TICKET_MAX];
	size_t llen = strlen(label);
	unsigned olen = 0;

	if (llen + msg_len > sizeof(buf))
		return -EINVAL;
	memcpy(buf, label, llen);
	if (msg_len)
		memcpy(buf + llen, msg, msg_len);
	if (!HMAC(EVP_sha256(), key, (int)key_len, buf, llen + msg_len, out,
		  &olen) || olen != 32)
		return -EIO;
	return 0;
}

int wire_ticket_master(const char *secret, uint8_t ktkt[WIRE_TICKET_KEY_LEN])
{
	if (!secret || !*secret)
		return -EINVAL;
	return hmac2((const uint8_t *)secret, strlen(secret), LABEL_KEY, NULL,
		     0, ktkt);
}

int wire_ticket_seal(const uint8_t ktkt[WIRE_TICKET_KEY_LEN],
		     const struct wire_ticket *t, uint8_t *out,
		     size_t *out_len, uint8_t ks[WIRE_TICKET_KEY_LEN])
{
	size_t n = strlen(t->name), body = TKT_HDR + n;
	int rc;

	if (n == 0 || n > WIRE_TICKET_NAME_MAX)
		return -EINVAL;
	out[0] = 1;
	out[1] = t->read_only ? 1 : 0;
	out[2] = (uint8_t)n;
	out[3] = 0;
	tw_put_le64(out + 4, t->session);
	tw_put_le64(out + 12, t->expiry_ms);
	memcpy(out + 20, t->nonce, WIRE_TICKET_NONCE_LEN);
	memcpy(out + TKT_HDR, t->name, n);
	rc = hmac2(ktkt, WIRE_TICKET_KEY_LEN, LABEL_MAC, out, body, out + body);
	if (rc == 0)
		rc = hmac2(ktkt, WIRE_TICKET_KEY_LEN, LABEL_SESSION, out, body,
			   ks);
	if (rc == 0)
		*out_len = body + WIRE_TICKET_MAC_LEN;
	return rc;
}

int wire_ticket_open(const uint8_t ktkt[WIRE_TICKET_KEY_LEN],
		     const uint8_t *buf, size_t len, uint64_t now_ms,
		     struct wire_ticket *t, uint8_t ks[WIRE_TICKET_KEY_LEN])
{
	uint8_t mac[WIRE_TICKET_MAC_LEN];
	size_t n, body;
	int rc;

	if (len < TKT_HDR + 1 + WIRE_TICKET_MAC_LEN || buf[0] != 1 ||
	    (buf[1] & ~1u) || buf[3] != 0)
		return -EPROTO;
	n = buf[2];
	body = TKT_HDR + n;
	if (n == 0 || n > WIRE_TICKET_NAME_MAX ||
	    len != body + WIRE_TICKET_MAC_LEN)
		return -EPROTO;
	rc = hmac2(ktkt, WIRE_TICKET_KEY_LEN, LABEL_MAC, buf, body, mac);
	if (rc < 0)
		return rc;
	if (CRYPTO_memcmp(mac, buf + body, WIRE_TICKET_MAC_LEN) != 0)
		return -EBADMSG;
	memset(t, 0, sizeof(*t));
	t->read_only = buf[1] & 1;
	t->session = tw_get_le64(buf + 4);
	t->expiry_ms = tw_get_le64(buf + 12);
	memcpy(t->nonce, buf + 20, WIRE_TICKET_NONCE_LEN);
	memcpy(t->name, buf + TKT_HDR, n);
	t->name[n] = '\0';
	if (memchr(t->name, '\0', n))
		return -EPROTO;
	if (now_ms >= t->expiry_ms)
		return -EKEYEXPIRED;
	return hmac2(ktkt, WIRE_TICKET_KEY_LEN, LABEL_SESSION, buf, body, ks);
}

int wire_ticket_wrap(const uint8_t *client_key, size_t key_len,
		     const uint8_t *ticket, size_t ticket_len,
		     const uint8_t in[WIRE_TICKET_KEY_LEN],
		     uint8_t out[WIRE_TICKET_KEY_LEN])
{
	uint8_t pad[WIRE_TICKET_KEY_LEN];
	int rc;

	if (ticket_len < TKT_HDR + WIRE_TICKET_MAC_LEN || key_len == 0)
		return -EINVAL;
	rc = hmac2(client_key, key_len, LABEL_WRAP, ticket,
		   ticket_len - WIRE_TICKET_MAC_LEN, pad);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < WIRE_TICKET_KEY_LEN; i++)
		out[i] = in[i] ^ pad[i];
	explicit_bzero(pad, sizeof(pad));
	return 0;
}

