/*
 * stats.c - the proxy's counters and its part of /metrics: per route,
 * the outcome of every request, the upstream's status classes and the
 * upstream latency (request forwarded to response head).  As in
 * src/runtime/metrics.c, each thread writes only its own cache-line-aligned
 * counters with relaxed atomics and a scrape sums the threads; the
 * decision series (per rule) are the server's own and come first.  A
 * route's counters are found by its slot (reload.c), not its place in
 * the config, so they go on across reloads.
 */
#include <stdio.h>
#include <string.h>

#include "proxy.h"
#include "runtime/label.h"

static const char *const outcome_names[PX_N_OUTCOMES] = {
    "forwarded",   "queued",          "limited", "queue_full",
    "bad_gateway", "gateway_timeout", "rejected"};

/* Upper bounds of the latency buckets, ns; the last is +Inf. */
static const sl_nanos latency_le[PX_LATENCY_BUCKETS - 1] = {
    1000000,   2500000,   5000000,   10000000,   25000000,  50000000,
    100000000, 250000000, 500000000, 1000000000, 5000000000};

px_proxy *px_of(sv_worker *w)
{
    return w->server->cfg.frontend->ctx;
}

px_worker *px_worker_of(sv_worker *w)
{
    return &px_of(w)->workers[w->index];
}

px_route_stats *px_stats(sv_worker *w, const px_route *route)
{
    px_proxy *px = px_of(w);
    return &px->stats[(size_t)w->index * (PX_MAX_SLOTS + 1) +
                      (route ? route->slot : 0)];
}

void px_count(sv_worker *w, const px_route *route, px_outcome o)
{
    atomic_fetch_add_explicit(&px_stats(w, route)->outcomes[o], 1,
                              memory_order_relaxed);
}

void px_count_response(sv_worker *w, const px_route *route, int status,
                       uint64_t latency_ns)
{
    px_route_stats *s = px_stats(w, route);
    int cls = status >= 100 && status < 600 ? status / 100 : 0;
    atomic_fetch_add_explicit(&s->status_class[cls], 1, memory_order_relaxed);
    size_t i = 0;
    while (i < PX_LATENCY_BUCKETS - 1 && (sl_nanos)latency_ns > latency_le[i])
        i++;
    atomic_fetch_add_explicit(&s->latency[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->latency_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->latency_sum_ns, latency_ns,
                              memory_order_relaxed);
}

void px_count_tls(sv_worker *w, int result)
{
    atomic_fetch_add_explicit(&px_of(w)->tls_handshakes[result], 1,
                              memory_order_relaxed);
}

static uint64_t sum(px_proxy *px, size_t slot, size_t offset)
{
    uint64_t total = 0;
    for (int t = 0; t < px->n_workers; t++) {
        const char *base =
            (const char *)&px->stats[(size_t)t * (PX_MAX_SLOTS + 1) + slot];
        total +=
            atomic_load_explicit((const atomic_uint_fast64_t *)(base + offset),
                                 memory_order_relaxed);
    }
    return total;
}

#define AT(field) offsetof(px_route_stats, field)

/* `metric{route="NAME"`, the name made a safe label (label.h): a route's
 * prefix comes from the config file; "_none_" is the unrouted. */
static void route_label(sv_buf *out, const char *metric, const char *name)
{
    sv_buf_addstr(out, metric);
    sv_buf_addstr(out, "{route=\"");
    sv_label_value(out, name, strlen(name));
    sv_buf_addstr(out, "\"");
}

void px_metrics_render(sv_worker *w, sv_buf *out)
{
    px_proxy *px = px_of(w);
    /* Acquire: the names of the slots counted are written. */
    size_t n = atomic_load_explicit(&px->n_slots, memory_order_acquire);
    sv_metrics_render(w->server, out);
    sv_buf_addstr(out, "# HELP sluice_proxy_requests_total Requests by route "
                       "and outcome.\n"
                       "# TYPE sluice_proxy_requests_total counter\n");
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < PX_N_OUTCOMES; o++) {
            route_label(out, "sluice_proxy_requests_total", px->slot_names[r]);
            sv_buf_printf(out, ",outcome=\"%s\"} %llu\n", outcome_names[o],
                          (unsigned long long)sum(px, r, AT(outcomes[o])));
        }
    sv_buf_addstr(out,
                  "# HELP sluice_proxy_upstream_responses_total Upstream "
                  "responses by route and status class.\n"
                  "# TYPE sluice_proxy_upstream_responses_total counter\n");
    for (size_t r = 0; r < n; r++)
        for (int c = 1; c <= 5; c++) {
            route_label(out, "sluice_proxy_upstream_responses_total",
                        px->slot_names[r]);
            sv_buf_printf(out, ",class=\"%dxx\"} %llu\n", c,
                          (unsigned long long)sum(px, r, AT(status_class[c])));
        }
    sv_buf_addstr(out, "# HELP sluice_proxy_upstream_latency_seconds Request "
                       "forwarded to response head.\n"
                       "# TYPE sluice_proxy_upstream_latency_seconds "
                       "histogram\n");
    for (size_t r = 0; r < n; r++) {
        const char *name = px->slot_names[r];
        uint64_t cum = 0;
        for (int b = 0; b < PX_LATENCY_BUCKETS; b++) {
            cum += sum(px, r, AT(latency[b]));
            route_label(out, "sluice_proxy_upstream_latency_seconds_bucket",
                        name);
            if (b < PX_LATENCY_BUCKETS - 1)
                sv_buf_printf(out, ",le=\"%g\"} %llu\n",
                              (double)latency_le[b] / 1e9,
                              (unsigned long long)cum);
            else
                sv_buf_printf(out, ",le=\"+Inf\"} %llu\n",
                              (unsigned long long)cum);
        }
        route_label(out, "sluice_proxy_upstream_latency_seconds_sum", name);
        sv_buf_printf(out, "} %.6f\n",
                      (double)sum(px, r, AT(latency_sum_ns)) / 1e9);
        route_label(out, "sluice_proxy_upstream_latency_seconds_count", name);
        sv_buf_printf(out, "} %llu\n",
                      (unsigned long long)sum(px, r, AT(latency_count)));
    }
    sv_buf_printf(
        out,
        "# HELP sluice_proxy_config_reloads_total Proxy config reloads "
        "(SIGHUP) by result.\n"
        "# TYPE sluice_proxy_config_reloads_total counter\n"
        "sluice_proxy_config_reloads_total{result=\"ok\"} %llu\n"
        "sluice_proxy_config_reloads_total{result=\"failed\"} %llu\n",
        (unsigned long long)atomic_load_explicit(&px->reloads_ok,
                                                 memory_order_relaxed),
        (unsigned long long)atomic_load_explicit(&px->reloads_failed,
                                                 memory_order_relaxed));
    static const char *const tls_results[3] = {"new", "resumed", "failed"};
    sv_buf_addstr(out, "# HELP sluice_proxy_upstream_tls_handshakes_total "
                       "Handshakes with an https:// upstream by result.\n"
                       "# TYPE sluice_proxy_upstream_tls_handshakes_total "
                       "counter\n");
    for (int i = 0; i < 3; i++)
        sv_buf_printf(
            out,
            "sluice_proxy_upstream_tls_handshakes_total{result=\"%s\"} "
            "%llu\n",
            tls_results[i],
            (unsigned long long)atomic_load_explicit(&px->tls_handshakes[i],
                                                     memory_order_relaxed));
}

int px_metrics_answer(sv_worker *w, int keep_alive, sv_buf *out)
{
    sv_buf text = {0};
    px_metrics_render(w, &text);
    if (text.failed) {
        sv_buf_release(&text);
        sv_respond_enomem(out);
        return 0;
    }
    sv_buf_printf(out,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                  "version=0.0.4\r\nContent-Length: %zu\r\nConnection: %s\r\n"
                  "\r\n",
                  text.len, keep_alive ? "keep-alive" : "close");
    sv_buf_add(out, text.data, text.len);
    sv_buf_release(&text);
    return keep_alive;
}
