/*
 * conn.h - one HTTP/1.1 connection of the decision API.
 */
#ifndef SV_CONN_H
#define SV_CONN_H

#include "api/router.h"

/* conn.c: a connection accepted from listener, answered by routes. */
void sv_conn_accept(sv_worker *w, uv_stream_t *listener,
                    const sv_routes *routes);
void sv_conn_close_idle(sv_worker *w); /* on stop */

/* The metrics listener's door (--metrics-listen): its connections are
 * answered by sv_metrics_routes. */
void sv_metrics_accept(sv_listener *l);
void sv_metrics_close_idle(sv_listener *l);

#endif
