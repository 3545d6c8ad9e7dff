/* mem.c - the iod's memory bound: backpressure on the data it holds for
 * writes in flight.
 *
 * In journal mode every written block is copied into the journal's memory
 * at the request and stays there until its transaction is checkpointed
 * (journal/journal.h, jbd_stats copy_bytes).  The blocks in the log are
 * bounded by the log's size, but a full log only delays the commit
 * callbacks: requests keep arriving and their copies pile up in
 * transactions waiting for log space (unlogged_bytes), and the data of
 * forwards waits for the twin (fwd_bytes).  Nothing but the clients'
 * own caps bounded those two.  Here both are bounded by a quarter of the
 * journal each: past it, the connection that brought the request is held
 * (wire_conn_hold: its further requests wait in the socket, not in the
 * iod) and every held connection is read again once both are below half
 * of it.  No request is refused or failed for memory; the clients wait as
 * they wait for a full journal.  docs/OPERATIONS.md "Memory" gives the
 * ceiling this makes of the whole process.
 *
 * Checkpointed copies stay mapped as the journal's spare blocks
 * (journal/jbd_blocks.c), and what else a burst freed stays in the heap:
 * glibc returns only its top past M_TRIM_THRESHOLD (tw_malloc_tune).
 * iod_mem_tick checkpoints an idle journal (after 2 x commit_interval
 * without a commit, else its copies wait for the next writes).  Once no
 * copy is left and the journal has not committed for a commit_interval,
 * it marks the spare slabs free (MADV_FREE: the kernel's to take, and
 * reused without a fault if it has not).  After IOD_MEM_REST_INTERVALS
 * commit_intervals without a commit it unmaps them and trims the heap
 * (malloc_trim), when the copies held have fallen well below their peak,
 * so an idle iod's resident memory comes down after a burst instead of
 * staying at the peak.  Neither happens during a stream, whose next
 * writes would fault every page in again, nor between bursts that come
 * within a minute of each other (at the default commit_interval): the
 * first journal's worth of writes after a rest cost a tenth more CPU
 * when each fresh page had to be cleared by a fault.
 *
 * Not here: the reply queues (max_queued_reply_bytes per connection) and
 * the frame each connection's reader holds.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdlib.h>

#include "iod_int.h"
#include "journal.h"

bool iod_mem_over(uint64_t unlogged, uint64_t fwd, uint64_t limit)
{
	return unlogged > limit || fwd > limit;
}

bool iod_mem_may_release(uint64_t unlogged, uint64_t fwd, uint64_t limit)
{
	return unlogged <= limit / 2 && fwd <= limit / 2;
}

uint64_t iod_mem_limit(uint64_t journal_bytes)
{
	return journal_bytes / 4;
}

static void mem_state(struct iod *d, uint64_t *unlogged, uint64_t *limit)
{
	struct jbd_stats js;

	iod_store_journal_stats(d->store, &js);
	*unlogged = js.unlogged_bytes;
	*limit = iod_mem_limit(js.nblocks * JBD_BLOCK_SIZE);
}

void iod_mem_after_request(struct iod *d, struct wire_conn *c)
{
	uint64_t unlogged, limit;

	if (d->store == NULL || wire_conn_held(c) || !wire_conn_is_open(c))
		return;
	mem_state(d, &unlogged, &limit);
	if (!iod_mem_over(unlogged, d->fwd_bytes, limit))
		return;
	if (d->n_held == d->cap_held) {
		size_t cap = d->cap_held ? d->cap_held * 2 : 16;
		struct wire_conn **n = realloc(d->held, cap * sizeof(*n));

		if (n == NULL)
			return;    /* unheld: the bound is exceeded, not broken */
		d->held = n;
		d->cap_held = cap;
	}
	wire_conn_ref(c);
	wire_conn_hold(c);
	d->held[d->n_held++] = c;
	d->n_holds++;
	if (d->n_held == 1)
		tw_log_rl(TW_LOG_INFO, "iod %" PRIu32 ": %" PRIu64 " MiB of "
			  "writes wait for journal space, %" PRIu64 " MiB for "
			  "the twin (limit %" PRIu64 " MiB each): reading no "
			  "more requests from their senders until half of it "
			  "is gone", d->id, unlogged >> 20, d->fwd_bytes >> 20,
			  limit >> 20);
}

void iod_mem_release_all(struct iod *d)
{
	/* A release delivers the frames that waited in the connection's
	 * reader at once, and those requests may hold connections anew:
	 * into a new list, never into the one being walked. */
	struct wire_conn **list = d->held;
	size_t n = d->n_held;

	d->held = NULL;
	d->n_held = 0;
	d->cap_held = 0;
	for (size_t i = 0; i < n; i++) {
		wire_conn_release(list[i]);
		wire_conn_unref(list[i]);
	}
	free(list);
}

void iod_mem_poll(struct iod *d)
{
	uint64_t unlogged, limit;

	if (d->n_held == 0)
		return;
	mem_state(d, &unlogged, &limit);
	/* An aborted journal keeps its unwritten transactions, and fails
	 * every request anyway: let the senders hear it. */
	if (iod_mem_may_release(unlogged, d->fwd_bytes, limit) ||
	    iod_store_aborted(d->store))
		iod_mem_release_all(d);
}

void iod_mem_fini(struct iod *d)
{
	iod_mem_release_all(d);
}

/* Copies freed since the peak before a trim is worth its walk of the
 * heap (it costs about a millisecond per 100 MiB of free chunks). */
#define MEM_TRIM_MIN (32ull << 20)

bool iod_mem_trim_due(uint64_t peak, uint64_t now, bool quiet)
{
	return quiet && peak > now && peak - now >= MEM_TRIM_MIN &&
	       now <= peak / 4;
}

void iod_mem_tick(struct iod *d)
{
	struct jbd_stats js;

	if (d->store == NULL)
		return;
	iod_store_journal_stats(d->store, &js);
	/* An idle journal keeps up to its size in copies until the next
	 * writes fill it to half: put them home instead. */
	uint64_t ms = tw_now_ms();
	uint64_t interval = tw_ms_or(d->conf->commit_interval_ms,
				     TW_COMMIT_INTERVAL_MS);
	if (js.commits != d->mem_commits) {
		d->mem_commits = js.commits;
		d->mem_commit_ms = ms;
		d->mem_commit_seen_ms = ms;
	} else if (js.copy_bytes > 0 && ms - d->mem_commit_ms >=
		   2ull * interval) {
		iod_store_journal_home(d->store);
		d->mem_commit_ms = ms;    /* once per idle period */
	}
	uint64_t now = js.copy_bytes + d->fwd_bytes;
	if (now > d->mem_peak)
		d->mem_peak = now;
	/* A trim while writes still commit hands back pages the next
	 * transactions fault in again at once: during a 1 GiB write those
	 * faults were a sixth of an iod's CPU (test/bench/RESULTS.md,
	 * "Session 38"). */
	bool quiet = ms - d->mem_commit_seen_ms >= interval;
	bool rested = ms - d->mem_commit_seen_ms >=
		      IOD_MEM_REST_INTERVALS * interval;
	bool spare = js.copy_bytes == 0 && js.cache_bytes > 0;
	if (iod_mem_trim_due(d->mem_peak, now, rested)) {
		iod_store_journal_drop_cache(d->store);
		malloc_trim(0);
		d->mem_peak = now;
		d->n_trims++;
	} else if (rested && spare) {
		/* Every copy home: the journal's slabs go back as well
		 * (unmapped, no walk of the heap), also after a trim that
		 * came before. */
		iod_store_journal_drop_cache(d->store);
	} else if (quiet && spare) {
		iod_store_journal_free_cache(d->store);
	}
}
