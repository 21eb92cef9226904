/*
 * proxy.h - what the files of `sluice proxy` share; never installed.
 *
 * The proxy is a front end of the server's process (src/server/): the
 * same threads, SO_REUSEPORT listeners, rules reload, metrics and
 * sv_decide(), with its own connections.  Layout: config.c (the YAML
 * proxy config), actions.c (a request to descriptors, the client
 * address), headers.c (collected header fields, hop-by-hop filtering),
 * client.c (one client connection: parsing, deciding, queueing,
 * streaming), upstream.c (the pool of upstream connections and the
 * response side), upstream_tls.c (TLS to an https:// upstream), stats.c
 * (per-route counters and /metrics), reload.c (the config's hot reload:
 * generations shared by the threads), start.c (start-up: the front end
 * handed to sv_server_run), adaptive.c (what
 * each thread measures for the adaptive controller), control.c (the
 * controller on the control thread, docs/adaptive.md).
 */
#ifndef PX_PROXY_H
#define PX_PROXY_H

#include <netinet/in.h>
#include <sys/socket.h>

#include <http_parser.h>
#include <openssl/ssl.h>

#include "runtime/decide.h"
#include "runtime/deadline.h"
#include "http/fields.h"
#include "http/hygiene.h"
#include "runtime/metrics.h"
#include "runtime/reader.h"
#include "http/respond.h"
#include "runtime/send.h"

/* Fixed caps of the config itself (its settings' defaults and bounds are
 * in the settings table, src/settings/table.c). */
#define PX_MAX_ROUTES 256
#define PX_MAX_DESCRIPTORS 16 /* descriptor lists per route */
#define PX_MAX_ACTIONS 8      /* actions (entries) per descriptor */
#define PX_MAX_TRUSTED 64
/* Distinct route prefixes counted since start: a route's counters live
 * on across reloads, so a reload that would pass this fails. */
#define PX_MAX_SLOTS (4 * PX_MAX_ROUTES)
/* The largest unread request body skipped, rather than the connection
 * closed, after the proxy answered the request itself (429, 502 ...). */
#define PX_DISCARD_MAX (64 * 1024)
/* A larger one: after the answer is written, the proxy shuts its side
 * down and reads and drops what the client still sends for at most this
 * long, then closes (nginx's lingering close).  Closing at once, with
 * unread bytes in the socket, would send a reset that can destroy the
 * answer before the client has read it. */
#define PX_LINGER_MS 2000
/* Header fields of one message, counted as well as --max-header-bytes. */
/* Bytes queued for one socket before the other side stops being read:
 * a body streams through without ever being held whole. */
#define PX_MAX_PENDING (256 * 1024)
/* An output buffer larger than this is freed once sent, not kept. */
#define PX_KEEP_OUT (16 * 1024)

typedef enum px_action_kind {
    PX_REMOTE_ADDRESS,
    PX_REQUEST_HEADER,
    PX_PATH,
    PX_METHOD,
    PX_GENERIC_KEY
} px_action_kind;

/* One descriptor entry made from the request (Envoy's rate limit
 * actions).  Strings are owned by the config. */
typedef struct px_action {
    px_action_kind kind;
    char *key;    /* the entry's key */
    char *header; /* request_header: the field name */
    char *value;  /* generic_key: the fixed value */
    int segments; /* path: 0 the whole path, else its first N segments */
} px_action;

/* A descriptor is made only when every action has a value (a
 * request_header action whose header is absent drops it, as Envoy
 * does). */
typedef struct px_descriptor {
    px_action actions[PX_MAX_ACTIONS];
    size_t n;
} px_descriptor;

/* How a route's prefix is matched (docs/proxy.md, "Paths"): against
 * the loose form of the path (every escape decoded, '\' a '/', ";params"
 * dropped, dot segments resolved) without or with case, or against its
 * RFC 3986 form alone. */
typedef enum px_match {
    PX_MATCH_NORMALIZED, /* the default */
    PX_MATCH_CASE_SENSITIVE,
    PX_MATCH_RFC3986
} px_match;

typedef struct px_route {
    char *prefix; /* path prefix; the longest matching route wins */
    size_t prefix_len;
    px_match match;
    char *key; /* the prefix as compared: in lower case when normalized */
    char *domain;
    px_descriptor descriptors[PX_MAX_DESCRIPTORS];
    size_t n_descriptors;
    size_t slot; /* its counters (stats.c); set when published */
} px_route;

typedef struct px_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int bits;
} px_cidr;

typedef struct px_config {
    char *upstream;      /* as written: http[s]://HOST:PORT */
    char *upstream_host; /* HOST:PORT, the Host of requests without one */
    char *upstream_name; /* HOST alone (no brackets) */
    struct sockaddr_storage upstream_addr;
    /* An https:// upstream (upstream_tls.c): the settings as read, and
     * the context px_upstream_tls_load() makes of them. */
    int upstream_https;
    char *upstream_ca;   /* PEM CAs; NULL: the system's store */
    char *upstream_cert; /* a client certificate chain and its key */
    char *upstream_key;
    char *upstream_server_name; /* SNI and the name checked; NULL: HOST */
    int upstream_insecure;      /* the certificate is not verified */
    SSL_CTX *tls;               /* NULL: plain HTTP */
    const char *tls_sni;        /* one of the names above; NULL: none sent */
    uint64_t connect_timeout_ms, response_timeout_ms;
    size_t queue_max;           /* requests held for their delay, per thread */
    uint64_t queue_max_wait_ms; /* longest delay held; longer gets 429 */
    size_t pool_max;            /* idle upstream connections kept per thread */
    int rate_limit_headers;     /* add X-RateLimit-* etc. to responses */
    char *metrics_path;         /* "" when /metrics is not served */
    px_cidr trusted[PX_MAX_TRUSTED];
    size_t n_trusted;
    px_route routes[PX_MAX_ROUTES];
    size_t n_routes;
    /* Once published (reload.c): the threads and connections holding
     * it; immutable until the last lets go and frees it. */
    atomic_int refs;
} px_config;

/* upstream_tls.c: TLS to an https:// upstream, the client side.  Makes
 * cfg->tls from cfg's upstream TLS settings (its files read now): 0, or
 * -1 with err naming the file and what is wrong.  For an http:// upstream
 * it makes nothing, and refuses any of those settings. */
int px_upstream_tls_load(px_config *cfg, char *err, size_t errlen);
/* A WARN in the log when cfg does not verify its upstream: at start and
 * on every reload, so an opt-out is never silent. */
void px_warn_insecure(const px_config *cfg);

/* One upstream connection's TLS, over memory BIOs: the caller feeds what
 * it reads (px_tls_feed) and sends what px_tls_take gives it, so that
 * OpenSSL never touches the socket. */
struct px_worker;
typedef struct px_tls {
    SSL *ssl;             /* NULL: plain HTTP */
    struct px_worker *pw; /* its thread, which keeps a session to resume */
    uint64_t generation;  /* of the config the connection was opened by */
    int open;             /* the handshake is done */
} px_tls;
/* px_tls_read's results besides bytes and 0 (nothing more for now). */
#define PX_TLS_CLOSED (-1) /* the upstream's close_notify */
#define PX_TLS_FAILED (-2) /* a bad record or an alert: msg says which */
/* A client side from cfg->tls, resuming the thread's session of the same
 * generation.  0, or -1 when out of memory. */
int px_tls_start(px_tls *t, const px_config *cfg, struct px_worker *pw,
                 uint64_t generation);
void px_tls_release(px_tls *t);
/* The thread's session dropped (at the end). */
void px_tls_forget(struct px_worker *pw);
/* Bytes read from the socket: 0, or -1 when out of memory. */
int px_tls_feed(px_tls *t, const char *data, size_t len);
/* Appends the records to send: 0, or -1 when out of memory. */
int px_tls_take(px_tls *t, sv_buf *out);
/* Bytes fed but not yet read: they wait for px_tls_read, not the socket. */
int px_tls_buffered(const px_tls *t);
/* Goes on with the handshake: 1 done, 0 more to read, or -1 failed with
 * the reason in msg ("upstream TLS: certificate verify failed: ..."). */
int px_tls_handshake(px_tls *t, char *msg, size_t len);
int px_tls_resumed(const px_tls *t);
/* Decrypted bytes into buf: their count, 0, PX_TLS_CLOSED or
 * PX_TLS_FAILED (with msg). */
int px_tls_read(px_tls *t, char *buf, size_t cap, char *msg, size_t len);
/* Plain text into records: 0, or -1. */
int px_tls_write(px_tls *t, const void *data, size_t len);
/* The close_notify queued (px_tls_take sends it), once the handshake is
 * done: the session stays resumable. */
void px_tls_shutdown(px_tls *t);

/* config.c.  A zeroed config, or NULL: the settings (src/settings/) give
 * it its defaults and read the config file into it.  The caller frees it
 * with px_config_free until it is published. */
px_config *px_config_new(void);
void px_config_free(px_config *cfg);
/* upstream: http://HOST:PORT or https://HOST:PORT, HOST resolved once.  0, or
 * -1 with what is wrong in err ("bad host: 'URL'"). */
int px_set_upstream(px_config *cfg, const char *url, char *err, size_t errlen);
/* The config file's `trusted_proxies` and `routes`, from the YAML tree
 * (src/rules/rules_internal.h): 0, or -1 with "FILE:LINE:COL: message" in
 * err. */
struct sl__ynode;
int px_read_trusted(px_config *cfg, const char *file, const struct sl__ynode *v,
                    char *err, size_t errlen);
int px_read_routes(px_config *cfg, const char *file, const struct sl__ynode *v,
                   char *err, size_t errlen);
struct px_request_view;
/* The route of a request: the longest prefix that matches the path in
 * its route's form; NULL when none does. */
const px_route *px_route_find(const px_config *cfg,
                              const struct px_request_view *req);
/* The path in the form route matches it by: a view into req, *len set. */
const char *px_route_path(const px_route *route,
                          const struct px_request_view *req, size_t *len);

/* headers.c: the hop-by-hop rules for passing fields on (the fields are
 * src/http/fields.c's). */
/* Appends the end-to-end fields as "Name: value\r\n": drops the hop-by-hop
 * ones (RFC 9110, 7.6.1: Connection and the fields it names, Keep-Alive,
 * Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade), the framing
 * (Content-Length; the caller writes its own) and those in `drop`
 * (NULL-terminated, lower case). */
void px_headers_forward(const sv_fields *h, const char *const *drop,
                        sv_buf *out);
/* The request's head as the upstream gets it: origin-form target (from
 * the request's target, origin- or absolute-form), its fields less
 * Expect and the X-Forwarded-* ones (set anew from peer_text), Host if it
 * had none, and length: the body's, -1 for chunked, -2 for none. */
void px_request_head(sv_buf *head, int method, const char *target,
                     size_t target_len, const sv_fields *h,
                     const char *upstream_host, const char *peer_text,
                     int64_t length);
/* The upstream's response head (p parsed it) as the client gets it: its
 * fields, the rate-limit ones when rate is not NULL, the framing for the
 * client (HTTP/1.1 or not), and Connection as *keep_alive says, which it
 * clears when the client must read to the close.  Returns 1 when the body
 * goes in chunks. */
int px_response_head(sv_buf *out, int status, const char *reason,
                     size_t reason_len, const sv_fields *h,
                     const http_parser *p, int head_request, int http11,
                     const sv_buf *rate, int *keep_alive);

/* actions.c: the client's address, as text, believed from X-Forwarded-For
 * only when the peer is a trusted proxy; and a route's descriptors. */
void px_client_address(const px_config *cfg,
                       const struct sockaddr_storage *peer,
                       const char *peer_text, const sv_fields *h, char *out,
                       size_t outlen);
/* The request target's path: its offset in url and its length without
 * the query, for origin-form ("/p?q") and absolute-form
 * ("http://h/p?q"; an empty path there).  0, or -1 for a target that is
 * neither. */
int px_request_target(const char *url, size_t len, size_t *off,
                      size_t *path_len);
/* The path as routes and the path action see it: unreserved characters
 * percent-decoded, empty and "." segments dropped, ".." resolved, a
 * trailing '/' kept (RFC 3986's form); loose, also every escape decoded
 * (once), '\' taken for '/' and each segment's ";params" dropped.  out
 * has room for len + 2 bytes; 0 with *out_len set (NUL-terminated), or
 * -1 for bad percent-encoding, a ".." above the root, or (loose) a %00. */
int px_normalize_path(const char *path, size_t len, int loose, char *out,
                      size_t *out_len);
/* The peer's address as text ("" if it has none). */
void px_peer_text(const struct sockaddr_storage *peer, char *out,
                  size_t outlen);
typedef struct px_request_view {
    int method;
    const char *path; /* without the query, RFC 3986's form */
    size_t path_len;
    const char *loose; /* its loose form, and that in lower case */
    const char *lower;
    size_t loose_len;
    const char *client_addr;
    const sv_fields *headers;
} px_request_view;
/* Fills ds (room for PX_MAX_DESCRIPTORS) and their entries (room for
 * PX_MAX_DESCRIPTORS * PX_MAX_ACTIONS), pointing into the route and
 * the request, and *n_out.  0, or -1 when a header an action reads was
 * sent more than once. */
int px_descriptors(const px_route *route, const px_request_view *req,
                   sv_dec_descriptor *ds, sl_rules_entry *entries,
                   size_t *n_out);

/* stats.c: per-thread, per-route counters (relaxed atomics written by
 * their thread only, summed at scrape time). */
typedef enum px_outcome {
    PX_FORWARDED,       /* reached the upstream */
    PX_QUEUED,          /* held for a leaky_bucket delay first (also counted
                              as forwarded or failed later) */
    PX_LIMITED,         /* 429: over a limit */
    PX_QUEUE_FULL,      /* 429: the delay did not fit the queue */
    PX_BAD_GATEWAY,     /* 502: upstream refused or broke */
    PX_GATEWAY_TIMEOUT, /* 504: upstream connect or response timeout */
    PX_REJECTED,        /* 4xx/5xx of the proxy itself: bad request,
                              upgrade, decision error */
    PX_N_OUTCOMES
} px_outcome;

#define PX_LATENCY_BUCKETS 12
typedef struct px_route_stats {
    _Alignas(64) atomic_uint_fast64_t outcomes[PX_N_OUTCOMES];
    atomic_uint_fast64_t status_class[6]; /* upstream's 1xx..5xx; [0] other */
    atomic_uint_fast64_t latency[PX_LATENCY_BUCKETS];
    atomic_uint_fast64_t latency_count, latency_sum_ns;
} px_route_stats;

/* adaptive.c: per thread and per rule with `controller: gradient` (its
 * slot: its place among them in the rules, at most PX_AD_MAX), one
 * second's window of what the rule let through and refused, and of the
 * requests it let through, the upstream's answer time (request sent to
 * response head) in a log-linear histogram (PX_AD_BUCKETS: 1 us steps
 * to 64 us, then 32 per power of two to 2^28 us; a bucket's middle is
 * within 1.6% of its values), the failures (5xx, the proxy's own 502
 * and 504; untimed when no head came) and the answers that were no
 * failure but came past the rule's slo_p99 (late).  Written by their
 * thread with relaxed atomics, taken and zeroed by the control thread's
 * exchange. */
#define PX_AD_MAX 32
#define PX_AD_BUCKETS 768
typedef struct px_ad_window {
    _Alignas(64) atomic_uint_least32_t hist[PX_AD_BUCKETS];
    atomic_uint_fast64_t allowed, refused, failed, untimed, late;
} px_ad_window;

/* The rules with `controller: gradient` of a set, in order (a rule's
 * slot is its place here): how many, at most max, into out. */
size_t px_ad_rules(const sl_rules *rules, const sl_rule **out, size_t max);
size_t px_ad_bucket(uint64_t ns);
double px_ad_bucket_mid(size_t b); /* seconds */
struct px_decision;
/* The request's decision (pd) is made: counts each adaptive rule's
 * verdict (refused, or let through when go), and returns the mask of
 * slots whose answer px_ad_answer() will time. */
uint32_t px_ad_admit(sv_worker *w, const struct px_decision *pd, int go);
/* The upstream's answer (status, ns since the request was sent; timed 0:
 * no head came, the proxy answered 502 or 504) for the slots of mask. */
void px_ad_answer(sv_worker *w, uint32_t mask, int status, uint64_t ns,
                  int timed);

/* control.c: the controller on the control thread (worker.h's hooks). */
int px_control_start(sv_worker *control);
void px_control_stop(sv_worker *control);
void px_control_metrics(sv_server *s, sv_buf *out);

/* The proxy's state for one worker thread. */
typedef struct px_worker {
    void *idle;    /* idle upstream connections (upstream.c) */
    size_t n_idle;
    size_t queued;            /* requests held for their delay */
    px_config *cfg;           /* this thread's reference (reload.c) */
    uint64_t generation;      /* of cfg */
    uint64_t pool_generation; /* of the idle upstream connections */
    /* upstream_tls.c: the last session an https:// upstream gave this
     * thread, resumed by its next new connection of that generation. */
    SSL_SESSION *tls_session;
    uint64_t tls_session_generation;
    /* The decision of requests answered at once (the memory store); with
     * Redis each client has its own (client.c). */
    struct px_decision *scratch;
    /* adaptive.c: the slot of each rule of ad_rules (by rule->index;
     * PX_AD_NONE when not adaptive), made again when the rules change
     * (their pointer and version). */
    const sl_rules *ad_rules;
    char ad_version[40];
    unsigned char *ad_slot;
    uint64_t ad_slo_ns[PX_AD_MAX]; /* each slot's slo_p99 (0: none) */
} px_worker;
#define PX_AD_NONE 0xff

/* Makes the config again for a reload (tools/cmd_proxy.c: the file, then the
 * flags over it): 0 with *out, or -1 with a message in err. */
typedef int (*px_load_fn)(void *ctx, px_config **out, char *err, size_t errlen);

typedef struct px_proxy {
    int n_workers;
    px_worker *workers;
    /* [worker * (PX_MAX_SLOTS + 1) + slot]; slot 0: no route. */
    px_route_stats *stats;
    px_ad_window *ad; /* [worker * PX_AD_MAX + slot] (adaptive.c) */
    /* reload.c.  lock guards current and the writing of slot_names;
     * generation and n_slots are read without it. */
    pthread_mutex_t lock;
    px_config *current; /* what the threads adopt; one reference */
    atomic_uint_fast64_t generation;
    char *slot_names[PX_MAX_SLOTS + 1]; /* [0] "_none_": no route */
    atomic_size_t n_slots;
    atomic_uint_fast64_t reloads_ok, reloads_failed;
    /* Handshakes with an https:// upstream, by PX_TLS_HS_*. */
    atomic_uint_fast64_t tls_handshakes[3];
    px_load_fn load; /* NULL: nothing to reload (no config file) */
    void *load_ctx;
} px_proxy;

/* start.c: runs until SIGTERM or SIGINT; returns the exit status.  It
 * takes cfg (published, freed at the end); server_cfg and load_ctx are
 * borrowed for the whole run. */
int px_proxy_run(const sv_config *server_cfg, px_config *cfg, px_load_fn load,
                 void *load_ctx);

/* config.c: the thread's current config (adopting one published since);
 * borrowed until the thread's next call.  Connections keep theirs with
 * _ref. */
px_config *px_config_of(sv_worker *w);
void px_config_ref(px_config *cfg);
void px_config_unref(px_config *cfg);

/* reload.c */
/* Publishes the first config, taking it (freed on failure): 0 or -1. */
int px_reload_init(px_proxy *px, px_config *cfg);
void px_reload(void *px);             /* SIGHUP (the front end's reload) */
void px_reload_release(px_proxy *px); /* after the threads stopped */

px_proxy *px_of(sv_worker *w);
px_worker *px_worker_of(sv_worker *w);
px_route_stats *px_stats(sv_worker *w, const px_route *route);
void px_count(sv_worker *w, const px_route *route, px_outcome o);
void px_count_response(sv_worker *w, const px_route *route, int status,
                       uint64_t latency_ns);
/* How a handshake with an https:// upstream ended. */
enum { PX_TLS_HS_NEW, PX_TLS_HS_RESUMED, PX_TLS_HS_FAILED };
void px_count_tls(sv_worker *w, int result);
/* The server's /metrics text followed by the proxy's series. */
void px_metrics_render(sv_worker *w, sv_buf *out);
/* The whole answer to a GET of the metrics path into out; returns
 * whether the connection may stay open (0 when out of memory). */
int px_metrics_answer(sv_worker *w, int keep_alive, sv_buf *out);

/* admit.c: a request's decision inputs, which stay while it waits on the
 * store: its normalised path, the descriptors its route's actions make of
 * it, their statuses, and the rules decision's state.  Each client owns
 * one with Redis; on the memory store the thread's serves every request,
 * answered at once. */
typedef struct px_decision {
    char *path;  /* the request's path, RFC 3986's form; then in the */
    char *loose; /* same block its loose form, and that in lower case */
    char *lower;
    size_t path_cap;       /* of each */
    const px_config *cfg;  /* the client's, which outlives the wait */
    const px_route *route; /* NULL: no route matched */
    sv_dec_descriptor ds[PX_MAX_DESCRIPTORS];
    sl_rules_entry entries[PX_MAX_DESCRIPTORS * PX_MAX_ACTIONS];
    sv_dec_status status[PX_MAX_DESCRIPTORS];
    char client_addr[64];
    size_t n;
    uint64_t t0; /* uv_hrtime when the decision began */
    sv_dec_state *dec;
    uint32_t adaptive; /* px_ad_admit()'s mask of the verdict */
} px_decision;

/* What becomes of the request. */
typedef struct px_verdict {
    enum {
        PX_GO,    /* forward it */
        PX_WAIT,  /* the decision waits on the store */
        PX_HOLD,  /* queue it for delay_ms, then forward it */
        PX_LIMIT, /* 429: over a limit, or the queue is full */
        PX_REFUSE /* an error answer: status, code, msg */
    } what;
    int decided; /* res holds a decision (its rate-limit headers) */
    sv_dec_result res;
    sl_nanos delay;
    uint64_t delay_ms;
    int status;
    const char *code;
    char msg[256];
} px_verdict;

/* The request's decision inputs, with room for a path of path_len: own
 * with Redis, else the thread's.  NULL when out of memory. */
px_decision *px_decision_get(sv_worker *w, px_decision **own, size_t path_len);
void px_decision_free(px_decision *d); /* NULL: no-op */
/* Decides the request routed by cfg (pd->path holds req's path): the
 * verdict, PX_WAIT meaning done(owner) comes later (sd_cancel(*wait)
 * and px_admit_abandon() if the client goes first), after which
 * px_admit_finish() gives it. */
int px_admit(sv_worker *w, const px_config *cfg, px_decision *pd,
             const px_request_view *req, sd_done_fn done, void *owner,
             sd_wait **wait, px_verdict *v);
int px_admit_finish(sv_worker *w, px_decision *pd, px_verdict *v);
void px_admit_abandon(px_decision *pd);
/* PX_LIMIT's answer into out, its headers (the rate-limit ones
 * already in rate, Retry-After added) as the client asked. */
void px_answer_429(const px_decision *pd, const px_verdict *v, int head,
                   int keep_alive, sv_buf *rate, sv_buf *out);

/* client.c */
typedef struct px_client px_client;
void px_client_accept(sv_worker *w);
void px_close_idle(sv_worker *w);
/* The metrics listener's door (--metrics-listen): clients of their own
 * kind, answered GET /metrics and nothing else. */
void px_metrics_accept(sv_listener *l);
void px_metrics_close_idle(sv_listener *l);

/* What an upstream connection tells the client it serves, and asks of
 * it (client.c's; the upstream never calls the client by name). */
typedef struct px_up px_up;
typedef struct px_up_events {
    /* Connected: exactly one of ready and failed (502 or 504) comes per
     * open, maybe before px_upstream_open() returns. */
    void (*ready)(px_client *c, px_up *up);
    void (*failed)(px_client *c, int status, const char *message);
    int (*method)(const px_client *c);
    /* The response's head: status line and fields; body framing decided
     * there.  0, or -1 when the client is gone. */
    int (*head)(px_client *c, int status, const char *reason, size_t reason_len,
                const sv_fields *h, http_parser *p);
    int (*body)(px_client *c, const char *at, size_t len);
    /* The response ended; reusable: the upstream connection may go back
     * to the pool.  The client lets go of up. */
    void (*done)(px_client *c, int reusable);
    /* The upstream broke after the response began: close the client. */
    void (*broken)(px_client *c);
    /* The upstream's queue fell below half of PX_MAX_PENDING. */
    void (*drained)(px_client *c);
    /* Flow control from the response side: the client's pending bytes. */
    size_t (*pending)(const px_client *c);
} px_up_events;

/* upstream.c: the response side.  px_upstream_open() hands the client
 * an upstream connection, from the pool or new, and tells it by ev. */
void px_upstream_open(sv_worker *w, px_client *c, const px_up_events *ev);
/* Queues bytes towards the upstream; 0 or -1 when the write failed. */
int px_upstream_write(px_up *up, const void *data, size_t len);
/* The request has been sent whole: start the response timeout. */
void px_upstream_request_sent(px_up *up);
/* Flow control: stop or resume reading the upstream. */
void px_upstream_pause(px_up *up, int paused);
size_t px_upstream_pending(const px_up *up);
/* The client went away: the connection cannot be reused. */
void px_upstream_abort(px_up *up);
void px_upstream_close_idle(sv_worker *w);

#endif
