/* matvec_soa.h: nu_op_matvec and nu_op_matvec_fused against Q4_0_SOA weights (matvec_soa.c,
 * kernels/matvec/matvec_soa.glsl), called by src/ops/matvec.c. */
#ifndef NU_OPS_MATVEC_SOA_H
#define NU_OPS_MATVEC_SOA_H

#include "ops/op.h"

/* Records dst = glu(x' weight^T) + residual (nuvec/ops.h: nu_op_matvec_fused; desc NULL or zero:
 * nu_op_matvec) for a Q4_0_SOA weight. The caller has made nu_op_matvec's checks (dtypes, ranks,
 * shapes, m <= 8, dst contiguous and not overlapping weight or x) and returned for an empty dst
 * or k = 0; this checks desc's tensors (norm_weight [k] float, norm_eps > 0 and finite; glu_up
 * Q4_0_SOA of weight's shape; residual [m, n] float, dst's own view or not overlapping it) and
 * the knobs of NUVEC_MATVEC_SOA. */
nu_status nu__matvec_soa(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *weight,
                         const nu_tensor *x, const nu_matvec_desc *desc);

/* The knobs both matrix-vector hosts take (NUVEC_MATVEC in matvec.c, NUVEC_MATVEC_SOA here):
 * local=32..1024 (a power of two), rows=1..8, unroll=1..8, groups=0..65535, split=1..32 (a power
 * of two), dot=0|1 (into *dot: -1 for 1, 0 for 0). Returns 1 when key is one of them and value
 * is good (the field set), 0 when the value is bad, -1 for another key. Defined in matvec.c. */
int nu__matvec_knob(const char *key, const char *value, uint32_t *local, uint32_t *rows, uint32_t *unroll,
                    uint32_t *groups, uint32_t *split, int *dot);

#endif
