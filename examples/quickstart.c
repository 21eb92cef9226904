/*
 * quickstart.c - the README's example, complete: 100 requests per minute
 * per user with GCRA, on the embedded store.  Built and run by CTest
 * (test_quickstart), which also checks that the README quotes this file.
 */
#include <stdio.h>

#include "sluice.h"

int main(void)
{
    sl_limit_config cfg = {.algorithm = SL_GCRA, .limit = 100, .period = 60 * SL_NS_PER_SEC};
    sl_limit *limit;
    sl_store *store = sl_memory_store_new(NULL);
    sl_decision d;
    int allowed = 0;

    if (store == NULL || sl_limit_new(&cfg, &limit, NULL, 0) != 0)
        return 1;
    sl_nanos now = sl_clock_realtime();
    for (int i = 0; i < 150; i++) {
        if (sl_check(store, limit, "user:42", 7, 1, now, &d) != 0)
            return 1;
        allowed += d.allowed;
    }
    /* d.allowed, d.remaining, d.retry_after, d.reset_after, d.delay */
    printf("allowed %d of 150; last: remaining %lld, retry after %lld ns\n",
           allowed, (long long)d.remaining, (long long)d.retry_after);
    sl_limit_free(limit);
    sl_store_free(store);
    return allowed == 100 && d.retry_after == 600000000 ? 0 : 1;
}
