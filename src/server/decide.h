/*
 * decide.h - a request's descriptors decided against the thread's rules:
 * every enforced limit in one atomic check, through the decision layer.
 */
#ifndef SL_SRV_DECIDE_H
#define SL_SRV_DECIDE_H

#include "server/worker.h"

/* A handler or a decision waits on the store: it runs on when the wait's
 * done callback comes. */
#define SL_SRV_AGAIN SD_AGAIN

typedef struct sl_dec_descriptor {
    sl_rules_entry *entries;
    size_t n_entries;
    int64_t hits; /* -1: the request's */
} sl_dec_descriptor;

/* Per-descriptor outcome: the limit closest to its own limit. */
typedef struct sl_dec_status {
    int over;            /* OVER_LIMIT */
    const sl_rule *rule; /* NULL: nothing matched */
    const sl_srv_rule_text *text; /* the rule's; NULL with it */
    sl_decision d;
    int shadow; /* the reported rule is in shadow mode */
} sl_dec_status;

typedef struct sl_dec_result {
    int over;
    /* The status closest to its limit over all descriptors (for the
     * headers); NULL when nothing limited the request. */
    const sl_dec_status *closest;
    sl_dec_status *status; /* one per descriptor, owned by the caller */
} sl_dec_result;

/* A request's rules decision while it waits on the store: the matches,
 * their counter keys and the checks sent.  Each connection on Redis owns
 * one, kept between requests; on the memory store the thread's one
 * serves every request, which is answered at once. */
typedef struct sl_dec_state sl_dec_state;

/* The state for a request: the thread's on the memory store, else *own,
 * made on first use.  NULL when out of memory. */
sl_dec_state *sl_dec_state_get(sl_srv_worker *w, sl_dec_state **own);
void sl_dec_state_free(sl_dec_state *st); /* NULL: no-op */

/*
 * Decides one request's descriptors: every enforced limit in ONE atomic
 * check, shadow limits apart.  Returns 0 with res filled; SL_SRV_AGAIN,
 * with *wait set, when it waits on the store (done(owner) runs once
 * later, then sl_decide_finish() fills res; ds must stay valid until
 * then); or an SL_E* code with a message in err.
 */
int sl_decide(sl_srv_worker *w, sl_dec_state *st, const char *domain,
              size_t domain_len, const sl_dec_descriptor *ds, size_t n,
              int64_t hits, sl_dec_result *res, sd_done_fn done, void *owner,
              sd_wait **wait, char *err, size_t errlen);
int sl_decide_finish(sl_srv_worker *w, sl_dec_state *st, sl_dec_result *res,
                     char *err, size_t errlen);
/* The request was given up while waiting (sd_cancel() its wait first). */
void sl_decide_abandon(sl_dec_state *st);
/* A decision's durations in the units answers give them, rounded up (a
 * client that waits that long is safe): ms, with -1 for "never" (< 0);
 * whole seconds, with 0 for "now or never". */
static inline long long sl_ms_up(sl_nanos ns)
{
    return ns < 0 ? -1 : (long long)((ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS);
}

static inline long long sl_sec_up(sl_nanos ns)
{
    return ns <= 0 ? 0
                   : (long long)((ns + SL_NS_PER_SEC - 1) / SL_NS_PER_SEC);
}

/* The HTTP status of an sl_decide() error: 503 for the store, else 400. */
int sl_decide_status(int rc);

#endif
