/* op.h: what the kernel library's ops (nuvec/ops.h) share (op.c): each device's table of the
 * kernels they dispatch, binding tensors, the checks every op makes. An op records through the
 * public command API (nu_commands_dispatch), so hazard tracking orders it like any dispatch. */
#ifndef NU_OPS_OP_H
#define NU_OPS_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec/command.h"
#include "nuvec/ops.h"
#include "nuvec/tensor.h"
#include "vk/device.h"

/* Specialisation constants one op kernel takes at most. */
#define NU__OP_MAX_CONSTANTS 32

/* Per device: started at open, stopped at close (runtime/device.c). */
nu_status nu__ops_init(nu_device *d);
void nu__ops_fini(nu_device *d);

/* The embedded kernel `id` (kernels_table.h's NU__K_<name>) with `push_size` bytes of push
 * constants, specialised with constants 0..n-1 (NULL where n is 0), from the device's table
 * (created on first use; owned by the table; a kernel whose float16_t is bfloat16 through
 * nu__kernel_new_f16_as_bf16). */
nu_status nu__op_kernel(nu_device *d, unsigned id, uint32_t push_size, const uint32_t *constants, uint32_t n,
                        nu_kernel **out);

/* Whether the device's matrix units take the cooperative-matrix kernels (matmul_coopmat.comp,
 * attn_prefill_coopmat.comp; matmul_coopmat_bf16.comp for `operands` BF16): VK_KHR_cooperative_matrix
 * and the Vulkan memory model enabled, 16x16x16 products of two `operands` matrices (F16 or BF16)
 * + F32 at subgroup scope, and subgroups of at least `min_subgroup`; for BF16 also
 * VK_KHR_shader_bfloat16 enabled with BF16 cooperative matrices. */
bool nu__op_tensor_cores(const nu_device *d, nu_dtype operands, uint32_t min_subgroup);

/* The dtype code the shaders take for `dtype` (kernels/ops.glsl's NU_F32 0, NU_F16 1, NU_BF16 2,
 * NU_I32 3, ...: src/core/dtype.h's table, from which the shaders' header is generated). */
uint32_t nu__op_dtype_code(nu_dtype dtype);

/* Dtype sets for nu__op_check. NU__OP_BLOCK: GGUF's block formats, which every op that reads
 * blocks takes (decoded by kernels/quant.glsl); the repacked layouts (NU__OP_REPACKED: Q4_0_SOA,
 * Q6_K_SOA), which only the products and the copy read (Q4_0_SOA's matrix product only on the
 * matrix units), are apart. */
#define NU__OP_DTYPE(t) (1u << (t))
#define NU__OP_FLOAT (NU__OP_DTYPE(NU_DTYPE_F32) | NU__OP_DTYPE(NU_DTYPE_F16) | NU__OP_DTYPE(NU_DTYPE_BF16))
#define NU__OP_BLOCK                                                                            \
    (NU__OP_DTYPE(NU_DTYPE_Q8_0) | NU__OP_DTYPE(NU_DTYPE_Q4_0) | NU__OP_DTYPE(NU_DTYPE_Q4_1) |   \
     NU__OP_DTYPE(NU_DTYPE_Q5_0) | NU__OP_DTYPE(NU_DTYPE_Q5_1) | NU__OP_DTYPE(NU_DTYPE_Q4_K) |   \
     NU__OP_DTYPE(NU_DTYPE_Q5_K) | NU__OP_DTYPE(NU_DTYPE_Q6_K) | NU__OP_DTYPE(NU_DTYPE_IQ4_NL) | \
     NU__OP_DTYPE(NU_DTYPE_IQ4_XS))
#define NU__OP_REPACKED (NU__OP_DTYPE(NU_DTYPE_Q4_0_SOA) | NU__OP_DTYPE(NU_DTYPE_Q6_K_SOA))
/* A stride of block tensor t (elements: a multiple of its block's) in 16-bit halves, as the
 * shaders index blocks. */
uint32_t nu__op_block_halves(const nu_tensor *t, int64_t stride);

/* Checks what every op checks of one tensor: nu_tensor_check, a dtype in `dtypes`, its offset a
 * multiple of its element (or for block dtypes, 2 bytes), fewer than 2^32 elements, and the
 * device's 16-bit storage for 16-bit and block dtypes. The message names the op and the tensor. */
nu_status nu__op_check(const char *op, const char *name, const nu_tensor *t, uint32_t dtypes);
/* NU_ERROR_INVALID_ARGUMENT where t (checked first: nu_tensor_check) is a repacked dtype (Q4_0_SOA,
 * Q6_K_SOA), which only the products and nu_op_copy read: the message says to keep the tensor it
 * was made from for `op`. */
nu_status nu__op_no_soa(const char *op, const char *name, const nu_tensor *t);
/* NU_ERROR_INVALID_ARGUMENT unless a and b have the same rank and shape. */
nu_status nu__op_same_shape(const char *op, const char *an, const nu_tensor *a, const char *bn, const nu_tensor *b);
/* NU_ERROR_INVALID_ARGUMENT unless dst is contiguous. */
nu_status nu__op_contiguous(const char *op, const char *name, const nu_tensor *t);
/* Whether the bytes of a and b intersect (same buffer). */
bool nu__op_overlap(const nu_tensor *a, const nu_tensor *b);
/* Whether a and b are the same view (in-place elementwise ops). */
bool nu__op_same_view(const nu_tensor *a, const nu_tensor *b);
/* NU_ERROR_INVALID_ARGUMENT when dst overlaps src, unless `in_place` allows the same view. */
nu_status nu__op_no_alias(const char *op, const nu_tensor *dst, const char *name, const nu_tensor *src, bool in_place);

/* The binding of t: its buffer from t's offset rounded down to the device's storage-buffer offset
 * alignment, to the end of its last element (rounded up to whole 32-bit words where the buffer
 * has them). *first: t's first element's index in the binding, in elements (16-bit halves for
 * block dtypes). NU_ERROR_UNSUPPORTED when the range exceeds the device's largest binding. */
nu_status nu__op_bind(const char *op, const nu_tensor *t, nu_access access, nu_binding *out, uint32_t *first);
/* Whether the device's 16 x 16 F16 A fragments and F32 accumulators at subgroup scope (subgroups of
 * 32) are laid out as NVIDIA's mma.m16n8k16 (lane t's element i: row t / 4 + 8 ((i >> 2) & 1),
 * column 2 (t % 4) + (i & 1) + 8 ((i >> 1) & 1)), which kernels reading fragment elements by index
 * assume. VK_KHR_cooperative_matrix leaves the layout to the driver, so the first call runs
 * kernels/matmul/coopmat_layout.comp (one submission, waited for) and the answer is kept for the
 * device; false without the matrix units, or where the probe fails. */
bool nu__op_fragments_quad(nu_device *d);
/* A private buffer of n zeroed 32-bit counters named `name` (kernels/last_arrival.glsl's: fresh
 * memory, nu_buffer_from writes the zeros, so no fill is recorded); failures under op's name. */
nu_status nu__op_counters(nu_device *d, const char *op, size_t n, const char *name, nu_buffer **out);
/* An empty range of b (the device's placeholder, no use of b): a binding the kernel never reads. */
static inline nu_binding nu__op_unbound(nu_buffer *b)
{
    return (nu_binding){.buffer = b, .access = NU_ACCESS_READ, .offset = nu_buffer_size(b), .size = 0};
}

/* The vector path elementwise shaders take for contiguous tensors t[0..n-1] of one shape whose
 * first elements are first[0..n-1] in their bindings: 1 (eight elements a step, 16-byte loads)
 * when all are 16-bit and 16-byte aligned; 2 (four elements a step) when one is F32, F32 ones are
 * 16-byte and 16-bit ones 8-byte aligned; 0 (the strided path) otherwise. */
uint32_t nu__op_vector_path(const nu_tensor *const *t, const uint32_t *first, int n);

/* A one-dimensional grid for `threads` threads of `local`-thread workgroups, at most 65535
 * workgroups (shaders loop with the grid's stride past that). */
void nu__op_groups(uint64_t threads, uint32_t local, uint32_t groups[3]);

/* Tuning knobs from the environment, the developer overrides of docs/knobs.md (sweeps without a
 * rebuild): `var` holds "key=value" pairs (or bare words: value "") separated by spaces or commas.
 * Each is handed to apply(ctx, key, value), which sets the knob and returns true, or returns false
 * for an unknown key or a bad value: then this fails with NU_ERROR_INVALID_ARGUMENT, "fn: var has
 * 'key=value'; it takes <help>". NU_OK where var is unset or empty. The variable is read once per
 * device, at its first use there (`var` must be a string constant: it names the cache's entry),
 * so a device's ops keep one setting and recording does not scan the environment. */
nu_status nu__op_env_knobs(nu_device *d, const char *fn, const char *var, const char *help,
                           bool (*apply)(void *ctx, const char *key, const char *value), void *ctx);
/* A knob's value: a decimal number in min..max (a power of two too when pow2). */
bool nu__op_knob_u32(const char *value, uint32_t min, uint32_t max, bool pow2, uint32_t *out);

/* A field of a desc's tune struct (nuvec/ops.h: zero is the default), for nu__op_tune_check. */
typedef struct nu__op_field {
    const char *name;  /* "local": named as tune.local */
    uint32_t value;
    bool ok;           /* whether a non-zero value is in range */
    const char *range; /* "1..8" */
} nu__op_field;
/* NU_ERROR_INVALID_ARGUMENT for the first field whose value is not 0 and not ok: "fn: tune.name is
 * value; it takes 0 (the default) or range". */
nu_status nu__op_tune_check(nu_device *d, const char *fn, const nu__op_field *fields, int n);
/* *to[i] = given[i] for each given[i] that is not 0 (a tune's fields over the defaults). */
void nu__op_tune_take(uint32_t *const *to, const uint32_t *given, int n);

/* The strides of `t` seen as 4 dimensions aligned at the last (padded in front with 0s); shape
 * likewise (padded with 1s). Values fit 32 bits (checked by nu__op_check). */
void nu__op_dims4(const nu_tensor *t, uint32_t shape[4], uint32_t strides[4]);

#endif
