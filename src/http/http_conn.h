/*
 * http_conn.h - HTTP/1.1 connections: serve's API, the admin API and the
 * metrics listener, each answered by its routes.
 */
#ifndef SV_HTTP_CONN_H
#define SV_HTTP_CONN_H

#include "api/router.h"

/* A connection accepted from listener, answered by routes. */
void sv_http_accept(sv_worker *w, uv_stream_t *listener,
                    const sv_routes *routes);
void sv_http_close_idle(sv_worker *w); /* on stop */

/* The metrics listener's door (--metrics-listen): its connections are
 * answered by sv_metrics_routes. */
void sv_metrics_accept(sv_listener *l);
void sv_metrics_close_idle(sv_listener *l);

#endif
