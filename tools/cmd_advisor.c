/*
 * cmd_advisor.c - `sluice advisor`: the reference advisor of the
 * sluice-advisor/1 protocol (docs/advisor.md), its options read here and
 * run by src/advisor/ (advisor.h) until SIGINT or SIGTERM.
 */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advisor/advisor.h"
#include "commands.h"
#include "sluice.h"

static const char advisor_usage[] =
    "usage: sluice advisor --scrape URL[,URL...] [--listen HOST:PORT]\n"
    "         [--step 1s] [--season 60s] [--horizon 5s] [--alpha 0.3]\n"
    "         [--beta 0.01] [--gamma 0.3] [--damping 0.1] [--headroom 1.1]\n"
    "         [--tls-cert PATH --tls-key PATH] [--token-file PATH]\n"
    "\n"
    "Scrapes each sluice node's /metrics and /v1/rules every step, forecasts\n"
    "each rule's demand per period (additive seasonal Holt-Winters, ready\n"
    "after two seasons) and serves recommended limits on\n"
    "GET /v1/recommendations (protocol sluice-advisor/1, docs/advisor.md):\n"
    "a rule gets ceil(headroom * U), U = the highest forecast up to the\n"
    "horizon + 2 sigma, when that is above its base limit.\n"
    "  --listen   default 127.0.0.1:9300 (port 0: any free port)\n"
    "  --tls-cert, --tls-key  serve HTTPS with this PEM chain and key\n"
    "  --token-file  answer only requests with Authorization: Bearer and\n"
    "             the file's first line (at least 16 bytes)\n";

void cmd_advisor_usage(FILE *to)
{
    fputs(advisor_usage, to);
}

/* ---- options ---- */

static int parse_ms(const char *flag, const char *v, int64_t *out)
{
    sl_nanos ns;
    if (sl_duration_parse(v, strlen(v), &ns) != 0 || ns < SL_NS_PER_MS) {
        fprintf(stderr, "sluice advisor: %s: invalid duration: '%s'\n", flag,
                v);
        return -1;
    }
    *out = ns / SL_NS_PER_MS;
    return 0;
}

static int parse_real(const char *flag, const char *v, double lo, double hi,
                      double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(d >= lo && d <= hi)) {
        fprintf(stderr, "sluice advisor: %s: want a number in %g..%g: '%s'\n",
                flag, lo, hi, v);
        return -1;
    }
    *out = d;
    return 0;
}

/* 0, 2 for a usage error (printed), or 1 for --help (printed). */
static int parse_options(int argc, char **argv, av_options *o, char *scrape_buf,
                         size_t scrape_len)
{
    static const struct option longs[] = {
        {"scrape", required_argument, NULL, 'S'},
        {"listen", required_argument, NULL, 'l'},
        {"step", required_argument, NULL, 's'},
        {"season", required_argument, NULL, 'm'},
        {"horizon", required_argument, NULL, 'h'},
        {"alpha", required_argument, NULL, 'a'},
        {"beta", required_argument, NULL, 'b'},
        {"gamma", required_argument, NULL, 'g'},
        {"damping", required_argument, NULL, 'd'},
        {"headroom", required_argument, NULL, 'r'},
        {"tls-cert", required_argument, NULL, 'c'},
        {"tls-key", required_argument, NULL, 'k'},
        {"token-file", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'H'},
        {0, 0, 0, 0}};
    *o = (av_options){
        .listen = "127.0.0.1:9300",
        .step_ms = 1000,
        .season_ms = 60000,
        .horizon_ms = 5000,
        .hw = {.alpha = 0.3, .beta = 0.01, .gamma = 0.3, .damping = 0.1},
        .headroom = 1.1};
    const char *scrape = NULL;
    int c, bad = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'S':
            scrape = optarg;
            break;
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            bad |= parse_ms("--step", optarg, &o->step_ms);
            break;
        case 'm':
            bad |= parse_ms("--season", optarg, &o->season_ms);
            break;
        case 'h':
            bad |= parse_ms("--horizon", optarg, &o->horizon_ms);
            break;
        case 'a':
            bad |= parse_real("--alpha", optarg, 0, 1, &o->hw.alpha);
            break;
        case 'b':
            bad |= parse_real("--beta", optarg, 0, 1, &o->hw.beta);
            break;
        case 'g':
            bad |= parse_real("--gamma", optarg, 0, 1, &o->hw.gamma);
            break;
        case 'd': /* below 1: a trend that vanishes at once is --beta 0 */
            bad |= parse_real("--damping", optarg, 0, 0.99, &o->hw.damping);
            break;
        case 'r':
            bad |= parse_real("--headroom", optarg, 1, 100, &o->headroom);
            break;
        case 'c':
            o->tls_cert = optarg;
            break;
        case 'k':
            o->tls_key = optarg;
            break;
        case 't':
            o->token_file = optarg;
            break;
        case 'H':
            fputs(advisor_usage, stdout);
            return 1;
        default:
            bad = 1;
        }
    }
    if (bad || optind < argc) {
        fputs(advisor_usage, stderr);
        return 2;
    }
    if (scrape == NULL || strlen(scrape) >= scrape_len) {
        fprintf(stderr, "sluice advisor: --scrape is required\n");
        return 2;
    }
    if (o->season_ms / o->step_ms < 2 || o->season_ms % o->step_ms != 0) {
        fprintf(stderr,
                "sluice advisor: --season must be a multiple of --step, at "
                "least 2 steps\n");
        return 2;
    }
    if (o->season_ms / o->step_ms > 100000 || o->horizon_ms > o->season_ms) {
        fprintf(stderr, "sluice advisor: at most 100000 steps a season, and "
                        "--horizon at most one season\n");
        return 2;
    }
    strcpy(scrape_buf, scrape);
    for (char *save = NULL, *t = strtok_r(scrape_buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (o->n_nodes == AV_MAX_NODES) {
            fprintf(stderr, "sluice advisor: at most %d nodes\n", AV_MAX_NODES);
            return 2;
        }
        o->nodes[o->n_nodes++] = t;
    }
    if (o->n_nodes == 0) {
        fprintf(stderr, "sluice advisor: --scrape is required\n");
        return 2;
    }
    o->hw.season = (size_t)(o->season_ms / o->step_ms);
    return 0;
}

/* Lock-free, so the handler may store it; atomic, because the scraper
 * thread reads it too. */
static atomic_int stopping;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stopping, 1);
}

int cmd_advisor(int argc, char **argv)
{
    av_options o;
    char scrape[4096];
    int rc = parse_options(argc, argv, &o, scrape, sizeof(scrape));
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return av_run(&o, &stopping);
}
