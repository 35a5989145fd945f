/* ops_util.c: see ops_util.h. */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint16_t nt_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half (or zero) */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent: correct, up to infinity */
    return (uint16_t)(sign | half);
}

float nt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400u), (int)exp - 25);
    uint32_t x;
    memcpy(&x, &v, 4);
    x |= sign;
    memcpy(&v, &x, 4);
    return v;
}

uint16_t nt_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float nt_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

float nt_round_to(nu_dtype dtype, float f)
{
    switch (dtype) {
    case NU_DTYPE_F16: return nt_f16_to_f32(nt_f32_to_f16(f));
    case NU_DTYPE_BF16: return nt_bf16_to_f32(nt_f32_to_bf16(f));
    default: return f;
    }
}

static void put(nu_dtype dtype, uint8_t *p, float v)
{
    switch (dtype) {
    case NU_DTYPE_F32: memcpy(p, &v, 4); break;
    case NU_DTYPE_F16: { uint16_t h = nt_f32_to_f16(v); memcpy(p, &h, 2); break; }
    case NU_DTYPE_BF16: { uint16_t h = nt_f32_to_bf16(v); memcpy(p, &h, 2); break; }
    case NU_DTYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    default: fail_msg("ops_util: no element writer for %s", nu_dtype_name(dtype));
    }
}

static float get(nu_dtype dtype, const uint8_t *p)
{
    switch (dtype) {
    case NU_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case NU_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); return nt_f16_to_f32(h); }
    case NU_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return nt_bf16_to_f32(h); }
    case NU_DTYPE_I32: { int32_t i; memcpy(&i, p, 4); return (float)i; }
    default: fail_msg("ops_util: no element reader for %s", nu_dtype_name(dtype));
    }
    return 0;
}

static nt_tensor make(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad)
{
    nt_tensor h;
    memset(&h, 0, sizeof h);
    size_t es = nu_dtype_size(dtype);
    assert_true(es > 0);
    h.t = nu_tensor_make(NULL, pad * es, dtype, rank, shape);
    h.numel = nu_tensor_numel(&h.t);
    h.size = (size_t)((pad + h.numel) * es + 16);
    h.bytes = malloc(h.size);
    h.values = calloc(h.numel ? h.numel : 1, sizeof *h.values);
    assert_non_null(h.bytes);
    memset(h.bytes, 0xff, h.size); /* NaN in every float dtype */
    NT_OK(nu_buffer_new(d, h.size, NU_STORAGE_SHARED, &h.t.buffer));
    return h;
}

static void upload(nt_tensor *h) { NT_OK(nu_buffer_write(h->t.buffer, 0, h->bytes, h->size)); }

nt_tensor nt_tensor_random(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad,
                           float lo, float hi, uint64_t *seed)
{
    nt_tensor h = make(d, dtype, rank, shape, pad);
    size_t es = nu_dtype_size(dtype);
    for (uint64_t i = 0; i < h.numel; i++) {
        float u = (float)(nt_rand(seed) >> 40) / (float)(1u << 24);
        float v = nt_round_to(dtype, lo + (hi - lo) * u);
        if (dtype == NU_DTYPE_I32)
            v = floorf(v);
        h.values[i] = v;
        put(dtype, h.bytes + h.t.offset + i * es, v);
    }
    upload(&h);
    return h;
}

nt_tensor nt_tensor_output(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad)
{
    nt_tensor h = make(d, dtype, rank, shape, pad);
    upload(&h);
    return h;
}

nt_tensor nt_tensor_i32(nu_device *d, const int32_t *v, int64_t n, uint64_t pad, int64_t stride)
{
    int64_t total = n * stride;
    nt_tensor h = nt_tensor_output(d, NU_DTYPE_I32, 1, &total, pad);
    for (int64_t i = 0; i < n; i++)
        memcpy(h.bytes + h.t.offset + (size_t)(i * stride) * 4, &v[i], 4);
    NT_OK(nu_buffer_write(h.t.buffer, 0, h.bytes, h.size));
    h.t.shape[0] = n;
    h.t.strides[0] = stride;
    return h;
}

void nt_tensor_values(const nt_tensor *h, const nu_tensor *view, float *out)
{
    size_t es = nu_dtype_size(view->dtype);
    uint64_t n = nu_tensor_numel(view);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = i, at = 0;
        for (uint32_t k = view->rank; k-- > 0;) {
            uint64_t idx = r % (uint64_t)view->shape[k];
            r /= (uint64_t)view->shape[k];
            at += idx * (uint64_t)view->strides[k];
        }
        out[i] = get(view->dtype, h->bytes + view->offset + at * es);
    }
}

float *nt_tensor_values_new(const nt_tensor *h, const nu_tensor *view)
{
    float *v = malloc(nu_tensor_numel(view) * sizeof *v + 1);
    if (!v)
        fail_msg("out of host memory");
    nt_tensor_values(h, view, v);
    return v;
}

void nt_tensor_download(nt_tensor *h)
{
    NT_OK(nu_buffer_read(h->t.buffer, 0, h->bytes, h->size));
    nt_tensor_values(h, &h->t, h->values);
}

void nt_tensor_free(nt_tensor *h)
{
    if (h->t.buffer)
        NT_OK(nu_buffer_free(h->t.buffer));
    free(h->bytes);
    free(h->values);
    memset(h, 0, sizeof *h);
}

void nt_quantize(nu_dtype dtype, const float *x, uint64_t n, uint8_t *out) { NT_OK(nu_quantize(dtype, x, out, n, NULL)); }

void nt_dequantize(nu_dtype dtype, const uint8_t *blocks, uint64_t n, float *out) { NT_OK(nu_dequantize(dtype, blocks, out, n)); }

nt_tensor nt_tensor_quantized(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad_blocks,
                              float lo, float hi, uint64_t *seed)
{
    nt_tensor h;
    memset(&h, 0, sizeof h);
    uint32_t bytes = nu_dtype_block_bytes(dtype);
    h.t = nu_tensor_make(NULL, pad_blocks * bytes, dtype, rank, shape);
    h.numel = nu_tensor_numel(&h.t);
    uint32_t per = nu_dtype_block_elements(dtype);
    assert_true(per > 1 && h.numel % per == 0);
    h.size = (size_t)((pad_blocks + h.numel / per) * bytes + 16);
    h.bytes = malloc(h.size);
    h.values = calloc(h.numel ? h.numel : 1, sizeof *h.values);
    float *x = calloc(h.numel ? h.numel : 1, sizeof *x);
    assert_non_null(h.bytes);
    memset(h.bytes, 0xff, h.size);
    for (uint64_t i = 0; i < h.numel; i++)
        x[i] = lo + (hi - lo) * (float)(nt_rand(seed) >> 40) / (float)(1u << 24);
    nt_quantize(dtype, x, h.numel, h.bytes + h.t.offset);
    nt_dequantize(dtype, h.bytes + h.t.offset, h.numel, h.values);
    free(x);
    NT_OK(nu_buffer_new(d, h.size, NU_STORAGE_SHARED, &h.t.buffer));
    NT_OK(nu_buffer_write(h.t.buffer, 0, h.bytes, h.size));
    return h;
}

void nt_expect_close(const char *what, const float *got, const float *want, uint64_t n, float abs, float rel)
{
    for (uint64_t i = 0; i < n; i++) {
        float g = got[i], w = want[i];
        if (isnan(w) && isnan(g))
            continue;
        if (isinf(w) && g == w)
            continue;
        if (!(fabsf(g - w) <= abs + rel * fabsf(w)))
            fail_msg("%s: element %llu of %llu is %.9g, expected %.9g (tolerance %g + %g relative)", what,
                     (unsigned long long)i, (unsigned long long)n, (double)g, (double)w, (double)abs, (double)rel);
    }
}

float nt_dtype_tolerance(nu_dtype dtype)
{
    switch (dtype) {
    case NU_DTYPE_F16: return 1.0f / 1024; /* half an ulp is 2^-11; a conversion's rounding may differ by one */
    case NU_DTYPE_BF16: return 1.0f / 128;
    default: return 1e-6f;
    }
}

void nt_run(nu_device *d, nu_status (*record)(nu_commands *c, void *arg), void *arg)
{
    nu_commands *c = NULL;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(record(c, arg));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
}

typedef struct copy_args {
    const nu_tensor *dst, *src;
} copy_args;

static nu_status record_copy(nu_commands *c, void *arg)
{
    copy_args *a = arg;
    return nu_op_copy(c, a->dst, a->src);
}

void nt_run_copy(nu_device *d, const nu_tensor *dst, const nu_tensor *src)
{
    copy_args a = {dst, src};
    nt_run(d, record_copy, &a);
}

nt_repacked nt_repack(nu_device *d, const nu_tensor *src, nu_dtype to, uint64_t offset)
{
    nt_repacked r;
    memset(&r, 0, sizeof r);
    uint64_t n = nu_tensor_numel(src);
    r.size = (size_t)(offset + n / nu_dtype_block_elements(to) * nu_dtype_block_bytes(to) + 16);
    r.bytes = malloc(r.size);
    assert_non_null(r.bytes);
    memset(r.bytes, 0xff, r.size);
    nu_buffer *b;
    NT_OK(nu_buffer_new(d, r.size, NU_STORAGE_SHARED, &b));
    NT_OK(nu_buffer_write(b, 0, r.bytes, r.size));
    r.t = nu_tensor_make(b, offset, to, 2, src->shape);
    nt_run_copy(d, &r.t, src);
    NT_OK(nu_buffer_read(b, 0, r.bytes, r.size));
    return r;
}

void nt_repacked_free(nt_repacked *r)
{
    if (r->t.buffer)
        NT_OK(nu_buffer_free(r->t.buffer));
    free(r->bytes);
    memset(r, 0, sizeof *r);
}

void nt_expect_same_dequantization(nu_device *d, const nt_repacked *r, const nu_tensor *src, int64_t r0, uint64_t pad,
                                   const char *label)
{
    static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};
    int64_t rn = src->shape[0] - r0, k = src->shape[1], ds[2] = {rn, k};
    nu_tensor rv, sv;
    NT_OK(nu_tensor_slice(&r->t, 0, r0, rn, &rv));
    NT_OK(nu_tensor_slice(src, 0, r0, rn, &sv));
    for (int f = 0; f < 3; f++) {
        nt_tensor a = nt_tensor_output(d, floats[f], 2, ds, pad), b = nt_tensor_output(d, floats[f], 2, ds, 0);
        nt_run_copy(d, &a.t, &rv);
        nt_run_copy(d, &b.t, &sv);
        nt_tensor_download(&a);
        nt_tensor_download(&b);
        if (memcmp(a.bytes + a.t.offset, b.bytes, (size_t)(rn * k) * nu_dtype_size(floats[f])) != 0)
            fail_msg("%s: %s -> %s (rows %lld..) differs from %s's dequantization", label, nu_dtype_name(r->t.dtype),
                     nu_dtype_name(floats[f]), (long long)r0, nu_dtype_name(src->dtype));
        nt_tensor_free(&a);
        nt_tensor_free(&b);
    }
}

const nu_dtype nt_block_dtypes[NT_BLOCK_DTYPES] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_Q4_1, NU_DTYPE_Q5_0,
                                                   NU_DTYPE_Q5_1, NU_DTYPE_Q4_K, NU_DTYPE_Q5_K, NU_DTYPE_Q6_K,
                                                   NU_DTYPE_IQ4_NL, NU_DTYPE_IQ4_XS};

bool nt_is_block(nu_dtype dtype) { return nu_dtype_block_elements(dtype) > 1; }

bool nt_matvec_dot_path(nu_device *d, const nu_tensor *w, int64_t m, bool norm, const nu_matvec_tune *tune)
{
    const nu_device_info *info = nu_device_get_info(d);
    if ((w->dtype == NU_DTYPE_Q4_K || w->dtype == NU_DTYPE_Q5_K || w->dtype == NU_DTYPE_Q6_K) &&
        (info->subgroup_operations & NU_SUBGROUP_ARITHMETIC) && info->subgroup_size >= 8 &&
        !(tune && tune->generic_k_formats)) {
        /* Q4_0_SOA's kernel (src/ops/matvec_soa.c): the dot path where one row of x fits in shared
         * memory, 48 bytes a block (K / 32 rounded up to 64), plus the norm's sums (local / 8
         * floats), a split sum and the row's 1 / RMS; more rows go in groups of as many as fit. */
        uint64_t cap = (uint64_t)((w->shape[1] / 32 + 63) / 64 * 64), local = tune && tune->local ? tune->local : 1024;
        uint64_t shared = 48ull * cap + 4ull * (1 + (norm ? local / 8 : 1) + 1);
        return info->features[NU_FEATURE_INTEGER_DOT_PRODUCT] && (info->subgroup_operations & NU_SUBGROUP_SHUFFLE) &&
               info->subgroup_size % 8 == 0 && shared <= info->max_shared_memory && !(tune && tune->float_path);
    }
    /* x's rows: 52 bytes a block, K / 32 rounded up to 64 blocks; one float each of the unused
     * split sums and (without the norm) sums of squares, 4 bytes a block and row with it. */
    uint64_t cap = (uint64_t)((w->shape[1] / 32 + 63) / 64 * 64);
    uint64_t shared = 52ull * (uint64_t)m * cap + 4 + (norm ? 4ull * (uint64_t)m * cap : 4);
    return nt_is_block(w->dtype) && w->dtype != NU_DTYPE_Q4_0_SOA && info->features[NU_FEATURE_INTEGER_DOT_PRODUCT] &&
           (info->subgroup_operations & NU_SUBGROUP_ARITHMETIC) && (info->subgroup_operations & NU_SUBGROUP_SHUFFLE) &&
           info->subgroup_size % 8 == 0 && shared <= info->max_shared_memory && !(tune && tune->float_path);
}

void nt_round_as_dot_path(const float *x, int64_t n, double *xhat, double *tie)
{
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int64_t e = 32 * b; e < 32 * b + 32; e++)
            amax = fmaxf(amax, fabsf(x[e]));
        float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
        for (int64_t e = 32 * b; e < 32 * b + 32; e++) {
            float t = x[e] * inv;
            xhat[e] = (double)dx * (double)nearbyintf(t); /* round half to even (the default mode) */
            tie[e] = fabsf(fabsf(t - truncf(t)) - 0.5f) < 1e-3f ? dx : 0.0;
        }
    }
}

unsigned nt_trace_which(const char *path, const char *const *kernels, int n)
{
    char *text = nt_read_file(path), want[64];
    assert_non_null(text);
    char *o = text;
    for (const char *c = text; *c; c++) /* the writer's spacing aside */
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r')
            *o++ = *c;
    *o = 0;
    unsigned found = 0;
    for (int i = 0; i < n && i < 32; i++) {
        snprintf(want, sizeof want, "\"name\":\"%s", kernels[i]);
        if (strstr(text, want))
            found |= 1u << i;
    }
    free(text);
    remove(path);
    return found;
}

bool nt_trace_has(const char *path, const char *kernel) { return nt_trace_which(path, &kernel, 1) != 0; }
