/* common.h - the whole public interface of libcommon.
 *
 * Logging, configuration (twinfs.conf), CRC32C, clocks and a small u64-keyed
 * hash map.  Everything here is usable from any thread unless noted.
 * Functions return 0 (or a count) on success and a negative errno on failure.
 */
#ifndef TWINFS_COMMON_H
#define TWINFS_COMMON_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- logging */

/* One line per event to stderr: "2026-11-22T10:54:01.123 twinfs-iod[3] WARN msg".
 * Never log file contents. */
enum tw_log_level { TW_LOG_ERR = 0, TW_LOG_WARN, TW_LOG_INFO, TW_LOG_DEBUG };

/* progname appears on every line; lines above `level` are dropped.
 * The environment variable TWINFS_LOG_LEVEL (err|warn|info|debug) overrides. */
void tw_log_init(const char *progname, enum tw_log_level level);
void tw_log(enum tw_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Rate-limited: repeats of the same call site (same fmt pointer) within 5 s
 * are counted instead of printed; the count is printed with the next line. */
void tw_log_rl(enum tw_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
bool tw_log_enabled(enum tw_log_level level);

#define tw_err(...)   tw_log(TW_LOG_ERR, __VA_ARGS__)
#define tw_warn(...)  tw_log(TW_LOG_WARN, __VA_ARGS__)
#define tw_info(...)  tw_log(TW_LOG_INFO, __VA_ARGS__)
#define tw_debug(...) do { if (tw_log_enabled(TW_LOG_DEBUG)) \
	tw_log(TW_LOG_DEBUG, __VA_ARGS__); } while (0)

/* ------------------------------------------------------------------ time */

uint64_t tw_now_ns(void);          /* CLOCK_MONOTONIC, nanoseconds */
uint64_t tw_now_ms(void);          /* CLOCK_MONOTONIC, milliseconds */

/* Data-path daemons: keep 1 MiB I/O buffers in the heap.  glibc serves
 * them with mmap and gives freed memory back, so every request's buffer
 * was faulted in and zeroed anew (clear_page: 11-18 % of client and iod
 * CPU on a 1 GiB write); call once at start. */
void tw_malloc_tune(void);
void tw_realtime(int64_t *sec, uint32_t *nsec); /* CLOCK_REALTIME */

/* A wall-clock time as files carry it. */
struct tw_ts {
	int64_t sec;
	uint32_t nsec;
};
/* <0, 0, >0 as a is earlier than, equal to or later than b. */
int tw_ts_cmp(struct tw_ts a, struct tw_ts b);
/* Whether a read at `now` updates the atime under relatime (Linux's
 * relatime_need_update): atime <= mtime, atime <= ctime, or atime a day
 * older than now.  mgrd decides with it; the client asks it before
 * letting the kernel serve reads from its page cache. */
bool tw_relatime_due(struct tw_ts atime, struct tw_ts mtime,
		     struct tw_ts ctime, struct tw_ts now);

/* ----------------------------------------------------------------- crc32c */

/* CRC32C (Castagnoli), as iSCSI/ext4: start with crc = 0 for a fresh sum;
 * chaining tw_crc32c(tw_crc32c(0, a, n), b, m) equals the sum over a||b.
 * Uses SSE4.2 when the CPU has it. */
uint32_t tw_crc32c(uint32_t crc, const void *buf, size_t len);
/* tw_crc32c(0, a || b) from crc1 = tw_crc32c(0, a), crc2 = tw_crc32c(0, b)
 * and len2 = the length of b, without reading either: a few table
 * lookups for len2 = 4096 (a journal block), about 40 multiplications
 * in GF(2^32) otherwise.  Pure; any thread. */
uint32_t tw_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

/* FNV-1a, 64 bits: a fast hash of names for in-memory tables (not
 * collision-proof; never stored). */
uint64_t tw_fnv1a64(const void *buf, size_t len);

/* ---------------------------------------------------------------- config */

#define TW_MAX_IODS     64
#define TW_MAX_GROUPS   (TW_MAX_IODS / 2)
#define TW_HOST_MAX     64
#define TW_NAME_MAX     255

/* Bounds of the resource limits in twinfs.conf. */
#define TW_CONNS_MIN                 16
#define TW_CONNS_MAX                 (1 << 20)
#define TW_QUEUED_REPLY_MIN          (64u << 10)
#define TW_SESSIONS_PER_CLIENT_MAX   (1 << 16)
#define TW_LOCKS_PER_SESSION_MAX     (1 << 20)

struct tw_conf_iod {
	int id;                       /* 1..n, as the [iod N] section */
	int group;                    /* twin group, 0-based */
	int twin_index;               /* 0 or 1 within the group (ascending id) */
	char host[TW_HOST_MAX];
	int port;
	char dir[PATH_MAX];           /* data directory */
	/* [iod N] metrics = HOST:PORT: where GET /metrics is served
	 * (docs/OPERATIONS.md "Metrics"); port 0 = off (the default). */
	char metrics_host[TW_HOST_MAX];
	int metrics_port;
};

/* One mgrd of a pair, [mgrd 1] / [mgrd 2] (docs/ARCHITECTURE.md
 * "Metadata"); with a single mgrd, mgrd[0] mirrors [mgrd]'s address. */
#define TW_MAX_MGRDS 2
struct tw_conf_mgrd {
	char host[TW_HOST_MAX];       /* default 127.0.0.1 */
	int port;                     /* default 7500 */
	char dir[PATH_MAX];           /* state directory */
	char metrics_host[TW_HOST_MAX];
	int metrics_port;             /* 0 = off */
};

/* A client identity, [client NAME] (docs/OPERATIONS.md "Client
 * identities"; proto/FORMAT.md "Client identities"). */
#define TW_MAX_CLIENTS      256
#define TW_CLIENT_NAME_MAX  64     /* with the NUL: names of 1..63 bytes */
#define TW_CLIENT_KEY_LEN   32
#define TW_CLIENT_NETS_MAX  16
#define TW_EXPORT_MAX       256
#define TW_ANON_ID          65534u

enum tw_squash { TW_SQUASH_NONE = 0, TW_SQUASH_ROOT, TW_SQUASH_ALL };

struct tw_cidr {
	uint8_t addr[16];   /* network, big-endian; IPv4 in the first 4 */
	uint8_t family;     /* 4 or 6 */
	uint8_t prefix;     /* 0..32 or 0..128 */
};

struct tw_conf_client {
	char name[TW_CLIENT_NAME_MAX];   /* [A-Za-z0-9._-], 1..63 bytes */
	uint8_t key[TW_CLIENT_KEY_LEN];  /* key = hex, or key_file = PATH */
	char export_path[TW_EXPORT_MAX]; /* export, default "/": normalized */
	bool read_only;                  /* access = ro */
	enum tw_squash squash;           /* squash, default [cluster] root_squash */
	uint32_t anonuid, anongid;       /* default 65534 */
	int n_networks;                  /* 0 = any source address */
	struct tw_cidr networks[TW_CLIENT_NETS_MAX];
};

enum tw_journal_mode { TW_JNL_JOURNAL = 0, TW_JNL_ORDERED, TW_JNL_WRITEBACK };

/* How frames are protected after AUTH (proto/FORMAT.md "Sealed frames").
 * Ordered by strength: a connection runs the stronger of both sides'
 * minimums.  The numbers are the wire's (Auth.channel). */
enum tw_channel {
	TW_CHANNEL_DEFAULT = 0,       /* not set: TW_CHANNEL_DEFAULT_MODE */
	TW_CHANNEL_NONE = 1,          /* frames in the clear, unauthenticated */
	TW_CHANNEL_INTEGRITY = 2,     /* every frame authenticated (GMAC) */
	TW_CHANNEL_ENCRYPT = 3,       /* body and data encrypted (AES-GCM) */
};
#define TW_CHANNEL_DEFAULT_MODE TW_CHANNEL_INTEGRITY
/* "none", "integrity", "encrypt" -> TW_CHANNEL_*; -EINVAL otherwise. */
int tw_channel_parse(const char *s, enum tw_channel *out);
/* The name of a mode (TW_CHANNEL_DEFAULT: of the default), or "?". */
const char *tw_channel_name(enum tw_channel c);

/* Little-endian integers in byte buffers of any alignment: the one codec
 * of the byte formats that are not protobuf (wire header, capabilities,
 * tickets, mgrd's records, ACLs). */
static inline void tw_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void tw_put_le32(uint8_t *p, uint32_t v)
{
	tw_put_le16(p, (uint16_t)v);
	tw_put_le16(p + 2, (uint16_t)(v >> 16));
}

static inline void tw_put_le64(uint8_t *p, uint64_t v)
{
	tw_put_le32(p, (uint32_t)v);
	tw_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t tw_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t tw_get_le32(const uint8_t *p)
{
	return (uint32_t)tw_get_le16(p) | (uint32_t)tw_get_le16(p + 2) << 16;
}

static inline uint64_t tw_get_le64(const uint8_t *p)
{
	return (uint64_t)tw_get_le32(p) | (uint64_t)tw_get_le32(p + 4) << 32;
}

/* Defaults of the [cluster] timings, the one place they are written:
 * tw_conf_defaults sets them, and code handed a tw_conf that may be
 * zeroed (a unit test's, a library's caller's) falls back to them with
 * tw_ms_or. */
#define TW_REQUEST_TIMEOUT_MS   5000u
#define TW_MGR_TIMEOUT_MS       120000u
#define TW_COMMIT_INTERVAL_MS   5000u
#define TW_LOCK_GRACE_MS        5000u
/* [mgrd] lease_time of the pair's election (docs/ARCHITECTURE.md
 * "Election"; raid/lease.h): what a voter grants. */
#define TW_MGRD_LEASE_MS        3000u
#define TW_MGRD_LEASE_MIN_MS    500u
#define TW_MGRD_LEASE_MAX_MS    60000u
#define TW_MONITOR_INTERVAL_MS  30000u
/* [mgrd] snapshot_timeout: why 10 minutes, mgrd/snapfork.c. */
#define TW_SNAPSHOT_TIMEOUT_MS  600000u
/* [iod] twin_spin_us: a twin on the same switch answers a 4 KiB forward
 * in 20-30 us, so 40 catches it; a farther one fails the average and
 * costs nothing (common/spin.h). */
#define TW_TWIN_SPIN_US         40u

static inline uint32_t tw_ms_or(uint32_t ms, uint32_t dflt)
{
	return ms ? ms : dflt;
}

struct tw_conf {
	char cluster_name[64];        /* [cluster] name, default "twinfs" */
	char secret[128];             /* [cluster] secret; "" = none */
	uint32_t stripe_size;         /* [cluster] stripe_size, default 512K */
	uint32_t stripe_count;        /* [cluster] stripe_count, 0 = all groups */
	uint32_t monitor_interval_ms; /* [cluster] monitor_interval, 30s */
	uint32_t down_after;          /* [cluster] down_after, 2 intervals */
	uint32_t request_timeout_ms;  /* [cluster] request_timeout, 5s */
	uint32_t mgr_timeout_ms;      /* [cluster] mgr_timeout, 120s */
	uint32_t commit_interval_ms;  /* [cluster] commit_interval, 5s */
	uint32_t session_timeout_ms;  /* [cluster] session_timeout, 3 x monitor */
	bool auto_resync;             /* [cluster] auto_resync, true */
	bool root_squash;             /* [cluster] root_squash, false: anonymous
				       * clients' squash, and the default
				       * of every [client NAME] */
	/* [cluster] ticket_lifetime, 1h: how long an iod accepts a ticket
	 * mgrd issued (proto/FORMAT.md "Tickets"). */
	uint32_t ticket_lifetime_ms;
	/* [cluster] lock_grace, 5s: after an mgrd start, only reclaims of
	 * locks held before it get locks (proto/FORMAT.md "Locks"). */
	uint32_t lock_grace_ms;
	/* [cluster] max_connections, 4096: connections one daemon keeps
	 * open; past it a new one is accepted and closed at once (lowered
	 * at start to fit RLIMIT_NOFILE: tw_fd_budget). */
	uint32_t max_connections;
	/* [cluster] hello_timeout, 5s: a connection that has not completed
	 * AUTH + HELLO by then is closed (proto/FORMAT.md section 2). */
	uint32_t hello_timeout_ms;
	/* [cluster] max_queued_reply_bytes, 32M: reply bytes a daemon queues
	 * for one connection before it stops reading that connection's
	 * requests (until they drain below half). */
	uint64_t max_queued_reply_bytes;
	/* [cluster] cap_lifetime, 300s: how long a data-path capability mgrd
	 * issues stays valid (proto/FORMAT.md "Capabilities"); only with a
	 * secret. */
	uint32_t cap_lifetime_ms;
	/* [cluster] channel: the weakest protection of frames after AUTH
	 * this process accepts (TW_CHANNEL_DEFAULT: the default mode). */
	enum tw_channel channel;

	/* 1, or 2 with [mgrd 1] and [mgrd 2]: an mgrd pair.  mgrd[i] is
	 * mgrd i+1; mgr_host, mgr_port, mgr_dir and mgr_metrics_* equal
	 * mgrd[mgrd_self - 1]'s (mgrd[0]'s unless tw_conf_select_mgrd). */
	int n_mgrds;
	int mgrd_self;                /* 1..n_mgrds: twinfs-mgrd --id */
	struct tw_conf_mgrd mgrd[TW_MAX_MGRDS];
	char mgr_host[TW_HOST_MAX];   /* [mgrd] host, 127.0.0.1 */
	int mgr_port;                 /* [mgrd] port, 7500 */
	char mgr_dir[PATH_MAX];       /* [mgrd] dir */
	/* [mgrd] max_sessions_per_client, 64: live sessions of one client
	 * (its identity, else its address); past it a new session's
	 * HELLO is refused -EAGAIN. */
	uint32_t max_sessions_per_client;
	/* [mgrd] max_locks_per_session, 100000: byte-range and flock locks
	 * one session holds; past it a lock is refused -ENOLCK. */
	uint32_t max_locks_per_session;
	/* [mgrd] lease_time, 3s: the lease a voter of the mgrd pair's
	 * election grants (every iod and both mgrds read it). */
	uint32_t mgrd_lease_ms;
	/* [mgrd] snapshot_timeout, 10m (0/off: none): how long mgrd's
	 * snapshot child may run before it is killed (mgrd/snapfork.c). */
	uint32_t snapshot_timeout_ms;
	/* [mgrd] metrics = HOST:PORT, as tw_conf_iod.metrics_*; 0 = off. */
	char mgr_metrics_host[TW_HOST_MAX];
	int mgr_metrics_port;

	enum tw_journal_mode journal_mode; /* [iod] journal_mode (all iods) */
	uint64_t journal_size;        /* [iod] journal_size, default 256M */
	/* [iod] reserve, default 64M (at least 16M): space of its data
	 * directory's file system an iod never fills with data (J13). */
	uint64_t iod_reserve;
	/* [iod] scrub_interval, default 7d (0/off: only on request): an iod
	 * starts a scrub when its last one finished this long ago
	 * (docs/ARCHITECTURE.md "Integrity"). */
	uint32_t scrub_interval_ms;
	/* [iod] scrub_rate, MB/s, default 32: of a scheduled scrub and of
	 * twinfsctl scrub without --rate. */
	uint32_t scrub_rate_mb;
	/* [iod] twin_spin_us, default TW_TWIN_SPIN_US (0: off, at most
	 * TW_SPIN_MAX_US): how long a primary polls for its twin's answer
	 * before its loop sleeps (docs/ARCHITECTURE.md "Waiting without
	 * sleeping"). */
	uint32_t twin_spin_us;

	int n_iods;
	int n_groups;
	struct tw_conf_iod iods[TW_MAX_IODS]; /* sorted by id; iods[i].id == i+1 */

	int n_clients;                        /* [client NAME] in file order */
	struct tw_conf_client clients[TW_MAX_CLIENTS];
};

/* Fill every field with its default (no iods). */
void tw_conf_defaults(struct tw_conf *conf);

/* Parse an INI file:
 *   [cluster]  key = value ...     sizes take K/M/G suffixes, times ms/s/m
 *   [mgrd]     host, port, dir, max_sessions_per_client,
 *              max_locks_per_session, metrics, lease_time,
 *              snapshot_timeout
 *   [mgrd N]   host, port, dir, metrics of mgrd N of a pair (N = 1, 2;
 *              both or neither; then [mgrd] holds none of these four)
 *   [iod]      journal_mode, journal_size, reserve, scrub_interval,
 *              scrub_rate, twin_spin_us (for every iod)
 *   [iod N]    host, port, dir, group, metrics (N = 1, 2, ...)
 *   [client NAME] key | key_file, export, access, squash, anonuid,
 *              anongid, networks

 * '#' and ';' start comments.  Validates: iod ids dense from 1, every group
 * holds exactly two iods, stripe_size a power of two in 64K..64M.
 * On error returns -EINVAL (or -errno of open) and writes a message naming
 * the file and line into err; -EACCES when the file holds [cluster] secret
 * and is readable by group or others (chmod 600 fixes it), -EINVAL when
 * that secret is the example's placeholder "CHANGE-ME". */
int tw_conf_load(const char *path, struct tw_conf *conf, char *err, size_t errlen);

/* Make mgrd `id` (1..n_mgrds) this process's: mgr_host, mgr_port,
 * mgr_dir and mgr_metrics_* take its values.  -EINVAL for another id. */
int tw_conf_select_mgrd(struct tw_conf *conf, int id);

/* A metrics address: "HOST:PORT", "[V6]:PORT", "PORT" (= 127.0.0.1:PORT)
 * or "off" (port 0).  host must hold TW_HOST_MAX bytes.  0 or -EINVAL. */
int tw_parse_metrics_addr(const char *s, char *host, int *port);

/* Parse "512K", "1M", "4096" -> bytes; "100ms", "30s", "2m", "5" (=s) -> ms. */
int tw_parse_size(const char *s, uint64_t *out);
int tw_parse_ms(const char *s, uint32_t *out);

/* Find a [client NAME] by name; NULL if absent. */
const struct tw_conf_client *tw_conf_client(const struct tw_conf *conf,
					    const char *name);
/* Parse "10.0.0.0/8", "::1/128", "127.0.0.2" (a host) into *out. */
int tw_cidr_parse(const char *s, struct tw_cidr *out);
/* Whether a numeric address ("127.0.0.1", "::1", "::ffff:10.1.2.3") lies
 * in the network. */
bool tw_cidr_match(const struct tw_cidr *net, const char *addr);
/* A client key file (docs/OPERATIONS.md "Client identities"): lines
 * "name = NAME" and "key = HEX" (64 hex digits); owner-only mode.  name
 * may be NULL (only the key wanted) or gets TW_CLIENT_NAME_MAX bytes.
 * -EACCES (mode), -EINVAL (format) with a message in err. */
int tw_client_keyfile_load(const char *path, char *name,
			   uint8_t key[TW_CLIENT_KEY_LEN], char *err,
			   size_t errlen);
/* Whether s is a valid identity name. */
bool tw_client_name_ok(const char *s);

/* Find an iod by id; NULL if absent. */
const struct tw_conf_iod *tw_conf_iod(const struct tw_conf *conf, int id);

/* -------------------------------------------------------------- hash map */

/* Open-addressing map from a nonzero uint64_t key to a pointer.  Not
 * thread-safe: callers hold their own lock.  Pointers are owned by the
 * caller. */
struct tw_hmap {
	uint64_t *keys;
	void **vals;
	size_t cap;    /* power of two, 0 when empty */
	size_t count;
};

void tw_hmap_init(struct tw_hmap *m);
void tw_hmap_free(struct tw_hmap *m);              /* frees the table only */
void *tw_hmap_get(const struct tw_hmap *m, uint64_t key);
int tw_hmap_put(struct tw_hmap *m, uint64_t key, void *val); /* replaces (never
                                                   * fails then); -ENOMEM */
void *tw_hmap_del(struct tw_hmap *m, uint64_t key);  /* returns old value or NULL */
/* Iterate: for (size_t it = 0; tw_hmap_next(m, &it, &k, &v);) { ... }
 * Deleting the current key during iteration is allowed. */
bool tw_hmap_next(const struct tw_hmap *m, size_t *it, uint64_t *key, void **val);

/* ------------------------------------------------------------------ misc */

/* Write all of buf at off, retrying short writes and EINTR. */
int tw_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Replace dir_fd/name with buf durably: written to dir_fd/tmp (0600, not
 * following a link), fsynced, renamed over name, directory fsynced; on
 * failure tmp is removed and name is as it was.  0 or -errno. */
int tw_replace_file(int dir_fd, const char *tmp, const char *name,
		    const void *buf, size_t len);
/* Read up to len at off; returns bytes read (short only at EOF) or -errno. */
long tw_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* mkdir -p with mode 0700 (data directories); 0 if it exists (its mode is
 * left as it is). */
int tw_mkdir_p(const char *path);
/* The connection limit that fits RLIMIT_NOFILE with `reserve` descriptors
 * left for the daemon's own files: raises the soft limit if it can, else
 * lowers *conns below want_conns with a warning naming `who`.  0 or
 * -errno. */
int tw_fd_budget(const char *who, uint32_t want_conns, uint32_t reserve,
		 uint32_t *conns);

/* Before a repair changes the file at path: copy it, whole, to
 * "PATH.corrupt-<unix time>" (mode 0600; written to out), fsync the copy
 * and its directory.  0 or -errno (-EEXIST when that name exists). */
int tw_copy_aside(const char *path, char *out, size_t outlen);
/* Asks is_free(arg) every 10 ms for at most max_ms (0: once): its 1
 * (free) ends the wait with 0, a negative errno with that; still 0 (held)
 * at the end gives -ETIMEDOUT.  *waited_ms says how long it waited.  For
 * a lock a dead owner's leftovers hold a moment longer (a child that
 * inherited the descriptor, io_uring requests in flight). */
int tw_wait_free(int (*is_free)(void *arg), void *arg, unsigned max_ms,
		 unsigned *waited_ms);
/* flock(*fd, LOCK_EX | LOCK_NB) as an is_free for tw_wait_free: 1 taken,
 * 0 held by another open file, -errno. */
int tw_flock_free(void *fd);
/* The address a server binds: host is an IPv4 or IPv6 literal,
 * "localhost" (127.0.0.1) or a name, resolved here (blocking: call it at
 * start only).  0 or -EINVAL. */
struct sockaddr_storage;
int tw_listen_addr(const char *host, int port, struct sockaddr_storage *ss);
/* The port of an IPv4 or IPv6 address (host order). */
int tw_sockaddr_port(const struct sockaddr_storage *ss);

/* Fill buf with len random bytes from getrandom(2). */
int tw_random(void *buf, size_t len);

#define TW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TW_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
