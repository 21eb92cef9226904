/*
 * decide.h - a request's descriptors decided against the thread's rules:
 * every enforced limit in one atomic check, through the decision layer.
 */
#ifndef SV_DECIDE_H
#define SV_DECIDE_H

#include "runtime/worker.h"

/* A handler or a decision waits on the store: it runs on when the wait's
 * done callback comes. */
#define SV_AGAIN SD_AGAIN

/*
 * lyft's per-descriptor limit override (envoy's RateLimitDescriptor
 * .limit, a RateLimitOverride): the request's own limit for one
 * descriptor, in place of whatever its rules say.  `unit` is envoy's
 * RateLimitUnit number, which sv_override_unit_name() checks.
 */
typedef struct sv_dec_override {
    int64_t requests_per_unit; /* 0 refuses, as requests_per_unit: 0 does */
    int unit;
} sv_dec_override;

typedef struct sv_dec_descriptor {
    sl_rules_entry *entries;
    size_t n_entries;
    int64_t hits; /* -1: the request's */
    /* NULL: the rules decide.  Else lyft's override, borrowed like
     * entries until the request is decided (decide.c, "Overrides"). */
    const sv_dec_override *limit;
} sv_dec_descriptor;

/* RateLimitUnit's name of a unit number: "SECOND" 1, "MINUTE" 2, "HOUR"
 * 3, "DAY" 4, "MONTH" 5, "YEAR" 6 (envoy/type/v3/ratelimit_unit.proto),
 * "WEEK" 7 (rls.proto's RateLimit.Unit, which lyft casts it to); NULL
 * for UNKNOWN (0) and any other number, which no override may carry. */
const char *sv_override_unit_name(int unit);

/* Per-descriptor outcome: the limit closest to its own limit. */
typedef struct sv_dec_status {
    int over;                 /* OVER_LIMIT */
    const sl_rule *rule;      /* NULL: nothing matched */
    const sv_rule_text *text; /* the rule's; NULL with it */
    sl_decision d;
    int shadow; /* the reported rule is in shadow mode */
    /* The limit refused, whether or not that made the descriptor
     * OVER_LIMIT (shadow mode); ratelimit's answers then say 0 left. */
    int limited;
    int quota; /* the reported rule is in quota mode */
} sv_dec_status;

typedef struct sv_dec_result {
    int over;
    /* The status closest to its limit over all descriptors (for the
     * headers); NULL when nothing limited the request. */
    const sv_dec_status *closest;
    sv_dec_status *status; /* one per descriptor, owned by the caller */
} sv_dec_result;

/* A request's rules decision while it waits on the store: the matches,
 * their counter keys and the checks sent.  Each connection on Redis owns
 * one, kept between requests; on the memory store the thread's one
 * serves every request, which is answered at once. */
typedef struct sv_dec_state sv_dec_state;

/* The state for a request: the thread's on the memory store, else *own,
 * made on first use.  NULL when out of memory. */
sv_dec_state *sv_dec_state_get(sv_worker *w, sv_dec_state **own);
void sv_dec_state_free(sv_dec_state *st); /* NULL: no-op */

/*
 * Decides one request's descriptors: every enforced limit in ONE atomic
 * check, shadow limits apart.  Returns 0 with res filled; SV_AGAIN,
 * with *wait set, when it waits on the store (done(owner) runs once
 * later, then sv_decide_finish() fills res; ds must stay valid until
 * then); or an SL_E* code with a message in err.
 */
int sv_decide(sv_worker *w, sv_dec_state *st, const char *domain,
              size_t domain_len, const sv_dec_descriptor *ds, size_t n,
              int64_t hits, sv_dec_result *res, sd_done_fn done, void *owner,
              sd_wait **wait, char *err, size_t errlen);
int sv_decide_finish(sv_worker *w, sv_dec_state *st, sv_dec_result *res,
                     char *err, size_t errlen);
/* The request was given up while waiting (sd_cancel() its wait first);
 * also what lets go of the rules set a waited request was decided
 * against, which sv_decide_finish() keeps for the answer (the next
 * sv_decide() and sv_dec_state_free() call it too). */
void sv_decide_abandon(sv_dec_state *st);
/* A decision's durations in the units answers give them, rounded up (a
 * client that waits that long is safe): ms, with -1 for "never" (< 0);
 * whole seconds, with 0 for "now or never". */
/* Rounded up, without overflow for any ns (a store's reply may be far
 * in the future). */
static inline long long sv_ms_up(sl_nanos ns)
{
    return ns < 0 ? -1
                  : (long long)(ns / SL_NS_PER_MS + (ns % SL_NS_PER_MS != 0));
}

static inline long long sv_sec_up(sl_nanos ns)
{
    return ns <= 0
               ? 0
               : (long long)(ns / SL_NS_PER_SEC + (ns % SL_NS_PER_SEC != 0));
}

/* The rules the state's last request was decided against, which its
 * answer's statuses point into (a waited request's, held until the state
 * is next used, whatever the thread has adopted since). */
const sl_rules *sv_decide_rules(const sv_dec_state *st);

/* The HTTP status of an sv_decide() error: 503 for the store, else 400. */
int sv_decide_status(int rc);

#endif
