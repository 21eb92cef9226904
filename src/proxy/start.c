/*
 * start.c - starts `sluice proxy`: the proxy's per-thread state and
 * counters, handed to the server's process machinery (sv_server_run) as
 * its front end, so threads, listeners, rules reload, metrics and drain
 * are the server's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/limits.h"
#include "proxy.h"
#include "log/log.h"

int px_proxy_run(const sv_config *server_cfg, px_config *cfg, px_load_fn load,
                 void *load_ctx)
{
    sv_config scfg = *server_cfg;
    scfg.fds_per_thread = cfg->pool_max; /* idle upstream connections */
    if (scfg.threads <= 0) {
        /* Resolved here: the per-thread state is sized before start. */
        uv_cpu_info_t *info;
        int n = 0;
        if (uv_cpu_info(&info, &n) == 0)
            uv_free_cpu_info(info, n);
        scfg.threads = n > 0 ? n : 1;
    }
    /* Static: large (the slot names), and one proxy per process. */
    static px_proxy px;
    px.n_workers = scfg.threads;
    px.load = load;
    px.load_ctx = load_ctx;
    sl__log(SL__LOG_INFO, NULL, "proxying to %s (%zu routes)", cfg->upstream,
            cfg->n_routes);
    px_warn_insecure(cfg);
    /* One more of each for the control thread, whose index follows the
     * client-facing ones' (it closes its idle state like them). */
    size_t n_threads = (size_t)scfg.threads + 1;
    size_t n_stats = n_threads * (PX_MAX_SLOTS + 1);
    size_t n_ad = n_threads * PX_AD_MAX;
    int published = px_reload_init(&px, cfg) == 0;
    px.workers = calloc(n_threads, sizeof(*px.workers));
    px.stats = aligned_alloc(64, n_stats * sizeof(*px.stats));
    px.ad = aligned_alloc(64, n_ad * sizeof(*px.ad));
    int status = 1;
    char err[300];
    if (!published || px.workers == NULL || px.stats == NULL || px.ad == NULL) {
        sl__log(SL__LOG_ERROR, "proxy", "out of memory");
    } else if (ad_door_add(&scfg, err, sizeof(err)) != 0 ||
               ad_poll_init(&scfg, err, sizeof(err)) != 0) {
        sl__log(SL__LOG_ERROR, "proxy", "%s", err);
        status = 2;
    } else {
        memset(px.stats, 0, n_stats * sizeof(*px.stats));
        memset(px.ad, 0, n_ad * sizeof(*px.ad));
        /* The control thread keeps the runtime limits (overrides) in
         * step, serves the admin API, and runs the adaptive controller
         * (control.c). */
        scfg.control = 1;
        scfg.control_start = px_control_start;
        scfg.control_stop = px_control_stop;
        scfg.control_metrics = px_control_metrics;
        const sv_frontend frontend = {.accept = px_client_accept,
                                      .close_idle = px_close_idle,
                                      .reload = px_reload,
                                      .ctx = &px};
        scfg.frontend = &frontend;
        scfg.plane = &sv_limits_plane;
        if (scfg.metrics_listen.host != NULL)
            scfg.doors[scfg.n_doors++] = (sv_door){
                "metrics",         scfg.metrics_listen,   0,
                px_metrics_accept, px_metrics_close_idle, scfg.metrics_tls};
        status = sv_server_run(&scfg);
    }
    px_reload_release(&px);
    for (int i = 0; px.workers != NULL && i <= px.n_workers; i++) {
        px_decision_free(px.workers[i].scratch);
        px_tls_forget(&px.workers[i]);
        free(px.workers[i].ad_slot);
    }
    free(px.workers);
    free(px.stats);
    free(px.ad);
    return status;
}
