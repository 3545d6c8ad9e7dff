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

struct iod_scrub {
	struct iod *d;
	uv_timer_t timer;
	bool running, have_cur;
	uint32_t rate_mb;
	uint64_t ino, off;           /* the cursor: next byte to read */
	uint32_t column;
	uint64_t subfiles, bytes, bad, runs, saved_ms;
	uint64_t healed0, unhealed0;   /* the iod's counters at the start */
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
};

/* Best effort: a lost cursor only makes the next start scrub more. */
static void save(struct iod_scrub *sc, bool force)
{
	uint64_t now = tw_now_ms();
	char line[128];
	int fd, n;

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
	fd = open(sc->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) == n)
		(void)rename(sc->tmp, sc->path);
	close(fd);
}

static void finish(struct iod_scrub *sc)
{
	sc->running = false;
	sc->have_cur = false;
	sc->runs++;
	uv_timer_stop(&sc->timer);
	save(sc, true);
	tw_info("iod %" PRIu32 ": scrub done: %" PRIu64 " subfiles, %" PRIu64
		" bytes, %" PRIu64 " reads found a bad block", sc->d->id,
		sc->subfiles, sc->bytes, sc->bad);
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

static void on_tick(uv_timer_t *t)
{
	struct iod_scrub *sc = t->data;
	struct iod *d = sc->d;
	uint64_t budget = (uint64_t)sc->rate_mb * (1u << 20) / (1000 / SCRUB_TICK_MS);

	if (!sc->running || d->closing || !d->registered ||
	    !iod_twin_self_readable(d))
		return;      /* paused: a stale copy is not ours to judge */
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
				    -EBADMSG)
					iod_heal_range(d, sc->ino, sc->column,
						       b * 4096, 4096);
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
	save(sc, false);
}

int iod_scrub_init(struct iod *d)
{
	struct iod_scrub *sc = calloc(1, sizeof(*sc));
	unsigned long long ino = 0, off = 0;
	unsigned col = 0, rate = 0;
	FILE *f;

	if (!sc)
		return -ENOMEM;
	sc->d = d;
	snprintf(sc->path, sizeof(sc->path), "%s/" SCRUB_FILE, d->me->dir);
	snprintf(sc->tmp, sizeof(sc->tmp), "%s/" SCRUB_FILE ".tmp", d->me->dir);
	uv_timer_init(d->loop, &sc->timer);
	sc->timer.data = sc;
	d->scrub = sc;
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

static void free_scrub(uv_handle_t *h)
{
	free(h->data);
}

void iod_scrub_stop(struct iod *d)
{
	struct iod_scrub *sc = d->scrub;

	if (!sc)
		return;
	d->scrub = NULL;
	uv_timer_stop(&sc->timer);
	uv_close((uv_handle_t *)&sc->timer, free_scrub);
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
		sc->running = true;
		sc->have_cur = false;
		sc->subfiles = sc->bytes = sc->bad = 0;
		sc->healed0 = iod_store_csum_stats(d->store)->healed;
		sc->unhealed0 = iod_store_csum_stats(d->store)->unhealed;
		sc->rate_mb = q->rate_mb ? q->rate_mb : SCRUB_RATE_MB;
		save(sc, true);
		uv_timer_start(&sc->timer, on_tick, SCRUB_TICK_MS, SCRUB_TICK_MS);
		tw_info("iod %" PRIu32 ": scrub started at %" PRIu32 " MB/s",
			d->id, sc->rate_mb);
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
	wire_reply(c, &m->hdr, 0, &r.base, NULL, 0);
}
