/*
 * fuzz_json.c - the decision requests' JSON scanner (src/server/
 * json_scan.c) held to jansson, the parser it replaced on that path:
 * both accept or both refuse every input (except numbers beyond int64
 * or double, which jansson refuses and the scanner takes as the valid
 * JSON they are, and a NUL byte after a number, which jansson takes and
 * JSON does not), and an accepted document reads the same through both:
 * the same types, strings byte for byte, and every member found by its
 * decoded key.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_scan.h"

static char *scratch;

static void same(const sv_json *j, int t, json_t *v)
{
    const sv_json_tok *tok = &j->tok[t];
    switch (tok->type) {
    case SV_JSON_OBJECT: {
        if (!json_is_object(v) || json_object_size(v) != tok->size)
            abort();
        int k = t + 1;
        for (uint32_t m = 0; m < tok->size; m++, k = (int)j->tok[k + 1].next) {
            const char *s;
            size_t n = sv_json_str(j, k, scratch, &s);
            json_t *member = json_object_getn(v, s, n);
            if (member == NULL)
                abort();
            same(j, k + 1, member);
        }
        /* The scanner's own lookup agrees with jansson's. */
        if ((sv_json_get(j, t, "domain") >= 0) !=
            (json_object_get(v, "domain") != NULL))
            abort();
        break;
    }
    case SV_JSON_ARRAY: {
        if (!json_is_array(v) || json_array_size(v) != tok->size)
            abort();
        int k = t + 1;
        for (uint32_t m = 0; m < tok->size; m++, k = (int)j->tok[k].next)
            same(j, k, json_array_get(v, m));
        break;
    }
    case SV_JSON_STRING: {
        const char *s;
        size_t n = sv_json_str(j, t, scratch, &s);
        if (!json_is_string(v) || json_string_length(v) != n ||
            memcmp(json_string_value(v), s, n) != 0)
            abort();
        break;
    }
    case SV_JSON_NUMBER:
        if (tok->integral ? !json_is_integer(v) : !json_is_real(v))
            abort();
        break;
    case SV_JSON_TRUE:
        if (!json_is_true(v))
            abort();
        break;
    case SV_JSON_FALSE:
        if (!json_is_false(v))
            abort();
        break;
    default:
        if (!json_is_null(v))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sv_json j;
    json_error_t je;
    json_t *root =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    int rc = sv_json_scan(&j, (const char *)data, size);
    if (rc == -2)
        abort(); /* no allocation fails here */
    if (root == NULL) {
        int numbers = strstr(je.text, "too big") != NULL ||
                      strstr(je.text, "overflow") != NULL;
        if (rc == 0 && !numbers)
            abort();
        return 0;
    }
    if (rc != 0) {
        /* jansson takes a NUL byte after a number ("[1\0]") for the
         * end of it; JSON has no such byte outside a string, and the
         * scanner refuses it. */
        if (memchr(data, 0, size) != NULL) {
            json_decref(root);
            return 0;
        }
        abort();
    }
    scratch = realloc(scratch, size + 1);
    same(&j, 0, root);
    json_decref(root);
    return 0;
}
