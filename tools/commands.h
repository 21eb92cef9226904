/*
 * commands.h - the subcommands of the `sluice` program, one file each.
 * Each returns the process exit status: 0 success, 1 failure, 2 usage.
 */
#ifndef SL_COMMANDS_H
#define SL_COMMANDS_H

int sl_cmd_replay(int argc, char **argv);
int sl_cmd_demo(int argc, char **argv);
int sl_cmd_validate(int argc, char **argv);
int sl_cmd_serve(int argc, char **argv);
int sl_cmd_proxy(int argc, char **argv);

/* serve.c, shared with proxy.c: the server's defaults, and one of its
 * settings by flag name ("max-body-bytes"): 0, -1 after printing why, or
 * -2 for a name it does not know.  `where` names the source in messages,
 * which start with `command` ("sluice proxy"). */
struct sl_srv_config;
void sl_serve_defaults(struct sl_srv_config *cfg, const char *command);
int sl_serve_setting(const char *flag, const char *where, const char *value,
                     struct sl_srv_config *cfg);

#endif
