/*
 * rules_reload.h - the rules file loaded, watched and swapped under traffic.
 */
#ifndef SV_RULES_RELOAD_H
#define SV_RULES_RELOAD_H

#include "runtime/worker.h"

/* rules_reload.c */
int sv_reload_init(sv_server *s); /* first load; 0 or -1 */
void sv_reload_now(sv_server *s); /* SIGHUP, file change */
void sv_reload_start_watch(sv_server *s, uv_loop_t *loop);
void sv_reload_stop_watch(void);
void sv_reload_adopt(sv_worker *w); /* on the worker: take current */
void sv_reload_release(sv_server *s);

#endif
