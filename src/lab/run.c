/*
 * run.c - `sluice lab run` (run.h): for each scenario, algorithm and
 * variant, a private redis-server, the delay relay in front of it, B,
 * two proxies sharing the Redis through the relay, and A; a sampler
 * that reads B's and the proxies' counters once a second and injects
 * the scenario's faults on time; then the measures, the acceptance
 * checks, results.json, samples.csv and the report.
 *
 * Every process is started here, on ports picked here, and stopped by
 * its pid; a cell starts from nothing (an empty Redis, fresh
 * counters), so cells do not leak into each other.
 */
#define _GNU_SOURCE
#include "lab/run.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "adaptive/prom_text.h"
#include "http/http_client.h"
#include "lab/cell.h"
#include "lab/proc.h"
#include "lab/relay.h"
#include "lab/report.h"
#include "lab/scenario.h"
#include "sluice.h"

#define MAX_LIST 16
#define PROXIES 2

static const char run_usage[] =
    "usage: sluice lab run [--scenario s1,s2,s3,s4] [--algorithms A,...]\n"
    "         [--variants static,adaptive,advisor] [--profile "
    "smoke|quick|full]\n"
    "         [--policy local|fail_open|fail_closed] [--seed N]\n"
    "         [--redis-server PATH] [--redis-timeout 20ms] --out DIR\n"
    "Profiles: full (the scenarios' own lengths, ~14 min a cell set),\n"
    "quick (half; adaptive and advisor: token_bucket, the scenarios where\n"
    "they differ), smoke (a tenth; s1 and s4, token_bucket).  docs/lab.md.\n";

static const char *const known_algorithms[] = {
    "token_bucket",   "gcra",           "leaky_bucket", "fixed_window",
    "sliding_window", "stepped_window", "sliding_log",  NULL};

typedef struct run_opts {
    const lb_scenario *scenarios[MAX_LIST];
    size_t n_scenarios;
    char algorithms[MAX_LIST][32];
    size_t n_algorithms;
    const lb_variant *variants[MAX_LIST];
    size_t n_variants;
    const char *profile, *policy, *out, *redis_server, *redis_timeout;
    double scale;
    int scenarios_named, algorithms_named;
    unsigned long long seed;
    char self[PATH_MAX];
} run_opts;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- one cell ---- */

typedef struct cell_env {
    const run_opts *o;
    lb_cell *c;
    char dir[PATH_MAX];
    int redis_port, relay_port, b_port, proxy_port[PROXIES];
    int metrics_port[PROXIES], advisor_port; /* the advisor variant's */
    pid_t redis, b, proxy[PROXIES], load, advisor;
    lb_relay *relay;
    /* The counters last read, for per-second deltas. */
    double prev_cmds[PROXIES], prev_fallback[PROXIES];
    double limit; /* the last read */
    unsigned long long prev_shed, prev_served;
    int redis_state;
    unsigned delay_ms;
    double b_factor;
} cell_env;

static pid_t start_redis(cell_env *e)
{
    char port[16], log[PATH_MAX + 64];
    snprintf(port, sizeof(port), "%d", e->redis_port);
    snprintf(log, sizeof(log), "%s/redis.log", e->dir);
    char *argv[] = {(char *)e->o->redis_server,
                    "--port",
                    port,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    NULL};
    pid_t pid = lb_spawn(argv, log);
    if (pid > 0 && !lb_wait_redis(e->redis_port, 5000)) {
        fprintf(stderr, "sluice lab: redis-server did not start (%s)\n", log);
        lb_stop(pid, 1000);
        return -1;
    }
    return pid;
}

static int write_file_rules(cell_env *e)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/rules.yaml", e->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = e->c->variant->write_rules(f, e->c->algorithm, e->c->scale);
    if (fclose(f) != 0)
        rc = -1;
    snprintf(path, sizeof(path), "%s/proxy.yaml", e->dir);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# sluice lab: A's requests to B through the limits\n"
               "# the lab reads the proxy's counters here (not forwarded)\n"
               "metrics_path: /sluice/metrics\n"
               "routes:\n"
               "  - prefix: /api/\n"
               "    domain: lab\n"
               "    descriptors:\n"
               "      - - request_header: {name: X-Api-Key, key: api_key}\n"
               "      - - generic_key: {value: global}\n");
    return fclose(f) == 0 ? rc : -1;
}

static pid_t start_proxy(cell_env *e, int i)
{
    char cfg[PATH_MAX + 64], rules[PATH_MAX + 64], log[PATH_MAX + 64], up[64],
        listen[64], store[64], metrics[64], advisor[64], trace[PATH_MAX + 64];
    snprintf(cfg, sizeof(cfg), "%s/proxy.yaml", e->dir);
    snprintf(rules, sizeof(rules), "%s/rules.yaml", e->dir);
    snprintf(log, sizeof(log), "%s/proxy%d.log", e->dir, i + 1);
    snprintf(up, sizeof(up), "http://127.0.0.1:%d", e->b_port);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", e->proxy_port[i]);
    snprintf(store, sizeof(store), "redis://127.0.0.1:%d", e->relay_port);
    char *argv[40] = {(char *)e->o->self, "proxy",
                      "--config",         cfg,
                      "--rules",          rules,
                      "--upstream",       up,
                      "--listen",         listen,
                      "--threads",        "1",
                      "--store",          store,
                      "--redis-timeout",  (char *)e->o->redis_timeout,
                      "--redis-failure",  (char *)e->o->policy,
                      "--nodes",          "2"};
    size_t n = 20;
    for (const char *const *f = e->c->variant->proxy_flags; *f && n < 32; f++)
        argv[n++] = (char *)*f;
    if (e->c->variant->controller) {
        snprintf(trace, sizeof(trace), "%s/adaptive%d.trace", e->dir, i + 1);
        argv[n++] = "--adaptive-trace";
        argv[n++] = trace;
    }
    if (e->c->variant->advisor) {
        /* The advisor scrapes the metrics listener (/metrics, /v1/rules);
         * the proxies poll it each second. */
        snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", e->metrics_port[i]);
        snprintf(advisor, sizeof(advisor), "http://127.0.0.1:%d",
                 e->advisor_port);
        char *more[] = {"--metrics-listen",   metrics, "--advisor", advisor,
                        "--advisor-interval", "1s"};
        for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++)
            argv[n++] = more[k];
    }
    argv[n] = NULL;
    pid_t pid = lb_spawn(argv, log);
    if (pid > 0 && !lb_wait_http(e->proxy_port[i], "/sluice/metrics", 5000)) {
        fprintf(stderr, "sluice lab: proxy %d did not start (%s)\n", i + 1,
                log);
        lb_stop(pid, 1000);
        return -1;
    }
    return pid;
}

/* sluice advisor over the proxies' metrics: 1 s steps, the season of
 * s2's bursts, recommending 3 s ahead. */
static pid_t start_advisor(cell_env *e)
{
    char scrape[128], listen[64], season[32], log[PATH_MAX + 64];
    snprintf(scrape, sizeof(scrape), "http://127.0.0.1:%d,http://127.0.0.1:%d",
             e->metrics_port[0], e->metrics_port[1]);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", e->advisor_port);
    long s = lround(LB_BURST_PERIOD_S * e->c->scale);
    snprintf(season, sizeof(season), "%lds", s > 1 ? s : 2);
    snprintf(log, sizeof(log), "%s/advisor.log", e->dir);
    char *argv[] = {(char *)e->o->self,
                    "advisor",
                    "--scrape",
                    scrape,
                    "--listen",
                    listen,
                    "--step",
                    "1s",
                    "--season",
                    season,
                    "--horizon",
                    "3s",
                    NULL};
    pid_t pid = lb_spawn(argv, log);
    if (pid > 0 &&
        !lb_wait_http(e->advisor_port, "/v1/recommendations", 5000)) {
        fprintf(stderr, "sluice lab: the advisor did not start (%s)\n", log);
        lb_stop(pid, 1000);
        return -1;
    }
    return pid;
}

static pid_t start_b(cell_env *e)
{
    char listen[64], seed[32], servers[16], cap[16], service[16],
        log[PATH_MAX + 64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", e->b_port);
    snprintf(seed, sizeof(seed), "%llu", e->o->seed);
    snprintf(servers, sizeof(servers), "%d", LB_B_SERVERS);
    snprintf(cap, sizeof(cap), "%d", LB_B_CAP);
    snprintf(service, sizeof(service), "%dms", LB_B_SERVICE_MS);
    snprintf(log, sizeof(log), "%s/target.log", e->dir);
    char *argv[] = {(char *)e->o->self,
                    "lab",
                    "target",
                    "--listen",
                    listen,
                    "--seed",
                    seed,
                    "--servers",
                    servers,
                    "--cap",
                    cap,
                    "--service",
                    service,
                    NULL};
    pid_t pid = lb_spawn(argv, log);
    if (pid > 0 && !lb_wait_http(e->b_port, "/lab/stats", 5000)) {
        fprintf(stderr, "sluice lab: the target did not start (%s)\n", log);
        lb_stop(pid, 1000);
        return -1;
    }
    return pid;
}

/* "30-40,150-160" in full seconds, scaled, appended to group. */
static void scaled_group(char *out, size_t len, const char *group,
                         const char *windows, double scale)
{
    size_t n = (size_t)snprintf(out, len, "%s", group);
    if (!windows)
        return;
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", windows);
    for (char *w = strtok_r(buf, ",", &save); w && n < len;
         w = strtok_r(NULL, ",", &save)) {
        double from = 0, to = 0;
        sscanf(w, "%lf-%lf", &from, &to);
        n += (size_t)snprintf(out + n, len - n, ",%g-%g", from * scale,
                              to * scale);
    }
}

static pid_t start_load(cell_env *e, unsigned long long t0)
{
    const lb_scenario *sc = e->c->sc;
    char targets[128], dur[32], seed[32], t0s[32], out[PATH_MAX + 64],
        log[PATH_MAX + 64];
    char groups[LB_SCENARIO_GROUPS][512];
    snprintf(targets, sizeof(targets), "127.0.0.1:%d,127.0.0.1:%d",
             e->proxy_port[0], e->proxy_port[1]);
    snprintf(dur, sizeof(dur), "%dms", e->c->seconds * 1000);
    snprintf(seed, sizeof(seed), "%llu", e->o->seed);
    snprintf(t0s, sizeof(t0s), "%llu", t0);
    snprintf(out, sizeof(out), "%s/load.csv", e->dir);
    snprintf(log, sizeof(log), "%s/load.log", e->dir);
    char *argv[40] = {(char *)e->o->self,
                      "lab",
                      "load",
                      "--target",
                      targets,
                      "--duration",
                      dur,
                      "--seed",
                      seed,
                      "--t0",
                      t0s,
                      "--out",
                      out};
    size_t n = 13;
    for (size_t g = 0; g < LB_SCENARIO_GROUPS && sc->groups[g]; g++) {
        scaled_group(groups[g], sizeof(groups[g]), sc->groups[g],
                     sc->windows[g], e->c->scale);
        argv[n++] = "--group";
        argv[n++] = groups[g];
    }
    argv[n] = NULL;
    return lb_spawn(argv, log);
}

static void apply_fault(cell_env *e, const lb_fault *f)
{
    char target[32];
    switch (f->kind) {
    case LB_FAULT_PAUSE:
        kill(e->redis, SIGSTOP);
        e->redis_state = LB_REDIS_PAUSED;
        break;
    case LB_FAULT_RESUME:
        kill(e->redis, SIGCONT);
        e->redis_state = LB_REDIS_UP;
        break;
    case LB_FAULT_KILL:
        kill(e->redis, SIGKILL);
        lb_wait(e->redis, 2000, &(int){0});
        e->redis = -1;
        e->redis_state = LB_REDIS_STOPPED;
        break;
    case LB_FAULT_RESTART:
        e->redis = start_redis(e);
        e->redis_state = e->redis > 0 ? LB_REDIS_UP : LB_REDIS_STOPPED;
        break;
    case LB_FAULT_DELAY:
        e->delay_ms = (unsigned)f->value;
        lb_relay_set_delay_ms(e->relay, e->delay_ms);
        break;
    case LB_FAULT_B_SLOW: {
        ah_response r;
        ah_response_init(&r, NULL);
        char path[64];
        snprintf(path, sizeof(path), "/lab/service?factor=%g", f->value);
        snprintf(target, sizeof(target), "127.0.0.1:%d", e->b_port);
        if (ah_request(target, "POST", path, NULL, "", 0, 1000, &r, NULL, 0) ==
                0 &&
            r.status == 200)
            e->b_factor = f->value;
        ah_response_release(&r);
        break;
    }
    }
}

/* The value of every series named `name` in text (len bytes), with or
 * without labels, summed; 0 when none.  A malformed line adds nothing:
 * one bad series must not hide the others' counts. */
static double metric_sum(const char *text, size_t len, const char *name)
{
    double sum = 0;
    pt_reader r;
    pt_sample s;
    int rc;
    pt_reader_init(&r, text, len);
    while ((rc = pt_next(&r, name, &s)) != 0)
        if (rc == 1)
            sum += s.value;
    return sum;
}

/* Reads B's and the proxies' counters into second t's sample. */
static void sample(cell_env *e, int t)
{
    lb_sec *s = &e->c->sec[t];
    char target[32];
    ah_response r;
    ah_response_init(&r, NULL);
    snprintf(target, sizeof(target), "127.0.0.1:%d", e->b_port);
    if (ah_request(target, "GET", "/lab/stats", NULL, NULL, 0, 500, &r, NULL,
                   0) == 0 &&
        r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        unsigned long long shed =
            (unsigned long long)json_integer_value(json_object_get(j, "shed"));
        unsigned long long served = (unsigned long long)json_integer_value(
            json_object_get(j, "served"));
        s->queue = (uint32_t)json_integer_value(json_object_get(j, "queue"));
        s->max_queue =
            (uint32_t)json_integer_value(json_object_get(j, "max_queue"));
        s->shed = shed - e->prev_shed;
        s->served = served - e->prev_served;
        e->prev_shed = shed;
        e->prev_served = served;
        json_decref(j);
    }
    /* Per proxy: one that does not answer in time (a loaded machine)
     * adds nothing this second, and what it counted shows in the next
     * (summing the answers alone made a negative second, then a huge
     * one). */
    s->redis_cmds = s->fallback = 0;
    for (int i = 0; i < PROXIES; i++) {
        snprintf(target, sizeof(target), "127.0.0.1:%d", e->proxy_port[i]);
        if (ah_request(target, "GET", "/sluice/metrics", NULL, NULL, 0, 500, &r,
                       NULL, 0) != 0 ||
            r.status != 200)
            continue;
        double cmds = metric_sum(r.body, r.body_len,
                                 "sluice_store_commands_total"),
               fallback = metric_sum(r.body, r.body_len,
                                     "sluice_store_fallback_decisions_total");
        s->redis_cmds += cmds - e->prev_cmds[i];
        s->fallback += fallback - e->prev_fallback[i];
        e->prev_cmds[i] = cmds;
        e->prev_fallback[i] = fallback;
        double limit = e->c->variant->effective_limit(r.body, r.body_len);
        if (limit > 0)
            e->limit = limit;
    }
    ah_response_release(&r);
    s->limit = e->limit; /* unread: the last read */
    s->redis_state = e->redis_state;
    s->delay_ms = e->delay_ms;
    s->b_factor = e->b_factor;
}

static void stop_all(cell_env *e)
{
    if (e->load > 0)
        lb_stop(e->load, 15000);
    lb_stop(e->advisor, 3000);
    for (int i = 0; i < PROXIES; i++)
        lb_stop(e->proxy[i], 5000);
    lb_stop(e->b, 3000);
    lb_stop(e->redis, 3000);
    lb_relay_stop(e->relay);
    e->load = e->b = e->redis = e->proxy[0] = e->proxy[1] = e->advisor = -1;
    e->relay = NULL;
}

static int run_cell(const run_opts *o, lb_cell *c)
{
    cell_env e;
    memset(&e, 0, sizeof(e));
    e.o = o;
    e.c = c;
    e.load = e.b = e.redis = e.proxy[0] = e.proxy[1] = e.advisor = -1;
    e.b_factor = 1;
    e.limit = LB_GLOBAL_LIMIT;
    snprintf(e.dir, sizeof(e.dir), "%s/cells/%s-%s-%s", o->out, c->sc->id,
             c->algorithm, c->variant->name);
    mkdir(e.dir, 0755);
    e.redis_port = lb_free_port();
    e.b_port = lb_free_port();
    for (int i = 0; i < PROXIES; i++) {
        e.proxy_port[i] = lb_free_port();
        e.metrics_port[i] = lb_free_port();
    }
    e.advisor_port = lb_free_port();
    int ok = write_file_rules(&e) == 0 && (e.redis = start_redis(&e)) > 0 &&
             (e.relay = lb_relay_start(&e.relay_port, e.redis_port)) &&
             (e.b = start_b(&e)) > 0 && (e.proxy[0] = start_proxy(&e, 0)) > 0 &&
             (e.proxy[1] = start_proxy(&e, 1)) > 0 &&
             (!c->variant->advisor || (e.advisor = start_advisor(&e)) > 0);
    if (!ok) {
        stop_all(&e);
        return -1;
    }
    sample(&e, 0); /* the counters' starting values */
    memset(&c->sec[0], 0, sizeof(c->sec[0]));
    unsigned long long t0 = lb_now_ns() + 300000000ULL;
    if ((e.load = start_load(&e, t0)) < 0) {
        stop_all(&e);
        return -1;
    }
    size_t next_fault = 0;
    const lb_scenario *sc = c->sc;
    for (int k = 0; k <= c->seconds && !interrupted; k++) {
        lb_sleep_until_ns(t0 + (unsigned long long)k * 1000000000ULL);
        if (k > 0)
            sample(&e, k - 1);
        while (next_fault < sc->n_faults &&
               lround(sc->faults[next_fault].at_s * c->scale) <= k)
            apply_fault(&e, &sc->faults[next_fault++]);
    }
    int status = -1;
    /* A drains its answers (up to its timeout) and writes its CSV. */
    if (interrupted || !lb_wait(e.load, 20000, &status))
        lb_stop(e.load, 5000);
    e.load = -1;
    stop_all(&e);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/load.csv", e.dir);
    if (interrupted || lb_cell_read_load(c, path) != 0) {
        fprintf(stderr, "sluice lab: %s: no results from the load (%s)\n",
                e.dir, interrupted ? "interrupted" : "see load.log");
        return -1;
    }
    return 0;
}

/* ---- options ---- */

static int split(const char *arg, char out[][32], size_t max, size_t *n)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", arg);
    *n = 0;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (*n == max || strlen(t) >= 32)
            return -1;
        strcpy(out[(*n)++], t);
    }
    return *n ? 0 : -1;
}

static int parse_opts(int argc, char **argv, run_opts *o)
{
    static const struct option opts[] = {
        {"scenario", required_argument, NULL, 's'},
        {"algorithms", required_argument, NULL, 'a'},
        {"variants", required_argument, NULL, 'v'},
        {"profile", required_argument, NULL, 'p'},
        {"policy", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 'S'},
        {"out", required_argument, NULL, 'o'},
        {"redis-server", required_argument, NULL, 'r'},
        {"redis-timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *scenarios = NULL, *algorithms = NULL, *variants = "static";
    o->profile = "quick";
    o->policy = "local";
    o->redis_server = "redis-server";
    o->redis_timeout = "20ms";
    o->seed = 1;
    char list[MAX_LIST][32], *end;
    size_t n;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            scenarios = optarg;
            o->scenarios_named = 1;
            break;
        case 'a':
            algorithms = optarg;
            o->algorithms_named = 1;
            break;
        case 'v':
            variants = optarg;
            break;
        case 'p':
            o->profile = optarg;
            break;
        case 'P':
            o->policy = optarg;
            break;
        case 'S':
            o->seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) {
                fprintf(stderr, "sluice lab run: invalid --seed: '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'r':
            o->redis_server = optarg;
            break;
        case 't': {
            sl_nanos ns;
            if (sl_duration_parse(optarg, strlen(optarg), &ns) != 0 ||
                ns <= 0) {
                fprintf(stderr,
                        "sluice lab run: invalid --redis-timeout: '%s'\n",
                        optarg);
                return 2;
            }
            o->redis_timeout = optarg;
            break;
        }
        case 'h':
            fputs(run_usage, stdout);
            return 0;
        default:
            fputs(run_usage, stderr);
            return 2;
        }
    }
    int smoke = strcmp(o->profile, "smoke") == 0;
    if (strcmp(o->profile, "full") == 0)
        o->scale = 1;
    else if (strcmp(o->profile, "quick") == 0)
        o->scale = 0.5;
    else if (smoke)
        o->scale = 0.1;
    else {
        fprintf(stderr,
                "sluice lab run: invalid --profile: '%s' (smoke, "
                "quick, full)\n",
                o->profile);
        return 2;
    }
    if (strcmp(o->policy, "local") && strcmp(o->policy, "fail_open") &&
        strcmp(o->policy, "fail_closed")) {
        fprintf(stderr,
                "sluice lab run: invalid --policy: '%s' (local, "
                "fail_open, fail_closed)\n",
                o->policy);
        return 2;
    }
    if (!o->out || optind != argc) {
        fprintf(stderr, "sluice lab run: %s\n%s",
                o->out ? "unexpected argument" : "--out DIR is required",
                run_usage);
        return 2;
    }
    if (!scenarios)
        scenarios = smoke ? "s1,s4" : "s1,s2,s3,s4";
    if (!algorithms)
        algorithms = smoke ? "token_bucket" : lb_default_algorithms;
    if (split(scenarios, list, MAX_LIST, &n) != 0) {
        fprintf(stderr, "sluice lab run: invalid --scenario: '%s'\n",
                scenarios);
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(o->scenarios[o->n_scenarios++] = lb_scenario_find(list[i]))) {
            fprintf(stderr,
                    "sluice lab run: unknown scenario: '%s' (s1, s2, "
                    "s3, s4)\n",
                    list[i]);
            return 2;
        }
    }
    if (split(algorithms, o->algorithms, MAX_LIST, &o->n_algorithms) != 0) {
        fprintf(stderr, "sluice lab run: invalid --algorithms: '%s'\n",
                algorithms);
        return 2;
    }
    for (size_t i = 0; i < o->n_algorithms; i++) {
        size_t k = 0;
        while (known_algorithms[k] &&
               strcmp(known_algorithms[k], o->algorithms[i]) != 0)
            k++;
        if (!known_algorithms[k]) {
            fprintf(stderr, "sluice lab run: unknown algorithm: '%s'\n",
                    o->algorithms[i]);
            return 2;
        }
    }
    if (split(variants, list, MAX_LIST, &n) != 0) {
        fprintf(stderr, "sluice lab run: invalid --variants: '%s'\n", variants);
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(o->variants[o->n_variants++] = lb_variant_find(list[i]))) {
            fprintf(stderr,
                    "sluice lab run: unknown variant: '%s' (static, "
                    "adaptive, advisor)\n",
                    list[i]);
            return 2;
        }
    }
    ssize_t len = readlink("/proc/self/exe", o->self, sizeof(o->self) - 1);
    if (len <= 0) {
        fprintf(stderr, "sluice lab run: cannot find the sluice binary\n");
        return 1;
    }
    o->self[len] = '\0';
    return -1; /* go on */
}

/* ---- the run ---- */

/* Whether the quick profile runs this cell: a variant other than
 * static runs only token_bucket and the scenarios where it differs,
 * unless the scenarios or algorithms were named. */
static int in_profile(const run_opts *o, const lb_variant *v, const char *sc,
                      const char *algorithm)
{
    if (strcmp(o->profile, "quick") != 0 || !v->quick_scenarios)
        return 1;
    return (o->scenarios_named || strstr(v->quick_scenarios, sc)) &&
           (o->algorithms_named || strcmp(algorithm, "token_bucket") == 0);
}

static void print_checks(json_t *checks, int *failed)
{
    size_t i;
    json_t *ch;
    *failed = 0;
    json_array_foreach(checks, i, ch)
    {
        const char *verdict = json_string_value(json_object_get(ch, "verdict"));
        if (strcmp(verdict, "FAIL") == 0)
            (*failed)++;
        printf("%-4s %-34s %-22s %-28s %s\n", verdict,
               json_string_value(json_object_get(ch, "cell")),
               json_string_value(json_object_get(ch, "phase")),
               json_string_value(json_object_get(ch, "check")),
               json_string_value(json_object_get(ch, "value")));
    }
}

int lb_run_main(int argc, char **argv)
{
    static run_opts o;
    memset(&o, 0, sizeof(o));
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cells", o.out);
    if ((mkdir(o.out, 0755) != 0 && errno != EEXIST) ||
        (mkdir(path, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "sluice lab run: cannot make '%s': %s\n", path,
                strerror(errno));
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    json_t *cells = json_array(), *checks = json_array();
    snprintf(path, sizeof(path), "%s/samples.csv", o.out);
    FILE *samples = fopen(path, "w");
    if (!samples) {
        fprintf(stderr, "sluice lab run: cannot write '%s'\n", path);
        return 1;
    }
    int header = 1, broken = 0;
    for (size_t s = 0; s < o.n_scenarios && !interrupted; s++)
        for (size_t a = 0; a < o.n_algorithms && !interrupted; a++)
            for (size_t v = 0; v < o.n_variants && !interrupted; v++) {
                if (!in_profile(&o, o.variants[v], o.scenarios[s]->id,
                                o.algorithms[a]))
                    continue;
                lb_cell c;
                memset(&c, 0, sizeof(c));
                c.sc = o.scenarios[s];
                c.variant = o.variants[v];
                snprintf(c.algorithm, sizeof(c.algorithm), "%s",
                         o.algorithms[a]);
                c.scale = o.scale;
                c.seconds = (int)lround(c.sc->duration_s * o.scale);
                c.sec = calloc((size_t)c.seconds + 1, sizeof(lb_sec));
                fprintf(stderr, "sluice lab: %s %s %s (%d s)\n", c.sc->id,
                        c.algorithm, c.variant->name, c.seconds);
                if (!c.sec || run_cell(&o, &c) != 0) {
                    broken++;
                    free(c.sec);
                    continue;
                }
                lb_cell_write_samples(&c, samples, header);
                header = 0;
                json_array_append_new(cells,
                                      lb_cell_measure(&c, o.policy, checks));
                free(c.sec);
            }
    fclose(samples);
    lb_cells_compare(cells, checks);
    json_t *root = json_pack(
        "{s:{s:s, s:s, s:I, s:f, s:s, s:i, s:i, s:i, s:i, s:i, s:i}, s:o, s:o}",
        "lab", "profile", o.profile, "policy", o.policy, "seed",
        (json_int_t)o.seed, "scale", o.scale, "redis_timeout", o.redis_timeout,
        "global_limit", LB_GLOBAL_LIMIT, "key_limit", LB_KEY_LIMIT, "burst",
        LB_BURST, "key_burst", LB_KEY_BURST, "b_servers", LB_B_SERVERS, "b_cap",
        LB_B_CAP, "cells", cells, "checks", checks);
    /* Insertion order (jansson keeps it): phases in time order. */
    snprintf(path, sizeof(path), "%s/results.json", o.out);
    if (!root || json_dump_file(root, path, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "sluice lab run: cannot write '%s'\n", path);
        json_decref(root);
        return 1;
    }
    int failed = 0;
    print_checks(checks, &failed);
    json_decref(root);
    if (lb_report_write(o.out) != 0)
        return 1;
    printf("%s: %d check(s) failed, %d cell(s) could not run; report in "
           "%s/report.html\n",
           failed || broken || interrupted ? "FAIL" : "PASS", failed, broken,
           o.out);
    return failed || broken || interrupted ? 1 : 0;
}
