/*
 * settings.h - every setting of `sluice serve` and `sluice proxy` in one
 * table (table.c): its flag, its config-file key, the kind of value it
 * takes with its bounds, its default and its --help line.  settings.c
 * reads the command line and the config file through the table, each
 * value with the validators of value.h, and prints --help from it.  So a
 * setting is named, bounded, defaulted and explained once, and its flag
 * and its key cannot drift apart.
 */
#ifndef SL_SETTINGS_H
#define SL_SETTINGS_H

#include <stdio.h>

#include "proxy/proxy.h"
#include "rules/rules_internal.h"

/* The commands, as the mask of the rows each one reads. */
#define SL_SET_SERVE 1u
#define SL_SET_PROXY 2u

typedef enum sl_set_kind {
    SL_SET_PATH,     /* a path: from a file, a relative one is the file's
                        directory's */
    SL_SET_INT,      /* a whole number in [min, max] into an int */
    SL_SET_SIZE,     /* the same into a size_t */
    SL_SET_MS,       /* a duration of at least 1ms into uint64_t ms */
    SL_SET_BOOL,     /* a YAML boolean into an int */
    SL_SET_ENUM,     /* one of `names`, its index into an int */
    SL_SET_LISTEN,   /* HOST:PORT into listen_host and listen_port */
    SL_SET_STORE,    /* memory, or a Redis URL into redis_url */
    SL_SET_UPSTREAM, /* http://HOST:PORT, resolved (sl_px_set_upstream) */
    SL_SET_URL_PATH, /* "" or a path from '/', into an owned char * */
    SL_SET_SECTION,  /* a YAML structure that `section` reads */
    SL_SET_CONFIG,   /* --config FILE */
    SL_SET_HELP      /* --help */
} sl_set_kind;

/* The struct a row's offset is into. */
typedef enum sl_set_target {
    SL_SET_NOWHERE,
    SL_SET_SRV, /* sl_srv_config */
    SL_SET_PX   /* sl_px_config */
} sl_set_target;

/* Reads a section of the proxy file into cfg: 0, or -1 with
 * "FILE:LINE:COL: message" in err. */
typedef int (*sl_set_section_fn)(sl_px_config *cfg, const char *file,
                                 const sl__ynode *value, char *err,
                                 size_t errlen);

typedef struct sl_setting {
    const char *flag;  /* "max-body-bytes" is --max-body-bytes; NULL: none */
    const char *key;   /* in the config file; "timeouts.connect" is
                          `connect` in the mapping `timeouts`; NULL: none */
    const char *arg;   /* what --help calls the value: "N", "HOST:PORT" */
    unsigned commands; /* the SL_SET_SERVE and SL_SET_PROXY that read it */
    sl_set_kind kind;
    sl_set_target target;
    size_t offset;             /* of the field in the target */
    uint64_t min, max;         /* INT, SIZE */
    const char *zero;          /* INT: a word for 0 ("auto"), or NULL */
    const char *const *names;  /* ENUM: the words, NULL-terminated */
    const char *def;           /* the default as a user would write it;
                                  NULL: the field stays zero */
    const char *help;          /* --help's text; '\n' starts a line */
    sl_set_section_fn section; /* SECTION */
} sl_setting;

/* In --help's order. */
extern const sl_setting sl_settings_table[];
extern const size_t sl_settings_count;

/* One command's settings being read.  srv's strings point into `kept`,
 * which sl_settings_release frees: release s only once srv is done with. */
typedef struct sl_settings {
    unsigned command;   /* SL_SET_SERVE or SL_SET_PROXY */
    sl_srv_config *srv; /* borrowed */
    sl_px_config *px;   /* borrowed; the proxy's own, NULL for serve */
    const char *config; /* --config FILE, borrowed from argv; or NULL */
    char **kept;
    size_t n_kept, cap_kept;
} sl_settings;

/* sl_settings_args' results besides 0. */
#define SL_SET_HELP_ASKED 1 /* --help came: print the usage, exit 0 */
#define SL_SET_EFILE (-1)   /* err says what; exit 2 */
#define SL_SET_EUSAGE (-2)  /* err (maybe "") says what; the usage follows */

/* Zeroes srv, points s at srv and px (a config from sl_px_config_new, or
 * NULL unless command is the proxy) and gives the command's settings their
 * defaults.  0, or SL_SET_EFILE with err (out of memory).  Release s in
 * either case. */
int sl_settings_init(sl_settings *s, unsigned command, sl_srv_config *srv,
                     sl_px_config *px, char *err, size_t errlen);
void sl_settings_release(sl_settings *s);

/* Reads the command line (argv[0] the command's name): --config's file
 * first, then each flag in order, so that a flag overrides the file
 * wherever it stands.  0, SL_SET_HELP_ASKED, SL_SET_EFILE or
 * SL_SET_EUSAGE (a bad flag or value, an argument left over). */
int sl_settings_args(sl_settings *s, int argc, char **argv, char *err,
                     size_t errlen);

/* The flags' lines of the command's --help. */
void sl_settings_help(unsigned command, FILE *out);

/* What a command makes of reading its settings (rc and err as
 * sl_settings_args left them, or SL_SET_EUSAGE with "" for a setting it
 * needs but lacks): prints the usage and "PROG: err" as rc calls for and
 * returns the exit status (0 for --help, 2), or -1 when the command may
 * run. */
int sl_settings_outcome(int rc, const char *err, const char *prog,
                        void (*usage)(FILE *to));

#endif
