/*
 * wait.c - the records of checks waiting on Redis.  A wait is one
 * request's checks, each sent as a call of one or more parts (one per
 * Cluster slot of its keys).  A wait is freed when its owner has let go
 * (done, or cancelled) and no hiredis callback can still name one of its
 * parts: hence the references, one for the owner and one per callback
 * to come.  The thread's waits are queued by deadline for its timer.
 */
#include <stdio.h>
#include <stdlib.h>

#include "decision/layer.h"

static void free_calls(sd_wait *w)
{
    for (size_t i = 0; i < w->n_calls; i++) {
        sl__redis_call_free(w->calls[i].call);
        free(w->calls[i].parts);
        free(w->calls[i].each);
        free(w->calls[i].backs);
    }
    free(w->calls);
}

/* 0, or an SL_E* code with the message in check->err. */
static int build_call(sd_thread *t, sd_call *c, sd_check *check, sl_nanos now,
                      const sl__redis_keyspace *ks, const char *sha)
{
    sl__redis_ask asks[SL_MAX_ITEMS];
    if ((c->each = calloc(check->n, sizeof(sl_decision))) == NULL) {
        snprintf(check->err, sizeof(check->err), "out of memory");
        return SL_ENOMEM;
    }
    if (check->n <= SL_MAX_ITEMS)
        sd_leases_asks(t->leases, check, now, asks);
    int rc = sl__redis_call_new_asking(
        ks, check->items, check->costs,
        check->n <= SL_MAX_ITEMS && t->leases != NULL ? asks : NULL, check->n,
        now, check->flags, sha, &c->call, check->err, sizeof(check->err));
    if (rc != 0)
        return rc;
    if (check->n <= SL_MAX_ITEMS)
        c->backs = sd_leases_backs_new(t->leases, check, asks, now);
    c->n_parts = c->parts_left = sl__redis_call_parts(c->call);
    if ((c->parts = calloc(c->n_parts, sizeof(sd_part))) == NULL) {
        snprintf(check->err, sizeof(check->err), "out of memory");
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < c->n_parts; i++)
        c->parts[i] = (sd_part){.c = c, .index = i};
    return 0;
}

int sd_wait_new(sd_thread *t, sd_check *checks, size_t n, sl_nanos now,
                const sl__redis_keyspace *ks, const char *sha, sd_wait **out)
{
    sd_wait *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->calls = calloc(n, sizeof(sd_call))) == NULL) {
        free(w);
        return SL_ENOMEM;
    }
    w->t = t;
    w->refs = 1;
    w->n_calls = n;
    w->asked_at = now;
    w->limits_gen = t->limits_gen;
    for (size_t i = 0; i < n; i++) {
        sd_call *c = &w->calls[i];
        c->wait = w;
        c->check = &checks[i];
        if (checks[i].cached) {
            c->done = 1;
            continue;
        }
        c->rc = build_call(t, c, &checks[i], now, ks, sha);
        c->done = c->rc != 0; /* not sent: its error is its answer */
    }
    *out = w;
    return 0;
}

void sd_wait_unref(sd_wait *w)
{
    if (--w->refs > 0)
        return;
    free_calls(w);
    free(w);
}

void sd_call_fail(sd_call *c, int reason)
{
    c->done = 1;
    c->failed = 1;
    c->reason = reason;
    sd_count(&c->wait->t->stats->failures[reason], 1);
}

void sd_call_give_back(sd_call *c)
{
    sl__redis_grant grants[SL_MAX_ITEMS];
    if (c->backs == NULL)
        return;
    sl__redis_call_take_grants(c->call, grants);
    sd_leases_give_back_late(c->wait->t->leases, c->backs, grants);
}

void sd_wait_enqueue(sd_wait_queue *q, sd_wait *w, uint64_t deadline)
{
    sd_wait *after = q->tail;
    w->deadline = deadline;
    w->queued = 1;
    while (after != NULL && after->deadline > deadline)
        after = after->prev;
    w->prev = after;
    w->next = after != NULL ? after->next : q->head;
    if (w->next != NULL)
        w->next->prev = w;
    else
        q->tail = w;
    if (after != NULL)
        after->next = w;
    else
        q->head = w;
}

void sd_wait_dequeue(sd_wait_queue *q, sd_wait *w)
{
    if (!w->queued)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->prev = w->next = NULL;
    w->queued = 0;
}
