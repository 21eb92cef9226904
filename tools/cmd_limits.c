/*
 * limits.c - `sluice limits`: the admin API of a running `sluice serve
 * --admin-listen` from the shell (docs/admin.md): the limits in force,
 * the overrides and their log, and overrides set and deleted.  `set`
 * reads the override's version first and sends it back (If-Match, or
 * If-None-Match: * when there is none), so it never overwrites a change
 * it has not seen: a race is reported, not lost.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http/http_client.h"
#include "commands.h"

#define TIMEOUT_MS 5000

void cmd_limits_usage(FILE *to)
{
    fputs("usage: sluice limits [--admin URL] [--token-file PATH] [--json] "
          "COMMAND\n"
          "\n"
          "The admin API of sluice serve --admin-listen (docs/admin.md).\n"
          "\n"
          "  list                       every rule's limit in force and as "
          "loaded\n"
          "  overrides                  the overrides and their state\n"
          "  set RULE REQUESTS [--burst N] [--ttl D] [--reason TEXT]\n"
          "                             override a rule's requests_per_unit\n"
          "  delete RULE                remove the rule's override\n"
          "  events [--after SEQ]       the change log\n"
          "\n"
          "  --admin URL        the admin listener (http://127.0.0.1:9090)\n"
          "  --token-file PATH  the bearer token; else $SLUICE_ADMIN_TOKEN\n"
          "  --source S         manual (default) or advisor\n"
          "  --json             print the API's JSON as it is\n"
          "Exit status: 0 done, 1 refused or failed, 2 usage.\n",
          to);
}

typedef struct opts {
    const char *admin, *token_file, *burst, *ttl, *reason, *source, *after;
    int json;
} opts;

/* The token: the file's first line, or the environment's. */
static int read_token(const opts *o, char *tok, size_t room)
{
    const char *env = getenv("SLUICE_ADMIN_TOKEN");
    tok[0] = '\0';
    if (o->token_file != NULL) {
        FILE *f = fopen(o->token_file, "r");
        if (f == NULL) {
            fprintf(stderr, "sluice limits: %s: cannot open\n", o->token_file);
            return -1;
        }
        size_t n = fread(tok, 1, room - 1, f);
        fclose(f);
        tok[n] = '\0';
        tok[strcspn(tok, "\r\n")] = '\0';
    } else if (env != NULL) {
        snprintf(tok, room, "%s", env);
    }
    return 0;
}

/* One call: 0 with the status and JSON body in *status and *body (NULL
 * when none), or -1 (said on stderr). */
static int call(const opts *o, const char *token, const char *method,
                const char *path, const char *extra, const char *body,
                int *status, json_t **json, char *etag, size_t etag_room)
{
    static const char *const capture[] = {"ETag", NULL};
    char auth[600], err[256];
    const char *headers[3] = {NULL, NULL, NULL};
    size_t n = 0;
    if (token[0] != '\0') {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        headers[n++] = auth;
    }
    if (extra != NULL)
        headers[n++] = extra;
    ah_response r;
    ah_response_init(&r, capture);
    int rc =
        ah_request(o->admin, method, path, headers, body,
                   body ? strlen(body) : 0, TIMEOUT_MS, &r, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "sluice limits: %s\n", err);
        return -1;
    }
    *status = r.status;
    *json = r.body_len ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    const char *tag = ah_response_header(&r, "ETag");
    if (etag != NULL)
        snprintf(etag, etag_room, "%s", tag ? tag : "");
    ah_response_release(&r);
    return 0;
}

/* A refusal's message, as the API words it. */
static int refused(int status, json_t *body)
{
    const char *code = json_string_value(
        json_object_get(json_object_get(body, "error"), "code"));
    const char *msg = json_string_value(
        json_object_get(json_object_get(body, "error"), "message"));
    fprintf(stderr, "sluice limits: %d %s: %s\n", status, code ? code : "",
            msg ? msg : "no message");
    json_decref(body);
    return 1;
}

static void print_json(json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2));
    if (text != NULL)
        puts(text);
    free(text);
}

static int list(const opts *o, const char *token, const char *path,
                const char *key)
{
    int status;
    json_t *body;
    if (call(o, token, "GET", path, NULL, NULL, &status, &body, NULL, 0))
        return 1;
    if (status != 200)
        return refused(status, body);
    if (o->json) {
        print_json(body);
        json_decref(body);
        return 0;
    }
    size_t i;
    json_t *x;
    if (strcmp(key, "limits") == 0) {
        printf("%-40s %-8s %12s %12s\n", "RULE", "SOURCE", "IN FORCE", "BASE");
        json_array_foreach(json_object_get(body, key), i, x) printf(
            "%-40s %-8s %12lld %12lld\n",
            json_string_value(json_object_get(x, "id")),
            json_string_value(json_object_get(x, "source")),
            json_integer_value(json_object_get(x, "requests_per_unit")),
            json_integer_value(json_object_get(x, "base_requests_per_unit")));
    } else if (strcmp(key, "overrides") == 0) {
        printf("%-40s %-8s %-9s %10s %8s  %s\n", "RULE", "SOURCE", "STATE",
               "REQUESTS", "VERSION", "REASON");
        json_array_foreach(json_object_get(body, key), i, x)
            printf("%-40s %-8s %-9s %10lld %8lld  %s\n",
                   json_string_value(json_object_get(x, "rule")),
                   json_string_value(json_object_get(x, "source")),
                   json_string_value(json_object_get(x, "state")),
                   json_integer_value(json_object_get(x, "requests_per_unit")),
                   json_integer_value(json_object_get(x, "version")),
                   json_string_value(json_object_get(x, "reason")));
    } else {
        json_array_foreach(json_object_get(body, key), i, x)
        {
            char *line = json_dumps(x, JSON_COMPACT);
            if (line != NULL)
                puts(line);
            free(line);
        }
    }
    json_decref(body);
    return 0;
}

/* The path of a rule's override: the id percent-encoded. */
static void override_path(const opts *o, const char *rule, char *path,
                          size_t room)
{
    size_t n = (size_t)snprintf(path, room, "/admin/v1/overrides/");
    for (const unsigned char *p = (const unsigned char *)rule;
         *p && n + 4 < room; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~", *p))
            path[n++] = (char)*p;
        else
            n += (size_t)snprintf(path + n, room - n, "%%%02X", *p);
    }
    path[n] = '\0';
    snprintf(path + n, room - n, "?source=%s",
             o->source ? o->source : "manual");
}

static int write_one(const opts *o, const char *token, const char *rule,
                     const char *requests)
{
    char path[1600], etag[64], precond[96];
    int status;
    json_t *body;
    override_path(o, rule, path, sizeof(path));
    if (call(o, token, "GET", path, NULL, NULL, &status, &body, etag,
             sizeof(etag)))
        return 1;
    if (status != 200 && status != 404)
        return refused(status, body);
    json_decref(body);
    if (status == 200)
        snprintf(precond, sizeof(precond), "If-Match: %s", etag);
    else
        snprintf(precond, sizeof(precond), "If-None-Match: *");
    char *payload = NULL;
    if (requests != NULL) {
        char *end;
        long long rpu = strtoll(requests, &end, 10);
        json_t *j = json_pack("{s:I}", "requests_per_unit", (json_int_t)rpu);
        if (*end != '\0' || requests[0] == '\0') {
            fprintf(stderr, "sluice limits: REQUESTS: not a number: '%s'\n",
                    requests);
            json_decref(j);
            return 2;
        }
        if (o->burst)
            json_object_set_new(j, "burst",
                                json_integer(strtoll(o->burst, NULL, 10)));
        if (o->ttl)
            json_object_set_new(j, "ttl", json_string(o->ttl));
        if (o->reason)
            json_object_set_new(j, "reason", json_string(o->reason));
        payload = json_dumps(j, JSON_COMPACT);
        json_decref(j);
    } else if (status == 404) {
        fprintf(stderr, "sluice limits: %s: no such override\n", rule);
        return 1;
    }
    int rc = call(o, token, requests ? "PUT" : "DELETE", path, precond, payload,
                  &status, &body, etag, sizeof(etag));
    free(payload);
    if (rc != 0)
        return 1;
    if (status >= 300)
        return refused(status, body);
    if (o->json && body != NULL)
        print_json(body);
    else if (requests != NULL)
        printf("%s: %s requests per unit (version %s)\n", rule, requests, etag);
    else
        printf("%s: override deleted\n", rule);
    json_decref(body);
    return 0;
}

int cmd_limits(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"admin", required_argument, NULL, 'a'},
        {"token-file", required_argument, NULL, 't'},
        {"burst", required_argument, NULL, 'b'},
        {"ttl", required_argument, NULL, 'l'},
        {"reason", required_argument, NULL, 'r'},
        {"source", required_argument, NULL, 's'},
        {"after", required_argument, NULL, 'f'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    opts o = {.admin = "http://127.0.0.1:9090"};
    int c;
    optind = 1;
    /* getopt_long permutes: options may follow the command's words too
     * (set RULE N --ttl 10m). */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            o.admin = optarg;
            break;
        case 't':
            o.token_file = optarg;
            break;
        case 'b':
            o.burst = optarg;
            break;
        case 'l':
            o.ttl = optarg;
            break;
        case 'r':
            o.reason = optarg;
            break;
        case 's':
            o.source = optarg;
            break;
        case 'f':
            o.after = optarg;
            break;
        case 'j':
            o.json = 1;
            break;
        case 'h':
            cmd_limits_usage(stdout);
            return 0;
        default:
            cmd_limits_usage(stderr);
            return 2;
        }
    }
    char **words = argv + optind;
    int n = argc - optind;
    char token[512];
    if (n < 1 || read_token(&o, token, sizeof(token)) != 0) {
        cmd_limits_usage(stderr);
        return 2;
    }
    if (strcmp(words[0], "list") == 0 && n == 1)
        return list(&o, token, "/admin/v1/limits", "limits");
    if (strcmp(words[0], "overrides") == 0 && n == 1)
        return list(&o, token, "/admin/v1/overrides", "overrides");
    if (strcmp(words[0], "events") == 0 && n == 1) {
        char path[64];
        snprintf(path, sizeof(path), "/admin/v1/events?after=%s",
                 o.after ? o.after : "0");
        return list(&o, token, path, "events");
    }
    if (strcmp(words[0], "set") == 0 && n == 3)
        return write_one(&o, token, words[1], words[2]);
    if (strcmp(words[0], "delete") == 0 && n == 2)
        return write_one(&o, token, words[1], NULL);
    cmd_limits_usage(stderr);
    return 2;
}
