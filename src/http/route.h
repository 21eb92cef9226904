/*
 * route.h - routes: (method, path) to a handler, and the request state a
 * route table's handlers keep across waits on the store.
 */
#ifndef SV_ROUTE_H
#define SV_ROUTE_H

#include "http/http.h"
#include "runtime/worker.h"

/* A request's state across waits on the store, the route table's own
 * (serve's, api/request.h); the connection holds one and knows it by
 * its type (sv_req_type). */
struct sv_req;

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
    int (*post)(sv_worker *, const sv_http_request *, struct sv_req *,
                sv_buf *, int);
} sv_route_entry;

/* What a connection does with its request state: made with the
 * connection (init: the wait's callback and owner), told when a wait
 * ended (woke), emptied when a request is answered (reset), and freed,
 * its wait given up, when the connection goes (free). */
typedef struct sv_req_type {
    size_t size;
    void (*init)(struct sv_req *rq, sd_done_fn resume, void *owner);
    void (*woke)(struct sv_req *rq);
    void (*reset)(struct sv_req *rq);
    void (*free)(struct sv_req *rq);
} sv_req_type;

/* A listener's routes. */
typedef struct sv_routes {
    const sv_route_entry *entries;
    size_t n;
    int peer; /* its handlers read the client's address */
    const sv_req_type *req;
} sv_routes;

/* Answers the request into out by routes: 0, or SV_AGAIN (nothing
 * answered). */
int sv_route(const sv_routes *routes, sv_worker *w, const sv_http_request *req,
             struct sv_req *rq, sv_buf *out, int *keep_alive);

#endif
