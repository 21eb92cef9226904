/*
 * tls.c - the listeners' TLS context (tls.h).  TLS 1.2 and 1.3 only; for
 * 1.2, ECDHE with AES-GCM or ChaCha20-Poly1305 (forward secrecy and AEAD
 * only; 1.3's suites are all so); sessions resumed from the server's
 * cache or from tickets, OpenSSL's defaults.  A reload builds a whole new
 * context from the files and swaps it in under a lock only if it loaded:
 * a connection holds a reference to the context it began with (SSL_new
 * takes one), so the swap never touches a connection in flight.  Each
 * context reloads on its own: a listener's bad files leave the others'
 * new ones in force.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "runtime/tls.h"
#include "store/tls_client.h"

struct sv_tls {
    pthread_mutex_t lock; /* ctx, against a reload on the main thread */
    SSL_CTX *ctx;
    sv_tls_files files; /* owned copies */
    /* What the files were given as, for messages: "--tls" or, a
     * listener's own, "--admin-tls" ("-cert" and so on follow). */
    char flag[32];
};

#define TLS12_CIPHERS                                                          \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"               \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"               \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* OpenSSL's first queued error, after what, naming the file. */
static int fail(char *err, size_t errlen, const char *what, const char *file)
{
    char why[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, why, sizeof(why));
    ERR_clear_error();
    snprintf(err, errlen, "%s '%s': %s", what, file, why);
    return -1;
}

/* The listener's ALPN names (SSL app data) against the client's: the
 * first of ours the client offers.  None in common: the handshake goes
 * on without ALPN (an HTTP/1.1 client that offers only h2, as curl may),
 * unless the listener speaks that one protocol alone (gRPC's h2). */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)arg;
    const sv_tls_alpn *ours = SSL_get_app_data(ssl);
    unsigned char *sel;
    if (ours == NULL)
        return SSL_TLSEXT_ERR_NOACK;
    if (SSL_select_next_proto(&sel, outlen, ours->names, ours->len, in,
                              inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return ours->required ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *load(const sv_tls_files *f, const char *flag, char *err,
                     size_t errlen)
{
    char what[48];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_RENEGOTIATION);
    /* Sessions resume from the cache too when a client certificate was
     * asked for: OpenSSL wants a context id then. */
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"sluice", 6);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
    if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
        fail(err, errlen, "cipher list", TLS12_CIPHERS);
        goto bad;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1) {
        snprintf(what, sizeof(what), "%s-cert", flag);
        fail(err, errlen, what, f->cert);
        goto bad;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) ==
                X509_R_KEY_VALUES_MISMATCH ||
            ERR_GET_REASON(ERR_peek_last_error()) ==
                SSL_R_PRIVATE_KEY_MISMATCH) {
            ERR_clear_error();
            snprintf(err, errlen, "%s-key '%s' does not match %s-cert '%s'",
                     flag, f->key, flag, f->cert);
        } else {
            snprintf(what, sizeof(what), "%s-key", flag);
            fail(err, errlen, what, f->key);
        }
        goto bad;
    }
    if (f->client_ca != NULL) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->client_ca);
        if (names == NULL ||
            SSL_CTX_load_verify_locations(ctx, f->client_ca, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            snprintf(what, sizeof(what), "%s-client-ca", flag);
            fail(err, errlen, what, f->client_ca);
            goto bad;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        sl__tls_cache_extensions(ctx);
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           NULL);
    }
    return ctx;
bad:
    SSL_CTX_free(ctx);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

sv_tls *sv_tls_new(const sv_tls_files *files, const char *listener, char *err,
                   size_t errlen)
{
    sv_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->files = (sv_tls_files){dup_or_null(files->cert),
                              dup_or_null(files->key),
                              dup_or_null(files->client_ca)};
    if (listener != NULL)
        snprintf(t->flag, sizeof(t->flag), "--%s-tls", listener);
    else
        snprintf(t->flag, sizeof(t->flag), "--tls");
    if ((t->ctx = load(&t->files, t->flag, err, errlen)) == NULL) {
        sv_tls_free(t);
        return NULL;
    }
    return t;
}

int sv_tls_reload(sv_tls *t, char *err, size_t errlen)
{
    SSL_CTX *ctx = load(&t->files, t->flag, err, errlen);
    if (ctx == NULL)
        return -1;
    pthread_mutex_lock(&t->lock);
    SSL_CTX *old = t->ctx;
    t->ctx = ctx;
    pthread_mutex_unlock(&t->lock);
    SSL_CTX_free(old); /* the connections made from it keep it */
    return 0;
}

void sv_tls_free(sv_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free((char *)t->files.cert);
    free((char *)t->files.key);
    free((char *)t->files.client_ca);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

SSL *sv_tls_session(sv_tls *t, const sv_tls_alpn *alpn)
{
    pthread_mutex_lock(&t->lock);
    SSL *ssl = SSL_new(t->ctx);
    pthread_mutex_unlock(&t->lock);
    if (ssl == NULL)
        return NULL;
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    if (rbio == NULL || wbio == NULL) {
        BIO_free(rbio);
        BIO_free(wbio);
        SSL_free(ssl);
        return NULL;
    }
    /* An empty read BIO says "retry", not "end of file". */
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_accept_state(ssl);
    SSL_set_app_data(ssl, (void *)alpn);
    return ssl;
}

int sv_tls_failure(SSL *ssl)
{
    int reason = ERR_GET_REASON(ERR_peek_last_error());
    long verify = SSL_get_verify_result(ssl);
    ERR_clear_error();
    return verify != X509_V_OK ||
                   reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
                   reason == SSL_R_CERTIFICATE_VERIFY_FAILED
               ? SV_TLS_CLIENT_CERT
               : SV_TLS_ERROR;
}

void sv_tls_count(sv_tls_listener *l, int result)
{
    atomic_fetch_add_explicit(&l->handshakes[result], 1, memory_order_relaxed);
}

void sv_tls_metrics(sv_tls_listener *l, int n, sv_buf *out)
{
    static const char *const names[SV_TLS_N] = {
        "ok", "client_certificate", "plaintext", "timeout", "error"};
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (l[i].tls == NULL)
            continue;
        if (!any++)
            sv_buf_addstr(out,
                          "# HELP sluice_tls_handshakes_total TLS handshakes "
                          "on the listeners, by listener and how they "
                          "ended.\n"
                          "# TYPE sluice_tls_handshakes_total counter\n");
        for (int r = 0; r < SV_TLS_N; r++)
            sv_buf_printf(out,
                          "sluice_tls_handshakes_total{listener=\"%s\","
                          "result=\"%s\"} %llu\n",
                          l[i].name, names[r],
                          (unsigned long long)atomic_load_explicit(
                              &l[i].handshakes[r], memory_order_relaxed));
    }
}
