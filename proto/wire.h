/* wire.h - the whole public interface of libproto.
 *
 * Frames (format in proto/FORMAT.md): a 32-byte little-endian header, a
 * protobuf-c message (twinfs.proto), then raw bulk data.  On top of the codec,
 * connections over libuv TCP streams with pipelined, multiplexed requests:
 *
 *   server side:  wire_listen() -> on_request(conn, msg) -> wire_reply()
 *   client side:  wire_peer (one long-lived connection to host:port that
 *                 reconnects on demand and sends HELLO first) -> wire_call()
 *
 * Threading: every function except the codec (wire_hdr_*, wire_type_*) must
 * be called on the thread running the uv_loop the object was created on.
 *
 * Callback rule (libuv's): when a function that takes a callback returns an
 * error, the callback is never called; otherwise it is called exactly once.
 */
#ifndef TWINFS_WIRE_H
#define TWINFS_WIRE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

#include "common.h"          /* enum tw_channel */
#include "metrics.h"         /* struct tw_hist */
#include "twinfs.pb-c.h"

/* ------------------------------------------------------------ the frame */

#define WIRE_MAGIC        0x53465754u   /* "TWFS" as little-endian bytes */
#define WIRE_VERSION      10u           /* 2: Setattr.reports; 3: SizeReport.keep_times, reports in any SETATTR; 4: fencing (FENCE, Write/Fallocate.session); 5: file size limit (max_subfile_size, -EFBIG); 6: client identities and tickets (Auth.identity, MSG_TICKET, MSG_CLIENT_ADMIN), sealed frames (Auth.channel), capabilities (MSG_CAP, cap in OpenReply, Entry, Read, Write, Fallocate, Seek), refusal texts; 7: data integrity (Write and ReadReply data_crc, Report.bad_block, MSG_SCRUB); mgrd pair (ROLE_MGRD_PEER, Hello.mgrd_term, HelloReply.mgrd_id/mgrd_term/active_addr, MSG_MGRD_STATUS, MSG_MGRD_SWITCHOVER, MSG_REPL_*, MSG_MGRD_BACKUP), the election (MSG_LEASE); 8: the mgrd pair's catch-up from the active's log (MSG_REPL_CATCHUP, ReplPos.tail_n/tail_crc, replication index = record log seq); ScrubReply checksum counters and last scrub (twinfsctl status), a twin's READ of several blocks that fails heals the replier's bad blocks one by one; 9: a resync copies past blocks bad on its only readable copy (Write.bad_copy, ResyncProgress/ResyncReply/ResyncJob.unrepairable); 10: Attr.selinux_absent */
#define WIRE_HDR_SIZE     32u
#define WIRE_MAX_MSG      (1u << 20)    /* protobuf part, bytes */
#define WIRE_MAX_DATA     (8u << 20)    /* bulk part, bytes */
#define WIRE_F_REPLY      0x1u
#define WIRE_F_KNOWN      WIRE_F_REPLY  /* any other flag bit: -EPROTO */
#define WIRE_SETATTR_REPORTS_MAX 8u     /* Setattr.reports */
#define WIRE_FENCE_MAX    1024u         /* Fence.sessions */

struct wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;       /* TWINFS__MSG_TYPE__* */
	uint32_t flags;      /* WIRE_F_* */
	int32_t status;      /* replies: 0 or -errno; requests: 0 */
	uint64_t req_id;     /* chosen by the requester, echoed in the reply */
	uint32_t msg_len;    /* protobuf bytes that follow the header */
	uint32_t data_len;   /* bulk bytes that follow the protobuf */
	/* In memory only, never on the wire: tw_now_ns() when a server read
	 * this request (wire_conn.c), else 0.  It travels with the copies a
	 * daemon keeps for a late reply, so wire_reply can time the request
	 * (struct wire_stats). */
	uint64_t rx_ns;
};

void wire_hdr_encode(const struct wire_hdr *h, uint8_t out[WIRE_HDR_SIZE]);
/* Validates before anyone allocates: -EPROTO for bad magic, version, flags,
 * unknown type, msg_len > WIRE_MAX_MSG or data_len > WIRE_MAX_DATA, or a
 * nonzero status on a request. */
int wire_hdr_decode(const uint8_t in[WIRE_HDR_SIZE], struct wire_hdr *h);

/* The protobuf descriptor of a request (reply = false) or reply body of a
 * message type, or NULL when the type is unknown. */
const ProtobufCMessageDescriptor *wire_type_desc(uint16_t type, bool reply);
/* "WRITE", "LOOKUP", ... or "?" */
const char *wire_type_name(uint16_t type);
/* "client", "iod", "admin", "mgrd", or "?" (Role of twinfs.proto). */
const char *wire_role_name(int role);

/* Decode a body of a known type: returns a new message (free with
 * protobuf_c_message_free_unpacked(m, NULL)) or NULL if it does not decode. */
ProtobufCMessage *wire_body_decode(uint16_t type, bool reply,
				   const uint8_t *buf, size_t len);

/* --------------------------------------------------------- a received frame */

struct wire_msg {
	struct wire_hdr hdr;
	ProtobufCMessage *body;  /* decoded body, never NULL (empty message when
				  * msg_len is 0 or a reply carries an error) */
	uint8_t *data;           /* bulk data, data_len bytes, NULL if none */
	uint32_t data_len;
	/* private */
	uint8_t *buf_;
};
/* Frees body, data and the msg itself. */
void wire_msg_free(struct wire_msg *m);
/* Take ownership of the bulk buffer (caller frees with free()). */
uint8_t *wire_msg_take_data(struct wire_msg *m);
/* The iod an error reply to WRITE, TRUNCATE or FALLOCATE names as the one
 * where the request failed (FORMAT.md §1: the answering primary or its
 * twin); 0 when it names none, or for any other reply (m may be NULL). */
uint32_t wire_failed_iod(const struct wire_msg *m);

/* ------------------------------------------------------------ connections */

struct wire_conn;   /* one accepted connection (server side) */
struct wire_server;

struct wire_server_ops {
	/* A request arrived.  The callee owns `m` (wire_msg_free) and must
	 * answer it exactly once with wire_reply() on this conn, now or later;
	 * it may hold a reference (wire_conn_ref) across asynchronous work.
	 * HELLO is delivered here too: the server decides and replies. */
	void (*on_request)(struct wire_conn *c, struct wire_msg *m, void *arg);
	/* The connection closed (peer gone, or a protocol error).  Requests
	 * already delivered may still be answered; those replies are dropped. */
	void (*on_close)(struct wire_conn *c, void *arg);
};

/* Listen on host:port (IPv4 or IPv6 literal, or "localhost").
 * Returns 0 and sets *out, or -errno (e.g. -EADDRINUSE). */
int wire_listen(uv_loop_t *loop, const char *host, int port,
		const struct wire_server_ops *ops, void *arg,
		struct wire_server **out);
/* The cluster secret peers may prove with MSG_AUTH before HELLO (the wire
 * layer answers AUTH itself).  NULL or "" = none: AUTH is refused.
 * Copied.  Which roles must prove it is the daemon's decision, made in
 * its HELLO handler with wire_conn_authenticated(). */
int wire_server_set_secret(struct wire_server *s, const char *secret);
/* Resource limits of a server (proto/FORMAT.md section 2); 0 = none. */
struct wire_server_limits {
	/* Open connections; past it a new one is accepted and closed at
	 * once, with a rate-limited log line naming the peer. */
	uint32_t max_connections;
	/* A connection whose HELLO was not answered 0 within this is
	 * closed (AUTH included: it comes before HELLO). */
	uint32_t hello_timeout_ms;
	/* Reply bytes queued on one connection past which the server stops
	 * reading it, until they drain below half. */
	uint64_t max_queued_reply_bytes;
};
int wire_server_set_limits(struct wire_server *s,
			   const struct wire_server_limits *lim);
/* Identities other than the cluster's (proto/FORMAT.md "Authentication"):
 * a peer may name one in AUTH step 1 (Auth.identity, not empty) and prove
 * that identity's key instead of the cluster secret.  The server's key_fn
 * looks it up: it returns 0 with the key (key_len <= WIRE_KEY_MAX bytes)
 * and a principal (what the connection then is: malloc'd, owned by the
 * connection, freed with free() when it closes; may be NULL), or -EACCES
 * with *why set to a reason the refusal carries back to the peer ("unknown
 * client 'lab3'").  Without a key_fn every named identity is refused. */
#define WIRE_KEY_MAX      64u
#define WIRE_IDENTITY_MAX 512u
typedef int (*wire_key_fn)(struct wire_conn *c, const uint8_t *id,
			   size_t id_len, uint8_t key[WIRE_KEY_MAX],
			   size_t *key_len, void **principal,
			   const char **why, void *arg);
void wire_server_set_key_fn(struct wire_server *s, wire_key_fn fn, void *arg);
/* The weakest protection of frames after AUTH this server accepts
 * (proto/FORMAT.md "Channel protection"): a connection that authenticates
 * runs the stronger of this and the peer's minimum.  TW_CHANNEL_DEFAULT
 * (the initial value) is TW_CHANNEL_DEFAULT_MODE.  Connections that do no
 * AUTH are never sealed.  Returns 0, or -EINVAL for an unknown mode. */
int wire_server_set_channel(struct wire_server *s, enum tw_channel min);
/* The mode frames on c are protected with now: TW_CHANNEL_NONE until (and
 * unless) AUTH chose integrity or encrypt. */
enum tw_channel wire_conn_channel(const struct wire_conn *c);
/* The peer proved the cluster secret on this connection. */
bool wire_conn_authenticated(const struct wire_conn *c);
/* What the peer proved an identity's key for (key_fn's principal), or
 * NULL: it proved the cluster secret, or nothing. */
void *wire_conn_principal(const struct wire_conn *c);
/* What a server counts for the daemon's metrics (docs/OPERATIONS.md
 * "Metrics"), when the daemon gave it one with wire_server_set_stats:
 * requests by type (AUTH and HELLO included), the time from reading a
 * request to queueing its reply, bulk data bytes in requests and in
 * replies by type, bytes read and written on the sockets, connections.
 * Updated on the loop thread only. */
#define WIRE_STATS_TYPES 96   /* message types 0..95 (twinfs.proto) */
struct wire_stats {
	uint64_t requests[WIRE_STATS_TYPES];
	struct tw_hist latency[WIRE_STATS_TYPES];   /* seconds */
	uint64_t req_data_bytes[WIRE_STATS_TYPES];  /* e.g. WRITE's data */
	uint64_t reply_data_bytes[WIRE_STATS_TYPES];/* e.g. READ's data */
	uint64_t rx_bytes, tx_bytes;
	uint64_t conns_open;      /* accepted and not yet closing */
	uint64_t conns_accepted, conns_refused;
};
/* Count into *st (NULL: stop); st must outlive the server or the next
 * call.  Zero it before (all zeros is a valid wire_stats). */
void wire_server_set_stats(struct wire_server *s, struct wire_stats *st);
/* Write st as the families twinfs_requests_total{type},
 * twinfs_request_duration_seconds{type}, twinfs_received_bytes_total,
 * twinfs_sent_bytes_total, twinfs_connections and
 * twinfs_connections_{accepted,refused}_total, every sample with the
 * labels base[0, n) first (wire_stats.c). */
void wire_stats_write(struct tw_mx *x, const struct wire_stats *st,
		      const struct tw_label *base, size_t n);
/* The port actually bound (useful after listening on port 0). */
int wire_server_port(const struct wire_server *s);
/* Stop accepting and close every connection; `cb` runs when all handles are
 * closed (may be NULL). */
void wire_server_close(struct wire_server *s, void (*cb)(void *arg), void *arg);

/* Send a reply to request `req_id` of type `type`.  `body` may be NULL (an
 * empty body); with status < 0 only the few bodies FORMAT.md §1 allows, and
 * no data.  Data (iov, niov) is copied
 * before return.  A reply on a closed connection is dropped and returns
 * -ENOTCONN.  Returns 0 or -errno. */
int wire_reply(struct wire_conn *c, const struct wire_hdr *req, int32_t status,
	       const ProtobufCMessage *body, const struct iovec *iov, int niov);

/* Bulk data sent without a copy (wire_reply_z, wire_call_z): the frame's
 * data part is base[0, len), read straight from the caller's memory.  The
 * sender calls release(arg) exactly once when it no longer reads base:
 * after the frame was written to the socket or dropped unsent.  That may
 * be before or after the call's reply callback.  When the function that
 * took it returns an error, release is never called (the caller still
 * owns base).  A wire_reply/wire_call copy of 1 MiB costs about as much as
 * the socket's own copy of it. */
struct wire_zdata {
	const void *base;
	size_t len;
	void (*release)(void *arg);
	void *arg;
};

/* wire_reply with status 0 and the data part taken from *z (see above).
 * On an error return z stays the caller's; if the error is from building
 * the frame (-ENOMEM, -EMSGSIZE), the request was answered with it. */
int wire_reply_z(struct wire_conn *c, const struct wire_hdr *req,
		 const ProtobufCMessage *body, const struct wire_zdata *z);

void wire_conn_ref(struct wire_conn *c);
void wire_conn_unref(struct wire_conn *c);
bool wire_conn_is_open(const struct wire_conn *c);
/* "127.0.0.1:40122" */
const char *wire_conn_peer(const struct wire_conn *c);
/* Per-connection user data (e.g. the session or peer role after HELLO). */
void wire_conn_set_data(struct wire_conn *c, void *data);
void *wire_conn_get_data(const struct wire_conn *c);
/* Close the connection (after pending writes flush). */
void wire_conn_close(struct wire_conn *c);
/* Backpressure from the daemon: stop reading c's requests (the request
 * being handled completes; frames already read wait in its reader) until
 * wire_conn_release, which delivers them and reads the socket again.
 * Independent of the max_queued_reply_bytes pause: reading resumes only
 * when neither holds.  Hold and release are no-ops when repeated. */
void wire_conn_hold(struct wire_conn *c);
void wire_conn_release(struct wire_conn *c);
bool wire_conn_held(const struct wire_conn *c);
/* tw_now_ms() when the last frame (request or reply) arrived, or when the
 * connection was accepted: how long the peer has been silent. */
uint64_t wire_conn_last_rx_ms(const struct wire_conn *c);

/* Server-initiated message on an accepted connection (e.g. MSG_MAP_UPDATE
 * pushed by mgrd).  Sent as a request with a fresh req_id; the peer's reply
 * is ignored.  Returns 0 or -errno. */
int wire_conn_push(struct wire_conn *c, uint16_t type,
		   const ProtobufCMessage *body);

/* ------------------------------------------------------------- the client */

struct wire_peer;

/* Called once per wire_call: status is the reply's status (0 or -errno) or
 * a transport error: -ETIMEDOUT (deadline passed), -ECONNRESET (connection
 * lost with the request outstanding), -ECONNREFUSED / -EHOSTUNREACH (could
 * not connect), -ECANCELED (peer closed by its owner).  `reply` is NULL on
 * transport errors; otherwise the callee owns it (wire_msg_free). */
typedef void (*wire_reply_cb)(int status, struct wire_msg *reply, void *arg);

struct wire_peer_opts {
	const char *host;
	int port;
	/* The HELLO sent first on every new connection.  Copied. */
	const Twinfs__Hello *hello;
	/* Called when a HELLO reply arrives on a new connection (status 0) or
	 * when connecting/hello fails (status < 0; a refused AUTH or HELLO
	 * says why in wire_peer_refusal(); reply is the HELLO refusal, e.g.
	 * with active_addr, else NULL).  May be NULL. */
	void (*on_connect)(struct wire_peer *p, int status,
			   const Twinfs__HelloReply *reply, void *arg);
	/* A server-initiated message arrived (e.g. MSG_MAP_UPDATE).  The
	 * callee owns m.  May be NULL (such messages are then dropped). */
	void (*on_push)(struct wire_peer *p, struct wire_msg *m, void *arg);
	void *arg;
	/* Cap on request bytes queued or unanswered; calls beyond it wait in a
	 * local queue (they still count against their deadline). 0 = 64 MiB. */
	uint64_t max_inflight_bytes;
	/* Minimum delay between reconnect attempts, ms (0 = 100 ms). */
	uint32_t reconnect_ms;
	/* The cluster secret: when set (not NULL or ""), every connection
	 * proves it (MSG_AUTH) before HELLO, and checks that the server
	 * holds it too; a failed proof fails calls with -EACCES.  Copied. */
	const char *secret;
	/* Without a secret: prove the key of this identity instead (the
	 * server's key_fn knows it).  Both copied; key_len <= WIRE_KEY_MAX,
	 * identity_len <= WIRE_IDENTITY_MAX. */
	const uint8_t *identity;
	size_t identity_len;
	const uint8_t *key;
	size_t key_len;
	/* With a secret or a key: the weakest protection of frames after
	 * AUTH this side accepts (proto/FORMAT.md "Channel protection");
	 * TW_CHANNEL_DEFAULT (0) = TW_CHANNEL_DEFAULT_MODE.  Without either,
	 * frames are never sealed. */
	enum tw_channel channel;
};

/* Create a peer; it connects on the first call (or wire_peer_connect). */
int wire_peer_new(uv_loop_t *loop, const struct wire_peer_opts *opts,
		  struct wire_peer **out);
/* Replace the HELLO sent on future connections (e.g. to carry the session
 * id mgrd assigned, so a reconnect resumes the session).  Copied. */
int wire_peer_set_hello(struct wire_peer *p, const Twinfs__Hello *hello);
/* Replace the identity and key proved on future connections (e.g. a
 * renewed ticket).  Copied.  Not with a cluster secret. */
int wire_peer_set_identity(struct wire_peer *p, const uint8_t *identity,
			   size_t identity_len, const uint8_t *key,
			   size_t key_len);
/* Connect to host:port from the next connection on (an mgrd pair's other
 * mgrd); the current one, if any, stays until it is lost or reset.
 * 0 or -EINVAL. */
int wire_peer_set_addr(struct wire_peer *p, const char *host, int port);
/* Connect now if not connected (no-op if connected or connecting). */
void wire_peer_connect(struct wire_peer *p);
/* Send a request.  body must be non-NULL (use an Empty message).  Data
 * (iov, niov) is copied before return.  timeout_ms 0 = no deadline.  On a
 * disconnected peer the call waits for the connection and HELLO.
 * Returns 0 (cb will run exactly once, never before this returns) or -errno. */
int wire_call(struct wire_peer *p, uint16_t type, const ProtobufCMessage *body,
	      const struct iovec *iov, int niov, uint32_t timeout_ms,
	      wire_reply_cb cb, void *arg);
/* wire_call with the data part taken from *z, not copied (struct
 * wire_zdata: release runs once the frame was written or dropped). */
int wire_call_z(struct wire_peer *p, uint16_t type, const ProtobufCMessage *body,
		const struct wire_zdata *z, uint32_t timeout_ms,
		wire_reply_cb cb, void *arg);
/* Drop the connection: outstanding calls fail with -ECONNRESET; the next
 * call reconnects. */
void wire_peer_reset(struct wire_peer *p);
bool wire_peer_connected(const struct wire_peer *p);
/* A TCP connect is in flight (no answer yet: to a silent host it lasts
 * until the kernel gives up, a minute or more). */
bool wire_peer_connecting(const struct wire_peer *p);
/* The reason the server gave with its last refusal of AUTH or HELLO
 * ("" when it gave none); valid until the next connection attempt. */
const char *wire_peer_refusal(const struct wire_peer *p);
/* The mode frames on the current connection are protected with
 * (TW_CHANNEL_NONE when not connected or unsealed). */
enum tw_channel wire_peer_channel(const struct wire_peer *p);
/* "10.0.0.7:7503": the address of the current or last connection */
const char *wire_peer_name(const struct wire_peer *p);
/* Fail every call with -ECANCELED, close, and free when handles are closed. */
void wire_peer_free(struct wire_peer *p);

/* ---------------------------------------------------------------- helpers */

/* A blocking request on a private loop, for the CLI and tests: connects to
 * host:port, sends hello, sends one request, waits.  Returns the status and
 * sets *reply (caller frees) on status >= 0. */
struct wire_sync;
int wire_sync_open(const char *host, int port, const Twinfs__Hello *hello,
		   const char *secret, enum tw_channel channel,
		   uint32_t timeout_ms, struct wire_sync **out);
/* The same without the PING: the first call proves the connection (an
 * mgrd that is not the active answers an admin's PING -EREMOTE). */
int wire_sync_open2(const char *host, int port, const Twinfs__Hello *hello,
		    const char *secret, enum tw_channel channel,
		    uint32_t timeout_ms, bool ping_first, struct wire_sync **out);
int wire_sync_call(struct wire_sync *s, uint16_t type,
		   const ProtobufCMessage *body, const struct iovec *iov,
		   int niov, struct wire_msg **reply);
/* The timeout of the next calls (0: the default, 10 s). */
void wire_sync_set_timeout(struct wire_sync *s, uint32_t timeout_ms);
void wire_sync_close(struct wire_sync *s);

/* ------------------------------------------------------- capabilities */

/* A data-path capability (proto/FORMAT.md "Capabilities"): mgrd seals one
 * for a client session and an inode, the iods open it before they serve
 * that session's READ, SEEK, WRITE or FALLOCATE.  52 bytes, little-endian:
 * version(1) flags(1) reserved(2) session(8) ino(8) trunc_gen(8)
 * expiry_ms(8) mac(16). */
#define WIRE_CAP_LEN       52u
#define WIRE_CAP_BODY_LEN  36u       /* the bytes the MAC covers */
#define WIRE_CAP_MAC_LEN   16u       /* HMAC-SHA256, truncated */
#define WIRE_CAP_KEY_LEN   32u
#define WIRE_CAP_VERSION   1u
#define WIRE_CAP_F_WRITE   0x1u      /* WRITE and FALLOCATE too, not only reads */
#define WIRE_CAP_F_KNOWN   WIRE_CAP_F_WRITE
/* How far past expiry_ms an iod still takes a cap: the clocks of mgrd and
 * the iods may disagree by this much (CLOCK_REALTIME). */
#define WIRE_CAP_SKEW_MS   5000u

struct wire_cap {
	uint8_t flags;        /* WIRE_CAP_F_* */
	uint64_t session;     /* the client session it was issued to */
	uint64_t ino;
	uint64_t trunc_gen;   /* the inode's when issued: writes may not name a later one */
	uint64_t expiry_ms;   /* CLOCK_REALTIME, ms since the epoch */
};

/* K_cap = HMAC-SHA256(secret, "twinfs-cap-key").  -EINVAL without a
 * secret, -EIO if libcrypto fails. */
int wire_cap_key(const char *secret, uint8_t key[WIRE_CAP_KEY_LEN]);
/* Build the blob of cap under key.  0 or -EIO. */
int wire_cap_seal(const uint8_t key[WIRE_CAP_KEY_LEN],
		  const struct wire_cap *cap, uint8_t out[WIRE_CAP_LEN]);
/* Check blob (len bytes; may be NULL when len is 0) and decode it into
 * *cap: 0; -EPROTO when it is not a cap at all (length, version,
 * reserved bits); -EBADMSG when its MAC is wrong (forged, altered, or
 * sealed under another secret); -EIO if libcrypto fails.  Expiry is not
 * judged here. */
int wire_cap_open(const uint8_t key[WIRE_CAP_KEY_LEN], const uint8_t *blob,
		  size_t len, struct wire_cap *cap);
/* CLOCK_REALTIME in ms: the clock of expiry_ms. */
uint64_t wire_realtime_ms(void);

/* Say once, at a process's start, what protects its connections: a WARN
 * when nothing does (keyed false: it holds no secret or key, so it does no
 * AUTH and nothing is sealed) or when mode is TW_CHANNEL_NONE; else an INFO
 * line naming the mode.  who: "mgrd", "iod 3", "twinfs", ... */
void wire_channel_announce(const char *who, enum tw_channel mode, bool keyed);

/* 127.0.0.0/8, ::1 or "localhost": where a daemon may listen without a
 * cluster secret (proto/FORMAT.md "Authentication"). */
bool wire_host_is_loopback(const char *host);

/* ---------------------------------------------------------------- tickets */

/* What mgrd gives an authenticated client to show the iods (proto/FORMAT.md
 * "Tickets"; the byte layout is at the top of wire_ticket.c).  Functions
 * return 0 or -errno. */
#define WIRE_TICKET_KEY_LEN   32u
#define WIRE_TICKET_MAC_LEN   32u
#define WIRE_TICKET_NONCE_LEN 16u
#define WIRE_TICKET_NAME_MAX  63u
#define WIRE_TICKET_MAX       (36u + WIRE_TICKET_NAME_MAX + WIRE_TICKET_MAC_LEN)
/* The AUTH identity that presents a ticket: this prefix, then its bytes. */
#define WIRE_TICKET_PREFIX    "ticket:"
/* The AUTH identity of a client at mgrd: this prefix, then its name. */
#define WIRE_CLIENT_PREFIX    "client:"

struct wire_ticket {
	char name[WIRE_TICKET_NAME_MAX + 1];  /* the identity */
	uint64_t session;                     /* mgrd session it is bound to */
	uint64_t expiry_ms;                   /* CLOCK_REALTIME ms */
	bool read_only;
	uint8_t nonce[WIRE_TICKET_NONCE_LEN];
};
/* K_tkt, the key that seals tickets, from the cluster secret. */
int wire_ticket_master(const char *secret, uint8_t ktkt[WIRE_TICKET_KEY_LEN]);
/* Seal *t into out (WIRE_TICKET_MAX bytes), *out_len its length, and give
 * its session key Ks.  t->nonce is the caller's (random). */
int wire_ticket_seal(const uint8_t ktkt[WIRE_TICKET_KEY_LEN],
		     const struct wire_ticket *t, uint8_t *out,
		     size_t *out_len, uint8_t ks[WIRE_TICKET_KEY_LEN]);
/* Check a ticket and give its contents and Ks: -EPROTO malformed,
 * -EBADMSG wrong MAC (forged, or sealed with another secret),
 * -EKEYEXPIRED valid but now_ms >= expiry_ms. */
int wire_ticket_open(const uint8_t ktkt[WIRE_TICKET_KEY_LEN],
		     const uint8_t *buf, size_t len, uint64_t now_ms,
		     struct wire_ticket *t, uint8_t ks[WIRE_TICKET_KEY_LEN]);
/* out = in XOR HMAC-SHA256(client_key, "twinfs-ticket-wrap" || body of
 * ticket): wraps Ks at mgrd and unwraps it at the client. */
int wire_ticket_wrap(const uint8_t *client_key, size_t key_len,
		     const uint8_t *ticket, size_t ticket_len,
		     const uint8_t in[WIRE_TICKET_KEY_LEN],
		     uint8_t out[WIRE_TICKET_KEY_LEN]);

/* Fill a Hello with this cluster name, version and role. */
void wire_hello_init(Twinfs__Hello *h, const char *cluster,
		     Twinfs__Role role, uint64_t incarnation);

#endif
