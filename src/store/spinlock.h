/*
 * spinlock.h - the memory store's shard lock: a test-and-set lock whose
 * waiters back off, and remember for the next waiter how contended the
 * lock has lately been.
 *
 * A decision holds a shard for some 15 ns, so a lock that sleeps would
 * cost more than the work it guards; the uncontended path is one exchange
 * and one store.  What a waiter must avoid is the holder's cache line:
 * every look at the lock takes the line from the holder, which wants it
 * back for its next decision, and between the two cores of the machine
 * the benchmarks run on a line takes 40-310 ns to cross, up to thirteen
 * decisions' worth (docs/benchmarks.md, "The machine").  So a
 * waiter backs off exponentially between looks, and once two threads keep
 * meeting on one shard (a hot key) each waiter starts from the back-off
 * the last one handed on (spinlock.c): the holder then decides long runs
 * while the line stays put.  The memory of contention lasts ~100 us, so a
 * lone collision on a quiet shard still waits a pause or two.
 */
#ifndef SL_STORE_SPINLOCK_H
#define SL_STORE_SPINLOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct sl__spinlock {
    atomic_uint held;
    /* When a waiter last took the lock (in 4 us ticks, bits 31..4) and
     * the power of two of pauses the next waiter starts with (bits 3..0).
     * Written only by the holder; read by waiters. */
    atomic_uint heat;
} sl__spinlock;

enum { SL__SPIN_HOT_TICKS = 25 }; /* ticks the heat is remembered */

/* The heat's clock: CLOCK_MONOTONIC in ticks of 4,096 ns, 32 bits. */
unsigned sl__spin_tick(void);

/* The level a waiter starts from at tick now: the heat's, if it was
 * handed on at most SL__SPIN_HOT_TICKS ago (its 28-bit tick wraps every
 * 18 minutes, harmlessly: at worst one waiter starts too patient). */
static inline unsigned sl__spin_start_level(unsigned heat, unsigned now)
{
    return ((now - (heat >> 4)) & 0x0fffffffu) <= SL__SPIN_HOT_TICKS ? heat & 15
                                                                     : 0;
}

void sl__spin_wait(sl__spinlock *l);

/* 1 if another thread held the lock and this one waited for it. */
__attribute__((always_inline)) static inline int sl__spin_lock(sl__spinlock *l)
{
    if (__builtin_expect(
            atomic_exchange_explicit(&l->held, 1, memory_order_acquire), 0)) {
        sl__spin_wait(l);
        return 1;
    }
    return 0;
}

__attribute__((always_inline)) static inline void
sl__spin_unlock(sl__spinlock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif
