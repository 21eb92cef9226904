/*
 * queue.c - the target service B's queue model (queue.h): c servers, a
 * ring buffer FIFO of ids, exponential service times from one seeded
 * stream.
 */
#include "lab/queue.h"

#include <stdlib.h>

#include "lab/rng.h"

struct lb_queue {
    uint32_t servers, cap;
    int64_t mean_ns;
    lb_rng rng;
    uint64_t *ring; /* cap ids; head is the oldest waiting */
    uint32_t head;
    lb_queue_stats st;
};

lb_queue *lb_queue_new(uint32_t servers, uint32_t cap, int64_t mean_service_ns,
                       uint64_t seed)
{
    if (servers < 1 || mean_service_ns <= 0)
        return NULL;
    lb_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->ring = calloc(cap ? cap : 1, sizeof(*q->ring));
    if (!q->ring) {
        free(q);
        return NULL;
    }
    q->servers = servers;
    q->cap = cap;
    q->mean_ns = mean_service_ns;
    lb_rng_init(&q->rng, seed, 0xb);
    return q;
}

void lb_queue_free(lb_queue *q)
{
    if (!q)
        return;
    free(q->ring);
    free(q);
}

void lb_queue_set_mean(lb_queue *q, int64_t mean_service_ns)
{
    if (mean_service_ns > 0)
        q->mean_ns = mean_service_ns;
}

int64_t lb_queue_mean(const lb_queue *q)
{
    return q->mean_ns;
}

static int64_t draw(lb_queue *q)
{
    int64_t s = lb_rng_exp_ns(&q->rng, (double)q->mean_ns);
    return s > 0 ? s : 1;
}

int lb_queue_arrive(lb_queue *q, uint64_t id, int64_t *service_ns)
{
    q->st.arrived++;
    if (q->st.busy < q->servers) {
        q->st.busy++;
        *service_ns = draw(q);
        return LB_Q_SERVE;
    }
    if (q->st.waiting >= q->cap) {
        q->st.shed++;
        return LB_Q_SHED;
    }
    q->ring[(q->head + q->st.waiting) % q->cap] = id;
    q->st.waiting++;
    if (q->st.waiting > q->st.max_waiting)
        q->st.max_waiting = q->st.waiting;
    return LB_Q_WAIT;
}

int lb_queue_depart(lb_queue *q, uint64_t *id, int64_t *service_ns)
{
    q->st.served++;
    if (q->st.waiting == 0) {
        if (q->st.busy > 0)
            q->st.busy--;
        return 0;
    }
    *id = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->st.waiting--;
    *service_ns = draw(q);
    return 1;
}

int lb_queue_cancel(lb_queue *q, uint64_t id)
{
    for (uint32_t i = 0; i < q->st.waiting; i++) {
        if (q->ring[(q->head + i) % q->cap] != id)
            continue;
        /* Close the gap: the later ones move up one place, in order. */
        for (uint32_t j = i; j + 1 < q->st.waiting; j++)
            q->ring[(q->head + j) % q->cap] =
                q->ring[(q->head + j + 1) % q->cap];
        q->st.waiting--;
        return 1;
    }
    return 0;
}

void lb_queue_stats_get(const lb_queue *q, lb_queue_stats *out)
{
    *out = q->st;
}

void lb_queue_reset_max(lb_queue *q)
{
    q->st.max_waiting = q->st.waiting;
}
