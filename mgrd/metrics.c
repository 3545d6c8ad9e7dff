/* metrics.c - what twinfs-mgrd exports on GET /metrics ([mgrd] metrics;
 * every name is listed in docs/OPERATIONS.md "Metrics").
 *
 * The wire server counts requests and bytes (struct wire_stats,
 * wire_conn.c); everything else is read from the state when a scrape
 * comes: sessions, locks, inodes, the map's iod states and epoch, the
 * record log, and the resync job records (mgrd/resync.c, journaled as
 * mgr_rjob_rec).  Nothing here changes the state.
 */
#include "mgrd_int.h"
#include "metrics.h"
#include "server_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mgr_metrics {
	struct mgr_server *s;
	struct tw_http *http;
	struct wire_stats ws;
	double start_s;
};

static const char *const iod_states[] = {
	[MGR_IOD_UP] = "up",
	[MGR_IOD_SUSPECT] = "suspect",
	[MGR_IOD_DOWN] = "down",
	[MGR_IOD_RESYNCING] = "resyncing",
};

static const char *const rjob_states[] = {
	[MGR_RJ_NONE] = "none",
	[MGR_RJ_RUNNING] = "running",
	[MGR_RJ_DONE] = "done",
	[MGR_RJ_FAILED] = "failed",
	[MGR_RJ_INTERRUPTED] = "interrupted",
};

static void gauge(struct tw_mx *x, const char *name, const char *help,
		  uint64_t v)
{
	tw_mx_family(x, name, TW_MX_GAUGE, help);
	tw_mx_u64(x, name, NULL, 0, v);
}

static void iod_families(struct tw_mx *x, const struct mgr_state *st)
{
	const struct mgr_map *map = &st->map;
	char id[16];

	tw_mx_family(x, "twinfs_mgrd_iod_state", TW_MX_GAUGE,
		     "Each iod's state in the cluster map (1 for the "
		     "current state).");
	for (uint32_t i = 0; i < map->n_iods; i++) {
		snprintf(id, sizeof(id), "%u", map->iods[i].id);
		for (size_t k = 0; k < TW_ARRAY_SIZE(iod_states); k++) {
			struct tw_label l[] = { { "iod", id },
						{ "state", iod_states[k] } };

			tw_mx_u64(x, "twinfs_mgrd_iod_state", l, 2,
				  (size_t)map->iods[i].state == k);
		}
	}
	tw_mx_family(x, "twinfs_mgrd_iod_needs_resync", TW_MX_GAUGE,
		     "1 while the map says an iod needs a resync.");
	for (uint32_t i = 0; i < map->n_iods; i++) {
		struct tw_label l[] = { { "iod", id } };

		snprintf(id, sizeof(id), "%u", map->iods[i].id);
		tw_mx_u64(x, "twinfs_mgrd_iod_needs_resync", l, 1,
			  map->iods[i].needs_resync);
	}

	tw_mx_family(x, "twinfs_mgrd_resync_job_state", TW_MX_GAUGE,
		     "The resync job record of each target iod (1 for its "
		     "state).");
	for (uint32_t i = 0; i < map->n_iods; i++) {
		snprintf(id, sizeof(id), "%u", map->iods[i].id);
		for (size_t k = 0; k < TW_ARRAY_SIZE(rjob_states); k++) {
			struct tw_label l[] = { { "iod", id },
						{ "state", rjob_states[k] } };

			tw_mx_u64(x, "twinfs_mgrd_resync_job_state", l, 2,
				  st->rjobs[i].state == k);
		}
	}
	static const struct {
		const char *name, *help;
		size_t off;
	} nums[] = {
		{ "twinfs_mgrd_resync_job_done_bytes",
		  "Bytes the target's resync job has brought up to date.",
		  offsetof(struct mgr_rjob_rec, bytes_done) },
		{ "twinfs_mgrd_resync_job_total_bytes",
		  "Bytes the target's resync job covers.",
		  offsetof(struct mgr_rjob_rec, bytes_total) },
		{ "twinfs_mgrd_resync_job_copied_bytes",
		  "Bytes the target's resync job actually copied.",
		  offsetof(struct mgr_rjob_rec, bytes_copied) },
		{ "twinfs_mgrd_resync_job_unrepairable_blocks",
		  "Blocks the target's resync job found bad on the only "
		  "readable copy and copied marked bad.",
		  offsetof(struct mgr_rjob_rec, unrepairable) },
	};
	for (size_t n = 0; n < TW_ARRAY_SIZE(nums); n++) {
		tw_mx_family(x, nums[n].name, TW_MX_GAUGE, nums[n].help);
		for (uint32_t i = 0; i < map->n_iods; i++) {
			struct tw_label l[] = { { "iod", id } };
			uint64_t v;

			snprintf(id, sizeof(id), "%u", map->iods[i].id);
			memcpy(&v, (const char *)&st->rjobs[i] + nums[n].off,
			       sizeof(v));
			tw_mx_u64(x, nums[n].name, l, 1, v);
		}
	}
}

static int render(struct tw_mx *x, void *arg)
{
	struct mgr_metrics *m = arg;
	struct mgr_server *s = m->s;
	struct tw_label base[] = { { "daemon", "mgrd" } };

	tw_mx_process(x, "mgrd", m->start_s);
	wire_stats_write(x, &m->ws, base, TW_ARRAY_SIZE(base));
	gauge(x, "twinfs_mgrd_sessions", "Live client sessions.",
	      s->st.sessions.by_id.count);
	gauge(x, "twinfs_mgrd_locks", "Byte-range and flock locks held.",
	      mgr_locks_count(s));
	gauge(x, "twinfs_mgrd_inodes", "Inodes in the namespace.",
	      s->st.ns.inodes.count);
	gauge(x, "twinfs_mgrd_pending_deletes",
	      "Deleted files whose subfiles wait to be removed.",
	      s->st.ns.pdel.count);
	gauge(x, "twinfs_mgrd_map_epoch", "The cluster map's epoch.",
	      s->st.map.epoch);
	gauge(x, "twinfs_mgrd_record_log_bytes",
	      "Bytes in the record log since the last snapshot.",
	      s->jnl_open ? mgr_journal_log_bytes(&s->jnl) : 0);
	tw_mx_family(x, "twinfs_mgrd_records_total", TW_MX_COUNTER,
		     "Records replayed at start and appended since.");
	tw_mx_u64(x, "twinfs_mgrd_records_total", NULL, 0, s->jnl.records);
	tw_mx_family(x, "twinfs_mgrd_snapshots_total", TW_MX_COUNTER,
		     "State snapshots written since start.");
	tw_mx_u64(x, "twinfs_mgrd_snapshots_total", NULL, 0, s->jnl.snapshots);
	tw_mx_family(x, "twinfs_mgrd_inode_range_waits_total", TW_MX_COUNTER,
		     "Creates that waited for the sync of a new inode range.");
	tw_mx_u64(x, "twinfs_mgrd_inode_range_waits_total", NULL, 0,
		  s->ino_waits);
	tw_mx_family(x, "twinfs_mgrd_snapshot_timeouts_total", TW_MX_COUNTER,
		     "Snapshot children killed after snapshot_timeout.");
	tw_mx_u64(x, "twinfs_mgrd_snapshot_timeouts_total", NULL, 0,
		  mgr_snap_timeouts());
	iod_families(x, &s->st);
	if (s->repl) {
		Twinfs__MgrdStatus ps = TWINFS__MGRD_STATUS__INIT;
		bool active;

		mgr_repl_status(s, &ps);
		active = strcmp(ps.role, "active") == 0;
		gauge(x, "twinfs_mgrd_pair_active",
		      "1 when this mgrd of a pair is the active.", active);
		gauge(x, "twinfs_mgrd_pair_in_sync",
		      "1 when the standby has every record the active closed.",
		      active ? strcmp(ps.peer_role, "standby") == 0
			     : strcmp(ps.role, "standby") == 0);
		gauge(x, "twinfs_mgrd_pair_lag_records",
		      "Active: records closed that the standby has not acked.",
		      ps.lag_records);
	}
	return x->err;
}

int mgr_metrics_start(uv_loop_t *loop, struct mgr_server *s,
		      struct mgr_metrics **out)
{
	const struct tw_conf *conf = s->conf;
	struct mgr_metrics *m;
	int64_t sec;
	uint32_t nsec;
	int rc;

	*out = NULL;
	if (!conf->mgr_metrics_port)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->s = s;
	tw_realtime(&sec, &nsec);
	m->start_s = (double)sec + nsec / 1e9;
	rc = tw_http_listen(loop, conf->mgr_metrics_host, conf->mgr_metrics_port,
			    render, m, &m->http);
	if (rc < 0) {
		tw_err("mgrd: cannot serve metrics on %s:%d: %s",
		       conf->mgr_metrics_host, conf->mgr_metrics_port,
		       strerror(-rc));
		free(m);
		return rc;
	}
	wire_server_set_stats(s->ws, &m->ws);
	tw_info("mgrd: metrics on http://%s:%d/metrics",
		conf->mgr_metrics_host, conf->mgr_metrics_port);
	*out = m;
	return 0;
}

static void free_metrics(void *arg)
{
	free(arg);
}

void mgr_metrics_stop(struct mgr_metrics *m)
{
	if (!m)
		return;
	if (m->s->ws)
		wire_server_set_stats(m->s->ws, NULL);
	tw_http_close(m->http, free_metrics, m);
}
