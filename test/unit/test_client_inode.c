/* test_client_inode.c - the client's pure inode rules: the merged size
 * (mgrd's size vs this client's unreported writes under one trunc_gen) and
 * the validation of attributes and layouts that arrive from mgrd. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "inode.h"
#include "mount.h"

Test(client_inode, merge_size_same_gen_takes_larger)
{
	cr_assert_eq(fc_merge_size(100, 3, 200, 3), 200);
	cr_assert_eq(fc_merge_size(300, 3, 200, 3), 300);
	cr_assert_eq(fc_merge_size(0, 0, 0, 0), 0);
}

Test(client_inode, merge_size_truncate_drops_local)
{
	/* A truncate (new trunc_gen) supersedes writes made before it. */
	cr_assert_eq(fc_merge_size(10, 4, 5000, 3), 10);
	cr_assert_eq(fc_merge_size(10, 3, 5000, 4), 10);
}

static void fill_attr(Twinfs__Attr *a, Twinfs__Layout *l, uint32_t *groups)
{
	twinfs__attr__init(a);
	twinfs__layout__init(l);
	a->ino = 42;
	a->mode = S_IFREG | 0644;
	a->nlink = 1;
	a->size = 12345;
	a->trunc_gen = 7;
	a->generation = 1;
	l->stripe_size = 512 << 10;
	l->stripe_count = 2;
	l->n_groups = 2;
	groups[0] = 1;
	groups[1] = 0;
	l->groups = groups;
	a->layout = l;
}

Test(client_inode, attr_from_pb_regular_file)
{
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[2];
	struct fc_attr out;

	fill_attr(&a, &l, groups);
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_eq(out.ino, 42);
	cr_assert_eq(out.size, 12345);
	cr_assert_eq(out.trunc_gen, 7);
	cr_assert(out.has_layout);
	cr_assert_eq(out.layout.stripe_size, 512u << 10);
	cr_assert_eq(out.layout.stripe_count, 2);
	cr_assert_eq(out.layout.groups[0], 1);
	cr_assert_eq(out.layout.groups[1], 0);
}

Test(client_inode, attr_from_pb_rejects_bad_layouts)
{
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[2];
	struct fc_attr out;

	fill_attr(&a, &l, groups);
	l.n_groups = 1;                     /* fewer groups than columns */
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_not(out.has_layout);

	fill_attr(&a, &l, groups);
	l.stripe_size = 100000;             /* not a power of two */
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_not(out.has_layout);

	fill_attr(&a, &l, groups);
	l.stripe_count = 0;
	l.n_groups = 0;
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_not(out.has_layout);

	fill_attr(&a, &l, groups);
	groups[1] = 1000;                   /* group out of range */
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_not(out.has_layout);

	cr_assert_eq(fc_attr_from_pb(NULL, &out), -EIO);
	fill_attr(&a, &l, groups);
	a.ino = 0;
	cr_assert_eq(fc_attr_from_pb(&a, &out), -EIO);
}

Test(client_inode, attr_from_pb_directory_policy)
{
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[2];
	struct fc_attr out;

	fill_attr(&a, &l, groups);
	a.mode = S_IFDIR | 0755;
	l.stripe_count = 0;
	l.n_groups = 1;
	groups[0] = 1;
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert(out.has_layout);
	cr_assert_eq(out.policy_first, 1);
	cr_assert_eq(out.layout.stripe_count, 0);

	l.n_groups = 0;
	cr_assert_eq(fc_attr_from_pb(&a, &out), 0);
	cr_assert_eq(out.policy_first, -1);
}

/* A client with only its inode table, and the attributes of fill_attr. */
static struct fc_client *table_new(struct fc_attr *at)
{
	struct fc_client *cl = calloc(1, sizeof(*cl));
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[2];

	cr_assert_not_null(cl);
	fc_inodes_init(cl);
	atomic_init(&cl->blksize, 65536);
	cl->opts.attr_timeout = 1.0;
	cl->opts.entry_timeout = 1.0;
	fill_attr(&a, &l, groups);
	cr_assert_eq(fc_attr_from_pb(&a, at), 0);
	return cl;
}

Test(client_inode, inode_table_counts_lookups)
{
	struct fc_attr at, got;
	struct fc_client *cl = table_new(&at);
	struct fuse_entry_param e;
	uint64_t size;

	fc_inode_entry(cl, &at, &e);
	cr_assert_eq(e.ino, 42);
	cr_assert_eq(e.attr.st_size, 12345);
	cr_assert_eq(e.attr.st_blksize, 512 << 10);
	fc_inode_entry(cl, &at, &e);

	/* Our write beyond mgrd's size shows until a truncate. */
	fc_inode_note_write(cl, 42, 99999, 7);
	cr_assert(fc_inode_get(cl, 42, &got, &size));
	cr_assert_eq(size, 99999);
	at.trunc_gen = 8;
	at.size = 0;
	cr_assert_eq(fc_inode_update(cl, &at, NULL), 0);
	/* A late reply with the older trunc_gen does not roll back. */
	at.trunc_gen = 7;
	at.size = 5;
	cr_assert_eq(fc_inode_update(cl, &at, NULL), 0);

	fc_inode_forget(cl, 42, 1);
	cr_assert(fc_inode_get(cl, 42, NULL, NULL));
	fc_inode_forget(cl, 42, 1);
	cr_assert_not(fc_inode_get(cl, 42, NULL, NULL));
	fc_inodes_free(cl);
	free(cl);
}

/* A lookup answered from a listing fetched ahead, for an inode the
 * kernel holds: taken unless the table holds newer attributes (a later
 * ctime or truncation); it counts a lookup, and the answer keeps the
 * table's merged size (this mount's write answered early). */
Test(client_inode, entry_not_older_than_the_table)
{
	struct fc_attr at, old;
	struct fc_client *cl = table_new(&at);
	struct fuse_entry_param e;

	cr_assert_eq(fc_inode_entry_not_older(cl, &at, &e), 0, "unknown");
	cr_assert_eq(e.ino, 42);
	fc_inode_note_write(cl, 42, 99999, at.trunc_gen);
	cr_assert_eq(fc_inode_entry_not_older(cl, &at, &e), 0, "as new");
	cr_assert_eq(e.attr.st_size, 99999, "the table's merged size");
	old = at;
	old.ctime_nsec = at.ctime_nsec ? at.ctime_nsec - 1 : 0;
	old.ctime_sec = at.ctime_nsec ? at.ctime_sec : at.ctime_sec - 1;
	cr_assert_eq(fc_inode_entry_not_older(cl, &old, &e), -EEXIST);
	old = at;
	old.trunc_gen = at.trunc_gen - 1;
	cr_assert_eq(fc_inode_entry_not_older(cl, &old, &e), -EEXIST);
	/* Two lookups counted, none for the refusals. */
	fc_inode_forget(cl, 42, 2);
	cr_assert_not(fc_inode_get(cl, 42, NULL, NULL));
	fc_inodes_free(cl);
	free(cl);
}

/* An inode an UNLINK destroyed (gone_ino): its last attributes with nlink
 * 0, for the kernel's time write-back; unknown and live inodes are not. */
Test(client_inode, gone_inode_answers_nlink_0)
{
	struct fc_attr at;
	struct fc_client *cl = table_new(&at);
	struct fuse_entry_param e;
	struct stat st;

	fc_inode_entry(cl, &at, &e);
	cr_assert_not(fc_inode_gone_stat(cl, 42, &st), "live");
	fc_inode_set_gone(cl, 43);   /* not cached: nothing */
	cr_assert_not(fc_inode_gone_stat(cl, 43, &st));
	fc_inode_set_gone(cl, 42);
	cr_assert(fc_inode_gone_stat(cl, 42, &st));
	cr_assert_eq(st.st_nlink, 0);
	cr_assert_eq(st.st_size, 12345);
	cr_assert_eq(st.st_ino, 42);
	fc_inodes_free(cl);
	free(cl);
}

/* The kernel's cached ACLs: a new acl_sig from mgrd makes them stale once
 * (another mount changed them), unless this mount made the change itself
 * (the kernel dropped them then); acl_sig 0 means "no ACL". */
Test(client_inode, acl_sig_staleness)
{
	struct fc_client *cl = calloc(1, sizeof(*cl));
	Twinfs__Attr a;
	Twinfs__Layout l;
	uint32_t groups[2];
	struct fc_attr at;
	struct fuse_entry_param e;

	cr_assert_not_null(cl);
	fc_inodes_init(cl);
	atomic_init(&cl->blksize, 65536);
	fill_attr(&a, &l, groups);
	cr_assert_eq(fc_attr_from_pb(&a, &at), 0);
	fc_inode_entry(cl, &at, &e);
	cr_assert(fc_inode_acl_none(cl, 42));
	cr_assert_not(fc_inode_take_acl_stale(cl, 42), "first sight");

	at.acl_sig = 0x1235;   /* set elsewhere */
	fc_inode_update(cl, &at, NULL);
	cr_assert_not(fc_inode_acl_none(cl, 42));
	cr_assert(fc_inode_take_acl_stale(cl, 42));
	cr_assert_not(fc_inode_take_acl_stale(cl, 42), "taken once");
	fc_inode_update(cl, &at, NULL);
	cr_assert_not(fc_inode_take_acl_stale(cl, 42), "unchanged");

	/* Removed here: unknown until the next attributes, which are
	 * adopted without invalidation. */
	fc_inode_acl_local(cl, 42);
	cr_assert_not(fc_inode_acl_none(cl, 42));
	at.acl_sig = 0;
	fc_inode_update(cl, &at, NULL);
	cr_assert_not(fc_inode_take_acl_stale(cl, 42));
	cr_assert(fc_inode_acl_none(cl, 42));
	cr_assert_not(fc_inode_acl_none(cl, 43), "not cached: ask mgrd");
	fc_inodes_free(cl);
	free(cl);
}

/* Log lines name a file by the names this mount gave the kernel: a path
 * up to the root when every directory is known, "..." above an unknown
 * one; renames made here move names, and a replaced file loses its own. */
Test(client_inode, names_for_log_lines)
{
	struct fc_attr at;
	struct fc_client *cl = table_new(&at);
	struct fuse_entry_param e;
	char buf[FC_PATH_LOG];

	at.ino = FUSE_ROOT_ID;
	fc_inode_entry(cl, &at, &e);
	at.ino = 10;
	fc_inode_entry(cl, &at, &e);
	fc_inode_named(cl, 10, FUSE_ROOT_ID, "g0");
	at.ino = 42;
	fc_inode_entry(cl, &at, &e);
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)), "ino 42");
	fc_inode_named(cl, 42, 10, "big");
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)),
			 "/g0/big (ino 42)");
	cr_assert_str_eq(fc_ino_path(cl, 77, buf, sizeof(buf)), "ino 77");

	/* A directory above not known here. */
	at.ino = 50;
	fc_inode_entry(cl, &at, &e);
	fc_inode_named(cl, 50, 49, "deep");
	cr_assert_str_eq(fc_ino_path(cl, 50, buf, sizeof(buf)),
			 ".../deep (ino 50)");

	/* mv /g0/big /g0/small, then over it: the replaced file has no
	 * name, the moved one has the new. */
	fc_inode_renamed(cl, 10, "big", 10, "small", 0);
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)),
			 "/g0/small (ino 42)");
	at.ino = 43;
	fc_inode_entry(cl, &at, &e);
	fc_inode_named(cl, 43, FUSE_ROOT_ID, "other");
	fc_inode_renamed(cl, FUSE_ROOT_ID, "other", 10, "small", 0);
	cr_assert_str_eq(fc_ino_path(cl, 43, buf, sizeof(buf)),
			 "/g0/small (ino 43)");
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)), "ino 42");

	/* RENAME_EXCHANGE swaps the names. */
	fc_inode_named(cl, 42, FUSE_ROOT_ID, "x");
	fc_inode_renamed(cl, FUSE_ROOT_ID, "x", 10, "small", 2);
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)),
			 "/g0/small (ino 42)");
	cr_assert_str_eq(fc_ino_path(cl, 43, buf, sizeof(buf)),
			 "/x (ino 43)");

	/* A rename of a directory moves what is below it. */
	fc_inode_renamed(cl, FUSE_ROOT_ID, "g0", FUSE_ROOT_ID, "g1", 0);
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)),
			 "/g1/small (ino 42)");

	/* A short buffer is cut, never overrun. */
	cr_assert_eq(strlen(fc_ino_path(cl, 42, buf, 8)), 7);

	/* Long names: the head of the path goes, the number stays. */
	{
		char big[256];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		at.ino = 60;
		fc_inode_entry(cl, &at, &e);
		fc_inode_named(cl, 60, FUSE_ROOT_ID, big);
		at.ino = 61;
		fc_inode_entry(cl, &at, &e);
		big[0] = 'b';
		fc_inode_named(cl, 61, 60, big);
		fc_ino_path(cl, 61, buf, sizeof(buf));
		cr_assert_lt(strlen(buf), sizeof(buf));
		cr_assert_eq(strncmp(buf, "...", 3), 0, "%s", buf);
		cr_assert(strstr(buf, "/baaa") != NULL, "%s", buf);
		cr_assert_str_eq(buf + strlen(buf) - 9, " (ino 61)");
	}

	/* rm /x: an open file there has no name now. */
	fc_inode_unnamed(cl, FUSE_ROOT_ID, "x");
	cr_assert_str_eq(fc_ino_path(cl, 43, buf, sizeof(buf)), "ino 43");

	fc_inode_forget(cl, 42, 1);
	cr_assert_str_eq(fc_ino_path(cl, 42, buf, sizeof(buf)), "ino 42");
	fc_inodes_free(cl);
	free(cl);
}
