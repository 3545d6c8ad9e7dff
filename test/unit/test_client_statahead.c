/* test_client_statahead.c - the rules of statahead.c: when a listing is
 * fetched, which lookups it answers and for how long, and what throws it
 * away (this mount's changes and removals, age, capacity, an unused
 * batch). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount.h"
#include "statahead.h"

#define DIR_INO 7u
#define TTL 1000u

static struct fc_sa sa;

static void setup(void)
{
	fc_sa_init(&sa, TTL);
}

static void teardown(void)
{
	fc_sa_free(&sa);
}

/* A ReaddirReply of f<first>..f<first+n-1> (ino 100 + i, cookie 10 + i),
 * as it comes off the wire: directories (listing) or entries of this mode
 * and link count (listing_as). */
static struct wire_msg *listing_as(unsigned first, unsigned n, bool eof,
				   uint32_t mode, uint32_t nlink)
{
	Twinfs__ReaddirReply r = TWINFS__READDIR_REPLY__INIT;
	Twinfs__Dirent *ents = calloc(n ? n : 1, sizeof(*ents));
	Twinfs__Dirent **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	Twinfs__Attr *attrs = calloc(n ? n : 1, sizeof(*attrs));
	char (*names)[16] = calloc(n ? n : 1, sizeof(*names));
	struct wire_msg *m = calloc(1, sizeof(*m));
	uint8_t *buf;
	size_t len;
	unsigned i;

	cr_assert(ents && ptrs && attrs && names && m);
	for (i = 0; i < n; i++) {
		twinfs__dirent__init(&ents[i]);
		twinfs__attr__init(&attrs[i]);
		snprintf(names[i], sizeof(names[i]), "f%u", first + i);
		attrs[i].ino = 100 + first + i;
		attrs[i].mode = mode;   /* no layout needed */
		attrs[i].nlink = nlink;
		attrs[i].size = first + i;
		ents[i].name = names[i];
		ents[i].ino = attrs[i].ino;
		ents[i].mode = attrs[i].mode;
		ents[i].cookie = 10 + first + i;
		ents[i].attr = &attrs[i];
		ptrs[i] = &ents[i];
	}
	r.n_entries = n;
	r.entries = ptrs;
	r.eof = eof;
	len = twinfs__readdir_reply__get_packed_size(&r);
	buf = malloc(len ? len : 1);
	cr_assert(buf);
	twinfs__readdir_reply__pack(&r, buf);
	m->body = (ProtobufCMessage *)twinfs__readdir_reply__unpack(NULL, len,
								    buf);
	cr_assert(m->body);
	free(buf);
	free(ents);
	free(ptrs);
	free(attrs);
	free(names);
	return m;
}

static struct wire_msg *listing(unsigned first, unsigned n, bool eof)
{
	return listing_as(first, n, eof, S_IFDIR | 0755, 2);
}

static enum fc_sa_result find(const char *name, uint64_t now,
			      struct fc_attr *a, struct fc_sa_fetch *f)
{
	uint64_t age = 0;

	return fc_sa_find(&sa, DIR_INO, name, now, a, &age, f);
}

/* Two misses of a cold directory start a fetch from its start. */
static void two_misses(uint64_t now, struct fc_sa_fetch *f)
{
	struct fc_attr a;

	cr_assert_eq(find("x", now, &a, f), FC_SA_MISS);
	cr_assert_eq(f->dir, 0, "one miss fetches nothing");
	cr_assert_eq(find("y", now, &a, f), FC_SA_MISS);
	cr_assert_eq(f->dir, DIR_INO);
	cr_assert_eq(f->cookie, 0);
}

/* Two more misses at now: whether they started a fetch (*f). */
static bool misses_fetch(uint64_t now, struct fc_sa_fetch *f)
{
	struct fc_attr a;

	cr_assert_eq(find("m1", now, &a, f), FC_SA_MISS);
	cr_assert_eq(find("m2", now, &a, f), FC_SA_MISS);
	return f->dir == DIR_INO;
}

/* ... and the entries it brings answer. */
static void fetch_first(unsigned n, bool eof, uint64_t now)
{
	struct fc_sa_fetch f;

	two_misses(now, &f);
	fc_sa_fetched(&sa, &f, 0, listing(0, n, eof), now);
}

Test(client_statahead, two_misses_fetch_then_hits, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	uint64_t age = 99;

	fetch_first(10, true, 1000);
	cr_assert_eq(fc_sa_find(&sa, DIR_INO, "f3", 1250, &a, &age, &f),
		     FC_SA_HIT);
	cr_assert_eq(a.ino, 103);
	cr_assert_eq(a.size, 3);
	cr_assert_eq(age, 250, "the answer is as old as its fetch");
	cr_assert_eq(f.dir, 0, "eof: nothing more to fetch");
	/* Another directory knows nothing of it. */
	cr_assert_eq(fc_sa_find(&sa, DIR_INO + 1, "f3", 1250, &a, &age, &f),
		     FC_SA_MISS);
	/* A name the listing lacks is asked of mgrd, never answered absent,
	 * and past eof it fetches nothing. */
	cr_assert_eq(find("nope", 1300, &a, &f), FC_SA_MISS);
	cr_assert_eq(find("nope2", 1300, &a, &f), FC_SA_MISS);
	cr_assert_eq(f.dir, 0);
}

Test(client_statahead, off_when_ttl_is_zero)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	int i;

	fc_sa_init(&sa, 0);
	for (i = 0; i < 5; i++) {
		cr_assert_eq(find("x", 1000, &a, &f), FC_SA_MISS);
		cr_assert_eq(f.dir, 0);
	}
	fc_sa_free(&sa);
}

Test(client_statahead, expires_after_ttl, .init = setup, .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	fetch_first(10, true, 1000);
	cr_assert_eq(find("f1", 1000 + TTL - 1, &a, &f), FC_SA_HIT);
	cr_assert_eq(find("f2", 1000 + TTL, &a, &f), FC_SA_MISS);
}

Test(client_statahead, own_change_voids_listing, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	fetch_first(10, true, 1000);
	cr_assert_eq(find("f1", 1001, &a, &f), FC_SA_HIT);
	fc_sa_changed(&sa);
	cr_assert_eq(find("f2", 1002, &a, &f), FC_SA_MISS);
}

Test(client_statahead, change_in_flight_voids_fetch, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	two_misses(1000, &f);
	fc_sa_changed(&sa);   /* e.g. a create sent while READDIR flew */
	fc_sa_fetched(&sa, &f, 0, listing(0, 10, true), 1001);
	cr_assert_eq(find("f1", 1002, &a, &f), FC_SA_MISS);
}

Test(client_statahead, failed_fetch_answers_nothing, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	two_misses(1000, &f);
	fc_sa_fetched(&sa, &f, -EIO, NULL, 1001);
	cr_assert_eq(find("f1", 1002, &a, &f), FC_SA_MISS);
	/* ... and waits before it asks again. */
	cr_assert_not(misses_fetch(1003, &f));
	cr_assert(misses_fetch(1001 + FC_SA_BACKOFF_MIN_MS, &f));
}

/* Half of a batch used: the next one is fetched from its last cookie;
 * beyond FC_SA_DIR_BATCHES the oldest goes. */
Test(client_statahead, reads_on_ahead_and_caps_batches, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	unsigned b, i, n = 8;
	char name[16];

	fetch_first(n, false, 1000);
	for (b = 0; b < FC_SA_DIR_BATCHES + 1; b++) {
		memset(&f, 0, sizeof(f));
		for (i = 0; i < n / 2; i++) {
			snprintf(name, sizeof(name), "f%u", b * n + i);
			cr_assert_eq(find(name, 1010, &a, &f), FC_SA_HIT,
				     "%s", name);
			if (i + 1 < n / 2)
				cr_assert_eq(f.dir, 0, "%s", name);
		}
		cr_assert_eq(f.dir, DIR_INO, "batch %u: read on", b);
		cr_assert_eq(f.cookie, 10 + b * n + n - 1);
		fc_sa_fetched(&sa, &f, 0, listing((b + 1) * n, n, false),
			      1010);
	}
	/* FC_SA_DIR_BATCHES + 2 were fetched: the first two are gone. */
	cr_assert_eq(find("f0", 1011, &a, &f), FC_SA_MISS);
	snprintf(name, sizeof(name), "f%u", n + 1);
	cr_assert_eq(find(name, 1011, &a, &f), FC_SA_MISS);
	snprintf(name, sizeof(name), "f%u", 2 * n + 1);
	cr_assert_eq(find(name, 1011, &a, &f), FC_SA_HIT);
	snprintf(name, sizeof(name), "f%u", (FC_SA_DIR_BATCHES + 1) * n + 7);
	cr_assert_eq(find(name, 1011, &a, &f), FC_SA_HIT);
}

/* A listing voided before it answered anything (tar x: each create voids
 * it) makes the directory wait, longer each time. */
Test(client_statahead, wasted_fetches_back_off, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	uint64_t now = 1000;

	fetch_first(100, true, now);
	fc_sa_changed(&sa);
	cr_assert_not(misses_fetch(++now, &f), "backing off");
	now += FC_SA_BACKOFF_MIN_MS;
	cr_assert(misses_fetch(now, &f));
	fc_sa_changed(&sa);
	fc_sa_fetched(&sa, &f, 0, listing(0, 100, true), now);
	/* Second waste in a row: twice as long. */
	cr_assert_not(misses_fetch(now + FC_SA_BACKOFF_MIN_MS, &f));
	cr_assert(misses_fetch(now + 2 * FC_SA_BACKOFF_MIN_MS, &f));
}

/* tar x: a lookup misses, then a create changes the directory, and so
 * on.  Misses with changes between them start no fetch. */
Test(client_statahead, changes_between_misses_fetch_nothing, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	char name[16];
	unsigned i;

	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "new%u", i);
		cr_assert_eq(find(name, 1000 + i, &a, &f), FC_SA_MISS);
		cr_assert_eq(f.dir, 0, "%s", name);
		fc_sa_changed(&sa);
	}
	/* Quiet again: the next two misses fetch at once. */
	cr_assert(misses_fetch(1100, &f));
}

/* A used listing that expires costs no pause. */
Test(client_statahead, used_listing_refetches_at_once, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	char name[16];
	unsigned i;

	fetch_first(20, true, 1000);
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(find(name, 1100, &a, &f), FC_SA_HIT);
	}
	cr_assert_eq(find("f1", 1000 + TTL, &a, &f), FC_SA_MISS);
	cr_assert_eq(find("f2", 1000 + TTL, &a, &f), FC_SA_MISS);
	cr_assert_eq(f.dir, DIR_INO);
}

/* More directories than slots: the least recently used one goes, and its
 * fetch in flight is dropped when it ends. */
Test(client_statahead, slots_are_reused, .init = setup, .fini = teardown)
{
	struct fc_sa_fetch f, first;
	struct fc_attr a;
	uint64_t age, dir;

	two_misses(1000, &first);
	for (dir = 1; dir <= FC_SA_DIRS; dir++)
		cr_assert_eq(fc_sa_find(&sa, 1000 + dir, "x", 1001 + dir, &a,
					&age, &f), FC_SA_MISS);
	fc_sa_fetched(&sa, &first, 0, listing(0, 10, true), 1010);
	cr_assert_eq(find("f1", 1011, &a, &f), FC_SA_MISS);
}

/* This mount's removals: only the removed name leaves the listing; an
 * UNLINK is not a change that voids it (fc_mgr_type_changes). */
Test(client_statahead, removal_takes_out_its_name, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	cr_assert_not(fc_mgr_type_changes(TWINFS__MSG_TYPE__MSG_UNLINK));
	cr_assert_not(fc_mgr_type_changes(TWINFS__MSG_TYPE__MSG_RMDIR));
	cr_assert(fc_mgr_type_changes(TWINFS__MSG_TYPE__MSG_RENAME));
	two_misses(1000, &f);
	fc_sa_fetched(&sa, &f, 0, listing_as(0, 10, true, S_IFREG | 0644, 1),
		      1000);
	fc_sa_removed(&sa, DIR_INO, "f3");
	fc_sa_removed(&sa, DIR_INO + 1, "f4");   /* another directory's f4 */
	cr_assert_eq(find("f3", 1001, &a, &f), FC_SA_MISS);
	cr_assert_eq(find("f4", 1001, &a, &f), FC_SA_HIT);
	cr_assert_eq(a.ino, 104);
	/* Misses across removals still start a fetch (an unlink loop:
	 * lookup, unlink, lookup, ...), where a change would not. */
	fc_sa_free(&sa);
	fc_sa_init(&sa, TTL);
	cr_assert_eq(find("m1", 1002, &a, &f), FC_SA_MISS);
	fc_sa_removed(&sa, DIR_INO, "m1");
	cr_assert_eq(find("m2", 1003, &a, &f), FC_SA_MISS);
	cr_assert_eq(f.dir, DIR_INO);
}

/* A removal changes its directory's attributes and may change those of
 * a file with another name: such entries of a listing fetched before it
 * are not used; one-name files are. */
Test(client_statahead, removal_stops_dirs_and_links, .init = setup,
     .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;

	fetch_first(10, true, 1000);   /* directories */
	cr_assert_eq(find("f1", 1001, &a, &f), FC_SA_HIT);
	fc_sa_removed(&sa, DIR_INO + 5, "x");   /* anywhere */
	cr_assert_eq(find("f1", 1002, &a, &f), FC_SA_MISS);
	fc_sa_free(&sa);
	fc_sa_init(&sa, TTL);

	two_misses(1000, &f);
	fc_sa_fetched(&sa, &f, 0, listing_as(0, 10, true, S_IFREG | 0644, 2),
		      1000);
	cr_assert_eq(find("f1", 1001, &a, &f), FC_SA_HIT);
	fc_sa_removed(&sa, DIR_INO, "f2");
	cr_assert_eq(find("f1", 1002, &a, &f), FC_SA_MISS, "two names");
	/* A listing fetched after the removal is whole again. */
	fc_sa_free(&sa);
	fc_sa_init(&sa, TTL);
	fc_sa_removed(&sa, DIR_INO, "f9");
	two_misses(1000, &f);
	fc_sa_fetched(&sa, &f, 0, listing_as(0, 9, true, S_IFREG | 0644, 2),
		      1000);
	cr_assert_eq(find("f1", 1001, &a, &f), FC_SA_HIT);
}

/* A fetch in flight across a removal: mgrd may have listed the name
 * before it went; it is not answered from that listing.  Past what the
 * ring remembers, the whole fetch is thrown away. */
Test(client_statahead, removal_in_flight, .init = setup, .fini = teardown)
{
	struct fc_sa_fetch f;
	struct fc_attr a;
	int i;

	two_misses(1000, &f);
	fc_sa_removed(&sa, DIR_INO, "f5");
	fc_sa_removed(&sa, DIR_INO + 1, "f6");
	fc_sa_fetched(&sa, &f, 0, listing_as(0, 10, true, S_IFREG | 0644, 1),
		      1001);
	cr_assert_eq(find("f5", 1002, &a, &f), FC_SA_MISS);
	cr_assert_eq(find("f6", 1002, &a, &f), FC_SA_HIT);
	fc_sa_free(&sa);
	fc_sa_init(&sa, TTL);

	two_misses(1000, &f);
	for (i = 0; i <= FC_SA_RM_RING; i++)
		fc_sa_removed(&sa, DIR_INO + 1, "x");
	fc_sa_fetched(&sa, &f, 0, listing_as(0, 10, true, S_IFREG | 0644, 1),
		      1001);
	cr_assert_eq(find("f6", 1002, &a, &f), FC_SA_MISS);
}
