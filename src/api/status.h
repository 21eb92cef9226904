/*
 * status.h - the live status page (status.c): GET /status and
 * /status.json.
 */
#ifndef SV_STATUS_H
#define SV_STATUS_H

#include <jansson.h>

#include "runtime/buf.h"
#include "runtime/worker.h"

/* The page, and its JSON (owned by the caller). */
void sv_status_page(sv_worker *w, sv_buf *out, int keep_alive);
json_t *sv_status_json(sv_worker *w);
void sv_status_json_get(sv_worker *w, sv_buf *out, int keep_alive);
/* The main listener's routes: the same, or 404 when an admin listener
 * serves them. */
void sv_status_page_public(sv_worker *w, sv_buf *out, int keep_alive);
void sv_status_json_public(sv_worker *w, sv_buf *out, int keep_alive);

#endif
