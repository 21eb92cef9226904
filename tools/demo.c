/*
 * demo.c - `sluice demo`: the seed documents' worked examples, decided by
 * the library and narrated, one algorithm after another.  It is the
 * shortest way to see what each algorithm does, and each scene is also a
 * test (tests/test_examples.c), so what it prints is checked.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "sluice.h"

#define SEC SL_NS_PER_SEC

typedef struct scene {
    const char *title;
    sl_limit_config cfg;
    int n;
    struct {
        sl_nanos at;
        const char *label;
    } req[8];
} scene;

static const scene scenes[] = {
    {"token bucket: capacity 4, refilled 2 per second (figure 4-4)",
     {.algorithm = SL_TOKEN_BUCKET, .limit = 2, .period = SEC, .burst = 4},
     7,
     {{0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"},
      {SEC / 2, "0.5 s"}, {SEC / 2, "0.5 s"}}},
    {"gcra: the same limit, one theoretical arrival time per key",
     {.algorithm = SL_GCRA, .limit = 2, .period = SEC, .burst = 4},
     7,
     {{0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"},
      {SEC / 2, "0.5 s"}, {SEC / 2, "0.5 s"}}},
    {"leaky bucket: queue of 3, drained 1 per second; allowed requests wait",
     {.algorithm = SL_LEAKY_BUCKET, .limit = 1, .period = SEC, .burst = 3},
     5,
     {{0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {0, "0.0 s"}, {SEC, "1.0 s"}}},
    {"fixed window: 5 per minute; 2:00:30-2:01:30 lets 10 through",
     {.algorithm = SL_FIXED_WINDOW, .limit = 5, .period = 60 * SEC},
     6,
     {{7230 * SEC, "2:00:30"}, {7250 * SEC, "2:00:50"}, {7259 * SEC, "2:00:59"},
      {7260 * SEC, "2:01:00"}, {7270 * SEC, "2:01:10"}, {7290 * SEC, "2:01:30"}}},
    {"sliding log: 2 per minute, rejected requests logged too",
     {.algorithm = SL_SLIDING_LOG, .limit = 2, .period = 60 * SEC,
      .flags = SL_LOG_REJECTED},
     4,
     {{3601 * SEC, "1:00:01"}, {3630 * SEC, "1:00:30"}, {3650 * SEC, "1:00:50"},
      {3700 * SEC, "1:01:40"}}},
    {"stepped window: 10 per 4 s in 1 s steps; next free time",
     {.algorithm = SL_STEPPED_WINDOW, .limit = 10, .period = 4 * SEC, .step = SEC},
     4,
     {{1 * SEC, "1 s"}, {2 * SEC, "2 s"}, {3 * SEC, "3 s"}, {3 * SEC + SEC / 2, "3.5 s"}}},
};

static void print_decision(const char *label, int64_t cost, const sl_decision *d)
{
    printf("  %-8s cost %lld  %-8s remaining %-3lld", label, (long long)cost,
           d->allowed ? "allowed" : "REJECTED", (long long)d->remaining);
    if (!d->allowed && d->retry_after < 0)
        printf(" never fits");
    else if (!d->allowed)
        printf(" retry after %.3f s", (double)d->retry_after / SEC);
    if (d->delay > 0)
        printf(" delay %.3f s", (double)d->delay / SEC);
    printf("\n");
}

int sl_cmd_demo(int argc, char **argv)
{
    sl_store *store = sl_memory_store_new(NULL);
    int rc = 0;

    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: sluice demo\n");
        sl_store_free(store);
        return 2;
    }
    if (store == NULL)
        return 1;
    printf("sluice %s: every algorithm on the seed documents' examples\n", SL_VERSION);
    for (size_t i = 0; i < sizeof(scenes) / sizeof(scenes[0]) && rc == 0; i++) {
        const scene *s = &scenes[i];
        sl_limit *limit;
        char err[128];
        if (sl_limit_new(&s->cfg, &limit, err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice demo: %s\n", err);
            rc = 1;
            break;
        }
        printf("\n%s\n", s->title);
        for (int r = 0; r < s->n; r++) {
            /* The stepped scene fills steps with 6, 2, 2 requests first. */
            int64_t cost = s->cfg.algorithm == SL_STEPPED_WINDOW && r < 3
                               ? (r == 0 ? 6 : 2)
                               : 1;
            sl_decision d;
            if (sl_check(store, limit, s->title, strlen(s->title), cost,
                         s->req[r].at, &d) != 0) {
                rc = 1;
                break;
            }
            print_decision(s->req[r].label, cost, &d);
        }
        sl_limit_free(limit);
    }
    sl_store_free(store);
    return rc;
}
