/*
 * routes.h - serve's route tables, and the answers they share with the
 * proxy's metrics listener.
 */
#ifndef SV_ROUTES_H
#define SV_ROUTES_H

#include "api/request.h"
#include "http/route.h"

/* The decision API's (serve's client-facing listener). */
extern const sv_routes sv_public_routes;

/* The metrics listener's (--metrics-listen): GET /metrics, /v1/rules,
 * /healthz and /readyz. */
extern const sv_routes sv_metrics_routes;

/* GET /v1/rules: the rules version, domains and each rule with its
 * limit in force (also on sluice proxy's metrics listener, which
 * sluice advisor scrapes). */
void sv_rules_answer(sv_worker *w, sv_buf *out, int keep_alive);

/* The metrics listener's door (--metrics-listen): its connections are
 * answered by sv_metrics_routes. */
void sv_metrics_accept(sv_listener *l);
void sv_metrics_close_idle(sv_listener *l);

#endif
