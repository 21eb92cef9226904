/*
 * state_file.h - the daemon's state file (--state-file; state_file.c):
 * the memory store loaded at start and saved on a timer, on SIGUSR1 and
 * after the drain, with what happened kept for /metrics and the status
 * page.
 */
#ifndef SV_STATE_FILE_H
#define SV_STATE_FILE_H

#include <jansson.h>

#include "runtime/worker.h"

/* Loads cfg.state_file into s->store, before any listener opens, and
 * sets the engine's clock to go on from the saved one.  0 (loaded,
 * absent, or bad and started empty), or -1 after a log line when the
 * file is bad and --state-required is set.  No-op without
 * --state-file. */
int sv_state_load(sv_server *s);
/* The periodic save and SIGUSR1 on the main loop. */
void sv_state_start(sv_server *s, uv_loop_t *main_loop);
/* Closes what sv_state_start opened (the loop then runs them out). */
void sv_state_stop(sv_server *s);
/* Saves now, logging a failure; why names the occasion in the log. */
void sv_state_save(sv_server *s, const char *why);
/* The sluice_state_* series; nothing without --state-file. */
void sv_state_metrics(sv_server *s, sv_buf *out);
/* The status page's "state_file" object, or NULL without --state-file. */
json_t *sv_state_json(sv_server *s);
void sv_state_free(sv_server *s);

#endif
