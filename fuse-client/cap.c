/* cap.c - the client's cache of data-path capabilities (proto/FORMAT.md
 * "Capabilities"): one per inode, with its rights and when it runs out,
 * attached to every READ, SEEK, WRITE and FALLOCATE sent to an iod.
 *
 * Where caps come from: the OPEN and create replies (fc_cap_take), and
 * MSG_CAP (fc_cap_fetch) when none is cached with the rights an op needs
 * (page-cache writeback after a release, a reopened session), when an
 * iod answered -EKEYREJECTED (expired, or older than the trunc_gen the
 * op names: ops_data.c refetches and retries), and in the background
 * once less than half of a cap's lifetime is left, so that in the normal
 * case no application waits for a renewal.
 *
 * Without a cluster secret mgrd issues none and the iods demand none:
 * caps_on stays false and nothing here sends anything.  Everything runs
 * on the loop thread ([loop]); entries are freed when they run out
 * unused (swept as the table grows) and at shutdown (fc_caps_free).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "inode.h"
#include "loop.h"
#include "mgr.h"
#include "mount.h"

/* The table is swept of expired entries whenever it doubles. */
#define CAP_SWEEP_MIN 256u

struct fc_cap {
	uint64_t ino;
	bool have;                 /* blob holds a cap */
	bool write;                /* ... with write rights */
	uint8_t blob[WIRE_CAP_LEN];
	uint64_t session;          /* cl->session it was issued under */
	uint64_t got_ms;           /* tw_now_ms() when it arrived */
	uint64_t lifetime_ms;
	/* The MSG_CAP in flight, if fetching, and who waits for it. */
	bool fetching;
	bool fetch_write;
	struct fc_mgr_call mc;
	Twinfs__Cap body;
	/* The caller whose uid and gid the fetch names (mgrd grants a cap
	 * to a session holding a handle of the inode without looking at
	 * them; otherwise it checks them as OPEN does). */
	struct fc_op cred;
	struct fc_cap_waiter *waiters;
};

static bool usable(const struct fc_client *cl, const struct fc_cap *c,
		   bool write, uint64_t now)
{
	/* A second's margin: the request must reach the iod in time. */
	return c->have && (c->write || !write) && c->session == cl->session &&
	       now + 1000 < c->got_ms + c->lifetime_ms;
}

static void sweep(struct fc_client *cl)
{
	uint64_t now = tw_now_ms(), k;
	size_t n = 0;
	void *v;

	for (size_t it = 0; tw_hmap_next(&cl->caps, &it, &k, &v);) {
		struct fc_cap *c = v;

		if (!c->fetching && !c->waiters &&
		    now >= c->got_ms + c->lifetime_ms) {
			tw_hmap_del(&cl->caps, k);   /* allowed mid-iteration */
			free(c);
			continue;
		}
		n++;
	}
	cl->caps_sweep_at = TW_MAX(2 * n, (size_t)CAP_SWEEP_MIN);
}

static struct fc_cap *cap_get(struct fc_client *cl, uint64_t ino, bool make)
{
	struct fc_cap *c = tw_hmap_get(&cl->caps, ino);

	if (c || !make)
		return c;
	if (cl->caps.count >= TW_MAX(cl->caps_sweep_at,
					       (size_t)CAP_SWEEP_MIN))
		sweep(cl);
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ino = ino;
	if (tw_hmap_put(&cl->caps, ino, c) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

static void store(struct fc_client *cl, struct fc_cap *c, bool write,
		  const ProtobufCBinaryData *cap, uint32_t lifetime_ms)
{
	if (cap->len != WIRE_CAP_LEN || lifetime_ms == 0)
		return;
	/* A read cap never replaces a live write cap of the same session:
	 * a reader's open must not make a writer fetch again. */
	if (!write && usable(cl, c, true, tw_now_ms()))
		return;
	memcpy(c->blob, cap->data, WIRE_CAP_LEN);
	c->have = true;
	c->write = write;
	c->session = cl->session;
	c->got_ms = tw_now_ms();
	c->lifetime_ms = lifetime_ms;
	cl->caps_on = true;
}

void fc_cap_take(struct fc_client *cl, uint64_t ino, bool write,
		 const ProtobufCBinaryData *cap, uint32_t lifetime_ms,
		 const struct fc_op *op)
{
	struct fc_cap *c;

	if (cap->len == 0)
		return;   /* caps are off, or mgrd gave none */
	c = cap_get(cl, ino, true);
	if (!c)
		return;   /* an op fetches one when it needs it */
	store(cl, c, write, cap, lifetime_ms);
	if (op) {
		c->cred.uid = op->uid;
		c->cred.gid = op->gid;
		c->cred.pid = op->pid;
	}
}

static void fetch_done(struct fc_mgr_call *mc, int status,
		       struct wire_msg *reply)
{
	struct fc_cap *c = mc->arg;
	struct fc_client *cl = mc->cl;
	struct fc_cap_waiter *w = c->waiters;

	c->fetching = false;
	c->waiters = NULL;
	if (status == 0 && (!reply || !reply->body ||
			    reply->body->descriptor != &twinfs__cap_reply__descriptor))
		status = -EIO;
	if (status == 0) {
		const Twinfs__CapReply *r = (const void *)reply->body;

		store(cl, c, c->fetch_write, &r->cap, r->lifetime_ms);
	} else if (status != -EOPNOTSUPP) {
		char path[FC_PATH_LOG];

		tw_log_rl(TW_LOG_WARN, "%s: no %s capability from mgrd: %s",
			  fc_ino_path(cl, c->ino, path, sizeof(path)),
			  c->fetch_write ? "write" : "read", strerror(-status));
	}
	if (reply)
		wire_msg_free(reply);
	/* Each waiter may start another fetch of this entry: take the list
	 * first, and touch c no more after the first callback. */
	while (w) {
		struct fc_cap_waiter *next = w->next;

		w->cb(w->arg, status);
		w = next;
	}
}

static void waiter_later(int status, struct wire_msg *reply, void *arg)
{
	struct fc_cap_waiter *w = arg;

	(void)reply;
	w->cb(w->arg, status);
}

void fc_cap_fetch(struct fc_client *cl, uint64_t ino, bool write,
		  const struct fc_op *op, struct fc_cap_waiter *w)
{
	struct fc_cap *c = cl->stopping ? NULL : cap_get(cl, ino, true);

	if (!c) {
		if (w)
			fc_defer(cl, waiter_later, w, cl->stopping ? -EIO
								   : -ENOMEM);
		return;
	}
	if (op) {
		c->cred.uid = op->uid;
		c->cred.gid = op->gid;
		c->cred.pid = op->pid;
	}
	if (w) {
		w->next = c->waiters;
		c->waiters = w;
	}
	/* One MSG_CAP per inode at a time; a read fetch in flight does not
	 * serve a writer, which asks again once it is answered (its
	 * waiter retries). */
	if (c->fetching)
		return;
	c->fetching = true;
	c->fetch_write = write || (c->have && c->write &&
				   c->session == cl->session);
	twinfs__cap__init(&c->body);
	c->body.ino = ino;
	c->body.write = c->fetch_write;
	fc_mgr_send(cl, &c->mc, TWINFS__MSG_TYPE__MSG_CAP, &c->body.base,
		    &c->body.ctx, &c->cred, 0, fetch_done, c);
}

bool fc_cap_attach(struct fc_client *cl, uint64_t ino, bool write,
		   ProtobufCBinaryData *out)
{
	struct fc_cap *c = cap_get(cl, ino, false);
	uint64_t now = tw_now_ms();

	out->data = NULL;
	out->len = 0;
	if (!c || !usable(cl, c, write, now))
		return false;
	out->data = c->blob;
	out->len = WIRE_CAP_LEN;
	/* Renew in the background past half its life. */
	if (!c->fetching && now >= c->got_ms + c->lifetime_ms / 2)
		fc_cap_fetch(cl, ino, c->write, NULL, NULL);
	return true;
}

bool fc_cap_missing(struct fc_client *cl, uint64_t ino, bool write)
{
	struct fc_cap *c;

	if (!cl->caps_on)
		return false;
	c = cap_get(cl, ino, false);
	return !c || !usable(cl, c, write, tw_now_ms());
}

void fc_cap_drop(struct fc_client *cl, uint64_t ino)
{
	struct fc_cap *c = cap_get(cl, ino, false);

	if (c)
		c->have = false;
}

void fc_caps_free(struct fc_client *cl)
{
	uint64_t k;
	void *v;

	for (size_t it = 0; tw_hmap_next(&cl->caps, &it, &k, &v);)
		free(v);
	tw_hmap_free(&cl->caps);
	tw_hmap_init(&cl->caps);
}
