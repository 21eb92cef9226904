/*
 * admin.h - `sluice serve|proxy --admin-listen`: the admin API, a door
 * served by the control thread (worker.h), never by a client-facing
 * listener: the runtime limits (src/control/limits.h) read and changed by
 * operators and tools, with a bearer token (docs/admin.md).
 */
#ifndef AD_ADMIN_H
#define AD_ADMIN_H

#include <jansson.h>

#include "runtime/worker.h"

/* Reads the token file (its first line; at least AD_TOKEN_MIN bytes) and
 * keeps the token for the API: 0, or -1 with a message in err.  path
 * NULL: no token, which only a loopback listener may go without, and then
 * only for reads. */
#define AD_TOKEN_MIN 16
int ad_token_load(const char *path, char *err, size_t errlen);

/* door.c: adds the admin door to cfg when --admin-listen is set (on the
 * control thread) and loads the token: 0, or -1 with err (a listener off
 * loopback without a token, an unreadable token). */
int ad_door_add(sv_config *cfg, char *err, size_t errlen);

/* The door's. */
void ad_accept(sv_listener *l);
void ad_close_idle(sv_listener *l);

/* poll.c: the advisor poller (--advisor), on the control thread; and its
 * series of /metrics.  ad_poll_init reads its files before the threads
 * start (the CA of an https:// advisor, the bearer token): 0, or -1
 * with err naming the file. */
int ad_poll_init(const sv_config *cfg, char *err, size_t errlen);
int ad_poll_start(sv_worker *control);

/* advisor_shadow.c: under --advisor-mode shadow, each rule's last
 * recommendation as the poller bounded it (burst 0: scaled), until
 * until_ms; thread-safe.  The list for GET /admin/v1/overrides (a new
 * array), the per-rule gauge for /metrics, and its release at exit. */
void ad_shadow_record(const char *rule, int64_t requests, int64_t burst,
                      int64_t now_ms, int64_t until_ms, const char *reason);
json_t *ad_shadow_json(int64_t now_ms);
void ad_shadow_metrics(int64_t now_ms, sv_buf *out);
void ad_shadow_release(void);
void ad_poll_stop(sv_worker *control);
void ad_poll_metrics(sv_server *s, sv_buf *out);

#endif
