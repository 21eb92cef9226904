/*
 * http.h - one HTTP request as a connection hands it to a handler.
 */
#ifndef SV_HTTP_H
#define SV_HTTP_H

#include <stddef.h>

/* A request header, (pointer, length) each.  Only the headers some
 * handler reads are kept (conn.c): those whose name starts with
 * "Sluice-", and Authorization, If-Match and If-None-Match (the admin
 * API's); the others cost nothing. */
typedef struct sv_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sv_http_header;

typedef struct sv_http_request {
    int method; /* enum http_method */
    const char *path;
    size_t path_len;
    const char *query; /* after '?', not NUL-terminated; "" if none */
    size_t query_len;
    const char *body;
    size_t body_len;
    const sv_http_header *headers; /* the kept headers, in order */
    size_t n_headers;
    /* The client's address as text, and whether it is a loopback one:
     * set on listeners whose routes ask for it (sv_routes.peer). */
    const char *peer;
    int peer_loopback;
} sv_http_request;

/* The value of the kept header name (case-insensitive), or NULL. */
const sv_http_header *sv_http_header_find(const sv_http_request *req,
                                          const char *name);

#endif
