/*
 * bench_decide.c - the cost of one sl_check() on the embedded memory store:
 * nanoseconds per decision and bytes per key.
 *
 * One process measures one case (algorithm, distinct keys, threads), so
 * that its resident-memory growth belongs to that case alone; bench/run.sh
 * runs the matrix and the bare C table it is compared with
 * (../shared/peers/c/gcra_bench.c, beside the repository: "the peer").  The
 * loop is the peer's: keys are 8-byte binary strings of a random integer in
 * [1, keys] drawn by xorshift64* inside the loop, every key is inserted
 * before timing so the timed phase is steady-state decisions, and the clock
 * is read once per 256 decisions (the peer's CLOCK=0), never per decision:
 * sl_check() takes `now` as an argument, as a server's cached loop time
 * would be.
 *
 * Limits are high per long periods (limit_config() below) so that nearly
 * every decision is allowed and no key's state returns to its initial
 * value between visits: otherwise the store would drop it and the case
 * would measure inserts.  sliding_log keeps one event per distinct `now`
 * in its window, so it gets a 4 s period and is meant for at most about a
 * million keys; stepped_window's 1000 s steps leave it one event per key.
 *
 * Output: one JSON line per case on stdout.  Exit status 2 if a decision
 * failed, if anything was evicted, or if the store holds fewer keys than
 * were inserted (for the algorithms whose state cannot expire during the
 * run).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

enum { CLOCK_BATCH = 256, MAX_THREADS = 64, MAX_REPS = 101 };

typedef struct options {
    sl_algorithm alg;
    uint64_t keys;      /* distinct keys, all inserted before timing */
    uint64_t decisions; /* per repetition, over all threads */
    int threads;
    int reps;         /* timed repetitions; the median is reported */
    int warmup;       /* untimed repetitions before them */
    size_t max_bytes; /* the store's cap */
    int batch;        /* keys per sl_check_batch call; 0: sl_check */
    int scaling;      /* alternate reps of 1 and of all threads */
} options;

typedef struct worker {
    pthread_t tid;
    int index, cpu;
    uint64_t rng;
    uint64_t decisions;
    uint64_t allowed, failed;
    int first_err;
} worker;

static options opt = {
    .alg = SL_GCRA,
    .keys = 1,
    .decisions = 10000000,
    .threads = 1,
    .reps = 5,
    .warmup = 1,
    .max_bytes = (size_t)2 << 30,
};
static sl_store *store;
static sl_limit *limit;
static pthread_barrier_t start_line, finish_line;
static int stop_workers;

/* xorshift64*, as the peer; key in [1, n] by multiply-shift. */
static inline uint64_t xs64(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545F4914F6CDD1D);
}

static inline uint64_t pick(uint64_t *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)xs64(s) * n) >> 64) + 1;
}

static double wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Resident bytes of this process (/proc/self/statm, second field). */
static uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The limit of each algorithm.  Buckets: L = B = 1e8 per 4e18 ns, so the
 * emission interval T is 40 s: a key's state stays ahead of now (is not
 * initial) for 40 s after each admission, longer than filling ten million
 * keys takes or any key waits between visits, and one hot key takes 1e8
 * decisions before its first rejection (B * T is near the 2^62 ns that
 * limit.c allows, so no bucket does both by more).  Windows: one window of
 * 1e18 ns (31 years) with a limit never reached.  sliding_log: a 4 s
 * window, as its state is one event per distinct `now` within it.
 */
static sl_limit_config limit_config(sl_algorithm alg)
{
    sl_limit_config c = {.algorithm = alg, .id = 1};
    switch (alg) {
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
    case SL_LEAKY_BUCKET:
        c.limit = 100000000;
        c.period = INT64_C(4000000000000000000);
        break;
    case SL_FIXED_WINDOW:
        c.limit = SL_MAX_COUNT;
        c.period = INT64_C(1000000000000000000);
        break;
    case SL_SLIDING_WINDOW:
        c.limit = UINT32_MAX; /* its largest L */
        c.period = INT64_C(1000000000000000000);
        break;
    case SL_STEPPED_WINDOW:
        c.limit = SL_MAX_COUNT;
        c.period = INT64_C(1000000000000000000);
        c.step = INT64_C(1000000000000); /* 1000 s: one step per key */
        break;
    case SL_SLIDING_LOG:
    default:
        c.limit = SL_MAX_COUNT;
        c.period = 4 * SL_NS_PER_SEC;
        break;
    }
    return c;
}

/* State that may legitimately go away during the run (expired logs). */
static int may_expire(sl_algorithm alg)
{
    return alg == SL_SLIDING_LOG;
}

/* With -b N: sl_check_batch on N keys at a time (one clock read each). */
static void run_batches(worker *w)
{
    enum { MAX_BATCH = 256 };
    const uint64_t n = w->decisions, nkeys = opt.keys;
    uint64_t rng = w->rng, allowed = 0, keyv[MAX_BATCH];
    sl_key keys[MAX_BATCH];
    sl_decision d[MAX_BATCH];
    size_t b = (size_t)opt.batch > MAX_BATCH ? MAX_BATCH : (size_t)opt.batch;

    for (uint64_t i = 0; i < n; i += b) {
        size_t m = n - i < b ? (size_t)(n - i) : b;
        for (size_t j = 0; j < m; j++) {
            keyv[j] = pick(&rng, nkeys);
            keys[j] = (sl_key){&keyv[j], sizeof(keyv[j])};
        }
        int err =
            sl_check_batch(store, limit, keys, m, 1, sl_clock_monotonic(), d);
        if (err != 0) {
            if (w->failed++ == 0)
                w->first_err = err;
            continue;
        }
        for (size_t j = 0; j < m; j++)
            allowed += (uint64_t)d[j].allowed;
    }
    w->rng = rng;
    w->allowed += allowed;
}

static void run_decisions(worker *w)
{
    const uint64_t n = w->decisions, nkeys = opt.keys;
    uint64_t rng = w->rng, allowed = 0;
    sl_nanos now = 0;
    sl_decision d;

    if (opt.batch > 0) {
        run_batches(w);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = pick(&rng, nkeys);
        if ((i & (CLOCK_BATCH - 1)) == 0)
            now = sl_clock_monotonic();
        int err = sl_check(store, limit, &key, sizeof(key), 1, now, &d);
        if (err != 0) {
            if (w->failed++ == 0)
                w->first_err = err;
            continue;
        }
        allowed += (uint64_t)d.allowed;
    }
    w->rng = rng;
    w->allowed += allowed;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    for (;;) {
        pthread_barrier_wait(&start_line);
        if (__atomic_load_n(&stop_workers, __ATOMIC_ACQUIRE))
            break;
        run_decisions(w);
        pthread_barrier_wait(&finish_line);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_decide [-a ALGORITHM] [-k KEYS] [-d DECISIONS] "
            "[-t THREADS]\n"
            "                    [-r REPS] [-w WARMUP] [-m MAX_BYTES]\n"
            "  -a  token_bucket, gcra, leaky_bucket, fixed_window, "
            "sliding_window,\n"
            "      sliding_log or stepped_window (default gcra)\n"
            "  -k  distinct keys, inserted before timing (default 1)\n"
            "  -d  decisions per repetition over all threads "
            "(default 10000000)\n"
            "  -t  threads sharing the store, each pinned to one CPU of the "
            "affinity\n"
            "      mask in turn (default 1)\n"
            "  -r  timed repetitions, median reported (default 5)\n"
            "  -w  untimed warm-up repetitions (default 1)\n"
            "  -m  the store's memory cap in bytes (default 2 GiB)\n"
            "  -b  decide N keys per sl_check_batch call (default 0: "
            "sl_check)\n"
            "  -s  scaling: with -t N, alternate reps of one thread (on each\n"
            "      CPU in turn) and of N threads (-r pairs), and report the\n"
            "      median of the pairs' speed-ups (one thread's ns over N\n"
            "      threads' ns)\n");
}

static int parse_options(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "a:k:d:t:r:w:m:b:sh")) != -1) {
        switch (c) {
        case 'a':
            if (sl_algorithm_parse(optarg, strlen(optarg), &opt.alg) != 0) {
                fprintf(stderr, "bench_decide: unknown algorithm: '%s'\n",
                        optarg);
                return -1;
            }
            break;
        case 'k':
            opt.keys = strtoull(optarg, NULL, 10);
            break;
        case 'd':
            opt.decisions = strtoull(optarg, NULL, 10);
            break;
        case 't':
            opt.threads = atoi(optarg);
            break;
        case 'r':
            opt.reps = atoi(optarg);
            break;
        case 'w':
            opt.warmup = atoi(optarg);
            break;
        case 'm':
            opt.max_bytes = (size_t)strtoull(optarg, NULL, 10);
            break;
        case 'b':
            opt.batch = atoi(optarg);
            break;
        case 's':
            opt.scaling = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (opt.keys < 1 || opt.threads < 1 || opt.threads > MAX_THREADS ||
        opt.reps < 1 || opt.reps > MAX_REPS || opt.warmup < 0 ||
        opt.decisions < (uint64_t)opt.threads) {
        fprintf(stderr, "bench_decide: option out of range\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* Each rep's decisions, shared out among `active` workers from the
 * first-th on (cyclically). */
static void share_out(worker *workers, int active, int first)
{
    for (int i = 0; i < opt.threads; i++) {
        int k = (i - first + opt.threads) % opt.threads;
        workers[i].decisions =
            k >= active ? 0
                        : opt.decisions / (uint64_t)active +
                              ((uint64_t)k < opt.decisions % (uint64_t)active);
    }
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The i-th CPU of this process's affinity mask, cyclically; -1 if none. */
static int nth_cpu(const cpu_set_t *mask, int i)
{
    int n = CPU_COUNT(mask);
    if (n == 0)
        return -1;
    i %= n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, mask) && i-- == 0)
            return cpu;
    return -1;
}

int main(int argc, char **argv)
{
    static worker workers[MAX_THREADS];
    double ns[MAX_REPS], ns_one[MAX_REPS], speedup[MAX_REPS];
    sl_memory_options mo = SL_MEMORY_OPTIONS_INIT;
    sl_limit_config cfg;
    sl_store_stats filled, end;
    cpu_set_t mask;
    char errbuf[200];
    uint64_t rss_before, rss_filled, rss_end, allowed = 0, failed = 0;
    uint64_t total = 0;
    int first_err = 0, status = 0;
    double t0, fill_s;

    if (parse_options(argc, argv) != 0)
        return 1;
    cfg = limit_config(opt.alg);
    if (sl_limit_new(&cfg, &limit, errbuf, sizeof(errbuf)) != 0) {
        fprintf(stderr, "bench_decide: %s\n", errbuf);
        return 1;
    }

    /* Resident memory before the store exists and after every key is in:
     * the difference is what the keys cost, allocator overhead included. */
    rss_before = rss_bytes();
    mo.max_bytes = opt.max_bytes;
    store = sl_memory_store_new(&mo);
    if (store == NULL) {
        fprintf(stderr, "bench_decide: out of memory\n");
        return 1;
    }
    t0 = wall_ns();
    {
        sl_nanos now = sl_clock_monotonic();
        sl_decision d;
        for (uint64_t k = 1; k <= opt.keys; k++) {
            if ((k & (CLOCK_BATCH - 1)) == 0)
                now = sl_clock_monotonic();
            int err = sl_check(store, limit, &k, sizeof(k), 1, now, &d);
            if (err != 0) {
                fprintf(stderr, "bench_decide: insert of key %" PRIu64 ": %s\n",
                        k, sl_strerror(err));
                return 2;
            }
        }
    }
    fill_s = (wall_ns() - t0) / 1e9;
    rss_filled = rss_bytes();
    sl_store_get_stats(store, &filled);

    if (sched_getaffinity(0, sizeof(mask), &mask) != 0)
        CPU_ZERO(&mask);
    pthread_barrier_init(&start_line, NULL, (unsigned)opt.threads + 1);
    pthread_barrier_init(&finish_line, NULL, (unsigned)opt.threads + 1);
    for (int i = 0; i < opt.threads; i++) {
        worker *w = &workers[i];
        w->index = i;
        w->cpu = nth_cpu(&mask, i);
        /* Thread 0 draws the peer's sequence. */
        w->rng = UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)i * 0x1234567);
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            fprintf(stderr, "bench_decide: cannot start thread %d\n", i);
            return 1;
        }
    }
    /* With -s, each rep of all threads follows one of a single thread,
     * a moment apart: the machine's speed, which drifts by tens of per
     * cent over seconds here, is nearly the same for both of a pair.  The
     * single thread takes each CPU in turn: this machine's CPUs change
     * speed independently (by up to 1.7x, for seconds), and the rep of
     * all threads runs on all of them. */
    share_out(workers, opt.threads, 0);
    for (int rep = 0; rep < opt.warmup + opt.reps; rep++) {
        for (int one = opt.scaling; one >= 0; one--) {
            if (opt.scaling)
                share_out(workers, one ? 1 : opt.threads,
                          one ? rep % opt.threads : 0);
            pthread_barrier_wait(&start_line);
            double a = wall_ns();
            pthread_barrier_wait(&finish_line);
            double b = wall_ns();
            if (rep >= opt.warmup)
                (one ? ns_one : ns)[rep - opt.warmup] =
                    (b - a) / (double)opt.decisions;
            total += opt.decisions;
        }
        if (opt.scaling && rep >= opt.warmup)
            speedup[rep - opt.warmup] =
                ns_one[rep - opt.warmup] / ns[rep - opt.warmup];
    }
    __atomic_store_n(&stop_workers, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(workers[i].tid, NULL);
        allowed += workers[i].allowed;
        failed += workers[i].failed;
        if (first_err == 0)
            first_err = workers[i].first_err;
    }
    rss_end = rss_bytes();
    sl_store_get_stats(store, &end);

    double median = median_of(ns, opt.reps);
    double keys = (double)opt.keys;
    printf(
        "{\"bench\":\"sluice_decide\",\"algorithm\":\"%s\","
        "\"keys\":%" PRIu64
        ",\"batch\":%d,\"threads\":%d,\"decisions_per_rep\":%" PRIu64
        ",\"reps\":%d,\"warmup\":%d,\"clock_batch\":%d,"
        "\"limit\":%" PRId64 ",\"period_ns\":%" PRId64 ",\"burst\":%" PRId64
        ",\"ns_median\":%.2f,\"ns_min\":%.2f,\"ns_max\":%.2f,"
        "\"decisions_per_s\":%.0f,\"allowed_frac\":%.4f,\"failed\":%" PRIu64
        ",\"fill_s\":%.2f,\"store_keys\":%" PRIu64 ",\"store_bytes\":%" PRIu64
        ",\"store_bytes_per_key\":%.1f,\"rss_bytes_per_key\":%.1f,"
        "\"store_keys_end\":%" PRIu64 ",\"store_bytes_per_key_end\":%.1f,"
        "\"rss_bytes_per_key_end\":%.1f,\"max_bytes\":%" PRIu64
        ",\"evicted\":%" PRIu64 ",\"reclaimed\":%" PRIu64
        ",\"lock_waits\":%" PRIu64,
        sl_algorithm_name(opt.alg), opt.keys, opt.batch, opt.threads,
        opt.decisions, opt.reps, opt.warmup, CLOCK_BATCH,
        sl_limit_get_config(limit)->limit, sl_limit_get_config(limit)->period,
        sl_limit_get_config(limit)->burst, median, ns[0], ns[opt.reps - 1],
        1e9 / median, total ? (double)allowed / (double)total : 0.0, failed,
        fill_s, filled.keys, filled.bytes, (double)filled.bytes / keys,
        (double)(rss_filled - rss_before) / keys, end.keys,
        (double)end.bytes / keys, (double)(rss_end - rss_before) / keys,
        end.max_bytes, end.evicted, end.reclaimed, end.lock_waits);
    if (opt.scaling) {
        double one = median_of(ns_one, opt.reps);
        printf(",\"ns_one_thread_median\":%.2f,\"speedup_median\":%.3f", one,
               median_of(speedup, opt.reps));
    }
    printf("}\n");

    if (failed != 0) {
        fprintf(stderr,
                "bench_decide: %" PRIu64 " decisions failed, first: %s\n",
                failed, sl_strerror(first_err));
        status = 2;
    }
    if (total != 0 && allowed < total - total / 100)
        fprintf(stderr, "bench_decide: warning: only %.2f%% allowed\n",
                100.0 * (double)allowed / (double)total);
    if (end.evicted != 0) {
        fprintf(stderr, "bench_decide: %" PRIu64 " keys evicted: raise -m\n",
                end.evicted);
        status = 2;
    }
    if (!may_expire(opt.alg) &&
        (filled.keys != opt.keys || end.keys != opt.keys)) {
        fprintf(stderr,
                "bench_decide: store holds %" PRIu64 " then %" PRIu64
                " keys, not %" PRIu64 "\n",
                filled.keys, end.keys, opt.keys);
        status = 2;
    }
    sl_store_free(store);
    sl_limit_free(limit);
    return status;
}
