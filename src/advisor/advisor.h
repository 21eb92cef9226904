/*
 * advisor.h - `sluice advisor` as a service (prefix av_; docs/advisor.md):
 * the reference advisor of the sluice-advisor/1 protocol.  Every step it
 * scrapes each sluice node's /metrics and /v1/rules, turns the per-rule
 * decision counters into demand per rule's period, forecasts it with
 * additive seasonal Holt-Winters (src/adaptive/holt_winters.c) and serves
 * recommendations on GET /v1/recommendations.
 *
 * Two threads: the scraper (advisor_scrape.c: blocking HTTP with
 * deadlines, feeding the demand model of advisor_model.c) and the server
 * (advisor_http.c), which answers from the last answer the scraper
 * published (advisor_answer.c), so that a slow or dead node never delays
 * an answer.  advisor_run.c starts and stops them; tools/cmd_advisor.c
 * reads the options.
 */
#ifndef AV_ADVISOR_H
#define AV_ADVISOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "adaptive/holt_winters.h"
#include "adaptive/scrape.h"

#define AV_MAX_NODES 64

/* What the command's flags set; the strings are borrowed for the run. */
typedef struct av_options {
    char *nodes[AV_MAX_NODES]; /* base URLs of the sluice nodes */
    size_t n_nodes;
    const char *listen; /* HOST:PORT */
    /* Serve over TLS with this certificate chain and key (both, or
     * neither); ask for a bearer token, the file's first line (NULL:
     * none). */
    const char *tls_cert, *tls_key, *token_file;
    int64_t step_ms, season_ms, horizon_ms;
    hw_params hw; /* hw.season: steps a season */
    double headroom;
} av_options;

/* Scrapes and serves until *stop is set (a signal handler may set it):
 * 0, or 1 when it could not start (said on stderr). */
int av_run(const av_options *o, atomic_int *stop);

/* ---- advisor_answer.c: the answer the scraper publishes and the server
 * reads, under its lock ---- */

typedef struct av_answer {
    pthread_mutex_t lock;
    char *json;          /* owned; the body of a 200 */
    char etag[32];       /* "\"<computed_at_ms>\"" */
    int64_t computed_at; /* Unix ms */
    int64_t valid_for;   /* ms */
    size_t n_recs;
} av_answer;

/* An answer valid for valid_for_ms, with no recommendations yet. */
void av_answer_init(av_answer *a, int64_t valid_for_ms);
void av_answer_release(av_answer *a);
/* Publishes recs (stolen: a JSON array of n_recs recommendations) as the
 * answer computed now; out of memory, the last answer stays. */
void av_answer_publish(av_answer *a, json_t *recs, size_t n_recs);
/* An answer no step has renewed for valid_for_ms is withdrawn (none is
 * better than a stale one): publishes no recommendations when a's are
 * that old. */
void av_answer_expire(av_answer *a);
/* Calls serve_cb with the answer in force: its JSON (the body of a 200)
 * and its ETag, borrowed for the call only (a's lock is held). */
void av_answer_read(av_answer *a,
                    void (*serve_cb)(void *priv, const char *json,
                                     const char *etag),
                    void *priv);

/* ---- advisor_model.c: the demand model, one Holt-Winters model a rule;
 * no I/O, no clock ---- */

typedef struct av_model av_model;

/* NULL when out of memory; av_model_free() frees (NULL: a no-op). */
av_model *av_model_new(const av_options *o);
void av_model_free(av_model *m);
/* One complete scrape, taken at t (monotonic ms): each node's counters
 * (o->n_nodes of them, taken) and the rules of the first node. */
void av_model_step(av_model *m, as_metrics *now, const as_rules *rules,
                   int64_t t);
/* The recommendations at now (Unix ms), a JSON array of *n_recs (the
 * caller's), or NULL when out of memory. */
json_t *av_model_recommend(const av_model *m, int64_t now, size_t *n_recs);

/* ---- advisor_scrape.c: the scraper thread ---- */

typedef struct av_scraper av_scraper;

/* Starts it, publishing into a until *stop: NULL when it cannot start. */
av_scraper *av_scraper_start(const av_options *o, av_answer *a,
                             atomic_int *stop);
/* Waits for it to stop (*stop set), and frees it. */
void av_scraper_join(av_scraper *s);

/* ---- advisor_http.c: the HTTP server ---- */

typedef struct av_http av_http;

/* The server of a's answer, listening on o->listen (HOST:PORT;
 * [v6]:PORT) with o's TLS and token, and in shown the address it got:
 * NULL when it cannot (said on stderr, naming the flag and file). */
av_http *av_http_new(const av_options *o, av_answer *a, char *shown,
                     size_t shown_len);
/* Serves GET and HEAD /v1/recommendations until *stop. */
void av_http_serve(av_http *h, atomic_int *stop);
void av_http_free(av_http *h); /* after the serve; NULL: no-op */

#endif
