/*
 * router.h - routes: (method, path) to a handler.
 */
#ifndef SV_ROUTER_H
#define SV_ROUTER_H

#include "http/http.h"
#include "api/request.h"

/* A route's method, when any method is accepted. */
#define SV_ANY_METHOD (-1)

/* A path and method, and its handler: `get` for the small GET answers,
 * `post` for the handlers that need the request (a body, a query, its
 * headers) and may wait on the store (SV_AGAIN).  A path ending in '/'
 * matches every path under it (the handler reads the rest). */
typedef struct sv_route_entry {
    const char *path;
    int method; /* enum http_method, or SV_ANY_METHOD */
    void (*get)(sv_worker *, sv_buf *, int);
    int (*post)(sv_worker *, const sv_http_request *, sv_req *, sv_buf *, int);
} sv_route_entry;

/* A listener's routes. */
typedef struct sv_routes {
    const sv_route_entry *entries;
    size_t n;
    int peer; /* its handlers read the client's address */
} sv_routes;

/* The decision API's (serve's client-facing listener). */
extern const sv_routes sv_public_routes;

/* The metrics listener's (--metrics-listen): GET /metrics, /v1/rules,
 * /healthz and /readyz. */
extern const sv_routes sv_metrics_routes;

/* GET /v1/rules: the rules version, domains and each rule with its
 * limit in force (also on sluice proxy's metrics listener, which
 * sluice advisor scrapes). */
void sv_rules_answer(sv_worker *w, sv_buf *out, int keep_alive);

/* Answers the request into out by routes: 0, or SV_AGAIN (nothing
 * answered). */
int sv_route(const sv_routes *routes, sv_worker *w, const sv_http_request *req,
             sv_req *rq, sv_buf *out, int *keep_alive);

#endif
