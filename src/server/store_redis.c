/*
 * store_redis.c - `sluice serve --store redis://...`: decisions wait on
 * Redis asynchronously, on the worker's own libuv loop, and a Redis that
 * is slow or gone costs a bounded wait and then nothing.
 *
 * Each worker thread keeps ONE hiredis async connection on its loop; every
 * decision of the thread is an EVALSHA pipelined on it (Redis answers in
 * order, so one connection per thread keeps as many calls in flight as
 * the thread has waiting requests).  The library's protocol core builds
 * each call and reads each reply (sl__redis_call_*, src/redis/): the
 * protocol exists once.
 *
 * How a request waits (the "replay" design).  The HTTP front ends are
 * written as straight-line code around sl_srv_check().  The first time a
 * request runs, every sl_srv_check() that needs Redis records its call in
 * the worker's current op and returns SL_SRV_PENDING; conn.c throws away
 * whatever response was produced, pauses the connection's parser (so
 * pipelined responses stay in order) and the op is sent.  When the replies
 * come (or the timeout), the request is run again from the start: each
 * sl_srv_check() now finds its recorded result, in order.  A front end
 * whose later calls depend on earlier results (GET /v1/delay) simply goes
 * pending again and takes another round trip.  The op keeps the request's
 * JSON parse from its first run for the replay (sl_srv_op_keep_parsed), so
 * running it twice costs a second rule match, not a second parse; it buys
 * front ends without callbacks and one place where waiting happens.  A
 * replayed call is checked against the recorded one (a fingerprint of
 * items, costs and flags); a mismatch (rules reloaded in between) is
 * decided by the failure policy.
 *
 * Failure.  A call that gets no good reply within --redis-timeout of being
 * sent is a failure (reason "timeout"; a lost connection or an error
 * reply is "error"), and the request is decided by --redis-failure:
 * fail_open, fail_closed or local (sl_srv_fallback()).  The circuit
 * breaker is the connection itself: after --redis-breaker consecutive
 * failures, or when the connection drops, the thread closes it ("down")
 * and decides every request by the policy at once ("breaker_open"), with
 * no I/O.  After a backoff (50 ms, doubling to 2 s) it connects again and
 * sends the handshake (AUTH, SELECT, SCRIPT LOAD) as the half-open probe;
 * their replies within max(--redis-timeout, 200 ms) close the breaker
 * ("up"), anything else opens it again with a longer backoff.
 * Transitions are logged to stderr and counted.
 *
 * Redis Cluster (redis-cluster://).  A call is made of parts, one per
 * slot of its keys (sl__redis_call_parts), each sent on the link to its
 * slot's master (redis_cluster.c routes); the call is done when every
 * part is, and fails with the first that fails.  A part answered MOVED,
 * ASK or TRYAGAIN is sent again where the answer says, at most
 * SL__REDIS_MAX_HOPS times, within the same deadline.  The probe is a seed's
 * AUTH, SCRIPT LOAD and CLUSTER SLOTS (the slot map), after which that
 * connection is closed: the breaker, timeouts and failure policy are the
 * worker's, for the whole cluster, as for one Redis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "redis/redis_proto.h"
#include "server.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define PROBE_MIN_MS 200
/* A recorded call whose store failed: decided by the policy on replay. */
#define CALL_FAILED 1
/* Script calls out on the one connection before new calls wait to go
 * together, as one batch, when its reply comes.  One: a call goes at once
 * when the connection is idle (no added wait at light load), and under
 * load batches are twice as large as with two out (bench/serve_redis.sh:
 * 25 calls per EVALSHA against 12.7, less Redis CPU per decision, the
 * same decisions/s), which is what counts when Redis is the bottleneck. */
#define MAX_IN_FLIGHT 1
/* Calls in one batch: bounds how long one script run holds Redis (about
 * 10 us a decision). */
#define MAX_BATCH 64

enum { DOWN, CONNECTING, UP, STOPPED };

struct call_rec;

/* One part of a call: what a hiredis callback is given. */
typedef struct part_rec {
    struct call_rec *c;
    size_t index;
    int hops;   /* redirections followed */
    int asking; /* last sent after an ASK: a resend needs ASKING too */
} part_rec;

/* Calls sent as one script call (sl__redis_batch_format). */
typedef struct batch_rec {
    size_t n;
    int eval; /* sent again as EVAL, after a NOSCRIPT */
    part_rec *parts[];
} batch_rec;

typedef struct call_rec {
    sl_srv_op *op;
    part_rec *parts;
    size_t n_parts, parts_left;
    sl__redis_call *call; /* NULL once its reply is read */
    uint64_t fp;         /* fingerprint of what was asked */
    size_t n;
    int sent, done;
    int rc;     /* 0, SL_E*, or CALL_FAILED */
    int reason; /* with CALL_FAILED: SL_SRV_FAIL_* */
    sl_decision overall;
    sl_decision *each; /* n */
} call_rec;

struct sl_srv_op {
    sl_srv_worker *w;
    void *owner; /* the connection; NULL once it is gone */
    void (*done_cb)(void *owner);
    call_rec **calls;
    size_t n_calls, cap;
    size_t next;       /* replay cursor */
    size_t unsent;     /* calls[unsent..] are new in this run */
    size_t awaiting;   /* calls of this round still without a result */
    int refs;          /* the owner, plus one per hiredis callback to come */
    uint64_t started;  /* uv_hrtime of the request's first run */
    uint64_t deadline; /* loop ms; this round's timeout */
    sl_srv_op *prev, *next_op; /* the thread's waiting ops, by deadline */
    int queued;
    int has_parsed;
    sl_parsed_request parsed; /* the request's body, parsed once */
};

struct sl_srv_redis {
    sl_srv_worker *w;
    redisAsyncContext *ac;   /* the one connection; with a cluster, the probe */
    sl_srv_cluster *cluster; /* redis-cluster://: the links; else NULL */
    int state;
    int failures; /* consecutive, while UP */
    uint64_t backoff_ms;
    char sha[41];
    uv_timer_t retry;   /* DOWN: reconnect; CONNECTING: probe timeout */
    uv_timer_t timeout; /* the oldest waiting op's deadline */
    sl_srv_op *head, *tail;
    int stopping, handles;
    sl_buf cmd; /* the command being sent, in RESP */
    /* One connection (not a cluster): script calls written to it and not
     * yet answered, and the parts held meanwhile for the next batch. */
    int in_flight;
    part_rec **pending;
    size_t n_pending, cap_pending;
};

static const char *const fail_names[] = {"timeout", "error", "breaker_open"};

/* ---- fingerprints: is a replayed call the recorded one? ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t fingerprint(const sl_check_item *items, const int64_t *costs,
                            size_t n, unsigned flags)
{
    uint64_t h = fnv(UINT64_C(0xcbf29ce484222325), &flags, sizeof(flags));
    for (size_t i = 0; i < n; i++) {
        const void *lim = items[i].limit;
        h = fnv(h, &lim, sizeof(lim));
        h = fnv(h, &costs[i], sizeof(costs[i]));
        h = fnv(h, &items[i].key_len, sizeof(items[i].key_len));
        h = fnv(h, items[i].key, items[i].key_len);
    }
    return h;
}

/* ---- ops ---- */

static void op_unref(sl_srv_op *op)
{
    if (--op->refs > 0)
        return;
    for (size_t i = 0; i < op->n_calls; i++) {
        sl__redis_call_free(op->calls[i]->call);
        free(op->calls[i]->parts);
        free(op->calls[i]->each);
        free(op->calls[i]);
    }
    free(op->calls);
    if (op->has_parsed) {
        op->parsed.kept = 0;
        sl_parsed_request_release(&op->parsed);
    }
    free(op);
}

static void unqueue(sl_srv_redis *r, sl_srv_op *op)
{
    if (!op->queued)
        return;
    if (op->prev)
        op->prev->next_op = op->next_op;
    else
        r->head = op->next_op;
    if (op->next_op)
        op->next_op->prev = op->prev;
    else
        r->tail = op->prev;
    op->prev = op->next_op = NULL;
    op->queued = 0;
}

static void teardown(sl_srv_redis *r);

static void maybe_teardown(sl_srv_redis *r)
{
    if (r->stopping && r->head == NULL && r->state != STOPPED)
        teardown(r);
}

static void arm_timeout(sl_srv_redis *r);

/* The round is over (every result in, or the deadline passed): hand the
 * op back to its connection, which runs the request again. */
static void round_done(sl_srv_op *op)
{
    sl_srv_redis *r = op->w->redis;
    unqueue(r, op);
    op->refs++; /* the callback may release the owner's reference */
    if (op->owner != NULL)
        op->done_cb(op->owner);
    op_unref(op);
    arm_timeout(r);
    maybe_teardown(r);
}

static void count_failure(sl_srv_worker *w, int reason)
{
    atomic_fetch_add_explicit(&w->stats.store_failures[reason], 1,
                              memory_order_relaxed);
}

static void call_fail(call_rec *c, int reason)
{
    c->done = 1;
    c->rc = CALL_FAILED;
    c->reason = reason;
    count_failure(c->op->w, reason);
}

/* ---- the breaker ---- */

static void set_up(sl_srv_redis *r, int up)
{
    atomic_store_explicit(&r->w->stats.store_up, up, memory_order_relaxed);
}

static void retry_cb(uv_timer_t *t);
static void fail_pending(sl_srv_redis *r);

/* Opens the breaker: drops the connection (hiredis fails every call in
 * flight on it, each counted) and schedules the next attempt. */
static void go_down(sl_srv_redis *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    int was = r->state;
    r->ac = NULL;
    r->state = DOWN;
    r->failures = 0;
    set_up(r, 0);
    if (r->cluster != NULL)
        sl_srv_cluster_close(r->cluster);
    if (was == UP) {
        atomic_fetch_add_explicit(&r->w->stats.breaker_opened, 1,
                                  memory_order_relaxed);
        fprintf(stderr,
                "sluice: thread %d: redis down (%s): breaker open, retry in "
                "%llu ms\n",
                r->w->index, why, (unsigned long long)r->backoff_ms);
    }
    if (ac != NULL)
        redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
    r->in_flight = 0;
    fail_pending(r);
    if (r->stopping) {
        maybe_teardown(r);
        return;
    }
    uv_timer_start(&r->retry, retry_cb, r->backoff_ms, 0);
    r->backoff_ms =
        r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

/* Each probe reply's priv: its command's kind (SL__REDIS_CMD_*). */
static const int probe_kinds[] = {SL__REDIS_CMD_AUTH, SL__REDIS_CMD_SELECT,
                                  SL__REDIS_CMD_SCRIPT_LOAD,
                                  SL__REDIS_CMD_CLUSTER_SLOTS};

static void setup_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sl_srv_redis *r = ac->data;
    redisReply *rep = reply;
    int kind = *(const int *)priv;
    char err[256];
    if (r == NULL || ac != r->ac || r->state != CONNECTING)
        return;
    if (sl__redis_handshake_check(kind, rep, r->sha, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice: thread %d: %s\n", r->w->index, err);
        go_down(r, "setup refused");
        return;
    }
    if (kind !=
        (r->cluster ? SL__REDIS_CMD_CLUSTER_SLOTS : SL__REDIS_CMD_SCRIPT_LOAD))
        return; /* not the last of the probe */
    if (r->cluster != NULL) {
        if (sl_srv_cluster_set_map(r->cluster, rep, ac->c.tcp.host) != 0) {
            go_down(r, "unexpected CLUSTER SLOTS reply");
            return;
        }
        /* Calls go on the links; hiredis frees this after the callback. */
        r->ac = NULL;
        redisAsyncFree(ac);
    }
    uv_timer_stop(&r->retry);
    r->state = UP;
    r->failures = 0;
    r->backoff_ms = BACKOFF_MIN_MS;
    set_up(r, 1);
    atomic_fetch_add_explicit(&r->w->stats.breaker_closed, 1,
                              memory_order_relaxed);
    fprintf(stderr, "sluice: thread %d: redis up: breaker closed\n",
            r->w->index);
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    sl_srv_redis *r = ac->data;
    if (status == REDIS_OK || r == NULL || ac != r->ac)
        return;
    /* hiredis frees the context after this callback. */
    r->ac = NULL;
    go_down(r, ac->errstr[0] ? ac->errstr : "cannot connect");
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    sl_srv_redis *r = ac->data;
    (void)status;
    if (r == NULL || ac != r->ac)
        return;
    r->ac = NULL; /* being freed by hiredis */
    go_down(r, "connection lost");
}

/* hiredis's libuv adapter restarts its poll handle on every command
 * (addWrite) and after every write (addRead), and each uv_poll_start
 * takes the socket out of epoll: an epoll_ctl per call, most of them
 * failing.  Only a change of interest needs the restart. */
static void add_read(void *privdata)
{
    if (!(((redisLibuvEvents *)privdata)->events & UV_READABLE))
        redisLibuvAddRead(privdata);
}

static void add_write(void *privdata)
{
    if (!(((redisLibuvEvents *)privdata)->events & UV_WRITABLE))
        redisLibuvAddWrite(privdata);
}

int sl_srv_redis_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (redisLibuvAttach(ac, loop) != REDIS_OK)
        return -1;
    ac->ev.addRead = add_read;
    ac->ev.addWrite = add_write;
    return 0;
}

void sl_srv_redis_write_now(redisAsyncContext *ac)
{
    if (ac != NULL && sdslen(ac->c.obuf) > 0)
        redisAsyncHandleWrite(ac);
}

static void start_connect(sl_srv_redis *r)
{
    sl__redis_endpoint ep;
    sl__redis_handshake hs;
    sl_srv_worker *w = r->w;
    sl__redis_store_endpoint(w->server->redis_store, &ep);
    if (r->cluster != NULL)
        ep.host = sl_srv_cluster_probe_target(r->cluster, &ep.port);
    redisAsyncContext *ac = ep.unix_path ? redisAsyncConnectUnix(ep.unix_path)
                                         : redisAsyncConnect(ep.host, ep.port);
    if (ac == NULL || ac->err) {
        if (ac != NULL)
            redisAsyncFree(ac);
        go_down(r, "cannot connect");
        return;
    }
    ac->data = r;
    if (sl_srv_redis_attach(ac, &w->loop) != 0) {
        redisAsyncFree(ac);
        go_down(r, "out of memory");
        return;
    }
    redisAsyncSetConnectCallback(ac, connect_cb);
    redisAsyncSetDisconnectCallback(ac, disconnect_cb);
    r->ac = ac;
    r->in_flight = 0;
    r->state = CONNECTING;
    /* The probe, pipelined behind the connect. */
    sl__redis_handshake_init(
        &hs, &ep,
        SL__REDIS_WITH_SCRIPT_LOAD |
            (r->cluster ? SL__REDIS_WITH_CLUSTER_SLOTS : 0));
    for (size_t i = 0; i < hs.n; i++)
        redisAsyncCommandArgv(ac, setup_reply_cb,
                              (void *)&probe_kinds[hs.cmd[i].kind],
                              hs.cmd[i].argc, hs.cmd[i].argv, hs.cmd[i].lens);
    uint64_t probe = w->server->cfg.redis_timeout_ms;
    uv_timer_start(&r->retry, retry_cb,
                   probe < PROBE_MIN_MS ? PROBE_MIN_MS : probe, 0);
}

static void retry_cb(uv_timer_t *t)
{
    sl_srv_redis *r = t->data;
    if (r->state == CONNECTING)
        go_down(r, "probe timed out");
    else if (r->state == DOWN && !r->stopping)
        start_connect(r);
}

/* ---- calls ---- */

static void reply_cb(redisAsyncContext *ac, void *reply, void *priv);

static void count_sent(sl_srv_worker *w, size_t calls)
{
    atomic_fetch_add_explicit(&w->stats.store_commands, 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&w->stats.store_calls, calls,
                              memory_order_relaxed);
}

/* argv in RESP, into r->cmd, to be handed to hiredis whole: its own
 * formatting (redisAsyncCommandArgv, sdscatfmt per argument) cost more
 * than building the call.  0, or -1 out of memory. */
static int format_command(sl_srv_redis *r, int argc, const char *const *argv,
                          const size_t *lens)
{
    sl_buf *b = &r->cmd;
    b->len = 0;
    b->failed = 0;
    if (sl_buf_reserve(b, sl__redis_resp_len(argc, lens)) != 0)
        return -1;
    b->len = sl__redis_resp_write(b->data, argc, argv, lens);
    b->data[b->len] = '\0';
    return 0;
}

/* Sends one part: on the one connection, or on the link of its slot; to
 * `to` after a redirection (with ASKING first after an ASK).  0, or -1
 * when it cannot be sent now (then its callback never comes). */
static int send_part(sl_srv_redis *r, part_rec *p, redisAsyncContext *to,
                     int asking)
{
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_part_argv(p->c->call, p->index, &argv, &lens);
    redisAsyncContext *ac = to;

    if (ac == NULL)
        ac = r->cluster
                 ? sl_srv_cluster_link(r->cluster, sl__redis_call_part_slot(
                                                       p->c->call, p->index))
                 : r->ac;
    p->asking = asking;
    if (ac == NULL ||
        (asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) ||
        format_command(r, argc, argv, lens) != 0 ||
        redisAsyncFormattedCommand(ac, reply_cb, p, r->cmd.data,
                                   r->cmd.len) != REDIS_OK)
        return -1;
    if (r->cluster != NULL)
        sl_srv_cluster_sent(r->cluster, ac);
    else if (ac == r->ac)
        r->in_flight++;
    count_sent(r->w, 1);
    return 0;
}

/* A cluster node's MOVED, ASK or TRYAGAIN: the part goes again where it
 * says (a MOVED also refreshes the map).  1 when sent again. */
static int follow_redirect(sl_srv_redis *r, redisAsyncContext *ac, part_rec *p,
                           const redisReply *rep)
{
    sl__redis_redirect rd = {0};
    redisAsyncContext *to = ac;
    int kind = sl__redis_reply_kind(rep, &rd);

    if ((kind != SL__REDIS_REPLY_MOVED && kind != SL__REDIS_REPLY_ASK &&
         kind != SL__REDIS_REPLY_TRYAGAIN) ||
        p->hops >= SL__REDIS_MAX_HOPS)
        return 0;
    if (kind != SL__REDIS_REPLY_TRYAGAIN) {
        if (!rd.ask)
            sl_srv_cluster_refresh(r->cluster);
        to = sl_srv_cluster_link_to(
            r->cluster,
            rd.host[0] ? rd.host : sl_srv_cluster_host_of(r->cluster, ac),
            rd.port);
    }
    p->hops++;
    return to != NULL && send_part(r, p, to, rd.ask) == 0;
}

/* What a part's reply came to, for the breaker. */
enum { REPLY_OK, REPLY_FAILED, REPLY_RESENT, REPLY_LATE };

/* One part's reply (NULL: none will come); current: it came on the
 * connection in use.  The part's reference to its op is released, unless
 * the part was sent again (REPLY_RESENT: the reference passes on). */
static int part_reply(sl_srv_redis *r, redisAsyncContext *ac, part_rec *p,
                      const redisReply *reply, int current)
{
    call_rec *c = p->c;
    sl_srv_op *op = c->op;
    int res = REPLY_LATE; /* the call timed out before */

    if (!c->done) {
        char err[256];
        int rc;
        if (current && r->cluster != NULL && follow_redirect(r, ac, p, reply))
            return REPLY_RESENT;
        rc = sl__redis_call_read_part(c->call, p->index, reply, err,
                                      sizeof(err));
        if (rc == 1 && current) {
            /* The server lost the script (SCRIPT FLUSH): once more as
             * EVAL, within the same deadline. */
            sl__redis_call_part_use_eval(c->call, p->index);
            if (send_part(r, p, ac, p->asking) == 0)
                return REPLY_RESENT;
            rc = SL_ESTORE;
        }
        if (rc == 0 && --c->parts_left > 0) {
            op_unref(op); /* the call waits for its other parts */
            return REPLY_OK;
        }
        if (rc == 0)
            sl__redis_call_result(c->call, c->each, &c->overall);
        if (rc == 0 || rc == SL_ERANGE || rc == SL_EINVAL) {
            c->done = 1;
            c->rc = rc;
            res = REPLY_OK;
        } else {
            call_fail(c, SL_SRV_FAIL_ERROR);
            res = REPLY_FAILED;
        }
        if (--op->awaiting == 0)
            round_done(op);
    }
    op_unref(op);
    return res;
}

/* A command's outcome on the connection in use, for the breaker: one
 * count per command, whether it carried one call or a batch. */
static void settle(sl_srv_redis *r, int current, int res, int had_reply)
{
    if (!current || r->state != UP)
        return;
    if (res == REPLY_OK)
        r->failures = 0;
    else if (res == REPLY_FAILED &&
             ++r->failures >= r->w->server->cfg.redis_breaker)
        go_down(r, had_reply ? "error replies" : "no reply");
}

static void send_pending(sl_srv_redis *r);

static void reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    part_rec *p = priv;
    sl_srv_redis *r = p->c->op->w->redis;
    int current = r->state == UP &&
                  (r->cluster != NULL ? sl_srv_cluster_owns(r->cluster, ac)
                                      : r->ac == ac);

    if (r->cluster != NULL && r->state != STOPPED)
        sl_srv_cluster_replied(r->cluster, ac);
    else if (current)
        r->in_flight--;
    settle(r, current, part_reply(r, ac, p, reply, current), reply != NULL);
    if (current)
        send_pending(r);
}

static void batch_reply_cb(redisAsyncContext *ac, void *reply, void *priv);

static int send_batch(sl_srv_redis *r, batch_rec *b)
{
    sl__redis_call *calls[MAX_BATCH];
    char *cmd;
    size_t len;
    int rc;

    for (size_t i = 0; i < b->n; i++)
        calls[i] = b->parts[i]->c->call;
    if (sl__redis_batch_format(calls, b->n, b->eval ? NULL : r->sha, &cmd,
                               &len) != 0)
        return -1;
    rc = redisAsyncFormattedCommand(r->ac, batch_reply_cb, b, cmd, len);
    free(cmd);
    if (rc != REDIS_OK)
        return -1;
    r->in_flight++;
    count_sent(r->w, b->n);
    return 0;
}

static void batch_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    batch_rec *b = priv;
    sl_srv_redis *r = b->parts[0]->c->op->w->redis;
    int current = r->state == UP && r->ac == ac, ok = 0, failed = 0;

    if (current) {
        r->in_flight--;
        if (sl__redis_reply_kind(reply, NULL) == SL__REDIS_REPLY_NOSCRIPT &&
            !b->eval) {
            b->eval = 1; /* the server lost the script: once more */
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
    settle(r, current, ok ? REPLY_OK : failed ? REPLY_FAILED : REPLY_LATE,
           reply != NULL);
    if (current)
        send_pending(r);
}

/* Every held part fails (the connection is gone): their requests are
 * decided by the policy.  Only from outside any request. */
static void fail_pending(sl_srv_redis *r)
{
    while (r->n_pending > 0)
        part_reply(r, NULL, r->pending[--r->n_pending], NULL, 0);
}

/* Sends the held parts while fewer than MAX_IN_FLIGHT script calls are
 * out: up to MAX_BATCH in one batch, alone when only one is left.  Parts
 * whose call timed out meanwhile, or whose client went away, are dropped
 * unsent: their requests were decided by the policy, or need no
 * decision.  Only from outside any request (a part that
 * cannot be sent fails here, which answers its request). */
static void send_pending(sl_srv_redis *r)
{
    while (r->n_pending > 0 && r->in_flight < MAX_IN_FLIGHT) {
        part_rec *parts[MAX_BATCH];
        size_t k = 0, take = 0;
        batch_rec *b;

        if (r->state != UP) {
            fail_pending(r);
            return;
        }
        while (take < r->n_pending && k < MAX_BATCH) {
            part_rec *p = r->pending[take++];
            if (p->c->done || p->c->op->owner == NULL)
                op_unref(p->c->op);
            else
                parts[k++] = p;
        }
        r->n_pending -= take;
        memmove(r->pending, r->pending + take,
                r->n_pending * sizeof(*r->pending));
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
            part_reply(r, NULL, parts[i], NULL, 0);
    }
}

/* From inside a request: the part goes at once while fewer than
 * MAX_IN_FLIGHT script calls are out (so an idle thread adds no wait),
 * else it is held for the next batch, sent when a reply comes.  0, or -1
 * when it can be neither (then its callback never comes). */
static int submit_part(sl_srv_redis *r, part_rec *p)
{
    if (r->cluster != NULL ||
        (r->in_flight < MAX_IN_FLIGHT && r->n_pending == 0))
        return send_part(r, p, NULL, 0);
    if (r->n_pending == r->cap_pending) {
        size_t cap = r->cap_pending ? 2 * r->cap_pending : 64;
        part_rec **grown = realloc(r->pending, cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        r->pending = grown;
        r->cap_pending = cap;
    }
    r->pending[r->n_pending++] = p;
    return 0;
}

static void timeout_cb(uv_timer_t *t)
{
    sl_srv_redis *r = t->data;
    uint64_t now = uv_now(&r->w->loop);
    int any_timed_out = 0;
    while (r->head != NULL && r->head->deadline <= now) {
        sl_srv_op *op = r->head;
        int timed_out = 0;
        for (size_t i = 0; i < op->n_calls; i++) {
            call_rec *c = op->calls[i];
            if (c->sent && !c->done) {
                call_fail(c, SL_SRV_FAIL_TIMEOUT);
                timed_out = 1;
            }
        }
        op->awaiting = 0;
        if (timed_out && r->state == UP &&
            ++r->failures >= r->w->server->cfg.redis_breaker)
            go_down(r, "timeouts");
        any_timed_out |= timed_out;
        round_done(op); /* unqueues it */
    }
    if (any_timed_out && r->cluster != NULL && r->state == UP)
        sl_srv_cluster_timed_out(r->cluster);
    arm_timeout(r);
}

static void arm_timeout(sl_srv_redis *r)
{
    if (r->state == STOPPED)
        return;
    if (r->head == NULL) {
        uv_timer_stop(&r->timeout);
        return;
    }
    uint64_t now = uv_now(&r->w->loop);
    uv_timer_start(&r->timeout, timeout_cb,
                   r->head->deadline > now ? r->head->deadline - now : 0, 0);
}

/* ---- the worker's side ---- */

int sl_srv_redis_init(sl_srv_worker *w)
{
    sl_srv_redis *r = calloc(1, sizeof(*r));
    sl__redis_endpoint ep;
    if (r == NULL)
        return -1;
    sl__redis_store_endpoint(w->server->redis_store, &ep);
    if (ep.n_seeds > 0 &&
        (r->cluster = sl_srv_cluster_new(
             &w->loop, &ep, w->server->cfg.redis_timeout_ms)) == NULL) {
        free(r);
        return -1;
    }
    r->w = w;
    r->backoff_ms = BACKOFF_MIN_MS;
    r->state = DOWN;
    uv_timer_init(&w->loop, &r->retry);
    uv_timer_init(&w->loop, &r->timeout);
    r->retry.data = r->timeout.data = r;
    r->handles = 2;
    w->redis = r;
    start_connect(r);
    return 0;
}

static void handle_closed_cb(uv_handle_t *h)
{
    sl_srv_redis *r = h->data;
    if (--r->handles == 0) {
        r->w->redis = NULL;
        sl_buf_release(&r->cmd);
        free(r->pending);
        free(r);
    }
}

static void teardown(sl_srv_redis *r)
{
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    r->state = STOPPED;
    set_up(r, 0);
    fail_pending(r);
    if (ac != NULL)
        redisAsyncFree(ac);
    sl_srv_cluster_free(r->cluster);
    r->cluster = NULL;
    uv_close((uv_handle_t *)&r->retry, handle_closed_cb);
    uv_close((uv_handle_t *)&r->timeout, handle_closed_cb);
}

/* hiredis writes a connection's calls when the loop next polls it, so
 * Redis got every call of a loop iteration at once, after all its reads,
 * and answered them all before the thread saw a reply: the thread and
 * Redis took turns instead of working at once (each ~40% busy at the
 * bench's peak).  Writing after each client read lets Redis start on the
 * first calls while the thread parses the next requests (+25-30%
 * decisions/s in bench/serve_redis.sh) for a write per read.  A failed
 * write runs the callbacks of every call in flight, which may answer
 * other waiting requests: hence only from outside any request. */
void sl_srv_redis_flush(sl_srv_worker *w)
{
    sl_srv_redis *r = w->redis;
    if (r == NULL || r->state != UP)
        return;
    if (r->cluster != NULL) {
        sl_srv_cluster_write_now(r->cluster);
        return;
    }
    send_pending(r);
    if (r->ac != NULL)
        sl_srv_redis_write_now(r->ac);
}

redisAsyncContext *sl_srv_redis_context(sl_srv_worker *w, const char *key)
{
    sl_srv_redis *r = w->redis;
    if (r == NULL || r->state != UP)
        return NULL;
    return r->cluster ? sl_srv_cluster_link(
                            r->cluster, sl__redis_key_slot(key, strlen(key)))
                      : r->ac;
}

void sl_srv_redis_stop(sl_srv_worker *w)
{
    if (w->redis == NULL)
        return;
    w->redis->stopping = 1;
    uv_timer_stop(&w->redis->retry);
    maybe_teardown(w->redis);
}

const char *sl_srv_fail_name(int reason)
{
    return fail_names[reason];
}

/* ---- sl_srv_check ---- */

static sl_srv_op *current_op(sl_srv_worker *w)
{
    if (w->op == NULL) {
        w->op = calloc(1, sizeof(*w->op));
        if (w->op != NULL) {
            w->op->w = w;
            w->op->refs = 1;
            w->op->started = uv_hrtime() - (uint64_t)w->waited_ns;
        }
    }
    return w->op;
}

/* Records a new call in the worker's op: SL_SRV_PENDING, or an error. */
static int record(sl_srv_worker *w, const sl_check_item *items,
                  const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                  uint64_t fp, char *err, size_t errlen)
{
    sl_srv_op *op = current_op(w);
    call_rec *c = calloc(1, sizeof(*c));
    if (op == NULL || c == NULL ||
        (c->each = calloc(n, sizeof(sl_decision))) == NULL) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    int rc = sl__redis_call_new(w->server->redis_store, items, costs, n, now,
                                flags, w->redis->sha, &c->call, err, errlen);
    if (rc != 0) {
        free(c->each);
        free(c);
        return rc;
    }
    c->n_parts = c->parts_left = sl__redis_call_parts(c->call);
    if ((c->parts = calloc(c->n_parts, sizeof(part_rec))) == NULL) {
        sl__redis_call_free(c->call);
        free(c->each);
        free(c);
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < c->n_parts; i++)
        c->parts[i] = (part_rec){c, i, 0, 0};
    if (op->n_calls == op->cap) {
        size_t cap = op->cap ? 2 * op->cap : 4;
        call_rec **calls = realloc(op->calls, cap * sizeof(*calls));
        if (calls == NULL) {
            sl__redis_call_free(c->call);
            free(c->parts);
            free(c->each);
            free(c);
            snprintf(err, errlen, "out of memory");
            return SL_ENOMEM;
        }
        op->calls = calls;
        op->cap = cap;
    }
    c->op = op;
    c->fp = fp;
    c->n = n;
    op->calls[op->n_calls++] = c;
    op->next = op->n_calls;
    return SL_SRV_PENDING;
}

/* Decides a call Redis could not by each item's failure policy (its
 * rule's store_failure, else --redis-failure): any fail_closed item
 * refuses the request (SL_ESTORE); fail_open items are allowed with
 * their whole limit left; local items are decided together, all or
 * nothing, on the embedded store with their limits divided by --nodes
 * (sl_srv_nodes: with --nodes auto, the live nodes counted last). */
static int fallback(sl_srv_worker *w, const sl_check_item *items,
                    const int64_t *costs, size_t n, sl_nanos now,
                    unsigned flags, const sl_rule_failure *failure, int reason,
                    sl_decision *each, sl_decision *overall, char *err,
                    size_t errlen)
{
    int policy[SL_MAX_ITEMS], used[SL_SRV_N_POLICIES] = {0};
    sl_check_item local[SL_MAX_ITEMS];
    int64_t local_costs[SL_MAX_ITEMS];
    sl_decision out[SL_MAX_ITEMS], local_each[SL_MAX_ITEMS], local_overall;
    size_t n_local = 0;

    for (size_t i = 0; i < n; i++) {
        policy[i] = failure != NULL && failure[i] != SL_RULE_FAILURE_DEFAULT
                        ? (int)failure[i] - SL_RULE_FAILURE_LOCAL
                        : w->server->cfg.redis_failure;
        used[policy[i]] = 1;
    }
    for (int p = 0; p < SL_SRV_N_POLICIES; p++)
        if (used[p])
            atomic_fetch_add_explicit(&w->stats.fallbacks[p], 1,
                                      memory_order_relaxed);
    if (used[SL_SRV_FAIL_CLOSED]) {
        snprintf(err, errlen,
                 "store unavailable (%s) and the limit's "
                 "failure policy is fail_closed",
                 sl_srv_fail_name(reason));
        return SL_ESTORE;
    }
    for (size_t i = 0; i < n; i++)
        if (policy[i] == SL_SRV_FAIL_LOCAL) {
            local[n_local] = items[i];
            local_costs[n_local++] = costs[i];
        }
    if (n_local > 0) {
        int rc = sl_srv_local_check(w, local, local_costs, n_local, now, flags,
                                    local_each, &local_overall, err, errlen);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0, j = 0; i < n; i++) {
        if (policy[i] == SL_SRV_FAIL_LOCAL) {
            out[i] = local_each[j++];
        } else {
            int64_t l = sl_limit_get_config(items[i].limit)->limit;
            out[i] = (sl_decision){.allowed = 1, .limit = l, .remaining = l};
        }
    }
    /* Items decided apart (some locally, some allowed by fail_open)
     * combine as sl_check_costs combines its items. */
    sl_decisions_combine(out, n, overall);
    for (size_t i = 0; each != NULL && i < n; i++)
        each[i] = out[i];
    return 0;
}

int sl_srv_check(sl_srv_worker *w, const sl_check_item *items,
                 const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                 const sl_rule_failure *failure, sl_decision *each,
                 sl_decision *overall, char *err, size_t errlen)
{
    sl_decision local_overall;
    if (overall == NULL)
        overall = &local_overall;
    if (w->redis == NULL) {
        int rc = sl_check_costs(w->server->store, items, costs, n, now, flags,
                                each, overall);
        if (rc != 0)
            snprintf(err, errlen, "store: %s", sl_strerror(rc));
        return rc;
    }
    uint64_t fp = fingerprint(items, costs, n, flags);
    sl_srv_op *op = w->op;
    if (op != NULL && op->next < op->n_calls) {
        call_rec *c = op->calls[op->next++];
        if (c->fp != fp || c->n != n)
            return fallback(w, items, costs, n, now, flags, failure,
                            SL_SRV_FAIL_ERROR, each, overall, err, errlen);
        if (!c->done) /* an earlier call of this run went pending */
            return SL_SRV_PENDING;
        if (c->rc == CALL_FAILED)
            return fallback(w, items, costs, n, now, flags, failure, c->reason,
                            each, overall, err, errlen);
        if (c->rc != 0) {
            snprintf(err, errlen, "store: %s", sl_strerror(c->rc));
            return c->rc;
        }
        *overall = c->overall;
        for (size_t i = 0; each != NULL && i < n; i++)
            each[i] = c->each[i];
        return 0;
    }
    if (w->redis->state != UP) {
        count_failure(w, SL_SRV_FAIL_BREAKER);
        return fallback(w, items, costs, n, now, flags, failure,
                        SL_SRV_FAIL_BREAKER, each, overall, err, errlen);
    }
    return record(w, items, costs, n, now, flags, fp, err, errlen);
}

void sl_srv_op_begin(sl_srv_worker *w, sl_srv_op *op)
{
    w->op = op;
    /* The latency metric counts from the request's first run. */
    w->waited_ns = op != NULL ? (sl_nanos)(uv_hrtime() - op->started) : 0;
    if (op != NULL) {
        op->next = 0;
        op->unsent = op->n_calls;
    }
}

/* After a request ran: sends the calls it recorded and returns 1 (the
 * request waits; done_cb(owner) comes exactly once, unless
 * sl_srv_op_cancel() comes first), or returns 0 and frees the op. */
int sl_srv_op_end(sl_srv_worker *w, sl_srv_op **opp, void *owner,
                  void (*done_cb)(void *owner))
{
    sl_srv_op *op = w->op;
    sl_srv_redis *r = w->redis;
    w->op = NULL;
    *opp = NULL;
    if (op == NULL)
        return 0;
    if (op->unsent == op->n_calls) {
        op_unref(op);
        return 0;
    }
    op->owner = owner;
    op->done_cb = done_cb;
    op->awaiting = 0;
    for (size_t i = op->unsent; i < op->n_calls; i++) {
        call_rec *c = op->calls[i];
        size_t sent = 0;
        c->sent = 1;
        while (r->state == UP && sent < c->n_parts &&
               submit_part(r, &c->parts[sent]) == 0)
            sent++;
        op->refs += (int)sent;
        if (sent < c->n_parts) {
            /* The breaker opened while this request ran, or a cluster
             * node cannot be reached now: parts already sent will be
             * ignored. */
            call_fail(c,
                      r->state != UP ? SL_SRV_FAIL_BREAKER : SL_SRV_FAIL_ERROR);
            continue;
        }
        op->awaiting++;
    }
    op->unsent = op->n_calls;
    /* Every op waits the same timeout, so appending keeps the queue in
     * deadline order; one with nothing sent (the breaker opened while it
     * ran) is due at once and goes first.  It is replayed from the timer,
     * not from here: the caller is still inside its parser callback. */
    op->queued = 1;
    if (op->awaiting == 0) {
        op->deadline = uv_now(&w->loop);
        op->prev = NULL;
        op->next_op = r->head;
        if (r->head)
            r->head->prev = op;
        else
            r->tail = op;
        r->head = op;
    } else {
        op->deadline = uv_now(&w->loop) + w->server->cfg.redis_timeout_ms;
        op->prev = r->tail;
        op->next_op = NULL;
        if (r->tail)
            r->tail->next_op = op;
        else
            r->head = op;
        r->tail = op;
    }
    if (r->head == op)
        arm_timeout(r);
    *opp = op;
    return 1;
}

void sl_srv_op_keep_parsed(sl_srv_worker *w, sl_parsed_request *pr)
{
    if (w->op == NULL || pr->kept || w->op->has_parsed)
        return;
    w->op->parsed = *pr;
    w->op->has_parsed = 1;
    pr->kept = 1;
}

int sl_srv_op_parsed(sl_srv_worker *w, sl_parsed_request *pr)
{
    if (w->op == NULL || !w->op->has_parsed)
        return 0;
    *pr = w->op->parsed;
    pr->kept = 1;
    return 1;
}

/* The connection is gone: its op will not call back. */
void sl_srv_op_cancel(sl_srv_op *op)
{
    if (op == NULL)
        return;
    sl_srv_redis *r = op->w->redis;
    op->owner = NULL;
    if (r != NULL) {
        unqueue(r, op);
        arm_timeout(r);
    }
    op_unref(op);
    if (r != NULL)
        maybe_teardown(r);
}

/* ---- the local policy: the embedded store, the limit split over nodes ---- */

/* A rule's limit divided by the nodes, made once per thread (no lock on
 * the fallback path) and found by its configuration and divisor, never by
 * address: a reload frees limits and a new one may reuse an address. */
typedef struct local_limit {
    sl_limit_config cfg;
    int nodes;
    sl_limit *local;
    struct local_limit *next;
} local_limit;

#define LOCAL_BUCKETS 1024
#define LOCAL_MAX 100000

struct sl_srv_local {
    local_limit *buckets[LOCAL_BUCKETS];
    size_t count;
};

static const sl_limit *local_limit_of(sl_srv_worker *w, const sl_limit *lim)
{
    const sl_limit_config *cfg = sl_limit_get_config(lim);
    int nodes = sl_srv_nodes(w->server);
    if (nodes <= 1)
        return lim;
    if (w->local == NULL && (w->local = calloc(1, sizeof(*w->local))) == NULL)
        return NULL;
    uint64_t h = fnv(UINT64_C(0xcbf29ce484222325), cfg, sizeof(*cfg));
    h = fnv(h, &nodes, sizeof(nodes));
    local_limit **b = &w->local->buckets[h % LOCAL_BUCKETS];
    for (local_limit *l = *b; l != NULL; l = l->next)
        if (l->nodes == nodes && memcmp(&l->cfg, cfg, sizeof(*cfg)) == 0)
            return l->local;
    if (w->local->count >= LOCAL_MAX)
        return NULL;
    local_limit *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->cfg = *cfg;
    l->nodes = nodes;
    sl_limit_config c = *cfg;
    c.limit = cfg->limit / nodes > 0 ? cfg->limit / nodes : 1;
    c.burst = cfg->burst / nodes > 0 ? cfg->burst / nodes : 1;
    if (sl_limit_new(&c, &l->local, NULL, 0) != 0) {
        free(l);
        return NULL;
    }
    l->next = *b;
    *b = l;
    w->local->count++;
    return l->local;
}

int sl_srv_local_check(sl_srv_worker *w, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now,
                       unsigned flags, sl_decision *each, sl_decision *overall,
                       char *err, size_t errlen)
{
    sl_check_item local[SL_MAX_ITEMS];
    for (size_t i = 0; i < n; i++) {
        local[i] = items[i];
        local[i].limit = local_limit_of(w, items[i].limit);
        if (local[i].limit == NULL) {
            snprintf(err, errlen, "out of memory for the local fallback");
            return SL_ENOMEM;
        }
    }
    int rc = sl_check_costs(w->server->store, local, costs, n, now, flags, each,
                            overall);
    if (rc != 0)
        snprintf(err, errlen, "store: %s", sl_strerror(rc));
    return rc;
}

void sl_srv_local_release(sl_srv_worker *w)
{
    if (w->local == NULL)
        return;
    for (size_t i = 0; i < LOCAL_BUCKETS; i++)
        for (local_limit *l = w->local->buckets[i], *next; l != NULL;
             l = next) {
            next = l->next;
            sl_limit_free(l->local);
            free(l);
        }
    free(w->local);
    w->local = NULL;
}
