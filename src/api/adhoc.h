/*
 * adhoc.h - the client-side API's ad hoc limits (adhoc.c): (id,
 * interval, requests, algorithm) to a limit, cached for all threads.
 */
#ifndef SV_ADHOC_H
#define SV_ADHOC_H

#include "http/respond.h"
#include "runtime/worker.h"

typedef struct sv_adhoc_limit sv_adhoc_limit;

/* The process's table (sv_server.adhoc): 0, or -1 out of memory. */
int sv_adhoc_init(sv_server *s);
void sv_adhoc_release(sv_server *s);

/* The limit of (id, interval, requests, alg), from the table or made and
 * cached (evicting the least recently used entry when the table is full;
 * with --max-adhoc-limits 0 it is made for this request alone).  0 with
 * *out held for the caller (sv_adhoc_put), or -1 with e set (bad
 * parameters, no memory). */
int sv_adhoc_get(sv_server *s, const char *id, size_t id_len,
                 sl_nanos interval, int64_t requests, sl_algorithm alg,
                 sv_adhoc_limit **out, sv_api_err *e);
/* The limit a held entry stands for: valid until sv_adhoc_put. */
const sl_limit *sv_adhoc_limit_of(const sv_adhoc_limit *a);
/* A request lets go of the entry sv_adhoc_get gave it (NULL: no-op). */
void sv_adhoc_put(struct sv_adhoc *t, sv_adhoc_limit *a);

#endif
