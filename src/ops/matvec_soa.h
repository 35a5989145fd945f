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

#endif
