/*
 * api.h - the decision APIs of `sluice serve`, each a handler that answers
 * a request or returns SL_SRV_AGAIN to wait on the store.
 */
#ifndef SL_SRV_API_H
#define SL_SRV_API_H

#include "server/http.h"
#include "server/request.h"

/* check_api.c, lyft_api.c */
int sl_api_check(sl_srv_worker *w, const sl_http_request *req,
                 sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_api_lyft(sl_srv_worker *w, const sl_http_request *req,
                sl_srv_req *rq, sl_buf *out, int keep_alive);

/* auth_api.c: GET /v1/auth (any method), for nginx's auth_request. */
int sl_api_auth(sl_srv_worker *w, const sl_http_request *req,
                sl_srv_req *rq, sl_buf *out, int keep_alive);

/* client_api.c: POST /v1/increment, GET /v1/delay, and the table of
 * ad hoc limits (init: 0 or -1 when out of memory). */
int sl_api_increment(sl_srv_worker *w, const sl_http_request *req,
                     sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_api_delay(sl_srv_worker *w, const sl_http_request *req,
                 sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_adhoc_init(sl_server *s);
void sl_adhoc_release(sl_server *s);

#endif
