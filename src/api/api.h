/*
 * api.h - the decision APIs of `sluice serve`, each a handler that answers
 * a request or returns SV_AGAIN to wait on the store.
 */
#ifndef SV_API_H
#define SV_API_H

#include "http/http.h"
#include "api/request.h"

/* check_api.c, lyft_api.c */
int sv_api_check(sv_worker *w, const sv_http_request *req, sv_req *rq,
                 sv_buf *out, int keep_alive);
int sv_api_lyft(sv_worker *w, const sv_http_request *req, sv_req *rq,
                sv_buf *out, int keep_alive);

/* auth_api.c: GET /v1/auth (any method), for nginx's auth_request. */
int sv_api_auth(sv_worker *w, const sv_http_request *req, sv_req *rq,
                sv_buf *out, int keep_alive);

/* client_api.c: POST /v1/increment, GET /v1/delay. */
int sv_api_increment(sv_worker *w, const sv_http_request *req, sv_req *rq,
                     sv_buf *out, int keep_alive);
int sv_api_delay(sv_worker *w, const sv_http_request *req, sv_req *rq,
                 sv_buf *out, int keep_alive);

/* frontend.c: serve's decision API on the main listener. */
extern const sv_frontend sv_api_frontend;

#endif
