/*
 * rules_reload.c - loading the rules and swapping them in while serving.
 *
 * The main thread loads a new set (on SIGHUP, or when the once-a-second
 * stat poll of the rules path sees a change) and publishes it as
 * `current` under reload_lock, with the runtime limits applied
 * (limits.c); it then wakes every worker, which takes a
 * reference to the new set and drops its old one between two requests.
 * A set is freed when its last holder lets go, so no thread ever decides
 * against freed rules and no request or connection is dropped.  Counters
 * need no copying: a limit's identity (and so its state in the store)
 * depends only on its domain, path and parameters (sluice_rules.h).
 *
 * A stat poll rather than uv_fs_event: inotify watches a file's inode,
 * which editors and config-management tools replace by renaming, and
 * watching a directory and the files in it takes more code than a
 * one-second poll of a few stat() calls costs.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/metrics.h"
#include "runtime/rules_reload.h"
#include "runtime/tls_listeners.h"
#include "log/log.h"
#include "rules/rule_daemon.h"

static uv_timer_t watch_timer;
static int watching;
static uint64_t watch_sig;

/* On Redis, every limit must be one its script decides exactly (any
 * period of whole seconds is; call.c, "Ticks"), raised to its
 * adaptive.max too: one it cannot is refused here, naming the rule, never at
 * request time.  0 or -1 with err. */
static int store_takes(const sl_rules *rules, char *err, size_t errlen)
{
    for (size_t i = 0; i < sl_rules_rule_count(rules); i++) {
        const sl_rule *r = sl_rules_rule(rules, i);
        char why[256];
        if (sl__rule_redis_fits(rules, r, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "rule '%s'%s%s%s: %s", r->path,
                     r->name[0] ? " (name '" : "", r->name,
                     r->name[0] ? "')" : "", why);
            return -1;
        }
    }
    return 0;
}

static sv_rules *load(const char *path, int redis, char *err, size_t errlen)
{
    sl_rules *rules;
    if (sl_rules_load(path, NULL, &rules, err, errlen) != 0)
        return NULL;
    if (redis && store_takes(rules, err, errlen) != 0) {
        sl_rules_free(rules);
        return NULL;
    }
    sv_rules *r = sv_rules_new(rules);
    if (r == NULL)
        snprintf(err, errlen, "%s: out of memory", path);
    return r;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

static uint64_t stat_mix(uint64_t h, const struct stat *st)
{
    h = mix(h, (uint64_t)st->st_ino);
    h = mix(h, (uint64_t)st->st_size);
    h = mix(h, (uint64_t)st->st_mtim.tv_sec);
    return mix(h, (uint64_t)st->st_mtim.tv_nsec);
}

/* A fingerprint of what a reload would read: the path's stat and, for a
 * directory, every entry's name and stat. */
static uint64_t signature(const char *path)
{
    struct stat st;
    uint64_t h = 0xcbf29ce484222325ULL;
    if (stat(path, &st) != 0)
        return h;
    h = stat_mix(h, &st);
    if (!S_ISDIR(st.st_mode))
        return h;
    DIR *d = opendir(path);
    if (d == NULL)
        return h;
    struct dirent *e;
    char full[4096];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
        uint64_t eh = 0xcbf29ce484222325ULL;
        for (const char *p = e->d_name; *p; p++)
            eh = mix(eh, (unsigned char)*p);
        if (stat(full, &st) == 0)
            eh = stat_mix(eh, &st);
        h ^= eh; /* order of readdir does not matter */
    }
    closedir(d);
    return h;
}

int sv_reload_init(sv_server *s)
{
    char err[512];
    watch_sig = signature(s->cfg.rules_path);
    sv_rules *r =
        load(s->cfg.rules_path, s->cfg.redis_url != NULL, err, sizeof(err));
    if (r == NULL) {
        sl__log(SL__LOG_ERROR, NULL, "%s", err);
        return -1;
    }
    s->cfg.plane->loaded(s, r); /* in force with the runtime limits */
    return s->current != NULL ? 0 : -1;
}

void sv_reload_now(sv_server *s)
{
    char err[512];
    /* The certificates and keys are read again with the rules: a bad
     * new pair is refused, and the pair in force stays on its listeners. */
    sv_tls_listeners_reload(s);
    sv_rules *r =
        load(s->cfg.rules_path, s->cfg.redis_url != NULL, err, sizeof(err));
    if (r == NULL) {
        sl__log(SL__LOG_ERROR, NULL, "rules reload failed: %s", err);
        pthread_mutex_lock(&s->reload_lock);
        snprintf(s->last_error, sizeof(s->last_error), "%s", err);
        pthread_mutex_unlock(&s->reload_lock);
        atomic_fetch_add(&s->reloads_failed, 1);
        return;
    }
    pthread_mutex_lock(&s->reload_lock);
    s->last_error[0] = '\0';
    pthread_mutex_unlock(&s->reload_lock);
    sl__log(SL__LOG_INFO, NULL, "rules reloaded: version %s",
            sl_rules_version(r->rules));
    /* Published with the runtime limits applied; every thread woken. */
    s->cfg.plane->loaded(s, r);
    atomic_fetch_add(&s->reloads_ok, 1);
}

void sv_reload_adopt(sv_worker *w)
{
    sv_server *s = w->server;
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *r = s->current, *old = w->rules;
    if (r != old)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&s->reload_lock);
    if (r != old) {
        w->rules = r;
        sd_limits_changed(w->dec);
        sv_metrics_rules_changed(w);
        sv_rules_release(old);
    }
}

static void watch_cb(uv_timer_t *t)
{
    sv_server *s = t->data;
    uint64_t sig = signature(s->cfg.rules_path);
    if (sig != watch_sig) {
        watch_sig = sig;
        sv_reload_now(s);
    }
}

void sv_reload_start_watch(sv_server *s, uv_loop_t *loop)
{
    uv_timer_init(loop, &watch_timer);
    watch_timer.data = s;
    uv_timer_start(&watch_timer, watch_cb, 1000, 1000);
    watching = 1;
}

static void closed_cb(uv_handle_t *h)
{
    (void)h;
}

void sv_reload_stop_watch(void)
{
    if (watching) {
        uv_close((uv_handle_t *)&watch_timer, closed_cb);
        watching = 0;
    }
}

void sv_reload_release(sv_server *s)
{
    sv_rules_release(s->current);
    s->current = NULL;
}
