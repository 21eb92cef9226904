/*
 * eventlog.c - the ring buffer behind sliding_log and stepped_window.
 *
 * A ring, not a list: events leave from the head as time passes and join
 * at the tail, so both ends are O(1) and the events are contiguous (one
 * allocation per key, no per-event pointers).  It doubles when full and
 * halves when a quarter full, so memory follows the events in the window.
 */
#include <stdlib.h>
#include <string.h>

#include "eventlog.h"

enum { MIN_CAP = 4 };

/* An inline event's cost has 62 bits of w[0] (eventlog.h). */
#define INLINE_COST_MAX ((INT64_C(1) << 62) - 1)

static size_t bytes_for(uint32_t cap)
{
    return sizeof(sl__eventlog) + (size_t)cap * sizeof(sl__event);
}

/* A new ring of new_cap holding the events of log (which may be NULL). */
static sl__eventlog *resize(sl__eventlog *log, uint32_t new_cap)
{
    sl__eventlog *n = malloc(bytes_for(new_cap));
    if (n == NULL)
        return NULL;
    memset(n, 0, sizeof(*n));
    n->cap = new_cap;
    if (log != NULL) {
        for (uint32_t i = 0; i < log->len; i++)
            n->ev[i] = *sl__elog_at(log, i);
        n->len = log->len;
        n->sum = log->sum;
        free(log);
    }
    return n;
}

sl__eventlog *sl__elog_new(uint32_t n)
{
    uint32_t cap = MIN_CAP;
    while (cap < n)
        cap *= 2;
    return resize(NULL, cap);
}

/* Moves an inline event to a new heap log of MIN_CAP: 0 or SL_ENOMEM. */
static int to_heap(sl__state *st)
{
    sl__eventlog *log = resize(NULL, MIN_CAP);
    if (log == NULL)
        return SL_ENOMEM;
    log->ev[0].at = st->w[1];
    log->ev[0].cost = sl__elog_sum(st);
    log->len = 1;
    log->sum = log->ev[0].cost;
    st->w[0] = (int64_t)(intptr_t)log;
    return 0;
}

int sl__elog_advance(sl__state *st, int64_t t, int64_t upto)
{
    if (sl__elog_inline(st) && t != st->w[1]) {
        if (st->w[1] <= upto)
            st->w[0] = 0; /* expired by t anyway */
        else if (to_heap(st) != 0)
            return SL_ENOMEM;
    }
    st->w[1] = t;
    sl__elog_expire(st, upto);
    return 0;
}

void sl__elog_expire(sl__state *st, int64_t upto)
{
    sl__eventlog *log = sl__elog(st);
    if (sl__elog_inline(st) && st->w[1] <= upto)
        st->w[0] = 0;
    if (log == NULL || log->len == 0)
        return;
    while (log->len > 0 && sl__elog_at(log, 0)->at <= upto) {
        log->sum -= sl__elog_at(log, 0)->cost;
        log->head = (log->head + 1) & (log->cap - 1);
        log->len--;
    }
    if (log->len == 0) {
        free(log);
        st->w[0] = 0;
    } else if (log->cap > MIN_CAP && log->len < log->cap / 4) {
        sl__eventlog *smaller = resize(log, log->cap / 2);
        if (smaller != NULL) /* if not, the bigger ring still works */
            st->w[0] = (int64_t)(intptr_t)smaller;
    }
}

int sl__elog_reserve(sl__state *st, size_t max_bytes)
{
    sl__eventlog *log = sl__elog(st), *n;
    uint32_t new_cap = log == NULL ? MIN_CAP : log->cap * 2;
    if (st->w[0] == 0 || (log != NULL && log->len < log->cap))
        return 0;
    /* A push merges into an inline event (both are at the latest time),
     * which so needs no room, unless its cost could outgrow w[0]. */
    if (sl__elog_inline(st) && sl__elog_sum(st) < INLINE_COST_MAX / 2)
        return 0;
    if (sl__elog_inline(st))
        return bytes_for(MIN_CAP) > max_bytes ? SL_EFULL : to_heap(st);
    if ((log != NULL && log->cap > UINT32_MAX / 2) ||
        bytes_for(new_cap) > max_bytes)
        return SL_EFULL;
    n = resize(log, new_cap);
    if (n == NULL)
        return SL_ENOMEM;
    st->w[0] = (int64_t)(intptr_t)n;
    return 0;
}

void sl__elog_push(sl__state *st, int64_t at, int64_t cost, uint32_t max_len)
{
    sl__eventlog *log = sl__elog(st);
    if (log == NULL) {
        /* Empty, or one inline event, which is at the latest time too:
         * merged.  (Saturating only if reserve failed to move a huge
         * cost to the heap.) */
        int64_t sum = SL__MIN(sl__elog_sum(st), INLINE_COST_MAX - cost) + cost;
        st->w[0] = (int64_t)(((uint64_t)sum << 1) | 1);
        (void)at;
        return;
    }
    sl__event *newest =
        log->len > 0 ? (sl__event *)sl__elog_at(log, log->len - 1) : NULL;

    if (newest != NULL && (newest->at == at || log->len >= max_len)) {
        newest->at = at;
        newest->cost += cost;
    } else {
        sl__event *slot = &log->ev[(log->head + log->len) & (log->cap - 1)];
        slot->at = at;
        slot->cost = cost;
        log->len++;
    }
    log->sum += cost;
}

int64_t sl__elog_fits_after(const sl__state *st, int64_t target)
{
    const sl__eventlog *log = sl__elog(st);
    int64_t sum = sl__elog_sum(st);

    if (sl__elog_inline(st))
        return sum > target ? st->w[1] : INT64_MIN;
    for (uint32_t i = 0; sum > target; i++) {
        const sl__event *e = sl__elog_at(log, i);
        sum -= e->cost;
        if (sum <= target)
            return e->at;
    }
    return INT64_MIN;
}

void sl__heap_release(sl__state *st)
{
    free(sl__elog(st));
    st->w[0] = 0;
}

size_t sl__heap_bytes(const sl__state *st)
{
    const sl__eventlog *log = sl__elog(st);
    return log == NULL ? 0 : bytes_for(log->cap);
}

int sl__heap_check(const sl__state *st)
{
    const sl__eventlog *log = sl__elog(st);
    int64_t sum = 0;
    if (sl__elog_inline(st))
        return sl__elog_sum(st) > 0 ? 0 : -1;
    if (log == NULL)
        return 0;
    if (log->len > log->cap || (log->cap & (log->cap - 1)))
        return -1;
    for (uint32_t i = 0; i < log->len; i++) {
        const sl__event *e = sl__elog_at(log, i);
        if (e->cost <= 0 || (i > 0 && sl__elog_at(log, i - 1)->at >= e->at))
            return -1;
        sum += e->cost;
    }
    return sum == log->sum ? 0 : -1;
}
