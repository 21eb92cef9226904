/*
 * cell.h - one cell of the lab: a scenario run with one algorithm and
 * one variant, its seconds as A and the run saw them, and the measures
 * made from them (measure.c, docs/lab.md "Measures").
 */
#ifndef SL_LAB_CELL_H
#define SL_LAB_CELL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "lab/hist.h"
#include "lab/scenario.h"

enum { LB_LEGIT, LB_CROWD, LB_ABUSER, LB_N_CLASSES };
extern const char *const lb_class_names[LB_N_CLASSES];

enum { LB_REDIS_UP, LB_REDIS_PAUSED, LB_REDIS_STOPPED };
extern const char *const lb_redis_states[];

typedef struct lb_sec {
    /* A's view, by class, of the requests meant to be sent this second. */
    uint64_t offered[LB_N_CLASSES], ok[LB_N_CLASSES], r429[LB_N_CLASSES],
        r503[LB_N_CLASSES], r5xx[LB_N_CLASSES], errors[LB_N_CLASSES];
    double overhead_ms_sum; /* A's latency - X-Lab-B-Us, over ok */
    uint64_t overhead_n;
    lb_hist lat; /* allowed requests' latency at A, every class */
    lb_hist b;   /* their time in B (X-Lab-B-Us) */
    /* The run's view, sampled at the second's end. */
    uint32_t queue, max_queue;
    uint64_t shed, served; /* B, this second */
    double redis_cmds;     /* the proxies' EVALSHA calls this second */
    double fallback;       /* decisions the failure policy made */
    int redis_state;
    unsigned delay_ms;
    double b_factor, limit;
} lb_sec;

typedef struct lb_cell {
    const lb_scenario *sc;
    const lb_variant *variant;
    char algorithm[32];
    double scale; /* the profile's: seconds = full seconds x scale */
    int seconds;  /* of the run */
    lb_sec *sec;  /* seconds of them */
    int failed;   /* the cell could not be run (its error in the log) */
} lb_cell;

/* Reads `sluice lab load`'s CSV into the cell's seconds: 0, or -1. */
int lb_cell_read_load(lb_cell *c, const char *path);

/* The phase second t falls in (its name), by the scaled phases. */
const char *lb_cell_phase(const lb_cell *c, int t);

/* Appends the cell's rows to samples.csv (the header first when
 * header is set). */
void lb_cell_write_samples(const lb_cell *c, FILE *out, int header);

/* The cell's measures as JSON (results.json's "cells" entry), and its
 * acceptance checks appended to checks; policy is the proxies'
 * --redis-failure. */
json_t *lb_cell_measure(const lb_cell *c, const char *policy, json_t *checks);

/* The checks that compare cells (a variant against static in the same
 * scenario and algorithm), appended to checks. */
void lb_cells_compare(json_t *cells, json_t *checks);

#endif
