/*
 * queue.h - the target service B's model (`sluice lab target`): c
 * servers, each request's service time drawn from an exponential of a
 * fixed mean, a FIFO of at most `cap` waiting requests, and past it the
 * request is shed (503).  An M/M/c/K queue, whose latency grows with
 * the queue as a real service's does, with no CPU spent: the caller
 * keeps the time (a timer per request in service).
 *
 * The model does no I/O and reads no clock, so a test drives it step by
 * step.  Service times are drawn in the order requests start service,
 * from (seed), so a seed gives the same sequence of service times.
 */
#ifndef SL_LAB_QUEUE_H
#define SL_LAB_QUEUE_H

#include <stdint.h>

typedef struct lb_queue lb_queue;

typedef struct lb_queue_stats {
    uint32_t busy;        /* servers serving now */
    uint32_t waiting;     /* requests in the FIFO now */
    uint32_t max_waiting; /* the most waiting since the last reset */
    uint64_t arrived, served, shed;
} lb_queue_stats;

enum {
    LB_Q_SERVE = 0, /* a server took it: it ends after *service_ns */
    LB_Q_WAIT = 1,  /* queued: it starts from lb_queue_depart() */
    LB_Q_SHED = 2   /* the FIFO is full: answer 503 */
};

/* NULL when out of memory.  mean_service_ns > 0, servers >= 1. */
lb_queue *lb_queue_new(uint32_t servers, uint32_t cap, int64_t mean_service_ns,
                       uint64_t seed);
void lb_queue_free(lb_queue *q);

/* Service times from now on are drawn with this mean (the lab's
 * "degraded B" multiplies it); requests in service keep theirs. */
void lb_queue_set_mean(lb_queue *q, int64_t mean_service_ns);
int64_t lb_queue_mean(const lb_queue *q);

/* A request arrives; id is the caller's (returned by depart when a
 * waiting request starts).  LB_Q_SERVE with *service_ns set, LB_Q_WAIT
 * or LB_Q_SHED. */
int lb_queue_arrive(lb_queue *q, uint64_t id, int64_t *service_ns);

/* A request in service ended.  1 when the FIFO's head starts on the
 * freed server (its id and service time set), else 0. */
int lb_queue_depart(lb_queue *q, uint64_t *id, int64_t *service_ns);

/* A waiting request is gone (its client closed): 1 when it was found
 * and removed from the FIFO. */
int lb_queue_cancel(lb_queue *q, uint64_t id);

void lb_queue_stats_get(const lb_queue *q, lb_queue_stats *out);
/* Starts a new max_waiting interval at the current depth. */
void lb_queue_reset_max(lb_queue *q);

#endif
