/*
 * proxy.c - `sluice proxy`: its settings, read from the flags and the
 * config file through the settings table (src/settings/) into an
 * sl_srv_config (the server's, shared with `sluice serve`) and an
 * sl_px_config (the proxy's own), then the reverse proxy of src/proxy/
 * (docs/proxy.md).
 */
#include <stdio.h>

#include "commands.h"
#include "settings/settings.h"

static void usage(FILE *to)
{
    fputs("usage: sluice proxy --rules PATH --upstream http://HOST:PORT\n"
          "                    [--config FILE] [--listen HOST:PORT] "
          "[OPTIONS]\n"
          "\n"
          "A rate-limiting HTTP/1.1 reverse proxy (docs/proxy.md).\n",
          to);
    sl_settings_help(SL_SET_PROXY, to);
    fputs("Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n", to);
}

/* The command line, kept for reloads. */
typedef struct command_line {
    int argc;
    char **argv;
} command_line;

/* Reads the config file and the flags over it into srv and a new proxy
 * config; settings holds srv's strings (release it in any case).  0 with
 * *out, or an sl_settings_args result with err. */
static int load(const command_line *cl, sl_settings *settings,
                sl_srv_config *srv, sl_px_config **out, char *err,
                size_t errlen)
{
    sl_px_config *cfg = sl_px_config_new();
    int rc = SL_SET_EFILE;
    *settings = (sl_settings){0};
    if (cfg == NULL)
        snprintf(err, errlen, "out of memory");
    else if ((rc = sl_settings_init(settings, SL_SET_PROXY, srv, cfg, err,
                                    errlen)) == 0 &&
             (rc = sl_settings_args(settings, cl->argc, cl->argv, err,
                                    errlen)) == 0 &&
             cfg->upstream == NULL) {
        snprintf(err, errlen, "no upstream (--upstream or `upstream:`)");
        rc = SL_SET_EFILE;
    }
    if (rc != 0) {
        sl_px_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

/* SIGHUP: the file again, and the flags over it.  Its server settings
 * are checked (a bad one fails the reload) but not applied: the threads,
 * listener and store are made once, at start. */
static int reload(void *ctx, sl_px_config **out, char *err, size_t errlen)
{
    sl_srv_config unused;
    sl_settings settings;
    int rc = load(ctx, &settings, &unused, out, err, errlen);
    sl_settings_release(&settings);
    return rc == 0 ? 0 : -1;
}

int sl_cmd_proxy(int argc, char **argv)
{
    command_line cl = {argc, argv};
    sl_srv_config scfg;
    sl_settings settings;
    sl_px_config *pcfg = NULL;
    char err[700];
    int rc = load(&cl, &settings, &scfg, &pcfg, err, sizeof(err));
    if (rc == 0 && scfg.rules_path == NULL)
        rc = SL_SET_EUSAGE; /* err is "" */
    int status = sl_settings_outcome(rc, err, "sluice proxy", usage);
    if (status < 0) {
        status =
            sl_proxy_run(&scfg, pcfg, settings.config ? reload : NULL, &cl);
        pcfg = NULL; /* the run took it */
    }
    sl_px_config_free(pcfg);
    sl_settings_release(&settings);
    return status;
}
