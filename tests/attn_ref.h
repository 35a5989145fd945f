/* attn_ref.h: the attention family's float64 references: nu_op_attention in both forms (the
 * scalar one's q_position and kv_length, the per-row one's positions and slots), with windows
 * and softcaps, and RoPE with its scaling (nu_op_rope, the cache writes' rotation); shared by
 * test_ops_attention.c, test_ops_attention_batch.c, test_ops_kv_cache.c and test_ops_rope.c. */
#ifndef NU_TEST_ATTN_REF_H
#define NU_TEST_ATTN_REF_H

#include "ops_util.h"

/* One nu_op_attention for nt_run (nt_record_attention's arg). */
typedef struct nt_attn_call {
    const nu_tensor *dst, *q, *k, *v;
    const nu_attention_desc *desc;
} nt_attn_call;
nu_status nt_record_attention(nu_commands *c, void *arg);

/* What the reference attends: q [tokens, hq, D], k and v [slots, positions, hkv, D] (row-major
 * values), desc's form, scale, window and softcap, and for the per-row form (desc->positions set)
 * the positions' and slots' contents (slot NULL: slot 0). */
typedef struct nt_attn {
    const float *q, *k, *v;
    int64_t tokens, hq, hkv, D, slots, positions;
    const nu_attention_desc *desc;
    const int32_t *pos, *slot;
} nt_attn;

/* The keys row t sees: [*lo, *hi) of *slot (an empty range for a row that sees none). */
void nt_attn_row(const nt_attn *a, int64_t t, int64_t *slot, int64_t *lo, int64_t *hi);

/* The part of v's largest magnitude the result may be off besides dst's rounding: 2^-13, or 2^-10
 * for the matrix units' kernel (its p and scaled q are rounded to F16). The kernels work in F32:
 * each score scale * q . k is off by at most about D 2^-24 scale sum |q k| (< 1e-5 with inputs
 * in [-1, 1] and scale <= 0.2), which moves each p by that relative amount; exp adds a few ulps
 * (Vulkan: 3 + 2|x| ulps, |x| < 30 here: < 4e-6), the softcap's tanh about 1e-6 of the cap; the
 * sums over at most a few thousand keys and the rescalings at most keys 2^-24 relative. All are
 * below 2^-13 of max_j |v_jd| (the output is a weighted mean of v). */
extern double nt_attn_v_tolerance;

/* Fails the test unless dst (downloaded, [tokens, hq, D]) matches the reference within that plus
 * its dtype's rounding; a row that sees no key must be exactly 0. */
void nt_expect_attention(const nt_tensor *dst, const nt_attn *a, const char *what);

/* RoPE: y = x rotated, x [rows, H, D] row-major, row r at position pos[r] (any offset included),
 * by desc's layout, theta, rotary_dims, linear_factor and attn_factor, pair i's frequency divided
 * by ff[i] (freq_factors' values; NULL: none). Returns the largest |angle| turned. */
double nt_rope_ref(const float *x, double *y, int64_t rows, int64_t H, int64_t D, const int32_t *pos,
                   const nu_rope_desc *desc, const float *ff);
/* The kernels' bound on an output against it (inputs in [-1, 1]; nuvec/ops.h's): each of a pair's
 * two outputs is off by at most attn_factor 2 (|amax| + 1) 2^-22, plus 1e-6. */
double nt_rope_tol(double amax, const nu_rope_desc *desc);

/* The tuning's fields that are set, as "splits=7 no_subgroup" (for messages), into buf. */
const char *nt_attn_tune_name(const nu_attention_tune *t, char *buf, size_t size);

#endif
