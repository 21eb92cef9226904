/*
 * command.c - the Redis protocol's command table: the deciding commands
 * (decide.c) and what real clients send around them on connect and in
 * between (PING, ECHO, INFO, CLIENT, CONFIG GET, COMMAND, SELECT, HELLO,
 * QUIT), answered as Redis answers them so that redis-cli,
 * redis-benchmark, ioredis and the rest connect unchanged.  Anything
 * else is an error naming the command; the connection stays open.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "resp/command.h"
#include "resp/resp_reply.h"

typedef int (*command_fn)(rp_session *s, rp_str *argv, size_t argc,
                          sv_buf *out);

typedef struct command {
    const char *name; /* lower case, as COMMAND lists it */
    int arity;        /* Redis's: n exactly, or -n for at least n */
    command_fn run;
    const char *flags; /* COMMAND's flags, space-separated */
} command;

static int is(const rp_str *a, const char *word)
{
    return a->len == strlen(word) && strncasecmp(a->p, word, a->len) == 0;
}

static int ok(rp_session *s, sv_buf *out)
{
    rp_add_status(out, "OK");
    rp_count(s, 0);
    return RP_REPLIED;
}

static int error(rp_session *s, sv_buf *out, const char *text)
{
    rp_add_error(out, text);
    rp_count(s, 1);
    return RP_REPLIED;
}

/* Redis's wording: "ERR unknown subcommand 'x'. Try CLIENT HELP." */
static int unknown_subcommand(rp_session *s, sv_buf *out, const rp_str *argv,
                              const char *upper_name)
{
    sv_buf_addstr(out, "-ERR unknown subcommand '");
    rp_add_quoted(out, argv[1].p, argv[1].len);
    sv_buf_addstr(out, "'. Try ");
    sv_buf_addstr(out, upper_name);
    sv_buf_addstr(out, " HELP.\r\n");
    rp_count(s, 1);
    return RP_REPLIED;
}

static int cmd_ping(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    if (argc > 2)
        return error(s, out,
                     "ERR wrong number of arguments for 'ping' command");
    if (argc == 2)
        rp_add_bulk(out, argv[1].p, argv[1].len);
    else
        rp_add_status(out, "PONG");
    rp_count(s, 0);
    return RP_REPLIED;
}

static int cmd_echo(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    (void)argc;
    rp_add_bulk(out, argv[1].p, argv[1].len);
    rp_count(s, 0);
    return RP_REPLIED;
}

static int cmd_quit(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    (void)argv;
    (void)argc;
    ok(s, out);
    return RP_CLOSE;
}

static int cmd_select(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    (void)argc;
    /* One keyspace: database 0 is all there is. */
    if (argv[1].len == 1 && argv[1].p[0] == '0')
        return ok(s, out);
    return error(s, out, "ERR DB index is out of range");
}

static int cmd_client(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    if (is(&argv[1], "setinfo") || is(&argv[1], "setname")) {
        /* Accepted and not kept: names are for CLIENT LIST, which sluice
         * does not have. */
        if (argc != (is(&argv[1], "setinfo") ? 4u : 3u))
            return error(s, out,
                         "ERR wrong number of arguments for 'client' command");
        return ok(s, out);
    }
    if (is(&argv[1], "getname")) {
        sv_buf_addstr(out, "$-1\r\n");
        rp_count(s, 0);
        return RP_REPLIED;
    }
    if (is(&argv[1], "id")) {
        rp_add_int(out, (long long)s->id);
        rp_count(s, 0);
        return RP_REPLIED;
    }
    return unknown_subcommand(s, out, argv, "CLIENT");
}

/* redis-benchmark asks for `save` and `appendonly`; nothing is saved. */
static int cmd_config(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    if (!is(&argv[1], "get"))
        return unknown_subcommand(s, out, argv, "CONFIG");
    if (argc < 3)
        return error(s, out,
                     "ERR wrong number of arguments for 'config|get' command");
    size_t n = 0;
    for (size_t i = 2; i < argc; i++)
        n += is(&argv[i], "save") || is(&argv[i], "appendonly");
    rp_add_array(out, (long long)n * 2);
    for (size_t i = 2; i < argc; i++) {
        if (is(&argv[i], "save")) {
            rp_add_bulk(out, "save", 4);
            rp_add_bulk(out, "", 0);
        } else if (is(&argv[i], "appendonly")) {
            rp_add_bulk(out, "appendonly", 10);
            rp_add_bulk(out, "no", 2);
        }
    }
    rp_count(s, 0);
    return RP_REPLIED;
}

static int cmd_hello(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    /* RESP2 only: a client asking for 3 is told so, and stays on 2. */
    if (argc >= 2 && !is(&argv[1], "2"))
        return error(s, out,
                     "NOPROTO sorry, this protocol version is not "
                     "supported");
    rp_add_array(out, 14);
    rp_add_bulk(out, "server", 6);
    rp_add_bulk(out, "sluice", 6);
    rp_add_bulk(out, "version", 7);
    rp_add_bulk(out, SL_VERSION, strlen(SL_VERSION));
    rp_add_bulk(out, "proto", 5);
    rp_add_int(out, 2);
    rp_add_bulk(out, "id", 2);
    rp_add_int(out, (long long)s->id);
    rp_add_bulk(out, "mode", 4);
    rp_add_bulk(out, "standalone", 10);
    rp_add_bulk(out, "role", 4);
    rp_add_bulk(out, "master", 6);
    rp_add_bulk(out, "modules", 7);
    rp_add_array(out, 0);
    rp_count(s, 0);
    return RP_REPLIED;
}

/* What clients read of INFO: ioredis waits for loading:0, and others
 * look at redis_version for what they may send. */
static int cmd_info(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    (void)argv;
    (void)argc;
    char text[512];
    int n = snprintf(
        text, sizeof(text),
        "# Server\r\n"
        "redis_version:7.0.0\r\n"
        "sluice_version:%s\r\n"
        "redis_mode:standalone\r\n"
        "# Clients\r\n"
        "connected_clients:%d\r\n"
        "# Persistence\r\n"
        "loading:0\r\n"
        "# Replication\r\n"
        "role:master\r\n"
        "connected_slaves:0\r\n",
        SL_VERSION,
        atomic_load_explicit(&s->w->server->open_conns, memory_order_relaxed));
    rp_add_bulk(out, text, (size_t)n);
    rp_count(s, 0);
    return RP_REPLIED;
}

static int cmd_throttle(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    return rp_throttle_run(s, RP_CELL, argv, argc, out);
}

static int cmd_gcra(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    return rp_throttle_run(s, RP_GCRA, argv, argc, out);
}

static int cmd_command(rp_session *s, rp_str *argv, size_t argc, sv_buf *out);

/* Arity is checked by rp_run() where it says all; the deciding commands
 * check their own, to word the error as their originals do. */
static const command commands[] = {
    {"cl.throttle", -1, cmd_throttle, "write fast"},
    {"gcra", -1, cmd_gcra, "write fast"},
    {"sluice.check", -1, rp_check_run, "write fast"},
    {"ping", -1, cmd_ping, "fast"},
    {"echo", 2, cmd_echo, "fast"},
    {"info", -1, cmd_info, "loading stale"},
    {"client", -2, cmd_client, "loading stale"},
    {"config", -2, cmd_config, "loading stale"},
    {"command", -1, cmd_command, "loading stale"},
    {"select", 2, cmd_select, "loading stale fast"},
    {"hello", -1, cmd_hello, "noauth fast"},
    {"quit", -1, cmd_quit, "noauth fast"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const command *lookup(const rp_str *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (is(name, commands[i].name))
            return &commands[i];
    return NULL;
}

/* Redis 7's ten fields of COMMAND INFO; key positions only for the
 * commands that name a key. */
static void command_info(const command *c, sv_buf *out)
{
    int keyed =
        strcmp(c->name, "cl.throttle") == 0 || strcmp(c->name, "gcra") == 0;
    rp_add_array(out, 10);
    rp_add_bulk(out, c->name, strlen(c->name));
    rp_add_int(out, c->arity);
    size_t nflags = 1;
    for (const char *f = c->flags; *f; f++)
        nflags += *f == ' ';
    rp_add_array(out, (long long)nflags);
    for (const char *f = c->flags; *f;) {
        size_t len = strcspn(f, " ");
        sv_buf_add(out, "+", 1);
        sv_buf_add(out, f, len);
        sv_buf_add(out, "\r\n", 2);
        f += len + (f[len] == ' ');
    }
    rp_add_int(out, keyed);
    rp_add_int(out, keyed);
    rp_add_int(out, keyed);
    rp_add_array(out, 0); /* ACL categories */
    rp_add_array(out, 0); /* tips */
    rp_add_array(out, 0); /* key specs */
    rp_add_array(out, 0); /* subcommands */
}

static int cmd_command(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    if (argc == 1) {
        rp_add_array(out, N_COMMANDS);
        for (size_t i = 0; i < N_COMMANDS; i++)
            command_info(&commands[i], out);
    } else if (is(&argv[1], "count")) {
        rp_add_int(out, N_COMMANDS);
    } else if (is(&argv[1], "info")) {
        rp_add_array(out, (long long)argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const command *c = lookup(&argv[i]);
            if (c != NULL)
                command_info(c, out);
            else
                sv_buf_addstr(out, "*-1\r\n");
        }
    } else if (is(&argv[1], "docs")) {
        /* No docs: redis-cli then uses the hints it was built with. */
        rp_add_array(out, 0);
    } else {
        return unknown_subcommand(s, out, argv, "COMMAND");
    }
    rp_count(s, 0);
    return RP_REPLIED;
}

static int unknown_command(rp_session *s, const rp_str *argv, size_t argc,
                           sv_buf *out)
{
    /* Redis's wording: the name, then the first arguments quoted. */
    sv_buf_addstr(out, "-ERR unknown command '");
    rp_add_quoted(out, argv[0].p, argv[0].len);
    sv_buf_addstr(out, "', with args beginning with: ");
    for (size_t i = 1; i < argc && i <= 4; i++) {
        sv_buf_add(out, "'", 1);
        rp_add_quoted(out, argv[i].p, argv[i].len);
        sv_buf_add(out, "' ", 2);
    }
    sv_buf_add(out, "\r\n", 2);
    rp_count(s, 1);
    return RP_REPLIED;
}

int rp_run(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    const command *c = lookup(&argv[0]);
    if (c == NULL)
        return unknown_command(s, argv, argc, out);
    if ((c->arity > 0 && argc != (size_t)c->arity) ||
        (c->arity < 0 && argc < (size_t)-c->arity)) {
        rp_add_error_arg(out, "ERR wrong number of arguments for '", c->name,
                         strlen(c->name), "' command");
        rp_count(s, 1);
        return RP_REPLIED;
    }
    s->t0 = uv_hrtime();
    return c->run(s, argv, argc, out);
}
