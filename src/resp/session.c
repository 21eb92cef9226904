/*
 * session.c - a Redis protocol connection's session (command.h): made,
 * let go of (a waiting command given up), and its door's counters, which
 * the commands (command.c) and the deciding ones (decide.c) both call.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "resp/command.h"

/* Client ids, as Redis gives them: 1, 2, 3... over the process, so that
 * an id says nothing of where a session lives in memory. */
static atomic_uint_fast64_t last_id;

void rp_session_init(rp_session *s, sv_worker *w, int door, sd_done_fn resume,
                     void *owner)
{
    memset(s, 0, sizeof(*s));
    s->id = atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
    s->w = w;
    s->door = door;
    s->resume = resume;
    s->owner = owner;
}

void rp_session_release(rp_session *s)
{
    if (s->wait != NULL) {
        sd_cancel(s->wait);
        if (s->waiting == RP_WAIT_RULES + 1)
            sv_decide_abandon(s->dec);
    }
    sv_dec_state_free(s->dec);
    sl_limit_free(s->limit);
    sv_buf_release(&s->bytes);
    free(s->ds);
    free(s->entries);
    free(s->status);
    memset(s, 0, sizeof(*s));
}

void rp_count(rp_session *s, int error)
{
    sv_stats *st = &s->w->stats;
    atomic_fetch_add_explicit(error ? &st->door_errors[s->door]
                                    : &st->door_ok[s->door],
                              1, memory_order_relaxed);
}
