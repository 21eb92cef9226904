/*
 * limits_override.c - one override of the runtime limits
 * (limits_table.h) as a value: its sources' names, its release, its JSON
 * as the admin API shows it and as Redis keeps it, and a change's event
 * in the change log.  Apart, and below the rest of the runtime limits,
 * because the table, its Redis copy and the views all speak it, and one
 * text keeps them in step.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/limits_table.h"

static const char *const source_names[SV_N_SOURCES] = {"manual", "advisor",
                                                       "controller"};

const char *sv_source_name(sv_source s)
{
    return source_names[s];
}

int sv_source_parse(const char *name, sv_source *out)
{
    for (int i = 0; i < SV_N_SOURCES; i++)
        if (strcmp(name, source_names[i]) == 0) {
            *out = (sv_source)i;
            return 0;
        }
    return -1;
}

void sv_override_release(sv_override *e)
{
    free(e->rule);
    free(e->reason);
    memset(e, 0, sizeof(*e));
}

/* An override's JSON (the API's, and Redis's copy); base as 16 hex digits,
 * since JSON numbers do not hold 64 bits. */
json_t *sv_override_json(const sv_override *e)
{
    char hex[17];
    snprintf(hex, sizeof(hex), "%016" PRIx64, e->base);
    json_t *j = json_pack(
        "{s:s,s:s,s:I,s:I,s:s,s:I,s:I,s:s,s:I}", "rule", e->rule, "source",
        sv_source_name(e->source), "requests_per_unit",
        (json_int_t)e->requests_per_unit, "burst", (json_int_t)e->burst,
        "reason", e->reason ? e->reason : "", "created_ms",
        (json_int_t)e->created_ms, "expires_ms", (json_int_t)e->expires_ms,
        "base", hex, "version", (json_int_t)e->version);
    if (j != NULL && e->held_ms > e->expires_ms)
        json_object_set_new(j, "held_until_ms", json_integer(e->held_ms));
    return j;
}

/* An override from its JSON (Redis's copy): 0, or -1 for one that is not
 * an override (it is then left out). */
int sv_override_from_json(const json_t *j, sv_override *e)
{
    const char *rule, *source, *reason = "", *base;
    json_int_t rpu, burst, created, expires, version;
    memset(e, 0, sizeof(*e));
    if (json_unpack((json_t *)j, "{s:s,s:s,s:I,s:I,s?s,s:I,s:I,s:s,s:I}",
                    "rule", &rule, "source", &source, "requests_per_unit", &rpu,
                    "burst", &burst, "reason", &reason, "created_ms", &created,
                    "expires_ms", &expires, "base", &base, "version",
                    &version) != 0 ||
        sv_source_parse(source, &e->source) != 0)
        return -1;
    e->rule = strdup(rule);
    e->reason = strdup(reason);
    e->requests_per_unit = rpu;
    e->burst = burst;
    e->created_ms = created;
    e->expires_ms = expires;
    e->base = strtoull(base, NULL, 16);
    e->version = (uint64_t)version;
    if (e->rule == NULL || e->reason == NULL) {
        sv_override_release(e);
        return -1;
    }
    return 0;
}

/* A change's event: what was set or deleted, and what it replaced. */
json_t *sv_override_event(const char *action, const sv_override *now,
                          const sv_override *before, const char *rule,
                          sv_source source, int64_t at_ms, uint64_t seq)
{
    json_t *ev = json_pack("{s:I,s:I,s:s,s:s,s:s}", "seq", (json_int_t)seq,
                           "at_ms", (json_int_t)at_ms, "action", action, "rule",
                           rule, "source", sv_source_name(source));
    if (now != NULL) {
        json_object_set_new(ev, "requests_per_unit",
                            json_integer(now->requests_per_unit));
        json_object_set_new(ev, "burst", json_integer(now->burst));
        json_object_set_new(ev, "expires_ms", json_integer(now->expires_ms));
        json_object_set_new(ev, "reason", json_string(now->reason));
    }
    json_object_set_new(ev, "previous",
                        before
                            ? json_pack("{s:I,s:I}", "requests_per_unit",
                                        (json_int_t)before->requests_per_unit,
                                        "burst", (json_int_t)before->burst)
                            : json_null());
    return ev;
}
