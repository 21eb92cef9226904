/*
 * test_hot.c - the status page's counts (src/runtime/hot.c): below K keys
 * per thread they are exact; past K (a stream of a few heavy keys among
 * thousands of one-off ones) every key counted more than N/K times is
 * reported, with a count at least its true one and at most its true one
 * plus its error; threads' tables merge; counts older than two 30 s
 * generations are gone; the history puts each decision in its 5 s
 * bucket.  Manual time: the workers' clocks are set by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/hot.h"

#define SEC SL_NS_PER_SEC
#define T0 (999990 * SEC) /* a multiple of 30 s */

typedef struct fake {
    sv_server s;
    sv_worker *w;
} fake;

static fake *fake_new(int n)
{
    fake *f = calloc(1, sizeof(*f));
    f->w = calloc((size_t)n, sizeof(*f->w));
    f->s.workers = f->w;
    f->s.n_workers = n;
    for (int i = 0; i < n; i++) {
        f->w[i].server = &f->s;
        f->w[i].hot = sv_hot_new();
        f->w[i].now = T0;
    }
    return f;
}

static void fake_free(fake *f)
{
    for (int i = 0; i < f->s.n_workers; i++)
        sv_hot_free(f->w[i].hot);
    free(f->w);
    free(f);
}

static void hit(sv_worker *w, const char *rule, const char *key, int over)
{
    sv_hot_count(w, rule, strlen(rule), sv_hot_hash(rule, strlen(rule)), key,
                 strlen(key), over);
}

/* The entry of (rule, key) in a report's array; key NULL for hot_rules. */
static json_t *find(json_t *a, const char *rule, const char *key)
{
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "rule")), rule) == 0 &&
            (key == NULL ||
             strcmp(json_string_value(json_object_get(e, "key")), key) == 0))
            return e;
    }
    return NULL;
}

static long long num(json_t *e, const char *field)
{
    return (long long)json_integer_value(json_object_get(e, field));
}

static void test_exact_and_merged(void **state)
{
    (void)state;
    fake *f = fake_new(2);
    for (int i = 0; i < 7; i++)
        hit(&f->w[0], "r1", "alice", i == 6);
    for (int i = 0; i < 3; i++)
        hit(&f->w[1], "r1", "alice", 0);
    hit(&f->w[1], "r2", "bob", 1);
    json_t *r = sv_hot_report(&f->s, T0, 10);
    json_t *alice = find(json_object_get(r, "hot_keys"), "r1", "alice");
    assert_non_null(alice);
    assert_int_equal(num(alice, "decisions"), 10);
    assert_int_equal(num(alice, "over_limit"), 1);
    assert_int_equal(num(alice, "error"), 0);
    json_t *rules = json_object_get(r, "hot_rules");
    assert_int_equal(json_array_size(rules), 2);
    assert_int_equal(num(find(rules, "r1", NULL), "decisions"), 10);
    assert_int_equal(num(find(rules, "r2", NULL), "over_limit"), 1);
    /* Sorted, most counted first. */
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(r, "hot_keys"), 0), "key")),
        "alice");
    json_decref(r);
    fake_free(f);
}

/* 3 heavy keys (1000 each) among 20,000 one-off keys, interleaved. */
static void test_heavy_hitters_past_k(void **state)
{
    (void)state;
    fake *f = fake_new(1);
    const char *heavy[] = {"h0", "h1", "h2"};
    char key[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof(key), "once-%d", i);
        hit(&f->w[0], "r", key, 0);
        if (i % 20 == 0)
            for (int h = 0; h < 3; h++) {
                hit(&f->w[0], "r", heavy[h], 0);
            }
    }
    json_t *r = sv_hot_report(&f->s, T0, 3);
    json_t *keys = json_object_get(r, "hot_keys");
    assert_int_equal(json_array_size(keys), 3);
    for (int h = 0; h < 3; h++) {
        json_t *e = find(keys, "r", heavy[h]);
        if (e == NULL)
            fail_msg("heavy key %s not among the top 3", heavy[h]);
        long long c = num(e, "decisions"), err = num(e, "error");
        /* true count 1000 (> N/K = 21000/64): c - err <= 1000 <= c */
        if (!(c >= 1000 && c - err <= 1000))
            fail_msg("%s: count %lld, error %lld, true 1000", heavy[h], c, err);
    }
    json_decref(r);
    fake_free(f);
}

static void test_generations_and_history(void **state)
{
    (void)state;
    fake *f = fake_new(1);
    hit(&f->w[0], "r", "old", 0); /* at T0 */
    f->w[0].now = T0 + 31 * SEC;
    hit(&f->w[0], "r", "new", 1);
    f->w[0].now = T0 + 32 * SEC;
    hit(&f->w[0], "r", "new", 0);
    json_t *r = sv_hot_report(&f->s, T0 + 59 * SEC, 10);
    /* Both generations: the last 30 to 60 s. */
    assert_non_null(find(json_object_get(r, "hot_keys"), "r", "old"));
    json_t *pts = json_object_get(json_object_get(r, "history"), "points");
    assert_int_equal(json_array_size(pts), 120);
    json_t *last = json_array_get(pts, 119); /* [55 s, 60 s) */
    assert_int_equal(num(last, "t_ms"), (T0 + 55 * SEC) / SL_NS_PER_MS);
    json_t *b30 = json_array_get(pts, 119 - 5); /* [30 s, 35 s) */
    assert_int_equal(num(b30, "within"), 1);
    assert_int_equal(num(b30, "over"), 1);
    assert_int_equal(num(json_array_get(pts, 119 - 11), "within"), 1);
    json_decref(r);
    /* A generation later "old" is gone, "new" stays; two, both. */
    r = sv_hot_report(&f->s, T0 + 61 * SEC, 10);
    assert_null(find(json_object_get(r, "hot_keys"), "r", "old"));
    assert_non_null(find(json_object_get(r, "hot_keys"), "r", "new"));
    json_decref(r);
    r = sv_hot_report(&f->s, T0 + 121 * SEC, 10);
    assert_int_equal(json_array_size(json_object_get(r, "hot_keys")), 0);
    json_decref(r);
    fake_free(f);
}

/* The series of rule in a report's history.rules, or NULL. */
static json_t *series_of(json_t *r, const char *rule)
{
    return find(json_object_get(json_object_get(r, "history"), "rules"), rule,
                NULL);
}

static long long at(json_t *series, const char *field, size_t point)
{
    return (long long)json_integer_value(
        json_array_get(json_object_get(series, field), point));
}

/* Per rule: 7 rules decided in one bucket over two threads, rule k k+1
 * times (the last over the limit); the 5 most decided get series of
 * their own, summed over the threads, the others are "other"; a bucket
 * holds the first 5 rules a thread decided in it, so a 6th that thread
 * decided is counted in "other" there even when it is among the 5. */
static void test_history_per_rule(void **state)
{
    (void)state;
    fake *f = fake_new(2);
    char rule[16];
    for (int k = 0; k < 7; k++) {
        snprintf(rule, sizeof(rule), "rule-%d", k);
        for (int i = 0; i <= k; i++)
            hit(&f->w[i % 2], rule, "key", i == k);
    }
    /* An 8th rule, the most decided, on thread 1 at the next bucket. */
    f->w[1].now = T0 + 5 * SEC;
    for (int i = 0; i < 20; i++)
        hit(&f->w[1], "busy\xff", "key", 0);
    json_t *r = sv_hot_report(&f->s, T0 + 5 * SEC, 10);
    json_t *rules = json_object_get(json_object_get(r, "history"), "rules");
    assert_int_equal(json_array_size(rules), 5);
    /* Names kept readable (bytes not ASCII escaped), most decided first. */
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(rules, 0), "rule")),
                        "busy\\xff");
    assert_int_equal(at(json_array_get(rules, 0), "decisions", 119), 20);
    assert_int_equal(at(json_array_get(rules, 0), "decisions", 118), 0);
    /* Thread 0 decided rules 0..6 in that order: 0..4 in its bucket,
     * 5 and 6 in its totals only; thread 1 decided 1..6: all but 6. */
    json_t *r4 = series_of(r, "rule-4");
    assert_non_null(r4);
    assert_int_equal(at(r4, "decisions", 118), 5);
    assert_int_equal(at(r4, "over_limit", 118), 1);
    json_t *r5 = series_of(r, "rule-5");
    assert_non_null(r5);
    assert_int_equal(at(r5, "decisions", 118), 3); /* thread 1's */
    assert_int_equal(at(r5, "over_limit", 118), 1);
    assert_null(series_of(r, "rule-0"));
    json_t *other = json_object_get(json_object_get(r, "history"), "other");
    /* At 118: 28 decisions; shown: rules 2..5, 3 + 4 + 5 + 3 of them. */
    json_t *p = json_array_get(
        json_object_get(json_object_get(r, "history"), "points"), 118);
    assert_int_equal(num(p, "within") + num(p, "over"), 28);
    assert_int_equal(at(other, "decisions", 118), 28 - 15);
    assert_int_equal(at(other, "over_limit", 118), 7 - 4); /* 1 each */
    assert_int_equal(at(other, "decisions", 119), 0);
    json_decref(r);
    fake_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_merged),
        cmocka_unit_test(test_heavy_hitters_past_k),
        cmocka_unit_test(test_generations_and_history),
        cmocka_unit_test(test_history_per_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
