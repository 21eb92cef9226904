/*
 * health.c - grpc.health.v1.Health/Check, what gRPC load balancers and
 * Kubernetes' grpc probes ask.  The service "" (the server) and
 * "ratelimit" answer SERVING, or NOT_SERVING while the server drains
 * (SIGTERM came) or while this thread's store cannot decide: Redis with
 * --redis-failure fail_closed and its breaker open, when every request
 * would be refused.  Any other service is NOT_FOUND, as grpc's own
 * health service answers.  Watch is not served (UNIMPLEMENTED).
 */
#include <string.h>

#include "grpc/grpc.h"
#include "grpc/pb.h"

static int serving(sv_worker *w)
{
    const sv_server *s = w->server;
    if (atomic_load_explicit(&s->draining, memory_order_relaxed))
        return 0;
    return !(s->cfg.redis_url != NULL &&
             s->cfg.redis_failure == SD_FAIL_CLOSED &&
             !atomic_load_explicit(&w->stats.store.up, memory_order_relaxed));
}

static void health_start(gr_call *c, const uint8_t *msg, size_t len)
{
    const char *service;
    size_t n;
    if (gr_pb_decode_health(msg, len, &service, &n) != 0) {
        gr_call_fail(c, GR_INTERNAL, "malformed HealthCheckRequest");
        return;
    }
    if (!(n == 0 || (n == 9 && memcmp(service, "ratelimit", 9) == 0))) {
        gr_call_fail(c, GR_NOT_FOUND, "unknown service");
        return;
    }
    uint8_t *out = gr_call_reply_buf(c, GR_PB_HEALTH_MAX);
    if (out == NULL) {
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    int status = serving(gr_call_ctx(c)) ? GR_PB_HEALTH_SERVING
                                         : GR_PB_HEALTH_NOT_SERVING;
    gr_pb_encode_health(status, out);
    gr_call_reply(c);
}

static void health_cancel(gr_call *c)
{
    (void)c; /* answered at once: never waits */
}

const gr_method gr_health_method = {
    .path = "/grpc.health.v1.Health/Check",
    .start = health_start,
    .cancel = health_cancel,
};
