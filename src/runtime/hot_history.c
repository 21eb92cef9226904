/*
 * hot_history.c - the status page's last 10 minutes (hot_history.h):
 * each thread's ring of 5 s buckets, and their sum for a report.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/hot_history.h"

json_t *sv_readable_text(const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char buf[256 * 4];
    size_t len = 0;
    for (size_t i = 0; i < n && i < 256; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            buf[len++] = (char)c;
        } else {
            buf[len++] = '\\';
            buf[len++] = 'x';
            buf[len++] = hex[c >> 4];
            buf[len++] = hex[c & 15];
        }
    }
    return json_stringn(buf, len);
}

void sv_hist_count(sv_hist *h, int64_t epoch, const char *rule, size_t n,
                   uint64_t hash, int over)
{
    sv_hist_bucket *b = &h->steps[epoch % SV_HIST_STEPS];
    if (b->epoch != epoch) {
        b->epoch = epoch;
        b->within = b->over = 0;
        b->n_rules = 0;
    }
    if (over)
        b->over++;
    else
        b->within++;
    size_t i = 0;
    while (i < b->n_rules && b->rules[i].hash != hash)
        i++;
    if (i == SV_HIST_RULES)
        return; /* in the totals only: "other rules" */
    sv_hist_rule *r = &b->rules[i];
    if (i == b->n_rules) {
        b->n_rules++;
        r->hash = hash;
        r->within = r->over = 0;
        r->name_len = (uint8_t)(n < SV_HIST_NAME ? n : SV_HIST_NAME);
        memcpy(r->name, rule, r->name_len);
    }
    if (over)
        r->over++;
    else
        r->within++;
}

/* Rules seen in any thread's buckets, the first SUM_RULES of them: more
 * than a page can draw, and a rule past them is among "other rules". */
#define SUM_RULES 64

typedef struct sum_rule {
    uint64_t hash, total;
    uint8_t name_len;
    char name[SV_HIST_NAME];
    uint64_t within[SV_HIST_STEPS], over[SV_HIST_STEPS];
} sum_rule;

struct sv_hist_sum {
    int64_t epoch; /* the last point's */
    uint64_t within[SV_HIST_STEPS], over[SV_HIST_STEPS];
    size_t n;
    sum_rule rules[SUM_RULES];
};

sv_hist_sum *sv_hist_sum_new(int64_t epoch)
{
    sv_hist_sum *sum = calloc(1, sizeof(*sum));
    if (sum != NULL)
        sum->epoch = epoch;
    return sum;
}

static sum_rule *sum_rule_of(sv_hist_sum *sum, const sv_hist_rule *r)
{
    for (size_t i = 0; i < sum->n; i++)
        if (sum->rules[i].hash == r->hash)
            return &sum->rules[i];
    if (sum->n == SUM_RULES)
        return NULL;
    sum_rule *s = &sum->rules[sum->n++];
    s->hash = r->hash;
    s->name_len = r->name_len;
    memcpy(s->name, r->name, r->name_len);
    return s;
}

void sv_hist_sum_add(sv_hist_sum *sum, const sv_hist *h)
{
    /* Oldest first: point j is epoch - (SV_HIST_STEPS - 1) + j. */
    for (int j = 0; j < SV_HIST_STEPS; j++) {
        int64_t e = sum->epoch - (SV_HIST_STEPS - 1) + j;
        const sv_hist_bucket *b =
            &h->steps[((e % SV_HIST_STEPS) + SV_HIST_STEPS) % SV_HIST_STEPS];
        if (e < 0 || b->epoch != e)
            continue;
        sum->within[j] += b->within;
        sum->over[j] += b->over;
        for (size_t i = 0; i < b->n_rules; i++) {
            sum_rule *s = sum_rule_of(sum, &b->rules[i]);
            if (s == NULL)
                continue;
            s->within[j] += b->rules[i].within;
            s->over[j] += b->rules[i].over;
            s->total += b->rules[i].within + b->rules[i].over;
        }
    }
}

static int by_total(const void *a, const void *b)
{
    const sum_rule *x = a, *y = b;
    return (x->total < y->total) - (x->total > y->total);
}

/* {"decisions": [...], "over_limit": [...]} of within + over and over. */
static json_t *series(const uint64_t *within, const uint64_t *over)
{
    json_t *d = json_array(), *o = json_array();
    for (int j = 0; j < SV_HIST_STEPS; j++) {
        json_array_append_new(d, json_integer((json_int_t)(within[j] + over[j])));
        json_array_append_new(o, json_integer((json_int_t)over[j]));
    }
    return json_pack("{s:o,s:o}", "decisions", d, "over_limit", o);
}

json_t *sv_hist_sum_json(sv_hist_sum *sum)
{
    json_t *points = json_array(), *rules = json_array();
    uint64_t other_within[SV_HIST_STEPS], other_over[SV_HIST_STEPS];
    memcpy(other_within, sum->within, sizeof(other_within));
    memcpy(other_over, sum->over, sizeof(other_over));
    for (int j = 0; j < SV_HIST_STEPS; j++)
        json_array_append_new(
            points,
            json_pack("{s:I,s:I,s:I}", "t_ms",
                      (json_int_t)((sum->epoch - (SV_HIST_STEPS - 1) + j) *
                                   SV_HIST_STEP_S * 1000),
                      "within", (json_int_t)sum->within[j], "over",
                      (json_int_t)sum->over[j]));
    qsort(sum->rules, sum->n, sizeof(sum->rules[0]), by_total);
    for (size_t i = 0; i < sum->n && i < SV_HIST_RULES; i++) {
        const sum_rule *s = &sum->rules[i];
        json_t *o = series(s->within, s->over);
        json_object_set_new(o, "rule", sv_readable_text(s->name, s->name_len));
        json_array_append_new(rules, o);
        for (int j = 0; j < SV_HIST_STEPS; j++) {
            other_within[j] -= s->within[j];
            other_over[j] -= s->over[j];
        }
    }
    json_t *r = json_pack("{s:I,s:o,s:o,s:o}", "step_s",
                          (json_int_t)SV_HIST_STEP_S, "points", points,
                          "rules", rules, "other",
                          series(other_within, other_over));
    free(sum);
    return r;
}
