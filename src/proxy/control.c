/*
 * control.c - the adaptive controller of `sluice proxy`, on the control
 * thread (docs/adaptive.md): each second, for each rule with `controller:
 * gradient`, the threads' windows (adaptive.c) merged into one signal,
 * one step of the controller (src/adaptive/controller.c), and its limit
 * published as the rule's override of source `controller` with a short
 * TTL renewed while it stands (a node that dies leaves nothing behind
 * for long), or the override deleted when the limit is the rule's own.
 * --adaptive-trace appends each window's signal to a file that `sluice
 * replay --adaptive` turns into the same limits.
 *
 * Several proxies on one Redis agree without a leader: each node's
 * limit is a proposal, kept in Redis for PROPOSAL_TTL_MS (a sorted set
 * of node -> expiry and a hash of node -> limit per rule, under the
 * overrides' hash tag); the override each node writes is the minimum of
 * the live proposals, so a dead node's weighs for 3 s at most.  With the
 * memory store the node's own proposal is the limit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "control/admin.h"
#include "adaptive/controller.h"
#include "proxy.h"
#include "control/limits.h"
#include "rules/rule_daemon.h"

#define WINDOW_MS 1000
/* The controller's override lives this long unless renewed (each half
 * of it): a node that stops leaves its proposal for at most this. */
#define OVERRIDE_TTL_MS 10000
/* A node's proposal counts this long unless renewed (each window). */
#define PROPOSAL_TTL_MS 3000
/* Windows of the limit kept for its coefficient of variation. */
#define CV_WINDOWS 300
/* The upstream's latency is judged over at least this many answers,
 * gathered over up to JUDGE_WINDOWS windows: a median of a few dozen
 * answers of a service with exponential times is off by a quarter one
 * window in six, and each such window read as an overload cut the limit
 * (the lab, docs/lab.md "The adaptive variant").  Of 200, its relative
 * error is 10% (1.44 / sqrt(n)): a median 25% over the baseline by chance
 * one judgement in 160, and the controller cuts for a marginal one only
 * when the next judgement says so too. */
#define JUDGE_ANSWERS 200
#define JUDGE_WINDOWS 10

typedef struct ad_rule {
    char id[512];
    ac_params p;
    ac_state st;
    int live;
    uint64_t overload_windows;
    uint64_t actions[AC_FORECAST + 1];
    uint64_t reasons[AC_R_COUNT]; /* windows the limit moved, by why */
    double forecast; /* demand forecast at the horizon, per unit; -1 none */
    double ring[CV_WINDOWS]; /* the published limit, a window each */
    size_t ring_n, ring_at;
    int64_t nodes; /* live proposals last counted in Redis (1: memory) */
    /* The live nodes' capacities, their mean, as Redis last answered a
     * proposal (ac_signal.pooled); 0: none. */
    double pooled;
    /* A proposal is in flight on Redis: while it is, Redis is not
     * answering within a window, and the next is held, not sent. */
    int asking;
    /* The answers gathered for the next judgement (JUDGE_ANSWERS). */
    uint64_t hist[PX_AD_BUCKETS], timed, untimed, failed;
    int windows;
} ad_rule;

static struct {
    sv_worker *control;
    uv_timer_t tick;
    int ticking;
    uint64_t last_ns;
    FILE *trace;
    /* rules and n: the tick writes them, a scrape (another thread) reads
     * them; under lock. */
    pthread_mutex_t lock;
    ad_rule rules[PX_AD_MAX];
    size_t n;
    char node[96]; /* this node's name among the proposals */
} the = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* KEYS: the rule's node -> expiry sorted set, node -> limit hash and
 * node -> capacity hash; ARGV: node, limit, ttl ms, the node's capacity
 * in thousandths (0: none).  Renews the node's proposal, drops the
 * expired ones (Redis's clock: the nodes' may differ) and answers {the
 * minimum of the live proposals, how many, the mean of the live
 * capacities known in thousandths (0: none)}. */
static const char propose_script[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl = tonumber(ARGV[3])\n"
    "redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])\n"
    "redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])\n"
    "redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])\n"
    "for _, n in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do\n"
    "  redis.call('HDEL', KEYS[2], n)\n"
    "  redis.call('HDEL', KEYS[3], n)\n"
    "end\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ttl * 20) end\n"
    "local min, n = 0, 0\n"
    "for _, v in ipairs(redis.call('HVALS', KEYS[2])) do\n"
    "  v = tonumber(v)\n"
    "  if n == 0 or v < min then min = v end\n"
    "  n = n + 1\n"
    "end\n"
    "local sum, known = 0, 0\n"
    "for _, v in ipairs(redis.call('HVALS', KEYS[3])) do\n"
    "  v = tonumber(v) or 0\n"
    "  if v > 0 then sum, known = sum + v, known + 1 end\n"
    "end\n"
    "return {min, n, known > 0 and math.floor(sum / known) or 0}\n";

/* A proposal in flight: what to write once Redis answers. */
typedef struct proposal {
    char id[512];
    size_t slot;
    int64_t base, limit;
} proposal;

/* The store did not take the node's proposal: the last agreed limit
 * stands here past its TTL, lowered to the node's own when that is lower
 * (docs/adaptive.md, "The outage guard"). */
static void hold(sv_worker *w, const char *id, int64_t limit, int64_t base)
{
    sv_limits_hold(w, id, SV_SOURCE_CONTROLLER, limit < base ? limit : 0,
                   OVERRIDE_TTL_MS);
}

/* Writes the rule's override: the limit agreed (the rule's own number:
 * none). */
static void agree(sv_worker *w, const char *id, int64_t limit, int64_t base)
{
    if (sv_limits_renew(w, id, SV_SOURCE_CONTROLLER, limit == base ? 0 : limit,
                        0, OVERRIDE_TTL_MS, "adaptive controller") < 0)
        fprintf(stderr, "sluice: adaptive: the override of %s was refused\n",
                id);
}

static void proposed_cb(const redisReply *r, void *priv)
{
    proposal *pr = priv;
    pthread_mutex_lock(&the.lock);
    if (pr->slot < the.n && strcmp(the.rules[pr->slot].id, pr->id) == 0)
        the.rules[pr->slot].asking = 0;
    pthread_mutex_unlock(&the.lock);
    if (the.ticking && r != NULL && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 3 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[2]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->integer > 0) {
        pthread_mutex_lock(&the.lock);
        if (pr->slot < the.n && strcmp(the.rules[pr->slot].id, pr->id) == 0) {
            the.rules[pr->slot].nodes = r->element[1]->integer;
            the.rules[pr->slot].pooled =
                (double)r->element[2]->integer / 1000;
        }
        pthread_mutex_unlock(&the.lock);
        agree(the.control, pr->id, r->element[0]->integer, pr->base);
    } else if (the.ticking) {
        hold(the.control, pr->id, pr->limit, pr->base);
    }
    free(pr);
}

/* Sets whether slot k has a proposal in flight; what it had. */
static int asking(size_t k, int now)
{
    pthread_mutex_lock(&the.lock);
    int had = the.rules[k].asking;
    the.rules[k].asking = now;
    pthread_mutex_unlock(&the.lock);
    return had;
}

/* Proposes the node's limit of the rule in slot k: on Redis, the minimum
 * of the live proposals is written when it answers; on the memory store
 * the node's own at once. */
static void propose(sv_worker *w, size_t k, const char *id, int64_t limit,
                    int64_t base, double capacity)
{
    if (!sd_engine_uses_redis(w->server->engine)) {
        agree(w, id, limit, base);
        return;
    }
    if (asking(k, 1)) {
        hold(w, id, limit, base); /* the last window's is unanswered */
        return;
    }
    proposal *pr = malloc(sizeof(*pr));
    if (pr == NULL) {
        asking(k, 0);
        return;
    }
    snprintf(pr->id, sizeof(pr->id), "%s", id);
    pr->slot = k;
    pr->base = base;
    pr->limit = limit;
    char zset[600], hash[600], caps[600], value[24], ttl[24], cap[24];
    snprintf(zset, sizeof(zset), "sluice:{overrides}:proposals:%s", id);
    snprintf(hash, sizeof(hash), "sluice:{overrides}:proposed:%s", id);
    snprintf(caps, sizeof(caps), "sluice:{overrides}:capacity:%s", id);
    snprintf(value, sizeof(value), "%lld", (long long)limit);
    snprintf(ttl, sizeof(ttl), "%d", PROPOSAL_TTL_MS);
    snprintf(cap, sizeof(cap), "%lld",
             (long long)(capacity > 0 && capacity < 1e12 ? capacity * 1000
                                                         : 0));
    const char *argv[] = {"EVAL", propose_script, "3",   zset, hash,
                          caps,   the.node,       value, ttl,  cap};
    if (sd_redis_command(w->dec, zset, 10, argv, NULL, proposed_cb, pr) != 0) {
        free(pr);
        asking(k, 0);
        hold(w, id, limit, base);
    }
}

static ac_params params_of(const sl_rules *rules, const sl_rule *r)
{
    const sl__rule_daemon *d = sl__rule_daemon_of(rules, r);
    return (ac_params){
        .base = r->requests_per_unit,
        .min = d->adaptive_min,
        .max = d->adaptive_max,
        .period_s = (double)r->period / 1e9,
        .slo_p99_s = (double)d->adaptive_slo_p99 / 1e9,
        .season = (size_t)((double)d->adaptive_season / 1e9),
        .horizon = (size_t)((double)d->adaptive_horizon / 1e9),
        .raise_step = d->adaptive_raise_step,
        .raise_max = d->adaptive_raise_max,
        .capacity_share = d->adaptive_capacity_share,
        .error_rate = d->adaptive_error_rate,
        .relax_windows = (size_t)(d->adaptive_relax_after / SL_NS_PER_SEC),
    };
}

/* The q-quantile of a histogram of total answers, in ms (the trace's
 * unit: the controller gets exactly what a replay of the trace gets). */
static double quantile_ms(const uint64_t *hist, uint64_t total, double q)
{
    if (total == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(q * (double)total), seen = 0;
    for (size_t b = 0; b < PX_AD_BUCKETS; b++)
        if ((seen += hist[b]) >= rank)
            return px_ad_bucket_mid(b) * 1e3;
    return px_ad_bucket_mid(PX_AD_BUCKETS - 1) * 1e3;
}

static uint64_t take(atomic_uint_fast64_t *c)
{
    return atomic_exchange_explicit(c, 0, memory_order_relaxed);
}

/* The answers gathered toward the next judgement are dropped: it starts
 * afresh. */
static void drop_answers(ad_rule *a)
{
    memset(a->hist, 0, sizeof(a->hist));
    a->timed = a->untimed = a->failed = 0;
    a->windows = 0;
}

/* Slot k's window summed over the client-facing threads (and zeroed)
 * into rule a's signal.  The upstream's answers are gathered until there
 * are JUDGE_ANSWERS (or JUDGE_WINDOWS windows, or fewer the controller
 * already finds alarming: ac_alarm): until then the signal has n = 0,
 * which the controller does not judge.  The rates are the
 * cluster's: this node's times the live nodes, which share the traffic
 * (a balancer in front), since the limit is the cluster's. */
static void merge(px_proxy *px, size_t k, double seconds, ad_rule *a,
                  ac_signal *sig, double *s50_ms, double *s99_ms)
{
    uint64_t allowed = 0, refused = 0, timed = 0, untimed = 0, failed = 0,
             late = 0;
    for (int t = 0; t < px->n_workers; t++) {
        px_ad_window *win = &px->ad[(size_t)t * PX_AD_MAX + k];
        for (size_t b = 0; b < PX_AD_BUCKETS; b++) {
            uint64_t c = atomic_exchange_explicit(&win->hist[b], 0,
                                                  memory_order_relaxed);
            a->hist[b] += c;
            timed += c;
        }
        allowed += take(&win->allowed);
        refused += take(&win->refused);
        failed += take(&win->failed);
        late += take(&win->late);
        untimed += take(&win->untimed);
    }
    a->failed += failed;
    a->timed += timed;
    a->untimed += untimed;
    uint64_t answered = timed + untimed;
    double nodes = a->nodes > 1 ? (double)a->nodes : 1;
    *sig = (ac_signal){.accepted = nodes * (double)allowed / seconds,
                       .refused = nodes * (double)refused / seconds,
                       .answered = nodes * (double)answered / seconds,
                       .failed = nodes * (double)failed / seconds,
                       .late = nodes * (double)late / seconds};
    *s50_ms = *s99_ms = 0;
    uint64_t n = a->timed + a->untimed;
    if (++a->windows < JUDGE_WINDOWS && n < JUDGE_ANSWERS &&
        !ac_alarm(&a->st, (double)n,
                  quantile_ms(a->hist, a->timed, 0.50) / 1000))
        return;
    *s50_ms = quantile_ms(a->hist, a->timed, 0.50);
    *s99_ms = quantile_ms(a->hist, a->timed, 0.99);
    sig->n = (double)(a->timed + a->untimed);
    sig->s50 = *s50_ms / 1000;
    sig->s99 = *s99_ms / 1000;
    sig->errors = (double)a->failed;
    drop_answers(a);
}

/* One window of slot k's rule r: the node's proposal into *publish and
 * the rule's own number (clamped) into *base; *publish 0 when there is
 * none. */
static void step(ad_rule *a, const sv_rules *set, const sl_rule *r,
                 px_proxy *px, size_t k, double seconds, int64_t *publish,
                 int64_t *base)
{
    const char *id = sv_rule_id(set, r->index);
    ac_params p = params_of(set->rules, r);
    if (!a->live || strcmp(a->id, id) != 0 ||
        memcmp(&a->p, &p, sizeof(p)) != 0) {
        /* New, or the rule changed under reload: start afresh. */
        if (a->live)
            ac_release(&a->st);
        memset(a, 0, sizeof(*a));
        a->p = p;
        snprintf(a->id, sizeof(a->id), "%s", id);
        a->live = ac_init(&a->st, &p) == 0;
        a->nodes = 1;
    }
    ac_signal sig;
    double s50, s99;
    merge(px, k, seconds, a, &sig, &s50, &s99);
    *publish = 0;
    if (!a->live)
        return;
    sig.in_force = (double)sv_rules_in_force(set, r)->requests_per_unit;
    sig.pooled = a->pooled;
    ac_step_out out;
    ac_step(&a->st, &sig, &out);
    if (out.restart)
        drop_answers(a);
    if (out.publish)
        fprintf(stderr, "sluice: adaptive: %s: limit %lld (%s: %s)\n", id,
                (long long)out.limit, ac_action_name(out.action),
                ac_reason_name(out.reason));
    a->overload_windows += out.overload != 0;
    a->actions[out.action]++;
    a->reasons[out.reason] += out.reason != AC_R_NONE;
    a->forecast =
        p.season > 0 && a->st.hw.ready ? hw_forecast(&a->st.hw, p.horizon) : -1;
    a->ring[a->ring_at] = (double)a->st.published;
    a->ring_at = (a->ring_at + 1) % CV_WINDOWS;
    if (a->ring_n < CV_WINDOWS)
        a->ring_n++;
    if (the.trace != NULL) /* the signal, then what the controller made of it */
        fprintf(the.trace,
                "%s\t%.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g "
                "%.17g %.17g\t%lld %s %s %.17g\n",
                id, sig.n, s50, s99, sig.errors, sig.accepted, sig.refused,
                sig.in_force, sig.answered, sig.failed, sig.late, sig.pooled,
                (long long)out.limit, ac_action_name(out.action),
                ac_reason_name(out.reason), a->st.capacity);
    *publish = a->st.published;
    *base = a->st.p.base;
}

static void tick_cb(uv_timer_t *t)
{
    sv_worker *w = t->data;
    px_proxy *px = px_of(w);
    const sv_rules *set = w->rules;
    const sl_rule *rules[PX_AD_MAX];
    int64_t publish[PX_AD_MAX], base[PX_AD_MAX];
    double capacity[PX_AD_MAX];
    char ids[PX_AD_MAX][512];
    uint64_t now = uv_hrtime();
    double seconds = (double)(now - the.last_ns) / 1e9;
    the.last_ns = now;
    size_t n = px_ad_rules(set->rules, rules, PX_AD_MAX);
    pthread_mutex_lock(&the.lock);
    for (size_t k = 0; k < n; k++) {
        step(&the.rules[k], set, rules[k], px, k, seconds > 0 ? seconds : 1,
             &publish[k], &base[k]);
        memcpy(ids[k], the.rules[k].id, sizeof(ids[k]));
        capacity[k] = the.rules[k].live ? the.rules[k].st.capacity : 0;
    }
    for (size_t k = n; k < the.n; k++)
        if (the.rules[k].live) {
            ac_release(&the.rules[k].st);
            the.rules[k].live = 0;
        }
    the.n = n;
    pthread_mutex_unlock(&the.lock);
    if (the.trace != NULL)
        fflush(the.trace);
    /* Outside the lock: a write publishes a generation of the rules. */
    for (size_t k = 0; k < n; k++)
        if (publish[k] > 0)
            propose(w, k, ids[k], publish[k], base[k], capacity[k]);
}

int px_control_start(sv_worker *control)
{
    const char *path = control->server->cfg.adaptive_trace;
    the.control = control;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(the.node, sizeof(the.node), "%s:%ld:%llx", host, (long)getpid(),
             (unsigned long long)uv_hrtime());
    if (path != NULL && (the.trace = fopen(path, "a")) == NULL) {
        fprintf(stderr, "sluice proxy: --adaptive-trace %s: cannot open\n",
                path);
        return -1;
    }
    uv_timer_init(&control->loop, &the.tick);
    the.tick.data = control;
    the.ticking = 1;
    the.last_ns = uv_hrtime();
    uv_timer_start(&the.tick, tick_cb, WINDOW_MS, WINDOW_MS);
    /* --advisor: polled from this thread, as in sluice serve. */
    return ad_poll_start(control);
}

static void closed_cb(uv_handle_t *h)
{
    (void)h;
}

void px_control_stop(sv_worker *control)
{
    if (the.control != control)
        return;
    ad_poll_stop(control);
    if (the.ticking) {
        the.ticking = 0;
        uv_close((uv_handle_t *)&the.tick, closed_cb);
    }
    pthread_mutex_lock(&the.lock);
    for (size_t k = 0; k < the.n; k++)
        if (the.rules[k].live)
            ac_release(&the.rules[k].st);
    the.n = 0;
    pthread_mutex_unlock(&the.lock);
    if (the.trace != NULL)
        fclose(the.trace);
    the.trace = NULL;
}

/* ---- /metrics ---- */

/* A rule id as a label value: \, " and newline escaped. */
static void label(sv_buf *out, const char *id)
{
    for (const char *p = id; *p; p++) {
        if (*p == '\\' || *p == '"')
            sv_buf_addstr(out, "\\");
        if (*p == '\n')
            sv_buf_addstr(out, "\\n");
        else
            sv_buf_add(out, p, 1);
    }
}

/* The limit's standard deviation over its mean in the last windows. */
static double cv(const ad_rule *a)
{
    double sum = 0, sq = 0;
    for (size_t i = 0; i < a->ring_n; i++)
        sum += a->ring[i];
    double mean = a->ring_n ? sum / (double)a->ring_n : 0;
    for (size_t i = 0; i < a->ring_n; i++)
        sq += (a->ring[i] - mean) * (a->ring[i] - mean);
    return mean > 0 ? sqrt(sq / (double)a->ring_n) / mean : 0;
}

typedef struct gauge {
    const char *name, *type, *help;
} gauge;

static double value_of(const ad_rule *a, int g)
{
    switch (g) {
    case 0:
        return (double)a->st.published;
    case 1:
        return a->st.last_gradient;
    case 2:
        return a->st.baseline;
    case 3:
        return (double)a->st.reversals;
    case 4:
        return (double)a->overload_windows;
    case 5:
        return cv(a);
    case 6:
        return a->forecast;
    case 7:
        return a->st.capacity;
    default:
        return (double)a->nodes;
    }
}

void px_control_metrics(sv_server *s, sv_buf *out)
{
    static const gauge gauges[] = {
        {"sluice_adaptive_limit", "gauge",
         "the adaptive controller's limit of a rule, per unit"},
        {"sluice_adaptive_gradient", "gauge",
         "1.25 x the healthy median latency over the last median, in [0.5, "
         "1]; 1 when calm"},
        {"sluice_adaptive_baseline_seconds", "gauge",
         "the upstream's healthy median latency"},
        {"sluice_adaptive_reversals_total", "counter",
         "published changes of the limit against the one before"},
        {"sluice_adaptive_overload_windows_total", "counter",
         "1 s windows judged an overload"},
        {"sluice_adaptive_limit_cv", "gauge",
         "the limit's coefficient of variation over the last 5 minutes"},
        {"sluice_forecast_rate", "gauge",
         "the demand forecast at the horizon, per unit (forecast_season)"},
        {"sluice_adaptive_capacity", "gauge",
         "the upstream's capacity the controller estimates, per unit (0: "
         "not known)"},
        {"sluice_adaptive_nodes", "gauge",
         "nodes whose proposals of the limit are live (the limit in force "
         "is their minimum)"},
    };
    pthread_mutex_lock(&the.lock);
    for (size_t g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
        int any = 0;
        for (size_t k = 0; k < the.n; k++) {
            const ad_rule *a = &the.rules[k];
            if (!a->live || (g == 6 && a->forecast < 0))
                continue;
            if (!any++)
                sv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n",
                              gauges[g].name, gauges[g].help, gauges[g].name,
                              gauges[g].type);
            sv_buf_printf(out, "%s{rule=\"", gauges[g].name);
            label(out, a->id);
            sv_buf_printf(out, "\"} %.17g\n", value_of(a, (int)g));
        }
    }
    if (the.n > 0)
        sv_buf_addstr(out, "# HELP sluice_adaptive_actions_total the "
                           "controller's windows by what it did\n"
                           "# TYPE sluice_adaptive_actions_total counter\n");
    for (size_t k = 0; k < the.n; k++)
        for (int act = 0; the.rules[k].live && act <= AC_FORECAST; act++) {
            sv_buf_addstr(out, "sluice_adaptive_actions_total{rule=\"");
            label(out, the.rules[k].id);
            sv_buf_printf(out, "\",action=\"%s\"} %llu\n",
                          ac_action_name((ac_action)act),
                          (unsigned long long)the.rules[k].actions[act]);
        }
    if (the.n > 0)
        sv_buf_addstr(out, "# HELP sluice_adaptive_reasons_total the "
                           "controller's windows that moved its limit, by "
                           "why\n"
                           "# TYPE sluice_adaptive_reasons_total counter\n");
    for (size_t k = 0; k < the.n; k++)
        for (int r = AC_R_NONE + 1; the.rules[k].live && r < AC_R_COUNT; r++) {
            sv_buf_addstr(out, "sluice_adaptive_reasons_total{rule=\"");
            label(out, the.rules[k].id);
            sv_buf_printf(out, "\",reason=\"%s\"} %llu\n",
                          ac_reason_name((ac_reason)r),
                          (unsigned long long)the.rules[k].reasons[r]);
        }
    pthread_mutex_unlock(&the.lock);
    ad_poll_metrics(s, out);
}
