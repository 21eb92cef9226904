/*
 * door.c - the admin API's door (--admin-listen), as `sluice serve` and
 * `sluice proxy` both add it to their control thread.
 */
#include <stdio.h>
#include <string.h>

#include "control/admin.h"

int ad_door_add(sv_config *cfg, char *err, size_t errlen)
{
    const char *host = cfg->admin_listen.host;
    if (host == NULL)
        return ad_token_load(NULL, err, errlen);
    if (cfg->admin_token_file == NULL && strncmp(host, "127.", 4) != 0 &&
        strcmp(host, "::1") != 0) {
        snprintf(err, errlen,
                 "--admin-listen %s is not a loopback address: give "
                 "--admin-token-file",
                 host);
        return -1;
    }
    if (ad_token_load(cfg->admin_token_file, err, errlen) != 0)
        return -1;
    if (cfg->n_doors >= SV_MAX_DOORS) {
        snprintf(err, errlen, "too many listeners");
        return -1;
    }
    cfg->doors[cfg->n_doors++] =
        (sv_door){"admin",   cfg->admin_listen, 1,
                  ad_accept, ad_close_idle,     cfg->admin_tls};
    return 0;
}
