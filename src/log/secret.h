/*
 * secret.h - the daemons' secret files (secret.c): a password or token
 * kept out of argv and the config file, read from the first line of a
 * file, with a warning in the log when other users may read it.
 */
#ifndef SL_LOG_SECRET_H
#define SL_LOG_SECRET_H

#include <stddef.h>

/* The first line of path (without its line end) into out (n bytes): its
 * length, or -1 with err naming the file and what is wrong (unreadable,
 * empty first line, longer than n - 1).  flag names the setting it came
 * from ("--admin-token-file") in the warning logged when the file's mode
 * lets group or others read it. */
int sl__secret_read(const char *path, const char *flag, char *out, size_t n,
                    char *err, size_t errlen);

#endif
