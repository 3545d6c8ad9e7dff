/* wire_seal.c - sealed frames: what protects every frame after AUTH
 * (proto/FORMAT.md §1 "Sealed frames" and §2 "Channel protection").
 *
 * After AUTH step 2 both sides derive one key per direction from the key
 * AUTH proved (the cluster secret or an identity's) and both nonces:
 *
 *   key_c2s = HMAC-SHA256(K, "twinfs-channel-c2s" || mode || Nc || Ns)
 *   key_s2c = HMAC-SHA256(K, "twinfs-channel-s2c" || mode || Nc || Ns)
 *
 * and every later frame carries a 16-byte AES-256-GCM tag after its data.
 * The 96-bit nonce is the direction (4 bytes) and that direction's frame
 * counter (8 bytes, from 0), both little-endian; neither travels: each side
 * counts the frames it sealed and opened, so a replayed, reordered or
 * dropped frame is opened under the wrong nonce and fails.
 *
 *   integrity  GMAC: header, body and data are all additional data,
 *              nothing is encrypted, so zero-copy data is only read.
 *   encrypt    the header is additional data, body || data the plaintext,
 *              encrypted in place (zero-copy data into a copy).
 *
 * AES-GCM comes from OpenSSL's libcrypto (EVP), as HMAC does for AUTH: its
 * AES-NI and carry-less-multiply code is reviewed, constant-time and some
 * ten times faster than a portable one of ours would be.
 *
 * Not here: choosing the mode and proving it (wire_conn.c on_auth,
 * wire_peer.c on_auth_reply, wire_auth.c), nor where frames are read and
 * written (wire_codec.c calls wire_seal_frame and wire_seal_open).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "wire_int.h"

#define SEAL_KEY_LEN   32
#define SEAL_IV_LEN    12
#define SEAL_LABEL_C2S "twinfs-channel-c2s"
#define SEAL_LABEL_S2C "twinfs-channel-s2c"
#define SEAL_DIR_C2S   1u
#define SEAL_DIR_S2C   2u

_Static_assert(TW_CHANNEL_NONE < TW_CHANNEL_INTEGRITY &&
	       TW_CHANNEL_INTEGRITY < TW_CHANNEL_ENCRYPT,
	       "modes are ordered by strength: the chosen one is the max");

struct wire_seal {
	EVP_CIPHER_CTX *ctx;    /* AES-256-GCM, key set: encrypts (tx) or
				 * decrypts (rx) */
	enum tw_channel mode;   /* integrity or encrypt */
	bool tx;
	uint32_t dir;           /* SEAL_DIR_*: the nonce's first 4 bytes */
	uint64_t counter;       /* the next frame's */
};

bool wire_channel_valid(uint32_t m)
{
	return m >= TW_CHANNEL_NONE && m <= TW_CHANNEL_ENCRYPT;
}

enum tw_channel wire_channel_choose(enum tw_channel cmin, enum tw_channel smin)
{
	assert(wire_channel_valid(cmin) && wire_channel_valid(smin));
	return cmin > smin ? cmin : smin;
}

void wire_channel_bind(uint8_t out[WIRE_BIND_LEN], enum tw_channel cmin,
		       enum tw_channel smin, enum tw_channel chosen)
{
	out[0] = (uint8_t)cmin;
	out[1] = (uint8_t)smin;
	out[2] = (uint8_t)chosen;
}

void wire_seal_free(struct wire_seal *s)
{
	if (!s)
		return;
	EVP_CIPHER_CTX_free(s->ctx);   /* clears the key schedule */
	free(s);
}

static int seal_new(enum tw_channel mode, const uint8_t *key, size_t key_len,
		    const char *label, const uint8_t nc[WIRE_NONCE_LEN],
		    const uint8_t ns[WIRE_NONCE_LEN], bool tx, uint32_t dir,
		    struct wire_seal **out)
{
	uint8_t msg[32 + 1 + 2 * WIRE_NONCE_LEN], k[SEAL_KEY_LEN];
	size_t llen = strlen(label);
	unsigned int klen = 0;
	struct wire_seal *s;
	int ok;

	assert(llen <= 32 && key_len <= WIRE_KEY_MAX);
	memcpy(msg, label, llen);
	msg[llen] = (uint8_t)mode;
	memcpy(msg + llen + 1, nc, WIRE_NONCE_LEN);
	memcpy(msg + llen + 1 + WIRE_NONCE_LEN, ns, WIRE_NONCE_LEN);
	if (!HMAC(EVP_sha256(), key, (int)key_len, msg,
		  llen + 1 + 2 * WIRE_NONCE_LEN, k, &klen) ||
	    klen != SEAL_KEY_LEN)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s) {
		explicit_bzero(k, sizeof(k));
		return -ENOMEM;
	}
	s->mode = mode;
	s->tx = tx;
	s->dir = dir;
	s->ctx = EVP_CIPHER_CTX_new();
	ok = s->ctx && (tx ? EVP_EncryptInit_ex(s->ctx, EVP_aes_256_gcm(),
						NULL, k, NULL)
			   : EVP_DecryptInit_ex(s->ctx, EVP_aes_256_gcm(),
						NULL, k, NULL));
	explicit_bzero(k, sizeof(k));
	if (!ok) {
		wire_seal_free(s);
		return -EIO;
	}
	*out = s;
	return 0;
}

int wire_seal_start(enum tw_channel mode, const uint8_t *key, size_t key_len,
		    const uint8_t nc[WIRE_NONCE_LEN],
		    const uint8_t ns[WIRE_NONCE_LEN], bool server,
		    struct wire_seal **tx, struct wire_seal **rx)
{
	struct wire_seal *c2s = NULL, *s2c = NULL;
	int rc;

	assert(mode == TW_CHANNEL_INTEGRITY || mode == TW_CHANNEL_ENCRYPT);
	rc = seal_new(mode, key, key_len, SEAL_LABEL_C2S, nc, ns, !server,
		      SEAL_DIR_C2S, &c2s);
	if (rc == 0)
		rc = seal_new(mode, key, key_len, SEAL_LABEL_S2C, nc, ns,
			      server, SEAL_DIR_S2C, &s2c);
	if (rc < 0) {
		wire_seal_free(c2s);
		return rc;
	}
	*tx = server ? s2c : c2s;
	*rx = server ? c2s : s2c;
	return 0;
}

static void seal_iv(const struct wire_seal *s, uint8_t iv[SEAL_IV_LEN])
{
	for (int i = 0; i < 4; i++)
		iv[i] = (uint8_t)(s->dir >> (8 * i));
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(s->counter >> (8 * i));
}

/* Additional data; libcrypto's GCM takes it in any number of pieces
 * before the first plaintext. */
static bool seal_aad(struct wire_seal *s, const void *p, size_t len)
{
	int n;

	if (len == 0)
		return true;
	assert(len <= INT32_MAX);
	return s->tx ? EVP_EncryptUpdate(s->ctx, NULL, &n, p, (int)len)
		     : EVP_DecryptUpdate(s->ctx, NULL, &n, p, (int)len);
}

/* GCM is a stream cipher: out gets exactly len bytes (out may be in). */
static bool seal_crypt(struct wire_seal *s, uint8_t *out, const uint8_t *in,
		       size_t len)
{
	int n = 0;
	bool ok;

	if (len == 0)
		return true;
	assert(len <= INT32_MAX);
	ok = s->tx ? EVP_EncryptUpdate(s->ctx, out, &n, in, (int)len)
		   : EVP_DecryptUpdate(s->ctx, out, &n, in, (int)len);
	return ok && (size_t)n == len;
}

int wire_seal_frame(struct wire_seal *s, uint8_t *buf, size_t len,
		    const struct wire_zdata *z, uint8_t **zcopy,
		    uint8_t tag[WIRE_TAG_LEN])
{
	size_t zlen = z ? z->len : 0;
	uint8_t iv[SEAL_IV_LEN], *copy = NULL;
	bool ok;
	int n;

	assert(s->tx && len >= WIRE_HDR_SIZE);
	*zcopy = NULL;
	/* 2^64 frames is centuries at any rate; never reuse a nonce. */
	if (s->counter == UINT64_MAX)
		return -EOVERFLOW;
	seal_iv(s, iv);
	ok = EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, iv);
	if (s->mode == TW_CHANNEL_INTEGRITY) {
		ok = ok && seal_aad(s, buf, len) &&
		     (zlen == 0 || seal_aad(s, z->base, zlen));
	} else {
		if (zlen && !(copy = malloc(zlen)))
			return -ENOMEM;
		ok = ok && seal_aad(s, buf, WIRE_HDR_SIZE) &&
		     seal_crypt(s, buf + WIRE_HDR_SIZE, buf + WIRE_HDR_SIZE,
				len - WIRE_HDR_SIZE) &&
		     (zlen == 0 || seal_crypt(s, copy, z->base, zlen));
	}
	ok = ok && EVP_EncryptFinal_ex(s->ctx, iv, &n) &&
	     EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, WIRE_TAG_LEN,
				 tag);
	if (!ok) {
		free(copy);
		return -EIO;
	}
	s->counter++;
	*zcopy = copy;
	return 0;
}

int wire_seal_open(struct wire_seal *s, const uint8_t hdr[WIRE_HDR_SIZE],
		   uint8_t *msg, size_t msg_len, uint8_t *data,
		   size_t data_len, const uint8_t tag[WIRE_TAG_LEN])
{
	uint8_t iv[SEAL_IV_LEN], want[WIRE_TAG_LEN];
	bool ok;
	int n;

	assert(!s->tx);
	if (s->counter == UINT64_MAX)
		return -EBADMSG;
	seal_iv(s, iv);
	memcpy(want, tag, WIRE_TAG_LEN);   /* the ctrl takes a non-const */
	ok = EVP_DecryptInit_ex(s->ctx, NULL, NULL, NULL, iv) &&
	     seal_aad(s, hdr, WIRE_HDR_SIZE);
	if (s->mode == TW_CHANNEL_INTEGRITY)
		ok = ok && seal_aad(s, msg, msg_len) &&
		     seal_aad(s, data, data_len);
	else
		ok = ok && seal_crypt(s, msg, msg, msg_len) &&
		     seal_crypt(s, data, data, data_len);
	/* DecryptFinal compares the tag in constant time. */
	ok = ok && EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_TAG,
				       WIRE_TAG_LEN, want) &&
	     EVP_DecryptFinal_ex(s->ctx, iv, &n) > 0;
	if (!ok)
		return -EBADMSG;
	s->counter++;
	return 0;
}

void wire_channel_announce(const char *who, enum tw_channel mode, bool keyed)
{
	if (!keyed)
		tw_log(TW_LOG_WARN, "%s: no key to prove (no [cluster] "
		       "secret): connections are not authenticated and their "
		       "frames are neither authenticated nor encrypted; anyone "
		       "on the path can read and change data and requests "
		       "(loopback-only development mode)", who);
	else if (mode == TW_CHANNEL_NONE)
		tw_log(TW_LOG_WARN, "%s: channel = none: frames after AUTH "
		       "are neither authenticated nor encrypted; anyone on the "
		       "path between hosts can read and change data and "
		       "requests", who);
	else
		tw_log(TW_LOG_INFO, "%s: frames after AUTH: at least %s",
		       who, tw_channel_name(mode));
}
