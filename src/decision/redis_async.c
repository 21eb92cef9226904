/*
 * redis_async.c - a thread's Redis: decisions wait on it asynchronously,
 * on the thread's own libuv loop, and a Redis that is slow or gone costs
 * a bounded wait and then nothing.
 *
 * Each thread keeps ONE hiredis async connection (with a Cluster, one per
 * master, cluster_links.c); every call of the thread is an FCALL (an
 * EVALSHA on a server without Redis Functions) pipelined on it, or, while
 * a script call is out, held and sent with the others as one batch
 * (redis_async_send.c, batch.c).  A call that gets no good reply within
 * --redis-timeout of being sent fails ("timeout"; a lost connection or an
 * error reply is "error") and engine.c has the policy decide it
 * (redis_async_deadline.c).  This file keeps the connection and its
 * breaker (breaker.c), which is the connection itself: opened, the
 * connection is dropped and every check goes to the policy with no I/O;
 * after a backoff a new connection's AUTH, SELECT, SCRIPT LOAD and
 * FUNCTION LOAD (and CLUSTER SLOTS on a Cluster seed, whose connection is
 * then closed; before a Sentinel's master, the Sentinels' answer, and
 * ROLE after) are the half-open probe.  It also stops the thread's Redis
 * and carries the front ends' own commands.  The connection's life is
 * apart from the calls on it: it is set up, lost and retried a few times
 * a run, while the calls go thousands of times a second.  What the three
 * files share is in redis_state.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/redis_state.h"
#include "log/log.h"

#define PROBE_MIN_MS 200

static void set_up(sd_redis *r, int up)
{
    atomic_store_explicit(&r->t->stats->up, up, memory_order_relaxed);
}

/* ---- the connection and its breaker ---- */

static void retry_cb(uv_timer_t *t);
static void teardown(sd_redis *r);

/* Opens the breaker: drops the connection (hiredis fails every call in
 * flight on it) and schedules the next attempt. */
static void go_down(sd_redis *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    int was = r->br.state;
    uint64_t wait = sd_breaker_open(&r->br);
    r->ac = NULL;
    set_up(r, 0);
    if (r->cluster != NULL)
        sd_cluster_close(r->cluster);
    if (r->sentinel != NULL) { /* the probe timed out asking */
        sd_sentinel_cancel(r->sentinel);
        r->sentinel = NULL;
        r->sentinel_first++;
    }
    if (was == SD_UP) {
        sd_count(&r->t->stats->breaker_opened, 1);
        sl__log(SL__LOG_WARN, NULL,
                "thread %d: redis down (%s): breaker open, retry in %llu ms",
                r->t->index, why, (unsigned long long)wait);
    }
    if (ac != NULL)
        redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
    r->in_flight = 0;
    sd__redis_fail_held(r);
    sd__redis_fail_later(r);
    if (r->stopping) {
        sd__redis_maybe_teardown(r);
        return;
    }
    uv_timer_start(&r->retry, retry_cb, wait, 0);
}

/* Each probe reply's priv: its command's kind (SL__REDIS_CMD_*). */
static const int probe_kinds[] = {
    SL__REDIS_CMD_AUTH,         SL__REDIS_CMD_SELECT,
    SL__REDIS_CMD_SCRIPT_LOAD,  SL__REDIS_CMD_CLUSTER_SLOTS,
    SL__REDIS_CMD_INFO_CLUSTER, SL__REDIS_CMD_FUNCTION_LOAD,
    SL__REDIS_CMD_ROLE};

static void setup_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_redis *r = ac->data;
    const redisReply *rep = reply;
    int kind = *(const int *)priv, rc;
    char err[256];
    if (r == NULL || ac != r->ac || r->br.state != SD_CONNECTING)
        return;
    if (rep == NULL && ac->err) { /* the connection, not the reply */
        sl__log(SL__LOG_ERROR, NULL, "thread %d: redis: %s", r->t->index,
                ac->errstr);
        go_down(r, "setup failed");
        return;
    }
    rc = sl__redis_handshake_check(kind, rep, r->sha, err, sizeof(err));
    if (kind == SL__REDIS_CMD_FUNCTION_LOAD && rc >= 0) {
        if (rc == 1) /* a server without Functions: EVALSHA */
            sl__log(SL__LOG_INFO, NULL, "thread %d: %s: calls are EVALSHA",
                    r->t->index, err);
        r->fcall = rc == 0;
        rc = 0;
    }
    if (rc != 0) {
        sl__log(SL__LOG_ERROR, NULL, "thread %d: %s", r->t->index, err);
        go_down(r, "setup refused");
        return;
    }
    if (kind != (r->cluster     ? SL__REDIS_CMD_CLUSTER_SLOTS
                 : r->master[0] ? SL__REDIS_CMD_ROLE
                                : SL__REDIS_CMD_FUNCTION_LOAD))
        return; /* not the last of the probe */
    if (r->cluster != NULL) {
        if (sd_cluster_set_map(r->cluster, rep, ac->c.tcp.host) != 0) {
            go_down(r, "unexpected CLUSTER SLOTS reply");
            return;
        }
        /* Calls go on the links; hiredis frees this after the callback. */
        r->ac = NULL;
        redisAsyncFree(ac);
    }
    uv_timer_stop(&r->retry);
    sd_breaker_close(&r->br);
    r->last_reply_ms = uv_now(r->t->loop);
    set_up(r, 1);
    sd_count(&r->t->stats->breaker_closed, 1);
    sl__log(SL__LOG_INFO, NULL, "thread %d: redis up: breaker closed",
            r->t->index);
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    sd_redis *r = ac->data;
    if (status == REDIS_OK || r == NULL || ac != r->ac)
        return;
    /* hiredis frees the context after this callback. */
    r->ac = NULL;
    go_down(r, ac->errstr[0] ? ac->errstr : "cannot connect");
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    sd_redis *r = ac->data;
    (void)status;
    if (r == NULL || ac != r->ac)
        return;
    r->ac = NULL; /* being freed by hiredis */
    go_down(r, "connection lost");
}

/* The connection to (host, port) and the probe pipelined behind it. */
static void connect_to(sd_redis *r, const char *host, int port)
{
    sl__redis_endpoint ep;
    sl__redis_handshake hs;
    sl__redis_store_endpoint(r->t->e->redis, &ep);
    redisAsyncContext *ac = ep.unix_path ? redisAsyncConnectUnix(ep.unix_path)
                                         : redisAsyncConnect(host, port);
    if (ac == NULL || ac->err) {
        if (ac != NULL)
            redisAsyncFree(ac);
        go_down(r, "cannot connect");
        return;
    }
    ac->data = r;
    if (sd_link_attach(ac, r->t->loop, ep.tls, host) != 0) {
        redisAsyncFree(ac);
        go_down(r, "out of memory");
        return;
    }
    redisAsyncSetConnectCallback(ac, connect_cb);
    redisAsyncSetDisconnectCallback(ac, disconnect_cb);
    r->ac = ac;
    r->in_flight = 0;
    /* The probe, pipelined behind the connect. */
    sl__redis_handshake_init(
        &hs, &ep,
        SL__REDIS_WITH_SCRIPT_LOAD | SL__REDIS_WITH_FUNCTION_LOAD |
            (r->cluster ? SL__REDIS_WITH_CLUSTER_SLOTS
                        : SL__REDIS_WITH_CLUSTER_CHECK) |
            (ep.n_sentinels > 0 ? SL__REDIS_WITH_ROLE_CHECK : 0));
    for (size_t i = 0; i < hs.n; i++)
        redisAsyncCommandArgv(ac, setup_reply_cb,
                              (void *)&probe_kinds[hs.cmd[i].kind],
                              hs.cmd[i].argc, hs.cmd[i].argv, hs.cmd[i].lens);
}

/* The Sentinels' answer: connect to the master they name. */
static void sentinel_cb(void *priv, const char *host, int port, size_t which,
                        const char *why)
{
    sd_redis *r = priv;
    r->sentinel = NULL;
    if (host == NULL) {
        sl__log(SL__LOG_ERROR, NULL, "thread %d: redis: %s", r->t->index,
                why);
        r->sentinel_first++;
        go_down(r, "no Sentinel named the master");
        return;
    }
    r->sentinel_first = which;
    snprintf(r->master, sizeof(r->master), "%s", host);
    connect_to(r, r->master, port);
}

static void start_connect(sd_redis *r)
{
    sl__redis_endpoint ep;
    sd_engine *e = r->t->e;
    sl__redis_store_endpoint(e->redis, &ep);
    sd_breaker_probing(&r->br);
    uint64_t probe = e->cfg.redis_timeout_ms;
    uv_timer_start(&r->retry, retry_cb,
                   probe < PROBE_MIN_MS ? PROBE_MIN_MS : probe, 0);
    if (ep.n_sentinels > 0) {
        r->sentinel = sd_sentinel_ask(r->t->loop, &ep, r->sentinel_first,
                                      sentinel_cb, r);
        return;
    }
    if (r->cluster != NULL) /* a node of the map, or a seed */
        ep.host = sd_cluster_probe_target(r->cluster, &ep.port);
    connect_to(r, ep.host, ep.port);
}

static void retry_cb(uv_timer_t *t)
{
    sd_redis *r = t->data;
    if (r->br.state == SD_CONNECTING)
        go_down(r, "probe timed out");
    else if (r->br.state == SD_DOWN && !r->stopping)
        start_connect(r);
}

/* ---- the thread's side ---- */

int sd_redis_start(sd_thread *t)
{
    sd_redis *r = calloc(1, sizeof(*r));
    sl__redis_endpoint ep;
    if (r == NULL)
        return -1;
    sl__redis_store_endpoint(t->e->redis, &ep);
    if (ep.n_seeds > 0 &&
        (r->cluster = sd_cluster_new(t->loop, &ep,
                                     t->e->cfg.redis_timeout_ms
                                         ? t->e->cfg.redis_timeout_ms
                                         : AUTO_FLOOR_MS)) == NULL) {
        free(r);
        return -1;
    }
    r->t = t;
    r->fail_conn = go_down;
    r->free_conn = teardown;
    sd_breaker_init(&r->br, t->e->cfg.redis_breaker);
    uv_timer_init(t->loop, &r->retry);
    uv_timer_init(t->loop, &r->timeout);
    uv_timer_init(t->loop, &r->later_timer);
    r->retry.data = r->timeout.data = r->later_timer.data = r;
    r->handles = 3;
    t->redis = r;
    start_connect(r);
    return 0;
}

int sd_redis_up(const sd_thread *t)
{
    return t->redis->br.state == SD_UP;
}

static void handle_closed_cb(uv_handle_t *h)
{
    sd_redis *r = h->data;
    if (--r->handles == 0) {
        r->t->redis = NULL;
        free(r->cmd);
        sd_held_release(&r->held);
        sd_held_release(&r->later);
        free(r);
    }
}

/* Frees the connection and closes the timers; r is freed when they are. */
static void teardown(sd_redis *r)
{
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    r->br.state = SD_STOPPED;
    set_up(r, 0);
    sd__redis_fail_held(r);
    sd__redis_fail_later(r);
    if (ac != NULL)
        redisAsyncFree(ac);
    if (r->sentinel != NULL)
        sd_sentinel_cancel(r->sentinel);
    r->sentinel = NULL;
    sd_cluster_free(r->cluster);
    r->cluster = NULL;
    uv_close((uv_handle_t *)&r->retry, handle_closed_cb);
    uv_close((uv_handle_t *)&r->timeout, handle_closed_cb);
    uv_close((uv_handle_t *)&r->later_timer, handle_closed_cb);
}

/* A failed write runs the callbacks of every call in flight, which may
 * answer other waiting requests: hence only from outside any request. */
void sd_redis_flush(sd_thread *t)
{
    sd_redis *r = t->redis;
    if (r->br.state != SD_UP)
        return;
    if (r->cluster != NULL) {
        sd_cluster_write_now(r->cluster);
        return;
    }
    sd__redis_send_held(r);
    if (r->ac != NULL)
        sd_link_write_now(r->ac);
}

redisAsyncContext *sd_redis_context(sd_thread *t, const char *key)
{
    sd_redis *r = t->redis;
    if (r == NULL || r->br.state != SD_UP)
        return NULL;
    return r->cluster ? sd_cluster_link(r->cluster,
                                        sl__redis_key_slot(key, strlen(key)))
                      : r->ac;
}

/* A front end's own command in flight: its callback and argument. */
typedef struct own_command {
    sd_reply_fn cb;
    void *priv;
} own_command;

static void own_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    own_command *oc = priv;
    (void)ac;
    oc->cb(reply, oc->priv);
    free(oc);
}

int sd_redis_command(sd_thread *t, const char *key, int argc, const char **argv,
                     const size_t *lens, sd_reply_fn cb, void *priv)
{
    redisAsyncContext *ac = sd_redis_context(t, key);
    own_command *oc;
    if (ac == NULL || (oc = malloc(sizeof(*oc))) == NULL)
        return -1;
    *oc = (own_command){cb, priv};
    if (redisAsyncCommandArgv(ac, own_reply_cb, oc, argc, argv, lens) !=
        REDIS_OK) {
        free(oc);
        return -1;
    }
    return 0;
}

void sd_redis_stop(sd_thread *t)
{
    sd_redis *r = t->redis;
    r->stopping = 1;
    uv_timer_stop(&r->retry);
    sd__redis_maybe_teardown(r);
}
