/*
 * serve.c - `sluice serve`: its settings, read from the flags and the
 * config file through the settings table (src/settings/), then the
 * rate-limit decision daemon (src/server/, docs/server.md).
 */
#include <stdio.h>

#include "api/api.h"
#include "commands.h"
#include "control/admin.h"
#include "control/limits.h"
#include "log/log.h"
#include "grpc/grpc.h"
#include "resp/resp.h"
#include "api/routes.h"
#include "http/http_conn.h"
#include "runtime/worker.h"
#include "settings/settings.h"

void cmd_serve_usage(FILE *to)
{
    fputs("usage: sluice serve --rules PATH [OPTIONS]\n"
          "\n"
          "Serves rate-limit decisions over HTTP/1.1 (docs/server.md),\n"
          "the Redis protocol with --resp-listen (docs/resp.md) and\n"
          "envoy's Rate Limit Service over gRPC with --grpc-listen.\n",
          to);
    st_settings_help(ST_SET_SERVE, to);
    fputs("Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n", to);
}

int cmd_serve(int argc, char **argv)
{
    sv_config cfg;
    st_settings settings;
    char err[700];
    int rc =
        st_settings_init(&settings, ST_SET_SERVE, &cfg, NULL, err, sizeof(err));
    if (rc == 0)
        rc = st_settings_args(&settings, argc, argv, err, sizeof(err));
    if (rc == 0 && cfg.rules_path == NULL)
        rc = ST_SET_EUSAGE; /* err is "" */
    int status = st_settings_outcome(rc, err, "sluice serve", cmd_serve_usage);
    if (status < 0 && cfg.resp_listen.host != NULL)
        cfg.doors[cfg.n_doors++] = (sv_door){
            "resp", cfg.resp_listen, 0, rp_accept, rp_close_idle, cfg.resp_tls};
    if (status < 0 && cfg.grpc_listen.host != NULL)
        cfg.doors[cfg.n_doors++] = (sv_door){
            "grpc", cfg.grpc_listen, 0, gr_accept, gr_close_idle, cfg.grpc_tls};
    /* On the control thread, as the admin API: scrapes stay off the
     * threads that answer clients. */
    if (status < 0 && cfg.metrics_listen.host != NULL)
        cfg.doors[cfg.n_doors++] = (sv_door){
            "metrics",         cfg.metrics_listen,    1,
            sv_metrics_accept, sv_metrics_close_idle, cfg.metrics_tls};
    if (status < 0 && (ad_door_add(&cfg, err, sizeof(err)) != 0 ||
                       ad_poll_init(&cfg, err, sizeof(err)) != 0)) {
        fprintf(stderr, "sluice serve: %s\n", err);
        status = 2;
    }
    if (status < 0)
        sl__log_setup(cfg.log_json, cfg.log_level);
    /* The control thread keeps the runtime limits (overrides) in step,
     * and polls the advisor. */
    cfg.frontend = &sv_api_frontend;
    cfg.plane = &sv_limits_plane;
    cfg.control = 1;
    cfg.control_start = ad_poll_start;
    cfg.control_stop = ad_poll_stop;
    cfg.control_metrics = ad_poll_metrics;
    if (status < 0)
        status = sv_server_run(&cfg);
    st_settings_release(&settings);
    return status;
}
