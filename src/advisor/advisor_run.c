/*
 * advisor_run.c - `sluice advisor`'s run (advisor.h): the listening
 * socket, the answer, the scraper thread, the server on the calling
 * thread until a stop, then all of it released.  Apart so that the
 * command (tools/cmd_advisor.c) is its options and the parts know
 * nothing of each other's lifetimes.
 */
#include <stdio.h>
#include <unistd.h>

#include "adaptive/advice.h"
#include "advisor/advisor.h"

int av_run(const av_options *o, atomic_int *stop)
{
    char shown[300];
    int lfd = av_http_listen(o->listen, shown, sizeof(shown));
    if (lfd < 0)
        return 1;
    av_answer a;
    /* At least 1 s: the protocol's floor, and time for a poll to land. */
    av_answer_init(&a, 3 * o->step_ms < AD_MIN_VALID_FOR_MS
                           ? AD_MIN_VALID_FOR_MS
                           : 3 * o->step_ms);
    fprintf(stderr,
            "sluice advisor: listening on %s; %zu node(s), step %lldms, "
            "season %zu steps, horizon %lldms\n",
            shown, o->n_nodes, (long long)o->step_ms, o->hw.season,
            (long long)o->horizon_ms);
    av_scraper *s = av_scraper_start(o, &a, stop);
    if (s == NULL) {
        fprintf(stderr, "sluice advisor: cannot start the scraper\n");
        close(lfd);
        av_answer_release(&a);
        return 1;
    }
    av_http_serve(lfd, &a, stop);
    av_scraper_join(s);
    close(lfd);
    av_answer_release(&a);
    fprintf(stderr, "sluice advisor: stopped\n");
    return 0;
}
