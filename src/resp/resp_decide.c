/*
 * decide.c - the Redis protocol's commands that decide: CL.THROTTLE and
 * GCRA (a limit the command names, throttle.c) and SLUICE.CHECK (the
 * rules, as POST /v1/check decides them).  Each goes through the decision
 * layer like every front end, so on `--store redis://` its counters are
 * shared with every node and it may wait: the command then keeps a copy
 * of its arguments in the session, and its reply is written when the
 * decision comes (rp_finish()).
 */
#include <stdlib.h>
#include <string.h>

#include "resp/command.h"
#include "resp/parse.h"
#include "resp/resp_reply.h"

/* Copies argv[0..argc) into s->bytes when the store may make the command
 * wait; the copy is what the command then points at. */
static int keep_args(rp_session *s, rp_str *argv, size_t argc)
{
    if (!sd_engine_uses_redis(s->w->server->engine))
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < argc; i++)
        total += argv[i].len;
    s->bytes.len = 0;
    s->bytes.failed = 0;
    if (sv_buf_reserve(&s->bytes, total) != 0)
        return -1;
    for (size_t i = 0; i < argc; i++) {
        const char *at = s->bytes.data + s->bytes.len;
        sv_buf_add(&s->bytes, argv[i].p, argv[i].len);
        argv[i].p = at;
    }
    return 0;
}

static void throttle_reply(rp_session *s, sv_buf *out)
{
    const sd_check *c = &s->check;
    if (c->rc != 0) {
        rp_add_error_arg(out, "ERR ", c->err, strlen(c->err), "");
        rp_count(s, 1);
        return;
    }
    rp_throttle_reply(&s->th, &c->overall, out);
    rp_count(s, 0);
}

int rp_throttle_run(rp_session *s, rp_throttle_kind kind, rp_str *argv,
                    size_t argc, sv_buf *out)
{
    rp_throttle th;
    char err[256];
    if (rp_throttle_read(kind, argv, argc, &th, err, sizeof(err)) != 0) {
        rp_add_error(out, err);
        rp_count(s, 1);
        return RP_REPLIED;
    }
    /* The connection's limit, unless this command names another. */
    if (s->limit == NULL || memcmp(&s->th.cfg, &th.cfg, sizeof(th.cfg)) != 0) {
        sl_limit_free(s->limit);
        s->limit = NULL;
        int rc = sl_limit_new(&th.cfg, &s->limit, err, sizeof(err));
        if (rc != 0) {
            rp_add_error_arg(out, "ERR ", err, strlen(err), "");
            rp_count(s, 1);
            return RP_REPLIED;
        }
    }
    s->th = th;
    rp_str key = argv[1];
    if (keep_args(s, &key, 1) != 0) {
        rp_add_error(out, "ERR out of memory");
        rp_count(s, 1);
        return RP_REPLIED;
    }
    s->item = (sl_check_item){s->limit, key.p, key.len};
    s->check = (sd_check){
        .items = &s->item, .costs = &s->th.cost, .n = 1, .command = 1};
    int rc = sd_decide(s->w->dec, &s->check, 1, sv_now(s->w), s->resume,
                       s->owner, &s->wait);
    if (rc == SD_AGAIN) {
        s->waiting = RP_WAIT_THROTTLE + 1;
        return SV_AGAIN;
    }
    throttle_reply(s, out);
    return RP_REPLIED;
}

/* ---- SLUICE.CHECK domain hits n k v ... [n k v ...] ---- */

static int usage(rp_session *s, sv_buf *out, const char *why)
{
    rp_add_error(out, why);
    rp_count(s, 1);
    return RP_REPLIED;
}

static int read_count(const rp_str *a, int64_t *v)
{
    if (a->len == 0 || a->len > 12)
        return -1;
    int64_t x = 0;
    for (size_t i = 0; i < a->len; i++) {
        if (a->p[i] < '0' || a->p[i] > '9')
            return -1;
        x = x * 10 + (a->p[i] - '0');
    }
    *v = x;
    return 0;
}

/* The session's arrays for a rules decision, made once. */
static int rules_arrays(rp_session *s)
{
    if (s->ds != NULL)
        return 0;
    s->ds = calloc(SV_MAX_DESCRIPTORS, sizeof(*s->ds));
    s->entries = calloc(RP_MAX_ARGS / 2, sizeof(*s->entries));
    s->status = calloc(SV_MAX_DESCRIPTORS, sizeof(*s->status));
    return s->ds && s->entries && s->status ? 0 : -1;
}

/* argv[3..argc) as descriptors: 0, or -1 with the reply's text in why. */
static int read_descriptors(rp_session *s, const rp_str *argv, size_t argc,
                            const char **why)
{
    const sv_config *cfg = &s->w->server->cfg;
    size_t i = 3, used = 0;
    s->n_ds = 0;
    while (i < argc) {
        int64_t n;
        if (read_count(&argv[i], &n) != 0 || n < 1) {
            *why = "ERR descriptor: expected its number of entries, then "
                   "that many key value pairs";
            return -1;
        }
        if ((uint64_t)n > cfg->max_entries) {
            *why = "ERR descriptor: more entries than --max-entries";
            return -1;
        }
        if (s->n_ds == cfg->max_descriptors) {
            *why = "ERR more descriptors than --max-descriptors";
            return -1;
        }
        if (argc - i - 1 < (size_t)n * 2) {
            *why = "ERR descriptor: fewer key value pairs than its count";
            return -1;
        }
        sl_rules_entry *e = &s->entries[used];
        for (int64_t k = 0; k < n; k++) {
            const rp_str *key = &argv[i + 1 + 2 * (size_t)k];
            if (key->len == 0) {
                *why = "ERR descriptor: an entry's key must not be empty";
                return -1;
            }
            e[k] = (sl_rules_entry){key->p, key->len, key[1].p, key[1].len};
        }
        s->ds[s->n_ds++] = (sv_dec_descriptor){
            .entries = e, .n_entries = (size_t)n, .hits = -1};
        used += (size_t)n;
        i += 1 + 2 * (size_t)n;
    }
    return 0;
}

static void status_reply(const sv_dec_status *st, sv_buf *out)
{
    rp_add_array(out, 7);
    rp_add_bulk(out, st->over ? "OVER_LIMIT" : "OK", st->over ? 10 : 2);
    if (st->rule == NULL) {
        sv_buf_addstr(out, "$-1\r\n");
        rp_add_int(out, -1);
        rp_add_int(out, -1);
        rp_add_int(out, -1);
        rp_add_int(out, 0);
        rp_add_int(out, -1);
        return;
    }
    const sl_rule *r = st->rule;
    int counted = r->action != SL_RULE_UNLIMITED;
    rp_add_bulk(out, r->name, strlen(r->name));
    rp_add_int(out, counted ? r->requests_per_unit : -1);
    rp_add_int(out, counted ? (long long)(r->period / SL_NS_PER_MS) : -1);
    rp_add_int(out, counted ? (st->d.remaining < 0 ? 0 : st->d.remaining) : -1);
    rp_add_int(out, counted ? sv_ms_up(st->d.reset_after) : 0);
    rp_add_int(out, counted && st->over ? sv_ms_up(st->d.retry_after) : -1);
}

static void check_reply(rp_session *s, int rc, const char *err, sv_buf *out)
{
    if (rc != 0) {
        rp_add_error_arg(out, rc == SL_ESTORE ? "TRYAGAIN " : "ERR ", err,
                         strlen(err), "");
        rp_count(s, 1);
        return;
    }
    const sv_dec_result *res = &s->res;
    const sv_dec_status *c = res->closest;
    int counted = c != NULL && c->rule->action != SL_RULE_UNLIMITED;
    rp_add_array(out, 6);
    rp_add_int(out, res->over);
    rp_add_int(out, counted ? c->rule->requests_per_unit : -1);
    rp_add_int(out, counted ? (c->d.remaining < 0 ? 0 : c->d.remaining) : -1);
    rp_add_int(out, counted && res->over ? sv_ms_up(c->d.retry_after) : -1);
    rp_add_int(out, counted ? sv_ms_up(c->d.reset_after) : 0);
    rp_add_array(out, (long long)s->n_ds);
    for (size_t i = 0; i < s->n_ds; i++)
        status_reply(&res->status[i], out);
    rp_count(s, 0);
}

int rp_check_run(rp_session *s, rp_str *argv, size_t argc, sv_buf *out)
{
    int64_t hits;
    const char *why;
    char err[256];
    if (argc < 5)
        return usage(s, out,
                     "ERR wrong number of arguments for 'sluice.check' "
                     "command: SLUICE.CHECK domain hits n key value [key "
                     "value ...] [n key value ...]");
    if (read_count(&argv[2], &hits) != 0 || hits > SL_MAX_COUNT)
        return usage(s, out, "ERR hits: expected an integer from 0 to 2^40");
    if (rules_arrays(s) != 0)
        return usage(s, out, "ERR out of memory");
    sv_dec_state *st = sv_dec_state_get(s->w, &s->dec);
    if (st == NULL || keep_args(s, argv, argc) != 0)
        return usage(s, out, "ERR out of memory");
    if (read_descriptors(s, argv, argc, &why) != 0)
        return usage(s, out, why);
    s->res = (sv_dec_result){.status = s->status};
    int rc =
        sv_decide(s->w, st, argv[1].p, argv[1].len, s->ds, s->n_ds, hits,
                  &s->res, s->resume, s->owner, &s->wait, err, sizeof(err));
    if (rc == SV_AGAIN) {
        s->waiting = RP_WAIT_RULES + 1;
        return SV_AGAIN;
    }
    check_reply(s, rc, err, out);
    return RP_REPLIED;
}

void rp_finish(rp_session *s, sv_buf *out)
{
    int kind = s->waiting - 1;
    s->waiting = 0;
    s->wait = NULL;
    if (kind == RP_WAIT_THROTTLE) {
        throttle_reply(s, out);
        return;
    }
    char err[256];
    int rc = sv_decide_finish(s->w, s->dec, &s->res, err, sizeof(err));
    check_reply(s, rc, err, out);
}
