/*
 * scenario.h - what `sluice lab run` runs: the thesis's four scenarios
 * (their load, faults and phases, in the full profile's seconds, scaled
 * by the profile) and the variants, each a choice of the proxies'
 * rules and flags.  A new variant (the adaptive controller, the
 * advisor) is one more entry in the variants table.
 */
#ifndef SL_LAB_SCENARIO_H
#define SL_LAB_SCENARIO_H

#include <stddef.h>
#include <stdio.h>

#define LB_MAX_PHASES 16
#define LB_MAX_FAULTS 16
#define LB_SCENARIO_GROUPS 4

/* The limits under test (docs/lab.md, "Rules"). */
#define LB_GLOBAL_LIMIT 100 /* generic_key global, per second */
#define LB_KEY_LIMIT 10     /* per api_key, per second */
#define LB_BURST 20         /* the global bucket's burst */
/* The per-key bucket's burst: half a second of its rate.  With 20 (two
 * seconds of it, the thesis's one burst for both limits), two abusers
 * starting together spent 40 at once against the global burst of 20,
 * and the legitimate requests of that instant found the global bucket
 * empty (docs/lab.md, "Acceptance"). */
#define LB_KEY_BURST 5

/* The adaptive and advisor variants' bounds on the global limit, from
 * B's capacity (LB_B_SERVERS / LB_B_SERVICE_MS = 200 r/s): never above
 * 90% of it, where B's queue and p99 grow fast (Erlang C), never below
 * a quarter of the base; a p99 above LB_SLO_MS is an overload (B's idle
 * p99 is 184 ms, the protection bound 405 ms). */
#define LB_ADAPTIVE_MIN 25
#define LB_ADAPTIVE_MAX 180
#define LB_SLO_MS 300

/* B (sluice lab target) as the lab runs it. */
#define LB_B_SERVERS 8
#define LB_B_CAP 200
#define LB_B_SERVICE_MS 40

typedef enum {
    LB_FAULT_PAUSE,   /* SIGSTOP Redis */
    LB_FAULT_RESUME,  /* SIGCONT Redis */
    LB_FAULT_KILL,    /* SIGKILL Redis */
    LB_FAULT_RESTART, /* start Redis again, empty, on its port */
    LB_FAULT_DELAY,   /* the relay's delay to Redis, `value` ms */
    LB_FAULT_B_SLOW   /* B's service mean times `value` */
} lb_fault_kind;

typedef struct lb_fault {
    double at_s; /* full-profile seconds */
    lb_fault_kind kind;
    double value;
} lb_fault;

/* A phase: the seconds [from, to) of the run measured together; phases
 * of one name (the bursts) are measured as one. */
typedef struct lb_phase {
    const char *name;
    double from_s, to_s;
} lb_phase;

typedef struct lb_scenario {
    const char *id, *title;
    double duration_s;
    /* Groups as `sluice lab load --group` takes them, windows in
     * full-profile seconds ("%W" is replaced by the scaled windows). */
    const char *groups[LB_SCENARIO_GROUPS];
    const char *windows[LB_SCENARIO_GROUPS]; /* "30-40,150-160" or NULL */
    lb_fault faults[LB_MAX_FAULTS];
    size_t n_faults;
    lb_phase phases[LB_MAX_PHASES];
    size_t n_phases;
} lb_scenario;

extern const lb_scenario lb_scenarios[];
extern const size_t lb_n_scenarios;
const lb_scenario *lb_scenario_find(const char *id);

typedef struct lb_variant {
    const char *name;
    /* Writes the rules file for `algorithm`, the scenarios' times
     * scaled by `scale`: 0, or -1. */
    int (*write_rules)(FILE *f, const char *algorithm, double scale);
    /* Added to each proxy's command line; NULL-terminated. */
    const char *const *proxy_flags;
    /* The global limit in force at second t (for the plots and the
     * limit's stability); a controller's variant reads it from the
     * proxies, `metrics` being a proxy's /sluice/metrics text (len
     * bytes); -1 when it is not there. */
    double (*effective_limit)(const char *metrics, size_t len);
    /* The run starts `sluice advisor` scraping the proxies, and the
     * proxies poll it (--advisor). */
    int advisor;
    /* The proxies run the controller: each writes its trace
     * (--adaptive-trace) in the cell's directory. */
    int controller;
    /* The quick profile's cells of this variant, when the scenarios
     * and algorithms are not named: these scenarios, token_bucket
     * only (NULL: every cell). */
    const char *quick_scenarios;
} lb_variant;

extern const lb_variant lb_variants[];
extern const size_t lb_n_variants;
const lb_variant *lb_variant_find(const char *name);

/* The seconds between the starts of s2's bursts, full profile: the
 * advisor's season and the forecast's. */
#define LB_BURST_PERIOD_S 60

/* The algorithms the lab compares by default (the thesis's three). */
extern const char lb_default_algorithms[];

#endif
