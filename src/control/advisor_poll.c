/*
 * poll.c - serve's advisor poller (admin.h, docs/advisor.md): the thesis's
 * "intelligent component" polled for recommended limits.
 *
 * On the control thread, every --advisor-interval, it GETs
 * {advisor}/v1/recommendations?rules_version=V with If-None-Match.  The
 * request runs in libuv's thread pool, because the client blocks and the
 * control loop also serves the admin API.  It checks the answer
 * (advice.c), and for each rule that opted in with `adaptive: {min, max}`,
 * clamps the recommendation to those bounds and to at most ×2 / ÷2 of the
 * limit in force (ad_clamp), and its burst alike.  It then sets it as an
 * override with source `advisor` that expires with the answer
 * (computed_at_ms + valid_for_ms, held at most MAX_HOLD_POLLS intervals;
 * an answer already expired is refused).  So when the advisor stops
 * answering, its overrides lapse on their own, and a
 * manual override always wins over them (limits.c).  A failed or invalid
 * poll keeps the last good state; polls back off (doubling, up to 8
 * intervals) while they fail.  With --store redis one node polls at a
 * time: a lease in Redis (ADVISOR_LEASE), renewed by its holder.
 * --advisor-mode shadow computes everything and records it in /metrics
 * without applying it.  An https:// advisor is verified against
 * --advisor-ca (or the system's CAs), and --advisor-token-file's token
 * goes with every poll as a bearer token; both are read once, at start.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "control/admin.h"
#include "adaptive/advice.h"
#include "http/http_client.h"
#include "runtime/decide.h"
#include "control/limits.h"
#include "log/log.h"
#include "log/secret.h"
#include "store/tls_client.h"
#include "rules/rule_daemon.h"

#define MAX_BACKOFF 8
#define LEASE_KEY "sluice:{overrides}:advisor"

/* The results of a poll, counted for /metrics. */
enum { POLL_OK, POLL_UNCHANGED, POLL_FAILED, POLL_INVALID, POLL_SKIPPED };
#define N_POLL 5
static const char *const poll_names[N_POLL] = {"ok", "not_modified", "failed",
                                               "invalid", "not_leader"};

typedef struct poller {
    sv_worker *w;
    uv_timer_t timer;
    uv_work_t work;
    int busy, stopping, failures;
    char node_id[96];
    sl__tls_client *tls; /* an https:// advisor's; NULL: plain */
    char auth[600];      /* "Authorization: Bearer …", or "" */
    /* The request, made on the loop, run in the pool. */
    char path[256], if_none[96], etag[64];
    ah_response resp;
    int rc;
    char err[256];
    uint64_t started_ns;
    /* Read by /metrics from any thread. */
    atomic_uint_fast64_t polls[N_POLL];
    atomic_uint_fast64_t applied, unchanged, refused;
    atomic_uint_fast64_t duration_ns; /* of the last poll */
    atomic_int_fast64_t last_ok_ms;   /* when an answer last came */
} poller;

static poller the_poller;

static void count(atomic_uint_fast64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- applying an answer ---- */

/* Sets the advisor's override of rule id to requests (0 burst: scaled),
 * valid for ttl_ms, unless the one there already says so for long
 * enough. */
static void set_advice(poller *p, const char *id, int64_t requests,
                       int64_t burst, int64_t ttl_ms, const char *reason)
{
    int rc = sv_limits_renew(p->w, id, SV_SOURCE_ADVISOR, requests, burst,
                             ttl_ms, reason && reason[0] ? reason : "advisor");
    count(rc < 0 ? &p->refused : rc == 0 ? &p->unchanged : &p->applied);
}

/* The burst rule's limit takes at requests when none is given: asked of
 * sl_limit_override, which owns the scaling (rounded up, at least 1). */
static int64_t scaled_burst(const sl_rule *rule, int64_t requests)
{
    sl_limit *at;
    if (sl_limit_override(rule->limit, requests, 0, &at, NULL, 0) != 0)
        return sl_limit_get_config(rule->limit)->burst;
    int64_t burst = sl_limit_get_config(at)->burst;
    sl_limit_free(at);
    return burst;
}

/* A recommendation's burst, bounded as its requests_per_unit is: at most
 * x2 / /2 of the burst in force, within the bursts the rule's adaptive
 * min and max scale its own to (docs/advisor.md).  0, scaled with the
 * limit, when none was given or the algorithm has no burst. */
static int64_t bound_burst(const sl_rule *rule, const sl_rule *in_force,
                           const sl__rule_daemon *d, int64_t burst)
{
    const sl_limit_config *base = sl_limit_get_config(rule->limit);
    if (burst <= 0 || (base->algorithm != SL_TOKEN_BUCKET &&
                       base->algorithm != SL_GCRA &&
                       base->algorithm != SL_LEAKY_BUCKET))
        return 0;
    return ad_clamp(burst, sl_limit_get_config(in_force->limit)->burst,
                    scaled_burst(rule, d->adaptive_min),
                    scaled_burst(rule, d->adaptive_max));
}

/* The answer's validity as this node holds it: from the poll until
 * computed_at_ms + valid_for_ms, and at most MAX_HOLD_POLLS intervals (an
 * advisor gone quiet loses its hold soon).  0 with *ttl_ms, or -1 with
 * why in err: an answer already expired, or computed further ahead of
 * this node's clock than clocks drift. */
#define MAX_HOLD_POLLS 10
#define MAX_AHEAD_MS 60000
static int hold_for(const poller *p, const ad_advice *a, int64_t now_ms,
                    int64_t *ttl_ms, char *err, size_t errlen)
{
    int64_t expires = a->computed_at_ms > INT64_MAX - a->valid_for_ms
                          ? INT64_MAX
                          : a->computed_at_ms + a->valid_for_ms;
    int64_t cap = MAX_HOLD_POLLS * (int64_t)p->w->server->cfg.advisor_interval_ms;
    if (a->computed_at_ms > now_ms + MAX_AHEAD_MS) {
        snprintf(err, errlen,
                 "computed_at_ms is %" PRId64 " ms ahead of this node's clock",
                 a->computed_at_ms - now_ms);
        return -1;
    }
    if (expires <= now_ms) {
        snprintf(err, errlen,
                 "expired: computed_at_ms + valid_for_ms is %" PRId64
                 " ms in the past",
                 now_ms - expires);
        return -1;
    }
    *ttl_ms = expires - now_ms;
    if (*ttl_ms > a->valid_for_ms)
        *ttl_ms = a->valid_for_ms;
    if (*ttl_ms > cap)
        *ttl_ms = cap;
    return 0;
}

static void apply(poller *p, const ad_advice *a, int64_t ttl_ms)
{
    sv_worker *w = p->w;
    const sv_rules *set = w->rules;
    int shadow = w->server->cfg.advisor_shadow;
    for (size_t i = 0; i < a->n_recs; i++) {
        const ad_recommendation *r = &a->recs[i];
        size_t idx = sv_rule_find(set, r->limit);
        if (idx == SIZE_MAX) {
            count(&p->refused); /* no such rule here */
            continue;
        }
        const sl_rule *rule = sl_rules_rule(set->rules, idx);
        const sl__rule_daemon *d = sl__rule_daemon_of(set->rules, rule);
        if (rule->action != SL_RULE_LIMIT || d->adaptive_max == 0) {
            count(&p->refused); /* the rule did not opt in */
            continue;
        }
        const sl_rule *in_force = sv_rules_in_force(set, rule);
        int64_t to = ad_clamp(r->requests_per_unit, in_force->requests_per_unit,
                              d->adaptive_min, d->adaptive_max);
        int64_t burst = bound_burst(rule, in_force, d, r->burst);
        if (shadow) {
            int64_t now_ms = sv_now(w) / SL_NS_PER_MS;
            ad_shadow_record(r->limit, to, burst, now_ms, now_ms + ttl_ms,
                             r->reason);
            count(&p->unchanged);
            continue;
        }
        set_advice(p, r->limit, to, burst, ttl_ms, r->reason);
    }
}

/* ---- the poll ---- */

static void work_cb(uv_work_t *req)
{
    poller *p = req->data;
    const char *headers[3];
    size_t n = 0;
    if (p->auth[0])
        headers[n++] = p->auth;
    if (p->if_none[0])
        headers[n++] = p->if_none;
    headers[n] = NULL;
    p->rc = ah_request_tls(p->tls, p->w->server->cfg.advisor_url, "GET",
                           p->path, headers, NULL, 0,
                           (int)p->w->server->cfg.advisor_timeout_ms,
                           &p->resp, p->err, sizeof(p->err));
}

static void timer_cb(uv_timer_t *t);

static void next_poll(poller *p)
{
    const sv_config *cfg = &p->w->server->cfg;
    uint64_t wait = cfg->advisor_interval_ms;
    for (int i = 0;
         i < p->failures && wait < MAX_BACKOFF * cfg->advisor_interval_ms; i++)
        wait *= 2;
    if (!p->stopping)
        uv_timer_start(&p->timer, timer_cb, wait, 0);
}

static void handle(poller *p, int status);

static void after_work_cb(uv_work_t *req, int status)
{
    poller *p = req->data;
    p->busy = 0;
    if (p->stopping) {
        sl__tls_client_free(p->tls);
        p->tls = NULL;
    }
    handle(p, status);
    ah_response_release(&p->resp);
}

/* The answer of a poll, on the loop. */
static void handle(poller *p, int status)
{
    atomic_store_explicit(&p->duration_ns, uv_hrtime() - p->started_ns,
                          memory_order_relaxed);
    if (status != 0 || p->rc != 0 ||
        (p->resp.status != 200 && p->resp.status != 304)) {
        count(&p->polls[POLL_FAILED]);
        if (p->failures++ == 0 && (status != 0 || p->rc != 0))
            sl__log(SL__LOG_WARN, NULL, "advisor: %s",
                    status != 0 ? uv_strerror(status) : p->err);
        else if (p->failures == 1)
            sl__log(SL__LOG_WARN, NULL,
                    "advisor: answered %d (200 or 304 expected)",
                    p->resp.status);
        next_poll(p);
        return;
    }
    int64_t now_ms = sv_now(p->w) / SL_NS_PER_MS;
    if (p->resp.status == 304) {
        /* Unchanged: its overrides stand until they expire; the advisor
         * answered, so they are renewed at the next change or 200. */
        count(&p->polls[POLL_UNCHANGED]);
        atomic_store_explicit(&p->last_ok_ms, now_ms, memory_order_relaxed);
        p->failures = 0;
        next_poll(p);
        return;
    }
    ad_advice a;
    char err[256];
    int64_t ttl_ms = 0;
    int parsed = ad_advice_parse(p->resp.body, p->resp.body_len, &a, err,
                                 sizeof(err)) == 0;
    if (!parsed || hold_for(p, &a, now_ms, &ttl_ms, err, sizeof(err)) != 0) {
        if (parsed)
            ad_advice_release(&a);
        count(&p->polls[POLL_INVALID]);
        if (p->failures++ == 0)
            sl__log(SL__LOG_WARN, NULL, "advisor: answer refused: %s", err);
        next_poll(p);
        return;
    }
    const char *tag = ah_response_header(&p->resp, "ETag");
    snprintf(p->etag, sizeof(p->etag), "%s", tag ? tag : "");
    count(&p->polls[POLL_OK]);
    atomic_store_explicit(&p->last_ok_ms, now_ms, memory_order_relaxed);
    p->failures = 0;
    apply(p, &a, ttl_ms);
    ad_advice_release(&a);
    next_poll(p);
}

static void start_request(poller *p)
{
    const char *version = sl_rules_version(p->w->rules->rules);
    snprintf(p->path, sizeof(p->path), "/v1/recommendations?rules_version=%s",
             version);
    if (p->etag[0])
        snprintf(p->if_none, sizeof(p->if_none), "If-None-Match: %s", p->etag);
    else
        p->if_none[0] = '\0';
    p->busy = 1;
    p->started_ns = uv_hrtime();
    p->work.data = p;
    if (uv_queue_work(&p->w->loop, &p->work, work_cb, after_work_cb) != 0) {
        p->busy = 0;
        next_poll(p);
    }
}

/* The lease's script: taken when free or ours, renewed. */
static const char lease_script[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v or v == ARGV[1] then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]); return 1\n"
    "end\n"
    "return 0\n";

static void lease_cb(const redisReply *r, void *priv)
{
    poller *p = priv;
    if (p->stopping)
        return;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        start_request(p);
        return;
    }
    count(&p->polls[POLL_SKIPPED]); /* another node polls, or Redis is down */
    next_poll(p);
}

static void timer_cb(uv_timer_t *t)
{
    poller *p = t->data;
    if (p->busy || p->stopping)
        return;
    if (!sd_engine_uses_redis(p->w->server->engine)) {
        start_request(p);
        return;
    }
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%" PRIu64,
             3 * p->w->server->cfg.advisor_interval_ms);
    const char *argv[] = {"EVAL",    lease_script, "1",
                          LEASE_KEY, p->node_id,   ttl};
    if (sd_redis_command(p->w->dec, LEASE_KEY, 6, argv, NULL, lease_cb, p) !=
        0) {
        count(&p->polls[POLL_SKIPPED]);
        next_poll(p);
    }
}

int ad_poll_init(const sv_config *cfg, char *err, size_t errlen)
{
    poller *p = &the_poller;
    if (cfg->advisor_url == NULL)
        return 0;
    if (cfg->advisor_token_file != NULL) {
        char token[512];
        if (sl__secret_read(cfg->advisor_token_file, "--advisor-token-file",
                            token, sizeof(token), err, errlen) < 0)
            return -1;
        snprintf(p->auth, sizeof(p->auth), "Authorization: Bearer %s", token);
    }
    if (strncmp(cfg->advisor_url, "https://", 8) != 0) {
        if (cfg->advisor_ca != NULL) {
            snprintf(err, errlen, "--advisor-ca: the advisor is not https://");
            return -1;
        }
        return 0;
    }
    sl__tls_client_files f = {.label = "--advisor-ca",
                              .ca_file = cfg->advisor_ca};
    if (sl__tls_client_new(&f, &p->tls, err, errlen) != 0)
        return -1;
    return 0;
}

int ad_poll_start(sv_worker *control)
{
    poller *p = &the_poller;
    if (control->server->cfg.advisor_url == NULL)
        return 0;
    /* No memset: the poller is static, so zero already, and its counters
     * are read by scrapes on other threads from the start (a plain write
     * over them here was a data race TSan found). */
    p->w = control;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(p->node_id, sizeof(p->node_id), "%s:%ld:%llx", host,
             (long)getpid(), (unsigned long long)uv_hrtime());
    static const char *const capture[] = {"ETag", NULL};
    ah_response_init(&p->resp, capture);
    uv_timer_init(&control->loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, timer_cb, 200, 0);
    return 0;
}

static void closed_cb(uv_handle_t *h)
{
    (void)h;
}

void ad_poll_stop(sv_worker *control)
{
    poller *p = &the_poller;
    if (p->w != control)
        return;
    p->stopping = 1;
    uv_close((uv_handle_t *)&p->timer, closed_cb);
    if (!p->busy) { /* else the poll's end frees it */
        sl__tls_client_free(p->tls);
        p->tls = NULL;
    }
    ad_shadow_release();
}

void ad_poll_metrics(sv_server *s, sv_buf *out)
{
    poller *p = &the_poller;
    if (s->cfg.advisor_url == NULL)
        return;
    sv_buf_addstr(out, "# HELP sluice_advisor_polls_total polls of the "
                       "advisor, by result\n"
                       "# TYPE sluice_advisor_polls_total counter\n");
    for (int i = 0; i < N_POLL; i++)
        sv_buf_printf(out, "sluice_advisor_polls_total{result=\"%s\"} %llu\n",
                      poll_names[i],
                      (unsigned long long)atomic_load(&p->polls[i]));
    int64_t last = atomic_load(&p->last_ok_ms);
    sv_buf_printf(
        out,
        "# HELP sluice_advisor_recommendations_total the advisor's "
        "recommendations: applied, unchanged (or recorded in shadow mode), "
        "refused (no such rule, not adaptive, or not taken)\n"
        "# TYPE sluice_advisor_recommendations_total counter\n"
        "sluice_advisor_recommendations_total{result=\"applied\"} %llu\n"
        "sluice_advisor_recommendations_total{result=\"unchanged\"} %llu\n"
        "sluice_advisor_recommendations_total{result=\"refused\"} %llu\n"
        "# HELP sluice_advisor_poll_duration_seconds the last poll's\n"
        "# TYPE sluice_advisor_poll_duration_seconds gauge\n"
        "sluice_advisor_poll_duration_seconds %.6f\n"
        "# HELP sluice_advisor_answer_age_seconds since the advisor last "
        "answered (-1: never)\n"
        "# TYPE sluice_advisor_answer_age_seconds gauge\n"
        "sluice_advisor_answer_age_seconds %.3f\n",
        (unsigned long long)atomic_load(&p->applied),
        (unsigned long long)atomic_load(&p->unchanged),
        (unsigned long long)atomic_load(&p->refused),
        (double)atomic_load(&p->duration_ns) / 1e9,
        last ? (double)(sd_engine_clock(s->engine) / SL_NS_PER_MS - last) / 1e3
             : -1.0);
    if (s->cfg.advisor_shadow)
        ad_shadow_metrics(sd_engine_clock(s->engine) / SL_NS_PER_MS, out);
}
