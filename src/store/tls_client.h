/*
 * tls_client.h - sluice's TLS client (OpenSSL 3.0): a context made once
 * from its files, and one session per connection over its socket.  The
 * Redis store's (from sl_redis_options' tls fields, or a rediss:// URL),
 * for its blocking connection (redis_conn.c) and the daemon's
 * asynchronous ones (src/decision/link_tls.c), and the HTTP client's
 * (https://: the advisor poller, the tools) are all made here, so that
 * every connection to every server is verified the same way.
 */
#ifndef SL_TLS_CLIENT_H
#define SL_TLS_CLIENT_H

#include <stddef.h>

#include <openssl/ssl.h>

typedef struct sl__tls_client sl__tls_client;

/* What a store was told (strings borrowed for the call only). */
typedef struct sl__tls_client_files {
    const char *label;       /* what errors begin with: "redis tls" */
    const char *ca_file;     /* NULL: the system's trust store */
    const char *cert_file;   /* a client certificate; NULL: none */
    const char *key_file;    /* its key; with cert_file only */
    const char *server_name; /* checked and sent (SNI); NULL: the host */
    int insecure;            /* no verification at all */
} sl__tls_client_files;

/* The files read and checked: 0 and *out, SL_EINVAL with err naming the
 * file and what is wrong (after f->label), or SL_ENOMEM. */
/* A certificate caches its extensions (its key identifiers, which chain
 * building compares) the first time it is used, behind a flag OpenSSL
 * reads without the certificate's lock: two threads' first handshakes
 * against the same CA race there (ThreadSanitizer saw one read a key
 * identifier another was still writing).  Called on a context's trusted
 * certificates once they are loaded, before any thread shares it, so
 * that the cache is only ever read after.  (Certificates a hashed
 * directory loads on demand are not among them.) */
void sl__tls_cache_extensions(SSL_CTX *ctx);

int sl__tls_client_new(const sl__tls_client_files *f, sl__tls_client **out,
                      char *err, size_t errlen);
void sl__tls_client_free(sl__tls_client *t); /* NULL: no-op */

/* A client session on fd, a connected socket to host (a name or an IP
 * literal): the certificate must name server_name, or else host; the SNI
 * is sent for a name.  The caller runs the handshake.  NULL when out of
 * memory. */
SSL *sl__tls_client_session(const sl__tls_client *t, int fd, const char *host);

/* Why a handshake or a record failed: SL_EINVAL when the server's
 * certificate was refused (a configuration to fix: a wrong CA or name),
 * SL_ESTORE otherwise; the reason in err, after `what`. */
int sl__tls_client_failed(SSL *ssl, int rc, const char *what, char *err,
                         size_t errlen);

#endif
