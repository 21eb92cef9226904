/*
 * tls.h - TLS on the daemon's listeners (OpenSSL 3.0): one certificate
 * chain and key for every listener, and optionally a CA that clients'
 * certificates must chain to (mutual TLS).  The connection machine
 * (conn.c) runs each connection's TLS over memory BIOs on the thread's
 * loop; this file keeps the context they are made from, and reloads it.
 */
#ifndef SV_TLS_H
#define SV_TLS_H

#include <stdatomic.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "runtime/buf.h"

typedef struct sv_tls sv_tls;

/* The files (paths; client_ca NULL: no client certificates asked). */
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
 * context, or NULL with err naming the file and what is wrong. */
sv_tls *sv_tls_new(const sv_tls_files *files, char *err, size_t errlen);
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
/* A handshake ended so (SV_TLS_*). */
void sv_tls_count(sv_tls *t, int result);
/* The failure of a handshake that ended in SSL_ERROR_SSL: SV_TLS_CLIENT_CERT
 * or SV_TLS_ERROR. */
int sv_tls_failure(SSL *ssl);
/* Its series for /metrics. */
void sv_tls_metrics(sv_tls *t, sv_buf *out);

#endif
