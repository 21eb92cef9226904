/*
 * service.h - an HTTP server on the daemon's own machinery (the
 * connection machine, http_conn.c, routes) for the commands that serve
 * HTTP without deciding: `sluice lab target` and `sluice advisor`.  One
 * libuv loop, the caller's thread; no rules, no store.
 */
#ifndef SV_SERVICE_H
#define SV_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/route.h"

typedef struct sv_http_service sv_http_service;

/* The caps a service holds its clients to (the daemon's flags of the
 * same names; docs/server.md, "Flags"). */
typedef struct sv_http_service_opts {
    const sv_routes *routes;
    void *ctx; /* the handlers' (sv_http_service_ctx) */
    int max_connections;
    size_t max_connections_per_address; /* 0: no cap */
    size_t max_header_bytes, max_body_bytes;
    uint64_t idle_timeout_ms, read_timeout_ms;
    /* Its clients speak TLS (runtime/tls.h; borrowed, kept by the caller
     * until the service is freed); NULL: plain text. */
    struct sv_tls *tls;
} sv_http_service_opts;

/* A service listening on addr, its loop made: NULL with err set. */
sv_http_service *sv_http_service_new(const struct sockaddr *addr,
                                     const sv_http_service_opts *o, char *err,
                                     size_t errlen);
/* The loop it runs on, for the caller's own handles (timers, signals). */
uv_loop_t *sv_http_service_loop(sv_http_service *s);
/* The port it listens on. */
int sv_http_service_port(sv_http_service *s);
/* From a handler: the opts' ctx. */
void *sv_http_service_ctx(const sv_worker *w);
/* Runs the loop until nothing is left on it (after a stop). */
void sv_http_service_run(sv_http_service *s);
/* Stops listening and closes every connection now; the caller closes
 * its own handles, then sv_http_service_run returns. */
void sv_http_service_stop(sv_http_service *s);
/* After the run (NULL: no-op). */
void sv_http_service_free(sv_http_service *s);

#endif
