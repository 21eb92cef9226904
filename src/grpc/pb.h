/*
 * pb.h - the protobuf messages the gRPC front end reads and writes, as C
 * structs: envoy's RateLimitRequest and RateLimitResponse
 * (envoy/service/ratelimit/v3/rls.proto, with RateLimitDescriptor from
 * envoy/extensions/common/ratelimit/v3/ratelimit.proto) and grpc.health
 * .v1's HealthCheckRequest and HealthCheckResponse.  pb.c is a codec for
 * this fixed schema only: no descriptors, no reflection.
 */
#ifndef GR_PB_H
#define GR_PB_H

#include <stddef.h>
#include <stdint.h>

#include "grpc/mem.h"
#include "sluice_rules.h"

/* gr_pb_decode_request()'s failures; the message says which field. */
enum {
    GR_PB_EMALFORMED = -1, /* not a RateLimitRequest on the wire */
    GR_PB_ETOOMANY = -2,   /* more descriptors or entries than the caps */
    GR_PB_ENOMEM = -3,
};

/* RateLimitDescriptor: its entries, and its optional hits_addend (a
 * google.protobuf.UInt64Value) and limit override. */
typedef struct gr_pb_descriptor {
    sl_rules_entry *entries; /* point into the message */
    size_t n_entries;
    int has_hits;
    uint64_t hits;
    int has_limit;
    uint32_t limit_requests_per_unit;
    int limit_unit; /* envoy.type.v3.RateLimitUnit: 0 UNKNOWN, 1 SECOND... */
} gr_pb_descriptor;

typedef struct gr_pb_request {
    const char *domain; /* into the message; not NUL-terminated */
    size_t domain_len;
    uint32_t hits_addend; /* 0 when absent, as proto3 has it */
    gr_pb_descriptor *ds;
    size_t n;
} gr_pb_request;

/*
 * Decodes a RateLimitRequest: fields by number, unknown fields skipped by
 * their wire type, every varint and length checked against the bytes
 * left.  At most max_descriptors descriptors of at most max_entries
 * entries each, in one block of mem's (NULL: malloc's).  The strings
 * point into msg, which must outlive *out.  Returns 0 (release *out with
 * gr_pb_request_release and the same mem), or GR_PB_E* with a message
 * in err and nothing to release.
 */
int gr_pb_decode_request(gr_mem *mem, const uint8_t *msg, size_t len,
                         size_t max_descriptors, size_t max_entries,
                         gr_pb_request *out, char *err, size_t errlen);
void gr_pb_request_release(gr_mem *mem, gr_pb_request *r);

/* RateLimitResponse.Code and RateLimit.Unit. */
enum { GR_PB_CODE_UNKNOWN, GR_PB_CODE_OK, GR_PB_CODE_OVER_LIMIT };

/* A DescriptorStatus; current_limit and duration_until_reset only with
 * has_limit (an unmatched descriptor is its code alone). */
typedef struct gr_pb_status {
    int code;
    int has_limit;
    const char *name; /* current_limit.name */
    size_t name_len;
    uint32_t requests_per_unit;
    int unit;
    uint32_t limit_remaining;
    int64_t reset_seconds; /* duration_until_reset */
    int32_t reset_nanos;
    /* Set by gr_pb_response_size(), for gr_pb_response_encode(): the
     * encoded sizes of the status and of its two messages. */
    size_t size, limit_size, duration_size;
} gr_pb_status;

/* A config.core.v3.HeaderValue of response_headers_to_add. */
typedef struct gr_pb_header {
    const char *key, *value;
    size_t key_len, value_len;
} gr_pb_header;

typedef struct gr_pb_response {
    int overall_code;
    gr_pb_status *statuses;
    size_t n;
    const gr_pb_header *headers;
    size_t n_headers;
    /* dynamic_metadata (6), a google.protobuf.Struct's encoded bytes;
     * none when len is 0. */
    const uint8_t *dynamic_metadata;
    size_t dynamic_metadata_len;
} gr_pb_response;

/* The encoded size of r (noting its statuses' sizes in them), then r,
 * unchanged since, written in exactly that many bytes. */
size_t gr_pb_response_size(gr_pb_response *r);
void gr_pb_response_encode(const gr_pb_response *r, uint8_t *out);

/* grpc.health.v1: HealthCheckRequest's service (0, or -1 when the
 * message is malformed), and a HealthCheckResponse of one status. */
enum {
    GR_PB_HEALTH_SERVING = 1,
    GR_PB_HEALTH_NOT_SERVING = 2,
};
int gr_pb_decode_health(const uint8_t *msg, size_t len, const char **service,
                        size_t *service_len);
/* At most GR_PB_HEALTH_MAX bytes. */
#define GR_PB_HEALTH_MAX 2
size_t gr_pb_encode_health(int status, uint8_t *out);

#endif
