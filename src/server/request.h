/*
 * request.h - the JSON decision requests of POST /v1/check and /json: their
 * parse, their state across waits on the store, and their answer.
 */
#ifndef SL_SRV_REQUEST_H
#define SL_SRV_REQUEST_H

#include <jansson.h>

#include "server/decide.h"
#include "server/http.h"

/* Parses one request's JSON descriptors (both APIs share the shape). */
int sl_parse_descriptors(sl_srv_worker *w, json_t *arr, const char *hits_key,
                         sl_dec_descriptor **out, size_t *n_out, int *status,
                         const char **code, char *msg, size_t msglen);
void sl_free_descriptors(sl_dec_descriptor *ds, size_t n);
/* A non-negative integer or numeric string; absent means dflt. */
int sl_parse_hits(json_t *v, int64_t dflt, int64_t *out);

/* The common request shape of both APIs: domain, descriptors, hits. */
typedef struct sl_parsed_request {
    json_t *root; /* owns the strings below */
    const char *domain;
    size_t domain_len;
    int64_t hits;
    sl_dec_descriptor *ds;
    size_t n;
} sl_parsed_request;

/* 0, or -1 with the HTTP status, error code and message set.  Release
 * pr either way. */
int sl_parse_request(sl_srv_worker *w, const sl_http_request *req,
                     const char *hits_key, const char *desc_hits_key,
                     sl_parsed_request *pr, int *status, const char **code,
                     char *msg, size_t msglen);
void sl_parsed_request_release(sl_parsed_request *pr);
/* A request's state across waits on the store (nginx's "again"): owned
 * by its connection, reset once the request is answered.  A handler
 * that returns SL_SRV_AGAIN has set `wait` and keeps what it needs here;
 * it runs again, with the same request, when `resume(owner)` is called. */
typedef struct sl_srv_req {
    int step;     /* 0: a new request; a handler counts its rounds */
    uint64_t t0;  /* uv_hrtime when it was first handled */
    sd_wait *wait; /* the round it waits on, or NULL */
    sd_done_fn resume;
    void *owner;
    sl_dec_state *dec; /* the connection's, kept between requests */
    sl_parsed_request pr; /* POST /v1/check and /json */
    sl_dec_result res;
    void *api; /* another handler's own state, freed by api_free */
    void (*api_free)(void *api);
} sl_srv_req;

/* The request is answered: what it kept is released. */
void sl_srv_req_reset(sl_srv_req *rq);
/* The connection is going: its waiting request is given up, and its
 * state freed. */
void sl_srv_req_close(sl_srv_req *rq);

/* Both APIs' common path: parses the request into rq->pr and decides
 * it into rq->res.  0 when decided; SL_SRV_AGAIN when it waits (call it
 * again when rq->resume runs); or -1 with the error answered into out.
 * hits 0 becomes zero_hits_as (0 for a pure query, 1 for lyft's
 * default). */
int sl_decide_request(sl_srv_worker *w, const sl_http_request *req,
                      sl_srv_req *rq, const char *hits_key,
                      const char *desc_hits_key, int64_t zero_hits_as,
                      sl_buf *out, int keep_alive);
/* Answers a decided request: status 200 or 429, the rate-limit headers,
 * the JSON text in w->answer and a newline, and the latency since t0
 * (uv_hrtime). */
void sl_respond_decision(sl_srv_worker *w, const sl_dec_result *res,
                         sl_buf *out, int keep_alive, uint64_t t0);

#endif
