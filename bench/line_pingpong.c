/*
 * line_pingpong.c - how long one cache line takes to cross between two
 * CPUs: the cost a spinlock's waiter imposes on the holder each time it
 * looks at the lock, and a hand-over's (src/store/spinlock.c).
 *
 *   line_pingpong [CPU_A CPU_B [ROUND_TRIPS]]   (default 0 1 2000000)
 *
 * Two threads, pinned, pass a counter back and forth through one 64-byte
 * aligned word: each waits until the word holds its turn, then stores the
 * next.  Every store needs the line back from the other CPU, so a round
 * trip is two crossings.  Prints one JSON line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) atomic_long ball;
static long round_trips = 2000000;

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        fprintf(stderr, "line_pingpong: cannot pin to CPU %d\n", cpu);
        exit(1);
    }
}

/* Waits for first, first + 2, ... and answers each with the next. */
static void play(long first)
{
    for (long i = first; i < 2 * round_trips; i += 2) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != i)
            ;
        atomic_store_explicit(&ball, i + 1, memory_order_release);
    }
}

static void *other(void *arg)
{
    pin(*(int *)arg);
    play(1);
    return NULL;
}

int main(int argc, char **argv)
{
    int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
    struct timespec t0, t1;
    pthread_t t;

    if (argc > 3)
        round_trips = atol(argv[3]);
    if (round_trips < 1) {
        fprintf(stderr, "usage: line_pingpong [CPU_A CPU_B [ROUND_TRIPS]]\n");
        return 1;
    }
    pin(a);
    if (pthread_create(&t, NULL, other, &b) != 0)
        return 1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    play(0);
    while (atomic_load(&ball) != 2 * round_trips)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                (double)(t1.tv_nsec - t0.tv_nsec);
    printf("{\"bench\":\"line_pingpong\",\"cpus\":[%d,%d],\"round_trips\":%ld,"
           "\"ns_round_trip\":%.1f,\"ns_one_way\":%.1f}\n",
           a, b, round_trips, ns / (double)round_trips,
           ns / (double)(2 * round_trips));
    return 0;
}
