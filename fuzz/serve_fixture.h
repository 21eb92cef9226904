/*
 * serve_fixture.h - what the fuzz targets of `sluice serve`'s request
 * paths share (fuzz_http, fuzz_grpc_h2): one worker thread of a server on
 * the memory store, with rules that reach every kind of rule (limits,
 * nested descriptors with detailed metrics, deny, unlimited, shadow, a
 * glob), the
 * caps of `sluice serve` by default.  Included by one target each, so its
 * definitions are static.
 */
#ifndef FUZZ_SERVE_FIXTURE_H
#define FUZZ_SERVE_FIXTURE_H

#include <stdlib.h>

#include "runtime/worker.h"

static const char rules_text[] =
    "domain: test\n"
    "descriptors:\n"
    "  - key: user\n"
    "    rate_limit: {name: per_user, unit: minute, requests_per_unit: 5}\n"
    "  - key: tenant\n"
    "    descriptors:\n"
    "      - key: user\n"
    "        detailed_metric: true\n"
    "        rate_limit:\n"
    "          - {name: burst, algorithm: token_bucket, unit: second,\n"
    "             requests_per_unit: 10, burst: 20}\n"
    "          - {name: hourly, algorithm: sliding_log, unit: hour,\n"
    "             requests_per_unit: 50}\n"
    "  - key: blocked\n"
    "    rate_limit: {unit: second, requests_per_unit: 0}\n"
    "  - key: free\n"
    "    rate_limit: {unlimited: true}\n"
    "  - key: trial\n"
    "    shadow_mode: true\n"
    "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
    "  - key: path\n"
    "    value: '/v1/*/x*y'\n"
    "    rate_limit: {unit: minute, requests_per_unit: 3}\n";

static sv_server srv;
static sv_worker worker;

static void setup(void)
{
    sl_rules *rules;
    char err[256];
    if (sl_rules_load_buffer("fuzz.yaml", rules_text, sizeof(rules_text) - 1,
                             NULL, &rules, err, sizeof(err)) != 0)
        abort();
    sd_config dc = {.store_bytes = 1 << 20};
    if (sd_engine_new(&dc, &srv.engine, err, sizeof(err)) != 0)
        abort();
    srv.store = sd_engine_memory(srv.engine);
    if ((srv.current = sv_rules_new(rules)) == NULL)
        abort();
    atomic_fetch_add(&srv.current->refs, 1);
    /* The caps of `sluice serve` by default (src/settings/table.c). */
    srv.cfg = (sv_config){.max_body_bytes = 65536,
                          .max_header_bytes = 8192,
                          .max_descriptors = SV_MAX_DESCRIPTORS,
                          .max_entries = 16};
    srv.workers = &worker;
    srv.n_workers = 1;
    pthread_mutex_init(&srv.reload_lock, NULL);
    worker.server = &srv;
    worker.rules = srv.current;
    worker.now_stale = 1;
    if ((worker.dec =
             sd_thread_new(srv.engine, NULL, 0, &worker.stats.store)) == NULL)
        abort();
    pthread_mutex_init(&worker.series_lock, NULL);
}

#endif
