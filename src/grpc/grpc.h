/*
 * grpc.h - the gRPC front end of `sluice serve` (docs/server.md, "gRPC"):
 * envoy's Rate Limit Service and grpc's health check over h2c, on a
 * listener of its own beside the HTTP one, deciding with the same rules,
 * store and metrics.  Its files, each calling down this list:
 *
 *   grpc_conn.c  the door: accepted connections, reads, writes, timers
 *   h2.c         HTTP/2 (nghttp2) and gRPC's framing: streams to calls
 *   rls.c        RateLimitService/ShouldRateLimit: descriptors decided
 *   health.c     grpc.health.v1.Health/Check
 *   pb.c         the protobuf messages of both
 *   mem.c        each session's allocator: free lists for nghttp2's
 *                blocks and the calls'
 */
#ifndef GR_GRPC_H
#define GR_GRPC_H

#include "grpc/session.h"
#include "runtime/worker.h"

/* The door's (tools/cmd_serve.c): a connection accepted on l, and on stop
 * every connection told to go (GOAWAY), idle ones closed at once. */
void gr_accept(sv_listener *l);
void gr_close_idle(sv_listener *l);

/* The methods, each with the thread's sv_worker as its calls' context
 * (gr_call_ctx). */
extern const gr_method gr_rls_method;
extern const gr_method gr_health_method;

#endif
