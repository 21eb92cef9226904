/*
 * lease_return.c - a thread's leases swept on a timer of its loop, and
 * their unused units given back to Redis (lease.lua's return run): up to
 * SD_RETURN_BATCH keys a script call on a plain server, one key a call on a
 * Cluster (a call's keys must share a slot).  A return is best effort: one
 * that fails or comes after its window leaves the units counted in the
 * window they were charged in, never minted into another, so a lost
 * return only ever refuses more (docs/stores.md, "Leases").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"

/* How often a thread looks at its leases: well within RETURN_AHEAD_NS
 * (lease.c), so a return goes out before its lease expires. */
#define SWEEP_MS 5

static void returned_cb(const redisReply *reply, void *priv)
{
    sd_stats *stats = priv;
    uint64_t back = 0;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i < reply->elements; i++)
        if (reply->element[i]->type == REDIS_REPLY_INTEGER &&
            reply->element[i]->integer > 0)
            back += (uint64_t)reply->element[i]->integer;
    sd_count(&stats->lease_units_restored, back);
}

/* rs's three arguments at f: a window's units and start, or a bucket's
 * units, holder and numbers "B L P p[ s n]" (lease_bucket.lua), with
 * now when the server's clock is not used. */
static void return_fields(const sl__redis_keyspace *ks,
                          const sd_lease_return *r, sl_nanos now,
                          char f[3][SD_RETURN_NUM_LEN])
{
    snprintf(f[0], SD_RETURN_NUM_LEN, "%lld", (long long)r->units);
    if (r->window_ns != SD_LEASE_NO_WINDOW) {
        snprintf(f[1], SD_RETURN_NUM_LEN, "%lld", (long long)r->window_s);
        snprintf(f[2], SD_RETURN_NUM_LEN, "%lld", (long long)r->window_ns);
        return;
    }
    snprintf(f[1], SD_RETURN_NUM_LEN, "%llu", (unsigned long long)r->holder);
    int len = snprintf(f[2], SD_RETURN_NUM_LEN, "%lld %lld %lld %zu",
                       (long long)r->window_s, (long long)r->limit,
                       (long long)r->period, sl__redis_key_ident_at(ks));
    if (!ks->use_server_time)
        snprintf(f[2] + len, SD_RETURN_NUM_LEN - (size_t)len, " %lld %lld",
                 (long long)(now / SL_NS_PER_SEC),
                 (long long)(now % SL_NS_PER_SEC));
}

int sd_lease_return_args(const sl__redis_keyspace *ks, const char *ref,
                         const sd_lease_return *rs, size_t n, sl_nanos now,
                         sd_return_call *out)
{
    size_t total = 1, at = 0;
    int argc = 3;
    if (n > SD_RETURN_BATCH)
        return -1;
    for (size_t i = 0; i < n; i++)
        total += sl__redis_key_name_max(ks, rs[i].key_len) + 1;
    if ((out->names = malloc(total)) == NULL)
        return -1;
    out->argv[0] = sl__redis_script_command(ref, &out->argv[1], &out->lens[1]);
    out->lens[0] = strlen(out->argv[0]);
    out->lens[2] = (size_t)snprintf(out->nums[0], SD_RETURN_NUM_LEN, "%zu", n);
    out->argv[2] = out->nums[0];
    for (size_t i = 0; i < n; i++) {
        size_t len = sl__redis_key_name(ks, rs[i].ident, rs[i].key,
                                        rs[i].key_len, out->names + at);
        out->names[at + len] = '\0'; /* the first names the slot */
        out->argv[argc] = out->names + at;
        out->lens[argc++] = len;
        at += len + 1;
    }
    out->argv[argc] = "R";
    out->lens[argc++] = 1;
    for (size_t i = 0; i < n; i++) {
        return_fields(ks, &rs[i], now, &out->nums[1 + 3 * i]);
        for (size_t j = 0; j < 3; j++) {
            out->argv[argc] = out->nums[1 + 3 * i + j];
            out->lens[argc] = strlen(out->argv[argc]);
            argc++;
        }
    }
    out->argc = argc;
    return 0;
}

/* One return call of rs[0 .. n): 0, or -1 (not sent: its units lost). */
static int send_one(sd_thread *t, const sd_lease_return *rs, size_t n,
                    sl_nanos now)
{
    sd_return_call a;
    const char *ref = sd_redis_script_ref(t);
    if (ref == NULL ||
        sd_lease_return_args(&t->e->redis_keyspace, ref, rs, n, now, &a) != 0)
        return -1;
    int rc = sd_redis_command(t, a.names, a.argc, a.argv, a.lens, returned_cb,
                              t->stats);
    free(a.names);
    return rc;
}

void sd_leases_send(sd_thread *t)
{
    sd_lease_return rs[SD_RETURN_BATCH];
    size_t per_call = t->e->redis_keyspace.cluster ? 1 : SD_RETURN_BATCH, n;
    sl_nanos now = sd__clock(t->e);
    while ((n = sd_leases_take_returns(t->leases, rs, per_call, now)) > 0) {
        uint64_t units = 0;
        for (size_t i = 0; i < n; i++)
            units += (uint64_t)rs[i].units;
        if (send_one(t, rs, n, now) != 0) {
            sd_count(&t->stats->lease_units_lost, units);
            continue;
        }
        sd_count(&t->stats->lease_returns, 1);
        sd_count(&t->stats->lease_units_returned, units);
    }
}

static void sweep_cb(uv_timer_t *timer)
{
    sd_thread *t = timer->data;
    sd_leases_sweep(t->leases, sd__clock(t->e));
    sd_leases_send(t);
}

void sd_leases_start(sd_thread *t)
{
    if (t->leases == NULL)
        return;
    uv_timer_init(t->loop, &t->sweep);
    t->sweep.data = t;
    uv_timer_start(&t->sweep, sweep_cb, SWEEP_MS, SWEEP_MS);
    /* The sweep alone never keeps a stopping loop alive. */
    uv_unref((uv_handle_t *)&t->sweep);
    t->sweeping = 1;
}

void sd_leases_stop(sd_thread *t)
{
    if (!t->sweeping)
        return;
    t->sweeping = 0;
    /* What the thread holds goes back while its connection still can. */
    sd_leases_clear(t->leases);
    sd_leases_send(t);
    uv_close((uv_handle_t *)&t->sweep, NULL);
}
