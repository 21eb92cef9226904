/*
 * limits.h - the runtime limits: overrides of the rules' limits, set
 * through the admin API (admin_api.c) or by the advisor, kept by the
 * process (the memory store) or in Redis for every node (--store redis),
 * and applied as a generation of the rules set (rules_set.h), so that the
 * request path reads them like the rules, with no lock.  Everything here
 * but sv_limits_loaded() runs on the control thread (worker.h).  The
 * files limits*.c implement it, sharing limits_table.h.
 */
#ifndef SV_LIMITS_H
#define SV_LIMITS_H

#include <jansson.h>

#include "runtime/worker.h"

/* Who set an override.  A manual one wins; else the lower of the
 * advisor's and the adaptive controller's (`sluice proxy`,
 * docs/adaptive.md) is in force. */
typedef enum sv_source {
    SV_SOURCE_MANUAL,
    SV_SOURCE_ADVISOR,
    SV_SOURCE_CONTROLLER
} sv_source;
#define SV_N_SOURCES 3
const char *sv_source_name(sv_source s);
int sv_source_parse(const char *name, sv_source *out); /* 0 or -1 */

/* The most overrides at once, and events the change log keeps. */
#define SV_MAX_OVERRIDES 10000
#define SV_LOG_EVENTS 1024

/* A write of the admin API or the advisor: set or delete one override. */
/* Entity tags one If-Match may list. */
#define SV_MAX_IF_MATCH 8

typedef struct sv_limits_op {
    /* In. */
    int del;        /* 1: delete it; 0: set it */
    char rule[512]; /* the rule's id (sv_rule_id) */
    sv_source source;
    int64_t requests_per_unit, burst; /* burst 0: scaled (sluice.h) */
    int64_t ttl_ms;
    char reason[256];
    /* The precondition: SV_MATCH_NONE (refused with 428 when the
     * override exists: a client must say which version it replaces),
     * SV_MATCH_ABSENT (If-None-Match: *), SV_MATCH_EXISTS (If-Match: *),
     * or SV_MATCH_VERSION (If-Match: a list of entity tags: it holds
     * when the version there is one of versions[0..n_versions), which
     * may be none: tags that name no version match nothing). */
    int match;
    uint64_t versions[SV_MAX_IF_MATCH];
    size_t n_versions;
    /* Out: the HTTP status (200 set, 201 created, 204 deleted, 404, 412
     * the version differs, 428 a version is needed, 503 the store), the
     * override's version now, and a message for the errors. */
    int status;
    uint64_t now_version;
    char err[320];
    /* A write that waits on Redis: done(owner) runs once it ends. */
    sd_done_fn done;
    void *owner;
    /* Private. */
    int abandoned;
    uint64_t started_ms;
    void *ticket; /* its write in flight on Redis */
    struct sv_limits_op *next;
} sv_limits_op;

enum { SV_MATCH_NONE, SV_MATCH_ABSENT, SV_MATCH_EXISTS, SV_MATCH_VERSION };

/* The runtime limits as the runtime calls them (sv_plane): the
 * functions below. */
extern const sv_plane sv_limits_plane;

/* sv_server_run(): made before the threads, started on the control
 * thread's loop, stopped there when it drains, released at the end. */
int sv_limits_init(sv_server *s);
int sv_limits_start(sv_worker *control);
void sv_limits_stop(sv_worker *control);
void sv_limits_release(sv_server *s);

/* A rules set was loaded (at start and on reload; the main thread): it
 * becomes the base of the set in force, with the overrides applied.
 * Takes the reference. */
void sv_limits_loaded(sv_server *s, sv_rules *loaded);

/* Runs op: 0 when done (op->status says how), or SV_AGAIN when it waits
 * on Redis (op->done(op->owner) runs once).  The op is the caller's
 * until then; a caller that goes away first calls sv_limits_abandon(),
 * which makes it the module's (freed with free()). */
int sv_limits_write(sv_worker *control, sv_limits_op *op);
void sv_limits_abandon(sv_limits_op *op);

/* Sets source's override of rule id to requests (burst 0: scaled),
 * valid for ttl_ms, unless the one there already says so for more than
 * half of ttl_ms; requests 0: deletes it.  1 written (or its write on
 * Redis started), 0 unchanged, -1 refused or out of memory.  Nobody waits
 * on the write. */
int sv_limits_renew(sv_worker *control, const char *id, sv_source source,
                    int64_t requests, int64_t burst, int64_t ttl_ms,
                    const char *reason);

/* The store could not take source's renewal of rule id (Redis down):
 * its override stands here past its TTL, for ttl_ms more, and lowers to
 * requests (this node's proposal) when that is lower (0: none), never
 * rises; without one, a requests under the rule's own number is put in
 * force here alone.  The next renewal the store takes, or a deletion,
 * ends the hold (docs/adaptive.md, "The outage guard"). */
void sv_limits_hold(sv_worker *control, const char *id, sv_source source,
                    int64_t requests, int64_t ttl_ms);

/* The overrides with their state (active, stale, unknown, shadowed,
 * expired), GET /admin/v1/overrides; one of them, or NULL. */
json_t *sv_limits_overrides(sv_worker *control);
json_t *sv_limits_override(sv_worker *control, const char *rule,
                           sv_source source);
/* The change log after seq, GET /admin/v1/events. */
json_t *sv_limits_events(sv_worker *control, uint64_t after);

/* /metrics: the effective and base limit of every rule, the overrides by
 * state, the age of the last sync with Redis. */
void sv_limits_metrics(sv_server *s, sv_buf *out);

#endif
