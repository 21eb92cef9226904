/*
 * serve.c - `sluice serve`: its settings, read from the flags and the
 * config file through the settings table (src/settings/), then the
 * rate-limit decision daemon (src/server/, docs/server.md).
 */
#include <stdio.h>

#include "commands.h"
#include "server/worker.h"
#include "settings/settings.h"

static void usage(FILE *to)
{
    fputs("usage: sluice serve --rules PATH [OPTIONS]\n"
          "\n"
          "Serves rate-limit decisions over HTTP/1.1 (docs/server.md).\n",
          to);
    sl_settings_help(SL_SET_SERVE, to);
    fputs("Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n", to);
}

int sl_cmd_serve(int argc, char **argv)
{
    sl_srv_config cfg;
    sl_settings settings;
    char err[700];
    int rc =
        sl_settings_init(&settings, SL_SET_SERVE, &cfg, NULL, err, sizeof(err));
    if (rc == 0)
        rc = sl_settings_args(&settings, argc, argv, err, sizeof(err));
    if (rc == 0 && cfg.rules_path == NULL)
        rc = SL_SET_EUSAGE; /* err is "" */
    int status = sl_settings_outcome(rc, err, "sluice serve", usage);
    if (status < 0)
        status = sl_server_run(&cfg);
    sl_settings_release(&settings);
    return status;
}
