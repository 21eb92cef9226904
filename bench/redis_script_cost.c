/*
 * redis_script_cost.c - what the Redis store's script costs Redis per
 * decision, alone (one call per command) and in batches of B calls per
 * command (sl__redis_batch_format, as sluice serve sends them under
 * load), each way the store calls it: FCALL of the Redis Functions
 * library (Redis 7) and EVALSHA (the fallback; VIA=fcall or VIA=evalsha
 * runs only one): N calls of cost 1, each on a random key of 100k
 * (KEYS=k: of k, so that most calls find their key's state),
 * token_bucket 100/s burst 100 on Redis's clock (the layout of
 * bench/serve_redis.sh), sent 16 commands deep so that the client is
 * never what Redis waits for.  Reports Redis's own µs per command (INFO
 * commandstats) and per decision, and its whole CPU (INFO cpu, user +
 * sys) per decision, which includes reading and answering the commands.
 * bench/redis_script_cost.sh starts the server and the peer's run.
 *
 *   redis_script_cost PORT [N] [B...]   two lines per B (default 1 10 64)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/redis_proto.h"
#include "store/redis_store.h"

#define DEPTH 16
#define MAX_B 256

static redisReply *must(redisContext *c, redisReply *r)
{
    if (r == NULL) {
        fprintf(stderr, "redis: %s\n", c->errstr);
        exit(1);
    }
    return r;
}

/* The number after `field`, first found after `after`, in INFO section. */
static double info_field(redisContext *c, const char *section,
                         const char *after, const char *field)
{
    redisReply *r = must(c, redisCommand(c, "INFO %s", section));
    const char *p = strstr(r->str, after);
    double v = p && (p = strstr(p, field)) ? atof(p + strlen(field)) : -1;
    freeReplyObject(r);
    return v;
}

static double redis_cpu(redisContext *c)
{
    return info_field(c, "cpu", "", "used_cpu_user:") +
           info_field(c, "cpu", "", "used_cpu_sys:");
}

int main(int argc, char **argv)
{
    sl_redis_options o = SL_REDIS_OPTIONS_INIT;
    sl_limit_config cfg = {.algorithm = SL_TOKEN_BUCKET,
                           .limit = 100,
                           .period = SL_NS_PER_SEC,
                           .burst = 100};
    sl_store *st;
    sl__redis_keyspace ks;
    sl_limit *lim;
    redisContext *c;
    char url[64], err[256], sha[41];
    int port = argc > 1 ? atoi(argv[1]) : 0;
    long n = argc > 2 ? atol(argv[2]) : 200000;
    int bs[8] = {1, 10, 64}, nb = 3;
    uint64_t seed = 42;
    const char *keys_env = getenv("KEYS");
    unsigned long long nkeys = keys_env ? strtoull(keys_env, NULL, 10) : 0;

    if (nkeys == 0)
        nkeys = 100000;
    if (port <= 0 || n < 1) {
        fprintf(stderr, "usage: %s PORT [N] [B...]\n", argv[0]);
        return 2;
    }
    if (argc > 3)
        for (nb = 0; nb < 8 && 3 + nb < argc; nb++)
            if ((bs[nb] = atoi(argv[3 + nb])) < 1 || bs[nb] > MAX_B)
                return 2;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    o.url = url;
    o.use_server_time = 1;
    o.lazy_connect = 1;
    if (sl_redis_store_new(&o, &st, err, sizeof(err)) != 0 ||
        sl_limit_new(&cfg, &lim, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sl__redis_store_keyspace(st, &ks);
    if ((c = redisConnect("127.0.0.1", port)) == NULL || c->err) {
        fprintf(stderr, "cannot connect to port %d\n", port);
        return 1;
    }
    redisReply *r =
        must(c, redisCommand(c, "SCRIPT LOAD %s", sl__redis_script));
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    /* LOADED=1: the library is loaded already (bench/redis_insn.sh counts
     * Redis's instructions from here on, and loading costs millions). */
    r = must(c, getenv("LOADED") ? redisCommand(c, "PING")
                                 : redisCommand(c, "FUNCTION LOAD REPLACE %s",
                                                sl__redis_library));
    if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "FUNCTION LOAD: %s\n", r->str);
        return 1;
    }
    freeReplyObject(r);

    for (int run = 0; run < 2 * nb; run++) {
        int B = bs[run / 2], fcall = run % 2;
        const char *ref = fcall ? sl__redis_function : sha;
        const char *only = getenv("VIA");
        if (only != NULL && strcmp(only, fcall ? "fcall" : "evalsha") != 0)
            continue;
        long commands = (n + B - 1) / B, sent = 0, got = 0;
        sl__redis_call *calls[DEPTH][MAX_B];
        double cpu0;

        freeReplyObject(must(c, redisCommand(c, "FLUSHALL")));
        freeReplyObject(must(c, redisCommand(c, "CONFIG RESETSTAT")));
        cpu0 = redis_cpu(c);
        while (got < commands) {
            while (sent < commands && sent - got < DEPTH) {
                sl__redis_call **cs = calls[sent % DEPTH];
                for (int i = 0; i < B; i++) {
                    char key[16];
                    int64_t one = 1;
                    seed = seed * 6364136223846793005u + 1442695040888963407u;
                    int len =
                        snprintf(key, sizeof(key), "k%llu",
                                 (unsigned long long)(seed >> 33) % nkeys);
                    sl_check_item it = {lim, key, (size_t)len};
                    if (sl__redis_call_new(&ks, &it, &one, 1, 0, 0, ref, &cs[i],
                                           err, sizeof(err)) != 0) {
                        fprintf(stderr, "call: %s\n", err);
                        return 1;
                    }
                }
                if (B == 1) {
                    const char *const *argv_;
                    const size_t *lens;
                    int ac = sl__redis_call_argv(cs[0], &argv_, &lens);
                    redisAppendCommandArgv(c, ac, (const char **)argv_, lens);
                } else {
                    char *cmd;
                    size_t len;
                    if (sl__redis_batch_format(cs, (size_t)B, ref, &cmd, &len))
                        return 1;
                    redisAppendFormattedCommand(c, cmd, len);
                    free(cmd);
                }
                sent++;
            }
            sl__redis_call **cs = calls[got % DEPTH];
            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                must(c, NULL);
            for (int i = 0; i < B; i++) {
                sl_decision d;
                int rc = sl__redis_call_read(
                    cs[i], sl__redis_batch_reply(r, (size_t)B, (size_t)i), &d,
                    NULL, err, sizeof(err));
                if (rc != 0) {
                    fprintf(stderr, "read: %d %s\n", rc, err);
                    return 1;
                }
                sl__redis_call_free(cs[i]);
            }
            freeReplyObject(r);
            got++;
        }
        double per_cmd = info_field(
            c, "commandstats",
            fcall ? "cmdstat_fcall:" : "cmdstat_evalsha:", "usec_per_call=");
        double cpu = redis_cpu(c) - cpu0;
        printf("sluice_script via=%s batch=%d commands=%ld "
               "usec_per_command=%.2f usec_per_decision=%.2f "
               "redis_cpu_us_per_decision=%.2f\n",
               fcall ? "fcall" : "evalsha", B, commands, per_cmd, per_cmd / B,
               cpu * 1e6 / (double)(commands * B));
    }
    redisFree(c);
    sl_limit_free(lim);
    sl_store_free(st);
    return 0;
}
