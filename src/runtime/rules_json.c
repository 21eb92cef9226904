/*
 * rules_json.c - the rules set in force as JSON: every rule with its base
 * limit and the one in force (an override's, src/control/), for GET
 * /v1/rules, the status page and the admin API.  In the runtime because
 * it reads only the thread's rules set, which every door shares.
 */
#include "runtime/rules_json.h"

json_t *sv_rules_json(sv_worker *w)
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
