/*
 * resp.h - `sluice serve --resp-listen`: the Redis protocol (RESP2) as a
 * door of serve (worker.h's sv_door), answering redis-cell's CL.THROTTLE,
 * Redis's GCRA and SLUICE.CHECK on serve's rules and store
 * (docs/resp.md).
 */
#ifndef RP_RESP_H
#define RP_RESP_H

#include "runtime/worker.h"

/* The door's: a connection accepted, and on stop the idle ones closed. */
void rp_accept(sv_listener *l);
void rp_close_idle(sv_listener *l);

#endif
