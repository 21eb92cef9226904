/*
 * sluice.c - the `sluice` command: dispatches to a subcommand, and makes
 * the man pages from the subcommands' --help texts (`sluice help --man`).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "sluice.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *to);
    const char *what;
} command;

static const command commands[] = {
    {"demo", cmd_demo, cmd_demo_usage,
     "every algorithm on the design chapter's and Databox's examples"},
    {"serve", cmd_serve, cmd_serve_usage,
     "serve rate-limit decisions over HTTP"},
    {"proxy", cmd_proxy, cmd_proxy_usage,
     "rate-limit as a reverse proxy in front of HTTP"},
    {"limits", cmd_limits, cmd_limits_usage,
     "read and change a running serve's limits"},
    {"wait", cmd_wait, cmd_wait_usage,
     "wait until a limit allows a call, record it, run it"},
    {"replay", cmd_replay, cmd_replay_usage,
     "decide a trace of requests read on stdin"},
    {"validate", cmd_validate, cmd_validate_usage,
     "check rules files without starting anything"},
    {"advisor", cmd_advisor, cmd_advisor_usage,
     "recommend limits from forecast demand"},
    {"lab", cmd_lab, cmd_lab_usage,
     "the load lab: run the limits experiment end to end"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *to)
{
    fprintf(to, "usage: sluice COMMAND [OPTIONS]\n"
                "       sluice help [--man] [COMMAND]\n"
                "       sluice --version\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(to, "  %-8s %s\n", commands[i].name, commands[i].what);
    fprintf(to, "  %-8s %s\n", "help", "print a command's help or man page");
    fprintf(to, "  %-8s %s\n", "version", "print the version");
    fprintf(to, "\n'sluice COMMAND --help' describes a command's options;\n"
                "each command's man page is sluice-COMMAND(1), the same "
                "text.\n");
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* sluice(1), or sluice-NAME(1) for c. */
static int man_page(FILE *out, const command *c)
{
    static const char *const top_see[] = {"sluice-serve(1)", "sluice-proxy(1)",
                                          "sluice-wait(1)", NULL};
    static const char *const cmd_see[] = {"sluice(1)", NULL};
    char name[64];
    if (c == NULL)
        return cmd_man_page(out, "sluice", "a rate limiter", usage, top_see);
    snprintf(name, sizeof(name), "sluice-%s", c->name);
    return cmd_man_page(out, name, c->what, c->usage, cmd_see);
}

/* Every page into dir: sluice.1 and sluice-NAME.1. */
static int man_dir(const char *dir)
{
    for (size_t i = 0; i <= N_COMMANDS; i++) {
        const command *c = i < N_COMMANDS ? &commands[i] : NULL;
        char path[4096];
        snprintf(path, sizeof(path), "%s/sluice%s%s.1", dir, c ? "-" : "",
                 c ? c->name : "");
        FILE *f = fopen(path, "w");
        if (f == NULL) {
            fprintf(stderr, "sluice help: %s: %s\n", path, strerror(errno));
            return 1;
        }
        int rc = man_page(f, c);
        if (fclose(f) != 0 || rc != 0) {
            fprintf(stderr, "sluice help: %s: write failed\n", path);
            return 1;
        }
    }
    return 0;
}

/* sluice help [--man] [COMMAND], sluice help --man-dir DIR. */
static int help(int argc, char **argv)
{
    int man = argc > 1 && strcmp(argv[1], "--man") == 0;
    if (argc == 3 && strcmp(argv[1], "--man-dir") == 0)
        return man_dir(argv[2]);
    if (argc > 2 + man) {
        usage(stderr);
        return 2;
    }
    const command *c = NULL;
    if (argc == 2 + man && (c = find(argv[1 + man])) == NULL) {
        fprintf(stderr, "sluice: unknown command: '%s'\n", argv[1 + man]);
        return 2;
    }
    if (man)
        return man_page(stdout, c) == 0 ? 0 : 1;
    (c ? c->usage : usage)(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return help(1, argv + 1);
    if (strcmp(argv[1], "help") == 0)
        return help(argc - 1, argv + 1);
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 ||
                         strcmp(argv[2], "-h") == 0)) {
            printf("usage: sluice version\n"
                   "       sluice --version\n\n"
                   "Prints sluice's version (the library's, sl_version()).\n");
            return 0;
        }
        if (argc > 2) {
            fprintf(stderr, "usage: sluice version\n");
            return 2;
        }
        printf("sluice %s\n", SL_VERSION);
        return 0;
    }
    const command *c = find(argv[1]);
    if (c != NULL)
        return c->run(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command: '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
