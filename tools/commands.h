/*
 * commands.h - the subcommands of the `sluice` program, one file each.
 * Each returns the process exit status: 0 success, 1 failure, 2 usage.
 * Each also has its --help text as a function (cmd_X_usage), the one
 * source of both `sluice X --help` and the man page sluice-X(1) (man.c).
 */
#ifndef CMD_COMMANDS_H
#define CMD_COMMANDS_H

#include <stdio.h>

int cmd_replay(int argc, char **argv);
int cmd_replay_adaptive(int argc, char **argv); /* replay --adaptive */
int cmd_demo(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_limits(int argc, char **argv);
int cmd_advisor(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_lab(int argc, char **argv);

void cmd_replay_usage(FILE *to);
void cmd_demo_usage(FILE *to);
void cmd_validate_usage(FILE *to);
void cmd_serve_usage(FILE *to);
void cmd_proxy_usage(FILE *to);
void cmd_limits_usage(FILE *to);
void cmd_advisor_usage(FILE *to);
void cmd_wait_usage(FILE *to);
void cmd_lab_usage(FILE *to);

/* Writes the man page (roff, man(7) macros) of `name` ("sluice-serve"),
 * summed up by `what`, whose text is what usage prints: the "usage:"
 * lines become its SYNOPSIS and the rest its DESCRIPTION, verbatim.
 * see_also: the pages it names, "sluice(1)" style, NULL-terminated.
 * 0, or -1 when out of memory. */
int cmd_man_page(FILE *out, const char *name, const char *what,
                 void (*usage)(FILE *to), const char *const *see_also);

#endif
