/*
 * layer.h - what the files of the decision layer share; front ends see
 * only decision.h.  The layer's files call down this list, never up:
 *
 *   engine.c        sd_decide: the memory store at once, Redis by waits
 *   negative_cache.c what Redis refused, answered by the thread until then
 *   lease.c         units Redis counted for the thread, allowed by it
 *   lease_return.c  their sweep, and their unused units given back
 *   policy.c        a check Redis could not decide, by its failure policy
 *   local.c         the local policy's limits, divided among the nodes
 *   nodes.c         --nodes auto: the live nodes, counted in Redis
 *   redis_async.c   the thread's Redis: its connection, probe and breaker
 *   redis_async_send.c      its calls sent, batched, redirected; replies
 *   redis_async_deadline.c  its waits' deadlines and automatic timeout
 *   wait.c          waits, their checks' calls and parts, the deadlines
 *   breaker.c       when to stop trying Redis and when to try again
 *   batch.c         parts held while a script call is out, sent as one
 *   cluster_links.c a thread's links to a Redis Cluster's masters
 *   sentinel.c      where a redis-sentinel:// store's master is
 *   link.c          one hiredis connection on a libuv loop
 *   link_tls.c      the same over TLS
 */
#ifndef SD_LAYER_H
#define SD_LAYER_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "decision/decision.h"
#include "decision/lease.h"
#include "decision/negative_cache.h"
#include "redis/redis_proto.h"
#include "store/redis_store.h"

struct sd_engine {
    sd_config cfg;
    sl_store *memory; /* the store, or Redis's local fallback */
    sl_store *commands; /* sd_check.command's state on the memory store */
    sl_store *redis;  /* parsed only, never connects; or NULL */
    /* redis's key space, fetched once: every call is built with it. */
    sl__redis_keyspace redis_keyspace;
    sl_nanos wall_offset;  /* realtime - uv_hrtime, as the server's clock */
    atomic_int nodes_live; /* --nodes auto: the last count, at least 1 */
    char node_id[128];
};

/* sd_engine_clock(), for the layer's own files: the process's clock. */
static inline sl_nanos sd__clock(const sd_engine *e)
{
    return e->wall_offset + (sl_nanos)uv_hrtime();
}

typedef struct sd_redis sd_redis;
typedef struct sd_local sd_local;

struct sd_thread {
    sd_engine *e;
    uv_loop_t *loop;
    int index;
    sd_stats *stats;
    sd_redis *redis; /* NULL: the memory store decides */
    sd_local *local; /* the local policy's divided limits */
    sd_negcache *negcache; /* NULL: none (the flag 0, or the memory store) */
    sd_leases *leases;     /* NULL: none (likewise) */
    uv_timer_t sweep;      /* the leases' (lease_return.c) */
    int sweeping;
    /* Bumped when some limit's numbers change: a reply to a call asked
     * under other numbers teaches the negative cache nothing. */
    uint64_t limits_gen;
    uv_timer_t beat; /* --nodes auto, thread 0: the heartbeat */
    int beating;
    uint64_t fewer_since; /* loop ms a lower count was first seen; 0: none */
};

static inline void sd_count(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- wait.c ---- */

typedef struct sd_call sd_call;

/* One part of a call: a script call to one server (one slot on a
 * cluster), and what a hiredis callback is given. */
typedef struct sd_part {
    sd_call *c;
    size_t index;
    int hops;           /* redirections followed */
    int asking;         /* last sent after an ASK: a resend needs ASKING too */
    int tries;          /* TRYAGAIN answers: the next resend waits 2^tries ms */
    uint64_t resend_at; /* loop ms, while held after a TRYAGAIN */
    uint64_t sent_ms;   /* loop ms it was last written: its round trip */
} sd_part;

/* A check as sent to Redis. */
struct sd_call {
    sd_wait *wait;
    sd_check *check;      /* the front end's; NULL once it cancelled */
    sl__redis_call *call; /* the script call */
    sd_part *parts;
    size_t n_parts, parts_left;
    int sent, done;
    int failed; /* no result: decided by the policy, for `reason` */
    int reason;
    int rc; /* 0 or SL_E* (message in check->err), when done and not failed */
    sl_decision overall;
    sl_decision *each;      /* check->n */
    sd_lease_backs *backs; /* its asks, should their grants not be learnt */
};

struct sd_wait {
    sd_thread *t;
    void *owner; /* NULL once cancelled */
    sd_done_fn done;
    void (*round_done)(sd_wait *w); /* engine.c's, when every call is done */
    sd_call *calls;
    size_t n_calls;
    size_t awaiting;   /* calls still without a result */
    int refs;          /* the owner, plus one per hiredis callback to come */
    uint64_t deadline; /* loop ms */
    uint64_t sent_ms;  /* loop ms, when sent */
    sl_nanos asked_at; /* the engine's clock when decided: before Redis ran */
    uint64_t limits_gen; /* the thread's, then */
    sd_wait *prev, *next;
    int queued;
};

/* The deadline queue of a thread's waits, oldest first. */
typedef struct sd_wait_queue {
    sd_wait *head, *tail;
} sd_wait_queue;

/* A wait of n calls, one per check, each built (sl__redis_call_new
 * with ks and sha): 0 and *out, or SL_ENOMEM.  A check whose call cannot
 * be built is done at once, its rc and err its answer; one the negative
 * cache answered (cached) is done and never sent. */
int sd_wait_new(sd_thread *t, sd_check *checks, size_t n, sl_nanos now,
                const sl__redis_keyspace *ks, const char *sha, sd_wait **out);
void sd_wait_unref(sd_wait *w);
void sd_call_fail(sd_call *c, int reason);
/* What c's parts read so far were granted, to the returns: the grants a
 * call whose result is not learnt (it failed, or its check was
 * cancelled) would otherwise lose. */
void sd_call_give_back(sd_call *c);
/* Inserts w due at deadline, in deadline order (from the tail: waits are
 * mostly sent in order, and an automatic timeout changes slowly). */
void sd_wait_enqueue(sd_wait_queue *q, sd_wait *w, uint64_t deadline);
void sd_wait_dequeue(sd_wait_queue *q, sd_wait *w);

/* ---- breaker.c: pure; the connection's state for redis_async.c ---- */

enum { SD_DOWN, SD_CONNECTING, SD_UP, SD_STOPPED };

typedef struct sd_breaker {
    int state;
    int failures;        /* consecutive, while UP */
    int threshold;       /* --redis-breaker */
    uint64_t backoff_ms; /* before the next probe */
} sd_breaker;

#define SD_BACKOFF_MIN_MS 50
#define SD_BACKOFF_MAX_MS 2000

void sd_breaker_init(sd_breaker *b, int threshold);
/* A command's outcome while UP: returns 1 when the breaker must open. */
int sd_breaker_failure(sd_breaker *b);
void sd_breaker_success(sd_breaker *b);
/* Opened: returns the wait before the next probe, and doubles the next
 * one up to SD_BACKOFF_MAX_MS. */
uint64_t sd_breaker_open(sd_breaker *b);
void sd_breaker_probing(sd_breaker *b);
void sd_breaker_close(sd_breaker *b); /* the probe succeeded */

/* ---- batch.c: pure; parts held while a script call is out ---- */

/* Script calls out on the one connection before new parts are held, to
 * go together as one batch when a reply comes.  One: a part goes at once
 * on an idle connection (no added wait at light load); under load the
 * batches are larger than with two out, which is what counts when Redis
 * is the bottleneck (docs/stores.md, "Batches"). */
#define SD_MAX_IN_FLIGHT 1
/* Parts in one batch: bounds how long one script run holds Redis. */
#define SD_MAX_BATCH 64

typedef struct sd_held {
    sd_part **parts;
    size_t n, cap;
} sd_held;

/* 0, or -1 out of memory. */
int sd_held_push(sd_held *h, sd_part *p);
/* Takes up to SD_MAX_BATCH parts, oldest first, into out; parts whose
 * call no longer needs sending (done, or its wait cancelled) are handed
 * to drop(part) instead.  Returns how many are in out. */
size_t sd_held_take(sd_held *h, sd_part **out, void (*drop)(sd_part *));
void sd_held_release(sd_held *h);

/* ---- link.c: one hiredis connection on a libuv loop ---- */

/* Attached with the poll hooks that restart the poll handle only on a
 * change of interest, or with tls (NULL: plain) to host by link_tls.c:
 * 0, or -1. */
int sd_link_attach(redisAsyncContext *ac, uv_loop_t *loop,
                   const sl__tls_client *tls, const char *host);
/* Writes the commands the connection holds now, not at the next poll. */
void sd_link_write_now(redisAsyncContext *ac);

/* hiredis's event hooks, whose argument is a link. */
typedef struct sd_link_hooks {
    void (*add_read)(void *), (*del_read)(void *);
    void (*add_write)(void *), (*del_write)(void *);
    void (*cleanup)(void *);
} sd_link_hooks;

/* ac's socket polled by poll on loop, and h installed as ac's hooks
 * with link their argument (and poll's data): 0, or -1.  Both links'
 * (link.c, link_tls.c). */
static inline int sd_link_hook(redisAsyncContext *ac, uv_loop_t *loop,
                               uv_poll_t *poll, void *link,
                               const sd_link_hooks *h)
{
    if (uv_poll_init(loop, poll, ac->c.fd) != 0)
        return -1;
    poll->data = link;
    ac->ev.data = link;
    ac->ev.addRead = h->add_read;
    ac->ev.delRead = h->del_read;
    ac->ev.addWrite = h->add_write;
    ac->ev.delWrite = h->del_write;
    ac->ev.cleanup = h->cleanup;
    return 0;
}

/* ---- link_tls.c: the same over TLS ---- */

int sd_link_tls_attach(redisAsyncContext *ac, uv_loop_t *loop,
                       const sl__tls_client *tls, const char *host);
void sd_link_tls_write_now(redisAsyncContext *ac);

/* ---- sentinel.c: where a redis-sentinel:// store's master is ---- */

typedef struct sd_sentinel sd_sentinel;

/* The answer: host and port of the master and which Sentinel said so,
 * or host NULL and why. */
typedef void (*sd_sentinel_done)(void *priv, const char *host, int port,
                                  size_t which, const char *why);

/* Asks ep's Sentinels in turn from the first-th, on loop, and calls done
 * once.  The question in flight, or NULL when done was called already
 * (every Sentinel refused at once, or out of memory). */
sd_sentinel *sd_sentinel_ask(uv_loop_t *loop, const sl__redis_endpoint *ep,
                             size_t first, sd_sentinel_done done, void *priv);
/* Drops the question in flight: done is not called. */
void sd_sentinel_cancel(sd_sentinel *q);

/* ---- cluster_links.c ---- */

typedef struct sd_cluster sd_cluster;

/* timeout_ms: how long a link may take to connect (--redis-timeout). */
sd_cluster *sd_cluster_new(uv_loop_t *loop, const sl__redis_endpoint *ep,
                           uint64_t timeout_ms);
void sd_cluster_free(sd_cluster *cl); /* NULL: no-op */
/* The link to the master of slot by the map (a refresh if unknown). */
redisAsyncContext *sd_cluster_link(sd_cluster *cl, int slot);
/* The link to (host, port), made if new. */
redisAsyncContext *sd_cluster_link_to(sd_cluster *cl, const char *host,
                                      int port);
int sd_cluster_owns(sd_cluster *cl, const redisAsyncContext *ac);
/* The host of a link ("" if not one), for a redirection without one. */
const char *sd_cluster_host_of(sd_cluster *cl, const redisAsyncContext *ac);
/* A CLUSTER SLOTS reply from host becomes the map: 0 or -1. */
int sd_cluster_set_map(sd_cluster *cl, const redisReply *reply,
                       const char *host);
void sd_cluster_refresh(sd_cluster *cl); /* asynchronous */
/* Where the breaker's next probe connects (seeds and known masters in
 * turn); borrowed. */
const char *sd_cluster_probe_target(sd_cluster *cl, int *port);
/* What was sent on a link, and each answer (or NULL reply) it got: a link
 * owing answers for a whole timeout is taken for dead. */
void sd_cluster_sent(sd_cluster *cl, const redisAsyncContext *ac);
void sd_cluster_replied(sd_cluster *cl, const redisAsyncContext *ac);
/* After calls timed out: drops the links that owe answers for a whole
 * timeout, reads the map again. */
void sd_cluster_timed_out(sd_cluster *cl);
/* Drops every link: their calls in flight get no reply. */
void sd_cluster_close(sd_cluster *cl);
void sd_cluster_write_now(sd_cluster *cl);

/* ---- redis_async.c, redis_async_send.c, redis_async_deadline.c ---- */

/* The thread's Redis, connecting from its loop: 0, or -1. */
int sd_redis_start(sd_thread *t);
/* How calls name the script (a ref, src/redis/redis_proto.h) once the
 * probe loaded it: the library's function, or the script's SHA1. */
const char *sd_redis_script_ref(const sd_thread *t);
int sd_redis_up(const sd_thread *t);
/* Sends every call of w not yet done (its deadline starts now);
 * w->round_done(w) runs once when each has a reply or failed, from a
 * callback or the timer, never from here. */
void sd_redis_send(sd_thread *t, sd_wait *w);
/* The wait's owner went away: it leaves the deadline queue. */
void sd_redis_forget(sd_thread *t, sd_wait *w);
void sd_redis_flush(sd_thread *t);
void sd_redis_stop(sd_thread *t);
/* The connection for commands beside the decisions (nodes.c): to key's
 * master on a cluster; NULL while Redis is not usable. */
redisAsyncContext *sd_redis_context(sd_thread *t, const char *key);

/* ---- policy.c, local.c ---- */

/* What Redis counted of check's local-policy items (each: its per-item
 * results; all of them with SL_RECORD) is recorded on the local limits,
 * SL_RECORD: no decision. */
void sd_policy_record(sd_thread *t, const sd_check *check,
                      const sl_decision *each, sl_nanos now);
/* Decides check as Redis could not, for reason, into its results. */
void sd_policy_decide(sd_thread *t, sd_check *check, sl_nanos now, int reason);
/* The items on the memory store with their limits divided by the nodes:
 * as sl_check_costs(), with a message in err on error. */
int sd_local_check(sd_thread *t, const sl_check_item *items,
                   const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                   sl_decision *each, sl_decision *overall, char *err,
                   size_t errlen);
void sd_local_release(sd_thread *t);

/* ---- lease_return.c ---- */

/* The thread's sweep of its leases, started when it has a table; stopped
 * with every lease given back. */
void sd_leases_start(sd_thread *t);
void sd_leases_stop(sd_thread *t);
/* Sends the returns the table holds (the units of those that cannot be
 * sent are counted lost). */
void sd_leases_send(sd_thread *t);

/* ---- nodes.c ---- */

void sd_nodes_start(sd_thread *t); /* thread 0, --nodes auto */
void sd_nodes_stop(sd_thread *t);

#endif
