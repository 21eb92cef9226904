/*
 * command.h - what a Redis protocol connection's commands do: the
 * session that runs them one at a time and answers each into the
 * connection's output, waiting on the store when a decision must.
 */
#ifndef RP_COMMAND_H
#define RP_COMMAND_H

#include "resp/throttle.h"
#include "runtime/decide.h"

/* rp_run() besides SV_AGAIN: the reply is written... */
#define RP_REPLIED 0
#define RP_CLOSE 2 /* ...and the connection closes after it (QUIT) */

/* One connection's: its worker, its door (for the counters) and the state
 * of the command that waits on the store, if one does.  Embedded in the
 * connection; rp_session_init() it, rp_session_release() it. */
typedef struct rp_session {
    uint64_t id;       /* CLIENT ID: the process's sessions in order */
    sv_worker *w;
    int door;          /* index of the door in the worker's doors */
    sd_done_fn resume; /* with owner: the waiting command's decision came */
    void *owner;
    sd_wait *wait; /* the round a command waits on, or NULL */
    int waiting;   /* which command waits: 0 none, else its kind + 1 */
    uint64_t t0;   /* uv_hrtime when it came */
    /* The waiting command's arguments, copied: the connection's bytes
     * move on while it waits. */
    sv_buf bytes;
    /* CL.THROTTLE and GCRA: the limit (kept while commands name the same
     * one, so one connection repeating a command makes it once). */
    rp_throttle th;
    sl_limit *limit;
    sl_check_item item;
    sd_check check;
    /* SLUICE.CHECK: the rules decision, its arrays made on first use
     * (most connections never send one): SV_MAX_DESCRIPTORS descriptors
     * and statuses, RP_MAX_ARGS / 2 entries. */
    sv_dec_state *dec;
    sv_dec_descriptor *ds;
    sl_rules_entry *entries;
    sv_dec_status *status;
    size_t n_ds;
    sv_dec_result res;
} rp_session;

void rp_session_init(rp_session *s, sv_worker *w, int door, sd_done_fn resume,
                     void *owner);
/* The connection goes: a waiting command is given up. */
void rp_session_release(rp_session *s);

/*
 * Runs the command argv[0..argc) (argc >= 1), its reply appended to out:
 * RP_REPLIED, RP_CLOSE, or SV_AGAIN when it waits on the store (resume
 * (owner) runs once; then rp_finish() writes its reply).  argv is
 * borrowed for the call only (a command may point its elements elsewhere).
 */
int rp_run(rp_session *s, rp_str *argv, size_t argc, sv_buf *out);
void rp_finish(rp_session *s, sv_buf *out);

/* Counters of the door (sv_stats): a command answered, refused. */
void rp_count(rp_session *s, int error);

/* decide.c: the commands that decide (CL.THROTTLE, GCRA, SLUICE.CHECK).
 * The kinds of rp_session.waiting, less one. */
enum { RP_WAIT_THROTTLE, RP_WAIT_RULES };
int rp_throttle_run(rp_session *s, rp_throttle_kind kind, rp_str *argv,
                    size_t argc, sv_buf *out);
int rp_check_run(rp_session *s, rp_str *argv, size_t argc, sv_buf *out);

#endif
