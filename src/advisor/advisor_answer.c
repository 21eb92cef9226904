/*
 * advisor_answer.c - the answer of `sluice advisor` (advisor.h): the
 * recommendations JSON and its ETag, which the scraper thread publishes
 * each step and the server reads for each request, under one mutex.
 * Apart because it is all the two threads share: the server needs no
 * more than av_answer_read(), whatever serves HTTP.
 */
#include <stdio.h>
#include <stdlib.h>

#include "adaptive/advice.h"
#include "advisor/advisor.h"
#include "sluice.h"

static int64_t wall_ms(void)
{
    return sl_clock_realtime() / SL_NS_PER_MS;
}

void av_answer_init(av_answer *a, int64_t valid_for_ms)
{
    *a = (av_answer){.valid_for = valid_for_ms};
    pthread_mutex_init(&a->lock, NULL);
    av_answer_publish(a, json_array(), 0);
}

void av_answer_release(av_answer *a)
{
    free(a->json);
    a->json = NULL;
    pthread_mutex_destroy(&a->lock);
}

void av_answer_publish(av_answer *a, json_t *recs, size_t n_recs)
{
    /* The time is taken under the lock, and the text made with it, so
     * that computed_at_ms and the ETag are one number even when two
     * answers come within a millisecond (the first and the initial). */
    pthread_mutex_lock(&a->lock);
    int64_t now = wall_ms();
    if (now <= a->computed_at)
        now = a->computed_at + 1; /* a new answer, a new ETag */
    json_t *root = json_pack("{s:s,s:I,s:I,s:o}", "protocol", AD_PROTOCOL,
                             "computed_at_ms", (json_int_t)now, "valid_for_ms",
                             (json_int_t)a->valid_for, "recommendations", recs);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (text != NULL) { /* out of memory: the last answer stays */
        free(a->json);
        a->json = text;
        a->computed_at = now;
        a->n_recs = n_recs;
        snprintf(a->etag, sizeof(a->etag), "\"%lld\"", (long long)now);
    }
    pthread_mutex_unlock(&a->lock);
}

void av_answer_expire(av_answer *a)
{
    pthread_mutex_lock(&a->lock);
    int stale = a->n_recs > 0 && wall_ms() - a->computed_at >= a->valid_for;
    pthread_mutex_unlock(&a->lock);
    if (stale)
        av_answer_publish(a, json_array(), 0);
}

void av_answer_read(av_answer *a,
                    void (*serve_cb)(void *priv, const char *json,
                                     const char *etag),
                    void *priv)
{
    pthread_mutex_lock(&a->lock);
    serve_cb(priv, a->json, a->etag);
    pthread_mutex_unlock(&a->lock);
}
