/*
 * schedule.c - seeded per-client arrivals merged by a binary min-heap
 * (schedule.h).
 *
 * Poisson clients draw exponential gaps; constant ones send every 1/rate
 * from a random phase in the first gap, so that two abusers at the same
 * rate do not send in lockstep.  A client with windows is silent outside
 * them: a time past a window's end moves to the next window's start
 * (plus a fresh gap for Poisson, which is memoryless, and the phase for
 * constant ones).
 */
#include "lab/arrivals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/rng.h"

typedef struct client {
    int64_t next_ns;
    uint32_t group, index;
    int64_t phase_ns; /* constant clients: the offset in each window */
    uint64_t sent;    /* constant clients: arrivals in the current window */
    size_t window;    /* the window next_ns is in */
    lb_rng rng;
} client;

struct lb_schedule {
    lb_group *groups;
    size_t n_groups;
    int64_t end_ns;
    client *clients;
    size_t n; /* clients still with an arrival, the heap's size */
};

int lb_group_parse(const char *text, lb_group *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    char buf[512];
    if (strlen(text) >= sizeof(buf)) {
        snprintf(err, errlen, "group too long: '%.40s...'", text);
        return -1;
    }
    strcpy(buf, text);
    char *save = NULL, *field[4 + LB_MAX_WINDOWS];
    size_t n = 0;
    for (char *f = strtok_r(buf, ",", &save); f;
         f = strtok_r(NULL, ",", &save)) {
        if (n == sizeof(field) / sizeof(field[0])) {
            snprintf(err, errlen, "too many windows (at most %d): '%s'",
                     LB_MAX_WINDOWS, text);
            return -1;
        }
        field[n++] = f;
    }
    char *end;
    if (n < 4 || strlen(field[0]) == 0 || strlen(field[0]) >= LB_CLASS_NAME) {
        snprintf(err, errlen,
                 "invalid group: '%s' (CLASS,CLIENTS,poisson|constant,RATE"
                 "[,FROM-TO...])",
                 text);
        return -1;
    }
    strcpy(out->class_name, field[0]);
    unsigned long c = strtoul(field[1], &end, 10);
    if (*end || c < 1 || c > 100000) {
        snprintf(err, errlen, "invalid client count: '%s'", field[1]);
        return -1;
    }
    out->clients = (uint32_t)c;
    if (strcmp(field[2], "poisson") == 0)
        out->arrivals = LB_POISSON;
    else if (strcmp(field[2], "constant") == 0)
        out->arrivals = LB_CONSTANT;
    else {
        snprintf(err, errlen, "invalid arrivals: '%s' (poisson, constant)",
                 field[2]);
        return -1;
    }
    out->rate = strtod(field[3], &end);
    if (*end || !(out->rate > 0 && out->rate <= 1e6)) {
        snprintf(err, errlen, "invalid rate: '%s'", field[3]);
        return -1;
    }
    for (size_t i = 4; i < n; i++) {
        double from = strtod(field[i], &end), to;
        if (*end != '-' || (to = strtod(end + 1, &end), *end) || from < 0 ||
            to <= from ||
            (i > 4 && from * 1e9 < (double)out->window_to_ns[i - 5])) {
            snprintf(err, errlen,
                     "invalid window: '%s' (FROM-TO seconds, in order)",
                     field[i]);
            return -1;
        }
        out->window_from_ns[i - 4] = (int64_t)(from * 1e9);
        out->window_to_ns[i - 4] = (int64_t)(to * 1e9);
        out->n_windows++;
    }
    return 0;
}

static int64_t gap_ns(client *c, const lb_group *g)
{
    double mean = 1e9 / g->rate;
    if (g->arrivals == LB_POISSON)
        return lb_rng_exp_ns(&c->rng, mean);
    return (int64_t)(mean + 0.5);
}

/* The client's window bounds; without windows, the whole run. */
static void window_of(const lb_group *g, size_t w, int64_t end_ns,
                      int64_t *from, int64_t *to)
{
    if (g->n_windows == 0) {
        *from = 0;
        *to = end_ns;
    } else {
        *from = g->window_from_ns[w];
        *to = g->window_to_ns[w] < end_ns ? g->window_to_ns[w] : end_ns;
    }
}

/* Sets c->next_ns to its first arrival at or after the start of window
 * c->window, moving on past windows it has no arrival in; INT64_MAX when
 * none is left. */
static void enter_window(client *c, const lb_group *g, int64_t end_ns)
{
    for (;;) {
        size_t nw = g->n_windows ? g->n_windows : 1;
        if (c->window >= nw) {
            c->next_ns = INT64_MAX;
            return;
        }
        int64_t from, to;
        window_of(g, c->window, end_ns, &from, &to);
        c->sent = 0;
        c->next_ns =
            from + (g->arrivals == LB_POISSON ? gap_ns(c, g) : c->phase_ns);
        if (c->next_ns < to)
            return;
        c->window++;
    }
}

static void advance(client *c, const lb_group *g, int64_t end_ns)
{
    int64_t from, to;
    window_of(g, c->window, end_ns, &from, &to);
    if (g->arrivals == LB_POISSON) {
        c->next_ns += gap_ns(c, g);
    } else {
        /* From the window's start, not by adding gaps: no drift. */
        c->sent++;
        c->next_ns = from + c->phase_ns +
                     (int64_t)((double)c->sent * 1e9 / g->rate + 0.5);
    }
    if (c->next_ns >= to) {
        c->window++;
        enter_window(c, g, end_ns);
    }
}

static int before(const client *a, const client *b)
{
    if (a->next_ns != b->next_ns)
        return a->next_ns < b->next_ns;
    if (a->group != b->group)
        return a->group < b->group;
    return a->index < b->index;
}

static void sift_down(lb_schedule *s, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && before(&s->clients[l], &s->clients[m]))
            m = l;
        if (r < s->n && before(&s->clients[r], &s->clients[m]))
            m = r;
        if (m == i)
            return;
        client t = s->clients[i];
        s->clients[i] = s->clients[m];
        s->clients[m] = t;
        i = m;
    }
}

lb_schedule *lb_schedule_new(const lb_group *groups, size_t n, uint64_t seed,
                             int64_t end_ns)
{
    lb_schedule *s = calloc(1, sizeof(*s));
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += groups[i].clients;
    if (!s || !(s->groups = calloc(n ? n : 1, sizeof(*groups))) ||
        !(s->clients = calloc(total ? total : 1, sizeof(client)))) {
        lb_schedule_free(s);
        return NULL;
    }
    memcpy(s->groups, groups, n * sizeof(*groups));
    s->n_groups = n;
    s->end_ns = end_ns;
    for (size_t gi = 0; gi < n; gi++) {
        const lb_group *g = &groups[gi];
        for (uint32_t ci = 0; ci < g->clients; ci++) {
            client *c = &s->clients[s->n];
            c->group = (uint32_t)gi;
            c->index = ci;
            lb_rng_init(&c->rng, seed, ((uint64_t)gi << 32) | ci);
            c->phase_ns = (int64_t)(lb_rng_unit(&c->rng) * 1e9 / g->rate);
            enter_window(c, g, end_ns);
            if (c->next_ns != INT64_MAX)
                s->n++;
        }
    }
    for (size_t i = s->n / 2; i-- > 0;)
        sift_down(s, i);
    return s;
}

void lb_schedule_free(lb_schedule *s)
{
    if (!s)
        return;
    free(s->groups);
    free(s->clients);
    free(s);
}

int lb_schedule_next(lb_schedule *s, int64_t *at_ns, uint32_t *group,
                     uint32_t *client_index)
{
    if (s->n == 0)
        return 0;
    client *top = &s->clients[0];
    *at_ns = top->next_ns;
    *group = top->group;
    *client_index = top->index;
    advance(top, &s->groups[top->group], s->end_ns);
    if (top->next_ns == INT64_MAX)
        s->clients[0] = s->clients[--s->n];
    sift_down(s, 0);
    return 1;
}

int64_t lb_schedule_peek(const lb_schedule *s)
{
    return s->n ? s->clients[0].next_ns : INT64_MAX;
}
