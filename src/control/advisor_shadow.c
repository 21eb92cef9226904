/*
 * advisor_shadow.c - what the advisor would have set under
 * --advisor-mode shadow (admin.h): each rule's last recommendation, as
 * the poller bounded it, until its answer expires.  An operator judges
 * the advisor by it before trusting it: a gauge per rule in /metrics, a
 * `shadowed` list in GET /admin/v1/overrides, and a log line when a
 * rule's recommendation changes.  The poller writes it on the control
 * thread; scrapes and the admin API read it from others, under a lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "log/log.h"
#include "runtime/label.h"

/* At most this many rules are remembered: recommendations only reach
 * rules that opted in (`adaptive`), so a rules set rarely has more. */
#define MAX_SHADOWED 1024

typedef struct shadowed {
    char *rule;
    int64_t requests, burst; /* burst 0: scaled with the limit */
    int64_t at_ms, until_ms;
    char reason[64];
} shadowed;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static shadowed *table;
static size_t n, cap;

/* Drops what expired by now_ms; under lock. */
static void expire(int64_t now_ms)
{
    for (size_t i = 0; i < n;)
        if (table[i].until_ms <= now_ms) {
            free(table[i].rule);
            table[i] = table[--n];
        } else {
            i++;
        }
}

void ad_shadow_record(const char *rule, int64_t requests, int64_t burst,
                      int64_t now_ms, int64_t until_ms, const char *reason)
{
    pthread_mutex_lock(&lock);
    expire(now_ms);
    shadowed *s = NULL;
    for (size_t i = 0; i < n && s == NULL; i++)
        if (strcmp(table[i].rule, rule) == 0)
            s = &table[i];
    int changed = s == NULL || s->requests != requests || s->burst != burst;
    if (s == NULL && n == cap && cap < MAX_SHADOWED) {
        size_t c = cap ? cap * 2 : 16;
        shadowed *t = realloc(table, c * sizeof(*t));
        if (t != NULL) {
            table = t;
            cap = c;
        }
    }
    if (s == NULL && n < cap && (table[n].rule = strdup(rule)) != NULL)
        s = &table[n++];
    if (s != NULL) {
        s->requests = requests;
        s->burst = burst;
        s->at_ms = now_ms;
        s->until_ms = until_ms;
        strncpy(s->reason, reason ? reason : "", sizeof(s->reason) - 1);
        s->reason[sizeof(s->reason) - 1] = '\0';
    }
    pthread_mutex_unlock(&lock);
    if (changed)
        sl__log(SL__LOG_INFO, NULL,
                "advisor (shadow): %s would be %lld (burst %lld)%s%s", rule,
                (long long)requests, (long long)burst, reason ? ": " : "",
                reason ? reason : "");
}

json_t *ad_shadow_json(int64_t now_ms)
{
    json_t *a = json_array();
    pthread_mutex_lock(&lock);
    expire(now_ms);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            a, json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "rule", table[i].rule,
                         "requests_per_unit", (json_int_t)table[i].requests,
                         "burst", (json_int_t)table[i].burst, "at_ms",
                         (json_int_t)table[i].at_ms, "expires_ms",
                         (json_int_t)table[i].until_ms, "reason",
                         table[i].reason));
    pthread_mutex_unlock(&lock);
    return a;
}

void ad_shadow_metrics(int64_t now_ms, sv_buf *out)
{
    pthread_mutex_lock(&lock);
    expire(now_ms);
    if (n > 0)
        sv_buf_addstr(out, "# HELP sluice_advisor_shadow_requests_per_unit "
                           "what the advisor would set, by rule "
                           "(--advisor-mode shadow), until its answer "
                           "expires\n"
                           "# TYPE sluice_advisor_shadow_requests_per_unit "
                           "gauge\n");
    for (size_t i = 0; i < n; i++) {
        sv_buf_addstr(out, "sluice_advisor_shadow_requests_per_unit{rule=\"");
        sv_label_value(out, table[i].rule, strlen(table[i].rule));
        sv_buf_printf(out, "\"} %lld\n", (long long)table[i].requests);
    }
    pthread_mutex_unlock(&lock);
}

void ad_shadow_release(void)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++)
        free(table[i].rule);
    free(table);
    table = NULL;
    n = cap = 0;
    pthread_mutex_unlock(&lock);
}
