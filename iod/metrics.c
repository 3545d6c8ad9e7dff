/* metrics.c - what twinfs-iod exports on GET /metrics ([iod N] metrics;
 * every name is listed in docs/OPERATIONS.md "Metrics").
 *
 * Counters that move on the hot path live where they are counted: the
 * wire server's (struct wire_stats, wire_conn.c) and the journal's close
 * and checkpoint timings (jbd_set_latency_hists), both on the loop
 * thread.  Everything else is read when a scrape comes: journal fill, the
 * map's states, the resync copy, the fd cache, lost subfiles.  Nothing
 * here changes the daemon's state.
 */
#include "iod_int.h"
#include "journal.h"
#include "metrics.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct iod_metrics {
	struct iod *d;
	struct tw_http *http;
	struct wire_stats ws;
	struct tw_hist commit, checkpoint;
	double start_s;
	char id[16];
};

static const char *const jnl_modes[] = {
	[TW_JNL_JOURNAL] = "journal",
	[TW_JNL_ORDERED] = "ordered",
	[TW_JNL_WRITEBACK] = "writeback",
};

/* One sample per state of name{iod, state=...}: 1 for `state`, else 0. */
static void one_hot(struct tw_mx *x, const char *name, const char *id,
		    int state)
{
	static const enum r1_state all[] = { R1_UP, R1_SUSPECT, R1_DOWN,
					     R1_RESYNCING };

	for (size_t i = 0; i < TW_ARRAY_SIZE(all); i++) {
		struct tw_label l[] = {
			{ "iod", id }, { "state", r1_state_name(all[i]) },
		};

		tw_mx_u64(x, name, l, 2, (int)all[i] == state);
	}
}

static int render(struct tw_mx *x, void *arg)
{
	struct iod_metrics *m = arg;
	struct iod *d = m->d;
	const struct iod_map_iod *me = &d->map.iods[d->id];
	const struct iod_map_iod *tw = &d->map.iods[d->twin_id];
	struct tw_label base[] = { { "daemon", "iod" }, { "iod", m->id } };
	struct tw_label id[] = { { "iod", m->id } };
	struct jbd_stats js;
	uint64_t done = 0, total = 0;
	uint32_t target = 0;
	char tid[16];

	tw_mx_process(x, "iod", m->start_s);
	wire_stats_write(x, &m->ws, base, TW_ARRAY_SIZE(base));

	tw_mx_family(x, "twinfs_iod_written_bytes_total", TW_MX_COUNTER,
		     "Data bytes of WRITE requests (from clients, and from "
		     "the twin: forwards and resync copies).");
	tw_mx_u64(x, "twinfs_iod_written_bytes_total", id, 1,
		  m->ws.req_data_bytes[TWINFS__MSG_TYPE__MSG_WRITE]);
	tw_mx_family(x, "twinfs_iod_read_bytes_total", TW_MX_COUNTER,
		     "Data bytes of READ replies.");
	tw_mx_u64(x, "twinfs_iod_read_bytes_total", id, 1,
		  m->ws.reply_data_bytes[TWINFS__MSG_TYPE__MSG_READ]);
	tw_mx_family(x, "twinfs_iod_checksum_requests_total", TW_MX_COUNTER,
		     "CHECKSUM requests (verify, resync).");
	tw_mx_u64(x, "twinfs_iod_checksum_requests_total", id, 1,
		  m->ws.requests[TWINFS__MSG_TYPE__MSG_CHECKSUM]);
	tw_mx_family(x, "twinfs_iod_forwarded_total", TW_MX_COUNTER,
		     "Requests forwarded to the twin.");
	tw_mx_u64(x, "twinfs_iod_forwarded_total", id, 1, d->n_forwarded);

	iod_store_journal_stats(d->store, &js);
	tw_mx_family(x, "twinfs_iod_journal_size_bytes", TW_MX_GAUGE,
		     "Size of the block journal (DIR/journal).");
	tw_mx_u64(x, "twinfs_iod_journal_size_bytes", id, 1,
		  js.nblocks * JBD_BLOCK_SIZE);
	tw_mx_family(x, "twinfs_iod_journal_used_bytes", TW_MX_GAUGE,
		     "Journal bytes between its tail and head (not yet "
		     "checkpointed).");
	tw_mx_u64(x, "twinfs_iod_journal_used_bytes", id, 1,
		  js.used_blocks * JBD_BLOCK_SIZE);
	tw_mx_family(x, "twinfs_iod_journal_memory_bytes", TW_MX_GAUGE,
		     "Copies of journaled blocks held in memory until "
		     "checkpointed (data=journal; docs/OPERATIONS.md "
		     "\"Memory\").");
	tw_mx_u64(x, "twinfs_iod_journal_memory_bytes", id, 1, js.copy_bytes);
	tw_mx_family(x, "twinfs_iod_journal_cache_bytes", TW_MX_GAUGE,
		     "Memory of the journal's block cache: the copies and the "
		     "spare blocks kept for the next writes (data=journal).");
	tw_mx_u64(x, "twinfs_iod_journal_cache_bytes", id, 1, js.cache_bytes);
	tw_mx_family(x, "twinfs_iod_journal_cache_free_bytes", TW_MX_GAUGE,
		     "Of those, spare slabs marked free while idle (MADV_FREE): "
		     "the kernel takes their pages when it needs memory.");
	tw_mx_u64(x, "twinfs_iod_journal_cache_free_bytes", id, 1,
		  js.cache_free_bytes);
	tw_mx_family(x, "twinfs_iod_journal_unlogged_bytes", TW_MX_GAUGE,
		     "Of those, copies waiting for log space (at most a "
		     "quarter of the journal, then senders are held).");
	tw_mx_u64(x, "twinfs_iod_journal_unlogged_bytes", id, 1,
		  js.unlogged_bytes);
	tw_mx_family(x, "twinfs_iod_forward_bytes", TW_MX_GAUGE,
		     "Data bytes forwarded to the twin and not yet answered.");
	tw_mx_u64(x, "twinfs_iod_forward_bytes", id, 1, d->fwd_bytes);
	tw_mx_family(x, "twinfs_iod_held_connections", TW_MX_GAUGE,
		     "Connections not read while too much write data waits.");
	tw_mx_u64(x, "twinfs_iod_held_connections", id, 1, d->n_held);
	tw_mx_family(x, "twinfs_iod_holds_total", TW_MX_COUNTER,
		     "Connections held for memory, ever.");
	tw_mx_u64(x, "twinfs_iod_holds_total", id, 1, d->n_holds);
	tw_mx_family(x, "twinfs_iod_journal_commits_total", TW_MX_COUNTER,
		     "Journal transactions closed.");
	tw_mx_u64(x, "twinfs_iod_journal_commits_total", id, 1, js.commits);
	tw_mx_family(x, "twinfs_iod_journal_checkpoints_total", TW_MX_COUNTER,
		     "Journal checkpoints completed.");
	tw_mx_u64(x, "twinfs_iod_journal_checkpoints_total", id, 1,
		  js.checkpoints);
	tw_mx_family(x, "twinfs_iod_journal_commit_duration_seconds",
		     TW_MX_HISTOGRAM, "Closing a journal transaction (its "
		     "log writes), seconds.");
	tw_mx_hist(x, "twinfs_iod_journal_commit_duration_seconds", id, 1,
		   &m->commit);
	tw_mx_family(x, "twinfs_iod_journal_checkpoint_duration_seconds",
		     TW_MX_HISTOGRAM, "A journal checkpoint, from start to the "
		     "tail moved, seconds.");
	tw_mx_hist(x, "twinfs_iod_journal_checkpoint_duration_seconds", id, 1,
		   &m->checkpoint);
	tw_mx_family(x, "twinfs_iod_journal_aborted", TW_MX_GAUGE,
		     "1 once the journal has aborted (every mutation fails).");
	tw_mx_u64(x, "twinfs_iod_journal_aborted", id, 1, js.aborted != 0);
	tw_mx_family(x, "twinfs_iod_journal_mode", TW_MX_GAUGE,
		     "1 for the journal_mode this iod runs.");
	for (size_t i = 0; i < TW_ARRAY_SIZE(jnl_modes); i++) {
		struct tw_label l[] = { { "iod", m->id }, { "mode", jnl_modes[i] } };

		tw_mx_u64(x, "twinfs_iod_journal_mode", l, 2,
			  (size_t)d->conf->journal_mode == i);
	}

	tw_mx_family(x, "twinfs_iod_registered", TW_MX_GAUGE,
		     "1 while registered with mgrd (data requests served).");
	tw_mx_u64(x, "twinfs_iod_registered", id, 1, d->registered);
	tw_mx_family(x, "twinfs_iod_state", TW_MX_GAUGE,
		     "This iod's state in the cluster map it holds "
		     "(1 for the current state).");
	one_hot(x, "twinfs_iod_state", m->id, me->present ? me->state : -1);
	tw_mx_family(x, "twinfs_iod_twin_state", TW_MX_GAUGE,
		     "The twin's state in the cluster map this iod holds "
		     "(1 for the current state).");
	one_hot(x, "twinfs_iod_twin_state", m->id, tw->present ? tw->state : -1);
	tw_mx_family(x, "twinfs_iod_twin_connected", TW_MX_GAUGE,
		     "1 while this iod's connection to its twin is up.");
	tw_mx_u64(x, "twinfs_iod_twin_connected", id, 1,
		  d->twin_peer && wire_peer_connected(d->twin_peer));

	snprintf(tid, sizeof(tid), "0");
	if (iod_resync_progress(d, &target, &done, &total))
		snprintf(tid, sizeof(tid), "%u", target);
	struct tw_label rl[] = { { "iod", m->id }, { "target", tid } };
	tw_mx_family(x, "twinfs_iod_resync_active", TW_MX_GAUGE,
		     "1 while this iod copies to its twin (resync source).");
	tw_mx_u64(x, "twinfs_iod_resync_active", id, 1, target != 0);
	tw_mx_family(x, "twinfs_iod_resync_copied_bytes", TW_MX_GAUGE,
		     "Bytes of the running resync copied so far.");
	tw_mx_u64(x, "twinfs_iod_resync_copied_bytes", rl, 2, done);
	tw_mx_family(x, "twinfs_iod_resync_total_bytes", TW_MX_GAUGE,
		     "Bytes the running resync copies in all.");
	tw_mx_u64(x, "twinfs_iod_resync_total_bytes", rl, 2, total);

	tw_mx_family(x, "twinfs_iod_fd_cache_entries", TW_MX_GAUGE,
		     "Subfile descriptors held open in the fd cache.");
	tw_mx_u64(x, "twinfs_iod_fd_cache_entries", id, 1,
		  iod_store_fds_cached(d->store));
	tw_mx_family(x, "twinfs_iod_lost_subfiles", TW_MX_GAUGE,
		     "Subfiles held as lost (not served until a resync "
		     "replaces them).");
	tw_mx_u64(x, "twinfs_iod_lost_subfiles", id, 1,
		  iod_store_n_lost(d->store));

	/* docs/ARCHITECTURE.md "Integrity" */
	const struct iod_csum_stats *cs = iod_store_csum_stats(d->store);
	static const struct {
		const char *name, *help;
		size_t off;
	} cf[] = {
		{ "twinfs_iod_csum_blocks_checked_total",
		  "Home blocks checked against their checksums on reads.",
		  offsetof(struct iod_csum_stats, checked) },
		{ "twinfs_iod_csum_mismatches_total",
		  "Home blocks that failed their checksum on a read.",
		  offsetof(struct iod_csum_stats, mismatches) },
		{ "twinfs_iod_csum_healed_total",
		  "Bad blocks rewritten from the twin's verified copy.",
		  offsetof(struct iod_csum_stats, healed) },
		{ "twinfs_iod_csum_unhealed_total",
		  "Bad blocks no twin could heal (bad on both, or no "
		  "readable twin), counted at each read or scrub that met "
		  "one: reads of them get EIO.",
		  offsetof(struct iod_csum_stats, unhealed) },
		{ "twinfs_iod_csum_wire_mismatches_total",
		  "WRITE data refused: it did not match Write.data_crc.",
		  offsetof(struct iod_csum_stats, wire_mismatches) },
	};
	for (size_t i = 0; i < TW_ARRAY_SIZE(cf); i++) {
		tw_mx_family(x, cf[i].name, TW_MX_COUNTER, cf[i].help);
		tw_mx_u64(x, cf[i].name, id, 1,
			  *(const uint64_t *)((const char *)cs + cf[i].off));
	}

	/* The scrub's progress (twinfsctl scrub --status shows the same). */
	struct iod_scrub_stats ss;

	iod_scrub_stats(d, &ss);
	tw_mx_family(x, "twinfs_iod_scrub_running", TW_MX_GAUGE,
		     "1 while a scrub reads this iod's data.");
	tw_mx_u64(x, "twinfs_iod_scrub_running", id, 1, ss.running);
	tw_mx_family(x, "twinfs_iod_scrub_subfiles", TW_MX_GAUGE,
		     "Subfiles the running (or last) scrub has read.");
	tw_mx_u64(x, "twinfs_iod_scrub_subfiles", id, 1, ss.subfiles);
	tw_mx_family(x, "twinfs_iod_scrub_bytes", TW_MX_GAUGE,
		     "Bytes the running (or last) scrub has read.");
	tw_mx_u64(x, "twinfs_iod_scrub_bytes", id, 1, ss.bytes);
	tw_mx_family(x, "twinfs_iod_scrub_bad_reads", TW_MX_GAUGE,
		     "Reads of the running (or last) scrub that found a bad "
		     "block.");
	tw_mx_u64(x, "twinfs_iod_scrub_bad_reads", id, 1, ss.bad);
	tw_mx_family(x, "twinfs_iod_scrub_runs_total", TW_MX_COUNTER,
		     "Scrubs finished since this iod started.");
	tw_mx_u64(x, "twinfs_iod_scrub_runs_total", id, 1, ss.runs);
	return x->err;
}

int iod_metrics_start(struct iod *d)
{
	struct iod_metrics *m;
	int64_t sec;
	uint32_t nsec;
	int rc;

	if (!d->me->metrics_port)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->d = d;
	snprintf(m->id, sizeof(m->id), "%u", d->id);
	tw_realtime(&sec, &nsec);
	m->start_s = (double)sec + nsec / 1e9;
	rc = tw_http_listen(d->loop, d->me->metrics_host, d->me->metrics_port,
			    render, m, &m->http);
	if (rc < 0) {
		tw_err("iod %u: cannot serve metrics on %s:%d: %s", d->id,
		       d->me->metrics_host, d->me->metrics_port,
		       strerror(-rc));
		free(m);
		return rc;
	}
	wire_server_set_stats(d->server, &m->ws);
	iod_store_journal_hists(d->store, &m->commit, &m->checkpoint);
	d->metrics = m;
	tw_info("iod %u: metrics on http://%s:%d/metrics", d->id,
		d->me->metrics_host, d->me->metrics_port);
	return 0;
}

static void free_metrics(void *arg)
{
	free(arg);
}

void iod_metrics_stop(struct iod *d)
{
	struct iod_metrics *m = d->metrics;

	if (!m)
		return;
	d->metrics = NULL;
	if (d->server)
		wire_server_set_stats(d->server, NULL);
	iod_store_journal_hists(d->store, NULL, NULL);
	tw_http_close(m->http, free_metrics, m);
}
