/*
 * sluice.c - the `sluice` command: dispatches to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "sluice.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} commands[] = {
    {"demo", cmd_demo, "walk through every algorithm on the seed's examples"},
    {"serve", cmd_serve, "serve rate-limit decisions over HTTP"},
    {"proxy", cmd_proxy, "rate-limit as a reverse proxy in front of HTTP"},
    {"limits", cmd_limits, "read and change a running serve's limits"},
    {"replay", cmd_replay, "decide a trace of requests read on stdin"},
    {"validate", cmd_validate, "check rules files without starting anything"},
    {"advisor", cmd_advisor, "recommend limits from forecast demand"},
    {"lab", cmd_lab, "the load lab: run the limits experiment end to end"},
};

static void usage(FILE *to)
{
    fprintf(to, "usage: sluice COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(to, "  %-8s %s\n", commands[i].name, commands[i].what);
    fprintf(to, "  %-8s %s\n", "version", "print the version");
    fprintf(to, "\n'sluice COMMAND --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("sluice %s\n", SL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command: '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
