/*
 * request.h - the JSON decision requests of POST /v1/check and /json: their
 * parse, their state across waits on the store, and their answer.
 */
#ifndef SV_REQUEST_H
#define SV_REQUEST_H

#include "runtime/decide.h"
#include "http/route.h"

/* The JSON decision requests: their fields are named and typed apart. */
typedef enum sv_request_api {
    SV_API_CHECK, /* POST /v1/check: "hits", a descriptor's "hits" */
    SV_API_LYFT   /* POST /json: envoy's RateLimitRequest in proto3 JSON */
} sv_request_api;

/* The common request shape of both APIs: domain, descriptors, hits. */
typedef struct sv_parsed_request {
    /* The strings below point into the request's body, or into
     * `strings`, the decoded copies of escaped ones (request.c). */
    char *strings;
    size_t strings_used;
    const char *domain;
    size_t domain_len;
    int64_t hits;
    int64_t hits_addend; /* /json: the request's as sent, 0 if none */
    sv_dec_descriptor *ds;
    sv_dec_override *ov; /* lyft's overrides, ds[i].limit's; NULL: none */
    size_t n;
} sv_parsed_request;

/* A request's state across waits on the store (nginx's "again"): owned
 * by its connection, reset once the request is answered.  A handler
 * that returns SV_AGAIN has set `wait` and keeps what it needs here;
 * it runs again, with the same request, when `resume(owner)` is called. */
typedef struct sv_req {
    int step;      /* 0: a new request; a handler counts its rounds */
    uint64_t t0;   /* uv_hrtime when it was first handled */
    sd_wait *wait; /* the round it waits on, or NULL */
    sd_done_fn resume;
    void *owner;
    sv_dec_state *dec;    /* the connection's, kept between requests */
    sv_parsed_request pr; /* POST /v1/check and /json */
    sv_dec_result res;
    void *api; /* another handler's own state, freed by api_free */
    void (*api_free)(void *api);
} sv_req;

/* The state of the requests of every route table that answers decision
 * requests or waits on the store (serve's, the admin API's). */
extern const sv_req_type sv_api_req;

/* The request is answered: what it kept is released. */
void sv_req_reset(sv_req *rq);
/* The connection is going: its waiting request is given up, and its
 * state freed. */
void sv_req_close(sv_req *rq);

/* Both APIs' common path: parses the request into rq->pr and decides
 * it into rq->res.  0 when decided; SV_AGAIN when it waits (call it
 * again when rq->resume runs); or -1 with the error answered into out
 * (400 naming the field for a bad one). */
int sv_decide_request(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_request_api api, sv_buf *out, int keep_alive);
/* Answers a decided request: status 200 or 429, the rate-limit headers,
 * the JSON text in w->answer and a newline, and the latency since t0
 * (uv_hrtime). */
void sv_respond_decision(sv_worker *w, const sv_dec_result *res, sv_buf *out,
                         int keep_alive, uint64_t t0);

#endif
