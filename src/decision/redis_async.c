/*
 * redis_async.c - a thread's Redis: decisions wait on it asynchronously,
 * on the thread's own libuv loop, and a Redis that is slow or gone costs
 * a bounded wait and then nothing.
 *
 * Each thread keeps ONE hiredis async connection (with a Cluster, one per
 * master, cluster_links.c); every call of the thread is an FCALL (an
 * EVALSHA on a server without Redis Functions) pipelined on it, or, while a
 * script call is out, held and sent with the others as one batch (batch.c). The
 * library builds each call and reads each reply (sl__redis_call_*).  A call
 * that gets no good reply within --redis-timeout of being sent fails
 * ("timeout"; a lost connection or an error reply is "error") and engine.c has
 * the policy decide it.  The breaker (breaker.c) is the connection itself:
 * opened, the connection is dropped and every check goes to the policy with no
 * I/O; after a backoff a new connection's AUTH, SELECT, SCRIPT LOAD and
 * FUNCTION LOAD (and CLUSTER SLOTS on a Cluster seed, whose connection is then
 * closed) are the half-open probe.  A Cluster part answered MOVED or ASK is
 * sent again where the answer says, at most SL__REDIS_MAX_HOPS times, within
 * the same deadline; one answered TRYAGAIN (its keys split by a
 * resharding) is sent again after a backoff, TRYAGAIN_MIN_MS doubling,
 * until the deadline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"
#include "log/log.h"

#define PROBE_MIN_MS 200
/* The first wait after a TRYAGAIN; each next one doubles, up to
 * TRYAGAIN_MAX_MS.  A migration moves a slot's keys in batches, so the
 * keys of a split call come together within milliseconds: sent again at
 * once, the call would spend its hops in a burst and load the node. */
/* --redis-timeout auto: AUTO_K times the p99 of the thread's recent
 * round trips, within [AUTO_FLOOR_MS, AUTO_CAP_MS], plus AUTO_ITEM_US per
 * item of the request (a 64-descriptor check runs 64 times the script's
 * work).  The floor keeps a scheduling hiccup of a loaded 2-core machine
 * (a few ms) from failing calls that Redis answers; the factor lets a
 * Redis that is slow but answering go on deciding; the cap bounds what a
 * request may wait on a Redis that does not answer.  Round trips are
 * counted in LAT_BUCKETS power-of-two buckets of ms, halved every
 * LAT_DECAY samples so that the p99 follows the last few thousand. */
#define AUTO_K 4
#define AUTO_FLOOR_MS 50
#define AUTO_CAP_MS 1000
#define AUTO_ITEM_US 100
#define LAT_BUCKETS 12
#define LAT_DECAY 2048
#define TRYAGAIN_MIN_MS 2
#define TRYAGAIN_MAX_MS 64

/* Calls sent as one script call (sl__redis_batch_format). */
typedef struct batch_rec {
    size_t n;
    int eval; /* sent again as EVAL, after a NOSCRIPT */
    sd_part *parts[];
} batch_rec;

struct sd_redis {
    sd_thread *t;
    redisAsyncContext *ac; /* the one connection; with a cluster, the probe */
    sd_cluster *cluster;   /* redis-cluster://: the links; else NULL */
    sd_breaker br;
    char sha[41];       /* the script's SHA1, from the probe's SCRIPT LOAD */
    int fcall;          /* the server took the library: calls are FCALLs */
    uv_timer_t retry;   /* DOWN: reconnect; CONNECTING: probe timeout */
    uv_timer_t timeout; /* the oldest wait's deadline */
    sd_wait_queue waits;
    int stopping, handles;
    char *cmd; /* the command being sent, in RESP */
    size_t cmd_cap;
    /* One connection (not a cluster): script calls written to it and not
     * yet answered, and the parts held meanwhile for the next batch. */
    int in_flight;
    sd_held held;
    sd_held later;          /* parts answered TRYAGAIN, to be sent again */
    uv_timer_t later_timer; /* the earliest of later's resend_at */
    int moved_said; /* a plain store's server answered MOVED: said once */
    /* Replies seen: when the last came (any reply, on any link: the
     * server is alive), and the round trips' histogram (bucket b: under
     * 2^b ms) for the automatic timeout. */
    uint64_t last_reply_ms;
    uint64_t last_silence_ms; /* when a timeout last counted (breaker) */
    uint32_t lat[LAT_BUCKETS], lat_n;
};

/* A reply came for what was sent at sent_ms. */
static void saw_reply(sd_redis *r, uint64_t sent_ms)
{
    uint64_t now = uv_now(r->t->loop), rtt = now - sent_ms;
    int b = 0;
    while (b < LAT_BUCKETS - 1 && rtt >= (UINT64_C(1) << b))
        b++;
    r->last_reply_ms = now;
    r->lat[b]++;
    if (++r->lat_n >= LAT_DECAY) {
        r->lat_n = 0;
        for (int i = 0; i < LAT_BUCKETS; i++) {
            r->lat[i] /= 2;
            r->lat_n += r->lat[i];
        }
    }
}

/* How long a wait of `items` items may take: --redis-timeout, or the
 * automatic timeout (AUTO_K above). */
static uint64_t timeout_for(const sd_redis *r, size_t items)
{
    uint64_t fixed = r->t->e->cfg.redis_timeout_ms, p99 = 1, seen = 0;
    if (fixed != 0)
        return fixed;
    for (int b = 0; b < LAT_BUCKETS; b++) {
        seen += r->lat[b];
        p99 = UINT64_C(1) << b;
        if (seen * 100 >= (uint64_t)r->lat_n * 99)
            break;
    }
    uint64_t t = AUTO_K * p99;
    t = t < AUTO_FLOOR_MS ? AUTO_FLOOR_MS : t > AUTO_CAP_MS ? AUTO_CAP_MS : t;
    return t + (items * AUTO_ITEM_US + 999) / 1000;
}

static void set_up(sd_redis *r, int up)
{
    atomic_store_explicit(&r->t->stats->up, up, memory_order_relaxed);
}

/* ---- the end of a wait's round ---- */

static void teardown(sd_redis *r);

static void maybe_teardown(sd_redis *r)
{
    if (r->stopping && r->waits.head == NULL && r->br.state != SD_STOPPED)
        teardown(r);
}

static void arm_timeout(sd_redis *r);

/* Every call of the wait has its reply or failed (or the deadline
 * passed): engine.c answers its owner. */
static void round_end(sd_wait *w)
{
    sd_redis *r = w->t->redis;
    sd_wait_dequeue(&r->waits, w);
    if (w->owner != NULL) {
        /* The owner's reference ends with its answer. */
        w->round_done(w);
        w->owner = NULL;
        sd_wait_unref(w);
    }
    arm_timeout(r);
    maybe_teardown(r);
}

/* ---- the connection and its breaker ---- */

static void retry_cb(uv_timer_t *t);
static void fail_held(sd_redis *r);
static void fail_later(sd_redis *r);

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
    if (was == SD_UP) {
        sd_count(&r->t->stats->breaker_opened, 1);
        sl__log(SL__LOG_WARN, NULL,
                "thread %d: redis down (%s): breaker open, retry in %llu ms",
                r->t->index, why, (unsigned long long)wait);
    }
    if (ac != NULL)
        redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
    r->in_flight = 0;
    fail_held(r);
    fail_later(r);
    if (r->stopping) {
        maybe_teardown(r);
        return;
    }
    uv_timer_start(&r->retry, retry_cb, wait, 0);
}

/* Each probe reply's priv: its command's kind (SL__REDIS_CMD_*). */
static const int probe_kinds[] = {
    SL__REDIS_CMD_AUTH,         SL__REDIS_CMD_SELECT,
    SL__REDIS_CMD_SCRIPT_LOAD,  SL__REDIS_CMD_CLUSTER_SLOTS,
    SL__REDIS_CMD_INFO_CLUSTER, SL__REDIS_CMD_FUNCTION_LOAD};

static void setup_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_redis *r = ac->data;
    const redisReply *rep = reply;
    int kind = *(const int *)priv, rc;
    char err[256];
    if (r == NULL || ac != r->ac || r->br.state != SD_CONNECTING)
        return;
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
    if (kind != (r->cluster ? SL__REDIS_CMD_CLUSTER_SLOTS
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

static void start_connect(sd_redis *r)
{
    sl__redis_endpoint ep;
    sl__redis_handshake hs;
    sd_engine *e = r->t->e;
    sl__redis_store_endpoint(e->redis, &ep);
    if (r->cluster != NULL)
        ep.host = sd_cluster_probe_target(r->cluster, &ep.port);
    redisAsyncContext *ac = ep.unix_path ? redisAsyncConnectUnix(ep.unix_path)
                                         : redisAsyncConnect(ep.host, ep.port);
    if (ac == NULL || ac->err) {
        if (ac != NULL)
            redisAsyncFree(ac);
        go_down(r, "cannot connect");
        return;
    }
    ac->data = r;
    if (sd_link_attach(ac, r->t->loop) != 0) {
        redisAsyncFree(ac);
        go_down(r, "out of memory");
        return;
    }
    redisAsyncSetConnectCallback(ac, connect_cb);
    redisAsyncSetDisconnectCallback(ac, disconnect_cb);
    r->ac = ac;
    r->in_flight = 0;
    sd_breaker_probing(&r->br);
    /* The probe, pipelined behind the connect. */
    sl__redis_handshake_init(&hs, &ep,
                             SL__REDIS_WITH_SCRIPT_LOAD |
                                 SL__REDIS_WITH_FUNCTION_LOAD |
                                 (r->cluster ? SL__REDIS_WITH_CLUSTER_SLOTS
                                             : SL__REDIS_WITH_CLUSTER_CHECK));
    for (size_t i = 0; i < hs.n; i++)
        redisAsyncCommandArgv(ac, setup_reply_cb,
                              (void *)&probe_kinds[hs.cmd[i].kind],
                              hs.cmd[i].argc, hs.cmd[i].argv, hs.cmd[i].lens);
    uint64_t probe = e->cfg.redis_timeout_ms;
    uv_timer_start(&r->retry, retry_cb,
                   probe < PROBE_MIN_MS ? PROBE_MIN_MS : probe, 0);
}

static void retry_cb(uv_timer_t *t)
{
    sd_redis *r = t->data;
    if (r->br.state == SD_CONNECTING)
        go_down(r, "probe timed out");
    else if (r->br.state == SD_DOWN && !r->stopping)
        start_connect(r);
}

/* ---- sending ---- */

static void reply_cb(redisAsyncContext *ac, void *reply, void *priv);

static void count_sent(sd_redis *r, size_t calls)
{
    sd_count(&r->t->stats->commands, 1);
    sd_count(&r->t->stats->calls, calls);
}

/* argv in RESP, into r->cmd, to be handed to hiredis whole: its own
 * formatting (redisAsyncCommandArgv, sdscatfmt per argument) cost more
 * than building the call.  The length, or 0 out of memory. */
static size_t format_command(sd_redis *r, int argc, const char *const *argv,
                             const size_t *lens)
{
    size_t len = sl__redis_resp_len(argc, lens);
    if (len > r->cmd_cap) {
        char *grown = realloc(r->cmd, len);
        if (grown == NULL)
            return 0;
        r->cmd = grown;
        r->cmd_cap = len;
    }
    return sl__redis_resp_write(r->cmd, argc, argv, lens);
}

/* Sends one part: on the one connection, or on the link of its slot; to
 * `to` after a redirection (with ASKING first after an ASK).  0, or -1
 * when it cannot be sent now (then its callback never comes). */
static int send_part(sd_redis *r, sd_part *p, redisAsyncContext *to, int asking)
{
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_part_argv(p->c->call, p->index, &argv, &lens);
    redisAsyncContext *ac = to;
    size_t len;

    if (ac == NULL)
        ac = r->cluster ? sd_cluster_link(r->cluster, sl__redis_call_part_slot(
                                                          p->c->call, p->index))
                        : r->ac;
    p->asking = asking;
    if (ac == NULL ||
        (asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) ||
        (len = format_command(r, argc, argv, lens)) == 0 ||
        redisAsyncFormattedCommand(ac, reply_cb, p, r->cmd, len) != REDIS_OK)
        return -1;
    if (r->cluster != NULL)
        sd_cluster_sent(r->cluster, ac);
    else if (ac == r->ac)
        r->in_flight++;
    p->sent_ms = uv_now(r->t->loop);
    count_sent(r, 1);
    return 0;
}

static void later_cb(uv_timer_t *timer);

/* A TRYAGAIN: p is held and sent again to its slot's master after its
 * backoff (later_cb).  0, or -1 out of memory. */
static int send_later(sd_redis *r, sd_part *p)
{
    uint64_t now = uv_now(r->t->loop);
    uint64_t wait = (uint64_t)TRYAGAIN_MIN_MS << (p->tries < 5 ? p->tries : 5);
    p->tries++;
    p->resend_at = now + (wait < TRYAGAIN_MAX_MS ? wait : TRYAGAIN_MAX_MS);
    if (sd_held_push(&r->later, p) != 0)
        return -1;
    if (!uv_is_active((uv_handle_t *)&r->later_timer) ||
        uv_timer_get_due_in(&r->later_timer) > p->resend_at - now)
        uv_timer_start(&r->later_timer, later_cb, p->resend_at - now, 0);
    return 0;
}

/* A cluster node's MOVED, ASK or TRYAGAIN: the part goes again where it
 * says (a MOVED also refreshes the map), or after a backoff.  1 when sent
 * again or held for it. */
static int follow_redirect(sd_redis *r, redisAsyncContext *ac, sd_part *p,
                           const redisReply *rep)
{
    sl__redis_redirect rd = {0};
    redisAsyncContext *to = ac;
    int kind = sl__redis_reply_kind(rep, &rd);

    /* Each TRYAGAIN waits twice as long as the last: the deadline, not
     * the hops, bounds them. */
    if (kind == SL__REDIS_REPLY_TRYAGAIN)
        return send_later(r, p) == 0;
    if ((kind != SL__REDIS_REPLY_MOVED && kind != SL__REDIS_REPLY_ASK) ||
        p->hops >= SL__REDIS_MAX_HOPS)
        return 0;
    if (!rd.ask)
        sd_cluster_refresh(r->cluster);
    to = sd_cluster_link_to(
        r->cluster, rd.host[0] ? rd.host : sd_cluster_host_of(r->cluster, ac),
        rd.port);
    p->hops++;
    return to != NULL && send_part(r, p, to, rd.ask) == 0;
}

/* How calls name the script: the library's function, or the SHA1. */
static const char *script_ref(const sd_redis *r)
{
    return r->fcall ? sl__redis_function : r->sha;
}

static void reload_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_redis *r = priv;
    const redisReply *rep = reply;
    (void)ac;
    if (rep == NULL || sl__redis_function_loaded(rep) || !r->fcall)
        return; /* loaded (or the connection is gone: no word on it) */
    sl__log(SL__LOG_INFO, NULL,
            "thread %d: redis FUNCTION LOAD refused (%s): calls are EVALSHA",
            r->t->index, rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    r->fcall = 0;
}

/* A reply said "Function not found" (or NOSCRIPT): the server (a
 * cluster's node: ac) lost the library, which is loaded there again
 * before the call goes once more as EVAL, so that the calls after it
 * are FCALLs again.  Each such reply sends one: after a flush with many
 * calls in flight, all but the first are answered "already exists". */
static void reload_library(sd_redis *r, redisAsyncContext *ac)
{
    const char *argv[3];
    size_t lens[3];
    int argc = sl__redis_function_load_args(argv, lens);
    if (r->fcall)
        redisAsyncCommandArgv(ac, reload_cb, r, argc, argv, lens);
}

/* What a part's reply came to, for the breaker. */
enum { REPLY_OK, REPLY_FAILED, REPLY_RESENT, REPLY_LATE };

/* One part's reply (NULL: none will come); current: it came on the
 * connection in use.  The part's reference to its wait is released,
 * unless the part was sent again (REPLY_RESENT: the reference passes
 * on). */
static int part_reply(sd_redis *r, redisAsyncContext *ac, sd_part *p,
                      const redisReply *reply, int current)
{
    sd_call *c = p->c;
    sd_wait *w = c->wait;
    int res = REPLY_LATE; /* the call timed out before */

    if (!c->done) {
        char err[256];
        int rc;
        if (current && r->cluster != NULL && follow_redirect(r, ac, p, reply))
            return REPLY_RESENT;
        if (r->cluster == NULL && !r->moved_said &&
            sl__redis_reply_kind(reply, NULL) == SL__REDIS_REPLY_MOVED) {
            /* Made a Cluster node after the probe asked: say what to do. */
            r->moved_said = 1;
            fprintf(stderr,
                    "sluice: thread %d: redis answered MOVED: the server is "
                    "a Redis Cluster node: use redis-cluster://\n",
                    r->t->index);
        }
        rc = sl__redis_call_read_part(c->call, p->index, reply, err,
                                      sizeof(err));
        if (rc == 1 && current) {
            /* The server lost the library or the script (a restart, a
             * flush): once more as EVAL, within the same deadline. */
            reload_library(r, ac);
            sl__redis_call_part_use_eval(c->call, p->index);
            if (send_part(r, p, ac, p->asking) == 0)
                return REPLY_RESENT;
            rc = SL_ESTORE;
        }
        if (rc == 0 && --c->parts_left > 0) {
            sd_wait_unref(w); /* the call waits for its other parts */
            return REPLY_OK;
        }
        if (rc == 0)
            sl__redis_call_result(c->call, c->each, &c->overall);
        if (rc == 0 || rc == SL_ERANGE || rc == SL_EINVAL) {
            c->done = 1;
            c->rc = rc;
            res = REPLY_OK;
        } else {
            sd_call_fail(c, SD_FAIL_ERROR);
            res = REPLY_FAILED;
        }
        if (--w->awaiting == 0)
            round_end(w);
    }
    sd_wait_unref(w);
    return res;
}

/* A command's outcome on the connection in use, for the breaker: one
 * count per command, whether it carried one call or a batch. */
static void settle(sd_redis *r, int current, int res, int had_reply)
{
    if (!current || r->br.state != SD_UP)
        return;
    if (res == REPLY_OK)
        sd_breaker_success(&r->br);
    else if (res == REPLY_FAILED && sd_breaker_failure(&r->br))
        go_down(r, had_reply ? "error replies" : "no reply");
}

static void send_held(sd_redis *r);

static void reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_part *p = priv;
    sd_redis *r = p->c->wait->t->redis;
    int current =
        r->br.state == SD_UP &&
        (r->cluster != NULL ? sd_cluster_owns(r->cluster, ac) : r->ac == ac);

    if (r->cluster != NULL && r->br.state != SD_STOPPED)
        sd_cluster_replied(r->cluster, ac);
    else if (current)
        r->in_flight--;
    if (current && reply != NULL)
        saw_reply(r, p->sent_ms);
    settle(r, current, part_reply(r, ac, p, reply, current), reply != NULL);
    if (current)
        send_held(r);
}

static void batch_reply_cb(redisAsyncContext *ac, void *reply, void *priv);

static int send_batch(sd_redis *r, batch_rec *b)
{
    sl__redis_call *calls[SD_MAX_BATCH];
    char *cmd;
    size_t len;
    int rc;

    for (size_t i = 0; i < b->n; i++)
        calls[i] = b->parts[i]->c->call;
    if (sl__redis_batch_format(calls, b->n, b->eval ? NULL : script_ref(r),
                               &cmd, &len) != 0)
        return -1;
    rc = redisAsyncFormattedCommand(r->ac, batch_reply_cb, b, cmd, len);
    free(cmd);
    if (rc != REDIS_OK)
        return -1;
    r->in_flight++;
    for (size_t i = 0; i < b->n; i++)
        b->parts[i]->sent_ms = uv_now(r->t->loop);
    count_sent(r, b->n);
    return 0;
}

static void batch_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    batch_rec *b = priv;
    sd_redis *r = b->parts[0]->c->wait->t->redis;
    int current = r->br.state == SD_UP && r->ac == ac, ok = 0, failed = 0;

    if (current) {
        r->in_flight--;
        if (reply != NULL)
            saw_reply(r, b->parts[0]->sent_ms);
        if (sl__redis_reply_kind(reply, NULL) == SL__REDIS_REPLY_NOSCRIPT &&
            !b->eval) {
            b->eval = 1; /* the server lost the script: once more */
            reload_library(r, ac);
            if (send_batch(r, b) == 0)
                return;
        }
    }
    for (size_t i = 0; i < b->n; i++) {
        int res = part_reply(r, ac, b->parts[i],
                             sl__redis_batch_reply(reply, b->n, i), current);
        ok |= res == REPLY_OK;
        failed |= res == REPLY_FAILED;
    }
    free(b);
    settle(r, current,
           ok       ? REPLY_OK
           : failed ? REPLY_FAILED
                    : REPLY_LATE,
           reply != NULL);
    if (current)
        send_held(r);
}

static void fail_part(sd_part *p)
{
    part_reply(p->c->wait->t->redis, NULL, p, NULL, 0);
}

/* Every held part fails (the connection is gone): their checks are
 * decided by the policy.  Only from outside any request. */
static void fail_held(sd_redis *r)
{
    while (r->held.n > 0)
        fail_part(r->held.parts[--r->held.n]);
}

static void drop_part(sd_part *p)
{
    sd_wait_unref(p->c->wait);
}

static void fail_later(sd_redis *r)
{
    while (r->later.n > 0)
        fail_part(r->later.parts[--r->later.n]);
    uv_timer_stop(&r->later_timer);
}

/* The parts whose TRYAGAIN backoff is over go to their slot's master
 * again (an ASK from it leads on to the importing node); a part whose
 * call timed out meanwhile is dropped. */
static void later_cb(uv_timer_t *timer)
{
    sd_redis *r = timer->data;
    uint64_t now = uv_now(r->t->loop), next = UINT64_MAX;
    size_t kept = 0;
    sd_held due = {0};

    if (r->br.state != SD_UP) {
        fail_later(r);
        return;
    }
    for (size_t i = 0; i < r->later.n; i++) {
        sd_part *p = r->later.parts[i];
        if (p->c->done || p->c->wait->owner == NULL) {
            drop_part(p);
            continue;
        }
        /* Out of memory for due: kept, tried again at once. */
        if (p->resend_at <= now && sd_held_push(&due, p) == 0)
            continue;
        if (p->resend_at < next)
            next = p->resend_at;
        r->later.parts[kept++] = p;
    }
    r->later.n = kept;
    if (kept > 0)
        uv_timer_start(&r->later_timer, later_cb, next > now ? next - now : 0,
                       0);
    for (size_t i = 0; i < due.n; i++)
        if (send_part(r, due.parts[i], NULL, 0) != 0)
            fail_part(due.parts[i]);
    sd_held_release(&due);
}

/* Sends the held parts while fewer than SD_MAX_IN_FLIGHT script calls are
 * out: up to SD_MAX_BATCH in one batch, alone when only one is left.
 * Parts whose call timed out meanwhile, or whose wait was cancelled, are
 * dropped unsent.  Only from outside any request (a part that cannot be
 * sent fails here, which may answer its request). */
static void send_held(sd_redis *r)
{
    while (r->held.n > 0 && r->in_flight < SD_MAX_IN_FLIGHT) {
        sd_part *parts[SD_MAX_BATCH];
        batch_rec *b;

        if (r->br.state != SD_UP) {
            fail_held(r);
            return;
        }
        size_t k = sd_held_take(&r->held, parts, drop_part);
        if (k == 1 && send_part(r, parts[0], NULL, 0) == 0)
            continue;
        b = k > 1 ? malloc(sizeof(*b) + k * sizeof(*parts)) : NULL;
        if (b != NULL) {
            b->n = k;
            b->eval = 0;
            memcpy(b->parts, parts, k * sizeof(*parts));
            if (send_batch(r, b) == 0)
                continue;
            free(b);
        }
        for (size_t i = 0; i < k; i++)
            fail_part(parts[i]);
    }
}

/* From inside a request: the part goes at once while fewer than
 * SD_MAX_IN_FLIGHT script calls are out (so an idle thread adds no wait),
 * else it is held for the next batch, sent when a reply comes.  0, or -1
 * when it can be neither (then its callback never comes). */
static int submit_part(sd_redis *r, sd_part *p)
{
    if (r->cluster != NULL ||
        (r->in_flight < SD_MAX_IN_FLIGHT && r->held.n == 0))
        return send_part(r, p, NULL, 0);
    return sd_held_push(&r->held, p);
}

void sd_redis_send(sd_thread *t, sd_wait *w)
{
    sd_redis *r = t->redis;
    uint64_t now = uv_now(t->loop);
    size_t items = 0;

    w->awaiting = 0;
    w->sent_ms = now;
    for (size_t i = 0; i < w->n_calls; i++) {
        sd_call *c = &w->calls[i];
        size_t sent = 0;
        if (c->done)
            continue;
        c->sent = 1;
        while (r->br.state == SD_UP && sent < c->n_parts &&
               submit_part(r, &c->parts[sent]) == 0)
            sent++;
        w->refs += (int)sent;
        items += c->check->n;
        if (sent < c->n_parts) {
            /* The breaker is open, or a cluster node cannot be reached
             * now: parts already sent will be ignored. */
            sd_call_fail(c, r->br.state != SD_UP ? SD_FAIL_BREAKER
                                                 : SD_FAIL_ERROR);
            continue;
        }
        w->awaiting++;
    }
    /* One with nothing out is due at once: it is answered from the
     * timer, not from here, where the caller is still in its request. */
    sd_wait_enqueue(&r->waits, w,
                    w->awaiting == 0 ? now : now + timeout_for(r, items));
    if (r->waits.head == w)
        arm_timeout(r);
}

static void timeout_cb(uv_timer_t *timer)
{
    sd_redis *r = timer->data;
    uint64_t now = uv_now(r->t->loop);
    int any_timed_out = 0;
    while (r->waits.head != NULL && r->waits.head->deadline <= now) {
        sd_wait *w = r->waits.head;
        int timed_out = 0;
        for (size_t i = 0; i < w->n_calls; i++) {
            sd_call *c = &w->calls[i];
            if (c->sent && !c->done) {
                sd_call_fail(c, SD_FAIL_TIMEOUT);
                timed_out = 1;
            }
        }
        w->awaiting = 0;
        /* A timeout counts against the breaker only when the server has
         * said nothing since the wait was sent, and at most once per
         * timeout: a slow Redis that answers (a large request, a busy
         * moment) is not a dead one and keeps deciding, and the waits
         * that one stall times out together are one failure, so the
         * breaker opens after --redis-breaker whole timeouts of silence
         * (docs/server.md, "Circuit breaker"). */
        if (timed_out && r->last_reply_ms < w->sent_ms &&
            now >= r->last_silence_ms + (w->deadline - w->sent_ms)) {
            r->last_silence_ms = now;
            if (sd_breaker_failure(&r->br))
                go_down(r, "timeouts");
        }
        any_timed_out |= timed_out;
        round_end(w); /* dequeues it */
    }
    if (any_timed_out && r->cluster != NULL && r->br.state == SD_UP)
        sd_cluster_timed_out(r->cluster);
    arm_timeout(r);
}

static void arm_timeout(sd_redis *r)
{
    if (r->br.state == SD_STOPPED)
        return;
    if (r->waits.head == NULL) {
        uv_timer_stop(&r->timeout);
        return;
    }
    uint64_t now = uv_now(r->t->loop);
    uint64_t due = r->waits.head->deadline;
    uv_timer_start(&r->timeout, timeout_cb, due > now ? due - now : 0, 0);
}

void sd_redis_forget(sd_thread *t, sd_wait *w)
{
    sd_redis *r = t->redis;
    sd_wait_dequeue(&r->waits, w);
    arm_timeout(r);
    maybe_teardown(r);
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

const char *sd_redis_script_ref(const sd_thread *t)
{
    return script_ref(t->redis);
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

static void teardown(sd_redis *r)
{
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    r->br.state = SD_STOPPED;
    set_up(r, 0);
    fail_held(r);
    fail_later(r);
    if (ac != NULL)
        redisAsyncFree(ac);
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
    send_held(r);
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
    maybe_teardown(r);
}
