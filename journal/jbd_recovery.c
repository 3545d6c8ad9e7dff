/* jbd_recovery.c - replay of the block journal at open, in passes as
 * jbd2's recovery.c:
 *
 *   SCAN    from the superblock's tail and sequence, walk transaction by
 *           transaction; a transaction counts only if it is committed by the
 *           validity rule of FORMAT.md (part 2) (J1, J2, J5); the first one that
 *           is not ends the log (a torn tail is discarded, never applied),
 *           unless a later committed one says it had been synced: damage,
 *           refused (J16, J17).
 *           Collect, per object, the last transaction carrying an in-place
 *           tag (rule R).
 *   REPLAY  apply the committed transactions in log order: data blocks to
 *           their homes (unescaped), records to ops.apply (JBD_PHASE_REPLAY)
 *           except cut records overruled by rule R; then ops.home_sync.
 *   RESET   write the superblock with the tail after the last committed
 *           transaction and a sequence past the one that failed, and
 *           fdatasync it.  Until then the old superblock stands, so a crash
 *           during replay replays the same transactions again (J15).
 *
 * Replay is synchronous (it runs before the iod serves anything) and goes
 * through the same I/O layer as everything else, so tests can crash it.
 */
#include "jbd_int.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct txn_ext {
	uint64_t start, seq, nblocks;
};

struct rscan {
	struct jbd *j;
	uint8_t *blk;                 /* one block */
	struct txn_ext *txns;
	size_t n_txns, cap_txns;
	struct tw_hmap inplace;       /* obj + 1 -> (void *)(last seq) */
	struct tw_hmap aside;         /* obj + 1 -> 1: set aside by the owner
	                               * (jbd_ops.home_failed): its later
	                               * items are not replayed */
	const char *why;              /* scan_txn: the check that failed */
	uint64_t bad_at;              /* and the log block it failed at */
	unsigned version;             /* the superblock's: JBD_VERSION(_1) */
	uint64_t synced_to;           /* scan_txn: of the committed txn */
};

/* Replaying an item of obj failed with rc: true when the owner set obj
 * aside (now or before), so replay goes on without it. */
static bool replay_set_aside(struct rscan *s, uint64_t obj, uint64_t seq,
			     int rc)
{
	if (tw_hmap_get(&s->aside, obj + 1))
		return true;
	if (!jbd__obj_set_aside(s->j, obj, seq, rc))
		return false;
	tw_log_rl(TW_LOG_ERR, "journal %s: transaction %" PRIu64 ": object "
		  "%" PRIu64 " cannot be brought home (%s): set aside, replay "
		  "goes on", s->j->opts.path, seq, obj, strerror(-rc));
	return tw_hmap_put(&s->aside, obj + 1, (void *)1) == 0;
}

static int read_log_block(struct jbd *j, uint64_t pos, uint8_t *buf)
{
	int rc = jbd__pread_full(j, JBD_IO_LOG, j->fd, buf, JBD_BLOCK_SIZE,
				 pos * JBD_BLOCK_SIZE);
	return rc < 0 ? rc : 0;
}

/* Header check: magic, type, sequence (J1). */
static int hdr_ok(const uint8_t *b, uint64_t seq, uint16_t *type)
{
	struct jbd_hdr_disk h;
	memcpy(&h, b, sizeof(h));
	if (le32toh(h.magic) != JBD_MAGIC || le64toh(h.seq) != seq ||
	    h.flags != 0)
		return 0;
	*type = le16toh(h.type);
	return 1;
}

static int rec_block_ok(const uint8_t *b)
{
	struct jbd_rechdr_disk rh;
	memcpy(&rh, b, sizeof(rh));
	uint32_t nrec = le32toh(rh.nrec), used = le32toh(rh.used);
	if (used > JBD_BLOCK_SIZE || used < sizeof(rh) || nrec == 0)
		return 0;
	uint32_t off = sizeof(rh);
	for (uint32_t i = 0; i < nrec; i++) {
		struct jbd_rec_disk r;
		if (off + sizeof(r) > used)
			return 0;
		memcpy(&r, b + off, sizeof(r));
		uint32_t len = le32toh(r.len);
		if (len > JBD_REC_MAX || r.flags != 0)
			return 0;
		off += (uint32_t)sizeof(r) + JBD_REC_ALIGN(len);
		if (off > used)
			return 0;
	}
	return off == used;
}

/* Is the transaction at pos with sequence seq committed?  Returns its block
 * count including the commit block, or 0 when not (the end of the log;
 * s->why then says which check failed, s->bad_at at which block). */
#define BAD(reason) do { s->why = (reason); s->bad_at = p; return 0; } while (0)
static uint64_t scan_txn(struct rscan *s, uint64_t pos, uint64_t seq,
			 int *err)
{
	struct jbd *j = s->j;
	uint32_t crc = j->crc_seed;
	uint64_t n = 0;
	uint8_t *b = s->blk;
	uint64_t p = pos;
	*err = 0;
	s->why = NULL;
	for (;;) {
		if (n + 1 > j->max_txn)
			BAD("longer than a quarter of the log"); /* J9 */
		p = jbd__log_next(j, pos, n);
		int rc = read_log_block(j, p, b);
		if (rc < 0) {
			*err = rc;
			return 0;
		}
		uint16_t type;
		if (!hdr_ok(b, seq, &type))
			BAD("bad block header (magic, flags or sequence)");
		if (type == JBD_T_COMMIT) {
			struct jbd_commit_disk c;
			memcpy(&c, b, sizeof(c));
			if (le32toh(c.nblocks) != n)
				BAD("commit block count mismatch");
			crc = tw_crc32c(crc, b, offsetof(struct jbd_commit_disk, crc));
			s->synced_to = 0;   /* version 1: nothing said */
			if (s->version != JBD_VERSION_1) {
				crc = tw_crc32c(crc, &c.synced_to,
						sizeof(c.synced_to));
				s->synced_to = le64toh(c.synced_to);
			}
			if (le32toh(c.crc) != crc || n == 0)
				BAD("commit checksum mismatch");
			if (s->synced_to >= seq)
				BAD("commit synced_to not below its sequence");
			return n + 1;
		}
		if (type == JBD_T_RECORD) {
			if (!rec_block_ok(b))
				BAD("malformed record block");
			crc = tw_crc32c(crc, b, JBD_BLOCK_SIZE);
			n++;
			continue;
		}
		if (type != JBD_T_DESC)
			BAD("unknown block type");
		struct jbd_desc_disk d;
		memcpy(&d, b, sizeof(d));
		uint32_t ntags = le32toh(d.ntags);
		if (ntags == 0 || ntags > JBD_TAGS_PER_DESC)
			BAD("malformed descriptor");
		uint64_t ndata = 0;
		for (uint32_t i = 0; i < ntags; i++) {
			struct jbd_tag_disk t;
			memcpy(&t, b + sizeof(d) + i * sizeof(t), sizeof(t));
			uint32_t fl = le32toh(t.flags), len = le32toh(t.len);
			if ((fl & ~JBD_TAG_KNOWN) != 0 ||
			    ((fl & JBD_TAG_LAST) != 0) != (i + 1 == ntags))
				BAD("malformed descriptor tag");
			if (fl & JBD_TAG_INPLACE) {
				if (len != 0 || (fl & JBD_TAG_ESCAPED))
					BAD("malformed descriptor tag");
			} else {
				if (len == 0 || len > JBD_BLOCK_SIZE)
					BAD("malformed descriptor tag");
				ndata++;
			}
		}
		crc = tw_crc32c(crc, b, JBD_BLOCK_SIZE);
		n++;
		for (uint64_t k = 0; k < ndata; k++) {
			if (n + 1 > j->max_txn)
				BAD("longer than a quarter of the log");
			p = jbd__log_next(j, pos, n);
			rc = read_log_block(j, p, b);
			if (rc < 0) {
				*err = rc;
				return 0;
			}
			crc = tw_crc32c(crc, b, JBD_BLOCK_SIZE);
			n++;
		}
	}
}

#undef BAD

/* What the rest of the log holds after the first transaction that is not
 * committed (J16, J17). */
struct later {
	uint64_t n;                   /* committed transactions, seq >= S */
	uint64_t first_seq, last_seq;
	uint64_t max_seq;             /* highest seq of any metadata block */
	bool witness;                 /* one says S had been synced: */
	uint64_t witness_seq, witness_pos, witness_synced_to;
};

/* J16, J17: after the first transaction that is not committed (seq at
 * pos), reads the rest of the log (the `left` blocks from pos on, up to
 * the committed ones) once, for every committed transaction of sequence
 * >= seq.  A crash that keeps write order leaves none: transactions are
 * written in sequence order, and the blocks past the end hold older laps
 * of the log (lower sequences; J2).  A power loss may leave some that
 * were written, unsynced, after the bad one; one whose synced_to >= seq
 * (the witness) was written after the bad one had been synced, so log
 * blocks that were durable went bad: damage.  Only a block whose header
 * says descriptor or record with such a sequence can start one (data
 * blocks never carry the magic, J4); scan_txn then checks it whole.  Also
 * notes the highest sequence of any metadata block there, so that the
 * next sequence skips every leftover (J2).  Returns 0 with *l filled in,
 * or -errno. */
static int scan_after_bad(struct rscan *s, uint64_t pos, uint64_t left,
			  uint64_t seq, struct later *l)
{
	struct jbd *j = s->j;
	const uint64_t chunk_blocks = 64;
	uint8_t *buf = malloc(chunk_blocks * JBD_BLOCK_SIZE);
	const char *why = s->why;
	uint64_t bad_at = s->bad_at;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	if (buf == NULL)
		return -ENOMEM;
	for (uint64_t done = 0; done < left;) {
		uint64_t first = jbd__log_next(j, pos, done);
		/* one read never wraps past the end of the file */
		uint64_t n = TW_MIN(TW_MIN(chunk_blocks, left - done),
				    j->nblocks - first);
		uint64_t skip_to = done + n;

		rc = jbd__pread_full(j, JBD_IO_LOG, j->fd, buf,
				     n * JBD_BLOCK_SIZE, first * JBD_BLOCK_SIZE);
		if (rc < 0)
			goto out;
		for (uint64_t k = 0; k < n; k++) {
			struct jbd_hdr_disk h;
			uint64_t hseq, len;
			uint16_t type;
			int err;

			memcpy(&h, buf + k * JBD_BLOCK_SIZE, sizeof(h));
			type = le16toh(h.type);
			hseq = le64toh(h.seq);
			if (le32toh(h.magic) != JBD_MAGIC || h.flags != 0 ||
			    type < JBD_T_DESC || type > JBD_T_RECORD)
				continue;
			l->max_seq = TW_MAX(l->max_seq, hseq);
			if (type == JBD_T_COMMIT || hseq < seq)
				continue;
			len = scan_txn(s, first + k, hseq, &err);
			if (len == 0) {
				if (err < 0) {
					rc = err;
					goto out;
				}
				continue;
			}
			if (l->n++ == 0)
				l->first_seq = hseq;
			l->last_seq = TW_MAX(l->last_seq, hseq);
			if (!l->witness && s->synced_to >= seq) {
				l->witness = true;
				l->witness_seq = hseq;
				l->witness_pos = first + k;
				l->witness_synced_to = s->synced_to;
			}
			/* Its blocks start nothing else: go on after it. */
			skip_to = done + k + len;
			break;
		}
		done = skip_to;
	}
out:
	s->why = why;       /* what was wrong at the end, for the log line */
	s->bad_at = bad_at;
	free(buf);
	return rc;
}

/* Rule R: remember, per object, the last transaction with in-place data. */
static int note_inplace(struct rscan *s, uint64_t start, uint64_t seq)
{
	struct jbd *j = s->j;
	uint64_t n = 0;
	for (;;) {
		int rc = read_log_block(j, jbd__log_next(j, start, n), s->blk);
		if (rc < 0)
			return rc;
		struct jbd_hdr_disk h;
		memcpy(&h, s->blk, sizeof(h));
		uint16_t type = le16toh(h.type);
		n++;
		if (type == JBD_T_COMMIT)
			return 0;
		if (type != JBD_T_DESC)
			continue;
		struct jbd_desc_disk d;
		memcpy(&d, s->blk, sizeof(d));
		uint32_t ntags = le32toh(d.ntags);
		for (uint32_t i = 0; i < ntags; i++) {
			struct jbd_tag_disk t;
			memcpy(&t, s->blk + sizeof(d) + i * sizeof(t), sizeof(t));
			if (le32toh(t.flags) & JBD_TAG_INPLACE) {
				rc = tw_hmap_put(&s->inplace, le64toh(t.obj) + 1,
						 (void *)(uintptr_t)seq);
				if (rc < 0)
					return rc;
			} else {
				n++;
			}
		}
	}
}

static int note_obj(uint64_t **objs, size_t *n, size_t *cap, uint64_t obj)
{
	for (size_t i = *n; i-- > 0;)
		if ((*objs)[i] == obj)
			return 0;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		uint64_t *x = realloc(*objs, c * sizeof(*x));
		if (x == NULL)
			return -ENOMEM;
		*objs = x;
		*cap = c;
	}
	(*objs)[(*n)++] = obj;
	return 0;
}

static int replay_txn(struct rscan *s, const struct txn_ext *t,
		      struct jbd_replay_info *info, uint64_t **objs,
		      size_t *n_objs, size_t *cap_objs)
{
	struct jbd *j = s->j;
	uint8_t *b = s->blk;
	uint8_t *data = malloc(JBD_BLOCK_SIZE);
	struct jbd_tag_disk *tags = malloc(JBD_TAGS_PER_DESC * sizeof(*tags));
	int rc = 0;
	if (data == NULL || tags == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t n = 0;
	while (n + 1 < t->nblocks) {
		rc = read_log_block(j, jbd__log_next(j, t->start, n), b);
		if (rc < 0)
			goto out;
		n++;
		struct jbd_hdr_disk h;
		memcpy(&h, b, sizeof(h));
		if (le16toh(h.type) == JBD_T_RECORD) {
			struct jbd_rechdr_disk rh;
			memcpy(&rh, b, sizeof(rh));
			uint32_t off = sizeof(rh);
			for (uint32_t i = 0; i < le32toh(rh.nrec); i++) {
				struct jbd_rec_disk r;
				memcpy(&r, b + off, sizeof(r));
				uint64_t obj = le64toh(r.obj), cut = le64toh(r.cut);
				uint32_t len = le32toh(r.len);
				const uint8_t *payload = b + off + sizeof(r);
				off += (uint32_t)sizeof(r) + JBD_REC_ALIGN(len);
				uintptr_t ip = (uintptr_t)tw_hmap_get(&s->inplace, obj + 1);
				if (cut != JBD_NO_CUT && ip > t->seq) {
					/* rule R: in-place data of obj written
					 * after this cut is durable and newer */
					info->skipped_cuts++;
					continue;
				}
				if (tw_hmap_get(&s->aside, obj + 1))
					continue;
				if (j->ops.apply) {
					rc = j->ops.apply(j->ops.arg, JBD_PHASE_REPLAY,
							  t->seq, obj, cut, payload, len);
					if (rc < 0 &&
					    replay_set_aside(s, obj, t->seq, rc)) {
						rc = 0;
						continue;
					}
					if (rc < 0)
						goto out;
				}
				info->records++;
				rc = note_obj(objs, n_objs, cap_objs, obj);
				if (rc < 0)
					goto out;
			}
			continue;
		}
		/* descriptor: copy the tags, then the data blocks */
		struct jbd_desc_disk d;
		memcpy(&d, b, sizeof(d));
		uint32_t ntags = le32toh(d.ntags);
		memcpy(tags, b + sizeof(d), ntags * sizeof(*tags));
		for (uint32_t i = 0; i < ntags; i++) {
			uint32_t fl = le32toh(tags[i].flags);
			uint64_t obj = le64toh(tags[i].obj);
			if (fl & JBD_TAG_INPLACE)
				continue;
			if (tw_hmap_get(&s->aside, obj + 1)) {
				n++;      /* its data block: not replayed */
				continue;
			}
			rc = read_log_block(j, jbd__log_next(j, t->start, n), data);
			if (rc < 0)
				goto out;
			n++;
			if (fl & JBD_TAG_ESCAPED) {
				uint32_t m = htole32(JBD_MAGIC);
				memcpy(data, &m, 4);
			}
			int fd;
			rc = j->opts.test_replay_eio ? -EIO :
			     jbd__home_dup(j, obj, true, &fd);
			if (rc == 0 && j->ops.home_blocks) {
				struct iovec v = { data, le32toh(tags[i].len) };

				rc = j->ops.home_blocks(j->ops.arg, obj,
							le64toh(tags[i].blk),
							&v, 1, NULL);
				if (rc < 0)
					close(fd);
			}
			if (rc == 0) {
				rc = jbd__pwrite_sync(j, JBD_IO_HOME, fd, data,
						      le32toh(tags[i].len),
						      le64toh(tags[i].blk) *
						      JBD_BLOCK_SIZE);
				close(fd);
			}
			if (rc < 0 && replay_set_aside(s, obj, t->seq, rc)) {
				rc = 0;
				continue;
			}
			if (rc < 0)
				goto out;
			info->blocks++;
			rc = note_obj(objs, n_objs, cap_objs, obj);
			if (rc < 0)
				goto out;
		}
	}
out:
	free(data);
	free(tags);
	return rc;
}

static int super_read(struct jbd *j, uint64_t *start, uint64_t *seq,
		      unsigned *version)
{
	uint8_t block[JBD_BLOCK_SIZE];
	int rc = jbd__pread_full(j, JBD_IO_LOG, j->fd, block, JBD_BLOCK_SIZE, 0);
	if (rc < 0)
		return rc;
	struct jbd_super_disk sb;
	memcpy(&sb, block, sizeof(sb));
	if (le32toh(sb.h.magic) != JBD_MAGIC || le16toh(sb.h.type) != JBD_T_SUPER ||
	    le32toh(sb.crc) != tw_crc32c(0, &sb, offsetof(struct jbd_super_disk, crc))) {
		tw_err("journal %s: bad superblock (magic, type or checksum)",
		       j->opts.path);
		return -EBADMSG;
	}
	if ((le16toh(sb.version) != JBD_VERSION &&
	     le16toh(sb.version) != JBD_VERSION_1) ||
	    le32toh(sb.block_size) != JBD_BLOCK_SIZE) {
		tw_err("journal %s: unsupported version %u or block size %u",
		       j->opts.path, le16toh(sb.version), le32toh(sb.block_size));
		return -EPROTO;
	}
	uint64_t nb = le64toh(sb.nblocks);
	struct stat_like { uint64_t size; } fsz;
	off_t end = lseek(j->fd, 0, SEEK_END);
	fsz.size = end < 0 ? 0 : (uint64_t)end;
	if (nb < JBD_MIN_SIZE / JBD_BLOCK_SIZE || nb * JBD_BLOCK_SIZE > fsz.size ||
	    le64toh(sb.start) == 0 || le64toh(sb.start) >= nb) {
		tw_err("journal %s: superblock geometry is invalid", j->opts.path);
		return -EBADMSG;
	}
	memcpy(j->uuid, sb.uuid, 16);
	j->nblocks = nb;
	*start = le64toh(sb.start);
	*seq = le64toh(sb.h.seq);
	*version = le16toh(sb.version);
	return 0;
}

int jbd__recover(struct jbd *j, struct jbd_replay_info *info)
{
	uint64_t start, seq;
	unsigned version;
	int rc = super_read(j, &start, &seq, &version);
	if (rc < 0)
		return rc;
	j->nlog = j->nblocks - 1;
	j->max_txn = j->nlog / 4;
	j->crc_seed = tw_crc32c(0, j->uuid, sizeof(j->uuid));

	struct rscan s = { .j = j, .version = version };
	struct later later;
	uint64_t *objs = NULL;
	size_t n_objs = 0, cap_objs = 0;
	tw_hmap_init(&s.inplace);
	tw_hmap_init(&s.aside);
	s.blk = malloc(JBD_BLOCK_SIZE);
	if (s.blk == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	/* pass 1: find the end of the log */
	uint64_t pos = start, cur = seq, total = 0;
	for (;;) {
		int err;
		uint64_t n = scan_txn(&s, pos, cur, &err);
		if (err < 0) {
			rc = err;
			goto out;
		}
		if (n == 0 || total + n > j->nlog)
			break;
		if (s.n_txns == s.cap_txns) {
			size_t c = s.cap_txns ? s.cap_txns * 2 : 16;
			struct txn_ext *x = realloc(s.txns, c * sizeof(*x));
			if (x == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			s.txns = x;
			s.cap_txns = c;
		}
		s.txns[s.n_txns++] = (struct txn_ext){ pos, cur, n };
		rc = note_inplace(&s, pos, cur);
		if (rc < 0)
			goto out;
		total += n;
		pos = jbd__log_next(j, pos, n);
		cur++;
	}
	/* J16, J17: a torn tail, the unsynced tail of a power loss, or
	 * damage with a committed transaction after it that was written
	 * when the bad one had been synced?  Nothing has been written yet:
	 * refuse, journal untouched. */
	{
		const char *why = s.why ? s.why : "unreadable";
		uint64_t bad_at = s.why ? s.bad_at : pos;

		rc = scan_after_bad(&s, pos, j->nlog - total, cur, &later);
		if (rc < 0)
			goto out;
		if (later.witness) {
			tw_err("journal %s: CORRUPT: transaction %" PRIu64
			       " (from log block %" PRIu64 ") fails at block %"
			       PRIu64 " (byte offset %" PRIu64 "): %s; yet "
			       "committed transaction %" PRIu64 " at block %"
			       PRIu64 " (byte offset %" PRIu64 ") was written "
			       "after every transaction up to %" PRIu64 " had "
			       "been synced: a synced transaction went bad, "
			       "this is damage, not a torn tail; nothing was "
			       "replayed or written, the file is untouched",
			       j->opts.path, cur, pos, bad_at,
			       bad_at * JBD_BLOCK_SIZE, why, later.witness_seq,
			       later.witness_pos,
			       later.witness_pos * JBD_BLOCK_SIZE,
			       later.witness_synced_to);
			rc = -ENOTRECOVERABLE;
			goto out;
		}
		if (later.n > 0)
			tw_warn("journal %s: transaction %" PRIu64 " (from log "
				"block %" PRIu64 ") fails at block %" PRIu64
				": %s, and %" PRIu64 " committed transaction(s) "
				"follow it (%" PRIu64 "..%" PRIu64 "), %s: an "
				"unsynced tail lost in part at power loss; "
				"replay stops there and drops those %" PRIu64
				" unsynced transaction(s), nothing that was "
				"synced", j->opts.path, cur, pos, bad_at, why,
				later.n, later.first_seq, later.last_seq,
				version == JBD_VERSION_1 ?
				"in a version 1 journal, which does not say "
				"what was synced" :
				"none written after it was synced", later.n);
	}
	info->torn_tail = false;
	{
		/* Anything of ours at the end position means a transaction was
		 * being written: say so in the log. */
		uint8_t *b = s.blk;
		if (read_log_block(j, pos, b) == 0) {
			struct jbd_hdr_disk h;
			memcpy(&h, b, sizeof(h));
			if (le32toh(h.magic) == JBD_MAGIC && le64toh(h.seq) >= cur)
				info->torn_tail = true;
		}
		if (later.n > 0)
			info->torn_tail = true;
	}
	/* pass 2: replay */
	for (size_t i = 0; i < s.n_txns; i++) {
		rc = replay_txn(&s, &s.txns[i], info, &objs, &n_objs, &cap_objs);
		if (rc < 0) {
			tw_err("journal %s: replay of transaction %" PRIu64
			       " failed: %s", j->opts.path, s.txns[i].seq,
			       strerror(-rc));
			goto out;
		}
	}
	if (s.n_txns > 0) {
		rc = j->ops.home_sync(j->ops.arg, objs, n_objs);
		if (rc < 0) {
			tw_err("journal %s: syncing replayed objects: %s",
			       j->opts.path, strerror(-rc));
			goto out;
		}
		info->txns = s.n_txns;
		info->first_seq = s.txns[0].seq;
		info->last_seq = s.txns[s.n_txns - 1].seq;
		tw_info("journal %s: replayed %" PRIu64 " transactions (%" PRIu64
			"..%" PRIu64 "): %" PRIu64 " blocks, %" PRIu64
			" records, %" PRIu64 " cuts overruled by in-place data%s",
			j->opts.path, info->txns, info->first_seq,
			info->last_seq, info->blocks, info->records,
			info->skipped_cuts,
			info->torn_tail ? "; discarded a torn tail" : "");
	} else if (info->torn_tail) {
		tw_info("journal %s: nothing committed to replay; discarded a "
			"torn tail at block %" PRIu64, j->opts.path, pos);
	}
	/* pass 3: reset (J15).  Skip the sequence that failed, and every
	 * later one found in the rest of the log (the unsynced transactions
	 * a power loss left after it), so that leftovers can never match
	 * (J2).  The superblock is written as version 2 whatever it was
	 * (J17): every transaction from here on is. */
	uint64_t next = TW_MAX(cur, later.max_seq) + 1;
	uint8_t block[JBD_BLOCK_SIZE];
	jbd__super_encode(j, block, pos, next);
	rc = jbd__pwrite_sync(j, JBD_IO_LOG, j->fd, block, JBD_BLOCK_SIZE, 0);
	if (rc == 0)
		rc = jbd__fsync_sync(j, JBD_IO_LOG, j->fd);
	if (rc < 0) {
		tw_err("journal %s: resetting the superblock: %s", j->opts.path,
		       strerror(-rc));
		goto out;
	}
	j->tail = j->head = pos;
	j->tail_seq = next;
	j->used = 0;
	j->next_seq = next;
	j->closed_seq = j->synced_seq = j->checkpointed_seq = next - 1;
out:
	free(s.blk);
	free(s.txns);
	free(objs);
	tw_hmap_free(&s.inplace);
	tw_hmap_free(&s.aside);
	return rc;
}
