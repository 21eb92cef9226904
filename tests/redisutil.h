/*
 * redisutil.h - a real redis-server for the tests that need one: started
 * on a free loopback port (redis has no "--port 0") and a unix socket in
 * a fresh temporary directory, with no persistence, and stopped (or
 * killed, paused and restarted) by the test.  Plus an admin connection to
 * look at what the store wrote.
 *
 * Everything is static: each test program includes this once.
 */
#ifndef SL_REDISUTIL_H
#define SL_REDISUTIL_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

typedef struct tu_redis {
    pid_t pid;
    int port;
    char dir[128];
    char sock[192];
    char url[256];
    int cluster_node_timeout_ms; /* > 0: start a Cluster node */
    /* 1: FUNCTION renamed away, as on a server whose operator refuses
     * Redis Functions; on a Cluster node FCALL too, as on Redis 6. */
    int no_functions;
    /* More arguments (NULL-terminated; NULL: none), e.g. TLS's. */
    const char *const *extra;
} tu_redis;

/* A port no one listens on now: bind port 0 and ask which we got.  Another
 * process could take it before redis does; redis then fails to start and
 * tu_redis_start says so. */
static inline int tu_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A connection to the test's server, or NULL if it does not answer. */
static inline redisContext *tu_redis_admin(const tu_redis *r)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c == NULL || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

static inline void tu_redis_new_port(tu_redis *r)
{
    r->port = tu_free_port();
    snprintf(r->url, sizeof(r->url), "redis://127.0.0.1:%d", r->port);
}

static inline int tu_redis_start_once(tu_redis *r);

/* Runs redis-server on r->port (chosen on the first start, kept across
 * restarts) and waits until it answers PING.  0 or -1.  A server that
 * exits at once most likely lost a port to another test between
 * tu_free_port() and its bind (tests run in parallel): it is started
 * again, on new ports if this is its first start (a Cluster node's bus
 * port is new each time). */
static inline int tu_redis_start(tu_redis *r)
{
    int first = r->dir[0] == '\0', rc = -1;
    for (int tries = 0; tries < 3; tries++) {
        if ((rc = tu_redis_start_once(r)) == 0 || r->pid != 0 ||
            r->dir[0] == '\0')
            return rc; /* up, or hung (not a port), or no directory */
        if (first)
            tu_redis_new_port(r);
    }
    return rc;
}

static inline int tu_redis_start_once(tu_redis *r)
{
    char port[16];
    if (r->dir[0] == '\0') {
        snprintf(r->dir, sizeof(r->dir), "/tmp/sl_redis_XXXXXX");
        if (mkdtemp(r->dir) == NULL) {
            r->dir[0] = '\0';
            return -1;
        }
        snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
        tu_redis_new_port(r);
    }
    snprintf(port, sizeof(port), "%d", r->port);
    r->pid = fork();
    if (r->pid < 0)
        return -1;
    if (r->pid == 0) {
        char log[192];
        int fd;
        snprintf(log, sizeof(log), "%s/redis.log", r->dir);
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        const char *argv[64];
        char timeout[16], bus[16];
        int n = 0;
#define TU_ARGS(...)                                                           \
    do {                                                                       \
        const char *a_[] = {__VA_ARGS__};                                      \
        for (size_t i_ = 0; i_ < sizeof(a_) / sizeof(a_[0]); i_++)             \
            argv[n++] = a_[i_];                                                \
    } while (0)
        TU_ARGS("redis-server", "--port", port, "--bind", "127.0.0.1", "--save",
                "", "--appendonly", "no", "--dir", r->dir, "--daemonize", "no",
                "--rename-command", "FUNCTION",
                r->no_functions ? "" : "FUNCTION");
        if (r->cluster_node_timeout_ms > 0) {
            /* A Cluster node: its config file lives in its directory, its
             * bus on a free port of its own (the default, port + 10000,
             * may be taken or past 65535). */
            snprintf(timeout, sizeof(timeout), "%d",
                     r->cluster_node_timeout_ms);
            snprintf(bus, sizeof(bus), "%d", tu_free_port());
            TU_ARGS("--cluster-enabled", "yes", "--cluster-config-file",
                    "nodes.conf", "--cluster-node-timeout", timeout,
                    "--cluster-port", bus, "--repl-diskless-sync-delay", "0",
                    "--cluster-replica-validity-factor", "0",
                    "--rename-command", "FCALL",
                    r->no_functions ? "" : "FCALL");
        } else {
            TU_ARGS("--unixsocket", r->sock, "--unixsocketperm", "700");
        }
#undef TU_ARGS
        for (int i = 0; r->extra != NULL && r->extra[i] != NULL && n < 63; i++)
            argv[n++] = r->extra[i];
        argv[n] = NULL;
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* 10 s */
        redisContext *c = tu_redis_admin(r);
        if (c != NULL) {
            /* Up: PONG, or NOAUTH from a server with a password. */
            redisReply *rep = redisCommand(c, "PING");
            int ok = rep != NULL && (rep->type == REDIS_REPLY_STATUS ||
                                     (rep->type == REDIS_REPLY_ERROR &&
                                      strncmp(rep->str, "NOAUTH", 6) == 0));
            if (rep)
                freeReplyObject(rep);
            redisFree(c);
            /* What answered may be another test's server, ours about to
             * exit for want of the port: ours must live on. */
            if (ok) {
                tu_sleep_ms(50);
                if (waitpid(r->pid, NULL, WNOHANG) == 0)
                    return 0;
                fprintf(stderr, "redis-server exited; see %s/redis.log\n",
                        r->dir);
                r->pid = 0;
                return -1;
            }
        }
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            fprintf(stderr, "redis-server exited; see %s/redis.log\n", r->dir);
            r->pid = 0;
            return -1;
        }
        tu_sleep_ms(50);
    }
    return -1;
}

/* Stops the server with sig (SIGTERM: cleanly; SIGKILL: dead). */
static inline void tu_redis_stop(tu_redis *r, int sig)
{
    if (r->pid > 0) {
        kill(r->pid, sig);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}

/* Stops the server and removes its directory. */
static inline void tu_redis_cleanup(tu_redis *r)
{
    char path[256];
    tu_redis_stop(r, SIGTERM);
    if (r->dir[0] == '\0')
        return;
    snprintf(path, sizeof(path), "%s/redis.log", r->dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/nodes.conf", r->dir);
    unlink(path);
    /* Cluster nodes without replicas were seen to leave one at shutdown. */
    snprintf(path, sizeof(path), "%s/dump.rdb", r->dir);
    unlink(path);
    unlink(r->sock);
    rmdir(r->dir);
}

/* An integer reply of a command on the admin connection; -999 on error. */
static inline long long tu_redis_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *rep;
    long long v = -999;
    va_start(ap, fmt);
    rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (rep != NULL && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

/* How many times the server ran cmd ("fcall", "evalsha", "eval") since
 * its start or CONFIG RESETSTAT (INFO commandstats). */
static inline long long tu_redis_calls(redisContext *c, const char *cmd)
{
    redisReply *rep = redisCommand(c, "INFO commandstats");
    char field[64];
    const char *p;
    long long n = 0;
    snprintf(field, sizeof(field), "cmdstat_%s:calls=", cmd);
    if (rep != NULL && rep->type == REDIS_REPLY_STRING &&
        (p = strstr(rep->str, field)) != NULL)
        n = atoll(p + strlen(field));
    if (rep)
        freeReplyObject(rep);
    return n;
}

/* 1 if the server has the library named lib (FUNCTION LIST). */
static inline int tu_redis_has_library(redisContext *c, const char *lib)
{
    redisReply *rep = redisCommand(c, "FUNCTION LIST LIBRARYNAME %s", lib);
    int has =
        rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
    if (rep)
        freeReplyObject(rep);
    return has;
}

/* Runs a command whose reply does not matter (FLUSHALL, SCRIPT FLUSH). */
static inline int tu_redis_do(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *rep;
    int ok;
    va_start(ap, fmt);
    rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    return ok ? 0 : -1;
}

/* The one server of a test program that needs one, started and stopped
 * by cmocka's group fixtures below. */
static inline tu_redis *tu_server(void)
{
    static tu_redis server;
    return &server;
}

/* A Redis store on tu_server(), its keys under prefix; an extra TTL so
 * that state outlives the gap between a trace's manual clock and real
 * time.  Any error fails the test. */
static inline sl_store *tu_redis_store(const char *prefix)
{
    sl_redis_options o = {.size = sizeof(sl_redis_options),
                          .url = tu_server()->url,
                          .extra_ttl_ms = 600000,
                          .key_prefix = prefix};
    sl_store *st = NULL;
    char err[256] = "";
    int rc = sl_redis_store_new(&o, &st, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_redis_store_new: %s (%s)", sl_err_name(rc), err);
    return st;
}

static inline int tu_redis_group_setup(void **state)
{
    (void)state;
    if (tu_redis_start(tu_server()) != 0) {
        fprintf(stderr, "cannot start redis-server (scripts/deps.sh "
                        "installs it)\n");
        return -1;
    }
    return 0;
}

static inline int tu_redis_group_teardown(void **state)
{
    (void)state;
    tu_redis_cleanup(tu_server());
    return 0;
}

#endif /* SL_REDISUTIL_H */
