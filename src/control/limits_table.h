/*
 * limits_table.h - the runtime limits' state as the files of
 * src/control/limits*.c share it: the table of overrides, its lock, its
 * change log and its keys on Redis.  limits.h is the API; nothing outside
 * those files includes this.
 *
 * The table.  One override per (rule id, source); a manual override wins
 * over the advisor's for the same rule.  Each carries the identity of the
 * rule's numbers when it was set (`base`): a rules reload that changes
 * them makes the override stale (listed, not applied, left to expire), so
 * a rolling deploy of new numbers is never undone by an old override.
 * Each carries a version, the ETag that If-Match compares, so that two
 * operators do not overwrite each other silently.
 */
#ifndef SV_LIMITS_TABLE_H
#define SV_LIMITS_TABLE_H

#include "control/limits.h"

typedef struct sv_override {
    char *rule;
    sv_source source;
    int64_t requests_per_unit, burst;
    char *reason;
    int64_t created_ms, expires_ms;
    uint64_t base;
    uint64_t version; /* the store's; 0: this node's alone (a hold) */
    /* Held here past expires_ms, while the store cannot take the
     * renewal (sv_limits_hold); 0: not held. */
    int64_t held_ms;
} sv_override;

/* Until when e applies: its TTL, or its hold. */
static inline int64_t sv_override_until(const sv_override *e)
{
    return e->held_ms > e->expires_ms ? e->held_ms : e->expires_ms;
}

struct sv_limits {
    sv_server *s;
    /* The table and the loaded set, guarded by lock: the control thread
     * changes the table, the main thread a reload. */
    pthread_mutex_t lock;
    sv_override *e;
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

/* limits.c: the table and the generations it makes. */
int64_t sv_limits_now_ms(const sv_server *s);
/* The identity of a rule's numbers: an override set under other numbers
 * is stale. */
uint64_t sv_override_base(const sl_rule *r);
sv_override *sv_override_find(struct sv_limits *lim, const char *rule,
                              sv_source source);
/* Puts e (taken) into the table, or removes (rule, source) when e is
 * NULL, at version; logs the change when log is 1 (the memory store:
 * Redis keeps its own log).  Under lim->lock. */
void sv_override_apply(struct sv_limits *lim, const char *rule,
                       sv_source source, sv_override *e, uint64_t version,
                       int64_t t, int log);
/* Derives and publishes the set in force.  Under lim->lock. */
void sv_limits_publish(struct sv_limits *lim);

/* limits.c: a write's precondition against the version there (0: none):
 * 0, or -1 with op->status and op->err; and the end of an op, to its
 * owner or freed when abandoned. */
int sv_limits_precondition(sv_limits_op *op, uint64_t there);
void sv_limits_op_end(sv_limits_op *op);

/* limits_override.c: an override as a value: its fields freed, its JSON
 * (the API's, and Redis's copy), and a change's event. */
void sv_override_release(sv_override *e);
json_t *sv_override_json(const sv_override *e);
int sv_override_from_json(const json_t *j, sv_override *e);
json_t *sv_override_event(const char *action, const sv_override *now,
                          const sv_override *before, const char *rule,
                          sv_source source, int64_t at_ms, uint64_t seq);

/* limits_redis.c: the table on Redis (--store redis).  Writes return as
 * sv_limits_write() does; the rest run on the control thread's tick. */
void sv_limits_keys(struct sv_limits *lim);
int sv_limits_write_redis(struct sv_limits *lim, sv_limits_op *op,
                          sv_override *e, int64_t t);
void sv_limits_time_out(struct sv_limits *lim, int64_t t);
void sv_limits_sync(struct sv_limits *lim);
void sv_limits_purge(struct sv_limits *lim, int64_t t);
/* The scripts of src/control/lua/, embedded by CMake (sl_embed_lua). */
extern const char sv_overrides_write_lua[];
extern const char sv_overrides_read_lua[];

/* limits_views.c: what an override is doing now, against the loaded
 * rules (active, stale, unknown, shadowed, expired).  Under lim->lock. */
const char *sv_override_state(struct sv_limits *lim, const sv_override *e,
                              int64_t t);

#endif
