/*
 * router.h - routes: (method, path) to a handler.
 */
#ifndef SV_ROUTER_H
#define SV_ROUTER_H

#include "server/http.h"
#include "server/request.h"

/* Answers the request into out: 0, or SV_AGAIN (nothing answered). */
int sv_route(sv_worker *w, const sv_http_request *req, sv_req *rq, sv_buf *out,
             int *keep_alive);

#endif
