/*
 * redis_async_send.c - the calls of a thread's Redis on their way out and
 * their replies on the way back: each call formatted in RESP and written
 * to the one connection (or to its slot's link on a Cluster), or held
 * while a script call is out and sent with the others as one batch
 * (batch.c); a Cluster's MOVED and ASK followed, at most
 * SL__REDIS_MAX_HOPS times, within the same deadline; a TRYAGAIN sent
 * again after a backoff, TRYAGAIN_MIN_MS doubling, until the deadline; a
 * library or script the server lost loaded again.  Sending and replies
 * are one file because they are the hot path: a reply sends the held
 * parts, a redirect or reload sends again, and each stays a static call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/redis_state.h"
#include "log/log.h"

/* The first wait after a TRYAGAIN; each next one doubles, up to
 * TRYAGAIN_MAX_MS.  A migration moves a slot's keys in batches, so the
 * keys of a split call come together within milliseconds: sent again at
 * once, the call would spend its hops in a burst and load the node. */
#define TRYAGAIN_MIN_MS 2
#define TRYAGAIN_MAX_MS 64

/* Calls sent as one script call (sl__redis_batch_format). */
typedef struct batch_rec {
    size_t n;
    int eval; /* sent again as EVAL, after a NOSCRIPT */
    sd_part *parts[];
} batch_rec;

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
        if (rc == 0 && w->owner == NULL)
            sd_call_give_back(c); /* cancelled: nobody learns its grants */
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
            sd__redis_round_end(w);
    } else if (reply != NULL && c->backs != NULL &&
               sl__redis_call_read_part(c->call, p->index, reply, NULL, 0) ==
                   0) {
        /* After its timeout: Redis ran it, and counted what it granted. */
        sd_call_give_back(c);
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
        r->fail_conn(r, had_reply ? "error replies" : "no reply");
}

/* A master that a failover made a replica answers READONLY (and ran
 * nothing): the connection goes, and the probe after the backoff asks
 * the Sentinels for the new master.  1 when it went. */
static int demoted(sd_redis *r, int current, const redisReply *reply)
{
    if (!current || r->cluster != NULL || r->br.state != SD_UP ||
        sl__redis_reply_kind(reply, NULL) != SL__REDIS_REPLY_READONLY)
        return 0;
    r->fail_conn(r, "READONLY: the master is a replica now");
    return 1;
}

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
        sd__redis_saw_reply(r, p->sent_ms);
    settle(r, current, part_reply(r, ac, p, reply, current), reply != NULL);
    if (current && !demoted(r, current, reply))
        sd__redis_send_held(r);
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
            sd__redis_saw_reply(r, b->parts[0]->sent_ms);
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
    if (current && !demoted(r, current, reply))
        sd__redis_send_held(r);
}

static void fail_part(sd_part *p)
{
    part_reply(p->c->wait->t->redis, NULL, p, NULL, 0);
}

/* Every held part fails (the connection is gone): their checks are
 * decided by the policy.  Only from outside any request. */
void sd__redis_fail_held(sd_redis *r)
{
    while (r->held.n > 0)
        fail_part(r->held.parts[--r->held.n]);
}

static void drop_part(sd_part *p)
{
    sd_wait_unref(p->c->wait);
}

void sd__redis_fail_later(sd_redis *r)
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
        sd__redis_fail_later(r);
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
void sd__redis_send_held(sd_redis *r)
{
    while (r->held.n > 0 && r->in_flight < SD_MAX_IN_FLIGHT) {
        sd_part *parts[SD_MAX_BATCH];
        batch_rec *b;

        if (r->br.state != SD_UP) {
            sd__redis_fail_held(r);
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
                    w->awaiting == 0 ? now
                                     : now + sd__redis_timeout_for(r, items));
    if (r->waits.head == w)
        sd__redis_arm_timeout(r);
}

const char *sd_redis_script_ref(const sd_thread *t)
{
    return script_ref(t->redis);
}
