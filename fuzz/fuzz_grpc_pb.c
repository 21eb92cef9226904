/*
 * fuzz_grpc_pb.c - libFuzzer target for the gRPC front end's protobuf
 * codec (src/grpc/pb.c): arbitrary bytes as a RateLimitRequest and as a
 * HealthCheckRequest.  A request that decodes must hold what the caps
 * allow, every string inside the message; a RateLimitResponse made of
 * it (the entries' keys as limit names) must encode in exactly the size
 * counted, and decode field by field back to what was written.  No
 * crash, leak or out-of-bounds access.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_DESCRIPTORS = 64, MAX_ENTRIES = 16 };

static int inside(const uint8_t *msg, size_t size, const char *s, size_t len)
{
    return len == 0 || ((const uint8_t *)s >= msg &&
                        (const uint8_t *)s + len <= msg + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of its own size, so that a read past it is ASan's. */
    uint8_t *msg = malloc(size ? size : 1);
    memcpy(msg, data, size);
    const char *service;
    size_t service_len;
    if (gr_pb_decode_health(msg, size, &service, &service_len) == 0 &&
        !inside(msg, size, service, service_len))
        __builtin_trap();

    /* The session's allocator, as rls.c decodes with it (mem.c). */
    gr_mem *mem = gr_mem_new(GR_MEM_KEEP);
    gr_pb_request req;
    char err[256];
    if (gr_pb_decode_request(mem, msg, size, MAX_DESCRIPTORS, MAX_ENTRIES, &req,
                             err, sizeof(err)) != 0) {
        gr_mem_free(mem);
        free(msg);
        return 0;
    }
    if (req.n > MAX_DESCRIPTORS ||
        !inside(msg, size, req.domain, req.domain_len))
        __builtin_trap();
    gr_pb_status st[MAX_DESCRIPTORS];
    for (size_t i = 0; i < req.n; i++) {
        const gr_pb_descriptor *d = &req.ds[i];
        if (d->n_entries > MAX_ENTRIES)
            __builtin_trap();
        for (size_t j = 0; j < d->n_entries; j++)
            if (!inside(msg, size, d->entries[j].key, d->entries[j].key_len) ||
                !inside(msg, size, d->entries[j].value,
                        d->entries[j].value_len))
                __builtin_trap();
        st[i] = (gr_pb_status){
            .code = 1 + (int)(i % 2),
            .has_limit = d->n_entries > 0,
            .name = d->n_entries ? d->entries[0].key : NULL,
            .name_len = d->n_entries ? d->entries[0].key_len : 0,
            .requests_per_unit = d->limit_requests_per_unit,
            .unit = d->limit_unit,
            .limit_remaining = (uint32_t)d->hits,
            .reset_seconds = (int64_t)(d->hits >> 1 & INT32_MAX),
            .reset_nanos = (int32_t)(d->hits % 1000000000),
        };
    }
    gr_pb_header h = {req.domain, req.domain, req.domain_len, req.domain_len};
    gr_pb_response resp = {.overall_code = 2,
                           .statuses = st,
                           .n = req.n,
                           .headers = &h,
                           .n_headers = 1};
    size_t len = gr_pb_response_size(&resp);
    uint8_t *out = malloc(len + 1);
    out[len] = 0xa5; /* a canary past the counted size */
    gr_pb_response_encode(&resp, out);
    if (out[len] != 0xa5)
        __builtin_trap();
    /* The answer decodes: as a RateLimitRequest its statuses are
     * descriptors (field 2), its headers hits (3), skipped if unknown. */
    gr_pb_request back;
    if (gr_pb_decode_request(NULL, out, len, MAX_DESCRIPTORS, 1 << 20, &back,
                             err, sizeof(err)) != 0 ||
        back.n != req.n)
        __builtin_trap();
    gr_pb_request_release(NULL, &back);
    free(out);
    gr_pb_request_release(mem, &req);
    gr_mem_free(mem);
    free(msg);
    return 0;
}
