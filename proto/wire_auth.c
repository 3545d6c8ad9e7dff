/* wire_auth.c - the proofs of the cluster secret exchanged in MSG_AUTH
 * (proto/FORMAT.md "Authentication"): HMAC-SHA256 keyed with the cluster
 * secret or an identity's key, over a label, both sides' nonces and the
 * channel modes negotiated alongside, compared in constant time.
 *
 * HMAC-SHA256 comes from OpenSSL's libcrypto: a maintained, reviewed
 * implementation beats one of our own for anything that guards access.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "wire_int.h"

int wire_auth_proof(const uint8_t *key, size_t key_len, const char *label,
		    const uint8_t first[WIRE_NONCE_LEN],
		    const uint8_t second[WIRE_NONCE_LEN],
		    const uint8_t bind[WIRE_BIND_LEN],
		    uint8_t out[WIRE_PROOF_LEN])
{
	uint8_t msg[32 + 2 * WIRE_NONCE_LEN + WIRE_BIND_LEN];
	size_t llen = strlen(label);
	unsigned int olen = 0;

	if (llen > 32)
		return -EINVAL;
	memcpy(msg, label, llen);
	memcpy(msg + llen, first, WIRE_NONCE_LEN);
	memcpy(msg + llen + WIRE_NONCE_LEN, second, WIRE_NONCE_LEN);
	memcpy(msg + llen + 2 * WIRE_NONCE_LEN, bind, WIRE_BIND_LEN);
	if (key_len > WIRE_KEY_MAX)
		return -EINVAL;
	if (!HMAC(EVP_sha256(), key, (int)key_len, msg,
		  llen + 2 * WIRE_NONCE_LEN + WIRE_BIND_LEN, out, &olen) ||
	    olen != WIRE_PROOF_LEN)
		return -EIO;
	return 0;
}

bool wire_auth_check(const uint8_t *key, size_t key_len, const char *label,
		     const uint8_t first[WIRE_NONCE_LEN],
		     const uint8_t second[WIRE_NONCE_LEN],
		     const uint8_t bind[WIRE_BIND_LEN],
		     const uint8_t *proof, size_t proof_len)
{
	uint8_t want[WIRE_PROOF_LEN];

	if (proof_len != WIRE_PROOF_LEN ||
	    wire_auth_proof(key, key_len, label, first, second, bind,
			    want) < 0)
		return false;
	return CRYPTO_memcmp(want, proof, WIRE_PROOF_LEN) == 0;
}

bool wire_host_is_loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strcmp(host, "localhost") ||
	       !strcmp(host, "::1");
}
