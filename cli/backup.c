/* backup.c - twinfsctl backup-meta FILE: a consistent copy of mgrd's
 * state (the namespace, sessions, map, resync jobs) taken while mgrd
 * serves (MSG_MGRD_BACKUP, proto/FORMAT.md "mgrd pair"; restore:
 * docs/OPERATIONS.md "Backup and restore").  FILE is a snapshot in
 * mgrd/FORMAT.md section 2; it is written to FILE.tmp, checked (magic,
 * length, CRC32C), synced and renamed, so FILE is whole or absent.
 */
#include "ctl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SNAP_MAGIC 0x534d5754u   /* "TWMS", mgrd/FORMAT.md section 2 */

/* The snapshot's own checks: magic first, CRC32C of all before the
 * last four bytes. */
static int snap_check(int fd, uint64_t total)
{
	uint8_t buf[1 << 16], tail[4];
	uint32_t crc = 0;
	uint64_t off = 0;

	if (total < 12 || pread(fd, buf, 4, 0) != 4 ||
	    tw_get_le32(buf) != SNAP_MAGIC)
		return -EBADMSG;
	while (off < total - 4) {
		size_t n = (size_t)TW_MIN((uint64_t)sizeof(buf),
					  total - 4 - off);

		if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
			return -EIO;
		crc = tw_crc32c(crc, buf, n);
		off += n;
	}
	if (pread(fd, tail, 4, (off_t)off) != 4)
		return -EIO;
	return tw_get_le32(tail) == crc ? 0 : -EBADMSG;
}

static int fetch(struct ctl *ctl, struct wire_sync *mgr, const char *addr,
		 int fd, uint64_t *total_out, uint32_t *pause_out)
{
	Twinfs__MgrdBackup q = TWINFS__MGRD_BACKUP__INIT;
	uint64_t got = 0, total = 0;
	struct wire_msg *reply = NULL;
	int rc;

	/* The first answer comes when mgrd's child has written the whole
	 * state (about 10 s per million inodes on a busy machine), far
	 * past request_timeout: unless -t says otherwise, wait as long as
	 * mgrd lets the child run, and a little more for the answer.  A
	 * snapshot_timeout of 0 (none) waits an hour.  (ctl_load_conf has
	 * filled timeout_ms with request_timeout by now: -t is timeout_set.) */
	if (!ctl->timeout_set)
		wire_sync_set_timeout(mgr, ctl->conf.snapshot_timeout_ms ?
				      ctl->conf.snapshot_timeout_ms + 30000 :
				      3600000);
	for (;;) {
		const Twinfs__MgrdBackupReply *r;

		rc = ctl_call(mgr, "mgrd", addr,
			      TWINFS__MSG_TYPE__MSG_MGRD_BACKUP, &q.base,
			      &reply, false);
		if (rc == -ETIME)   /* mgrd's, not this request's, timeout */
			fprintf(stderr, "%s: mgrd (%s): the snapshot process "
				"writing the backup ran longer than "
				"snapshot_timeout and was killed (see mgrd's "
				"log)\n", progname, addr);
		if (rc < 0)
			return rc;
		r = (const Twinfs__MgrdBackupReply *)reply->body;
		if ((q.id && r->id != q.id) || r->offset != got ||
		    (q.id && r->total != total) ||
		    reply->data_len > r->total - got) {
			wire_msg_free(reply);
			fprintf(stderr, "%s: mgrd (%s): backup reply out of "
				"order\n", progname, addr);
			return -EPROTO;
		}
		q.id = r->id;
		total = r->total;
		*pause_out = r->pause_ms;
		if (reply->data_len &&
		    pwrite(fd, reply->data, reply->data_len, (off_t)got) !=
		    (ssize_t)reply->data_len) {
			rc = -errno;
			wire_msg_free(reply);
			return rc ? rc : -EIO;
		}
		got += reply->data_len;
		wire_msg_free(reply);
		reply = NULL;
		if (got == total)
			break;
		q.offset = got;
	}
	*total_out = total;
	return 0;
}

int cmd_backup_meta(struct ctl *ctl, int argc, char **argv)
{
	struct wire_sync *mgr = NULL;
	char addr[TW_HOST_MAX + 16], tmp[PATH_MAX];
	uint64_t total = 0;
	uint32_t pause_ms = 0;
	bool from_standby = false;
	int fd, rc;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s backup-meta FILE\n", progname);
		return EXIT_USAGE;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]) >= (int)sizeof(tmp))
		return EXIT_USAGE;
	if (ctl_load_conf(ctl) < 0)
		return EXIT_FAIL;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", progname, tmp, strerror(errno));
		return EXIT_FAIL;
	}
	/* A pair's standby in sync holds every acknowledged record: taken
	 * there, the active does not pause at all; else from the active. */
	if (ctl_connect_standby(ctl, &mgr, addr, sizeof(addr)) == 0) {
		rc = fetch(ctl, mgr, addr, fd, &total, &pause_ms);
		wire_sync_close(mgr);
		if (rc == 0)
			from_standby = true;
		else
			fprintf(stderr, "%s: the standby mgrd (%s) could not "
				"give the backup: %s; asking the active\n",
				progname, addr, errno_cause(rc));
	}
	if (!from_standby) {
		if (ftruncate(fd, 0) < 0 ||
		    ctl_connect_mgrd(ctl, &mgr) < 0) {
			close(fd);
			unlink(tmp);
			return EXIT_FAIL;
		}
		snprintf(addr, sizeof(addr), "%s", ctl_mgrd_addr(ctl));
		rc = fetch(ctl, mgr, addr, fd, &total, &pause_ms);
		wire_sync_close(mgr);
	}
	if (rc == 0) {
		rc = snap_check(fd, total);
		if (rc < 0)
			fprintf(stderr, "%s: %s: the snapshot mgrd sent fails "
				"its checks: %s\n", progname, tmp,
				strerror(-rc));
	}
	if (rc == 0 && (fsync(fd) < 0 || rename(tmp, argv[1]) < 0)) {
		rc = -errno;
		fprintf(stderr, "%s: %s: %s\n", progname, argv[1],
			strerror(errno));
	}
	close(fd);
	if (rc < 0) {
		unlink(tmp);
		return EXIT_FAIL;
	}
	if (from_standby)
		printf("backup-meta: %s: %" PRIu64 " bytes, from the standby "
		       "mgrd at %s (it paused %u ms; the active did not)\n",
		       argv[1], total, addr, pause_ms);
	else
		printf("backup-meta: %s: %" PRIu64 " bytes (mgrd paused %u "
		       "ms)\n", argv[1], total, pause_ms);
	return EXIT_OK;
}
