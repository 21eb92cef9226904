/*
 * conn.h - one HTTP/1.1 connection of the decision API.
 */
#ifndef SV_CONN_H
#define SV_CONN_H

#include "server/worker.h"

/* conn.c */
void sv_conn_accept(sv_worker *w);
void sv_conn_close_idle(sv_worker *w); /* on stop */

#endif
