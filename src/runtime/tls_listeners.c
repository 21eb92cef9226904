/*
 * tls_listeners.c - the listeners' TLS contexts (tls_listeners.h).  The
 * shared files make one context, which every listener without files of
 * its own takes, so that they load, reload and resume sessions once;
 * a listener with its own files has a context of its own.  Kept apart
 * from tls.c, which knows one context and no listener, and from
 * server.c, which asks for them once at start.
 */
#include <stdio.h>

#include "log/log.h"
#include "runtime/tls_listeners.h"

/* The HTTP listener's label; the doors' are their names. */
#define HTTP_LISTENER "http"

static int n_listeners(const sv_server *s)
{
    return 1 + s->cfg.n_doors;
}

/* "the admin listener", "the http, resp listeners": those that take t. */
static void names_of(const sv_server *s, const sv_tls *t, char *out, size_t len)
{
    size_t at = (size_t)snprintf(out, len, "the");
    int n = 0;
    for (int i = 0; i < n_listeners(s) && at < len; i++)
        if (s->tls_at[i].tls == t)
            at += (size_t)snprintf(out + at, len - at, "%s %s", n++ ? "," : "",
                                   s->tls_at[i].name);
    if (at < len)
        snprintf(out + at, len - at, " listener%s", n > 1 ? "s" : "");
}

int sv_tls_listeners_init(sv_server *s)
{
    char err[512];
    if (s->cfg.tls.cert != NULL &&
        (s->tls = sv_tls_new(&s->cfg.tls, NULL, err, sizeof(err))) == NULL) {
        sl__log(SL__LOG_ERROR, NULL, "%s", err);
        return -1;
    }
    for (int i = 0; i < n_listeners(s); i++) {
        sv_tls_listener *l = &s->tls_at[i];
        const sv_door *d = i > 0 ? &s->cfg.doors[i - 1] : NULL;
        l->name = d != NULL ? d->name : HTTP_LISTENER;
        l->tls = s->tls;
        if (d == NULL || d->tls.cert == NULL)
            continue;
        if ((l->tls = sv_tls_new(&d->tls, d->name, err, sizeof(err))) == NULL) {
            sl__log(SL__LOG_ERROR, NULL, "%s", err);
            return -1;
        }
        l->own = 1;
    }
    return 0;
}

/* t read again, logged naming its listeners. */
static void reload(sv_server *s, sv_tls *t)
{
    char err[512], names[128];
    names_of(s, t, names, sizeof(names));
    if (sv_tls_reload(t, err, sizeof(err)) != 0)
        sl__log(SL__LOG_ERROR, NULL,
                "tls reload refused, the certificate in force stays on %s: "
                "%s",
                names, err);
    else
        sl__log(SL__LOG_INFO, NULL, "tls: certificate and key reloaded on %s",
                names);
}

void sv_tls_listeners_reload(sv_server *s)
{
    if (s->tls != NULL)
        reload(s, s->tls);
    for (int i = 0; i < n_listeners(s); i++)
        if (s->tls_at[i].own)
            reload(s, s->tls_at[i].tls);
}

void sv_tls_listeners_release(sv_server *s)
{
    for (int i = 0; i < n_listeners(s); i++)
        if (s->tls_at[i].own)
            sv_tls_free(s->tls_at[i].tls);
    sv_tls_free(s->tls);
}
