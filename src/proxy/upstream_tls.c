/*
 * upstream_tls.c - TLS to an https:// upstream (OpenSSL 3.0, the client
 * side): the context a config makes of its upstream TLS settings, and one
 * connection's session over two memory BIOs, as the listeners' TLS runs
 * in src/runtime/conn.c, so that upstream.c still does every read and
 * write on the thread's loop, with its own bounds and timeouts.  Kept
 * apart from src/runtime/tls.c, the listeners' context: a client verifies
 * a name rather than presenting one, resumes rather than caches, and its
 * context belongs to a proxy config, reloaded with it.
 *
 * The context is made whole when the config is read (at start and on
 * every reload), so a bad file refuses the config and a reload keeps the
 * old one; a connection holds a reference to the context it began with
 * (SSL_new takes one).  Sessions are resumed per thread: each thread keeps
 * the last session its upstream gave it (px_worker.tls_session), and only
 * for the config generation it was made under, since a resumed session
 * is not verified again and a reload may have changed the CA.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "log/log.h"
#include "proxy.h"
#include "store/tls_client.h"

/* As the listeners: forward secrecy and AEAD only (TLS 1.3's are all so). */
#define TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20"

/* The wire format of ALPN: offering only http/1.1 keeps an upstream that
 * speaks h2 from choosing it. */
static const unsigned char alpn_http11[] = "\x08http/1.1";

static int is_ip(const char *name)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, name, addr) == 1 ||
           inet_pton(AF_INET6, name, addr) == 1;
}

/* What OpenSSL found wrong with a file, after what, naming it: its
 * first queued error is the cause ("No such file or directory", "no
 * start line"), the later ones only where it surfaced ("PEM lib"). */
static int fail_file(char *err, size_t errlen, const char *what,
                     const char *file)
{
    unsigned long e = ERR_peek_error();
    const char *why = ERR_SYSTEM_ERROR(e) ? strerror(ERR_GET_REASON(e))
                                          : ERR_reason_error_string(e);
    snprintf(err, errlen, "%s '%s': %s", what, file,
             why != NULL ? why : "unreadable");
    ERR_clear_error();
    return -1;
}

/* A new session from the upstream (after the handshake in TLS 1.2, with
 * each ticket in 1.3): the thread's to resume, if its config is still
 * the thread's.  Returns 1: the reference is taken. */
static int new_session_cb(SSL *ssl, SSL_SESSION *session)
{
    px_tls *t = SSL_get_app_data(ssl);
    if (t == NULL || t->generation != t->pw->generation)
        return 0;
    SSL_SESSION_free(t->pw->tls_session);
    t->pw->tls_session = session;
    t->pw->tls_session_generation = t->generation;
    return 1;
}

static int load_client_cert(SSL_CTX *ctx, const px_config *cfg, char *err,
                            size_t errlen)
{
    if ((cfg->upstream_cert == NULL) != (cfg->upstream_key == NULL)) {
        snprintf(err, errlen, "--upstream-cert and --upstream-key go together");
        return -1;
    }
    if (cfg->upstream_cert == NULL)
        return 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->upstream_cert) != 1)
        return fail_file(err, errlen, "--upstream-cert", cfg->upstream_cert);
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->upstream_key, SSL_FILETYPE_PEM) !=
            1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        int reason = ERR_GET_REASON(ERR_peek_last_error());
        if (reason == X509_R_KEY_VALUES_MISMATCH ||
            reason == SSL_R_PRIVATE_KEY_MISMATCH) {
            ERR_clear_error();
            snprintf(err, errlen,
                     "--upstream-key '%s' does not match --upstream-cert '%s'",
                     cfg->upstream_key, cfg->upstream_cert);
            return -1;
        }
        return fail_file(err, errlen, "--upstream-key", cfg->upstream_key);
    }
    return 0;
}

int px_upstream_tls_load(px_config *cfg, char *err, size_t errlen)
{
    if (!cfg->upstream_https) {
        const char *set = cfg->upstream_ca            ? "--upstream-ca"
                          : cfg->upstream_cert        ? "--upstream-cert"
                          : cfg->upstream_key         ? "--upstream-key"
                          : cfg->upstream_server_name ? "--upstream-server-name"
                          : cfg->upstream_insecure    ? "--upstream-insecure"
                                                      : NULL;
        if (set != NULL) {
            snprintf(err, errlen, "%s needs an https:// upstream: '%s'", set,
                     cfg->upstream);
            return -1;
        }
        return 0;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1 ||
        SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11) - 1) !=
            0) {
        snprintf(err, errlen, "out of memory");
        goto bad;
    }
    /* Sessions go to new_session_cb, kept per thread, never in the
     * context's own cache, which every thread would share. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
                                            SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
    if (cfg->upstream_ca != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->upstream_ca, NULL) != 1) {
            fail_file(err, errlen, "--upstream-ca", cfg->upstream_ca);
            goto bad;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        fail_file(err, errlen, "the system's CA store",
                  X509_get_default_cert_file());
        goto bad;
    }
    sl__tls_cache_extensions(ctx);
    if (load_client_cert(ctx, cfg, err, errlen) != 0)
        goto bad;
    const char *name = cfg->upstream_server_name ? cfg->upstream_server_name
                                                 : cfg->upstream_name;
    /* The name checked is set once here; each SSL_new copies it.  An
     * address is checked against the certificate's IP entries and is not
     * sent as SNI, which names hosts only (RFC 6066, 3). */
    X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ctx);
    int set = is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name)
                          : X509_VERIFY_PARAM_set1_host(param, name, 0);
    if (set != 1) {
        snprintf(err, errlen, "--upstream-server-name: bad name: '%s'", name);
        goto bad;
    }
    X509_VERIFY_PARAM_set_hostflags(param,
                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    cfg->tls_sni = is_ip(name) ? NULL : name;
    SSL_CTX_set_verify(
        ctx, cfg->upstream_insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    cfg->tls = ctx;
    return 0;
bad:
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return -1;
}

void px_warn_insecure(const px_config *cfg)
{
    if (cfg->upstream_insecure)
        sl__log(SL__LOG_WARN, "proxy",
                "--upstream-insecure: the certificate of %s is NOT verified; "
                "anyone on the way to it can read and change what is proxied",
                cfg->upstream);
}

int px_tls_start(px_tls *t, const px_config *cfg, px_worker *pw,
                 uint64_t generation)
{
    *t = (px_tls){.pw = pw, .generation = generation};
    SSL *ssl = SSL_new(cfg->tls);
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    if (ssl == NULL || rbio == NULL || wbio == NULL) {
        BIO_free(rbio);
        BIO_free(wbio);
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    /* An empty read BIO says "retry", not "end of file". */
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_connect_state(ssl);
    SSL_set_app_data(ssl, t);
    if ((cfg->tls_sni != NULL &&
         SSL_set_tlsext_host_name(ssl, cfg->tls_sni) != 1) ||
        (pw->tls_session != NULL && pw->tls_session_generation == generation &&
         SSL_set_session(ssl, pw->tls_session) != 1)) {
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    t->ssl = ssl;
    return 0;
}

void px_tls_release(px_tls *t)
{
    SSL_free(t->ssl);
    t->ssl = NULL;
}

void px_tls_forget(px_worker *pw)
{
    SSL_SESSION_free(pw->tls_session);
    pw->tls_session = NULL;
}

int px_tls_feed(px_tls *t, const char *data, size_t len)
{
    return BIO_write(SSL_get_rbio(t->ssl), data, (int)len) == (int)len ? 0 : -1;
}

int px_tls_take(px_tls *t, sv_buf *out)
{
    BIO *wbio = SSL_get_wbio(t->ssl);
    size_t n = BIO_ctrl_pending(wbio);
    if (n == 0)
        return 0;
    if (sv_buf_reserve(out, n) != 0)
        return -1;
    int got = BIO_read(wbio, out->data + out->len, (int)n);
    if (got != (int)n)
        return -1;
    out->len += n;
    return 0;
}

int px_tls_buffered(const px_tls *t)
{
    return SSL_pending(t->ssl) > 0 ||
           BIO_ctrl_pending(SSL_get_rbio(t->ssl)) > 0;
}

/* What went wrong, for the 502's message: the certificate check first
 * (its own words: "unable to get local issuer certificate", "hostname
 * mismatch"), else OpenSSL's reason ("tlsv1 alert protocol version"). */
static void describe(px_tls *t, int e, char *msg, size_t len)
{
    long verify = SSL_get_verify_result(t->ssl);
    unsigned long err = ERR_peek_last_error();
    const char *why = err != 0 ? ERR_reason_error_string(err) : NULL;
    if (verify != X509_V_OK)
        snprintf(msg, len, "upstream TLS: certificate verify failed: %s",
                 X509_verify_cert_error_string(verify));
    else if (e == SSL_ERROR_SSL && why != NULL)
        snprintf(msg, len, "upstream TLS: %s", why);
    else
        snprintf(msg, len, "upstream TLS: closed during the handshake");
    ERR_clear_error();
}

int px_tls_handshake(px_tls *t, char *msg, size_t len)
{
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->open = 1;
        return 1;
    }
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    describe(t, e, msg, len);
    return -1;
}

int px_tls_resumed(const px_tls *t)
{
    return SSL_session_reused(t->ssl);
}

int px_tls_read(px_tls *t, char *buf, size_t cap, char *msg, size_t len)
{
    int n = SSL_read(t->ssl, buf, (int)cap);
    if (n > 0)
        return n;
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        return PX_TLS_CLOSED;
    }
    /* In TLS 1.3 a refused client certificate comes as an alert after
     * the client's side of the handshake was done: its reason says so. */
    unsigned long err = ERR_peek_last_error();
    const char *why = err != 0 ? ERR_reason_error_string(err) : NULL;
    snprintf(msg, len, "upstream TLS: %s", why ? why : "a bad record");
    ERR_clear_error();
    return PX_TLS_FAILED;
}

int px_tls_write(px_tls *t, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    if (SSL_write(t->ssl, data, (int)len) <= 0) {
        ERR_clear_error();
        return -1;
    }
    return 0;
}

void px_tls_shutdown(px_tls *t)
{
    /* Without its close_notify sent, SSL_free would mark the session
     * unresumable (OpenSSL's ssl_clear_bad_session). */
    if (t->open && SSL_shutdown(t->ssl) < 0)
        ERR_clear_error();
}
