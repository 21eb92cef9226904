/*
 * load.h - `sluice lab load`: the lab's load generator A.  Open loop:
 * each request is sent at the time its client's schedule (schedule.h)
 * says, whatever became of the ones before, on an idle keep-alive
 * connection or a new one, so a send never waits behind a busy
 * connection; latency is measured from that intended time, so a stall
 * anywhere (connection set-up included) shows in it rather than
 * delaying the measurement (no coordinated omission).  Requests go
 * round robin over the targets (the proxies), the client's id in
 * X-Api-Key.
 *
 * Results are kept per second of intended send time and client class
 * and written as CSV rows once no answer for that second can still
 * come: a fixed ring of seconds, so memory does not grow with the run.
 */
#ifndef SL_LAB_LOAD_H
#define SL_LAB_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "lab/arrivals.h"

#define LB_MAX_TARGETS 8
#define LB_MAX_GROUPS 16
#define LB_MAX_CLASSES 4

typedef struct lb_load_opts {
    char targets[LB_MAX_TARGETS][64]; /* "127.0.0.1:PORT" */
    size_t n_targets;
    lb_group groups[LB_MAX_GROUPS];
    size_t n_groups;
    uint64_t seed;
    int64_t duration_ns;
    /* CLOCK_MONOTONIC ns at which time 0 of the schedule falls (the run
     * passes it so its samples line up); 0: now. */
    uint64_t t0_ns;
    const char *path; /* the request's path: "/api/lab" */
    const char *out;  /* the CSV file */
    uint32_t max_conns;
    int64_t timeout_ns; /* no answer by then: an error */
} lb_load_opts;

/* Runs the load to its end and writes the CSV: 0, or -1 with a message
 * on stderr.  Stops early (writing what it has) on SIGTERM or SIGINT. */
int lb_load_run(const lb_load_opts *opts);

/* The CSV's header line (without the newline). */
extern const char lb_load_csv_header[];

#endif
