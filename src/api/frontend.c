/*
 * frontend.c - serve's decision API as the front end of the daemon's
 * main listener (sv_frontend, runtime/worker.h): its HTTP connections
 * answered by the public routes, the ad hoc limits' table, and each
 * thread's JSON scratch.  tools/cmd_serve.c installs it; the proxy
 * installs its own.
 */
#include <stdlib.h>

#include "api/adhoc.h"
#include "api/json_scan.h"
#include "api/routes.h"
#include "http/http_conn.h"

static void accept_cb(sv_worker *w)
{
    sv_http_accept(w, (uv_stream_t *)&w->listener, &sv_public_routes);
}

static void thread_release(sv_worker *w)
{
    if (w->json != NULL)
        sv_json_release(w->json);
    free(w->json);
    w->json = NULL;
}

const sv_frontend sv_api_frontend = {
    .accept = accept_cb,
    .close_idle = sv_http_close_idle,
    .init = sv_adhoc_init,
    .release = sv_adhoc_release,
    .thread_release = thread_release,
};
