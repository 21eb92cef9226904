/*
 * redis_tls.h - TLS to Redis (OpenSSL 3.0): the client context a store
 * makes once from its options (sl_redis_options' tls fields, or a
 * rediss:// URL), and one session per connection over its socket.  The
 * blocking connection (redis_conn.c) and the daemon's asynchronous ones
 * (src/decision/link_tls.c) both start theirs here, so that every
 * connection to every server is verified the same way.
 */
#ifndef SL_REDIS_TLS_H
#define SL_REDIS_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

typedef struct sl__redis_tls sl__redis_tls;

/* What a store was told (strings borrowed for the call only). */
typedef struct sl__redis_tls_files {
    const char *ca_file;     /* NULL: the system's trust store */
    const char *cert_file;   /* a client certificate; NULL: none */
    const char *key_file;    /* its key; with cert_file only */
    const char *server_name; /* checked and sent (SNI); NULL: the host */
    int insecure;            /* no verification at all */
} sl__redis_tls_files;

/* The files read and checked: 0 and *out, SL_EINVAL with err naming the
 * file and what is wrong, or SL_ENOMEM. */
int sl__redis_tls_new(const sl__redis_tls_files *f, sl__redis_tls **out,
                      char *err, size_t errlen);
void sl__redis_tls_free(sl__redis_tls *t); /* NULL: no-op */

/* A client session on fd, a connected socket to host (a name or an IP
 * literal): the certificate must name server_name, or else host; the SNI
 * is sent for a name.  The caller runs the handshake.  NULL when out of
 * memory. */
SSL *sl__redis_tls_session(const sl__redis_tls *t, int fd, const char *host);

/* Why a handshake or a record failed: SL_EINVAL when the server's
 * certificate was refused (a configuration to fix: a wrong CA or name),
 * SL_ESTORE otherwise; the reason in err, after `what`. */
int sl__redis_tls_failed(SSL *ssl, int rc, const char *what, char *err,
                         size_t errlen);

#endif
