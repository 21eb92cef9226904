/*
 * conn.h - one HTTP/1.1 connection of the decision API.
 */
#ifndef SL_SRV_CONN_H
#define SL_SRV_CONN_H

#include "server/worker.h"

/* conn.c */
void sl_conn_accept(sl_srv_worker *w);
void sl_conn_close_idle(sl_srv_worker *w); /* on stop */

#endif
