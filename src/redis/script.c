/*
 * script.c - how a command names the store's Lua on a server.  The Lua is
 * one chunk (src/redis/lua/embed.cmake) known to a server in two ways:
 * as a Redis Functions library (FUNCTION LOAD), whose one function FCALL
 * calls, or as a script (SCRIPT LOAD), which EVALSHA runs by its SHA1.
 * FCALL is what a server that has Functions (Redis 7) is asked: a
 * function is made once, when its library loads, while EVALSHA runs the
 * whole chunk again on every call, making its ~45 functions anew
 * (docs/benchmarks.md, "Redis's instructions per decision").  EVALSHA
 * stays for a server that refuses FUNCTION (Redis 6, a renamed command,
 * an ACL), and EVAL with the text for a server that has lost both (a
 * restart, a flush) until they are loaded again.
 */
#include <string.h>

#include "redis/redis_proto.h"

static int is_function(const char *ref)
{
    return ref != NULL && strcmp(ref, sl__redis_function) == 0;
}

int sl__redis_script_ref_ok(const char *ref)
{
    return ref == NULL || is_function(ref) || strlen(ref) == SL__REDIS_SHA_LEN;
}

const char *sl__redis_script_command(const char *ref, const char **name,
                                     size_t *len)
{
    if (is_function(ref)) {
        *name = sl__redis_function;
        *len = strlen(sl__redis_function);
        return "FCALL";
    }
    if (ref != NULL) {
        *name = ref;
        *len = SL__REDIS_SHA_LEN;
        return "EVALSHA";
    }
    *name = sl__redis_script;
    *len = strlen(sl__redis_script);
    return "EVAL";
}

int sl__redis_function_load_args(const char **argv, size_t *lens)
{
    const char *const args[] = {"FUNCTION", "LOAD", sl__redis_library};
    for (int i = 0; i < 3; i++) {
        argv[i] = args[i];
        lens[i] = strlen(args[i]);
    }
    return 3;
}

int sl__redis_function_loaded(const redisReply *r)
{
    /* The library's name is its text's hash: one of that name that is
     * there already is this one. */
    return r != NULL && ((r->type == REDIS_REPLY_STRING &&
                          strcmp(r->str, sl__redis_function) == 0) ||
                         (r->type == REDIS_REPLY_ERROR &&
                          strstr(r->str, "already exists") != NULL));
}
