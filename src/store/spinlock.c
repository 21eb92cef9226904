/*
 * spinlock.c - the waiting half of the shard lock (spinlock.h).
 *
 * A waiter pauses 2^level times, looks, and doubles the pause up to 2^10
 * (~30 us here) until the lock is free.  The level it starts from is the
 * lock's heat: the level the last waiter handed on, if that waiter took
 * the lock less than ~100 us ago, else 0.  A waiter that had to look more
 * than once found the holder still at it after its whole first pause, and
 * hands on one level more; one that found the lock free at its first look
 * hands on its own.  So on a hot key, where the holder decides back to
 * back, the level climbs to the top within a few hand-overs and the holder
 * keeps the lock for runs of ~1,000 decisions; where threads only meet
 * now and then the holder is gone by the first look, nothing climbs, and
 * a quiet 100 us forgets it all.
 *
 * The clock is read only here, never on the uncontended path.  After 4,096
 * pauses (~120 us, far past any decision) the holder must have been
 * descheduled: each further look is preceded by a yield.
 */
#include <sched.h>
#include <time.h>

#include "store/spinlock.h"

enum {
    TICK_SHIFT = 12, /* the heat's clock: ticks of 4,096 ns */
    LEVEL_MAX = 10,  /* at most 2^10 pauses between looks */
    SPIN_MAX = 4096, /* pauses before each look also yields */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

unsigned sl__spin_tick(void)
{
    struct timespec ts;
    uint64_t ns;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return (unsigned)(ns >> TICK_SHIFT);
}

void sl__spin_wait(sl__spinlock *l)
{
    unsigned level = sl__spin_start_level(
        atomic_load_explicit(&l->heat, memory_order_relaxed), sl__spin_tick());
    unsigned wait = 1u << level, spent = 0, looks = 0;

    do {
        do {
            if (spent >= SPIN_MAX)
                sched_yield();
            else
                spent += wait;
            for (unsigned i = 0; i < wait; i++)
                cpu_relax();
            if (wait < 1u << LEVEL_MAX)
                wait *= 2;
            looks++;
        } while (atomic_load_explicit(&l->held, memory_order_relaxed));
    } while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire));

    if (looks > 1 && level < LEVEL_MAX)
        level++;
    atomic_store_explicit(&l->heat, sl__spin_tick() << 4 | level,
                          memory_order_relaxed);
}
