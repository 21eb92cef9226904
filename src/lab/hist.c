/*
 * hist.c - the lab's log-linear latency histogram (hist.h).
 */
#include "lab/hist.h"

#include <stdlib.h>
#include <string.h>

#define SUB_BITS 5
#define SUB (1u << SUB_BITS)

size_t lb_hist_bucket(uint64_t us)
{
    if (us < SUB)
        return (size_t)us;
    unsigned e = 63u - (unsigned)__builtin_clzll(us); /* >= SUB_BITS */
    size_t i = (size_t)(e - SUB_BITS + 1) * SUB +
               (size_t)((us >> (e - SUB_BITS)) & (SUB - 1));
    return i < LB_HIST_BUCKETS ? i : LB_HIST_BUCKETS - 1;
}

uint64_t lb_hist_lower(size_t bucket)
{
    if (bucket < SUB)
        return bucket;
    unsigned e = (unsigned)(bucket / SUB) + SUB_BITS - 1;
    return (uint64_t)(SUB + bucket % SUB) << (e - SUB_BITS);
}

void lb_hist_add(lb_hist *h, uint64_t us)
{
    h->count[lb_hist_bucket(us)]++;
    h->n++;
    h->sum_us += (double)us;
}

void lb_hist_merge(lb_hist *into, const lb_hist *from)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++)
        into->count[i] += from->count[i];
    into->n += from->n;
    into->sum_us += from->sum_us;
}

double lb_hist_quantile(const lb_hist *h, double q)
{
    if (h->n == 0)
        return 0;
    /* The rank of the quantile, 1-based, as the nearest-rank method. */
    uint64_t rank = (uint64_t)(q * (double)h->n + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            double lo = (double)lb_hist_lower(i);
            double hi =
                i + 1 < LB_HIST_BUCKETS ? (double)lb_hist_lower(i + 1) : lo;
            return i < SUB ? lo : (lo + hi) / 2;
        }
    }
    return (double)lb_hist_lower(LB_HIST_BUCKETS - 1);
}

double lb_hist_mean(const lb_hist *h)
{
    return h->n ? h->sum_us / (double)h->n : 0;
}

void lb_hist_write(const lb_hist *h, FILE *out)
{
    if (h->n == 0)
        return;
    fprintf(out, "sum=%.0f", h->sum_us);
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++)
        if (h->count[i])
            fprintf(out, " %zu:%u", i, h->count[i]);
}

int lb_hist_read(lb_hist *h, const char *text, size_t len)
{
    char buf[32];
    size_t i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ')
            i++;
        size_t start = i;
        while (i < len && text[i] != ' ')
            i++;
        size_t n = i - start;
        if (n == 0)
            break;
        if (n >= sizeof(buf))
            return -1;
        memcpy(buf, text + start, n);
        buf[n] = '\0';
        char *end;
        if (strncmp(buf, "sum=", 4) == 0) {
            double s = strtod(buf + 4, &end);
            if (*end)
                return -1;
            h->sum_us += s;
            continue;
        }
        unsigned long idx = strtoul(buf, &end, 10);
        if (*end != ':' || idx >= LB_HIST_BUCKETS)
            return -1;
        unsigned long c = strtoul(end + 1, &end, 10);
        if (*end)
            return -1;
        h->count[idx] += (uint32_t)c;
        h->n += c;
    }
    return 0;
}
