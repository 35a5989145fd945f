/* test_random.c: randomized test of hazard tracking against a CPU model.
 *
 * Each program (program i uses seed i) creates buffers (shared and private, nu_buffer_new and
 * nu_buffer_new_gpu), records several command buffers at once (compute and transfer queues)
 * with fills, copies, uploads, downloads and dispatches of the builtin kernels over random
 * sub-ranges (the same buffer bound twice, ranges declared larger than used, empty ranges; now
 * and then a binding short of the count, which must be refused), commits them in
 * random order, waits at random points, frees buffers that pending work still uses, and reads
 * and writes buffers from the CPU in between. A CPU model runs the same program: it applies a
 * command buffer's operations when it is committed (the program's order is the order of
 * commits), tracks which bytes are unknown (new memory, stale bytes; results of arithmetic it
 * cannot reproduce exactly), and predicts each CPU access's status (nu_buffer_read / write,
 * the pointer accessors, nu_buffer_in_use): either outcome while a committed command buffer
 * not yet waited for conflicts, allowed otherwise, also while recorded, uncommitted ones use
 * the buffer (half the CPU accesses pick such a buffer: the access is ordered before their
 * work). Every known byte of every download, CPU read and, at the end, every buffer must match
 * the model.
 *
 * The validation layer (synchronisation validation on) must stay silent. Lavapipe runs a
 * queue's work one command at a time, so there a missing barrier or semaphore wait shows only
 * through the layer (which misses hazards between dispatches); on a GPU that runs work
 * concurrently (the H200: --programs 100000) it shows as wrong bytes.
 *
 * Usage: test_random [--programs N] [--seed S] [--verbose]   (default 2000 programs from 0;
 * --verbose prints every program). On a mismatch it prints the seed and the program. */
#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options and counters -------------------------------------------------------------- */

static uint64_t opt_programs = 2000;
static uint64_t opt_seed = 0;
static bool opt_verbose = false;

enum { K_FILL, K_COPY, K_ADD, K_SUB, K_MUL, K_AXPY, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"fill_u32", "copy_u32", "add_f32",
                                                  "sub_f32",  "mul_f32",  "axpy_f32"};
static const uint32_t kernel_bindings[K_COUNT] = {1, 2, 3, 3, 3, 2};

typedef struct ctx {
    nu_device *d;
    nu_kernel *k[K_COUNT];
    size_t align; /* min_storage_buffer_offset_alignment */
    uint64_t commands, dispatches, programs, cpu_ops, refusals;
    uint64_t cpu_recorded; /* CPU accesses to buffers that recorded, uncommitted work uses */
    uint64_t refused_dispatches; /* bindings shorter than the count, refused */
    uint64_t known_bytes, unknown_bytes; /* bytes compared, and skipped as unknown */
    uint32_t validation_errors;
} ctx;

/* ---- the program and its model ---------------------------------------------------------- */

#define MAX_BUFS 128
#define MAX_LIVE 40
#define MAX_CBS 12
#define MAX_OPS 10

typedef struct mbuf {
    nu_buffer *h;
    size_t size;
    nu_storage storage;
    bool gpu;      /* from nu_buffer_new_gpu */
    bool freed;    /* freed by the program: no new use; pending work may still use it */
    uint8_t *bytes; /* model contents */
    uint8_t *known; /* 1 where the model knows the byte */
} mbuf;

enum { OP_FILL, OP_COPY, OP_UPLOAD, OP_DOWNLOAD, OP_DISPATCH };

typedef struct bind {
    int buf;
    nu_access access;
    size_t offset; /* bytes; the kernel's element 0 */
    size_t size;   /* declared size (0: to the end) */
} bind;

typedef struct op {
    int kind;
    int dst, src;
    size_t dst_off, src_off, len; /* bytes (fill, copy, upload, download) */
    uint32_t value;               /* fill value, fill_u32 value, axpy alpha's bits */
    int kern;                     /* dispatch */
    uint32_t count;               /* elements */
    uint32_t groups[3];
    int nb;
    bind b[3];
    uint8_t *data;                 /* upload: the bytes */
    uint8_t *host;                 /* download: where the bytes go */
    uint8_t *expect, *expect_known; /* download: what the model says they are */
} op;

enum { CB_OPEN, CB_COMMITTED, CB_FREED_PENDING, CB_DONE, CB_ABANDONED };

typedef struct mcb {
    nu_commands *h;
    int state;
    nu_queue queue;
    int target;
    int nops;
    op ops[MAX_OPS];
    bool checked; /* downloads compared */
} mcb;

typedef struct prog {
    ctx *x;
    uint64_t seed, rng;
    mbuf bufs[MAX_BUFS];
    int nbufs;
    mcb cbs[MAX_CBS];
    int ncbs, cb_target;
    int cur; /* the command buffer being recorded, for the log */
    int last_freed; /* the buffer freed last, or -1 */
    bool pipelining;
    int recent[6]; /* recently used buffers, to make operations touch the same memory */
    int nrecent;
    char *log;
    size_t log_len, log_cap;
    uint64_t commands, dispatches;
} prog;

static void logf_(prog *p, const char *fmt, ...) CMOCKA_PRINTF_ATTRIBUTE(2, 3);
static void logf_(prog *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (p->log_len + (size_t)n + 2 > p->log_cap) {
        size_t cap = p->log_cap ? p->log_cap * 2 : 4096;
        while (cap < p->log_len + (size_t)n + 2)
            cap *= 2;
        char *l = realloc(p->log, cap);
        if (!l)
            return;
        p->log = l;
        p->log_cap = cap;
    }
    memcpy(p->log + p->log_len, line, (size_t)n);
    p->log_len += (size_t)n;
    p->log[p->log_len++] = '\n';
    p->log[p->log_len] = 0;
}

static void dump(prog *p, const char *why)
{
    printf("random: program with seed %llu FAILED: %s\n", (unsigned long long)p->seed, why);
    printf("random: reproduce with: test_random --programs 1 --seed %llu\n", (unsigned long long)p->seed);
    printf("---- program (seed %llu) ----\n%s---- end of program ----\n", (unsigned long long)p->seed,
           p->log ? p->log : "");
    fflush(stdout);
}

/* NT_OK / NT_STATUS, printing the program first. */
#define R_OK(p, expr)                                                                          \
    do {                                                                                       \
        nu_status r_st_ = (expr);                                                              \
        if (r_st_ != NU_OK)                                                                    \
            dump((p), #expr);                                                                  \
        NT_OK(r_st_);                                                                          \
    } while (0)
#define R_STATUS(p, status, expr)                                                              \
    do {                                                                                       \
        nu_status r_st_ = (expr);                                                              \
        if (r_st_ != (status))                                                                 \
            dump((p), #expr);                                                                  \
        NT_STATUS((status), r_st_);                                                            \
    } while (0)
#define R_FAIL(p, ...)                                                                         \
    do {                                                                                       \
        char r_msg_[512];                                                                      \
        snprintf(r_msg_, sizeof r_msg_, __VA_ARGS__);                                          \
        dump((p), r_msg_);                                                                     \
        fail_msg("seed %llu: %s", (unsigned long long)(p)->seed, r_msg_);                      \
    } while (0)

/* ---- random numbers ---------------------------------------------------------------------- */

static uint64_t rnd(prog *p) { return nt_rand(&p->rng); }
static size_t rn(prog *p, size_t n) { return n ? (size_t)(rnd(p) % n) : 0; }
static size_t rrange(prog *p, size_t lo, size_t hi) { return lo + rn(p, hi - lo + 1); } /* [lo, hi] */
static bool chance(prog *p, unsigned pct) { return rn(p, 100) < pct; }

/* An integer-valued float in -8..8: exact through add, sub, mul and axpy. */
static uint32_t nice_bits(prog *p)
{
    float f = (float)((int)rn(p, 17) - 8);
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Bytes for uploads and CPU writes: mostly nice floats (word-aligned from `offset`), some noise. */
static void random_bytes(prog *p, uint8_t *dst, size_t n, size_t offset)
{
    bool noise = chance(p, 15);
    for (size_t i = 0; i < n;) {
        if (noise) {
            dst[i++] = (uint8_t)rnd(p);
            continue;
        }
        uint32_t w = nice_bits(p);
        size_t phase = (offset + i) % 4; /* keep floats aligned to the buffer's words */
        for (size_t k = phase; k < 4 && i < n; k++)
            dst[i++] = (uint8_t)(w >> (8 * k));
    }
}

/* ---- model buffers -------------------------------------------------------------------------- */

static bool word(const mbuf *b, size_t off, uint32_t *w)
{
    *w = 0;
    bool known = true;
    for (int k = 0; k < 4; k++) {
        *w |= (uint32_t)b->bytes[off + k] << (8 * k);
        known = known && b->known[off + k];
    }
    return known;
}

static void set_word(mbuf *b, size_t off, uint32_t w, bool known)
{
    for (int k = 0; k < 4; k++) {
        b->bytes[off + k] = (uint8_t)(w >> (8 * k));
        b->known[off + k] = known;
    }
}

/* Whether a float is one the arithmetic keeps exact: integer-valued, |v| <= 2^24. */
static bool nice(uint32_t bits, float *v)
{
    memcpy(v, &bits, 4);
    return isfinite(*v) && *v == truncf(*v) && fabsf(*v) <= 16777216.0f;
}

static bool exact(double r) { return fabs(r) <= 16777216.0; }

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Applies one operation to the model (at commit, in commit order). */
static void apply(prog *p, op *o)
{
    mbuf *B = p->bufs;
    switch (o->kind) {
    case OP_FILL:
        for (size_t i = 0; i < o->len; i += 4)
            set_word(&B[o->dst], o->dst_off + i, o->value, true);
        break;
    case OP_COPY:
        memmove(B[o->dst].bytes + o->dst_off, B[o->src].bytes + o->src_off, o->len);
        memmove(B[o->dst].known + o->dst_off, B[o->src].known + o->src_off, o->len);
        break;
    case OP_UPLOAD:
        memcpy(B[o->dst].bytes + o->dst_off, o->data, o->len);
        memset(B[o->dst].known + o->dst_off, 1, o->len);
        break;
    case OP_DOWNLOAD:
        memcpy(o->expect, B[o->src].bytes + o->src_off, o->len);
        memcpy(o->expect_known, B[o->src].known + o->src_off, o->len);
        break;
    case OP_DISPATCH: {
        const bind *b = o->b;
        for (uint32_t i = 0; i < o->count; i++) {
            size_t e = 4 * (size_t)i;
            uint32_t w0, w1, w2;
            float a, c, y, alpha;
            switch (o->kern) {
            case K_FILL:
                set_word(&B[b[0].buf], b[0].offset + e, o->value, true);
                break;
            case K_COPY: {
                bool k = word(&B[b[1].buf], b[1].offset + e, &w1);
                set_word(&B[b[0].buf], b[0].offset + e, w1, k);
                break;
            }
            case K_ADD:
            case K_SUB:
            case K_MUL: {
                bool k1 = word(&B[b[1].buf], b[1].offset + e, &w1);
                bool k2 = word(&B[b[2].buf], b[2].offset + e, &w2);
                bool k = k1 && k2 && nice(w1, &a) && nice(w2, &c);
                float r = 0;
                if (k) {
                    double rd = o->kern == K_ADD ? (double)a + c : o->kern == K_SUB ? (double)a - c : (double)a * c;
                    k = exact(rd);
                    r = o->kern == K_ADD ? a + c : o->kern == K_SUB ? a - c : a * c;
                }
                set_word(&B[b[0].buf], b[0].offset + e, fbits(r), k);
                break;
            }
            case K_AXPY: {
                bool k0 = word(&B[b[0].buf], b[0].offset + e, &w0);
                bool k1 = word(&B[b[1].buf], b[1].offset + e, &w1);
                memcpy(&alpha, &o->value, 4);
                bool k = k0 && k1 && nice(w0, &y) && nice(w1, &a);
                float r = 0;
                if (k) {
                    double prod = (double)alpha * a;
                    k = exact(prod) && exact(y + prod);
                    r = y + alpha * a;
                }
                set_word(&B[b[0].buf], b[0].offset + e, fbits(r), k);
                break;
            }
            }
        }
        break;
    }
    }
}

/* How a command buffer uses a buffer: bytes touched, as declared. An empty binding (bound as
 * the device's placeholder) is no use of its buffer: it touches no byte of it. */
typedef struct use {
    bool use, write;
} use;

static use cb_use(const prog *p, const mcb *c, int buf)
{
    use u = {0};
    for (int i = 0; i < c->nops; i++) {
        const op *o = &c->ops[i];
        switch (o->kind) {
        case OP_FILL:
        case OP_UPLOAD:
            if (o->dst == buf && o->len)
                u.use = u.write = true;
            break;
        case OP_COPY:
            if (o->len && o->dst == buf)
                u.use = u.write = true;
            if (o->len && o->src == buf)
                u.use = true;
            break;
        case OP_DOWNLOAD:
            if (o->src == buf && o->len)
                u.use = true;
            break;
        case OP_DISPATCH:
            for (int k = 0; k < o->nb; k++) {
                const bind *b = &o->b[k];
                size_t declared = b->size ? b->size : p->bufs[b->buf].size - b->offset;
                if (declared == 0 || b->buf != buf)
                    continue;
                u.use = true;
                if (b->access & NU_ACCESS_WRITE)
                    u.write = true;
            }
            break;
        }
    }
    return u;
}

enum { OUT_OK, OUT_EITHER };
static const char *const out_names[] = {"ok", "either"};

/* The status a CPU access must get (nuvec/buffer.h): judged by committed work only. Either
 * while a committed command buffer not waited for conflicts (reads with writers, writes with
 * any use: it may have completed meanwhile); allowed otherwise, also while recorded,
 * uncommitted command buffers use the buffer (the access is ordered before their work, which
 * the model applies at their commit). Empty bindings are no use of the buffer. */
static int predict(const prog *p, int buf, bool write)
{
    int r = OUT_OK;
    for (int i = 0; i < p->ncbs; i++) {
        const mcb *c = &p->cbs[i];
        if (c->state != CB_COMMITTED && c->state != CB_FREED_PENDING)
            continue;
        use u = cb_use(p, c, buf);
        if (write ? u.use : u.write)
            r = OUT_EITHER;
    }
    return r;
}

/* Whether a recorded, uncommitted command buffer uses the buffer (for the log and counters). */
static bool recorded_use(const prog *p, int buf)
{
    for (int i = 0; i < p->ncbs; i++)
        if (p->cbs[i].state == CB_OPEN && cb_use(p, &p->cbs[i], buf).use)
            return true;
    return false;
}

/* Compares bytes against the model where it knows them. */
static void compare(prog *p, const char *what, const uint8_t *got, const uint8_t *want, const uint8_t *known,
                    size_t n, size_t base)
{
    size_t bad = 0, first = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        k += known[i] != 0;
    p->x->known_bytes += k;
    p->x->unknown_bytes += n - k;
    for (size_t i = 0; i < n; i++) {
        if (known[i] && got[i] != want[i]) {
            if (!bad)
                first = i;
            bad++;
        }
    }
    if (!bad)
        return;
    char detail[256];
    size_t w = first & ~(size_t)3;
    int m = snprintf(detail, sizeof detail, "bytes at %zu..:", base + w);
    for (size_t i = w; i < w + 8 && i < n; i++) {
        if (known[i])
            m += snprintf(detail + m, sizeof detail - (size_t)m, " %02x/%02x", got[i], want[i]);
        else
            m += snprintf(detail + m, sizeof detail - (size_t)m, " %02x/??", got[i]);
    }
    R_FAIL(p, "%s: %zu of %zu bytes differ from the model, the first at byte %zu (got/want %s)", what, bad, n,
           base + first, detail);
}

/* ---- choosing operands -------------------------------------------------------------------- */

static int live_count(const prog *p)
{
    int n = 0;
    for (int i = 0; i < p->nbufs; i++)
        n += !p->bufs[i].freed;
    return n;
}

static void touch(prog *p, int buf)
{
    for (int i = 0; i < p->nrecent; i++)
        if (p->recent[i] == buf)
            return;
    if (p->nrecent < 6)
        p->recent[p->nrecent++] = buf;
    else
        p->recent[rn(p, 6)] = buf;
}

/* A live buffer of at least `min` bytes, often a recently used one; -1 if none. */
static int pick_buffer(prog *p, size_t min)
{
    if (p->nrecent && chance(p, 50)) {
        int b = p->recent[rn(p, (size_t)p->nrecent)];
        if (!p->bufs[b].freed && p->bufs[b].size >= min)
            return b;
    }
    int cand[MAX_BUFS], n = 0;
    for (int i = 0; i < p->nbufs; i++)
        if (!p->bufs[i].freed && p->bufs[i].size >= min)
            cand[n++] = i;
    return n ? cand[rn(p, (size_t)n)] : -1;
}

static const char *storage_name(nu_storage s) { return s == NU_STORAGE_SHARED ? "shared" : "private"; }

/* A buffer size: 4 B .. 64 KiB in multiples of 4, mostly small. */
static size_t random_size(prog *p)
{
    unsigned r = (unsigned)rn(p, 100);
    if (r < 10)
        return 4 * rrange(p, 1, 4);
    if (r < 60)
        return 4 * rrange(p, 1, 256);
    if (r < 90)
        return 4 * rrange(p, 1, 4096);
    return 4 * rrange(p, 1, 16384);
}

static void cpu_init(prog *p, int bi);
static void free_buffer(prog *p, int bi);

static int new_buffer(prog *p, int like, bool may_init)
{
    if (p->nbufs >= MAX_BUFS)
        return -1;
    int i = p->nbufs++;
    mbuf *b = &p->bufs[i];
    memset(b, 0, sizeof *b);
    b->size = random_size(p);
    b->storage = chance(p, 50) ? NU_STORAGE_SHARED : NU_STORAGE_PRIVATE;
    b->gpu = chance(p, 35);
    if (like < 0 && p->last_freed >= 0 && chance(p, 50))
        like = p->last_freed;
    if (like >= 0) {
        /* The size of a buffer freed earlier: its memory (which committed work may still
         * use) is what the cache hands out. */
        b->size = p->bufs[like].size;
        b->storage = p->bufs[like].storage;
        b->gpu = chance(p, 70);
    }
    b->bytes = malloc(b->size);
    b->known = calloc(b->size, 1);
    assert_non_null(b->bytes);
    assert_non_null(b->known);
    if (b->gpu) {
        R_OK(p, nu_buffer_new_gpu(p->x->d, b->size, b->storage, &b->h));
        logf_(p, "b%d = new_gpu(%s, %zu)", i, storage_name(b->storage), b->size);
    } else if (chance(p, 25)) {
        /* From bytes: known at once. */
        random_bytes(p, b->bytes, b->size, 0);
        memset(b->known, 1, b->size);
        R_OK(p, nu_buffer_from(p->x->d, b->bytes, b->size, b->storage, &b->h));
        logf_(p, "b%d = from(%s, %zu)", i, storage_name(b->storage), b->size);
        return i;
    } else {
        R_OK(p, nu_buffer_new(p->x->d, b->size, b->storage, &b->h));
        logf_(p, "b%d = new(%s, %zu)", i, storage_name(b->storage), b->size);
    }
    /* New memory holds unspecified bytes: most buffers get known contents at once. */
    if (chance(p, 75) && may_init)
        cpu_init(p, i);
    return i;
}

/* ---- CPU accesses --------------------------------------------------------------------------- */

static void wait_cb(prog *p, int ci);

/* Waits for the committed command buffers that make a CPU access's outcome uncertain. */
static void wait_blockers(prog *p, int buf, bool write)
{
    for (int i = 0; i < p->ncbs; i++) {
        mcb *c = &p->cbs[i];
        if (c->state != CB_COMMITTED)
            continue;
        use u = cb_use(p, c, buf);
        if (write ? u.use : u.write)
            wait_cb(p, i);
    }
}

/* Writes a whole new buffer from the CPU (no GPU work knows it yet, so it must succeed). */
static void cpu_init(prog *p, int bi)
{
    mbuf *b = &p->bufs[bi];
    uint8_t *data = malloc(b->size);
    assert_non_null(data);
    random_bytes(p, data, b->size, 0);
    if (b->storage == NU_STORAGE_SHARED && chance(p, 50)) {
        void *ptr;
        R_OK(p, nu_buffer_contents_mut(b->h, &ptr));
        memcpy(ptr, data, b->size);
        logf_(p, "cpu init b%d via contents_mut", bi);
    } else {
        R_OK(p, nu_buffer_write(b->h, 0, data, b->size));
        logf_(p, "cpu init b%d via write", bi);
    }
    memcpy(b->bytes, data, b->size);
    memset(b->known, 1, b->size);
    free(data);
}

/* A live buffer that a recorded, uncommitted command buffer uses; -1 if none. */
static int pick_recorded(prog *p)
{
    int cand[MAX_BUFS], n = 0;
    for (int i = 0; i < p->nbufs; i++)
        if (!p->bufs[i].freed && recorded_use(p, i))
            cand[n++] = i;
    return n ? cand[rn(p, (size_t)n)] : -1;
}

static void cpu_op(prog *p)
{
    /* Often a buffer that recorded work uses: CPU access between recording and commit. */
    int bi = chance(p, 50) ? pick_recorded(p) : -1;
    if (bi < 0)
        bi = pick_buffer(p, 0);
    if (bi < 0)
        return;
    mbuf *b = &p->bufs[bi];
    unsigned kind = (unsigned)rn(p, 100);
    bool shared = b->storage == NU_STORAGE_SHARED;
    bool write = kind >= 55 && kind < 90;
    if (recorded_use(p, bi))
        p->x->cpu_recorded++;
    if (kind >= 90) {
        /* nu_buffer_in_use: false unless committed work not waited for uses it (recorded,
         * uncommitted work does not count). */
        int out = predict(p, bi, true);
        bool in_use = nu_buffer_in_use(b->h);
        logf_(p, "cpu in_use(b%d) -> %d (model: %s%s)", bi, in_use, out_names[out],
              recorded_use(p, bi) ? ", recorded use" : "");
        if (out == OUT_OK && in_use)
            R_FAIL(p, "nu_buffer_in_use(b%d) is true, but no committed work uses it", bi);
        if (!shared && chance(p, 50)) {
            const void *ptr = (const void *)1;
            R_STATUS(p, NU_ERROR_INVALID_ARGUMENT, nu_buffer_contents(b->h, &ptr));
            assert_null(ptr);
        }
        return;
    }
    int out = predict(p, bi, write);
    if (out == OUT_EITHER && chance(p, 50)) {
        wait_blockers(p, bi, write);
        out = predict(p, bi, write);
    }
    size_t off = rn(p, b->size), len = rrange(p, 0, b->size - off);
    if (chance(p, 30)) {
        off = 0;
        len = b->size;
    }
    bool via_ptr = shared && chance(p, 40);
    p->x->cpu_ops++;
    nu_status st;
    if (!write) {
        uint8_t *got = malloc(b->size + 1);
        assert_non_null(got);
        if (via_ptr) {
            const void *ptr = NULL;
            st = nu_buffer_contents(b->h, &ptr);
            if (st == NU_OK)
                memcpy(got, (const uint8_t *)ptr + off, len);
            else if (ptr)
                R_FAIL(p, "nu_buffer_contents failed but left a pointer");
        } else {
            st = nu_buffer_read(b->h, off, got, len);
        }
        logf_(p, "cpu %s b%d[%zu..+%zu] -> %s (model: %s%s)", via_ptr ? "contents" : "read", bi, off, len,
              nu_status_string(st), out_names[out], recorded_use(p, bi) ? ", recorded use" : "");
        if (st == NU_OK)
            compare(p, "CPU read", got, b->bytes + off, b->known + off, len, off);
        free(got);
    } else {
        uint8_t *data = malloc(len + 1);
        assert_non_null(data);
        random_bytes(p, data, len, off);
        if (via_ptr) {
            void *ptr = NULL;
            st = nu_buffer_contents_mut(b->h, &ptr);
            if (st == NU_OK)
                memcpy((uint8_t *)ptr + off, data, len);
            else if (ptr)
                R_FAIL(p, "nu_buffer_contents_mut failed but left a pointer");
        } else {
            st = nu_buffer_write(b->h, off, data, len);
        }
        logf_(p, "cpu %s b%d[%zu..+%zu] -> %s (model: %s%s)", via_ptr ? "contents_mut" : "write", bi, off, len,
              nu_status_string(st), out_names[out], recorded_use(p, bi) ? ", recorded use" : "");
        if (st == NU_OK) {
            memcpy(b->bytes + off, data, len);
            memset(b->known + off, 1, len);
        }
        free(data);
    }
    if (st != NU_OK && st != NU_ERROR_BUFFER_IN_USE)
        R_FAIL(p, "CPU access to b%d: %s: %s", bi, nu_status_string(st), nu_error_message(NULL));
    if (st == NU_ERROR_BUFFER_IN_USE)
        p->x->refusals++;
    if (out == OUT_OK && st != NU_OK)
        R_FAIL(p, "CPU %s of b%d refused (%s), but no committed work %s it", write ? "write" : "read", bi,
               nu_error_message(NULL), write ? "uses" : "writes");
}

/* ---- recording ---------------------------------------------------------------------------- */

/* A byte range of `b`: offset a multiple of `gran`, length a multiple of `lgran`, at least
 * `min` bytes (min <= size assumed). */
static void pick_range(prog *p, size_t size, size_t gran, size_t lgran, size_t min, size_t *off, size_t *len)
{
    size_t max_off = (size - min) / gran * gran;
    *off = rn(p, max_off / gran + 1) * gran;
    size_t room = size - *off;
    size_t hi = room / lgran;
    size_t lo = (min + lgran - 1) / lgran;
    if (chance(p, 50) && hi > lo + 64)
        hi = lo + 64; /* short ranges, dense overlaps */
    *len = rrange(p, lo, hi) * lgran;
}

static bool overlap(size_t a, size_t an, size_t b, size_t bn) { return a < b + bn && b < a + an; }

static void record_fill(prog *p, mcb *c, op *o)
{
    int bi = pick_buffer(p, 4);
    size_t gran = chance(p, 50) ? p->x->align : 4;
    if (gran > p->bufs[bi].size)
        gran = 4;
    o->kind = OP_FILL;
    o->dst = bi;
    pick_range(p, p->bufs[bi].size, gran, 4, chance(p, 3) ? 0 : 4, &o->dst_off, &o->len);
    o->value = chance(p, 70) ? nice_bits(p) : (uint32_t)rnd(p);
    logf_(p, "c%d: fill b%d[%zu..+%zu] = 0x%08x", p->cur, bi, o->dst_off, o->len, o->value);
    R_OK(p, nu_commands_fill(c->h, p->bufs[bi].h, o->dst_off, o->len, o->value));
}

static void record_copy(prog *p, mcb *c, op *o)
{
    size_t gran = chance(p, 25) ? 1 : chance(p, 50) ? 4 : p->x->align;
    size_t lgran = gran == 1 ? 1 : chance(p, 80) ? 4 : 1;
    int src = pick_buffer(p, 1), dst = chance(p, 15) ? src : pick_buffer(p, 1);
    size_t ss = p->bufs[src].size, ds = p->bufs[dst].size;
    if (gran > ss || gran > ds)
        gran = 1;
    size_t maxlen = ss < ds ? ss : ds;
    if (src == dst)
        maxlen /= 2;
    size_t len = rrange(p, 0, maxlen / lgran) * lgran, so = 0, dof = 0;
    if (len > 256 && chance(p, 50))
        len = rrange(p, 0, 256 / lgran) * lgran;
    for (int tries = 0; tries < 20; tries++) {
        so = rn(p, (ss - len) / gran + 1) * gran;
        dof = rn(p, (ds - len) / gran + 1) * gran;
        if (src != dst || !overlap(so, len, dof, len))
            break;
    }
    if (src == dst && overlap(so, len, dof, len))
        len = so = dof = 0; /* no room: an empty copy */
    if (src == dst && ss >= 16 && chance(p, 5)) {
        /* Overlapping ranges of one buffer are refused, and record nothing. */
        size_t l = ss / 2;
        R_STATUS(p, NU_ERROR_INVALID_ARGUMENT, nu_commands_copy(c->h, p->bufs[src].h, 4, p->bufs[src].h, 0, l));
        logf_(p, "c%d: copy b%d[4..+%zu] <- b%d[0..]: refused (overlap)", p->cur, src, l, src);
    }
    o->kind = OP_COPY;
    o->src = src;
    o->dst = dst;
    o->src_off = so;
    o->dst_off = dof;
    o->len = len;
    logf_(p, "c%d: copy b%d[%zu..+%zu] <- b%d[%zu..]", p->cur, dst, dof, len, src, so);
    R_OK(p, nu_commands_copy(c->h, p->bufs[dst].h, dof, p->bufs[src].h, so, len));
}

static void record_upload(prog *p, mcb *c, op *o)
{
    int bi = pick_buffer(p, 1);
    o->kind = OP_UPLOAD;
    o->dst = bi;
    pick_range(p, p->bufs[bi].size, chance(p, 70) ? 4 : 1, chance(p, 70) ? 4 : 1, 0, &o->dst_off, &o->len);
    o->data = malloc(o->len + 1);
    assert_non_null(o->data);
    random_bytes(p, o->data, o->len, o->dst_off);
    /* The bytes are taken at once: scribble over a copy given to the call afterwards. */
    uint8_t *tmp = malloc(o->len + 1);
    assert_non_null(tmp);
    memcpy(tmp, o->data, o->len);
    logf_(p, "c%d: upload b%d[%zu..+%zu]", p->cur, bi, o->dst_off, o->len);
    R_OK(p, nu_commands_upload(c->h, p->bufs[bi].h, o->dst_off, tmp, o->len));
    memset(tmp, 0xEE, o->len);
    free(tmp);
}

static void record_download(prog *p, mcb *c, op *o)
{
    int bi = pick_buffer(p, 1);
    o->kind = OP_DOWNLOAD;
    o->src = bi;
    pick_range(p, p->bufs[bi].size, chance(p, 70) ? 4 : 1, chance(p, 70) ? 4 : 1, 0, &o->src_off, &o->len);
    o->host = malloc(o->len + 1);
    o->expect = malloc(o->len + 1);
    o->expect_known = calloc(o->len + 1, 1);
    assert_true(o->host && o->expect && o->expect_known);
    memset(o->host, 0xA5, o->len + 1); /* untouched unless the work completes */
    logf_(p, "c%d: download b%d[%zu..+%zu]", p->cur, bi, o->src_off, o->len);
    R_OK(p, nu_commands_download(c->h, p->bufs[bi].h, o->src_off, o->host, o->len));
}

static const char *access_name(nu_access a) { return a == NU_ACCESS_READ ? "R" : a == NU_ACCESS_WRITE ? "W" : "RW"; }

/* A binding of `count` elements at an aligned offset of a live buffer; reads (write false)
 * stay off the write range `w` unless they are exactly it (in place). */
static bool pick_binding(prog *p, uint32_t count, bool write, const bind *w, bind *out)
{
    size_t need = 4 * (size_t)count, A = p->x->align;
    for (int tries = 0; tries < 12; tries++) {
        int bi = pick_buffer(p, need);
        if (bi < 0)
            return false;
        size_t size = p->bufs[bi].size;
        size_t off = rn(p, (size - need) / A + 1) * A;
        if (w && bi == w->buf && overlap(off, need, w->offset, need) && off != w->offset) {
            if (!chance(p, 30))
                continue;
            off = w->offset; /* in place */
        }
        out->buf = bi;
        out->offset = off;
        unsigned r = (unsigned)rn(p, 100);
        out->size = r < 60 ? need : r < 80 ? 0 : rrange(p, need / 4, (size - off) / 4) * 4;
        if (write)
            out->access = chance(p, 75) ? NU_ACCESS_WRITE : NU_ACCESS_READ_WRITE;
        else
            out->access = chance(p, 90) ? NU_ACCESS_READ : NU_ACCESS_READ_WRITE;
        return true;
    }
    if (!w)
        return false;
    *out = *w; /* in place */
    out->access = write ? w->access : NU_ACCESS_READ;
    return true;
}

static void record_dispatch(prog *p, mcb *c, op *o)
{
    static const unsigned weights[K_COUNT] = {10, 15, 20, 15, 15, 25};
    unsigned r = (unsigned)rn(p, 100), acc = 0;
    int k = 0;
    for (k = 0; k < K_COUNT - 1; k++) {
        acc += weights[k];
        if (r < acc)
            break;
    }
    o->kind = OP_DISPATCH;
    o->kern = k;
    o->nb = (int)kernel_bindings[k];
    uint32_t push[2] = {0, 0};
    uint32_t push_size = k == K_FILL || k == K_AXPY ? 8 : 4;
    if (chance(p, 3)) {
        /* Nothing to do: empty ranges (bound as the device's placeholder), no elements. */
        o->count = 0;
        for (int i = 0; i < o->nb; i++) {
            int bi = pick_buffer(p, 0);
            o->b[i] = (bind){bi, i == 0 ? NU_ACCESS_WRITE : NU_ACCESS_READ, p->bufs[bi].size, 0};
        }
        if (k == K_AXPY)
            o->b[0].access = NU_ACCESS_READ_WRITE;
        o->groups[0] = (uint32_t)rn(p, 2);
    } else {
        /* The destination first, then the inputs, all `count` elements long. */
        int dst = pick_buffer(p, 4);
        size_t room = p->bufs[dst].size;
        uint32_t maxc = (uint32_t)(room / 4);
        uint32_t count = (uint32_t)(chance(p, 50) ? rrange(p, 1, maxc < 64 ? maxc : 64) : rrange(p, 1, maxc));
        for (;;) {
            bool ok = pick_binding(p, count, true, NULL, &o->b[0]);
            for (int i = 1; ok && i < o->nb; i++)
                ok = pick_binding(p, count, false, &o->b[0], &o->b[i]);
            if (ok)
                break;
            count = count > 1 ? count / 2 : 1;
        }
        if (k == K_AXPY)
            o->b[0].access = NU_ACCESS_READ_WRITE;
        o->count = count;
        R_OK(p, nu_groups_for(count, k == K_COPY ? 1024 : 256, o->groups));
        if (chance(p, 10))
            o->groups[0] += (uint32_t)rrange(p, 1, 2); /* extra workgroups do nothing */
    }
    o->groups[1] = o->groups[1] ? o->groups[1] : 1;
    o->groups[2] = 1;
    if (k == K_FILL) {
        o->value = chance(p, 70) ? nice_bits(p) : (uint32_t)rnd(p);
        push[0] = o->value;
        push[1] = o->count;
    } else if (k == K_AXPY) {
        float alpha = (float)((int)rn(p, 9) - 4);
        memcpy(&o->value, &alpha, 4);
        push[0] = o->value;
        push[1] = o->count;
    } else {
        push[0] = o->count;
    }
    nu_binding nb[3];
    char desc[256];
    int m = snprintf(desc, sizeof desc, "c%d: %s n=%u groups=%u", p->cur, kernel_names[k], o->count, o->groups[0]);
    if (k == K_FILL || k == K_AXPY)
        m += snprintf(desc + m, sizeof desc - (size_t)m, " %s=0x%08x", k == K_FILL ? "value" : "alpha", o->value);
    for (int i = 0; i < o->nb; i++) {
        bind *b = &o->b[i];
        nb[i] = (nu_binding){p->bufs[b->buf].h, b->access, b->offset, b->size};
        m += snprintf(desc + m, sizeof desc - (size_t)m, " b%d@%zu(+%zu%s,%s)", b->buf, b->offset, b->size,
                      b->size ? "" : "=end", access_name(b->access));
        touch(p, b->buf);
    }
    if (o->count && chance(p, 4)) {
        /* A binding that holds fewer elements than the count (one short, or an empty range at
         * the buffer's end): refused, nothing recorded. */
        nu_binding bad[3];
        memcpy(bad, nb, sizeof bad);
        int i = (int)rn(p, (size_t)o->nb);
        if (o->count > 1) {
            bad[i].size = 4 * ((size_t)o->count - 1);
        } else {
            bad[i].offset = p->bufs[o->b[i].buf].size;
            bad[i].size = 0;
        }
        logf_(p, "c%d: %s with binding %d of %zu bytes for %u elements: refused", p->cur, kernel_names[k], i,
              bad[i].size, o->count);
        R_STATUS(p, NU_ERROR_OUT_OF_RANGE,
                 nu_commands_dispatch(c->h, p->x->k[k], o->groups, bad, (uint32_t)o->nb, push, push_size));
        p->x->refused_dispatches++;
    }
    logf_(p, "%s", desc);
    R_OK(p, nu_commands_dispatch(c->h, p->x->k[k], o->groups, nb, (uint32_t)o->nb, push, push_size));
}

static void record_op(prog *p, int ci)
{
    mcb *c = &p->cbs[ci];
    op *o = &c->ops[c->nops];
    memset(o, 0, sizeof *o);
    unsigned r = (unsigned)rn(p, 100);
    p->cur = ci;
    if (c->queue == NU_QUEUE_COMPUTE && r < 45)
        record_dispatch(p, c, o);
    else if (r < 60)
        record_fill(p, c, o);
    else if (r < 80)
        record_copy(p, c, o);
    else if (r < 90)
        record_upload(p, c, o);
    else
        record_download(p, c, o);
    if (o->kind != OP_DISPATCH) {
        touch(p, o->kind == OP_DOWNLOAD ? o->src : o->dst);
        if (o->kind == OP_COPY)
            touch(p, o->src);
    }
    c->nops++;
}

/* ---- command buffers ---------------------------------------------------------------------- */

static void free_op(op *o)
{
    free(o->data);
    free(o->host);
    free(o->expect);
    free(o->expect_known);
    memset(o, 0, sizeof *o);
}

/* Compares the downloads of a command buffer that completed. */
static void check_downloads(prog *p, int ci)
{
    mcb *c = &p->cbs[ci];
    if (c->checked)
        return;
    c->checked = true;
    for (int i = 0; i < c->nops; i++) {
        op *o = &c->ops[i];
        if (o->kind != OP_DOWNLOAD)
            continue;
        char what[64];
        snprintf(what, sizeof what, "c%d's download %d of b%d", ci, i, o->src);
        if (c->state == CB_ABANDONED) {
            for (size_t k = 0; k <= o->len; k++)
                if (o->host[k] != 0xA5)
                    R_FAIL(p, "%s: an abandoned command buffer wrote its download", what);
        } else {
            compare(p, what, o->host, o->expect, o->expect_known, o->len, o->src_off);
            if (o->host[o->len] != 0xA5)
                R_FAIL(p, "%s: a byte past the end was written", what);
        }
    }
}

static void new_cb(prog *p)
{
    int ci = p->ncbs++;
    mcb *c = &p->cbs[ci];
    memset(c, 0, sizeof *c);
    c->queue = chance(p, 25) ? NU_QUEUE_TRANSFER : NU_QUEUE_COMPUTE;
    c->target = (int)rrange(p, 2, 8);
    c->state = CB_OPEN;
    R_OK(p, nu_commands_new(p->x->d, c->queue, &c->h));
    logf_(p, "c%d = commands(%s), %d ops", ci, c->queue == NU_QUEUE_COMPUTE ? "compute" : "transfer", c->target);
}

static void commit_cb(prog *p, int ci);

/* A small command buffer that fills a new buffer, and may copy it on, committed at once. */
static void pipelined_step(prog *p, int nb)
{
    new_cb(p);
    int ci = p->ncbs - 1;
    mcb *c = &p->cbs[ci];
    p->cur = ci;
    op *o = &c->ops[c->nops++];
    memset(o, 0, sizeof *o);
    o->kind = OP_FILL;
    o->dst = nb;
    o->len = p->bufs[nb].size;
    o->value = nice_bits(p);
    logf_(p, "c%d: fill b%d[0..+%zu] = 0x%08x", ci, nb, o->len, o->value);
    R_OK(p, nu_commands_fill(c->h, p->bufs[nb].h, 0, o->len, o->value));
    int to = pick_buffer(p, 4);
    if (to >= 0 && to != nb && chance(p, 60)) {
        o = &c->ops[c->nops++];
        memset(o, 0, sizeof *o);
        o->kind = OP_COPY;
        o->src = nb;
        o->dst = to;
        o->len = p->bufs[nb].size < p->bufs[to].size ? p->bufs[nb].size : p->bufs[to].size;
        logf_(p, "c%d: copy b%d[0..+%zu] <- b%d[0..]", ci, to, o->len, nb);
        R_OK(p, nu_commands_copy(c->h, p->bufs[to].h, 0, p->bufs[nb].h, 0, o->len));
    }
    p->pipelining = true;
    commit_cb(p, ci);
    p->pipelining = false;
}

static void commit_cb(prog *p, int ci)
{
    mcb *c = &p->cbs[ci];
    logf_(p, "commit c%d", ci);
    R_OK(p, nu_commands_commit(c->h));
    c->state = CB_COMMITTED;
    for (int i = 0; i < c->nops; i++)
        apply(p, &c->ops[i]);
    p->commands++;
    for (int i = 0; i < c->nops; i++)
        p->dispatches += c->ops[i].kind == OP_DISPATCH;
    if (chance(p, 3)) /* a second commit is refused */
        R_STATUS(p, NU_ERROR_INVALID_ARGUMENT, nu_commands_commit(c->h));
    if (!p->pipelining && chance(p, 30) && live_count(p) > 8) {
        /* A pipelined step: free a buffer the work uses, take a new one of its size
         * (nu_buffer_new_gpu may hand out the same memory, still in use), and often write
         * and read it at once in a small command buffer: ordered after the work just
         * committed only through the memory's previous owner. */
        int cand[MAX_BUFS], n = 0;
        for (int i = 0; i < p->nbufs; i++)
            if (!p->bufs[i].freed && cb_use(p, c, i).use)
                cand[n++] = i;
        if (n) {
            int bi = cand[rn(p, (size_t)n)];
            free_buffer(p, bi);
            int nb = chance(p, 70) ? new_buffer(p, bi, false) : -1;
            if (nb >= 0 && p->ncbs < MAX_CBS && chance(p, 60))
                pipelined_step(p, nb);
        }
    }
}

static void wait_cb(prog *p, int ci)
{
    mcb *c = &p->cbs[ci];
    logf_(p, "wait c%d", ci);
    R_OK(p, nu_commands_wait(c->h, NU_WAIT_FOREVER));
    c->state = CB_DONE;
    check_downloads(p, ci);
    if (chance(p, 10))
        R_OK(p, nu_commands_wait(c->h, 0)); /* waiting again returns at once */
    nu_commands_free(c->h);
    c->h = NULL;
}

/* Polls (timeout 0), then waits: the program goes on the same way whatever the poll says. */
static void poll_cb(prog *p, int ci)
{
    mcb *c = &p->cbs[ci];
    nu_status st = nu_commands_wait(c->h, 0);
    logf_(p, "poll c%d -> %s", ci, nu_status_string(st));
    if (st != NU_ERROR_TIMEOUT)
        R_OK(p, st);
    wait_cb(p, ci);
}

static void wait_idle(prog *p)
{
    logf_(p, "wait_idle");
    R_OK(p, nu_device_wait_idle(p->x->d, NU_WAIT_FOREVER));
    for (int i = 0; i < p->ncbs; i++) {
        mcb *c = &p->cbs[i];
        if (c->state == CB_COMMITTED || c->state == CB_FREED_PENDING) {
            bool handle = c->state == CB_COMMITTED;
            c->state = CB_DONE;
            check_downloads(p, i);
            if (handle) {
                R_OK(p, nu_commands_wait(c->h, 0)); /* completed: no waiting */
                nu_commands_free(c->h);
                c->h = NULL;
            }
        }
    }
}

static int random_cb_in(prog *p, int state, bool unfull)
{
    int cand[MAX_CBS], n = 0;
    for (int i = 0; i < p->ncbs; i++)
        if (p->cbs[i].state == state && (!unfull || p->cbs[i].nops < p->cbs[i].target))
            cand[n++] = i;
    return n ? cand[rn(p, (size_t)n)] : -1;
}

static void free_buffer(prog *p, int bi)
{
    if (bi < 0)
        return;
    mbuf *b = &p->bufs[bi];
    R_OK(p, nu_buffer_free(b->h));
    logf_(p, "free b%d", bi);
    b->h = NULL;
    b->freed = true;
    p->last_freed = bi;
    for (int i = 0; i < p->nrecent; i++)
        if (p->recent[i] == bi)
            p->recent[i--] = p->recent[--p->nrecent];
}

/* ---- a program ------------------------------------------------------------------------------ */

/* The validation layer must stay silent (its messages are on stderr). */
static void check_validation(prog *p, const char *when)
{
    uint32_t errors = nu_device_validation_errors(p->x->d);
    if (errors != p->x->validation_errors) {
        p->x->validation_errors = errors;
        R_FAIL(p, "the validation layer reported an error %s (see 'nuvec: validation error' on stderr)", when);
    }
}

static void compare_buffer(prog *p, int bi, const uint8_t *got, const char *how)
{
    char what[64];
    snprintf(what, sizeof what, "final %s of b%d", how, bi);
    compare(p, what, got, p->bufs[bi].bytes, p->bufs[bi].known, p->bufs[bi].size, 0);
}

static void finish(prog *p)
{
    /* Commit or abandon what is still open, then wait for everything. */
    for (int i = 0; i < p->ncbs; i++) {
        mcb *c = &p->cbs[i];
        if (c->state != CB_OPEN)
            continue;
        if (chance(p, 85)) {
            commit_cb(p, i);
        } else {
            nu_commands_free(c->h);
            c->h = NULL;
            c->state = CB_ABANDONED;
            logf_(p, "abandon c%d", i);
            check_downloads(p, i);
        }
    }
    bool pending_freed = false;
    for (int i = 0; i < p->ncbs; i++)
        pending_freed = pending_freed || p->cbs[i].state == CB_FREED_PENDING;
    if (pending_freed || chance(p, 20))
        wait_idle(p);
    for (int i = 0; i < p->ncbs; i++)
        if (p->cbs[i].state == CB_COMMITTED)
            wait_cb(p, i);

    /* Every byte of every buffer: shared ones through their pointer or a read, private ones
     * through reads or one command buffer of downloads. */
    bool batch = chance(p, 50);
    nu_commands *dl = NULL;
    uint8_t *host[MAX_BUFS] = {0};
    for (int i = 0; i < p->nbufs; i++) {
        mbuf *b = &p->bufs[i];
        if (b->freed)
            continue;
        if (nu_buffer_in_use(b->h))
            R_FAIL(p, "b%d is in use after every command buffer completed", i);
        host[i] = malloc(b->size);
        assert_non_null(host[i]);
        if (b->storage == NU_STORAGE_SHARED && chance(p, 60)) {
            const void *ptr;
            R_OK(p, nu_buffer_contents(b->h, &ptr));
            compare_buffer(p, i, ptr, "contents");
        } else if (batch && b->storage == NU_STORAGE_PRIVATE) {
            if (!dl)
                R_OK(p, nu_commands_new(p->x->d, chance(p, 50) ? NU_QUEUE_COMPUTE : NU_QUEUE_TRANSFER, &dl));
            R_OK(p, nu_commands_download(dl, b->h, 0, host[i], b->size));
            continue;
        } else {
            R_OK(p, nu_buffer_read(b->h, 0, host[i], b->size));
            compare_buffer(p, i, host[i], "read");
        }
        free(host[i]);
        host[i] = NULL;
    }
    if (dl) {
        R_OK(p, nu_commands_commit(dl));
        R_OK(p, nu_commands_wait(dl, NU_WAIT_FOREVER));
        nu_commands_free(dl);
        p->commands++;
    }
    for (int i = 0; i < p->nbufs; i++) {
        if (host[i]) {
            compare_buffer(p, i, host[i], "download");
            free(host[i]);
        }
    }
}

static void run_program(ctx *x, uint64_t seed)
{
    prog *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->x = x;
    p->seed = seed;
    p->rng = seed * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull;
    p->last_freed = -1;
    p->cb_target = (int)rrange(p, 3, 6);
    logf_(p, "program %llu: %d command buffers", (unsigned long long)seed, p->cb_target);

    int initial = (int)rrange(p, 8, 24);
    for (int i = 0; i < initial; i++)
        new_buffer(p, -1, true);

    for (int step = 0; step < 400; step++) {
        int n_open = 0, full_open = 0, committed = 0;
        for (int i = 0; i < p->ncbs; i++) {
            n_open += p->cbs[i].state == CB_OPEN;
            full_open += p->cbs[i].state == CB_OPEN && p->cbs[i].nops >= p->cbs[i].target;
            committed += p->cbs[i].state == CB_COMMITTED;
        }
        bool can_new = p->ncbs < p->cb_target && n_open < 3;
        if (!n_open && !can_new)
            break;
        int live = live_count(p);
        unsigned w[11] = {
            n_open > full_open ? 50 : 0,       /* record */
            can_new ? (n_open ? 8 : 100) : 0,  /* new command buffer */
            n_open ? (full_open ? 25 : 4) : 0, /* commit */
            committed ? 6 : 0,                 /* wait */
            committed ? 2 : 0,                 /* poll */
            10,                                /* CPU access */
            live > 8 ? 3 : 0,                  /* free a buffer */
            live < MAX_LIVE && p->nbufs < MAX_BUFS ? 3 : 0, /* new buffer */
            n_open ? 1 : 0,                    /* abandon */
            committed ? 1 : 0,                 /* free without waiting */
            committed ? 1 : 0,                 /* wait for the device */
        };
        unsigned total = 0;
        for (int i = 0; i < 11; i++)
            total += w[i];
        unsigned r = (unsigned)rn(p, total), a = 0;
        int action = 0;
        for (action = 0; action < 10; action++) {
            a += w[action];
            if (r < a)
                break;
        }
        switch (action) {
        case 0:
            record_op(p, random_cb_in(p, CB_OPEN, true));
            break;
        case 1:
            new_cb(p);
            break;
        case 2: {
            int ci = full_open && chance(p, 80) ? -1 : random_cb_in(p, CB_OPEN, false);
            if (ci < 0) {
                for (int i = 0; i < p->ncbs && ci < 0; i++)
                    if (p->cbs[i].state == CB_OPEN && p->cbs[i].nops >= p->cbs[i].target)
                        ci = i;
            }
            commit_cb(p, ci);
            break;
        }
        case 3:
            wait_cb(p, random_cb_in(p, CB_COMMITTED, false));
            break;
        case 4:
            poll_cb(p, random_cb_in(p, CB_COMMITTED, false));
            break;
        case 5:
            cpu_op(p);
            break;
        case 6:
            free_buffer(p, pick_buffer(p, 0));
            break;
        case 7:
            new_buffer(p, -1, true);
            break;
        case 8: {
            int ci = random_cb_in(p, CB_OPEN, false);
            nu_commands_free(p->cbs[ci].h);
            p->cbs[ci].h = NULL;
            p->cbs[ci].state = CB_ABANDONED;
            logf_(p, "abandon c%d", ci);
            check_downloads(p, ci);
            break;
        }
        case 9: {
            int ci = random_cb_in(p, CB_COMMITTED, false);
            nu_commands_free(p->cbs[ci].h);
            p->cbs[ci].h = NULL;
            p->cbs[ci].state = CB_FREED_PENDING;
            logf_(p, "free c%d (not waited)", ci);
            break;
        }
        default:
            wait_idle(p);
            break;
        }
        check_validation(p, "after the last step");
    }
    finish(p);
    check_validation(p, "at the end");
    if (opt_verbose) {
        printf("%s", p->log);
        fflush(stdout);
    }
    x->commands += p->commands;
    x->dispatches += p->dispatches;
    x->programs++;
    for (int i = 0; i < p->nbufs; i++) {
        if (!p->bufs[i].freed)
            R_OK(p, nu_buffer_free(p->bufs[i].h));
        free(p->bufs[i].bytes);
        free(p->bufs[i].known);
    }
    for (int i = 0; i < p->ncbs; i++)
        for (int k = 0; k < p->cbs[i].nops; k++)
            free_op(&p->cbs[i].ops[k]);
    free(p->log);
    free(p);
}

/* ---- the test ---------------------------------------------------------------------------------- */

static void random_programs(void **state)
{
    ctx x = {0};
    x.d = nt_open();
    const nu_device_info *info = nu_device_get_info(x.d);
    x.align = (size_t)info->min_storage_buffer_offset_alignment;
    if (x.align < 4)
        x.align = 4;
    for (int k = 0; k < K_COUNT; k++)
        NT_OK(nu_kernel_builtin(x.d, kernel_names[k], &x.k[k]));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < opt_programs; i++)
        run_program(&x, opt_seed + i);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char name[NU_NAME_SIZE];
    snprintf(name, sizeof name, "%s", info->name);
    for (int k = 0; k < K_COUNT; k++)
        nu_kernel_free(x.k[k]);
    nt_close(x.d);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("random: %llu programs (seeds %llu..%llu) on %s in %.1f s: %llu CPU accesses (%llu refused, "
           "%llu between recording and commit)\n",
           (unsigned long long)x.programs, (unsigned long long)opt_seed,
           (unsigned long long)(opt_seed + opt_programs - 1), name, s,
           (unsigned long long)x.cpu_ops, (unsigned long long)x.refusals, (unsigned long long)x.cpu_recorded);
    printf("random: %llu bytes compared, %llu unknown to the model (not compared)\n",
           (unsigned long long)x.known_bytes, (unsigned long long)x.unknown_bytes);
    printf("random: %llu programs, %llu commands, %llu dispatches (%llu more refused: a binding short of the "
           "count), all bytes matched\n",
           (unsigned long long)x.programs, (unsigned long long)x.commands, (unsigned long long)x.dispatches,
           (unsigned long long)x.refused_dispatches);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s)
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--programs") == 0 && i + 1 < argc && parse_u64(argv[i + 1], &opt_programs)) {
            i++;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc && parse_u64(argv[i + 1], &opt_seed)) {
            i++;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            opt_verbose = true;
        } else {
            fprintf(stderr, "usage: %s [--programs N] [--seed S] [--verbose]\n", argv[0]);
            return 2;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_programs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
