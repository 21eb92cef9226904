/*
 * router.h - routes: (method, path) to a handler.
 */
#ifndef SL_SRV_ROUTER_H
#define SL_SRV_ROUTER_H

#include "server/http.h"
#include "server/request.h"

/* Answers the request into out: 0, or SL_SRV_AGAIN (nothing answered). */
int sl_route(sl_srv_worker *w, const sl_http_request *req, sl_srv_req *rq,
             sl_buf *out, int *keep_alive);

#endif
