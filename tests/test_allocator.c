/* test_allocator.c: the caching allocator's policy (src/allocator.h) against a fake backend:
 * no GPU. The fake records what it allocates, can be told to fail, and has a capacity. */
#include "harness.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "memory/allocator.h"
#include "memory/guard.h"
#include "core/host.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define KIND NU__KIND_PRIVATE

/* ---- the fake backend ------------------------------------------------------------------------ */

typedef struct fake {
    pthread_mutex_t lock;
    uint64_t capacity, used;
    int fail_next;         /* the next this many allocate calls fail... */
    nu_status fail_status; /* ...with this status (NU_ERROR_OUT_OF_MEMORY when NU_OK) */
    unsigned calls;        /* allocate calls, failed ones included */
    unsigned releases;
    long live;             /* allocations held */
    uint64_t last_size;    /* of the last successful allocate */
    unsigned mismatches;   /* releases whose kind or size did not match the allocation */
    /* Called once (then cleared) by the next allocate, before it allocates: what another
     * thread could do while the pool waits for the backend. */
    void (*on_allocate)(struct fake *f);
} fake;

/* A backend handle: plain malloc, so that it does not count as the library's host memory. */
typedef struct fake_memory {
    uint64_t size;
    int kind;
    void *mapped;
} fake_memory;

static nu_status fake_allocate(void *ctx, int kind, uint64_t size, void **memory, void **mapped)
{
    fake *f = ctx;
    if (f->on_allocate) { /* only single-threaded tests set it */
        void (*hook)(fake *) = f->on_allocate;
        f->on_allocate = NULL;
        hook(f);
    }
    pthread_mutex_lock(&f->lock);
    f->calls++;
    if (f->fail_next > 0) {
        f->fail_next--;
        nu_status st = f->fail_status != NU_OK ? f->fail_status : NU_ERROR_OUT_OF_MEMORY;
        pthread_mutex_unlock(&f->lock);
        return st;
    }
    if (size > f->capacity - f->used) {
        pthread_mutex_unlock(&f->lock);
        return NU_ERROR_OUT_OF_MEMORY;
    }
    f->used += size;
    f->live++;
    f->last_size = size;
    pthread_mutex_unlock(&f->lock);
    fake_memory *m = malloc(sizeof *m);
    m->size = size;
    m->kind = kind;
    /* Shared memory gets real bytes (small blocks only) so that tests can check pieces do not
     * overlap. */
    m->mapped = kind == NU__KIND_SHARED && size <= 16 * MIB ? calloc(1, size) : NULL;
    *memory = m;
    *mapped = m->mapped;
    return NU_OK;
}

static void fake_release(void *ctx, int kind, void *memory, uint64_t size)
{
    fake *f = ctx;
    fake_memory *m = memory;
    pthread_mutex_lock(&f->lock);
    if (m->size != size || m->kind != kind)
        f->mismatches++;
    f->used -= m->size;
    f->live--;
    f->releases++;
    pthread_mutex_unlock(&f->lock);
    free(m->mapped);
    free(m);
}

static void fake_init(fake *f, uint64_t capacity)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->capacity = capacity;
}

static void fake_fini(fake *f)
{
    assert_int_equal(f->live, 0);
    assert_int_equal(f->used, 0);
    assert_int_equal(f->mismatches, 0);
    pthread_mutex_destroy(&f->lock);
}

static nu_status make_pool(fake *f, uint64_t block_size, uint64_t limit, nu__pool **out)
{
    nu__pool_config c = {.block_size = block_size, .memory_limit = limit, .page_size = 4096};
    nu__memory_backend b = {.ctx = f, .allocate = fake_allocate, .release = fake_release};
    return nu__pool_create(&c, &b, out);
}

static nu__pool *new_pool(fake *f, uint64_t block_size, uint64_t limit)
{
    nu__pool *p = NULL;
    assert_int_equal(make_pool(f, block_size, limit, &p), NU_OK);
    return p;
}

static nu_memory_stats stats(nu__pool *p)
{
    nu_memory_stats s;
    nu__pool_stats(p, &s);
    return s;
}

static char why[512];

static nu__allocation alloc_kind(nu__pool *p, int kind, uint64_t size)
{
    nu__allocation a;
    nu_status st = nu__pool_alloc(p, kind, size, false, &a, why, sizeof why);
    if (st != NU_OK)
        fail_msg("alloc %llu: %s: %s", (unsigned long long)size, nu_status_string(st), why);
    assert_non_null(a.block);
    assert_null(a.busy);
    assert_int_equal(a.kind, kind);
    return a;
}

static nu__allocation alloc_ok(nu__pool *p, uint64_t size)
{
    nu__allocation a = alloc_kind(p, KIND, size);
    assert_int_equal(a.offset % 256, 0);
    return a;
}

static nu__pool *destroyed_pool;
static int destroyed;

/* Like a buffer freeing itself: calls back into the pool, which must not hold its lock. */
static void on_destroy(nu__guard *g)
{
    nu_memory_stats s;
    nu__pool_stats(destroyed_pool, &s);
    nu__pool_count_buffer(destroyed_pool, 0);
    destroyed++;
    nu__guard_fini(g);
}

static bool same_piece(const nu__allocation *a, const nu__allocation *b)
{
    return a->block == b->block && a->offset == b->offset;
}

/* The fake's view agrees with the pool's. */
static void check_backend(nu__pool *p, fake *f)
{
    nu_memory_stats s = stats(p);
    assert_int_equal(s.reserved, f->used);
    assert_int_equal(s.blocks, (uint64_t)f->live);
    assert_true(s.active + s.cache <= s.reserved);
}

/* ---- rounding ---------------------------------------------------------------------------------- */

static void test_round_size(void **state)
{
    (void)state;
    assert_int_equal(nu__round_size(0), 0);
    assert_int_equal(nu__round_size(1), 256);
    assert_int_equal(nu__round_size(256), 256);
    assert_int_equal(nu__round_size(257), 512);
    assert_int_equal(nu__round_size(16 * KIB), 16 * KIB);
    assert_int_equal(nu__round_size(16 * KIB + 1), 20 * KIB);
    assert_int_equal(nu__round_size(MIB), MIB);
    assert_int_equal(nu__round_size(MIB + 1), MIB + 64 * KIB);
    assert_int_equal(nu__round_size(64 * MIB), 64 * MIB);
    assert_int_equal(nu__round_size(64 * MIB + 1), 66 * MIB);
    uint64_t top = UINT64_MAX - (2 * MIB - 1); /* the largest multiple of 2 MiB */
    assert_int_equal(nu__round_size(top), top);
    assert_int_equal(nu__round_size(top - 1), top);
    assert_int_equal(nu__round_size(top + 1), 0);
    assert_int_equal(nu__round_size(UINT64_MAX), 0);
}

static void test_huge_and_empty(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation a;

    /* Too large to round: OOM, no wrap to a small size. */
    memset(&a, 0xab, sizeof a);
    assert_int_equal(nu__pool_alloc(p, KIND, UINT64_MAX, false, &a, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_null(a.block);
    assert_int_equal(a.size, 0);
    assert_non_null(strstr(why, "18446744073709551615"));
    /* Large but roundable: over the limit. */
    assert_int_equal(nu__pool_alloc(p, KIND, UINT64_MAX / 2, false, &a, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_null(a.block);
    assert_int_equal(f.calls, 0);

    /* Empty allocations own nothing, and freeing them does nothing. */
    assert_int_equal(nu__pool_alloc(p, KIND, 0, false, &a, why, sizeof why), NU_OK);
    assert_null(a.block);
    assert_int_equal(a.size, 0);
    assert_null(a.busy);
    nu__pool_free(p, &a, NULL);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(s.blocks, 0);

    /* An invalid kind. */
    assert_int_equal(nu__pool_alloc(p, 7, 10, false, &a, why, sizeof why), NU_ERROR_INVALID_ARGUMENT);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- reuse ----------------------------------------------------------------------------------- */

/* Caches a piece of `cached` bytes, then asks for `request`: whether the cached piece served
 * it (and was accounted at its own size). */
static bool reuses(uint64_t cached, uint64_t request)
{
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, 4 * MIB, 1024 * MIB);
    nu__allocation c = alloc_ok(p, cached);
    nu__pool_free(p, &c, NULL);
    nu__allocation r = alloc_ok(p, request);
    bool reused = same_piece(&c, &r);
    nu_memory_stats s = stats(p);
    if (reused) {
        assert_int_equal(r.size, nu__round_size(cached));
        assert_int_equal(s.active, nu__round_size(cached));
        assert_int_equal(s.cache, 0);
    } else {
        assert_int_equal(r.size, nu__round_size(request));
        assert_int_equal(s.cache, nu__round_size(cached));
    }
    nu__pool_free(p, &r, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
    return reused;
}

static void test_reuse_bounds(void **state)
{
    (void)state;
    /* page 4096: the bound is min(2 S, S + 8 KiB). */
    assert_true(reuses(256, 256));         /* C == S */
    assert_true(reuses(256, 1));           /* same class */
    assert_true(reuses(512, 256));         /* 2 S */
    assert_false(reuses(768, 256));        /* one granule beyond */
    assert_false(reuses(256, 512));        /* smaller than S */
    assert_true(reuses(8 * KIB, 4 * KIB)); /* 2 S == S + 4 KiB < S + 8 KiB */
    assert_false(reuses(8 * KIB + 256, 4 * KIB));
    assert_true(reuses(72 * KIB, 64 * KIB)); /* S + 2 pages < 2 S */
    assert_false(reuses(76 * KIB, 64 * KIB));
    assert_true(reuses(64 * KIB, 64 * KIB));
    /* Dedicated pieces: 2 MiB + 2 pages rounds below the next 64 KiB class. */
    assert_true(reuses(2 * MIB, 2 * MIB));
    assert_false(reuses(2 * MIB + 64 * KIB, 2 * MIB));
}

static void test_reuse_smallest_then_lifo(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, 4 * MIB, 1024 * MIB);
    nu__allocation a64 = alloc_ok(p, 64 * KIB), a68 = alloc_ok(p, 68 * KIB), a72 = alloc_ok(p, 72 * KIB);
    /* Freed largest last: LIFO alone would pick 72 KiB. */
    nu__pool_free(p, &a64, NULL);
    nu__pool_free(p, &a68, NULL);
    nu__pool_free(p, &a72, NULL);
    nu__allocation r1 = alloc_ok(p, 64 * KIB), r2 = alloc_ok(p, 64 * KIB), r3 = alloc_ok(p, 64 * KIB);
    assert_true(same_piece(&r1, &a64));
    assert_true(same_piece(&r2, &a68));
    assert_true(same_piece(&r3, &a72));
    assert_int_equal(stats(p).active, (64 + 68 + 72) * KIB);

    /* Among equal sizes, the most recently freed first. */
    nu__pool_free(p, &r1, NULL);
    nu__pool_free(p, &r2, NULL);
    nu__pool_free(p, &r3, NULL);
    nu__allocation x[3];
    for (int i = 0; i < 3; i++)
        x[i] = alloc_ok(p, 20 * KIB);
    for (int i = 0; i < 3; i++)
        nu__pool_free(p, &x[i], NULL);
    for (int i = 2; i >= 0; i--) {
        nu__allocation y = alloc_ok(p, 20 * KIB);
        assert_true(same_piece(&y, &x[i]));
    }
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- blocks ------------------------------------------------------------------------------------ */

static void test_suballocation(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation a[4];
    for (int i = 0; i < 4; i++)
        a[i] = alloc_ok(p, 256 * KIB); /* block_size / 4: still carved */
    for (int i = 0; i < 4; i++) {
        assert_ptr_equal(a[i].block, a[0].block);
        assert_int_equal(a[i].offset, (uint64_t)i * 256 * KIB);
    }
    nu_memory_stats s = stats(p);
    assert_int_equal(s.blocks, 1);
    assert_int_equal(s.reserved, MIB);
    assert_int_equal(s.active, MIB);
    assert_int_equal(f.last_size, MIB);
    nu__allocation e = alloc_ok(p, 1000);
    assert_ptr_not_equal(e.block, a[0].block);
    assert_int_equal(stats(p).blocks, 2);
    check_backend(p, &f);

    /* Freeing coalesces: with the cache off, two neighbours freed give one range that a
     * piece of their joint size fits at the lower offset (first fit). */
    nu__pool_set_cache_limit(p, 0, NULL);
    nu__pool_free(p, &a[2], NULL);
    nu__pool_free(p, &a[1], NULL);
    assert_int_equal(stats(p).cache, 0);
    nu__allocation j = alloc_ok(p, 512 * KIB); /* > block_size / 4: dedicated */
    assert_ptr_not_equal(j.block, a[0].block);
    nu__pool_free(p, &j, NULL);
    nu__pool_set_cache_limit(p, 64 * MIB, NULL);
    nu__allocation b1 = alloc_ok(p, 128 * KIB), b2 = alloc_ok(p, 256 * KIB), b3 = alloc_ok(p, 128 * KIB);
    assert_ptr_equal(b1.block, a[0].block);
    assert_int_equal(b1.offset, 256 * KIB);
    assert_int_equal(b2.offset, 384 * KIB);
    assert_int_equal(b3.offset, 640 * KIB);
    assert_ptr_equal(b3.block, a[0].block);

    /* A block is released as soon as nothing is allocated or cached in it. */
    nu__pool_free(p, &a[0], NULL);
    nu__pool_free(p, &b1, NULL);
    nu__pool_free(p, &b2, NULL);
    nu__pool_free(p, &b3, NULL);
    nu__pool_free(p, &a[3], NULL);
    assert_int_equal(stats(p).blocks, 2); /* cached pieces keep it */
    nu__pool_clear_cache(p);
    s = stats(p);
    assert_int_equal(s.blocks, 1);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.active, 1024);
    check_backend(p, &f);
    nu__pool_free(p, &e, NULL);
    nu__pool_clear_cache(p);
    s = stats(p);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(f.live, 0);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* With first_block, a kind's shared blocks grow from it: 256 KiB, 512 KiB, then 1 MiB (block_size)
 * each; a request larger than the next size gets the power of two that holds it; the other kind
 * starts at first_block too. */
static void test_blocks_grow_from_first_block(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool_config c = {.block_size = MIB, .first_block = 256 * KIB, .memory_limit = 64 * MIB, .page_size = 4096};
    nu__memory_backend b = {.ctx = &f, .allocate = fake_allocate, .release = fake_release};
    nu__pool *p = NULL;
    assert_int_equal(nu__pool_create(&c, &b, &p), NU_OK);
    nu__pool_set_cache_limit(p, 0, NULL);
    nu__allocation a = alloc_ok(p, 4 * KIB);
    assert_int_equal(f.last_size, 256 * KIB);
    assert_int_equal(stats(p).reserved, 256 * KIB);
    nu__allocation big = alloc_ok(p, 255 * KIB); /* does not fit the first block's rest */
    assert_ptr_not_equal(big.block, a.block);
    assert_int_equal(f.last_size, 512 * KIB);
    nu__allocation c1 = alloc_ok(p, 256 * KIB), c2 = alloc_ok(p, 256 * KIB);
    assert_ptr_equal(c1.block, big.block); /* 255 + 256 KiB of 512: the first fits the rest */
    assert_int_equal(f.last_size, MIB);    /* c2: a new block, now block_size */
    assert_ptr_not_equal(c2.block, big.block);
    nu__allocation other;
    other = alloc_kind(p, NU__KIND_SHARED, 1000);
    assert_int_equal(f.last_size, 256 * KIB);
    assert_int_equal(stats(p).reserved, 256 * KIB + 512 * KIB + MIB + 256 * KIB);
    check_backend(p, &f);
    nu__allocation all[] = {a, big, c1, c2, other};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        nu__pool_free(p, &all[i], NULL);
    assert_int_equal(stats(p).reserved, 0);
    nu__pool_destroy(p);
    fake_fini(&f);

    c.first_block = 3 * KIB; /* not a power of two */
    assert_int_equal(nu__pool_create(&c, &b, &p), NU_ERROR_INVALID_ARGUMENT);
}

static void test_dedicated(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation a = alloc_ok(p, 256 * KIB + 1);
    assert_int_equal(a.size, 260 * KIB);
    assert_int_equal(a.offset, 0);
    assert_int_equal(f.last_size, 260 * KIB);
    nu__allocation b = alloc_ok(p, 300 * KIB);
    assert_ptr_not_equal(a.block, b.block);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.blocks, 2);
    assert_int_equal(s.reserved, 560 * KIB);
    nu__pool_free(p, &a, NULL);
    assert_int_equal(stats(p).cache, 260 * KIB);
    nu__allocation c = alloc_ok(p, 260 * KIB);
    assert_true(same_piece(&a, &c));
    nu__pool_free(p, &c, NULL);
    nu__pool_free(p, &b, NULL);
    nu__pool_clear_cache(p);
    s = stats(p);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(f.releases, 2);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- the memory limit ------------------------------------------------------------------------ */

/* The limit bounds active + cache (MLX's meaning); `reserved` is not limited. */
static void check_limit(nu__pool *p)
{
    nu_memory_stats s = stats(p);
    assert_true(s.active + s.cache <= s.memory_limit);
}

static void test_limit_oom_message(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    nu__allocation a = alloc_ok(p, 3 * MIB);
    unsigned calls = f.calls;
    nu_memory_stats before = stats(p);
    nu__allocation b;
    memset(&b, 0xab, sizeof b);
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_null(b.block);
    assert_null(b.busy);
    assert_int_equal(b.size, 0);
    /* The message names the request, the limit, what is in use and what is cached. */
    assert_non_null(strstr(why, "2097152"));
    assert_non_null(strstr(why, "limit of 4.0 MiB"));
    assert_non_null(strstr(why, "3.0 MiB in use"));
    assert_non_null(strstr(why, "0 B cached"));
    assert_null(strstr(why, "still used by GPU work"));
    nu_memory_stats after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(f.calls, calls); /* the limit, not the device: no backend call */

    /* Exactly up to the limit is allowed; one granule more is not. */
    nu__allocation c = alloc_ok(p, MIB);
    assert_int_equal(stats(p).active, 4 * MIB);
    check_limit(p);
    assert_int_equal(nu__pool_alloc(p, KIND, 1, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "(1 bytes requested, 256 rounded)"));
    assert_non_null(strstr(why, "4.0 MiB in use"));

    /* An idle cache is kept when releasing it would not make room: active + request alone
     * passes the limit. */
    nu__pool_free(p, &c, NULL);
    before = stats(p);
    assert_int_equal(before.cache, MIB);
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "3.0 MiB in use"));
    assert_non_null(strstr(why, "1.0 MiB cached"));
    after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(f.releases, 0);
    nu__pool_free(p, &a, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* The message says the cache is "still used by GPU work" only when that is why the request
 * failed: not when active + request alone passes the limit. */
static void test_limit_message_idle_cache(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    nu__allocation a = alloc_ok(p, 3 * MIB), c = alloc_ok(p, MIB);
    nu__pool_free(p, &c, NULL);
    nu__allocation b;
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "1.0 MiB cached"));
    assert_null(strstr(why, "still used by GPU work")); /* it is idle, and would not help */
    /* With a busy cached piece, too: it is not why 2 MiB do not fit. */
    nu__guard g;
    assert_int_equal(nu__guard_init(&g, NULL), NU_OK);
    nu__guard_acquire(&g, false);
    c = alloc_ok(p, MIB);
    nu__pool_free(p, &c, &g);
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_null(strstr(why, "still used by GPU work"));
    nu__pool_free(p, &a, NULL);
    nu__pool_destroy(p);
    nu__guard_committed(&g);
    nu__guard_submitted(&g, false);
    nu__guard_release_use(&g, false, NULL);
    nu__guard_fini(&g);
    fake_fini(&f);
}

static void test_limit_releases_cache_and_retries(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    nu__allocation a = alloc_ok(p, 3 * MIB);
    nu__pool_free(p, &a, NULL);
    assert_int_equal(stats(p).cache, 3 * MIB);
    /* 3 MiB cannot serve 2 MiB (more than 2 MiB + 2 pages), and both do not fit together. */
    nu__allocation b = alloc_ok(p, 2 * MIB);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 2 * MIB);
    assert_int_equal(s.blocks, 1);
    assert_int_equal(f.releases, 1);
    assert_int_equal(f.calls, 2); /* no failed backend call: the limit released it */

    /* The limit is shared by the kinds. Nothing is released while active + cache + request
     * fits it exactly... */
    nu__allocation c = alloc_ok(p, MIB);
    nu__pool_free(p, &c, NULL);
    nu__allocation d = alloc_kind(p, NU__KIND_SHARED, MIB); /* private cache cannot serve it */
    s = stats(p);
    assert_int_equal(s.active, 3 * MIB);
    assert_int_equal(s.cache, MIB);
    assert_int_equal(f.releases, 1);
    check_limit(p);
    /* ...and one granule more releases the other kind's cached piece. */
    nu__allocation e = alloc_kind(p, NU__KIND_SHARED, 1);
    s = stats(p);
    assert_int_equal(s.active, 3 * MIB + 256);
    assert_int_equal(s.cache, 0);
    assert_int_equal(f.releases, 2);
    assert_int_equal(s.reserved, 4 * MIB); /* 2 MiB, 1 MiB and a shared 1 MiB block */
    check_limit(p);
    check_backend(p, &f);
    nu__pool_free(p, &e, NULL);
    nu__pool_free(p, &d, NULL);
    nu__pool_free(p, &b, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* A request that fits once part of the cache is released releases the least recently freed
 * pieces, only as many as needed, and keeps the rest. */
static void test_limit_trims_least_recently_freed(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, 4 * MIB, MIB); /* pieces up to 1 MiB are carved from one block */
    nu__allocation x = alloc_ok(p, 512 * KIB);
    nu__allocation a = alloc_ok(p, 64 * KIB), b = alloc_ok(p, 64 * KIB), c = alloc_ok(p, 128 * KIB),
                   d = alloc_ok(p, 64 * KIB);
    assert_int_equal(a.offset, 512 * KIB);
    assert_int_equal(b.offset, 576 * KIB);
    assert_int_equal(c.offset, 640 * KIB);
    assert_int_equal(d.offset, 768 * KIB);
    /* Least recently freed first: c, a, d, b. */
    nu__pool_free(p, &c, NULL);
    nu__pool_free(p, &a, NULL);
    nu__pool_free(p, &d, NULL);
    nu__pool_free(p, &b, NULL);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 512 * KIB);
    assert_int_equal(s.cache, 320 * KIB);

    /* 512 + 320 + 384 > 1024: 192 KiB must go, and c (128 KiB) then a (64 KiB) do. */
    nu__allocation big = alloc_ok(p, 384 * KIB);
    s = stats(p);
    assert_int_equal(s.active, 896 * KIB);
    assert_int_equal(s.cache, 128 * KIB);
    assert_int_equal(s.active + s.cache, MIB);
    assert_ptr_equal(big.block, x.block);
    assert_int_equal(big.offset, 832 * KIB); /* the freed ranges of a and c are too small */
    assert_int_equal(f.calls, 1);
    assert_int_equal(f.releases, 0);

    /* d and b were kept: they serve 64 KiB requests, most recently freed first. */
    nu__allocation r1 = alloc_ok(p, 64 * KIB), r2 = alloc_ok(p, 64 * KIB);
    assert_true(same_piece(&r1, &b));
    assert_true(same_piece(&r2, &d));
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.active, MIB);

    /* c and a went back to the block: once the cache makes room, they are carved again. */
    nu__pool_free(p, &big, NULL);
    nu__allocation q = alloc_ok(p, 128 * KIB); /* the cached 384 KiB piece goes to make room */
    assert_ptr_equal(q.block, x.block);
    assert_int_equal(q.offset, 640 * KIB);
    nu__allocation q2 = alloc_ok(p, 64 * KIB);
    assert_int_equal(q2.offset, 512 * KIB);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.active, 512 * KIB + 128 * KIB + 128 * KIB + 64 * KIB);
    check_limit(p);
    nu__pool_free(p, &q2, NULL);
    nu__pool_free(p, &q, NULL);
    nu__pool_free(p, &r2, NULL);
    nu__pool_free(p, &r1, NULL);
    nu__pool_free(p, &x, NULL);
    check_backend(p, &f);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* Unused parts of blocks are not limited: reserved may pass the limit while active + cache
 * stays within it. */
static void test_reserved_exceeds_limit(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, MIB + 512 * KIB);
    nu__allocation big = alloc_ok(p, MIB); /* dedicated */
    /* A whole new block although only 512 KiB are left under the limit: no fallback. */
    nu__allocation small = alloc_ok(p, 64 * KIB);
    assert_int_equal(f.last_size, MIB);
    assert_int_equal(small.offset, 0);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.reserved, 2 * MIB);
    assert_true(s.reserved > s.memory_limit);
    assert_int_equal(s.active, MIB + 64 * KIB);
    assert_int_equal(s.blocks, 2);
    /* Carved from that block up to the limit. */
    nu__allocation x[7];
    for (int i = 0; i < 7; i++) {
        x[i] = alloc_ok(p, 64 * KIB);
        assert_ptr_equal(x[i].block, small.block);
        assert_int_equal(x[i].offset, (uint64_t)(i + 1) * 64 * KIB);
    }
    s = stats(p);
    assert_int_equal(s.active, MIB + 512 * KIB);
    assert_int_equal(s.reserved, 2 * MIB);
    assert_int_equal(s.blocks, 2);
    check_limit(p);
    /* The block has 512 KiB free, but the limit is reached. */
    unsigned calls = f.calls;
    nu__allocation none;
    assert_int_equal(nu__pool_alloc(p, KIND, 1, false, &none, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "limit of 1.5 MiB"));
    assert_non_null(strstr(why, "1.5 MiB in use"));
    assert_int_equal(f.calls, calls);

    /* A cached piece counts against the limit: a request it cannot serve releases it, and the
     * range it leaves is carved again. */
    nu__pool_free(p, &x[0], NULL);
    s = stats(p);
    assert_int_equal(s.cache, 64 * KIB);
    assert_int_equal(s.active + s.cache, s.memory_limit);
    nu__allocation r = alloc_ok(p, 1);
    assert_ptr_equal(r.block, small.block);
    assert_int_equal(r.offset, 64 * KIB);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.active, MIB + 448 * KIB + 256);
    assert_int_equal(s.reserved, 2 * MIB);
    assert_int_equal(f.calls, calls);
    check_limit(p);
    check_backend(p, &f);
    nu__pool_free(p, &r, NULL);
    for (int i = 1; i < 7; i++)
        nu__pool_free(p, &x[i], NULL);
    nu__pool_free(p, &small, NULL);
    nu__pool_free(p, &big, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* A request waiting for the backend counts against the limit: others see it. */
static nu__pool *hook_pool;
static nu_status hook_status;
static nu__allocation hook_alloc;
static uint64_t hook_size;

static void alloc_meanwhile(fake *f)
{
    (void)f;
    char msg[256];
    hook_status = nu__pool_alloc(hook_pool, KIND, hook_size, false, &hook_alloc, msg, sizeof msg);
}

static void test_limit_counts_requests_in_flight(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    hook_pool = p;
    /* While 3 MiB are being allocated, 2 MiB more do not fit... */
    hook_size = 2 * MIB;
    hook_status = NU_OK;
    f.on_allocate = alloc_meanwhile;
    nu__allocation a = alloc_ok(p, 3 * MIB);
    assert_int_equal(hook_status, NU_ERROR_OUT_OF_MEMORY);
    assert_null(hook_alloc.block);
    check_limit(p);
    /* ...and 1 MiB does; an idle cached piece makes room for it. */
    nu__allocation c = alloc_ok(p, 512 * KIB);
    nu__pool_free(p, &a, NULL);
    nu__pool_free(p, &c, NULL);
    assert_int_equal(stats(p).cache, 3 * MIB + 512 * KIB);
    hook_size = MIB;
    f.on_allocate = alloc_meanwhile;
    nu__allocation b = alloc_ok(p, 2 * MIB); /* releases the 3 MiB piece (least recently freed) */
    assert_int_equal(hook_status, NU_OK);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 3 * MIB);
    assert_int_equal(s.cache, 512 * KIB); /* 2 + 1 + 0.5 fit: kept */
    check_limit(p);
    nu__pool_free(p, &hook_alloc, NULL);
    nu__pool_free(p, &b, NULL);
    check_backend(p, &f);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* The fallback to a block of the rounded size happens only when the device cannot give a
 * whole block, after releasing the cache. */
static void test_dedicated_fallback(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, MIB + 512 * KIB); /* the device's capacity */
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation big = alloc_ok(p, MIB); /* dedicated */
    /* A 1 MiB block does not fit: it is tried, the (empty) cache released and tried again,
     * then a block of the rounded size. */
    unsigned calls = f.calls;
    nu__allocation small = alloc_ok(p, 64 * KIB);
    assert_int_equal(f.calls, calls + 3);
    assert_int_equal(f.last_size, 64 * KIB);
    assert_int_equal(small.offset, 0);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.reserved, MIB + 64 * KIB);
    assert_int_equal(s.blocks, 2);
    /* Its memory is reused like any other. */
    nu__pool_free(p, &small, NULL);
    calls = f.calls;
    nu__allocation again = alloc_ok(p, 64 * KIB);
    assert_true(same_piece(&small, &again));
    assert_int_equal(f.calls, calls);
    /* Up to what the device holds, then out of memory, naming the device. */
    nu__allocation rest = alloc_ok(p, 448 * KIB);
    assert_int_equal(f.used, f.capacity);
    calls = f.calls;
    nu__allocation none;
    nu_memory_stats before = stats(p);
    assert_int_equal(nu__pool_alloc(p, KIND, 256, false, &none, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_int_equal(f.calls, calls + 3); /* block, block after releasing the cache, 256 B */
    assert_null(none.block);
    assert_non_null(strstr(why, "device could not allocate 256 B"));
    nu_memory_stats after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);

    /* When releasing the cache makes room for a whole block, there is no fallback. */
    nu__pool_free(p, &big, NULL);
    assert_int_equal(stats(p).cache, MIB);
    calls = f.calls;
    nu__allocation c = alloc_ok(p, 4 * KIB);
    assert_int_equal(f.calls, calls + 2);
    assert_int_equal(f.last_size, MIB);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, MIB + 512 * KIB);
    check_backend(p, &f);
    nu__pool_free(p, &c, NULL);
    nu__pool_free(p, &rest, NULL);
    nu__pool_free(p, &again, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

static void test_backend_failure(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);

    /* A failure releases the cache and retries. */
    nu__allocation a = alloc_ok(p, 3 * MIB);
    nu__pool_free(p, &a, NULL);
    f.fail_next = 1;
    unsigned calls = f.calls;
    nu__allocation b = alloc_ok(p, 2 * MIB);
    assert_int_equal(f.calls, calls + 2);
    assert_int_equal(stats(p).cache, 0);
    assert_int_equal(f.releases, 1);

    /* A full block that the device cannot give: a block of the rounded size. */
    f.fail_next = 2;
    calls = f.calls;
    nu__allocation c = alloc_ok(p, 4 * KIB);
    assert_int_equal(f.calls, calls + 3);
    assert_int_equal(f.last_size, 4 * KIB);

    /* The device full: out of memory, with a message, stats unchanged. */
    f.fail_next = 3;
    nu_memory_stats before = stats(p);
    nu__allocation d;
    assert_int_equal(nu__pool_alloc(p, KIND, 4 * KIB, false, &d, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_null(d.block);
    assert_non_null(strstr(why, "device"));
    nu_memory_stats after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(f.fail_next, 0);

    /* Another failure is retried the same way and its status returned, named in the message. */
    f.fail_status = NU_ERROR_DEVICE_LOST;
    f.fail_next = 2;
    calls = f.calls;
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &d, why, sizeof why), NU_ERROR_DEVICE_LOST);
    assert_int_equal(f.calls, calls + 2); /* dedicated: no fallback */
    assert_non_null(strstr(why, nu_status_string(NU_ERROR_DEVICE_LOST)));
    assert_null(d.block);

    /* Host memory running out in the backend is not retried, and the cache is kept. */
    nu__allocation k = alloc_ok(p, 3 * MIB);
    nu__pool_free(p, &k, NULL);
    f.fail_status = NU_ERROR_HOST_OUT_OF_MEMORY;
    f.fail_next = 1;
    before = stats(p);
    assert_int_equal(before.cache, 3 * MIB);
    calls = f.calls;
    unsigned releases = f.releases;
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &d, why, sizeof why), NU_ERROR_HOST_OUT_OF_MEMORY);
    assert_int_equal(f.calls, calls + 1);
    assert_int_equal(f.releases, releases);
    assert_non_null(strstr(why, "out of host memory"));
    assert_null(d.block);
    after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);
    /* For a small request too: no second block, no fallback. */
    f.fail_next = 1;
    calls = f.calls;
    assert_int_equal(nu__pool_alloc(p, KIND, 4 * KIB, false, &d, why, sizeof why), NU_ERROR_HOST_OUT_OF_MEMORY);
    assert_int_equal(f.calls, calls + 1);
    after = stats(p);
    assert_memory_equal(&before, &after, sizeof before);
    f.fail_status = NU_OK;
    nu__pool_clear_cache(p);

    /* A capacity: what the device holds bounds it too. */
    f.capacity = f.used + 5 * MIB;
    nu__allocation e = alloc_ok(p, 5 * MIB);
    assert_int_equal(nu__pool_alloc(p, KIND, 2 * MIB, false, &d, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    nu__pool_free(p, &e, NULL);
    nu__allocation g = alloc_ok(p, 2 * MIB); /* after releasing the cached 5 MiB */
    nu__pool_free(p, &g, NULL);
    nu__pool_free(p, &b, NULL);
    nu__pool_free(p, &c, NULL);
    check_backend(p, &f);
    nu__pool_destroy(p);
    fake_fini(&f);
}

static void test_set_limit(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation a = alloc_ok(p, 2 * MIB);
    nu__allocation c1 = alloc_ok(p, MIB), c2 = alloc_ok(p, MIB), c3 = alloc_ok(p, MIB);
    nu__pool_free(p, &c1, NULL);
    nu__pool_free(p, &c2, NULL);
    nu__pool_free(p, &c3, NULL);
    uint64_t prev = 123;
    assert_int_equal(nu__pool_set_limit(p, 2 * MIB - 1, &prev), NU_ERROR_LIMIT);
    assert_int_equal(prev, 0);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.memory_limit, 64 * MIB);
    assert_int_equal(s.cache, 3 * MIB);
    /* Lowering it trims the cache to limit - active, least recently freed first. */
    assert_int_equal(nu__pool_set_limit(p, 4 * MIB, &prev), NU_OK);
    assert_int_equal(prev, 64 * MIB);
    s = stats(p);
    assert_int_equal(s.memory_limit, 4 * MIB);
    assert_int_equal(s.cache, 2 * MIB);
    assert_int_equal(s.reserved, 4 * MIB);
    assert_int_equal(f.releases, 1);
    /* Raising it releases nothing; c3, then c2 serve requests. */
    assert_int_equal(nu__pool_set_limit(p, 8 * MIB, &prev), NU_OK);
    assert_int_equal(prev, 4 * MIB);
    assert_int_equal(stats(p).cache, 2 * MIB);
    nu__allocation r = alloc_ok(p, MIB);
    assert_true(same_piece(&r, &c3));
    nu__pool_free(p, &r, NULL);
    /* Exactly the active bytes is allowed: the whole cache goes, and nothing more fits. */
    assert_int_equal(nu__pool_set_limit(p, 2 * MIB, NULL), NU_OK);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 2 * MIB);
    nu__allocation b;
    assert_int_equal(nu__pool_alloc(p, KIND, 1, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    /* The cache limit defaults to the initial memory limit and is kept apart. */
    assert_int_equal(stats(p).cache_limit, 64 * MIB);

    /* Cached memory that GPU work still uses stays when the limit is lowered; requests that
     * need its room then fail, saying so, until it is idle. */
    assert_int_equal(nu__pool_set_limit(p, 8 * MIB, NULL), NU_OK);
    nu__guard g;
    assert_int_equal(nu__guard_init(&g, NULL), NU_OK);
    nu__guard_acquire(&g, true);
    nu__allocation busy = alloc_ok(p, MIB);
    nu__pool_free(p, &busy, &g);
    assert_int_equal(nu__pool_set_limit(p, 2 * MIB + 512 * KIB, NULL), NU_OK);
    s = stats(p);
    /* Held against the limit, but reported in the cache only once its GPU use completes. */
    assert_int_equal(s.cache, 0);
    assert_true(s.active + MIB > s.memory_limit);
    assert_int_equal(nu__pool_alloc(p, KIND, 1, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "0 B cached, 1.0 MiB freed but still used by GPU work"));
    assert_int_equal(stats(p).cache, 0);
    nu__guard_committed(&g);
    nu__guard_submitted(&g, true);
    nu__guard_release_use(&g, true, NULL);
    b = alloc_ok(p, 1); /* the idle piece goes */
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.active, 2 * MIB + 256);
    assert_int_equal(atomic_load(&g.refs), 1);
    check_limit(p);
    nu__pool_free(p, &b, NULL);
    nu__pool_free(p, &a, NULL);
    nu__pool_destroy(p);
    nu__guard_fini(&g);
    fake_fini(&f);
}

/* Making room releases idle cached pieces, dropping their guards' references outside the
 * mutex (every DROP_MAX of them); the last reference may go there, and the buffer freeing
 * itself may allocate (here: from the destroy callback, as another thread could at that
 * moment). The request that was making room must then still fit: active + cache stays
 * within the limit. */
static nu__pool *racing_pool;
static nu__allocation racing_alloc;
static nu_status racing_status;
static int racing_calls;

static void racing_destroy(nu__guard *g)
{
    if (racing_calls++ == 0) {
        char msg[256];
        racing_status = nu__pool_alloc(racing_pool, KIND, MIB, false, &racing_alloc, msg, sizeof msg);
    }
    nu__guard_fini(g);
    free(g);
}

static void test_limit_while_releasing_guards(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    racing_pool = p;
    racing_calls = 0;
    racing_status = NU_ERROR_INVALID_ARGUMENT;
    memset(&racing_alloc, 0, sizeof racing_alloc);
    nu__allocation x = alloc_ok(p, MIB);
    enum { N = 20 };
    nu__allocation pieces[N];
    for (int i = 0; i < N; i++)
        pieces[i] = alloc_ok(p, 64 * KIB);
    for (int i = 0; i < N; i++) {
        nu__guard *g = malloc(sizeof *g);
        assert_int_equal(nu__guard_init(g, racing_destroy), NU_OK);
        nu__guard_acquire(g, false);
        nu__pool_free(p, &pieces[i], g);
        nu__guard_release(g); /* the pool holds the last reference */
        nu__guard_committed(g);
        nu__guard_submitted(g, false);
        nu__guard_release_use(g, false, NULL); /* idle: released with the piece */
    }
    assert_int_equal(stats(p).cache, N * 64 * KIB);
    /* 1 + 3 MiB: the whole cache must go. */
    nu__allocation a;
    nu_status st = nu__pool_alloc(p, KIND, 3 * MIB, false, &a, why, sizeof why);
    assert_int_equal(racing_calls, N);
    /* Either may fail, not both succeed. */
    assert_false(st == NU_OK && racing_status == NU_OK);
    check_limit(p);
    if (st == NU_OK)
        nu__pool_free(p, &a, NULL);
    if (racing_status == NU_OK)
        nu__pool_free(p, &racing_alloc, NULL);
    nu__pool_free(p, &x, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- the cache --------------------------------------------------------------------------------- */

static void test_cache_limit_zero(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    uint64_t prev = 0;
    nu__pool_set_cache_limit(p, 0, &prev);
    assert_int_equal(prev, 64 * MIB);
    nu__allocation a = alloc_ok(p, 1000), b = alloc_ok(p, 2 * MIB);
    nu__pool_free(p, &a, NULL);
    nu__pool_free(p, &b, NULL);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.cache_limit, 0);
    assert_int_equal(f.live, 0);
    nu__pool_destroy(p);
    fake_fini(&f);
}

static void test_lru_eviction(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, 4 * MIB, 64 * MIB);
    nu__pool_set_cache_limit(p, 400 * KIB, NULL);
    nu__allocation a = alloc_ok(p, 64 * KIB), b = alloc_ok(p, 128 * KIB), c = alloc_ok(p, 192 * KIB),
                   d = alloc_ok(p, 64 * KIB);
    nu__pool_free(p, &a, NULL);
    nu__pool_free(p, &b, NULL);
    nu__pool_free(p, &c, NULL);
    assert_int_equal(stats(p).cache, 384 * KIB);
    nu__pool_free(p, &d, NULL); /* 448 KiB > 400 KiB: the least recently freed (a) goes */
    assert_int_equal(stats(p).cache, 384 * KIB);
    nu__pool_set_cache_limit(p, 200 * KIB, NULL); /* b then c go */
    assert_int_equal(stats(p).cache, 64 * KIB);
    nu__allocation r = alloc_ok(p, 64 * KIB);
    assert_true(same_piece(&r, &d));
    assert_int_equal(stats(p).cache, 0);
    /* a, b and c went back to the block: the next piece is carved at offset 0. */
    nu__allocation q = alloc_ok(p, 384 * KIB);
    assert_ptr_equal(q.block, a.block);
    assert_int_equal(q.offset, 0);
    nu__pool_free(p, &q, NULL);
    nu__pool_free(p, &r, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

static void test_clear_cache_and_peak(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__allocation a = alloc_ok(p, MIB);
    assert_int_equal(stats(p).peak, MIB);
    nu__pool_free(p, &a, NULL);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.cache, MIB);
    assert_int_equal(s.peak, MIB);
    nu__pool_reset_peak(p);
    assert_int_equal(stats(p).peak, 0);
    /* 1 MiB cached does not serve 512 KiB: a new piece, and the peak never counts the cache. */
    nu__allocation b = alloc_ok(p, 512 * KIB);
    s = stats(p);
    assert_int_equal(s.active, 512 * KIB);
    assert_int_equal(s.peak, 512 * KIB);
    assert_int_equal(s.cache, MIB);
    assert_int_equal(s.reserved, MIB + 512 * KIB);
    nu__pool_clear_cache(p);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 512 * KIB);
    assert_int_equal(s.blocks, 1);
    nu__pool_free(p, &b, NULL);
    nu__pool_reset_peak(p);
    assert_int_equal(stats(p).peak, 0);
    nu__pool_destroy(p);
    fake_fini(&f);
}

static void test_buffers_and_tracking(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 16 * MIB);
    nu__pool_count_buffer(p, 1);
    nu__pool_count_buffer(p, 1);
    nu__pool_count_buffer(p, -1);
    assert_int_equal(stats(p).buffers, 1);
    nu__pool_count_buffer(p, -1);
    assert_int_equal(stats(p).buffers, 0);

    /* Tracked bytes count in active and reserved, against the limit, making room like a
     * request: least recently freed cached pieces go first, as far as needed. */
    nu__allocation a = alloc_ok(p, 4 * MIB), b = alloc_ok(p, 4 * MIB);
    nu__pool_free(p, &a, NULL);
    nu__pool_free(p, &b, NULL);
    assert_int_equal(nu__pool_track(p, 10 * MIB, why, sizeof why), NU_OK); /* releases a */
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 10 * MIB);
    assert_int_equal(s.reserved, 14 * MIB);
    assert_int_equal(s.peak, 10 * MIB);
    assert_int_equal(s.cache, 4 * MIB);
    assert_int_equal(s.blocks, 1);
    assert_int_equal(f.releases, 1);
    nu__allocation r = alloc_ok(p, 4 * MIB); /* b was kept */
    assert_true(same_piece(&r, &b));
    nu__pool_free(p, &r, NULL);
    /* What cannot fit leaves the cache alone. */
    assert_int_equal(nu__pool_track(p, 7 * MIB, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "7340032"));
    assert_non_null(strstr(why, "16.0 MiB"));
    assert_non_null(strstr(why, "10.0 MiB in use"));
    assert_non_null(strstr(why, "4.0 MiB cached"));
    s = stats(p);
    assert_int_equal(s.active, 10 * MIB);
    assert_int_equal(s.cache, 4 * MIB);
    /* Exactly up to the limit beside the cache keeps it... */
    assert_int_equal(nu__pool_track(p, 2 * MIB, why, sizeof why), NU_OK);
    s = stats(p);
    assert_int_equal(s.active, 12 * MIB);
    assert_int_equal(s.cache, 4 * MIB);
    check_limit(p);
    /* ...and one byte more releases it. */
    assert_int_equal(nu__pool_track(p, 1, why, sizeof why), NU_OK);
    s = stats(p);
    assert_int_equal(s.active, 12 * MIB + 1);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.reserved, 12 * MIB + 1);
    assert_int_equal(f.releases, 2);
    assert_int_equal(nu__pool_set_limit(p, 12 * MIB, NULL), NU_ERROR_LIMIT);
    nu__allocation c;
    assert_int_equal(nu__pool_alloc(p, KIND, 4 * MIB, false, &c, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    c = alloc_ok(p, 3 * MIB); /* 15 MiB + 1 */
    nu__pool_untrack(p, 12 * MIB + 1);
    s = stats(p);
    assert_int_equal(s.active, 3 * MIB);
    assert_int_equal(s.reserved, 3 * MIB);
    check_backend(p, &f);
    nu__pool_free(p, &c, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- busy guards --------------------------------------------------------------------------------- */

/* A GPU request (gpu_reuse) that must succeed. */
static nu__allocation alloc_gpu(nu__pool *p, uint64_t size)
{
    nu__allocation a;
    nu_status st = nu__pool_alloc(p, KIND, size, true, &a, why, sizeof why);
    if (st != NU_OK)
        fail_msg("alloc %llu: %s: %s", (unsigned long long)size, nu_status_string(st), why);
    assert_non_null(a.block);
    return a;
}

static void test_busy_guards(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 64 * MIB);
    nu__guard g;
    assert_int_equal(nu__guard_init(&g, NULL), NU_OK);
    nu__guard_acquire(&g, true); /* GPU work uses the memory (recorded, not committed yet) */

    nu__allocation a = alloc_ok(p, 64 * KIB);
    nu__pool_free(p, &a, &g);
    assert_int_equal(atomic_load(&g.refs), 2);
    /* Kept for reuse, but in the cache's statistics only once its last GPU use completes. */
    assert_int_equal(stats(p).cache, 0);
    /* A normal request does not get it. */
    nu__allocation b = alloc_ok(p, 64 * KIB);
    assert_false(same_piece(&a, &b));
    /* Nor does a GPU request while the use is not committed: there is no queue position to
     * wait for yet. */
    nu__allocation n1 = alloc_gpu(p, 64 * KIB);
    assert_false(same_piece(&a, &n1));
    assert_null(n1.busy);
    assert_int_equal(atomic_load(&g.refs), 2);
    assert_int_equal(stats(p).cache, 0);
    /* Once committed, a GPU request gets it, with a reference to the guard. */
    nu__guard_committed(&g);
    nu__allocation c = alloc_gpu(p, 64 * KIB);
    assert_true(same_piece(&a, &c));
    assert_ptr_equal(c.busy, &g);
    assert_int_equal(atomic_load(&g.refs), 2);
    assert_int_equal(stats(p).cache, 0);
    nu__guard_release(c.busy);
    nu__guard_submitted(&g, true); /* submission does not matter to reuse */

    /* Every use must be committed: a second use, recorded but not committed, hides it again. */
    nu__pool_free(p, &c, &g);
    nu__guard_acquire(&g, false);
    assert_false(nu__guard_committed_uses(&g));
    nu__allocation n2 = alloc_gpu(p, 64 * KIB);
    assert_false(same_piece(&a, &n2));
    assert_null(n2.busy);
    nu__guard_committed(&g);
    nu__allocation c2 = alloc_gpu(p, 64 * KIB);
    assert_true(same_piece(&a, &c2));
    assert_ptr_equal(c2.busy, &g);
    nu__guard_release(c2.busy);
    nu__guard_submitted(&g, false);
    nu__pool_free(p, &n1, NULL);
    nu__pool_free(p, &n2, NULL);
    nu__pool_clear_cache(p);

    /* Cache release and eviction skip it while busy. */
    nu__pool_free(p, &c2, &g);
    nu__pool_clear_cache(p);
    assert_int_equal(stats(p).cache, 0);
    assert_int_equal(stats(p).reserved, MIB);
    nu__pool_set_cache_limit(p, 0, NULL);
    nu__pool_free(p, &b, NULL); /* released at once; the busy piece stays */
    assert_int_equal(stats(p).cache, 0);
    assert_int_equal(stats(p).blocks, 1);
    nu__pool_set_cache_limit(p, 64 * MIB, NULL);

    /* Once idle (both uses completed), a normal request reuses it and the pool drops its
     * reference. */
    nu__guard_release_use(&g, true, NULL);
    assert_int_equal(stats(p).cache, 0);
    nu__allocation n3 = alloc_ok(p, 64 * KIB);
    assert_false(same_piece(&a, &n3)); /* one use is still pending */
    nu__guard_release_use(&g, false, NULL);
    assert_int_equal(stats(p).cache, 64 * KIB); /* its last use completed: in the cache now */
    nu__allocation d = alloc_ok(p, 64 * KIB);
    assert_true(same_piece(&a, &d));
    assert_null(d.busy);
    assert_int_equal(atomic_load(&g.refs), 1);
    nu__pool_free(p, &n3, NULL);

    /* An idle guard given to free is not kept. */
    nu__pool_free(p, &d, &g);
    assert_int_equal(atomic_load(&g.refs), 1);

    /* An idle GPU request gets an idle piece without a reference. */
    nu__allocation e0 = alloc_gpu(p, 64 * KIB);
    assert_true(same_piece(&a, &e0));
    assert_null(e0.busy);
    nu__pool_free(p, &e0, NULL);
    nu__pool_clear_cache(p);

    /* Making room for the limit skips busy pieces too: the least recently freed idle ones go,
     * and a request that needs the busy piece's room fails, naming it. */
    assert_int_equal(nu__pool_set_limit(p, MIB, NULL), NU_OK);
    nu__guard_acquire(&g, false);
    nu__allocation x = alloc_ok(p, 640 * KIB); /* dedicated */
    nu__allocation p1 = alloc_ok(p, 128 * KIB), p2 = alloc_ok(p, 128 * KIB); /* carved */
    nu__pool_free(p, &p1, &g); /* busy, least recently freed */
    nu__pool_free(p, &p2, NULL);
    nu__allocation y = alloc_ok(p, 256 * KIB); /* 640 + 256 + 256 > 1024: p2 goes, p1 stays */
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 896 * KIB);
    assert_int_equal(s.cache, 0); /* p1 is held, but not reported until idle */
    assert_ptr_equal(y.block, p2.block);
    assert_int_equal(y.offset, p2.offset); /* p2's range is carved again */
    check_limit(p);
    /* 896 + 64 fits the limit, but not beside the busy 128 KiB (too large to serve 64 KiB). */
    nu__allocation none;
    assert_int_equal(nu__pool_alloc(p, KIND, 64 * KIB, false, &none, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(why, "128.0 KiB freed but still used by GPU work"));
    assert_int_equal(stats(p).cache, 0);
    nu__guard_committed(&g);
    nu__guard_submitted(&g, false);
    /* A GPU request it serves is a cache hit: no room needed. */
    nu__allocation z = alloc_gpu(p, 128 * KIB);
    assert_true(same_piece(&z, &p1));
    assert_ptr_equal(z.busy, &g);
    nu__guard_release(z.busy);
    nu__pool_free(p, &z, &g);
    nu__guard_release_use(&g, false, NULL);
    nu__allocation w = alloc_ok(p, 64 * KIB); /* idle now: released to make room */
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(atomic_load(&g.refs), 1);
    check_limit(p);
    nu__pool_free(p, &w, NULL);
    nu__pool_free(p, &y, NULL);
    nu__pool_free(p, &x, NULL);
    nu__pool_clear_cache(p);
    assert_int_equal(nu__pool_set_limit(p, 64 * MIB, NULL), NU_OK);

    /* A busy piece is released once idle; the last reference may go inside the pool, whose
     * destroy callback calls back into it. */
    nu__guard *h = malloc(sizeof *h);
    assert_int_equal(nu__guard_init(h, on_destroy), NU_OK);
    destroyed_pool = p;
    destroyed = 0;
    nu__guard_acquire(h, false);
    nu__allocation e = alloc_ok(p, 128 * KIB);
    nu__pool_free(p, &e, h);
    nu__guard_release(h); /* the buffer's own reference */
    assert_int_equal(destroyed, 0);
    nu__pool_clear_cache(p);
    assert_int_equal(stats(p).cache, 0);
    assert_int_equal(stats(p).blocks, 1);
    nu__guard_committed(h);
    nu__guard_submitted(h, false);
    nu__guard_release_use(h, false, NULL);
    nu__pool_clear_cache(p);
    assert_int_equal(destroyed, 1);
    free(h);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.blocks, 0);

    /* Destroying the pool drops the references of busy cached pieces. */
    nu__guard_acquire(&g, false);
    nu__allocation q = alloc_ok(p, 1000);
    nu__pool_free(p, &q, &g);
    assert_int_equal(atomic_load(&g.refs), 2);
    nu__pool_destroy(p);
    assert_int_equal(atomic_load(&g.refs), 1);
    nu__guard_committed(&g);
    nu__guard_submitted(&g, false);
    nu__guard_release_use(&g, false, NULL);
    nu__guard_fini(&g);
    fake_fini(&f);
}

/* nuvec's own memory (staging): not in active or peak, but against the limit and in pending;
 * freed into the cache like any piece. */
static void test_internal_memory(void **state)
{
    (void)state;
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, 4 * MIB);
    nu__allocation a = alloc_ok(p, 64 * KIB), in;
    assert_int_equal(nu__pool_alloc(p, KIND, 3 * MIB, NU__ALLOC_INTERNAL, &in, why, sizeof why), NU_OK);
    assert_true(in.internal);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 64 * KIB);
    assert_int_equal(s.peak, 64 * KIB);
    assert_int_equal(s.pending, 3 * MIB);
    nu__allocation b;
    assert_int_equal(nu__pool_alloc(p, KIND, MIB, false, &b, why, sizeof why), NU_ERROR_OUT_OF_MEMORY);
    nu__pool_free(p, &in, NULL);
    s = stats(p);
    assert_int_equal(s.active, 64 * KIB);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.cache, 3 * MIB);
    b = alloc_ok(p, MIB); /* the cache makes room */
    nu__pool_free(p, &b, NULL);
    nu__pool_free(p, &a, NULL);
    nu__pool_destroy(p);
    fake_fini(&f);
}

/* ---- host allocation failures ------------------------------------------------------------------ */

static void expect_host_failure(nu_status st)
{
    assert_true(st == NU_OK || st == NU_ERROR_HOST_OUT_OF_MEMORY);
}

/* Allocations the scenario holds and the bytes they account. */
typedef struct held {
    nu__allocation a[16];
    uint64_t active;
} held;

static void check_consistent(nu__pool *p, fake *f, const held *h)
{
    check_backend(p, f);
    assert_int_equal(stats(p).active, h->active);
}

static void try_alloc(nu__pool *p, fake *f, held *h, int slot, uint64_t size, bool gpu_reuse)
{
    nu_memory_stats before = stats(p);
    nu__allocation *a = &h->a[slot];
    nu_status st = nu__pool_alloc(p, KIND, size, gpu_reuse, a, why, sizeof why);
    expect_host_failure(st);
    if (st != NU_OK) {
        nu_memory_stats after = stats(p);
        assert_memory_equal(&before, &after, sizeof before);
        assert_null(a->block);
    } else {
        h->active += a->size;
        if (a->busy) {
            nu__guard_release(a->busy);
            a->busy = NULL;
        }
    }
    check_consistent(p, f, h);
}

static void drop(nu__pool *p, fake *f, held *h, int slot, nu__guard *busy)
{
    nu__pool_free(p, &h->a[slot], busy);
    h->active -= h->a[slot].size;
    memset(&h->a[slot], 0, sizeof h->a[slot]);
    check_consistent(p, f, h);
}

static void oom_scenario(void)
{
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = NULL;
    nu_status st = make_pool(&f, MIB, 64 * MIB, &p);
    expect_host_failure(st);
    if (st != NU_OK) {
        assert_null(p);
        fake_fini(&f);
        return;
    }
    nu__guard g;
    assert_int_equal(nu__guard_init(&g, NULL), NU_OK);
    held h;
    memset(&h, 0, sizeof h);
    static const uint64_t sizes[] = {1, 1000, 5000, 16 * KIB + 1, 70 * KIB, 200 * KIB, 300 * KIB, 2 * MIB,
                                     256,  512, 768,  20 * KIB,     64 * KIB, 100 * KIB, 256 * KIB, 3 * MIB};
    for (int i = 0; i < 16; i++)
        try_alloc(p, &f, &h, i, sizes[i], false);
    nu__guard_acquire(&g, false);
    nu__guard_committed(&g); /* so that a GPU request may reuse it */
    for (int i = 0; i < 16; i += 2)
        drop(p, &f, &h, i, i == 4 ? &g : NULL);
    /* Slot 4's piece is still used by GPU work: a GPU request takes it. */
    for (int i = 0; i < 16; i += 2)
        try_alloc(p, &f, &h, i, i == 4 ? sizes[i] : sizes[(i + 1) % 16], i == 4);
    nu__guard_submitted(&g, false);
    nu__guard_release_use(&g, false, NULL);
    nu__pool_set_cache_limit(p, 100 * KIB, NULL);
    check_consistent(p, &f, &h);
    for (int i = 1; i < 16; i += 2)
        if (h.a[i].block)
            drop(p, &f, &h, i, NULL);
    for (int i = 1; i < 16; i += 2)
        try_alloc(p, &f, &h, i, sizes[i] / 3 + 1, false);
    nu__pool_clear_cache(p);
    check_consistent(p, &f, &h);
    assert_int_equal(nu__pool_track(p, 5 * MIB, why, sizeof why), NU_OK); /* no host memory */
    nu__pool_untrack(p, 5 * MIB);
    for (int i = 0; i < 16; i++)
        if (h.a[i].block)
            drop(p, &f, &h, i, NULL);
    nu__pool_clear_cache(p);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 0);
    nu__pool_destroy(p);
    assert_int_equal(atomic_load(&g.refs), 1);
    nu__guard_fini(&g);
    fake_fini(&f);
}

static void test_host_failures(void **state)
{
    (void)state;
    for (int sticky = 0; sticky <= 1; sticky++) {
        for (long n = 0;; n++) {
            int64_t base = nu__host_live();
            nu__host_fail_after(n, sticky);
            oom_scenario();
            int failed = nu__host_failed();
            nu__host_fail_after(-1, 0);
            assert_int_equal(nu__host_live(), base);
            if (!failed)
                break;
            assert_true(n < 10000);
        }
    }
}

/* ---- threads ----------------------------------------------------------------------------------- */

#define THREADS 8
#define SLOTS 24

/* Iterations per thread (NT_ALLOCATOR_ITERATIONS overrides): fewer under ThreadSanitizer, which
 * slows this test tenfold, so that both thread tests take well under 30 s there. */
#if defined(__SANITIZE_THREAD__)
#define ITERATIONS 16000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ITERATIONS 16000
#endif
#endif
#ifndef ITERATIONS
#define ITERATIONS 40000
#endif

typedef struct worker {
    nu__pool *pool;
    int id;
    uint64_t seed;
    long iterations;
    bool limited; /* the pool's limit may be reached: out of memory is allowed */
    nu__guard guard;
    long errors;
    uint64_t reused_busy, out_of_memory;
} worker;

/* Stamps every 256-byte granule of a piece so that overlapping pieces are caught. */
static void stamp(const nu__allocation *a, uint64_t token)
{
    if (!a->mapped)
        return;
    for (uint64_t o = 0; o < a->size; o += 256)
        memcpy(a->mapped + o, &token, sizeof token);
}

static bool stamped(const nu__allocation *a, uint64_t token)
{
    if (!a->mapped)
        return true;
    for (uint64_t o = 0; o < a->size; o += 256) {
        uint64_t t;
        memcpy(&t, a->mapped + o, sizeof t);
        if (t != token)
            return false;
    }
    return true;
}

/* The phases of this thread's "GPU work" on its guard. */
enum { GPU_IDLE, GPU_RECORDED, GPU_COMMITTED };

static void *work(void *arg)
{
    worker *w = arg;
    nu__allocation slot[SLOTS];
    uint64_t token[SLOTS];
    memset(slot, 0, sizeof slot);
    int gpu_phase = GPU_IDLE;
    for (long i = 0; i < w->iterations; i++) {
        uint64_t r = nt_rand(&w->seed);
        int k = (int)(r % SLOTS);
        r /= SLOTS;
        if (slot[k].block) {
            if (!stamped(&slot[k], token[k]))
                w->errors++;
            /* Sometimes the memory is still used by this thread's "GPU work". */
            nu__pool_free(w->pool, &slot[k], r % 4 == 0 ? &w->guard : NULL);
            memset(&slot[k], 0, sizeof slot[k]);
        } else {
            uint64_t pick = r % 100, size;
            r /= 100;
            if (pick < 70)
                size = 1 + r % (64 * KIB);
            else if (pick < 97)
                size = 1 + r % (256 * KIB);
            else
                size = 256 * KIB + r % (2 * MIB);
            int kind = (r >> 40) % 8 == 0 ? NU__KIND_PRIVATE : NU__KIND_SHARED;
            bool gpu = (r >> 44) % 2 == 0;
            char msg[256];
            nu_status st = nu__pool_alloc(w->pool, kind, size, gpu, &slot[k], msg, sizeof msg);
            if (st == NU_ERROR_OUT_OF_MEMORY && w->limited && strstr(msg, "memory limit") && !slot[k].block) {
                w->out_of_memory++;
                continue;
            }
            if (st != NU_OK || slot[k].size < size || slot[k].offset % 256 != 0 || (!gpu && slot[k].busy)) {
                w->errors++;
                memset(&slot[k], 0, sizeof slot[k]);
                continue;
            }
            if (slot[k].busy) {
                /* Handed out only while every use of the guard is committed: this thread's
                 * own guard must be in that phase (no other thread changes it). */
                if (slot[k].busy == &w->guard && gpu_phase != GPU_COMMITTED)
                    w->errors++;
                w->reused_busy++;
                nu__guard_release(slot[k].busy);
                slot[k].busy = NULL;
            }
            token[k] = ((uint64_t)w->id << 48) | (uint64_t)i;
            stamp(&slot[k], token[k]);
        }
        /* The guard's GPU work is recorded, committed (and submitted), and completes. */
        if (i % 32 == 0) {
            if (gpu_phase == GPU_IDLE) {
                nu__guard_acquire(&w->guard, false);
                gpu_phase = GPU_RECORDED;
            } else if (gpu_phase == GPU_RECORDED) {
                nu__guard_committed(&w->guard);
                nu__guard_submitted(&w->guard, false);
                gpu_phase = GPU_COMMITTED;
            } else {
                nu__guard_release_use(&w->guard, false, NULL);
                gpu_phase = GPU_IDLE;
            }
        }
        if (i % 5000 == 4999) {
            nu_memory_stats s;
            nu__pool_stats(w->pool, &s);
            if (s.active + s.cache > s.reserved)
                w->errors++;
            if (w->limited && s.active + s.cache > s.memory_limit)
                w->errors++;
            if (w->id == 0)
                nu__pool_clear_cache(w->pool);
            if (w->id == 1)
                nu__pool_set_cache_limit(w->pool, (i / 5000) % 2 ? 2 * MIB : 256 * MIB, NULL);
            if (w->id == 2)
                nu__pool_reset_peak(w->pool);
        }
    }
    for (int k = 0; k < SLOTS; k++) {
        if (slot[k].block) {
            if (!stamped(&slot[k], token[k]))
                w->errors++;
            nu__pool_free(w->pool, &slot[k], NULL);
        }
    }
    if (gpu_phase == GPU_RECORDED) {
        nu__guard_committed(&w->guard);
        nu__guard_submitted(&w->guard, false);
    }
    if (gpu_phase != GPU_IDLE)
        nu__guard_release_use(&w->guard, false, NULL);
    return NULL;
}

static void run_threads(uint64_t limit, bool limited)
{
    fake f;
    fake_init(&f, UINT64_MAX);
    nu__pool *p = new_pool(&f, MIB, limit);
    worker w[THREADS];
    pthread_t t[THREADS];
    const char *env = getenv("NT_ALLOCATOR_ITERATIONS");
    long iterations = env ? atol(env) : ITERATIONS;
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].pool = p;
        w[i].id = i;
        w[i].seed = 0x1234 + (uint64_t)i + (limited ? 0x100 : 0);
        w[i].iterations = iterations;
        w[i].limited = limited;
        assert_int_equal(nu__guard_init(&w[i].guard, NULL), NU_OK);
        nu__pool_count_buffer(p, 1);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    uint64_t busy = 0, oom = 0;
    long errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
        busy += w[i].reused_busy;
        oom += w[i].out_of_memory;
        nu__pool_count_buffer(p, -1);
    }
    assert_int_equal(errors, 0);
    /* How often GPU reuse and the limit happen varies with timing. */
    print_message("%s: %llu busy pieces reused, %llu requests over the limit\n", limited ? "limited" : "unlimited",
                  (unsigned long long)busy, (unsigned long long)oom);
    nu_memory_stats s = stats(p);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.buffers, 0);
    assert_true(s.peak > 0);
    assert_true(s.peak <= s.memory_limit);
    assert_true(s.cache <= s.reserved);
    assert_true(s.cache <= s.memory_limit);
    check_backend(p, &f);
    nu__pool_clear_cache(p);
    s = stats(p);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(f.live, 0);
    nu__pool_destroy(p);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(atomic_load(&w[i].guard.refs), 1);
        assert_true(nu__guard_idle(&w[i].guard));
        nu__guard_fini(&w[i].guard);
    }
    fake_fini(&f);
}

static void test_threads(void **state)
{
    (void)state;
    run_threads(1024 * MIB, false);
}

/* A limit the threads reach: requests release each other's cached pieces to make room, or
 * fail; active + cache never passes it. */
static void test_threads_limit(void **state)
{
    (void)state;
    run_threads(16 * MIB, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_size),
        cmocka_unit_test(test_huge_and_empty),
        cmocka_unit_test(test_reuse_bounds),
        cmocka_unit_test(test_reuse_smallest_then_lifo),
        cmocka_unit_test(test_suballocation),
        cmocka_unit_test(test_blocks_grow_from_first_block),
        cmocka_unit_test(test_dedicated),
        cmocka_unit_test(test_limit_oom_message),
        cmocka_unit_test(test_limit_message_idle_cache),
        cmocka_unit_test(test_limit_releases_cache_and_retries),
        cmocka_unit_test(test_limit_trims_least_recently_freed),
        cmocka_unit_test(test_reserved_exceeds_limit),
        cmocka_unit_test(test_limit_counts_requests_in_flight),
        cmocka_unit_test(test_limit_while_releasing_guards),
        cmocka_unit_test(test_dedicated_fallback),
        cmocka_unit_test(test_backend_failure),
        cmocka_unit_test(test_set_limit),
        cmocka_unit_test(test_cache_limit_zero),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_clear_cache_and_peak),
        cmocka_unit_test(test_buffers_and_tracking),
        cmocka_unit_test(test_busy_guards),
        cmocka_unit_test(test_internal_memory),
        cmocka_unit_test(test_host_failures),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_threads_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
