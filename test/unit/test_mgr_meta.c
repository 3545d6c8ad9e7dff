/* test_mgr_meta.c - POSIX ACLs, atime and RENAME_WHITEOUT at mgrd: the
 * xattr-form helpers of mgrd/acl.c against values worked out from Linux's
 * fs/posix_acl.c, what ns.c does with them (mode following an access ACL,
 * minimal ACLs not stored, chmod updating the mask, default ACL
 * inheritance ignoring the umask), relatime on reads, the whiteout of a
 * rename, and a journal replay of all of them that must rebuild the same
 * state (records carry no umask: the decided mode).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "journal.h"
#include "mgrd_int.h"

enum { UO = 1, U = 2, GO = 4, G = 8, MASK = 16, OTH = 32 };
#define NOID 0xffffffffu

struct ent { uint16_t tag, perm; uint32_t id; };

/* Encode entries in the xattr form (little endian on every Linux host we
 * run on, as the kernel's). */
static uint32_t blob(uint8_t *buf, const struct ent *e, size_t n)
{
	uint32_t v = 2;

	memcpy(buf, &v, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	return (uint32_t)(4 + n * sizeof(*e));
}

static uint16_t perm_of(const uint8_t *buf, uint32_t len, uint16_t tag)
{
	struct ent e;

	for (uint32_t off = 4; off + 8 <= len; off += 8) {
		memcpy(&e, buf + off, 8);
		if (e.tag == tag)
			return e.perm;
	}
	return 99;
}

static const struct ent named[] = {
	{ UO, 6, NOID }, { U, 4, 65534 }, { GO, 4, NOID }, { MASK, 6, NOID },
	{ OTH, 0, NOID },
};

Test(acl, check_validity_rule)
{
	uint8_t b[128];
	static const struct ent no_other[] = { { UO, 7, NOID }, { GO, 5, NOID } };
	static const struct ent no_mask[] = {
		{ UO, 7, NOID }, { U, 7, 5 }, { GO, 5, NOID }, { OTH, 0, NOID } };
	static const struct ent unsorted[] = {
		{ GO, 5, NOID }, { UO, 7, NOID }, { OTH, 0, NOID } };
	static const struct ent dup_user[] = {
		{ UO, 7, NOID }, { U, 7, 5 }, { U, 4, 5 }, { GO, 5, NOID },
		{ MASK, 7, NOID }, { OTH, 0, NOID } };
	static const struct ent bad_perm[] = {
		{ UO, 8, NOID }, { GO, 5, NOID }, { OTH, 0, NOID } };
	uint32_t len = blob(b, named, 5);

	cr_assert_eq(mgr_acl_check(b, len), 5);
	cr_assert_eq(mgr_acl_check(b, len - 1), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, 4), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, 2), -EINVAL);
	b[0] = 1;  /* version */
	cr_assert_eq(mgr_acl_check(b, len), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, blob(b, no_other, 2)), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, blob(b, no_mask, 4)), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, blob(b, unsorted, 3)), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, blob(b, dup_user, 6)), -EINVAL);
	cr_assert_eq(mgr_acl_check(b, blob(b, bad_perm, 3)), -EINVAL);
}

Test(acl, equiv_mode_and_chmod)
{
	static const struct ent minimal[] = {
		{ UO, 7, NOID }, { GO, 5, NOID }, { OTH, 1, NOID } };
	uint8_t b[128];
	uint32_t len, mode = S_IFREG | S_ISUID | 0644;

	len = blob(b, minimal, 3);
	cr_assert_eq(mgr_acl_equiv_mode(b, len, &mode), 0);
	cr_assert_eq(mode, S_IFREG | S_ISUID | 0751);
	len = blob(b, named, 5);
	mode = S_IFREG | 0600;
	/* The mask is the group class. */
	cr_assert_eq(mgr_acl_equiv_mode(b, len, &mode), 1);
	cr_assert_eq(mode, S_IFREG | 0660);
	mgr_acl_chmod(b, len, 0705);
	cr_assert_eq(perm_of(b, len, UO), 7);
	cr_assert_eq(perm_of(b, len, MASK), 0);
	cr_assert_eq(perm_of(b, len, GO), 4, "the owning group keeps its entry");
	cr_assert_eq(perm_of(b, len, U), 4);
	cr_assert_eq(perm_of(b, len, OTH), 5);
	/* Without a mask chmod sets the owning group's entry. */
	len = blob(b, minimal, 3);
	mgr_acl_chmod(b, len, 0640);
	cr_assert_eq(perm_of(b, len, GO), 4);
	cr_assert_eq(perm_of(b, len, OTH), 0);
}

Test(acl, create_masq)
{
	static const struct ent def[] = {
		{ UO, 7, NOID }, { U, 7, 65534 }, { GO, 5, NOID },
		{ MASK, 7, NOID }, { OTH, 0, NOID } };
	static const struct ent minimal[] = {
		{ UO, 7, NOID }, { GO, 5, NOID }, { OTH, 5, NOID } };
	uint8_t b[128];
	uint32_t len = blob(b, def, 5), mode = S_IFREG | 0666;

	cr_assert_eq(mgr_acl_create_masq(b, len, &mode), 1);
	cr_assert_eq(mode, S_IFREG | 0660);
	cr_assert_eq(perm_of(b, len, UO), 6);
	cr_assert_eq(perm_of(b, len, MASK), 6);
	cr_assert_eq(perm_of(b, len, GO), 5, "masked, not narrowed");
	cr_assert_eq(perm_of(b, len, U), 7);
	cr_assert_eq(perm_of(b, len, OTH), 0);
	/* Idempotent: replay applies it to the final mode again. */
	len = blob(b, def, 5);
	cr_assert_eq(mgr_acl_create_masq(b, len, &mode), 1);
	cr_assert_eq(mode, S_IFREG | 0660);
	len = blob(b, minimal, 3);
	mode = S_IFDIR | 0777;
	cr_assert_eq(mgr_acl_create_masq(b, len, &mode), 0);
	cr_assert_eq(mode, S_IFDIR | 0755);
}

/* ------------------------------------------------------------ namespace */

static struct mgr_ns ns;
static const struct mgr_time T0 = { 1000, 5 }, T1 = { 2000, 7 };

static void ns_setup(void)
{
	tw_log_init("test_mgr_meta", TW_LOG_WARN);
	cr_assert_eq(mgr_ns_init(&ns, 2, 0, 0, &T0), 0);
}

static void ns_teardown(void)
{
	mgr_ns_free(&ns);
}

static struct mgr_inode *mk(uint64_t parent, const char *name, uint32_t mode,
			    uint32_t umask)
{
	struct mgr_create c = { .parent = parent, .name = name, .mode = mode,
				.umask = umask, .now = T0, .target = "t" };
	struct mgr_inode *in;

	cr_assert_eq(mgr_ns_create(&ns, &c, &in), 0, "create %s", name);
	cr_assert_eq(c.mode, in->mode, "the decided mode is handed back");
	return in;
}

static int getx(uint64_t ino, const char *name, uint8_t *buf)
{
	return mgr_ns_getxattr(&ns, ino, name, buf, 128);
}

TestSuite(ns_acl, .init = ns_setup, .fini = ns_teardown);

Test(ns_acl, access_acl_sets_mode)
{
	struct mgr_inode *f = mk(1, "f", S_IFREG | 0644, 022);
	static const struct ent minimal[] = {
		{ UO, 7, NOID }, { GO, 5, NOID }, { OTH, 0, NOID } };
	uint8_t b[128], got[128];
	uint32_t len;

	cr_assert_eq(f->mode, S_IFREG | 0644);
	len = blob(b, named, 5);
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, MGR_ACL_ACCESS, b, len, 0,
				     &T1), 0);
	cr_assert_eq(f->mode, S_IFREG | 0660);
	cr_assert_eq(f->ctime.sec, T1.sec);
	cr_assert_eq(getx(f->ino, MGR_ACL_ACCESS, got), (int)len);
	cr_assert_eq(memcmp(got, b, len), 0);
	/* chmod narrows the mask in the stored ACL. */
	{
		struct mgr_setattr sa = { .valid = MGR_SA_MODE, .mode = 0640 };
		struct mgr_inode *out;

		cr_assert_eq(mgr_ns_setattr(&ns, f->ino, &sa, &T1, &out), 0);
		cr_assert_eq(getx(f->ino, MGR_ACL_ACCESS, got), (int)len);
		cr_assert_eq(perm_of(got, len, MASK), 4);
	}
	/* A minimal ACL is the mode: set it, drop the stored one. */
	len = blob(b, minimal, 3);
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, MGR_ACL_ACCESS, b, len, 0,
				     &T1), 0);
	cr_assert_eq(f->mode, S_IFREG | 0750);
	cr_assert_eq(getx(f->ino, MGR_ACL_ACCESS, got), -ENODATA);
	/* Set from outside the group: setgid goes with the mode change;
	 * the flag means nothing for other names. */
	f->mode |= S_ISGID;
	len = blob(b, named, 5);
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, MGR_ACL_ACCESS, b, len,
				     MGR_XATTR_KILL_SGID, &T1), 0);
	cr_assert_eq(f->mode, S_IFREG | 0660);
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, "user.x", b, len,
				     MGR_XATTR_KILL_SGID, &T1), -EINVAL);
	len = blob(b, minimal, 3);
	/* Invalid ACLs and default ACLs on files are refused. */
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, MGR_ACL_ACCESS, b, len - 8,
				     0, &T1), -EINVAL);
	cr_assert_eq(mgr_ns_setxattr(&ns, f->ino, MGR_ACL_DEFAULT, b, len, 0,
				     &T1), -EACCES);
}

Test(ns_acl, default_acl_inherited_umask_ignored)
{
	static const struct ent def[] = {
		{ UO, 7, NOID }, { U, 7, 65534 }, { GO, 5, NOID },
		{ MASK, 7, NOID }, { OTH, 0, NOID } };
	struct mgr_inode *d = mk(1, "d", S_IFDIR | 0755, 022);
	struct mgr_inode *f, *s, *l, *plain;
	uint8_t b[128], got[128];
	uint32_t len = blob(b, def, 5);

	cr_assert_eq(mgr_ns_setxattr(&ns, d->ino, MGR_ACL_DEFAULT, b, len, 0,
				     &T1), 0);
	cr_assert_eq(d->mode, S_IFDIR | 0755, "a default ACL leaves the mode");
	f = mk(d->ino, "f", S_IFREG | 0666, 077);
	cr_assert_eq(f->mode, S_IFREG | 0660);
	cr_assert_eq(getx(f->ino, MGR_ACL_ACCESS, got), (int)len);
	cr_assert_eq(perm_of(got, len, MASK), 6);
	cr_assert_eq(getx(f->ino, MGR_ACL_DEFAULT, got), -ENODATA);
	s = mk(d->ino, "s", S_IFDIR | 0777, 077);
	cr_assert_eq(s->mode, S_IFDIR | 0770);
	cr_assert_eq(getx(s->ino, MGR_ACL_ACCESS, got), (int)len);
	cr_assert_eq(getx(s->ino, MGR_ACL_DEFAULT, got), (int)len);
	cr_assert_eq(memcmp(got, b, len), 0);
	l = mk(d->ino, "l", S_IFLNK | 0777, 077);
	cr_assert_eq(l->mode, S_IFLNK | 0777);
	cr_assert_eq(getx(l->ino, MGR_ACL_ACCESS, got), -ENODATA);
	plain = mk(1, "plain", S_IFREG | 0666, 027);
	cr_assert_eq(plain->mode, S_IFREG | 0640, "no default ACL: umask");
}

Test(ns_acl, relatime_reads)
{
	struct mgr_inode *f = mk(1, "f", S_IFREG | 0644, 0);
	struct mgr_time t2 = { 3000, 0 }, t3 = { 4000, 0 };
	struct mgr_time later = { 4000 + 24 * 3600, 0 };

	/* Created at T0: atime == mtime, so the first read updates. */
	cr_assert_eq(mgr_ns_accessed(&ns, f->ino, &t2, false), 0);
	cr_assert_eq(f->atime.sec, t2.sec);
	cr_assert_eq(f->ctime.sec, T0.sec, "a read changes no ctime");
	cr_assert_eq(mgr_ns_accessed(&ns, f->ino, &t3, false), 0);
	cr_assert_eq(f->atime.sec, t2.sec, "recent atime kept");
	cr_assert_eq(mgr_ns_accessed(&ns, f->ino, &t3, true), 0);
	cr_assert_eq(f->atime.sec, t3.sec, "strictatime");
	cr_assert_eq(mgr_ns_accessed(&ns, f->ino, &later, false), 0);
	cr_assert_eq(f->atime.sec, later.sec, "a day later");
	cr_assert_eq(mgr_ns_accessed(&ns, 999, &t3, false), -ESTALE);
}

/* ------------------------------------------------------------ replay */

static struct tw_conf conf;

static void conf_setup(void)
{
	tw_log_init("test_mgr_meta", TW_LOG_WARN);
	tw_conf_defaults(&conf);
	conf.n_iods = 2;
	conf.n_groups = 1;
	for (int i = 0; i < 2; i++) {
		conf.iods[i].id = i + 1;
		conf.iods[i].twin_index = i;
		snprintf(conf.iods[i].host, sizeof(conf.iods[i].host),
			 "127.0.0.1");
		conf.iods[i].port = 17700 + i;
	}
}

static void live(struct mgr_state *st, struct mgr_journal *j,
		 struct mgr_op *op)
{
	op->now = T1;
	cr_assert_eq(mgr_op_apply(st, op), 0, "op type %d", op->type);
	cr_assert_eq(mgr_journal_commit(j, op), 0);
}

Test(persist_meta, replay_rebuilds_modes_acls_whiteout_atime, .init = conf_setup)
{
	char dir[] = "/tmp/test_mgr_meta.XXXXXX", cmd[64];
	struct mgr_state a, b;
	struct mgr_journal ja, jb;
	uint8_t buf[128];
	uint32_t len = blob(buf, named, 5);
	uint8_t *ea, *eb;
	size_t la, lb;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(mgr_state_init(&a, &conf, &T0), 0);
	cr_assert_eq(mgr_journal_open(&ja, dir, &a), 0);
	{
		struct mgr_op mkd = { .type = MGR_OP_CREATE, .parent = 1,
				      .name = "d", .mode = S_IFDIR | 0777,
				      .umask = 022 };
		struct mgr_op def = { .type = MGR_OP_SETXATTR, .ino = 0,
				      .name = MGR_ACL_DEFAULT, .value = buf,
				      .value_len = len };
		struct mgr_op mkf = { .type = MGR_OP_CREATE, .name = "f",
				      .mode = S_IFREG | 0666, .umask = 077 };
		struct mgr_op mkg = { .type = MGR_OP_CREATE, .parent = 1,
				      .name = "g", .mode = S_IFREG | 0666,
				      .umask = 077 };
		struct mgr_op chm = { .type = MGR_OP_SETATTR,
				      .valid = MGR_SA_MODE, .mode = 0604 };
		struct mgr_op wh = { .type = MGR_OP_RENAME, .parent = 1,
				     .name = "g", .newparent = 1,
				     .newname = "h", .uid = 7, .gid = 8,
				     .flags = MGR_RENAME_WHITEOUT };
		struct mgr_op rd = { .type = MGR_OP_SIZE_REPORT,
				     .valid = MGR_REPORT_ACCESSED,
				     .atime = { 5000, 1 } };
		struct mgr_inode *in;

		live(&a, &ja, &mkd);
		cr_assert_eq(mkd.out->mode, S_IFDIR | 0755);
		def.ino = mkd.new_ino;
		live(&a, &ja, &def);
		mkf.parent = mkd.new_ino;
		live(&a, &ja, &mkf);
		cr_assert_eq(mkf.out->mode, S_IFREG | 0660);
		live(&a, &ja, &mkg);
		cr_assert_eq(mkg.out->mode, S_IFREG | 0600);
		chm.ino = mkf.new_ino;
		live(&a, &ja, &chm);
		live(&a, &ja, &wh);
		cr_assert_eq(mgr_ns_lookup(&a.ns, 1, "g", &in), 0);
		cr_assert_eq(in->ino, wh.new_ino);
		cr_assert_eq(in->mode, S_IFCHR, "whiteout: 0/0 char device");
		cr_assert_eq(in->rdev, 0);
		cr_assert_eq(in->uid, 7);
		cr_assert_eq(mgr_ns_lookup(&a.ns, 1, "h", &in), 0);
		cr_assert_eq(in->ino, mkg.new_ino);
		rd.ino = mkg.new_ino;
		live(&a, &ja, &rd);
		cr_assert_eq(in->atime.sec, 5000);
	}
	mgr_journal_close(&ja);   /* crash: no snapshot */
	cr_assert_eq(mgr_state_init(&b, &conf, &T0), 0);
	cr_assert_eq(mgr_journal_open(&jb, dir, &b), 0);
	cr_assert_eq(mgr_state_encode(&a, &ea, &la), 0);
	cr_assert_eq(mgr_state_encode(&b, &eb, &lb), 0);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(ea, eb, la), 0, "replayed state differs");
	free(ea);
	free(eb);
	mgr_journal_close(&jb);
	mgr_state_free(&a);
	mgr_state_free(&b);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* ------------------------------------------------------------ standby */

/* What an mgrd pair's standby does with the active's bytes (mgrd/repl.c,
 * docs/ARCHITECTURE.md "mgrd pair"): install a snapshot, then decode,
 * apply and append every record the active's on_record hook shipped.
 * Its state, live and replayed from its own directory, is the active's
 * byte for byte. */
struct shipped {
	uint8_t *buf[16];
	size_t len[16];
	uint64_t seq[16];
	int n;
};

static void ship(void *arg, uint64_t seq, const void *buf, size_t len)
{
	struct shipped *sh = arg;

	cr_assert_lt(sh->n, 16);
	sh->seq[sh->n] = seq;
	sh->buf[sh->n] = malloc(len);
	memcpy(sh->buf[sh->n], buf, len);
	sh->len[sh->n++] = len;
}

static void same_state(const struct mgr_state *x, const struct mgr_state *y)
{
	uint8_t *ex, *ey;
	size_t lx, ly;

	cr_assert_eq(mgr_state_encode(x, &ex, &lx), 0);
	cr_assert_eq(mgr_state_encode(y, &ey, &ly), 0);
	cr_assert_eq(lx, ly);
	cr_assert_eq(memcmp(ex, ey, lx), 0, "standby state differs");
	free(ex);
	free(ey);
}

Test(persist_meta, standby_install_and_append, .init = conf_setup)
{
	char da[] = "/tmp/test_mgr_meta.XXXXXX", db[] = "/tmp/test_mgr_meta.XXXXXX";
	char cmd[96];
	struct mgr_state a, b, c;
	struct mgr_journal ja, jb, jc;
	struct shipped sh = { .n = 0 };
	struct mgr_op mkd = { .type = MGR_OP_CREATE, .parent = 1, .name = "d",
			      .mode = S_IFDIR | 0755 };
	struct mgr_op mkf = { .type = MGR_OP_CREATE, .name = "f",
			      .mode = S_IFREG | 0644 };
	struct mgr_op ren = { .type = MGR_OP_RENAME, .parent = 1, .name = "d",
			      .newparent = 1, .newname = "e" };
	struct mgr_op xa = { .type = MGR_OP_SETXATTR, .name = "user.k",
			     .value = "v", .value_len = 1 };
	struct mgr_op sess = { .type = MGR_OP_SESSION_NEW };
	uint8_t *snap;
	size_t snap_len;

	cr_assert_not_null(mkdtemp(da));
	cr_assert_not_null(mkdtemp(db));
	cr_assert_eq(mgr_state_init(&a, &conf, &T0), 0);
	cr_assert_eq(mgr_journal_open(&ja, da, &a), 0);
	live(&a, &ja, &mkd);
	/* the standby's own history runs further than the active's (an old
	 * active's unacknowledged tail): the install drops it */
	cr_assert_eq(mgr_state_init(&b, &conf, &T1), 0);
	cr_assert_eq(mgr_journal_open(&jb, db, &b), 0);
	for (int i = 0; i < 3; i++) {
		struct mgr_op own = { .type = MGR_OP_SESSION_NEW };

		live(&b, &jb, &own);
	}
	cr_assert_eq(jnl_rec_last_seq(jb.log), 3);
	/* the join: the active's state as a snapshot, installed at its seq */
	cr_assert_eq(mgr_state_encode(&a, &snap, &snap_len), 0);
	mgr_state_free(&b);
	cr_assert_eq(mgr_state_init(&b, &conf, &T1), 0);
	cr_assert_eq(mgr_state_decode(&b, snap, snap_len), 0);
	cr_assert_eq(mgr_journal_install_at(&jb, snap, snap_len,
					    jnl_rec_last_seq(ja.log)), 0);
	cr_assert_eq(jnl_rec_last_seq(jb.log), 1);
	free(snap);
	/* then the stream */
	ja.on_record = ship;
	ja.on_record_arg = &sh;
	mkf.parent = mkd.new_ino;
	live(&a, &ja, &mkf);
	live(&a, &ja, &ren);
	xa.ino = mkf.new_ino;
	live(&a, &ja, &xa);
	live(&a, &ja, &sess);
	cr_assert_eq(sh.n, 4, "every closed record is shipped");
	for (int i = 0; i < sh.n; i++) {
		struct mgr_op op;

		cr_assert_eq(mgr_op_decode(sh.buf[i], sh.len[i], &op), 0);
		cr_assert_eq(mgr_op_apply(&b, &op), 0);
		cr_assert_eq(mgr_journal_append(&jb, sh.buf[i], sh.len[i],
						&op), 0);
		cr_assert_eq(jnl_rec_last_seq(jb.log), sh.seq[i],
			     "both logs give a record the same seq");
	}
	same_state(&a, &b);
	/* the catch-up path: the active's log gives the same records back */
	{
		struct jnl_rec_iter it;
		void *buf;
		size_t len;
		uint64_t seq;

		cr_assert_eq(jnl_rec_iter_start(ja.log, sh.seq[1], &it), 0);
		for (int i = 1; i < sh.n; i++) {
			cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 1);
			cr_assert_eq(seq, sh.seq[i]);
			cr_assert_eq(len, sh.len[i]);
			cr_assert_eq(memcmp(buf, sh.buf[i], len), 0);
			free(buf);
		}
		cr_assert_eq(jnl_rec_iter_next(&it, &buf, &len, &seq), 0);
		cr_assert_eq(jnl_rec_iter_start(ja.log, 0, &it), -ENOENT);
	}
	for (int i = 0; i < sh.n; i++)
		free(sh.buf[i]);
	/* the standby's directory alone gives the same state */
	mgr_journal_close(&jb);
	cr_assert_eq(mgr_state_init(&c, &conf, &T0), 0);
	cr_assert_eq(mgr_journal_open(&jc, db, &c), 0);
	same_state(&a, &c);
	mgr_journal_close(&jc);
	mgr_journal_close(&ja);
	mgr_state_free(&a);
	mgr_state_free(&b);
	mgr_state_free(&c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", da, db);
	cr_assert_eq(system(cmd), 0);
}
