/*
 * secret.c - the daemons' secret files (secret.h): the admin API's token,
 * the Sentinels' password, the advisor's bearer token.  One reader, so
 * that each is read, checked and warned about alike.
 *
 * A file others can read is no secret, but it is said, not refused: a
 * service user made by systemd (DynamicUser=) cannot own a file in
 * advance, and LoadCredential= is the way to hand it one
 * (docs/operations.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log/log.h"
#include "log/secret.h"

int sl__secret_read(const char *path, const char *flag, char *out, size_t n,
                    char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    struct stat st;
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot read '%s': %s", flag, path,
                 strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077) != 0)
        sl__log(SL__LOG_WARN, NULL,
                "%s %s: mode %03o lets other users read it: make it 0600 "
                "(or 0400), or pass it with systemd's LoadCredential=",
                flag, path, (unsigned)(st.st_mode & 0777));
    int ok = fgets(out, (int)n, f) != NULL, more = 0;
    if (ok && strchr(out, '\n') == NULL) {
        int next = fgetc(f); /* the line went on past out */
        more = next != EOF && next != '\n' && next != '\r';
    }
    fclose(f);
    size_t len = ok ? strcspn(out, "\r\n") : 0;
    out[len] = '\0';
    if (more) {
        snprintf(err, errlen,
                 "%s: '%s': its first line is longer than %zu "
                 "bytes",
                 flag, path, n - 1);
        return -1;
    }
    if (len == 0) {
        snprintf(err, errlen, "%s: '%s': nothing on its first line", flag,
                 path);
        return -1;
    }
    return (int)len;
}
