/* ident.c - client identities at mgrd (proto/FORMAT.md "Client
 * identities", "Tickets"; docs/OPERATIONS.md "Client identities"): the
 * wire layer's key_fn for AUTH identities "client:NAME", revocation (kept
 * in the file `revoked` of the data directory, mgrd/FORMAT.md section 4),
 * the tickets mgrd issues for the iods, exports (a session's subtree) and
 * the admin request behind `twinfsctl client list|revoke`.
 *
 * Not here: the HELLO rules (server.c h_hello) and what access = ro and
 * squash mean for a request (handlers.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <openssl/evp.h>

#include "mgrd_int.h"
#include "server_int.h"

/* What a connection that proved a client key is (wire_conn_principal). */
struct mgr_principal {
	char name[TW_CLIENT_NAME_MAX];
};

static void fingerprint(const uint8_t key[TW_CLIENT_KEY_LEN],
			uint8_t out[MGR_FPR_LEN])
{
	unsigned n = 0;

	if (EVP_Digest(key, TW_CLIENT_KEY_LEN, out, &n, EVP_sha256(), NULL)
	    != 1)
		memset(out, 0, MGR_FPR_LEN);   /* never matches a revocation */
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static bool revoked(const struct mgr_server *s,
		    const struct tw_conf_client *cl)
{
	uint8_t fpr[MGR_FPR_LEN];

	fingerprint(cl->key, fpr);
	for (size_t i = 0; i < s->n_revoked; i++)
		if (strcmp(s->revoked[i].name, cl->name) == 0 &&
		    memcmp(s->revoked[i].fpr, fpr, MGR_FPR_LEN) == 0)
			return true;
	return false;
}

/* "127.0.0.1:40122" -> "127.0.0.1" */
static void peer_addr(struct wire_conn *c, char *out, size_t len)
{
	const char *peer = wire_conn_peer(c);
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	snprintf(out, len, "%.*s", (int)n, peer);
}

static bool network_ok(const struct tw_conf_client *cl, const char *addr)
{
	if (cl->n_networks == 0)
		return true;
	for (int i = 0; i < cl->n_networks; i++)
		if (tw_cidr_match(&cl->networks[i], addr))
			return true;
	return false;
}

/* wire_key_fn: "client:NAME" -> that client's key. */
static int key_fn(struct wire_conn *c, const uint8_t *id, size_t id_len,
		  uint8_t key[WIRE_KEY_MAX], size_t *key_len,
		  void **principal, const char **why, void *arg)
{
	struct mgr_server *s = arg;
	size_t plen = strlen(WIRE_CLIENT_PREFIX);
	char name[TW_CLIENT_NAME_MAX], addr[48];
	const struct tw_conf_client *cl;
	struct mgr_principal *p;

	if (id_len <= plen || id_len - plen >= sizeof(name) ||
	    memcmp(id, WIRE_CLIENT_PREFIX, plen) != 0 ||
	    memchr(id, '\0', id_len)) {
		*why = "mgrd knows only identities 'client:NAME'";
		goto refuse;
	}
	memcpy(name, id + plen, id_len - plen);
	name[id_len - plen] = '\0';
	cl = tw_conf_client(s->conf, name);
	peer_addr(c, addr, sizeof(addr));
	if (!cl) {
		snprintf(s->why, sizeof(s->why), "unknown client '%s'", name);
	} else if (revoked(s, cl)) {
		snprintf(s->why, sizeof(s->why), "client '%s' is revoked "
			 "(twinfsctl client revoke): it needs a new key", name);
	} else if (!network_ok(cl, addr)) {
		snprintf(s->why, sizeof(s->why), "client '%s' may not connect "
			 "from %s (networks)", name, addr);
	} else {
		p = calloc(1, sizeof(*p));
		if (!p) {
			*why = "out of memory";
			return -ENOMEM;
		}
		snprintf(p->name, sizeof(p->name), "%s", name);
		memcpy(key, cl->key, TW_CLIENT_KEY_LEN);
		*key_len = TW_CLIENT_KEY_LEN;
		*principal = p;
		return 0;
	}
	/* s->why lives until the next refusal; the wire layer copies it
	 * into the reply at once. */
	*why = s->why;
refuse:
	tw_log_rl(TW_LOG_WARN, "mgrd: refusing AUTH from %s: %s",
		  wire_conn_peer(c), *why);
	return -EACCES;
}

/* ------------------------------------------------------------- revoked */

/* The list's text (mgrd/FORMAT.md section 4): one line per revoked
 * key, "NAME SHA256-OF-KEY-HEX\n"; `where` names it in errors.  The
 * parsed list replaces *out only when all of it is good. */
static int revoked_parse(FILE *f, const char *where,
			 struct mgr_revoked **out, size_t *n_out)
{
	struct mgr_revoked *list = NULL, *r;
	char line[256];
	size_t n = 0;
	int rc = 0;

	while (fgets(line, sizeof(line), f)) {
		char name[TW_CLIENT_NAME_MAX], fh[2 * MGR_FPR_LEN + 1];

		if (sscanf(line, "%63s %64s", name, fh) != 2 ||
		    !tw_client_name_ok(name) || strlen(fh) != 2 * MGR_FPR_LEN) {
			tw_err("mgrd: %s:%zu: malformed line; expected 'NAME "
			       "SHA256-HEX'", where, n + 1);
			rc = -EINVAL;
			break;
		}
		r = realloc(list, (n + 1) * sizeof(*r));
		if (!r) {
			rc = -ENOMEM;
			break;
		}
		list = r;
		r += n++;
		snprintf(r->name, sizeof(r->name), "%s", name);
		for (size_t i = 0; i < MGR_FPR_LEN; i++) {
			unsigned v = 0;

			sscanf(fh + 2 * i, "%2x", &v);
			r->fpr[i] = (uint8_t)v;
		}
	}
	if (rc < 0) {
		free(list);
		return rc;
	}
	free(*out);
	*out = list;
	*n_out = n;
	return 0;
}

static int revoked_load(struct mgr_server *s)
{
	char path[PATH_MAX + 16];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/revoked", s->conf->mgr_dir);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	rc = revoked_parse(f, path, &s->revoked, &s->n_revoked);
	fclose(f);
	return rc;
}

/* The list as text, in a buffer the caller frees. */
static int revoked_text(const struct mgr_server *s, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);

	if (!f)
		return -errno;
	for (size_t i = 0; i < s->n_revoked; i++) {
		char fh[2 * MGR_FPR_LEN + 1];

		hex(s->revoked[i].fpr, MGR_FPR_LEN, fh);
		fprintf(f, "%s %s\n", s->revoked[i].name, fh);
	}
	if (fclose(f) != 0) {
		free(*buf);
		*buf = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Replace revoked with the whole list (tw_replace_file: revoked.tmp,
 * sync, rename, sync the directory): a crash leaves the old list or the
 * new one. */
static int revoked_save(struct mgr_server *s)
{
	char *buf = NULL;
	size_t len = 0;
	int dfd, rc = revoked_text(s, &buf, &len);

	dfd = rc == 0 ? open(s->conf->mgr_dir, O_RDONLY | O_DIRECTORY |
			     O_CLOEXEC) : -1;
	if (rc == 0 && dfd < 0)
		rc = -errno;
	if (rc == 0)
		rc = tw_replace_file(dfd, "revoked.tmp", "revoked", buf, len);
	if (dfd >= 0)
		close(dfd);
	free(buf);
	return rc;
}

int mgr_ident_revoked_journal(struct mgr_server *s)
{
	struct mgr_op op = { .type = MGR_OP_REVOKED };
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (!s->n_revoked || !s->repl)   /* nobody to send it to */
		return 0;
	rc = revoked_text(s, &buf, &len);
	if (rc == 0 && len > MGR_XATTR_SIZE_MAX)
		rc = -E2BIG;
	if (rc == 0) {
		op.value = buf;
		op.value_len = (uint32_t)len;
		rc = mgr_srv_internal(s, &op);
	}
	if (rc < 0)
		tw_err("mgrd: cannot send the revoked-key list (%zu keys) to "
		       "the standby: %s; copy %s/revoked to its directory",
		       s->n_revoked, strerror(-rc), s->conf->mgr_dir);
	free(buf);
	return rc;
}

int mgr_ident_revoked_apply(struct mgr_server *s, const void *text,
			    size_t len)
{
	FILE *f = fmemopen((void *)text, len, "r");
	int rc;

	if (!f)
		return len ? -errno : 0;
	rc = revoked_parse(f, "the active's revoked list", &s->revoked,
			   &s->n_revoked);
	fclose(f);
	if (rc == 0)
		rc = revoked_save(s);
	if (rc == 0)
		tw_info("mgrd: the active's revoked-key list: %zu keys",
			s->n_revoked);
	return rc;
}

/* ----------------------------------------------------------- lifecycle */

int mgr_ident_init(struct mgr_server *s)
{
	int rc = revoked_load(s);

	if (rc < 0) {
		tw_err("mgrd: cannot read %s/revoked: %s", s->conf->mgr_dir,
		       strerror(-rc));
		return rc;
	}
	if (s->conf->secret[0]) {
		rc = wire_ticket_master(s->conf->secret, s->ktkt);
		if (rc < 0)
			return rc;
		s->has_ktkt = true;
	}
	wire_server_set_key_fn(s->ws, key_fn, s);
	if (s->conf->n_clients || s->n_revoked)
		tw_info("mgrd: %d client identities, %zu revoked keys",
			s->conf->n_clients, s->n_revoked);
	return 0;
}

void mgr_ident_free(struct mgr_server *s)
{
	free(s->revoked);
	s->revoked = NULL;
	s->n_revoked = 0;
	explicit_bzero(s->ktkt, sizeof(s->ktkt));
}

const char *mgr_ident_name(struct wire_conn *c)
{
	const struct mgr_principal *p = wire_conn_principal(c);

	return p ? p->name : NULL;
}

const struct tw_conf_client *mgr_ident_conn(const struct mgr_server *s,
					    struct wire_conn *c)
{
	const char *name = mgr_ident_name(c);

	return name ? tw_conf_client(s->conf, name) : NULL;
}

/* ------------------------------------------------------------- tickets */

int mgr_ident_ticket(struct mgr_server *s, const struct tw_conf_client *cl,
		     uint64_t session, struct mgr_ticket_buf *tb)
{
	struct wire_ticket t = { .session = session,
				 .read_only = cl->read_only };
	uint8_t ks[WIRE_TICKET_KEY_LEN];
	size_t len;
	int rc;

	if (!s->has_ktkt)
		return -ENOENT;
	snprintf(t.name, sizeof(t.name), "%s", cl->name);
	t.expiry_ms = wire_realtime_ms() + s->conf->ticket_lifetime_ms;
	rc = tw_random(t.nonce, sizeof(t.nonce));
	if (rc == 0)
		rc = wire_ticket_seal(s->ktkt, &t, tb->ticket, &len, ks);
	if (rc == 0)
		rc = wire_ticket_wrap(cl->key, TW_CLIENT_KEY_LEN, tb->ticket,
				      len, ks, tb->wrapped);
	explicit_bzero(ks, sizeof(ks));
	if (rc < 0)
		return rc;
	twinfs__ticket__init(&tb->msg);
	tb->msg.ticket.data = tb->ticket;
	tb->msg.ticket.len = len;
	tb->msg.wrapped_key.data = tb->wrapped;
	tb->msg.wrapped_key.len = WIRE_TICKET_KEY_LEN;
	tb->msg.expiry_ms = t.expiry_ms;
	return 0;
}

/* TICKET: a renewed ticket for the session the connection holds. */
void mgr_ident_h_ticket(struct mgr_server *s, struct mgr_conn *mc,
			struct wire_conn *c, struct wire_msg *m)
{
	const struct tw_conf_client *cl = mgr_ident_conn(s, c);
	struct mgr_ticket_buf tb;
	int rc;

	if (mc->role != TWINFS__ROLE__ROLE_CLIENT || !cl || !mc->session) {
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	rc = mgr_ident_ticket(s, cl, mc->session, &tb);
	mgr_srv_reply(c, &m->hdr, rc, rc == 0 ? &tb.msg.base : NULL);
}

/* ------------------------------------------------------------- exports */

/* Whether path (normalized, absolute) is export or below it. */
static bool path_under(const char *path, const char *export)
{
	size_t n = strlen(export);

	if (strcmp(export, "/") == 0)
		return true;
	return strncmp(path, export, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

int mgr_ident_subdir(struct mgr_server *s, const struct tw_conf_client *cl,
		     const char *subdir, uint64_t *ino, char *why,
		     size_t why_len)
{
	char path[TW_EXPORT_MAX], *save = NULL, *tok, *q = path;
	uint64_t cur = MGR_ROOT_INO;

	if (!subdir || !*subdir)
		subdir = "/";
	if (subdir[0] != '/' || strlen(subdir) >= sizeof(path)) {
		snprintf(why, why_len, "subdir '%.64s' is not an absolute path",
			 subdir);
		return -EINVAL;
	}
	/* Normalize as the config does: no repeated or trailing '/'. */
	for (const char *r = subdir; *r; r++)
		if (!(*r == '/' && q > path && q[-1] == '/'))
			*q++ = *r;
	if (q > path + 1 && q[-1] == '/')
		q--;
	*q = '\0';
	if (strstr(path, "/..") || strstr(path, "/./") ||
	    (q - path >= 2 && strcmp(q - 2, "/.") == 0)) {
		snprintf(why, why_len, "subdir '%s' has . or .. components",
			 path);
		return -EINVAL;
	}
	if (cl && !path_under(path, cl->export_path)) {
		snprintf(why, why_len, "mgrd refused client '%s': may mount "
			 "%s only", cl->name, cl->export_path);
		return -EACCES;
	}
	for (tok = strtok_r(path, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save)) {
		struct mgr_inode *in;
		int rc = mgr_ns_lookup(&s->st.ns, cur, tok, &in);

		if (rc == 0 && !S_ISDIR(in->mode))
			rc = -ENOTDIR;
		if (rc < 0) {
			snprintf(why, why_len, "subdir %s: %s", subdir,
				 strerror(-rc));
			return rc;
		}
		cur = in->ino;
	}
	*ino = cur;
	return 0;
}

bool mgr_ident_in_subtree(const struct mgr_server *s, uint64_t root,
			  uint64_t ino)
{
	/* A chain of parents longer than any path would be a loop. */
	for (int depth = 0; depth < 4096; depth++) {
		const struct mgr_inode *in;

		if (ino == root)
			return true;
		if (ino == MGR_ROOT_INO || ino == 0)
			return false;
		in = mgr_ns_get(&s->st.ns, ino);
		if (!in)
			return true;      /* unknown: the handler says ESTALE */
		ino = in->dir ? in->dir->parent : in->parent;
	}
	return false;
}

/* ------------------------------------------------------------- admin */

static uint32_t live_sessions(const struct mgr_server *s, const char *name)
{
	uint32_t n = 0;
	uint64_t id;
	void *v;

	for (size_t it = 0; tw_hmap_next(&s->st.sessions.by_id, &it, &id, &v);)
		if (strcmp(((const struct mgr_session *)v)->ident, name) == 0)
			n++;
	return n;
}

static const char *squash_name(enum tw_squash q)
{
	return q == TW_SQUASH_ALL ? "all" : q == TW_SQUASH_ROOT ? "root"
								 : "none";
}

static void reply_list(struct mgr_server *s, struct wire_conn *c,
		       struct wire_msg *m)
{
	int n = s->conf->n_clients;
	Twinfs__ClientAdminReply r = TWINFS__CLIENT_ADMIN_REPLY__INIT;
	Twinfs__ClientInfo *infos = calloc((size_t)n + 1, sizeof(*infos));
	Twinfs__ClientInfo **ptrs = calloc((size_t)n + 1, sizeof(*ptrs));
	char (*nets)[TW_CLIENT_NETS_MAX * 48] = calloc((size_t)n + 1,
							sizeof(*nets));
	char (*fprs)[17] = calloc((size_t)n + 1, sizeof(*fprs));

	if (!infos || !ptrs || !nets || !fprs) {
		mgr_srv_reply(c, &m->hdr, -ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const struct tw_conf_client *cl = &s->conf->clients[i];
		Twinfs__ClientInfo *ci = &infos[i];
		uint8_t fpr[MGR_FPR_LEN];
		size_t off = 0;

		twinfs__client_info__init(ci);
		ci->name = (char *)cl->name;
		ci->export_path = (char *)cl->export_path;
		ci->read_only = cl->read_only;
		ci->squash = (char *)squash_name(cl->squash);
		snprintf(nets[i], sizeof(nets[i]), "any");
		for (int j = 0; j < cl->n_networks; j++) {
			const struct tw_cidr *net = &cl->networks[j];
			char a[48];

			inet_ntop(net->family == 4 ? AF_INET : AF_INET6,
				  net->addr, a, sizeof(a));
			off += (size_t)snprintf(nets[i] + off,
						sizeof(nets[i]) - off,
						"%s%s/%u", j ? "," : "", a,
						net->prefix);
		}
		ci->networks = nets[i];
		ci->sessions = live_sessions(s, cl->name);
		ci->revoked = revoked(s, cl);
		fingerprint(cl->key, fpr);
		hex(fpr, 8, fprs[i]);
		ci->fingerprint = fprs[i];
		ptrs[i] = ci;
	}
	r.n_clients = (size_t)n;
	r.clients = ptrs;
	mgr_srv_reply(c, &m->hdr, 0, &r.base);
out:
	free(infos);
	free(ptrs);
	free(nets);
	free(fprs);
}

/* Revoke the current key of `name`: durable first, then its live
 * sessions end (server.c mgr_srv_expire_identity: expiry, FENCE,
 * connections closed). */
static int revoke_client(struct mgr_server *s, const char *name,
		  struct wire_conn *c)
{
	const struct tw_conf_client *cl = tw_conf_client(s->conf, name);
	struct mgr_revoked *r;
	int rc;

	if (!cl)
		return -ENOENT;
	if (!revoked(s, cl)) {
		r = realloc(s->revoked, (s->n_revoked + 1) * sizeof(*r));
		if (!r)
			return -ENOMEM;
		s->revoked = r;
		r += s->n_revoked++;
		snprintf(r->name, sizeof(r->name), "%s", name);
		fingerprint(cl->key, r->fpr);
		rc = revoked_save(s);
		if (rc < 0) {
			s->n_revoked--;
			tw_err("mgrd: cannot save %s/revoked: %s",
			       s->conf->mgr_dir, strerror(-rc));
			return rc;
		}
		/* the standby's copy, before the admin's answer (which
		 * waits for the record's ack like every reply) */
		mgr_ident_revoked_journal(s);
	}
	tw_warn("mgrd: client '%s' revoked by %s: its key is refused from "
		"now on; %u live sessions expire", name, wire_conn_peer(c),
		live_sessions(s, name));
	mgr_srv_expire_identity(s, name);
	return 0;
}

void mgr_ident_h_admin(struct mgr_server *s, struct mgr_conn *mc,
		       struct wire_conn *c, struct wire_msg *m)
{
	const Twinfs__ClientAdmin *q = (const Twinfs__ClientAdmin *)m->body;

	if (mc->role != TWINFS__ROLE__ROLE_ADMIN) {
		mgr_srv_reply(c, &m->hdr, -EPERM, NULL);
		return;
	}
	if (q->op == 1) {
		reply_list(s, c, m);
		return;
	}
	if (q->op == 2 && q->name) {
		mgr_srv_reply(c, &m->hdr, revoke_client(s, q->name, c), NULL);
		return;
	}
	mgr_srv_reply(c, &m->hdr, -EINVAL, NULL);
}
