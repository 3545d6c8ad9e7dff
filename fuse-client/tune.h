/* tune.h - the kernel's readahead window for this mount (tune.c). */
#ifndef TWINFS_FC_TUNE_H
#define TWINFS_FC_TUNE_H

#include "mount.h"

#define FC_READAHEAD_KB        4096         /* -o readahead= default */

/* Set read_ahead_kb of the bdi of the twinfs mount on mountpoint (root
 * only).  0 or -errno. */
int fc_tune_readahead(const char *mountpoint, unsigned kb);
/* Any thread, any request after INIT: do it once, with the mount's
 * option; a failure is logged once and otherwise ignored. */
void fc_tune_once(struct fc_client *cl);

#endif
