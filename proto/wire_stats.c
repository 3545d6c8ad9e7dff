/* wire_stats.c - the wire server's counters (struct wire_stats, wire.h)
 * in the Prometheus exposition format, the part every daemon exports
 * alike (docs/OPERATIONS.md "Metrics").  Counting happens in
 * wire_conn.c; this file only writes.
 *
 * Types never seen are left out: a counter that appears later starts
 * from 0, which rate() handles.
 */
#include "wire_int.h"

#include <string.h>

#define LABELS_MAX 8

/* base labels followed by type="NAME" into out; returns the count. */
static size_t with_type(struct tw_label *out, const struct tw_label *base,
			size_t n, const char *type)
{
	size_t k = TW_MIN(n, (size_t)LABELS_MAX - 1);

	if (k)
		memcpy(out, base, k * sizeof(*out));
	out[k].name = "type";
	out[k].value = type;
	return k + 1;
}

void wire_stats_write(struct tw_mx *x, const struct wire_stats *st,
		      const struct tw_label *base, size_t n)
{
	struct tw_label l[LABELS_MAX];
	size_t k;

	tw_mx_family(x, "twinfs_requests_total", TW_MX_COUNTER,
		     "Requests read, by message type.");
	for (unsigned t = 0; t < WIRE_STATS_TYPES; t++) {
		if (!st->requests[t])
			continue;
		k = with_type(l, base, n, wire_type_name((uint16_t)t));
		tw_mx_u64(x, "twinfs_requests_total", l, k, st->requests[t]);
	}
	tw_mx_family(x, "twinfs_request_duration_seconds", TW_MX_HISTOGRAM,
		     "From reading a request to queueing its reply, by "
		     "message type, seconds.");
	for (unsigned t = 0; t < WIRE_STATS_TYPES; t++) {
		if (!st->latency[t].count)
			continue;
		k = with_type(l, base, n, wire_type_name((uint16_t)t));
		tw_mx_hist(x, "twinfs_request_duration_seconds", l, k,
			   &st->latency[t]);
	}
	tw_mx_family(x, "twinfs_received_bytes_total", TW_MX_COUNTER,
		     "Bytes read from the daemon's wire connections.");
	tw_mx_u64(x, "twinfs_received_bytes_total", base, n, st->rx_bytes);
	tw_mx_family(x, "twinfs_sent_bytes_total", TW_MX_COUNTER,
		     "Bytes written to the daemon's wire connections.");
	tw_mx_u64(x, "twinfs_sent_bytes_total", base, n, st->tx_bytes);
	tw_mx_family(x, "twinfs_connections", TW_MX_GAUGE,
		     "Wire connections open now.");
	tw_mx_u64(x, "twinfs_connections", base, n, st->conns_open);
	tw_mx_family(x, "twinfs_connections_accepted_total", TW_MX_COUNTER,
		     "Wire connections accepted.");
	tw_mx_u64(x, "twinfs_connections_accepted_total", base, n,
		  st->conns_accepted);
	tw_mx_family(x, "twinfs_connections_refused_total", TW_MX_COUNTER,
		     "Wire connections refused for max_connections.");
	tw_mx_u64(x, "twinfs_connections_refused_total", base, n,
		  st->conns_refused);
}
