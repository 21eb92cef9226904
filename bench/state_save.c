/*
 * state_save.c - the memory store's state file under load: fills a store
 * with N keys of one algorithm, then saves it (sl_memory_store_save)
 * while a thread decides on random keys of it, and loads the file into a
 * new store (sl_memory_store_load).  bench/state_save.sh runs it.
 *
 *   state_save -k KEYS [-a ALGORITHM] [-f FILE] [-n NICE]
 *
 * -n runs the save at that nice value (docs/benchmarks.md: a rejected
 * way to shorten the decisions' stalls).
 *
 * Prints one JSON line: save and load seconds (and the save's CPU time),
 * file bytes and bytes per key, the longest the save held one shard (what
 * a decision can wait on the lock), the longest one decision took
 * (sl_check's own time) during the save and over as long a time without
 * one, the CPU time of that longest one and the most CPU any one took
 * (time spent spinning on a lock; the rest of a long decision was spent
 * off the core), and the deciding thread's longest gap between two
 * decisions in both (which adds what the scheduler takes from it: on two
 * cores the save's thread competes with it for one), with the time the
 * deciding thread spent waiting for a core during the save (its
 * schedstat run-queue wait).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

static sl_store *store;
static const sl_limit *limit;
static size_t nkeys;
static atomic_int phase; /* 0: idle, 1: measuring, 2: stop */
static sl_nanos worst_gap, worst_call;
static sl_nanos worst_call_cpu; /* the CPU time of the longest decision */
static sl_nanos worst_cpu;      /* the most CPU time one decision took */
static long decisions, over_1ms;
static sl_nanos runq_wait; /* the decider's run-queue wait while measuring */

/* ns this thread has waited on a run queue (schedstat's second field). */
static sl_nanos runq_now(void)
{
    unsigned long long run = 0, wait = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &run, &wait) != 2)
            wait = 0;
        fclose(f);
    }
    return (sl_nanos)wait;
}

/* This thread's CPU time: a decision that took long on the wall clock but
 * little CPU was off its core (the run queue), one that took as much CPU
 * spun (a lock). */
static sl_nanos cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (sl_nanos)ts.tv_sec * SL_NS_PER_SEC + ts.tv_nsec;
}

static void key_of(size_t i, char *buf, size_t *len)
{
    *len = (size_t)snprintf(buf, 24, "user:%zu", i);
}

static void *decider(void *arg)
{
    (void)arg;
    uint64_t x = 88172645463325252u;
    char key[24];
    size_t len;
    sl_nanos last = sl_clock_monotonic(), now, wait0 = 0;
    int was = 0;
    while (atomic_load(&phase) < 2) {
        int ph = atomic_load(&phase);
        if (ph != was) {
            if (ph == 1)
                wait0 = runq_now();
            else
                runq_wait = runq_now() - wait0;
            was = ph;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        key_of(x % nkeys, key, &len);
        sl_decision d;
        sl_nanos cpu0 = cpu_now(), before = sl_clock_monotonic();
        sl_check(store, limit, key, len, 1, 1700000000 * SL_NS_PER_SEC, &d);
        now = sl_clock_monotonic();
        sl_nanos cpu = cpu_now() - cpu0;
        if (atomic_load(&phase) == 1) {
            if (now - last > worst_gap)
                worst_gap = now - last;
            if (now - before > worst_call) {
                worst_call = now - before;
                worst_call_cpu = cpu;
            }
            if (cpu > worst_cpu)
                worst_cpu = cpu;
            if (now - before > SL_NS_PER_MS)
                over_1ms++;
            decisions++;
        }
        last = now;
    }
    return NULL;
}

typedef struct worst {
    sl_nanos gap, call, call_cpu, cpu;
    long decisions, over_1ms;
} worst;

/* The deciding thread's worst figures while fn runs (or for `ns` if fn
 * is NULL). */
static worst worst_during(int (*fn)(void *), void *ctx, sl_nanos ns)
{
    worst_gap = worst_call = worst_call_cpu = worst_cpu = 0;
    decisions = over_1ms = 0;
    atomic_store(&phase, 1);
    if (fn != NULL) {
        if (fn(ctx) != 0)
            exit(1);
    } else {
        usleep((useconds_t)(ns / 1000));
    }
    atomic_store(&phase, 0);
    usleep(20000);
    return (worst){worst_gap, worst_call, worst_call_cpu,
                   worst_cpu, decisions,  over_1ms};
}

typedef struct save_ctx {
    const char *path;
    sl_memory_save_info info;
    sl_nanos took, cpu;
} save_ctx;

static int do_save(void *arg)
{
    save_ctx *c = arg;
    char err[256];
    sl_nanos t0 = sl_clock_monotonic(), cpu0 = cpu_now();
    int rc = sl_memory_store_save(store, c->path, 1700000000 * SL_NS_PER_SEC,
                                  NULL, &c->info, err, sizeof(err));
    c->took = sl_clock_monotonic() - t0;
    c->cpu = cpu_now() - cpu0;
    if (rc != 0)
        fprintf(stderr, "save: %s\n", err);
    return rc;
}

int main(int argc, char **argv)
{
    const char *alg_name = "gcra", *path = "state_save.bin";
    int opt;
    int nice_saver = 0;
    while ((opt = getopt(argc, argv, "k:a:f:n:")) != -1) {
        if (opt == 'k')
            nkeys = strtoull(optarg, NULL, 10);
        else if (opt == 'a')
            alg_name = optarg;
        else if (opt == 'f')
            path = optarg;
        else if (opt == 'n')
            nice_saver = atoi(optarg);
    }
    sl_algorithm alg;
    if (nkeys == 0 || sl_algorithm_parse(alg_name, strlen(alg_name), &alg)) {
        fprintf(stderr,
                "usage: state_save -k KEYS [-a ALG] [-f FILE] [-n NICE]\n");
        return 2;
    }
    sl_memory_options mo = {.size = sizeof(mo), .max_bytes = (size_t)8 << 30};
    store = sl_memory_store_new(&mo);
    sl_limit_config cfg = {
        .algorithm = alg, .limit = 100, .period = 3600 * SL_NS_PER_SEC};
    sl_limit *lim;
    if (sl_limit_new(&cfg, &lim, NULL, 0) != 0)
        return 1;
    limit = lim;

    enum { BATCH = 1024 };
    static char buf[BATCH][24];
    sl_key keys[BATCH];
    sl_decision out[BATCH];
    for (size_t i = 0; i < nkeys; i += BATCH) {
        size_t n = nkeys - i < BATCH ? nkeys - i : BATCH;
        for (size_t j = 0; j < n; j++) {
            keys[j].data = buf[j];
            key_of(i + j, buf[j], &keys[j].len);
        }
        sl_check_batch(store, lim, keys, n, 1, 1700000000 * SL_NS_PER_SEC, out);
    }

    pthread_t th;
    pthread_create(&th, NULL, decider, NULL);
    usleep(100000);
    if (nice_saver != 0 &&
        setpriority(PRIO_PROCESS, (id_t)gettid(), nice_saver) != 0)
        perror("setpriority");
    save_ctx sc = {.path = path};
    sl_store_stats st0, st1;
    sl_store_get_stats(store, &st0);
    worst during = worst_during(do_save, &sc, 0);
    sl_store_get_stats(store, &st1);
    sl_nanos runq_during = runq_wait;
    worst baseline = worst_during(NULL, NULL, sc.took);
    atomic_store(&phase, 2);
    pthread_join(th, NULL);

    sl_memory_options lo = {.size = sizeof(lo), .max_bytes = (size_t)8 << 30};
    sl_store *loaded = sl_memory_store_new(&lo);
    sl_memory_load_info li;
    char err[256];
    sl_nanos t0 = sl_clock_monotonic();
    if (sl_memory_store_load(loaded, path, NULL, &li, err, sizeof(err)) != 0) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    sl_nanos load_took = sl_clock_monotonic() - t0;

    printf("{\"algorithm\":\"%s\",\"keys\":%llu,\"save_s\":%.3f,"
           "\"save_cpu_s\":%.3f,\"load_s\":%.3f,\"file_bytes\":%llu,"
           "\"bytes_per_key\":%.1f,\"longest_shard_lock_ms\":%.3f,"
           "\"decisions_during_save\":%ld,\"lock_waits_during_save\":%llu,"
           "\"decider_runqueue_wait_during_save_ms\":%.1f,"
           "\"longest_decision_during_save_ms\":%.3f,"
           "\"its_cpu_ms\":%.3f,\"most_cpu_one_decision_during_save_ms\":%.3f,"
           "\"decisions_over_1ms_during_save\":%ld,"
           "\"longest_decision_without_save_ms\":%.3f,"
           "\"decisions_over_1ms_without_save\":%ld,"
           "\"longest_gap_during_save_ms\":%.3f,"
           "\"longest_gap_without_save_ms\":%.3f}\n",
           alg_name, (unsigned long long)sc.info.keys, (double)sc.took / 1e9,
           (double)sc.cpu / 1e9, (double)load_took / 1e9,
           (unsigned long long)sc.info.bytes,
           (double)sc.info.bytes / (double)sc.info.keys,
           (double)sc.info.longest_lock / 1e6, during.decisions,
           (unsigned long long)(st1.lock_waits - st0.lock_waits),
           (double)runq_during / 1e6, (double)during.call / 1e6,
           (double)during.call_cpu / 1e6, (double)during.cpu / 1e6,
           during.over_1ms, (double)baseline.call / 1e6, baseline.over_1ms,
           (double)during.gap / 1e6, (double)baseline.gap / 1e6);
    sl_store_free(loaded);
    sl_store_free(store);
    sl_limit_free(lim);
    unlink(path);
    return 0;
}
