/* wire_int.h - internals shared by the files of libproto; never included
 * outside proto/.
 *
 * The frame reader is shared by the server side (wire_conn.c) and the client
 * side (wire_peer.c): it turns a byte stream into validated frames, checking
 * every header before it allocates anything for the body.
 */
#ifndef TWINFS_WIRE_INT_H
#define TWINFS_WIRE_INT_H

#include <errno.h>

#include "wire.h"

#define WIRE_RBUF_SIZE (64u << 10)
#define WIRE_TAG_LEN   16u

struct wire_seal;   /* one direction of a sealed connection (wire_seal.c) */

enum wire_rstate { WIRE_R_HDR, WIRE_R_MSG, WIRE_R_DATA, WIRE_R_TAG };

struct wire_reader {
	enum wire_rstate state;
	uint8_t *rbuf;          /* staging buffer for headers and small bodies */
	size_t rlen;            /* bytes valid in rbuf */
	struct wire_hdr hdr;    /* header of the frame being read */
	uint8_t *msg;           /* body being filled (msg_len bytes) */
	uint8_t *data;          /* bulk being filled (data_len bytes) */
	size_t got;             /* bytes filled in the current part */
	bool first_seen;        /* a frame has been delivered */
	/* Bounds on the frames accepted now: WIRE_MAX_MSG and WIRE_MAX_DATA
	 * from wire_reader_init, lowered by the owner (a server takes only
	 * small frames before HELLO). */
	uint32_t max_msg, max_data;
	char why[96];           /* a reason with numbers in it (*why) */
	/* Opens every frame read from now on (a WIRE_TAG_LEN tag follows
	 * its data); NULL: frames are not sealed.  Owned: freed with the
	 * reader.  Set from inside a frame callback, it applies from the
	 * next frame on, including those already in rbuf. */
	struct wire_seal *seal;
	uint8_t hdr_raw[WIRE_HDR_SIZE]; /* the header as read (sealed data) */
	uint8_t tag[WIRE_TAG_LEN];
};

/* Called for each complete frame; takes ownership of m.  Return 0 to go on,
 * WIRE_R_PAUSE to stop delivering (the bytes already read stay in the
 * reader: a later wire_reader_feed(r, 0, ...) delivers them), or another
 * negative errno to stop reading (the reader's owner closes). */
#define WIRE_R_PAUSE (-EAGAIN)
typedef int (*wire_frame_cb)(struct wire_msg *m, void *arg);

int wire_reader_init(struct wire_reader *r);
void wire_reader_free(struct wire_reader *r);
/* The buffer libuv should read into next. */
void wire_reader_alloc(struct wire_reader *r, uv_buf_t *buf);
/* Account for n bytes just read into the buffer given by wire_reader_alloc
 * and deliver every complete frame.  Returns 0, the callback's error, or
 * -EPROTO / -ENOMEM with *why set to a reason (static, or r->why). */
int wire_reader_feed(struct wire_reader *r, size_t n, wire_frame_cb cb,
		     void *arg, const char **why);

/* Build one frame (header, packed body, copied data) in a single malloc'd
 * buffer.  Returns the buffer (free()) and sets *len, or NULL on -ENOMEM or
 * an oversized body/data (*err set). */
uint8_t *wire_frame_build(uint16_t type, uint32_t flags, int32_t status,
			  uint64_t req_id, const ProtobufCMessage *body,
			  const struct iovec *iov, int niov, size_t *len,
			  int *err);
/* The header and packed body of a frame whose data part (zlen bytes) the
 * caller sends separately (wire_stream_write_z). */
uint8_t *wire_frame_head(uint16_t type, uint32_t flags, int32_t status,
			 uint64_t req_id, const ProtobufCMessage *body,
			 size_t zlen, size_t *len, int *err);

/* Write a built frame on a stream; takes ownership of buf (freed when the
 * write completes).  done (may be NULL) runs after completion with the
 * status: from inside this call (status 0) when the socket took the whole
 * frame at once, else from the loop. */
int wire_stream_write(uv_stream_t *s, uint8_t *buf, size_t len,
		      void (*done)(void *arg, int status, size_t len),
		      void *arg);
/* The same, with z's data written after buf in one writev; z->release
 * runs when the write completes (or fails; possibly from inside this
 * call, as done), unless this returns an error.  z may be NULL. */
int wire_stream_write_z(uv_stream_t *s, uint8_t *buf, size_t len,
			const struct wire_zdata *z,
			void (*done)(void *arg, int status, size_t len),
			void *arg);
/* The same, sealed with seal (NULL: not sealed): every frame a sealed
 * connection sends goes through here, in the order it is written. */
int wire_stream_write_sealed(uv_stream_t *s, struct wire_seal *seal,
			     uint8_t *buf, size_t len,
			     const struct wire_zdata *z,
			     void (*done)(void *arg, int status, size_t len),
			     void *arg);

/* "1.2.3.4:5678" of a connected TCP handle's peer. */
void wire_peer_addr(uv_tcp_t *t, char *out, size_t outlen);

/* ------------------------------------------------------ authentication */

#define WIRE_NONCE_LEN 16
#define WIRE_PROOF_LEN 32
#define WIRE_LABEL_SERVER "twinfs-server"
#define WIRE_LABEL_CLIENT "twinfs-client"

#define WIRE_BIND_LEN 3

/* HMAC-SHA256(key, label || first || second || bind) into out; key_len <=
 * WIRE_KEY_MAX (the cluster secret is its string's bytes).  bind is what
 * else the proof vouches for: the channel modes (wire_channel_bind). */
int wire_auth_proof(const uint8_t *key, size_t key_len, const char *label,
		    const uint8_t first[WIRE_NONCE_LEN],
		    const uint8_t second[WIRE_NONCE_LEN],
		    const uint8_t bind[WIRE_BIND_LEN],
		    uint8_t out[WIRE_PROOF_LEN]);
/* Whether proof is that HMAC (constant-time compare). */
bool wire_auth_check(const uint8_t *key, size_t key_len, const char *label,
		     const uint8_t first[WIRE_NONCE_LEN],
		     const uint8_t second[WIRE_NONCE_LEN],
		     const uint8_t bind[WIRE_BIND_LEN],
		     const uint8_t *proof, size_t proof_len);

/* ------------------------------------------ sealed frames (wire_seal.c) */

/* Whether m is a mode a peer may state (none, integrity or encrypt). */
bool wire_channel_valid(uint32_t m);
/* The mode a connection runs: the stronger of both minimums. */
enum tw_channel wire_channel_choose(enum tw_channel cmin,
				   enum tw_channel smin);
/* The bytes both AUTH proofs cover: the connecting side's minimum, the
 * server's minimum and the mode chosen, so that a man in the middle who
 * rewrites any of them makes a proof fail. */
void wire_channel_bind(uint8_t out[WIRE_BIND_LEN], enum tw_channel cmin,
		       enum tw_channel smin, enum tw_channel chosen);
/* After AUTH step 2 succeeded with mode (integrity or encrypt): derive
 * both directions' keys from key and the nonces; *tx seals what this side
 * sends, *rx opens what it reads.  server: this side accepted the
 * connection.  Free both with wire_seal_free.  Returns 0 or -errno. */
int wire_seal_start(enum tw_channel mode, const uint8_t *key, size_t key_len,
		    const uint8_t nc[WIRE_NONCE_LEN],
		    const uint8_t ns[WIRE_NONCE_LEN], bool server,
		    struct wire_seal **tx, struct wire_seal **rx);
void wire_seal_free(struct wire_seal *s);
/* Seal the next frame this side writes: buf (len bytes: header, body,
 * copied data) and z's data (may be NULL), into tag.  Integrity: nothing
 * changes.  Encrypt: buf's body and data are encrypted in place, z's data
 * into *zcopy (malloc'd; the caller frees it after the write; NULL when
 * there is none).  Returns 0 or -errno. */
int wire_seal_frame(struct wire_seal *s, uint8_t *buf, size_t len,
		    const struct wire_zdata *z, uint8_t **zcopy,
		    uint8_t tag[WIRE_TAG_LEN]);
/* Open the next frame read: 0 when tag is right (encrypt: msg and data
 * decrypted in place), -EBADMSG when it is not (the frame was changed,
 * replayed, reordered or one before it lost). */
int wire_seal_open(struct wire_seal *s, const uint8_t hdr[WIRE_HDR_SIZE],
		   uint8_t *msg, size_t msg_len, uint8_t *data,
		   size_t data_len, const uint8_t tag[WIRE_TAG_LEN]);

#endif
