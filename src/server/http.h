/*
 * http.h - one HTTP request as a connection hands it to a handler.
 */
#ifndef SV_HTTP_H
#define SV_HTTP_H

#include <stddef.h>

/* A request header, (pointer, length) each.  Only headers whose name
 * starts with "Sluice-" are kept (conn.c): the others cost nothing. */
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
    const sv_http_header *headers; /* the Sluice-* headers, in order */
    size_t n_headers;
} sv_http_request;

#endif
