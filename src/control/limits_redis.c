/*
 * limits_redis.c - the runtime limits on Redis (--store redis): every
 * node shares the table of overrides as a hash of JSON entries, a version
 * counter and a capped list of change events under one hash tag, written
 * by one script (lua/overrides_write.lua) that checks the precondition
 * and bumps the version atomically, and read (lua/overrides_read.lua) by
 * each node's control thread every second when the version moved.
 * Nothing of this is on the request path: requests read the generation in
 * force (rules_set.h), and when Redis is down a node keeps the last table
 * and expires its entries on its own clock.  Apart from the table
 * (limits.c) because the memory store never comes here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "control/limits_table.h"
#include "runtime/decide.h"

/* A write waits this long on Redis, then answers 503. */
#define WRITE_TIMEOUT_MS 2000
/* An expired override is removed from Redis this long after. */
#define PURGE_AFTER_MS 60000

/* A write in flight on Redis: what its reply is for.  op is NULL once the
 * write timed out (the reply is then dropped). */
typedef struct ticket {
    struct sv_limits *lim;
    sv_limits_op *op;
    sv_override wrote; /* the override written (not for a delete) */
} ticket;

void sv_limits_keys(struct sv_limits *lim)
{
    /* One hash tag, so that a cluster keeps them on one master and the
     * scripts may touch all three. */
    snprintf(lim->key_table, sizeof(lim->key_table), "sluice:{overrides}");
    snprintf(lim->key_version, sizeof(lim->key_version),
             "sluice:{overrides}:version");
    snprintf(lim->key_log, sizeof(lim->key_log), "sluice:{overrides}:log");
}

/* ---- writing ---- */

static void unlink_pending(struct sv_limits *lim, sv_limits_op *op)
{
    for (sv_limits_op **p = &lim->pending; *p != NULL; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            return;
        }
}

static void write_reply_cb(const redisReply *r, void *priv)
{
    ticket *tk = priv;
    struct sv_limits *lim = tk->lim;
    sv_limits_op *op = tk->op;
    if (op == NULL) { /* timed out: answered already */
        sv_override_release(&tk->wrote);
        free(tk);
        return;
    }
    unlink_pending(lim, op);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        op->status = 503;
        snprintf(op->err, sizeof(op->err), "the store did not take it: %s",
                 r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
        sv_override_release(&tk->wrote);
    } else if (r->element[0]->integer == 0) {
        sv_limits_precondition(op, (uint64_t)r->element[1]->integer);
        if (op->status == 0) { /* raced: it changed under us */
            op->status = 412;
            snprintf(op->err, sizeof(op->err), "the override changed");
        }
        sv_override_release(&tk->wrote);
    } else {
        uint64_t v = (uint64_t)r->element[1]->integer;
        pthread_mutex_lock(&lim->lock);
        int existed = sv_override_find(lim, op->rule, op->source) != NULL;
        sv_override_apply(lim, op->rule, op->source,
                          op->del ? NULL : &tk->wrote, v,
                          sv_limits_now_ms(lim->s), 0);
        sv_limits_publish(lim);
        pthread_mutex_unlock(&lim->lock);
        op->status = op->del ? 204 : existed ? 200 : 201;
        op->now_version = v;
        sv_limits_sync(lim); /* others' changes, and the log */
    }
    free(tk);
    sv_limits_op_end(op);
}

int sv_limits_write_redis(struct sv_limits *lim, sv_limits_op *op,
                          sv_override *e, int64_t t)
{
    char field[600], match[8 + SV_MAX_IF_MATCH * 21] = "";
    snprintf(field, sizeof(field), "%s|%s", sv_source_name(op->source),
             op->rule);
    /* The script's precondition (src/control/lua/overrides_write.lua). */
    if (op->match == SV_MATCH_ABSENT)
        snprintf(match, sizeof(match), "0");
    else if (op->match == SV_MATCH_EXISTS)
        snprintf(match, sizeof(match), "*");
    else if (op->match == SV_MATCH_VERSION) {
        size_t n = (size_t)snprintf(match, sizeof(match), "v");
        for (size_t i = 0; i < op->n_versions; i++)
            n += (size_t)snprintf(match + n, sizeof(match) - n, "%s%" PRIu64,
                                  i ? "," : "", op->versions[i]);
    }
    char *ej = NULL, *evj;
    if (!op->del) {
        json_t *j = sv_override_json(e);
        ej = json_dumps(j, JSON_COMPACT);
        json_decref(j);
    }
    json_t *ev =
        sv_override_event(op->del ? "delete" : "set", op->del ? NULL : e, NULL,
                          op->rule, op->source, t, 0);
    json_object_del(ev, "previous");
    evj = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    ticket *tk = calloc(1, sizeof(*tk));
    int rc = -1;
    if (tk != NULL && evj != NULL && (op->del || ej != NULL)) {
        const char *argv[] = {"EVAL",
                              sv_overrides_write_lua,
                              "3",
                              lim->key_table,
                              lim->key_version,
                              lim->key_log,
                              field,
                              match,
                              ej ? ej : "",
                              evj};
        tk->lim = lim;
        tk->op = op;
        op->ticket = tk;
        if (!op->del)
            tk->wrote = *e;
        rc = sd_redis_command(lim->control->dec, lim->key_table, 10, argv, NULL,
                              write_reply_cb, tk);
    }
    free(ej);
    free(evj);
    if (rc != 0) {
        free(tk);
        if (!op->del)
            sv_override_release(e);
        op->status = 503;
        snprintf(op->err, sizeof(op->err),
                 "the store is down: overrides cannot be changed now");
        return 0;
    }
    op->started_ms = (uint64_t)t;
    op->next = lim->pending;
    lim->pending = op;
    return SV_AGAIN;
}

/* Answers 503 to the writes Redis did not answer in time; their replies,
 * when they come, are dropped. */
void sv_limits_time_out(struct sv_limits *lim, int64_t t)
{
    for (sv_limits_op **p = &lim->pending; *p != NULL;) {
        sv_limits_op *op = *p;
        if ((int64_t)op->started_ms + WRITE_TIMEOUT_MS > t) {
            p = &op->next;
            continue;
        }
        *p = op->next;
        ((ticket *)op->ticket)->op = NULL;
        op->status = 503;
        snprintf(op->err, sizeof(op->err),
                 "the store did not answer within %d ms", WRITE_TIMEOUT_MS);
        sv_limits_op_end(op);
    }
}

/* ---- reading ---- */

/* Moves into the table read from Redis (*e, *n of *cap) the overrides
 * held here (sv_limits_hold) that it has no live copy of: the store came
 * back without their renewal, which the next one brings.  A live copy
 * ends the hold.  Under lim->lock. */
static void carry_holds(struct sv_limits *lim, sv_override **e, size_t *n,
                        size_t *cap, int64_t t)
{
    for (size_t i = 0; i < lim->n; i++) {
        sv_override *old = &lim->e[i];
        if (old->held_ms <= t)
            continue;
        size_t j = 0;
        while (j < *n && ((*e)[j].source != old->source ||
                          strcmp((*e)[j].rule, old->rule) != 0))
            j++;
        if (j < *n && (*e)[j].expires_ms > t)
            continue;
        uint64_t version = 0; /* none there: this node's alone */
        if (j < *n) {
            version = (*e)[j].version;
            sv_override_release(&(*e)[j]);
        } else if (*n == *cap) {
            sv_override *g = realloc(*e, 2 * *cap * sizeof(*g));
            if (g == NULL)
                continue; /* out of memory: its rule's own number */
            *e = g;
            *cap *= 2;
        }
        if (j == *n)
            (*n)++;
        (*e)[j] = *old;
        (*e)[j].version = version;
        *old = (sv_override){0}; /* moved: the caller frees the rest */
    }
}

static void read_reply_cb(const redisReply *r, void *priv)
{
    struct sv_limits *lim = priv;
    lim->reading = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[2]->type != REDIS_REPLY_ARRAY)
        return; /* down or garbled: the last table stands */
    uint64_t v = strtoull(r->element[0]->str, NULL, 10);
    sv_override *e = calloc(r->element[1]->elements + 1, sizeof(*e));
    if (e == NULL)
        return;
    size_t n = 0;
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        const redisReply *x = r->element[1]->element[i];
        json_t *j = x->type == REDIS_REPLY_STRING
                        ? json_loadb(x->str, x->len, 0, NULL)
                        : NULL;
        if (j != NULL && sv_override_from_json(j, &e[n]) == 0)
            n++;
        json_decref(j);
    }
    json_t *log = json_array();
    for (size_t i = r->element[2]->elements; i-- > 0;) {
        const redisReply *x = r->element[2]->element[i];
        json_t *j = x->type == REDIS_REPLY_STRING
                        ? json_loadb(x->str, x->len, 0, NULL)
                        : NULL;
        if (j != NULL)
            json_array_append_new(log, j);
    }
    pthread_mutex_lock(&lim->lock);
    size_t cap = r->element[1]->elements + 1;
    carry_holds(lim, &e, &n, &cap, sv_limits_now_ms(lim->s));
    for (size_t i = 0; i < lim->n; i++)
        sv_override_release(&lim->e[i]);
    free(lim->e);
    lim->e = e;
    lim->n = n;
    lim->cap = cap;
    lim->version = v;
    json_decref(lim->redis_log);
    lim->redis_log = log;
    lim->synced_ms = sv_limits_now_ms(lim->s);
    sv_limits_publish(lim);
    pthread_mutex_unlock(&lim->lock);
}

static void version_reply_cb(const redisReply *r, void *priv)
{
    struct sv_limits *lim = priv;
    if (r == NULL ||
        (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        lim->reading = 0;
        return;
    }
    uint64_t v = r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
    pthread_mutex_lock(&lim->lock);
    int same = v == lim->version && lim->synced_ms != 0;
    if (same)
        lim->synced_ms = sv_limits_now_ms(lim->s);
    pthread_mutex_unlock(&lim->lock);
    if (same) {
        lim->reading = 0;
        return;
    }
    const char *argv[] = {"EVAL",         sv_overrides_read_lua, "3",
                          lim->key_table, lim->key_version,      lim->key_log};
    if (sd_redis_command(lim->control->dec, lim->key_table, 6, argv, NULL,
                         read_reply_cb, lim) != 0)
        lim->reading = 0;
}

/* Reads Redis's version, and the table when it moved. */
void sv_limits_sync(struct sv_limits *lim)
{
    if (lim->reading)
        return;
    const char *argv[] = {"GET", lim->key_version};
    lim->reading = 1;
    if (sd_redis_command(lim->control->dec, lim->key_version, 2, argv, NULL,
                         version_reply_cb, lim) != 0)
        lim->reading = 0;
}

/* Removes from Redis the overrides expired for a while, so that the
 * table does not grow with them (any node may: the version guards). */
void sv_limits_purge(struct sv_limits *lim, int64_t t)
{
    pthread_mutex_lock(&lim->lock);
    for (size_t i = 0; i < lim->n; i++) {
        const sv_override *e = &lim->e[i];
        if (e->expires_ms + PURGE_AFTER_MS > t || e->version == 0 ||
            e->held_ms > t)
            continue; /* not long expired, or not the store's */
        sv_limits_op *op = calloc(1, sizeof(*op));
        if (op == NULL)
            break;
        op->del = 1;
        op->abandoned = 1; /* nobody waits on it */
        snprintf(op->rule, sizeof(op->rule), "%s", e->rule);
        op->source = e->source;
        op->match = SV_MATCH_VERSION;
        op->versions[0] = e->version;
        op->n_versions = 1;
        op->done = NULL;
        pthread_mutex_unlock(&lim->lock);
        if (sv_limits_write_redis(lim, op, NULL, t) != SV_AGAIN)
            free(op);
        return; /* one a tick is plenty */
    }
    pthread_mutex_unlock(&lim->lock);
}
