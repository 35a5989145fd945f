/* ops_cases.h: the cases `nuvec bench ops` runs (bench/ops_cases.c builds the list, bench/ops.c
 * sets each up, times it and prints the table). */
#ifndef NUVEC_BENCH_OPS_CASES_H
#define NUVEC_BENCH_OPS_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "nuvec.h"

typedef enum op_kind {
    K_COPY,    /* nu_commands_copy: the copy bandwidth */
    K_CAST,    /* nu_op_copy (sub: unused) */
    K_BINARY,  /* nu_op_binary (sub: nu_binary_op) */
    K_UNARY,   /* nu_op_unary (sub: nu_unary_op) */
    K_SWIGLU,
    K_REDUCE,  /* sub: nu_reduce_op */
    K_ARGMAX,
    K_SOFTMAX,
    K_RMSNORM,
    K_LAYERNORM,
    K_ROPE,    /* shape: tokens, heads, head_dim */
    K_GATHER,  /* shape: vocab, dim, tokens */
    K_MATVEC,  /* shape: n, k, m */
    K_MATVEC_GLU, /* shape: n, k, m: nu_op_matvec_fused with glu_up, gate and up the halves of a [2n, k] weight */
    K_MATMUL,  /* shape: m, n, k; dtype: the weight's (a and dst F16, or BF16 for BF16 weights) */
    K_MATMUL_DQ, /* shape: m, n, k: a block weight dequantized to F16 (nu_op_copy), then the F16 product */
    K_ATTN_DECODE,  /* shape: context, kv_heads (32 query heads of 128, 1 token, F16); sub 1: the
                       splits merged by the last split (tune.combine FUSED); sub 2: the per-row form */
    K_KV_ROPE,      /* shape: positions, kv_heads (1 token of 128, F32 into an F16 cache, the
                       interleaved layout); sub 0 nu_op_kv_append_rope, 1 nu_op_rope then
                       nu_op_kv_append (an F16 temporary) */
    K_ATTN_PREFILL, /* shape: tokens, keys (32 heads of 128, causal, F16; keys past tokens: a later
                     * prefill pass, its rows at the last positions) */
    K_MV_FUSED,     /* nu_op_matvec_fused (sub: mv_form); shape: n, k */
    K_MV_SEPARATE,  /* the separate ops the fused form replaces (sub: mv_form); shape: n, k */
    K_MATMUL_ROWS,  /* a batched decode step's product: shape m, n, k; a [m, k] F16 (dst F32 [m, n])
                       against the weight (dtype), rotated over copies like matvec's */
    K_ATTN_BATCH,   /* a batched decode step's attention: shape rows, keys, positions; each row its
                       own slot of an F16 cache [rows, positions, 32, 128], position keys - 1 (the
                       per-row form: positions and slots from I32 tensors), 32 query heads */
} op_kind;

/* The fused forms a decode layer uses (K_MV_FUSED, K_MV_SEPARATE). */
typedef enum mv_form {
    MV_NORM,     /* y = W rms_norm(x)                      separate: rms_norm, matvec */
    MV_RESIDUAL, /* x += W a (in place)                    separate: matvec, add */
    MV_NORM_GLU, /* h = swiglu of [gate | up] rms_norm(x) (a stacked [2n, k] weight)
                  *                                        separate: rms_norm, matvec, swiglu */
} mv_form;

typedef struct bench_case {
    const char *name;   /* "add", "copy" */
    const char *shape;  /* for the table: "4096", "2 GiB" */
    op_kind kind;
    int sub;            /* the op within its kind (nu_binary_op, ...) */
    nu_dtype dtype;     /* of the inputs (weights and tables for matvec and gather) */
    nu_dtype out_dtype;
    uint32_t rank;
    int64_t shape_v[4];
    double bytes;       /* moved per op */
    const char *target; /* the target for this case, for the table */
    double flops;       /* per op, for TFLOP/s (products and attention; 0: none) */
} bench_case;

#define OPS_MAX_CASES 384
#define OPS_SHAPE_CHARS 24

/* The list for one device and --size: the cases in the order they run (the copy first: the
 * bandwidth the others are compared with), and what a CPU device or a device without matrix
 * units skips (names for the table's notes). The shapes' and big's storage is the list's. */
typedef struct ops_case_list {
    bench_case cases[OPS_MAX_CASES];
    size_t count;
    const char *skipped[64]; /* on a CPU device: minutes each there */
    int nskipped;
    const char *skipped_units[16]; /* rows_mm Q4_0_SOA without matrix units */
    int nunits;
    char big[32];                          /* --size in GiB: the elementwise cases' shape */
    char shapes[160][OPS_SHAPE_CHARS];     /* the generated shapes' names */
} ops_case_list;

/* Fills *out with the cases for a device like info at --size bytes a large tensor. */
void ops_cases(const nu_device_info *info, uint64_t size, ops_case_list *out);

#endif
