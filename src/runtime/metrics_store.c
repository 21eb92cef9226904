/*
 * metrics_store.c - the stores' series of /metrics (metrics.h): the
 * memory store's size and evictions (with Redis: its local fallback's),
 * the RESP door's own store of CL.THROTTLE and GCRA keys, and with
 * --store redis the connections' state and what failures cost.  Apart
 * from metrics.c, which counts the rules' decisions.
 */
#include "runtime/metrics.h"

#define SUM(field) SV_STATS_SUM(s, field)

/* --store redis: the connection's state and what failures cost. */
static void render_store(sv_server *s, sv_buf *out)
{
    static const char *const policies[] = {"local", "fail_open", "fail_closed"};
    uint64_t up = 0;
    for (int i = 0; i < s->n_workers; i++)
        up += (uint64_t)atomic_load_explicit(&s->workers[i].stats.store.up,
                                             memory_order_relaxed);
    sv_buf_printf(out,
                  "# HELP sluice_store_up 1 when every thread's Redis "
                  "connection is usable (its breaker closed)\n"
                  "# TYPE sluice_store_up gauge\n"
                  "sluice_store_up %d\n"
                  "# HELP sluice_store_threads_up threads whose Redis "
                  "connection is usable\n"
                  "# TYPE sluice_store_threads_up gauge\n"
                  "sluice_store_threads_up %llu\n",
                  up == (uint64_t)s->n_workers, (unsigned long long)up);
    sv_buf_addstr(out, "# HELP sluice_store_failures_total store calls that "
                       "failed, by reason\n"
                       "# TYPE sluice_store_failures_total counter\n");
    for (int r = 0; r < SD_N_REASONS; r++)
        sv_buf_printf(out, "sluice_store_failures_total{reason=\"%s\"} %llu\n",
                      sd_reason_name(r),
                      (unsigned long long)SUM(store.failures[r]));
    sv_buf_addstr(out,
                  "# HELP sluice_store_fallback_decisions_total calls decided "
                  "by the failure policy instead of Redis\n"
                  "# TYPE sluice_store_fallback_decisions_total counter\n");
    for (int p = 0; p < SD_N_POLICIES; p++)
        sv_buf_printf(out,
                      "sluice_store_fallback_decisions_total{policy=\"%s\"} "
                      "%llu\n",
                      policies[p], (unsigned long long)SUM(store.fallbacks[p]));
    sv_buf_printf(out,
                  "# HELP sluice_store_breaker_transitions_total circuit "
                  "breaker state changes, summed over threads\n"
                  "# TYPE sluice_store_breaker_transitions_total counter\n"
                  "sluice_store_breaker_transitions_total{to=\"open\"} %llu\n"
                  "sluice_store_breaker_transitions_total{to=\"closed\"} "
                  "%llu\n",
                  (unsigned long long)SUM(store.breaker_opened),
                  (unsigned long long)SUM(store.breaker_closed));
    sv_buf_printf(out,
                  "# HELP sluice_store_commands_total script calls sent to "
                  "Redis (one EVALSHA decides one call or a batch)\n"
                  "# TYPE sluice_store_commands_total counter\n"
                  "sluice_store_commands_total %llu\n"
                  "# HELP sluice_store_calls_total decision calls sent to "
                  "Redis, alone or in a batch\n"
                  "# TYPE sluice_store_calls_total counter\n"
                  "sluice_store_calls_total %llu\n",
                  (unsigned long long)SUM(store.commands),
                  (unsigned long long)SUM(store.calls));
    sv_buf_printf(out,
                  "# HELP sluice_negative_cache_hits_total checks answered "
                  "from a refusal of Redis's that still holds, without "
                  "Redis\n"
                  "# TYPE sluice_negative_cache_hits_total counter\n"
                  "sluice_negative_cache_hits_total %llu\n"
                  "# HELP sluice_negative_cache_entries refusals held, "
                  "summed over threads\n"
                  "# TYPE sluice_negative_cache_entries gauge\n"
                  "sluice_negative_cache_entries %llu\n"
                  "# HELP sluice_negative_cache_evictions_total refusals "
                  "dropped for room while they still held\n"
                  "# TYPE sluice_negative_cache_evictions_total counter\n"
                  "sluice_negative_cache_evictions_total %llu\n",
                  (unsigned long long)SUM(store.negcache_hits),
                  (unsigned long long)SUM(store.negcache_entries),
                  (unsigned long long)SUM(store.negcache_evictions));
    sv_buf_printf(
        out,
        "# HELP sluice_lease_grants_total leases Redis granted (units of a "
        "sync: lease rule's window counted for this node)\n"
        "# TYPE sluice_lease_grants_total counter\n"
        "sluice_lease_grants_total %llu\n"
        "# HELP sluice_lease_units_granted_total units those leases held\n"
        "# TYPE sluice_lease_units_granted_total counter\n"
        "sluice_lease_units_granted_total %llu\n"
        "# HELP sluice_lease_local_total checks allowed from a lease, "
        "without Redis\n"
        "# TYPE sluice_lease_local_total counter\n"
        "sluice_lease_local_total %llu\n"
        "# HELP sluice_lease_returns_total script calls giving unused "
        "units back\n"
        "# TYPE sluice_lease_returns_total counter\n"
        "sluice_lease_returns_total %llu\n"
        "# HELP sluice_lease_units_returned_total units given back\n"
        "# TYPE sluice_lease_units_returned_total counter\n"
        "sluice_lease_units_returned_total %llu\n"
        "# HELP sluice_lease_units_restored_total units Redis took back "
        "(the rest came after their window)\n"
        "# TYPE sluice_lease_units_restored_total counter\n"
        "sluice_lease_units_restored_total %llu\n"
        "# HELP sluice_lease_units_lost_total units that expired unused "
        "or could not be given back (counted in their window)\n"
        "# TYPE sluice_lease_units_lost_total counter\n"
        "sluice_lease_units_lost_total %llu\n",
        (unsigned long long)SUM(store.lease_grants),
        (unsigned long long)SUM(store.lease_units_granted),
        (unsigned long long)SUM(store.lease_local),
        (unsigned long long)SUM(store.lease_returns),
        (unsigned long long)SUM(store.lease_units_returned),
        (unsigned long long)SUM(store.lease_units_restored),
        (unsigned long long)SUM(store.lease_units_lost));
    sv_buf_printf(out,
                  "# HELP sluice_nodes_live nodes sharing the Redis, the "
                  "local policy's divisor (--nodes, or counted live)\n"
                  "# TYPE sluice_nodes_live gauge\n"
                  "sluice_nodes_live %d\n",
                  sd_engine_nodes(s->engine));
}

void sv_metrics_store(sv_server *s, sv_buf *out)
{
    sl_store_stats st;
    sl_store_get_stats(s->store, &st);
    sv_buf_printf(out,
                  "# HELP sluice_store_keys keys holding state\n"
                  "# TYPE sluice_store_keys gauge\n"
                  "sluice_store_keys %llu\n"
                  "# HELP sluice_store_bytes bytes held by the store\n"
                  "# TYPE sluice_store_bytes gauge\n"
                  "sluice_store_bytes %llu\n",
                  (unsigned long long)st.keys, (unsigned long long)st.bytes);
    sv_buf_printf(out,
                  "# HELP sluice_store_evicted_total keys the memory store "
                  "dropped at its cap, least recently used first\n"
                  "# TYPE sluice_store_evicted_total counter\n"
                  "sluice_store_evicted_total %llu\n",
                  (unsigned long long)st.evicted);
    sl_store *commands = sd_engine_commands(s->engine);
    if (commands != NULL) {
        sl_store_get_stats(commands, &st);
        sv_buf_printf(
            out,
            "# HELP sluice_resp_store_keys CL.THROTTLE and GCRA keys "
            "holding state (their own store, --resp-store-bytes)\n"
            "# TYPE sluice_resp_store_keys gauge\n"
            "sluice_resp_store_keys %llu\n"
            "# HELP sluice_resp_store_bytes bytes held by that store\n"
            "# TYPE sluice_resp_store_bytes gauge\n"
            "sluice_resp_store_bytes %llu\n"
            "# HELP sluice_resp_store_evicted_total keys that store "
            "dropped at its cap\n"
            "# TYPE sluice_resp_store_evicted_total counter\n"
            "sluice_resp_store_evicted_total %llu\n",
            (unsigned long long)st.keys, (unsigned long long)st.bytes,
            (unsigned long long)st.evicted);
    }
    if (sd_engine_uses_redis(s->engine))
        render_store(s, out);
}

const char *sv_metrics_store_status(sv_server *s)
{
    int up = 0;
    if (!sd_engine_uses_redis(s->engine))
        return "up";
    for (int i = 0; i < s->n_workers; i++)
        up += atomic_load_explicit(&s->workers[i].stats.store.up,
                                   memory_order_relaxed);
    return up == s->n_workers ? "up" : up == 0 ? "down" : "degraded";
}
