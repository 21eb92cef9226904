/*
 * tls_client.c - sluice's TLS client: a context and each connection's
 * session (tls_client.h), for Redis and for the HTTP client.
 *
 * The context is made once per store (or poller): the CA and the client
 * certificate are read at creation, so that a missing or broken file is
 * its owner's own error (SL_EINVAL, naming it) and never a failure at
 * check time.
 * Every session verifies the server's chain and its name (the host
 * connected to, or server_name: a Cluster's nodes are reached by the
 * addresses CLUSTER SLOTS gives, usually IPs, while their certificates
 * may all name the service).  TLS 1.2 and 1.3 only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "internal.h"
#include "store/tls_client.h"

struct sl__tls_client {
    SSL_CTX *ctx;
    char *server_name; /* NULL: each connection's host */
    int insecure;
};

/* The reason OpenSSL left for the last failure, or `fallback`. */
static const char *ssl_reason(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : fallback;
}

static int refuse(SSL_CTX *ctx, char *err, size_t errlen, const char *label,
                  const char *what, const char *file)
{
    /* OpenSSL says "system lib" for a file it cannot open: say why. */
    int sys = strcmp(file, "(system)") == 0;
    FILE *f = sys ? NULL : fopen(file, "r");
    const char *why =
        f != NULL || sys ? ssl_reason("unreadable") : strerror(errno);
    if (f != NULL)
        fclose(f);
    sl__set_err(err, errlen, "%s: %s '%s': %s", label, what, file, why);
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return SL_EINVAL;
}

/* The server asks for a client certificate and none is set: noted on
 * the session, so that the failure that follows (TLS 1.3 servers refuse
 * after the handshake, at the first read) says why. */
static int asked_cb(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    (void)x509;
    (void)pkey;
    SSL_set_app_data(ssl, (char *)"asked");
    return 0;
}

void sl__tls_cache_extensions(SSL_CTX *ctx)
{
    STACK_OF(X509_OBJECT) *objs =
        X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
    for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
        X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));
        if (x != NULL)
            X509_check_purpose(x, -1, 0);
    }
}

int sl__tls_client_new(const sl__tls_client_files *f, sl__tls_client **out,
                       char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    sl__tls_client *t;

    if (ctx == NULL)
        return SL_ENOMEM;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if ((f->cert_file == NULL) != (f->key_file == NULL)) {
        sl__set_err(err, errlen,
                    "%s: a client certificate needs both the "
                    "certificate and its key",
                    f->label);
        SSL_CTX_free(ctx);
        return SL_EINVAL;
    }
    if (f->ca_file != NULL
            ? SSL_CTX_load_verify_locations(ctx, f->ca_file, NULL) != 1
            : SSL_CTX_set_default_verify_paths(ctx) != 1)
        return refuse(ctx, err, errlen, f->label, "cannot load the CA file",
                      f->ca_file ? f->ca_file : "(system)");
    sl__tls_cache_extensions(ctx);
    if (f->cert_file != NULL &&
        SSL_CTX_use_certificate_chain_file(ctx, f->cert_file) != 1)
        return refuse(ctx, err, errlen, f->label, "cannot load the certificate",
                      f->cert_file);
    if (f->key_file != NULL &&
        SSL_CTX_use_PrivateKey_file(ctx, f->key_file, SSL_FILETYPE_PEM) != 1)
        return refuse(ctx, err, errlen, f->label, "cannot load the key",
                      f->key_file);
    if (f->key_file != NULL && SSL_CTX_check_private_key(ctx) != 1)
        return refuse(ctx, err, errlen, f->label,
                      "the key does not match the certificate", f->key_file);
    SSL_CTX_set_verify(ctx, f->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       NULL);
    if (f->cert_file == NULL)
        SSL_CTX_set_client_cert_cb(ctx, asked_cb);
    if ((t = calloc(1, sizeof(*t))) == NULL ||
        (f->server_name != NULL &&
         (t->server_name = strdup(f->server_name)) == NULL)) {
        free(t);
        SSL_CTX_free(ctx);
        return SL_ENOMEM;
    }
    t->ctx = ctx;
    t->insecure = f->insecure;
    *out = t;
    return 0;
}

void sl__tls_client_free(sl__tls_client *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t->server_name);
    free(t);
}

static int is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

SSL *sl__tls_client_session(const sl__tls_client *t, int fd, const char *host)
{
    const char *name = t->server_name ? t->server_name : host;
    SSL *ssl = SSL_new(t->ctx);
    int ok;

    if (ssl == NULL)
        return NULL;
    ok = SSL_set_fd(ssl, fd) == 1;
    if (ok && !is_ip(name))
        ok = SSL_set_tlsext_host_name(ssl, name) == 1 &&
             (t->insecure || SSL_set1_host(ssl, name) == 1);
    else if (ok && !t->insecure)
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* The server's alert says our certificate (or its absence) is the
 * reason: a configuration to fix, like a refused server certificate. */
static int refused_us(unsigned long e)
{
    switch (ERR_GET_REASON(e)) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
        return 1;
    default:
        return 0;
    }
}

int sl__tls_client_failed(SSL *ssl, int rc, const char *what, char *err,
                          size_t errlen)
{
    long v = SSL_get_verify_result(ssl);
    int e = SSL_get_error(ssl, rc);
    unsigned long last = ERR_peek_last_error();
    const char *why;

    if (e == SSL_ERROR_SSL && v != X509_V_OK) {
        sl__set_err(err, errlen, "%s: certificate refused: %s", what,
                    X509_verify_cert_error_string(v));
        ERR_clear_error();
        return SL_EINVAL;
    }
    if (e == SSL_ERROR_SSL)
        why = ssl_reason("TLS error");
    else if (e == SSL_ERROR_SYSCALL && errno != 0)
        why = strerror(errno);
    else if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        why = "timed out";
    else
        why = "connection closed";
    if (SSL_get_app_data(ssl) != NULL &&
        (e == SSL_ERROR_SSL || e == SSL_ERROR_SYSCALL ||
         e == SSL_ERROR_ZERO_RETURN)) {
        sl__set_err(err, errlen,
                    "%s: %s: the server asks for a client certificate and "
                    "none is set",
                    what, why);
        ERR_clear_error();
        return SL_EINVAL;
    }
    if (e == SSL_ERROR_SSL && refused_us(last)) {
        sl__set_err(err, errlen,
                    "%s: the server refused our client certificate: %s", what,
                    why);
        ERR_clear_error();
        return SL_EINVAL;
    }
    sl__set_err(err, errlen, "%s: %s", what, why);
    ERR_clear_error();
    return SL_ESTORE;
}
