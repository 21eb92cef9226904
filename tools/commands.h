/*
 * commands.h - the subcommands of the `sluice` program, one file each.
 * Each returns the process exit status: 0 success, 1 failure, 2 usage.
 */
#ifndef CMD_COMMANDS_H
#define CMD_COMMANDS_H

int cmd_replay(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_limits(int argc, char **argv);
int cmd_advisor(int argc, char **argv);
int cmd_lab(int argc, char **argv);

#endif
