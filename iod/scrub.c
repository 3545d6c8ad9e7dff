/* scrub.c - the background scrub (docs/ARCHITECTURE.md "Integrity"):
 * every subfile read at home from start to end, at a bounded rate, so
 * that blocks no one reads are checked too.  A bad block is healed from
 * the twin as a read's would be (heal.c iod_heal_range).
 *
 * Started by SCRUB (twinfsctl scrub, proto/FORMAT.md "Integrity"); runs
 * on the loop, 1/10 of its rate per 100 ms tick, one subfile at a time in
 * the order of the listing (store_scan), only while this iod is readable.
 * Resumable: the cursor (ino, column, offset) and the rate are written to
 * DIR/twinfs-scrub at most once a second (rename of a temporary; not
 * synced: after a power loss it resumes from an older cursor, or from the
 * start) and read at start, which resumes a scrub left running; the file
 * goes when the scrub ends.
 * Scheduled: DIR/twinfs-scrub-last holds when the last scrub finished
 * (CLOCK_REALTIME seconds, one decimal line; written at the first start
 * too, so a new iod does not scrub at once) and, after a finished scrub,
 * its result on the same line: blocks it found bad, blocks healed and
 * blocks found bad on both twins during it (four decimals; a line of one
 * says no result, as an older iod wrote it); once a minute (or each
 * scrub_interval, when shorter) a scrub starts at scrub_rate when that
 * is scrub_interval ago ([iod] scrub_interval, 0 = never by itself).
 * Yields to user I/O: a tick after which users read from disk, or while
 * writes to the twin are in flight, reads a quarter of its budget.
 */
#include "iod_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCRUB_TICK_MS    100u
#define SCRUB_SAVE_MS    1000u
#define SCRUB_CHUNK      (1u << 20)
#define SCRUB_RATE_MB    32u         /* default MB/s */
#define SCRUB_FILE       "twinfs-scrub"
#define SCRUB_LAST_FILE  "twinfs-scrub-last"
#define SCRUB_SCHED_MS   60000u      /* how often the schedule is looked at */

struct iod_scrub {
	struct iod *d;
	uv_timer_t timer;
	bool running, have_cur;
	uint32_t rate_mb;
	uint64_t ino, off;           /* the cursor: next byte to read */
	uint32_t column;
	uint64_t subfiles, bytes, bad, runs, saved_ms;
	uint64_t bad_blocks;           /* blocks this run found bad */
	uint64_t healed0, unhealed0;   /* the iod's counters at the start */
	uint64_t checked_seen;         /* csum `checked` after our last tick */
	int64_t last_done_s;           /* when the last scrub finished */
	bool last_known;               /* ... with this result: */
	uint64_t last_bad, last_healed, last_unhealed;
	uv_timer_t sched;
	int open_handles;              /* at stop: timers not yet closed */
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
	char last[PATH_MAX + 24];
};

/* Replace path with line through tmp, best effort and not synced (a lost
 * cursor only makes the next start scrub more; a lost twinfs-scrub-last
 * an earlier one). */
static void save_line(const char *tmp, const char *path, const char *line,
		      int n)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return;
	if (n > 0 && write(fd, line, (size_t)n) == n)
		(void)rename(tmp, path);
	close(fd);
}

/* DIR/twinfs-scrub-last. */
static void save_last(struct iod_scrub *sc)
{
	char line[96];
	char tmp[PATH_MAX + 40];
	int n;

	if (sc->last_known)
		n = snprintf(line, sizeof(line), "%lld %" PRIu64 " %" PRIu64
			     " %" PRIu64 "\n", (long long)sc->last_done_s,
			     sc->last_bad, sc->last_healed, sc->last_unhealed);
	else
		n = snprintf(line, sizeof(line), "%lld\n",
			     (long long)sc->last_done_s);
	snprintf(tmp, sizeof(tmp), "%s.tmp", sc->last);
	save_line(tmp, sc->last, line, n);
}

static int64_t now_s(void)
{
	int64_t sec;
	uint32_t nsec;

	tw_realtime(&sec, &nsec);
	return sec;
}

/* DIR/twinfs-scrub, at most once a second unless forced. */
static void save(struct iod_scrub *sc, bool force)
{
	uint64_t now = tw_now_ms();
	char line[128];
	int n;

	if (!force && now - sc->saved_ms < SCRUB_SAVE_MS)
		return;
	sc->saved_ms = now;
	if (!sc->running) {
		(void)unlink(sc->path);
		return;
	}
	n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu32 " %" PRIu64
		     " %" PRIu32 "\n", sc->have_cur ? sc->ino : 0, sc->column,
		     sc->have_cur ? sc->off : 0, sc->rate_mb);
	save_line(sc->tmp, sc->path, line, n);
}

static void finish(struct iod_scrub *sc)
{
	sc->running = false;
	sc->have_cur = false;
	sc->runs++;
	uv_timer_stop(&sc->timer);
	save(sc, true);
	sc->last_done_s = now_s();
	sc->last_known = true;
	sc->last_bad = sc->bad_blocks;
	sc->last_healed = iod_store_csum_stats(sc->d->store)->healed -
			  sc->healed0;
	sc->last_unhealed = iod_store_csum_stats(sc->d->store)->unhealed -
			    sc->unhealed0;
	save_last(sc);
	tw_info("iod %" PRIu32 ": scrub done: %" PRIu64 " subfiles, %" PRIu64
		" bytes, %" PRIu64 " reads found a bad block, %" PRIu64
		" bad blocks, %" PRIu64 " blocks healed, %" PRIu64 " bad on "
		"both twins", sc->d->id, sc->subfiles, sc->bytes, sc->bad,
		sc->last_bad, sc->last_healed, sc->last_unhealed);
}

/* The subfile after the cursor: false at the end of the listing. */
static bool next_subfile(struct iod_scrub *sc)
{
	struct iod_sub_info info;
	bool eof;

	if (iod_store_list(sc->d->store, sc->have_cur ? sc->ino : 0,
			   sc->have_cur ? sc->column : 0, 1, &info, &eof) != 1)
		return false;
	sc->ino = info.ino;
	sc->column = info.column;
	sc->off = 0;
	sc->have_cur = true;
	sc->subfiles++;
	return true;
}

static void on_tick(uv_timer_t *t);

static void start(struct iod_scrub *sc, uint32_t rate_mb, const char *why)
{
	struct iod *d = sc->d;

	sc->running = true;
	sc->have_cur = false;
	sc->subfiles = sc->bytes = sc->bad = sc->bad_blocks = 0;
	sc->healed0 = iod_store_csum_stats(d->store)->healed;
	sc->unhealed0 = iod_store_csum_stats(d->store)->unhealed;
	sc->rate_mb = rate_mb ? rate_mb : SCRUB_RATE_MB;
	save(sc, true);
	uv_timer_start(&sc->timer, on_tick, SCRUB_TICK_MS, SCRUB_TICK_MS);
	tw_info("iod %" PRIu32 ": scrub started (%s) at %" PRIu32 " MB/s",
		d->id, why, sc->rate_mb);
}

/* The schedule: a scrub when the last finished scrub_interval ago. */
static void on_sched(uv_timer_t *t)
{
	struct iod_scrub *sc = t->data;
	struct iod *d = sc->d;
	uint32_t iv = d->conf->scrub_interval_ms;

	if (sc->running || d->closing || !iv ||
	    !iod_store_csum_stats(d->store)->enabled)
		return;
	if ((now_s() - sc->last_done_s) * 1000 < (int64_t)iv)
		return;
	start(sc, d->conf->scrub_rate_mb, "scheduled: scrub_interval");
}

static void on_tick(uv_timer_t *t)
{
	struct iod_scrub *sc = t->data;
	struct iod *d = sc->d;
	uint64_t budget = (uint64_t)sc->rate_mb * (1u << 20) / (1000 / SCRUB_TICK_MS);
	uint64_t checked = iod_store_csum_stats(d->store)->checked;

	if (!sc->running || d->closing || !d->registered ||
	    !iod_twin_self_readable(d))
		return;      /* paused: a stale copy is not ours to judge */
	if (checked != sc->checked_seen || d->fwd_unanswered > 0)
		budget /= 4;   /* users read or write: yield to them */
	while (budget > 0) {
		struct iod_sub_stat st;
		uint8_t *buf = NULL;
		size_t want;
		long n;

		if (!sc->have_cur && !next_subfile(sc)) {
			finish(sc);
			return;
		}
		want = (size_t)TW_MIN(budget, (uint64_t)SCRUB_CHUNK);
		n = iod_store_read(d->store, sc->ino, sc->column, sc->off, want,
				   &buf, &st);
		free(buf);
		if (n == -EBADMSG) {
			/* block by block: the twin may have a bad block of
			 * its own elsewhere in the chunk */
			sc->bad++;
			for (uint64_t b = sc->off / 4096;
			     b * 4096 < sc->off + want; b++)
				if (iod_store_csum_verify(d->store, sc->ino,
							  sc->column, b) ==
				    -EBADMSG) {
					sc->bad_blocks++;
					iod_heal_range(d, sc->ino, sc->column,
						       b * 4096, 4096);
				}
			n = (long)want;
		}
		if (n <= 0) {
			/* the end, or gone, or held as lost: the next one */
			if (!next_subfile(sc)) {
				finish(sc);
				return;
			}
			continue;
		}
		sc->off += (uint64_t)n;
		sc->bytes += (uint64_t)n;
		budget -= TW_MIN(budget, (uint64_t)n);
	}
	sc->checked_seen = iod_store_csum_stats(d->store)->checked;
	save(sc, false);
}

int iod_scrub_init(struct iod *d)
{
	struct iod_scrub *sc = calloc(1, sizeof(*sc));
	unsigned long long ino = 0, off = 0, lb = 0, lh = 0, lu = 0;
	unsigned col = 0, rate = 0;
	long long done = 0;
	FILE *f;
	int n;

	if (!sc)
		return -ENOMEM;
	sc->d = d;
	snprintf(sc->path, sizeof(sc->path), "%s/" SCRUB_FILE, d->me->dir);
	snprintf(sc->tmp, sizeof(sc->tmp), "%s/" SCRUB_FILE ".tmp", d->me->dir);
	snprintf(sc->last, sizeof(sc->last), "%s/" SCRUB_LAST_FILE, d->me->dir);
	uv_timer_init(d->loop, &sc->timer);
	sc->timer.data = sc;
	uv_timer_init(d->loop, &sc->sched);
	sc->sched.data = sc;
	d->scrub = sc;
	f = fopen(sc->last, "re");
	n = f ? fscanf(f, "%lld %llu %llu %llu", &done, &lb, &lh, &lu) : 0;
	if (n < 1) {
		sc->last_done_s = now_s();   /* a new iod: a full interval */
		save_last(sc);
	} else {
		sc->last_done_s = (int64_t)done;
		sc->last_known = n == 4;
		sc->last_bad = lb;
		sc->last_healed = lh;
		sc->last_unhealed = lu;
	}
	if (f)
		fclose(f);
	if (d->conf->scrub_interval_ms) {
		uint32_t every = TW_MIN(d->conf->scrub_interval_ms,
					SCRUB_SCHED_MS);

		uv_timer_start(&sc->sched, on_sched, every, every);
	}
	f = fopen(sc->path, "re");
	if (f) {
		if (fscanf(f, "%llu %u %llu %u", &ino, &col, &off, &rate) == 4 &&
		    col < IOD_MAX_COLUMNS) {
			sc->running = true;
			sc->rate_mb = rate ? rate : SCRUB_RATE_MB;
			sc->have_cur = ino != 0;
			sc->ino = ino;
			sc->column = col;
			sc->off = off;
			tw_info("iod %" PRIu32 ": resuming the scrub at subfile "
				"ino %llu column %u offset %llu", d->id, ino, col,
				off);
			uv_timer_start(&sc->timer, on_tick, SCRUB_TICK_MS,
				       SCRUB_TICK_MS);
		}
		fclose(f);
	}
	return 0;
}

/* Both timers are closed; the second close frees. */
static void free_scrub(uv_handle_t *h)
{
	struct iod_scrub *sc = h->data;

	if (--sc->open_handles == 0)
		free(sc);
}

void iod_scrub_stop(struct iod *d)
{
	struct iod_scrub *sc = d->scrub;

	if (!sc)
		return;
	d->scrub = NULL;
	uv_timer_stop(&sc->timer);
	uv_timer_stop(&sc->sched);
	sc->open_handles = 2;
	uv_close((uv_handle_t *)&sc->timer, free_scrub);
	uv_close((uv_handle_t *)&sc->sched, free_scrub);
}

void iod_scrub_request(struct iod *d, struct wire_conn *c,
		       const struct wire_msg *m)
{
	const Twinfs__Scrub *q = (const Twinfs__Scrub *)m->body;
	Twinfs__ScrubReply r = TWINFS__SCRUB_REPLY__INIT;
	struct iod_scrub *sc = d->scrub;

	if (!sc) {
		iod_reply_status(c, m, -ESHUTDOWN);
		return;
	}
	if (q->start && !sc->running) {
		if (!iod_store_csum_stats(d->store)->enabled) {
			iod_reply_status(c, m, -EOPNOTSUPP);  /* no checksums */
			return;
		}
		start(sc, q->rate_mb ? q->rate_mb : d->conf->scrub_rate_mb,
		      "asked");
	}
	r.running = sc->running;
	r.rate_mb = sc->rate_mb;
	r.subfiles = sc->subfiles;
	r.bytes = sc->bytes;
	r.bad = sc->bad;
	r.runs = sc->runs;
	r.healed = iod_store_csum_stats(d->store)->healed - sc->healed0;
	r.unhealed = iod_store_csum_stats(d->store)->unhealed - sc->unhealed0;
	r.cur_ino = sc->have_cur ? sc->ino : 0;
	r.cur_column = sc->column;
	r.csum_mismatches = iod_store_csum_stats(d->store)->mismatches;
	r.csum_healed = iod_store_csum_stats(d->store)->healed;
	r.csum_unhealed = iod_store_csum_stats(d->store)->unhealed;
	r.csum_enabled = iod_store_csum_stats(d->store)->enabled;
	r.last_done = sc->last_done_s;
	r.last_known = sc->last_known;
	r.last_bad = sc->last_bad;
	r.last_healed = sc->last_healed;
	r.last_unhealed = sc->last_unhealed;
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
}

void iod_scrub_stats(const struct iod *d, struct iod_scrub_stats *out)
{
	const struct iod_scrub *sc = d->scrub;

	memset(out, 0, sizeof(*out));
	if (!sc)
		return;
	out->running = sc->running;
	out->subfiles = sc->subfiles;
	out->bytes = sc->bytes;
	out->bad = sc->bad;
	out->runs = sc->runs;
}
