/*
 * limits_metrics.c - the runtime limits' series of /metrics (limits.h):
 * every rule's limit in force and as loaded, the overrides by state, and
 * the age of the last sync with Redis.  Apart because /metrics reads
 * them from the set in force and the table, under the locks of both, and
 * writes its own text format.
 */
#include <string.h>

#include "control/limits_table.h"
#include "runtime/label.h"

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
    int64_t t = sv_limits_now_ms(s), synced = lim->synced_ms;
    for (size_t i = 0; lim->loaded != NULL && i < lim->n; i++) {
        const char *st = sv_override_state(lim, &lim->e[i], t);
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
