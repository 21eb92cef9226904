/*
 * tls.h - TLS on the daemon's listeners (OpenSSL 3.0): a certificate
 * chain and key, and optionally a CA that clients' certificates must
 * chain to (mutual TLS).  The connection machine (conn.c) runs each
 * connection's TLS over memory BIOs on the thread's loop; this file
 * keeps the contexts they are made from, and reloads them, and counts
 * each listener's handshakes.  Which listener takes which context is
 * tls_listeners.c's.
 */
#ifndef SV_TLS_H
#define SV_TLS_H

#include <stdatomic.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "runtime/buf.h"

typedef struct sv_tls sv_tls;

/* The files (paths; cert NULL: none given; client_ca NULL: no client
 * certificates asked). */
typedef struct sv_tls_files {
    const char *cert, *key, *client_ca;
} sv_tls_files;

/* Handshakes, by how they ended (sluice_tls_handshakes_total). */
enum {
    SV_TLS_OK,
    SV_TLS_CLIENT_CERT, /* mutual TLS: no client certificate, or a bad one */
    SV_TLS_PLAINTEXT,   /* plain text sent to a TLS listener */
    SV_TLS_TIMEOUT,     /* not done within --read-timeout */
    SV_TLS_ERROR,       /* another failure: versions, ciphers, garbage */
    SV_TLS_N
};

/* The files loaded and checked (the key matches the certificate): the
 * context, or NULL with err naming the file and what is wrong, and the
 * flag it was given with: --tls-cert, or with a listener's name
 * ("admin", copied; NULL: the shared files) --admin-tls-cert. */
sv_tls *sv_tls_new(const sv_tls_files *files, const char *listener, char *err,
                   size_t errlen);
/* The files read again (SIGHUP): 0 with the new context in force for
 * new connections (those open keep theirs), or -1 with err, the old one
 * still in force. */
int sv_tls_reload(sv_tls *t, char *err, size_t errlen);
void sv_tls_free(sv_tls *t); /* NULL: no-op */

/* What a listener speaks, for ALPN. */
typedef struct sv_tls_alpn {
    const unsigned char *names; /* wire format: length-prefixed, ours first */
    unsigned int len;
    int required; /* nothing in common: the handshake fails (gRPC's h2) */
} sv_tls_alpn;

/* A server side of one connection, from the context in force, over
 * memory BIOs (the caller moves the bytes); alpn may be NULL.  NULL when
 * out of memory. */
SSL *sv_tls_session(sv_tls *t, const sv_tls_alpn *alpn);
/* The failure of a handshake that ended in SSL_ERROR_SSL: SV_TLS_CLIENT_CERT
 * or SV_TLS_ERROR. */
int sv_tls_failure(SSL *ssl);

/* A listener's TLS: the context its connections' sessions come from, and
 * its handshakes, counted per listener whether the context is its own or
 * the shared one. */
typedef struct sv_tls_listener {
    sv_tls *tls;      /* NULL: plain text */
    int own;          /* its own files, not the shared ones */
    const char *name; /* the series' label: "http", "grpc", "admin" */
    atomic_uint_fast64_t handshakes[SV_TLS_N];
} sv_tls_listener;

/* A handshake on l ended so (SV_TLS_*). */
void sv_tls_count(sv_tls_listener *l, int result);
/* The series of the n listeners for /metrics (none if none speaks TLS). */
void sv_tls_metrics(sv_tls_listener *l, int n, sv_buf *out);

#endif
