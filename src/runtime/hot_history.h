/*
 * hot_history.h - the status page's last 10 minutes (hot.h): rule
 * decisions, within and over the limit, in 5 s buckets, in all and for
 * the few rules that took the most.
 *
 * A thread's ring holds, for each bucket, its totals and the counts of
 * the first SV_HIST_RULES rules it decided in that bucket; the rules
 * after those count in the totals only (the page shows them as "other
 * rules").  The memory is fixed (46 KiB a thread); a decision
 * costs a compare of at most SV_HIST_RULES hashes.  Not locked: the
 * thread's sv_hot lock covers it.
 */
#ifndef SV_HOT_HISTORY_H
#define SV_HOT_HISTORY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SV_HIST_STEP_S 5  /* seconds of a bucket */
#define SV_HIST_STEPS 120 /* 10 minutes of buckets */
#define SV_HIST_RULES 5   /* rules with a series of their own, a bucket */
#define SV_HIST_NAME 48   /* bytes of a rule's id kept */

typedef struct sv_hist_rule {
    uint64_t hash; /* sv_hot_hash of the rule's id */
    uint32_t within, over;
    uint8_t name_len;
    char name[SV_HIST_NAME];
} sv_hist_rule;

typedef struct sv_hist_bucket {
    int64_t epoch; /* now / 5 s of its counts */
    uint64_t within, over;
    size_t n_rules;
    sv_hist_rule rules[SV_HIST_RULES];
} sv_hist_bucket;

typedef struct sv_hist {
    sv_hist_bucket steps[SV_HIST_STEPS];
} sv_hist;

/* n bytes as a person can read them: printable ASCII as is, other bytes
 * (a client's, or a cut UTF-8 sequence) as \xNN; the first 256 only. */
json_t *sv_readable_text(const char *s, size_t n);

/* One decision of rule (its id, n bytes, and hash) at epoch (now / 5 s). */
void sv_hist_count(sv_hist *h, int64_t epoch, const char *rule, size_t n,
                   uint64_t hash, int over);

/* Threads' rings summed for a report. */
typedef struct sv_hist_sum sv_hist_sum;

sv_hist_sum *sv_hist_sum_new(int64_t epoch); /* NULL when out of memory */
void sv_hist_sum_add(sv_hist_sum *sum, const sv_hist *h);

/* {"step_s", "points": [{"t_ms", "within", "over"}...], "rules":
 * [{"rule", "decisions": [...], "over_limit": [...]}...], "other":
 * {"decisions": [...], "over_limit": [...]}}: the SV_HIST_RULES rules
 * that decided the most, each with a number per point; "other" the
 * rest.  Frees sum. */
json_t *sv_hist_sum_json(sv_hist_sum *sum);

#endif
