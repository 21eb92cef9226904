/*
 * http_conn.h - HTTP/1.1 connections: serve's API, the admin API and the
 * metrics listener, each answered by its routes.
 */
#ifndef SV_HTTP_CONN_H
#define SV_HTTP_CONN_H

#include "http/route.h"

/* A connection accepted from listener, answered by routes. */
void sv_http_accept(sv_worker *w, uv_stream_t *listener,
                    const sv_routes *routes);
void sv_http_close_idle(sv_worker *w); /* on stop */

#endif
