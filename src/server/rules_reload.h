/*
 * rules_reload.h - the rules file loaded, watched and swapped under traffic.
 */
#ifndef SL_SRV_RULES_RELOAD_H
#define SL_SRV_RULES_RELOAD_H

#include "server/worker.h"

/* rules_reload.c */
int sl_reload_init(sl_server *s); /* first load; 0 or -1 */
void sl_reload_now(sl_server *s); /* SIGHUP, file change */
void sl_reload_start_watch(sl_server *s, uv_loop_t *loop);
void sl_reload_stop_watch(void);
void sl_reload_adopt(sl_srv_worker *w); /* on the worker: take current */
void sl_reload_release(sl_server *s);

#endif
