/*
 * advisor_run.c - `sluice advisor`'s run (advisor.h): the listening
 * socket, the answer, the scraper thread, the server on the calling
 * thread until a stop, then all of it released.  Apart so that the
 * command (tools/cmd_advisor.c) is its options and the parts know
 * nothing of each other's lifetimes.
 */
#include <stdio.h>

#include "adaptive/advice.h"
#include "advisor/advisor.h"

int av_run(const av_options *o, atomic_int *stop)
{
    char shown[300];
    av_answer a;
    /* At least 1 s: the protocol's floor, and time for a poll to land. */
    av_answer_init(&a, 3 * o->step_ms < AD_MIN_VALID_FOR_MS
                           ? AD_MIN_VALID_FOR_MS
                           : 3 * o->step_ms);
    av_http *h = av_http_new(o, &a, shown, sizeof(shown));
    if (h == NULL) {
        av_answer_release(&a);
        return 1;
    }
    fprintf(stderr,
            "sluice advisor: listening on %s; %zu node(s), step %lldms, "
            "season %zu steps, horizon %lldms\n",
            shown, o->n_nodes, (long long)o->step_ms, o->hw.season,
            (long long)o->horizon_ms);
    av_scraper *s = av_scraper_start(o, &a, stop);
    if (s == NULL) {
        fprintf(stderr, "sluice advisor: cannot start the scraper\n");
        atomic_store(stop, 1);
        av_http_serve(h, stop); /* closes what it opened */
        av_http_free(h);
        av_answer_release(&a);
        return 1;
    }
    av_http_serve(h, stop);
    av_scraper_join(s);
    av_http_free(h);
    av_answer_release(&a);
    fprintf(stderr, "sluice advisor: stopped\n");
    return 0;
}
