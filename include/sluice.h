/*
 * sluice.h - the whole public API of libsluice, an embeddable rate limiter.
 *
 * A decision is one call: for a limit, a key, a cost and a time, may the
 * request pass?  The answer is a decision struct, never an error: being
 * limited is a normal outcome.  Errors (negative SL_E* codes) are kept for
 * bad input and failures of the store.
 *
 * Time is integer nanoseconds (sl_nanos).  The library never reads a clock
 * on the decision path: the caller passes "now", so decisions are exact and
 * reproducible, and a server samples the clock once per loop iteration.
 *
 * Thread safety: an sl_limit is immutable once made and may be shared by
 * any number of threads.  A store may be used by several threads at once.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SL_EXPORT __attribute__((visibility("default")))
#else
#define SL_EXPORT
#endif

/*
 * The version of these headers.  CMakeLists.txt reads its project version
 * (and so the shared library's file name and the pkg-config version) from
 * these three lines, so it is written once.  Minor and patch stay below
 * 100, so that SL_VERSION_NUMBER (major * 10000 + minor * 100 + patch:
 * 100 for 0.1.0) orders versions, for `#if SL_VERSION_NUMBER >= ...`.
 */
#define SL_VERSION_MAJOR 0
#define SL_VERSION_MINOR 1
#define SL_VERSION_PATCH 0
#define SL_VERSION_NUMBER                                                   \
    (SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH)
#define SL__STRINGIFY(x) #x
#define SL__VERSION_TEXT(major, minor, patch)                               \
    SL__STRINGIFY(major) "." SL__STRINGIFY(minor) "." SL__STRINGIFY(patch)
/* "0.1.0" */
#define SL_VERSION                                                          \
    SL__VERSION_TEXT(SL_VERSION_MAJOR, SL_VERSION_MINOR, SL_VERSION_PATCH)

/* The version of the library a program runs with, which may be newer
 * than the headers it was built with: SL_VERSION and SL_VERSION_NUMBER
 * as the library was built.  The string is static. */
SL_EXPORT const char *sl_version(void);
SL_EXPORT int sl_version_number(void);

/* Nanoseconds, signed so that differences are natural. */
typedef int64_t sl_nanos;

#define SL_NS_PER_US  INT64_C(1000)
#define SL_NS_PER_MS  INT64_C(1000000)
#define SL_NS_PER_SEC INT64_C(1000000000)

/* The latest accepted now: 2^62 ns after the epoch (the year 2116), so
 * that now plus any limit's horizon (at most 2^62 ns) never overflows. */
#define SL_MAX_TIME (INT64_C(1) << 62)

/*
 * Errors.  One table gives the enum, sl_strerror() and sl_err_name(); the
 * names ("EINVAL", ...) are also the machine-readable codes of the HTTP API.
 */
#define SL_ERRNO_MAP(X)                                                     \
    X(EINVAL, -1, "invalid argument")                                       \
    X(ENOMEM, -2, "out of memory")                                          \
    X(ERANGE, -3, "value out of range")                                     \
    X(ECOST, -4, "cost out of range")                                       \
    X(EKEYLEN, -5, "key too long")                                          \
    X(EFULL, -6, "store full: memory cap reached and nothing evictable")    \
    X(ESTORE, -7, "store unavailable")

typedef enum sl_errno {
    SL_OK = 0,
#define SL__ERRNO_ENUM(name, value, text) SL_##name = value,
    SL_ERRNO_MAP(SL__ERRNO_ENUM)
#undef SL__ERRNO_ENUM
} sl_errno;

/* A static, lowercase description; "unknown error" for unknown codes. */
SL_EXPORT const char *sl_strerror(int err);
/* The code's name without the prefix ("EINVAL"); "OK" for 0. */
SL_EXPORT const char *sl_err_name(int err);

/* ---------------------------------------------------------------------
 * Algorithms and limits
 * ------------------------------------------------------------------ */

/* Semantics and formulas of each: docs/algorithms.md. */
typedef enum sl_algorithm {
    SL_TOKEN_BUCKET = 0,
    SL_GCRA,
    SL_LEAKY_BUCKET,   /* queue: allowed requests carry a delay */
    SL_FIXED_WINDOW,
    SL_SLIDING_LOG,
    SL_SLIDING_WINDOW, /* the counter hybrid of two fixed windows */
    SL_STEPPED_WINDOW, /* sliding window of step counters (Databox) */
    SL_ALGORITHM_COUNT
} sl_algorithm;

/* "token_bucket", "gcra", ...; NULL for an unknown value. */
SL_EXPORT const char *sl_algorithm_name(sl_algorithm alg);
/* Parses a name as printed by sl_algorithm_name().  0 or SL_EINVAL. */
SL_EXPORT int sl_algorithm_parse(const char *name, size_t len,
                                 sl_algorithm *out);

/*
 * Parses a duration: plain nanoseconds ("1500") or a whole number with a
 * unit: ns, us, ms, s, m (or min), h, d ("500ms", "1m", "1d").  Returns 0,
 * SL_EINVAL for text that is not a duration, or SL_ERANGE when it does not
 * fit in sl_nanos.
 */
SL_EXPORT int sl_duration_parse(const char *text, size_t len, sl_nanos *out);

/* Also count rejected requests in a sliding_log (the design chapter's
 * variant): a client that keeps knocking stays limited. */
#define SL_LOG_REJECTED 0x1u

typedef struct sl_limit_config {
    sl_algorithm algorithm;
    int64_t limit;     /* L: requests (cost units) per period, >= 1 */
    sl_nanos period;   /* P, >= 1 ns */
    int64_t burst;     /* B for the buckets and gcra; 0 means B = L */
    sl_nanos step;     /* stepped_window step; 0 means the default for P */
    unsigned flags;    /* SL_LOG_REJECTED */
    /* Separates limits whose parameters are equal: state is kept per
     * (limit parameters, id, key). */
    uint64_t id;
} sl_limit_config;

/* Largest accepted L, B and cost: 2^40 (about 1.1e12). */
#define SL_MAX_COUNT (INT64_C(1) << 40)

typedef struct sl_limit sl_limit;

/*
 * Validates cfg and makes an immutable limit.  On error returns SL_EINVAL
 * or SL_ERANGE and, if errbuf is not NULL, writes a message naming the bad
 * field into it.  The caller frees the limit with sl_limit_free() after
 * the last check that uses it.
 */
SL_EXPORT int sl_limit_new(const sl_limit_config *cfg, sl_limit **out,
                           char *errbuf, size_t errlen);
SL_EXPORT void sl_limit_free(sl_limit *limit); /* NULL is a no-op */
/* The configuration as normalised (burst and step filled in). */
SL_EXPORT const sl_limit_config *sl_limit_get_config(const sl_limit *limit);
/*
 * A limit with base's state identity and other numbers: checks with it
 * and with base read and write the same counters (sl_check...), and each
 * reads what the other wrote as "units used", so that changing a limit's
 * numbers neither resets nor mints credit (docs/algorithms.md, "Changing
 * a limit's numbers"): a key that used 80 of 100 has 70 left under 150,
 * and 0 (not less) under 60.  The period, algorithm, step, flags and id
 * stay base's.  A key's numbers change at its first check under the new
 * limit; until then its state keeps to the numbers it was written under.
 *
 * limit: the new L, 0 to 2^40 (2^31 - 1 for token_bucket, gcra and
 * leaky_bucket, 2^32 - 1 for sliding_window).  0 denies every request
 * with a cost (retry_after -1) and answers queries with remaining 0: the
 * windows and logs keep counting what is recorded (SL_RECORD) or logged
 * (SL_LOG_REJECTED); the buckets leave their state untouched, to resume
 * when the limit is raised.
 * burst: the new B for token_bucket, gcra and leaky_bucket, or 0 for
 * base's B scaled by limit / L_base (rounded up, at least 1; 0 when limit
 * is 0, which then requires burst 0); the other algorithms take 0 or
 * limit.  base may itself be an override: the result shares the same
 * state, and a burst of 0 scales base's own numbers (its base's if base's
 * limit is 0).
 *
 * Errors as sl_limit_new() (SL_ERANGE for a limit or burst out of range,
 * SL_EINVAL for a burst on a window), plus SL_EINVAL when base is a
 * token_bucket, gcra or leaky_bucket whose L is over 2^31 - 1 (its state
 * has no room to record which L wrote it) and for base or out NULL.  The
 * caller frees *out with sl_limit_free(); base may be freed first.
 * sl_limit_get_config() of the result gives its own numbers.
 */
SL_EXPORT int sl_limit_override(const sl_limit *base, int64_t limit,
                                int64_t burst, sl_limit **out, char *err,
                                size_t errlen);
/* The configuration whose state the limit shares: base's (normalised) for
 * a limit made by sl_limit_override(), the limit's own otherwise. */
SL_EXPORT const sl_limit_config *sl_limit_base_config(const sl_limit *limit);
/* The stepped_window step chosen for a period when none is given. */
SL_EXPORT sl_nanos sl_default_step(sl_nanos period);

/* ---------------------------------------------------------------------
 * Decisions
 * ------------------------------------------------------------------ */

typedef struct sl_decision {
    int allowed;              /* 1: may pass (cost consumed); 0: rejected */
    int64_t limit;            /* L */
    int64_t remaining;        /* whole units left after this request */
    sl_nanos reset_after;     /* until the state is back to full/empty */
    sl_nanos retry_after;     /* rejected: smallest wait after which the
                               * same request would pass if nothing else
                               * arrived; 0 if allowed; -1 if never */
    sl_nanos delay;           /* leaky_bucket: wait before processing */
} sl_decision;

/* ---------------------------------------------------------------------
 * Stores
 * ------------------------------------------------------------------ */

typedef struct sl_store sl_store;

/*
 * Options structs (sl_memory_options, sl_redis_options, sl_rules_options)
 * grow without breaking programs built against older headers: each opens
 * with `size`, which the caller sets to the struct's sizeof, most simply
 * with its _INIT macro (`sl_memory_options o = SL_MEMORY_OPTIONS_INIT;`)
 * or `{.size = sizeof(sl_memory_options), ...}`.  New fields are only
 * appended, and a zero field always means its default, so the library
 * reads the fields within `size` and gives the rest their defaults.  A
 * size smaller than the struct's first layout (0 among them: a struct
 * that was never initialised) is refused as SL_EINVAL, and so is a
 * larger one whose fields unknown to this library are not all zero.  A
 * NULL options pointer means every default where a function takes NULL.
 */

typedef struct sl_memory_options {
    size_t size; /* sizeof(sl_memory_options): SL_MEMORY_OPTIONS_INIT */
    /* Memory cap in bytes for the whole store (table and logs); 0 means
     * the default, 256 MiB.  At the cap, expired state is reclaimed and
     * then the least recently used state is evicted (docs/stores.md). */
    size_t max_bytes;
    /* Seed of the key hash; 0 and 0 mean a random seed from the OS.
     * Fixed seeds are for reproducible tests only. */
    uint64_t seed0, seed1;
    /* Longest accepted key in bytes; 0 means 4096. */
    size_t max_key_len;
} sl_memory_options;

#define SL_MEMORY_OPTIONS_INIT {.size = sizeof(sl_memory_options)}

/*
 * The embedded in-memory store: thread-safe, memory-bounded, seeded key
 * hashing.  opts may be NULL for defaults.  Returns NULL when out of
 * memory or when opts->size is refused (above).  The caller frees it with
 * sl_store_free().
 */
SL_EXPORT sl_store *sl_memory_store_new(const sl_memory_options *opts);
SL_EXPORT void sl_store_free(sl_store *store); /* NULL is a no-op */

/*
 * The memory store's state in a file, so that counters survive a restart
 * (docs/stores.md, "State file": the format, what is kept, the time base).
 */
typedef struct sl_memory_save_options {
    size_t size; /* sizeof(...): SL_MEMORY_SAVE_OPTIONS_INIT */
    /* CLOCK_REALTIME at the save in ns; 0: read it. */
    sl_nanos wall;
    /* The limits in force, whose identities the file records, so that a
     * load can tell whether it is for the same limits.  Borrowed for the
     * call; may be NULL with n_limits 0. */
    const sl_limit *const *limits;
    size_t n_limits;
} sl_memory_save_options;

#define SL_MEMORY_SAVE_OPTIONS_INIT                                            \
    {                                                                          \
        .size = sizeof(sl_memory_save_options)                                 \
    }

typedef struct sl_memory_save_info {
    uint64_t keys;         /* keys written */
    uint64_t bytes;        /* the file's size */
    sl_nanos duration;     /* the whole save, fsync and rename included */
    sl_nanos longest_lock; /* the longest one shard was held by the save */
} sl_memory_save_info;

/*
 * Writes the store's state to `path`, atomically: to "path.tmp", mode
 * 0600, fsync'd, then renamed over path (and the directory fsync'd).
 * Decisions go on meanwhile: the save copies one shard at a time under
 * that shard's lock, so each key is as it was at some moment of the save
 * and no decision waits for more than one shard's copy.  `now` is the
 * caller's now (its time base) at the save.  opts may be NULL; info may
 * be NULL.  One save of a path at a time.  Returns 0, SL_EINVAL (not a
 * memory store, now out of range, refused opts), SL_ENOMEM or SL_ESTORE
 * (the file cannot be written: the message names it and the reason); on
 * error the previous file at path is untouched.
 */
SL_EXPORT int sl_memory_store_save(sl_store *store, const char *path,
                                   sl_nanos now,
                                   const sl_memory_save_options *opts,
                                   sl_memory_save_info *info, char *errbuf,
                                   size_t errlen);

/* What a load found; sl_state_result_name() gives each its word. */
typedef enum sl_state_result {
    SL_STATE_LOADED = 0,   /* "loaded" */
    SL_STATE_MISSING,      /* "missing": no file at path */
    SL_STATE_UNREADABLE,   /* "unreadable": permissions, I/O */
    SL_STATE_TRUNCATED,    /* "truncated": shorter than it says */
    SL_STATE_CORRUPT,      /* "corrupt": a checksum or a record is wrong */
    SL_STATE_VERSION,      /* "version": another format version */
    SL_STATE_ENDIAN,       /* "endian": another byte order */
    SL_STATE_OTHER_LIMITS, /* "other_limits": none of its limits in force */
    SL_STATE_TOO_BIG,      /* "too_big": over the store's memory cap */
    SL_STATE_RESULT_COUNT
} sl_state_result;

SL_EXPORT const char *sl_state_result_name(sl_state_result r);

typedef struct sl_memory_load_options {
    size_t size; /* sizeof(...): SL_MEMORY_LOAD_OPTIONS_INIT */
    /* CLOCK_REALTIME at the load in ns; 0: read it. */
    sl_nanos wall;
    /* The limits in force now: a file that recorded limits none of
     * which is among them is refused (SL_STATE_OTHER_LIMITS).  NULL with
     * n_limits 0: no such check. */
    const sl_limit *const *limits;
    size_t n_limits;
} sl_memory_load_options;

#define SL_MEMORY_LOAD_OPTIONS_INIT                                            \
    {                                                                          \
        .size = sizeof(sl_memory_load_options)                                 \
    }

typedef struct sl_memory_load_info {
    sl_state_result result;
    uint64_t keys, bytes; /* loaded: keys, and the file's size */
    sl_nanos saved_now;   /* the saving caller's now */
    sl_nanos saved_wall;  /* and CLOCK_REALTIME then */
    /* Where the caller's time base goes on: saved_now plus the wall-clock
     * time since the save (0 if the wall clock went back).  A caller whose
     * now is the wall clock is there already; one whose now runs from a
     * base of its own sets it so that now is resume_now at the load. */
    sl_nanos resume_now;
    uint64_t limits_saved; /* limit identities the file recorded */
    uint64_t limits_kept;  /* of those, in opts->limits */
} sl_memory_load_info;

/*
 * Loads a file written by sl_memory_store_save() into `store`, a memory
 * store that has made no decision yet: its keys, the hash key they were
 * placed under, and its time base.  Nothing in the file is trusted
 * before it is checked (length, checksums, every record); a bad file
 * leaves the store empty and as it was.  info (may be NULL) says what was
 * found.  Returns 0 (SL_STATE_LOADED), SL_EINVAL for a file that is
 * missing or cannot be used (info->result says why, errbuf names the file
 * and what is wrong) or for a store that is not an unused memory store,
 * or SL_ENOMEM.
 */
SL_EXPORT int sl_memory_store_load(sl_store *store, const char *path,
                                   const sl_memory_load_options *opts,
                                   sl_memory_load_info *info, char *errbuf,
                                   size_t errlen);

/*
 * Where the Redis store connects, and how.  All strings are borrowed for
 * the duration of sl_redis_store_new() only (the store copies them).
 */
typedef struct sl_redis_options {
    size_t size; /* sizeof(sl_redis_options): SL_REDIS_OPTIONS_INIT */
    /* "redis://[[user]:password@]host[:port][/db]",
     * "unix:/path/to/socket[?db=N]" or, for Redis Cluster,
     * "redis-cluster://[[user]:password@]host:port[,host:port...]" (at
     * most 1024 seed nodes; the slot map is read from them), each with
     * TLS as "rediss://" and "rediss-cluster://"; or, for a master that
     * Redis Sentinel watches,
     * "redis-sentinel://[[user]:password@]host[:port][,...]/name[/db]"
     * (Sentinels' port 26379 by default; the master is asked of them
     * before each connection, docs/stores.md); when set it overrides
     * host, port, unix_path, db, user and password (and sets tls for
     * the rediss schemes).  NULL: use the fields below. */
    const char *url;
    const char *host;      /* NULL: "127.0.0.1" (ignored with unix_path) */
    int port;              /* 0: 6379 */
    const char *unix_path; /* a unix socket instead of TCP */
    int db;                /* SELECT db; 0 by default */
    const char *user;      /* AUTH user password (Redis 6 ACLs); NULL */
    const char *password;  /* AUTH password; NULL: no AUTH */
    /* Bound on connecting and on each command's round trip; 0: 1000 ms.
     * A check waits at most about three times this (a reconnect, the
     * EVALSHA, and the EVAL after a NOSCRIPT). */
    int timeout_ms;
    /* Prepended to every key; NULL: "sl:".  May not contain '{' or '}',
     * which would move the keys' Cluster hash tag (docs/stores.md). */
    const char *key_prefix;
    /* Decide at the Redis server's clock (TIME, microseconds) instead of
     * the now passed to sl_check: one clock for every client, no skew.
     * The passed now must still be valid; it is otherwise unused. */
    int use_server_time;
    /* Added to every key's TTL.  Keys expire when their state is back to
     * initial on a clock that runs at real speed; a caller whose now runs
     * slower (replays, tests) sets this so state outlives the gap. */
    int64_t extra_ttl_ms;
    /* Longest accepted key in bytes; 0 means 4096. */
    size_t max_key_len;
    /* Redis Cluster: which part of a key is its hash tag, so which keys
     * share a slot (and can be decided in one atomic call).  0: the whole
     * key (every limit of one key shares a slot).  A byte d: the key's
     * bytes before its first d (the whole key if it has none), so that
     * "tenant-a/user-1" and "tenant-a/user-2" share a slot with d = '/':
     * all of a tenant's keys then live on one master (docs/stores.md).
     * Not '{' or '}'.  The name a key gets changes with it: keep one
     * value for the life of the data. */
    char tag_delimiter;
    /* 1: sl_redis_store_new() only checks the options and connects on
     * the first check.  0: connect at once. */
    int lazy_connect;
    /* TLS to every server (a "rediss://" or "rediss-cluster://" url sets
     * it): TLS 1.2 or 1.3, the server's certificate verified against
     * tls_ca_file (NULL: the system's trust store) and its name against
     * tls_server_name (NULL: the host connected to; also sent as SNI).
     * A client certificate when tls_cert_file and tls_key_file are set.
     * tls_insecure skips every verification: for tests only.  The files
     * are read by sl_redis_store_new(), whose error names a bad one; a
     * certificate the server presents that fails verification is
     * SL_EINVAL.  Not with a unix socket. */
    int tls;
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
    int tls_insecure;
    /* Redis Sentinel ("redis-sentinel://host:port[,host:port...]/name",
     * "rediss-sentinel://" with TLS to the Sentinels and the master): the
     * Sentinels' own AUTH, when they ask for one (the URL's credentials
     * are the master's).  NULL: none. */
    const char *sentinel_user;
    const char *sentinel_password;
} sl_redis_options;

#define SL_REDIS_OPTIONS_INIT {.size = sizeof(sl_redis_options)}

/*
 * The Redis store: state in a Redis 7 server, decided there by Lua
 * scripts with exactly the memory store's semantics, one round trip per
 * check (docs/stores.md).  Connects, authenticates and loads the script
 * before returning.  opts is required (its url, or host and port, say
 * where).  Returns 0 and sets *out (the caller frees it with
 * sl_store_free()), or SL_EINVAL (bad options, size or URL) or SL_ESTORE
 * (Redis unreachable or refusing) with a message in errbuf when not NULL.
 *
 * Later failures of a check (connection lost, timeout, error reply) return
 * SL_ESTORE and the store reconnects on the next call.  A limit whose
 * arithmetic would not be exact in Redis's Lua numbers is refused by
 * sl_check with SL_ERANGE: period <= 2^52 ns, and for the buckets
 * burst * period / gcd(period, limit) <= 2^52 (docs/stores.md).
 * sl_store_sweep() is a no-op (Redis expires keys itself) and
 * sl_store_get_stats() reports zeros.  Thread-safe: calls are serialised
 * on the store's one connection.
 */
SL_EXPORT int sl_redis_store_new(const sl_redis_options *opts,
                                 sl_store **out, char *errbuf, size_t errlen);

/*
 * The message of the last failure of a Redis store's check (the reply or
 * the connection's error), copied into buf (NUL-terminated, truncated to
 * len); "" if none.  For a memory store always "".
 */
SL_EXPORT void sl_store_last_error(sl_store *store, char *buf, size_t len);

/*
 * Decides one request: may `cost` units pass `limit` for `key` at `now`?
 * cost 0 is a pure query that consumes nothing.  key is (pointer, length)
 * and is copied as needed.  Returns 0 and fills *out, or a negative SL_E*
 * code (and *out is untouched): SL_ECOST for a negative cost or one over
 * SL_MAX_COUNT, SL_EKEYLEN, SL_EINVAL for now outside 0..SL_MAX_TIME,
 * SL_ENOMEM/SL_EFULL when state cannot be kept (SL_EFULL also when one
 * key's log would outgrow its share of the memory cap).
 */
SL_EXPORT int sl_check(sl_store *store, const sl_limit *limit,
                       const void *key, size_t key_len, int64_t cost,
                       sl_nanos now, sl_decision *out);

/* One limit and key of a request that must pass several limits. */
typedef struct sl_check_item {
    const sl_limit *limit;
    const void *key;
    size_t key_len;
} sl_check_item;

/* Most items in one sl_check_multi() call. */
#define SL_MAX_ITEMS 64

/*
 * Decides a request that must pass every item (per-user and global, say):
 * allowed only if all allow, and then `cost` is consumed from all;
 * otherwise from none.  each[i] (may be NULL) gets item i's own decision:
 * its verdict, and remaining/reset_after after what was really consumed.
 * *overall gets allowed = all allowed, the item closest to its limit (least
 * remaining) for limit and remaining, and the largest reset_after,
 * retry_after (-1 if any is -1) and delay.  The check is atomic with
 * respect to other threads.  Errors as sl_check(), plus SL_EINVAL for
 * n == 0 or n > SL_MAX_ITEMS.
 */
SL_EXPORT int sl_check_multi(sl_store *store, const sl_check_item *items,
                             size_t n, int64_t cost, sl_nanos now,
                             sl_decision *each, sl_decision *overall);

/* sl_check_costs() flag: the request has happened whatever the decision
 * (a client reporting a request it already sent, as the Databox paper's
 * increment does), so its cost is consumed from every item even where it
 * does not fit.  Windows and logs then count every unit; the buckets
 * (token_bucket, gcra, leaky_bucket) are left empty, never in debt beyond
 * their capacity.  allowed still says whether the cost fitted, and for a
 * request that did not, retry_after is the wait until the same cost fits
 * after this one is recorded (docs/algorithms.md, "Recording"). */
#define SL_RECORD 0x1u

/*
 * As sl_check_multi(), with its own cost for each item: costs[i] is
 * consumed from items[i] (one request counted as 1 against a request rate
 * and as its size against a byte rate), all or nothing.  flags is 0 or
 * SL_RECORD.  Errors as sl_check_multi(), SL_ECOST for any bad cost, and
 * SL_EINVAL for costs == NULL or an unknown flag.
 */
SL_EXPORT int sl_check_costs(sl_store *store, const sl_check_item *items,
                             const int64_t *costs, size_t n, sl_nanos now,
                             unsigned flags, sl_decision *each,
                             sl_decision *overall);

/*
 * Combines n >= 1 per-item decisions into the overall one exactly as
 * sl_check_multi() does, for a caller that decided some items apart (a
 * server that falls back to another store for some of them, say).
 */
SL_EXPORT void sl_decisions_combine(const sl_decision *each, size_t n,
                                    sl_decision *overall);

/* A key: (pointer, length), not NUL-terminated. */
typedef struct sl_key {
    const void *data;
    size_t len;
} sl_key;

/*
 * Decides n independent requests on one limit, in order, exactly as n
 * calls of sl_check() would, but faster on many cold keys: the store
 * hashes keys a few decisions ahead and prefetches their state, so the
 * cache misses overlap (a server decides a loop tick's requests at once).
 * Every input is checked first (SL_EINVAL, SL_ECOST, SL_EKEYLEN: nothing
 * decided).  A store failure on key i (SL_ENOMEM, SL_EFULL) is returned
 * with out[0..i) filled and the keys after i not decided.
 */
SL_EXPORT int sl_check_batch(sl_store *store, const sl_limit *limit,
                             const sl_key *keys, size_t n, int64_t cost,
                             sl_nanos now, sl_decision *out);

/*
 * Reclaims state that has returned to its initial value by `now`,
 * visiting at most max_slots slots from where the last call stopped (so a
 * server can spread the work over its loop ticks).  Returns the number of
 * keys reclaimed.  The store also reclaims on its own when it needs room.
 */
SL_EXPORT size_t sl_store_sweep(sl_store *store, sl_nanos now,
                                size_t max_slots);

typedef struct sl_store_stats {
    uint64_t keys;          /* keys holding state */
    uint64_t bytes;         /* bytes held: table plus logs */
    uint64_t max_bytes;     /* the cap */
    uint64_t reclaimed;     /* keys dropped because their state expired */
    uint64_t evicted;       /* keys dropped by the LRU policy at the cap */
    uint64_t lock_waits;    /* times a call found a shard locked by
                               another thread and waited (memory store) */
} sl_store_stats;

SL_EXPORT void sl_store_get_stats(sl_store *store, sl_store_stats *out);

/* ---------------------------------------------------------------------
 * Waiting for a limit (for embedding programs that would rather wait than
 * be refused)
 * ------------------------------------------------------------------ */

/* The clock and the sleep sl_acquire() uses; a test passes a manual
 * clock whose sleep advances it.  Either function NULL: the default,
 * sl_clock_realtime() and nanosleep(). */
typedef struct sl_waiter {
    sl_nanos (*now)(void *ctx);
    void (*sleep)(void *ctx, sl_nanos ns);
    void *ctx;
} sl_waiter;

/*
 * Blocks until `cost` units of `limit` for `key` are acquired, waiting at
 * most max_wait ns in all: checks, and while rejected sleeps the
 * decision's retry_after and checks again (another thread or node may
 * have taken the room meanwhile).  A wait that cannot fit in what is left
 * of max_wait is not slept: sl_acquire() returns at once.
 *
 * Returns 0 with *out the last decision: allowed 1 when the cost was
 * consumed, allowed 0 when it was not (retry_after -1: never fits;
 * otherwise it would have taken longer than max_wait).  Errors as
 * sl_check(), plus SL_EINVAL for max_wait < 0.  w may be NULL for the
 * defaults.  Decisions are made at w's now, so the default clock is the
 * real time the windows align on.
 */
SL_EXPORT int sl_acquire(sl_store *store, const sl_limit *limit,
                         const void *key, size_t key_len, int64_t cost,
                         sl_nanos max_wait, const sl_waiter *w,
                         sl_decision *out);

/* ---------------------------------------------------------------------
 * Clocks (for callers; the decision path never reads one)
 * ------------------------------------------------------------------ */

/* CLOCK_REALTIME in ns since the Unix epoch: window alignment and replay. */
SL_EXPORT sl_nanos sl_clock_realtime(void);
/* CLOCK_MONOTONIC in ns: for intervals. */
SL_EXPORT sl_nanos sl_clock_monotonic(void);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_H */
