/* test_mgr_cap.c - mgrd's capabilities (mgrd/cap.c, proto/FORMAT.md
 * "Capabilities"): what mgr_cap_issue seals opens under the cluster
 * secret's cap key with the session, inode, rights, trunc_gen and expiry
 * asked; no cap for a session that is not live, for a directory, or
 * without a secret. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "server_int.h"

static struct tw_conf conf;
static const struct mgr_time T0 = { 1000, 5 };

static void conf_setup(void)
{
	tw_log_init("test_mgr_cap", TW_LOG_WARN);
	tw_conf_defaults(&conf);
	conf.n_iods = 2;
	conf.n_groups = 1;
	for (int i = 0; i < 2; i++) {
		conf.iods[i].id = i + 1;
		conf.iods[i].twin_index = i;
		snprintf(conf.iods[i].host, sizeof(conf.iods[i].host),
			 "127.0.0.1");
		conf.iods[i].port = 17800 + i;
	}
	snprintf(conf.secret, sizeof(conf.secret), "unit-secret");
	conf.cap_lifetime_ms = 7000;
}

Test(mgr_cap, issue_open_and_refusals, .init = conf_setup)
{
	static struct mgr_server s;   /* large; zeroed */
	struct mgr_op mk = { .type = MGR_OP_CREATE, .parent = 1, .name = "f",
			     .mode = S_IFREG | 0644 };
	uint8_t key[WIRE_CAP_KEY_LEN], blob[WIRE_CAP_LEN];
	struct mgr_inode *file, *root;
	struct wire_cap cap;
	uint32_t life = 0;
	uint64_t now;

	s.conf = &conf;
	cr_assert_eq(mgr_state_init(&s.st, &conf, &T0), 0);
	cr_assert_not_null(mgr_session_create(&s.st.sessions, 5));
	mk.now = T0;
	cr_assert_eq(mgr_op_apply(&s.st, &mk), 0);
	cr_assert_eq(mgr_ns_lookup(&s.st.ns, 1, "f", &file), 0);
	file->trunc_gen = 9;
	root = mgr_ns_get(&s.st.ns, 1);

	/* Without a secret: none. */
	conf.secret[0] = '\0';
	cr_assert_eq(mgr_cap_init(&conf), 0);
	cr_assert(!mgr_cap_enabled());
	cr_assert_eq(mgr_cap_issue(&s, 5, file, true, blob, &life), -EOPNOTSUPP);

	snprintf(conf.secret, sizeof(conf.secret), "unit-secret");
	cr_assert_eq(mgr_cap_init(&conf), 0);
	cr_assert(mgr_cap_enabled());
	cr_assert_eq(wire_cap_key("unit-secret", key), 0);
	now = wire_realtime_ms();
	cr_assert_eq(mgr_cap_issue(&s, 5, file, true, blob, &life), 0);
	cr_assert_eq(life, 7000);
	cr_assert_eq(wire_cap_open(key, blob, sizeof(blob), &cap), 0);
	cr_assert_eq(cap.session, 5);
	cr_assert_eq(cap.ino, file->ino);
	cr_assert_eq(cap.trunc_gen, 9);
	cr_assert_eq(cap.flags, WIRE_CAP_F_WRITE);
	cr_assert(cap.expiry_ms >= now + 7000 && cap.expiry_ms <= now + 9000,
		  "expiry %llu, now %llu", (unsigned long long)cap.expiry_ms,
		  (unsigned long long)now);
	cr_assert_eq(mgr_cap_issue(&s, 5, file, false, blob, &life), 0);
	cr_assert_eq(wire_cap_open(key, blob, sizeof(blob), &cap), 0);
	cr_assert_eq(cap.flags, 0);
	/* Another secret's key does not open it. */
	cr_assert_eq(wire_cap_key("other", key), 0);
	cr_assert_eq(wire_cap_open(key, blob, sizeof(blob), &cap), -EBADMSG);

	/* A session that is not live (never was, or expired), none. */
	cr_assert_eq(mgr_cap_issue(&s, 6, file, false, blob, &life), -EKEYEXPIRED);
	cr_assert_eq(mgr_cap_issue(&s, 0, file, false, blob, &life), -EKEYEXPIRED);
	/* Only regular files have data. */
	cr_assert_eq(mgr_cap_issue(&s, 5, root, false, blob, &life), -EINVAL);
	mgr_state_free(&s.st);
	conf.secret[0] = '\0';
	mgr_cap_init(&conf);
}
