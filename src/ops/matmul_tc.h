/* matmul_tc.h: nu_op_matmul's path on the matrix units (cooperative matrices), src/ops/matmul_tc.c. */
#ifndef NU_OPS_MATMUL_TC_H
#define NU_OPS_MATMUL_TC_H

#include "nuvec/command.h"
#include "nuvec/ops.h"
#include "nuvec/tensor.h"

/* Records dst = a * b^T (+ bias) with kernels/matmul/matmul_coopmat.comp for operands nu_op_matmul
 * has already checked, with tune's tc_ fields (checked too), then NUVEC_MATMUL_TC over them.
 * Returns NU_ERROR_UNSUPPORTED, recording nothing and setting no error, where the device or the
 * operands do not suit that kernel, or tune.no_tensor_cores or NUVEC_MATMUL_TC=off asks (the
 * caller then takes the tiled path). */
nu_status nu__matmul_tensor_cores(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                                  const nu_tensor *bias, const nu_matmul_tune *tune);

#endif
