/* wire_codec.c - the frame format of proto/FORMAT.md: header encoding and
 * validation, the table of message types, frame building and the stream
 * reader shared by both ends of a connection.
 *
 * Every length in a header comes from a peer and is checked against
 * WIRE_MAX_MSG / WIRE_MAX_DATA before anything is allocated.  Nothing here
 * touches a socket except wire_stream_write.  On a sealed connection the
 * writer seals each frame as it is written and the reader reads the tag
 * after the data and opens the frame before delivering it (wire_seal.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "wire_int.h"

/* ------------------------------------------------------------ header */

void wire_hdr_encode(const struct wire_hdr *h, uint8_t out[WIRE_HDR_SIZE])
{
	tw_put_le32(out + 0, h->magic);
	tw_put_le16(out + 4, h->version);
	tw_put_le16(out + 6, h->type);
	tw_put_le32(out + 8, h->flags);
	tw_put_le32(out + 12, (uint32_t)h->status);
	tw_put_le64(out + 16, h->req_id);
	tw_put_le32(out + 24, h->msg_len);
	tw_put_le32(out + 28, h->data_len);
}

int wire_hdr_decode(const uint8_t in[WIRE_HDR_SIZE], struct wire_hdr *h)
{
	h->magic = tw_get_le32(in + 0);
	h->version = tw_get_le16(in + 4);
	h->type = tw_get_le16(in + 6);
	h->flags = tw_get_le32(in + 8);
	h->status = (int32_t)tw_get_le32(in + 12);
	h->req_id = tw_get_le64(in + 16);
	h->msg_len = tw_get_le32(in + 24);
	h->data_len = tw_get_le32(in + 28);
	h->rx_ns = 0;             /* not on the wire: the server stamps it */

	if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION)
		return -EPROTO;
	if (h->flags & ~WIRE_F_KNOWN)
		return -EPROTO;
	if (!wire_type_desc(h->type, false))
		return -EPROTO;
	if (h->msg_len > WIRE_MAX_MSG || h->data_len > WIRE_MAX_DATA)
		return -EPROTO;
	if (!(h->flags & WIRE_F_REPLY) && h->status != 0)
		return -EPROTO;
	/* Errnos are small positive numbers; anything else is garbage. */
	if (h->status > 0 || h->status < -4095)
		return -EPROTO;
	return 0;
}

/* ------------------------------------------------------- message types */

struct wire_type {
	const char *name;
	const ProtobufCMessageDescriptor *req;
	const ProtobufCMessageDescriptor *rep;
};

#define T(id, nm, rq, rp) [TWINFS__MSG_TYPE__MSG_##id] = \
	{ nm, &twinfs__##rq##__descriptor, &twinfs__##rp##__descriptor }

/* The request and reply message of every type; FORMAT.md section 3 gives
 * their meaning. */
static const struct wire_type types[] = {
	T(HELLO, "HELLO", hello, hello_reply),
	T(PING, "PING", ping, ping),
	T(LOOKUP, "LOOKUP", lookup, entry),
	T(GETATTR, "GETATTR", getattr, entry),
	T(SETATTR, "SETATTR", setattr, entry),
	T(MKNOD, "MKNOD", mknod, entry),
	T(MKDIR, "MKDIR", mkdir, entry),
	T(UNLINK, "UNLINK", unlink, entry),
	T(RMDIR, "RMDIR", unlink, entry),
	T(SYMLINK, "SYMLINK", symlink, entry),
	T(READLINK, "READLINK", getattr, readlink_reply),
	T(LINK, "LINK", link, entry),
	T(RENAME, "RENAME", rename, empty),
	T(OPEN, "OPEN", open, open_reply),
	T(RELEASE, "RELEASE", release, empty),
	T(READDIR, "READDIR", readdir, readdir_reply),
	T(STATFS, "STATFS", getattr, statfs_reply),
	T(SETXATTR, "SETXATTR", xattr, empty),
	T(GETXATTR, "GETXATTR", xattr, xattr_reply),
	T(LISTXATTR, "LISTXATTR", xattr, xattr_reply),
	T(REMOVEXATTR, "REMOVEXATTR", xattr, empty),
	T(SIZE_REPORT, "SIZE_REPORT", size_report, entry),
	T(GET_MAP, "GET_MAP", empty, cluster_map),
	T(SETSTRIPE, "SETSTRIPE", setstripe, entry),
	T(INO_PATH, "INO_PATH", getattr, ino_path),
	T(SYNC, "SYNC", empty, empty),
	T(IOD_REGISTER, "IOD_REGISTER", iod_register, cluster_map),
	T(FSYNCDIR, "FSYNCDIR", getattr, empty),
	T(REPORT, "REPORT", report, empty),
	T(RESYNC, "RESYNC", resync, resync_reply),
	T(REBUILD, "REBUILD", rebuild, empty),
	T(AUTH, "AUTH", auth, auth_reply),
	T(RESYNC_PROGRESS, "RESYNC_PROGRESS", resync_progress, empty),
	T(LOCK, "LOCK", lock, lock_reply),
	T(GETLK, "GETLK", lock, lock_reply),
	T(UNLOCK_ALL, "UNLOCK_ALL", lock_drop, empty),
	T(LOCK_CANCEL, "LOCK_CANCEL", lock_cancel, empty),
	T(APPEND_RESERVE, "APPEND_RESERVE", append_reserve, append_reply),
	T(RESYNC_STATUS, "RESYNC_STATUS", resync_status, resync_status_reply),
	T(INTENTS, "INTENTS", intents, intents_reply),
	T(DIR_RETURN, "DIR_RETURN", getattr, empty),
	T(WRITE, "WRITE", write, write_reply),
	T(READ, "READ", read, read_reply),
	T(TRUNCATE, "TRUNCATE", truncate, write_reply),
	T(DELETE, "DELETE", delete, empty),
	T(FSYNC, "FSYNC", fsync, empty),
	T(SUBFILES, "SUBFILES", subfiles, subfiles_reply),
	T(CHECKSUM, "CHECKSUM", checksum, checksum_reply),
	T(IOD_STATFS, "IOD_STATFS", empty, statfs_reply),
	T(MAP_UPDATE, "MAP_UPDATE", cluster_map, empty),
	T(FALLOCATE, "FALLOCATE", fallocate, write_reply),
	T(SEEK, "SEEK", seek, seek_reply),
	T(DIR_RECALL, "DIR_RECALL", getattr, empty),
	T(FENCE, "FENCE", fence, empty),
	T(LEASE, "LEASE", lease, lease_reply),
	T(CAP, "CAP", cap, cap_reply),
	T(TICKET, "TICKET", empty, ticket),
	T(CLIENT_ADMIN, "CLIENT_ADMIN", client_admin, client_admin_reply),
	T(MGRD_STATUS, "MGRD_STATUS", empty, mgrd_status),
	T(MGRD_SWITCHOVER, "MGRD_SWITCHOVER", empty, empty),
	T(REPL_JOIN, "REPL_JOIN", repl_join, repl_pos),
	T(REPL_SNAPSHOT, "REPL_SNAPSHOT", repl_snapshot, repl_pos),
	T(REPL_RECORD, "REPL_RECORD", repl_record, repl_pos),
	T(MGRD_BACKUP, "MGRD_BACKUP", mgrd_backup, mgrd_backup_reply),
	T(SCRUB, "SCRUB", scrub, scrub_reply),
	T(REPL_CATCHUP, "REPL_CATCHUP", repl_catchup, repl_pos),
};
#undef T

const ProtobufCMessageDescriptor *wire_type_desc(uint16_t type, bool reply)
{
	if (type >= TW_ARRAY_SIZE(types) || !types[type].name)
		return NULL;
	return reply ? types[type].rep : types[type].req;
}

const char *wire_type_name(uint16_t type)
{
	if (type >= TW_ARRAY_SIZE(types) || !types[type].name)
		return "?";
	return types[type].name;
}

const char *wire_role_name(int role)
{
	switch (role) {
	case TWINFS__ROLE__ROLE_CLIENT: return "client";
	case TWINFS__ROLE__ROLE_IOD: return "iod";
	case TWINFS__ROLE__ROLE_ADMIN: return "admin";
	case TWINFS__ROLE__ROLE_MGRD: return "mgrd";
	case TWINFS__ROLE__ROLE_MGRD_PEER: return "mgrd-peer";
	default: return "?";
	}
}

ProtobufCMessage *wire_body_decode(uint16_t type, bool reply,
				   const uint8_t *buf, size_t len)
{
	const ProtobufCMessageDescriptor *d = wire_type_desc(type, reply);

	if (!d)
		return NULL;
	return protobuf_c_message_unpack(d, NULL, len, buf);
}

void wire_msg_free(struct wire_msg *m)
{
	if (!m)
		return;
	if (m->body)
		protobuf_c_message_free_unpacked(m->body, NULL);
	free(m->data);
	free(m);
}

uint32_t wire_failed_iod(const struct wire_msg *m)
{
	if (!m || m->hdr.status >= 0 || !m->body ||
	    m->body->descriptor != &twinfs__write_reply__descriptor)
		return 0;
	return ((const Twinfs__WriteReply *)m->body)->failed_iod;
}

uint8_t *wire_msg_take_data(struct wire_msg *m)
{
	uint8_t *d = m->data;

	m->data = NULL;
	m->data_len = 0;
	return d;
}

/* ------------------------------------------------------------ building */

/* Header, body and the iov data copied, announcing zlen more bytes of
 * data that the caller sends after the buffer. */
static uint8_t *frame_build(uint16_t type, uint32_t flags, int32_t status,
			    uint64_t req_id, const ProtobufCMessage *body,
			    const struct iovec *iov, int niov, size_t zlen,
			    size_t *len, int *err)
{
	size_t msg_len = body ? protobuf_c_message_get_packed_size(body) : 0;
	size_t data_len = 0;
	struct wire_hdr h;
	uint8_t *buf, *p;

	for (int i = 0; i < niov; i++)
		data_len += iov[i].iov_len;
	if (msg_len > WIRE_MAX_MSG || data_len + zlen > WIRE_MAX_DATA ||
	    zlen > WIRE_MAX_DATA) {
		*err = -EMSGSIZE;
		return NULL;
	}
	buf = malloc(WIRE_HDR_SIZE + msg_len + data_len);
	if (!buf) {
		*err = -ENOMEM;
		return NULL;
	}
	h = (struct wire_hdr){
		.magic = WIRE_MAGIC, .version = WIRE_VERSION, .type = type,
		.flags = flags, .status = status, .req_id = req_id,
		.msg_len = (uint32_t)msg_len,
		.data_len = (uint32_t)(data_len + zlen),
	};
	wire_hdr_encode(&h, buf);
	p = buf + WIRE_HDR_SIZE;
	if (body)
		p += protobuf_c_message_pack(body, p);
	for (int i = 0; i < niov; i++) {
		if (iov[i].iov_len)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	*len = (size_t)(p - buf);
	*err = 0;
	return buf;
}

uint8_t *wire_frame_build(uint16_t type, uint32_t flags, int32_t status,
			  uint64_t req_id, const ProtobufCMessage *body,
			  const struct iovec *iov, int niov, size_t *len,
			  int *err)
{
	return frame_build(type, flags, status, req_id, body, iov, niov, 0,
			   len, err);
}

uint8_t *wire_frame_head(uint16_t type, uint32_t flags, int32_t status,
			 uint64_t req_id, const ProtobufCMessage *body,
			 size_t zlen, size_t *len, int *err)
{
	return frame_build(type, flags, status, req_id, body, NULL, 0, zlen,
			   len, err);
}

struct wire_wreq {
	uv_write_t req;
	uint8_t *buf;
	size_t len;
	struct wire_zdata z;              /* z.release NULL: none */
	uint8_t *zcopy;                   /* z's data encrypted, or NULL */
	uint8_t tag[WIRE_TAG_LEN];        /* sealed frames: written last */
	void (*done)(void *arg, int status, size_t len);
	void *arg;
};

static void on_written(uv_write_t *req, int status)
{
	struct wire_wreq *w = (struct wire_wreq *)req;

	if (w->done)
		w->done(w->arg, status, w->len);
	free(w->buf);
	free(w->zcopy);
	if (w->z.release)
		w->z.release(w->z.arg);
	free(w);
}

int wire_stream_write_sealed(uv_stream_t *s, struct wire_seal *seal,
			     uint8_t *buf, size_t len,
			     const struct wire_zdata *z,
			     void (*done)(void *arg, int status, size_t len),
			     void *arg)
{
	struct wire_wreq *w = malloc(sizeof(*w));
	uv_buf_t b[3];
	unsigned nb = 1;
	int rc;

	if (!w) {
		free(buf);
		return -ENOMEM;
	}
	*w = (struct wire_wreq){ .buf = buf, .len = len, .done = done,
				 .arg = arg };
	/* Sealed in write order, which is the order the peer opens in. */
	if (seal) {
		rc = wire_seal_frame(seal, buf, len, z, &w->zcopy, w->tag);
		if (rc < 0) {
			free(buf);
			free(w);
			return rc;
		}
	}
	b[0] = uv_buf_init((char *)buf, (unsigned)len);
	if (z && z->len) {
		/* libuv only reads through the pointer. */
		b[nb++] = uv_buf_init(w->zcopy ? (char *)w->zcopy
				      : (char *)(uintptr_t)z->base,
				      (unsigned)z->len);
		w->len += z->len;
	}
	if (seal) {
		b[nb++] = uv_buf_init((char *)w->tag, WIRE_TAG_LEN);
		w->len += WIRE_TAG_LEN;
	}
	/* With nothing queued, write at once: libuv's uv_write of a request
	 * that completes at once still feeds it through the loop's pending
	 * queue and re-arms the socket's epoll entry (one more epoll_ctl per
	 * frame).  The rest of a short write is queued as usual, after the
	 * bytes written, so frames stay in order. */
	if (uv_stream_get_write_queue_size(s) == 0) {
		int n = uv_try_write(s, b, nb);

		if (n >= 0 && (size_t)n == w->len) {
			w->z = z ? *z : (struct wire_zdata){ 0 };
			on_written(&w->req, 0);
			return 0;
		}
		for (unsigned i = 0; n > 0 && i < nb; i++) {
			size_t k = TW_MIN((size_t)n, (size_t)b[i].len);

			b[i].base += k;
			b[i].len -= (unsigned)k;
			n -= (int)k;
		}
		/* n < 0 (UV_EAGAIN, or an error uv_write reports the same
		 * way): nothing was written. */
	}
	rc = uv_write(&w->req, s, b, nb, on_written);
	if (rc < 0) {
		free(buf);
		free(w->zcopy);
		free(w);
		return rc;
	}
	if (z)
		w->z = *z;   /* only now: an error leaves z with the caller */
	return 0;
}

int wire_stream_write_z(uv_stream_t *s, uint8_t *buf, size_t len,
			const struct wire_zdata *z,
			void (*done)(void *arg, int status, size_t len),
			void *arg)
{
	return wire_stream_write_sealed(s, NULL, buf, len, z, done, arg);
}

int wire_stream_write(uv_stream_t *s, uint8_t *buf, size_t len,
		      void (*done)(void *arg, int status, size_t len),
		      void *arg)
{
	return wire_stream_write_z(s, buf, len, NULL, done, arg);
}

void wire_peer_addr(uv_tcp_t *t, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	int sl = sizeof(ss);
	char ip[64] = "?";
	int port = 0;

	if (uv_tcp_getpeername(t, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			uv_ip4_name(a, ip, sizeof(ip));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			uv_ip6_name(a, ip, sizeof(ip));
			port = ntohs(a->sin6_port);
		}
	}
	snprintf(out, outlen, "%s:%d", ip, port);
}

/* -------------------------------------------------------------- reader */

int wire_reader_init(struct wire_reader *r)
{
	*r = (struct wire_reader){ .state = WIRE_R_HDR,
				   .max_msg = WIRE_MAX_MSG,
				   .max_data = WIRE_MAX_DATA };
	r->rbuf = malloc(WIRE_RBUF_SIZE);
	return r->rbuf ? 0 : -ENOMEM;
}

void wire_reader_free(struct wire_reader *r)
{
	free(r->rbuf);
	free(r->msg);
	free(r->data);
	wire_seal_free(r->seal);
	*r = (struct wire_reader){ .state = WIRE_R_HDR };
}

/* Bodies are read straight into their own buffers once the staging buffer
 * is drained, so a 1 MiB write is copied once (kernel -> body), not twice. */
void wire_reader_alloc(struct wire_reader *r, uv_buf_t *buf)
{
	switch (r->state) {
	case WIRE_R_MSG:
		*buf = uv_buf_init((char *)r->msg + r->got,
				   r->hdr.msg_len - (unsigned)r->got);
		return;
	case WIRE_R_DATA:
		*buf = uv_buf_init((char *)r->data + r->got,
				   r->hdr.data_len - (unsigned)r->got);
		return;
	case WIRE_R_HDR:
	case WIRE_R_TAG:      /* 16 bytes: staged with the next header */
		break;
	}
	*buf = uv_buf_init((char *)r->rbuf + r->rlen,
			   WIRE_RBUF_SIZE - (unsigned)r->rlen);
}

/* Move to the next part of the frame, allocating exactly what the
 * (already validated) header announced. */
static int reader_start_part(struct wire_reader *r)
{
	r->got = 0;
	if (r->state == WIRE_R_HDR) {
		r->state = WIRE_R_MSG;
		if (r->hdr.msg_len) {
			r->msg = malloc(r->hdr.msg_len);
			if (!r->msg)
				return -ENOMEM;
			return 0;
		}
	}
	if (r->state == WIRE_R_MSG) {
		r->state = WIRE_R_DATA;
		if (r->hdr.data_len) {
			r->data = malloc(r->hdr.data_len);
			if (!r->data)
				return -ENOMEM;
			return 0;
		}
	}
	if (r->state == WIRE_R_DATA && r->seal) {
		r->state = WIRE_R_TAG;
		return 0;
	}
	return 1; /* frame complete */
}

static size_t part_len(const struct wire_reader *r)
{
	switch (r->state) {
	case WIRE_R_MSG: return r->hdr.msg_len;
	case WIRE_R_DATA: return r->hdr.data_len;
	case WIRE_R_TAG: return WIRE_TAG_LEN;
	case WIRE_R_HDR: break;
	}
	return WIRE_HDR_SIZE;
}

static uint8_t *part_buf(struct wire_reader *r)
{
	switch (r->state) {
	case WIRE_R_MSG: return r->msg;
	case WIRE_R_DATA: return r->data;
	case WIRE_R_TAG: return r->tag;
	case WIRE_R_HDR: break;
	}
	return NULL;
}

static int reader_deliver(struct wire_reader *r, wire_frame_cb cb, void *arg,
			  const char **why)
{
	bool reply = r->hdr.flags & WIRE_F_REPLY;
	struct wire_msg *m = calloc(1, sizeof(*m));

	if (!m) {
		*why = "out of memory";
		return -ENOMEM;
	}
	m->hdr = r->hdr;
	/* Nothing of a frame whose tag fails is looked at, let alone
	 * delivered: its owner closes the connection. */
	if (r->seal && wire_seal_open(r->seal, r->hdr_raw, r->msg,
				      r->hdr.msg_len, r->data,
				      r->hdr.data_len, r->tag) < 0) {
		free(m);
		snprintf(r->why, sizeof(r->why), "frame authentication "
			 "failed (a %s %s changed, replayed or lost on the "
			 "way)", wire_type_name(r->hdr.type),
			 r->hdr.flags & WIRE_F_REPLY ? "reply" : "request");
		*why = r->why;
		return -EBADMSG;
	}
	/* An error reply has an empty body (or, for an iod's WRITE,
	 * TRUNCATE or FALLOCATE, a WriteReply naming where it failed:
	 * FORMAT.md §1); an empty one decodes as the reply type's empty
	 * message, so body is never NULL. */
	m->body = wire_body_decode(r->hdr.type, reply, r->msg, r->hdr.msg_len);
	free(r->msg);
	r->msg = NULL;
	m->data = r->data;
	m->data_len = r->hdr.data_len;
	r->data = NULL;
	r->state = WIRE_R_HDR;
	r->got = 0;
	if (!m->body) {
		wire_msg_free(m);
		*why = "body does not decode";
		return -EPROTO;
	}
	r->first_seen = true;
	return cb(m, arg);
}

int wire_reader_feed(struct wire_reader *r, size_t n, wire_frame_cb cb,
		     void *arg, const char **why)
{
	size_t pos = 0;
	bool paused = false;
	int rc;

	*why = "";
	if (r->state == WIRE_R_MSG || r->state == WIRE_R_DATA) {
		/* Direct read into the body part. */
		r->got += n;
		if (r->got < part_len(r))
			return 0;
		rc = reader_start_part(r);
		if (rc < 0)
			goto nomem;
		if (rc == 0)
			return 0;
		return reader_deliver(r, cb, arg, why);
	}

	r->rlen += n;
	for (;;) {
		if (r->state == WIRE_R_HDR) {
			if (r->rlen - pos < WIRE_HDR_SIZE)
				break;
			rc = wire_hdr_decode(r->rbuf + pos, &r->hdr);
			memcpy(r->hdr_raw, r->rbuf + pos, WIRE_HDR_SIZE);
			pos += WIRE_HDR_SIZE;
			if (rc < 0 && r->hdr.magic == WIRE_MAGIC &&
			    r->hdr.version != WIRE_VERSION) {
				/* A TwinFS of another release: say so, the
				 * usual cause after a partial upgrade. */
				snprintf(r->why, sizeof(r->why),
					 "it speaks protocol version %u, this "
					 "is %u (upgrade all of a cluster "
					 "together)", (unsigned)r->hdr.version,
					 (unsigned)WIRE_VERSION);
				*why = r->why;
				return rc;
			}
			if (rc < 0) {
				/* On a sealed connection the peer proved
				 * its key: a bad header was changed on
				 * the way. */
				*why = r->seal ? "frame authentication failed "
					"(bad frame header)"
					: "bad frame header (magic, version, "
					  "type, flags or length)";
				return rc;
			}
			if (r->hdr.msg_len > r->max_msg ||
			    r->hdr.data_len > r->max_data) {
				snprintf(r->why, sizeof(r->why),
					 "a %s frame of %u+%u bytes, more than "
					 "allowed now (%u+%u)",
					 wire_type_name(r->hdr.type),
					 (unsigned)r->hdr.msg_len,
					 (unsigned)r->hdr.data_len,
					 (unsigned)r->max_msg,
					 (unsigned)r->max_data);
				*why = r->why;
				return -EPROTO;
			}
			rc = reader_start_part(r);
			if (rc < 0)
				goto nomem;
		} else {
			size_t need = part_len(r) - r->got;
			size_t take = TW_MIN(need, r->rlen - pos);
			uint8_t *dst = part_buf(r);

			memcpy(dst + r->got, r->rbuf + pos, take);
			r->got += take;
			pos += take;
			if (r->got < part_len(r))
				break;
			rc = reader_start_part(r);
			if (rc < 0)
				goto nomem;
		}
		if (rc == 1) {
			rc = reader_deliver(r, cb, arg, why);
			if (rc == WIRE_R_PAUSE) {
				paused = true;
				break;      /* keep the rest for later */
			}
			if (rc < 0)
				return rc;
		}
	}
	memmove(r->rbuf, r->rbuf + pos, r->rlen - pos);
	r->rlen -= pos;
	return paused ? WIRE_R_PAUSE : 0;
nomem:
	*why = "out of memory for a frame body";
	return -ENOMEM;
}

void wire_hello_init(Twinfs__Hello *h, const char *cluster, Twinfs__Role role,
		     uint64_t incarnation)
{
	twinfs__hello__init(h);
	h->cluster = (char *)cluster;
	h->proto_version = WIRE_VERSION;
	h->role = role;
	h->incarnation = incarnation;
}
