/*
 * limits_views.c - the runtime limits as the APIs read them (limits.h):
 * the overrides with their state and one of them (the admin API), every
 * rule with its base and effective limit (the admin API and GET
 * /v1/rules), and the change log.  Apart because they only read: the
 * table (limits.c) and its stores are what change it.
 */
#include "control/limits_table.h"

static json_t *listed(struct sv_limits *lim, const sv_override *e, int64_t t)
{
    json_t *j = sv_override_json(e);
    json_object_set_new(j, "state", json_string(sv_override_state(lim, e, t)));
    return j;
}

json_t *sv_limits_overrides(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    int64_t t = sv_limits_now_ms(lim->s);
    json_t *arr = json_array();
    pthread_mutex_lock(&lim->lock);
    for (size_t i = 0; i < lim->n; i++)
        json_array_append_new(arr, listed(lim, &lim->e[i], t));
    json_t *out = json_pack(
        "{s:o,s:I,s:s}", "overrides", arr, "version", (json_int_t)lim->version,
        "store", sd_engine_uses_redis(lim->s->engine) ? "redis" : "memory");
    if (sd_engine_uses_redis(lim->s->engine))
        json_object_set_new(out, "synced_ms", json_integer(lim->synced_ms));
    pthread_mutex_unlock(&lim->lock);
    return out;
}

json_t *sv_limits_override(sv_worker *control, const char *rule,
                           sv_source source)
{
    struct sv_limits *lim = control->server->limits;
    pthread_mutex_lock(&lim->lock);
    const sv_override *e = sv_override_find(lim, rule, source);
    json_t *j = e ? listed(lim, e, sv_limits_now_ms(lim->s)) : NULL;
    pthread_mutex_unlock(&lim->lock);
    return j;
}

json_t *sv_limits_rules(sv_worker *w)
{
    const sv_rules *set = w->rules;
    const sl_rules *r = set->rules;
    json_t *arr = json_array();
    for (size_t i = 0; i < sl_rules_rule_count(r); i++) {
        const sl_rule *rule = sl_rules_rule(r, i);
        const sl_rule *now = sv_rules_in_force(set, rule);
        const sv_effective *e = set->effective ? set->effective[i] : NULL;
        const char *alg =
            rule->action == SL_RULE_LIMIT
                ? sl_algorithm_name(sl_limit_get_config(rule->limit)->algorithm)
            : rule->action == SL_RULE_DENY ? "deny"
                                           : "unlimited";
        json_t *j = json_pack(
            "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:b,s:s}", "id",
            sv_rule_id(set, i), "domain", rule->domain, "path", rule->path,
            "name", rule->name, "algorithm", alg, "requests_per_unit",
            (json_int_t)now->requests_per_unit, "base_requests_per_unit",
            (json_int_t)rule->requests_per_unit, "period_ms",
            (json_int_t)(rule->period / SL_NS_PER_MS), "shadow_mode",
            rule->shadow_mode, "source", e ? e->source : "rules");
        if (rule->action == SL_RULE_LIMIT) {
            json_object_set_new(
                j, "burst",
                json_integer(sl_limit_get_config(now->limit)->burst));
            json_object_set_new(
                j, "base_burst",
                json_integer(sl_limit_get_config(rule->limit)->burst));
        }
        if (e != NULL)
            json_object_set_new(j, "expires_ms", json_integer(e->expires_ms));
        json_array_append_new(arr, j);
    }
    return arr;
}

json_t *sv_limits_events(sv_worker *control, uint64_t after)
{
    struct sv_limits *lim = control->server->limits;
    json_t *arr = json_array();
    pthread_mutex_lock(&lim->lock);
    if (sd_engine_uses_redis(lim->s->engine)) {
        size_t i;
        json_t *ev;
        json_array_foreach(lim->redis_log, i, ev)
        {
            json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
            if ((uint64_t)seq > after)
                json_array_append(arr, ev);
        }
    } else {
        for (size_t k = 0; k < SV_LOG_EVENTS; k++) {
            const char *text = lim->log[(lim->log_next + k) % SV_LOG_EVENTS];
            json_t *ev = text ? json_loads(text, 0, NULL) : NULL;
            if (ev != NULL && (uint64_t)json_integer_value(
                                  json_object_get(ev, "seq")) > after)
                json_array_append(arr, ev);
            json_decref(ev);
        }
    }
    pthread_mutex_unlock(&lim->lock);
    return json_pack("{s:o}", "events", arr);
}
