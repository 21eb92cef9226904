/*
 * limits_views.c - the runtime limits as the APIs read them (limits.h):
 * the overrides with their state and one of them, and the change log
 * (the admin API).  Apart because they only read: the
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
