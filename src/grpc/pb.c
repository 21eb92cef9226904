/*
 * pb.c - a protobuf codec for the few messages the gRPC front end speaks
 * (pb.h), written for this fixed schema rather than generated: protobuf-c
 * would bring a runtime library, generated files to keep in step with
 * envoy's protos, and an allocation per message and per string, where
 * the decoder here allocates once per request and leaves every string in
 * the message it came in.  docs/design.md says more.
 *
 * The wire format, as far as these messages need it: a field is a varint
 * tag (number << 3 | wire type), then a varint (type 0), 8 bytes (1), a
 * varint length and that many bytes (2: strings and messages), or 4
 * bytes (5).  Fields are read by number; an unknown one, or a known one
 * with another wire type (as protobuf's own parsers treat it), is
 * skipped by its wire type; groups (3, 4) are malformed in proto3.  For a
 * scalar or message field seen twice the last value wins, messages
 * merging field by field, as protobuf specifies.  Every varint is at most
 * 10 bytes and every length at most the bytes left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/pb.h"

typedef struct reader {
    const uint8_t *p, *end;
} reader;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* The varints of lengths longer than a byte, and of large numbers. */
static int read_long_varint(reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p == r->end)
            return -1;
        uint8_t b = *r->p++;
        /* The tenth byte holds bit 63 alone. */
        if (shift == 63 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Inline, the one-byte case first: nearly every tag and length of these
 * messages is one byte. */
static inline int read_varint(reader *r, uint64_t *v)
{
    if (r->p < r->end && *r->p < 0x80) {
        *v = *r->p++;
        return 0;
    }
    return read_long_varint(r, v);
}

/* A field's number and wire type: 0, or -1 at the end or when bad. */
static inline int read_tag(reader *r, uint32_t *field, int *wt)
{
    uint64_t tag;
    if (read_varint(r, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    *field = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    return 0;
}

/* A length-delimited field's bytes, as a reader of their own. */
static inline int read_len(reader *r, reader *sub)
{
    uint64_t n;
    if (read_varint(r, &n) != 0 || n > (uint64_t)(r->end - r->p))
        return -1;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 0;
}

static int skip(reader *r, int wt)
{
    uint64_t v;
    reader sub;
    switch (wt) {
    case WT_VARINT:
        return read_varint(r, &v);
    case WT_I64:
    case WT_I32: {
        size_t n = wt == WT_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return -1;
        r->p += n;
        return 0;
    }
    case WT_LEN:
        return read_len(r, &sub);
    default:
        return -1;
    }
}

/* google.protobuf.UInt64Value: value (1). */
static int read_uint64_value(reader r, uint64_t *value)
{
    uint32_t f;
    int wt;
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            return -1;
        if (f == 1 && wt == WT_VARINT) {
            if (read_varint(&r, value) != 0)
                return -1;
        } else if (skip(&r, wt) != 0)
            return -1;
    }
    return 0;
}

/* RateLimitOverride: requests_per_unit (1), unit (2). */
static int read_override(reader r, gr_pb_descriptor *d)
{
    uint32_t f;
    int wt;
    uint64_t v;
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            return -1;
        if ((f == 1 || f == 2) && wt == WT_VARINT) {
            if (read_varint(&r, &v) != 0)
                return -1;
            /* uint32 and enum fields keep the varint's low 32 bits. */
            if (f == 1)
                d->limit_requests_per_unit = (uint32_t)v;
            else
                d->limit_unit = (int32_t)(uint32_t)v;
        } else if (skip(&r, wt) != 0)
            return -1;
    }
    return 0;
}

/* Entry: key (1), value (2). */
static int read_entry(reader r, sl_rules_entry *e)
{
    uint32_t f;
    int wt;
    reader s;
    e->key = e->value = "";
    e->key_len = e->value_len = 0;
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            return -1;
        if ((f == 1 || f == 2) && wt == WT_LEN) {
            if (read_len(&r, &s) != 0)
                return -1;
            if (f == 1) {
                e->key = (const char *)s.p;
                e->key_len = (size_t)(s.end - s.p);
            } else {
                e->value = (const char *)s.p;
                e->value_len = (size_t)(s.end - s.p);
            }
        } else if (skip(&r, wt) != 0)
            return -1;
    }
    return 0;
}

/*
 * RateLimitDescriptor: entries (1), limit (2), hits_addend (3).  Counts
 * its entries into *n_entries, stopping past max_entries; with d, also
 * fills d and its entries (room for *n_entries of them, counted by an
 * earlier call).  0, -1 malformed, -2 too many entries.
 */
static int read_descriptor(reader r, size_t max_entries, size_t *n_entries,
                           gr_pb_descriptor *d)
{
    uint32_t f;
    int wt;
    reader s;
    size_t n = 0;
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            return -1;
        if (f > 3 || wt != WT_LEN) {
            if (skip(&r, wt) != 0)
                return -1;
            continue;
        }
        if (read_len(&r, &s) != 0)
            return -1;
        if (f == 1) {
            if (++n > max_entries)
                return -2;
            if (d != NULL && read_entry(s, &d->entries[n - 1]) != 0)
                return -1;
        } else if (d == NULL) {
            /* Counting: the submessages are read, and so checked, when
             * the descriptor is filled. */
        } else if (f == 2) {
            d->has_limit = 1;
            if (read_override(s, d) != 0)
                return -1;
        } else {
            d->has_hits = 1;
            if (read_uint64_value(s, &d->hits) != 0)
                return -1;
        }
    }
    *n_entries = n;
    return 0;
}

int gr_pb_decode_request(gr_mem *mem, const uint8_t *msg, size_t len,
                         size_t max_descriptors, size_t max_entries,
                         gr_pb_request *out, char *err, size_t errlen)
{
    static const char malformed[] = "malformed RateLimitRequest: %s";
    memset(out, 0, sizeof(*out));
    out->domain = "";
    reader r = {msg, msg + len}, s;
    uint32_t f;
    int wt;
    uint64_t v;
    size_t n = 0, total = 0, k;

    /* First pass: the scalars, and the descriptors counted. */
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            goto bad;
        if (f == 1 && wt == WT_LEN) {
            if (read_len(&r, &s) != 0)
                goto bad;
            out->domain = (const char *)s.p;
            out->domain_len = (size_t)(s.end - s.p);
        } else if (f == 2 && wt == WT_LEN) {
            if (read_len(&r, &s) != 0)
                goto bad;
            if (++n > max_descriptors) {
                snprintf(err, errlen,
                         "descriptors: more than the cap of %zu "
                         "(--max-descriptors)",
                         max_descriptors);
                return GR_PB_ETOOMANY;
            }
            int rc = read_descriptor(s, max_entries, &k, NULL);
            if (rc == -2) {
                snprintf(err, errlen,
                         "descriptors[%zu].entries: more than the cap of %zu "
                         "(--max-entries)",
                         n - 1, max_entries);
                return GR_PB_ETOOMANY;
            }
            if (rc != 0)
                goto bad;
            total += k;
        } else if (f == 3 && wt == WT_VARINT) {
            if (read_varint(&r, &v) != 0)
                goto bad;
            out->hits_addend = (uint32_t)v;
        } else if (skip(&r, wt) != 0)
            goto bad;
    }
    if (n == 0)
        return 0;

    /* Second pass: the descriptors and their entries, in one block. */
    out->ds = gr_mem_calloc(mem, n * sizeof(*out->ds) +
                                     total * sizeof(sl_rules_entry));
    if (out->ds == NULL) {
        snprintf(err, errlen, "out of memory");
        return GR_PB_ENOMEM;
    }
    sl_rules_entry *entries = (sl_rules_entry *)(out->ds + n);
    r = (reader){msg, msg + len};
    while (r.p < r.end) {
        read_tag(&r, &f, &wt);
        if (f != 2 || wt != WT_LEN) {
            skip(&r, wt);
            continue;
        }
        read_len(&r, &s);
        gr_pb_descriptor *d = &out->ds[out->n];
        d->entries = entries;
        if (read_descriptor(s, max_entries, &d->n_entries, d) != 0) {
            gr_pb_request_release(mem, out);
            snprintf(err, errlen, malformed, "a descriptor's field");
            return GR_PB_EMALFORMED;
        }
        entries += d->n_entries;
        out->n++;
    }
    return 0;
bad:
    snprintf(err, errlen, malformed, "a field runs past its end");
    return GR_PB_EMALFORMED;
}

void gr_pb_request_release(gr_mem *mem, gr_pb_request *r)
{
    gr_mem_release(mem, r->ds);
    r->ds = NULL;
    r->n = 0;
}

int gr_pb_decode_health(const uint8_t *msg, size_t len, const char **service,
                        size_t *service_len)
{
    reader r = {msg, msg + len}, s;
    uint32_t f;
    int wt;
    *service = "";
    *service_len = 0;
    while (r.p < r.end) {
        if (read_tag(&r, &f, &wt) != 0)
            return -1;
        if (f == 1 && wt == WT_LEN) {
            if (read_len(&r, &s) != 0)
                return -1;
            *service = (const char *)s.p;
            *service_len = (size_t)(s.end - s.p);
        } else if (skip(&r, wt) != 0)
            return -1;
    }
    return 0;
}

/* ---- encoding ---- */

/* 7 bits a byte: from the highest bit set, not a loop over the bytes
 * (the answer's counts and nanoseconds take four or five). */
static size_t varint_size(uint64_t v)
{
    return (size_t)(70 - __builtin_clzll(v | 1)) / 7;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Every field here has a number below 16: its tag is one byte. */
static uint8_t *put_tag(uint8_t *p, int field, int wt)
{
    *p++ = (uint8_t)(field << 3 | wt);
    return p;
}

/* proto3 leaves out scalars that are zero. */
static size_t uint_field_size(uint64_t v)
{
    return v == 0 ? 0 : 1 + varint_size(v);
}

static uint8_t *put_uint_field(uint8_t *p, int field, uint64_t v)
{
    if (v == 0)
        return p;
    return put_varint(put_tag(p, field, WT_VARINT), v);
}

static size_t len_field_size(size_t len)
{
    return 1 + varint_size(len) + len;
}

static uint8_t *put_len_field(uint8_t *p, int field, const void *data,
                              size_t len)
{
    p = put_varint(put_tag(p, field, WT_LEN), len);
    if (len > 0)
        memcpy(p, data, len);
    return p + len;
}

/* RateLimit: requests_per_unit (1), unit (2), name (3). */
static size_t limit_size(const gr_pb_status *s)
{
    return uint_field_size(s->requests_per_unit) +
           uint_field_size((uint64_t)(uint32_t)s->unit) +
           (s->name_len ? len_field_size(s->name_len) : 0);
}

/* google.protobuf.Duration: seconds (1), nanos (2). */
static size_t duration_size(const gr_pb_status *s)
{
    return uint_field_size((uint64_t)s->reset_seconds) +
           uint_field_size((uint64_t)(int64_t)s->reset_nanos);
}

/* DescriptorStatus: code (1), current_limit (2), limit_remaining (3),
 * duration_until_reset (4); its sizes noted in it for put_status(). */
static size_t status_size(gr_pb_status *s)
{
    size_t n = uint_field_size((uint64_t)s->code) +
               uint_field_size(s->limit_remaining);
    s->limit_size = s->duration_size = 0;
    if (s->has_limit) {
        s->limit_size = limit_size(s);
        s->duration_size = duration_size(s);
        n += len_field_size(s->limit_size) + len_field_size(s->duration_size);
    }
    return s->size = n;
}

static size_t header_size(const gr_pb_header *h)
{
    return (h->key_len ? len_field_size(h->key_len) : 0) +
           (h->value_len ? len_field_size(h->value_len) : 0);
}

size_t gr_pb_response_size(gr_pb_response *r)
{
    size_t n = uint_field_size((uint64_t)r->overall_code);
    for (size_t i = 0; i < r->n; i++)
        n += len_field_size(status_size(&r->statuses[i]));
    for (size_t i = 0; i < r->n_headers; i++)
        n += len_field_size(header_size(&r->headers[i]));
    if (r->dynamic_metadata_len > 0)
        n += len_field_size(r->dynamic_metadata_len);
    return n;
}

static uint8_t *put_status(uint8_t *p, const gr_pb_status *s)
{
    p = put_varint(put_tag(p, 2, WT_LEN), s->size);
    p = put_uint_field(p, 1, (uint64_t)s->code);
    if (s->has_limit) {
        p = put_varint(put_tag(p, 2, WT_LEN), s->limit_size);
        p = put_uint_field(p, 1, s->requests_per_unit);
        p = put_uint_field(p, 2, (uint64_t)(uint32_t)s->unit);
        if (s->name_len)
            p = put_len_field(p, 3, s->name, s->name_len);
    }
    p = put_uint_field(p, 3, s->limit_remaining);
    if (!s->has_limit)
        return p;
    p = put_varint(put_tag(p, 4, WT_LEN), s->duration_size);
    p = put_uint_field(p, 1, (uint64_t)s->reset_seconds);
    return put_uint_field(p, 2, (uint64_t)(int64_t)s->reset_nanos);
}

void gr_pb_response_encode(const gr_pb_response *r, uint8_t *p)
{
    p = put_uint_field(p, 1, (uint64_t)r->overall_code);
    for (size_t i = 0; i < r->n; i++)
        p = put_status(p, &r->statuses[i]);
    for (size_t i = 0; i < r->n_headers; i++) {
        const gr_pb_header *h = &r->headers[i];
        p = put_varint(put_tag(p, 3, WT_LEN), header_size(h));
        if (h->key_len)
            p = put_len_field(p, 1, h->key, h->key_len);
        if (h->value_len)
            p = put_len_field(p, 2, h->value, h->value_len);
    }
    if (r->dynamic_metadata_len > 0)
        p = put_len_field(p, 6, r->dynamic_metadata, r->dynamic_metadata_len);
}

size_t gr_pb_encode_health(int status, uint8_t *out)
{
    return (size_t)(put_uint_field(out, 1, (uint64_t)status) - out);
}
