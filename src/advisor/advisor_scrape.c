/*
 * advisor_scrape.c - the scraper thread of `sluice advisor` (advisor.h):
 * every step it reads each node's /metrics and the first node's
 * /v1/rules with the blocking HTTP client (deadlines of the step's
 * length, within 0.5 to 2 s), hands a complete scrape to the demand model
 * (advisor_model.c) and publishes its recommendations (advisor_answer.c).
 * Apart because it is the advisor's only client I/O and its pacing: a
 * failed scrape leaves the model and the answer as they were.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "advisor/advisor.h"
#include "http/http_client.h"
#include "sluice.h"

#define HITS "sluice_rule_hits_total"

struct av_scraper {
    const av_options *o;
    av_answer *ans;
    av_model *model;
    char last_err[512];
    atomic_int *stop; /* set by the signal handler, read by both threads */
    pthread_t thread;
};

static int64_t mono_ms(void)
{
    return sl_clock_monotonic() / SL_NS_PER_MS;
}

static void note_error(av_scraper *s, const char *msg)
{
    if (strcmp(s->last_err, msg) != 0) /* once per kind of failure */
        fprintf(stderr, "sluice advisor: %s\n", msg);
    snprintf(s->last_err, sizeof(s->last_err), "%s", msg);
}

/* One step: 1 when every node answered and the model moved. */
static int scrape_step(av_scraper *s)
{
    const av_options *o = s->o;
    static const char *const capture[] = {"Content-Type", NULL};
    int timeout = (int)(o->step_ms < 500    ? 500
                        : o->step_ms > 2000 ? 2000
                                            : o->step_ms);
    as_metrics now[AV_MAX_NODES];
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

    av_model_step(s->model, now, &rules, mono_ms());
    size_t n_recs;
    json_t *recs = av_model_recommend(
        s->model, sl_clock_realtime() / SL_NS_PER_MS, &n_recs);
    as_rules_release(&rules);
    if (recs != NULL)
        av_answer_publish(s->ans, recs, n_recs);
    return 1;
}

static void *scraper_main(void *arg)
{
    av_scraper *s = arg;
    int64_t next = mono_ms();
    while (!atomic_load(s->stop)) {
        scrape_step(s);
        av_answer_expire(s->ans);
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

av_scraper *av_scraper_start(const av_options *o, av_answer *a,
                             atomic_int *stop)
{
    av_scraper *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    *s = (av_scraper){.o = o, .ans = a, .stop = stop};
    s->model = av_model_new(o);
    if (s->model == NULL ||
        pthread_create(&s->thread, NULL, scraper_main, s) != 0) {
        av_model_free(s->model);
        free(s);
        return NULL;
    }
    return s;
}

void av_scraper_join(av_scraper *s)
{
    pthread_join(s->thread, NULL);
    av_model_free(s->model);
    free(s);
}
