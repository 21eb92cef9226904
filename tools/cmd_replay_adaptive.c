/*
 * replay_adaptive.c - `sluice replay --adaptive`: runs the adaptive
 * controller (src/adaptive/controller.c) over a recorded trace of its
 * signals, one window a line, and prints the limit it would have set
 * after each.  The controller is pure, so a trace gives the same limits
 * every time: a regression test of the controller is a trace and its
 * expected output (tests/adaptive/), and a limit that moved in
 * production can be explained from what the proxy saw.
 *
 * input:  n s50_ms s99_ms errors accepted refused
 *         [in_force [answered [failed [late [pooled]]]]]
 *         (per window; blank lines and '#' comments skipped; without
 *         answered, every request let through is taken as answered in
 *         its window: no queue builds; without failed and late, none of
 *         the answers failed or came past the SLO: the traces of before
 *         they were recorded replay as they were written)
 * output: limit action publish overload gradient reason capacity
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/controller.h"
#include "commands.h"
#include "core/value.h"
#include "sluice.h"

#define FIELDS 11

static const char usage[] =
    "usage: sluice replay --adaptive --base N --min N --max N\n"
    "                     [--period DURATION] [--slo-p99 DURATION]\n"
    "                     [--season DURATION] [--horizon DURATION]\n"
    "                     [--raise-step PCT] [--raise-max PCT]\n"
    "                     [--capacity-share PCT] [--error-rate PCT]\n"
    "                     [--relax-after DURATION]\n"
    "\n"
    "Reads one line per 1 s window on stdin, 'n s50_ms s99_ms errors\n"
    "accepted refused [in_force [answered [failed [late [pooled]]]]]'\n"
    "(answers timed, their median and p99 in ms, failures among them,\n"
    "requests let through and refused per second, the limit in force, when\n"
    "several nodes share it, the upstream's answers per second, and of\n"
    "those the failures and the answers past the SLO per second, and the\n"
    "nodes' capacities, their mean), and writes the\n"
    "adaptive controller's answer to each: 'limit action publish overload\n"
    "gradient reason capacity' (docs/adaptive.md).  --base is the rule's\n"
    "requests_per_unit, --min and --max its adaptive bounds, --period its\n"
    "unit (default 1s); the rest are the adaptive: keys of the same names\n"
    "(defaults 5%, 25%, 90%, 2%, 30s).\n"
    "Exit status: 0 ok, 2 bad arguments or input.\n";

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "sluice replay --adaptive: invalid %s: '%s'\n", what,
            value);
    return 2;
}

static int count_arg(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > SL_MAX_COUNT)
        return -1;
    *out = v;
    return 0;
}

static int seconds_arg(const char *s, double *out)
{
    sl_nanos ns;
    if (sl_duration_parse(s, strlen(s), &ns) != 0)
        return -1;
    *out = (double)ns / 1e9;
    return 0;
}

/* The percentage flags, the adaptive: keys of the same names, within the
 * bounds the rules file allows (src/rules/rules_adaptive.c). */
static const struct {
    int opt;
    const char *name;
    double lo, hi; /* percent */
    size_t field;  /* in ac_params */
} shares[] = {
    {'r', "raise-step", 0.1, 50, offsetof(ac_params, raise_step)},
    {'R', "raise-max", 1, 100, offsetof(ac_params, raise_max)},
    {'c', "capacity-share", 50, 100, offsetof(ac_params, capacity_share)},
    {'e', "error-rate", 0.1, 50, offsetof(ac_params, error_rate)},
};

/* Option opt's value s into p when it is a percentage flag: 1, or 2 when
 * the value is bad (said); 0 when opt is none of them. */
static int share_arg(int opt, const char *s, ac_params *p)
{
    for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++) {
        if (shares[i].opt != opt)
            continue;
        double *out = (double *)(void *)((char *)p + shares[i].field);
        if (sl__value_percent(s, strlen(s), shares[i].lo, shares[i].hi, out) ==
            0)
            return 1;
        fprintf(stderr,
                "sluice replay --adaptive: invalid %s (%g%% to %g%%): '%s'\n",
                shares[i].name, shares[i].lo, shares[i].hi, s);
        return 2;
    }
    return 0;
}

static int run(ac_state *st)
{
    char line[1024];
    unsigned long lineno = 0;
    while (fgets(line, sizeof(line), stdin) != NULL) {
        lineno++;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        double v[FIELDS] = {0};
        int n = 0, used;
        while (n < FIELDS && sscanf(p, "%lf%n", &v[n], &used) == 1) {
            p += used;
            n++;
        }
        p += strspn(p, " \t\r\n");
        if (n < 6 || *p != '\0') {
            fprintf(stderr,
                    "sluice replay --adaptive: line %lu: expected 'n s50_ms "
                    "s99_ms errors accepted refused [in_force [answered "
                    "[failed [late [pooled]]]]]'\n",
                    lineno);
            return 2;
        }
        for (int k = 0; k < n; k++)
            if (!(v[k] >= 0 && v[k] < 1e15)) {
                fprintf(stderr,
                        "sluice replay --adaptive: line %lu: field %d is not "
                        "a non-negative number\n",
                        lineno, k + 1);
                return 2;
            }
        ac_signal sig = {.n = v[0],
                         .s50 = v[1] / 1000,
                         .s99 = v[2] / 1000,
                         .errors = v[3],
                         .accepted = v[4],
                         .refused = v[5],
                         .in_force = v[6],
                         .answered = n > 7 ? v[7] : v[4],
                         .failed = v[8],
                         .late = v[9],
                         .pooled = v[10]};
        ac_step_out o;
        ac_step(st, &sig, &o);
        printf("%lld %s %d %d %.4f %s %.0f\n", (long long)o.limit,
               ac_action_name(o.action), o.publish, o.overload, o.gradient,
               ac_reason_name(o.reason), st->capacity);
    }
    return 0;
}

int cmd_replay_adaptive(int argc, char **argv)
{
    static const struct option opts[] = {
        {"adaptive", no_argument, NULL, 'A'},
        {"base", required_argument, NULL, 'b'},
        {"min", required_argument, NULL, 'n'},
        {"max", required_argument, NULL, 'x'},
        {"period", required_argument, NULL, 'p'},
        {"slo-p99", required_argument, NULL, 's'},
        {"season", required_argument, NULL, 'S'},
        {"horizon", required_argument, NULL, 'H'},
        {"raise-step", required_argument, NULL, 'r'},
        {"raise-max", required_argument, NULL, 'R'},
        {"capacity-share", required_argument, NULL, 'c'},
        {"error-rate", required_argument, NULL, 'e'},
        {"relax-after", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ac_params p = {.period_s = 1, .horizon = 5};
    double season = 0, horizon = 5, relax = 0;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'A':
            break;
        case 'b':
            if (count_arg(optarg, &p.base) != 0)
                return bad("base", optarg);
            break;
        case 'n':
            if (count_arg(optarg, &p.min) != 0)
                return bad("min", optarg);
            break;
        case 'x':
            if (count_arg(optarg, &p.max) != 0)
                return bad("max", optarg);
            break;
        case 'p':
            if (seconds_arg(optarg, &p.period_s) != 0 || p.period_s < 1e-3)
                return bad("period", optarg);
            break;
        case 's':
            if (seconds_arg(optarg, &p.slo_p99_s) != 0)
                return bad("slo-p99", optarg);
            break;
        case 'S':
            if (seconds_arg(optarg, &season) != 0 || season < 2)
                return bad("season (at least 2s)", optarg);
            break;
        case 'H':
            if (seconds_arg(optarg, &horizon) != 0 || horizon < 1)
                return bad("horizon (at least 1s)", optarg);
            break;
        case 'l':
            if (seconds_arg(optarg, &relax) != 0 || relax < 1 || relax > 3600 ||
                relax != (double)(long)relax)
                return bad("relax-after (whole seconds, 1s to 1h)", optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            switch (share_arg(c, optarg, &p)) {
            case 1:
                break;
            case 2:
                return 2;
            default:
                fputs(usage, stderr);
                return 2;
            }
        }
    }
    if (optind != argc || p.base == 0 || p.min == 0 || p.max == 0) {
        fputs(usage, stderr);
        return 2;
    }
    p.season = (size_t)season; /* windows of 1 s */
    p.horizon = (size_t)horizon;
    p.relax_windows = (size_t)relax;
    ac_state st;
    if (ac_init(&st, &p) != 0) {
        fprintf(stderr, "sluice replay --adaptive: min must be at most max\n");
        return 2;
    }
    int rc = run(&st);
    ac_release(&st);
    return rc;
}
