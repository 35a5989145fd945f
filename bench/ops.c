/* ops.c: `nuvec bench ops`: the kernel library's ops (nuvec/ops.h) at the shapes a 7B Llama
 * decode uses (hidden 4096, FFN 11008, vocab 32000, 32 heads of 128), its matrix products (square
 * 1024^3 to 8192^3 and the 512-token prefill shapes, also with Q8_0 / Q4_0 weights against
 * "dequantize to F16, then the F16 product") and attention (decode at 512 to 32k keys, prefill of
 * 512 and 4096 tokens) as TFLOP/s (products, attention) and, for decode attention, GB/s of the KV
 * bytes read ("attn_dec": the splits merged by attn_combine.comp, a second dispatch (the
 * default); "attn_dec2": by the last split, in one dispatch: tune.combine FUSED; "attn_decr": the
 * per-row form (the row's position from an I32 tensor), the same work as attn_dec; "attn_kvr": a decode
 * step's keys appended with RoPE by nu_op_kv_append_rope, "attn_kvr2": by nu_op_rope then
 * nu_op_kv_append), and elementwise ops at large
 * sizes (--size bytes a tensor: 2 GiB on a GPU, 32 MiB on a CPU device), as GB/s of the bytes
 * each op must move (every input read once, the output written once; for matrix-vector products
 * the weights' bytes) and as a fraction of the copy bandwidth measured in the same run (a
 * --size copy through nu_commands_copy: a compute shader). bench/torch_ops.py runs the same cases
 * through PyTorch on CUDA.
 *
 * Each case records `reps` repetitions of the op into one command buffer (repetitions write the
 * same output, so hazard tracking puts a barrier between them, as between the steps of a model)
 * between two GPU timestamps; the time per op is the median over runs of that span / reps. The
 * "matvec_indep" cases write a different output each repetition: no barrier between them, as
 * between the independent projections of one token (q, k and v; gate and up). The
 * "matvec_fus" cases are nu_op_matvec_fused at a decode layer's four products (qkv with the
 * RMSNorm, o and down with the residual added in place, the stacked gate-up with the RMSNorm and
 * the SwiGLU), each after a "matvec_sep" case running the separate ops it replaces (rms_norm,
 * matvec, add, swiglu: a barrier between each); the fused row's target column says how much
 * faster it is (the separate ops' time over its own). GB/s of both: the weights' bytes.
 * bench/ops_cases.c builds the list of cases; this file sets each up, times it and prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "exec/commands.h"
#include "ops_cases.h"

#define RUNS 5
#define TARGET_SECONDS_PER_RUN 0.02 /* each run records enough repetitions for about this long */
#define MAX_TENSORS 4


/* Weights are rotated over copies holding at least this many bytes in all, so that a matrix-vector
 * product reads memory, not the L2 cache (60 MB on the H200), as a model's layers do. */
#define ROTATE_BYTES (256ull << 20)
#define MAX_COPIES 16

typedef struct bench_tensors {
    nu_buffer *buf[MAX_TENSORS + 2 * MAX_COPIES]; /* the tensors, the weights and outputs of the products */
    int nbuf;
    nu_tensor t[MAX_TENSORS]; /* 0: dst */
    nu_tensor weights[MAX_COPIES];
    nu_tensor outs[MAX_COPIES]; /* matvec_indep: an output per weight copy; attention decode: V caches;
                                 * matvec_sep: [0] the stacked gate-up product */
    int copies;
} bench_tensors;

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec bench ops [--json] [--device NAME] [--size BYTES] [--filter TEXT]\n"
               "  Every op at a 7B Llama decode's shapes and elementwise ops at --size bytes a tensor\n"
               "  (default 2 GiB on a GPU, 32 MiB on a CPU device): GB/s and the fraction of the copy\n"
               "  bandwidth measured in the same run; matrix products and attention also in TFLOP/s (on a CPU\n"
               "  device the largest are shrunk or skipped). --filter runs the cases whose \"op dtype shape\" contains TEXT.\n");
}

/* A tensor in a new private buffer filled with `fill` (32-bit words: never zeros, which can run
 * faster than real data). */
static nu_status new_tensor(nu_device *d, bench_tensors *bt, nu_dtype dtype, uint32_t rank, const int64_t *shape,
                            uint32_t fill, nu_tensor *out)
{
    nu_tensor t = nu_tensor_make(NULL, 0, dtype, rank, shape);
    uint64_t bytes = (nu_tensor_span_bytes(&t) + 15) / 16 * 16;
    nu_buffer *b;
    nu_status st = nu_buffer_new(d, bytes ? bytes : 16, NU_STORAGE_PRIVATE, &b);
    if (st != NU_OK)
        return st;
    bt->buf[bt->nbuf++] = b;
    nu_commands *c;
    if ((st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c)) == NU_OK) {
        st = nu_commands_fill(c, b, 0, nu_buffer_size(b) / 4 * 4, fill);
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        nu_commands_free(c);
    }
    t.buffer = b;
    *out = t;
    return st;
}

static void free_tensors(bench_tensors *bt)
{
    for (int i = 0; i < bt->nbuf; i++)
        nu_buffer_free(bt->buf[i]);
    bt->nbuf = 0;
}

/* 0x3c003c00: 1.0 in F16 pairs, a small normal number in F32 and BF16 pairs; as Q8_0/Q4_0 blocks,
 * scales of 1.0 and small quants. (Gather's ids are filled with 1.) */
#define FILL 0x3c003c00u

/* bytes into `b` (at 0), waited for. */
static nu_status upload(nu_device *d, nu_buffer *b, const void *bytes, size_t size)
{
    nu_commands *c;
    nu_status st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
    if (st != NU_OK)
        return st;
    st = nu_commands_upload(c, b, 0, bytes, size);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, NU_WAIT_FOREVER);
    nu_commands_free(c);
    return st;
}

/* The weights of a product [shape[0], shape[1]] of `dtype`: copies holding ROTATE_BYTES in all
 * (MAX_COPIES at most), which the repetitions take in turn. */
static nu_status rotated_weights(nu_device *d, bench_tensors *bt, nu_dtype dtype, const int64_t shape[2])
{
    nu_tensor probe = nu_tensor_make(NULL, 0, dtype, 2, shape);
    uint64_t per = nu_tensor_span_bytes(&probe);
    bt->copies = (int)((ROTATE_BYTES + per - 1) / per);
    bt->copies = bt->copies > MAX_COPIES ? MAX_COPIES : bt->copies < 1 ? 1 : bt->copies;
    nu_status st = NU_OK;
    for (int i = 0; i < bt->copies && st == NU_OK; i++)
        st = new_tensor(d, bt, dtype, 2, shape, FILL, &bt->weights[i]);
    return st;
}

static nu_status setup(nu_device *d, const bench_case *k, bench_tensors *bt)
{
    const int64_t *s = k->shape_v;
    nu_status st = NU_OK;
    switch (k->kind) {
    case K_COPY:
    case K_CAST:
    case K_UNARY:
    case K_SOFTMAX:
        if ((st = new_tensor(d, bt, k->out_dtype, k->rank, s, FILL, &bt->t[0])) == NU_OK)
            st = new_tensor(d, bt, k->dtype, k->rank, s, FILL, &bt->t[1]);
        return st;
    case K_BINARY:
    case K_SWIGLU:
        if ((st = new_tensor(d, bt, k->out_dtype, k->rank, s, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, k->dtype, k->rank, s, FILL, &bt->t[1])) == NU_OK)
            st = new_tensor(d, bt, k->dtype, k->rank, s, FILL, &bt->t[2]);
        return st;
    case K_REDUCE:
    case K_ARGMAX: {
        int64_t ds[4];
        memcpy(ds, s, sizeof ds);
        ds[k->rank - 1] = 1;
        if ((st = new_tensor(d, bt, k->out_dtype, k->rank, ds, FILL, &bt->t[0])) == NU_OK)
            st = new_tensor(d, bt, k->dtype, k->rank, s, FILL, &bt->t[1]);
        return st;
    }
    case K_RMSNORM:
    case K_LAYERNORM: {
        int64_t w[1] = {s[k->rank - 1]};
        if ((st = new_tensor(d, bt, k->out_dtype, k->rank, s, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, k->dtype, k->rank, s, FILL, &bt->t[1])) == NU_OK &&
            (st = new_tensor(d, bt, k->dtype, 1, w, FILL, &bt->t[2])) == NU_OK)
            st = new_tensor(d, bt, k->dtype, 1, w, FILL, &bt->t[3]);
        return st;
    }
    case K_ROPE:
        if ((st = new_tensor(d, bt, k->out_dtype, 3, s, FILL, &bt->t[0])) == NU_OK)
            st = new_tensor(d, bt, k->dtype, 3, s, FILL, &bt->t[1]);
        return st;
    case K_GATHER: {
        int64_t table[2] = {s[0], s[1]}, ids[1] = {s[2]}, out[2] = {s[2], s[1]};
        if ((st = new_tensor(d, bt, k->out_dtype, 2, out, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, k->dtype, 2, table, FILL, &bt->t[1])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_I32, 1, ids, 0u, &bt->t[2])) == NU_OK) {
            /* Distinct rows in a scattered order (a row read once: no cache reuse). */
            int32_t *v = malloc((size_t)s[2] * sizeof *v);
            if (!v)
                return NU_ERROR_HOST_OUT_OF_MEMORY;
            for (int64_t i = 0; i < s[2]; i++)
                v[i] = (int32_t)((i * 7919) % s[0]);
            st = upload(d, bt->t[2].buffer, v, (size_t)s[2] * sizeof *v);
            free(v);
        }
        return st;
    }
    case K_MATVEC:
    case K_MATVEC_GLU: {
        int64_t w[2] = {k->kind == K_MATVEC_GLU ? 2 * s[0] : s[0], s[1]}, x[2] = {s[2], s[1]}, out[2] = {s[2], s[0]};
        if ((st = new_tensor(d, bt, k->out_dtype, 2, out, FILL, &bt->t[0])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_F32, 2, x, FILL, &bt->t[1]);
        if (st == NU_OK)
            st = rotated_weights(d, bt, k->dtype, w);
        for (int i = 0; k->sub && i < bt->copies && st == NU_OK; i++)
            st = new_tensor(d, bt, k->out_dtype, 2, out, FILL, &bt->outs[i]);
        return st;
    }
    case K_MV_FUSED:
    case K_MV_SEPARATE: {
        /* t: 0 dst [1, n], 1 x [1, k], 2 the norm's weight [k], 3 the separate ops' intermediate
         * (rms_norm's output [1, k], or the product [1, n] the add takes); weights [n, k] or
         * [2n, k] (gate-up), rotated like matvec's. */
        bool glu = k->sub == MV_NORM_GLU;
        int64_t n = s[0], kk = s[1], w[2] = {glu ? 2 * n : n, kk}, x[2] = {1, kk}, g[1] = {kk}, out[2] = {1, n},
                gu[2] = {1, 2 * n};
        int64_t mid[2] = {1, k->sub == MV_RESIDUAL ? n : kk};
        if ((st = new_tensor(d, bt, NU_DTYPE_F32, 2, out, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F32, 2, x, FILL, &bt->t[1])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F32, 1, g, FILL, &bt->t[2])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_F32, 2, mid, FILL, &bt->t[3]);
        if (st == NU_OK && glu)
            st = new_tensor(d, bt, NU_DTYPE_F32, 2, gu, FILL, &bt->outs[0]);
        if (st == NU_OK)
            st = rotated_weights(d, bt, k->dtype, w);
        return st;
    }
    case K_MATMUL:
    case K_MATMUL_DQ: {
        int64_t a[2] = {s[0], s[2]}, w[2] = {s[1], s[2]}, out[2] = {s[0], s[1]};
        nu_dtype act = k->dtype == NU_DTYPE_BF16 ? NU_DTYPE_BF16 : NU_DTYPE_F16;
        if ((st = new_tensor(d, bt, act, 2, out, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, act, 2, a, FILL, &bt->t[1])) == NU_OK &&
            (st = new_tensor(d, bt, k->dtype, 2, w, FILL, &bt->t[2])) == NU_OK && k->kind == K_MATMUL_DQ)
            st = new_tensor(d, bt, NU_DTYPE_F16, 2, w, FILL, &bt->t[3]);
        return st;
    }
    case K_MATMUL_ROWS: {
        int64_t a[2] = {s[0], s[2]}, w[2] = {s[1], s[2]}, out[2] = {s[0], s[1]};
        if ((st = new_tensor(d, bt, NU_DTYPE_F32, 2, out, FILL, &bt->t[0])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_F16, 2, a, FILL, &bt->t[1]);
        if (st == NU_OK)
            st = rotated_weights(d, bt, k->dtype, w);
        return st;
    }
    case K_ATTN_BATCH: {
        /* t: 0 dst, 1 q [rows, 32, 128], 2 positions (keys - 1 each), 3 slots (0 .. rows - 1);
         * weights[0] / outs[0]: the K and V caches. */
        int64_t q[3] = {s[0], 32, 128}, cache[4] = {s[0], s[2], 32, 128}, r1[1] = {s[0]};
        if ((st = new_tensor(d, bt, NU_DTYPE_F16, 3, q, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F16, 3, q, FILL, &bt->t[1])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_I32, 1, r1, (uint32_t)s[1] - 1, &bt->t[2])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_I32, 1, r1, 0u, &bt->t[3])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F16, 4, cache, FILL, &bt->weights[0])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_F16, 4, cache, FILL, &bt->outs[0]);
        bt->copies = 1; /* rows x keys x 32 KB: past the L2 cache at the shapes benchmarked */
        int32_t *v = st == NU_OK ? malloc((size_t)s[0] * sizeof *v) : NULL;
        if (st == NU_OK && !v)
            return NU_ERROR_HOST_OUT_OF_MEMORY;
        for (int64_t i = 0; v && i < s[0]; i++)
            v[i] = (int32_t)i;
        if (v)
            st = upload(d, bt->t[3].buffer, v, (size_t)s[0] * sizeof *v);
        free(v);
        return st;
    }
    case K_ATTN_DECODE: {
        /* K and V caches rotated over copies of at least ROTATE_BYTES in all (from memory, not L2). */
        int64_t q[3] = {1, 32, 128}, kv[3] = {s[0], s[1], 128};
        int64_t one[1] = {1};
        if ((st = new_tensor(d, bt, NU_DTYPE_F16, 3, q, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F16, 3, q, FILL, &bt->t[1])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_I32, 1, one, (uint32_t)s[0] - 1, &bt->t[2]); /* the per-row position */
        uint64_t per = 2ull * (uint64_t)s[0] * (uint64_t)s[1] * 128 * 2;
        bt->copies = (int)((ROTATE_BYTES + per - 1) / per);
        bt->copies = bt->copies > MAX_COPIES ? MAX_COPIES : bt->copies < 1 ? 1 : bt->copies;
        for (int i = 0; i < bt->copies && st == NU_OK; i++)
            if ((st = new_tensor(d, bt, NU_DTYPE_F16, 3, kv, FILL, &bt->weights[i])) == NU_OK)
                st = new_tensor(d, bt, NU_DTYPE_F16, 3, kv, FILL, &bt->outs[i]);
        return st;
    }
    case K_KV_ROPE: {
        int64_t cache[3] = {s[0], s[1], 128}, tok[3] = {1, s[1], 128};
        if ((st = new_tensor(d, bt, NU_DTYPE_F16, 3, cache, FILL, &bt->t[0])) == NU_OK &&
            (st = new_tensor(d, bt, NU_DTYPE_F32, 3, tok, FILL, &bt->t[1])) == NU_OK)
            st = new_tensor(d, bt, NU_DTYPE_F16, 3, tok, FILL, &bt->t[2]);
        return st;
    }
    case K_ATTN_PREFILL: {
        int64_t q[3] = {s[0], 32, 128}, kv[3] = {s[1] > s[0] ? s[1] : s[0], 32, 128};
        for (int i = 0; i < 4 && st == NU_OK; i++)
            st = new_tensor(d, bt, NU_DTYPE_F16, 3, i < 2 ? q : kv, FILL, &bt->t[i]);
        return st;
    }
    }
    return NU_ERROR_INVALID_ARGUMENT;
}

/* A decode layer's fused product (K_MV_FUSED) or the separate ops it replaces (K_MV_SEPARATE). */
static nu_status record_mv_form(nu_commands *c, const bench_case *k, const bench_tensors *bt, int rep)
{
    const nu_tensor *t = bt->t, *w = &bt->weights[rep % bt->copies];
    const float eps = 1e-5f;
    int64_t n = k->shape_v[0];
    nu_status st;
    if (k->kind == K_MV_FUSED) {
        nu_matvec_desc desc = {0};
        nu_tensor gate, up;
        if (k->sub != MV_RESIDUAL)
            desc.norm_weight = &t[2], desc.norm_eps = eps;
        if (k->sub == MV_RESIDUAL)
            desc.residual = &t[0]; /* in place: x += W a */
        if (k->sub == MV_NORM_GLU) {
            if ((st = nu_tensor_slice(w, 0, 0, n, &gate)) != NU_OK || (st = nu_tensor_slice(w, 0, n, n, &up)) != NU_OK)
                return st;
            desc.glu_up = &up;
            w = &gate;
        }
        return nu_op_matvec_fused(c, &t[0], w, &t[1], &desc);
    }
    if (k->sub == MV_RESIDUAL) {
        if ((st = nu_op_matvec(c, &t[3], w, &t[1])) != NU_OK)
            return st;
        return nu_op_binary(c, NU_BINARY_ADD, &t[0], &t[0], &t[3]);
    }
    if ((st = nu_op_rms_norm(c, &t[3], &t[1], &t[2], eps)) != NU_OK)
        return st;
    if (k->sub == MV_NORM)
        return nu_op_matvec(c, &t[0], w, &t[3]);
    const nu_tensor *gu = &bt->outs[0];
    nu_tensor g, u;
    if ((st = nu_op_matvec(c, gu, w, &t[3])) != NU_OK || (st = nu_tensor_slice(gu, 1, 0, n, &g)) != NU_OK ||
        (st = nu_tensor_slice(gu, 1, n, n, &u)) != NU_OK)
        return st;
    return nu_op_swiglu(c, &t[0], &g, &u);
}

static nu_status record(nu_commands *c, const bench_case *k, const bench_tensors *bt, int rep)
{
    const nu_tensor *t = bt->t;
    switch (k->kind) {
    case K_COPY:
        return nu_commands_copy(c, t[0].buffer, 0, t[1].buffer, 0, nu_buffer_size(t[0].buffer));
    case K_CAST:
        return nu_op_copy(c, &t[0], &t[1]);
    case K_BINARY:
        return nu_op_binary(c, (nu_binary_op)k->sub, &t[0], &t[1], &t[2]);
    case K_UNARY:
        return nu_op_unary(c, (nu_unary_op)k->sub, &t[0], &t[1], 0.5f);
    case K_SWIGLU:
        return nu_op_swiglu(c, &t[0], &t[1], &t[2]);
    case K_REDUCE:
        return nu_op_reduce(c, (nu_reduce_op)k->sub, &t[0], &t[1]);
    case K_ARGMAX:
        return nu_op_argmax(c, &t[0], &t[1]);
    case K_SOFTMAX:
        return nu_op_softmax(c, &t[0], &t[1], 0.125f);
    case K_RMSNORM:
        return nu_op_rms_norm(c, &t[0], &t[1], &t[2], 1e-5f);
    case K_LAYERNORM:
        return nu_op_layer_norm(c, &t[0], &t[1], &t[2], &t[3], 1e-5f);
    case K_ROPE: {
        nu_rope_desc rd = {.layout = k->sub ? NU_ROPE_HALF : NU_ROPE_INTERLEAVED, .theta = 10000.0f,
                           .position_offset = 1000};
        return nu_op_rope(c, &t[0], &t[1], &rd);
    }
    case K_GATHER:
        return nu_op_gather(c, &t[0], &t[1], &t[2]);
    case K_MATVEC:
        return nu_op_matvec(c, k->sub ? &bt->outs[rep % bt->copies] : &t[0], &bt->weights[rep % bt->copies], &t[1]);
    case K_MATVEC_GLU: {
        const nu_tensor *w = &bt->weights[rep % bt->copies];
        nu_tensor gate, up;
        nu_status st = nu_tensor_slice(w, 0, 0, k->shape_v[0], &gate);
        if (st == NU_OK)
            st = nu_tensor_slice(w, 0, k->shape_v[0], k->shape_v[0], &up);
        nu_matvec_desc desc = {.glu_up = &up};
        return st == NU_OK ? nu_op_matvec_fused(c, &t[0], &gate, &t[1], &desc) : st;
    }
    case K_MATMUL:
        return nu_op_matmul(c, &t[0], &t[1], &t[2], NULL);
    case K_MATMUL_DQ: {
        nu_status st = nu_op_copy(c, &t[3], &t[2]);
        return st == NU_OK ? nu_op_matmul(c, &t[0], &t[1], &t[3], NULL) : st;
    }
    case K_MATMUL_ROWS:
        return nu_op_matmul(c, &t[0], &t[1], &bt->weights[rep % bt->copies], NULL);
    case K_ATTN_BATCH: {
        /* The op's own choice: the decode path for rows with slots no more than the cache's (the
         * prefill path ran 4.4 ms at 16 and 64 rows against 54 and 180 us on the H200). */
        nu_attention_desc ad = {.positions = &t[2], .slots = &t[3], .max_length = (uint32_t)k->shape_v[2]};
        return nu_op_attention(c, &t[0], &t[1], &bt->weights[0], &bt->outs[0], &ad);
    }
    case K_ATTN_DECODE: {
        /* sub 1: merged in the last split; 2: the per-row form, its one row's position (context - 1)
         * from t[2]; 3: a key a subgroup (attn_decode_sg.comp, where the default may take a key a
         * thread). */
        nu_attention_desc ad = {.causal = true, .q_position = (uint32_t)k->shape_v[0] - 1,
                                .kv_length = (uint32_t)k->shape_v[0]};
        if (k->sub == 1)
            ad.tune.combine = NU_ATTENTION_COMBINE_FUSED;
        if (k->sub == 2)
            ad = (nu_attention_desc){.positions = &t[2], .max_length = (uint32_t)k->shape_v[0]};
        if (k->sub == 3)
            ad.tune.no_by_key = true;
        return nu_op_attention(c, &t[0], &t[1], &bt->weights[rep % bt->copies], &bt->outs[rep % bt->copies], &ad);
    }
    case K_KV_ROPE: {
        /* A decode step's position; the op's rows are written each repetition (a barrier between). */
        uint32_t pos = (uint32_t)k->shape_v[0] - 1;
        nu_rope_desc rd = {.layout = NU_ROPE_INTERLEAVED, .theta = 10000.0f};
        if (!k->sub)
            return nu_op_kv_append_rope(c, &t[0], &t[1], pos, &rd);
        rd.position_offset = (int32_t)pos;
        nu_status st = nu_op_rope(c, &t[2], &t[1], &rd);
        return st == NU_OK ? nu_op_kv_append(c, &t[0], &t[2], pos) : st;
    }
    case K_ATTN_PREFILL: {
        int64_t keys = k->shape_v[1] > k->shape_v[0] ? k->shape_v[1] : k->shape_v[0];
        nu_attention_desc ad = {.causal = true, .q_position = (uint32_t)(keys - k->shape_v[0]), .kv_length = (uint32_t)keys};
        return nu_op_attention(c, &t[0], &t[1], &t[2], &t[3], &ad);
    }
    case K_MV_FUSED:
    case K_MV_SEPARATE:
        return record_mv_form(c, k, bt, rep);
    }
    return NU_ERROR_INVALID_ARGUMENT;
}

/* Seconds per op: the median over RUNS of (GPU time of `reps` ops) / reps; < 0 on failure (*why:
 * the status; NU_ERROR_UNSUPPORTED for what the device cannot run, such as a binding larger than
 * it allows). */
static double time_case(bench_vk *vk, nu_device *d, const bench_case *k, const bench_tensors *bt, int *reps_out,
                        nu_status *why)
{
    *why = NU_OK;
    int reps = 1, runs = RUNS;
    double per[RUNS];
    for (int run = -1; run < runs; run++) { /* run -1: warm-up, and sizes the repetitions */
        nu_commands *c;
        nu_status st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
        if (st != NU_OK)
            return -1;
        bench_vk_timestamp_begin(vk, c->s.cmd);
        for (int r = 0; r < reps && st == NU_OK; r++)
            st = record(c, k, bt, r);
        bench_vk_timestamp_end(vk, c->s.cmd);
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        nu_commands_free(c);
        if (st != NU_OK) {
            *why = st;
            return -1;
        }
        double ns = bench_vk_timestamp_ns(vk);
        if (ns <= 0)
            return -1;
        if (run < 0) {
            double want = TARGET_SECONDS_PER_RUN * 1e9 / ns;
            reps = want < 1 ? 1 : want > 2000 ? 2000 : (int)want;
            if (ns > 5e7) /* one op over 50 ms (the largest products on a CPU device): 3 runs */
                runs = 3;
            continue;
        }
        per[run] = ns / 1e9 / reps;
    }
    *reps_out = reps;
    return bench_median(per, runs);
}

int bench_ops(int argc, char **argv)
{
    bool json = false;
    const char *select = NULL, *filter = NULL;
    long size_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            if (!bench_parse_count("ops", "--size", argv[++i], 1 << 12, 1l << 40, &size_arg))
                return 2;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else {
            int rc = bench_common_option("ops", argc, argv, &i, &json, &select, usage);
            if (rc != BENCH_OPTION_TAKEN)
                return rc;
        }
    }
    nu_device *d;
    if (!bench_open("ops", select, &d))
        return 1;
    const nu_device_info *info = nu_device_get_info(d);
    uint64_t size = size_arg ? (uint64_t)size_arg : info->type == NU_DEVICE_CPU ? 32ull << 20 : 2ull << 30;
    if (size > info->max_storage_buffer_range)
        size = info->max_storage_buffer_range / 16 * 16;
    bench_vk vk;
    if (!bench_vk_init(&vk, d, "ops", true)) {
        nu_device_close(d);
        return 1;
    }
    static ops_case_list list; /* about 30 KiB: not on the stack */
    ops_cases(info, size, &list);
    const bench_case *cases = list.cases;
    size_t ncases = list.count;
    const char *big = list.big;
    int nunits = list.nunits, nskipped = list.nskipped;
    const char *const *skipped_units = list.skipped_units, *const *skipped = list.skipped;
    if (nunits && !json) {
        printf("skipped without matrix units (nu_op_matmul reads Q4_0_SOA and Q6_K_SOA only there): rows_mm Q4_0_SOA "
               "and Q6_K_SOA");
        for (int i = 0; i < nunits; i++)
            printf(" %s%s", skipped_units[i], i + 1 < nunits ? "," : "\n");
    }
    if (nskipped && !json) {
        printf("skipped on a CPU device (minutes each there):");
        for (int i = 0; i < nskipped; i++)
            printf(" %s%s", skipped[i], i + 1 < nskipped ? "," : "\n");
        printf("\n");
    }
    double copy_gbps = 0, separate_s = 0; /* the last matvec_sep case's time (0: none or failed) */
    cJSON *root = json ? cJSON_CreateObject() : NULL, *jrows = NULL;
    if (root) {
        bench_json_device(root, d);
        cJSON_AddNumberToObject(root, "size_bytes", (double)size);
        jrows = cJSON_AddArrayToObject(root, "cases");
    } else {
        printf("nuvec bench ops on %s: GB/s of the bytes each op must move; 'of copy': against the\n"
               "copy bandwidth measured first (nu_commands_copy, %s)\n\n", info->name, big);
        printf("%-12s %-8s %-15s %10s %9s %8s %8s %6s  %s\n", "op", "dtype", "shape", "us/op", "GB/s", "of copy",
               "TFLOP/s", "reps", "target");
    }
    int failed = 0;
    for (size_t i = 0; i < ncases; i++) {
        const bench_case *k = &cases[i];
        char full[96];
        snprintf(full, sizeof full, "%s %s %s", k->name, nu_dtype_name(k->dtype), k->shape);
        if (k->kind == K_MV_SEPARATE)
            separate_s = 0; /* until it is timed (a filtered out or failed one leaves no ratio) */
        if (filter && !strstr(full, filter) && i != 0)
            continue;
        bench_tensors bt = {0};
        nu_status st = setup(d, k, &bt);
        int reps = 0;
        nu_status why = st;
        double s = st == NU_OK ? time_case(&vk, d, k, &bt, &reps, &why) : -1;
        free_tensors(&bt);
        nu_memory_clear_cache(d);
        if (s <= 0) {
            /* What the device cannot run (a binding past its limit: lavapipe's is 128 MiB) is
             * skipped and said; anything else fails the benchmark. */
            bool skip = why == NU_ERROR_UNSUPPORTED || why == NU_ERROR_OUT_OF_MEMORY;
            fflush(stdout);
            fprintf(stderr, "nuvec bench ops: %s %s %s %s: %s: %s\n", k->name, nu_dtype_name(k->dtype), k->shape,
                    skip ? "skipped" : "failed", nu_status_string(why), nu_error_message(d));
            failed += !skip;
            continue;
        }
        double gbps = k->bytes / s / 1e9;
        if (k->kind == K_COPY)
            copy_gbps = gbps;
        /* A fused case's target: its speed-up over the separate ops timed just before it. */
        char ratio[48];
        const char *target = k->target;
        if (k->kind == K_MV_SEPARATE)
            separate_s = s;
        if (k->kind == K_MV_FUSED && separate_s > 0 && i > 0 && cases[i - 1].kind == K_MV_SEPARATE) {
            snprintf(ratio, sizeof ratio, "%.2fx the separate ops", separate_s / s);
            target = ratio;
        }
        double frac = copy_gbps > 0 ? gbps / copy_gbps : 0;
        if (root) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "op", k->name);
            cJSON_AddStringToObject(r, "dtype", nu_dtype_name(k->dtype));
            cJSON_AddStringToObject(r, "shape", k->shape);
            cJSON_AddNumberToObject(r, "us_per_op", s * 1e6);
            cJSON_AddNumberToObject(r, "gbps", gbps);
            cJSON_AddNumberToObject(r, "fraction_of_copy", frac);
            cJSON_AddNumberToObject(r, "bytes", k->bytes);
            if (k->flops > 0)
                cJSON_AddNumberToObject(r, "tflops", k->flops / s / 1e12);
            cJSON_AddNumberToObject(r, "reps", reps);
            cJSON_AddStringToObject(r, "target", target);
            if (target != k->target)
                cJSON_AddNumberToObject(r, "speedup_over_separate", separate_s / s);
            cJSON_AddItemToArray(jrows, r);
        } else {
            char tf[16] = "-";
            if (k->flops > 0)
                snprintf(tf, sizeof tf, "%.3g", k->flops / s / 1e12);
            printf("%-12s %-8s %-15s %10.2f %9.1f %7.0f%% %8s %6d  %s\n", k->name, nu_dtype_name(k->dtype), k->shape,
                   s * 1e6, gbps, frac * 100, tf, reps, target);
        }
    }
    bench_vk_fini(&vk);
    nu_device_close(d);
    if (root) {
        cJSON_AddNumberToObject(root, "copy_gbps", copy_gbps);
        int rc = bench_json_print("ops", root);
        return rc ? rc : failed ? 1 : 0;
    }
    return failed ? 1 : 0;
}
