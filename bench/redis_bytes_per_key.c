/*
 * redis_bytes_per_key.c - what one key costs in Redis, per algorithm:
 * FLUSHALL, INFO memory's used_memory, N checks of cost 1 on N distinct
 * keys (each leaves one key: a string for the buckets and counters, a
 * list of meta and one event for the logs), used_memory again; the
 * difference over N.  10 per day, so that no key expires during the run
 * (keys counts them).  Also the mean time of those checks, each one
 * round trip on loopback with a new key (the first write of a key), from
 * one thread, and the server's own time per script call (INFO
 * commandstats).  bench/redis_bytes_per_key.sh starts the server.
 *
 *   redis_bytes_per_key URL [N]     one JSON line per algorithm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "sluice.h"

static long long used_memory(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO memory");
    long long v = -1;
    const char *p;
    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, "used_memory:")) != NULL)
        v = atoll(p + strlen("used_memory:"));
    if (r)
        freeReplyObject(r);
    return v;
}

/* Server-side µs per EVALSHA since the last CONFIG RESETSTAT: what the
 * script itself costs Redis's one thread. */
static double script_us(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    double v = -1;
    const char *p;
    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, "cmdstat_evalsha:")) != NULL &&
        (p = strstr(p, "usec_per_call=")) != NULL)
        v = atof(p + strlen("usec_per_call="));
    if (r)
        freeReplyObject(r);
    return v;
}

static long long dbsize(redisContext *c)
{
    redisReply *r = redisCommand(c, "DBSIZE");
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

int main(int argc, char **argv)
{
    sl_redis_options o = SL_REDIS_OPTIONS_INIT;
    sl_store *st = NULL;
    redisContext *admin;
    char err[256];
    long n = argc > 2 ? atol(argv[2]) : 100000;
    int port = 0;

    if (argc < 2 || n < 1) {
        fprintf(stderr, "usage: %s redis://127.0.0.1:PORT [N]\n", argv[0]);
        return 2;
    }
    o.url = argv[1];
    if (sl_redis_store_new(&o, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (sscanf(argv[1], "redis://127.0.0.1:%d", &port) != 1 ||
        (admin = redisConnect("127.0.0.1", port)) == NULL || admin->err) {
        fprintf(stderr, "need redis://127.0.0.1:PORT\n");
        return 1;
    }
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_limit_config cfg = {.algorithm = (sl_algorithm)a, .limit = 10,
                               .period = 86400 * SL_NS_PER_SEC};
        sl_limit *lim;
        sl_nanos now = sl_clock_realtime();
        long long before, after;

        if (sl_limit_new(&cfg, &lim, err, sizeof(err)) != 0)
            return 1;
        freeReplyObject(redisCommand(admin, "FLUSHALL"));
        before = used_memory(admin);
        freeReplyObject(redisCommand(admin, "CONFIG RESETSTAT"));
        sl_nanos t0 = sl_clock_monotonic();
        for (long i = 0; i < n; i++) {
            char key[32];
            sl_decision d;
            int len = snprintf(key, sizeof(key), "k%08ld", i);
            int rc = sl_check(st, lim, key, (size_t)len, 1, now, &d);
            if (rc != 0) {
                sl_store_last_error(st, err, sizeof(err));
                fprintf(stderr, "check: %s (%s)\n", sl_err_name(rc), err);
                return 1;
            }
        }
        double us = (double)(sl_clock_monotonic() - t0) / 1e3 / (double)n;
        after = used_memory(admin);
        printf("{\"algorithm\":\"%s\",\"keys\":%lld,\"key_name_bytes\":%d,"
               "\"used_memory_delta\":%lld,\"bytes_per_key\":%.1f,"
               "\"us_per_check\":%.1f,\"server_us_per_check\":%.2f}\n",
               sl_algorithm_name(cfg.algorithm), dbsize(admin),
               (int)strlen("sl:0123456789abcdef:{k00000000}"),
               after - before, (double)(after - before) / (double)n, us,
               script_us(admin));
        sl_limit_free(lim);
    }
    redisFree(admin);
    sl_store_free(st);
    return 0;
}
