/*
 * advisor.c - `sluice advisor`: the reference advisor of the
 * sluice-advisor/1 protocol (docs/advisor.md).  Every step it scrapes
 * each sluice node's /metrics and /v1/rules, turns the per-rule decision
 * counters into demand per rule's period, forecasts it with additive
 * seasonal Holt-Winters (src/adaptive/holt_winters.c) and serves
 * recommendations on GET /v1/recommendations.
 *
 * Two threads: the scraper (blocking HTTP with deadlines, the models)
 * and the server, a poll() loop of at most MAX_CONNS connections with
 * bounded buffers, which answers from the last answer the scraper
 * published under a mutex, so that a slow or dead node never delays an
 * answer.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>
#include <jansson.h>

#include "adaptive/advice.h"
#include "adaptive/holt_winters.h"
#include "http/http_client.h"
#include "adaptive/scrape.h"
#include "commands.h"
#include "sluice.h"

#define MAX_NODES 64
#define MAX_CONNS 64
#define MAX_REQUEST 8192 /* bytes of a request, head and body */
#define IDLE_MS 10000    /* a connection silent this long is closed */
#define HITS "sluice_rule_hits_total"

static const char advisor_usage[] =
    "usage: sluice advisor --scrape URL[,URL...] [--listen HOST:PORT]\n"
    "         [--step 1s] [--season 60s] [--horizon 5s] [--alpha 0.3]\n"
    "         [--beta 0.01] [--gamma 0.3] [--damping 0.1] [--headroom 1.1]\n"
    "\n"
    "Scrapes each sluice node's /metrics and /v1/rules every step, forecasts\n"
    "each rule's demand per period (additive seasonal Holt-Winters, ready\n"
    "after two seasons) and serves recommended limits on\n"
    "GET /v1/recommendations (protocol sluice-advisor/1, docs/advisor.md):\n"
    "a rule gets ceil(headroom * U), U = the highest forecast up to the\n"
    "horizon + 2 sigma, when that is above its base limit.\n"
    "  --listen   default 127.0.0.1:9300 (port 0: any free port)\n";

void cmd_advisor_usage(FILE *to)
{
    fputs(advisor_usage, to);
}

/* ---- options ---- */

typedef struct options {
    char *nodes[MAX_NODES];
    size_t n_nodes;
    const char *listen;
    int64_t step_ms, season_ms, horizon_ms;
    hw_params hw;
    double headroom;
} options;

static int parse_ms(const char *flag, const char *v, int64_t *out)
{
    sl_nanos ns;
    if (sl_duration_parse(v, strlen(v), &ns) != 0 || ns < SL_NS_PER_MS) {
        fprintf(stderr, "sluice advisor: %s: invalid duration: '%s'\n", flag,
                v);
        return -1;
    }
    *out = ns / SL_NS_PER_MS;
    return 0;
}

static int parse_real(const char *flag, const char *v, double lo, double hi,
                      double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(d >= lo && d <= hi)) {
        fprintf(stderr, "sluice advisor: %s: want a number in %g..%g: '%s'\n",
                flag, lo, hi, v);
        return -1;
    }
    *out = d;
    return 0;
}

/* 0, 2 for a usage error (printed), or 1 for --help (printed). */
static int parse_options(int argc, char **argv, options *o, char *scrape_buf,
                         size_t scrape_len)
{
    static const struct option longs[] = {
        {"scrape", required_argument, NULL, 'S'},
        {"listen", required_argument, NULL, 'l'},
        {"step", required_argument, NULL, 's'},
        {"season", required_argument, NULL, 'm'},
        {"horizon", required_argument, NULL, 'h'},
        {"alpha", required_argument, NULL, 'a'},
        {"beta", required_argument, NULL, 'b'},
        {"gamma", required_argument, NULL, 'g'},
        {"damping", required_argument, NULL, 'd'},
        {"headroom", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'H'},
        {0, 0, 0, 0}};
    *o = (options){
        .listen = "127.0.0.1:9300",
        .step_ms = 1000,
        .season_ms = 60000,
        .horizon_ms = 5000,
        .hw = {.alpha = 0.3, .beta = 0.01, .gamma = 0.3, .damping = 0.1},
        .headroom = 1.1};
    const char *scrape = NULL;
    int c, bad = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'S':
            scrape = optarg;
            break;
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            bad |= parse_ms("--step", optarg, &o->step_ms);
            break;
        case 'm':
            bad |= parse_ms("--season", optarg, &o->season_ms);
            break;
        case 'h':
            bad |= parse_ms("--horizon", optarg, &o->horizon_ms);
            break;
        case 'a':
            bad |= parse_real("--alpha", optarg, 0, 1, &o->hw.alpha);
            break;
        case 'b':
            bad |= parse_real("--beta", optarg, 0, 1, &o->hw.beta);
            break;
        case 'g':
            bad |= parse_real("--gamma", optarg, 0, 1, &o->hw.gamma);
            break;
        case 'd': /* below 1: a trend that vanishes at once is --beta 0 */
            bad |= parse_real("--damping", optarg, 0, 0.99, &o->hw.damping);
            break;
        case 'r':
            bad |= parse_real("--headroom", optarg, 1, 100, &o->headroom);
            break;
        case 'H':
            fputs(advisor_usage, stdout);
            return 1;
        default:
            bad = 1;
        }
    }
    if (bad || optind < argc) {
        fputs(advisor_usage, stderr);
        return 2;
    }
    if (scrape == NULL || strlen(scrape) >= scrape_len) {
        fprintf(stderr, "sluice advisor: --scrape is required\n");
        return 2;
    }
    if (o->season_ms / o->step_ms < 2 || o->season_ms % o->step_ms != 0) {
        fprintf(stderr,
                "sluice advisor: --season must be a multiple of --step, at "
                "least 2 steps\n");
        return 2;
    }
    if (o->season_ms / o->step_ms > 100000 || o->horizon_ms > o->season_ms) {
        fprintf(stderr, "sluice advisor: at most 100000 steps a season, and "
                        "--horizon at most one season\n");
        return 2;
    }
    strcpy(scrape_buf, scrape);
    for (char *save = NULL, *t = strtok_r(scrape_buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (o->n_nodes == MAX_NODES) {
            fprintf(stderr, "sluice advisor: at most %d nodes\n", MAX_NODES);
            return 2;
        }
        o->nodes[o->n_nodes++] = t;
    }
    if (o->n_nodes == 0) {
        fprintf(stderr, "sluice advisor: --scrape is required\n");
        return 2;
    }
    o->hw.season = (size_t)(o->season_ms / o->step_ms);
    return 0;
}

/* ---- the published answer ---- */

typedef struct answer {
    pthread_mutex_t lock;
    char *json;          /* owned; the body of a 200 */
    char etag[32];       /* "\"<computed_at_ms>\"" */
    int64_t computed_at; /* Unix ms */
    int64_t valid_for;   /* ms */
    size_t n_recs;
} answer;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Publishes recs (stolen) as the answer computed now. */
static void publish(answer *a, json_t *recs, size_t n_recs)
{
    int64_t now = wall_ms();
    json_t *root = json_pack("{s:s,s:I,s:I,s:o}", "protocol", AD_PROTOCOL,
                             "computed_at_ms", (json_int_t)now, "valid_for_ms",
                             (json_int_t)a->valid_for, "recommendations", recs);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (text == NULL)
        return; /* out of memory: the last answer stays */
    pthread_mutex_lock(&a->lock);
    if (now <= a->computed_at)
        now = a->computed_at + 1; /* a new answer, a new ETag */
    free(a->json);
    a->json = text;
    a->computed_at = now;
    a->n_recs = n_recs;
    snprintf(a->etag, sizeof(a->etag), "\"%lld\"", (long long)now);
    pthread_mutex_unlock(&a->lock);
}

/* ---- the scraper ---- */

/* A rule's model and what was last recommended for it. */
typedef struct rule_model {
    char *id, *domain, *label;
    int64_t base, period_ms;
    hw_model m;
    int seen;   /* matched in this step's rules */
    int shared; /* another rule has its domain and label, so its series */
} rule_model;

typedef struct scraper {
    const options *o;
    answer *ans;
    as_metrics prev[MAX_NODES]; /* each node's last counters */
    int have_prev[MAX_NODES];
    rule_model *models;
    size_t n_models;
    int64_t last_ok_mono; /* when the last complete scrape was taken */
    char last_err[512];
    atomic_int *stop; /* set by the signal handler, read by both threads */
} scraper;

static rule_model *model_of(scraper *s, const as_rule *r)
{
    for (size_t i = 0; i < s->n_models; i++)
        if (strcmp(s->models[i].id, r->id) == 0)
            return &s->models[i];
    rule_model *grown =
        realloc(s->models, (s->n_models + 1) * sizeof(*s->models));
    if (grown == NULL)
        return NULL;
    s->models = grown;
    rule_model *m = &s->models[s->n_models];
    memset(m, 0, sizeof(*m));
    m->id = strdup(r->id);
    m->domain = strdup(r->domain);
    m->label = strdup(r->label);
    if (m->id == NULL || m->domain == NULL || m->label == NULL ||
        hw_init(&m->m, &s->o->hw) != 0) {
        free(m->id);
        free(m->domain);
        free(m->label);
        return NULL;
    }
    m->base = r->requests_per_unit;
    m->period_ms = r->period_ms;
    s->n_models++;
    return m;
}

static void drop_unseen(scraper *s)
{
    size_t w = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        rule_model *m = &s->models[i];
        if (m->seen) {
            s->models[w++] = *m;
            continue;
        }
        free(m->id);
        free(m->domain);
        free(m->label);
        hw_release(&m->m);
    }
    s->n_models = w;
}

/* The decisions of rule (domain, label) in this step: each descriptor's
 * increments summed over the nodes, then the busiest descriptor (a rule
 * with detailed_metric has a series per descriptor; others have one). */
static double step_count(scraper *s, as_metrics *now, const rule_model *m)
{
    const char **descs = NULL;
    double *sums = NULL;
    size_t n_descs = 0;
    double busiest = 0;
    for (size_t k = 0; k < s->o->n_nodes; k++) {
        if (!s->have_prev[k])
            continue; /* its first scrape: no increment yet */
        for (size_t i = 0; i < now[k].n; i++) {
            const as_series *c = &now[k].series[i];
            if (strcmp(c->domain, m->domain) != 0 ||
                strcmp(c->rule, m->label) != 0)
                continue;
            const as_series *p =
                as_metrics_find(&s->prev[k], c->domain, c->rule, c->descriptor);
            /* A series new since the last scrape counted from 0; one that
             * went down was reset by a restart, and counts from 0 too. */
            double d = p != NULL && c->value >= p->value ? c->value - p->value
                                                         : c->value;
            size_t j = 0;
            while (j < n_descs && strcmp(descs[j], c->descriptor) != 0)
                j++;
            if (j == n_descs) {
                const char **gd = realloc(descs, (j + 1) * sizeof(*gd));
                descs = gd ? gd : descs;
                double *gs = gd ? realloc(sums, (j + 1) * sizeof(*gs)) : NULL;
                sums = gs ? gs : sums;
                if (gd == NULL || gs == NULL)
                    continue; /* out of memory: this descriptor is missed */
                descs[j] = c->descriptor;
                sums[j] = 0;
                n_descs++;
            }
            sums[j] += d;
        }
    }
    for (size_t j = 0; j < n_descs; j++)
        busiest = fmax(busiest, sums[j]);
    free(descs);
    free(sums);
    return busiest;
}

/* The recommendation for m now, or NULL when it has none. */
static json_t *recommend(const scraper *s, const rule_model *m, int64_t now)
{
    const options *o = s->o;
    if (!m->m.ready || m->base <= 0 || m->shared)
        return NULL;
    size_t steps = (size_t)((o->horizon_ms + o->step_ms - 1) / o->step_ms);
    size_t peak_h = 1;
    double yhat = hw_forecast(&m->m, 1);
    for (size_t h = 2; h <= steps; h++)
        if (hw_forecast(&m->m, h) > yhat) {
            yhat = hw_forecast(&m->m, h);
            peak_h = h;
        }
    double upper = yhat + 2 * hw_sigma(&m->m);
    double want = ceil(o->headroom * upper);
    if (!(want > (double)m->base))
        return NULL;
    if (want > (double)AD_MAX_REQUESTS)
        want = (double)AD_MAX_REQUESTS;
    return json_pack(
        "{s:s,s:I,s:s,s:{s:I,s:f,s:f}}", "limit", m->id, "requests_per_unit",
        (json_int_t)want, "reason", "forecast", "forecast", "at_ms",
        (json_int_t)(now + (int64_t)peak_h * o->step_ms), "yhat",
        round(yhat * 100) / 100, "upper", round(upper * 100) / 100);
}

static void note_error(scraper *s, const char *msg)
{
    if (strcmp(s->last_err, msg) != 0) /* once per kind of failure */
        fprintf(stderr, "sluice advisor: %s\n", msg);
    snprintf(s->last_err, sizeof(s->last_err), "%s", msg);
}

/* One step: 1 when every node answered and the models moved. */
static int scrape_step(scraper *s)
{
    const options *o = s->o;
    static const char *const capture[] = {"Content-Type", NULL};
    int timeout = (int)(o->step_ms < 500    ? 500
                        : o->step_ms > 2000 ? 2000
                                            : o->step_ms);
    as_metrics now[MAX_NODES];
    as_rules rules = {0};
    size_t got = 0;
    int ok = 1;
    char err[256], msg[512];
    ah_response r;
    ah_response_init(&r, capture);
    memset(now, 0, sizeof(now));
    for (size_t n = 0; ok && n < o->n_nodes; n++) {
        int rc = ah_request(o->nodes[n], "GET", "/metrics", NULL, NULL, 0,
                            timeout, &r, err, sizeof(err));
        if (rc == 0 && r.status != 200)
            snprintf(err, sizeof(err), "status %d", r.status);
        if (rc != 0 || r.status != 200 ||
            as_metrics_parse(r.body, r.body_len, HITS, &now[n], err,
                             sizeof(err)) != 0) {
            snprintf(msg, sizeof(msg), "scrape %s/metrics: %s", o->nodes[n],
                     err);
            ok = 0;
            break;
        }
        got = n + 1;
    }
    if (ok) {
        /* The rules of the first node: all run one rules set but for the
         * moments of a rolling deploy. */
        int rc = ah_request(o->nodes[0], "GET", "/v1/rules", NULL, NULL, 0,
                            timeout, &r, err, sizeof(err));
        if (rc == 0 && r.status != 200)
            snprintf(err, sizeof(err), "status %d", r.status);
        if (rc != 0 || r.status != 200 ||
            as_rules_parse(r.body, r.body_len, &rules, err, sizeof(err))) {
            snprintf(msg, sizeof(msg), "scrape %s/v1/rules: %s", o->nodes[0],
                     err);
            ok = 0;
        }
    }
    ah_response_release(&r);
    if (!ok) {
        note_error(s, msg);
        for (size_t n = 0; n < got; n++)
            as_metrics_release(&now[n]);
        return 0;
    }
    if (s->last_err[0] != '\0')
        fprintf(stderr, "sluice advisor: every node answers again\n");
    s->last_err[0] = '\0';

    int64_t t = mono_ms();
    int first = s->last_ok_mono == 0;
    double dt = (double)(t - s->last_ok_mono);
    /* Steps this scrape covers: more than one after failed scrapes, whose
     * demand is then spread evenly over them; past a season the models
     * start again, as the season's phase is lost. */
    int64_t covered = first ? 0 : (int64_t)llround(dt / (double)o->step_ms);
    if (!first && covered < 1)
        covered = 1;
    for (size_t i = 0; i < s->n_models; i++)
        s->models[i].seen = 0;
    for (size_t i = 0; i < rules.n; i++) {
        const as_rule *ar = &rules.rules[i];
        rule_model *m = model_of(s, ar);
        if (m == NULL)
            continue;
        m->seen = 1;
        /* Rules of one domain and label count into one series: their
         * demands cannot be told apart, so none of them is advised. */
        m->shared = 0;
        for (size_t j = 0; j < rules.n; j++)
            m->shared |= j != i &&
                         strcmp(rules.rules[j].domain, ar->domain) == 0 &&
                         strcmp(rules.rules[j].label, ar->label) == 0;
        if (m->base != ar->requests_per_unit || m->period_ms != ar->period_ms) {
            /* Another limit or period: demand per period means another
             * thing, start again. */
            m->base = ar->requests_per_unit;
            m->period_ms = ar->period_ms;
            hw_reset(&m->m);
        }
        if (first || m->period_ms <= 0)
            continue;
        if (covered > (int64_t)o->hw.season) {
            hw_reset(&m->m);
            continue;
        }
        double demand = step_count(s, now, m) * (double)m->period_ms / dt;
        for (int64_t k = 0; k < covered; k++)
            hw_update(&m->m, demand);
    }
    drop_unseen(s);
    for (size_t n = 0; n < o->n_nodes; n++) {
        as_metrics_release(&s->prev[n]);
        s->prev[n] = now[n];
        s->have_prev[n] = 1;
    }
    s->last_ok_mono = t;

    json_t *recs = json_array();
    size_t n_recs = 0;
    int64_t wall = wall_ms();
    for (size_t i = 0; recs != NULL && i < s->n_models; i++) {
        json_t *rec = recommend(s, &s->models[i], wall);
        if (rec != NULL && json_array_append_new(recs, rec) == 0)
            n_recs++;
    }
    as_rules_release(&rules);
    if (recs != NULL)
        publish(s->ans, recs, n_recs);
    return 1;
}

static void *scraper_main(void *arg)
{
    scraper *s = arg;
    int64_t next = mono_ms();
    while (!atomic_load(s->stop)) {
        scrape_step(s);
        /* An answer no step has renewed for valid_for_ms is withdrawn:
         * none is better than a stale one. */
        answer *a = s->ans;
        pthread_mutex_lock(&a->lock);
        int stale = a->n_recs > 0 && wall_ms() - a->computed_at >= a->valid_for;
        pthread_mutex_unlock(&a->lock);
        if (stale)
            publish(a, json_array(), 0);
        next += s->o->step_ms;
        int64_t now = mono_ms();
        if (next < now)
            next = now; /* a slow scrape: no burst of steps to catch up */
        while (!atomic_load(s->stop) && mono_ms() < next) {
            int64_t left = next - mono_ms();
            struct timespec ts = {.tv_sec = 0,
                                  .tv_nsec = (left > 50 ? 50 : left) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* ---- the server ---- */

typedef struct conn {
    int fd;
    http_parser hp;
    size_t received;
    int64_t last_ms;
    char url[1024];
    size_t url_len;
    int url_long;
    char field[32];
    size_t field_len;
    int in_inm; /* the header being read is If-None-Match */
    int in_value;
    char inm[128];
    size_t inm_len;
    int done; /* the request is complete: out is being written */
    char *out;
    size_t out_len, out_off;
} conn;

static int on_url(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (c->url_len + len >= sizeof(c->url))
        c->url_long = 1;
    else {
        memcpy(c->url + c->url_len, at, len);
        c->url_len += len;
    }
    return 0;
}

static int on_field(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (c->in_value) {
        c->in_value = 0;
        c->field_len = 0;
    }
    if (c->field_len + len < sizeof(c->field)) {
        memcpy(c->field + c->field_len, at, len);
        c->field_len += len;
    } else {
        c->field_len = sizeof(c->field); /* too long: no header of ours */
    }
    return 0;
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (!c->in_value) {
        c->in_value = 1;
        c->in_inm = c->field_len == 13 &&
                    strncasecmp(c->field, "If-None-Match", 13) == 0;
    }
    if (c->in_inm && c->inm_len + len < sizeof(c->inm)) {
        memcpy(c->inm + c->inm_len, at, len);
        c->inm_len += len;
    }
    return 0;
}

static int on_complete(http_parser *hp)
{
    conn *c = hp->data;
    c->done = 1;
    http_parser_pause(hp, 1);
    return 0;
}

static const http_parser_settings req_settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_message_complete = on_complete,
};

static void respond(conn *c, int status, const char *reason, const char *extra,
                    const char *body)
{
    size_t blen = body ? strlen(body) : 0;
    size_t cap = blen + 512;
    c->out = malloc(cap);
    if (c->out == NULL)
        return; /* closed without an answer */
    /* No body (a 304): no Content-Length either. */
    char length[48] = "";
    if (body != NULL)
        snprintf(length, sizeof(length), "Content-Length: %zu\r\n", blen);
    int n =
        snprintf(c->out, cap, "HTTP/1.1 %d %s\r\nConnection: close\r\n%s%s\r\n",
                 status, reason, extra ? extra : "", length);
    if (n < 0 || (size_t)n >= cap) {
        free(c->out);
        c->out = NULL;
        return;
    }
    if (body != NULL)
        memcpy(c->out + n, body, blen);
    c->out_len = (size_t)n + blen;
    c->out_off = 0;
}

#define JSON_TYPE "Content-Type: application/json\r\n"

/* Does If-None-Match (a list of entity tags, or *) name etag? */
static int matches(const char *inm, const char *etag)
{
    if (strcmp(inm, "*") == 0)
        return 1;
    size_t n = strlen(etag);
    for (const char *p = inm; (p = strstr(p, etag)) != NULL; p += n)
        if ((p == inm || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/') &&
            (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return 1;
    return 0;
}

static void route(conn *c, answer *a)
{
    c->url[c->url_len] = '\0';
    c->inm[c->inm_len] = '\0';
    size_t plen = strcspn(c->url, "?");
    int is_recs = !c->url_long && plen == 19 &&
                  strncmp(c->url, "/v1/recommendations", 19) == 0;
    if (!is_recs) {
        respond(c, 404, "Not Found", JSON_TYPE,
                "{\"error\":\"not found\",\"code\":\"ENOTFOUND\"}");
        return;
    }
    if (c->hp.method != HTTP_GET && c->hp.method != HTTP_HEAD) {
        respond(c, 405, "Method Not Allowed", JSON_TYPE "Allow: GET, HEAD\r\n",
                "{\"error\":\"method not allowed\",\"code\":\"EMETHOD\"}");
        return;
    }
    char extra[160];
    pthread_mutex_lock(&a->lock);
    snprintf(extra, sizeof(extra), "ETag: %s\r\n" JSON_TYPE, a->etag);
    if (c->inm_len > 0 && matches(c->inm, a->etag)) {
        pthread_mutex_unlock(&a->lock);
        snprintf(extra, sizeof(extra), "ETag: %s\r\n", a->etag);
        respond(c, 304, "Not Modified", extra, NULL);
        return;
    }
    respond(c, 200, "OK", extra, a->json);
    size_t body_len = a->json ? strlen(a->json) : 0;
    pthread_mutex_unlock(&a->lock);
    if (c->out != NULL && c->hp.method == HTTP_HEAD)
        c->out_len -= body_len; /* HEAD: the length, without the body */
}

static int listen_on(const char *addr, char *shown, size_t shown_len)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
        fprintf(stderr, "sluice advisor: --listen: want HOST:PORT: '%s'\n",
                addr);
        return -1;
    }
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr,
                gai_strerror(rc));
        return -1;
    }
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char port[16] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        getnameinfo((struct sockaddr *)&ss, len, NULL, 0, port, sizeof(port),
                    NI_NUMERICSERV);
    int v6 = ai->ai_family == AF_INET6;
    snprintf(shown, shown_len, "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
             port);
    freeaddrinfo(ai);
    return fd;
}

static void close_conn(conn *c)
{
    close(c->fd);
    free(c->out);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

/* Reads what c has; answers when its request is complete. */
static void conn_read(conn *c, answer *a)
{
    char buf[4096];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_conn(c);
        return;
    }
    c->received += (size_t)n;
    if (c->received > MAX_REQUEST) {
        respond(c, 431, "Request Header Fields Too Large", JSON_TYPE,
                "{\"error\":\"request too large\",\"code\":\"ETOOLARGE\"}");
        c->done = 1;
        return;
    }
    http_parser_execute(&c->hp, &req_settings, buf, (size_t)n);
    if (c->done) {
        route(c, a);
    } else if (HTTP_PARSER_ERRNO(&c->hp) != HPE_OK) {
        respond(c, 400, "Bad Request", JSON_TYPE,
                "{\"error\":\"malformed request\",\"code\":\"EINVAL\"}");
        c->done = 1;
    }
    if (c->done && c->out == NULL)
        close_conn(c);
}

static void conn_write(conn *c)
{
    ssize_t n =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_conn(c);
        return;
    }
    c->out_off += (size_t)n;
    if (c->out_off == c->out_len) {
        shutdown(c->fd, SHUT_WR);
        close_conn(c);
    }
}

static void serve(int lfd, answer *a, atomic_int *stop)
{
    static conn conns[MAX_CONNS];
    for (int i = 0; i < MAX_CONNS; i++)
        conns[i].fd = -1;
    while (!atomic_load(stop)) {
        struct pollfd pfd[MAX_CONNS + 1];
        int map[MAX_CONNS + 1], n = 0;
        int free_slot = -1;
        int64_t now = mono_ms();
        for (int i = 0; i < MAX_CONNS; i++) {
            if (conns[i].fd < 0) {
                free_slot = free_slot < 0 ? i : free_slot;
                continue;
            }
            if (now - conns[i].last_ms > IDLE_MS) {
                close_conn(&conns[i]);
                free_slot = free_slot < 0 ? i : free_slot;
                continue;
            }
            pfd[n] = (struct pollfd){
                .fd = conns[i].fd, .events = conns[i].done ? POLLOUT : POLLIN};
            map[n++] = i;
        }
        if (free_slot >= 0) { /* full: new connections wait in the backlog */
            pfd[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
            map[n++] = -1;
        }
        if (poll(pfd, (nfds_t)n, 200) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (pfd[k].revents == 0)
                continue;
            if (map[k] < 0) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                    continue;
                conn *c = &conns[free_slot];
                memset(c, 0, sizeof(*c));
                c->fd = fd;
                c->last_ms = mono_ms();
                http_parser_init(&c->hp, HTTP_REQUEST);
                c->hp.data = c;
                continue;
            }
            conn *c = &conns[map[k]];
            c->last_ms = mono_ms();
            if (c->done)
                conn_write(c);
            else
                conn_read(c, a);
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].fd >= 0)
            close_conn(&conns[i]);
}

/* Lock-free, so the handler may store it; atomic, because the scraper
 * thread reads it too. */
static atomic_int stopping;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stopping, 1);
}

int cmd_advisor(int argc, char **argv)
{
    options o;
    char scrape[4096];
    int rc = parse_options(argc, argv, &o, scrape, sizeof(scrape));
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    char shown[300];
    int lfd = listen_on(o.listen, shown, sizeof(shown));
    if (lfd < 0)
        return 1;
    answer a = {.lock = PTHREAD_MUTEX_INITIALIZER};
    /* At least 1 s: the protocol's floor, and time for a poll to land. */
    a.valid_for = 3 * o.step_ms < AD_MIN_VALID_FOR_MS ? AD_MIN_VALID_FOR_MS
                                                      : 3 * o.step_ms;
    publish(&a, json_array(), 0);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr,
            "sluice advisor: listening on %s; %zu node(s), step %lldms, "
            "season %zu steps, horizon %lldms\n",
            shown, o.n_nodes, (long long)o.step_ms, o.hw.season,
            (long long)o.horizon_ms);
    scraper s = {.o = &o, .ans = &a, .stop = &stopping};
    pthread_t th;
    if (pthread_create(&th, NULL, scraper_main, &s) != 0) {
        fprintf(stderr, "sluice advisor: cannot start the scraper\n");
        close(lfd);
        return 1;
    }
    serve(lfd, &a, &stopping);
    pthread_join(th, NULL);
    close(lfd);
    for (size_t n = 0; n < o.n_nodes; n++)
        as_metrics_release(&s.prev[n]);
    s.ans = NULL;
    for (size_t i = 0; i < s.n_models; i++)
        s.models[i].seen = 0;
    drop_unseen(&s);
    free(s.models);
    free(a.json);
    fprintf(stderr, "sluice advisor: stopped\n");
    return 0;
}
