/*
 * tls_listeners.h - which TLS context each listener of the daemon takes
 * (tls.h): its own files when it was given them (--admin-tls-cert and
 * so on), else the shared ones (--tls-cert), else none: plain text.  A
 * listener's own files replace the shared ones entirely, client CA
 * included.  Each context is made at start and reloaded on its own.
 */
#ifndef SV_TLS_LISTENERS_H
#define SV_TLS_LISTENERS_H

#include "runtime/worker.h"

/* s->tls and s->tls_at made from the settings, for the HTTP listener and
 * cfg.doors: 0, or -1 after a message naming the file, its flag and
 * what is wrong (the caller releases). */
int sv_tls_listeners_init(sv_server *s);
/* Every context read again (SIGHUP, a rules reload), each on its own:
 * one whose files do not load keeps the certificate in force, logged
 * naming its listeners and the file, and the others take their new ones. */
void sv_tls_listeners_reload(sv_server *s);
void sv_tls_listeners_release(sv_server *s);

#endif
