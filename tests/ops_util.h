/* ops_util.h: what the kernel library's tests (test_ops_*.c) share: element conversions written
 * from the formats' definitions, random tensors, reading tensors back, and comparing against a
 * CPU reference with a stated tolerance. */
#ifndef NU_TEST_OPS_UTIL_H
#define NU_TEST_OPS_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"

/* IEEE half and bfloat16 <-> float, round to nearest even (NaN kept a NaN). */
uint16_t nt_f32_to_f16(float f);
float nt_f16_to_f32(uint16_t h);
uint16_t nt_f32_to_bf16(float f);
float nt_bf16_to_f32(uint16_t h);
/* `f` rounded to what dtype holds (F32, F16, BF16: the value read back). */
float nt_round_to(nu_dtype dtype, float f);

/* A host-side tensor: a buffer's bytes, a view of them, and the values of its elements (row-major,
 * as the reference computes with them). */
typedef struct nt_tensor {
    nu_tensor t;       /* the view (t.buffer: a shared buffer holding `bytes`) */
    uint8_t *bytes;    /* the buffer's bytes as uploaded */
    size_t size;
    float *values;     /* numel values, row-major over t's shape (the exact value of each element) */
    uint64_t numel;
} nt_tensor;

/* A contiguous tensor of `dtype` and `shape` filled with random values in [lo, hi) (rounded to the
 * dtype), starting `pad` elements into its buffer (pad > 0 makes its first element unaligned). */
nt_tensor nt_tensor_random(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad,
                           float lo, float hi, uint64_t *seed);
/* A 1-D I32 tensor holding v[0..n), from element `pad`, every `stride`-th element (a strided
 * view when stride > 1). */
nt_tensor nt_tensor_i32(nu_device *d, const int32_t *v, int64_t n, uint64_t pad, int64_t stride);
/* An empty (poisoned: NaN bytes) contiguous output tensor. */
nt_tensor nt_tensor_output(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad);
/* Element values of any view of `h`'s buffer (with `h`'s bytes), row-major over view's shape. */
void nt_tensor_values(const nt_tensor *h, const nu_tensor *view, float *out);
/* The same into a new array (malloc; the caller frees it). */
float *nt_tensor_values_new(const nt_tensor *h, const nu_tensor *view);
/* Reads the GPU buffer of `out` back into out->bytes and refreshes out->values. */
void nt_tensor_download(nt_tensor *out);
void nt_tensor_free(nt_tensor *h);

/* GGUF's block formats on the CPU: nuvec/quant.h's nu_quantize (without importances) and
 * nu_dequantize (ggml's values, bit for bit: the exact values the kernels must see), failing the
 * test on an error. `n` is a whole number of blocks; out holds them back to back. */
void nt_quantize(nu_dtype dtype, const float *x, uint64_t n, uint8_t *out);
void nt_dequantize(nu_dtype dtype, const uint8_t *blocks, uint64_t n, float *out);
/* A contiguous tensor of a block dtype (any of nu_quantize's): random values in [lo, hi)
 * quantized; `values` holds the dequantized (exact) elements. `pad_blocks` blocks precede it. */
nt_tensor nt_tensor_quantized(nu_device *d, nu_dtype dtype, uint32_t rank, const int64_t *shape, uint64_t pad_blocks,
                              float lo, float hi, uint64_t *seed);

/* The block dtypes every op that reads blocks takes (all but Q4_0_SOA), in nu_dtype's order, and
 * the elements a row of each must be a multiple of in a test that runs them all (256: the K
 * formats' super-blocks). */
#define NT_BLOCK_DTYPES 10
extern const nu_dtype nt_block_dtypes[NT_BLOCK_DTYPES];
bool nt_is_block(nu_dtype dtype);

/* The matrix-vector products' dot path (nuvec/ops.h: nu_op_matvec): whether it takes weight w
 * with m rows of x (norm: with the fused RMSNorm, whose sums of squares take shared memory too)
 * under `tune` (NULL: the defaults), and x as it rounds it: each 32-element block of x[0..n) to
 * dx * roundEven(x * (127 / max|x|)), dx = max|x| / 127 (in float, as the kernel), into xhat;
 * tie[i] is dx where x * (127 / max|x|) is within 1e-3 of a tie (the GPU may round it the other
 * way; the tolerance adds |w| dx there), else 0. */
bool nt_matvec_dot_path(nu_device *d, const nu_tensor *w, int64_t m, bool norm, const nu_matvec_tune *tune);
void nt_round_as_dot_path(const float *x, int64_t n, double *xhat, double *tie);

/* Fails the test unless every |got - want| <= abs + rel * |want| (NaN must match NaN); names
 * `what` and the first bad element. */
void nt_expect_close(const char *what, const float *got, const float *want, uint64_t n, float abs, float rel);
/* The tolerance of a result stored as dtype (the rounding of one store, relative). */
float nt_dtype_tolerance(nu_dtype dtype);

/* Whether the trace nu_trace_stop wrote at `path` has a command whose name starts with `kernel`
 * (a command buffer's dispatches are named by their kernels; a graph launch's are not). The file
 * is removed. */
bool nt_trace_has(const char *path, const char *kernel);
/* The same for n kernels at once: bit i set where a command's name starts with kernels[i]. */
unsigned nt_trace_which(const char *path, const char *const *kernels, int n);

/* A repacked tensor (Q4_0_SOA or Q6_K_SOA: nuvec/tensor.h) that nu_op_copy made from src (a Q4_0
 * or Q6_K view) in a shared buffer of its own, `offset` bytes in, the rest of the buffer poisoned
 * with 0xff; `bytes` holds the whole buffer read back after the repack (`size` bytes). */
typedef struct nt_repacked {
    nu_tensor t;
    uint8_t *bytes;
    size_t size;
} nt_repacked;
nt_repacked nt_repack(nu_device *d, const nu_tensor *src, nu_dtype to, uint64_t offset);
void nt_repacked_free(nt_repacked *r);
/* Fails the test (naming `label`) unless rows [r0, ..) of the repacked tensor and of src, the view
 * it was made from, dequantize (nu_op_copy) to the same bytes in F32, F16 and BF16; the repacked
 * one's output `pad` elements into its buffer. */
void nt_expect_same_dequantization(nu_device *d, const nt_repacked *r, const nu_tensor *src, int64_t r0, uint64_t pad,
                                   const char *label);

/* Records, commits and waits; fails the test on an error. */
void nt_run(nu_device *d, nu_status (*record)(nu_commands *c, void *arg), void *arg);
/* nt_run of nu_op_copy(dst, src). */
void nt_run_copy(nu_device *d, const nu_tensor *dst, const nu_tensor *src);

#endif
