/*
 * engine.c - the decision layer's entry: the engine (the process's
 * stores), a thread's side of it, and sd_decide().
 *
 * On the memory store a request's checks are decided at once, each by
 * sl_check_costs().  On Redis they become a wait (wait.c) sent by the
 * thread's connection (redis_async.c); when every call has its reply or
 * has failed, finish() writes each check's result (from Redis, or from
 * the failure policy, policy.c) and calls the front end back.  A check
 * that Redis has refused until later (negative_cache.c) is answered at
 * once and never sent; Redis's refusals teach the cache in finish().
 * So is a check its thread's leases cover (lease.c): the units Redis
 * granted with earlier replies, learnt in finish() too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"
#include "log/log.h"
#include "log/secret.h"

/* Two mistakes would have every call decided by the failure policy,
 * silently: a redis:// URL naming a Redis Cluster node (every call
 * answered MOVED) and, with TLS, a server certificate the CA or the name
 * refuses, or a client certificate the server refuses (a Cluster's seeds
 * are asked only then).  One connection at start finds them (INFO cluster; the
 * handshake) and refuses to start, with "use redis-cluster://" or what
 * was wrong with the certificate.  1 when refused (the message in err).
 * A server that cannot be reached now is not refused: Redis down at
 * start is an outage like any other, and the threads' probes ask again. */
static int refuse_at_start(const sl_redis_options *ro, char *err,
                           size_t errlen)
{
    sl_redis_options probe = *ro;
    sl_store *st = NULL;
    probe.lazy_connect = 0;
    probe.timeout_ms = 1000;
    int rc = sl_redis_store_new(&probe, &st, err, errlen);
    sl_store_free(st);
    if (rc != SL_EINVAL) {
        err[0] = '\0';
        return 0;
    }
    return 1;
}


int sd_engine_new(const sd_config *cfg, sd_engine **out, char *err,
                  size_t errlen)
{
    sd_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->cfg = *cfg;
    atomic_init(&e->nodes_live, 1);
    e->wall_offset = sl_clock_realtime() - (sl_nanos)uv_hrtime();
    sl_memory_options mo = {.size = sizeof(sl_memory_options),
                            .max_bytes = cfg->store_bytes};
    sl_memory_options co = {.size = sizeof(sl_memory_options),
                            .max_bytes = cfg->command_store_bytes};
    if ((e->memory = sl_memory_store_new(&mo)) == NULL ||
        (cfg->command_store_bytes > 0 &&
         (e->commands = sl_memory_store_new(&co)) == NULL)) {
        snprintf(err, errlen, "out of memory");
        sd_engine_free(e);
        return -1;
    }
    if (cfg->redis_url != NULL) {
        /* Only parsed here: the threads connect, asynchronously, and a
         * Redis that is down at start is a store failure like any other.
         * Decisions use Redis's clock (docs/stores.md, "Whose clock"). */
        char sentinel_password[512];
        if (cfg->redis_sentinel_password_file != NULL &&
            sl__secret_read(cfg->redis_sentinel_password_file,
                            "--redis-sentinel-password-file",
                            sentinel_password, sizeof(sentinel_password), err,
                            errlen) < 0) {
            sd_engine_free(e);
            return -1;
        }
        sl_redis_options ro = {.size = sizeof(sl_redis_options),
                               .url = cfg->redis_url,
                               .use_server_time = 1,
                               .lazy_connect = 1,
                               .tls_ca_file = cfg->redis_tls.ca,
                               .tls_cert_file = cfg->redis_tls.cert,
                               .tls_key_file = cfg->redis_tls.key,
                               .tls_server_name = cfg->redis_tls.server_name,
                               .tls_insecure = cfg->redis_tls.insecure,
                               .sentinel_password =
                                   cfg->redis_sentinel_password_file
                                       ? sentinel_password
                                       : NULL};
        /* A counter key is "len:domain" then ",len:key=len:value" per
         * entry (sl_rules_match): up to the first ',' is the domain. */
        if (cfg->redis_tag_domain)
            ro.tag_delimiter = ',';
        if (sl_redis_store_new(&ro, &e->redis, err, errlen) != 0) {
            sd_engine_free(e);
            return -1;
        }
        sl__redis_store_keyspace(e->redis, &e->redis_keyspace);
        sl__redis_endpoint ep;
        sl__redis_store_endpoint(e->redis, &ep);
        if ((!e->redis_keyspace.cluster || ep.tls != NULL) &&
            refuse_at_start(&ro, err, errlen)) {
            sd_engine_free(e);
            return -1;
        }
        if (cfg->redis_tls.insecure)
            sl__log(SL__LOG_WARN, NULL,
                    "--redis-tls-insecure: the Redis servers' certificates "
                    "are NOT verified: anyone on the path can read and "
                    "change every decision");
    }
    *out = e;
    return 0;
}

void sd_engine_free(sd_engine *e)
{
    if (e == NULL)
        return;
    sl_store_free(e->memory);
    sl_store_free(e->commands);
    sl_store_free(e->redis);
    free(e);
}

sl_store *sd_engine_memory(const sd_engine *e)
{
    return e->memory;
}

sl_store *sd_engine_commands(const sd_engine *e)
{
    return e->commands;
}

sl_nanos sd_engine_clock(const sd_engine *e)
{
    return sd__clock(e);
}

void sd_engine_resume(sd_engine *e, sl_nanos now)
{
    e->wall_offset = now - (sl_nanos)uv_hrtime();
}

int sd_engine_uses_redis(const sd_engine *e)
{
    return e->redis != NULL;
}

sd_thread *sd_thread_new(sd_engine *e, uv_loop_t *loop, int index,
                         sd_stats *stats)
{
    sd_thread *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->e = e;
    t->loop = loop;
    t->index = index;
    t->stats = stats;
    if (e->redis != NULL) {
        int serving = index < e->cfg.threads;
        size_t nc_bytes =
            serving ? e->cfg.negative_cache_bytes / (size_t)e->cfg.threads : 0;
        size_t lease_bytes =
            serving ? e->cfg.lease_bytes / (size_t)e->cfg.threads : 0;
        if ((nc_bytes > 0 &&
             (t->negcache = sd_negcache_new(nc_bytes, stats)) == NULL) ||
            (lease_bytes > 0 &&
             (t->leases = sd_leases_new(lease_bytes, stats)) == NULL) ||
            sd_redis_start(t) != 0) {
            sd_negcache_free(t->negcache);
            sd_leases_free(t->leases);
            free(t);
            return NULL;
        }
        sd_nodes_start(t);
        sd_leases_start(t);
    }
    return t;
}

void sd_thread_stop(sd_thread *t)
{
    if (t == NULL)
        return;
    sd_nodes_stop(t);
    sd_leases_stop(t);
    if (t->redis != NULL)
        sd_redis_stop(t);
}

void sd_thread_free(sd_thread *t)
{
    if (t == NULL)
        return;
    sd_local_release(t);
    sd_negcache_free(t->negcache);
    sd_leases_free(t->leases);
    free(t);
}

/* Each check's result as its call came to: from Redis, its error, or the
 * failure policy's decision at the time the round ended. */
static void finish(sd_wait *w)
{
    sd_thread *t = w->t;
    sl_nanos now = sd_engine_clock(t->e);
    for (size_t i = 0; i < w->n_calls; i++) {
        sd_call *c = &w->calls[i];
        sd_check *k = c->check;
        if (k->cached)
            continue;
        if (c->failed || c->rc != 0)
            sd_call_give_back(c); /* what parts that answered were granted */
        if (c->failed) {
            sd_policy_decide(t, k, now, c->reason);
        } else if (c->rc != 0) {
            k->rc = c->rc;
            if (k->err[0] == '\0')
                snprintf(k->err, sizeof(k->err), "store: %s",
                         sl_strerror(c->rc));
        } else {
            k->overall = c->overall;
            for (size_t j = 0; k->each != NULL && j < k->n; j++)
                k->each[j] = c->each[j];
            /* One part is all or nothing; of several, each part is
             * (an item of a refused part may be recorded: towards
             * limiting). */
            if (c->overall.allowed || c->n_parts > 1 || (k->flags & SL_RECORD))
                sd_policy_record(t, k, c->each, now);
            if (!c->overall.allowed && w->limits_gen == t->limits_gen)
                sd_negcache_learn(t->negcache, k, c->each, w->asked_at);
            if (t->leases != NULL && k->n <= SL_MAX_ITEMS) {
                /* Granted under other numbers: given back, never used. */
                sl__redis_grant grants[SL_MAX_ITEMS];
                sl__redis_call_take_grants(c->call, grants);
                sd_leases_learn(t->leases, k, c->each, grants, w->asked_at,
                                w->limits_gen != t->limits_gen);
            }
        }
    }
    w->done(w->owner);
}

int sd_decide(sd_thread *t, sd_check *checks, size_t n, sl_nanos now,
              sd_done_fn done, void *owner, sd_wait **wait)
{
    if (t->redis == NULL) {
        for (size_t i = 0; i < n; i++) {
            sd_check *k = &checks[i];
            sl_store *store = k->command && t->e->commands != NULL
                                  ? t->e->commands
                                  : t->e->memory;
            k->cached = 0;
            k->rc = sl_check_costs(store, k->items, k->costs, k->n, now,
                                   k->flags, k->each, &k->overall);
            if (k->rc != 0)
                snprintf(k->err, sizeof(k->err), "store: %s",
                         sl_strerror(k->rc));
        }
        return 0;
    }
    size_t answered = 0;
    for (size_t i = 0; i < n; i++) {
        checks[i].rc = 0;
        checks[i].cached = 0;
        checks[i].err[0] = '\0';
        /* A lease is Redis's grant, counted in its window: used even
         * with the breaker open (docs/stores.md, "Leases"). */
        answered += (size_t)sd_leases_answer(t->leases, &checks[i], now);
    }
    if (answered == n)
        return 0;
    if (!sd_redis_up(t)) {
        /* The breaker is open: no I/O, the policy decides now (the
         * negative cache too is left out: with Redis down the policy
         * speaks, as it did before there was a cache). */
        for (size_t i = 0; i < n; i++) {
            if (checks[i].cached)
                continue;
            sd_count(&t->stats->failures[SD_FAIL_BREAKER], 1);
            sd_policy_decide(t, &checks[i], now, SD_FAIL_BREAKER);
        }
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!checks[i].cached)
            answered +=
                (size_t)sd_negcache_answer(t->negcache, &checks[i], now);
    if (answered == n)
        return 0;
    sd_wait *w;
    int rc = sd_wait_new(t, checks, n, now, &t->e->redis_keyspace,
                         sd_redis_script_ref(t), &w);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) {
            checks[i].rc = rc;
            snprintf(checks[i].err, sizeof(checks[i].err), "out of memory");
        }
        return 0;
    }
    w->owner = owner;
    w->done = done;
    w->round_done = finish;
    sd_redis_send(t, w);
    *wait = w;
    return SD_AGAIN;
}

void sd_limits_changed(sd_thread *t)
{
    if (t == NULL)
        return;
    t->limits_gen++;
    sd_negcache_clear(t->negcache);
    /* Old leases are never used under new numbers: given back now. */
    if (t->leases != NULL) {
        sd_leases_clear(t->leases);
        sd_leases_send(t);
    }
}

void sd_cancel(sd_wait *w)
{
    if (w == NULL)
        return;
    w->owner = NULL;
    sd_redis_forget(w->t, w); /* callbacks still to come keep w */
    sd_wait_unref(w);
}

void sd_flush(sd_thread *t)
{
    if (t != NULL && t->redis != NULL)
        sd_redis_flush(t);
}
