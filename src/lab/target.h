/*
 * target.h - `sluice lab target`: the service B of the load lab, an
 * HTTP/1.1 server whose answers come from the queue model (queue.h) on
 * libuv timers: 200 with `X-Lab-B-Us` (the request's time in B, queue
 * and service, in microseconds) when served, 503 when its FIFO is full.
 *
 * GET /lab/stats answers its counters as JSON (queue depth, the most
 * waiting since the last read, busy servers, served, shed, the service
 * mean); POST /lab/service?factor=F sets the service mean to F times
 * the configured one (the lab's "degraded B").  Both are answered at
 * once, outside the queue.
 */
#ifndef SL_LAB_TARGET_H
#define SL_LAB_TARGET_H

#include <stdint.h>

typedef struct lb_target_opts {
    const char *host; /* numeric IPv4 */
    int port;         /* 0: any free port */
    uint32_t servers, cap;
    int64_t mean_service_ns;
    uint64_t seed;
} lb_target_opts;

/* Serves until SIGTERM or SIGINT: 0, or -1 with a message on stderr.
 * "sluice lab target: listening on HOST:PORT" goes to stderr once bound. */
int lb_target_run(const lb_target_opts *opts);

#endif
