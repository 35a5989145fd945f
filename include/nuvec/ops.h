/* nuvec/ops.h: the kernel library's operations on tensors (nuvec/tensor.h).
 *
 * Each op records GPU work into a command buffer, like nu_commands_dispatch: nothing runs until
 * the command buffer is committed. Each declares the byte ranges it reads and writes, so hazard
 * tracking orders it against other work on the same buffers (two ops reading one tensor run
 * concurrently; an op reading what another wrote waits for it). Every op checks its tensors
 * when it records (nu_tensor_check, shapes, dtypes, the device's features) and returns
 * NU_ERROR_INVALID_ARGUMENT (a bad shape, dtype, rank or combination), NU_ERROR_OUT_OF_RANGE (a
 * view past its buffer's end) or NU_ERROR_UNSUPPORTED (a dtype the device cannot run) with a
 * message naming the op and the problem; a failed op records nothing.
 *
 * Conventions shared by all ops:
 * - Outputs ("dst") are contiguous (row-major; nu_op_matmul's may also be a column slice of one)
 *   and must not overlap any input, except that an
 *   elementwise op may write over an input viewed exactly as dst (in place). Inputs may be any
 *   view: strided, transposed, broadcast (stride 0).
 * - "Last dimension": shape[rank - 1]; reductions, norms and softmax run along it, over each
 *   row (every index of the other dimensions).
 * - Float dtypes are F32, F16 and BF16; arithmetic is in F32 (F16/BF16 are converted on load and
 *   rounded to nearest even on store). Where an op says "float", any of the three, and its
 *   inputs and output may mix them unless it says otherwise.
 * - Empty tensors record nothing and succeed.
 * Kernels are chosen by what the device offers (subgroup operations and size, 16-bit storage,
 * integer dot products); every op has a portable path (lavapipe runs it). nuvec's GLSL is under
 * kernels/, by family; `nuvec bench ops` measures them.
 *
 * Thread safety: as the command buffer's (one thread records into a command buffer at a time). */
#ifndef NUVEC_OPS_H
#define NUVEC_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "command.h"
#include "status.h"
#include "tensor.h"

NU_BEGIN_DECLS

/* ---- copies and casts -------------------------------------------------------------------- */

/* dst = src, converting the dtype: float to float; I32, U32 and U8 to themselves; every block
 * dtype (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, Q4_0_SOA, Q6_K_SOA) to float
 * (dequantization, exactly the F32 values ggml's dequantization gives: nuvec/tensor.h). Same shape; src may be any view. Conversions are
 * exact where the value fits and otherwise round to nearest even; F16 and BF16 subnormals are
 * kept, infinities stay infinities and a NaN stays a NaN of the same sign; a dtype copied to
 * itself keeps its bits (NaN payloads included). F16/BF16 dst of a block dtype: the F32 value,
 * rounded. dst may be src itself (the same view: nothing changes). A U8 tensor must not end in
 * a last, partial 32-bit word of its buffer (a buffer size not a multiple of 4): U8 is accessed
 * as whole words (no 8-bit storage); NU_ERROR_UNSUPPORTED otherwise. Q4_0_SOA (nuvec/tensor.h):
 * made from Q4_0 (any view of dst's shape; the bytes repacked exactly, not overlapping dst), and
 * dequantized to float as Q4_0 is; a dst whose rows are not a multiple of 256 elements is
 * refused, naming K. Q6_K_SOA likewise from Q6_K (a dst that is not whole groups of 8 super-blocks
 * is refused too). */
nu_status nu_op_copy(nu_commands *c, const nu_tensor *dst, const nu_tensor *src);

/* nu_op_prefetch's options; zero is the default. */
typedef struct nu_prefetch_desc {
    uint64_t bytes;         /* the first `bytes` of src's span to read (0: all of it) */
    const nu_tensor *after; /* NULL, or a tensor the prefetch is declared to read, so that hazard
                             * tracking orders it after the op that writes that tensor: in a graph
                             * it then runs in the level after that op's, beside the op's readers */
    uint32_t groups;        /* workgroups (0: one a compute unit where the device reports them,
                             * else 16) */
} nu_prefetch_desc;

/* Reads the bytes of src's span (from its first element's byte: any dtype, any view; the first
 * desc->bytes of them) so that the device's caches hold them when an op of a later dependency
 * level reads them, and produces nothing: src is unchanged and nothing else is written. Worth it
 * where the ops it runs beside leave the memory idle and the cache holds what runs between (the
 * H200: 50 MB of L2; bench/RESULTS.md has what the model runtime gains). desc may be NULL.
 * NU_ERROR_INVALID_ARGUMENT for a bad src or after (nu_tensor_check) or bytes past src's span. */
nu_status nu_op_prefetch(nu_commands *c, const nu_tensor *src, const nu_prefetch_desc *desc);

/* ---- elementwise ------------------------------------------------------------------------- */

typedef enum nu_binary_op { NU_BINARY_ADD, NU_BINARY_SUB, NU_BINARY_MUL, NU_BINARY_DIV, NU_BINARY_OP_COUNT } nu_binary_op;

/* dst = a op b, floats, with broadcasting (numpy's rules: shapes aligned at the last dimension,
 * a dimension of 1 or a missing leading one repeats): a's and b's shapes must broadcast to
 * dst's. */
nu_status nu_op_binary(nu_commands *c, nu_binary_op op, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b);
nu_status nu_op_add(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b);
nu_status nu_op_sub(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b);
nu_status nu_op_mul(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b);
nu_status nu_op_div(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b);

typedef enum nu_unary_op {
    NU_UNARY_SCALE,     /* alpha * x */
    NU_UNARY_EXP,       /* e^x */
    NU_UNARY_SILU,      /* x / (1 + e^-x) */
    NU_UNARY_GELU,      /* x * (1 + erf(x / sqrt 2)) / 2 (PyTorch's default) */
    NU_UNARY_GELU_TANH, /* x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2 */
    NU_UNARY_SOFTCAP,   /* alpha * tanh(x / alpha): Gemma 2's final logit softcap (alpha 30); alpha 1
                         * is tanh. alpha positive and finite */
    NU_UNARY_OP_COUNT
} nu_unary_op;

/* dst = op(src), floats, same shape (alpha is used by NU_UNARY_SCALE and NU_UNARY_SOFTCAP only).
 * In F32: EXP, SILU and GELU_TANH to the device's exp (Vulkan allows 3 + 2|x| ulps), GELU's erf by
 * a rational approximation (within about 5e-7), SOFTCAP's tanh by a polynomial below |x| 1/4 and
 * from the device's exp above (within about 1e-6 relative); large arguments give the limits
 * (SILU(-100) is -0, not NaN; SOFTCAP(+-inf) is +-alpha). dst may be src's view (in place). */
nu_status nu_op_unary(nu_commands *c, nu_unary_op op, const nu_tensor *dst, const nu_tensor *src, float alpha);
nu_status nu_op_scale(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, float alpha);
/* The activation of a gated linear unit (nu_op_glu, nu_op_matvec_fused, nu_matmul_desc). */
typedef enum nu_glu_activation {
    NU_GLU_SILU,      /* SwiGLU: silu(g) = g / (1 + e^-g) (Llama, Mistral, Qwen); the default */
    NU_GLU_GELU_TANH, /* GeGLU: gelu(g) with the tanh approximation, as NU_UNARY_GELU_TANH (Gemma) */
    NU_GLU_ACTIVATION_COUNT
} nu_glu_activation;

/* A gated linear unit: dst = act(gate) * up, act SiLU or GELU (tanh form: NU_UNARY_GELU_TANH's
 * function), in F32, floats, all three of one shape (gate and up may be any views, such as the two
 * halves of a fused projection; no broadcasting); dst may be gate's or up's view (in place). GeGLU
 * is nu_op_unary's GELU_TANH then nu_op_mul in one dispatch, with their bits where those keep F32.
 * nu_op_swiglu is nu_op_glu with NU_GLU_SILU. */
nu_status nu_op_glu(nu_commands *c, nu_glu_activation act, const nu_tensor *dst, const nu_tensor *gate,
                    const nu_tensor *up);
nu_status nu_op_swiglu(nu_commands *c, const nu_tensor *dst, const nu_tensor *gate, const nu_tensor *up);

/* ---- reductions over the last dimension -------------------------------------------------- */

typedef enum nu_reduce_op { NU_REDUCE_SUM, NU_REDUCE_MAX, NU_REDUCE_MEAN, NU_REDUCE_OP_COUNT } nu_reduce_op;

/* dst[.., 0] = op over src[.., i], floats: dst has src's shape with the last dimension 1 (never
 * in place). MAX propagates NaN (as PyTorch's amax); -0 and +0 are equal. Rows of length 0 are
 * refused (unless dst is empty too). */
nu_status nu_op_reduce(nu_commands *c, nu_reduce_op op, const nu_tensor *dst, const nu_tensor *src);
/* dst[.., 0] = the index of the largest src[.., i] (the first of equal ones, -0 equal to +0;
 * NaN is largest, so the first NaN): dst is I32 with src's shape and the last dimension 1. */
nu_status nu_op_argmax(nu_commands *c, const nu_tensor *dst, const nu_tensor *src);
/* dst = softmax(scale * src) along the last dimension, floats, same shape; the row's maximum is
 * subtracted first (no overflow at any magnitude). dst may be src's own view (in place). scale
 * must be finite. */
nu_status nu_op_softmax(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, float scale);

/* ---- norms ------------------------------------------------------------------------------- */

/* dst = src / sqrt(mean(src^2) + eps) * weight, along the last dimension (weight: 1-D, the last
 * dimension's length, any stride), floats. dst may be src's own view (in place). eps must be
 * finite and >= 0 (a negative one would make some rows NaN and not others). */
nu_status nu_op_rms_norm(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_tensor *weight,
                         float eps);
/* dst = (src - mean) / sqrt(var + eps) * weight + bias (biased variance), along the last
 * dimension; weight and bias 1-D of the last dimension's length, any stride (bias may be NULL),
 * floats. The variance is the mean of squared deviations from the mean (merged per thread, as
 * Chan et al.), never E[x^2] - E[x]^2: rows far from 0 keep their precision. In place and eps
 * as nu_op_rms_norm. */
nu_status nu_op_layer_norm(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_tensor *weight,
                           const nu_tensor *bias, float eps);

/* The residual add and the next RMSNorm of a transformer block as one op (one dispatch, one
 * dependency level fewer than nu_op_add then nu_op_rms_norm): sum = a + b, then dst =
 * rms_norm(sum) * weight as nu_op_rms_norm computes it (from the F32 sum, before sum's rounding).
 * a, b and sum are contiguous of one shape; sum may be of any float dtype (F32 beside an F16 dst:
 * the residual stream kept, the next product's input rounded once) and may be a or b itself (in
 * place, the same view) but overlaps nothing else; dst overlaps none of them. */
nu_status nu_op_add_rms_norm(nu_commands *c, const nu_tensor *sum, const nu_tensor *dst, const nu_tensor *a,
                             const nu_tensor *b, const nu_tensor *weight, float eps);
/* The same with b normalised first (a sandwich norm's close, Gemma 2 and 3: a block's output, its
 * post-norm, the residual add and the next block's norm in one dispatch, two dependency levels
 * fewer than nu_op_rms_norm, nu_op_add_rms_norm): sum = a + rms_norm(b) * b_weight, then dst =
 * rms_norm(sum) * weight, both norms with eps and each as nu_op_rms_norm computes it, so that the
 * sum equals that of nu_op_rms_norm into an F32 tensor and nu_op_add_rms_norm bit for bit. The
 * tensors as nu_op_add_rms_norm's; b_weight as weight (1-D of the rows' length, any stride),
 * written by neither dst nor sum. */
nu_status nu_op_norm_add_rms_norm(nu_commands *c, const nu_tensor *sum, const nu_tensor *dst, const nu_tensor *a,
                                  const nu_tensor *b, const nu_tensor *b_weight, const nu_tensor *weight, float eps);

/* ---- rotary position embeddings ---------------------------------------------------------- */

typedef enum nu_rope_layout {
    NU_ROPE_INTERLEAVED, /* pairs (x[2i], x[2i+1]): GGUF, llama.cpp, Meta's Llama */
    NU_ROPE_HALF,        /* pairs (x[i], x[i + rotary_dims/2]): Hugging Face's rotate_half, llama.cpp's
                          * NEOX (Qwen2/3, Gemma, Phi-3, Mistral's HF files) */
} nu_rope_layout;

/* The rotating kernels' tuning (nu_op_rope, and the cache writes with RoPE: nu_op_kv_write,
 * nu_op_kv_append_rope). Zero fields take the defaults; out of range is refused, naming the
 * field. The environment may override them for sweeps (docs/knobs.md). */
typedef struct nu_rope_tune {
    uint32_t local; /* threads a workgroup: nu_op_rope 1..1024 (0: 256); the cache writes a power of two
                     * 32..1024 (0: 64, fewer where the device allows fewer) */
    uint32_t heads; /* nu_op_rope: heads a thread shares its sines and cosines with, 1..8 (0: 2) */
} nu_rope_tune;

typedef struct nu_rope_desc {
    nu_rope_layout layout;
    float theta;            /* base of the frequencies (0: 10000; else positive and finite) */
    uint32_t rotary_dims;   /* leading dimensions of each head rotated (0: all; even, at most
                             * head_dim); the others are copied unchanged */
    int32_t position_offset;/* added to every position */
    /* Positions: an I32 tensor (any view) with one entry per token: [tokens] (for a 4-D src,
     * shared by every batch), [batch, tokens] or [batch * tokens]; or NULL for 0, 1, 2, ... in
     * each batch. The offset is added to either. A batch of sequences passes its rows' positions
     * here and the same tensor to nu_op_kv_write and nu_attention_desc.positions. */
    const nu_tensor *positions;
    /* Frequency scaling (zero: none), as llama.cpp's rope with freq_scale and freq_factors:
     * linear_factor: positions divided by it (Hugging Face rope_scaling "linear", GGUF
     *   rope.scaling.type linear with rope.scaling.factor); 0 or 1: none, else positive, finite.
     * freq_factors: F32 [rotary_dims / 2], any view: pair i's frequency divided by
     *   freq_factors[i] (Llama 3.x's rope_freqs.weight, Phi-3's LongRoPE long or short factors).
     *   NULL: none. Factors must be positive and finite (not checked: they are buffer contents).
     * attn_factor: cos and sin multiplied by it (LongRoPE's and YaRN's magnitude scaling, GGUF
     *   rope.scaling.attn_factor: Phi-3 128K's sqrt(1 + ln(s) / ln(original context))); 0: 1. */
    float linear_factor;
    const nu_tensor *freq_factors;
    float attn_factor;
    nu_rope_tune tune;
} nu_rope_desc;

/* dst = src rotated: src is [tokens, heads, head_dim] or [batch, tokens, heads, head_dim], floats,
 * any view (a slice of a fused qkv projection's output, say); dst contiguous of src's shape, or
 * src itself (in place, the same view). head_dim is even. Pair i of a head at position p turns
 * by a = (p / linear_factor) * theta^(-2i / rotary_dims) / freq_factors[i]:
 * (y0, y1) = attn_factor (x0 cos a - x1 sin a, x0 sin a + x1 cos a). The angle is computed in F32
 * (the inverse frequency by exp2 of -2i log2(theta) / rotary_dims, divided by the pair's factor;
 * the position times 1 / linear_factor, rounded once on the host), as Hugging Face and llama.cpp
 * do, so it is off from the exact angle by a few F32 roundings of the angle: each output is
 * within attn_factor (|x0| + |x1|) (|a_max| + 1) 2^-22 of the float64 value, a_max the largest
 * angle (|p| / linear_factor / the smallest factor), plus dst's rounding (the test's bound;
 * measured on lavapipe with inputs in [-1, 1] and positions to 32767: at most 2.1e-3, against a
 * bound of 1.6e-2). Scaling that changes nothing (factors of 1) gives the unscaled bits.
 * desc is required (NULL is refused). */
nu_status nu_op_rope(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_rope_desc *desc);

/* ---- embeddings -------------------------------------------------------------------------- */

/* dst[t, :] = table[ids[t], :] (an embedding lookup): table [vocab, dim] of a float dtype (any
 * view: rows with a stride, say) or a block dtype but Q4_0_SOA and Q6_K_SOA (rows of whole blocks; any row
 * stride in blocks), ids an I32 1-D tensor of n tokens (any stride), dst [n, dim] float,
 * contiguous, not overlapping table or ids. An id outside [0, vocab) gives a row of zeros. Values
 * are exact: the table's value (block dtypes: nu_op_copy's dequantized F32) rounded to dst's
 * dtype. */
nu_status nu_op_gather(nu_commands *c, const nu_tensor *dst, const nu_tensor *table, const nu_tensor *ids);

/* The gather kernel's tuning (kernels/gather/gather.comp; NUVEC_TUNE_GATHER overrides it:
 * docs/knobs.md). Zero fields are the defaults. */
typedef struct nu_gather_tune {
    uint32_t local; /* threads a workgroup, 1..1024 (default 256) */
    uint32_t units; /* 8-element units (or elements) a thread loads before it stores, 1..4 (default 2) */
} nu_gather_tune;
typedef struct nu_gather_desc {
    nu_gather_tune tune;
} nu_gather_desc;
/* nu_op_gather with a desc (NULL or zero: nu_op_gather). */
nu_status nu_op_gather_ex(nu_commands *c, const nu_tensor *dst, const nu_tensor *table, const nu_tensor *ids,
                          const nu_gather_desc *desc);

/* ---- matrix-vector products -------------------------------------------------------------- */

/* dst = x * weight^T: weight [n, k] as stored by weight files (row-major [out, in]) of a float
 * or block dtype (any of them, Q4_0_SOA and Q6_K_SOA included), x [m, k] float with 1 <= m <= 8 (decode: one
 * to a few tokens), dst [m, n] float; all three of rank 2. Accumulates in F32 (block weights:
 * D * sum(x * q) a group of 8, plus M * sum(x) for the formats with a minimum). weight and x may
 * be any views (a slice of a fused weight's rows or columns, transposed); weight rows that are
 * contiguous and start 16-byte aligned (and block weights) take the fast path. m = 0 or n = 0
 * records nothing; k = 0 with a non-empty dst is refused.
 * Block weights (but the repacked ones) on a device with integer dot products
 * (NU_FEATURE_INTEGER_DOT_PRODUCT), subgroup arithmetic and shuffles, where x's rows fit in shared
 * memory (52 bytes per 32 elements and row), take the dot path (kernels/matvec/matvec_dot.comp):
 * x is rounded to 8 bits per 32-element block, as llama.cpp's quantized products do (step
 * max|x| / 127 of the block), so each x element moves by at most half a step; elsewhere, or with
 * tune.float_path, x is used as it is (kernels/matvec/matvec_kernel.glsl).
 * For more rows, nuvec/ops.h's matrix products (the kernel library's second part) are the fast
 * path. Q4_0_SOA weights (Q4_0 repacked by nu_op_copy: nuvec/tensor.h; any slice of rows) take
 * their own kernel (kernels/matvec/matvec_soa.glsl), with x rounded as on the dot path where the
 * device has integer dot products and x's rows fit in shared memory (40 bytes per 32 elements
 * and row), in F32 on the exact values elsewhere; it needs subgroup arithmetic (else
 * NU_ERROR_UNSUPPORTED); so do Q6_K_SOA weights (Q6_K repacked by nu_op_copy, whole groups of
 * 8 super-blocks), and Q4_K, Q5_K and Q6_K where the device has subgroup arithmetic (unless
 * tune.generic_k_formats). The kernels' tuning is nu_matvec_desc's tune (below); the environment
 * variables NUVEC_MATVEC and NUVEC_MATVEC_SOA override it for sweeps (docs/knobs.md). */
#define NU_MATVEC_MAX_ROWS 8
nu_status nu_op_matvec(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x);

/* The matrix-vector kernels' tuning: zero fields are the defaults, which depend on the kernel the
 * weights take (the float path, the dot path, Q4_0_SOA's; src/ops/matvec.c and matvec_soa.c give
 * the H200 measurements behind them). A value outside its range fails the op, naming the field.
 * NUVEC_MATVEC (the float and dot paths) and NUVEC_MATVEC_SOA override these for sweeps. */
typedef struct nu_matvec_tune {
    uint32_t local;    /* threads a workgroup, a power of two 32..1024 (default: float path 256, F32
                        * weights 128; dot path 1024; Q4_0_SOA 1024, and the K formats on its
                        * kernel too but for one row of x with glu_up or at most 1024 weight rows:
                        * 512) */
    uint32_t rows;     /* weight rows a row group, 1..8 (default: float path 2, 4 for m > 2; dot
                        * path and Q4_0_SOA 1) */
    uint32_t unroll;   /* units (8 elements float path, 16 dot path, 32 Q4_0_SOA) each thread has in
                        * flight a row, 1..8 (default: float path 2, dot path 4, Q4_0_SOA 2; the K
                        * formats on its kernel: Q4_K's and Q5_K's pairs of runs, 1; their single
                        * runs and Q6_K's, 2) */
    uint32_t groups;   /* dot path and Q4_0_SOA: most workgroups (each reads x once; the grid loops
                        * over the rows), 1..65535 (default: dot path 264, Q4_0_SOA 132; 264 where
                        * local's default is 512) */
    uint32_t split;    /* dot path and Q4_0_SOA: subgroups sharing a row group, a power of two 1..32
                        * (default: chosen by the shape) */
    uint32_t glu_rows; /* rows a row group with glu_up (gate and up rows each), 1..8 (default: rows) */
    bool float_path;   /* block weights on the float path, x unrounded (default: the dot path where
                        * it applies) */
    bool no_subgroup;  /* the float path's sums by a shared-memory tree, not subgroup arithmetic */
    bool prefetch;     /* Q4_0_SOA and the K formats' runs: the first weight loads issued before x
                        * is read (default off) */
    bool k_single_runs; /* Q4_K and Q5_K on Q4_0_SOA's kernel: each lane takes one 16-byte run at a
                        * time, not the two runs of a super-block that share their scales (read and
                        * decoded once for both; default: the pairs) */
    bool generic_k_formats; /* Q4_K, Q5_K and Q6_K weights on the dot and float paths every block
                        * format takes, not on Q4_0_SOA's kernel, which reads their super-blocks as
                        * 16-byte runs (default: that kernel, where the device has subgroup
                        * arithmetic and subgroups of 8 or more; its knobs are Q4_0_SOA's) */
} nu_matvec_tune;

/* The product fused with what a decoder layer does around it, in the product's own dispatch (one
 * dependency level where the separate ops take two or three; decode runs one level after the
 * other, and on the H200 each costs about 2.4 us). Every field may be combined with the others;
 * a zero desc (or NULL) is nu_op_matvec. The arguments are nu_op_matvec's; dst = residual +
 * glu(product of the normalised x + bias):
 *   norm_weight: RMSNorm of each row of x first: the product takes x[r, i] * s_r * norm_weight[i]
 *     with s_r = 1 / sqrt(mean_i(x[r, i]^2) + norm_eps), the mean over x's k elements in F32
 *     (nu_op_rms_norm's definition). norm_weight [k] float, any view; norm_eps > 0 and finite.
 *     NULL: x as it is.
 *   bias: added to the product (x weight^T, the gate's with glu_up) before the GLU and the
 *     residual: bias [n] float, any view (Qwen2's q/k/v biases). NULL: none.
 *   glu_up: a gated linear unit: with glu_up (a second weight of weight's shape and dtype, any
 *     view: a stacked gate-up matrix's second half, say) dst = act(x weight^T + bias) *
 *     (x glu_up^T), act by glu: SiLU (SwiGLU, the default) or GELU's tanh form (GeGLU); the
 *     activations as nu_op_unary computes them. NULL: the plain product (glu must then be 0).
 *   residual: added last: residual [m, n] float, any view; it may be dst itself (in place: each
 *     element is read by the invocation that then writes it), not another overlap of dst.
 *     NULL: none.
 *   tune: the kernels' tuning (above).
 * Accuracy: as the separate ops in sequence, with the intermediates kept in F32 (so closer to the
 * exact value than the separate ops with F16 intermediates). */
typedef struct nu_matvec_desc {
    const nu_tensor *norm_weight;
    float norm_eps;
    const nu_tensor *glu_up;
    const nu_tensor *residual;
    const nu_tensor *bias;
    nu_glu_activation glu;
    /* post_norm: a block output's post-norm and residual add after the product (Gemma's sandwich
     * norms): dst keeps the product and stream[r, :] += rms_norm(dst[r, :]) * post_norm (eps
     * post_norm_eps > 0, finite; nu_op_rms_norm's arithmetic, its sum of squares in another order).
     * post_norm [n] float, any view; stream [m, n] F32, contiguous, not overlapping dst, weight,
     * x or post_norm; dst F32; not with residual. Q4_0_SOA's and the K formats' kernel does it in
     * the product's own dispatch (the last workgroup to finish adds: nu_op_matvec_fuses_post_norm
     * says where); the others record nu_op_rms_norm and nu_op_add after the product. NULL (both):
     * none. */
    const nu_tensor *post_norm, *stream;
    float post_norm_eps;
    nu_matvec_tune tune;
} nu_matvec_desc;
nu_status nu_op_matvec_fused(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x,
                             const nu_matvec_desc *desc);
/* Whether nu_op_matvec_fused with this weight and desc's tune (and the environment's knobs) does
 * desc.post_norm in the product's own dispatch (false: as separate ops after it). */
bool nu_op_matvec_fuses_post_norm(nu_device *d, const nu_tensor *weight, const nu_matvec_desc *desc);

/* ---- matrix products --------------------------------------------------------------------- */

/* dst[.., m, n] = sum_k a[.., m, k] * b[.., n, k] (+ bias[n]): b is weight-shaped [n, k] (row-major
 * [out, in], as weight files store it), so a linear layer is nu_op_matmul(c, y, x, weight, bias).
 * a is [m, k] or [batch, m, k] float; b [n, k] or [batch, n, k], float or a block dtype (Q4_0_SOA
 * only where the tensor-core kernel below takes the product, else NU_ERROR_INVALID_ARGUMENT;
 * Q6_K_SOA on both kernels); dst [m, n] or [batch, m, n] float, not overlapping the inputs, its columns
 * contiguous and its rows and batches apart (a row-major matrix or a column slice of a wider one:
 * two products may write the two halves of one output); bias NULL or
 * [n] float (any stride). A batch of 1 (or rank 2) broadcasts that operand to every batch of dst;
 * dst's batch is the larger of a's and b's. Every dtype combination is accepted (F32 a with block b
 * too). Accumulates in F32 (block weights dequantized exactly, nu_op_copy's values); dst is rounded
 * once. Transposes are views (nu_tensor_transpose): a and b may have any strides; rows of k
 * contiguous and 16-byte aligned take the vector loads. Devices with cooperative matrices try the
 * tensor-core kernel first (kernels/matmul/matmul_coopmat.comp: F16 a against F16, Q8_0, Q4_0,
 * Q4_0_SOA, Q4_K, Q6_K or Q6_K_SOA b, which it decodes into F16 tiles itself; the other block
 * dtypes are routed to the tiled kernel; matmul_coopmat_bf16.comp: BF16 a against BF16 b where the
 * device has BF16 matrix units, NU_FEATURE_BFLOAT16); everything else takes the tiled
 * shared-memory kernel (kernels/matmul/matmul.comp: blocks dequantized into shared memory by
 * kernels/quant.glsl) with a tile chosen by shape (src/ops/matmul.c documents the table). m, n or
 * batch 0 records nothing; k = 0 with a non-empty dst is refused. */
nu_status nu_op_matmul(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                       const nu_tensor *bias);

/* The tiled kernel's tile variants (src/ops/matmul.c's table). */
typedef enum nu_matmul_variant {
    NU_MATMUL_VARIANT_AUTO, /* by shape (the default) */
    NU_MATMUL_SMALL_M,      /* 16 x 128 tiles, 4 x 4 a thread, k 16 a slice (the default for m <= 16) */
    NU_MATMUL_SKINNY_N,     /* 64 x 32, 4 x 2, k 32 (n <= 64) */
    NU_MATMUL_SQUARE,       /* 64 x 64, 4 x 4, k 16 (the rest) */
    NU_MATMUL_LARGE,        /* 128 x 128, 8 x 8, k 16 (m, n >= 512 where the device has 16 KiB of shared memory) */
    NU_MATMUL_VARIANT_COUNT
} nu_matmul_variant;

/* nu_op_matmul's tuning: zero fields are the defaults. NUVEC_MATMUL (the tiled kernel) and
 * NUVEC_MATMUL_TC (the matrix units) override these for sweeps (docs/knobs.md). A tile the device
 * cannot run fails the op (NU_ERROR_UNSUPPORTED), a value outside its range too
 * (NU_ERROR_INVALID_ARGUMENT), naming it. */
typedef struct nu_matmul_tune {
    nu_matmul_variant variant; /* the tiled kernel's table entry (default: by shape) */
    uint32_t bm, bn, bk;       /* the tile's rows of a, rows of b and k a slice, 1..256 (default: the entry's) */
    uint32_t tm, tn;           /* each thread's block of dst, 1..16 (default: the entry's) */
    bool scalar_loads;         /* every load through the strides (no 16-byte vector loads) */
    bool no_tensor_cores;      /* the tiled kernel where the matrix-unit kernel would run */
    uint32_t tc_wm, tc_wn;     /* matrix units: subgroups along m and n, 1..8 (default by shape: 2 x 2,
                                * 1 x 4 for m <= 64, 2 x 4 for a grid under two tiles a compute unit) */
    uint32_t tc_fm, tc_fn;     /* 16 x 16 fragments a subgroup along m and n, 1..8 (default 4 x 4; 4 x 2
                                * with the 1 x 4 and 2 x 4 subgroups) */
    uint32_t tc_bk;            /* k a step, 32, 64, 128 or 256 (default 64) */
    uint32_t tc_buffers;       /* shared-memory tile buffers, 1 or 2 (default 1) */
    uint32_t tc_probe;         /* diagnostics, 0..3 (0: in use; bench/RESULTS.md) */
    uint32_t tc_splits;        /* matrix units: k split over this many workgroups (each k / splits, in
                                * whole 256-element runs), 1..64, their F32 partial sums added by a
                                * second dispatch (default: m <= 64 where the grid holds fewer than 16
                                * subgroups a compute unit, up to that; else 1) */
} nu_matmul_tune;
typedef struct nu_matmul_desc {
    const nu_tensor *bias; /* nu_op_matmul's bias (NULL: none) */
    /* A gated linear unit on the product: b's n rows are a gate matrix then an up matrix ([gate; up],
     * n even, as a stacked FFN weight), bias (if any) [n] alike, and dst is [.., m, n / 2] with
     * dst[.., i, j] = act(y[.., i, j]) * y[.., i, j + n / 2] for y = a b^T (+ bias), act glu's
     * activation, in F32 (the bits of the product into an F32 tensor, then nu_op_swiglu, or
     * nu_op_unary's GELU_TANH and nu_op_mul), rounded once to dst's dtype. The product goes through
     * F32 device memory of the recording's (m x n floats a batch, and k's splits: nu_op_matmul's
     * split-K partials), summed and gated by one more dispatch: where the product splits k anyway
     * (few rows: a batched decode step's) that costs nothing, and it saves the GLU's own dispatch. */
    bool glu_stacked;
    nu_glu_activation glu;
    nu_matmul_tune tune;
} nu_matmul_desc;
/* nu_op_matmul with a desc (NULL or zero: nu_op_matmul without a bias). */
nu_status nu_op_matmul_ex(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                          const nu_matmul_desc *desc);

/* The row ops' layout over rows (reductions, argmax, softmax, norms: src/ops/rows.c), a struct for
 * the ops' descs to carry; NUVEC_OPS_ROWS overrides it (docs/knobs.md). Zero fields are the
 * defaults. */
typedef struct nu_rows_tune {
    uint32_t local;      /* threads a workgroup, 1..4096 (rounded down to a power of two and to the
                          * device's limit; default 256) */
    uint32_t long_local; /* threads a workgroup for long rows (default 1024) */
    uint32_t long_row;   /* elements from which a row is long (default 16384) */
    uint32_t min_team;   /* fewest threads a row (a power of two at least 8; default 32) */
    uint32_t unroll;     /* 8-element steps each thread loads before it adds, 1..8 (default 2) */
} nu_rows_tune;

/* ---- attention and the KV cache ---------------------------------------------------------- */

/* The KV cache: per layer one K tensor and one V tensor, each [slots, positions, kv_heads,
 * head_dim] (F32, F16 or BF16), slot s holding one sequence, its position p's keys at [s, p]; a
 * rank-3 tensor [positions, kv_heads, head_dim] is one slot. The ops come in two forms:
 * - The per-row (batched) form, for a batch of sequences as the unit of work: each row of a step
 *   is {token, sequence slot, position}, and the slots and positions are I32 tensors (buffer
 *   contents): nu_op_kv_write writes the rows' keys and values (RoPE on the way in), nu_op_rope
 *   with desc.positions turns q, nu_op_attention with desc.positions and desc.slots attends (or,
 *   for decode rows of different slots, does all three in its dispatch: its fresh form).
 *   One recorded graph then serves any mix of sequences, positions and lengths (continuous
 *   batching: decode rows of B sequences, a prefill chunk of one, or both), and a step changes
 *   buffer contents only (no per-layer parameters).
 * - The scalar form, one sequence in slot 0: nu_op_kv_append(_rope) at a position,
 *   nu_attention_desc.q_position and kv_length, push constants a graph may declare parameters
 *   (nu_op_graph_param). Kept for single-sequence callers (libnuvec_llm's runner today). Both
 *   forms run the same kernels, the per-row one with two I32 loads more a workgroup, so neither
 *   is faster on the GPU (`nuvec bench ops` compares them: attn_decr against attn_dec); the
 *   scalar form needs no I32 tensors, but a graph's step sets parameters in every layer.
 * A row whose position is negative or at least the cache's positions, or whose slot is negative
 * or at least the cache's slots, is out of range: it writes nothing, reads nothing outside the
 * ops' bindings, and its attention output is zeros. */

typedef enum nu_attention_path {
    NU_ATTENTION_PATH_AUTO,    /* decode up to NU_ATTENTION_DECODE_ROWS rows, and for rows with
                                * slots (desc.slots) no more than the cache's slots; prefill past them */
    NU_ATTENTION_PATH_DECODE,  /* each row on its own, its keys split over workgroups: the path for
                                * a batch of decode rows of different sequences, any row count */
    NU_ATTENTION_PATH_PREFILL, /* tiles of rows sharing each block of keys: rows of one sequence */
} nu_attention_path;

typedef enum nu_attention_combine {
    NU_ATTENTION_COMBINE_AUTO,     /* SEPARATE, but FUSED in the fresh form (desc.fresh_k) where a
                                    * workgroup holds one query head and there are at most fused_max
                                    * splits (H100 decode: bench/RESULTS.md) */
    NU_ATTENTION_COMBINE_SEPARATE, /* a second dispatch merges the decode splits (attn_combine.comp) */
    NU_ATTENTION_COMBINE_FUSED,    /* the last split of each row and head merges them (one dispatch,
                                    * one dependency level fewer; slower on the H200 except at 32768
                                    * keys with 32 KV heads: bench/RESULTS.md) */
} nu_attention_combine;

/* nu_op_attention's kernel choices (policy, not semantics: every setting gives the same result
 * within the op's accuracy). Zero fields take the defaults; out of range is refused, naming the
 * field. The environment may override them for sweeps (docs/knobs.md). */
typedef struct nu_attention_tune {
    nu_attention_path path;
    uint32_t splits;      /* decode: key splits, 1..65535 (0: max_length / chunk, rounded up;
                           * by_key's below) */
    uint32_t chunk;       /* decode: keys a split (0: 32 up to 1024 keys, 128 up to 8192, 256 past;
                           * by_key's below) */
    uint32_t br, bc;      /* prefill tile: query rows (a power of two, 4..64) and keys (1..128; 0: br)
                           * (0: 16 x 16 for head_dim >= 128, 32 x 32 below; keys then rows halved
                           * to fit the device's shared memory). Setting them turns off the
                           * matrix units' kernel */
    bool no_subgroup;     /* decode: attn_decode.comp where the subgroup kernel would run */
    uint32_t keys;        /* subgroup decode: keys a subgroup has in flight, 1..16 (0: 4) */
    uint32_t heads;       /* subgroup decode: query heads a workgroup, 1..8 (0: 2; fewer where they
                           * do not divide q_heads / kv_heads or do not fit shared memory) */
    bool no_matrix_units; /* prefill: attn_prefill.comp where the matrix units' kernels would run */
    uint32_t tc_rows;     /* matrix-unit prefill: query rows a workgroup, 64 or 128 (0: 64 with the
                           * softmax in registers, else 128, or 64 where 128 does not fit shared
                           * memory) */
    uint32_t tc_keys;     /* matrix-unit prefill with the softmax in registers: keys a block, 32 or
                           * 64 (0: 64, or 32 where 64 does not fit shared memory) */
    bool no_fragments;    /* matrix-unit prefill: the softmax through shared memory even where the
                           * device's fragment layout lets it stay in registers (NVIDIA's
                           * mma.m16n8k16 layout, checked once a device; head_dim up to 128) */
    nu_attention_combine combine;
    uint32_t fused_max;   /* the most splits the last split merges (COMBINE_FUSED, or AUTO's
                           * choice of it), 2..65535 (0: 32); more go to attn_combine.comp */
    bool by_key;          /* decode: a key a thread for the scores (attn_decode_keys.comp) where
                           * k and v are F16 rows contiguous and 16-byte aligned and head_dim a
                           * multiple of 8 up to 256 (default: there, for 4 query heads or more a
                           * KV head and max_length 4096 or more); heads a workgroup as `heads`
                           * says (0: the whole group of a KV head); splits and chunk 0: 256
                           * keys a split, at most 32 splits */
    bool no_by_key;       /* decode: never attn_decode_keys.comp (over by_key) */
} nu_attention_tune;

typedef struct nu_attention_desc {
    float scale;          /* multiplies q . k (0: 1 / sqrt(head_dim)); finite */
    /* The scalar form (positions NULL): row t is at position q_position + t of slot 0. */
    bool causal;          /* row t sees keys 0 .. q_position + t only */
    uint32_t q_position;  /* sequence position of q's first row (causal masks and windows) */
    uint32_t kv_length;   /* cache positions valid: keys 0 .. kv_length - 1 (1 .. positions) */
    /* The per-row form: row t at position positions[t] of slot slots[t] sees keys 0 ..
     * positions[t] of that slot (causal), so rows of one sequence in one step see each other as
     * their positions allow. q_position and kv_length must be 0 (causal is implied). */
    const nu_tensor *positions; /* I32 [tokens], any view */
    const nu_tensor *slots;     /* I32 [tokens], any view; NULL: slot 0 */
    /* The most keys any row will see in the launches of what is recorded (the decode path's split
     * count is chosen from it; a row with more keys is still right, its splits longer). 0: the
     * scalar form's kv_length, the per-row form's cache positions; either capped by window. */
    uint32_t max_length;
    /* Both forms: */
    uint32_t window;      /* sliding window: the row at position p sees keys j > p - window only
                           * (0: none; Gemma 2's 4096, Mistral's). The scalar form needs causal */
    float softcap;        /* logit softcap: s = softcap * tanh(s / softcap) on each scaled score
                           * before the softmax (0: none; else positive, finite; Gemma 2's 50) */
    /* The fresh form: a decode step whose rows bring their own keys and values straight from their
     * projections, so that nu_op_rope and the cache writes run inside this op's dispatch (one
     * dependency level fewer in a graph). Row t at position p (below): its q is turned by
     * fresh_rope at p, its key fresh_k[t] turned likewise and its value fresh_v[t] are written into
     * k and v at p (rounded to the cache's dtype), and the row attends to the keys it sees with
     * them (its own included). Two forms:
     * - The scalar form's one row (tokens 1) at position kv_length - 1 of slot 0 (q_position and
     *   causal are not read; a window counts back from that position), attending to keys 0 ..
     *   kv_length - 1: the same bits as nu_op_rope (position_offset kv_length - 1),
     *   nu_op_kv_append_rope, nu_op_kv_append, then this op with q_position kv_length - 1 (the
     *   cache's contents and dst). A graph's kv_length may be a launch parameter (then the
     *   launches move the position too).
     * - The per-row form's rows (a batched decode step of B sequences, one row each), row t at
     *   positions[t] of slot slots[t], attending to keys 0 .. positions[t] of that slot: the same
     *   bits as nu_op_rope (desc.positions), nu_op_kv_write of k (with rope) and of v, then this op
     *   in the per-row form. Each slot may appear at most once among a launch's rows in range
     *   (slots NULL: one row in range), since rows do not see each other's fresh keys: where two
     *   rows in range share a slot, their outputs are wrong (each may read the other's position
     *   before or after it is written), as is a position both write (a mix of their keys), but
     *   nothing outside the bindings is read or written, and the other rows are right. A row out
     *   of range writes nothing and reads nothing (its output zeros), so it may name any slot, as
     *   a batch's padding rows do.
     * fresh_k and fresh_v: [tokens, kv_heads, head_dim] float, each row's heads contiguous and
     * head_dim apart (rows any distance apart: a slice of a fused q|k|v projection), not
     * overlapping k, v or dst; k and v are written, so they may not overlap each other, q, the
     * positions or the slots. Refused (NU_ERROR_INVALID_ARGUMENT): one of the two NULL, the scalar
     * form with more than one row, tune.path PREFILL (the fresh form runs on the decode path, any
     * row count up to its 65535). NULL (both): not fresh. */
    const nu_tensor *fresh_k, *fresh_v;
    const nu_rope_desc *fresh_rope; /* NULL: none; else as nu_op_kv_append_rope's (positions NULL,
                                     * position_offset 0: each row's position drives it) */
    /* Per-head RMSNorms before the rotation (Qwen3's and Gemma 3's q and k norms): each of q's
     * heads, and the keys', x * w / sqrt(mean(x^2) + fresh_norm_eps), as nu_op_rms_norm over
     * rows of head_dim computes it (its sum in another order: within a few F32 roundings).
     * Weights float [head_dim], contiguous; NULL: none. */
    const nu_tensor *fresh_q_norm, *fresh_k_norm;
    float fresh_norm_eps;
    nu_attention_tune tune;
} nu_attention_desc;

/* Scaled dot-product attention with grouped-query heads: dst[t, h, :] = sum_j p_j v[j, h / g, :]
 * with p = softmax_j(s_j), s_j = scale * q[t, h, :] . k[j, h / g, :] (softcapped if asked), over
 * the keys j row t sees (the desc's forms above), g = q_heads / kv_heads. q [tokens, q_heads,
 * head_dim] float, any view (a slice of a fused projection); k and v [positions, kv_heads,
 * head_dim] or [slots, positions, kv_heads, head_dim] float, any views of one shape (the KV
 * cache); dst [tokens, q_heads, head_dim] float, contiguous; q_heads a multiple of kv_heads;
 * head_dim a multiple of 8 from 8 to 256 (64, 80, 96, 128 and 256 for the architectures; 8 and
 * 16 for tiny test models). A row that sees no key (out of range, or kv_length / window leaving
 * none) gives zeros. F32 arithmetic, the softmax online (the running maximum subtracted: no
 * overflow); within 2^-13 of max |v| of the float64 result plus dst's rounding (the tests').
 * The decode path (kernels/attention/attn_decode.comp; on devices with subgroup arithmetic
 * attn_decode_sg.comp, which reads each key row with a subgroup, or attn_decode_keys.comp, a key
 * row a thread: tune.by_key says where) splits each row's keys over
 * workgroups and merges the splits (attn_combine.comp, or the last split: tune.combine); the
 * split count is chosen when recording from max_length, and each launch splits the keys each
 * row has then. The op makes temporary device buffers for the partials (and the fused merge's
 * counters) and frees them right after recording (nuvec keeps them alive for the recorded work).
 * The prefill path (flash-attention style tiles: attn_prefill.comp) shares each block of keys
 * among a tile's rows; a tile whose rows belong to different slots takes its slots one after
 * the other (right, but with a pass over each slot's keys), so batches of decode rows of many
 * sequences want the decode path: the automatic choice takes it for rows with slots no more
 * than the cache's slots (tune.path DECODE forces it for more). Devices with cooperative matrices take a prefill kernel on
 * them (attn_prefill_frag.comp, the softmax in the fragments' registers, where the device's
 * fragment layout is the one it reads (NVIDIA's) and head_dim is at most 128; else
 * attn_prefill_coopmat.comp, the softmax through shared memory; p and scaled q rounded to F16,
 * within 2^-10 of max |v|) for F16 q, k, v with 16-byte aligned rows and head_dim a multiple of
 * 16 that fits its shared memory, in the scalar form (windows and softcaps too); everything else
 * takes attn_prefill.comp.
 * desc is required. In a graph, the scalar form's q_position and kv_length may be launch
 * parameters (nu_op_graph_param); the per-row form's are buffer contents. */
#define NU_ATTENTION_DECODE_ROWS 4
nu_status nu_op_attention(nu_commands *c, const nu_tensor *dst, const nu_tensor *q, const nu_tensor *k,
                          const nu_tensor *v, const nu_attention_desc *desc);

typedef struct nu_kv_write_desc {
    const nu_tensor *positions; /* I32 [rows], any view: row r's position (required) */
    const nu_tensor *slots;     /* I32 [rows], any view: row r's slot; NULL: slot 0 */
    /* RoPE on the way in (a step's keys: one dispatch instead of nu_op_rope then the write): each
     * row turned by its position as nu_op_rope turns it, bit for bit (the same F32 angle), then
     * rounded once to cache's dtype. positions and position_offset must be NULL and 0 (the rows'
     * positions drive the rotation). NULL: stored as they are. */
    const nu_rope_desc *rope;
} nu_kv_write_desc;

/* The per-row cache write: cache[slots[r], positions[r], :, :] = src[r, :, :] (rope'd if asked)
 * for each of src's rows, converting the dtype (rounded to nearest even). cache [positions,
 * kv_heads, head_dim] or [slots, positions, kv_heads, head_dim] float, contiguous; src [rows,
 * kv_heads, head_dim] float, any view, not overlapping cache or the I32 tensors. Rows out of
 * range write nothing; two rows at one (slot, position) leave one of them there. */
nu_status nu_op_kv_write(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, const nu_kv_write_desc *desc);

/* The scalar form's append: cache[position + t, :, :] = src[t, :, :] for each of src's tokens,
 * converting the dtype (rounded to nearest even). cache [max_positions, kv_heads, head_dim] float,
 * contiguous (a rank-4 cache's slot is a rank-3 view of it); src [tokens, kv_heads, head_dim]
 * float, any view, not overlapping cache. Refused when position + tokens > max_positions.
 * position is a push constant (graphs may change it per launch; the kernel writes no row past
 * max_positions whatever it is). */
nu_status nu_op_kv_append(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position);

/* nu_op_kv_append with RoPE on the way in: cache[position + t] = rope(src[t]) where token t turns
 * by sequence position position + t. rope is nu_op_rope's desc with positions NULL and
 * position_offset 0 (the append's position drives both, so one graph parameter,
 * NU_OP_VALUE_POSITION, moves both); its layout, theta, rotary_dims and scaling apply as in
 * nu_op_rope, with nu_op_rope's accuracy bound before cache's rounding. cache and src as
 * nu_op_kv_append's. */
nu_status nu_op_kv_append_rope(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position,
                               const nu_rope_desc *rope);

/* ---- ops in graphs ----------------------------------------------------------------------- */

/* The values of an op that a graph's launches may change without recording again. */
typedef enum nu_op_value {
    NU_OP_VALUE_POSITION = 0,   /* nu_op_kv_append's and nu_op_kv_append_rope's position; nu_op_rope's
                                 * desc->position_offset (I32) */
    NU_OP_VALUE_Q_POSITION = 1, /* nu_op_attention's desc->q_position (the scalar form) */
    NU_OP_VALUE_KV_LENGTH = 2,  /* nu_op_attention's desc->kv_length (the scalar form; at most the
                                 * cache's positions) */
} nu_op_value;

/* Declares `value` of the op recorded last into `recording` (made by nu_graph_record) a graph
 * parameter, as nu_graph_param does for a dispatch's push constants: *param gets its index, and
 * nu_graph_set_param(g, *param, &v, 4) sets the 4-byte value (uint32_t, or int32_t for the rope
 * offset) for the launches that follow. NU_ERROR_INVALID_ARGUMENT when the last command recorded
 * is not an op or that op has no such value. The ops check their values when recording; a launch's
 * values are not checked again, and the kernels write nothing outside their bindings whatever
 * they are (kv_append: no row past the cache's positions; attention: at most the cache's keys). */
nu_status nu_op_graph_param(nu_commands *recording, nu_op_value value, uint32_t *param);

NU_END_DECLS
#endif
