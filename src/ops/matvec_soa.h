/* matvec_soa.h: nu_op_matvec and nu_op_matvec_fused against Q4_0_SOA, Q6_K_SOA, Q4_K, Q5_K and Q6_K weights
 * (matvec_soa.c, kernels/matvec/matvec_soa.glsl), called by src/ops/matvec.c. */
#ifndef NU_OPS_MATVEC_SOA_H
#define NU_OPS_MATVEC_SOA_H

#include "ops/op.h"

/* Records dst = glu(x' weight^T + bias) + residual (nuvec/ops.h: nu_op_matvec_fused; desc NULL or
 * zero: nu_op_matvec) for a Q4_0_SOA, Q6_K_SOA, Q4_K, Q5_K or Q6_K weight. The caller has made nu_op_matvec's checks (dtypes,
 * ranks, shapes, m <= 8, dst contiguous and not overlapping weight or x; desc's fields) and
 * returned for an empty dst or k = 0; this checks desc's tensors again (norm_weight [k] float,
 * norm_eps > 0 and finite; glu_up of weight's dtype and shape; residual [m, n] float, dst's own
 * view or not overlapping it) and the knobs (desc->tune, then NUVEC_MATVEC_SOA over it). */
nu_status nu__matvec_soa(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *weight,
                         const nu_tensor *x, const nu_matvec_desc *desc);
/* Whether nu__matvec_soa takes weight as a Q4_K, Q5_K or Q6_K matrix (GGUF's super-blocks read as
 * Q4_0_SOA's 16-byte runs: matvec_soa.glsl): where d has subgroup arithmetic and subgroups of 8
 * or more, and desc's glu_up (if any) has weight's row stride. */
bool nu__matvec_soa_takes_k(nu_device *d, const nu_tensor *weight, const nu_matvec_desc *desc);

/* The knobs given to a matrix-vector kernel (desc->tune, then its environment variable over it),
 * each 0 where not given: the kernels' defaults then stand. */
typedef struct nu__mv_knobs {
    uint32_t local, rows, unroll;
    uint32_t groups;   /* MV_GROUPS_ALL: as many workgroups as the rows need */
    uint32_t split, glu_rows;
    int dot;           /* 1: the dot path where it applies, -1: the float path */
    int subgroup;      /* 1: subgroup arithmetic where the device has it, -1: never */
    int prefetch;      /* Q4_0_SOA: 1 on, -1 off */
    int k_runs;        /* Q4_K, Q5_K and Q6_K on matvec_soa's kernel: -1 never, else where it applies */
    int pairs;         /* Q4_K and Q5_K on matvec_soa's kernel: 1 runs by pairs, -1 one at a time */
} nu__mv_knobs;
#define MV_GROUPS_ALL 0xffffffffu

/* desc->tune's fields into *k, checked (a value outside its range fails, naming the field). */
nu_status nu__matvec_tune_knobs(nu_device *d, const char *fn, const nu_matvec_tune *t, nu__mv_knobs *k);
/* The keys both matrix-vector hosts' variables take (NUVEC_MATVEC in matvec.c, NUVEC_MATVEC_SOA
 * here): local=32..1024 (a power of two), rows=1..8, unroll=1..8, groups=0..65535 (0: as many as
 * the rows need), split=1..32 (a power of two), dot=0|1. Returns 1 when key is one of them and
 * value is good (the field set), 0 when the value is bad, -1 for another key. Defined in matvec.c. */
int nu__matvec_knob(const char *key, const char *value, nu__mv_knobs *k);

#endif
