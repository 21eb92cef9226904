/*
 * wait.c - `sluice wait`: the client side of the Databox paper for shell
 * scripts and cron jobs.  It asks a running sluice serve how long until a
 * limit allows the next call (GET /v1/delay), sleeps that long, records
 * the call (POST /v1/increment) and then runs the command, or exits 0 for
 * the script to make the call itself.
 *
 * Every call run is recorded first, and a record that comes back over the
 * limit (another caller recorded in between) is not run: it counts, so the
 * counter only ever counts more calls than were made, never fewer, and a
 * limit shared by many callers is never exceeded, only sometimes wasted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "http/http_client.h"
#include "commands.h"
#include "sluice.h"

#define MAX_ENTRIES 16
#define EXIT_TOO_LONG 3

void cmd_wait_usage(FILE *to)
{
    fputs("usage: sluice wait [--server URL] LIMIT [--max-wait D] "
          "[-- COMMAND [ARG...]]\n"
          "\n"
          "Waits until a limit of a running sluice serve allows one more\n"
          "call, records it (POST /v1/increment) and runs COMMAND, or\n"
          "exits 0 for the script to make the call.  A call recorded over\n"
          "the limit by a race with another caller is not run: it waits\n"
          "again, so the limit is never exceeded (docs/cli.md).\n"
          "\n"
          "LIMIT, as GET /v1/delay names one (docs/server.md):\n"
          "  --id NAME --interval D --requests N [--algorithm A]\n"
          "                     an ad hoc limit (stepped_window by default)\n"
          "  --id NAME [--domain DOMAIN]\n"
          "                     the rule of that name\n"
          "  --domain DOMAIN --entry KEY=VALUE [--entry KEY=VALUE...]\n"
          "                     the rules matching the descriptor\n"
          "\n"
          "  --server URL       the serve listener (http://127.0.0.1:8080;\n"
          "                     else $SLUICE_SERVER)\n"
          "  --max-wait D       give up rather than wait longer in all\n"
          "                     (default: as long as it takes)\n"
          "  --timeout D        each request to sluice (5s)\n"
          "  --verbose          say on stderr how long it waits\n"
          "Exit status: COMMAND's; without one 0 when recorded; 1 failure\n"
          "(sluice unreachable, an error answer, a limit that never\n"
          "allows); 2 usage; 3 the wait would pass --max-wait (nothing\n"
          "recorded); 127 COMMAND not found.\n",
          to);
}

typedef struct wait_opts {
    const char *server, *id, *interval, *requests, *algorithm, *domain;
    const char *entries[MAX_ENTRIES];
    int n_entries;
    sl_nanos max_wait; /* -1: none */
    int timeout_ms, verbose;
} wait_opts;

/* Appends "name=value", percent-encoded, to the query, after a '&' but
 * for the first. */
static void add_param(FILE *f, int *first, const char *name, const char *value,
                      size_t n)
{
    fprintf(f, "%s%s=", *first ? "" : "&", name);
    *first = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || strchr("-._~", c) != NULL)
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

/* The path of the delay query: "/v1/delay?..." (owned). */
static char *delay_path(const wait_opts *o)
{
    char *q = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&q, &len);
    if (f == NULL)
        return NULL;
    int first = 1;
    fputs("/v1/delay?", f);
#define PARAM(name, v)                                                         \
    if ((v) != NULL)                                                           \
        add_param(f, &first, name, v, strlen(v));
    PARAM("id", o->id);
    PARAM("interval", o->interval);
    PARAM("requests", o->requests);
    PARAM("algorithm", o->algorithm);
    PARAM("domain", o->domain);
#undef PARAM
    for (int i = 0; i < o->n_entries; i++) {
        const char *eq = strchr(o->entries[i], '=');
        add_param(f, &first, "key", o->entries[i],
                  (size_t)(eq - o->entries[i]));
        add_param(f, &first, "value", eq + 1, strlen(eq + 1));
    }
    if (fclose(f) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

/* The increment's body: the same limit, as JSON (owned). */
static char *increment_body(const wait_opts *o)
{
    json_t *b = json_object();
#define FIELD(name, v)                                                         \
    if ((v) != NULL)                                                           \
        json_object_set_new(b, name, json_string(v));
    FIELD("id", o->id);
    FIELD("interval", o->interval);
    FIELD("algorithm", o->algorithm);
    FIELD("domain", o->domain);
#undef FIELD
    if (o->requests != NULL)
        json_object_set_new(b, "requests",
                            json_integer(strtoll(o->requests, NULL, 10)));
    if (o->n_entries > 0) {
        json_t *entries = json_array();
        for (int i = 0; i < o->n_entries; i++) {
            const char *eq = strchr(o->entries[i], '=');
            json_array_append_new(entries,
                                  json_pack("{s:s%,s:s}", "key", o->entries[i],
                                            (size_t)(eq - o->entries[i]),
                                            "value", eq + 1));
        }
        json_object_set_new(b, "entries", entries);
    }
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return text;
}

/* One call to sluice: 0 with *reply (a JSON object, owned), or 1 with
 * the reason printed. */
static int call(const wait_opts *o, const char *method, const char *path,
                const char *body, json_t **reply)
{
    static const char *const json_type[] = {"Content-Type: application/json",
                                            NULL};
    ah_response r;
    char err[256];
    ah_response_init(&r, NULL);
    int rc = ah_request(o->server, method, path, body ? json_type : NULL, body,
                        body ? strlen(body) : 0, o->timeout_ms, &r, err,
                        sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "sluice wait: %s: %s\n", o->server, err);
        ah_response_release(&r);
        return 1;
    }
    json_error_t jerr;
    *reply = json_loads(r.body, 0, &jerr);
    if (r.status != 200 || !json_is_object(*reply)) {
        const char *msg = json_string_value(
            json_object_get(json_object_get(*reply, "error"), "message"));
        fprintf(stderr, "sluice wait: %s %s: %d %s\n", method, path, r.status,
                msg ? msg : r.body);
        json_decref(*reply);
        ah_response_release(&r);
        return 1;
    }
    ah_response_release(&r);
    return 0;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ; /* a signal that did not end the process: sleep the rest */
}

/* Until a call is recorded within the limit: 0, 1 or EXIT_TOO_LONG. */
static int acquire(const wait_opts *o)
{
    char *path = delay_path(o), *body = increment_body(o);
    sl_nanos start = sl_clock_monotonic();
    int status = path && body ? -1 : 1;
    if (status == 1)
        fprintf(stderr, "sluice wait: out of memory\n");
    while (status < 0) {
        json_t *reply;
        if (call(o, "GET", path, NULL, &reply) != 0) {
            status = 1;
            break;
        }
        json_int_t delay =
            json_integer_value(json_object_get(reply, "delay_ms"));
        json_decref(reply);
        if (delay == 0) {
            if (call(o, "POST", "/v1/increment", body, &reply) != 0) {
                status = 1;
                break;
            }
            int over = json_is_true(json_object_get(reply, "over_limit"));
            delay = json_integer_value(json_object_get(reply, "delay_ms"));
            json_decref(reply);
            if (!over) {
                status = 0;
                break;
            }
            if (o->verbose)
                fprintf(stderr,
                        "sluice wait: raced: recorded over the limit\n");
            if (delay == 0)
                delay = 1;
        }
        if (delay < 0) {
            fprintf(stderr, "sluice wait: the limit never allows a call\n");
            status = 1;
            break;
        }
        sl_nanos waited = sl_clock_monotonic() - start;
        if (o->max_wait >= 0 && waited + delay * SL_NS_PER_MS > o->max_wait) {
            fprintf(stderr,
                    "sluice wait: the limit allows the next call in %lld ms, "
                    "past --max-wait\n",
                    (long long)delay);
            status = EXIT_TOO_LONG;
            break;
        }
        if (o->verbose)
            fprintf(stderr, "sluice wait: waiting %lld ms\n", (long long)delay);
        sleep_ms(delay);
    }
    free(path);
    free(body);
    return status;
}

static int parse_duration(const char *flag, const char *v, sl_nanos *out)
{
    if (sl_duration_parse(v, strlen(v), out) != 0 || *out < 0) {
        fprintf(stderr, "sluice wait: %s: invalid duration: '%s'\n", flag, v);
        return -1;
    }
    return 0;
}

int cmd_wait(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"server", required_argument, NULL, 's'},
        {"id", required_argument, NULL, 'i'},
        {"interval", required_argument, NULL, 'n'},
        {"requests", required_argument, NULL, 'r'},
        {"algorithm", required_argument, NULL, 'a'},
        {"domain", required_argument, NULL, 'd'},
        {"entry", required_argument, NULL, 'e'},
        {"max-wait", required_argument, NULL, 'm'},
        {"timeout", required_argument, NULL, 't'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    wait_opts o = {
        .server = getenv("SLUICE_SERVER"), .max_wait = -1, .timeout_ms = 5000};
    sl_nanos timeout;
    int c;
    if (o.server == NULL || o.server[0] == '\0')
        o.server = "http://127.0.0.1:8080";
    optind = 1;
    /* '+': the first word that is not an option starts the command. */
    while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.server = optarg;
            break;
        case 'i':
            o.id = optarg;
            break;
        case 'n':
            o.interval = optarg;
            break;
        case 'r':
            o.requests = optarg;
            break;
        case 'a':
            o.algorithm = optarg;
            break;
        case 'd':
            o.domain = optarg;
            break;
        case 'e':
            if (o.n_entries == MAX_ENTRIES || strchr(optarg, '=') == NULL) {
                fprintf(stderr,
                        "sluice wait: --entry: want KEY=VALUE, at "
                        "most %d\n",
                        MAX_ENTRIES);
                return 2;
            }
            o.entries[o.n_entries++] = optarg;
            break;
        case 'm':
            if (parse_duration("--max-wait", optarg, &o.max_wait) != 0)
                return 2;
            break;
        case 't':
            if (parse_duration("--timeout", optarg, &timeout) != 0 ||
                timeout < SL_NS_PER_MS || timeout > 3600 * SL_NS_PER_SEC)
                return 2;
            o.timeout_ms = (int)(timeout / SL_NS_PER_MS);
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'h':
            cmd_wait_usage(stdout);
            return 0;
        default:
            cmd_wait_usage(stderr);
            return 2;
        }
    }
    if (o.id == NULL && o.domain == NULL) {
        fprintf(stderr, "sluice wait: no limit: give --id or --domain\n");
        cmd_wait_usage(stderr);
        return 2;
    }
    /* The rest of the limit's naming is the server's to check: its
     * answer names the problem (400, docs/server.md). */
    int status = acquire(&o);
    if (status != 0 || optind == argc)
        return status;
    fflush(NULL);
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "sluice wait: %s: cannot run: %m\n", argv[optind]);
    return 127;
}
