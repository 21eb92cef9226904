/*
 * decision.h - the decision layer: the one way a front end of the daemon
 * (serve's HTTP APIs, the proxy, and the gRPC, RESP and admin front ends
 * to come) has a request's checks decided, on whichever store the
 * process runs.
 *
 * A front end hands sd_decide() the atomic checks of one request (each an
 * array of items, as sl_check_costs() takes them).  On the memory store
 * they are decided at once.  On Redis they are sent and sd_decide()
 * returns SD_AGAIN: the front end keeps its own request state (nginx's
 * "again") and its done callback runs once when every check has its
 * result, from Redis or, when Redis could not decide, from the failure
 * policy.  Nothing is global to the thread and nothing runs twice.
 */
#ifndef SD_DECISION_H
#define SD_DECISION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "rules/rule_daemon.h"
#include "sluice.h"
#include "sluice_rules.h"

/* The policy for a check that Redis cannot decide (--redis-failure). */
enum { SD_FAIL_LOCAL, SD_FAIL_OPEN, SD_FAIL_CLOSED };
#define SD_N_POLICIES 3
/* Why Redis could not decide (sluice_store_failures_total{reason}). */
enum { SD_FAIL_TIMEOUT, SD_FAIL_ERROR, SD_FAIL_BREAKER };
#define SD_N_REASONS 3
/* --nodes auto: divide local limits by the live nodes counted in Redis. */
#define SD_NODES_AUTO 0

/* sd_decide(): the checks wait on the store. */
#define SD_AGAIN 1

/* TLS to Redis (rediss://): sl_redis_options' tls fields. */
typedef struct sd_redis_tls {
    const char *ca, *cert, *key, *server_name; /* NULL: unset */
    int insecure;
} sd_redis_tls;

typedef struct sd_config {
    size_t store_bytes;        /* memory store cap; 0: the library's default */
    /* The command store's cap (sd_check.command); 0: no such store, and
     * such checks go to the memory store. */
    size_t command_store_bytes;
    const char *redis_url;     /* NULL: the memory store decides */
    sd_redis_tls redis_tls;
    /* redis-sentinel://: the Sentinels' AUTH password, in this file's
     * first line; NULL: none. */
    const char *redis_sentinel_password_file;
    int redis_tag_domain;      /* one Cluster slot per domain */
    uint64_t redis_timeout_ms; /* per call, from sending to the reply */
    int redis_failure;         /* SD_FAIL_LOCAL, _OPEN, _CLOSED */
    int redis_breaker;         /* consecutive failures that open it */
    int nodes;                 /* local policy's divisor, or SD_NODES_AUTO */
    /* The negative cache's budget, shared equally by the threads of
     * index 0 .. threads - 1, those that serve clients (each has its own,
     * negative_cache.c; a control thread has none); 0: no cache. */
    size_t negative_cache_bytes;
    /* The leases' budget (lease.c), shared as the negative cache's;
     * 0: no leases, every check of a `sync: {mode: lease}` rule exact. */
    size_t lease_bytes;
    int threads;
} sd_config;

/* The least budget of one thread's negative cache, and of its leases. */
#define SD_NEGCACHE_MIN_BYTES 1024
#define SD_LEASE_MIN_BYTES 1024

/* A rule's `sync: {mode: lease}` (docs/rules.md): share_ppm 0 for a rule
 * decided exactly. */
typedef struct sd_lease_terms {
    uint32_t share_ppm; /* the most of the limit one lease takes, ppm */
    sl_nanos max;       /* the longest a lease lives */
} sd_lease_terms;

/* Counters of one thread, written by it with relaxed atomics and summed
 * by whoever renders them. */
typedef struct sd_stats {
    atomic_uint_fast64_t failures[SD_N_REASONS];
    atomic_uint_fast64_t fallbacks[SD_N_POLICIES];
    atomic_uint_fast64_t breaker_opened, breaker_closed;
    /* Script calls sent (commands) and the checks they carried: more
     * checks than commands is batching. */
    atomic_uint_fast64_t commands, calls;
    /* The negative cache: checks it answered, live refusals it holds,
     * live ones it dropped for room. */
    atomic_uint_fast64_t negcache_hits, negcache_entries, negcache_evictions;
    /* Leases (lease.c): those taken and their units; checks answered
     * from them; return calls, the units they gave back and those Redis
     * took back (the rest came too late for their window); units that
     * expired unused or found no room to be returned. */
    atomic_uint_fast64_t lease_grants, lease_units_granted, lease_local;
    atomic_uint_fast64_t lease_returns, lease_units_returned,
        lease_units_restored, lease_units_lost;
    atomic_int up; /* this thread's Redis is usable */
} sd_stats;

typedef struct sd_engine sd_engine; /* the process's stores and policy */
typedef struct sd_thread sd_thread; /* one loop thread's side of it */
typedef struct sd_wait sd_wait;     /* checks waiting on Redis */

/* One atomic check of a request: the front end fills the inputs and owns
 * the struct, which must stay where it is, with the items it points to,
 * until the checks are decided (or the wait is cancelled). */
typedef struct sd_check {
    const sl_check_item *items;
    const int64_t *costs;
    size_t n;
    unsigned flags;                 /* 0 or SL_RECORD */
    const sl__rule_failure *failure; /* per item; NULL: all the default */
    /* Per item, its rule's lease terms; NULL: no item leases. */
    const sd_lease_terms *lease;
    /* The limit is one a client's command named (CL.THROTTLE, GCRA), not
     * a rule: on the memory store its state is kept in the command
     * store, under a cap of its own, so that a client making keys by
     * the million evicts only such state, never a rule's counters.  (On
     * Redis it goes to Redis, with its TTL, like every other.) */
    int command;
    sl_decision *each;              /* n results, or NULL */
    /* Results. */
    sl_decision overall;
    int rc; /* 0, or an SL_E* code with err set */
    /* Answered by the node without Redis: a refusal its negative cache
     * held, or an allowance from its leases. */
    int cached;
    char err[160];
} sd_check;

typedef void (*sd_done_fn)(void *owner);

/* The engine: the memory store, the Redis store's parsed options, the
 * policy.  0, or -1 with a message in err. */
int sd_engine_new(const sd_config *cfg, sd_engine **out, char *err,
                  size_t errlen);
void sd_engine_free(sd_engine *e); /* NULL: no-op */
sl_store *sd_engine_memory(const sd_engine *e);
/* The command store, or NULL. */
sl_store *sd_engine_commands(const sd_engine *e);
int sd_engine_uses_redis(const sd_engine *e);
/* The process's clock: the wall time at start plus the monotonic time
 * since (so it never steps back), in ns. */
sl_nanos sd_engine_clock(const sd_engine *e);
/* Sets the clock so that it reads now at this moment and runs on from
 * there: a loaded state file's time base (src/runtime/state_file.c).
 * Before any thread reads the clock. */
void sd_engine_resume(sd_engine *e, sl_nanos now);
/* The local policy's divisor: --nodes N, or the live nodes last counted. */
int sd_engine_nodes(const sd_engine *e);

/* A thread's side, on its loop (it connects to Redis from there); stats
 * is the thread's, index names it in log lines.  NULL when out of
 * memory. */
sd_thread *sd_thread_new(sd_engine *e, uv_loop_t *loop, int index,
                         sd_stats *stats);
/* On stop: Redis connections close once no check waits on them. */
void sd_thread_stop(sd_thread *t);
/* After the loop ended. */
void sd_thread_free(sd_thread *t);

/*
 * Decides checks[0..n) at time now.  Returns 0 when every check is
 * decided (each check's rc says how); or SD_AGAIN with *wait set: done
 * (owner) runs once, from the loop, when they are, unless sd_cancel
 * (*wait) comes first.  A check Redis cannot decide is decided by its
 * items' failure policy when the wait ends.
 */
int sd_decide(sd_thread *t, sd_check *checks, size_t n, sl_nanos now,
              sd_done_fn done, void *owner, sd_wait **wait);
/* The numbers of some limit changed (a rules set adopted: a reload, an
 * override, the controller): what the thread remembers of Redis's
 * refusals is forgotten, and replies to calls asked before are not
 * remembered.  t NULL: no-op. */
void sd_limits_changed(sd_thread *t);
/* The front end no longer wants the answer (its client went away). */
void sd_cancel(sd_wait *wait);
/* Sends what this loop iteration's requests asked now, rather than when
 * the loop next polls; from outside any request (it may end waits).
 * NULL: a server without the decision layer (http/service.c), a no-op. */
void sd_flush(sd_thread *t);

/* A command of a front end's own (not a decision) on the engine's Redis,
 * sent on the thread's connection to the server of key's slot: 0 with
 * cb(reply, priv) called once later, from the loop (reply NULL when the
 * connection failed first; an error reply is a reply); or -1, cb never
 * called, when Redis is not usable now (the memory store, or down).  No
 * timeout of its own: a caller that cannot wait sets its own. */
struct redisReply;
typedef void (*sd_reply_fn)(const struct redisReply *reply, void *priv);
int sd_redis_command(sd_thread *t, const char *key, int argc,
                     const char **argv, const size_t *lens, sd_reply_fn cb,
                     void *priv);

/* The metric label of a failure reason (SD_FAIL_TIMEOUT...). */
const char *sd_reason_name(int reason);

#endif
