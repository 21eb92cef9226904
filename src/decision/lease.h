/*
 * lease.h - a thread's leases of fixed_window units that Redis counted
 * for it (lease.c; the proof that they never let a window pass its limit
 * is docs/stores.md, "Leases"), and their return (lease_return.c).
 */
#ifndef SD_LEASE_H
#define SD_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "decision/decision.h"
#include "redis/redis_proto.h"

typedef struct sd_leases sd_leases;

/* The key bytes an entry holds: a longer key never leases (its calls go
 * to Redis as they are).  SD_LEASE_MIN_BYTES (decision.h) is one bucket. */
#define SD_LEASE_KEY_MAX 138

/* Units a thread gives back, the window they were charged in, and the
 * Redis key they were charged under (lease.lua's return); a bucket's
 * (lease_bucket.lua) has window_ns SD_LEASE_NO_WINDOW, its burst in
 * window_s, and goes back to the field of holder. */
#define SD_LEASE_NO_WINDOW (-1)
typedef struct sd_lease_return {
    int64_t units, window_s, window_ns;
    int64_t limit, period; /* the numbers it was granted under */
    uint64_t ident, holder;
    uint16_t key_len;
    char key[SD_LEASE_KEY_MAX];
} sd_lease_return;

/* Returns waiting to be sent: beyond these, units are lost (counted
 * against their window, never minted; sluice_lease_units_lost_total). */
#define SD_LEASE_PENDING 256

/* A table of at most bytes (allocated now, never grown), counting into
 * stats (borrowed, outlives it): NULL below SD_LEASE_MIN_BYTES or out of
 * memory. */
sd_leases *sd_leases_new(size_t bytes, sd_stats *stats);
void sd_leases_free(sd_leases *ls); /* NULL: no-op */

/* The whole check answered from leases, when it does not record, every
 * item has lease terms and a cost of at least 1, and a live lease of its
 * limit and key holds that cost: 1 with the units taken and check's
 * results set (rc 0, allowed), or 0: it goes to Redis. */
int sd_leases_answer(sd_leases *ls, sd_check *check, sl_nanos now);

/* The lease each item of check asks beyond its cost on the call about to
 * go at now, into asks[0 .. check->n): 0 units for an item without
 * terms, a key seen for the first time, a recording or a cost of 0; else
 * the key's rate on this thread times a lease's lifetime, at most
 * lease_share of the limit (of a bucket's burst), with lease_max and this
 * thread's holder id. */
void sd_leases_asks(sd_leases *ls, const sd_check *check, sl_nanos now,
                    sl__redis_ask *asks);

/* What Redis granted check's items on a call asked at asked_at (on the
 * clock of later answers; before Redis decided it): each: the items'
 * decisions; grants[i].units > 0 for a lease.  Kept as leases until
 * asked_at + min(time to the window's end, lease_max) less the clocks'
 * margin; a grant that cannot be kept (stale: the rules changed, stale
 * set; no room) is returned. */
void sd_leases_learn(sd_leases *ls, const sd_check *check,
                     const sl_decision *each, const sl__redis_grant *grants,
                     sl_nanos asked_at, int stale);

/* What a call's asks are given back by when its result is not learnt:
 * the reply came after the call was decided without it (a timeout), or
 * the check was cancelled.  Redis counted those grants; the items' keys
 * and numbers are copied, since the check is the front end's and may be
 * gone by then. */
typedef struct sd_lease_backs sd_lease_backs;

/* The copies for check's call asked at asked_at with asks (from
 * sd_leases_asks): NULL when no item asked, or out of memory (the grants
 * are then lost, as before: counted, never minted).  free() frees it. */
sd_lease_backs *sd_leases_backs_new(const sd_leases *ls, const sd_check *check,
                                    const sl__redis_ask *asks,
                                    sl_nanos asked_at);
/* grants[0 .. n) of b's call, none of them learnt: each to the returns
 * (a bucket's only when no return sent since it was asked may have
 * dropped its holder's field, and no lease of its key is held: its
 * return drops the whole field). */
void sd_leases_give_back_late(sd_leases *ls, const sd_lease_backs *b,
                              const sl__redis_grant *grants);

/* Moves to the returns what is due at now: leases near their expiry, or
 * idle; counts the units of leases found expired as lost. */
void sd_leases_sweep(sd_leases *ls, sl_nanos now);
/* Every lease to the returns, and the table empty: the numbers of some
 * limit changed, or the thread stops. */
void sd_leases_clear(sd_leases *ls);
/* Takes up to max pending returns into out, to be sent at now (grants
 * to calls asked no later are then not kept): how many. */
size_t sd_leases_take_returns(sd_leases *ls, sd_lease_return *out, size_t max,
                              sl_nanos now);

/* A return run's arguments (lease.lua): up to SD_RETURN_BATCH keys, which
 * must share a slot on a Cluster. */
#define SD_RETURN_BATCH 64
/* Room for a bucket's numbers "B L P p s n" (lease_return.c). */
#define SD_RETURN_NUM_LEN 96
typedef struct sd_return_call {
    int argc;
    const char *argv[4 + 4 * SD_RETURN_BATCH];
    size_t lens[4 + 4 * SD_RETURN_BATCH];
    char nums[1 + 3 * SD_RETURN_BATCH][SD_RETURN_NUM_LEN];
    char *names; /* the keys' names, each NUL-terminated; the caller frees */
} sd_return_call;

/* The call giving rs[0 .. n) back on the store of key space ks, its
 * script named by ref (sd_redis_script_ref), at now when ks does not use
 * the server's clock: 0, or -1 (n too large, out of memory). */
int sd_lease_return_args(const sl__redis_keyspace *ks, const char *ref,
                         const sd_lease_return *rs, size_t n, sl_nanos now,
                         sd_return_call *out);

/* Debug check of the invariants (the comment above struct sd_lease):
 * 0, or -1. */
int sd_leases_check(const sd_leases *ls);

#endif
