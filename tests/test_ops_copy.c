/* test_ops_copy.c: nu_op_copy (src/ops/copy.c) against a CPU reference, bit for bit: casts between
 * F32, F16 and BF16 (random values, and every F16 and BF16 bit pattern, NaN, infinities,
 * subnormals and the values halfway between two results, rounded to nearest even), integer and
 * byte moves of strided, transposed and broadcast views with unaligned first elements (the bytes
 * around dst untouched), every block dtype dequantized exactly as ggml does (nu_dequantize's
 * values: padded, unaligned first blocks, slices of rows and of blocks, odd row counts, every
 * quant and scale byte, subnormal and largest half scales); and what it refuses. And nu_op_prefetch
 * (src/ops/prefetch.c): it runs, changes nothing and is ordered after its `after`.
 * Tolerance: none; every result is compared bit for bit (a NaN need only be a NaN). */
#include "ops_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};


static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The bits of float value v stored as dtype (the reference's conversions). */
static uint32_t store_bits(nu_dtype dtype, float v)
{
    switch (dtype) {
    case NU_DTYPE_F16: return nt_f32_to_f16(v);
    case NU_DTYPE_BF16: return nt_f32_to_bf16(v);
    default: return f32_bits(v);
    }
}

static bool is_nan_bits(nu_dtype dtype, uint32_t b)
{
    switch (dtype) {
    case NU_DTYPE_F16: return (b & 0x7fffu) > 0x7c00u;
    case NU_DTYPE_BF16: return (b & 0x7fffu) > 0x7f80u;
    default: return (b & 0x7fffffffu) > 0x7f800000u;
    }
}

static uint32_t element_bits(nu_dtype dtype, const uint8_t *p)
{
    uint32_t b = 0;
    memcpy(&b, p, nu_dtype_size(dtype));
    return b;
}

/* Compares dst's elements (read back) with `want` (bits of dst's dtype); a NaN need only be a NaN
 * of the same sign. */
static void expect_bits(const char *what, const nt_tensor *dst, const uint32_t *want, uint64_t n)
{
    size_t es = nu_dtype_size(dst->t.dtype);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t got = element_bits(dst->t.dtype, dst->bytes + dst->t.offset + i * es);
        uint32_t sign = es == 4 ? 0x80000000u : 0x8000u;
        bool nan = dst->t.dtype != NU_DTYPE_U8 && dst->t.dtype != NU_DTYPE_I32 && dst->t.dtype != NU_DTYPE_U32 &&
                   is_nan_bits(dst->t.dtype, want[i]);
        if (nan ? !(is_nan_bits(dst->t.dtype, got) && (got & sign) == (want[i] & sign)) : got != want[i])
            fail_msg("%s: element %llu of %llu is 0x%x, expected 0x%x", what, (unsigned long long)i, (unsigned long long)n,
                     got, want[i]);
    }
}

/* dst = copy of view `src` of h: dst's bits against the reference conversion of each value. */
static void check_cast(nu_device *d, nt_tensor *dst, const nt_tensor *h, const nu_tensor *src, const char *what)
{
    nt_run_copy(d, &dst->t, src);
    nt_tensor_download(dst);
    uint64_t n = dst->numel;
    float *x = malloc(n * sizeof *x);
    uint32_t *want = malloc(n * sizeof *want);
    nt_tensor_values(h, src, x);
    for (uint64_t i = 0; i < n; i++)
        want[i] = store_bits(dst->t.dtype, x[i]);
    expect_bits(what, dst, want, n);
    free(x);
    free(want);
}

static void copy_casts_between_float_dtypes_exactly(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 11;
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {1, 1, 1, 13}, {1, 1, 3, 40}, {1, 2, 5, 64}, {2, 3, 4, 131}};
    for (int dt = 0; dt < 3; dt++)
        for (int ds = 0; ds < 3; ds++)
            for (int p = 0; p < 2; p++) {
                int s = (dt + 2 * ds + p) % 5;
                uint32_t rank = 1 + (uint32_t)((dt + ds + p) % 4);
                const int64_t *shape = shapes[s] + (4 - rank);
                uint64_t pad = p ? (uint64_t)(1 + ds) : 0; /* 0: the vector path; else unaligned */
                nt_tensor src = nt_tensor_random(d, floats[ds], rank, shape, pad, -70000, 70000, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dt], rank, shape, p ? 0 : 8);
                char what[128];
                snprintf(what, sizeof what, "%s <- %s, %llu elements, pad %llu", nu_dtype_name(floats[dt]),
                         nu_dtype_name(floats[ds]), (unsigned long long)dst.numel, (unsigned long long)pad);
                check_cast(d, &dst, &src, &src.t, what);
                nt_tensor_free(&src);
                nt_tensor_free(&dst);
            }
    /* Views on the strided path: transposed, a slice of columns, broadcast. */
    int64_t ms[2] = {7, 19};
    nt_tensor m = nt_tensor_random(d, NU_DTYPE_BF16, 2, ms, 1, -3, 3, &seed);
    nu_tensor mt, cols, wide;
    NT_OK(nu_tensor_transpose(&m.t, 0, 1, &mt));
    NT_OK(nu_tensor_slice(&m.t, 1, 2, 9, &cols));
    int64_t bs[3] = {3, 7, 19};
    nu_tensor row = m.t;
    row.rank = 1;
    row.shape[0] = 19;
    row.strides[0] = 1;
    NT_OK(nu_tensor_broadcast(&row, 3, bs, &wide));
    int64_t ts[2] = {19, 7}, cs[2] = {7, 9};
    for (int dt = 0; dt < 3; dt++) {
        nt_tensor a = nt_tensor_output(d, floats[dt], 2, ts, 0), b = nt_tensor_output(d, floats[dt], 2, cs, 1),
                  c = nt_tensor_output(d, floats[dt], 3, bs, 0);
        check_cast(d, &a, &m, &mt, "a transposed BF16 view");
        check_cast(d, &b, &m, &cols, "a slice of BF16 columns");
        check_cast(d, &c, &m, &wide, "a BF16 row broadcast to 3x7x19");
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&c);
    }
    nt_tensor_free(&m);
    nt_close(d);
}

/* A tensor of dtype holding the given bits (row-major), `pad` elements into its buffer. */
static nt_tensor bits_tensor(nu_device *d, nu_dtype dtype, const uint32_t *bits, uint64_t n, uint64_t pad)
{
    int64_t shape[1] = {(int64_t)n};
    nt_tensor h = nt_tensor_output(d, dtype, 1, shape, pad);
    size_t es = nu_dtype_size(dtype);
    for (uint64_t i = 0; i < n; i++) {
        memcpy(h.bytes + h.t.offset + i * es, &bits[i], es);
        h.values[i] = dtype == NU_DTYPE_F32 ? bits_f32(bits[i])
                      : dtype == NU_DTYPE_F16 ? nt_f16_to_f32((uint16_t)bits[i])
                                              : nt_bf16_to_f32((uint16_t)bits[i]);
    }
    NT_OK(nu_buffer_write(h.t.buffer, 0, h.bytes, h.size));
    return h;
}

static void copy_rounds_special_values_to_nearest_even(void **state)
{
    nu_device *d = nt_open();
    /* Singles around every F16 and BF16 edge: zeros, infinities, NaNs (quiet, signalling, with
     * payloads), F32 subnormals, F16's subnormal range and its bottom (2^-24, 2^-25: a tie),
     * halfway cases (ties to even, and just off them), F16's largest (65504), the tie to
     * infinity (65520) and just below it, BF16's largest finite and the ties that round to
     * infinity. */
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u,
        0xff812345u, 0x00000001u, 0x807fffffu, 0x00400000u, 0x33800000u, 0x33000000u, 0x33000001u, 0xb3000000u,
        0x32ffffffu, 0x33c00000u, 0x34200000u, 0x38800000u, 0x387fc000u, 0x387fe000u, 0x387ff000u, 0x38000000u,
        0x3f801000u, 0x3f803000u, 0x3f801001u, 0x3f802fffu, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu,
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x477fffffu, 0x47800000u, 0x7f7f7fffu, 0x7f7f8000u,
        0x7f7fffffu, 0xff7f8000u, 0x3eaaaaabu, 0x40490fdbu, 0xc0490fdbu, 0x3dcccccdu, 0x00800000u, 0x00ff8000u,
        0x007f8000u, 0x00018000u, 0x3f7fffffu, 0x3fffffffu, 0x42f6e979u, 0x4b7fffffu, 0x5f000000u, 0x1e3ce508u,
    };
    uint64_t n = sizeof specials / sizeof specials[0];
    uint32_t *all = malloc(65536 * sizeof *all), *want = malloc(65536 * sizeof *want);
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = i;
    for (int path = 0; path < 2; path++) {
        uint64_t pad = path ? 1 : 0; /* the vector path, then the element path */
        nt_tensor s32 = bits_tensor(d, NU_DTYPE_F32, specials, n, pad);
        nt_tensor s16 = bits_tensor(d, NU_DTYPE_F16, all, 65536, pad);
        nt_tensor sbf = bits_tensor(d, NU_DTYPE_BF16, all, 65536, pad);
        const nt_tensor *srcs[3] = {&s32, &s16, &sbf};
        for (int si = 0; si < 3; si++)
            for (int dt = 0; dt < 3; dt++) {
                const nt_tensor *src = srcs[si];
                int64_t shape[1] = {(int64_t)src->numel};
                nt_tensor dst = nt_tensor_output(d, floats[dt], 1, shape, 0);
                nt_run_copy(d, &dst.t, &src->t);
                nt_tensor_download(&dst);
                for (uint64_t i = 0; i < src->numel; i++) {
                    const uint32_t *b = si == 0 ? specials : all;
                    if (floats[dt] == src->t.dtype)
                        want[i] = b[i]; /* a dtype to itself: the bits, NaN payloads too */
                    else
                        want[i] = store_bits(floats[dt], src->values[i]);
                    /* nt's conversions make every NaN positive; the kernels keep the sign. */
                    if (is_nan_bits(floats[dt], want[i]) && (src->t.dtype == NU_DTYPE_F32 ? b[i] >> 31 : b[i] >> 15))
                        want[i] |= floats[dt] == NU_DTYPE_F32 ? 0x80000000u : 0x8000u;
                }
                char what[128];
                snprintf(what, sizeof what, "%s <- %s special values (%s path)", nu_dtype_name(floats[dt]),
                         nu_dtype_name(src->t.dtype), path ? "element" : "vector");
                expect_bits(what, &dst, want, src->numel);
                nt_tensor_free(&dst);
            }
        nt_tensor_free(&s32);
        nt_tensor_free(&s16);
        nt_tensor_free(&sbf);
    }
    /* Spot checks of the reference itself (the kernels are checked against it). */
    assert_int_equal(nt_f32_to_f16(bits_f32(0x33000000u)), 0x0000); /* 2^-25: a tie, to even 0 */
    assert_int_equal(nt_f32_to_f16(bits_f32(0x33000001u)), 0x0001);
    assert_int_equal(nt_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(nt_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(nt_f32_to_bf16(bits_f32(0x3f808000u)), 0x3f80); /* a tie, to even */
    assert_int_equal(nt_f32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);
    free(all);
    free(want);
    nt_close(d);
}

/* A tensor of an integer dtype with random bytes, `pad` elements into its buffer (bytes around it
 * random too). */
static nt_tensor int_tensor(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad,
                            uint64_t *seed)
{
    nt_tensor h;
    memset(&h, 0, sizeof h);
    size_t es = nu_dtype_size(dtype);
    h.t = nu_tensor_make(NULL, pad * es, dtype, rank, shape);
    h.numel = nu_tensor_numel(&h.t);
    h.size = (size_t)((pad + h.numel) * es + 19);
    h.bytes = malloc(h.size);
    h.values = calloc(1, sizeof *h.values);
    for (size_t i = 0; i < h.size; i++)
        h.bytes[i] = (uint8_t)(nt_rand(seed) >> 56);
    NT_OK(nu_buffer_new(d, h.size, NU_STORAGE_SHARED, &h.t.buffer));
    NT_OK(nu_buffer_write(h.t.buffer, 0, h.bytes, h.size));
    return h;
}

/* Element bits of `view` of h, row-major. */
static void view_bits(const nt_tensor *h, const nu_tensor *view, uint32_t *out)
{
    size_t es = nu_dtype_size(view->dtype);
    uint64_t n = nu_tensor_numel(view);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = i, at = 0;
        for (uint32_t k = view->rank; k-- > 0;) {
            at += r % (uint64_t)view->shape[k] * (uint64_t)view->strides[k];
            r /= (uint64_t)view->shape[k];
        }
        out[i] = element_bits(view->dtype, h->bytes + view->offset + at * es);
    }
}

/* dst (a fresh tensor `pad` elements into a buffer of random bytes) = view `src` of h: the
 * elements moved and every byte around them untouched. */
static void check_move(nu_device *d, const nt_tensor *h, const nu_tensor *src, uint64_t pad, const char *what,
                       uint64_t *seed)
{
    nt_tensor dst = int_tensor(d, src->dtype, src->rank, src->shape, pad, seed);
    uint8_t *before = malloc(dst.size);
    memcpy(before, dst.bytes, dst.size);
    nt_run_copy(d, &dst.t, src);
    NT_OK(nu_buffer_read(dst.t.buffer, 0, dst.bytes, dst.size));
    uint64_t n = dst.numel;
    uint32_t *want = malloc((n ? n : 1) * sizeof *want);
    view_bits(h, src, want);
    expect_bits(what, &dst, want, n);
    size_t es = nu_dtype_size(src->dtype), lo = (size_t)dst.t.offset, hi = lo + (size_t)n * es;
    for (size_t i = 0; i < dst.size; i++)
        if ((i < lo || i >= hi) && dst.bytes[i] != before[i])
            fail_msg("%s: byte %zu outside dst [%zu, %zu) changed from 0x%02x to 0x%02x", what, i, lo, hi, before[i],
                     dst.bytes[i]);
    free(want);
    free(before);
    nt_tensor_free(&dst);
}

static void copy_moves_integers_and_bytes_of_any_view(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 12;
    const nu_dtype ints[3] = {NU_DTYPE_I32, NU_DTYPE_U32, NU_DTYPE_U8};
    for (int t = 0; t < 3; t++) {
        nu_dtype dt = ints[t];
        char what[128];
        /* Contiguous: aligned (the vector path, with a tail) and not, dst at every byte offset. */
        int64_t ns[3][1] = {{1}, {77}, {1003}};
        for (int s = 0; s < 3; s++)
            for (uint64_t sp = 0; sp < 2; sp++)
                for (uint64_t dp = 0; dp < (dt == NU_DTYPE_U8 ? 5u : 2u); dp++) {
                    nt_tensor h = int_tensor(d, dt, 1, ns[s], sp ? 3 : 0, &seed);
                    snprintf(what, sizeof what, "%s, %lld elements, src pad %llu, dst pad %llu", nu_dtype_name(dt),
                             (long long)ns[s][0], (unsigned long long)(sp ? 3 : 0), (unsigned long long)dp);
                    check_move(d, &h, &h.t, dp, what, &seed);
                    nt_tensor_free(&h);
                }
        /* Strided views: transposed, a slice of columns, broadcast, each to dst at two offsets. */
        int64_t ms[3] = {3, 9, 13};
        nt_tensor m = int_tensor(d, dt, 3, ms, 1, &seed);
        nu_tensor views[3];
        NT_OK(nu_tensor_transpose(&m.t, 1, 2, &views[0]));
        NT_OK(nu_tensor_slice(&m.t, 2, 3, 7, &views[1]));
        nu_tensor one;
        NT_OK(nu_tensor_slice(&m.t, 0, 1, 1, &one));
        int64_t bs[4] = {2, 3, 9, 13};
        NT_OK(nu_tensor_broadcast(&one, 4, bs, &views[2]));
        const char *names[3] = {"transposed", "a slice of columns", "broadcast"};
        for (int v = 0; v < 3; v++)
            for (uint64_t dp = 0; dp < 2; dp++) {
                snprintf(what, sizeof what, "%s %s, dst pad %llu", nu_dtype_name(dt), names[v], (unsigned long long)dp);
                check_move(d, &m, &views[v], dp * 3, what, &seed);
            }
        nt_tensor_free(&m);
    }
    nt_close(d);
}

/* The values of a view of quantized tensor h (whose values are its dequantized elements,
 * row-major), row-major over the view's shape. */
static void block_view_values(const nt_tensor *h, const nu_tensor *view, float *out)
{
    uint64_t base = (view->offset - h->t.offset) / nu_dtype_block_bytes(view->dtype) * nu_dtype_block_elements(view->dtype);
    uint64_t n = nu_tensor_numel(view);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = i, at = 0;
        for (uint32_t k = view->rank; k-- > 0;) {
            at += r % (uint64_t)view->shape[k] * (uint64_t)view->strides[k];
            r /= (uint64_t)view->shape[k];
        }
        out[i] = h->values[base + at];
    }
}

static void check_dequant(nu_device *d, const nt_tensor *h, const nu_tensor *src, nu_dtype dtype, uint64_t pad,
                          const char *what)
{
    nt_tensor dst = nt_tensor_output(d, dtype, src->rank, src->shape, pad);
    nt_run_copy(d, &dst.t, src);
    nt_tensor_download(&dst);
    uint64_t n = dst.numel;
    float *x = malloc(n * sizeof *x);
    uint32_t *want = malloc(n * sizeof *want);
    block_view_values(h, src, x);
    for (uint64_t i = 0; i < n; i++)
        want[i] = store_bits(dtype, x[i]); /* F32: nt_dequantize's value; else it, rounded */
    char full[192];
    snprintf(full, sizeof full, "%s %s -> %s, dst pad %llu", what, nu_dtype_name(src->dtype), nu_dtype_name(dtype),
             (unsigned long long)pad);
    expect_bits(full, &dst, want, n);
    free(x);
    free(want);
    nt_tensor_free(&dst);
}

/* The byte offsets of a block's IEEE half scales (d, and m or dmin where the format has one). */
static int half_fields(nu_dtype dtype, int at[2])
{
    at[0] = dtype == NU_DTYPE_Q6_K ? 208 : 0;
    at[1] = 2;
    return dtype == NU_DTYPE_Q4_1 || dtype == NU_DTYPE_Q5_1 || dtype == NU_DTYPE_Q4_K || dtype == NU_DTYPE_Q5_K ? 2 : 1;
}

/* Whole tensors of bt and views of them dequantized to dst dtype dt (floats[dt]). */
static void dequant_tensors_and_views(nu_device *d, nu_dtype bt, int dt, uint64_t *seedp)
{
    uint64_t seed = *seedp;
    int64_t per = nu_dtype_block_elements(bt);
    {
        {
            /* Whole tensors: odd row counts, a padded (2-byte aligned) first block. */
            int64_t s1[1] = {per}, s2[2] = {7, 3 * per}, s3[3] = {3, 5, 2 * per};
            nt_tensor a = nt_tensor_quantized(d, bt, 1, s1, 0, -1, 1, &seed);
            nt_tensor m = nt_tensor_quantized(d, bt, 2, s2, 1, -4, 3, &seed);
            nt_tensor c = nt_tensor_quantized(d, bt, 3, s3, 3, -100, 100, &seed);
            check_dequant(d, &a, &a.t, floats[dt], 0, "one block");
            check_dequant(d, &m, &m.t, floats[dt], 0, "7 rows of 3 blocks, a block of pad");
            check_dequant(d, &m, &m.t, floats[dt], 1, "7 rows of 3 blocks, a block of pad");
            check_dequant(d, &c, &c.t, floats[dt], dt, "3x5 rows of 2 blocks, 3 blocks of pad");
            /* Views: a slice of rows (an outer stride), a slice of blocks of each row, outer
             * dimensions transposed, a row broadcast. */
            nu_tensor rows, mid, tr, bc, one;
            NT_OK(nu_tensor_slice(&m.t, 0, 2, 5, &rows));
            NT_OK(nu_tensor_slice(&m.t, 1, per, per, &mid));
            NT_OK(nu_tensor_transpose(&c.t, 0, 1, &tr));
            NT_OK(nu_tensor_slice(&m.t, 0, 3, 1, &one));
            int64_t bs[3] = {2, 3, 3 * per};
            NT_OK(nu_tensor_broadcast(&one, 3, bs, &bc));
            check_dequant(d, &m, &rows, floats[dt], 0, "rows 2..6 of 7");
            check_dequant(d, &m, &mid, floats[dt], 1, "the middle block of each row of 7");
            check_dequant(d, &c, &tr, floats[dt], 0, "3x5 rows transposed to 5x3");
            check_dequant(d, &m, &bc, floats[dt], 0, "row 3 of 7 broadcast to 2x3");
            nt_tensor_free(&a);
            nt_tensor_free(&m);
            nt_tensor_free(&c);
        }
    }
    *seedp = seed;
}

static void copy_dequantizes_every_block_dtype_exactly(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 13;
    for (int b = 0; b < NT_BLOCK_DTYPES; b++) {
        nu_dtype bt = nt_block_dtypes[b];
        int64_t per = nu_dtype_block_elements(bt);
        for (int dt = b < 2 ? 0 : b % 3; dt < 3; dt += b < 2 ? 1 : 3) /* the later formats: one dst dtype each */
            dequant_tensors_and_views(d, bt, dt, &seed);
        /* The K formats to F16 also (copy.comp's own path for them: a prefill's weight copies). */
        bool k_format = bt == NU_DTYPE_Q4_K || bt == NU_DTYPE_Q5_K || bt == NU_DTYPE_Q6_K;
        if (k_format && b % 3 != 1)
            dequant_tensors_and_views(d, bt, 1, &seed);
        /* Blocks of every byte pattern: quants and sub-block scales from a mix of the block's
         * index and position, its half scales F16's extremes (the smallest subnormals, the largest,
         * one, minus one, -0) in turn. */
        uint32_t bytes = nu_dtype_block_bytes(bt);
        const uint16_t scales[6] = {0x0001, 0x03ff, 0x3c00, 0xbc00, 0x7bff, 0x8000};
        int nb = 6 * 8, at[2], fields = half_fields(bt, at);
        int64_t shape[1] = {(int64_t)nb * per};
        nt_tensor h;
        memset(&h, 0, sizeof h);
        h.t = nu_tensor_make(NULL, (uint64_t)bytes, bt, 1, shape);
        h.numel = (uint64_t)nb * (uint64_t)per;
        h.size = (size_t)(nb + 1) * bytes + 16;
        h.bytes = calloc(1, h.size);
        h.values = malloc(h.numel * sizeof *h.values);
        for (int k = 0; k < nb; k++) {
            uint8_t *blk = h.bytes + (k + 1) * bytes;
            for (uint32_t j = 0; j < bytes; j++)
                blk[j] = (uint8_t)(k * 37 + (int)j * 11);
            for (int f = 0; f < fields; f++)
                memcpy(blk + at[f], &scales[(k + 3 * f) % 6], 2);
        }
        nt_dequantize(bt, h.bytes + bytes, h.numel, h.values);
        NT_OK(nu_buffer_new(d, h.size, NU_STORAGE_SHARED, &h.t.buffer));
        NT_OK(nu_buffer_write(h.t.buffer, 0, h.bytes, h.size));
        for (int dt = 0; dt < 3; dt++)
            check_dequant(d, &h, &h.t, floats[dt], 0, "extreme scales and quants");
        nt_tensor_free(&h);
    }
    nt_close(d);
}

static void copy_runs_at_large_sizes(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 14;
    int64_t n[1] = {300001};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, n, 0, -1e5f, 1e5f, &seed);
    nt_tensor b = nt_tensor_output(d, NU_DTYPE_BF16, 1, n, 0);
    nt_tensor c = nt_tensor_output(d, NU_DTYPE_F16, 1, n, 3);
    check_cast(d, &b, &a, &a.t, "300001 F32 -> BF16");
    check_cast(d, &c, &b, &b.t, "300001 BF16 -> F16 (unaligned dst)");
    int64_t qs[2] = {111, 1024};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, 1, -1, 1, &seed);
    check_dequant(d, &q, &q.t, NU_DTYPE_F16, 0, "111x1024");
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&c);
    nt_tensor_free(&q);
    nt_close(d);
}

static void copy_refuses_bad_tensors(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 15;
    int64_t s4[1] = {4}, s5[1] = {5}, s22[2] = {2, 2}, s32[1] = {32};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, s4, 0, 0, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, s5, 0, 0, 1, &seed);
    nt_tensor m = nt_tensor_random(d, NU_DTYPE_F32, 2, s22, 0, 0, 1, &seed);
    nt_tensor i = int_tensor(d, NU_DTYPE_I32, 1, s4, 0, &seed);
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q8_0, 1, s32, 0, -1, 1, &seed);
    nt_tensor f = nt_tensor_output(d, NU_DTYPE_F32, 1, s32, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &a.t, &b.t)); /* 4 vs 5 */
    assert_non_null(strstr(nu_error_message(NULL), "src is 5"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &a.t, &i.t)); /* I32 -> F32 */
    assert_non_null(strstr(nu_error_message(NULL), "from I32 to F32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &i.t, &a.t)); /* F32 -> I32 */
    nu_tensor u32 = i.t;
    u32.dtype = NU_DTYPE_U32;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &u32, &i.t)); /* I32 -> U32 */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &q.t, &f.t)); /* quantizing */
    assert_non_null(strstr(nu_error_message(NULL), "Q8_0"));
    nu_tensor i8 = i.t;
    i8.dtype = NU_DTYPE_I8;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &i8, &i8)); /* no I8 */
    nu_tensor mt;
    NT_OK(nu_tensor_transpose(&m.t, 0, 1, &mt));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &mt, &m.t)); /* a strided dst */
    assert_non_null(strstr(nu_error_message(NULL), "contiguous"));
    nu_tensor head = a.t, tail = a.t;
    head.shape[0] = tail.shape[0] = 3;
    tail.offset += 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &tail, &head)); /* overlapping */
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    nu_tensor half = a.t;
    half.dtype = NU_DTYPE_F16;
    half.shape[0] = 8;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &a.t, &half)); /* shapes differ; and overlap */
    nu_tensor past = a.t;
    past.offset = a.size;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_copy(c, &past, &a.t));
    nu_tensor odd = a.t;
    odd.offset = 2;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &odd, &b.t)); /* not a multiple of 4 bytes */
    /* A U8 tensor ending in a buffer's last, partial 32-bit word. */
    nu_buffer *small;
    NT_OK(nu_buffer_new(d, 7, NU_STORAGE_SHARED, &small));
    int64_t s3[1] = {3};
    nu_tensor u8a = nu_tensor_make(small, 4, NU_DTYPE_U8, 1, s3), u8b = nu_tensor_make(small, 0, NU_DTYPE_U8, 1, s3);
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_op_copy(c, &u8a, &u8b));
    assert_non_null(strstr(nu_error_message(NULL), "32-bit words"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(NULL, &a.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, NULL, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &a.t, NULL));
    /* An empty copy records nothing and succeeds; in place (the same view) is allowed. */
    nu_tensor empty = a.t;
    empty.shape[0] = 0;
    NT_OK(nu_op_copy(c, &empty, &empty));
    nu_commands_free(c);
    NT_OK(nu_buffer_free(small));
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&m);
    nt_tensor_free(&i);
    nt_tensor_free(&q);
    nt_tensor_free(&f);
    nt_close(d);
}

/* nu_op_prefetch: the prefetch kernel runs (traced), reads the whole span or its first bytes of
 * block and float views with unaligned first elements, changes nothing (src's bytes, and the copy
 * it follows and the one after it give their values), and is ordered after the op writing `after`
 * (in a command buffer, under the validation layer's synchronisation checks; in a graph, by the
 * order its launch ran the dispatches in). */
typedef struct prefetch_case {
    const nu_tensor *q, *a, *mid, *out;
} prefetch_case;

typedef struct trace_event {
    double ts;
    char name[16];
} trace_event;

/* The names of the GPU events of trace `path` (copies, prefetches, barriers) in the order they ran,
 * comma-separated, into out (the file is removed). */
static void gpu_order(const char *path, char *out, size_t size)
{
    char *text = nt_read_file(path);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    remove(path);
    cJSON *list = cJSON_GetObjectItem(doc, "traceEvents"), *e;
    assert_true(cJSON_IsArray(list));
    trace_event ev[64];
    int n = 0;
    cJSON_ArrayForEach(e, list)
    {
        cJSON *cat = cJSON_GetObjectItem(e, "cat"), *nm = cJSON_GetObjectItem(e, "name"), *ts = cJSON_GetObjectItem(e, "ts");
        if (n == 64 || !cJSON_IsString(cat) || strcmp(cat->valuestring, "gpu") || !cJSON_IsString(nm) ||
            !cJSON_IsNumber(ts))
            continue;
        ev[n].ts = ts->valuedouble;
        snprintf(ev[n].name, sizeof ev[n].name, "%s", nm->valuestring);
        n++;
    }
    cJSON_Delete(doc);
    for (int i = 1; i < n; i++) /* by start time */
        for (int j = i; j > 0 && ev[j].ts < ev[j - 1].ts; j--) {
            trace_event t = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = t;
        }
    out[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? "," : "", ev[i].name);
}

static nu_status record_prefetches(nu_commands *c, void *arg)
{
    const prefetch_case *pc = arg;
    nu_status st;
    if ((st = nu_op_copy(c, pc->mid, pc->a)) != NU_OK)
        return st;
    nu_prefetch_desc first = {.bytes = 1000, .after = pc->mid}, all = {.after = pc->mid, .groups = 3};
    if ((st = nu_op_prefetch(c, pc->q, &first)) != NU_OK || (st = nu_op_prefetch(c, pc->q, &all)) != NU_OK ||
        (st = nu_op_prefetch(c, pc->a, NULL)) != NU_OK)
        return st;
    return nu_op_copy(c, pc->out, pc->mid);
}

static void prefetch_reads_and_changes_nothing(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 16;
    int64_t qs[2] = {111, 1024}, n[1] = {5001};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, 1, -1, 1, &seed);
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, n, 3, -1, 1, &seed);
    nt_tensor mid = nt_tensor_output(d, NU_DTYPE_F16, 1, n, 1), out = nt_tensor_output(d, NU_DTYPE_F32, 1, n, 0);
    prefetch_case pc = {&q.t, &a.t, &mid.t, &out.t};
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-prefetch-%d.json", nt_tmp_dir(), (int)getpid());
    NT_OK(nu_trace_start(d, path));
    nt_run(d, record_prefetches, &pc);
    NT_OK(nu_trace_stop(d));
    assert_true(nt_trace_has(path, "prefetch"));
    remove(path);
    uint8_t *now = malloc(q.size);
    assert_non_null(now);
    NT_OK(nu_buffer_read(q.t.buffer, 0, now, q.size));
    assert_memory_equal(now, q.bytes, q.size);
    free(now);
    nt_tensor_download(&out);
    for (uint64_t i = 0; i < a.numel; i++)
        assert_true(out.values[i] == nt_round_to(NU_DTYPE_F16, a.values[i]));
    /* In a graph (the level pass): the copy writing mid and the prefetch with no `after` in the
     * first level, the prefetches after mid and the copy reading it in the second. */
    nu_commands *rec;
    nu_graph *g;
    NT_OK(nu_graph_record(d, &rec));
    NT_OK(record_prefetches(rec, &pc));
    NT_OK(nu_graph_new(rec, &g));
    NT_OK(nu_trace_start(d, path));
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    NT_OK(nu_trace_stop(d));
    char order[256];
    gpu_order(path, order, sizeof order);
    assert_string_equal(order, "copy,prefetch,barrier,prefetch,prefetch,copy");
    NT_OK(nu_graph_free(g));
    /* Refusals. */
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_prefetch_desc past = {.bytes = nu_tensor_span_bytes(&a.t) + 1};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_prefetch(c, &a.t, &past));
    assert_non_null(strstr(nu_error_message(NULL), "past src's"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_prefetch(NULL, &a.t, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_prefetch(c, NULL, NULL));
    nu_tensor beyond = a.t;
    beyond.offset = a.size;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_prefetch(c, &beyond, NULL));
    nu_prefetch_desc bad_after = {.after = &beyond};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_prefetch(c, &a.t, &bad_after));
    nu_tensor empty = a.t;
    empty.shape[0] = 0;
    NT_OK(nu_op_prefetch(c, &empty, NULL)); /* records nothing */
    nu_commands_free(c);
    nt_tensor_free(&q);
    nt_tensor_free(&a);
    nt_tensor_free(&mid);
    nt_tensor_free(&out);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copy_casts_between_float_dtypes_exactly),
        cmocka_unit_test(copy_rounds_special_values_to_nearest_even),
        cmocka_unit_test(copy_moves_integers_and_bytes_of_any_view),
        cmocka_unit_test(copy_dequantizes_every_block_dtype_exactly),
        cmocka_unit_test(copy_runs_at_large_sizes),
        cmocka_unit_test(copy_refuses_bad_tensors),
        cmocka_unit_test(prefetch_reads_and_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
