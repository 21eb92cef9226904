/*
 * reload.c - the proxy config's hot reload (SIGHUP), in the manner of the
 * rules' (src/runtime/rules_reload.c): the main thread loads a whole new config,
 * publishes it, and each thread adopts it between two requests; the old
 * one is freed when the last thread and connection have let go of it.
 * A config that does not load leaves the old one live.
 *
 * A published config is immutable and reference-counted: the proxy holds
 * the current one, each thread the one it adopted, each client connection
 * the one its request was routed by (a request in flight keeps its route,
 * whatever is published meanwhile).  A thread notices a new generation
 * with one atomic load per request and takes the lock only to adopt it.
 *
 * Route counters outlive configs: each distinct route prefix gets a
 * counter slot when first published, and keeps it, so a route's series
 * go on across reloads (and one removed keeps its last values).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
#include "log/log.h"

/* Gives each route of cfg its counter slot, adding the new prefixes;
 * under px->lock.  0, or -1 when the slots would run out. */
static int assign_slots(px_proxy *px, px_config *cfg, char *err, size_t errlen)
{
    size_t n = atomic_load_explicit(&px->n_slots, memory_order_relaxed);
    size_t added = 0;
    for (size_t i = 0; i < cfg->n_routes; i++) {
        size_t s = 1;
        while (s < n + added &&
               strcmp(px->slot_names[s], cfg->routes[i].prefix))
            s++;
        if (s == n + added) {
            if (s > PX_MAX_SLOTS ||
                (px->slot_names[s] = strdup(cfg->routes[i].prefix)) == NULL) {
                /* Undo: the slots past n were never visible. */
                for (size_t j = n; j < s; j++) {
                    free(px->slot_names[j]);
                    px->slot_names[j] = NULL;
                }
                snprintf(err, errlen,
                         "more than %d distinct route prefixes since start",
                         PX_MAX_SLOTS);
                return -1;
            }
            added++;
        }
        cfg->routes[i].slot = s;
    }
    /* Release: a scrape that sees the count sees the names. */
    atomic_store_explicit(&px->n_slots, n + added, memory_order_release);
    return 0;
}

/* Makes cfg the current config (taking it); 0, or -1 with err. */
static int publish(px_proxy *px, px_config *cfg, char *err, size_t errlen)
{
    pthread_mutex_lock(&px->lock);
    if (assign_slots(px, cfg, err, errlen) != 0) {
        pthread_mutex_unlock(&px->lock);
        return -1;
    }
    atomic_store_explicit(&cfg->refs, 1, memory_order_relaxed);
    px_config *old = px->current;
    px->current = cfg;
    atomic_fetch_add_explicit(&px->generation, 1, memory_order_release);
    pthread_mutex_unlock(&px->lock);
    px_config_unref(old);
    return 0;
}

int px_reload_init(px_proxy *px, px_config *cfg)
{
    char err[128];
    pthread_mutex_init(&px->lock, NULL);
    px->slot_names[0] = strdup("_none_");
    atomic_store_explicit(&px->n_slots, 1, memory_order_relaxed);
    if (px->slot_names[0] == NULL || publish(px, cfg, err, sizeof(err)) != 0) {
        px_config_free(cfg);
        return -1;
    }
    return 0;
}

void px_reload(void *ctx)
{
    px_proxy *px = ctx;
    px_config *cfg = NULL;
    char err[600];
    if (px->load == NULL)
        return;
    if (px->load(px->load_ctx, &cfg, err, sizeof(err)) != 0 ||
        publish(px, cfg, err, sizeof(err)) != 0) {
        if (cfg != NULL)
            px_config_free(cfg);
        atomic_fetch_add_explicit(&px->reloads_failed, 1, memory_order_relaxed);
        sl__log(SL__LOG_ERROR, "proxy", "config reload failed: %s", err);
        return;
    }
    atomic_fetch_add_explicit(&px->reloads_ok, 1, memory_order_relaxed);
    sl__log(SL__LOG_INFO, "proxy", "config reloaded (%zu routes)",
            cfg->n_routes);
    px_warn_insecure(cfg);
}

void px_reload_release(px_proxy *px)
{
    for (int i = 0; px->workers != NULL && i < px->n_workers; i++)
        px_config_unref(px->workers[i].cfg);
    px_config_unref(px->current);
    for (size_t i = 0; i <= PX_MAX_SLOTS; i++)
        free(px->slot_names[i]);
    pthread_mutex_destroy(&px->lock);
}
