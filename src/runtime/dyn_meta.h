/*
 * dyn_meta.h - envoyproxy/ratelimit's dynamic metadata of an answer
 * (--response-dynamic-metadata): the request (its domain, descriptors and
 * hits_addend) and the `metadata` of the rules that passed, merged, as a
 * google.protobuf.Struct, for gRPC's RateLimitResponse.dynamic_metadata
 * and /json's "dynamicMetadata" (docs/server.md).
 */
#ifndef SV_DYN_META_H
#define SV_DYN_META_H

#include "runtime/decide.h"

/* A request as the metadata says it: its domain, descriptors (borrowed)
 * and request-level hits_addend (0: none given). */
typedef struct sv_dyn_request {
    const char *domain;
    size_t domain_len;
    const sv_dec_descriptor *ds;
    size_t n;
    uint64_t hits_addend;
} sv_dyn_request;

/* The metadata of an answered request (res, decided against rules) as a
 * JSON object, appended to b. */
void sv_dyn_meta_json(sv_buf *b, const sl_rules *rules,
                      const sv_dyn_request *rq, const sv_dec_result *res);

/* The same as a google.protobuf.Struct message's bytes, appended to b. */
void sv_dyn_meta_pb(sv_buf *b, const sl_rules *rules, const sv_dyn_request *rq,
                    const sv_dec_result *res);

#endif
