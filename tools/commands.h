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

#endif
