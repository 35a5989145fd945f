/* test_ops_kv_cache.c: the KV cache's writes (src/ops/kv_cache.c, kernels/attention/kv_write.comp)
 * against CPU references: nu_op_kv_append (every dtype pair, transposed src, then a decode step
 * reading it), nu_op_kv_append_rope (against the float64 RoPE and bit-equal to nu_op_rope then
 * nu_op_kv_append), the per-row nu_op_kv_write (rank-4 caches of several slots, rows at their
 * positions and slots, rows out of range writing nothing, strided I32 views, RoPE with scaling
 * bit-equal to nu_op_rope with the same positions then the plain write, equal to the scalar
 * form's bytes where both apply), and what the ops refuse. */
#include "attn_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

typedef struct append_case {
    const nu_tensor *cache, *src;
    uint32_t position;
} append_case;

static nu_status record_append(nu_commands *c, void *arg)
{
    append_case *a = arg;
    return nu_op_kv_append(c, a->cache, a->src, a->position);
}

/* kv_append into every cache dtype from every src dtype (a transposed view too): the rows written
 * hold src's values rounded to the cache's dtype (exactly), the others keep their bytes; then a
 * decode step: append the new token's k and v at position p, attention over p + 1 keys. */
static void kv_append_and_a_decode_step(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 4;
    const int64_t P = 40, H = 2, D = 64;
    int i = 0;
    for (int cd = 0; cd < 3; cd++)
        for (int sd = 0; sd < 3; sd++, i++) {
            int64_t T = 1 + i % 5;
            uint32_t pos = (uint32_t)(i * 3 % (int)(P - T));
            int64_t cs[3] = {P, H, D}, ss[3] = {T, H, D}, sts[3] = {H, T, D};
            nt_tensor cache = nt_tensor_random(d, floats[cd], 3, cs, (uint64_t)(i % 2), -1, 1, &seed);
            nt_tensor src;
            nu_tensor sv;
            float *want_src;
            if (i % 4 == 3) { /* a transposed src: stored [H, T, D] */
                src = nt_tensor_random(d, floats[sd], 3, sts, 1, -1, 1, &seed);
                NT_OK(nu_tensor_transpose(&src.t, 0, 1, &sv));
            } else {
                src = nt_tensor_random(d, floats[sd], 3, ss, 0, -1, 1, &seed);
                sv = src.t;
            }
            want_src = nt_tensor_values_new(&src, &sv);
            float *before = malloc((size_t)(P * H * D) * sizeof *before);
            memcpy(before, cache.values, (size_t)(P * H * D) * sizeof *before);
            append_case a = {&cache.t, &sv, pos};
            nt_run(d, record_append, &a);
            nt_tensor_download(&cache);
            for (int64_t e = 0; e < P * H * D; e++) {
                int64_t row = e / (H * D);
                float want = row >= pos && row < pos + T ? nt_round_to(floats[cd], want_src[(row - pos) * H * D + e % (H * D)])
                                                         : before[e];
                if (memcmp(&want, &cache.values[e], sizeof want))
                    fail_msg("kv_append %s <- %s at %u (%lld tokens): element %lld is %.9g, expected %.9g",
                             nu_dtype_name(floats[cd]), nu_dtype_name(floats[sd]), pos, (long long)T, (long long)e,
                             (double)cache.values[e], (double)want);
            }
            free(want_src);
            free(before);
            nt_tensor_free(&cache);
            nt_tensor_free(&src);
        }

    /* A decode step: caches of 600 positions, 500 already there, token 500's k and v appended. */
    const int64_t P2 = 600, hkv = 2, hq = 8, D2 = 128;
    uint32_t p = 500;
    int64_t cs[3] = {P2, hkv, D2}, ts[3] = {1, hkv, D2}, qs[3] = {1, hq, D2};
    nt_tensor kc = nt_tensor_random(d, NU_DTYPE_F16, 3, cs, 0, -1, 1, &seed);
    nt_tensor vc = nt_tensor_random(d, NU_DTYPE_F16, 3, cs, 0, -1, 1, &seed);
    nt_tensor kn = nt_tensor_random(d, NU_DTYPE_F32, 3, ts, 0, -1, 1, &seed);
    nt_tensor vn = nt_tensor_random(d, NU_DTYPE_F32, 3, ts, 0, -1, 1, &seed);
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_kv_append(c, &kc.t, &kn.t, p));
    NT_OK(nu_op_kv_append(c, &vc.t, &vn.t, p));
    nu_attention_desc desc = {.causal = true, .q_position = p, .kv_length = p + 1};
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &kc.t, &vc.t, &desc));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_download(&dst);
    for (int64_t e = 0; e < hkv * D2; e++) {
        kc.values[p * hkv * D2 + e] = nt_round_to(NU_DTYPE_F16, kn.values[e]);
        vc.values[p * hkv * D2 + e] = nt_round_to(NU_DTYPE_F16, vn.values[e]);
    }
    nt_attn ref = {q.values, kc.values, vc.values, 1, hq, hkv, D2, 1, P2, &desc, NULL, NULL};
    nt_expect_attention(&dst, &ref, "decode step after kv_append");
    nt_tensor_free(&kc);
    nt_tensor_free(&vc);
    nt_tensor_free(&kn);
    nt_tensor_free(&vn);
    nt_tensor_free(&q);
    nt_tensor_free(&dst);
    nt_close(d);
}

typedef struct append_rope_case {
    const nu_tensor *cache, *src;
    uint32_t position;
    const nu_rope_desc *rope;
    const nu_tensor *tmp; /* the two-op version: nu_op_rope into tmp, then nu_op_kv_append (NULL: fused) */
} append_rope_case;

static nu_status record_append_rope(nu_commands *c, void *arg)
{
    append_rope_case *a = arg;
    if (!a->tmp)
        return nu_op_kv_append_rope(c, a->cache, a->src, a->position, a->rope);
    nu_rope_desc rd = *a->rope;
    rd.position_offset = (int32_t)a->position;
    nu_status st = nu_op_rope(c, a->tmp, a->src, &rd);
    return st == NU_OK ? nu_op_kv_append(c, a->cache, a->tmp, a->position) : st;
}

/* kv_append_rope against the float64 reference (nu_op_rope's bound before the cache's rounding)
 * for both layouts, rotary_dims below head_dim, every cache and src dtype, 1 to 5 tokens at
 * positions past 0 (to 3000), head dims 8 to 128 (and 10), a transposed src, workgroups of 64
 * (the default), 32 and 1024 threads (rope.tune.local): the rows written hold
 * rope(src), the other rows keep their bytes; and the whole cache bit-equal to nu_op_rope (into a
 * tensor of the cache's dtype, so that it rounds once, as the fused op does) then
 * nu_op_kv_append. */
static void kv_append_rope_matches_rope_then_append(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 21;
    typedef struct {
        int64_t T, H, D, P;
        uint32_t pos, rotary;
        nu_rope_layout layout;
        float theta;
    } kr_case;
    const kr_case cases[] = {
        {1, 8, 128, 64, 37, 0, NU_ROPE_INTERLEAVED, 0},    {1, 8, 128, 64, 63, 0, NU_ROPE_HALF, 0},
        {3, 2, 64, 50, 20, 32, NU_ROPE_INTERLEAVED, 0},    {3, 2, 64, 50, 47, 48, NU_ROPE_HALF, 500000.0f},
        {5, 4, 16, 3100, 3000, 0, NU_ROPE_HALF, 0},        {2, 3, 8, 20, 1, 4, NU_ROPE_INTERLEAVED, 0},
        {4, 2, 10, 12, 8, 6, NU_ROPE_HALF, 100.0f},        {1, 32, 128, 2, 1, 64, NU_ROPE_HALF, 0},
        {2, 1, 32, 9, 7, 0, NU_ROPE_INTERLEAVED, 1000.0f},
    };
    int i = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int cd = 0; cd < 3; cd++, i++) {
            const kr_case *k = &cases[ci];
            nu_dtype sd = floats[(ci + (size_t)cd) % 3];
            int64_t cs[3] = {k->P, k->H, k->D}, ss[3] = {k->T, k->H, k->D}, sts[3] = {k->H, k->T, k->D};
            nt_tensor cache = nt_tensor_random(d, floats[cd], 3, cs, 0, -1, 1, &seed);
            nt_tensor cache2 = nt_tensor_output(d, floats[cd], 3, cs, 0);
            NT_OK(nu_buffer_write(cache2.t.buffer, 0, cache.bytes, cache.size)); /* the same bytes */
            nt_tensor tmp = nt_tensor_output(d, floats[cd], 3, ss, 0);
            nt_tensor src;
            nu_tensor sv;
            if (i % 4 == 3) { /* a transposed src: stored [H, T, D] */
                src = nt_tensor_random(d, sd, 3, sts, 1, -1, 1, &seed);
                NT_OK(nu_tensor_transpose(&src.t, 0, 1, &sv));
            } else {
                src = nt_tensor_random(d, sd, 3, ss, (uint64_t)(i % 2), -1, 1, &seed);
                sv = src.t;
            }
            float *x = nt_tensor_values_new(&src, &sv);
            size_t n = (size_t)(k->P * k->H * k->D), row = (size_t)(k->H * k->D);
            float *before = malloc(n * sizeof *before);
            memcpy(before, cache.values, n * sizeof *before);
            double *y = malloc((size_t)k->T * row * sizeof *y);
            static const uint32_t locals[3] = {0, 32, 1024}; /* the default 64, and others */
            nu_rope_desc rd = {.layout = k->layout, .theta = k->theta, .rotary_dims = k->rotary, .tune.local = locals[i % 3]};
            int32_t *rp = malloc((size_t)k->T * sizeof *rp);
            for (int64_t t = 0; t < k->T; t++)
                rp[t] = (int32_t)(k->pos + (uint32_t)t);
            double amax = nt_rope_ref(x, y, k->T, k->H, k->D, rp, &rd, NULL);
            free(rp);
            append_rope_case a = {&cache.t, &sv, k->pos, &rd, NULL};
            nt_run(d, record_append_rope, &a);
            nt_tensor_download(&cache);
            double atol = nt_rope_tol(amax, &rd), rel = 2 * nt_dtype_tolerance(floats[cd]);
            for (size_t e = 0; e < n; e++) {
                size_t r = e / row;
                if (r < k->pos || r >= k->pos + (size_t)k->T) {
                    if (memcmp(&before[e], &cache.values[e], sizeof before[e]))
                        fail_msg("kv_append_rope case %zu: element %zu (row %zu, not appended) changed from %.9g to %.9g",
                                 ci, e, r, (double)before[e], (double)cache.values[e]);
                    continue;
                }
                double want = y[e - (size_t)k->pos * row];
                float got = cache.values[e];
                if (!(fabs((double)got - want) <= atol + rel * fabs(want)))
                    fail_msg("kv_append_rope case %zu (%s cache, %s src, %s, rotary %u of %lld, position %u): element %zu "
                             "is %.9g, expected %.9g", ci, nu_dtype_name(floats[cd]), nu_dtype_name(sd),
                             k->layout == NU_ROPE_HALF ? "half" : "interleaved", k->rotary, (long long)k->D, k->pos, e,
                             (double)got, want);
            }
            /* The two ops, into a cache that held the same bytes: the same bytes after. */
            append_rope_case two = {&cache2.t, &sv, k->pos, &rd, &tmp.t};
            nt_run(d, record_append_rope, &two);
            nt_tensor_download(&cache2);
            if (cache.size != cache2.size || memcmp(cache.bytes, cache2.bytes, cache.size))
                for (size_t e = 0; e < n; e++)
                    if (memcmp(&cache.values[e], &cache2.values[e], sizeof cache.values[e]))
                        fail_msg("kv_append_rope case %zu (%s cache, %s src): element %zu is %.9g, nu_op_rope then "
                                 "nu_op_kv_append gave %.9g", ci, nu_dtype_name(floats[cd]), nu_dtype_name(sd), e,
                                 (double)cache.values[e], (double)cache2.values[e]);
            free(x);
            free(y);
            free(before);
            nt_tensor_free(&cache);
            nt_tensor_free(&cache2);
            nt_tensor_free(&tmp);
            nt_tensor_free(&src);
        }
    nt_close(d);
}

/* kv_append_rope's refusals, each with its message: a NULL desc, positions, an offset, an odd
 * head_dim, rotary_dims odd or past head_dim, an unknown layout, a bad theta, and what kv_append
 * refuses (overflow, heads, rank, a strided cache, overlap, NULLs). */
static void kv_append_rope_refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 22;
    int64_t cs[3] = {16, 2, 64}, ss[3] = {3, 2, 64}, sh[3] = {3, 3, 64}, c9[3] = {16, 2, 9}, s9[3] = {1, 2, 9};
    int64_t k2d[2] = {16, 128};
    nt_tensor cache = nt_tensor_random(d, NU_DTYPE_F16, 3, cs, 0, -1, 1, &seed);
    nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, ss, 0, -1, 1, &seed);
    nt_tensor srch = nt_tensor_random(d, NU_DTYPE_F32, 3, sh, 0, -1, 1, &seed);
    nt_tensor cache9 = nt_tensor_random(d, NU_DTYPE_F32, 3, c9, 0, -1, 1, &seed);
    nt_tensor src9 = nt_tensor_random(d, NU_DTYPE_F32, 3, s9, 0, -1, 1, &seed);
    nt_tensor pos = nt_tensor_i32(d, (const int32_t[3]){0, 1, 2}, 3, 0, 1);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_rope_desc ok = {.layout = NU_ROPE_HALF};
    NT_OK(nu_op_kv_append_rope(c, &cache.t, &src.t, 13, &ok)); /* rows 13..15: fits */
    struct {
        nu_rope_desc rd;
        const char *msg;
    } bad[] = {
        {{.layout = NU_ROPE_HALF, .positions = &pos.t}, "positions"},
        {{.layout = NU_ROPE_HALF, .position_offset = 5}, "position_offset"},
        {{.layout = NU_ROPE_HALF, .rotary_dims = 63}, "rotary_dims"},
        {{.layout = NU_ROPE_HALF, .rotary_dims = 66}, "rotary_dims"},
        {{.layout = (nu_rope_layout)7}, "layout"},
        {{.layout = NU_ROPE_INTERLEAVED, .theta = -1.0f}, "theta"},
        {{.layout = NU_ROPE_INTERLEAVED, .theta = NAN}, "theta"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &src.t, 0, &bad[i].rd));
        if (!strstr(nu_error_message(d), bad[i].msg) || !strstr(nu_error_message(d), "nu_op_kv_append_rope"))
            fail_msg("refusal %zu: the message '%s' does not name %s", i, nu_error_message(d), bad[i].msg);
    }
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &src.t, 0, NULL));
    assert_non_null(strstr(nu_error_message(d), "NULL rope"));
    nu_rope_desc local48 = {.layout = NU_ROPE_HALF, .tune.local = 48};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &src.t, 0, &local48));
    assert_non_null(strstr(nu_error_message(d), "tune.local"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache9.t, &src9.t, 0, &ok));
    assert_non_null(strstr(nu_error_message(d), "odd"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &src.t, 14, &ok));
    assert_non_null(strstr(nu_error_message(d), "overflow"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &src.t, 0xffffffffu, &ok));
    assert_non_null(strstr(nu_error_message(d), "overflow"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &srch.t, 0, &ok));
    assert_non_null(strstr(nu_error_message(d), "heads"));
    nu_tensor kt;
    NT_OK(nu_tensor_transpose(&cache.t, 0, 1, &kt));
    int64_t s2[3] = {1, 16, 64};
    nt_tensor src2 = nt_tensor_random(d, NU_DTYPE_F32, 3, s2, 0, -1, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &kt, &src2.t, 0, &ok));
    assert_non_null(strstr(nu_error_message(d), "contiguous"));
    nu_tensor over = nu_tensor_make(cache.t.buffer, 0, NU_DTYPE_F16, 3, ss);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &over, 5, &ok));
    assert_non_null(strstr(nu_error_message(d), "overlaps"));
    nu_tensor k2 = nu_tensor_make(cache.t.buffer, 0, NU_DTYPE_F16, 2, k2d);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &k2, &src.t, 0, &ok));
    assert_non_null(strstr(nu_error_message(d), "rank"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, NULL, 0, &ok));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(NULL, &cache.t, &src.t, 0, &ok));
    /* No tokens: nothing recorded, but the desc is still checked. */
    int64_t s0[3] = {0, 2, 64};
    nu_tensor empty = nu_tensor_make(src.t.buffer, 0, NU_DTYPE_F32, 3, s0);
    NT_OK(nu_op_kv_append_rope(c, &cache.t, &empty, 16, &ok));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append_rope(c, &cache.t, &empty, 16, &bad[1].rd));
    nu_commands_free(c);
    nt_tensor_free(&cache);
    nt_tensor_free(&src);
    nt_tensor_free(&srch);
    nt_tensor_free(&cache9);
    nt_tensor_free(&src9);
    nt_tensor_free(&src2);
    nt_tensor_free(&pos);
    nt_close(d);
}

/* kv_append's refusals: overflow, heads that differ, a strided cache, NULLs, overlap, a rank-4
 * cache (the scalar form takes a slot's rank-3 view). */
static void kv_append_refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 6;
    int64_t ks[3] = {16, 2, 64}, k2d[2] = {16, 128}, k4[4] = {2, 8, 2, 64};
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    int64_t s3[3] = {3, 2, 64}, s3h[3] = {3, 3, 64};
    nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, s3, 0, -1, 1, &seed);
    nt_tensor srch = nt_tensor_random(d, NU_DTYPE_F32, 3, s3h, 0, -1, 1, &seed);
    NT_OK(nu_op_kv_append(c, &k.t, &src.t, 13)); /* rows 13..15: fits */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k.t, &src.t, 14));
    assert_non_null(strstr(nu_error_message(NULL), "overflow"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k.t, &src.t, 0xffffffffu));
    assert_non_null(strstr(nu_error_message(NULL), "overflow"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k.t, &srch.t, 0));
    assert_non_null(strstr(nu_error_message(NULL), "heads"));
    nu_tensor kt;
    NT_OK(nu_tensor_transpose(&k.t, 0, 1, &kt));
    int64_t s2[3] = {1, 16, 64};
    nt_tensor src2 = nt_tensor_random(d, NU_DTYPE_F32, 3, s2, 0, -1, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &kt, &src2.t, 0));
    assert_non_null(strstr(nu_error_message(NULL), "contiguous"));
    nu_tensor over = nu_tensor_make(k.t.buffer, 0, NU_DTYPE_F16, 3, s3);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k.t, &over, 5));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k.t, NULL, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(NULL, &k.t, &src.t, 0));
    nu_tensor k2s = nu_tensor_make(k.t.buffer, 0, NU_DTYPE_F16, 2, k2d);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k2s, &src.t, 0));
    assert_non_null(strstr(nu_error_message(NULL), "rank"));
    nu_tensor k4s = nu_tensor_make(k.t.buffer, 0, NU_DTYPE_F16, 4, k4);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_append(c, &k4s, &src.t, 0));
    assert_non_null(strstr(nu_error_message(NULL), "rank 4"));
    nu_commands_free(c);
    nt_tensor_free(&k);
    nt_tensor_free(&src);
    nt_tensor_free(&srch);
    nt_tensor_free(&src2);
    nt_close(d);
}

/* ---- nu_op_kv_write: the per-row form --------------------------------------------------- */

typedef struct write_case {
    const nu_tensor *cache, *src;
    nu_kv_write_desc desc;
    const nu_tensor *tmp; /* the two-op version: nu_op_rope into tmp with the rows' positions, then the plain write */
} write_case;

static nu_status record_write(nu_commands *c, void *arg)
{
    write_case *a = arg;
    if (!a->tmp)
        return nu_op_kv_write(c, a->cache, a->src, &a->desc);
    nu_rope_desc rd = *a->desc.rope;
    rd.positions = a->desc.positions;
    nu_kv_write_desc plain = {a->desc.positions, a->desc.slots, NULL};
    nu_status st = nu_op_rope(c, a->tmp, a->src, &rd);
    return st == NU_OK ? nu_op_kv_write(c, a->cache, a->tmp, &plain) : st;
}

/* Rows into caches of 1 to 3 slots (rank 3 and 4) at their positions and slots, against the
 * reference: every dtype pair, without RoPE (exact: src rounded to the cache's dtype) and with it
 * (both layouts, rotary_dims below head_dim, linear and per-pair frequency scaling, LongRoPE's
 * attention factor: nu_op_rope's bound before the cache's rounding, and bit-equal to nu_op_rope
 * with the same positions tensor then the plain write); rows out of range (positions -1 and P,
 * slots -1 and S) write nothing; cells no row names keep their bytes; strided positions and
 * slots views, a transposed src, slots NULL (slot 0). */
static void kv_write_matches_the_reference(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 31;
    typedef struct {
        int64_t S, P, H, D, T; /* S 0: a rank-3 cache */
        int rope;              /* 0 none, 1 interleaved, 2 half */
        uint32_t rotary;
        float linear, attn;
        bool ff, slots;
    } wc;
    const wc cases[] = {
        {3, 40, 2, 64, 6, 0, 0, 0, 0, false, true},  {0, 20, 4, 16, 5, 0, 0, 0, 0, false, false},
        {3, 40, 2, 64, 6, 1, 0, 0, 0, false, true},  {2, 30, 3, 32, 7, 2, 16, 0, 0, false, true},
        {3, 50, 2, 128, 4, 2, 0, 8, 0, true, true},  {1, 25, 2, 80, 5, 1, 64, 1.5f, 1.19f, true, true},
        {2, 33, 1, 256, 3, 2, 0, 0, 1.19f, false, false},
    };
    int i = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int cd = 0; cd < 3; cd++, i++) {
            const wc *w = &cases[ci];
            int64_t S = w->S ? w->S : 1, P = w->P, H = w->H, D = w->D, T = w->T;
            nu_dtype sd = floats[(ci + (size_t)cd + 1) % 3];
            int64_t cs4[4] = {S, P, H, D}, ss[3] = {T, H, D}, sts[3] = {H, T, D};
            uint32_t crank = w->S ? 4 : 3;
            const int64_t *cs = w->S ? cs4 : cs4 + 1;
            nt_tensor cache = nt_tensor_random(d, floats[cd], crank, cs, (uint64_t)(i % 2) * 8, -1, 1, &seed);
            nt_tensor cache2 = nt_tensor_output(d, floats[cd], crank, cs, (uint64_t)(i % 2) * 8);
            NT_OK(nu_buffer_write(cache2.t.buffer, 0, cache.bytes, cache.size));
            nt_tensor tmp = nt_tensor_output(d, floats[cd], 3, ss, 0);
            nt_tensor src;
            nu_tensor sv;
            if (i % 4 == 3) {
                src = nt_tensor_random(d, sd, 3, sts, 1, -1, 1, &seed);
                NT_OK(nu_tensor_transpose(&src.t, 0, 1, &sv));
            } else {
                src = nt_tensor_random(d, sd, 3, ss, (uint64_t)(i % 3), -1, 1, &seed);
                sv = src.t;
            }
            float *x = nt_tensor_values_new(&src, &sv);
            /* Positions: distinct cells, two rows out of range (-1; P with slots, the last slot + 1 without). */
            int32_t pos[8], slot[8];
            for (int64_t r = 0; r < T; r++) {
                slot[r] = (int32_t)(r % S);
                pos[r] = (int32_t)((r * 7 + i) % P);
                for (int64_t q = 0; q < r; q++)
                    if (slot[q] == slot[r] && pos[q] == pos[r])
                        pos[r] = (pos[r] + 1) % (int32_t)P, q = -1; /* next free cell */
            }
            pos[1] = -1;
            if (w->slots)
                slot[T - 1] = (int32_t)S; /* past the slots */
            else
                pos[T - 1] = (int32_t)P; /* past the positions */
            if (w->slots && T > 4)
                slot[3] = -1;
            nt_tensor pt = nt_tensor_i32(d, pos, T, (uint64_t)(i % 2), i % 3 == 2 ? 2 : 1);
            nt_tensor st = nt_tensor_i32(d, slot, T, 1, i % 2 ? 3 : 1);
            float ffv[128];
            int64_t rot = w->rotary ? w->rotary : D;
            for (int64_t e = 0; e < rot / 2; e++)
                ffv[e] = (float)(1.0 + (double)(e % 5) * 0.75);
            nt_tensor ff = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){rot / 2}, 0, 1, 2, &seed);
            NT_OK(nu_buffer_write(ff.t.buffer, ff.t.offset, ffv, (size_t)(rot / 2) * 4));
            nu_rope_desc rd = {.layout = w->rope == 2 ? NU_ROPE_HALF : NU_ROPE_INTERLEAVED, .rotary_dims = w->rotary,
                               .linear_factor = w->linear, .attn_factor = w->attn, .freq_factors = w->ff ? &ff.t : NULL,
                               .tune.local = i % 3 == 1 ? 128 : 0};
            write_case a = {&cache.t, &sv, {&pt.t, w->slots ? &st.t : NULL, w->rope ? &rd : NULL}, NULL};
            size_t row = (size_t)(H * D), n = (size_t)(S * P) * row;
            float *before = malloc(n * sizeof *before);
            memcpy(before, cache.values, n * sizeof *before);
            double *y = malloc((size_t)T * row * sizeof *y);
            double amax = 0;
            if (w->rope)
                amax = nt_rope_ref(x, y, T, H, D, pos, &rd, w->ff ? ffv : NULL);
            else
                for (size_t e = 0; e < (size_t)T * row; e++)
                    y[e] = x[e];
            nt_run(d, record_write, &a);
            nt_tensor_download(&cache);
            /* Each cell's row (-1: none), from the rows in range. */
            int64_t *owner = malloc((size_t)(S * P) * sizeof *owner);
            for (int64_t cell = 0; cell < S * P; cell++)
                owner[cell] = -1;
            for (int64_t r = 0; r < T; r++) {
                int64_t sl = w->slots ? slot[r] : 0;
                if (pos[r] >= 0 && pos[r] < P && sl >= 0 && sl < S)
                    owner[sl * P + pos[r]] = r;
            }
            double atol = w->rope ? nt_rope_tol(amax, &rd) : 0, rel = w->rope ? 2 * nt_dtype_tolerance(floats[cd]) : 0;
            for (size_t e = 0; e < n; e++) {
                int64_t r = owner[e / row];
                if (r < 0) {
                    if (memcmp(&before[e], &cache.values[e], sizeof before[e]))
                        fail_msg("kv_write case %zu: element %zu (cell %zu, no row's) changed from %.9g to %.9g", ci, e,
                                 e / row, (double)before[e], (double)cache.values[e]);
                    continue;
                }
                double want = y[(size_t)r * row + e % row];
                float got = cache.values[e];
                bool ok = w->rope ? fabs((double)got - want) <= atol + rel * fabs(want)
                                  : got == nt_round_to(floats[cd], (float)want);
                if (!ok)
                    fail_msg("kv_write case %zu (%s cache, %s src, rope %d): cell %zu (row %lld) element %zu is %.9g, "
                             "expected %.9g", ci, nu_dtype_name(floats[cd]), nu_dtype_name(sd), w->rope, e / row,
                             (long long)r, e % row, (double)got, want);
            }
            if (w->rope) { /* nu_op_rope with the same positions, then the plain write: the same bytes */
                write_case two = a;
                two.cache = &cache2.t;
                two.tmp = &tmp.t;
                nt_run(d, record_write, &two);
                nt_tensor_download(&cache2);
                if (memcmp(cache.bytes, cache2.bytes, cache.size))
                    fail_msg("kv_write case %zu (%s cache): the cache differs from nu_op_rope then nu_op_kv_write's", ci,
                             nu_dtype_name(floats[cd]));
            }
            free(owner);
            free(before);
            free(y);
            free(x);
            nt_tensor_free(&cache);
            nt_tensor_free(&cache2);
            nt_tensor_free(&tmp);
            nt_tensor_free(&src);
            nt_tensor_free(&pt);
            nt_tensor_free(&st);
            nt_tensor_free(&ff);
        }
    nt_close(d);
}

/* Where both forms apply (one slot, rows at p, p + 1, ..), nu_op_kv_write leaves the bytes
 * nu_op_kv_append and nu_op_kv_append_rope leave. */
static void kv_write_equals_the_scalar_form(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 32;
    for (int rope = 0; rope < 3; rope++) {
        int64_t cs[3] = {30, 2, 64}, ss[3] = {4, 2, 64};
        nt_tensor c1 = nt_tensor_random(d, NU_DTYPE_F16, 3, cs, 0, -1, 1, &seed);
        nt_tensor c2 = nt_tensor_output(d, NU_DTYPE_F16, 3, cs, 0);
        NT_OK(nu_buffer_write(c2.t.buffer, 0, c1.bytes, c1.size));
        nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, ss, 0, -1, 1, &seed);
        uint32_t p = 21 + (uint32_t)rope;
        int32_t pos[4] = {(int32_t)p, (int32_t)p + 1, (int32_t)p + 2, (int32_t)p + 3};
        nt_tensor pt = nt_tensor_i32(d, pos, 4, 0, 1);
        nu_rope_desc rd = {.layout = rope == 2 ? NU_ROPE_HALF : NU_ROPE_INTERLEAVED, .theta = 500000.0f};
        nu_commands *c;
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        if (rope)
            NT_OK(nu_op_kv_append_rope(c, &c1.t, &src.t, p, &rd));
        else
            NT_OK(nu_op_kv_append(c, &c1.t, &src.t, p));
        nu_kv_write_desc wd = {.positions = &pt.t, .rope = rope ? &rd : NULL};
        NT_OK(nu_op_kv_write(c, &c2.t, &src.t, &wd));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        nu_commands_free(c);
        nt_tensor_download(&c1);
        nt_tensor_download(&c2);
        assert_memory_equal(c1.bytes, c2.bytes, c1.size);
        nt_tensor_free(&c1);
        nt_tensor_free(&c2);
        nt_tensor_free(&src);
        nt_tensor_free(&pt);
    }
    nt_close(d);
}

/* nu_op_kv_write's refusals, each with its message. */
static void kv_write_refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 33;
    int64_t cs[4] = {2, 16, 2, 64}, ss[3] = {3, 2, 64}, sh[3] = {3, 3, 64}, c2d[2] = {32, 128};
    nt_tensor cache = nt_tensor_random(d, NU_DTYPE_F16, 4, cs, 0, -1, 1, &seed);
    nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, ss, 0, -1, 1, &seed);
    nt_tensor srch = nt_tensor_random(d, NU_DTYPE_F32, 3, sh, 0, -1, 1, &seed);
    int32_t p3[4] = {0, 5, 9, 2};
    nt_tensor pos = nt_tensor_i32(d, p3, 3, 0, 1), pos4 = nt_tensor_i32(d, p3, 4, 0, 1);
    nt_tensor posf = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){3}, 0, 0, 3, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_rope_desc rd = {.layout = NU_ROPE_HALF};
    nu_kv_write_desc ok = {.positions = &pos.t, .slots = &pos.t, .rope = &rd};
    NT_OK(nu_op_kv_write(c, &cache.t, &src.t, &ok));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &src.t, NULL));
    assert_non_null(strstr(nu_error_message(d), "NULL desc"));
    nu_kv_write_desc nopos = {.slots = &pos.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &src.t, &nopos));
    assert_non_null(strstr(nu_error_message(d), "NULL positions"));
    nu_rope_desc with_pos = {.positions = &pos.t}, with_off = {.position_offset = 2}, local = {.tune.local = 100};
    nu_rope_desc bad_ff = {.freq_factors = &posf.t};
    struct {
        nu_kv_write_desc wd;
        const char *msg;
    } bad[] = {
        {{.positions = &posf.t}, "positions"},          {{.positions = &pos4.t}, "positions must be I32 [3]"},
        {{.positions = &pos.t, .slots = &pos4.t}, "slots must be I32 [3]"},
        {{.positions = &pos.t, .rope = &with_pos}, "rope->positions"},
        {{.positions = &pos.t, .rope = &with_off}, "position_offset"},
        {{.positions = &pos.t, .rope = &local}, "tune.local"},
        {{.positions = &pos.t, .rope = &bad_ff}, "freq_factors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &src.t, &bad[i].wd));
        if (!strstr(nu_error_message(d), bad[i].msg) || !strstr(nu_error_message(d), "nu_op_kv_write"))
            fail_msg("refusal %zu: the message '%s' does not name %s", i, nu_error_message(d), bad[i].msg);
    }
    nu_kv_write_desc plain = {.positions = &pos.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &srch.t, &plain));
    assert_non_null(strstr(nu_error_message(d), "heads"));
    nu_tensor c2 = nu_tensor_make(cache.t.buffer, 0, NU_DTYPE_F16, 2, c2d);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &c2, &src.t, &plain));
    assert_non_null(strstr(nu_error_message(d), "rank"));
    nu_tensor ct;
    NT_OK(nu_tensor_transpose(&cache.t, 1, 2, &ct));
    int64_t s16[3] = {3, 16, 64};
    nt_tensor src16 = nt_tensor_random(d, NU_DTYPE_F32, 3, s16, 0, -1, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &ct, &src16.t, &plain));
    assert_non_null(strstr(nu_error_message(d), "contiguous"));
    /* The cache over src, over the positions. */
    nu_tensor over = nu_tensor_make(cache.t.buffer, 0, NU_DTYPE_F16, 3, ss);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &over, &plain));
    assert_non_null(strstr(nu_error_message(d), "overlaps"));
    nu_tensor pover = nu_tensor_make(cache.t.buffer, 64, NU_DTYPE_I32, 1, (int64_t[1]){3});
    nu_kv_write_desc povd = {.positions = &pover};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &src.t, &povd));
    assert_non_null(strstr(nu_error_message(d), "overlaps positions"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(NULL, &cache.t, &src.t, &plain));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, NULL, &plain));
    /* No rows: nothing recorded, the desc still checked. */
    nu_tensor none, none_pos;
    NT_OK(nu_tensor_slice(&src.t, 0, 0, 0, &none));
    NT_OK(nu_tensor_slice(&pos.t, 0, 0, 0, &none_pos));
    nu_kv_write_desc empty = {.positions = &none_pos, .rope = &rd}, empty_bad = {.positions = &none_pos, .rope = &with_off};
    NT_OK(nu_op_kv_write(c, &cache.t, &none, &empty));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_kv_write(c, &cache.t, &none, &empty_bad));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_free(&cache);
    nt_tensor_free(&src);
    nt_tensor_free(&srch);
    nt_tensor_free(&src16);
    nt_tensor_free(&pos);
    nt_tensor_free(&pos4);
    nt_tensor_free(&posf);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_append_and_a_decode_step),
        cmocka_unit_test(kv_append_rope_matches_rope_then_append),
        cmocka_unit_test(kv_append_rope_refusals),
        cmocka_unit_test(kv_append_refusals),
        cmocka_unit_test(kv_write_matches_the_reference),
        cmocka_unit_test(kv_write_equals_the_scalar_form),
        cmocka_unit_test(kv_write_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
