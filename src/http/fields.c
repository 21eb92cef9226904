/*
 * fields.c - the header fields of one message (fields.h), for every
 * HTTP/1.1 parser of the daemon: serve's and the proxy's requests, the
 * upstream's responses.
 */
#include <string.h>
#include <strings.h>

#include "http/fields.h"

void sv_fields_reset(sv_fields *h)
{
    h->bytes.len = h->fields.len = 0;
    h->bytes.failed = h->fields.failed = 0;
    h->naming = h->in_value = h->dropping = 0;
    h->total = 0;
}

void sv_fields_release(sv_fields *h)
{
    sv_buf_release(&h->bytes);
    sv_buf_release(&h->fields);
}

size_t sv_fields_count(const sv_fields *h)
{
    return h->fields.len / sizeof(sv_field);
}

static sv_field *last(sv_fields *h)
{
    return (sv_field *)(h->fields.data + h->fields.len) - 1;
}

static int count(sv_fields *h, size_t len, size_t max_bytes)
{
    h->total += len;
    return h->total > max_bytes || h->bytes.failed || h->fields.failed ? -1 : 0;
}

int sv_fields_name(sv_fields *h, const char *at, size_t len, size_t max_bytes)
{
    if (!h->naming) { /* a new field: its record is made with its value */
        h->naming = 1;
        h->in_value = 0;
        h->name_off = h->bytes.len;
        h->name_len = 0;
    }
    sv_buf_add(&h->bytes, at, len);
    h->name_len += len;
    return count(h, len, max_bytes);
}

int sv_fields_value(sv_fields *h, const char *at, size_t len,
                    size_t max_bytes)
{
    if (!h->in_value) { /* the name is whole: kept? */
        if (!h->naming || h->bytes.failed)
            return -1;
        h->naming = 0;
        h->in_value = 1;
        h->dropping = h->keep != NULL &&
                      !h->keep(h->bytes.data + h->name_off, h->name_len);
        if (h->dropping) {
            h->bytes.len = h->name_off; /* its bytes go */
        } else {
            if (sv_fields_count(h) == SV_MAX_FIELDS)
                return -1;
            sv_field f = {h->name_off, h->name_len, h->bytes.len, 0};
            sv_buf_add(&h->fields, &f, sizeof(f));
            if (h->fields.failed)
                return -1;
        }
    }
    if (!h->dropping) {
        sv_buf_add(&h->bytes, at, len);
        last(h)->value_len += len;
    }
    return count(h, len, max_bytes);
}

void sv_fields_get(const sv_fields *h, size_t i, const char **name,
                   size_t *name_len, const char **value, size_t *value_len)
{
    const sv_field *f = (const sv_field *)h->fields.data + i;
    *name = h->bytes.data + f->name_off;
    *name_len = f->name_len;
    *value = f->value_len ? h->bytes.data + f->value_off : "";
    *value_len = f->value_len;
}

int sv_field_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

const char *sv_fields_find(const sv_fields *h, const char *name,
                           size_t *value_len)
{
    for (size_t i = 0; i < sv_fields_count(h); i++) {
        const char *n, *v;
        size_t nl, vl;
        sv_fields_get(h, i, &n, &nl, &v, &vl);
        if (sv_field_is(n, nl, name)) {
            *value_len = vl;
            return v;
        }
    }
    return NULL;
}

size_t sv_fields_occurrences(const sv_fields *h, const char *name)
{
    size_t count = 0;
    for (size_t i = 0; i < sv_fields_count(h); i++) {
        const char *n, *v;
        size_t nl, vl;
        sv_fields_get(h, i, &n, &nl, &v, &vl);
        count += sv_field_is(n, nl, name);
    }
    return count;
}

