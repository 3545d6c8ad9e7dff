/* wire_cap.c - data-path capabilities: the blob mgrd seals and the iods
 * open (proto/FORMAT.md "Capabilities", byte by byte).  This file only
 * builds and checks the bytes; who issues a cap and when lives in
 * mgrd/cap.c, what an iod demands of one in iod/server.c.
 *
 * The MAC is HMAC-SHA256 under K_cap = HMAC-SHA256(cluster secret,
 * "twinfs-cap-key"), truncated to WIRE_CAP_MAC_LEN bytes and compared in
 * constant time: a cap is valid when its length, version and reserved
 * bytes are right and its MAC is the one K_cap gives its first
 * WIRE_CAP_BODY_LEN bytes.  Expiry and the fields' meaning are the
 * caller's to judge.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "wire.h"

#define CAP_KEY_LABEL "twinfs-cap-key"

_Static_assert(WIRE_CAP_BODY_LEN + WIRE_CAP_MAC_LEN == WIRE_CAP_LEN,
	       "cap layout");

int wire_cap_key(const char *secret, uint8_t key[WIRE_CAP_KEY_LEN])
{
	unsigned int olen = 0;

	if (!secret || !secret[0])
		return -EINVAL;
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret),
		  (const uint8_t *)CAP_KEY_LABEL, strlen(CAP_KEY_LABEL), key,
		  &olen) || olen != WIRE_CAP_KEY_LEN)
		return -EIO;
	return 0;
}

static int cap_mac(const uint8_t key[WIRE_CAP_KEY_LEN],
		   const uint8_t body[WIRE_CAP_BODY_LEN],
		   uint8_t mac[WIRE_CAP_MAC_LEN])
{
	uint8_t full[EVP_MAX_MD_SIZE];
	unsigned int olen = 0;

	if (!HMAC(EVP_sha256(), key, WIRE_CAP_KEY_LEN, body, WIRE_CAP_BODY_LEN,
		  full, &olen) || olen < WIRE_CAP_MAC_LEN)
		return -EIO;
	memcpy(mac, full, WIRE_CAP_MAC_LEN);
	return 0;
}

int wire_cap_seal(const uint8_t key[WIRE_CAP_KEY_LEN],
		  const struct wire_cap *cap, uint8_t out[WIRE_CAP_LEN])
{
	memset(out, 0, WIRE_CAP_LEN);
	out[0] = WIRE_CAP_VERSION;
	out[1] = cap->flags & WIRE_CAP_F_KNOWN;
	tw_put_le64(out + 4, cap->session);
	tw_put_le64(out + 12, cap->ino);
	tw_put_le64(out + 20, cap->trunc_gen);
	tw_put_le64(out + 28, cap->expiry_ms);
	return cap_mac(key, out, out + WIRE_CAP_BODY_LEN);
}

int wire_cap_open(const uint8_t key[WIRE_CAP_KEY_LEN], const uint8_t *blob,
		  size_t len, struct wire_cap *cap)
{
	uint8_t mac[WIRE_CAP_MAC_LEN];
	int rc;

	/* protobuf-c leaves an absent bytes field NULL with len 0. */
	if (!blob || len != WIRE_CAP_LEN || blob[0] != WIRE_CAP_VERSION ||
	    (blob[1] & ~WIRE_CAP_F_KNOWN) || blob[2] || blob[3])
		return -EPROTO;
	rc = cap_mac(key, blob, mac);
	if (rc < 0)
		return rc;
	if (CRYPTO_memcmp(mac, blob + WIRE_CAP_BODY_LEN, WIRE_CAP_MAC_LEN))
		return -EBADMSG;
	cap->flags = blob[1];
	cap->session = tw_get_le64(blob + 4);
	cap->ino = tw_get_le64(blob + 12);
	cap->trunc_gen = tw_get_le64(blob + 20);
	cap->expiry_ms = tw_get_le64(blob + 28);
	return 0;
}

uint64_t wire_realtime_ms(void)
{
	int64_t sec;
	uint32_t nsec;

	tw_realtime(&sec, &nsec);
	return sec < 0 ? 0 : (uint64_t)sec * 1000 + nsec / 1000000;
}
