/*
 * schedule.h - the load generator's arrivals (`sluice lab load`): groups
 * of clients, each client with its own seeded stream of send times,
 * merged in time order by a heap over the clients.
 *
 * A client's times depend only on (seed, group index, client index), so
 * a seed gives the same arrivals whatever else runs, and only each
 * client's next time is held: memory is one slot per client, however
 * long the run.
 */
#ifndef SL_LAB_SCHEDULE_H
#define SL_LAB_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#define LB_MAX_WINDOWS 16
#define LB_CLASS_NAME 16

typedef enum { LB_POISSON, LB_CONSTANT } lb_arrivals;

/* Clients of one kind: "legit,20,poisson,3" or, active only in windows
 * of the run (seconds from its start), "crowd,35,poisson,4,30-40,90-100".
 * The class is a label (legit, crowd, abuser) the results are kept by. */
typedef struct lb_group {
    char class_name[LB_CLASS_NAME];
    uint32_t clients;
    lb_arrivals arrivals;
    double rate; /* per client, requests per second, > 0 */
    size_t n_windows;
    int64_t window_from_ns[LB_MAX_WINDOWS], window_to_ns[LB_MAX_WINDOWS];
} lb_group;

/* Parses a group's text (NUL-terminated): 0, or -1 with err filled. */
int lb_group_parse(const char *text, lb_group *out, char *err, size_t errlen);

typedef struct lb_schedule lb_schedule;

/* The arrivals of groups[0..n) from time 0 to end_ns; NULL when out of
 * memory.  groups is copied. */
lb_schedule *lb_schedule_new(const lb_group *groups, size_t n, uint64_t seed,
                             int64_t end_ns);
void lb_schedule_free(lb_schedule *s);

/* The next arrival in time order (ties by group, then client): 1 with
 * its time, group and client index set, or 0 when none is left before
 * the end. */
int lb_schedule_next(lb_schedule *s, int64_t *at_ns, uint32_t *group,
                     uint32_t *client);
/* The time of the next arrival without taking it; INT64_MAX when none. */
int64_t lb_schedule_peek(const lb_schedule *s);

#endif
