/*
 * demo.c - `sluice demo`: the worked examples of the system-design
 * chapter "Design a rate limiter" and of the Databox paper on a
 * client-side rate-limiting service, decided by
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
        int64_t cost;
    } req[8];
} scene;

static const scene scenes[] = {
    {"token bucket: capacity 4, refilled 2 per second (figure 4-4)",
     {.algorithm = SL_TOKEN_BUCKET, .limit = 2, .period = SEC, .burst = 4},
     7,
     {{0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {SEC / 2, "0.5 s", 1},
      {SEC / 2, "0.5 s", 1}}},
    {"gcra: the same limit, one theoretical arrival time per key",
     {.algorithm = SL_GCRA, .limit = 2, .period = SEC, .burst = 4},
     7,
     {{0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {SEC / 2, "0.5 s", 1},
      {SEC / 2, "0.5 s", 1}}},
    {"leaky bucket: queue of 3, drained 1 per second; allowed requests wait",
     {.algorithm = SL_LEAKY_BUCKET, .limit = 1, .period = SEC, .burst = 3},
     5,
     {{0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {0, "0.0 s", 1},
      {SEC, "1.0 s", 1}}},
    {"fixed window: 5 per minute; 2:00:30-2:01:30 lets 10 through",
     {.algorithm = SL_FIXED_WINDOW, .limit = 5, .period = 60 * SEC},
     4,
     {{7230 * SEC, "2:00:30", 3},
      {7259 * SEC, "2:00:59", 2},
      {7260 * SEC, "2:01:00", 5},
      {7289 * SEC, "2:01:29", 1}}},
    {"sliding log: 2 per minute, rejected requests logged too",
     {.algorithm = SL_SLIDING_LOG,
      .limit = 2,
      .period = 60 * SEC,
      .flags = SL_LOG_REJECTED},
     4,
     {{3601 * SEC, "1:00:01", 1},
      {3630 * SEC, "1:00:30", 1},
      {3650 * SEC, "1:00:50", 1},
      {3700 * SEC, "1:01:40", 1}}},
    {"sliding window: 7 per minute; 5 last minute, 3 this one, at 30%",
     {.algorithm = SL_SLIDING_WINDOW, .limit = 7, .period = 60 * SEC},
     4,
     {{10 * SEC, "0:00:10", 5},
      {65 * SEC, "0:01:05", 3},
      {78 * SEC, "0:01:18", 1},
      {78 * SEC, "0:01:18", 1}}},
    {"stepped window: 10 per 4 s in 1 s steps; next free time",
     {.algorithm = SL_STEPPED_WINDOW,
      .limit = 10,
      .period = 4 * SEC,
      .step = SEC},
     4,
     {{1 * SEC, "1 s", 6},
      {2 * SEC, "2 s", 2},
      {3 * SEC, "3 s", 2},
      {3 * SEC + SEC / 2, "3.5 s", 1}}},
};

static void print_decision(const char *label, int64_t cost,
                           const sl_decision *d)
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

void cmd_demo_usage(FILE *to)
{
    fputs("usage: sluice demo\n"
          "\n"
          "Decides, on the embedded store, the worked examples of the\n"
          "system-design chapter \"Design a rate limiter\" (token bucket,\n"
          "leaky bucket, fixed window, sliding log, sliding window; GCRA\n"
          "on the token bucket's numbers) and of the Databox paper on a\n"
          "client-side rate-limiting service (the stepped window), and\n"
          "prints each decision.\n"
          "Exit status: 0 done, 1 failure, 2 usage.\n",
          to);
}

int cmd_demo(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        cmd_demo_usage(stdout);
        return 0;
    }
    if (argc > 1) {
        cmd_demo_usage(stderr);
        return 2;
    }
    sl_store *store = sl_memory_store_new(NULL);
    int rc = 0;
    if (store == NULL)
        return 1;
    printf("sluice %s: every algorithm on the worked examples of the "
           "system-design chapter and the Databox paper\n",
           SL_VERSION);
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
            int64_t cost = s->req[r].cost;
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
