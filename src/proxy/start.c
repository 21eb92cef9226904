/*
 * start.c - starts `sluice proxy`: the proxy's per-thread state and
 * counters, handed to the server's process machinery (sv_server_run) as
 * its front end, so threads, listeners, rules reload, metrics and drain
 * are the server's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
#include "core/log.h"

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
    size_t n_stats = (size_t)scfg.threads * (PX_MAX_SLOTS + 1);
    int published = px_reload_init(&px, cfg) == 0;
    px.workers = calloc((size_t)scfg.threads, sizeof(*px.workers));
    px.stats = aligned_alloc(64, n_stats * sizeof(*px.stats));
    int status = 1;
    if (!published || px.workers == NULL || px.stats == NULL) {
        sl__log(SL__LOG_ERROR, "proxy", "out of memory");
    } else {
        memset(px.stats, 0, n_stats * sizeof(*px.stats));
        const sv_frontend frontend = {px_client_accept, px_close_idle,
                                      px_reload, &px};
        scfg.frontend = &frontend;
        if (scfg.metrics_listen.host != NULL)
            scfg.doors[scfg.n_doors++] =
                (sv_door){"metrics", scfg.metrics_listen, 0, px_metrics_accept,
                          px_metrics_close_idle};
        status = sv_server_run(&scfg);
    }
    px_reload_release(&px);
    for (int i = 0; px.workers != NULL && i < px.n_workers; i++)
        px_decision_free(px.workers[i].scratch);
    free(px.workers);
    free(px.stats);
    return status;
}
