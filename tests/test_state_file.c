/*
 * test_state_file.c - the memory store's state file (sl_memory_store_save,
 * sl_memory_store_load; docs/stores.md, "State file"): a store loaded from
 * a save decides every later request exactly as the store that was saved,
 * for every algorithm; a damaged or foreign file is refused with the
 * documented result and leaves the store empty; a save that cannot be
 * written leaves the previous file; decisions go on while a save of 4M
 * keys runs.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "internal.h"
#include "store/memory_store.h"
#include "store/state_format.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sl-state-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A store with a random seed, as a server has. */
static sl_store *fresh_store(size_t max_bytes)
{
    sl_memory_options o = {.size = sizeof(o), .max_bytes = max_bytes};
    sl_store *st = sl_memory_store_new(&o);
    assert_non_null(st);
    return st;
}

enum { NLIM = 9 };

/* One limit of each algorithm, an override of a bucket, and a log that
 * logs rejected requests. */
static void make_limits(sl_limit *lim[NLIM])
{
    lim[0] = tu_limit(SL_TOKEN_BUCKET, 5, SEC, 0);
    lim[1] = tu_limit(SL_GCRA, 5, SEC, 2);
    lim[2] = tu_limit(SL_LEAKY_BUCKET, 5, SEC, 3);
    lim[3] = tu_limit(SL_FIXED_WINDOW, 5, 10 * SEC, 0);
    lim[4] = tu_limit(SL_SLIDING_LOG, 5, 10 * SEC, 0);
    lim[5] = tu_limit(SL_SLIDING_WINDOW, 5, 10 * SEC, 0);
    lim[6] = tu_limit(SL_STEPPED_WINDOW, 5, 10 * SEC, 0);
    char err[128];
    assert_int_equal(sl_limit_override(lim[0], 3, 0, &lim[7], err, 128), 0);
    sl_limit_config c = {.algorithm = SL_SLIDING_LOG,
                         .limit = 4,
                         .period = 5 * SEC,
                         .flags = SL_LOG_REJECTED,
                         .id = 7};
    lim[8] = tu_limit_cfg(&c);
}

static void free_limits(sl_limit *lim[NLIM])
{
    for (int i = 0; i < NLIM; i++)
        sl_limit_free(lim[i]);
}

static const sl_nanos T0 = 1700000000 * SEC;

/* Requests on every limit for nkeys keys, some refused. */
static void drive(sl_store *st, sl_limit *lim[NLIM], int nkeys, sl_nanos t0)
{
    char key[32];
    for (int round = 0; round < 8; round++)
        for (int l = 0; l < NLIM; l++)
            for (int k = 0; k < nkeys; k++) {
                snprintf(key, sizeof(key), "k%d", k);
                (void)tu_check(st, lim[l], key, 1 + (k + round) % 2,
                               t0 + round * 37 * MS + k * MS);
            }
}

static void expect_same(const sl_decision *a, const sl_decision *b, int l,
                        int k, sl_nanos t)
{
    expect_eq_at(a->allowed, b->allowed, "limit %d key %d at %lld", l, k,
                 (long long)t);
    expect_eq_at(a->remaining, b->remaining, "limit %d key %d", l, k);
    expect_eq_at(a->retry_after, b->retry_after, "limit %d key %d", l, k);
    expect_eq_at(a->reset_after, b->reset_after, "limit %d key %d", l, k);
    expect_eq_at(a->delay, b->delay, "limit %d key %d", l, k);
    expect_eq_at(a->limit, b->limit, "limit %d key %d", l, k);
}

static int save(sl_store *st, sl_nanos now, sl_limit *lim[], size_t n,
                sl_nanos wall, sl_memory_save_info *info)
{
    sl_memory_save_options o = SL_MEMORY_SAVE_OPTIONS_INIT;
    char err[256] = "";
    o.wall = wall;
    o.limits = (const sl_limit *const *)lim;
    o.n_limits = n;
    int rc = sl_memory_store_save(st, path, now, &o, info, err, sizeof(err));
    if (rc != 0)
        print_error("save: %s\n", err);
    return rc;
}

static int load(sl_store *st, sl_limit *lim[], size_t n, sl_nanos wall,
                sl_memory_load_info *info, char *err, size_t errlen)
{
    sl_memory_load_options o = SL_MEMORY_LOAD_OPTIONS_INIT;
    o.wall = wall;
    o.limits = (const sl_limit *const *)lim;
    o.n_limits = n;
    return sl_memory_store_load(st, path, &o, info, err, errlen);
}

/* Saved, loaded into a new store, and both stores then asked the same
 * requests: every decision field equal, for every algorithm. */
static void test_loaded_store_decides_as_the_saved_one(void **state)
{
    (void)state;
    sl_limit *lim[NLIM];
    make_limits(lim);
    sl_store *a = fresh_store(0), *b = fresh_store(0);
    drive(a, lim, 50, T0);
    sl_nanos t = T0 + SEC;
    sl_memory_save_info si;
    assert_int_equal(save(a, t, lim, NLIM, T0, &si), 0);
    expect_ge(si.keys, 50 * 7);
    expect_le(si.bytes,
              si.keys * 40 + 128 + 256 * 20 + NLIM * 8 + 4 + 50 * 2 * 8 * 16);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    expect_eq(sb.st_mode & 0777, 0600);

    sl_memory_load_info li;
    char err[256] = "";
    int rc = load(b, lim, NLIM, T0 + 5 * SEC, &li, err, sizeof(err));
    if (rc != 0)
        fail_msg("load: %s", err);
    expect_eq(li.result, SL_STATE_LOADED);
    expect_eq(li.keys, si.keys);
    expect_eq(li.saved_now, t);
    expect_eq(li.resume_now, t + 5 * SEC);
    expect_eq(li.limits_saved, NLIM - 1); /* the override shares an id */
    expect_eq(li.limits_kept, NLIM - 1);
    expect_eq(sl__memory_check(b), 0);

    char key[32];
    for (int step = 0; step < 40; step++) {
        sl_nanos now = t + step * 173 * MS;
        for (int l = 0; l < NLIM; l++)
            for (int k = 0; k < 50; k += 3) {
                snprintf(key, sizeof(key), "k%d", k);
                sl_decision da = tu_check(a, lim[l], key, 1, now);
                sl_decision db = tu_check(b, lim[l], key, 1, now);
                expect_same(&da, &db, l, k, now);
            }
    }
    sl_store_free(a);
    sl_store_free(b);
    free_limits(lim);
}

/* A key refused before the save is refused after the load with the same
 * retry_after; a sliding log keeps its events. */
static void test_refused_key_stays_refused(void **state)
{
    (void)state;
    sl_limit *lim[NLIM];
    make_limits(lim);
    sl_store *a = fresh_store(0), *b = fresh_store(0);
    sl_decision before[NLIM];
    /* A key per limit: the override would share its base's counter. */
    const char *who[NLIM] = {"a0", "a1", "a2", "a3", "a4",
                             "a5", "a6", "a7", "a8"};
    for (int l = 0; l < NLIM; l++) {
        for (int i = 0; i < 12; i++)
            before[l] = tu_check(a, lim[l], who[l], 1, T0 + i * MS);
        expect_eq_at(before[l].allowed, 0, "limit %d", l);
    }
    assert_int_equal(save(a, T0 + 12 * MS, lim, NLIM, 0, NULL), 0);
    char err[256];
    assert_int_equal(load(b, lim, NLIM, 0, NULL, err, sizeof(err)), 0);
    /* Asked at the moment of the save, the loaded store refuses as the
     * saved one does; its wait is the one said before less the time
     * that passed (the log that logs rejections adds this one too). */
    for (int l = 0; l < NLIM; l++) {
        sl_decision da = tu_check(a, lim[l], who[l], 1, T0 + 12 * MS);
        sl_decision db = tu_check(b, lim[l], who[l], 1, T0 + 12 * MS);
        expect_eq_at(db.allowed, 0, "limit %d", l);
        expect_same(&da, &db, l, 0, T0 + 12 * MS);
        if (l != 8 && before[l].retry_after > 0)
            expect_eq_at(db.retry_after, before[l].retry_after - MS, "limit %d",
                         l);
    }
    sl_store_free(a);
    sl_store_free(b);
    free_limits(lim);
}

/* Loaded two hours of wall clock after the save: resume_now is two hours
 * on, and there the loaded store decides as the saved one does two hours
 * on: every window of these limits has passed, nothing is refused. */
static void test_time_passes_while_down(void **state)
{
    (void)state;
    sl_limit *lim[NLIM];
    make_limits(lim);
    sl_store *a = fresh_store(0), *b = fresh_store(0);
    drive(a, lim, 20, T0);
    sl_nanos t = T0 + SEC, wall = 1800000000 * SEC;
    assert_int_equal(save(a, t, lim, NLIM, wall, NULL), 0);
    sl_memory_load_info li;
    char err[256] = "";
    assert_int_equal(load(b, lim, NLIM, wall + 2 * HOUR, &li, err, sizeof(err)),
                     0);
    expect_eq(li.saved_wall, wall);
    expect_eq(li.resume_now, t + 2 * HOUR);
    char key[32];
    for (int l = 0; l < NLIM; l++)
        for (int k = 0; k < 20; k++) {
            snprintf(key, sizeof(key), "k%d", k);
            sl_decision da = tu_check(a, lim[l], key, 1, li.resume_now);
            sl_decision db = tu_check(b, lim[l], key, 1, li.resume_now);
            expect_same(&da, &db, l, k, li.resume_now);
            expect_eq_at(db.allowed, 1, "limit %d key %d", l, k);
        }
    /* A wall clock that went back gives no time back: resume_now is the
     * saved now. */
    sl_store *c = fresh_store(0);
    assert_int_equal(load(c, lim, NLIM, wall - HOUR, &li, err, sizeof(err)), 0);
    expect_eq(li.resume_now, t);
    sl_store_free(a);
    sl_store_free(b);
    sl_store_free(c);
    free_limits(lim);
}

/* Writes len bytes of buf to path. */
static void put_file(const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static unsigned char *get_file(size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* The load of the file at path fails with `want` and leaves the store
 * unused: a good file loads into it afterwards. */
static void expect_refused(sl_limit *lim[NLIM], sl_state_result want,
                           const char *what)
{
    sl_store *b = fresh_store(0);
    sl_memory_load_info li;
    char err[256] = "";
    int rc = load(b, lim, NLIM, 0, &li, err, sizeof(err));
    expect_eq_at(rc, SL_EINVAL, "%s", what);
    expect_eq_at(li.result, want, "%s (%s)", what, err);
    expect_eq_at(strncmp(err, path, strlen(path)), 0, "%s: '%s'", what, err);
    expect_eq(li.keys, 0);
    sl_store_stats s;
    sl_store_get_stats(b, &s);
    expect_eq_at(s.keys, 0, "%s", what);
    expect_eq(sl__memory_check(b), 0);
    sl_decision d = tu_check(b, lim[0], "k1", 1, T0);
    expect_eq(d.allowed, 1);
    sl_store_free(b);
}

/* A state file recomputed with a new header CRC after an edit. */
static uint32_t crc_of(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
    }
    return ~crc;
}

static void refix_header(unsigned char *h)
{
    uint32_t crc = crc_of(h, 124);
    for (int i = 0; i < 4; i++)
        h[124 + i] = (unsigned char)(crc >> (8 * i));
}

static void test_damaged_files_are_refused(void **state)
{
    (void)state;
    sl_limit *lim[NLIM];
    make_limits(lim);
    sl_store *a = fresh_store(0);
    drive(a, lim, 40, T0);
    assert_int_equal(save(a, T0 + SEC, lim, NLIM, 0, NULL), 0);
    size_t len;
    unsigned char *good = get_file(&len);
    char what[64];

    /* Truncated at every tenth of its length. */
    for (int tenth = 0; tenth < 10; tenth++) {
        size_t cut = len * (size_t)tenth / 10;
        put_file(good, cut);
        snprintf(what, sizeof(what), "cut at %zu of %zu", cut, len);
        expect_refused(lim, SL_STATE_TRUNCATED, what);
    }
    /* A byte flipped at every tenth, and in the last (a checksum). */
    for (int tenth = 0; tenth <= 10; tenth++) {
        size_t at = tenth == 10 ? len - 1 : len * (size_t)tenth / 10 + 3;
        good[at] ^= 0x10;
        put_file(good, len);
        good[at] ^= 0x10;
        snprintf(what, sizeof(what), "byte %zu flipped", at);
        expect_refused(lim, SL_STATE_CORRUPT, what);
    }
    /* One byte more than written. */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, good, len);
    longer[len] = 0;
    put_file(longer, len + 1);
    free(longer);
    expect_refused(lim, SL_STATE_CORRUPT, "a byte appended");
    /* Another version, and another byte order, each with a valid CRC. */
    unsigned char *h = malloc(len);
    memcpy(h, good, len);
    h[8] = 2;
    refix_header(h);
    put_file(h, len);
    expect_refused(lim, SL_STATE_VERSION, "version 2");
    memcpy(h, good, len);
    for (int i = 0; i < 4; i++)
        h[12 + i] = (unsigned char)(i + 1); /* 01 02 03 04: big-endian */
    refix_header(h);
    put_file(h, len);
    expect_refused(lim, SL_STATE_ENDIAN, "big-endian");
    free(h);
    put_file(good, 0);
    expect_refused(lim, SL_STATE_TRUNCATED, "zero length");
    put_file((const unsigned char *)"hello, world", 12);
    expect_refused(lim, SL_STATE_TRUNCATED, "a short text");
    unlink(path);
    expect_refused(lim, SL_STATE_MISSING, "no file");

    /* Other limits: the file's are not in force. */
    put_file(good, len);
    {
        sl_limit *other[NLIM];
        for (int i = 0; i < NLIM; i++)
            other[i] = tu_limit(SL_GCRA, 100 + i, SEC, 0);
        expect_refused(other, SL_STATE_OTHER_LIMITS, "other limits");
        free_limits(other);
    }
    /* Too big for the store's cap. */
    {
        sl_store *small = fresh_store(1);
        sl_store *big = fresh_store(0);
        char key[32];
        for (int k = 0; k < 20000; k++) {
            snprintf(key, sizeof(key), "many%d", k);
            (void)tu_check(big, lim[1], key, 1, T0);
        }
        assert_int_equal(save(big, T0, lim, NLIM, 0, NULL), 0);
        sl_memory_load_info li;
        char err[256];
        assert_int_equal(load(small, lim, NLIM, 0, &li, err, sizeof(err)),
                         SL_EINVAL);
        expect_eq(li.result, SL_STATE_TOO_BIG);
        sl_store_free(small);
        sl_store_free(big);
    }
    free(good);
    sl_store_free(a);
    free_limits(lim);
}

/* A store that decided is not loaded into; a save on a path that cannot
 * be written fails, naming it, and the previous file stays. */
static void test_misuse_and_failed_saves(void **state)
{
    (void)state;
    sl_limit *lim[NLIM];
    make_limits(lim);
    sl_store *a = fresh_store(0);
    (void)tu_check(a, lim[0], "x", 1, T0);
    assert_int_equal(save(a, T0, lim, NLIM, 0, NULL), 0);
    char err[256] = "";
    assert_int_equal(load(a, lim, NLIM, 0, NULL, err, sizeof(err)), SL_EINVAL);
    assert_string_equal(err, "not an unused memory store");

    size_t len;
    unsigned char *before = get_file(&len);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(mkdir(tmp, 0700), 0); /* the temporary cannot open */
    (void)tu_check(a, lim[0], "y", 1, T0);
    assert_int_equal(
        sl_memory_store_save(a, path, T0, NULL, NULL, err, sizeof(err)),
        SL_ESTORE);
    expect_eq_at(strstr(err, "state.tmp: cannot create") != NULL, 1, "%s", err);
    rmdir(tmp);
    size_t len2;
    unsigned char *after = get_file(&len2);
    expect_eq(len2, len);
    expect_eq(memcmp(before, after, len), 0);
    free(before);
    free(after);

    char nodir[160];
    snprintf(nodir, sizeof(nodir), "%s/none/state", dir);
    assert_int_equal(
        sl_memory_store_save(a, nodir, T0, NULL, NULL, err, sizeof(err)),
        SL_ESTORE);
    expect_eq_at(strstr(err, "none/state.tmp: cannot create: No such file") !=
                     NULL,
                 1, "%s", err);
    sl_store_free(a);
    free_limits(lim);
}

/* A save of a big store while another thread decides: the decisions
 * go on between the save's first and last shard, and what was saved
 * loads and keeps the store's invariants.  The save's shard callback
 * sees the save in progress; at the middle shard it waits for the other
 * thread's next decisions, so "decisions flowed during the save" is a
 * fact of the run, not a matter of how the machine scheduled it.  4M
 * keys (SL_TEST_QUICK: 200k); the decider runs on them and on sliding
 * logs, whose events the save copies too. */
enum { LOG_KEYS = 1000, MID_DECISIONS = 1000 };

typedef struct load_ctx {
    sl_store *st;
    const sl_limit *lim, *log;
    size_t nkeys;
    atomic_int stop;
    atomic_long decided;
    long at_first, at_mid, at_last; /* decided when those shards were saved */
    int shards_seen;
} load_ctx;

static void *decide_loop(void *arg)
{
    load_ctx *c = arg;
    char key[32];
    uint64_t x = 88172645463325252u;
    for (long i = 0; !atomic_load(&c->stop); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const sl_limit *lim = i % 4 == 0 ? c->log : c->lim;
        snprintf(key, sizeof(key), "t%zu",
                 (size_t)(x % (lim == c->log ? LOG_KEYS : c->nkeys)));
        sl_decision d;
        if (sl_check(c->st, lim, key, strlen(key), 1, T0 + i, &d) == 0)
            atomic_fetch_add(&c->decided, 1);
    }
    return NULL;
}

static void shard_saved(void *arg, int shard)
{
    load_ctx *c = arg;
    long now = atomic_load(&c->decided);
    c->shards_seen++;
    if (shard == 0)
        c->at_first = now;
    if (shard == SL__NSHARDS / 2) {
        /* No shard is held here: the decider goes on, on any key. */
        while (atomic_load(&c->decided) < now + MID_DECISIONS)
            sched_yield();
        c->at_mid = now;
    }
    if (shard == SL__NSHARDS - 1)
        c->at_last = now;
}

static void test_save_while_deciding(void **state)
{
    (void)state;
    sl_limit *lim[2] = {tu_limit(SL_GCRA, 100, HOUR, 0),
                        tu_limit(SL_SLIDING_LOG, 1000, 10 * SEC, 0)};
    sl_store *a = fresh_store(0);
    load_ctx c = {.st = a, .lim = lim[0], .log = lim[1]};
    c.nkeys = tu_quick() ? 200000 : 4000000;

    /* Filled in batches: a check per key would be most of the run. */
    enum { BATCH = 1024 };
    static char buf[BATCH][24];
    sl_key keys[BATCH];
    sl_decision out[BATCH];
    for (size_t i = 0; i < c.nkeys; i += BATCH) {
        size_t n = c.nkeys - i < BATCH ? c.nkeys - i : BATCH;
        for (size_t j = 0; j < n; j++) {
            keys[j].data = buf[j];
            keys[j].len = (size_t)snprintf(buf[j], 24, "t%zu", i + j);
        }
        assert_int_equal(sl_check_batch(a, lim[0], keys, n, 1, T0, out), 0);
    }
    for (int k = 0; k < LOG_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "t%d", k);
        (void)tu_check(a, lim[1], key, 1, T0);
    }

    pthread_t th;
    pthread_create(&th, NULL, decide_loop, &c);
    sl__state_shard_saved_cb = shard_saved;
    sl__state_shard_saved_arg = &c;
    sl_memory_save_info si;
    int rc = save(a, T0, lim, 2, 0, &si);
    sl__state_shard_saved_cb = NULL;
    sl__state_shard_saved_arg = NULL;
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    assert_int_equal(rc, 0);
    expect_eq(c.shards_seen, SL__NSHARDS);
    /* Decisions made while the save had copied some shards and not
     * others: at least those it waited for in the middle. */
    expect_ge(c.at_last - c.at_first, MID_DECISIONS);
    expect_ge(c.at_last - c.at_mid, MID_DECISIONS);
    expect_ge(si.keys, c.nkeys + LOG_KEYS);
    expect_eq(sl__memory_check(a), 0);

    sl_store *b = fresh_store(0);
    sl_memory_load_info li;
    char err[256] = "";
    if (load(b, lim, 2, 0, &li, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    expect_eq(li.keys, si.keys);
    expect_eq(sl__memory_check(b), 0);
    sl_store_free(a);
    sl_store_free(b);
    sl_limit_free(lim[0]);
    sl_limit_free(lim[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_loaded_store_decides_as_the_saved_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_key_stays_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_time_passes_while_down, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_damaged_files_are_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_misuse_and_failed_saves, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_save_while_deciding, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
