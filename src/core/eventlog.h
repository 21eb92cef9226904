/*
 * eventlog.h - a key's log of (time, cost) events, oldest first: the state
 * of sliding_log (times in ns) and stepped_window (times in steps).
 *
 * sl__state.w[1] is the log's latest time: the latest the key has been
 * judged at, never earlier than its newest event.  w[0] says where the
 * events are:
 *
 *   0           no events (the all-zero initial state);
 *   odd         one event inline, at time w[1] and of cost w[0] >> 1: no
 *               heap at all, so a key seen once costs its slot only;
 *   even, != 0  a pointer to a log on the heap (below).
 *
 * An inline event's time is the latest time, so before the latest time
 * moves on (sl__elog_advance) the event goes to the heap, unless it has
 * expired by then.  Events are only ever pushed at the latest time, so
 * one pushed onto an inline event merges into it.
 * An empty heap log is freed so that the state is the initial one again.
 * Events with equal times are merged, so a stepped window holds at most
 * one event per step.  Invariants (sl__heap_check): times strictly
 * increase from head, every cost is > 0, sum is their total, len <= cap,
 * cap a power of two.  A heap log may be empty only between a PEEK that
 * reserved room and the COMMIT after it.
 */
#ifndef SL_EVENTLOG_H
#define SL_EVENTLOG_H

#include "internal.h"

typedef struct sl__event {
    int64_t at;
    int64_t cost;
} sl__event;

typedef struct sl__eventlog {
    uint32_t head; /* index of the oldest event */
    uint32_t len;
    uint32_t cap;
    uint32_t unused;
    int64_t sum;
    sl__event ev[];
} sl__eventlog;

static inline int sl__elog_inline(const sl__state *st)
{
    return (st->w[0] & 1) != 0;
}

/* The heap log, or NULL (no events, or one inline). */
static inline sl__eventlog *sl__elog(const sl__state *st)
{
    return sl__elog_inline(st) ? NULL : (sl__eventlog *)(intptr_t)st->w[0];
}

static inline const sl__event *sl__elog_at(const sl__eventlog *log, uint32_t i)
{
    return &log->ev[(log->head + i) & (log->cap - 1)];
}

/* Newest event's time, or INT64_MIN for an empty log. */
static inline int64_t sl__elog_newest(const sl__state *st)
{
    const sl__eventlog *log = sl__elog(st);
    if (sl__elog_inline(st))
        return st->w[1];
    return log == NULL || log->len == 0 ? INT64_MIN
                                        : sl__elog_at(log, log->len - 1)->at;
}

static inline int64_t sl__elog_sum(const sl__state *st)
{
    const sl__eventlog *log = sl__elog(st);
    if (sl__elog_inline(st))
        return (int64_t)((uint64_t)st->w[0] >> 1);
    return log == NULL ? 0 : log->sum;
}

/* An empty heap log with room for n events (n <= 2^30), to be filled by
 * a reader of saved state (ev[], len, sum) and checked with
 * sl__heap_check(); NULL when out of memory.  Freed as any heap log. */
sl__eventlog *sl__elog_new(uint32_t n);

/* Moves the latest time on to t (>= it) and drops the events with at <=
 * upto: an inline event still live at t moves to the heap first.  0 or
 * SL_ENOMEM (then nothing has changed). */
int sl__elog_advance(sl__state *st, int64_t t, int64_t upto);

/* Drops the events with at <= upto; frees a log it empties (a log
 * that was already empty had room reserved, and keeps it). */
void sl__elog_expire(sl__state *st, int64_t upto);
/* Makes room for one more event without the log exceeding max_bytes (an
 * empty or inline state has it: the event goes, or merges, inline).  0,
 * SL_EFULL (the log would pass max_bytes) or SL_ENOMEM. */
int sl__elog_reserve(sl__state *st, size_t max_bytes);
/* Appends (at, cost), at being the log's latest time (w[1]): inline into
 * an empty state.  Merges into the newest event when the times are equal
 * or when the log already holds max_len events (then the merged event
 * takes the later time: the older cost is kept longer, never shorter).
 * Room must have been reserved. */
void sl__elog_push(sl__state *st, int64_t at, int64_t cost, uint32_t max_len);
/* The time of the event whose expiry first brings the sum down to
 * `target` or less, oldest first; INT64_MIN if the sum is already there. */
int64_t sl__elog_fits_after(const sl__state *st, int64_t target);

#endif /* SL_EVENTLOG_H */
