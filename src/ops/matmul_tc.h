/* matmul_tc.h: nu_op_matmul's path on the matrix units (cooperative matrices), src/ops/matmul_tc.c. */
#ifndef NU_OPS_MATMUL_TC_H
#define NU_OPS_MATMUL_TC_H

#include "nuvec/command.h"
#include "nuvec/ops.h"
#include "nuvec/tensor.h"

/* Records dst = a * b^T (+ bias) with kernels/matmul/matmul_coopmat.comp for operands nu_op_matmul
 * has already checked, with tune's tc_ fields (checked too), then NUVEC_MATMUL_TC over them; glu
 * (matmul_splits.comp's GLU code: 0 none, 1 SiLU, 2 GELU) nonzero: b's rows are [gate; up] and dst
 * takes the GLU of the product's halves (nu_matmul_desc.glu_stacked), through nu__matmul_sum.
 * Returns NU_ERROR_UNSUPPORTED, recording nothing and setting no error, where the device or the
 * operands do not suit that kernel, or tune.no_tensor_cores or NUVEC_MATMUL_TC=off asks (the
 * caller then takes the tiled path). */
nu_status nu__matmul_tensor_cores(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                                  const nu_tensor *bias, const nu_matmul_tune *tune, uint32_t glu);

/* Records kernels/matmul/matmul_splits.comp: dst ([m, n] or [batch, m, n] float, columns
 * contiguous) = the sum of `splits` F32 partial products in `part` (each part_split elements,
 * [batch, m, n] contiguous; [batch, m, 2n] with a GLU) in split order, + bias[j] where bias is
 * not NULL, then the GLU of code glu (as nu__matmul_tensor_cores). */
nu_status nu__matmul_sum(nu_commands *c, const nu_tensor *dst, nu_buffer *part, uint32_t splits, uint64_t part_split,
                         const nu_tensor *bias, uint32_t glu);

#endif
