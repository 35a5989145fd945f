/* test_ops_attention.c: nu_op_attention (src/ops/attention.c, kernels/attention/),
 * nu_op_kv_append and nu_op_kv_append_rope against a float64 CPU reference: the decode path (one
 * split written straight to dst, and split keys merged by the last split to finish or by
 * attn_combine.comp, with kv_length not a multiple of the split and splits that see no key; in
 * graphs whose launches change kv_length, so that the merge's counters must be back at zero after
 * each) and the prefill path, GQA ratios 1, 4 and 8, head dims 8 to 128,
 * causal on and off with q_position offsets, every float dtype for q, k, v and dst, the default
 * and explicit scales, strided, sliced, transposed and unaligned views, the NUVEC_ATTENTION knobs,
 * a decode step reading what kv_append wrote, the partials' temporary buffer outliving its free,
 * kv_append_rope against the reference and bit-equal to nu_op_rope then nu_op_kv_append, and what
 * the ops refuse.
 *
 * Tolerance: tests/attn_ref.h's (float64 reference, 2^-13 of max |v| plus dst's rounding). The
 * kernels' choices are made through desc.tune (nu_attention_tune); NUVEC_ATTENTION, the
 * developer override, is tried on devices opened after it is set (refuses_bad_tensors). */
#include "attn_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

/* Checks dst (downloaded) against the reference: qv [T, Hq, D], kv and vv [P, Hkv, D] row-major
 * (the scalar form, one slot: P at least desc->kv_length). */
static void expect_attention(const nt_tensor *dst, const float *qv, const float *kv, const float *vv, int64_t T,
                             int64_t hq, int64_t hkv, int64_t D, const nu_attention_desc *desc, const char *what)
{
    nt_attn a = {qv, kv, vv, T, hq, hkv, D, 1, desc->kv_length, desc, NULL, NULL};
    nt_expect_attention(dst, &a, what);
}

static void run_check(nu_device *d, nt_tensor *dst, const nu_tensor *q, const float *qv, const nu_tensor *k,
                      const float *kv, const nu_tensor *v, const float *vv, const nu_attention_desc *desc, const char *what)
{
    nt_attn_call a = {&dst->t, q, k, v, desc};
    nt_run(d, nt_record_attention, &a);
    nt_tensor_download(dst);
    expect_attention(dst, qv, kv, vv, q->shape[0], q->shape[1], k->shape[1], q->shape[2], desc, what);
}

typedef struct shape_case {
    int64_t tokens, hq, hkv, D, positions;
    uint32_t kv_length, q_position;
    bool causal;
    float scale;
    nu_attention_tune tune;
} shape_case;

/* Contiguous q, k, v of dtypes qd, kd, vd (k and v [positions, hkv, D], the cache), dst of dd. */
static void run_case(nu_device *d, const shape_case *sc, nu_dtype qd, nu_dtype kd, nu_dtype vd, nu_dtype dd,
                     uint64_t *seed)
{
    int64_t qs[3] = {sc->tokens, sc->hq, sc->D}, ks[3] = {sc->positions, sc->hkv, sc->D};
    nt_tensor q = nt_tensor_random(d, qd, 3, qs, 0, -1, 1, seed);
    nt_tensor k = nt_tensor_random(d, kd, 3, ks, 1, -1, 1, seed);
    nt_tensor v = nt_tensor_random(d, vd, 3, ks, 0, -1, 1, seed);
    nt_tensor dst = nt_tensor_output(d, dd, 3, qs, 0);
    nu_attention_desc desc = {.scale = sc->scale, .causal = sc->causal, .q_position = sc->q_position,
                              .kv_length = sc->kv_length, .tune = sc->tune};
    char what[200], tn[120];
    snprintf(what, sizeof what, "%s q, %s k, %s v, %s dst, tune %s", nu_dtype_name(qd), nu_dtype_name(kd),
             nu_dtype_name(vd), nu_dtype_name(dd), nt_attn_tune_name(&sc->tune, tn, sizeof tn));
    run_check(d, &dst, &q.t, q.values, &k.t, k.values, &v.t, v.values, &desc, what);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&dst);
}

/* Decode: 1 to 4 query rows, GQA 1, 4, 8, head dims 64 and 128, one split (kv_length <= 256: dst
 * written directly) and several (kv_length 1000: 4 splits, the last partial; split=7 and 300
 * keys: 43 a split, the last 42; split=64 with 37 keys: empty splits), causal with q_position
 * offsets (row t sees q_position + t + 1 keys) and not, the subgroup kernel (the default where the
 * device has subgroup arithmetic) with other keys in flight and query heads a workgroup, and
 * attn_decode.comp (subgroup=0). */
static void decode_path(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 1;
    const shape_case cases[] = {
        {1, 8, 8, 64, 300, 200, 199, true, 0, {0}},        /* GQA 1, one split */
        {1, 32, 8, 128, 1024, 1000, 999, true, 0, {0}},    /* GQA 4, 4 splits, the last partial */
        {2, 16, 2, 64, 1100, 1001, 999, true, 0, {0}},     /* GQA 8, 2 rows */
        {3, 8, 2, 128, 320, 300, 0, false, 0.15f, {.splits = 7}},
        {4, 4, 4, 128, 64, 37, 33, true, 0.2f, {.splits = 64}}, /* more splits than keys */
        {1, 8, 1, 64, 40, 1, 0, true, 0, {0}},             /* one key */
        {2, 8, 1, 128, 700, 600, 100, true, 0, {.chunk = 100}}, /* causal limits below kv_length */
        /* the subgroup kernel's keys in flight, and attn_decode.comp where the subgroup one is the default */
        {1, 32, 8, 128, 1024, 1000, 999, true, 0, {.no_subgroup = true}},
        {2, 16, 2, 64, 1100, 1001, 999, true, 0, {.keys = 3}},
        {3, 8, 2, 128, 320, 300, 0, false, 0.15f, {.splits = 7, .keys = 1, .no_subgroup = true}},
        {1, 8, 4, 64, 513, 513, 512, true, 0, {.keys = 16}},
        /* query heads a workgroup: 3 does not divide the group of 4 (2 are taken), 8 of 8, 1 */
        {2, 32, 8, 128, 1024, 1000, 990, true, 0, {.heads = 3}},
        {1, 16, 2, 64, 300, 299, 298, true, 0, {.heads = 8, .keys = 5}},
        {1, 16, 2, 128, 300, 299, 298, true, 0, {.heads = 1}},
        /* the splits merged by attn_combine.comp (a second dispatch, the default), and by the last split */
        {1, 32, 8, 128, 1024, 1000, 999, true, 0, {.combine = NU_ATTENTION_COMBINE_SEPARATE}},
        {4, 4, 4, 128, 64, 37, 33, true, 0.2f, {.splits = 64, .combine = NU_ATTENTION_COMBINE_SEPARATE}},
        {3, 8, 2, 128, 320, 300, 0, false, 0.15f, {.splits = 7, .no_subgroup = true, .combine = NU_ATTENTION_COMBINE_SEPARATE}},
        {2, 16, 2, 64, 1100, 1001, 999, true, 0, {.combine = NU_ATTENTION_COMBINE_FUSED, .heads = 8}},
        {1, 32, 8, 128, 1024, 1000, 999, true, 0, {.splits = 9, .combine = NU_ATTENTION_COMBINE_FUSED, .fused_max = 8}}, /* past fused_max: attn_combine */
        {1, 32, 8, 128, 1024, 1000, 999, true, 0, {.splits = 8, .fused_max = 8}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(d, &cases[i], floats[i % 3], floats[(i + 1) % 3], floats[(i / 3 + 2) % 3], floats[(i + 2) % 3], &seed);
    nt_close(d);
}

/* A key a thread (tune.by_key: attn_decode_keys.comp) where k and v are F16 rows contiguous and
 * 16-byte aligned: one split (dst written directly), several merged by attn_combine.comp (the
 * default outside the fresh form) and by the last split, more splits than keys, one key, GQA 1, 4
 * and 8 with the whole group a workgroup or `heads` of it, head dims 64, 128 and 256 (the heads a
 * workgroup cut to fit shared memory), tiles of 128 keys with a partial last one, causal with
 * q_position offsets and not, a window and a softcap, and the default's choice of it (a group of 4
 * over 4096 keys); against the reference, and the kernel seen in the trace. */
static void decode_a_key_a_thread(void **state)
{
    (void)state;
    nu_device *d = nt_open_subgroup_arithmetic("decode_a_key_a_thread");
    uint64_t seed = 77;
    const struct {
        shape_case sc;
        uint32_t window;
        float softcap;
    } cases[] = {
        {{1, 32, 8, 128, 1024, 1000, 999, true, 0, {.by_key = true}}, 0, 0},          /* GQA 4, 4 splits */
        {{1, 8, 8, 64, 300, 200, 199, true, 0, {.by_key = true}}, 0, 0},              /* GQA 1, one split */
        {{2, 16, 2, 64, 1100, 1001, 999, true, 0, {.by_key = true, .heads = 4}}, 0, 0},
        {{3, 8, 2, 128, 320, 300, 0, false, 0.15f, {.by_key = true, .splits = 7}}, 0, 0},
        {{4, 4, 4, 128, 64, 37, 33, true, 0.2f, {.by_key = true, .splits = 64}}, 0, 0}, /* empty splits */
        {{1, 8, 1, 64, 40, 1, 0, true, 0, {.by_key = true}}, 0, 0},                    /* one key */
        {{1, 32, 8, 128, 1024, 1000, 999, true, 0, {.by_key = true, .combine = NU_ATTENTION_COMBINE_FUSED}}, 0, 0},
        {{2, 16, 8, 256, 700, 650, 600, true, 0, {.by_key = true}}, 0, 0},             /* head_dim 256 */
        {{1, 16, 4, 128, 900, 900, 899, true, 0, {.by_key = true, .chunk = 300}}, 100, 0.5f},
        /* peaked scores over many tiles a split: each tile's maximum moves the output's scale */
        {{2, 16, 2, 64, 600, 600, 598, true, 2.0f, {.by_key = true, .splits = 2}}, 0, 0},
        {{1, 16, 4, 128, 800, 777, 776, true, 2.0f, {.by_key = true, .chunk = 200}}, 0, 20.0f},
        {{1, 32, 8, 128, 1024, 1000, 999, true, 3.0f, {.by_key = true, .splits = 1}}, 0, 0},
        /* the default takes it for a group of 4 over 4096 keys (keys_splits: 16 splits of 256) */
        {{1, 32, 8, 128, 4096, 4096, 4095, true, 0, {0}}, 0, 0},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-bykey-%d.json", nt_tmp_dir(), (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const shape_case *sc = &cases[i].sc;
        int64_t qs[3] = {sc->tokens, sc->hq, sc->D}, ks[3] = {sc->positions, sc->hkv, sc->D};
        nt_tensor q = nt_tensor_random(d, floats[i % 3], 3, qs, 0, -1, 1, &seed);
        nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
        nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, floats[(i + 1) % 3], 3, qs, 0);
        nu_attention_desc desc = {.scale = sc->scale, .causal = sc->causal, .q_position = sc->q_position,
                                  .kv_length = sc->kv_length, .window = cases[i].window, .softcap = cases[i].softcap,
                                  .tune = sc->tune};
        char what[200], tn[120];
        snprintf(what, sizeof what, "a key a thread: %s q, F16 k and v, %s dst, window %u, softcap %g, tune %s",
                 nu_dtype_name(q.t.dtype), nu_dtype_name(dst.t.dtype), cases[i].window, (double)cases[i].softcap,
                 nt_attn_tune_name(&sc->tune, tn, sizeof tn));
        NT_OK(nu_trace_start(d, path));
        run_check(d, &dst, &q.t, q.values, &k.t, k.values, &v.t, v.values, &desc, what);
        NT_OK(nu_trace_stop(d));
        if (!nt_trace_has(path, "attn_decode_keys"))
            fail_msg("%s: attn_decode_keys did not run", what);
        nt_tensor_free(&q);
        nt_tensor_free(&k);
        nt_tensor_free(&v);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* Prefill: 5+ rows (row blocks of 16 or 32 with partial last blocks), causal from 0 and as a
 * later chunk of a prompt (q_position 50: rows see 51 .. keys), non-causal, GQA 1, 4, 8, both
 * head dims, other tiles (NUVEC_ATTENTION br=, bc=), and the paths forced against their defaults
 * (decode for 9 rows, prefill for one). */
static void prefill_path(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 2;
    const shape_case cases[] = {
        {37, 8, 8, 128, 37, 37, 0, true, 0, {0}},
        {70, 8, 2, 64, 100, 70, 0, true, 0, {0}},
        {21, 16, 2, 64, 128, 71, 50, true, 0, {0}},   /* a second chunk: q_position 50 */
        {19, 4, 1, 128, 90, 83, 0, false, 0.1f, {0}}, /* not causal, GQA 4 */
        {33, 8, 1, 128, 40, 40, 0, true, 0, {.br = 8, .bc = 5}},
        {9, 8, 2, 64, 50, 30, 21, true, 0, {.path = NU_ATTENTION_PATH_DECODE}},
        {1, 8, 4, 128, 50, 45, 44, true, 0, {.path = NU_ATTENTION_PATH_PREFILL}},
        {6, 4, 4, 64, 20, 20, 14, true, 0, {.path = NU_ATTENTION_PATH_PREFILL, .br = 4, .bc = 3}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(d, &cases[i], floats[(i + 1) % 3], floats[i % 3], floats[(i + 2) % 3], floats[(i / 2) % 3], &seed);
    nt_close(d);
}

/* The small head dims (8, 16, 32: tiny models such as tests/test_llm_model.c's have 8 and 16) on
 * every path: decode with one split and several, the subgroup kernel and attn_decode.comp
 * (subgroup=0), GQA, causal offsets, and prefill with its default tile and a narrow one. */
static void small_head_dims(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 9;
    const int64_t dims[3] = {8, 16, 32};
    for (int i = 0; i < 3; i++) {
        int64_t D = dims[i];
        const shape_case cases[] = {
            {1, 8, 4, D, 128, 100, 99, true, 0, {0}},           /* GQA 2, one split */
            {1, 4, 4, D, 512, 300, 299, true, 0, {0}},          /* 5 splits, combined */
            {2, 8, 2, D, 200, 150, 148, true, 0, {.no_subgroup = true}},  /* attn_decode.comp, 3 splits */
            {3, 4, 1, D, 64, 40, 0, false, 0.2f, {.splits = 3, .keys = 3}},
            {37, 8, 4, D, 64, 37, 0, true, 0, {0}},             /* prefill, default tile */
            {21, 8, 2, D, 128, 71, 50, true, 0, {.br = 16, .bc = 5}},   /* prefill, a later chunk */
        };
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
            run_case(d, &cases[j], floats[j % 3], floats[(j + i) % 3], floats[(j + 1) % 3], floats[(j + 2 * i) % 3], &seed);
    }
    nt_close(d);
}

/* q, k and v as slices of one fused qkv projection output [tokens, hq + 2 hkv, D] (strided token
 * and head dimensions, k's rows still aligned: the vector loads with strides), k stored
 * head-major [hkv, positions, D] and transposed (unaligned: pad 1, the strided loads), on both
 * paths. */
static void strided_and_transposed_views(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 3;
    for (int path = 0; path < 2; path++) {
        int64_t T = path ? 20 : 3, hq = 8, hkv = 2, D = path ? 64 : 128;
        int64_t fs[3] = {T, hq + 2 * hkv, D};
        nt_tensor fused = nt_tensor_random(d, floats[path + 1], 3, fs, 0, -1, 1, &seed);
        nu_tensor q, k, v;
        NT_OK(nu_tensor_slice(&fused.t, 1, 0, hq, &q));
        NT_OK(nu_tensor_slice(&fused.t, 1, hq, hkv, &k));
        NT_OK(nu_tensor_slice(&fused.t, 1, hq + hkv, hkv, &v));
        float *qv = nt_tensor_values_new(&fused, &q), *kv = nt_tensor_values_new(&fused, &k), *vv = nt_tensor_values_new(&fused, &v);
        int64_t ds[3] = {T, hq, D};
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, ds, 1);
        nu_attention_desc desc = {.causal = true, .kv_length = (uint32_t)T, .tune.splits = path ? 0 : 2};
        run_check(d, &dst, &q, qv, &k, kv, &v, vv, &desc, path ? "fused qkv slices, prefill" : "fused qkv slices, decode");
        /* k transposed from [hkv, P, D], unaligned. */
        int64_t P = 77, kts[3] = {hkv, P, D}, vs[3] = {P, hkv, D};
        nt_tensor kt = nt_tensor_random(d, NU_DTYPE_F32, 3, kts, 1, -1, 1, &seed);
        nt_tensor vb = nt_tensor_random(d, NU_DTYPE_BF16, 3, vs, 3, -1, 1, &seed);
        nu_tensor k2;
        NT_OK(nu_tensor_transpose(&kt.t, 0, 1, &k2));
        float *k2v = nt_tensor_values_new(&kt, &k2);
        nu_attention_desc desc2 = {.causal = true, .q_position = (uint32_t)(P - T), .kv_length = (uint32_t)P,
                                   .tune.splits = path ? 0 : 2};
        run_check(d, &dst, &q, qv, &k2, k2v, &vb.t, vb.values, &desc2,
                  path ? "transposed unaligned k, prefill" : "transposed unaligned k, decode");
        free(qv);
        free(kv);
        free(vv);
        free(k2v);
        nt_tensor_free(&fused);
        nt_tensor_free(&kt);
        nt_tensor_free(&vb);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* The split partials' buffer (the command buffer's scratch) is freed at the commit, before the
 * work runs: buffers made and filled after recording (and before the commit) must not get its
 * memory, and the result must still be right; a command buffer freed without a commit must release
 * it too (no leak at close: the harness's allocation count). */
static void partials_outlive_their_free(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 5;
    const int64_t P = 2048, hkv = 4, hq = 16, D = 128;
    int64_t ks[3] = {P, hkv, D}, qs[3] = {1, hq, D};
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F16, 3, qs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nu_attention_desc desc = {.causal = false, .kv_length = (uint32_t)P};
    nu_commands *c, *c2;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &desc)); /* 8 splits: 8 * 16 * 130 floats */
    /* Buffers of the partials' size, filled with NaN bytes before c runs. */
    nu_buffer *other[4];
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c2));
    for (int i = 0; i < 4; i++) {
        NT_OK(nu_buffer_new(d, 8 * 16 * 130 * 4, NU_STORAGE_PRIVATE, &other[i]));
        NT_OK(nu_commands_fill(c2, other[i], 0, 8 * 16 * 130 * 4, 0xffffffffu));
    }
    NT_OK(nu_commands_commit(c2));
    NT_OK(nu_commands_wait(c2, NU_WAIT_FOREVER));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nt_tensor_download(&dst);
    expect_attention(&dst, q.values, k.values, v.values, 1, hq, hkv, D, &desc, "partials freed before the commit");
    nu_commands_free(c);
    nu_commands_free(c2);
    for (int i = 0; i < 4; i++)
        NT_OK(nu_buffer_free(other[i]));
    /* Recorded, never committed. */
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &desc));
    nu_commands_free(c);
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&q);
    nt_tensor_free(&dst);
    nt_close(d);
}

/* The decode path inside a graph (nuvec/graph.h): the partials buffer the op makes is kept by the
 * graph (a command buffer frees it at once), so every launch finds it; each launch's result equals
 * the ordinary command buffer's, bit for bit (the same kernels), also after the inputs change. */
static void decode_inside_a_graph(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 8;
    const int64_t P = 1024, hkv = 2, hq = 8, D = 64;
    int64_t ks[3] = {P, hkv, D}, qs[3] = {1, hq, D};
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nu_attention_desc desc = {.causal = true, .q_position = (uint32_t)P - 1, .kv_length = (uint32_t)P, .tune.splits = 4};
    nu_commands *rec;
    nu_graph *g;
    NT_OK(nu_graph_record(d, &rec));
    NT_OK(nu_op_attention(rec, &dst.t, &q.t, &k.t, &v.t, &desc));
    NT_OK(nu_graph_new(rec, &g));
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* new keys: the next launch reads them */
            nt_tensor_free(&k);
            k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
            NT_OK(nu_graph_free(g));
            NT_OK(nu_graph_record(d, &rec));
            NT_OK(nu_op_attention(rec, &dst.t, &q.t, &k.t, &v.t, &desc));
            NT_OK(nu_graph_new(rec, &g));
        }
        nt_attn_call a = {&dst.t, &q.t, &k.t, &v.t, &desc};
        nt_run(d, nt_record_attention, &a);
        nt_tensor_download(&dst);
        size_t n = (size_t)(hq * D);
        float *plain = malloc(n * sizeof *plain);
        memcpy(plain, dst.values, n * sizeof *plain);
        expect_attention(&dst, q.values, k.values, v.values, 1, hq, hkv, D, &desc, "the command buffer, in a graph test");
        for (int launch = 0; launch < 3; launch++) {
            nu_commands *poison; /* NaN bytes first: the launch must write every output */
            NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &poison));
            NT_OK(nu_commands_fill(poison, dst.t.buffer, 0, nu_buffer_size(dst.t.buffer) / 4 * 4, 0xffffffffu));
            NT_OK(nu_commands_commit(poison));
            NT_OK(nu_commands_wait(poison, NU_WAIT_FOREVER));
            NT_OK(nu_commands_free(poison));
            NT_OK(nu_graph_launch(g));
            NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
            nt_tensor_download(&dst);
            for (size_t i = 0; i < n; i++)
                if (memcmp(&dst.values[i], &plain[i], sizeof *plain))
                    fail_msg("graph launch %d (round %d): dst[%zu] is %.9g, the command buffer's %.9g", launch, round, i,
                             (double)dst.values[i], (double)plain[i]);
        }
        free(plain);
    }
    NT_OK(nu_graph_free(g));
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&q);
    nt_tensor_free(&dst);
    nt_close(d);
}

/* NUVEC_ATTENTION (the developer override) set to `value` before a device is opened (so that it
 * is read whether the environment is read at each call or once a device): nu_op_attention of a
 * small decode step returns `want`, naming `msg`. */
static void env_refusal(const char *value, nu_status want, const char *msg)
{
    assert_int_equal(setenv("NUVEC_ATTENTION", value, 1), 0);
    nu_device *d = nt_open();
    uint64_t seed = 7;
    int64_t qs[3] = {2, 8, 64}, ks[3] = {16, 2, 64};
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nu_attention_desc desc = {.causal = true, .kv_length = 16};
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(want, nu_op_attention(c, &dst.t, &q.t, &k.t, &k.t, &desc));
    if (!strstr(nu_error_message(d), msg))
        fail_msg("NUVEC_ATTENTION=\"%s\": the message '%s' does not name %s", value, nu_error_message(d), msg);
    nu_commands_free(c);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&dst);
    nt_close(d);
    unsetenv("NUVEC_ATTENTION");
}

static void refuses_bad_tensors(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 6;
    int64_t qs[3] = {2, 8, 64}, ks[3] = {16, 2, 64}, k3s[3] = {16, 3, 64}, d12[3] = {2, 8, 12}, k12[3] = {16, 2, 12};
    int64_t bad_ds[3] = {2, 8, 32}, k2d[2] = {16, 128}, vks[3] = {15, 2, 64};
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor k3 = nt_tensor_random(d, NU_DTYPE_F16, 3, k3s, 0, -1, 1, &seed);
    nt_tensor vshort = nt_tensor_random(d, NU_DTYPE_F16, 3, vks, 0, -1, 1, &seed);
    nt_tensor q12 = nt_tensor_random(d, NU_DTYPE_F32, 3, d12, 0, -1, 1, &seed);
    nt_tensor k12t = nt_tensor_random(d, NU_DTYPE_F32, 3, k12, 0, -1, 1, &seed);
    nt_tensor qi = nt_tensor_random(d, NU_DTYPE_I32, 3, qs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nt_tensor d12t = nt_tensor_output(d, NU_DTYPE_F32, 3, d12, 0);
    nt_tensor bad = nt_tensor_output(d, NU_DTYPE_F32, 3, bad_ds, 0);
    nu_attention_desc desc = {.causal = true, .kv_length = 16};
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "NULL desc"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(NULL, &dst.t, &q.t, &k.t, &v.t, &desc));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, NULL, &k.t, &v.t, &desc));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k3.t, &k3.t, &desc)); /* 8 % 3 */
    assert_non_null(strstr(nu_error_message(NULL), "multiple of kv_heads"));
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_op_attention(c, &d12t.t, &q12.t, &k12t.t, &k12t.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "multiples of 8"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &bad.t, &q.t, &k.t, &v.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "dst is"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &vshort.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "v is"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &qi.t, &k.t, &v.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    nu_tensor k2 = nu_tensor_make(k.t.buffer, 0, NU_DTYPE_F16, 2, k2d);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k2, &v.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "rank"));
    nu_attention_desc bad_len = {.causal = true, .kv_length = 17}, zero_len = {.causal = true, .kv_length = 0};
    nu_attention_desc bad_scale = {.scale = INFINITY, .causal = true, .kv_length = 16};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &bad_len));
    assert_non_null(strstr(nu_error_message(NULL), "kv_length"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &zero_len));
    assert_non_null(strstr(nu_error_message(NULL), "kv_length"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &bad_scale));
    assert_non_null(strstr(nu_error_message(NULL), "scale"));
    nu_tensor over_q = nu_tensor_make(q.t.buffer, 0, NU_DTYPE_F32, 3, qs);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &over_q, &q.t, &k.t, &v.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps q"));
    /* The tuning's fields out of range, each named. */
    struct {
        nu_attention_tune tune;
        const char *name;
    } bad_tune[] = {
        {{.path = (nu_attention_path)3}, "tune.path"}, {{.splits = 65536}, "tune.splits"}, {{.br = 3}, "tune.br"},
        {{.br = 128}, "tune.br"}, {{.bc = 129}, "tune.bc"}, {{.keys = 17}, "tune.keys"}, {{.heads = 9}, "tune.heads"},
        {{.tc_rows = 32}, "tune.tc_rows"}, {{.combine = (nu_attention_combine)3}, "tune.combine"},
        {{.fused_max = 1}, "tune.fused_max"},
    };
    for (size_t i = 0; i < sizeof bad_tune / sizeof bad_tune[0]; i++) {
        nu_attention_desc bd = {.causal = true, .kv_length = 16, .tune = bad_tune[i].tune};
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &bd));
        if (!strstr(nu_error_message(d), bad_tune[i].name))
            fail_msg("tune case %zu: the message '%s' does not name %s", i, nu_error_message(d), bad_tune[i].name);
    }
    /* A tile too large for the shared memory, asked for in the desc. */
    nu_attention_desc big = {.causal = true, .kv_length = 16, .tune = {.path = NU_ATTENTION_PATH_PREFILL, .br = 64, .bc = 128}};
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_op_attention(c, &dst.t, &q.t, &k.t, &v.t, &big));
    assert_non_null(strstr(nu_error_message(NULL), "shared memory"));
    /* The developer override: bad values refused, naming the variable; a good one applies (the
     * same tile through it). */
    env_refusal("path=sideways", NU_ERROR_INVALID_ARGUMENT, "NUVEC_ATTENTION");
    env_refusal("combine=later", NU_ERROR_INVALID_ARGUMENT, "combine=fused|separate");
    env_refusal("fused_max=1", NU_ERROR_INVALID_ARGUMENT, "fused_max");
    env_refusal("subgroup=2", NU_ERROR_INVALID_ARGUMENT, "subgroup=0|1");
    env_refusal("path=prefill br=64 bc=128", NU_ERROR_UNSUPPORTED, "shared memory");
    /* Empty: no tokens records nothing. */
    int64_t q0[3] = {0, 8, 64};
    nu_tensor qe = nu_tensor_make(q.t.buffer, 0, NU_DTYPE_F32, 3, q0), de = nu_tensor_make(dst.t.buffer, 0, NU_DTYPE_F32, 3, q0);
    NT_OK(nu_op_attention(c, &de, &qe, &k.t, &v.t, &desc));

    nu_commands_free(c);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&k3);
    nt_tensor_free(&vshort);
    nt_tensor_free(&q12);
    nt_tensor_free(&k12t);
    nt_tensor_free(&qi);
    nt_tensor_free(&dst);
    nt_tensor_free(&d12t);
    nt_tensor_free(&bad);
    nt_close(d);
}

/* Ops of one recording share its partials (nu__commands_scratch): four attentions, independent of
 * each other (their own outputs), recorded into one graph hold one op's partials, not four (a
 * decode graph's layers), and so do they recorded into one command buffer (a prefill pass's
 * products); the shared buffer's uses are ordered: each output equals that of the op alone in a
 * command buffer, bit for bit, in both. */
static void graph_ops_share_partials(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 21;
    const int64_t P = 512, hkv = 2, hq = 8, D = 64;
    const int OPS = 4;
    int64_t ks[3] = {P, hkv, D}, qs[3] = {1, hq, D};
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
    nt_tensor q[4], dst[4];
    nu_attention_desc desc = {.causal = true, .q_position = (uint32_t)P - 1, .kv_length = (uint32_t)P, .tune.splits = 64};
    for (int i = 0; i < OPS; i++) {
        q[i] = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
        dst[i] = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    }
    uint64_t one = (uint64_t)hq * 64 * (D + 2) * 4; /* one op's partials: 135 KiB */
    uint64_t before = nu_memory_active(d);
    nu_commands *rec;
    nu_graph *g;
    NT_OK(nu_graph_record(d, &rec));
    for (int i = 0; i < OPS; i++)
        NT_OK(nu_op_attention(rec, &dst[i].t, &q[i].t, &k.t, &v.t, &desc));
    NT_OK(nu_graph_new(rec, &g));
    uint64_t held = nu_memory_active(d) - before;
    if (held >= 2 * one)
        fail_msg("a graph of %d attentions holds %llu bytes; one op's partials are %llu", OPS, (unsigned long long)held,
                 (unsigned long long)one);
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    size_t n = (size_t)(hq * D);
    float *graph = malloc(OPS * n * sizeof *graph), *shared = malloc(OPS * n * sizeof *shared);
    assert_non_null(graph);
    assert_non_null(shared);
    for (int i = 0; i < OPS; i++) {
        nt_tensor_download(&dst[i]);
        memcpy(graph + i * n, dst[i].values, n * sizeof *graph);
    }
    /* The same four ops in one command buffer. */
    nu_commands *c;
    nu_memory_stats s0, s1; /* active, and freed memory the recorded work still holds (pending) */
    NT_OK(nu_memory_get_stats(d, &s0));
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    for (int i = 0; i < OPS; i++)
        NT_OK(nu_op_attention(c, &dst[i].t, &q[i].t, &k.t, &v.t, &desc));
    NT_OK(nu_memory_get_stats(d, &s1));
    held = s1.active + s1.pending - s0.active - s0.pending;
    if (held >= 2 * one)
        fail_msg("a command buffer of %d attentions holds %llu bytes; one op's partials are %llu", OPS,
                 (unsigned long long)held, (unsigned long long)one);
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    NT_OK(nu_commands_free(c));
    for (int i = 0; i < OPS; i++) {
        nt_tensor_download(&dst[i]);
        memcpy(shared + i * n, dst[i].values, n * sizeof *shared);
    }
    for (int i = 0; i < OPS; i++) {
        nt_attn_call a = {&dst[i].t, &q[i].t, &k.t, &v.t, &desc};
        nt_run(d, nt_record_attention, &a);
        nt_tensor_download(&dst[i]);
        for (size_t j = 0; j < n; j++)
            if (memcmp(&dst[i].values[j], &shared[i * n + j], sizeof *shared))
                fail_msg("op %d of the command buffer: dst[%zu] is %.9g, the op alone gives %.9g", i, j,
                         (double)shared[i * n + j], (double)dst[i].values[j]);
        for (size_t j = 0; j < n; j++)
            if (memcmp(&dst[i].values[j], &graph[i * n + j], sizeof *graph))
                fail_msg("op %d of the graph: dst[%zu] is %.9g, the op alone gives %.9g", i, j, (double)graph[i * n + j],
                         (double)dst[i].values[j]);
        expect_attention(&dst[i], q[i].values, k.values, v.values, 1, hq, hkv, D, &desc, "an op of a shared-partials graph");
    }
    free(graph);
    free(shared);
    NT_OK(nu_graph_free(g));
    for (int i = 0; i < OPS; i++) {
        nt_tensor_free(&q[i]);
        nt_tensor_free(&dst[i]);
    }
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_close(d);
}

/* A decode step's new q, k and v (F32, random in [-1, 1)) uploaded into q, kn and vn (their shapes). */
static void new_step_inputs(nu_device *d, nt_tensor *q, nt_tensor *kn, nt_tensor *vn, uint64_t *seed)
{
    nt_tensor *into[3] = {q, kn, vn};
    nu_commands *up;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &up));
    nt_tensor made[3];
    for (int i = 0; i < 3; i++) {
        made[i] = nt_tensor_random(d, NU_DTYPE_F32, into[i]->t.rank, into[i]->t.shape, 0, -1, 1, seed);
        NT_OK(nu_commands_upload(up, into[i]->t.buffer, 0, made[i].values, nu_tensor_numel(&into[i]->t) * 4));
    }
    NT_OK(nu_commands_commit(up));
    NT_OK(nu_commands_free(up));
    for (int i = 0; i < 3; i++)
        nt_tensor_free(&made[i]);
}

/* One decode step recorded once as a graph whose launches change the position: rope's
 * position_offset, both kv_appends' position, attention's q_position and kv_length (not causal,
 * so that kv_length alone limits the keys) (nu_op_graph_param), launched for 40 steps with new q,
 * k, v uploaded before each; every step's output is bit-equal to the same ops recorded with the
 * step's values in a command buffer (the same split count in both: NUVEC_ATTENTION split=3, so
 * the launches' keys fall in 1, 2, then 3 splits) and matches the reference. Three variants: the
 * splits merged by attn_combine.comp (the default), k appended by nu_op_kv_append_rope (its
 * position a parameter; the command buffer ropes k with nu_op_rope into an F16 tensor, then
 * nu_op_kv_append: the caches stay bit-equal), and that with combine=fused (the last split
 * merges). Also the
 * refusals. */
static void decode_step_variant(int variant)
{
    nu_device *d = nt_open();
    uint64_t seed = 12;
    const int64_t P = 64, hkv = 2, hq = 4, D = 64, steps = 40;
    int64_t cs[3] = {P, hkv, D}, qs[3] = {1, hq, D}, ns[3] = {1, hkv, D};
    nt_tensor kc[2], vc[2]; /* the graph's caches and the command buffers' */
    for (int i = 0; i < 2; i++) {
        kc[i] = nt_tensor_output(d, NU_DTYPE_F16, 3, cs, 0);
        vc[i] = nt_tensor_output(d, NU_DTYPE_F16, 3, cs, 0);
    }
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor kn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor vn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor qr = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nt_tensor out[2] = {nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0), nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0)};
    nt_tensor kr = nt_tensor_output(d, NU_DTYPE_F16, 3, ns, 0); /* the command buffer's roped k */
    bool fused_rope = variant > 0;
    nu_attention_tune tune = {.splits = 3, .combine = variant == 2 ? NU_ATTENTION_COMBINE_FUSED : NU_ATTENTION_COMBINE_AUTO};

    nu_commands *rec;
    uint32_t p_rope, p_k, p_v, p_q, p_len, bad;
    NT_OK(nu_graph_record(d, &rec));
    /* Before any op: nothing to declare. */
    assert_int_equal(nu_op_graph_param(rec, NU_OP_VALUE_POSITION, &bad), NU_ERROR_INVALID_ARGUMENT);
    nu_rope_desc rd = {.layout = NU_ROPE_INTERLEAVED, .position_offset = (int32_t)(P - 1)};
    NT_OK(nu_op_rope(rec, &qr.t, &q.t, &rd));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_POSITION, &p_rope));
    assert_int_equal(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &bad), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_error_message(d), "kv_length"));
    nu_rope_desc krd = {.layout = NU_ROPE_INTERLEAVED};
    if (fused_rope)
        NT_OK(nu_op_kv_append_rope(rec, &kc[0].t, &kn.t, (uint32_t)P - 1, &krd));
    else
        NT_OK(nu_op_kv_append(rec, &kc[0].t, &kn.t, (uint32_t)P - 1));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_POSITION, &p_k));
    NT_OK(nu_op_kv_append(rec, &vc[0].t, &vn.t, (uint32_t)P - 1));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_POSITION, &p_v));
    /* not causal: kv_length alone limits the keys */
    nu_attention_desc ad = {.q_position = (uint32_t)P - 1, .kv_length = (uint32_t)P, .tune = tune};
    NT_OK(nu_op_attention(rec, &out[0].t, &qr.t, &kc[0].t, &vc[0].t, &ad));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_Q_POSITION, &p_q));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &p_len));
    assert_int_equal(nu_op_graph_param(rec, (nu_op_value)7, &bad), NU_ERROR_INVALID_ARGUMENT);
    NT_OK(nu_commands_fill(rec, qr.t.buffer, 0, 4, 0)); /* a later command: the note is stale */
    assert_int_equal(nu_op_graph_param(rec, NU_OP_VALUE_Q_POSITION, &bad), NU_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nu_op_graph_param(NULL, NU_OP_VALUE_Q_POSITION, &bad), NU_ERROR_INVALID_ARGUMENT);
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));
    nu_commands *plain;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &plain));
    assert_int_equal(nu_op_graph_param(plain, NU_OP_VALUE_POSITION, &bad), NU_ERROR_INVALID_ARGUMENT);
    NT_OK(nu_commands_free(plain));

    size_t n = (size_t)(hq * D);
    float *got = malloc(n * sizeof *got);
    for (int64_t t = 0; t < steps; t++) {
        new_step_inputs(d, &q, &kn, &vn, &seed);
        int32_t pos = (int32_t)t;
        uint32_t upos = (uint32_t)t, len = (uint32_t)t + 1;
        NT_OK(nu_graph_set_param(g, p_rope, &pos, 4));
        NT_OK(nu_graph_set_param(g, p_k, &upos, 4));
        NT_OK(nu_graph_set_param(g, p_v, &upos, 4));
        NT_OK(nu_graph_set_param(g, p_q, &upos, 4));
        NT_OK(nu_graph_set_param(g, p_len, &len, 4));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        nt_tensor_download(&out[0]);
        memcpy(got, out[0].values, n * sizeof *got);
        /* The same step, recorded with its values, on the other caches. */
        nu_commands *c;
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        nu_rope_desc rd2 = {.layout = NU_ROPE_INTERLEAVED, .position_offset = pos};
        nu_attention_desc ad2 = {.q_position = upos, .kv_length = len, .tune = tune};
        NT_OK(nu_op_rope(c, &qr.t, &q.t, &rd2));
        if (fused_rope) {
            NT_OK(nu_op_rope(c, &kr.t, &kn.t, &rd2));
            NT_OK(nu_op_kv_append(c, &kc[1].t, &kr.t, upos));
        } else {
            NT_OK(nu_op_kv_append(c, &kc[1].t, &kn.t, upos));
        }
        NT_OK(nu_op_kv_append(c, &vc[1].t, &vn.t, upos));
        NT_OK(nu_op_attention(c, &out[1].t, &qr.t, &kc[1].t, &vc[1].t, &ad2));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        NT_OK(nu_commands_free(c));
        nt_tensor_download(&out[1]);
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &out[1].values[i], sizeof *got))
                fail_msg("variant %d, step %lld: the graph's dst[%zu] is %.9g, the command buffer's %.9g", variant,
                         (long long)t, i, (double)got[i], (double)out[1].values[i]);
        /* The caches alike, and the step against the reference (from the command buffer's). */
        for (int i = 0; i < 2; i++) {
            nt_tensor_download(&kc[i]);
            nt_tensor_download(&vc[i]);
        }
        if (memcmp(kc[0].bytes, kc[1].bytes, kc[0].size) || memcmp(vc[0].bytes, vc[1].bytes, vc[0].size))
            fail_msg("variant %d, step %lld: the graph's caches differ from the command buffer's", variant, (long long)t);
        nt_tensor_download(&qr);
        char what[64];
        snprintf(what, sizeof what, "decode step variant %d, step %lld", variant, (long long)t);
        expect_attention(&out[0], qr.values, kc[1].values, vc[1].values, 1, hq, hkv, D, &ad2, what);
    }
    free(got);
    NT_OK(nu_graph_free(g));
    for (int i = 0; i < 2; i++) {
        nt_tensor_free(&kc[i]);
        nt_tensor_free(&vc[i]);
        nt_tensor_free(&out[i]);
    }
    nt_tensor_free(&q);
    nt_tensor_free(&kn);
    nt_tensor_free(&vn);
    nt_tensor_free(&qr);
    nt_tensor_free(&kr);
    nt_close(d);
}

static void decode_step_with_graph_params(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++)
        decode_step_variant(variant);
}

/* ---- the fresh form: RoPE and the cache writes inside the decode dispatch ------------------- */

/* One decode step recorded once as a graph in the fresh form (nu_attention_desc.fresh_k: q and
 * the row's key turned, key and value written into the caches, attended, one dispatch; kv_length
 * the only launch parameter), launched for 40 steps with new q, k, v uploaded before each; each
 * step's dst and both caches are bit-equal to nu_op_rope, nu_op_kv_append_rope, nu_op_kv_append
 * and nu_op_attention recorded with the step's values in a command buffer on a second pair of
 * caches (the same split count: 3), and dst matches the reference. Variants: the subgroup kernel
 * with interleaved pairs and attn_combine.comp; half pairs over half the head with frequency
 * factors, linear and magnitude scaling, a window of 5 and the fused merge; attn_decode.comp
 * (no_subgroup) with interleaved pairs; no RoPE, an F32 cache, a window of 7, attn_decode.comp
 * and the fused merge; and with per-head RMSNorms (fresh_q_norm, fresh_k_norm: Qwen3's), against
 * nu_op_rms_norm before the separate ops: both norms, half pairs, the subgroup kernel and the
 * fused merge; the key's only, attn_decode.comp. The norms sum their squares in another order
 * than nu_op_rms_norm, so those two variants agree within a few roundings: dst within 1e-5 of
 * the separate ops', the caches within one F16 rounding. Variants 6 and 7 are 0 and 4 with a key
 * a thread (tune.by_key: attn_decode_keys.comp, on both sides, seen in the trace of the first
 * launch); they need subgroup arithmetic (d). */
static void fresh_variant(nu_device *d, int variant)
{
    bool by_key = variant >= 6;
    if (by_key)
        variant = variant == 6 ? 0 : 4;
    uint64_t seed = 41 + (uint64_t)variant + (by_key ? 100u : 0u);
    const int64_t P = 64, hkv = 2, hq = 4, D = 64, steps = 40;
    int64_t cs[3] = {P, hkv, D}, qs[3] = {1, hq, D}, ns[3] = {1, hkv, D}, fs[1] = {D / 4};
    nu_dtype cdt = variant == 3 ? NU_DTYPE_F32 : NU_DTYPE_F16;
    nt_tensor kc[2], vc[2];
    for (int i = 0; i < 2; i++) {
        kc[i] = nt_tensor_output(d, cdt, 3, cs, 0);
        vc[i] = nt_tensor_output(d, cdt, 3, cs, 0);
    }
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor kn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor vn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor ff = nt_tensor_random(d, NU_DTYPE_F32, 1, fs, 0, 1, 4, &seed);
    int64_t ws[1] = {D};
    nt_tensor qw = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, 0.5, 1.5, &seed);
    nt_tensor kw = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, 0.5, 1.5, &seed);
    nt_tensor qn = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0), knn = nt_tensor_output(d, NU_DTYPE_F32, 3, ns, 0);
    bool qnorm = variant == 4, knorm = variant >= 4, exact = variant < 4;
    const float eps = 1e-6f;
    nt_tensor qr = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nt_tensor out[2] = {nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0), nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0)};
    nu_attention_tune tune = {.splits = 3, .no_subgroup = variant == 2 || variant == 3 || variant == 5,
                              .combine = variant % 2 ? NU_ATTENTION_COMBINE_FUSED : NU_ATTENTION_COMBINE_SEPARATE,
                              .by_key = by_key, .no_by_key = !by_key};
    nu_rope_desc rope = {.layout = NU_ROPE_INTERLEAVED, .theta = 500000.0f};
    if (variant == 1 || variant == 4)
        rope = (nu_rope_desc){.layout = NU_ROPE_HALF, .rotary_dims = (uint32_t)D / 2, .linear_factor = 4.0f,
                              .freq_factors = &ff.t, .attn_factor = 1.25f};
    const nu_rope_desc *rp = variant == 3 ? NULL : &rope;
    uint32_t window = variant == 1 ? 5u : variant == 3 ? 7u : 0u;

    nu_commands *rec;
    uint32_t p_len;
    NT_OK(nu_graph_record(d, &rec));
    nu_attention_desc ad = {.kv_length = (uint32_t)P, .window = window, .fresh_k = &kn.t, .fresh_v = &vn.t,
                            .fresh_rope = rp, .fresh_q_norm = qnorm ? &qw.t : NULL, .fresh_k_norm = knorm ? &kw.t : NULL,
                            .fresh_norm_eps = eps, .tune = tune};
    NT_OK(nu_op_attention(rec, &out[0].t, &q.t, &kc[0].t, &vc[0].t, &ad));
    NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &p_len));
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));

    size_t n = (size_t)(hq * D);
    float *got = malloc(n * sizeof *got);
    for (int64_t t = 0; t < steps; t++) {
        new_step_inputs(d, &q, &kn, &vn, &seed);
        uint32_t upos = (uint32_t)t, len = (uint32_t)t + 1;
        NT_OK(nu_graph_set_param(g, p_len, &len, 4));
        char path[512];
        snprintf(path, sizeof path, "%s/nuvec-fresh-%d.json", nt_tmp_dir(), (int)getpid());
        if (t == 0)
            NT_OK(nu_trace_start(d, path));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        if (t == 0) {
            NT_OK(nu_trace_stop(d));
            const char *want = by_key ? "attn_decode_keys" : tune.no_subgroup ? "attn_decode" : "attn_decode_sg";
            if (!nt_trace_has(path, want))
                fail_msg("fresh variant %d%s: %s did not run", variant, by_key ? " (by_key)" : "", want);
            remove(path);
        }
        nt_tensor_download(&out[0]);
        memcpy(got, out[0].values, n * sizeof *got);
        /* The same step as separate ops, recorded with its values, on the other caches. */
        nu_commands *c;
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        nu_attention_desc ad2 = {.causal = true, .q_position = upos, .kv_length = len, .window = window, .tune = tune};
        const nu_tensor *qsrc = &q.t, *ksrc = &kn.t;
        if (qnorm) {
            NT_OK(nu_op_rms_norm(c, &qn.t, &q.t, &qw.t, eps));
            qsrc = &qn.t;
        }
        if (knorm) {
            NT_OK(nu_op_rms_norm(c, &knn.t, &kn.t, &kw.t, eps));
            ksrc = &knn.t;
        }
        if (rp) {
            nu_rope_desc rq = rope;
            rq.position_offset = (int32_t)upos;
            NT_OK(nu_op_rope(c, &qr.t, qsrc, &rq));
            NT_OK(nu_op_kv_append_rope(c, &kc[1].t, ksrc, upos, &rope));
        } else {
            NT_OK(nu_op_copy(c, &qr.t, &q.t));
            NT_OK(nu_op_kv_append(c, &kc[1].t, &kn.t, upos));
        }
        NT_OK(nu_op_kv_append(c, &vc[1].t, &vn.t, upos));
        NT_OK(nu_op_attention(c, &out[1].t, &qr.t, &kc[1].t, &vc[1].t, &ad2));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        NT_OK(nu_commands_free(c));
        nt_tensor_download(&out[1]);
        for (size_t i = 0; i < n; i++)
            if (exact ? memcmp(&got[i], &out[1].values[i], sizeof *got) != 0 : !(fabsf(got[i] - out[1].values[i]) <= 1e-5f))
                fail_msg("fresh variant %d%s, step %lld: the fresh form's dst[%zu] is %.9g, the separate ops' %.9g", variant, by_key ? " (by_key)" : "",
                         (long long)t, i, (double)got[i], (double)out[1].values[i]);
        for (int i = 0; i < 2; i++) {
            nt_tensor_download(&kc[i]);
            nt_tensor_download(&vc[i]);
        }
        if (memcmp(vc[0].bytes, vc[1].bytes, vc[0].size) || (exact && memcmp(kc[0].bytes, kc[1].bytes, kc[0].size)))
            fail_msg("fresh variant %d%s, step %lld: the fresh form's caches differ from the separate ops'", variant,
                     by_key ? " (by_key)" : "", (long long)t);
        for (size_t i = 0; !exact && i < (size_t)(P * hkv * D); i++) /* positions past t: both as made */
            if (!(isnan(kc[0].values[i]) && isnan(kc[1].values[i])) && !(fabsf(kc[0].values[i] - kc[1].values[i]) <= 1e-3f * fmaxf(1.0f, fabsf(kc[1].values[i]))))
                fail_msg("fresh variant %d, step %lld: key element %zu is %.9g in the fresh form's cache, %.9g in the "
                         "separate ops'", variant, (long long)t, i, (double)kc[0].values[i], (double)kc[1].values[i]);
        nt_tensor_download(&qr);
        char what[64];
        snprintf(what, sizeof what, "fresh variant %d%s, step %lld", variant, by_key ? " (by_key)" : "", (long long)t);
        expect_attention(&out[0], qr.values, kc[1].values, vc[1].values, 1, hq, hkv, D, &ad2, what);
    }
    free(got);
    NT_OK(nu_graph_free(g));

    /* What the fresh form refuses. */
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &rec));
    nu_attention_desc bad = ad;
    bad.fresh_v = NULL;
    assert_int_equal(nu_op_attention(rec, &out[0].t, &q.t, &kc[0].t, &vc[0].t, &bad), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_error_message(d), "fresh_v"));
    bad = ad;
    bad.fresh_k = &vc[0].t; /* the cache itself: a [P, hkv, D] tensor */
    assert_int_equal(nu_op_attention(rec, &out[0].t, &q.t, &kc[0].t, &vc[0].t, &bad), NU_ERROR_INVALID_ARGUMENT);
    bad = ad;
    bad.tune.path = NU_ATTENTION_PATH_PREFILL;
    assert_int_equal(nu_op_attention(rec, &out[0].t, &q.t, &kc[0].t, &vc[0].t, &bad), NU_ERROR_INVALID_ARGUMENT);
    nu_rope_desc moved = rope;
    moved.position_offset = 3;
    bad = ad;
    bad.fresh_rope = &moved;
    assert_int_equal(nu_op_attention(rec, &out[0].t, &q.t, &kc[0].t, &vc[0].t, &bad), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_error_message(d), "position_offset"));
    NT_OK(nu_commands_free(rec));

    for (int i = 0; i < 2; i++) {
        nt_tensor_free(&kc[i]);
        nt_tensor_free(&vc[i]);
        nt_tensor_free(&out[i]);
    }
    nt_tensor_free(&q);
    nt_tensor_free(&kn);
    nt_tensor_free(&vn);
    nt_tensor_free(&ff);
    nt_tensor_free(&qw);
    nt_tensor_free(&kw);
    nt_tensor_free(&qn);
    nt_tensor_free(&knn);
    nt_tensor_free(&qr);
}

static void fresh_form_in_a_graph(void **state)
{
    (void)state;
    for (int variant = 0; variant < 6; variant++) {
        nu_device *d = nt_open();
        fresh_variant(d, variant);
        nt_close(d);
    }
}

static void fresh_form_a_key_a_thread(void **state)
{
    (void)state;
    nu_device *d = nt_open_subgroup_arithmetic("fresh_form_a_key_a_thread");
    fresh_variant(d, 6);
    fresh_variant(d, 7);
    nt_close(d);
}

/* ---- the fused merge of the decode splits ------------------------------------------------- */

/* One graph per shape, recorded for the cache's 700 keys (chunk=64: 11 splits; or split=200 and
 * 130: more splits than the merging workgroup's invocations), launched over
 * kv_length values whose keys fall in 1 split, 3, 6 (12 keys: 2 a split), all 11 (700, 300, 11,
 * 65) and 2 (a split holds ceil(kv_length / 11) keys): each launch's dst
 * (poisoned before it) matches the reference, so every launch found its counters at zero (the
 * last split of the previous launch reset them, also when most splits had no key) and its last
 * split saw every partial. GQA 1, 4 and 8, head dims 8 to 128, 1 and 3 query rows (causal with
 * q_position at kv_length - 1: row t sees q_position + t + 1 keys, kv_length caps them), both
 * decode kernels; and combine=separate (attn_combine.comp) gives the same bits. */
static void fused_merge_in_a_graph(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 23;
    typedef struct {
        int64_t tokens, hq, hkv, D;
        nu_attention_tune tune;
    } fm_case;
    const fm_case cases[] = {
        {1, 8, 2, 128, {.chunk = 64}},
        {1, 4, 4, 64, {.chunk = 64, .no_subgroup = true}},
        {3, 8, 1, 32, {.chunk = 64}},
        {1, 16, 2, 16, {.chunk = 64, .heads = 4}},
        {2, 4, 1, 8, {.chunk = 64, .no_subgroup = true}},
        {1, 32, 8, 128, {.chunk = 64, .keys = 3}},
        /* more splits than a workgroup's 128 invocations: the merge takes them 128 at a time */
        {1, 8, 2, 64, {.splits = 200}},
        {2, 4, 4, 32, {.splits = 130, .no_subgroup = true}},
        /* one split: dst written directly (the unused bindings empty ranges), in a graph too */
        {1, 8, 2, 64, {.splits = 1}},
    };
    const uint32_t lengths[] = {1, 3, 12, 700, 2, 300, 11, 65};
    const int64_t P = 700;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const fm_case *fc = &cases[ci];
        int64_t qs[3] = {fc->tokens, fc->hq, fc->D}, ks[3] = {P, fc->hkv, fc->D};
        nt_tensor q = nt_tensor_random(d, floats[ci % 3], 3, qs, 0, -1, 1, &seed);
        nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, &seed);
        nt_tensor v = nt_tensor_random(d, floats[(ci + 1) % 3], 3, ks, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, floats[(ci + 2) % 3], 3, qs, 0);
        size_t n = (size_t)(fc->tokens * fc->hq * fc->D);
        float *fused = malloc(n * sizeof *fused);
        nu_graph *g[2];
        uint32_t p_len[2], p_q[2];
        for (int sep = 0; sep < 2; sep++) {
            nu_commands *rec;
            nu_attention_desc ad = {.causal = true, .q_position = (uint32_t)P - 1, .kv_length = (uint32_t)P, .tune = fc->tune};
            ad.tune.combine = sep ? NU_ATTENTION_COMBINE_SEPARATE : NU_ATTENTION_COMBINE_FUSED;
            NT_OK(nu_graph_record(d, &rec));
            NT_OK(nu_op_attention(rec, &dst.t, &q.t, &k.t, &v.t, &ad));
            NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_Q_POSITION, &p_q[sep]));
            NT_OK(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &p_len[sep]));
            NT_OK(nu_graph_new(rec, &g[sep]));
        }
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
            for (int sep = 0; sep < 2; sep++) {
                uint32_t len = lengths[li], qp = len - 1;
                nu_commands *poison;
                NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &poison));
                NT_OK(nu_commands_fill(poison, dst.t.buffer, 0, nu_buffer_size(dst.t.buffer) / 4 * 4, 0xffffffffu));
                NT_OK(nu_commands_commit(poison));
                NT_OK(nu_commands_wait(poison, NU_WAIT_FOREVER));
                NT_OK(nu_commands_free(poison));
                NT_OK(nu_graph_set_param(g[sep], p_len[sep], &len, 4));
                NT_OK(nu_graph_set_param(g[sep], p_q[sep], &qp, 4));
                NT_OK(nu_graph_launch(g[sep]));
                NT_OK(nu_graph_wait(g[sep], NU_WAIT_FOREVER));
                nt_tensor_download(&dst);
                char what[200], tn[120];
                snprintf(what, sizeof what, "case %zu (%s), launch %zu, kv_length %u, combine=%s", ci,
                         nt_attn_tune_name(&fc->tune, tn, sizeof tn), li, len, sep ? "separate" : "fused");
                nu_attention_desc want = {.causal = true, .q_position = qp, .kv_length = len};
                expect_attention(&dst, q.values, k.values, v.values, fc->tokens, fc->hq, fc->hkv, fc->D, &want, what);
                if (!sep) {
                    memcpy(fused, dst.values, n * sizeof *fused);
                    continue;
                }
                for (size_t e = 0; e < n; e++)
                    if (memcmp(&fused[e], &dst.values[e], sizeof *fused))
                        fail_msg("%s: dst[%zu] is %.9g, the fused merge's %.9g", what, e, (double)dst.values[e],
                                 (double)fused[e]);
            }
        for (int sep = 0; sep < 2; sep++)
            NT_OK(nu_graph_free(g[sep]));
        free(fused);
        nt_tensor_free(&q);
        nt_tensor_free(&k);
        nt_tensor_free(&v);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* One case of prefill_on_the_matrix_units: within its tolerance of the reference, and not equal to
 * attn_prefill.comp's results (tc=0), which shows the matrix units ran; the kernel seen in the
 * trace: attn_prefill_frag (the softmax in registers) by default where the device is NVIDIA's and
 * head_dim at most 128 (its fragments have the layout that kernel reads), attn_prefill_coopmat with
 * tune.no_fragments. */
static void check_on_the_units(nu_device *d, const shape_case *sc, uint32_t window, float softcap, nu_dtype dd,
                               uint64_t *seed)
{
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-units-%d.json", nt_tmp_dir(), (int)getpid());
    int64_t qs[3] = {sc->tokens, sc->hq, sc->D}, ks[3] = {sc->positions, sc->hkv, sc->D};
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F16, 3, qs, 0, -1, 1, seed);
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, seed);
    nt_tensor v = nt_tensor_random(d, NU_DTYPE_F16, 3, ks, 0, -1, 1, seed);
    nt_tensor dst = nt_tensor_output(d, dd, 3, qs, 0);
    nu_attention_desc desc = {.scale = sc->scale, .causal = sc->causal, .q_position = sc->q_position,
                              .kv_length = sc->kv_length, .window = window, .softcap = softcap, .tune = sc->tune};
    char what[240], tn[120];
    snprintf(what, sizeof what, "matrix units: F16 q, k, v, %s dst, tokens %lld, head_dim %lld, window %u, softcap %g, tune %s",
             nu_dtype_name(dst.t.dtype), (long long)sc->tokens, (long long)sc->D, window, (double)softcap,
             nt_attn_tune_name(&sc->tune, tn, sizeof tn));
    bool want_frag = nu_device_get_info(d)->vendor_id == 0x10de && sc->D <= 128 && !sc->tune.no_fragments;
    size_t count = (size_t)(sc->tokens * sc->hq * sc->D);
    float *tc = malloc(count * sizeof *tc);
    for (int form = 1; form >= 0; form--) { /* the shared-memory softmax, then the default */
        desc.tune.no_fragments = form == 1 || sc->tune.no_fragments;
        NT_OK(nu_trace_start(d, path));
        run_check(d, &dst, &q.t, q.values, &k.t, k.values, &v.t, v.values, &desc, what);
        NT_OK(nu_trace_stop(d));
        static const char *const kernels[2] = {"attn_prefill_frag", "attn_prefill_coopmat"};
        unsigned ran = nt_trace_which(path, kernels, 2);
        bool frag = ran & 1, shared = ran & 2;
        if (form == 1 ? !shared || frag : want_frag ? !frag || shared : !frag && !shared)
            fail_msg("%s: %s: attn_prefill_frag %s, attn_prefill_coopmat %s", what,
                     form ? "tune.no_fragments" : "the default", frag ? "ran" : "did not run",
                     shared ? "ran" : "did not run");
        if (form == 0 && !frag && !want_frag)
            printf("%s: the default took attn_prefill_coopmat\n", what);
    }
    memcpy(tc, dst.values, count * sizeof *tc);
    desc.tune.no_matrix_units = true;
    run_check(d, &dst, &q.t, q.values, &k.t, k.values, &v.t, v.values, &desc, "attn_prefill.comp beside it");
    size_t differ = 0;
    for (size_t e = 0; e < count; e++)
        differ += tc[e] != dst.values[e];
    if (dst.t.dtype == NU_DTYPE_F32 && differ < count / 4)
        fail_msg("%s: only %zu of %zu results differ from attn_prefill.comp's: did the matrix units run?", what, differ,
                 count);
    free(tc);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&dst);
}

/* The prefill kernels on the matrix units (attn_prefill_frag.comp and attn_prefill_coopmat.comp,
 * where the device has VK_KHR_cooperative_matrix: the H100 and H200, not lavapipe): F16 q, k, v
 * with aligned rows, 64-row and 128-row blocks (tc_rows) with partial last blocks, causal from 0
 * and as a later chunk, not causal, GQA 1 and 4, both head dims, F32/F16/BF16 dst; then sliding
 * windows (blocks of keys skipped before the first row's window) and logit softcaps (Gemma's),
 * alone and together; each in both forms (check_on_the_units), with attn_prefill_frag's 32-key
 * blocks and 128-row workgroups too. Opened without validation: Debian 12's layer predates the
 * extension (nuvec leaves it off under that layer). */
static void prefill_on_the_matrix_units(void **state)
{
    (void)state;
    nu_device *d = nt_open_matrix_units("prefill_on_the_matrix_units");
    uint64_t seed = 9;
    const shape_case cases[] = {
        {37, 8, 8, 128, 37, 37, 0, true, 0, {0}},     {130, 8, 2, 64, 200, 130, 0, true, 0, {.tc_rows = 64}},
        {64, 16, 4, 128, 128, 128, 64, true, 0, {0}}, {100, 4, 1, 128, 90, 83, 0, false, 0.1f, {.tc_rows = 64}},
        {200, 8, 8, 64, 260, 250, 50, true, 0, {0}},  {300, 8, 2, 128, 300, 300, 0, true, 0, {0}},
        /* the other head dims that are multiples of 16 (256: 64 rows a workgroup, 128 do not fit) */
        {70, 8, 2, 80, 80, 75, 5, true, 0, {0}},      {90, 4, 2, 96, 100, 90, 0, true, 0, {0}},
        {150, 8, 4, 256, 160, 150, 0, true, 0, {0}},  {40, 4, 4, 16, 40, 40, 0, false, 0, {0}},
        {50, 8, 2, 32, 64, 60, 10, true, 0, {0}},
        /* attn_prefill_frag's other block shapes: 32 keys a block, 128 rows a workgroup */
        {300, 8, 2, 128, 300, 300, 0, true, 0, {.tc_keys = 32}}, {260, 8, 4, 64, 300, 290, 30, true, 0, {.tc_rows = 128}},
        {200, 4, 4, 128, 260, 250, 50, true, 0, {.tc_rows = 128, .tc_keys = 32}},
    };
    const struct {
        shape_case sc;
        uint32_t window;
        float softcap;
    } capped[] = {
        {{150, 8, 4, 256, 160, 150, 0, true, 0, {0}}, 40, 0.5f},   /* Gemma 2's head_dim, both */
        {{130, 8, 2, 64, 200, 130, 0, true, 0, {.tc_rows = 64}}, 64, 0},
        {{200, 8, 8, 64, 260, 250, 50, true, 0, {0}}, 100, 0.3f},  /* a later chunk */
        {{100, 4, 1, 128, 90, 83, 0, true, 0.1f, {.tc_rows = 64}}, 20, 0}, /* (a window needs causal masks) */
        {{64, 16, 4, 128, 128, 128, 64, true, 0, {0}}, 0, 1.0f},
        {{300, 8, 2, 128, 300, 300, 0, true, 0, {0}}, 33, 0},     /* whole blocks skipped */
        {{300, 8, 2, 128, 300, 300, 0, true, 0, {.tc_keys = 32}}, 70, 0.4f},
    };
    nt_attn_v_tolerance = 1.0 / 1024.0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_on_the_units(d, &cases[i], 0, 0, floats[i % 3], &seed);
    for (size_t i = 0; i < sizeof capped / sizeof capped[0]; i++)
        check_on_the_units(d, &capped[i].sc, capped[i].window, capped[i].softcap, floats[i % 3], &seed);
    nt_attn_v_tolerance = 1.0 / 8192.0;
    NT_OK(nu_device_close(d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_path),
        cmocka_unit_test(decode_a_key_a_thread),
        cmocka_unit_test(prefill_path),
        cmocka_unit_test(small_head_dims),
        cmocka_unit_test(strided_and_transposed_views),
        cmocka_unit_test(partials_outlive_their_free),
        cmocka_unit_test(decode_inside_a_graph),
        cmocka_unit_test(graph_ops_share_partials),
        cmocka_unit_test(decode_step_with_graph_params),
        cmocka_unit_test(fresh_form_in_a_graph),
        cmocka_unit_test(fresh_form_a_key_a_thread),
        cmocka_unit_test(fused_merge_in_a_graph),
        cmocka_unit_test(prefill_on_the_matrix_units),
        cmocka_unit_test(refuses_bad_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
