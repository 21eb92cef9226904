/*
 * state_file.c - `--state-file PATH` of sluice serve and sluice proxy:
 * the counters survive a restart.
 *
 * The memory store is loaded at start, before any listener opens, and
 * saved every --state-save-interval, on SIGUSR1, and on SIGTERM once the
 * drain has ended (no decision can follow that save).  Saves run on the
 * main thread, which serves no client; the library's save holds one shard
 * at a time, so decisions on the other threads go on (docs/stores.md,
 * "State file").  A save that fails (disk full, permissions) is logged
 * and counted, and the next interval tries again: decisions never depend
 * on it.  A file that cannot be used is logged loudly and the daemon
 * starts empty, or, with --state-required, does not start.
 *
 * The time base: the daemon's clock is the wall clock at start plus the
 * monotonic time since (decision/engine.c).  A loaded state goes on from
 * the saved clock plus the wall-clock time the daemon was down, so what
 * expired meanwhile has expired and nothing is refilled twice; the clock
 * is set to that (sd_engine_resume), which is the wall clock unless the
 * wall clock was stepped while the saving daemon ran.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "runtime/state_file.h"

/* What the saves and the load did, for /metrics and the status page:
 * written by the main thread, read by any, under lock. */
typedef struct sv_state {
    pthread_mutex_t lock;
    uv_timer_t timer;
    uv_signal_t usr1;
    int handles; /* the two above are open */
    sl_state_result load_result;
    uint64_t loaded_keys;
    uint64_t saves_ok, saves_failed;
    sl_nanos last_wall; /* last successful save, wall clock; 0: none */
    sl_memory_save_info last;
    char last_error[512]; /* of the last failed save, "" after a good one */
} sv_state;

/* The identities the rules in force give their limits (an override
 * shares its base's): an array the caller frees, its length in *n.  The
 * limits belong to the rules set, which *held keeps alive until the
 * caller's sv_rules_release: a reload may replace s->current while a
 * save runs (reloads are on the main thread today, as saves are, but a
 * borrowed pointer would make that an unwritten rule of both). */
static const sl_limit **rule_limits(sv_server *s, size_t *n, sv_rules **held)
{
    const sl_limit **lims = NULL;
    *n = 0;
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *set = s->current;
    if (set != NULL)
        atomic_fetch_add(&set->refs, 1);
    pthread_mutex_unlock(&s->reload_lock);
    *held = set;
    if (set != NULL) {
        const sl_rules *rules = set->rules;
        size_t count = sl_rules_rule_count(rules);
        lims = malloc((count + 1) * sizeof(*lims));
        for (size_t i = 0; lims != NULL && i < count; i++)
            if (sl_rules_rule(rules, i)->limit != NULL)
                lims[(*n)++] = sl_rules_rule(rules, i)->limit;
    }
    return lims;
}

int sv_state_load(sv_server *s)
{
    const sv_config *cfg = &s->cfg;
    if (cfg->state_file == NULL)
        return 0;
    sv_state *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return -1;
    pthread_mutex_init(&st->lock, NULL);
    s->state = st;

    size_t n;
    sv_rules *held;
    const sl_limit **lims = rule_limits(s, &n, &held);
    sl_memory_load_options o = SL_MEMORY_LOAD_OPTIONS_INIT;
    sl_memory_load_info info;
    char err[512];
    o.limits = lims;
    o.n_limits = n;
    int rc = sl_memory_store_load(s->store, cfg->state_file, &o, &info, err,
                                  sizeof(err));
    free(lims);
    sv_rules_release(held);
    st->load_result = info.result;
    if (rc == 0) {
        st->loaded_keys = info.keys;
        sd_engine_resume(s->engine, info.resume_now);
        sl_nanos off = info.resume_now - sl_clock_realtime();
        sl__log(SL__LOG_INFO, "state",
                "loaded %llu keys from %s, saved %.1fs ago (%llu of its %llu "
                "limits in force)",
                (unsigned long long)info.keys, cfg->state_file,
                (double)(info.resume_now - info.saved_now) / 1e9,
                (unsigned long long)info.limits_kept,
                (unsigned long long)info.limits_saved);
        if (off > SL_NS_PER_SEC || off < -SL_NS_PER_SEC)
            sl__log(SL__LOG_WARN, "state",
                    "the clock goes on from the saved one, %.3fs from the "
                    "wall clock (the wall clock was stepped while it ran)",
                    (double)off / 1e9);
        return 0;
    }
    if (info.result == SL_STATE_MISSING) {
        sl__log(SL__LOG_INFO, "state", "%s: starting empty", err);
        return 0;
    }
    if (cfg->state_required) {
        sl__log(SL__LOG_ERROR, "state",
                "%s (%s): not starting (--state-required)", err,
                sl_state_result_name(info.result));
        return -1;
    }
    /* Kept aside for a look, rather than replaced by the next save. */
    char aside[4096];
    int moved = info.result != SL_STATE_UNREADABLE &&
                (size_t)snprintf(aside, sizeof(aside), "%s.bad",
                                 cfg->state_file) < sizeof(aside) &&
                rename(cfg->state_file, aside) == 0;
    sl__log(SL__LOG_ERROR, "state",
            "%s (%s): STARTING EMPTY, every counter reset; %s%s", err,
            sl_state_result_name(info.result),
            moved ? "it is kept as " : "it is replaced at the next save",
            moved ? aside : "");
    return 0;
}

void sv_state_save(sv_server *s, const char *why)
{
    sv_state *st = s->state;
    if (st == NULL)
        return;
    size_t n;
    sv_rules *held;
    const sl_limit **lims = rule_limits(s, &n, &held);
    sl_memory_save_options o = SL_MEMORY_SAVE_OPTIONS_INIT;
    sl_memory_save_info info;
    char err[512];
    o.limits = lims;
    o.n_limits = n;
    o.wall = sl_clock_realtime();
    int rc = sl_memory_store_save(s->store, s->cfg.state_file,
                                  sd_engine_clock(s->engine), &o, &info, err,
                                  sizeof(err));
    free(lims);
    sv_rules_release(held);
    pthread_mutex_lock(&st->lock);
    if (rc == 0) {
        st->saves_ok++;
        st->last = info;
        st->last_wall = o.wall;
        st->last_error[0] = '\0';
    } else {
        st->saves_failed++;
        snprintf(st->last_error, sizeof(st->last_error), "%s", err);
    }
    pthread_mutex_unlock(&st->lock);
    if (rc == 0)
        sl__log(SL__LOG_DEBUG, "state",
                "saved %llu keys (%llu bytes) to %s in %.3fs (%s)",
                (unsigned long long)info.keys, (unsigned long long)info.bytes,
                s->cfg.state_file, (double)info.duration / 1e9, why);
    else
        sl__log(SL__LOG_ERROR, "state", "save (%s) failed: %s; retried %s", why,
                err,
                strcmp(why, "shutdown") == 0 ? "never: exiting"
                                             : "at the next interval");
}

static void timer_cb(uv_timer_t *t)
{
    sv_state_save(t->data, "interval");
}

static void usr1_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    sv_state_save(h->data, "SIGUSR1");
}

void sv_state_start(sv_server *s, uv_loop_t *main_loop)
{
    sv_state *st = s->state;
    if (st == NULL)
        return;
    uv_timer_init(main_loop, &st->timer);
    st->timer.data = s;
    uv_timer_start(&st->timer, timer_cb, s->cfg.state_save_interval_ms,
                   s->cfg.state_save_interval_ms);
    uv_signal_init(main_loop, &st->usr1);
    st->usr1.data = s;
    uv_signal_start(&st->usr1, usr1_cb, SIGUSR1);
    st->handles = 1;
}

static void noop_close_cb(uv_handle_t *h)
{
    (void)h;
}

void sv_state_stop(sv_server *s)
{
    sv_state *st = s->state;
    if (st == NULL || !st->handles)
        return;
    uv_close((uv_handle_t *)&st->timer, noop_close_cb);
    uv_close((uv_handle_t *)&st->usr1, noop_close_cb);
    st->handles = 0;
}

void sv_state_metrics(sv_server *s, sv_buf *out)
{
    sv_state *st = s->state;
    if (st == NULL)
        return;
    pthread_mutex_lock(&st->lock);
    sv_buf_printf(
        out,
        "# HELP sluice_state_saves_total saves of --state-file, by result\n"
        "# TYPE sluice_state_saves_total counter\n"
        "sluice_state_saves_total{result=\"ok\"} %llu\n"
        "sluice_state_saves_total{result=\"failed\"} %llu\n"
        "# HELP sluice_state_last_save_timestamp_seconds when the last good "
        "save was made (0: none yet)\n"
        "# TYPE sluice_state_last_save_timestamp_seconds gauge\n"
        "sluice_state_last_save_timestamp_seconds %.3f\n"
        "# HELP sluice_state_last_save_duration_seconds how long it took\n"
        "# TYPE sluice_state_last_save_duration_seconds gauge\n"
        "sluice_state_last_save_duration_seconds %.6f\n"
        "# HELP sluice_state_last_save_lock_seconds the longest it held one "
        "shard of the store (what a decision may have waited)\n"
        "# TYPE sluice_state_last_save_lock_seconds gauge\n"
        "sluice_state_last_save_lock_seconds %.6f\n"
        "# HELP sluice_state_last_save_keys keys it wrote\n"
        "# TYPE sluice_state_last_save_keys gauge\n"
        "sluice_state_last_save_keys %llu\n"
        "# HELP sluice_state_last_save_bytes the file's size\n"
        "# TYPE sluice_state_last_save_bytes gauge\n"
        "sluice_state_last_save_bytes %llu\n"
        "# HELP sluice_state_loaded_keys keys loaded at start\n"
        "# TYPE sluice_state_loaded_keys gauge\n"
        "sluice_state_loaded_keys %llu\n"
        "# HELP sluice_state_load what the load at start found (1 for its "
        "result)\n"
        "# TYPE sluice_state_load gauge\n",
        (unsigned long long)st->saves_ok, (unsigned long long)st->saves_failed,
        (double)st->last_wall / 1e9, (double)st->last.duration / 1e9,
        (double)st->last.longest_lock / 1e9, (unsigned long long)st->last.keys,
        (unsigned long long)st->last.bytes,
        (unsigned long long)st->loaded_keys);
    for (int r = 0; r < SL_STATE_RESULT_COUNT; r++)
        sv_buf_printf(out, "sluice_state_load{result=\"%s\"} %d\n",
                      sl_state_result_name((sl_state_result)r),
                      r == (int)st->load_result);
    pthread_mutex_unlock(&st->lock);
}

json_t *sv_state_json(sv_server *s)
{
    sv_state *st = s->state;
    if (st == NULL)
        return NULL;
    pthread_mutex_lock(&st->lock);
    json_t *j = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:{s:I,s:f,s:I,s:I},s:s}", "path",
        s->cfg.state_file, "load", sl_state_result_name(st->load_result),
        "loaded_keys", (json_int_t)st->loaded_keys, "saves_ok",
        (json_int_t)st->saves_ok, "saves_failed", (json_int_t)st->saves_failed,
        "last_save", "at_ms", (json_int_t)(st->last_wall / SL_NS_PER_MS),
        "duration_ms", (double)st->last.duration / 1e6, "keys",
        (json_int_t)st->last.keys, "bytes", (json_int_t)st->last.bytes,
        "last_error", st->last_error);
    pthread_mutex_unlock(&st->lock);
    return j;
}

void sv_state_free(sv_server *s)
{
    if (s->state == NULL)
        return;
    pthread_mutex_destroy(&s->state->lock);
    free(s->state);
    s->state = NULL;
}
