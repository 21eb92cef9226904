/*
 * routes.c - serve's route tables (the decision API's listener and the
 * metrics listener), the small GET answers (health, readiness, rules,
 * metrics), and the metrics listener's door.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "api/api.h"
#include "api/routes.h"
#include "api/status.h"
#include "http/http_conn.h"
#include "http/respond.h"
#include "runtime/metrics.h"
#include "runtime/rules_json.h"

static void get_readyz(sv_worker *w, sv_buf *out, int keep_alive)
{
    json_t *body;
    if (w->rules != NULL && w->rules->rules != NULL) {
        /* A node that decides under its failure policy stays ready;
         * the body says whether Redis is decided on. */
        body = json_pack(
            "{s:s,s:s,s:s,s:s}", "status", "ready", "rules_version",
            sl_rules_version(w->rules->rules), "store",
            sd_engine_uses_redis(w->server->engine) ? "redis" : "memory",
            "store_status", sv_metrics_store_status(w->server));
        if (sd_engine_uses_redis(w->server->engine))
            json_object_set_new(
                body, "nodes_live",
                json_integer(sd_engine_nodes(w->server->engine)));
        sv_respond_json(out, 200, NULL, body, keep_alive);
    } else {
        body = json_pack("{s:s}", "status", "no rules loaded");
        sv_respond_json(out, 503, NULL, body, keep_alive);
    }
    json_decref(body);
}

void sv_rules_answer(sv_worker *w, sv_buf *out, int keep_alive)
{
    sv_server *s = w->server;
    const sl_rules *r = w->rules->rules;
    json_t *domains = json_array();
    for (size_t i = 0; i < sl_rules_domain_count(r); i++)
        json_array_append_new(domains, json_string(sl_rules_domain_name(r, i)));
    /* Each rule with its limit in force and as loaded (limits.h). */
    json_t *rules = sv_rules_json(w);
    pthread_mutex_lock(&s->reload_lock);
    json_t *err = s->last_error[0] ? json_string(s->last_error) : json_null();
    pthread_mutex_unlock(&s->reload_lock);
    json_t *body = json_pack(
        "{s:s,s:o,s:o,s:o,s:I,s:I}", "version", sl_rules_version(r), "domains",
        domains, "rules", rules, "last_reload_error", err, "reloads_ok",
        (json_int_t)atomic_load_explicit(&s->reloads_ok, memory_order_relaxed),
        "reloads_failed",
        (json_int_t)atomic_load_explicit(&s->reloads_failed,
                                         memory_order_relaxed));
    sv_respond_json(out, 200, NULL, body, keep_alive);
    json_decref(body);
}

static void get_metrics(sv_worker *w, sv_buf *out, int keep_alive)
{
    sv_buf text = {0};
    sv_metrics_render(w->server, &text);
    if (text.failed) {
        sv_buf_release(&text);
        out->failed = 1;
        return;
    }
    sv_respond_body(out, 200, "text/plain; version=0.0.4", NULL,
                    text.data ? text.data : "", text.len, keep_alive);
    sv_buf_release(&text);
}

/* /metrics on the decision API's listener: only with --public-metrics
 * (their series name clients: detailed_metric values, API keys). */
static void get_public_metrics(sv_worker *w, sv_buf *out, int keep_alive)
{
    if (w->server->cfg.public_metrics)
        get_metrics(w, out, keep_alive);
    else
        sv_respond_error(out, 404, "ENOTFOUND",
                         "no such route: /metrics is on --metrics-listen "
                         "(or --public-metrics true)",
                         keep_alive);
}

static void get_healthz(sv_worker *w, sv_buf *out, int keep_alive)
{
    (void)w;
    json_t *body = json_pack("{s:s}", "status", "ok");
    sv_respond_json(out, 200, NULL, body, keep_alive);
    json_decref(body);
}

static const sv_route_entry public_routes[] = {
    {"/healthz", HTTP_GET, get_healthz, NULL},
    {"/readyz", HTTP_GET, get_readyz, NULL},
    {"/v1/rules", HTTP_GET, sv_rules_answer, NULL},
    {"/metrics", HTTP_GET, get_public_metrics, NULL},
    {"/v1/check", HTTP_POST, NULL, sv_api_check},
    {"/json", HTTP_POST, NULL, sv_api_lyft},
    {"/v1/increment", HTTP_POST, NULL, sv_api_increment},
    {"/v1/delay", HTTP_GET, NULL, sv_api_delay},
    /* Gateways differ: nginx's auth_request sends GET, others forward
     * the client's method. */
    {"/v1/auth", SV_ANY_METHOD, NULL, sv_api_auth},
    /* Read-only, with --public-status true only (status.c). */
    {"/status", HTTP_GET, sv_status_page_public, NULL},
    {"/status.json", HTTP_GET, sv_status_json_public, NULL},
};

const sv_routes sv_public_routes = {
    public_routes, sizeof(public_routes) / sizeof(public_routes[0]), 0,
    &sv_api_req};

/* --metrics-listen: what a scraper (Prometheus, sluice advisor) reads,
 * and the status page, private as they are. */
static const sv_route_entry metrics_routes[] = {
    {"/metrics", HTTP_GET, get_metrics, NULL},
    {"/v1/rules", HTTP_GET, sv_rules_answer, NULL},
    {"/healthz", HTTP_GET, get_healthz, NULL},
    {"/readyz", HTTP_GET, get_readyz, NULL},
    {"/status", HTTP_GET, sv_status_page, NULL},
    {"/status.json", HTTP_GET, sv_status_json_get, NULL},
};

const sv_routes sv_metrics_routes = {
    metrics_routes, sizeof(metrics_routes) / sizeof(metrics_routes[0]), 0,
    &sv_api_req};

void sv_metrics_accept(sv_listener *l)
{
    sv_http_accept(l->w, (uv_stream_t *)&l->tcp, &sv_metrics_routes);
}

void sv_metrics_close_idle(sv_listener *l)
{
    sv_http_close_idle(l->w);
}
