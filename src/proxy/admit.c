/*
 * admit.c - whether a proxied request may go on to the upstream: the
 * descriptors its route's actions make of it, one decision on them (at
 * once, or after a wait on Redis), and the verdict: forward, hold it for
 * a leaky_bucket delay in the queue, refuse it with a 429, or an error.
 * client.c acts on the verdict; nothing here touches the connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

void px_decision_free(px_decision *d)
{
    if (d == NULL)
        return;
    free(d->path);
    sv_dec_state_free(d->dec);
    free(d);
}

px_decision *px_decision_get(sv_worker *w, px_decision **own, size_t path_len)
{
    px_decision **d =
        w->server->cfg.redis_url ? own : &px_worker_of(w)->scratch;
    if (*d == NULL && (*d = calloc(1, sizeof(**d))) == NULL)
        return NULL;
    if ((*d)->path_cap < path_len) {
        char *p = realloc((*d)->path, 3 * path_len);
        if (p == NULL)
            return NULL;
        (*d)->path = p;
        (*d)->loose = p + path_len;
        (*d)->lower = p + 2 * path_len;
        (*d)->path_cap = path_len;
    }
    return *d;
}

static int refuse(px_verdict *v, int status, const char *code, const char *msg)
{
    v->what = PX_REFUSE;
    v->status = status;
    v->code = code;
    snprintf(v->msg, sizeof(v->msg), "%s", msg);
    return v->what;
}

/* The verdict of a decided request (rc 0), or of its error. */
static int verdict_of(sv_worker *w, px_decision *pd, int rc, const char *err,
                      px_verdict *v)
{
    const px_config *cfg = pd->cfg;
    sv_metrics_latency(w, (sl_nanos)(uv_hrtime() - pd->t0));
    if (rc != 0) {
        px_count(w, pd->route, PX_REJECTED);
        return refuse(v, sv_decide_status(rc), sl_err_name(rc), err);
    }
    v->decided = 1;
    v->delay = 0;
    if (v->res.over) {
        px_count(w, pd->route, PX_LIMITED);
        v->what = PX_LIMIT;
        return v->what;
    }
    /* leaky_bucket: the request waits its delay, then goes on.  Only
     * enforced limits delay (a shadow rule never holds a request). */
    for (size_t i = 0; i < pd->n; i++)
        if (pd->status[i].rule != NULL && !pd->status[i].shadow &&
            pd->status[i].d.delay > v->delay)
            v->delay = pd->status[i].d.delay;
    v->what = PX_GO;
    if (v->delay <= 0)
        return v->what;
    v->delay_ms = (uint64_t)sv_ms_up(v->delay);
    if (v->delay_ms > cfg->queue_max_wait_ms ||
        px_worker_of(w)->queued >= cfg->queue_max) {
        px_count(w, pd->route, PX_QUEUE_FULL);
        v->what = PX_LIMIT; /* the queue is full */
        return v->what;
    }
    px_count(w, pd->route, PX_QUEUED);
    v->what = PX_HOLD;
    return v->what;
}

/* ...and what the adaptive rules saw of it: refused by them, or let
 * through to the upstream (not when the queue was full). */
static int verdict(sv_worker *w, px_decision *pd, int rc, const char *err,
                   px_verdict *v)
{
    int what = verdict_of(w, pd, rc, err, v);
    if (v->decided)
        pd->adaptive = px_ad_admit(w, pd, what == PX_GO || what == PX_HOLD);
    return what;
}

int px_admit(sv_worker *w, const px_config *cfg, px_decision *pd,
             const px_request_view *req, sd_done_fn done, void *owner,
             sd_wait **wait, px_verdict *v)
{
    char err[256];
    pd->cfg = cfg;
    pd->route = px_route_find(cfg, req);
    pd->n = 0;
    pd->adaptive = 0;
    v->decided = 0;
    v->res = (sv_dec_result){.status = pd->status};
    if (pd->route &&
        px_descriptors(pd->route, req, pd->ds, pd->entries, &pd->n) != 0) {
        /* Which of several values would the upstream believe? */
        px_count(w, pd->route, PX_REJECTED);
        return refuse(v, 400, "EHEADERS",
                      "a header that a rate limit reads was sent more than "
                      "once");
    }
    if (pd->n == 0) {
        v->what = PX_GO;
        return v->what;
    }
    sv_dec_state *st = sv_dec_state_get(w, &pd->dec);
    if (st == NULL)
        return refuse(v, 503, "ENOMEM", "out of memory");
    pd->t0 = uv_hrtime();
    int rc =
        sv_decide(w, st, pd->route->domain, strlen(pd->route->domain), pd->ds,
                  pd->n, 1, &v->res, done, owner, wait, err, sizeof(err));
    if (rc == SV_AGAIN) {
        v->what = PX_WAIT;
        return v->what;
    }
    return verdict(w, pd, rc, err, v);
}

int px_admit_finish(sv_worker *w, px_decision *pd, px_verdict *v)
{
    char err[256];
    v->res = (sv_dec_result){.status = pd->status};
    int rc = sv_decide_finish(w, pd->dec, &v->res, err, sizeof(err));
    return verdict(w, pd, rc, err, v);
}

void px_admit_abandon(px_decision *pd)
{
    if (pd != NULL)
        sv_decide_abandon(pd->dec);
}

void px_answer_429(const px_decision *pd, const px_verdict *v, int head,
                   int keep_alive, sv_buf *rate, sv_buf *out)
{
    const px_config *cfg = pd->cfg;
    char msg[160];
    if (v->res.over) {
        sv_respond_limited(&v->res, rate->data, rate->len, head, out,
                           keep_alive);
        return;
    }
    int len =
        snprintf(msg, sizeof(msg),
                 "a wait of %llu ms does not fit (at most %llu ms, "
                 "%zu requests)",
                 (unsigned long long)v->delay_ms,
                 (unsigned long long)cfg->queue_max_wait_ms, cfg->queue_max);
    sv_buf_addstr(rate, "Retry-After: ");
    sv_buf_add_uint(rate, (unsigned long long)sv_sec_up(v->delay));
    sv_buf_addstr(rate, "\r\n");
    static const char why[] = "queue full: ";
    sv_respond_429(out, rate->data, rate->len, why, sizeof(why) - 1, msg,
                   (size_t)len, (long long)v->delay_ms, head, keep_alive);
}
