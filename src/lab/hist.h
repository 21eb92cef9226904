/*
 * hist.h - the lab's latency histogram: log-linear buckets over whole
 * microseconds, 32 per power of two (HdrHistogram's layout with 5
 * significant bits), so a quantile is within 1.6% of the true value at
 * any scale from 1 us to hours, in a fixed 4 KiB with no allocation.
 * Histograms add, so a phase's p99 is the p99 of its seconds merged,
 * not a mean of per-second p99s.
 */
#ifndef SL_LAB_HIST_H
#define SL_LAB_HIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LB_HIST_BUCKETS 1024

typedef struct lb_hist {
    uint64_t n;
    double sum_us; /* for the mean, exact rather than from the buckets */
    uint32_t count[LB_HIST_BUCKETS];
} lb_hist;

void lb_hist_add(lb_hist *h, uint64_t us);
void lb_hist_merge(lb_hist *into, const lb_hist *from);
/* The q-quantile (0..1) in us: the middle of its bucket; 0 when empty. */
double lb_hist_quantile(const lb_hist *h, double q);
double lb_hist_mean(const lb_hist *h);
/* The bucket index of a value, and the lowest value of a bucket. */
size_t lb_hist_bucket(uint64_t us);
uint64_t lb_hist_lower(size_t bucket);

/* Writes the non-empty buckets as "index:count" separated by spaces
 * (nothing for an empty histogram), and the sum as "sum=US" first. */
void lb_hist_write(const lb_hist *h, FILE *out);
/* Reads what lb_hist_write wrote (len bytes, not NUL-terminated) into h,
 * added to what h holds: 0, or -1 when the text is malformed. */
int lb_hist_read(lb_hist *h, const char *text, size_t len);

#endif
