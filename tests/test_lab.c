/*
 * test_lab.c - the load lab's pure parts (src/lab/): the histogram the
 * latencies are kept in, the target B's queue model and the load's
 * arrival schedule, each deterministic for a seed.
 */
#include <math.h>
#include <string.h>

#include "lab/hist.h"
#include "lab/queue.h"
#include "lab/arrivals.h"
#include "testutil.h"

/* ---- histogram ---- */

static void hist_buckets_cover_every_value(void **state)
{
    (void)state;
    /* Each bucket's lower bound maps to that bucket, and bounds grow. */
    for (size_t i = 1; i < LB_HIST_BUCKETS; i++) {
        assert_int_equal(lb_hist_bucket(lb_hist_lower(i)), i);
        assert_true(lb_hist_lower(i) > lb_hist_lower(i - 1));
    }
    /* A quantile is within 1.6% of the value at every scale. */
    for (uint64_t v = 1; v < 100000000; v = v * 3 + 1) {
        lb_hist h;
        memset(&h, 0, sizeof(h));
        lb_hist_add(&h, v);
        double q = lb_hist_quantile(&h, 0.99);
        if (fabs(q - (double)v) > 0.016 * (double)v + 0.5)
            fail_msg("value %llu came back as %.1f", (unsigned long long)v, q);
    }
}

static void hist_quantiles_merge_and_text(void **state)
{
    (void)state;
    static lb_hist a, b, c;
    for (uint64_t v = 1; v <= 1000; v++)
        lb_hist_add(v <= 500 ? &a : &b, v * 1000);
    lb_hist_merge(&a, &b);
    assert_int_equal(a.n, 1000);
    double p50 = lb_hist_quantile(&a, 0.5), p99 = lb_hist_quantile(&a, 0.99);
    assert_true(fabs(p50 - 500000) < 0.016 * 500000);
    assert_true(fabs(p99 - 990000) < 0.016 * 990000);
    assert_true(fabs(lb_hist_mean(&a) - 500500) < 1e-6);
    /* The CSV's text form reads back to the same histogram. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    lb_hist_write(&a, f);
    fclose(f);
    assert_int_equal(lb_hist_read(&c, text, len), 0);
    assert_memory_equal(&a, &c, sizeof(a));
    free(text);
    assert_int_equal(lb_hist_read(&c, "3:x", 3), -1);
    assert_int_equal(lb_hist_read(&c, "99999:1", 7), -1);
}

/* ---- the target's queue ---- */

static void queue_serves_queues_then_sheds(void **state)
{
    (void)state;
    lb_queue *q = lb_queue_new(2, 2, 40000000, 7);
    int64_t s;
    uint64_t id;
    assert_int_equal(lb_queue_arrive(q, 1, &s), LB_Q_SERVE);
    assert_true(s > 0);
    assert_int_equal(lb_queue_arrive(q, 2, &s), LB_Q_SERVE);
    assert_int_equal(lb_queue_arrive(q, 3, &s), LB_Q_WAIT);
    assert_int_equal(lb_queue_arrive(q, 4, &s), LB_Q_WAIT);
    assert_int_equal(lb_queue_arrive(q, 5, &s), LB_Q_SHED);
    lb_queue_stats st;
    lb_queue_stats_get(q, &st);
    assert_int_equal(st.busy, 2);
    assert_int_equal(st.waiting, 2);
    assert_int_equal(st.max_waiting, 2);
    assert_int_equal(st.shed, 1);
    /* FIFO: 3 starts first, then 4; then servers go idle. */
    assert_int_equal(lb_queue_depart(q, &id, &s), 1);
    assert_int_equal(id, 3);
    assert_int_equal(lb_queue_depart(q, &id, &s), 1);
    assert_int_equal(id, 4);
    assert_int_equal(lb_queue_depart(q, &id, &s), 0);
    assert_int_equal(lb_queue_depart(q, &id, &s), 0);
    lb_queue_stats_get(q, &st);
    assert_int_equal(st.busy, 0);
    assert_int_equal(st.served, 4);
    lb_queue_reset_max(q);
    lb_queue_stats_get(q, &st);
    assert_int_equal(st.max_waiting, 0);
    lb_queue_free(q);
}

static void queue_cancel_keeps_order(void **state)
{
    (void)state;
    lb_queue *q = lb_queue_new(1, 4, 1000, 1);
    int64_t s;
    uint64_t id;
    lb_queue_arrive(q, 1, &s);
    for (uint64_t i = 2; i <= 5; i++)
        assert_int_equal(lb_queue_arrive(q, i, &s), LB_Q_WAIT);
    assert_int_equal(lb_queue_cancel(q, 3), 1);
    assert_int_equal(lb_queue_cancel(q, 3), 0);
    uint64_t want[] = {2, 4, 5};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(lb_queue_depart(q, &id, &s), 1);
        assert_int_equal(id, want[i]);
    }
    lb_queue_free(q);
}

/* The service times: the same for a seed, another for another seed,
 * exponential with the mean asked (and the mean changed mid-way). */
static void queue_service_times_seeded(void **state)
{
    (void)state;
    lb_queue *a = lb_queue_new(1, 0, 40000000, 42);
    lb_queue *b = lb_queue_new(1, 0, 40000000, 42);
    lb_queue *c = lb_queue_new(1, 0, 40000000, 43);
    uint64_t id;
    int64_t sa, sb, sc;
    double sum = 0, sumsq = 0;
    int same_c = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        assert_int_equal(lb_queue_arrive(a, 1, &sa), LB_Q_SERVE);
        assert_int_equal(lb_queue_arrive(b, 1, &sb), LB_Q_SERVE);
        assert_int_equal(lb_queue_arrive(c, 1, &sc), LB_Q_SERVE);
        assert_int_equal(sa, sb);
        same_c += sa == sc;
        sum += (double)sa;
        sumsq += (double)sa * (double)sa;
        lb_queue_depart(a, &id, &sa);
        lb_queue_depart(b, &id, &sb);
        lb_queue_depart(c, &id, &sc);
    }
    assert_true(same_c < 10);
    double mean = sum / n, sd = sqrt(sumsq / n - mean * mean);
    /* Exponential: the sd equals the mean. */
    if (fabs(mean - 40e6) > 0.01 * 40e6 || fabs(sd - mean) > 0.02 * mean)
        fail_msg("mean %.0f ns, sd %.0f ns", mean, sd);
    lb_queue_set_mean(a, 120000000);
    sum = 0;
    for (int i = 0; i < n; i++) {
        lb_queue_arrive(a, 1, &sa);
        sum += (double)sa;
        lb_queue_depart(a, &id, &sa);
    }
    assert_true(fabs(sum / n - 120e6) < 0.01 * 120e6);
    lb_queue_free(a);
    lb_queue_free(b);
    lb_queue_free(c);
}

/* ---- the load's schedule ---- */

static lb_group group(const char *text)
{
    lb_group g;
    char err[200];
    if (lb_group_parse(text, &g, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return g;
}

static void schedule_groups_parse(void **state)
{
    (void)state;
    lb_group g = group("crowd,35,poisson,4,30-40,90.5-100");
    assert_string_equal(g.class_name, "crowd");
    assert_int_equal(g.clients, 35);
    assert_int_equal(g.arrivals, LB_POISSON);
    assert_int_equal(g.n_windows, 2);
    assert_int_equal(g.window_from_ns[1], 90500000000LL);
    const char *bad[] = {"x,1,poisson",        "x,0,poisson,1",
                         "x,1,burst,1",        "x,1,constant,0",
                         "x,1,constant,1,5-2", "x,1,constant,1,5-8,6-9",
                         "x,1,constant,1,5"};
    char err[200];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (lb_group_parse(bad[i], &g, err, sizeof(err)) != -1)
            fail_msg("'%s' was accepted", bad[i]);
}

static void schedule_is_seeded_and_ordered(void **state)
{
    (void)state;
    lb_group gs[] = {group("legit,20,poisson,3"),
                     group("abuser,2,constant,150")};
    const int64_t end = 60 * 1000000000LL;
    lb_schedule *a = lb_schedule_new(gs, 2, 1, end);
    lb_schedule *b = lb_schedule_new(gs, 2, 1, end);
    lb_schedule *c = lb_schedule_new(gs, 2, 2, end);
    int64_t ta, tb, tc, last = 0;
    uint32_t ga, ca, gb, cb, gc, cc;
    uint64_t per_group[2] = {0, 0}, differ = 0;
    while (lb_schedule_next(a, &ta, &ga, &ca)) {
        assert_int_equal(lb_schedule_next(b, &tb, &gb, &cb), 1);
        assert_int_equal(ta, tb);
        assert_int_equal(ga, gb);
        assert_int_equal(ca, cb);
        if (lb_schedule_next(c, &tc, &gc, &cc) && tc != ta)
            differ++;
        assert_true(ta >= last && ta < end);
        last = ta;
        per_group[ga]++;
    }
    assert_int_equal(lb_schedule_next(b, &tb, &gb, &cb), 0);
    assert_true(differ > 1000);
    /* Constant clients: exactly rate x duration each. */
    assert_int_equal(per_group[1], 2 * 150 * 60);
    /* Poisson: 20 x 3/s x 60 s = 3600 expected, sd 60. */
    if (per_group[0] < 3600 - 240 || per_group[0] > 3600 + 240)
        fail_msg("%llu poisson arrivals", (unsigned long long)per_group[0]);
    lb_schedule_free(a);
    lb_schedule_free(b);
    lb_schedule_free(c);
}

static void schedule_windows(void **state)
{
    (void)state;
    lb_group gs[] = {group("crowd,10,constant,4,2-3,5-7"),
                     group("burst,5,poisson,20,1-2")};
    lb_schedule *s = lb_schedule_new(gs, 2, 9, 6500000000LL);
    int64_t t;
    uint32_t g, c;
    uint64_t n[2] = {0, 0};
    while (lb_schedule_next(s, &t, &g, &c)) {
        double sec = (double)t / 1e9;
        if (g == 0 && !((sec >= 2 && sec < 3) || (sec >= 5 && sec < 6.5)))
            fail_msg("crowd arrival at %.3f s", sec);
        if (g == 1 && !(sec >= 1 && sec < 2))
            fail_msg("burst arrival at %.3f s", sec);
        n[g]++;
    }
    /* 10 clients x 4/s over 1 s + 1.5 s (the run ends at 6.5 s). */
    assert_int_equal(n[0], 10 * 4 + 10 * 6);
    assert_true(n[1] > 50 && n[1] < 150);
    lb_schedule_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hist_buckets_cover_every_value),
        cmocka_unit_test(hist_quantiles_merge_and_text),
        cmocka_unit_test(queue_serves_queues_then_sheds),
        cmocka_unit_test(queue_cancel_keeps_order),
        cmocka_unit_test(queue_service_times_seeded),
        cmocka_unit_test(schedule_groups_parse),
        cmocka_unit_test(schedule_is_seeded_and_ordered),
        cmocka_unit_test(schedule_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
