/* tune.c - the kernel's readahead window for this mount.
 *
 * FUSE takes a mount's readahead from its backing device info (bdi), and
 * at INIT clamps it to min(the bdi default, 128 KiB on Linux, and the
 * max_readahead we ask for): a single reader then has at most 128 KiB in
 * flight, one fourth of a stripe unit, and waits on every round trip to
 * an iod.  The seed thesis found about four stripe units per server enough
 * to hide that latency: the default window, FC_READAHEAD_KB = 4 MiB, is
 * four 512 KiB units per twin group of a two-group cluster.  After INIT
 * the bdi's read_ahead_kb (sysfs) may be raised; that is what
 * `-o readahead=KIB` does (default FC_READAHEAD_KB; 0 leaves the
 * kernel's).  It needs root; without it the mount works with the default
 * and says so once.
 *
 * When: INIT is answered before any other request reaches us (the kernel
 * holds them until its INIT reply is processed, which is where the clamp
 * happens), so the first LOOKUP, GETATTR or OPEN does it (fc_tune_once),
 * on a worker thread: a sysfs write, no network.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount.h"
#include "tune.h"

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) |
				      (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* "MAJ:MIN" of the newest fuse.twinfs mount on mountpoint. */
static int mount_devno(const char *mountpoint, char *dev, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *field[5], *sep;
		int i;

		sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "fuse.twinfs ", 12) != 0)
			continue;
		field[0] = strtok_r(line, " ", &save);
		for (i = 1; i < 5 && field[i - 1]; i++)
			field[i] = strtok_r(NULL, " ", &save);
		if (i < 5 || !field[4])
			continue;
		unescape(field[4]);
		if (strcmp(field[4], mountpoint) != 0)
			continue;
		snprintf(dev, len, "%s", field[2]);
		rc = 0;   /* keep going: the last one is the newest */
	}
	fclose(f);
	return rc;
}

int fc_tune_readahead(const char *mountpoint, unsigned kb)
{
	char dev[64], path[128];
	FILE *f;
	int rc;

	rc = mount_devno(mountpoint, dev, sizeof(dev));
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	rc = fprintf(f, "%u\n", kb) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

void fc_tune_once(struct fc_client *cl)
{
	int expected = 0, rc;

	if (atomic_load(&cl->tuned) ||
	    !atomic_compare_exchange_strong(&cl->tuned, &expected, 1))
		return;
	if (cl->opts.readahead_kb == 0 || !cl->opts.mountpoint)
		return;
	rc = fc_tune_readahead(cl->opts.mountpoint, cl->opts.readahead_kb);
	if (rc < 0)
		tw_log(TW_LOG_WARN, "readahead of %s stays at the kernel's "
		       "default (128 KiB): setting %u KiB failed: %s",
		       cl->opts.mountpoint, cl->opts.readahead_kb,
		       strerror(-rc));
	else
		tw_debug("readahead of %s: %u KiB", cl->opts.mountpoint,
			 cl->opts.readahead_kb);
}
