/*
 * proxy.c - `sluice proxy`: its settings, read from the flags and the
 * config file through the settings table (src/settings/) into an
 * sv_config (the server's, shared with `sluice serve`) and an
 * px_config (the proxy's own), then the reverse proxy of src/proxy/
 * (docs/proxy.md).
 */
#include <stdio.h>

#include "commands.h"
#include "log/log.h"
#include "settings/settings.h"

void cmd_proxy_usage(FILE *to)
{
    fputs("usage: sluice proxy --rules PATH --upstream http[s]://HOST:PORT\n"
          "                    [--config FILE] [--listen HOST:PORT] "
          "[OPTIONS]\n"
          "\n"
          "A rate-limiting HTTP/1.1 reverse proxy (docs/proxy.md).\n",
          to);
    st_settings_help(ST_SET_PROXY, to);
    fputs("Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n", to);
}

/* The command line, kept for reloads. */
typedef struct command_line {
    int argc;
    char **argv;
} command_line;

/* Reads the config file and the flags over it into srv and a new proxy
 * config; settings holds srv's strings (release it in any case).  0 with
 * *out, or an st_settings_args result with err. */
static int load(const command_line *cl, st_settings *settings, sv_config *srv,
                px_config **out, char *err, size_t errlen)
{
    px_config *cfg = px_config_new();
    int rc = ST_SET_EFILE;
    *settings = (st_settings){0};
    if (cfg == NULL)
        snprintf(err, errlen, "out of memory");
    else if ((rc = st_settings_init(settings, ST_SET_PROXY, srv, cfg, err,
                                    errlen)) == 0 &&
             (rc = st_settings_args(settings, cl->argc, cl->argv, err,
                                    errlen)) == 0 &&
             cfg->upstream == NULL) {
        snprintf(err, errlen, "no upstream (--upstream or `upstream:`)");
        rc = ST_SET_EFILE;
    } else if (rc == 0 && px_upstream_tls_load(cfg, err, errlen) != 0) {
        rc = ST_SET_EFILE; /* a reload keeps the config in force */
    }
    if (rc != 0) {
        px_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

/* SIGHUP: the file again, and the flags over it.  Its server settings
 * are checked (a bad one fails the reload) but not applied: the threads,
 * listener and store are made once, at start. */
static int reload(void *ctx, px_config **out, char *err, size_t errlen)
{
    sv_config unused;
    st_settings settings;
    int rc = load(ctx, &settings, &unused, out, err, errlen);
    st_settings_release(&settings);
    return rc == 0 ? 0 : -1;
}

int cmd_proxy(int argc, char **argv)
{
    command_line cl = {argc, argv};
    sv_config scfg;
    st_settings settings;
    px_config *pcfg = NULL;
    char err[700];
    int rc = load(&cl, &settings, &scfg, &pcfg, err, sizeof(err));
    if (rc == 0 && scfg.rules_path == NULL)
        rc = ST_SET_EUSAGE; /* err is "" */
    int status = st_settings_outcome(rc, err, "sluice proxy", cmd_proxy_usage);
    if (status < 0)
        sl__log_setup(scfg.log_json, scfg.log_level);
    if (status < 0) {
        status =
            px_proxy_run(&scfg, pcfg, settings.config ? reload : NULL, &cl);
        pcfg = NULL; /* the run took it */
    }
    px_config_free(pcfg);
    st_settings_release(&settings);
    return status;
}
