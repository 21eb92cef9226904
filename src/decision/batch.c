/*
 * batch.c - the parts a thread holds while a script call is out on its
 * one Redis connection, to be sent together as one batch (one EVALSHA
 * deciding each as if alone, docs/stores.md "Batches") when the reply
 * comes: pipelining alone still costs Redis a command and a script run
 * per decision, which is what it runs out of first when many nodes
 * share it.
 */
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"

int sd_held_push(sd_held *h, sd_part *p)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        sd_part **grown = realloc(h->parts, cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        h->parts = grown;
        h->cap = cap;
    }
    h->parts[h->n++] = p;
    return 0;
}

size_t sd_held_take(sd_held *h, sd_part **out, void (*drop)(sd_part *))
{
    size_t k = 0, take = 0;
    while (take < h->n && k < SD_MAX_BATCH) {
        sd_part *p = h->parts[take++];
        if (p->c->done || p->c->wait->owner == NULL)
            drop(p);
        else
            out[k++] = p;
    }
    h->n -= take;
    memmove(h->parts, h->parts + take, h->n * sizeof(*h->parts));
    return k;
}

void sd_held_release(sd_held *h)
{
    free(h->parts);
    *h = (sd_held){0};
}
