/*
 * fuzz_state.c - libFuzzer target for the memory store's state file
 * reader (sl_memory_store_load, src/store/memory_restore.c): the input is
 * a state file (docs/stores.md, "State file").
 *
 * Checksums stop nearly every mutation at the first CRC, so when the
 * input's first byte is odd the target first makes its checksums and its
 * length field right wherever the layout can be followed: the mutations
 * then reach the records behind them (hashes, shards, logs, counts).
 *
 * Checked besides crashes, leaks and undefined behaviour: a load fails
 * with SL_EINVAL and a result other than SL_STATE_LOADED, or succeeds
 * with a store that keeps its invariants (sl__memory_check); a loaded
 * store saves, and that file loads again with the same number of keys;
 * a failed load leaves the store unused (a second load of a good file
 * into it succeeds).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "store/state_format.h"

static char in_path[64], out_path[64];

static void put_crc(unsigned char *p, size_t at, size_t from, size_t size)
{
    if (at + 4 <= size)
        sl__put32(p + at, sl__state_crc(0, p + from, at - from));
}

/* The checksums and the length made right where the layout allows. */
static void fix_up(unsigned char *p, size_t size)
{
    if (size < SL__STATE_HEADER)
        return;
    sl__put64(p + SL__STH_FILE_BYTES, size);
    put_crc(p, SL__STH_CRC, 0, size);
    size_t at = SL__STATE_HEADER;
    uint64_t n = sl__get32(p + SL__STH_LIMITS);
    if (n * 8 + 4 > size - at)
        return;
    put_crc(p, at + n * 8, at, size);
    at += n * 8 + 4;
    for (int k = 0; k < 256 && at + SL__STATE_SECTION_HEAD <= size; k++) {
        uint64_t len = (uint64_t)sl__get32(p + at) * SL__STATE_NSLOT +
                       (uint64_t)sl__get32(p + at + 4) * SL__STATE_WSLOT +
                       sl__get64(p + at + 8) * SL__STATE_EVENT;
        len += SL__STATE_SECTION_HEAD;
        if (sl__get64(p + at + 8) > size || len + 4 > size - at)
            return;
        put_crc(p, at + len, at, size);
        at += len + 4;
    }
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_state: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (in_path[0] == '\0') {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(in_path, sizeof(in_path), "%s/fuzz_state.%d", dir,
                 (int)getpid());
        snprintf(out_path, sizeof(out_path), "%s/fuzz_state.%d.out", dir,
                 (int)getpid());
    }
    unsigned char *p = malloc(size + 1);
    if (p == NULL)
        return 0;
    memcpy(p, data, size);
    if (size > 0 && (p[0] & 1))
        fix_up(p, size);
    FILE *f = fopen(in_path, "wb");
    if (f == NULL || fwrite(p, 1, size, f) != size)
        fail("cannot write the input file");
    fclose(f);
    free(p);

    /* A small cap, so that "too big" is reachable. */
    sl_memory_options mo = {.size = sizeof(mo), .max_bytes = 4u << 20};
    sl_store *st = sl_memory_store_new(&mo);
    sl_memory_load_info info;
    char err[256];
    int rc = sl_memory_store_load(st, in_path, NULL, &info, err, sizeof(err));
    if (rc == 0) {
        if (info.result != SL_STATE_LOADED || sl__memory_check(st) != 0)
            fail("loaded, but the store is broken");
        sl_memory_save_info si;
        if (sl_memory_store_save(st, out_path, info.saved_now, NULL, &si, err,
                                 sizeof(err)) != 0)
            fail(err);
        sl_store *again = sl_memory_store_new(&mo);
        sl_memory_load_info info2;
        if (sl_memory_store_load(again, out_path, NULL, &info2, err,
                                 sizeof(err)) != 0 ||
            info2.keys != info.keys || si.keys != info.keys)
            fail("a loaded store's save does not load back the same");
        sl_store_free(again);
        unlink(out_path);
    } else {
        if (rc == SL_EINVAL && info.result == SL_STATE_LOADED)
            fail("refused, but said loaded");
        sl_store_stats s;
        sl_store_get_stats(st, &s);
        if (s.keys != 0 || sl__memory_check(st) != 0)
            fail("a refused file left keys behind");
    }
    sl_store_free(st);
    unlink(in_path);
    return 0;
}
