/*
 * settings.h - every setting of `sluice serve` and `sluice proxy` in one
 * table (table.c): its flag, its config-file key, the kind of value it
 * takes with its bounds, its default and its --help line.  settings.c
 * reads the command line and the config file through the table, each
 * value with the validators of value.h, and prints --help from it.  So a
 * setting is named, bounded, defaulted and explained once, and its flag
 * and its key cannot drift apart.
 */
#ifndef ST_SETTINGS_H
#define ST_SETTINGS_H

#include <stdio.h>

#include "proxy/proxy.h"
#include "rules/rules_internal.h"

/* The commands, as the mask of the rows each one reads. */
#define ST_SET_SERVE 1u
#define ST_SET_PROXY 2u

typedef enum st_set_kind {
    ST_SET_PATH,     /* a path: from a file, a relative one is the file's
                        directory's; into a const char * kept by the
                        settings, or an owned char * of the px_config */
    ST_SET_INT,      /* a whole number in [min, max] into an int */
    ST_SET_SIZE,     /* the same into a size_t */
    ST_SET_MS,       /* a duration of at least 1ms into uint64_t ms */
    ST_SET_BOOL,     /* a YAML boolean into an int */
    ST_SET_ENUM,     /* one of `names`, its index into an int */
    ST_SET_LISTEN,   /* HOST:PORT into an sv_addr */
    ST_SET_STORE,    /* memory, or a Redis URL into redis_url */
    ST_SET_UPSTREAM, /* http[s]://HOST:PORT, resolved (px_set_upstream) */
    ST_SET_HOST,     /* a host name or an IP address (PX: an owned char *) */
    ST_SET_URL_PATH, /* "" or a path from '/', into an owned char * */
    ST_SET_HTTP_URL, /* http[s]://HOST:PORT[/path], into a const char * */
    ST_SET_SECTION,  /* a YAML structure that `section` reads */
    ST_SET_CONFIG,   /* --config FILE */
    ST_SET_HELP      /* --help */
} st_set_kind;

/* The struct a row's offset is into. */
typedef enum st_set_target {
    ST_SET_NOWHERE,
    ST_SET_SRV, /* sv_config */
    ST_SET_PX   /* px_config */
} st_set_target;

/* Reads a section of the proxy file into cfg: 0, or -1 with
 * "FILE:LINE:COL: message" in err. */
typedef int (*st_set_section_fn)(px_config *cfg, const char *file,
                                 const sl__ynode *value, char *err,
                                 size_t errlen);

typedef struct st_setting {
    const char *flag;  /* "max-body-bytes" is --max-body-bytes; NULL: none */
    const char *key;   /* in the config file; "timeouts.connect" is
                          `connect` in the mapping `timeouts`; NULL: none */
    const char *arg;   /* what --help calls the value: "N", "HOST:PORT" */
    unsigned commands; /* the ST_SET_SERVE and ST_SET_PROXY that read it */
    st_set_kind kind;
    st_set_target target;
    size_t offset;             /* of the field in the target */
    uint64_t min, max;         /* INT, SIZE */
    const char *zero;          /* INT: a word for 0 ("auto"), or NULL */
    const char *const *names;  /* ENUM: the words, NULL-terminated */
    const char *def;           /* the default as a user would write it;
                                  NULL: the field stays zero */
    const char *help;          /* --help's text; '\n' starts a line */
    /* PATH: the flag of the setting without which this one means nothing
     * (a certificate's key), or NULL; given alone, the command stops. */
    const char *needs;
    st_set_section_fn section; /* SECTION */
} st_setting;

/* In --help's order. */
extern const st_setting st_settings_table[];
extern const size_t st_settings_count;

/* One command's settings being read.  srv's strings point into `kept`,
 * which st_settings_release frees: release s only once srv is done with. */
typedef struct st_settings {
    unsigned command;   /* ST_SET_SERVE or ST_SET_PROXY */
    sv_config *srv;     /* borrowed */
    px_config *px;      /* borrowed; the proxy's own, NULL for serve */
    const char *config; /* --config FILE, borrowed from argv; or NULL */
    char **kept;
    size_t n_kept, cap_kept;
} st_settings;

/* st_settings_args' results besides 0. */
#define ST_SET_HELP_ASKED 1 /* --help came: print the usage, exit 0 */
#define ST_SET_EFILE (-1)   /* err says what; exit 2 */
#define ST_SET_EUSAGE (-2)  /* err (maybe "") says what; the usage follows */

/* Zeroes srv, points s at srv and px (a config from px_config_new, or
 * NULL unless command is the proxy) and gives the command's settings their
 * defaults.  0, or ST_SET_EFILE with err (out of memory).  Release s in
 * either case. */
int st_settings_init(st_settings *s, unsigned command, sv_config *srv,
                     px_config *px, char *err, size_t errlen);
void st_settings_release(st_settings *s);

/* Reads the command line (argv[0] the command's name): --config's file
 * first, then each flag in order, so that a flag overrides the file
 * wherever it stands.  0, ST_SET_HELP_ASKED, ST_SET_EFILE or
 * ST_SET_EUSAGE (a bad flag or value, an argument left over). */
int st_settings_args(st_settings *s, int argc, char **argv, char *err,
                     size_t errlen);

/* The flags' lines of the command's --help. */
void st_settings_help(unsigned command, FILE *out);

/* What a command makes of reading its settings (rc and err as
 * st_settings_args left them, or ST_SET_EUSAGE with "" for a setting it
 * needs but lacks): prints the usage and "PROG: err" as rc calls for and
 * returns the exit status (0 for --help, 2), or -1 when the command may
 * run. */
int st_settings_outcome(int rc, const char *err, const char *prog,
                        void (*usage)(FILE *to));

#endif
