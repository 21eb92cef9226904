/*
 * advisor_model.c - the demand model of `sluice advisor` (advisor.h):
 * each rule's decisions per step, summed over the nodes from their
 * counters' increments, as demand per rule's period, forecast by one
 * additive seasonal Holt-Winters model a rule (holt_winters.h), and the
 * recommendation each forecast makes.  Apart from the scraper that feeds
 * it: counters and rules in, recommendations out, with no I/O and no
 * clock, so that what the advisor recommends is read in one place.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/advice.h"
#include "advisor/advisor.h"

/* A rule's model and what was last recommended for it. */
typedef struct rule_model {
    char *id, *domain, *label;
    int64_t base, period_ms;
    hw_model m;
    int seen;   /* matched in this step's rules */
    int shared; /* another rule has its domain and label, so its series */
} rule_model;

struct av_model {
    const av_options *o;
    as_metrics prev[AV_MAX_NODES]; /* each node's last counters */
    int have_prev[AV_MAX_NODES];
    rule_model *models;
    size_t n_models;
    int64_t last_ok_mono; /* when the last complete scrape was taken */
};

static rule_model *model_of(av_model *am, const as_rule *r)
{
    for (size_t i = 0; i < am->n_models; i++)
        if (strcmp(am->models[i].id, r->id) == 0)
            return &am->models[i];
    rule_model *grown =
        realloc(am->models, (am->n_models + 1) * sizeof(*am->models));
    if (grown == NULL)
        return NULL;
    am->models = grown;
    rule_model *m = &am->models[am->n_models];
    memset(m, 0, sizeof(*m));
    m->id = strdup(r->id);
    m->domain = strdup(r->domain);
    m->label = strdup(r->label);
    if (m->id == NULL || m->domain == NULL || m->label == NULL ||
        hw_init(&m->m, &am->o->hw) != 0) {
        free(m->id);
        free(m->domain);
        free(m->label);
        return NULL;
    }
    m->base = r->requests_per_unit;
    m->period_ms = r->period_ms;
    am->n_models++;
    return m;
}

static void drop_unseen(av_model *am)
{
    size_t w = 0;
    for (size_t i = 0; i < am->n_models; i++) {
        rule_model *m = &am->models[i];
        if (m->seen) {
            am->models[w++] = *m;
            continue;
        }
        free(m->id);
        free(m->domain);
        free(m->label);
        hw_release(&m->m);
    }
    am->n_models = w;
}

/* The decisions of rule (domain, label) in this step: each descriptor's
 * increments summed over the nodes, then the busiest descriptor (a rule
 * with detailed_metric has a series per descriptor; others have one). */
static double step_count(const av_model *am, const as_metrics *now,
                         const rule_model *m)
{
    const char **descs = NULL;
    double *sums = NULL;
    size_t n_descs = 0;
    double busiest = 0;
    for (size_t k = 0; k < am->o->n_nodes; k++) {
        if (!am->have_prev[k])
            continue; /* its first scrape: no increment yet */
        for (size_t i = 0; i < now[k].n; i++) {
            const as_series *c = &now[k].series[i];
            if (strcmp(c->domain, m->domain) != 0 ||
                strcmp(c->rule, m->label) != 0)
                continue;
            const as_series *p = as_metrics_find(&am->prev[k], c->domain,
                                                 c->rule, c->descriptor);
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
static json_t *recommend(const av_model *am, const rule_model *m, int64_t now)
{
    const av_options *o = am->o;
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

av_model *av_model_new(const av_options *o)
{
    av_model *am = calloc(1, sizeof(*am));
    if (am != NULL)
        am->o = o;
    return am;
}

void av_model_free(av_model *am)
{
    if (am == NULL)
        return;
    for (size_t n = 0; n < am->o->n_nodes; n++)
        as_metrics_release(&am->prev[n]);
    for (size_t i = 0; i < am->n_models; i++)
        am->models[i].seen = 0;
    drop_unseen(am);
    free(am->models);
    free(am);
}

void av_model_step(av_model *am, as_metrics *now, const as_rules *rules,
                   int64_t t)
{
    const av_options *o = am->o;
    int first = am->last_ok_mono == 0;
    double dt = (double)(t - am->last_ok_mono);
    /* Steps this scrape covers: more than one after failed scrapes, whose
     * demand is then spread evenly over them; past a season the models
     * start again, as the season's phase is lost. */
    int64_t covered = first ? 0 : (int64_t)llround(dt / (double)o->step_ms);
    if (!first && covered < 1)
        covered = 1;
    for (size_t i = 0; i < am->n_models; i++)
        am->models[i].seen = 0;
    for (size_t i = 0; i < rules->n; i++) {
        const as_rule *ar = &rules->rules[i];
        rule_model *m = model_of(am, ar);
        if (m == NULL)
            continue;
        m->seen = 1;
        /* Rules of one domain and label count into one series: their
         * demands cannot be told apart, so none of them is advised. */
        m->shared = 0;
        for (size_t j = 0; j < rules->n; j++)
            m->shared |= j != i &&
                         strcmp(rules->rules[j].domain, ar->domain) == 0 &&
                         strcmp(rules->rules[j].label, ar->label) == 0;
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
        double demand = step_count(am, now, m) * (double)m->period_ms / dt;
        for (int64_t k = 0; k < covered; k++)
            hw_update(&m->m, demand);
    }
    drop_unseen(am);
    for (size_t n = 0; n < o->n_nodes; n++) {
        as_metrics_release(&am->prev[n]);
        am->prev[n] = now[n];
        am->have_prev[n] = 1;
    }
    am->last_ok_mono = t;
}

json_t *av_model_recommend(const av_model *am, int64_t now, size_t *n_recs)
{
    json_t *recs = json_array();
    *n_recs = 0;
    for (size_t i = 0; recs != NULL && i < am->n_models; i++) {
        json_t *rec = recommend(am, &am->models[i], now);
        if (rec != NULL && json_array_append_new(recs, rec) == 0)
            (*n_recs)++;
    }
    return recs;
}
