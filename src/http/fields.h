/*
 * fields.h - the header fields of one HTTP message as http-parser hands
 * them over (a name or value may come in several pieces, split across
 * reads): the request's in serve and the proxy, the upstream's response
 * in the proxy.
 */
#ifndef SV_FIELDS_H
#define SV_FIELDS_H

#include <stddef.h>

#include "runtime/buf.h"

/* Most fields one message may have: more is 431 (a request's). */
#define SV_MAX_FIELDS 100

typedef struct sv_field {
    size_t name_off, name_len, value_off, value_len;
} sv_field;

/* Kept as offsets into one byte buffer, which may move while it grows;
 * views are made when asked for.  With `keep` set, a field whose name it
 * refuses is dropped once its name is whole (serve keeps only those its
 * handlers read): its name's bytes are taken back, and it has no record.
 * Without, every field is kept. */
typedef struct sv_fields {
    sv_buf bytes;  /* names and values */
    sv_buf fields; /* sv_field records */
    size_t total;  /* bytes counted against the cap */
    int (*keep)(const char *name, size_t len);
    /* The field being read: its name (at name_off in bytes, its record
     * made when its value starts and it is kept), its value, or a value
     * not kept. */
    size_t name_off, name_len;
    int naming, in_value, dropping;
} sv_fields;

void sv_fields_reset(sv_fields *h);
void sv_fields_release(sv_fields *h);
/* 0, or -1 when over max_bytes, SV_MAX_FIELDS or memory. */
int sv_fields_name(sv_fields *h, const char *at, size_t len, size_t max_bytes);
int sv_fields_value(sv_fields *h, const char *at, size_t len,
                    size_t max_bytes);
size_t sv_fields_count(const sv_fields *h);
/* Field i's name and value (valid until the next add). */
void sv_fields_get(const sv_fields *h, size_t i, const char **name,
                   size_t *name_len, const char **value, size_t *value_len);
/* A field's name (len bytes) is want (lower case), case-insensitively. */
int sv_field_is(const char *name, size_t len, const char *want);
/* The first field named `name` (case-insensitive), or NULL. */
const char *sv_fields_find(const sv_fields *h, const char *name,
                           size_t *value_len);
/* How many fields are named `name` (case-insensitive). */
size_t sv_fields_occurrences(const sv_fields *h, const char *name);

#endif
