/*
 * limits.c - the runtime limits (limits.h): the table of overrides, its
 * store, and the generation of the rules set that applies it.
 *
 * The table.  One override per (rule id, source); a manual override wins
 * over the advisor's for the same rule.  Each carries the identity of the
 * rule's numbers when it was set (`base`): a rules reload that changes
 * them makes the override stale (listed, not applied, left to expire), so
 * a rolling deploy of new numbers is never undone by an old override.
 * Each carries a version, the ETag that If-Match compares, so that two
 * operators do not overwrite each other silently.
 *
 * The store.  With the memory store the table is the process's.  With
 * --store redis every node shares it: a hash of JSON entries, a version
 * counter and a capped list of change events under one hash tag, written
 * by one script that checks the precondition and bumps the version
 * atomically, and read by each node's control thread every second when
 * the version moved.  Nothing of this is on the request path: requests
 * read the generation in force (rules_set.h), and when Redis is down a
 * node keeps the last table and expires its entries on its own clock.
 *
 * Applying.  A change, a reload or an expiry derives a new generation of
 * the loaded set: each overridden rule becomes a copy with the effective
 * numbers and an sl_limit_override() of its limit, which shares the
 * rule's counters, so no client gains or loses what it used.  The new
 * generation is published as the rules are (rules_reload.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "runtime/decide.h"
#include "runtime/label.h"
#include "control/limits.h"
#include "runtime/metrics.h"
#include "log/log.h"

#define TICK_MS 1000
/* A write waits this long on Redis, then answers 503. */
#define WRITE_TIMEOUT_MS 2000
/* An expired override is removed from Redis this long after. */
#define PURGE_AFTER_MS 60000

typedef struct entry {
    char *rule;
    sv_source source;
    int64_t requests_per_unit, burst;
    char *reason;
    int64_t created_ms, expires_ms;
    uint64_t base;
    uint64_t version;
} entry;

/* A write in flight on Redis: what its reply is for.  op is NULL once the
 * write timed out (the reply is then dropped). */
typedef struct ticket {
    struct sv_limits *lim;
    sv_limits_op *op;
    entry wrote; /* the entry written (not for a delete) */
} ticket;

struct sv_limits {
    sv_server *s;
    /* The table and the loaded set, guarded by lock: the control thread
     * changes the table, the main thread a reload. */
    pthread_mutex_t lock;
    entry *e;
    size_t n, cap;
    uint64_t version; /* the store's version the table is at */
    sv_rules *loaded; /* the base of the set in force */
    int64_t next_expiry_ms;
    /* The change log: a ring of JSON texts (the memory store), or the
     * list last read from Redis. */
    char *log[SV_LOG_EVENTS];
    size_t log_next;
    json_t *redis_log;
    /* The control thread's. */
    sv_worker *control;
    uv_timer_t tick;
    int ticking;
    int reading; /* a read of Redis is in flight */
    sv_limits_op *pending;
    int64_t synced_ms; /* when the table last matched Redis's */
    char key_table[128], key_version[128], key_log[128];
};

static const char *const source_names[SV_N_SOURCES] = {"manual", "advisor",
                                                       "controller"};

const char *sv_source_name(sv_source s)
{
    return source_names[s];
}

int sv_source_parse(const char *name, sv_source *out)
{
    for (int i = 0; i < SV_N_SOURCES; i++)
        if (strcmp(name, source_names[i]) == 0) {
            *out = (sv_source)i;
            return 0;
        }
    return -1;
}

static int64_t now_ms(const sv_server *s)
{
    return sd_engine_clock(s->engine) / SL_NS_PER_MS;
}

/* The identity of a rule's numbers: an override set under other numbers
 * is stale. */
static uint64_t base_of(const sl_rule *r)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int64_t words[8] = {r->action, r->requests_per_unit, r->period, 0, 0, 0, 0,
                        0};
    if (r->limit != NULL) {
        const sl_limit_config *c = sl_limit_get_config(r->limit);
        words[3] = c->algorithm;
        words[4] = c->limit;
        words[5] = c->burst;
        words[6] = c->step;
        words[7] = (int64_t)c->flags;
    }
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        h = (h ^ (uint64_t)words[i]) * 0x100000001b3ULL;
    return h;
}

static void entry_release(entry *e)
{
    free(e->rule);
    free(e->reason);
    memset(e, 0, sizeof(*e));
}

static entry *find(struct sv_limits *lim, const char *rule, sv_source source)
{
    for (size_t i = 0; i < lim->n; i++)
        if (lim->e[i].source == source && strcmp(lim->e[i].rule, rule) == 0)
            return &lim->e[i];
    return NULL;
}

/* ---- JSON of entries and events ---- */

/* An entry's JSON (the API's, and Redis's copy); base as 16 hex digits,
 * since JSON numbers do not hold 64 bits. */
static json_t *entry_to_json(const entry *e)
{
    char hex[17];
    snprintf(hex, sizeof(hex), "%016" PRIx64, e->base);
    return json_pack("{s:s,s:s,s:I,s:I,s:s,s:I,s:I,s:s,s:I}", "rule", e->rule,
                     "source", sv_source_name(e->source), "requests_per_unit",
                     (json_int_t)e->requests_per_unit, "burst",
                     (json_int_t)e->burst, "reason", e->reason ? e->reason : "",
                     "created_ms", (json_int_t)e->created_ms, "expires_ms",
                     (json_int_t)e->expires_ms, "base", hex, "version",
                     (json_int_t)e->version);
}

/* An entry from its JSON (Redis's copy): 0, or -1 for one that is not
 * an entry (it is then left out). */
static int entry_from_json(const json_t *j, entry *e)
{
    const char *rule, *source, *reason = "", *base;
    json_int_t rpu, burst, created, expires, version;
    memset(e, 0, sizeof(*e));
    if (json_unpack((json_t *)j, "{s:s,s:s,s:I,s:I,s?s,s:I,s:I,s:s,s:I}",
                    "rule", &rule, "source", &source, "requests_per_unit", &rpu,
                    "burst", &burst, "reason", &reason, "created_ms", &created,
                    "expires_ms", &expires, "base", &base, "version",
                    &version) != 0 ||
        sv_source_parse(source, &e->source) != 0)
        return -1;
    e->rule = strdup(rule);
    e->reason = strdup(reason);
    e->requests_per_unit = rpu;
    e->burst = burst;
    e->created_ms = created;
    e->expires_ms = expires;
    e->base = strtoull(base, NULL, 16);
    e->version = (uint64_t)version;
    if (e->rule == NULL || e->reason == NULL) {
        entry_release(e);
        return -1;
    }
    return 0;
}

/* A change's event: what was set or deleted, and what it replaced. */
static json_t *event_json(const char *action, const entry *now,
                          const entry *before, const char *rule,
                          sv_source source, int64_t at_ms, uint64_t seq)
{
    json_t *ev = json_pack("{s:I,s:I,s:s,s:s,s:s}", "seq", (json_int_t)seq,
                           "at_ms", (json_int_t)at_ms, "action", action, "rule",
                           rule, "source", sv_source_name(source));
    if (now != NULL) {
        json_object_set_new(ev, "requests_per_unit",
                            json_integer(now->requests_per_unit));
        json_object_set_new(ev, "burst", json_integer(now->burst));
        json_object_set_new(ev, "expires_ms", json_integer(now->expires_ms));
        json_object_set_new(ev, "reason", json_string(now->reason));
    }
    json_object_set_new(ev, "previous",
                        before
                            ? json_pack("{s:I,s:I}", "requests_per_unit",
                                        (json_int_t)before->requests_per_unit,
                                        "burst", (json_int_t)before->burst)
                            : json_null());
    return ev;
}

static void log_add(struct sv_limits *lim, json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (text == NULL)
        return;
    free(lim->log[lim->log_next]);
    lim->log[lim->log_next] = text;
    lim->log_next = (lim->log_next + 1) % SV_LOG_EVENTS;
}

/* ---- applying: a generation of the loaded set ---- */

/* Every thread adopts the set in force between two requests.  (At start
 * there are no threads yet: n_workers is 0 until they run.) */
static void wake_all(sv_server *s)
{
    for (int i = 0; i < s->n_workers; i++)
        uv_async_send(&s->workers[i].wake);
}

/* The generation of lim->loaded with the table as at t: NULL when out of
 * memory.  Under lim->lock. */
static sv_rules *derive(struct sv_limits *lim, int64_t t)
{
    sv_rules *loaded = lim->loaded;
    size_t n = sl_rules_rule_count(loaded->rules);
    sv_effective **eff = NULL;
    lim->next_expiry_ms = INT64_MAX;
    for (size_t i = 0; i < lim->n; i++) {
        const entry *e = &lim->e[i];
        size_t idx = sv_rule_find(loaded, e->rule);
        if (e->expires_ms <= t || idx == SIZE_MAX)
            continue;
        const sl_rule *rule = sl_rules_rule(loaded->rules, idx);
        if (rule->action != SL_RULE_LIMIT || base_of(rule) != e->base)
            continue; /* stale */
        if (eff == NULL && (eff = calloc(n, sizeof(*eff))) == NULL)
            return NULL;
        if (eff[idx] != NULL) {
            /* manual > min(advisor, controller) */
            int64_t had = eff[idx]->rule.requests_per_unit;
            if (strcmp(eff[idx]->source, "manual") == 0 ||
                (e->source != SV_SOURCE_MANUAL &&
                 (had < e->requests_per_unit ||
                  (had == e->requests_per_unit &&
                   strcmp(eff[idx]->source, "advisor") == 0))))
                continue; /* a tie goes to the advisor, as in state_of */
            sl_limit_free(eff[idx]->limit);
            free(eff[idx]);
            eff[idx] = NULL;
        }
        sv_effective *x = calloc(1, sizeof(*x));
        if (x == NULL || sl_limit_override(rule->limit, e->requests_per_unit,
                                           e->burst, &x->limit, NULL, 0) != 0) {
            free(x);
            continue; /* checked when set: a rule's numbers changed */
        }
        x->rule = *rule;
        x->rule.limit = x->limit;
        x->rule.requests_per_unit = e->requests_per_unit;
        x->source = sv_source_name(e->source);
        x->expires_ms = e->expires_ms;
        eff[idx] = x;
        if (e->expires_ms < lim->next_expiry_ms)
            lim->next_expiry_ms = e->expires_ms;
    }
    return sv_rules_derive(loaded, eff);
}

/* Derives and publishes the set in force.  Under lim->lock. */
static void publish(struct sv_limits *lim)
{
    sv_server *s = lim->s;
    if (lim->loaded == NULL)
        return;
    sv_rules *gen = derive(lim, now_ms(s));
    if (gen == NULL) {
        sl__log(SL__LOG_ERROR, NULL,
                "runtime limits: out of memory; the last "
                "limits stay in force");
        return;
    }
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *old = s->current;
    s->current = gen;
    pthread_mutex_unlock(&s->reload_lock);
    sv_rules_release(old);
    wake_all(s);
}

void sv_limits_loaded(sv_server *s, sv_rules *loaded)
{
    struct sv_limits *lim = s->limits;
    pthread_mutex_lock(&lim->lock);
    sv_rules *old = lim->loaded;
    lim->loaded = loaded;
    publish(lim);
    pthread_mutex_unlock(&lim->lock);
    sv_rules_release(old);
}

/* ---- the lifecycle ---- */

int sv_limits_init(sv_server *s)
{
    struct sv_limits *lim = calloc(1, sizeof(*lim));
    if (lim == NULL)
        return -1;
    lim->s = s;
    lim->next_expiry_ms = INT64_MAX;
    pthread_mutex_init(&lim->lock, NULL);
    s->limits = lim;
    return 0;
}

void sv_limits_release(sv_server *s)
{
    struct sv_limits *lim = s->limits;
    if (lim == NULL)
        return;
    for (size_t i = 0; i < lim->n; i++)
        entry_release(&lim->e[i]);
    free(lim->e);
    for (size_t i = 0; i < SV_LOG_EVENTS; i++)
        free(lim->log[i]);
    json_decref(lim->redis_log);
    sv_rules_release(lim->loaded);
    pthread_mutex_destroy(&lim->lock);
    free(lim);
    s->limits = NULL;
}

/* ---- writes ---- */

/* Checks op against the loaded rules and makes what it would set: 0, or
 * -1 with op->status and op->err.  Under lim->lock. */
static int prepare(struct sv_limits *lim, sv_limits_op *op, entry *out,
                   int64_t t)
{
    memset(out, 0, sizeof(*out));
    if (op->del)
        return 0;
    size_t idx = sv_rule_find(lim->loaded, op->rule);
    if (idx == SIZE_MAX) {
        op->status = 404;
        snprintf(op->err, sizeof(op->err), "no rule with the id '%.200s'",
                 op->rule);
        return -1;
    }
    const sl_rule *rule = sl_rules_rule(lim->loaded->rules, idx);
    if (rule->action != SL_RULE_LIMIT) {
        op->status = 400;
        snprintf(op->err, sizeof(op->err),
                 "rule '%.200s' is %s, not a limit: nothing to override",
                 op->rule,
                 rule->action == SL_RULE_DENY ? "a deny rule" : "unlimited");
        return -1;
    }
    sl_limit *check;
    char why[160];
    if (sl_limit_override(rule->limit, op->requests_per_unit, op->burst, &check,
                          why, sizeof(why)) != 0) {
        op->status = 400;
        snprintf(op->err, sizeof(op->err), "%s", why);
        return -1;
    }
    sl_limit_free(check);
    out->rule = strdup(op->rule);
    out->reason = strdup(op->reason);
    out->source = op->source;
    out->requests_per_unit = op->requests_per_unit;
    out->burst = op->burst;
    out->created_ms = t;
    out->expires_ms = t + op->ttl_ms;
    out->base = base_of(rule);
    if (out->rule == NULL || out->reason == NULL) {
        entry_release(out);
        op->status = 503;
        snprintf(op->err, sizeof(op->err), "out of memory");
        return -1;
    }
    return 0;
}

/* The precondition against the version there (0: none): 0, or -1 with
 * op->status and op->err. */
static int precondition(sv_limits_op *op, uint64_t there)
{
    op->now_version = there;
    if (op->match == SV_MATCH_VERSION && op->version != there) {
        op->status = 412;
        snprintf(op->err, sizeof(op->err),
                 there ? "the override is at version %" PRIu64 ", not %" PRIu64
                         ": read it again"
                       : "no such override (If-Match %" PRIu64 ")",
                 there ? there : op->version, op->version);
        return -1;
    }
    if (op->match == SV_MATCH_ABSENT && there != 0) {
        op->status = 412;
        snprintf(op->err, sizeof(op->err),
                 "the override exists (version %" PRIu64 ")", there);
        return -1;
    }
    if (op->match == SV_MATCH_NONE && there != 0) {
        op->status = 428;
        snprintf(op->err, sizeof(op->err),
                 "the override exists (version %" PRIu64
                 "): send If-Match with its version",
                 there);
        return -1;
    }
    if (op->del && there == 0) {
        op->status = 404;
        snprintf(op->err, sizeof(op->err), "no such override");
        return -1;
    }
    return 0;
}

/* Puts e (taken) into the table, or removes (rule, source) when e is
 * NULL, at version; logs the change.  Under lim->lock. */
static void apply(struct sv_limits *lim, const char *rule, sv_source source,
                  entry *e, uint64_t version, int64_t t, int log)
{
    entry *old = find(lim, rule, source);
    if (log)
        log_add(lim, event_json(e ? "set" : "delete", e, old, rule, source, t,
                                version));
    if (e == NULL) {
        if (old != NULL) {
            entry_release(old);
            *old = lim->e[--lim->n];
        }
        return;
    }
    e->version = version;
    if (old != NULL) {
        entry_release(old);
        *old = *e;
        return;
    }
    if (lim->n == lim->cap) {
        size_t cap = lim->cap ? lim->cap * 2 : 16;
        entry *g = realloc(lim->e, cap * sizeof(*g));
        if (g == NULL) {
            entry_release(e);
            return;
        }
        lim->e = g;
        lim->cap = cap;
    }
    lim->e[lim->n++] = *e;
}

static void op_end(sv_limits_op *op)
{
    if (op->abandoned)
        free(op);
    else
        op->done(op->owner);
}

static void unlink_pending(struct sv_limits *lim, sv_limits_op *op)
{
    for (sv_limits_op **p = &lim->pending; *p != NULL; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            return;
        }
}

/* The write script: KEYS table, version, log; ARGV field, precondition
 * ("" none, "0" absent, else the version), the entry's JSON ("" to
 * delete), the event's JSON.  {1, version} written; {0, there} the
 * precondition failed. */
static const char write_script[] =
    "local cur = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "local there = 0\n"
    "if cur then there = cjson.decode(cur).version end\n"
    "if (ARGV[2] == '' and there ~= 0) or (ARGV[2] ~= '' and\n"
    "    tonumber(ARGV[2]) ~= there) or (ARGV[3] == '' and there == 0) then\n"
    "  return {0, there}\n"
    "end\n"
    "local v = redis.call('INCR', KEYS[2])\n"
    "if ARGV[3] == '' then\n"
    "  redis.call('HDEL', KEYS[1], ARGV[1])\n"
    "else\n"
    "  local e = cjson.decode(ARGV[3]); e.version = v\n"
    "  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(e))\n"
    "end\n"
    "local ev = cjson.decode(ARGV[4]); ev.seq = v\n"
    "if cur then local c = cjson.decode(cur)\n"
    "  ev.previous = {requests_per_unit = c.requests_per_unit, burst = "
    "c.burst}\n"
    "end\n"
    "redis.call('LPUSH', KEYS[3], cjson.encode(ev))\n"
    "redis.call('LTRIM', KEYS[3], 0, 1023)\n"
    "return {1, v}\n";

static void sync_now(struct sv_limits *lim);

static void write_reply_cb(const redisReply *r, void *priv)
{
    ticket *tk = priv;
    struct sv_limits *lim = tk->lim;
    sv_limits_op *op = tk->op;
    if (op == NULL) { /* timed out: answered already */
        entry_release(&tk->wrote);
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
        entry_release(&tk->wrote);
    } else if (r->element[0]->integer == 0) {
        precondition(op, (uint64_t)r->element[1]->integer);
        if (op->status == 0) { /* raced: it changed under us */
            op->status = 412;
            snprintf(op->err, sizeof(op->err), "the override changed");
        }
        entry_release(&tk->wrote);
    } else {
        uint64_t v = (uint64_t)r->element[1]->integer;
        pthread_mutex_lock(&lim->lock);
        int existed = find(lim, op->rule, op->source) != NULL;
        apply(lim, op->rule, op->source, op->del ? NULL : &tk->wrote, v,
              now_ms(lim->s), 0);
        publish(lim);
        pthread_mutex_unlock(&lim->lock);
        op->status = op->del ? 204 : existed ? 200 : 201;
        op->now_version = v;
        sync_now(lim); /* others' changes, and the log */
    }
    free(tk);
    op_end(op);
}

static void keys_init(struct sv_limits *lim)
{
    /* One hash tag, so that a cluster keeps them on one master and the
     * script may touch all three. */
    snprintf(lim->key_table, sizeof(lim->key_table), "sluice:{overrides}");
    snprintf(lim->key_version, sizeof(lim->key_version),
             "sluice:{overrides}:version");
    snprintf(lim->key_log, sizeof(lim->key_log), "sluice:{overrides}:log");
}

static int write_redis(struct sv_limits *lim, sv_limits_op *op, entry *e,
                       int64_t t)
{
    char field[600], match[24] = "";
    snprintf(field, sizeof(field), "%s|%s", sv_source_name(op->source),
             op->rule);
    if (op->match == SV_MATCH_ABSENT)
        snprintf(match, sizeof(match), "0");
    else if (op->match == SV_MATCH_VERSION)
        snprintf(match, sizeof(match), "%" PRIu64, op->version);
    char *ej = NULL, *evj;
    if (!op->del) {
        json_t *j = entry_to_json(e);
        ej = json_dumps(j, JSON_COMPACT);
        json_decref(j);
    }
    json_t *ev = event_json(op->del ? "delete" : "set", op->del ? NULL : e,
                            NULL, op->rule, op->source, t, 0);
    json_object_del(ev, "previous");
    evj = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    ticket *tk = calloc(1, sizeof(*tk));
    int rc = -1;
    if (tk != NULL && evj != NULL && (op->del || ej != NULL)) {
        const char *argv[] = {
            "EVAL",       write_script, "3",   lim->key_table, lim->key_version,
            lim->key_log, field,        match, ej ? ej : "",   evj};
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
            entry_release(e);
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

int sv_limits_write(sv_worker *control, sv_limits_op *op)
{
    struct sv_limits *lim = control->server->limits;
    int64_t t = now_ms(lim->s);
    entry e;
    op->status = 0;
    op->err[0] = '\0';
    pthread_mutex_lock(&lim->lock);
    entry *there = find(lim, op->rule, op->source);
    int rc = prepare(lim, op, &e, t);
    if (rc == 0 && !sd_engine_uses_redis(lim->s->engine) &&
        precondition(op, there ? there->version : 0) != 0) {
        entry_release(&e);
        rc = -1;
    }
    if (rc != 0) {
        pthread_mutex_unlock(&lim->lock);
        return 0;
    }
    if (sd_engine_uses_redis(lim->s->engine)) {
        /* Redis checks the precondition against the shared table. */
        pthread_mutex_unlock(&lim->lock);
        return write_redis(lim, op, &e, t);
    }
    op->status = op->del ? 204 : there ? 200 : 201;
    op->now_version = ++lim->version;
    apply(lim, op->rule, op->source, op->del ? NULL : &e, lim->version, t, 1);
    publish(lim);
    pthread_mutex_unlock(&lim->lock);
    return 0;
}

void sv_limits_abandon(sv_limits_op *op)
{
    if (op->done != NULL && op->status == 0)
        op->abandoned = 1; /* freed when its write ends */
    else
        free(op);
}

int sv_limits_renew(sv_worker *control, const char *id, sv_source source,
                    int64_t requests, int64_t burst, int64_t ttl_ms,
                    const char *reason)
{
    json_t *there = sv_limits_override(control, id, source);
    int64_t t = now_ms(control->server);
    if (requests <= 0 && there == NULL)
        return 0; /* nothing to delete */
    if (requests > 0 && there != NULL &&
        json_integer_value(json_object_get(there, "requests_per_unit")) ==
            requests &&
        json_integer_value(json_object_get(there, "burst")) == burst &&
        json_integer_value(json_object_get(there, "expires_ms")) - t >
            ttl_ms / 2) {
        json_decref(there);
        return 0;
    }
    sv_limits_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        json_decref(there);
        return -1;
    }
    snprintf(op->rule, sizeof(op->rule), "%s", id);
    op->del = requests <= 0;
    op->source = source;
    op->requests_per_unit = requests;
    op->burst = burst;
    op->ttl_ms = ttl_ms;
    snprintf(op->reason, sizeof(op->reason), "%s", reason);
    op->match = there ? SV_MATCH_VERSION : SV_MATCH_ABSENT;
    op->version =
        there ? (uint64_t)json_integer_value(json_object_get(there, "version"))
              : 0;
    op->abandoned = 1; /* nobody waits: freed here or when its write ends */
    json_decref(there);
    if (sv_limits_write(control, op) == SV_AGAIN)
        return 1;
    int rc = op->status >= 400 ? -1 : 1;
    free(op);
    return rc;
}

/* ---- reading Redis ---- */

/* The read script: the version, the table and the log, at once. */
static const char read_script[] =
    "return {redis.call('GET', KEYS[2]) or '0', redis.call('HVALS', KEYS[1]),"
    " redis.call('LRANGE', KEYS[3], 0, 1023)}";

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
    entry *e = calloc(r->element[1]->elements + 1, sizeof(*e));
    if (e == NULL)
        return;
    size_t n = 0;
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        const redisReply *x = r->element[1]->element[i];
        json_t *j = x->type == REDIS_REPLY_STRING
                        ? json_loadb(x->str, x->len, 0, NULL)
                        : NULL;
        if (j != NULL && entry_from_json(j, &e[n]) == 0)
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
    for (size_t i = 0; i < lim->n; i++)
        entry_release(&lim->e[i]);
    free(lim->e);
    lim->e = e;
    lim->n = n;
    lim->cap = r->element[1]->elements + 1;
    lim->version = v;
    json_decref(lim->redis_log);
    lim->redis_log = log;
    lim->synced_ms = now_ms(lim->s);
    publish(lim);
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
        lim->synced_ms = now_ms(lim->s);
    pthread_mutex_unlock(&lim->lock);
    if (same) {
        lim->reading = 0;
        return;
    }
    const char *argv[] = {"EVAL",         read_script,      "3",
                          lim->key_table, lim->key_version, lim->key_log};
    if (sd_redis_command(lim->control->dec, lim->key_table, 6, argv, NULL,
                         read_reply_cb, lim) != 0)
        lim->reading = 0;
}

/* Reads Redis's version, and the table when it moved. */
static void sync_now(struct sv_limits *lim)
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
static void purge(struct sv_limits *lim, int64_t t)
{
    pthread_mutex_lock(&lim->lock);
    for (size_t i = 0; i < lim->n; i++) {
        const entry *e = &lim->e[i];
        if (e->expires_ms + PURGE_AFTER_MS > t)
            continue;
        sv_limits_op *op = calloc(1, sizeof(*op));
        if (op == NULL)
            break;
        op->del = 1;
        op->abandoned = 1; /* nobody waits on it */
        snprintf(op->rule, sizeof(op->rule), "%s", e->rule);
        op->source = e->source;
        op->match = SV_MATCH_VERSION;
        op->version = e->version;
        op->done = NULL;
        pthread_mutex_unlock(&lim->lock);
        if (write_redis(lim, op, NULL, t) != SV_AGAIN)
            free(op);
        return; /* one a tick is plenty */
    }
    pthread_mutex_unlock(&lim->lock);
}

/* ---- the control thread's tick ---- */

static void tick_cb(uv_timer_t *h)
{
    struct sv_limits *lim = h->data;
    int64_t t = now_ms(lim->s);
    /* Writes Redis did not answer in time. */
    for (sv_limits_op **p = &lim->pending; *p != NULL;) {
        sv_limits_op *op = *p;
        if ((int64_t)op->started_ms + WRITE_TIMEOUT_MS > t) {
            p = &op->next;
            continue;
        }
        *p = op->next;
        ((ticket *)op->ticket)->op = NULL; /* its reply will be dropped */
        op->status = 503;
        snprintf(op->err, sizeof(op->err),
                 "the store did not answer within %d ms", WRITE_TIMEOUT_MS);
        op_end(op);
    }
    pthread_mutex_lock(&lim->lock);
    if (t >= lim->next_expiry_ms)
        publish(lim); /* an override expired: its rule is back */
    pthread_mutex_unlock(&lim->lock);
    if (sd_engine_uses_redis(lim->s->engine)) {
        sync_now(lim);
        purge(lim, t);
    }
}

int sv_limits_start(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    lim->control = control;
    keys_init(lim);
    uv_timer_init(&control->loop, &lim->tick);
    lim->tick.data = lim;
    uv_timer_start(&lim->tick, tick_cb, 100, TICK_MS);
    lim->ticking = 1;
    return 0;
}

static void tick_closed_cb(uv_handle_t *h)
{
    (void)h;
}

void sv_limits_stop(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    if (lim->ticking) {
        lim->ticking = 0;
        uv_close((uv_handle_t *)&lim->tick, tick_closed_cb);
    }
}

/* ---- reading the table ---- */

/* What an entry is doing now, against the loaded rules. */
static const char *state_of(struct sv_limits *lim, const entry *e, int64_t t)
{
    if (e->expires_ms <= t)
        return "expired";
    size_t idx = sv_rule_find(lim->loaded, e->rule);
    if (idx == SIZE_MAX)
        return "unknown";
    const sl_rule *rule = sl_rules_rule(lim->loaded->rules, idx);
    if (rule->action != SL_RULE_LIMIT || base_of(rule) != e->base)
        return "stale";
    for (int k = 0; e->source != SV_SOURCE_MANUAL && k < SV_N_SOURCES; k++) {
        /* Shadowed by a manual one, or by a lower one of the other
         * automatic source (the lower wins; a tie, the advisor). */
        const entry *o = find(lim, e->rule, (sv_source)k);
        if (o == NULL || o == e || o->expires_ms <= t ||
            base_of(rule) != o->base)
            continue;
        if (o->source == SV_SOURCE_MANUAL ||
            o->requests_per_unit < e->requests_per_unit ||
            (o->requests_per_unit == e->requests_per_unit &&
             o->source == SV_SOURCE_ADVISOR))
            return "shadowed";
    }
    return "active";
}

static json_t *listed(struct sv_limits *lim, const entry *e, int64_t t)
{
    json_t *j = entry_to_json(e);
    json_object_set_new(j, "state", json_string(state_of(lim, e, t)));
    return j;
}

json_t *sv_limits_overrides(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    int64_t t = now_ms(lim->s);
    json_t *arr = json_array();
    pthread_mutex_lock(&lim->lock);
    for (size_t i = 0; i < lim->n; i++)
        json_array_append_new(arr, listed(lim, &lim->e[i], t));
    json_t *out = json_pack(
        "{s:o,s:I,s:s}", "overrides", arr, "version", (json_int_t)lim->version,
        "store", sd_engine_uses_redis(lim->s->engine) ? "redis" : "memory");
    if (sd_engine_uses_redis(lim->s->engine))
        json_object_set_new(out, "synced_ms", json_integer(lim->synced_ms));
    pthread_mutex_unlock(&lim->lock);
    return out;
}

json_t *sv_limits_override(sv_worker *control, const char *rule,
                           sv_source source)
{
    struct sv_limits *lim = control->server->limits;
    pthread_mutex_lock(&lim->lock);
    const entry *e = find(lim, rule, source);
    json_t *j = e ? listed(lim, e, now_ms(lim->s)) : NULL;
    pthread_mutex_unlock(&lim->lock);
    return j;
}

json_t *sv_limits_rules(sv_worker *w)
{
    const sv_rules *set = w->rules;
    const sl_rules *r = set->rules;
    json_t *arr = json_array();
    for (size_t i = 0; i < sl_rules_rule_count(r); i++) {
        const sl_rule *rule = sl_rules_rule(r, i);
        const sl_rule *now = sv_rules_in_force(set, rule);
        const sv_effective *e = set->effective ? set->effective[i] : NULL;
        const char *alg =
            rule->action == SL_RULE_LIMIT
                ? sl_algorithm_name(sl_limit_get_config(rule->limit)->algorithm)
            : rule->action == SL_RULE_DENY ? "deny"
                                           : "unlimited";
        json_t *j = json_pack(
            "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:b,s:s}", "id",
            sv_rule_id(set, i), "domain", rule->domain, "path", rule->path,
            "name", rule->name, "algorithm", alg, "requests_per_unit",
            (json_int_t)now->requests_per_unit, "base_requests_per_unit",
            (json_int_t)rule->requests_per_unit, "period_ms",
            (json_int_t)(rule->period / SL_NS_PER_MS), "shadow_mode",
            rule->shadow_mode, "source", e ? e->source : "rules");
        if (rule->action == SL_RULE_LIMIT) {
            json_object_set_new(
                j, "burst",
                json_integer(sl_limit_get_config(now->limit)->burst));
            json_object_set_new(
                j, "base_burst",
                json_integer(sl_limit_get_config(rule->limit)->burst));
        }
        if (e != NULL)
            json_object_set_new(j, "expires_ms", json_integer(e->expires_ms));
        json_array_append_new(arr, j);
    }
    return arr;
}

json_t *sv_limits_events(sv_worker *control, uint64_t after)
{
    struct sv_limits *lim = control->server->limits;
    json_t *arr = json_array();
    pthread_mutex_lock(&lim->lock);
    if (sd_engine_uses_redis(lim->s->engine)) {
        size_t i;
        json_t *ev;
        json_array_foreach(lim->redis_log, i, ev)
        {
            json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
            if ((uint64_t)seq > after)
                json_array_append(arr, ev);
        }
    } else {
        for (size_t k = 0; k < SV_LOG_EVENTS; k++) {
            const char *text = lim->log[(lim->log_next + k) % SV_LOG_EVENTS];
            json_t *ev = text ? json_loads(text, 0, NULL) : NULL;
            if (ev != NULL && (uint64_t)json_integer_value(
                                  json_object_get(ev, "seq")) > after)
                json_array_append(arr, ev);
            json_decref(ev);
        }
    }
    pthread_mutex_unlock(&lim->lock);
    return json_pack("{s:o}", "events", arr);
}

/* ---- /metrics ---- */

void sv_limits_metrics(sv_server *s, sv_buf *out)
{
    struct sv_limits *lim = s->limits;
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *set = s->current;
    if (set != NULL)
        atomic_fetch_add(&set->refs, 1);
    pthread_mutex_unlock(&s->reload_lock);
    if (set == NULL)
        return;
    sv_buf_addstr(out,
                  "# HELP sluice_limit_requests_per_unit a rule's limit in "
                  "force (limit=\"effective\") and as loaded (limit=\"base\"), "
                  "with the source of the one in force\n"
                  "# TYPE sluice_limit_requests_per_unit gauge\n");
    for (size_t i = 0; i < sl_rules_rule_count(set->rules); i++) {
        const sl_rule *rule = sl_rules_rule(set->rules, i);
        const sv_effective *e = set->effective ? set->effective[i] : NULL;
        if (rule->action != SL_RULE_LIMIT)
            continue;
        const char *label = sv_rule_label(rule);
        for (int k = 0; k < 2; k++) {
            sv_buf_addstr(out, "sluice_limit_requests_per_unit{domain=\"");
            sv_label_value(out, rule->domain, strlen(rule->domain));
            sv_buf_addstr(out, "\",rule=\"");
            sv_label_value(out, label, strlen(label));
            sv_buf_printf(out, "\",limit=\"%s\",source=\"%s\"} %lld\n",
                          k ? "base" : "effective",
                          k   ? "rules"
                          : e ? e->source
                              : "rules",
                          (long long)(k || e == NULL
                                          ? rule->requests_per_unit
                                          : e->rule.requests_per_unit));
        }
    }
    sv_rules_release(set);
    if (lim == NULL)
        return; /* a server without runtime limits (tests' fixtures) */
    size_t states[5] = {0};
    static const char *const names[5] = {"active", "stale", "unknown",
                                         "shadowed", "expired"};
    pthread_mutex_lock(&lim->lock);
    int64_t t = now_ms(s), synced = lim->synced_ms;
    for (size_t i = 0; lim->loaded != NULL && i < lim->n; i++) {
        const char *st = state_of(lim, &lim->e[i], t);
        for (int k = 0; k < 5; k++)
            states[k] += strcmp(st, names[k]) == 0;
    }
    pthread_mutex_unlock(&lim->lock);
    sv_buf_addstr(out, "# HELP sluice_overrides overrides of rules' limits, "
                       "by state\n# TYPE sluice_overrides gauge\n");
    for (int k = 0; k < 5; k++)
        sv_buf_printf(out, "sluice_overrides{state=\"%s\"} %zu\n", names[k],
                      states[k]);
    if (sd_engine_uses_redis(s->engine))
        sv_buf_printf(out,
                      "# HELP sluice_overrides_sync_age_seconds since the "
                      "overrides last matched Redis's\n"
                      "# TYPE sluice_overrides_sync_age_seconds gauge\n"
                      "sluice_overrides_sync_age_seconds %.3f\n",
                      synced ? (double)(t - synced) / 1e3 : -1.0);
}
