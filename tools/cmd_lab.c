/*
 * lab.c - `sluice lab`: the load lab (docs/lab.md).  `target` is the
 * service B, `load` the load generator A, `run` starts a private Redis,
 * two proxies, B and A for each scenario and algorithm, injects the
 * faults and writes the results and report, `report` writes the report
 * again from a run's results.json and samples.csv.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "lab/load.h"
#include "lab/report.h"
#include "lab/run.h"
#include "lab/target.h"
#include "sluice.h"

static const char lab_usage[] =
    "usage: sluice lab run [--scenario s1,s2,s3,s4] [--algorithms A,...]\n"
    "         [--variants static] [--profile smoke|quick|full]\n"
    "         [--policy local|fail_open|fail_closed] [--seed N] --out DIR\n"
    "       sluice lab report --out DIR\n"
    "       sluice lab target [--listen HOST:PORT] [--servers 8] [--cap 200]\n"
    "         [--service 40ms] [--seed N]\n"
    "       sluice lab load --target HOST:PORT[,...] --group G [--group G...]\n"
    "         --duration D --out FILE [--seed N] [--t0 NS] [--path /api/lab]\n"
    "         [--max-conns 4000] [--timeout 10s]\n"
    "\n"
    "A group is CLASS,CLIENTS,poisson|constant,RATE[,FROM-TO...]: CLIENTS\n"
    "clients of class CLASS, each at RATE requests a second, active in the\n"
    "windows FROM-TO (seconds; without: the whole run).  docs/lab.md.\n"
    "\n"
    "Exit status: 0 success (run: every asserted check passed); 1 failure\n"
    "(run: a check failed or a cell could not run); 2 usage.\n";

void cmd_lab_usage(FILE *to)
{
    fputs(lab_usage, to);
}

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "sluice lab: invalid %s: '%s'\n%s", what, value, lab_usage);
    return 2;
}

static int parse_ns(const char *v, int64_t *out)
{
    sl_nanos ns;
    if (sl_duration_parse(v, strlen(v), &ns) != 0 || ns <= 0)
        return -1;
    *out = ns;
    return 0;
}

static int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end)
        return -1;
    *out = n;
    return 0;
}

/* "HOST:PORT" split: 0, or -1 when it is not one. */
static int split_hostport(const char *v, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(v, ':');
    char *end;
    if (!colon || (size_t)(colon - v) >= hostlen)
        return -1;
    long p = strtol(colon + 1, &end, 10);
    if (*end || colon[1] == '\0' || p < 0 || p > 65535)
        return -1;
    memcpy(host, v, (size_t)(colon - v));
    host[colon - v] = '\0';
    *port = (int)p;
    return 0;
}

static int lab_target(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"servers", required_argument, NULL, 'n'},
        {"cap", required_argument, NULL, 'c'},
        {"service", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    char host[64] = "127.0.0.1";
    lb_target_opts o = {.host = host,
                        .port = 8090,
                        .servers = 8,
                        .cap = 200,
                        .mean_service_ns = 40 * SL_NS_PER_MS,
                        .seed = 1};
    uint64_t u;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (split_hostport(optarg, host, sizeof(host), &o.port) != 0)
                return bad("--listen", optarg);
            break;
        case 'n':
            if (parse_u64(optarg, &u) != 0 || u < 1 || u > 10000)
                return bad("--servers", optarg);
            o.servers = (uint32_t)u;
            break;
        case 'c':
            if (parse_u64(optarg, &u) != 0 || u > 1000000)
                return bad("--cap", optarg);
            o.cap = (uint32_t)u;
            break;
        case 's':
            if (parse_ns(optarg, &o.mean_service_ns) != 0)
                return bad("--service", optarg);
            break;
        case 'S':
            if (parse_u64(optarg, &o.seed) != 0)
                return bad("--seed", optarg);
            break;
        case 'h':
            fputs(lab_usage, stdout);
            return 0;
        default:
            fputs(lab_usage, stderr);
            return 2;
        }
    }
    return lb_target_run(&o) == 0 ? 0 : 1;
}

static int lab_load(int argc, char **argv)
{
    static const struct option opts[] = {
        {"target", required_argument, NULL, 't'},
        {"group", required_argument, NULL, 'g'},
        {"duration", required_argument, NULL, 'd'},
        {"out", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, 'S'},
        {"t0", required_argument, NULL, '0'},
        {"path", required_argument, NULL, 'p'},
        {"max-conns", required_argument, NULL, 'm'},
        {"timeout", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static lb_load_opts o;
    memset(&o, 0, sizeof(o));
    o.seed = 1;
    o.path = "/api/lab";
    o.max_conns = 4000;
    o.timeout_ns = 10 * SL_NS_PER_SEC;
    char err[256];
    uint64_t u;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': {
            char list[512], *save = NULL;
            snprintf(list, sizeof(list), "%s", optarg);
            for (char *t = strtok_r(list, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                char host[40];
                int port;
                if (o.n_targets == LB_MAX_TARGETS ||
                    split_hostport(t, host, sizeof(host), &port) != 0 ||
                    port == 0)
                    return bad("--target", t);
                snprintf(o.targets[o.n_targets++], sizeof(o.targets[0]),
                         "%s:%d", host, port);
            }
            break;
        }
        case 'g':
            if (o.n_groups == LB_MAX_GROUPS)
                return bad("--group (too many)", optarg);
            if (lb_group_parse(optarg, &o.groups[o.n_groups], err,
                               sizeof(err)) != 0) {
                fprintf(stderr, "sluice lab load: %s\n", err);
                return 2;
            }
            o.n_groups++;
            break;
        case 'd':
            if (parse_ns(optarg, &o.duration_ns) != 0)
                return bad("--duration", optarg);
            break;
        case 'o':
            o.out = optarg;
            break;
        case 'S':
            if (parse_u64(optarg, &o.seed) != 0)
                return bad("--seed", optarg);
            break;
        case '0':
            if (parse_u64(optarg, &o.t0_ns) != 0)
                return bad("--t0", optarg);
            break;
        case 'p':
            if (optarg[0] != '/' || strlen(optarg) > 128 ||
                strpbrk(optarg, " \r\n"))
                return bad("--path", optarg);
            o.path = optarg;
            break;
        case 'm':
            if (parse_u64(optarg, &u) != 0 || u < 1 || u > 60000)
                return bad("--max-conns", optarg);
            o.max_conns = (uint32_t)u;
            break;
        case 'T':
            if (parse_ns(optarg, &o.timeout_ns) != 0 ||
                o.timeout_ns > 50 * SL_NS_PER_SEC)
                return bad("--timeout (at most 50s)", optarg);
            break;
        case 'h':
            fputs(lab_usage, stdout);
            return 0;
        default:
            fputs(lab_usage, stderr);
            return 2;
        }
    }
    if (!o.n_targets || !o.n_groups || !o.duration_ns || !o.out) {
        fprintf(stderr,
                "sluice lab load: --target, --group, --duration and "
                "--out are required\n%s",
                lab_usage);
        return 2;
    }
    return lb_load_run(&o) == 0 ? 0 : 1;
}

int cmd_lab(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fputs(lab_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "target") == 0)
        return lab_target(argc - 1, argv + 1);
    if (strcmp(argv[1], "load") == 0)
        return lab_load(argc - 1, argv + 1);
    if (strcmp(argv[1], "run") == 0)
        return lb_run_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "report") == 0)
        return lb_report_main(argc - 1, argv + 1);
    fprintf(stderr, "sluice lab: unknown command: '%s'\n%s", argv[1],
            lab_usage);
    return 2;
}
